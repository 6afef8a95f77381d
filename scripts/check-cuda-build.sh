#!/usr/bin/env bash
# Builds ddplab, CUDA code paths included, against the CUDA build of LibTorch (torch==2.14.1 in
# .venv-cuda) and the CUDA toolkit here. It must compile and link; without a GPU its programs run
# their CPU paths only. Run it whenever you touch CUDA code. Not part of CI (the wheel is 5.5 GB;
# the build is long).
#
#   scripts/check-cuda-build.sh                 # torch 2.14.1 in .venv-cuda, build-cuda
#   TORCH=2.11.0 scripts/check-cuda-build.sh    # the GPU machines' version: .venv-cuda-2.11.0, build-cuda-2.11.0
#
# Then `ctest --test-dir <build dir> -E "ReportBrowser|Torchrun"` runs the unit tests against it
# (the 2.11 wheel is how the libstdc++-first link fix in CMakeLists.txt was found).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${TORCH:-2.14.1}
venv=.venv-cuda build=build-cuda
[ "$version" = 2.14.1 ] || { venv=.venv-cuda-$version; build=build-cuda-$version; }
if [ ! -x $venv/bin/python ] || ! $venv/bin/python -c 'import torch' >/dev/null 2>&1; then
  python3 -m venv $venv
  $venv/bin/pip install -q torch==$version
fi
prefix=$($venv/bin/python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
cuda_root=${CUDA_HOME:-/usr/local/cuda}
# The toolkit here has no libnvrtc; the wheel's nvidia packages carry it (LibTorch's CMake wants it).
nvrtc=$(find $venv/lib/python3*/site-packages/nvidia -name 'libnvrtc.so*' 2>/dev/null | head -n 1)
# Nor the math libraries' headers (cusparse.h, cublas_v2.h) that ATen/cuda/CUDAContext.h includes:
# take them from the wheel, searched after the toolkit's own.
math_inc=$(find $venv/lib/python3*/site-packages/nvidia -maxdepth 3 -name cusparse.h -printf '%h\n' 2>/dev/null | head -n 1)
export CPLUS_INCLUDE_PATH="${math_inc:+$PWD/$math_inc}${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DCUDAToolkit_ROOT="$cuda_root" -DCUDA_TOOLKIT_ROOT_DIR="$cuda_root" -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc" \
  ${nvrtc:+-DCUDA_nvrtc_LIBRARY="$PWD/$nvrtc"} -DDDPLAB_WERROR=ON -DDDPLAB_BUILD_TESTS=ON
cmake --build $build -j "${DDPLAB_JOBS:-2}"
grep -q "DDPLAB_WITH_CUDA" $build/build.ninja && echo "check-cuda-build: CUDA build of ddplab compiled and linked against torch $version in $build (DDPLAB_WITH_CUDA)"
if grep -q "DDPLAB_WITH_NCCL" $build/build.ninja; then
  echo "check-cuda-build: NCCL process group compiled in (DDPLAB_WITH_NCCL)"
else
  echo "check-cuda-build: nccl.h not found; the NCCL backend is left out" >&2
  exit 1
fi
