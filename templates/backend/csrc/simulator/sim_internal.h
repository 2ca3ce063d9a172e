// simrt internals shared by the simulator's units (not part of its API).
#pragma once

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "simrt/sim_runtime.h"

struct simStream_st {
  int device = 0;
  std::mutex m;
  std::condition_variable work;  // the worker waits for tasks
  std::condition_variable done;  // synchronising threads wait for completions
  std::deque<std::function<void()>> tasks;
  uint64_t submitted = 0;
  uint64_t completed = 0;
  bool stop = false;
  std::thread worker;
};

struct EventState {
  bool timing = false;
  std::mutex m;
  std::condition_variable cv;
  uint64_t recorded = 0;   // versions scheduled by simEventRecord
  uint64_t completed = 0;  // versions a stream has reached
  std::chrono::steady_clock::time_point when;
};

// The handle owns one reference; queued records and waits hold their own, so an event may be
// destroyed while work that uses it is still queued (as with CUDA).
struct simEvent_st {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};


namespace simrt {

// A device's memory and default stream are made on its first use (materialize), not by simInit:
// a process that only counted devices may fork, and the child makes its own.
struct Device {
  int index = 0;
  std::once_flag made;
  std::atomic<bool> live{false};  // memory mapped and default stream running
  char* dev = nullptr;   // PROT_NONE view: the addresses handed out as device pointers
  char* host = nullptr;  // read-write view of the same pages, used only by the simulator
  size_t size = 0;
  int fd = -1;
  std::mutex m;
  std::map<size_t, size_t> free_blocks;  // offset -> size
  std::map<size_t, size_t> used_blocks;  // offset -> size
  size_t in_use = 0;
  simStream_st* default_stream = nullptr;
  std::vector<simStream_st*> streams;
};

extern std::vector<Device*>* g_devices;  // set once by simInit, never freed
extern thread_local int t_device;

inline bool ready() { return g_devices != nullptr; }
inline Device* current() { return (*g_devices)[t_device]; }
// Maps the device's memory and starts its default stream once; false when that failed.
bool materialize(Device* d);
inline bool live(const Device* d) { return d->live.load(std::memory_order_acquire); }

// sim_streams.cpp
simStream_st* new_stream(int device);
void submit(simStream_st* s, std::function<void()> task);
void drain(simStream_st* s);          // waits for everything queued so far
// nullptr: the current device's default stream (made if needed); returns nullptr if it cannot be
simStream_st* resolve(simStream_t stream);
void sync_device(Device* d);

// sim_ipc.cpp: device memory of another process opened here (simIpcOpenMemHandle)
char* imported_view(const void* p, size_t n);  // the read-write view of [p, p + n), or nullptr
bool is_imported_address(const void* p);

}  // namespace simrt
