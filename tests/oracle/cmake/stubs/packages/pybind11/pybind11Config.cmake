# tdev oracle stub: pybind11 "found" (header-only; only its include dir is used).
set(pybind11_FOUND TRUE)
set(pybind11_INCLUDE_DIRS "${CMAKE_CURRENT_LIST_DIR}")
