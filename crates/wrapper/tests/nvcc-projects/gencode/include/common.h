#pragma once
__global__ void triple(int *data, int n);
int extra_offset();
