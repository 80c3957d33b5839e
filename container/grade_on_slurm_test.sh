#!/usr/bin/env bash
# The Slurm example in dry mode: it must build once (locked, with the shared compiler cache)
# before the array, call the built grader binary (never ./mgpu) in every task, ask each task for
# one GPU where the labs are graded and for none with --no-gpu, wrap every step in apptainer --nv
# when given an image, and refuse bad arguments with the fix.
set -u -o pipefail
script=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/grade_on_slurm.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
bad() { echo "FAIL: $*"; status=1; }

"$script" "$tmp/subs" "$tmp/out" --tasks 4 --dry-run >"$tmp/gpu.txt" || bad "dry run exited $?"
builds=$(grep -c '/mgpu build$' "$tmp/gpu.txt")
[[ $builds -eq 1 ]] || bad "$builds builds, not one"
grep -q "^+ env CCACHE_DIR=$tmp/out/ccache flock .*/build/.slurm-build.lock .*/mgpu build$" "$tmp/gpu.txt" || bad "the build is not locked with the shared ccache"
[[ $(grep -n '/mgpu build$' "$tmp/gpu.txt" | cut -d: -f1) -lt $(grep -n '^+ sbatch' "$tmp/gpu.txt" | head -1 | cut -d: -f1) ]] || bad "the build does not come before the array"
grep -q -- '--array=1-4 ' "$tmp/gpu.txt" || bad "no array of 4 tasks"
grep -q '^#SBATCH --gres=gpu:1$' "$tmp/gpu.txt" || bad "the tasks ask for no GPU"
grep -q "^export CCACHE_DIR=$tmp/out/ccache$" "$tmp/gpu.txt" || bad "the tasks do not share the build's ccache"
sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$tmp/gpu.txt" | grep -q 'bin/mgpu-grade grade-batch .* --shard \$SLURM_ARRAY_TASK_ID/4 ' || bad "the tasks do not call the grader binary on their shard"
sed -n '/<<task script/,/<<merge script/p' "$tmp/gpu.txt" | grep -q '/mgpu ' && bad "a task calls ./mgpu"
grep -q 'dependency=afterok' "$tmp/gpu.txt" || bad "no merge after the array"

"$script" "$tmp/subs" "$tmp/out" --no-gpu --dry-run >"$tmp/cpu.txt" || bad "--no-gpu dry run exited $?"
grep -q 'gres' "$tmp/cpu.txt" && bad "--no-gpu still asks for a GPU"

"$script" "$tmp/subs" "$tmp/out" --image "$tmp/mgpu.sif" --dry-run >"$tmp/sif.txt" || bad "--image dry run exited $?"
[[ $(grep -c "apptainer exec --nv --bind .* $tmp/mgpu.sif " "$tmp/sif.txt") -eq 3 ]] || bad "the build, the tasks and the merge do not all run in the image with --nv"

"$script" "$tmp/subs" "$tmp/out" --tasks 0 --dry-run 2>"$tmp/err.txt" && bad "--tasks 0 accepted"
grep -q 'use a positive number' "$tmp/err.txt" || bad "--tasks 0: no fix given"

if ((status != 0)); then for f in "$tmp"/*.txt; do echo "--- $f"; cat "$f"; done; exit 1; fi
echo "grade_on_slurm dry run: one locked build with a shared ccache, the grader binary per task, gpu:1 where labs are graded, apptainer --nv with an image"
