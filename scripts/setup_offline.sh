#!/usr/bin/env bash
# Unpacks a bundle made by scripts/bundle_deps.sh into a local prefix without root:
#   scripts/setup_offline.sh BUNDLE_DIR [PREFIX]      (PREFIX defaults to .deps/prefix)
# CMake searches .deps/prefix/usr automatically; source PREFIX/env.sh before running the binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:?usage: scripts/setup_offline.sh BUNDLE_DIR [PREFIX]}
prefix=${2:-$(dirname "$here")/.deps/prefix}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
shopt -s nullglob
debs=("$bundle"/*.deb)
((${#debs[@]})) || { echo "recipe: no .deb files in $bundle" >&2; exit 1; }
for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$prefix"; done
for whl in "$bundle"/nvidia_cudnn_frontend-*.whl; do
  mkdir -p "$prefix/cudnn_frontend"
  python3 - "$whl" "$prefix/cudnn_frontend" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])
PY
done
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
cat > "$prefix/env.sh" <<ENV
# Source this before building or running recipe against the offline prefix.
export CMAKE_PREFIX_PATH="$prefix/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
export LD_LIBRARY_PATH="$prefix/usr/lib/$arch:$prefix/usr/lib/$arch/openblas-pthread\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
ENV
touch "$prefix/.complete"
echo "recipe: unpacked ${#debs[@]} packages into $prefix (source $prefix/env.sh)"
