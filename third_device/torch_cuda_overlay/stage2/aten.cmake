# libtorch_cuda (target sets aten_cuda, aten_native_cuda, aten_transformers_cuda and
# torch_cuda_framework) as caffe2/CMakeLists.txt and cmake/ of the release build it: one shared
# library `torch_cuda` of the selected sets' units and the units torchgen generated
# (TDEV_GENERATED_SRCS), compiled
# against the wheel's headers (stage1_torch.cmake), then the staged extraction (private ATen
# headers the wheel does not ship), the nvidia-* packages' headers and the local toolkit.
set(_aten_srcs ${aten_cuda_SRCS} ${aten_native_cuda_SRCS} ${aten_transformers_cuda_SRCS}
    ${torch_cuda_framework_SRCS} ${TDEV_GENERATED_SRCS})
# ATen/cuda/nvrtc_stub is a library of its own, as in the stock build (caffe2_nvrtc: NVRTC and
# the driver API behind one table; torch_cuda dlopens it lazily, so torch_cuda needs no libcuda)
set(_nvrtc_stub ${_aten_srcs})
list(FILTER _nvrtc_stub INCLUDE REGEX "/nvrtc_stub/ATenNVRTC\\.cpp$")
list(FILTER _aten_srcs EXCLUDE REGEX "/nvrtc_stub/ATenNVRTC\\.cpp$")
add_library(torch_cuda SHARED ${_aten_srcs})

# ATen/cuda/CUDAConfig.h from the extraction's template, with this build's settings (the
# wheel's copy says cuDNN, cuSPARSELt and MAGMA are there), searched before the wheel's
set(NVCC_FLAGS_EXTRA "")
configure_file("${TORCH_ROOT}/aten/src/ATen/cuda/CUDAConfig.h.in"
               "${CMAKE_BINARY_DIR}/aten-include/ATen/cuda/CUDAConfig.h")
target_include_directories(torch_cuda BEFORE PRIVATE
  ${TDEV_PATCHED_INCLUDE} "${CMAKE_BINARY_DIR}/aten-include" ${TDEV_TORCH_INCLUDE_DIRS}
  "${TORCH_ROOT}/aten/src" "${TORCH_ROOT}" ${TDEV_CODEGEN_INCLUDE_DIRS} ${TDEV_TREE_INCLUDE_DIRS})
target_include_directories(torch_cuda SYSTEM PRIVATE ${TDEV_CUDA_LIB_INCLUDE_DIRS})

# the stock definitions (caffe2/CMakeLists.txt, cmake/Codegen.cmake, cmake/Dependencies.cmake)
target_compile_definitions(torch_cuda PRIVATE TORCH_CUDA_BUILD_MAIN_LIB AT_PER_OPERATOR_HEADERS
  USE_CUDA TORCH_CUDA_USE_NVTX3 USE_C10D_NCCL USE_NCCL USE_DISTRIBUTED FMT_HEADER_ONLY=1
  HAVE_MALLOC_USABLE_SIZE=1 HAVE_MMAP=1 HAVE_SHM_OPEN=1 HAVE_SHM_UNLINK=1 _FILE_OFFSET_BITS=64
  ${TDEV_FEATURE_DEFINES} ${TDEV_TORCH_CPU_DEFINES})
# torch_cpu's CPU capabilities (HAVE_AVX2_CPU_DEFINITION, ...: the stock CMAKE_CXX_FLAGS; C++
# units calling a DispatchStub must pass as many kernel pointers as torch_cpu takes)
foreach(_cap IN LISTS TDEV_CPU_CAPABILITY_DEFINES)
  target_compile_definitions(torch_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${_cap}>)
endforeach()
# torch/csrc's units that call the driver API through c10/cuda/driver_api.h (as the stock list)
set(_driver_api ${torch_cuda_framework_SRCS})
list(FILTER _driver_api INCLUDE REGEX
     "/c10d/(intra_node_comm\\.cpp|CudaDMAConnectivity\\.cpp|CUDASymmetricMemory\\.cu|CUDASymmetricMemoryOps\\.cu|ProcessGroupNCCL\\.cpp)$")
if(_driver_api)
  set_source_files_properties(${_driver_api} PROPERTIES COMPILE_DEFINITIONS
                              PYTORCH_C10_DRIVER_API_SUPPORTED=1)
endif()
set(_cuda_flags -DCUDA_HAS_FP16=1 -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__
  -D__CUDA_NO_HALF2_OPERATORS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__
  -DCUB_WRAPPED_NAMESPACE=at_cuda_detail --expt-relaxed-constexpr --expt-extended-lambda
  -Wno-deprecated-gpu-targets "SHELL:-Xfatbin -compress-all"
  "SHELL:-Xcudafe --diag_suppress=cc_clobber_ignored,--diag_suppress=bad_friend_decl")
target_compile_options(torch_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${_cuda_flags}>
  $<$<COMPILE_LANGUAGE:CXX>:-fvisibility=hidden -O2>)
set_target_properties(torch_cuda PROPERTIES CXX_STANDARD 17 CUDA_STANDARD 17)
# cudnn-frontend 1.8.0 against CUDA 13's runtime API: see compat/cudnn_frontend_cuda13.h
if(AT_CUDNN_ENABLED AND CUDAToolkit_VERSION_MAJOR GREATER_EQUAL 13)
  set(_fe_units ${_aten_srcs})
  list(FILTER _fe_units INCLUDE REGEX "/native/(quantized/)?cudnn/[^/]*\\.cpp$")
  set_source_files_properties(${_fe_units} PROPERTIES COMPILE_OPTIONS
    "-include;${CMAKE_CURRENT_SOURCE_DIR}/compat/cudnn_frontend_cuda13.h")
endif()
target_link_libraries(torch_cuda PRIVATE c10_cuda stage1::torch_cpu stage1::c10 tdev::cuda_libs
                      CUDA::cudart ${CMAKE_DL_LIBS})
if(TDEV_LINK_STAGE1 AND TDEV_LINK_Z_DEFS)
  target_link_options(torch_cuda PRIVATE "LINKER:-z,defs")
endif()
install(TARGETS torch_cuda LIBRARY DESTINATION lib)


if(_nvrtc_stub)
  add_library(caffe2_nvrtc SHARED ${_nvrtc_stub})
  target_include_directories(caffe2_nvrtc PRIVATE ${TDEV_PATCHED_INCLUDE} ${TDEV_TORCH_INCLUDE_DIRS}
                             "${TORCH_ROOT}/aten/src" "${TORCH_ROOT}")
  target_include_directories(caffe2_nvrtc SYSTEM PRIVATE ${TDEV_NVRTC_INCLUDE_DIRS}
                             ${CUDAToolkit_INCLUDE_DIRS})
  if(TDEV_LINK_STAGE1)
    target_link_libraries(caffe2_nvrtc PRIVATE ${TDEV_NVRTC_LIBRARIES})
  endif()
  if(TARGET CUDA::cuda_driver)  # the driver's libcuda (or the toolkit's stub), where there is one
    target_link_libraries(caffe2_nvrtc PRIVATE CUDA::cuda_driver)
  else()
    message(STATUS "caffe2_nvrtc: no libcuda here (no driver, no stub): linked without it")
  endif()
  install(TARGETS caffe2_nvrtc LIBRARY DESTINATION lib)
  add_dependencies(torch_cuda caffe2_nvrtc)  # built with it (loaded by it at run time)
endif()
