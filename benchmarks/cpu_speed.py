#!/usr/bin/env python3
"""The CPU target's interpreter speed: thread-instructions per second on one core, this tree's
ptx-sim against a baseline build of it, in one run (no GPU).

    cargo build --release --workspace
    # a baseline: any other checkout's release build of cpu-runtime, e.g. main's
    git worktree add /tmp/cf-base main && (cd /tmp/cf-base && cargo build --release -p cpu-runtime)
    python3 benchmarks/cpu_speed.py --baseline /tmp/cf-base/target/release [--runs N] [NAME...]

Each benchmark program (benchmarks/programs/NAME.cu, -DBENCH_SMALL) is built twice by this tree's
cuda-flux-clang for the CPU target: against the baseline's libcpu_runtime (CUDA_FLUX_CPU_RUNTIME_LIB,
the .so beside it) and against this tree's. The compiler, the instrumented PTX and the program
are the same; only the interpreter differs. Both binaries then run alternately, --runs times each,
at two repetition scales (BENCH_REPS_SCALE=S and 2S), with

  CUDA_FLUX_CPU_THREADS=1        one worker thread: a per-core rate
  CUDA_FLUX_KERNELS=<no match>   the original, uninstrumented kernels (--instrumented: unset,
                                 every kernel instrumented, counter code included)
  CUDA_FLUX_CPU_STATS=FILE       the interpreter's exact counts and kernel times per kernel
  CUDA_FLUX_CPU_ENGINE=E         per side, with --old-engine / --new-engine E (interpreter or
                                 native; unset by default: the runtime's default engine)
  CUDA_FLUX_CPU_NATIVE_AFTER=N   with --native-after N, both sides (0: the native engine compiles
                                 each function at its first run, so that its code runs
                                 throughout; unset by default: the runtime's threshold)

Per run: thread- and warp-instructions (summed over kernels; they must be equal on both sides and
in every run), kernel time from the program's CUDA events (`kernel_ms`), and the process's CPU
time (user + system, from wait4). Both rates are marginal: what the launches added by going from
scale S to 2S cost, so that warm-up launches, input generation and the host-side check drop out:

  events   (thread-instructions at 2S - at S) / (kernel_ms at 2S - at S): CUDA events, the
           programs' own timing (wall clock: other load on the machine slows it)
  cpu      (thread-instructions at 2S - at S) / (CPU seconds at 2S - at S): much less sensitive
           to other processes on a shared machine

each from the medians over the runs of its side and scale.

With --callgrind, each side instead runs once per scale under `valgrind --tool=callgrind`, and
the table gives host instructions per thread-instruction, marginal as above: ((Ir at 2S - Ir
at S) / added thread-instructions). That figure does not depend on other load on the machine
(work, not time: it cannot see a slow gather or a cache miss), so it shows changes of a few
percent that timings on a shared machine cannot; use a scale at which the added work dwarfs
what varies between runs (the native engine's compilation).

Writes a Markdown table (--out, default stdout) and exits 1 if a program fails or its counts
differ between the sides.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NO_KERNEL = "cuda_flux_cpu_speed_no_kernel_has_this_name"
DEFAULT_PROGRAMS = ["gemm", "stencil2d", "stencil3d", "reduction", "scan", "nbody", "histogram",
                    "spmv"]

# The machine description and load figure every benchmark result here uses (cost.py's).
sys.path.insert(0, HERE)
from cost import load_average, machine  # noqa: E402


def build(driver, source, binary, runtime_lib):
    env = dict(os.environ)
    env.pop("CUDA_FLUX_TARGET", None)
    if runtime_lib:
        env["CUDA_FLUX_CPU_RUNTIME_LIB"] = runtime_lib
    else:
        env.pop("CUDA_FLUX_CPU_RUNTIME_LIB", None)
    cmd = [driver, "-O2", "--cuda-flux-target=cpu", "--cuda-gpu-arch=sm_90", "-DBENCH_SMALL",
           source, "-o", binary]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        tail = " | ".join((out.stdout + out.stderr).strip().splitlines()[-3:])
        raise RuntimeError(f"build of {os.path.basename(source)} failed: {tail}")


def run_once(binary, scale, work, engine=None, native_after=None, kernels=NO_KERNEL,
             callgrind=False):
    """One run: engine and native_after set CUDA_FLUX_CPU_ENGINE and
    CUDA_FLUX_CPU_NATIVE_AFTER (None: unset, the runtime's defaults); kernels sets
    CUDA_FLUX_KERNELS (None: unset, every kernel instrumented); callgrind runs it under
    callgrind and adds its instruction count ("ir")."""
    stats = os.path.join(work, "stats.json")
    if os.path.exists(stats):
        os.remove(stats)
    env = dict(os.environ, CUDA_FLUX_CPU_THREADS="1",
               CUDA_FLUX_CPU_STATS=stats, BENCH_REPS_SCALE=str(scale),
               CUDA_FLUX_OUTPUT=os.path.join(work, "discard.json"))
    for var in ["CUDA_FLUX_MODE", "CUDA_FLUX_BANKS", "CUDA_FLUX_CPU_MEMCHECK",
                "CUDA_FLUX_CPU_ENGINE", "CUDA_FLUX_CPU_NATIVE_AFTER", "CUDA_FLUX_KERNELS"]:
        env.pop(var, None)
    if engine:
        env["CUDA_FLUX_CPU_ENGINE"] = engine
    if native_after is not None:
        env["CUDA_FLUX_CPU_NATIVE_AFTER"] = str(native_after)
    if kernels is not None:
        env["CUDA_FLUX_KERNELS"] = kernels
    out_path = os.path.join(work, "out.txt")
    with open(out_path, "w") as out:
        command = [binary]
        if callgrind:
            command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", binary]
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    with open(out_path) as f:
        text = f.read()
    code = os.waitstatus_to_exitcode(status)
    kernel_ms = None
    passed = False
    for line in text.splitlines():
        if line.startswith("kernel_ms:"):
            kernel_ms = float(line.split(":", 1)[1])
        if line.strip() == "result: PASS":
            passed = True
    if code != 0 or not passed or kernel_ms is None:
        tail = " | ".join(text.strip().splitlines()[-3:])
        raise RuntimeError(f"{os.path.basename(binary)} (scale {scale}): exit {code}: {tail}")
    with open(stats) as f:
        doc = json.load(f)
    kernels = doc["kernels"]
    ir = None
    if callgrind:
        collected = [line for line in text.splitlines() if "Collected :" in line]
        if not collected:
            raise RuntimeError(f"{os.path.basename(binary)}: no callgrind total in its output")
        ir = int(collected[-1].rsplit(":", 1)[1].strip())
    return {
        "ir": ir,
        "thread": sum(k["thread_instructions"] for k in kernels),
        "warp": sum(k["warp_instructions"] for k in kernels),
        "counts": {k["name"]: (k["thread_instructions"], k["warp_instructions"]) for k in kernels},
        "kernel_ns": sum(k["kernel_ns"] for k in kernels),
        "kernel_ms": kernel_ms,
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def measure(name, binaries, runs, scale, work, engines=None, native_after=None,
            callgrind=False, kernels=NO_KERNEL):
    """binaries: {"old": path, "new": path}; engines: {"old": E, "new": E} (None: unset);
    native_after: CUDA_FLUX_CPU_NATIVE_AFTER (None: unset); callgrind: one run per side and
    scale under callgrind; kernels: CUDA_FLUX_KERNELS as run_once. Returns a row, or raises on
    a failure."""
    engines = engines or {}
    samples = {side: {"low": [], "high": []} for side in binaries}
    for _ in range(1 if callgrind else runs):
        for level, s in (("low", scale), ("high", 2 * scale)):
            for side, binary in binaries.items():
                samples[side][level].append(
                    run_once(binary, s, work, engines.get(side), native_after,
                             kernels=kernels, callgrind=callgrind))
    return summarize(name, samples)


def summarize(name, samples):
    """The row of one program from its runs: samples[side]["low"|"high"] = [run_once results].
    Raises RuntimeError when counts differ between runs or sides."""
    for level in ("low", "high"):
        reference = samples["old"][level][0]["counts"]
        for side in samples:
            for r in samples[side][level]:
                if r["counts"] != reference:
                    raise RuntimeError(f"{name}: {side} counts differ from the baseline's "
                                       f"({r['counts']} vs {reference})")
    high = samples["old"]["high"][0]
    low = samples["old"]["low"][0]
    added = high["thread"] - low["thread"]
    row = {"name": name, "thread": high["thread"], "warp": high["warp"], "added": added}
    for side in samples:
        hi, lo = samples[side]["high"], samples[side]["low"]

        def delta(key):
            return statistics.median(r[key] for r in hi) - statistics.median(r[key] for r in lo)
        if hi[0].get("ir") is not None:
            row[f"{side}_host_per_thread"] = delta("ir") / added if added > 0 else None
            continue
        events_s = delta("kernel_ms") / 1e3
        cpu_s = delta("cpu_s")
        row[f"{side}_events"] = added / events_s if events_s > 0 and added > 0 else None
        row[f"{side}_cpu"] = added / cpu_s if cpu_s > 0 and added > 0 else None
    return row


def fmt_rate(v):
    return f"{v / 1e6:,.0f}" if v else "n/a"


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if a and b else "n/a"


def header(doc, title):
    """A result's title, machine and sides: the first lines of both tables."""
    m = doc["machine"]
    engines = doc.get("engines") or {}
    return [
        f"# CPU target: {title} ({doc['date']})",
        "",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['os']}; commit {m['commit']}.",
        f"- Baseline runtime: `{doc['baseline']}`; new: this tree's `target/release`. "
        f"`CUDA_FLUX_CPU_ENGINE`: old {engines.get('old') or 'unset'}, new "
        f"{engines.get('new') or 'unset'}; `CUDA_FLUX_CPU_NATIVE_AFTER`: "
        f"{'unset' if doc.get('native_after') is None else doc['native_after']}.",
    ]


def kernels_run(doc):
    """Which kernels a result's runs ran, in words."""
    if doc.get("instrumented"):
        return "the instrumented kernels, counter code included (`CUDA_FLUX_KERNELS` unset)"
    return "the original kernels"


def render_callgrind(doc):
    """The table of a --callgrind run."""
    flag = " --instrumented" if doc.get("instrumented") else ""
    lines = header(doc, "host instructions per thread-instruction") + [
        f"- `benchmarks/cpu_speed.py --callgrind{flag} --scale {doc['scale']}`: each side run "
        f"once at scales S and 2S under `valgrind --tool=callgrind` (`CUDA_FLUX_CPU_THREADS=1`, "
        f"{kernels_run(doc)}); host instructions (callgrind's `Ir`, the whole process) added from "
        f"S to 2S over the thread-instructions added (identical counts on both sides, checked).",
        "",
        "| program | added thread-instructions | old host/thread | new host/thread | old/new |",
        "|---|---:|---:|---:|---:|",
    ]
    ok = [r for r in doc["rows"] if "error" not in r]
    for r in doc["rows"]:
        if "error" in r:
            lines.append(f"| {r['name']} | failed: {r['error']} | | | |")
            continue
        old, new = r["old_host_per_thread"], r["new_host_per_thread"]
        lines.append(f"| {r['name']} | {r['added']:,} | {old:.2f} | {new:.2f} | "
                     f"{fmt_ratio(old, new)} |")
    if ok:
        old = geomean([r["old_host_per_thread"] for r in ok])
        new = geomean([r["new_host_per_thread"] for r in ok])
        lines.append(f"| **geometric mean** | | {old:.2f} | {new:.2f} | "
                     f"**{fmt_ratio(old, new)}** |")
    return "\n".join(lines) + "\n"


def render(doc):
    if doc.get("callgrind"):
        return render_callgrind(doc)
    flag = " --instrumented" if doc.get("instrumented") else ""
    kernels = (kernels_run(doc) if doc.get("instrumented") else
               f"`CUDA_FLUX_KERNELS={NO_KERNEL}` (the original, uninstrumented kernels)")
    lines = header(doc, "interpreter speed") + [
        f"- `benchmarks/cpu_speed.py{flag} --runs {doc['runs']} --scale {doc['scale']}`: "
        f"programs built with `-DBENCH_SMALL` by this tree's `cuda-flux-clang` against each "
        f"runtime, run alternately with `CUDA_FLUX_CPU_THREADS=1` and {kernels} (one worker); "
        f"medians of {doc['runs']} runs per side and scale.",
        f"- Load average (1 min) at start {doc['load_start']}, at end {doc['load_end']}; "
        f"{doc['elapsed_s']:.0f} s in all.",
        "- Counts: `CUDA_FLUX_CPU_STATS`, all launches at scale 2S, per kernel identical on both "
        "sides and in every run (checked, thread and warp level); *added*: the thread-"
        "instructions the launches added from scale S to 2S.",
        "- Rates, in million thread-instructions per second on one core, marginal (added "
        "thread-instructions over the added time, so warm-up and host work drop out): *events* "
        "times by the programs' CUDA events (`kernel_ms`, wall clock), *cpu* by the process's CPU "
        "time (less sensitive to other load on a shared machine).",
        "",
        "| program | thread-instructions | warp-instructions | added | old events M/s "
        "| new events M/s | new/old | old cpu M/s | new cpu M/s | new/old |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in doc["rows"]:
        if "error" in r:
            lines.append(f"| {r['name']} | failed: {r['error']} | | | | | | | | |")
            continue
        lines.append(
            f"| {r['name']} | {r['thread']:,} | {r['warp']:,} | {r['added']:,} | "
            f"{fmt_rate(r['old_events'])} | "
            f"{fmt_rate(r['new_events'])} | {fmt_ratio(r['new_events'], r['old_events'])} | "
            f"{fmt_rate(r['old_cpu'])} | {fmt_rate(r['new_cpu'])} | "
            f"{fmt_ratio(r['new_cpu'], r['old_cpu'])} |")
    ok = [r for r in doc["rows"] if "error" not in r]
    if ok:
        def gm(key):
            return geomean([r[key] for r in ok])

        def gmr(a, b):
            return geomean([r[a] / r[b] for r in ok if r[a] and r[b]])
        lines.append(
            f"| **geometric mean** | | | | {fmt_rate(gm('old_events'))} | "
            f"{fmt_rate(gm('new_events'))} | **{gmr('new_events', 'old_events'):.2f}** | "
            f"{fmt_rate(gm('old_cpu'))} | {fmt_rate(gm('new_cpu'))} | "
            f"**{gmr('new_cpu', 'old_cpu'):.2f}** |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True,
                        help="directory with the baseline's libcpu_runtime.a and .so")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=8,
                        help="BENCH_REPS_SCALE S of the lower scale (the higher is 2S)")
    parser.add_argument("--old-engine", choices=["interpreter", "native"],
                        help="CUDA_FLUX_CPU_ENGINE for the baseline's runs (default: unset)")
    parser.add_argument("--new-engine", choices=["interpreter", "native"],
                        help="CUDA_FLUX_CPU_ENGINE for this tree's runs (default: unset)")
    parser.add_argument("--native-after", type=int,
                        help="CUDA_FLUX_CPU_NATIVE_AFTER for both sides (default: unset)")
    parser.add_argument("--callgrind", action="store_true",
                        help="count host instructions under callgrind instead of timing")
    parser.add_argument("--instrumented", action="store_true",
                        help="run the instrumented kernels (CUDA_FLUX_KERNELS unset) instead "
                             "of the original ones")
    parser.add_argument("--out", help="Markdown file to write (default: stdout)")
    parser.add_argument("--json", help="also write the rows as JSON")
    parser.add_argument("programs", nargs="*", default=DEFAULT_PROGRAMS)
    args = parser.parse_args(argv)
    driver = os.path.join(ROOT, "target", "release", "cuda-flux-clang")
    baseline_lib = os.path.join(os.path.abspath(args.baseline), "libcpu_runtime.a")
    for path in (driver, baseline_lib, baseline_lib[:-2] + ".so"):
        if not os.path.exists(path):
            print(f"cpu_speed.py: {path} not found (see --help)", file=sys.stderr)
            return 2
    start = time.monotonic()
    doc = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "baseline": args.baseline,
           "runs": args.runs, "scale": args.scale, "load_start": load_average(), "rows": [],
           "engines": {"old": args.old_engine, "new": args.new_engine},
           "native_after": args.native_after, "callgrind": args.callgrind,
           "instrumented": args.instrumented}
    failed = False
    with tempfile.TemporaryDirectory(prefix="cf-cpu-speed-") as work:
        for name in args.programs:
            source = os.path.join(HERE, "programs", f"{name}.cu")
            binaries = {"old": os.path.join(work, f"{name}.old"),
                        "new": os.path.join(work, f"{name}.new")}
            try:
                if not os.path.exists(source):
                    raise RuntimeError(f"no {source}")
                build(driver, source, binaries["old"], baseline_lib)
                build(driver, source, binaries["new"], None)
                row = measure(name, binaries, args.runs, args.scale, work, doc["engines"],
                              args.native_after, args.callgrind,
                              kernels=None if args.instrumented else NO_KERNEL)
            except (RuntimeError, OSError, ValueError, KeyError) as e:
                row = {"name": name, "error": str(e)}
                failed = True
            doc["rows"].append(row)
            print(f"{name}: done", file=sys.stderr)
    doc["load_end"] = load_average()
    doc["elapsed_s"] = time.monotonic() - start
    text = render(doc)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
