// Trivial kernels the smoke tests launch on a stream (cudac_kernels.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tdev_smoke {
// data[i] = value for i < n, launched on `stream`.
cudaError_t fill(float* data, int64_t n, float value, cudaStream_t stream);
// Copies data[0:n] to the host on `stream`, waits for the stream, and adds the values up.
cudaError_t sum(const float* data, int64_t n, cudaStream_t stream, double* out);
}  // namespace tdev_smoke
