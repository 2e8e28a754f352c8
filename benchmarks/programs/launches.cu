// launches.cu — launch-bound: tens of thousands of launches of four tiny kernels (8 blocks of 256
// threads, a few integer operations per thread) in a fixed cycle on two small arrays, with a
// device synchronisation every 1000 launches. What it measures is the cost of a launch.
// Check: the final arrays against a CPU replay of the same launch sequence (exact, 32-bit
// wrap-around arithmetic).
#include "bench.cuh"

#define ELEMS 2048

__host__ __device__ inline void op0(unsigned& a, unsigned& b, unsigned i) { a = a * 1664525u + b + i; }
__host__ __device__ inline void op1(unsigned& a, unsigned& b, unsigned) { b ^= a >> 7; }
__host__ __device__ inline void op2(unsigned& a, unsigned& b, unsigned i) { a += (b << 3) | (i & 7u); }
__host__ __device__ inline void op3(unsigned&, unsigned& b, unsigned step) { b = b * 22695477u + step; }

__global__ void k0(unsigned* a, unsigned* b) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    op0(a[i], b[i], i);
}
__global__ void k1(unsigned* a, unsigned* b) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    op1(a[i], b[i], i);
}
__global__ void k2(unsigned* a, unsigned* b) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    op2(a[i], b[i], i);
}
__global__ void k3(unsigned* a, unsigned* b, unsigned step) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    op3(a[i], b[i], step);
}

int main() {
    bench_init("launches");
    const int launches = bench_reps(BENCH_SIZE(40000, 400));
    std::printf("size: launches=%d elements=%d\n", launches, ELEMS);
    std::vector<unsigned> a(ELEMS), b(ELEMS);
    for (unsigned i = 0; i < ELEMS; ++i) {
        a[i] = i * 2654435761u;
        b[i] = ~i;
    }
    DeviceBuffer<unsigned> da(ELEMS), db(ELEMS);
    const unsigned blocks = ELEMS / 256;
    da.upload(a);
    db.upload(b);
    LAUNCH(k0, blocks, 256)(da.ptr, db.ptr); // warm-up: every kernel once
    LAUNCH(k1, blocks, 256)(da.ptr, db.ptr);
    LAUNCH(k2, blocks, 256)(da.ptr, db.ptr);
    LAUNCH(k3, blocks, 256)(da.ptr, db.ptr, 0u);
    CHECK_LAUNCH();
    da.upload(a);
    db.upload(b);

    KernelTimer timer;
    timer.start();
    for (int l = 0; l < launches; ++l) {
        switch (l % 4) {
        case 0: LAUNCH(k0, blocks, 256)(da.ptr, db.ptr); break;
        case 1: LAUNCH(k1, blocks, 256)(da.ptr, db.ptr); break;
        case 2: LAUNCH(k2, blocks, 256)(da.ptr, db.ptr); break;
        default: LAUNCH(k3, blocks, 256)(da.ptr, db.ptr, (unsigned)l); break;
        }
        if (l % 1000 == 999) CHECK(cudaDeviceSynchronize());
    }
    timer.stop();
    std::vector<unsigned> ga = da.download(), gb = db.download();

    for (int l = 0; l < launches; ++l) {
        switch (l % 4) {
        case 0: for (unsigned i = 0; i < ELEMS; ++i) op0(a[i], b[i], i); break;
        case 1: for (unsigned i = 0; i < ELEMS; ++i) op1(a[i], b[i], i); break;
        case 2: for (unsigned i = 0; i < ELEMS; ++i) op2(a[i], b[i], i); break;
        default: for (unsigned i = 0; i < ELEMS; ++i) op3(a[i], b[i], (unsigned)l); break;
        }
    }
    Checker check;
    for (unsigned i = 0; i < ELEMS; ++i) {
        check.equal("a", i, ga[i], a[i]);
        check.equal("b", i, gb[i], b[i]);
    }
    return bench_finish(timer, check, "launch sequence");
}
