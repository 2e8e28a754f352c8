//! Modules as clang's host code registers them — a CPU image (`ptx_sim::image::encode` of
//! hand-written PTX) behind `__cudaRegisterFatBinary`, a kernel behind
//! `__cudaRegisterFunction`, a variable behind `__cudaRegisterVar` — then symbol copies,
//! function attributes and launches through `cudaLaunchKernel`. These need ptx-sim's engine
//! (`Program::load` and `Program::launch`).

mod support;

use ptx_sim::image::{encode, ArchPtx};
use support::{build, expect_success, run, PRELUDE};

/// `out[i] += gvar[0]` for `i < n`; `gvar` starts as {1, 2, 3, 4}.
const PTX: &str = r#"
.version 7.0
.target sm_ARCH
.address_size 64

.global .align 4 .u32 gvar[4] = {1, 2, 3, 4};

.visible .entry add_gvar(
    .param .u64 add_gvar_param_0,
    .param .u32 add_gvar_param_1
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [add_gvar_param_0];
    ld.param.u32 %r1, [add_gvar_param_1];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r6, [%rd4];
    ld.global.u32 %r7, [gvar];
    add.s32 %r6, %r6, %r7;
    st.global.u32 [%rd4], %r6;
DONE:
    ret;
}
"#;

/// The image as a C array definition named `image`.
fn image_source() -> String {
    let images: Vec<ArchPtx> = [70, 75]
        .into_iter()
        .map(|arch| ArchPtx {
            arch,
            ptx: PTX.replace("ARCH", &arch.to_string()),
        })
        .collect();
    let bytes = encode(&images);
    let body: Vec<String> = bytes.iter().map(|b| b.to_string()).collect();
    format!(
        "alignas(8) static const unsigned char image[{}] = {{{}}};\n",
        bytes.len(),
        body.join(",")
    )
}

const PROGRAM: &str = r#"
#include <unistd.h>

extern "C" void** __cudaRegisterFatBinary(void*);
extern "C" void __cudaRegisterFatBinaryEnd(void**);
extern "C" void __cudaUnregisterFatBinary(void**);
extern "C" int __cudaRegisterFunction(void**, const char*, char*, const char*, int, void*, void*, void*, void*, int*);
extern "C" void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int);

struct Wrapper { int magic; int version; const void* data; void* unused; };
static Wrapper wrapper = {0x466243b1, 1, image, nullptr};

static char add_gvar_stub;      // the host stub's address identifies the kernel
static unsigned gvar_shadow[4]; // the host shadow of `gvar`
static char not_registered;

static void at_exit() { std::printf("atexit ran\n"); }

static void launch(int* data, int n) {
    void* args[] = {&data, &n};
    OK(cudaLaunchKernel(&add_gvar_stub, dim3((n + 63) / 64), dim3(64), args, 0, 0));
}

int main(int argc, char** argv) {
    void** handle = __cudaRegisterFatBinary(&wrapper);
    EXPECT(__cudaRegisterFunction(handle, &add_gvar_stub, (char*)"add_gvar", "add_gvar", -1,
                                  nullptr, nullptr, nullptr, nullptr, nullptr) == 0);
    __cudaRegisterVar(handle, (char*)gvar_shadow, (char*)"gvar", "gvar", 0, sizeof gvar_shadow, 0, 0);
    __cudaRegisterFatBinaryEnd(handle);
    std::atexit(at_exit);

    const int n = 100;
    int host[n];
    for (int i = 0; i < n; i++) host[i] = i;

    if (argc > 1 && std::strcmp(argv[1], "fault") == 0) {
        // Pageable host memory is not device memory: the kernel faults.
        std::printf("before the fault\n");
        launch(host, n);
        std::printf("after the fault\n");
        return 0;
    }

    // The device is the highest architecture embedded; the kernel runs that PTX.
    cudaDeviceProp prop;
    OK(cudaGetDeviceProperties(&prop, 0));
    EXPECT(prop.major == 7 && prop.minor == 5);
    cudaFuncAttributes fa;
    OK(cudaFuncGetAttributes(&fa, &add_gvar_stub));
    EXPECT(fa.binaryVersion == 75 && fa.ptxVersion == 75);
    EXPECT(fa.maxThreadsPerBlock == 1024 && fa.sharedSizeBytes == 0 && fa.maxDynamicSharedSizeBytes == 48 * 1024);
    OK(cudaFuncSetAttribute(&add_gvar_stub, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
    OK(cudaFuncGetAttributes(&fa, &add_gvar_stub));
    EXPECT(fa.maxDynamicSharedSizeBytes == 100 * 1024);
    EXPECT_CODE(cudaFuncSetAttribute(&add_gvar_stub, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024), cudaErrorInvalidValue);
    int blocks = 0;
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &add_gvar_stub, 256, 0));
    EXPECT(blocks == 8);

    // Symbols.
    size_t size = 0;
    OK(cudaGetSymbolSize(&size, gvar_shadow));
    EXPECT(size == 16);
    unsigned g[4] = {0, 0, 0, 0};
    OK(cudaMemcpyFromSymbol(g, gvar_shadow, sizeof g, 0, cudaMemcpyDeviceToHost));
    EXPECT(g[0] == 1 && g[1] == 2 && g[2] == 3 && g[3] == 4);
    unsigned ten = 10;
    OK(cudaMemcpyToSymbol(gvar_shadow, &ten, sizeof ten, 0, cudaMemcpyHostToDevice));
    OK(cudaMemcpyFromSymbol(g, gvar_shadow, 8, 4, cudaMemcpyDeviceToHost));
    EXPECT(g[0] == 2 && g[1] == 3);
    EXPECT_CODE(cudaMemcpyToSymbol(gvar_shadow, &ten, sizeof ten, 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_CODE(cudaMemcpyToSymbol(gvar_shadow, &ten, sizeof ten, 0, cudaMemcpyDeviceToHost), cudaErrorInvalidMemcpyDirection);
    EXPECT_CODE(cudaMemcpyToSymbol(&not_registered, &ten, sizeof ten, 0, cudaMemcpyHostToDevice), cudaErrorInvalidSymbol);
    void* gaddr = nullptr;
    OK(cudaGetSymbolAddress(&gaddr, gvar_shadow));
    unsigned first = 0;
    OK(cudaMemcpy(&first, gaddr, sizeof first, cudaMemcpyDeviceToHost));
    EXPECT(first == 10);

    // Launches.
    int* d = nullptr;
    OK(cudaMalloc((void**)&d, sizeof host));
    OK(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice));
    launch(d, n);
    OK(cudaDeviceSynchronize());
    int back[n];
    OK(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(back[i] == i + 10);
    void* args[] = {&d, (void*)&n};
    EXPECT_CODE(cudaLaunchKernel(&add_gvar_stub, dim3(1), dim3(64), args, 101 * 1024, 0), cudaErrorInvalidValue);
    EXPECT_CODE(cudaLaunchKernel(&add_gvar_stub, dim3(1), dim3(64), args, 0, (cudaStream_t)0x999), cudaErrorInvalidResourceHandle);
    EXPECT_CODE(cudaLaunchKernel(&add_gvar_stub, dim3(1), dim3(64), nullptr, 0, 0), cudaErrorInvalidValue);

    // A reset reloads the module: the variable has its initial value again.
    OK(cudaDeviceReset());
    OK(cudaMemcpyFromSymbol(g, gvar_shadow, sizeof g, 0, cudaMemcpyDeviceToHost));
    EXPECT(g[0] == 1);

    __cudaUnregisterFatBinary(handle);
    EXPECT_CODE(cudaFuncGetAttributes(&fa, &add_gvar_stub), cudaErrorInvalidDeviceFunction);
    std::printf("failures %d\n", failures);
    return failures != 0;
}
"#;

fn program() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let source = format!("{PRELUDE}{}{PROGRAM}", image_source());
    let exe = build(dir.path(), "module", &source, true);
    (dir, exe)
}

#[test]
fn registered_kernels_and_variables_work_through_the_api() {
    let (_dir, exe) = program();
    let stdout = expect_success(&run(&exe, &[], &[("CUDA_FLUX_CPU_THREADS", "2")]));
    assert!(stdout.contains("failures 0"), "{stdout}");
    assert!(stdout.contains("atexit ran"));
}

#[test]
fn a_kernel_fault_ends_the_program_with_one_line_and_no_exit_handlers() {
    let (_dir, exe) = program();
    let output = run(&exe, &["fault"], &[]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout, "before the fault\n",
        "output before the fault is kept"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("cuda-flux cpu: invalid global address"),
        "{stderr}"
    );
    assert!(stderr.contains("PTX line"), "{stderr}");
}

#[test]
fn cuda_flux_cpu_stats_writes_the_kernels_counts_at_exit_and_nothing_after_a_fault() {
    let (dir, exe) = program();
    let stats = dir.path().join("stats.json");
    let stats_var = stats.to_str().unwrap();
    expect_success(&run(&exe, &[], &[("CUDA_FLUX_CPU_STATS", stats_var)]));
    let text = std::fs::read_to_string(&stats).expect("statistics written");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["format"], "cuda-flux-cpu-stats/1");
    let kernels = json["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 1, "{text}");
    let kernel = &kernels[0];
    // One successful launch (the three rejected ones are not launches): 2 CTAs of 64 threads
    // for n = 100. Every warp issues the 8 instructions up to the branch, the 7 of the body
    // and `ret` (16); the last warp (threads 96..127) runs the body with 4 lanes.
    // Threads: 3 warps x 16 x 32, plus 8 x 32 + 7 x 4 + 32.
    assert_eq!(kernel["name"], "add_gvar");
    assert_eq!(kernel["launches"], 1);
    assert_eq!(kernel["grid_ctas"], 2);
    assert_eq!(kernel["block_threads"], serde_json::json!([64, 1, 1]));
    assert_eq!(kernel["warp_instructions"], 4 * 16);
    assert_eq!(
        kernel["thread_instructions"],
        3 * 16 * 32 + 8 * 32 + 7 * 4 + 32
    );
    assert_eq!(kernel["global_atomics"], 0);
    assert!(kernel["kernel_ns"].as_u64().unwrap() > 0, "{text}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");

    std::fs::remove_file(&stats).unwrap();
    let output = run(&exe, &["fault"], &[("CUDA_FLUX_CPU_STATS", stats_var)]);
    assert_eq!(output.status.code(), Some(1));
    assert!(!stats.exists(), "a run that faulted writes no statistics");
}
