// What csrc/pybinding exposes to Python: plain C++ types only, so the binding unit compiles
// without torch's headers. Failures are exceptions derived from std::exception.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/Config.h"

namespace BACKEND_NS::api {

// devices
int device_count();
int current_device();
void set_device(int device);
void check_device(long long device);  // throws "<device>: invalid device ordinal ..." unless valid
int exchange_device(int device);  // returns the previous device
void synchronize(int device);     // -1: the current device
bool runtime_initialized();       // whether this process has initialised the vendor runtime
// the host's address of device memory, where the runtime gives the host a view of it (the
// simulator); 0 where it does not
std::uintptr_t host_address(std::uintptr_t device_ptr);

// streams, as (stream_id, device_index, device_type) for torch.Stream(stream_id=..., ...)
struct StreamRef {
  int64_t stream_id;
  int64_t device_index;
  int64_t device_type;
};
StreamRef current_stream(int device);
void set_stream(int64_t stream_id, int device);
std::uintptr_t native_stream(int device);  // the current stream's runtime handle (0: default)

// memory (the caching device allocator's statistics, with torch.cuda's key names)
std::vector<std::pair<std::string, int64_t>> memory_stats(int device);
void reset_peak_memory_stats(int device);
void reset_accumulated_memory_stats(int device);
void empty_cache();
std::pair<std::size_t, std::size_t> mem_get_info(int device);  // (free, total) bytes
bool is_pinned(std::uintptr_t ptr);
// makes a storage (its StorageImpl's address, UntypedStorage._cdata) non-resizable
void seal_storage(std::uintptr_t storage_impl);

// random numbers: the device's default generator
void manual_seed(int device, uint64_t seed);
uint64_t seed(int device);  // a fresh non-deterministic seed, returned
uint64_t initial_seed(int device);
std::string get_rng_state(int device);
void set_rng_state(int device, const std::string& state);
// numbers drawn since seeding (torch.Generator.get_offset/set_offset of the default generator)
uint64_t get_offset(int device);
void set_offset(int device, uint64_t offset);

// operator routing (backends.conf); "vendor" or "cpu" kernels live in C++, FlagGems in Python
void route(const std::string& op, const std::string& backend);  // replaces an earlier route
void unroute(const std::string& op);  // back to the device's fallback
// operators routed to the vendor without being listed (profile fallback: vendor): those with a
// vendor kernel that a composite kernel would otherwise serve on this device
std::vector<std::string> implicit_vendor_ops();
void set_log_dispatch(bool on);

// torch.profiler's device timeline (DeviceTrace.cpp): whether a trace records the device's
// kernels and copies now, and how many records it holds (none while no trace runs)
bool device_trace_recording();
std::size_t device_trace_held();

}  // namespace BACKEND_NS::api
