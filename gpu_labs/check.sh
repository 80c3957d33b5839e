#!/usr/bin/env bash
# The one script to run on a GPU machine: configures and builds the GPU labs for both impls,
# runs the device tests and every lab (solution, and the current student code), and prints one
# table. Exits non-zero if the solution build fails, a solution test fails, or a solution lab
# does not pass its check. Student labs that are not implemented yet are reported, not failed.
#
#   gpu_labs/check.sh                     # everything, on a GPU machine
#   gpu_labs/check.sh --build-only        # configure and build as a device run does; no GPU needed
#   gpu_labs/check.sh --impl solution     # one impl only (solution, student or both)
#   BUILD_ROOT=/tmp/b JOBS=8 LAB_TIMEOUT=120 EMULATED_RANKS="4 3" gpu_labs/check.sh
#
# Environment: BUILD_ROOT (default build/ of this checkout), JOBS (default nproc), LAB_TIMEOUT
# (seconds per lab run, default 150), EMULATED_RANKS (rank counts emulated on one GPU, default
# "4 3"), MGPU_WERROR (ON or OFF, default ON), GPU_DEPS (where the header libraries come from:
# carried = the .deb files of gpu_labs/offline_deps.sh, fetched first if absent, and checked to be
# the ones used; system = the machine's own; auto = carried when present, else system. Default:
# carried with --build-only, auto otherwise).
set -u -o pipefail

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

build_only=0
impl_choice=both
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-only) build_only=1 ;;
    --impl) impl_choice=${2:-}; shift ;;
    --impl=*) impl_choice=${1#--impl=} ;;
    -h|--help) usage; exit 0 ;;
    *) echo "check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The student distribution has no solutions/: there only the student impl exists.
if [[ ! -d $repo/solutions/gpu_labs && $impl_choice != student ]]; then
  echo "check.sh: no solutions/gpu_labs in this copy: building and running the student impl only"
  impl_choice=student
fi
case $impl_choice in
  both) impls=(solution student) ;;
  solution|student) impls=("$impl_choice") ;;
  *) echo "check.sh: --impl takes solution, student or both, not '$impl_choice'" >&2; exit 2 ;;
esac

build_root=${BUILD_ROOT:-$repo/build}
jobs=${JOBS:-$(nproc)}
lab_timeout=${LAB_TIMEOUT:-150}
read -r -a emulated_ranks <<<"${EMULATED_RANKS:-4 3}"
werror=${MGPU_WERROR:-ON}
deps_mode=${GPU_DEPS:-$([[ $build_only -eq 1 ]] && echo carried || echo auto)}
# CMake 4 refuses package configs that ask for policies older than 3.5 unless told this; older
# CMake ignores it. Pip's cmake on a GPU machine may be a 4.x.
export CMAKE_POLICY_VERSION_MINIMUM=${CMAKE_POLICY_VERSION_MINIMUM:-3.5}
logs=$build_root/gpu-check-logs
mkdir -p "$logs"
targets=(test_gpu_labs gpu_allreduce_bw gpu_tp_ffn gpu_zero3 gpu_measure_hardware)
status=0
rows=()

say() { printf '%s\n' "$*"; }
# Line-buffered output, so a program that crashes or is killed still leaves its log behind.
# timeout -k: a program that ignores SIGTERM (stuck in a driver call) is killed 10 s later.
run_logged() {  # run_logged <seconds> <log> <command...>
  local secs=$1 log=$2; shift 2
  if command -v stdbuf >/dev/null 2>&1; then
    timeout -k 10 "$secs" stdbuf -oL -eL "$@" >"$log" 2>&1
  else
    timeout -k 10 "$secs" "$@" >"$log" 2>&1
  fi
}

# One check.sh at a time per build root: the build trees and the unpacked packages are shared.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$build_root/.gpu-check.lock"
  if ! flock -n 9; then
    say "check.sh: another check.sh is using $build_root; waiting for it"
    flock 9
  fi
fi

ngpu=0
if [[ $build_only -eq 0 ]]; then
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [[ "${ngpu:-0}" -lt 1 ]]; then
    say "check.sh: no GPU visible (nvidia-smi -L lists none); the labs need one. Nothing run."
    say "          (gpu_labs/check.sh --build-only builds everything without a GPU)"
    exit 1
  fi
  say "check.sh: $ngpu GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)"
fi

# --- where the dependencies come from --------------------------------------------------------
# A machine without a package registry gets the Debian packages carried in build/gpu-deps
# (gpu_labs/offline_deps.sh), and NCCL from Python's nvidia-nccl wheel when the CUDA toolkit
# has no nccl.h. (The project's CMakeLists sets ccache as the compiler launcher when there is one.)
deps_args=()
nccl_args=()
deps_root=""
debs_dir=${GPU_DEPS_DIR:-$repo/build/gpu-deps}/debs
case $deps_mode in
  carried|auto)
    if ! ls "$debs_dir"/*.deb >/dev/null 2>&1 && [[ $deps_mode == carried ]]; then
      say "check.sh: no carried packages in $debs_dir: fetching them (gpu_labs/offline_deps.sh fetch)"
      "$repo/gpu_labs/offline_deps.sh" fetch >"$logs/deps-fetch.log" 2>&1 ||
        { say "check.sh: fetching failed: see $logs/deps-fetch.log (or GPU_DEPS=system)"; tail -3 "$logs/deps-fetch.log"; exit 1; }
    fi
    if ls "$debs_dir"/*.deb >/dev/null 2>&1; then
      deps_root=$("$repo/gpu_labs/offline_deps.sh" unpack) || { say "check.sh: unpacking the carried packages failed"; exit 1; }
      deps_args+=("-DCMAKE_PREFIX_PATH=$deps_root")
      say "check.sh: header libraries: carried packages in $deps_root ($(cd "$debs_dir" && ls ./*.deb | sed 's|^\./||; s/_.*//' | xargs))"
    else
      say "check.sh: header libraries: this machine's own (no carried packages in $debs_dir)"
    fi ;;
  system) say "check.sh: header libraries: this machine's own (GPU_DEPS=system)" ;;
  *) say "check.sh: GPU_DEPS='$deps_mode': use carried, system or auto"; exit 2 ;;
esac

nccl_version() {  # nccl_version <include dir>
  sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$1/nccl.h" | paste -sd. -
}
nccl_include=""
for d in /usr/local/cuda/include /usr/include; do
  [[ -f $d/nccl.h ]] && { nccl_include=$d; break; }
done
if [[ -n $nccl_include ]]; then
  say "check.sh: NCCL $(nccl_version "$nccl_include") from $nccl_include"
else
  # Python's nvidia-nccl wheels put nccl.h and libnccl.so.2 under site-packages/nvidia/...;
  # look wherever the nvidia namespace package lives.
  wheel_include=$(python3 - 2>/dev/null <<'EOF' || true
import os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
for root in roots:
    for here, _, files in os.walk(root):
        if "nccl.h" in files:
            print(here)
            raise SystemExit
EOF
)
  if [[ -n $wheel_include ]]; then
    wheel_lib=$(ls "$wheel_include"/../lib/libnccl.so* 2>/dev/null | head -1)
    if [[ -n $wheel_lib ]]; then
      nccl_args+=("-DMGPU_NCCL_INCLUDE=$wheel_include" "-DMGPU_NCCL_LIBRARY=$wheel_lib")
      say "check.sh: NCCL $(nccl_version "$wheel_include") from Python's wheel: $wheel_include, $wheel_lib"
    else
      say "check.sh: the NCCL wheel has nccl.h ($wheel_include) but no libnccl.so next to it"
    fi
  else
    say "check.sh: no nccl.h in the CUDA toolkit, /usr/include or a Python nvidia-nccl wheel; configure will say so"
  fi
fi

# --- build ---------------------------------------------------------------------------------
# With carried packages, every package CMake found and the include path the tests compile
# with must lie inside the unpacked folder: otherwise the build here proves nothing about a
# machine that has only the carried ones.
verify_carried() {  # verify_carried <build dir>
  local dir=$1 bad=0 var val
  for var in Eigen3_DIR doctest_DIR nlohmann_json_DIR CLI11_DIR fmt_DIR LIBZIP_INCLUDE_DIR LIBZIP_LIBRARY; do
    val=$(sed -n "s/^$var:[A-Z]*=//p" "$dir/CMakeCache.txt")
    if [[ $val != "$deps_root"/* ]]; then
      say "   $var=$val is not inside the carried packages ($deps_root)"; bad=1
    fi
  done
  if ! grep -q -- "-isystem $deps_root/include " "$dir/compile_commands.json"; then
    say "   no compile command includes $deps_root/include (is doctest's config still pointing at /usr?)"; bad=1
  fi
  return $bad
}

# Whether every header the carried packages hold is this machine's own, byte for byte (the same
# package versions): a build against either then compiles the same code.
carried_headers_are_installed() {
  [[ -n $deps_root && -d $deps_root/include ]] || return 1
  local f
  while IFS= read -r -d '' f; do
    cmp -s "$f" "/usr/include/${f#"$deps_root"/include/}" || return 1
  done < <(find "$deps_root/include" -type f -print0)
}

configure() {  # configure <dir> <cmake args...>
  local dir=$1 fresh=(); shift
  # Other arguments than last time (packages, NCCL, warnings): start from an empty cache, so no
  # package found before is kept. The object files stay, so this costs only the configure.
  if [[ -f $dir/CMakeCache.txt && "$(cat "$dir/.check-args" 2>/dev/null)" != "$*" ]]; then fresh=(--fresh); fi
  local log=$logs/configure-$(basename "$dir").log
  if ! cmake "${fresh[@]}" -S "$repo" -B "$dir" "$@" >"$log" 2>&1; then
    say "   configure failed: see $log"; tail -8 "$log"; return 1
  fi
  printf '%s' "$*" >"$dir/.check-args"
}

# The project's default build type, so that a device run builds what ./mgpu builds, and the
# build-only check below shares its compiled objects.
build_type=RelWithDebInfo
# Where the carried headers are this machine's own, --build-only compiles against this machine's
# copies: the same code, and with ccache the very objects the project's own build made, so the
# check costs links instead of a second compile of the course. Decided once, for both impls.
compile_against_installed=0
if [[ $build_only -eq 1 && -n $deps_root ]] && carried_headers_are_installed; then
  compile_against_installed=1
fi

build() {  # build <impl>
  local impl=$1 dir=$build_root/gpu-$1 t0=$SECONDS
  local common=(-G Ninja -DMGPU_IMPL="$impl" -DMGPU_CUDA=ON -DCMAKE_BUILD_TYPE=$build_type
                -DMGPU_WERROR="$werror" -DMGPU_GPU_CHECK_TREE=ON "${nccl_args[@]}")
  say "== configure + build ($impl, $build_type, MGPU_WERROR=$werror) in $dir"
  configure "$dir" "${common[@]}" "${deps_args[@]}" || return 1
  if [[ -n $deps_root && $deps_mode == carried ]] && ! verify_carried "$dir"; then
    say "   the build would not use the carried packages only"; return 1
  fi
  if [[ $compile_against_installed -eq 1 ]]; then
    say "   the carried headers are this machine's own: compiling against this machine's copies"
    configure "$dir" "${common[@]}" || return 1
  fi
  if ! cmake --build "$dir" -j "$jobs" --target "${targets[@]}" >"$logs/build-$impl.log" 2>&1; then
    say "   build failed: see $logs/build-$impl.log"
    grep -m8 -E 'error|FAILED' "$logs/build-$impl.log"
    return 1
  fi
  local warnings
  warnings=$(grep -c 'warning' "$logs/build-$impl.log" || true)
  say "   built in $((SECONDS - t0)) s ($warnings lines mentioning a warning)"
}
start=$SECONDS
built=()
for impl in "${impls[@]}"; do
  if build "$impl"; then
    built+=("$impl")
  elif [[ $impl == solution ]]; then
    say "solution build failed"; exit 1
  else
    say "student build failed: its labs are reported as build-failed"
    [[ $build_only -eq 1 ]] && status=1
  fi
done
say "   builds took $((SECONDS - start)) s"
if [[ $build_only -eq 1 ]]; then
  say "check.sh --build-only: $([[ $status -eq 0 ]] && echo OK || echo FAILED) (${built[*]:-nothing} built; logs in $logs)"
  exit $status
fi

# --- device tests (solution build) --------------------------------------------------------
# MGPU_REQUIRE_GPU: on a GPU machine a device test that finds no usable device fails, not skips.
if [[ " ${built[*]} " == *" solution "* ]]; then
  if MGPU_REQUIRE_GPU=1 run_logged 300 "$logs/tests-solution.log" "$build_root/gpu-solution/bin/test_gpu_labs" --no-intro; then
    tests_result=pass
  else
    tests_result=FAIL; status=1
  fi
  say "== device + host tests (solution): $tests_result  ($(grep -m1 'test cases' "$logs/tests-solution.log" | sed 's/.*test cases: *//'))"
fi

# --- labs --------------------------------------------------------------------------------
# One run per (lab, impl, ranks). One GPU: 1 rank on NCCL, and each of $EMULATED_RANKS ranks
# emulated on it (checks the multi-rank code; timings not representative). Several GPUs: 1 and
# all of them. tp_ffn moves its default hidden width to one the rank count divides.
run_lab() {  # run_lab <impl> <lab> <ranks> <backend> [extra args...]
  local impl=$1 lab=$2 ranks=$3 backend=$4; shift 4
  local bin=$build_root/gpu-$impl/bin/gpu_$lab log=$logs/${lab}-${impl}-r${ranks}-${backend}.log line
  if [[ ! -x $bin || " ${built[*]} " != *" $impl "* ]]; then
    rows+=("$lab $impl $ranks $backend build-failed - - - -")
    return
  fi
  run_logged "$lab_timeout" "$log" "$bin" --ranks "$ranks" --backend "$backend" "$@"
  local rc=$?
  line=$(grep -m1 '^RESULT ' "$log" || true)
  if [[ -z $line ]]; then
    local why=crash; [[ $rc -eq 124 || $rc -eq 137 ]] && why=timeout
    rows+=("$lab $impl $ranks $backend $why - - - $(basename "$log")")
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
if [[ $ngpu -gt 1 ]]; then
  configs+=("$ngpu nccl")
else
  for n in "${emulated_ranks[@]}"; do configs+=("$n emulated"); done
fi
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
