#!/usr/bin/env bash
# Grades a folder of submissions as a Slurm job array: the grader is built ONCE, on the login node
# (or in a first job), under a lock and with a compiler cache every task shares; then each array
# task runs the built grader binary on its shard, never ./mgpu (which would configure, build and
# maybe install packages in the shared checkout, once per task, unlocked). Where the GPU labs are
# graded, each task asks for one GPU (--gres=gpu:1); without one they would grade as 0/0.
#
#   container/grade_on_slurm.sh SUBMISSIONS OUT [--tasks N] [--no-gpu] [--image mgpu.sif] [--dry-run]
#
# OUT receives grades-<i>.csv, reports/ and the merged grades.csv (a dependent job merges them).
# --image runs every step inside the project's container image (apptainer exec --nv), built from
# container/Dockerfile. --dry-run prints what would run (the build and the
# sbatch commands with their scripts) and runs nothing; the suite checks that output.
# Environment: MGPU_CCACHE_DIR (default OUT/ccache, shared by the build and the tasks),
# SBATCH_ARGS (extra sbatch options: partition, account), TASK_CPUS (default 4).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
[[ $# -ge 2 ]] || { usage >&2; exit 2; }
subs=$(realpath -m "$1") out=$(realpath -m "$2"); shift 2
tasks=8 gpu=1 image="" dry=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --tasks) tasks=${2:?--tasks needs a number}; shift ;;
    --no-gpu) gpu=0 ;;
    --image) image=$(realpath -m "${2:?--image needs a .sif file}"); shift ;;
    --dry-run) dry=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "grade_on_slurm: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $tasks =~ ^[1-9][0-9]*$ ]] || { echo "grade_on_slurm: --tasks '$tasks': use a positive number" >&2; exit 2; }
[[ $dry == 1 || -d $subs ]] || { echo "grade_on_slurm: no folder $subs of submissions" >&2; exit 2; }
ccache_dir=${MGPU_CCACHE_DIR:-$out/ccache}
cpus=${TASK_CPUS:-4}
grader=$repo/build/solution/bin/mgpu-grade
# Inside the image the checkout is bound at the same path; --nv brings the host's driver in.
wrap=""
[[ -n $image ]] && wrap="apptainer exec --nv --bind $repo,$out,$subs $image "

run() { if [[ $dry == 1 ]]; then printf '+ %s\n' "$*"; else "$@"; fi; }

# 1. Build once: the grader and the references, under a lock so that two instructors (or two
# calls) never build the shared tree at the same time. ./mgpu build compiles the GPU labs too
# where CUDA is found; the first grade of the skeleton caches the reference's outputs.
run mkdir -p "$out/reports" "$ccache_dir"
run env CCACHE_DIR="$ccache_dir" flock "$repo/build/.slurm-build.lock" ${wrap}"$repo/mgpu" build

# 2. The array: each task grades its shard with the built binary, the same ccache for the
# submissions' own builds, its own work folder on local disk.
gres=""
[[ $gpu == 1 ]] && gres="#SBATCH --gres=gpu:1"
task_script="#!/bin/bash
#SBATCH --job-name=mgpu-grade --array=1-$tasks --cpus-per-task=$cpus --mem=16G --time=02:00:00
#SBATCH --output=$out/slurm-%A_%a.log
$gres
export CCACHE_DIR=$ccache_dir
${wrap}$grader grade-batch $subs --csv $out/grades-\$SLURM_ARRAY_TASK_ID.csv --reports $out/reports \\
  --shard \$SLURM_ARRAY_TASK_ID/$tasks --work-dir \${TMPDIR:-/tmp}/mgpu-\$SLURM_JOB_ID-\$SLURM_ARRAY_TASK_ID --jobs $cpus"
merge_script="#!/bin/bash
#SBATCH --job-name=mgpu-merge --cpus-per-task=1 --time=00:10:00 --output=$out/slurm-merge-%j.log
${wrap}$grader grade-batch merge $out/grades.csv $out/grades-*.csv"
if [[ $dry == 1 ]]; then
  printf '+ sbatch --parsable %s <<task script\n%s\n' "${SBATCH_ARGS:-}" "$task_script"
  printf '+ sbatch --dependency=afterok:<array> %s <<merge script\n%s\n' "${SBATCH_ARGS:-}" "$merge_script"
  exit 0
fi
# shellcheck disable=SC2086  # SBATCH_ARGS is a list of options
array=$(sbatch --parsable ${SBATCH_ARGS:-} <<<"$task_script")
# shellcheck disable=SC2086
sbatch --dependency=afterok:"$array" ${SBATCH_ARGS:-} <<<"$merge_script"
echo "grade_on_slurm: array $array ($tasks tasks$([[ $gpu == 1 ]] && echo ', one GPU each')); grades in $out/grades.csv"
