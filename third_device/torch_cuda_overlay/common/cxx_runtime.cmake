# The C++ runtime the standalone libraries link: the shared libstdc++, the one libtorch_cpu and
# the rest of the process use. A library with a private copy (libstdc++ linked statically, by
# -static-libstdc++ or by a compiler that ships only libstdc++.a) keeps its own std::string
# storage, exception and call_once state: exported, its call_once internals shadow the process's
# (cuDNN's first cudnnCreate runs a stale callable and crashes); hidden, an object made by one
# copy and freed by the other aborts the process ("free(): invalid pointer").
#
# Checked at configure time by linking a one-line shared library with this project's compiler
# and link flags. TORCH_CUDA_LIBSTDCXX=<path to libstdc++.so.6> links that shared libstdc++
# ahead of the compiler's own (for a compiler that has only the static one).
# What a static archive brings into a library stays inside it: its symbols are not exported.
add_link_options("LINKER:--exclude-libs,ALL")

set(TORCH_CUDA_LIBSTDCXX "" CACHE FILEPATH
    "a shared libstdc++ to link the libraries against (for a compiler that has only libstdc++.a)")
if(TORCH_CUDA_LIBSTDCXX)
  if(NOT EXISTS "${TORCH_CUDA_LIBSTDCXX}" OR IS_DIRECTORY "${TORCH_CUDA_LIBSTDCXX}")
    message(FATAL_ERROR "TORCH_CUDA_LIBSTDCXX=${TORCH_CUDA_LIBSTDCXX}: no such file "
            "(give the path of a shared libstdc++, e.g. /usr/lib/x86_64-linux-gnu/libstdc++.so.6)")
  endif()
  link_libraries("${TORCH_CUDA_LIBSTDCXX}")
endif()

function(tdev_check_cxx_runtime)
  if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux" OR NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang"
     OR NOT CMAKE_READELF)
    return()
  endif()
  set(dir "${CMAKE_BINARY_DIR}/CMakeFiles/tdev_cxx_runtime")
  file(MAKE_DIRECTORY "${dir}")
  file(WRITE "${dir}/probe.cpp" "#include <string>\nstd::string tdev_probe(const char* s) { return std::string(s) + s; }\n")
  separate_arguments(flags UNIX_COMMAND
                     "${CMAKE_CXX_FLAGS} ${CMAKE_SHARED_LINKER_FLAGS} ${CMAKE_MODULE_LINKER_FLAGS}")
  execute_process(COMMAND "${CMAKE_CXX_COMPILER}" ${flags} -shared -fPIC "${dir}/probe.cpp"
                          ${TORCH_CUDA_LIBSTDCXX} -o "${dir}/libprobe.so"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the C++ compiler ${CMAKE_CXX_COMPILER} cannot link a shared library "
            "(${dir}/probe.cpp): ${out}")
  endif()
  execute_process(COMMAND "${CMAKE_READELF}" -d "${dir}/libprobe.so" OUTPUT_VARIABLE dyn)
  if(NOT dyn MATCHES "NEEDED[^\n]*libstdc\\+\\+|NEEDED[^\n]*libc\\+\\+")
    message(FATAL_ERROR "${CMAKE_CXX_COMPILER} links libstdc++ statically (-static-libstdc++, "
            "or a compiler with only libstdc++.a): the libraries would carry a private C++ "
            "runtime that breaks inside torch's process; drop the flag, or pass "
            "-D TORCH_CUDA_LIBSTDCXX=<path of a shared libstdc++.so.6>")
  endif()
endfunction()
tdev_check_cxx_runtime()
