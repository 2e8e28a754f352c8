// spmv.cu — sparse matrix-vector products y = A x, A in CSR with irregular rows: a random
// square matrix (fixed seed) whose row lengths are mostly short, sometimes a few hundred and
// rarely thousands, with random columns. Two kernels: one thread per row (divergent, uncoalesced)
// and one warp per row (strided over the row, shuffle reduction).
// Check: both results, every row, against a double-precision CPU product.
#include "bench.cuh"

__global__ void spmv_thread_per_row(const int* __restrict__ rowptr, const int* __restrict__ cols,
                                    const float* __restrict__ vals, const float* __restrict__ x,
                                    float* __restrict__ y, int rows) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    float sum = 0.f;
    for (int k = rowptr[row]; k < rowptr[row + 1]; ++k) sum += vals[k] * x[cols[k]];
    y[row] = sum;
}

__global__ void spmv_warp_per_row(const int* __restrict__ rowptr, const int* __restrict__ cols,
                                  const float* __restrict__ vals, const float* __restrict__ x,
                                  float* __restrict__ y, int rows) {
    const int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32);
    const int lane = threadIdx.x % 32;
    if (row >= rows) return; // the whole warp leaves together
    float sum = 0.f;
    for (int k = rowptr[row] + lane; k < rowptr[row + 1]; k += 32) sum += vals[k] * x[cols[k]];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) y[row] = sum;
}

int main() {
    bench_init("spmv");
    const int rows = BENCH_SIZE(1 << 20, 700);
    const int reps = bench_reps(BENCH_SIZE(60, 2));
    Rng rng(4);
    std::vector<int> rowptr(rows + 1);
    rowptr[0] = 0;
    for (int r = 0; r < rows; ++r) {
        uint32_t kind = rng.below(100), len;
        if (kind < 90) len = 4 + rng.below(25);          // 4..28
        else if (kind < 99) len = 32 + rng.below(225);   // 32..256
        else len = 512 + rng.below(BENCH_SIZE(1537, 200)); // 512..2048
        rowptr[r + 1] = rowptr[r] + (int)len;
    }
    const size_t nnz = (size_t)rowptr[rows];
    std::printf("size: rows=%d nnz=%zu reps=%d\n", rows, nnz, reps);
    std::vector<int> cols(nnz);
    std::vector<float> vals(nnz), x(rows);
    for (size_t k = 0; k < nnz; ++k) {
        cols[k] = (int)rng.below(rows);
        vals[k] = rng.sym();
    }
    for (auto& v : x) v = rng.sym();

    DeviceBuffer<int> drowptr(rows + 1), dcols(nnz);
    DeviceBuffer<float> dvals(nnz), dx(rows), dy1(rows), dy2(rows);
    drowptr.upload(rowptr);
    dcols.upload(cols);
    dvals.upload(vals);
    dx.upload(x);
    const unsigned b1 = div_up(rows, 256), b2 = div_up((size_t)rows * 32, 256);
    LAUNCH(spmv_thread_per_row, b1, 256)(drowptr.ptr, dcols.ptr, dvals.ptr, dx.ptr, dy1.ptr, rows);
    LAUNCH(spmv_warp_per_row, b2, 256)(drowptr.ptr, dcols.ptr, dvals.ptr, dx.ptr, dy2.ptr, rows);
    CHECK_LAUNCH(); // warm-up

    KernelTimer timer;
    timer.start();
    for (int r = 0; r < reps; ++r) {
        LAUNCH(spmv_thread_per_row, b1, 256)(drowptr.ptr, dcols.ptr, dvals.ptr, dx.ptr, dy1.ptr, rows);
        LAUNCH(spmv_warp_per_row, b2, 256)(drowptr.ptr, dcols.ptr, dvals.ptr, dx.ptr, dy2.ptr, rows);
    }
    timer.stop();
    std::vector<float> y1 = dy1.download(), y2 = dy2.download();

    Checker check;
    for (int r = 0; r < rows; ++r) {
        double sum = 0, mag = 0;
        for (int k = rowptr[r]; k < rowptr[r + 1]; ++k) {
            double p = (double)vals[k] * x[cols[k]];
            sum += p;
            mag += std::fabs(p);
        }
        double tol = 1e-5 * mag + 1e-6;
        check.close("y (thread per row)", r, y1[r], sum, tol);
        check.close("y (warp per row)", r, y2[r], sum, tol);
    }
    return bench_finish(timer, check, "spmv rows");
}
