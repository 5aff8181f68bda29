// ringkv cuda: the kernel launchers (defined in ring.cu, decode.cu and prefill.cu).
// Plain host C++ (declarations only), so the CUDA backend, compiled by the host
// compiler, can include it. Each launcher enqueues one launch of the family its
// Params describe on `stream` and returns the launch error (cudaGetLastError
// after the launch), or cudaSuccess without launching for an empty grid; none
// of them synchronises, throws or exits.
#pragma once

#include <cuda_runtime_api.h>

#include "ringkv/cuda/params.hpp"

namespace ringkv::cuda {

cudaError_t launch_append(const AppendParams& p, cudaStream_t stream);
cudaError_t launch_commit(const CommitParams& p, cudaStream_t stream);
cudaError_t launch_gather(const GatherParams& p, cudaStream_t stream);
cudaError_t launch_poison(const PoisonParams& p, cudaStream_t stream);
cudaError_t launch_decode(const DecodeParams& p, cudaStream_t stream);
cudaError_t launch_merge(const MergeParams& p, cudaStream_t stream);
cudaError_t launch_masked_softmax(const MaskedSoftmaxParams& p, cudaStream_t stream);
cudaError_t launch_scatter(const ScatterParams& p, cudaStream_t stream);

}  // namespace ringkv::cuda
