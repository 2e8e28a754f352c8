// launch_loops.cu — loops of one block whose trips follow from the launch: an induction
// variable that starts at a value computed from thread and CTA indices and parameters, is
// stepped by a launch value and tested against one. cuda-flux counts them on the host from each
// launch (`LoopTrips`), like the guards around them, with no counter code: a grid-stride loop
// (SHOC's reduction: two elements per thread, a stride of the whole grid) launched with fewer
// elements than threads, with as many and with many more; a 64-bit grid-stride loop (its index
// a sum of 32-bit indices widened to 64 bits, exactly in every launch: `mul.wide`, `cvt`), and
// one whose index widens a 32-bit global index, which wraps in a large enough grid (not
// followed: counted on the device, a control); a loop over a tile's rows with a literal step (a stencil's halo rows: some rows take two trips, some
// one) and one with a step of `blockDim.y` over a parameter's rows; a loop counting down by a
// parameter's step, tested with `>=` on a signed index; a chunk of `n / gridDim.x` elements per
// CTA walked with a stride of `blockDim.x` (Parboil histo's prescan); what clang makes of a
// parameter-bounded loop it unrolls (a main loop and a remainder, tested with `!=`); a loop bounded by a parameter that every
// thread runs the same number of times (also zero; clang counts it down to zero with `!=`, so
// only nvcc's build takes it from the launch). Witnessed with witness_predicated(), which
// adds no branch, so each loop stays one block.
#include "witness.cuh"
#include <vector>

__global__ void grid_stride(const float* in, float* out, unsigned n) {
    unsigned i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
    const unsigned grid = blockDim.x * 2 * gridDim.x;
    float sum = 0.0f;
#pragma unroll 1
    while (i < n) {
        sum += in[i];
        witness_predicated();
        i += grid;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

__global__ void grid_stride_64(const float* in, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.0f;
#pragma unroll 1
    for (; i < n; i += (long long)blockDim.x * gridDim.x) {
        sum += 2.0f * in[i];
        witness_predicated();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

__global__ void grid_stride_widened(const float* in, float* out, long long n) {
    long long i = blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.0f;
#pragma unroll 1
    for (; i < n; i += (long long)blockDim.x * gridDim.x) {
        sum += 3.0f * in[i];
        witness_predicated();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// Blocks of 32 x 8 threads: rows 0-1 of each CTA take two trips, rows 2-7 one.
__global__ void halo_rows(const float* in, float* out, int rows) {
    float sum = 0.0f;
#pragma unroll 1
    for (int j = threadIdx.y; j < 10; j += 8) {
        sum += in[j * 32 + threadIdx.x];
        witness_predicated();
    }
#pragma unroll 1
    for (int j = threadIdx.y; j < rows; j += blockDim.y) {
        sum += 0.5f * in[j * 32 + threadIdx.x];
        witness_predicated();
    }
    out[(blockIdx.x * blockDim.y + threadIdx.y) * 32 + threadIdx.x] = sum;
}

__global__ void count_down(const int* in, int* out, int n, int step) {
    int acc = 0;
#pragma unroll 1
    for (int i = n - 1 - (int)threadIdx.x; i >= 0; i -= step) {
        acc += in[i];
        witness_predicated();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// Parboil histo's prescan: each CTA walks the first eighth of its chunk of n / gridDim.x
// elements with a stride of the CTA (its start reads the CTA index, its distance to the bound
// does not).
__global__ void chunks(const float* in, float* out, int n) {
    const int chunk = n / (int)gridDim.x;
    const int end = blockIdx.x * chunk + chunk / 8;
    float sum = 0.0f;
#pragma unroll 1
    for (int i = blockIdx.x * chunk + threadIdx.x; i < end; i += blockDim.x) {
        sum += in[i];
        witness_predicated();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// What clang makes of a parameter-bounded loop it unrolls by four (Polybench's GEMM): a main
// loop counting up by 4 to `n & -4` and a remainder loop counting `n & 3` down to zero, both
// tested with `!=`, written out.
__global__ void unrolled(const float* in, float* out, int n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    int k = 0;
    if ((n & -4) != 0) {
#pragma unroll 1
        do {
            acc += (in[k] + in[k + 1] + in[k + 2] + in[k + 3]) * (float)(t + 1);
            witness_predicated();
            k += 4;
        } while (k != (n & -4));
    }
    int rest = n & 3;
    if (rest != 0) {
#pragma unroll 1
        do {
            acc += in[k++] * (float)(t + 1);
            witness_predicated();
            rest -= 1;
        } while (rest != 0);
    }
    out[t] = acc;
}

__global__ void same_trips(const int* in, int* out, int n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    int acc = t;
#pragma unroll 1
    for (int k = 0; k < n; ++k) {
        acc = acc * 3 + in[k];
        witness_predicated();
    }
    out[t] = acc;
}

int main() {
    long bad = 0;
    auto expect = [&](const char* what, int index, double got, double want) {
        if (got != want) {
            if (bad < 5)
                std::fprintf(stderr, "%s[%d]: got %g want %g\n", what, index, got, want);
            ++bad;
        }
    };
    const int elements = 6000;
    std::vector<float> in(elements);
    for (int k = 0; k < elements; ++k) in[k] = (float)(k % 17);
    std::vector<int> ints(elements);
    for (int k = 0; k < elements; ++k) ints[k] = k % 11 - 5;
    float *d_in, *d_out;
    int *d_ints, *d_iout;
    CHECK(cudaMalloc(&d_in, elements * sizeof(float)));
    CHECK(cudaMalloc(&d_out, elements * sizeof(float)));
    CHECK(cudaMalloc(&d_ints, elements * sizeof(int)));
    CHECK(cudaMalloc(&d_iout, elements * sizeof(int)));
    CHECK(cudaMemcpy(d_in, in.data(), elements * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_ints, ints.data(), elements * sizeof(int), cudaMemcpyHostToDevice));
    std::vector<float> out(elements);
    std::vector<int> iout(elements);
    witness_reset();

    // Grid-stride: 5 CTAs of 96 threads (a partial warp each) cover 960 elements a stride.
    for (unsigned n : {700u, 960u, 5000u}) {
        grid_stride<<<5, 96>>>(d_in, d_out, n);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(out.data(), d_out, 480 * sizeof(float), cudaMemcpyDeviceToHost));
        for (int t = 0; t < 480; ++t) {
            const int cta = t / 96, lane = t % 96;
            float want = 0.0f;
            for (unsigned i = cta * 192 + lane; i < n; i += 960) want += in[i];
            expect("grid_stride", t, out[t], want);
        }
    }
    for (long long n : {100LL, 4099LL}) {
        grid_stride_64<<<3, 128>>>(d_in, d_out, n);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(out.data(), d_out, 384 * sizeof(float), cudaMemcpyDeviceToHost));
        for (int t = 0; t < 384; ++t) {
            float want = 0.0f;
            for (long long i = t; i < n; i += 384) want += 2.0f * in[i];
            expect("grid_stride_64", t, out[t], want);
        }
        grid_stride_widened<<<3, 128>>>(d_in, d_out, n);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(out.data(), d_out, 384 * sizeof(float), cudaMemcpyDeviceToHost));
        for (int t = 0; t < 384; ++t) {
            float want = 0.0f;
            for (long long i = t; i < n; i += 384) want += 3.0f * in[i];
            expect("grid_stride_widened", t, out[t], want);
        }
    }
    for (int rows : {3, 20}) {
        halo_rows<<<2, dim3(32, 8)>>>(d_in, d_out, rows);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(out.data(), d_out, 512 * sizeof(float), cudaMemcpyDeviceToHost));
        for (int t = 0; t < 512; ++t) {
            const int y = (t / 32) % 8, x = t % 32;
            float want = 0.0f;
            for (int j = y; j < 10; j += 8) want += in[j * 32 + x];
            for (int j = y; j < rows; j += 8) want += 0.5f * in[j * 32 + x];
            expect("halo_rows", t, out[t], want);
        }
    }
    for (int step : {1, 7, 64}) {
        count_down<<<2, 64>>>(d_ints, d_iout, 300, step);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(iout.data(), d_iout, 128 * sizeof(int), cudaMemcpyDeviceToHost));
        for (int t = 0; t < 128; ++t) {
            int want = 0;
            for (int i = 300 - 1 - t % 64; i >= 0; i -= step) want += ints[i];
            expect("count_down", t, iout[t], want);
        }
    }
    // Chunks of 400 (an eighth: 50, over 32 threads) and 1500 (187, over 5 to 6 trips).
    for (int n : {2000, 6000}) {
        chunks<<<4, 32>>>(d_in, d_out, n);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(out.data(), d_out, 128 * sizeof(float), cudaMemcpyDeviceToHost));
        for (int t = 0; t < 128; ++t) {
            const int cta = t / 32, chunk = n / 4;
            float want = 0.0f;
            for (int i = cta * chunk + t % 32; i < cta * chunk + chunk / 8; i += 32) want += in[i];
            expect("chunks", t, out[t], want);
        }
    }
    for (int n : {0, 3, 4, 11, 64}) {
        unrolled<<<2, 48>>>(d_in, d_out, n);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(out.data(), d_out, 96 * sizeof(float), cudaMemcpyDeviceToHost));
        for (int t = 0; t < 96; ++t) {
            float want = 0.0f;
            int k = 0;
            for (; k < (n & -4); k += 4)
                want += (in[k] + in[k + 1] + in[k + 2] + in[k + 3]) * (float)(t + 1);
            for (; k < n; ++k) want += in[k] * (float)(t + 1);
            expect("unrolled", t, out[t], want);
        }
    }
    for (int n : {0, 9}) {
        same_trips<<<2, 48>>>(d_ints, d_iout, n);
        CHECK_LAUNCH();
        CHECK(cudaMemcpy(iout.data(), d_iout, 96 * sizeof(int), cudaMemcpyDeviceToHost));
        for (int t = 0; t < 96; ++t) {
            int want = t;
            for (int k = 0; k < n; ++k) want = want * 3 + ints[k];
            expect("same_trips", t, iout[t], want);
        }
    }
    witness_report(true);
    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_out));
    CHECK(cudaFree(d_ints));
    CHECK(cudaFree(d_iout));
    return report_result(bad, "launch_loops");
}
