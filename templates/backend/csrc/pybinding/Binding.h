// What the CPython bindings of the package's _C share (Module.cpp, Collectives.cpp): C++
// exceptions become Python errors, int arguments, releasing the GIL.
// Copied by tdev scaffold as it is: a plain source; the package's names come from runtime/Config.h.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cxxabi.h>

#include <climits>
#include <exception>

#include "runtime/Config.h"

namespace BACKEND_NS::binding {

// Runs f; a C++ exception becomes a Python RuntimeError (torch.OutOfMemoryError is raised by
// torch's own wrappers, which these functions never call into for allocation). The unwinding
// that ends a thread (abi::__forced_unwind, below) passes through.
template <class F>
PyObject* guarded(F&& f) {
  try {
    return f();
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, BACKEND_PACKAGE ": unknown C++ exception");
  }
  return nullptr;
}

// An int argument (a device index); a value outside C int's range is an OverflowError, never
// truncated to another device.
inline int arg_int(PyObject* o, bool* ok) {
  const long long v = PyLong_AsLongLong(o);
  *ok = !(v == -1 && PyErr_Occurred());
  if (*ok && (v < INT_MIN || v > INT_MAX)) {
    PyErr_Format(PyExc_OverflowError, BACKEND_PACKAGE ": device index %lld out of range", v);
    *ok = false;
  }
  return static_cast<int>(v);
}

#define INT_ARG(name, obj)                 \
  bool name##_ok = true;                   \
  const int name = arg_int(obj, &name##_ok); \
  if (!name##_ok) return nullptr;

// Releases the GIL while the device works (exception-safe, unlike Py_BEGIN_ALLOW_THREADS).
// A thread that takes the GIL back while the interpreter is finalizing is ended by Python
// (pthread_exit: a forced unwind); the destructor is noexcept(false) so that the unwind passes
// through it instead of calling std::terminate ("terminate called without an active exception"
// at exit).
struct WithoutGil {
  PyThreadState* state = PyEval_SaveThread();
  ~WithoutGil() noexcept(false) { PyEval_RestoreThread(state); }
};

#if BACKEND_NATIVE_COLLECTIVES
// Adds the collective library's functions (coll_*) to the module; 0 on success.
int add_collectives(PyObject* module);
#endif

}  // namespace BACKEND_NS::binding
