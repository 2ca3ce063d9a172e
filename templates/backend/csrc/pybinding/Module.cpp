// The package's _C: the Python binding. It uses the CPython API and runtime/Api.h only (no torch
// headers, no pybind11), so it compiles in a second; loading the module also loads the runtime
// and registers the device (hooks, guard, allocator, operators) through static initialisers.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <exception>
#include <string>

#include "pybinding/Binding.h"
#include "runtime/Api.h"
#include "runtime/Fork.h"

namespace api = BACKEND_NS::api;
using namespace BACKEND_NS::binding;

namespace {

PyObject* device_count(PyObject*, PyObject*) {
  return guarded([] { return PyLong_FromLong(api::device_count()); });
}

PyObject* current_device(PyObject*, PyObject*) {
  return guarded([] { return PyLong_FromLong(api::current_device()); });
}

PyObject* set_device(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] {
    api::set_device(device);
    Py_RETURN_NONE;
  });
}

PyObject* exchange_device(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] { return PyLong_FromLong(api::exchange_device(device)); });
}

PyObject* synchronize(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] {
    BACKEND_NS::check_not_forked();
    {
      WithoutGil released;
      api::synchronize(device);
    }
    Py_RETURN_NONE;
  });
}

PyObject* in_bad_fork(PyObject*, PyObject*) { return PyBool_FromLong(BACKEND_NS::in_bad_fork()); }

PyObject* check_fork(PyObject*, PyObject*) {
  return guarded([] {
    BACKEND_NS::check_fork();
    Py_RETURN_NONE;
  });
}

PyObject* check_device(PyObject*, PyObject* arg) {
  const long long device = PyLong_AsLongLong(arg);
  if (device == -1 && PyErr_Occurred()) return nullptr;
  return guarded([&] {
    api::check_device(device);
    Py_RETURN_NONE;
  });
}

PyObject* runtime_initialized(PyObject*, PyObject*) {
  return PyBool_FromLong(api::runtime_initialized());
}

PyObject* current_stream(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] {
    const api::StreamRef s = api::current_stream(device);
    return Py_BuildValue("(LLL)", static_cast<long long>(s.stream_id),
                         static_cast<long long>(s.device_index),
                         static_cast<long long>(s.device_type));
  });
}

PyObject* set_stream(PyObject*, PyObject* args) {
  long long stream_id = 0;
  int device = 0;
  if (!PyArg_ParseTuple(args, "Li", &stream_id, &device)) return nullptr;
  return guarded([&] {
    api::set_stream(stream_id, device);
    Py_RETURN_NONE;
  });
}

PyObject* memory_stats(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&]() -> PyObject* {
    PyObject* d = PyDict_New();
    if (d == nullptr) return nullptr;
    for (const auto& [key, value] : api::memory_stats(device)) {
      PyObject* v = PyLong_FromLongLong(value);
      if (v == nullptr || PyDict_SetItemString(d, key.c_str(), v) != 0) {
        Py_XDECREF(v);
        Py_DECREF(d);
        return nullptr;
      }
      Py_DECREF(v);
    }
    return d;
  });
}

PyObject* reset_peak_memory_stats(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] {
    api::reset_peak_memory_stats(device);
    Py_RETURN_NONE;
  });
}

PyObject* reset_accumulated_memory_stats(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] {
    api::reset_accumulated_memory_stats(device);
    Py_RETURN_NONE;
  });
}

PyObject* empty_cache(PyObject*, PyObject*) {
  return guarded([] {
    api::empty_cache();
    Py_RETURN_NONE;
  });
}

PyObject* mem_get_info(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] {
    const auto [free_bytes, total] = api::mem_get_info(device);
    return Py_BuildValue("(KK)", static_cast<unsigned long long>(free_bytes),
                         static_cast<unsigned long long>(total));
  });
}

PyObject* is_pinned(PyObject*, PyObject* arg) {
  const unsigned long long ptr = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
  return guarded([&] { return PyBool_FromLong(api::is_pinned(static_cast<uintptr_t>(ptr))); });
}

PyObject* host_address(PyObject*, PyObject* arg) {
  const unsigned long long ptr = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
  return guarded([&] {
    return PyLong_FromUnsignedLongLong(api::host_address(static_cast<std::uintptr_t>(ptr)));
  });
}

PyObject* seal_storage(PyObject*, PyObject* arg) {
  const unsigned long long impl = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
  return guarded([&] {
    api::seal_storage(static_cast<std::uintptr_t>(impl));
    Py_RETURN_NONE;
  });
}

PyObject* manual_seed(PyObject*, PyObject* args) {
  int device = 0;
  unsigned long long seed = 0;
  if (!PyArg_ParseTuple(args, "iK", &device, &seed)) return nullptr;
  return guarded([&] {
    api::manual_seed(device, seed);
    Py_RETURN_NONE;
  });
}

PyObject* seed(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] { return PyLong_FromUnsignedLongLong(api::seed(device)); });
}

PyObject* initial_seed(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] { return PyLong_FromUnsignedLongLong(api::initial_seed(device)); });
}

PyObject* get_rng_state(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] {
    const std::string s = api::get_rng_state(device);
    return PyBytes_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
  });
}

PyObject* set_rng_state(PyObject*, PyObject* args) {
  int device = 0;
  const char* data = nullptr;
  Py_ssize_t size = 0;
  if (!PyArg_ParseTuple(args, "iy#", &device, &data, &size)) return nullptr;
  return guarded([&] {
    api::set_rng_state(device, std::string(data, static_cast<std::size_t>(size)));
    Py_RETURN_NONE;
  });
}

PyObject* get_offset(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] { return PyLong_FromUnsignedLongLong(api::get_offset(device)); });
}

PyObject* set_offset(PyObject*, PyObject* args) {
  int device = 0;
  PyObject* value = nullptr;
  if (!PyArg_ParseTuple(args, "iO!", &device, &PyLong_Type, &value)) return nullptr;
  // a count below 2**64: a negative or larger int is refused, never taken modulo 2**64
  const unsigned long long offset = PyLong_AsUnsignedLongLong(value);
  if (offset == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_RuntimeError, "%s: generator offset %S is out of range (a count of "
                 "numbers drawn: 0 to 2**64-1)", BACKEND_DEVICE, value);
    return nullptr;
  }
  return guarded([&] {
    api::set_offset(device, offset);
    Py_RETURN_NONE;
  });
}

PyObject* route(PyObject*, PyObject* args) {
  const char* op = nullptr;
  const char* backend = nullptr;
  if (!PyArg_ParseTuple(args, "ss", &op, &backend)) return nullptr;
  return guarded([&] {
    api::route(op, backend);
    Py_RETURN_NONE;
  });
}

PyObject* unroute(PyObject*, PyObject* arg) {
  const char* op = PyUnicode_AsUTF8(arg);
  if (op == nullptr) return nullptr;
  return guarded([&] {
    api::unroute(op);
    Py_RETURN_NONE;
  });
}

PyObject* implicit_vendor_ops(PyObject*, PyObject*) {
  return guarded([]() -> PyObject* {
    const std::vector<std::string> ops = api::implicit_vendor_ops();
    PyObject* list = PyList_New(static_cast<Py_ssize_t>(ops.size()));
    if (list == nullptr) return nullptr;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      PyObject* s = PyUnicode_FromString(ops[i].c_str());
      if (s == nullptr) {
        Py_DECREF(list);
        return nullptr;
      }
      PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), s);
    }
    return list;
  });
}

PyObject* native_stream(PyObject*, PyObject* arg) {
  INT_ARG(device, arg);
  return guarded([&] {
    return PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(api::native_stream(device)));
  });
}

PyObject* set_log_dispatch(PyObject*, PyObject* arg) {
  const int on = PyObject_IsTrue(arg);
  if (on < 0) return nullptr;
  return guarded([&] {
    api::set_log_dispatch(on != 0);
    Py_RETURN_NONE;
  });
}

PyObject* device_trace(PyObject*, PyObject*) {
  return Py_BuildValue("(On)", api::device_trace_recording() ? Py_True : Py_False,
                       static_cast<Py_ssize_t>(api::device_trace_held()));
}

PyMethodDef methods[] = {
    {"device_count", device_count, METH_NOARGS, "number of devices"},
    {"current_device", current_device, METH_NOARGS, "this thread's device"},
    {"set_device", set_device, METH_O, "set this thread's device"},
    {"exchange_device", exchange_device, METH_O, "set the device, return the previous one"},
    {"synchronize", synchronize, METH_O, "wait for all work on a device (-1: current)"},
    {"in_bad_fork", in_bad_fork, METH_NOARGS, "forked after the parent used the device"},
    {"check_fork", check_fork, METH_NOARGS, "raise the fork error in a bad fork child"},
    {"check_device", check_device, METH_O, "raise unless the index names a device"},
    {"runtime_initialized", runtime_initialized, METH_NOARGS,
     "whether this process has initialised the vendor runtime"},
    {"current_stream", current_stream, METH_O, "(stream_id, device_index, device_type)"},
    {"set_stream", set_stream, METH_VARARGS, "make (stream_id, device) current"},
    {"memory_stats", memory_stats, METH_O, "caching allocator statistics"},
    {"reset_peak_memory_stats", reset_peak_memory_stats, METH_O, ""},
    {"reset_accumulated_memory_stats", reset_accumulated_memory_stats, METH_O, ""},
    {"empty_cache", empty_cache, METH_NOARGS, "return cached device memory to the runtime"},
    {"mem_get_info", mem_get_info, METH_O, "(free, total) bytes"},
    {"is_pinned", is_pinned, METH_O, "whether an address is in pinned host memory"},
    {"seal_storage", seal_storage, METH_O, "make a device storage non-resizable (torch.load)"},
    {"host_address", host_address, METH_O,
     "the host's address of device memory (0: the runtime gives the host no view of it)"},
    {"manual_seed", manual_seed, METH_VARARGS, "seed a device's default generator"},
    {"seed", seed, METH_O, "seed a device's default generator non-deterministically"},
    {"initial_seed", initial_seed, METH_O, ""},
    {"get_offset", get_offset, METH_O, "numbers drawn since seeding (default generator)"},
    {"set_offset", set_offset, METH_VARARGS, "resume the seed's sequence at an offset"},
    {"get_rng_state", get_rng_state, METH_O, "generator state as bytes"},
    {"set_rng_state", set_rng_state, METH_VARARGS, ""},
    {"route", route, METH_VARARGS, "register a C++ kernel (vendor, cpu) for an operator"},
    {"unroute", unroute, METH_O, "remove an operator's C++ route (back to the fallback)"},
    {"implicit_vendor_ops", implicit_vendor_ops, METH_NOARGS,
     "operators routed to the vendor by the profile's fallback, not by backends.conf"},
    {"native_stream", native_stream, METH_O, "the current stream's runtime handle (0: default)"},
    {"set_log_dispatch", set_log_dispatch, METH_O, "print each routed dispatch"},
    {"device_trace", device_trace, METH_NOARGS,
     "(recording, records held) of torch.profiler's device timeline"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", BACKEND_PACKAGE " runtime binding", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__C() {
  PyObject* m = PyModule_Create(&module);
#if BACKEND_NATIVE_COLLECTIVES
  if (m != nullptr && BACKEND_NS::binding::add_collectives(m) != 0) {
    Py_DECREF(m);
    return nullptr;
  }
#endif
  return m;
}
