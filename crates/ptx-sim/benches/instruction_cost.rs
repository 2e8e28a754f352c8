//! What one warp-instruction of each kind costs the interpreter, one worker thread.
//!
//! Each case is a kernel whose loop runs 1,000 times a body of 8 copies of one instruction
//! (64 CTAs of 256 threads, all lanes active unless the instruction's guard says otherwise);
//! the same loop with an empty body is timed too, and the difference divided by the body's
//! warp-instructions is the instruction's cost (best of 5 launches each). The `add.s32` row is
//! the yardstick: an instruction that costs several times as much is where the interpreter
//! (and the CPU target's stand-in for a GPU's time) is out of proportion. Counter code uses
//! `activemask`, `popc`, `mad.wide`, predicated `red`, the lane masks, `vote` and `match`; its
//! cost on the CPU target is what these rows say, with no path of its own.
//!
//! Run with `cargo bench -p ptx-sim --bench instruction_cost`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use common::{config, launch, load, Arg, TestEnv};

/// (name, one instruction). Registers set before the loop: `%r1` = `%tid.x`, `%r6` =
/// `activemask`, `%r9` = `%lanemask_le`, `%p2` true in the highest active lane only, `%p3`
/// false, `%rd1` = the output buffer, `%rd5` = 1, `%rd7` = 5, `%r12` = 1.0f.
const CASES: &[(&str, &str)] = &[
    ("add.s32", "add.s32 %r5, %r5, %r1;"),
    ("add.s32 immediate", "add.s32 %r5, %r5, 7;"),
    ("add.cc.u32", "add.cc.u32 %r5, %r5, %r1;"),
    ("mul.lo.s64", "mul.lo.s64 %rd5, %rd5, %rd7;"),
    ("mad.lo.s64", "mad.lo.s64 %rd5, %rd5, %rd7, %rd7;"),
    ("mul.wide.s32", "mul.wide.s32 %rd5, %r5, 4;"),
    ("mad.wide.u32", "mad.wide.u32 %rd5, %r7, 1, 4294967296;"),
    ("shl.b64", "shl.b64 %rd5, %rd7, 2;"),
    ("and.b64", "and.b64 %rd5, %rd7, 12;"),
    ("bfe.u32", "bfe.u32 %r5, %r1, 3, 4;"),
    ("popc.b32", "popc.b32 %r7, %r6;"),
    ("setp.le.u32", "setp.le.u32 %p4, %r6, %r9;"),
    ("and.pred", "and.pred %p4, %p2, %p1;"),
    ("selp.b32", "selp.b32 %r5, %r1, 0, %p2;"),
    ("cvt.u64.u32", "cvt.u64.u32 %rd5, %r7;"),
    ("cvt.rn.f32.s32", "cvt.rn.f32.s32 %r12, %r1;"),
    ("cvt.rzi.s32.f32", "cvt.rzi.s32.f32 %r5, %r12;"),
    ("add.f32", "add.f32 %r12, %r12, %r12;"),
    ("fma.rn.f32", "fma.rn.f32 %r12, %r12, %r12, %r12;"),
    ("mov.b32", "mov.b32 %r5, %r1;"),
    ("mov %tid.x", "mov.u32 %r5, %tid.x;"),
    ("mov %ctaid.x", "mov.u32 %r5, %ctaid.x;"),
    ("mov %smid", "mov.u32 %r8, %smid;"),
    ("mov %lanemask_le", "mov.u32 %r8, %lanemask_le;"),
    ("activemask", "activemask.b32 %r6;"),
    ("ld.param.u64", "ld.param.u64 %rd6, [out];"),
    ("cvta.to.global", "cvta.to.global.u64 %rd6, %rd1;"),
    ("st.global, one address", "st.global.u32 [%rd1+64], %r1;"),
    (
        "red.global, one lane",
        "@%p2 red.global.add.u64 [%rd1], %rd5;",
    ),
    (
        "red.global, no lane",
        "@%p3 red.global.add.u64 [%rd1], %rd5;",
    ),
    ("vote.ballot", "vote.sync.ballot.b32 %r11, %p2, %r6;"),
    ("shfl.bfly", "shfl.sync.bfly.b32 %r5, %r1, 1, 31, -1;"),
    (
        "match.all.b64, agreeing",
        "match.all.sync.b64 %r10|%p4, %rd7, %r6;",
    ),
    (
        "match.any.b32, all differ",
        "match.any.sync.b32 %r10, %r1, %r6;",
    ),
];

const TRIPS: u32 = 1000;
const COPIES: usize = 8;
const CTAS: u32 = 64;
const THREADS: u32 = 256;

fn kernel(body: &str) -> String {
    let copies = format!("    {body}\n").repeat(COPIES);
    format!(
        r#"
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<6>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, %lanemask_le;
    activemask.b32 %r6;
    setp.le.u32 %p2, %r6, %r9;
    setp.ne.u32 %p3, %r6, %r6;
    mov.u64 %rd5, 1;
    mov.u64 %rd7, 5;
    mov.u32 %r3, 0;
    mov.f32 %r12, 0f3F800000;
LOOP:
{copies}    add.s32 %r3, %r3, 1;
    setp.lt.u32 %p1, %r3, {TRIPS};
    @%p1 bra LOOP;
    ret;
}}
"#
    )
}

/// Best of five launches, in seconds.
fn time(body: &str) -> f64 {
    let program = load(&kernel(body));
    let env = TestEnv::default();
    let mut out = vec![0u64; 64];
    let address = env.register(&mut out);
    let config = config([CTAS, 1, 1], [THREADS, 1, 1], 1);
    (0..5)
        .map(|_| {
            let start = Instant::now();
            launch(&program, "k", &config, &[Arg::U64(address)], &env)
                .unwrap_or_else(|e| panic!("`{body}`: {e}"));
            start.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let empty = time("// no instruction");
    let warp_instructions = f64::from(CTAS * THREADS / 32) * f64::from(TRIPS) * COPIES as f64;
    let mut yardstick = None;
    println!("| instruction | ns per warp-instruction | / add.s32 |");
    println!("| --- | ---: | ---: |");
    for (name, body) in CASES {
        let ns = (time(body) - empty).max(0.0) / warp_instructions * 1e9;
        let base = *yardstick.get_or_insert(ns);
        println!("| `{name}` | {ns:.1} | {:.2} |", ns / base);
    }
}
