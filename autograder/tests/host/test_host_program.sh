#!/usr/bin/env bash
# A chapter's host program (cases_<chapter>_host; each rank a fresh cases_<chapter> given its own
# input) must hold no function of the chapter's code and give every case the result the
# chapter's case program gives with its ranks as threads, byte for byte, on two seeds; and the
# rank program must refuse to run an isolated case whole (its meter would then be the student's
# to write).
# Usage: test_host_program.sh HOST_PROGRAM CASE_PROGRAM CHAPTER_ARCHIVE WORK_DIR
set -euo pipefail
host=$1 ranks=$2 chapter=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work"
failed=0
# What the chapter's archive defines (its code) must be nowhere in the host program.
nm --defined-only "$chapter" 2>/dev/null | awk '$2 == "T" {print $3}' | sort -u >chapter.sym
nm --defined-only "$host" | awk '{print $3}' | sort -u >host.sym
[ -s chapter.sym ] || { echo "FAIL: no function defined in $chapter"; exit 1; }
if comm -12 chapter.sym host.sym | grep -q .; then
  echo "FAIL: the host program holds chapter code:"
  comm -12 chapter.sym host.sym | head
  failed=1
fi
cases=$("$ranks" --list)
[ -n "$cases" ] || { echo "FAIL: $ranks lists no case"; exit 1; }
for seed in 3 1234567; do
  for c in $cases; do
    MGPU_CASE_SEED=$seed "$ranks" --case "$c" --result-fd 9 9>threads.json >/dev/null 2>&1
    rm -rf case && mkdir case
    (cd case && MGPU_CASE_SEED=$seed "$host" --case "$c" --result-fd 9 \
       --rank-program "$ranks" 9>../host.json >/dev/null 2>&1)
    if ! cmp -s threads.json host.json; then
      echo "FAIL: $c (seed $seed): the host program's result differs from the threads run"
      echo "  threads: $(head -c 300 threads.json)"
      echo "  host:    $(head -c 300 host.json)"
      failed=1
    fi
  done
done
# Every case the host holds is isolated: asked of the rank program whole, it is refused.
for c in $("$host" --list); do
  MGPU_CASE_SEED=1 "$ranks" --plain-case "$c" 10>answer.json >/dev/null 2>&1 || true
  if ! grep -q "is isolated" answer.json; then
    echo "FAIL: $c: the rank program ran it whole: $(head -c 300 answer.json)"
    failed=1
  fi
done
[ "$failed" = 0 ] && echo "every case of $(basename "$ranks") agrees through $(basename "$host")"
exit "$failed"
