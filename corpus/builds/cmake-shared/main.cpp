// cmake-shared/main.cpp: runs the linked library's kernel, then the dlopen'ed plugin's; the
// witness line is the sum of both libraries' counters (one process, one profile).
#include <cstdio>
#include <dlfcn.h>
#include <vector>
#include "shared.h"

int main() {
    std::vector<int> values(3000);
    for (int i = 0; i < (int)values.size(); ++i) values[i] = (i * 13) % 97;
    unsigned t1 = 0, t2 = 0;
    unsigned long long w1 = 0, w2 = 0;
    long bad = kernels_run(values.data(), (int)values.size(), &t1, &w1);
    void* plugin = dlopen(PLUGIN_PATH, RTLD_NOW);
    if (!plugin) {
        std::printf("cannot load the plugin: %s\nresult: FAIL\n", dlerror());
        return 1;
    }
    plugin_run_fn run = (plugin_run_fn)dlsym(plugin, "plugin_run");
    if (!run) {
        std::printf("no plugin_run in the plugin\nresult: FAIL\n");
        return 1;
    }
    bad += run(values.data(), (int)values.size(), &t2, &w2);
    std::printf("witness: threads=%u warps=%llu\n", t1 + t2, w1 + w2);
    std::printf("result: %s\n", bad == 0 ? "PASS" : "FAIL");
    return bad == 0 ? 0 : 1;
}
