#!/usr/bin/env python3
"""Tests benchmarks/suites.py without any real suite.

    python3 benchmarks/tests/test_suites.py      (after cargo build --workspace)

1. The committed recipes (suites.toml) load; malformed recipe files are refused with the reason.
2. `suites.py compare` on hand-made files: tolerances, count mismatches, --lines, --binary.
3. The harness end to end on tests/mini-suite, a stand-in suite with one real CUDA app built
   through the CPU-target prefix (a g++ link with -lcudart, as Rodinia's Makefiles do) and a C
   version of it: the rows must say what happened (built, ran, checked, compared, timed out,
   skipped), the launches and kernels must be the program's (3 launches of 1 kernel), and the
   thread-instructions must equal the interpreter's own count of the uninstrumented kernel
   (CUDA_FLUX_CPU_STATS with CUDA_FLUX_KERNELS matching nothing), an oracle independent of the
   profile the harness reads. Skipped (with a note) when no cuda-flux-nvcc has been built.
"""

import array
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import suites  # noqa: E402

FAILURES = []


def expect(condition, what):
    if not condition:
        FAILURES.append(what)
        print(f"FAIL: {what}")


def recipe_error(text):
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as handle:
        handle.write(text)
    try:
        suites.load_recipes(handle.name)
    except suites.RecipeError as error:
        return str(error)
    finally:
        os.remove(handle.name)
    return None


def test_recipes():
    defaults, apps = suites.load_recipes(os.path.join(BENCH, "suites.toml"))
    names = {(a["suite"], a["name"]) for a in apps}
    expect(len(names) == len(apps), "suites.toml: app names are unique")
    expect({a["suite"] for a in apps} == {"rodinia", "parboil", "shoc", "polybench"},
           "suites.toml covers the four suites")
    expect(defaults.get("timeout") == 120, "suites.toml: 120 s per step by default")
    good = '[[app]]\nsuite = "s"\nname = "a"\ndir = "d"\nrun = "true"\n'
    expect(recipe_error(good) is None, "a minimal recipe loads")
    cases = [
        ('[[app]]\nsuite = "s"\nname = "a"\nrun = "true"\n', "missing dir"),
        (good + 'colour = "red"\n', "unknown key(s) colour"),
        (good + "pass = ['(']\n", "`pass` '('"),
        (good + "time = 'seconds'\n", "exactly one group"),
        (good + 'native = { dir = "n" }\n', "`native` needs `dir` and `run`"),
        (good + 'timeout = -1\n', "positive number"),
        (good + good, "defined twice"),
        ('[[app]]\nsuite = "s"\nname = "a"\ndir = "d"\n', "needs `run`"),
        ("[[app]\n", "not valid TOML"),
        ('[other]\n', "unknown top-level key(s) other"),
    ]
    for text, reason in cases:
        error = recipe_error(text)
        expect(error is not None and reason in error,
               f"recipe refused with {reason!r}: got {error!r}")


def compare(*args):
    result = subprocess.run([sys.executable, os.path.join(BENCH, "suites.py"), "compare", *args],
                            capture_output=True, text=True)
    return result.returncode, result.stdout.strip()


def test_compare():
    with tempfile.TemporaryDirectory() as tmp:
        def write(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w") as handle:
                handle.write(text)
            return path
        a = write("a", "x 1.0 2.0\nvalue: 100\n")
        b = write("b", "y 1.00001 2\nvalue: 100.5\n")
        status, out = compare(a, b, "--rel", "1e-4")
        expect(status == 1 and "number 3: 100.0 against 100.5" in out,
               f"compare: 100 vs 100.5 differs at 1e-4 ({status}, {out})")
        status, out = compare(a, b, "--rel", "1e-2")
        expect(status == 0 and "3 numbers match" in out, f"compare: match at 1e-2 ({out})")
        status, out = compare(a, b, "--abs", "0.5")
        expect(status == 0, f"compare: match with --abs 0.5 ({out})")
        status, out = compare(a, b, "--lines", "^x|^y", "--rel", "1e-4")
        expect(status == 0 and "2 numbers match" in out, f"compare: --lines ({out})")
        c = write("c", "1 2\n")
        status, out = compare(c, a)
        expect(status == 1 and "2 numbers against 3" in out, f"compare: counts ({out})")
        status, out = compare(c, write("empty", "no numbers\n"))
        expect(status == 2, f"compare: a reference without numbers is bad input ({out})")
        status, out = compare(c, os.path.join(tmp, "absent"))
        expect(status == 2 and "cannot read" in out, f"compare: missing file ({out})")
        f1, f2 = os.path.join(tmp, "f1"), os.path.join(tmp, "f2")
        array.array("f", [1.0, 2.0, 3.0]).tofile(open(f1, "wb"))
        array.array("f", [1.0, 2.0, 3.5]).tofile(open(f2, "wb"))
        status, out = compare(f1, f2, "--binary", "f32", "--rel", "0")
        expect(status == 1 and "number 3: 3.0 against 3.5" in out, f"compare: binary ({out})")
        with open(f2, "ab") as handle:
            handle.write(b"\0")
        status, out = compare(f1, f2, "--binary", "f32")
        expect(status == 2 and "whole number" in out, f"compare: ragged binary ({out})")


def interpreter_thread_instructions(program, cwd):
    """The interpreter's count for the uninstrumented kernel of one run of program."""
    stats = os.path.join(cwd, "oracle-stats.json")
    env = dict(os.environ, CUDA_FLUX_KERNELS="no-kernel-has-this-name",
               CUDA_FLUX_CPU_STATS=stats, CUDA_FLUX_OUTPUT=os.path.join(cwd, "unused.json"))
    subprocess.run([program, "1000", "2", os.path.join(cwd, "oracle.txt")], cwd=cwd, env=env,
                   check=True, capture_output=True)
    with open(stats) as handle:
        kernels = json.load(handle)["kernels"]
    return {k["name"]: k["thread_instructions"] for k in kernels}


def test_end_to_end():
    bin_dir = os.environ.get("CUDA_FLUX_BIN", os.path.join(ROOT, "target", "debug"))
    if not os.access(os.path.join(bin_dir, "cuda-flux-nvcc"), os.X_OK):
        print(f"note: {bin_dir}/cuda-flux-nvcc not built: end-to-end test skipped")
        return
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "table.md")
        result = subprocess.run(
            [sys.executable, os.path.join(BENCH, "suites.py"),
             "--suite", f"mini={os.path.join(HERE, 'mini-suite')}",
             "--recipes", os.path.join(HERE, "mini-suite", "recipes.toml"),
             "--bin", bin_dir, "--work-dir", os.path.join(work, "w"), "--out", out],
            capture_output=True, text=True)
        expect(result.returncode == 0, f"harness exit status 0: {result.stderr[-2000:]}")
        if result.returncode != 0:
            return
        with open(os.path.splitext(out)[0] + ".json") as handle:
            rows = {r["app"]: r for r in json.load(handle)["apps"]}
        add = rows["add"]
        expect(add["built"] and add["ran"] and add["correct"] is True,
               f"add: built, ran, correct ({add})")
        expect(add["kernels"] == 1 and add["launches"] == 3, f"add: 1 kernel, 3 launches ({add})")
        program = os.path.join(work, "w", "src", "mini", "add", "add")
        oracle = interpreter_thread_instructions(program, os.path.join(work, "w"))
        expect(list(oracle.values()) == [add["thread_instructions"]],
               f"add: thread-instructions {add['thread_instructions']} = the interpreter's "
               f"count of the uninstrumented kernel {oracle}")
        expect(add["kernel_seconds"] and add["rate"] and abs(
            add["rate"] - add["thread_instructions"] / add["kernel_seconds"]) < 1e-6 * add["rate"],
            f"add: rate = thread-instructions / kernel seconds ({add})")
        expect(add["native_seconds"] and abs(
            add["slowdown"] - add["seconds"] / add["native_seconds"]) < 1e-9 * add["slowdown"],
            f"add: slowdown = seconds / native seconds ({add})")
        mismatch = rows["mismatch"]
        expect(mismatch["ran"] and mismatch["correct"] is False
               and "number 2: 7.0 against 10.0" in (mismatch["error"] or ""),
               f"mismatch: the comparison's first difference is the error ({mismatch})")
        broken = rows["broken"]
        expect(broken["built"] is False and "missing.cu" in (broken["error"] or ""),
               f"broken: not built, the error names missing.cu ({broken})")
        slow = rows["slow"]
        expect(slow["ran"] is False and slow["error"] == "run: timeout after 1 s",
               f"slow: timed out ({slow})")
        skipped = rows["skipped"]
        expect(skipped["built"] is None and skipped["error"] == "not run: no input shipped",
               f"skipped: reason given ({skipped})")
        with open(out) as handle:
            table = handle.read()
        expect("| mini | add | yes | yes | yes | 1 | 3 |" in table, "the Markdown row of add")
        expect("5 apps in the recipes, 4 attempted, 3 built, 2 ran to completion, 1 correct"
               in table, f"the summary line: {table[:1500]}")
        # --update: re-running one app replaces its row and keeps the others, in recipe order.
        result = subprocess.run(
            [sys.executable, os.path.join(BENCH, "suites.py"),
             "--suite", f"mini={os.path.join(HERE, 'mini-suite')}",
             "--recipes", os.path.join(HERE, "mini-suite", "recipes.toml"), "--bin", bin_dir,
             "--work-dir", os.path.join(work, "w2"), "--out", out, "--update", "--only", "slow"],
            capture_output=True, text=True)
        expect(result.returncode == 0, f"--update exit status 0: {result.stderr[-2000:]}")
        with open(os.path.splitext(out)[0] + ".json") as handle:
            again = json.load(handle)["apps"]
        expect([r["app"] for r in again] == ["add", "mismatch", "broken", "slow", "skipped"]
               and again[0] == add and again[3]["error"] == "run: timeout after 1 s",
               f"--update keeps the other rows in recipe order ({[r['app'] for r in again]})")
        with open(out) as handle:
            updated = handle.read()
        expect("Re-run with `--update`" in updated and "): mini/slow." in updated
               and "| mini | add | yes | yes | yes | 1 | 3 |" in updated,
               f"the updated table names the re-run app and keeps the others: {updated[:1500]}")


def main():
    test_recipes()
    test_compare()
    test_end_to_end()
    if FAILURES:
        print(f"test_suites: {len(FAILURES)} failure(s)")
        return 1
    print("test_suites: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
