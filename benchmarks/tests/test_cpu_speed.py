#!/usr/bin/env python3
"""Tests the arithmetic of cpu_speed.py on made-up runs (not a measurement).

    python3 benchmarks/tests/test_cpu_speed.py

By hand: scale S adds nothing but the 2S runs add 1,000,000 thread-instructions.
  old: kernel_ms medians 30 (S) and 50 (2S) -> 20 ms added -> 50 M/s;
       CPU medians 0.5 and 0.6 s -> 0.1 s -> 10 M/s
  new: kernel_ms 12 and 16 -> 4 ms -> 250 M/s; CPU 0.25 and 0.27 s -> 0.02 s -> 50 M/s
  geometric means of the ratios: events 5, cpu 5.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cpu_speed  # noqa: E402


def run(thread, kernel_ms, cpu_s, counts=None):
    return {"thread": thread, "warp": thread // 32, "kernel_ms": kernel_ms, "cpu_s": cpu_s,
            "kernel_ns": int(kernel_ms * 1e6),
            "counts": counts or {"k": (thread, thread // 32)}}


def samples(old_low_ms, old_high_ms):
    low, high = 1_000_000, 2_000_000
    return {
        "old": {"low": [run(low, 40, 0.9), run(low, old_low_ms, 0.5), run(low, 20, 0.4)],
                "high": [run(high, old_high_ms, 0.6), run(high, 60, 0.7), run(high, 45, 0.55)]},
        "new": {"low": [run(low, 12, 0.25)], "high": [run(high, 16, 0.27)]},
    }


def main():
    row = cpu_speed.summarize("p", samples(30, 50))
    assert row["added"] == 1_000_000, row
    assert abs(row["old_events"] - 50e6) < 1, row
    assert abs(row["old_cpu"] - 10e6) < 1, row
    assert abs(row["new_events"] - 250e6) < 1, row
    assert abs(row["new_cpu"] - 50e6) < 1, row
    text = cpu_speed.render({"date": "2026-11-24", "machine": {"cpu": "c", "cores": 2,
                             "os": "o", "commit": "x"}, "baseline": "b", "runs": 3, "scale": 8,
                             "load_start": 1.0, "load_end": 2.0, "elapsed_s": 3, "rows": [row]})
    assert "| p | 2,000,000 | 62,500 | 1,000,000 | 50 | 250 | 5.00 | 10 | 50 | 5.00 |" in text, text
    assert "**5.00**" in text, text
    # A count that differs between the sides is an error, not a row.
    bad = samples(30, 50)
    bad["new"]["high"][0]["counts"] = {"k": (2_000_001, 62_500)}
    try:
        cpu_speed.summarize("p", bad)
    except RuntimeError as e:
        assert "counts differ" in str(e), e
    else:
        raise AssertionError("differing counts accepted")
    # No added time (a program whose launches do not scale): no rate rather than a division.
    flat = samples(30, 50)
    for level in ("low", "high"):
        for r in flat["old"][level]:
            r["kernel_ms"] = 50
    flat = cpu_speed.summarize("p", flat)
    assert flat["old_events"] is None and flat["new_events"] is not None, flat
    # Under callgrind: one run per side and scale; old adds 20 M host instructions for the
    # 1 M thread-instructions (20 per thread-instruction), new 12 M (12): 1.67x fewer.
    counted = {"old": {"low": [dict(run(1_000_000, 30, 0.5), ir=100_000_000)],
                       "high": [dict(run(2_000_000, 50, 0.6), ir=120_000_000)]},
               "new": {"low": [dict(run(1_000_000, 12, 0.25), ir=80_000_000)],
                       "high": [dict(run(2_000_000, 16, 0.27), ir=92_000_000)]}}
    row = cpu_speed.summarize("p", counted)
    assert row["old_host_per_thread"] == 20 and row["new_host_per_thread"] == 12, row
    text = cpu_speed.render({"date": "2026-11-29", "machine": {"cpu": "c", "cores": 2,
                             "os": "o", "commit": "x"}, "baseline": "b", "runs": 1, "scale": 8,
                             "callgrind": True, "rows": [row]})
    assert "| p | 1,000,000 | 20.00 | 12.00 | 1.67 |" in text, text
    assert "**1.67**" in text, text
    assert "the original kernels" in text and "--instrumented" not in text, text
    # --instrumented: every run with CUDA_FLUX_KERNELS unset (kernels=None), and the tables
    # say so.
    seen = []

    def fake_run_once(binary, scale, work, engine=None, native_after=None, kernels="",
                      callgrind=False):
        seen.append(kernels)
        return dict(run(int(1_000_000 * scale), 10 * scale, scale), ir=int(20e6 * scale))
    real_run_once = cpu_speed.run_once
    cpu_speed.run_once = fake_run_once
    try:
        cpu_speed.measure("p", {"old": "a", "new": "b"}, 1, 1, "w", callgrind=True,
                          kernels=None)
        cpu_speed.measure("p", {"old": "a", "new": "b"}, 1, 1, "w", callgrind=True)
    finally:
        cpu_speed.run_once = real_run_once
    assert seen == [None] * 4 + [cpu_speed.NO_KERNEL] * 4, seen
    text = cpu_speed.render({"date": "2026-11-29", "machine": {"cpu": "c", "cores": 2,
                             "os": "o", "commit": "x"}, "baseline": "b", "runs": 1, "scale": 8,
                             "callgrind": True, "instrumented": True, "rows": [row]})
    assert "--callgrind --instrumented" in text and "counter code included" in text, text
    text = cpu_speed.render({"date": "2026-11-24", "machine": {"cpu": "c", "cores": 2,
                             "os": "o", "commit": "x"}, "baseline": "b", "runs": 3, "scale": 8,
                             "load_start": 1.0, "load_end": 2.0, "elapsed_s": 3,
                             "instrumented": True,
                             "rows": [cpu_speed.summarize("p", samples(30, 50))]})
    assert "cpu_speed.py --instrumented --runs 3" in text, text
    assert "counter code included" in text and cpu_speed.NO_KERNEL not in text, text
    print("test_cpu_speed: ok")


if __name__ == "__main__":
    main()
