#!/usr/bin/env bash
# Compile every corpus program (or the ones named) with clang-16 and nvcc 11.8
# for sm_70 and sm_90, assemble each PTX with ptxas, and build linked binaries.
# Needs no GPU. Usage: corpus/verify.sh [FILE.cu...]; outputs go to $OUT_DIR
# (default /tmp/corpus-verify). Exits non-zero if any step fails.
set -u
cd "$(dirname "$0")"
OUT_DIR=${OUT_DIR:-/tmp/corpus-verify}
CUDA_PATH=${CUDA_PATH:-/usr/lib/cuda} # Debian: include/cuda.h + nvvm/libdevice symlinks
CUDART_DIR=${CUDART_DIR:-/usr/lib/x86_64-linux-gnu}
mkdir -p "$OUT_DIR"
CLANG_FLAGS=(-x cuda -O2 -Wno-unknown-cuda-version "--cuda-path=$CUDA_PATH")
status=0

step() { # step NAME CMD...: run CMD, log to $OUT_DIR/NAME.log, report failures and warnings
    local log="$OUT_DIR/$1.log"
    shift
    if ! "$@" >"$log" 2>&1; then
        echo "FAIL: $*"
        cat "$log"
        status=1
    elif grep -q warning "$log"; then
        echo "warning: $*"
        grep warning "$log" | sort -u | sed 's/^/    /'
    fi
}

files=("$@")
[ ${#files[@]} -eq 0 ] && files=(*.cu)
for f in "${files[@]}"; do
    b=$(basename "$f" .cu)
    for a in 70 90; do
        step "$b.clang.sm_$a" clang-16 "${CLANG_FLAGS[@]}" --cuda-gpu-arch=sm_$a --cuda-device-only -S \
            -o "$OUT_DIR/$b.clang.sm_$a.ptx" "$f"
        step "$b.clang.sm_$a.ptxas" ptxas -arch=sm_$a "$OUT_DIR/$b.clang.sm_$a.ptx" \
            -o "$OUT_DIR/$b.clang.sm_$a.cubin"
        step "$b.nvcc.sm_$a" nvcc -ptx -arch=sm_$a "$f" -o "$OUT_DIR/$b.nvcc.sm_$a.ptx"
        step "$b.nvcc.sm_$a.ptxas" ptxas -arch=sm_$a "$OUT_DIR/$b.nvcc.sm_$a.ptx" \
            -o "$OUT_DIR/$b.nvcc.sm_$a.cubin"
    done
    step "$b.clang.obj" clang-16 "${CLANG_FLAGS[@]}" --cuda-gpu-arch=sm_70 -c "$f" -o "$OUT_DIR/$b.o"
    step "$b.clang.link" clang++-16 "${CLANG_FLAGS[@]}" --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90 \
        "$f" -o "$OUT_DIR/$b.clang" -L"$CUDART_DIR" -lcudart_static -ldl -lrt -lpthread
    step "$b.nvcc.link" nvcc -O2 -gencode arch=compute_70,code=sm_70 \
        -gencode arch=compute_90,code=sm_90 "$f" -o "$OUT_DIR/$b.nvcc"
    [ "$status" -eq 0 ] && echo "ok: $b"
done
exit "$status"
