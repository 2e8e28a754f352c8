// cmake-separable/scale.cu: a device function called from another translation unit.
__device__ int scale(int v) { return v % 3 == 0 ? v * 4 : v - 1; }
