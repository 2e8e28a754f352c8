// cmake-shared/plugin.cu: a module the executable loads with dlopen.
#include "shared.h"
#include "witness.cuh"

__global__ void halve_multiples_of_four(int n, int* values) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (int k = 0; k < 2; ++k) {
        if (values[i] % 4 == 0) {
            witness();
            values[i] /= 2;
        }
    }
}

extern "C" long plugin_run(int* values, int n, unsigned* threads, unsigned long long* warps) {
    int* device = nullptr;
    CHECK(cudaMalloc(&device, n * sizeof(int)));
    CHECK(cudaMemcpy(device, values, n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    halve_multiples_of_four<<<(n + 127) / 128, 128>>>(n, device);
    CHECK_LAUNCH();
    int* result = new int[n];
    CHECK(cudaMemcpy(result, device, n * sizeof(int), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        int v = values[i];
        for (int k = 0; k < 2; ++k)
            if (v % 4 == 0) v /= 2;
        if (result[i] != v) ++bad;
        values[i] = result[i];
    }
    delete[] result;
    CHECK(cudaFree(device));
    CHECK(cudaMemcpyFromSymbol(threads, witness_threads, sizeof(*threads)));
    CHECK(cudaMemcpyFromSymbol(warps, witness_warps, sizeof(*warps)));
    return bad;
}
