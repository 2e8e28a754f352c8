#!/usr/bin/env bash
# Compile-time overhead of the instrumenting compiler (no GPU needed): for each benchmark
# program, the best of N (default 3) wall times of
#     clang++-16 -c  -x cuda -O3 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90 --cuda-path=... -Wno-unknown-cuda-version
#     target/release/cuda-flux-clang -c  -O3 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90
# (and the smallest CPU time, user + system) and their ratio; then the geometric mean of the ratios against the target (<= 1.5x).
# Prints a Markdown report (machine, toolchain, commit, table) on stdout.
#   benchmarks/compile_time.sh [-n N] [NAME...]
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3
if [ "${1:-}" = "-n" ]; then runs=$2; shift 2; fi
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for source in benchmarks/programs/*.cu; do names+=("$(basename "$source" .cu)"); done
fi

cargo build --release --quiet --workspace >&2
flux=target/release/cuda-flux-clang
clang_cmd=(clang++-16 -x cuda -O3 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90 --cuda-path=/usr/lib/cuda
    -Wno-unknown-cuda-version -c)
flux_cmd=("$flux" -O3 --cuda-gpu-arch=sm_70 --cuda-gpu-arch=sm_90 -c)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "WALL CPU" of one run of "$@": wall and CPU (user + system, children included) seconds
time_once() {
    /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$@" > /dev/null 2> "$tmp/err" \
        || { cat "$tmp/err" >&2; echo "compile_time: failed: $*" >&2; exit 1; }
    read -r w u k < "$tmp/time"
    echo "$w $(awk -v u="$u" -v k="$k" 'BEGIN { printf "%.2f", u + k }')"
}
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a < b) ? a : b }'; }

os=$(. /etc/os-release && echo "$PRETTY_NAME")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "# Compile time: cuda-flux-clang -c vs clang++-16 -c (no GPU)"
echo
echo "* machine: $(nproc)-core $(uname -m) ($cpu), $os, Linux $(uname -r)"
echo "* clang: $(clang++-16 --version | head -1); CUDA: $(nvcc --version | tail -2 | head -1)"
echo "* commit measured: \`$(git rev-parse HEAD 2>/dev/null || echo unknown)\`$(git diff --quiet HEAD -- crates 2>/dev/null || echo ' (with uncommitted changes under crates/)')"
echo "* both compile each benchmarks/programs/*.cu to an object (\`-c\`) at -O3 for sm_70 and sm_90;"
echo "  best wall time (and best CPU time, user + system) of $runs runs each, the two compilers alternating"
echo "* load average before: $(cut -d' ' -f1-3 /proc/loadavg) (other builds on the machine add noise)"
echo
echo "| program | clang++-16 -c wall (s) | cuda-flux-clang -c wall (s) | wall ratio | clang++-16 CPU (s) | cuda-flux-clang CPU (s) | CPU ratio |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
ratios=()
cpu_ratios=()
for name in "${names[@]}"; do
    source=benchmarks/programs/$name.cu
    cw="" cc="" fw="" fc=""
    for _ in $(seq "$runs"); do # interleaved, so that drift in the machine's load hits both
        read -r w c < <(time_once "${clang_cmd[@]}" "$source" -o "$tmp/$name.clang.o")
        [ -n "$w" ] || exit 1
        cw=$(min "$w" "$cw") cc=$(min "$c" "$cc")
        read -r w c < <(time_once "${flux_cmd[@]}" "$source" -o "$tmp/$name.flux.o")
        [ -n "$w" ] || exit 1
        fw=$(min "$w" "$fw") fc=$(min "$c" "$fc")
    done
    ratios+=("$(awk -v f="$fw" -v c="$cw" 'BEGIN { printf "%.6f", f / c }')")
    cpu_ratios+=("$(awk -v f="$fc" -v c="$cc" 'BEGIN { printf "%.6f", f / c }')")
    echo "| $name | $cw | $fw | $(printf '%.2f' "${ratios[-1]}")x | $cc | $fc | $(printf '%.2f' "${cpu_ratios[-1]}")x |"
done
geo=$(printf '%s\n' "${ratios[@]}" | awk '{ s += log($1); n++ } END { printf "%.2f", exp(s / n) }')
worst=$(printf '%s\n' "${ratios[@]}" | sort -g | tail -1 | awk '{ printf "%.2f", $1 }')
cpu_geo=$(printf '%s\n' "${cpu_ratios[@]}" | awk '{ s += log($1); n++ } END { printf "%.2f", exp(s / n) }')
met=$(awk -v g="$geo" 'BEGIN { print (g <= 1.5) ? "met" : "NOT met" }')
echo
echo "Geometric mean of the wall-time ratios: **${geo}x** over ${#ratios[@]} programs (worst ${worst}x);"
echo "target <= 1.5x: $met. Geometric mean of the CPU-time ratios: ${cpu_geo}x."
echo "* load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
