//! `device-runtime`: the counter code cuda-flux runs on the GPU, as PTX.
//!
//! Counters are `u64` in global memory, laid out as `[bank][block][threads, warps]`; a CTA uses
//! bank `%smid & (banks - 1)` (by the SM it runs on), so that CTAs running at the same time on
//! different SMs rarely update the same copy. Where each block is counted is planned by
//! [`placement`]: blocks behind guards on thread and CTA indices and parameters get no code, the
//! runtime counts them from each launch ([`from_launch`]); loops whose branches are all
//! warp-uniform are counted in registers on a few edges and flushed once when the warp leaves
//! them ([`region_flush`]); every other block begins
//! with a warp-aggregated update ([`block_update`]): the last active lane adds the number of
//! active threads to the block's thread counter and 1 to its warp counter ([`warp_update`]:
//! only the warp counter, where the runtime derives the thread count by flow conservation,
//! [`flow`]). The updates use `red` (no result) and predication instead of branches; only a flush
//! on the taken side of a loop's exit branch gets a block of its own.
//!
//! The kernel's `banks` parameter carries the bank mask (the bank count, a power of two, minus
//! one) in its low 24 bits and the counting mode in its top byte: 0 counts every thread, 1 only
//! the first CTA (linear id 0), 2 only the first warp (linear thread id < 32) of that CTA.
//! Threads that are not counted get a null base address, and every function derives its
//! "counted" predicate from the base, so device functions need no extra parameter for the mode.

mod cta;
pub mod flow;
pub mod from_launch;
mod instrument;
pub mod placement;

pub use flow::ThreadFlow;

pub use instrument::{
    instrument_module, instrument_module_with, instrument_module_with_global_counters,
    KernelInstrumentation, SnapshotBlock, CLONE_SUFFIX,
};
pub use placement::Placement;

use ptx_lexer::{Function, Guard, Instruction, Operand, Param, RewriteError, Statement};

/// Bytes of one block's counters in one bank: a `u64` thread count and a `u64` warp count.
pub const COUNTER_PAIR_BYTES: u64 = 16;

/// What a warp adds to a packed counter ([`packed_update`]) for itself: its thread count goes to
/// the low 32 bits, its 1 to the high 32 bits.
pub const PACKED_WARP: u64 = 1 << 32;
/// A packed counter holds exact counts while fewer threads than this run its block in one bank:
/// every thread runs a packed block at most once and every warp adds at least one thread, so
/// both halves stay below 2^32 and the low half never carries into the high one.
pub const PACKED_THREADS_LIMIT: u64 = 1 << 32;

/// Mode codes in the top byte of the `banks` parameter.
pub const MODE_ALL: u32 = 0;
/// Where the mode sits in the `banks` parameter: its top byte; the bank mask (at most 4095)
/// fills the bits below.
pub const MODE_SHIFT: u32 = 24;
/// The bank mask's bits of the `banks` parameter.
pub const BANK_MASK_BITS: u32 = (1 << MODE_SHIFT) - 1;
pub const MODE_CTA: u32 = 1;
pub const MODE_WARP: u32 = 2;
/// Every thread counts, with the banks split by ranges of linear CTA ids (packed counters of a
/// launch of [`PACKED_THREADS_LIMIT`] threads or more): bank = (CTA id >> shift) × (mask + 1)
/// + (%smid & mask), the mask in the low [`RANGE_SHIFT_BIT`] bits, the shift in the 6 above.
pub const MODE_RANGES: u32 = 3;
/// Where a ranged `banks` parameter keeps its shift.
pub const RANGE_SHIFT_BIT: u32 = 12;
/// The most banks a ranged launch may use (the runtime refuses to count a larger grid).
pub const MAX_RANGED_BANKS: u64 = 1 << 16;

/// The `banks` parameter of [`MODE_RANGES`]: `mask` (banks per range - 1, below
/// 2^[`RANGE_SHIFT_BIT`]) and `shift` (log2 of the CTAs per range, below 64).
pub fn ranged_banks_param(mask: u32, shift: u32) -> u32 {
    debug_assert!(mask < 1 << RANGE_SHIFT_BIT && shift < 64);
    (MODE_RANGES << MODE_SHIFT) | (shift << RANGE_SHIFT_BIT) | mask
}

const B32_REGISTERS: u32 = 10;
const B64_REGISTERS: u32 = 6;
const PRED_REGISTERS: u32 = 5;
/// `{b32}6`: scratch for recovering a 32-bit induction counter on a loop's exit, before the
/// flush (which uses it too) and where no other counter code is live.
const INDUCTION_SCRATCH: u32 = 6;
/// `{b32}5`: `%lanemask_le` where this thread is counted, zero where it is not, so that "no
/// higher active lane" (`activemask <= it`, one `setp`: the lane's own bit is set in the
/// active mask) elects a leader only among counted threads (`activemask` is never zero).
const LANES_UP_TO_HERE: u32 = 5;

/// Registers the counter code uses, declared once per instrumented function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterRegisters {
    /// `.b32` registers: `{b32}0`..`{b32}4` and `{b32}6`..`{b32}9` scratch, `{b32}5` the
    /// lanes-up-to-here mask (live through the function).
    pub b32: String,
    /// `.b64` registers: `{b64}0` is the bank's base address (null when this thread is not
    /// counted), `{b64}1`..`{b64}5` scratch.
    pub b64: String,
    /// `.pred` registers: `{pred}0` "this lane updates", `{pred}1` "this thread is counted"
    /// (in the prologue), `{pred}1`..`{pred}4` scratch.
    pub pred: String,
    /// `.b64` per-lane counters of the function's register-counted loops: `{counter}0`...
    pub counter: String,
    /// How many of them.
    pub counters: u32,
}

impl CounterRegisters {
    fn r32(&self, i: u32) -> Operand {
        Operand::reg(format!("{}{i}", self.b32))
    }
    fn r64(&self, i: u32) -> Operand {
        Operand::reg(format!("{}{i}", self.b64))
    }
    fn p(&self, i: u32) -> Operand {
        Operand::reg(format!("{}{i}", self.pred))
    }
    fn c(&self, i: usize) -> Operand {
        Operand::reg(format!("{}{i}", self.counter))
    }
    fn leader(&self) -> String {
        format!("{}0", self.pred)
    }

    /// Whether `name` is one of these registers (a prefix and a number below its count).
    pub fn declares(&self, name: &str) -> bool {
        [
            (&self.b32, B32_REGISTERS),
            (&self.b64, B64_REGISTERS),
            (&self.pred, PRED_REGISTERS),
            (&self.counter, self.counters),
        ]
        .iter()
        .any(|(prefix, n)| {
            name.strip_prefix(prefix.as_str())
                .and_then(|i| i.parse::<u32>().ok())
                .is_some_and(|i| i < *n)
        })
    }
}

/// Declares the counter registers in `function` under fresh names, with `counters` per-lane
/// loop counters.
pub fn declare_registers(
    function: &mut Function,
    counters: u32,
) -> Result<CounterRegisters, RewriteError> {
    // A user's own register names could, in principle, match ours: try numbered variants.
    for attempt in 0u32.. {
        let suffix = if attempt == 0 {
            String::new()
        } else {
            format!("x{attempt}_")
        };
        let regs = CounterRegisters {
            b32: format!("%__cf{suffix}r"),
            b64: format!("%__cf{suffix}rd"),
            pred: format!("%__cf{suffix}p"),
            counter: format!("%__cf{suffix}c"),
            counters,
        };
        let free = [
            (&regs.b32, B32_REGISTERS),
            (&regs.b64, B64_REGISTERS),
            (&regs.pred, PRED_REGISTERS),
            (&regs.counter, counters),
        ]
        .iter()
        .all(|(prefix, n)| (0..*n).all(|i| !function.declares_register(&format!("{prefix}{i}"))));
        if free {
            function.declare_registers(".b32", &regs.b32, B32_REGISTERS)?;
            function.declare_registers(".b64", &regs.b64, B64_REGISTERS)?;
            function.declare_registers(".pred", &regs.pred, PRED_REGISTERS)?;
            if counters > 0 {
                function.declare_registers(".b64", &regs.counter, counters)?;
            }
            return Ok(regs);
        }
    }
    unreachable!("u32 attempts are not exhausted by a finite function")
}

fn ins(opcode: &str, operands: Vec<Operand>) -> Statement {
    Statement::instruction(Instruction::simple(opcode, operands))
}

/// Computes the bank's base address into `{b64}0` and the lanes-up-to-here mask `{b32}5` from
/// the kernel parameters `counters` (`.u64`, a global pointer) and `banks` (`.u32`: the bank
/// mask, bank count - 1 with the count a power of two, in the low 24 bits; mode in the top
/// byte), for a kernel with `blocks` counted blocks, and zeroes the loop counters. Runs once, at
/// the top of the kernel. Threads the mode does not count get a null base and a zero mask; the
/// mode's test is skipped by a uniform branch to `label` when every thread is counted, the
/// common case (9 instructions then). [`MODE_RANGES`] recomputes the base at `ranged_label`.
pub fn entry_prologue(
    regs: &CounterRegisters,
    counters_param: &str,
    banks_param: &str,
    blocks: u64,
    label: &str,
    ranged_label: &str,
) -> Vec<Statement> {
    let params = BankParams {
        counters: counters_param,
        banks: banks_param,
        blocks,
    };
    let mut code = bank_base(regs, &params, label, ranged_label, CountedBy::Thread);
    code.extend(zero_counters(regs));
    code
}

/// What [`bank_base`] computes a bank's base from.
pub(crate) struct BankParams<'a> {
    /// The clone's `.u64` counters parameter.
    pub counters: &'a str,
    /// The clone's `.u32` banks parameter (bank mask and mode).
    pub banks: &'a str,
    /// The counted blocks of the kernel and its function copies: a bank's size in pairs.
    pub blocks: u64,
}

/// Whose count a bank base is computed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CountedBy {
    /// One thread, at the top of the kernel: [`MODE_WARP`] counts only the first warp, and
    /// the lanes-up-to-here mask `{b32}5` is set (zero where the thread is not counted).
    Thread,
    /// A whole CTA, at its CTA counters' flush (`cta.rs`): a base wherever the mode counts any
    /// of the CTA's threads (its first warp too: only the counted lanes added, by their masks);
    /// `{b32}5` is left alone.
    Cta,
}

/// `{b64}0` = the bank's base (null where the mode does not count), from the clone's
/// parameters; uses `{b32}0`..`{b32}4`, `{b64}1`, `{b64}2`, `{pred}1` and `{pred}2`; ends at
/// `label`, its [`MODE_RANGES`] part at `ranged_label`. Its branches are uniform over the CTA
/// ([`CountedBy::Thread`]'s test of the first warp selects).
pub(crate) fn bank_base(
    regs: &CounterRegisters,
    base: &BankParams,
    label: &str,
    ranged_label: &str,
    who: CountedBy,
) -> Vec<Statement> {
    let (r, rd, p) = (|i| regs.r32(i), |i| regs.r64(i), |i| regs.p(i));
    let addr = |name: &str| Operand::Address(vec![Operand::sym(name)]);
    let special = |name: &str| Operand::reg(name);
    let label_operand = || Operand::sym(label);
    let mut code = vec![
        ins("ld.param.u64", vec![rd(0), addr(base.counters)]),
        ins("cvta.to.global.u64", vec![rd(0), rd(0)]),
        // Bank base: counters + (%smid & mask) * blocks * 16; %smid is below 2^24, so the
        // mode in the top byte drops out of the `and` (no division: a power-of-two count).
        ins("mov.u32", vec![r(0), special("%smid")]),
        ins("ld.param.u32", vec![r(1), addr(base.banks)]),
        ins("and.b32", vec![r(2), r(0), r(1)]),
        ins(
            "mad.wide.u32",
            vec![
                rd(0),
                r(2),
                Operand::int(base.blocks * COUNTER_PAIR_BYTES),
                rd(0),
            ],
        ),
    ];
    if who == CountedBy::Thread {
        code.push(ins(
            "mov.u32",
            vec![r(LANES_UP_TO_HERE), special("%lanemask_le")],
        ));
    }
    code.extend([
        // Mode all (top byte 0): every thread counts.
        ins(
            "setp.le.u32",
            vec![p(1), r(1), Operand::int(BANK_MASK_BITS)],
        ),
        guarded(regs, 1, "bra.uni", vec![label_operand()]),
        // rd1 = linear CTA id = ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z), in 64 bits
        // (the product in parentheses is below 2^32).
        ins("mov.u32", vec![r(0), special("%ctaid.z")]),
        ins("mov.u32", vec![r(2), special("%nctaid.y")]),
        ins("mov.u32", vec![r(3), special("%ctaid.y")]),
        ins("mad.lo.u32", vec![r(0), r(0), r(2), r(3)]),
        ins("mov.u32", vec![r(2), special("%nctaid.x")]),
        ins("mov.u32", vec![r(3), special("%ctaid.x")]),
        ins("cvt.u64.u32", vec![rd(1), r(3)]),
        ins("mad.wide.u32", vec![rd(1), r(0), r(2), rd(1)]),
        // r4 = mode
        ins("shr.u32", vec![r(4), r(1), Operand::int(MODE_SHIFT)]),
        ins("setp.eq.u32", vec![p(1), r(4), Operand::int(MODE_RANGES)]),
        guarded(regs, 1, "bra.uni", vec![Operand::sym(ranged_label)]),
    ]);
    match who {
        CountedBy::Thread => {
            code.extend(linear_thread_id(regs, 2));
            code.extend([
                // counted = CTA 0 && (mode == cta || first warp)
                ins("setp.lt.u32", vec![p(2), r(2), Operand::int(32)]),
                ins("setp.eq.u32", vec![p(1), r(4), Operand::int(MODE_CTA)]),
                ins("or.pred", vec![p(2), p(2), p(1)]),
                ins("setp.eq.u64", vec![p(1), rd(1), Operand::int(0)]),
                ins("and.pred", vec![p(2), p(2), p(1)]),
                ins("selp.b64", vec![rd(0), rd(0), Operand::int(0), p(2)]),
                lanes_where(regs, 2),
            ]);
        }
        // counted = CTA 0 (mode cta or warp)
        CountedBy::Cta => code.extend([
            ins("setp.eq.u64", vec![p(2), rd(1), Operand::int(0)]),
            ins("selp.b64", vec![rd(0), rd(0), Operand::int(0), p(2)]),
        ]),
    }
    code.extend([
        ins("bra.uni", vec![label_operand()]),
        // Ranged banks: bank = (CTA id >> shift) * (mask + 1) + (%smid & mask).
        Statement::label(ranged_label),
        ins(
            "bfe.u32",
            vec![r(3), r(1), Operand::int(RANGE_SHIFT_BIT), Operand::int(6)],
        ),
        ins("shr.b64", vec![rd(1), rd(1), r(3)]),
        ins(
            "and.b32",
            vec![r(2), r(1), Operand::int((1u32 << RANGE_SHIFT_BIT) - 1)],
        ),
        ins("add.u32", vec![r(3), r(2), Operand::int(1)]),
        ins("cvt.u64.u32", vec![rd(2), r(3)]),
        ins("mul.lo.u64", vec![rd(1), rd(1), rd(2)]),
        ins("mov.u32", vec![r(3), special("%smid")]),
        ins("and.b32", vec![r(3), r(3), r(2)]),
        ins("cvt.u64.u32", vec![rd(2), r(3)]),
        ins("add.s64", vec![rd(1), rd(1), rd(2)]),
        ins("ld.param.u64", vec![rd(0), addr(base.counters)]),
        ins("cvta.to.global.u64", vec![rd(0), rd(0)]),
        ins(
            "mad.lo.u64",
            vec![
                rd(0),
                rd(1),
                Operand::int(base.blocks * COUNTER_PAIR_BYTES),
                rd(0),
            ],
        ),
        Statement::label(label),
    ]);
    code
}

/// `{b32}5 = {pred}predicate ? {b32}5 : 0`: the lanes-up-to-here mask kept only where the
/// thread is counted.
fn lanes_where(regs: &CounterRegisters, predicate: u32) -> Statement {
    let mask = regs.r32(LANES_UP_TO_HERE);
    ins(
        "selp.b32",
        vec![mask.clone(), mask, Operand::int(0), regs.p(predicate)],
    )
}

/// `{b32}out` = linear thread id = tid.x + ntid.x * (tid.y + ntid.y * tid.z); uses `{b32}0`
/// and `{b32}3`.
fn linear_thread_id(regs: &CounterRegisters, out: u32) -> Vec<Statement> {
    let r = |i| regs.r32(i);
    let special = Operand::reg;
    vec![
        ins("mov.u32", vec![r(out), special("%tid.z")]),
        ins("mov.u32", vec![r(3), special("%ntid.y")]),
        ins("mov.u32", vec![r(0), special("%tid.y")]),
        ins("mad.lo.u32", vec![r(out), r(out), r(3), r(0)]),
        ins("mov.u32", vec![r(3), special("%ntid.x")]),
        ins("mov.u32", vec![r(0), special("%tid.x")]),
        ins("mad.lo.u32", vec![r(out), r(out), r(3), r(0)]),
    ]
}

/// The prologue of a kernel with CTA counters (`cta.rs`): its adds go to shared memory and its
/// flush computes the bank's base ([`CountedBy::Cta`]), so each thread needs only the
/// lanes-up-to-here mask `{b32}5`, zero outside the first warp in [`MODE_WARP`] (the one mode
/// that counts part of a CTA), and, where it `passes_base` to function copies, a `{b64}0` that
/// is nonzero where the thread is counted (their "counted" test). Then the loop counters are
/// zeroed. 4 instructions in modes all and cta (5 passing a base), the loop counters aside.
pub(crate) fn cta_entry_prologue(
    regs: &CounterRegisters,
    banks_param: &str,
    passes_base: bool,
    label: &str,
) -> Vec<Statement> {
    let (r, rd, p) = (|i| regs.r32(i), |i| regs.r64(i), |i| regs.p(i));
    let mut code = vec![ins(
        "mov.u32",
        vec![r(LANES_UP_TO_HERE), Operand::reg("%lanemask_le")],
    )];
    if passes_base {
        code.push(ins("mov.u64", vec![rd(0), Operand::int(1)]));
    }
    code.extend([
        ins(
            "ld.param.u32",
            vec![r(1), Operand::Address(vec![Operand::sym(banks_param)])],
        ),
        // Below mode warp's range (modes all and cta) or above it (ranges): every thread adds.
        ins(
            "setp.lt.u32",
            vec![p(1), r(1), Operand::int(MODE_WARP << MODE_SHIFT)],
        ),
        guarded(regs, 1, "bra.uni", vec![Operand::sym(label)]),
        ins(
            "setp.ge.u32",
            vec![p(1), r(1), Operand::int((MODE_WARP + 1) << MODE_SHIFT)],
        ),
        guarded(regs, 1, "bra.uni", vec![Operand::sym(label)]),
    ]);
    code.extend(linear_thread_id(regs, 2));
    code.extend([
        ins("setp.lt.u32", vec![p(2), r(2), Operand::int(32)]),
        lanes_where(regs, 2),
    ]);
    if passes_base {
        code.push(ins(
            "selp.b64",
            vec![rd(0), Operand::int(1), Operand::int(0), p(2)],
        ));
    }
    code.push(Statement::label(label));
    code.extend(zero_counters(regs));
    code
}

/// The loop counters zeroed: a warp enters each counted loop with zero counts, and the flush at
/// its exit resets them.
fn zero_counters(regs: &CounterRegisters) -> Vec<Statement> {
    zeroed(regs, 0..regs.counters as usize)
}

/// `{counter}i = 0` for each of `counters`.
fn zeroed(regs: &CounterRegisters, counters: impl IntoIterator<Item = usize>) -> Vec<Statement> {
    counters
        .into_iter()
        .map(|i| ins("mov.u64", vec![regs.c(i), Operand::int(0)]))
        .collect()
}

/// The end of a device function's prologue: the lanes-up-to-here mask from the "counted" predicate
/// `{pred}1`, and the loop counters zeroed.
fn lanes_mask_and_counters(regs: &CounterRegisters) -> Vec<Statement> {
    let mut code = vec![
        ins("mov.u32", vec![regs.r32(3), Operand::reg("%lanemask_le")]),
        ins(
            "selp.b32",
            vec![
                regs.r32(LANES_UP_TO_HERE),
                regs.r32(3),
                Operand::int(0),
                regs.p(1),
            ],
        ),
    ];
    code.extend(zero_counters(regs));
    code
}

/// The prologue of a device-function copy: its counter base comes in parameter `base_param`
/// (null when the calling thread is not counted), and so does the "counted" predicate.
pub fn function_prologue(regs: &CounterRegisters, base_param: &str) -> Vec<Statement> {
    vec![
        ins(
            "ld.param.u64",
            vec![
                regs.r64(0),
                Operand::Address(vec![Operand::sym(base_param)]),
            ],
        ),
        ins("setp.ne.u64", vec![regs.p(1), regs.r64(0), Operand::int(0)]),
    ]
    .into_iter()
    .chain(lanes_mask_and_counters(regs))
    .collect()
}

/// Elects the group's leader into `{pred}0` (the last active lane, among counted threads
/// only) and leaves the active mask in `{b32}3`.
fn elect_leader_only(regs: &CounterRegisters) -> Vec<Statement> {
    let r = |i| regs.r32(i);
    vec![
        ins("activemask.b32", vec![r(3)]),
        ins(
            "setp.le.u32",
            vec![Operand::reg(regs.leader()), r(3), r(LANES_UP_TO_HERE)],
        ),
    ]
}

/// [`elect_leader_only`], and the group's size in `{b32}2`.
fn elect_leader(regs: &CounterRegisters) -> Vec<Statement> {
    let mut code = elect_leader_only(regs);
    code.push(ins("popc.b32", vec![regs.r32(2), regs.r32(3)]));
    code
}

/// `@{pred}predicate opcode operands`.
pub(crate) fn guarded(
    regs: &CounterRegisters,
    predicate: u32,
    opcode: &str,
    operands: Vec<Operand>,
) -> Statement {
    Statement::instruction(Instruction::new(
        Some(Guard {
            negated: false,
            predicate: format!("{}{predicate}", regs.pred).into(),
        }),
        ptx_lexer::Opcode::new(opcode),
        operands,
    ))
}

/// `@{pred}predicate red.global.add.u64 [{b64}0+offset], value`: an add to one counter of the
/// bank.
fn counter_add(regs: &CounterRegisters, predicate: u32, offset: u64, value: Operand) -> Statement {
    let counter = Operand::Address(vec![Operand::Offset {
        base: Box::new(regs.r64(0)),
        offset: offset.to_string().into(),
    }]);
    guarded(regs, predicate, "red.global.add.u64", vec![counter, value])
}

/// The leader (`{pred}0`) adds `threads` and `warps` to block `block`'s counter pair.
fn leader_adds(
    regs: &CounterRegisters,
    block: u64,
    threads: Operand,
    warps: Operand,
) -> [Statement; 2] {
    let threads_offset = block * COUNTER_PAIR_BYTES;
    [
        counter_add(regs, 0, threads_offset, threads),
        counter_add(regs, 0, threads_offset + 8, warps),
    ]
}

/// The update at the top of counted block `block`: the last active lane adds the active-thread
/// count to the block's thread counter and 1 to its warp counter.
pub fn block_update(regs: &CounterRegisters, block: u64) -> Vec<Statement> {
    let mut code = elect_leader(regs);
    code.push(ins("cvt.u64.u32", vec![regs.r64(2), regs.r32(2)]));
    code.extend(leader_adds(regs, block, regs.r64(2), Operand::int(1)));
    code
}

/// The update at the top of counted block `block` where a thread runs it at most once (a kernel
/// block in no cycle): the last active lane adds `active threads + PACKED_WARP` to the block's
/// thread counter, one reduction for both counts; the runtime splits the halves
/// ([`PACKED_THREADS_LIMIT`] says when they are exact).
pub fn packed_update(regs: &CounterRegisters, block: u64) -> Vec<Statement> {
    let mut code = elect_leader(regs);
    code.push(ins(
        "mad.wide.u32",
        vec![
            regs.r64(2),
            regs.r32(2),
            Operand::int(1),
            Operand::int(PACKED_WARP),
        ],
    ));
    code.push(counter_add(
        regs,
        0,
        block * COUNTER_PAIR_BYTES,
        regs.r64(2),
    ));
    code
}

/// The update at the top of block `block` whose thread count the runtime derives by flow
/// conservation ([`flow`]): the last active lane adds 1 to its warp counter only.
pub fn warp_update(regs: &CounterRegisters, block: u64) -> Vec<Statement> {
    let mut code = elect_leader_only(regs);
    code.push(counter_add(
        regs,
        0,
        block * COUNTER_PAIR_BYTES + 8,
        Operand::int(1),
    ));
    code
}

/// `{counter}i += 1` on a counted edge of a register-counted loop, guarded like the branch it
/// follows where it sits before one.
pub fn counter_increment(
    regs: &CounterRegisters,
    counter: usize,
    guard: Option<Guard>,
) -> Statement {
    Statement::instruction(Instruction::new(
        guard,
        ptx_lexer::Opcode::new("add.s64"),
        vec![regs.c(counter), regs.c(counter), Operand::int(1)],
    ))
}

/// An induction counter's snapshot of its variable as a lane enters the loop, into
/// `{counter}i` (guarded by `guard`): see [`placement::Recovery`].
pub(crate) fn induction_snapshot(
    regs: &CounterRegisters,
    counter: usize,
    induction: &placement::Induction,
    guard: Option<Guard>,
) -> Statement {
    let c = regs.c(counter);
    let v = Operand::reg(induction.register.as_str());
    let (opcode, operands) = match &induction.recovery {
        placement::Recovery::Wide {
            snapshot_offset: 0, ..
        } => ("mov.b64", vec![c, v]),
        placement::Recovery::Wide {
            snapshot_offset, ..
        } => ("add.s64", vec![c, v, Operand::int(snapshot_offset)]),
        // v0 + σ, zero-extended then stepped: taken modulo 2^32 by the recovery.
        placement::Recovery::Narrow { step, .. } if induction.recovery.snapshot_takes_a_step() => (
            "mad.wide.u32",
            vec![c, v, Operand::int(1), Operand::int(step)],
        ),
        placement::Recovery::Narrow { .. } => ("cvt.u64.u32", vec![c, v]),
    };
    Statement::instruction(Instruction::new(
        guard,
        ptx_lexer::Opcode::new(opcode),
        operands,
    ))
}

/// Turns an induction counter's snapshot in `{counter}i` into its count as a lane leaves the
/// loop by exit `exit` (see [`placement::Recovery`]).
///
/// Wide: `(register - snapshot) / step + correction`. `register - snapshot` is
/// `count × step` modulo 2^64; times the inverse of the step's odd part (modulo 2^64) it is
/// `count × 2^s`, and shifted right by `s` it is the count modulo 2^(64 - s), that is the
/// count. A negative step subtracts the other way round.
///
/// Narrow: `d = (register - snapshot)` in 32 bits, times the inverse of the step's odd part
/// and shifted right by its `s` trailing zero bits (negated for a negative step): the runs
/// modulo 2^(32 - s). Less one modulo 2^(32 - s) on the exit its test takes, where the runs are
/// 1 to 2^(32 - s) (already so where the snapshot was taken a step ahead); zero-extended; plus
/// `1 - x` on that exit, `-x` on others (the runs less the exit's term), negated when the sign
/// is -1.
pub(crate) fn induction_count(
    regs: &CounterRegisters,
    counter: usize,
    induction: &placement::Induction,
    exit: usize,
) -> Vec<Statement> {
    let c = || regs.c(counter);
    let v = || Operand::reg(induction.register.as_str());
    let mut code = Vec::new();
    match &induction.recovery {
        placement::Recovery::Wide {
            step,
            exit_corrections,
            ..
        } => {
            let magnitude = step.unsigned_abs();
            let shift = magnitude.trailing_zeros();
            let odd = magnitude >> shift;
            code.push(if *step > 0 {
                ins("sub.s64", vec![c(), v(), c()])
            } else {
                ins("sub.s64", vec![c(), c(), v()])
            });
            if odd != 1 {
                let inverse = Operand::int(format!("0x{:016X}", odd_inverse(odd)));
                code.push(ins("mul.lo.u64", vec![c(), c(), inverse]));
            }
            if shift != 0 {
                code.push(ins("shr.b64", vec![c(), c(), Operand::int(shift)]));
            }
            let correction = exit_corrections.get(exit).copied().unwrap_or(0);
            if correction != 0 {
                code.push(ins("add.s64", vec![c(), c(), Operand::int(correction)]));
            }
        }
        placement::Recovery::Narrow {
            step,
            sign,
            exit_terms,
            test_exit,
        } => {
            let d = regs.r32(INDUCTION_SCRATCH);
            code.push(ins("cvt.u32.u64", vec![d.clone(), c()]));
            code.push(if *step > 0 {
                ins("sub.u32", vec![d.clone(), v(), d.clone()])
            } else {
                ins("sub.u32", vec![d.clone(), d.clone(), v()])
            });
            let magnitude = step.unsigned_abs();
            let shift = magnitude.trailing_zeros();
            let odd = magnitude >> shift;
            if odd != 1 {
                // The inverse modulo 2^64 is one modulo 2^32 too.
                let inverse = odd_inverse(odd) as u32;
                let inverse = Operand::int(format!("0x{inverse:08X}"));
                code.push(ins("mul.lo.u32", vec![d.clone(), d.clone(), inverse]));
            }
            if shift != 0 {
                code.push(ins(
                    "shr.b32",
                    vec![d.clone(), d.clone(), Operand::int(shift)],
                ));
            }
            let on_test = i64::from(exit == *test_exit);
            // Taken one step ahead, the snapshot makes `d = runs - 1` (the runs are 1 to
            // 2^(32 - s) on the only exit, so no correction modulo 2^(32 - s) is needed).
            let ahead = induction.recovery.snapshot_takes_a_step();
            if on_test == 1 && !ahead {
                code.push(ins("add.s32", vec![d.clone(), d.clone(), Operand::int(-1)]));
                if shift != 0 {
                    let mask = Operand::int(format!("0x{:08X}", u32::MAX >> shift));
                    code.push(ins("and.b32", vec![d.clone(), d.clone(), mask]));
                }
            }
            code.push(ins("cvt.u64.u32", vec![c(), d]));
            // runs - x = d + on_test - x; the counter is sign × that.
            let term = exit_terms.get(exit).copied().unwrap_or(0);
            let constant = i128::from(on_test) - i128::from(term);
            if *sign < 0 {
                code.push(ins("sub.s64", vec![c(), Operand::int(-constant), c()]));
            } else if constant != 0 {
                code.push(ins("add.s64", vec![c(), c(), Operand::int(constant)]));
            }
        }
    }
    code
}

/// The inverse of an odd number modulo 2^64 (Newton's iteration: each step doubles the
/// number of correct low bits, from 3 for `x = odd`).
fn odd_inverse(odd: u64) -> u64 {
    debug_assert!(odd % 2 == 1);
    let mut x = odd;
    for _ in 0..5 {
        x = x.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(x)));
    }
    x
}

/// A block count as the flush computes it: `constant + Σ coefficient × {counter}i`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CountForm {
    pub constant: i64,
    /// (counter register, coefficient), coefficients non-zero.
    pub terms: Vec<(usize, i64)>,
}

/// The blocks' non-zero counts, blocks with the same count together (one evaluation each).
fn distinct_forms(blocks: &[(u64, CountForm)]) -> Vec<(&CountForm, Vec<u64>)> {
    let mut forms: Vec<(&CountForm, Vec<u64>)> = Vec::new();
    for (block, form) in blocks {
        if form.constant == 0 && form.terms.is_empty() {
            continue;
        }
        match forms.iter_mut().find(|(f, _)| *f == form) {
            Some((_, list)) => list.push(*block),
            None => forms.push((form, vec![*block])),
        }
    }
    forms
}

/// Code that evaluates `form` (into `{b64}1` unless it is a single counter or a constant);
/// returns the operand that holds the value. Wrapping 64-bit arithmetic, exact because every
/// final count fits. The first term starts from the counter itself where its coefficient is
/// one (plus the constant, in one `add`), else from the constant.
fn evaluate(regs: &CounterRegisters, form: &CountForm, code: &mut Vec<Statement>) -> Operand {
    let (constant, terms) = (form.constant, form.terms.as_slice());
    match (constant, terms) {
        (0, [(counter, 1)]) => return regs.c(*counter),
        (constant, []) => return Operand::int(constant),
        _ => {}
    }
    let value = regs.r64(1);
    let (mut accumulated, rest) = match terms {
        [(counter, 1), rest @ ..] if constant == 0 => (regs.c(*counter), rest),
        [(counter, 1), rest @ ..] => {
            code.push(ins(
                "add.s64",
                vec![value.clone(), regs.c(*counter), Operand::int(constant)],
            ));
            (value.clone(), rest)
        }
        _ => {
            code.push(ins("mov.u64", vec![value.clone(), Operand::int(constant)]));
            (value.clone(), terms)
        }
    };
    for &(counter, coefficient) in rest {
        code.push(match coefficient {
            1 => ins(
                "add.s64",
                vec![value.clone(), accumulated.clone(), regs.c(counter)],
            ),
            -1 => ins(
                "sub.s64",
                vec![value.clone(), accumulated.clone(), regs.c(counter)],
            ),
            k => ins(
                "mad.lo.s64",
                vec![
                    value.clone(),
                    regs.c(counter),
                    Operand::int(k),
                    accumulated.clone(),
                ],
            ),
        });
        accumulated = value.clone();
    }
    value
}

/// How the lanes of a warp sum their counts and take their maximum at a shrinking flush
/// ([`shrinking_flush`]), by what the PTX's target has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarpReductions {
    /// `redux.sync` (sm_80 and later): one instruction for a 32-bit sum or maximum.
    Redux,
    /// `match.sync` and `shfl.sync` (sm_70 to sm_75): where every lane holds the same counts,
    /// one lane's count times the group's size (`match.all`); else, where every count is 0 or
    /// 1, a ballot of the lanes whose count is 1; else, where the whole warp is active, a
    /// butterfly of five shuffles, each followed by the operation (ten instructions
    /// for a 32-bit sum or maximum); else a loop of tree steps over the active lanes in order,
    /// each lane finding the lane 1, 2, 4, ... places below it among them (`fns`), in 64 bits,
    /// to the last. The loop needs a block of its own: such a flush goes out of line.
    Shuffles,
    /// `shfl.sync`, `vote.sync` and `fns` without `match.sync` (sm_30 to sm_62: PTX that a
    /// build for an older GPU leaves for the driver to compile): as [`WarpReductions::Shuffles`],
    /// but the test that every lane holds the same counts compares each lane's counters with
    /// the leader's (two shuffles each) and votes on it.
    ShufflesWithoutMatch,
}

impl WarpReductions {
    /// What PTX for `targets` (its `.target` entries, e.g. `sm_90a`) can use: nothing before
    /// sm_30 (no `shfl`), where loops that lanes leave at different times are counted at their
    /// blocks.
    pub fn for_targets<T: AsRef<str>>(targets: &[T]) -> Option<Self> {
        let sm = targets
            .iter()
            .filter_map(|t| {
                t.as_ref()
                    .strip_prefix("sm_")?
                    .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                    .parse::<u32>()
                    .ok()
            })
            .max()?;
        match sm {
            80.. => Some(WarpReductions::Redux),
            70.. => Some(WarpReductions::Shuffles),
            30.. => Some(WarpReductions::ShufflesWithoutMatch),
            _ => None,
        }
    }
}

/// Lane offsets of a butterfly over 32 lanes.
const BUTTERFLY: [u32; 5] = [16, 8, 4, 2, 1];

/// `value = op(value over the warp's 32 lanes)` in every lane, by a butterfly of shuffles
/// (`op`: `max.u32` or `add.u32`; `scratch` a free `.b32`). Every lane of the warp must be
/// active: a shuffle from an inactive lane gives an undefined value.
fn butterfly(op: &str, value: &Operand, scratch: &Operand, mask: &Operand) -> Vec<Statement> {
    BUTTERFLY
        .iter()
        .flat_map(|&offset| {
            [
                ins(
                    "shfl.sync.bfly.b32",
                    vec![
                        scratch.clone(),
                        value.clone(),
                        Operand::int(offset),
                        Operand::int(31),
                        mask.clone(),
                    ],
                ),
                ins(op, vec![value.clone(), value.clone(), scratch.clone()]),
            ]
        })
        .collect()
}

/// The flush where the lanes that left a loop in different iterations meet again (the
/// immediate post-dominator of its divergent exits). Each lane holds its own counts: a block's
/// thread count is their sum, its warp count their maximum (the lanes that ran it last ran it
/// every time the warp did, since lanes only leave). Lanes that did not run the loop hold
/// zeros. `reductions` says how the lanes combine their counts: with `redux.sync`
/// (`shrinking_counts_redux`) or with shuffles (`shrinking_counts_shuffled`), where each
/// count's tree is a loop whose label `fresh_label` makes (so the flush must go out of line,
/// where it cannot split a block of the original). Then the loop's counters (`reset`) go back
/// to zero.
pub fn shrinking_flush(
    regs: &CounterRegisters,
    blocks: &[(u64, CountForm)],
    reset: &[usize],
    reductions: WarpReductions,
    fresh_label: &mut dyn FnMut() -> String,
) -> Vec<Statement> {
    let mut code = match reductions {
        WarpReductions::Redux => shrinking_counts_redux(regs, blocks),
        WarpReductions::Shuffles | WarpReductions::ShufflesWithoutMatch => {
            shrinking_counts_shuffled(regs, blocks, fresh_label)
        }
    };
    code.extend(zeroed(regs, reset.iter().copied()));
    code
}

/// [`shrinking_flush`]'s counts with `redux.sync`: the maximum is exact in two 32-bit
/// reductions (high halves, then low halves among the lanes with the largest high half); the
/// sum takes one reduction when every lane's count is below 2^27 (so 32 of them fit 32 bits),
/// else each counted lane adds its own.
fn shrinking_counts_redux(regs: &CounterRegisters, blocks: &[(u64, CountForm)]) -> Vec<Statement> {
    let (r, rd, p) = (|i| regs.r32(i), |i| regs.r64(i), |i| regs.p(i));
    let mut code = elect_leader_only(regs);
    let mask = r(3);
    // p3: this lane is counted (the mode gives uncounted lanes a zero mask).
    code.push(ins(
        "setp.ne.u32",
        vec![p(3), r(LANES_UP_TO_HERE), Operand::int(0)],
    ));
    for (form, list) in distinct_forms(blocks) {
        let value = evaluate(regs, form, &mut code);
        code.extend([
            // Warps: the largest count, high half first.
            ins("shr.b64", vec![rd(4), value.clone(), Operand::int(32)]),
            ins("cvt.u32.u64", vec![r(6), rd(4)]),
            ins("redux.sync.max.u32", vec![r(7), r(6), mask.clone()]),
            ins("setp.eq.u32", vec![p(4), r(6), r(7)]),
            ins("cvt.u32.u64", vec![r(8), value.clone()]),
            ins("selp.b32", vec![r(9), r(8), Operand::int(0), p(4)]),
            ins("redux.sync.max.u32", vec![r(9), r(9), mask.clone()]),
            ins("mov.b64", vec![rd(5), Operand::Vector(vec![r(9), r(7)])]),
            // Threads: the sum, in one reduction where every count is small.
            ins(
                "setp.lt.u64",
                vec![p(4), value.clone(), Operand::int(1u64 << 27)],
            ),
            ins("vote.sync.all.pred", vec![p(4), p(4), mask.clone()]),
            ins("redux.sync.add.u32", vec![r(8), r(8), mask.clone()]),
            ins("cvt.u64.u32", vec![rd(4), r(8)]),
            ins("and.pred", vec![p(1), p(4), p(0)]),
            ins("not.pred", vec![p(2), p(4)]),
            ins("and.pred", vec![p(2), p(2), p(3)]),
        ]);
        for block in list {
            // p1: the sum is in rd4 (leader); p2: each counted lane adds its own; p0: warps.
            let threads = block * COUNTER_PAIR_BYTES;
            code.push(counter_add(regs, 1, threads, rd(4)));
            code.push(counter_add(regs, 2, threads, value.clone()));
            code.push(counter_add(regs, 0, threads + 8, rd(5)));
        }
    }
    code
}

/// `{b64}2 = value` of lane `source` (every lane of `mask` runs it; `source` must be active):
/// two 32-bit `shfl.sync.idx` through `{b32}6` and `{b32}7`.
fn shuffled_u64(
    regs: &CounterRegisters,
    value: &Operand,
    source: &Operand,
    mask: &Operand,
) -> Vec<Statement> {
    let halves = Operand::Vector(vec![regs.r32(6), regs.r32(7)]);
    let mut code = vec![ins("mov.b64", vec![halves.clone(), value.clone()])];
    for half in [regs.r32(6), regs.r32(7)] {
        code.push(ins(
            "shfl.sync.idx.b32",
            vec![
                half.clone(),
                half,
                source.clone(),
                Operand::int(31),
                mask.clone(),
            ],
        ));
    }
    code.push(ins("mov.b64", vec![regs.r64(2), halves]));
    code
}

/// [`shrinking_flush`]'s counts with shuffles, for any set of active lanes: per count, a tree
/// over the n active lanes in order of lane, a loop over d = 1, 2, 4, ... while d < n (uniform:
/// every lane holds the same mask). At each step, each lane adds (and takes the larger of) the
/// running sum (maximum) of the active lane d places below it, where there is one (`fns`
/// finds it, from the lane itself downwards: the (d+1)-th active lane from there, offset
/// -(d+1), which is `not d`), so that at the end the last active lane, the leader, holds the
/// sum and the maximum over them all. In 64 bits, so exact for any counts (a shuffle moves 32:
/// two per value). A lane with no such partner shuffles from itself and ignores the value: no
/// lane reads an inactive lane. The steps are a loop rather than five copies because ptxas
/// schedules copies' shuffles together and keeps their values live: 24 more registers in a
/// kernel of 32.
fn shrinking_counts_shuffled(
    regs: &CounterRegisters,
    blocks: &[(u64, CountForm)],
    fresh_label: &mut dyn FnMut() -> String,
) -> Vec<Statement> {
    let (r, rd, p) = (|i| regs.r32(i), |i| regs.r64(i), |i| regs.p(i));
    let mut code = elect_leader_only(regs);
    let (mask, lanes, lane, partner, distance) = (r(3), r(1), r(0), r(2), r(4));
    code.extend([
        ins("mov.u32", vec![lane.clone(), Operand::reg("%laneid")]),
        ins("popc.b32", vec![lanes.clone(), mask.clone()]),
    ]);
    for (form, list) in distinct_forms(blocks) {
        let value = evaluate(regs, form, &mut code);
        let step = fresh_label();
        // rd4: threads (the sum), rd5: warps (the maximum).
        code.extend([
            ins("mov.b64", vec![rd(4), value.clone()]),
            ins("mov.b64", vec![rd(5), value]),
            ins("mov.u32", vec![distance.clone(), Operand::int(1)]),
            Statement::label(step.as_str()),
            ins("not.b32", vec![partner.clone(), distance.clone()]),
            ins(
                "fns.b32",
                vec![partner.clone(), mask.clone(), lane.clone(), partner.clone()],
            ),
            ins(
                "setp.ne.u32",
                vec![p(4), partner.clone(), Operand::int("0xFFFFFFFF")],
            ),
            ins(
                "selp.b32",
                vec![partner.clone(), partner.clone(), lane.clone(), p(4)],
            ),
        ]);
        for (accumulated, op) in [(rd(4), "add.s64"), (rd(5), "max.u64")] {
            code.extend(shuffled_u64(regs, &accumulated, &partner, &mask));
            code.push(guarded(
                regs,
                4,
                op,
                vec![accumulated.clone(), accumulated, rd(2)],
            ));
        }
        code.extend([
            ins(
                "shl.b32",
                vec![distance.clone(), distance.clone(), Operand::int(1)],
            ),
            ins("setp.lt.u32", vec![p(4), distance.clone(), lanes.clone()]),
            guarded(regs, 4, "bra.uni", vec![Operand::sym(step.as_str())]),
        ]);
        for block in list {
            let threads = block * COUNTER_PAIR_BYTES;
            code.push(counter_add(regs, 0, threads, rd(4)));
            code.push(counter_add(regs, 0, threads + 8, rd(5)));
        }
    }
    code
}

/// `{pred}4`: every active lane (mask in `{b32}3`) holds the same value in each of `values`,
/// by one `match.all.sync.b64` each (sm_70 and later).
fn same_values_matched(regs: &CounterRegisters, values: &[Operand]) -> Vec<Statement> {
    let mut code = Vec::new();
    for (i, value) in values.iter().enumerate() {
        code.push(ins(
            "match.all.sync.b64",
            vec![
                Operand::RegisterPair(
                    format!("{}6", regs.b32).into(),
                    format!("{}{}", regs.pred, if i == 0 { 4 } else { 3 }).into(),
                ),
                value.clone(),
                regs.r32(3),
            ],
        ));
        if i > 0 {
            code.push(ins("and.pred", vec![regs.p(4), regs.p(4), regs.p(3)]));
        }
    }
    code
}

/// [`same_values_matched`] without `match.sync` (before sm_70): each lane compares its
/// values with those of the last active lane (`bfind` of the mask: the leader), read with two
/// 32-bit shuffles each (through `{b64}2`, so no value may be there), and the lanes vote. The
/// shuffles read active lanes only, and the vote's result is the same in every lane, so the
/// branch on it is uniform.
fn same_values_as_the_leaders(regs: &CounterRegisters, values: &[Operand]) -> Vec<Statement> {
    let (r, rd, p) = (|i| regs.r32(i), |i| regs.r64(i), |i| regs.p(i));
    let (mask, source) = (r(3), r(4));
    if values.is_empty() {
        return Vec::new();
    }
    let mut code = vec![ins("bfind.u32", vec![source.clone(), mask.clone()])];
    for (i, value) in values.iter().enumerate() {
        code.extend(shuffled_u64(regs, value, &source, &mask));
        code.push(if i == 0 {
            ins("setp.eq.u64", vec![p(4), rd(2), value.clone()])
        } else {
            ins("setp.eq.and.u64", vec![p(4), rd(2), value.clone(), p(4)])
        });
    }
    code.push(ins("vote.sync.all.pred", vec![p(4), p(4), mask]));
    code
}

/// Loop counters below this, weighed by at most [`SMALL_WEIGHT`] in all, give counts below
/// 2^27: the fast path of a shrinking flush ([`shrinking_flush_fast`]).
const SMALL_COUNTER: u64 = 1 << 20;
/// See [`SMALL_COUNTER`].
const SMALL_WEIGHT: i64 = 1 << 7;

/// [`shrinking_flush`] with a fast path for the common case, where every lane's loop counters
/// are below 2^20 and no count weighs them by more than 128 in all: every count is then below
/// 2^27, so its sum over the lanes fits one 32-bit reduction and its maximum is that of the
/// low halves (about half the instructions, no per-lane adds). Otherwise a uniform branch goes
/// to `slow`, where the full flush runs out of line and returns to `resume`. Returns the code
/// for the meeting point and the out-of-line block (for the end of the body, after its final
/// unconditional transfer), or `None` where there is nothing to flush or, with `redux.sync`,
/// no count qualifies (use [`shrinking_flush`] in line).
///
/// With shuffles ([`WarpReductions::Shuffles`]) the code at the meeting point is cheaper
/// still, and takes only the commonest case: every lane holds the same counters
/// (`match.all.sync`: a grid-stride loop of one trip per lane, lanes none of which ran the
/// loop), so that each count is one lane's times the group's size. Out of line, counts of 0 or
/// 1 by ballots ([`zero_or_one_counts`]), else the fast path above (where the whole warp is
/// active: its sums and maxima by a butterfly), else the full flush, which loops
/// ([`shrinking_flush`]), all returning to `resume`.
pub fn shrinking_flush_fast(
    regs: &CounterRegisters,
    blocks: &[(u64, CountForm)],
    reset: &[usize],
    slow: &str,
    resume: &str,
    reductions: WarpReductions,
    fresh_label: &mut dyn FnMut() -> String,
) -> Option<(Vec<Statement>, Vec<Statement>)> {
    let forms = distinct_forms(blocks);
    // A constant (an exit every lane took) weighs as one more counter would.
    let weights_small = forms.iter().all(|(form, _)| {
        form.terms.iter().map(|(_, k)| k.abs()).sum::<i64>() + form.constant.abs() <= SMALL_WEIGHT
    });
    let mut counters: Vec<usize> = forms
        .iter()
        .flat_map(|(form, _)| form.terms.iter().map(|&(c, _)| c))
        .collect();
    counters.sort_unstable();
    counters.dedup();
    let has_fast_path = !counters.is_empty() && weights_small;
    if forms.is_empty() {
        return None;
    }
    let (r, p) = (|i| regs.r32(i), |i| regs.p(i));
    let mask = r(3);
    let branch_unless_p4 = |target: &str| {
        Statement::instruction(Instruction::new(
            Some(Guard {
                negated: true,
                predicate: format!("{}4", regs.pred).into(),
            }),
            ptx_lexer::Opcode::new("bra.uni"),
            vec![Operand::sym(target)],
        ))
    };
    // Each arm gives the code at the meeting point up to `resume` and the out-of-line code up
    // to the full flush, which both end the same way.
    let (mut code, mut out_of_line) = match reductions {
        WarpReductions::Redux => {
            if !has_fast_path {
                return None;
            }
            let mut code = elect_leader_only(regs);
            code.extend(small_counters_test(regs, &counters));
            code.push(branch_unless_p4(slow));
            code.extend(small_counts(regs, &forms, reductions));
            (code, vec![Statement::label(slow)])
        }
        WarpReductions::Shuffles | WarpReductions::ShufflesWithoutMatch => {
            // At the meeting point: p4, every lane holds the same counts, which is all that
            // each count times the group's size needs. Where a single count reads several
            // counters (a grid-stride loop's trips and its exits), its value is compared,
            // once (in `{b64}1`, which the comparison leaves alone); else each counter.
            let mut code = elect_leader_only(regs);
            let single = match forms.as_slice() {
                [(form, list)] if counters.len() > 1 => {
                    Some((evaluate(regs, form, &mut code), list))
                }
                _ => None,
            };
            let compared: Vec<Operand> = match &single {
                Some((value, _)) => vec![value.clone()],
                None => counters.iter().map(|&c| regs.c(c)).collect(),
            };
            if reductions == WarpReductions::Shuffles {
                code.extend(same_values_matched(regs, &compared));
            } else {
                code.extend(same_values_as_the_leaders(regs, &compared));
            }
            if !counters.is_empty() {
                code.push(branch_unless_p4(slow));
            }
            code.push(ins("popc.b32", vec![r(2), mask.clone()]));
            match single {
                Some((value, list)) => code.extend(uniform_count(regs, value, list)),
                None => code.extend(uniform_counts(regs, &forms)),
            }
            // Out of line: counts of 0 or 1 (ballots), else the whole warp with small counts
            // (butterflies), else the full flush.
            let full = fresh_label();
            let mut out_of_line = vec![Statement::label(slow)];
            if let Some(test) = zero_or_one_test(regs, &forms) {
                let next = fresh_label();
                out_of_line.extend(test);
                out_of_line.push(branch_unless_p4(&next));
                out_of_line.extend(zero_or_one_counts(regs, &forms));
                out_of_line.push(ins("bra.uni", vec![Operand::sym(resume)]));
                out_of_line.push(Statement::label(next.as_str()));
            }
            if has_fast_path {
                out_of_line.extend(small_counters_test(regs, &counters));
                // A butterfly needs every lane (the mask is the same in all lanes: a uniform
                // test).
                out_of_line.push(ins(
                    "setp.eq.and.u32",
                    vec![p(4), mask.clone(), Operand::int("0xFFFFFFFF"), p(4)],
                ));
                out_of_line.push(branch_unless_p4(&full));
                out_of_line.extend(small_counts(regs, &forms, reductions));
                out_of_line.push(ins("bra.uni", vec![Operand::sym(resume)]));
            }
            out_of_line.push(Statement::label(full.as_str()));
            (code, out_of_line)
        }
    };
    code.push(Statement::label(resume));
    code.extend(zeroed(regs, reset.iter().copied()));
    out_of_line.extend(shrinking_flush(regs, blocks, &[], reductions, fresh_label));
    out_of_line.push(ins("bra.uni", vec![Operand::sym(resume)]));
    Some((code, out_of_line))
}

/// `{pred}4`: every active lane's `counters` are below [`SMALL_COUNTER`] (the group's mask in
/// `{b32}3`).
fn small_counters_test(regs: &CounterRegisters, counters: &[usize]) -> Vec<Statement> {
    let p = |i| regs.p(i);
    let mut code: Vec<Statement> = counters
        .iter()
        .enumerate()
        .map(|(i, &counter)| {
            if i == 0 {
                ins(
                    "setp.lt.u64",
                    vec![p(4), regs.c(counter), Operand::int(SMALL_COUNTER)],
                )
            } else {
                ins(
                    "setp.lt.and.u64",
                    vec![p(4), regs.c(counter), Operand::int(SMALL_COUNTER), p(4)],
                )
            }
        })
        .collect();
    code.push(ins("vote.sync.all.pred", vec![p(4), p(4), regs.r32(3)]));
    code
}

/// The fast path's counts, each below 2^27 in every lane: the leader (`{pred}0`) adds the sum
/// over the group (`{b32}3`) and the maximum, with `redux.sync` or, where the whole warp is
/// active, butterflies of shuffles.
fn small_counts(
    regs: &CounterRegisters,
    forms: &[(&CountForm, Vec<u64>)],
    reductions: WarpReductions,
) -> Vec<Statement> {
    let r = |i| regs.r32(i);
    let mask = r(3);
    let mut code = Vec::new();
    for (form, list) in forms {
        let value = evaluate(regs, form, &mut code);
        code.push(ins("cvt.u32.u64", vec![r(8), value]));
        match reductions {
            WarpReductions::Redux => code.extend([
                ins("redux.sync.max.u32", vec![r(9), r(8), mask.clone()]),
                ins("redux.sync.add.u32", vec![r(8), r(8), mask.clone()]),
            ]),
            WarpReductions::Shuffles | WarpReductions::ShufflesWithoutMatch => {
                code.push(ins("mov.b32", vec![r(9), r(8)]));
                code.extend(butterfly("max.u32", &r(9), &r(7), &mask));
                code.extend(butterfly("add.u32", &r(8), &r(7), &mask));
            }
        }
        code.extend(leader_adds_sum_and_maximum(regs, list));
    }
    code
}

/// The 32-bit sum over the lanes in `{b32}8` and maximum in `{b32}9`, widened (`{b64}4`,
/// `{b64}5`): the leader (`{pred}0`) adds them to the pair of each of `blocks` (threads,
/// warps).
fn leader_adds_sum_and_maximum(regs: &CounterRegisters, blocks: &[u64]) -> Vec<Statement> {
    let (r, rd) = (|i| regs.r32(i), |i| regs.r64(i));
    let mut code = vec![
        ins("cvt.u64.u32", vec![rd(4), r(8)]),
        ins("cvt.u64.u32", vec![rd(5), r(9)]),
    ];
    for &block in blocks {
        let threads = block * COUNTER_PAIR_BYTES;
        code.push(counter_add(regs, 0, threads, rd(4)));
        code.push(counter_add(regs, 0, threads + 8, rd(5)));
    }
    code
}

/// `{pred}4`: every active lane's counts (`forms`, evaluated) are 0 or 1 (the group's mask in
/// `{b32}3`): the lanes ran the loop at most once (a halo or window loop, a row shorter than the
/// warp). `None` where no count depends on a counter, or one is a constant above 1, or where
/// the test could only pass with every counter zero in every lane (each counter is in a count
/// of at least 1 whatever the counters, positive coefficients only: an exit every lane took,
/// plus counts), which the test at the meeting point already takes.
fn zero_or_one_test(
    regs: &CounterRegisters,
    forms: &[(&CountForm, Vec<u64>)],
) -> Option<Vec<Statement>> {
    let p = |i| regs.p(i);
    let at_least_one = |form: &CountForm| {
        form.constant >= 1 && form.terms.iter().all(|&(_, coefficient)| coefficient > 0)
    };
    let forced_to_zero = |counter: usize| {
        forms
            .iter()
            .any(|(f, _)| at_least_one(f) && f.terms.iter().any(|&(c, _)| c == counter))
    };
    // (Also where no count has a counter term: `all` of none.)
    if forms
        .iter()
        .flat_map(|(f, _)| f.terms.iter())
        .all(|&(counter, _)| forced_to_zero(counter))
    {
        return None;
    }
    let mut code = Vec::new();
    let mut tested = false;
    for (form, _) in forms {
        if form.terms.is_empty() {
            if !(0..=1).contains(&form.constant) {
                return None;
            }
            continue;
        }
        let value = evaluate(regs, form, &mut code);
        code.push(if tested {
            ins("setp.lt.and.u64", vec![p(4), value, Operand::int(2), p(4)])
        } else {
            ins("setp.lt.u64", vec![p(4), value, Operand::int(2)])
        });
        tested = true;
    }
    code.push(ins("vote.sync.all.pred", vec![p(4), p(4), regs.r32(3)]));
    Some(code)
}

/// Counts of 0 or 1 in every lane ([`zero_or_one_test`]): a block's threads are the lanes whose
/// count is 1 (a ballot of them, counted), its warps 1 where there is one (the smaller of that
/// number and 1); a count that is the constant 1 is every lane's. Any set of active lanes: a
/// ballot reads only them. The leader (`{pred}0`) adds both.
fn zero_or_one_counts(regs: &CounterRegisters, forms: &[(&CountForm, Vec<u64>)]) -> Vec<Statement> {
    let (r, p) = (|i| regs.r32(i), |i| regs.p(i));
    let mask = r(3);
    let mut code = Vec::new();
    for (form, list) in forms {
        if form.terms.is_empty() {
            code.push(ins("popc.b32", vec![r(8), mask.clone()]));
        } else {
            let value = evaluate(regs, form, &mut code);
            code.extend([
                ins("setp.ne.u64", vec![p(4), value, Operand::int(0)]),
                ins("vote.sync.ballot.b32", vec![r(8), p(4), mask.clone()]),
                ins("popc.b32", vec![r(8), r(8)]),
            ]);
        }
        code.push(ins("min.u32", vec![r(9), r(8), Operand::int(1)]));
        code.extend(leader_adds_sum_and_maximum(regs, list));
    }
    code
}

/// Counts that are the same in every lane of the group, whose size is in `{b32}2`: the leader
/// (`{pred}0`) adds each count times the size (threads) and the count (warps).
fn uniform_counts(regs: &CounterRegisters, forms: &[(&CountForm, Vec<u64>)]) -> Vec<Statement> {
    let mut code = vec![ins("cvt.u64.u32", vec![regs.r64(3), regs.r32(2)])];
    for (form, list) in forms {
        let warps = evaluate(regs, form, &mut code);
        code.extend(uniform_adds(regs, warps, list));
    }
    code
}

/// [`uniform_counts`] of one count whose value (the warps) is in `warps` already.
fn uniform_count(regs: &CounterRegisters, warps: Operand, blocks: &[u64]) -> Vec<Statement> {
    let mut code = vec![ins("cvt.u64.u32", vec![regs.r64(3), regs.r32(2)])];
    code.extend(uniform_adds(regs, warps, blocks));
    code
}

/// The leader's adds of `warps` (in every lane of the group) and `warps` times the group's
/// size (in `{b64}3`) to each of `blocks`.
fn uniform_adds(regs: &CounterRegisters, warps: Operand, blocks: &[u64]) -> Vec<Statement> {
    let mut code = vec![ins(
        "mul.lo.s64",
        vec![regs.r64(2), warps.clone(), regs.r64(3)],
    )];
    for &block in blocks {
        code.extend(leader_adds(regs, block, regs.r64(2), warps.clone()));
    }
    code
}

/// The flush on an edge that leaves a register-counted loop: the group that leaves is the group
/// that entered (no branch in the loop splits it), so every lane holds the same counts; each
/// block's count is evaluated from the loop's counters (`blocks`: counter index, count), and
/// the last active lane adds count × group size threads and count warps. Then the loop's
/// counters (`reset`) go back to zero. The forms are evaluated in wrapping 64-bit arithmetic,
/// which is exact because every final count fits.
pub fn region_flush(
    regs: &CounterRegisters,
    blocks: &[(u64, CountForm)],
    reset: &[usize],
) -> Vec<Statement> {
    let mut code = elect_leader(regs);
    code.extend(uniform_counts(regs, &distinct_forms(blocks)));
    code.extend(zeroed(regs, reset.iter().copied()));
    code
}

/// The parameters an instrumented kernel takes after its own.
pub fn counter_params(kernel_name: &str) -> (Param, Param) {
    (
        Param::new(".param .u64", format!("{kernel_name}__cf_counters")),
        Param::new(".param .u32", format!("{kernel_name}__cf_banks")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptx_lexer::StatementKind;

    #[test]
    fn odd_inverse_inverts_modulo_2_to_the_64() {
        for odd in [1u64, 3, 5, 255, 0x1234_5677, u64::MAX, u64::MAX - 2] {
            assert_eq!(odd.wrapping_mul(odd_inverse(odd)), 1, "{odd}");
        }
    }

    fn regs() -> CounterRegisters {
        CounterRegisters {
            b32: "%r".into(),
            b64: "%rd".into(),
            pred: "%p".into(),
            counter: "%c".into(),
            counters: 2,
        }
    }

    #[test]
    fn block_update_targets_the_blocks_counter_pair() {
        let text: Vec<String> = block_update(&regs(), 3)
            .iter()
            .map(|s| match s.kind() {
                StatementKind::Instruction(i) => i.to_string(),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        // Block 3's pair starts at 3 * 16 bytes: threads there, warps 8 bytes on.
        assert_eq!(text[4], "@%p0 red.global.add.u64 [%rd0+48], %rd2;");
        assert_eq!(text[5], "@%p0 red.global.add.u64 [%rd0+56], 1;");
        // Only the last active lane (no higher active lane: the active mask is at most
        // `%lanemask_le`) updates, and only where this thread is counted (the mode): the mask
        // is zero where it is not.
        assert_eq!(text[1], "setp.le.u32 %p0, %r3, %r5;");
        assert_eq!(text.len(), 6);
    }

    /// Each statement of counter code as text: instructions and `label:`.
    fn texts(code: &[Statement]) -> Vec<String> {
        code.iter()
            .map(|s| match s.kind() {
                StatementKind::Instruction(i) => i.to_string(),
                StatementKind::Label(l) => format!("{l}:"),
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    /// `$tree0`, `$tree1`, ...: fresh labels for the flushes' loops.
    fn numbered_labels() -> impl FnMut() -> String {
        let mut next = 0;
        move || {
            next += 1;
            format!("$tree{}", next - 1)
        }
    }

    #[test]
    fn the_shrinking_flush_fast_path_only_takes_counts_it_can_bound() {
        let form = |terms: Vec<(usize, i64)>| CountForm { constant: 0, terms };
        let fast = |blocks: &[(u64, CountForm)]| {
            shrinking_flush_fast(
                &regs(),
                blocks,
                &[1],
                "$slow",
                "$resume",
                WarpReductions::Redux,
                &mut numbered_labels(),
            )
        };
        // c0 + c1 and 128 x c0 are bounded (2^20 x 128 = 2^27); 129 x c0 is not, and nothing
        // to flush needs no fast path.
        let (inline, out_of_line) = fast(&[(2, form(vec![(0, 1), (1, 1)]))]).unwrap();
        assert!(fast(&[(2, form(vec![(0, 128)]))]).is_some());
        assert!(fast(&[(2, form(vec![(0, 129)]))]).is_none());
        assert!(fast(&[(2, form(vec![]))]).is_none());
        let (inline, out_of_line) = (texts(&inline), texts(&out_of_line));
        // Both counters tested, the branch to the slow path, then the resume point and the
        // resets; the slow path returns there.
        assert!(inline.contains(&"setp.lt.u64 %p4, %c0, 1048576;".to_string()));
        assert!(inline.contains(&"setp.lt.and.u64 %p4, %c1, 1048576, %p4;".to_string()));
        assert!(inline.contains(&"@!%p4 bra.uni $slow;".to_string()));
        assert_eq!(inline[inline.len() - 2..], ["$resume:", "mov.u64 %c1, 0;"]);
        assert_eq!(out_of_line[0], "$slow:");
        assert_eq!(out_of_line.last().unwrap(), "bra.uni $resume;");
        // Block 2's pair: threads (the sum) and warps (the maximum), by the leader only.
        assert!(inline.contains(&"@%p0 red.global.add.u64 [%rd0+32], %rd4;".to_string()));
        assert!(inline.contains(&"@%p0 red.global.add.u64 [%rd0+40], %rd5;".to_string()));
    }

    #[test]
    fn before_sm_80_shrinking_flushes_take_sums_and_maxima_with_shuffles() {
        use WarpReductions::{Redux, Shuffles};
        assert_eq!(WarpReductions::for_targets(&["sm_70"]), Some(Shuffles));
        assert_eq!(
            WarpReductions::for_targets(&["sm_75", "texmode_independent"]),
            Some(Shuffles)
        );
        assert_eq!(WarpReductions::for_targets(&["sm_80"]), Some(Redux));
        assert_eq!(WarpReductions::for_targets(&["sm_90a"]), Some(Redux));
        // Before sm_70 (no `match.sync`) the lanes compare their counters with the leader's;
        // before sm_30 (no shuffles) such loops are counted at their blocks.
        assert_eq!(
            WarpReductions::for_targets(&["sm_61"]),
            Some(WarpReductions::ShufflesWithoutMatch)
        );
        assert_eq!(
            WarpReductions::for_targets(&["sm_30"]),
            Some(WarpReductions::ShufflesWithoutMatch)
        );
        assert_eq!(WarpReductions::for_targets(&["sm_20"]), None);
        let count = |text: &[String], what: &str| text.iter().filter(|t| t.contains(what)).count();
        let blocks = [(
            2,
            CountForm {
                constant: 0,
                terms: vec![(0, 1), (1, 1)],
            },
        )];
        let flush = |blocks: &[(u64, CountForm)]| {
            let (inline, out_of_line) = shrinking_flush_fast(
                &regs(),
                blocks,
                &[1],
                "$slow",
                "$resume",
                Shuffles,
                &mut numbered_labels(),
            )
            .unwrap();
            (texts(&inline), texts(&out_of_line))
        };
        let (inline, out_of_line) = flush(&blocks);
        let (inline_shuffles, out_of_line_shuffles) = (inline.clone(), out_of_line.clone());
        assert_eq!(count(&inline, "redux") + count(&out_of_line, "redux"), 0);
        // At the meeting point, only lanes that all hold the same count (the one count's
        // value, checked with one `match.all` rather than one per counter): the count times
        // the group's size.
        assert_eq!(
            inline,
            [
                "activemask.b32 %r3;",
                "setp.le.u32 %p0, %r3, %r5;",
                "add.s64 %rd1, %c0, %c1;",
                "match.all.sync.b64 %r6|%p4, %rd1, %r3;",
                "@!%p4 bra.uni $slow;",
                "popc.b32 %r2, %r3;",
                "cvt.u64.u32 %rd3, %r2;",
                "mul.lo.s64 %rd2, %rd1, %rd3;",
                "@%p0 red.global.add.u64 [%rd0+32], %rd2;",
                "@%p0 red.global.add.u64 [%rd0+40], %rd1;",
                "$resume:",
                "mov.u64 %c1, 0;",
            ]
        );
        // Out of line, first where every lane's count is 0 or 1 (any active lanes): the lanes
        // of count 1 (a ballot, counted) and whether there is one.
        assert_eq!(
            out_of_line[..16],
            [
                "$slow:",
                "add.s64 %rd1, %c0, %c1;",
                "setp.lt.u64 %p4, %rd1, 2;",
                "vote.sync.all.pred %p4, %p4, %r3;",
                "@!%p4 bra.uni $tree1;",
                "add.s64 %rd1, %c0, %c1;",
                "setp.ne.u64 %p4, %rd1, 0;",
                "vote.sync.ballot.b32 %r8, %p4, %r3;",
                "popc.b32 %r8, %r8;",
                "min.u32 %r9, %r8, 1;",
                "cvt.u64.u32 %rd4, %r8;",
                "cvt.u64.u32 %rd5, %r9;",
                "@%p0 red.global.add.u64 [%rd0+32], %rd4;",
                "@%p0 red.global.add.u64 [%rd0+40], %rd5;",
                "bra.uni $resume;",
                "$tree1:",
            ]
        );
        // Else, where the whole warp is active (a butterfly reads every lane) and the counts
        // are small: ten shuffles, a maximum and a sum of five steps each.
        let whole = out_of_line
            .iter()
            .position(|t| t == "setp.eq.and.u32 %p4, %r3, 0xFFFFFFFF, %p4;")
            .expect("the whole warp tested");
        assert_eq!(out_of_line[whole + 1], "@!%p4 bra.uni $tree0;");
        assert_eq!(count(&out_of_line, "shfl.sync.bfly.b32 %r7, %r9, "), 5);
        assert_eq!(count(&out_of_line, "max.u32 %r9, %r9, %r7;"), 5);
        assert_eq!(count(&out_of_line, "shfl.sync.bfly.b32 %r7, %r8, "), 5);
        assert_eq!(count(&out_of_line, "add.u32 %r8, %r8, %r7;"), 5);
        assert_eq!(count(&out_of_line, "bra.uni $resume;"), 3);
        // Else a loop of tree steps over the n active lanes: d = 1, 2, 4, ... while d < n; the
        // partner d active lanes down (the (d+1)-th from the lane itself, offset -(d+1)), or
        // the lane itself; 64-bit values in two shuffles each; then the leader, the last
        // active lane, adds the sum and the maximum.
        let full = out_of_line.iter().position(|t| t == "$tree0:").unwrap();
        let full = &out_of_line[full..];
        for line in [
            "mov.u32 %r0, %laneid;",
            "popc.b32 %r1, %r3;",
            "mov.u32 %r4, 1;",
            "$tree2:",
            "not.b32 %r2, %r4;",
            "fns.b32 %r2, %r3, %r0, %r2;",
            "selp.b32 %r2, %r2, %r0, %p4;",
            "@%p4 add.s64 %rd4, %rd4, %rd2;",
            "@%p4 max.u64 %rd5, %rd5, %rd2;",
            "shl.b32 %r4, %r4, 1;",
            "setp.lt.u32 %p4, %r4, %r1;",
            "@%p4 bra.uni $tree2;",
            "@%p0 red.global.add.u64 [%rd0+32], %rd4;",
            "@%p0 red.global.add.u64 [%rd0+40], %rd5;",
            "bra.uni $resume;",
        ] {
            assert_eq!(count(full, line), 1, "{line}: {full:#?}");
        }
        assert_eq!(count(full, "shfl.sync.idx.b32"), 4);
        assert_eq!(out_of_line.last().unwrap(), "bra.uni $resume;");
        // A count weighing its counters by more than 128 has no fast path: out of line, only
        // the full flush (with `redux.sync` it would run in line).
        let heavy = [(
            2,
            CountForm {
                constant: 0,
                terms: vec![(0, 129)],
            },
        )];
        let (inline, out_of_line) = flush(&heavy);
        assert!(inline.contains(&"match.all.sync.b64 %r6|%p4, %c0, %r3;".to_string()));
        assert_eq!(out_of_line[0], "$slow:");
        assert_eq!(count(&out_of_line, "vote.sync.ballot.b32"), 1);
        assert_eq!(count(&out_of_line, "shfl.sync.bfly"), 0);
        // No ballots where counts of 0 or 1 would mean every counter zero in every lane (an
        // exit every lane took, plus a counter), which `match.all` takes; but where another
        // count could still be 0 in one lane and 1 in another, ballots for both.
        let form = |constant, terms| CountForm { constant, terms };
        let (_, out_of_line) = flush(&[(2, form(1, vec![(0, 1)]))]);
        assert_eq!(count(&out_of_line, "vote.sync.ballot.b32"), 0);
        let (_, out_of_line) = flush(&[(2, form(1, vec![(0, 1)])), (3, form(0, vec![(1, 1)]))]);
        assert_eq!(count(&out_of_line, "vote.sync.ballot.b32"), 2);
        // Two counts: each counter is matched (two values would need two registers).
        let (inline, _) = flush(&[(2, form(1, vec![(0, 1)])), (3, form(0, vec![(1, 1)]))]);
        assert_eq!(count(&inline, "match.all.sync.b64"), 2);
        assert!(inline.contains(&"match.all.sync.b64 %r6|%p3, %c1, %r3;".to_string()));
        // Before sm_70, the same flush but for the test at the meeting point: each lane
        // compares the count with the leader's (the last active lane, `bfind` of the mask),
        // two shuffles, and the lanes vote.
        let (inline_61, out_of_line_61) = shrinking_flush_fast(
            &regs(),
            &blocks,
            &[1],
            "$slow",
            "$resume",
            WarpReductions::ShufflesWithoutMatch,
            &mut numbered_labels(),
        )
        .unwrap();
        let (inline_61, out_of_line_61) = (texts(&inline_61), texts(&out_of_line_61));
        assert_eq!(count(&inline_61, "match"), 0);
        assert_eq!(
            inline_61[..13],
            [
                "activemask.b32 %r3;",
                "setp.le.u32 %p0, %r3, %r5;",
                "add.s64 %rd1, %c0, %c1;",
                "bfind.u32 %r4, %r3;",
                "mov.b64 {%r6, %r7}, %rd1;",
                "shfl.sync.idx.b32 %r6, %r6, %r4, 31, %r3;",
                "shfl.sync.idx.b32 %r7, %r7, %r4, 31, %r3;",
                "mov.b64 %rd2, {%r6, %r7};",
                "setp.eq.u64 %p4, %rd2, %rd1;",
                "vote.sync.all.pred %p4, %p4, %r3;",
                "@!%p4 bra.uni $slow;",
                "popc.b32 %r2, %r3;",
                "cvt.u64.u32 %rd3, %r2;",
            ]
        );
        assert_eq!(inline_61[13..], inline_shuffles[7..]);
        assert_eq!(out_of_line_61, out_of_line_shuffles);
    }

    #[test]
    fn registers_avoid_names_the_kernel_already_uses() {
        let ptx = ".version 7.8\n.target sm_70\n.address_size 64\n.visible .entry k()\n{\n\t.reg .b32 %__cfr<4>;\n\tret;\n}\n";
        let mut module = ptx_lexer::parse(ptx).unwrap();
        let k = module.function_mut("k").unwrap();
        let regs = declare_registers(k, 0).unwrap();
        assert_eq!(regs.b32, "%__cfx1_r");
        assert!(k.declares_register("%__cfx1_r3"));
        // Ours: each prefix with a number below its count (`%__cfx1_rd` is not a `.b32`).
        assert!(regs.declares("%__cfx1_r3") && regs.declares("%__cfx1_rd5"));
        assert!(regs.declares("%__cfx1_p4"));
        assert!(!regs.declares("%__cfr3") && !regs.declares("%__cfx1_r"));
        assert!(!regs.declares(&format!("%__cfx1_r{B32_REGISTERS}")));
        assert!(!regs.declares("%__cfx1_c0"), "no loop counters declared");
    }

    #[test]
    fn a_counted_edge_out_of_a_block_of_a_label_alone_counts_after_that_label() {
        // $L1 holds no instruction; its edge into $L2 is the loop's counted edge (stepped by a
        // register, %r2 gives no count of its own).
        let ptx = ".version 7.8\n.target sm_70\n.address_size 64\n.visible .entry k(.param .u32 k_n)\n{\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, 0;\n\tmov.u32 %r3, 1;\n$L1:\n$L2:\n\tadd.s32 %r2, %r2, %r3;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n\tret;\n}\n";
        let mut module = ptx_lexer::parse(ptx).unwrap();
        let results = instrument_module(&mut module);
        let clone = module
            .function(results[0].clone.as_deref().unwrap())
            .unwrap();
        let text: Vec<String> = clone
            .statements()
            .iter()
            .map(|s| match s.kind() {
                StatementKind::Label(l) => format!("{l}:"),
                StatementKind::Instruction(i) => i.to_string(),
                _ => String::new(),
            })
            .filter(|t| !t.is_empty())
            .collect();
        let label = text.iter().position(|t| t == "$L1:").unwrap();
        assert_eq!(text[label + 1], "add.s64 %__cfc0, %__cfc0, 1;", "{text:#?}");
        assert_eq!(text.iter().filter(|t| t.contains("%__cfc0, 1")).count(), 1);
    }

    /// The instructions and labels of kernel `k`'s clone after instrumenting `body`.
    fn instrumented(body: &str) -> Vec<String> {
        let ptx = format!(".version 7.8\n.target sm_70\n.address_size 64\n.visible .entry k(.param .u64 k_p)\n{{\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n{body}\n}}\n");
        let mut module = ptx_lexer::parse(ptx).unwrap();
        let results = instrument_module(&mut module);
        let clone = module
            .function(results[0].clone.as_deref().unwrap())
            .unwrap();
        clone
            .statements()
            .iter()
            .filter_map(|s| match s.kind() {
                StatementKind::Label(l) => Some(format!("{l}:")),
                StatementKind::Instruction(i) => Some(i.to_string()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_block_no_path_reaches_gets_no_counter_and_costs_no_prologue() {
        // clang -g: a label after the last `ret`. The kernel is one straight block otherwise,
        // counted from the launch: nothing to count on the device, so no prologue either.
        let dead = "\tld.param.u64 %rd1, [k_p];\n\tmov.u32 %r1, %tid.x;\n\tst.global.u32 [%rd1], %r1;\n\tret;\n$L__tmp1:";
        let text = instrumented(dead);
        assert!(!text.iter().any(|t| t.contains("__cf")), "{text:#?}");
        // The same block reached by a branch on loaded data is counted.
        let live = "\tld.param.u64 %rd1, [k_p];\n\tmov.u32 %r1, %tid.x;\n\tld.global.u32 %r2, [%rd1];\n\tsetp.eq.u32 %p1, %r2, 0;\n\t@%p1 bra $L__tmp1;\n\tst.global.u32 [%rd1], %r1;\n\tret;\n$L__tmp1:\n\tret;";
        let text = instrumented(live);
        assert!(
            text.iter().any(|t| t.contains("red.global.add")),
            "{text:#?}"
        );
    }
}
