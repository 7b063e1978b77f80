#!/usr/bin/env bash
# Installs what recipe needs from Debian packages, if anything is missing.
#   scripts/install_deps.sh            # system packages (apt as root; otherwise prints the command)
#   scripts/install_deps.sh --offline  # no network: use .deps/prefix made by scripts/setup_offline.sh
# With nvcc present it also fetches the cudnn-frontend headers (pip wheel nvidia-cudnn-frontend).
# The same on amd64 and arm64 (DGX Spark, Grace): every package of deps.list exists for both, and
# nvidia-cudnn-frontend has aarch64 wheels.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

if [[ "${1:-}" == "--offline" || -f "$root/.deps/prefix/.complete" ]]; then
  echo "recipe: using the offline dependency prefix $root/.deps/prefix"
  exit 0
fi

# Installed for this machine's architecture (amd64, arm64) or architecture-independent: on a
# multiarch host a library of another architecture (for a cross build) does not count.
native=$(dpkg --print-architecture)
missing=()
while read -r pkg; do
  [[ -z "$pkg" || "$pkg" == \#* ]] && continue
  dpkg-query -W -f='${Status} ${Architecture}\n' "$pkg" 2>/dev/null | grep -Eq "install ok installed ($native|all)$" ||
    missing+=("$pkg")
done < "$here/deps.list"

if ((${#missing[@]})); then
  if ! command -v apt-get >/dev/null; then
    echo "recipe: missing packages: ${missing[*]} (no apt-get here: install them, or use scripts/setup_offline.sh)" >&2
    exit 1
  fi
  if [[ $(id -u) -ne 0 ]]; then
    echo "recipe: missing Debian packages. Install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "recipe: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# cudnn-frontend headers, only for CUDA builds.
if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  py=$(command -v python3 || true)
  if [[ -n "$py" ]]; then
    inc=$("$py" -c "import sysconfig;print(sysconfig.get_paths()['purelib'])")/include
    if [[ ! -f "$inc/cudnn_frontend.h" ]]; then
      echo "recipe: installing the cudnn-frontend headers (pip: nvidia-cudnn-frontend)"
      "$py" -m pip install -q nvidia-cudnn-frontend >/dev/null 2>&1 ||
        echo "recipe: warning: could not pip install nvidia-cudnn-frontend; CUDA attention will use the own kernel" >&2
    fi
  fi
fi
