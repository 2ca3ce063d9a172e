// simrt streams and events: each stream is a worker thread running its queue in order; events
// carry versions (a record queues "version N reached", a wait queues "block until N") and the
// time they were reached.
#include <algorithm>

#include "sim_internal.h"

namespace simrt {
namespace {

void run_worker(simStream_st* s) {
  std::unique_lock<std::mutex> lock(s->m);
  for (;;) {
    s->work.wait(lock, [s] { return s->stop || !s->tasks.empty(); });
    if (s->tasks.empty()) return;  // stop requested and drained
    auto task = std::move(s->tasks.front());
    s->tasks.pop_front();
    lock.unlock();
    task();
    lock.lock();
    ++s->completed;
    s->done.notify_all();
  }
}

}  // namespace

simStream_st* new_stream(int device) {
  auto* s = new simStream_st();
  s->device = device;
  s->worker = std::thread(run_worker, s);
  return s;
}

void submit(simStream_st* s, std::function<void()> task) {
  std::lock_guard<std::mutex> lock(s->m);
  s->tasks.push_back(std::move(task));
  ++s->submitted;
  s->work.notify_one();
}

void drain(simStream_st* s) {
  std::unique_lock<std::mutex> lock(s->m);
  const uint64_t target = s->submitted;
  s->done.wait(lock, [s, target] { return s->completed >= target; });
}

simStream_st* resolve(simStream_t stream) {
  if (stream != nullptr) return stream;
  Device* d = current();
  return materialize(d) ? d->default_stream : nullptr;
}


void sync_device(Device* d) {
  if (live(d)) drain(d->default_stream);
  std::vector<simStream_st*> streams;
  {
    std::lock_guard<std::mutex> lock(d->m);
    streams = d->streams;
  }
  for (simStream_st* s : streams) drain(s);
}

}  // namespace simrt

using namespace simrt;

extern "C" {

simError_t simStreamCreate(simStream_t* stream) {
  if (!ready()) return simErrorNotInitialized;
  Device* d = current();
  simStream_st* s = new_stream(d->index);
  std::lock_guard<std::mutex> lock(d->m);
  d->streams.push_back(s);
  *stream = s;
  return simSuccess;
}

simError_t simStreamDestroy(simStream_t stream) {
  if (!ready() || stream == nullptr) return simErrorInvalidValue;
  Device* d = (*g_devices)[stream->device];
  {
    std::lock_guard<std::mutex> lock(d->m);
    d->streams.erase(std::remove(d->streams.begin(), d->streams.end(), stream), d->streams.end());
  }
  {
    std::lock_guard<std::mutex> lock(stream->m);
    stream->stop = true;
    stream->work.notify_one();
  }
  stream->worker.join();
  delete stream;
  return simSuccess;
}

simError_t simStreamSynchronize(simStream_t stream) {
  if (!ready()) return simErrorNotInitialized;
  simStream_st* s = resolve(stream);
  if (s == nullptr) return simErrorMemoryAllocation;
  drain(s);
  return simSuccess;
}

simError_t simStreamQuery(simStream_t stream, simStatus* status) {
  if (!ready()) return simErrorNotInitialized;
  simStream_st* s = resolve(stream);
  if (s == nullptr) return simErrorMemoryAllocation;
  std::lock_guard<std::mutex> lock(s->m);
  *status = s->completed >= s->submitted ? SIM_STATUS_COMPLETE : SIM_STATUS_NOT_READY;
  return simSuccess;
}

simError_t simStreamWaitEvent(simStream_t stream, simEvent_t event) {
  if (!ready() || event == nullptr) return simErrorInvalidValue;
  std::shared_ptr<EventState> e = event->state;
  uint64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(e->m);
    version = e->recorded;  // wait for the record made before this call, if any
  }
  if (version == 0) return simSuccess;
  simStream_st* s = resolve(stream);
  if (s == nullptr) return simErrorMemoryAllocation;
  submit(s, [e, version] {
    std::unique_lock<std::mutex> lock(e->m);
    e->cv.wait(lock, [&e, version] { return e->completed >= version; });
  });
  return simSuccess;
}

simError_t simEventCreate(simEvent_t* event, uint32_t flags) {
  if (!ready()) return simErrorNotInitialized;
  auto* e = new simEvent_st();
  e->state->timing = (flags & SIM_EVENT_TIMING) != 0;
  *event = e;
  return simSuccess;
}

simError_t simEventDestroy(simEvent_t event) {
  if (event == nullptr) return simErrorInvalidValue;
  delete event;
  return simSuccess;
}

simError_t simEventRecord(simEvent_t event, simStream_t stream) {
  if (!ready() || event == nullptr) return simErrorInvalidValue;
  simStream_st* s = resolve(stream);
  if (s == nullptr) return simErrorMemoryAllocation;
  std::shared_ptr<EventState> e = event->state;
  uint64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(e->m);
    version = ++e->recorded;
  }
  submit(s, [e, version] {
    std::lock_guard<std::mutex> lock(e->m);
    e->completed = std::max(e->completed, version);
    e->when = std::chrono::steady_clock::now();
    e->cv.notify_all();
  });
  return simSuccess;
}

simError_t simEventSynchronize(simEvent_t event) {
  if (event == nullptr) return simErrorInvalidValue;
  EventState* e = event->state.get();
  std::unique_lock<std::mutex> lock(e->m);
  const uint64_t version = e->recorded;
  e->cv.wait(lock, [e, version] { return e->completed >= version; });
  return simSuccess;
}

simError_t simEventQuery(simEvent_t event, simStatus* status) {
  if (event == nullptr) return simErrorInvalidValue;
  EventState* e = event->state.get();
  std::lock_guard<std::mutex> lock(e->m);
  *status = e->completed >= e->recorded ? SIM_STATUS_COMPLETE : SIM_STATUS_NOT_READY;
  return simSuccess;
}

simError_t simEventElapsedTime(float* ms, simEvent_t start_event, simEvent_t end_event) {
  if (start_event == nullptr || end_event == nullptr) return simErrorInvalidValue;
  EventState* start = start_event->state.get();
  EventState* end = end_event->state.get();
  if (!start->timing || !end->timing) return simErrorInvalidValue;
  std::unique_lock<std::mutex> a(start->m, std::defer_lock);
  std::unique_lock<std::mutex> b(end->m, std::defer_lock);
  if (start == end) {
    a.lock();
  } else {
    std::lock(a, b);
  }
  if (start->recorded == 0 || end->recorded == 0) return simErrorInvalidValue;
  if (start->completed < start->recorded || end->completed < end->recorded) {
    return simErrorNotReady;
  }
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return simSuccess;
}

simError_t simDeviceSynchronize(void) {
  if (!ready()) return simErrorNotInitialized;
  sync_device(current());
  return simSuccess;
}
const char* simGetErrorString(simError_t error) {
  switch (error) {
    case simSuccess: return "no error";
    case simErrorInvalidValue: return "invalid value (a pointer outside device memory, a copy larger than its destination, ...)";
    case simErrorMemoryAllocation: return "out of device memory";
    case simErrorInvalidDevice: return "invalid device ordinal";
    case simErrorRepeatInitialize: return "simInit called twice";
    case simErrorNotInitialized: return "simInit has not been called";
    case simErrorNotReady: return "work not completed yet";
    default: return "unknown simrt error";
  }
}

}  // extern "C"
