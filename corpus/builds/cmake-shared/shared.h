// The libraries' host interface (plain C++): each runs its kernel on `values` and returns the
// number of wrong results; the witness counts of its kernels go to `threads` and `warps`.
#pragma once
extern "C" long kernels_run(int* values, int n, unsigned* threads, unsigned long long* warps);
// The plugin's entry point, found with dlsym.
typedef long (*plugin_run_fn)(int* values, int n, unsigned* threads, unsigned long long* warps);
