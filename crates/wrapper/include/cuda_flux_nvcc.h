/* cuda-flux-nvcc compatibility prelude: force-included (-include) before every CUDA source that
 * cuda-flux-nvcc compiles, so that code written for nvcc builds with clang unchanged. Each shim
 * says what nvcc does that clang does not. */
#ifndef CUDA_FLUX_NVCC_H
#define CUDA_FLUX_NVCC_H

/* nvcc's headers pull in <time.h> (through its host runtime headers); programs call time() and
 * clock() without including it. */
#include <time.h>

#ifdef __cplusplus
/* nvcc's math headers define min/max for host code too, for every mix of int and unsigned
 * (and wider types); clang's CUDA headers define them for device code only. These __host__
 * overloads sit beside clang's __device__ ones (clang overloads on __host__/__device__). */
#define CUDA_FLUX_HOST_MINMAX(T1, T2, R)                                                         \
    static inline __host__ R min(T1 a, T2 b) { return (R)a < (R)b ? (R)a : (R)b; }               \
    static inline __host__ R max(T1 a, T2 b) { return (R)a > (R)b ? (R)a : (R)b; }
CUDA_FLUX_HOST_MINMAX(int, int, int)
CUDA_FLUX_HOST_MINMAX(unsigned int, unsigned int, unsigned int)
CUDA_FLUX_HOST_MINMAX(int, unsigned int, unsigned int)
CUDA_FLUX_HOST_MINMAX(unsigned int, int, unsigned int)
CUDA_FLUX_HOST_MINMAX(long, long, long)
CUDA_FLUX_HOST_MINMAX(unsigned long, unsigned long, unsigned long)
CUDA_FLUX_HOST_MINMAX(long, unsigned long, unsigned long)
CUDA_FLUX_HOST_MINMAX(unsigned long, long, unsigned long)
CUDA_FLUX_HOST_MINMAX(long long, long long, long long)
CUDA_FLUX_HOST_MINMAX(unsigned long long, unsigned long long, unsigned long long)
CUDA_FLUX_HOST_MINMAX(long long, unsigned long long, unsigned long long)
CUDA_FLUX_HOST_MINMAX(unsigned long long, long long, unsigned long long)
CUDA_FLUX_HOST_MINMAX(float, float, float)
CUDA_FLUX_HOST_MINMAX(double, double, double)
CUDA_FLUX_HOST_MINMAX(float, double, double)
CUDA_FLUX_HOST_MINMAX(double, float, double)
#undef CUDA_FLUX_HOST_MINMAX
#endif

#endif
