#!/usr/bin/env python3
"""The CPU target's total CPU time per benchmark program under several engine settings, in one
run (no GPU): what choosing the engine costs a whole program, compilation included.

    cargo build --release --workspace
    python3 benchmarks/cpu_time.py [--runs N] [--scales S,S...] [--config E[:AFTER]...] [NAME...]

Each benchmark program (benchmarks/programs/NAME.cu, -DBENCH_SMALL) is built once by this tree's
cuda-flux-clang for the CPU target, then run with each configuration in turn, --runs rounds at
each scale (BENCH_REPS_SCALE), with CUDA_FLUX_CPU_THREADS=1 (one worker) and every kernel
instrumented (as when profiling). A configuration is CUDA_FLUX_CPU_ENGINE E and, after a colon,
CUDA_FLUX_CPU_NATIVE_AFTER (none: unset, the runtime's default threshold); `default` leaves both
unset. Per program and scale: the median over the runs of the process's CPU time (user +
system, from wait4: parsing, LLVM's compilation, the kernels and the host's own work), and each
configuration's median against the first's. The counts (CUDA_FLUX_CPU_STATS, per kernel) must be
the same in every run of a program and scale.

Writes a Markdown table (--out, default stdout); exits 1 if a program fails or its counts differ.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from cost import load_average, machine  # noqa: E402
from cpu_speed import build, geomean, run_once  # noqa: E402

PROGRAMS = ["gemm", "stencil2d", "stencil3d", "reduction", "scan", "nbody", "histogram", "spmv",
            "bfs", "fft", "launches", "polybench"]
CONFIGS = ["interpreter", "native", "native:0"]


def parse_config(text):
    """`E[:AFTER]` -> (engine or None, native_after or None)."""
    engine, _, after = text.partition(":")
    if engine == "default":
        engine = None
    elif engine not in ("interpreter", "native"):
        raise ValueError(f"unknown engine in `{text}`")
    if after and not after.isdigit():
        raise ValueError(f"bad threshold in `{text}`")
    return engine, (int(after) if after else None)


def measure(binary, scale, configs, runs, work):
    """{config: median CPU seconds} and the thread-instructions, over `runs` rounds in which
    every configuration runs once. Raises RuntimeError when counts differ."""
    times = {c: [] for c in configs}
    reference = None
    thread = None
    for _ in range(runs):
        for config in configs:
            engine, after = parse_config(config)
            result = run_once(binary, scale, work, engine, after, kernels=None)
            if reference is None:
                reference, thread = result["counts"], result["thread"]
            elif result["counts"] != reference:
                raise RuntimeError(f"{config} at scale {scale}: counts differ "
                                   f"({result['counts']} vs {reference})")
            times[config].append(result["cpu_s"])
    return {c: statistics.median(v) for c, v in times.items()}, thread


def render(doc):
    m = doc["machine"]
    configs = doc["configs"]
    lines = [
        f"# CPU target: total CPU time per program ({doc['date']})",
        "",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['os']}; commit {m['commit']}.",
        f"- `benchmarks/cpu_time.py --runs {doc['runs']} --scales "
        f"{','.join(str(s) for s in doc['scales'])} --config {' --config '.join(configs)}`: "
        f"programs built with `-DBENCH_SMALL`, every kernel instrumented, "
        f"`CUDA_FLUX_CPU_THREADS=1`; median CPU time (user + system) of the whole process over "
        f"{doc['runs']} rounds (configurations alternating); counts identical in every run.",
        f"- Load average (1 min) at start {doc['load_start']}, at end {doc['load_end']}; "
        f"{doc['elapsed_s']:.0f} s in all.",
        "",
        "| program | scale | thread-instructions | "
        + " | ".join(f"{c} s" for c in configs) + " | "
        + " | ".join(f"{c} / {configs[0]}" for c in configs[1:]) + " |",
        "|---|---:|---:|" + "---:|" * (2 * len(configs) - 1),
    ]
    for scale in doc["scales"]:
        rows = [r for r in doc["rows"] if r["scale"] == scale]
        for r in rows:
            if "error" in r:
                lines.append(f"| {r['name']} | {scale} | failed: {r['error']} |")
                continue
            t = r["times"]
            lines.append(
                f"| {r['name']} | {scale} | {r['thread']:,} | "
                + " | ".join(f"{t[c]:.2f}" for c in configs) + " | "
                + " | ".join(f"{t[c] / t[configs[0]]:.2f}" if t[configs[0]] > 0 else "n/a"
                             for c in configs[1:]) + " |")
        ok = [r for r in rows if "error" not in r]
        if ok:
            totals = {c: sum(r["times"][c] for r in ok) for c in configs}
            ratios = [geomean([r["times"][c] / r["times"][configs[0]] for r in ok
                               if r["times"][configs[0]] > 0]) for c in configs[1:]]
            lines.append(
                f"| **total** (ratios: geometric mean) | {scale} | | "
                + " | ".join(f"**{totals[c]:.2f}**" for c in configs) + " | "
                + " | ".join(f"**{x:.2f}**" if x else "n/a" for x in ratios) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scales", default="1,16",
                        help="BENCH_REPS_SCALE values, comma-separated (default 1,16)")
    parser.add_argument("--config", action="append",
                        help=f"E[:AFTER], repeatable (default: {' '.join(CONFIGS)})")
    parser.add_argument("--out", help="Markdown file to write (default: stdout)")
    parser.add_argument("programs", nargs="*", default=PROGRAMS)
    args = parser.parse_args(argv)
    configs = args.config or CONFIGS
    try:
        for config in configs:
            parse_config(config)
        scales = [float(s) if "." in s else int(s) for s in args.scales.split(",")]
    except ValueError as e:
        print(f"cpu_time.py: {e}", file=sys.stderr)
        return 2
    driver = os.path.join(ROOT, "target", "release", "cuda-flux-clang")
    if not os.path.exists(driver):
        print(f"cpu_time.py: {driver} not found (cargo build --release --workspace)",
              file=sys.stderr)
        return 2
    start = time.monotonic()
    doc = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "runs": args.runs,
           "scales": scales, "configs": configs, "load_start": load_average(), "rows": []}
    failed = False
    with tempfile.TemporaryDirectory(prefix="cf-cpu-time-") as work:
        for name in args.programs:
            binary = os.path.join(work, name)
            try:
                build(driver, os.path.join(HERE, "programs", f"{name}.cu"), binary, None)
            except (RuntimeError, OSError) as e:
                doc["rows"].extend({"name": name, "scale": s, "error": str(e)} for s in scales)
                failed = True
                continue
            for scale in scales:
                try:
                    times, thread = measure(binary, scale, configs, args.runs, work)
                    row = {"name": name, "scale": scale, "times": times, "thread": thread}
                except (RuntimeError, OSError, ValueError, KeyError) as e:
                    row = {"name": name, "scale": scale, "error": str(e)}
                    failed = True
                doc["rows"].append(row)
                print(f"{name} at {scale}: {row.get('times') or row.get('error')}",
                      file=sys.stderr)
    doc["load_end"] = load_average()
    doc["elapsed_s"] = time.monotonic() - start
    text = render(doc)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
