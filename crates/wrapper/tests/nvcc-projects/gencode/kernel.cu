#include "common.h"
__global__ void triple(int *data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = data[i] * SCALE;
}
