// induction_loops.cu — loops whose trip counts cuda-flux reads off a 64-bit variable the
// compiler steps by a constant each trip (a pointer, a 64-bit index), instead of counting
// every trip (ARCHITECTURE.md, "Counter placement", induction counters): a row walked
// forwards (step 4), an array of 12-byte structs (step 12: odd part 3), a row walked
// backwards (negative step), a loop re-entered once per outer trip, a uniform loop with a
// second exit before the step, and loops whose trip count is the thread's own (lanes leave
// at different times; in one some lanes skip it, in the other all leave by its one exit); and
// 32-bit variables stepped by 8 and by -3 whose test, `<` or `>`, is their loop's only exit.
// Witnesses use witness_predicated() so that they add no
// branch.
#include "witness.cuh"
#include <vector>

struct Point {
    float x, y, z;
};

__global__ void induction_loops(const float* rows, const Point* points, int* out, int n,
                                int width, int stop) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return; // the last warp is partial
    const float* row = rows + (size_t)(i % 7) * width;
    float acc = 0.0f;
    // Forwards over a row: the pointer advances by 4 bytes a trip.
#pragma unroll 1
    for (int j = 0; j < width; ++j) {
        acc += row[j];
        witness_predicated();
    }
    // Over 12-byte structs.
#pragma unroll 1
    for (int j = 0; j < width; ++j) {
        acc += points[j].y * 0.5f;
        witness_predicated();
    }
    // Backwards.
#pragma unroll 1
    for (int j = width - 1; j >= 0; --j) {
        acc -= row[j] * 0.25f;
        witness_predicated();
    }
    // An inner loop entered again on every outer trip.
#pragma unroll 1
    for (int a = 0; a < 3; ++a) {
#pragma unroll 1
        for (int j = a; j < width; ++j) {
            acc += row[j] * (float)a;
            witness_predicated();
        }
        witness_predicated();
    }
    // A second, uniform exit before the step.
#pragma unroll 1
    for (long long j = 0; j < width; ++j) {
        if (j == stop) break;
        acc += points[j].z;
        witness_predicated();
    }
    out[i] = (int)acc;
}

// Loops of the thread's own trip count: lanes leave at different times. In the first, every
// fifth lane skips the loop; in the second, every lane runs it at least once and all leave by
// its one exit. (A kernel of its own: the first has used its 8 counter registers.)
__global__ void own_trips(const float* rows, int* out, int n, int width) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* row = rows + (size_t)(i % 7) * width;
    float acc = 0.0f;
    int own = (i % 5 == 0) ? 0 : (i * 7) % width;
#pragma unroll 1
    for (int j = 0; j < own; ++j) {
        acc += row[j] * 2.0f;
        witness_predicated();
    }
    int runs = 1 + (i * 11) % width;
    long long k = 0;
    do {
        acc += row[k] * 3.0f;
        witness_predicated();
    } while (++k < runs);
    out[i] += (int)acc;
}

// 32-bit variables stepped by more than one (clang keeps an unsigned index 32 bits wide), each
// tested by its loop's only exit: a stride of 8 from the lane's own start, with `<`; and a
// countdown by 3 (odd), with `>`, that addresses nothing (so no pointer stands in for it).
// Lanes leave at different times.
__global__ void strided_trips(const float* rows, int* out, int n, int width) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* row = rows + (size_t)(i % 7) * width;
    float acc = 0.0f;
#pragma unroll 1
    for (unsigned j = i % 8; j < (unsigned)width; j += 8) {
        acc += row[j];
        witness_predicated();
    }
#pragma unroll 1
    for (unsigned j = width - 1 - (i % 4); j > 2; j -= 3) {
        acc += (float)(j % 5) * 0.5f;
        witness_predicated();
    }
    out[i] += (int)acc;
}

static int reference(int i, const std::vector<float>& rows, const std::vector<Point>& points,
                     int width, int stop) {
    const float* row = rows.data() + (size_t)(i % 7) * width;
    float acc = 0.0f;
    for (int j = 0; j < width; ++j) acc += row[j];
    for (int j = 0; j < width; ++j) acc += points[j].y * 0.5f;
    for (int j = width - 1; j >= 0; --j) acc -= row[j] * 0.25f;
    for (int a = 0; a < 3; ++a)
        for (int j = a; j < width; ++j) acc += row[j] * (float)a;
    for (long long j = 0; j < width; ++j) {
        if (j == stop) break;
        acc += points[j].z;
    }
    float own_acc = 0.0f;
    int own = (i % 5 == 0) ? 0 : (i * 7) % width;
    for (int j = 0; j < own; ++j) own_acc += row[j] * 2.0f;
    int runs = 1 + (i * 11) % width;
    for (int k = 0; k < runs; ++k) own_acc += row[k] * 3.0f;
    float strided_acc = 0.0f;
    for (int j = i % 8; j < width; j += 8) strided_acc += row[j];
    for (int j = width - 1 - (i % 4); j > 2; j -= 3) strided_acc += (float)(j % 5) * 0.5f;
    return (int)acc + (int)own_acc + (int)strided_acc;
}

int main() {
    const int n = 300, threads = 64, blocks = (n + threads - 1) / threads;
    const int width = 37, stop = 29;
    // Small integers: every sum is exact in float, whatever the order.
    std::vector<float> rows(7 * width);
    for (size_t k = 0; k < rows.size(); ++k) rows[k] = (float)((k * 13) % 8);
    std::vector<Point> points(width);
    for (int j = 0; j < width; ++j) points[j] = {(float)j, (float)(2 * (j % 5)), (float)(j % 3)};
    float* drows;
    Point* dpoints;
    int* dout;
    CHECK(cudaMalloc(&drows, rows.size() * sizeof(float)));
    CHECK(cudaMalloc(&dpoints, points.size() * sizeof(Point)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    CHECK(cudaMemcpy(drows, rows.data(), rows.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dpoints, points.data(), points.size() * sizeof(Point),
                     cudaMemcpyHostToDevice));
    witness_reset();
    induction_loops<<<blocks, threads>>>(drows, dpoints, dout, n, width, stop);
    CHECK_LAUNCH();
    own_trips<<<blocks, threads>>>(drows, dout, n, width);
    CHECK_LAUNCH();
    strided_trips<<<blocks, threads>>>(drows, dout, n, width);
    CHECK_LAUNCH();
    std::vector<int> out(n, 0);
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report(true);
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        int ref = reference(i, rows, points, width, stop);
        if (out[i] != ref) {
            if (bad < 5) std::fprintf(stderr, "mismatch at %d: got %d want %d\n", i, out[i], ref);
            ++bad;
        }
    }
    CHECK(cudaFree(drows));
    CHECK(cudaFree(dpoints));
    CHECK(cudaFree(dout));
    return report_result(bad, "induction_loops");
}
