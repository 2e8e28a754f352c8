// device_calls.cu — __noinline__ device functions, recursive device functions
// (Fibonacci and a depth-limited binary-tree walk) and an indirect call through
// a table of device function pointers, all called from kernels.
#include "witness.cuh"
#include <vector>

struct Node {
    int left, right, value; // child indices, -1 for none
};

__host__ __device__ __noinline__ int mix(int a, int b) {
    WITNESS(); // once per call
    return (a * 31) ^ (b + 7);
}

__host__ __device__ __noinline__ int fib(int n) {
    WITNESS(); // once per call, including recursive ones
    if (n < 2) return n;
    return fib(n - 1) + fib(n - 2);
}

__host__ __device__ __noinline__ int tree_walk(const Node* t, int idx, int depth) {
    if (idx < 0 || depth == 0) return 0;
    WITNESS(); // once per visited node
    int here = t[idx].value * depth;
    return here + tree_walk(t, t[idx].left, depth - 1) - tree_walk(t, t[idx].right, depth - 1);
}

__host__ __device__ __noinline__ int op_add(int a, int b) { return a + b; }
__host__ __device__ __noinline__ int op_xor(int a, int b) { return a ^ b; }
__host__ __device__ __noinline__ int op_mix(int a, int b) { return mix(a, b); }

typedef int (*binop_t)(int, int);
// Mutable device global: the compiler cannot resolve calls through it.
__device__ binop_t op_table[3] = {op_add, op_xor, op_mix};

__global__ void calls_kernel(const int* in, const Node* tree, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    int a = mix(v, i);
    int f = fib(v % 13);
    int w = tree_walk(tree, i % 31, 1 + v % 6);
    int c = op_table[v % 3](a, w); // indirect call
    out[i] = a ^ (f * 3) ^ (w << 2) ^ (c * 5);
}

static int host_op(int k, int a, int b) {
    return k == 0 ? op_add(a, b) : k == 1 ? op_xor(a, b) : op_mix(a, b);
}

int main() {
    const int n = 512, threads = 128, blocks = (n + threads - 1) / threads, nodes = 31;
    std::vector<int> in(n), out(n, 0);
    std::vector<Node> tree(nodes);
    for (int i = 0; i < nodes; ++i) {
        // Complete binary tree in heap layout.
        tree[i].left = 2 * i + 1 < nodes ? 2 * i + 1 : -1;
        tree[i].right = 2 * i + 2 < nodes ? 2 * i + 2 : -1;
        tree[i].value = (i * 37) % 11 - 5;
    }
    for (int i = 0; i < n; ++i) in[i] = (i * 2654435761u) >> 20;
    int *din, *dout;
    Node* dtree;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    CHECK(cudaMalloc(&dtree, nodes * sizeof(Node)));
    CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dtree, tree.data(), nodes * sizeof(Node), cudaMemcpyHostToDevice));
    // Recursion needs more than the default per-thread stack on some GPUs.
    CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 4096));
    witness_reset();
    calls_kernel<<<blocks, threads>>>(din, dtree, dout, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    witness_report();
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        int v = in[i];
        int a = mix(v, i), f = fib(v % 13), w = tree_walk(tree.data(), i % 31, 1 + v % 6);
        int ref = a ^ (f * 3) ^ (w << 2) ^ (host_op(v % 3, a, w) * 5);
        if (out[i] != ref) {
            if (bad < 5) std::fprintf(stderr, "mismatch at %d: got %d want %d\n", i, out[i], ref);
            ++bad;
        }
    }
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    CHECK(cudaFree(dtree));
    return report_result(bad, "device_calls");
}
