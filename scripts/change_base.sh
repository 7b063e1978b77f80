#!/usr/bin/env bash
# Prints the commit that "the change" is measured from, for the checks that look only at what a
# change touches (scripts/tidy.sh, scripts/format_check.sh):
#   scripts/change_base.sh [BASE]   BASE: a git revision; default the merge base with origin/main
#                                   when that branch exists and differs from HEAD (a branch: what it
#                                   adds to main), else HEAD~1 (main itself, or a fresh clone with no
#                                   origin/main: the last landed commit).
# Exits 3, saying why on stderr, when the base is not in this clone (a shallow clone, a first
# commit): there is nothing to compare against, and the callers check nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-}
if [[ -z "$base" ]]; then
  if git rev-parse -q --verify origin/main >/dev/null; then base=$(git merge-base HEAD origin/main || true); fi
  if [[ -z "$base" || "$(git rev-parse "$base")" == "$(git rev-parse HEAD)" ]]; then base=HEAD~1; fi
fi
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "base $base is not in this clone (shallow?): nothing to compare against" >&2
  exit 3
fi
git rev-parse "$base^{commit}"
