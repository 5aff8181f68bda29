#!/usr/bin/env bash
# The README's main job: install dependencies, build, and check the reference
# engine against the float64 oracle (until the ringkv CLI exists, issue 3).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset default
cmake --build --preset default
./build/conformance/ringkv_selfcheck
