// The device's profiler stubs: what torch.profiler / torch.autograd.profiler call for the
// PrivateUse1 device. An operator's device time is the time between two timing events recorded
// on the current stream at its start and end; without these stubs every operator logs
// "PrivateUse1 used in profiler but not enabled" and its device time is garbage.
// Copied by tdev scaffold as it is: a plain source; the package's names come from runtime/Config.h.
#include "runtime/Config.h"

#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <functional>
#include <memory>

#include "runtime/Runtime.h"

namespace BACKEND_NS {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

class ProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = current_device();
    if (device != nullptr) *device = index;
    void* handle = nullptr;
    // the CPU time is taken right before the record, as the CUDA stubs do
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
    event_record(&handle, current_stream(index), index, /*timing=*/true);
    *event = std::shared_ptr<void>(handle, [index](void* e) { event_destroy(e, index); });
  }

  float elapsed(const ProfilerVoidEventStub* start,
                const ProfilerVoidEventStub* end) const override {
    event_synchronize(start->get());
    event_synchronize(end->get());
    // the profiler wants microseconds; never negative (clock granularity)
    const double ms = event_elapsed_ms(start->get(), end->get(), current_device());
    return ms > 0.0 ? static_cast<float>(ms * 1000.0) : 0.0f;
  }

  // no vendor range markers (NVTX-like) here
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}

  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      DeviceScope scope(d);
      op(d);
    }
  }

  void synchronize() const override {
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) device_synchronize(d);
  }
};

struct RegisterProfilerStubs {
  RegisterProfilerStubs() {
    static ProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
const RegisterProfilerStubs register_profiler_stubs;

}  // namespace
}  // namespace BACKEND_NS
