#!/usr/bin/env bash
# Stages ddplab's build dependencies that a machine without apt or internet lacks (a GPU machine
# that carries only Python torch, CMake, ninja and nvcc) into .offline/root, ignored by git, so the
# folder can travel with the working tree. CMake looks there by itself (DDPLAB_DEPS_DIR).
#
#   nlohmann-json3-dev, libvalijson-dev, libcli11-dev   header-only, with their CMake configs
#   googletest                                          GoogleTest's sources, built with the tests
#   zlib1g-dev                                          zlib.h (the library itself, libz.so.1, is on every such machine)
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
echo "stage-offline-deps: staged ${packages[*]} in $dest/root ($(du -sh "$dest" | cut -f1))"
