# Sourced by the bench/ scripts that run on a GPU machine: CUDA's tools on PATH, the offline
# dependency bundle (.deps/bundle, carried to a machine without network) unpacked once into
# .deps/prefix, and that prefix's environment. Run from the repository root.
#   source bench/device_env.sh OUT_DIR      (OUT_DIR receives setup.log)
export PATH="$PATH:/usr/local/cuda/bin"
if [[ -d .deps/bundle && ! -f .deps/prefix/.complete ]]; then
  scripts/setup_offline.sh .deps/bundle >"${1:-.}/setup.log" 2>&1 || echo "offline bundle setup failed (${1:-.}/setup.log)"
fi
if [[ -f .deps/prefix/env.sh ]]; then source .deps/prefix/env.sh; fi

# The phase scripts' helpers. PHASES lists what to run; has NAME says whether NAME is in it.
has() { [[ " ${PHASES:-} " == *" $1 "* ]]; }
# Release build for sm_90a of the named targets into $B (default /tmp/dev/build, which a warm
# machine keeps between calls), timed, with the first errors shown; logs in OUT_DIR.
B=${BUILD:-/tmp/dev/build}
device_build() {
  local t0=$SECONDS rc
  mkdir -p "$B"
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRECIPE_CUDA_ARCHITECTURES="90a-real" >"${1:-.}/cmake.log" 2>&1 &&
    cmake --build "$B" -j"$(nproc)" --target "${@:2}" >"${1:-.}/build.log" 2>&1
  rc=$?
  echo "build rc=$rc in $((SECONDS - t0)) s"
  grep -E "error" "${1:-.}/build.log" | head -20
  return $rc  # the build's status, not grep's (under pipefail a clean log made `need` fail and skip its phase)
}
