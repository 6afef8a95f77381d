#!/usr/bin/env bash
# Builds ddplab, CUDA code paths included, against the CUDA build of LibTorch (torch==2.14.1 in
# .venv-cuda) and the CUDA toolkit here. It must compile and link; nothing built runs without a GPU.
# Run it whenever you touch CUDA code. Not part of CI (the wheel is 5.5 GB; the build is long).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv-cuda/bin/python ] || ! .venv-cuda/bin/python -c 'import torch' >/dev/null 2>&1; then
  python3 -m venv .venv-cuda
  .venv-cuda/bin/pip install -q torch==2.14.1
fi
prefix=$(.venv-cuda/bin/python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
cuda_root=${CUDA_HOME:-/usr/local/cuda}
# The toolkit here has no libnvrtc; the wheel's nvidia packages carry it (LibTorch's CMake wants it).
nvrtc=$(find .venv-cuda/lib/python3*/site-packages/nvidia -name 'libnvrtc.so*' 2>/dev/null | head -n 1)
# Nor the math libraries' headers (cusparse.h, cublas_v2.h) that ATen/cuda/CUDAContext.h includes:
# take them from the wheel, searched after the toolkit's own.
math_inc=$(find .venv-cuda/lib/python3*/site-packages/nvidia -maxdepth 3 -name cusparse.h -printf '%h\n' 2>/dev/null | head -n 1)
export CPLUS_INCLUDE_PATH="${math_inc:+$PWD/$math_inc}${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DCUDAToolkit_ROOT="$cuda_root" -DCUDA_TOOLKIT_ROOT_DIR="$cuda_root" -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc" \
  ${nvrtc:+-DCUDA_nvrtc_LIBRARY="$PWD/$nvrtc"} -DDDPLAB_WERROR=ON -DDDPLAB_BUILD_TESTS=ON
cmake --build build-cuda -j "${DDPLAB_JOBS:-2}"
grep -q "DDPLAB_WITH_CUDA" build-cuda/build.ninja && echo "check-cuda-build: CUDA build of ddplab compiled and linked (DDPLAB_WITH_CUDA)"
if grep -q "DDPLAB_WITH_NCCL" build-cuda/build.ninja; then
  echo "check-cuda-build: NCCL process group compiled in (DDPLAB_WITH_NCCL)"
else
  echo "check-cuda-build: nccl.h not found; the NCCL backend is left out" >&2
  exit 1
fi
