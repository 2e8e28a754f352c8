#!/usr/bin/env python3
"""Tests the arithmetic of cost.py on made-up numbers (not a measurement).

    python3 benchmarks/tests/test_cost.py

Occupancy on sm_90 (65536 registers per SM allocated per warp in units of 256, 64 warps, 32 CTAs,
228 KiB shared with 1 KiB reserved per CTA, 128-byte shared units), by hand:
  256 threads (8 warps), 48 regs: 48 x 32 = 1536 per warp, 65536 / 1536 = 42 warps, 42 / 8 = 5 CTAs
                                  (40 warps, 62.5 %), registers
  256 threads, 54 regs: 1728 -> 1792 per warp, 36 warps, 4 CTAs (50 %)
  128 threads (4 warps), 32 regs: 1024 per warp, 64 warps, 16 CTAs = the warp limit 64 / 4 (100 %)
  64 threads, no registers: 32 CTAs (warps and CTA limit alike), 100 %
  96 threads (3 warps), 14 regs: 448 -> 512, 128 warps, 42 CTAs; warps 64 / 3 = 21: 63 warps
  256 threads, 16 regs, 48 KiB shared: 233472 / (49152 + 1024) = 4 CTAs (50 %), shared
  32 threads, 1 byte shared: 233472 / (128 + 1024) = 202; CTA limit 32: 32 warps (50 %)
  1024 threads (32 warps), 64 regs: 2048 per warp, 32 warps, 1 CTA (50 %)
  1024 threads, 65 regs: 2080 -> 2304, 28 warps < 32: 0 CTAs
  256 regs, or 227 KiB + 1 byte of shared: cannot launch

Summary fixture (PROGRAMS below): kernels k1 (alpha), k2 (alpha), k3 (beta), k4 (gamma); delta
failed and is left out.
  expansion      3000/1000 = 3, 6000/4000 = 1.5, 2000/500 = 4, 2000/2000 = 1
                 geomean 18^(1/4) = 2.05977, median 2.25, worst 4 (k3), aggregate 13000/7500
  threads        2.5, 1.5, 4, 1: geomean 15^(1/4) = 1.96799, worst 4
  atomics/1k     (410-10) x 1000/1000 = 400, 300 x 1000/4000 = 75, 250 x 1000/500 = 500, 0
                 nonzero geomean (400 x 75 x 500)^(1/3) = 246.6212, worst 500, one zero,
                 aggregate 950 x 1000 / 7500 = 126.667
  kernel time    alpha 100/50 = 2, beta 20/5 = 4, gamma 33/30 = 1.1: geomean 8.8^(1/3) = 2.06456,
                 worst 4; kernel-heavy (>= 20 ms and >= half the wall time): alpha only (beta
                 5 ms, gamma 30 ms of 1 s)
  occupancy      k1 48 -> 54 registers at 256 threads: 5 -> 4 CTAs, a drop; only k1 has ptxas data
"""
import math
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, os.path.dirname(HERE))
import cost  # noqa: E402

PTXAS = """\
ptxas warning : Stack size for entry function 'k1__cf' cannot be statically determined
ptxas info    : 36 bytes gmem
ptxas info    : Compiling entry function 'k1__cf' for 'sm_90'
ptxas info    : Function properties for k1__cf
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 54 registers, 8192 bytes smem, 384 bytes cmem[0]
ptxas info    : Function properties for helper__cf0
    56 bytes stack frame, 52 bytes spill stores, 52 bytes spill loads
ptxas info    : Compiling entry function 'k1' for 'sm_90'
ptxas info    : Function properties for k1
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 48 registers, 8192 bytes smem, 384 bytes cmem[0]
ptxas info    : Compiling entry function 'k2' for 'sm_90'
ptxas info    : Function properties for k2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, 368 bytes cmem[0]
"""


def stats(warp, thread, atomics, ns, launches=1):
    return {"warp_instructions": warp, "thread_instructions": thread, "global_atomics": atomics,
            "kernel_ns": ns, "launches": launches}


def programs():
    resources = {"k1": {"registers": 48, "shared_bytes": 0, "stack_bytes": 0, "spill_store_bytes": 0},
                 "k1__cf": {"registers": 54, "shared_bytes": 0, "stack_bytes": 8,
                            "spill_store_bytes": 4}}
    k1 = cost.kernel_row("k1", stats(1000, 20000, 10, 1), stats(3000, 50000, 410, 1), resources,
                         [(256, 0)])
    k2 = cost.kernel_row("k2", stats(4000, 100000, 0, 1), stats(6000, 150000, 300, 1))
    k3 = cost.kernel_row("k3", stats(500, 1000, 0, 1), stats(2000, 4000, 250, 1))
    k4 = cost.kernel_row("k4", stats(2000, 9000, 0, 1), stats(2000, 9000, 0, 1))
    for program, rows in [("alpha", [k1, k2]), ("beta", [k3]), ("gamma", [k4])]:
        for r in rows:
            r["program"] = program
    return [
        {"name": "alpha", "passed": True, "kernels": [k1, k2], "original_kernel_ns": 50_000_000,
         "clone_kernel_ns": 100_000_000, "original_wall_s": 0.08, "notes": []},
        {"name": "beta", "passed": True, "kernels": [k3], "original_kernel_ns": 5_000_000,
         "clone_kernel_ns": 20_000_000, "original_wall_s": 0.01, "notes": []},
        {"name": "gamma", "passed": True, "kernels": [k4], "original_kernel_ns": 30_000_000,
         "clone_kernel_ns": 33_000_000, "original_wall_s": 1.0, "notes": []},
        {"name": "delta", "passed": False, "notes": ["original run 0: exit status 1"]},
    ]


class OccupancyTest(unittest.TestCase):
    def check(self, threads, regs, shared, ctas, warps, limiter=None):
        o = cost.occupancy(threads, regs, shared)
        self.assertEqual((o["ctas"], o["warps"]), (ctas, warps), (threads, regs, shared, o))
        self.assertAlmostEqual(o["occupancy"], warps / 64)
        if limiter:
            self.assertEqual(o["limiter"], limiter, (threads, regs, shared, o))

    def test_hand_computed(self):
        self.check(256, 48, 0, 5, 40, "registers")
        self.check(256, 54, 0, 4, 32, "registers")
        self.check(128, 32, 0, 16, 64)
        self.check(64, 0, 0, 32, 64, "warps")
        self.check(96, 14, 0, 21, 63, "warps")
        self.check(256, 16, 48 * 1024, 4, 32, "shared")
        self.check(32, 0, 1, 32, 32, "ctas")
        self.check(1024, 64, 0, 1, 32, "registers")
        self.check(1024, 65, 0, 0, 0, "registers")
        self.check(256, 256, 0, 0, 0, "cannot launch")
        self.check(256, 16, 227 * 1024 + 1, 0, 0, "cannot launch")


class HelpersTest(unittest.TestCase):
    def test_geomean_ratio_median(self):
        self.assertAlmostEqual(cost.geomean([1, 4, 16]), 4.0)
        self.assertIsNone(cost.geomean([]))
        self.assertIsNone(cost.geomean([2.0, 0.0]))
        self.assertEqual(cost.ratio(3, 2), 1.5)
        self.assertIsNone(cost.ratio(3, 0))
        self.assertEqual(cost.median([5, 1, 3]), 3)
        self.assertIsNone(cost.median([]))

    def test_parse_ptxas(self):
        self.assertEqual(cost.parse_ptxas(PTXAS), {
            "k1__cf": {"registers": 54, "shared_bytes": 8192, "stack_bytes": 8, "spill_store_bytes": 4},
            "k1": {"registers": 48, "shared_bytes": 8192, "stack_bytes": 0, "spill_store_bytes": 0},
            "k2": {"registers": 10, "shared_bytes": 0, "stack_bytes": 0, "spill_store_bytes": 0},
        })


class KernelRowTest(unittest.TestCase):
    def test_per_kernel_figures(self):
        k1 = programs()[0]["kernels"][0]
        self.assertEqual(k1["counter_warp_instructions"], 2000)
        self.assertAlmostEqual(k1["expansion"], 3.0)
        self.assertAlmostEqual(k1["thread_expansion"], 2.5)
        self.assertEqual(k1["counter_global_atomics"], 400)
        self.assertAlmostEqual(k1["counter_atomics_per_1k"], 400.0)
        self.assertEqual((k1["original_registers"], k1["clone_registers"]), (48, 54))
        self.assertEqual(k1["clone_spill_store_bytes"], 4)
        self.assertEqual(len(k1["occupancy"]), 1)
        self.assertEqual(k1["occupancy"][0]["original"]["ctas"], 5)
        self.assertEqual(k1["occupancy"][0]["clone"]["ctas"], 4)
        self.assertTrue(k1["occupancy_drops"])
        k2 = programs()[0]["kernels"][1]
        self.assertEqual(k2["occupancy"], [])
        self.assertFalse(k2["occupancy_drops"])
        self.assertIsNone(k2["clone_registers"])


class SummaryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.programs = programs()
        cls.s = cost.summarize(cls.programs, heavy_ms=20.0, heavy_share=0.5)

    def test_counts(self):
        self.assertEqual(self.s["programs"], 4)
        self.assertEqual(self.s["programs_passed"], 3)
        self.assertEqual(self.s["kernels"], 4)
        self.assertEqual(self.s["original_warp_instructions"], 7500)
        self.assertEqual(self.s["counter_warp_instructions"], 5500)
        self.assertEqual(self.s["counter_global_atomics"], 950)

    def test_expansion(self):
        e = self.s["expansion"]
        self.assertAlmostEqual(e["geomean"], 18 ** 0.25)
        self.assertAlmostEqual(e["median"], 2.25)
        self.assertAlmostEqual(e["worst"], 4.0)
        self.assertEqual(e["worst_kernel"]["kernel"], "k3")
        self.assertEqual(e["worst_kernel"]["program"], "beta")
        self.assertAlmostEqual(e["aggregate"], 13000 / 7500)
        t = self.s["thread_expansion"]
        self.assertAlmostEqual(t["geomean"], 15 ** 0.25)
        self.assertAlmostEqual(t["worst"], 4.0)

    def test_atomics(self):
        a = self.s["counter_atomics_per_1k"]
        self.assertAlmostEqual(a["geomean"], (400 * 75 * 500) ** (1 / 3))
        self.assertAlmostEqual(a["worst"], 500.0)
        self.assertEqual(a["zero"], 1)
        self.assertEqual(a["count"], 3)
        self.assertAlmostEqual(a["aggregate"], 950 * 1000 / 7500)

    def test_kernel_time(self):
        k = self.s["kernel_time"]
        self.assertEqual(k["count"], 3)
        self.assertAlmostEqual(k["geomean"], 8.8 ** (1 / 3))
        self.assertAlmostEqual(k["worst"], 4.0)
        self.assertEqual(k["worst_program"], "beta")
        h = self.s["kernel_time_heavy"]
        self.assertEqual(h["programs"], ["alpha"])
        self.assertEqual(h["worst_program"], "alpha")
        self.assertAlmostEqual(h["geomean"], 2.0)
        self.assertTrue(math.isclose(self.programs[2]["kernel_time_ratio"], 1.1))

    def test_kernel_time_by_kind(self):
        # Named programs count whatever their kernel time (beta is not kernel-heavy by time);
        # a failed one (delta) and unnamed ones (alpha) do not.
        kinds = {"beta": "stencil", "gamma": "tiled matmul", "delta": "stencil"}
        s = cost.summarize(programs(), heavy_ms=20.0, heavy_share=0.5, kinds=kinds)
        k = s["kernel_time_kinds"]
        self.assertEqual(k["programs"], {"beta": "stencil", "gamma": "tiled matmul"})
        self.assertAlmostEqual(k["geomean"], 4.4 ** 0.5)
        self.assertEqual(k["worst_program"], "beta")

    def test_occupancy(self):
        self.assertEqual(self.s["occupancy_checked"], 1)
        self.assertEqual(self.s["occupancy_drops"], [{"program": "alpha", "kernel": "k1"}])

    def test_report_renders(self):
        doc = {"title": "test", "date": "2026-01-01", "command": "cost.sh", "runs": 1,
               "elapsed_s": 1.0, "load_average": {"start": 0.5, "end": None},
               "machine": {"commit": "abc", "os": "os", "cpu": "cpu", "cores": 2, "gpu": "none",
                           "clang": "clang", "ptxas": "ptxas"},
               "summary": self.s, "programs": self.programs}
        text = cost.render_markdown(doc)
        self.assertIn("**2.060x**", text)
        # No program of the named kinds among the made-up ones.
        self.assertIn("by program whatever their time here: geomean / worst | none measured |",
                      text)
        self.assertIn("`k1` (alpha)", text)
        self.assertIn("| delta | | | | | | not measured: original run 0: exit status 1 |", text)


if __name__ == "__main__":
    unittest.main()
