#!/usr/bin/env python3
"""Compares one program's GPU profile with its CPU-target profile, block by block.

The CPU target runs the same instrumented PTX in cuda-flux's interpreter, so for deterministic
kernels every block's thread count must be identical: per kernel, the per-block thread counts
summed over its launches (sums, because host threads may launch in another order). Warp counts
are not compared: how a GPU regroups diverged threads is the hardware's choice.
Usage: compare_cpu.py NAME GPU_PROFILE CPU_PROFILE  -> one JSON line; exit 1 on a difference.
"""
import json
import sys

# Programs whose block counts legitimately depend on scheduling, and why.
NONDETERMINISTIC = {
    "atomic_cas": "contended CAS retry loops: how often a CAS fails depends on timing",
}


def block_threads(profile):
    """{kernel name: [threads per block, summed over launches]} for counted launches."""
    kernels = {}
    for kernel in profile.get("kernels", []):
        sums = None
        for launch in kernel.get("launches", []):
            counts = launch.get("block_counts")
            if not launch.get("instrumented") or counts is None:
                continue
            threads = counts["threads"]
            sums = list(threads) if sums is None else [a + b for a, b in zip(sums, threads)]
        if sums is not None:
            kernels[kernel["name"]] = sums
    return kernels


def compare(name, gpu, cpu):
    row = {"program": name}
    if name in NONDETERMINISTIC:
        row.update(ok=True, skipped=NONDETERMINISTIC[name])
        return row
    g, c = block_threads(gpu), block_threads(cpu)
    problems = []
    for kernel in sorted(set(g) | set(c)):
        if kernel not in g or kernel not in c:
            problems.append(f"{kernel}: counted only on the {'GPU' if kernel in g else 'CPU'}")
            continue
        if len(g[kernel]) != len(c[kernel]):
            problems.append(f"{kernel}: {len(g[kernel])} blocks on the GPU, {len(c[kernel])} on the CPU")
            continue
        differing = [i for i, (a, b) in enumerate(zip(g[kernel], c[kernel])) if a != b]
        if differing:
            first = differing[0]
            problems.append(f"{kernel}: {len(differing)} block(s) differ, first block {first}: "
                            f"GPU {g[kernel][first]} threads, CPU {c[kernel][first]}")
    row.update(kernels=len(set(g) | set(c)), blocks=sum(len(v) for v in g.values()),
               problems=problems, ok=not problems)
    return row


def main():
    name, gpu_path, cpu_path = sys.argv[1:4]
    try:
        gpu, cpu = json.load(open(gpu_path)), json.load(open(cpu_path))
    except (OSError, ValueError) as error:
        row = {"program": name, "ok": False, "problems": [f"no valid profile: {error}"]}
    else:
        row = compare(name, gpu, cpu)
    print(json.dumps(row))
    return 0 if row["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
