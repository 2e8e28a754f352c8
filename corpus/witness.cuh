// witness.cuh — shared helpers for the cuda-flux test corpus.
//
// Witness scheme
// --------------
// Every witnessed code path calls witness(). Each active thread executes exactly
// one `atom.global.add.u32` on witness_threads, and the first active lane of the
// warp (lowest set bit of __activemask()) executes exactly one
// `atom.global.add.u64` on witness_warps. A profiler that counts executed PTX
// instructions must therefore see, summed over the program:
//     #atom.global.add.u32 executions == witness_threads
//     #atom.global.add.u64 executions == witness_warps
// (programs that have other atomics of those exact types say so in README.md).
//
// Why the empty `asm volatile` after each atomicAdd: a compiler may lower an
// atomic whose returned value is unused to the reduction instruction
// `red.global.add.*` instead of `atom.global.add.*` (clang-16 and nvcc 11.8 were
// both observed to keep `atom` even without help, but other versions/back ends
// are free to switch). Feeding the returned value into an empty volatile asm
// statement makes it "used" in a way no optimiser can remove, so the PTX always
// has `atom.global.add.u32` / `atom.global.add.u64`. The asm statement emits no
// PTX instruction, only `// begin inline asm` / `// end inline asm` comments.
//
// The lane id comes from the %laneid special register, so the leader election is
// correct for 1-D, 2-D and 3-D blocks alike.
#ifndef CUDA_FLUX_CORPUS_WITNESS_CUH
#define CUDA_FLUX_CORPUS_WITNESS_CUH

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

// Abort with a clear message when a CUDA runtime call fails.
#define CHECK(call)                                                              \
    do {                                                                         \
        cudaError_t check_err_ = (call);                                         \
        if (check_err_ != cudaSuccess) {                                         \
            std::fprintf(stderr, "CUDA error: %s failed at %s:%d: %s (%s)\n",    \
                         #call, __FILE__, __LINE__,                              \
                         cudaGetErrorName(check_err_),                           \
                         cudaGetErrorString(check_err_));                        \
            std::exit(2);                                                        \
        }                                                                        \
    } while (0)

// Check a kernel launch (configuration errors) and its execution.
#define CHECK_LAUNCH()                                                           \
    do {                                                                         \
        CHECK(cudaGetLastError());                                               \
        CHECK(cudaDeviceSynchronize());                                          \
    } while (0)

// A translation unit that defines CORPUS_WITNESS_HOST_ONLY gets only CHECK,
// CHECK_LAUNCH and report_result: no counters (so that, without -fgpu-rdc, only
// one TU of a multi-TU program defines them; see multi_tu/).
#ifndef CORPUS_WITNESS_HOST_ONLY

#ifdef CORPUS_WITNESS_EXTERN
// Separable compilation (-rdc=true, -fgpu-rdc): one unit defines the counters, the others
// define CORPUS_WITNESS_EXTERN and use them (see builds/cmake-separable/).
extern __device__ unsigned witness_threads;
extern __device__ unsigned long long witness_warps;
#else
__device__ unsigned witness_threads;
__device__ unsigned long long witness_warps;
#endif

__device__ __forceinline__ unsigned witness_lane_id() {
    unsigned lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

#ifdef CORPUS_WITNESS_MODES
// Mode witnesses (only with -DCORPUS_WITNESS_MODES): the same two counts restricted to the
// threads that CUDA_FLUX_MODE=cta counts (linear CTA id 0 of each launch) and to those that
// CUDA_FLUX_MODE=warp counts (linear thread id < 32 of linear CTA 0). They use
// `atom.global.inc.u32` (predicated, no branch), never `atom.global.add.*`, so the witness
// invariant above holds.
__device__ unsigned witness_cta_threads;
__device__ unsigned witness_cta_warps;
__device__ unsigned witness_warp_threads;
__device__ unsigned witness_warp_warps;

// Adds 1 to `counter` in every active thread where `condition` is true, without a branch
// (a predicated atom.global.inc.u32), so that witness_predicated() stays branch-free too.
__device__ __forceinline__ void witness_count_if(unsigned* counter, unsigned condition) {
    asm volatile("{\n\t"
                 ".reg .pred p;\n\t"
                 ".reg .b32 old;\n\t"
                 ".reg .b64 address;\n\t"
                 "setp.ne.u32 p, %1, 0;\n\t"
                 "cvta.to.global.u64 address, %0;\n\t"
                 "@p atom.global.inc.u32 old, [address], -1;\n\t"
                 "}" ::"l"(counter), "r"(condition)
                 : "memory");
}

__device__ __forceinline__ void witness_modes(bool leader) {
    unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned in_cta = cta == 0;
    unsigned in_warp = in_cta & (tid < 32);
    unsigned lead = leader;
    witness_count_if(&witness_cta_threads, in_cta);
    witness_count_if(&witness_cta_warps, in_cta & lead);
    witness_count_if(&witness_warp_threads, in_warp);
    witness_count_if(&witness_warp_warps, in_warp & lead);
}
#endif

__device__ __forceinline__ void witness() {
    unsigned mask = __activemask();
    unsigned old_t = atomicAdd(&witness_threads, 1u);
    asm volatile("" ::"r"(old_t)); // keep atom.global.add.u32 (not red)
    bool leader = witness_lane_id() == (unsigned)(__ffs(mask) - 1);
    if (leader) {
        unsigned long long old_w = atomicAdd(&witness_warps, 1ull);
        asm volatile("" ::"l"(old_w)); // keep atom.global.add.u64 (not red)
    }
#ifdef CORPUS_WITNESS_MODES
    witness_modes(leader);
#endif
}

// witness_predicated(): the same counts without a branch, for code that must stay
// branch-free (a loop whose branches are all warp-uniform stays one for cuda-flux's
// counter placement). Every active thread does the atom.global.add.u32; the
// atom.global.add.u64 is issued by every active thread but predicated on the
// first active lane, so it executes `threads` times at thread level and `warps`
// times at warp level (the witness line says `predicated`).
__device__ __forceinline__ void witness_predicated() {
    unsigned old_t = atomicAdd(&witness_threads, 1u);
    asm volatile("" ::"r"(old_t)); // keep atom.global.add.u32 (not red)
    asm volatile("{\n\t"
                 ".reg .pred leader;\n\t"
                 ".reg .b32 active, lower;\n\t"
                 ".reg .b64 address, old;\n\t"
                 "activemask.b32 active;\n\t"
                 "mov.u32 lower, %%lanemask_lt;\n\t"
                 "and.b32 lower, lower, active;\n\t"
                 "setp.eq.u32 leader, lower, 0;\n\t"
                 "cvta.to.global.u64 address, %0;\n\t"
                 "@leader atom.global.add.u64 old, [address], 1;\n\t"
                 "}" ::"l"(&witness_warps)
                 : "memory");
#ifdef CORPUS_WITNESS_MODES
    witness_modes(witness_lane_id() == (unsigned)(__ffs(__activemask()) - 1));
#endif
}

// WITNESS() may be used in __host__ __device__ code shared with the CPU
// reference: it is witness() on the device and nothing on the host.
#ifdef __CUDA_ARCH__
#define WITNESS() witness()
#else
#define WITNESS() ((void)0)
#endif

// Reset the counters before the first kernel of a program.
static inline void witness_reset() {
    unsigned zt = 0;
    unsigned long long zw = 0;
    CHECK(cudaMemcpyToSymbol(witness_threads, &zt, sizeof(zt)));
    CHECK(cudaMemcpyToSymbol(witness_warps, &zw, sizeof(zw)));
#ifdef CORPUS_WITNESS_MODES
    CHECK(cudaMemcpyToSymbol(witness_cta_threads, &zt, sizeof(zt)));
    CHECK(cudaMemcpyToSymbol(witness_cta_warps, &zt, sizeof(zt)));
    CHECK(cudaMemcpyToSymbol(witness_warp_threads, &zt, sizeof(zt)));
    CHECK(cudaMemcpyToSymbol(witness_warp_warps, &zt, sizeof(zt)));
#endif
}

// Copy the counters back and print the witness line (`predicated`: the program
// uses witness_predicated()); with -DCORPUS_WITNESS_MODES also
// `witness-cta: threads=N warps=M` and `witness-warp: threads=N warps=M`.
static inline void witness_report(bool predicated = false) {
    unsigned t = 0;
    unsigned long long w = 0;
    CHECK(cudaMemcpyFromSymbol(&t, witness_threads, sizeof(t)));
    CHECK(cudaMemcpyFromSymbol(&w, witness_warps, sizeof(w)));
    std::printf("witness: threads=%u warps=%llu%s\n", t, w, predicated ? " predicated" : "");
#ifdef CORPUS_WITNESS_MODES
    unsigned ct = 0, cw = 0, wt = 0, ww = 0;
    CHECK(cudaMemcpyFromSymbol(&ct, witness_cta_threads, sizeof(ct)));
    CHECK(cudaMemcpyFromSymbol(&cw, witness_cta_warps, sizeof(cw)));
    CHECK(cudaMemcpyFromSymbol(&wt, witness_warp_threads, sizeof(wt)));
    CHECK(cudaMemcpyFromSymbol(&ww, witness_warp_warps, sizeof(ww)));
    std::printf("witness-cta: threads=%u warps=%u\n", ct, cw);
    std::printf("witness-warp: threads=%u warps=%u\n", wt, ww);
#endif
}

#endif // CORPUS_WITNESS_HOST_ONLY

// Print the verdict; returns the process exit status.
static inline int report_result(long failures, const char* what) {
    if (failures == 0) {
        std::printf("result: PASS\n");
        return 0;
    }
    std::printf("result: FAIL %ld mismatches (%s)\n", failures, what);
    return 1;
}

#endif // CUDA_FLUX_CORPUS_WITNESS_CUH
