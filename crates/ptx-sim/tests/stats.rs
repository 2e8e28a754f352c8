//! `LaunchStats`: the warp- and thread-level instruction counts and global atomics of a
//! launch, against counts worked out by hand from the PTX.

mod common;

use common::{config, launch, load, Arg, TestEnv};
use ptx_sim::LaunchStats;

/// 11 straight-line instructions (one guarded global `red`, a shared `atom`, a generic `red`
/// on shared memory, a generic `red` on global memory), a divergent branch whose odd arm has
/// 2 instructions and even arm 1, then `ret`.
const MIXED: &str = r#"
.visible .entry mixed(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<5>;
    .reg .b64 %rd<4>;
    .shared .align 4 .u32 s;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 red.global.add.u32 [%rd1], 1;
    atom.shared.add.u32 %r3, [s], 1;
    mov.u64 %rd2, s;
    cvta.shared.u64 %rd3, %rd2;
    red.add.u32 [%rd3], 1;
    red.add.u32 [%rd1+4], 1;
    @%p1 bra EVEN;
    add.u32 %r4, %r1, 1;
    bra.uni JOIN;
EVEN:
    add.u32 %r4, %r1, 2;
JOIN:
    ret;
}
"#;

fn run_mixed(workers: usize) -> (LaunchStats, [u32; 2]) {
    let program = load(MIXED);
    let env = TestEnv::default();
    let mut out = vec![0u32; 2];
    let address = env.register(&mut out);
    let stats = launch(
        &program,
        "mixed",
        &config([3, 1, 1], [40, 1, 1], workers),
        &[Arg::U64(address)],
        &env,
    )
    .unwrap();
    (stats, [out[0], out[1]])
}

#[test]
fn counts_issues_active_lanes_and_global_atomics() {
    // Per CTA of 40 threads: warp 0 has 32 lanes (16 even), warp 1 has 8 (4 even). Both take
    // both arms, so each issues 11 + 2 + 1 + 1 = 15 instructions.
    // Threads: warp 0: 11 x 32 + 2 x 16 + 1 x 16 + 32 = 432; warp 1: 11 x 8 + 2 x 4 + 4 + 8 = 108
    // (the guarded `red` counts all active lanes, as a profile does).
    // Global atomics: the guarded `red.global` on the 20 even lanes, the generic `red` on
    // global memory on all 40; the shared `atom` and the generic `red` on shared are not.
    for workers in [1, 2] {
        let (stats, out) = run_mixed(workers);
        assert_eq!(out, [3 * 20, 3 * 40], "the atomics ran ({workers} workers)");
        assert_eq!(
            stats,
            LaunchStats {
                warp_instructions: 3 * 2 * 15,
                thread_instructions: 3 * (432 + 108),
                global_atomics: 3 * 60,
            },
            "{workers} workers"
        );
    }
}

#[test]
fn a_divergent_indirect_call_is_one_instruction() {
    // The kernel issues 14 instructions (the `.param` declarations and the prototype are
    // none), and each callee 4, for 16 lanes each. The call runs its two target groups one
    // after the other, but is issued once, with all 32 lanes, as a profile counts it.
    let program = load(common::INDIRECT_CALL);
    let env = TestEnv::default();
    let mut out = vec![0i32; 32];
    let address = env.register(&mut out);
    let stats = launch(
        &program,
        "pick",
        &config([1, 1, 1], [32, 1, 1], 1),
        &[Arg::U64(address)],
        &env,
    )
    .unwrap();
    assert_eq!(out[2], 4);
    assert_eq!(out[3], -3);
    assert_eq!(
        stats,
        LaunchStats {
            warp_instructions: 14 + 4 + 4,
            thread_instructions: 14 * 32 + 4 * 16 + 4 * 16,
            global_atomics: 0,
        }
    );
}
