#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy at the root: bugprone-*, performance-*) on the C++ files changed
# relative to a base, and fails on any warning located in a changed file.
#   scripts/tidy.sh [BASE]   BASE: a git revision; default the merge base with origin/main when that
#                            branch exists and differs from HEAD, else HEAD~1. Uncommitted changes
#                            count as changed.
#   scripts/tidy.sh --all    every product .cpp (not tests/, bench/) in compile_commands.json
# Needs a configured build (compile_commands.json, written by the CMake configure step) in
# RECIPE_BUILD_DIR (default build/). Skips .cu files (clang-tidy 14 does not parse nvcc's dialect)
# and files the build does not compile. At most RECIPE_TIDY_MAX_FILES (default 40) translation units
# are checked, so CI time stays bounded; the rest are named and skipped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${RECIPE_BUILD_DIR:-$root/build}
db="$build/compile_commands.json"
max_files=${RECIPE_TIDY_MAX_FILES:-40}
jobs=${RECIPE_TIDY_JOBS:-$(nproc)}
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
[[ -n "$tidy" ]] || { echo "tidy: clang-tidy not found" >&2; exit 2; }
[[ -f "$db" ]] || { echo "tidy: $db missing: configure the build first (scripts/build.sh)" >&2; exit 2; }

# The translation units the build compiles, relative to the root, without CUDA sources.
mapfile -t known < <(python3 - "$db" "$root" <<'PY'
import json, os, sys
root = os.path.realpath(sys.argv[2])
for e in json.load(open(sys.argv[1])):
    f = os.path.realpath(os.path.join(e["directory"], e["file"]))
    if f.startswith(root + "/") and not f.endswith(".cu"):
        print(os.path.relpath(f, root))
PY
)

if [[ "${1:-}" == "--all" ]]; then
  changed=()
  for f in "${known[@]}"; do [[ "$f" == tests/* || "$f" == bench/* ]] || changed+=("$f"); done
  max_files=${#changed[@]}
  what="every product file"
else
  # The base: the merge base with origin/main on a branch, else HEAD~1 (scripts/change_base.sh,
  # shared with scripts/format_check.sh).
  if ! base=$(scripts/change_base.sh "${1:-}"); then
    echo "tidy: nothing checked"
    exit 0
  fi
  mapfile -t changed < <(git diff --name-only --diff-filter=ACMR "$base" -- '*.cpp' '*.cc' '*.hpp' '*.h')
  what="changed since $(git rev-parse --short "$base")"
fi

# Changed translation units (in the build) and every changed C++ file (headers too: diagnostics in
# them are kept when a checked unit includes them).
declare -A in_db
for f in "${known[@]}"; do in_db[$f]=1; done
units=()
for f in "${changed[@]}"; do [[ -n "${in_db[$f]:-}" ]] && units+=("$f"); done
if ((${#units[@]} == 0)); then
  echo "tidy: no C++ translation unit $what"
  exit 0
fi
if ((${#units[@]} > max_files)); then
  echo "tidy: ${#units[@]} translation units $what; checking the first $max_files only, skipping:"
  printf '  %s\n' "${units[@]:max_files}"
  units=("${units[@]:0:max_files}")
fi
echo "tidy: checking ${#units[@]} translation unit(s) $what with $("$tidy" --version | grep -o 'version [0-9.]*')"

# Only diagnostics located in changed files count (an unchanged header's old finding is not this
# change's); --line-filter also drops them from WarningsAsErrors.
filter=$(printf '%s\n' "${changed[@]}" | python3 -c '
import json, os, sys
print(json.dumps([{"name": os.path.abspath(l.strip())} for l in sys.stdin if l.strip()]))')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One clang-tidy per unit, $jobs at a time; each writes its own log (named after the path) and
# records itself in failed when clang-tidy exits non-zero (a warning, as WarningsAsErrors, or an error).
export tidy build filter tmp
printf '%s\n' "${units[@]}" | xargs -P "$jobs" -I{} bash -c '
  out="$tmp/$(echo "$1" | tr / _).log"
  "$tidy" -p "$build" --quiet --line-filter="$filter" "$1" >"$out" 2>&1 || echo "$1" >>"$tmp/failed"' _ {}
for f in "${units[@]}"; do
  grep -v -e '^[0-9]* warnings\? generated\.$' -e '^[0-9]* warnings\? treated as errors$' \
    -e '^Suppressed [0-9]* warnings' -e '^Use -header-filter=' "$tmp/$(echo "$f" | tr / _).log" || true
done
if [[ -s "$tmp/failed" ]]; then
  echo "tidy: findings (or errors) in $(wc -l <"$tmp/failed") of ${#units[@]} translation unit(s):" >&2
  sed 's/^/  /' "$tmp/failed" >&2
  exit 1
fi
echo "tidy: clean"
