#!/usr/bin/env bash
# Runs on a GPU machine, inside the bundle benchmarks/build.sh made (target/bench-bundle): every
# program in its three variants (clang, nvcc, instrumented), N times each, interleaved per
# repetition (clang, nvcc, instrumented, clang, ...). Records per run the wall time (process start
# to exit), the program's `kernel_ms`, its result line and exit status; for instrumented runs a
# summary of the profile (CUDA_FLUX_OUTPUT) and, gzipped, the profile of the first run (all runs
# with --keep-profiles). With --ncu (slow), and ncu on PATH, also collects Nsight Compute
# instruction metrics and occupancy (registers, theoretical and achieved) of the clang variant per
# program into ncu/<program>.csv, and of the instrumented variant (its clones) into
# ncu/<program>.instrumented.csv; report.py compares each clone's occupancy with its kernel's.
# Writes everything to $RESULTS_DIR/runs.json (default results/), rewritten after every program.
#
#   ./run.sh [-n N] [--ncu] [--ncu-launch-count K] [--keep-profiles] [--timeout S] [PROGRAM...]
#
# Then: python3 report.py results/runs.json   (here or back in the repository)
set -euo pipefail
cd "$(dirname "$0")"
exec python3 - "$@" <<'PY'
import argparse, datetime, gzip, json, os, platform, re, shutil, subprocess, sys, time

VARIANTS = ["clang", "nvcc", "instrumented"]
NCU_METRICS = ",".join([
    "smsp__inst_executed.sum",
    "smsp__inst_executed_op_global_ld.sum",
    "smsp__inst_executed_op_global_st.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    # Occupancy: what report.py compares between a kernel (clang) and its clone (instrumented).
    "launch__registers_per_thread",
    "sm__maximum_warps_per_active_cycle_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
])

ap = argparse.ArgumentParser(prog="run.sh")
ap.add_argument("-n", "--runs", type=int, default=5, help="runs per variant and program (5)")
ap.add_argument("--ncu", action="store_true",
                help="also collect ncu metrics for the clang and instrumented variants")
ap.add_argument("--ncu-launch-count", type=int, default=200,
                help="kernel launches ncu profiles per program (-c; 0: all) (200)")
ap.add_argument("--keep-profiles", action="store_true", help="keep every instrumented run's profile")
ap.add_argument("--timeout", type=float, default=300, help="seconds before a run is killed (300)")
ap.add_argument("programs", nargs="*", help="programs to run (default: all in clang/)")
args = ap.parse_args()

results = os.environ.get("RESULTS_DIR", "results")
os.makedirs(os.path.join(results, "profiles"), exist_ok=True)
programs = args.programs or sorted(os.listdir("clang"))
for p in programs:
    for v in VARIANTS:
        if not os.path.isfile(os.path.join(v, p)):
            sys.exit(f"run.sh: {v}/{p} missing")


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def device_info():
    info = {"name": None, "driver": None, "memory": None, "sm_clock_max_mhz": None}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=60).stdout
        line = out.strip().splitlines()[0]
        name, driver, memory, clock = [s.strip() for s in line.split(",")]
        info.update(name=name, driver=driver, memory=memory, sm_clock_max_mhz=clock)
    except (OSError, IndexError, ValueError, subprocess.TimeoutExpired):
        info["name"] = "unknown (nvidia-smi failed or is missing)"
    return info


def tail(text, lines=12):
    return "\n".join(text.splitlines()[-lines:])


def profile_summary(path):
    """What a cuda-flux/1 profile says, in a few numbers (None if there is no profile)."""
    if not os.path.exists(path):
        return None
    summary = {"bytes": os.path.getsize(path)}
    try:
        with open(path) as f:
            prof = json.load(f)
    except (OSError, ValueError) as e:
        summary["error"] = f"unreadable: {e}"
        return summary
    kernels = prof.get("kernels", [])
    launches = [l for k in kernels for l in k.get("launches", [])]
    summary.update(
        schema=prof.get("schema"),
        kernels=len(kernels),
        kernels_not_instrumented=sorted({k.get("demangled") or k.get("name") for k in kernels
                                         if not k.get("instrumented", False)}),
        launches=len(launches),
        launches_counted=sum(1 for l in launches if l.get("instrumented")),
        launch_reasons=sorted({l.get("reason") for l in launches if not l.get("instrumented")} - {None}),
        thread_instructions=sum(c.get("threads", 0) for k in kernels for c in k.get("totals", {}).values()),
        warp_instructions=sum(c.get("warps", 0) for k in kernels for c in k.get("totals", {}).values()),
    )
    return summary


def run_once(program, variant, rep):
    cmd = [os.path.join(".", variant, program)]
    env = dict(os.environ)
    profile = os.path.abspath(os.path.join(results, "profiles", f"{program}.{rep}.json"))
    if variant == "instrumented":
        env["CUDA_FLUX_OUTPUT"] = profile
        if os.path.exists(profile):
            os.remove(profile)
    start = time.perf_counter()
    timed_out = False
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                              timeout=args.timeout)
        status, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        timed_out, status = True, None
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.perf_counter() - start
    kernel_ms = re.search(r"^kernel_ms: ([0-9.eE+-]+)$", out, re.M)
    result = re.search(r"^result: .*$", out, re.M)
    row = {
        "variant": variant, "rep": rep, "status": status, "timed_out": timed_out,
        "wall_s": round(wall, 6),
        "kernel_ms": float(kernel_ms.group(1)) if kernel_ms else None,
        "result": result.group(0) if result else None,
        "passed": status == 0 and result is not None and result.group(0) == "result: PASS",
    }
    if not row["passed"]:
        row["stdout_tail"], row["stderr_tail"] = tail(out), tail(err)
    elif err.strip():
        row["stderr_tail"] = tail(err, 4)
    if variant == "instrumented":
        row["profile"] = profile_summary(profile)
        if os.path.exists(profile):
            if rep == 0 or args.keep_profiles:
                with open(profile, "rb") as src, gzip.open(profile + ".gz", "wb") as dst:
                    shutil.copyfileobj(src, dst)
                row["profile"]["file"] = os.path.relpath(profile + ".gz", results)
            os.remove(profile)
    return row


def run_ncu(program, variant="clang"):
    if shutil.which("ncu") is None:
        return {"skipped": "ncu not on PATH"}
    os.makedirs(os.path.join(results, "ncu"), exist_ok=True)
    suffix = "" if variant == "clang" else f".{variant}"
    csv = os.path.join(results, "ncu", f"{program}{suffix}.csv")
    # Mangled names: a clone is its kernel's name and `__cf`.
    cmd = ["ncu", "--csv", "--print-kernel-base", "mangled", "--metrics", NCU_METRICS,
           "--log-file", csv]
    if args.ncu_launch_count > 0:
        cmd += ["--launch-count", str(args.ncu_launch_count)]
    cmd.append(os.path.join(".", variant, program))
    # The profile of a run under ncu is not kept (replayed kernels count more than once).
    env = dict(os.environ, CUDA_FLUX_OUTPUT=os.devnull)
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              env=env, timeout=max(args.timeout, 1800))
        status, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired:
        status, err = None, "timed out"
    return {"csv": os.path.relpath(csv, results), "status": status, "command": " ".join(cmd),
            "launch_count": args.ncu_launch_count or "all",
            "seconds": round(time.perf_counter() - start, 3), "stderr_tail": tail(err, 6)}


doc = {
    "schema": "cuda-flux-bench-runs/1",
    "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": read("COMMIT", "unknown"),
    "toolchain": read("TOOLCHAIN"),
    "device": device_info(),
    "host": {"machine": platform.machine(), "kernel": platform.release(), "cpus": os.cpu_count(),
             "hostname": platform.node()},
    "runs_per_variant": args.runs,
    "variants": VARIANTS,
    "env": {k: v for k, v in os.environ.items() if k.startswith(("CUDA_FLUX_", "BENCH_"))},
    "programs": [],
}
out_path = os.path.join(results, "runs.json")
print(f"run.sh: {len(programs)} programs x {len(VARIANTS)} variants x {args.runs} runs on "
      f"{doc['device']['name']}; results in {out_path}", flush=True)
failed = 0
for program in programs:
    entry = {"name": program, "runs": []}
    doc["programs"].append(entry)
    for rep in range(args.runs):
        for variant in VARIANTS:
            row = run_once(program, variant, rep)
            entry["runs"].append(row)
            failed += not row["passed"]
            note = ""
            if not row["passed"]:
                first_err = (row.get("stderr_tail") or "").strip().splitlines()[:1]
                note = " (TIMED OUT)" if row["timed_out"] else f" (status {row['status']}" + (
                    f": {first_err[0]})" if first_err else ")")
            print(f"  {program:12s} {variant:12s} #{rep}: {row['wall_s']:8.3f} s wall, "
                  f"kernel_ms {row['kernel_ms']}, {row['result'] or 'no result line'}{note}", flush=True)
    if args.ncu:
        entry["ncu"] = run_ncu(program)
        entry["ncu_instrumented"] = run_ncu(program, "instrumented")
        print(f"  {program:12s} ncu: {entry['ncu']}; instrumented: {entry['ncu_instrumented']}",
              flush=True)
    doc["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with open(out_path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(out_path + ".tmp", out_path)
print(f"run.sh: {sum(len(p['runs']) for p in doc['programs']) - failed} runs passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
