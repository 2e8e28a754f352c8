// nbody.cu — all-pairs gravitational n-body in single precision: each thread owns a body, the
// block stages 256 bodies at a time in shared memory, softened 1/r^3 with rsqrtf, then a
// semi-implicit Euler step. Positions and velocities are ping-ponged.
// Check: the warm-up step from the initial state, and the last timed step from the GPU's
// previous state, for 256 sampled bodies each (plus bodies 0 and n-1) against a double-precision
// CPU sum over all bodies; every position finite.
#include "bench.cuh"

#define NB_THREADS 256
#define SOFTENING2 1e-4f
#define DT 1e-3f

__global__ void nbody_step(const float4* __restrict__ pos, const float4* __restrict__ vel,
                           float4* __restrict__ pos_out, float4* __restrict__ vel_out, int n) {
    __shared__ float4 tile[NB_THREADS];
    const int i = blockIdx.x * NB_THREADS + threadIdx.x;
    const float4 p = i < n ? pos[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    float ax = 0.f, ay = 0.f, az = 0.f;
    for (int base = 0; base < n; base += NB_THREADS) {
        const int j = base + threadIdx.x;
        tile[threadIdx.x] = j < n ? pos[j] : make_float4(0.f, 0.f, 0.f, 0.f); // mass 0: no force
        __syncthreads();
#pragma unroll 4
        for (int k = 0; k < NB_THREADS; ++k) {
            const float4 q = tile[k];
            const float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
            const float d2 = dx * dx + dy * dy + dz * dz + SOFTENING2;
            const float inv = rsqrtf(d2);
            const float s = q.w * inv * inv * inv;
            ax += dx * s;
            ay += dy * s;
            az += dz * s;
        }
        __syncthreads();
    }
    if (i < n) {
        float4 v = vel[i];
        v.x += ax * DT;
        v.y += ay * DT;
        v.z += az * DT;
        vel_out[i] = v;
        pos_out[i] = make_float4(p.x + v.x * DT, p.y + v.y * DT, p.z + v.z * DT, p.w);
    }
}

// Checks body i of (pos_out, vel_out) = one step from (pos, vel), in double precision.
static void check_body(Checker& check, const char* what, int i, const std::vector<float4>& pos,
                       const std::vector<float4>& vel, const std::vector<float4>& pos_out,
                       const std::vector<float4>& vel_out) {
    const int n = (int)pos.size();
    double a[3] = {0, 0, 0}, mag = 0;
    const float4 p = pos[i];
    for (int j = 0; j < n; ++j) {
        double dx = (double)pos[j].x - p.x, dy = (double)pos[j].y - p.y, dz = (double)pos[j].z - p.z;
        double d2 = dx * dx + dy * dy + dz * dz + (double)SOFTENING2;
        double s = pos[j].w / (d2 * std::sqrt(d2));
        a[0] += dx * s;
        a[1] += dy * s;
        a[2] += dz * s;
        mag += std::sqrt(dx * dx + dy * dy + dz * dz) * s;
    }
    const double v[3] = {vel[i].x + a[0] * DT, vel[i].y + a[1] * DT, vel[i].z + a[2] * DT};
    const double gv[3] = {vel_out[i].x, vel_out[i].y, vel_out[i].z};
    const double gp[3] = {pos_out[i].x, pos_out[i].y, pos_out[i].z};
    const double p0[3] = {p.x, p.y, p.z};
    // float sums over n terms and rsqrtf (2 ulp): bound the error by the sum of |terms|
    const double speed = std::fabs(vel[i].x) + std::fabs(vel[i].y) + std::fabs(vel[i].z);
    const double vtol = 1e-4 * mag * DT + 1e-6 * (speed + 1e-3);
    for (int c = 0; c < 3; ++c) {
        check.close(what, 3L * i + c, gv[c], v[c], vtol);
        const double ptol = vtol * DT + 1e-6 * (std::fabs(p0[c]) + 1e-3);
        check.close(what, 3L * i + c, gp[c], p0[c] + v[c] * DT, ptol);
    }
    check.close(what, 3L * i, pos_out[i].w, p.w, 0);
}

int main() {
    bench_init("nbody");
    const int n = BENCH_SIZE(65536, 600);
    const int steps = bench_reps(BENCH_SIZE(40, 3));
    std::printf("size: n=%d steps=%d\n", n, steps);
    std::vector<float4> pos(n), vel(n);
    Rng rng(8);
    for (int i = 0; i < n; ++i) {
        float x, y, z;
        do { // uniform in the unit ball
            x = rng.sym();
            y = rng.sym();
            z = rng.sym();
        } while (x * x + y * y + z * z > 1.f);
        pos[i] = make_float4(x, y, z, (float)((0.5 + rng.uniform()) / n));
        vel[i] = make_float4(0.1f * rng.sym(), 0.1f * rng.sym(), 0.1f * rng.sym(), 0.f);
    }
    DeviceBuffer<float4> p0(n), v0(n), p1(n), v1(n);
    p0.upload(pos);
    v0.upload(vel);
    const unsigned blocks = div_up(n, NB_THREADS);
    Checker check;
    std::vector<int> sample = {0, n - 1};
    for (int s = 0; s < 256; ++s) sample.push_back((int)rng.below(n));

    LAUNCH(nbody_step, blocks, NB_THREADS)(p0.ptr, v0.ptr, p1.ptr, v1.ptr, n); // warm-up, checked
    CHECK_LAUNCH();
    {
        std::vector<float4> pw = p1.download(), vw = v1.download();
        for (int i : sample) check_body(check, "step 1", i, pos, vel, pw, vw);
    }

    KernelTimer timer;
    timer.start();
    float4 *pin = p0.ptr, *vin = v0.ptr, *pout = p1.ptr, *vout = v1.ptr;
    for (int s = 0; s < steps; ++s) {
        LAUNCH(nbody_step, blocks, NB_THREADS)(pin, vin, pout, vout, n);
        float4* t = pin;
        pin = pout;
        pout = t;
        t = vin;
        vin = vout;
        vout = t;
    }
    timer.stop();
    std::vector<float4> pl(n), vl(n), pb(n), vb(n);
    CHECK(cudaMemcpy(pl.data(), pin, n * sizeof(float4), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(vl.data(), vin, n * sizeof(float4), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(pb.data(), pout, n * sizeof(float4), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(vb.data(), vout, n * sizeof(float4), cudaMemcpyDeviceToHost));
    for (int i : sample) check_body(check, "last step", i, pb, vb, pl, vl);
    for (int i = 0; i < n; ++i)
        if (!std::isfinite(pl[i].x) || !std::isfinite(pl[i].y) || !std::isfinite(pl[i].z))
            check.close("finite", i, pl[i].x + pl[i].y + pl[i].z, 0, 1e30);
    return bench_finish(timer, check, "nbody bodies");
}
