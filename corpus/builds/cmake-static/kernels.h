// The library's host interface: plain C++, no CUDA headers needed by its users.
#pragma once
// Squares the multiples of 3 in `values` and adds 1 to the others, on the device; returns the
// number of elements that differ from the host's own computation.
long square_threes(int* values, int n);
// The witness counters of the library's kernels, printed as `witness: threads=N warps=M`.
void report_witness();
