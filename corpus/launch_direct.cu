// launch_direct.cu — the same kernels launched through the runtime API call
// cudaLaunchKernel((const void*)kernel, grid, block, args, shmem, stream) with a
// hand-built argument array, and with the <<<>>> syntax; both results checked.
// Also a parameterless kernel launched with args == nullptr and with <<<>>>.
#include "witness.cuh"
#include <vector>

// Dynamic shared memory holds the block's x values; each thread mixes in its
// right neighbour (wrapping inside the block). Even i are witnessed.
__global__ void mix(int n, float a, const float* x, float* y) {
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    tile[threadIdx.x] = v;
    __syncthreads();
    if (i < n) {
        float nb = tile[(threadIdx.x + 1) % blockDim.x];
        if (i % 2 == 0) {
            witness();
            y[i] = a * v + nb;
        } else {
            y[i] = a * v - nb;
        }
    }
}

__device__ int ticks[64];

__global__ void tick() {
    if (threadIdx.x < 40) witness();
    ticks[threadIdx.x] += 1 + (threadIdx.x & 3);
}

static std::vector<float> cpu_mix(int n, int block, float a, const std::vector<float>& x) {
    std::vector<float> y(n);
    for (int i = 0; i < n; ++i) {
        int base = i / block * block, j = base + (i - base + 1) % block;
        float nb = j < n ? x[j] : 0.0f;
        y[i] = (i % 2 == 0) ? a * x[i] + nb : a * x[i] - nb;
    }
    return y;
}

int main() {
    int n = 3000;
    const int block = 128, grid = (n + block - 1) / block;
    const size_t shmem = block * sizeof(float);
    std::vector<float> x(n), y1(n), y2(n);
    for (int i = 0; i < n; ++i) x[i] = (float)(i % 23) - 11.0f;
    float *dx, *dy1, *dy2;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy1, n * sizeof(float)));
    CHECK(cudaMalloc(&dy2, n * sizeof(float)));
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    int zeros[64] = {0};
    CHECK(cudaMemcpyToSymbol(ticks, zeros, sizeof(zeros)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    witness_reset();

    // 1) cudaLaunchKernel with a hand-built argument array, on a stream.
    float a1 = 1.5f;
    void* args[] = {&n, &a1, &dx, &dy1};
    CHECK(cudaLaunchKernel((const void*)mix, dim3(grid), dim3(block), args, shmem, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaLaunchKernel((const void*)tick, dim3(1), dim3(64), nullptr, 0, s));
    CHECK(cudaStreamSynchronize(s));

    // 2) The same kernels with <<<>>> on the default stream.
    float a2 = -0.5f;
    mix<<<grid, block, shmem>>>(n, a2, dx, dy2);
    CHECK_LAUNCH();
    tick<<<1, 64>>>();
    CHECK_LAUNCH();

    int t[64];
    CHECK(cudaMemcpy(y1.data(), dy1, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(y2.data(), dy2, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpyFromSymbol(t, ticks, sizeof(t)));
    witness_report();

    long bad = 0;
    std::vector<float> r1 = cpu_mix(n, block, a1, x), r2 = cpu_mix(n, block, a2, x);
    for (int i = 0; i < n; ++i) bad += (y1[i] != r1[i]) + (y2[i] != r2[i]); // exact: small halves
    for (int i = 0; i < 64; ++i) bad += t[i] != 2 * (1 + (i & 3));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(dx)); CHECK(cudaFree(dy1)); CHECK(cudaFree(dy2));
    return report_result(bad, "cudaLaunchKernel vs <<<>>>");
}
