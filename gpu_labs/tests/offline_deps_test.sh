#!/usr/bin/env bash
# The carried dependencies must work wherever they are unpacked: unpack them into a scratch
# folder, move that folder, and check that CMake's targets for each package point inside it
# (Debian's doctest config names /usr outright until offline_deps.sh rewrites it).
# Exit 77 (CTest: skipped) when the .deb files are absent and cannot be fetched.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
deps=${GPU_DEPS_DIR:-$repo/build/gpu-deps}
tool=$repo/gpu_labs/offline_deps.sh

if ! ls "$deps"/debs/*.deb >/dev/null 2>&1 && ! "$tool" fetch; then
  echo "offline_deps_test: no .deb files in $deps/debs and fetching them failed: skipped"
  exit 77
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$tool" unpack "$scratch/first" >/dev/null
mv "$scratch/first" "$scratch/moved"
root=$scratch/moved/usr

mkdir -p "$scratch/probe"
cat >"$scratch/probe/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(probe LANGUAGES CXX)
find_package(doctest REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
foreach(t doctest::doctest Eigen3::Eigen nlohmann_json::nlohmann_json CLI11::CLI11 fmt::fmt)
  get_target_property(inc ${t} INTERFACE_INCLUDE_DIRECTORIES)
  message(STATUS "include ${t} ${inc}")
endforeach()
foreach(p doctest Eigen3 nlohmann_json CLI11 fmt)
  message(STATUS "config ${p} ${${p}_DIR}")
endforeach()
EOF
out=$(cmake -S "$scratch/probe" -B "$scratch/probe/build" -DCMAKE_PREFIX_PATH="$root" 2>&1) || {
  echo "$out"
  echo "offline_deps_test: configuring against $root failed"
  exit 1
}
status=0
while read -r kind name path; do
  for p in ${path//;/ }; do
    if [[ $p != "$root"/* ]]; then
      echo "FAIL: $kind of $name is $p, outside the unpacked folder $root"
      status=1
    else
      echo "ok:   $kind of $name is inside the unpacked folder (${p#"$root"/})"
    fi
  done
done < <(sed -n 's/^-- \(include\|config\) /\1 /p' <<<"$out")
[[ $(grep -c '^-- \(include\|config\) ' <<<"$out") -eq 10 ]] || { echo "$out"; echo "FAIL: expected 10 lines"; status=1; }
exit $status
