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
import json
import math
import os
import sys
import tempfile
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
                         [(256, 0)], {"warp_instructions": 1000, "thread_instructions": 20000})
    k2 = cost.kernel_row("k2", stats(4000, 100000, 0, 1), stats(6000, 150000, 300, 1))
    k3 = cost.kernel_row("k3", stats(500, 1000, 0, 1), stats(2000, 4000, 250, 1), None, (),
                         {"warp_instructions": 500, "thread_instructions": 999})
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


class ProfileExactTest(unittest.TestCase):
    def test_profile_counts_sum_each_launch_of_kernels_counted_whole(self):
        def launch(counts, mode="all", instrumented=True):
            return {"mode": mode, "instrumented": instrumented, "instructions": {
                op: {"warps": w, "threads": t} for op, (w, t) in counts.items()}}
        profile = {"kernels": [
            {"name": "a", "launches": [launch({"add.s32": (3, 96), "ret": (1, 32)}),
                                       launch({"add.s32": (2, 40)})]},
            {"name": "cta", "launches": [launch({"ret": (1, 32)}, mode="cta")]},
            {"name": "skipped", "launches": [launch({}, instrumented=False)]},
        ]}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "profile.json")
            with open(path, "w") as f:
                json.dump(profile, f)
            self.assertEqual(cost.profile_counts(cost.load_profile(path)),
                             {"a": {"warp_instructions": 6, "thread_instructions": 168}})
            missing = cost.load_profile(os.path.join(d, "missing.json"))
            self.assertEqual(cost.profile_counts(missing), {})

    def test_rows_and_summary(self):
        rows = {k["kernel"]: k for p in programs() for k in p.get("kernels", [])}
        self.assertIs(rows["k1"]["profile_exact"], True)
        self.assertIs(rows["k3"]["profile_exact"], False, "one thread-instruction short")
        self.assertIsNone(rows["k2"]["profile_exact"])
        x = cost.summarize(programs())["profile_exact"]
        self.assertEqual((x["compared"], x["equal"]), (2, 1))
        self.assertEqual(x["differ"], [{"program": "beta", "kernel": "k3"}])


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


def every_block_programs():
    """The PROGRAMS measured again under a second placement (see PlacementTest)."""
    resources = {"k1": {"registers": 48, "shared_bytes": 0, "stack_bytes": 0, "spill_store_bytes": 0},
                 "k1__cf": {"registers": 48, "shared_bytes": 0, "stack_bytes": 0,
                            "spill_store_bytes": 0}}
    k1 = cost.kernel_row("k1", stats(1000, 20000, 10, 1), stats(4000, 60000, 1010, 1), resources,
                         [(256, 0)])
    k2 = cost.kernel_row("k2", stats(4000, 100000, 0, 1), stats(8000, 200000, 600, 1))
    k3 = cost.kernel_row("k3", stats(600, 1200, 0, 1), stats(2000, 4000, 250, 1))
    for program, rows in [("alpha", [k1, k2]), ("beta", [k3])]:
        for r in rows:
            r["program"] = program
    return [
        {"name": "alpha", "passed": True, "kernels": [k1, k2], "original_kernel_ns": 50_000_000,
         "clone_kernel_ns": 150_000_000, "original_wall_s": 0.08, "notes": []},
        {"name": "beta", "passed": True, "kernels": [k3], "original_kernel_ns": 5_000_000,
         "clone_kernel_ns": 25_000_000, "original_wall_s": 0.01, "notes": []},
        {"name": "gamma", "passed": False, "notes": ["build failed"]},
        {"name": "delta", "passed": False, "notes": ["original run 0: exit status 1"]},
    ]


class PlacementTest(unittest.TestCase):
    """compare_placements on PROGRAMS ("derived") and every_block_programs ("every-block").
    Only alpha's k1 and k2 are measured under both with the same original counts (beta's k3
    ran 500 original warp instructions, then 600: a mismatch; gamma failed the second time):
      derived      counter 2000 + 2000 = 4000, atomics 400 + 300 = 700 on 5000 original:
                   expansion 3 and 1.5 (geomean sqrt(4.5), worst 3, aggregate 9000/5000 = 1.8),
                   atomics/1k 400 and 75 (geomean sqrt(30000), aggregate 140); k1 drops
      every-block  counter 3000 + 4000 = 7000, atomics 1000 + 600 = 1600: expansion 4 and 2
                   (geomean sqrt(8), aggregate 12000/5000 = 2.4), atomics/1k 1000 and 150
                   (aggregate 320); 48 -> 48 registers: no drop
      kernel time  over alpha and beta (measured both times): derived 2 and 4 (geomean
                   sqrt(8)), every-block 3 and 5 (geomean sqrt(15), worst 5)"""

    @classmethod
    def setUpClass(cls):
        cls.c = cost.compare_placements({"derived": programs(), "every-block": every_block_programs()})

    def test_common_kernels(self):
        self.assertEqual(self.c["placements"], ["derived", "every-block"])
        self.assertEqual([(k["program"], k["kernel"]) for k in self.c["kernels"]],
                         [("alpha", "k1"), ("alpha", "k2")])
        self.assertEqual(self.c["mismatches"], [{"program": "beta", "kernel": "k3",
                                                 "original_warp_instructions":
                                                     {"derived": 500, "every-block": 600}}])
        self.assertEqual(self.c["programs"], 2)

    def test_figures(self):
        d, e = self.c["figures"]["derived"], self.c["figures"]["every-block"]
        self.assertEqual((d["kernels"], d["original_warp_instructions"],
                          d["counter_warp_instructions"], d["counter_global_atomics"]),
                         (2, 5000, 4000, 700))
        self.assertEqual((e["counter_warp_instructions"], e["counter_global_atomics"]),
                         (7000, 1600))
        self.assertAlmostEqual(d["expansion"]["geomean"], 4.5 ** 0.5)
        self.assertAlmostEqual(d["expansion"]["worst"], 3.0)
        self.assertAlmostEqual(d["expansion"]["aggregate"], 1.8)
        self.assertAlmostEqual(e["expansion"]["geomean"], 8 ** 0.5)
        self.assertAlmostEqual(e["expansion"]["aggregate"], 2.4)
        self.assertAlmostEqual(d["counter_atomics_per_1k"]["geomean"], 30000 ** 0.5)
        self.assertAlmostEqual(d["counter_atomics_per_1k"]["aggregate"], 140.0)
        self.assertAlmostEqual(e["counter_atomics_per_1k"]["aggregate"], 320.0)
        self.assertAlmostEqual(e["counter_atomics_per_1k"]["worst"], 1000.0)
        self.assertEqual((d["occupancy_drops"], d["occupancy_checked"]), (1, 1))
        self.assertEqual((e["occupancy_drops"], e["occupancy_checked"]), (0, 1))
        self.assertAlmostEqual(d["kernel_time"]["geomean"], 8 ** 0.5)
        self.assertAlmostEqual(e["kernel_time"]["geomean"], 15 ** 0.5)
        self.assertAlmostEqual(e["kernel_time"]["worst"], 5.0)

    def test_renders(self):
        text = "\n".join(cost.render_comparison(self.c))
        self.assertIn("Over the 2 kernels (in 2 programs)", text)
        self.assertIn("except in 1 kernels left out: `k3` (beta)", text)
        self.assertIn("| counter-code warp instructions | 4,000 | 7,000 |", text)
        self.assertIn("| alpha | `k1` | 1,000 | 2,000 / 3,000 | 3.00 / 4.00 | 400.0 / 1000.0 | "
                      "54 / 48 |", text)

    def test_ranking(self):
        # Counter warp instructions: k1 2000, k2 2000, k3 1500, k4 0 (left out); of 5500.
        ranking = cost.counter_code_ranking(programs(), top=2)
        self.assertEqual([(r["program"], r["kernel"]) for r in ranking],
                         [("alpha", "k1"), ("alpha", "k2")])
        self.assertAlmostEqual(ranking[0]["share"], 2000 / 5500)
        self.assertEqual(len(cost.counter_code_ranking(programs())), 3)
        self.assertIn("| alpha | `k1` | 2,000 | 36.4% | 3.00x | 400.0 |",
                      "\n".join(cost.render_ranking(ranking)))

    def test_document_written_whole(self):
        import tempfile
        records = programs()
        doc = cost.document(records, "t", "cmd", 1, 0.0, 1.0)
        self.assertEqual(doc["summary"]["programs_passed"], 3)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sub", "r.md")
            cost.write_document(doc, out, "\n## Appendix\n")
            self.assertEqual(sorted(os.listdir(os.path.dirname(out))), ["r.json", "r.md"])
            with open(out) as f:
                text = f.read()
            self.assertTrue(text.startswith("# Counter-code cost on the CPU target: t"))
            self.assertTrue(text.endswith("\n## Appendix\n"))
            import json
            with open(os.path.join(tmp, "sub", "r.json")) as f:
                self.assertEqual(json.load(f)["summary"]["kernels"], 4)


if __name__ == "__main__":
    unittest.main()
