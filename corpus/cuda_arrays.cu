// cuda_arrays.cu — CUDA arrays and the calls real suites make on them (SHOC DeviceMemory and
// QTC, Parboil sad, Rodinia): cudaMallocArray, cudaMemcpy2DToArray, cudaMemcpyToArray /
// FromArray, cudaMemcpy2DFromArray, cudaGetChannelDesc, cudaBindTextureToArray (a texture
// reference), a texture object over an array, cudaMalloc3DArray + cudaMemcpy3D, and the
// deprecated cudaThreadSynchronize / cudaThreadExit. Fetches are checked against the
// programming guide's "Texture Fetching" rules computed on the host: clamp, wrap and border
// addressing, point and linear filtering (weights in 1/256 steps; texel values and
// coordinates are chosen so that every weight is exact, so GPU and host agree to rounding).
// Texture references are deprecated (removed in CUDA 12): -DCORPUS_NO_TEXREF drops that part.
#include "witness.cuh"
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__clang__)
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
#elif defined(__NVCC__)
#pragma nv_diag_suppress 1215
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

#ifndef CORPUS_NO_TEXREF
texture<float, cudaTextureType2D, cudaReadModeElementType> image_ref;
#endif

const int W = 13, H = 7, D = 3;

// One sample per thread at (x, y) = (tid - 2, row - 2) + 0.5: texel centres, two texels
// beyond every edge.
__global__ void sample_2d(cudaTextureObject_t wrap_linear, float* point_out, float* linear_out,
                          int cols) {
    int c = threadIdx.x, r = blockIdx.x;
    float x = c - 2 + 0.5f, y = r - 2 + 0.5f;
    WITNESS();
#ifndef CORPUS_NO_TEXREF
    point_out[r * cols + c] = tex2D(image_ref, x, y);
#else
    point_out[r * cols + c] = 0.0f;
#endif
    // Normalized coordinates, a quarter texel off the centre: weights 1/4 and 3/4.
    linear_out[r * cols + c] = tex2D<float>(wrap_linear, (x + 0.25f) / W, (y - 0.25f) / H);
}

__global__ void sample_3d(cudaTextureObject_t border_point, float* out, int cols) {
    int c = threadIdx.x, r = blockIdx.x, z = blockIdx.y;
    WITNESS();
    out[(z * gridDim.x + r) * cols + c] = tex3D<float>(border_point, c - 1 + 0.5f, r - 1 + 0.5f,
                                                       z - 1 + 0.5f);
}

static float texel(const std::vector<float>& img, int x, int y) { return img[y * W + x]; }

static int clampi(int i, int n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

static int wrapi(int i, int n) { return ((i % n) + n) % n; }

// Bilinear fetch with wrap addressing at unnormalized (x, y), as the programming guide says.
static float bilinear_wrap(const std::vector<float>& img, float x, float y) {
    float xb = x - 0.5f, yb = y - 0.5f;
    int i = (int)std::floor(xb), j = (int)std::floor(yb);
    float a = std::round((xb - i) * 256.0f) / 256.0f, b = std::round((yb - j) * 256.0f) / 256.0f;
    int i0 = wrapi(i, W), i1 = wrapi(i + 1, W), j0 = wrapi(j, H), j1 = wrapi(j + 1, H);
    return (1 - a) * (1 - b) * texel(img, i0, j0) + a * (1 - b) * texel(img, i1, j0) +
           (1 - a) * b * texel(img, i0, j1) + a * b * texel(img, i1, j1);
}

int main() {
    long bad = 0;
    std::vector<float> image(W * H);
    for (int i = 0; i < W * H; ++i) image[i] = (float)((i * 7) % 32);
    cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();

    // A 2-D array, filled row by row from a padded host image.
    cudaArray_t array;
    CHECK(cudaMallocArray(&array, &desc, W, H));
    const int host_pitch = (W + 3) * sizeof(float);
    std::vector<float> padded((W + 3) * H, -1.0f);
    for (int y = 0; y < H; ++y) std::memcpy(&padded[y * (W + 3)], &image[y * W], W * sizeof(float));
    CHECK(cudaMemcpy2DToArray(array, 0, 0, padded.data(), host_pitch, W * sizeof(float), H,
                              cudaMemcpyHostToDevice));
    cudaChannelFormatDesc got;
    CHECK(cudaGetChannelDesc(&got, array));
    if (got.x != 32 || got.y != 0 || got.f != cudaChannelFormatKindFloat) ++bad;

    // Round trips: the whole array out, one row in at an offset and out again.
    std::vector<float> back(W * H);
    CHECK(cudaMemcpy2DFromArray(back.data(), W * sizeof(float), array, 0, 0, W * sizeof(float), H,
                                cudaMemcpyDeviceToHost));
    if (back != image) ++bad;
    std::vector<float> row(5, 99.0f), row_back(5);
    cudaArray_t scratch;
    CHECK(cudaMallocArray(&scratch, &desc, W, H));
    CHECK(cudaMemcpyToArray(scratch, 4 * sizeof(float), 2, row.data(), 5 * sizeof(float),
                            cudaMemcpyHostToDevice));
    CHECK(cudaMemcpyFromArray(row_back.data(), scratch, 4 * sizeof(float), 2, 5 * sizeof(float),
                              cudaMemcpyDeviceToHost));
    if (row_back != row) ++bad;
    CHECK(cudaFreeArray(scratch));

#ifndef CORPUS_NO_TEXREF
    image_ref.addressMode[0] = cudaAddressModeClamp;
    image_ref.addressMode[1] = cudaAddressModeClamp;
    image_ref.filterMode = cudaFilterModePoint;
    image_ref.normalized = false;
    CHECK(cudaBindTextureToArray(image_ref, array, desc));
#endif
    cudaResourceDesc res;
    std::memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeArray;
    res.res.array.array = array;
    cudaTextureDesc td;
    std::memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeWrap;
    td.filterMode = cudaFilterModeLinear;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = 1;
    cudaTextureObject_t wrap_linear;
    CHECK(cudaCreateTextureObject(&wrap_linear, &res, &td, nullptr));

    const int cols = W + 4, rows = H + 4;
    float *d_point, *d_linear;
    CHECK(cudaMalloc(&d_point, cols * rows * sizeof(float)));
    CHECK(cudaMalloc(&d_linear, cols * rows * sizeof(float)));
    witness_reset();
    sample_2d<<<rows, cols>>>(wrap_linear, d_point, d_linear, cols);
    CHECK_LAUNCH();
    std::vector<float> point(cols * rows), linear(cols * rows);
    CHECK(cudaMemcpy(point.data(), d_point, point.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(linear.data(), d_linear, linear.size() * sizeof(float),
                     cudaMemcpyDeviceToHost));
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
            int x = c - 2, y = r - 2;
#ifndef CORPUS_NO_TEXREF
            if (point[r * cols + c] != texel(image, clampi(x, W), clampi(y, H))) ++bad;
#endif
            float want = bilinear_wrap(image, x + 0.5f + 0.25f, y + 0.5f - 0.25f);
            if (std::fabs(linear[r * cols + c] - want) > 1e-4f * (1.0f + std::fabs(want))) {
                if (bad < 5)
                    std::printf("linear (%d, %d): %g, expected %g\n", x, y, linear[r * cols + c],
                                want);
                ++bad;
            }
        }

    // A 3-D array through cudaMemcpy3D, read with border addressing and point filtering.
    std::vector<float> volume(W * H * D);
    for (int i = 0; i < W * H * D; ++i) volume[i] = (float)(i % 29 + 1);
    cudaArray_t array3;
    CHECK(cudaMalloc3DArray(&array3, &desc, make_cudaExtent(W, H, D)));
    cudaMemcpy3DParms copy;
    std::memset(&copy, 0, sizeof copy);
    copy.srcPtr = make_cudaPitchedPtr(volume.data(), W * sizeof(float), W, H);
    copy.dstArray = array3;
    copy.extent = make_cudaExtent(W, H, D);
    copy.kind = cudaMemcpyHostToDevice;
    CHECK(cudaMemcpy3D(&copy));
    res.res.array.array = array3;
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = cudaAddressModeBorder;
    td.filterMode = cudaFilterModePoint;
    td.normalizedCoords = 0;
    cudaTextureObject_t border_point;
    CHECK(cudaCreateTextureObject(&border_point, &res, &td, nullptr));
    const int cols3 = W + 2, rows3 = H + 2, slices3 = D + 2;
    float* d_vol;
    CHECK(cudaMalloc(&d_vol, cols3 * rows3 * slices3 * sizeof(float)));
    sample_3d<<<dim3(rows3, slices3), cols3>>>(border_point, d_vol, cols3);
    CHECK_LAUNCH();
    CHECK(cudaThreadSynchronize());
    std::vector<float> vol(cols3 * rows3 * slices3);
    CHECK(cudaMemcpy(vol.data(), d_vol, vol.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (int z = 0; z < slices3; ++z)
        for (int r = 0; r < rows3; ++r)
            for (int c = 0; c < cols3; ++c) {
                int x = c - 1, y = r - 1, k = z - 1;
                bool inside = x >= 0 && x < W && y >= 0 && y < H && k >= 0 && k < D;
                float want = inside ? volume[(k * H + y) * W + x] : 0.0f;
                if (vol[(z * rows3 + r) * cols3 + c] != want) ++bad;
            }
    witness_report();

    CHECK(cudaDestroyTextureObject(wrap_linear));
    CHECK(cudaDestroyTextureObject(border_point));
#ifndef CORPUS_NO_TEXREF
    CHECK(cudaUnbindTexture(image_ref));
#endif
    CHECK(cudaFreeArray(array));
    CHECK(cudaFreeArray(array3));
    CHECK(cudaFree(d_point));
    CHECK(cudaFree(d_linear));
    CHECK(cudaFree(d_vol));
    int status = report_result(bad, "array copies and texture fetches");
    CHECK(cudaThreadExit());
    return status;
}
