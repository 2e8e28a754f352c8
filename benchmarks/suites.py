#!/usr/bin/env python3
"""Builds, runs and checks the apps of locally checked-out CUDA suites on cuda-flux's CPU target.

    benchmarks/suites.py --suite rodinia=/src/rodinia --suite polybench=/src/polybenchGpu ...
        [--recipes benchmarks/suites.toml] [--only NAME...] [--skip NAME...] [--timeout S]
        [--threads N] [--bin target/release] [--work-dir DIR] [--out FILE.md] [--title TEXT]
    benchmarks/suites.py compare A B [--rel R] [--abs A] [--skip-lines N] [--lines REGEX]
        [--binary f32|f64|i32|u32]
    benchmarks/suites.py avi OUT --width W --height H --frames N [--seed S] [--disks N]
        [--radius R] [--noise A]
    benchmarks/suites.py reference linear-system|hotspot|kmeans ARGS...
    benchmarks/suites.py same-counts WORK_A WORK_B
    benchmarks/suites.py cost --suite NAME=PATH ... [--only NAME...] [--skip NAME...] [--runs N]
        [--counters PLACEMENT...] [--timeout S] [--bin DIR] [--work-dir DIR] [--out FILE.md]

Nothing is fetched: every suite is a checkout the caller names, copied (without `.git`) into the
work directory so that building never touches it. The recipes (`suites.toml`, see
benchmarks/README.md) say per app how to build it, make its input, run it, check its result
(the suite's own check, or a comparison with the suite's OpenMP/CPU version on the same input)
and where its native time comes from. Per app the harness records: built, ran, correct,
kernels launched, launches and thread-instructions (from the cuda-flux profile), seconds (wall
time of the run, or the time the app prints), kernel seconds (the interpreter's, from
`CUDA_FLUX_CPU_STATS`), rate (profile thread-instructions per kernel second), native seconds,
slowdown (seconds / native seconds) and the first error; it writes a Markdown table and the
same data as JSON next to it. python3 (3.11, for tomllib) standard library only.

`compare` is the numeric comparison recipes use as their check: every number in A against the
number at the same place in B, equal within `--abs` or `--rel` (relative to the larger
magnitude); exit status 0 when all match, 1 with the first mismatch on stdout, 2 on bad input.

`avi` writes an input for apps that read video (Rodinia heartwall and leukocyte read AVI files
through avilib, and the suite ships none): an uncompressed AVI (RIFF 'AVI ', one video stream,
8-bit frames in '00db' chunks, no index: readers scan the 'movi' list) of textured frames, with
dark disks ("cells") if asked, whose content drifts a pixel or two per frame, deterministic for
a seed.

`same-counts` compares the block counts of two runs of the same apps (two `--work-dir`s), e.g.
built with `CUDA_FLUX_COUNTERS=derived` and `every-block`: per app and kernel, the thread and
warp counts of every block summed over its launches must be equal; exit status 0 when they all
are, 1 naming each app and kernel that differs, 2 on bad input (no profiles, unreadable JSON).

`cost` measures what the counter code costs on the apps (benchmarks/cost.py's figures and
report): each app is built by its recipe with CUDA_FLUX_COUNTERS=PLACEMENT and its instrumented
PTX kept, run and checked as above, and if correct measured by cost.measure, instrumented and
with its original kernels, --runs times each; with several --counters, once per placement,
compared side by side (cost.compare_placements), block counts checked equal across them.

`reference` computes, in Python, the result of an app that has neither a check of its own nor
a CPU version to compare with, from the same input (suites_reference.py says which and how).
"""

import argparse
import array
import datetime
import json
import math
import os
import platform
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import cost  # noqa: E402  (the counter-cost arithmetic and report, for `suites.py cost`)

# Keys an app's recipe may have, and which of them must be there.
APP_KEYS = {"suite", "name", "dir", "build", "input", "run", "pass", "fail", "check", "time",
            "native", "native_time", "native_label", "env", "timeout", "skip", "note",
            "expect_kernels", "cost_kind"}
APP_REQUIRED = {"suite", "name", "dir"}
NATIVE_KEYS = {"dir", "build", "run", "time", "env", "label"}
DEFAULT_KEYS = {"timeout", "env"}

# `compare --binary` element types (array module codes; x86-64 sizes).
BINARY_TYPES = {"f32": "f", "f64": "d", "i32": "i", "u32": "I"}
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?\b(?:nan|inf(?:inity)?)\b",
                    re.IGNORECASE)
# Lines of a failed step's output that are worth naming as its first error, best first.
ERROR_LINE = [re.compile(p) for p in (
    r"^cuda-flux cpu: ", r"^cuda-flux[-\w]*: ", r"^compare: ", r"\berror\b", r"\bError\b",
    r"\bERROR\b", r"\bFAIL", r"fatal", r"Segmentation fault|core dumped|Aborted",
    r"undefined reference", r"No such file",
    r"cannot open|Could not open|Unable to open|failed to open",
)]
# Lines that name no error although they match ERROR_LINE: compiler notes and warnings.
NOT_AN_ERROR = re.compile(r"\bnote: |\bwarning\b|-Werror|-Wno-error")


class RecipeError(Exception):
    """A recipe file that cannot be used, with the reason."""


def load_recipes(path):
    """Reads and validates the recipe file; returns (defaults, apps)."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as error:
        raise RecipeError(f"{path}: cannot read: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise RecipeError(f"{path}: not valid TOML: {error}") from None
    unknown = set(data) - {"defaults", "app"}
    if unknown:
        raise RecipeError(f"{path}: unknown top-level key(s) {', '.join(sorted(unknown))}")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict) or set(defaults) - DEFAULT_KEYS:
        raise RecipeError(f"{path}: [defaults] may only hold {', '.join(sorted(DEFAULT_KEYS))}")
    apps = data.get("app", [])
    if not isinstance(apps, list):
        raise RecipeError(f"{path}: `app` must be an array of tables ([[app]])")
    seen = set()
    for index, app in enumerate(apps):
        where = f"{path}: app #{index + 1}"
        if "name" in app:
            where += f" ({app.get('suite', '?')}/{app['name']})"
        missing = APP_REQUIRED - set(app)
        if missing:
            raise RecipeError(f"{where}: missing {', '.join(sorted(missing))}")
        unknown = set(app) - APP_KEYS
        if unknown:
            raise RecipeError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        for key in ("suite", "name", "dir", "build", "input", "run", "check", "time",
                    "native_time", "native_label", "skip", "note", "cost_kind"):
            if key in app and not isinstance(app[key], str):
                raise RecipeError(f"{where}: `{key}` must be a string")
        for key in ("pass", "fail"):
            if key in app and not (isinstance(app[key], list)
                                   and all(isinstance(p, str) for p in app[key])):
                raise RecipeError(f"{where}: `{key}` must be a list of regular expressions")
        for key in ("pass", "fail", "time", "native_time"):
            patterns = app.get(key, [])
            for pattern in patterns if isinstance(patterns, list) else [patterns]:
                try:
                    compiled = re.compile(pattern, re.MULTILINE)
                except re.error as error:
                    raise RecipeError(f"{where}: `{key}` {pattern!r}: {error}") from None
                if key in ("time", "native_time") and compiled.groups != 1:
                    raise RecipeError(f"{where}: `{key}` must have exactly one group (the seconds)")
        if app.get("cost_kind", cost.HEAVY_KINDS[0]) not in cost.HEAVY_KINDS:
            raise RecipeError(f"{where}: `cost_kind` must be one of "
                              f"{', '.join(repr(k) for k in cost.HEAVY_KINDS)}")
        if "skip" not in app and "run" not in app:
            raise RecipeError(f"{where}: needs `run` (or `skip` with the reason)")
        if "timeout" in app and not (isinstance(app["timeout"], (int, float))
                                     and app["timeout"] > 0):
            raise RecipeError(f"{where}: `timeout` must be a positive number of seconds")
        for table, keys in (("env", None), ("native", NATIVE_KEYS)):
            value = app.get(table)
            if value is None:
                continue
            if not isinstance(value, dict):
                raise RecipeError(f"{where}: `{table}` must be a table")
            if keys is not None and set(value) - keys:
                raise RecipeError(f"{where}: unknown key(s) in `{table}`: "
                                  f"{', '.join(sorted(set(value) - keys))}")
        native = app.get("native")
        if native is not None and not {"dir", "run"} <= set(native):
            raise RecipeError(f"{where}: `native` needs `dir` and `run`")
        if native is not None and "native_time" in app:
            raise RecipeError(f"{where}: `native_time` (read from the app's own output) and a "
                              f"`native` build exclude each other")
        for env in (app.get("env", {}), (native or {}).get("env", {}), defaults.get("env", {})):
            if not all(isinstance(v, (str, int)) for v in env.values()):
                raise RecipeError(f"{where}: environment values must be strings or integers")
        key = (app["suite"], app["name"])
        if key in seen:
            raise RecipeError(f"{where}: defined twice")
        seen.add(key)
    return defaults, apps


def numbers_of(text):
    """The numbers in text, in order, as floats."""
    return [float(token) for token in NUMBER.findall(text)]


def compare_numbers(got, want, rel, absolute):
    """None if got matches want number for number within tolerance, else why not."""
    if len(got) != len(want):
        return f"{len(got)} numbers against {len(want)}"
    for index, (a, b) in enumerate(zip(got, want)):
        if math.isnan(a) or math.isnan(b):
            if not (math.isnan(a) and math.isnan(b)):
                return f"number {index + 1}: {a!r} against {b!r}"
            continue
        if a == b:
            continue
        if abs(a - b) <= absolute or abs(a - b) <= rel * max(abs(a), abs(b)):
            continue
        return f"number {index + 1}: {a!r} against {b!r}"
    return None


def compare_main(argv):
    parser = argparse.ArgumentParser(prog="suites.py compare")
    parser.add_argument("got")
    parser.add_argument("want")
    parser.add_argument("--rel", type=float, default=1e-4)
    parser.add_argument("--abs", type=float, default=0.0, dest="absolute")
    parser.add_argument("--skip-lines", type=int, default=0,
                        help="leave out this many first lines of both files")
    parser.add_argument("--lines", default=None, metavar="REGEX",
                        help="compare only the lines (of both files) that this matches")
    parser.add_argument("--binary", choices=sorted(BINARY_TYPES), default=None,
                        help="the files are arrays of this machine type, not text")
    args = parser.parse_args(argv)
    if args.binary:
        values = []
        for path in (args.got, args.want):
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError as error:
                print(f"compare: cannot read {path}: {error.strerror}")
                return 2
            item = array.array(BINARY_TYPES[args.binary])
            if len(data) % item.itemsize:
                print(f"compare: {path}: {len(data)} bytes is not a whole number of "
                      f"{args.binary} values")
                return 2
            item.frombytes(data)
            values.append(list(item))
        return report_comparison(args, values[0], values[1])
    try:
        keep = re.compile(args.lines) if args.lines else None
    except re.error as error:
        print(f"compare: --lines {args.lines!r}: {error}")
        return 2
    texts = []
    for path in (args.got, args.want):
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = handle.readlines()[args.skip_lines:]
        except OSError as error:
            print(f"compare: cannot read {path}: {error.strerror}")
            return 2
        texts.append("".join(line for line in lines if keep is None or keep.search(line)))
    return report_comparison(args, numbers_of(texts[0]), numbers_of(texts[1]))


def avi_frames(width, height, frames, seed, disks=0, radius=10, noise=32):
    """The frames of `avi`: 8-bit rows, top row first. A smooth pattern (a few sinusoids, with
    bright rings a tracker can follow) plus fixed noise below `noise`, and `disks` dark disks
    of `radius` pixels (cells, for a detector to find) at places fixed by the seed, all drifting
    (t, t / 2) pixels at frame t."""
    grain = bytes(((seed * 7919 + i * 2654435761) >> 13) % max(1, noise)
                  for i in range(width * height))
    place = random.Random(seed)
    centres = [(place.uniform(radius, width - radius), place.uniform(radius, height - radius))
               for _ in range(disks)]
    result = []
    for t in range(frames):
        dx, dy = t, t / 2
        inside = set()
        for cx, cy in centres:
            cx, cy = cx + dx, cy + dy
            for y in range(max(0, int(cy - radius)), min(height, int(cy + radius) + 2)):
                for x in range(max(0, int(cx - radius)), min(width, int(cx + radius) + 2)):
                    if (x - cx) ** 2 + (y - cy) ** 2 <= radius * radius:
                        inside.add(y * width + x)
        rows = bytearray()
        for y in range(height):
            v = (y - dy) / height
            for x in range(width):
                u = (x - dx) / width
                ring = math.sin(40 * math.hypot(u - 0.55, v - 0.6)) * 50
                value = 110 + ring + 30 * math.sin(23 * u + seed) * math.cos(17 * v)
                if y * width + x in inside:
                    value = 20
                rows.append(max(0, min(255, int(value) + grain[y * width + x])))
        result.append(bytes(rows))
    return result


def avi_bytes(width, height, frames):
    """An uncompressed AVI of 8-bit `frames` (bytes of width x height each)."""
    def chunk(tag, data):
        return tag + len(data).to_bytes(4, "little") + data + b"\0" * (len(data) % 2)

    def words(*values):
        return b"".join(v.to_bytes(4, "little") for v in values)

    frame_bytes = width * height
    # AVIMAINHEADER: usec/frame, max bytes/s, padding, flags, frames, initial, streams,
    # buffer size, width, height, reserved.
    avih = words(40000, 25 * frame_bytes, 0, 0, len(frames), 0, 1, frame_bytes, width, height,
                 0, 0, 0, 0)
    # AVISTREAMHEADER: type, handler, flags, priority+language, initial frames, scale, rate,
    # start, length, buffer size, quality, sample size, frame rectangle.
    strh = b"vids" + b"\0\0\0\0" + words(0, 0, 0, 1, 25, 0, len(frames), frame_bytes,
                                           0xFFFFFFFF, 0, 0, 0)
    # BITMAPINFOHEADER: size, width, height, planes and bits (1, 8), compression (BI_RGB),
    # image size, resolution, colours used and important.
    strf = words(40, width, height) + (1).to_bytes(2, "little") + (8).to_bytes(2, "little") \
        + words(0, frame_bytes, 0, 0, 256, 0)
    strl = b"LIST" + (4 + len(chunk(b"strh", strh)) + len(chunk(b"strf", strf))).to_bytes(
        4, "little") + b"strl" + chunk(b"strh", strh) + chunk(b"strf", strf)
    hdrl = b"hdrl" + chunk(b"avih", avih) + strl
    movi = b"movi" + b"".join(chunk(b"00db", frame) for frame in frames)
    body = b"AVI " + chunk(b"LIST", hdrl) + chunk(b"LIST", movi)
    return chunk(b"RIFF", body)


def avi_main(argv):
    parser = argparse.ArgumentParser(prog="suites.py avi")
    parser.add_argument("out")
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--height", type=int, required=True)
    parser.add_argument("--frames", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--disks", type=int, default=0, help="dark disks (cells) to draw")
    parser.add_argument("--radius", type=int, default=10, help="their radius in pixels")
    parser.add_argument("--noise", type=int, default=32, help="noise amplitude (0 to 255)")
    args = parser.parse_args(argv)
    if not (1 <= args.width <= 4096 and 1 <= args.height <= 4096 and 1 <= args.frames <= 1000
            and 0 <= args.disks <= 1000 and 1 <= args.radius <= 1000 and 0 <= args.noise <= 255):
        print("avi: --width and --height must be 1 to 4096, --frames 1 to 1000, --disks 0 to "
              "1000, --radius 1 to 1000, --noise 0 to 255")
        return 2
    data = avi_bytes(args.width, args.height,
                     avi_frames(args.width, args.height, args.frames, args.seed, args.disks,
                                args.radius, args.noise))
    partial = args.out + ".partial"
    try:
        with open(partial, "wb") as handle:
            handle.write(data)
        os.replace(partial, args.out)
    except OSError as error:
        print(f"avi: cannot write {args.out}: {error.strerror}")
        try:
            os.remove(partial)
        except OSError:
            pass
        return 2
    return 0


def report_comparison(args, got, want):
    if not want:
        print(f"compare: {args.want} holds no numbers")
        return 2
    problem = compare_numbers(got, want, args.rel, args.absolute)
    if problem:
        print(f"compare: {args.got} differs from {args.want}: {problem}")
        return 1
    print(f"compare: {len(got)} numbers match (rel {args.rel:g}, abs {args.absolute:g})")
    return 0


def run_step(command, cwd, env, timeout, log_path):
    """Runs command through bash; returns (status or 'timeout', seconds, output text)."""
    start = time.monotonic()
    with open(log_path, "w+b") as log:
        try:
            process = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        except OSError as error:
            return 127, 0.0, f"cannot start bash: {error.strerror}"
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            status = "timeout"
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): the step runs in its own session, so end it too.
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        seconds = time.monotonic() - start
        log.seek(0)
        output = log.read().decode("utf-8", errors="replace")
    return status, seconds, output


def clip(text, limit):
    """text, cut at a word boundary to at most limit characters (marked with an ellipsis)."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


def first_error(output, fallback):
    """The most telling line of a failed step's output."""
    lines = [line.strip() for line in output.splitlines()
             if line.strip() and not NOT_AN_ERROR.search(line)]
    for pattern in ERROR_LINE:
        for line in lines:
            if pattern.search(line) and not line.startswith(("make[", "make:")):
                return clip(line, 240)
    for line in lines:
        if line.startswith("make") and "Error" in line:
            return clip(line, 240)
    return fallback if not lines else f"{fallback}; last line: {clip(lines[-1], 160)}"


def read_profile(path):
    """(kernels launched, launches, thread-instructions, uncounted kernels) of a profile."""
    with open(path, encoding="utf-8") as handle:
        profile = json.load(handle)
    kernels = launches = threads = 0
    uncounted = []
    for kernel in profile.get("kernels", []):
        ran = kernel.get("launches", [])
        if not ran:
            continue
        kernels += 1
        launches += len(ran)
        if not kernel.get("instrumented") or not all(l.get("instrumented") for l in ran):
            uncounted.append(kernel.get("name", "?"))
        for counts in kernel.get("totals", {}).values():
            threads += counts.get("threads", 0)
    return kernels, launches, threads, uncounted


def block_counts(path):
    """Per kernel of a profile: (launches, per-block thread counts, per-block warp counts),
    summed over its launches."""
    with open(path, encoding="utf-8") as handle:
        profile = json.load(handle)
    kernels = {}
    for kernel in profile.get("kernels", []):
        threads, warps = [], []
        for launch in kernel.get("launches", []):
            counts = launch.get("block_counts") or {}
            for total, add in ((threads, counts.get("threads") or []),
                               (warps, counts.get("warps") or [])):
                total.extend([0] * (len(add) - len(total)))
                for index, value in enumerate(add):
                    total[index] += value
        kernels[kernel.get("name", "?")] = (len(kernel.get("launches", [])), threads, warps)
    return kernels


def differing_kernels(profile_a, profile_b):
    """The kernels whose block counts (block_counts) differ between two profiles, sorted."""
    counts_a, counts_b = block_counts(profile_a), block_counts(profile_b)
    return [kernel for kernel in sorted(set(counts_a) | set(counts_b))
            if counts_a.get(kernel) != counts_b.get(kernel)]


def app_profiles(work):
    """{app directory relative to WORK/apps: its profile.json}."""
    root = os.path.join(work, "apps")
    found = {}
    for directory, _, files in os.walk(root):
        if "profile.json" in files:
            found[os.path.relpath(directory, root)] = os.path.join(directory, "profile.json")
    return found


def same_counts_main(argv):
    parser = argparse.ArgumentParser(prog="suites.py same-counts")
    parser.add_argument("work_a")
    parser.add_argument("work_b")
    args = parser.parse_args(argv)
    a, b = app_profiles(args.work_a), app_profiles(args.work_b)
    if not a or not b:
        empty = args.work_a if not a else args.work_b
        print(f"same-counts: no profile under {os.path.join(empty, 'apps')}")
        return 2
    differences, compared = [], 0
    for app in sorted(set(a) | set(b)):
        if app not in a or app not in b:
            differences.append(f"{app}: a profile in only one of the runs")
            continue
        try:
            differing = differing_kernels(a[app], b[app])
        except (OSError, ValueError) as error:
            print(f"same-counts: {app}: unreadable profile: {error}")
            return 2
        compared += 1
        differences.extend(f"{app}: {kernel}: block counts differ" for kernel in differing)
    for line in differences:
        print(line)
    if differences:
        return 1
    print(f"same-counts: {compared} apps, every block's counts equal")
    return 0


def read_kernel_seconds(path):
    with open(path, encoding="utf-8") as handle:
        stats = json.load(handle)
    return sum(k.get("kernel_ns", 0) for k in stats.get("kernels", [])) / 1e9


def time_from(pattern, output):
    match = re.search(pattern, output, re.MULTILINE) if pattern else None
    if not match:
        return None
    try:
        return float(match.group(1))
    except ValueError:
        return None


def environment(base, *overrides):
    env = dict(base)
    for override in overrides:
        for key, value in (override or {}).items():
            env[key] = str(value)
    return env


def app_work(app, context):
    """The app's scratch directory (CF_WORK): its logs, profile and statistics."""
    return os.path.join(context["work"], "apps", app["suite"], app["name"])


def app_environment(app, defaults, context):
    """The environment of every step of the app: the CPU-target prefix first on PATH, the CF_*
    variables, one thread, the context's `env` (e.g. CUDA_FLUX_COUNTERS), then the recipes'.
    With context `keep_ptx`, CUDA_FLUX_KEEP=CF_WORK/keep."""
    work = app_work(app, context)
    base = environment(os.environ, {
        "PATH": f"{context['prefix']}/bin:{context['bin']}:{os.environ.get('PATH', '')}",
        "CUDA_FLUX_TARGET": "cpu", "CF_PREFIX": context["prefix"],
        "CF_SUITE": context["suites"][app["suite"]],
        "CF_WORK": work, "CF_HARNESS": os.path.abspath(__file__),
        "CF_THREADS": context["threads"], "OMP_NUM_THREADS": context["threads"],
        "CUDA_FLUX_CPU_THREADS": context["threads"], "MAKEFLAGS": "-j1",
    }, context.get("env"), defaults.get("env"), app.get("env"))
    if context.get("keep_ptx"):
        base["CUDA_FLUX_KEEP"] = os.path.join(work, "keep")
    return base


def run_app(app, defaults, context):
    """Builds, runs and checks one app; returns its row (a dict)."""
    suite_root = context["suites"][app["suite"]]
    name = f"{app['suite']}/{app['name']}"
    row = {"suite": app["suite"], "app": app["name"], "built": None, "ran": None,
           "correct": None, "kernels": None, "launches": None, "thread_instructions": None,
           "seconds": None, "kernel_seconds": None, "rate": None, "native_seconds": None,
           "native": None, "slowdown": None, "error": None, "note": app.get("note")}
    if "skip" in app:
        row["error"] = f"not run: {app['skip']}"
        return row
    work = app_work(app, context)
    os.makedirs(work, exist_ok=True)
    timeout = app.get("timeout", context["step_timeout"])
    base = app_environment(app, defaults, context)
    if context.get("keep_ptx"):
        # The drivers keep the instrumented PTX here (for `cost`'s ptxas -v), fresh per build.
        shutil.rmtree(base["CUDA_FLUX_KEEP"], ignore_errors=True)
    app_dir = os.path.join(suite_root, app["dir"])
    if not os.path.isdir(app_dir):
        row["built"] = False
        row["error"] = f"no directory {app['dir']} in the {app['suite']} checkout"
        return row

    def step(label, command, cwd, env, limit=timeout):
        status, seconds, output = run_step(command, cwd, env, limit,
                                           os.path.join(work, f"{label}.log"))
        context["log"](f"  {name}: {label}: {status} ({seconds:.1f} s)")
        return status, seconds, output

    native = app.get("native")
    native_error = None
    native_env = environment(base, (native or {}).get("env"))
    native_dir = os.path.join(suite_root, native["dir"]) if native else None
    if "build" in app:
        status, _, output = step("build", app["build"], app_dir, base)
        row["built"] = status == 0
        if status != 0:
            row["error"] = (f"build: timeout after {timeout:g} s" if status == "timeout"
                            else "build: " + first_error(output, f"exit status {status}"))
            return row
    else:
        row["built"] = True
    if "input" in app:
        status, _, output = step("input", app["input"], app_dir, base)
        if status != 0:
            row["ran"] = False
            row["error"] = "input: " + first_error(output, f"exit status {status}")
            return row
    if native:
        row["native"] = native.get("label", native["dir"])
        status = 0
        if "build" in native:
            status, _, output = step("native-build", native["build"], native_dir, native_env)
        if status == 0:
            status, seconds, output = step("native-run", native["run"], native_dir, native_env)
        if status == 0:
            measured = time_from(native.get("time"), output)
            row["native_seconds"] = measured if measured is not None else seconds
        else:
            native_error = first_error(output, f"exit status {status}")
            row["native"] += f" (failed: {native_error})"
    profile = os.path.join(work, "profile.json")
    stats = os.path.join(work, "cpu-stats.json")
    for stale in (profile, stats):
        if os.path.exists(stale):
            os.remove(stale)
    run_env = environment(base, {"CUDA_FLUX_OUTPUT": profile, "CUDA_FLUX_CPU_STATS": stats})
    status, seconds, output = step("run", app["run"], app_dir, run_env)
    row["ran"] = status == 0
    measured = time_from(app.get("time"), output)
    row["seconds"] = measured if measured is not None else seconds
    if os.path.exists(profile):
        try:
            kernels, launches, threads, uncounted = read_profile(profile)
        except (OSError, ValueError, AttributeError) as error:
            row["ran"] = False
            row["error"] = f"profile unreadable: {error}"
            return row
        row.update(kernels=kernels, launches=launches, thread_instructions=threads)
        if uncounted:
            row["error"] = f"launches not counted: {', '.join(uncounted[:3])}"
    if os.path.exists(stats):
        try:
            row["kernel_seconds"] = read_kernel_seconds(stats)
        except (OSError, ValueError):
            pass
    if row["thread_instructions"] and row["kernel_seconds"]:
        row["rate"] = row["thread_instructions"] / row["kernel_seconds"]
    if status != 0:
        row["error"] = (f"run: timeout after {timeout:g} s" if status == "timeout"
                        else "run: " + first_error(output, f"exit status {status}"))
        row["seconds"] = seconds
        return row
    if app.get("native_time"):
        row["native"] = app.get("native_label", "the app's own CPU version")
        row["native_seconds"] = time_from(app["native_time"], output)
    if row["native_seconds"] and row["seconds"]:
        row["slowdown"] = row["seconds"] / row["native_seconds"]
    if app.get("expect_kernels", True) and not row["launches"]:
        row["correct"] = False
        row["error"] = row["error"] or "no profile written (no kernel launch recorded)"
        return row
    problems = []
    for pattern in app.get("fail", []):
        match = re.search(pattern, output, re.MULTILINE)
        if match:
            line = output[:match.start()].count("\n")
            problems.append(f"check: {clip(output.splitlines()[line].strip(), 240)}")
    for pattern in app.get("pass", []):
        if not re.search(pattern, output, re.MULTILINE):
            problems.append(f"check: no line matches {pattern!r}")
    if "check" in app:
        check_status, _, check_output = step("check", app["check"], app_dir, run_env)
        if check_status != 0:
            problems.append("check: " + first_error(check_output, f"exit status {check_status}"))
    if not app.get("fail") and not app.get("pass") and "check" not in app:
        row["correct"] = None  # nothing to check against
    else:
        row["correct"] = not problems
    if problems and native_error:
        problems.insert(0, f"native version failed: {native_error}")
    if problems:
        row["error"] = problems[0]
    return row


def machine_description():
    model = ""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    os_name = ""
    try:
        with open("/etc/os-release", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return (f"{model or platform.processor()}, {os.cpu_count()} cores, "
            f"{os_name or platform.system()}")


def git_commit(path):
    try:
        result = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True,
                                text=True)
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def fmt(value, kind):
    if value is None:
        return "-"
    if kind == "bool":
        return "yes" if value else "**no**"
    if kind == "int":
        return f"{value:,}"
    if kind == "seconds":
        return f"{value:.3g}" if value < 10 else f"{value:,.0f}"
    if kind == "rate":
        return f"{value / 1e6:.0f} M"
    if kind == "ratio":
        return f"{value:.3g}x" if value < 100 else f"{value:,.0f}x"
    return str(value)


def summary(rows):
    considered = [r for r in rows if r["built"] is not None]
    counts = {
        "apps": len(rows),
        "attempted": len(considered),
        "built": sum(1 for r in rows if r["built"]),
        "ran": sum(1 for r in rows if r["ran"]),
        "correct": sum(1 for r in rows if r["correct"]),
        "unchecked": sum(1 for r in rows if r["ran"] and r["correct"] is None),
        "thread_instructions": sum(r["thread_instructions"] or 0 for r in rows),
    }
    slowdowns = [r["slowdown"] for r in rows if r["slowdown"] and r["correct"]]
    if slowdowns:
        counts["slowdown_geomean"] = math.exp(sum(math.log(s) for s in slowdowns) / len(slowdowns))
        counts["slowdown_min"] = min(slowdowns)
        counts["slowdown_max"] = max(slowdowns)
        counts["slowdown_apps"] = len(slowdowns)
    return counts


def write_report(rows, context, out_path):
    totals = summary(rows)
    lines = [f"# {context['title']}", ""]
    lines.append(f"Date: {context['date']}. Machine: {context['machine']}. cuda-flux commit "
                 f"`{context['commit']}` (binaries: `{context['bin']}`). Load average (1 min) "
                 f"at start {context['load_start']:.1f}, at end {context['load_end']:.1f}.")
    lines.append("")
    for update in context.get("updates", []):
        lines.append(f"Re-run with `--update` on {update['date']} at commit `{update['commit']}` "
                     f"(load {update['load']:.1f}): {', '.join(update['apps'])}.")
        lines.append("")
    lines.append("Suite checkouts (copied, not modified; none is committed here):")
    lines.append("")
    for suite, path in sorted(context["suite_args"].items()):
        lines.append(f"- {suite}: commit `{git_commit(path) or 'unknown (not a git checkout)'}`")
    lines.append("")
    recipes = os.path.relpath(context["recipes"], ROOT)
    lines.append(f"Harness: `benchmarks/suites.py` with `{recipes}`, CPU target through "
                 f"`cuda-flux-nvcc --cuda-flux-prefix`, "
                 f"`CUDA_FLUX_CPU_THREADS={context['threads']}` and "
                 f"`OMP_NUM_THREADS={context['threads']}`, {context['timeout']:g} s per step.")
    lines.append("")
    lines.append(f"Summary: {totals['apps']} apps in the recipes, {totals['attempted']} attempted, "
                 f"{totals['built']} built, {totals['ran']} ran to completion, {totals['correct']} "
                 f"correct by their check ({totals['unchecked']} ran without a check); "
                 f"{totals['thread_instructions']:,} thread-instructions counted.")
    if "slowdown_geomean" in totals:
        lines.append(f"Slowdown against the native version over {totals['slowdown_apps']} correct "
                     f"apps: geometric mean {fmt(totals['slowdown_geomean'], 'ratio')}, from "
                     f"{fmt(totals['slowdown_min'], 'ratio')} to "
                     f"{fmt(totals['slowdown_max'], 'ratio')}.")
    lines.append("")
    lines.append("Columns: *seconds* is the app's run (its own timer where the recipe names one, "
                 "else wall time); *kernel s* the interpreter's time in kernels "
                 "(`CUDA_FLUX_CPU_STATS`, instrumented clones); *rate* the profile's "
                 "thread-instructions (the app's own instructions, counter code excluded) per "
                 "kernel second; *slowdown* seconds / native seconds on the same input.")
    lines.append("")
    header = ["suite", "app", "built", "ran", "correct", "kernels", "launches",
              "thread-instr", "seconds", "kernel s", "rate (thr-instr/s)", "native s",
              "slowdown", "first error / cause"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for r in rows:
        cause = r["error"] or ""
        if r["note"]:
            cause = f"{cause}; {r['note']}" if cause else r["note"]
        cause = cause.replace("|", "\\|")
        correct = r["correct"]
        correct_text = ("unchecked" if r["ran"] and correct is None else fmt(correct, "bool"))
        cells = [r["suite"], r["app"], fmt(r["built"], "bool"), fmt(r["ran"], "bool"),
                 correct_text, fmt(r["kernels"], "int"), fmt(r["launches"], "int"),
                 fmt(r["thread_instructions"], "int"), fmt(r["seconds"], "seconds"),
                 fmt(r["kernel_seconds"], "seconds"), fmt(r["rate"], "rate"),
                 fmt(r["native_seconds"], "seconds"), fmt(r["slowdown"], "ratio"), cause]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    natives = sorted({r["native"] for r in rows if r["native"]})
    if natives:
        lines.append("Native versions: " + "; ".join(f"`{n}`" for n in natives) + ".")
        lines.append("")
    text = "\n".join(lines)
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, out_path)
    json_path = os.path.splitext(out_path)[0] + ".json"
    with open(json_path + ".tmp", "w", encoding="utf-8") as handle:
        kept = {k: v for k, v in context.items() if k not in ("log", "step_timeout")}
        json.dump({"context": kept, "summary": totals, "apps": rows}, handle, indent=1)
    os.replace(json_path + ".tmp", json_path)


def updated_context(previous, apps, chosen, context):
    """The rows of a previous table that the apps run now do not replace (and that the recipes
    still name), and the context that describes both runs (the first run's, plus the update's
    commit, date and apps)."""
    now = {(app["suite"], app["name"]) for app in chosen}
    named = {(app["suite"], app["name"]) for app in apps}
    kept = [row for row in previous["apps"]
            if (row["suite"], row["app"]) not in now and (row["suite"], row["app"]) in named]
    first = dict(previous["context"])
    first["suite_args"] = {**first.get("suite_args", {}), **context["suite_args"]}
    updates = list(first.get("updates", []))
    updates.append({"date": context["date"], "commit": context["commit"],
                    "load": context["load_start"],
                    "apps": sorted(f"{suite}/{name}" for suite, name in now)})
    first["updates"] = updates
    for key in ("log", "prefix", "suites", "work", "step_timeout"):
        first[key] = context[key]
    return kept, first


def copy_suite(source, destination):
    if os.path.exists(destination):
        shutil.rmtree(destination)
    shutil.copytree(source, destination, symlinks=True, ignore=shutil.ignore_patterns(".git"))


def interrupted(signum, _frame):
    raise SystemExit(128 + signum)


class SetupError(Exception):
    """Arguments the harness cannot run with, with the reason."""


def add_common_arguments(parser):
    """The arguments of both the table and `cost`: which suites and apps, where and how."""
    parser.add_argument("--suite", action="append", default=[], metavar="NAME=PATH",
                        help="a local checkout of a suite named in the recipes (repeatable)")
    parser.add_argument("--recipes", default=os.path.join(HERE, "suites.toml"))
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME",
                        help="apps to run: NAME or SUITE/NAME")
    parser.add_argument("--skip", nargs="+", default=[], metavar="NAME")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per step (default: the recipes' [defaults], else 120); "
                             "a recipe's own limit still wins")
    parser.add_argument("--bin", default=os.path.join(ROOT, "target", "release"),
                        help="directory of cuda-flux-nvcc and the runtime")
    parser.add_argument("--work-dir", default=None, help="default: a new temporary directory")
    parser.add_argument("--out", default=None, help="Markdown report (JSON next to it)")
    parser.add_argument("--reuse", action="store_true",
                        help="keep an existing copy of each suite in the work directory")


def log(message):
    print(message, file=sys.stderr, flush=True)


def copy_suites(suites, work, names, reuse):
    """{suite: its copy under WORK/src}, copied from the checkouts `suites` (kept with `reuse`)."""
    copies = {}
    for name in sorted(names):
        copies[name] = os.path.join(work, "src", name)
        if not (reuse and os.path.isdir(copies[name])):
            log(f"suites: copying {suites[name]} to {copies[name]}")
            copy_suite(suites[name], copies[name])
    return copies


def setup(args, title, threads, copy=True):
    """Loads the recipes, selects the apps, makes the CPU-target prefix and (with `copy`) copies
    the suites into the work directory; returns (defaults, apps, chosen apps, context). Raises
    SetupError."""
    try:
        defaults, apps = load_recipes(args.recipes)
    except RecipeError as error:
        raise SetupError(str(error)) from None
    suites = {}
    for spec in args.suite:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SetupError(f"--suite {spec!r}: expected NAME=PATH")
        if not os.path.isdir(path):
            raise SetupError(f"--suite {name}: {path} is not a directory")
        suites[name] = os.path.abspath(path)
    known = {app["suite"] for app in apps}
    for name in suites:
        if name not in known:
            raise SetupError(f"no recipe names suite {name!r} (recipes have: "
                             f"{', '.join(sorted(known))})")
    nvcc = os.path.join(os.path.abspath(args.bin), "cuda-flux-nvcc")
    if not os.access(nvcc, os.X_OK):
        raise SetupError(f"{nvcc} is missing: run cargo build --release --workspace first "
                         f"(or give --bin)")

    def selected(app):
        names = {app["name"], f"{app['suite']}/{app['name']}"}
        if app["suite"] not in suites:
            return False
        if args.only and not names & set(args.only):
            return False
        return not names & set(args.skip)

    chosen = [app for app in apps if selected(app)]
    if not chosen:
        raise SetupError("no app selected (give --suite NAME=PATH for the suites to run)")
    work = os.path.abspath(args.work_dir) if args.work_dir else None
    if work is None:
        import tempfile
        work = tempfile.mkdtemp(prefix="cuda-flux-suites-")
    os.makedirs(work, exist_ok=True)
    prefix = os.path.join(work, "prefix")
    status = subprocess.run([nvcc, f"--cuda-flux-prefix={prefix}", "--cuda-flux-target=cpu"],
                            capture_output=True, text=True)
    if status.returncode != 0:
        raise SetupError(f"cuda-flux-nvcc --cuda-flux-prefix failed: "
                         f"{(status.stderr or status.stdout).strip()}")
    names = {app["suite"] for app in chosen}
    copies = copy_suites(suites, work, names, args.reuse) if copy else {}
    step_timeout = args.timeout if args.timeout is not None else defaults.get("timeout", 120.0)
    context = {
        "title": title, "date": datetime.date.today().isoformat(),
        "machine": machine_description(), "commit": git_commit(ROOT) or "unknown",
        "bin": os.path.abspath(args.bin), "prefix": prefix, "suites": copies,
        "suite_args": {name: suites[name] for name in sorted(names)}, "work": work,
        "threads": str(threads),
        # Seconds per step of this run; "timeout", what the table says, stays the first run's
        # when it is updated.
        "step_timeout": step_timeout, "timeout": step_timeout,
        "recipes": os.path.abspath(args.recipes), "load_start": os.getloadavg()[0],
        "load_end": os.getloadavg()[0], "log": log,
    }
    return defaults, apps, chosen, context


def main(argv):
    signal.signal(signal.SIGTERM, interrupted)
    if argv and argv[0] == "compare":
        return compare_main(argv[1:])
    if argv and argv[0] == "avi":
        return avi_main(argv[1:])
    if argv and argv[0] == "same-counts":
        return same_counts_main(argv[1:])
    if argv and argv[0] == "cost":
        return cost_main(argv[1:])
    if argv and argv[0] == "reference":
        import suites_reference
        return suites_reference.main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--threads", type=int, default=1,
                        help="CUDA_FLUX_CPU_THREADS and OMP_NUM_THREADS (default 1)")
    parser.add_argument("--title", default="Suites on the CPU target")
    parser.add_argument("--update", action="store_true",
                        help="keep the rows of the apps not run now from the JSON next to --out "
                             "(re-run some apps and refresh their rows)")
    args = parser.parse_args(argv)
    try:
        defaults, apps, chosen, context = setup(args, args.title, args.threads)
    except SetupError as error:
        print(f"suites: {error}", file=sys.stderr)
        return 2
    out_path = args.out or os.path.join(
        HERE, "results", f"{datetime.date.today().isoformat()}-suites-cpu.md")
    kept = []
    json_path = os.path.splitext(out_path)[0] + ".json"
    if args.update and os.path.exists(json_path):
        try:
            with open(json_path, encoding="utf-8") as handle:
                previous = json.load(handle)
            kept, context = updated_context(previous, apps, chosen, context)
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(f"suites: --update: cannot use {json_path}: {error}", file=sys.stderr)
            return 2
    order = {(app["suite"], app["name"]): index for index, app in enumerate(apps)}
    rows = []
    for app in chosen:
        log(f"suites: {app['suite']}/{app['name']}")
        row = run_app(app, defaults, context)
        rows.append(row)
        if "updates" not in context:  # an update keeps the first run's figures
            context["load_end"] = os.getloadavg()[0]
        table = sorted(kept + rows, key=lambda r: order.get((r["suite"], r["app"]), len(order)))
        write_report(table, context, out_path)  # rewritten after each app: partial runs count
        log(f"  -> built {row['built']} ran {row['ran']} correct {row['correct']}"
            f"{'; ' + row['error'] if row['error'] else ''}")
    log(f"suites: wrote {out_path}")
    totals = summary(rows)
    log(f"suites: {totals['built']} built, {totals['ran']} ran, {totals['correct']} correct "
        f"of {len(rows)}")
    return 0


def cost_program(app, defaults, context):
    """cost.measure's description of an app that run_app built (keeping its PTX) and checked:
    its recipe's run command, in its directory, in its environment."""
    return {"name": f"{app['suite']}/{app['name']}", "kind": "suite",
            "cwd": os.path.join(context["suites"][app["suite"]], app["dir"]),
            "run": ["bash", "-c", app["run"]],
            "keep": os.path.join(app_work(app, context), "keep"),
            "ptxas": os.path.join(context["bin"], "cuda-flux-ptxas"),
            "env": app_environment(app, defaults, context)}


def not_measured(app, row):
    """cost's record of an app that did not run correctly, with why."""
    if row["error"]:
        why = row["error"]
    elif row["ran"] and row["correct"] is None:
        why = "ran without a check (nothing says its result is right)"
    else:
        why = "did not run"
    return {"name": f"{app['suite']}/{app['name']}", "kind": "suite", "passed": False,
            "notes": [why]}


def block_count_check(name, profiles, placements):
    """Whether every block's counts (block_counts) are equal under all placements: the kernels
    whose counts differ from the first placement's, for an app profiled under each."""
    differing = set()
    for placement in placements[1:]:
        differing.update(differing_kernels(profiles[placements[0]], profiles[placement]))
    return {"program": name, "differing_kernels": sorted(differing)}


def cost_appendix(doc):
    """The Markdown `suites.py cost` adds to cost.render_markdown: where the counter code is,
    the placements compared, the block-count check."""
    lines = ["", "## Where the counter code is", "",
             f"The kernels with the most counter-code warp instructions under `{doc['placement']}`"
             " (clone - original), with their share of all counter code measured:", ""]
    lines += cost.render_ranking(cost.counter_code_ranking(doc["programs"]))
    lines.append("")
    if doc.get("comparison"):
        lines += ["## Placements compared", ""]
        lines += cost.render_comparison(doc["comparison"])
        checks = doc.get("block_counts", [])
        differing = [c for c in checks if c["differing_kernels"]]
        lines.append(f"Every block's thread and warp counts (summed over launches, from the "
                     f"profile of the checked run) are equal under all placements in "
                     f"{len(checks) - len(differing)} of the {len(checks)} apps profiled under "
                     f"each" + ("; they differ in " + "; ".join(
                         f"{c['program']} ({', '.join(c['differing_kernels'][:3])})"
                         for c in differing) if differing else "") + ".")
        lines.append("")
    return "\n".join(lines)


def cost_main(argv):
    parser = argparse.ArgumentParser(
        prog="suites.py cost",
        description="The counter code's cost (benchmarks/cost.py's figures) on suite apps: "
                    "each app built by its recipe, checked once, then measured with cost.py.")
    add_common_arguments(parser)
    parser.add_argument("--runs", type=int, default=3,
                        help="runs per app and way, instrumented and original (default 3)")
    parser.add_argument("--counters", nargs="+", default=["derived"], metavar="PLACEMENT",
                        help="CUDA_FLUX_COUNTERS at build time, one build per placement; the "
                             "first is the report's, the others are compared with it "
                             "(default: derived)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    if args.runs < 1:
        print("suites cost: --runs must be at least 1", file=sys.stderr)
        return 2
    if len(set(args.counters)) != len(args.counters):
        print("suites cost: --counters names a placement twice", file=sys.stderr)
        return 2
    if not shutil.which("ptxas"):
        print("suites cost: ptxas not found on PATH (CUDA 11.8: scripts/setup.sh installs it)",
              file=sys.stderr)
        return 2
    try:
        defaults, _, chosen, context = setup(args, args.title, 1, copy=False)
    except SetupError as error:
        print(f"suites cost: {error}", file=sys.stderr)
        return 2
    # Each placement builds in a copy of its own: a recipe that builds incrementally (`make`
    # without `clean`) would otherwise keep the first placement's objects.
    contexts = {}
    for placement in args.counters:
        work = os.path.join(context["work"], placement)
        contexts[placement] = dict(
            context, work=work, env={"CUDA_FLUX_COUNTERS": placement}, keep_ptx=True,
            suites=copy_suites(context["suite_args"], work, context["suite_args"], args.reuse))
    out_path = args.out or os.path.join(
        HERE, "results", f"{datetime.date.today().isoformat()}-cost-suites-cpu.md")
    title = args.title or "apps of " + ", ".join(sorted(context["suite_args"]))
    command = "benchmarks/suites.py cost " + " ".join(shlex.quote(a) for a in argv)
    kinds = {f"{app['suite']}/{app['name']}": app["cost_kind"] for app in chosen
             if "cost_kind" in app}
    placements = args.counters
    started, load_start = time.monotonic(), cost.load_average()
    records = {placement: [] for placement in placements}
    checks = []
    for app in chosen:
        name = f"{app['suite']}/{app['name']}"
        profiles = {}
        for placement in placements:
            placed = contexts[placement]
            log(f"suites cost: {name} ({placement})")
            row = run_app(app, defaults, placed)
            if row["correct"]:
                work = os.path.join(app_work(app, placed), "cost")
                os.makedirs(work, exist_ok=True)
                record = cost.measure(cost_program(app, defaults, placed), args.runs,
                                      app.get("timeout", context["step_timeout"]), work)
                profiles[placement] = os.path.join(app_work(app, placed), "profile.json")
            else:
                record = not_measured(app, row)
            records[placement].append(record)
            log(f"  -> {'measured' if record['passed'] else 'not measured'}"
                f"{'' if record['passed'] else ': ' + '; '.join(record['notes'])[:300]}")
        if len(placements) > 1 and len(profiles) == len(placements):
            try:
                checks.append(block_count_check(name, profiles, placements))
            except (OSError, ValueError) as error:
                checks.append({"program": name, "differing_kernels": [f"unreadable: {error}"]})
        doc = cost.document(records[placements[0]], title, command, args.runs, started,
                            load_start, kinds=kinds)
        doc["placement"] = placements[0]
        doc["suites"] = {suite: git_commit(path) for suite, path in
                         sorted(context["suite_args"].items())}
        doc["preamble"] = [
            f"Apps: {len(chosen)} selected from `{os.path.relpath(context['recipes'], ROOT)}`, "
            "built from local checkouts of the suites (copied; none is committed here: "
            + ", ".join(f"{suite} commit `{commit or 'unknown'}`"
                        for suite, commit in doc["suites"].items())
            + "). Each app is built by its recipe through the CPU-target prefix with "
            f"`CUDA_FLUX_COUNTERS={placements[0]}` and `CUDA_FLUX_KEEP` (the instrumented PTX, "
            "for `ptxas -v`), run and checked once as `benchmarks/suites.py` does (the "
            "suite's own check or a comparison with its CPU version); only the apps found "
            "correct are measured, with the recipe's run command and environment."
            + (" The same apps built with " + ", ".join(f"`CUDA_FLUX_COUNTERS={p}`"
                                                       for p in placements[1:])
               + " are compared below." if len(placements) > 1 else ""),
            "Kinds of kernel-heavy code (the recipes' `cost_kind`): " + (", ".join(
                f"{name} ({kind})" for name, kind in kinds.items()) or "none") + ".",
        ]
        if len(placements) > 1:
            for placement in placements[1:]:
                doc.setdefault("placements", {})[placement] = {
                    "summary": cost.summarize(records[placement], kinds=kinds),
                    "programs": records[placement]}
            doc["comparison"] = cost.compare_placements(records)
            doc["block_counts"] = checks
        cost.write_document(doc, out_path, cost_appendix(doc))  # after each app: partial runs count
    figures = doc["summary"]
    expansion = figures["expansion"]
    log(f"suites cost: {figures['programs_passed']} of {figures['programs']} apps measured, "
        f"{figures['kernels']} kernels; expansion geomean {cost.fmt(expansion['geomean'])}x "
        f"worst {cost.fmt(expansion['worst'])}x; counter atomics/1k aggregate "
        f"{cost.fmt(figures['counter_atomics_per_1k']['aggregate'], 1)}; wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
