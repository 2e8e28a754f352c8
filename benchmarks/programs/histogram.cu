// histogram.cu — atomics-heavy histograms of n 32-bit words with a skewed distribution (a third
// of the words are one value, so some bins are very contended):
//  * byte histogram: 256 bins per block in shared memory (shared-memory atomicAdd on each of the
//    word's 4 bytes), merged into 64-bit global bins with global atomicAdd;
//  * hashed histogram: 4096 bins updated directly with global 32-bit atomicAdd, one per word.
// Bins accumulate over all repetitions. Check: every bin against a CPU histogram (exact).
#include "bench.cuh"

#define BYTE_BINS 256
#define HASH_BITS 12
#define HASH_BINS (1 << HASH_BITS)

__host__ __device__ inline unsigned hash_bin(unsigned w) { return (w * 2654435761u) >> (32 - HASH_BITS); }

__global__ void byte_histogram(const unsigned* __restrict__ words, size_t n,
                               unsigned long long* __restrict__ bins) {
    __shared__ unsigned local[BYTE_BINS];
    for (int b = threadIdx.x; b < BYTE_BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned w = words[i];
        atomicAdd(&local[w & 0xff], 1u);
        atomicAdd(&local[(w >> 8) & 0xff], 1u);
        atomicAdd(&local[(w >> 16) & 0xff], 1u);
        atomicAdd(&local[w >> 24], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < BYTE_BINS; b += blockDim.x)
        if (local[b] != 0) atomicAdd(&bins[b], (unsigned long long)local[b]);
}

__global__ void hashed_histogram(const unsigned* __restrict__ words, size_t n,
                                 unsigned* __restrict__ bins) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
        atomicAdd(&bins[hash_bin(words[i])], 1u);
}

int main() {
    bench_init("histogram");
    const size_t n = BENCH_SIZE((size_t)1 << 25, 50000);
    const int reps = bench_reps(BENCH_SIZE(30, 2));
    const unsigned blocks = BENCH_SIZE(1056, 5);
    std::printf("size: n=%zu reps=%d\n", n, reps);
    std::vector<unsigned> words(n);
    Rng rng(7);
    for (auto& w : words) {
        uint32_t kind = rng.below(3);
        if (kind == 0) w = 0x2a2a2a2au;                 // the hot value
        else if (kind == 1) w = rng.below(1u << 12) * 0x01010101u; // few distinct values
        else w = rng.u32();
    }
    DeviceBuffer<unsigned> dwords(n), dhash(HASH_BINS);
    DeviceBuffer<unsigned long long> dbytes(BYTE_BINS);
    dwords.upload(words);
    dbytes.zero();
    dhash.zero();
    LAUNCH(byte_histogram, blocks, 256)(dwords.ptr, n, dbytes.ptr); // warm-up, counted
    LAUNCH(hashed_histogram, blocks, 256)(dwords.ptr, n, dhash.ptr);
    CHECK_LAUNCH();

    KernelTimer timer;
    timer.start();
    for (int r = 0; r < reps; ++r) {
        LAUNCH(byte_histogram, blocks, 256)(dwords.ptr, n, dbytes.ptr);
        LAUNCH(hashed_histogram, blocks, 256)(dwords.ptr, n, dhash.ptr);
    }
    timer.stop();
    std::vector<unsigned long long> bytes = dbytes.download();
    std::vector<unsigned> hashed = dhash.download();

    std::vector<unsigned long long> want_bytes(BYTE_BINS, 0), want_hash(HASH_BINS, 0);
    for (unsigned w : words) {
        for (int s = 0; s < 32; s += 8) ++want_bytes[(w >> s) & 0xff];
        ++want_hash[hash_bin(w)];
    }
    const unsigned long long runs = (unsigned long long)reps + 1;
    Checker check;
    for (int b = 0; b < BYTE_BINS; ++b)
        check.equal("byte bin", b, (long long)bytes[b], (long long)(want_bytes[b] * runs));
    for (int b = 0; b < HASH_BINS; ++b)
        check.equal("hash bin", b, (long long)hashed[b],
                    (long long)((want_hash[b] * runs) & 0xffffffffull));
    return bench_finish(timer, check, "histogram bins");
}
