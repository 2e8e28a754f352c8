// saxpy.cu — the bundled example: SAXPY plus a grid-stride block reduction.
#include "witness.cuh"
#include <vector>

__global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        witness();
        y[i] = a * x[i] + y[i];
    }
}

// Each block sums a grid-stride slice of y into partial[blockIdx.x].
__global__ void reduce(int n, const float* y, float* partial) {
    __shared__ float buf[256];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        acc += y[i];
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        witness();
        partial[blockIdx.x] = buf[0];
    }
}

int main() {
    const int n = 5000, threads = 256, blocks = (n + threads - 1) / threads, rblocks = 8;
    const float a = 2.5f;
    std::vector<float> x(n), y(n), out(n), partial(rblocks);
    for (int i = 0; i < n; ++i) { x[i] = (float)(i % 17); y[i] = (float)(i % 5) - 2.0f; }
    float *dx, *dy, *dp;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMalloc(&dp, rblocks * sizeof(float)));
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    witness_reset();
    saxpy<<<blocks, threads>>>(n, a, dx, dy);
    CHECK_LAUNCH();
    reduce<<<rblocks, threads>>>(n, dy, dp);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(partial.data(), dp, rblocks * sizeof(float), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    double sum = 0.0, ref_sum = 0.0;
    for (int i = 0; i < n; ++i) {
        float ref = a * x[i] + y[i];
        if (out[i] != ref) ++bad;
        ref_sum += ref;
    }
    for (int b = 0; b < rblocks; ++b) sum += partial[b];
    // All values are small integers/halves, so float sums are exact.
    if (sum != ref_sum) ++bad;
    CHECK(cudaFree(dx)); CHECK(cudaFree(dy)); CHECK(cudaFree(dp));
    return report_result(bad, "saxpy/reduce");
}
