// switch_dense.cu — a dense 12-case switch on a data-dependent key, with
// distinct work per case so the back end cannot fold it into a lookup table.
#include "witness.cuh"
#include <vector>

// Shared by the kernel and the CPU reference; WITNESS() is a no-op on the host.
__host__ __device__ inline int classify(int v, int neighbour) {
    int r;
    switch ((v ^ (v >> 4)) % 12) {
    case 0: WITNESS(); r = v * 3 + 1; break;
    case 1: r = v / 7 - neighbour; break;
    case 2: r = (v << 3) ^ neighbour; break;
    case 3: WITNESS(); r = neighbour % 13 + v % 5; break;
    case 4: r = v > neighbour ? v - neighbour : neighbour - v; break;
    case 5: r = (v & 0xff) * (neighbour & 0xf); break;
    case 6: r = v % 9 == 0 ? 1000 : v + 17; break;
    case 7: WITNESS(); r = (v | neighbour) - (v & neighbour); break;
    case 8: r = v * v - 3 * neighbour; break; // v < 40000: no overflow
    case 9: r = (v >> 2) + (neighbour >> 1) + 99; break;
    case 10: r = v / 3 * neighbour % 1021; break;
    case 11: WITNESS(); r = ~v & 0x7fff; break;
    default: r = -1; break; // unreachable for v >= 0
    }
    return r;
}

__global__ void switch_kernel(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = classify(in[i], in[(i + 1) % n]);
}

int main() {
    const int n = 3000, threads = 128, blocks = (n + threads - 1) / threads;
    std::vector<int> in(n), out(n, 0);
    unsigned s = 12345u;
    for (int i = 0; i < n; ++i) {
        s = s * 1103515245u + 12345u;
        in[i] = (int)((s >> 8) % 40000u);
    }
    int *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    switch_kernel<<<blocks, threads>>>(din, dout, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        int ref = classify(in[i], in[(i + 1) % n]);
        if (out[i] != ref) {
            if (bad < 5) std::fprintf(stderr, "mismatch at %d: got %d want %d\n", i, out[i], ref);
            ++bad;
        }
    }
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    return report_result(bad, "switch_dense");
}
