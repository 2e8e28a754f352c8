#!/usr/bin/env python3
"""Turns a runs.json written by benchmarks/run.sh into a Markdown report and a raw JSON copy.

    python3 report.py [RUNS_JSON...] [--out-dir DIR] [--name NAME]

RUNS_JSON defaults to results/runs.json. Several files (runs split over several run.sh calls, e.g.
to stay within a time limit per command) are merged: the first one's device, commit and dates,
every file's programs (a program named again replaces the earlier entry). Writes DIR/NAME.md and DIR/NAME.json, where DIR defaults
to the folder `results` next to this script (benchmarks/results in the repository) and NAME to
<date the runs started>-<gpu name as a slug>, e.g. 2026-11-23-nvidia-h200. The JSON holds the
runs and the summary computed here.

Per program: the median wall time and median kernel_ms of each variant over its passing runs, the
overhead ratios instrumented/clang (whole program: wall time; kernels: kernel_ms), and whether
every run passed its result check. Over the programs: geometric mean, median and worst (largest)
ratio, compared with the targets: whole program geomean <= 1.5x and worst <= 4x; kernels median
<= 2x. Where run.sh ran with --ncu, per kernel its clone's occupancy against its own (registers
per thread, theoretical and achieved occupancy, medians over the profiled launches; the CSVs are
read next to the runs.json that names them), and the kernels whose theoretical occupancy drops.
Python 3 standard library only.
"""
import argparse
import csv
import json
import math
import os
import re
import sys

VARIANTS = ["clang", "nvcc", "instrumented"]
TARGETS = [
    # (ratio kind, statistic, limit)
    ("wall", "geomean", 1.5),
    ("wall", "worst", 4.0),
    ("kernel", "median", 2.0),
]


def median(values):
    xs = sorted(values)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def geomean(values):
    xs = list(values)
    if not xs or any(x <= 0 for x in xs):
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def ratio(num, den):
    if num is None or den is None or den <= 0:
        return None
    return num / den


CLONE_SUFFIX = "__cf"
# ncu metric per occupancy figure (run.sh collects them with --ncu).
OCCUPANCY_METRICS = {
    "registers": "launch__registers_per_thread",
    "theoretical_pct": "sm__maximum_warps_per_active_cycle_pct",
    "achieved_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
}


def read_ncu(path):
    """`ncu --csv` output (after any ==PROF== lines) -> {kernel name: {metric: [value per
    profiled launch]}}; values that are not numbers are left out."""
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    kernels = {}
    if start is None:
        return kernels
    for row in csv.DictReader(lines[start:]):
        try:
            value = float((row.get("Metric Value") or "").replace(",", ""))
        except ValueError:
            continue
        metrics = kernels.setdefault(row.get("Kernel Name"), {})
        metrics.setdefault(row.get("Metric Name"), []).append(value)
    return kernels


def occupancy_rows(entry, base_dir):
    """Per kernel of the clang variant's ncu CSV whose clone the instrumented variant's CSV
    holds: each occupancy figure, kernel and clone (medians over launches)."""
    paths = [(entry.get(key) or {}).get("csv") for key in ("ncu", "ncu_instrumented")]
    if base_dir is None or not all(paths):
        return []
    try:
        plain, counted = (read_ncu(os.path.join(base_dir, p)) for p in paths)
    except OSError:
        return []
    rows = []
    for name in sorted(plain):
        clone = counted.get(name + CLONE_SUFFIX)
        if clone is None:
            continue
        row = {"program": entry["name"], "kernel": name}
        for figure, metric in OCCUPANCY_METRICS.items():
            row[figure] = [median(plain[name].get(metric, [])), median(clone.get(metric, []))]
        theoretical = row["theoretical_pct"]
        row["drops"] = None if None in theoretical else theoretical[1] < theoretical[0] - 0.5
        rows.append(row)
    return rows


def summarize_program(entry):
    runs = entry.get("runs", [])
    row = {"name": entry["name"], "variants": {}, "failures": []}
    for variant in VARIANTS:
        mine = [r for r in runs if r.get("variant") == variant]
        ok = [r for r in mine if r.get("passed")]
        kernel = [r["kernel_ms"] for r in ok if r.get("kernel_ms") is not None]
        row["variants"][variant] = {
            "runs": len(mine),
            "passed": len(ok),
            "wall_s": median([r["wall_s"] for r in ok]),
            "kernel_ms": median(kernel),
        }
        for r in mine:
            if not r.get("passed"):
                first_err = (r.get("stderr_tail") or "").strip().splitlines()[:1]
                what = "timed out" if r.get("timed_out") else (
                    r.get("result") or f"exit status {r.get('status')}, no result line"
                    + (f" ({first_err[0]})" if first_err else ""))
                row["failures"].append(f"{variant} #{r.get('rep')}: {what}")
    v = row["variants"]
    row["all_passed"] = bool(runs) and not row["failures"]
    row["wall_ratio"] = ratio(v["instrumented"]["wall_s"], v["clang"]["wall_s"])
    row["kernel_ratio"] = ratio(v["instrumented"]["kernel_ms"], v["clang"]["kernel_ms"])
    row["nvcc_vs_clang_wall"] = ratio(v["nvcc"]["wall_s"], v["clang"]["wall_s"])
    row["nvcc_vs_clang_kernel"] = ratio(v["nvcc"]["kernel_ms"], v["clang"]["kernel_ms"])
    profiles = [r.get("profile") for r in runs if r.get("variant") == "instrumented" and r.get("profile")]
    if profiles:
        p = profiles[0]
        row["profile"] = {k: p.get(k) for k in ("launches", "launches_counted", "kernels",
                                                 "kernels_not_instrumented", "launch_reasons",
                                                 "thread_instructions", "bytes")}
    return row


def stats(values):
    xs = [x for x in values if x is not None]
    return {"count": len(xs), "geomean": geomean(xs), "median": median(xs),
            "worst": max(xs) if xs else None}


def summarize(doc, base_dirs=None):
    """`base_dirs`: per program, the folder of the runs.json that holds it (its ncu CSVs' base)."""
    rows = [summarize_program(p) for p in doc.get("programs", [])]
    occupancy = [r for p in doc.get("programs", [])
                 for r in occupancy_rows(p, (base_dirs or {}).get(p["name"]))]
    aggregate = {"wall": stats(r["wall_ratio"] for r in rows),
                 "kernel": stats(r["kernel_ratio"] for r in rows)}
    targets = []
    for kind, statistic, limit in TARGETS:
        value = aggregate[kind][statistic]
        targets.append({"ratio": kind, "statistic": statistic, "limit": limit, "value": value,
                        "met": None if value is None else value <= limit})
    return {"programs": rows, "aggregate": aggregate, "targets": targets,
            "all_passed": bool(rows) and all(r["all_passed"] for r in rows),
            "occupancy": {"kernels": occupancy,
                          "checked": sum(1 for r in occupancy if r["drops"] is not None),
                          "drops": [f"{r['program']}: {r['kernel']}" for r in occupancy
                                    if r["drops"]]}}


def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", (text or "unknown-gpu").lower()).strip("-") or "unknown-gpu"


def output_name(doc):
    date = (doc.get("started") or "0000-00-00")[:10]
    return f"{date}-{slug((doc.get('device') or {}).get('name'))}"


def fmt(x, digits=3, suffix=""):
    return "n/a" if x is None else f"{x:.{digits}f}{suffix}"


def render_markdown(doc, summary):
    dev = doc.get("device") or {}
    lines = [
        f"# Benchmarks: overhead of cuda-flux on {dev.get('name') or 'unknown GPU'}",
        "",
        f"* runs started {doc.get('started')}, finished {doc.get('finished')}; "
        f"{doc.get('runs_per_variant')} runs per variant, interleaved (clang, nvcc, instrumented)",
        f"* device: {dev.get('name')}, driver {dev.get('driver')}, memory {dev.get('memory')}, "
        f"max SM clock {dev.get('sm_clock_max_mhz')}",
        f"* host: {json.dumps(doc.get('host'))}",
        f"* commit measured: `{doc.get('commit')}`",
    ]
    for warning in doc.get("warnings", []):
        lines.append(f"* **warning**: {warning}")
    if doc.get("env"):
        lines.append(f"* environment: {json.dumps(doc['env'])}")
    toolchain = (doc.get("toolchain") or "").strip()
    if toolchain:
        lines += ["", "Toolchain (from the bundle):", "", "```text", toolchain, "```"]
    lines += [
        "",
        "Medians over passing runs. Wall time: process start to exit (includes input generation",
        "and the CPU check). `kernel_ms`: the program's CUDA-event time around its kernel launches.",
        "Ratios are instrumented / clang.",
        "",
        "| program | clang wall s | nvcc wall s | instr. wall s | clang kernel ms | nvcc kernel ms "
        "| instr. kernel ms | wall ratio | kernel ratio | check |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in summary["programs"]:
        v = r["variants"]
        check = "PASS" if r["all_passed"] else "FAIL: " + "; ".join(r["failures"][:3]) + (
            f" (+{len(r['failures']) - 3} more)" if len(r["failures"]) > 3 else "")
        lines.append(
            f"| {r['name']} | {fmt(v['clang']['wall_s'])} | {fmt(v['nvcc']['wall_s'])} "
            f"| {fmt(v['instrumented']['wall_s'])} | {fmt(v['clang']['kernel_ms'], 1)} "
            f"| {fmt(v['nvcc']['kernel_ms'], 1)} | {fmt(v['instrumented']['kernel_ms'], 1)} "
            f"| {fmt(r['wall_ratio'], 2, 'x')} | {fmt(r['kernel_ratio'], 2, 'x')} | {check} |")
    a = summary["aggregate"]
    lines += [
        "",
        "| ratio (instrumented / clang) | programs | geometric mean | median | worst |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| whole program (wall) | {a['wall']['count']} | {fmt(a['wall']['geomean'], 2, 'x')} "
        f"| {fmt(a['wall']['median'], 2, 'x')} | {fmt(a['wall']['worst'], 2, 'x')} |",
        f"| kernels (kernel_ms) | {a['kernel']['count']} | {fmt(a['kernel']['geomean'], 2, 'x')} "
        f"| {fmt(a['kernel']['median'], 2, 'x')} | {fmt(a['kernel']['worst'], 2, 'x')} |",
        "",
        "| target | value | met |",
        "| --- | ---: | --- |",
    ]
    names = {"wall": "whole program", "kernel": "kernels"}
    for t in summary["targets"]:
        met = "n/a" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {names[t['ratio']]} {t['statistic']} <= {t['limit']}x "
                     f"| {fmt(t['value'], 2, 'x')} | {met} |")
    profiled = [r for r in summary["programs"] if r.get("profile")]
    if profiled:
        lines += ["", "Profiles (first instrumented run of each program):", "",
                  "| program | launches | counted | kernels | not instrumented | thread instructions | bytes |",
                  "| --- | ---: | ---: | ---: | --- | ---: | ---: |"]
        for r in profiled:
            p = r["profile"]
            lines.append(f"| {r['name']} | {p.get('launches')} | {p.get('launches_counted')} "
                         f"| {p.get('kernels')} | {', '.join(p.get('kernels_not_instrumented') or []) or '-'} "
                         f"| {p.get('thread_instructions')} | {p.get('bytes')} |")
    occupancy = summary.get("occupancy") or {}
    if occupancy.get("kernels"):
        lines += ["", "Occupancy (ncu, medians over the profiled launches; kernel -> its clone):", "",
                  "| program | kernel | registers | theoretical occupancy % | achieved occupancy % | drops |",
                  "| --- | --- | ---: | ---: | ---: | --- |"]
        for r in occupancy["kernels"]:
            pair = lambda v, d: f"{fmt(v[0], d)} -> {fmt(v[1], d)}"  # noqa: E731
            drops = "n/a" if r["drops"] is None else ("**yes**" if r["drops"] else "no")
            lines.append(f"| {r['program']} | `{r['kernel']}` | {pair(r['registers'], 0)} "
                         f"| {pair(r['theoretical_pct'], 1)} | {pair(r['achieved_pct'], 1)} | {drops} |")
        lines += ["", f"Theoretical occupancy drops for {len(occupancy['drops'])} of "
                  f"{occupancy['checked']} kernels checked."]
    lines += ["", "nvcc / clang (context, not a target): "
              + ", ".join(f"{r['name']} wall {fmt(r['nvcc_vs_clang_wall'], 2, 'x')}, "
                          f"kernels {fmt(r['nvcc_vs_clang_kernel'], 2, 'x')}"
                          for r in summary["programs"]) + "."]
    lines += ["", f"Every run passed its result check: {'yes' if summary['all_passed'] else '**no**'}.", ""]
    return "\n".join(lines)


def merge(docs):
    """One runs document from several: the first one's header, all programs (later wins)."""
    merged = dict(docs[0])
    programs = {}
    for doc in docs:
        if doc.get("commit") != merged.get("commit"):
            merged.setdefault("warnings", []).append(
                f"runs of different commits merged: {merged.get('commit')} and {doc.get('commit')}")
        for entry in doc.get("programs", []):
            programs[entry["name"]] = entry
    merged["programs"] = list(programs.values())
    merged["finished"] = max((d.get("finished") or "") for d in docs) or None
    return merged


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs_json", nargs="*", default=[os.path.join("results", "runs.json")])
    ap.add_argument("--out-dir", default=os.path.join(here, "results"))
    ap.add_argument("--name", help="file name without extension (default: <date>-<gpu>)")
    args = ap.parse_args(argv)
    docs, base_dirs = [], {}
    for path in args.runs_json:
        with open(path) as f:
            docs.append(json.load(f))
        for entry in docs[-1].get("programs", []):
            base_dirs[entry["name"]] = os.path.dirname(os.path.abspath(path))
    doc = merge(docs)
    summary = summarize(doc, base_dirs)
    name = args.name or output_name(doc)
    os.makedirs(args.out_dir, exist_ok=True)
    md_path = os.path.join(args.out_dir, name + ".md")
    json_path = os.path.join(args.out_dir, name + ".json")
    with open(md_path, "w") as f:
        f.write(render_markdown(doc, summary))
    with open(json_path, "w") as f:
        json.dump({"runs": doc, "summary": summary}, f, indent=1)
    a = summary["aggregate"]
    print(f"report: {md_path} (+ {os.path.basename(json_path)}): wall geomean "
          f"{fmt(a['wall']['geomean'], 2, 'x')}, worst {fmt(a['wall']['worst'], 2, 'x')}; kernel median "
          f"{fmt(a['kernel']['median'], 2, 'x')}; all checks passed: {summary['all_passed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
