#!/usr/bin/env bash
# Builds, on this machine (no GPU needed), everything the GPU checks run: each corpus program
# plain (clang++-16) and instrumented (cuda-flux-clang), for sm_70 and sm_90, with cudart linked
# statically, into target/gpu-bundle together with the check scripts. Also each program's profile
# from cuda-flux's CPU target, made here (cpu-profiles/), which check.sh compares block by block
# with the GPU's. Carry that folder to a GPU machine and run `./check.sh` inside it (see
# benchmarks/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."

scripts/setup.sh >/dev/null
cargo build --release --quiet --workspace
out=target/gpu-bundle
rm -rf "$out"
mkdir -p "$out/plain" "$out/instrumented" "$out/cpu-profiles"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The program built for the CPU target and run here: its profile goes into the bundle.
cpu_profile() {
    local name=$1
    shift
    target/release/cuda-flux-clang -O2 "${archs[@]}" --cuda-flux-target=cpu "$@" -o "$work/$name"
    (cd "$work" && CUDA_FLUX_OUTPUT="$PWD/$name.json" "./$name" > "$name.out" 2>&1) || {
        echo "bundle: $name fails on the CPU target:" >&2
        cat "$work/$name.out" >&2
        exit 1
    }
    # Only what compare_cpu.py reads, summed over launches (as it sums them): a profile of
    # 20,000 launches would not fit the bundle otherwise.
    python3 - "$work/$name.json" "$out/cpu-profiles/$name.json" <<'PY'
import json, sys
sys.path.insert(0, "benchmarks/gpu")
from compare_cpu import block_threads
sums = block_threads(json.load(open(sys.argv[1])))
json.dump({"kernels": [{"name": name, "launches": [
    {"instrumented": True, "block_counts": {"threads": threads}}]}
    for name, threads in sums.items()]}, open(sys.argv[2], "w"))
PY
}
archs=(--cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90)
for source in corpus/*.cu; do
    name=$(basename "$source" .cu)
    echo "bundle: $name"
    clang++-16 -x cuda -O2 "${archs[@]}" --cuda-path=/usr/lib/cuda -Wno-unknown-cuda-version \
        "$source" -o "$out/plain/$name" \
        -L/usr/lib/x86_64-linux-gnu -lcudart_static -ldl -lrt -lpthread
    target/release/cuda-flux-clang -O2 "${archs[@]}" "$source" -o "$out/instrumented/$name" \
        2> >(grep -v "indirect calls" >&2 || true)
    cpu_profile "$name" "$source"
done
# A kernel defined in one translation unit and launched from another.
echo "bundle: multi_tu"
for part in kernels main; do
    clang++-16 -x cuda -O2 "${archs[@]}" --cuda-path=/usr/lib/cuda -Wno-unknown-cuda-version \
        -c corpus/multi_tu/$part.cu -o "$out/$part.plain.o"
    target/release/cuda-flux-clang -O2 "${archs[@]}" -c corpus/multi_tu/$part.cu \
        -o "$out/$part.instrumented.o"
done
clang++-16 "$out/kernels.plain.o" "$out/main.plain.o" -o "$out/plain/multi_tu" \
    -L/usr/lib/x86_64-linux-gnu -lcudart_static -ldl -lrt -lpthread
target/release/cuda-flux-clang "$out/kernels.instrumented.o" "$out/main.instrumented.o" \
    -o "$out/instrumented/multi_tu"
cpu_profile multi_tu corpus/multi_tu/kernels.cu corpus/multi_tu/main.cu
rm "$out"/*.o
strip "$out"/plain/* "$out"/instrumented/*
cp benchmarks/gpu/check.sh benchmarks/gpu/witness_check.py benchmarks/gpu/compare_cpu.py "$out/"
git rev-parse HEAD > "$out/COMMIT" 2>/dev/null || echo unknown > "$out/COMMIT"
du -sh "$out"
