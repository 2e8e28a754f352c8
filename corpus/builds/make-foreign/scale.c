/* make-foreign/scale.c: C, compiled by gcc; the CUDA file calls it through extern "C". */
int scale_factor(int n) { return n % 7 + 2; }
