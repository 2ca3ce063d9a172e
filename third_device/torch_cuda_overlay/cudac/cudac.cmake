# tdev_add_cudac(): the real torch.cuda._CUDAC as a CMake target, for any build that has the
# parts (the standalone project next to this file, or the standalone torch_cuda build's stage 2).
#
#   tdev_add_cudac(<target>
#     SOURCES <files>               the torch/csrc/cuda units libtorch_python compiles
#                                   (tdev.standalone.cudac: sources.yaml matched against the manifest)
#     TORCH_INCLUDE_DIRS <dirs>     stage 1's headers, searched first (torch/include,
#                                   torch/include/torch/csrc/api/include; pybind11 is there too)
#     PRIVATE_INCLUDE_DIRS <dirs>   the extraction's headers by original path, AFTER stage 1's
#     CUDA_INCLUDE_DIRS <dirs>      the CUDA headers the libtorch_cuda linked was compiled with
#                                   (their structs, e.g. cudaDeviceProp, cross the boundary)
#     LINK_LIBRARIES <libs>         torch_python torch_cpu torch_cuda c10 c10_cuda cudart cudnn ...
#     DEFINITIONS <defs>            USE_CUDA USE_CUDNN USE_NCCL ... (as the stock build)
#     PYBIND11_INTERNALS own|torch  own: a pybind11 registry of its own (stage 1 is a CUDA build
#                                   whose torch._C registered the same types); torch: torch._C's
#     CXX11_ABI 0|1                 stage 1's _GLIBCXX_USE_CXX11_ABI
#     ARCH_FLAGS <string>           what _cuda_getArchFlags() answers (the kernels' archs)
#     OUTPUT_DIRECTORY <dir>)       where _CUDAC<SOABI>.so is written
#
# Needs Python3 (Development.Module) found by the caller, with the stage-1 interpreter.
set(TDEV_CUDAC_DIR "${CMAKE_CURRENT_LIST_DIR}")

# tdev_cudac_stage1_cuda(<cuda_var> <internals_var> <torch_dir>): the CUDA version stage 1 was
# built with (torch/version.py's `cuda`, "" for a CPU build) and the PYBIND11_INTERNALS that
# goes with it: own for a CUDA build (its torch._C registered the same pybind11 types), torch
# for a CPU build (share torch._C's registry).
function(tdev_cudac_stage1_cuda cuda_var internals_var torch_dir)
  file(STRINGS "${torch_dir}/version.py" _cuda_line REGEX "^cuda *[:=]")
  string(REGEX MATCH "'([0-9.]+)'" _is_cuda "${_cuda_line}")
  set(${cuda_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  if(_is_cuda)
    set(${internals_var} own PARENT_SCOPE)
  else()
    set(${internals_var} torch PARENT_SCOPE)
  endif()
endfunction()

function(tdev_add_cudac target)
  cmake_parse_arguments(PARSE_ARGV 1 A "" "PYBIND11_INTERNALS;CXX11_ABI;ARCH_FLAGS;OUTPUT_DIRECTORY"
    "SOURCES;TORCH_INCLUDE_DIRS;PRIVATE_INCLUDE_DIRS;CUDA_INCLUDE_DIRS;LINK_LIBRARIES;DEFINITIONS")
  if(NOT A_SOURCES)
    message(FATAL_ERROR "tdev_add_cudac(${target}): no SOURCES (the torch/csrc/cuda units)")
  endif()
  if(NOT A_PYBIND11_INTERNALS MATCHES "^(own|torch)$")
    message(FATAL_ERROR "tdev_add_cudac(${target}): PYBIND11_INTERNALS is '${A_PYBIND11_INTERNALS}'"
            ", not own or torch")
  endif()
  Python3_add_library(${target} MODULE WITH_SOABI "${TDEV_CUDAC_DIR}/init_cudac.cpp" ${A_SOURCES})
  target_include_directories(${target} PRIVATE ${A_TORCH_INCLUDE_DIRS} ${A_PRIVATE_INCLUDE_DIRS}
                             ${A_CUDA_INCLUDE_DIRS})
  # pybind11's registry id (detail/internals.h): torch's own build and its cpp_extension pin the
  # platform part to _gcc/_libstdcpp/_cxxabi1011, whatever gcc compiles (gcc 12 alone would say
  # _cxxabi1017 and get a registry of its own by accident). 'own' adds a kind of its own, so the
  # types torch._C registered (_CudaDeviceProperties, _CUDAGraph, _MemPool, ...) are registered
  # again, here, without the "already registered" error; 'torch' shares torch._C's registry.
  set(_pybind11 PYBIND11_COMPILER_TYPE="_gcc" PYBIND11_STDLIB="_libstdcpp"
      PYBIND11_BUILD_ABI="_cxxabi1011")
  if(A_PYBIND11_INTERNALS STREQUAL "own")
    list(APPEND _pybind11 PYBIND11_INTERNALS_KIND="_tdev_cudac")
  endif()
  if(NOT DEFINED A_CXX11_ABI)
    set(A_CXX11_ABI 0)
  endif()
  target_compile_definitions(${target} PRIVATE ${A_DEFINITIONS} ${_pybind11}
                             _GLIBCXX_USE_CXX11_ABI=${A_CXX11_ABI})
  if(A_ARCH_FLAGS)  # Module.cpp only, as torch/CMakeLists.txt; the unit stringizes the macro
    set(_module ${A_SOURCES})
    list(FILTER _module INCLUDE REGEX "/cuda/Module\\.cpp$")
    set_source_files_properties(${_module} TARGET_DIRECTORY ${target} PROPERTIES
                                COMPILE_DEFINITIONS "CUDA_ARCH_FLAGS=${A_ARCH_FLAGS}")
  endif()
  # -fabi-version=11: the mangling the stock libraries were built with (torch.__config__);
  # cudart.cpp binds the deprecated profiler API, as torch/CMakeLists.txt allows.
  target_compile_options(${target} PRIVATE -fabi-version=11 -Wno-deprecated-declarations)
  target_compile_features(${target} PRIVATE cxx_std_17)
  # Only PyInit__CUDAC exported (cudac.version): the module's globals (THCPStreamClass, ...)
  # are its own even where stage 1 exports the same names. (No -z defs: a Python extension
  # leaves the interpreter's symbols undefined; Python's dlopen is RTLD_NOW, so the import is
  # the closure check.)
  target_link_options(${target} PRIVATE "LINKER:--version-script=${TDEV_CUDAC_DIR}/cudac.version")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${TDEV_CUDAC_DIR}/cudac.version")
  target_link_libraries(${target} PRIVATE ${A_LINK_LIBRARIES} Python3::Module)
  set_target_properties(${target} PROPERTIES OUTPUT_NAME _CUDAC PREFIX ""
                        CXX_VISIBILITY_PRESET hidden
                        LIBRARY_OUTPUT_DIRECTORY "${A_OUTPUT_DIRECTORY}")
endfunction()
