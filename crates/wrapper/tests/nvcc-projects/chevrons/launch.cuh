// Included with #include "...": its spaced launch is joined too.
__global__ void add(int *data, int n, int value) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] += value;
}

static void add_one(int *data, int n) {
    add << < (n + 63) / 64, 64 >> > (data, n, 1);
}
