/* The CPU version of ../add (same input, same output file). ./add N A OUT */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
    if (argc != 4) return 2;
    int n = atoi(argv[1]);
    float a = (float)atof(argv[2]);
    FILE* out = fopen(argv[3], "w");
    for (int i = 0; i < n; ++i) {
        float y = 1.0f;
        for (int launch = 0; launch < 3; ++launch) y = a * (float)(i % 7) + y;
        fprintf(out, "%g\n", y);
    }
    fclose(out);
    return 0;
}
