// cuda-sim shim: the kernels' <cuda_runtime.h> is the simulator's header.
#pragma once
#include "../simt.hpp"
