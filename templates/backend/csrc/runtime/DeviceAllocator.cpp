// Caching device allocator with statistics (torch.cuda's counters), over the HAL:
// blocks cached per (device, stream, rounded size), reused on other streams only after events
// recorded there have passed (recordStream), the cache freed and the allocation retried once
// before an OutOfMemoryError.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "runtime/Api.h"
#include "runtime/Runtime.h"
#include "runtime/TorchCompat.h"

namespace BACKEND_NS {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::Stat;
using c10::CachingDeviceAllocator::StatArray;
using c10::CachingDeviceAllocator::StatType;
using MempoolId = std::pair<unsigned long long, unsigned long long>;  // c10::MempoolId_t

constexpr size_t kSmallSize = 1 << 20;  // requests below 1 MiB come from the small pool
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = 2 << 20;

size_t round_size(size_t n) {
  const size_t unit = n < kSmallSize ? kSmallRound : kLargeRound;
  return (n + unit - 1) / unit * unit;
}

struct Block {
  void* ptr = nullptr;
  size_t size = 0;       // bytes reserved from the device (rounded)
  size_t requested = 0;  // bytes asked for
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0;             // allocated on this stream; reused only there
  std::set<c10::StreamId> uses;         // other streams that used it (recordStream)
  std::vector<hal::Event> pending;      // events to pass before it can be reused
  bool small() const { return size < kSmallSize; }
};

void count(StatArray& stat, const Block& b, int64_t amount) {
  const auto pool = static_cast<size_t>(b.small() ? StatType::SMALL_POOL : StatType::LARGE_POOL);
  for (size_t i : {static_cast<size_t>(StatType::AGGREGATE), pool}) {
    if (amount >= 0) {
      stat[i].increase(static_cast<size_t>(amount));
    } else {
      stat[i].decrease(static_cast<size_t>(-amount));
    }
  }
}

template <class F>
void for_each_stat(DeviceStats& st, F f) {
  for (auto* array : {&st.allocation, &st.segment, &st.active, &st.inactive_split,
                      &st.allocated_bytes, &st.reserved_bytes, &st.active_bytes,
                      &st.inactive_split_bytes, &st.requested_bytes}) {
    for (auto& s : *array) f(s);
  }
}

void raw_delete(void* ptr);

class DeviceCachingAllocator final : public BACKEND_DEVICE_ALLOCATOR_BASE {
 public:
  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex device = current_device();
    const c10::Device where(kDeviceType, device);
    if (n == 0) return c10::DataPtr(nullptr, where);
    const c10::StreamId stream = current_stream(device).id();
    std::lock_guard<std::mutex> lock(mutex_);
    collect_pending();
    const size_t size = round_size(n);
    DeviceStats& st = stats_[device];
    Block* b = take_cached(device, stream, size);
    if (b == nullptr) {
      void* p = hal::malloc(size);
      if (p == nullptr) {  // free what the cache holds on this device, then try once more
        ++st.num_alloc_retries;
        release_cached(device);
        p = hal::malloc(size);
      }
      if (p == nullptr) {
        ++st.num_ooms;
        size_t free_bytes = 0, total = 0;
        hal::mem_get_info(&free_bytes, &total);
        TORCH_CHECK_WITH(OutOfMemoryError, false, BACKEND_DEVICE " out of memory: tried to allocate ",
                         size, " bytes on device ", static_cast<int>(device), " (", free_bytes,
                         " of ", total, " bytes free; ", st.allocated_bytes[0].current,
                         " allocated by " BACKEND_PACKAGE ")");
      }
      b = new Block();
      b->ptr = p;
      b->size = size;
      b->device = device;
      b->stream = stream;
      ++st.num_device_alloc;
      count(st.segment, *b, 1);
      count(st.reserved_bytes, *b, static_cast<int64_t>(size));
    }
    b->requested = n;
    live_[b->ptr] = b;
    count(st.allocation, *b, 1);
    count(st.allocated_bytes, *b, static_cast<int64_t>(b->size));
    count(st.active, *b, 1);
    count(st.active_bytes, *b, static_cast<int64_t>(b->size));
    count(st.requested_bytes, *b, static_cast<int64_t>(n));
    return c10::DataPtr(b->ptr, b->ptr, &raw_delete, where);
  }

  void release(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    TORCH_INTERNAL_ASSERT(it != live_.end(), BACKEND_DEVICE ": freeing an unknown pointer");
    Block* b = it->second;
    live_.erase(it);
    DeviceStats& st = stats_[b->device];
    count(st.allocation, *b, -1);
    count(st.allocated_bytes, *b, -static_cast<int64_t>(b->size));
    count(st.active, *b, -1);
    count(st.active_bytes, *b, -static_cast<int64_t>(b->size));
    count(st.requested_bytes, *b, -static_cast<int64_t>(b->requested));
    if (b->uses.empty()) {
      cache(b);
      return;
    }
    // used on other streams: reuse only after the work queued there has finished
    DeviceScope scope(b->device);
    for (c10::StreamId s : b->uses) {
      hal::Event e = hal::event_create(false);
      hal::event_record(e, native_stream(c10::Stream(c10::Stream::UNSAFE,
                                                     c10::Device(kDeviceType, b->device), s)));
      b->pending.push_back(e);
    }
    b->uses.clear();
    pending_.push_back(b);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &raw_delete; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    hal::memcpy(dest, count, src, count, hal::CopyKind::DeviceToDevice);
  }

  bool initialized() BACKEND_DEVICE_ALLOCATOR_OVERRIDE { return true; }

  void emptyCache(MempoolId) BACKEND_DEVICE_ALLOCATOR_OVERRIDE {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Block* b : pending_) {
      for (hal::Event e : b->pending) hal::event_synchronize(e);
    }
    collect_pending();
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) release_cached(d);
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) BACKEND_DEVICE_ALLOCATOR_OVERRIDE {
    if (ptr.get() == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr.get_context());
    if (it == live_.end()) return;  // not ours (an adopted vendor tensor)
    if (stream.id() != it->second->stream) it->second->uses.insert(stream.id());
  }

  DeviceStats getDeviceStats(c10::DeviceIndex device) BACKEND_DEVICE_ALLOCATOR_OVERRIDE {
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_[device];
  }

  void resetAccumulatedStats(c10::DeviceIndex device) BACKEND_DEVICE_ALLOCATOR_OVERRIDE {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& st = stats_[device];
    for_each_stat(st, [](Stat& s) { s.reset_accumulated(); });
    st.num_alloc_retries = st.num_ooms = st.num_device_alloc = st.num_device_free = 0;
  }

  void resetPeakStats(c10::DeviceIndex device) BACKEND_DEVICE_ALLOCATOR_OVERRIDE {
    std::lock_guard<std::mutex> lock(mutex_);
    for_each_stat(stats_[device], [](Stat& s) { s.reset_peak(); });
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device)
      BACKEND_DEVICE_ALLOCATOR_OVERRIDE {
    DeviceScope scope(device);
    size_t free_bytes = 0, total = 0;
    hal::mem_get_info(&free_bytes, &total);
    return {free_bytes, total};
  }

  c10::DeviceIndex owner(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Block* b = holding(ptr);
    return b != nullptr ? b->device : c10::DeviceIndex(-1);
  }

  const void* start_of(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Block* b = holding(ptr);
    return b != nullptr ? b->ptr : nullptr;
  }

 private:
  const Block* holding(const void* ptr) const {  // the live block holding ptr (mutex_ held)
    auto it = live_.upper_bound(const_cast<void*>(ptr));
    if (it == live_.begin()) return nullptr;
    --it;
    const char* base = static_cast<const char*>(it->first);
    const char* p = static_cast<const char*>(ptr);
    return p < base + it->second->size ? it->second : nullptr;
  }

  Block* take_cached(c10::DeviceIndex device, c10::StreamId stream, size_t size) {
    auto it = cached_.find(Key{device, stream, size});
    if (it == cached_.end()) return nullptr;
    Block* b = it->second;
    cached_.erase(it);
    return b;
  }

  void cache(Block* b) { cached_.emplace(Key{b->device, b->stream, b->size}, b); }

  void collect_pending() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      Block* b = *it;
      bool done = true;
      for (hal::Event e : b->pending) done = done && hal::event_query(e);
      if (!done) {
        ++it;
        continue;
      }
      for (hal::Event e : b->pending) hal::event_destroy(e);
      b->pending.clear();
      cache(b);
      it = pending_.erase(it);
    }
  }

  void release_cached(c10::DeviceIndex device) {
    DeviceScope scope(device);
    DeviceStats& st = stats_[device];
    for (auto it = cached_.begin(); it != cached_.end();) {
      Block* b = it->second;
      if (b->device != device) {
        ++it;
        continue;
      }
      hal::free(b->ptr);
      ++st.num_device_free;
      count(st.segment, *b, -1);
      count(st.reserved_bytes, *b, -static_cast<int64_t>(b->size));
      delete b;
      it = cached_.erase(it);
    }
  }

  struct Key {
    c10::DeviceIndex device;
    c10::StreamId stream;
    size_t size;
    bool operator<(const Key& o) const {
      return std::tie(device, stream, size) < std::tie(o.device, o.stream, o.size);
    }
  };

  std::mutex mutex_;
  std::map<void*, Block*> live_;  // ordered: device_of() finds the block holding a pointer
  std::multimap<Key, Block*> cached_;
  std::vector<Block*> pending_;
  std::unordered_map<c10::DeviceIndex, DeviceStats> stats_;
};

// leaked on purpose: tensors may be freed after static destructors have run
DeviceCachingAllocator& g_device_allocator = *new DeviceCachingAllocator();

void raw_delete(void* ptr) { g_device_allocator.release(ptr); }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator);

}  // namespace

c10::Allocator* device_allocator() { return &g_device_allocator; }
c10::DeviceIndex device_of(const void* ptr) { return g_device_allocator.owner(ptr); }

const void* block_start(const void* ptr) { return g_device_allocator.start_of(ptr); }

void record_stream(const c10::DataPtr& ptr, const c10::Stream& stream) {
  g_device_allocator.recordStream(ptr, stream);
}

namespace api {

std::vector<std::pair<std::string, int64_t>> memory_stats(int device) {
  const DeviceStats st = g_device_allocator.getDeviceStats(device_arg(device));
  std::vector<std::pair<std::string, int64_t>> out;
  const char* pools[] = {"all", "small_pool", "large_pool"};
  auto add = [&](const char* name, const StatArray& a) {
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string key = std::string(name) + "." + pools[i] + ".";
      out.emplace_back(key + "current", a[i].current);
      out.emplace_back(key + "peak", a[i].peak);
      out.emplace_back(key + "allocated", a[i].allocated);
      out.emplace_back(key + "freed", a[i].freed);
    }
  };
  add("allocation", st.allocation);
  add("segment", st.segment);
  add("active", st.active);
  add("allocated_bytes", st.allocated_bytes);
  add("reserved_bytes", st.reserved_bytes);
  add("active_bytes", st.active_bytes);
  add("requested_bytes", st.requested_bytes);
  out.emplace_back("num_alloc_retries", st.num_alloc_retries);
  out.emplace_back("num_ooms", st.num_ooms);
  out.emplace_back("num_device_alloc", st.num_device_alloc);
  out.emplace_back("num_device_free", st.num_device_free);
  return out;
}

void reset_peak_memory_stats(int device) {
  g_device_allocator.resetPeakStats(device_arg(device));
}

void reset_accumulated_memory_stats(int device) {
  g_device_allocator.resetAccumulatedStats(device_arg(device));
}

void empty_cache() { g_device_allocator.emptyCache({0, 0}); }

std::pair<std::size_t, std::size_t> mem_get_info(int device) {
  return g_device_allocator.getMemoryInfo(device_arg(device));
}

}  // namespace api
}  // namespace BACKEND_NS
