// host_threads_streams.cu — 4 host threads (std::thread), each with its own
// cudaStream_t, each launching the same kernel ROUNDS times on its stream, plus
// one launch on the legacy default stream from main while the threads run.
// Every launch writes its own buffer, so results and the witness thread count do
// not depend on how the host threads or the streams interleave.
#include "witness.cuh"
#include <thread>
#include <vector>

constexpr int N = 1000, BLOCK = 256, GRID = (N + BLOCK - 1) / BLOCK;
constexpr int WORKERS = 4, ROUNDS = 6, MAIN_TAG = 5;

// Threads with (i + tag) % 3 != 0 are witnessed and add a round-dependent value.
__global__ void bump(int n, int tag, int round, int* data) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && (i + tag) % 3 != 0) {
        witness();
        data[i] += tag * 100 + round + (i & 7);
    } else if (i < n) {
        data[i] -= 1;
    }
}

static void cpu_bump(std::vector<int>& data, int tag, int round) {
    for (int i = 0; i < N; ++i)
        data[i] += ((i + tag) % 3 != 0) ? tag * 100 + round + (i & 7) : -1;
}

// One host thread: own stream, ROUNDS launches, copy back, synchronize.
static void worker(int tag, int* dbuf, int* host_out) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMemsetAsync(dbuf, 0, N * sizeof(int), s));
    for (int r = 0; r < ROUNDS; ++r) {
        bump<<<GRID, BLOCK, 0, s>>>(N, tag, r, dbuf);
        CHECK(cudaGetLastError());
    }
    CHECK(cudaMemcpyAsync(host_out, dbuf, N * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s));
}

int main() {
    int* dbuf[WORKERS + 1];
    for (int w = 0; w <= WORKERS; ++w) CHECK(cudaMalloc(&dbuf[w], N * sizeof(int)));
    CHECK(cudaMemset(dbuf[WORKERS], 0, N * sizeof(int)));
    std::vector<std::vector<int>> out(WORKERS + 1, std::vector<int>(N, -12345));
    witness_reset();
    CHECK(cudaDeviceSynchronize());

    std::vector<std::thread> threads;
    for (int w = 0; w < WORKERS; ++w)
        threads.emplace_back(worker, w + 1, dbuf[w], out[w].data());
    // The main thread's own launch, on the legacy default stream (stream 0).
    bump<<<GRID, BLOCK>>>(N, MAIN_TAG, 0, dbuf[WORKERS]);
    CHECK(cudaGetLastError());
    for (auto& t : threads) t.join();
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(out[WORKERS].data(), dbuf[WORKERS], N * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report();

    long bad = 0;
    for (int w = 0; w <= WORKERS; ++w) {
        std::vector<int> ref(N, 0);
        if (w < WORKERS)
            for (int r = 0; r < ROUNDS; ++r) cpu_bump(ref, w + 1, r);
        else
            cpu_bump(ref, MAIN_TAG, 0);
        for (int i = 0; i < N; ++i)
            if (out[w][i] != ref[i]) ++bad;
    }
    for (int w = 0; w <= WORKERS; ++w) CHECK(cudaFree(dbuf[w]));
    return report_result(bad, "per-thread stream buffers");
}
