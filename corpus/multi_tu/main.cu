// multi_tu/main.cu — host half of a two-translation-unit program: declares the
// kernels defined in kernels.cu and launches them with <<<>>>, plus one kernel of
// its own (so both TUs carry device code). Builds without -fgpu-rdc with clang++-16
// and nvcc: a <<<>>> launch only calls the kernel's host-side stub, an ordinary
// external host function defined (and registered) by kernels.cu. See README.md.
#define CORPUS_WITNESS_HOST_ONLY // the counters live in kernels.cu
#include "../witness.cuh"
#include <vector>

__global__ void k(int n, const int* in, int* out); // defined in kernels.cu
namespace mt {
__global__ void halve_even(int n, int* data); // defined in kernels.cu
}
void multi_tu_witness_reset();
void multi_tu_witness_report();

// This TU's own kernel (not witnessed: the counters are in the other module).
__global__ void fill(int n, int* in) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) in[i] = (i * 7) % 100;
}

int main() {
    const int n = 1500, block = 256, grid = (n + block - 1) / block;
    int *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    multi_tu_witness_reset();
    fill<<<grid, block>>>(n, din);
    CHECK_LAUNCH();
    k<<<grid, block>>>(n, din, dout); // cross-TU launch
    CHECK_LAUNCH();
    mt::halve_even<<<grid, block>>>(n, dout); // cross-TU launch, namespaced
    CHECK_LAUNCH();
    std::vector<int> out(n);
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    multi_tu_witness_report();

    long bad = 0;
    for (int i = 0; i < n; ++i) {
        int v = (i * 7) % 100;
        int r = v % 3 == 0 ? v * v : v + 1;
        if (r % 2 == 0) r /= 2;
        if (out[i] != r) ++bad;
    }
    CHECK(cudaFree(din)); CHECK(cudaFree(dout));
    return report_result(bad, "cross-TU kernels");
}
