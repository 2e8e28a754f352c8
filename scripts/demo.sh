#!/usr/bin/env bash
# The main job: set up the machine, build cuda-flux, build the bundled example (corpus/saxpy.cu)
# instrumented with cuda-flux-clang, and profile it. With no GPU present it shows the example's
# static instruction summary instead, and says that running (and so profiling) needs a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
echo "demo: building cuda-flux (release)"
cargo build --release --quiet --workspace

out=target/example
rm -rf "$out"
mkdir -p "$out"
echo "demo: building corpus/saxpy.cu instrumented for sm_70 and sm_90 (intermediates: $out/build)"
target/release/cuda-flux-clang -O2 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90 \
    --cuda-flux-keep="$out/build" corpus/saxpy.cu -o "$out/saxpy"

echo
echo "== Static instruction summary of the bundled example (its PTX for sm_90) =="
target/release/cuda-flux summary --blocks "$out/build/0-saxpy.sm_90.ptx"
echo
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "== A GPU is present: running the instrumented example =="
    CUDA_FLUX_OUTPUT="$out/profile.json" "$out/saxpy"
    echo
    echo "Profile (exact dynamic instruction counts per kernel, launch and block): $out/profile.json"
else
    echo "No GPU on this machine: running the example, and so profiling it, needs a GPU."
    echo "The counts above are static (instructions per block, read from the PTX). The"
    echo "instrumented program is built ($out/saxpy); run it on a GPU machine to get"
    echo "cuda-flux-<pid>.json with exact per-block, per-launch counts."
fi
