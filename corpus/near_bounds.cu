// near_bounds.cu — reads just outside an allocation whose values the kernel then ignores, as
// real code does and a GPU tolerates (it faults only on unmapped pages, and small
// allocations share pages): a vertical stencil that reads the row above the image for row 0
// (Rodinia srad_v2) and a row below it for the last row, and a scan that reads x[-1]
// (Parboil spmv reads padding before its vector). The loaded values are multiplied by 0 or
// selected away (never used in arithmetic), so the result is defined whatever the
// neighbouring memory holds.
// (`guard` is allocated first so that the image and the vector do not start a GPU page.)
#include "witness.cuh"
#include <vector>

__global__ void vertical_stencil(int width, int height, const float* image, float* out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= width) return;
    witness();
    // `volatile`: the loads happen whatever the compiler could prove about their use.
    const volatile float* rows = image;
    float up = rows[(y - 1) * width + x];      // row -1 for y == 0
    float down = rows[(y + 1) * width + x];    // row `height` for the last row
    out[y * width + x] = 2.0f * image[y * width + x] + (y > 0 ? up : 0.0f) +
                         (y + 1 < height ? down : 0.0f);
}

__global__ void previous_element(int n, const int* x, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    witness();
    int before = ((const volatile int*)x)[i - 1];   // x[-1] for i == 0
    out[i] = x[i] - (i > 0 ? before : 0);
}

int main() {
    const int width = 96, height = 5, n = 300;
    std::vector<float> image(width * height), out(width * height);
    std::vector<int> x(n), diff(n);
    for (int i = 0; i < width * height; ++i) image[i] = (float)(i % 13);
    for (int i = 0; i < n; ++i) x[i] = i * i % 101;
    float *d_guard, *d_image, *d_out;
    int *d_x, *d_diff;
    CHECK(cudaMalloc(&d_guard, 4096));
    CHECK(cudaMalloc(&d_image, image.size() * sizeof(float)));
    CHECK(cudaMalloc(&d_out, out.size() * sizeof(float)));
    CHECK(cudaMalloc(&d_x, n * sizeof(int)));
    CHECK(cudaMalloc(&d_diff, n * sizeof(int)));
    CHECK(cudaMemcpy(d_image, image.data(), image.size() * sizeof(float),
                     cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    vertical_stencil<<<dim3((width + 63) / 64, height), 64>>>(width, height, d_image, d_out);
    CHECK_LAUNCH();
    previous_element<<<(n + 127) / 128, 128>>>(n, d_x, d_diff);
    CHECK_LAUNCH();
    witness_report();
    CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(diff.data(), d_diff, n * sizeof(int), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int y = 0; y < height; ++y)
        for (int c = 0; c < width; ++c) {
            float ref = 2.0f * image[y * width + c];
            if (y > 0) ref += image[(y - 1) * width + c];
            if (y + 1 < height) ref += image[(y + 1) * width + c];
            if (out[y * width + c] != ref) ++bad;
        }
    for (int i = 0; i < n; ++i)
        if (diff[i] != x[i] - (i > 0 ? x[i - 1] : 0)) ++bad;
    CHECK(cudaFree(d_guard));
    CHECK(cudaFree(d_image));
    CHECK(cudaFree(d_out));
    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_diff));
    return report_result(bad, "stencil values and differences");
}
