// nested_loops.cu — loops inside the divergent parts of a register-counted loop, which
// cuda-flux counts as regions of their own, nested in the outer one (ARCHITECTURE.md,
// "Counter placement"): in a loop of rounds bounded by a kernel parameter, a halo loop that
// lanes leave after one or two trips (its exit branch lies in its own divergent part), a
// loop with a uniform trip count that only some lanes enter, and a data-dependent `while`
// inside a divergent `if`. Witnesses use witness_predicated() so that they add no branch.
#include "witness.cuh"
#include <vector>

#define THREADS 64

__global__ void nested_loops(const int* in, int* out, int n, int rounds, int inner) {
    __shared__ int tile[THREADS + 2];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int v = i < n ? in[i] : 0;
    int acc = 0;
#pragma unroll 1
    for (int r = 0; r < rounds; ++r) {
        witness_predicated();
        // The tile and its halo: lanes 0 and 1 make a second trip.
#pragma unroll 1
        for (int t = threadIdx.x; t < THREADS + 2; t += THREADS) {
            const int g = blockIdx.x * THREADS + t - 1;
            tile[t] = (g >= 0 && g < n ? in[g] : 0) + r;
            witness_predicated();
        }
        __syncthreads();
        // A uniform trip count, entered by some lanes only.
        if ((v + r) % 3 == 0) {
#pragma unroll 1
            for (int b = 0; b < inner; ++b) {
                acc += (v ^ b) & 7;
                witness_predicated();
            }
        }
        // Each lane its own trip count.
        if (v & 1) {
            int x = (v >> 1) % 5 + r;
#pragma unroll 1
            while (x > 0) {
                acc += x;
                x -= 2;
                witness_predicated();
            }
        }
        acc += tile[threadIdx.x] - tile[threadIdx.x + 2];
        __syncthreads();
    }
    if (i < n) out[i] = acc;
}

static int reference(const std::vector<int>& in, int i, int rounds, int inner) {
    const int n = (int)in.size();
    const int v = in[i];
    int acc = 0;
    for (int r = 0; r < rounds; ++r) {
        if ((v + r) % 3 == 0)
            for (int b = 0; b < inner; ++b) acc += (v ^ b) & 7;
        if (v & 1)
            for (int x = (v >> 1) % 5 + r; x > 0; x -= 2) acc += x;
        // tile[t] holds in[cta * THREADS + t - 1] + r (0 + r outside the input).
        const int left = i - 1, right = i + 1;
        acc += ((left >= 0 ? in[left] : 0) + r) - ((right < n ? in[right] : 0) + r);
    }
    return acc;
}

int main() {
    const int n = 1000, blocks = (n + THREADS - 1) / THREADS;
    const int rounds = 4, inner = 5;
    std::vector<int> in(n), out(n, 0);
    for (int i = 0; i < n; ++i) in[i] = (int)((i * 2654435761u) % 1000003);
    int *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    nested_loops<<<blocks, THREADS>>>(din, dout, n, rounds, inner);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report(true);
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        const int want = reference(in, i, rounds, inner);
        if (out[i] != want) {
            if (bad < 5) std::fprintf(stderr, "mismatch at %d: got %d want %d\n", i, out[i], want);
            ++bad;
        }
    }
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    return report_result(bad, "nested_loops");
}
