#!/usr/bin/env bash
# The main job: builds recipe (installing what is missing) and trains.
# On a machine with an NVIDIA GPU:   recipe pretrain gpt3_345m --max-steps 100
# Without one it says so and trains the tiny GPT preset on the CPU instead.
#   scripts/run_main.sh [extra recipe arguments]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
[[ -f "$root/.deps/prefix/env.sh" ]] && source "$root/.deps/prefix/env.sh"
recipe="${RECIPE_BUILD_DIR:-$root/build}/bin/recipe"
# `recipe version` prints "GPU: N x NAME" when a CUDA build sees a device.
if "$recipe" version 2>/dev/null | grep -q "^GPU: [1-9]"; then
  exec "$recipe" pretrain gpt3_345m --max-steps 100 "$@"
fi
echo "recipe: no usable NVIDIA GPU (or a CPU-only build) here: running the tiny GPT preset on the CPU instead."
echo "recipe: on a GPU machine this script runs: recipe pretrain gpt3_345m --max-steps 100"
exec "$recipe" pretrain gpt_tiny --device cpu --max-steps 200 "$@"
