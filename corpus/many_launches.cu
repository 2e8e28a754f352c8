// many_launches.cu — 20,000 back-to-back launches of a tiny kernel (1 block of
// 64 threads adding to a 64-int array), a synchronisation every 5000 launches and
// one check at the end. Stresses per-launch overhead in a profiler (counter set-up,
// harvesting, launch records).
// Witness per launch: 48 threads, 2 warps (threads 0..47 of warps 0 and 1), so
// the whole run gives threads=960000 and (expected) warps=40000.
#include "witness.cuh"

constexpr int LAUNCHES = 20000, THREADS = 64, WITNESSED = 48, SYNC_EVERY = 5000;

__global__ void tiny(int iter, int* acc) {
    int t = threadIdx.x;
    if (t < WITNESSED) {
        witness();
        acc[t] += (iter % 8) + t;
    } else {
        acc[t] -= 1;
    }
}

int main() {
    int* dacc;
    CHECK(cudaMalloc(&dacc, THREADS * sizeof(int)));
    CHECK(cudaMemset(dacc, 0, THREADS * sizeof(int)));
    witness_reset();
    // Launch errors are checked every time (cheap, no sync); execution errors
    // only at the few synchronisation points, so launches queue up back to back.
    for (int i = 0; i < LAUNCHES; ++i) {
        tiny<<<1, THREADS>>>(i, dacc);
        CHECK(cudaGetLastError());
        if ((i + 1) % SYNC_EVERY == 0) CHECK(cudaDeviceSynchronize());
    }
    CHECK(cudaDeviceSynchronize());
    int acc[THREADS];
    CHECK(cudaMemcpy(acc, dacc, sizeof(acc), cudaMemcpyDeviceToHost));
    witness_report();

    long iter_sum = 0;
    for (int i = 0; i < LAUNCHES; ++i) iter_sum += i % 8;
    long bad = 0;
    for (int t = 0; t < THREADS; ++t) {
        long ref = t < WITNESSED ? iter_sum + (long)LAUNCHES * t : -(long)LAUNCHES;
        if (acc[t] != ref) ++bad;
    }
    CHECK(cudaFree(dacc));
    return report_result(bad, "accumulated over 20000 launches");
}
