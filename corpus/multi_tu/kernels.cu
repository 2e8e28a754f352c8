// multi_tu/kernels.cu — device half of a two-translation-unit program: defines
// the kernels that main.cu launches with <<<>>> (main.cu only declares them).
// No launch wrappers here: the launch expressions are all in main.cu.
// This TU owns the witness counters (main.cu includes witness.cuh with
// CORPUS_WITNESS_HOST_ONLY), so it also exports the reset/report helpers.
#include "../witness.cuh"

// out[i] = in[i] * in[i] for multiples of 3 (witnessed), in[i] + 1 otherwise.
__global__ void k(int n, const int* in, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    if (v % 3 == 0) {
        witness();
        out[i] = v * v;
    } else {
        out[i] = v + 1;
    }
}

namespace mt {
// A namespaced kernel (mangled name with a namespace) launched from main.cu too.
__global__ void halve_even(int n, int* data) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && data[i] % 2 == 0) {
        witness();
        data[i] /= 2;
    }
}
} // namespace mt

// The counters are this TU's __device__ variables, so only this TU can reach them.
void multi_tu_witness_reset() { witness_reset(); }
void multi_tu_witness_report() { witness_report(); }
