#!/usr/bin/env bash
# One run on a GPU machine that learns everything the GPU labs need to know from it, in at most
# 7 minutes (one try of a 15-minute lease, with room to spare): the header packages first (it
# stops at once, saying what to carry, when they are missing), the environment, one build
# (exactly check.sh's, warnings reported but not fatal), the tests with device tests required,
# the launch matrix, every lab at 1 rank (NCCL) and at 4 and 3 ranks emulated on one GPU, NCCL's
# own view, compute-sanitizer's memcheck on the small device tests (a machine that refuses it is
# noted, not failed) and, with PROBE_GRADER=1, the grader on the GPU labs. NCCL speaks at WARN.
# Every step prints its elapsed time; a step that fails says why and the next one runs anyway.
#
#   gpu_labs/device_probe.sh
#   PROBE_BUDGET=420 JOBS=16 PROBE_GRADER=1 gpu_labs/device_probe.sh
#   PROBE_DRY=1 PROBE_TREE=build/solution gpu_labs/device_probe.sh   # here, without a GPU
#
# It writes a summary (Markdown, the tables the labs' READMEs are filled from) and keeps every
# log: in $OUT when that variable names a writable folder (probe-summary.md, probe-console.log,
# probe-logs.tar.gz), and always in build/device-probe/ (PROBE_DIR moves it). PROBE_BUDGET is the
# whole run's time limit in seconds (default 420): each step is cut to what is left, and steps
# that no longer fit are skipped with a note. PROBE_DRY=1 is the rehearsal on a machine without a
# GPU: every step runs its real command, and a device step that stops only because no device can
# be used is recorded as `dry` instead of failing; PROBE_TREE names a built tree to use instead of
# building. Exit status: 0 when every step passed (or was dry), 1 otherwise, 2 when the packages
# are missing.
set -u -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
budget=${PROBE_BUDGET:-420}
dry=${PROBE_DRY:-0}
# NCCL's warnings, not its chatter, unless the caller asked for more (step 5 asks for INFO).
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
jobs=${JOBS:-$(nproc)}
probe=${PROBE_DIR:-$repo/build/device-probe}
logs=$probe/logs
rm -rf "$probe"
mkdir -p "$logs"
out_dir=""
if [[ -n ${OUT:-} && -d ${OUT:-} && -w ${OUT:-} ]]; then out_dir=$OUT; fi
console=$probe/console.log
summary=$probe/summary.md
linebuf=()
command -v stdbuf >/dev/null 2>&1 && linebuf=(stdbuf -oL -eL)
exec > >("${linebuf[@]}" tee -a "$console") 2>&1

t0=$SECONDS
overall=0
steps=()        # "name|status|seconds|note" for the summary
say() { printf '[%4ds] %s\n' $((SECONDS - t0)) "$*"; }
left() { echo $((budget - (SECONDS - t0))); }
record() { steps+=("$1|$2|$3|$4"); [[ $2 == pass || $2 == info || $2 == dry ]] || overall=1; }
# In a dry run, a device step that failed only because no CUDA device can be used is `dry`.
no_device_in() { [[ $dry == 1 ]] && grep -qE 'no CUDA device|CUDA device query failed|no GPU visible|need a CUDA device' "$1" 2>/dev/null; }
# step_timeout <wanted seconds>: what a step may use, keeping 20 s for the summary; 0 if none.
step_timeout() {
  local want=$1 avail
  avail=$(( $(left) - 20 ))
  (( avail < want )) && want=$avail
  (( want < 5 )) && want=0
  echo "$want"
}
run_logged() {  # run_logged <seconds> <log> <command...>: line-buffered, killed 10 s after TERM
  local secs=$1 log=$2; shift 2
  timeout -k 10 "$secs" "${linebuf[@]}" "$@" >"$log" 2>&1
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

say "device_probe: repository $repo, budget ${budget} s, jobs $jobs$([[ $dry == 1 ]] && echo ', DRY RUN (no device expected)')"

# --- 0. packages --------------------------------------------------------------------------------
# Without the header packages the build fails and every later step is lost: check them before
# anything else, and stop with what to do. Each must be carried (a .deb in build/gpu-deps/debs)
# or installed on this machine.
debs_dir=${GPU_DEPS_DIR:-$repo/build/gpu-deps}/debs
read -r -a wanted <<<"$(sed -n 's/^packages: //p' < <(GPU_DEPS_DIR=${GPU_DEPS_DIR:-$repo/build/gpu-deps} "$repo/gpu_labs/offline_deps.sh" list 2>/dev/null))"
missing=()
for p in "${wanted[@]}"; do
  if ls "$debs_dir/${p}_"*.deb >/dev/null 2>&1; then continue; fi
  [[ ${PROBE_IGNORE_SYSTEM_PACKAGES:-0} != 1 ]] && dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' && continue
  missing+=("$p")
done
if ((${#wanted[@]} == 0)); then
  say "device_probe: cannot read the package list from gpu_labs/offline_deps.sh list; stopping"
  exit 2
fi
if ((${#missing[@]} > 0)); then
  say "device_probe: STOP: the header packages ${missing[*]} are neither carried in $debs_dir nor installed."
  say "  Fix: on a machine with a package registry run gpu_labs/offline_deps.sh fetch and carry build/gpu-deps"
  say "  along (the device run's carry list), or install them here (apt-get install ${missing[*]})."
  exit 2
fi
say "== 0. packages: all ${#wanted[@]} carried or installed"

# --- 1. environment ---------------------------------------------------------------------------
s=$SECONDS
say "== 1. environment"
env_log=$logs/environment.log
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(uname -srm); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "cpus: $(nproc); memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>} NCCL_*: $(env | grep '^NCCL_' | xargs)"
  echo "--- nvidia-smi"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,mig.mode.current,compute_mode,pci.bus_id,clocks.max.sm,power.limit \
      --format=csv 2>&1
    nvidia-smi 2>&1 | grep -o 'CUDA Version: [0-9.]*' || echo "(nvidia-smi shows no CUDA version)"
    nvidia-smi topo -m 2>&1 | head -12
  else
    echo "nvidia-smi: not found"
  fi
  echo "--- toolchain"
  for tool in nvcc c++ g++ gcc cmake ninja ccache python3 compute-sanitizer; do
    if command -v "$tool" >/dev/null 2>&1; then
      printf '%-18s %s: %s\n' "$tool" "$(command -v "$tool")" "$("$tool" --version 2>&1 | grep -m1 -iE 'release|version|[0-9]+\.[0-9]+' | head -c 160)"
    elif [[ -x /usr/local/cuda/bin/$tool ]]; then
      printf '%-18s %s: %s\n' "$tool" "/usr/local/cuda/bin/$tool" "$("/usr/local/cuda/bin/$tool" --version 2>&1 | grep -m1 -iE 'release|version' | head -c 160)"
    else
      printf '%-18s not found\n' "$tool"
    fi
  done
  echo "--- NCCL candidates (check.sh takes the toolkit's, then /usr/include, then a Python wheel's)"
  for d in /usr/local/cuda/include /usr/include; do
    [[ -f $d/nccl.h ]] && echo "header $d/nccl.h: $(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$d/nccl.h" | paste -sd. -)"
  done
  python3 -c 'import nvidia, os; [print("wheel", os.path.join(r, d)) for r in nvidia.__path__ for d in os.listdir(r) if "nccl" in d]' 2>/dev/null ||
    echo "no Python nvidia namespace package"
  echo "--- cuBLAS and the CUDA runtime in the toolkit (CMake's FindCUDAToolkit looks there)"
  ls /usr/local/cuda/include/cublas_v2.h /usr/local/cuda/lib64/libcublas.so* /usr/local/cuda/lib64/libcudart.so* 2>&1 | head -8
  echo "--- header libraries"
  if ls "$repo"/build/gpu-deps/debs/*.deb >/dev/null 2>&1; then
    echo "carried: $(cd "$repo/build/gpu-deps/debs" && ls ./*.deb | sed 's|^\./||' | xargs)"
  else
    echo "carried: none (build/gpu-deps/debs is absent)"
  fi
  for p in libeigen3-dev doctest-dev nlohmann-json3-dev libcli11-dev libfmt-dev libzip-dev libseccomp-dev; do
    printf 'system %-20s %s\n' "$p" "$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo 'not installed')"
  done
} >"$env_log" 2>&1
cat "$env_log"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
mig=$(nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader 2>/dev/null | head -1)
cmode=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -1)
cuda_drv=$(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -1 | sed 's/.*: //')
nvcc_ver=$( (command -v nvcc >/dev/null && nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
if [[ ${ngpu:-0} -ge 1 ]]; then
  record environment info $((SECONDS - s)) "$ngpu GPU(s): $gpu_name, driver $driver (CUDA $cuda_drv), MIG $mig, compute mode $cmode"
else
  say "no GPU visible to nvidia-smi: the device steps below will fail, each saying why"
  record environment "$([[ $dry == 1 ]] && echo dry || echo FAIL)" $((SECONDS - s)) "no GPU visible (nvidia-smi -L lists none)"
fi

# --- 2. build -----------------------------------------------------------------------------------
# Exactly what check.sh builds for a device run (solution impl), through check.sh itself, once:
# warnings are reported, never fatal here, since a new warning from this machine's compiler must
# not cost the rest of the probe (they are fixed afterwards, where builds are free).
s=$SECONDS
build_log=$logs/build.log
bin=${PROBE_TREE:+$(cd "$PROBE_TREE" && pwd)/bin}
bin=${bin:-$repo/build/gpu-solution/bin}
tmo=$(step_timeout 300)
if [[ -n ${PROBE_TREE:-} ]]; then
  say "== 2. build: using the built tree $PROBE_TREE (PROBE_TREE)"
  record build info 0 "built tree $PROBE_TREE"
elif (( tmo == 0 )); then
  record build skipped 0 "out of time budget"
else
  say "== 2. build (gpu_labs/check.sh --build-only --impl solution, MGPU_WERROR=OFF)"
  MGPU_WERROR=OFF JOBS=$jobs GPU_DEPS=auto run_logged "$tmo" "$build_log" "$repo/gpu_labs/check.sh" --build-only --impl solution
  rc=$?
  cat "$build_log"
  cp "$repo"/build/gpu-check-logs/{configure,build}-solution.log "$logs/" 2>/dev/null
  warnings=$(grep -c -- 'warning:' "$logs/build-solution.log" 2>/dev/null || true)
  if (( ${warnings:-0} > 0 )); then
    say "the build printed ${warnings} warning lines (to fix; not fatal here):"
    grep -m10 -- 'warning:' "$logs/build-solution.log"
  fi
  deps_line=$(grep -h -m1 'header libraries:' "$build_log" | sed 's/^check.sh: //')
  nccl_line=$(grep -h -m1 'NCCL ' "$build_log" | sed 's/^check.sh: //')
  case $rc in
    0) record build pass $((SECONDS - s)) "${nccl_line}; ${deps_line}; ${warnings:-0} warning lines" ;;
    124|137) record build FAIL $((SECONDS - s)) "timed out after $tmo s" ;;
    *) record build FAIL $((SECONDS - s)) "see logs/build.log: $(grep -m1 -E 'error|failed' "$build_log" | head -c 200)" ;;
  esac
fi
if [[ -x $bin/gpu_tp_ffn ]]; then
  say "libraries the labs load:"
  ldd "$bin/gpu_tp_ffn" 2>&1 | grep -E 'nccl|cublas|cudart|fmt|stdc\+\+' | sed 's/^/  /' | tee "$logs/ldd.log"
fi
have_bin() { [[ -x $bin/$1 ]]; }

# --- 3. tests -----------------------------------------------------------------------------------
s=$SECONDS
say "== 3. test_gpu_labs, device tests required (MGPU_REQUIRE_GPU=1), with durations"
tests_log=$logs/tests.log
tmo=$(step_timeout 150)
if ! have_bin test_gpu_labs; then
  record tests skipped 0 "not built"
elif (( tmo == 0 )); then
  record tests skipped 0 "out of time budget"
else
  MGPU_REQUIRE_GPU=1 run_logged "$tmo" "$tests_log" "$bin/test_gpu_labs" --no-intro --duration=true
  rc=$?
  # Host tests alone, so that a dry run still shows they pass.
  if no_device_in "$tests_log"; then
    run_logged "$tmo" "$logs/host-tests.log" "$bin/test_gpu_labs" --no-intro -tse=device
    say "host tests alone: $(grep -m1 'test cases' "$logs/host-tests.log" | tr -s ' ') (exit $?)"
  fi
  (exit $rc)
  rc=$?
  cat "$tests_log"
  counts=$(grep -m1 'test cases' "$tests_log" | sed 's/.*test cases: *//' | tr -s ' ')
  if (( rc == 0 )); then record tests pass $((SECONDS - s)) "$counts"
  elif no_device_in "$tests_log"; then record tests dry $((SECONDS - s)) "device tests need a GPU; $counts"
  elif (( rc == 124 || rc == 137 )); then record tests FAIL $((SECONDS - s)) "timed out after $tmo s; $counts"
  else record tests FAIL $((SECONDS - s)) "exit $rc; $counts"
  fi
fi

# --- 3b. launch matrix ---------------------------------------------------------------------------
# Processes started as torchrun, srun and mpirun start them form one job each; host code, so it
# also runs, and must pass, in a dry run.
s=$SECONDS
say "== 3b. launch matrix (tests/launch_matrix_test.sh)"
tmo=$(step_timeout 60)
if [[ ! -x $bin/gpu_launch_worker ]]; then
  record launch skipped 0 "not built"
elif (( tmo == 0 )); then
  record launch skipped 0 "out of time budget"
else
  run_logged "$tmo" "$logs/launch.log" "$repo/gpu_labs/tests/launch_matrix_test.sh" "$bin/gpu_launch_worker"
  rc=$?
  tail -3 "$logs/launch.log"
  if (( rc == 0 )); then record launch pass $((SECONDS - s)) "$(tail -1 "$logs/launch.log" | head -c 160)"
  else record launch FAIL $((SECONDS - s)) "exit $rc: $(grep -m1 FAIL "$logs/launch.log" | head -c 200)"
  fi
fi

# --- 4. labs ------------------------------------------------------------------------------------
# 1 rank on NCCL, then 4 and 3 ranks emulated on GPU 0 (3 does not divide tp_ffn's default f;
# the lab moves f to one it does and says so).
lab_rows=()
say "== 4. labs: 1 rank (nccl), 4 and 3 ranks (emulated)"
for cfg in "1 nccl" "4 emulated" "3 emulated"; do
  read -r ranks backend <<<"$cfg"
  for lab in allreduce_bw tp_ffn zero3; do
    s=$SECONDS
    log=$logs/${lab}-r${ranks}-${backend}.log
    name="lab $lab r$ranks $backend"
    tmo=$(step_timeout 120)
    if ! have_bin "gpu_$lab"; then record "$name" skipped 0 "not built"; continue; fi
    if (( tmo == 0 )); then record "$name" skipped 0 "out of time budget"; continue; fi
    args=(--ranks "$ranks" --backend "$backend")
    [[ $lab == allreduce_bw ]] && args+=(--max-bytes $((64 << 20)))
    say "-- gpu_$lab ${args[*]}"
    run_logged "$tmo" "$log" "$bin/gpu_$lab" "${args[@]}"
    rc=$?
    cat "$log"
    line=$(grep -m1 '^RESULT ' "$log" || true)
    check=$(field check "$line")
    lab_rows+=("$lab|$ranks|$backend|$rc|$((SECONDS - s))|$line")
    if [[ $check != pass ]] && no_device_in "$log"; then
      record "$name" dry $((SECONDS - s)) "stopped at the device query, as expected here"
      continue
    fi
    if [[ -z $line ]]; then
      record "$name" FAIL $((SECONDS - s)) "$([[ $rc -eq 124 || $rc -eq 137 ]] && echo "timed out after $tmo s" || echo "exit $rc, no RESULT line")"
    elif [[ $check == pass ]]; then
      record "$name" pass $((SECONDS - s)) "exit $rc"
    else
      record "$name" FAIL $((SECONDS - s)) "check=$check, exit $rc: $(grep -m1 '^error:' "$log" | head -c 200)"
    fi
  done
done

# --- 4b. the grader on the GPU labs -------------------------------------------------------------
# mgpu-grade grades the GPU labs of a fixture whose tp_ffn prints a passing RESULT line and writes
# nothing else: the reference labs run isolated with the device nodes (so this shows whether CUDA
# works in the grader's sandbox), the fixture's tp_ffn must be `no-result`, and the two labs it
# leaves as skeletons `not-implemented`. Nothing may be `reference-error`.
s=$SECONDS
say "== 4b. grader: GPU labs of autograder/tests/fixtures/attacks/forged_gpu_result"
grade_log=$logs/grade.log
tmo=$(step_timeout 240)
gpu_tree=$repo/build/gpu-solution
if [[ ${PROBE_GRADER:-0} != 1 ]]; then
  # It builds the grader, another CUDA tree's worth of compiling: only when asked for.
  record grader info 0 "not run (PROBE_GRADER=1 runs it)"
elif [[ ! -f $gpu_tree/CMakeCache.txt ]]; then
  record grader skipped 0 "not configured"
elif (( tmo == 0 )); then
  record grader skipped 0 "out of time budget"
else
  # A copy of the repository without .git has no HEAD to take the skeletons from: ship them as a
  # release does (autograder/skeleton), for this run only.
  made_skeleton=0
  if [[ ! -d $repo/.git && ! -d $repo/autograder/skeleton ]]; then
    mkdir -p "$repo/autograder/skeleton" && cp -r "$repo/chapters" "$repo/gpu_labs" "$repo/autograder/skeleton/" && made_skeleton=1
  fi
  prefix=$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$gpu_tree/CMakeCache.txt")
  libs=${prefix:+$prefix/lib/x86_64-linux-gnu}
  # shellcheck disable=SC2016
  run_logged "$tmo" "$grade_log" env LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" bash -c \
    'cmake --build "$1" -j "$2" --target mgpu-grade && "$1/bin/mgpu-grade" grade "$3" --chapter gpu_labs \
       --work-dir "$4" --jobs "$2" --json "$5"' \
    _ "$gpu_tree" "$jobs" "$repo/autograder/tests/fixtures/attacks/forged_gpu_result" "$probe/grade" "$logs/grade.json"
  rc=$?
  (( made_skeleton )) && rm -rf "$repo/autograder/skeleton"
  tail -30 "$grade_log"
  row() { grep -E "^ *$1 +$2( |$)" "$grade_log" >/dev/null; }
  if grep -q 'reference-error' "$grade_log"; then
    record grader FAIL $((SECONDS - s)) "a reference lab failed under the grader: $(grep -m1 -A2 'reference-error' "$grade_log" | tr '\n' ' ' | head -c 200)"
  elif row no-result gpu.tp_ffn && row not-implemented gpu.zero3 && row not-implemented gpu.allreduce_bw; then
    record grader pass $((SECONDS - s)) "forged RESULT line: no-result; skeleton labs: not-implemented"
  else
    record grader FAIL $((SECONDS - s)) "exit $rc; expected gpu.tp_ffn no-result and the others not-implemented: see logs/grade.log"
  fi
fi

# --- 5. NCCL's own view -----------------------------------------------------------------------
s=$SECONDS
say "== 5. NCCL_DEBUG=INFO (version, transports), allreduce_bw at 1 rank, sizes up to 1 MiB"
nccl_log=$logs/nccl-info.log
tmo=$(step_timeout 60)
if ! have_bin gpu_allreduce_bw; then
  record nccl-info skipped 0 "not built"
elif (( tmo == 0 )); then
  record nccl-info skipped 0 "out of time budget"
else
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET,GRAPH run_logged "$tmo" "$nccl_log" \
    "$bin/gpu_allreduce_bw" --ranks 1 --backend nccl --max-bytes $((1 << 20))
  rc=$?
  grep 'NCCL INFO' "$nccl_log" | sed 's/^[^ ]* [^ ]* [^ ]* //' | awk '!seen[$0]++' | head -40
  version=$(grep -m1 -o 'NCCL version [^ ]*' "$nccl_log" || true)
  if [[ -n $version ]]; then
    record nccl-info pass $((SECONDS - s)) "$version; $(grep -c 'NCCL INFO' "$nccl_log") INFO lines"
  else
    if no_device_in "$nccl_log"; then record nccl-info dry $((SECONDS - s)) "no device"; else
    record nccl-info FAIL $((SECONDS - s)) "exit $rc, NCCL printed no version line: $(grep -m1 '^error:' "$nccl_log" | head -c 200)"; fi
  fi
fi

# --- 6. compute-sanitizer memcheck on the small device tests ----------------------------------
s=$SECONDS
say "== 6. compute-sanitizer --tool memcheck on the small device tests"
san_log=$logs/memcheck.log
sanitizer=$(command -v compute-sanitizer || true)
for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [[ -z $sanitizer && -x $c ]] && sanitizer=$c
done
small='gelu kernels*,row-major gemm helper*,emulated all_reduce*,ring all-reduce*,Adam kernel*,a rank that fails*'
tmo=$(step_timeout 150)
if [[ -z $sanitizer ]]; then
  record memcheck info 0 "compute-sanitizer not found"
elif ! have_bin test_gpu_labs; then
  record memcheck skipped 0 "not built"
elif (( tmo == 0 )); then
  record memcheck skipped 0 "out of time budget"
else
  MGPU_REQUIRE_GPU=1 run_logged "$tmo" "$san_log" "$sanitizer" --tool memcheck --error-exitcode 3 --print-limit 20 \
    "$bin/test_gpu_labs" --no-intro -ts=device -tc="$small"
  rc=$?
  tail -25 "$san_log"
  verdict=$(grep -m1 'ERROR SUMMARY' "$san_log" | sed 's/^=* *//')
  case $rc in
    0) record memcheck pass $((SECONDS - s)) "${verdict:-no summary line}" ;;
    3) record memcheck FAIL $((SECONDS - s)) "memory errors: ${verdict}" ;;
    124|137) record memcheck FAIL $((SECONDS - s)) "timed out after $tmo s" ;;
    *)
      # Lent machines may refuse the sanitizer's debugger interface: a fact to note, not a failure.
      if grep -qiE 'not supported|permission|insufficient|unable to (attach|start|connect)|debugger' "$san_log"; then
        record memcheck info $((SECONDS - s)) "refused by this machine: $(grep -m1 -iE 'not supported|permission|insufficient|unable|debugger' "$san_log" | head -c 160)"
      elif no_device_in "$san_log"; then
        record memcheck dry $((SECONDS - s)) "no device"
      else
        record memcheck FAIL $((SECONDS - s)) "exit $rc: ${verdict:-$(grep -m1 -iE 'error|not supported' "$san_log" | head -c 200)}"
      fi ;;
  esac
fi

# --- 7. summary ---------------------------------------------------------------------------------
say "== 7. summary"
{
  echo "# GPU labs: device probe"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $((SECONDS - t0)) s of a ${budget} s budget. GPU: ${gpu_name:-none} (driver ${driver:--}, CUDA ${cuda_drv:--}, MIG ${mig:--}, compute mode ${cmode:--}); nvcc ${nvcc_ver:--}; $(nproc) CPUs."
  echo
  # The test program prints this line only when the CUDA device query found nothing usable.
  query=$(grep -h -m1 '^gpu_labs: device tests' "$tests_log" 2>/dev/null | sed 's/^gpu_labs: device tests [^:]*: //')
  echo "Device query from the test program: ${query:-a usable CUDA device (no complaint printed)}."
  echo
  echo "## Steps"
  echo
  echo "| step | result | s | note |"
  echo "|---|---|---|---|"
  for r in "${steps[@]}"; do
    IFS='|' read -r a b c d <<<"$r"
    echo "| $a | $b | $c | ${d//|//} |"
  done
  echo
  echo "## Labs"
  echo
  echo "| lab | ranks | backend | check | err | ms | rate | ratios and bytes | s |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for r in "${lab_rows[@]}"; do
    IFS='|' read -r lab ranks backend rc secs line <<<"$r"
    rate=$(field tflops "$line"); [[ -n $rate ]] && rate="$rate TFLOP/s/GPU"
    [[ -z $rate ]] && rate=$(field busbw "$line") && [[ -n $rate ]] && rate="$rate GB/s busbw"
    extra=""
    for k in gemm_tflops vs_gemm vs_unsplit dp_ms vs_dp state_bytes formula_bytes device_bytes ledger_bytes ring_busbw ring_vs_nccl; do
      v=$(field "$k" "$line"); [[ -n $v ]] && extra+="$k=$v "
    done
    check=$(field check "$line")
    [[ -z $line ]] && check="no RESULT line (exit $rc)"
    err=$(field err "$line"); ms=$(field ms "$line")
    echo "| $lab | $ranks | $backend | $check | ${err:--} | ${ms:--} | ${rate:--} | ${extra:--} | $secs |"
  done
  echo
  echo "## Tests (durations and measured errors)"
  echo
  echo '```'
  grep -E '^\[doctest\] test cases|^[0-9.]+ s: |MESSAGE:|FAIL|ERROR|skipped' "$tests_log" 2>/dev/null | head -80
  echo '```'
  echo
  echo "## NCCL (NCCL_DEBUG=INFO)"
  echo
  echo '```'
  grep 'NCCL INFO' "$nccl_log" 2>/dev/null | sed 's/^[^ ]* [^ ]* [^ ]* //' | awk '!seen[$0]++' | head -25
  echo '```'
  echo
  echo "## RESULT lines"
  echo
  echo '```'
  for r in "${lab_rows[@]}"; do IFS='|' read -r _ _ _ _ _ line <<<"$r"; echo "${line:-}"; done
  echo '```'
  echo
  echo "## Environment"
  echo
  echo '```'
  cat "$env_log"
  echo '```'
} >"$summary"
say "summary: $summary"
if [[ -n $out_dir ]]; then
  cp "$summary" "$out_dir/probe-summary.md"
  tar -czf "$out_dir/probe-logs.tar.gz" -C "$probe" logs console.log summary.md 2>/dev/null
  say "copied to $out_dir: probe-summary.md, probe-logs.tar.gz (console: probe-console.log at the end)"
fi
say "device_probe: $([[ $overall -eq 0 ]] && echo 'every step passed (or was dry)' || echo 'some steps failed or were skipped (see the summary)') in $((SECONDS - t0)) s"
[[ -n $out_dir ]] && cp "$console" "$out_dir/probe-console.log"
exit $overall
