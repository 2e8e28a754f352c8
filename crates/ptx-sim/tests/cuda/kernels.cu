// Kernels run by tests/clang.rs through the PTX interpreter; each test compares with a Rust
// reference computation.
#include <cassert>

__device__ int loop_work(int v) {
    int acc = 0;
    int trips = v % 23;
    for (int j = 0; j < trips; ++j) {
        if ((j ^ v) % 3 == 0) continue;
        if (acc > 400 + v % 100) break;
        for (int k = 0; k <= j % 5; ++k) {
            acc += ((j * k) ^ v) & 15;
            if (acc % 97 == 96) break;
        }
    }
    unsigned x = (unsigned)v + 1u;
    int steps = 0;
    while (x != 1u && steps < 150) {
        x = (x & 1u) ? 3u * x + 1u : x / 2u;
        ++steps;
    }
    int digits = 0;
    int y = v;
    do {
        digits += y % 10;
        y /= 10;
    } while (y != 0);
    return acc * 1000 + steps * 10 + digits % 10;
}

extern "C" __global__ void loops(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = loop_work(in[i]);
}

extern "C" __global__ void block_reduce(const int* in, unsigned long long* out, int n) {
    __shared__ int buf[256];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) atomicAdd(out, (unsigned long long)buf[0]);
}

extern "C" __global__ void warp_sum(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}

extern "C" __global__ void switchy(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    int r;
    switch (v & 15) {
        case 0: r = v * 3; break;
        case 1: r = v ^ 0x55; break;
        case 2: r = v >> 2; break;
        case 3: r = v - 7; break;
        case 4: r = v * v; break;
        case 5: r = ~v; break;
        case 6: r = v / 3; break;
        case 7: r = v % 5; break;
        case 8: r = v + 100; break;
        case 9: r = v << 3; break;
        case 10: r = -v; break;
        case 11: r = v & 0xF0; break;
        default: r = 1; break;
    }
    out[i] = r;
}

extern "C" __global__ void transpose(const float* in, float* out, int w, int h) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < w && y + j < h) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < h && y + j < w) out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}

__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

extern "C" __global__ void fibs(int* out) { out[threadIdx.x] = fib(threadIdx.x % 12); }

extern "C" __global__ void checks(const int* data) { assert(data[threadIdx.x] >= 0); }

extern "C" __global__ void matmul(const float* a, const float* b, float* c, int n) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k) acc += a[row * n + k] * b[k * n + col];
        c[row * n + col] = acc;
    }
}

extern "C" __global__ void dyn_shared(int* out) {
    extern __shared__ int s[];
    s[threadIdx.x] = threadIdx.x * 2;
    __syncthreads();
    out[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void saxpy_d(const double* x, double* y, double a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
