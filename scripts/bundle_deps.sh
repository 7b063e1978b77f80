#!/usr/bin/env bash
# Gathers everything an air-gapped host needs to build recipe into one folder (default .deps/bundle):
# the Debian packages of scripts/deps.offline.list and the nvidia-cudnn-frontend wheel. Copy the folder
# to the host and run scripts/setup_offline.sh on it there (no root, no network).
#   scripts/bundle_deps.sh [--arch DEB_ARCH] [OUT_DIR]
# --arch gathers the packages of another Debian architecture (arm64 for a DGX Spark or a Grace node,
# from an amd64 machine; default: this machine's). A foreign architecture must be known to dpkg
# (`dpkg --add-architecture arm64 && apt-get update`; done here when run as root). Packages that
# architecture lacks (libquadmath0, libpsm2-2: x86-only) are left out with a note.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
arch=$(dpkg --print-architecture)
if [[ "${1:-}" == "--arch" ]]; then
  arch=${2:?usage: scripts/bundle_deps.sh [--arch DEB_ARCH] [OUT_DIR]}
  shift 2
fi
out=${1:-$(dirname "$here")/.deps/bundle}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [[ "$arch" != "$(dpkg --print-architecture)" ]] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "recipe: dpkg does not know the architecture $arch; run as root:" >&2
    echo "  dpkg --add-architecture $arch && apt-get update" >&2
    exit 1
  fi
  dpkg --add-architecture "$arch"
  apt-get update -qq
fi

# Each package as NAME:ARCH, or NAME for Architecture: all packages (headers only). One apt-cache
# call per form: each call reads the whole package index (seconds on a busy machine).
mapfile -t names < <(grep -v -E '^\s*(#|$)' "$here/deps.offline.list")
mapfile -t of_arch < <(apt-cache show --no-all-versions "${names[@]/%/:$arch}" 2>/dev/null | awk '/^Package:/ {print $2}')
mapfile -t of_all < <(apt-cache show --no-all-versions "${names[@]}" 2>/dev/null |
  awk '/^Package:/ {p = $2} /^Architecture: all$/ {print p}')
pkgs=()
for pkg in "${names[@]}"; do
  if printf '%s\n' "${of_arch[@]}" | grep -qx "$pkg"; then
    pkgs+=("$pkg:$arch")
  elif printf '%s\n' "${of_all[@]}" | grep -qx "$pkg"; then
    pkgs+=("$pkg")
  else
    echo "recipe: note: $pkg does not exist for $arch; left out"
  fi
done
( cd "$out" && apt-get download "${pkgs[@]}" >/dev/null ) || {
  echo "recipe: apt-get download failed (run 'apt-get update' first?)" >&2; exit 1; }

# The cudnn-frontend wheel of the target's CPU (only its headers are used; aarch64 wheels exist).
pip_platform=()
if [[ "$arch" != "$(dpkg --print-architecture)" ]]; then
  case "$arch" in
    arm64) machine=aarch64 ;;
    amd64) machine=x86_64 ;;
    *) machine=$arch ;;
  esac
  pyver=$(python3 -c 'import sys; print(f"{sys.version_info.major}.{sys.version_info.minor}")')
  pip_platform=(--platform "manylinux_2_28_$machine" --platform "manylinux2014_$machine" --python-version "$pyver")
fi
python3 -m pip download -q --no-deps --only-binary=:all: "${pip_platform[@]}" -d "$out" nvidia-cudnn-frontend \
  >/dev/null || echo "recipe: warning: could not download the nvidia-cudnn-frontend wheel" >&2
ls "$out" > "$out/MANIFEST"
echo "recipe: $arch bundle in $out ($(wc -l < "$out/MANIFEST") files, $(du -sh "$out" | cut -f1))"
