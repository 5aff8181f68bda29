// cuda-sim shim: the kernels' <cuda_runtime_api.h> is the simulator's header.
#pragma once
#include "../simt.hpp"
