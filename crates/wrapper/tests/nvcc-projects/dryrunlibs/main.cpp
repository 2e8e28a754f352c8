// Host code compiled by the C++ compiler; the CUDA side is behind a plain function.
#include <cstdio>

int run_on_gpu(int *out, int n);

int main() {
    int out[256];
    int status = run_on_gpu(out, 256);
    if (status != 0) {
        std::printf("CUDA error: %d\n", status);
        return 2;
    }
    bool ok = true;
    for (int i = 0; i < 256; ++i) ok = ok && out[i] == i * i;
    std::printf(ok ? "result: PASS\n" : "result: FAIL\n");
    return ok ? 0 : 1;
}
