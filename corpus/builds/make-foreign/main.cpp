// make-foreign/main.cpp: plain C++ (g++), calls the CUDA file's launcher.
#include <cstdio>
#include <vector>

long run_kernels(int* values, int n);

int main() {
    std::vector<int> values(2500);
    for (int i = 0; i < (int)values.size(); ++i) values[i] = (i * 11) % 53;
    long bad = run_kernels(values.data(), (int)values.size());
    std::printf("result: %s\n", bad == 0 ? "PASS" : "FAIL");
    return bad == 0 ? 0 : 1;
}
