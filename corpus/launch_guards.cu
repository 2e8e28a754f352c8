// launch_guards.cu — guards whose outcome follows from the launch: branches on thread and CTA
// indices and kernel parameters, which cuda-flux counts on the host from each launch's shape and
// parameter values instead of with counter code (`device_runtime::from_launch`). A 2-D interior
// guard (blocks of 16x16, whose warps span two rows, and 32x8, with partial CTAs at both edges),
// an early return followed by a guard on the thread index or a signed sum with a parameter
// (negative in one launch: the same kernel launched with different values), a 3-D grid with a
// condition on the CTA index alone and an unsigned bound, partial warps (CTAs of 48 threads), and
// 32-bit indices compared with 64-bit bounds (widened: sign-extended against a `long` that is
// negative, inside 32 bits or beyond them; zero-extended against an unsigned 64-bit one), and
// 64-bit indices built from 32-bit ones (a scan's tile, `(size_t)blockIdx.x * TILE +
// threadIdx.x + k * 64` unrolled, against bounds inside and beyond 32 bits; a signed offset
// from the thread index), which widen exactly in every launch (`mul.wide`, `cvt`, 64-bit adds).
// The witnesses count the truth on the device; the results are checked on the host.
#include "witness.cuh"
#include <vector>

__global__ void interior(const float* a, float* b, int n, int m) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= 1 && x < n - 1 && y >= 1 && y < m - 1) {
        witness();
        b[y * n + x] = 0.25f * (a[y * n + x - 1] + a[y * n + x + 1] + a[(y - 1) * n + x] +
                                a[(y + 1) * n + x]);
    }
}

__global__ void halves(int* out, int n, int shift) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    witness();
    if (threadIdx.x < 16 || i + shift < 0) {
        witness();
        out[i] += 1;
    }
}

// Each thread writes its own slot (no atomics: the witness's are the only `atom.add`s).
__global__ void slabs(unsigned* out, unsigned nz, unsigned first_cta) {
    unsigned z = blockIdx.z * blockDim.z + threadIdx.z;
    unsigned cta = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned slot = cta * blockDim.x * blockDim.y * blockDim.z +
                    (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    if (blockIdx.x >= first_cta) {
        if (z < nz) {
            witness();
            out[slot] = z + 1;
        }
    }
}

__global__ void widened(float* v, long n, unsigned long long limit) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x < limit) {
        if (i < n) {
            witness();
            v[i] += 1.0f;
        }
    }
}

__global__ void tiles64(unsigned* out, size_t n, long long shift) {
    const size_t base = (size_t)blockIdx.x * 256;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const size_t i = base + threadIdx.x + k * 64;
        if (i < n) {
            witness();
            out[i] += 1;
        }
    }
    const long long j = (long long)((int)threadIdx.x - 10) + shift;
    if (j >= 0) {
        witness();
        out[base + threadIdx.x] += 100;
    }
}

int main() {
    const int n = 100, m = 70;
    std::vector<float> a(n * m), b(n * m, 0.0f);
    for (int k = 0; k < n * m; ++k) a[k] = (float)(k % 13);
    float *d_a, *d_b;
    CHECK(cudaMalloc(&d_a, a.size() * sizeof(float)));
    CHECK(cudaMalloc(&d_b, b.size() * sizeof(float)));
    CHECK(cudaMemcpy(d_a, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_b, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));

    const int count = 1000;
    std::vector<int> out(count, 0);
    int* d_out;
    CHECK(cudaMalloc(&d_out, count * sizeof(int)));
    CHECK(cudaMemcpy(d_out, out.data(), count * sizeof(int), cudaMemcpyHostToDevice));

    const unsigned nz = 11;
    const dim3 slab_grid(4, 2, 3), slab_block(8, 2, 5);
    std::vector<unsigned> slab(4 * 2 * 3 * 8 * 2 * 5, 0);
    unsigned* d_slab;
    CHECK(cudaMalloc(&d_slab, slab.size() * sizeof(unsigned)));
    CHECK(cudaMemcpy(d_slab, slab.data(), slab.size() * sizeof(unsigned), cudaMemcpyHostToDevice));

    const int wide_ctas = 5, wide_threads = 64;
    std::vector<float> v(wide_ctas * wide_threads, 1.0f);
    float* d_v;
    CHECK(cudaMalloc(&d_v, v.size() * sizeof(float)));
    CHECK(cudaMemcpy(d_v, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
    const long wide_bounds[] = {300, -5, 1L << 40};
    const unsigned long long wide_limits[] = {20, 1ULL << 33, 40};

    const int tile_ctas = 3;
    std::vector<unsigned> tiles(tile_ctas * 256, 0);
    unsigned* d_tiles;
    CHECK(cudaMalloc(&d_tiles, tiles.size() * sizeof(unsigned)));
    CHECK(cudaMemcpy(d_tiles, tiles.data(), tiles.size() * sizeof(unsigned),
                     cudaMemcpyHostToDevice));
    const size_t tile_bounds[] = {0, 100, 700, (size_t)1 << 33};
    const long long tile_shifts[] = {-100, 5, 0, -30};

    witness_reset();
    interior<<<dim3((n + 15) / 16, (m + 15) / 16), dim3(16, 16)>>>(d_a, d_b, n, m);
    CHECK_LAUNCH();
    interior<<<dim3((n + 31) / 32, (m + 7) / 8), dim3(32, 8)>>>(d_a, d_b, n, m);
    CHECK_LAUNCH();
    for (int shift : {-500, 3, -500}) {
        halves<<<(count + 47) / 48 + 1, 48>>>(d_out, count, shift);
        CHECK_LAUNCH();
    }
    slabs<<<slab_grid, slab_block>>>(d_slab, nz, 1u);
    CHECK_LAUNCH();
    for (int k = 0; k < 3; ++k) {
        widened<<<wide_ctas, wide_threads>>>(d_v, wide_bounds[k], wide_limits[k]);
        CHECK_LAUNCH();
    }
    for (int k = 0; k < 4; ++k) {
        tiles64<<<tile_ctas, 64>>>(d_tiles, tile_bounds[k], tile_shifts[k]);
        CHECK_LAUNCH();
    }
    witness_report();

    CHECK(cudaMemcpy(b.data(), d_b, b.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(out.data(), d_out, count * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(slab.data(), d_slab, slab.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(v.data(), d_v, v.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(tiles.data(), d_tiles, tiles.size() * sizeof(unsigned),
                     cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int k = 0; k < 4; ++k) {
        for (int c = 0; c < tile_ctas; ++c) {
            for (int t = 0; t < 64; ++t) {
                for (int u = 0; u < 4; ++u) {
                    const size_t i = (size_t)c * 256 + t + u * 64;
                    if (i < tile_bounds[k]) tiles[i] -= 1;
                }
                if (t - 10 + tile_shifts[k] >= 0) tiles[c * 256 + t] -= 100;
            }
        }
    }
    for (unsigned left : tiles)
        if (left != 0) ++bad;
    for (int i = 0; i < wide_ctas * wide_threads; ++i) {
        float want = 1.0f;
        for (int k = 0; k < 3; ++k) {
            if ((unsigned long long)(i % wide_threads) < wide_limits[k] && i < wide_bounds[k])
                want += 1.0f;
        }
        if (v[i] != want) ++bad;
    }
    for (int y = 0; y < m; ++y) {
        for (int x = 0; x < n; ++x) {
            float want = 0.0f;
            if (x >= 1 && x < n - 1 && y >= 1 && y < m - 1)
                want = 0.25f * (a[y * n + x - 1] + a[y * n + x + 1] + a[(y - 1) * n + x] +
                                a[(y + 1) * n + x]);
            if (b[y * n + x] != want) ++bad;
        }
    }
    for (int i = 0; i < count; ++i) {
        int want = 0;
        for (int shift : {-500, 3, -500})
            if (i % 48 < 16 || i + shift < 0) ++want;
        if (out[i] != want) ++bad;
    }
    // Written where blockIdx.x >= 1 and z = blockIdx.z * 5 + threadIdx.z < 11.
    for (unsigned cz = 0; cz < slab_grid.z; ++cz)
        for (unsigned cy = 0; cy < slab_grid.y; ++cy)
            for (unsigned cx = 0; cx < slab_grid.x; ++cx)
                for (unsigned tz = 0; tz < slab_block.z; ++tz)
                    for (unsigned ty = 0; ty < slab_block.y; ++ty)
                        for (unsigned tx = 0; tx < slab_block.x; ++tx) {
                            unsigned cta = (cz * slab_grid.y + cy) * slab_grid.x + cx;
                            unsigned slot = cta * 80 + (tz * slab_block.y + ty) * slab_block.x + tx;
                            unsigned z = cz * slab_block.z + tz;
                            unsigned want = (cx >= 1 && z < nz) ? z + 1 : 0;
                            if (slab[slot] != want) ++bad;
                        }
    CHECK(cudaFree(d_a));
    CHECK(cudaFree(d_b));
    CHECK(cudaFree(d_out));
    CHECK(cudaFree(d_slab));
    CHECK(cudaFree(d_v));
    CHECK(cudaFree(d_tiles));
    return report_result(bad, "interior points, guarded increments, slab counts, widened bounds "
                              "and 64-bit tiles");
}
