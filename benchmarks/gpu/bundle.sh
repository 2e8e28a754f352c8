#!/usr/bin/env bash
# Builds, on this machine (no GPU needed), everything the GPU checks run: each corpus program
# plain (clang++-16) and instrumented (cuda-flux-clang), for sm_70 and sm_90, with cudart linked
# statically, into target/gpu-bundle together with the check scripts. Carry that folder to a GPU
# machine and run `./check.sh` inside it (see benchmarks/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."

scripts/setup.sh >/dev/null
cargo build --release --quiet --workspace
out=target/gpu-bundle
rm -rf "$out"
mkdir -p "$out/plain" "$out/instrumented"
archs=(--cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90)
for source in corpus/*.cu; do
    name=$(basename "$source" .cu)
    echo "bundle: $name"
    clang++-16 -x cuda -O2 "${archs[@]}" --cuda-path=/usr/lib/cuda -Wno-unknown-cuda-version \
        "$source" -o "$out/plain/$name" \
        -L/usr/lib/x86_64-linux-gnu -lcudart_static -ldl -lrt -lpthread
    target/release/cuda-flux-clang -O2 "${archs[@]}" "$source" -o "$out/instrumented/$name" \
        2> >(grep -v "indirect calls" >&2 || true)
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
rm "$out"/*.o
strip "$out"/plain/* "$out"/instrumented/*
cp benchmarks/gpu/check.sh benchmarks/gpu/witness_check.py "$out/"
git rev-parse HEAD > "$out/COMMIT" 2>/dev/null || echo unknown > "$out/COMMIT"
du -sh "$out"
