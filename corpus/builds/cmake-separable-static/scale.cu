// cmake-separable-static/scale.cu: a device function kernels.cu calls, witnessed on one side.
#define CORPUS_WITNESS_EXTERN
#include "witness.cuh"

__device__ int scale(int v) {
    if (v % 4 == 1) {
        witness();
        return 3 * v;
    }
    return v + 2;
}
