#!/usr/bin/env bash
# The device probe's rehearsal: the whole probe on this machine, without a GPU, against an already
# built tree (PROBE_DRY=1, PROBE_TREE). Every step must run and end pass, info or dry (a device
# step stopped at the device query, as it must here), the launch matrix must pass, the whole run
# must stay inside its 420 s budget, and missing packages must stop it at once with the fix.
#   gpu_labs/tests/device_probe_dry_test.sh <built tree>
set -u -o pipefail
tree=${1:?usage: device_probe_dry_test.sh <built tree with bin/test_gpu_labs>}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
bad() { echo "FAIL: $*"; status=1; }

start=$SECONDS
PROBE_DRY=1 PROBE_TREE=$tree PROBE_DIR=$tmp/probe OUT= "$repo/gpu_labs/device_probe.sh" >"$tmp/console" 2>&1
rc=$?
took=$((SECONDS - start))
summary=$tmp/probe/summary.md
[[ $rc -eq 0 ]] || bad "the dry run exited $rc (a step failed for a reason other than the missing device)"
[[ -f $summary ]] || bad "no summary written"
grep -q 'of a 420 s budget' "$summary" || bad "the budget is not 420 s"
((took < 420)) || bad "the dry run took $took s, over its 420 s budget"
for step in environment build tests launch 'lab allreduce_bw r1 nccl' 'lab tp_ffn r4 emulated' 'lab zero3 r3 emulated' grader nccl-info memcheck; do
  grep -q "^| $step |" "$summary" || bad "no row for step '$step' in the summary"
done
grep -q '^| launch | pass |' "$summary" || bad "the launch matrix did not pass"
grep -q '^| lab tp_ffn r4 emulated | dry | .*device query' "$summary" || bad "the labs did not run up to the device query"
if grep -E '^\| [^|]+ \| (FAIL|skipped) \|' "$summary"; then bad "a step failed or was skipped (above)"; fi

# Missing packages: stop before anything else, naming them and the fix.
mkdir -p "$tmp/nodeps/debs"
PROBE_IGNORE_SYSTEM_PACKAGES=1 GPU_DEPS_DIR=$tmp/nodeps PROBE_DIR=$tmp/probe2 "$repo/gpu_labs/device_probe.sh" >"$tmp/console2" 2>&1
rc=$?
[[ $rc -eq 2 ]] || bad "missing packages: exit $rc, not 2"
grep -q 'STOP: the header packages libeigen3-dev' "$tmp/console2" || bad "missing packages are not named"
grep -q 'offline_deps.sh fetch' "$tmp/console2" || bad "missing packages: the fix is not given"
grep -q '== 2. build' "$tmp/console2" && bad "the probe went on to build without its packages"

if ((status != 0)); then
  echo "--- console of the dry run"; cat "$tmp/console"; echo "--- summary"; cat "$summary" 2>/dev/null
  echo "--- console without packages"; cat "$tmp/console2"
  exit 1
fi
echo "device probe dry run: every step pass, info or dry, in $took s of 420; missing packages stop it with the fix"
