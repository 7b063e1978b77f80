#!/usr/bin/env bash
# Unpacks a bundle made by scripts/bundle_deps.sh into a local prefix without root:
#   scripts/setup_offline.sh BUNDLE_DIR [PREFIX]      (PREFIX defaults to .deps/prefix)
# CMake searches .deps/prefix/usr automatically; source PREFIX/env.sh before running the binaries.
# Works for a bundle of any Debian architecture (amd64, arm64): a foreign one makes a prefix for a
# cross build (scripts/cross_build_aarch64.sh), a native one for the host itself.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:?usage: scripts/setup_offline.sh BUNDLE_DIR [PREFIX]}
prefix=${2:-$(dirname "$here")/.deps/prefix}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
shopt -s nullglob
debs=("$bundle"/*.deb)
((${#debs[@]})) || { echo "recipe: no .deb files in $bundle" >&2; exit 1; }
# A host with its own Open MPI keeps it: unpacking the bundled copy (and its PMIx, libevent, …)
# onto LD_LIBRARY_PATH would make the host's mpirun load mismatched plugins.
host_mpi=$(command -v mpirun >/dev/null 2>&1 && echo yes || echo no)
mpi_stack='^(openmpi-|libopenmpi|libpmix|libevent-|libfabric|libhwloc|libucx|libpsm|librdmacm|libibverbs|libmunge|libnl-|libnuma|libpciaccess|libltdl|libxnvctrl)'
for deb in "${debs[@]}"; do
  if [ "$host_mpi" = yes ] && [[ $(basename "$deb") =~ $mpi_stack ]]; then continue; fi
  dpkg-deb -x "$deb" "$prefix"
done
for whl in "$bundle"/nvidia_cudnn_frontend-*.whl; do
  mkdir -p "$prefix/cudnn_frontend"
  python3 - "$whl" "$prefix/cudnn_frontend" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])
PY
done
# The multiarch folder the libraries unpacked into (usr/lib/aarch64-linux-gnu for an arm64 bundle):
# from the packages' own architecture, which is not this machine's when the bundle is for a cross build.
deb_arch=
for deb in "${debs[@]}"; do
  deb_arch=$(dpkg-deb -f "$deb" Architecture)
  [[ "$deb_arch" != all ]] && break
done
case "$deb_arch" in
  amd64) arch=x86_64-linux-gnu ;;
  arm64) arch=aarch64-linux-gnu ;;
  *) arch=$(dpkg-architecture -A "$deb_arch" -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu") ;;
esac
cat > "$prefix/env.sh" <<ENV
# Source this before building or running recipe against the offline prefix.
export CMAKE_PREFIX_PATH="$prefix/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
export LD_LIBRARY_PATH="$prefix/usr/lib/$arch:$prefix/usr/lib/$arch/openblas-pthread\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
ENV
# The bundled Open MPI, only where the host has none: relocated with OPAL_PREFIX, its wrapper
# compilers and mpirun under their Debian alternative names.
if [ "$host_mpi" = no ] && [ -x "$prefix/usr/bin/mpirun.openmpi" ]; then
  ln -sf mpirun.openmpi "$prefix/usr/bin/mpirun"
  ln -sf mpicxx.openmpi "$prefix/usr/bin/mpicxx"
  cat >> "$prefix/env.sh" <<ENV
export OPAL_PREFIX="$prefix/usr"
export PATH="$prefix/usr/bin:\$PATH"
export LD_LIBRARY_PATH="$prefix/usr/lib/$arch/openmpi/lib:\$LD_LIBRARY_PATH"
export MPI_CXX_COMPILER="$prefix/usr/bin/mpicxx"
ENV
fi
touch "$prefix/.complete"
echo "recipe: unpacked ${#debs[@]} packages into $prefix (source $prefix/env.sh)"
