#!/usr/bin/env bash
# The README's test command: install what the tests need beyond the build dependencies
# (scripts/install-engines.sh: the real engines' virtual environments, clang, chromium; each part
# skipped when already in place), configure (warnings as errors), build and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-engines.sh
# cuobjdump installed by scripts/install-engines.sh where the CUDA toolkit lacks it.
if [ -z "${CUOBJDUMP:-}" ]; then
  for c in .tools-venv/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump; do
    if [ -x "$c" ]; then export CUOBJDUMP="$PWD/$c"; fi
  done
fi
cmake --preset ci
cmake --build --preset ci
ctest --preset ci
