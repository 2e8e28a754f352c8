// cmake-static/kernels.cu: the library's kernels and their host launchers.
#include "kernels.h"
#include "witness.cuh"

__global__ void square_threes_kernel(int n, int* values) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = values[i];
    if (v % 3 == 0) {
        witness();
        values[i] = v * v;
    } else {
        values[i] = v + 1;
    }
}

long square_threes(int* values, int n) {
    int* device = nullptr;
    CHECK(cudaMalloc(&device, n * sizeof(int)));
    CHECK(cudaMemcpy(device, values, n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    square_threes_kernel<<<(n + 127) / 128, 128>>>(n, device);
    CHECK_LAUNCH();
    long bad = 0;
    int* result = new int[n];
    CHECK(cudaMemcpy(result, device, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
        int v = values[i];
        if (result[i] != (v % 3 == 0 ? v * v : v + 1)) ++bad;
        values[i] = result[i];
    }
    delete[] result;
    CHECK(cudaFree(device));
    return bad;
}

void report_witness() { witness_report(); }
