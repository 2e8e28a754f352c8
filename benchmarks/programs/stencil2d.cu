// stencil2d.cu — 9-point Jacobi sweeps on an nx x ny float grid with fixed boundary values; each
// block stages its 32x8 tile plus a one-cell halo in shared memory. Ping-pong buffers.
// Check: the warm-up sweep from the initial grid against the CPU on every cell; after the timed
// sweeps, the last sweep (state T from the GPU's state T-1) on every cell, and every value within
// the initial range (the stencil is an average). Where the whole run is cheap on the CPU (the
// small test size), every sweep is replayed instead.
#include "bench.cuh"

#define BX 32
#define BY 8

__host__ __device__ inline float stencil9(float c, float n, float s, float e, float w, float ne,
                                          float nw, float se, float sw) {
    return 0.5f * c + 0.1f * ((n + s) + (e + w)) + 0.025f * ((ne + nw) + (se + sw));
}

__global__ void jacobi9(const float* __restrict__ in, float* __restrict__ out, int nx, int ny) {
    __shared__ float tile[BY + 2][BX + 2];
    const int x0 = blockIdx.x * BX - 1, y0 = blockIdx.y * BY - 1;
    for (int j = threadIdx.y; j < BY + 2; j += BY) {
        for (int i = threadIdx.x; i < BX + 2; i += BX) {
            int gx = x0 + i, gy = y0 + j;
            gx = gx < 0 ? 0 : (gx >= nx ? nx - 1 : gx);
            gy = gy < 0 ? 0 : (gy >= ny ? ny - 1 : gy);
            tile[j][i] = in[(size_t)gy * nx + gx];
        }
    }
    __syncthreads();
    const int x = x0 + 1 + threadIdx.x, y = y0 + 1 + threadIdx.y;
    if (x >= nx || y >= ny) return;
    const int i = threadIdx.x + 1, j = threadIdx.y + 1;
    float v = tile[j][i];
    if (x > 0 && y > 0 && x < nx - 1 && y < ny - 1)
        v = stencil9(v, tile[j - 1][i], tile[j + 1][i], tile[j][i + 1], tile[j][i - 1],
                     tile[j - 1][i + 1], tile[j - 1][i - 1], tile[j + 1][i + 1], tile[j + 1][i - 1]);
    out[(size_t)y * nx + x] = v;
}

static void cpu_sweep(const std::vector<float>& in, std::vector<float>& out, int nx, int ny) {
    for (int y = 0; y < ny; ++y)
        for (int x = 0; x < nx; ++x) {
            size_t i = (size_t)y * nx + x;
            if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
                out[i] = in[i];
                continue;
            }
            out[i] = stencil9(in[i], in[i - nx], in[i + nx], in[i + 1], in[i - 1], in[i - nx + 1],
                              in[i - nx - 1], in[i + nx + 1], in[i + nx - 1]);
        }
}

static void compare(Checker& check, const char* what, const std::vector<float>& got,
                    const std::vector<float>& want, double tol) {
    for (size_t i = 0; i < got.size(); ++i) check.close(what, (long)i, got[i], want[i], tol);
}

int main() {
    bench_init("stencil2d");
    const int nx = BENCH_SIZE(6144, 70), ny = BENCH_SIZE(6144, 45);
    const int steps = bench_reps(BENCH_SIZE(1500, 6));
    std::printf("size: nx=%d ny=%d steps=%d\n", nx, ny, steps);
    const size_t cells = (size_t)nx * ny;
    std::vector<float> grid(cells);
    Rng rng(2);
    for (auto& v : grid) v = (float)rng.uniform();
    for (int x = 0; x < nx; ++x) grid[x] = 1.0f; // a hot edge
    DeviceBuffer<float> da(cells), db(cells);
    da.upload(grid);
    dim3 block(BX, BY), blocks(div_up(nx, BX), div_up(ny, BY));

    Checker check;
    std::vector<float> want(cells);
    LAUNCH(jacobi9, blocks, block)(da.ptr, db.ptr, nx, ny); // warm-up, checked
    CHECK_LAUNCH();
    cpu_sweep(grid, want, nx, ny);
    compare(check, "sweep1", db.download(), want, 1e-6);

    KernelTimer timer;
    timer.start();
    float *in = da.ptr, *out = db.ptr;
    for (int s = 0; s < steps; ++s) {
        LAUNCH(jacobi9, blocks, block)(in, out, nx, ny);
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
            cpu_sweep(cur, want, nx, ny);
            cur.swap(want);
        }
        compare(check, "grid", last, cur, 1e-5);
    } else {
        cpu_sweep(before, want, nx, ny);
        compare(check, "last sweep", last, want, 1e-6);
        for (size_t i = 0; i < cells; ++i) {
            if (!(last[i] >= -1e-6f && last[i] <= 1.000001f)) check.close("range", (long)i, last[i], 0.5, 0.5);
        }
    }
    return bench_finish(timer, check, "stencil2d cells");
}
