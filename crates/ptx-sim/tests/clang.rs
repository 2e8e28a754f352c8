//! Real CUDA device code compiled by clang-16 (`tests/cuda/kernels.cu`), run through
//! `Program::launch` and compared with Rust reference computations. One test also runs the
//! kernel instrumented by `device-runtime` and checks the counters it produces.

use test_support as support;

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use common::{config, launch, launch_with_output, Arg, TestEnv};
use device_runtime::KernelInstrumentation;
use ptx_sim::{LaunchConfig, Program, SimError};

/// PTX of `tests/cuda/kernels.cu`, compiled once per test binary.
fn kernels_ptx() -> &'static str {
    static PTX: OnceLock<String> = OnceLock::new();
    PTX.get_or_init(|| {
        let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cuda/kernels.cu");
        let dir = tempfile::tempdir().expect("temporary directory");
        let out = dir.path().join("kernels.ptx");
        support::compile(&source, support::Compiler::Clang, "sm_70", &out)
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::read_to_string(&out).expect("PTX written by clang")
    })
}

fn program() -> &'static Program {
    static PROGRAM: OnceLock<Program> = OnceLock::new();
    PROGRAM.get_or_init(|| Program::load(kernels_ptx()).unwrap_or_else(|e| panic!("{e}")))
}

/// Launches `kernel(input, out, n)` with `n = input.len()`: one thread per element, in CTAs of
/// `block` threads.
fn launch_over<I, O>(kernel: &str, input: &mut [I], out: &mut [O], block: u32, workers: usize) {
    let env = TestEnv::default();
    let n = input.len() as u32;
    let (a, b) = (env.register(input), env.register(out));
    launch(
        program(),
        kernel,
        &config([n.div_ceil(block), 1, 1], [block, 1, 1], workers),
        &[Arg::U64(a), Arg::U64(b), Arg::U32(n)],
        &env,
    )
    .unwrap();
}

fn loop_work(v: i32) -> i32 {
    let mut acc = 0i32;
    let trips = v % 23;
    let mut j = 0;
    while j < trips {
        if (j ^ v) % 3 == 0 {
            j += 1;
            continue;
        }
        if acc > 400 + v % 100 {
            break;
        }
        for k in 0..=j % 5 {
            acc += ((j * k) ^ v) & 15;
            if acc % 97 == 96 {
                break;
            }
        }
        j += 1;
    }
    let mut x = (v as u32).wrapping_add(1);
    let mut steps = 0;
    while x != 1 && steps < 150 {
        x = if x & 1 == 1 {
            x.wrapping_mul(3).wrapping_add(1)
        } else {
            x / 2
        };
        steps += 1;
    }
    let mut digits = 0;
    let mut y = v;
    loop {
        digits += y % 10;
        y /= 10;
        if y == 0 {
            break;
        }
    }
    acc * 1000 + steps * 10 + digits % 10
}

fn loop_inputs(n: usize) -> Vec<i32> {
    (0..n as i32).map(|i| (i * 7919 + 13) % 10007).collect()
}

#[test]
fn loop_kernel_matches_reference() {
    let n = 2000;
    let mut input = loop_inputs(n);
    let mut out = vec![0i32; n];
    launch_over("loops", &mut input, &mut out, 64, 2);
    for (i, (&v, &got)) in input.iter().zip(&out).enumerate() {
        assert_eq!(got, loop_work(v), "element {i} (input {v})");
    }
}

#[test]
fn shared_memory_tree_reduction() {
    let n = 10_000usize;
    let mut input: Vec<i32> = (0..n as i32).map(|i| (i * 37) % 1001 - 500).collect();
    let mut out = vec![0u64; 1];
    launch_over("block_reduce", &mut input, &mut out, 256, 2);
    let expected: i64 = input.iter().map(|&v| i64::from(v)).sum();
    assert_eq!(out[0] as i64, expected);
}

#[test]
fn warp_shuffle_reduction_with_float_atomics() {
    let n = 4096usize;
    // Small integers: every partial sum is exact in f32, so order does not matter.
    let mut input: Vec<f32> = (0..n).map(|i| (i % 17) as f32).collect();
    let mut out = vec![0f32; 1];
    launch_over("warp_sum", &mut input, &mut out, 128, 2);
    assert_eq!(out[0], input.iter().sum::<f32>());
}

#[test]
fn switch_heavy_kernel() {
    let n = 3000usize;
    let mut input: Vec<i32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) as i32 >> 7)
        .collect();
    let mut out = vec![0i32; n];
    launch_over("switchy", &mut input, &mut out, 96, 1);
    for (i, (&v, &got)) in input.iter().zip(&out).enumerate() {
        let want = match v & 15 {
            0 => v.wrapping_mul(3),
            1 => v ^ 0x55,
            2 => v >> 2,
            3 => v.wrapping_sub(7),
            4 => v.wrapping_mul(v),
            5 => !v,
            6 => v / 3,
            7 => v % 5,
            8 => v.wrapping_add(100),
            9 => v << 3,
            10 => v.wrapping_neg(),
            11 => v & 0xF0,
            _ => 1,
        };
        assert_eq!(got, want, "element {i} (input {v})");
    }
}

#[test]
fn shared_memory_transpose_with_2d_blocks() {
    let (w, h) = (70usize, 45usize);
    let env = TestEnv::default();
    let mut input: Vec<f32> = (0..w * h).map(|i| i as f32).collect();
    let mut out = vec![-1f32; w * h];
    let (a, b) = (env.register(&mut input), env.register(&mut out));
    launch(
        program(),
        "transpose",
        &config(
            [(w as u32).div_ceil(32), (h as u32).div_ceil(32), 1],
            [32, 8, 1],
            2,
        ),
        &[
            Arg::U64(a),
            Arg::U64(b),
            Arg::U32(w as u32),
            Arg::U32(h as u32),
        ],
        &env,
    )
    .unwrap();
    for y in 0..h {
        for x in 0..w {
            assert_eq!(out[x * h + y], input[y * w + x], "({x}, {y})");
        }
    }
}

#[test]
fn recursive_device_function() {
    let out = launch_with_output(
        program(),
        "fibs",
        config([1, 1, 1], [64, 1, 1], 1),
        vec![0i32; 64],
    );
    let fib = |n: i32| {
        let (mut a, mut b) = (0, 1);
        for _ in 0..n {
            (a, b) = (b, a + b);
        }
        a
    };
    for (i, &v) in out.iter().enumerate() {
        assert_eq!(v, fib(i as i32 % 12), "thread {i}");
    }
}

#[test]
fn device_assert_reports_file_line_and_thread() {
    let env = TestEnv::default();
    let mut data = vec![1i32; 32];
    data[5] = -1;
    let a = env.register(&mut data);
    let err = launch(
        program(),
        "checks",
        &config([1, 1, 1], [32, 1, 1], 1),
        &[Arg::U64(a)],
        &env,
    )
    .unwrap_err();
    match err {
        SimError::Assertion(message) => {
            assert!(message.contains("kernels.cu"), "{message}");
            assert!(message.contains("thread: [5,0,0]"), "{message}");
            assert!(message.contains("data[threadIdx.x] >= 0"), "{message}");
        }
        other => panic!("expected an assertion, got {other}"),
    }
    data[5] = 3;
    launch(
        program(),
        "checks",
        &config([1, 1, 1], [32, 1, 1], 1),
        &[Arg::U64(a)],
        &env,
    )
    .unwrap();
}

#[test]
fn matrix_multiply() {
    let n = 24usize;
    let env = TestEnv::default();
    let mut a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
    let mut b: Vec<f32> = (0..n * n).map(|i| (i % 5) as f32 * 0.5).collect();
    let mut c = vec![0f32; n * n];
    let (pa, pb, pc) = (
        env.register(&mut a),
        env.register(&mut b),
        env.register(&mut c),
    );
    launch(
        program(),
        "matmul",
        &config([2, 2, 1], [16, 16, 1], 2),
        &[Arg::U64(pa), Arg::U64(pb), Arg::U64(pc), Arg::U32(n as u32)],
        &env,
    )
    .unwrap();
    for row in 0..n {
        for col in 0..n {
            // Same summation order as the kernel, with fused multiply-add as clang emits.
            let mut acc = 0f32;
            for k in 0..n {
                acc = a[row * n + k].mul_add(b[k * n + col], acc);
            }
            assert_eq!(c[row * n + col], acc, "({row}, {col})");
        }
    }
}

#[test]
fn dynamic_shared_memory() {
    let env = TestEnv::default();
    let mut out = vec![0i32; 100];
    let a = env.register(&mut out);
    let mut cfg = config([1, 1, 1], [100, 1, 1], 1);
    cfg.dynamic_shared_bytes = 400;
    launch(program(), "dyn_shared", &cfg, &[Arg::U64(a)], &env).unwrap();
    for (i, &v) in out.iter().enumerate() {
        assert_eq!(v, 2 * (99 - i as i32));
    }
    // Too little dynamic shared memory for 100 ints: the access leaves the window.
    cfg.dynamic_shared_bytes = 200;
    let err = launch(program(), "dyn_shared", &cfg, &[Arg::U64(a)], &env).unwrap_err();
    assert!(
        matches!(
            err,
            SimError::InvalidAddress {
                space: "shared",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn double_precision_with_a_double_parameter() {
    let n = 300usize;
    let env = TestEnv::default();
    let mut x: Vec<f64> = (0..n).map(|i| i as f64 * 0.25).collect();
    let mut y: Vec<f64> = (0..n).map(|i| 1.0 / (i + 1) as f64).collect();
    let expected: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(x, y)| 1.5f64.mul_add(*x, *y))
        .collect();
    let (px, py) = (env.register(&mut x), env.register(&mut y));
    launch(
        program(),
        "saxpy_d",
        &config([3, 1, 1], [128, 1, 1], 1),
        &[
            Arg::U64(px),
            Arg::U64(py),
            Arg::Bytes(1.5f64.to_le_bytes().to_vec()),
            Arg::U32(n as u32),
        ],
        &env,
    )
    .unwrap();
    assert_eq!(y, expected);
}

#[test]
fn unregistered_memory_is_rejected() {
    let env = TestEnv::default();
    let mut input = loop_inputs(64);
    let mut out = vec![0i32; 64];
    let a = env.register(&mut input);
    let b = out.as_mut_ptr() as u64; // not registered
    let err = launch(
        program(),
        "loops",
        &config([1, 1, 1], [64, 1, 1], 1),
        &[Arg::U64(a), Arg::U64(b), Arg::U32(64)],
        &env,
    )
    .unwrap_err();
    assert!(
        matches!(err, SimError::InvalidAddress { space: "global", address, .. } if address == b),
        "{err}"
    );
    assert!(out.iter().all(|&v| v == 0));
}

/// `loops` instrumented with every block counted on the device (so that each counter can be
/// checked here), run over `n` elements in CTAs of 64 threads with the clone's `banks`
/// parameter and a counter buffer of `banks` banks; checks the results and returns the
/// instrumentation and the counters.
fn run_counted_loops(
    n: usize,
    banks_param: u32,
    banks: usize,
) -> (KernelInstrumentation, Vec<u64>) {
    run_loops_instrumented(n, banks_param, banks, |module| {
        device_runtime::instrument_module_with(module, device_runtime::Placement::EveryBlock)
    })
}

/// [`run_counted_loops`] with the instrumentation `instrument` makes.
fn run_loops_instrumented(
    n: usize,
    banks_param: u32,
    banks: usize,
    instrument: impl Fn(&mut ptx_lexer::Module) -> Vec<KernelInstrumentation>,
) -> (KernelInstrumentation, Vec<u64>) {
    let mut module = ptx_lexer::parse(kernels_ptx()).unwrap();
    let results = instrument(&mut module);
    let loops = results.into_iter().find(|r| r.kernel == "loops").unwrap();
    let clone = loops.clone.clone().expect("loops is instrumented");
    let program = Program::load(&module.to_ptx()).unwrap_or_else(|e| panic!("{e}"));
    let threads_per_cta = 64u32;
    let env = TestEnv::default();
    let mut input = loop_inputs(n);
    let mut out = vec![0i32; n];
    let mut counters = vec![0u64; banks * loops.blocks.len() * 2];
    let (a, b, c) = (
        env.register(&mut input),
        env.register(&mut out),
        env.register(&mut counters),
    );
    let cfg = LaunchConfig {
        grid: [(n as u32).div_ceil(threads_per_cta), 1, 1],
        block: [threads_per_cta, 1, 1],
        dynamic_shared_bytes: 0,
        workers: 2,
        resident_ctas: 2,
    };
    let args = [
        Arg::U64(a),
        Arg::U64(b),
        Arg::U32(n as u32),
        Arg::U64(c),
        Arg::U32(banks_param),
    ];
    launch(&program, &clone, &cfg, &args, &env).unwrap();
    for (i, (&v, &got)) in input.iter().zip(&out).enumerate() {
        assert_eq!(got, loop_work(v), "element {i}");
    }
    (loops, counters)
}

/// The instrumented kernel (what cuda-flux runs): results unchanged, and the counters of the
/// entry block count every thread and warp once.
#[test]
fn instrumented_kernel_counts_threads_and_warps() {
    // The default placement leaves the entry block to the host runtime, which fills it from
    // the launch; every block is counted on the device here.
    let mut module = ptx_lexer::parse(kernels_ptx()).unwrap();
    let defaults = device_runtime::instrument_module(&mut module);
    let loops = defaults.iter().find(|r| r.kernel == "loops").unwrap();
    assert!(loops.entry_from_launch);
    // The `banks` parameter: bank mask 0 (one bank), mode `all`.
    let n = 1000usize;
    let (loops, counters) = run_counted_loops(n, 0, 1);
    let counts = unpacked(&counters, &loops.packed_counts);
    let ctas = (n as u64).div_ceil(64);
    assert_eq!(counts[0], (ctas * 64, ctas * 2), "entry block");
    // The block after `if (i < n)` runs for exactly n threads.
    assert_eq!(counts[1].0, n as u64, "in-range block threads");
    assert!(
        counts.iter().all(|&(t, w)| w <= t),
        "warps never exceed threads"
    );
}

/// One bank's (threads, warps) per block, the packed counters (`packed`: their blocks) split
/// as the host runtime splits them: threads in the low 32 bits, warps in the high 32 bits.
fn unpacked(bank: &[u64], packed: &[usize]) -> Vec<(u64, u64)> {
    bank.chunks(2)
        .enumerate()
        .map(|(b, pair)| match packed.contains(&b) {
            true => (pair[0] & u64::from(u32::MAX), (pair[0] >> 32) + pair[1]),
            false => (pair[0], pair[1]),
        })
        .collect()
}

/// The ranged banks a launch of 2^32 threads or more gets when its kernel has packed counters
/// (device-runtime's `MODE_RANGES`): each CTA adds to the banks of its range of CTA ids
/// (`id >> shift`), one per `%smid & mask`. Checked on a small grid with a small shift: each
/// range's banks hold exactly its own CTAs' counts.
#[test]
fn ranged_banks_hold_the_counts_of_their_own_ctas() {
    // 1000 elements in 16 CTAs of 64 threads. Two CTAs per range (shift 1), two banks per
    // range (mask 1): 8 ranges, 16 banks.
    let (n, threads_per_cta) = (1000usize, 64usize);
    let (shift, mask, ranges) = (1u32, 1u32, 8usize);
    let banks_per_range = mask as usize + 1;
    let banks = device_runtime::ranged_banks_param(mask, shift);
    let (loops, counters) = run_counted_loops(n, banks, ranges * banks_per_range);
    assert!(
        loops.packed_counts.contains(&0),
        "the entry block is packed"
    );
    let blocks = loops.blocks.len();
    let bank_words = blocks * 2;
    for range in 0..ranges {
        let mut entry = (0, 0);
        let mut in_range_threads = 0;
        for bank in counters[range * banks_per_range * bank_words..]
            .chunks(bank_words)
            .take(banks_per_range)
        {
            let counts = unpacked(bank, &loops.packed_counts);
            entry.0 += counts[0].0;
            entry.1 += counts[0].1;
            in_range_threads += counts[1].0;
        }
        // CTAs 2 * range and 2 * range + 1: 128 threads, 4 warps; those below n in range.
        let first_thread = range * 2 * threads_per_cta;
        let below_n = n.saturating_sub(first_thread).min(2 * threads_per_cta);
        assert_eq!(entry, (128, 4), "range {range}: entry block");
        assert_eq!(
            in_range_threads, below_n as u64,
            "range {range}: in-range block"
        );
    }
}

/// CTA counters (device-runtime's `cta.rs`: the adds go to shared memory, and each CTA's last
/// threads out add them to the bank they compute then) leave what the global adds of the same
/// placement leave, in each mode of the `banks` parameter: all, cta and warp (only CTA 0, or
/// its first warp, counted), and ranged banks (each range of CTA ids its own banks). Compared
/// per range: which of a range's banks (`%smid & mask`) a CTA adds to depends on the worker
/// that runs it.
#[test]
fn cta_counters_fill_each_range_as_global_counters_do() {
    let n = 1000usize;
    let placement = device_runtime::Placement::Derived;
    // (mode, banks parameter, ranges, banks per range)
    let modes = [
        ("all", 1, 1, 2),
        (
            "cta",
            device_runtime::MODE_CTA << device_runtime::MODE_SHIFT,
            1,
            1,
        ),
        (
            "warp",
            device_runtime::MODE_WARP << device_runtime::MODE_SHIFT,
            1,
            1,
        ),
        ("ranged", device_runtime::ranged_banks_param(1, 1), 8, 2),
    ];
    for (mode, banks_param, ranges, per_range) in modes {
        let banks = ranges * per_range;
        let (cta, cta_counters) = run_loops_instrumented(n, banks_param, banks, |module| {
            device_runtime::instrument_module_with(module, placement)
        });
        assert!(cta.cta_counters, "loops takes CTA counters");
        let (global, global_counters) = run_loops_instrumented(n, banks_param, banks, |module| {
            device_runtime::instrument_module_with_global_counters(module, placement)
        });
        assert!(!global.cta_counters);
        assert_eq!(cta.blocks, global.blocks);
        let per_range_sums = |counters: &[u64]| -> Vec<Vec<u64>> {
            let words = counters.len() / banks;
            counters
                .chunks(words * per_range)
                .map(|range| {
                    (0..words)
                        .map(|w| range.chunks(words).map(|bank| bank[w]).sum())
                        .collect()
                })
                .collect()
        };
        let sums = per_range_sums(&cta_counters);
        assert_eq!(sums, per_range_sums(&global_counters), "mode {mode}");
        assert!(
            sums.iter().all(|range| range.iter().any(|&c| c != 0)),
            "mode {mode}: every range counted something"
        );
    }
}
