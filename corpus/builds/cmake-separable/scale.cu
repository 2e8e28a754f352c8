// cmake-separable/scale.cu: device code another translation unit uses — scale(), called by
// main.cu's kernel (witnessed on one side of a divergent branch, so the counts of a function
// from another unit are checked), and `offset`, set by main.cu's host code.
#define CORPUS_WITNESS_EXTERN
#include "witness.cuh"
#include "twice.cuh"

__device__ int offset;

// main.cu has a static helper of the same name: each unit keeps its own.
static __device__ int helper(int v) { return twice(v) - 2; }

__device__ int scale(int v) {
    if (v % 3 == 0) {
        witness();
        return helper(v);
    }
    return v - 1;
}
