#!/usr/bin/env bash
# The main job: set up the machine, build cuda-flux, compile the bundled example (corpus/saxpy.cu)
# and show what cuda-flux sees in it. Profiling a run needs the instrumenting compiler and a GPU;
# this script says so plainly when either is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
echo "demo: building cuda-flux (release)"
cargo build --release --quiet --workspace

out=target/example
mkdir -p "$out"
for arch in sm_70 sm_90; do
    echo "demo: compiling corpus/saxpy.cu to PTX for $arch with clang-16"
    clang-16 -x cuda --cuda-device-only -S -O2 --cuda-gpu-arch="$arch" \
        --cuda-path=/usr/lib/cuda -Wno-unknown-cuda-version \
        -o "$out/saxpy.$arch.ptx" corpus/saxpy.cu
done
echo "demo: building the plain program with clang++-16 (cudart linked statically)"
clang++-16 -x cuda -O2 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90 --cuda-path=/usr/lib/cuda \
    -Wno-unknown-cuda-version corpus/saxpy.cu -o "$out/saxpy" \
    -L/usr/lib/x86_64-linux-gnu -lcudart_static -ldl -lrt -lpthread

echo
echo "== Static instruction summary of the bundled example (PTX for sm_90) =="
target/release/cuda-flux summary --blocks "$out/saxpy.sm_90.ptx"
echo
echo "Full model as JSON: target/release/cuda-flux ptx $out/saxpy.sm_90.ptx"
echo
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "== A GPU is present: running the plain example =="
    "$out/saxpy" || true
    echo
    echo "Dynamic instruction counts need the instrumenting compiler (cuda-flux-clang++), which is"
    echo "not built yet: the counts above are static (per block, not per execution)."
else
    echo "No GPU on this machine: running the example, and so profiling it, needs a GPU."
    echo "The counts above are static (instructions per block), read from the PTX."
fi
