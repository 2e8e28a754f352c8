#!/usr/bin/env bash
# The main job: set up the machine, build cuda-flux, build the bundled example (corpus/saxpy.cu)
# instrumented with cuda-flux-clang, show its static instruction summary, and profile it: on the
# GPU when one is present; otherwise (saying so) on cuda-flux's CPU target, which runs the same
# instrumented PTX in a PTX interpreter.
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
    echo "== A GPU is present: running the instrumented example on it =="
    CUDA_FLUX_OUTPUT="$out/profile.json" "$out/saxpy"
else
    echo "== No GPU on this machine: running needs one, so cuda-flux runs the example on its CPU"
    echo "   target instead (the same instrumented PTX, executed by cuda-flux's PTX interpreter"
    echo "   behind a CPU implementation of the CUDA runtime; the counts are GPU-independent) =="
    target/release/cuda-flux-clang -O2 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90 \
        --cuda-flux-target=cpu corpus/saxpy.cu -o "$out/saxpy-cpu"
    CUDA_FLUX_OUTPUT="$out/profile.json" "$out/saxpy-cpu"
fi
echo
target/release/cuda-flux report "$out/profile.json"
echo
echo "Profile (exact dynamic instruction counts per kernel, launch and block): $out/profile.json"
