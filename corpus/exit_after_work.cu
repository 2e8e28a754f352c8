// exit_after_work.cu — does its work, prints the witness and result lines, then
// leaves through exit() straight away: no cudaFree, no cudaStreamDestroy, no
// cudaDeviceReset, no return from main. A profiler has to write its output from
// an exit path (atexit handler / static destructor), not from main's return.
// Exit status: 0 on PASS (the exit(0) case), 1 on FAIL, 2 on a CUDA error.
#include "witness.cuh"
#include <vector>

// Collatz steps (bounded) per element; odd start values are witnessed.
__global__ void collatz(int n, const int* start, int* steps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = start[i], k = 0;
    if (v & 1) witness();
    while (v != 1 && k < 200) {
        v = (v & 1) ? 3 * v + 1 : v / 2;
        ++k;
    }
    steps[i] = k;
}

__global__ void square_steps(int n, int* steps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && steps[i] > 20) {
        witness();
        steps[i] = steps[i] * steps[i];
    }
}

int main() {
    const int n = 2048, block = 128;
    std::vector<int> start(n), steps(n);
    for (int i = 0; i < n; ++i) start[i] = 1 + (i * 37) % 1000;
    int *dstart, *dsteps;
    CHECK(cudaMalloc(&dstart, n * sizeof(int)));
    CHECK(cudaMalloc(&dsteps, n * sizeof(int)));
    cudaStream_t s; // deliberately never destroyed
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMemcpy(dstart, start.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    witness_reset();
    collatz<<<n / block, block, 0, s>>>(n, dstart, dsteps);
    CHECK(cudaGetLastError());
    square_steps<<<n / block, block, 0, s>>>(n, dsteps);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(steps.data(), dsteps, n * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report();

    long bad = 0;
    for (int i = 0; i < n; ++i) {
        int v = start[i], k = 0;
        while (v != 1 && k < 200) {
            v = (v & 1) ? 3 * v + 1 : v / 2;
            ++k;
        }
        if (k > 20) k *= k;
        if (steps[i] != k) ++bad;
    }
    // exit() flushes stdio; device memory and the stream are left to the driver.
    std::exit(report_result(bad, "collatz steps"));
}
