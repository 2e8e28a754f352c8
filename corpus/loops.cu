// loops.cu — data-dependent loops: for with break/continue, a nested loop with
// its own break, a bounded while (Collatz) loop and a do/while loop; and a loop
// unrolled twice whose lanes leave at different times, each copy's way out
// through a block of its own before the ways meet (as in Parboil mri-gridding's
// splitRearrange).
#include "witness.cuh"
#include <vector>

__host__ __device__ inline int loop_work(int v) {
    int acc = 0;
    int trips = v % 23; // data-dependent trip count
    for (int j = 0; j < trips; ++j) {
        if ((j ^ v) % 3 == 0) continue;          // skip some iterations
        if (acc > 400 + v % 100) break;          // early exit
        WITNESS();                               // once per surviving iteration
        for (int k = 0; k <= j % 5; ++k) {       // nested loop
            acc += ((j * k) ^ v) & 15;
            if (acc % 97 == 96) break;           // inner early exit
        }
    }
    // Bounded Collatz walk: trip count depends on the value.
    unsigned x = (unsigned)v + 1u;
    int steps = 0;
    while (x != 1u && steps < 150) {
        x = (x & 1u) ? 3u * x + 1u : x / 2u;
        ++steps;
    }
    if (steps >= 100) WITNESS(); // long walks only
    // do/while: at least one trip.
    int digits = 0;
    int y = v;
    do {
        digits += y % 10;
        y /= 10;
    } while (y != 0);
    return acc * 1000 + steps * 10 + digits % 10;
}

__global__ void loops_kernel(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = loop_work(in[i]);
}

// Steps back while a pattern holds (0 to 112 trips); the exits of the unrolled
// copies each fix up the count in a block of their own.
__host__ __device__ inline int run_length(int v) {
    int run = v % 40;
    int i = (v % 29) * 4 - 1;
#pragma unroll 2
    while (i >= 0) {
        if ((((i * 7) ^ v) % 5) != 0) {
            run++;
            i--;
        } else {
            break;
        }
    }
    if (run >= 45) WITNESS(); // long runs only
    return run;
}

__global__ void run_length_kernel(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = run_length(in[i]);
}

int main() {
    const int n = 2048, threads = 64, blocks = (n + threads - 1) / threads;
    std::vector<int> in(n), out(n, 0);
    for (int i = 0; i < n; ++i) in[i] = (i * 7919 + 13) % 10007;
    int *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    loops_kernel<<<blocks, threads>>>(din, dout, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    std::vector<int> runs(n, 0);
    run_length_kernel<<<blocks, threads>>>(din, dout, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(runs.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        int ref = loop_work(in[i]);
        if (out[i] != ref) {
            if (bad < 5) std::fprintf(stderr, "mismatch at %d: got %d want %d\n", i, out[i], ref);
            ++bad;
        }
        int run = run_length(in[i]);
        if (runs[i] != run) {
            if (bad < 5) std::fprintf(stderr, "run mismatch at %d: got %d want %d\n", i, runs[i], run);
            ++bad;
        }
    }
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    return report_result(bad, "loops");
}
