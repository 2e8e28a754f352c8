// cmake-separable/main.cu: the kernel calls scale(), defined in scale.cu.
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

int main() {
    const int n = 700;
    std::vector<int> values(n), result(n);
    for (int i = 0; i < n; ++i) values[i] = (i * 5) % 31;
    int* device = nullptr;
    CHECK(cudaMalloc(&device, n * sizeof(int)));
    CHECK(cudaMemcpy(device, values.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    apply<<<(n + 127) / 128, 128>>>(n, device);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(result.data(), device, n * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    for (int i = 0; i < n; ++i)
        if (result[i] != (values[i] % 3 == 0 ? values[i] * 4 : values[i] - 1)) ++bad;
    CHECK(cudaFree(device));
    return report_result(bad, "apply");
}
