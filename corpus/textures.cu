// textures.cu — tex1Dfetch through a texture object (cudaTextureObject_t) and
// through a legacy texture reference (texture<float, 1, cudaReadModeElementType>).
// Texture references are deprecated in CUDA 11 and removed in CUDA 12: both
// clang-16 and nvcc 11.8 compile them (with deprecation warnings, silenced
// below), but define CORPUS_NO_TEXREF to build without that part.
#include "witness.cuh"
#include <cstring>
#include <vector>

#if defined(__clang__)
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
#elif defined(__NVCC__)
#pragma nv_diag_suppress 1215 // "... was declared deprecated"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

#ifndef CORPUS_NO_TEXREF
texture<float, 1, cudaReadModeElementType> tex_ref;
#endif

__global__ void tex_kernel(cudaTextureObject_t tex_obj, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = tex1Dfetch<float>(tex_obj, i);
    float b = tex1Dfetch<float>(tex_obj, (i * 5) % n); // gather
    float r = a + 2.0f * b;
#ifndef CORPUS_NO_TEXREF
    float c = tex1Dfetch(tex_ref, n - 1 - i);
    if (c > 0.0f) {
        WITNESS(); // positive reference-texture values only
        r += c;
    }
#endif
    WITNESS(); // every in-range thread
    out[i] = r;
}

int main() {
    const int n = 1000, threads = 128, blocks = (n + threads - 1) / threads;
    std::vector<float> in(n), out(n, 0.0f);
    for (int i = 0; i < n; ++i) in[i] = (float)((i * 37) % 64) - 20.0f;
    float *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(float)));
    CHECK(cudaMalloc(&dout, n * sizeof(float)));
    CHECK(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    cudaResourceDesc res;
    std::memset(&res, 0, sizeof(res));
    res.resType = cudaResourceTypeLinear;
    res.res.linear.devPtr = din;
    res.res.linear.desc = cudaCreateChannelDesc<float>();
    res.res.linear.sizeInBytes = n * sizeof(float);
    cudaTextureDesc td;
    std::memset(&td, 0, sizeof(td));
    td.readMode = cudaReadModeElementType;
    cudaTextureObject_t tex_obj = 0;
    CHECK(cudaCreateTextureObject(&tex_obj, &res, &td, nullptr));
#ifndef CORPUS_NO_TEXREF
    CHECK(cudaBindTexture(nullptr, tex_ref, din, n * sizeof(float)));
#endif

    witness_reset();
    tex_kernel<<<blocks, threads>>>(tex_obj, dout, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    witness_report();

    long bad = 0;
    for (int i = 0; i < n; ++i) {
        float ref = in[i] + 2.0f * in[(i * 5) % n];
#ifndef CORPUS_NO_TEXREF
        if (in[n - 1 - i] > 0.0f) ref += in[n - 1 - i];
#endif
        if (out[i] != ref) {
            if (bad < 5) std::fprintf(stderr, "mismatch at %d: got %g want %g\n", i, out[i], ref);
            ++bad;
        }
    }
#ifndef CORPUS_NO_TEXREF
    CHECK(cudaUnbindTexture(tex_ref));
#endif
    CHECK(cudaDestroyTextureObject(tex_obj));
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    return report_result(bad, "textures");
}
