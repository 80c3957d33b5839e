#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image: install what is
# missing, build the reference and the grader, and grade the skeleton once so that the reference
# results and the student build tree are cached before the first student submits.
#
# Supported base images: Ubuntu 22.04 (GCC 11; CMake >= 3.25 comes from PyPI) and Debian 12
# (GCC 12). AUTOGRADER_ROOT (default /autograder) lets the project's own test run this script
# in a temporary folder standing in for Gradescope's.
set -euo pipefail
root=${AUTOGRADER_ROOT:-/autograder}
cd "$root/source"

packages=(cmake ninja-build g++ ccache doctest-dev libeigen3-dev nlohmann-json3-dev libcli11-dev libfmt-dev
          libzip-dev zip unzip bubblewrap python3-pip git libseccomp-dev lld)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# CMake >= 3.25; Ubuntu 22.04 ships 3.22.
have=$(cmake --version 2>/dev/null | awk 'NR==1 {print $3}')
if [ -z "$have" ] || [ "$(printf '%s\n' 3.25 "$have" | sort -V | head -n1)" != 3.25 ]; then
  python3 -m pip install -q 'cmake>=3.25' || python3 -m pip install -q --break-system-packages 'cmake>=3.25'
  hash -r
fi

# Warnings stay warnings here: a compiler newer than the project's must not stop the image build.
# -O2 as every tree the grader configures; with -g too, as the project's own build/solution, so
# that where a compiler cache holds that tree's objects (the project's test of this script) this
# build reuses them. Debug information changes no instruction the cases run.
export CCACHE_BASEDIR=$PWD
cmake -S . -B build/solution -G Ninja -DMGPU_IMPL=solution -DMGPU_CUDA=OFF -DMGPU_WERROR=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build/solution --target mgpu-grade

# The warm-up, in two grades: the reference must get full marks (it is what students are compared
# against), and an empty submission (the skeleton) fills the student build tree. A failure fails
# the image build with the grader's message, rather than every submission later. The skeleton is
# graded from the folder run_autograder grades, so that it fills the very tree a submission is
# built in: a submission then compiles only the files it changed.
read -r -a grade_args <<<"$(cat autograder/private/grade-args 2>/dev/null || true)"
if ! build/solution/bin/mgpu-grade grade --solution --check-full-marks --quiet "${grade_args[@]}"; then
  echo "setup.sh: the reference solutions did not get full marks (above); fix them before uploading" >&2
  exit 1
fi
empty=$root/submission
if [ -e "$empty" ]; then empty=$(mktemp -d); else mkdir -p "$empty"; fi
if ! build/solution/bin/mgpu-grade grade "$empty" --quiet "${grade_args[@]}"; then
  echo "setup.sh: grading the skeleton failed (above); the autograder would fail every submission" >&2
  exit 1
fi
rmdir "$empty"
echo "setup.sh: reference built and checked, caches warm; ready to grade"
