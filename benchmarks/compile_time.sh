#!/usr/bin/env bash
# Compile-time overhead of the instrumenting compiler (no GPU needed): for each benchmark
# program, the best of N (default 3) wall times of
#     clang++-16 -c  -x cuda -O3 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90 --cuda-path=... -Wno-unknown-cuda-version
#     target/release/cuda-flux-clang -c  -O3 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90
# (and the smallest CPU time, user + system) and their ratio; then the geometric mean of the ratios against the target (<= 1.5x).
# With --separable, the same for separable compilation, each program taken as one unit:
#     nvcc -dc  against  cuda-flux-nvcc -dc            (-O3, sm_70 + sm_90)
#     clang++-16 -fgpu-rdc -c  against  cuda-flux-clang -fgpu-rdc -c
#     nvcc -dlink  against  cuda-flux-nvcc -dlink      (the device link of each one's -dc object)
# Prints a Markdown report (machine, toolchain, commit, tables) on stdout.
#   benchmarks/compile_time.sh [--separable] [-n N] [NAME...]
set -euo pipefail
cd "$(dirname "$0")/.."

mode=whole
if [ "${1:-}" = "--separable" ]; then mode=separable; shift; fi
runs=3
if [ "${1:-}" = "-n" ]; then runs=$2; shift 2; fi
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for source in benchmarks/programs/*.cu; do names+=("$(basename "$source" .cu)"); done
fi

cargo build --release --quiet --workspace >&2
flux=target/release/cuda-flux-clang
flux_nvcc=target/release/cuda-flux-nvcc
clang_cmd=(clang++-16 -x cuda -O3 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90 --cuda-path=/usr/lib/cuda
    -Wno-unknown-cuda-version -c)
flux_cmd=("$flux" -O3 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90 -c)
gencode=(-gencode arch=compute_70,code=sm_70 -gencode arch=compute_90,code=sm_90)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The GPU target (the default), whatever the caller's environment says.
unset CUDA_FLUX_TARGET

# Each sets `cmd` to one compile of program $1 (the objects of the -dc steps are the -dlink
# steps' inputs, so those run after them).
clang_c() { cmd=("${clang_cmd[@]}" "benchmarks/programs/$1.cu" -o "$tmp/$1.clang.o"); }
flux_c() { cmd=("${flux_cmd[@]}" "benchmarks/programs/$1.cu" -o "$tmp/$1.flux.o"); }
nvcc_dc() { cmd=(nvcc -O3 "${gencode[@]}" -dc "benchmarks/programs/$1.cu" -o "$tmp/$1.nvcc.o"); }
flux_nvcc_dc() { cmd=("$flux_nvcc" -O3 "${gencode[@]}" -dc "benchmarks/programs/$1.cu" -o "$tmp/$1.flux-nvcc.o"); }
clang_rdc() { clang_c "$1"; cmd+=(-fgpu-rdc); }
flux_rdc() { flux_c "$1"; cmd+=(-fgpu-rdc); }
nvcc_dlink() { cmd=(nvcc "${gencode[@]}" -dlink "$tmp/$1.nvcc.o" -o "$tmp/$1.nvcc.dlink.o"); }
flux_nvcc_dlink() { cmd=("$flux_nvcc" "${gencode[@]}" -dlink "$tmp/$1.flux-nvcc.o" -o "$tmp/$1.flux-nvcc.dlink.o"); }

# "WALL CPU" of one run of "$@": wall and CPU (user + system, children included) seconds
time_once() {
    /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$@" > /dev/null 2> "$tmp/err" \
        || { cat "$tmp/err" >&2; echo "compile_time: failed: $*" >&2; exit 1; }
    read -r w u k < "$tmp/time"
    echo "$w $(awk -v u="$u" -v k="$k" 'BEGIN { printf "%.2f", u + k }')"
}
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a < b) ? a : b }'; }

# compare BASE_LABEL FLUX_LABEL BASE_FN FLUX_FN: the table of one pair of steps over every
# program, the two alternating, and its geometric means.
compare() {
    local base_label=$1 flux_label=$2 base_fn=$3 flux_fn=$4
    echo "| program | $base_label wall (s) | $flux_label wall (s) | wall ratio | $base_label CPU (s) | $flux_label CPU (s) | CPU ratio |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    local ratios=() cpu_ratios=() name
    for name in "${names[@]}"; do
        local cw="" cc="" fw="" fc="" w c
        for _ in $(seq "$runs"); do # interleaved, so that drift in the machine's load hits both
            "$base_fn" "$name"
            read -r w c < <(time_once "${cmd[@]}")
            [ -n "$w" ] || exit 1
            cw=$(min "$w" "$cw") cc=$(min "$c" "$cc")
            "$flux_fn" "$name"
            read -r w c < <(time_once "${cmd[@]}")
            [ -n "$w" ] || exit 1
            fw=$(min "$w" "$fw") fc=$(min "$c" "$fc")
        done
        ratios+=("$(awk -v f="$fw" -v c="$cw" 'BEGIN { printf "%.6f", f / c }')")
        cpu_ratios+=("$(awk -v f="$fc" -v c="$cc" 'BEGIN { printf "%.6f", f / c }')")
        echo "| $name | $cw | $fw | $(printf '%.2f' "${ratios[-1]}")x | $cc | $fc | $(printf '%.2f' "${cpu_ratios[-1]}")x |"
    done
    local geo worst cpu_geo met
    geo=$(printf '%s\n' "${ratios[@]}" | awk '{ s += log($1); n++ } END { printf "%.2f", exp(s / n) }')
    worst=$(printf '%s\n' "${ratios[@]}" | sort -g | tail -1 | awk '{ printf "%.2f", $1 }')
    cpu_geo=$(printf '%s\n' "${cpu_ratios[@]}" | awk '{ s += log($1); n++ } END { printf "%.2f", exp(s / n) }')
    met=$(awk -v g="$geo" 'BEGIN { print (g <= 1.5) ? "met" : "NOT met" }')
    echo
    echo "Geometric mean of the wall-time ratios: **${geo}x** over ${#ratios[@]} programs (worst ${worst}x);"
    echo "target <= 1.5x: $met. Geometric mean of the CPU-time ratios: ${cpu_geo}x."
}

os=$(. /etc/os-release && echo "$PRETTY_NAME")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
if [ "$mode" = whole ]; then
    echo "# Compile time: cuda-flux-clang -c vs clang++-16 -c (no GPU)"
else
    echo "# Compile time of separable compilation: cuda-flux-nvcc -dc / -dlink vs nvcc, cuda-flux-clang -fgpu-rdc vs clang++-16 (no GPU)"
fi
echo
echo "* machine: $(nproc)-core $(uname -m) ($cpu), $os, Linux $(uname -r)"
echo "* clang: $(clang++-16 --version | head -1); CUDA: $(nvcc --version | tail -2 | head -1)"
echo "* commit measured: \`$(git rev-parse HEAD 2>/dev/null || echo unknown)\`$(git diff --quiet HEAD -- crates 2>/dev/null || echo ' (with uncommitted changes under crates/)')"
if [ "$mode" = whole ]; then
    echo "* both compile each benchmarks/programs/*.cu to an object (\`-c\`) at -O3 for sm_70 and sm_90;"
else
    echo "* each benchmarks/programs/*.cu compiled as one separable unit at -O3 for sm_70 and sm_90"
    echo "  (nvcc and cuda-flux-nvcc: \`${gencode[*]}\`), then the device link of that one unit;"
    echo "  GPU target (ptxas and fatbinary run; nothing is executed)"
fi
echo "  best wall time (and best CPU time, user + system) of $runs runs each, the two compilers alternating"
echo "* load average before: $(cut -d' ' -f1-3 /proc/loadavg) (other builds on the machine add noise)"
echo
if [ "$mode" = whole ]; then
    compare "clang++-16 -c" "cuda-flux-clang -c" clang_c flux_c
else
    echo "## Per unit: nvcc -dc vs cuda-flux-nvcc -dc"
    echo
    compare "nvcc -dc" "cuda-flux-nvcc -dc" nvcc_dc flux_nvcc_dc
    echo
    echo "## Per unit: clang++-16 -fgpu-rdc -c vs cuda-flux-clang -fgpu-rdc -c"
    echo
    compare "clang++-16 -fgpu-rdc -c" "cuda-flux-clang -fgpu-rdc -c" clang_rdc flux_rdc
    echo
    echo "## Device link of one unit: nvcc -dlink vs cuda-flux-nvcc -dlink"
    echo
    compare "nvcc -dlink" "cuda-flux-nvcc -dlink" nvcc_dlink flux_nvcc_dlink
fi
echo "* load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
