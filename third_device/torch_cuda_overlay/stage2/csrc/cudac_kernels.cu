// Trivial kernels for the smoke tests of the standalone torch_cuda build.
#include "cudac_kernels.h"

#include <c10/macros/Macros.h>  // C10_LAUNCH_BOUNDS_1: c10's CUDA-only macros, as ATen uses them

#include <vector>

namespace tdev_smoke {
namespace {
constexpr int kThreads = 256;

__global__ void C10_LAUNCH_BOUNDS_1(kThreads) fill_kernel(float* data, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    data[i] = value;
  }
}
}  // namespace

cudaError_t fill(float* data, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  fill_kernel<<<static_cast<unsigned>(blocks < 4096 ? blocks : 4096), kThreads, 0, stream>>>(
      data, n, value);
  return cudaGetLastError();
}

cudaError_t sum(const float* data, int64_t n, cudaStream_t stream, double* out) {
  std::vector<float> host(n > 0 ? static_cast<size_t>(n) : 0);
  *out = 0;
  if (n <= 0) return cudaSuccess;
  cudaError_t err = cudaMemcpyAsync(host.data(), data, sizeof(float) * n,
                                    cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return err;
  for (float v : host) *out += v;
  return cudaSuccess;
}
}  // namespace tdev_smoke
