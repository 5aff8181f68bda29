// ringkv cuda-sim: the launchers of the kernels' translation units, renamed for the
// simulator's build (ringkv::cuda::sim_launch_*), so that the real CUDA build's and the
// simulator's may live in one program. Included before ring.cu, decode.cu and prefill.cu.
#pragma once
#define launch_append sim_launch_append
#define launch_commit sim_launch_commit
#define launch_gather sim_launch_gather
#define launch_poison sim_launch_poison
#define launch_decode sim_launch_decode
#define launch_decode_as sim_launch_decode_as
#define launch_decode_warp sim_launch_decode_warp
#define launch_decode_warp_as sim_launch_decode_warp_as
#define launch_decode_warp_d sim_launch_decode_warp_d
#define launch_merge sim_launch_merge
#define launch_masked_softmax sim_launch_masked_softmax
#define launch_scatter sim_launch_scatter
#include "simt.hpp"
