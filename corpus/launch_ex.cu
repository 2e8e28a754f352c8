// launch_ex.cu — launches through cudaLaunchKernelEx (CUDA 11.8+), which calls
// cudaLaunchKernelExC with a cudaLaunchConfig_t: once on a stream with a launch
// attribute (a priority hint, which changes nothing in the results), once with
// no attributes on the default stream. Both results are checked; every thread
// with i < n is witnessed.
#include "witness.cuh"
#include <vector>

__global__ void affine(float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        witness();
        x[i] = a * x[i] + b;
    }
}

int main() {
    const int n1 = 1000, n2 = 77, block = 128;
    std::vector<float> h(n1);
    for (int i = 0; i < n1; ++i) h[i] = (float)(i % 17);
    float* d = nullptr;
    CHECK(cudaMalloc(&d, n1 * sizeof(float)));
    CHECK(cudaMemcpy(d, h.data(), n1 * sizeof(float), cudaMemcpyHostToDevice));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    witness_reset();

    // 1) On a stream, with one launch attribute.
    cudaLaunchAttribute attrs[1];
    attrs[0].id = cudaLaunchAttributePriority;
    attrs[0].val.priority = 0;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((n1 + block - 1) / block);
    config.blockDim = dim3(block);
    config.stream = s;
    config.attrs = attrs;
    config.numAttrs = 1;
    CHECK(cudaLaunchKernelEx(&config, affine, d, 2.0f, 1.0f, n1));
    CHECK(cudaStreamSynchronize(s));

    // 2) Default stream, no attributes, a partial last warp.
    cudaLaunchConfig_t plain = {};
    plain.gridDim = dim3(1);
    plain.blockDim = dim3(block);
    CHECK(cudaLaunchKernelEx(&plain, affine, d, -1.0f, 0.5f, n2));
    CHECK_LAUNCH();

    std::vector<float> out(n1);
    CHECK(cudaMemcpy(out.data(), d, n1 * sizeof(float), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    for (int i = 0; i < n1; ++i) {
        float v = 2.0f * h[i] + 1.0f;
        if (i < n2) v = -1.0f * v + 0.5f;
        bad += out[i] != v; // exact: small integers and halves
    }
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d));
    return report_result(bad, "cudaLaunchKernelEx");
}
