// A stand-in for a suite app, for benchmarks/tests/test_suites.py: y = a * x + y, three
// launches of one kernel over n elements, checked on the host; writes y to a file.
//   ./add N A OUT
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void scale_add(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

int main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s N A OUT\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    float a = (float)atof(argv[2]);
    float *x = (float*)malloc(n * sizeof(float)), *y = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; ++i) {
        x[i] = (float)(i % 7);
        y[i] = 1.0f;
    }
    float *dx, *dy;
    if (cudaMalloc(&dx, n * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&dy, n * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "error: cudaMalloc failed\n");
        return 2;
    }
    cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
    for (int launch = 0; launch < 3; ++launch) scale_add<<<(n + 127) / 128, 128>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    int bad = 0;
    FILE* out = fopen(argv[3], "w");
    for (int i = 0; i < n; ++i) {
        if (y[i] != 1.0f + 3.0f * a * (float)(i % 7)) ++bad;
        fprintf(out, "%g\n", y[i]);
    }
    fclose(out);
    printf(bad ? "add: FAIL %d\n" : "add: PASS\n", bad);
    return bad != 0;
}
