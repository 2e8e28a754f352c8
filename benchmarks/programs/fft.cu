// fft.cu — batched complex double-precision FFTs of length 2^k: radix-2 Stockham passes (one
// launch per pass, ping-pong buffers, natural order out), each butterfly computing its twiddle
// with double-precision sin and cos. Every repetition is a forward transform followed by an
// inverse one (scaled by 1/L in the last pass), so the data comes back to the input.
// Check: the warm-up forward transform, on 16 bins of the first and the last batch, against a
// direct DFT on the CPU; after the timed round trips, every value against the input.
#include "bench.cuh"

#define FFT_THREADS 256

// One radix-2 Stockham pass: half-size `span` (1, 2, 4, ..., len/2); sign -1 forward, +1 inverse.
__global__ void fft_pass(const double2* __restrict__ in, double2* __restrict__ out, int log_len,
                         int span, double sign, double scale, size_t total_butterflies) {
    const size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (t >= total_butterflies) return;
    const size_t half = (size_t)1 << (log_len - 1);
    const size_t batch = t >> (log_len - 1), j = t & (half - 1);
    const double2* src = in + (batch << log_len);
    double2* dst = out + (batch << log_len);
    const size_t k = j & (size_t)(span - 1);
    const double2 a = src[j], b = src[j + half];
    const double angle = sign * 3.141592653589793 * (double)k / (double)span;
    const double c = cos(angle), s = sin(angle);
    const double bx = b.x * c - b.y * s, by = b.x * s + b.y * c;
    const size_t o = ((j - k) << 1) + k; // (j / span) * 2 * span + k
    dst[o] = make_double2((a.x + bx) * scale, (a.y + by) * scale);
    dst[o + span] = make_double2((a.x - bx) * scale, (a.y - by) * scale);
}

// Transforms `in` (ping-pong with `tmp`); returns the buffer that holds the result.
static double2* fft(double2* in, double2* tmp, int log_len, int batches, double sign) {
    const size_t butterflies = ((size_t)batches << log_len) / 2;
    const unsigned blocks = div_up(butterflies, FFT_THREADS);
    for (int pass = 0; pass < log_len; ++pass) {
        const double scale = (sign > 0 && pass == log_len - 1) ? 1.0 / (double)((size_t)1 << log_len) : 1.0;
        LAUNCH(fft_pass, blocks, FFT_THREADS)(in, tmp, log_len, 1 << pass, sign, scale, butterflies);
        double2* t = in;
        in = tmp;
        tmp = t;
    }
    return in;
}

int main() {
    bench_init("fft");
    const int log_len = BENCH_SIZE(20, 9), batches = BENCH_SIZE(8, 3);
    const int reps = bench_reps(BENCH_SIZE(40, 2));
    const size_t len = (size_t)1 << log_len, total = len * batches;
    std::printf("size: length=%zu batches=%d reps=%d\n", len, batches, reps);
    std::vector<double2> data(total);
    Rng rng(10);
    for (auto& v : data) v = make_double2(rng.sym(), rng.sym());
    DeviceBuffer<double2> da(total), db(total);
    da.upload(data);

    Checker check;
    { // warm-up: one forward transform, checked on a few bins against a direct DFT
        double2* res = fft(da.ptr, db.ptr, log_len, batches, -1.0);
        CHECK_LAUNCH();
        std::vector<double2> spectrum(total);
        CHECK(cudaMemcpy(spectrum.data(), res, total * sizeof(double2), cudaMemcpyDeviceToHost));
        std::vector<double> cos_table(len), sin_table(len);
        for (size_t m = 0; m < len; ++m) {
            cos_table[m] = std::cos(2.0 * 3.141592653589793 * (double)m / (double)len);
            sin_table[m] = std::sin(2.0 * 3.141592653589793 * (double)m / (double)len);
        }
        std::vector<size_t> bins = {0, 1, 2, len / 2 - 1, len / 2, len / 2 + 1, len - 1};
        while (bins.size() < 16) bins.push_back(rng.below((uint32_t)len));
        for (int batch : {0, batches - 1}) {
            const double2* x = &data[(size_t)batch * len];
            for (size_t bin : bins) {
                double re = 0, im = 0;
                for (size_t m = 0; m < len; ++m) { // X[bin] = sum x[m] e^{-2 pi i bin m / len}
                    const size_t idx = (bin * m) & (len - 1);
                    re += x[m].x * cos_table[idx] + x[m].y * sin_table[idx];
                    im += x[m].y * cos_table[idx] - x[m].x * sin_table[idx];
                }
                const double2 got = spectrum[(size_t)batch * len + bin];
                const double tol = 1e-9 * std::sqrt((double)len) * log_len;
                check.close("spectrum re", (long)(batch * len + bin), got.x, re, tol);
                check.close("spectrum im", (long)(batch * len + bin), got.y, im, tol);
            }
        }
        da.upload(data); // the passes ping-pong through both buffers
    }

    KernelTimer timer;
    timer.start();
    double2 *x = da.ptr, *y = db.ptr;
    for (int r = 0; r < reps; ++r) {
        double2* res = fft(x, y, log_len, batches, -1.0); // forward
        double2* other = res == da.ptr ? db.ptr : da.ptr;
        x = fft(res, other, log_len, batches, +1.0);      // inverse
        y = x == da.ptr ? db.ptr : da.ptr;
    }
    timer.stop();
    std::vector<double2> back(total);
    CHECK(cudaMemcpy(back.data(), x, total * sizeof(double2), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < total; ++i) {
        check.close("round trip re", (long)i, back[i].x, data[i].x, 1e-12 * log_len * (reps + 1));
        check.close("round trip im", (long)i, back[i].y, data[i].y, 1e-12 * log_len * (reps + 1));
    }
    return bench_finish(timer, check, "fft values");
}
