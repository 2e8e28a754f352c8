// copy_overlap.cu — a byte histogram computed in chunks on two streams, with asynchronous
// copies, done only when the device reports that it can copy while a kernel runs
// (`deviceOverlap`, `asyncEngineCount`): Rodinia huffman's runHisto returns early, with an
// empty histogram, on a device that reports no overlap, and then crashes building its Huffman
// tree. Every GPU since compute capability 1.1 reports the overlap, so a device standing in
// for one must too (what it does with the copies is its own business: the result is defined
// by stream order alone).
#include "witness.cuh"
#include <vector>

// Each CTA writes its own 256 bins (a global atomic would break the corpus rule that the only
// atom.global.add.u32/.u64 are the witness's); the host adds them up.
__global__ void histogram(const unsigned char* bytes, int n, unsigned int* partial) {
    __shared__ unsigned int local[256];
    local[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        witness();
        atomicAdd(&local[bytes[i]], 1u);
    }
    __syncthreads();
    partial[blockIdx.x * 256 + threadIdx.x] = local[threadIdx.x];
}

int main() {
    const int chunk = 4096, chunks = 6, ctas = 4, n = chunk * chunks;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int overlap = 0;
    CHECK(cudaDeviceGetAttribute(&overlap, cudaDevAttrGpuOverlap, 0));
    if (!prop.deviceOverlap || prop.asyncEngineCount < 1 || !overlap) {
        printf("device reports deviceOverlap=%d asyncEngineCount=%d cudaDevAttrGpuOverlap=%d: "
               "the chunked path below would be skipped\n",
               prop.deviceOverlap, prop.asyncEngineCount, overlap);
        return report_result(1, "copy/compute overlap reported by the device");
    }
    unsigned char* bytes;
    CHECK(cudaMallocHost(&bytes, n));
    for (int i = 0; i < n; ++i) bytes[i] = (unsigned char)((i * 7 + i / 97) % 251);
    unsigned char* d_chunk[2];
    unsigned int* d_partial;
    cudaStream_t stream[2];
    for (int s = 0; s < 2; ++s) {
        CHECK(cudaMalloc(&d_chunk[s], chunk));
        CHECK(cudaStreamCreate(&stream[s]));
    }
    const size_t bins_per_chunk = ctas * 256;
    CHECK(cudaMalloc(&d_partial, chunks * bins_per_chunk * sizeof(unsigned int)));
    witness_reset();
    for (int c = 0; c < chunks; ++c) {
        int s = c % 2;
        CHECK(cudaMemcpyAsync(d_chunk[s], bytes + c * chunk, chunk, cudaMemcpyHostToDevice,
                              stream[s]));
        unsigned int* partial = d_partial + c * bins_per_chunk;
        histogram<<<ctas, 256, 0, stream[s]>>>(d_chunk[s], chunk, partial);
        CHECK_LAUNCH();
    }
    for (int s = 0; s < 2; ++s) CHECK(cudaStreamSynchronize(stream[s]));
    witness_report();
    std::vector<unsigned int> partial(chunks * bins_per_chunk), bins(256, 0), ref(256, 0);
    CHECK(cudaMemcpy(partial.data(), d_partial, partial.size() * sizeof(unsigned int),
                     cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < partial.size(); ++i) bins[i % 256] += partial[i];
    for (int i = 0; i < n; ++i) ++ref[bytes[i]];
    long bad = 0;
    for (int b = 0; b < 256; ++b)
        if (bins[b] != ref[b]) ++bad;
    for (int s = 0; s < 2; ++s) {
        CHECK(cudaFree(d_chunk[s]));
        CHECK(cudaStreamDestroy(stream[s]));
    }
    CHECK(cudaFree(d_partial));
    CHECK(cudaFreeHost(bytes));
    return report_result(bad, "histogram bins");
}
