// atomic_cas.cu — contended atomicCAS retry loops: a float atomic max (32-bit
// CAS) and a double atomic add (64-bit CAS) on a handful of hot addresses.
// Only atom.global.cas.* is used here; the sole atom.global.add.* are the
// witness counters. The number of CAS retries is timing-dependent, so no witness
// sits inside the retry loops; every witnessed path is deterministic.
#include "witness.cuh"
#include <cmath>
#include <vector>

__device__ float atomic_max_float(float* addr, float val) {
    int* a = reinterpret_cast<int*>(addr);
    int old = *reinterpret_cast<volatile int*>(a);
    int assumed;
    do {
        assumed = old;
        if (__int_as_float(assumed) >= val) break; // already large enough
        old = atomicCAS(a, assumed, __float_as_int(val));
    } while (assumed != old);
    return __int_as_float(old);
}

__device__ double atomic_add_double_cas(double* addr, double val) {
    unsigned long long* a = reinterpret_cast<unsigned long long*>(addr);
    unsigned long long old = *reinterpret_cast<volatile unsigned long long*>(a);
    unsigned long long assumed;
    do {
        assumed = old;
        old = atomicCAS(a, assumed, __double_as_longlong(__longlong_as_double(assumed) + val));
    } while (assumed != old);
    return __longlong_as_double(old);
}

__host__ __device__ inline float value_of(int i) {
    return (float)((i * 7393) % 1000) - 500.0f; // integers in [-500, 499]
}

__global__ void cas_kernel(float* maxima, double* sums, int n, int bins) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    WITNESS(); // every thread
    float v = value_of(i);
    int bin = i % bins; // few bins: heavy contention
    atomic_max_float(&maxima[bin], v);
    if (v >= 0.0f) {
        WITNESS(); // non-negative values only
        atomic_add_double_cas(&sums[bin], (double)v);
    }
}

int main() {
    const int n = 8192, threads = 256, blocks = (n + threads - 1) / threads, bins = 4;
    std::vector<float> maxima(bins, -1.0e30f), ref_max(bins, -1.0e30f);
    std::vector<double> sums(bins, 0.0), ref_sum(bins, 0.0);
    float* dmax;
    double* dsum;
    CHECK(cudaMalloc(&dmax, bins * sizeof(float)));
    CHECK(cudaMalloc(&dsum, bins * sizeof(double)));
    CHECK(cudaMemcpy(dmax, maxima.data(), bins * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dsum, sums.data(), bins * sizeof(double), cudaMemcpyHostToDevice));
    witness_reset();
    cas_kernel<<<blocks, threads>>>(dmax, dsum, n, bins);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(maxima.data(), dmax, bins * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(sums.data(), dsum, bins * sizeof(double), cudaMemcpyDeviceToHost));
    witness_report();
    for (int i = 0; i < n; ++i) {
        float v = value_of(i);
        int bin = i % bins;
        ref_max[bin] = std::fmax(ref_max[bin], v);
        if (v >= 0.0f) ref_sum[bin] += (double)v; // integer-valued: order-independent
    }
    long bad = 0;
    for (int b = 0; b < bins; ++b) {
        if (maxima[b] != ref_max[b] || sums[b] != ref_sum[b]) {
            std::fprintf(stderr, "bin %d: max %g (want %g) sum %g (want %g)\n", b, maxima[b],
                         ref_max[b], sums[b], ref_sum[b]);
            ++bad;
        }
    }
    CHECK(cudaFree(dmax));
    CHECK(cudaFree(dsum));
    return report_result(bad, "atomic_cas");
}
