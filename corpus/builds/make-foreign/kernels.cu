// make-foreign/kernels.cu: the kernels and their launcher; scale_factor comes from C.
#include "witness.cuh"

extern "C" int scale_factor(int n);

__global__ void scale_evens(int n, int factor, int* values) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (values[i] % 2 == 0) {
            witness();
            values[i] *= factor;
        }
    }
}

long run_kernels(int* values, int n) {
    int factor = scale_factor(n);
    int* device = nullptr;
    CHECK(cudaMalloc(&device, n * sizeof(int)));
    CHECK(cudaMemcpy(device, values, n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    scale_evens<<<4, 96>>>(n, factor, device);
    CHECK_LAUNCH();
    int* result = new int[n];
    CHECK(cudaMemcpy(result, device, n * sizeof(int), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int i = 0; i < n; ++i)
        if (result[i] != (values[i] % 2 == 0 ? values[i] * factor : values[i])) ++bad;
    delete[] result;
    CHECK(cudaFree(device));
    witness_report();
    return bad;
}
