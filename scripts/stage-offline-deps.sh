#!/usr/bin/env bash
# Stages ddplab's build dependencies that a machine without apt or internet lacks (a GPU machine
# that carries only Python torch, CMake, ninja and nvcc) into .offline/root, ignored by git, so the
# folder can travel with the working tree. CMake looks there by itself (DDPLAB_DEPS_DIR).
#
#   nlohmann-json3-dev, libvalijson-dev, libcli11-dev   header-only, with their CMake configs
#   googletest                                          GoogleTest's sources, built with the tests
#   zlib1g-dev                                          zlib.h (the library itself, libz.so.1, is on every such machine)
#   .offline/data                                       Fashion-MNIST (and MNIST, if data/mnist has it) for scripts/gpu-check.sh
#
# Run it here (Debian, apt reachable); it downloads the .deb files and unpacks them with dpkg -x,
# installing nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.offline
packages=(nlohmann-json3-dev libvalijson-dev libcli11-dev googletest zlib1g-dev)
rm -rf "$dest"
mkdir -p "$dest/debs" "$dest/root"
(cd "$dest/debs" && apt-get download "${packages[@]}" >/dev/null)
for deb in "$dest"/debs/*.deb; do dpkg -x "$deb" "$dest/root"; done
rm -rf "$dest/debs" "$dest/root/usr/share/doc" "$dest/root/usr/share/man" "$dest"/root/usr/lib/*/libz.*
# The data the GPU check trains on (that machine has no apt either): Fashion-MNIST from Debian's
# dataset-fashion-mnist, and MNIST too where data/mnist holds it (for the time-to-99% figure).
mkdir -p "$dest/data"
fashion=/usr/share/datasets/fashion-mnist
[ -f "$fashion/train-images-idx3-ubyte.gz" ] || { echo "stage-offline-deps: no $fashion: apt install dataset-fashion-mnist" >&2; exit 1; }
cp -r "$fashion" "$dest/data/fashion-mnist"
if ls data/mnist/train-images-idx3-ubyte* >/dev/null 2>&1; then cp -rL data/mnist "$dest/data/mnist"; fi
echo "stage-offline-deps: staged ${packages[*]} and $(ls "$dest/data" | xargs) in $dest ($(du -sh "$dest" | cut -f1))"
