// ringkv cuda-sim: cuda/src/decode.cu, the kernels' own source, compiled as host C++ for the
// SIMT executor (simt.hpp, with -fsanitize=thread instrumentation as the access hook).
#include "sim_rename.hpp"
#include "../src/decode.cu"
