// vector_loads.cu — vector loads/stores of float4, double2 and int2, read-only
// loads through __ldg (ld.global.nc) and a __restrict__ const pointer.
#include "witness.cuh"
#include <vector>

__host__ __device__ inline float4 f4_op(float4 v, int2 k) {
    return make_float4(v.w + (float)k.x, v.z * 2.0f, v.y - (float)k.y, v.x * v.w);
}
__host__ __device__ inline double2 d2_op(double2 d, float4 v) {
    return make_double2(d.y * 0.5 + (double)v.x, d.x - d.y + (double)v.z);
}
__host__ __device__ inline int2 i2_op(int2 k, int i) { return make_int2(k.y ^ i, k.x + k.y * 3); }

__global__ void vector_kernel(const float4* a, const double2* b, const int2* __restrict__ c,
                              float4* oa, double2* ob, int2* oc, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 v = __ldg(&a[i]);   // ld.global.nc.v4.f32
    double2 d = __ldg(&b[i]);  // ld.global.nc.v2.f64
    int2 k = c[i];             // const __restrict__: may also become ld.global.nc.v2
    if (k.x > k.y) WITNESS(); // data-dependent witnessed path
    oa[i] = f4_op(v, k);       // st.global.v4.f32
    ob[i] = d2_op(d, v);       // st.global.v2.f64
    oc[i] = i2_op(k, i);       // st.global.v2.u32
}

int main() {
    const int n = 1200, threads = 128, blocks = (n + threads - 1) / threads;
    std::vector<float4> a(n), oa(n);
    std::vector<double2> b(n), ob(n);
    std::vector<int2> c(n), oc(n);
    for (int i = 0; i < n; ++i) {
        // Small integers and halves: every result is exact in float/double.
        a[i] = make_float4((float)(i % 7), (float)(i % 11) * 0.5f, (float)(i % 5) - 2.0f, (float)(i % 3));
        b[i] = make_double2((double)(i % 13), (double)(i % 17) - 8.0);
        c[i] = make_int2((i * 31) % 97, (i * 17) % 89);
    }
    float4* da; double2* db; int2* dc;
    float4* doa; double2* dob; int2* doc;
    CHECK(cudaMalloc(&da, n * sizeof(float4)));
    CHECK(cudaMalloc(&db, n * sizeof(double2)));
    CHECK(cudaMalloc(&dc, n * sizeof(int2)));
    CHECK(cudaMalloc(&doa, n * sizeof(float4)));
    CHECK(cudaMalloc(&dob, n * sizeof(double2)));
    CHECK(cudaMalloc(&doc, n * sizeof(int2)));
    CHECK(cudaMemcpy(da, a.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), n * sizeof(double2), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dc, c.data(), n * sizeof(int2), cudaMemcpyHostToDevice));
    witness_reset();
    vector_kernel<<<blocks, threads>>>(da, db, dc, doa, dob, doc, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(oa.data(), doa, n * sizeof(float4), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(ob.data(), dob, n * sizeof(double2), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(oc.data(), doc, n * sizeof(int2), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        float4 ra = f4_op(a[i], c[i]);
        double2 rb = d2_op(b[i], a[i]);
        int2 rc = i2_op(c[i], i);
        if (oa[i].x != ra.x || oa[i].y != ra.y || oa[i].z != ra.z || oa[i].w != ra.w ||
            ob[i].x != rb.x || ob[i].y != rb.y || oc[i].x != rc.x || oc[i].y != rc.y) {
            if (bad < 5) std::fprintf(stderr, "mismatch at %d\n", i);
            ++bad;
        }
    }
    CHECK(cudaFree(da)); CHECK(cudaFree(db)); CHECK(cudaFree(dc));
    CHECK(cudaFree(doa)); CHECK(cudaFree(dob)); CHECK(cudaFree(doc));
    return report_result(bad, "vector_loads");
}
