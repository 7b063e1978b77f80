#!/usr/bin/env bash
# Gathers everything an air-gapped host needs to build recipe into one folder (default .deps/bundle):
# the Debian packages of scripts/deps.offline.list and the nvidia-cudnn-frontend wheel. Copy the folder
# to the host and run scripts/setup_offline.sh on it there (no root, no network).
#   scripts/bundle_deps.sh [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$(dirname "$here")/.deps/bundle}
mkdir -p "$out"
out=$(cd "$out" && pwd)
pkgs=$(grep -v -E '^\s*(#|$)' "$here/deps.offline.list")
( cd "$out" && apt-get download $pkgs >/dev/null ) || {
  echo "recipe: apt-get download failed (run 'apt-get update' first?)" >&2; exit 1; }
python3 -m pip download -q --no-deps --only-binary=:all: -d "$out" nvidia-cudnn-frontend >/dev/null ||
  echo "recipe: warning: could not download the nvidia-cudnn-frontend wheel" >&2
ls "$out" > "$out/MANIFEST"
echo "recipe: bundle in $out ($(wc -l < "$out/MANIFEST") files, $(du -sh "$out" | cut -f1))"
