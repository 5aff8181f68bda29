#!/usr/bin/env bash
# The README's test command: configure (warnings as errors), build and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset ci
cmake --build --preset ci
ctest --preset ci
