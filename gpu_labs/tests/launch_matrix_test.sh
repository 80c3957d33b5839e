#!/usr/bin/env bash
# The launch matrix: starts gpu_launch_worker (the labs' launch path, host exchange instead of
# device work) as a launcher would, with only that launcher's variables in each process's
# environment, and checks that the processes form ONE job of N ranks with rank 0's id, that each
# picks the right GPU, that a missing rank ends the job with a message naming it, that one rank's
# failed check fails every rank, and that a stale id file from an earlier run is not used.
#   gpu_labs/tests/launch_matrix_test.sh <path to gpu_launch_worker>
set -u -o pipefail
worker=${1:?usage: launch_matrix_test.sh <gpu_launch_worker>}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
bad() { echo "FAIL [$case]: $*"; failures=$((failures + 1)); }

# A port rank 0 can listen on (the labs use MASTER_PORT + 1).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}

# start <rank> <worker args> -- <VAR=value...>: one process with exactly these variables.
pids=()
start() {
  local r=$1 args=(); shift
  while [[ $1 != -- ]]; do args+=("$1"); shift; done; shift
  env -i PATH="$PATH" HOME="$tmp/home" "$@" "$worker" "${args[@]}" >"$tmp/$case.$r.out" 2>"$tmp/$case.$r.err" &
  pids[r]=$!
}
# finish: waits for every started rank; codes[r] is rank r's exit status.
codes=()
finish() {
  local r
  codes=()
  for r in "${!pids[@]}"; do wait "${pids[r]}"; codes[r]=$?; done
  pids=()
}
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p; s/^$2=\([^ ]*\).*/\1/p" "$tmp/$case.$1.out" | head -1; }
show() { local f; for f in "$tmp/$case".*; do echo "--- $(basename "$f")"; cat "$f"; done; }

# one_job <n> <source> <devices...>: ranks 0..n-1 each printed world n, rank 0's id, the device
# given, passed their check, exited 0, and said which launcher they read.
one_job() {
  local n=$1 source=$2 r id0; shift 2
  id0=$(field 0 id)
  [[ -n $id0 ]] || bad "rank 0 printed no id"
  for ((r = 0; r < n; r++)); do
    [[ ${codes[r]} -eq 0 ]] || bad "rank $r exited ${codes[r]}"
    [[ $(field "$r" rank) == "$r" ]] || bad "rank $r printed rank '$(field "$r" rank)'"
    [[ $(field "$r" world) == "$n" ]] || bad "rank $r printed world '$(field "$r" world)', not $n"
    [[ $(field "$r" id) == "$id0" ]] || bad "rank $r has id '$(field "$r" id)', rank 0 '$id0': not one job"
    [[ $(field "$r" check) == pass ]] || bad "rank $r check '$(field "$r" check)'"
    [[ $(field "$r" device) == "$1" ]] || bad "rank $r device '$(field "$r" device)', want $1"
    grep -q "^launch: $source, rank $r of $n" "$tmp/$case.$r.out" || bad "rank $r did not print 'launch: $source, rank $r of $n'"
    shift
  done
}

case=single
start 0 --visible 2 --
finish
[[ ${codes[0]} -eq 0 && $(field 0 world) == 1 && $(field 0 check) == pass ]] || bad "one process without a launcher is not a job of 1"

case=torchrun
port=$(free_port)
tr_env() { echo RANK="$1" LOCAL_RANK="$1" WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1)) TORCHELASTIC_RUN_ID=none; }
for r in 0 1 2 3; do start $r --visible 4 -- $(tr_env $r); done
finish
one_job 4 torchrun 0 1 2 3

case=torchrun-two-nodes  # 2 nodes x 2 GPUs: local ranks 0 1 0 1
port=$(free_port)
for r in 0 1 2 3; do
  start $r --visible 2 -- RANK=$r LOCAL_RANK=$((r % 2)) GROUP_RANK=$((r / 2)) WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1))
done
finish
one_job 4 torchrun 0 1 0 1

case=slurm  # srun -N2 --ntasks-per-node=2 --gpus-per-task=1: one visible GPU per task; file rendezvous
shared=$tmp/shared
mkdir -p "$shared"
# A requeued job keeps its job id: the file its crashed first run left must not be read.
stale=$shared/mgpu-slurm-4242.0.0.0
printf 'mgpu-job slurm-4242.0 4\nSTALE-ID' >"$stale"
touch -d '1 hour ago' "$stale"
sl_env() { echo SLURM_PROCID="$1" SLURM_LOCALID=$(($1 % 2)) SLURM_NODEID=$(($1 / 2)) SLURM_NTASKS=4 SLURM_JOB_ID=4242 SLURM_STEP_ID=0 MGPU_RENDEZVOUS_DIR="$shared"; }
for r in 1 2 3; do start $r --visible 1 -- $(sl_env $r); done
sleep 1  # rank 0 last: the others look for its id before it exists
start 0 --visible 1 -- $(sl_env 0)
finish
one_job 4 Slurm 0 0 0 0
[[ $(field 0 id) != STALE-ID ]] || bad "the stale id file was used"
left=$(ls -A "$shared")
[[ -z $left ]] || bad "rank 0 left files behind in the rendezvous folder: $left"

case=openmpi  # mpirun -np 3 inside an sbatch script: Slurm's variables are the script's (rank 0)
shared=$tmp/shared-ompi
for r in 0 1 2; do
  start $r --visible 3 -- OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_LOCAL_RANK=$r OMPI_COMM_WORLD_SIZE=3 \
    OMPI_COMM_WORLD_LOCAL_SIZE=3 PMIX_NAMESPACE=prterun-node1-77@1 SLURM_PROCID=0 SLURM_NTASKS=1 \
    SLURM_JOB_ID=99 MGPU_RENDEZVOUS_DIR="$shared"
done
finish
one_job 3 "Open MPI" 0 1 2

case=missing-rank-tcp  # world 3, rank 2 never starts
port=$(free_port)
for r in 0 1; do start $r -- RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1)) MGPU_INIT_TIMEOUT=2; done
finish
for r in 0 1; do
  [[ ${codes[r]} -ne 0 ]] || bad "rank $r exited 0 although rank 2 never came"
  grep -q 'rank 2 of 3 did not join within 2 s' "$tmp/$case.$r.err" || bad "rank $r's error does not name rank 2: $(cat "$tmp/$case.$r.err")"
done

case=missing-rank-file  # Slurm, world 3, rank 1 never starts
for r in 0 2; do start $r -- $(sl_env $r | sed 's/SLURM_NTASKS=4/SLURM_NTASKS=3/; s/4242/4343/') MGPU_INIT_TIMEOUT=2; done
finish
for r in 0 2; do
  [[ ${codes[r]} -ne 0 ]] || bad "rank $r exited 0 although rank 1 never came"
  grep -q 'rank 1 of 3 did not reach the start' "$tmp/$case.$r.err" || bad "rank $r's error does not name rank 1: $(cat "$tmp/$case.$r.err")"
done

case=one-rank-fails  # rank 2's own check fails: every rank exits with the job's worst status
port=$(free_port)
for r in 0 1 2; do start $r --fail-rank 2 -- RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1)); done
finish
[[ $(field 2 check) == fail && $(field 0 check) == pass ]] || bad "rank 2 did not fail its own check alone"
for r in 0 1 2; do [[ ${codes[r]} -eq 1 ]] || bad "rank $r exited ${codes[r]}, not the job's 1"; done
grep -q 'rank 2 exit 1' "$tmp/$case.0.err" || bad "rank 0 does not name rank 2 as the one that failed"

case=bad-input
start 0 -- RANK=4 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
finish
[[ ${codes[0]} -ne 0 ]] && grep -q 'needs RANK in \[0, 4), got 4' "$tmp/$case.0.err" || bad "RANK outside the world: $(cat "$tmp/$case.0.err")"
start 0 -- SLURM_PROCID=0 SLURM_NTASKS=2
finish
[[ ${codes[0]} -ne 0 ]] && grep -q 'names no job to meet in: export MASTER_ADDR' "$tmp/$case.0.err" || bad "no job id: $(cat "$tmp/$case.0.err")"
start 0 --visible 2 -- RANK=0 LOCAL_RANK=3 WORLD_SIZE=1
finish
[[ ${codes[0]} -ne 0 ]] && grep -q 'shows only 2 GPUs' "$tmp/$case.0.err" || bad "local rank past the GPUs: $(cat "$tmp/$case.0.err")"

case=nccl-comm-id  # NCCL_COMM_ID: NCCL's own bootstrap, nothing shared on the host
start 0 -- SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_JOB_ID=5 NCCL_COMM_ID=10.0.0.1:23456
finish
grep -q "NCCL's bootstrap at NCCL_COMM_ID=10.0.0.1:23456" "$tmp/$case.0.out" || bad "NCCL_COMM_ID not taken: $(cat "$tmp/$case.0.out")"

if ((failures > 0)); then
  echo "launch matrix: $failures failure(s); the logs:"
  for case in $(ls "$tmp" | sed -n 's/\.[0-9]*\.\(out\|err\)$//p' | sort -u); do show; done
  exit 1
fi
echo "launch matrix: single process, torchrun (1 and 2 nodes), Slurm (file, stale id ignored, files removed), Open MPI under sbatch, missing rank (tcp, file), one rank failing, bad input, NCCL_COMM_ID: all pass"
