// precision.cu — half (__half/__half2 from cuda_fp16.h), float and double
// arithmetic including sin/cos/exp/sqrt, checked against the CPU with
// per-precision tolerances (device libm results may differ by a few ulps).
#include "witness.cuh"
#include <cmath>
#include <cuda_fp16.h>
#include <vector>

// Multiples of 1/16 in [-6.25, 6.1875]: exact in float and, halved, in half, so
// host and device agree on every input and on the sign test below.
__host__ __device__ inline float input_of(int i) { return (float)(i % 200 - 100) * 0.0625f; }

__global__ void precision_kernel(int n, float* of, double* od, float* oh) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = input_of(i);
    // float: sinf/cosf/expf/sqrtf
    float f = sinf(x) * cosf(x) + expf(x * 0.25f) - sqrtf(fabsf(x) + 1.0f);
    // double: sin/cos/exp/sqrt
    double xd = (double)x;
    double d = sin(xd) + cos(xd * 0.5) * exp(xd * 0.125) + sqrt(xd * xd + 2.0);
    // half: scalar fma/mul/add/sub and paired half2 arithmetic
    __half h = __float2half(x * 0.5f);
    __half one = __float2half(1.0f);
    __half hr = __hfma(h, h, one);            // h*h + 1
    hr = __hsub(__hmul(hr, __float2half(0.5f)), __hadd(h, one));
    __half2 p = __halves2half2(h, one);
    __half2 q = __hmul2(__hadd2(p, p), p);    // (2h^2, 2)
    float hv = __half2float(hr) + __low2float(q) + __high2float(q);
    if (__hgt(h, __float2half(0.0f))) {
        WITNESS(); // positive half inputs only
        hv += 1.0f;
    }
    WITNESS(); // every in-range thread
    of[i] = f;
    od[i] = d;
    oh[i] = hv;
}

static bool close_to(double got, double want, double rel, double abs_tol) {
    return std::fabs(got - want) <= abs_tol + rel * std::fabs(want);
}

int main() {
    const int n = 2000, threads = 128, blocks = (n + threads - 1) / threads;
    std::vector<float> of(n), oh(n);
    std::vector<double> od(n);
    float *dof, *doh;
    double* dod;
    CHECK(cudaMalloc(&dof, n * sizeof(float)));
    CHECK(cudaMalloc(&doh, n * sizeof(float)));
    CHECK(cudaMalloc(&dod, n * sizeof(double)));
    witness_reset();
    precision_kernel<<<blocks, threads>>>(n, dof, dod, doh);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(of.data(), dof, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(od.data(), dod, n * sizeof(double), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(oh.data(), doh, n * sizeof(float), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        double x = input_of(i); // the exact float input, widened
        double rf = std::sin(x) * std::cos(x) + std::exp(x * 0.25) - std::sqrt(std::fabs(x) + 1.0);
        double rd = std::sin(x) + std::cos(x * 0.5) * std::exp(x * 0.125) + std::sqrt(x * x + 2.0);
        double h = x * 0.5; // exactly representable in half
        double rh = ((h * h + 1.0) * 0.5 - (h + 1.0)) + (2.0 * h * h) + 2.0 + (h > 0.0 ? 1.0 : 0.0);
        bool ok = close_to(of[i], rf, 1e-5, 1e-5) && close_to(od[i], rd, 1e-13, 1e-13) &&
                  close_to(oh[i], rh, 1e-2, 2e-2);
        if (!ok) {
            if (bad < 5)
                std::fprintf(stderr, "mismatch at %d: f %.9g/%.9g d %.17g/%.17g h %g/%g\n", i,
                             of[i], rf, od[i], rd, oh[i], rh);
            ++bad;
        }
    }
    CHECK(cudaFree(dof));
    CHECK(cudaFree(doh));
    CHECK(cudaFree(dod));
    return report_result(bad, "precision");
}
