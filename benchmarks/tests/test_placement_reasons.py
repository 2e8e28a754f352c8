#!/usr/bin/env python3
"""Tests benchmarks/placement_reasons.py on a made-up work directory (not a measurement).

    python3 benchmarks/tests/test_placement_reasons.py      (after cargo build -p analysis)

One app with one kept sm_20 PTX unit: kernel `k`, a loop whose trip count is the lane's
(`%laneid`, which the launch does not give: not counted from it; $L1, block 1, which sm_20 cannot count in registers: no shfl.sync), the entry block (counted
from the launch) and the block after the loop (a copy of the entry). Its profile says the warps
ran blocks 0, 1, 2 once, 10 and once; the measured counter code is 80 warp instructions and 20
atomics. By hand, with --update-costs 7,6,4 (the code before ef69cd8): block 1's full update
costs 10 x 7 = 70 instructions and 10 x 2 = 20 atomics, all for `shrinking-needs-sm30`; 10
instructions are left unexplained (the prologue). With the cuda-flux built here, 10 x its full
update's size (6 since ef69cd8). Placed for sm_70 the loop is a region and nothing is left at
block tops.
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import placement_reasons  # noqa: E402

PTX = """.version 7.8
.target sm_20
.address_size 64

.visible .entry k(.param .u32 k_n)
{
\t.reg .pred %p<4>;
\t.reg .b32 %r<8>;
\tmov.u32 %r1, %laneid;
\tmov.u32 %r2, 0;
$L1:
\tadd.s32 %r2, %r2, 1;
\tsetp.lt.u32 %p1, %r2, %r1;
\t@%p1 bra $L1;
$L2:
\tret;
}
"""

BLOCKS = [
    {"function": "k", "label": None, "instructions": ["mov.u32", "mov.u32"]},
    {"function": "k", "label": "$L1", "instructions": ["add.s32", "setp.lt.u32", "bra"]},
    {"function": "k", "label": "$L2", "instructions": ["ret"]},
]

FAILURES = []


def expect(condition, what):
    if not condition:
        FAILURES.append(what)
        print(f"FAIL: {what}")


def main():
    cuda_flux = os.path.join(ROOT, "target", "debug", "cuda-flux")
    if not os.path.exists(cuda_flux):
        print(f"skipped: {cuda_flux} not built (cargo build -p analysis)")
        return 0
    with tempfile.TemporaryDirectory() as work:
        app = os.path.join(work, "derived", "apps", "suite", "app")
        os.makedirs(os.path.join(app, "keep"))
        os.makedirs(os.path.join(app, "cost"))
        with open(os.path.join(app, "keep", "0-k.sm_20.ptx"), "w") as f:
            f.write(PTX)
        # The instrumented PTX is not an input.
        with open(os.path.join(app, "keep", "0-k.sm_20.instrumented.ptx"), "w") as f:
            f.write("not read")
        launch = {"instrumented": True, "mode": "all",
                  "block_counts": {"threads": [32, 300, 32], "warps": [1, 10, 1]}}
        profile = {"schema": "cuda-flux/1", "kernels": [
            {"name": "k", "source": "/src/k.cu", "arch": 20, "blocks": BLOCKS,
             "launches": [launch]}]}
        with open(os.path.join(app, "cost", "profile.json"), "w") as f:
            json.dump(profile, f)
        measured = {("suite/app", "k"): {
            "counter_warp_instructions": 80, "counter_global_atomics": 20,
            "original_warp_instructions": 1000, "counter_atomics_per_1k": 20.0}}

        old_code = {"full-update": 7, "packed-update": 6, "warp-update": 4}
        rows, problems = placement_reasons.analyse(work, "derived", cuda_flux, measured,
                                                   update_costs=old_code)
        expect(problems == [], f"no problems: {problems}")
        expect(len(rows) == 1 and rows[0]["arch"] == "sm_20", f"one sm_20 kernel: {rows}")
        categories = rows[0]["categories"]
        expect(set(categories) == {"shrinking-needs-sm30"}, f"one reason: {categories}")
        entry = categories.get("shrinking-needs-sm30", {})
        expect(entry.get("instructions") == 70 and entry.get("atomics") == 20,
               f"10 warps x (7, 2): {entry}")
        text = placement_reasons.render(rows, problems, 5, "test", "machine", sizes=(7, 6, 4))
        expect("(full 7, packed 6, warp-only 4)" in text, "the sizes used are named")
        expect("| left unexplained: flushes, counted edges, induction snapshots and recoveries, "
               "prologues | 10 (12.5%) | 0 (0.0%) |" in text, "10 instructions unexplained")
        expect("| shrinking-needs-sm30 | 1 | 1 | 70 | 87.5% | 20 | 100.0% | 20.0 |" in text,
               "the ranking's row")

        full, packed, warp = placement_reasons.current_sizes(cuda_flux)
        expect(full > packed > warp > 0, f"update sizes of this cuda-flux: {full, packed, warp}")
        rows, _ = placement_reasons.analyse(work, "derived", cuda_flux, measured)
        got = rows[0]["categories"].get("shrinking-needs-sm30", {}).get("instructions")
        expect(got == 10 * full, f"10 x {full}: {got}")

        rows, problems = placement_reasons.analyse(work, "derived", cuda_flux, measured,
                                                   "sm_70")
        expect(rows and rows[0]["categories"] == {}, f"a region at sm_70: {rows}")

        # A profile whose blocks are not the PTX's is reported, not estimated.
        BLOCKS[1]["label"] = "$OTHER"
        with open(os.path.join(app, "cost", "profile.json"), "w") as f:
            json.dump(profile, f)
        rows, problems = placement_reasons.analyse(work, "derived", cuda_flux, measured)
        expect(len(problems) == 1 and "do not match" in problems[0], f"{problems}")
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    print("test_placement_reasons: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
