#!/usr/bin/env python3
"""Tests benchmarks/gpu/compare_cpu.py on hand-made profiles: equal sums in another launch
order pass; one differing block, a kernel counted on one side only, or a different block count
fail; the nondeterministic program is skipped."""
import copy
import importlib.util
import pathlib

spec = importlib.util.spec_from_file_location(
    "compare_cpu", pathlib.Path(__file__).resolve().parent.parent / "gpu" / "compare_cpu.py")
compare_cpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_cpu)


def launch(threads, instrumented=True):
    return {"instrumented": instrumented,
            "block_counts": {"threads": threads, "warps": [1] * len(threads)}}


gpu = {"kernels": [{"name": "k", "launches": [launch([64, 10, 54]), launch([32, 0, 32])]},
                   {"name": "idle", "launches": []}]}
# Same sums, launches in the other order, and an uncounted launch that must be ignored.
cpu = {"kernels": [{"name": "k", "launches": [launch([32, 0, 32]), launch([64, 10, 54]),
                                              launch([999, 999, 999], instrumented=False)]}]}
row = compare_cpu.compare("p", gpu, cpu)
assert row["ok"] and row["blocks"] == 3, row

worse = copy.deepcopy(cpu)
worse["kernels"][0]["launches"][0]["block_counts"]["threads"][1] = 1
row = compare_cpu.compare("p", gpu, worse)
assert not row["ok"] and "first block 1: GPU 10 threads, CPU 11" in row["problems"][0], row

extra = copy.deepcopy(cpu)
extra["kernels"].append({"name": "other", "launches": [launch([1])]})
row = compare_cpu.compare("p", gpu, extra)
assert not row["ok"] and row["problems"] == ["other: counted only on the CPU"], row

shorter = copy.deepcopy(cpu)
for l in shorter["kernels"][0]["launches"]:
    l["block_counts"]["threads"].pop()
row = compare_cpu.compare("p", gpu, shorter)
assert not row["ok"] and "3 blocks on the GPU, 2 on the CPU" in row["problems"][0], row

row = compare_cpu.compare("atomic_cas", gpu, worse)
assert row["ok"] and "skipped" in row, row
print("test_compare_cpu: ok")
