/* Plain C, compiled and linked by gcc: calls into the CUDA object through a C interface. */
#include <stdio.h>

int run_on_gpu(int *out, int n);

int main(void) {
    int out[128];
    int status = run_on_gpu(out, 128);
    if (status != 0) {
        printf("CUDA error: %d\n", status);
        return 2;
    }
    int ok = 1;
    for (int i = 0; i < 128; ++i) ok = ok && out[i] == 3 * i;
    printf(ok ? "result: PASS\n" : "result: FAIL\n");
    return ok ? 0 : 1;
}
