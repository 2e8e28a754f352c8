// Old-style CUDA: `register` in a kernel and a deprecated runtime call (nvcc warns once for
// the call, not at all for `register`).
#include <cuda_runtime.h>

__global__ void square(int *data, int n) {
    register int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = i * i;
}

int run_on_gpu(int *out, int n) {
    int *d = 0;
    cudaError_t e = cudaMalloc(&d, n * sizeof(int));
    if (e != cudaSuccess) return (int)e;
    square<<<(n + 127) / 128, 128>>>(d, n);
    e = cudaThreadSynchronize();
    if (e == cudaSuccess) e = cudaMemcpy(out, d, n * sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d);
    return (int)e;
}
