# The real torch.cuda._CUDAC of the standalone build (target set torch_python_cuda, wheel mode):
# the torch/csrc/cuda units libtorch_python compiles (torch_python_cuda_SRCS, from targets.yaml
# and the manifest), linked against THIS build's torch_cuda and c10_cuda and stage 1's
# libtorch_python, libtorch and libtorch_cpu, through tdev_add_cudac() (cudac/cudac.cmake, the
# overlay's cudac directory staged beside this file). Output: python/torch_cuda/ of the build
# (and of the install prefix): `import torch_cuda` registers it as torch.cuda._CUDAC.
#
# In a process whose torch is a CUDA build, the loader resolves libtorch_cuda.so/libc10_cuda.so
# to the copies torch loaded first (same SONAME): `tdev link-check` is what proves this build's
# libraries define what the module needs, not the import.
if(TDEV_LINK_STAGE1)
  find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
else()  # configured elsewhere (headers only): a machine without Python's headers still builds the rest
  find_package(Python3 COMPONENTS Interpreter Development.Module)
  if(NOT Python3_Development.Module_FOUND)
    message(WARNING "_CUDAC is not built: no Python development headers here (Python.h); "
            "pass -D Python3_EXECUTABLE=<a python with them>")
    return()
  endif()
endif()
include("${CMAKE_CURRENT_SOURCE_DIR}/cudac/cudac.cmake")

get_filename_component(_torch_dir "${TDEV_TORCH_LIB_DIR}" DIRECTORY)
tdev_cudac_stage1_cuda(_torch_cuda _internals "${_torch_dir}")

set(_libs "")
if(TDEV_LINK_STAGE1)
  foreach(_name torch_python torch)
    if(NOT EXISTS "${TDEV_TORCH_LIB_DIR}/lib${_name}.so")
      message(FATAL_ERROR "_CUDAC: stage 1 has no ${TDEV_TORCH_LIB_DIR}/lib${_name}.so")
    endif()
    list(APPEND _libs "${TDEV_TORCH_LIB_DIR}/lib${_name}.so")
  endforeach()
endif()
set(_defs USE_CUDA USE_DISTRIBUTED TORCH_CUDA_USE_NVTX3 FMT_HEADER_ONLY=1 USE_NCCL USE_C10D_NCCL
    ${TDEV_TORCH_CPU_DEFINES} ${TDEV_CPU_CAPABILITY_DEFINES})
if(AT_CUDNN_ENABLED)
  list(APPEND _defs USE_CUDNN)
endif()
if(AT_CUSPARSELT_ENABLED)
  list(APPEND _defs USE_CUSPARSELT)
endif()
# _cuda_getArchFlags(): "sm_80 sm_90" as the stock module answers (torch.cuda.get_arch_list()
# splits it); the unit stringizes the macro, so no comma may be in it
set(_arch "")
foreach(_a IN LISTS CMAKE_CUDA_ARCHITECTURES)
  string(REGEX REPLACE "-.*" "" _a "${_a}")
  string(APPEND _arch " sm_${_a}")
endforeach()
string(STRIP "${_arch}" _arch)

tdev_add_cudac(_CUDAC
  SOURCES ${torch_python_cuda_SRCS}
  TORCH_INCLUDE_DIRS ${TDEV_PATCHED_INCLUDE} "${CMAKE_BINARY_DIR}/aten-include"
                     ${TDEV_TORCH_INCLUDE_DIRS}
  PRIVATE_INCLUDE_DIRS "${TORCH_ROOT}" "${TORCH_ROOT}/aten/src" ${TDEV_CODEGEN_INCLUDE_DIRS}
                       ${TDEV_TREE_INCLUDE_DIRS}
  CUDA_INCLUDE_DIRS ${TDEV_CUDA_LIB_INCLUDE_DIRS} ${CUDAToolkit_INCLUDE_DIRS}
  LINK_LIBRARIES ${_libs} torch_cuda c10_cuda stage1::torch_cpu stage1::c10 tdev::cuda_libs
                 CUDA::cudart
  DEFINITIONS ${_defs}
  PYBIND11_INTERNALS ${_internals}
  CXX11_ABI ${TDEV_TORCH_CXX11_ABI}
  ARCH_FLAGS "${_arch}"
  OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/python/torch_cuda")
configure_file("${CMAKE_CURRENT_SOURCE_DIR}/cudac/python/torch_cuda/__init__.py"
               "${CMAKE_BINARY_DIR}/python/torch_cuda/__init__.py" COPYONLY)
install(TARGETS _CUDAC LIBRARY DESTINATION python/torch_cuda)
install(FILES "${CMAKE_BINARY_DIR}/python/torch_cuda/__init__.py" DESTINATION python/torch_cuda)
set(TDEV_CUDAC_INSTALLED ON)
