//! The flush of a loop that a warp's lanes leave at different times (device-runtime's
//! `shrinking_flush` and `shrinking_flush_fast`), run by the interpreter on one warp whose lanes
//! hold chosen counts: for any set of active lanes and any counts, the leader must add the sum
//! of the active lanes' counts (threads) and their maximum (warps), with `redux.sync` and with
//! the shuffles PTX before sm_80 uses instead (with `match.sync` from sm_70, without it
//! before). The expected values are computed here.

mod common;

use common::{config, launch, Arg, TestEnv};
use device_runtime::{
    shrinking_flush, shrinking_flush_fast, CountForm, CounterRegisters, WarpReductions,
};
use ptx_lexer::{Statement, StatementKind};
use ptx_sim::Program;

/// The counter code's registers, as the kernel below declares them.
fn regs() -> CounterRegisters {
    CounterRegisters {
        b32: "%r".into(),
        b64: "%rd".into(),
        pred: "%p".into(),
        counter: "%c".into(),
        counters: 2,
    }
}

fn text(code: &[Statement]) -> String {
    code.iter()
        .map(|s| match s.kind() {
            StatementKind::Instruction(i) => format!("\t{i}\n"),
            StatementKind::Label(l) => format!("{l}:\n"),
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

/// A kernel of one warp: lane l loads its loop counter `%c0` from `values[l]`; the lanes in
/// `lanes` (a bit per lane) run the flush of one block counted as `%c0`, whose counter pair is
/// `counters[0..2]`; `fast` places the flush with its fast path and out-of-line slow path.
/// `split`: the block is counted as `%c0 + %c1` instead (a loop's trips and its exits), and
/// lane l moves min(value, l % 4) from `%c0` to `%c1`, so that lanes whose counts are equal
/// hold different counters.
fn kernel(reductions: WarpReductions, fast: bool, split: bool) -> String {
    let blocks = [(
        0,
        CountForm {
            constant: 0,
            terms: if split {
                vec![(0, 1), (1, 1)]
            } else {
                vec![(0, 1)]
            },
        },
    )];
    let split_code = if split {
        "\tand.b32 %t2, %t0, 3;\n\tcvt.u64.u32 %c1, %t2;\n\tmin.u64 %c1, %c1, %c0;\n\
\tsub.s64 %c0, %c0, %c1;\n"
    } else {
        "\tmov.u64 %c1, 0;\n"
    };
    let mut next = 0;
    let mut fresh_label = || {
        next += 1;
        format!("$TREE{next}")
    };
    let (flush, out_of_line) = if fast {
        shrinking_flush_fast(
            &regs(),
            &blocks,
            &[],
            "$SLOW",
            "$RESUME",
            reductions,
            &mut fresh_label,
        )
        .expect("a count of one counter has a fast path")
    } else {
        // The full flush alone (in line, where it loops: the kernel's own blocks around it are
        // not counted here).
        (
            shrinking_flush(&regs(), &blocks, &[], reductions, &mut fresh_label),
            Vec::new(),
        )
    };
    let target = match reductions {
        WarpReductions::Redux => "sm_80",
        WarpReductions::Shuffles => "sm_70",
        WarpReductions::ShufflesWithoutMatch => "sm_61",
    };
    format!(
        ".version 7.8\n.target {target}\n.address_size 64\n\
.visible .entry flush(.param .u64 counters, .param .u64 values, .param .u32 lanes)\n{{\n\
\t.reg .pred %p<5>;\n\t.reg .b32 %r<10>;\n\t.reg .b64 %rd<6>;\n\t.reg .b64 %c<2>;\n\
\t.reg .pred %q<1>;\n\t.reg .b32 %t<3>;\n\t.reg .b64 %u<2>;\n\
\tld.param.u64 %rd0, [counters];\n\
\tmov.u32 %r5, %lanemask_le;\n\
\tmov.u32 %t0, %tid.x;\n\
\tld.param.u64 %u0, [values];\n\
\tmul.wide.u32 %u1, %t0, 8;\n\
\tadd.s64 %u0, %u0, %u1;\n\
\tld.global.u64 %c0, [%u0];\n\
{}\tld.param.u32 %t1, [lanes];\n\
\tshr.b32 %t2, %t1, %t0;\n\
\tand.b32 %t2, %t2, 1;\n\
\tsetp.eq.u32 %q0, %t2, 0;\n\
\t@%q0 bra $SKIP;\n\
{}$SKIP:\n\tret;\n{}}}\n",
        split_code,
        text(&flush),
        text(&out_of_line)
    )
}

/// What the flush adds to the pair: (threads, warps) over the lanes in `lanes`.
fn flushed(program: &Program, values: &mut [u64; 32], lanes: u32) -> [u64; 2] {
    let env = TestEnv::default();
    let mut counters = [0u64; 2];
    let (c, v) = (env.register(&mut counters), env.register(values));
    launch(
        program,
        "flush",
        &config([1, 1, 1], [32, 1, 1], 1),
        &[Arg::U64(c), Arg::U64(v), Arg::U32(lanes)],
        &env,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    counters
}

/// A deterministic stream of numbers (xorshift64*).
struct Numbers(u64);

impl Numbers {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn the_leader_adds_the_active_lanes_sum_and_maximum_whatever_lanes_are_active() {
    let mut numbers = Numbers(0x9E37_79B9_7F4A_7C15);
    let mut masks = vec![
        u32::MAX,
        1,
        1 << 31,
        0x8000_0001,
        0xAAAA_AAAA,
        0x5555_5554,
        0x0F0F_00F1,
        0xFFFF_FFFE,
        0x7FFF_FFFF,
    ];
    masks.extend((0..12).map(|_| numbers.next() as u32 | 1 << (numbers.next() % 32)));
    for reductions in [
        WarpReductions::Redux,
        WarpReductions::Shuffles,
        WarpReductions::ShufflesWithoutMatch,
    ] {
        for (fast, split) in [(false, false), (true, false), (false, true), (true, true)] {
            let ptx = kernel(reductions, fast, split);
            let program = Program::load(&ptx).unwrap_or_else(|e| panic!("{e}\n{ptx}"));
            for &lanes in &masks {
                // Counts below 2^20 (the fast path's), with zeros (lanes that skipped the
                // loop); counts of up to 40 bits, some above 2^32; the same count in every
                // lane (the shuffles' cheapest path): zero, small, large; 0 or 1 (the
                // shuffles' ballots), and the same with one 2 (not theirs).
                let uniform = numbers.next() >> 30;
                for kind in [
                    "20 bits", "40 bits", "zero", "1", "uniform", "0 or 1", "one 2",
                ] {
                    let mut values = [0u64; 32];
                    for v in values.iter_mut() {
                        let n = numbers.next();
                        *v = match kind {
                            "20 bits" if n % 5 != 0 => n >> 44,
                            "40 bits" if n % 5 != 0 => n >> 24,
                            "1" => 1,
                            "uniform" => uniform,
                            "0 or 1" | "one 2" => n % 2,
                            _ => 0,
                        };
                    }
                    if kind == "one 2" {
                        values[lanes.trailing_zeros() as usize] = 2;
                    }
                    let active = (0..32).filter(|l| lanes >> l & 1 == 1);
                    let expected = [
                        active.clone().map(|l| values[l]).sum::<u64>(),
                        active.map(|l| values[l]).max().unwrap_or(0),
                    ];
                    let got = flushed(&program, &mut values, lanes);
                    assert_eq!(
                        got, expected,
                        "{reductions:?}, fast path {fast}, split {split}, lanes {lanes:#010x}, \
                         counts {values:?}"
                    );
                }
            }
        }
    }
}

/// Lanes leave loop `$L` at different times (their trip counts differ) and meet at `$X`, which
/// heads a loop of its own (no block between them, as where a compiler leaves a preheader
/// empty): the flush at the top of `$X` runs on every trip of that loop. (`$L`'s bound is read
/// at an offset, `[k_n+0]`, which the launch tree does not follow, so that the device counts
/// `$L` in registers rather than the runtime from the launch.)
const MEETING_HEADS_A_LOOP: &str = "
.visible .entry k(.param .u64 k_p, .param .u32 k_n, .param .u32 k_m)
{
\t.reg .pred %p<8>;
\t.reg .b32 %r<16>;
\t.reg .b64 %rd<8>;
\tld.param.u64 %rd1, [k_p];
\tld.param.u32 %r1, [k_n+0];
\tld.param.u32 %r2, [k_m];
\tmov.u32 %r3, %tid.x;
\tmov.u32 %r4, 0;
\tmov.u32 %r5, 0;
$L:
\tadd.s32 %r4, %r4, %r3;
\tadd.s32 %r3, %r3, 32;
\tsetp.lt.s32 %p1, %r3, %r1;
\t@%p1 bra $L;
$X:
\tadd.s32 %r4, %r4, %r5;
\tadd.s32 %r5, %r5, 1;
\tsetp.lt.s32 %p2, %r5, %r2;
\t@%p2 bra $X;
\tst.global.u32 [%rd1], %r4;
\tret;
}
";

/// The counter pairs of blocks 1 (`$L`) and 2 (`$X`) after one launch of 64 threads (lanes
/// run `$L` 1 or 2 times, the warp `$X` 5 times) of [`MEETING_HEADS_A_LOOP`] for `target`.
fn meeting_heads_a_loop_counts(target: &str, placement: device_runtime::Placement) -> Vec<u64> {
    let ptx = format!(".version 7.8\n.target {target}\n.address_size 64\n{MEETING_HEADS_A_LOOP}");
    let mut module = ptx_lexer::parse(&ptx).unwrap_or_else(|e| panic!("{e}"));
    let results = device_runtime::instrument_module_with(&mut module, placement);
    let clone = results[0].clone.clone().expect("k is instrumented");
    let program = Program::load(&module.to_ptx()).unwrap_or_else(|e| panic!("{e}"));
    let env = TestEnv::default();
    let mut out = [0u32; 1];
    let mut counters = vec![0u64; results[0].blocks.len() * 2];
    let (p, c) = (env.register(&mut out), env.register(&mut counters));
    launch(
        &program,
        &clone,
        &config([1, 1, 1], [64, 1, 1], 1),
        &[
            Arg::U64(p),
            Arg::U32(45),
            Arg::U32(5),
            Arg::U64(c),
            Arg::U32(0),
        ],
        &env,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    counters[2..6].to_vec()
}

#[test]
fn a_meeting_block_that_heads_a_loop_flushes_each_run_of_the_first_loop_once() {
    // Before the fix, the flush at the top of `$X` ran again on each of its 5 trips with the
    // counters of the one run of `$L`: five times its counts.
    for target in ["sm_61", "sm_70", "sm_80"] {
        let derived = meeting_heads_a_loop_counts(target, device_runtime::Placement::Derived);
        let every = meeting_heads_a_loop_counts(target, device_runtime::Placement::EveryBlock);
        // $L: 64 + 13 lanes' trips in 2 + 1 warp runs; $X: 64 x 5 threads, 2 x 5 warps.
        assert_eq!(every, [77, 3, 320, 10], "{target}, every block");
        assert_eq!(derived, every, "{target}, derived");
    }
}
