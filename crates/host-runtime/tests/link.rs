//! The static library as the driver links it: its C ABI symbols are exported, and a C++ host
//! program that registers and launches a (fake) kernel through it links with `cudart_static`
//! and runs. Without a GPU the program must behave like its uninstrumented build: the same
//! error codes, no crash, no file.

use test_support::staticlib as support;

use std::path::{Path, PathBuf};
use std::process::Command;

fn staticlib() -> PathBuf {
    support::staticlib("host_runtime")
}

#[test]
fn the_staticlib_exports_the_c_abi() {
    support::assert_defines_text_symbols(&staticlib(), &support::HOST_RUNTIME_EXPORTS);
}

const PROGRAM: &str = r#"
#include <cuda_runtime_api.h>
#include <cstdio>

extern "C" {
void __cuda_flux_register_kernel(const void *original_stub, const void *clone_stub,
                                 const char *snapshot_json, size_t snapshot_len);
int __cuda_flux_launch_kernel(const void *func, dim3 grid, dim3 block, void **args,
                              size_t shared_bytes, void *stream);
int __cuda_flux_launch_kernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                   size_t shared_bytes, void *stream);
int __cuda_flux_launch_cooperative_kernel(const void *func, dim3 grid, dim3 block, void **args,
                                          size_t shared_bytes, void *stream);
int __cuda_flux_launch_cooperative_kernel_ptsz(const void *func, dim3 grid, dim3 block,
                                               void **args, size_t shared_bytes, void *stream);
int __cuda_flux_device_reset(void);
// cudart's per-thread-stream launch calls (declared by its headers only in per-thread builds).
cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                  size_t shared_bytes, cudaStream_t stream);
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 grid, dim3 block,
                                             void **args, size_t shared_bytes,
                                             cudaStream_t stream);
}

// Host stubs stand-ins: only their addresses matter.
extern "C" void original_stub(float, float *) {}
extern "C" void clone_stub(float, float *, unsigned long long, unsigned) {}
extern "C" void unregistered_stub(float, float *) {}

static const char snapshot70[] =
    R"({"kernel": "original_stub", "demangled": "original_stub", "source": "fake.cu",
        "arch": 70, "instrumented": true, "reason": null, "params": 2,
        "blocks": [{"function": "original_stub", "label": null, "instructions": ["ret"]}]})";
static const char snapshot90[] =
    R"({"kernel": "original_stub", "demangled": "original_stub", "source": "fake.cu",
        "arch": 90, "instrumented": true, "reason": null, "params": 2,
        "blocks": [{"function": "original_stub", "label": null, "instructions": ["ret"]}]})";

// As the compiler's host pass does it: from the module's registration, before main.
__attribute__((constructor)) static void register_kernels() {
    __cuda_flux_register_kernel((const void *)original_stub, (const void *)clone_stub,
                                snapshot70, sizeof snapshot70 - 1);
    __cuda_flux_register_kernel((const void *)original_stub, (const void *)clone_stub,
                                snapshot90, sizeof snapshot90 - 1);
}

int main() {
    float a = 2.0f;
    float *p = nullptr;
    void *args[] = {&a, &p};
    dim3 grid(4, 2, 1), block(32, 4, 1);
    // Through cuda-flux first, so that its code path is the process's first CUDA call.
    int flux = __cuda_flux_launch_kernel((const void *)original_stub, grid, block, args, 16, nullptr);
    int flux_last = cudaGetLastError();
    int plain = cudaLaunchKernel((const void *)original_stub, grid, block, args, 16, nullptr);
    int plain_last = cudaGetLastError();
    int unregistered = __cuda_flux_launch_kernel((const void *)unregistered_stub, grid, block, args, 0, nullptr);
    // The other launch calls, each against the cudart call it stands for.
    int flux_ptsz = __cuda_flux_launch_kernel_ptsz((const void *)original_stub, grid, block, args, 0, nullptr);
    cudaGetLastError();
    int plain_ptsz = cudaLaunchKernel_ptsz((const void *)original_stub, grid, block, args, 0, nullptr);
    cudaGetLastError();
    int flux_coop = __cuda_flux_launch_cooperative_kernel((const void *)original_stub, grid, block, args, 0, nullptr);
    cudaGetLastError();
    int plain_coop = cudaLaunchCooperativeKernel((const void *)original_stub, grid, block, args, 0, nullptr);
    cudaGetLastError();
    int flux_coop_ptsz = __cuda_flux_launch_cooperative_kernel_ptsz((const void *)original_stub, grid, block, args, 0, nullptr);
    cudaGetLastError();
    int plain_coop_ptsz = cudaLaunchCooperativeKernel_ptsz((const void *)original_stub, grid, block, args, 0, nullptr);
    cudaGetLastError();
    int flux_reset = __cuda_flux_device_reset();
    int plain_reset = cudaDeviceReset();
    std::printf("%d %d %d %d %d %d %d %d %d %d %d %d %d\n", flux, plain, flux_last, plain_last,
                unregistered, flux_reset, plain_reset, flux_ptsz, plain_ptsz, flux_coop,
                plain_coop, flux_coop_ptsz, plain_coop_ptsz);
    return 0;
}
"#;

fn build_program(dir: &Path) -> PathBuf {
    let source = dir.join("fake_app.cpp");
    std::fs::write(&source, PROGRAM).unwrap();
    let exe = dir.join("fake_app");
    let output = Command::new("clang++-16")
        .arg("-std=c++17")
        .arg("-I/usr/include")
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .arg(staticlib())
        .args([
            "-L/usr/lib/x86_64-linux-gnu",
            "-lcudart_static",
            "-ldl",
            "-lrt",
            "-lpthread",
        ])
        .output()
        .expect("clang++-16 runs");
    assert!(
        output.status.success(),
        "link failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

fn run(exe: &Path, out_dir: &Path, env: &[(&str, &str)]) -> (Vec<i32>, String) {
    let output = Command::new(exe)
        .current_dir(out_dir)
        .env("CUDA_FLUX_OUTPUT", out_dir.join("profile.json"))
        .envs(env.iter().copied())
        .output()
        .expect("the program runs");
    assert!(
        output.status.success(),
        "the program failed: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let codes = String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .map(|c| c.parse().expect("an error code"))
        .collect();
    (codes, String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn a_program_linked_with_cudart_behaves_like_its_plain_build() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_program(dir.path());
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();

    let (codes, stderr) = run(&exe, &out_dir, &[]);
    let [flux, plain, flux_last, plain_last, unregistered, flux_reset, plain_reset, ref others @ ..] =
        codes[..]
    else {
        panic!("unexpected output {codes:?}");
    };
    // cudaLaunchKernel_ptsz, cudaLaunchCooperativeKernel and its _ptsz form: the same code
    // through cuda-flux as called directly.
    assert_eq!(others.len(), 6, "unexpected output {codes:?}");
    for pair in others.chunks(2) {
        assert_eq!(pair[0], pair[1], "the other launch calls: {others:?}");
    }
    assert_eq!(
        flux, plain,
        "the launch returns what cudaLaunchKernel returns"
    );
    assert_eq!(
        flux_last, plain_last,
        "cudaGetLastError sees the same error"
    );
    assert_eq!(unregistered, plain);
    assert_eq!(
        flux_reset, plain_reset,
        "the reset returns what cudaDeviceReset returns"
    );
    assert_ne!(flux, 0, "a fake kernel cannot launch");
    let no_gpu = flux == 100 || flux == 35; // cudaErrorNoDevice, cudaErrorInsufficientDriver
    if !no_gpu {
        eprintln!("note: a CUDA device seems present (launch returned {flux})");
    }
    assert_eq!(stderr, "", "nothing to say without bad settings");
    // No launch was recorded (none could run): no profile, no temporary left behind.
    let left: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
    assert!(left.is_empty(), "files left: {left:?}");

    // A bad setting: exactly one line naming it; the program still runs the same.
    let (again, stderr) = run(&exe, &out_dir, &[("CUDA_FLUX_BANKS", "abc")]);
    assert_eq!(again, codes);
    assert_eq!(
        stderr,
        "cuda-flux: CUDA_FLUX_BANKS='abc' is not a power of two from 1 to 4096; using 32\n"
    );
}
