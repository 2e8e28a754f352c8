#!/usr/bin/env python3
"""Tests benchmarks/suites.py without any real suite.

    python3 benchmarks/tests/test_suites.py      (after cargo build --workspace)

1. The committed recipes (suites.toml) load; malformed recipe files are refused with the reason.
2. `suites.py compare` on hand-made files: tolerances, count mismatches, --lines, --binary;
   `suites.py avi` read back by a RIFF walker of the test's own; `suites.py reference`'s
   computations against truths known another way, and as the recipes use them: app-like
   output matches, and fails once corrupted.
3. The harness end to end on tests/mini-suite, a stand-in suite with one real CUDA app built
   through the CPU-target prefix (a g++ link with -lcudart, as Rodinia's Makefiles do) and a C
   version of it: the rows must say what happened (built, ran, checked, compared, timed out,
   skipped), the launches and kernels must be the program's (3 launches of 1 kernel), and the
   thread-instructions must equal the interpreter's own count of the uninstrumented kernel
   (CUDA_FLUX_CPU_STATS with CUDA_FLUX_KERNELS matching nothing), an oracle independent of the
   profile the harness reads. Skipped (with a note) when no cuda-flux-nvcc has been built.
4. `suites.py cost` on the mini suite under two placements: what is measured and what not, the
   original kernel's thread-instructions against the profile's counts, the placements compared.
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
import suites_reference  # noqa: E402

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
        (good + 'cost_kind = "sorting"\n', "`cost_kind` must be one of 'stencil'"),
    ]
    expect(recipe_error(good + 'cost_kind = "tiled matmul"\n') is None,
           "a recipe naming a kind of kernel-heavy code loads")
    kinds = {a.get("cost_kind") for a in apps} - {None}
    expect(kinds == set(suites.cost.HEAVY_KINDS),
           f"suites.toml names apps of every kind issue 11's target names ({sorted(kinds)})")
    for text, reason in cases:
        error = recipe_error(text)
        expect(error is not None and reason in error,
               f"recipe refused with {reason!r}: got {error!r}")


def compare(*args):
    result = subprocess.run([sys.executable, os.path.join(BENCH, "suites.py"), "compare", *args],
                            capture_output=True, text=True)
    return result.returncode, result.stdout.strip()


def write_file(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        handle.write(text)
    return path


def test_compare():
    with tempfile.TemporaryDirectory() as tmp:
        def write(name, text):
            return write_file(tmp, name, text)
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


def test_same_counts():
    def profile(warps):
        return {"kernels": [{"name": "k", "launches": [
            {"block_counts": {"threads": [64, 10], "warps": [2, 1]}},
            {"block_counts": {"threads": [64, 3], "warps": [2, warps]}}]}]}

    with tempfile.TemporaryDirectory() as tmp:
        def run(name, warps):
            directory = os.path.join(tmp, name, "apps", "suite", "app", "variant")
            os.makedirs(directory)
            with open(os.path.join(directory, "profile.json"), "w") as handle:
                json.dump(profile(warps), handle)
            return os.path.join(tmp, name)

        def same_counts(a, b):
            out = subprocess.run([sys.executable, os.path.join(BENCH, "suites.py"), "same-counts", a, b],
                                 capture_output=True, text=True)
            return out.returncode, out.stdout

        derived, every, off = run("derived", 1), run("every", 1), run("off", 2)
        status, out = same_counts(derived, every)
        expect(status == 0 and "1 apps" in out, f"same-counts: equal runs ({status}, {out})")
        status, out = same_counts(derived, off)
        expect(status == 1 and "suite/app/variant: k: block counts differ" in out,
               f"same-counts: one warp count off ({status}, {out})")
        status, out = same_counts(derived, os.path.join(tmp, "none"))
        expect(status == 2 and "no profile" in out, f"same-counts: no profiles ({out})")
        # `cost` compares an app's profiles under its placements the same way.
        profile_of = {name: os.path.join(tmp, name, "apps", "suite", "app", "variant",
                                         "profile.json") for name in ("derived", "every", "off")}
        check = suites.block_count_check("suite/app", profile_of, ["derived", "every"])
        expect(check == {"program": "suite/app", "differing_kernels": []},
               f"cost: equal block counts under two placements ({check})")
        check = suites.block_count_check("suite/app", profile_of, ["derived", "every", "off"])
        expect(check["differing_kernels"] == ["k"],
               f"cost: a third placement with one warp count off ({check})")


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


def reference(*args):
    result = subprocess.run([sys.executable, os.path.join(BENCH, "suites.py"), "reference",
                             *args], capture_output=True, text=True)
    return result.returncode, result.stdout.strip()


def test_reference():
    """`suites.py reference`: each computation against a truth found another way (a system
    built from a known solution; heat that only the sources and the ambient exchange change, a
    uniform grid staying uniform; clusters whose means are known), then each the way the
    recipes use it: the reference file against an app-like output, which matches as is and
    fails once one value is corrupted (a check that cannot fail checks nothing)."""
    ref = suites_reference
    # A system with integer solution: A x = b for x = (1, -2, 3), no pivoting needed.
    a = [[4.0, 1.0, -1.0], [2.0, 5.0, 1.0], [1.0, -1.0, 6.0]]
    x = [1.0, -2.0, 3.0]
    b = [sum(r[j] * x[j] for j in range(3)) for r in a]
    solved = ref.linear_system([3.0] + [v for r in a for v in r] + b)
    expect(all(abs(s - t) < 1e-12 for s, t in zip(solved, x)),
           f"linear-system: A x = b solved for the x it was built from ({solved})")
    for numbers, reason in (([2.0, 0.0, 1.0, 1.0, 1.0, 1.0, 2.0], "zero pivot in row 1"),
                            ([2.0, 1.0, 2.0], "needs 6 numbers"),
                            ([0.5], "positive integer")):
        try:
            ref.linear_system(numbers)
            error = None
        except ref.ReferenceInputError as problem:
            error = str(problem)
        expect(error is not None and reason in error,
               f"linear-system {numbers}: refused with {reason!r} ({error})")
    # HotSpot: the lateral terms only move heat between cells (a neighbour outside the grid is
    # the cell itself: no flux through the border), so one step changes the grid's total by
    # exactly the sources' and the ambient exchange's share; a uniform grid stays uniform.
    import random
    rng = random.Random(5)
    rows, cols = 5, 4
    temps = [rng.uniform(300, 360) for _ in range(rows * cols)]
    powers = [rng.uniform(0, 2) for _ in range(rows * cols)]
    stepped = ref.hotspot(rows, cols, 1, temps, powers)
    side_h, side_w = ref.HOTSPOT_CHIP_SIDE / rows, ref.HOTSPOT_CHIP_SIDE / cols
    cap = (ref.HOTSPOT_FACTOR_CHIP * ref.HOTSPOT_SPECIFIC_HEAT * ref.HOTSPOT_CHIP_THICKNESS
           * side_w * side_h)
    rz = ref.HOTSPOT_CHIP_THICKNESS / (ref.HOTSPOT_CONDUCTIVITY * side_h * side_w)
    step = ref.HOTSPOT_PRECISION / (ref.HOTSPOT_MAX_POWER_DENSITY / (
        ref.HOTSPOT_FACTOR_CHIP * ref.HOTSPOT_CHIP_THICKNESS * ref.HOTSPOT_SPECIFIC_HEAT))
    exchange = sum(p + (ref.HOTSPOT_AMBIENT - t) / rz for p, t in zip(powers, temps)) * step / cap
    expect(abs(sum(stepped) - sum(temps) - exchange) < 1e-9 * sum(temps),
           "hotspot: one step changes the total heat by the sources and the ambient only")
    expect(stepped != ref.hotspot(rows, cols, 1, temps, [0.0] * len(powers)),
           "hotspot: the power enters the step")
    uniform = ref.hotspot(rows, cols, 3, [330.0] * (rows * cols), [0.5] * (rows * cols))
    expect(max(uniform) - min(uniform) < 1e-9 and uniform[0] != 330.0,
           f"hotspot: a uniform grid with uniform power stays uniform and warms ({uniform[:2]})")
    expect(ref.hotspot(2, 3, 4, [80.0] * 6, [0.0] * 6) == [80.0] * 6,
           "hotspot: a grid at the ambient temperature without power stays there")
    # Two cells side by side share one edge: nothing flows through the others (a periodic or
    # a cold border would add terms).
    pair = ref.hotspot(1, 2, 1, [300.0, 340.0], [0.0, 0.0])
    rx = (ref.HOTSPOT_CHIP_SIDE / 2) / (2.0 * ref.HOTSPOT_CONDUCTIVITY
                                        * ref.HOTSPOT_CHIP_THICKNESS * ref.HOTSPOT_CHIP_SIDE)
    rz_pair = ref.HOTSPOT_CHIP_THICKNESS / (ref.HOTSPOT_CONDUCTIVITY * ref.HOTSPOT_CHIP_SIDE
                                            * ref.HOTSPOT_CHIP_SIDE / 2)
    cap_pair = (ref.HOTSPOT_FACTOR_CHIP * ref.HOTSPOT_SPECIFIC_HEAT
                * ref.HOTSPOT_CHIP_THICKNESS * ref.HOTSPOT_CHIP_SIDE * ref.HOTSPOT_CHIP_SIDE / 2)
    want = 300.0 + step / cap_pair * (40.0 / rx + (ref.HOTSPOT_AMBIENT - 300.0) / rz_pair)
    expect(abs(pair[0] - want) < 1e-9 * want,
           f"hotspot: two cells exchange through their shared edge only ({pair[0]} vs {want})")
    # k-means: two tight groups seeded by their first points; the second round moves nothing.
    points = [[0.0, 0.0], [10.0, 10.0], [0.0, 2.0], [10.0, 12.0], [2.0, 0.0], [12.0, 10.0]]
    centres, rounds = ref.kmeans(points, 2, 0.001)
    expect(rounds == 2 and all(abs(c - w) < 1e-12 for got, want in
                               zip(centres, [[2 / 3, 2 / 3], [32 / 3, 32 / 3]])
                               for c, w in zip(got, want)),
           f"kmeans: the groups' means after 2 rounds ({centres}, {rounds})")
    # A tie goes to the lower index (the app's strict `<` over centres in order).
    centres, rounds = ref.kmeans([[0.0], [2.0], [1.0]], 2, 0.001)
    expect([c[0] for c in centres] == [0.5, 2.0] and rounds == 2,
           f"kmeans: a point equally far from two centres joins the first ({centres})")
    # 5.2 is nearer 10 than 0 in round 1; once the centres are 2.25 and 35.2 / 3 it is nearer
    # the first: it changes centre in round 2, and round 3 changes nothing.
    points = [[0.0], [10.0], [5.2], [4.5], [20.0]]
    centres, rounds = ref.kmeans(points, 2, 0.001)
    expect(rounds == 3 and [round(c[0], 9) for c in centres] == [round(9.7 / 3, 9), 15.0],
           f"kmeans: a point that changes centre takes a third round ({centres}, {rounds})")
    with tempfile.TemporaryDirectory() as tmp:
        def write(name, text):
            return write_file(tmp, name, text)
        # linear-system, as the gaussian recipe: the app's solution file, then corrupted.
        system = write("system.txt", "3\n\n" + "".join("\t".join(f"{v:.6f}" for v in r) + "\n"
                                                     for r in a) + "\n" + "\t".join(map(str, b)))
        status, out = reference("linear-system", system, os.path.join(tmp, "x.ref"))
        expect(status == 0, f"reference linear-system: exit status 0 ({out})")
        app = write("x.app", "1.0000001\n-2\n2.9999998\n")
        status, out = compare(app, os.path.join(tmp, "x.ref"), "--rel", "1e-4", "--abs", "1e-5")
        expect(status == 0, f"linear-system: a float solution matches ({out})")
        bad = write("x.bad", "1.0000001\n-2.001\n2.9999998\n")
        status, out = compare(bad, os.path.join(tmp, "x.ref"), "--rel", "1e-4", "--abs", "1e-5")
        expect(status == 1 and "number 2" in out, f"linear-system: a corrupted value fails ({out})")
        # hotspot, as its recipe: `index<TAB>value` files.
        temp = write("temp", "".join(f"{t:.6f}\n" for t in temps))
        power = write("power", "".join(f"{p:.8f}\n" for p in powers))
        status, out = reference("hotspot", str(rows), str(cols), "2", temp, power,
                                os.path.join(tmp, "hot.ref"))
        expect(status == 0, f"reference hotspot: exit status 0 ({out})")
        with open(os.path.join(tmp, "hot.ref")) as handle:
            lines = handle.read().splitlines()
        expect(len(lines) == rows * cols and lines[7].startswith("7\t"),
               f"hotspot: one `index<TAB>value` line per cell ({lines[:2]})")
        app = write("hot.app", "".join(f"{i}\t{float(l.split()[1]):g}\n"
                                       for i, l in enumerate(lines)))
        status, out = compare(app, os.path.join(tmp, "hot.ref"), "--rel", "2e-6")
        expect(status == 0, f"hotspot: the app's %g output matches ({out})")
        lines[7] = f"7\t{float(lines[7].split()[1]) + 0.01:g}"
        bad = write("hot.bad", "".join(f"{l}\n" for l in lines))
        status, out = compare(bad, os.path.join(tmp, "hot.ref"), "--rel", "2e-6")
        expect(status == 1 and "number 16" in out, f"hotspot: a cell off by 0.01 fails ({out})")
        status, out = reference("hotspot", "3", "3", "1", temp, power, os.path.join(tmp, "h"))
        expect(status == 2 and "3 x 3 cells need 9" in out and out.count("\n") == 0
               and not os.path.exists(os.path.join(tmp, "h")),
               f"reference hotspot: a wrong size is one line, nothing written ({out})")
        # kmeans, as its recipe: the app prints more than the centroids.
        points = write("points", "".join(f"{i} {p[0]}\n" for i, p in enumerate(
            [[0.0], [10.0], [5.2], [4.5], [20.0]])))
        status, out = reference("kmeans", "2", "0.001", points, os.path.join(tmp, "k.ref"))
        expect(status == 0, f"reference kmeans: exit status 0 ({out})")
        lines = "^(iterated [0-9]+ times|[0-9]+:)"
        app = write("k.app", "I/O completed\nNumber of objects: 5\niterated 3 times\n\n"
                             "===== Centroid Coordinates =====\n0: 3.23\n\n1: 15.00\n\n"
                             "Number of Iteration: 1\n")
        status, out = compare(app, os.path.join(tmp, "k.ref"), "--lines", lines, "--rel", "0",
                              "--abs", "0.006")
        expect(status == 0 and "5 numbers match" in out, f"kmeans: the printed lines match ({out})")
        bad = write("k.bad", open(app).read().replace("iterated 3", "iterated 2"))
        status, out = compare(bad, os.path.join(tmp, "k.ref"), "--lines", lines, "--rel", "0",
                              "--abs", "0.006")
        expect(status == 1 and "number 1: 2.0 against 3.0" in out,
               f"kmeans: a different round count fails ({out})")
        bad = write("k.bad2", open(app).read().replace("1: 15.00", "1: 15.01"))
        status, out = compare(bad, os.path.join(tmp, "k.ref"), "--lines", lines,
                              "--rel", "0", "--abs", "0.006")
        expect(status == 1 and "number 5" in out, f"kmeans: a centroid off by 0.01 fails ({out})")
        status, out = reference("kmeans", "9", "0.001", points, os.path.join(tmp, "k2"))
        expect(status == 2 and "k = 9 with 5 points" in out,
               f"reference kmeans: more centres than points refused ({out})")
        status, out = reference("no-such-kind")
        expect(status == 2 and out.startswith("usage:"), f"reference: unknown kind ({out})")


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


def test_cost_end_to_end():
    """`suites.py cost` on the mini suite under two placements: add is measured (mismatch,
    whose check fails, is not), its original kernel's thread-instructions equal what the
    counters of the checked run say the kernel executed (the profile), under each placement,
    and its blocks' counts are equal under both."""
    bin_dir = os.environ.get("CUDA_FLUX_BIN", os.path.join(ROOT, "target", "debug"))
    if not os.access(os.path.join(bin_dir, "cuda-flux-nvcc"), os.X_OK):
        print(f"note: {bin_dir}/cuda-flux-nvcc not built: cost end-to-end test skipped")
        return
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "cost.md")
        # add built incrementally (no `make clean`), as many suites' recipes do: each placement
        # must still build it afresh (a copy of the suite per placement).
        with open(os.path.join(HERE, "mini-suite", "recipes.toml")) as handle:
            recipes = handle.read()
        incremental = recipes.replace("build = 'make clean; make CUDA_DIR=", "build = 'make CUDA_DIR=")
        expect(incremental != recipes, "cost: the mini recipes' add builds with make clean")
        recipes_path = write_file(work, "recipes.toml", incremental)
        result = subprocess.run(
            [sys.executable, os.path.join(BENCH, "suites.py"), "cost",
             "--suite", f"mini={os.path.join(HERE, 'mini-suite')}",
             "--recipes", recipes_path, "--bin", bin_dir,
             "--work-dir", os.path.join(work, "w"), "--out", out, "--runs", "2",
             "--counters", "derived", "every-block", "--only", "add", "mismatch"],
            capture_output=True, text=True)
        expect(result.returncode == 0, f"cost: exit status 0: {result.stderr[-2000:]}")
        if result.returncode != 0:
            return
        with open(os.path.splitext(out)[0] + ".json") as handle:
            doc = json.load(handle)
        programs = {p["name"]: p for p in doc["programs"]}
        expect(doc["placement"] == "derived" and sorted(programs) == ["mini/add", "mini/mismatch"]
               and doc["title"] == "apps of mini",
               f"cost: both apps reported under derived, titled by their suite "
               f"({sorted(programs)}, {doc['title']!r})")
        mismatch = programs["mini/mismatch"]
        expect(not mismatch["passed"] and "number 2: 7.0 against 10.0" in mismatch["notes"][0],
               f"cost: an app failing its check is not measured, with why ({mismatch})")
        for placement, records in [("derived", doc["programs"]),
                                   ("every-block", doc["placements"]["every-block"]["programs"])]:
            add = next(p for p in records if p["name"] == "mini/add")
            expect(add["passed"] and len(add["kernels"]) == 1,
                   f"cost: add measured under {placement} ({add.get('notes')})")
            if not add["passed"]:
                continue
            row = add["kernels"][0]
            keep = os.path.join(work, "w", placement, "apps", "mini", "add", "keep")
            kept = os.listdir(keep) if os.path.isdir(keep) else []
            expect(any(name.endswith(".instrumented.ptx") for name in kept),
                   f"cost ({placement}): add was built under this placement, its PTX kept "
                   f"({kept})")
            profile = os.path.join(work, "w", placement, "apps", "mini", "add", "profile.json")
            _, launches, counted, _ = suites.read_profile(profile)
            expect(row["launches"] == launches == 3
                   and row["original_thread_instructions"] == counted,
                   f"cost ({placement}): the original kernel's thread-instructions "
                   f"{row['original_thread_instructions']} = the profile's {counted}")
            # `if (i < n)` is all the kernel branches on: under `derived` the runtime counts
            # its block from the launch (no counter code at all), `every-block` counts it.
            if placement == "derived":
                counted_as_expected = (row["counter_warp_instructions"] == 0
                                       and row["counter_global_atomics"] == 0
                                       and row["expansion"] == 1.0)
            else:
                counted_as_expected = (row["counter_warp_instructions"] > 0
                                       and row["counter_global_atomics"] > 0)
            expect(counted_as_expected and row["clone_registers"]
                   and len(add["runs"]["original"]) == 2,
                   f"cost ({placement}): counter code (none under derived: the guard is counted "
                   f"from the launch), atomics, ptxas registers, 2 runs ({row})")
        comparison = doc["comparison"]
        expect(len(comparison["kernels"]) == 1 and not comparison["mismatches"]
               and doc["block_counts"] == [{"program": "mini/add", "differing_kernels": []}],
               f"cost: one kernel compared, same block counts ({comparison}, "
               f"{doc['block_counts']})")
        with open(out) as handle:
            text = handle.read()
        expect("## Placements compared" in text and "## Where the counter code is" in text
               and "equal under all placements in 1 of the 1 apps" in text,
               f"cost: the report's sections: {text[-1500:]}")


def main():
    test_recipes()
    test_compare()
    test_same_counts()
    test_avi()
    test_reference()
    test_end_to_end()
    test_cost_end_to_end()
    if FAILURES:
        print(f"test_suites: {len(FAILURES)} failure(s)")
        return 1
    print("test_suites: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
