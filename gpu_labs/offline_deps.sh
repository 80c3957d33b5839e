#!/usr/bin/env bash
# For GPU machines that cannot reach a package registry: fetch the Debian packages the build
# needs here, carry build/gpu-deps to that machine, and check.sh unpacks and uses them there.
#   gpu_labs/offline_deps.sh fetch     # on a Debian machine with apt: writes build/gpu-deps/debs
#   gpu_labs/offline_deps.sh unpack    # anywhere with dpkg: unpacks them, prints the prefix
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=$repo/build/gpu-deps
# Header-only libraries plus fmt and libzip: only their CMake configs and headers are needed to
# configure and build the labs (libzip4 because libzip's config checks that its library exists;
# only the grader links it); no lab binary loads a library from here.
packages=(libeigen3-dev doctest-dev nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9 libzip-dev libzip4)

case ${1:-} in
  fetch)
    mkdir -p "$deps/debs"
    (cd "$deps/debs" && apt-get download "${packages[@]}")
    echo "offline_deps: $(ls "$deps/debs" | wc -l) packages in $deps/debs; carry build/gpu-deps" ;;
  unpack)
    [ -d "$deps/debs" ] || { echo "offline_deps: no $deps/debs: run '$0 fetch' first" >&2; exit 2; }
    rm -rf "$deps/root"
    for f in "$deps"/debs/*.deb; do dpkg -x "$f" "$deps/root"; done
    echo "$deps/root/usr" ;;
  *)
    echo "usage: $0 fetch|unpack" >&2; exit 2 ;;
esac
