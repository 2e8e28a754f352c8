// uniform_loops.cu — loops whose branches are the same for every lane of a warp,
// which cuda-flux counts in registers and flushes when the warp leaves them
// (ARCHITECTURE.md, "Counter placement"): a loop bounded by a kernel parameter
// inside a per-thread guard, nested loops, a loop with a second, uniform exit
// (break), a loop with a divergent `if` that reconverges inside it, and a
// constant-trip loop in a __noinline__ device function. Witnesses inside the
// loops use witness_predicated() so that they add no branch.
#include "witness.cuh"
#include <vector>

__device__ __noinline__ int fixed_trips(int v) {
    int acc = v;
#pragma unroll 1
    for (int k = 0; k < 6; ++k) {
        acc = acc * 3 + k;
        witness_predicated();
    }
    return acc;
}

__global__ void uniform_loops(const int* in, int* out, int n, int outer, int inner, int stop) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return; // the last warp is partial
    int v = in[i];
    int acc = 0;
    // Nested loops bounded by parameters.
#pragma unroll 1
    for (int a = 0; a < outer; ++a) {
        witness_predicated();
#pragma unroll 1
        for (int b = 0; b < inner; ++b) {
            acc += (v ^ (a * 31 + b)) & 7;
            witness_predicated();
        }
    }
    // A second exit: leave when a (uniform) counter reaches `stop`.
#pragma unroll 1
    for (int a = 0; a < outer * inner; ++a) {
        if (a == stop) break;
        acc += a;
        witness_predicated();
    }
    // A divergent `if` inside a uniform loop: its body is counted directly.
#pragma unroll 1
    for (int a = 0; a < inner; ++a) {
        if ((v + a) % 3 == 0) {
            acc ^= a * 5;
            witness_predicated();
        }
        witness_predicated();
    }
    out[i] = fixed_trips(acc);
}

static int reference(int v, int outer, int inner, int stop) {
    int acc = 0;
    for (int a = 0; a < outer; ++a)
        for (int b = 0; b < inner; ++b) acc += (v ^ (a * 31 + b)) & 7;
    for (int a = 0; a < outer * inner; ++a) {
        if (a == stop) break;
        acc += a;
    }
    for (int a = 0; a < inner; ++a)
        if ((v + a) % 3 == 0) acc ^= a * 5;
    int r = acc;
    for (int k = 0; k < 6; ++k) r = r * 3 + k;
    return r;
}

int main() {
    const int n = 1000, threads = 96, blocks = (n + threads - 1) / threads;
    const int outer = 5, inner = 7, stop = 23;
    std::vector<int> in(n), out(n, 0);
    for (int i = 0; i < n; ++i) in[i] = (i * 2654435761u) % 1000003;
    int *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    uniform_loops<<<blocks, threads>>>(din, dout, n, outer, inner, stop);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report(true);
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        int ref = reference(in[i], outer, inner, stop);
        if (out[i] != ref) {
            if (bad < 5) std::fprintf(stderr, "mismatch at %d: got %d want %d\n", i, out[i], ref);
            ++bad;
        }
    }
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    return report_result(bad, "uniform_loops");
}
