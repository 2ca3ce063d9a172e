# tdev oracle: initial cache (cmake -C) for configuring a PyTorch tree that lacks most of its
# bundled third_party code and has no CUDA math libraries, only to learn which sources go into
# which target. Options that pull in missing code are turned off; dependencies whose presence
# changes the source lists (NCCL, cuDNN, cuSPARSELt, cuDSS, gloo) are "found" as stubs so that
# their sources stay in. Nothing here is ever compiled or linked.
set(_stub "${CMAKE_CURRENT_LIST_DIR}/stubs")
macro(_opt name value)
  set(${name} ${value} CACHE STRING "tdev oracle" FORCE)
endmacro()

_opt(CMAKE_PROJECT_INCLUDE "${CMAKE_CURRENT_LIST_DIR}/record_targets.cmake")
_opt(CMAKE_BUILD_TYPE Release)
_opt(BUILD_TEST OFF)
_opt(BUILD_PYTHON ON)
_opt(TORCH_CUDA_ARCH_LIST "8.0")
_opt(BLAS Eigen)
_opt(USE_SYSTEM_EIGEN_INSTALL OFF)
# optional CPU back ends whose code is not in the tree; they add no CUDA sources
foreach(o USE_MKLDNN USE_FBGEMM USE_KINETO USE_NNPACK USE_XNNPACK USE_PYTORCH_QNNPACK USE_QNNPACK USE_NUMPY
          USE_MAGMA USE_MPI USE_TENSORPIPE USE_ITT USE_UCC USE_ROCM USE_XPU USE_MPS USE_VULKAN)
  _opt(${o} OFF)
endforeach()
# dependencies taken "from the system": only their find results are needed
foreach(o USE_SYSTEM_CPUINFO USE_SYSTEM_SLEEF USE_SYSTEM_GLOO USE_SYSTEM_PTHREADPOOL
          USE_SYSTEM_PSIMD USE_SYSTEM_FXDIV USE_SYSTEM_ONNX USE_SYSTEM_PYBIND11 USE_SYSTEM_NCCL
          USE_SYSTEM_NVTX)
  _opt(${o} ON)
endforeach()
_opt(USE_SYSTEM_FP16 OFF)
_opt(FP16_SOURCE_DIR "${_stub}/FP16")
_opt(BUILD_CUSTOM_PROTOBUF OFF)
_opt(Protobuf_DIR "${_stub}/packages/protobuf")
_opt(pybind11_DIR "${_stub}/packages/pybind11")
_opt(CPUINFO_LIBRARY "${_stub}/lib/libcpuinfo.so")
# 1.x names (harmless for 2.x): pthreadpool and gloo found by these; its QNNPACK is separate
_opt(PTHREADPOOL_LIBRARY "${_stub}/lib/libpthreadpool.so")
_opt(GLOO_LIBRARY "${_stub}/lib/libgloo.so")
_opt(SLEEF_LIBRARY "${_stub}/lib/libsleef.so")
_opt(ONNX_LIBRARY "${_stub}/lib/libonnx.so")
_opt(ONNX_PROTO_LIBRARY "${_stub}/lib/libonnx_proto.so")
_opt(Gloo_INCLUDE_DIR "${_stub}/include")
_opt(Gloo_NATIVE_LIBRARY "${_stub}/lib/libgloo.so")
_opt(Gloo_CUDA_LIBRARY "${_stub}/lib/libgloo_cuda.so")
# CUDA side (ignored by a CPU-only configure)
_opt(USE_DISTRIBUTED ON)
_opt(USE_NCCL ON)
_opt(NCCL_INCLUDE_DIRS "${_stub}/include")
_opt(NCCL_LIBRARIES "${_stub}/lib/libnccl.so")
_opt(USE_CUDNN ON)
_opt(CUDNN_INCLUDE_PATH "${_stub}/include")
_opt(CUDNN_LIBRARY_PATH "${_stub}/lib/libcudnn.so")
_opt(USE_CUSPARSELT ON)
_opt(CUSPARSELT_INCLUDE_PATH "${_stub}/include")
_opt(CUSPARSELT_LIBRARY_PATH "${_stub}/lib/libcusparseLt.so")
_opt(USE_CUDSS ON)
_opt(CUDSS_INCLUDE_PATH "${_stub}/include")
_opt(CUDSS_LIBRARY_PATH "${_stub}/lib/libcudss.so")
