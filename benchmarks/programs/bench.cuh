// bench.cuh — shared helpers for the cuda-flux benchmark programs (benchmarks/programs/*.cu).
//
// Every program: calls bench_init() first (so that, without a usable device, it stops at once
// with a `CUDA error: ...` line and exit status 2), makes its inputs from a fixed seed, runs one
// untimed warm-up launch, times its kernel launches with CUDA events (KernelTimer), checks the
// result against a CPU reference (Checker), and ends with bench_finish(), which prints
//     kernel_ms: <total milliseconds between the timer's events>
//     result: PASS                      (exit status 0)
//     result: FAIL <n> mismatches (<what>)   (exit status 1)
//
// Kernels are launched with LAUNCH(kernel, grid, block)(args...), which is kernel<<<grid,
// block>>>(args...). BENCH_SIZE(full, small) picks the problem size: `small` only for the
// tests that run the programs on cuda-flux's CPU target (benchmarks/tests/cpu_target.sh,
// BENCH_SMALL). BENCH_REPS_SCALE=<factor> in the environment scales the repetition counts
// the programs pass through bench_reps() (for tuning run times on a new GPU without rebuilding).
#ifndef CUDA_FLUX_BENCH_CUH
#define CUDA_FLUX_BENCH_CUH

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>
#define LAUNCH(kernel, grid, block) kernel<<<(grid), (block)>>>

#ifdef BENCH_SMALL
#define BENCH_SIZE(full, small) (small)
#else
#define BENCH_SIZE(full, small) (full)
#endif

// Abort with a clear message when a CUDA runtime call fails.
#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t check_err_ = (call);                                                     \
        if (check_err_ != cudaSuccess) {                                                     \
            std::fprintf(stderr, "CUDA error: %s failed at %s:%d: %s (%s)\n", #call,         \
                         __FILE__, __LINE__, cudaGetErrorName(check_err_),                   \
                         cudaGetErrorString(check_err_));                                    \
            std::exit(2);                                                                    \
        }                                                                                    \
    } while (0)

// Check a kernel launch (configuration errors) and its execution.
#define CHECK_LAUNCH()                                                                       \
    do {                                                                                     \
        CHECK(cudaGetLastError());                                                           \
        CHECK(cudaDeviceSynchronize());                                                      \
    } while (0)

// First CUDA calls of every program: fail fast (status 2) where there is no usable device.
static inline void bench_init(const char* name) {
    int devices = 0;
    CHECK(cudaGetDeviceCount(&devices));
    if (devices < 1) {
        std::fprintf(stderr, "CUDA error: no CUDA device\n");
        std::exit(2);
    }
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0)); // create the context now, outside any timed region
    std::printf("bench: %s\n", name);
}

static inline int bench_reps(int reps) {
    const char* scale = std::getenv("BENCH_REPS_SCALE");
    if (scale == nullptr) return reps;
    int scaled = (int)(reps * std::atof(scale) + 0.5);
    return scaled < 1 ? 1 : scaled;
}

// Accumulates the time between start() and stop() over all timed regions.
struct KernelTimer {
    cudaEvent_t begin, end;
    double total_ms = 0;
    KernelTimer() {
        CHECK(cudaEventCreate(&begin));
        CHECK(cudaEventCreate(&end));
    }
    ~KernelTimer() {
        cudaEventDestroy(begin);
        cudaEventDestroy(end);
    }
    void start() { CHECK(cudaEventRecord(begin)); }
    void stop() {
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(end));
        CHECK(cudaEventSynchronize(end));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, begin, end));
        total_ms += ms;
    }
};

// Counts mismatches against the CPU reference; reports the first few on stderr.
struct Checker {
    long checked = 0;
    long failures = 0;
    void fail_report(const char* what, long index, double got, double want, double tol) {
        if (failures < 8)
            std::fprintf(stderr, "mismatch: %s[%ld] = %.10g, expected %.10g (tolerance %.3g)\n",
                         what, index, got, want, tol);
        ++failures;
    }
    // |got - want| <= tol (NaN never passes).
    bool close(const char* what, long index, double got, double want, double tol) {
        ++checked;
        if (std::fabs(got - want) <= tol) return true;
        fail_report(what, index, got, want, tol);
        return false;
    }
    bool equal(const char* what, long index, long long got, long long want) {
        ++checked;
        if (got == want) return true;
        fail_report(what, index, (double)got, (double)want, 0);
        return false;
    }
};

static inline int bench_finish(const KernelTimer& timer, const Checker& checker, const char* what) {
    std::printf("kernel_ms: %.3f\n", timer.total_ms);
    std::printf("checked: %ld values\n", checker.checked);
    if (checker.failures == 0 && checker.checked > 0) {
        std::printf("result: PASS\n");
        std::fflush(stdout);
        return 0;
    }
    std::printf("result: FAIL %ld mismatches (%s)\n", checker.failures, what);
    std::fflush(stdout);
    return 1;
}

// splitmix64: the programs' fixed-seed inputs.
struct Rng {
    uint64_t state;
    explicit Rng(uint64_t seed) : state(seed) {}
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    uint32_t u32() { return (uint32_t)(next() >> 32); }
    // uniform in [0, 1)
    double uniform() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }
    // uniform in [-1, 1)
    float sym() { return (float)(2.0 * uniform() - 1.0); }
    // uniform in [0, n)
    uint32_t below(uint32_t n) { return (uint32_t)(((uint64_t)u32() * n) >> 32); }
};

// Device buffer of n elements, freed at scope exit.
template <class T> struct DeviceBuffer {
    T* ptr = nullptr;
    size_t n = 0;
    explicit DeviceBuffer(size_t count) : n(count) { CHECK(cudaMalloc(&ptr, count * sizeof(T))); }
    ~DeviceBuffer() { cudaFree(ptr); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    void upload(const std::vector<T>& h) {
        CHECK(cudaMemcpy(ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
    std::vector<T> download() const {
        std::vector<T> h(n);
        CHECK(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
        return h;
    }
    void zero() { CHECK(cudaMemset(ptr, 0, n * sizeof(T))); }
};

static inline unsigned div_up(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

#endif // CUDA_FLUX_BENCH_CUH
