#!/usr/bin/env bash
# Builds, on this machine (no GPU needed), the benchmark bundle: every program of
# benchmarks/programs in three variants, each with cudart linked statically and stripped —
#   clang/          plain clang++-16 -O3, sm_70 + sm_90
#   nvcc/           plain nvcc 11.8 -O3, sm_70 + sm_90
#   instrumented/   target/release/cuda-flux-clang -O3, sm_70 + sm_90
# into target/bench-bundle, with run.sh and report.py, COMMIT (git rev-parse HEAD), TOOLCHAIN and
# the instrumenting compiler's warnings (build-warnings.txt). Carry that folder (it must stay under
# 64 MiB; checked) to a GPU machine and run ./run.sh inside it (see benchmarks/README.md).
#   benchmarks/build.sh [NAME...]      (default: every benchmarks/programs/*.cu)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh >/dev/null
cargo build --release --quiet --workspace

out=target/bench-bundle
limit_mib=64
cuda_path=/usr/lib/cuda
link=(-L/usr/lib/x86_64-linux-gnu -lcudart_static -ldl -lrt -lpthread)
clang_flags=(-x cuda -O3 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90 --cuda-path=$cuda_path
    -Wno-unknown-cuda-version)
nvcc_flags=(-O3 -gencode arch=compute_70,code=sm_70 -gencode arch=compute_90,code=sm_90 -cudart static)
flux_flags=(-O3 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90)

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for source in benchmarks/programs/*.cu; do names+=("$(basename "$source" .cu)"); done
fi

rm -rf "$out"
mkdir -p "$out/clang" "$out/nvcc" "$out/instrumented"
: > "$out/build-warnings.txt"
for name in "${names[@]}"; do
    source=benchmarks/programs/$name.cu
    [ -f "$source" ] || { echo "build: no such program: $source" >&2; exit 1; }
    echo "build: $name"
    clang++-16 "${clang_flags[@]}" "$source" -o "$out/clang/$name" "${link[@]}"
    nvcc "${nvcc_flags[@]}" "$source" -o "$out/nvcc/$name"
    # the instrumenting compiler's warnings (a kernel left uninstrumented, ...) are kept
    if ! target/release/cuda-flux-clang "${flux_flags[@]}" "$source" -o "$out/instrumented/$name" \
        2> "$out/warnings.tmp"; then
        cat "$out/warnings.tmp" >&2
        exit 1
    fi
    if [ -s "$out/warnings.tmp" ]; then
        sed "s|^|$name: |" "$out/warnings.tmp" | tee -a "$out/build-warnings.txt" >&2
    fi
done
rm -f "$out/warnings.tmp"
strip "$out"/clang/* "$out"/nvcc/* "$out"/instrumented/*

cp benchmarks/run.sh benchmarks/report.py "$out/"
git rev-parse HEAD > "$out/COMMIT" 2>/dev/null || echo unknown > "$out/COMMIT"
{
    echo "clang: $(clang++-16 --version | head -1)"
    echo "nvcc: $(nvcc --version | tail -2 | head -1)"
    echo "cuda-flux-clang: built from $(git describe --always --dirty 2>/dev/null || echo unknown)"
    echo "flags clang: ${clang_flags[*]} ${link[*]}"
    echo "flags nvcc: ${nvcc_flags[*]}"
    echo "flags instrumented: ${flux_flags[*]}"
    echo "built on: $(uname -srm), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
} > "$out/TOOLCHAIN"

bytes=$(du -sb "$out" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "bundle: $out, ${#names[@]} programs x 3 variants, $mib MiB"
if [ "$bytes" -ge $((limit_mib * 1048576)) ]; then
    echo "bundle: error: over the ${limit_mib} MiB limit" >&2
    exit 1
fi
