#!/usr/bin/env bash
# The student's copy as a student meets it: `mgpu-grade release` writes it from HEAD into a new
# folder, and there, from nothing, the commands of its README's first block run in order, the
# unwritten chapter failing the expected way; then one chapter's reference copied in goes green.
# Also what must never ship: hints in plain text, instructor-only pages, pointers to the reference.
#
# usage: test_release.sh SOURCE_ROOT MGPU_GRADE WORK
set -euo pipefail
ROOT=$1 GRADE=$2 WORK=$3
OUT=$WORK/course
rm -rf "$WORK"
mkdir -p "$WORK"

fail() { echo "test_release: FAILED: $*" >&2; exit 1; }
step() { echo; echo "test_release: --- $*"; }
# run LOG CMD...: run CMD in the release, its output in LOG and shown; returns CMD's status.
run() {
  local log=$1; shift
  (cd "$OUT" && "$@") >"$WORK/$log" 2>&1 && status=0 || status=$?
  cat "$WORK/$log"
  return $status
}
expect_in() { grep -qF -- "$2" "$WORK/$1" || fail "$1 lacks '$2'"; }

step "release of HEAD"
"$GRADE" release --allow-dirty "$OUT"
[ -x "$OUT/mgpu" ] || fail "no ./mgpu in the release"

step "what must not ship"
[ ! -d "$OUT/solutions" ] || fail "solutions/ shipped"
leftover=$(find "$OUT" -name hints.md)
[ -z "$leftover" ] || fail "hints in plain text: $leftover"
for hints in "$ROOT"/chapters/*/hints.md "$ROOT"/gpu_labs/*/hints.md; do
  rel=${hints#"$ROOT"/}
  [ -f "$OUT/$(dirname "$rel")/hints.sealed" ] || fail "$rel has no sealed copy in the release"
done
! grep -rlE '^### [123]$' "$OUT/chapters" "$OUT/gpu_labs" || fail "a hint level readable as text"
! grep -rl "build/solution" --include='*.md' "$OUT" || fail "a page points at build/solution"
! grep -rliE "chaff|wheat|proof slot|Gradescope emulation" "$OUT/README.md" ||
  fail "the student's README speaks of the instructor's machinery"

step "the README's student block names the commands this test runs"
block=$(awk '/^```sh$/ { on = 1; next } /^```$/ { if (on) exit } on' "$OUT/README.md")
named=$(sed -n 's|^\./mgpu \([a-z]*\).*|\1|p' <<<"$block" | sort -u | xargs)
[ "$named" = "grade hint predict submit test" ] ||
  fail "the README's first block names '$named'; this test runs grade hint predict submit test"

step "./mgpu test 11_1 on the skeleton: fails, naming what is not implemented"
if run test-skeleton.log ./mgpu test 11_1; then fail "the skeleton's tests passed"; fi
expect_in test-skeleton.log "not implemented: 11.1"

step "./mgpu hint 11_2 TODO"
todo=$(grep -ho 'TODO(11\.2 [a-z_0-9]*)' "$OUT"/chapters/11_2_data_parallel/*.cpp | head -n 1 |
       sed 's/TODO(11\.2 \(.*\))/\1/')
[ -n "$todo" ] || fail "no TODO(11.2 ...) in the 11.2 skeleton"
run hint.log ./mgpu hint 11_2 "$todo" || fail "./mgpu hint 11_2 $todo exited $status"
expect_in hint.log "hint 1 of 3"
grep -q "^11_2_data_parallel	$todo	1	" "$OUT/.mgpu/hints.tsv" || fail "the hint is not in the record"
if run hint3.log ./mgpu hint 11_2 "$todo" --level 3; then fail "level 3 opened before level 2"; fi

step "./mgpu predict 11_2 1"
run predict-record.log ./mgpu predict 11_2 1 5 || fail "recording a prediction exited $status"
# The question's command runs the student's unwritten formulas: no number, and a line that says
# which function of theirs it waits for.
run predict.log ./mgpu predict 11_2 1 || true
expect_in predict.log "not measured: it needs your 11.2"

step "./mgpu grade --chapter 11_1"
run grade.log ./mgpu grade --chapter 11_1 || true
expect_in grade.log "11_1_memory"
expect_in grade.log "next: not implemented: 11.1"

step "./mgpu submit"
run submit.log ./mgpu submit || fail "./mgpu submit exited $status"
listing=$(unzip -Z1 "$OUT/manygpu-submission.zip")
for f in chapters/11_1_memory/formulas.cpp .mgpu/hints.tsv .mgpu/predictions.tsv; do
  grep -qxF "$f" <<<"$listing" || fail "the submission lacks $f"
done

step "11.1 solved: ./mgpu test 11_1 goes green"
cp "$ROOT"/solutions/11_1_memory/*.cpp "$OUT/chapters/11_1_memory/"
run test-solved.log ./mgpu test 11_1 || fail "11.1's reference fails its own tests in the release"

echo "test_release: the release configures, builds and runs the student's commands"
