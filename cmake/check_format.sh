#!/usr/bin/env bash
# Fails when a C++ or CUDA file of the course is not what clang-format makes of it (.clang-format
# at the root; the grader's fixtures, submissions as students write them, opt out). The tree is
# formatted with clang-format 14, Debian 12's: another version formats some lines differently,
# so there the check skips (exit 77) rather than fail on lines nobody changed, as it does when
# clang-format is not installed. Fix a failure with: clang-format -i FILE...
set -uo pipefail
cd "$(dirname "$0")/.."
want=14
if ! command -v clang-format >/dev/null 2>&1; then
  echo "SKIPPED: clang-format is not installed (apt-get install clang-format)"
  exit 77
fi
have=$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [ "$have" != "$want" ]; then
  echo "SKIPPED: the tree is formatted with clang-format $want; this is clang-format $have"
  exit 77
fi
mapfile -t files < <(find runtime chapters solutions autograder tools demos docs gpu_labs testing cmake \
  \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) \
  -not -path 'autograder/tests/fixtures/*' 2>/dev/null | sort)
unformatted=()
for f in "${files[@]}"; do
  clang-format "$f" | cmp -s - "$f" || unformatted+=("$f")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "not formatted (${#unformatted[@]} of ${#files[@]} files):"
  printf '  %s\n' "${unformatted[@]}"
  echo "fix: clang-format -i ${unformatted[*]}"
  exit 1
fi
echo "${#files[@]} files formatted as clang-format $want does"
