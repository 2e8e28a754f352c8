//! Building and running small C++ host programs against the real CUDA 11.8 headers, linked
//! with this test run's `libcpu_runtime.a` and nothing else of CUDA.

#![allow(dead_code)]

use test_support::staticlib as archive;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The static library cargo built for this test run: `libcpu_runtime-<hash>.a`.
pub fn staticlib() -> PathBuf {
    archive::staticlib("cpu_runtime")
}

/// Asserts that the static library defines each of `symbols` as a text symbol.
pub fn assert_exports(symbols: &[&str]) {
    archive::assert_defines_text_symbols(&staticlib(), symbols);
}

/// The host runtime's C ABI, which the archive carries.
pub const HOST_RUNTIME_EXPORTS: [&str; 6] = archive::HOST_RUNTIME_EXPORTS;

/// Compiles `source` (C++ including `<cuda_runtime_api.h>`) into `dir/name`; links the
/// runtime unless `link` is false. Panics with the compiler's output on failure.
pub fn build(dir: &Path, name: &str, source: &str, link: bool) -> PathBuf {
    let src = dir.join(format!("{name}.cpp"));
    std::fs::write(&src, source).expect("write source");
    let exe = dir.join(name);
    let mut command = Command::new("clang++-16");
    command
        .args([
            "-std=c++17",
            "-O0",
            "-g",
            "-Wall",
            "-Wno-deprecated-declarations",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&exe);
    if link {
        // The native engine (ptx-sim) links LLVM's shared library.
        let llvm = std::env::var("LLVM_SYS_160_PREFIX").unwrap_or("/usr/lib/llvm-16".into());
        command.arg(staticlib()).arg(format!("-L{llvm}/lib")).args([
            "-lLLVM-16",
            "-ldl",
            "-lpthread",
            "-lm",
        ]);
    }
    let output = command.output().expect("clang++-16 runs");
    assert!(
        output.status.success(),
        "compiling {name} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

/// Runs `exe` with `args` and environment `env`.
pub fn run(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(exe);
    command
        .args(args)
        .env_remove("CUDA_FLUX_CPU_THREADS")
        .env_remove("CUDA_FLUX_CPU_SMS");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("test program runs")
}

/// Asserts a successful run and returns its stdout.
pub fn expect_success(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The prelude of every test program: a `CHECK(expr == expected)` that reports and exits 2.
pub const PRELUDE: &str = r#"
#include <cuda_runtime_api.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>

static int failures = 0;
#define EXPECT(cond) do { if (!(cond)) { std::printf("FAIL line %d: %s\n", __LINE__, #cond); failures++; } } while (0)
#define EXPECT_CODE(call, code) do { cudaError_t e_ = (call); if (e_ != (code)) { \
    std::printf("FAIL line %d: %s returned %d (%s), expected %d\n", __LINE__, #call, (int)e_, cudaGetErrorName(e_), (int)(code)); failures++; } } while (0)
#define OK(call) EXPECT_CODE(call, cudaSuccess)
"#;
