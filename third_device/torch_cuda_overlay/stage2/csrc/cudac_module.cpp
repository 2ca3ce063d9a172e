// _CUDAC: the Python module of the standalone torch_cuda build (RFC "Project building
// optimization": a CUDA module that is built and initialised on its own). It links the
// c10_cuda and c10 built from the extracted sources, never the torch wheel's libraries.
// Function names follow torch._C's CUDA bindings (torch/csrc/cuda/Module.cpp) where they exist.
#include <pybind11/pybind11.h>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include <cuda.h>  // CUresult and friends only: libcuda is reached through cudart, never linked

#include "cudac_kernels.h"

// The c10 API differs between PyTorch releases; stage2/CMakeLists.txt probes the staged c10
// and defines TDEV_C10_* (1 where this release has the feature). The statistics are read
// through the type getDeviceStats returns, whichever namespace defines it.

#if TDEV_C10_SET_PRIMARY_CONTEXT
// Defined (and exported) in c10/cuda/CUDAFunctions.cpp, declared in no header: ATen's CUDAHooks
// registers the real check this way; _CUDAC stands in for ATen here.
namespace c10::cuda::_internal {
C10_CUDA_API void setHasPrimaryContext(bool (*func)(c10::DeviceIndex));
}  // namespace c10::cuda::_internal
#endif

namespace py = pybind11;
namespace alloc = c10::cuda::CUDACachingAllocator;
using DeviceStats = decltype(alloc::getDeviceStats(0));

namespace {

void python_warning(PyObject* category, const std::string& msg) {
  py::gil_scoped_acquire gil;
  if (PyErr_WarnEx(category, msg.c_str(), 1) != 0) {
    PyErr_Clear();  // a warning filter of "error" cannot unwind through C++
  }
}

// c10 warnings (TORCH_WARN) become Python warnings instead of lines on stderr.
class PythonWarningHandler : public c10::WarningHandler {
 public:
#if TDEV_C10_WARNING_CLASS
  void process(const c10::Warning& warning) override {
    python_warning(std::holds_alternative<c10::DeprecationWarning>(warning.type())
                       ? PyExc_DeprecationWarning : PyExc_UserWarning,
                   warning.msg());
  }
#else  // before the Warning class (1.x): location, message, verbatim
  void process(const c10::SourceLocation&, const std::string& msg, const bool) override {
    python_warning(PyExc_UserWarning, msg);
  }
#endif
};
PythonWarningHandler warning_handler;

void install_warning_handler() {
#if TDEV_C10_WARNING_CLASS
  c10::WarningUtils::set_warning_handler(&warning_handler);
#else
  c10::Warning::set_warning_handler(&warning_handler);
#endif
}

// Statistics some releases' DeviceStats have and others do not (requested_bytes since 2.0,
// num_sync_all_streams and num_device_alloc/free later): reported only where they exist, as
// torch._C._cuda_memoryStats of the same release does.
#define TDEV_OPTIONAL_FIELD(field)                                                   \
  template <typename T, typename = void>                                             \
  struct has_##field : std::false_type {};                                           \
  template <typename T>                                                              \
  struct has_##field<T, std::void_t<decltype(std::declval<const T&>().field)>>       \
      : std::true_type {};
TDEV_OPTIONAL_FIELD(num_sync_all_streams)
TDEV_OPTIONAL_FIELD(num_device_alloc)
TDEV_OPTIONAL_FIELD(num_device_free)
TDEV_OPTIONAL_FIELD(requested_bytes)
#undef TDEV_OPTIONAL_FIELD

std::once_flag allocator_once;

// Like torch.cuda._lazy_init: the caching allocator learns the device count once.
void lazy_init() {
  std::call_once(allocator_once, [] { alloc::init(c10::cuda::device_count()); });
}

c10::DeviceIndex check_device(int64_t device) {
  const auto count = c10::cuda::device_count();
  TORCH_CHECK(device >= 0 && device < count, "invalid CUDA device ", device, " (",
              static_cast<int>(count), " device(s) present)");
  return static_cast<c10::DeviceIndex>(device);
}

template <typename Stat>
py::dict stat_dict(const Stat& s) {
  py::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["allocated"] = s.allocated;
  d["freed"] = s.freed;
  return d;
}

template <typename StatArray>
py::dict stat_array_dict(const StatArray& a) {
  static const std::array<const char*, 3> names = {"all", "small_pool", "large_pool"};
  py::dict d;
  for (size_t i = 0; i < names.size(); ++i) {
    d[names[i]] = stat_dict(a[i]);
  }
  return d;
}

// The same nested dict as torch._C._cuda_memoryStats of the release.
template <typename S>
py::dict stats_dict(const S& s) {
  py::dict r;
  r["num_alloc_retries"] = s.num_alloc_retries;
  r["num_ooms"] = s.num_ooms;
  r["max_split_size"] = s.max_split_size;
  if constexpr (has_num_sync_all_streams<S>::value) r["num_sync_all_streams"] = s.num_sync_all_streams;
  if constexpr (has_num_device_alloc<S>::value) r["num_device_alloc"] = s.num_device_alloc;
  if constexpr (has_num_device_free<S>::value) r["num_device_free"] = s.num_device_free;
  r["allocation"] = stat_array_dict(s.allocation);
  r["segment"] = stat_array_dict(s.segment);
  r["active"] = stat_array_dict(s.active);
  r["inactive_split"] = stat_array_dict(s.inactive_split);
  r["allocated_bytes"] = stat_array_dict(s.allocated_bytes);
  r["reserved_bytes"] = stat_array_dict(s.reserved_bytes);
  r["active_bytes"] = stat_array_dict(s.active_bytes);
  r["inactive_split_bytes"] = stat_array_dict(s.inactive_split_bytes);
  if constexpr (has_requested_bytes<S>::value) r["requested_bytes"] = stat_array_dict(s.requested_bytes);
  r["oversize_allocations"] = stat_dict(s.oversize_allocations);
  r["oversize_segments"] = stat_dict(s.oversize_segments);
  return r;
}

// What ATen's CUDAHooks registers (aten/src/ATen/cuda/detail/CUDAHooks.cpp): whether a
// device's primary context is active, via the driver's cuDevicePrimaryCtxGetState, looked up
// through the runtime so that importing _CUDAC never needs libcuda (no driver, no device).
bool has_primary_context(c10::DeviceIndex device) {
  TORCH_CHECK(device >= 0 && device < c10::cuda::device_count(),
              "hasPrimaryContext expects a valid device index, but got ", static_cast<int>(device));
  using GetState = CUresult (*)(CUdevice, unsigned int*, int*);
  static GetState get_state = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000,
                                                    cudaEnableDefault, &found));
#else
    C10_CUDA_CHECK(cudaGetDriverEntryPoint("cuDevicePrimaryCtxGetState", &fn,
                                           cudaEnableDefault, &found));
#endif
    TORCH_CHECK(fn && found == cudaDriverEntryPointSuccess,
                "the CUDA driver has no cuDevicePrimaryCtxGetState");
    return reinterpret_cast<GetState>(fn);
  }();
  unsigned int flags = 0;
  int active = 0;  // ATen: garbage-looking values unless zeroed
  const CUresult err = get_state(static_cast<CUdevice>(device), &flags, &active);
  TORCH_CHECK(err == CUDA_SUCCESS, "cuDevicePrimaryCtxGetState failed with CUresult ",
              static_cast<int>(err));
  return active == 1;
}

cudaStream_t as_stream(uint64_t handle) {
  return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(handle));
}

uint64_t as_handle(const c10::cuda::CUDAStream& s) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(s.stream()));
}

}  // namespace

PYBIND11_MODULE(_CUDAC, m) {
  m.doc() = "CUDA bindings of the standalone torch_cuda build (c10_cuda from the extraction)";
  install_warning_handler();
#if TDEV_C10_SET_PRIMARY_CONTEXT
  c10::cuda::_internal::setHasPrimaryContext(&has_primary_context);
#endif
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
  m.attr("__torch_version__") = TDEV_TORCH_VERSION;
  m.attr("__cuda_runtime_version__") = CUDART_VERSION;

  m.def("_cuda_init", &lazy_init, "initialise the caching allocator for every device");
  m.def("_cuda_hasPrimaryContext", [](int64_t device) {
    return has_primary_context(check_device(device));  // what c10 asks through the hook
  });
  m.def("_cuda_getDeviceCount", [] { return static_cast<int>(c10::cuda::device_count()); });
  m.def("_cuda_getDriverVersion", [] {
    int v = 0;
    C10_CUDA_IGNORE_ERROR(cudaDriverGetVersion(&v));
    return v;
  });
  m.def("_cuda_getDeviceProperties", [](int64_t device) {
    cudaDeviceProp p{};
    C10_CUDA_CHECK(cudaGetDeviceProperties(&p, check_device(device)));
    py::dict d;
    d["name"] = std::string(p.name);
    d["major"] = p.major;
    d["minor"] = p.minor;
    d["total_memory"] = static_cast<uint64_t>(p.totalGlobalMem);
    d["multi_processor_count"] = p.multiProcessorCount;
    return d;
  });
  m.def("_cuda_getCurrentRawStream", [](int64_t device) {
    return as_handle(c10::cuda::getCurrentCUDAStream(check_device(device)));
  });
  m.def("_cuda_getStreamFromPool", [](int64_t device, bool high_priority) {
    return as_handle(c10::cuda::getStreamFromPool(high_priority, check_device(device)));
  }, py::arg("device"), py::arg("high_priority") = false);
  m.def("_cuda_synchronize", [] {
    py::gil_scoped_release no_gil;
    c10::cuda::device_synchronize();
  });
  m.def("_cuda_streamSynchronize", [](uint64_t stream) {
    py::gil_scoped_release no_gil;
    C10_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream)));
  });

  // --- the extracted CUDACachingAllocator --------------------------------------------------
  m.def("_cuda_getAllocatorBackend", [] {
    lazy_init();
#if TDEV_C10_ALLOCATOR_NAME
    return alloc::name();
#else
    return std::string("native");  // releases before PYTORCH_CUDA_ALLOC_CONF's backend:
#endif
  });
  m.def("_cuda_memoryStats", [](int64_t device) {
    lazy_init();
    return stats_dict(alloc::getDeviceStats(check_device(device)));
  });
  m.def("_cuda_memoryStatsTemplate", [] { return stats_dict(DeviceStats{}); },
        "the statistics dict of a device before its first allocation (all zeros)");
  m.def("_cuda_resetPeakMemoryStats", [](int64_t device) {
    lazy_init();
    alloc::resetPeakStats(check_device(device));
  });
  m.def("_cuda_emptyCache", [] { lazy_init(); alloc::emptyCache(); });
  m.def("_cuda_cachingAllocator_raw_alloc", [](size_t nbytes, uint64_t stream) {
    lazy_init();
    return reinterpret_cast<uintptr_t>(alloc::raw_alloc_with_stream(nbytes, as_stream(stream)));
  }, py::arg("size"), py::arg("cuda_stream"));
  m.def("_cuda_cachingAllocator_raw_delete", [](uintptr_t ptr) {
    alloc::raw_delete(reinterpret_cast<void*>(ptr));
  });

  // --- trivial kernels for smoke tests -----------------------------------------------------
  py::module_ smoke = m.def_submodule("_smoke", "tiny kernels to check launches on a stream");
  smoke.def("fill", [](uintptr_t ptr, int64_t n, float value, uint64_t stream) {
    C10_CUDA_CHECK(tdev_smoke::fill(reinterpret_cast<float*>(ptr), n, value, as_stream(stream)));
  });
  smoke.def("sum", [](uintptr_t ptr, int64_t n, uint64_t stream) {
    py::gil_scoped_release no_gil;
    double total = 0;
    C10_CUDA_CHECK(tdev_smoke::sum(reinterpret_cast<const float*>(ptr), n, as_stream(stream),
                                   &total));
    return total;
  });
}
