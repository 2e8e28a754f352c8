// reduction.cu — tree reductions (sum as 64-bit, and max) of n 32-bit integers in two passes:
// each block reduces a grid-stride slice through a shared-memory tree and a final warp-shuffle
// stage to one partial; one block then reduces the partials. Every repetition writes its result
// to its own slot. Check: every repetition's sum and max against the CPU (exact).
#include "bench.cuh"
#include <climits>

#define THREADS 256
#define PARTIALS 1024

struct SumMax {
    unsigned long long sum;
    int max;
};

// Reduces (sum, max) over the block; thread 0 gets the result.
__device__ SumMax block_reduce(unsigned long long sum, int max) {
    __shared__ unsigned long long ssum[THREADS];
    __shared__ int smax[THREADS];
    const int t = threadIdx.x;
    ssum[t] = sum;
    smax[t] = max;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 32; stride /= 2) {
        if (t < stride) {
            ssum[t] += ssum[t + stride];
            smax[t] = smax[t] > smax[t + stride] ? smax[t] : smax[t + stride];
        }
        __syncthreads();
    }
    if (t < 32) {
        sum = ssum[t] + ssum[t + 32];
        max = smax[t] > smax[t + 32] ? smax[t] : smax[t + 32];
        for (int offset = 16; offset > 0; offset /= 2) {
            sum += __shfl_down_sync(0xffffffffu, sum, offset);
            int other = __shfl_down_sync(0xffffffffu, max, offset);
            max = other > max ? other : max;
        }
    }
    return SumMax{sum, max};
}

__global__ void reduce_partials(const int* __restrict__ in, size_t n, unsigned long long* psum,
                                int* pmax) {
    unsigned long long sum = 0;
    int max = INT_MIN;
    for (size_t i = blockIdx.x * (size_t)THREADS + threadIdx.x; i < n; i += (size_t)gridDim.x * THREADS) {
        int v = in[i];
        sum += (unsigned long long)(unsigned)v;
        max = v > max ? v : max;
    }
    SumMax r = block_reduce(sum, max);
    if (threadIdx.x == 0) {
        psum[blockIdx.x] = r.sum;
        pmax[blockIdx.x] = r.max;
    }
}

__global__ void reduce_final(const unsigned long long* psum, const int* pmax, int parts,
                             unsigned long long* out_sum, int* out_max) {
    unsigned long long sum = 0;
    int max = INT_MIN;
    for (int i = threadIdx.x; i < parts; i += THREADS) {
        sum += psum[i];
        max = pmax[i] > max ? pmax[i] : max;
    }
    SumMax r = block_reduce(sum, max);
    if (threadIdx.x == 0) {
        *out_sum = r.sum;
        *out_max = r.max;
    }
}

int main() {
    bench_init("reduction");
    const size_t n = BENCH_SIZE((size_t)1 << 27, 100003);
    const int reps = bench_reps(BENCH_SIZE(1000, 3));
    const int parts = BENCH_SIZE(PARTIALS, 7);
    std::printf("size: n=%zu reps=%d\n", n, reps);
    std::vector<int> data(n);
    Rng rng(5);
    for (auto& v : data) v = (int)rng.below(1u << 20);
    data[n / 3] = (1 << 20) + 12345; // one distinct maximum
    DeviceBuffer<int> din(n), dpmax(parts), dmax(reps + 1);
    DeviceBuffer<unsigned long long> dpsum(parts), dsum(reps + 1);
    din.upload(data);
    LAUNCH(reduce_partials, parts, THREADS)(din.ptr, n, dpsum.ptr, dpmax.ptr); // warm-up
    LAUNCH(reduce_final, 1, THREADS)(dpsum.ptr, dpmax.ptr, parts, dsum.ptr + reps, dmax.ptr + reps);
    CHECK_LAUNCH();

    KernelTimer timer;
    timer.start();
    for (int r = 0; r < reps; ++r) {
        LAUNCH(reduce_partials, parts, THREADS)(din.ptr, n, dpsum.ptr, dpmax.ptr);
        LAUNCH(reduce_final, 1, THREADS)(dpsum.ptr, dpmax.ptr, parts, dsum.ptr + r, dmax.ptr + r);
    }
    timer.stop();
    std::vector<unsigned long long> sums = dsum.download();
    std::vector<int> maxes = dmax.download();

    unsigned long long want_sum = 0;
    int want_max = data[0];
    for (int v : data) {
        want_sum += (unsigned)v;
        want_max = v > want_max ? v : want_max;
    }
    Checker check;
    for (int r = 0; r <= reps; ++r) {
        check.equal("sum", r, (long long)sums[r], (long long)want_sum);
        check.equal("max", r, maxes[r], want_max);
    }
    return bench_finish(timer, check, "reduction results");
}
