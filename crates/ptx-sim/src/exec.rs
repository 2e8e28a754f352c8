//! SIMT execution of one warp: fetch at the top of the current frame's reconvergence stack,
//! evaluate the guard for the active lanes, execute warp-wide over the lanes that run.

use crate::alu;
use crate::builtins;
use crate::decode::{
    Addr, AtomType, BarKind, CallInst, CallSlot, CallTarget, DecodedFunction, Inst, Op, ReduxOp,
    ShflMode, Space, Special, Src, VoteMode, WindowSpace, EXIT_PC, FUNCTION_ADDRESS_TAG,
    HANDLE_TAG_MASK, NO_REG, TEXREF_HANDLE_TAG,
};
use crate::launch::CtaContext;
use crate::memory;
use crate::native::{NativeCode, RunContext, UNIFORM_SPECIALS};
use crate::warp::{Entry, Frame, PendingReduction, Warp, WarpState};
use crate::{AddressMode, ChannelKind, SimError, TextureRef};

/// Why a warp stopped running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Yield {
    /// Its time slice ended; it can run again.
    Slice,
    /// It arrived at barrier `id`; `blocking` when it waits (`bar.sync`, `bar.red`).
    Barrier {
        id: u32,
        /// Threads expected (`None`: all threads of the CTA).
        count: Option<u32>,
        blocking: bool,
        kind: BarKind,
        /// Contribution to a reduction: lanes with the predicate set, and lanes taking part.
        votes: u32,
        participants: u32,
    },
    /// All its threads exited.
    Done,
}

/// Deepest call nesting before a launch is stopped (a runaway recursion without frames).
const MAX_CALL_DEPTH: usize = 1 << 16;

/// Lanes of `mask`, lowest first.
#[inline(always)]
fn next_lane(mask: &mut u32) -> Option<usize> {
    if *mask == 0 {
        return None;
    }
    let lane = mask.trailing_zeros() as usize;
    *mask &= *mask - 1;
    Some(lane)
}

pub(crate) struct Exec<'a, 'w> {
    cta: &'a CtaContext<'a>,
    warp: &'w mut Warp,
    func: &'a DecodedFunction,
    /// `func`'s native code ([`crate::Engine::Native`], once compiled).
    native: Option<&'a NativeCode>,
    /// The decoded index of `func`, and the warp's `clock` when it started running it in this
    /// slice: what it interpreted there is credited to the function's work towards
    /// compilation ([`Exec::credit_interpreted`]).
    function: u32,
    since: u64,
    reg_base: usize,
    local_base: u64,
    /// The error of an instruction a native run had the interpreter execute
    /// ([`interpret_for_native`]), for the run loop to report.
    native_error: Option<SimError>,
    /// The values of [`crate::native::UNIFORM_SPECIALS`] for native runs (as `read_other`
    /// reads them; zeros with the interpreter alone).
    specials: [u64; 9],
}

/// Runs `warp` for at most `budget` warp instructions, and at most `visible` loads, stores and
/// atomics other warps can see ([`crate::decode::Inst::visible`]).
pub(crate) fn run(
    cta: &CtaContext<'_>,
    warp: &mut Warp,
    budget: u64,
    visible: u64,
) -> Result<Yield, SimError> {
    let program = cta.launch.program;
    let Some(frame) = warp.frames.last() else {
        warp.state = WarpState::Done;
        return Ok(Yield::Done);
    };
    let func = &program.functions[frame.function as usize];
    let native = program.native_code(frame.function);
    let (reg_base, local_base) = (frame.reg_base, frame.local_base);
    // The slice runs native code only if some function of the program had some when it
    // started (after the look-up above, which may have compiled this one): until then, the
    // native engine costs the interpreter no more than the work it credits. A function
    // compiled during the slice (at a call) runs natively from the next slice on.
    let native_slice = program.has_native_code();
    let mut specials = [0u64; 9];
    if native_slice {
        for (value, special) in specials.iter_mut().zip(UNIFORM_SPECIALS) {
            *value = read_other(cta, warp, 0, 0, &Src::Special(special), 0);
        }
    }
    let function = frame.function;
    let since = warp.clock;
    let mut exec = Exec {
        cta,
        warp,
        func,
        native,
        function,
        since,
        reg_base,
        local_base,
        native_error: None,
        specials,
    };
    let outcome = exec.run(native_slice, budget, visible);
    exec.credit_interpreted();
    outcome
}

impl<'a> Exec<'a, '_> {
    #[inline(always)]
    fn reg(&self, r: u32, lane: usize) -> u64 {
        self.warp.regs[self.reg_base + r as usize * 32 + lane]
    }

    #[inline(always)]
    fn set(&mut self, r: u32, lane: usize, value: u64) {
        if r != NO_REG {
            self.warp.regs[self.reg_base + r as usize * 32 + lane] = value;
        }
    }

    #[inline(always)]
    fn read(&self, src: &Src, lane: usize) -> u64 {
        match *src {
            Src::Reg(r) => self.reg(r, lane),
            Src::Imm(v) => v,
            _ => self.read_other(src, lane),
        }
    }

    /// Puts ALU source `src` into scratch row `i` unless it is a register (read in place):
    /// an immediate or a value the same in every lane once, other values per lane of `exec`.
    /// (Decoded immediates have rows of their own, `AluInst::immediates`.)
    #[inline(always)]
    fn fill_column(&mut self, i: usize, src: &Src, exec: u32) {
        match *src {
            Src::Reg(_) => {}
            Src::Imm(v) => self.warp.scratch.columns[i] = [v; 32],
            Src::Special(Special::Tid(d)) => self.warp.scratch.columns[i] = self.tid_row(d),
            _ if uniform(src) => {
                let first = exec.trailing_zeros().min(31) as usize;
                let v = self.read_other(src, first);
                self.warp.scratch.columns[i] = [v; 32];
            }
            _ => {
                let mut column = [0u64; 32];
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    column[lane] = self.read_other(src, lane);
                }
                self.warp.scratch.columns[i] = column;
            }
        }
    }

    /// Operand `src` of every lane of `exec` (registers and immediates: of all 32 lanes).
    #[inline(always)]
    fn operand(&self, src: &Src, exec: u32) -> [u64; 32] {
        match *src {
            Src::Reg(r) => *register_row(&self.warp.regs[self.reg_base..], r),
            Src::Imm(v) => [v; 32],
            Src::Special(Special::Tid(d)) => self.tid_row(d),
            Src::Special(special) if lane_special(special, 0).is_some() => {
                // All 32 lanes: a row computed without branches.
                std::array::from_fn(|lane| lane_special(special, lane).unwrap_or(0))
            }
            _ if uniform(src) => [self.read_other(src, exec.trailing_zeros().min(31) as usize); 32],
            _ => {
                let mut out = [0u64; 32];
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    out[lane] = self.read_other(src, lane);
                }
                out
            }
        }
    }

    /// `%tid.x`, `.y` or `.z` (`d` 0, 1, 2) of all 32 lanes.
    #[inline(always)]
    fn tid_row(&self, d: u8) -> [u64; 32] {
        let d = usize::from(d).min(2);
        let mut row = [0u64; 32];
        for (slot, tid) in row.iter_mut().zip(&self.warp.tid) {
            *slot = u64::from(tid[d]);
        }
        row
    }

    fn read_other(&self, src: &Src, lane: usize) -> u64 {
        read_other(
            self.cta,
            self.warp,
            self.reg_base,
            self.local_base,
            src,
            lane,
        )
    }

    /// Lanes of `active` for which the guard holds.
    #[inline(always)]
    fn guard(&self, inst: &Inst, active: u32) -> u32 {
        if inst.guard == NO_REG {
            return active;
        }
        let row = register_row(&self.warp.regs[self.reg_base..], inst.guard);
        let mut set = 0u32;
        for (lane, v) in row.iter().enumerate() {
            set |= ((v & 1) as u32) << lane;
        }
        if inst.guard_negated {
            active & !set
        } else {
            active & set
        }
    }

    /// Credits what the warp executed in `func` since `since` to its work towards compilation
    /// while it has no native code (the native engine's tiers; nothing with the interpreter),
    /// and starts the count again: at the end of a slice and when a call or return changes
    /// the function.
    fn credit_interpreted(&mut self) {
        if self.native.is_none() {
            self.cta
                .launch
                .program
                .credit_interpreted(self.function, self.warp.clock - self.since);
        }
        self.since = self.warp.clock;
    }

    fn frame(&mut self) -> &mut Frame {
        // The loop only runs while a frame exists.
        let last = self.warp.frames.len() - 1;
        &mut self.warp.frames[last]
    }

    /// Runs the slice; `native`: entering native code where there is some (the specials are
    /// read), else the interpreter alone, in a loop without the native engine's checks.
    fn run(&mut self, native: bool, budget: u64, visible: u64) -> Result<Yield, SimError> {
        #[cfg(target_arch = "x86_64")]
        if alu::x86_v3() {
            // SAFETY: the CPU has the features `run_v3` is compiled for.
            return unsafe {
                if native {
                    self.run_v3::<true>(budget, visible)
                } else {
                    self.run_v3::<false>(budget, visible)
                }
            };
        }
        if native {
            self.run_loop::<true>(budget, visible)
        } else {
            self.run_loop::<false>(budget, visible)
        }
    }

    /// [`Exec::run_loop`] compiled for CPUs with AVX2 (x86-64-v3), where the interpreter's
    /// 32-lane loops (addresses, range and alignment checks, guards, moves) vectorize with
    /// 64-bit lanes. Integer code only changes; float operations are not contracted (as in
    /// [`alu::AluOp::eval_warp`]), so the results are the same bits.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx,avx2,fma,bmi1,bmi2,lzcnt,popcnt")]
    unsafe fn run_v3<const NATIVE: bool>(
        &mut self,
        budget: u64,
        visible: u64,
    ) -> Result<Yield, SimError> {
        self.run_loop::<NATIVE>(budget, visible)
    }

    /// The interpreter loop: runs the warp until its slice ends, it waits at a barrier or it
    /// finishes. `NATIVE`: enters the runs of the native engine's code where there is some.
    #[inline(always)]
    fn run_loop<const NATIVE: bool>(
        &mut self,
        mut budget: u64,
        mut visible: u64,
    ) -> Result<Yield, SimError> {
        // What native runs read besides the registers, the same for the whole slice (the
        // CTA's windows, the launch's parameters, the warp's fields and this `Exec` by address):
        // made once, the loop fields set at each run's entry. Raw pointers only: the native
        // code reads and writes them, and has the interpreter execute some instructions through
        // `exec` ([`interpret_for_native`]), never both at once.
        let mut context = RunContext {
            shared_base: self.cta.shared_base,
            shared_len: self.cta.shared_len,
            params: self.cta.launch.params.address(),
            accessible_lo: &raw const self.warp.accessible.0,
            accessible_hi: &raw const self.warp.accessible.1,
            wrote: &raw mut self.warp.wrote,
            specials: self.specials.as_ptr(),
            tid: self.warp.tid.as_ptr().cast(),
            shared_offsets: self.cta.launch.shared_offsets.as_ptr(),
            shared_offsets_len: self.cta.launch.shared_offsets.len() as u64,
            local_base: self.cta.local_base,
            local_len: self.cta.local_len,
            global_atomics: &raw mut self.warp.global_atomics,
            recent: (&raw const self.warp.recent).cast(),
            exec: (self as *mut Self).cast(),
            loop_budget: 0,
            looped_warp: 0,
            looped_thread: 0,
            looped_active: 0,
            looped_allowance: 0,
        };
        loop {
            let Some(frame) = self.warp.frames.last_mut() else {
                self.warp.state = WarpState::Done;
                return Ok(Yield::Done);
            };
            let Some(top) = frame.stack.last_mut() else {
                if let Some(done) = self.finish_frame()? {
                    return Ok(done);
                }
                continue;
            };
            if top.mask == 0 || top.pc == top.rpc {
                frame.stack.pop();
                continue;
            }
            if budget == 0 || visible == 0 {
                return Ok(Yield::Slice);
            }
            let (start, rpc, active, reissue) = (top.pc, top.rpc, top.mask, top.reissue);
            if !reissue {
                // A run of straight instructions (`Op::is_straight`) with the pc in a local:
                // the SIMT stack is consulted again only where control flow may change it.
                // Each instruction is issued and counted exactly as below.
                let func = self.func;
                let population = u64::from(active.count_ones());
                let mut pc = start;
                // In a local: `straight` takes `self` mutably, so the field would be reloaded
                // at every instruction.
                let native = if NATIVE { self.native } else { None };
                // Whether a native run went round its loop: the stack's top may have changed.
                let mut looped = false;
                let result = loop {
                    // A run translated to native code, entered at its first instruction when
                    // the slice has budget for all of it and a visible access left, and no
                    // reconvergence point falls inside it: counted as the loop below counts
                    // each instruction it executes. It stops where this loop would (after the
                    // visible access that uses up the allowance) or before a load that
                    // faults, which the loop below then executes.
                    if let Some(run) = native.and_then(|native| native.run_at(pc)) {
                        let end = pc + run.len;
                        let first = pc - run.offset;
                        if u64::from(run.len) <= budget
                            && visible > 0
                            && (rpc <= pc || rpc >= end)
                            && self.warp.regs.len()
                                >= self.reg_base + self.func.registers as usize * 32
                        {
                            // The frame's registers, by address as the context's fields.
                            let regs = self.warp.regs.as_mut_ptr().wrapping_add(self.reg_base);
                            // A loop's body goes round in the native code only if the entry's
                            // reconvergence point is not met on the way (the branches'
                            // entries have theirs outside, `native::loop_back`).
                            let rounds = run.loop_branches > 0
                                && (rpc < first || rpc >= end + run.loop_branches);
                            context.loop_budget = if rounds {
                                budget - u64::from(run.len)
                            } else {
                                0
                            };
                            context.looped_warp = 0;
                            context.looped_thread = 0;
                            // SAFETY: the run touches the rows of registers below
                            // `func.registers` only (checked at compilation), all in the
                            // frame (checked above), shared memory inside the CTA's window
                            // (checked per lane), and the rest through this `Exec`.
                            let allowance = u32::try_from(visible)
                                .unwrap_or(u32::MAX)
                                .saturating_add(run.visible_before);
                            let stopped = unsafe {
                                (run.entry)(regs, active, &mut context, run.offset, allowance)
                            };
                            // What it executed: where it went round, the passes it completed
                            // (the first from the entry, their branches included, counted by
                            // the native code; their visible accesses, what they took from
                            // the allowance), then its last pass, from the run's first
                            // instruction with the lanes that went round; otherwise its one
                            // pass from the entry. The warp then goes on from the stack's top
                            // (a divergent branch pushed an entry for the lanes going round).
                            looped = context.looped_warp > 0;
                            let (pass, lanes, passes_visible) = if looped {
                                let taken = u64::from(allowance)
                                    .saturating_sub(context.looped_allowance)
                                    .saturating_sub(u64::from(run.visible_before));
                                (first, context.looped_active as u32, taken)
                            } else {
                                (pc, active, 0)
                            };
                            let pass_len = run.len + (pc - pass);
                            let done = stopped.saturating_sub(pass - first).min(pass_len);
                            let executed = &func.code[pass as usize..(pass + done) as usize];
                            let seen = if !looped && done == run.len {
                                run.visible
                            } else {
                                executed.iter().filter(|inst| inst.visible).count() as u32
                            };
                            let lanes = u64::from(lanes.count_ones());
                            let warp = context.looped_warp + u64::from(done);
                            budget = budget.saturating_sub(warp);
                            visible = visible.saturating_sub(passes_visible + u64::from(seen));
                            self.warp.clock += warp;
                            self.warp.thread_instructions +=
                                context.looped_thread + lanes * u64::from(done);
                            pc = pass + done;
                            if let Some(error) = self.native_error.take() {
                                // The instruction at `pc` failed in the interpreter: counted
                                // as the loop below counts one that fails.
                                budget = budget.saturating_sub(1);
                                if let Some(inst) = func.code.get(pc as usize) {
                                    visible = visible.saturating_sub(u64::from(inst.visible));
                                }
                                self.warp.clock += 1;
                                self.warp.thread_instructions += lanes;
                                break Err(error);
                            }
                            if looped || pc == rpc {
                                break Ok(());
                            }
                            if done > 0 {
                                continue;
                            }
                        }
                    }
                    let Some(inst) = func.code.get(pc as usize) else {
                        break Ok(());
                    };
                    if !inst.op.is_straight() || budget == 0 || visible == 0 {
                        break Ok(());
                    }
                    budget -= 1;
                    visible -= u64::from(inst.visible);
                    self.warp.clock += 1;
                    self.warp.thread_instructions += population;
                    let exec = self.guard(inst, active);
                    if let Err(error) = self.straight(inst, pc, active, exec) {
                        break Err(error);
                    }
                    pc += 1;
                    if pc == rpc {
                        break Ok(());
                    }
                };
                // The stack's top resumes at `pc` (after a native run that went round, the
                // entry a divergent loop branch pushed, if it did).
                if pc != start || looped {
                    if let Some(top) = self.frame().stack.last_mut() {
                        top.pc = pc;
                    }
                }
                result?;
                if pc != start || looped {
                    continue;
                }
            }
            budget -= 1;
            let pc = start;
            // One issue per instruction the warp executes, whatever its active mask or guard
            // (a re-executed target group of a divergent indirect call is no new issue).
            let issued = !reissue;
            let func = self.func;
            let Some(inst) = func.code.get(pc as usize) else {
                return Err(self.unsupported(pc, "control reached past the end of the function"));
            };
            let exec = self.guard(inst, active);
            visible -= u64::from(inst.visible);
            self.warp.clock += u64::from(issued);
            self.warp.thread_instructions +=
                u64::from(if issued { active.count_ones() } else { 0 });
            match &inst.op {
                Op::Bar {
                    kind,
                    id,
                    count,
                    dst,
                    pred,
                } => {
                    self.advance();
                    if exec == 0 {
                        continue;
                    }
                    let first = exec.trailing_zeros() as usize;
                    let id = self.read(id, first) as u32;
                    if id >= 16 {
                        return Err(self.unsupported(pc, "barrier id above 15"));
                    }
                    let count = count.as_ref().map(|c| self.read(c, first) as u32);
                    let mut votes = 0u32;
                    if !matches!(kind, BarKind::Sync | BarKind::Arrive) {
                        let mut m = exec;
                        while let Some(lane) = next_lane(&mut m) {
                            votes |= ((self.read(pred, lane) & 1) as u32) << lane;
                        }
                        self.warp.pending = Some(PendingReduction {
                            dst: *dst,
                            mask: exec,
                            reg_base: self.reg_base,
                        });
                    }
                    let blocking = *kind != BarKind::Arrive;
                    return Ok(Yield::Barrier {
                        id,
                        count,
                        blocking,
                        kind: *kind,
                        votes,
                        participants: exec,
                    });
                }
                Op::Bra { target, reconverge } => {
                    self.branch(pc, active, exec, *target, *reconverge);
                    continue;
                }
                Op::Brx {
                    index,
                    targets,
                    reconverge,
                } => {
                    self.branch_indexed(pc, active, exec, index, targets, *reconverge)?;
                    continue;
                }
                Op::Call(call) => {
                    self.call(pc, exec, call)?;
                    continue;
                }
                Op::Ret => {
                    if self.warp.frames.len() == 1 {
                        self.exit_lanes(exec);
                    } else {
                        let frame = self.frame();
                        for entry in &mut frame.stack {
                            entry.mask &= !exec;
                        }
                        frame.returned |= exec;
                    }
                    if exec != active {
                        self.advance();
                    }
                    continue;
                }
                Op::Exit => {
                    self.exit_lanes(exec);
                    if exec != active {
                        self.advance();
                    }
                    continue;
                }
                _ => self.straight(inst, pc, active, exec)?,
            }
            self.advance();
        }
    }

    /// Executes an instruction that neither branches, calls, returns, exits nor waits at a
    /// barrier (the SIMT stack stays as it is; the caller advances the pc).
    #[inline(always)]
    fn straight(
        &mut self,
        inst: &'a Inst,
        pc: u32,
        active: u32,
        exec: u32,
    ) -> Result<(), SimError> {
        match &inst.op {
            Op::Alu(alu) => {
                // Register operands are read in place (a register's 32 lanes are
                // contiguous) and the result is written in place; other operands are
                // filled into scratch rows. The operation was selected at decode
                // (`AluInst::kernel`).
                let count = alu.count as usize;
                for (i, src) in alu.srcs[..count].iter().enumerate() {
                    if !matches!(src, Src::Reg(_) | Src::Imm(_)) {
                        self.fill_column(i, src, exec);
                    }
                }
                let columns = &self.warp.scratch.columns;
                let column_rows = [
                    columns[0].as_ptr(),
                    columns[1].as_ptr(),
                    columns[2].as_ptr(),
                    columns[3].as_ptr(),
                ];
                let sink = self.warp.scratch.sink.as_mut_ptr();
                let regs = &mut self.warp.regs[self.reg_base..];
                let (base, len) = (regs.as_mut_ptr(), regs.len());
                let row = |r: u32| -> *mut u64 {
                    let start = r as usize * 32;
                    assert!(start + 32 <= len, "register {r} outside the frame");
                    // SAFETY: in bounds, checked above.
                    unsafe { base.add(start) }
                };
                let mut sources = column_rows;
                let mut immediates = alu.immediates.iter();
                for (i, src) in alu.srcs[..count].iter().enumerate() {
                    match src {
                        Src::Reg(r) => sources[i] = row(*r),
                        Src::Imm(_) => match immediates.next() {
                            Some(lanes) => sources[i] = lanes.as_ptr(),
                            None => {
                                return Err(self.unsupported(pc, "an immediate without its row"))
                            }
                        },
                        _ => {}
                    }
                }
                let dst = if alu.dst == NO_REG {
                    sink
                } else {
                    row(alu.dst)
                };
                // SAFETY: every pointer is a 32-lane row (`register_row`, the scratch
                // rows); the register file is not touched otherwise during the call.
                let bits = unsafe { alu.kernel.run(sources, exec, self.warp.carry, dst) };
                if alu.second != NO_REG {
                    let row = register_row_mut(&mut self.warp.regs[self.reg_base..], alu.second);
                    let mut m = exec;
                    while let Some(lane) = next_lane(&mut m) {
                        row[lane] = u64::from((bits.second >> lane) & 1);
                    }
                }
                if alu.writes_carry {
                    self.warp.carry = (self.warp.carry & !exec) | (bits.carry & exec);
                }
            }
            Op::Mov { dst, src, mask } => {
                if *dst != NO_REG {
                    let mut values = self.operand(src, exec);
                    for v in &mut values {
                        *v &= mask;
                    }
                    let regs = &mut self.warp.regs[self.reg_base..];
                    write_lanes(register_row_mut(regs, *dst), &values, exec);
                }
            }
            Op::Pack {
                dst,
                parts,
                count,
                bits,
            } => {
                let part_mask = alu::low_mask(*bits);
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    let mut v = 0u64;
                    for (i, part) in parts[..*count as usize].iter().enumerate() {
                        v |= (self.read(part, lane) & part_mask) << (i as u32 * u32::from(*bits));
                    }
                    self.set(*dst, lane, v);
                }
            }
            Op::Unpack {
                dsts,
                count,
                src,
                bits,
            } => {
                let part_mask = alu::low_mask(*bits);
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    let v = self.read(src, lane);
                    for (i, &d) in dsts[..*count as usize].iter().enumerate() {
                        self.set(d, lane, (v >> (i as u32 * u32::from(*bits))) & part_mask);
                    }
                }
            }
            Op::Ld {
                space,
                addr,
                dsts,
                count,
                ty,
            } => {
                let bytes = u64::from(ty.bytes);
                let total = bytes * u64::from(*count);
                // Every lane's address is checked before any register is written (the
                // registers of a failing launch are not seen again).
                let mut hosts = [0u64; 32];
                let layout = match self.lane_hosts(*space, addr, total, exec, &mut hosts) {
                    Some(layout) => layout,
                    None => {
                        let mut addresses = [0u64; 32];
                        self.addresses(addr, exec, &mut addresses);
                        let mut m = exec;
                        while let Some(lane) = next_lane(&mut m) {
                            let address = addresses[lane];
                            let host = self.resolve_aligned(*space, address, total, lane, pc)?;
                            hosts[lane] = host;
                        }
                        LaneLayout::Scattered
                    }
                };
                let regs = &mut self.warp.regs[self.reg_base..];
                for (i, &d) in dsts[..*count as usize].iter().enumerate() {
                    if d == NO_REG {
                        continue;
                    }
                    let row = register_row_mut(regs, d);
                    let offset = i as u64 * bytes;
                    // SAFETY: every lane's whole vector was checked above.
                    unsafe {
                        match ty.bytes {
                            1 => load_lanes::<1>(row, &hosts, offset, exec, ty.signed, layout),
                            2 => load_lanes::<2>(row, &hosts, offset, exec, ty.signed, layout),
                            4 => load_lanes::<4>(row, &hosts, offset, exec, ty.signed, layout),
                            _ => load_lanes::<8>(row, &hosts, offset, exec, ty.signed, layout),
                        }
                    }
                }
            }
            Op::St {
                space,
                addr,
                srcs,
                count,
                ty,
            } => {
                let bytes = u64::from(ty.bytes);
                let total = bytes * u64::from(*count);
                let mut hosts = [0u64; 32];
                if let Some(layout) = self.lane_hosts(*space, addr, total, exec, &mut hosts) {
                    // Every lane passed the checks: the stores, in the same order as below.
                    let count = *count as usize;
                    let mut vector = [[0u64; 32]; 4];
                    let scalar;
                    let values: &[[u64; 32]] = if let [src] = &srcs[..count] {
                        scalar = [self.operand(src, exec)];
                        &scalar
                    } else {
                        for (row, src) in vector.iter_mut().zip(&srcs[..count]) {
                            *row = self.operand(src, exec);
                        }
                        &vector[..count]
                    };
                    let wrote = self.warp.wrote;
                    // SAFETY: every lane's whole vector was checked above (`lane_hosts`).
                    let wrote = unsafe {
                        if layout == LaneLayout::PrivateRun {
                            let first = hosts[0] as usize;
                            match ty.bytes {
                                1 => store_run_private::<1>(first, values, wrote),
                                2 => store_run_private::<2>(first, values, wrote),
                                4 => store_run_private::<4>(first, values, wrote),
                                _ => store_run_private::<8>(first, values, wrote),
                            }
                        } else {
                            match ty.bytes {
                                1 => store_lanes::<1>(&hosts, values, exec, wrote),
                                2 => store_lanes::<2>(&hosts, values, exec, wrote),
                                4 => store_lanes::<4>(&hosts, values, exec, wrote),
                                _ => store_lanes::<8>(&hosts, values, exec, wrote),
                            }
                        }
                    };
                    self.warp.wrote = wrote;
                    return Ok(());
                }
                let mut addresses = [0u64; 32];
                self.addresses(addr, exec, &mut addresses);
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    let address = addresses[lane];
                    let host = self.resolve_aligned(*space, address, total, lane, pc)?;
                    for (i, src) in srcs[..*count as usize].iter().enumerate() {
                        let v = self.read(src, lane);
                        let at = host + i as u64 * bytes;
                        // SAFETY: `resolve` checked the whole vector's range.
                        unsafe {
                            if !self.warp.wrote {
                                let mask = u64::MAX >> (64 - 8 * u32::from(ty.bytes));
                                self.warp.wrote = memory::load(at, ty.bytes) != v & mask;
                            }
                            memory::store(at, ty.bytes, v)
                        };
                    }
                }
            }
            Op::Cvta {
                to_generic,
                space,
                dst,
                src,
            } => {
                if *dst != NO_REG {
                    let mut values = self.operand(src, exec);
                    let uniform_base = self.uniform_window_base(*space);
                    for (lane, v) in values.iter_mut().enumerate() {
                        let base = uniform_base.unwrap_or_else(|| self.thread_local_base(lane));
                        *v = if *to_generic {
                            v.wrapping_add(base)
                        } else {
                            v.wrapping_sub(base)
                        };
                    }
                    let regs = &mut self.warp.regs[self.reg_base..];
                    write_lanes(register_row_mut(regs, *dst), &values, exec);
                }
            }
            Op::IsSpace { space, dst, src } => {
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    let a = self.read(src, lane);
                    let cta = self.cta;
                    let in_shared = a.wrapping_sub(cta.shared_base) < cta.shared_len;
                    let local = self.thread_local_base(lane);
                    let in_local = a.wrapping_sub(local) < cta.window;
                    let v = match space {
                        WindowSpace::Shared => in_shared,
                        WindowSpace::Local => in_local,
                        WindowSpace::Param => cta.launch.params.contains(a, 1),
                        WindowSpace::Global => !in_shared && !in_local,
                    };
                    self.set(*dst, lane, u64::from(v));
                }
            }
            Op::Atom {
                space,
                addr,
                op,
                ty,
                dst,
                b,
                c,
            } => {
                if exec == 0 {
                    // Guarded off in every lane (counted and issued all the same).
                    return Ok(());
                }
                let bytes = ty.bytes();
                let cta = self.cta;
                let mut hosts = [0u64; 32];
                // One lane (a warp-aggregated atomic) takes the lane-by-lane path below at
                // once: checking a row of 32 addresses would cost more than the atomic.
                if exec.count_ones() > 1
                    && self
                        .lane_hosts(*space, addr, bytes, exec, &mut hosts)
                        .is_some()
                {
                    // Every lane passed the checks: the atomics, lane by lane as below.
                    let (bv, cv) = (self.operand(b, exec), self.operand(c, exec));
                    let mut olds = [0u64; 32];
                    let mut m = exec;
                    while let Some(lane) = next_lane(&mut m) {
                        let host = hosts[lane];
                        // The CTA's shared and local windows are this worker's alone.
                        let private = host.wrapping_sub(cta.shared_base) < cta.shared_len
                            || host.wrapping_sub(cta.local_base) < cta.local_len;
                        if *space == Space::Host && !private {
                            self.warp.global_atomics += 1;
                        }
                        // SAFETY: checked accessible and aligned (`lane_hosts`); private
                        // memory is accessed by no other thread.
                        let old = unsafe {
                            if private {
                                memory::atomic_private(host, *op, *ty, bv[lane], cv[lane])
                            } else {
                                memory::atomic(host, *op, *ty, bv[lane], cv[lane])
                            }
                        };
                        if !self.warp.wrote && *dst != NO_REG {
                            // SAFETY: as above.
                            self.warp.wrote = unsafe { memory::load(host, bytes as u8) } != old;
                        }
                        olds[lane] = match ty {
                            AtomType::S32 => old as u32 as i32 as i64 as u64,
                            _ => old,
                        };
                    }
                    if *dst != NO_REG {
                        let regs = &mut self.warp.regs[self.reg_base..];
                        write_lanes(register_row_mut(regs, *dst), &olds, exec);
                    }
                    return Ok(());
                }
                let mut addresses = [0u64; 32];
                self.addresses(addr, exec, &mut addresses);
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    let address = addresses[lane];
                    let host = self.resolve_aligned(*space, address, bytes, lane, pc)?;
                    // Global: `.global`, or a generic address outside the CTA's shared
                    // and local windows.
                    if *space == Space::Host
                        && host.wrapping_sub(cta.shared_base) >= cta.shared_len
                        && host.wrapping_sub(cta.local_base) >= cta.local_len
                    {
                        self.warp.global_atomics += 1;
                    }
                    let (bv, cv) = (self.read(b, lane), self.read(c, lane));
                    // SAFETY: checked accessible and aligned above.
                    let old = unsafe { memory::atomic(host, *op, *ty, bv, cv) };
                    // Reductions (`red`, no destination) are what counter code uses:
                    // they do not tell a working warp from a waiting one.
                    if !self.warp.wrote && *dst != NO_REG {
                        // SAFETY: as above.
                        self.warp.wrote = unsafe { memory::load(host, bytes as u8) } != old;
                    }
                    let old = match ty {
                        AtomType::S32 => old as u32 as i32 as i64 as u64,
                        _ => old,
                    };
                    self.set(*dst, lane, old);
                }
            }
            Op::Fence => std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst),
            Op::Nop => {}
            Op::Trap => {
                if exec != 0 {
                    return Err(SimError::Trap { line: inst.line });
                }
            }
            Op::Activemask { dst } => {
                if *dst != NO_REG {
                    let regs = &mut self.warp.regs[self.reg_base..];
                    write_lanes(register_row_mut(regs, *dst), &[u64::from(active); 32], exec);
                }
            }
            Op::Vote { mode, dst, pred } => {
                let mut set = 0u32;
                for (lane, v) in self.operand(pred, exec).iter().enumerate() {
                    set |= ((v & 1) as u32) << lane;
                }
                set &= exec;
                let v = match mode {
                    VoteMode::Ballot => u64::from(set),
                    VoteMode::All => u64::from(set == exec),
                    VoteMode::Any => u64::from(set != 0),
                    VoteMode::Uni => u64::from(set == exec || set == 0),
                };
                if *dst != NO_REG {
                    let regs = &mut self.warp.regs[self.reg_base..];
                    write_lanes(register_row_mut(regs, *dst), &[v; 32], exec);
                }
            }
            Op::Shfl {
                mode,
                dst,
                dst_pred,
                a,
                b,
                c,
            } => self.shuffle(exec, *mode, (*dst, *dst_pred), [a, b, c]),
            Op::Match {
                all,
                wide,
                dst,
                dst_pred,
                a,
            } => {
                let mask = if *wide { u64::MAX } else { 0xFFFF_FFFF };
                let values = self.operand(a, exec).map(|v| v & mask);
                // Each lane's mask of lanes holding its value (`match.any`), or that of all
                // lanes when they agree (`match.all`: one pass, no grouping).
                let mut same_as = [0u32; 32];
                if *all {
                    let first = values[exec.trailing_zeros().min(31) as usize];
                    let mut differ = 0u32;
                    for (lane, &v) in values.iter().enumerate() {
                        differ |= u32::from(v != first) << lane;
                    }
                    same_as = [if differ & exec == 0 { exec } else { 0 }; 32];
                } else {
                    // The lanes sorted by value: each run of equal values is a group.
                    let mut lanes = [(0u64, 0u8); 32];
                    let mut count = 0;
                    let mut m = exec;
                    while let Some(lane) = next_lane(&mut m) {
                        lanes[count] = (values[lane], lane as u8);
                        count += 1;
                    }
                    let sorted = &mut lanes[..count];
                    sorted.sort_unstable();
                    for group in sorted.chunk_by(|x, y| x.0 == y.0) {
                        let same = group.iter().fold(0u32, |mask, &(_, lane)| mask | 1 << lane);
                        for &(_, lane) in group {
                            same_as[usize::from(lane)] = same;
                        }
                    }
                }
                let regs = &mut self.warp.regs[self.reg_base..];
                if *dst != NO_REG {
                    write_lanes(register_row_mut(regs, *dst), &same_as.map(u64::from), exec);
                }
                if *dst_pred != NO_REG {
                    // `match.any` always finds the lane itself; `match.all`, all or none.
                    write_lanes(
                        register_row_mut(regs, *dst_pred),
                        &same_as.map(|same| u64::from(same != 0)),
                        exec,
                    );
                }
            }
            Op::Redux { op, signed, dst, a } => {
                let mut acc: Option<u32> = None;
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    let v = self.read(a, lane) as u32;
                    acc = Some(match acc {
                        None => v,
                        Some(x) => match op {
                            ReduxOp::Add => x.wrapping_add(v),
                            ReduxOp::Min if *signed => (x as i32).min(v as i32) as u32,
                            ReduxOp::Max if *signed => (x as i32).max(v as i32) as u32,
                            ReduxOp::Min => x.min(v),
                            ReduxOp::Max => x.max(v),
                            ReduxOp::And => x & v,
                            ReduxOp::Or => x | v,
                            ReduxOp::Xor => x ^ v,
                        },
                    });
                }
                let v = u64::from(acc.unwrap_or(0));
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    self.set(*dst, lane, v);
                }
            }
            Op::Tex(tex) => self.texture(pc, exec, tex)?,
            Op::Unsupported(what) => {
                return Err(SimError::Unsupported {
                    what: what.to_string(),
                    line: inst.line,
                })
            }
            Op::Bar { .. } | Op::Bra { .. } | Op::Brx { .. } | Op::Call(_) | Op::Ret | Op::Exit => {
                return Err(self.unsupported(pc, "control flow taken for a straight instruction"))
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn advance(&mut self) {
        if let Some(top) = self.frame().stack.last_mut() {
            top.pc += 1;
        }
    }

    /// Removes `lanes` from every frame: they exited.
    fn exit_lanes(&mut self, lanes: u32) {
        self.warp.exited |= lanes;
        for frame in &mut self.warp.frames {
            for entry in &mut frame.stack {
                entry.mask &= !lanes;
            }
        }
    }

    fn branch(&mut self, pc: u32, active: u32, taken: u32, target: u32, reconverge: u32) {
        let frame = self.frame();
        let Some(top) = frame.stack.last_mut() else {
            return;
        };
        if taken == active {
            top.pc = target;
        } else if taken == 0 {
            top.pc = pc + 1;
        } else {
            top.pc = reconverge;
            let not_taken = active & !taken;
            if pc + 1 != reconverge {
                frame.stack.push(Entry {
                    pc: pc + 1,
                    rpc: reconverge,
                    mask: not_taken,
                    reissue: false,
                });
            }
            if target != reconverge {
                frame.stack.push(Entry {
                    pc: target,
                    rpc: reconverge,
                    mask: taken,
                    reissue: false,
                });
            }
        }
    }

    fn branch_indexed(
        &mut self,
        pc: u32,
        active: u32,
        exec: u32,
        index: &Src,
        targets: &[u32],
        reconverge: u32,
    ) -> Result<(), SimError> {
        // Group lanes by target (lanes whose guard is false fall through).
        let mut groups: Vec<(u32, u32)> = Vec::new();
        let fall = active & !exec;
        if fall != 0 {
            groups.push((pc + 1, fall));
        }
        let mut m = exec;
        while let Some(lane) = next_lane(&mut m) {
            let i = self.read(index, lane) as u32 as usize;
            let Some(&target) = targets.get(i) else {
                return Err(self.unsupported(pc, &format!("brx.idx index {i} outside its table")));
            };
            match groups.iter_mut().find(|(t, _)| *t == target) {
                Some(g) => g.1 |= 1 << lane,
                None => groups.push((target, 1 << lane)),
            }
        }
        let frame = self.frame();
        let Some(top) = frame.stack.last_mut() else {
            return Ok(());
        };
        if let [(target, _)] = groups.as_slice() {
            top.pc = *target;
            return Ok(());
        }
        top.pc = reconverge;
        for &(target, mask) in groups.iter().rev() {
            if target != reconverge {
                frame.stack.push(Entry {
                    pc: target,
                    rpc: reconverge,
                    mask,
                    reissue: false,
                });
            }
        }
        Ok(())
    }

    /// Base of the window `space` converts to generic addresses from, where it is the same for
    /// every lane; `None` where each thread has its own (local memory, and a device function's
    /// parameters): [`Exec::thread_local_base`].
    fn uniform_window_base(&self, space: WindowSpace) -> Option<u64> {
        match window_base(space, self.func.is_entry) {
            WindowBase::Zero => Some(0),
            WindowBase::Shared => Some(self.cta.shared_base),
            WindowBase::PerThread => None,
        }
    }

    #[inline(always)]
    fn thread_local_base(&self, lane: usize) -> u64 {
        self.cta.local_base + u64::from(self.warp.linear[lane]) * self.cta.window
    }

    #[inline(always)]
    fn address(&self, addr: &Addr, lane: usize) -> u64 {
        self.read(&addr.base, lane).wrapping_add(addr.offset as u64)
    }

    /// The address of every lane of `exec` into `out` (a register base: of all 32 lanes, one
    /// straight loop; a base the same in every lane: once; the other lanes' values are not
    /// used).
    #[inline(always)]
    fn addresses(&self, addr: &Addr, exec: u32, out: &mut [u64; 32]) {
        let offset = addr.offset as u64;
        match addr.base {
            Src::Reg(r) => {
                let row = register_row(&self.warp.regs[self.reg_base..], r);
                for (o, v) in out.iter_mut().zip(row) {
                    *o = v.wrapping_add(offset);
                }
            }
            Src::Imm(_) | Src::KernelParam(_) | Src::Shared { .. } | Src::Frame(_) => {
                let first = exec.trailing_zeros().min(31) as usize;
                *out = [self.address(addr, first); 32];
            }
            _ => {
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    out[lane] = self.address(addr, lane);
                }
            }
        }
    }

    /// The host addresses of `[address, address + len)` for every lane of `exec` of memory
    /// operand `addr` into `hosts`, when each lies in the shared window or in the warp's cached
    /// accessible host range (or, failing that, the recent range holding the first lane's
    /// address) and is aligned to `len`: what [`Exec::resolve`] and the alignment check accept,
    /// checked for all lanes in one straight loop, with the lanes' [`LaneLayout`] (strided by
    /// `len`). `None` when some lane needs the per-lane path (local memory, another host range,
    /// an error to report).
    #[inline(always)]
    fn lane_hosts(
        &mut self,
        space: Space,
        addr: &Addr,
        len: u64,
        exec: u32,
        hosts: &mut [u64; 32],
    ) -> Option<LaneLayout> {
        let offset = addr.offset as u64;
        let private = space == Space::Shared;
        for attempt in 0..2 {
            let (base, lo, hi) = match space {
                Space::Host => (0, self.warp.accessible.0, self.warp.accessible.1),
                Space::Shared => (self.cta.shared_base, 0, self.cta.shared_len),
                Space::Local => return None,
            };
            let last = hi.checked_sub(len)?;
            // Non-short-circuit `&`, here and in the loops below: no branches, so that the loop
            // vectorizes without masked stores (slow on some CPUs).
            let check = |address: u64| {
                let host = base.wrapping_add(address);
                (
                    host,
                    (address >= lo) & (address <= last) & (host & (len - 1) == 0),
                )
            };
            let ok = match addr.base {
                Src::Reg(r) => {
                    let row = register_row(&self.warp.regs[self.reg_base..], r);
                    let v0 = row[0];
                    // With all lanes running: how far they are from a run (lane `l` at the
                    // first lane's address plus `l * len`) and from a broadcast, accumulated
                    // with xor and or only: a loop that vectorizes without compares. (Not
                    // with some lanes off: those take the general check below.)
                    let (mut off_run, mut off_same) = (1u64, 1u64);
                    if exec == u32::MAX {
                        (off_run, off_same) = (0, 0);
                        for (lane, &v) in row.iter().enumerate() {
                            off_run |= v ^ v0.wrapping_add(lane as u64 * len);
                            off_same |= v ^ v0;
                        }
                    }
                    // (A run's alignment follows from its first lane's only when `len` is a
                    // power of two; a 3-element vector is not.)
                    let (same, run) = (off_same == 0, off_run == 0 && len.is_power_of_two());
                    if same | run {
                        // The addresses rise from the first lane's to the last lane's without
                        // wrapping, by multiples of `len`: all lanes pass `check` exactly
                        // when the first and the last do.
                        let step = if same { 0 } else { len };
                        let first = v0.wrapping_add(offset);
                        let last_lane = first.wrapping_add(31 * step);
                        let (h0, first_ok) = check(first);
                        let (_, last_ok) = check(last_lane);
                        if first_ok & last_ok & (last_lane >= first) {
                            for (lane, host) in hosts.iter_mut().enumerate() {
                                *host = h0.wrapping_add(lane as u64 * step);
                            }
                            return Some(if same {
                                LaneLayout::Same
                            } else if private {
                                LaneLayout::PrivateRun
                            } else {
                                LaneLayout::Scattered
                            });
                        }
                    }
                    // Any other pattern: every lane of `exec` checked, failures accumulated
                    // as bits (no per-lane booleans to combine).
                    // `lo..=last` holds the addresses that pass (none when `last < lo`).
                    let (span, none_pass) = match last.checked_sub(lo) {
                        Some(span) => (span, 0),
                        None => (0, 1),
                    };
                    let mut bad = 0u64;
                    for (lane, (&v, host)) in row.iter().zip(hosts.iter_mut()).enumerate() {
                        let address = v.wrapping_add(offset);
                        *host = base.wrapping_add(address);
                        let outside = u64::from(address.wrapping_sub(lo) > span) | none_pass;
                        let lane_bad = outside | (*host & (len - 1));
                        bad |= lane_bad & 0u64.wrapping_sub(u64::from((exec >> lane) & 1));
                    }
                    if bad == 0 {
                        return Some(LaneLayout::Scattered);
                    }
                    false
                }
                Src::Imm(_) | Src::KernelParam(_) | Src::Shared { .. } | Src::Frame(_) => {
                    let first = exec.trailing_zeros().min(31) as usize;
                    let (h, good) = check(self.address(addr, first));
                    *hosts = [h; 32];
                    if good || exec == 0 {
                        return Some(if exec == u32::MAX {
                            LaneLayout::Same
                        } else {
                            LaneLayout::Scattered
                        });
                    }
                    false
                }
                _ => {
                    let mut ok = true;
                    let mut m = exec;
                    while let Some(lane) = next_lane(&mut m) {
                        let (h, good) = check(self.address(addr, lane));
                        hosts[lane] = h;
                        ok &= good;
                    }
                    if ok {
                        return Some(LaneLayout::Scattered);
                    }
                    false
                }
            };
            debug_assert!(!ok);
            // A host range other than the cached one: try the recent range that holds the
            // first lane's address (host addresses are the addresses themselves), once.
            if attempt > 0 || space != Space::Host || exec == 0 {
                return None;
            }
            let first = hosts[exec.trailing_zeros() as usize];
            if !self.warp.promote_recent(first, len) {
                return None;
            }
        }
        None
    }

    /// [`Self::resolve`] for a load, store or atomic of `len` bytes (a power of two), whose
    /// address must also be a multiple of its size.
    #[inline(always)]
    fn resolve_aligned(
        &mut self,
        space: Space,
        address: u64,
        len: u64,
        lane: usize,
        pc: u32,
    ) -> Result<u64, SimError> {
        let host = self.resolve(space, address, len, lane, pc)?;
        if host & (len - 1) != 0 {
            return Err(self.misaligned(pc, address, len, lane));
        }
        Ok(host)
    }

    /// The host address of `[address, address + len)` in `space` for `lane`, checked.
    #[inline(always)]
    fn resolve(
        &mut self,
        space: Space,
        address: u64,
        len: u64,
        lane: usize,
        pc: u32,
    ) -> Result<u64, SimError> {
        match space {
            Space::Host => {
                let (lo, hi) = self.warp.accessible;
                if address >= lo
                    && address.wrapping_add(len) <= hi
                    && address.wrapping_add(len) >= address
                {
                    return Ok(address);
                }
                if self.host_accessible(address, len) {
                    Ok(address)
                } else {
                    Err(self.invalid_address(pc, address, len, lane))
                }
            }
            Space::Shared => {
                if address
                    .checked_add(len)
                    .is_some_and(|end| end <= self.cta.shared_len)
                {
                    Ok(self.cta.shared_base + address)
                } else {
                    Err(self.invalid_address(pc, address, len, lane))
                }
            }
            Space::Local => {
                if address
                    .checked_add(len)
                    .is_some_and(|end| end <= self.cta.window)
                {
                    Ok(self.thread_local_base(lane) + address)
                } else {
                    Err(self.invalid_address(pc, address, len, lane))
                }
            }
        }
    }

    /// Whether a host range may be accessed; caches the range found in the warp.
    fn host_accessible(&mut self, address: u64, len: u64) -> bool {
        let Some(end) = address.checked_add(len) else {
            return false;
        };
        if self.warp.promote_recent(address, len) {
            return true;
        }
        let cta = self.cta;
        let launch = cta.launch;
        let windows = [
            (cta.shared_base, cta.shared_len),
            (cta.local_base, cta.local_len),
            (launch.params.address(), launch.params.len() as u64),
            launch.program.module_range(),
        ];
        for (base, size) in windows {
            if address >= base && end <= base + size {
                self.warp.set_accessible((base, base + size), false);
                return true;
            }
        }
        if let Some(range) = launch.program.heap_range(address, len) {
            self.warp.set_accessible(range, true);
            return true;
        }
        if let Some(range) = launch.env.global_range(address, len) {
            self.warp.set_accessible(range, false);
            return true;
        }
        // Cache a whole aligned block where the environment allows it, so that neighbouring
        // accesses skip the query.
        for block in [1u64 << 16, 1 << 12] {
            let lo = address & !(block - 1);
            if end <= lo + block && launch.env.global_accessible(lo, block) {
                self.warp.set_accessible((lo, lo + block), false);
                return true;
            }
        }
        if launch.env.global_accessible(address, len) {
            self.warp.set_accessible((address, end), false);
            return true;
        }
        false
    }

    /// `shfl.sync`: `dsts` is the value and the optional predicate destination, `sources`
    /// the value, lane/offset and clamp/segment operands.
    fn shuffle(&mut self, exec: u32, mode: ShflMode, dsts: (u32, u32), sources: [&Src; 3]) {
        let (dst, dst_pred) = dsts;
        let [a, b, c] = sources;
        // Every lane's value (a lane may read an inactive lane's), the other operands of the
        // lanes that run.
        let values = self.operand(a, u32::MAX);
        let (bs, cs) = (self.operand(b, exec), self.operand(c, exec));
        let mut results = [0u64; 32];
        let mut valid = [0u64; 32];
        // The mode chosen once, then one straight loop over all 32 lanes (the lanes outside
        // `exec` are computed from whatever their rows hold and never written).
        match mode {
            ShflMode::Up => shuffle_lanes(&values, &bs, &cs, &mut results, &mut valid, pick_up),
            ShflMode::Down => shuffle_lanes(&values, &bs, &cs, &mut results, &mut valid, pick_down),
            ShflMode::Bfly => shuffle_lanes(&values, &bs, &cs, &mut results, &mut valid, pick_bfly),
            ShflMode::Idx => shuffle_lanes(&values, &bs, &cs, &mut results, &mut valid, pick_idx),
        }
        let regs = &mut self.warp.regs[self.reg_base..];
        if dst != NO_REG {
            write_lanes(register_row_mut(regs, dst), &results, exec);
        }
        if dst_pred != NO_REG {
            write_lanes(register_row_mut(regs, dst_pred), &valid, exec);
        }
    }

    fn texture(
        &mut self,
        pc: u32,
        exec: u32,
        tex: &crate::decode::TexInst,
    ) -> Result<(), SimError> {
        let launch = self.cta.launch;
        let mut cached: Option<(u64, crate::Texture)> = None;
        let mut m = exec;
        while let Some(lane) = next_lane(&mut m) {
            let handle = self.read(&tex.handle, lane);
            let texture = match cached {
                Some((k, t)) if k == handle => t,
                _ => {
                    let found = if handle & HANDLE_TAG_MASK == TEXREF_HANDLE_TAG {
                        launch
                            .program
                            .texrefs
                            .get((handle & !HANDLE_TAG_MASK) as usize)
                            .and_then(|name| launch.env.texture(TextureRef::Reference(name)))
                    } else {
                        launch.env.texture(TextureRef::Object(handle))
                    };
                    let Some(t) = found else {
                        return Err(self.unsupported(pc, "fetch from a texture that is not bound"));
                    };
                    cached = Some((handle, t));
                    t
                }
            };
            let channel_bytes = u64::from(texture.bits_per_channel / 8);
            if !matches!(channel_bytes, 1 | 2 | 4) || !matches!(texture.channels, 1 | 2 | 4) {
                return Err(self.unsupported(pc, "texture format"));
            }
            let out = match texture.sampling {
                Some(sampling) => self.sample(pc, lane, &texture, &sampling, tex)?,
                None if tex.dims == 1 && !tex.float_coords => {
                    self.fetch_linear(pc, lane, &texture, tex)?
                }
                None => {
                    return Err(self.unsupported(
                        pc,
                        "a fetch by coordinates from a texture over linear memory (which only \
                         tex1Dfetch reads, by texel index)",
                    ))
                }
            };
            for (i, &d) in tex.dsts.iter().enumerate() {
                self.set(d, lane, out[i]);
            }
        }
        Ok(())
    }

    /// `tex1Dfetch`: texel `index` of linear memory, zeros outside.
    fn fetch_linear(
        &mut self,
        pc: u32,
        lane: usize,
        texture: &crate::Texture,
        tex: &crate::decode::TexInst,
    ) -> Result<[u64; 4], SimError> {
        let index = self.read(&tex.coords[0], lane) as u32 as i32;
        let channel_bytes = u64::from(texture.bits_per_channel / 8);
        let texel_bytes = channel_bytes * u64::from(texture.channels);
        let mut out = [0u64; 4];
        let offset = i64::from(index) * texel_bytes as i64;
        let inside = index >= 0 && (offset as u64) + texel_bytes <= texture.len_bytes;
        if inside {
            let host = texture.base + offset as u64;
            out = self.texel(pc, lane, texture, host, tex.result)?;
        }
        Ok(out)
    }

    /// The channels of the texel at host address `host`, converted to the result type.
    fn texel(
        &mut self,
        pc: u32,
        lane: usize,
        texture: &crate::Texture,
        host: u64,
        result: ChannelKind,
    ) -> Result<[u64; 4], SimError> {
        let channel_bytes = u64::from(texture.bits_per_channel / 8);
        let texel_bytes = channel_bytes * u64::from(texture.channels);
        if !self.host_accessible(host, texel_bytes) {
            return Err(self.invalid_address(pc, host, texel_bytes, lane));
        }
        let mut out = [0u64; 4];
        for (ch, slot) in out.iter_mut().take(texture.channels as usize).enumerate() {
            // SAFETY: checked accessible above.
            let raw =
                unsafe { memory::load(host + ch as u64 * channel_bytes, channel_bytes as u8) };
            *slot = texel_value(raw, texture, result);
        }
        Ok(out)
    }

    /// A fetch by coordinates (`tex1D`/`tex2D`/`tex3D` on an array or pitched memory), as the
    /// CUDA programming guide's "Texture Fetching" appendix specifies it: addressing per
    /// dimension, nearest-point or linear filtering (weights in 1/256 steps).
    fn sample(
        &mut self,
        pc: u32,
        lane: usize,
        texture: &crate::Texture,
        sampling: &crate::Sampling,
        tex: &crate::decode::TexInst,
    ) -> Result<[u64; 4], SimError> {
        let dims = usize::from(tex.dims.min(3));
        let mut coords = [0f32; 3];
        for (d, c) in coords.iter_mut().enumerate().take(dims) {
            let raw = self.read(&tex.coords[d], lane);
            *c = if tex.float_coords {
                f32::from_bits(raw as u32)
            } else {
                raw as u32 as i32 as f32
            };
        }
        let filter = sampling.linear_filter && tex.result == ChannelKind::Float;
        // Per dimension: up to two texel indices (`None`: border) and the second's weight.
        let mut taps = [[(Some(0i64), 1f32), (None, 0f32)]; 3];
        for d in 0..dims {
            let n = i64::from(sampling.extent[d].max(1));
            let mode = match sampling.address[d] {
                AddressMode::Wrap | AddressMode::Mirror if !sampling.normalized_coords => {
                    AddressMode::Clamp
                }
                mode => mode,
            };
            let mut u = coords[d];
            if sampling.normalized_coords {
                u *= n as f32;
            }
            if u.is_nan() {
                u = 0.0;
            }
            if filter {
                let below = u - 0.5;
                let i = below.floor();
                let weight = ((below - i) * 256.0).round() / 256.0;
                let i = i as i64;
                taps[d] = [
                    (texel_index(i, n, mode), 1.0 - weight),
                    (texel_index(i + 1, n, mode), weight),
                ];
            } else {
                taps[d] = [(texel_index(u.floor() as i64, n, mode), 1.0), (None, 0.0)];
            }
        }
        let texel_bytes = u64::from(texture.bits_per_channel / 8) * u64::from(texture.channels);
        let corners = if filter { 1usize << dims } else { 1 };
        let mut sum = [0f32; 4];
        let mut point = [0u64; 4];
        for corner in 0..corners {
            let mut weight = 1f32;
            let mut index = [0i64; 3];
            let mut border = false;
            for d in 0..dims {
                let (i, w) = taps[d][(corner >> d) & 1];
                weight *= w;
                match i {
                    Some(i) => index[d] = i,
                    None => border = true,
                }
            }
            let value = if border {
                let mut v = [0u64; 4];
                if tex.result == ChannelKind::Float {
                    for (slot, b) in v.iter_mut().zip(sampling.border) {
                        *slot = u64::from(b.to_bits());
                    }
                }
                v
            } else {
                let host = texture.base
                    + index[2] as u64 * sampling.slice_pitch
                    + index[1] as u64 * sampling.row_pitch
                    + index[0] as u64 * texel_bytes;
                self.texel(pc, lane, texture, host, tex.result)?
            };
            if !filter {
                point = value;
                break;
            }
            for (acc, v) in sum.iter_mut().zip(value) {
                *acc += weight * f32::from_bits(v as u32);
            }
        }
        if filter {
            for (slot, v) in point.iter_mut().zip(sum) {
                *slot = u64::from(v.to_bits());
            }
        }
        Ok(point)
    }

    fn call(&mut self, pc: u32, exec: u32, call: &CallInst) -> Result<(), SimError> {
        let program = self.cta.launch.program;
        if exec == 0 {
            self.advance();
            return Ok(());
        }
        let callee = match call.target {
            CallTarget::Direct(f) => f,
            CallTarget::Builtin(builtin) => {
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    builtins::call(self, pc, builtin, call, lane)?;
                }
                self.advance();
                return Ok(());
            }
            CallTarget::Indirect(src) => {
                let mut groups: Vec<(u64, u32)> = Vec::new();
                let mut m = exec;
                while let Some(lane) = next_lane(&mut m) {
                    let t = self.read(&src, lane);
                    match groups.iter_mut().find(|(x, _)| *x == t) {
                        Some(g) => g.1 |= 1 << lane,
                        None => groups.push((t, 1 << lane)),
                    }
                }
                if groups.len() > 1 {
                    // Lanes calling different functions run one group at a time, as after a
                    // divergent branch: each group re-executes the call on its own.
                    let frame = self.frame();
                    if let Some(top) = frame.stack.last_mut() {
                        top.pc = pc + 1;
                    }
                    // Lanes that skip the call (guard false) wait in the top entry. The call
                    // was issued (and counted) once, now; its re-executions are not.
                    for &(_, mask) in groups.iter().rev() {
                        frame.stack.push(Entry {
                            pc,
                            rpc: pc + 1,
                            mask,
                            reissue: true,
                        });
                    }
                    return Ok(());
                }
                let target = groups[0].0;
                let index = target & !HANDLE_TAG_MASK;
                if target & HANDLE_TAG_MASK != FUNCTION_ADDRESS_TAG
                    || index >= program.functions.len() as u64
                {
                    return Err(self.unsupported(
                        pc,
                        &format!("indirect call to {target:#x}, which is not a function"),
                    ));
                }
                index as u32
            }
        };
        let target = &program.functions[callee as usize];
        if target.is_entry {
            return Err(self.unsupported(pc, "call of a kernel"));
        }
        let new_base = (self.local_base + u64::from(self.func.frame_bytes)).next_multiple_of(16);
        if new_base + u64::from(target.frame_bytes) > self.cta.window
            || self.warp.frames.len() >= MAX_CALL_DEPTH
        {
            return Err(self.unsupported(
                pc,
                &format!(
                    "call stack of `{}` exceeds the {} bytes of local memory per thread",
                    target.name, self.cta.window
                ),
            ));
        }
        // Arguments: from the caller's `.param` variables (or values) into the callee's
        // parameter slots, per lane.
        let mut m = exec;
        while let Some(lane) = next_lane(&mut m) {
            let thread = self.thread_local_base(lane);
            for (arg, slot) in call.args.iter().zip(&target.params) {
                let to = thread + new_base + u64::from(slot.offset);
                match *arg {
                    CallSlot::Frame { offset, bytes } => {
                        let from = thread + self.local_base + u64::from(offset);
                        // SAFETY: both ranges lie in this thread's local window: frames are
                        // checked against the window size above and at decode.
                        unsafe { memory::copy(from, to, u64::from(bytes.min(slot.bytes))) };
                    }
                    CallSlot::Value(_) | CallSlot::Register(_) if slot.bytes <= 8 => {
                        let v = self.argument(arg, lane);
                        let bytes = slot.bytes.clamp(1, 8).next_power_of_two().min(8) as u8;
                        // SAFETY: inside this thread's local window, as above.
                        unsafe { memory::store(to, bytes, v) };
                    }
                    _ => return Err(self.unsupported(pc, "argument wider than 8 bytes")),
                }
            }
        }
        self.advance();
        let reg_base = self.warp.regs.len();
        self.warp
            .regs
            .resize(reg_base + target.registers as usize * 32, 0);
        self.warp.frames.push(Frame {
            function: callee,
            stack: vec![Entry {
                pc: 0,
                rpc: EXIT_PC,
                mask: exec,
                reissue: false,
            }],
            reg_base,
            local_base: new_base,
            call_pc: pc,
            returned: 0,
        });
        self.credit_interpreted();
        self.func = target;
        self.function = callee;
        self.native = program.native_code(callee);
        self.reg_base = reg_base;
        self.local_base = new_base;
        Ok(())
    }

    /// The current frame's stack is empty: return to the caller (copying results) or finish.
    fn finish_frame(&mut self) -> Result<Option<Yield>, SimError> {
        let program = self.cta.launch.program;
        let Some(done) = self.warp.frames.pop() else {
            return Ok(Some(Yield::Done));
        };
        let Some(caller) = self.warp.frames.last() else {
            self.warp.state = WarpState::Done;
            return Ok(Some(Yield::Done));
        };
        let (function, reg_base, local_base) =
            (caller.function, caller.reg_base, caller.local_base);
        let callee_func = self.func;
        self.credit_interpreted();
        self.func = &program.functions[function as usize];
        self.function = function;
        self.native = program.native_code(function);
        self.reg_base = reg_base;
        self.local_base = local_base;
        let lanes = done.returned & !self.warp.exited;
        if let Some(Inst {
            op: Op::Call(call), ..
        }) = self.func.code.get(done.call_pc as usize)
        {
            let mut m = lanes;
            while let Some(lane) = next_lane(&mut m) {
                let thread = self.thread_local_base(lane);
                for (ret, slot) in call.rets.iter().zip(&callee_func.rets) {
                    let from = thread + done.local_base + u64::from(slot.offset);
                    match *ret {
                        CallSlot::Frame { offset, bytes } => {
                            let to = thread + self.local_base + u64::from(offset);
                            // SAFETY: both in this thread's local window (checked at call).
                            unsafe { memory::copy(from, to, u64::from(bytes.min(slot.bytes))) };
                        }
                        CallSlot::Register(r) => {
                            let bytes = slot.bytes.clamp(1, 8).next_power_of_two().min(8) as u8;
                            // SAFETY: in this thread's local window (checked at call).
                            let v = unsafe { memory::load(from, bytes) };
                            self.set(r, lane, v);
                        }
                        CallSlot::Value(_) => {}
                    }
                }
            }
        }
        self.warp.regs.truncate(done.reg_base);
        Ok(None)
    }

    // ---- errors and builtin support --------------------------------------------------

    fn instruction_text(&self, pc: u32) -> String {
        let program = self.cta.launch.program;
        self.func
            .code
            .get(pc as usize)
            .and_then(|inst| program.instruction(self.func, inst.statement))
            .map_or_else(|| "ret".to_string(), |i| i.to_string())
    }

    fn space_name(&self, pc: u32) -> &'static str {
        let program = self.cta.launch.program;
        let space = self
            .func
            .code
            .get(pc as usize)
            .and_then(|inst| program.instruction(self.func, inst.statement))
            .and_then(|i| i.facts.state_space);
        match space {
            Some(ptx_lexer::StateSpace::Global) => "global",
            Some(ptx_lexer::StateSpace::Shared) => "shared",
            Some(ptx_lexer::StateSpace::Local) => "local",
            Some(ptx_lexer::StateSpace::Const) => "const",
            Some(ptx_lexer::StateSpace::Param) => "param",
            Some(ptx_lexer::StateSpace::Texture) => "texture",
            _ => "generic",
        }
    }

    pub(crate) fn invalid_address(&self, pc: u32, address: u64, len: u64, lane: usize) -> SimError {
        SimError::InvalidAddress {
            space: self.space_name(pc),
            address,
            len,
            instruction: self.instruction_text(pc),
            line: self.line(pc),
            cta: self.cta.ctaid,
            thread: self.warp.tid[lane],
        }
    }

    /// A load, store or atomic whose address is not a multiple of its size. (Shared and local
    /// windows start at multiples of 16 or more, so the host address's alignment is the
    /// PTX address's.)
    #[cold]
    pub(crate) fn misaligned(&self, pc: u32, address: u64, len: u64, lane: usize) -> SimError {
        SimError::MisalignedAddress {
            space: self.space_name(pc),
            address,
            len,
            instruction: self.instruction_text(pc),
            line: self.line(pc),
            cta: self.cta.ctaid,
            thread: self.warp.tid[lane],
        }
    }

    pub(crate) fn unsupported(&self, pc: u32, what: &str) -> SimError {
        SimError::Unsupported {
            what: format!("{what} (in `{}`)", self.instruction_text(pc)),
            line: self.line(pc),
        }
    }

    pub(crate) fn line(&self, pc: u32) -> u32 {
        self.func
            .code
            .get(pc as usize)
            .map_or(self.func.line, |i| i.line)
    }

    pub(crate) fn cta(&self) -> &'a CtaContext<'a> {
        self.cta
    }

    pub(crate) fn thread(&self, lane: usize) -> [u32; 3] {
        self.warp.tid[lane]
    }

    /// Reads a call argument as a 64-bit value for lane `lane`.
    pub(crate) fn argument(&self, slot: &CallSlot, lane: usize) -> u64 {
        match *slot {
            CallSlot::Frame { offset, bytes } => {
                let address = self.thread_local_base(lane) + self.local_base + u64::from(offset);
                let width = bytes.clamp(1, 8).next_power_of_two().min(8) as u8;
                // SAFETY: the variable lies in this thread's frame, inside its local window.
                unsafe { memory::load(address, width) }
            }
            CallSlot::Value(src) => self.read(&src, lane),
            CallSlot::Register(r) => self.reg(r, lane),
        }
    }

    /// Writes a builtin's result for lane `lane`.
    pub(crate) fn set_result(&mut self, slot: &CallSlot, lane: usize, value: u64) {
        match *slot {
            CallSlot::Frame { offset, bytes } => {
                let address = self.thread_local_base(lane) + self.local_base + u64::from(offset);
                let width = bytes.clamp(1, 8).next_power_of_two().min(8) as u8;
                // SAFETY: as in `argument`.
                unsafe { memory::store(address, width, value) };
            }
            CallSlot::Register(r) => self.set(r, lane, value),
            CallSlot::Value(_) => {}
        }
    }

    /// Whether a generic host range is accessible (for builtins reading strings).
    pub(crate) fn accessible(&mut self, address: u64, len: u64) -> bool {
        let (lo, hi) = self.warp.accessible;
        (address >= lo && address.checked_add(len).is_some_and(|e| e <= hi))
            || self.host_accessible(address, len)
    }
}

/// Texel `i` of `n` under `mode`; `None` for the border.
fn texel_index(i: i64, n: i64, mode: AddressMode) -> Option<i64> {
    match mode {
        AddressMode::Border => (0..n).contains(&i).then_some(i),
        AddressMode::Clamp => Some(i.clamp(0, n - 1)),
        AddressMode::Wrap => Some(i.rem_euclid(n)),
        AddressMode::Mirror => {
            let m = i.rem_euclid(2 * n);
            Some(if m >= n { 2 * n - 1 - m } else { m })
        }
    }
}

/// Converts one raw channel to the instruction's result type.
fn texel_value(raw: u64, texture: &crate::Texture, result: ChannelKind) -> u64 {
    let bits = u32::from(texture.bits_per_channel);
    let signed_value = || {
        let shift = 64 - bits;
        ((raw << shift) as i64) >> shift
    };
    match (texture.kind, result) {
        (ChannelKind::Float, ChannelKind::Float) if bits == 32 => raw,
        (ChannelKind::Float, ChannelKind::Float) if bits == 16 => {
            u64::from(crate::builtins::f16_to_f32(raw as u16).to_bits())
        }
        (ChannelKind::Signed, ChannelKind::Float) if texture.normalized_float => {
            let max = ((1u64 << (bits - 1)) - 1) as f32;
            u64::from(((signed_value() as f32) / max).max(-1.0).to_bits())
        }
        (ChannelKind::Unsigned, ChannelKind::Float) if texture.normalized_float => {
            let max = ((1u64 << bits) - 1) as f32;
            u64::from(((raw as f32) / max).to_bits())
        }
        (ChannelKind::Signed, ChannelKind::Float) => u64::from((signed_value() as f32).to_bits()),
        (ChannelKind::Unsigned, ChannelKind::Float) => u64::from((raw as f32).to_bits()),
        (ChannelKind::Signed, _) => signed_value() as u64 & 0xFFFF_FFFF,
        _ => raw,
    }
}

/// The special registers whose value is a function of the lane alone (`%laneid`, the lane
/// masks); `None` for the others.
#[inline(always)]
fn lane_special(special: Special, lane: usize) -> Option<u64> {
    let lane_bit = 1u64 << lane;
    Some(match special {
        Special::LaneId => lane as u64,
        Special::LanemaskEq => lane_bit,
        Special::LanemaskLt => lane_bit - 1,
        Special::LanemaskLe => (lane_bit << 1).wrapping_sub(1) & 0xFFFF_FFFF,
        Special::LanemaskGt => !((lane_bit << 1).wrapping_sub(1)) & 0xFFFF_FFFF,
        Special::LanemaskGe => !(lane_bit - 1) & 0xFFFF_FFFF,
        _ => return None,
    })
}

/// Reads an operand that is not a plain register or immediate (special registers, symbol
/// addresses, negated predicates).
fn read_other(
    cta: &CtaContext<'_>,
    warp: &Warp,
    reg_base: usize,
    local_base: u64,
    src: &Src,
    lane: usize,
) -> u64 {
    {
        let launch = cta.launch;
        let reg = |r: u32| warp.regs[reg_base + r as usize * 32 + lane];
        match *src {
            Src::Reg(r) => reg(r),
            Src::Imm(v) => v,
            Src::NotPred(r) => (reg(r) & 1) ^ 1,
            Src::KernelParam(offset) => launch.params.address().wrapping_add(offset as u64),
            Src::Shared { var, offset } => launch
                .shared_offsets
                .get(var as usize)
                .copied()
                .unwrap_or(u64::MAX)
                .wrapping_add(offset as u64),
            Src::Frame(offset) => local_base.wrapping_add(offset as u64),
            Src::Special(special) => {
                let config = &launch.config;
                match special {
                    Special::Tid(d) => u64::from(warp.tid[lane][d as usize]),
                    Special::Ntid(d) => u64::from(config.block[d as usize]),
                    Special::Ctaid(d) => u64::from(cta.ctaid[d as usize]),
                    Special::Nctaid(d) => u64::from(config.grid[d as usize]),
                    Special::WarpId => u64::from(warp.index),
                    Special::NWarpId => u64::from(cta.warps),
                    Special::SmId => cta.worker as u64,
                    Special::NSmId => config.workers.max(1) as u64,
                    Special::GridId => 1,
                    Special::LaneId
                    | Special::LanemaskEq
                    | Special::LanemaskLt
                    | Special::LanemaskLe
                    | Special::LanemaskGt
                    | Special::LanemaskGe => lane_special(special, lane).unwrap_or(0),
                    Special::Clock => warp.clock & 0xFFFF_FFFF,
                    Special::Clock64 => warp.clock,
                    Special::GlobalTimer => std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64),
                    Special::DynamicSmemSize => config.dynamic_shared_bytes as u64,
                    Special::TotalSmemSize => launch.shared_bytes,
                    Special::EnvReg(index) => u64::from(launch.env.env_reg(index)),
                }
            }
        }
    }
}

/// Executes instruction `pc` of the current function for the lanes of `active` (and its
/// guard) exactly as the interpreter loop does, for a native run that has no code of its own
/// for it (a C entry point: the run calls it by address). Returns 0, or 1 when the instruction
/// failed: the error then waits in [`Exec::native_error`] for the run loop, which counts the
/// instruction as executed and reports the error, as the interpreter loop does.
///
/// # Safety
/// `exec` is the [`Exec`] running the native run (`RunContext::exec`), on its warp's current
/// frame; no reference to its warp is live while this runs.
#[inline(always)]
unsafe fn interpret_for_native_body(exec: *mut std::ffi::c_void, pc: u32, active: u32) -> u32 {
    // SAFETY: per the caller.
    let exec = unsafe { &mut *exec.cast::<Exec<'_, '_>>() };
    let func = exec.func;
    let Some(inst) = func.code.get(pc as usize) else {
        exec.native_error = Some(exec.unsupported(pc, "a native run past the function's end"));
        return 1;
    };
    let lanes = exec.guard(inst, active);
    match exec.straight(inst, pc, active, lanes) {
        Ok(()) => 0,
        Err(error) => {
            exec.native_error = Some(error);
            1
        }
    }
}

/// [`interpret_for_native_body`] compiled for CPUs with AVX2 (as [`Exec::run_v3`]).
///
/// # Safety
/// As [`interpret_for_native_body`]; the CPU has the features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,avx2,fma,bmi1,bmi2,lzcnt,popcnt")]
unsafe extern "C" fn interpret_for_native_v3(
    exec: *mut std::ffi::c_void,
    pc: u32,
    active: u32,
) -> u32 {
    // SAFETY: per the caller.
    unsafe { interpret_for_native_body(exec, pc, active) }
}

/// [`interpret_for_native_body`] for any CPU.
///
/// # Safety
/// As [`interpret_for_native_body`].
unsafe extern "C" fn interpret_for_native_plain(
    exec: *mut std::ffi::c_void,
    pc: u32,
    active: u32,
) -> u32 {
    // SAFETY: per the caller.
    unsafe { interpret_for_native_body(exec, pc, active) }
}

/// The native code's divergent loop branch (`native::Gen::go_round`): the branch at `pc`, the
/// lanes `taken` of `active` taking it, as the run loop's [`Exec::branch`] takes it.
///
/// # Safety
/// `exec` is the [`Exec`] running the native code, which has no other reference to it in use.
pub(crate) unsafe extern "C" fn branch_for_native(
    exec: *mut std::ffi::c_void,
    pc: u32,
    active: u32,
    taken: u32,
) {
    // SAFETY: per the caller.
    let exec = unsafe { &mut *exec.cast::<Exec<'_, '_>>() };
    // The native code calls it for its run's loop branch only, a `bra` of this function.
    if let Some(Inst {
        op: Op::Bra { target, reconverge },
        ..
    }) = exec.func.code.get(pc as usize)
    {
        exec.branch(pc, active, taken, *target, *reconverge);
    }
}

/// The native code's entry into the interpreter ([`interpret_for_native_body`]), for this CPU.
pub(crate) fn interpret_for_native() -> unsafe extern "C" fn(*mut std::ffi::c_void, u32, u32) -> u32
{
    #[cfg(target_arch = "x86_64")]
    if alu::x86_v3() {
        return interpret_for_native_v3;
    }
    interpret_for_native_plain
}

/// The 32 lanes of register `r` (of the frame whose registers start `regs`).
#[inline(always)]
fn register_row(regs: &[u64], r: u32) -> &[u64; 32] {
    let start = r as usize * 32;
    regs[start..start + 32]
        .try_into()
        .expect("a register row is 32 lanes")
}

/// The 32 lanes of register `r`, for writing.
#[inline(always)]
fn register_row_mut(regs: &mut [u64], r: u32) -> &mut [u64; 32] {
    let start = r as usize * 32;
    (&mut regs[start..start + 32])
        .try_into()
        .expect("a register row is 32 lanes")
}

/// Writes `values` into `row` for the lanes of `exec`.
#[inline(always)]
fn write_lanes(row: &mut [u64; 32], values: &[u64; 32], exec: u32) {
    if exec == u32::MAX {
        *row = *values;
    } else {
        let mut m = exec;
        while let Some(lane) = next_lane(&mut m) {
            row[lane] = values[lane];
        }
    }
}

/// Stores element `i` of `values` (`values[i][lane]`, `BYTES` each) at `hosts[lane] + i *
/// BYTES` for the lanes of `exec`, lowest lane first and its elements in order (as the per-lane
/// path: where lanes overlap, the last one's value stays). Returns `wrote` or whether a store
/// changed a value in memory ([`crate::warp::Warp::wrote`]).
///
/// # Safety
/// Each lane's `[hosts[lane], + values.len() * BYTES)` is valid host memory, aligned to
/// `BYTES`.
#[inline(always)]
unsafe fn store_lanes<const BYTES: u8>(
    hosts: &[u64; 32],
    values: &[[u64; 32]],
    exec: u32,
    mut wrote: bool,
) -> bool {
    let mask = u64::MAX >> (64 - 8 * u32::from(BYTES));
    let mut m = exec;
    while let Some(lane) = next_lane(&mut m) {
        for (i, row) in values.iter().enumerate() {
            let at = hosts[lane] + i as u64 * u64::from(BYTES);
            let v = row[lane];
            // SAFETY: valid and aligned per the caller.
            unsafe {
                if !wrote {
                    wrote = memory::load_aligned::<BYTES>(at) != v & mask;
                }
                memory::store_aligned::<BYTES>(at, v);
            }
        }
    }
    wrote
}

/// [`store_lanes`] for the 32 lanes of a [`LaneLayout::PrivateRun`] starting at `first`
/// (lane `l`'s vector at `first + l * values.len() * BYTES`): the lanes' vectors do not
/// overlap, so every element is compared with the value it replaces and stored, in one loop
/// of plain accesses that vectorizes, with the same memory and `wrote` as lane by lane.
///
/// # Safety
/// The 32 vectors are valid host memory, aligned to `BYTES`, that no other thread accesses
/// (the CTA's shared window).
#[inline(always)]
unsafe fn store_run_private<const BYTES: u8>(
    first: usize,
    values: &[[u64; 32]],
    wrote: bool,
) -> bool {
    let mask = u64::MAX >> (64 - 8 * u32::from(BYTES));
    let element = usize::from(BYTES);
    let stride = values.len() * element;
    let mut changed = 0u64;
    for lane in 0..32 {
        for (i, row) in values.iter().enumerate() {
            let at = first + lane * stride + i * element;
            // SAFETY: valid, aligned and unshared per the caller.
            unsafe {
                changed |= memory::load_private::<BYTES>(at) ^ (row[lane] & mask);
                memory::store_private::<BYTES>(at, row[lane]);
            }
        }
    }
    wrote | (changed != 0)
}

/// How the lanes of a warp access memory, for the loads' fast paths.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LaneLayout {
    /// Any other pattern, or not all 32 lanes.
    Scattered,
    /// All 32 lanes at the same address (a broadcast: one load).
    Same,
    /// All 32 lanes, lane `l` at the first lane's address plus `l` strides, in memory only
    /// this thread accesses (the CTA's shared window: a CTA runs on one worker), so that the
    /// loads need not be atomic and vectorize.
    PrivateRun,
}

/// Loads `BYTES` at `hosts[lane] + offset` into `row[lane]` for the lanes of `exec`,
/// sign-extended when `signed`; `layout` is the lanes' [`LaneLayout`] (with the stride between
/// lanes a multiple of `BYTES`).
///
/// # Safety
/// Each lane's `[hosts[lane] + offset, + BYTES)` is valid host memory, aligned to `BYTES`.
#[inline(always)]
unsafe fn load_lanes<const BYTES: u8>(
    row: &mut [u64; 32],
    hosts: &[u64; 32],
    offset: u64,
    exec: u32,
    signed: bool,
    layout: LaneLayout,
) {
    let shift = 64 - 8 * u32::from(BYTES);
    let extend = |v: u64| {
        if signed && shift > 0 {
            (((v << shift) as i64) >> shift) as u64
        } else {
            v
        }
    };
    // SAFETY (all loads): valid and aligned per the caller.
    let load = |lane: usize| extend(unsafe { memory::load_aligned::<BYTES>(hosts[lane] + offset) });
    match layout {
        LaneLayout::Same => *row = [load(0); 32],
        LaneLayout::PrivateRun => {
            let first = hosts[0] + offset;
            let stride = hosts[1].wrapping_sub(hosts[0]) as usize;
            for (lane, slot) in row.iter_mut().enumerate() {
                // SAFETY: valid and aligned per the caller; no other thread accesses the
                // memory (`LaneLayout::PrivateRun`).
                *slot = extend(unsafe {
                    memory::load_private::<BYTES>(first as usize + lane * stride)
                });
            }
        }
        LaneLayout::Scattered if exec == u32::MAX => {
            for (lane, slot) in row.iter_mut().enumerate() {
                *slot = load(lane);
            }
        }
        LaneLayout::Scattered => {
            let mut m = exec;
            while let Some(lane) = next_lane(&mut m) {
                row[lane] = load(lane);
            }
        }
    }
}

/// Where the base of a window that `cvta` converts from and to comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WindowBase {
    /// Its addresses are host addresses already (global memory, a kernel's parameters).
    Zero,
    /// The CTA's shared window.
    Shared,
    /// Each thread has its own (local memory, a device function's parameters).
    PerThread,
}

/// The base of `space` in a function (`is_entry`: a kernel): what [`Exec::uniform_window_base`]
/// evaluates and the native engine compiles.
pub(crate) fn window_base(space: WindowSpace, is_entry: bool) -> WindowBase {
    match space {
        WindowSpace::Global => WindowBase::Zero,
        WindowSpace::Shared => WindowBase::Shared,
        WindowSpace::Param if is_entry => WindowBase::Zero,
        WindowSpace::Local | WindowSpace::Param => WindowBase::PerThread,
    }
}

/// `shfl.up`'s source lane: [`lane_source`]'s `pick`.
fn pick_up(l: i32, b: i32, max: i32, _min: i32, _segmask: i32) -> (i32, bool) {
    (l - b, l - b >= max)
}

/// `shfl.down`'s source lane.
fn pick_down(l: i32, b: i32, max: i32, _min: i32, _segmask: i32) -> (i32, bool) {
    (l + b, l + b <= max)
}

/// `shfl.bfly`'s source lane.
fn pick_bfly(l: i32, b: i32, max: i32, _min: i32, _segmask: i32) -> (i32, bool) {
    (l ^ b, (l ^ b) <= max)
}

/// `shfl.idx`'s source lane.
fn pick_idx(_l: i32, b: i32, max: i32, min: i32, segmask: i32) -> (i32, bool) {
    let j = min | (b & !segmask);
    (j, j <= max)
}

/// The lane whose value lane `lane` of a `shfl` takes, and the predicate it gets, from its `b`
/// and `c` operands: `pick` gives `(j, ok)` from the lane, `b`, the segment's last lane
/// (`max`), its first lane (`min`) and the segment mask (PTX ISA: `shfl.sync`); the lane keeps
/// its own value where `j` is outside the segment or the warp.
#[inline(always)]
fn lane_source(
    lane: usize,
    b: u64,
    c: u64,
    pick: impl Fn(i32, i32, i32, i32, i32) -> (i32, bool),
) -> (usize, bool) {
    let bval = (b & 0x1F) as i32;
    let cval = (c & 0x1F) as i32;
    let segmask = ((c >> 8) & 0x1F) as i32;
    let l = lane as i32;
    let max_lane = (l & segmask) | (cval & !segmask);
    let min_lane = l & segmask;
    let (j, ok) = pick(l, bval, max_lane, min_lane, segmask);
    let source = if ok && (0..32).contains(&j) {
        j as usize
    } else {
        lane
    };
    (source, ok)
}

/// [`lane_source`] for `mode`: what the native engine compiles a `shfl` whose `b` and `c` are
/// immediates to (the same source lane and predicate for every execution).
pub(crate) fn shuffle_source(mode: ShflMode, lane: usize, b: u64, c: u64) -> (usize, bool) {
    match mode {
        ShflMode::Up => lane_source(lane, b, c, pick_up),
        ShflMode::Down => lane_source(lane, b, c, pick_down),
        ShflMode::Bfly => lane_source(lane, b, c, pick_bfly),
        ShflMode::Idx => lane_source(lane, b, c, pick_idx),
    }
}

/// One `shfl` for all 32 lanes: lane `l` takes `values[j]` and the predicate from
/// [`lane_source`].
#[inline(always)]
fn shuffle_lanes(
    values: &[u64; 32],
    bs: &[u64; 32],
    cs: &[u64; 32],
    results: &mut [u64; 32],
    valid: &mut [u64; 32],
    pick: impl Fn(i32, i32, i32, i32, i32) -> (i32, bool) + Copy,
) {
    for lane in 0..32 {
        let (source, ok) = lane_source(lane, bs[lane], cs[lane], pick);
        results[lane] = values[source];
        valid[lane] = u64::from(ok);
    }
}

/// Whether operand `src` (not a register or immediate) has the same value in every lane.
/// `%globaltimer` is read per lane, as the clock it is.
#[inline(always)]
fn uniform(src: &Src) -> bool {
    match *src {
        Src::Reg(_) | Src::NotPred(_) => false,
        Src::Imm(_) | Src::KernelParam(_) | Src::Shared { .. } | Src::Frame(_) => true,
        Src::Special(special) => !matches!(
            special,
            Special::Tid(_)
                | Special::LaneId
                | Special::LanemaskEq
                | Special::LanemaskLt
                | Special::LanemaskLe
                | Special::LanemaskGt
                | Special::LanemaskGe
                | Special::GlobalTimer
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `store_run_private` leaves the same memory and `wrote` as `store_lanes`, for every
    /// element size and vector length, with values wider than the element, some equal to
    /// what memory holds and some not.
    #[test]
    fn private_run_stores_match_lane_by_lane_stores() {
        fn check<const BYTES: u8>() {
            for count in 1..=4usize {
                for case in 0..4u64 {
                    let stride = count * usize::from(BYTES);
                    let len = 32 * stride + 16;
                    let initial: Vec<u8> = (0..len).map(|i| (i as u64 * 37 + case) as u8).collect();
                    // Values: memory's own bytes (case 0: nothing changes), or others.
                    let mut values = [[0u64; 32]; 4];
                    for (i, row) in values.iter_mut().enumerate().take(count) {
                        for (lane, v) in row.iter_mut().enumerate() {
                            let at = 8 + lane * stride + i * usize::from(BYTES);
                            let mut own = [0u8; 8];
                            own[..usize::from(BYTES)]
                                .copy_from_slice(&initial[at..at + usize::from(BYTES)]);
                            let own = u64::from_le_bytes(own);
                            let changed = case > 0 && (lane as u64 + i as u64) % case == 0;
                            // High garbage above the element: stores and compares ignore it.
                            *v = (if changed { own ^ 0x5A } else { own }) | (0xDEAD << 56);
                            if BYTES == 8 && !changed {
                                *v = own;
                            }
                        }
                    }
                    for wrote in [false, true] {
                        // Vectors from byte 8 of 8-aligned buffers (u64 storage).
                        let mut a = vec![0u64; len.div_ceil(8)];
                        let mut b = a.clone();
                        let as_bytes = |v: &mut Vec<u64>| {
                            // SAFETY: the u64s' bytes, within the vector.
                            unsafe {
                                std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), len)
                            }
                            .copy_from_slice(&initial);
                            v.as_mut_ptr() as usize + 8
                        };
                        let (first_a, first_b) = (as_bytes(&mut a), as_bytes(&mut b));
                        let mut hosts_a = [0u64; 32];
                        for (lane, h) in hosts_a.iter_mut().enumerate() {
                            *h = (first_a + lane * stride) as u64;
                        }
                        // SAFETY: inside the buffers, aligned, unshared.
                        let (wa, wb) = unsafe {
                            (
                                store_lanes::<BYTES>(&hosts_a, &values[..count], u32::MAX, wrote),
                                store_run_private::<BYTES>(first_b, &values[..count], wrote),
                            )
                        };
                        assert_eq!(a, b, "memory, {BYTES} bytes x {count}, case {case}");
                        assert_eq!(wa, wb, "wrote, {BYTES} bytes x {count}, case {case}");
                        assert_eq!(wa, wrote || case > 0, "{BYTES} bytes x {count}");
                    }
                }
            }
        }
        check::<1>();
        check::<2>();
        check::<4>();
        check::<8>();
    }
}
