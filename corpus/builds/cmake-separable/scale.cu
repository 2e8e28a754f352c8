// cmake-separable/scale.cu: device code another translation unit uses — scale(), called by
// main.cu's kernel (witnessed on one side of a divergent branch, so the counts of a function
// from another unit are checked), and `offset`, set by main.cu's host code.
#define CORPUS_WITNESS_EXTERN
#include "witness.cuh"
#include "twice.cuh"

__device__ int offset;

// main.cu has a static helper and a static variable of the same names: each unit keeps its own
// (the variable is set by each unit's host code, under the name clang gives it per unit).
static __device__ int bias;
static __device__ int helper(int v) { return twice(v) - bias; }

void set_scale_bias(int value) { CHECK(cudaMemcpyToSymbol(bias, &value, sizeof value)); }

__device__ int scale(int v) {
    if (v % 3 == 0) {
        witness();
        return helper(v);
    }
    return v - 1;
}
