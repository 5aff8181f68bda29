#!/usr/bin/env bash
# The README's test command: install what the tests need beyond the build dependencies
# (scripts/install-engines.sh: the real engines' virtual environments, clang, chromium; each part
# skipped when already in place), configure (warnings as errors), build and run every test.
# The install runs while the tree builds: it waits on the network and the disk (16 min wall, 7 min of
# CPU on a clean clone of 2 cores), the build on the CPU, so together they take little more than the
# build alone. Its output goes to build-ci/install-engines.log, shown when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build-ci
./scripts/install-engines.sh > build-ci/install-engines.log 2>&1 &
install=$!
# An interrupted or failed build must not leave the install (and its pip or apt-get) running.
kill_tree() { local c; for c in $(pgrep -P "$1"); do kill_tree "$c"; done; kill "$1" 2>/dev/null || true; }
trap 'kill_tree "$install"' EXIT
cmake --preset ci
cmake --build --preset ci
echo "test.sh: build done, waiting for ./scripts/install-engines.sh (build-ci/install-engines.log)"
if ! wait "$install"; then
  cat build-ci/install-engines.log >&2
  echo "FAILED: ./scripts/install-engines.sh (its output above)" >&2
  exit 1
fi
trap - EXIT
cat build-ci/install-engines.log
# cuobjdump installed by scripts/install-engines.sh where the CUDA toolkit lacks it.
if [ -z "${CUOBJDUMP:-}" ]; then
  for c in .tools-venv/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump; do
    if [ -x "$c" ]; then export CUOBJDUMP="$PWD/$c"; fi
  done
fi
ctest --preset ci
