// Force-included (aten.cmake) into the units that use cudnn-frontend, when cuDNN is on.
// cudnn-frontend 1.8.0 (what PyTorch 2.6.0 pins) calls the CUDA 12 form of
// cudaGraphNodeGetDependentNodes(node, deps, count) in cudnn_frontend_shim.h; CUDA 13's runtime
// API has only the form with edge data (node, deps, edgeData, count), so every unit including
// it stops at "cannot convert 'size_t*' to 'cudaGraphEdgeData*'". This overload keeps the
// CUDA 12 call working (no edge data requested). A transitional shim for a third-party header
// (not a PyTorch file, so not a torch_patches patch); newer cudnn-frontend releases need none.
#pragma once
#include <cuda_runtime_api.h>
#if defined(__cplusplus) && defined(CUDART_VERSION) && CUDART_VERSION >= 13000
inline cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t* deps,
                                                  size_t* count) {
  return cudaGraphNodeGetDependentNodes(node, deps, nullptr, count);
}
#endif
