// cuda_emu.h — a CPU emulation of the small CUDA subset the benchmark programs use, so that their
// kernels and result checks can be run on a machine without a GPU (benchmarks/tests/emulate.sh).
// It is a test aid, not a CUDA implementation: blocks run one after another; the threads of a
// block are fibers on one OS thread (so __syncthreads and warp shuffles behave), `__shared__`
// variables are function statics (shared by the block's threads, and only one block runs at a
// time). Kernels are launched with LAUNCH(kernel, grid, block)(args...), which bench.cuh maps to
// kernel<<<grid, block>>>(args...) in real CUDA builds.
#ifndef CUDA_FLUX_BENCH_CUDA_EMU_H
#define CUDA_FLUX_BENCH_CUDA_EMU_H

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <algorithm>
#include <functional>
#include <memory>
#include <ucontext.h>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __restrict__

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) double2 {
    double x, y;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline double2 make_double2(double x, double y) { return double2{x, y}; }

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
template <class T> inline T __ldg(const T* p) { return *p; }

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace emu {

// Every CUDA thread of a block is a fiber (ucontext) on the calling OS thread; a fiber runs until
// it reaches __syncthreads or a warp shuffle (or returns), then the next one runs. A barrier is
// released when every thread of the block (warp) that has not returned waits at it; when no
// barrier can be released the launch is deadlocked (for example a __syncthreads that only some
// threads reach), which the emulation reports and aborts on.
enum class State { Runnable, AtBlockBarrier, AtWarpBarrier, Done };

struct Fiber {
    ucontext_t ctx;
    State state = State::Runnable;
};

struct Launch {
    const std::function<void()>* fn = nullptr;
    std::vector<Fiber> fibers;
    std::vector<uint64_t> slots; // 32 per warp, for shuffles
    ucontext_t scheduler;
};

inline Launch* current = nullptr;
inline int linear_tid = 0;

inline void wait_at(State s) {
    Fiber& f = current->fibers[linear_tid];
    f.state = s;
    swapcontext(&f.ctx, &current->scheduler);
}

inline void fiber_entry() {
    (*current->fn)();
    current->fibers[linear_tid].state = State::Done; // uc_link resumes the scheduler
}

inline int lane() { return linear_tid % 32; }

template <class T> T shuffle(T v, int src_lane) {
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    const int warp = linear_tid / 32, warp_size = std::min(32, (int)current->fibers.size() - warp * 32);
    uint64_t* slots = &current->slots[warp * 32];
    std::memcpy(&slots[lane()], &v, sizeof(T));
    wait_at(State::AtWarpBarrier);
    T r = v;
    if (src_lane >= 0 && src_lane < warp_size) std::memcpy(&r, &slots[src_lane], sizeof(T));
    wait_at(State::AtWarpBarrier);
    return r;
}

// CUDA_EMU_SKIP_KERNELS=1 in the environment: launches do nothing (to time a program's host side,
// input generation and CPU check, at full size; its result check then fails).
inline void run(dim3 grid, dim3 block, const std::function<void()>& fn) {
    static const bool skip = std::getenv("CUDA_EMU_SKIP_KERNELS") != nullptr;
    if (skip) return;
    const int threads = (int)(block.x * block.y * block.z);
    const long blocks = (long)grid.x * grid.y * grid.z;
    const size_t stack_bytes = 128 * 1024;
    static std::vector<std::unique_ptr<char[]>> stacks; // reused by every launch
    while ((int)stacks.size() < threads) stacks.emplace_back(new char[stack_bytes]);
    Launch launch;
    launch.fn = &fn;
    launch.fibers.resize(threads);
    launch.slots.resize(((threads + 31) / 32) * 32);
    current = &launch;
    blockDim = block;
    gridDim = grid;
    for (long b = 0; b < blocks; ++b) {
        blockIdx = dim3(b % grid.x, (b / grid.x) % grid.y, b / ((long)grid.x * grid.y));
        for (int t = 0; t < threads; ++t) {
            Fiber& f = launch.fibers[t];
            f.state = State::Runnable;
            getcontext(&f.ctx);
            f.ctx.uc_stack.ss_sp = stacks[t].get();
            f.ctx.uc_stack.ss_size = stack_bytes;
            f.ctx.uc_link = &launch.scheduler;
            makecontext(&f.ctx, fiber_entry, 0);
        }
        for (;;) {
            for (int t = 0; t < threads; ++t) {
                if (launch.fibers[t].state != State::Runnable) continue;
                linear_tid = t;
                threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
                swapcontext(&launch.scheduler, &launch.fibers[t].ctx);
            }
            bool released = false, all_done = true, all_at_block = true;
            for (int w = 0; w * 32 < threads; ++w) {
                bool live = false, all_at_warp = true;
                for (int t = w * 32; t < threads && t < w * 32 + 32; ++t) {
                    State s = launch.fibers[t].state;
                    if (s == State::Done) continue;
                    live = true;
                    all_at_warp = all_at_warp && s == State::AtWarpBarrier;
                }
                if (live && all_at_warp) {
                    for (int t = w * 32; t < threads && t < w * 32 + 32; ++t)
                        if (launch.fibers[t].state == State::AtWarpBarrier)
                            launch.fibers[t].state = State::Runnable;
                    released = true;
                }
            }
            if (released) continue;
            for (const Fiber& f : launch.fibers) {
                all_done = all_done && f.state == State::Done;
                all_at_block = all_at_block && (f.state == State::Done || f.state == State::AtBlockBarrier);
            }
            if (all_done) break;
            if (!all_at_block) {
                std::fprintf(stderr, "emulation: deadlock in block %ld (threads wait at different barriers)\n", b);
                std::abort();
            }
            for (Fiber& f : launch.fibers)
                if (f.state == State::AtBlockBarrier) f.state = State::Runnable;
        }
    }
    current = nullptr;
}

template <class F> struct Launcher {
    dim3 grid, block;
    F* kernel;
    template <class... A> void operator()(A... args) const {
        F* k = kernel;
        run(grid, block, [=] { k(args...); });
    }
};
template <class F> Launcher<F> make_launcher(dim3 grid, dim3 block, F* kernel) {
    return Launcher<F>{grid, block, kernel};
}

template <class T, class Op> T atomic_update(T* p, Op op) {
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(p, &old, op(old), false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
    }
    return old;
}
template <class F, class B> F atomic_float_add(F* p, F v) {
    B* bits = reinterpret_cast<B*>(p);
    B old = __atomic_load_n(bits, __ATOMIC_SEQ_CST);
    for (;;) {
        F f;
        std::memcpy(&f, &old, sizeof f);
        f += v;
        B n;
        std::memcpy(&n, &f, sizeof n);
        if (__atomic_compare_exchange_n(bits, &old, n, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            std::memcpy(&f, &old, sizeof f);
            return f;
        }
    }
}

} // namespace emu

inline void __syncthreads() { emu::wait_at(emu::State::AtBlockBarrier); }

#define LAUNCH(kernel, grid, block) ::emu::make_launcher(dim3(grid), dim3(block), kernel)

template <class T> T __shfl_sync(unsigned, T v, int src) { return emu::shuffle(v, src); }
template <class T> T __shfl_down_sync(unsigned, T v, unsigned d) {
    int l = emu::lane();
    return emu::shuffle(v, l + (int)d < 32 ? l + (int)d : l);
}
template <class T> T __shfl_up_sync(unsigned, T v, unsigned d) {
    int l = emu::lane();
    return emu::shuffle(v, l >= (int)d ? l - (int)d : l);
}
template <class T> T __shfl_xor_sync(unsigned, T v, int m) { return emu::shuffle(v, emu::lane() ^ m); }

inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline float atomicAdd(float* p, float v) { return emu::atomic_float_add<float, uint32_t>(p, v); }
inline double atomicAdd(double* p, double v) { return emu::atomic_float_add<double, uint64_t>(p, v); }
inline int atomicCAS(int* p, int cmp, int v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
inline int atomicMin(int* p, int v) {
    return emu::atomic_update(p, [v](int o) { return v < o ? v : o; });
}
inline int atomicMax(int* p, int v) {
    return emu::atomic_update(p, [v](int o) { return v > o ? v : o; });
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
    return emu::atomic_update(p, [v](unsigned o) { return v > o ? v : o; });
}
inline int atomicExch(int* p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }

// ---- runtime API ----------------------------------------------------------------------------
enum cudaError_t { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
enum cudaMemcpyKind {
    cudaMemcpyHostToHost,
    cudaMemcpyHostToDevice,
    cudaMemcpyDeviceToHost,
    cudaMemcpyDeviceToDevice,
    cudaMemcpyDefault
};
typedef void* cudaStream_t;
struct emu_event {
    std::chrono::steady_clock::time_point t;
};
typedef emu_event* cudaEvent_t;

inline const char* cudaGetErrorName(cudaError_t e) { return e ? "cudaErrorMemoryAllocation" : "cudaSuccess"; }
inline const char* cudaGetErrorString(cudaError_t e) { return e ? "out of memory" : "no error"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) {
    *n = 1;
    return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaDeviceReset() { return cudaSuccess; }
template <class T> cudaError_t cudaMalloc(T** p, size_t bytes) {
    *p = static_cast<T*>(std::malloc(bytes ? bytes : 1));
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) {
    std::free(p);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
    std::memmove(d, s, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemset(void* d, int v, size_t n) {
    std::memset(d, v, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t = 0) {
    return cudaMemset(d, v, n);
}
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
    *e = new emu_event;
    return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = 0) {
    e->t = std::chrono::steady_clock::now();
    return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
    return cudaSuccess;
}

#endif // CUDA_FLUX_BENCH_CUDA_EMU_H
