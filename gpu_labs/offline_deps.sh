#!/usr/bin/env bash
# For GPU machines that cannot reach a package registry: fetch the Debian packages the build
# needs here, carry build/gpu-deps to that machine, and check.sh unpacks and uses them there.
#   gpu_labs/offline_deps.sh fetch          # on a Debian machine with apt: writes build/gpu-deps/debs
#   gpu_labs/offline_deps.sh unpack [DIR]   # unpacks them into DIR (default build/gpu-deps/root),
#                                           # makes their CMake files relocatable, prints DIR/usr
#   gpu_labs/offline_deps.sh list           # the packages and the .deb files present
# GPU_DEPS_DIR moves the whole folder (default build/gpu-deps of this checkout).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=${GPU_DEPS_DIR:-$repo/build/gpu-deps}
# Header-only libraries plus fmt and libzip: only their CMake configs and headers are needed to
# configure and build the labs (libzip4 because libzip's config checks that its library exists;
# only the grader links it); no lab binary loads a library from here.
packages=(libeigen3-dev doctest-dev nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9 libzip-dev libzip4
          libseccomp-dev libseccomp2)

# One .deb into a folder: dpkg where there is one, else the archive's data member by hand.
extract() {  # extract <deb> <dir>
  if command -v dpkg >/dev/null 2>&1; then
    dpkg -x "$1" "$2"
    return
  fi
  local tmp member
  tmp=$(mktemp -d)
  member=$(cd "$tmp" && ar t "$1" | grep '^data\.tar')
  (cd "$tmp" && ar x "$1" "$member" && tar -xf "$member" -C "$2")
  rm -rf "$tmp"
}

# Debian's doctest config names its prefix as the absolute "/usr", so unpacked anywhere else it
# would still send the compiler to /usr/include. Point it at its own location instead. The other
# packages' configs already compute their prefix from where they lie.
relocate() {  # relocate <root>
  local f
  while IFS= read -r f; do
    sed -i 's|^set(_IMPORT_PREFIX "/usr")$|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' "$f"
  done < <(grep -rl --include='*.cmake' '^set(_IMPORT_PREFIX "/usr")$' "$1" || true)
  if grep -rq --include='*.cmake' -e '^set(_IMPORT_PREFIX "/usr")$' -e '^set(PACKAGE_PREFIX_DIR "/usr")$' "$1"; then
    echo "offline_deps: a CMake file under $1 still names the prefix /usr outright:" >&2
    grep -rn --include='*.cmake' -e '^set(_IMPORT_PREFIX "/usr")$' -e '^set(PACKAGE_PREFIX_DIR "/usr")$' "$1" >&2
    exit 3
  fi
}

# Two callers at once (check.sh and the relocation test under ctest -j) take turns.
if [[ ${1:-} == fetch || ${1:-} == unpack ]] && command -v flock >/dev/null 2>&1; then
  mkdir -p "$deps"
  exec 8>"$deps/.lock"
  flock 8
fi

case ${1:-} in
  fetch)
    mkdir -p "$deps/debs"
    if ! (cd "$deps/debs" && apt-get download "${packages[@]}"); then
      # A machine that has never run apt-get update has no package lists to download from.
      if [ "$(id -u)" -eq 0 ]; then
        echo "offline_deps: apt-get download failed; running apt-get update and trying again" >&2
        apt-get update -qq
        (cd "$deps/debs" && apt-get download "${packages[@]}")
      else
        echo "offline_deps: apt-get download failed (run 'apt-get update' as root first)" >&2
        exit 1
      fi
    fi
    echo "offline_deps: $(ls "$deps/debs" | wc -l) packages in $deps/debs; carry $deps" ;;
  unpack)
    [ -d "$deps/debs" ] && ls "$deps"/debs/*.deb >/dev/null 2>&1 ||
      { echo "offline_deps: no .deb files in $deps/debs: run '$0 fetch' first" >&2; exit 2; }
    root=${2:-$deps/root}
    mkdir -p "$root"
    root=$(cd "$root" && pwd)
    # Unpacking again is skipped when the same files were unpacked here by this script already.
    stamp="$(cd "$deps/debs" && ls -l --time-style=+%s ./*.deb | awk '{print $5, $6, $7}' | md5sum | cut -d' ' -f1)"
    stamp="$stamp $(md5sum <"${BASH_SOURCE[0]}" | cut -d' ' -f1)"
    if [ "$(cat "$root/.offline-deps-stamp" 2>/dev/null)" != "$stamp" ]; then
      # Only ever empty a folder that is empty or that this script filled.
      if [ -n "$(ls -A "$root")" ] && [ ! -f "$root/.offline-deps-stamp" ]; then
        echo "offline_deps: $root is not empty and was not unpacked by this script: name an empty folder" >&2
        exit 2
      fi
      find "$root" -mindepth 1 -delete
      for f in "$deps"/debs/*.deb; do extract "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$root"; done
      relocate "$root"
      echo "$stamp" >"$root/.offline-deps-stamp"
    fi
    echo "$root/usr" ;;
  list)
    echo "packages: ${packages[*]}"
    ls -l "$deps/debs" 2>/dev/null || echo "(no $deps/debs yet)" ;;
  *)
    echo "usage: $0 fetch | unpack [DIR] | list" >&2; exit 2 ;;
esac
