// scan.cu — exclusive prefix sum of n unsigned 32-bit values, three-phase: every block scans a
// tile of 1024 values (staged through shared memory; per-thread serial scan of 4 values, warp
// scans with __shfl_up_sync, a scan of the warp totals) and writes the tile's total; the tile
// totals are scanned the same way, recursively; a last kernel adds each tile's offset.
// Check: every output value against a CPU scan (exact).
#include "bench.cuh"

#define SCAN_THREADS 256
#define ITEMS 4
#define SCAN_TILE (SCAN_THREADS * ITEMS)

__global__ void scan_tiles(const unsigned* __restrict__ in, unsigned* __restrict__ out,
                           unsigned* __restrict__ tile_sums, size_t n) {
    __shared__ unsigned stage[SCAN_TILE];
    __shared__ unsigned warp_totals[SCAN_THREADS / 32];
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const size_t base = (size_t)blockIdx.x * SCAN_TILE;
    for (int k = 0; k < ITEMS; ++k) {
        size_t i = base + t + k * SCAN_THREADS;
        stage[t + k * SCAN_THREADS] = i < n ? in[i] : 0u;
    }
    __syncthreads();
    unsigned v[ITEMS], total = 0;
    for (int k = 0; k < ITEMS; ++k) {
        v[k] = total; // exclusive within the thread
        total += stage[t * ITEMS + k];
    }
    unsigned incl = total;
    for (int d = 1; d < 32; d *= 2) {
        unsigned up = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += up;
    }
    if (lane == 31) warp_totals[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        unsigned w = lane < SCAN_THREADS / 32 ? warp_totals[lane] : 0u, wincl = w;
        for (int d = 1; d < 32; d *= 2) {
            unsigned up = __shfl_up_sync(0xffffffffu, wincl, d);
            if (lane >= d) wincl += up;
        }
        if (lane < SCAN_THREADS / 32) warp_totals[lane] = wincl - w; // exclusive
    }
    __syncthreads();
    const unsigned offset = warp_totals[warp] + incl - total;
    for (int k = 0; k < ITEMS; ++k) stage[t * ITEMS + k] = offset + v[k];
    if (tile_sums != nullptr && t == SCAN_THREADS - 1) tile_sums[blockIdx.x] = offset + total;
    __syncthreads();
    for (int k = 0; k < ITEMS; ++k) {
        size_t i = base + t + k * SCAN_THREADS;
        if (i < n) out[i] = stage[t + k * SCAN_THREADS];
    }
}

__global__ void add_offsets(unsigned* __restrict__ out, const unsigned* __restrict__ offsets,
                            size_t n) {
    const unsigned add = offsets[blockIdx.x];
    const size_t base = (size_t)blockIdx.x * SCAN_TILE;
    for (int k = 0; k < ITEMS; ++k) {
        size_t i = base + threadIdx.x + k * SCAN_THREADS;
        if (i < n) out[i] += add;
    }
}

// Buffers for the tile totals of each level of the recursion.
struct ScanLevels {
    std::vector<unsigned*> sums, scanned;
    explicit ScanLevels(size_t n) {
        while (n > SCAN_TILE) {
            n = div_up(n, SCAN_TILE);
            unsigned *s, *c;
            CHECK(cudaMalloc(&s, n * sizeof(unsigned)));
            CHECK(cudaMalloc(&c, n * sizeof(unsigned)));
            sums.push_back(s);
            scanned.push_back(c);
        }
    }
    ~ScanLevels() {
        for (size_t i = 0; i < sums.size(); ++i) {
            cudaFree(sums[i]);
            cudaFree(scanned[i]);
        }
    }
};

static void scan(const unsigned* in, unsigned* out, size_t n, ScanLevels& levels, size_t level) {
    const unsigned tiles = div_up(n, SCAN_TILE);
    if (tiles == 1) {
        LAUNCH(scan_tiles, 1, SCAN_THREADS)(in, out, (unsigned*)nullptr, n);
        return;
    }
    LAUNCH(scan_tiles, tiles, SCAN_THREADS)(in, out, levels.sums[level], n);
    scan(levels.sums[level], levels.scanned[level], tiles, levels, level + 1);
    LAUNCH(add_offsets, tiles, SCAN_THREADS)(out, levels.scanned[level], n);
}

int main() {
    bench_init("scan");
    const size_t n = BENCH_SIZE((size_t)1 << 26, 1053000);
    const int reps = bench_reps(BENCH_SIZE(400, 1));
    std::printf("size: n=%zu reps=%d\n", n, reps);
    std::vector<unsigned> data(n);
    Rng rng(6);
    for (auto& v : data) v = rng.below(16);
    DeviceBuffer<unsigned> din(n), dout(n);
    din.upload(data);
    ScanLevels levels(n);
    scan(din.ptr, dout.ptr, n, levels, 0); // warm-up
    CHECK_LAUNCH();

    KernelTimer timer;
    timer.start();
    for (int r = 0; r < reps; ++r) scan(din.ptr, dout.ptr, n, levels, 0);
    timer.stop();
    std::vector<unsigned> out = dout.download();

    Checker check;
    unsigned running = 0;
    for (size_t i = 0; i < n; ++i) {
        check.equal("out", (long)i, out[i], running);
        running += data[i];
    }
    return bench_finish(timer, check, "scan values");
}
