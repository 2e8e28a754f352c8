//! The native engine against the interpreter on hand-written PTX whose runs mix inline code,
//! kernel calls and instructions the interpreter executes inside a run: global loads that hit
//! and miss the warp's cached range, `ld.param`, shared stores with partial masks and shared
//! addresses, warps racing through shared memory (the slices must end at the same accesses),
//! integer atomics in shared and host memory whose lanes collide, and faults of every kind
//! inside a run; and warps that switch from the interpreter to the
//! native code in the middle of a launch (the native engine's tiers). The interpreter is the
//! reference: each launch runs once with it and once per threshold with the native engine on
//! equal inputs, and the results (statistics or the error's text) and the memory after must be
//! the same.

mod common;

use common::{config, launch, load, Arg, TestEnv};
use ptx_sim::{Engine, LaunchConfig, Program};

/// What one launch gave: its statistics or its error's text, and the buffers after it.
#[derive(Debug, PartialEq)]
struct Outcome {
    result: Result<ptx_sim::LaunchStats, String>,
    buffers: Vec<Vec<u32>>,
}

/// The native engine's thresholds (`Program::set_native_after`, warp-instructions) every
/// launch is compared at: compiled at the first run, and switching after a few slices (how
/// far into a launch depends on the kernel: at its start, in the middle or never).
const NATIVE_AFTER: [u64; 4] = [0, 1, 40, 400];

/// Launches `kernel` of `text` with `engine` (the native one compiling a function after
/// `native_after` warp-instructions): its parameters are the addresses of `buffers` (filled
/// with `inputs` first), then `scalars`; `whole_buffers`: warps cache whole buffers
/// ([`TestEnv::whole_buffers`]). (The same buffers for both engines, so that the addresses in
/// errors are the same.)
fn run(
    text: &str,
    (engine, native_after, whole_buffers): (Engine, u64, bool),
    kernel: &str,
    config: &LaunchConfig,
    (inputs, buffers): (&[Vec<u32>], &mut [Vec<u32>]),
    scalars: &[u32],
) -> Outcome {
    let mut program: Program = load(text);
    program.set_engine(engine);
    program.set_native_after(native_after);
    let mut env = TestEnv::default();
    env.whole_buffers = whole_buffers;
    let mut args = Vec::new();
    for (buffer, input) in buffers.iter_mut().zip(inputs) {
        buffer.copy_from_slice(input);
        args.push(Arg::U64(env.register(buffer)));
    }
    args.extend(scalars.iter().map(|&v| Arg::U32(v)));
    let result = launch(&program, kernel, config, &args, &env).map_err(|e| e.to_string());
    Outcome {
        result,
        buffers: buffers.to_vec(),
    }
}

/// Runs the launch with the interpreter and with the native engine at each of
/// [`NATIVE_AFTER`], and checks that they agree; returns the interpreter's.
fn agree(
    text: &str,
    kernel: &str,
    config: LaunchConfig,
    inputs: &[Vec<u32>],
    scalars: &[u32],
) -> Outcome {
    agree_in(text, kernel, config, (inputs, false), scalars)
}

/// [`agree`] with warps caching whole buffers or not (`whole_buffers`).
fn agree_in(
    text: &str,
    kernel: &str,
    config: LaunchConfig,
    (inputs, whole_buffers): (&[Vec<u32>], bool),
    scalars: &[u32],
) -> Outcome {
    let mut buffers = inputs.to_vec();
    let interpreted = run(
        text,
        (Engine::Interpreter, 0, whole_buffers),
        kernel,
        &config,
        (inputs, &mut buffers),
        scalars,
    );
    for native_after in NATIVE_AFTER {
        let native = run(
            text,
            (Engine::Native, native_after, whole_buffers),
            kernel,
            &config,
            (inputs, &mut buffers),
            scalars,
        );
        assert_eq!(
            native, interpreted,
            "{kernel} {scalars:?}: the native engine (compiling after {native_after} \
             warp-instructions, whole buffers {whole_buffers}) differs from the interpreter"
        );
    }
    interpreted
}

/// Checks that the launch of `mode` failed when it `fails`, and ran otherwise.
fn assert_fails(outcome: &Outcome, fails: bool, mode: u32) {
    assert_eq!(
        outcome.result.is_err(),
        fails,
        "mode {mode}: {:?}",
        outcome.result
    );
}

/// One straight run from the entry to `ret` (no branch): `ld.param`, `%tid` and a shared
/// variable's address executed by the interpreter inside the run, then per `mode` a fault:
/// 0 a global load out of the buffer in some lanes, 1 a misaligned global load, 2 a shared
/// store outside the window, 3 `trap` in lane 3, 4 none, 5 a global store out of the buffer
/// in the last lane (the lanes before it store: the buffer shows it).
const FAULTS: &str = r#"
.visible .entry faults(.param .u64 a, .param .u32 mode)
{
    .shared .align 4 .b8 sh[64];
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [a];
    ld.param.u32 %r1, [mode];
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    setp.eq.u32 %p1, %r1, 1;
    selp.b64 %rd4, 2, 0, %p1;
    add.s64 %rd3, %rd3, %rd4;
    add.u32 %r3, %r2, 1;
    setp.eq.u32 %p2, %r1, 2;
    selp.b32 %r4, 64, 0, %p2;
    mov.u32 %r10, sh;
    shl.b32 %r5, %r2, 2;
    add.u32 %r5, %r5, %r4;
    add.u32 %r5, %r5, %r10;
    st.shared.u32 [%r5], %r3;
    setp.eq.u32 %p3, %r1, 3;
    setp.eq.and.u32 %p3, %r2, 3, %p3;
    @%p3 trap;
    ld.global.u32 %r6, [%rd3];
    ld.shared.u32 %r8, [%r5];
    add.u32 %r7, %r6, %r8;
    setp.eq.u32 %p1, %r1, 5;
    selp.b64 %rd4, 4, 0, %p1;
    add.s64 %rd5, %rd3, %rd4;
    st.global.u32 [%rd5], %r7;
    ret;
}
"#;

#[test]
fn faults_inside_a_run_are_reported_as_the_interpreter_reports_them() {
    let block = config([2, 1, 1], [16, 1, 1], 1);
    for (mode, len, fails) in [
        (0u32, 5usize, true),
        (1, 17, true),
        (2, 17, true),
        (3, 17, true),
        (4, 16, false),
        (5, 16, true),
    ] {
        let input: Vec<u32> = (0..len as u32).map(|i| i * 10).collect();
        let outcome = agree(
            FAULTS,
            "faults",
            block,
            std::slice::from_ref(&input),
            &[mode],
        );
        if mode == 5 {
            // CTA 0's lanes 0-14 stored before lane 15 faulted.
            assert_ne!(outcome.buffers[0][1], input[1]);
        }
        assert_fails(&outcome, fails, mode);
    }
}

/// Reads two global arrays alternately (the warp's cached range misses at every switch) with
/// scalar and vector loads, stores into shared memory with a guard that holds in some lanes,
/// at addresses several lanes share (the highest lane's value stays) and with `.v2` stores,
/// reads it back after `bar.sync`, and writes the sums.
const ARRAYS: &str = r#"
.visible .entry arrays(.param .u64 a, .param .u64 b, .param .u64 out, .param .u32 n)
{
    .shared .align 16 .b8 sh[1024];
    .reg .pred %p<4>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<20>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    mov.u32 %r6, 0;
    mov.u32 %r7, 0;
LOOP:
    add.u32 %r8, %r5, %r7;
    rem.u32 %r8, %r8, %r1;
    mul.wide.u32 %rd4, %r8, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r9, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    ld.global.nc.u32 %r10, [%rd6];
    and.b32 %r11, %r8, -4;
    mul.wide.u32 %rd7, %r11, 4;
    add.s64 %rd8, %rd1, %rd7;
    ld.global.v4.u32 {%r12, %r13, %r14, %r15}, [%rd8];
    add.u32 %r6, %r6, %r9;
    mad.lo.s32 %r6, %r10, 3, %r6;
    add.u32 %r6, %r6, %r12;
    xor.b32 %r6, %r6, %r13;
    add.u32 %r6, %r6, %r14;
    sub.u32 %r6, %r6, %r15;
    add.u32 %r7, %r7, 1;
    setp.lt.u32 %p1, %r7, 6;
    @%p1 bra LOOP;
    mov.u32 %r20, sh;
    shr.u32 %r21, %r2, 2;
    shl.b32 %r21, %r21, 3;
    add.u32 %r22, %r20, %r21;
    rem.u32 %r23, %r2, 3;
    setp.ne.u32 %p2, %r23, 0;
    @%p2 st.shared.v2.u32 [%r22], {%r6, %r2};
    shl.b32 %r24, %r2, 2;
    add.u32 %r25, %r20, %r24;
    st.shared.u16 [%r25+512], %r6;
    bar.sync 0;
    ld.shared.v2.u32 {%r26, %r27}, [%r22];
    ld.shared.u16 %r28, [%r25+512];
    add.u32 %r29, %r26, %r27;
    add.u32 %r29, %r29, %r28;
    mul.wide.u32 %rd9, %r5, 4;
    add.s64 %rd10, %rd3, %rd9;
    st.global.u32 [%rd10], %r29;
    ret;
}
"#;

#[test]
fn global_loads_and_shared_stores_give_the_interpreters_memory_and_counts() {
    let n = 200u32;
    let a: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let b: Vec<u32> = (0..n).map(|i| i ^ 0x5a5a).collect();
    for workers in [1, 2] {
        let outcome = agree(
            ARRAYS,
            "arrays",
            config([3, 1, 1], [100, 1, 1], workers),
            &[a.clone(), b.clone(), vec![0; 300]],
            &[n],
        );
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
        assert!(outcome.buffers[2].iter().any(|&v| v != 0));
    }
}

/// Shuffles of every mode with immediate lane operands (clamps, segments, out-of-range lanes,
/// a predicate result, a guard, in place), compiled to constant permutations of the row, in a
/// region that only some lanes of each warp enter (the others' rows are still read, as the
/// interpreter reads them); and `cvta` to and from the global and shared windows, inline.
/// Each thread writes 16 words: the shuffles' results and predicates and what it read back
/// through a generic address of its shared slot.
const SHUFFLES: &str = r#"
.visible .entry shuffles(.param .u64 out, .param .u32 skip)
{
    .shared .align 8 .b8 sh[1024];
    .reg .pred %p<8>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [skip];
    mov.u32 %r2, %tid.x;
    mad.lo.s32 %r3, %r2, -1640531535, %r1;
    xor.b32 %r30, %r3, 12345;
    mul.wide.u32 %rd2, %r2, 64;
    add.s64 %rd3, %rd1, %rd2;
    and.b32 %r4, %r2, %r1;
    setp.eq.u32 %p1, %r4, 0;
    @%p1 bra DONE;
    shfl.sync.up.b32 %r5|%p2, %r3, 1, 0, -1;
    shfl.sync.up.b32 %r6, %r3, 6, 0x800, -1;
    shfl.sync.down.b32 %r7|%p3, %r3, 3, 31, -1;
    shfl.sync.down.b32 %r8, %r3, 2, 0x1c07, -1;
    shfl.sync.bfly.b32 %r9|%p4, %r3, 5, 31, -1;
    shfl.sync.bfly.b32 %r10, %r3, 16, 0x180f, -1;
    shfl.sync.idx.b32 %r11|%p5, %r3, 7, 31, -1;
    shfl.sync.idx.b32 %r12, %r3, 29, 0x1f, -1;
    shfl.sync.idx.b32 %r13, %r3, 3, 0x1807, -1;
    shfl.sync.down.b32 %r14, %r3, 40, 31, -1;
    setp.lt.u32 %p6, %r2, 48;
    mov.u32 %r15, %r30;
    @%p6 shfl.sync.bfly.b32 %r15, %r3, 1, 31, -1;
    shfl.sync.down.b32 %r3, %r3, 1, 31, -1;
    selp.u32 %r16, 1, 0, %p2;
    selp.u32 %r17, 2, 0, %p3;
    selp.u32 %r18, 4, 0, %p4;
    selp.u32 %r19, 8, 0, %p5;
    or.b32 %r16, %r16, %r17;
    or.b32 %r16, %r16, %r18;
    or.b32 %r16, %r16, %r19;
    mov.u64 %rd4, sh;
    cvta.shared.u64 %rd5, %rd4;
    mul.wide.u32 %rd6, %r2, 8;
    add.s64 %rd7, %rd5, %rd6;
    st.u32 [%rd7], %r3;
    cvta.to.shared.u64 %rd8, %rd7;
    cvt.u32.u64 %r20, %rd8;
    ld.shared.u32 %r21, [%r20];
    st.global.u32 [%rd3], %r5;
    st.global.u32 [%rd3+4], %r6;
    st.global.u32 [%rd3+8], %r7;
    st.global.u32 [%rd3+12], %r8;
    st.global.u32 [%rd3+16], %r9;
    st.global.u32 [%rd3+20], %r10;
    st.global.u32 [%rd3+24], %r11;
    st.global.u32 [%rd3+28], %r12;
    st.global.u32 [%rd3+32], %r13;
    st.global.u32 [%rd3+36], %r14;
    st.global.u32 [%rd3+40], %r15;
    st.global.u32 [%rd3+44], %r3;
    st.global.u32 [%rd3+48], %r16;
    st.global.u32 [%rd3+52], %r21;
    cvt.u32.u64 %r22, %rd4;
    st.global.u32 [%rd3+56], %r22;
DONE:
    ret;
}
"#;

#[test]
fn shuffles_and_window_conversions_inline_are_the_interpreters() {
    let threads = 96usize;
    // Only the lanes whose `tid & skip` is not 0 run the shuffles: every other lane, lanes 2-3
    // of every four, three of every four, the third warp alone (the first two skip them).
    for skip in [1u32, 2, 3, 0x40] {
        let outcome = agree(
            SHUFFLES,
            "shuffles",
            config([1, 1, 1], [threads as u32, 1, 1], 1),
            &[vec![u32::MAX; threads * 16]],
            &[skip],
        );
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
        let out = &outcome.buffers[0];
        // Every thread's value before the shuffles (`%r3`).
        let v = |t: u32| t.wrapping_mul(0x9E37_79B1).wrapping_add(skip);
        for t in 0..threads as u32 {
            let row = &out[t as usize * 16..][..16];
            if t & skip == 0 {
                assert_eq!(row[0], u32::MAX, "thread {t} skipped the shuffles");
                continue;
            }
            // The read back through the generic address is what the thread stored.
            assert_eq!(row[13], row[11], "thread {t}");
            // `shfl.up` by 1 from a lane above 0: the lane below's value, predicate set.
            if t % 32 > 0 {
                assert_eq!(row[0], v(t - 1), "thread {t}");
                assert_eq!(row[12] & 1, 1, "thread {t}");
            } else {
                assert_eq!(row[0], v(t), "thread {t}: lane 0 keeps its own");
                assert_eq!(row[12] & 1, 0, "thread {t}");
            }
        }
    }
}

/// Warps race through one shared cell without a barrier: each reads it, writes a function of
/// what it read and its warp index, and adds to it atomically, twelve times in one straight
/// run (more visible accesses than a slice allows, so that slices end inside the run); a
/// shuffle mixes lanes. What the cell holds at the end depends on where every slice ended.
const RACE: &str = r#"
.visible .entry race(.param .u64 out)
{
    .shared .align 4 .b8 cell[8];
    .reg .b32 %r<20>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 5;
    mov.u32 %r9, cell;
    ld.shared.u32 %r3, [%r9];
    mad.lo.s32 %r3, %r3, 3, %r2;
    st.shared.u32 [%r9], %r3;
    atom.shared.add.u32 %r4, [%r9+4], 1;
    ld.shared.u32 %r3, [%r9];
    mad.lo.s32 %r3, %r3, 5, %r2;
    st.shared.u32 [%r9], %r3;
    atom.shared.add.u32 %r4, [%r9+4], %r3;
    ld.shared.u32 %r3, [%r9];
    mad.lo.s32 %r3, %r3, 7, %r2;
    st.shared.u32 [%r9], %r3;
    shfl.sync.bfly.b32 %r5, %r3, 1, 31, -1;
    add.u32 %r3, %r3, %r5;
    atom.shared.add.u32 %r4, [%r9+4], %r5;
    ld.shared.u32 %r6, [%r9];
    mad.lo.s32 %r6, %r6, 11, %r2;
    st.shared.u32 [%r9], %r6;
    ld.shared.u32 %r7, [%r9+4];
    xor.b32 %r7, %r7, %r6;
    st.shared.u32 [%r9], %r7;
    ld.shared.u32 %r8, [%r9];
    add.u32 %r8, %r8, %r4;
    mul.wide.u32 %rd1, %r1, 4;
    ld.param.u64 %rd2, [out];
    add.s64 %rd3, %rd2, %rd1;
    st.global.u32 [%rd3], %r8;
    ret;
}
"#;

#[test]
fn racing_warps_interleave_as_under_the_interpreter() {
    for block in [64, 128, 160] {
        let outcome = agree(
            RACE,
            "race",
            config([2, 1, 1], [block, 1, 1], 1),
            &[vec![0; block as usize]],
            &[],
        );
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    }
}

/// Every special register and shared-variable address inline code reads, in a 3-D grid of
/// 3-D CTAs whose last warp is partial, combined in ALU instructions and moves and stored
/// per thread.
const SPECIALS: &str = r#"
.shared .align 8 .b8 first[24];
.shared .align 4 .b8 second[12];
.visible .entry specials(.param .u64 out)
{
    .reg .b32 %r<30>;
    .reg .b64 %rd<8>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %tid.z;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %ntid.y;
    mov.u32 %r6, %ntid.z;
    mov.u32 %r7, %ctaid.x;
    mov.u32 %r8, %ctaid.y;
    mov.u32 %r9, %ctaid.z;
    mov.u32 %r10, %nctaid.x;
    mov.u32 %r11, %nctaid.y;
    mov.u32 %r12, %nctaid.z;
    mov.u32 %r13, %laneid;
    mov.u32 %r14, first;
    mov.u32 %r15, second;
    add.u32 %r16, %tid.x, %ctaid.y;
    mad.lo.s32 %r17, %tid.z, %ntid.y, %tid.y;
    mad.lo.s32 %r17, %r17, %ntid.x, %r1;
    mad.lo.s32 %r18, %ctaid.z, %nctaid.y, %ctaid.y;
    mad.lo.s32 %r18, %r18, %nctaid.x, %ctaid.x;
    mul.lo.s32 %r19, %r4, %r5;
    mul.lo.s32 %r19, %r19, %r6;
    mad.lo.s32 %r20, %r18, %r19, %r17;
    mul.wide.u32 %rd1, %r20, 64;
    ld.param.u64 %rd2, [out];
    add.s64 %rd3, %rd2, %rd1;
    st.global.v4.u32 [%rd3], {%r1, %r2, %r3, %r4};
    st.global.v4.u32 [%rd3+16], {%r5, %r6, %r7, %r8};
    st.global.v4.u32 [%rd3+32], {%r9, %r10, %r11, %r12};
    st.global.v4.u32 [%rd3+48], {%r13, %r14, %r15, %r16};
    ret;
}
"#;

#[test]
fn special_registers_and_shared_addresses_read_inline_are_the_interpreters() {
    let (grid, block) = ([3, 2, 2], [5, 3, 3]);
    let threads = grid.iter().chain(&block).product::<u32>() as usize;
    let outcome = agree(
        SPECIALS,
        "specials",
        config(grid, block, 2),
        &[vec![u32::MAX; threads * 16]],
        &[],
    );
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    // Thread (1, 2, 1) of CTA (2, 1, 0): its row (linear: x + nx * (y + ny * z)).
    let (cta, thread) = (2 + 3, 1 + 5 * (2 + 3));
    let row = &outcome.buffers[0][(cta * 45 + thread) * 16..][..16];
    assert_eq!(
        &row[..13],
        &[1, 2, 1, 5, 3, 3, 2, 1, 0, 3, 2, 2, thread as u32 % 32]
    );
    assert_eq!(row[15], 1 + 1);
    assert_ne!(row[14], row[13], "two variables, two addresses");
}

/// A kernel that calls a device function in a loop whose exit diverges (each lane leaves
/// after its own count of iterations), with shared stores and loads read across lanes and a
/// global store: two functions, each switching to native code when its own work passes the
/// threshold, at slice ends, calls and returns.
const CALLS: &str = r#"
.func (.param .b32 result) step(.param .b32 x, .param .b32 i)
{
    .reg .b32 %r<8>;
    ld.param.b32 %r1, [x];
    ld.param.b32 %r2, [i];
    mad.lo.s32 %r3, %r1, 1664525, %r2;
    xor.b32 %r4, %r3, %r1;
    shr.u32 %r5, %r4, 3;
    add.u32 %r6, %r5, %r3;
    st.param.b32 [result], %r6;
    ret;
}

.visible .entry calls(.param .u64 out, .param .u32 n)
{
    .shared .align 4 .b8 sh[1024];
    .reg .pred %p<3>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mad.lo.s32 %r4, %r3, %ntid.x, %r2;
    mov.u32 %r5, 0;
    mov.u32 %r6, %r4;
    mov.u32 %r10, sh;
    shl.b32 %r11, %r2, 2;
    add.u32 %r12, %r10, %r11;
    xor.b32 %r13, %r2, 1;
    shl.b32 %r13, %r13, 2;
    add.u32 %r13, %r10, %r13;
LOOP:
    {
        .param .b32 px;
        .param .b32 pi;
        .param .b32 pr;
        st.param.b32 [px], %r6;
        st.param.b32 [pi], %r5;
        call.uni (pr), step, (px, pi);
        ld.param.b32 %r6, [pr];
    }
    st.shared.u32 [%r12], %r6;
    ld.shared.u32 %r7, [%r13];
    add.u32 %r6, %r6, %r7;
    add.u32 %r5, %r5, 1;
    and.b32 %r8, %r4, 7;
    add.u32 %r9, %r1, %r8;
    setp.lt.u32 %p1, %r5, %r9;
    @%p1 bra LOOP;
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
    ret;
}
"#;

/// What a launch of [`CALLS`] gave: its statistics and output.
type CallsOutcome = (ptx_sim::LaunchStats, Vec<u32>);

/// The statistics and output of each of `launches` launches of [`CALLS`] in one program with
/// `engine` and threshold `native_after`, and whether each function (`calls`, `step`) was
/// compiled after each.
fn calls_launches(
    (engine, native_after): (Engine, u64),
    workers: usize,
    launches: usize,
) -> (Vec<CallsOutcome>, Vec<[bool; 2]>) {
    let mut program: Program = load(CALLS);
    program.set_engine(engine);
    program.set_native_after(native_after);
    let env = TestEnv::default();
    let (ctas, threads) = (4u32, 96u32);
    let mut outcomes = Vec::new();
    let mut compiled = Vec::new();
    for i in 0..launches {
        let mut out = vec![0u32; (ctas * threads) as usize];
        let args = [Arg::U64(env.register(&mut out)), Arg::U32(5 + i as u32)];
        let stats = launch(
            &program,
            "calls",
            &config([ctas, 1, 1], [threads, 1, 1], workers),
            &args,
            &env,
        )
        .unwrap_or_else(|e| panic!("launch {i}: {e}"));
        outcomes.push((stats, out));
        compiled.push([
            program.native_compiled("calls"),
            program.native_compiled("step"),
        ]);
    }
    (outcomes, compiled)
}

#[test]
fn warps_switch_to_native_code_mid_launch_with_the_interpreters_results_and_counts() {
    let launches = 3;
    for workers in [1, 2] {
        let (interpreted, never) = calls_launches((Engine::Interpreter, 0), workers, launches);
        assert!(never.iter().flatten().all(|&c| !c));
        let first = interpreted[0].0.warp_instructions;
        // At the first run; a tenth, half and all but a little of the first launch's
        // warp-instructions (each function's share of them is smaller, so the later ones
        // switch in a later launch); past everything: interpreted throughout.
        for native_after in [0, first / 10, first / 2, first - 50, u64::MAX] {
            let (native, compiled) =
                calls_launches((Engine::Native, native_after), workers, launches);
            assert_eq!(
                native, interpreted,
                "{workers} workers, native after {native_after}: the native engine differs \
                 from the interpreter"
            );
            if native_after <= first / 10 {
                // Both functions passed the threshold within the first launch and were
                // compiled there: the warps still running switched in the middle of it.
                assert_eq!(compiled[0], [true, true], "native after {native_after}");
            }
            if native_after == u64::MAX {
                assert!(compiled.iter().flatten().all(|&c| !c));
            } else {
                assert_eq!(
                    compiled[launches - 1],
                    [true, true],
                    "native after {native_after}"
                );
            }
        }
    }
}

/// Integer atomics and reductions inline in native runs, lane by lane as the interpreter:
/// in the shared window (every operation and type, lanes colliding on one address four at a
/// time and at distinct ones, a shared variable's address as counter code writes it, guarded
/// in some lanes, in none, and in a divergent region only some lanes enter) and on host memory
/// (the warp's cached range hit and missed, `.global` and generic; generic ones into the
/// shared window, which the interpreter treats as private: the second hits the window the
/// first cached). The old values feed later
/// instructions of the run. `mode` injects a fault: 1 a shared atomic outside the window in
/// thread 37, 2 one misaligned there, 3 a global atomic outside the buffer in the CTA's last
/// thread (the lanes before it have added: the buffer shows it).
///
/// Shared words (u32): 0-3 add, 4-7 max.u32, 8-11 min.s32, 12-15 or, 16-19 xor, 20-23 inc 5,
/// 24-27 dec 7, 28-31 cas, 32-95 per lane (`tid % 64`): exch then and, 96-103 add.u64 per
/// bin, 104-107 add.s32, 108-111 the divergent region's adds, 112-115 the guarded adds,
/// 116-119 generic adds; `cnt`: red.u64 of the warps' populations, and of every lane's tid.
/// Global words: 0-3 add, 4-7 max.s32, 8-11 inc 6, 12-15 dec 9, 16-17 red.u64 of the tids,
/// 20-23 cas, 24-27 generic add, 28-29 exch.b64. Each thread writes 16 words to `out`.
const ATOMICS: &str = r#"
.visible .entry atomics(.param .u64 out, .param .u64 glob, .param .u32 mode)
{
    .shared .align 8 .b8 sh[512];
    .shared .align 8 .b8 cnt[16];
    .reg .pred %p<10>;
    .reg .b32 %r<80>;
    .reg .b64 %rd<40>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [glob];
    ld.param.u32 %r1, [mode];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mad.lo.s32 %r4, %r3, %ntid.x, %r2;
    mul.wide.u32 %rd3, %r4, 64;
    add.s64 %rd4, %rd1, %rd3;
    mov.u32 %r5, sh;
    shl.b32 %r6, %r2, 2;
    add.u32 %r7, %r5, %r6;
    mov.u32 %r8, 0;
    st.shared.u32 [%r7], %r8;
    setp.lt.u32 %p1, %r2, 48;
    @%p1 st.shared.u32 [%r7+320], %r8;
    mov.u32 %r9, cnt;
    add.u32 %r9, %r9, %r6;
    setp.lt.u32 %p1, %r2, 4;
    @%p1 st.shared.u32 [%r9], %r8;
    bar.sync 0;
    and.b32 %r10, %r2, 3;
    shl.b32 %r11, %r10, 2;
    add.u32 %r12, %r5, %r11;
    setp.eq.u32 %p2, %r1, 1;
    setp.eq.and.u32 %p2, %r2, 37, %p2;
    selp.b32 %r60, 4096, 0, %p2;
    setp.eq.u32 %p2, %r1, 2;
    setp.eq.and.u32 %p2, %r2, 37, %p2;
    selp.b32 %r61, 2, 0, %p2;
    add.u32 %r60, %r60, %r61;
    add.u32 %r62, %r12, %r60;
    atom.shared.add.u32 %r13, [%r62], 1;
    add.u32 %r14, %r2, 1;
    atom.shared.max.u32 %r15, [%r12+16], %r14;
    sub.s32 %r17, 40, %r2;
    atom.shared.min.s32 %r16, [%r12+32], %r17;
    shl.b32 %r18, 1, %r2;
    atom.shared.or.b32 %r19, [%r12+48], %r18;
    red.shared.xor.b32 [%r12+64], %r14;
    atom.shared.inc.u32 %r20, [%r12+80], 5;
    atom.shared.dec.u32 %r21, [%r12+96], 7;
    shr.u32 %r22, %r2, 2;
    atom.shared.cas.b32 %r23, [%r12+112], %r22, %r14;
    and.b32 %r24, %r2, 63;
    shl.b32 %r24, %r24, 2;
    add.u32 %r25, %r5, %r24;
    mad.lo.s32 %r26, %r2, 7919, 12345;
    atom.shared.exch.b32 %r27, [%r25+128], %r26;
    atom.shared.and.b32 %r28, [%r25+128], -16;
    add.u32 %r29, %r27, %r28;
    shl.b32 %r30, %r10, 3;
    add.u32 %r30, %r5, %r30;
    cvt.u64.u32 %rd5, %r14;
    atom.shared.add.u64 %rd6, [%r30+384], %rd5;
    atom.shared.add.s32 %r31, [%r12+416], %r17;
    activemask.b32 %r32;
    popc.b32 %r33, %r32;
    cvt.u64.u32 %rd7, %r33;
    and.b32 %r34, %r2, 31;
    setp.eq.u32 %p3, %r34, 0;
    @%p3 red.shared.add.u64 [cnt], %rd7;
    cvt.u64.u32 %rd8, %r2;
    red.shared.add.u64 [cnt+8], %rd8;
    mov.u32 %r40, 57005;
    setp.lt.u32 %p4, %r2, 8;
    and.b32 %r35, %r2, 1;
    setp.eq.or.u32 %p4, %r35, 1, %p4;
    setp.lt.u32 %p5, %r2, 40;
    and.pred %p4, %p4, %p5;
    @%p4 atom.shared.add.u32 %r40, [%r12+448], %r14;
    setp.lt.u32 %p5, %r2, 8;
    @%p5 atom.shared.add.u32 %r41, [%r12+448], 100;
    mul.wide.u32 %rd9, %r10, 4;
    add.s64 %rd10, %rd2, %rd9;
    setp.eq.u32 %p6, %r1, 3;
    mov.u32 %r36, %ntid.x;
    sub.u32 %r36, %r36, 1;
    setp.eq.and.u32 %p6, %r2, %r36, %p6;
    selp.b64 %rd11, 1048576, 0, %p6;
    add.s64 %rd12, %rd10, %rd11;
    atom.global.add.u32 %r42, [%rd12], 1;
    atom.global.max.s32 %r43, [%rd10+16], %r17;
    ld.global.u32 %r44, [%rd4];
    atom.global.inc.u32 %r45, [%rd10+32], 6;
    atom.global.dec.u32 %r46, [%rd10+48], 9;
    red.global.add.u64 [%rd2+64], %rd8;
    atom.global.cas.b32 %r47, [%rd10+80], %r22, %r14;
    atom.add.u32 %r48, [%rd10+96], %r14;
    cvt.u64.u32 %rd13, %r26;
    atom.global.exch.b64 %rd14, [%rd2+112], %rd13;
    mov.u64 %rd15, sh;
    cvta.shared.u64 %rd16, %rd15;
    cvt.u64.u32 %rd17, %r11;
    add.s64 %rd18, %rd16, %rd17;
    atom.add.u32 %r49, [%rd18+464], %r14;
    atom.add.u32 %r64, [%rd18+464], %r49;
    add.u32 %r50, %r42, %r13;
    mov.u32 %r51, 48879;
    and.b32 %r52, %r2, 5;
    setp.eq.u32 %p7, %r52, 0;
    @%p7 bra AFTER;
    atom.shared.add.u32 %r51, [%r12+432], 3;
    red.shared.add.u32 [%r12+432], %r2;
    atom.shared.inc.u32 %r53, [%r12+432], 1000;
    add.u32 %r51, %r51, %r53;
AFTER:
    bar.sync 0;
    ld.shared.u32 %r54, [%r12];
    ld.shared.u32 %r55, [%r12+16];
    ld.shared.u32 %r56, [%r12+32];
    ld.shared.u32 %r57, [%r12+80];
    ld.shared.u32 %r58, [%r12+96];
    ld.shared.u32 %r59, [cnt];
    ld.shared.u32 %r63, [cnt+8];
    st.global.v4.u32 [%rd4], {%r13, %r42, %r54, %r55};
    st.global.v4.u32 [%rd4+16], {%r56, %r57, %r58, %r59};
    st.global.v4.u32 [%rd4+32], {%r23, %r29, %r40, %r51};
    st.global.v4.u32 [%rd4+48], {%r45, %r47, %r63, %r50};
    ret;
}
"#;

#[test]
fn integer_atomics_inline_are_the_interpreters() {
    // Two CTAs of 80 threads: two whole warps and one of 16 lanes each.
    let (ctas, threads) = (2usize, 80usize);
    // Warps caching whole buffers: the global atomics hit the cached range (inline) but at
    // the first and after the load from `out`; caching the few bytes asked for: they miss (the
    // interpreter's).
    let cases = [(0u32, false), (1, true), (2, true), (3, true)];
    for (whole_buffers, (mode, fails)) in [false, true]
        .into_iter()
        .flat_map(|w| cases.into_iter().map(move |c| (w, c)))
    {
        let outcome = agree_in(
            ATOMICS,
            "atomics",
            config([ctas as u32, 1, 1], [threads as u32, 1, 1], 1),
            (&[vec![0; ctas * threads * 16], vec![0; 32]], whole_buffers),
            &[mode],
        );
        assert_fails(&outcome, fails, mode);
        if mode == 3 {
            // CTA 0's threads before its last added to the global bins; then it faulted.
            assert_ne!(outcome.buffers[1][..4], [0; 4]);
        }
        if fails {
            continue;
        }
        let stats = outcome.result.as_ref().expect("ran");
        assert!(stats.global_atomics > 0);
        let out = &outcome.buffers[0];
        let glob = &outcome.buffers[1];
        for cta in 0..ctas {
            for t in 0..threads {
                let row = &out[(cta * threads + t) * 16..][..16];
                let bin = t as u32 % 4;
                let lane = t % 32;
                // Lanes of a warp at one bin add in lane order: each sees the one four lanes
                // below it (shared and global alike).
                if lane >= 4 {
                    let below = &out[(cta * threads + t - 4) * 16..][..16];
                    assert_eq!(row[0], below[0] + 1, "CTA {cta} thread {t}: shared add");
                    assert_eq!(row[1], below[1] + 1, "CTA {cta} thread {t}: global add");
                }
                // After the barrier: 20 threads per bin; max of tid + 1; min of 40 - tid;
                // 20 increments wrapping at 5 (period 6) and decrements at 7 (period 8).
                assert_eq!(row[2], 20, "CTA {cta} thread {t}: bin");
                assert_eq!(row[3], 77 + bin, "CTA {cta} thread {t}: max");
                assert_eq!(row[4] as i32, -36 - bin as i32, "CTA {cta} thread {t}: min");
                assert_eq!(row[5], 20 % 6, "CTA {cta} thread {t}: inc");
                assert_eq!(row[6], 8 - 20 % 8, "CTA {cta} thread {t}: dec");
                // Each warp's first lane adds its population: 32 + 32 + 16.
                assert_eq!(row[7], 80, "CTA {cta} thread {t}: counter");
                assert_eq!(row[14], (0..80).sum::<u32>(), "CTA {cta} thread {t}: tids");
                // The guarded atomic: lanes outside the guard keep 0xdead.
                let guarded = (t < 8 || t % 2 == 1) && t < 40;
                assert_eq!(row[10] == 57005, !guarded, "CTA {cta} thread {t}: guard");
                // The divergent region: lanes with `tid & 5 == 0` skip it.
                assert_eq!(row[11] == 48879, t & 5 == 0, "CTA {cta} thread {t}: region");
            }
        }
        // Both CTAs: 40 adds per bin, 40 increments wrapping at 6 (period 7), 40 decrements
        // at 9 (period 10), the tids summed twice.
        assert_eq!(glob[..4], [40; 4]);
        assert_eq!(glob[8..12], [40 % 7; 4]);
        assert_eq!(glob[12..16], [0; 4]);
        assert_eq!(
            u64::from(glob[16]) | u64::from(glob[17]) << 32,
            2 * (0..80u64).sum::<u64>()
        );
    }
}

/// Arrays a kernel of [`many_arrays`] reads in turn: more than a warp's cached range and its
/// recent ranges hold (1 + 8), so that some loads find their array in the recent ranges and
/// others in none.
const MANY: usize = 10;

/// Elements of each array.
const MANY_LEN: u32 = 64;

/// A loop reading [`MANY`] arrays in turn, a loop whose lanes leave at different times: lanes
/// 8-15 of each warp (one lane group) run 9 trips, the others 0 to 3, so that most trips run
/// with the other groups empty; then each thread writes its sum. Per `mode`: 0 nothing else;
/// 1 lane 12 reads one element past the first array at trip 5 (its group's first running
/// lane, 8, finds the array among the recent ranges: the fault is the interpreter's to
/// report); 2 the odd lanes read the second array where the even ones read the first (one
/// load over two arrays, each accessible, neither holding every lane: the interpreter's).
fn many_arrays() -> String {
    let params: Vec<String> = (0..MANY).map(|i| format!(".param .u64 a{i}")).collect();
    let mut text = format!(
        ".visible .entry many({}, .param .u64 out, .param .u32 mode)\n{{\n\
         .reg .pred %p<8>;\n.reg .b32 %r<40>;\n.reg .b64 %rd<40>;\n",
        params.join(", ")
    );
    for i in 0..MANY {
        text += &format!("ld.param.u64 %rd{i}, [a{i}];\n");
    }
    text += r#"
    ld.param.u64 %rd20, [out];
    ld.param.u32 %r1, [mode];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    and.b32 %r6, %r2, 31;
    mul.lo.u32 %r7, %r2, 5;
    and.b32 %r7, %r7, 3;
    setp.ge.u32 %p1, %r6, 8;
    setp.lt.u32 %p2, %r6, 16;
    and.pred %p1, %p1, %p2;
    selp.b32 %r8, 9, %r7, %p1;
    and.b32 %r13, %r6, 1;
    setp.eq.u32 %p6, %r1, 2;
    setp.eq.and.u32 %p6, %r13, 1, %p6;
    selp.b64 %rd21, %rd1, %rd0, %p6;
    mov.u32 %r9, 0;
    mov.u32 %r10, 0;
    setp.eq.u32 %p3, %r8, 0;
    @%p3 bra DONE;
LOOP:
    mad.lo.s32 %r11, %r5, 3, %r9;
    rem.u32 %r11, %r11, 64;
    mul.wide.u32 %rd22, %r11, 4;
    setp.eq.u32 %p4, %r1, 1;
    setp.eq.and.u32 %p4, %r9, 5, %p4;
    setp.eq.and.u32 %p4, %r6, 12, %p4;
    selp.b32 %r12, 64, %r11, %p4;
    mul.wide.u32 %rd23, %r12, 4;
    add.s64 %rd24, %rd21, %rd23;
    ld.global.u32 %r14, [%rd24];
    add.u32 %r10, %r10, %r14;
"#;
    for i in 1..MANY {
        text += &format!(
            "add.s64 %rd24, %rd{i}, %rd22;\nld.global.nc.u32 %r14, [%rd24];\n\
             mad.lo.s32 %r10, %r10, 3, %r14;\n"
        );
    }
    text += r#"
    add.u32 %r9, %r9, 1;
    setp.lt.u32 %p5, %r9, %r8;
    @%p5 bra LOOP;
DONE:
    mul.wide.u32 %rd25, %r5, 4;
    add.s64 %rd26, %rd20, %rd25;
    st.global.u32 [%rd26], %r10;
    ret;
}
"#;
    text
}

#[test]
fn loads_over_many_arrays_with_few_lanes_running_are_the_interpreters() {
    let text = many_arrays();
    let ctas = 6u32;
    let threads = 64u32;
    let arrays: Vec<Vec<u32>> = (0..MANY as u32)
        .map(|a| {
            (0..MANY_LEN)
                .map(|i| (i + 1).wrapping_mul(2_654_435_761) ^ a)
                .collect()
        })
        .collect();
    for (mode, fails) in [(0u32, false), (1, true), (2, false)] {
        // Two workers race to a fault: which CTA's is reported first is not determined.
        let workers: &[usize] = if fails { &[1] } else { &[1, 2] };
        for &workers in workers {
            for whole_buffers in [false, true] {
                let mut inputs = arrays.clone();
                inputs.push(vec![0; (ctas * threads) as usize]);
                let outcome = agree_in(
                    &text,
                    "many",
                    config([ctas, 1, 1], [threads, 1, 1], workers),
                    (&inputs, whole_buffers),
                    &[mode],
                );
                assert_fails(&outcome, fails, mode);
                if fails {
                    continue;
                }
                // Each thread's sum, computed here.
                let out = &outcome.buffers[MANY];
                for g in 0..ctas * threads {
                    let lane = g % threads % 32;
                    let trips = if (8..16).contains(&lane) {
                        9
                    } else {
                        (g % threads).wrapping_mul(5) & 3
                    };
                    let first = usize::from(mode == 2 && lane % 2 == 1);
                    let mut sum = 0u32;
                    for k in 0..trips {
                        let i = ((g * 3 + k) % MANY_LEN) as usize;
                        sum = sum.wrapping_add(arrays[first][i]);
                        for array in &arrays[1..] {
                            sum = sum.wrapping_mul(3).wrapping_add(array[i]);
                        }
                    }
                    assert_eq!(out[g as usize], sum, "mode {mode}: thread {g}");
                }
            }
        }
    }
}

/// CTA 0 stores each thread's `%tid` (`tid | 3` with `same`) at `out[tid / 4]` (four lanes at
/// each address: the highest lane's value stays) until CTA 1 sets `flag`. With `same`, the
/// stores change nothing from the second trip on, so that a grid where CTA 1 cannot start
/// makes no progress.
const SPIN: &str = r#"
.visible .entry spin(.param .u64 out, .param .u64 flag, .param .u32 same)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [flag];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra SETTER;
    shr.u32 %r3, %r1, 2;
    mul.wide.u32 %rd3, %r3, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.param.u32 %r6, [same];
    setp.ne.u32 %p1, %r6, 0;
    or.b32 %r7, %r1, 3;
    selp.b32 %r1, %r7, %r1, %p1;
WAIT:
    st.global.u32 [%rd4], %r1;
    ld.volatile.global.u32 %r4, [%rd2];
    setp.eq.u32 %p2, %r4, 0;
    @%p2 bra WAIT;
    ret;
SETTER:
    mov.u32 %r5, 1;
    st.global.u32 [%rd2], %r5;
    ret;
}
"#;

#[test]
fn global_stores_inline_order_lanes_and_see_unchanged_memory_as_the_interpreter() {
    for (resident, whole_buffers) in [(2usize, false), (2, true), (1, false), (1, true)] {
        let config = LaunchConfig {
            grid: [2, 1, 1],
            block: [64, 1, 1],
            dynamic_shared_bytes: 0,
            // One worker: with two, how long CTA 0 spins would depend on the threads' timing.
            workers: 1,
            resident_ctas: resident,
        };
        // A store that set `wrote` without changing memory would keep the lone resident CTA
        // spinning for ever: wait for the outcome on another thread, for a while.
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let same = u32::from(resident == 1);
            let inputs = [vec![0; 16], vec![0]];
            let _ = send.send(agree_in(
                SPIN,
                "spin",
                config,
                (&inputs, whole_buffers),
                &[same],
            ));
        });
        let outcome = receive
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("the launches ended (a warp that only stores what memory holds waits)");
        if resident == 1 {
            let error = outcome.result.expect_err("CTA 1 never starts");
            assert!(error.contains("without changing memory"), "{error}");
        } else {
            assert!(outcome.result.is_ok(), "{:?}", outcome.result);
            let expected: Vec<u32> = (0..16).map(|k| 4 * k + 3).collect();
            assert_eq!(outcome.buffers[0], expected);
        }
    }
}

/// Three divergent loops whose bodies the native code goes round: two without visible
/// accesses (`ld.global.nc`), `@p bra LOOP1` after the body (each lane's own trip count, lane
/// 9's 2,500 trips outlasting several slices) and `@p bra DONE2; bra.uni LOOP2` (the layout of
/// a loop that tests first), lanes diverging before the first and reconverging at its head; and
/// a third whose two visible accesses race (`cell += lane + 1`, not atomic, from every thread
/// of a CTA: which updates survive depends on where slices end; each CTA has its own cell, as
/// CTAs on two workers would race in the host's order, which no engine fixes). Mode 1: lane 5
/// reads outside the array on its 41st trip.
const LOOPS: &str = r#"
.visible .entry loops(.param .u64 a, .param .u64 out, .param .u64 cell, .param .u32 mode)
{
    .reg .pred %p<8>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<11>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [mode];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    and.b32 %r6, %r2, 31;
    mul.lo.u32 %r7, %r6, 97;
    rem.u32 %r7, %r7, 61;
    setp.eq.u32 %p1, %r6, 9;
    selp.b32 %r7, 2500, %r7, %p1;
    mov.u32 %r10, 0;
    mov.u32 %r9, 0;
    and.b32 %r8, %r6, 1;
    setp.eq.u32 %p2, %r8, 0;
    @%p2 bra LOOP1;
    add.u32 %r10, %r10, 7;
    mul.lo.u32 %r10, %r10, 3;
LOOP1:
    add.u32 %r11, %r5, %r9;
    and.b32 %r11, %r11, 255;
    setp.eq.u32 %p3, %r1, 1;
    setp.eq.and.u32 %p3, %r6, 5, %p3;
    setp.eq.and.u32 %p3, %r9, 40, %p3;
    selp.b32 %r11, 100000, %r11, %p3;
    mul.wide.u32 %rd3, %r11, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.nc.u32 %r12, [%rd4];
    mad.lo.s32 %r10, %r10, 5, %r12;
    add.u32 %r9, %r9, 1;
    setp.lt.u32 %p4, %r9, %r7;
    @%p4 bra LOOP1;
    rem.u32 %r13, %r6, 7;
    mul.lo.u32 %r13, %r13, 3;
    mov.u32 %r14, 0;
    setp.eq.u32 %p5, %r13, 0;
    @%p5 bra DONE2;
LOOP2:
    xor.b32 %r15, %r14, %r5;
    and.b32 %r15, %r15, 255;
    mul.wide.u32 %rd5, %r15, 4;
    add.s64 %rd6, %rd1, %rd5;
    ld.global.nc.u32 %r16, [%rd6];
    xor.b32 %r10, %r10, %r16;
    add.u32 %r10, %r10, %r14;
    add.u32 %r14, %r14, 1;
    setp.ge.u32 %p6, %r14, %r13;
    @%p6 bra DONE2;
    bra.uni LOOP2;
DONE2:
    mul.wide.u32 %rd7, %r5, 4;
    add.s64 %rd8, %rd2, %rd7;
    st.global.u32 [%rd8], %r10;
    ld.param.u64 %rd9, [cell];
    mul.wide.u32 %rd10, %r3, 4;
    add.s64 %rd9, %rd9, %rd10;
    rem.u32 %r17, %r6, 5;
    add.u32 %r17, %r17, 1;
    add.u32 %r18, %r6, 1;
LOOP3:
    ld.global.u32 %r19, [%rd9];
    add.u32 %r19, %r19, %r18;
    st.global.u32 [%rd9], %r19;
    add.u32 %r17, %r17, -1;
    setp.ne.u32 %p7, %r17, 0;
    @%p7 bra LOOP3;
    ret;
}
"#;

#[test]
fn divergent_loops_going_round_in_native_code_are_the_interpreters() {
    let ctas = 3u32;
    let threads = 96u32;
    let array: Vec<u32> = (0..256u32)
        .map(|i| (i + 7).wrapping_mul(2_246_822_519))
        .collect();
    for (mode, fails) in [(0u32, false), (1, true)] {
        // Two workers race to a fault: which CTA's is reported first is not determined.
        let workers: &[usize] = if fails { &[1] } else { &[1, 2] };
        for &workers in workers {
            let inputs = vec![
                array.clone(),
                vec![0; (ctas * threads) as usize],
                vec![0; ctas as usize],
            ];
            let outcome = agree(
                LOOPS,
                "loops",
                config([ctas, 1, 1], [threads, 1, 1], workers),
                &inputs,
                &[mode],
            );
            assert_fails(&outcome, fails, mode);
            if fails {
                continue;
            }
            // Each thread's result and the launch's counts, computed here.
            let (mut warp_instructions, mut thread_instructions) = (0u64, 0u64);
            let out = &outcome.buffers[1];
            for g in 0..ctas * threads {
                let lane = g % threads % 32;
                let mut sum = if lane % 2 == 1 { 21u32 } else { 0 };
                let trips = if lane == 9 { 2500 } else { lane * 97 % 61 };
                for k in 0..trips.max(1) {
                    sum = sum
                        .wrapping_mul(5)
                        .wrapping_add(array[(g.wrapping_add(k) & 255) as usize]);
                }
                for k in 0..lane % 7 * 3 {
                    sum = (sum ^ array[((k ^ g) & 255) as usize]).wrapping_add(k);
                }
                assert_eq!(out[g as usize], sum, "thread {g}");
            }
            // Per warp (all full): 17 instructions before the first loop, the odd lanes' 2,
            // the first loop's 13 per trip of its longest lane (each lane counting its own),
            // 5 between the loops, the second's 11 per trip (10 on a lane's last: it leaves at
            // the first branch), 7 before the third, its 6 per trip (`lane % 5 + 1` trips) and
            // the `ret`.
            for _warp in 0..ctas * threads / 32 {
                let trips1: Vec<u64> = (0..32u64)
                    .map(|lane| {
                        if lane == 9 {
                            2500
                        } else {
                            (lane * 97 % 61).max(1)
                        }
                    })
                    .collect();
                let trips2: Vec<u64> = (0..32u64).map(|lane| lane % 7 * 3).collect();
                let most1 = *trips1.iter().max().unwrap_or(&0);
                let most2 = *trips2.iter().max().unwrap_or(&0);
                warp_instructions += 17 + 2 + 13 * most1 + 5 + 11 * most2 - 1 + 9 + 6 * 5 + 1;
                thread_instructions += 32 * (17 + 5 + 9 + 1) + 16 * 2;
                for lane in 0..32 {
                    thread_instructions += 13 * trips1[lane] + 6 * (lane as u64 % 5 + 1);
                    if trips2[lane] > 0 {
                        thread_instructions += 11 * trips2[lane] - 1;
                    }
                }
            }
            let stats = outcome.result.as_ref().expect("ran");
            assert_eq!(
                (stats.warp_instructions, stats.thread_instructions),
                (warp_instructions, thread_instructions)
            );
            // The races lost some updates (which ones, the interpreter's schedule decides:
            // `agree` compared the cells), never made one up.
            let all: u32 = (0..threads).map(|t| (t % 32 + 1) * (t % 32 % 5 + 1)).sum();
            for &cell in &outcome.buffers[2] {
                assert!(cell > 0 && cell <= all, "cell {cell} of {all}");
            }
        }
    }
}
