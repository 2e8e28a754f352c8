"""Reference results computed by the suites harness itself, for apps that have no check of their
own and no CPU version to compare with (`suites.py reference KIND ...`). Each is the textbook
computation the app documents, written independently of the app's code, in double precision;
the recipe compares the app's output with it through `suites.py compare` (with a tolerance for
the app's single precision and its printed digits). python3 standard library only.

    reference linear-system IN OUT
        IN: whitespace-separated numbers: n, the n x n matrix A (row by row), the n values of b
        (Rodinia gaussian's input file). OUT: the solution x of A x = b, one value a line, by
        Gaussian elimination without pivoting (as the app: row t's multiple a[i][t] / a[t][t]
        taken from every row i > t) and back substitution. Without pivoting, give it a matrix
        that needs none (diagonally dominant).
    reference hotspot ROWS COLS ITERATIONS TEMP POWER OUT
        HotSpot's transient thermal model (Rodinia hotspot, its CUDA version's constants: a
        16 mm x 16 mm chip 0.5 mm thick, time step PRECISION / max_slope): ITERATIONS explicit
        steps of T += step / Cap * (P + (T_n + T_s - 2T) / Ry + (T_e + T_w - 2T) / Rx
        + (80 - T) / Rz), a neighbour outside the grid being the cell itself. TEMP and POWER:
        ROWS x COLS values, one a line. OUT: `index<TAB>temperature` lines, like the app's.
    reference kmeans K THRESHOLD IN OUT
        Lloyd's k-means (Rodinia kmeans): the first K points are the initial centres; each
        round assigns every point to its nearest centre (squared Euclidean distance, the lower
        index on a tie), counts the points whose centre changed, and moves each centre with
        points to their mean; it stops after a round that changed THRESHOLD points or fewer,
        or after 501 rounds. IN: one point a line, `id f1 f2 ...`. OUT: `iterated N times`,
        then `i: c1 c2 ...` per centre, like the app's output with -o.
"""

import math
import os

HOTSPOT_CHIP_SIDE = 0.016  # metres (chip_height and chip_width)
HOTSPOT_CHIP_THICKNESS = 0.0005  # metres (t_chip)
HOTSPOT_MAX_POWER_DENSITY = 3.0e6  # MAX_PD, W/m^3
HOTSPOT_PRECISION = 0.001  # PRECISION: the required precision of the temperatures
HOTSPOT_SPECIFIC_HEAT = 1.75e6  # SPEC_HEAT_SI, J/(m^3 K) of silicon
HOTSPOT_CONDUCTIVITY = 100.0  # K_SI, W/(m K) of silicon
HOTSPOT_FACTOR_CHIP = 0.5  # FACTOR_CHIP: capacitance fitting factor
HOTSPOT_AMBIENT = 80.0  # amb_temp

KMEANS_MAX_ROUNDS = 501  # Rodinia: `while (delta > threshold && loop++ < 500)`


class ReferenceInputError(Exception):
    """Input a reference cannot be computed from, with the reason."""


def read_numbers(path):
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise ReferenceInputError(f"cannot read {path}: {error.strerror}") from None
    try:
        return [float(token) for token in text.split()]
    except ValueError as error:
        raise ReferenceInputError(f"{path}: not a list of numbers ({error})") from None


def linear_system(numbers):
    """The solution of the system `n, A, b` given as a flat list of numbers (Gaussian
    elimination without pivoting)."""
    if not numbers or numbers[0] != int(numbers[0]) or numbers[0] < 1:
        raise ReferenceInputError("the first number must be the size n (a positive integer)")
    n = int(numbers[0])
    if len(numbers) < 1 + n * n + n:
        raise ReferenceInputError(f"n = {n} needs {n * n + n} numbers after it, "
                             f"found {len(numbers) - 1}")
    a = [list(numbers[1 + i * n:1 + (i + 1) * n]) for i in range(n)]
    b = list(numbers[1 + n * n:1 + n * n + n])
    for t in range(n - 1):
        pivot_row = a[t]
        if pivot_row[t] == 0:
            raise ReferenceInputError(f"zero pivot in row {t + 1}: the matrix needs pivoting")
        for i in range(t + 1, n):
            row = a[i]
            factor = row[t] / pivot_row[t]
            for j in range(t, n):
                row[j] -= factor * pivot_row[j]
            b[i] -= factor * b[t]
    x = [0.0] * n
    for i in reversed(range(n)):
        if a[i][i] == 0:
            raise ReferenceInputError(f"zero pivot in row {i + 1}: the matrix is singular")
        x[i] = (b[i] - sum(a[i][j] * x[j] for j in range(i + 1, n))) / a[i][i]
    return x


def hotspot(rows, cols, iterations, temperatures, powers):
    """The temperatures after `iterations` steps (row-major lists of rows * cols values)."""
    if rows < 1 or cols < 1 or iterations < 0:
        raise ReferenceInputError("rows and columns must be positive, iterations not negative")
    if len(temperatures) != rows * cols or len(powers) != rows * cols:
        raise ReferenceInputError(f"{rows} x {cols} cells need {rows * cols} temperatures and "
                             f"powers, found {len(temperatures)} and {len(powers)}")
    grid_height = HOTSPOT_CHIP_SIDE / rows
    grid_width = HOTSPOT_CHIP_SIDE / cols
    cap = (HOTSPOT_FACTOR_CHIP * HOTSPOT_SPECIFIC_HEAT * HOTSPOT_CHIP_THICKNESS
           * grid_width * grid_height)
    rx = grid_width / (2.0 * HOTSPOT_CONDUCTIVITY * HOTSPOT_CHIP_THICKNESS * grid_height)
    ry = grid_height / (2.0 * HOTSPOT_CONDUCTIVITY * HOTSPOT_CHIP_THICKNESS * grid_width)
    rz = HOTSPOT_CHIP_THICKNESS / (HOTSPOT_CONDUCTIVITY * grid_height * grid_width)
    max_slope = HOTSPOT_MAX_POWER_DENSITY / (HOTSPOT_FACTOR_CHIP * HOTSPOT_CHIP_THICKNESS
                                             * HOTSPOT_SPECIFIC_HEAT)
    step = HOTSPOT_PRECISION / max_slope
    step_by_cap = step / cap
    t = [list(temperatures[r * cols:(r + 1) * cols]) for r in range(rows)]
    p = [list(powers[r * cols:(r + 1) * cols]) for r in range(rows)]
    for _ in range(iterations):
        new = []
        for r in range(rows):
            north, here, south = t[max(r - 1, 0)], t[r], t[min(r + 1, rows - 1)]
            power = p[r]
            row = []
            for c in range(cols):
                centre = here[c]
                west = here[max(c - 1, 0)]
                east = here[min(c + 1, cols - 1)]
                row.append(centre + step_by_cap * (
                    power[c] + (south[c] + north[c] - 2.0 * centre) / ry
                    + (east + west - 2.0 * centre) / rx + (HOTSPOT_AMBIENT - centre) / rz))
            new.append(row)
        t = new
    return [value for row in t for value in row]


def read_points(path):
    points = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                fields = line.split()
                if not fields:
                    continue
                try:
                    points.append([float(f) for f in fields[1:]])
                except ValueError:
                    raise ReferenceInputError(f"{path}:{number}: not `id f1 f2 ...`") from None
                if len(points[-1]) != len(points[0]) or not points[-1]:
                    raise ReferenceInputError(f"{path}:{number}: {len(points[-1])} features, "
                                         f"the first point has {len(points[0])}")
    except OSError as error:
        raise ReferenceInputError(f"cannot read {path}: {error.strerror}") from None
    return points


def kmeans(points, k, threshold):
    """(centres, rounds) of Lloyd's k-means started from the first k points."""
    if not 1 <= k <= len(points):
        raise ReferenceInputError(f"k = {k} with {len(points)} points")
    centres = [list(p) for p in points[:k]]
    membership = [-1] * len(points)
    rounds = 0
    while True:
        rounds += 1
        changed = 0
        sums = [[0.0] * len(points[0]) for _ in range(k)]
        counts = [0] * k
        for index, point in enumerate(points):
            best, best_distance = 0, math.inf
            for c, centre in enumerate(centres):
                distance = sum((x - y) * (x - y) for x, y in zip(point, centre))
                if distance < best_distance:
                    best, best_distance = c, distance
            if membership[index] != best:
                changed += 1
                membership[index] = best
            counts[best] += 1
            sums[best] = [s + x for s, x in zip(sums[best], point)]
        for c in range(k):
            if counts[c]:
                centres[c] = [s / counts[c] for s in sums[c]]
        if changed <= threshold or rounds >= KMEANS_MAX_ROUNDS:
            return centres, rounds


def write_lines(path, lines):
    """Writes lines to path whole or not at all (through path.partial)."""
    partial = path + ".partial"
    try:
        with open(partial, "w", encoding="utf-8") as handle:
            handle.writelines(line + "\n" for line in lines)
        os.replace(partial, path)
    except OSError as error:
        try:
            os.remove(partial)
        except OSError:
            pass
        raise ReferenceInputError(f"cannot write {path}: {error.strerror}") from None


def main(argv):
    """`suites.py reference KIND ...`: 0 when written, 2 (with one line) on bad input."""
    usage = ("usage: suites.py reference linear-system IN OUT | hotspot ROWS COLS ITERATIONS "
             "TEMP POWER OUT | kmeans K THRESHOLD IN OUT")
    if not argv:
        print(usage)
        return 2
    kind, args = argv[0], argv[1:]
    try:
        if kind == "linear-system" and len(args) == 2:
            x = linear_system(read_numbers(args[0]))
            write_lines(args[1], [f"{v:.9g}" for v in x])
            print(f"reference: linear system of {len(x)} unknowns solved")
        elif kind == "hotspot" and len(args) == 6:
            try:
                rows, cols, iterations = (int(v) for v in args[:3])
            except ValueError:
                raise ReferenceInputError("ROWS, COLS and ITERATIONS must be integers") from None
            result = hotspot(rows, cols, iterations, read_numbers(args[3]),
                             read_numbers(args[4]))
            write_lines(args[5], [f"{i}\t{v:.9g}" for i, v in enumerate(result)])
            print(f"reference: hotspot, {rows} x {cols} cells, {iterations} steps")
        elif kind == "kmeans" and len(args) == 4:
            try:
                k, threshold = int(args[0]), float(args[1])
            except ValueError:
                raise ReferenceInputError("K must be an integer and THRESHOLD a number") from None
            centres, rounds = kmeans(read_points(args[2]), k, threshold)
            write_lines(args[3], [f"iterated {rounds} times"]
                        + [f"{i}: " + " ".join(f"{v:.6f}" for v in c)
                           for i, c in enumerate(centres)])
            print(f"reference: kmeans, {k} centres after {rounds} rounds")
        else:
            print(usage)
            return 2
    except ReferenceInputError as error:
        print(f"reference: {error}")
        return 2
    return 0
