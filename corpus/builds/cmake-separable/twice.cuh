// cmake-separable/twice.cuh: a template both units instantiate (one weak copy each; the device
// link keeps one).
#pragma once
template <typename T> __device__ T twice(T v) { return v + v; }
