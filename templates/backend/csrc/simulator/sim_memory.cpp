// simrt devices and memory: each device's memory is a memfd mapped twice (a PROT_NONE view whose
// addresses are the device pointers, a read-write view only the simulator touches), carved by
// a first-fit allocator; copies check that each end is the memory its kind says.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "sim_internal.h"

namespace simrt {

std::vector<Device*>* g_devices = nullptr;
thread_local int t_device = 0;

namespace {

constexpr size_t kAlign = 512;

std::mutex g_init_mutex;
std::mutex g_host_mutex;
std::map<const char*, size_t> g_pinned;

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  return (end != nullptr && *end == '\0' && n > 0) ? static_cast<size_t>(n) : fallback;
}

// The simulator's view of [p, p + n) when it lies inside one device allocation, else nullptr.
char* device_view(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  for (Device* d : *g_devices) {
    if (!live(d) || c < d->dev || c >= d->dev + d->size) continue;
    std::lock_guard<std::mutex> lock(d->m);
    const size_t off = static_cast<size_t>(c - d->dev);
    auto it = d->used_blocks.upper_bound(off);
    if (it == d->used_blocks.begin()) return nullptr;
    --it;
    if (off + n > it->first + it->second) return nullptr;
    return d->host + off;
  }
  return imported_view(p, n);
}

bool is_device_address(const void* p) {
  const char* c = static_cast<const char*>(p);
  for (Device* d : *g_devices) {
    if (live(d) && c >= d->dev && c < d->dev + d->size) return true;
  }
  return is_imported_address(p);
}

// Resolves both ends of a copy; device ends must be device memory, host ends must not be.
simError_t plan_copy(void* dst, size_t dst_max, const void* src, size_t count,
                     simMemcpyKind kind, char** to, const char** from) {
  if (!ready()) return simErrorNotInitialized;
  if (count > dst_max) return simErrorInvalidValue;  // destination too small
  const bool dst_dev = kind == SIM_MEMCPY_HOST_TO_DEVICE || kind == SIM_MEMCPY_DEVICE_TO_DEVICE;
  const bool src_dev = kind == SIM_MEMCPY_DEVICE_TO_HOST || kind == SIM_MEMCPY_DEVICE_TO_DEVICE;
  if (count == 0) {
    *to = static_cast<char*>(dst);
    *from = static_cast<const char*>(src);
    return simSuccess;
  }
  *to = dst_dev ? device_view(dst, count) : static_cast<char*>(dst);
  *from = src_dev ? device_view(src, count) : static_cast<const char*>(src);
  if (*to == nullptr || *from == nullptr) return simErrorInvalidValue;
  if ((!dst_dev && is_device_address(dst)) || (!src_dev && is_device_address(src))) {
    return simErrorInvalidValue;  // a device pointer passed as a host pointer
  }
  return simSuccess;
}

}  // namespace

bool materialize(Device* d) {
  std::call_once(d->made, [d] {
    const int fd = memfd_create("simrt-device", MFD_CLOEXEC);
    if (fd < 0) return;
    void* dev = MAP_FAILED;
    void* host = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(d->size)) == 0) {
      dev = mmap(nullptr, d->size, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
      host = mmap(nullptr, d->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    }
    if (dev == MAP_FAILED || host == MAP_FAILED) {
      if (dev != MAP_FAILED) munmap(dev, d->size);
      if (host != MAP_FAILED) munmap(host, d->size);
      close(fd);
      return;
    }
    std::lock_guard<std::mutex> lock(d->m);
    d->fd = fd;
    d->dev = static_cast<char*>(dev);
    d->host = static_cast<char*>(host);
    d->free_blocks[0] = d->size;
    d->default_stream = new_stream(d->index);
    d->live.store(true, std::memory_order_release);
  });
  return live(d);
}

}  // namespace simrt

using namespace simrt;

extern "C" {

simError_t simInit(const char* config) {
  (void)config;
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (g_devices != nullptr) return simErrorRepeatInitialize;
  const size_t count = env_size("SIMRT_DEVICE_COUNT", 2);
  const size_t bytes = env_size("SIMRT_DEVICE_MEMORY_MB", 1024) << 20;
  auto* devices = new std::vector<Device*>();
  for (size_t i = 0; i < count; ++i) {
    auto* d = new Device();
    d->index = static_cast<int>(i);
    d->size = bytes;
    devices->push_back(d);
  }
  g_devices = devices;
  return simSuccess;
}

simError_t simGetDeviceCount(uint32_t* count) {
  if (!ready()) return simErrorNotInitialized;
  *count = static_cast<uint32_t>(g_devices->size());
  return simSuccess;
}

simError_t simSetDevice(int32_t device) {
  if (!ready()) return simErrorNotInitialized;
  if (device < 0 || static_cast<size_t>(device) >= g_devices->size()) return simErrorInvalidDevice;
  t_device = device;
  return simSuccess;
}

simError_t simGetDevice(int32_t* device) {
  if (!ready()) return simErrorNotInitialized;
  *device = t_device;
  return simSuccess;
}

simError_t simMalloc(void** ptr, size_t size, simMallocPolicy policy) {
  (void)policy;
  if (!ready()) return simErrorNotInitialized;
  *ptr = nullptr;
  if (size == 0) return simSuccess;
  const size_t need = (size + kAlign - 1) / kAlign * kAlign;
  Device* d = current();
  if (!materialize(d)) return simErrorMemoryAllocation;
  std::lock_guard<std::mutex> lock(d->m);
  for (auto it = d->free_blocks.begin(); it != d->free_blocks.end(); ++it) {
    if (it->second < need) continue;
    const size_t off = it->first;
    const size_t rest = it->second - need;
    d->free_blocks.erase(it);
    if (rest > 0) d->free_blocks[off + need] = rest;
    d->used_blocks[off] = need;
    d->in_use += need;
    *ptr = d->dev + off;
    return simSuccess;
  }
  return simErrorMemoryAllocation;
}

simError_t simFree(void* ptr) {
  if (!ready()) return simErrorNotInitialized;
  if (ptr == nullptr) return simSuccess;
  for (Device* d : *g_devices) {
    char* c = static_cast<char*>(ptr);
    if (!live(d) || c < d->dev || c >= d->dev + d->size) continue;
    sync_device(d);  // like cudaFree: the device finishes its work first
    std::lock_guard<std::mutex> lock(d->m);
    size_t off = static_cast<size_t>(c - d->dev);
    auto it = d->used_blocks.find(off);
    if (it == d->used_blocks.end()) return simErrorInvalidValue;
    size_t size = it->second;
    d->used_blocks.erase(it);
    d->in_use -= size;
    // give the pages back to the host, then merge with free neighbours
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t lo = (off + page - 1) / page * page;
    const size_t hi = (off + size) / page * page;
    if (hi > lo) {
      (void)fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      static_cast<off_t>(lo), static_cast<off_t>(hi - lo));
    }
    auto next = d->free_blocks.lower_bound(off);
    if (next != d->free_blocks.end() && next->first == off + size) {
      size += next->second;
      d->free_blocks.erase(next);
    }
    auto prev = d->free_blocks.lower_bound(off);
    if (prev != d->free_blocks.begin()) {
      --prev;
      if (prev->first + prev->second == off) {
        prev->second += size;
        return simSuccess;
      }
    }
    d->free_blocks[off] = size;
    return simSuccess;
  }
  return simErrorInvalidValue;
}

simError_t simMallocHost(void** ptr, size_t size) {
  if (!ready()) return simErrorNotInitialized;
  void* p = mmap(nullptr, std::max<size_t>(size, 1), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return simErrorMemoryAllocation;
  std::lock_guard<std::mutex> lock(g_host_mutex);
  g_pinned[static_cast<const char*>(p)] = std::max<size_t>(size, 1);
  *ptr = p;
  return simSuccess;
}

simError_t simFreeHost(void* ptr) {
  std::lock_guard<std::mutex> lock(g_host_mutex);
  auto it = g_pinned.find(static_cast<const char*>(ptr));
  if (it == g_pinned.end()) return simErrorInvalidValue;
  munmap(ptr, it->second);
  g_pinned.erase(it);
  return simSuccess;
}

simError_t simMemcpy(void* dst, size_t dstMax, const void* src, size_t count, simMemcpyKind kind) {
  char* to = nullptr;
  const char* from = nullptr;
  const simError_t st = plan_copy(dst, dstMax, src, count, kind, &to, &from);
  if (st == simSuccess && count > 0) std::memcpy(to, from, count);
  return st;
}

simError_t simMemcpyAsync(void* dst, size_t dstMax, const void* src, size_t count,
                          simMemcpyKind kind, simStream_t stream) {
  char* to = nullptr;
  const char* from = nullptr;
  const simError_t st = plan_copy(dst, dstMax, src, count, kind, &to, &from);
  if (st != simSuccess || count == 0) return st;
  simStream_st* s = resolve(stream);
  if (s == nullptr) return simErrorMemoryAllocation;
  submit(s, [to, from, count] { std::memcpy(to, from, count); });
  return simSuccess;
}
simError_t simMemGetInfo(size_t* free, size_t* total) {
  if (!ready()) return simErrorNotInitialized;
  Device* d = current();
  std::lock_guard<std::mutex> lock(d->m);
  *total = d->size;
  *free = d->size - d->in_use;
  return simSuccess;
}
simError_t simHostAlias(const void* devPtr, void** hostPtr) {
  if (!ready()) return simErrorNotInitialized;
  char* view = device_view(devPtr, 1);
  if (view == nullptr) return simErrorInvalidValue;
  *hostPtr = view;
  return simSuccess;
}

}  // extern "C"
