// inline_ptx.cu — inline PTX (asm volatile) blocks that open their own { }
// scope, declare local .reg variables, define labels made unique with %= and
// contain predicated branches (a loop and a forward skip). Each asm helper is
// inlined several times into one kernel, so the labels must not collide.
#include "witness.cuh"
#include <vector>

// Count set bits with an explicit PTX loop: LOOP/DONE labels, @p bra.
__device__ __forceinline__ unsigned ptx_bitcount(unsigned x) {
    unsigned count;
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        ".reg .u32 t, c, b;\n\t"
        "mov.u32 t, %1;\n\t"
        "mov.u32 c, 0;\n"
        "BITS_LOOP_%=:\n\t"
        "setp.eq.u32 p, t, 0;\n\t"
        "@p bra BITS_DONE_%=;\n\t"
        "and.b32 b, t, 1;\n\t"
        "add.u32 c, c, b;\n\t"
        "shr.u32 t, t, 1;\n\t"
        "bra BITS_LOOP_%=;\n"
        "BITS_DONE_%=:\n\t"
        "mov.u32 %0, c;\n\t"
        "}"
        : "=r"(count)
        : "r"(x));
    return count;
}

// Clamp to [lo, hi] with forward predicated branches and a nested scope.
__device__ __forceinline__ int ptx_clamp(int v, int lo, int hi) {
    int r;
    // %0 is written only by the last instruction, so no early-clobber ("=&r",
    // which nvcc rejects) is needed.
    asm volatile(
        "{\n\t"
        ".reg .pred plo, phi;\n\t"
        ".reg .s32 res;\n\t"
        "mov.s32 res, %1;\n\t"
        "setp.ge.s32 plo, %1, %2;\n\t"
        "@plo bra CLAMP_HI_%=;\n\t"
        "mov.s32 res, %2;\n\t"
        "bra.uni CLAMP_END_%=;\n"
        "CLAMP_HI_%=:\n\t"
        "{\n\t"
        ".reg .s32 tmp;\n\t"
        "min.s32 tmp, %1, %3;\n\t"
        "setp.gt.s32 phi, %1, %3;\n\t"
        "@phi mov.s32 res, tmp;\n\t"
        "}\n"
        "CLAMP_END_%=:\n\t"
        "mov.s32 %0, res;\n\t"
        "}"
        : "=r"(r)
        : "r"(v), "r"(lo), "r"(hi));
    return r;
}

static unsigned host_bitcount(unsigned x) {
    unsigned c = 0;
    for (; x; x >>= 1) c += x & 1u;
    return c;
}
static int host_clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

__global__ void ptx_kernel(const unsigned* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = in[i];
    unsigned a = ptx_bitcount(v);          // instance 1
    unsigned b = ptx_bitcount(v ^ 0x5555u); // instance 2
    int c = ptx_clamp((int)(v % 2001u) - 1000, -300, 300);   // instance 1
    int d = ptx_clamp((int)a * 40 - (int)b * 25, -100, 100); // instance 2
    if (a > b) WITNESS(); // data-dependent witnessed path
    out[i] = (int)(a * 100 + b) + c * 1000 + d * 7;
}

int main() {
    const int n = 1500, threads = 96, blocks = (n + threads - 1) / threads;
    std::vector<unsigned> in(n);
    std::vector<int> out(n, 0);
    for (int i = 0; i < n; ++i) in[i] = (unsigned)i * 2246822519u + 374761393u;
    unsigned* din;
    int* dout;
    CHECK(cudaMalloc(&din, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    CHECK(cudaMemcpy(din, in.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
    witness_reset();
    ptx_kernel<<<blocks, threads>>>(din, dout, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        unsigned v = in[i];
        unsigned a = host_bitcount(v), b = host_bitcount(v ^ 0x5555u);
        int c = host_clamp((int)(v % 2001u) - 1000, -300, 300);
        int d = host_clamp((int)a * 40 - (int)b * 25, -100, 100);
        int ref = (int)(a * 100 + b) + c * 1000 + d * 7;
        if (out[i] != ref) {
            if (bad < 5) std::fprintf(stderr, "mismatch at %d: got %d want %d\n", i, out[i], ref);
            ++bad;
        }
    }
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    return report_result(bad, "inline_ptx");
}
