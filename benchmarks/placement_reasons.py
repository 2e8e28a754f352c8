#!/usr/bin/env python3
"""Which placement rules cost the most counter code on the public suites.

    cargo build -p analysis        (for target/debug/cuda-flux, or name one with --cuda-flux)
    benchmarks/placement_reasons.py WORK [--placement derived] [--measured RESULTS.json]
                                    [--cuda-flux BIN] [--update-costs FULL,PACKED,WARP]
                                    [--what-if-arch SM] [--top N] [--out PATH.md]

WORK is the work directory of a `benchmarks/suites.py cost` run (its --work-dir): under
WORK/<placement>/apps/<app>/ it finds what that run kept, `keep/*.<arch>.ptx` (the original PTX of
each unit, the instrumentation's input, as CUDA_FLUX_KEEP keeps it next to the instrumented PTX)
and `cost/profile.json` (the profile of the instrumented run: per kernel, launch and block, thread
and warp counts). It reads nothing else, and fetches and builds nothing: the suites' code stays
where that run left it, and none of it is copied into the output.

For every kernel of every profile it runs `cuda-flux placement --json` on the PTX that defines it
(the file's own `.target`, as the build placed it) and, per block (the kernel's, then its device
functions', as the profile lists them), estimates the counter code of the update at the block's
top:

    counter warp instructions = warp executions of the block x update instructions
                                (full, packed or warp-only update, as `cuda-flux placement`
                                measures the code it inserts; none for blocks counted from the
                                launch, copied, derived by a region's flush or by a uniform
                                branch's difference)
    global atomics            = warp executions x the update's reductions (2, 1, 1)

The update sizes are those of the cuda-flux that runs here; for a run of other counter code,
--update-costs gives that code's (e.g. 7,6,4 before the last active lane led, commit ef69cd8).

and attributes each block with an update to the reason its innermost loop is not counted in
registers (the placement rule, `Rejection::rule`), to "divergent part of a region" (a block of a
region counted at its top because it lies between a divergent branch and its join), or to
"outside loops". It prints (or writes, with --out) a Markdown ranking of the reasons by estimated
counter instructions and atomics over all apps, the top kernels per reason with the loop and its
reason in words, and checks the estimate against the measured totals of the same run
(--measured: cost.py's JSON, field counter_warp_instructions and counter_global_atomics per
kernel): what the estimate leaves out is the flushes, the counted edges' `add`s, induction
snapshots and recoveries, and the prologue.

Python 3 standard library only.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

DEFAULT_MEASURED = os.path.join(HERE, "results", "2026-11-28-cost-suites-sm70-after.json")
OUTSIDE = "outside loops"
DIVERGENT_PART = "divergent part of a region"


def placement_json(cuda_flux, ptx, arch=None):
    """`cuda-flux placement --json [--arch ARCH] PTX`, parsed: (the architecture placed for,
    {function name: function entry})."""
    return placement_json_with(cuda_flux, ptx, ["--arch", arch] if arch else [])


def placement_json_with(cuda_flux, ptx, options):
    """`cuda-flux placement --json OPTIONS PTX`, parsed as placement_json's."""
    command = [cuda_flux, "placement", "--json", ptx] + options
    out = subprocess.run(command, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"cuda-flux placement {ptx}: {out.stderr.strip()}")
    report = json.loads(out.stdout)
    return report["arch"], {f["name"]: f for f in report["functions"]}


def app_dirs(work, placement):
    """{app name (suite/app[/version]): its directory} for apps with a profile and kept PTX."""
    root = os.path.join(work, placement, "apps")
    found = {}
    for directory, subdirs, _ in os.walk(root):
        if "keep" in subdirs and os.path.isfile(os.path.join(directory, "cost", "profile.json")):
            found[os.path.relpath(directory, root)] = directory
    return dict(sorted(found.items()))


def original_ptx(keep):
    """The kept original PTX files of an app (not the instrumented ones), sorted."""
    return sorted(os.path.join(keep, f) for f in os.listdir(keep)
                  if f.endswith(".ptx") and not f.endswith(".instrumented.ptx"))


def unit_stem(ptx_path):
    """`main` for `0-main.sm_70.ptx`."""
    name = os.path.basename(ptx_path)
    name = name.split("-", 1)[1] if "-" in name and name.split("-", 1)[0].isdigit() else name
    return name.split(".", 1)[0]


def summed_warps(kernel):
    """Per block, warp executions summed over the kernel's counted launches."""
    warps = [0] * len(kernel.get("blocks", []))
    for launch in kernel.get("launches", []):
        if not launch.get("instrumented"):
            continue
        for index, value in enumerate((launch.get("block_counts") or {}).get("warps") or []):
            if index < len(warps):
                warps[index] += value
    return warps


def choose_ptx(kernel, files):
    """The PTX (path, functions) that defines `kernel` for the architecture it ran (the file's
    `.target`), preferring the unit named like its source file; None if none does."""
    arch = f"sm_{kernel.get('arch')}"
    defining = [(path, functions) for path, (file_arch, functions) in files.items()
                if kernel["name"] in functions and f".{arch}." in os.path.basename(path)]
    stem = os.path.splitext(os.path.basename(kernel.get("source") or ""))[0]
    for path, functions in defining:
        if unit_stem(path) == stem:
            return path, functions
    return defining[0] if defining else None


def attribute(function, block):
    """(category, loop header, reason text) of a block with an update at its top."""
    header = block.get("loop")
    if header is None:
        return OUTSIDE, None, ""
    loop = next(l for l in function["loops"] if l["header"] == header)
    if loop["decision"] == "rejected":
        return loop["rule"], header, loop["reason"]
    return DIVERGENT_PART, header, loop["text"]


def analyse_kernel(kernel, functions, update_costs=None):
    """Per category: {'instructions', 'atomics', 'loops': {(function, header): (label, text, instr,
    atomics)}}; and the kernel's totals, and the blocks whose PTX did not match the profile."""
    warps = summed_warps(kernel)
    seen = defaultdict(int)
    categories = {}
    mismatches = []
    for index, block in enumerate(kernel.get("blocks", [])):
        name = block.get("function")
        position = seen[name]
        seen[name] += 1
        function = functions.get(name)
        placed = function["blocks"][position] if function and position < len(
            function["blocks"]) else None
        if placed is None or placed["label"] != block.get("label") or placed["instructions"] != len(
                block.get("instructions", [])):
            mismatches.append(index)
            continue
        if placed["update_instructions"] == 0:
            continue
        size = placed["update_instructions"]
        if update_costs:
            size = update_costs.get(placed["counting"], size)
        instructions = warps[index] * size
        atomics = warps[index] * placed["update_reductions"]
        category, header, text = attribute(function, placed)
        entry = categories.setdefault(category, {"instructions": 0, "atomics": 0, "loops": {}})
        entry["instructions"] += instructions
        entry["atomics"] += atomics
        if header is not None:
            label = next((b["label"] for b in function["blocks"] if b["index"] == header), None)
            key = (name, header)
            old = entry["loops"].get(key, (label, text, 0, 0))
            entry["loops"][key] = (label, text, old[2] + instructions, old[3] + atomics)
    return categories, mismatches


def measured_kernels(path):
    """{(program, kernel): measured row} from cost.py's JSON."""
    with open(path, encoding="utf-8") as handle:
        doc = json.load(handle)
    rows = {}
    for program in doc.get("programs", []):
        for row in program.get("kernels", []):
            rows[(row["program"], row["kernel"])] = row
    return rows


def analyse(work, placement, cuda_flux, measured, arch=None, update_costs=None):
    """Rows per kernel: program, kernel, arch (placed for), categories, measured row; and the
    problems met. `arch`: place every file for it instead of its `.target` (what the same warp
    counts would cost under another architecture's placement); `update_costs`: {counting: update
    instructions} in place of those the placement reports."""
    rows = []
    problems = []
    for app, directory in app_dirs(work, placement).items():
        files = {}
        for ptx in original_ptx(os.path.join(directory, "keep")):
            try:
                files[ptx] = placement_json(cuda_flux, ptx, arch)
            except (RuntimeError, json.JSONDecodeError) as error:
                problems.append(f"{app}: {error}")
        with open(os.path.join(directory, "cost", "profile.json"), encoding="utf-8") as handle:
            profile = json.load(handle)
        for kernel in profile.get("kernels", []):
            if not kernel.get("launches"):
                continue
            chosen = choose_ptx(kernel, files)
            if chosen is None:
                problems.append(f"{app}: no kept PTX defines {kernel['name']} for "
                                f"sm_{kernel.get('arch')}")
                continue
            path, functions = chosen
            categories, mismatches = analyse_kernel(kernel, functions, update_costs)
            if mismatches:
                problems.append(f"{app}: {kernel['name']}: blocks {mismatches[:5]} of the profile "
                                f"do not match {os.path.basename(path)}; left out")
            rows.append({
                "program": app,
                "kernel": kernel["name"],
                "arch": arch or f"sm_{kernel.get('arch')}",
                "ptx": os.path.basename(path),
                "categories": categories,
                "measured": measured.get((app, kernel["name"])),
            })
    return rows, problems


def fmt(value):
    return f"{value:,}"


def pct(part, whole):
    return f"{100 * part / whole:.1f}%" if whole else "-"


def short(name, limit=44):
    return name if len(name) <= limit else name[:limit - 1] + "…"


def per_reason(rows):
    """{reason: {'instructions', 'atomics', 'loops', 'kernels': [(row, entry)]}}, most atomics
    first."""
    by_reason = defaultdict(lambda: {"instructions": 0, "atomics": 0, "kernels": [],
                                     "loops": 0})
    for row in rows:
        for category, entry in row["categories"].items():
            reason = by_reason[category]
            reason["instructions"] += entry["instructions"]
            reason["atomics"] += entry["atomics"]
            reason["loops"] += len(entry["loops"])
            reason["kernels"].append((row, entry))
    return dict(sorted(by_reason.items(), key=lambda kv: -kv[1]["atomics"]))


def totals(rows):
    """(measured rows, measured counter instructions, measured atomics, original warp
    instructions) of the kernels with a measured row."""
    measured = [r for r in rows if r["measured"]]
    return (measured,
            sum(r["measured"]["counter_warp_instructions"] for r in measured),
            sum(r["measured"]["counter_global_atomics"] for r in measured),
            sum(r["measured"]["original_warp_instructions"] for r in measured))


def estimated(row):
    """(counter instructions, atomics) estimated for a kernel."""
    return (sum(c["instructions"] for c in row["categories"].values()),
            sum(c["atomics"] for c in row["categories"].values()))


def per_1k(atomics, original):
    return f"{1000 * atomics / original:.1f}" if original else "-"


def ranking_table(rows):
    """The ranking: one row per reason, then all."""
    _, measured_instr, measured_atomics, original = totals(rows)
    lines = ["| reason (`rule`) | loops | kernels | counter warp instr. | share of measured | "
             "global atomics | share of measured | atomics per 1k original warp instr. |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for reason, entry in per_reason(rows).items():
        lines.append(
            f"| {reason} | {entry['loops']} | {len(entry['kernels'])} | "
            f"{fmt(entry['instructions'])} | {pct(entry['instructions'], measured_instr)} | "
            f"{fmt(entry['atomics'])} | {pct(entry['atomics'], measured_atomics)} | "
            f"{per_1k(entry['atomics'], original)} |")
    instr = sum(estimated(r)[0] for r in rows)
    atomics = sum(estimated(r)[1] for r in rows)
    lines.append(f"| all | | {len(rows)} | {fmt(instr)} | {pct(instr, measured_instr)} | "
                 f"{fmt(atomics)} | {pct(atomics, measured_atomics)} | "
                 f"{per_1k(atomics, original)} |")
    return lines


def top_kernels(rows, top, level="###"):
    """Per reason (a heading of `level`), its kernels with the most estimated atomics and their
    costliest loop."""
    lines = []
    for reason, entry in per_reason(rows).items():
        lines += [f"{level} {reason}", "",
                  "| program | kernel | arch | est. counter instr. | est. atomics | "
                  "measured atomics per 1k | loop (header) and reason |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        kernels = sorted(entry["kernels"], key=lambda ke: -ke[1]["atomics"])[:top]
        for row, kernel_entry in kernels:
            loops = sorted(kernel_entry["loops"].items(), key=lambda kv: -kv[1][3])
            why = ""
            if loops:
                (function, header), (label, text, _, _) = loops[0]
                where = f"`{label or header}`" + (f" in `{short(function)}`"
                                                  if function != row["kernel"] else "")
                more = f" (+{len(loops) - 1} more)" if len(loops) > 1 else ""
                why = f"{where}: {text}{more}"
            rate = row["measured"]["counter_atomics_per_1k"] if row["measured"] else None
            lines.append(
                f"| {row['program']} | `{short(row['kernel'])}` | {row['arch']} | "
                f"{fmt(kernel_entry['instructions'])} | {fmt(kernel_entry['atomics'])} | "
                f"{'-' if rate is None else f'{rate:.1f}'} | {why} |")
        lines.append("")
    return lines


def render(rows, problems, top, command, machine_line, what_if=None, sizes=(6, 5, 3)):
    """The Markdown document; `what_if`: (arch, rows placed for it) for an extra ranking;
    `sizes`: the full, packed and warp-only updates' instructions the estimate used."""
    measured_rows, measured_instr, measured_atomics, original = totals(rows)
    est_instr = sum(estimated(r)[0] for r in measured_rows)
    est_atomics = sum(estimated(r)[1] for r in measured_rows)
    archs = sorted({r["arch"] for r in rows})
    lines = [
        "# Why loops are not counted in registers: counter code by placement rule, "
        "Rodinia, Parboil, SHOC and Polybench-GPU apps of the sm_70 cost run",
        "",
        f"Computed {datetime.date.today().isoformat()} with `{command}` on {machine_line}, "
        "from what the cost run of `benchmarks/results/2026-11-28-cost-suites-sm70-after.md` "
        "kept (its original PTX per unit and its profile); no suite code is copied here.",
        "",
        "Per block with an update at its top, estimated counter code = warp executions "
        f"(profile) x the update's instructions (full {sizes[0]}, packed {sizes[1]}, warp-only "
        f"{sizes[2]}) and its global reductions (2, 1, 1); each such block is attributed to the rule that keeps its "
        "innermost loop out of registers (`cuda-flux placement`, docs/placement.md), to a "
        "region's divergent part, or to code outside loops. The PTX each app's build placed "
        f"(its `.target`): {', '.join(archs)}.",
        "",
        "## Estimate against the measured counter code",
        "",
        "| | counter warp instructions | global atomics |",
        "| --- | --- | --- |",
        f"| measured (clone - original), {len(measured_rows)} kernels | {fmt(measured_instr)} | "
        f"{fmt(measured_atomics)} |",
        f"| estimated: updates at block tops, same kernels | {fmt(est_instr)} "
        f"({pct(est_instr, measured_instr)}) | {fmt(est_atomics)} "
        f"({pct(est_atomics, measured_atomics)}) |",
        f"| left unexplained: flushes, counted edges, induction snapshots and recoveries, "
        f"prologues | {fmt(measured_instr - est_instr)} "
        f"({pct(measured_instr - est_instr, measured_instr)}) | "
        f"{fmt(measured_atomics - est_atomics)} "
        f"({pct(measured_atomics - est_atomics, measured_atomics)}) |",
        "",
        f"Original warp instructions of these kernels: {fmt(original)}. Kernels in the "
        f"profiles without a measured row: {len(rows) - len(measured_rows)}.",
        "",
        "## Ranking: reason -> estimated counter code, all apps",
        "",
    ]
    lines += ranking_table(rows)
    lines += ["", f"## Top kernels per reason (by estimated atomics, at most {top})", ""]
    lines += top_kernels(rows, top)
    lines += ["## Kernels with the most counter atomics per 1000 original warp instructions",
              "", "| program | kernel | arch | measured atomics per 1k | measured atomics | "
              "estimated (share) | largest reason |", "| --- | --- | --- | --- | --- | --- | --- |"]
    worst = sorted(measured_rows, key=lambda r: -(r["measured"]["counter_atomics_per_1k"] or 0))
    for row in worst[:20]:
        est = estimated(row)[1]
        largest = max(row["categories"].items(), key=lambda kv: kv[1]["atomics"],
                      default=(None, None))[0]
        m = row["measured"]
        lines.append(f"| {row['program']} | `{short(row['kernel'])}` | {row['arch']} | "
                     f"{m['counter_atomics_per_1k']:.1f} | {fmt(m['counter_global_atomics'])} | "
                     f"{fmt(est)} ({pct(est, m['counter_global_atomics'])}) | {largest or '-'} |")
    if what_if:
        arch, other = what_if
        lines += ["", f"## What if every unit were placed for {arch}", "",
                  f"The same warp counts, with every PTX placed for {arch} (`--arch {arch}`) "
                  "instead of its `.target`: what the updates at block tops would cost had the "
                  "builds targeted it. Shares are of the measured run's totals; the flushes the "
                  "new regions add are not in the estimate.", ""]
        lines += ranking_table(other)
        lines += ["", f"### Top kernels per reason under {arch} (at most {top})", ""]
        lines += top_kernels(other, top, "####")
    over = [r for r in measured_rows
            if estimated(r)[0] > r["measured"]["counter_warp_instructions"]
            or estimated(r)[1] > r["measured"]["counter_global_atomics"]]
    lines += ["", "## Checks", "",
              f"* Kernels whose estimate exceeds the measured counter code (would mean a wrong "
              f"cost or attribution): {len(over)}"
              + (": " + ", ".join(f"{r['program']} `{short(r['kernel'])}`" for r in over)
                 if over else "."),
              f"* Problems reading the inputs: {len(problems)}" + ("." if not problems else ":")]
    lines += [f"  * {p}" for p in problems]
    return "\n".join(lines) + "\n"


def current_sizes(cuda_flux):
    """(full, packed, warp-only) update instructions of the cuda-flux run here: from the
    placement of a made-up kernel that has all three."""
    # A divergent if/else on loaded data (one side measured, packed; the other's threads by
    # flow, warp-only: a branch on the thread index alone would be counted from the launch)
    # and a loop (under every-block, a full update).
    ptx = (".version 7.8\n.target sm_70\n.address_size 64\n"
           ".visible .entry k()\n{\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n"
           "\t.reg .b64 %rd<2>;\n\tmov.u32 %r1, %tid.x;\n\tcvt.u64.u32 %rd1, %r1;\n"
           "\tld.global.u32 %r0, [%rd1];\n\tsetp.ge.u32 %p1, %r0, 5;\n\t@%p1 bra $ELSE;\n"
           "\tadd.s32 %r2, %r1, 1;\n\tbra.uni $JOIN;\n$ELSE:\n\tadd.s32 %r2, %r1, 2;\n"
           "$JOIN:\n\tadd.s32 %r3, %r3, 1;\n\tsetp.lt.u32 %p1, %r3, %r1;\n"
           "\t@%p1 bra $JOIN;\n\tret;\n}\n")
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as handle:
        handle.write(ptx)
    try:
        _, functions = placement_json(cuda_flux, handle.name)
        _, every = placement_json_with(cuda_flux, handle.name, ["--counters", "every-block"])
    finally:
        os.unlink(handle.name)
    size = {}
    for function in list(functions.values()) + list(every.values()):
        for block in function["blocks"]:
            size.setdefault(block["counting"], block["update_instructions"])
    return (size.get("full-update", 0), size.get("packed-update", 0), size.get("warp-update", 0))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("work", help="the work directory of a `suites.py cost` run")
    parser.add_argument("--placement", default="derived",
                        help="the placement's subdirectory of WORK (default derived)")
    parser.add_argument("--measured", default=DEFAULT_MEASURED,
                        help="cost.py's JSON of the same run")
    parser.add_argument("--cuda-flux", default=os.path.join(ROOT, "target", "debug", "cuda-flux"),
                        help="the cuda-flux command (default target/debug/cuda-flux)")
    parser.add_argument("--top", type=int, default=5, help="kernels listed per reason")
    parser.add_argument("--update-costs", metavar="FULL,PACKED,WARP",
                        help="instructions of the full, packed and warp-only updates in the "
                        "measured run's code (default: those of the cuda-flux run here)")
    parser.add_argument("--arch", help="place every PTX for this architecture instead of its "
                        ".target (a what-if on the same warp counts)")
    parser.add_argument("--what-if-arch", help="also rank the reasons with every PTX placed for "
                        "this architecture, in a section of its own")
    parser.add_argument("--out", help="write the Markdown here instead of printing it")
    args = parser.parse_args(argv)
    import cost  # the machine line, as every results file has it
    info = cost.machine()
    machine_line = (f"{info['os']}, {info['cpu']} ({info['cores']} cores), commit "
                    f"`{info['commit']}`")
    measured = measured_kernels(args.measured)
    update_costs = None
    sizes = current_sizes(args.cuda_flux)
    if args.update_costs:
        try:
            sizes = tuple(int(x) for x in args.update_costs.split(","))
        except ValueError:
            sizes = ()
        if len(sizes) != 3 or min(sizes) < 0:
            parser.error(f"--update-costs {args.update_costs}: three counts, as 7,6,4")
        update_costs = dict(zip(("full-update", "packed-update", "warp-update"), sizes))
    rows, problems = analyse(args.work, args.placement, args.cuda_flux, measured, args.arch,
                             update_costs)
    command = "benchmarks/placement_reasons.py " + " ".join(argv if argv is not None
                                                             else sys.argv[1:])
    what_if = None
    if args.what_if_arch:
        other, more = analyse(args.work, args.placement, args.cuda_flux, measured,
                              args.what_if_arch, update_costs)
        what_if = (args.what_if_arch, other)
        problems += more
    text = render(rows, problems, args.top, command, machine_line, what_if, sizes)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
