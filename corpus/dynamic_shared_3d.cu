// dynamic_shared_3d.cu — dynamic shared memory (extern __shared__, size given at
// launch) with a 3-D grid of 3-D blocks: a 7-point stencil over each block's
// tile (neighbours outside the tile are ignored), then a second shared-memory
// phase that reverses the tile along z.
#include "witness.cuh"
#include <vector>

constexpr int BX = 8, BY = 4, BZ = 4; // 128 threads; one warp per z slice
constexpr int GX = 3, GY = 2, GZ = 2;
constexpr int NX = BX * GX, NY = BY * GY, NZ = BZ * GZ;

__host__ __device__ inline float input_of(int x, int y, int z) {
    return (float)((x * 7 + y * 13 + z * 29) % 19) - 9.0f;
}

__global__ void stencil3d(const float* in, float* out) {
    extern __shared__ float smem[]; // 2 * blockDim.x*y*z floats
    float* tile = smem;
    float* second = smem + blockDim.x * blockDim.y * blockDim.z;
    int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    int x = blockIdx.x * blockDim.x + tx;
    int y = blockIdx.y * blockDim.y + ty;
    int z = blockIdx.z * blockDim.z + tz;
    int lid = tx + blockDim.x * (ty + blockDim.y * tz);
    int sx = 1, sy = blockDim.x, sz = blockDim.x * blockDim.y;
    tile[lid] = in[x + NX * (y + NY * z)];
    __syncthreads();
    float s = tile[lid] * 6.0f;
    if (tx > 0) s -= tile[lid - sx];
    if (tx + 1 < (int)blockDim.x) s -= tile[lid + sx];
    if (ty > 0) s -= tile[lid - sy];
    if (ty + 1 < (int)blockDim.y) s -= tile[lid + sy];
    if (tz > 0) s -= tile[lid - sz];
    if (tz + 1 < (int)blockDim.z) s -= tile[lid + sz];
    if (((tx + ty) & 1) != 0) WITNESS(); // half of every warp
    second[lid] = s;
    __syncthreads();
    int mirror = tx + blockDim.x * (ty + blockDim.y * (blockDim.z - 1 - tz));
    if (blockIdx.z == 1) WITNESS(); // whole blocks of the upper grid layer
    out[x + NX * (y + NY * z)] = second[mirror] + (float)(blockIdx.x + blockIdx.y * 10);
}

int main() {
    const int n = NX * NY * NZ;
    std::vector<float> in(n), out(n);
    for (int z = 0; z < NZ; ++z)
        for (int y = 0; y < NY; ++y)
            for (int x = 0; x < NX; ++x) in[x + NX * (y + NY * z)] = input_of(x, y, z);
    float *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(float)));
    CHECK(cudaMalloc(&dout, n * sizeof(float)));
    CHECK(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    witness_reset();
    dim3 grid(GX, GY, GZ), block(BX, BY, BZ);
    size_t shmem = 2 * BX * BY * BZ * sizeof(float);
    stencil3d<<<grid, block, shmem>>>(din, dout);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    witness_report();
    // CPU reference: the same per-block computation (all values are small integers).
    auto at = [&](int x, int y, int z) { return in[x + NX * (y + NY * z)]; };
    long bad = 0;
    for (int z = 0; z < NZ; ++z)
        for (int y = 0; y < NY; ++y)
            for (int x = 0; x < NX; ++x) {
                int bx = x / BX, by = y / BY, bz = z / BZ, tx = x % BX, ty = y % BY, tz = z % BZ;
                int mz = bz * BZ + (BZ - 1 - tz); // the mirrored source voxel
                int mtz = BZ - 1 - tz;
                float s = at(x, y, mz) * 6.0f;
                if (tx > 0) s -= at(x - 1, y, mz);
                if (tx + 1 < BX) s -= at(x + 1, y, mz);
                if (ty > 0) s -= at(x, y - 1, mz);
                if (ty + 1 < BY) s -= at(x, y + 1, mz);
                if (mtz > 0) s -= at(x, y, mz - 1);
                if (mtz + 1 < BZ) s -= at(x, y, mz + 1);
                float ref = s + (float)(bx + by * 10);
                if (out[x + NX * (y + NY * z)] != ref) {
                    if (bad < 5) std::fprintf(stderr, "mismatch at (%d,%d,%d)\n", x, y, z);
                    ++bad;
                }
            }
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    return report_result(bad, "dynamic_shared_3d");
}
