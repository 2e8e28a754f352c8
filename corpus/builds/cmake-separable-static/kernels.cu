// cmake-separable-static/kernels.cu: the library's kernel calls scale(), defined in scale.cu;
// run_kernels() is all the C++ executable sees.
#include "witness.cuh"
#include <vector>

__device__ int scale(int v);

__global__ void apply(int n, int* values) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        witness();
        values[i] = scale(values[i]);
    }
}

int run_kernels() {
    const int n = 1000;
    std::vector<int> values(n), result(n);
    for (int i = 0; i < n; ++i) values[i] = (i * 7) % 23;
    int* device = nullptr;
    CHECK(cudaMalloc(&device, n * sizeof(int)));
    CHECK(cudaMemcpy(device, values.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    apply<<<(n + 255) / 256, 256>>>(n, device);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(result.data(), device, n * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        int v = values[i];
        if (result[i] != (v % 4 == 1 ? 3 * v : v + 2)) ++bad;
    }
    CHECK(cudaFree(device));
    return report_result(bad, "apply");
}
