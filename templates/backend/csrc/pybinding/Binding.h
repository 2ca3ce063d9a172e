// What the CPython bindings of the package's _C share (Module.cpp, Collectives.cpp): C++
// exceptions become Python errors, int arguments, releasing the GIL.
// Copied by tdev scaffold as it is: a plain source; the package's names come from runtime/Config.h.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <exception>

#include "runtime/Config.h"

namespace BACKEND_NS::binding {

// Runs f; a C++ exception becomes a Python RuntimeError (torch.OutOfMemoryError is raised by
// torch's own wrappers, which these functions never call into for allocation).
template <class F>
PyObject* guarded(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, BACKEND_PACKAGE ": unknown C++ exception");
  }
  return nullptr;
}

inline int arg_int(PyObject* o, bool* ok) {
  const long v = PyLong_AsLong(o);
  *ok = !(v == -1 && PyErr_Occurred());
  return static_cast<int>(v);
}

#define INT_ARG(name, obj)                 \
  bool name##_ok = true;                   \
  const int name = arg_int(obj, &name##_ok); \
  if (!name##_ok) return nullptr;

// Releases the GIL while the device works (exception-safe, unlike Py_BEGIN_ALLOW_THREADS).
struct WithoutGil {
  PyThreadState* state = PyEval_SaveThread();
  ~WithoutGil() { PyEval_RestoreThread(state); }
};

#if BACKEND_NATIVE_COLLECTIVES
// Adds the collective library's functions (coll_*) to the module; 0 on success.
int add_collectives(PyObject* module);
#endif

}  // namespace BACKEND_NS::binding
