// ringkv cuda-sim: what the simulator's backend needs from the executor (simt.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringkv::cuda::sim {

/// The seed that draws the order of blocks and of threads (each launch mixes in its count).
/// Default: RINGKV_SIM_SEED from the environment, else 0x5eed.
void set_seed(uint64_t seed);
uint64_t launch_seed();

/// "Device memory": buffers of an arena the executor checks global accesses against (every
/// access of a kernel inside the arena must fall in a live buffer, within the bytes asked for).
void* arena_allocate(size_t bytes);
void arena_release(void* p) noexcept;
/// Whether [p, p + bytes) lies in one live buffer of the arena.
bool arena_contains(const void* p, size_t bytes);

}  // namespace ringkv::cuda::sim
