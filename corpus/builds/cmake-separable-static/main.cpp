// cmake-separable-static/main.cpp: a C++ executable; the kernels live in a static library.
int run_kernels();

int main() { return run_kernels(); }
