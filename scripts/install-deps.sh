#!/usr/bin/env bash
# Installs exactly the build and test dependencies of ringkv from Debian's packages.
# The CUDA toolkit (nvcc, cuBLAS) is optional and not installed here.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  cmake ninja-build g++ \
  googletest libgtest-dev libgmock-dev \
  librapidcheck-dev \
  libcli11-dev \
  nlohmann-json3-dev \
  libbenchmark-dev \
  python3 python3-venv \
  clang-14 libclang-rt-14-dev \
  chromium  # clang: the fuzz targets (scripts/fuzz.sh), libFuzzer; chromium: the HTML report loaded headless (ctest cli.html_report_browser)

# The real engines judged by engines/ (ONNX Runtime, JAX, mlx-lm, transformers with torch, llama.cpp
# through llama-cpp-python): a virtual
# environment at .venv with the exact versions of engines/requirements.txt (PyPI; about 6 GB, most of
# it torch's CUDA libraries). The `engines` ctests use it and fail, saying
# to run this script, without it.
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -x "$ROOT/.venv/bin/python" ]; then python3 -m venv "$ROOT/.venv"; fi
# llama-cpp-python is built from its sdist (no wheel on PyPI): the CPU library only, without
# -march=native so that engines.llamacpp's verdicts do not depend on the build machine; about 6.5
# minutes on 2 cores, once: pip keeps the built wheel in its cache.
CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF" \
MAKEFLAGS="-j$(nproc)" \
  "$ROOT/.venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/engines/requirements.txt"
# Ray for python -m ringkv.fleet (docs/fleet.md; ctest cli.fleet_ray_local), pinned; it adds only new packages.
"$ROOT/.venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/python/fleet-requirements.txt"

# cuobjdump for the kernel resource test (cuda.kernel_resources): some CUDA toolkit installs lack
# it; PyPI's pinned nvidia-cuda-cuobjdump reads nvcc 13 objects. Best effort: without it that
# test is skipped with the reason, nothing else depends on it.
if command -v nvcc >/dev/null 2>&1 && ! command -v cuobjdump >/dev/null 2>&1 && [ ! -x "$(dirname "$(command -v nvcc)")/cuobjdump" ]; then
  TOOLS="$(cd "$(dirname "$0")/.." && pwd)/.tools-venv"
  if [ ! -x "$TOOLS/bin/python" ]; then python3 -m venv "$TOOLS" || true; fi
  "$TOOLS/bin/pip" install -q nvidia-cuda-cuobjdump==13.2.51 || echo "warning: could not install cuobjdump; the kernel resource test will be skipped"
fi
