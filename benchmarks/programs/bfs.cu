// bfs.cu — level-synchronous breadth-first search over a random directed graph (fixed seed,
// skewed out-degrees: mostly 2..9, some tens, a few hubs with hundreds), from several sources.
// Each level is one launch over the frontier queue, one thread per frontier vertex: a vertex is
// claimed with atomicCAS on its level and appended to the next queue with atomicAdd; the host
// reads the next queue's size after every level.
// Check: every vertex's level for two sources (the first and the last) against a CPU BFS (all
// sources in the small test size); for every source, the frontier sizes sum to the number of
// reached vertices the GPU's level array shows.
#include "bench.cuh"

__global__ void bfs_init(int* __restrict__ level, int n, int source) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v < n) level[v] = v == source ? 0 : -1;
}

__global__ void bfs_level(const int* __restrict__ rowptr, const int* __restrict__ cols,
                          int* __restrict__ level, const int* __restrict__ frontier, int size,
                          int* __restrict__ next, int* __restrict__ next_size, int depth) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= size) return;
    const int u = frontier[t];
    for (int k = rowptr[u]; k < rowptr[u + 1]; ++k) {
        const int v = cols[k];
        if (level[v] == -1 && atomicCAS(&level[v], -1, depth + 1) == -1) next[atomicAdd(next_size, 1)] = v;
    }
}

static std::vector<int> cpu_bfs(const std::vector<int>& rowptr, const std::vector<int>& cols, int source) {
    const int n = (int)rowptr.size() - 1;
    std::vector<int> level(n, -1), queue;
    queue.reserve(n);
    level[source] = 0;
    queue.push_back(source);
    for (size_t head = 0; head < queue.size(); ++head) {
        int u = queue[head];
        for (int k = rowptr[u]; k < rowptr[u + 1]; ++k)
            if (level[cols[k]] == -1) {
                level[cols[k]] = level[u] + 1;
                queue.push_back(cols[k]);
            }
    }
    return level;
}

int main() {
    bench_init("bfs");
    const int n = BENCH_SIZE(1 << 21, 3000);
    const int sources = bench_reps(BENCH_SIZE(32, 4));
    Rng rng(9);
    std::vector<int> rowptr(n + 1, 0);
    for (int v = 0; v < n; ++v) {
        uint32_t kind = rng.below(1000), degree;
        if (kind < 900) degree = 2 + rng.below(8);        // 2..9
        else if (kind < 995) degree = 10 + rng.below(50); // 10..59
        else degree = 100 + rng.below(900);               // hubs: 100..999
        rowptr[v + 1] = rowptr[v] + (int)degree;
    }
    const size_t edges = (size_t)rowptr[n];
    std::printf("size: vertices=%d edges=%zu sources=%d\n", n, edges, sources);
    std::vector<int> cols(edges);
    for (auto& c : cols) c = (int)rng.below(n);
    std::vector<int> roots(sources);
    for (auto& r : roots) r = (int)rng.below(n);

    DeviceBuffer<int> drowptr(n + 1), dcols(edges), dlevel(n), dqa(n), dqb(n), dsize(1);
    drowptr.upload(rowptr);
    dcols.upload(cols);
    const unsigned vblocks = div_up(n, 256);
    LAUNCH(bfs_init, vblocks, 256)(dlevel.ptr, n, 0); // warm-up
    CHECK_LAUNCH();

    Checker check;
    KernelTimer timer;
    const int zero = 0;
    for (int s = 0; s < sources; ++s) {
        const int root = roots[s];
        CHECK(cudaMemcpy(dqa.ptr, &root, sizeof(int), cudaMemcpyHostToDevice));
        int size = 1, depth = 0;
        long reached = 1;
        int *frontier = dqa.ptr, *next = dqb.ptr;
        timer.start();
        LAUNCH(bfs_init, vblocks, 256)(dlevel.ptr, n, root);
        timer.stop();
        while (size > 0) {
            CHECK(cudaMemcpy(dsize.ptr, &zero, sizeof(int), cudaMemcpyHostToDevice));
            timer.start();
            LAUNCH(bfs_level, div_up(size, 256), 256)(drowptr.ptr, dcols.ptr, dlevel.ptr, frontier, size,
                                                      next, dsize.ptr, depth);
            timer.stop();
            CHECK(cudaMemcpy(&size, dsize.ptr, sizeof(int), cudaMemcpyDeviceToHost));
            reached += size;
            ++depth;
            int* t = frontier;
            frontier = next;
            next = t;
        }
        std::vector<int> level = dlevel.download();
        long gpu_reached = 0;
        for (int l : level) gpu_reached += l >= 0;
        check.equal("reached", s, gpu_reached, reached);
        if (BENCH_SIZE(s == 0 || s == sources - 1, true)) {
            std::vector<int> want = cpu_bfs(rowptr, cols, root);
            for (int v = 0; v < n; ++v) check.equal("level", v, level[v], want[v]);
        }
        if (s == 0) std::printf("source 0: reached %ld vertices in %d levels\n", reached, depth - 1);
    }
    return bench_finish(timer, check, "bfs levels");
}
