#!/usr/bin/env bash
# Runs on a GPU machine, inside the folder benchmarks/gpu/bundle.sh made: every corpus program
# plain and instrumented; checks that both print the same result line, that each program's own
# check passes, and that the profile's witness instruction counts equal what the program counted
# itself; and that each block's thread count equals the one cuda-flux's CPU target counted for the
# same program (cpu-profiles/, made by bundle.sh; scheduling-dependent programs are skipped, see
# compare_cpu.py). Writes results.json (and each profile) to RESULTS_DIR (default ./results).
set -uo pipefail
cd "$(dirname "$0")"
results=${RESULTS_DIR:-results}
mkdir -p "$results"
status=0
for program in plain/*; do
    name=$(basename "$program")
    plain_out=$("./plain/$name" 2>&1); plain_status=$?
    CUDA_FLUX_OUTPUT="$results/$name.json" "./instrumented/$name" > "$results/$name.out" 2>&1
    instrumented_status=$?
    printf '%s\n' "$plain_out" > "$results/$name.plain.out"
    python3 witness_check.py "$name" "$plain_status" "$results/$name.plain.out" \
        "$instrumented_status" "$results/$name.out" "$results/$name.json" \
        >> "$results/checks.jsonl" || status=1
    if [ -f "cpu-profiles/$name.json" ]; then
        python3 compare_cpu.py "$name" "$results/$name.json" "cpu-profiles/$name.json" \
            >> "$results/cpu_compare.jsonl" || status=1
    fi
done
python3 - "$results" <<'PY'
import json, subprocess, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(f"{d}/checks.jsonl")]
try:
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
except OSError:
    gpu = "no GPU (nvidia-smi not found)"
try:
    cpu_rows = [json.loads(l) for l in open(f"{d}/cpu_compare.jsonl")]
except OSError:
    cpu_rows = []
json.dump({"device": gpu, "commit": open("COMMIT").read().strip(), "programs": rows,
           "gpu_vs_cpu_target": cpu_rows},
          open(f"{d}/results.json", "w"), indent=1)
ok = sum(r["ok"] for r in rows)
print(f"witness: {ok} passed, {len(rows) - ok} failed")
same = sum(r["ok"] for r in cpu_rows)
print(f"GPU vs CPU target block counts: {same} agree, {len(cpu_rows) - same} differ")
PY
exit $status
