#!/usr/bin/env bash
# The README's main job: install dependencies, build, and run `ringkv check`: every built-in
# engine against the committed golden cases: failures first with their reproduce lines, a verdict per
# engine, the verdict line last (arguments are passed on: --table adds the table per boundary class).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset default
cmake --build --preset default
./build/cli/ringkv check "$@"
