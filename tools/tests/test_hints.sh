#!/usr/bin/env bash
# `./mgpu hint`: levels open in order, every hint shown is recorded (in a temporary record, via
# MGPU_HINTS_LOG), unknown chapters and TODOs are named with the valid ones, the listing shows
# what was read; and every TODO id in every skeleton file has a hints section with all three
# levels (`./mgpu hint --check`), so that skeletons and hints cannot drift apart.
# shellcheck disable=SC2015  # "check && check || fail" means: fail unless every check holds
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export MGPU_HINTS_LOG=$work/hints.tsv
checks=0

fail() {
  echo "FAIL: $*" >&2
  echo "--- stdout:" >&2; cat "$work/out" >&2
  echo "--- stderr:" >&2; cat "$work/err" >&2
  exit 1
}
ok() { checks=$((checks + 1)); echo "ok   $*"; }
# hint ARGS...: runs ./mgpu hint from a folder that is not the checkout; sets $rc.
hint() { rc=0; (cd "$work" && "$ROOT/mgpu" hint "$@") >"$work/out" 2>"$work/err" || rc=$?; }
# levels: the level column of the record, one line, e.g. "1 2 2 3".
levels() { if [ -f "$MGPU_HINTS_LOG" ]; then cut -f3 "$MGPU_HINTS_LOG" | paste -sd' ' -; fi; }

# ------------------------------------------------------------------ levels open in order
hint 11_2 ring_reduce_scatter --level 2
[ "$rc" -eq 2 ] || fail "level 2 before level 1: exit $rc, expected 2"
grep -q -- "--level 1" "$work/err" || fail "the refusal does not say which level to read first"
[ -z "$(levels)" ] || fail "a refused hint was recorded: $(levels)"
ok "level 2 is refused before level 1, and nothing is recorded"

hint 11_2 ring_reduce_scatter
[ "$rc" -eq 0 ] || fail "level 1: exit $rc"
grep -q "hint 1 of 3" "$work/out" || fail "no level 1 heading"
grep -q "Follow one chunk" "$work/out" || fail "level 1's text is not shown"
if grep -q "chunk(r - s - 1)" "$work/out"; then fail "level 1 shows level 3's text"; fi
IFS=$'\t' read -r chapter todo level when <"$MGPU_HINTS_LOG"
[ "$chapter/$todo/$level" = "11_2_data_parallel/ring_reduce_scatter/1" ] ||
  fail "record line is '$chapter $todo $level', expected 11_2_data_parallel ring_reduce_scatter 1"
[[ $when =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]] || fail "time '$when' is not UTC ISO 8601"
ok "level 1 is shown and recorded as chapter, TODO, level, UTC time"

hint 11_2 ring_reduce_scatter --level 3
[ "$rc" -eq 2 ] || fail "level 3 after only level 1: exit $rc, expected 2"
hint 11_2 ring_reduce_scatter --level 2
[ "$rc" -eq 0 ] && grep -q "hint 2 of 3" "$work/out" || fail "level 2 after level 1: exit $rc"
hint 11_2 ring_reduce_scatter            # no level: the highest read so far, again
grep -q "hint 2 of 3" "$work/out" || fail "without --level, the highest level read is not shown again"
hint 11.2 "TODO(11.2 ring_reduce_scatter):" --level=3   # the comment copied whole, a dotted section
[ "$rc" -eq 0 ] && grep -q "hint 3 of 3" "$work/out" || fail "level 3 from a copied TODO comment: exit $rc"
grep -q "chunk(r - s - 1)" "$work/out" || fail "level 3's text is not shown"
[ "$(levels)" = "1 2 2 3" ] || fail "levels recorded '$(levels)', expected '1 2 2 3'"
ok "levels open one after another, every hint shown is recorded in order (1 2 2 3)"

hint tp_ffn forward
[ "$rc" -eq 0 ] || fail "a GPU lab's hint: exit $rc"
[ "$(tail -n1 "$MGPU_HINTS_LOG" | cut -f1-3)" = "$(printf 'gpu_labs/tp_ffn\tforward\t1')" ] ||
  fail "a lab's hint is recorded as '$(tail -n1 "$MGPU_HINTS_LOG")'"
ok "GPU labs have hints too, recorded as gpu_labs/<lab>"

# ------------------------------------------------------------------ names and listing
hint 11_2 ring_reduce
[ "$rc" -eq 2 ] || fail "unknown TODO: exit $rc, expected 2"
grep -q "no TODO 'ring_reduce'" "$work/err" && grep -q "ring_all_gather" "$work/err" &&
  grep -q "plan_buckets" "$work/err" || fail "unknown TODO: the error must name it and list the chapter's TODOs"
hint 11_42 foo
[ "$rc" -eq 2 ] || fail "unknown chapter: exit $rc, expected 2"
grep -q "'11_42'" "$work/err" && grep -q "11_5_pipeline" "$work/err" && grep -q "gpu_labs/zero3" "$work/err" ||
  fail "unknown chapter: the error must name it and list the chapters"
hint 11_2 ring_reduce_scatter --level 4
[ "$rc" -eq 2 ] || fail "--level 4: exit $rc, expected 2"
[ "$(levels)" = "1 2 2 3 1" ] || fail "an error added to the record: $(levels)"
ok "unknown TODOs, chapters and levels are named with what exists, and nothing is recorded"

hint 11_2
[ "$rc" -eq 0 ] || fail "listing: exit $rc"
grep -Eq "^  ring_reduce_scatter +3 " "$work/out" || fail "listing does not show level 3 read for ring_reduce_scatter"
grep -Eq "^  plan_buckets +- " "$work/out" || fail "listing does not show plan_buckets as unread"
todos=$(grep -c '^## ' "$ROOT/chapters/11_2_data_parallel/hints.md")  # one section per TODO
[ "$(grep -c . "$work/out")" -eq $((todos + 3)) ] || fail "listing of 11.2 should have $todos TODO lines"
first=$(sed -n 3p "$work/out" | awk '{ print $1 }')
[ "$first" = ring_all_reduce_bytes_per_rank ] || fail "listing starts with '$first', not the README's first TODO"
ok "the listing gives the TODOs in order with the highest level read"

# ------------------------------------------------------------------ hints match the skeletons
# Chapters another change is still writing hints for: checked as soon as they have a hints.md.
pending=(11_7_3d_and_experts)
names=()
for d in "$ROOT"/chapters/*/ "$ROOT"/gpu_labs/*/; do
  d=${d%/}
  case $d in */gpu_labs/*) [ -f "$d/main.cpp" ] || continue; name=gpu_labs/${d##*/} ;; *) name=${d##*/} ;; esac
  if [[ " ${pending[*]} " == *" $name "* ]] && [ ! -f "$d/hints.md" ]; then
    echo "skip $name: no hints.md yet (pending)"
    continue
  fi
  names+=("$name")
done
rc=0
"$ROOT/mgpu" hint --check "${names[@]}" >"$work/out" 2>"$work/err" || rc=$?
cat "$work/out"
[ "$rc" -eq 0 ] || fail "hints and skeletons disagree (above)"
ok "every TODO id in ${#names[@]} chapters and labs has a hints section with levels 1, 2 and 3"

# The check itself catches drift, on a tiny tree of its own (the mgpu script and one chapter).
fake=$work/fake
mkdir -p "$fake/chapters/c1"
cp "$ROOT/mgpu" "$fake/mgpu"
printf '%s\n' '// TODO(c1 alpha): first' '// TODO(c1 beta): second' 'int f();' >"$fake/chapters/c1/c1.cpp"
cat >"$fake/chapters/c1/hints.md" <<'MD'
# preamble, never shown
## alpha: the first
### 1
one
```
## not a section: a line inside a code fence
```
### 2
two
### 3

## gamma: no such TODO
### 1
x
MD
rc=0
"$fake/mgpu" hint --check >"$work/out" 2>"$work/err" || rc=$?
[ "$rc" -eq 1 ] || fail "the drift check passed a broken hints.md (exit $rc)"
grep -q "no section '## beta" "$work/out" || fail "a TODO without hints is not reported"
grep -q "section 'gamma' matches no TODO" "$work/out" || fail "a stale section is not reported"
grep -q "alpha: level 3 missing" "$work/out" || fail "an empty level is not reported"
if grep -q "not a section" "$work/out"; then fail "a heading inside a code fence was read as a section"; fi
ok "the drift check reports a TODO without hints, a stale section and an empty level"

echo "$checks checks passed"
