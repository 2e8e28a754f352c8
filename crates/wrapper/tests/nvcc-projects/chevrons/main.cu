// Launch chevrons written with spaces, as nvcc accepts them (clang alone rejects them), next to
// text that only looks like them: strings, comments, `operator<< <T>`, nested templates.
#include <cstdio>
#include <iostream>
#include <utility>
#include <vector>
#include "scale.h"
#include "launch.cuh"

template <class T> struct Box;
template <class T> std::ostream &operator<<(std::ostream &out, const Box<T> &box);
template <class T> struct Box {
    T value;
    friend std::ostream &operator<< <T>(std::ostream &, const Box<T> &);
};
template <class T> std::ostream &operator<<(std::ostream &out, const Box<T> &box) {
    return out << box.value;
}

__global__ void scale(int *data, int n, int factor) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}

int main() {
    // k<< <1, 1>> >(d) in a comment stays as written.
    /* and k<< <1, 1>> > in a block comment */
    std::printf("text: %s\n", "scale<< <1, 1>> >(d)");
    std::printf("file: %s line: %d\n", __FILE__, __LINE__);
    std::vector<std::vector<std::pair<int, int>> > nested(1);
    Box<int> box{SCALE};
    operator<< <int>(std::cout << "box: ", box) << "\n";
    int n = 256;
    int *d = nullptr;
    if (cudaMalloc(&d, n * sizeof(int)) != cudaSuccess) {
        std::printf("CUDA error: cudaMalloc failed: no device\n");
        return 2;
    }
    int h[256];
    for (int i = 0; i < n; ++i) h[i] = i;
    cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
    scale<< <(n + 63) / 64, 64>> >(d, n, SCALE);
    scale << < (n + 63) / 64, 64 >>
        > (d, n, 2);
    add_one(d, n);
    cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
    bool ok = nested.size() == 1;
    for (int i = 0; i < n; ++i) ok = ok && h[i] == i * SCALE * 2 + 1;
    std::printf(ok ? "result: PASS\n" : "result: FAIL\n");
    return ok ? 0 : 1;
}
