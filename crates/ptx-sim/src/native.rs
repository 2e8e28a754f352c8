//! The native engine: runs of straight instructions of a decoded function translated to
//! machine code with LLVM, compiled lazily the first time a warp runs the function, kept with
//! the [`crate::Program`].
//!
//! A *run* is a maximal sequence of straight instructions ([`Op::is_straight`], none reading
//! `%clock`), guarded or not, that no branch target or reconvergence point interrupts, with
//! some native code in it. Its native function takes the frame's register file (register-major,
//! 32 lanes a row, as [`crate::warp::Warp::regs`]) and does what the interpreter does for each
//! instruction in turn, in one of three [`Form`]s: *inline* (the guard row to a mask, the
//! operation on the lanes as vectors, the result stored into the lanes the guard lets through:
//! ALU instructions with a [`Lowered`] form, moves, `cvta` of the global and shared windows,
//! loads and `st.shared`; `shfl` with immediate lane operands, a constant permutation of the
//! source row; integer `atom`/`red` on shared or host memory, a loop over the running lanes in
//! the interpreter's order), a call of the instruction's interpreter [`WarpKernel`] (the other
//! ALU instructions with register or immediate sources), or a call of the interpreter itself
//! for the instruction ([`crate::exec::interpret_for_native`]: everything else, so that runs do
//! not end at it). A run is *segments* (each call, each memory access, atomics included, and
//! each `shfl` alone, loops over lane groups of the other inline instructions), each an entry
//! point. The interpreter (`exec.rs`) enters a run at a segment when the slice has budget for
//! the rest of it and no reconvergence point falls inside it; the native code stops where the
//! interpreter would (before a shared access that would fault, after the visible access that
//! ends the slice, at an instruction the interpreter fails), and the interpreter counts what it
//! executed exactly as it counts instructions one by one. A memory access is inline only when
//! every running lane passes a check the interpreter makes, here changing nothing (inside the
//! shared window, or the warp's cached accessible host range or, the interpreter's next try,
//! the first of its recent ranges holding the first running lane's access; aligned; for a host
//! atomic also outside the CTA's shared and local windows, where the interpreter's atomics are
//! private and uncounted); a host access that does not is executed by the interpreter, with
//! whatever it then does (another range, a fault to report). Shared atomics are plain
//! read-modify-writes (the CTA's worker alone touches its window), host ones locked and
//! sequentially consistent, as the interpreter's (`memory::atomic_private`, `memory::atomic`).
//! The semantics of each lowered form are [`crate::alu::AluOp::eval`]'s bit for bit (the tests
//! below compare them on edge values, guards, partial masks and immediates); those of the
//! memory accesses the interpreter's (tests below and `tests/native_engine.rs`).
//!
//! A run that is a loop's body ([`loop_back`]) goes round without returning to the
//! interpreter while the interpreter would send the warp round ([`Gen::go_round`]): a
//! divergent loop's trips cost the interpreter's branch handling only where the branch
//! pushes more than the lanes going round, and the run's entry only once per slice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, OnceLock};

use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetMachine};
use inkwell::types::{IntType, VectorType};
use inkwell::values::{BasicValue, FunctionValue, IntValue, PointerValue, VectorValue};
use inkwell::{
    AddressSpace, AtomicOrdering, AtomicRMWBinOp, FloatPredicate, IntPredicate, OptimizationLevel,
};

use crate::alu::{F32Op, FloatCmp, IntCmp, IntOp, Lowered, WarpKernel};
use crate::decode::{
    Addr, AluInst, AtomOp, AtomType, DecodedFunction, Inst, Op, Space, Special, Src, NO_REG,
};
use crate::exec::{window_base, WindowBase};

/// Which engine runs a [`crate::Program`]'s kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// The interpreter alone: the reference.
    #[default]
    Interpreter,
    /// Runs of ALU instructions as native code, the rest interpreted; the same results and
    /// counts as the interpreter.
    Native,
}

impl Engine {
    /// The engine that runs long programs fastest on this host, with the native engine's
    /// tiers keeping short ones interpreted: the native engine where the host has AVX-512
    /// (`avx512f`: a warp's 32 lanes of 32 bits fill two vector registers), the interpreter
    /// elsewhere. Measured on the instrumented benchmark programs at 256 times their test size
    /// (`benchmarks/results/2026-11-29-cpu-engine-default.md`): with AVX-512, 0.88x the
    /// interpreter's CPU time (geometric mean, compilation included; 0.71x in total); the same
    /// code compiled for an AVX2 target, 1.04x (the interpreter's time, within noise, but gemm
    /// 1.43x); at test size and 32 times it, 1.02x either way (nothing compiled).
    pub fn fastest_on_this_host() -> Engine {
        let (_, features) = host();
        if features.split(',').any(|f| f == "+avx512f") {
            Engine::Native
        } else {
            Engine::Interpreter
        }
    }
}

/// What a run reads besides the registers: the CTA's shared window, and the interpreter
/// executing the warp, for the instructions the run has it execute
/// ([`crate::exec::interpret_for_native`]).
#[repr(C)]
pub(crate) struct RunContext {
    pub shared_base: u64,
    pub shared_len: u64,
    pub exec: *mut std::ffi::c_void,
    /// The launch's kernel parameter buffer (`ld.param` of the kernel's own parameters).
    pub params: u64,
    /// The warp's cached accessible host range, `[lo, hi)` (`Warp::accessible`; instructions
    /// the interpreter executes in the run may change it, so the run reads it at each access).
    pub accessible_lo: *const u64,
    pub accessible_hi: *const u64,
    /// The warp's `Warp::wrote` flag (a `bool`).
    pub wrote: *mut bool,
    /// `%ntid`, `%ctaid` and `%nctaid` (x, y, z each): [`UNIFORM_SPECIALS`].
    pub specials: *const u64,
    /// The warp's `%tid` of each lane (`Warp::tid`: x, y, z per lane).
    pub tid: *const u32,
    /// The launch's shared variables' offsets in the window (`Launch::shared_offsets`).
    pub shared_offsets: *const u64,
    pub shared_offsets_len: u64,
    /// The CTA's local windows, `[local_base, local_base + local_len)`: a generic atomic
    /// there is private, neither locked nor counted as global by the interpreter.
    pub local_base: u64,
    pub local_len: u64,
    /// The warp's `Warp::global_atomics` counter (a `u64`).
    pub global_atomics: *mut u64,
    /// The warp's earlier accessible host ranges (`Warp::recent`: [`crate::warp::RECENT_RANGES`]
    /// pairs `lo`, `hi`), where a host access outside the cached range looks next, as the
    /// interpreter does.
    pub recent: *const u64,
    /// Warp-instructions the run may execute after its end by going round its loop again
    /// ([`NativeRun::loop_branches`]; 0: it does not go round), less those it executed so.
    pub loop_budget: u64,
    /// Out: the warp- and thread-instructions of the passes through the run it completed and
    /// went round after, their branches included (0: it did not go round).
    pub looped_warp: u64,
    pub looped_thread: u64,
    /// Out, where it went round: the lanes of its last pass.
    pub looped_active: u64,
    /// Out, where it went round: the allowance of visible accesses at its last pass's start
    /// (the entry's, less the visible accesses of every pass through the whole run before).
    pub looped_allowance: u64,
}

/// The special registers the same in every lane of a launch's CTA that runs read from
/// [`RunContext::specials`], in order.
pub(crate) const UNIFORM_SPECIALS: [Special; 9] = [
    Special::Ntid(0),
    Special::Ntid(1),
    Special::Ntid(2),
    Special::Ctaid(0),
    Special::Ctaid(1),
    Special::Ctaid(2),
    Special::Nctaid(0),
    Special::Nctaid(1),
    Special::Nctaid(2),
];

/// The fields of [`RunContext`], in order (each 8 bytes).
#[derive(Clone, Copy)]
enum Field {
    SharedBase,
    SharedLen,
    Exec,
    Params,
    AccessibleLo,
    AccessibleHi,
    Wrote,
    Specials,
    Tid,
    SharedOffsets,
    SharedOffsetsLen,
    LocalBase,
    LocalLen,
    GlobalAtomics,
    Recent,
    LoopBudget,
    LoopedWarp,
    LoopedThread,
    LoopedActive,
    LoopedAllowance,
}

// `Field` is `RunContext`'s layout: each field 8 bytes, in order.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(RunContext, shared_base) == 8 * Field::SharedBase as usize);
    assert!(offset_of!(RunContext, shared_len) == 8 * Field::SharedLen as usize);
    assert!(offset_of!(RunContext, exec) == 8 * Field::Exec as usize);
    assert!(offset_of!(RunContext, params) == 8 * Field::Params as usize);
    assert!(offset_of!(RunContext, accessible_lo) == 8 * Field::AccessibleLo as usize);
    assert!(offset_of!(RunContext, accessible_hi) == 8 * Field::AccessibleHi as usize);
    assert!(offset_of!(RunContext, wrote) == 8 * Field::Wrote as usize);
    assert!(offset_of!(RunContext, specials) == 8 * Field::Specials as usize);
    assert!(offset_of!(RunContext, tid) == 8 * Field::Tid as usize);
    assert!(offset_of!(RunContext, shared_offsets) == 8 * Field::SharedOffsets as usize);
    assert!(offset_of!(RunContext, shared_offsets_len) == 8 * Field::SharedOffsetsLen as usize);
    assert!(offset_of!(RunContext, local_base) == 8 * Field::LocalBase as usize);
    assert!(offset_of!(RunContext, local_len) == 8 * Field::LocalLen as usize);
    assert!(offset_of!(RunContext, global_atomics) == 8 * Field::GlobalAtomics as usize);
    assert!(offset_of!(RunContext, recent) == 8 * Field::Recent as usize);
    assert!(offset_of!(RunContext, loop_budget) == 8 * Field::LoopBudget as usize);
    assert!(offset_of!(RunContext, looped_warp) == 8 * Field::LoopedWarp as usize);
    assert!(offset_of!(RunContext, looped_thread) == 8 * Field::LoopedThread as usize);
    assert!(offset_of!(RunContext, looped_active) == 8 * Field::LoopedActive as usize);
    assert!(offset_of!(RunContext, looped_allowance) == 8 * Field::LoopedAllowance as usize);
    assert!(size_of::<RunContext>() == 8 * (Field::LoopedAllowance as usize + 1));
};

/// A run's native function: the frame's register file, the active mask, the context, the
/// instruction of the run to start at (a segment's first, [`NativeRun::offset`]) and the
/// slice's allowance of visible accesses plus [`NativeRun::visible_before`]. Returns the
/// instruction of the run it stopped before: the run's length when it ran to the end; a shared
/// access that would fault (an address outside the window or misaligned in some lane), which
/// the interpreter then executes and reports; or the one after the visible access that used up
/// the allowance, where the interpreter would end the slice. A run that went round its loop
/// ([`NativeRun::loop_branches`]) returns where its last pass stopped, and says in the context
/// what it executed before.
type RunEntry = unsafe extern "C" fn(
    regs: *mut u64,
    active: u32,
    context: *mut RunContext,
    start: u32,
    allowance: u32,
) -> u32;

/// An entry point of a translated run: its first instruction, or the first of a later segment
/// (the run's code between kernel calls and loads), where a slice that ended inside the run
/// resumes.
#[derive(Clone, Copy)]
pub(crate) struct NativeRun {
    pub entry: RunEntry,
    /// The entry's instruction in the run.
    pub offset: u32,
    /// Instructions from the entry to the run's end.
    pub len: u32,
    /// Of which accesses other warps can see ([`Inst::visible`]).
    pub visible: u32,
    /// Visible accesses in the run before the entry.
    pub visible_before: u32,
    /// The branches after the run that go back to its first instruction, where the run is a
    /// loop's body ([`loop_back`]; 0: it is not): the native code goes round the loop while
    /// the interpreter would, the slice has budget for a whole pass
    /// ([`RunContext::loop_budget`]) and an access of its allowance left after the pass's.
    pub loop_branches: u32,
}

/// "No run starts here" in [`NativeCode::starts`].
const NO_RUN: u32 = u32::MAX;

/// The native code of one decoded function.
pub(crate) struct NativeCode {
    /// Per instruction: the index in `runs` of the entry point there, or [`NO_RUN`].
    starts: Vec<u32>,
    runs: Vec<NativeRun>,
    _jit: Jit,
}

impl NativeCode {
    /// The run entry point at `pc`, if any.
    #[inline(always)]
    pub fn run_at(&self, pc: u32) -> Option<NativeRun> {
        let index = *self.starts.get(pc as usize)?;
        self.runs.get(index as usize).copied()
    }
}

/// The LLVM objects the native functions live in. They are not used after compilation, only
/// kept alive (and dropped in order: module, engine, context).
struct Jit {
    module: std::mem::ManuallyDrop<Module<'static>>,
    engine: std::mem::ManuallyDrop<ExecutionEngine<'static>>,
    context: *mut Context,
}

/// Set by an exit handler that [`note_engine_made`] registers right after the process's first
/// execution engine is made: from then on a [`Jit`] is left to the operating system, not
/// dropped. MCJIT's constructor registers every engine with LLVM's GDB registration listener,
/// a function-local static built on first use, whose destructor C++ registers with `atexit`
/// then, after the CUDA module destructor registered by the program's start-up code
/// (`__cudaUnregisterFatBinary`, which drops the programs and their native code). Exit handlers
/// run in reverse order, so the listener is destroyed first, and an engine dropped afterwards
/// unregisters itself from freed memory: a hang at exit in `llvm::MCJIT::~MCJIT` (seen in
/// one full test run of three, 2026-11-28). This handler is registered after the listener, so it
/// runs before its destructor and before the module destructor.
static EXITING: AtomicBool = AtomicBool::new(false);

extern "C" fn mark_exiting() {
    EXITING.store(true, Ordering::SeqCst);
}

/// Registers [`mark_exiting`] once, after an execution engine (and so LLVM's GDB listener)
/// exists.
fn note_engine_made() {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        extern "C" {
            fn atexit(function: extern "C" fn()) -> std::ffi::c_int;
        }
        // SAFETY: `mark_exiting` is a plain function that only stores to an atomic. If the
        // registration fails (the C library's table is full), engines are dropped as before.
        unsafe { atexit(mark_exiting) };
    });
}

impl Drop for Jit {
    fn drop(&mut self) {
        if EXITING.load(Ordering::SeqCst) {
            // The process is exiting: LLVM's exit-time destructors may have run (see
            // `EXITING`); the memory goes back with the process.
            return;
        }
        // SAFETY: each is dropped once, the context last (the others borrow it); it came from
        // `Box::into_raw`.
        unsafe {
            std::mem::ManuallyDrop::drop(&mut self.module);
            std::mem::ManuallyDrop::drop(&mut self.engine);
            drop(Box::from_raw(self.context));
        }
    }
}

// SAFETY: after compilation nothing calls into these LLVM objects (their reference counts
// included) until they are dropped, once, by the owner; the compiled functions are plain
// machine code that any thread may call.
unsafe impl Send for Jit {}
unsafe impl Sync for Jit {}

/// Why a function could not be compiled (it is then interpreted).
#[derive(Debug)]
pub(crate) struct CompileError(String);

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn error(what: impl std::fmt::Display) -> CompileError {
    CompileError(what.to_string())
}

/// Whether inline code reads source `src` besides registers and immediates: `%tid`,
/// `%laneid`, the special registers of [`UNIFORM_SPECIALS`], a shared variable's address.
fn inline_source(src: &Src) -> bool {
    match src {
        Src::Special(special) => {
            matches!(special, Special::Tid(_) | Special::LaneId)
                || UNIFORM_SPECIALS.contains(special)
        }
        Src::Shared { .. } => true,
        _ => false,
    }
}

/// Whether the native engine can translate `inst` inline or call its kernel: registers below
/// `registers` only.
fn translatable(inst: &Inst, registers: u32) -> bool {
    let reg_ok = |r: u32| r == NO_REG || r < registers;
    let src_ok = |s: &Src| match *s {
        Src::Reg(r) => r < registers,
        Src::Imm(_) => true,
        _ => false,
    };
    if inst.guard != NO_REG && inst.guard >= registers {
        return false;
    }
    match &inst.op {
        Op::Alu(alu) => {
            !alu.reads_carry
                && !alu.writes_carry
                && usize::from(alu.count) <= 4
                && alu.srcs[..usize::from(alu.count)]
                    .iter()
                    .all(|s| src_ok(s) || (alu.op.lowered().is_some() && inline_source(s)))
                && reg_ok(alu.dst)
                && reg_ok(alu.second)
                && alu.immediates.len()
                    == alu.srcs[..usize::from(alu.count)]
                        .iter()
                        .filter(|s| matches!(s, Src::Imm(_)))
                        .count()
        }
        Op::Mov { dst, src, .. } => reg_ok(*dst) && (src_ok(src) || inline_source(src)),
        // A window with one base for the whole CTA (the run does not know whether its
        // function is a kernel: parameters count as per-thread).
        Op::Cvta {
            space, dst, src, ..
        } => window_base(*space, false) != WindowBase::PerThread && reg_ok(*dst) && src_ok(src),
        // The same source lanes in every execution: a constant permutation of the row.
        Op::Shfl {
            dst,
            dst_pred,
            a: Src::Reg(a),
            b: Src::Imm(_),
            c: Src::Imm(_),
            ..
        } => *a < registers && reg_ok(*dst) && reg_ok(*dst_pred),
        Op::Ld {
            space,
            addr,
            dsts,
            count,
            ty,
        } => {
            let total = u64::from(ty.bytes) * u64::from(*count);
            let base_ok = match (space, addr.base) {
                (Space::Shared | Space::Host, Src::Reg(r)) => r < registers,
                // `ld.param` of the kernel's own parameters (a host address).
                (Space::Host, Src::KernelParam(_)) => true,
                _ => false,
            };
            base_ok
                && matches!(ty.bytes, 1 | 2 | 4 | 8)
                && matches!(count, 1 | 2 | 4)
                && total.is_power_of_two()
                && dsts[..usize::from(*count)].iter().all(|&d| reg_ok(d))
        }
        // Global stores too: a kernel that loads one array and stores another misses the
        // cached range at every store, and finds the other among the recent ranges.
        Op::St {
            space: Space::Shared | Space::Host,
            addr,
            srcs,
            count,
            ty,
        } => {
            let total = u64::from(ty.bytes) * u64::from(*count);
            matches!(addr.base, Src::Reg(r) if r < registers)
                && matches!(ty.bytes, 1 | 2 | 4 | 8)
                && matches!(count, 1 | 2 | 4)
                && total.is_power_of_two()
                && srcs[..usize::from(*count)]
                    .iter()
                    .all(|s| src_ok(s) || inline_source(s))
        }
        // Integer atomics and reductions in the shared window (plain read-modify-writes: the
        // CTA's worker alone touches it) or on host memory (locked, as the interpreter's).
        // Floating-point ones stay with the interpreter: its float add is one code path on
        // purpose (the NaN a sum of two NaNs gives depends on the operands' order).
        Op::Atom {
            space,
            addr,
            ty,
            dst,
            b,
            c,
            ..
        } => {
            let base_ok = match (space, addr.base) {
                (Space::Shared | Space::Host, Src::Reg(r)) => r < registers,
                // A shared variable's own address (counter code's `[K__cf_cta+8]`).
                (Space::Shared, Src::Shared { .. }) => true,
                _ => false,
            };
            base_ok
                && matches!(
                    ty,
                    AtomType::U32 | AtomType::S32 | AtomType::U64 | AtomType::S64
                )
                && reg_ok(*dst)
                && src_ok(b)
                && src_ok(c)
        }
        _ => false,
    }
}

/// How a run executes one of its instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// Generated code ([`translatable`]: an ALU instruction with a [`Lowered`] form, a move,
    /// a `cvta`, a memory access (an integer atomic included) or a `shfl`).
    Inline,
    /// The instruction's interpreter [`WarpKernel`], called on the whole warp.
    Kernel,
    /// The interpreter executes it ([`crate::exec::interpret_for_native`]): any other
    /// instruction that leaves the SIMT stack as it is, so that runs do not end at it.
    Interpreter,
}

/// How a run executes `inst` (`None`: runs end before it). The interpreter's part is any
/// straight instruction ([`Op::is_straight`]) except those reading `%clock`/`%clock64`,
/// which count the instructions issued before them (the run counts its instructions when it
/// returns).
fn form(inst: &Inst, registers: u32) -> Option<Form> {
    if translatable(inst, registers) {
        return Some(if calls_kernel(inst) {
            Form::Kernel
        } else {
            Form::Inline
        });
    }
    if !inst.op.is_straight() {
        return None;
    }
    let mut clock = false;
    inst.op.for_each_source(|src| {
        clock |= matches!(
            src,
            Src::Special(crate::decode::Special::Clock | crate::decode::Special::Clock64)
        );
    });
    (!clock).then_some(Form::Interpreter)
}

/// Where runs must start: branch targets and reconvergence points (where the interpreter may
/// arrive from elsewhere or stop).
fn leaders(func: &DecodedFunction) -> Vec<bool> {
    let mut leader = vec![false; func.code.len() + 1];
    let mut mark = |pc: u32| {
        if let Some(slot) = leader.get_mut(pc as usize) {
            *slot = true;
        }
    };
    for inst in &func.code {
        match &inst.op {
            Op::Bra { target, reconverge } => {
                mark(*target);
                mark(*reconverge);
            }
            Op::Brx {
                targets,
                reconverge,
                ..
            } => {
                targets.iter().for_each(|&t| mark(t));
                mark(*reconverge);
            }
            _ => {}
        }
    }
    leader
}

/// Shortest run worth a native call.
const MIN_RUN: usize = 2;

/// The runs of `func`: `(start, len)`, each with some native code (not only instructions the
/// interpreter executes).
fn find_runs(func: &DecodedFunction) -> Vec<(u32, u32)> {
    let leader = leaders(func);
    let form_at = |pc: usize| form(&func.code[pc], func.registers);
    let mut runs = Vec::new();
    let mut pc = 0usize;
    while pc < func.code.len() {
        if form_at(pc).is_none() {
            pc += 1;
            continue;
        }
        let start = pc;
        pc += 1;
        while pc < func.code.len() && !leader[pc] && form_at(pc).is_some() {
            pc += 1;
        }
        let native = (start..pc).any(|i| form_at(i) != Some(Form::Interpreter));
        if pc - start >= MIN_RUN && native {
            runs.push((start as u32, (pc - start) as u32));
        }
    }
    runs
}

/// How a run that is a loop's body goes round: the branch right after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LoopBack {
    /// The branch right after the run (its function's instruction).
    branch: u32,
    /// `@p bra start` (the lanes that take the branch go round; 1 branch), or `@p bra out;
    /// bra start` (the lanes that do not; 2 branches).
    round_when_taken: bool,
    /// Whether the native code goes on with the lanes that go round where the branch diverges:
    /// where the interpreter then pushes one entry on the warp's stack, those lanes, its
    /// reconvergence point outside the loop (the others wait there). Otherwise it leaves
    /// the divergent branch to the interpreter.
    diverges: bool,
}

impl LoopBack {
    fn branches(&self) -> u32 {
        if self.round_when_taken {
            1
        } else {
            2
        }
    }
}

/// The loop the run `(start, len)` of `func` is the body of, if it is one: its last
/// instruction followed by `@p bra start`, or by `@p bra out; bra start` (a loop that ends on
/// a test, as compilers lay them out).
fn loop_back(func: &DecodedFunction, start: u32, len: u32) -> Option<LoopBack> {
    let end = start.checked_add(len)?;
    func.code.get(start as usize..end as usize)?;
    let branch = func.code.get(end as usize)?;
    let Op::Bra { target, reconverge } = branch.op else {
        return None;
    };
    let outside = |pc: u32, last: u32| pc < start || pc > last;
    if target == start {
        // Lanes that do not take it wait at `end + 1`: no entry for them.
        return Some(LoopBack {
            branch: end,
            round_when_taken: true,
            diverges: reconverge == end + 1,
        });
    }
    if branch.guard == NO_REG {
        return None;
    }
    let again = func.code.get(end as usize + 1)?;
    match again.op {
        Op::Bra { target: back, .. } if back == start && again.guard == NO_REG => {
            // The lanes that take it wait at its target, the reconvergence point.
            Some(LoopBack {
                branch: end,
                round_when_taken: false,
                diverges: target == reconverge
                    && reconverge != end + 1
                    && outside(reconverge, end + 1),
            })
        }
        _ => None,
    }
}

/// Visible accesses among `code`.
fn visible_in(code: &[Inst]) -> u32 {
    code.iter().filter(|inst| inst.visible).count() as u32
}

/// Whether the native code runs `inst` (of form `form`) on its own (a segment of one
/// instruction): a kernel call, an instruction the interpreter executes, a memory access
/// (checked for all lanes first; a slice may end right after it) or a `shfl` (it reads other
/// lanes' rows, which the group loops before it must have finished).
fn alone(inst: &Inst, form: Form) -> bool {
    form != Form::Inline || memory_access(inst) || matches!(inst.op, Op::Shfl { .. })
}

/// Whether `inst` is a load, a store or an atomic (their addresses are checked for all lanes
/// first).
fn memory_access(inst: &Inst) -> bool {
    matches!(inst.op, Op::Ld { .. } | Op::St { .. } | Op::Atom { .. })
}

/// The first instruction of each segment of a run: the run's first, and each instruction
/// that runs alone and the one after it.
fn segment_starts(code: &[Inst], forms: &[Form]) -> Vec<u32> {
    let mut starts = vec![0u32];
    for (i, (inst, &form)) in code.iter().zip(forms).enumerate() {
        if alone(inst, form) {
            starts.extend([i as u32, i as u32 + 1]);
        }
    }
    starts.retain(|&s| (s as usize) < code.len());
    starts.sort_unstable();
    starts.dedup();
    starts
}

/// The forms of the instructions of a run.
fn forms_of(code: &[Inst], registers: u32) -> Result<Vec<Form>, CompileError> {
    code.iter()
        .map(|inst| form(inst, registers).ok_or_else(|| error("a run with an instruction outside")))
        .collect()
}

/// Compiles the runs of `func` (`None`: it has none).
pub(crate) fn compile(func: &DecodedFunction) -> Result<Option<NativeCode>, CompileError> {
    let runs = find_runs(func);
    if runs.is_empty() {
        return Ok(None);
    }
    let backs: Vec<Option<LoopBack>> = runs
        .iter()
        .map(|&(start, len)| loop_back(func, start, len))
        .collect();
    // One compilation at a time in the process: LLVM's target registry (initialized by the
    // first) is global, and workers of several launches may compile at once.
    static LLVM: Mutex<()> = Mutex::new(());
    let _serialized = LLVM.lock().unwrap_or_else(|e| e.into_inner());
    let context = Box::into_raw(Box::new(Context::create()));
    // SAFETY: the context lives until `Jit` drops it, after everything borrowing it.
    let ctx: &'static Context = unsafe { &*context };
    let result = (|| {
        let module = ctx.create_module("cuda_flux_native");
        let mut names = Vec::new();
        {
            let gen = Gen::new(ctx, &module)?;
            for (i, (&(start, len), back)) in runs.iter().zip(&backs).enumerate() {
                let name = format!("run{i}");
                let code = &func.code[start as usize..(start + len) as usize];
                let back = back.map(|back| (back, &func.code[back.branch as usize]));
                gen.run_function(&name, code, &forms_of(code, func.registers)?, start, back)?;
                names.push(name);
            }
        }
        optimize(&module)?;
        let engine = module
            .create_jit_execution_engine(OptimizationLevel::Less)
            .map_err(error)?;
        note_engine_made();
        let mut compiled = Vec::new();
        let mut pcs = Vec::new();
        for ((name, &(start, len)), back) in names.iter().zip(&runs).zip(&backs) {
            let address = engine.get_function_address(name).map_err(error)?;
            if address == 0 {
                return Err(error(format!("no address for {name}")));
            }
            // SAFETY: the function was generated with `RunEntry`'s signature and C calling
            // convention.
            let entry = unsafe { std::mem::transmute::<usize, RunEntry>(address) };
            let code = &func.code[start as usize..(start + len) as usize];
            let loop_branches = back.map_or(0, |back| back.branches());
            for offset in segment_starts(code, &forms_of(code, func.registers)?) {
                let visible_before = visible_in(&code[..offset as usize]);
                compiled.push(NativeRun {
                    entry,
                    offset,
                    len: len - offset,
                    visible: visible_in(&code[offset as usize..]),
                    visible_before,
                    loop_branches,
                });
                pcs.push(start + offset);
            }
        }
        Ok((module, engine, compiled, pcs))
    })();
    match result {
        Ok((module, engine, compiled, pcs)) => {
            let mut starts = vec![NO_RUN; func.code.len()];
            for (i, &pc) in pcs.iter().enumerate() {
                starts[pc as usize] = i as u32;
            }
            Ok(Some(NativeCode {
                starts,
                runs: compiled,
                _jit: Jit {
                    module: std::mem::ManuallyDrop::new(module),
                    engine: std::mem::ManuallyDrop::new(engine),
                    context,
                },
            }))
        }
        Err(e) => {
            // SAFETY: nothing borrows the context any more (the closure's values are gone).
            drop(unsafe { Box::from_raw(context) });
            Err(e)
        }
    }
}

/// The host CPU's name and features (LLVM's view), once.
fn host() -> &'static (String, String) {
    static HOST: OnceLock<(String, String)> = OnceLock::new();
    HOST.get_or_init(|| {
        (
            TargetMachine::get_host_cpu_name().to_string(),
            TargetMachine::get_host_cpu_features().to_string(),
        )
    })
}

/// The IR passes the runs get: the generated code is straight vector code in small loops, so
/// that what matters is the pass's lanes in a register (`mem2reg`: a loop's body going round
/// changes them), forwarding a register's value from the instruction that writes it to those
/// that read it (`early-cse` with memory SSA), folding (`instcombine`) and dropping the
/// stores later ones overwrite (`dse`). The standard `default<O2>` pipeline gives no faster
/// code here and takes about twice as long (measured on the benchmark programs).
const PASSES: &str = "function(mem2reg,early-cse<memssa>,instcombine,dse)";

/// Runs [`PASSES`] on `module` for the host CPU.
fn optimize(module: &Module<'_>) -> Result<(), CompileError> {
    Target::initialize_native(&InitializationConfig::default()).map_err(error)?;
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(error)?;
    let (cpu, features) = host();
    let machine = target
        .create_target_machine(
            &triple,
            cpu,
            features,
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::JITDefault,
        )
        .ok_or_else(|| error("no target machine for the host"))?;
    module.set_triple(&triple);
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    module
        .run_passes(PASSES, &machine, PassBuilderOptions::create())
        .map_err(error)?;
    Ok(())
}

/// The interpreter's [`WarpKernel`] for an instruction without a lowered form, called from
/// native code (a C entry point: `WarpKernel::run` has Rust's calling convention). Returns
/// the second results, one bit per lane.
///
/// # Safety
/// As [`WarpKernel::run`], `kernel` pointing to the instruction's kernel.
unsafe extern "C" fn call_warp_kernel(
    kernel: *const WarpKernel,
    s0: *const u64,
    s1: *const u64,
    s2: *const u64,
    s3: *const u64,
    exec: u32,
    dst: *mut u64,
) -> u32 {
    // SAFETY: as the caller guarantees; no carry (runs hold no carry instructions).
    unsafe { (*kernel).run([s0, s1, s2, s3], exec, 0, dst).second }
}

/// Lanes of a warp.
const LANES: u32 = 32;

/// Lanes per vector in the generated code. A run's inline instructions execute as a loop over
/// the warp's lanes in groups of this many (lanes are independent in ALU instructions), all
/// instructions for one group before the next group: a group's values stay in vector
/// registers from one instruction to the next, and the code is a quarter of a whole-warp
/// version's size, so that LLVM compiles it quickly. Eight 64-bit lanes: one AVX-512 vector,
/// two AVX2 ones (fewer loop iterations than four: see
/// `benchmarks/results/2026-11-25-cpu-native-engine-2.md`).
const GROUP: u32 = 8;

/// The lanes of one group in the generated loop.
struct GroupLanes<'a, 'ctx> {
    regs: PointerValue<'ctx>,
    /// Index of the group's first lane (`i64`).
    first: IntValue<'ctx>,
    /// The active lanes of the group.
    active: VectorValue<'ctx>,
    /// The run's context, loaded.
    context: &'a RunValues<'ctx>,
}

/// The [`RunContext`] of a run as loaded at its entry.
struct RunValues<'ctx> {
    shared_base: IntValue<'ctx>,
    shared_len: IntValue<'ctx>,
    exec: PointerValue<'ctx>,
    params: IntValue<'ctx>,
    accessible_lo: PointerValue<'ctx>,
    accessible_hi: PointerValue<'ctx>,
    wrote: PointerValue<'ctx>,
    specials: PointerValue<'ctx>,
    tid: PointerValue<'ctx>,
    local_base: IntValue<'ctx>,
    local_len: IntValue<'ctx>,
    global_atomics: PointerValue<'ctx>,
    recent: PointerValue<'ctx>,
    /// The offsets of the shared variables the run's inline code names, `(var, offset)`,
    /// looked up at the run's entry.
    shared_vars: Vec<(u32, IntValue<'ctx>)>,
}

/// A memory access's lanes, as its checks see them ([`Gen::access_lanes`]).
struct AccessLanes<'ctx> {
    space: Space,
    /// Bytes per lane.
    total: u64,
    atomic: bool,
    /// The lanes that run it (`i32`).
    exec: IntValue<'ctx>,
    /// Every lane's address (32 lanes).
    address: VectorValue<'ctx>,
    /// The address operand.
    addr: Addr,
}

/// The first running lane's access of a host access ([`Gen::first_lane_access`]).
struct FirstAccess<'ctx> {
    address: IntValue<'ctx>,
    end: IntValue<'ctx>,
    /// `end` wrapped around.
    wraps: IntValue<'ctx>,
}

/// IR generation for one module.
struct Gen<'ctx, 'm> {
    ctx: &'ctx Context,
    module: &'m Module<'ctx>,
    builder: Builder<'ctx>,
    i64t: IntType<'ctx>,
    i32t: IntType<'ctx>,
    call_kernel: FunctionValue<'ctx>,
    /// The declaration of [`crate::exec::interpret_for_native`]'s type.
    call_interpreter: FunctionValue<'ctx>,
    /// The declaration of [`crate::exec::branch_for_native`]'s type.
    call_branch: FunctionValue<'ctx>,
}

/// What the end of a loop's body needs to go round ([`Gen::go_round`]).
struct Round<'ctx> {
    context: PointerValue<'ctx>,
    exec: PointerValue<'ctx>,
    /// Where the lanes of the pass live (`i32`), and the instruction it started at (`i32`:
    /// the entry's on the first pass, 0 on the others).
    active_slot: PointerValue<'ctx>,
    pass_slot: PointerValue<'ctx>,
    /// Where the allowance of visible accesses lives (`i32`, counted from the run's first
    /// instruction), its value in this pass, and the run's visible accesses.
    allowance_slot: PointerValue<'ctx>,
    allowance: IntValue<'ctx>,
    visible: u32,
    /// The run's first segment.
    head: inkwell::basic_block::BasicBlock<'ctx>,
}

/// Whether `inst` runs through its interpreter kernel rather than inline code.
fn calls_kernel(inst: &Inst) -> bool {
    matches!(&inst.op, Op::Alu(alu) if alu.op.lowered().is_none())
}

impl<'ctx, 'm> Gen<'ctx, 'm> {
    fn new(ctx: &'ctx Context, module: &'m Module<'ctx>) -> Result<Self, CompileError> {
        let ptr = ctx.ptr_type(AddressSpace::default());
        let i32t = ctx.i32_type();
        let call_kernel = module.add_function(
            "cuda_flux_call_warp_kernel",
            i32t.fn_type(
                &[
                    ptr.into(),
                    ptr.into(),
                    ptr.into(),
                    ptr.into(),
                    ptr.into(),
                    i32t.into(),
                    ptr.into(),
                ],
                false,
            ),
            None,
        );
        let call_interpreter = module.add_function(
            "cuda_flux_interpret_for_native",
            i32t.fn_type(&[ptr.into(), i32t.into(), i32t.into()], false),
            None,
        );
        let call_branch = module.add_function(
            "cuda_flux_branch_for_native",
            ctx.void_type()
                .fn_type(&[ptr.into(), i32t.into(), i32t.into(), i32t.into()], false),
            None,
        );
        Ok(Gen {
            ctx,
            module,
            builder: ctx.create_builder(),
            i64t: ctx.i64_type(),
            i32t,
            call_kernel,
            call_interpreter,
            call_branch,
        })
    }

    fn i64v(&self, lanes: u32) -> VectorType<'ctx> {
        self.i64t.vec_type(lanes)
    }

    fn boolv(&self, lanes: u32) -> VectorType<'ctx> {
        self.ctx.bool_type().vec_type(lanes)
    }

    /// Generates the function `name` for the instructions `code` (of forms `forms`, the
    /// first at `first_pc` in the function): inline instructions in loops over lane groups,
    /// instructions without a lowered form as kernel calls between them, the others as calls
    /// into the interpreter; where `code` is a loop's body (`back`, with its branch), going
    /// round it at the end ([`Gen::go_round`]).
    fn run_function(
        &self,
        name: &str,
        code: &[Inst],
        forms: &[Form],
        first_pc: u32,
        back: Option<(LoopBack, &Inst)>,
    ) -> Result<(), CompileError> {
        let ptr = self.ctx.ptr_type(AddressSpace::default());
        let fn_type = self.i32t.fn_type(
            &[
                ptr.into(),
                self.i32t.into(),
                ptr.into(),
                self.i32t.into(),
                self.i32t.into(),
            ],
            false,
        );
        let function = self.module.add_function(name, fn_type, None);
        let (cpu, features) = host();
        function.add_attribute(
            AttributeLoc::Function,
            self.ctx.create_string_attribute("target-cpu", cpu),
        );
        function.add_attribute(
            AttributeLoc::Function,
            self.ctx
                .create_string_attribute("target-features", features),
        );
        function.add_attribute(AttributeLoc::Function, self.enum_attribute("nounwind"));
        let entry = self.ctx.append_basic_block(function, "entry");
        self.builder.position_at_end(entry);
        let param = |n: u32| function.get_nth_param(n).ok_or_else(|| error("parameter"));
        let regs = param(0)?.into_pointer_value();
        let entry_active = param(1)?.into_int_value();
        let context = param(2)?.into_pointer_value();
        let field = |field: Field, name: &str| -> Result<IntValue<'ctx>, CompileError> {
            Ok(self
                .builder
                .build_load(self.i64t, self.context_field(context, field)?, name)
                .map_err(error)?
                .into_int_value())
        };
        let pointer = |f: Field, name: &str| -> Result<PointerValue<'ctx>, CompileError> {
            self.builder
                .build_int_to_ptr(field(f, name)?, ptr, name)
                .map_err(error)
        };
        let start = param(3)?.into_int_value();
        let entry_allowance = param(4)?.into_int_value();
        let values = RunValues {
            shared_base: field(Field::SharedBase, "shared_base")?,
            shared_len: field(Field::SharedLen, "shared_len")?,
            exec: pointer(Field::Exec, "exec")?,
            params: field(Field::Params, "params")?,
            accessible_lo: pointer(Field::AccessibleLo, "accessible_lo")?,
            accessible_hi: pointer(Field::AccessibleHi, "accessible_hi")?,
            wrote: pointer(Field::Wrote, "wrote")?,
            specials: pointer(Field::Specials, "specials")?,
            tid: pointer(Field::Tid, "tid")?,
            local_base: field(Field::LocalBase, "local_base")?,
            local_len: field(Field::LocalLen, "local_len")?,
            global_atomics: pointer(Field::GlobalAtomics, "global_atomics")?,
            recent: pointer(Field::Recent, "recent")?,
            shared_vars: self.shared_offsets(
                function,
                code,
                forms,
                pointer(Field::SharedOffsets, "shared_offsets")?,
                field(Field::SharedOffsetsLen, "shared_offsets_len")?,
            )?,
        };
        // A sink for results without a destination register (`_`) of called kernels.
        let sink = self
            .builder
            .build_array_alloca(self.i64t, self.i64t.const_int(LANES.into(), false), "sink")
            .map_err(error)?;
        // The lanes of the pass through the run, and its first instruction: a loop's body
        // goes round with fewer lanes where its branch diverges. Slots (made registers by
        // `mem2reg`), read at each segment's start.
        let active_slot = self
            .builder
            .build_alloca(self.i32t, "active_slot")
            .map_err(error)?;
        let pass_slot = self
            .builder
            .build_alloca(self.i32t, "pass_slot")
            .map_err(error)?;
        // ... and the allowance of visible accesses counted from the run's first instruction:
        // a pass through the whole run uses up its visible accesses.
        let allowance_slot = self
            .builder
            .build_alloca(self.i32t, "allowance_slot")
            .map_err(error)?;
        self.builder
            .build_store(active_slot, entry_active)
            .map_err(error)?;
        self.builder.build_store(pass_slot, start).map_err(error)?;
        self.builder
            .build_store(allowance_slot, entry_allowance)
            .map_err(error)?;
        // Segments: kernel calls on the whole warp, each memory access alone after its
        // addresses are checked for all lanes (a fault leaves the run before the access,
        // nothing of it done), the other inline instructions in loops over lane groups. The
        // entry jumps to the segment `start` names.
        let segments = segment_starts(code, forms);
        let blocks: Vec<_> = segments
            .iter()
            .map(|_| self.ctx.append_basic_block(function, "segment"))
            .collect();
        let nowhere = self.ctx.append_basic_block(function, "nowhere");
        let cases: Vec<_> = segments
            .iter()
            .zip(&blocks)
            .map(|(&s, &block)| (self.i32t.const_int(s.into(), false), block))
            .collect();
        self.builder
            .build_switch(start, nowhere, &cases)
            .map_err(error)?;
        self.builder.position_at_end(nowhere);
        self.builder.build_return(Some(&start)).map_err(error)?;
        for (k, (&first, &block)) in segments.iter().zip(&blocks).enumerate() {
            let end = segments
                .get(k + 1)
                .map_or(code.len(), |&next| next as usize);
            let first = first as usize;
            self.builder.position_at_end(block);
            let active = self
                .builder
                .build_load(self.i32t, active_slot, "active")
                .map_err(error)?
                .into_int_value();
            let allowance = self
                .builder
                .build_load(self.i32t, allowance_slot, "allowance")
                .map_err(error)?
                .into_int_value();
            let segment = &code[first..end];
            let inst = &code[first];
            if forms[first] == Form::Kernel {
                self.call(inst, regs, active, sink)?;
            } else if forms[first] == Form::Inline && matches!(inst.op, Op::Shfl { .. }) {
                self.shuffle(inst, regs, active)?;
            } else if forms[first] == Form::Interpreter || memory_access(inst) {
                let index = self.i32t.const_int(first as u64, false);
                // The allowance counts from the run's first instruction (the caller adds the
                // visible accesses before the entry).
                let ordinal = self
                    .i32t
                    .const_int(u64::from(visible_in(&code[..first])) + 1, false);
                if inst.visible {
                    // The interpreter stops before a visible access when none is left.
                    let spent = self
                        .builder
                        .build_int_compare(IntPredicate::ULT, allowance, ordinal, "spent")
                        .map_err(error)?;
                    self.leave_if(function, spent, index)?;
                }
                let pc = first_pc + first as u32;
                if forms[first] == Form::Interpreter {
                    self.interpret(&values, pc, active, function, index)?;
                } else if matches!(
                    inst.op,
                    Op::Ld {
                        space: Space::Shared,
                        ..
                    } | Op::St {
                        space: Space::Shared,
                        ..
                    } | Op::Atom {
                        space: Space::Shared,
                        ..
                    }
                ) {
                    // A shared access some lane of which fails the check faults: the run
                    // leaves before it, nothing of it done, for the interpreter to report.
                    let fault = self.check_access(inst, regs, active, &values)?;
                    self.leave_if(function, fault, index)?;
                    self.access(function, segment, regs, active, &values)?;
                } else {
                    // A host access is inline when every lane passes a check the interpreter
                    // makes (here changing nothing); otherwise the interpreter executes it,
                    // with whatever it does then (another range, a fault to report). The
                    // interpreter checks the lanes against its cached range, then against the
                    // recent range holding the first running lane's access: the range holding
                    // that lane's access, the cached one first, is the one either try can
                    // pass with. So a loop over a few arrays in turn stays inline, with one
                    // check of the lanes per access.
                    let lanes = self.access_lanes(inst, regs, active, &values)?;
                    let first = self.first_lane_access(&lanes, regs)?;
                    let (lo, hi) = self.first_range(&lanes, &values)?;
                    let cached = self.holds(lo, hi, &first)?;
                    let from = self
                        .builder
                        .get_insert_block()
                        .ok_or_else(|| error("no insertion block"))?;
                    let recent_block = self.ctx.append_basic_block(function, "recent");
                    let check_block = self.ctx.append_basic_block(function, "check");
                    let slow_block = self.ctx.append_basic_block(function, "slow");
                    let fast_block = self.ctx.append_basic_block(function, "fast");
                    let join = self.ctx.append_basic_block(function, "join");
                    self.builder
                        .build_conditional_branch(cached, check_block, recent_block)
                        .map_err(error)?;
                    self.builder.position_at_end(recent_block);
                    let (recent_lo, recent_hi) = self.recent_range(&first, &values)?;
                    let recent_end = self
                        .builder
                        .get_insert_block()
                        .ok_or_else(|| error("no insertion block"))?;
                    self.builder
                        .build_unconditional_branch(check_block)
                        .map_err(error)?;
                    self.builder.position_at_end(check_block);
                    let mut bounds = Vec::with_capacity(2);
                    for (cached, recent, name) in [(lo, recent_lo, "lo"), (hi, recent_hi, "hi")] {
                        let phi = self.builder.build_phi(self.i64t, name).map_err(error)?;
                        phi.add_incoming(&[(&cached, from), (&recent, recent_end)]);
                        bounds.push(phi.as_basic_value().into_int_value());
                    }
                    let slow = self.outside(&lanes, bounds[0], bounds[1], &values)?;
                    self.builder
                        .build_conditional_branch(slow, slow_block, fast_block)
                        .map_err(error)?;
                    self.builder.position_at_end(slow_block);
                    self.interpret(&values, pc, active, function, index)?;
                    self.builder
                        .build_unconditional_branch(join)
                        .map_err(error)?;
                    self.builder.position_at_end(fast_block);
                    self.access(function, segment, regs, active, &values)?;
                    self.builder
                        .build_unconditional_branch(join)
                        .map_err(error)?;
                    self.builder.position_at_end(join);
                }
                if inst.visible {
                    // ... and right after the one that uses up the allowance.
                    let last = self
                        .builder
                        .build_int_compare(IntPredicate::EQ, allowance, ordinal, "last")
                        .map_err(error)?;
                    self.leave_if(function, last, self.i32t.const_int(end as u64, false))?;
                }
            } else {
                self.group_loop(function, segment, regs, active, &values)?;
            }
            match (blocks.get(k + 1), back) {
                (Some(&next), _) => self
                    .builder
                    .build_unconditional_branch(next)
                    .map(|_| ())
                    .map_err(error)?,
                (None, Some((back, branch))) => {
                    let pass = self
                        .builder
                        .build_load(self.i32t, pass_slot, "pass")
                        .map_err(error)?
                        .into_int_value();
                    let round = Round {
                        context,
                        exec: values.exec,
                        active_slot,
                        pass_slot,
                        allowance_slot,
                        allowance,
                        visible: visible_in(code),
                        head: blocks[0],
                    };
                    let len = code.len() as u32;
                    self.go_round(function, back, branch, len, regs, active, pass, &round)?;
                }
                (None, None) => self
                    .builder
                    .build_return(Some(&self.i32t.const_int(code.len() as u64, false)))
                    .map(|_| ())
                    .map_err(error)?,
            }
        }
        Ok(())
    }

    /// The end of a loop's body of `len` instructions, `branch` after it (`back`): goes round
    /// from the run's first segment where the interpreter would (the lanes that go round are
    /// all of the pass's `active`, or some and `back.diverges`: then with those, after the
    /// interpreter's stack took the branch as it would, [`crate::exec::branch_for_native`]),
    /// the context's budget has room for the branches and a whole pass, and the allowance of
    /// visible accesses one left after the pass's (the next pass's allowance is less the
    /// run's visible accesses, its accesses' ordinals counting from the run's start again),
    /// counting in the context what the pass (started at instruction `pass`) and the branches
    /// executed, as the interpreter counts them; otherwise returns `len`, the interpreter then
    /// executing the branch.
    #[allow(clippy::too_many_arguments)]
    fn go_round(
        &self,
        function: FunctionValue<'ctx>,
        back: LoopBack,
        branch: &Inst,
        len: u32,
        regs: PointerValue<'ctx>,
        active: IntValue<'ctx>,
        pass: IntValue<'ctx>,
        round: &Round<'ctx>,
    ) -> Result<(), CompileError> {
        let b = &self.builder;
        let taken = self.warp_exec(branch, regs, active)?;
        let again = if back.round_when_taken {
            taken
        } else {
            let not_taken = b.build_not(taken, "not_taken").map_err(error)?;
            b.build_and(active, not_taken, "again").map_err(error)?
        };
        let branches = back.branches();
        let cost = self.i64t.const_int(u64::from(branches + len), false);
        let budget_ptr = self.context_field(round.context, Field::LoopBudget)?;
        let budget = b
            .build_load(self.i64t, budget_ptr, "loop_budget")
            .map_err(error)?
            .into_int_value();
        let enough = b
            .build_int_compare(IntPredicate::UGE, budget, cost, "enough")
            .map_err(error)?;
        let some = b
            .build_int_compare(IntPredicate::NE, again, self.i32t.const_zero(), "some")
            .map_err(error)?;
        let all = b
            .build_int_compare(IntPredicate::EQ, again, active, "all")
            .map_err(error)?;
        let mut go = b.build_and(enough, some, "go").map_err(error)?;
        // The interpreter takes the branches only with an access of the slice's allowance
        // left after the pass's (a pass that used up the allowance has left the run already,
        // right after the access that did).
        let left_after = b
            .build_int_sub(
                round.allowance,
                self.i32t.const_int(round.visible.into(), false),
                "left_after",
            )
            .map_err(error)?;
        if round.visible > 0 {
            let some_left = b
                .build_int_compare(
                    IntPredicate::UGT,
                    round.allowance,
                    self.i32t.const_int(round.visible.into(), false),
                    "some_left",
                )
                .map_err(error)?;
            go = b.build_and(go, some_left, "go").map_err(error)?;
        }
        if !back.diverges {
            go = b.build_and(go, all, "go").map_err(error)?;
        }
        let stop = b.build_not(go, "stop").map_err(error)?;
        self.leave_if(function, stop, self.i32t.const_int(len.into(), false))?;
        if back.diverges {
            let diverge = self.ctx.append_basic_block(function, "diverge");
            let join = self.ctx.append_basic_block(function, "join");
            b.build_conditional_branch(all, join, diverge)
                .map_err(error)?;
            b.position_at_end(diverge);
            let callee = self.host_pointer(
                crate::exec::branch_for_native as *const () as usize,
                "branch",
            )?;
            b.build_indirect_call(
                self.call_branch.get_type(),
                callee,
                &[
                    round.exec.into(),
                    self.i32t.const_int(back.branch.into(), false).into(),
                    active.into(),
                    taken.into(),
                ],
                "",
            )
            .map_err(error)?;
            b.build_unconditional_branch(join).map_err(error)?;
            b.position_at_end(join);
        }
        let left = b.build_int_sub(budget, cost, "left").map_err(error)?;
        b.build_store(budget_ptr, left).map_err(error)?;
        // The pass's instructions and the branches: each issued once by the warp, by the
        // pass's lanes, but `bra start` after `@p bra out` by the lanes that go round.
        let pass_len = b
            .build_int_sub(self.i32t.const_int(len.into(), false), pass, "pass_len")
            .map_err(error)?;
        let pass_len = b
            .build_int_z_extend(pass_len, self.i64t, "pass_len")
            .map_err(error)?;
        let warp = b
            .build_int_add(
                pass_len,
                self.i64t.const_int(branches.into(), false),
                "warp",
            )
            .map_err(error)?;
        let issued_by_pass = b
            .build_int_add(pass_len, self.i64t.const_int(1, false), "issued_by_pass")
            .map_err(error)?;
        let mut thread = b
            .build_int_mul(self.lanes_in(active)?, issued_by_pass, "thread")
            .map_err(error)?;
        if !back.round_when_taken {
            thread = b
                .build_int_add(thread, self.lanes_in(again)?, "thread")
                .map_err(error)?;
        }
        for (field, added) in [(Field::LoopedWarp, warp), (Field::LoopedThread, thread)] {
            self.add_to(self.context_field(round.context, field)?, added)?;
        }
        // The next pass's lanes and allowance, for the run's segments and for the context.
        for (field, slot, value) in [
            (Field::LoopedActive, round.active_slot, again),
            (Field::LoopedAllowance, round.allowance_slot, left_after),
        ] {
            b.build_store(slot, value).map_err(error)?;
            let wide = b
                .build_int_z_extend(value, self.i64t, "wide")
                .map_err(error)?;
            b.build_store(self.context_field(round.context, field)?, wide)
                .map_err(error)?;
        }
        b.build_store(round.pass_slot, self.i32t.const_zero())
            .map_err(error)?;
        b.build_unconditional_branch(round.head).map_err(error)?;
        Ok(())
    }

    /// `address`, of this process, as a pointer constant in the generated code (the native
    /// code runs in the process that generates it).
    fn host_pointer(&self, address: usize, name: &str) -> Result<PointerValue<'ctx>, CompileError> {
        self.builder
            .build_int_to_ptr(
                self.i64t.const_int(address as u64, false),
                self.ctx.ptr_type(AddressSpace::default()),
                name,
            )
            .map_err(error)
    }

    /// The address of `field` of the run's context.
    fn context_field(
        &self,
        context: PointerValue<'ctx>,
        field: Field,
    ) -> Result<PointerValue<'ctx>, CompileError> {
        // SAFETY: `RunContext` is `u64`s and pointers, 8 bytes each, in `Field`'s order.
        unsafe {
            self.builder.build_in_bounds_gep(
                self.i64t,
                context,
                &[self.i64t.const_int(field as u64, false)],
                "field",
            )
        }
        .map_err(error)
    }

    /// `*ptr += added` (`i64`).
    fn add_to(&self, ptr: PointerValue<'ctx>, added: IntValue<'ctx>) -> Result<(), CompileError> {
        let b = &self.builder;
        let old = b
            .build_load(self.i64t, ptr, "old")
            .map_err(error)?
            .into_int_value();
        let sum = b.build_int_add(old, added, "sum").map_err(error)?;
        b.build_store(ptr, sum).map(|_| ()).map_err(error)
    }

    /// The number of lanes set in `mask` (`i32`), as an `i64`.
    fn lanes_in(&self, mask: IntValue<'ctx>) -> Result<IntValue<'ctx>, CompileError> {
        let ctpop = self.intrinsic("llvm.ctpop", &[self.i32t.into()])?;
        let count = self
            .builder
            .build_call(ctpop, &[mask.into()], "lanes")
            .map_err(error)?
            .try_as_basic_value()
            .left()
            .ok_or_else(|| error("ctpop without a value"))?
            .into_int_value();
        self.builder
            .build_int_z_extend(count, self.i64t, "lanes")
            .map_err(error)
    }

    /// A memory access's segment (one instruction, its addresses checked): an atomic lane by
    /// lane, a load or store as a loop over lane groups.
    fn access(
        &self,
        function: FunctionValue<'ctx>,
        segment: &[Inst],
        regs: PointerValue<'ctx>,
        active: IntValue<'ctx>,
        values: &RunValues<'ctx>,
    ) -> Result<(), CompileError> {
        match segment {
            [inst] if matches!(inst.op, Op::Atom { .. }) => {
                self.atomic(function, inst, regs, active, values)
            }
            _ => self.group_loop(function, segment, regs, active, values),
        }
    }

    fn enum_attribute(&self, name: &str) -> Attribute {
        self.ctx
            .create_enum_attribute(Attribute::get_named_enum_kind_id(name), 0)
    }

    /// `code` (inline instructions only) as a loop over the warp's lane groups, skipping those
    /// without an active lane: they would change nothing (every inline instruction writes
    /// the lanes it runs in only), and a divergent loop's warp often has a few lanes left.
    fn group_loop(
        &self,
        function: FunctionValue<'ctx>,
        code: &[Inst],
        regs: PointerValue<'ctx>,
        active: IntValue<'ctx>,
        values: &RunValues<'ctx>,
    ) -> Result<(), CompileError> {
        let b = &self.builder;
        let e = error;
        let before = b
            .get_insert_block()
            .ok_or_else(|| error("no insertion block"))?;
        let head = self.ctx.append_basic_block(function, "group");
        let body = self.ctx.append_basic_block(function, "group_body");
        let latch = self.ctx.append_basic_block(function, "group_next");
        let after = self.ctx.append_basic_block(function, "after");
        b.build_unconditional_branch(head).map_err(e)?;
        b.position_at_end(head);
        let group = b.build_phi(self.i64t, "g").map_err(e)?;
        let g = group.as_basic_value().into_int_value();
        let first = b
            .build_int_mul(g, self.i64t.const_int(GROUP.into(), false), "first")
            .map_err(e)?;
        let shift = b.build_int_truncate(first, self.i32t, "shift").map_err(e)?;
        let shifted = b
            .build_right_shift(active, shift, false, "shifted")
            .map_err(e)?;
        let group_type = self.ctx.custom_width_int_type(GROUP);
        let bits = b
            .build_int_truncate(shifted, group_type, "bits")
            .map_err(e)?;
        let empty = b
            .build_int_compare(IntPredicate::EQ, bits, group_type.const_zero(), "empty")
            .map_err(e)?;
        b.build_conditional_branch(empty, latch, body).map_err(e)?;
        b.position_at_end(body);
        let group_active = b
            .build_bit_cast(bits, self.boolv(GROUP), "active")
            .map_err(e)?
            .into_vector_value();
        let lanes = GroupLanes {
            regs,
            first,
            active: group_active,
            context: values,
        };
        for inst in code {
            self.inline_instruction(inst, &lanes)?;
        }
        b.build_unconditional_branch(latch).map_err(e)?;
        b.position_at_end(latch);
        let next = b
            .build_int_add(g, self.i64t.const_int(1, false), "next")
            .map_err(e)?;
        let more = b
            .build_int_compare(
                IntPredicate::ULT,
                next,
                self.i64t.const_int((LANES / GROUP).into(), false),
                "more",
            )
            .map_err(e)?;
        b.build_conditional_branch(more, head, after).map_err(e)?;
        group.add_incoming(&[(&self.i64t.const_zero(), before), (&next, latch)]);
        b.position_at_end(after);
        Ok(())
    }

    /// Pointer to lane `first` of register `r`'s row.
    fn row_at(
        &self,
        regs: PointerValue<'ctx>,
        r: u32,
        first: IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>, CompileError> {
        let base = self.i64t.const_int(u64::from(r) * u64::from(LANES), false);
        let index = self
            .builder
            .build_int_add(base, first, "index")
            .map_err(error)?;
        // SAFETY: in bounds of the frame (registers checked by `translatable`, the frame's
        // size by the caller of the run; `first` + GROUP ≤ 32).
        unsafe {
            self.builder
                .build_in_bounds_gep(self.i64t, regs, &[index], "row")
        }
        .map_err(error)
    }

    fn load(&self, ptr: PointerValue<'ctx>, lanes: u32) -> Result<VectorValue<'ctx>, CompileError> {
        let value = self
            .builder
            .build_load(self.i64v(lanes), ptr, "r")
            .map_err(error)?;
        if let Some(inst) = value.as_instruction_value() {
            inst.set_alignment(8).map_err(error)?;
        }
        Ok(value.into_vector_value())
    }

    /// Stores `value` into the lanes of `exec` (a boolean vector) at `ptr`.
    fn store_lanes(
        &self,
        ptr: PointerValue<'ctx>,
        value: VectorValue<'ctx>,
        exec: VectorValue<'ctx>,
        lanes: u32,
    ) -> Result<(), CompileError> {
        let old = self.load(ptr, lanes)?;
        let merged = self
            .builder
            .build_select(exec, value, old, "merge")
            .map_err(error)?;
        let store = self.builder.build_store(ptr, merged).map_err(error)?;
        store.set_alignment(8).map_err(error)?;
        Ok(())
    }

    fn splat(&self, value: u64, lanes: u32) -> VectorValue<'ctx> {
        let lanes: Vec<_> = (0..lanes)
            .map(|_| self.i64t.const_int(value, false))
            .collect();
        VectorType::const_vector(&lanes)
    }

    fn splat32(&self, value: u32) -> VectorValue<'ctx> {
        let lanes: Vec<_> = (0..GROUP)
            .map(|_| self.i32t.const_int(u64::from(value), false))
            .collect();
        VectorType::const_vector(&lanes)
    }

    /// Source `src` of the group's lanes.
    fn group_source(
        &self,
        lanes: &GroupLanes<'_, 'ctx>,
        src: &Src,
    ) -> Result<VectorValue<'ctx>, CompileError> {
        let b = &self.builder;
        let e = error;
        let values = lanes.context;
        match *src {
            Src::Reg(r) => self.load(self.row_at(lanes.regs, r, lanes.first)?, GROUP),
            Src::Imm(v) => Ok(self.splat(v, GROUP)),
            Src::Special(Special::LaneId) => {
                let lane = b
                    .build_int_add(
                        self.splat_value(lanes.first, GROUP)?,
                        VectorType::const_vector(
                            &(0..GROUP)
                                .map(|i| self.i64t.const_int(i.into(), false))
                                .collect::<Vec<_>>(),
                        ),
                        "laneid",
                    )
                    .map_err(e)?;
                Ok(lane)
            }
            Src::Special(Special::Tid(d)) => {
                // `tid[lane][d]`: u32 at byte `lane * 12 + d * 4`.
                let d = u64::from(d.min(2));
                let lane = self.group_source(lanes, &Src::Special(Special::LaneId))?;
                let index = b
                    .build_int_add(
                        b.build_int_mul(lane, self.splat(3, GROUP), "tid3")
                            .map_err(e)?,
                        self.splat(d, GROUP),
                        "tid_index",
                    )
                    .map_err(e)?;
                let element = self.i32t.vec_type(GROUP);
                let ptr_vec = self.ctx.ptr_type(AddressSpace::default()).vec_type(GROUP);
                let base = b
                    .build_ptr_to_int(values.tid, self.i64t, "tid_base")
                    .map_err(e)?;
                let bytes = b
                    .build_int_mul(index, self.splat(4, GROUP), "tid_bytes")
                    .map_err(e)?;
                let at = b
                    .build_int_add(self.splat_value(base, GROUP)?, bytes, "tid_at")
                    .map_err(e)?;
                let pointers = b.build_int_to_ptr(at, ptr_vec, "tid_ptrs").map_err(e)?;
                let gather =
                    self.intrinsic("llvm.masked.gather", &[element.into(), ptr_vec.into()])?;
                let all = VectorType::const_vector(
                    &(0..GROUP)
                        .map(|_| self.ctx.bool_type().const_all_ones())
                        .collect::<Vec<_>>(),
                );
                let tid = b
                    .build_call(
                        gather,
                        &[
                            pointers.into(),
                            self.i32t.const_int(4, false).into(),
                            all.into(),
                            element.const_zero().into(),
                        ],
                        "tid",
                    )
                    .map_err(e)?
                    .try_as_basic_value()
                    .left()
                    .ok_or_else(|| error("gather without a value"))?
                    .into_vector_value();
                b.build_int_z_extend(tid, self.i64v(GROUP), "tid")
                    .map_err(e)
            }
            Src::Special(special) => {
                let index = UNIFORM_SPECIALS
                    .iter()
                    .position(|&s| s == special)
                    .ok_or_else(|| error("a special register without inline code"))?;
                // SAFETY: `specials` points to `UNIFORM_SPECIALS.len()` values.
                let at = unsafe {
                    b.build_in_bounds_gep(
                        self.i64t,
                        values.specials,
                        &[self.i64t.const_int(index as u64, false)],
                        "special",
                    )
                }
                .map_err(e)?;
                let v = b
                    .build_load(self.i64t, at, "special")
                    .map_err(e)?
                    .into_int_value();
                self.splat_value(v, GROUP)
            }
            Src::Shared { .. } => self.splat_value(self.shared_address(values, src)?, GROUP),
            _ => Err(error("a source without inline code")),
        }
    }

    /// The value of shared-variable source `src` (its offset in the window plus the
    /// source's own offset, wrapping: the interpreter's `read_other`).
    fn shared_address(
        &self,
        values: &RunValues<'ctx>,
        src: &Src,
    ) -> Result<IntValue<'ctx>, CompileError> {
        let Src::Shared { var, offset } = *src else {
            return Err(error("not a shared variable"));
        };
        let &(_, base) = values
            .shared_vars
            .iter()
            .find(|&&(v, _)| v == var)
            .ok_or_else(|| error("a shared variable not looked up"))?;
        self.builder
            .build_int_add(
                base,
                self.i64t.const_int(offset as u64, false),
                "shared_address",
            )
            .map_err(error)
    }

    /// Looks up, at the insertion point, the offset of each shared variable that the inline
    /// instructions of `code` name, as the interpreter's `read_other` does: the launch's offset
    /// of the variable, `u64::MAX` when it has none such.
    fn shared_offsets(
        &self,
        function: FunctionValue<'ctx>,
        code: &[Inst],
        forms: &[Form],
        offsets: PointerValue<'ctx>,
        len: IntValue<'ctx>,
    ) -> Result<Vec<(u32, IntValue<'ctx>)>, CompileError> {
        let mut vars = Vec::new();
        for (inst, &form) in code.iter().zip(forms) {
            if form == Form::Inline {
                inst.op.for_each_source(|src| {
                    if let Src::Shared { var, .. } = *src {
                        if !vars.contains(&var) {
                            vars.push(var);
                        }
                    }
                });
            }
        }
        let b = &self.builder;
        let e = error;
        let mut found = Vec::with_capacity(vars.len());
        for var in vars {
            let index = self.i64t.const_int(var.into(), false);
            let known = b
                .build_int_compare(IntPredicate::ULT, index, len, "known")
                .map_err(e)?;
            let before = b
                .get_insert_block()
                .ok_or_else(|| error("no insertion block"))?;
            let read = self.ctx.append_basic_block(function, "shared_offset");
            let join = self.ctx.append_basic_block(function, "shared_offset_join");
            b.build_conditional_branch(known, read, join).map_err(e)?;
            b.position_at_end(read);
            // SAFETY: `var` is below the array's length (checked above).
            let at =
                unsafe { b.build_in_bounds_gep(self.i64t, offsets, &[index], "at") }.map_err(e)?;
            let v = b
                .build_load(self.i64t, at, "shared_offset")
                .map_err(e)?
                .into_int_value();
            b.build_unconditional_branch(join).map_err(e)?;
            b.position_at_end(join);
            let phi = b.build_phi(self.i64t, "shared_offset").map_err(e)?;
            phi.add_incoming(&[(&v, read), (&self.i64t.const_all_ones(), before)]);
            found.push((var, phi.as_basic_value().into_int_value()));
        }
        Ok(found)
    }

    /// The group's lanes that run `inst`: active, and the guard holds.
    fn group_exec(
        &self,
        inst: &Inst,
        lanes: &GroupLanes<'_, 'ctx>,
    ) -> Result<VectorValue<'ctx>, CompileError> {
        if inst.guard == NO_REG {
            return Ok(lanes.active);
        }
        let b = &self.builder;
        let row = self.load(self.row_at(lanes.regs, inst.guard, lanes.first)?, GROUP)?;
        let holds = b
            .build_int_truncate(row, self.boolv(GROUP), "guard")
            .map_err(error)?;
        let holds = if inst.guard_negated {
            b.build_not(holds, "not").map_err(error)?
        } else {
            holds
        };
        b.build_and(lanes.active, holds, "exec").map_err(error)
    }

    /// Stores `value` into register `r` for the group's lanes of `exec` (nothing for `_`).
    fn group_store(
        &self,
        lanes: &GroupLanes<'_, 'ctx>,
        r: u32,
        value: VectorValue<'ctx>,
        exec: VectorValue<'ctx>,
    ) -> Result<(), CompileError> {
        if r == NO_REG {
            return Ok(());
        }
        self.store_lanes(self.row_at(lanes.regs, r, lanes.first)?, value, exec, GROUP)
    }

    fn inline_instruction(
        &self,
        inst: &Inst,
        lanes: &GroupLanes<'_, 'ctx>,
    ) -> Result<(), CompileError> {
        let exec = self.group_exec(inst, lanes)?;
        match &inst.op {
            Op::Mov { dst, src, mask } => {
                if *dst == NO_REG {
                    return Ok(());
                }
                let value = self.group_source(lanes, src)?;
                let value = self
                    .builder
                    .build_and(value, self.splat(*mask, GROUP), "mov")
                    .map_err(error)?;
                self.group_store(lanes, *dst, value, exec)
            }
            Op::Alu(alu) => match alu.op.lowered() {
                Some(lowered) => self.lowered(alu, lowered, lanes, exec),
                None => Err(error("an instruction without a lowered form inline")),
            },
            // `Exec`'s `cvta` with `uniform_window_base`.
            Op::Cvta {
                to_generic,
                space,
                dst,
                src,
            } => {
                if *dst == NO_REG {
                    return Ok(());
                }
                let value = self.group_source(lanes, src)?;
                let value = match window_base(*space, false) {
                    WindowBase::Zero => value,
                    WindowBase::Shared => {
                        let base = self.splat_value(lanes.context.shared_base, GROUP)?;
                        if *to_generic {
                            self.builder.build_int_add(value, base, "generic")
                        } else {
                            self.builder.build_int_sub(value, base, "shared")
                        }
                        .map_err(error)?
                    }
                    WindowBase::PerThread => {
                        return Err(error("a `cvta` of a per-thread window inline"))
                    }
                };
                self.group_store(lanes, *dst, value, exec)
            }
            Op::Ld {
                space,
                addr,
                dsts,
                count,
                ty,
            } => {
                // Checked for all lanes before the loop (`check_access`): every lane of
                // `exec` reads inside the window or cached range, aligned; the others read
                // nothing.
                let b = &self.builder;
                let e = error;
                let address = self.group_address(lanes, addr)?;
                let host = self.host_addresses(address, *space, lanes.context, GROUP)?;
                let element = self.ctx.custom_width_int_type(u32::from(ty.bytes) * 8);
                let element_vec = element.vec_type(GROUP);
                let ptr_vec = self.ctx.ptr_type(AddressSpace::default()).vec_type(GROUP);
                let gather =
                    self.intrinsic("llvm.masked.gather", &[element_vec.into(), ptr_vec.into()])?;
                for (i, &d) in dsts[..usize::from(*count)].iter().enumerate() {
                    if d == NO_REG {
                        continue;
                    }
                    let at = b
                        .build_int_add(
                            host,
                            self.splat(i as u64 * u64::from(ty.bytes), GROUP),
                            "at",
                        )
                        .map_err(e)?;
                    let pointers = b.build_int_to_ptr(at, ptr_vec, "ptrs").map_err(e)?;
                    let loaded = b
                        .build_call(
                            gather,
                            &[
                                pointers.into(),
                                self.i32t.const_int(ty.bytes.into(), false).into(),
                                exec.into(),
                                element_vec.const_zero().into(),
                            ],
                            "ld",
                        )
                        .map_err(e)?
                        .try_as_basic_value()
                        .left()
                        .ok_or_else(|| error("gather without a value"))?
                        .into_vector_value();
                    let value = if ty.bytes == 8 {
                        loaded
                    } else if ty.signed {
                        b.build_int_s_extend(loaded, self.i64v(GROUP), "sext")
                            .map_err(e)?
                    } else {
                        b.build_int_z_extend(loaded, self.i64v(GROUP), "zext")
                            .map_err(e)?
                    };
                    self.group_store(lanes, d, value, exec)?;
                }
                Ok(())
            }
            Op::St {
                space,
                addr,
                srcs,
                count,
                ty,
            } => {
                // Checked for all lanes before the loop, as loads. The lanes store in order
                // (`llvm.masked.scatter` orders overlapping lanes from the lowest, as the
                // interpreter's lane loop), and `wrote` is set when some stored element
                // differs from the memory it replaces, all compared before any is stored:
                // the same as comparing each just before its store (if none differs from the
                // memory before the stores, no store changes the memory; and conversely).
                let b = &self.builder;
                let e = error;
                let address = self.group_address(lanes, addr)?;
                let host = self.host_addresses(address, *space, lanes.context, GROUP)?;
                let element = self.ctx.custom_width_int_type(u32::from(ty.bytes) * 8);
                let element_vec = element.vec_type(GROUP);
                let ptr_vec = self.ctx.ptr_type(AddressSpace::default()).vec_type(GROUP);
                let gather =
                    self.intrinsic("llvm.masked.gather", &[element_vec.into(), ptr_vec.into()])?;
                let scatter =
                    self.intrinsic("llvm.masked.scatter", &[element_vec.into(), ptr_vec.into()])?;
                let align = self.i32t.const_int(ty.bytes.into(), false);
                let mut elements = Vec::with_capacity(usize::from(*count));
                let mut changed = None;
                for (i, src) in srcs[..usize::from(*count)].iter().enumerate() {
                    let value = self.group_source(lanes, src)?;
                    let value = b
                        .build_int_truncate(value, element_vec, "element")
                        .map_err(e)?;
                    let at = b
                        .build_int_add(
                            host,
                            self.splat(i as u64 * u64::from(ty.bytes), GROUP),
                            "at",
                        )
                        .map_err(e)?;
                    let pointers = b.build_int_to_ptr(at, ptr_vec, "ptrs").map_err(e)?;
                    let old = b
                        .build_call(
                            gather,
                            &[pointers.into(), align.into(), exec.into(), value.into()],
                            "old",
                        )
                        .map_err(e)?
                        .try_as_basic_value()
                        .left()
                        .ok_or_else(|| error("gather without a value"))?
                        .into_vector_value();
                    // Lanes off take their own value: equal.
                    let differs = b
                        .build_int_compare(IntPredicate::NE, old, value, "differs")
                        .map_err(e)?;
                    changed = Some(match changed {
                        None => differs,
                        Some(c) => b.build_or(c, differs, "changed").map_err(e)?,
                    });
                    elements.push((value, pointers));
                }
                for (value, pointers) in elements {
                    b.build_call(
                        scatter,
                        &[value.into(), pointers.into(), align.into(), exec.into()],
                        "",
                    )
                    .map_err(e)?;
                }
                if let Some(changed) = changed {
                    let bits = b
                        .build_bit_cast(changed, self.ctx.custom_width_int_type(GROUP), "changed")
                        .map_err(e)?
                        .into_int_value();
                    let any = b
                        .build_int_compare(
                            IntPredicate::NE,
                            bits,
                            bits.get_type().const_zero(),
                            "any",
                        )
                        .map_err(e)?;
                    let flag = self.ctx.i8_type();
                    let old = b
                        .build_load(flag, lanes.context.wrote, "wrote")
                        .map_err(e)?
                        .into_int_value();
                    let any = b.build_int_z_extend(any, flag, "any").map_err(e)?;
                    let wrote = b.build_or(old, any, "wrote").map_err(e)?;
                    b.build_store(lanes.context.wrote, wrote).map_err(e)?;
                }
                Ok(())
            }
            _ => Err(error("not a run instruction")),
        }
    }

    /// The lanes of the warp that run `inst` (`i32`): active, and bit 0 of the guard's row.
    fn warp_exec(
        &self,
        inst: &Inst,
        regs: PointerValue<'ctx>,
        active: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>, CompileError> {
        if inst.guard == NO_REG {
            return Ok(active);
        }
        let b = &self.builder;
        let bits = self.load(
            self.row_at(regs, inst.guard, self.i64t.const_zero())?,
            LANES,
        )?;
        let bools = b
            .build_int_truncate(bits, self.boolv(LANES), "guard")
            .map_err(error)?;
        let holds = b
            .build_bit_cast(bools, self.i32t, "holds")
            .map_err(error)?
            .into_int_value();
        let holds = if inst.guard_negated {
            b.build_not(holds, "not").map_err(error)?
        } else {
            holds
        };
        b.build_and(active, holds, "exec").map_err(error)
    }

    /// The lanes that run memory access `inst` (`i32`), their addresses and the access's size
    /// in bytes.
    fn access_lanes(
        &self,
        inst: &Inst,
        regs: PointerValue<'ctx>,
        active: IntValue<'ctx>,
        values: &RunValues<'ctx>,
    ) -> Result<AccessLanes<'ctx>, CompileError> {
        let (space, addr, total) = match &inst.op {
            Op::Ld {
                space,
                addr,
                count,
                ty,
                ..
            }
            | Op::St {
                space,
                addr,
                count,
                ty,
                ..
            } => (*space, addr, u64::from(ty.bytes) * u64::from(*count)),
            Op::Atom {
                space, addr, ty, ..
            } => (*space, addr, ty.bytes()),
            _ => return Err(error("an address check for another instruction")),
        };
        Ok(AccessLanes {
            space,
            total,
            atomic: matches!(inst.op, Op::Atom { .. }),
            exec: self.warp_exec(inst, regs, active)?,
            address: self.warp_address(regs, addr, values)?,
            addr: *addr,
        })
    }

    /// Whether some lane that runs memory access `inst` fails the interpreter's first check
    /// of its address (`Exec::lane_hosts`' first attempt, which changes nothing): the whole
    /// access inside the CTA's shared window (shared) or the warp's cached accessible range
    /// (host), and aligned to its size.
    fn check_access(
        &self,
        inst: &Inst,
        regs: PointerValue<'ctx>,
        active: IntValue<'ctx>,
        values: &RunValues<'ctx>,
    ) -> Result<IntValue<'ctx>, CompileError> {
        let lanes = self.access_lanes(inst, regs, active, values)?;
        let (lo, hi) = self.first_range(&lanes, values)?;
        self.outside(&lanes, lo, hi, values)
    }

    /// The range a memory access is checked against first: the CTA's shared window (as
    /// offsets), or the warp's cached accessible host range.
    fn first_range(
        &self,
        lanes: &AccessLanes<'ctx>,
        values: &RunValues<'ctx>,
    ) -> Result<(IntValue<'ctx>, IntValue<'ctx>), CompileError> {
        let b = &self.builder;
        match lanes.space {
            Space::Shared => Ok((self.i64t.const_zero(), values.shared_len)),
            Space::Host => Ok((
                b.build_load(self.i64t, values.accessible_lo, "lo")
                    .map_err(error)?
                    .into_int_value(),
                b.build_load(self.i64t, values.accessible_hi, "hi")
                    .map_err(error)?
                    .into_int_value(),
            )),
            Space::Local => Err(error("a local access inline")),
        }
    }

    /// The first running lane's access of a host access: its address, its end, and whether
    /// it wraps around the address space (then no range holds it).
    fn first_lane_access(
        &self,
        lanes: &AccessLanes<'ctx>,
        regs: PointerValue<'ctx>,
    ) -> Result<FirstAccess<'ctx>, CompileError> {
        let b = &self.builder;
        let e = error;
        // `& 31` keeps the index in the row whatever the mask (no lane runs: any lane's
        // address does, every lane then passing the check).
        let first = self.trailing_zeros(lanes.exec, false, "first")?;
        let first = b
            .build_and(first, self.i32t.const_int(31, false), "first")
            .map_err(e)?;
        let address = match lanes.addr.base {
            // The lane's register read again rather than the vector's element at a variable
            // index, which LLVM reads back from the vector stored on the stack (four 64-byte
            // stores before an 8-byte load, for each host access).
            Src::Reg(r) => {
                let lane = b.build_int_z_extend(first, self.i64t, "lane").map_err(e)?;
                let base = b
                    .build_load(self.i64t, self.row_at(regs, r, lane)?, "first_base")
                    .map_err(e)?
                    .into_int_value();
                b.build_int_add(
                    base,
                    self.i64t.const_int(lanes.addr.offset as u64, false),
                    "first_address",
                )
                .map_err(e)?
            }
            _ => b
                .build_extract_element(lanes.address, first, "first_address")
                .map_err(e)?
                .into_int_value(),
        };
        let total = self.i64t.const_int(lanes.total, false);
        let end = b.build_int_add(address, total, "end").map_err(e)?;
        let wraps = b
            .build_int_compare(IntPredicate::ULT, end, address, "wraps")
            .map_err(e)?;
        Ok(FirstAccess {
            address,
            end,
            wraps,
        })
    }

    /// Whether `[lo, hi)` holds the first running lane's access.
    fn holds(
        &self,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        first: &FirstAccess<'ctx>,
    ) -> Result<IntValue<'ctx>, CompileError> {
        let b = &self.builder;
        let e = error;
        let from_lo = b
            .build_int_compare(IntPredicate::UGE, first.address, lo, "from_lo")
            .map_err(e)?;
        let to_hi = b
            .build_int_compare(IntPredicate::ULE, first.end, hi, "to_hi")
            .map_err(e)?;
        let inside = b.build_and(from_lo, to_hi, "inside").map_err(e)?;
        let whole = b.build_not(first.wraps, "whole").map_err(e)?;
        b.build_and(inside, whole, "holds").map_err(e)
    }

    /// The host range a host access outside the cached one is checked against next, as the
    /// interpreter does (`Exec::lane_hosts`' second attempt): the first of the warp's recent
    /// ranges ([`RunContext::recent`]) that holds the first running lane's access, or an
    /// empty range when none does. Unlike the interpreter, the native code leaves the ranges
    /// where they are (the interpreter's next check looks there too): which of them is
    /// current changes no result, every one of them being accessible.
    fn recent_range(
        &self,
        first: &FirstAccess<'ctx>,
        values: &RunValues<'ctx>,
    ) -> Result<(IntValue<'ctx>, IntValue<'ctx>), CompileError> {
        let b = &self.builder;
        let e = error;
        let (address, end, wraps) = (first.address, first.end, first.wraps);
        // The ranges as two vectors (`recent` is `lo, hi` pairs), tested at once; the first
        // that holds the access wins, as in `Warp::promote_recent`.
        let n = crate::warp::RECENT_RANGES as u32;
        let pairs = b
            .build_load(self.i64v(2 * n), values.recent, "recent")
            .map_err(e)?
            .into_vector_value();
        if let Some(load) = pairs.as_instruction_value() {
            load.set_alignment(8).map_err(error)?;
        }
        let picks = |odd: u64| {
            VectorType::const_vector(
                &(0..u64::from(n))
                    .map(|i| self.i32t.const_int(2 * i + odd, false))
                    .collect::<Vec<_>>(),
            )
        };
        let undef = self.i64v(2 * n).get_undef();
        let los = b
            .build_shuffle_vector(pairs, undef, picks(0), "los")
            .map_err(e)?;
        let his = b
            .build_shuffle_vector(pairs, undef, picks(1), "his")
            .map_err(e)?;
        let from_lo = b
            .build_int_compare(
                IntPredicate::UGE,
                self.splat_value(address, n)?,
                los,
                "from_lo",
            )
            .map_err(e)?;
        let to_hi = b
            .build_int_compare(IntPredicate::ULE, self.splat_value(end, n)?, his, "to_hi")
            .map_err(e)?;
        let holds = b.build_and(from_lo, to_hi, "holds").map_err(e)?;
        let bits = b
            .build_bit_cast(holds, self.ctx.custom_width_int_type(n), "holds")
            .map_err(e)?
            .into_int_value();
        let bits = b.build_int_z_extend(bits, self.i32t, "holds").map_err(e)?;
        let none = b
            .build_int_compare(IntPredicate::EQ, bits, self.i32t.const_zero(), "none")
            .map_err(e)?;
        let none = b.build_or(none, wraps, "none").map_err(e)?;
        let index = self.trailing_zeros(bits, false, "index")?;
        // In the vector whatever `bits` (none: `index` is 32, and the result is not used).
        let index = b
            .build_and(index, self.i32t.const_int(u64::from(n - 1), false), "index")
            .map_err(e)?;
        let zero = self.i64t.const_zero();
        let mut bounds = Vec::with_capacity(2);
        for (v, name) in [(los, "lo"), (his, "hi")] {
            let found = b
                .build_extract_element(v, index, name)
                .map_err(e)?
                .into_int_value();
            bounds.push(
                b.build_select(none, zero, found, name)
                    .map_err(e)?
                    .into_int_value(),
            );
        }
        let (lo, hi) = (bounds[0], bounds[1]);
        Ok((lo, hi))
    }

    /// Whether some running lane of an access fails the interpreter's check against the range
    /// `[lo, hi)` (offsets in the shared window, or host addresses): the whole access inside,
    /// aligned to its size (and a host atomic outside the CTA's shared and local windows).
    fn outside(
        &self,
        lanes: &AccessLanes<'ctx>,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        values: &RunValues<'ctx>,
    ) -> Result<IntValue<'ctx>, CompileError> {
        let b = &self.builder;
        let e = error;
        let (space, total, address) = (lanes.space, lanes.total, lanes.address);
        // `lo <= address <= hi - total`, none when the range is smaller than the access.
        let too_small = b
            .build_int_compare(
                IntPredicate::ULT,
                hi,
                self.i64t.const_int(total, false),
                "too_small",
            )
            .map_err(e)?;
        let last = b
            .build_int_sub(hi, self.i64t.const_int(total, false), "last")
            .map_err(e)?;
        let below = b
            .build_int_compare(
                IntPredicate::ULT,
                address,
                self.splat_value(lo, LANES)?,
                "below",
            )
            .map_err(e)?;
        let above = b
            .build_int_compare(
                IntPredicate::UGT,
                address,
                self.splat_value(last, LANES)?,
                "above",
            )
            .map_err(e)?;
        let host = self.host_addresses(address, space, values, LANES)?;
        let misaligned_bits = b
            .build_and(host, self.splat(total - 1, LANES), "misaligned")
            .map_err(e)?;
        let misaligned = b
            .build_int_compare(
                IntPredicate::NE,
                misaligned_bits,
                self.splat(0, LANES),
                "misaligned",
            )
            .map_err(e)?;
        let bad = b.build_or(below, above, "bad").map_err(e)?;
        let bad = b.build_or(bad, misaligned, "bad").map_err(e)?;
        let bad = if lanes.atomic && space == Space::Host {
            // A generic atomic in the CTA's shared or local windows (which the cached range
            // may be) is a private one to the interpreter, not locked and not counted as
            // global: the interpreter's. (`host - base < len`, unsigned: inside.)
            let mut bad = bad;
            for (base, len, name) in [
                (values.shared_base, values.shared_len, "in_shared"),
                (values.local_base, values.local_len, "in_local"),
            ] {
                let from = b
                    .build_int_sub(host, self.splat_value(base, LANES)?, name)
                    .map_err(e)?;
                let inside = b
                    .build_int_compare(IntPredicate::ULT, from, self.splat_value(len, LANES)?, name)
                    .map_err(e)?;
                bad = b.build_or(bad, inside, "bad").map_err(e)?;
            }
            bad
        } else {
            bad
        };
        let bad = b
            .build_bit_cast(bad, self.i32t, "bad")
            .map_err(e)?
            .into_int_value();
        let all = self.i32t.const_all_ones();
        let bad = b
            .build_select(too_small, all, bad, "bad")
            .map_err(e)?
            .into_int_value();
        let bad = b.build_and(bad, lanes.exec, "bad").map_err(e)?;
        b.build_int_compare(IntPredicate::NE, bad, self.i32t.const_zero(), "slow")
            .map_err(e)
    }

    /// `v` in each of `lanes` lanes.
    fn splat_value(
        &self,
        v: IntValue<'ctx>,
        lanes: u32,
    ) -> Result<VectorValue<'ctx>, CompileError> {
        let b = &self.builder;
        let undef = self.i64v(lanes).get_undef();
        let one = b
            .build_insert_element(undef, v, self.i32t.const_zero(), "one")
            .map_err(error)?;
        let zeros = self.i32t.vec_type(lanes).const_zero();
        b.build_shuffle_vector(one, undef, zeros, "splat")
            .map_err(error)
    }

    /// The address operand `addr` of all 32 lanes (a register base, or a kernel parameter's
    /// host address).
    fn warp_address(
        &self,
        regs: PointerValue<'ctx>,
        addr: &Addr,
        values: &RunValues<'ctx>,
    ) -> Result<VectorValue<'ctx>, CompileError> {
        let base = match addr.base {
            Src::Reg(r) => self.load(self.row_at(regs, r, self.i64t.const_zero())?, LANES)?,
            Src::KernelParam(offset) => self.param_address(values, offset, LANES)?,
            Src::Shared { .. } => {
                self.splat_value(self.shared_address(values, &addr.base)?, LANES)?
            }
            _ => return Err(error("an address neither register nor parameter")),
        };
        self.builder
            .build_int_add(base, self.splat(addr.offset as u64, LANES), "address")
            .map_err(error)
    }

    /// The address operand `addr` of the group's lanes.
    fn group_address(
        &self,
        lanes: &GroupLanes<'_, 'ctx>,
        addr: &Addr,
    ) -> Result<VectorValue<'ctx>, CompileError> {
        let base = match addr.base {
            Src::Reg(r) => self.load(self.row_at(lanes.regs, r, lanes.first)?, GROUP)?,
            Src::KernelParam(offset) => self.param_address(lanes.context, offset, GROUP)?,
            _ => return Err(error("an address neither register nor parameter")),
        };
        self.builder
            .build_int_add(base, self.splat(addr.offset as u64, GROUP), "address")
            .map_err(error)
    }

    /// The host address of the kernel parameter at `offset`, in each of `lanes` lanes (as the
    /// interpreter reads `Src::KernelParam`: wrapping).
    fn param_address(
        &self,
        values: &RunValues<'ctx>,
        offset: i64,
        lanes: u32,
    ) -> Result<VectorValue<'ctx>, CompileError> {
        let at = self
            .builder
            .build_int_add(
                values.params,
                self.i64t.const_int(offset as u64, false),
                "param",
            )
            .map_err(error)?;
        self.splat_value(at, lanes)
    }

    /// Host addresses of `address` (lanes of `lanes`) in `space`: offsets in the shared window,
    /// host addresses as they are.
    fn host_addresses(
        &self,
        address: VectorValue<'ctx>,
        space: Space,
        values: &RunValues<'ctx>,
        lanes: u32,
    ) -> Result<VectorValue<'ctx>, CompileError> {
        match space {
            Space::Shared => self
                .builder
                .build_int_add(
                    address,
                    self.splat_value(values.shared_base, lanes)?,
                    "host",
                )
                .map_err(error),
            Space::Host => Ok(address),
            Space::Local => Err(error("a local access inline")),
        }
    }

    /// The declaration of LLVM intrinsic `name` for `types`.
    fn intrinsic(
        &self,
        name: &str,
        types: &[inkwell::types::BasicTypeEnum<'ctx>],
    ) -> Result<FunctionValue<'ctx>, CompileError> {
        inkwell::intrinsics::Intrinsic::find(name)
            .ok_or_else(|| error(format!("no {name}")))?
            .get_declaration(self.module, types)
            .ok_or_else(|| error(format!("no {name} for these types")))
    }

    /// The trailing zero bits of `value` (`i32`, `llvm.cttz`); with `zero_is_poison`, a zero
    /// `value` gives poison rather than 32.
    fn trailing_zeros(
        &self,
        value: IntValue<'ctx>,
        zero_is_poison: bool,
        name: &str,
    ) -> Result<IntValue<'ctx>, CompileError> {
        let cttz = self.intrinsic("llvm.cttz", &[self.i32t.into()])?;
        let poison = self
            .ctx
            .bool_type()
            .const_int(u64::from(zero_is_poison), false);
        Ok(self
            .builder
            .build_call(cttz, &[value.into(), poison.into()], name)
            .map_err(error)?
            .try_as_basic_value()
            .left()
            .ok_or_else(|| error("cttz without a value"))?
            .into_int_value())
    }

    /// Returns `done` from the run when `condition` holds; continues in a new block otherwise.
    fn leave_if(
        &self,
        function: FunctionValue<'ctx>,
        condition: IntValue<'ctx>,
        done: IntValue<'ctx>,
    ) -> Result<(), CompileError> {
        let b = &self.builder;
        let leave = self.ctx.append_basic_block(function, "leave");
        let go = self.ctx.append_basic_block(function, "go");
        b.build_conditional_branch(condition, leave, go)
            .map_err(error)?;
        b.position_at_end(leave);
        b.build_return(Some(&done)).map_err(error)?;
        b.position_at_end(go);
        Ok(())
    }

    /// Instruction `pc` of the function executed by the interpreter; a failure leaves the run
    /// returning `index` (the interpreter keeps the error for the run loop).
    fn interpret(
        &self,
        values: &RunValues<'ctx>,
        pc: u32,
        active: IntValue<'ctx>,
        function: FunctionValue<'ctx>,
        index: IntValue<'ctx>,
    ) -> Result<(), CompileError> {
        let b = &self.builder;
        let callee =
            self.host_pointer(crate::exec::interpret_for_native() as usize, "interpret")?;
        let failed = b
            .build_indirect_call(
                self.call_interpreter.get_type(),
                callee,
                &[
                    values.exec.into(),
                    self.i32t.const_int(pc.into(), false).into(),
                    active.into(),
                ],
                "failed",
            )
            .map_err(error)?
            .try_as_basic_value()
            .left()
            .ok_or_else(|| error("call without a value"))?
            .into_int_value();
        let failed = b
            .build_int_compare(IntPredicate::NE, failed, self.i32t.const_zero(), "failed")
            .map_err(error)?;
        self.leave_if(function, failed, index)
    }

    /// `shfl` with immediate `b` and `c` (a segment of its own): every lane's source lane and
    /// predicate are constants ([`crate::exec::shuffle_source`], the interpreter's), so the
    /// result is a permutation of `a`'s whole row (inactive lanes' values included, as the
    /// interpreter reads them), stored into the lanes that run.
    fn shuffle(
        &self,
        inst: &Inst,
        regs: PointerValue<'ctx>,
        active: IntValue<'ctx>,
    ) -> Result<(), CompileError> {
        let Op::Shfl {
            mode,
            dst,
            dst_pred,
            a: Src::Reg(a),
            b: Src::Imm(b),
            c: Src::Imm(c),
        } = inst.op
        else {
            return Err(error("a `shfl` without immediate lane operands inline"));
        };
        let zero = self.i64t.const_zero();
        let exec = self.warp_exec(inst, regs, active)?;
        let exec = self
            .builder
            .build_bit_cast(exec, self.boolv(LANES), "lanes")
            .map_err(error)?
            .into_vector_value();
        let picks: Vec<(usize, bool)> = (0..LANES as usize)
            .map(|lane| crate::exec::shuffle_source(mode, lane, b, c))
            .collect();
        if dst != NO_REG {
            let values = self.load(self.row_at(regs, a, zero)?, LANES)?;
            let mask = VectorType::const_vector(
                &picks
                    .iter()
                    .map(|&(source, _)| self.i32t.const_int(source as u64, false))
                    .collect::<Vec<_>>(),
            );
            let results = self
                .builder
                .build_shuffle_vector(values, values, mask, "shfl")
                .map_err(error)?;
            self.store_lanes(self.row_at(regs, dst, zero)?, results, exec, LANES)?;
        }
        if dst_pred != NO_REG {
            let valid = VectorType::const_vector(
                &picks
                    .iter()
                    .map(|&(_, ok)| self.i64t.const_int(u64::from(ok), false))
                    .collect::<Vec<_>>(),
            );
            self.store_lanes(self.row_at(regs, dst_pred, zero)?, valid, exec, LANES)?;
        }
        Ok(())
    }

    /// `atom` or `red` of an integer type (a segment of its own, every running lane's address
    /// checked): lane by lane from the lowest, as the interpreter executes them, so that lanes
    /// at one address see each other's effects in its order and each lane of an `atom` gets
    /// the old value the interpreter's would. In the shared window a plain read-modify-write
    /// (`memory::atomic_private`: the CTA's worker alone touches the window); on host memory
    /// a locked one, sequentially consistent as `memory::atomic`, each lane counted in
    /// `global_atomics` (the check left the shared and local windows to the interpreter). An
    /// `atom` sets `wrote` when the memory after a lane's operation differs from the old
    /// value, as the interpreter's does (a `red` does not).
    fn atomic(
        &self,
        function: FunctionValue<'ctx>,
        inst: &Inst,
        regs: PointerValue<'ctx>,
        active: IntValue<'ctx>,
        values: &RunValues<'ctx>,
    ) -> Result<(), CompileError> {
        let Op::Atom {
            space,
            addr,
            op,
            ty,
            dst,
            b: b_src,
            c: c_src,
        } = inst.op
        else {
            return Err(error("an atomic expected"));
        };
        let b = &self.builder;
        let e = error;
        let bytes = ty.bytes();
        let width = self.ctx.custom_width_int_type((bytes * 8) as u32);
        let bool_t = self.ctx.bool_type();
        let exec = self.warp_exec(inst, regs, active)?;
        let before = b
            .get_insert_block()
            .ok_or_else(|| error("no insertion block"))?;
        let header = self.ctx.append_basic_block(function, "atom_lane");
        let body = self.ctx.append_basic_block(function, "atom_body");
        let done = self.ctx.append_basic_block(function, "atom_done");
        b.build_unconditional_branch(header).map_err(e)?;
        b.position_at_end(header);
        let lanes_left = b.build_phi(self.i32t, "lanes_left").map_err(e)?;
        let changed = b.build_phi(bool_t, "changed").map_err(e)?;
        let m = lanes_left.as_basic_value().into_int_value();
        let more = b
            .build_int_compare(IntPredicate::NE, m, self.i32t.const_zero(), "more")
            .map_err(e)?;
        b.build_conditional_branch(more, body, done).map_err(e)?;
        b.position_at_end(body);
        let lane = self.trailing_zeros(m, true, "lane")?;
        let rest = b
            .build_and(
                m,
                b.build_int_sub(m, self.i32t.const_int(1, false), "m1")
                    .map_err(e)?,
                "rest",
            )
            .map_err(e)?;
        let lane = b.build_int_z_extend(lane, self.i64t, "lane").map_err(e)?;
        let base = self.lane_value(regs, lane, &addr.base, values)?;
        let address = b
            .build_int_add(
                base,
                self.i64t.const_int(addr.offset as u64, false),
                "address",
            )
            .map_err(e)?;
        let host = match space {
            Space::Shared => b
                .build_int_add(address, values.shared_base, "host")
                .map_err(e)?,
            Space::Host => address,
            Space::Local => return Err(error("a local atomic inline")),
        };
        let ptr = b
            .build_int_to_ptr(host, self.ctx.ptr_type(AddressSpace::default()), "at")
            .map_err(e)?;
        let operand = |src: &Src, name: &str| -> Result<IntValue<'ctx>, CompileError> {
            let v = self.lane_value(regs, lane, src, values)?;
            b.build_int_truncate_or_bit_cast(v, width, name).map_err(e)
        };
        let bv = operand(&b_src, "b")?;
        let cv = operand(&c_src, "c")?;
        let align = bytes as u32;
        let (old, after) = match space {
            Space::Shared => {
                let load = b.build_load(width, ptr, "old").map_err(e)?;
                if let Some(i) = load.as_instruction_value() {
                    i.set_alignment(align).map_err(error)?;
                }
                let old = load.into_int_value();
                let new = self.atom_updated(op, ty, old, bv, cv)?;
                b.build_store(ptr, new)
                    .map_err(e)?
                    .set_alignment(align)
                    .map_err(error)?;
                (old, new)
            }
            _ => {
                let old = self.locked(function, op, ty, ptr, bv, cv)?;
                // The interpreter reads the memory back after the operation (relaxed).
                let after = b.build_load(width, ptr, "after").map_err(e)?;
                if let Some(i) = after.as_instruction_value() {
                    i.set_alignment(align).map_err(error)?;
                    i.set_atomic_ordering(AtomicOrdering::Monotonic)
                        .map_err(error)?;
                }
                (old, after.into_int_value())
            }
        };
        let changed_here = if dst == NO_REG {
            changed.as_basic_value().into_int_value()
        } else {
            let result = if ty == AtomType::S32 {
                b.build_int_s_extend(old, self.i64t, "old").map_err(e)?
            } else {
                b.build_int_z_extend_or_bit_cast(old, self.i64t, "old")
                    .map_err(e)?
            };
            let index = b
                .build_int_add(
                    self.i64t
                        .const_int(u64::from(dst) * u64::from(LANES), false),
                    lane,
                    "index",
                )
                .map_err(e)?;
            // SAFETY: in the frame (registers checked by `translatable`, lane below 32).
            let at =
                unsafe { b.build_in_bounds_gep(self.i64t, regs, &[index], "dst") }.map_err(e)?;
            b.build_store(at, result).map_err(e)?;
            let differs = b
                .build_int_compare(IntPredicate::NE, after, old, "differs")
                .map_err(e)?;
            b.build_or(
                changed.as_basic_value().into_int_value(),
                differs,
                "changed",
            )
            .map_err(e)?
        };
        let end = b
            .get_insert_block()
            .ok_or_else(|| error("no insertion block"))?;
        b.build_unconditional_branch(header).map_err(e)?;
        lanes_left.add_incoming(&[(&exec, before), (&rest, end)]);
        changed.add_incoming(&[(&bool_t.const_zero(), before), (&changed_here, end)]);
        b.position_at_end(done);
        if dst != NO_REG {
            let flag = self.ctx.i8_type();
            let old = b
                .build_load(flag, values.wrote, "wrote")
                .map_err(e)?
                .into_int_value();
            let any = b
                .build_int_z_extend(changed.as_basic_value().into_int_value(), flag, "any")
                .map_err(e)?;
            let wrote = b.build_or(old, any, "wrote").map_err(e)?;
            b.build_store(values.wrote, wrote).map_err(e)?;
        }
        if space == Space::Host {
            self.add_to(values.global_atomics, self.lanes_in(exec)?)?;
        }
        Ok(())
    }

    /// Lane `lane`'s (`i64`) value of `src`: a register, an immediate or a shared variable's
    /// address.
    fn lane_value(
        &self,
        regs: PointerValue<'ctx>,
        lane: IntValue<'ctx>,
        src: &Src,
        values: &RunValues<'ctx>,
    ) -> Result<IntValue<'ctx>, CompileError> {
        match *src {
            Src::Reg(r) => {
                let ptr = self.row_at(regs, r, lane)?;
                Ok(self
                    .builder
                    .build_load(self.i64t, ptr, "v")
                    .map_err(error)?
                    .into_int_value())
            }
            Src::Imm(v) => Ok(self.i64t.const_int(v, false)),
            Src::Shared { .. } => self.shared_address(values, src),
            _ => Err(error("an atomic operand without inline code")),
        }
    }

    /// The value `op` of type `ty` leaves in memory that held `old` (`memory::updated`'s
    /// integer cases; the operands of the type's width).
    fn atom_updated(
        &self,
        op: AtomOp,
        ty: AtomType,
        old: IntValue<'ctx>,
        bv: IntValue<'ctx>,
        cv: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>, CompileError> {
        let b = &self.builder;
        let e = error;
        let signed = matches!(ty, AtomType::S32 | AtomType::S64);
        let t = old.get_type();
        let pick = |predicate: IntPredicate, name: &str| -> Result<IntValue<'ctx>, CompileError> {
            let keep = b.build_int_compare(predicate, old, bv, name).map_err(e)?;
            Ok(b.build_select(keep, old, bv, name)
                .map_err(e)?
                .into_int_value())
        };
        Ok(match op {
            AtomOp::Add => b.build_int_add(old, bv, "add").map_err(e)?,
            AtomOp::Min if signed => pick(IntPredicate::SLT, "min")?,
            AtomOp::Min => pick(IntPredicate::ULT, "min")?,
            AtomOp::Max if signed => pick(IntPredicate::SGT, "max")?,
            AtomOp::Max => pick(IntPredicate::UGT, "max")?,
            AtomOp::Inc => {
                let wraps = b
                    .build_int_compare(IntPredicate::UGE, old, bv, "wraps")
                    .map_err(e)?;
                let next = b
                    .build_int_add(old, t.const_int(1, false), "next")
                    .map_err(e)?;
                b.build_select(wraps, t.const_zero(), next, "inc")
                    .map_err(e)?
                    .into_int_value()
            }
            AtomOp::Dec => {
                let zero = b
                    .build_int_compare(IntPredicate::EQ, old, t.const_zero(), "zero")
                    .map_err(e)?;
                let above = b
                    .build_int_compare(IntPredicate::UGT, old, bv, "above")
                    .map_err(e)?;
                let reload = b.build_or(zero, above, "reload").map_err(e)?;
                let next = b
                    .build_int_sub(old, t.const_int(1, false), "next")
                    .map_err(e)?;
                b.build_select(reload, bv, next, "dec")
                    .map_err(e)?
                    .into_int_value()
            }
            AtomOp::And => b.build_and(old, bv, "and").map_err(e)?,
            AtomOp::Or => b.build_or(old, bv, "or").map_err(e)?,
            AtomOp::Xor => b.build_xor(old, bv, "xor").map_err(e)?,
            AtomOp::Exch => bv,
            AtomOp::Cas => {
                let equal = b
                    .build_int_compare(IntPredicate::EQ, old, bv, "equal")
                    .map_err(e)?;
                b.build_select(equal, cv, old, "cas")
                    .map_err(e)?
                    .into_int_value()
            }
        })
    }

    /// `op` of type `ty` at `ptr` as one locked operation, sequentially consistent (as
    /// `memory::atomic`): LLVM's `atomicrmw` where it has the operation, `cmpxchg` for `cas`,
    /// a `cmpxchg` loop over [`Self::atom_updated`] for `inc` and `dec` (as the interpreter's
    /// `fetch_update`). Returns the old value.
    fn locked(
        &self,
        function: FunctionValue<'ctx>,
        op: AtomOp,
        ty: AtomType,
        ptr: PointerValue<'ctx>,
        bv: IntValue<'ctx>,
        cv: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>, CompileError> {
        let b = &self.builder;
        let e = error;
        let order = AtomicOrdering::SequentiallyConsistent;
        let signed = matches!(ty, AtomType::S32 | AtomType::S64);
        let rmw = match op {
            AtomOp::Add => Some(AtomicRMWBinOp::Add),
            AtomOp::Min if signed => Some(AtomicRMWBinOp::Min),
            AtomOp::Min => Some(AtomicRMWBinOp::UMin),
            AtomOp::Max if signed => Some(AtomicRMWBinOp::Max),
            AtomOp::Max => Some(AtomicRMWBinOp::UMax),
            AtomOp::And => Some(AtomicRMWBinOp::And),
            AtomOp::Or => Some(AtomicRMWBinOp::Or),
            AtomOp::Xor => Some(AtomicRMWBinOp::Xor),
            AtomOp::Exch => Some(AtomicRMWBinOp::Xchg),
            AtomOp::Inc | AtomOp::Dec | AtomOp::Cas => None,
        };
        if let Some(rmw) = rmw {
            return b.build_atomicrmw(rmw, ptr, bv, order).map_err(e);
        }
        let exchange = |expected: IntValue<'ctx>,
                        new: IntValue<'ctx>|
         -> Result<(IntValue<'ctx>, IntValue<'ctx>), CompileError> {
            let pair = b
                .build_cmpxchg(ptr, expected, new, order, order)
                .map_err(e)?;
            let seen = b
                .build_extract_value(pair, 0, "seen")
                .map_err(e)?
                .into_int_value();
            let ok = b
                .build_extract_value(pair, 1, "ok")
                .map_err(e)?
                .into_int_value();
            Ok((seen, ok))
        };
        if op == AtomOp::Cas {
            return Ok(exchange(bv, cv)?.0);
        }
        // inc, dec: from a relaxed read, retried until no other thread came between.
        let first = b.build_load(bv.get_type(), ptr, "first").map_err(e)?;
        if let Some(i) = first.as_instruction_value() {
            i.set_alignment(bv.get_type().get_bit_width() / 8)
                .map_err(error)?;
            i.set_atomic_ordering(AtomicOrdering::Monotonic)
                .map_err(error)?;
        }
        let before = b
            .get_insert_block()
            .ok_or_else(|| error("no insertion block"))?;
        let retry = self.ctx.append_basic_block(function, "cas_retry");
        let after = self.ctx.append_basic_block(function, "cas_done");
        b.build_unconditional_branch(retry).map_err(e)?;
        b.position_at_end(retry);
        let current = b.build_phi(bv.get_type(), "current").map_err(e)?;
        let cur = current.as_basic_value().into_int_value();
        let new = self.atom_updated(op, ty, cur, bv, cv)?;
        let (seen, ok) = exchange(cur, new)?;
        current.add_incoming(&[(&first.into_int_value(), before), (&seen, retry)]);
        b.build_conditional_branch(ok, after, retry).map_err(e)?;
        b.position_at_end(after);
        Ok(seen)
    }

    /// An instruction through its interpreter kernel, on the whole warp.
    fn call(
        &self,
        inst: &Inst,
        regs: PointerValue<'ctx>,
        active: IntValue<'ctx>,
        sink: PointerValue<'ctx>,
    ) -> Result<(), CompileError> {
        let Op::Alu(alu) = &inst.op else {
            return Err(error("a kernel call for a non-ALU instruction"));
        };
        let b = &self.builder;
        let zero = self.i64t.const_zero();
        let row = |r: u32| self.row_at(regs, r, zero);
        let exec = self.warp_exec(inst, regs, active)?;
        let address = |p: usize| self.host_pointer(p, "p");
        let count = usize::from(alu.count);
        let mut immediates = alu.immediates.iter();
        // Unused source slots: any readable row (the kernel does not read them).
        let mut sources = [sink; 4];
        for (i, src) in alu.srcs[..count].iter().enumerate() {
            sources[i] = match *src {
                Src::Reg(r) => row(r)?,
                Src::Imm(_) => {
                    let lanes = immediates
                        .next()
                        .ok_or_else(|| error("an immediate without its row"))?;
                    // The row lives in the decoded instruction, which outlives the code.
                    address(lanes.as_ptr() as usize)?
                }
                _ => return Err(error("source neither register nor immediate")),
            };
        }
        let dst = if alu.dst == NO_REG {
            sink
        } else {
            row(alu.dst)?
        };
        // The kernel lives in the decoded instruction (boxed), which outlives the code.
        let kernel = address(&alu.kernel as *const WarpKernel as usize)?;
        let callee = address(call_warp_kernel as *const () as usize)?;
        let second = b
            .build_indirect_call(
                self.call_kernel.get_type(),
                callee,
                &[
                    kernel.into(),
                    sources[0].into(),
                    sources[1].into(),
                    sources[2].into(),
                    sources[3].into(),
                    exec.into(),
                    dst.into(),
                ],
                "second",
            )
            .map_err(error)?
            .try_as_basic_value()
            .left()
            .ok_or_else(|| error("call without a value"))?
            .into_int_value();
        if alu.second != NO_REG {
            let bits = b
                .build_bit_cast(second, self.boolv(LANES), "bits")
                .map_err(error)?
                .into_vector_value();
            let values = b
                .build_int_z_extend(bits, self.i64v(LANES), "second")
                .map_err(error)?;
            let exec = b
                .build_bit_cast(exec, self.boolv(LANES), "lanes")
                .map_err(error)?
                .into_vector_value();
            self.store_lanes(row(alu.second)?, values, exec, LANES)?;
        }
        Ok(())
    }

    /// The low `bits` of each lane (`bits` ≥ 64: all).
    fn wrap(&self, v: VectorValue<'ctx>, bits: u8) -> Result<VectorValue<'ctx>, CompileError> {
        if bits >= 64 {
            return Ok(v);
        }
        self.builder
            .build_and(v, self.splat(crate::alu::low_mask(bits), GROUP), "wrap")
            .map_err(error)
    }

    /// Each lane sign-extended from `bits`.
    fn sext(&self, v: VectorValue<'ctx>, bits: u8) -> Result<VectorValue<'ctx>, CompileError> {
        if bits >= 64 {
            return Ok(v);
        }
        let shift = self.splat(64 - u64::from(bits), GROUP);
        let b = &self.builder;
        let up = b.build_left_shift(v, shift, "up").map_err(error)?;
        b.build_right_shift(up, shift, true, "sext").map_err(error)
    }

    /// Each lane of `v` as `bits` wide, extended per `signed` (a comparison's view).
    fn extend(
        &self,
        v: VectorValue<'ctx>,
        bits: u8,
        signed: bool,
    ) -> Result<VectorValue<'ctx>, CompileError> {
        if signed {
            self.sext(v, bits)
        } else {
            self.wrap(v, bits)
        }
    }

    /// The low 32 bits of each lane as an f32 vector.
    fn f32s(&self, v: VectorValue<'ctx>) -> Result<VectorValue<'ctx>, CompileError> {
        let b = &self.builder;
        let low = b
            .build_int_truncate(v, self.i32t.vec_type(GROUP), "lo")
            .map_err(error)?;
        Ok(
            b.build_bit_cast(low, self.ctx.f32_type().vec_type(GROUP), "f")
                .map_err(error)?
                .into_vector_value(),
        )
    }

    /// An f32 result's bits, NaN as the canonical NaN, zero-extended.
    fn f32_out(&self, r: VectorValue<'ctx>) -> Result<VectorValue<'ctx>, CompileError> {
        let b = &self.builder;
        let nan = b
            .build_float_compare(FloatPredicate::UNO, r, r, "nan")
            .map_err(error)?;
        let bits = b
            .build_bit_cast(r, self.i32t.vec_type(GROUP), "bits")
            .map_err(error)?
            .into_vector_value();
        let canonical = self.splat32(crate::alu::canonical_f32_nan());
        let bits = b
            .build_select(nan, canonical, bits, "canonical")
            .map_err(error)?
            .into_vector_value();
        b.build_int_z_extend(bits, self.i64v(GROUP), "out")
            .map_err(error)
    }

    /// A predicate vector as 0/1 lanes.
    fn bool_row(&self, t: VectorValue<'ctx>) -> Result<VectorValue<'ctx>, CompileError> {
        self.builder
            .build_int_z_extend(t, self.i64v(GROUP), "p")
            .map_err(error)
    }

    fn lowered(
        &self,
        alu: &AluInst,
        lowered: Lowered,
        lanes: &GroupLanes<'_, 'ctx>,
        exec: VectorValue<'ctx>,
    ) -> Result<(), CompileError> {
        let b = &self.builder;
        let count = usize::from(alu.count);
        let mut src = Vec::with_capacity(count);
        for s in &alu.srcs[..count] {
            src.push(self.group_source(lanes, s)?);
        }
        let arg = |i: usize| {
            src.get(i)
                .copied()
                .ok_or_else(|| error("missing source operand"))
        };
        let e = error;
        let mut second = None;
        let value = match lowered {
            Lowered::Int { op, bits } => {
                let (a, c) = (arg(0)?, arg(1)?);
                let r = match op {
                    IntOp::Add => b.build_int_add(a, c, "add"),
                    IntOp::Sub => b.build_int_sub(a, c, "sub"),
                    IntOp::MulLo => b.build_int_mul(a, c, "mul"),
                    IntOp::And => b.build_and(a, c, "and"),
                    IntOp::Or => b.build_or(a, c, "or"),
                    IntOp::Xor => b.build_xor(a, c, "xor"),
                }
                .map_err(e)?;
                self.wrap(r, bits)?
            }
            Lowered::MadLo { bits } => {
                let p = b.build_int_mul(arg(0)?, arg(1)?, "mul").map_err(e)?;
                let r = b.build_int_add(p, arg(2)?, "mad").map_err(e)?;
                self.wrap(r, bits)?
            }
            Lowered::MulWide { signed } | Lowered::MadWide { signed } => {
                let x = self.extend(arg(0)?, 32, signed)?;
                let y = self.extend(arg(1)?, 32, signed)?;
                let p = b.build_int_mul(x, y, "wide").map_err(e)?;
                if matches!(lowered, Lowered::MadWide { .. }) {
                    b.build_int_add(p, arg(2)?, "mad").map_err(e)?
                } else {
                    p
                }
            }
            Lowered::Not { bits } => {
                let r = b.build_not(arg(0)?, "not").map_err(e)?;
                self.wrap(r, bits)?
            }
            Lowered::Shl { bits } => {
                let (a, n) = (arg(0)?, self.wrap(arg(1)?, 32)?);
                let over = b
                    .build_int_compare(IntPredicate::UGE, n, self.splat(bits.into(), GROUP), "over")
                    .map_err(e)?;
                let n = b
                    .build_select(over, self.splat(0, GROUP), n, "n")
                    .map_err(e)?
                    .into_vector_value();
                let r = b.build_left_shift(a, n, "shl").map_err(e)?;
                let r = self.wrap(r, bits)?;
                b.build_select(over, self.splat(0, GROUP), r, "shl")
                    .map_err(e)?
                    .into_vector_value()
            }
            Lowered::Shr { bits, signed } => {
                let (a, n) = (arg(0)?, self.wrap(arg(1)?, 32)?);
                if signed {
                    // Amounts clamp to width - 1: the sign fills.
                    let limit = self.splat(u64::from(bits) - 1, GROUP);
                    let over = b
                        .build_int_compare(IntPredicate::UGT, n, limit, "over")
                        .map_err(e)?;
                    let n = b
                        .build_select(over, limit, n, "n")
                        .map_err(e)?
                        .into_vector_value();
                    let x = self.sext(a, bits)?;
                    let r = b.build_right_shift(x, n, true, "shr").map_err(e)?;
                    self.wrap(r, bits)?
                } else {
                    let over = b
                        .build_int_compare(
                            IntPredicate::UGE,
                            n,
                            self.splat(bits.into(), GROUP),
                            "over",
                        )
                        .map_err(e)?;
                    let n = b
                        .build_select(over, self.splat(0, GROUP), n, "n")
                        .map_err(e)?
                        .into_vector_value();
                    let x = self.wrap(a, bits)?;
                    let r = b.build_right_shift(x, n, false, "shr").map_err(e)?;
                    b.build_select(over, self.splat(0, GROUP), r, "shr")
                        .map_err(e)?
                        .into_vector_value()
                }
            }
            Lowered::MinMax { bits, signed, max } => {
                let x = self.extend(arg(0)?, bits, signed)?;
                let y = self.extend(arg(1)?, bits, signed)?;
                let predicate = match (signed, max) {
                    (true, true) => IntPredicate::SGT,
                    (true, false) => IntPredicate::SLT,
                    (false, true) => IntPredicate::UGT,
                    (false, false) => IntPredicate::ULT,
                };
                let pick = b.build_int_compare(predicate, x, y, "pick").map_err(e)?;
                let r = b
                    .build_select(pick, x, y, "minmax")
                    .map_err(e)?
                    .into_vector_value();
                self.wrap(r, bits)?
            }
            Lowered::Selp { bits } => {
                let c = b
                    .build_int_truncate(arg(2)?, self.boolv(GROUP), "c")
                    .map_err(e)?;
                let r = b
                    .build_select(c, arg(0)?, arg(1)?, "selp")
                    .map_err(e)?
                    .into_vector_value();
                self.wrap(r, bits)?
            }
            Lowered::SetpInt { cmp, bits, signed } => {
                let x = self.extend(arg(0)?, bits, signed)?;
                let y = self.extend(arg(1)?, bits, signed)?;
                let predicate = match (cmp, signed) {
                    (IntCmp::Eq, _) => IntPredicate::EQ,
                    (IntCmp::Ne, _) => IntPredicate::NE,
                    (IntCmp::Lt, true) => IntPredicate::SLT,
                    (IntCmp::Le, true) => IntPredicate::SLE,
                    (IntCmp::Gt, true) => IntPredicate::SGT,
                    (IntCmp::Ge, true) => IntPredicate::SGE,
                    (IntCmp::Lt, false) => IntPredicate::ULT,
                    (IntCmp::Le, false) => IntPredicate::ULE,
                    (IntCmp::Gt, false) => IntPredicate::UGT,
                    (IntCmp::Ge, false) => IntPredicate::UGE,
                };
                let t = b.build_int_compare(predicate, x, y, "t").map_err(e)?;
                let not_t = b.build_not(t, "not_t").map_err(e)?;
                second = Some(self.bool_row(not_t)?);
                self.bool_row(t)?
            }
            Lowered::SetpF32 { cmp } => {
                let x = self.f32s(arg(0)?)?;
                let y = self.f32s(arg(1)?)?;
                let predicate = match cmp {
                    FloatCmp::Eq => FloatPredicate::OEQ,
                    FloatCmp::Ne => FloatPredicate::ONE,
                    FloatCmp::Lt => FloatPredicate::OLT,
                    FloatCmp::Le => FloatPredicate::OLE,
                    FloatCmp::Gt => FloatPredicate::OGT,
                    FloatCmp::Ge => FloatPredicate::OGE,
                    FloatCmp::Equ => FloatPredicate::UEQ,
                    FloatCmp::Neu => FloatPredicate::UNE,
                    FloatCmp::Ltu => FloatPredicate::ULT,
                    FloatCmp::Leu => FloatPredicate::ULE,
                    FloatCmp::Gtu => FloatPredicate::UGT,
                    FloatCmp::Geu => FloatPredicate::UGE,
                    FloatCmp::Num => FloatPredicate::ORD,
                    FloatCmp::Nan => FloatPredicate::UNO,
                };
                let t = b.build_float_compare(predicate, x, y, "t").map_err(e)?;
                let not_t = b.build_not(t, "not_t").map_err(e)?;
                second = Some(self.bool_row(not_t)?);
                self.bool_row(t)?
            }
            Lowered::Convert {
                from_bits,
                from_signed,
                to_bits,
            } => {
                let x = self.extend(arg(0)?, from_bits, from_signed)?;
                self.wrap(x, to_bits)?
            }
            Lowered::F32 { op } => {
                let x = self.f32s(arg(0)?)?;
                let y = self.f32s(arg(1)?)?;
                let r = match op {
                    F32Op::Add => b.build_float_add(x, y, "fadd"),
                    // `a + (-b)`, as the interpreter computes it.
                    F32Op::Sub => {
                        let negated = b.build_float_neg(y, "neg").map_err(e)?;
                        b.build_float_add(x, negated, "fsub")
                    }
                    F32Op::Mul => b.build_float_mul(x, y, "fmul"),
                }
                .map_err(e)?;
                self.f32_out(r)?
            }
            Lowered::F32Fma => {
                let x = self.f32s(arg(0)?)?;
                let y = self.f32s(arg(1)?)?;
                let z = self.f32s(arg(2)?)?;
                let fma = inkwell::intrinsics::Intrinsic::find("llvm.fma")
                    .ok_or_else(|| error("no llvm.fma"))?
                    .get_declaration(self.module, &[self.ctx.f32_type().vec_type(GROUP).into()])
                    .ok_or_else(|| error("no llvm.fma for the f32 vector"))?;
                let r = b
                    .build_call(fma, &[x.into(), y.into(), z.into()], "fma")
                    .map_err(e)?
                    .try_as_basic_value()
                    .left()
                    .ok_or_else(|| error("fma without a value"))?
                    .into_vector_value();
                self.f32_out(r)?
            }
        };
        self.group_store(lanes, alu.dst, value, exec)?;
        if alu.second != NO_REG {
            // Forms without a second result give `false` there, as `eval` does.
            let row = second.unwrap_or_else(|| self.splat(0, GROUP));
            self.group_store(lanes, alu.second, row, exec)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alu::{decode, AluOp, ValueKind};
    use crate::decode::{Addr, AluInst, MemType};
    use ptx_lexer::Opcode;

    /// Registers of the test frame: sources 0-3, destination 4, second destination 5, guard 6,
    /// the moved copy 7.
    const REGISTERS: u32 = 8;

    /// Values that find the edges of integer and f32 semantics (widths, signs, shift amounts,
    /// NaNs, infinities, zeros, subnormals), with and without garbage above the low 32 bits.
    const EDGES: &[u64] = &[
        0,
        1,
        2,
        7,
        15,
        16,
        17,
        31,
        32,
        33,
        63,
        64,
        65,
        0xff,
        0xffff,
        0x8000,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        0x1_0000_0000,
        0xdead_beef_0000_0021,
        0x7fff_ffff_ffff_ffff,
        0x8000_0000_0000_0000,
        u64::MAX,
        u64::MAX - 1,
        0x3f80_0000, // 1.0
        0xbfc0_0000, // -1.5
        0x8000_0000_0000_0000 | 0x3f80_0000,
        0x7f80_0000,           // inf
        0xff80_0000,           // -inf
        0x7fc0_0000,           // quiet NaN
        0x7f80_0001,           // signalling NaN
        0xffc0_0123,           // negative NaN with payload
        0x0000_0001,           // smallest subnormal
        0x807f_ffff,           // largest negative subnormal
        0x7f7f_ffff,           // largest finite
        0x0080_0000,           // smallest normal
        0x4b80_0000,           // 2^24
        0xcf00_0000,           // -2^31
        0x1234_5678_4049_0fdb, // pi with garbage above
    ];

    /// A small deterministic generator (xorshift64*).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn value(&mut self) -> u64 {
            let r = self.next();
            if r % 3 == 0 {
                r
            } else {
                EDGES[(r >> 8) as usize % EDGES.len()]
            }
        }
    }

    /// A run context with the shared window `[base, base + len)`, no cached host range (every
    /// host access goes to the interpreter, which these tests do not have) and a `wrote` flag
    /// that lives for the program.
    fn test_context(base: u64, len: u64) -> RunContext {
        static EMPTY: [u64; 2] = [0, 0];
        static NO_RANGES: [u64; 2 * crate::warp::RECENT_RANGES] =
            [0; 2 * crate::warp::RECENT_RANGES];
        static SPECIALS: [u64; 9] = [0; 9];
        static TID: [u32; 96] = [0; 96];
        RunContext {
            shared_base: base,
            shared_len: len,
            exec: std::ptr::null_mut(),
            params: 0,
            accessible_lo: &EMPTY[0],
            accessible_hi: &EMPTY[1],
            wrote: Box::leak(Box::new(false)),
            specials: SPECIALS.as_ptr(),
            tid: TID.as_ptr(),
            shared_offsets: SPECIALS.as_ptr(),
            shared_offsets_len: 0,
            local_base: 0,
            local_len: 0,
            global_atomics: Box::leak(Box::new(0)),
            recent: NO_RANGES.as_ptr(),
            loop_budget: 0,
            looped_warp: 0,
            looped_thread: 0,
            looped_active: 0,
            looped_allowance: 0,
        }
    }

    fn op(text: &str) -> AluOp {
        match decode(&Opcode::new(text)) {
            Ok(Some(op)) => op,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn inst(op: Op, guard: u32, guard_negated: bool) -> Inst {
        Inst {
            op,
            guard,
            guard_negated,
            line: 0,
            statement: 0,
            visible: false,
        }
    }

    /// The ALU instruction `alu` with destination 4 (and 5), its sources registers 0.. except
    /// those in `immediate` (bit per source), which take `imm`.
    fn alu_inst(alu: AluOp, immediate: u32, imm: u64) -> AluInst {
        let mut srcs = [Src::Imm(0); 4];
        for (i, src) in srcs.iter_mut().enumerate().take(alu.source_count()) {
            *src = if immediate >> i & 1 != 0 {
                Src::Imm(imm)
            } else {
                Src::Reg(i as u32)
            };
        }
        AluInst::new(alu, 4, 5, srcs)
    }

    fn function(code: Vec<Inst>) -> DecodedFunction {
        DecodedFunction {
            name: "test".into(),
            is_entry: true,
            code,
            registers: REGISTERS,
            zeroed_registers: Vec::new(),
            frame_bytes: 0,
            params: Vec::new(),
            rets: Vec::new(),
            shared_vars: Vec::new(),
            callees: Vec::new(),
            indirect_calls: false,
            line: 0,
        }
    }

    /// Runs `text` natively (as the first instruction of a run, followed by a masked move of
    /// its result) and by [`AluOp::eval`] lane by lane, over many register files, guards,
    /// active masks and immediate placements; the register files must be equal bit for bit.
    fn check(text: &str, expect_lowered: bool) {
        let alu = op(text);
        assert_eq!(
            alu.lowered().is_some(),
            expect_lowered,
            "{text}: lowered form"
        );
        let count = alu.source_count();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ text.len() as u64);
        // Each configuration (guard, immediates, move mask) compiled once, then run on many
        // register files and active masks.
        for config in 0..6u32 {
            let immediate = if config >= 3 && count > 0 {
                (rng.next() as u32 | 1) & ((1 << count) - 1)
            } else {
                0
            };
            let imm = match alu.source_kind(immediate.trailing_zeros().min(3) as usize) {
                ValueKind::F32 => rng.value() & 0xffff_ffff,
                _ => rng.value(),
            };
            let (guard, negated) = match config % 3 {
                0 => (NO_REG, false),
                1 => (6, false),
                _ => (6, true),
            };
            let mask = [u64::MAX, 0xffff_ffff, 1, 0xff][(rng.next() % 4) as usize];
            let code = vec![
                inst(
                    Op::Alu(Box::new(alu_inst(alu, immediate, imm))),
                    guard,
                    negated,
                ),
                inst(
                    Op::Mov {
                        dst: 7,
                        src: Src::Reg(4),
                        mask,
                    },
                    NO_REG,
                    false,
                ),
            ];
            let func = function(code);
            let native = compile(&func)
                .unwrap_or_else(|e| panic!("{text}: {e}"))
                .expect("a run");
            let run = native.run_at(0).expect("a run at 0");
            assert_eq!(run.len, 2);
            for round in 0..16u32 {
                let mut regs = vec![0u64; REGISTERS as usize * 32];
                for v in regs.iter_mut() {
                    *v = rng.value();
                }
                // Predicates are 0 or 1 (sources of `selp`'s c, the guard).
                for lane in 0..32 {
                    regs[6 * 32 + lane] = rng.next() & 1;
                }
                let active = match round % 5 {
                    0 => u32::MAX,
                    1 => 0,
                    _ => rng.next() as u32,
                };
                let mut expected = regs.clone();
                let Op::Alu(decoded) = &func.code[0].op else {
                    unreachable!()
                };
                for lane in 0..32 {
                    if active >> lane & 1 == 0 {
                        continue;
                    }
                    let guard_holds = match guard {
                        NO_REG => true,
                        g => (expected[g as usize * 32 + lane] & 1 != 0) != negated,
                    };
                    if guard_holds {
                        let mut sources = [0u64; 4];
                        for (i, src) in decoded.srcs[..count].iter().enumerate() {
                            sources[i] = match *src {
                                Src::Reg(r) => expected[r as usize * 32 + lane],
                                Src::Imm(v) => v,
                                _ => unreachable!(),
                            };
                        }
                        let out = alu.eval(&sources, false);
                        expected[4 * 32 + lane] = out.value;
                        expected[5 * 32 + lane] = u64::from(out.second);
                    }
                    expected[7 * 32 + lane] = expected[4 * 32 + lane] & mask;
                }
                let mut context = test_context(0, 0);
                // SAFETY: `regs` holds the frame's registers; no shared memory is read.
                let done = unsafe { (run.entry)(regs.as_mut_ptr(), active, &mut context, 0, 8) };
                assert_eq!(done, 2, "{text}: the whole run");
                for r in 0..REGISTERS as usize {
                    for lane in 0..32 {
                        let (got, want) = (regs[r * 32 + lane], expected[r * 32 + lane]);
                        assert_eq!(
                            got, want,
                            "{text} round {round}: register {r} lane {lane}: native {got:#x}, \
                             eval {want:#x} (active {active:#x}, guard {guard} negated {negated}, \
                             immediates {immediate:#b} = {imm:#x})"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn lowered_forms_equal_eval_bit_for_bit() {
        for text in [
            "add.s32",
            "add.u32",
            "add.s64",
            "add.u16",
            "sub.s32",
            "sub.u64",
            "sub.s16",
            "mul.lo.s32",
            "mul.lo.u32",
            "mul.lo.s64",
            "mul.lo.u16",
            "mul.wide.s32",
            "mul.wide.u32",
            "mad.lo.s32",
            "mad.lo.u32",
            "mad.lo.s64",
            "mad.wide.s32",
            "mad.wide.u32",
            "and.b32",
            "and.b64",
            "and.pred",
            "and.b16",
            "or.b32",
            "or.pred",
            "or.b64",
            "xor.b32",
            "xor.pred",
            "xor.b64",
            "not.b32",
            "not.pred",
            "not.b64",
            "shl.b32",
            "shl.b64",
            "shl.b16",
            "shr.u32",
            "shr.s32",
            "shr.u64",
            "shr.s64",
            "shr.s16",
            "shr.u16",
            "shr.b32",
            "min.s32",
            "min.u32",
            "max.s32",
            "max.u32",
            "min.s64",
            "max.u64",
            "min.s16",
            "max.u16",
            "selp.b32",
            "selp.b64",
            "selp.f32",
            "selp.b16",
            "setp.eq.s32",
            "setp.ne.u32",
            "setp.lt.s32",
            "setp.le.u32",
            "setp.gt.s64",
            "setp.ge.u64",
            "setp.lo.u32",
            "setp.hs.u64",
            "setp.lt.s16",
            "setp.eq.b32",
            "setp.ne.b64",
            "setp.eq.f32",
            "setp.ne.f32",
            "setp.lt.f32",
            "setp.le.f32",
            "setp.gt.f32",
            "setp.ge.f32",
            "setp.equ.f32",
            "setp.neu.f32",
            "setp.ltu.f32",
            "setp.leu.f32",
            "setp.gtu.f32",
            "setp.geu.f32",
            "setp.num.f32",
            "setp.nan.f32",
            "cvt.s64.s32",
            "cvt.u64.u32",
            "cvt.u32.u64",
            "cvt.s32.s64",
            "cvt.u16.u32",
            "cvt.s32.s16",
            "cvt.u32.u16",
            "cvt.s64.s16",
            "cvt.u8.u32",
            "cvt.u32.s8",
            "add.f32",
            "add.rn.f32",
            "sub.f32",
            "sub.rn.f32",
            "mul.f32",
            "mul.rn.f32",
            "fma.rn.f32",
        ] {
            check(text, true);
        }
    }

    /// Instructions without a lowered form run their interpreter kernel from native code.
    #[test]
    fn other_forms_call_the_interpreter_kernel() {
        for text in [
            "div.s32",
            "rem.u32",
            "add.sat.s32",
            "mul.hi.s32",
            "mad.hi.u32",
            "min.f32",
            "max.f32",
            "div.rn.f32",
            "add.ftz.f32",
            "fma.rn.ftz.f32",
            "setp.lt.and.s32",
            "setp.lt.ftz.f32",
            "setp.eq.f64",
            "cvt.rn.f32.s32",
            "cvt.rzi.s32.f32",
            "cvt.s8.s32",
            "add.f64",
            "fma.rn.f64",
            "abs.s32",
            "neg.f32",
            "popc.b32",
            "clz.b32",
            "brev.b32",
            "bfe.u32",
            "prmt.b32",
            "lop3.b32",
            "shf.l.wrap.b32",
            "sqrt.rn.f32",
            "rcp.rn.f32",
            "ex2.approx.f32",
            "set.lt.u32.s32",
        ] {
            check(text, false);
        }
    }

    /// `ld.shared` in a run: every lane of `exec` gets the element at its address, extended as
    /// its type says (the interpreter's `load_lanes`), vectors element by element; an address
    /// outside the window or misaligned in any running lane leaves the run before the load,
    /// with nothing of it done, whatever the other lanes.
    #[test]
    fn shared_loads_read_the_window_and_stop_before_a_fault() {
        let mut rng = Rng(0x5eed);
        let mut window = vec![0u64; 64];
        for word in window.iter_mut() {
            *word = rng.next();
        }
        let window_bytes = (window.len() * 8) as u64;
        let base = window.as_ptr() as u64;
        let read = |address: u64, bytes: u8, signed: bool| -> u64 {
            let mut v = 0u64;
            for i in 0..u64::from(bytes) {
                let byte =
                    (window[((address + i) / 8) as usize] >> (8 * ((address + i) % 8))) & 0xff;
                v |= byte << (8 * i);
            }
            let shift = 64 - 8 * u32::from(bytes);
            if signed && shift > 0 {
                (((v << shift) as i64) >> shift) as u64
            } else {
                v
            }
        };
        for (bytes, signed, count) in [
            (4u8, false, 1u8),
            (4, true, 1),
            (1, true, 1),
            (1, false, 1),
            (2, true, 1),
            (8, false, 1),
            (4, false, 2),
            (4, false, 4),
            (8, false, 2),
            (2, false, 4),
        ] {
            let total = u64::from(bytes) * u64::from(count);
            for (offset, guard) in [(0i64, NO_REG), (8, 6), (-16, NO_REG)] {
                let ld = Op::Ld {
                    space: Space::Shared,
                    addr: Addr {
                        base: Src::Reg(0),
                        offset,
                    },
                    dsts: [4, 5, 7, 3],
                    count,
                    ty: MemType { bytes, signed },
                };
                // The loaded value used by the next instruction of the run.
                let add = Op::Alu(Box::new(alu_inst(op("add.s64"), 0b10, 1)));
                let mut add_inst = inst(add, NO_REG, false);
                if let Op::Alu(alu) = &mut add_inst.op {
                    alu.srcs[0] = Src::Reg(4);
                    alu.dst = 2;
                    alu.second = NO_REG;
                }
                let func = function(vec![inst(ld, guard, false), add_inst]);
                let native = compile(&func).unwrap().expect("a run");
                let run = native.run_at(0).expect("a run at 0");
                assert_eq!((run.len, run.visible), (2, 0), "visible is the decoder's");
                for round in 0..24 {
                    let mut regs = vec![0u64; REGISTERS as usize * 32];
                    for v in regs.iter_mut() {
                        *v = rng.value();
                    }
                    for lane in 0..32 {
                        regs[6 * 32 + lane] = rng.next() & 1;
                        // In-window, aligned addresses, one in some rounds not.
                        let slot = rng.next() % (window_bytes / total);
                        regs[lane] = (slot * total).wrapping_sub(offset as u64);
                    }
                    let active = if round % 3 == 0 {
                        u32::MAX
                    } else {
                        rng.next() as u32
                    };
                    let exec = match guard {
                        NO_REG => active,
                        g => {
                            (0..32).fold(0u32, |m, l| {
                                m | (((regs[g as usize * 32 + l] & 1) as u32) << l)
                            }) & active
                        }
                    };
                    let faulty = round % 4 == 1 && exec != 0;
                    if faulty {
                        let lane = exec.trailing_zeros() as usize;
                        // Past the end, or inside the window but misaligned.
                        let bad = if round % 8 == 5 && total > 1 {
                            total + total / 2
                        } else {
                            window_bytes - total + 1
                        };
                        regs[lane] = bad.wrapping_sub(offset as u64);
                    }
                    let mut expected = regs.clone();
                    if !faulty {
                        for lane in 0..32 {
                            if exec >> lane & 1 != 0 {
                                let address = regs[lane].wrapping_add(offset as u64);
                                for (i, d) in
                                    [4usize, 5, 7, 3][..usize::from(count)].iter().enumerate()
                                {
                                    expected[d * 32 + lane] =
                                        read(address + i as u64 * u64::from(bytes), bytes, signed);
                                }
                            }
                            if active >> lane & 1 != 0 {
                                expected[2 * 32 + lane] = expected[4 * 32 + lane].wrapping_add(1);
                            }
                        }
                    }
                    let mut context = test_context(base, window_bytes);
                    // SAFETY: `regs` holds the frame; the window is `window`.
                    let done =
                        unsafe { (run.entry)(regs.as_mut_ptr(), active, &mut context, 0, 8) };
                    assert_eq!(
                        done,
                        if faulty { 0 } else { 2 },
                        "{bytes}x{count} signed {signed} offset {offset} round {round}"
                    );
                    assert!(
                        regs == expected,
                        "{bytes}x{count} signed {signed} offset {offset} round {round}: \
                         registers differ"
                    );
                }
            }
        }
    }

    /// `st.shared` in a run: every lane of `exec` stores its elements (truncated to the
    /// type) at its address, lanes in order, so that where lanes share an address the highest
    /// lane's value stays (the interpreter's `store_lanes`); `wrote` is set exactly when some
    /// store changes the memory, as the interpreter's store-by-store comparison; an address
    /// outside the window or misaligned in any running lane leaves the run before the store,
    /// with nothing of it done.
    #[test]
    fn shared_stores_write_in_lane_order_and_set_wrote_as_the_interpreter() {
        let mut rng = Rng(0x5707e);
        for (bytes, count) in [
            (4u8, 1u8),
            (1, 1),
            (2, 1),
            (8, 1),
            (4, 2),
            (4, 4),
            (8, 2),
            (2, 4),
        ] {
            let total = u64::from(bytes) * u64::from(count);
            let mask = u64::MAX >> (64 - 8 * u32::from(bytes));
            for (offset, guard, immediate) in
                [(0i64, NO_REG, false), (8, 6, false), (-16, NO_REG, true)]
            {
                let mut srcs = [Src::Reg(4), Src::Reg(5), Src::Reg(7), Src::Reg(3)];
                if immediate {
                    srcs[0] = Src::Imm(0x1234_5678_9abc_def0);
                }
                let st = Op::St {
                    space: Space::Shared,
                    addr: Addr {
                        base: Src::Reg(0),
                        offset,
                    },
                    srcs,
                    count,
                    ty: MemType {
                        bytes,
                        signed: false,
                    },
                };
                // A move after the store, so that the run is two long.
                let mov = Op::Mov {
                    dst: 2,
                    src: Src::Reg(1),
                    mask: u64::MAX,
                };
                let func = function(vec![inst(st, guard, false), inst(mov, NO_REG, false)]);
                let native = compile(&func).unwrap().expect("a run");
                let run = native.run_at(0).expect("a run at 0");
                assert_eq!(run.len, 2);
                for round in 0..32 {
                    // A small window, so that lanes often share an address.
                    let slots = if round % 2 == 0 { 4 } else { 64 };
                    let mut window = vec![0u64; (slots * total as usize).div_ceil(8)];
                    for word in window.iter_mut() {
                        *word = rng.next() % 3;
                    }
                    let window_bytes = (window.len() * 8) as u64;
                    let base = window.as_mut_ptr() as u64;
                    let mut regs = vec![0u64; REGISTERS as usize * 32];
                    for v in regs.iter_mut() {
                        // Small values: some stores leave memory as it is.
                        *v = if round % 3 == 0 {
                            rng.value()
                        } else {
                            rng.next() % 3
                        };
                    }
                    for lane in 0..32 {
                        regs[6 * 32 + lane] = rng.next() & 1;
                        let slot = rng.next() % (window_bytes / total);
                        regs[lane] = (slot * total).wrapping_sub(offset as u64);
                    }
                    let active = if round % 4 == 0 {
                        u32::MAX
                    } else {
                        rng.next() as u32
                    };
                    let exec = match guard {
                        NO_REG => active,
                        g => {
                            (0..32).fold(0u32, |m, l| {
                                m | (((regs[g as usize * 32 + l] & 1) as u32) << l)
                            }) & active
                        }
                    };
                    let faulty = round % 5 == 3 && exec != 0;
                    if faulty {
                        let lane = 31 - exec.leading_zeros() as usize;
                        let bad = if round % 10 == 3 && total > 1 {
                            total / 2
                        } else {
                            window_bytes - total + 1
                        };
                        regs[lane] = bad.wrapping_sub(offset as u64);
                    }
                    // The interpreter's order: lane by lane, each lane's elements in order,
                    // comparing each element with the memory it replaces.
                    let mut expected_memory = window.clone();
                    let mut expected_regs = regs.clone();
                    let mut expected_wrote = false;
                    if !faulty {
                        for lane in 0..32 {
                            if exec >> lane & 1 != 0 {
                                let address = regs[lane].wrapping_add(offset as u64);
                                for (i, src) in srcs[..usize::from(count)].iter().enumerate() {
                                    let value = match *src {
                                        Src::Reg(r) => regs[r as usize * 32 + lane],
                                        Src::Imm(v) => v,
                                        _ => unreachable!(),
                                    } & mask;
                                    let at = address + i as u64 * u64::from(bytes);
                                    let (word, shift) = ((at / 8) as usize, 8 * (at % 8));
                                    let old = (expected_memory[word] >> shift) & mask;
                                    expected_wrote |= old != value;
                                    expected_memory[word] = (expected_memory[word]
                                        & !(mask << shift))
                                        | (value << shift);
                                }
                            }
                            if active >> lane & 1 != 0 {
                                expected_regs[2 * 32 + lane] = regs[32 + lane];
                            }
                        }
                    }
                    let mut context = test_context(base, window_bytes);
                    // SAFETY: `regs` holds the frame; the window is `window`.
                    let done =
                        unsafe { (run.entry)(regs.as_mut_ptr(), active, &mut context, 0, 8) };
                    let what = format!(
                        "{bytes}x{count} offset {offset} guard {guard} immediate {immediate} \
                         round {round}"
                    );
                    assert_eq!(done, if faulty { 0 } else { 2 }, "{what}");
                    assert!(window == expected_memory, "{what}: memory differs");
                    assert!(regs == expected_regs, "{what}: registers differ");
                    // SAFETY: the context's flag, leaked for the test.
                    assert_eq!(unsafe { *context.wrote }, expected_wrote, "{what}: wrote");
                }
            }
        }
    }

    /// `atom`/`red.shared` of every integer operation and type in a run, against the
    /// interpreter's lane loop over `memory::atomic_private`: lanes in order from the lowest
    /// (a small window, so that lanes collide), each `atom` lane getting its old value
    /// (sign-extended for `.s32`), `wrote` set exactly when some lane's operation changed the
    /// memory (by an `atom`; a `red` leaves it), guards, partial masks, immediate operands,
    /// and an address outside the window or misaligned in any running lane leaving the run
    /// before the atomic with nothing of it done.
    #[test]
    fn shared_atomics_run_lane_by_lane_as_the_interpreter() {
        let mut rng = Rng(0xa70b);
        let ops = AtomOp::ALL;
        let types = [AtomType::U32, AtomType::S32, AtomType::U64, AtomType::S64];
        for (k, (op, ty)) in ops
            .iter()
            .flat_map(|&op| types.iter().map(move |&ty| (op, ty)))
            .enumerate()
        {
            let bytes = ty.bytes();
            let (dst, guard, b, offset) = match k % 4 {
                0 => (4, NO_REG, Src::Reg(5), 0i64),
                1 => (NO_REG, 6, Src::Reg(5), 8),
                2 => (4, 6, Src::Imm(3), -16),
                _ => (4, NO_REG, Src::Imm(u64::MAX - 1), 0),
            };
            let atom = Op::Atom {
                space: Space::Shared,
                addr: Addr {
                    base: Src::Reg(0),
                    offset,
                },
                op,
                ty,
                dst,
                b,
                c: if op == AtomOp::Cas {
                    Src::Reg(7)
                } else {
                    Src::Imm(0)
                },
            };
            // The old value used by the next instruction of the run.
            let mov = Op::Mov {
                dst: 2,
                src: Src::Reg(4),
                mask: u64::MAX,
            };
            let func = function(vec![inst(atom, guard, false), inst(mov, NO_REG, false)]);
            let native = compile(&func).unwrap().expect("a run");
            let run = native.run_at(0).expect("a run at 0");
            assert_eq!(run.len, 2);
            for round in 0..24 {
                let slots = if round % 2 == 0 { 3 } else { 40 };
                let mut window = vec![0u64; (slots * bytes as usize).div_ceil(8)];
                for word in window.iter_mut() {
                    *word = if round % 3 == 0 {
                        rng.value()
                    } else {
                        rng.next() % 4
                    };
                }
                let window_bytes = (window.len() * 8) as u64;
                let mut regs = vec![0u64; REGISTERS as usize * 32];
                for v in regs.iter_mut() {
                    *v = if round % 3 == 1 {
                        rng.value()
                    } else {
                        rng.next() % 4
                    };
                }
                for lane in 0..32 {
                    regs[6 * 32 + lane] = rng.next() & 1;
                    let slot = rng.next() % (window_bytes / bytes);
                    regs[lane] = (slot * bytes).wrapping_sub(offset as u64);
                }
                let active = match round % 4 {
                    0 => u32::MAX,
                    1 => 1 << (rng.next() % 32),
                    _ => rng.next() as u32,
                };
                let exec = match guard {
                    NO_REG => active,
                    g => {
                        (0..32).fold(0u32, |m, l| {
                            m | (((regs[g as usize * 32 + l] & 1) as u32) << l)
                        }) & active
                    }
                };
                let faulty = round % 5 == 3 && exec != 0;
                if faulty {
                    let lane = 31 - exec.leading_zeros() as usize;
                    let bad = if round % 10 == 3 {
                        bytes / 2
                    } else {
                        window_bytes - bytes + 1
                    };
                    regs[lane] = bad.wrapping_sub(offset as u64);
                }
                // The interpreter: lane by lane, each a private read-modify-write.
                let mut expected_memory = window.clone();
                let mut expected_regs = regs.clone();
                let mut expected_wrote = false;
                if !faulty {
                    let base = expected_memory.as_mut_ptr() as u64;
                    for lane in 0..32 {
                        if exec >> lane & 1 != 0 {
                            let host = base + regs[lane].wrapping_add(offset as u64);
                            let operand = |src: &Src| match *src {
                                Src::Reg(r) => regs[r as usize * 32 + lane],
                                Src::Imm(v) => v,
                                _ => unreachable!(),
                            };
                            let c = if op == AtomOp::Cas {
                                regs[7 * 32 + lane]
                            } else {
                                0
                            };
                            // SAFETY: inside the window, aligned (not `faulty`).
                            let (old, after) = unsafe {
                                let old =
                                    crate::memory::atomic_private(host, op, ty, operand(&b), c);
                                (old, crate::memory::load(host, bytes as u8))
                            };
                            if dst != NO_REG {
                                expected_wrote |= after != old;
                                expected_regs[4 * 32 + lane] = if ty == AtomType::S32 {
                                    old as u32 as i32 as i64 as u64
                                } else {
                                    old
                                };
                            }
                        }
                        if active >> lane & 1 != 0 {
                            expected_regs[2 * 32 + lane] = expected_regs[4 * 32 + lane];
                        }
                    }
                }
                let mut context = test_context(window.as_mut_ptr() as u64, window_bytes);
                // SAFETY: `regs` holds the frame; the window is `window`.
                let done = unsafe { (run.entry)(regs.as_mut_ptr(), active, &mut context, 0, 8) };
                let what = format!("{op:?} {ty:?} dst {dst} guard {guard} round {round}");
                assert_eq!(done, if faulty { 0 } else { 2 }, "{what}");
                assert!(window == expected_memory, "{what}: memory differs");
                assert!(regs == expected_regs, "{what}: registers differ");
                // SAFETY: the context's flag, leaked for the test.
                assert_eq!(unsafe { *context.wrote }, expected_wrote, "{what}: wrote");
            }
        }
    }

    /// Runs start after branch targets and stop before instructions the engine cannot run;
    /// single instructions, and runs with no native code, are left to the interpreter.
    /// An unguarded `add.s32`, inline in a run.
    fn add() -> Inst {
        inst(
            Op::Alu(Box::new(alu_inst(op("add.s32"), 0, 0))),
            NO_REG,
            false,
        )
    }

    #[test]
    fn runs_stop_at_leaders_and_untranslatable_instructions() {
        let code = vec![
            add(),
            add(),
            add(),
            inst(
                Op::Bra {
                    target: 4,
                    reconverge: 6,
                },
                NO_REG,
                false,
            ),
            add(),
            add(),
            add(),
            inst(Op::Fence, NO_REG, false),
            add(),
            inst(
                Op::Mov {
                    dst: 4,
                    src: Src::Special(crate::decode::Special::Clock),
                    mask: u64::MAX,
                },
                NO_REG,
                false,
            ),
            add(),
            add(),
            inst(Op::Exit, NO_REG, false),
            inst(Op::Fence, NO_REG, false),
            inst(Op::Fence, NO_REG, false),
        ];
        // The branch's target (4) and reconvergence point (6) start runs; the fence is
        // executed by the interpreter inside the third; `%clock` (which counts the
        // instructions before it) and control flow end runs; fences alone make none.
        assert_eq!(
            find_runs(&function(code)),
            vec![(0, 3), (4, 2), (6, 3), (10, 2)]
        );
    }

    #[test]
    fn loop_bodies_are_found_in_both_layouts_with_their_divergent_branches() {
        let bra = |target: u32, reconverge: u32, guard: u32| {
            inst(Op::Bra { target, reconverge }, guard, false)
        };
        let ret = || inst(Op::Ret, NO_REG, false);
        // `@p bra head` (p: register 3), the others waiting after it.
        let taken = function(vec![add(), add(), add(), bra(0, 4, 3), ret()]);
        assert_eq!(find_runs(&taken), vec![(0, 3)]);
        assert_eq!(
            loop_back(&taken, 0, 3),
            Some(LoopBack {
                branch: 3,
                round_when_taken: true,
                diverges: true,
            })
        );
        // `@p bra out; bra head`, the lanes that leave waiting at `out`.
        let not_taken = function(vec![add(), add(), bra(4, 4, 3), bra(0, 4, NO_REG), ret()]);
        assert_eq!(
            loop_back(&not_taken, 0, 2),
            Some(LoopBack {
                branch: 2,
                round_when_taken: false,
                diverges: true,
            })
        );
        // Reconvergence points elsewhere: the branch goes to the interpreter where it
        // diverges (the interpreter's stack would hold other entries than the lanes' going
        // round).
        let elsewhere = function(vec![add(), add(), bra(0, 5, 3), add(), add(), ret()]);
        assert!(!loop_back(&elsewhere, 0, 2).is_some_and(|back| back.diverges));
        let waits_apart = function(vec![add(), add(), bra(5, 6, 3), bra(0, 6, NO_REG), ret()]);
        assert!(!loop_back(&waits_apart, 0, 2).is_some_and(|back| back.diverges));
        // Not loops: a guarded branch back, a branch elsewhere, the body's end not before
        // the branch.
        let guarded_back = function(vec![add(), add(), bra(4, 4, 3), bra(0, 4, 3), ret()]);
        assert_eq!(loop_back(&guarded_back, 0, 2), None);
        let elsewhere = function(vec![add(), add(), bra(3, 3, NO_REG), ret()]);
        assert_eq!(loop_back(&elsewhere, 0, 2), None);
        assert_eq!(loop_back(&taken, 0, 2), None);
    }

    #[test]
    fn shuffles_with_immediate_lanes_and_global_and_shared_cvta_are_inline() {
        use crate::decode::{ShflMode, WindowSpace};
        let shfl = |b: Src, c: Src| Op::Shfl {
            mode: ShflMode::Down,
            dst: 1,
            dst_pred: 2,
            a: Src::Reg(0),
            b,
            c,
        };
        let cvta = |space| Op::Cvta {
            to_generic: true,
            space,
            dst: 1,
            src: Src::Reg(0),
        };
        let form_of = |op| form(&inst(op, NO_REG, false), 8);
        assert_eq!(form_of(shfl(Src::Imm(1), Src::Imm(31))), Some(Form::Inline));
        // A lane operand from a register: per execution, the interpreter's.
        assert_eq!(
            form_of(shfl(Src::Reg(3), Src::Imm(31))),
            Some(Form::Interpreter)
        );
        assert_eq!(
            form_of(shfl(Src::Imm(1), Src::Reg(3))),
            Some(Form::Interpreter)
        );
        assert_eq!(form_of(cvta(WindowSpace::Global)), Some(Form::Inline));
        assert_eq!(form_of(cvta(WindowSpace::Shared)), Some(Form::Inline));
        // Each thread's own window: the interpreter's.
        assert_eq!(form_of(cvta(WindowSpace::Local)), Some(Form::Interpreter));
        assert_eq!(form_of(cvta(WindowSpace::Param)), Some(Form::Interpreter));
        // A shuffle is a segment of its own: it reads the rows the loop before it wrote.
        let code = vec![
            add(),
            inst(shfl(Src::Imm(1), Src::Imm(31)), NO_REG, false),
            add(),
        ];
        let forms = forms_of(&code, 8).expect("forms");
        assert_eq!(segment_starts(&code, &forms), vec![0, 1, 2]);
        // Both kinds compile in one run: the interpreter executes the one with a register
        // lane operand.
        let code = vec![
            add(),
            inst(shfl(Src::Imm(1), Src::Imm(31)), NO_REG, false),
            inst(shfl(Src::Reg(3), Src::Imm(31)), NO_REG, false),
            add(),
        ];
        let native = compile(&function(code)).expect("compiles");
        assert!(native.is_some_and(|n| n.run_at(0).is_some()));
    }

    #[test]
    fn integer_atomics_are_inline_and_float_ones_interpreted() {
        let atom = |space, base, op, ty| Op::Atom {
            space,
            addr: Addr { base, offset: 8 },
            op,
            ty,
            dst: 1,
            b: Src::Reg(2),
            c: Src::Imm(0),
        };
        let shared_var = Src::Shared { var: 0, offset: 0 };
        let form_of = |op| form(&inst(op, NO_REG, false), 8);
        for (space, base, op, ty, expected) in [
            (
                Space::Shared,
                Src::Reg(0),
                AtomOp::Add,
                AtomType::U32,
                Form::Inline,
            ),
            (
                Space::Shared,
                shared_var,
                AtomOp::Add,
                AtomType::U64,
                Form::Inline,
            ),
            (
                Space::Shared,
                Src::Reg(0),
                AtomOp::Min,
                AtomType::S32,
                Form::Inline,
            ),
            (
                Space::Host,
                Src::Reg(0),
                AtomOp::Cas,
                AtomType::U64,
                Form::Inline,
            ),
            (
                Space::Host,
                Src::Reg(0),
                AtomOp::Inc,
                AtomType::U32,
                Form::Inline,
            ),
            // Floating-point atomics: the interpreter's one float code path.
            (
                Space::Shared,
                Src::Reg(0),
                AtomOp::Add,
                AtomType::F32,
                Form::Interpreter,
            ),
            (
                Space::Host,
                Src::Reg(0),
                AtomOp::Exch,
                AtomType::F64,
                Form::Interpreter,
            ),
            // Addresses inline code does not compute for these spaces.
            (
                Space::Host,
                shared_var,
                AtomOp::Add,
                AtomType::U32,
                Form::Interpreter,
            ),
            (
                Space::Shared,
                Src::Imm(64),
                AtomOp::Add,
                AtomType::U32,
                Form::Interpreter,
            ),
            (
                Space::Host,
                Src::KernelParam(0),
                AtomOp::Add,
                AtomType::U32,
                Form::Interpreter,
            ),
        ] {
            assert_eq!(
                form_of(atom(space, base, op, ty)),
                Some(expected),
                "{space:?} {base:?} {op:?} {ty:?}"
            );
        }
        // An atomic is a segment of its own: its addresses are checked for all lanes first.
        let code = vec![
            add(),
            inst(
                atom(Space::Shared, Src::Reg(0), AtomOp::Add, AtomType::U32),
                NO_REG,
                false,
            ),
            add(),
        ];
        let forms = forms_of(&code, 8).expect("forms");
        assert_eq!(segment_starts(&code, &forms), vec![0, 1, 2]);
    }
}
