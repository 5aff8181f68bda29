#!/usr/bin/env bash
# The README's main job: install the build dependencies (Debian packages only: scripts/install-deps.sh),
# build what `ringkv check` needs (the target ringkv: the CLI, the reference, cuda-plan and
# cuda-plan-cublas, the CUDA engines where nvcc is found, and the plugin worker; not the test programs,
# plugins, fuzz targets or benchmarks), and run it: every built-in engine against the committed golden
# cases: failures first with their reproduce lines, a verdict per engine, the verdict line last
# (arguments are passed on: --table adds the table per boundary class). It creates no virtual
# environment: the real engines' are the test command's (scripts/install-engines.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# The CUDA engines are built only where a CUDA device is present: without one `ringkv check` lists them
# as skipped either way, and nvcc would add minutes to the first verdict (RINGKV_CUDA=ON forces them).
cuda="${RINGKV_CUDA:-}"
if [ -z "$cuda" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then cuda=ON; else cuda=OFF; fi
fi
cmake --preset default -DRINGKV_CUDA="$cuda"
cmake --build --preset default --target ringkv
./build/cli/ringkv check "$@"
