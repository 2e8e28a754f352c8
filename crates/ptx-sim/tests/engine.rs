//! Engine features on hand-written PTX: reconvergence (checked through `activemask`), barriers,
//! calls, warp intrinsics, atomics, memory checks and errors. Expected values come from the
//! PTX ISA semantics worked out by hand for each kernel.

mod common;

use common::{config, launch, launch_with_output, load, Arg, TestEnv};
use ptx_sim::{ChannelKind, LaunchConfig, Program, SimError, Texture};

/// Launches `kernel`, which has no parameters, and returns the error it fails with.
fn launch_error(program: &Program, kernel: &str, config: LaunchConfig) -> SimError {
    launch(program, kernel, &config, &[], &TestEnv::default()).unwrap_err()
}

/// A linear texture of one-channel f32 texels, registered with `env`.
fn f32_texture(env: &TestEnv, texels: &mut [f32]) -> Texture {
    let len_bytes = std::mem::size_of_val(texels) as u64;
    Texture {
        base: env.register(texels),
        len_bytes,
        kind: ChannelKind::Float,
        channels: 1,
        bits_per_channel: 32,
        normalized_float: false,
        sampling: None,
    }
}

/// Each thread records `activemask` before a divergent if/else, in each arm, and after the join.
const DIVERGE: &str = r#"
.visible .entry diverge(.param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 12;
    add.s64 %rd3, %rd1, %rd2;
    activemask.b32 %r2;
    st.global.u32 [%rd3], %r2;
    and.b32 %r3, %r1, 1;
    setp.eq.u32 %p1, %r3, 0;
    @%p1 bra EVEN;
    activemask.b32 %r4;
    st.global.u32 [%rd3+4], %r4;
    bra.uni JOIN;
EVEN:
    activemask.b32 %r4;
    st.global.u32 [%rd3+4], %r4;
JOIN:
    activemask.b32 %r5;
    st.global.u32 [%rd3+8], %r5;
    ret;
}
"#;

#[test]
fn divergent_branch_reconverges_at_the_post_dominator() {
    let program = load(DIVERGE);
    let out = launch_with_output(
        &program,
        "diverge",
        config([1, 1, 1], [40, 1, 1], 1),
        vec![[0u32; 3]; 40],
    );
    for (i, row) in out.iter().enumerate() {
        let (full, even, odd) = if i < 32 {
            (u32::MAX, 0x5555_5555, 0xAAAA_AAAA)
        } else {
            (0xFF, 0x55, 0xAA)
        };
        let arm = if i % 2 == 0 { even } else { odd };
        assert_eq!(*row, [full, arm, full], "thread {i}");
    }
}

/// Nested divergence inside a loop whose trip count differs per lane (`tid % 4`): inside the
/// loop at iteration k the active lanes are those with `tid % 4 > k`; within the nested if
/// only the odd ones among them; after the loop everything is reconverged.
const NESTED: &str = r#"
.visible .entry nested(.param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    and.b32 %r2, %r1, 3;
    mov.u32 %r3, 0;
    mov.u32 %r10, 0;
    mov.u32 %r11, 0;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra DONE;
LOOP:
    activemask.b32 %r4;
    popc.b32 %r5, %r4;
    add.s32 %r10, %r10, %r5;
    and.b32 %r6, %r1, 1;
    setp.eq.u32 %p2, %r6, 0;
    @%p2 bra SKIP;
    activemask.b32 %r7;
    popc.b32 %r8, %r7;
    add.s32 %r11, %r11, %r8;
SKIP:
    add.s32 %r3, %r3, 1;
    setp.lt.u32 %p3, %r3, %r2;
    @%p3 bra LOOP;
DONE:
    activemask.b32 %r12;
    st.global.u32 [%rd3], %r10;
    st.global.u32 [%rd3+4], %r11;
    st.global.u32 [%rd3+8], %r12;
    st.global.u32 [%rd3+12], %r3;
    ret;
}
"#;

#[test]
fn nested_divergence_in_a_loop_with_divergent_exits() {
    let program = load(NESTED);
    let out = launch_with_output(
        &program,
        "nested",
        config([1, 1, 1], [32, 1, 1], 1),
        vec![[0u32; 4]; 32],
    );
    // Lanes with tid%4 > k at iteration k: 24 at k=0, 16 at k=1, 8 at k=2.
    let loop_sum = |trips: u32| [24u32, 16, 8][..trips as usize].iter().sum::<u32>();
    // Odd lanes: tid%4 in {1, 3}: at k=0 all 16 odd lanes, at k=1 and k=2 the 8 with tid%4==3.
    let odd_sum = |trips: u32| [16u32, 8, 8][..trips as usize].iter().sum::<u32>();
    for (i, row) in out.iter().enumerate() {
        let trips = i as u32 % 4;
        let odd = if i % 2 == 1 { odd_sum(trips) } else { 0 };
        assert_eq!(*row, [loop_sum(trips), odd, u32::MAX, trips], "thread {i}");
    }
}

/// Threads write their id to shared memory, synchronise, and read their mirror's value.
const MIRROR: &str = r#"
.shared .align 4 .b8 tile[256];
.visible .entry mirror(.param .u64 out)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u64 %rd2, tile;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.shared.u32 [%rd4], %r1;
    bar.sync 0;
    sub.s32 %r2, 63, %r1;
    mul.wide.u32 %rd5, %r2, 4;
    add.s64 %rd6, %rd2, %rd5;
    ld.shared.u32 %r3, [%rd6];
    cvta.to.global.u64 %rd7, %rd1;
    add.s64 %rd7, %rd7, %rd3;
    st.global.u32 [%rd7], %r3;
    ret;
}
"#;

#[test]
fn bar_sync_orders_shared_memory_across_warps() {
    let program = load(MIRROR);
    assert_eq!(program.kernel("mirror").unwrap().static_shared_bytes, 256);
    let out = launch_with_output(
        &program,
        "mirror",
        config([3, 1, 1], [64, 1, 1], 2),
        vec![0u32; 64 * 3],
    );
    // Every CTA writes the same 64 entries (no ctaid in the index).
    for (i, v) in out.iter().take(64).enumerate() {
        assert_eq!(*v, 63 - i as u32, "thread {i}");
    }
}

/// Recursive factorial through `.param` call sequences; lanes reach the base case at
/// different depths.
const FACTORIAL: &str = r#"
.func (.param .b32 retval) fact(.param .b32 n)
{
    .reg .pred %p1;
    .reg .b32 %r<5>;
    ld.param.b32 %r1, [n];
    setp.le.s32 %p1, %r1, 1;
    @%p1 bra BASE;
    add.s32 %r2, %r1, -1;
    {
        .param .b32 p0;
        .param .b32 r0;
        st.param.b32 [p0], %r2;
        call.uni (r0), fact, (p0);
        ld.param.b32 %r3, [r0];
    }
    mul.lo.s32 %r4, %r3, %r1;
    st.param.b32 [retval], %r4;
    ret;
BASE:
    mov.u32 %r4, 1;
    st.param.b32 [retval], %r4;
    ret;
}

.visible .entry factorials(.param .u64 out)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 7;
    {
        .param .b32 param0;
        .param .b32 retval0;
        st.param.b32 [param0], %r2;
        call.uni (retval0), fact, (param0);
        ld.param.b32 %r3, [retval0];
    }
    activemask.b32 %r4;
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    st.global.u32 [%rd3+4], %r4;
    ret;
}
"#;

#[test]
fn recursive_calls_with_divergent_depth() {
    let program = load(FACTORIAL);
    assert!(program.kernel("factorials").unwrap().local_bytes > 0);
    let out = launch_with_output(
        &program,
        "factorials",
        config([1, 1, 1], [48, 1, 1], 1),
        vec![[0u32; 2]; 48],
    );
    let fact = |n: u32| (1..=n.max(1)).product::<u32>();
    for (i, row) in out.iter().enumerate() {
        let full = if i < 32 { u32::MAX } else { 0xFFFF };
        assert_eq!(*row, [fact(i as u32 % 8), full], "thread {i}");
    }
}

/// `shfl.sync` in each mode, `vote.sync`, `match` and `redux`.
const WARP_OPS: &str = r#"
.visible .entry warp_ops(.param .u64 out)
{
    .reg .pred %p<6>;
    .reg .b32 %r<30>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 40;
    add.s64 %rd3, %rd1, %rd2;
    // Tree reduction with shfl.down: lane 0 ends with the sum 0+..+31 = 496.
    mov.u32 %r2, %r1;
    shfl.sync.down.b32 %r3, %r2, 16, 31, -1;
    add.s32 %r2, %r2, %r3;
    shfl.sync.down.b32 %r3, %r2, 8, 31, -1;
    add.s32 %r2, %r2, %r3;
    shfl.sync.down.b32 %r3, %r2, 4, 31, -1;
    add.s32 %r2, %r2, %r3;
    shfl.sync.down.b32 %r3, %r2, 2, 31, -1;
    add.s32 %r2, %r2, %r3;
    shfl.sync.down.b32 %r3, %r2, 1, 31, -1;
    add.s32 %r2, %r2, %r3;
    st.global.u32 [%rd3], %r2;
    // up by 1 with predicate: lane 0 keeps its own value and gets false.
    shfl.sync.up.b32 %r4|%p1, %r1, 1, 0, -1;
    selp.u32 %r5, 1, 0, %p1;
    st.global.u32 [%rd3+4], %r4;
    st.global.u32 [%rd3+8], %r5;
    // bfly 1 swaps neighbours; idx with 8-lane segments (c = 0x181f... segmask 0x18) reads
    // lane 2 of the segment.
    shfl.sync.bfly.b32 %r6, %r1, 1, 31, -1;
    st.global.u32 [%rd3+12], %r6;
    shfl.sync.idx.b32 %r7, %r1, 2, 6175, -1;
    st.global.u32 [%rd3+16], %r7;
    // Votes on "lane is even".
    and.b32 %r8, %r1, 1;
    setp.eq.u32 %p2, %r8, 0;
    vote.sync.ballot.b32 %r9, %p2, -1;
    st.global.u32 [%rd3+20], %r9;
    vote.sync.any.pred %p3, %p2, -1;
    vote.sync.all.pred %p4, %p2, -1;
    selp.u32 %r10, 1, 0, %p3;
    selp.u32 %r11, 2, 0, %p4;
    or.b32 %r12, %r10, %r11;
    st.global.u32 [%rd3+24], %r12;
    // match.any on tid/8: lanes of the same octet.
    shr.u32 %r13, %r1, 3;
    match.any.sync.b32 %r14, %r13, -1;
    st.global.u32 [%rd3+28], %r14;
    redux.sync.max.u32 %r15, %r1, -1;
    st.global.u32 [%rd3+32], %r15;
    vote.sync.ballot.b32 %r16, !%p2, -1;
    st.global.u32 [%rd3+36], %r16;
    ret;
}
"#;

#[test]
fn shuffles_votes_match_and_redux() {
    let program = load(WARP_OPS);
    let out = launch_with_output(
        &program,
        "warp_ops",
        config([1, 1, 1], [32, 1, 1], 1),
        vec![[0u32; 10]; 32],
    );
    assert_eq!(out[0][0], 496);
    for (i, row) in out.iter().enumerate() {
        let i = i as u32;
        let up = if i == 0 { 0 } else { i - 1 };
        assert_eq!(row[1], up, "shfl.up value, lane {i}");
        assert_eq!(row[2], u32::from(i != 0), "shfl.up predicate, lane {i}");
        assert_eq!(row[3], i ^ 1, "shfl.bfly, lane {i}");
        assert_eq!(
            row[4],
            (i & !7) | 2,
            "shfl.idx in 8-lane segments, lane {i}"
        );
        assert_eq!(row[5], 0x5555_5555, "ballot");
        assert_eq!(row[6], 1, "any but not all");
        assert_eq!(row[7], 0xFFu32 << (i & !7), "match.any");
        assert_eq!(row[8], 31, "redux.max");
        assert_eq!(row[9], 0xAAAA_AAAA, "ballot of a negated predicate");
    }
}

/// `match` among lanes 3 to 28 only (the others branch past it): `any` on `(tid * 7) % 5`,
/// `all` on a 64-bit value the lanes share and on one where lane 20 differs in its high word.
const MATCH_SOME_LANES: &str = r#"
.visible .entry match_some_lanes(.param .u64 out)
{
    .reg .pred %p<5>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 24;
    add.s64 %rd3, %rd1, %rd2;
    setp.lt.u32 %p1, %r1, 3;
    setp.gt.u32 %p2, %r1, 28;
    or.pred %p3, %p1, %p2;
    @%p3 bra DONE;
    activemask.b32 %r2;
    mul.lo.u32 %r3, %r1, 7;
    rem.u32 %r4, %r3, 5;
    match.any.sync.b32 %r5, %r4, %r2;
    mov.u64 %rd4, 81985529216961;
    match.all.sync.b64 %r6|%p4, %rd4, %r2;
    selp.u32 %r7, 1, 0, %p4;
    setp.eq.u32 %p1, %r1, 20;
    selp.u64 %rd5, 4294967296, 0, %p1;
    add.s64 %rd6, %rd4, %rd5;
    match.all.sync.b64 %r8|%p4, %rd6, %r2;
    selp.u32 %r9, 1, 0, %p4;
    st.global.v2.u32 [%rd3], {%r5, %r6};
    st.global.v2.u32 [%rd3+8], {%r7, %r8};
    st.global.v2.u32 [%rd3+16], {%r9, %r2};
DONE:
    ret;
}
"#;

#[test]
fn match_among_some_lanes_groups_by_value() {
    let program = load(MATCH_SOME_LANES);
    let out = launch_with_output(
        &program,
        "match_some_lanes",
        config([1, 1, 1], [32, 1, 1], 1),
        vec![[0u32; 6]; 32],
    );
    let members: u32 = (3..=28).map(|lane| 1u32 << lane).sum();
    for (lane, row) in out.iter().enumerate() {
        if !(3..=28).contains(&lane) {
            assert_eq!(row, &[0; 6], "lane {lane} branched past the matches");
            continue;
        }
        let value = |l: usize| (l * 7) % 5;
        let same: u32 = (3..=28usize)
            .filter(|&l| value(l) == value(lane))
            .map(|l| 1u32 << l)
            .sum();
        assert_eq!(row[0], same, "match.any, lane {lane}");
        assert_eq!(
            row[1], members,
            "match.all mask where all agree, lane {lane}"
        );
        assert_eq!(
            row[2], 1,
            "match.all predicate where all agree, lane {lane}"
        );
        assert_eq!(
            row[3], 0,
            "match.all mask where lane 20 differs, lane {lane}"
        );
        assert_eq!(
            row[4], 0,
            "match.all predicate where lane 20 differs, lane {lane}"
        );
        assert_eq!(row[5], members, "activemask, lane {lane}");
    }
}

/// Every thread of 64 CTAs adds to shared counters; runs on 2 workers.
const ATOMICS: &str = r#"
.visible .entry atomics(.param .u64 counters)
{
    .reg .pred %p1;
    .reg .b32 %r<6>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [counters];
    cvta.to.global.u64 %rd1, %rd1;
    atom.global.add.u32 %r1, [%rd1], 1;
    red.global.add.u64 [%rd1+8], 2;
    mov.f32 %f1, 0f3F000000;
    atom.global.add.f32 %f2, [%rd1+16], %f1;
    mov.u32 %r2, %tid.x;
    atom.global.max.s32 %r3, [%rd1+20], %r2;
    // A CAS loop incrementing a second counter.
RETRY:
    ld.volatile.global.u32 %r4, [%rd1+24];
    add.s32 %r5, %r4, 3;
    atom.global.cas.b32 %r3, [%rd1+24], %r4, %r5;
    setp.ne.u32 %p1, %r3, %r4;
    @%p1 bra RETRY;
    ret;
}
"#;

#[test]
fn atomics_from_parallel_ctas() {
    let program = load(ATOMICS);
    let counters = launch_with_output(
        &program,
        "atomics",
        config([64, 1, 1], [128, 1, 1], 2),
        vec![0u64; 4],
    );
    let threads = 64 * 128u64;
    assert_eq!(counters[0] as u32, threads as u32);
    assert_eq!(counters[1], 2 * threads);
    assert_eq!(f32::from_bits(counters[2] as u32), threads as f32 * 0.5);
    assert_eq!((counters[2] >> 32) as u32, 127);
    assert_eq!(counters[3] as u32, 3 * threads as u32);
}

#[test]
fn out_of_bounds_global_access_is_an_error_with_its_line() {
    let program = load(
        r#"
.visible .entry oob(.param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"#,
    );
    let env = TestEnv::default();
    let mut out = vec![0u32; 16];
    let address = env.register(&mut out);
    let err = launch(
        &program,
        "oob",
        &config([1, 1, 1], [32, 1, 1], 1),
        &[Arg::U64(address)],
        &env,
    )
    .unwrap_err();
    match err {
        SimError::InvalidAddress {
            space,
            address: a,
            len,
            line,
            thread,
            ..
        } => {
            assert_eq!(space, "global");
            assert_eq!(a, address + 64);
            assert_eq!(len, 4);
            assert_eq!(thread, [16, 0, 0]);
            // Header (3 lines) + blank + `{`-line offsets: `st.global` is line 14.
            assert_eq!(line, 14);
        }
        other => panic!("expected InvalidAddress, got {other}"),
    }
}

#[test]
fn shared_window_overflow_is_an_error() {
    let program = load(
        r#"
.shared .align 4 .b8 small[16];
.visible .entry over()
{
    .reg .b32 %r<2>;
    mov.u32 %r1, 7;
    st.shared.u32 [small+16], %r1;
    ret;
}
"#,
    );
    let err = launch_error(&program, "over", config([1, 1, 1], [1, 1, 1], 1));
    assert!(
        matches!(
            err,
            SimError::InvalidAddress {
                space: "shared",
                address: 16,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn unsupported_opcode_names_the_instruction_and_line() {
    let program = load(
        r#"
.visible .entry odd()
{
    .reg .b32 %r<3>;
    mov.u32 %r1, 1;
    suld.b.1d.v4.b32.trap {%r1, %r1, %r1, %r1}, [%r2, {%r1}];
    ret;
}
"#,
    );
    let err = launch_error(&program, "odd", config([1, 1, 1], [1, 1, 1], 1));
    match &err {
        SimError::Unsupported { what, line } => {
            assert!(what.contains("suld"), "{what}");
            assert_eq!(*line, 10);
        }
        other => panic!("expected Unsupported, got {other}"),
    }
}

#[test]
fn barrier_deadlock_is_detected() {
    let program = load(
        r#"
.visible .entry stuck()
{
    .reg .pred %p1;
    .reg .b32 %r<3>;
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 32;
    @%p1 bra FIRST;
    bar.sync 1;
    ret;
FIRST:
    bar.sync 0;
    ret;
}
"#,
    );
    let err = launch_error(&program, "stuck", config([1, 1, 1], [64, 1, 1], 1));
    assert!(
        matches!(err, SimError::Deadlock { cta: [0, 0, 0], .. }),
        "{err}"
    );
}

#[test]
fn barrier_completes_when_other_warps_exited_and_counts_reductions() {
    let program = load(
        r#"
.visible .entry partial(.param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<5>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p1, %r1, 64;
    @%p1 exit;
    and.b32 %r2, %r1, 3;
    setp.eq.u32 %p2, %r2, 0;
    bar.red.popc.u32 %r3, 0, %p2;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;
}
"#,
    );
    let out = launch_with_output(
        &program,
        "partial",
        config([1, 1, 1], [128, 1, 1], 1),
        vec![0u32; 64],
    );
    assert!(out.iter().all(|&v| v == 16), "{out:?}");
}

#[test]
fn trap_and_invalid_launches() {
    let program = load(".visible .entry t()\n{\n\ttrap;\n}\n");
    let err = launch_error(&program, "t", config([1, 1, 1], [1, 1, 1], 1));
    assert_eq!(err, SimError::Trap { line: 7 });
    let err = launch_error(&program, "t", config([1, 1, 1], [2048, 1, 1], 1));
    assert!(matches!(err, SimError::InvalidLaunch(_)));
    let err = launch_error(&program, "t", config([0, 1, 1], [1, 1, 1], 1));
    assert!(matches!(err, SimError::InvalidLaunch(_)));
    let err = launch_error(&program, "nope", config([1, 1, 1], [1, 1, 1], 1));
    assert_eq!(err, SimError::UnknownKernel("nope".into()));
}

#[test]
fn module_variables_initializers_and_symbols() {
    let program = load(
        r#"
.global .align 4 .u32 table[4] = {10, 20, 30, 40};
.const .align 4 .f32 scale = 0f40000000;
.global .align 8 .u64 ptr = generic(table);
.visible .entry read(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.global.u64 %rd2, [ptr];
    ld.u32 %r1, [%rd2+8];
    ld.const.f32 %f1, [scale];
    st.global.u32 [%rd1], %r1;
    st.global.f32 [%rd1+4], %f1;
    mov.u64 %rd3, table;
    st.global.u32 [%rd3+12], 77;
    ret;
}
"#,
    );
    let (table, size) = program.symbol("table").unwrap();
    assert_eq!(size, 16);
    let out = launch_with_output(
        &program,
        "read",
        config([1, 1, 1], [1, 1, 1], 1),
        vec![0u32; 2],
    );
    assert_eq!(out, [30, 2.0f32.to_bits()]);
    // SAFETY: `table` is a live 16-byte module variable of `program`.
    let last = unsafe { std::ptr::read(table as *const [u32; 4]) };
    assert_eq!(last, [10, 20, 30, 77]);
    assert_eq!(program.kernels(), ["read"]);
    assert_eq!(program.kernel("read").unwrap().param_sizes, [8]);
    assert_eq!(program.kernel("read").unwrap().arch, 70);
}

#[test]
fn brx_idx_jump_table_with_divergent_targets() {
    let program = load(
        r#"
.visible .entry jump(.param .u64 out)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    rem.u32 %r2, %r1, 3;
    ts: .branchtargets A, B, C;
    brx.idx %r2, ts;
A:
    mov.u32 %r3, 100;
    bra.uni J;
B:
    mov.u32 %r3, 200;
    bra.uni J;
C:
    mov.u32 %r3, 300;
J:
    activemask.b32 %r4;
    add.s32 %r3, %r3, %r1;
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    st.global.u32 [%rd3+4], %r4;
    ret;
}
"#,
    );
    let out = launch_with_output(
        &program,
        "jump",
        config([1, 1, 1], [32, 1, 1], 1),
        vec![[0u32; 2]; 32],
    );
    for (i, row) in out.iter().enumerate() {
        assert_eq!(
            *row,
            [100 * (i as u32 % 3 + 1) + i as u32, u32::MAX],
            "thread {i}"
        );
    }
}

#[test]
fn texture_object_fetches_and_vector_moves() {
    let program = load(
        r#"
.visible .entry fetch(.param .u64 tex, .param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [tex];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%r1}];
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd2, %rd3;
    mov.b32 %r2, %f1;
    mov.b64 %rd5, {%r2, %r1};
    st.global.u64 [%rd4], %rd5;
    ret;
}
"#,
    );
    let mut env = TestEnv::default();
    let mut texels: Vec<f32> = (0..6).map(|i| i as f32 * 1.5).collect();
    let texture = f32_texture(&env, &mut texels);
    env.textures.insert(42, texture);
    let mut out = vec![[0u32; 2]; 8];
    let address = env.register(&mut out);
    launch(
        &program,
        "fetch",
        &config([1, 1, 1], [8, 1, 1], 1),
        &[Arg::U64(42), Arg::U64(address)],
        &env,
    )
    .unwrap();
    for (i, row) in out.iter().enumerate() {
        let texel = if i < 6 { i as f32 * 1.5 } else { 0.0 };
        assert_eq!(*row, [texel.to_bits(), i as u32], "thread {i}");
    }
}

#[test]
fn texture_reference_fetches_directly_and_through_a_register() {
    // clang moves a legacy `.texref` into a register (`mov.u64 %rd, tex_ref`) and fetches
    // through the register; written PTX may also name it in the fetch.
    let program = load(
        r#"
.visible .global .texref tex_ref;
.visible .entry fetch(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .f32 %f<9>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u64 %rd2, tex_ref;
    mov.b64 %rd3, %rd2;
    tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd3, {%r1}];
    tex.1d.v4.f32.s32 {%f5, %f6, %f7, %f8}, [tex_ref, {%r1}];
    add.f32 %f1, %f1, %f5;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    st.global.f32 [%rd5], %f1;
    ret;
}
"#,
    );
    let mut env = TestEnv::default();
    let mut texels: Vec<f32> = (0..6).map(|i| i as f32 + 0.25).collect();
    let texture = f32_texture(&env, &mut texels);
    env.texrefs.insert("tex_ref".to_string(), texture);
    let mut out = vec![0f32; 8];
    let address = env.register(&mut out);
    launch(
        &program,
        "fetch",
        &config([1, 1, 1], [8, 1, 1], 1),
        &[Arg::U64(address)],
        &env,
    )
    .unwrap();
    for (i, value) in out.iter().enumerate() {
        let texel = if i < 6 { i as f32 + 0.25 } else { 0.0 };
        assert_eq!(*value, 2.0 * texel, "thread {i}");
    }
}

#[test]
fn local_memory_and_generic_conversions() {
    let program = load(
        r#"
.visible .entry locals(.param .u64 out)
{
    .local .align 4 .b8 depot[16];
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u64 %rd2, depot;
    cvta.local.u64 %rd3, %rd2;
    st.u32 [%rd3+4], %r1;
    ld.local.u32 %r2, [depot+4];
    isspacep.local %p1, %rd3;
    isspacep.global %p2, %rd3;
    selp.u32 %r3, 1, 0, %p1;
    selp.u32 %r4, 1, 0, %p2;
    cvta.to.local.u64 %rd4, %rd3;
    cvt.u32.u64 %r5, %rd4;
    mul.wide.u32 %rd5, %r1, 16;
    add.s64 %rd6, %rd1, %rd5;
    st.global.v4.u32 [%rd6], {%r2, %r3, %r4, %r5};
    ret;
}
"#,
    );
    let out = launch_with_output(
        &program,
        "locals",
        config([1, 1, 1], [40, 1, 1], 1),
        vec![[0u32; 4]; 40],
    );
    for (i, row) in out.iter().enumerate() {
        assert_eq!(*row, [i as u32, 1, 0, 0], "thread {i}");
    }
}

#[test]
fn device_malloc_and_free() {
    let program = load(
        r#"
.extern .func (.param .b64 func_retval0) malloc(.param .b64 malloc_param_0);
.extern .func free(.param .b64 free_param_0);
.visible .entry heap(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    {
        .param .b64 param0;
        st.param.b64 [param0], 64;
        .param .b64 retval0;
        call.uni (retval0), malloc, (param0);
        ld.param.b64 %rd2, [retval0];
    }
    st.u32 [%rd2+60], %r1;
    ld.u32 %r2, [%rd2+60];
    {
        .param .b64 param0;
        st.param.b64 [param0], %rd2;
        call.uni free, (param0);
    }
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], %r2;
    ret;
}
"#,
    );
    let out = launch_with_output(
        &program,
        "heap",
        config([1, 1, 1], [8, 1, 1], 1),
        vec![0u32; 8],
    );
    assert_eq!(out, [0, 1, 2, 3, 4, 5, 6, 7]);
}

#[test]
fn indirect_calls_grouped_by_target() {
    let program = load(common::INDIRECT_CALL);
    let out = launch_with_output(
        &program,
        "pick",
        config([1, 1, 1], [32, 1, 1], 1),
        vec![0i32; 32],
    );
    for (i, v) in out.iter().enumerate() {
        let i = i as i32;
        assert_eq!(*v, if i % 2 == 0 { 2 * i } else { -i }, "thread {i}");
    }
}

#[test]
fn misaligned_loads_and_stores_are_errors_as_on_a_gpu() {
    // Issue 14, item 5: an int at +1, a double at +4, a float4 at +4 or +8 were read and
    // written as if aligned; a GPU stops with cudaErrorMisalignedAddress.
    let program = load(
        r#"
.shared .align 16 .b8 tile[64];
.visible .entry access(.param .u64 buf, .param .u32 which)
{
    .reg .pred %p<8>;
    .reg .b32 %r<4>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<4>;
    .reg .f64 %fd<2>;
    ld.param.u64 %rd1, [buf];
    ld.param.u32 %r1, [which];
    setp.eq.u32 %p1, %r1, 1;
    @%p1 ld.global.u32 %r2, [%rd1+1];
    setp.eq.u32 %p2, %r1, 2;
    @%p2 ld.global.f64 %fd1, [%rd1+4];
    setp.eq.u32 %p3, %r1, 3;
    @%p3 ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+4];
    setp.eq.u32 %p4, %r1, 4;
    @%p4 st.global.v4.f32 [%rd1+8], {%f1, %f2, %f3, %f4};
    setp.eq.u32 %p5, %r1, 5;
    @%p5 st.shared.u32 [tile+2], %r1;
    setp.eq.u32 %p6, %r1, 6;
    @%p6 ld.global.v2.u32 {%r2, %r3}, [%rd1+4];
    setp.eq.u32 %p7, %r1, 0;
    @%p7 ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+16];
    @%p7 st.shared.v4.f32 [tile+16], {%f1, %f2, %f3, %f4};
    @%p7 ld.global.v2.u32 {%r2, %r3}, [%rd1+8];
    @%p7 ld.global.u8 %r2, [%rd1+3];
    ret;
}
"#,
    );
    let env = TestEnv::default();
    let mut buf = vec![0u64; 8];
    let address = env.register(&mut buf);
    let run = |which: u32| {
        launch(
            &program,
            "access",
            &config([1, 1, 1], [1, 1, 1], 1),
            &[Arg::U64(address), Arg::U32(which)],
            &env,
        )
    };
    // Aligned accesses of every width run.
    run(0).unwrap();
    for (which, space, offset, len) in [
        (1, "global", 1, 4),
        (2, "global", 4, 8),
        (3, "global", 4, 16),
        (4, "global", 8, 16),
        (5, "shared", 2, 4),
        (6, "global", 4, 8),
    ] {
        match run(which).unwrap_err() {
            SimError::MisalignedAddress {
                space: s,
                address: a,
                len: l,
                ..
            } => {
                assert_eq!((s, l), (space, len), "case {which}");
                let expected = if space == "shared" {
                    offset
                } else {
                    address + offset
                };
                assert_eq!(a, expected, "case {which}");
            }
            other => panic!("case {which}: expected MisalignedAddress, got {other}"),
        }
    }
}

/// Odd CTAs write `%r5` and `%r6` (junk for the even ones); even CTAs read `%r5` without ever
/// writing it and `%r6` after a write guarded to lanes 0-7; then lanes 16-31 of even CTAs exit,
/// and every lane left reads `%r8` of lane 20 by `shfl` (in even CTAs it exited before writing
/// it). On one
/// worker the CTAs run one after another in the same warp slots, so a register left as the
/// last warp had it would show here: every such read must give zero.
const UNWRITTEN_REGISTERS: &str = r#"
.visible .entry unwritten(.param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mad.lo.u32 %r3, %r1, 32, %r2;
    mul.wide.u32 %rd2, %r3, 8;
    add.s64 %rd3, %rd1, %rd2;
    and.b32 %r4, %r1, 1;
    setp.eq.u32 %p1, %r4, 0;
    @%p1 bra EVEN;
    add.u32 %r5, %r3, 1000;
    mov.u32 %r6, 77;
    st.global.u32 [%rd3], %r5;
    bra.uni SHUFFLE;
EVEN:
    setp.lt.u32 %p2, %r2, 8;
    @%p2 mov.u32 %r6, 5;
    add.u32 %r7, %r5, %r6;
    st.global.u32 [%rd3], %r7;
SHUFFLE:
    setp.ge.u32 %p3, %r2, 16;
    and.pred %p3, %p3, %p1;
    @%p3 exit;
    add.u32 %r8, %r2, 500;
    shfl.sync.idx.b32 %r9, %r8, 20, 31, 65535;
    st.global.u32 [%rd3+4], %r9;
    ret;
}
"#;

#[test]
fn registers_read_before_written_are_zero_in_reused_warps() {
    let program = load(UNWRITTEN_REGISTERS);
    let ctas = 8u32;
    let out = launch_with_output(
        &program,
        "unwritten",
        config([ctas, 1, 1], [32, 1, 1], 1),
        vec![[u32::MAX; 2]; (ctas * 32) as usize],
    );
    for (i, row) in out.iter().enumerate() {
        let (cta, lane) = (i as u32 / 32, i as u32 % 32);
        let first = if cta % 2 == 1 {
            i as u32 + 1000
        } else if lane < 8 {
            5
        } else {
            0
        };
        assert_eq!(row[0], first, "cta {cta} lane {lane}");
        let second = if cta % 2 == 1 {
            520
        } else if lane < 16 {
            0
        } else {
            u32::MAX
        };
        assert_eq!(
            row[1], second,
            "shfl from an exited lane, cta {cta} lane {lane}"
        );
    }
}
