#!/usr/bin/env python3
"""Checks one corpus program's instrumented run against its own witness counters.

The program counted, itself, `threads` (one `atom.global.add.u32` per active thread on each
witnessed path) and `warps` (one `atom.global.add.u64` per warp visit, from the first active lane).
The profile must say exactly the same:
  atom.global.add.u32: threads == threads, warps == warps
  atom.global.add.u64: threads == warps,   warps == warps
(or, where the witness line says `predicated` (witness_predicated(), no branch):
  atom.global.add.u64: threads == threads, warps == warps)
Prints one JSON line; exits 1 if anything differs.
"""
import json
import re
import sys


def witness(text):
    m = re.search(r"witness: threads=(\d+) warps=(\d+)( predicated)?", text)
    return (int(m.group(1)), int(m.group(2)), bool(m.group(3))) if m else None


def result_line(text):
    return next((l for l in text.splitlines() if l.startswith("result:")), None)


def main():
    name, plain_status, plain_out, inst_status, inst_out, profile_path = sys.argv[1:7]
    plain_text = open(plain_out).read()
    inst_text = open(inst_out).read()
    row = {"program": name, "plain_status": int(plain_status), "instrumented_status": int(inst_status),
           "plain_result": result_line(plain_text), "instrumented_result": result_line(inst_text)}
    problems = []
    if row["plain_result"] != row["instrumented_result"]:
        problems.append("result lines differ")
    if row["plain_result"] != "result: PASS":
        problems.append("plain build does not pass its own check")
    w = witness(inst_text)
    if w is None:
        problems.append("no witness line")
    try:
        profile = json.load(open(profile_path))
    except (OSError, ValueError) as e:
        profile = None
        problems.append(f"no valid profile: {e}")
    if w and profile:
        totals = {}
        for kernel in profile.get("kernels", []):
            if not kernel.get("instrumented", False) and kernel.get("launches"):
                problems.append(f"kernel {kernel.get('name')} ran uninstrumented: {kernel.get('reason')}")
            for op, c in kernel.get("totals", {}).items():
                t = totals.setdefault(op, [0, 0])
                t[0] += c["threads"]
                t[1] += c["warps"]
        u32 = totals.get("atom.global.add.u32", [0, 0])
        u64 = totals.get("atom.global.add.u64", [0, 0])
        threads, warps, predicated = w
        row.update({"witness_threads": threads, "witness_warps": warps,
                    "u32_threads": u32[0], "u32_warps": u32[1], "u64_threads": u64[0], "u64_warps": u64[1]})
        u64_threads = threads if predicated else warps
        if (u32[0], u32[1], u64[0], u64[1]) != (threads, warps, u64_threads, warps):
            problems.append("profile counts differ from the witness")
    row["problems"] = problems
    row["ok"] = not problems
    print(json.dumps(row))
    return 0 if row["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
