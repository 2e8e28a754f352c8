// cmake-static/main.cpp: a C++ executable (compiled by the C++ compiler) using the library.
#include <cstdio>
#include <vector>
#include "kernels.h"

int main() {
    std::vector<int> values(1000);
    for (int i = 0; i < 1000; ++i) values[i] = (i * 7) % 101;
    long bad = square_threes(values.data(), (int)values.size());
    report_witness();
    std::printf("result: %s\n", bad == 0 ? "PASS" : "FAIL");
    return bad == 0 ? 0 : 1;
}
