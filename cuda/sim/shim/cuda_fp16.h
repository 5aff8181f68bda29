// cuda-sim shim: __half2float through the project's own f16 decode (quant.hpp's f16_value).
#pragma once
#include "../simt.hpp"
#include "ringkv/cuda/quant.hpp"
[[gnu::always_inline]] inline float __half2float(__half h) { return ::ringkv::cuda::f16_value(h.x); }
