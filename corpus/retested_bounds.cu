// retested_bounds.cu — a loop over a CTA's region in windows of the block size that tests its
// index against the region's end before loading and again, after a shared-memory scan, before
// storing (as SHOC Scan's `bottom_scan` does). Compilers compute the second test afresh: clang
// from the low half of a 64-bit copy of the index, as the complement of the first. The store
// runs for the same lanes as the load, so cuda-flux copies its counts from the load's
// (`placement::same_comparison`); the CPU-target tests check them against every block counted.
// The result is an inclusive prefix sum of each CTA's region, checked on the host.
#include "witness.cuh"
#include <vector>

__global__ void region_prefix(const float4* in, float4* out, int n, int per_cta) {
    __shared__ float partial[128];
    __shared__ float seed;
    int start = blockIdx.x * per_cta, stop = min(start + per_cta, n);
    witness();
    if (threadIdx.x == 0) seed = 0.0f;
    __syncthreads();
    int i = start + threadIdx.x;
    for (int window = start; window < stop; window += blockDim.x, i += blockDim.x) {
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (i < stop) v = in[i];
        v.y += v.x;
        v.z += v.y;
        v.w += v.z;
        partial[threadIdx.x] = v.w;
        __syncthreads();
        // Inclusive scan of the window's sums (Hillis-Steele).
        for (int d = 1; d < blockDim.x; d *= 2) {
            float add = threadIdx.x >= d ? partial[threadIdx.x - d] : 0.0f;
            __syncthreads();
            partial[threadIdx.x] += add;
            __syncthreads();
        }
        float before = seed + partial[threadIdx.x] - v.w;
        if (i < stop)
            out[i] = make_float4(before + v.x, before + v.y, before + v.z, before + v.w);
        __syncthreads();
        if (threadIdx.x == blockDim.x - 1) seed += partial[threadIdx.x];
        __syncthreads();
    }
}

int main() {
    // 1000 float4s in regions of 300 (the last one 100): windows of 128 with partial last ones.
    const int n = 1000, per_cta = 300, threads = 128, ctas = (n + per_cta - 1) / per_cta;
    std::vector<float> in(4 * n), out(4 * n);
    for (int k = 0; k < 4 * n; ++k) in[k] = (float)(k % 7);   // sums stay exact in float
    float *d_in, *d_out;
    CHECK(cudaMalloc(&d_in, in.size() * sizeof(float)));
    CHECK(cudaMalloc(&d_out, out.size() * sizeof(float)));
    CHECK(cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice));
    witness_reset();
    region_prefix<<<ctas, threads>>>((const float4*)d_in, (float4*)d_out, n, per_cta);
    CHECK_LAUNCH();
    witness_report();
    CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int c = 0; c < ctas; ++c) {
        float sum = 0.0f;
        for (int k = 4 * c * per_cta; k < 4 * n && k < 4 * (c + 1) * per_cta; ++k) {
            sum += in[k];
            if (out[k] != sum) ++bad;
        }
    }
    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_out));
    return report_result(bad, "prefix sums of each CTA's region");
}
