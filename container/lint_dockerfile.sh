#!/usr/bin/env bash
# Checks container/Dockerfile where no image can be built: a pinned CUDA devel base (never
# `latest`), every Debian package the build and the grader need (gpu_labs/offline_deps.sh's and
# autograder/gradescope/setup.sh's lists), apt lists removed in the same layer, and a build step.
# Where a Docker daemon answers and MGPU_DOCKER_BUILD=1, it also builds the image.
set -u -o pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
df=$repo/container/Dockerfile
status=0
bad() { echo "FAIL: container/Dockerfile: $*"; status=1; }
grep -qE '^FROM nvidia/cuda:[0-9]+\.[0-9]+\.[0-9]+-devel-' "$df" || bad "the base is not a pinned nvidia/cuda devel image"
grep -qiE '^FROM .*:latest' "$df" && bad "a base image tagged latest"
installed=$(sed -n '/apt-get install/,/rm -rf/p' "$df" | tr -s ' \\\n' '\n')
read -r -a need < <(GPU_DEPS_DIR=$(mktemp -d) "$repo/gpu_labs/offline_deps.sh" list | sed -n 's/^packages: //p')
need+=($(sed -n '/^packages=(/,/)/p' "$repo/autograder/gradescope/setup.sh" | tr -d '()' | sed 's/packages=//'))
for p in "${need[@]}"; do
  # Runtime libraries come with their -dev package; the pip package is installed as python3-pip.
  case $p in libfmt9|libzip4|libseccomp2) continue ;; esac
  grep -qx -- "$p" <<<"$installed" || bad "package $p is not installed"
done
grep -q 'apt-get install.*--no-install-recommends' "$df" || bad "apt-get install without --no-install-recommends"
grep -q 'rm -rf /var/lib/apt/lists' "$df" || bad "apt lists are kept in the image"
grep -q '^RUN ./mgpu build' "$df" || bad "the image does not build the project"
if [[ ${MGPU_DOCKER_BUILD:-0} == 1 ]] && docker info >/dev/null 2>&1; then
  docker build -f "$df" -t mgpu:lint "$repo" || bad "docker build failed"
fi
((status == 0)) && echo "container/Dockerfile: lint passed (${#need[@]} packages checked)"
exit $status
