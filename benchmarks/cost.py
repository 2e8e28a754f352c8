#!/usr/bin/env python3
"""What cuda-flux's counter code costs, measured on the CPU target (no GPU needed).

    cargo build --release --workspace
    benchmarks/cost.sh [--out PATH.md] [--runs N] [--timeout S] [--only NAME...]
                       [--skip NAME...] [--no-programs] [--no-corpus] [--extra SPEC.json ...]
                       [--arch SM]

Builds every benchmark program (benchmarks/programs/*.cu, -DBENCH_SMALL) and every corpus program
(corpus/*.cu and corpus/multi_tu) with

    target/release/cuda-flux-clang -O2 --cuda-flux-target=cpu --cuda-gpu-arch=sm_90
        --cuda-flux-keep=DIR

(--arch sm_70 builds sm_70 PTX instead: the drivers' default target, whose counter code differs
where it needs instructions of later targets; ptxas still reports sm_90 resources)

and runs each one N times (default 5) in two ways, alternating, with CUDA_FLUX_CPU_THREADS=1 and
CUDA_FLUX_CPU_STATS (crates/cpu-runtime/README.md):

  instrumented   as built: the counting clones `K__cf` run;
  original       with CUDA_FLUX_KERNELS set to a name no kernel has: the original kernels `K` run,
                 uncounted, in the same binary.

The interpreter counts every instruction alike, so per kernel, clone minus original is what the
counter code executed. `cuda-flux-ptxas -v -arch=sm_90` on the kept instrumented PTX (which
holds `K` and `K__cf`; it is ptxas with each clone held to its original's registers where the
GPU build holds it, crates/wrapper/src/registers.rs) gives registers and static shared memory
per function, for the occupancy each would have on sm_90. Reported per kernel and in summary (see render_markdown):

  expansion        clone / original warp instructions (geometric mean and worst over kernels)
  counter code     clone - original warp instructions
  atomics/1k       global atomics issued by counter code (clone - original) per 1000 original
                   warp instructions: aggregate, geometric mean, worst
  occupancy        theoretical CTAs per SM on sm_90 (`occupancy`), original and clone, at each
                   distinct launch configuration of the profile; kernels whose occupancy drops
  kernel time      CPU-target kernel time (sum of kernel_ns, median over the runs) instrumented /
                   original, per program: geometric mean, worst; also for the kernel-heavy
                   programs (original kernel time >= --heavy-ms, default 20 ms, and at least half
                   of the original run's wall time), and for the programs of the kinds the
                   target names (KERNEL_HEAVY_KINDS: stencils, tiled matmul, divergent loops,
                   barrier-heavy reductions) whatever their time on the small inputs

Writes the Markdown report to --out (default benchmarks/results/<date>-cost-cpu.md) and the raw
numbers next to it (same name, .json). The machine is named in both (lscpu model name, cores).

Extra programs (suites fetched locally; never commit third-party code): each --extra names a JSON
file holding one object or a list of objects

  {"name": "rodinia-bfs", "cwd": "/src/rodinia/cuda/bfs",
   "build": "make clean && make NVCC=cuda-flux-nvcc",          (optional: absent = prebuilt)
   "run": "./bfs ../../data/bfs/graph4096.txt",
   "keep": "/tmp/rodinia-bfs-keep"}                           (optional)

`build` runs in `cwd` through the shell with target/release first on PATH, CUDA_FLUX_TARGET=cpu
and CUDA_FLUX_KEEP=<keep dir> (the drivers keep the instrumented PTX there); `run` runs in `cwd`
as the benchmark programs do. An extra program passes when it exits with status 0 (a
`result: FAIL` line fails it too).

The apps of the public suites (benchmarks/suites.toml's recipes: build, input, run, check) are
measured by `benchmarks/suites.py cost`, which calls measure, document and write_document below
and adds the placements' comparison (compare_placements).

Python 3 standard library only. Not a test: scripts/test.sh runs only tests/test_cost.py, which
checks the arithmetic below on made-up numbers.
"""
import argparse
import datetime
import glob
import json
import math
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NO_KERNEL = "cuda_flux_cost_no_kernel_has_this_name"

# The kinds of kernel-heavy code issue 11's kernel-time target names (suites.toml's `cost_kind`
# takes one of these too).
HEAVY_KINDS = ("stencil", "tiled matmul", "divergent loops", "barrier-heavy reduction")
# The programs of this benchmark that are of each kind, named whatever their kernel time on the
# small inputs (the time-based "kernel-heavy" figure depends on how fast the interpreter is; this
# one does not).
KERNEL_HEAVY_KINDS = {
    "stencil2d": "stencil",
    "stencil3d": "stencil",
    "gemm": "tiled matmul",
    "corpus/loops": "divergent loops",
    "corpus/exit_after_work": "divergent loops",
    "reduction": "barrier-heavy reduction",
    "scan": "barrier-heavy reduction",
}
CLONE_SUFFIX = "__cf"
# Programs not written for this benchmark (no `result: PASS` line): an exit status of 0 passes
# them. "extra": --extra specs; "suite": apps measured by `suites.py cost`, which ran the app's
# own check on the instrumented build first.
OUTSIDE_KINDS = ("extra", "suite")

# sm_90 resources for the theoretical occupancy (CUDA occupancy calculator, compute capability 9.0).
SM90 = {
    "regs_per_sm": 65536,
    "reg_alloc_unit": 256,  # registers, allocated per warp
    "max_regs_per_thread": 255,
    "max_warps_per_sm": 64,
    "max_ctas_per_sm": 32,
    "shared_per_sm": 228 * 1024,
    "shared_reserved_per_cta": 1024,
    "shared_alloc_unit": 128,
    "max_shared_per_cta": 227 * 1024,
}

OCCUPANCY_FORMULA = (
    "warps(CTA) = ceil(threads / 32); CTAs/SM = min(32, floor(64 / warps), "
    "floor(floor(65536 / (ceil(32 x regs / 256) x 256)) / warps), "
    "floor(228 KiB / (ceil(static + dynamic shared, 128 B) + 1 KiB))); "
    "occupancy = CTAs x warps / 64 (regs > 255 or shared > 227 KiB: cannot launch, 0)"
)


# ---- arithmetic (tested by tests/test_cost.py) -------------------------------------------------


def ceil_to(x, unit):
    return -(-x // unit) * unit


def occupancy(threads, regs, shared_bytes, sm=SM90):
    """Theoretical occupancy of one CTA shape on an SM: CTAs per SM, warps per SM, the fraction of
    the SM's warp slots, and what limits it. `regs` per thread (0: no register limit), `shared`
    static plus dynamic bytes per CTA."""
    warps = -(-threads // 32)
    if warps == 0:
        raise ValueError("a CTA has at least one thread")
    if regs > sm["max_regs_per_thread"] or shared_bytes > sm["max_shared_per_cta"]:
        return {"ctas": 0, "warps": 0, "occupancy": 0.0, "limiter": "cannot launch"}
    limits = {
        "ctas": sm["max_ctas_per_sm"],
        "warps": sm["max_warps_per_sm"] // warps,
    }
    if regs > 0:
        per_warp = ceil_to(32 * regs, sm["reg_alloc_unit"])
        limits["registers"] = (sm["regs_per_sm"] // per_warp) // warps
    per_cta = ceil_to(shared_bytes, sm["shared_alloc_unit"]) + sm["shared_reserved_per_cta"]
    limits["shared"] = sm["shared_per_sm"] // per_cta
    ctas = min(limits.values())
    # Name the tightest limit; ties prefer the resource the instrumentation can change.
    order = ["registers", "shared", "warps", "ctas"]
    limiter = next(k for k in order if k in limits and limits[k] == ctas)
    return {
        "ctas": ctas,
        "warps": ctas * warps,
        "occupancy": ctas * warps / sm["max_warps_per_sm"],
        "limiter": limiter,
    }


def geomean(values):
    xs = list(values)
    if not xs or any(x <= 0 for x in xs):
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def median(values):
    xs = list(values)
    return statistics.median(xs) if xs else None


def ratio(num, den):
    if num is None or den is None or den <= 0:
        return None
    return num / den


def parse_ptxas(text):
    """`ptxas -v` output -> {entry function: {"registers", "shared_bytes", "stack_bytes",
    "spill_store_bytes"}} (device functions, listed only by their properties, are left out)."""
    functions = {}
    current = None
    properties = None
    frames = {}
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            properties = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", line)
        if m and properties is not None:
            frames[properties] = (int(m.group(1)), int(m.group(2)))
            properties = None
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and current is not None:
            smem = re.search(r"(\d+) bytes smem", line)
            stack, spills = frames.get(current, (0, 0))
            functions[current] = {
                "registers": int(m.group(1)),
                "shared_bytes": int(smem.group(1)) if smem else 0,
                "stack_bytes": stack,
                "spill_store_bytes": spills,
            }
            current = None
    return functions


def kernel_row(name, original, clone, resources=None, configs=(), profiled=None):
    """Per-kernel comparison. `original` and `clone`: statistics entries (cuda-flux-cpu-stats/1)
    of the original kernel's and the clone's launches; `resources`: parse_ptxas of the
    instrumented PTX; `configs`: distinct (block threads, dynamic shared bytes) of its launches;
    `profiled`: profile_counts' entry for the kernel (what the profile says it executed), which
    `profile_exact` compares with what the original kernel executed (None: not compared)."""
    ow, cw = original["warp_instructions"], clone["warp_instructions"]
    counter_atomics = clone["global_atomics"] - original["global_atomics"]
    row = {
        "kernel": name,
        "launches": original["launches"],
        "original_warp_instructions": ow,
        "clone_warp_instructions": cw,
        "original_thread_instructions": original["thread_instructions"],
        "clone_thread_instructions": clone["thread_instructions"],
        "counter_warp_instructions": cw - ow,
        "expansion": ratio(cw, ow),
        "thread_expansion": ratio(clone["thread_instructions"], original["thread_instructions"]),
        "original_global_atomics": original["global_atomics"],
        "counter_global_atomics": counter_atomics,
        "counter_atomics_per_1k": ratio(1000 * counter_atomics, ow),
        "original_kernel_ns": original["kernel_ns"],
        "clone_kernel_ns": clone["kernel_ns"],
        "kernel_time_ratio": ratio(clone["kernel_ns"], original["kernel_ns"]),
        "profile_exact": None if profiled is None else (
            profiled["warp_instructions"] == ow
            and profiled["thread_instructions"] == original["thread_instructions"]),
    }
    resources = resources or {}
    o_res, c_res = resources.get(name), resources.get(name + CLONE_SUFFIX)
    row["original_registers"] = o_res["registers"] if o_res else None
    row["clone_registers"] = c_res["registers"] if c_res else None
    for key in ["shared_bytes", "stack_bytes", "spill_store_bytes"]:
        row["original_" + key] = o_res[key] if o_res else None
        row["clone_" + key] = c_res[key] if c_res else None
    occupancies = []
    if o_res and c_res:
        for threads, dynamic in sorted(set(configs)):
            o = occupancy(threads, o_res["registers"], o_res["shared_bytes"] + dynamic)
            c = occupancy(threads, c_res["registers"], c_res["shared_bytes"] + dynamic)
            occupancies.append(
                {"block_threads": threads, "dynamic_shared_bytes": dynamic, "original": o, "clone": c}
            )
    row["occupancy"] = occupancies
    row["occupancy_drops"] = any(x["clone"]["ctas"] < x["original"]["ctas"] for x in occupancies)
    return row


def stat_block(values, worst=max):
    xs = [x for x in values if x is not None]
    return {
        "count": len(xs),
        "geomean": geomean(xs),
        "median": median(xs),
        "worst": worst(xs) if xs else None,
    }


def summarize(programs, heavy_ms=20.0, heavy_share=0.5, kinds=None):
    """Summary over the programs that passed both ways. `programs`: dicts with name, passed,
    kernels (kernel_row dicts), original_kernel_ns, clone_kernel_ns, original_wall_s; sets
    kernel_time_ratio and kernel_heavy on each program that passed. `kinds`: program name ->
    kind of kernel-heavy code (default KERNEL_HEAVY_KINDS)."""
    kinds = KERNEL_HEAVY_KINDS if kinds is None else kinds
    ok = [p for p in programs if p.get("passed")]
    rows = [k for p in ok for k in p["kernels"]]
    counted = [k for k in rows if k["original_warp_instructions"] > 0]
    total_orig = sum(k["original_warp_instructions"] for k in counted)
    total_counter = sum(k["counter_warp_instructions"] for k in counted)
    total_atomics = sum(k["counter_global_atomics"] for k in counted)
    atomics_rates = [k["counter_atomics_per_1k"] for k in counted]

    def worst_kernel(key):
        candidates = [k for k in counted if k.get(key) is not None]
        if not candidates:
            return None
        k = max(candidates, key=lambda k: k[key])
        return {"kernel": k["kernel"], "program": k.get("program"), key: k[key]}

    time_ratios = []
    heavy = []
    for p in ok:
        r = ratio(p["clone_kernel_ns"], p["original_kernel_ns"])
        p["kernel_time_ratio"] = r
        orig_ms = p["original_kernel_ns"] / 1e6
        wall_ms = (p.get("original_wall_s") or 0) * 1e3
        p["kernel_heavy"] = bool(orig_ms >= heavy_ms and wall_ms > 0 and orig_ms >= heavy_share * wall_ms)
        if r is not None:
            time_ratios.append(r)
            if p["kernel_heavy"]:
                heavy.append(r)
    drops = [
        {"program": k.get("program"), "kernel": k["kernel"]} for k in rows if k["occupancy_drops"]
    ]

    def worst_program(heavy_only):
        candidates = [p for p in ok if p["kernel_time_ratio"] is not None
                      and (p["kernel_heavy"] or not heavy_only)]
        return max(candidates, key=lambda p: p["kernel_time_ratio"])["name"] if candidates else None

    of_kind = [p for p in ok if p["name"] in kinds and p["kernel_time_ratio"] is not None]
    by_kind = dict(
        stat_block(p["kernel_time_ratio"] for p in of_kind),
        worst_program=(max(of_kind, key=lambda p: p["kernel_time_ratio"])["name"]
                       if of_kind else None),
        programs={p["name"]: kinds[p["name"]] for p in of_kind},
    )

    compared = [k for k in rows if k.get("profile_exact") is not None]
    return {
        "programs": len(programs),
        "programs_passed": len(ok),
        "profile_exact": {
            "compared": len(compared),
            "equal": sum(1 for k in compared if k["profile_exact"]),
            "differ": [{"program": k.get("program"), "kernel": k["kernel"]}
                       for k in compared if not k["profile_exact"]],
        },
        "kernels": len(counted),
        "expansion": dict(stat_block(k["expansion"] for k in counted),
                          aggregate=ratio(total_orig + total_counter, total_orig),
                          worst_kernel=worst_kernel("expansion")),
        "thread_expansion": stat_block(k["thread_expansion"] for k in counted),
        "counter_warp_instructions": total_counter,
        "original_warp_instructions": total_orig,
        "counter_atomics_per_1k": dict(
            stat_block(x for x in atomics_rates if x is not None and x > 0),
            aggregate=ratio(1000 * total_atomics, total_orig),
            zero=sum(1 for x in atomics_rates if x == 0),
            worst_kernel=worst_kernel("counter_atomics_per_1k"),
        ),
        "counter_global_atomics": total_atomics,
        "occupancy_checked": sum(1 for k in rows if k["occupancy"]),
        "occupancy_drops": drops,
        "kernel_time": dict(stat_block(time_ratios), worst_program=worst_program(False)),
        "kernel_time_heavy": dict(stat_block(heavy), worst_program=worst_program(True),
                                  programs=[p["name"] for p in ok if p["kernel_heavy"]],
                                  heavy_ms=heavy_ms, heavy_share=heavy_share),
        "kernel_time_kinds": by_kind,
    }


# The kernel_row figures compare_placements keeps per kernel and placement.
COMPARED = ("counter_warp_instructions", "counter_global_atomics", "expansion",
            "counter_atomics_per_1k", "clone_registers", "occupancy_drops")


def compare_placements(placements):
    """The same programs measured under several counter placements (built with different
    CUDA_FLUX_COUNTERS). `placements`: {placement: records of measure}, the first the
    reference. Compares the kernels measured under every placement, so that each figure covers
    the same work: per kernel its original warp instructions (the original kernels do not
    depend on the placement: a kernel whose counts differ is set aside in `mismatches`) and per
    placement the kernel_row figures; per placement the totals and statistics over those
    kernels, and the kernel-time ratio over the programs measured under every placement."""
    names = list(placements)
    by_kernel, by_program = {}, {}
    for name, records in placements.items():
        for p in records:
            if not p.get("passed"):
                continue
            by_program.setdefault(p["name"], {})[name] = p
            for k in p["kernels"]:
                by_kernel.setdefault((p["name"], k["kernel"]), {})[name] = k
    kernels, mismatches = [], []
    for (program, kernel), by in by_kernel.items():
        if set(by) != set(names):
            continue
        originals = [by[n]["original_warp_instructions"] for n in names]
        if len(set(originals)) != 1:
            mismatches.append({"program": program, "kernel": kernel,
                               "original_warp_instructions": dict(zip(names, originals))})
            continue
        kernels.append({"program": program, "kernel": kernel,
                        "original_warp_instructions": originals[0],
                        "placements": {n: by[n] for n in names}})
    figures = {}
    common_programs = [p for p, by in by_program.items() if set(by) == set(names)]
    for n in names:
        rows = [k["placements"][n] for k in kernels if k["original_warp_instructions"] > 0]
        original = sum(r["original_warp_instructions"] for r in rows)
        counter = sum(r["counter_warp_instructions"] for r in rows)
        atomics = sum(r["counter_global_atomics"] for r in rows)
        figures[n] = {
            "kernels": len(rows),
            "original_warp_instructions": original,
            "counter_warp_instructions": counter,
            "counter_global_atomics": atomics,
            "expansion": dict(stat_block(r["expansion"] for r in rows),
                              aggregate=ratio(original + counter, original)),
            "counter_atomics_per_1k": dict(
                stat_block(r["counter_atomics_per_1k"] for r in rows
                           if r["counter_atomics_per_1k"]),
                aggregate=ratio(1000 * atomics, original)),
            "occupancy_drops": sum(1 for r in rows if r["occupancy_drops"]),
            "occupancy_checked": sum(1 for r in rows if r["occupancy"]),
            "kernel_time": stat_block(
                ratio(by_program[p][n]["clone_kernel_ns"], by_program[p][n]["original_kernel_ns"])
                for p in common_programs),
        }
    # Per kernel and placement, only what the comparison shows (the records hold the rest).
    for k in kernels:
        k["placements"] = {n: {key: row[key] for key in COMPARED} for n, row in
                           k["placements"].items()}
    return {"placements": names, "programs": len(common_programs), "kernels": kernels,
            "mismatches": mismatches, "figures": figures}


def counter_code_ranking(records, top=10):
    """Where the counter code is: the kernels of the passed `records` with the most counter-code
    warp instructions, each with its share of all of them, best first."""
    rows = [k for p in records if p.get("passed") for k in p["kernels"]]
    total = sum(max(0, k["counter_warp_instructions"]) for k in rows)
    ranked = sorted(rows, key=lambda k: k["counter_warp_instructions"], reverse=True)[:top]
    return [dict(program=k.get("program"), kernel=k["kernel"],
                 counter_warp_instructions=k["counter_warp_instructions"],
                 share=ratio(k["counter_warp_instructions"], total),
                 expansion=k["expansion"], counter_atomics_per_1k=k["counter_atomics_per_1k"],
                 original_warp_instructions=k["original_warp_instructions"])
            for k in ranked if k["counter_warp_instructions"] > 0]


# ---- running -----------------------------------------------------------------------------------


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def machine():
    model = "unknown"
    try:
        for line in sh(["lscpu"]).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("Hypervisor vendor:"):
                hypervisor = line.split(":", 1)[1].strip()
                model += f", {hypervisor} guest"
    except OSError:
        pass
    pretty = platform.platform()
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    pretty = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    gpu = "none"
    if shutil.which("nvidia-smi"):
        out = sh(["nvidia-smi", "-L"])
        gpu = out.stdout.strip() or "none found by nvidia-smi"

    def first_line(cmd, last=False):
        try:
            lines = sh(cmd).stdout.strip().splitlines()
            return (lines[-1] if last else lines[0]) if lines else "unknown"
        except OSError:
            return "unknown"

    commit = first_line(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    dirty = sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "os": pretty,
        "gpu": gpu,
        "commit": commit + (" (uncommitted changes)" if dirty else ""),
        "clang": first_line(["clang-16", "--version"]),
        "ptxas": first_line(["ptxas", "--version"], last=True),
    }


def load_average():
    """The 1-minute load average (other work on the machine makes the times noisy)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def result_line(text):
    for line in text.splitlines():
        if line.startswith("result:"):
            return line.strip()
    return None


def run_once(command, cwd, env, timeout):
    start = time.monotonic()
    try:
        proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout, shell=isinstance(command, str))
    except subprocess.TimeoutExpired:
        return {"status": None, "timed_out": True, "wall_s": time.monotonic() - start,
                "result": None, "tail": ""}
    out = proc.stdout + proc.stderr
    return {"status": proc.returncode, "timed_out": False, "wall_s": time.monotonic() - start,
            "result": result_line(out), "tail": "\n".join(out.strip().splitlines()[-5:])}


def read_stats(path):
    with open(path) as f:
        doc = json.load(f)
    if doc.get("format") != "cuda-flux-cpu-stats/1":
        raise ValueError(f"{path}: format {doc.get('format')!r}")
    return {k["name"]: k for k in doc["kernels"]}


def load_profile(profile_path):
    """The run's profile (cuda-flux's JSON), or an empty one where there is none to read."""
    try:
        with open(profile_path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def profile_counts(profile):
    """Kernel name -> the warp and thread instructions `profile` (load_profile's) says its
    launches executed (each launch's per-instruction counts summed), for kernels whose every
    launch was counted whole (instrumented, mode `all`); the others are left out."""
    counts = {}
    for kernel in profile.get("kernels", []):
        launches = kernel.get("launches", [])
        if not launches or not all(launch.get("instrumented") and launch.get("mode") == "all"
                                   for launch in launches):
            continue
        total = {"warp_instructions": 0, "thread_instructions": 0}
        for launch in launches:
            for count in (launch.get("instructions") or {}).values():
                total["warp_instructions"] += count["warps"]
                total["thread_instructions"] += count["threads"]
        counts[kernel["name"]] = total
    return counts


def launch_configs(profile):
    """Kernel name -> distinct (block threads, dynamic shared bytes) of the launches in
    `profile` (load_profile's)."""
    configs = {}
    for kernel in profile.get("kernels", []):
        for launch in kernel.get("launches", []):
            b = launch["block"]
            configs.setdefault(kernel["name"], set()).add(
                (b[0] * b[1] * b[2], launch.get("dynamic_shared_bytes", 0)))
    return configs


def ptxas_resources(keep_dir, ptxas):
    """parse_ptxas of every kept instrumented PTX file (the sm_90 ones where there are any),
    assembled for sm_90 by `ptxas` (cuda-flux-ptxas: the clones held to their originals'
    registers where the GPU build holds them)."""
    files = sorted(glob.glob(os.path.join(keep_dir, "**", "*.instrumented.ptx"), recursive=True))
    sm90 = [f for f in files if ".sm_90." in os.path.basename(f)]
    resources, errors = {}, []
    for ptx in sm90 or files:
        out = sh([ptxas, "-v", "-arch=sm_90", ptx, "-o", os.devnull])
        if out.returncode != 0:
            errors.append(f"{os.path.basename(ptx)}: {(out.stderr.strip().splitlines() or ['?'])[0]}")
        resources.update(parse_ptxas(out.stdout + out.stderr))
    return resources, errors


def measure(program, runs, timeout, work, reps_scale=None):
    """Runs one built program `runs` times each way; returns its record. `reps_scale`: the
    benchmark programs' BENCH_REPS_SCALE (more timed repetitions, same work per launch), so
    that their kernel times rise above a loaded machine's noise; corpus programs ignore it."""
    record = {"name": program["name"], "kind": program["kind"], "passed": False, "notes": []}
    variants = {"instrumented": [], "original": []}
    profile = os.path.join(work, "profile.json")
    base = dict(program.get("env") or os.environ)
    for var in ["CUDA_FLUX_KERNELS", "CUDA_FLUX_MODE", "CUDA_FLUX_BANKS"]:
        base.pop(var, None)
    base["CUDA_FLUX_CPU_THREADS"] = "1"
    # Kernel times are the interpreter's unless the environment names an engine: the native
    # engine's tiers would compile some kernels mid-run, clone or original, and not others.
    base.setdefault("CUDA_FLUX_CPU_ENGINE", "interpreter")
    base.pop("BENCH_REPS_SCALE", None)
    if reps_scale is not None:
        base["BENCH_REPS_SCALE"] = str(reps_scale)
    for rep in range(runs):
        for variant in ["instrumented", "original"]:
            stats_path = os.path.join(work, f"stats.{variant}.{rep}.json")
            env = dict(base, CUDA_FLUX_CPU_STATS=stats_path,
                       CUDA_FLUX_OUTPUT=profile if rep == 0 and variant == "instrumented"
                       else os.path.join(work, "discard.json"))
            if variant == "original":
                env["CUDA_FLUX_KERNELS"] = NO_KERNEL
            r = run_once(program["run"], program["cwd"], env, timeout)
            r["rep"] = rep
            passed = (r["status"] == 0 and not (r["result"] or "").startswith("result: FAIL")
                      and (program["kind"] in OUTSIDE_KINDS or r["result"] == "result: PASS"))
            r["passed"] = passed
            if passed:
                try:
                    r["stats"] = read_stats(stats_path)
                except (OSError, ValueError) as e:
                    r["passed"] = False
                    r["tail"] = f"statistics: {e}"
            variants[variant].append(r)
            if not r["passed"]:
                what = "timed out" if r["timed_out"] else (
                    r["result"] or f"exit status {r['status']}")
                record["notes"].append(f"{variant} run {rep}: {what}: {r['tail']}")
                record["runs"] = strip_runs(variants)
                return record
    record["runs"] = strip_runs(variants)
    inst, orig = variants["instrumented"], variants["original"]
    first_i, first_o = inst[0]["stats"], orig[0]["stats"]
    # Counts must not change between runs (deterministic programs); time: median of the runs.
    for variant, rs in variants.items():
        for r in rs[1:]:
            for name, k in r["stats"].items():
                ref = rs[0]["stats"].get(name)
                if ref is None or ref["warp_instructions"] != k["warp_instructions"]:
                    record["notes"].append(
                        f"{variant}: {name}'s warp instructions differ between runs "
                        f"(first run's counts used)")
    profile_doc = load_profile(profile)
    configs = launch_configs(profile_doc)
    profiled = profile_counts(profile_doc)
    resources, errors = ptxas_resources(program["keep"], program["ptxas"])
    record["notes"].extend(f"ptxas: {e}" for e in errors)

    def median_ns(rs, name):
        return int(median(r["stats"].get(name, {}).get("kernel_ns", 0) for r in rs))

    kernels = []
    for name, original in first_o.items():
        clone = first_i.get(name + CLONE_SUFFIX)
        if clone is None:
            if name in first_i:
                record["notes"].append(f"{name}: not instrumented (the original ran in both)")
            else:
                record["notes"].append(f"{name}: no clone in the instrumented run")
            continue
        o = dict(original, kernel_ns=median_ns(orig, name))
        c = dict(clone, kernel_ns=median_ns(inst, name + CLONE_SUFFIX))
        row = kernel_row(name, o, c, resources, configs.get(name, ()), profiled.get(name))
        row["program"] = program["name"]
        kernels.append(row)
    record["kernels"] = kernels
    record["original_kernel_ns"] = int(median(sum(k["kernel_ns"] for k in r["stats"].values())
                                              for r in orig))
    record["clone_kernel_ns"] = int(median(sum(k["kernel_ns"] for k in r["stats"].values())
                                           for r in inst))
    record["original_wall_s"] = median(r["wall_s"] for r in orig)
    record["instrumented_wall_s"] = median(r["wall_s"] for r in inst)
    record["passed"] = True
    return record


def strip_runs(variants):
    """The runs as recorded in the JSON: status, wall time and the kernels' summed kernel_ns."""
    out = {}
    for v, rs in variants.items():
        out[v] = []
        for r in rs:
            x = {k: r[k] for k in ("rep", "status", "timed_out", "wall_s", "result", "passed")}
            if "stats" in r:
                x["kernel_ns"] = sum(k["kernel_ns"] for k in r["stats"].values())
            out[v].append(x)
    return out


def build(program, driver, timeout, arch="sm_90"):
    env = dict(os.environ)
    env.pop("CUDA_FLUX_TARGET", None)
    os.makedirs(program["keep"], exist_ok=True)
    if program["kind"] == "extra":
        if not program.get("build"):
            return None
        env["PATH"] = os.path.dirname(driver) + os.pathsep + env.get("PATH", "")
        env["CUDA_FLUX_TARGET"] = "cpu"
        env["CUDA_FLUX_KEEP"] = program["keep"]
        cmd = program["build"]
    else:
        cmd = [driver, "-O2", "--cuda-flux-target=cpu", f"--cuda-gpu-arch={arch}",
               f"--cuda-flux-keep={program['keep']}", *program["flags"], *program["sources"],
               "-o", program["binary"]]
    try:
        out = subprocess.run(cmd, cwd=program["cwd"], env=env, capture_output=True, text=True,
                             timeout=timeout, shell=isinstance(cmd, str))
    except subprocess.TimeoutExpired:
        return "build timed out"
    if out.returncode != 0:
        return "build failed: " + " | ".join((out.stdout + out.stderr).strip().splitlines()[-3:])
    warnings = [l for l in out.stderr.splitlines() if "not instrumented" in l or "uninstrumented" in l]
    program["build_warnings"] = warnings
    return None


def discover(args, work):
    programs = []
    if not args.no_programs:
        for src in sorted(glob.glob(os.path.join(HERE, "programs", "*.cu"))):
            name = os.path.splitext(os.path.basename(src))[0]
            programs.append({"name": name, "kind": "benchmark", "sources": [src],
                             "flags": ["-DBENCH_SMALL"]})
    if not args.no_corpus:
        for src in sorted(glob.glob(os.path.join(ROOT, "corpus", "*.cu"))):
            name = os.path.splitext(os.path.basename(src))[0]
            programs.append({"name": "corpus/" + name, "kind": "corpus", "sources": [src],
                             "flags": []})
        multi = os.path.join(ROOT, "corpus", "multi_tu")
        if os.path.isdir(multi):
            programs.append({"name": "corpus/multi_tu", "kind": "corpus", "flags": [],
                             "sources": [os.path.join(multi, "kernels.cu"),
                                         os.path.join(multi, "main.cu")]})
    for i, p in enumerate(programs):
        slug = p["name"].replace("/", "-")
        p["binary"] = os.path.join(work, "bin", slug)
        p["keep"] = os.path.join(work, "keep", slug)
        p["cwd"] = os.path.join(work, "run", slug)
        p["run"] = [p["binary"]]
        os.makedirs(p["cwd"], exist_ok=True)
        os.makedirs(os.path.dirname(p["binary"]), exist_ok=True)
    for spec_path in args.extra:
        with open(spec_path) as f:
            specs = json.load(f)
        for spec in specs if isinstance(specs, list) else [specs]:
            slug = "extra-" + re.sub(r"[^A-Za-z0-9_.-]", "-", spec["name"])
            programs.append({
                "name": "extra/" + spec["name"], "kind": "extra",
                "cwd": os.path.abspath(os.path.expanduser(spec.get("cwd", "."))),
                "build": spec.get("build"), "run": spec["run"],
                "keep": os.path.abspath(spec.get("keep") or os.path.join(work, "keep", slug)),
            })
    if args.only:
        programs = [p for p in programs if p["name"] in args.only
                    or p["name"].split("/")[-1] in args.only]
    skip = set(args.skip)
    return [p for p in programs if p["name"] not in skip and p["name"].split("/")[-1] not in skip]


# ---- report ------------------------------------------------------------------------------------


def fmt(x, digits=3, suffix=""):
    if x is None:
        return "n/a"
    if isinstance(x, int):
        return f"{x:,}{suffix}"
    return f"{x:.{digits}f}{suffix}"


def occ_text(row):
    if not row["occupancy"]:
        return "n/a"
    parts = []
    for x in row["occupancy"]:
        o, c = x["original"], x["clone"]
        mark = " **drops**" if c["ctas"] < o["ctas"] else ""
        parts.append(f"{x['block_threads']} thr: {o['ctas']}->{c['ctas']} CTAs "
                     f"({o['occupancy']:.0%}->{c['occupancy']:.0%}, {c['limiter']}){mark}")
    return "; ".join(parts)


def render_markdown(doc):
    s = doc["summary"]
    m = doc["machine"]
    lines = [
        f"# Counter-code cost on the CPU target: {doc['title']}",
        "",
        f"Measured {doc['date']} with `{doc['command']}`, commit "
        f"`{m['commit']}`, on {m['os']}, {m['cpu']} ({m['cores']} cores), GPU: {m['gpu']}; "
        f"{m['clang']}; {m['ptxas']}. Each program ran {doc['runs']} times each way, "
        f"alternating, with `CUDA_FLUX_CPU_THREADS=1` ({doc['elapsed_s']:.0f} s in all; 1-minute "
        f"load average {fmt(doc['load_average']['start'], 2)} at the start, "
        f"{fmt(doc['load_average']['end'], 2)} at the end); the original kernels ran in the same "
        f"binary with `CUDA_FLUX_KERNELS={NO_KERNEL}`. Counts are exact "
        f"(`CUDA_FLUX_CPU_STATS`, every instruction alike); times are the median of the runs.",
        "",
    ]
    for paragraph in doc.get("preamble", []):
        lines += [paragraph, ""]
    lines += [
        "## Summary",
        "",
        f"Programs: {s['programs_passed']} of {s['programs']} measured; kernels compared: "
        f"{s['kernels']}.",
        "",
        "| figure | value |",
        "| --- | --- |",
    ]
    e = s["expansion"]
    wk = e.get("worst_kernel") or {}
    lines.append(f"| instruction expansion, clone/original warp instructions: geomean over kernels | "
                 f"**{fmt(e['geomean'])}x** (median {fmt(e['median'])}x) |")
    lines.append(f"| ... worst kernel | {fmt(e['worst'])}x (`{wk.get('kernel')}` in "
                 f"{wk.get('program')}) |")
    lines.append(f"| ... aggregate (all kernels' warp instructions summed) | {fmt(e['aggregate'])}x |")
    t = s["thread_expansion"]
    lines.append(f"| thread-instruction expansion: geomean / worst | {fmt(t['geomean'])}x / "
                 f"{fmt(t['worst'])}x |")
    lines.append(f"| counter-code warp instructions (clone - original), all kernels | "
                 f"{fmt(s['counter_warp_instructions'])} (original: "
                 f"{fmt(s['original_warp_instructions'])}) |")
    a = s["counter_atomics_per_1k"]
    wa = a.get("worst_kernel") or {}
    lines.append(f"| global atomics by counter code per 1000 original warp instructions: aggregate | "
                 f"**{fmt(a['aggregate'], 1)}** ({fmt(s['counter_global_atomics'])} atomics) |")
    lines.append(f"| ... geomean over kernels / worst | {fmt(a['geomean'], 1)} / {fmt(a['worst'], 1)} "
                 f"(`{wa.get('kernel')}` in {wa.get('program')}) |")
    drops = s["occupancy_drops"]
    lines.append(f"| kernels whose theoretical sm_90 occupancy drops | **{len(drops)}** of "
                 f"{s['occupancy_checked']} checked"
                 + (": " + ", ".join(f"`{d['kernel']}` ({d['program']})" for d in drops)
                    if drops else "") + " |")
    k = s["kernel_time"]
    lines.append(f"| CPU-target kernel time instrumented/original, per program: geomean / worst | "
                 f"**{fmt(k['geomean'])}x** / {fmt(k['worst'])}x ({k['worst_program']}; "
                 f"{k['count']} programs) |")
    h = s["kernel_time_heavy"]
    lines.append(f"| ... kernel-heavy programs (original kernel time >= {h['heavy_ms']:g} ms and "
                 f">= {h['heavy_share']:.0%} of the run): geomean / worst | "
                 + (f"{fmt(h['geomean'])}x / {fmt(h['worst'])}x ({h['worst_program']}; "
                    f"{h['count']} programs: {', '.join(h['programs'])}) |" if h["count"]
                    else "none measured |"))
    x = s.get("profile_exact")
    if x and x["compared"]:
        lines.append(
            "| kernels whose profile (instrumented run) counts exactly the warp and thread "
            "instructions the original kernel executed (the interpreter's own count, other run) | "
            f"**{x['equal']}** of {x['compared']}"
            + ("; differ: " + ", ".join(f"`{short(d['kernel'])}` ({d['program']})"
                                        for d in x["differ"])
               + " (a program whose control flow depends on timing runs differently each time)"
               if x["differ"] else "") + " |")
    kinds = s.get("kernel_time_kinds")
    if kinds:
        named = ", ".join(f"{name} ({kind})" for name, kind in kinds["programs"].items())
        value = (f"{fmt(kinds['geomean'])}x / {fmt(kinds['worst'])}x ({kinds['worst_program']}; "
                 f"{kinds['count']} programs: {named})" if kinds["count"] else "none measured")
        lines.append("| ... the kinds the target names (stencils, tiled matmul, divergent loops, "
                     "barrier-heavy reductions), by program whatever their time here: "
                     f"geomean / worst | {value} |")
    lines += [
        "",
        f"Occupancy formula (sm_90): {OCCUPANCY_FORMULA}. Registers and static shared memory "
        "per function from `cuda-flux-ptxas -v -arch=sm_90` on the kept instrumented PTX "
        "(original `K` and clone `K__cf` compiled from the same file; the clone held to its "
        "original's registers where the GPU build holds it, without spilling more); block size and dynamic shared memory from "
        "each distinct launch configuration in the profile.",
        "",
        "Kernel time is the CPU interpreter's, a stand-in for a GPU's: it weighs PTX "
        "instructions by what interpreting each costs (roughly alike) and has no GPU memory "
        "system, so contended atomics and lost occupancy cost nothing extra there; the counts "
        "and the occupancy are what carries over to a GPU."
        + (" Launches made at the same time from several host threads "
           "(corpus/host_threads_streams) overlap on the cores, so their kernel_ns include "
           "waiting for a core." if any(p["name"] == "corpus/host_threads_streams"
                                        for p in doc["programs"]) else ""),
        "",
        "## Programs",
        "",
        "| program | kernels | original kernel ms | instrumented kernel ms | ratio | original wall s | notes |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in doc["programs"]:
        if not p.get("passed"):
            lines.append(f"| {p['name']} | | | | | | not measured: "
                         f"{'; '.join(p['notes'])[:300].replace('|', '/')} |")
            continue
        heavy = " (kernel-heavy)" if p.get("kernel_heavy") else ""
        notes = "; ".join(p["notes"]).replace("|", "/")
        lines.append(f"| {p['name']}{heavy} | {len(p['kernels'])} | {p['original_kernel_ns'] / 1e6:.2f} | "
                     f"{p['clone_kernel_ns'] / 1e6:.2f} | {fmt(p.get('kernel_time_ratio'), 2)} | "
                     f"{p['original_wall_s']:.2f} | {notes} |")
    lines += [
        "",
        "## Kernels",
        "",
        "| program | kernel | launches | original warp instr. | counter warp instr. | expansion | "
        "thread exp. | counter atomics / 1k | regs orig->clone | occupancy (per block size) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in doc["programs"]:
        for r in p.get("kernels", []):
            name = short(r["kernel"])
            lines.append(
                f"| {p['name']} | `{name}` | {r['launches']} | {fmt(r['original_warp_instructions'])} | "
                f"{fmt(r['counter_warp_instructions'])} | {fmt(r['expansion'], 2)} | "
                f"{fmt(r['thread_expansion'], 2)} | {fmt(r['counter_atomics_per_1k'], 1)} | "
                f"{r['original_registers']}->{r['clone_registers']} | {occ_text(r)} |")
    lines.append("")
    return "\n".join(lines)


def document(records, title, command, runs, started, load_start, heavy_ms=20.0,
             heavy_share=0.5, kinds=None):
    """The report of one measurement (rendered by render_markdown, stored as JSON): `records`
    from measure, `started` its time.monotonic() start, `kinds` as for summarize."""
    return {
        "format": "cuda-flux-cost-cpu/1",
        "title": title,
        "date": datetime.date.today().isoformat(),
        "command": command,
        "machine": machine(),
        "runs": runs,
        "elapsed_s": round(time.monotonic() - started, 1),
        "load_average": {"start": load_start, "end": load_average()},
        "occupancy_formula": OCCUPANCY_FORMULA,
        "summary": summarize(records, heavy_ms, heavy_share, kinds),
        "programs": records,
    }


def write_document(doc, out, appendix=""):
    """Writes render_markdown(doc) + appendix to `out` and the JSON next to it, each through a
    temporary file (a run cut short leaves the previous complete files)."""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    json_path = os.path.splitext(out)[0] + ".json"
    for path, text in ((out, render_markdown(doc) + appendix),
                       (json_path, json.dumps(doc, indent=1, sort_keys=True) + "\n")):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


def short(name, limit=48):
    return name if len(name) <= limit else name[:limit - 3] + "..."


def render_ranking(ranking):
    """Markdown table of counter_code_ranking."""
    lines = ["| program | kernel | counter warp instr. | share of all counter code | expansion | "
             "counter atomics / 1k |", "| --- | --- | --- | --- | --- | --- |"]
    for r in ranking:
        lines.append(f"| {r['program']} | `{short(r['kernel'])}` | "
                     f"{fmt(r['counter_warp_instructions'])} | {fmt(r['share'] * 100, 1)}% | "
                     f"{fmt(r['expansion'], 2)}x | {fmt(r['counter_atomics_per_1k'], 1)} |")
    return lines


def render_comparison(comparison):
    """Markdown of compare_placements: figures side by side, then per kernel."""
    names = comparison["placements"]
    f = comparison["figures"]
    first = names[0]
    lines = [f"Over the {f[first]['kernels']} kernels (in {comparison['programs']} programs) "
             f"measured under every placement ({', '.join(f'`{n}`' for n in names)}); the "
             f"original kernels' counts are the same under each, as they must be"
             + (f", except in {len(comparison['mismatches'])} kernels left out: "
                + ", ".join(f"`{m['kernel']}` ({m['program']})" for m in comparison["mismatches"])
                if comparison["mismatches"] else "") + ".",
             "",
             "| figure | " + " | ".join(f"`{n}`" for n in names) + " |",
             "| --- |" + " --- |" * len(names)]

    def row(label, value):
        lines.append(f"| {label} | " + " | ".join(value(f[n]) for n in names) + " |")

    row("counter-code warp instructions", lambda x: fmt(x["counter_warp_instructions"]))
    row("instruction expansion: geomean / worst / aggregate",
        lambda x: f"{fmt(x['expansion']['geomean'])}x / {fmt(x['expansion']['worst'])}x / "
                  f"{fmt(x['expansion']['aggregate'])}x")
    row("counter atomics: total / per 1000 original warp instructions (aggregate)",
        lambda x: f"{fmt(x['counter_global_atomics'])} / "
                  f"{fmt(x['counter_atomics_per_1k']['aggregate'], 1)}")
    row("counter atomics per 1000: geomean / worst over kernels that issue any",
        lambda x: f"{fmt(x['counter_atomics_per_1k']['geomean'], 1)} / "
                  f"{fmt(x['counter_atomics_per_1k']['worst'], 1)}")
    row("kernels whose sm_90 occupancy drops",
        lambda x: f"{x['occupancy_drops']} of {x['occupancy_checked']}")
    row("CPU-target kernel time instrumented/original per program: geomean / worst",
        lambda x: f"{fmt(x['kernel_time']['geomean'])}x / {fmt(x['kernel_time']['worst'])}x")
    lines += ["", "| program | kernel | original warp instr. | counter warp instr. "
              + " / ".join(names) + " | expansion " + " / ".join(names)
              + " | counter atomics / 1k " + " / ".join(names) + " | clone regs "
              + " / ".join(names) + " |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for k in comparison["kernels"]:
        by = [k["placements"][n] for n in names]
        lines.append(
            f"| {k['program']} | `{short(k['kernel'])}` | {fmt(k['original_warp_instructions'])} | "
            + " / ".join(fmt(r["counter_warp_instructions"]) for r in by) + " | "
            + " / ".join(fmt(r["expansion"], 2) for r in by) + " | "
            + " / ".join(fmt(r["counter_atomics_per_1k"], 1) for r in by) + " | "
            + " / ".join(str(r["clone_registers"]) for r in by) + " |")
    lines.append("")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="report path (.md); the JSON goes next to it")
    parser.add_argument("--runs", type=int, default=5, help="runs per program and way (default 5)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per build or run")
    parser.add_argument("--reps-scale", type=float, default=None, metavar="FACTOR",
                        help="BENCH_REPS_SCALE for the benchmark programs: more timed "
                             "repetitions, for kernel times above a loaded machine's noise")
    parser.add_argument("--heavy-ms", type=float, default=20.0)
    parser.add_argument("--heavy-share", type=float, default=0.5)
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME")
    parser.add_argument("--skip", nargs="+", default=[], metavar="NAME")
    parser.add_argument("--no-programs", action="store_true", help="leave out benchmarks/programs")
    parser.add_argument("--no-corpus", action="store_true", help="leave out corpus/")
    parser.add_argument("--extra", action="append", default=[], metavar="SPEC.json")
    parser.add_argument("--title", default=None)
    parser.add_argument("--work-dir", help="keep binaries, PTX and statistics here")
    parser.add_argument("--arch", default="sm_90", metavar="SM",
                        help="the PTX target of the benchmark and corpus programs (default "
                             "sm_90; extra programs build as their spec says)")
    args = parser.parse_args(argv)

    driver = os.path.join(ROOT, "target", "release", "cuda-flux-clang")
    if not os.access(driver, os.X_OK):
        print(f"cost: {driver} is missing: run cargo build --release --workspace first", file=sys.stderr)
        return 2
    if not shutil.which("ptxas"):
        print("cost: ptxas not found on PATH (CUDA 11.8: scripts/setup.sh installs it)", file=sys.stderr)
        return 2
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(HERE, "results", f"{date}-cost-cpu.md")
    work = args.work_dir or tempfile.mkdtemp(prefix="cuda-flux-cost-")
    os.makedirs(work, exist_ok=True)
    started = time.monotonic()
    load_start = load_average()
    programs = discover(args, work)
    records = []
    for program in programs:
        t0 = time.monotonic()
        error = build(program, driver, args.timeout, args.arch)
        if error:
            record = {"name": program["name"], "kind": program["kind"], "passed": False,
                      "notes": [error]}
        else:
            pwork = os.path.join(work, "stats", program["name"].replace("/", "-"))
            os.makedirs(pwork, exist_ok=True)
            program["ptxas"] = os.path.join(os.path.dirname(driver), "cuda-flux-ptxas")
            record = measure(program, args.runs, args.timeout, pwork, args.reps_scale)
            if program.get("build_warnings"):
                record["notes"].append("build: " + "; ".join(program["build_warnings"]))
        records.append(record)
        status = "ok" if record["passed"] else "NOT MEASURED"
        print(f"cost: {program['name']:<28} {status:<12} {time.monotonic() - t0:6.1f} s"
              + ("" if record["passed"] else "  " + "; ".join(record["notes"])[:200]), flush=True)
    command = "benchmarks/cost.sh " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    doc = document(records, args.title or os.path.splitext(os.path.basename(out))[0], command,
                   args.runs, started, load_start, args.heavy_ms, args.heavy_share)
    summary = doc["summary"]
    write_document(doc, out)
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    print(f"cost: {summary['programs_passed']}/{summary['programs']} programs, "
          f"{summary['kernels']} kernels in {doc['elapsed_s']} s; wrote {out} and .json")
    e, k = summary["expansion"], summary["kernel_time"]
    print(f"cost: expansion geomean {fmt(e['geomean'])}x worst {fmt(e['worst'])}x; "
          f"counter atomics/1k aggregate {fmt(summary['counter_atomics_per_1k']['aggregate'], 1)}; "
          f"occupancy drops {len(summary['occupancy_drops'])}; "
          f"kernel time geomean {fmt(k['geomean'])}x worst {fmt(k['worst'])}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
