//! Interpreter throughput on real clang PTX (`tests/cuda/kernels.cu`), one worker thread.
//!
//! The dynamic thread-instruction count of each launch is measured independently of the
//! interpreter's own bookkeeping: the kernel instrumented by `device-runtime` is run once, and
//! the per-block thread counters it produces are multiplied by the blocks' instruction counts
//! (the figure cuda-flux itself reports). The uninstrumented kernel is then timed.
//!
//! Run with `cargo bench -p ptx-sim --bench throughput`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{launch, Arg, TestEnv};
use ptx_sim::{LaunchConfig, Program};

fn compile() -> String {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cuda/kernels.cu");
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("kernels.ptx");
    let status = Command::new("clang-16")
        .args([
            "-x",
            "cuda",
            "--cuda-device-only",
            "-S",
            "-O2",
            "-Wno-unknown-cuda-version",
        ])
        .args(["--cuda-gpu-arch=sm_70", "--cuda-path=/usr/lib/cuda", "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .expect("clang-16 runs (scripts/setup.sh installs it)");
    assert!(status.success(), "clang-16 failed on {}", source.display());
    std::fs::read_to_string(out).expect("PTX written")
}

struct Case {
    kernel: &'static str,
    config: LaunchConfig,
    /// Builds the arguments (buffers registered with the environment).
    args: fn(&TestEnv, &mut Vec<Vec<u32>>) -> Vec<Arg>,
}

fn buffer(env: &TestEnv, store: &mut Vec<Vec<u32>>, data: Vec<u32>) -> u64 {
    store.push(data);
    let last = store.last_mut().expect("just pushed");
    env.register(last.as_mut_slice())
}

fn matmul_args(env: &TestEnv, store: &mut Vec<Vec<u32>>) -> Vec<Arg> {
    let n = 128usize;
    let a = buffer(
        env,
        store,
        (0..n * n).map(|i| ((i % 7) as f32).to_bits()).collect(),
    );
    let b = buffer(
        env,
        store,
        (0..n * n).map(|i| ((i % 5) as f32).to_bits()).collect(),
    );
    let c = buffer(env, store, vec![0; n * n]);
    vec![Arg::U64(a), Arg::U64(b), Arg::U64(c), Arg::U32(n as u32)]
}

fn loops_args(env: &TestEnv, store: &mut Vec<Vec<u32>>) -> Vec<Arg> {
    let n = 8192usize;
    let input = buffer(
        env,
        store,
        (0..n as u32).map(|i| (i * 7919 + 13) % 10007).collect(),
    );
    let out = buffer(env, store, vec![0; n]);
    vec![Arg::U64(input), Arg::U64(out), Arg::U32(n as u32)]
}

/// Thread instructions of one launch, from the instrumented kernel's counters.
fn thread_instructions(ptx: &str, case: &Case) -> u64 {
    let mut module = ptx_lexer::parse(ptx).expect("clang PTX parses");
    let results = device_runtime::instrument_module(&mut module);
    let result = results
        .iter()
        .find(|r| r.kernel == case.kernel)
        .expect("kernel instrumented");
    let clone = result.clone.clone().expect("kernel has a counting clone");
    let program = Program::load(&module.to_ptx()).expect("instrumented PTX loads");
    let env = TestEnv::default();
    let mut store = Vec::new();
    let mut args = (case.args)(&env, &mut store);
    let mut counters = vec![0u64; result.blocks.len() * 2];
    args.push(Arg::U64(env.register(&mut counters)));
    args.push(Arg::U32(1));
    launch(&program, &clone, &case.config, &args, &env).expect("instrumented launch");
    result
        .blocks
        .iter()
        .zip(counters.chunks(2))
        .map(|(block, c)| c[0] * block.instructions.len() as u64)
        .sum()
}

fn main() {
    let ptx = compile();
    let program = Program::load(&ptx).expect("PTX loads");
    let cases = [
        Case {
            kernel: "matmul",
            config: LaunchConfig {
                grid: [8, 8, 1],
                block: [16, 16, 1],
                dynamic_shared_bytes: 0,
                workers: 1,
                resident_ctas: 1,
            },
            args: matmul_args,
        },
        Case {
            kernel: "loops",
            config: LaunchConfig {
                grid: [128, 1, 1],
                block: [64, 1, 1],
                dynamic_shared_bytes: 0,
                workers: 1,
                resident_ctas: 1,
            },
            args: loops_args,
        },
    ];
    for case in &cases {
        let per_launch = thread_instructions(&ptx, case);
        let env = TestEnv::default();
        let mut store = Vec::new();
        let args = (case.args)(&env, &mut store);
        // Warm-up, then as many launches as fit in about two seconds.
        launch(&program, case.kernel, &case.config, &args, &env).expect("launch");
        let start = Instant::now();
        let mut launches = 0u64;
        while start.elapsed() < Duration::from_secs(2) {
            launch(&program, case.kernel, &case.config, &args, &env).expect("launch");
            launches += 1;
        }
        let seconds = start.elapsed().as_secs_f64();
        let rate = (per_launch * launches) as f64 / seconds;
        println!(
            "{:<8} {:>12} thread-instructions/launch  {:>4} launches  {:>8.1} M thread-instructions/s (1 worker)",
            case.kernel,
            per_launch,
            launches,
            rate / 1e6
        );
    }
}
