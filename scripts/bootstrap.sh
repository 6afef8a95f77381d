#!/usr/bin/env bash
# Sets up everything ddplab needs on a fresh Debian machine and builds it into build/.
# Idempotent: a second run only rebuilds what changed.
#
#   scripts/bootstrap.sh                 Debian packages, LibTorch from the torch==2.13.0 wheel, build
#   LIBTORCH=/opt/libtorch scripts/bootstrap.sh     use your own LibTorch (e.g. a CUDA build)
#   CMAKE_PREFIX_PATH=... or Torch_DIR=...          likewise
#   DDPLAB_WERROR=ON                     -Werror (off by default; scripts/test.sh leaves it off and
#                                        fails on warnings through scripts/check-warnings.sh, so that
#                                        it compiles with the quickstart's flags and reuses its objects)
#   DDPLAB_BUILD_DIR=build-x             another build directory
#   DDPLAB_CMAKE_ARGS="-DX=Y ..."        more CMake arguments (scripts/asan.sh, scripts/fuzz.sh)
#   DDPLAB_TARGETS="a b"                 build only these targets (default: all; scripts/quickstart.sh: ddplab)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build_dir=${DDPLAB_BUILD_DIR:-build}

packages=(build-essential cmake ninja-build ccache git python3-venv
          nlohmann-json3-dev libvalijson-dev libcli11-dev zlib1g-dev libgtest-dev
          libopenblas0-pthread dataset-fashion-mnist)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "bootstrap: installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "bootstrap: missing Debian packages. Run as root:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 2
  fi
fi

prefix=""
if [ -n "${LIBTORCH:-}" ]; then
  prefix="$LIBTORCH"
elif [ -n "${Torch_DIR:-}" ]; then
  prefix="$Torch_DIR"
elif [ -n "${CMAKE_PREFIX_PATH:-}" ]; then
  prefix="$CMAKE_PREFIX_PATH"
else
  if [ ! -x .venv/bin/python ]; then
    echo "bootstrap: creating .venv"
    python3 -m venv .venv
  fi
  if ! .venv/bin/python -c 'import torch' >/dev/null 2>&1; then
    echo "bootstrap: pip install torch==2.13.0 (CPU build; carries LibTorch)"
    .venv/bin/pip install -q torch==2.13.0
  fi
  prefix=$(.venv/bin/python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
fi

# Paths inside the checkout are hashed relative to it, so a clone elsewhere (CI) reuses the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
read -r -a extra_args <<< "${DDPLAB_CMAKE_ARGS:-}"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DDDPLAB_WERROR="${DDPLAB_WERROR:-OFF}" "${extra_args[@]}" >/dev/null
else
  cmake "$build_dir" -DDDPLAB_WERROR="${DDPLAB_WERROR:-OFF}" "${extra_args[@]}" >/dev/null
fi
read -r -a targets <<< "${DDPLAB_TARGETS:-}"
start=$(date +%s)
cmake --build "$build_dir" -j "${DDPLAB_JOBS:-2}" ${targets[@]+--target "${targets[@]}"}
echo "bootstrap: built ${DDPLAB_TARGETS:-all targets} in $(( $(date +%s) - start )) s"
