//! CTA counters: where a kernel's counter code may add to the same counter many times per
//! warp, its adds go to a copy of the counters in the CTA's shared memory, and the CTA's last
//! thread out adds that copy to the bank in global memory, one global reduction per counter
//! the CTA touched instead of one per warp and block entry.
//!
//! The rewrite works on the finished clone: every counter add the clone and its function
//! copies make (`red.global.add.u64 [{b64}0+offset]`, [`crate::counter_add`]) becomes
//! `red.shared.add.u64 [cta+slot]`, with a shared slot for each distinct offset. Then:
//! - at the top of the kernel, before any other code, the CTA's first warp zeroes the slots
//!   and sets the exit count to minus the CTA's threads; `bar.sync 0` (every thread of the CTA
//!   is there: nothing has run yet);
//! - the clone's prologue is cut to what each thread needs for its adds (the lanes mask,
//!   [`crate::cta_entry_prologue`]): the bank's base is the flush's business;
//! - before every `ret` and `exit` of the kernel, each group of lanes that leaves adds its size
//!   to the exit count (after `membar.cta`, so that its adds are seen first); the group whose
//!   add brings the count to zero holds the CTA's last threads, and its lanes add the nonzero
//!   slots to the bank (each slot's bank offset is in a `.global` table), once, after
//!   computing the bank's base as the prologue would have ([`CountedBy::Cta`]).
//!
//! Exact by construction: a slot holds the sum of what the CTA's adds would have added to its
//! counter; every thread's adds precede its exit in program order and the fence orders them
//! before the exit count, which the flushing group reads after every other thread has left.
//! A kernel with `exit` in a device function, or a call of code outside the module or through
//! a pointer (a thread could leave without passing the kernel's exits), a target without
//! `vote.sync` (before sm_30) or 32-bit addresses keeps its global adds; so does the
//! every-block placement, the reference the others are tested against.

use std::collections::BTreeMap;

use ptx_lexer::{
    Guard, Instruction, Module, Opcode, Operand, RewriteError, Statement, StatementKind,
};

use crate::instrument::{direct_callee, fresh_label, insert_prologue, is_indirect_call, symbols};
use crate::placement::Cfg;
use crate::{bank_base, guarded, ins, BankParams, CountedBy, CounterRegisters};

/// The opcode of a counter add before the rewrite ([`crate::counter_add`]).
const GLOBAL_ADD: &str = "red.global.add.u64";
/// ... and after it.
const SHARED_ADD: &str = "red.shared.add.u64";
/// At least this many counter adds outside cycles in the code, on the longest of a flush's
/// alternative paths ([`flush_alternatives`]: a warp runs one of them), make the CTA counters
/// worth their fixed cost (about 11 instructions per warp more than global adds); any add on a
/// cycle of the original code does. Fewer adds save too few global reductions per warp for
/// it. Measured with a 19-instruction fixed cost (2026-11-28, suites): 2 gave 1.199x
/// instruction expansion and 3.5 global atomics per 1000 instructions, 8 gave 1.181x and 3.7,
/// 12 gave 1.170x and 6.9 (SHOC's reductions and Rodinia streamcluster then keep global
/// adds). With the 11-instruction cost and guards on lane and warp indices counted from the
/// launch (2026-11-29): 8 and 6 both give 1.170x and 2.6 on the suites (6 moves only Parboil
/// sgemm), and on the benchmark programs and corpus 1.357x and 15.7 (8) against 1.359x and
/// 11.9 (6: `scan_tiles`, whose 7 adds every warp makes, takes them). Counting one path of
/// each flush rather than all of them (2026-11-29, suites): 1.148x and 2.5 before, 1.140x and
/// 4.8 after (counter code -10.7%; SHOC Spmv's `csr_vector`, with a 0-or-1-trip loop per lane
/// and 3 adds per warp, 1.65x to 1.38x); with no straight adds taking them at all, 1.135x and
/// 7.3.
const STRAIGHT_ADDS_WORTH_IT: usize = 6;

/// A function of the clone with its counter registers: the kernel first, then its copies of
/// device functions.
pub(crate) struct Counted<'a> {
    pub name: &'a str,
    pub regs: &'a CounterRegisters,
}

/// The counter adds of `function`: (statement, bank offset).
fn counter_adds(function: &ptx_lexer::Function, regs: &CounterRegisters) -> Vec<(usize, u64)> {
    let base = regs.r64(0);
    function
        .statements()
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let instruction = s.as_instruction()?;
            if instruction.opcode.as_str() != GLOBAL_ADD {
                return None;
            }
            match instruction.operands.first()? {
                Operand::Address(parts) => match parts.as_slice() {
                    [Operand::Offset { base: b, offset }] if **b == base => {
                        Some((i, offset.parse().ok()?))
                    }
                    _ => None,
                },
                _ => None,
            }
        })
        .collect()
}

/// Whether the CTA counters pay: some add lies on a cycle of the original code (it may run
/// many times per warp), or there are many adds.
/// `adds`: each function's [`counter_adds`].
fn worth_it(module: &Module, functions: &[Counted], adds: &[Vec<(usize, u64)>]) -> bool {
    let mut straight = 0;
    for (counted, adds) in functions.iter().zip(adds) {
        let Some(function) = module.function(counted.name) else {
            return false;
        };
        if adds.is_empty() {
            continue;
        }
        let cfg = Cfg::of(function);
        let alternative_of = flush_alternatives(function);
        // Adds on a flush's alternative paths, per flush (its resume label) and path.
        let mut on_paths: BTreeMap<(&str, usize), usize> = BTreeMap::new();
        for (b, block) in cfg.blocks.iter().enumerate() {
            let here: Vec<usize> = adds
                .iter()
                .map(|&(s, _)| s)
                .filter(|s| block.instructions.contains(s))
                .collect();
            if !here.is_empty() && on_original_cycle(&cfg, b) {
                return true;
            }
            for s in here {
                match &alternative_of[s] {
                    Some((resume, path)) => {
                        *on_paths.entry((resume.as_str(), *path)).or_default() += 1
                    }
                    None => straight += 1,
                }
            }
        }
        let mut longest: BTreeMap<&str, usize> = BTreeMap::new();
        for ((resume, _), n) in on_paths {
            let most = longest.entry(resume).or_default();
            *most = (*most).max(n);
        }
        straight += longest.values().sum::<usize>();
    }
    straight >= STRAIGHT_ADDS_WORTH_IT
}

/// For each statement of an instrumented function, the alternative path of a shrinking flush
/// it lies on, if any: (the flush's resume label, path). A flush with a fast path
/// ([`crate::shrinking_flush_fast`]) branches uniformly (on a vote, the same in every lane) to
/// its out-of-line part, `$__cf_slow…`, whose paths (separated by the fresh `$__cf_tree…`
/// labels of its tests and loops) each end in `bra.uni $__cf_resume…`, back to the label after
/// the fast path's code: the fast path (path 0, from that branch to the resume label) and each
/// out-of-line path (1, 2, ...) exclude each other, so a warp makes the adds of one of them.
fn flush_alternatives(function: &ptx_lexer::Function) -> Vec<Option<(String, usize)>> {
    let statements = function.statements();
    let mut alternative_of = vec![None; statements.len()];
    let is_to = |instruction: &Instruction, prefix: &str| {
        let target = instruction.operands.first();
        instruction.opcode.base() == "bra"
            && matches!(target, Some(Operand::Symbol(s)) if s.starts_with(prefix))
    };
    // The statements of the path being walked; whether it is a fast path; the out-of-line
    // paths of the current flush so far.
    let mut path: Vec<usize> = Vec::new();
    let mut fast = false;
    let mut out_of_line: Option<usize> = None;
    for (i, statement) in statements.iter().enumerate() {
        match statement.kind() {
            StatementKind::Label(label) => {
                let label = label.as_str();
                if fast && label.starts_with("$__cf_resume") {
                    for &s in &path {
                        alternative_of[s] = Some((label.to_string(), 0));
                    }
                }
                if fast || !(out_of_line.is_some() && label.starts_with("$__cf_tree")) {
                    // A fast path ends at its resume label; an out-of-line part at a label of
                    // anything else.
                    fast = false;
                    out_of_line = None;
                    path.clear();
                }
                if label.starts_with("$__cf_slow") {
                    out_of_line = Some(0);
                }
            }
            StatementKind::Instruction(instruction) => {
                if out_of_line.is_none() && !fast && is_to(instruction, "$__cf_slow") {
                    fast = true;
                    path.clear();
                    continue;
                }
                if fast || out_of_line.is_some() {
                    path.push(i);
                }
                if let (Some(n), None) = (out_of_line, &instruction.guard) {
                    if is_to(instruction, "$__cf_resume") {
                        if let Some(Operand::Symbol(resume)) = instruction.operands.first() {
                            for &s in &path {
                                alternative_of[s] = Some((resume.to_string(), n + 1));
                            }
                        }
                        out_of_line = Some(n + 1);
                        path.clear();
                    }
                }
            }
            _ => {}
        }
    }
    alternative_of
}

/// Whether block `b` of an instrumented function lies on a cycle of its original control
/// flow: a cycle that remains without the edges back into counter code (a flush's loop over
/// the lanes, `$__cf_tree`, and the return of its out-of-line part, `$__cf_resume`, each of
/// which runs once per pass of the code around it).
fn on_original_cycle(cfg: &Cfg, b: usize) -> bool {
    let kept = |from: usize, to: usize| {
        !(to <= from
            && cfg.blocks[to]
                .label
                .as_deref()
                .is_some_and(|l| l.starts_with("$__cf_")))
    };
    let mut seen = vec![false; cfg.blocks.len()];
    let mut stack: Vec<usize> = cfg.succs[b]
        .iter()
        .copied()
        .filter(|&t| kept(b, t))
        .collect();
    while let Some(x) = stack.pop() {
        if x == b {
            return true;
        }
        if std::mem::replace(&mut seen[x], true) {
            continue;
        }
        stack.extend(cfg.succs[x].iter().copied().filter(|&t| kept(x, t)));
    }
    false
}

/// Functions outside the module that a kernel may call and that return (or trap, ending the
/// kernel): the CUDA device runtime's `printf`, heap and `assert`.
const RETURNING_EXTERNALS: [&str; 4] = ["vprintf", "malloc", "free", "__assertfail"];

/// Whether the clone may take CTA counters at all: 64-bit addresses, and no thread can leave
/// the kernel but through its own exits: no `exit` in a function copy, no call of code outside
/// the module (it might `exit`) but [`RETURNING_EXTERNALS`], no indirect call.
fn eligible(module: &Module, functions: &[Counted]) -> bool {
    let defined = |name: &str| module.function(name).is_some_and(|f| f.is_definition());
    module.address_size() == 64
        && functions.iter().enumerate().all(|(k, counted)| {
            module.function(counted.name).is_some_and(|f| {
                f.instructions().all(|i| {
                    (k == 0 || i.opcode.base() != "exit")
                        && !is_indirect_call(i)
                        && direct_callee(i)
                            .is_none_or(|c| defined(c) || RETURNING_EXTERNALS.contains(&c))
                })
            })
        })
}

/// A module-level name from `base` that no variable or function of `module` has.
fn fresh_symbol(module: &Module, base: &str) -> String {
    std::iter::once(base.to_string())
        .chain((1u32..).map(|n| format!("{base}{n}")))
        .find(|name| {
            module.variables().all(|v| v.name != name.as_str())
                && module.functions().all(|f| f.name() != name)
        })
        .unwrap_or_else(|| base.to_string())
}

/// Whether the clone `functions[0]` (a kernel clone, before its prologue goes in) and its
/// function copies may take CTA counters ([`eligible`]) and they pay ([`worth_it`]).
pub(crate) fn worth_taking(module: &Module, functions: &[Counted]) -> bool {
    if functions.is_empty() || !eligible(module, functions) {
        return false;
    }
    let adds = all_counter_adds(module, functions);
    adds.iter().any(|a| !a.is_empty()) && worth_it(module, functions, &adds)
}

/// Each function's [`counter_adds`].
fn all_counter_adds(module: &Module, functions: &[Counted]) -> Vec<Vec<(usize, u64)>> {
    functions
        .iter()
        .map(|counted| {
            module
                .function(counted.name)
                .map_or_else(Vec::new, |f| counter_adds(f, counted.regs))
        })
        .collect()
}

/// Gives the clone `functions[0]` (a kernel clone with its prologue for CTA counters,
/// [`crate::cta_entry_prologue`]) and its function copies CTA counters, flushed to the bank
/// that `params` locate. Call only where [`worth_taking`].
pub(crate) fn aggregate(
    module: &mut Module,
    functions: &[Counted],
    params: &BankParams,
) -> Result<(), RewriteError> {
    // Each function's adds, found again (`worth_taking` saw them before the prologue moved
    // them) and once here: the rewrite below changes them in place.
    let adds = all_counter_adds(module, functions);
    let kernel = functions[0].name;
    let mut slots: BTreeMap<u64, u64> = adds.iter().flatten().map(|&(_, o)| (o, 0)).collect();
    // (Not after `worth_taking`; and with no add anywhere, the clone needs nothing more.)
    if slots.is_empty() {
        return Ok(());
    }
    for (n, slot) in slots.values_mut().enumerate() {
        *slot = n as u64;
    }
    let count = slots.len() as u64;
    let layout = Layout {
        shared: fresh_symbol(module, &format!("{kernel}_cta")),
        table: fresh_symbol(module, &format!("{kernel}_slots")),
        slots: count,
        params,
    };
    for (counted, adds) in functions.iter().zip(&adds) {
        let Some(function) = module.function_mut(counted.name) else {
            continue;
        };
        for &(at, offset) in adds {
            let slot = slots[&offset];
            if let StatementKind::Instruction(instruction) =
                function.statements_mut()[at].kind_mut()
            {
                instruction.opcode = Opcode::new(SHARED_ADD);
                instruction.operands[0] = layout.at(slot * 8);
            }
        }
    }
    let regs = functions[0].regs;
    let function = module
        .function_mut(kernel)
        .ok_or_else(|| RewriteError::NoSuchFunction(kernel.to_string()))?;
    let mut labels = 0usize;
    // The exits, from the last backwards (earlier indices stay valid).
    let exits: Vec<usize> = function
        .statements()
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.as_instruction()
                .is_some_and(|i| matches!(i.opcode.base(), "ret" | "exit"))
        })
        .map(|(i, _)| i)
        .collect();
    if function_falls_off_its_end(function) {
        let end = function.statements().len();
        let labels = layout.exit_labels(function, &mut labels);
        let mut code = layout.exit(regs, &labels);
        code.push(ins("ret", vec![]));
        function.insert_statements(end, code)?;
    }
    for at in exits.into_iter().rev() {
        let exit_labels = layout.exit_labels(function, &mut labels);
        let mut code = Vec::new();
        // `@p ret`: only the lanes that leave count; the others branch past it.
        let guard = function.statements()[at]
            .as_instruction()
            .and_then(|i| i.guard.clone());
        let stay = guard.map(|g| (g, fresh_label(function, "$__cf_stay", &mut labels)));
        if let Some((guard, label)) = &stay {
            code.push(Statement::instruction(Instruction::new(
                Some(Guard {
                    negated: !guard.negated,
                    predicate: guard.predicate.clone(),
                }),
                Opcode::new("bra"),
                vec![Operand::sym(label.clone())],
            )));
        }
        code.extend(layout.exit(regs, &exit_labels));
        if let Some((_, label)) = stay {
            if let StatementKind::Instruction(instruction) =
                function.statements_mut()[at].kind_mut()
            {
                instruction.guard = None;
            }
            function.insert_statements(at + 1, vec![Statement::label(label)])?;
        }
        function.insert_statements(at, code)?;
    }
    let zero = fresh_label(function, "$__cf_zero", &mut labels);
    let zeroed = fresh_label(function, "$__cf_zeroed", &mut labels);
    // Only code that reads or writes the slots or the exit count needs them zeroed, and so
    // does a call (a function copy's adds) or an exit (its exit code): where the kernel's own
    // barrier stands between the start and every such instruction, it is the one the zeroing
    // waits for.
    let own_barrier = !barrier_precedes(function, &|i: &Instruction| {
        matches!(i.opcode.base(), "ret" | "exit" | "call") || mentions(i, &layout.shared)
    });
    // Before everything, the prologue included.
    insert_prologue(function, layout.init(regs, &zero, &zeroed, own_barrier))?;

    let offsets: Vec<String> = slots.keys().map(u64::to_string).collect();
    module.insert_directive_before_functions(format!(
        ".shared .align 8 .b8 {}[{}];",
        layout.shared,
        layout.bytes()
    ));
    module.insert_directive_before_functions(format!(
        ".global .align 4 .u32 {}[{count}] = {{{}}};",
        layout.table,
        offsets.join(", ")
    ));
    Ok(())
}

/// Whether every path from the start of `function` to an instruction that `protected` holds
/// passes a barrier of the whole CTA first ([`is_cta_barrier`]): a thread then reaches none of
/// them before every thread of its CTA has arrived at some such barrier, the first of which
/// each thread reaches after the code before it.
fn barrier_precedes(
    function: &ptx_lexer::Function,
    protected: &dyn Fn(&Instruction) -> bool,
) -> bool {
    let cfg = Cfg::of(function);
    let statements = function.statements();
    // Only where the edges are whole: no jump table, and no label named twice (inline asm
    // scopes may reuse a name; an edge resolved by name could then miss a path).
    let mut labels: Vec<&str> = cfg
        .blocks
        .iter()
        .filter_map(|b| b.label.as_deref())
        .collect();
    let named = labels.len();
    labels.sort_unstable();
    labels.dedup();
    let jumps = function.instructions().any(|i| i.opcode.base() == "brx");
    if jumps || labels.len() != named {
        return false;
    }
    let mut seen = vec![false; cfg.blocks.len()];
    let mut stack: Vec<usize> = if cfg.blocks.is_empty() {
        Vec::new()
    } else {
        vec![0]
    };
    while let Some(b) = stack.pop() {
        if std::mem::replace(&mut seen[b], true) {
            continue;
        }
        let mut waits = false;
        for instruction in cfg.blocks[b]
            .instructions
            .iter()
            .filter_map(|&s| statements[s].as_instruction())
        {
            if is_cta_barrier(instruction) {
                waits = true;
                break;
            }
            if protected(instruction) {
                return false;
            }
        }
        if !waits {
            stack.extend(cfg.succs[b].iter().copied());
        }
    }
    true
}

/// `bar.sync 0` or `barrier.sync 0` (any of their spellings), unguarded and without a thread
/// count: every thread of the CTA must arrive before any goes on.
fn is_cta_barrier(instruction: &Instruction) -> bool {
    instruction.guard.is_none()
        && matches!(
            instruction.opcode.as_str(),
            "bar.sync"
                | "bar.cta.sync"
                | "barrier.sync"
                | "barrier.sync.aligned"
                | "barrier.cta.sync"
                | "barrier.cta.sync.aligned"
        )
        && matches!(instruction.operands.as_slice(), [Operand::Integer(id)] if id == "0")
}

/// Whether an operand of `instruction` names the symbol `name`.
fn mentions(instruction: &Instruction, name: &str) -> bool {
    let mut names = Vec::new();
    instruction
        .operands
        .iter()
        .for_each(|o| symbols(o, &mut names));
    names.contains(&name)
}

/// Whether control can reach the end of the body without a `ret`, `exit` or branch.
fn function_falls_off_its_end(function: &ptx_lexer::Function) -> bool {
    function
        .statements()
        .iter()
        .rev()
        .find_map(|s| s.as_instruction())
        .is_none_or(|i| i.guard.is_some() || i.can_fall_through())
}

/// The CTA's shared counters: `slots` u64 slots, then the exit count (u32); the `.global`
/// table of each slot's bank offset; and where the flush finds the bank.
struct Layout<'a> {
    shared: String,
    table: String,
    slots: u64,
    params: &'a BankParams<'a>,
}

/// The labels of one exit's code ([`Layout::exit`]).
struct ExitLabels {
    /// After it, before the exit.
    out: String,
    /// The flush's loop.
    flush: String,
    /// The end of the bank's base, and its ranged part ([`bank_base`]).
    based: String,
    ranged: String,
}

impl Layout<'_> {
    fn exits_offset(&self) -> u64 {
        self.slots * 8
    }
    fn bytes(&self) -> u64 {
        self.slots * 8 + 8
    }
    /// `[shared+offset]`
    fn at(&self, offset: u64) -> Operand {
        Operand::Address(vec![Operand::Offset {
            base: Box::new(Operand::sym(self.shared.clone())),
            offset: offset.to_string().into(),
        }])
    }

    /// The kernel's first code: the first row's first 32 lanes (`tid.y = 0`, `tid.x < 32`: the
    /// CTA's first warp, in each `tid.z` slice; zeroing twice is harmless) zero the slots, and
    /// its thread `tid.x = 0` sets the exit count to minus the CTA's threads (the same value
    /// from each slice); then every thread waits for them, at a `bar.sync 0` of its own
    /// (`own_barrier`) or at the kernel's first barrier ([`barrier_precedes`]). Other warps pay
    /// 6 instructions, or 5.
    fn init(
        &self,
        regs: &CounterRegisters,
        zero: &str,
        zeroed: &str,
        own_barrier: bool,
    ) -> Vec<Statement> {
        let (r, rd, p) = (|i| regs.r32(i), |i| regs.r64(i), |i| regs.p(i));
        let special = Operand::reg;
        let int = Operand::int;
        let mut code = vec![
            // r4 = tid.y × 32 + tid.x: below 32 only in the first row's first 32 lanes.
            ins("mov.u32", vec![r(1), special("%tid.x")]),
            ins("mov.u32", vec![r(4), special("%tid.y")]),
            ins("mad.lo.u32", vec![r(4), r(4), int(32), r(1)]),
            ins("setp.ge.u32", vec![p(1), r(4), int(32)]),
            guarded(regs, 1, "bra", vec![Operand::sym(zeroed)]),
            ins("mov.u32", vec![r(0), special("%ntid.x")]),
            ins("mov.u32", vec![r(2), special("%ntid.y")]),
            ins("mul.lo.u32", vec![r(2), r(2), r(0)]),
            ins("mov.u32", vec![r(3), special("%ntid.z")]),
            ins("mul.lo.u32", vec![r(2), r(2), r(3)]),
            ins("neg.s32", vec![r(2), r(2)]),
            ins("setp.eq.u32", vec![p(1), r(4), int(0)]),
            guarded(
                regs,
                1,
                "st.shared.u32",
                vec![self.at(self.exits_offset()), r(2)],
            ),
            // r0 = stride (the zeroing lanes of a row, 8 bytes each), r1 = this lane's first
            // slot, r2 = the end of the slots.
            ins("min.u32", vec![r(0), r(0), int(32)]),
            ins("shl.b32", vec![r(0), r(0), int(3)]),
            ins("mov.u32", vec![r(2), Operand::sym(self.shared.clone())]),
            ins("mad.lo.u32", vec![r(1), r(1), int(8), r(2)]),
            ins("add.u32", vec![r(2), r(2), int(self.exits_offset())]),
            ins("mov.u64", vec![rd(1), int(0)]),
            Statement::label(zero),
            ins("setp.lt.u32", vec![p(1), r(1), r(2)]),
            branch_unless(regs, 1, zeroed),
            ins("st.shared.u64", vec![addr(r(1)), rd(1)]),
            ins("add.u32", vec![r(1), r(1), r(0)]),
            ins("bra", vec![Operand::sym(zero)]),
            Statement::label(zeroed),
        ];
        if own_barrier {
            code.push(ins("bar.sync", vec![int(0)]));
        }
        code
    }

    /// Fresh labels for one exit's code in `function`.
    fn exit_labels(&self, function: &ptx_lexer::Function, next: &mut usize) -> ExitLabels {
        ExitLabels {
            out: fresh_label(function, "$__cf_out", next),
            flush: fresh_label(function, "$__cf_flush", next),
            based: fresh_label(function, "$__cf_based", next),
            ranged: fresh_label(function, "$__cf_ranged", next),
        }
    }

    /// Before an exit: the leaving lanes count themselves out; the CTA's last ones flush.
    fn exit(&self, regs: &CounterRegisters, labels: &ExitLabels) -> Vec<Statement> {
        let (r, rd, p) = (|i| regs.r32(i), |i| regs.r64(i), |i| regs.p(i));
        let int = Operand::int;
        let out = labels.out.as_str();
        let mut code = vec![
            // r3 = the leaving lanes, r2 = how many; p0: the highest of them.
            ins("activemask.b32", vec![r(3)]),
            ins("mov.u32", vec![r(4), Operand::reg("%lanemask_le")]),
            ins("setp.le.u32", vec![p(0), r(3), r(4)]),
            ins("popc.b32", vec![r(2), r(3)]),
            ins("membar.cta", vec![]),
            guarded(
                regs,
                0,
                "atom.shared.add.u32",
                vec![r(0), self.at(self.exits_offset()), r(2)],
            ),
            guarded(regs, 0, "add.u32", vec![r(0), r(0), r(2)]),
            ins("setp.eq.and.u32", vec![p(1), r(0), int(0), p(0)]),
            ins("vote.sync.any.pred", vec![p(1), p(1), r(3)]),
            branch_unless(regs, 1, out),
            // The CTA's last lanes: every other thread's adds are done.
            ins("membar.cta", vec![]),
        ];
        // rd0 = the bank's base, null where the mode does not count this CTA.
        code.extend(bank_base(
            regs,
            self.params,
            &labels.based,
            &labels.ranged,
            CountedBy::Cta,
        ));
        code.extend([
            ins("setp.eq.u64", vec![p(1), rd(0), int(0)]),
            guarded(regs, 1, "bra", vec![Operand::sym(out)]),
            // r3, r2 again (the base took them); r4 = this lane's rank among the leaving
            // lanes: its first slot; stride r2.
            ins("activemask.b32", vec![r(3)]),
            ins("popc.b32", vec![r(2), r(3)]),
            ins("mov.u32", vec![r(4), Operand::reg("%lanemask_lt")]),
            ins("and.b32", vec![r(4), r(4), r(3)]),
            ins("popc.b32", vec![r(4), r(4)]),
            ins("mov.u64", vec![rd(2), Operand::sym(self.table.clone())]),
            ins("mov.u32", vec![r(6), Operand::sym(self.shared.clone())]),
            Statement::label(labels.flush.as_str()),
            ins("setp.ge.u32", vec![p(1), r(4), int(self.slots)]),
            guarded(regs, 1, "bra", vec![Operand::sym(out)]),
            ins("mad.wide.u32", vec![rd(3), r(4), int(4), rd(2)]),
            ins("ld.global.u32", vec![r(0), addr(rd(3))]),
            ins("mad.lo.u32", vec![r(1), r(4), int(8), r(6)]),
            ins("ld.shared.u64", vec![rd(4), addr(r(1))]),
            ins("setp.ne.u64", vec![p(1), rd(4), int(0)]),
            ins("mad.wide.u32", vec![rd(5), r(0), int(1), rd(0)]),
            guarded(regs, 1, "red.global.add.u64", vec![addr(rd(5)), rd(4)]),
            ins("add.u32", vec![r(4), r(4), r(2)]),
            ins("bra", vec![Operand::sym(labels.flush.as_str())]),
            Statement::label(out),
        ]);
        code
    }
}

/// `@!{pred}predicate bra label`.
fn branch_unless(regs: &CounterRegisters, predicate: u32, label: &str) -> Statement {
    Statement::instruction(Instruction::new(
        Some(Guard {
            negated: true,
            predicate: format!("{}{predicate}", regs.pred).into(),
        }),
        Opcode::new("bra"),
        vec![Operand::sym(label)],
    ))
}

/// `[register]`
fn addr(register: Operand) -> Operand {
    Operand::Address(vec![register])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel whose loop holds a data-dependent `if` (an update on a cycle: CTA counters),
    /// with `before` ahead of the loop.
    fn loop_kernel(before: &str) -> String {
        format!(
            ".version 7.0\n.target sm_70\n.address_size 64\n\
             .visible .entry k(.param .u64 k_p, .param .u32 k_n)\n{{\n\
             .reg .pred %p<4>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<4>;\n\
             ld.param.u64 %rd1, [k_p];\nld.param.u32 %r1, [k_n];\nmov.u32 %r2, %tid.x;\n\
             {before}\n\
             mov.u32 %r3, 0;\nmov.u32 %r5, 0;\n\
             $L:\nld.global.u32 %r4, [%rd1];\nsetp.ne.u32 %p1, %r4, %r2;\n@%p1 bra $J;\n\
             add.u32 %r5, %r5, 1;\n\
             $J:\nadd.u32 %r3, %r3, 1;\nadd.s64 %rd1, %rd1, 4;\n\
             setp.lt.u32 %p2, %r3, %r1;\n@%p2 bra $L;\n\
             st.global.u32 [%rd1], %r5;\nret;\n}}\n"
        )
    }

    #[test]
    fn the_zeroing_waits_at_the_kernels_own_barrier_where_it_comes_first() {
        // The barriers in the clone: the kernel's own, plus the CTA counters' own where some
        // path reaches counter code, a call or an exit without passing one of the kernel's.
        let barriers = |before: &str| {
            let mut module = ptx_lexer::parse(loop_kernel(before)).unwrap();
            let results = crate::instrument_module(&mut module);
            assert!(results[0].cta_counters, "{before}: {results:?}");
            let clone = module.function("k__cf").unwrap();
            clone
                .instructions()
                .filter(|i| matches!(i.opcode.base(), "bar" | "barrier"))
                .count()
        };
        assert_eq!(barriers(""), 1);
        assert_eq!(barriers("bar.sync 0;"), 1);
        assert_eq!(barriers("barrier.sync.aligned 0;"), 1);
        // A thread that leaves first, a barrier some threads skip, or one that waits for part
        // of the CTA: the zeroing keeps its own.
        // A label named twice (in two `{ }` scopes): edges by name may miss a path.
        let twice = "bar.sync 0;\n{\n$D:\nadd.u32 %r6, %r6, 1;\n}\n{\n$D:\nadd.u32 %r6, %r6, 1;\n}";
        assert_eq!(barriers(twice), 2);
        let leaves = "setp.eq.u32 %p3, %r2, 7;\n@%p3 ret;\nbar.sync 0;";
        assert_eq!(barriers(leaves), 2);
        let skipped = "setp.eq.u32 %p3, %r2, 7;\n@%p3 bra $B;\nbar.sync 0;\n$B:";
        assert_eq!(barriers(skipped), 2);
        assert_eq!(barriers("@%p3 bar.sync 0;"), 2);
        assert_eq!(barriers("bar.sync 0, 64;"), 2);
        assert_eq!(barriers("bar.sync 1;"), 2);
        assert_eq!(barriers("bar.arrive 0, 64;"), 2);
    }

    #[test]
    fn a_flushs_alternative_paths_are_told_apart() {
        let module = ptx_lexer::parse(
            ".version 7.0\n.target sm_70\n.address_size 64\n\
             .visible .entry k()\n{\n\
             .reg .pred %p<5>;\n.reg .b64 %rd<2>;\n\
             red.global.add.u64 [%rd0+0], 1;\n\
             @!%p4 bra.uni $__cf_slow0;\n\
             red.global.add.u64 [%rd0+8], 1;\n\
             $__cf_resume1:\n\
             mov.u64 %rd1, 0;\n\
             ret;\n\
             $__cf_slow0:\n\
             @!%p4 bra.uni $__cf_tree2;\n\
             red.global.add.u64 [%rd0+8], 1;\n\
             bra.uni $__cf_resume1;\n\
             $__cf_tree2:\n\
             red.global.add.u64 [%rd0+8], 1;\n\
             $__cf_tree3:\n\
             red.global.add.u64 [%rd0+24], 1;\n\
             @%p4 bra.uni $__cf_tree3;\n\
             bra.uni $__cf_resume1;\n\
             $__cf_exit4:\n\
             red.global.add.u64 [%rd0+40], 1;\n\
             ret;\n}\n",
        )
        .unwrap();
        let function = module.function("k").unwrap();
        let paths: Vec<(String, Option<usize>)> = function
            .statements()
            .iter()
            .zip(flush_alternatives(function))
            .filter_map(|(s, path)| {
                let text = s.as_instruction()?.to_string();
                Some((
                    text,
                    path.map(|(resume, n)| {
                        assert_eq!(resume, "$__cf_resume1");
                        n
                    }),
                ))
            })
            .collect();
        let expected: Vec<(&str, Option<usize>)> = vec![
            ("red.global.add.u64 [%rd0+0], 1;", None),
            ("@!%p4 bra.uni $__cf_slow0;", None),
            ("red.global.add.u64 [%rd0+8], 1;", Some(0)),
            ("mov.u64 %rd1, 0;", None),
            ("ret;", None),
            ("@!%p4 bra.uni $__cf_tree2;", Some(1)),
            ("red.global.add.u64 [%rd0+8], 1;", Some(1)),
            ("bra.uni $__cf_resume1;", Some(1)),
            ("red.global.add.u64 [%rd0+8], 1;", Some(2)),
            ("red.global.add.u64 [%rd0+24], 1;", Some(2)),
            ("@%p4 bra.uni $__cf_tree3;", Some(2)),
            ("bra.uni $__cf_resume1;", Some(2)),
            ("red.global.add.u64 [%rd0+40], 1;", None),
            ("ret;", None),
        ];
        let paths: Vec<(&str, Option<usize>)> =
            paths.iter().map(|(t, n)| (t.as_str(), *n)).collect();
        assert_eq!(paths, expected);
    }

    #[test]
    fn a_warp_makes_the_adds_of_one_of_a_flushs_paths() {
        // A loop that lanes leave at different times, flushed where they meet with a fast path
        // (match.all) and three out-of-line paths (ballots, butterflies, tree): 2 adds on each,
        // 8 in all. Blocks that run once per thread take one add each (packed updates). Per
        // warp, the update before the loop, the flush and the update after it make 4 adds, too
        // few for CTA counters (10 counting every path of the flush); two more updates on the
        // warp's way make 6.
        let kernel = |more: &str| {
            format!(
                ".version 7.0\n.target sm_70\n.address_size 64\n\
                 .visible .entry k(.param .u64 k_p)\n{{\n\
                 .reg .pred %p<4>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<4>;\n\
                 ld.param.u64 %rd1, [k_p];\nmov.u32 %r2, %tid.x;\n\
                 ld.global.u32 %r1, [%rd1];\n\
                 setp.eq.u32 %p3, %r1, 0;\n@%p3 bra $D;\n\
                 mov.u32 %r3, 0;\n\
                 $L:\nadd.u32 %r3, %r3, 1;\nsetp.lt.u32 %p2, %r3, %r2;\n@%p2 bra $L;\n\
                 $D:\n\
                 ld.global.u32 %r4, [%rd1+4];\nsetp.eq.u32 %p1, %r4, %r2;\n@%p1 bra $E;\n\
                 st.global.u32 [%rd1], %r3;\n\
                 $E:\n{more}\
                 ret;\n}}\n"
            )
        };
        let take = |more: &str| {
            let mut module = ptx_lexer::parse(kernel(more)).unwrap();
            let results = crate::instrument_module(&mut module);
            let clone = module.function("k__cf").unwrap();
            let has_slow_path = clone.statements().iter().any(
                |s| matches!(s.kind(), StatementKind::Label(l) if l.starts_with("$__cf_slow")),
            );
            assert!(has_slow_path, "{more}: no flush with a fast path");
            results[0].cta_counters
        };
        assert!(!take(""));
        let more = "ld.global.u32 %r5, [%rd1+8];\nsetp.eq.u32 %p1, %r5, %r2;\n@%p1 bra $F;\n\
                    st.global.u32 [%rd1+8], %r3;\n$F:\n\
                    ld.global.u32 %r6, [%rd1+12];\nsetp.eq.u32 %p1, %r6, %r2;\n@%p1 bra $G;\n\
                    st.global.u32 [%rd1+12], %r3;\n$G:\n";
        assert!(take(more));
    }

    #[test]
    fn loops_of_counter_code_are_not_cycles_of_the_original() {
        let module = ptx_lexer::parse(
            ".version 7.0\n.target sm_70\n.address_size 64\n\
             .visible .entry k()\n{\n\
             .reg .pred %p<2>;\n.reg .b32 %r<2>;\n\
             mov.u32 %r0, 0;\n\
             $L1:\n add.u32 %r0, %r0, 1;\n setp.lt.u32 %p0, %r0, 10;\n @%p0 bra $L1;\n\
             $__cf_tree0:\n add.u32 %r1, %r1, 1;\n setp.lt.u32 %p1, %r1, 10;\n \
             @%p1 bra $__cf_tree0;\n\
             ret;\n}\n",
        )
        .unwrap();
        let cfg = Cfg::of(module.function("k").unwrap());
        let labels: Vec<Option<&str>> = cfg.blocks.iter().map(|b| b.label.as_deref()).collect();
        let at = |label: &str| labels.iter().position(|l| *l == Some(label)).unwrap();
        assert!(!on_original_cycle(&cfg, 0));
        assert!(on_original_cycle(&cfg, at("$L1")));
        assert!(!on_original_cycle(&cfg, at("$__cf_tree0")));
    }
}
