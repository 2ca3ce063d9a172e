// Caching pinned (page-locked) host allocator over the HAL: blocks cached by size;
// a block that queued copies use (record_host_use) is reused only after they complete.
#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/Api.h"
#include "runtime/Runtime.h"

namespace BACKEND_NS {
namespace {

constexpr size_t kRound = 4096;

size_t round_size(size_t n) { return (n + kRound - 1) / kRound * kRound; }

class HostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    if (n == 0) return c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU));
    const size_t size = round_size(n);
    std::lock_guard<std::mutex> lock(mutex_);
    collect();
    void* p = nullptr;
    auto it = free_.find(size);
    if (it != free_.end()) {
      p = it->second;
      free_.erase(it);
    } else {
      p = hal::host_malloc(size);
      blocks_[static_cast<char*>(p)] = Entry{size, {}};
    }
    return c10::DataPtr(p, p, &raw_host_delete, c10::Device(c10::DeviceType::CPU));
  }

  c10::DeleterFnPtr raw_deleter() const override { return &raw_host_delete; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  void release(void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = blocks_.at(static_cast<char*>(p));
    if (e.events.empty()) {
      free_.emplace(e.size, p);
    } else {
      in_flight_.push_back(p);
    }
  }

  bool contains(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    return find(ptr) != nullptr;
  }

  void record(const void* ptr, const c10::Stream& stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry* e = find(ptr);
    if (e == nullptr) return;
    DeviceScope scope(stream.device_index());
    hal::Event ev = hal::event_create(false);
    hal::event_record(ev, native_stream(stream));
    e->events.push_back(ev);
  }

 private:
  struct Entry {
    size_t size;
    std::vector<hal::Event> events;
  };

  static void raw_host_delete(void* p);

  Entry* find(const void* ptr) {
    const char* p = static_cast<const char*>(ptr);
    auto it = blocks_.upper_bound(const_cast<char*>(p));
    if (it == blocks_.begin()) return nullptr;
    --it;
    return p < it->first + it->second.size ? &it->second : nullptr;
  }

  void collect() {
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      Entry& e = blocks_.at(static_cast<char*>(*it));
      bool done = true;
      for (hal::Event ev : e.events) done = done && hal::event_query(ev);
      if (!done) {
        ++it;
        continue;
      }
      for (hal::Event ev : e.events) hal::event_destroy(ev);
      e.events.clear();
      free_.emplace(e.size, *it);
      it = in_flight_.erase(it);
    }
  }

  std::mutex mutex_;
  std::map<char*, Entry> blocks_;  // every pinned block, for is_pinned() range lookups
  std::multimap<size_t, void*> free_;
  std::vector<void*> in_flight_;
};

HostAllocator& g_host_allocator = *new HostAllocator();

void HostAllocator::raw_host_delete(void* p) { g_host_allocator.release(p); }

}  // namespace

c10::Allocator* host_allocator() { return &g_host_allocator; }
bool is_pinned(const void* ptr) { return g_host_allocator.contains(ptr); }

void record_host_use(const void* ptr, const c10::Stream& stream) {
  g_host_allocator.record(ptr, stream);
}

namespace api {

bool is_pinned(std::uintptr_t ptr) { return BACKEND_NS::is_pinned(reinterpret_cast<void*>(ptr)); }

}  // namespace api
}  // namespace BACKEND_NS
