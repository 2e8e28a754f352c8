// Written for nvcc: host min/max on mixed types, time() without <time.h>, narrowing in a brace
// initialiser, a string literal followed by a macro.
#include <cstdio>
#include <cstdlib>
#include <omp.h>

#define FMT "%d\n"
int helper_value();

__global__ void scale(int *data, int n, unsigned factor) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = min(data[i], 1000) * (int)factor;
}

int main() {
    srand((unsigned)time(NULL));
    int n = 256;
    unsigned cap = 100;
    double scale_f = 2.0;
    int dims[2] = {n, scale_f}; // narrowing: nvcc warns, clang errors without the shim
    int limit = min(n, cap);    // host min(int, unsigned)
    int *d = nullptr;
    if (cudaMalloc(&d, n * sizeof(int)) != cudaSuccess) {
        std::printf("CUDA error: cudaMalloc failed: no device\n");
        return 2;
    }
    int h[256];
#pragma omp parallel for
    for (int i = 0; i < n; ++i) h[i] = i;
    cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
    scale<<<(n + 63) / 64, 64>>>(d, n, dims[1]);
    cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
    bool ok = limit == 100 && helper_value() == 42;
    for (int i = 0; i < n; ++i) ok = ok && h[i] == min(i, 1000) * 2;
    std::printf("limit "FMT, limit);
    std::printf(ok ? "result: PASS\n" : "result: FAIL\n");
    return ok ? 0 : 1;
}
