#!/usr/bin/env python3
"""Tests benchmarks/suites.py without any real suite.

    python3 benchmarks/tests/test_suites.py      (after cargo build --workspace)

1. The committed recipes (suites.toml) load; malformed recipe files are refused with the reason.
2. `suites.py compare` on hand-made files: tolerances, count mismatches, --lines, --binary;
   `suites.py avi` read back by a RIFF walker of the test's own.
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


def riff_chunks(data, start, end):
    """(tag, payload start, payload length) of the RIFF chunks in data[start:end]."""
    chunks, at = [], start
    while at < end:
        if at + 8 > end:
            raise ValueError(f"a chunk header runs past its list at {at}")
        tag, size = data[at:at + 4], int.from_bytes(data[at + 4:at + 8], "little")
        if at + 8 + size > end:
            raise ValueError(f"chunk {tag!r} at {at} runs past its list")
        chunks.append((tag, at + 8, size))
        at += 8 + size + size % 2
    return chunks


def test_avi():
    """`suites.py avi`: walked as RIFF by the reader below (what avilib needs: an 'AVI ' RIFF, a
    'hdrl' list with the video stream's 'strh' and 'strf', a 'movi' list of '00db' frames),
    its header fields and frames must be those asked for, the disks dark, consecutive frames
    different (the drift); bad arguments are refused with one line."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "v.avi")
        width, height, frames = 33, 20, 3
        run = subprocess.run([sys.executable, os.path.join(BENCH, "suites.py"), "avi", path,
                              "--width", str(width), "--height", str(height), "--frames",
                              str(frames), "--disks", "2", "--radius", "4", "--noise", "8"],
                             capture_output=True, text=True)
        expect(run.returncode == 0, f"avi: exit status {run.returncode} ({run.stdout})")
        data = open(path, "rb").read()
        expect(data[:4] == b"RIFF" and data[8:12] == b"AVI "
               and int.from_bytes(data[4:8], "little") == len(data) - 8,
               "avi: a RIFF 'AVI ' file whose size field covers the rest")
        try:
            top = riff_chunks(data, 12, len(data))
            lists = {data[s:s + 4]: (s + 4, s + n) for tag, s, n in top if tag == b"LIST"}
            hdrl = riff_chunks(data, *lists[b"hdrl"])
            strl = [(s, n) for tag, s, n in hdrl if tag == b"LIST" and data[s:s + 4] == b"strl"]
            stream = {tag: data[s:s + n] for tag, s, n in riff_chunks(data, strl[0][0] + 4,
                                                                       sum(strl[0]))}
            movi = riff_chunks(data, *lists[b"movi"])
        except (KeyError, IndexError, ValueError) as error:
            expect(False, f"avi: not the RIFF structure a reader walks ({error!r})")
            return
        word = lambda b, at: int.from_bytes(b[at:at + 4], "little")  # noqa: E731
        strh, strf = stream.get(b"strh", b""), stream.get(b"strf", b"")
        expect(strh[:4] == b"vids" and word(strh, 32) == frames and word(strh, 20) > 0,
               "avi: 'strh' is a video stream with the frame count at offset 32")
        expect(len(strf) == 40 and (word(strf, 4), word(strf, 8)) == (width, height)
               and int.from_bytes(strf[14:16], "little") == 8,
               "avi: 'strf' has the width, height and 8 bits per pixel")
        expect([tag for tag, _, _ in movi] == [b"00db"] * frames
               and all(n == width * height for _, _, n in movi),
               "avi: one '00db' chunk of width x height bytes per frame")
        got = [data[s:s + n] for _, s, n in movi]
        want = suites.avi_frames(width, height, frames, 1, 2, 4, 8)
        expect(got == want, "avi: the frames written are avi_frames'")
        expect(got[0] != got[1], "avi: the content drifts between frames")
        expect(min(got[0]) < 20 + 8 and max(got[0]) > 60,
               "avi: dark disks on a brighter pattern")
        for bad in (["--width", "0", "--height", "2", "--frames", "1"],
                    ["--width", "2", "--height", "2", "--frames", "1", "--noise", "300"]):
            run = subprocess.run([sys.executable, os.path.join(BENCH, "suites.py"), "avi",
                                  os.path.join(tmp, "bad.avi"), *bad],
                                 capture_output=True, text=True)
            expect(run.returncode == 2 and run.stdout.count("\n") == 1
                   and not os.path.exists(os.path.join(tmp, "bad.avi")),
                   f"avi {bad}: refused with one line, nothing written ({run.stdout})")


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
        patient = rows["patient"]
        expect(patient["ran"] is True,
               f"patient: ran within the [defaults] limit ({patient})")
        skipped = rows["skipped"]
        expect(skipped["built"] is None and skipped["error"] == "not run: no input shipped",
               f"skipped: reason given ({skipped})")
        with open(out) as handle:
            table = handle.read()
        expect("| mini | add | yes | yes | yes | 1 | 3 |" in table, "the Markdown row of add")
        expect("6 apps in the recipes, 5 attempted, 4 built, 3 ran to completion, 1 correct"
               in table, f"the summary line: {table[:1500]}")
        # --update: re-running apps replaces their rows and keeps the others, in recipe order;
        # --timeout overrides [defaults] but not a recipe's own limit.
        result = subprocess.run(
            [sys.executable, os.path.join(BENCH, "suites.py"),
             "--suite", f"mini={os.path.join(HERE, 'mini-suite')}",
             "--recipes", os.path.join(HERE, "mini-suite", "recipes.toml"), "--bin", bin_dir,
             "--work-dir", os.path.join(work, "w2"), "--out", out, "--update", "--timeout", "1.5",
             "--only", "slow", "patient"],
            capture_output=True, text=True)
        expect(result.returncode == 0, f"--update exit status 0: {result.stderr[-2000:]}")
        with open(os.path.splitext(out)[0] + ".json") as handle:
            again = json.load(handle)["apps"]
        expect([r["app"] for r in again]
               == ["add", "mismatch", "broken", "slow", "patient", "skipped"]
               and again[0] == add and again[3]["error"] == "run: timeout after 1 s",
               f"--update keeps the other rows in recipe order ({[r['app'] for r in again]})")
        expect(again[4]["ran"] is False and again[4]["error"] == "run: timeout after 1.5 s",
               f"--timeout 1.5 applies to an app without a limit of its own ({again[4]})")
        with open(out) as handle:
            updated = handle.read()
        expect("Re-run with `--update`" in updated and "): mini/patient, mini/slow." in updated
               and "| mini | add | yes | yes | yes | 1 | 3 |" in updated,
               f"the updated table names the re-run app and keeps the others: {updated[:1500]}")


def main():
    test_recipes()
    test_compare()
    test_avi()
    test_end_to_end()
    if FAILURES:
        print(f"test_suites: {len(FAILURES)} failure(s)")
        return 1
    print("test_suites: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
