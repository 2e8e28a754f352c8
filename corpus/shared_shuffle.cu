// shared_shuffle.cu — shared memory + __syncthreads tree reduction finished
// with __shfl_down_sync, a __shfl_xor_sync butterfly all-reduce, __ballot_sync
// and __activemask inside a divergent branch.
#include "witness.cuh"
#include <vector>

constexpr int kThreads = 256; // multiple of 32: every warp is full
constexpr unsigned kFull = 0xffffffffu;

__host__ __device__ inline int input_of(int i) { return (i * 613) % 101 - 50; }

// out_sum[block] = sum of the block's inputs.
__global__ void block_sum(const int* in, int* out_sum) {
    __shared__ int buf[kThreads];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = in[i];
    __syncthreads();
    for (int s = blockDim.x / 2; s >= 32; s >>= 1) { // shared-memory stages
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x < 32) { // last warp: shuffles
        WITNESS();
        int v = buf[threadIdx.x];
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(kFull, v, off);
        if (threadIdx.x == 0) out_sum[blockIdx.x] = v;
    }
}

// Per thread: warp max (xor butterfly), count of odd lanes (ballot) and,
// for odd values only, the mask of lanes active in that branch.
__global__ void warp_ops(const int* in, int* out_max, int* out_odd, unsigned* out_mask) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    int m = v;
    for (int lane_mask = 1; lane_mask < 32; lane_mask <<= 1)
        m = max(m, __shfl_xor_sync(kFull, m, lane_mask));
    out_max[i] = m;
    unsigned odd = __ballot_sync(kFull, v & 1);
    out_odd[i] = __popc(odd);
    unsigned active = 0;
    if (v & 1) { // divergent branch
        WITNESS();
        active = __activemask();
    }
    out_mask[i] = active;
}

int main() {
    const int blocks = 12, n = blocks * kThreads;
    std::vector<int> in(n), sums(blocks), maxs(n), odds(n);
    std::vector<unsigned> masks(n);
    for (int i = 0; i < n; ++i) in[i] = input_of(i);
    int *din, *dsum, *dmax, *dodd;
    unsigned* dmask;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dsum, blocks * sizeof(int)));
    CHECK(cudaMalloc(&dmax, n * sizeof(int)));
    CHECK(cudaMalloc(&dodd, n * sizeof(int)));
    CHECK(cudaMalloc(&dmask, n * sizeof(unsigned)));
    CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    block_sum<<<blocks, kThreads>>>(din, dsum);
    CHECK_LAUNCH();
    warp_ops<<<blocks, kThreads>>>(din, dmax, dodd, dmask);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(sums.data(), dsum, blocks * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(maxs.data(), dmax, n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(odds.data(), dodd, n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(masks.data(), dmask, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    for (int b = 0; b < blocks; ++b) {
        int ref = 0;
        for (int t = 0; t < kThreads; ++t) ref += in[b * kThreads + t];
        if (sums[b] != ref) ++bad;
    }
    for (int w = 0; w < n / 32; ++w) {
        int ref_max = in[w * 32];
        unsigned ref_odd = 0;
        for (int l = 0; l < 32; ++l) {
            ref_max = in[w * 32 + l] > ref_max ? in[w * 32 + l] : ref_max;
            if (in[w * 32 + l] & 1) ref_odd |= 1u << l;
        }
        for (int l = 0; l < 32; ++l) {
            int i = w * 32 + l;
            if (maxs[i] != ref_max || odds[i] != __builtin_popcount(ref_odd)) ++bad;
            // The active mask is only guaranteed to contain the lane itself and
            // to be a subset of the lanes that took the branch.
            bool odd = in[i] & 1;
            if (odd && (!(masks[i] >> l & 1u) || (masks[i] & ~ref_odd))) ++bad;
            if (!odd && masks[i] != 0) ++bad;
        }
    }
    CHECK(cudaFree(din)); CHECK(cudaFree(dsum)); CHECK(cudaFree(dmax));
    CHECK(cudaFree(dodd)); CHECK(cudaFree(dmask));
    return report_result(bad, "shared_shuffle");
}
