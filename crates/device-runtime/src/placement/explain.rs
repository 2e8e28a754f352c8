//! Why each loop is or is not counted in registers, and how each block is counted: the
//! placement's decisions in words (`cuda-flux placement`), so that the loops whose blocks still
//! pay an update with a global reduction on every trip can be found and their obstacle named.

use std::fmt;

use ptx_lexer::{Function, FunctionKind};

use super::{
    decide, in_cycle, unreachable_blocks, Attempt, Cfg, LaunchLoops, Placement, Plan,
    MAX_BLOCKS_FOR_ANALYSIS, MAX_COUNTER_REGISTERS, MAX_SHRINKING_COUNTS,
};
use crate::{block_update, packed_update, warp_update, CounterRegisters, WarpReductions};

/// Why a natural loop is not counted in registers (one variant per rule of the placement;
/// blocks are indices into the function's blocks, in layout order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// Placement `every-block`: no loop is counted in registers.
    EveryBlockPlacement,
    /// The function has more blocks than the analyses take on ([`MAX_BLOCKS_FOR_ANALYSIS`]).
    TooManyBlocks { blocks: usize },
    /// Placement `uniform-loops` derives only loops in which no branch can split the warp, and
    /// this block ends in a divergent one.
    DivergentBranchUnderUniformLoops { branch: usize },
    /// A divergent branch whose lanes are not known to meet again: it has no immediate
    /// post-dominator (some path from it ends the thread, or none reaches the end).
    DivergentBranchNeverMeets { branch: usize },
    /// A divergent branch whose lanes meet again only after the loop, at `meeting`, but whose
    /// leaving side does not go there straight or through blocks that lead only there (or it
    /// has more than two successors): lanes would leave the loop in different iterations by
    /// paths the flush cannot see.
    DivergentExitNotStraightToMeeting { branch: usize, meeting: usize },
    /// Lanes leave in different iterations towards two different meeting blocks: there is no
    /// one place for the flush.
    TwoMeetingBlocks {
        branch: usize,
        first: usize,
        second: usize,
    },
    /// A divergent branch inside the loop whose lanes meet again (at `join`) only after passing
    /// the header: the lanes run different iterations apart.
    DivergentPartHoldsHeader { branch: usize, join: usize },
    /// Lanes split by a divergent branch can leave the loop (to block `outside`) before they
    /// meet again at `join`.
    DivergentPartLeavesLoop {
        branch: usize,
        join: usize,
        outside: usize,
    },
    /// The loop holds a `call` (the callee could end the thread), `ret`, `exit`, `trap` or
    /// `brx.idx` (a jump table): a lane may leave without passing an exit edge.
    LeavesOrCalls { block: usize, opcode: String },
    /// An edge of the loop has no single place for counter code (both sides of a conditional
    /// branch go to the same block, or a successor no terminator explains).
    NoPlaceOnEdge { from: usize, to: usize },
    /// The loop has no exit edge: no place to flush its counts.
    NoExit,
    /// A taken exit branch goes to a label inside a `{ }` scope: the flush block at the end of
    /// the body could not branch there (labels are scoped).
    TakenExitIntoScope { from: usize, to: usize },
    /// A block between a divergent branch and the point where its lanes meet again leaves the
    /// loop: a warp may leave it divided. (Checked after the walk over the divergent parts,
    /// which meets such an exit first and reports [`Rejection::DivergentPartLeavesLoop`].)
    ExitFromDivergentPart { block: usize },
    /// Lanes leave in different iterations and meet at `meeting`, but the exit from `from`
    /// goes to `to`: a lane taking it would never be flushed.
    ExitAvoidsMeetingBlock {
        from: usize,
        to: usize,
        meeting: usize,
    },
    /// Lanes leave in different iterations through more exits than there are counter
    /// registers (each exit carries one).
    TooManyExits { exits: usize },
    /// The flow equations of the loop did not solve (an internal error; should not happen).
    FlowUnsolved,
    /// Lanes leave in different iterations and the loop's blocks have more distinct counts than
    /// the flush takes ([`MAX_SHRINKING_COUNTS`]; each costs it three reductions).
    TooManyShrinkingCounts { counts: usize },
    /// The loop's counts need more counter registers than a function may have
    /// ([`MAX_COUNTER_REGISTERS`]).
    TooManyCounters { needed: usize },
    /// A flush on a taken exit needs a block after the body's last instruction, and the body
    /// does not end in an unconditional transfer in its own scope.
    NoBlockAfterBody,
    /// Lanes leave in different iterations (they meet at `meeting`); combining their counts
    /// needs `shfl.sync` (sm_30), and the PTX targets an earlier architecture.
    ShrinkingNeedsShuffles { meeting: usize },
    /// Lanes leave in different iterations; before sm_80 their flush (a loop of shuffles) goes
    /// out of line, which needs a block after the body's end and a label at the meeting block
    /// in the body's own scope.
    ShuffleFlushNeedsOutOfLine {
        meeting: usize,
        /// Whether the body ends in an unconditional transfer in its own scope.
        appendable: bool,
        /// Whether the meeting block starts in the body's own scope.
        meeting_at_top_level: bool,
    },
    /// The loops chosen before it (larger ones first) left fewer counter registers than it
    /// needs.
    CounterRegistersTaken { needed: usize, free: usize },
}

impl Rejection {
    /// A short, stable name of the rule (for grouping and machine-readable output).
    pub fn rule(&self) -> &'static str {
        match self {
            Rejection::EveryBlockPlacement => "every-block-placement",
            Rejection::TooManyBlocks { .. } => "too-many-blocks",
            Rejection::DivergentBranchUnderUniformLoops { .. } => {
                "divergent-branch-under-uniform-loops"
            }
            Rejection::DivergentBranchNeverMeets { .. } => "divergent-branch-never-meets",
            Rejection::DivergentExitNotStraightToMeeting { .. } => {
                "divergent-exit-not-straight-to-meeting"
            }
            Rejection::TwoMeetingBlocks { .. } => "two-meeting-blocks",
            Rejection::DivergentPartHoldsHeader { .. } => "divergent-part-holds-header",
            Rejection::DivergentPartLeavesLoop { .. } => "divergent-part-leaves-loop",
            Rejection::LeavesOrCalls { .. } => "leaves-or-calls",
            Rejection::NoPlaceOnEdge { .. } => "no-place-on-edge",
            Rejection::NoExit => "no-exit",
            Rejection::TakenExitIntoScope { .. } => "taken-exit-into-scope",
            Rejection::ExitFromDivergentPart { .. } => "exit-from-divergent-part",
            Rejection::ExitAvoidsMeetingBlock { .. } => "exit-avoids-meeting-block",
            Rejection::TooManyExits { .. } => "too-many-exits",
            Rejection::FlowUnsolved => "flow-unsolved",
            Rejection::TooManyShrinkingCounts { .. } => "too-many-shrinking-counts",
            Rejection::TooManyCounters { .. } => "too-many-counters",
            Rejection::NoBlockAfterBody => "no-block-after-body",
            Rejection::ShrinkingNeedsShuffles { .. } => "shrinking-needs-sm30",
            Rejection::ShuffleFlushNeedsOutOfLine { .. } => "shuffle-flush-needs-out-of-line",
            Rejection::CounterRegistersTaken { .. } => "counter-registers-taken",
        }
    }

    /// The reason in words, each block named by `block` (its index, or index and label).
    pub fn describe(&self, block: &dyn Fn(usize) -> String) -> String {
        match self {
            Rejection::EveryBlockPlacement => {
                "placement every-block counts every block at its top".to_string()
            }
            Rejection::TooManyBlocks { blocks } => format!(
                "the function has {blocks} blocks, more than the {MAX_BLOCKS_FOR_ANALYSIS} the \
                 placement analyses"
            ),
            Rejection::DivergentBranchUnderUniformLoops { branch } => format!(
                "{} ends in a divergent branch, and placement uniform-loops derives only loops \
                 no branch of which can split the warp",
                block(*branch)
            ),
            Rejection::DivergentBranchNeverMeets { branch } => format!(
                "{} ends in a divergent branch whose lanes are not known to meet again (no \
                 immediate post-dominator: a path from it ends the thread)",
                block(*branch)
            ),
            Rejection::DivergentExitNotStraightToMeeting { branch, meeting } => format!(
                "{} ends in a divergent branch whose lanes meet again only after the loop, at \
                 {}, but its side that leaves does not go only there",
                block(*branch),
                block(*meeting)
            ),
            Rejection::TwoMeetingBlocks {
                branch,
                first,
                second,
            } => format!(
                "lanes leave the loop in different iterations towards two meeting blocks, {} \
                 and (from the divergent branch at {}) {}: no one place to flush",
                block(*first),
                block(*branch),
                block(*second)
            ),
            Rejection::DivergentPartHoldsHeader { branch, join } => format!(
                "the lanes split by the divergent branch at {} meet again at {} only after \
                 passing the loop's header: they run iterations apart",
                block(*branch),
                block(*join)
            ),
            Rejection::DivergentPartLeavesLoop {
                branch,
                join,
                outside,
            } => format!(
                "lanes split by the divergent branch at {} can leave the loop (to {}) before \
                 they meet again at {}",
                block(*branch),
                block(*outside),
                block(*join)
            ),
            Rejection::LeavesOrCalls { block: b, opcode } => {
                let why = match opcode.as_str() {
                    "call" => "the callee could end the thread",
                    "brx" => "a jump table's targets are not known",
                    _ => "it ends the thread",
                };
                format!("{} holds `{opcode}` ({why})", block(*b))
            }
            Rejection::NoPlaceOnEdge { from, to } => format!(
                "the edge from {} to {} has no single place for counter code (both sides of \
                 its branch go there)",
                block(*from),
                block(*to)
            ),
            Rejection::NoExit => {
                "the loop has no exit edge: no place to flush its counts".to_string()
            }
            Rejection::TakenExitIntoScope { from, to } => format!(
                "the exit from {} is a taken branch to a label inside a {{ }} scope ({}), which \
                 the flush block at the end of the body cannot branch to",
                block(*from),
                block(*to)
            ),
            Rejection::ExitFromDivergentPart { block: b } => format!(
                "{} lies between a divergent branch and the point where its lanes meet again, \
                 and leaves the loop: a warp may leave it divided",
                block(*b)
            ),
            Rejection::ExitAvoidsMeetingBlock { from, to, meeting } => format!(
                "lanes leave the loop in different iterations and meet at {}, but the exit \
                 from {} goes to {}",
                block(*meeting),
                block(*from),
                block(*to)
            ),
            Rejection::TooManyExits { exits } => format!(
                "lanes leave the loop in different iterations through {exits} exits, each \
                 needing a counter register (at most {MAX_COUNTER_REGISTERS})"
            ),
            Rejection::FlowUnsolved => {
                "the loop's flow equations did not solve (an internal error)".to_string()
            }
            Rejection::TooManyShrinkingCounts { counts } => format!(
                "lanes leave the loop in different iterations and its blocks have {counts} \
                 distinct counts (the flush takes at most {MAX_SHRINKING_COUNTS}: each costs \
                 it three warp reductions)"
            ),
            Rejection::TooManyCounters { needed } => format!(
                "its counts need {needed} counter registers, more than the \
                 {MAX_COUNTER_REGISTERS} a function may use"
            ),
            Rejection::NoBlockAfterBody => "an exit is a taken branch, whose flush needs a block \
                 after the body's last instruction, and the body does not end in an \
                 unconditional transfer in its own scope"
                .to_string(),
            Rejection::ShrinkingNeedsShuffles { meeting } => format!(
                "lanes leave the loop in different iterations (they meet at {}): combining \
                 their counts needs shfl.sync (sm_30), and the PTX targets an earlier \
                 architecture",
                block(*meeting)
            ),
            Rejection::ShuffleFlushNeedsOutOfLine {
                meeting,
                appendable,
                meeting_at_top_level,
            } => {
                let mut missing = Vec::new();
                if !appendable {
                    missing.push(
                        "the body does not end in an unconditional transfer in its own scope",
                    );
                }
                if !meeting_at_top_level {
                    missing.push("the meeting block is inside a { } scope");
                }
                format!(
                    "lanes leave the loop in different iterations (they meet at {}); before \
                     sm_80 their flush goes out of line, and {}",
                    block(*meeting),
                    missing.join(" and ")
                )
            }
            Rejection::CounterRegistersTaken { needed, free } => format!(
                "its counts need {needed} counter register{}, and the loops chosen before it \
                 left {free} of {MAX_COUNTER_REGISTERS}",
                if *needed == 1 { "" } else { "s" }
            ),
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(&|b| format!("block {b}")))
    }
}

/// What became of one natural loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Counted in registers: derived blocks cost nothing per trip beyond the counted edges.
    Region {
        /// Lanes may leave in different iterations; they meet again, and the counts are
        /// flushed, at this block (a shrinking region).
        shrinking_to: Option<usize>,
        /// Chosen inside the divergent parts of an enclosing region (a nested region).
        nested: bool,
        counter_registers: usize,
        /// Counter registers read off one of the program's induction variables instead of an
        /// `add` per trip.
        induction_counters: usize,
        /// Blocks between a divergent branch and the point where its lanes meet again: counted
        /// at their tops, not by the flush.
        divergent_blocks: Vec<usize>,
    },
    /// Never tried on its own: it is part of the region that encloses it, whose flush derives
    /// its blocks (except those in that region's divergent parts).
    Enclosed,
    /// Counted at its blocks' tops, for this reason.
    Rejected(Rejection),
    /// A loop of one block whose trips follow from its induction register and the launch: the
    /// runtime counts it ([`BlockCounting::LaunchLoop`]).
    FromLaunch,
}

/// One natural loop of a function and its [`Decision`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopDecision {
    pub header: usize,
    /// Its blocks, the header among them, in layout order.
    pub blocks: Vec<usize>,
    /// How many other natural loops enclose it (0: outermost).
    pub depth: usize,
    /// The header of the innermost region (other than the loop itself) that holds its header.
    pub enclosing_region: Option<usize>,
    pub decision: Decision,
}

/// How one block's thread and warp counts are obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockCounting {
    /// No path from the entry reaches it: it never runs, its counts stay zero.
    Unreachable,
    /// A kernel's entry block that nothing branches to: counted by the runtime from the launch.
    FromLaunch,
    /// A block of the kernel's launch tree: the runtime counts the threads whose indices pass
    /// the branches from the entry to it, and their warps, from the launch's shape and
    /// parameters (`conditions`: the branches on the way).
    LaunchConditions { conditions: usize },
    /// A loop of one block that the threads of a launch-tree path enter once: the runtime
    /// counts its trips from the launch too, from its induction register (`conditions`: the
    /// branches on the way to it).
    LaunchLoop { conditions: usize },
    /// Runs exactly as often as block `from`, by the same groups: the runtime copies its counts.
    Copied { from: usize },
    /// Counted in registers by the region with this header and written by its flush.
    Flushed { region: usize },
    /// One side of a warp-uniform branch: threads and warps are the branch block's minus the
    /// other side's (no counter code).
    Difference { branch: usize, sibling: usize },
    /// Its warp count is updated at its top; its thread count follows by flow conservation.
    WarpUpdate,
    /// On no cycle of a kernel: one reduction at its top adds threads and warps, packed.
    PackedUpdate,
    /// The full update at its top: threads and warps, two reductions.
    FullUpdate,
}

/// What counter code a block's update costs each time a warp runs the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UpdateCost {
    /// Warp instructions.
    pub instructions: usize,
    /// Of them, global reductions (issued by one lane).
    pub reductions: usize,
}

impl BlockCounting {
    /// The update at the block's top, measured on the code the instrumentation inserts
    /// (`block_update`, `packed_update`, `warp_update`); zero for a block without one.
    pub fn update_cost(self) -> UpdateCost {
        let regs = CounterRegisters {
            b32: "%cf_r".into(),
            b64: "%cf_rd".into(),
            pred: "%cf_p".into(),
            counter: "%cf_c".into(),
            counters: 0,
        };
        let code = match self {
            BlockCounting::FullUpdate => block_update(&regs, 0),
            BlockCounting::PackedUpdate => packed_update(&regs, 0),
            BlockCounting::WarpUpdate => warp_update(&regs, 0),
            _ => return UpdateCost::default(),
        };
        let instructions: Vec<_> = code.iter().filter_map(|s| s.as_instruction()).collect();
        UpdateCost {
            instructions: instructions.len(),
            reductions: instructions
                .iter()
                .filter(|i| matches!(i.opcode.base(), "red" | "atom"))
                .count(),
        }
    }
}

/// A function's counter placement, explained ([`explain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// Per block, in layout order.
    pub blocks: Vec<BlockCounting>,
    /// Its natural loops, largest first.
    pub loops: Vec<LoopDecision>,
    /// Counter registers its regions take (at most [`MAX_COUNTER_REGISTERS`]).
    pub counter_registers: usize,
}

/// Explains how `function` is counted under `placement` for a target with `reductions`
/// (`WarpReductions::for_targets` of the module's `.target`, as the instrumentation uses):
/// every natural loop with its decision and, where it is not counted in registers, the rule
/// that stopped it; every block with the way its counts are obtained. The decisions are those
/// the instrumentation itself takes (one code path), so the explanation cannot drift from the
/// emitted PTX.
pub fn explain(
    function: &Function,
    placement: Placement,
    reductions: Option<WarpReductions>,
) -> Explanation {
    let decided = decide(function, placement, reductions, LaunchLoops::Counted);
    let cfg = Cfg::of(function);
    let (loops, attempts) = match &decided.unanalysed {
        Some(reason) => {
            let loops = cfg.loops();
            let attempts = vec![Attempt::Rejected(reason.clone()); loops.len()];
            (loops, attempts)
        }
        None => (decided.loops, decided.attempts),
    };
    let plan = &decided.plan;
    let innermost_region = |b: usize, except: usize| {
        plan.regions
            .iter()
            .filter(|r| r.header != except && r.blocks.contains(&b))
            .min_by_key(|r| r.blocks.len())
            .map(|r| r.header)
    };
    let loop_decisions = loops
        .iter()
        .zip(attempts)
        .map(|(l, attempt)| {
            let decision = match attempt {
                Attempt::NotTried => Decision::Enclosed,
                Attempt::Rejected(reason) => Decision::Rejected(reason),
                Attempt::FromLaunch => Decision::FromLaunch,
                Attempt::Chosen { nested, region } => {
                    let region = &plan.regions[region];
                    Decision::Region {
                        shrinking_to: region.shrinking_to,
                        nested,
                        counter_registers: region.counter_registers(),
                        induction_counters: region.inductions.iter().flatten().count(),
                        divergent_blocks: region.direct.iter().copied().collect(),
                    }
                }
            };
            LoopDecision {
                header: l.header,
                blocks: l.blocks.iter().copied().collect(),
                depth: loops
                    .iter()
                    .filter(|other| other.header != l.header && other.blocks.is_superset(&l.blocks))
                    .count(),
                enclosing_region: innermost_region(l.header, l.header),
                decision,
            }
        })
        .collect();
    let unreachable = unreachable_blocks(function, &cfg);
    // Only a kernel's own blocks run at most once per thread outside cycles (a device
    // function's may run once per call): only those take packed updates.
    let packable = function.kind() == FunctionKind::Entry;
    let blocks = (0..cfg.blocks.len())
        .map(|b| block_counting(plan, &cfg, &unreachable, packable, b))
        .collect();
    Explanation {
        blocks,
        loops: loop_decisions,
        counter_registers: plan.counter_registers(),
    }
}

/// How block `b` is counted under `plan` (`unreachable`: [`unreachable_blocks`]; `packable`:
/// the function is the kernel itself, whose blocks on no cycle run at most once per thread).
/// The instrumentation inserts exactly the update this names.
pub(crate) fn block_counting(
    plan: &Plan,
    cfg: &Cfg,
    unreachable: &[bool],
    packable: bool,
    b: usize,
) -> BlockCounting {
    if unreachable.get(b).copied().unwrap_or(false) {
        return BlockCounting::Unreachable;
    }
    if b == 0 && plan.entry_from_launch {
        return BlockCounting::FromLaunch;
    }
    if let Some(counted) = plan.launch_counted.iter().find(|l| l.block == b) {
        let conditions = counted.path.len();
        return if counted.trips.is_some() {
            BlockCounting::LaunchLoop { conditions }
        } else {
            BlockCounting::LaunchConditions { conditions }
        };
    }
    if let Some(&(_, from)) = plan.copies.iter().find(|&&(block, _)| block == b) {
        return BlockCounting::Copied { from };
    }
    let flushing = plan
        .regions
        .iter()
        .find(|r| r.blocks.contains(&b) && !r.direct.contains(&b));
    if let Some(region) = flushing {
        return BlockCounting::Flushed {
            region: region.header,
        };
    }
    if let Some(d) = plan.differences.iter().find(|d| d.block == b) {
        return BlockCounting::Difference {
            branch: d.branch,
            sibling: d.sibling,
        };
    }
    if plan.threads_derived(b) {
        BlockCounting::WarpUpdate
    } else if packable && !in_cycle(cfg, b) {
        BlockCounting::PackedUpdate
    } else {
        BlockCounting::FullUpdate
    }
}

// Not built here, as no input reaches them: `TwoMeetingBlocks` (two exits whose branches have
// different immediate post-dominators outside one loop cannot both leave straight to theirs),
// `NoPlaceOnEdge` (a block with two distinct successors ends in a conditional branch, `brx.idx`
// aside, which is rejected before), `ExitFromDivergentPart` (see the test that finds such an
// exit) and `FlowUnsolved` (a spanning tree always peels). They stay checked: the placement's
// soundness must not rest on these arguments.
#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel `k` with `body` (registers `%p<12>`, `%r<16>`, parameter `k_n`) after `prelude`
    /// (other functions).
    fn module(prelude: &str, body: &str) -> ptx_lexer::Module {
        let ptx = format!(
            ".version 7.8\n.target sm_70\n.address_size 64\n{prelude}.visible .entry k(.param .u32 k_n)\n{{\n\t.reg .pred %p<12>;\n\t.reg .b32 %r<16>;\n{body}\n}}\n"
        );
        ptx_lexer::parse(ptx).unwrap()
    }

    fn explained_with(
        body: &str,
        placement: Placement,
        reductions: Option<WarpReductions>,
    ) -> Explanation {
        let module = module("", body);
        explain(module.function("k").unwrap(), placement, reductions)
    }

    fn explained(body: &str) -> Explanation {
        explained_with(body, Placement::Derived, Some(WarpReductions::Redux))
    }

    /// The decision for the loop with header `header`.
    fn decision(explanation: &Explanation, header: usize) -> &Decision {
        &explanation
            .loops
            .iter()
            .find(|l| l.header == header)
            .unwrap_or_else(|| panic!("no loop at {header}: {:?}", explanation.loops))
            .decision
    }

    fn rejection(explanation: &Explanation, header: usize) -> &Rejection {
        match decision(explanation, header) {
            Decision::Rejected(reason) => reason,
            other => panic!("loop {header} is not rejected: {other:?}"),
        }
    }

    /// A loop (`$L1`, block 1) that lanes leave at different times (its trip count is the
    /// lane's: `%laneid`, which the launch does not give, so that the loop is not counted from
    /// it), meeting at `$L2` (block 2).
    const SHRINKING: &str = "\tmov.u32 %r1, %laneid;\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n$L2:\n\tret;";

    /// A uniform loop (`$L1`, block 1) with a fall-through exit to block 2 (its bound read
    /// at an offset, which the launch tree does not follow: not counted from the launch).
    const UNIFORM: &str = "\tld.param.u32 %r1, [k_n+0];\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n\tret;";

    #[test]
    fn a_uniform_loop_is_a_region_and_its_block_is_flushed() {
        let e = explained(UNIFORM);
        assert_eq!(e.loops.len(), 1);
        let l = &e.loops[0];
        assert_eq!((l.header, l.blocks.clone(), l.depth), (1, vec![1], 0));
        assert!(matches!(
            l.decision,
            Decision::Region {
                shrinking_to: None,
                nested: false,
                counter_registers: 1,
                ..
            }
        ));
        assert_eq!(
            e.blocks,
            vec![
                BlockCounting::FromLaunch,
                BlockCounting::Flushed { region: 1 },
                // Runs once per thread, as the entry does.
                BlockCounting::Copied { from: 0 }
            ]
        );
        assert_eq!(e.counter_registers, 1);
    }

    #[test]
    fn every_block_placement_rejects_every_loop() {
        let e = explained_with(UNIFORM, Placement::EveryBlock, Some(WarpReductions::Redux));
        assert_eq!(rejection(&e, 1), &Rejection::EveryBlockPlacement);
        // The entry block too is counted at its top.
        assert_eq!(e.blocks[0], BlockCounting::PackedUpdate);
        assert_eq!(e.blocks[1], BlockCounting::FullUpdate);
    }

    #[test]
    fn a_function_with_too_many_blocks_is_not_analysed() {
        let many: String = (0..MAX_BLOCKS_FOR_ANALYSIS)
            .map(|i| format!("$B{i}:\n\tadd.s32 %r3, %r3, 1;\n"))
            .collect();
        let e = explained(&format!("{many}{UNIFORM}"));
        assert!(matches!(
            rejection(&e, MAX_BLOCKS_FOR_ANALYSIS),
            Rejection::TooManyBlocks { blocks } if *blocks > MAX_BLOCKS_FOR_ANALYSIS
        ));
    }

    #[test]
    fn uniform_loops_placement_rejects_a_divergent_branch() {
        let e = explained_with(
            SHRINKING,
            Placement::UniformLoops,
            Some(WarpReductions::Redux),
        );
        assert_eq!(
            rejection(&e, 1),
            &Rejection::DivergentBranchUnderUniformLoops { branch: 1 }
        );
        assert_eq!(e.blocks[1], BlockCounting::FullUpdate);
    }

    #[test]
    fn a_divergent_branch_whose_sides_end_in_different_rets_never_meets() {
        // $L1's lanes with a small id leave to their own `ret`.
        let src = "\tmov.u32 %r1, %tid.x;\n\tld.param.u32 %r4, [k_n];\n\tmov.u32 %r2, 0;\n$L1:\n\tsetp.lt.u32 %p1, %r1, 5;\n\t@%p1 bra $OUT;\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p2, %r2, %r4;\n\t@%p2 bra $L1;\n\tret;\n$OUT:\n\tret;";
        let e = explained(src);
        assert_eq!(
            rejection(&e, 1),
            &Rejection::DivergentBranchNeverMeets { branch: 1 }
        );
    }

    #[test]
    fn a_divergent_exit_through_a_branch_is_not_straight_to_the_meeting_block() {
        // Lanes leave $L1 for $X, and meet the others at $J only after it; $X branches (to $J
        // either way), so the way out is no chain of blocks leading only to $J.
        let src = "\tmov.u32 %r1, %tid.x;\n\tld.param.u32 %r4, [k_n];\n\tmov.u32 %r2, 0;\n$L1:\n\tsetp.lt.u32 %p1, %r1, %r2;\n\t@%p1 bra $X;\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p2, %r2, %r4;\n\t@%p2 bra $L1;\n\tbra.uni $J;\n$X:\n\tsetp.eq.u32 %p3, %r1, 9;\n\t@%p3 bra $J;\n\tadd.s32 %r3, %r3, 1;\n$J:\n\tret;";
        let e = explained(src);
        assert_eq!(
            rejection(&e, 1),
            &Rejection::DivergentExitNotStraightToMeeting {
                branch: 1,
                meeting: 6
            }
        );
        // Without the branch, $X leads only to $J: lanes that leave there are flushed at $J
        // with the others (a shrinking region).
        let chain = src.replace("\tsetp.eq.u32 %p3, %r1, 9;\n\t@%p3 bra $J;\n", "");
        assert!(matches!(
            decision(&explained(&chain), 1),
            Decision::Region {
                shrinking_to: Some(5),
                ..
            }
        ));
        // A way out that may end the thread is none either.
        let leaves = chain.replace("\tadd.s32 %r3, %r3, 1;\n$J:", "\t@%p1 ret;\n$J:");
        assert!(matches!(
            rejection(&explained(&leaves), 1),
            Rejection::DivergentExitNotStraightToMeeting { branch: 1, .. }
        ));
    }

    #[test]
    fn a_divergent_part_that_runs_into_the_header_is_rejected() {
        // Lanes with a small id go round through block 2 while the others go on to $J: they
        // meet at $J only after passing the header again.
        let src = "\tmov.u32 %r1, %tid.x;\n\tld.param.u32 %r4, [k_n];\n\tmov.u32 %r2, 0;\n$H:\n\tsetp.lt.u32 %p1, %r1, 5;\n\t@%p1 bra $J;\n\tadd.s32 %r3, %r3, 1;\n\tbra.uni $H;\n$J:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p2, %r2, %r4;\n\t@%p2 bra $H;\n\tret;";
        let e = explained(src);
        assert_eq!(
            rejection(&e, 1),
            &Rejection::DivergentPartHoldsHeader { branch: 1, join: 3 }
        );
    }

    #[test]
    fn a_divergent_part_that_leaves_the_loop_is_rejected() {
        // Lanes with a small id leave the loop $H for $OUT (also entered from the entry) and
        // come back through $H; they meet the others at $J.
        let src = "\tmov.u32 %r1, %tid.x;\n\tld.param.u32 %r4, [k_n];\n\tmov.u32 %r2, 0;\n\tsetp.eq.u32 %p3, %r4, 7;\n\t@%p3 bra $OUT;\n$H:\n\tsetp.lt.u32 %p1, %r1, 5;\n\t@%p1 bra $OUT;\n$J:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p2, %r2, %r4;\n\t@%p2 bra $H;\n\tret;\n$OUT:\n\tadd.s32 %r3, %r3, 1;\n\tbra.uni $H;";
        let e = explained(src);
        assert_eq!(
            rejection(&e, 1),
            &Rejection::DivergentPartLeavesLoop {
                branch: 1,
                join: 2,
                outside: 4
            }
        );
    }

    #[test]
    fn a_loop_that_calls_or_returns_is_rejected() {
        let with_call = module(
            ".func f()\n{\n\tret;\n}\n",
            &UNIFORM.replace("$L1:\n", "$L1:\n\tcall f;\n"),
        );
        let e = explain(
            with_call.function("k").unwrap(),
            Placement::Derived,
            Some(WarpReductions::Redux),
        );
        assert_eq!(
            rejection(&e, 1),
            &Rejection::LeavesOrCalls {
                block: 1,
                opcode: "call".into()
            }
        );
        let with_exit =
            UNIFORM.replace("$L1:\n", "$L1:\n\tsetp.eq.u32 %p3, %r2, 9;\n\t@%p3 exit;\n");
        assert!(matches!(
            rejection(&explained(&with_exit), 1),
            Rejection::LeavesOrCalls { opcode, .. } if opcode == "exit"
        ));
    }

    #[test]
    fn a_loop_without_an_exit_has_no_place_for_its_flush() {
        let e = explained("\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tbra.uni $L1;");
        assert_eq!(rejection(&e, 1), &Rejection::NoExit);
    }

    #[test]
    fn a_taken_exit_into_a_nested_scope_is_rejected() {
        let src = "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.ge.u32 %p1, %r2, %r1;\n\t@%p1 bra $IN;\n\tbra.uni $L1;\n\t{\n$IN:\n\tadd.s32 %r3, %r3, 1;\n\t}\n\tret;";
        let e = explained(src);
        assert_eq!(
            rejection(&e, 1),
            &Rejection::TakenExitIntoScope { from: 1, to: 3 }
        );
    }

    #[test]
    fn an_exit_between_a_divergent_branch_and_its_join_is_found_by_the_walk_over_that_part() {
        // Inner loop {$H, 3, $X}: block 3 runs for some lanes only, and leaves to the outer
        // header $O. (So `ExitFromDivergentPart`, checked after that walk, is never the
        // reason: the walk follows every edge out of the part and meets the exit first.)
        let src = "\tmov.u32 %r1, %tid.x;\n\tld.param.u32 %r4, [k_n];\n\tmov.u32 %r5, 0;\n$O:\n\tmov.u32 %r2, 0;\n$H:\n\tsetp.lt.u32 %p1, %r1, 5;\n\t@%p1 bra $X;\n\tsetp.eq.u32 %p3, %r4, 7;\n\t@%p3 bra $O;\n$X:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p2, %r2, %r4;\n\t@%p2 bra $H;\n\tadd.s32 %r5, %r5, 1;\n\tsetp.lt.u32 %p4, %r5, %r4;\n\t@%p4 bra $O;\n\tret;";
        let e = explained(src);
        assert_eq!(
            rejection(&e, 1),
            &Rejection::DivergentPartHoldsHeader { branch: 2, join: 4 }
        );
        assert_eq!(
            rejection(&e, 2),
            &Rejection::DivergentPartLeavesLoop {
                branch: 2,
                join: 4,
                outside: 1
            }
        );
    }

    #[test]
    fn a_shrinking_loop_with_an_exit_elsewhere_is_rejected() {
        // Lanes leave $L1 at their own trip count for $J; all leave block 2 for $K together,
        // which branches (to $J either way).
        let src = "\tmov.u32 %r1, %tid.x;\n\tld.param.u32 %r4, [k_n];\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.ge.u32 %p1, %r2, %r1;\n\t@%p1 bra $J;\n\tsetp.ge.u32 %p2, %r2, %r4;\n\t@%p2 bra $K;\n\tbra.uni $L1;\n$K:\n\tsetp.eq.u32 %p3, %r1, 9;\n\t@%p3 bra $J;\n\tadd.s32 %r3, %r3, 1;\n$J:\n\tret;";
        let e = explained(src);
        assert_eq!(
            rejection(&e, 1),
            &Rejection::ExitAvoidsMeetingBlock {
                from: 2,
                to: 4,
                meeting: 6
            }
        );
        // Where $K only goes on to $J, the lanes that leave there are flushed at $J too.
        let through = src.replace("\tsetp.eq.u32 %p3, %r1, 9;\n\t@%p3 bra $J;\n", "");
        assert!(matches!(
            decision(&explained(&through), 1),
            Decision::Region {
                shrinking_to: Some(5),
                ..
            }
        ));
    }

    /// A loop (`$L1`) that lanes leave at different times for `$J`, with `blocks` blocks
    /// after its header, each ending in `@%p2 bra $J` on a uniform test.
    fn shrinking_with_exits(blocks: usize) -> String {
        let exits: String = (0..blocks)
            .map(|i| format!("$E{i}:\n\tsetp.eq.u32 %p2, %r2, {i};\n\t@%p2 bra $J;\n"))
            .collect();
        format!("\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.ge.u32 %p1, %r2, %r1;\n\t@%p1 bra $J;\n{exits}\tbra.uni $L1;\n$J:\n\tret;")
    }

    #[test]
    fn a_shrinking_loop_with_more_exits_than_counter_registers_is_rejected() {
        let e = explained(&shrinking_with_exits(MAX_COUNTER_REGISTERS));
        assert_eq!(
            rejection(&e, 1),
            &Rejection::TooManyExits {
                exits: MAX_COUNTER_REGISTERS + 1
            }
        );
        // With only the divergent exit, it is a region.
        let e = explained(&shrinking_with_exits(0));
        assert!(matches!(
            decision(&e, 1),
            Decision::Region {
                shrinking_to: Some(_),
                ..
            }
        ));
    }

    /// A loop (`$L1`, block 1) whose trip count is `bound`, with `ifs` one-sided uniform `if`s
    /// in it (on bits of the trip counter): each a block of its own count.
    fn loop_with_ifs(bound: &str, ifs: usize, label: &str) -> String {
        let ifs: String = (0..ifs)
            .map(|i| {
                format!("\tand.b32 %r6, %r2, {};\n\tsetp.eq.u32 %p2, %r6, 0;\n\t@%p2 bra ${label}S{i};\n\tadd.s32 %r3, %r3, 1;\n${label}S{i}:\n", 1 << i)
            })
            .collect();
        format!("\tmov.u32 %r2, 0;\n${label}:\n{ifs}\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, {bound};\n\t@%p1 bra ${label};\n")
    }

    #[test]
    fn a_shrinking_loop_with_more_distinct_counts_than_its_flush_takes_is_rejected() {
        let src = |ifs| {
            format!(
                "\tmov.u32 %r1, %tid.x;\n{}\tret;",
                loop_with_ifs("%r1", ifs, "L1")
            )
        };
        assert_eq!(
            rejection(&explained(&src(MAX_SHRINKING_COUNTS)), 1),
            &Rejection::TooManyShrinkingCounts {
                counts: MAX_SHRINKING_COUNTS + 1
            }
        );
        assert!(matches!(
            decision(&explained(&src(MAX_SHRINKING_COUNTS - 1)), 1),
            Decision::Region {
                shrinking_to: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn a_loop_needing_more_counters_than_a_function_has_is_rejected() {
        let src = format!(
            "\tld.param.u32 %r1, [k_n];\n{}\tret;",
            loop_with_ifs("%r1", MAX_COUNTER_REGISTERS, "L1")
        );
        assert_eq!(
            rejection(&explained(&src), 1),
            &Rejection::TooManyCounters {
                needed: MAX_COUNTER_REGISTERS + 1
            }
        );
    }

    #[test]
    fn a_loop_finding_the_counter_registers_taken_is_rejected() {
        // Two loops of 5 counters each: the second finds 3 left.
        let src = format!(
            "\tld.param.u32 %r1, [k_n];\n{}{}\tret;",
            loop_with_ifs("%r1", 4, "A"),
            loop_with_ifs("%r1", 4, "B")
        );
        let e = explained(&src);
        let regions: Vec<usize> = e
            .loops
            .iter()
            .filter(|l| matches!(l.decision, Decision::Region { .. }))
            .map(|l| l.header)
            .collect();
        assert_eq!(regions.len(), 1, "{:?}", e.loops);
        let rejected = e.loops.iter().find(|l| l.header != regions[0]).unwrap();
        assert_eq!(
            rejected.decision,
            Decision::Rejected(Rejection::CounterRegistersTaken { needed: 5, free: 3 })
        );
        assert_eq!(e.counter_registers, 5);
    }

    #[test]
    fn a_taken_exit_needs_a_block_after_the_body() {
        // The body ends in an instruction that can fall through.
        let src = "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.ge.u32 %p1, %r2, %r1;\n\t@%p1 bra $DONE;\n\tbra.uni $L1;\n$DONE:\n\t@%p1 ret;";
        assert_eq!(rejection(&explained(src), 1), &Rejection::NoBlockAfterBody);
    }

    #[test]
    fn before_sm_30_a_shrinking_loop_is_rejected_and_with_shuffles_it_needs_its_flush_out_of_line()
    {
        let e = explained_with(SHRINKING, Placement::Derived, None);
        assert_eq!(
            rejection(&e, 1),
            &Rejection::ShrinkingNeedsShuffles { meeting: 2 }
        );
        assert_eq!(e.blocks[1], BlockCounting::FullUpdate);
        let shuffles = Some(WarpReductions::Shuffles);
        assert!(matches!(
            decision(&explained_with(SHRINKING, Placement::Derived, shuffles), 1),
            Decision::Region {
                shrinking_to: Some(2),
                ..
            }
        ));
        let nested_end = SHRINKING.replace("\tret;", "\t{\n\tret;\n\t}");
        assert_eq!(
            rejection(
                &explained_with(&nested_end, Placement::Derived, shuffles),
                1
            ),
            &Rejection::ShuffleFlushNeedsOutOfLine {
                meeting: 2,
                appendable: false,
                meeting_at_top_level: true
            }
        );
    }

    #[test]
    fn a_uniform_loop_behind_a_divergent_if_in_a_region_is_nested_and_its_block_flushed() {
        let src = "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r4, %tid.x;\n\tmov.u32 %r2, 0;\n$L1:\n\tsetp.lt.u32 %p2, %r4, %r2;\n\t@%p2 bra $L4;\n$L2:\n\tmov.u32 %r3, 0;\n$L3:\n\tadd.s32 %r3, %r3, 1;\n\tsetp.lt.u32 %p3, %r3, %r1;\n\t@%p3 bra $L3;\n$L4:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n\tret;";
        let e = explained(src);
        let outer = &e.loops[0];
        assert_eq!(
            (outer.header, outer.depth, outer.enclosing_region),
            (1, 0, None)
        );
        assert!(matches!(
            &outer.decision,
            Decision::Region { nested: false, divergent_blocks, .. } if divergent_blocks == &[2, 3]
        ));
        let inner = &e.loops[1];
        assert_eq!(
            (inner.header, inner.depth, inner.enclosing_region),
            (3, 1, Some(1))
        );
        assert!(matches!(
            inner.decision,
            Decision::Region { nested: true, .. }
        ));
        assert_eq!(e.blocks[2], BlockCounting::FullUpdate);
        assert_eq!(e.blocks[3], BlockCounting::Flushed { region: 3 });
        // The latch runs as often as the header: the flush writes one count for both.
        assert_eq!(e.blocks[4], BlockCounting::Copied { from: 1 });
    }

    #[test]
    fn an_inner_loop_of_a_region_is_enclosed() {
        let src = format!(
            "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r5, 0;\n$O:\n{}\tadd.s32 %r5, %r5, 1;\n\tsetp.lt.u32 %p4, %r5, %r1;\n\t@%p4 bra $O;\n\tret;",
            loop_with_ifs("%r1", 0, "I")
        );
        let e = explained(&src);
        assert!(matches!(decision(&e, 1), Decision::Region { .. }));
        let inner = e.loops.iter().find(|l| l.header == 2).unwrap();
        assert_eq!(
            (&inner.decision, inner.enclosing_region),
            (&Decision::Enclosed, Some(1))
        );
    }

    #[test]
    fn update_costs_are_those_of_the_inserted_code() {
        let cost = |c: BlockCounting| {
            let UpdateCost {
                instructions,
                reductions,
            } = c.update_cost();
            (instructions, reductions)
        };
        assert_eq!(cost(BlockCounting::FullUpdate), (6, 2));
        assert_eq!(cost(BlockCounting::PackedUpdate), (5, 1));
        assert_eq!(cost(BlockCounting::WarpUpdate), (3, 1));
        assert_eq!(cost(BlockCounting::Flushed { region: 1 }), (0, 0));
    }

    #[test]
    fn a_rejection_names_its_blocks_as_asked() {
        let reason = Rejection::ShrinkingNeedsShuffles { meeting: 4 };
        assert!(reason.to_string().contains("block 4"));
        let named = reason.describe(&|b| format!("block {b} ($L__BB0_{b})"));
        assert!(named.contains("block 4 ($L__BB0_4)"), "{named}");
        assert_eq!(reason.rule(), "shrinking-needs-sm30");
    }
}
