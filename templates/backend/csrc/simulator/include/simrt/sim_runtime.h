// simrt: a simulated accelerator in host memory, bundled with the package so that it
// builds and its tests run without hardware. Its API is what templates/vendors/sim.yaml
// declares, including Ascend-like quirks: copies take the destination size, stream and event
// queries report their status through an out-parameter, simInit reports a second call.
//
// Device memory is a memfd mapped twice: the PROT_NONE view is what device pointers point
// into (host code touching device memory faults), the read-write view is the simulator's own.
// Every stream is served by a worker thread. simInit only counts the devices: a device's memory
// and default stream are made when it is first used, so a process that has only initialised
// the simulator may fork and the child use it. Environment: SIMRT_DEVICE_COUNT (default 2),
// SIMRT_DEVICE_MEMORY_MB (default 1024).
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int simError_t;
typedef struct simStream_st* simStream_t;
typedef struct simEvent_st* simEvent_t;
// names a device allocation for another process (simIpcOpenMemHandle), as cudaIpcMemHandle_t
typedef struct simIpcMemHandle_st {
  char reserved[64];
} simIpcMemHandle_t;

enum simMemcpyKind {
  SIM_MEMCPY_HOST_TO_HOST = 0,
  SIM_MEMCPY_HOST_TO_DEVICE = 1,
  SIM_MEMCPY_DEVICE_TO_HOST = 2,
  SIM_MEMCPY_DEVICE_TO_DEVICE = 3,
};
enum simMallocPolicy { SIM_MALLOC_DEFAULT = 0 };
enum simStatus { SIM_STATUS_COMPLETE = 0, SIM_STATUS_NOT_READY = 1 };

static const simError_t simSuccess = 0;
static const simError_t simErrorInvalidValue = 1;
static const simError_t simErrorMemoryAllocation = 2;
static const simError_t simErrorInvalidDevice = 3;
static const simError_t simErrorRepeatInitialize = 4;
static const simError_t simErrorNotInitialized = 5;
static const simError_t simErrorNotReady = 6;
static const uint32_t SIM_EVENT_DEFAULT = 0;
static const uint32_t SIM_EVENT_TIMING = 1;

simError_t simInit(const char* config);
simError_t simGetDeviceCount(uint32_t* count);
simError_t simSetDevice(int32_t device);
simError_t simGetDevice(int32_t* device);
simError_t simMalloc(void** ptr, size_t size, enum simMallocPolicy policy);
simError_t simFree(void* ptr);
simError_t simMallocHost(void** ptr, size_t size);
simError_t simFreeHost(void* ptr);
simError_t simMemcpy(void* dst, size_t dstMax, const void* src, size_t count,
                     enum simMemcpyKind kind);
simError_t simMemcpyAsync(void* dst, size_t dstMax, const void* src, size_t count,
                          enum simMemcpyKind kind, simStream_t stream);
simError_t simStreamCreate(simStream_t* stream);
simError_t simStreamDestroy(simStream_t stream);
simError_t simStreamSynchronize(simStream_t stream);
simError_t simStreamQuery(simStream_t stream, enum simStatus* status);
simError_t simStreamWaitEvent(simStream_t stream, simEvent_t event);
simError_t simEventCreate(simEvent_t* event, uint32_t flags);
simError_t simEventDestroy(simEvent_t event);
simError_t simEventRecord(simEvent_t event, simStream_t stream);
simError_t simEventSynchronize(simEvent_t event);
simError_t simEventQuery(simEvent_t event, enum simStatus* status);
simError_t simEventElapsedTime(float* ms, simEvent_t start, simEvent_t end);
simError_t simDeviceSynchronize(void);
simError_t simMemGetInfo(size_t* free, size_t* total);
const char* simGetErrorString(simError_t error);
// The simulator's read-write view of a device address (what its "kernels" run on).
simError_t simHostAlias(const void* devPtr, void** hostPtr);
// IPC: a handle to the allocation starting at devPtr, opened by another process of the same
// user (while the owner keeps the allocation) as device memory of its own; closed there.
simError_t simIpcGetMemHandle(simIpcMemHandle_t* handle, void* devPtr);
simError_t simIpcOpenMemHandle(void** devPtr, simIpcMemHandle_t handle);
simError_t simIpcCloseMemHandle(void* devPtr);

#ifdef __cplusplus
}
#endif
