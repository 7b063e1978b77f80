# Sourced by the bench/ scripts that run on a GPU machine: CUDA's tools on PATH, the offline
# dependency bundle (.deps/bundle, carried to a machine without network) unpacked once into
# .deps/prefix, and that prefix's environment. Run from the repository root.
#   source bench/device_env.sh OUT_DIR      (OUT_DIR receives setup.log)
export PATH="$PATH:/usr/local/cuda/bin"
if [[ -d .deps/bundle && ! -f .deps/prefix/.complete ]]; then
  scripts/setup_offline.sh .deps/bundle >"${1:-.}/setup.log" 2>&1 || echo "offline bundle setup failed (${1:-.}/setup.log)"
fi
if [[ -f .deps/prefix/env.sh ]]; then source .deps/prefix/env.sh; fi
