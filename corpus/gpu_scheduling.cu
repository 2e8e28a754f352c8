// gpu_scheduling.cu — two things real programs rely on that the CUDA programming model does
// not promise, but every GPU does:
//   1. neighbour_race: warps of a CTA advance together. Each warp posts a value to shared
//      memory first thing, computes for a while (a loop of dependent global loads), then
//      reads the value its neighbour warp posted — without a barrier. A race, which a GPU
//      masks: every warp posts long before any finishes the loop. (An emulator that runs one
//      warp far ahead of the others, e.g. 16,384 instructions at a time, reads stale shared
//      memory instead.)
//   2. persistent_meet: as many CTAs run at once as the device reports it holds
//      (occupancy x multiprocessors). A grid of exactly that many CTAs meets at an
//      inter-block barrier of its own — a global counter each CTA increments and then spins
//      on — without a cooperative launch, as persistent kernels (Parboil bfs) do.
#include "witness.cuh"
#include <vector>

__global__ void neighbour_race(int rounds, const unsigned* table, int* posted_seen,
                               unsigned* sink) {
    __shared__ volatile int posted[32];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) posted[warp] = 1000 * blockIdx.x + warp + 1;
    unsigned acc = threadIdx.x;
    for (int r = 0; r < rounds; ++r) acc = acc * 1664525u + table[(acc >> 9) % 64];
    int seen = posted[(warp + 1) % warps];
    if (lane == 0) {
        witness();
        posted_seen[blockIdx.x * warps + warp] = seen;
    }
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

__device__ unsigned meet_arrived;

__global__ void persistent_meet(unsigned* seen) {
    __syncthreads();
    if (threadIdx.x == 0) {
        witness();
        atomicInc(&meet_arrived, 0xFFFFFFFFu);
        while (*(volatile unsigned*)&meet_arrived < gridDim.x) {
        }
        seen[blockIdx.x] = *(volatile unsigned*)&meet_arrived;
    }
    __syncthreads();
}

int main() {
    long bad = 0;
    witness_reset();

    // 1. Neighbour race.
    const int blocks = 6, threads = 256, warps = threads / 32, rounds = 1000;
    std::vector<unsigned> table(64);
    for (int i = 0; i < 64; ++i) table[i] = 1013904223u + 7919u * i;
    int* d_seen;
    unsigned *d_sink, *d_table;
    CHECK(cudaMalloc(&d_seen, blocks * warps * sizeof(int)));
    CHECK(cudaMalloc(&d_sink, blocks * threads * sizeof(unsigned)));
    CHECK(cudaMalloc(&d_table, 64 * sizeof(unsigned)));
    CHECK(cudaMemcpy(d_table, table.data(), 64 * sizeof(unsigned), cudaMemcpyHostToDevice));
    neighbour_race<<<blocks, threads>>>(rounds, d_table, d_seen, d_sink);
    CHECK_LAUNCH();
    std::vector<int> seen(blocks * warps);
    std::vector<unsigned> sink(blocks * threads);
    CHECK(cudaMemcpy(seen.data(), d_seen, seen.size() * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(sink.data(), d_sink, sink.size() * sizeof(unsigned),
                     cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; ++b)
        for (int w = 0; w < warps; ++w)
            if (seen[b * warps + w] != 1000 * b + (w + 1) % warps + 1) {
                if (bad < 5)
                    std::printf("neighbour_race: block %d warp %d saw %d\n", b, w,
                                seen[b * warps + w]);
                ++bad;
            }
    for (int t = 0; t < blocks * threads; ++t) {
        unsigned acc = (unsigned)(t % threads);
        for (int r = 0; r < rounds; ++r) acc = acc * 1664525u + table[(acc >> 9) % 64];
        if (sink[t] != acc) ++bad;
    }

    // 2. Persistent CTAs: as many as the device holds at once.
    int per_sm = 0, sms = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_meet, 128, 0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int resident = per_sm * sms;
    unsigned* d_met;
    CHECK(cudaMalloc(&d_met, resident * sizeof(unsigned)));
    persistent_meet<<<resident, 128>>>(d_met);
    CHECK_LAUNCH();
    std::vector<unsigned> met(resident);
    CHECK(cudaMemcpy(met.data(), d_met, met.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (int b = 0; b < resident; ++b)
        if (met[b] != (unsigned)resident) ++bad;

    witness_report();
    CHECK(cudaFree(d_seen));
    CHECK(cudaFree(d_sink));
    CHECK(cudaFree(d_table));
    CHECK(cudaFree(d_met));
    return report_result(bad, "posted values seen by neighbour warps, CTAs met");
}
