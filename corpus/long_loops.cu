// long_loops.cu — a loop whose lanes leave after different trip counts, run once with short
// trips and once with more than 2^20 per lane. cuda-flux counts such a loop in per-lane
// registers and flushes them where the lanes meet again; counts below 2^20 take the flush's
// fast path, larger ones its slow path (out of line), which only a long loop reaches.
// Witness: each thread whose final value has bit 7 set, after its loop.
#include "witness.cuh"
#include <vector>

constexpr int THREADS = 32;
constexpr unsigned LONG_TRIPS = (1u << 20) + 3, SHORT_TRIPS = 5, TRIPS_PER_LANE = 3;

__host__ __device__ unsigned walk(unsigned lane, unsigned trips) {
    unsigned x = lane + 1;
#pragma unroll 1
    for (unsigned k = 0; k < trips; ++k) x = x * 1664525u + 1013904223u;
    return x;
}

__global__ void long_walk(unsigned base, unsigned* out) {
    unsigned t = threadIdx.x;
    unsigned x = walk(t, base + TRIPS_PER_LANE * t);
    if ((x >> 7) & 1) witness();
    out[t] = x;
}

int main() {
    unsigned* dout;
    CHECK(cudaMalloc(&dout, 2 * THREADS * sizeof(unsigned)));
    witness_reset();
    long_walk<<<1, THREADS>>>(SHORT_TRIPS, dout);
    CHECK_LAUNCH();
    long_walk<<<1, THREADS>>>(LONG_TRIPS, dout + THREADS);
    CHECK_LAUNCH();
    witness_report();
    std::vector<unsigned> out(2 * THREADS);
    CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (unsigned t = 0; t < THREADS; ++t) {
        if (out[t] != walk(t, SHORT_TRIPS + TRIPS_PER_LANE * t)) ++bad;
        if (out[THREADS + t] != walk(t, LONG_TRIPS + TRIPS_PER_LANE * t)) ++bad;
    }
    CHECK(cudaFree(dout));
    return report_result(bad, "lane walks");
}
