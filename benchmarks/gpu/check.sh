#!/usr/bin/env bash
# Runs on a GPU machine, inside the folder benchmarks/gpu/bundle.sh made: every corpus program
# plain and instrumented; checks that both print the same result line, that each program's own
# check passes, and that the profile's witness instruction counts equal what the program counted
# itself. Writes results.json (and each profile) to RESULTS_DIR (default ./results).
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
json.dump({"device": gpu, "commit": open("COMMIT").read().strip(), "programs": rows},
          open(f"{d}/results.json", "w"), indent=1)
ok = sum(r["ok"] for r in rows)
print(f"{ok} passed, {len(rows) - ok} failed")
PY
exit $status
