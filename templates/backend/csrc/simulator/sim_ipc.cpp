// simrt IPC: a device allocation shared with another process, as cudaIpcGetMemHandle does. A
// device's memory is a memfd (sim_memory.cpp); the handle names the owner's process, that fd and
// the allocation's place in it, and the other process maps the same pages (through
// /proc/<pid>/fd) twice like its own device memory: a PROT_NONE view whose addresses are device
// pointers and a read-write view the simulator copies through. The owner must keep the
// allocation, and itself, alive while another process has it open (as with CUDA).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "sim_internal.h"

namespace simrt {
namespace {

constexpr uint32_t kMagic = 0x53494d49;  // "SIMI"

struct Wire {  // what a handle holds
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  int32_t device;
  uint64_t offset;
  uint64_t size;
};
static_assert(sizeof(Wire) <= sizeof(simIpcMemHandle_t), "handle too small");

struct Imported {
  char* map = nullptr;   // PROT_NONE view of the pages holding the allocation
  char* host = nullptr;  // read-write view of the same pages
  size_t map_size = 0;
  char* dev = nullptr;   // the allocation's device address in this process
  size_t size = 0;
};

std::mutex g_imported_mutex;
std::vector<Imported>* g_imported = new std::vector<Imported>();  // never freed

}  // namespace

char* imported_view(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(g_imported_mutex);
  for (const Imported& m : *g_imported) {
    if (c >= m.dev && c < m.dev + m.size) {
      return c + n <= m.dev + m.size ? m.host + (c - m.map) : nullptr;
    }
  }
  return nullptr;
}

bool is_imported_address(const void* p) {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(g_imported_mutex);
  for (const Imported& m : *g_imported) {
    if (c >= m.map && c < m.map + m.map_size) return true;
  }
  return false;
}

}  // namespace simrt

using namespace simrt;

extern "C" {

simError_t simIpcGetMemHandle(simIpcMemHandle_t* handle, void* devPtr) {
  if (!ready()) return simErrorNotInitialized;
  if (handle == nullptr || devPtr == nullptr) return simErrorInvalidValue;
  const char* c = static_cast<const char*>(devPtr);
  for (Device* d : *g_devices) {
    if (!live(d) || c < d->dev || c >= d->dev + d->size) continue;
    std::lock_guard<std::mutex> lock(d->m);
    const size_t off = static_cast<size_t>(c - d->dev);
    auto it = d->used_blocks.find(off);  // the start of an allocation, as CUDA requires
    if (it == d->used_blocks.end()) return simErrorInvalidValue;
    Wire w{kMagic, static_cast<int32_t>(getpid()), d->fd, d->index, off, it->second};
    std::memset(handle, 0, sizeof(*handle));
    std::memcpy(handle, &w, sizeof(w));
    return simSuccess;
  }
  return simErrorInvalidValue;
}

simError_t simIpcOpenMemHandle(void** devPtr, simIpcMemHandle_t handle) {
  if (!ready()) return simErrorNotInitialized;
  if (devPtr == nullptr) return simErrorInvalidValue;
  *devPtr = nullptr;
  Wire w;
  std::memcpy(&w, &handle, sizeof(w));
  if (w.magic != kMagic || w.size == 0) return simErrorInvalidValue;
  if (w.pid == static_cast<int32_t>(getpid())) return simErrorInvalidValue;  // CUDA refuses too
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", static_cast<int>(w.pid),
                static_cast<int>(w.fd));
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return simErrorInvalidValue;  // the owner has exited
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t lo = w.offset / page * page;
  const size_t hi = (w.offset + w.size + page - 1) / page * page;
  void* map = mmap(nullptr, hi - lo, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd,
                   static_cast<off_t>(lo));
  void* host = mmap(nullptr, hi - lo, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd,
                    static_cast<off_t>(lo));
  close(fd);
  if (map == MAP_FAILED || host == MAP_FAILED) {
    if (map != MAP_FAILED) munmap(map, hi - lo);
    if (host != MAP_FAILED) munmap(host, hi - lo);
    return simErrorMemoryAllocation;
  }
  Imported m;
  m.map = static_cast<char*>(map);
  m.host = static_cast<char*>(host);
  m.map_size = hi - lo;
  m.dev = m.map + (w.offset - lo);
  m.size = w.size;
  std::lock_guard<std::mutex> lock(g_imported_mutex);
  g_imported->push_back(m);
  *devPtr = m.dev;
  return simSuccess;
}

simError_t simIpcCloseMemHandle(void* devPtr) {
  if (!ready()) return simErrorNotInitialized;
  std::lock_guard<std::mutex> lock(g_imported_mutex);
  for (auto it = g_imported->begin(); it != g_imported->end(); ++it) {
    if (it->dev != devPtr) continue;
    munmap(it->map, it->map_size);
    munmap(it->host, it->map_size);
    g_imported->erase(it);
    return simSuccess;
  }
  return simErrorInvalidValue;
}

}  // extern "C"
