#!/usr/bin/env bash
# Installs the build dependencies of ringkv from Debian's packages: what configuring and building the
# tree (and so `ringkv check`, the main job) needs. The test command's own set-up,
# scripts/install-engines.sh (run by scripts/test.sh), adds what only the tests need: the real engines'
# virtual environments, clang and libFuzzer, chromium. The CUDA toolkit (nvcc, cuBLAS) is optional and
# not installed here.
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
  python3 python3-venv
