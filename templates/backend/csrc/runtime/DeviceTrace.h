// The device's timeline for torch.profiler: each kernel and copy the device runs is timed while a
// trace records (torch.profiler.profile with ProfilerActivity.PrivateUse1) and handed to kineto
// as a device activity (DeviceTrace.cpp), linked to the operator that ran it, as CUDA's kernels
// are. Where the device's kernels and copies complete on the calling thread
// (BACKEND_HOST_DEVICE_TIMES, runtime/Config.h), the host clock times them; elsewhere a Span
// records nothing and kineto reports the device's operators without device time.
// When no trace records, a Span costs one relaxed atomic load.
// Copied by tdev scaffold as it is: a plain source.
#pragma once

#include <c10/core/Device.h>
#include <c10/macros/Macros.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/Config.h"

namespace BACKEND_NS::trace {

enum class Kind : std::uint8_t { Kernel, CopyHostToDevice, CopyDeviceToHost, CopyDeviceToDevice };

#if BACKEND_HOST_DEVICE_TIMES
extern std::atomic<bool> g_recording;
inline bool recording() noexcept { return g_recording.load(std::memory_order_relaxed); }
#else
constexpr bool recording() noexcept { return false; }
#endif

// Records held for the running trace (0 when none runs: nothing accumulates untraced).
std::size_t held();

// Times one kernel or copy on `device` (-1: the current one) from begin() to its destruction.
// Only the outermost span of a thread records: a fallback's own copies are part of its kernel.
// `name`/`overload` must outlive the span (an operator's schema, a literal).
class Span {
 public:
  Span() = default;
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  ~Span() {
    if (C10_UNLIKELY(open_)) end();
  }
  void begin(Kind kind, const char* name, const char* overload, c10::DeviceIndex device) {
    if (C10_UNLIKELY(recording())) open(kind, name, overload, device);
  }

 private:
  void open(Kind kind, const char* name, const char* overload, c10::DeviceIndex device);
  void end() noexcept;

  bool open_ = false;
  Kind kind_ = Kind::Kernel;
  c10::DeviceIndex device_ = -1;
  const char* name_ = nullptr;
  const char* overload_ = nullptr;
  std::int64_t correlation_ = 0;
  std::int64_t start_ns_ = 0;
};

}  // namespace BACKEND_NS::trace
