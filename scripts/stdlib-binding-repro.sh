#!/usr/bin/env bash
# Reproduces the std::filesystem interposition of docs/architecture.md ("libstdc++ first") with a
# 20-line program (tests/base/stdlib_binding_repro.cpp) linked four ways against a LibTorch that
# exports std::filesystem (the torch 2.11.0 CUDA 13 wheel):
#   plain        LibTorch only, libstdc++ left to the driver
#   old fix      --no-as-needed -lstdc++ ahead of the objects
#   old fix, archive-only toolchain   the same where -lstdc++ finds only libstdc++.a (a -L folder
#                holding just the archive stands in for a GCC installed in its own prefix)
#   new fix, archive-only toolchain   -l:libstdc++.so.6 ahead of the objects
# Each prints where remove_all bound and whether removing a small tree worked (139: SIGSEGV).
#
#   scripts/stdlib-binding-repro.sh <venv with torch 2.11.0+cu130>     e.g. .venv-cuda-2.11.0
set -uo pipefail
cd "$(dirname "$0")/.."
venv=${1:?usage: scripts/stdlib-binding-repro.sh <venv with the torch 2.11 CUDA wheel>}
site=$(echo "$venv"/lib/python3*/site-packages)
lib=$site/torch/lib
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir "$out/archive-only"
ln -s "$(g++ -print-file-name=libstdc++.a)" "$out/archive-only/libstdc++.a"
rpath_link=$(find "$site/nvidia" -name lib -type d -printf '-Wl,-rpath-link,%p ')
torch=(-L"$lib" -Wl,-rpath,"$lib" -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 $rpath_link)
first() { echo -Wl,--push-state,--no-as-needed "$1" -Wl,--pop-state; }
declare -A ways=(
  [1-plain]=""
  [2-old-fix]="$(first -lstdc++)"
  [3-old-fix-archive-only-toolchain]="-L$out/archive-only $(first -lstdc++)"
  [4-new-fix-archive-only-toolchain]="-L$out/archive-only $(first -l:libstdc++.so.6)"
)
for way in $(printf '%s\n' "${!ways[@]}" | sort); do
  # shellcheck disable=SC2086
  g++ -O1 ${ways[$way]} tests/base/stdlib_binding_repro.cpp -o "$out/$way" "${torch[@]}" || exit 1
  echo "== $way: DT_NEEDED starts $(readelf -d "$out/$way" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | head -n 3 | xargs)"
  "$out/$way"
  echo "   exit code $?"
done
