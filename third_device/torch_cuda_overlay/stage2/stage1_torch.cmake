# Stage 1 from the installed torch of the extraction's release (the "wheel mode", chosen by
# wrapped-cmake when a selected set says `stage1: torch` in targets.yaml): its headers, libc10
# and libtorch_cpu stand in for a stage 1 built from source. sources.cmake passes where they
# are (TDEV_TORCH_*); TDEV_PATCHED_INCLUDE holds the headers the patch series changed, searched
# before the wheel's own copies of them. TDEV_LINK_STAGE1 OFF (-D TORCH_LINK_STAGE1=OFF) links
# the shared libraries without the wheel's and the nvidia-* .so files (a machine that has the
# headers only); `tdev link-check` judges their closure then.
add_compile_definitions(_GLIBCXX_USE_CXX11_ABI=${TDEV_TORCH_CXX11_ABI})

file(MAKE_DIRECTORY "${TDEV_PATCHED_INCLUDE}")  # empty when no patch changed a header
add_library(stage1::c10 INTERFACE IMPORTED)
set_property(TARGET stage1::c10 PROPERTY INTERFACE_INCLUDE_DIRECTORIES
             ${TDEV_PATCHED_INCLUDE} ${TDEV_TORCH_INCLUDE_DIRS})
# not -isystem (an imported target's default): system directories are searched after every
# -I, which would put the staged extraction and the tree before the wheel and the patched headers
set_property(TARGET stage1::c10 PROPERTY SYSTEM FALSE)
add_library(stage1::torch_cpu INTERFACE IMPORTED)
set_property(TARGET stage1::torch_cpu PROPERTY INTERFACE_LINK_LIBRARIES stage1::c10)
add_library(tdev::cuda_libs INTERFACE IMPORTED)
set_property(TARGET tdev::cuda_libs PROPERTY INTERFACE_INCLUDE_DIRECTORIES
             ${TDEV_CUDA_LIB_INCLUDE_DIRS})
if(TDEV_LINK_STAGE1)
  foreach(_lib c10 torch_cpu)
    if(NOT EXISTS "${TDEV_TORCH_LIB_DIR}/lib${_lib}.so")
      message(FATAL_ERROR "stage 1: ${TDEV_TORCH_LIB_DIR}/lib${_lib}.so is missing; pass "
              "-D TORCH_LINK_STAGE1=OFF to link without the installed torch's libraries")
    endif()
  endforeach()
  set_property(TARGET stage1::c10 APPEND PROPERTY INTERFACE_LINK_LIBRARIES
               "${TDEV_TORCH_LIB_DIR}/libc10.so")
  set_property(TARGET stage1::torch_cpu APPEND PROPERTY INTERFACE_LINK_LIBRARIES
               "${TDEV_TORCH_LIB_DIR}/libtorch_cpu.so")
  set_property(TARGET tdev::cuda_libs PROPERTY INTERFACE_LINK_LIBRARIES ${TDEV_CUDA_LIB_LIBRARIES})
  # the installed libraries are found at run time where they are (never copied)
  set(_rpath "${TDEV_TORCH_LIB_DIR}")
  foreach(_l IN LISTS TDEV_CUDA_LIB_LIBRARIES)
    get_filename_component(_d "${_l}" DIRECTORY)
    list(APPEND _rpath "${_d}")
  endforeach()
  list(REMOVE_DUPLICATES _rpath)
  list(APPEND CMAKE_BUILD_RPATH ${_rpath})
  list(APPEND CMAKE_INSTALL_RPATH ${_rpath})
endif()
set(c10_TORCH_VERSION "${TORCH_VERSION}")  # the release was checked against the wheel's
