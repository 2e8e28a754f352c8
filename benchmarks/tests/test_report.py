#!/usr/bin/env python3
"""Tests report.py on the synthetic fixtures/runs.json (made-up numbers, not a measurement).

    python3 benchmarks/tests/test_report.py

Expected values, computed by hand from the fixture (medians over passing runs, 3 runs each):
  alpha  clang wall 1.0 1.2 1.1 -> 1.1, kernel 100 110 90 -> 100
         instr wall 2.2 2.0 2.4 -> 2.2, kernel 300 250 320 -> 300   ratios 2.0, 3.0
  beta   clang wall 2.0 x3 -> 2.0, kernel 50 x3 -> 50
         instr wall 2.5 2.5 9.0 -> 2.5, kernel 60 75 80 -> 75        ratios 1.25, 1.5
  gamma  clang 0.5 x3, kernel 10 x3; instr run #2 FAILED (wall 5.0, kernel 999, left out):
         instr wall 0.4 0.6 -> 0.5, kernel 8 12 -> 10                ratios 1.0, 1.0
  delta  clang 1.0 x3, kernel 20 x3; instr 3.5 x3, kernel 40 x3      ratios 3.5, 2.0
  wall ratios 2, 1.25, 1, 3.5:  geomean 8.75^(1/4) = 1.71990, median 1.625, worst 3.5
  kernel ratios 3, 1.5, 1, 2:   geomean 9^(1/4) = 1.73205,    median 1.75,  worst 3.0
  targets: wall geomean 1.72 <= 1.5 no; wall worst 3.5 <= 4 yes; kernel median 1.75 <= 2 yes
"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import report  # noqa: E402

FIXTURE = os.path.join(HERE, "fixtures", "runs.json")


class ReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(FIXTURE) as f:
            cls.doc = json.load(f)
        cls.summary = report.summarize(cls.doc)
        cls.rows = {r["name"]: r for r in cls.summary["programs"]}

    def test_helpers(self):
        self.assertEqual(report.median([3, 1, 2]), 2)
        self.assertEqual(report.median([4, 1, 3, 2]), 2.5)
        self.assertIsNone(report.median([]))
        self.assertAlmostEqual(report.geomean([1, 4, 16]), 4.0)
        self.assertIsNone(report.geomean([]))
        self.assertIsNone(report.geomean([1.0, 0.0]))

    def test_medians_per_variant(self):
        a = self.rows["alpha"]["variants"]
        self.assertAlmostEqual(a["clang"]["wall_s"], 1.1)
        self.assertAlmostEqual(a["clang"]["kernel_ms"], 100)
        self.assertAlmostEqual(a["nvcc"]["wall_s"], 1.3)
        self.assertAlmostEqual(a["nvcc"]["kernel_ms"], 120)
        self.assertAlmostEqual(a["instrumented"]["wall_s"], 2.2)
        self.assertAlmostEqual(a["instrumented"]["kernel_ms"], 300)

    def test_ratios(self):
        expected = {"alpha": (2.0, 3.0), "beta": (1.25, 1.5), "gamma": (1.0, 1.0), "delta": (3.5, 2.0)}
        for name, (wall, kernel) in expected.items():
            self.assertAlmostEqual(self.rows[name]["wall_ratio"], wall, msg=name)
            self.assertAlmostEqual(self.rows[name]["kernel_ratio"], kernel, msg=name)

    def test_failed_run_left_out_and_reported(self):
        g = self.rows["gamma"]
        self.assertFalse(g["all_passed"])
        self.assertEqual(g["variants"]["instrumented"]["passed"], 2)
        self.assertEqual(len(g["failures"]), 1)
        self.assertIn("instrumented #2", g["failures"][0])
        self.assertIn("result: FAIL 3 mismatches", g["failures"][0])
        self.assertTrue(self.rows["alpha"]["all_passed"])
        self.assertFalse(self.summary["all_passed"])

    def test_aggregates(self):
        wall, kernel = self.summary["aggregate"]["wall"], self.summary["aggregate"]["kernel"]
        self.assertEqual(wall["count"], 4)
        self.assertAlmostEqual(wall["geomean"], 8.75 ** 0.25)
        self.assertAlmostEqual(wall["geomean"], 1.71990, places=5)
        self.assertAlmostEqual(wall["median"], 1.625)
        self.assertAlmostEqual(wall["worst"], 3.5)
        self.assertAlmostEqual(kernel["geomean"], 9 ** 0.25)
        self.assertAlmostEqual(kernel["median"], 1.75)
        self.assertAlmostEqual(kernel["worst"], 3.0)

    def test_targets(self):
        met = {(t["ratio"], t["statistic"]): t["met"] for t in self.summary["targets"]}
        self.assertEqual(met, {("wall", "geomean"): False, ("wall", "worst"): True,
                               ("kernel", "median"): True})

    def test_output_files(self):
        self.assertEqual(report.output_name(self.doc), "2000-01-01-synthetic-gpu-9000")
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(report.main([FIXTURE, "--out-dir", out]), 0)
            md = open(os.path.join(out, "2000-01-01-synthetic-gpu-9000.md")).read()
            raw = json.load(open(os.path.join(out, "2000-01-01-synthetic-gpu-9000.json")))
        self.assertIn("| alpha | 1.100 | 1.300 | 2.200 | 100.0 | 120.0 | 300.0 | 2.00x | 3.00x | PASS |", md)
        self.assertIn("| whole program (wall) | 4 | 1.72x | 1.62x | 3.50x |", md)
        self.assertIn("| kernels (kernel_ms) | 4 | 1.73x | 1.75x | 3.00x |", md)
        self.assertIn("| whole program geomean <= 1.5x | 1.72x | **no** |", md)
        self.assertIn("| kernels median <= 2.0x | 1.75x | yes |", md)
        self.assertIn("FAIL: instrumented #2: result: FAIL 3 mismatches (synthetic)", md)
        self.assertEqual(raw["runs"]["commit"], self.doc["commit"])
        self.assertAlmostEqual(raw["summary"]["aggregate"]["wall"]["worst"], 3.5)

    def test_merge_of_split_runs(self):
        first = dict(self.doc, programs=self.doc["programs"][:2])
        second = dict(self.doc, programs=self.doc["programs"][2:], finished="2000-01-01T00:02:00+00:00")
        with tempfile.TemporaryDirectory() as out:
            paths = []
            for i, part in enumerate((first, second)):
                paths.append(os.path.join(out, f"runs{i}.json"))
                with open(paths[-1], "w") as f:
                    json.dump(part, f)
            self.assertEqual(report.main(paths + ["--out-dir", out, "--name", "merged"]), 0)
            raw = json.load(open(os.path.join(out, "merged.json")))
        self.assertEqual([p["name"] for p in raw["runs"]["programs"]], ["alpha", "beta", "gamma", "delta"])
        self.assertEqual(raw["runs"]["finished"], "2000-01-01T00:02:00+00:00")
        self.assertAlmostEqual(raw["summary"]["aggregate"]["wall"]["geomean"], 8.75 ** 0.25)

    def test_occupancy_of_clones_from_ncu(self):
        header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
                  '"Block Size","Grid Size","Device","CC","Section Name","Metric Name",'
                  '"Metric Unit","Metric Value"')

        def csv_text(rows):
            lines = ["==PROF== Connected to process 42 (/bench/alpha)", header]
            for launch, (kernel, metrics) in enumerate(rows):
                for metric, value in metrics.items():
                    lines.append(f'"{launch}","42","alpha","127.0.0.1","{kernel}","1","7",'
                                 f'"(256, 1, 1)","(4, 1, 1)","0","9.0","Command line profiler '
                                 f'metrics","{metric}","","{value}"')
            return "\n".join(lines) + "\n"

        def figures(registers, theoretical, achieved):
            return {"launch__registers_per_thread": registers,
                    "sm__maximum_warps_per_active_cycle_pct": theoretical,
                    "sm__warps_active.avg.pct_of_peak_sustained_active": achieved,
                    "smsp__inst_executed.sum": "1,024"}

        plain = [("_Z1kPf", figures(32, 100, 90)), ("_Z1gPf", figures(40, 75, 70)),
                 ("_Z1kPf", figures(32, 100, 80)), ("_Z1hPf", figures(16, 100, 50))]
        counted = [("_Z1kPf__cf", figures(32, 100, 85)), ("_Z1gPf__cf", figures(48, 62.5, 60)),
                   ("_Z1kPf__cf", figures(32, 100, 75))]
        doc = json.loads(json.dumps(self.doc))
        alpha = next(p for p in doc["programs"] if p["name"] == "alpha")
        alpha["ncu"] = {"csv": "ncu/alpha.csv"}
        alpha["ncu_instrumented"] = {"csv": "ncu/alpha.instrumented.csv"}
        with tempfile.TemporaryDirectory() as out:
            os.makedirs(os.path.join(out, "ncu"))
            with open(os.path.join(out, "ncu", "alpha.csv"), "w") as f:
                f.write(csv_text(plain))
            with open(os.path.join(out, "ncu", "alpha.instrumented.csv"), "w") as f:
                f.write(csv_text(counted))
            runs = os.path.join(out, "runs.json")
            with open(runs, "w") as f:
                json.dump(doc, f)
            self.assertEqual(report.main([runs, "--out-dir", out, "--name", "occ"]), 0)
            md = open(os.path.join(out, "occ.md")).read()
            raw = json.load(open(os.path.join(out, "occ.json")))
        occupancy = raw["summary"]["occupancy"]
        # _Z1hPf has no clone in the instrumented run: not compared.
        self.assertEqual([r["kernel"] for r in occupancy["kernels"]], ["_Z1gPf", "_Z1kPf"])
        k = occupancy["kernels"][1]
        self.assertEqual(k["registers"], [32, 32])
        self.assertEqual(k["theoretical_pct"], [100, 100])
        self.assertEqual(k["achieved_pct"], [85, 80])
        self.assertFalse(k["drops"])
        self.assertEqual(occupancy["checked"], 2)
        self.assertEqual(occupancy["drops"], ["alpha: _Z1gPf"])
        self.assertIn("| alpha | `_Z1gPf` | 40 -> 48 | 75.0 -> 62.5 | 70.0 -> 60.0 | **yes** |", md)
        self.assertIn("Theoretical occupancy drops for 1 of 2 kernels checked.", md)
        # Without ncu data, no occupancy section.
        self.assertNotIn("Occupancy (ncu", report.render_markdown(self.doc, self.summary))


if __name__ == "__main__":
    unittest.main()
