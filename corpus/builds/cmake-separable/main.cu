// cmake-separable/main.cu: the kernel calls scale() and reads `offset`, both defined in
// scale.cu; both units have a static helper() and a static `bias` of their own (each set by
// its own unit's host code) and instantiate twice<int>.
#include "witness.cuh"
#include "twice.cuh"
#include <vector>

__device__ int scale(int v);
extern __device__ int offset;
void set_scale_bias(int value);

static __device__ int bias;
static __device__ int helper(int v) { return v + bias; }

__global__ void apply(int n, int* values) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        witness();
        values[i] = helper(scale(values[i])) + twice(offset);
    }
}

int main() {
    const int n = 700;
    const int host_offset = 5;
    std::vector<int> values(n), result(n);
    for (int i = 0; i < n; ++i) values[i] = (i * 5) % 31;
    int* device = nullptr;
    CHECK(cudaMalloc(&device, n * sizeof(int)));
    CHECK(cudaMemcpy(device, values.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpyToSymbol(offset, &host_offset, sizeof host_offset));
    const int main_bias = 1, scale_bias = 2;
    CHECK(cudaMemcpyToSymbol(bias, &main_bias, sizeof main_bias));
    set_scale_bias(scale_bias);
    witness_reset();
    apply<<<(n + 127) / 128, 128>>>(n, device);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(result.data(), device, n * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        int v = values[i];
        int scaled = v % 3 == 0 ? 2 * v - scale_bias : v - 1;
        if (result[i] != scaled + main_bias + 2 * host_offset) ++bad;
    }
    CHECK(cudaFree(device));
    return report_result(bad, "apply");
}
