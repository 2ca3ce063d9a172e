// torch.cuda._CUDAC: the CUDA part of torch._C as a module of its own (RFC-0045, "Project
// building optimization"). This file is the only hand-written code of the module: it does for
// the new module what PyTorch's torch/csrc/Module.cpp (initModule) does for CUDA on torch._C,
// in the same order, with the real bindings compiled from the extracted torch/csrc/cuda:
//
//   methods   THPUtils_addPyMethodDefs(methods, THCPModule_methods())   (torch/csrc/cuda/Module.cpp)
//   errors    py::register_exception_translator(... CATCH_TH_ERRORS ...)
//   bindings  torch::cuda::initModule(module)  (comm, _cudart, _nvtx, _cudnn, _cusparselt, _gds_*,
//             _CudaDeviceProperties, the pluggable allocator, ...)
//   classes   THCPStream_init, THCPEvent_init, THCPGraph_init, THCPMemPool_init
//
// torch._C is imported first: the stream and event classes derive from torch._C.Stream and
// torch._C.Event (THPStreamClass/THPEventClass live in libtorch_python and are shared).
#include <Python.h>

#include <pybind11/pybind11.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils.h>
#include <torch/csrc/utils/pybind.h>

#include <exception>
#include <vector>

void THCPStream_init(PyObject* module);
void THCPEvent_init(PyObject* module);
void THCPGraph_init(PyObject* module);
void THCPMemPool_init(PyObject* module);
PyMethodDef* THCPModule_methods();
namespace torch::cuda {
void initModule(PyObject* module);
}  // namespace torch::cuda

namespace {

std::vector<PyMethodDef> cudac_methods;

PyModuleDef cudac_def = {
    PyModuleDef_HEAD_INIT,
    "_CUDAC",  // importlib gives it its full name (torch.cuda._CUDAC) from the spec
    "The CUDA bindings of torch._C (torch/csrc/cuda), built and initialised on their own.",
    -1,
    nullptr,
};

PyObject* init_cudac() {
  THPObjectPtr torch_c(PyImport_ImportModule("torch._C"));
  if (!torch_c) {
    return nullptr;
  }
  HANDLE_TH_ERRORS
  THPUtils_addPyMethodDefs(cudac_methods, THCPModule_methods());
  cudac_methods.push_back({nullptr, nullptr, 0, nullptr});
  cudac_def.m_methods = cudac_methods.data();
  PyObject* module = PyModule_Create(&cudac_def);
  if (!module) {
    return nullptr;
  }
  // As torch/csrc/Module.cpp does for torch._C: C++ errors of pybind11 functions become the
  // Python exceptions torch raises (c10::IndexError -> IndexError, ...). Registered in the
  // pybind11 internals this module uses (see cudac.cmake: PYBIND11_INTERNALS).
  pybind11::register_exception_translator([](std::exception_ptr e) {
    try {
      if (e) {
        std::rethrow_exception(e);
      }
    }
    CATCH_TH_ERRORS()
  });
  torch::cuda::initModule(module);
  THCPStream_init(module);
  THCPEvent_init(module);
  THCPGraph_init(module);
  THCPMemPool_init(module);
  return module;
  END_HANDLE_TH_ERRORS
}

}  // namespace

PyMODINIT_FUNC PyInit__CUDAC() {
  return init_cudac();
}
