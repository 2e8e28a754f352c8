#!/usr/bin/env python3
"""Tests the configuration parsing and the table of cpu_time.py on made-up runs (not a
measurement).

    python3 benchmarks/tests/test_cpu_time.py

By hand: interpreter 0.50 s, native 0.25 s, native:0 2.00 s -> ratios 0.50 and 4.00; a second
program 1.00 / 2.00 / 1.00 -> 2.00 and 1.00; totals 1.50 / 2.25 / 3.00; geometric means of
the ratios sqrt(0.5 * 2) = 1.00 and sqrt(4 * 1) = 2.00.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cpu_time  # noqa: E402


def main():
    assert cpu_time.parse_config("interpreter") == ("interpreter", None)
    assert cpu_time.parse_config("native") == ("native", None)
    assert cpu_time.parse_config("native:0") == ("native", 0)
    assert cpu_time.parse_config("native:33554432") == ("native", 33554432)
    assert cpu_time.parse_config("default") == (None, None)
    for bad in ["jit", "native:-1", "native:1e6", "native:x"]:
        try:
            cpu_time.parse_config(bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"{bad} accepted")
    configs = ["interpreter", "native", "native:0"]
    doc = {"date": "2026-11-28", "machine": {"cpu": "c", "cores": 2, "os": "o", "commit": "x"},
           "runs": 3, "scales": [1], "configs": configs, "load_start": 1.0, "load_end": 2.0,
           "elapsed_s": 3, "rows": [
               {"name": "p", "scale": 1, "thread": 1000,
                "times": {"interpreter": 0.5, "native": 0.25, "native:0": 2.0}},
               {"name": "q", "scale": 1, "thread": 2000,
                "times": {"interpreter": 1.0, "native": 2.0, "native:0": 1.0}},
               {"name": "r", "scale": 1, "error": "exit 1"},
           ]}
    text = cpu_time.render(doc)
    assert "| p | 1 | 1,000 | 0.50 | 0.25 | 2.00 | 0.50 | 4.00 |" in text, text
    assert "| q | 1 | 2,000 | 1.00 | 2.00 | 1.00 | 2.00 | 1.00 |" in text, text
    assert "| r | 1 | failed: exit 1 |" in text, text
    assert ("| **total** (ratios: geometric mean) | 1 | | **1.50** | **2.25** | **3.00** | "
            "**1.00** | **2.00** |") in text, text
    print("test_cpu_time: ok")


if __name__ == "__main__":
    main()
