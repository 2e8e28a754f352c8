// gemm.cu — dense single-precision C = A * B (n x n, row-major) with 32x32 shared-memory tiles;
// a block of 32x8 threads computes one tile of C, four outputs per thread.
// Check: rows 0 and n-1, columns 0 and n-1 and 512 random entries against a double-precision
// CPU dot product.
#include "bench.cuh"

#define TILE 32
#define ROWS_PER_THREAD 4 // TILE / blockDim.y

__global__ void gemm_tiled(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ c, int n) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col = blockIdx.x * TILE + tx;
    float acc[ROWS_PER_THREAD] = {0.f, 0.f, 0.f, 0.f};
    for (int t = 0; t < n; t += TILE) {
        for (int r = 0; r < ROWS_PER_THREAD; ++r) {
            int y = ty + r * 8;
            int ar = row0 + y, ac = t + tx, br = t + y;
            as[y][tx] = (ar < n && ac < n) ? a[(size_t)ar * n + ac] : 0.f;
            bs[y][tx] = (br < n && col < n) ? b[(size_t)br * n + col] : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < TILE; ++k) {
            float bv = bs[k][tx];
            for (int r = 0; r < ROWS_PER_THREAD; ++r) acc[r] += as[ty + r * 8][k] * bv;
        }
        __syncthreads();
    }
    for (int r = 0; r < ROWS_PER_THREAD; ++r) {
        int row = row0 + ty + r * 8;
        if (row < n && col < n) c[(size_t)row * n + col] = acc[r];
    }
}

int main() {
    bench_init("gemm");
    const int n = BENCH_SIZE(4096, 72);
    const int reps = bench_reps(BENCH_SIZE(10, 2));
    std::printf("size: n=%d reps=%d\n", n, reps);
    const size_t elems = (size_t)n * n;
    std::vector<float> a(elems), b(elems);
    Rng rng(1);
    for (auto& v : a) v = rng.sym();
    for (auto& v : b) v = rng.sym();

    DeviceBuffer<float> da(elems), db(elems), dc(elems);
    da.upload(a);
    db.upload(b);
    dim3 block(TILE, 8), grid(div_up(n, TILE), div_up(n, TILE));
    LAUNCH(gemm_tiled, grid, block)(da.ptr, db.ptr, dc.ptr, n); // warm-up
    CHECK_LAUNCH();

    KernelTimer timer;
    timer.start();
    for (int r = 0; r < reps; ++r) LAUNCH(gemm_tiled, grid, block)(da.ptr, db.ptr, dc.ptr, n);
    timer.stop();
    std::vector<float> c = dc.download();

    Checker check;
    auto check_entry = [&](int i, int j) {
        double sum = 0, mag = 0;
        for (int k = 0; k < n; ++k) {
            double p = (double)a[(size_t)i * n + k] * b[(size_t)k * n + j];
            sum += p;
            mag += std::fabs(p);
        }
        check.close("c", (long)i * n + j, c[(size_t)i * n + j], sum, 1e-5 * mag + 1e-6);
    };
    for (int j = 0; j < n; ++j) {
        check_entry(0, j);
        check_entry(n - 1, j);
    }
    for (int i = 1; i < n - 1; ++i) {
        check_entry(i, 0);
        check_entry(i, n - 1);
    }
    for (int s = 0; s < 512; ++s) check_entry((int)rng.below(n), (int)rng.below(n));
    return bench_finish(timer, check, "gemm entries");
}
