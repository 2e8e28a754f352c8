// cmake-shared/kernels.cu: a shared library linked into the executable.
#include "shared.h"
#include "witness.cuh"

__global__ void add_where_odd(int n, int* values) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && (values[i] & 1)) {
        witness();
        values[i] += 3;
    }
}

extern "C" long kernels_run(int* values, int n, unsigned* threads, unsigned long long* warps) {
    int* device = nullptr;
    CHECK(cudaMalloc(&device, n * sizeof(int)));
    CHECK(cudaMemcpy(device, values, n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    add_where_odd<<<(n + 63) / 64, 64>>>(n, device);
    CHECK_LAUNCH();
    int* result = new int[n];
    CHECK(cudaMemcpy(result, device, n * sizeof(int), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        if (result[i] != ((values[i] & 1) ? values[i] + 3 : values[i])) ++bad;
        values[i] = result[i];
    }
    delete[] result;
    CHECK(cudaFree(device));
    CHECK(cudaMemcpyFromSymbol(threads, witness_threads, sizeof(*threads)));
    CHECK(cudaMemcpyFromSymbol(warps, witness_warps, sizeof(*warps)));
    return bad;
}
