// The hardware abstraction of the package: the only code that talks to the vendor's runtime
// (the header the profile names, runtime.header). Everything above it (allocators, devices,
// streams, events, guard, ATen ops) is the same for every vendor; HAL.cpp is rendered from
// the vendor profile (templates/vendors/<vendor>.yaml).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "runtime/Config.h"

namespace BACKEND_NS::hal {

using Stream = void*;  // nullptr: the device's default stream
using Event = void*;

enum class CopyKind { HostToHost, HostToDevice, DeviceToHost, DeviceToDevice };

// A failed runtime call: "<function> failed: <runtime's message> (status N)".
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// 0 when the runtime or driver is unusable. Where the profile has a device_count_probe, counted
// without initialising the runtime until something else has (fork-safe before first use).
int device_count() noexcept;
bool initialized() noexcept;  // whether the runtime has been initialised by this process
void set_device(int device);
int get_device();

void* malloc(std::size_t size);  // nullptr when the device is out of memory
void free(void* ptr);
void* host_malloc(std::size_t size);  // page-locked host memory
void host_free(void* ptr);

// Blocking copy; not ordered with streams (synchronise the stream first).
void memcpy(void* dst, std::size_t dst_size, const void* src, std::size_t count, CopyKind kind);
void memcpy_async(void* dst, std::size_t dst_size, const void* src, std::size_t count,
                  CopyKind kind, Stream stream);

Stream stream_create();
void stream_destroy(Stream stream);
void stream_synchronize(Stream stream);
bool stream_query(Stream stream);  // true when all work is done
void stream_wait_event(Stream stream, Event event);

Event event_create(bool timing);
void event_destroy(Event event);
void event_record(Event event, Stream stream);
void event_synchronize(Event event);
bool event_query(Event event);
float event_elapsed_ms(Event start, Event end);

void device_synchronize();
void mem_get_info(std::size_t* free, std::size_t* total);

// The host's view of device memory, where the runtime has one (a simulator); else nullptr.
void* host_alias(void* device_ptr);

// IPC, where the profile declares the runtime's calls (runtime.calls.ipc_*): the handle (bytes)
// of the allocation starting at ptr; that handle opened in another process, a device pointer
// there, valid until closed (the owner keeps the allocation meanwhile).
bool ipc_supported() noexcept;
std::string ipc_get_handle(void* ptr);
void* ipc_open_handle(const std::string& handle);
void ipc_close_handle(void* ptr);
// The start of the allocation holding ptr, whichever allocator made it, where the profile names
// the runtime's lookup (runtime.allocation_range); nullptr when unknown.
const void* allocation_start(const void* ptr);

}  // namespace BACKEND_NS::hal
