// ringkv cuda-sim: the CUDA engine core on the host SIMT executor. The kernels of
// cuda/src run on the CPU from their own source (simt.hpp, simt.cpp), the cuBLAS GEMMs
// by a host GEMM that checks its operands' extents against the buffers the engine made.
//
//   "cuda-sim"         EngineCore on the simulator, fused split-K decode
//   "cuda-sim-cublas"  the cuBLAS path (gather, GEMM, masked softmax, GEMM, scatter)
#pragma once

#include <cstdint>
#include <memory>

#include "ringkv/cuda/engine_core.hpp"
#include "ringkv/engine.hpp"

namespace ringkv::cuda {

/// `sm_count`: the multiprocessors the split planning assumes (132 an H200, 114 an H100 PCIe).
std::unique_ptr<Engine> make_sim_engine(const Config& config, DecodePath path = DecodePath::fused,
                                        int sm_count = 132);
EngineFactory sim_engine_factory(int sm_count = 132);
EngineFactory sim_cublas_engine_factory(int sm_count = 132);

namespace sim {
/// The order of blocks and threads is drawn from this seed (default RINGKV_SIM_SEED or 0x5eed).
void set_seed(uint64_t seed);
}  // namespace sim

}  // namespace ringkv::cuda
