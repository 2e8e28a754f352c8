#!/usr/bin/env bash
# Builds every benchmark program (or those named) against the CPU emulation of CUDA
# (tests/emu/cuda_emu.h) at its small test size and runs it: each must print `result: PASS`.
# Tests the kernels' logic and the programs' own checks without a GPU; says nothing about speed.
#   benchmarks/tests/emulate.sh [NAME...]
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for source in programs/*.cu; do names+=("$(basename "$source" .cu)"); done
fi
failed=0
for name in "${names[@]}"; do
    if ! g++ -std=c++20 -O1 -pthread -x c++ -DBENCH_EMULATE -DBENCH_SMALL \
        "programs/$name.cu" -o "$out/$name" 2> "$out/$name.log"; then
        echo "emulate: $name: does not compile"; cat "$out/$name.log"; failed=1; continue
    fi
    start=$(date +%s.%N)
    "$out/$name" > "$out/$name.out" 2>&1; status=$?
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    result=$(grep '^result:' "$out/$name.out" || echo "no result line")
    printf 'emulate: %-12s status %d  %s  (%.2f s)\n' "$name" "$status" "$result" "$secs"
    if [ "$status" -ne 0 ]; then cat "$out/$name.out"; failed=1; fi
done
exit $failed
