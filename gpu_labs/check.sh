#!/usr/bin/env bash
# The one script to run on a GPU machine: configures and builds the GPU labs for both impls,
# runs the device tests and every lab (solution, and the current student code), and prints one
# table. Exits non-zero if the solution build fails, a solution test fails, or a solution lab
# does not pass its check. Student labs that are not implemented yet are reported, not failed.
#
#   gpu_labs/check.sh                 # from the repository root or anywhere
#   BUILD_ROOT=/tmp/b JOBS=8 gpu_labs/check.sh
#   LAB_TIMEOUT=120 EMULATED_RANKS=4 gpu_labs/check.sh
set -u -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_root=${BUILD_ROOT:-$repo/build}
jobs=${JOBS:-$(nproc)}
lab_timeout=${LAB_TIMEOUT:-150}
emulated_ranks=${EMULATED_RANKS:-4}
logs=$build_root/gpu-check-logs
mkdir -p "$logs"
targets=(test_gpu_labs gpu_allreduce_bw gpu_tp_ffn gpu_zero3)
status=0
rows=()

say() { printf '%s\n' "$*"; }

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [[ "${ngpu:-0}" -lt 1 ]]; then
  say "check.sh: no GPU visible (nvidia-smi -L lists none); the labs need one. Nothing run."
  exit 1
fi
say "check.sh: $ngpu GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)"

# --- where the dependencies come from --------------------------------------------------------
# A machine without a package registry gets the Debian packages carried in build/gpu-deps
# (gpu_labs/offline_deps.sh), and NCCL from Python's nvidia-nccl wheel when the CUDA toolkit
# has no nccl.h.
extra=()
if [[ -d $repo/build/gpu-deps/debs ]]; then
  extra+=("-DCMAKE_PREFIX_PATH=$("$repo/gpu_labs/offline_deps.sh" unpack)")
fi
if [[ ! -f /usr/local/cuda/include/nccl.h && ! -f /usr/include/nccl.h ]]; then
  wheel=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
  if [[ -n $wheel && -f $wheel/include/nccl.h ]]; then
    extra+=("-DMGPU_NCCL_INCLUDE=$wheel/include" "-DMGPU_NCCL_LIBRARY=$(ls "$wheel"/lib/libnccl.so* | head -1)")
  fi
fi

# --- build both impls -------------------------------------------------------------------
build() {  # build <impl>
  local impl=$1 dir=$build_root/gpu-$1
  say "== configure + build ($impl) in $dir"
  if ! cmake -S "$repo" -B "$dir" -G Ninja -DMGPU_IMPL="$impl" -DMGPU_CUDA=ON \
         -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >"$logs/configure-$impl.log" 2>&1; then
    say "   configure failed: see $logs/configure-$impl.log"; tail -5 "$logs/configure-$impl.log"; return 1
  fi
  if ! cmake --build "$dir" -j "$jobs" --target "${targets[@]}" >"$logs/build-$impl.log" 2>&1; then
    say "   build failed: see $logs/build-$impl.log"; grep -m5 -E 'error' "$logs/build-$impl.log"; return 1
  fi
}
start=$SECONDS
build solution || { say "solution build failed"; exit 1; }
student_built=1
build student || { student_built=0; say "student build failed: its labs are reported as build-failed"; }
say "   builds took $((SECONDS - start)) s"

# --- device tests (solution build) --------------------------------------------------------
if timeout 300 "$build_root/gpu-solution/bin/test_gpu_labs" --no-intro >"$logs/tests-solution.log" 2>&1; then
  tests_result=pass
else
  tests_result=FAIL; status=1
fi
say "== device + host tests (solution): $tests_result  ($(grep -m1 'test cases' "$logs/tests-solution.log" | sed 's/.*test cases: *//'))"

# --- labs --------------------------------------------------------------------------------
# One run per (lab, impl, ranks). One GPU: 1 rank on NCCL, and $emulated_ranks ranks emulated on
# it (checks the multi-rank code; timings not representative). Several GPUs: 1 and all of them.
run_lab() {  # run_lab <impl> <lab> <ranks> <backend> [extra args...]
  local impl=$1 lab=$2 ranks=$3 backend=$4; shift 4
  local bin=$build_root/gpu-$impl/bin/gpu_$lab log=$logs/${lab}-${impl}-r${ranks}-${backend}.log line
  if [[ ! -x $bin ]]; then
    rows+=("$lab $impl $ranks $backend build-failed - - - -")
    return
  fi
  timeout "$lab_timeout" "$bin" --ranks "$ranks" --backend "$backend" "$@" >"$log" 2>&1
  local rc=$?
  line=$(grep -m1 '^RESULT ' "$log" || true)
  if [[ -z $line ]]; then
    local why=crash; [[ $rc -eq 124 ]] && why=timeout
    rows+=("$lab $impl $ranks $backend $why - - - -")
    [[ $impl == solution ]] && status=1
    return
  fi
  field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
  local check err ms rate
  check=$(field check); err=$(field err); ms=$(field ms)
  rate=$(field tflops); [[ -n $rate ]] && rate="${rate}TF/s"
  [[ -z $rate ]] && rate=$(field busbw) && [[ -n $rate ]] && rate="${rate}GB/s"
  rows+=("$lab $impl $ranks $backend ${check:-?} ${err:--} ${ms:--} ${rate:--} $(basename "$log")")
  if [[ $impl == solution && $check != pass ]]; then status=1; fi
}

configs=("1 nccl")
if [[ $ngpu -gt 1 ]]; then configs+=("$ngpu nccl"); else configs+=("$emulated_ranks emulated"); fi
impls=(solution)
[[ $student_built -eq 1 ]] && impls+=(student)
for impl in "${impls[@]}"; do
  for cfg in "${configs[@]}"; do
    read -r ranks backend <<<"$cfg"
    run_lab "$impl" allreduce_bw "$ranks" "$backend" --max-bytes $((64 << 20))
    run_lab "$impl" tp_ffn "$ranks" "$backend"
    run_lab "$impl" zero3 "$ranks" "$backend"
  done
done

# --- table ---------------------------------------------------------------------------------
say ""
printf '%-13s %-9s %5s %-9s %-16s %-10s %-10s %-12s %s\n' lab impl ranks backend check max_rel_err time_ms rate log
for r in "${rows[@]}"; do
  # shellcheck disable=SC2086
  printf '%-13s %-9s %5s %-9s %-16s %-10s %-10s %-12s %s\n' $r
done
say ""
say "ratios (goals: tp_ffn vs_gemm >= 0.8 at 1 rank; zero3 vs_dp <= 1.3; ring_vs_nccl for information):"
for f in "$logs"/allreduce_bw-*.log "$logs"/tp_ffn-solution-*.log "$logs"/zero3-solution-*.log; do
  [[ -f $f ]] || continue
  line=$(grep -m1 '^RESULT' "$f") || continue
  say "  $(basename "$f" .log): $(grep -o ' [a-z_]*vs_[a-z]*=[^ ]*' <<<"$line" | xargs)"
done
grep -l 'not representative' "$logs"/*.log >/dev/null 2>&1 && say "(emulated rows: timings not representative)"
say "logs: $logs   total $((SECONDS - start)) s   $([[ $status -eq 0 ]] && echo OK || echo FAILED)"
exit $status
