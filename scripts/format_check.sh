#!/usr/bin/env bash
# Checks that the C++ and CUDA lines a change touches are clang-formatted (.clang-format at the
# root), with `clang-format --dry-run -Werror` restricted to the changed lines (--lines), so code
# nobody touched, in any file, never fails it.
#   scripts/format_check.sh [BASE]      the files and lines changed since BASE, chosen as
#                                       scripts/tidy.sh chooses them (scripts/change_base.sh: the
#                                       merge base with origin/main on a branch, else HEAD~1);
#                                       uncommitted changes count as changed
#   scripts/format_check.sh --files [BASE]   whole changed files, not only their changed lines
# Fix what it reports with `clang-format -i --lines=A:B FILE` (or `git clang-format BASE`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
whole=0
[[ "${1:-}" == "--files" ]] && { whole=1; shift; }
fmt=$(command -v clang-format-14 || command -v clang-format || true)
[[ -n "$fmt" ]] || { echo "format: clang-format not found" >&2; exit 2; }
if ! base=$(scripts/change_base.sh "${1:-}"); then
  echo "format: nothing checked"
  exit 0
fi
exts=('*.cpp' '*.cc' '*.cxx' '*.hpp' '*.h' '*.cu' '*.cuh')
mapfile -t files < <(git diff --name-only --diff-filter=ACMR "$base" -- "${exts[@]}")
what="changed since $(git rev-parse --short "$base")"
if ((${#files[@]} == 0)); then
  echo "format: no C++/CUDA file $what"
  exit 0
fi
failed=()
for f in "${files[@]}"; do
  args=()
  if ((whole == 0)); then
    # The new side of each hunk: "@@ -a,b +start,count @@"; count 0 is a pure deletion.
    mapfile -t args < <(git diff -U0 --no-color "$base" -- "$f" |
      sed -n 's/^@@ -[0-9,]* +\([0-9]*\)\(,\([0-9]*\)\)\{0,1\} @@.*/\1 \3/p' |
      awk '{ n = ($2 == "") ? 1 : $2; if (n > 0) printf "--lines=%d:%d\n", $1, $1 + n - 1 }')
    ((${#args[@]})) || continue
  fi
  "$fmt" --dry-run -Werror "${args[@]}" "$f" || failed+=("$f")
done
if ((${#failed[@]})); then
  echo "format: lines not clang-formatted in ${#failed[@]} of ${#files[@]} file(s) $what:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  echo "format: fix with clang-format -i --lines=A:B FILE, or git clang-format $(git rev-parse --short "$base")" >&2
  exit 1
fi
echo "format: ${#files[@]} C++/CUDA file(s) $what: clean"
