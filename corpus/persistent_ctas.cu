// persistent_ctas.cu — a persistent kernel with a hard-coded CTA count, as Parboil bfs/cuda
// has (NUM_SM = 14 CTAs of 512 threads): the CTAs stay resident for the whole computation and
// meet at a grid-wide barrier of their own (an `atomicInc` arrival counter and a `volatile`
// generation the last arrival bumps) between rounds, without a cooperative launch and without
// asking the device how many CTAs it holds. Every GPU runs it (14 such CTAs need 4
// multiprocessors); a scheduler that keeps fewer CTAs resident than the grid — e.g. one
// multiprocessor per host thread — leaves the resident ones spinning for the others forever.
// Each round reads what other CTAs wrote in the round before (a rotation with neighbours), so
// a barrier that let a CTA through early gives a wrong result the host check catches.
#include "witness.cuh"
#include <vector>

#define PERSISTENT_CTAS 14
#define THREADS 512
#define ROUNDS 6

__device__ unsigned barrier_arrived;
__device__ volatile unsigned barrier_generation;

// All CTAs of the grid meet here; `generation` is this CTA's count of barriers passed.
__device__ void grid_barrier(unsigned generation) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        // The last arrival (old == gridDim.x - 1) wraps the counter to 0 and releases the rest.
        if (atomicInc(&barrier_arrived, gridDim.x - 1) == gridDim.x - 1) {
            barrier_generation = generation + 1;
        } else {
            while (barrier_generation == generation) {
            }
        }
        __threadfence();
    }
    __syncthreads();
}

__global__ void rotate_rounds(unsigned* a, unsigned* b, int n) {
    for (int round = 0; round < ROUNDS; ++round) {
        const unsigned* in = round % 2 == 0 ? a : b;
        unsigned* out = round % 2 == 0 ? b : a;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
            witness();
            // The neighbour a whole CTA's width away: written by another CTA last round.
            out[i] = in[i] * 3u + in[(i + THREADS + 1) % n] + (unsigned)round;
        }
        grid_barrier((unsigned)round);
    }
}

int main() {
    const int n = PERSISTENT_CTAS * THREADS * 2 + 96;
    std::vector<unsigned> a(n), b(n, 0);
    for (int i = 0; i < n; ++i) a[i] = 2654435761u * (unsigned)i + 12345u;
    unsigned *d_a, *d_b;
    CHECK(cudaMalloc(&d_a, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&d_b, n * sizeof(unsigned)));
    CHECK(cudaMemcpy(d_a, a.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_b, b.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
    witness_reset();
    rotate_rounds<<<PERSISTENT_CTAS, THREADS>>>(d_a, d_b, n);
    CHECK_LAUNCH();
    witness_report();

    // The same rounds on the host.
    for (int round = 0; round < ROUNDS; ++round) {
        const std::vector<unsigned>& in = round % 2 == 0 ? a : b;
        std::vector<unsigned>& out = round % 2 == 0 ? b : a;
        for (int i = 0; i < n; ++i) out[i] = in[i] * 3u + in[(i + THREADS + 1) % n] + round;
    }
    const std::vector<unsigned>& want = ROUNDS % 2 == 0 ? a : b;
    std::vector<unsigned> got(n);
    CHECK(cudaMemcpy(got.data(), ROUNDS % 2 == 0 ? d_a : d_b, n * sizeof(unsigned),
                     cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int i = 0; i < n; ++i)
        if (got[i] != want[i]) {
            if (bad < 5) std::printf("element %d: %u, expected %u\n", i, got[i], want[i]);
            ++bad;
        }
    CHECK(cudaFree(d_a));
    CHECK(cudaFree(d_b));
    return report_result(bad, "elements after the rounds");
}
