// The device's timeline in torch.profiler: a kineto child activity profiler (the interface
// torch's kineto headers declare, libkineto::IActivityProfiler), registered when the package
// loads. While a trace runs with device activities (kernels, memcpy), every Span (DeviceTrace.h)
// is recorded: start and end on the host clock, device, stream, and the correlation id of the
// operator that ran it. At the end of the trace the records become kineto activities on the
// device's rows (CONCURRENT_KERNEL "<device>::<op>", GPU_MEMCPY "Memcpy HtoD (<device>)", ...),
// each linked to its operator, so key_averages() gives the operators device time and
// export_chrome_trace() shows the kernels and copies on a device timeline, as for CUDA.
// Copied by tdev scaffold as it is: a plain source.
#include "runtime/DeviceTrace.h"

#include "runtime/Api.h"
#include "runtime/TorchCompat.h"

#if BACKEND_HOST_DEVICE_TIMES
#include <kineto/libkineto.h>
#include <kineto/output_base.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/Runtime.h"
#endif

namespace BACKEND_NS::trace {
#if BACKEND_HOST_DEVICE_TIMES

std::atomic<bool> g_recording{false};

namespace {

using libkineto::ActivityType;

// one trace holds at most this many records; later ones are counted and reported as dropped
constexpr std::size_t kMaxRecords = std::size_t{1} << 20;

struct Record {
  Kind kind;
  c10::DeviceIndex device;
  std::int64_t stream;
  const char* name;
  const char* overload;
  std::int64_t correlation;
  std::int64_t start_ns;
  std::int64_t end_ns;
};

std::mutex g_mutex;
std::vector<Record> g_records;  // guarded by g_mutex
std::size_t g_dropped = 0;      // guarded by g_mutex
// what the running trace records (set before g_recording)
std::atomic<bool> g_kernels{false}, g_copies{false};

// the operators running on this thread, innermost last (kineto pushes and pops their ids)
thread_local std::vector<std::uint64_t> t_correlation;
thread_local int t_open_spans = 0;

std::int64_t now_ns() noexcept {
  // the clock kineto's and torch's own events are on: nanoseconds since the epoch
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool is_copy(Kind kind) { return kind != Kind::Kernel; }

// torch.profiler asked for the device without asking kineto for its activities: it profiles a
// PrivateUse1 device in its fallback mode where its kineto does not list PrivateUse1 (wheels
// built with CUPTI), and before 2.7 that mode gives a renamed backend's operators no device time
bool profiled_in_fallback_mode() {
#if BACKEND_TRACE_IN_PRIVATEUSE1_FALLBACK
  using torch::profiler::impl::ProfilerStateBase;
  const ProfilerStateBase* state = ProfilerStateBase::get(/*global=*/false);
  return state != nullptr &&
         state->config().state == torch::profiler::impl::ProfilerState::KINETO_PRIVATEUSE1_FALLBACK;
#else
  return false;
#endif
}

std::string activity_name(const Record& r) {
  switch (r.kind) {
    case Kind::CopyHostToDevice: return "Memcpy HtoD (" BACKEND_DEVICE ")";
    case Kind::CopyDeviceToHost: return "Memcpy DtoH (" BACKEND_DEVICE ")";
    case Kind::CopyDeviceToDevice: return "Memcpy DtoD (" BACKEND_DEVICE ")";
    case Kind::Kernel: break;
  }
  std::string name = r.name != nullptr ? r.name : "kernel";
  if (name.rfind("aten::", 0) == 0) name.erase(0, 6);
  if (r.overload != nullptr && *r.overload != '\0') name += std::string(".") + r.overload;
  return BACKEND_DEVICE "::" + name;
}

class Session final : public libkineto::IActivityProfilerSession {
 public:
  Session(bool kernels, bool copies) : kernels_(kernels), copies_(copies) {}
  ~Session() override { stop(); }

  void start() override {
    const bool fallback = profiled_in_fallback_mode();  // torch's state on the starting thread
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records.clear();
    g_dropped = 0;
    g_kernels.store(kernels_ || fallback);
    g_copies.store(copies_ || fallback);
    started_ = kernels_ || copies_ || fallback;
    if (started_) g_recording.store(true);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (!started_) return;
    g_recording.store(false);
    std::lock_guard<std::mutex> lock(g_mutex);
    records_.swap(g_records);
    g_records.clear();
    g_records.shrink_to_fit();
    dropped_ = g_dropped;
    started_ = false;
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override {
    if (dropped_ == 0) return {};
    return {BACKEND_DEVICE ": " + std::to_string(dropped_) +
            " device activities dropped (at most " + std::to_string(kMaxRecords) + " a trace)"};
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked, std::int64_t,
                    std::int64_t) override {
    if (processed_) return;  // each record is one activity of the trace
    processed_ = true;
    if (!buffer_) buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->gpuOpCount = 0;
    for (const Record& r : records_) {
      auto a = std::make_unique<libkineto::GenericTraceActivity>(
          buffer_->span,
          is_copy(r.kind) ? ActivityType::GPU_MEMCPY : ActivityType::CONCURRENT_KERNEL,
          activity_name(r));
      a->startTime = r.start_ns;
      a->endTime = r.end_ns;
      a->id = static_cast<std::int32_t>(r.correlation);
      a->device = r.device;
      a->resource = static_cast<std::int32_t>(r.stream);
      a->threadId = static_cast<std::int32_t>(r.stream);
      a->linked = (linked && r.correlation != 0)
                      ? linked(static_cast<std::int32_t>(r.correlation))
                      : nullptr;
      logger.handleGenericActivity(*a);  // the logger keeps a pointer: the buffer owns it
      buffer_->activities.push_back(std::move(a));
      ++buffer_->gpuOpCount;
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    if (records_.empty()) return nullptr;
    const c10::DeviceIndex d = records_.front().device;
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
        d, d, std::string(BACKEND_DEVICE " ") + std::to_string(d), BACKEND_DEVICE});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::set<std::pair<int, std::int64_t>> seen;
    for (const Record& r : records_) seen.emplace(r.device, r.stream);
    std::vector<libkineto::ResourceInfo> infos;
    for (const auto& [device, stream] : seen) {
      infos.push_back(backend_resource_info<libkineto::ResourceInfo>(
          device, stream, stream, "stream " + std::to_string(stream)));
    }
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    if (!buffer_) buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    return std::move(buffer_);  // the trace keeps the activities the logger points to
  }

  void pushCorrelationId(std::uint64_t id) override { t_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
  }

 private:
  const bool kernels_, copies_;
  bool started_ = false, processed_ = false;
  std::vector<Record> records_;
  std::size_t dropped_ = 0;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class Profiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config&) override {
    return std::make_unique<Session>(types.count(ActivityType::CONCURRENT_KERNEL) > 0,
                                     types.count(ActivityType::GPU_MEMCPY) > 0);
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      std::int64_t, std::int64_t, const std::set<ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  const std::string name_ = BACKEND_PACKAGE;
  const std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL,
                                           ActivityType::GPU_MEMCPY};
};

struct RegisterProfiler {
  RegisterProfiler() {
    // added now when kineto is initialised, else when torch initialises it (its first trace)
    libkineto::api().registerProfilerFactory(
        [] { return std::unique_ptr<libkineto::IActivityProfiler>(new Profiler()); });
  }
};
const RegisterProfiler register_profiler;

}  // namespace

std::size_t held() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_records.size();
}

void Span::open(Kind kind, const char* name, const char* overload, c10::DeviceIndex device) {
  if (t_open_spans > 0) return;  // part of an outer kernel or copy
  if (!(kind == Kind::Kernel ? g_kernels : g_copies).load(std::memory_order_relaxed)) return;
  ++t_open_spans;
  open_ = true;
  kind_ = kind;
  name_ = name;
  overload_ = overload;
  device_ = device;
  correlation_ = t_correlation.empty() ? 0 : static_cast<std::int64_t>(t_correlation.back());
  start_ns_ = now_ns();
}

void Span::end() noexcept {
  const std::int64_t end_ns = now_ns();
  open_ = false;
  --t_open_spans;
  try {
    const c10::DeviceIndex device = device_ >= 0 ? device_ : current_device();
    const Record r{kind_,    device,       current_stream(device).id(), name_, overload_,
                   correlation_, start_ns_, end_ns};
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_recording.load(std::memory_order_relaxed)) return;  // the trace stopped meanwhile
    if (g_records.size() < kMaxRecords) {
      g_records.push_back(r);
    } else {
      ++g_dropped;
    }
  } catch (...) {
    // a span never throws from a destructor: the activity is left out
  }
}

#else

std::size_t held() { return 0; }
void Span::open(Kind, const char*, const char*, c10::DeviceIndex) {}
void Span::end() noexcept {}

#endif
}  // namespace BACKEND_NS::trace

namespace BACKEND_NS::api {
std::size_t device_trace_held() { return trace::held(); }
bool device_trace_recording() { return trace::recording(); }
}  // namespace BACKEND_NS::api
