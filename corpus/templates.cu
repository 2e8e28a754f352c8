// templates.cu — one template kernel (plus a template device helper) instantiated
// for int, float and double; each instantiation is a separate PTX .entry.
#include "witness.cuh"
#include <vector>

template <typename T>
__host__ __device__ inline T clamp_poly(T x, T lo, T hi) {
    T v = x * x / T(4) - T(3) * x + T(2); // exact for the inputs used below
    if (v < lo) {
        WITNESS(); // clamped low
        return lo;
    }
    if (v > hi) return hi;
    return v;
}

template <typename T>
__global__ void poly_kernel(const T* in, T* out, int n, T lo, T hi) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    WITNESS(); // every in-range thread, every instantiation
    out[i] = clamp_poly(in[i], lo, hi);
}

template <typename T>
long run_case(const char* name, int n, T lo, T hi) {
    const int threads = 64, blocks = (n + threads - 1) / threads;
    std::vector<T> in(n), out(n);
    for (int i = 0; i < n; ++i) in[i] = T((i * 13) % 41 - 20) * T(2); // even values: x*x/4 exact
    T *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(T)));
    CHECK(cudaMalloc(&dout, n * sizeof(T)));
    CHECK(cudaMemcpy(din, in.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    poly_kernel<T><<<blocks, threads>>>(din, dout, n, lo, hi);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(T), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        if (out[i] != clamp_poly(in[i], lo, hi)) {
            if (bad < 3) std::fprintf(stderr, "%s: mismatch at %d\n", name, i);
            ++bad;
        }
    }
    return bad;
}

int main() {
    witness_reset();
    long bad = 0;
    bad += run_case<int>("int", 1000, 0, 300);
    bad += run_case<float>("float", 777, 10.0f, 200.0f);
    bad += run_case<double>("double", 555, -1.0, 150.0);
    witness_report();
    return report_result(bad, "templates");
}
