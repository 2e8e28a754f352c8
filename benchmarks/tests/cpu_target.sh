#!/usr/bin/env bash
# Builds every benchmark program (or those named) with cuda-flux-clang for the CPU target, at
# its small test size (BENCH_SMALL), and runs it: the instrumented kernels execute in cuda-flux's
# PTX interpreter. Each program must print `result: PASS` (its own check against its host-side
# reference) and write a complete profile in which every launched kernel was counted. Tests the
# kernels, the programs' checks and the whole instrumenting pipeline without a GPU; says nothing
# about speed on a GPU.
#   benchmarks/tests/cpu_target.sh [NAME...]      (after cargo build --workspace)
set -uo pipefail
cd "$(dirname "$0")/.."
driver=${CUDA_FLUX_CLANG_DRIVER:-../target/debug/cuda-flux-clang}
if [ ! -x "$driver" ]; then
    echo "cpu_target: $driver is missing: run cargo build --workspace first" >&2
    exit 2
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for source in programs/*.cu; do names+=("$(basename "$source" .cu)"); done
fi
failed=0
for name in "${names[@]}"; do
    if ! "$driver" -O2 --cuda-flux-target=cpu -DBENCH_SMALL "programs/$name.cu" \
        -o "$out/$name" 2> "$out/$name.log"; then
        echo "cpu_target: $name: does not build"; cat "$out/$name.log"; failed=1; continue
    fi
    start=$(date +%s%N)
    (cd "$out" && CUDA_FLUX_OUTPUT="$out/$name.json" "./$name" > "$name.out" 2>&1); status=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    result=$(grep '^result:' "$out/$name.out" || echo "no result line")
    counted=$(python3 - "$out/$name.json" <<'PY'
import json, sys
try:
    profile = json.load(open(sys.argv[1]))
except (OSError, ValueError) as error:
    print(f"no complete profile ({error})")
    sys.exit(0)
launched = [k for k in profile["kernels"] if k.get("launches")]
uncounted = [k["name"] for k in launched if not k.get("instrumented")]
if not launched:
    print("no launch recorded")
elif uncounted:
    print("uncounted kernels: " + ", ".join(uncounted))
else:
    print(f"{len(launched)} kernel(s) counted")
PY
)
    printf 'cpu_target: %-12s status %d  %s  %s  (%d.%02d s)\n' "$name" "$status" "$result" \
        "$counted" $((ms / 1000)) $((ms % 1000 / 10))
    if [ "$status" -ne 0 ] || [ "$result" != "result: PASS" ] \
        || [[ "$counted" != *"kernel(s) counted" ]]; then
        cat "$out/$name.out"; failed=1
    fi
done
exit $failed
