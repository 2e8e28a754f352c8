// stencil3d.cu — 7-point Jacobi sweeps on an nx x ny x nz float grid with fixed boundary values;
// a 2-D grid of 32x8 threads covers an xy-plane and each thread marches along z, keeping the
// cells below, at and above in registers. Ping-pong buffers.
// Check: as stencil2d — the warm-up sweep from the initial grid on every cell, then the last
// timed sweep from the GPU's previous state on every cell plus a range check (or a full replay
// where that is cheap).
#include "bench.cuh"

__host__ __device__ inline float stencil7(float c, float xm, float xp, float ym, float yp, float zm,
                                          float zp) {
    return 0.4f * c + 0.1f * ((xm + xp) + (ym + yp) + (zm + zp));
}

__global__ void jacobi7(const float* __restrict__ in, float* __restrict__ out, int nx, int ny,
                        int nz) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    const size_t plane = (size_t)nx * ny;
    const size_t col = (size_t)y * nx + x;
    const bool edge = x == 0 || y == 0 || x == nx - 1 || y == ny - 1;
    float below = in[col], here = in[plane + col];
    out[col] = below;
    for (int z = 1; z < nz - 1; ++z) {
        const size_t i = z * plane + col;
        const float above = in[i + plane];
        out[i] = edge ? here
                      : stencil7(here, in[i - 1], in[i + 1], in[i - nx], in[i + nx], below, above);
        below = here;
        here = above;
    }
    out[(nz - 1) * plane + col] = here;
}

static void cpu_sweep(const std::vector<float>& in, std::vector<float>& out, int nx, int ny,
                      int nz) {
    const size_t plane = (size_t)nx * ny;
    for (int z = 0; z < nz; ++z)
        for (int y = 0; y < ny; ++y)
            for (int x = 0; x < nx; ++x) {
                size_t i = z * plane + (size_t)y * nx + x;
                if (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1) {
                    out[i] = in[i];
                    continue;
                }
                out[i] = stencil7(in[i], in[i - 1], in[i + 1], in[i - nx], in[i + nx],
                                  in[i - plane], in[i + plane]);
            }
}

static void compare(Checker& check, const char* what, const std::vector<float>& got,
                    const std::vector<float>& want, double tol) {
    for (size_t i = 0; i < got.size(); ++i) check.close(what, (long)i, got[i], want[i], tol);
}

int main() {
    bench_init("stencil3d");
    const int nx = BENCH_SIZE(384, 37), ny = BENCH_SIZE(384, 19), nz = BENCH_SIZE(384, 11);
    const int steps = bench_reps(BENCH_SIZE(800, 5));
    std::printf("size: nx=%d ny=%d nz=%d steps=%d\n", nx, ny, nz, steps);
    const size_t cells = (size_t)nx * ny * nz;
    std::vector<float> grid(cells);
    Rng rng(3);
    for (auto& v : grid) v = (float)rng.uniform();
    for (size_t i = 0; i < (size_t)nx * ny; ++i) grid[i] = 1.0f; // a hot face
    DeviceBuffer<float> da(cells), db(cells);
    da.upload(grid);
    dim3 block(32, 8), blocks(div_up(nx, 32), div_up(ny, 8));

    Checker check;
    std::vector<float> want(cells);
    LAUNCH(jacobi7, blocks, block)(da.ptr, db.ptr, nx, ny, nz); // warm-up, checked
    CHECK_LAUNCH();
    cpu_sweep(grid, want, nx, ny, nz);
    compare(check, "sweep1", db.download(), want, 1e-6);

    KernelTimer timer;
    timer.start();
    float *in = da.ptr, *out = db.ptr;
    for (int s = 0; s < steps; ++s) {
        LAUNCH(jacobi7, blocks, block)(in, out, nx, ny, nz);
        float* t = in;
        in = out;
        out = t;
    }
    timer.stop();
    std::vector<float> last(cells), before(cells);
    CHECK(cudaMemcpy(last.data(), in, cells * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(before.data(), out, cells * sizeof(float), cudaMemcpyDeviceToHost));
    if ((double)cells * steps <= 5e7) { // replay everything
        std::vector<float> cur = grid;
        for (int s = 0; s < steps; ++s) {
            cpu_sweep(cur, want, nx, ny, nz);
            cur.swap(want);
        }
        compare(check, "grid", last, cur, 1e-5);
    } else {
        cpu_sweep(before, want, nx, ny, nz);
        compare(check, "last sweep", last, want, 1e-6);
        for (size_t i = 0; i < cells; ++i) {
            if (!(last[i] >= -1e-6f && last[i] <= 1.000001f)) check.close("range", (long)i, last[i], 0.5, 0.5);
        }
    }
    return bench_finish(timer, check, "stencil3d cells");
}
