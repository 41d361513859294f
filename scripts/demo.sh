#!/usr/bin/env bash
# The README's main job on a built-in default: synthesize a GPT-2-small-shaped dump with the
# planted mechanism and run the whole pipeline on it. BUILD is the CMake build folder.
set -euo pipefail
build=${1:-build}
out=${TSC_DEMO_OUT:-demo-out}
"$build/tilescope" demo -o "$out"
