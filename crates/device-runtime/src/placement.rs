//! Where the counter code goes: which blocks are counted where they start, which loops are
//! counted in registers and flushed once when the warp leaves them, and which blocks need no
//! counter on the device at all.
//!
//! A *region* is a natural loop whose branches are warp-uniform (the same for every active lane,
//! by the divergence analysis below), or divergent but reconverging inside the loop, and which
//! holds no `call`, `ret`, `exit`, `trap` or `brx.idx`. A warp that enters a region leaves it
//! with exactly the lanes it entered with, so every lane of that group executes every block
//! outside the divergent parts equally often, and so does the group as a whole: one block count
//! per lane gives the block's warp count (the same number) and its thread count (that number
//! times the group's size). Those per-lane counts obey flow conservation, so only the edges off
//! a spanning tree of the region (Knuth and Stevenson) carry a counter: an add to a register.
//! When the group leaves the region, it derives every block's count from those registers and the
//! exit it takes, and its last active lane adds them to the global counters (two reductions per
//! block); then the registers are reset.
//!
//! Blocks that run exactly as often as an earlier block (control equivalence) get no counter: the
//! runtime copies the earlier block's counts; so does a kernel's entry block, which the runtime
//! counts from the launch. Every other block keeps the direct update at its top
//! (`block_update`). ARCHITECTURE.md has the argument and its one assumption (a divergent warp
//! reconverges at the branch's immediate post-dominator).

use std::collections::{BTreeSet, HashMap};

use ptx_lexer::{
    DataType, Directive, Edge, EdgeKind, Function, FunctionKind, Guard, Instruction, Operand,
    RegDeclaration, StatementKind,
};

use crate::flow::{thread_flows, FlowInputs, ThreadFlow};
use crate::WarpReductions;

mod explain;
mod launch_paths;
pub(crate) use explain::block_counting;
pub use explain::{
    explain, BlockCounting, Decision, Explanation, LoopDecision, Rejection, UpdateCost,
};

/// At most this many counter registers (64-bit) in one function, so that the counting code does
/// not cost the kernel occupancy; loops beyond it are counted directly.
pub const MAX_COUNTER_REGISTERS: usize = 8;

/// How a program's kernels are counted (`CUDA_FLUX_COUNTERS` at build time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// Loops counted in registers and flushed at their exits, where no branch in them can split
    /// the warp past the branch's immediate post-dominator; blocks control-equivalent to an
    /// earlier block copied; a kernel's unreached entry block counted from the launch; every
    /// other block counted at its top.
    #[default]
    Derived,
    /// Only what needs no assumption about where a divergent warp reconverges: loops in which
    /// no branch can split the warp at all, and the entry block from the launch.
    UniformLoops,
    /// Every block counted at its top (the reference the derived counts are tested against).
    EveryBlock,
}

impl Placement {
    /// Every placement, in the order messages and help list them.
    pub const ALL: [Placement; 3] = [
        Placement::Derived,
        Placement::UniformLoops,
        Placement::EveryBlock,
    ];

    /// Its value of `CUDA_FLUX_COUNTERS` (and of `cuda-flux placement --counters`).
    pub fn name(self) -> &'static str {
        match self {
            Placement::Derived => "derived",
            Placement::UniformLoops => "uniform-loops",
            Placement::EveryBlock => "every-block",
        }
    }

    /// Parses the value of `CUDA_FLUX_COUNTERS`.
    pub fn parse(value: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == value)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|p| p.name()).collect();
                format!(
                    "'{value}' is not a counter placement ({})",
                    names.join(", ")
                )
            })
    }
}

/// The control-flow graph of a function body, over `Function::blocks`.
pub(crate) struct Cfg {
    pub blocks: Vec<ptx_lexer::BasicBlock>,
    pub edges: Vec<Edge>,
    /// Distinct successors of each block.
    pub succs: Vec<Vec<usize>>,
    pub preds: Vec<Vec<usize>>,
}

impl Cfg {
    pub fn of(function: &Function) -> Self {
        let blocks = function.blocks();
        let edges = function.edges(&blocks);
        let mut succs = vec![Vec::new(); blocks.len()];
        let mut preds = vec![Vec::new(); blocks.len()];
        for edge in &edges {
            if !succs[edge.from].contains(&edge.to) {
                succs[edge.from].push(edge.to);
                preds[edge.to].push(edge.from);
            }
        }
        Cfg {
            blocks,
            edges,
            succs,
            preds,
        }
    }

    /// Immediate dominators (entry: block 0); `None` for blocks not reachable from the entry.
    fn idoms(&self) -> Vec<Option<usize>> {
        ptx_lexer::immediate_dominators(&self.succs, 0)
    }

    /// Immediate post-dominators; `None` where a block's first post-dominator is the function's
    /// exit itself (or the block cannot reach an exit).
    fn ipdoms(&self) -> Vec<Option<usize>> {
        // The reverse graph with a virtual exit `n` that every block without successors leaves to.
        let n = self.blocks.len();
        let mut reverse: Vec<Vec<usize>> = self.preds.clone();
        reverse.push((0..n).filter(|&b| self.succs[b].is_empty()).collect());
        let idom = ptx_lexer::immediate_dominators(&reverse, n);
        idom[..n].iter().map(|d| d.filter(|&d| d != n)).collect()
    }

    /// Natural loops, one per header (back edges to the same header merged).
    fn loops(&self) -> Vec<NaturalLoop> {
        let idom = self.idoms();
        let dominates = |a: usize, mut b: usize| loop {
            if a == b {
                return true;
            }
            match idom[b] {
                Some(d) if d != b => b = d,
                _ => return false,
            }
        };
        let mut by_header: HashMap<usize, BTreeSet<usize>> = HashMap::new();
        for (from, succs) in self.succs.iter().enumerate() {
            if idom[from].is_none() {
                continue;
            }
            for &header in succs {
                if dominates(header, from) {
                    let body = by_header
                        .entry(header)
                        .or_insert_with(|| BTreeSet::from([header]));
                    let mut stack = vec![from];
                    while let Some(b) = stack.pop() {
                        if body.insert(b) {
                            stack.extend(self.preds[b].iter().copied());
                        }
                    }
                }
            }
        }
        let mut loops: Vec<NaturalLoop> = by_header
            .into_iter()
            .map(|(header, blocks)| NaturalLoop { header, blocks })
            .collect();
        loops.sort_by_key(|l| (std::cmp::Reverse(l.blocks.len()), l.header));
        loops
    }
}

#[derive(Debug, Clone)]
pub(crate) struct NaturalLoop {
    pub header: usize,
    pub blocks: BTreeSet<usize>,
}

/// Special registers whose value is the same for every lane of a warp.
fn is_uniform_special(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or(name);
    matches!(
        base,
        "%ctaid"
            | "%nctaid"
            | "%ntid"
            | "%gridid"
            | "%nsmid"
            | "%nwarpid"
            | "%clusterid"
            | "%nclusterid"
            | "%cluster_ctaid"
            | "%cluster_nctaid"
            | "%cluster_ctarank"
            | "%cluster_nctarank"
            | "%is_explicit_cluster"
            | "%total_smem_size"
            | "%dynamic_smem_size"
            | "%aggr_smem_size"
    ) || base.starts_with("%envreg")
}

/// Opcodes whose result is uniform when all their inputs are.
fn is_uniform_operation(instruction: &Instruction, kernel_params: &[&str]) -> bool {
    let opcode = &instruction.opcode;
    match opcode.base() {
        "add" | "sub" | "mul" | "mad" | "mul24" | "mad24" | "sad" | "div" | "rem" | "abs"
        | "neg" | "min" | "max" | "and" | "or" | "xor" | "not" | "cnot" | "shl" | "shr" | "shf"
        | "bfe" | "bfi" | "brev" | "bfind" | "clz" | "popc" | "prmt" | "lop3" | "mov" | "cvt"
        | "cvta" | "setp" | "set" | "selp" | "slct" | "fma" | "rcp" | "sqrt" | "rsqrt" | "sin"
        | "cos" | "lg2" | "ex2" | "tanh" | "copysign" | "testp" | "dp4a" | "dp2a" | "mul.hi" => {
            true
        }
        // Read-only memory at a uniform address holds one value for every lane.
        "ld" | "ldu" => {
            if opcode.has_modifier("param") {
                // Only a kernel's own parameters are the same for every thread.
                address_base(instruction).is_some_and(|b| kernel_params.contains(&b))
            } else {
                opcode.has_modifier("const") || opcode.base() == "ldu" || opcode.has_modifier("nc")
            }
        }
        _ => false,
    }
}

fn address_base(instruction: &Instruction) -> Option<&str> {
    instruction.operands.iter().find_map(|o| match o {
        Operand::Address(items) => items.first().and_then(|i| match i {
            Operand::Symbol(s) => Some(s.as_str()),
            Operand::Offset { base, .. } => match base.as_ref() {
                Operand::Symbol(s) => Some(s.as_str()),
                _ => None,
            },
            _ => None,
        }),
        _ => None,
    })
}

/// The registers an instruction writes and those it reads (its guard included). A register
/// declared without `%` appears as a symbol; `is_register` tells those apart.
fn defs_and_uses(
    instruction: &Instruction,
    is_register: &dyn Fn(&str) -> bool,
) -> (Vec<String>, Vec<String>) {
    fn registers(operand: &Operand, is_register: &dyn Fn(&str) -> bool, out: &mut Vec<String>) {
        match operand {
            Operand::Register(r) | Operand::NegatedRegister(r) => out.push(r.to_string()),
            Operand::Symbol(s) if is_register(s) => out.push(s.to_string()),
            Operand::Offset { base, .. } => registers(base, is_register, out),
            Operand::Vector(items) | Operand::Address(items) | Operand::List(items) => {
                items.iter().for_each(|i| registers(i, is_register, out))
            }
            Operand::RegisterPair(a, b) => {
                out.push(a.to_string());
                out.push(b.to_string());
            }
            _ => {}
        }
    }
    let base = instruction.opcode.base();
    let writes_first = match instruction.operands.first() {
        None | Some(Operand::Address(_)) => false,
        Some(_) => {
            // Barriers write a result only in their `.red` form.
            let reads_only = matches!(
                base,
                "bra"
                    | "brx"
                    | "ret"
                    | "exit"
                    | "trap"
                    | "membar"
                    | "fence"
                    | "nanosleep"
                    | "pmevent"
            ) || (matches!(base, "bar" | "barrier")
                && !instruction.opcode.has_modifier("red"));
            !reads_only
        }
    };
    let mut defs = Vec::new();
    let mut uses = Vec::new();
    for (i, operand) in instruction.operands.iter().enumerate() {
        if i == 0 && writes_first {
            registers(operand, is_register, &mut defs);
        } else {
            registers(operand, is_register, &mut uses);
        }
    }
    if let Some(guard) = &instruction.guard {
        uses.push(guard.predicate.to_string());
    }
    (defs, uses)
}

/// Which conditional branches of a function may split a warp (their predicate may differ
/// between the active lanes).
///
/// A register value is divergent when an instruction that writes it reads a divergent value or
/// is itself a source of lane-dependent values (thread and lane ids, loads from writable
/// memory, atomics, shuffles, votes, calls, ...), when its guard is divergent; at a use, when
/// several writes reach it and the use lies where the paths out of a divergent branch meet
/// again (reachable from two of its successors); and outside a loop that holds a divergent
/// branch, for values written inside it (lanes leave such a loop in different iterations).
pub(crate) struct Divergence {
    /// Per block: its terminator is a branch that may split the warp.
    pub divergent_branch: Vec<bool>,
}

impl Divergence {
    pub fn of(
        function: &Function,
        cfg: &Cfg,
        loops: &[NaturalLoop],
        ipdoms: &[Option<usize>],
    ) -> Self {
        let statements = function.statements();
        let n = cfg.blocks.len();
        let kernel_params: Vec<&str> = if function.kind() == FunctionKind::Entry {
            function.params().iter().map(|p| p.name.as_str()).collect()
        } else {
            Vec::new()
        };
        let is_register = |name: &str| function.declares_register(name);

        // Registers, write sites (one per register an instruction writes) and, per
        // instruction, the registers it reads.
        let mut register_ids: HashMap<String, usize> = HashMap::new();
        fn id(name: String, ids: &mut HashMap<String, usize>) -> usize {
            let next = ids.len();
            *ids.entry(name).or_insert(next)
        }
        struct Site {
            block: usize,
            register: usize,
            guarded: bool,
        }
        struct Ins {
            block: usize,
            uniform_operation: bool,
            defs: Vec<usize>, // site ids
            uses: Vec<usize>, // register ids
            guard_register: Option<usize>,
            is_conditional_branch: bool,
        }
        let mut sites: Vec<Site> = Vec::new();
        let mut instructions: Vec<Ins> = Vec::new();
        let mut block_instructions: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (b, block) in cfg.blocks.iter().enumerate() {
            for &s in &block.instructions {
                let Some(instruction) = statements[s].as_instruction() else {
                    continue;
                };
                let (defs, uses) = defs_and_uses(instruction, &is_register);
                let index = instructions.len();
                let def_sites = defs
                    .into_iter()
                    .map(|r| {
                        let register = id(r, &mut register_ids);
                        sites.push(Site {
                            block: b,
                            register,
                            guarded: instruction.guard.is_some(),
                        });
                        sites.len() - 1
                    })
                    .collect();
                let guard_register = instruction
                    .guard
                    .as_ref()
                    .map(|g| id(g.predicate.to_string(), &mut register_ids));
                let uses = uses.into_iter().map(|r| id(r, &mut register_ids)).collect();
                let base = instruction.opcode.base();
                instructions.push(Ins {
                    block: b,
                    uniform_operation: is_uniform_operation(instruction, &kernel_params),
                    defs: def_sites,
                    uses,
                    guard_register,
                    is_conditional_branch: (base == "bra"
                        && instruction.guard.is_some()
                        && !instruction.opcode.has_modifier("uni"))
                        || base == "brx",
                });
                block_instructions[b].push(index);
            }
        }
        // A virtual write of every register at the entry: divergent unless a uniform special
        // register (never written by the program) or a kernel's uniform value.
        let registers = register_ids.len();
        let mut names = vec![String::new(); registers];
        for (name, &i) in &register_ids {
            names[i] = name.clone();
        }
        let entry_site = |r: usize| sites.len() + r;
        let site_count = sites.len() + registers;
        let site_register = |s: usize| {
            if s < sites.len() {
                sites[s].register
            } else {
                s - sites.len()
            }
        };
        let site_block = |s: usize| (s < sites.len()).then(|| sites[s].block);

        // Reaching writes: bit sets over sites, per block (guarded writes do not kill).
        let words = site_count.div_ceil(64);
        let mut sites_of_register: Vec<Vec<usize>> = vec![Vec::new(); registers];
        for s in 0..site_count {
            sites_of_register[site_register(s)].push(s);
        }
        let mut gen = vec![vec![0u64; words]; n];
        let mut kill = vec![vec![0u64; words]; n];
        let set = |v: &mut Vec<u64>, i: usize| v[i / 64] |= 1 << (i % 64);
        let clear = |v: &mut Vec<u64>, i: usize| v[i / 64] &= !(1 << (i % 64));
        for b in 0..n {
            for &i in &block_instructions[b] {
                for &s in &instructions[i].defs {
                    if !sites[s].guarded {
                        for &other in &sites_of_register[sites[s].register] {
                            set(&mut kill[b], other);
                            clear(&mut gen[b], other);
                        }
                    }
                    set(&mut gen[b], s);
                }
            }
        }
        let mut entry_in = vec![0u64; words];
        for r in 0..registers {
            set(&mut entry_in, entry_site(r));
        }
        let mut out: Vec<Vec<u64>> = vec![vec![0u64; words]; n];
        let mut ins: Vec<Vec<u64>> = vec![vec![0u64; words]; n];
        let mut changed = true;
        while changed {
            changed = false;
            for b in 0..n {
                let mut input = if b == 0 {
                    entry_in.clone()
                } else {
                    vec![0u64; words]
                };
                for &p in &cfg.preds[b] {
                    for (w, o) in input.iter_mut().zip(&out[p]) {
                        *w |= o;
                    }
                }
                let output: Vec<u64> = input
                    .iter()
                    .zip(&gen[b])
                    .zip(&kill[b])
                    .map(|((i, g), k)| (i & !k) | g)
                    .collect();
                ins[b] = input;
                if output != out[b] {
                    out[b] = output;
                    changed = true;
                }
            }
        }
        // Per instruction, per register read: the writes that reach it.
        let mut reaching: Vec<Vec<Vec<usize>>> = Vec::with_capacity(instructions.len());
        for b in 0..n {
            let mut current: HashMap<usize, Vec<usize>> = HashMap::new();
            let in_set = &ins[b];
            let reaching_now = |r: usize, current: &HashMap<usize, Vec<usize>>| {
                current.get(&r).cloned().unwrap_or_else(|| {
                    sites_of_register[r]
                        .iter()
                        .copied()
                        .filter(|&s| in_set[s / 64] & (1 << (s % 64)) != 0)
                        .collect()
                })
            };
            for &i in &block_instructions[b] {
                let uses: Vec<Vec<usize>> = instructions[i]
                    .uses
                    .iter()
                    .map(|&r| reaching_now(r, &current))
                    .collect();
                reaching.push(uses);
                for &s in &instructions[i].defs {
                    let r = sites[s].register;
                    let mut now = if sites[s].guarded {
                        reaching_now(r, &current)
                    } else {
                        Vec::new()
                    };
                    now.push(s);
                    current.insert(r, now);
                }
            }
        }
        // `reaching` was filled in block order, which is instruction order.
        // Per block: registers that several writes reach at its top, and registers it writes
        // unconditionally; per use: whether the block wrote the register before.
        let several_writes_in: Vec<Vec<bool>> = (0..n)
            .map(|b| {
                (0..registers)
                    .map(|r| {
                        sites_of_register[r]
                            .iter()
                            .filter(|&&s| ins[b][s / 64] & (1 << (s % 64)) != 0)
                            .count()
                            >= 2
                    })
                    .collect()
            })
            .collect();
        let mut written_in = vec![vec![false; registers]; n];
        let mut written_anywhere_in = vec![vec![false; registers]; n];
        let mut written_before: Vec<Vec<bool>> = Vec::with_capacity(instructions.len());
        for instruction in &instructions {
            let block = instruction.block;
            written_before.push(
                instruction
                    .uses
                    .iter()
                    .map(|&r| written_in[block][r])
                    .collect(),
            );
            for &s in &instruction.defs {
                written_anywhere_in[block][sites[s].register] = true;
                if !sites[s].guarded {
                    written_in[block][sites[s].register] = true;
                }
            }
        }

        let mut divergent_site = vec![false; site_count];
        for r in 0..registers {
            divergent_site[entry_site(r)] = !is_uniform_special(&names[r]);
        }
        let mut divergent_branch = vec![false; n];
        loop {
            // Where paths out of divergent branches meet, and loops that lanes may leave apart.
            // Registers whose value may differ between lanes because paths out of a divergent
            // branch that wrote it differently meet: several writes reach a join of that
            // branch; the mark lasts until the register is written again.
            let taint_at_join = joins(cfg, ipdoms, &divergent_branch, &written_anywhere_in);
            let mut tainted_in = vec![vec![false; registers]; n];
            let mut tainted_out = vec![vec![false; registers]; n];
            let mut changed_taint = true;
            while changed_taint {
                changed_taint = false;
                for b in 0..n {
                    let mut taint: Vec<bool> = taint_at_join[b]
                        .iter()
                        .zip(&several_writes_in[b])
                        .map(|(t, w)| *t && *w)
                        .collect();
                    for &p in &cfg.preds[b] {
                        taint
                            .iter_mut()
                            .zip(&tainted_out[p])
                            .for_each(|(t, o)| *t |= o);
                    }
                    let out: Vec<bool> = taint
                        .iter()
                        .zip(&written_in[b])
                        .map(|(t, w)| *t && !w)
                        .collect();
                    tainted_in[b] = taint;
                    if out != tainted_out[b] {
                        tainted_out[b] = out;
                        changed_taint = true;
                    }
                }
            }
            let divergent_loops: Vec<&NaturalLoop> = loops
                .iter()
                .filter(|l| l.blocks.iter().any(|&b| divergent_branch[b]))
                .collect();
            let use_is_divergent = |i: usize, u: usize, divergent_site: &[bool]| {
                let writes = &reaching[i][u];
                let block = instructions[i].block;
                writes.iter().any(|&s| divergent_site[s])
                    || (tainted_in[block][instructions[i].uses[u]] && !written_before[i][u])
                    || writes.iter().any(|&s| {
                        site_block(s).is_some_and(|sb| {
                            divergent_loops
                                .iter()
                                .any(|l| l.blocks.contains(&sb) && !l.blocks.contains(&block))
                        })
                    })
            };
            let mut changed = false;
            for (i, instruction) in instructions.iter().enumerate() {
                let any_divergent_use =
                    (0..instruction.uses.len()).any(|u| use_is_divergent(i, u, &divergent_site));
                let divergent = !instruction.uniform_operation || any_divergent_use;
                for &s in &instruction.defs {
                    if divergent && !divergent_site[s] {
                        divergent_site[s] = true;
                        changed = true;
                    }
                }
                if instruction.is_conditional_branch && !divergent_branch[instruction.block] {
                    // A jump table, or a branch whose guard may differ between lanes.
                    let guard_use = instruction
                        .guard_register
                        .and_then(|g| instruction.uses.iter().rposition(|&r| r == g));
                    let divergent =
                        guard_use.is_none_or(|u| use_is_divergent(i, u, &divergent_site));
                    if divergent {
                        divergent_branch[instruction.block] = true;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        Divergence { divergent_branch }
    }
}

/// Per block, the registers that may differ between lanes where it begins because the paths
/// out of a divergent branch meet there for the first time (found by labelling each block with
/// the successor it is reached from; a block reached with two labels is such a join and labels
/// itself) and the branch's sides, up to its immediate post-dominator, write them.
fn joins(
    cfg: &Cfg,
    ipdoms: &[Option<usize>],
    divergent_branch: &[bool],
    written: &[Vec<bool>],
) -> Vec<Vec<bool>> {
    let n = cfg.blocks.len();
    let registers = written.first().map_or(0, Vec::len);
    let mut taint = vec![vec![false; registers]; n];
    for d in (0..n).filter(|&b| divergent_branch[b]) {
        let succs = &cfg.succs[d];
        if succs.len() < 2 {
            continue;
        }
        // What the sides write before they meet for good.
        let mut sides_write = vec![false; registers];
        let mut seen = vec![false; n];
        let mut stack: Vec<usize> = succs.clone();
        while let Some(x) = stack.pop() {
            if Some(x) == ipdoms[d] || std::mem::replace(&mut seen[x], true) {
                continue;
            }
            sides_write
                .iter_mut()
                .zip(&written[x])
                .for_each(|(s, w)| *s |= w);
            stack.extend(cfg.succs[x].iter().copied());
        }
        let mut label: Vec<Option<usize>> = vec![None; n];
        let mut joins_of_d = vec![false; n];
        let mut changed = true;
        let mut rounds = 0;
        while changed && rounds <= n + 1 {
            changed = false;
            rounds += 1;
            for x in 0..n {
                let mut incoming: Vec<usize> = Vec::new();
                if succs.contains(&x) {
                    incoming.push(x);
                }
                for &p in &cfg.preds[x] {
                    if p == d {
                        continue;
                    }
                    if let Some(l) = label[p] {
                        if !incoming.contains(&l) {
                            incoming.push(l);
                        }
                    }
                }
                let new = match incoming.len() {
                    0 => None,
                    1 if !joins_of_d[x] => Some(incoming[0]),
                    1 => Some(x),
                    _ => {
                        joins_of_d[x] = true;
                        Some(x)
                    }
                };
                if new != label[x] {
                    label[x] = new;
                    changed = true;
                }
            }
        }
        for x in (0..n).filter(|&x| joins_of_d[x]) {
            taint[x]
                .iter_mut()
                .zip(&sides_write)
                .for_each(|(t, w)| *t |= w);
        }
    }
    taint
}

/// Whether block `b` starts in the body's own scope (its label, if any, and its first
/// statement), where a label for code to return to can go.
pub(crate) fn at_top_level(cfg: &Cfg, depths: &[usize], b: usize) -> bool {
    let at = cfg.blocks[b].insertion_point();
    depths.get(at) == Some(&0)
        && cfg.blocks[b]
            .label_statement
            .is_none_or(|s| depths.get(s) == Some(&0))
}

/// Scope depth (nested `{ }`) of every statement.
pub(crate) fn scope_depths(function: &Function) -> Vec<usize> {
    let mut depth = 0usize;
    function
        .statements()
        .iter()
        .map(|s| match s.kind() {
            StatementKind::ScopeOpen => {
                depth += 1;
                depth - 1
            }
            StatementKind::ScopeClose => {
                depth = depth.saturating_sub(1);
                depth
            }
            _ => depth,
        })
        .collect()
}

/// One edge of a region's counting graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RegionEdge {
    pub from: usize,
    /// `None`: leaves the region (to block `exit_to`).
    pub to: Option<usize>,
    pub exit_to: Option<usize>,
    /// How code runs on this edge.
    pub site: EdgeSite,
}

/// Where code that must run exactly when control moves along an edge goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EdgeSite {
    /// The source has this one successor: at its end (before its `bra`, if any).
    EndOfSource,
    /// The taken side of a conditional `bra`: a guarded instruction before it, or a new block.
    Taken,
    /// The fall-through side of a conditional `bra`: right after it.
    FallThrough,
}

/// A block count as a linear form over a region's counter registers plus a constant that
/// depends on the exit taken.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Form {
    /// Coefficient per counter register of the region.
    pub counters: Vec<i64>,
    /// Coefficient per exit edge of the region (1 for the exit taken, 0 for the others).
    pub exits: Vec<i64>,
}

/// A loop counted in registers.
#[derive(Debug, Clone)]
pub(crate) struct Region {
    /// The loop's header.
    pub header: usize,
    pub blocks: BTreeSet<usize>,
    /// Blocks of the loop between a divergent branch and its immediate post-dominator: counted
    /// at their tops, not by the flush.
    pub direct: BTreeSet<usize>,
    /// Lanes may leave in different iterations (a divergent exit): every exit goes to this
    /// block, where the lanes meet again; each exit edge then carries a counter too, and the
    /// flush at the top of this block sums (threads) and takes the maximum (warps) of the
    /// lanes' counts.
    pub shrinking_to: Option<usize>,
    /// Edges that carry a counter register: index = register number within the region. Only
    /// edges some flushed count needs (a counter that only direct blocks' counts would use is
    /// never placed).
    pub counted: Vec<RegionEdge>,
    /// Edges out of the region, where the counts are flushed.
    pub exits: Vec<RegionEdge>,
    /// In a shrinking region, the exits (indices into `exits`) that carry a counter register
    /// too, after the `counted` ones: those a flushed count needs.
    pub counted_exits: Vec<usize>,
    /// A shrinking region with one exit, whose meeting block is entered only by it: every lane
    /// at the flush took that exit once since its counters were last zero, so the exit's term
    /// is a constant and its edge carries no counter.
    pub exit_taken_by_all: bool,
    /// Per block of the region (in `blocks` order): its count.
    pub counts: Vec<(usize, Form)>,
    /// A thread may run the loop again after leaving it (a path leads from the flush back to
    /// its header), or run a shrinking region's flush again without it (the meeting block is on
    /// a cycle), so the flush resets the counters; otherwise the prologue's zeroing is all they
    /// need.
    pub reentered: bool,
    /// Per counted edge (in `counted` order): the program's induction variable its count is
    /// read from, instead of an `add` on the edge, if it has one.
    pub inductions: Vec<Option<Induction>>,
    /// The edges into the header from outside, where each induction counter takes its
    /// snapshot of its variable; empty when the region has no induction counters.
    pub entries: Vec<RegionEdge>,
}

/// A counted edge whose count follows from a register of the program that one block B of the
/// loop steps by a constant each time it runs, and nothing else in the loop writes (a pointer,
/// index or trip counter the compiler advances each trip). B's count is `k × counter + x_j` on
/// exit `j` (k = ±1; its form has no other counter), so `counter = k × (runs(B) - x_j)`, and
/// `runs(B)` follows from the register's value on leaving and a snapshot taken on entering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Induction {
    /// The program's register.
    pub register: String,
    pub recovery: Recovery,
}

/// How an induction counter is taken on entry and recovered on exit `j`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// A 64-bit register stepped by σ: the snapshot is `v0 + x × σ` (x the first exit's term),
    /// and on exit `j` the counter is `(v - snapshot) / step + exit_corrections[j]`, with
    /// `step = k × σ` and corrections `k × (x - x_j)`. `v - snapshot` is
    /// `counter × step` modulo 2^64, so the division is exact while a lane runs B fewer than
    /// 2^(64 - s) times in one execution of the loop, s being the step's trailing zero bits,
    /// at most [`MAX_INDUCTION_SHIFT`].
    Wide {
        step: i64,
        snapshot_offset: i64,
        exit_corrections: Vec<i64>,
    },
    /// A 32-bit register stepped by σ in B, whose comparison with a value the loop does not
    /// change, tested after the step, sends the lane out of the loop by exit `test_exit`, such
    /// that a lane runs B at most 2^(32 - s) times (s the trailing zero bits of σ), and that
    /// often only when it leaves by `test_exit` ([`test_exit`]). `v - v0` is `runs(B) × σ`
    /// modulo 2^32; times the inverse of σ's odd part and shifted right by s, it is
    /// `d = runs(B)` modulo 2^(32 - s): `runs(B)` is `d` on other exits and
    /// `((d - 1) mod 2^(32 - s)) + 1` on `test_exit`. The snapshot is `v0`, zero-extended; or,
    /// where `test_exit` is the only exit, `v0 + σ` ([`Recovery::snapshot_takes_a_step`]), and
    /// then `d + 1` is `runs(B)`.
    Narrow {
        step: i64,
        sign: i64,
        exit_terms: Vec<i64>,
        test_exit: usize,
    },
}

impl Recovery {
    /// Instructions its recovery takes on exit `j` (for choosing among variables).
    fn cost(&self) -> usize {
        match self {
            Recovery::Wide { step, .. } => {
                let magnitude = step.unsigned_abs();
                let shift = magnitude.trailing_zeros();
                1 + usize::from(magnitude >> shift != 1) + usize::from(shift != 0)
            }
            Recovery::Narrow { step, .. } => {
                let magnitude = step.unsigned_abs();
                let shift = magnitude.trailing_zeros();
                let masked = !self.snapshot_takes_a_step() && shift != 0;
                3 + usize::from(magnitude >> shift != 1)
                    + usize::from(shift != 0)
                    + if self.snapshot_takes_a_step() { 1 } else { 2 }
                    + usize::from(masked)
            }
        }
    }

    /// Whether the snapshot is taken one step ahead, `v0 + σ`: for a narrow variable whose test
    /// is its loop's only exit, where a lane runs B at least once, so that `runs(B) - 1`, below
    /// 2^(32 - s), comes out of the recovery exactly with no correction modulo 2^(32 - s).
    pub fn snapshot_takes_a_step(&self) -> bool {
        matches!(self, Recovery::Narrow { exit_terms, .. } if exit_terms.len() == 1)
    }
}

/// Steps with more trailing zero bits than this are not used: a lane would have to run the
/// stepping block 2^(64 - 8) = 2^56 times in one execution of the loop (over two years at one
/// run per nanosecond) before the count, taken modulo 2^(64 - s), could wrap.
pub(crate) const MAX_INDUCTION_SHIFT: u32 = 8;

impl Region {
    /// Registers its counts take: one per counted edge, and one per exit edge where lanes may
    /// leave in different iterations.
    pub fn counter_registers(&self) -> usize {
        self.counted.len() + self.counted_exits.len()
    }
}

/// At most this many distinct block counts in a loop that lanes leave at different times: each
/// costs the flush the count's sum and maximum over the lanes, every time a group leaves the
/// loop, so that a loop of many counts and few trips costs more flushed than counted at its
/// blocks. Measured on the suites (2026-11-29, `benchmarks/results/...-shrinking-counts.md`,
/// `...-6-experiment.md`): 2 left out Rodinia huffman's loops of 3 counts; 3 takes them
/// (`pack2` 1.24x to 1.10x, `vlc_encode` 1.36x to 1.28x but 8 registers more, losing
/// occupancy, `prescan` 1.33x to 1.26x; Parboil sad's `mb_sad_calc` 1.10x to 1.13x); 4 and 5
/// take nothing more there, and 5 makes `corpus/loops.cu`'s `run_length` unrolled four times
/// (5 counts, about 4 trips per lane) 2.82x instead of 2.08x; 6 would take Parboil
/// mri-gridding's `splitRearrange` (1.73x to 1.49x), but Polybench COVAR's and CORR's loops as
/// well (1.013x to 1.03x, 8 registers more each), and three more kernels would lose occupancy.
const MAX_SHRINKING_COUNTS: usize = 3;

fn counted_exits_too_many(exits: &[RegionEdge]) -> bool {
    exits.len() > MAX_COUNTER_REGISTERS
}

/// The counter placement of one function.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    pub regions: Vec<Region>,
    /// A kernel's block 0 (nothing branches to it) is counted by the runtime from the launch
    /// configuration.
    pub entry_from_launch: bool,
    /// Blocks of the kernel's launch tree (placement `derived`): the runtime counts them from the
    /// launch configuration and parameters, by the conditions on their paths
    /// ([`crate::from_launch`]).
    pub launch_counted: Vec<crate::from_launch::LaunchCounted>,
    /// (block, from): blocks whose counts equal those of an earlier block (control
    /// equivalence), copied by the runtime instead of counted.
    pub copies: Vec<(usize, usize)>,
    /// Sides of warp-uniform branches whose thread and warp counts the runtime derives from
    /// the branch's and the other side's (no counter code at all).
    pub differences: Vec<Difference>,
    /// Blocks whose thread counts the runtime derives by flow conservation ([`crate::flow`]):
    /// the device counts only their warps.
    pub thread_flows: Vec<ThreadFlow>,
    /// Whether blocks of counter code can be added to the body ([`append_point`]).
    pub appendable: bool,
}

/// Where blocks of counter code can go: right after the body's last instruction, when that is
/// an unconditional transfer in the body's own scope, so that nothing falls into them. Only
/// labels and directives may follow it (clang `-g` ends bodies with labels its debug
/// information names, `$L__tmp…` and `$L__func_end…`): the blocks go before them, so those
/// labels still mark the end of the body, and a branch to one still reaches nothing else.
pub(crate) fn append_point(function: &Function, depths: &[usize]) -> Option<usize> {
    let statements = function.statements();
    let last = statements
        .iter()
        .rposition(|s| s.as_instruction().is_some())?;
    let transfers = statements[last]
        .as_instruction()
        .is_some_and(|ins| !ins.can_fall_through());
    (transfers && depths[last] == 0).then_some(last + 1)
}

/// One side of a warp-uniform two-way branch: every thread that runs `branch` (a block that
/// cannot end a thread) then runs `block` or `sibling`, each entered only from it, so
/// `threads(block) = threads(branch) - threads(sibling)` (a flow, [`crate::flow`]); and since
/// the branch is warp-uniform, every group that runs `branch` runs one of the two whole, so the
/// same holds for warps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Difference {
    pub block: usize,
    pub branch: usize,
    pub sibling: usize,
}

impl Plan {
    pub fn counter_registers(&self) -> usize {
        self.regions.iter().map(Region::counter_registers).sum()
    }

    /// Whether block `b` is counted by a region's flush (and not at its top).
    pub fn derived(&self, b: usize) -> bool {
        self.regions
            .iter()
            .any(|r| r.blocks.contains(&b) && !r.direct.contains(&b))
    }

    /// Whether the runtime counts block `b` from the launch (the entry, or a block of the
    /// launch tree).
    pub fn counted_from_launch(&self, b: usize) -> bool {
        (b == 0 && self.entry_from_launch) || self.launch_counted.iter().any(|l| l.block == b)
    }

    /// Whether block `b`'s counts are copied from another block's by the runtime.
    pub fn copied(&self, b: usize) -> bool {
        self.copies.iter().any(|&(block, _)| block == b)
    }

    /// Whether the runtime derives block `b`'s warp count (and its thread count) from a
    /// uniform branch's.
    pub fn warps_derived(&self, b: usize) -> bool {
        self.differences.iter().any(|d| d.block == b)
    }

    /// Whether the runtime derives block `b`'s thread count by flow conservation.
    pub fn threads_derived(&self, b: usize) -> bool {
        self.thread_flows.iter().any(|f| f.block == b)
    }

    fn in_region(&self, b: usize) -> bool {
        self.regions.iter().any(|r| r.blocks.contains(&b))
    }
}

/// Plans the counters of `function` (a kernel or a device function).
pub(crate) fn plan(
    function: &Function,
    placement: Placement,
    reductions: Option<WarpReductions>,
) -> Plan {
    decide(function, placement, reductions, LaunchLoops::Counted).plan
}

/// Whether loops of one block whose trips follow from the launch are counted from it
/// (`Counted`, what a build does) or like other loops (`OnDevice`: the unit tests of regions,
/// whose small loops are often such loops, use it to test the regions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LaunchLoops {
    Counted,
    #[cfg_attr(not(test), allow(dead_code))]
    OnDevice,
}

/// What [`decide`] tried for one natural loop.
#[derive(Debug, Clone)]
enum Attempt {
    /// Never a candidate: it overlaps a region chosen before it and does not lie wholly in its
    /// divergent parts.
    NotTried,
    /// Chosen as `plan.regions[region]`; `nested`: in the second pass, inside an enclosing
    /// region's divergent parts.
    Chosen {
        nested: bool,
        region: usize,
    },
    Rejected(Rejection),
    /// A loop of one block whose trips the runtime counts from the launch
    /// (`launch_paths::loop_trips`): no counter code, no region.
    FromLaunch,
}

/// A function's plan with the reasons behind it.
struct Decided {
    plan: Plan,
    /// The natural loops (largest first) and, per loop, the outcome of its last attempt; empty
    /// when `unanalysed`.
    loops: Vec<NaturalLoop>,
    attempts: Vec<Attempt>,
    /// Why no loop was analysed at all (placement `every-block`, or too many blocks).
    unanalysed: Option<Rejection>,
}

/// [`plan`], keeping what was decided for each loop and why ([`explain`] reports it).
fn decide(
    function: &Function,
    placement: Placement,
    reductions: Option<WarpReductions>,
    launch_loops: LaunchLoops,
) -> Decided {
    let unanalysed = |plan: Plan, reason: Rejection| Decided {
        plan,
        loops: Vec::new(),
        attempts: Vec::new(),
        unanalysed: Some(reason),
    };
    if placement == Placement::EveryBlock {
        return unanalysed(Plan::default(), Rejection::EveryBlockPlacement);
    }
    let cfg = Cfg::of(function);
    // A kernel's first block that nothing branches or falls into runs exactly once per thread,
    // first: the runtime counts it from the launch.
    let entry_from_launch = function.kind() == FunctionKind::Entry
        && cfg.preds.first().is_some_and(|preds| preds.is_empty());
    if cfg.blocks.is_empty() || cfg.blocks.len() > MAX_BLOCKS_FOR_ANALYSIS {
        let plan = Plan {
            entry_from_launch,
            ..Plan::default()
        };
        return unanalysed(
            plan,
            Rejection::TooManyBlocks {
                blocks: cfg.blocks.len(),
            },
        );
    }
    let loops = cfg.loops();
    let ipdoms = cfg.ipdoms();
    let divergence = Divergence::of(function, &cfg, &loops, &ipdoms);
    let depths = scope_depths(function);
    let mut plan = Plan {
        entry_from_launch,
        appendable: append_point(function, &depths).is_some(),
        ..Plan::default()
    };
    let mut attempts = vec![Attempt::NotTried; loops.len()];
    // The launch tree, walked first (it does not depend on what else is chosen): its loops of
    // one block are counted from the launch, so no region claims them; its other blocks are,
    // unless counted some other way (copies).
    let mut tree = if placement == Placement::Derived && entry_from_launch {
        launch_paths::launch_counted(function, &cfg, &ipdoms, &depths)
    } else {
        Vec::new()
    };
    if launch_loops == LaunchLoops::OnDevice {
        tree.retain(|l| l.trips.is_none());
    }
    for (l, attempt) in loops.iter().zip(&mut attempts) {
        let from_launch = tree
            .iter()
            .any(|t| t.block == l.header && t.trips.is_some());
        if l.blocks.len() == 1 && from_launch {
            *attempt = Attempt::FromLaunch;
        }
    }
    let mut registers = 0;
    // Divergent branches in loops (the lanes meet again inside, or at one block after the loop:
    // a shrinking region, whose flush sums the lanes' counts and takes their maximum with
    // `redux.sync` or shuffles, `WarpReductions`) rely on assumption R.
    let enclosed_divergence = placement == Placement::Derived;
    // Outermost loops first (`loops` is sorted by size). Then, in a second pass, loops that lie
    // wholly in the divergent parts of chosen regions (e.g. an inner loop that only some lanes
    // enter, or a grid-stride loop inside a round loop): nested regions, whose flushes count
    // their blocks instead of updates at the blocks' tops. A region's flush writes only the
    // blocks it does not count directly, so an outer and a nested region never write the same
    // block, and their counter registers are disjoint.
    for nested in [false, true] {
        for (i, l) in loops.iter().enumerate() {
            let candidate = if nested {
                l.blocks
                    .iter()
                    .all(|&b| plan.in_region(b) && !plan.derived(b))
            } else {
                !l.blocks.iter().any(|&b| plan.in_region(b))
            };
            if !candidate || matches!(attempts[i], Attempt::FromLaunch) {
                continue;
            }
            let region = region_of(
                function,
                &cfg,
                &divergence,
                &ipdoms,
                enclosed_divergence,
                &depths,
                l,
                &loops,
            )
            .and_then(|region| admit(region, &plan, registers, reductions, &cfg, &depths));
            attempts[i] = match region {
                Ok(region) => {
                    registers += region.counter_registers();
                    plan.regions.push(region);
                    Attempt::Chosen {
                        nested,
                        region: plan.regions.len() - 1,
                    }
                }
                Err(reason) => Attempt::Rejected(reason),
            };
        }
    }
    if placement == Placement::Derived {
        plan.copies = same_counts(function, &cfg, &loops, &ipdoms, &plan);
    }
    plan.copies = with_flush_copies(plan.copies, &plan.regions);
    tree.retain(|l| !plan.copied(l.block) && !plan.derived(l.block));
    plan.launch_counted = tree;
    if placement == Placement::Derived {
        let leaky = leaky_blocks(function, &cfg);
        plan.differences = differences(function, &cfg, &divergence, &leaky, &plan);
        plan.thread_flows = thread_flows_of(&cfg, &loops, &leaky, &mut plan);
    }
    Decided {
        plan,
        loops,
        attempts,
        unanalysed: None,
    }
}

/// The rules a loop that [`region_of`] accepts must also pass in this function on this target:
/// a block after the body for a flush on a taken exit, the warp reductions (and, with shuffles,
/// the out-of-line flush) a loop that lanes leave at different times needs, and room among the
/// counter registers the regions chosen before it (`registers`) left.
fn admit(
    region: Region,
    plan: &Plan,
    registers: usize,
    reductions: Option<WarpReductions>,
    cfg: &Cfg,
    depths: &[usize],
) -> Result<Region, Rejection> {
    let needs_new_blocks = region.exits.iter().any(|e| e.site == EdgeSite::Taken);
    if needs_new_blocks && !plan.appendable {
        return Err(Rejection::NoBlockAfterBody);
    }
    // A loop that lanes leave at different times needs the lanes' sums and maxima
    // (`WarpReductions`), from sm_30; with shuffles its full flush loops, so it goes out of
    // line, returning to a label at the meeting block, in the body's own scope.
    if let Some(meeting) = region.shrinking_to {
        match reductions {
            Some(WarpReductions::Redux) => {}
            Some(WarpReductions::Shuffles | WarpReductions::ShufflesWithoutMatch) => {
                let meeting_at_top_level = at_top_level(cfg, depths, meeting);
                if !(plan.appendable && meeting_at_top_level) {
                    return Err(Rejection::ShuffleFlushNeedsOutOfLine {
                        meeting,
                        appendable: plan.appendable,
                        meeting_at_top_level,
                    });
                }
            }
            None => return Err(Rejection::ShrinkingNeedsShuffles { meeting }),
        }
    }
    let needed = region.counter_registers();
    if registers + needed > MAX_COUNTER_REGISTERS {
        return Err(Rejection::CounterRegistersTaken {
            needed,
            free: MAX_COUNTER_REGISTERS.saturating_sub(registers),
        });
    }
    Ok(region)
}

/// `copies` and, per region, each block the region derives with the same count form as an
/// earlier one of its blocks: a copy of that block, so that the flush writes each distinct
/// count once (equal forms evaluate to equal counts, threads and warps, on every flush; no
/// assumption about the warps is involved). A copy whose source became such a copy is
/// redirected to that copy's source, which the flush writes.
fn with_flush_copies(mut copies: Vec<(usize, usize)>, regions: &[Region]) -> Vec<(usize, usize)> {
    let mut flush_copies: Vec<(usize, usize)> = Vec::new();
    for region in regions {
        let mut firsts: Vec<(&Form, usize)> = Vec::new();
        for (b, form) in region
            .counts
            .iter()
            .filter(|(b, _)| !region.direct.contains(b))
        {
            match firsts.iter().find(|(f, _)| *f == form) {
                Some(&(_, first)) => flush_copies.push((*b, first)),
                None => firsts.push((form, *b)),
            }
        }
    }
    for copy in &mut copies {
        if let Some(&(_, first)) = flush_copies.iter().find(|c| c.0 == copy.1) {
            copy.1 = first;
        }
    }
    copies.extend(flush_copies);
    copies
}

/// Blocks that can end a thread or call a function (which could): the threads that enter them
/// need not leave along an out-edge. A block ending in `brx.idx` is counted among them too, so
/// that no flow depends on its table of targets.
fn leaky_blocks(function: &Function, cfg: &Cfg) -> Vec<bool> {
    let statements = function.statements();
    cfg.blocks
        .iter()
        .map(|block| {
            block.instructions.iter().any(|&s| {
                statements[s].as_instruction().is_none_or(|i| {
                    matches!(
                        i.opcode.base(),
                        "call" | "ret" | "exit" | "trap" | "brkpt" | "brx"
                    )
                })
            })
        })
        .collect()
}

/// The thread counts that follow by flow conservation from the others ([`crate::flow`]): of the
/// blocks the device would count in full, those deepest in loops go first. If the uniform
/// branches' sides do not all follow, they are counted on the device after all.
fn thread_flows_of(
    cfg: &Cfg,
    loops: &[NaturalLoop],
    leaky: &[bool],
    plan: &mut Plan,
) -> Vec<ThreadFlow> {
    let n = cfg.blocks.len();
    let from_launch = |b: usize| plan.counted_from_launch(b);
    let known: Vec<usize> = (0..n)
        .filter(|&b| from_launch(b) || plan.derived(b))
        .collect();
    let depth = |b: usize| loops.iter().filter(|l| l.blocks.contains(&b)).count();
    let mut candidates: Vec<usize> = (0..n)
        .filter(|&b| {
            !from_launch(b) && !plan.derived(b) && !plan.copied(b) && !plan.warps_derived(b)
        })
        .collect();
    candidates.sort_by_key(|&b| (std::cmp::Reverse(depth(b)), b));
    let never_measured: Vec<usize> = plan.differences.iter().map(|d| d.block).collect();
    let inputs = FlowInputs {
        cfg,
        leaky,
        copies: &plan.copies,
        known: &known,
        never_measured: &never_measured,
    };
    let (_, flows) = thread_flows(&inputs, &candidates);
    let follows = |b: usize| flows.iter().any(|f| f.block == b);
    if !never_measured.iter().all(|&b| follows(b)) {
        plan.differences.clear();
        return thread_flows_of(cfg, loops, leaky, plan);
    }
    flows
}

/// The sides of warp-uniform two-way branches whose counts follow from the branch's and the
/// other side's ([`Difference`]). The runtime fills warp counts in this order: the entry from
/// the launch, the copies, the differences (in list order), the copies again; so a
/// difference's inputs are counted on the device, from the launch, or copied from such a
/// block, never derived by a difference (nor copied from one).
fn differences(
    function: &Function,
    cfg: &Cfg,
    divergence: &Divergence,
    leaky: &[bool],
    plan: &Plan,
) -> Vec<Difference> {
    let mut differences: Vec<Difference> = Vec::new();
    let source = |b: usize| {
        plan.copies
            .iter()
            .find(|c| c.0 == b)
            .map_or(b, |&(_, from)| from)
    };
    let known = |b: usize, differences: &[Difference]| {
        let b = source(b);
        !differences.iter().any(|d| d.block == b)
    };
    let free = |b: usize| plan.derived(b) || plan.copied(b) || plan.counted_from_launch(b);
    // A branch block that cannot end a thread: all that enter it take one side.
    for branch in (0..cfg.blocks.len()).filter(|&b| !leaky[b]) {
        let [first, second] = cfg.succs[branch][..] else {
            continue;
        };
        if conditional_branch(function, cfg, branch).is_none()
            || divergence.divergent_branch[branch]
            || !known(branch, &differences)
        {
            continue;
        }
        // The side that would need a counter of its own, the other one known.
        for (block, sibling) in [(second, first), (first, second)] {
            let only_from_branch = |b: usize| cfg.preds[b][..] == [branch];
            if block == 0
                || free(block)
                || !only_from_branch(block)
                || !only_from_branch(sibling)
                || !known(sibling, &differences)
                || differences.iter().any(|d| {
                    d.branch == branch || source(d.branch) == block || source(d.sibling) == block
                })
            {
                continue;
            }
            differences.push(Difference {
                block,
                branch,
                sibling,
            });
        }
    }
    differences
}

/// The guarded `bra` that ends block `b`, if it ends in one.
fn conditional_branch<'f>(function: &'f Function, cfg: &Cfg, b: usize) -> Option<&'f Instruction> {
    cfg.blocks[b]
        .instructions
        .last()
        .and_then(|&s| function.statements()[s].as_instruction())
        .filter(|i| i.opcode.base() == "bra" && i.guard.is_some())
}

/// Functions with more blocks keep a counter at the top of every block: the analyses below grow
/// faster than linearly, and the compile must stay quick.
const MAX_BLOCKS_FOR_ANALYSIS: usize = 1500;

/// Pairs (block, from) of blocks that run exactly as often as an earlier block, thread and
/// warp level: `from` dominates `block`, `block` post-dominates `from`, both are in the same
/// loops, no cycle passes one without the other, and no call lies between them (a callee could
/// end the thread). Every lane that runs `from` then runs `block` once before it runs `from`
/// again, and `block` runs only after `from`; with the warp reconverging at immediate
/// post-dominators (assumption R, ARCHITECTURE.md), the same groups run both. `from` is the
/// first block of its class, counted in some other way; blocks derived by a region are left out
/// (they cost nothing already).
fn same_counts(
    function: &Function,
    cfg: &Cfg,
    loops: &[NaturalLoop],
    ipdoms: &[Option<usize>],
    plan: &Plan,
) -> Vec<(usize, usize)> {
    let n = cfg.blocks.len();
    let statements = function.statements();
    let idoms = cfg.idoms();
    let has_call: Vec<bool> = cfg
        .blocks
        .iter()
        .map(|b| {
            b.instructions.iter().any(|&s| {
                statements[s]
                    .as_instruction()
                    .is_some_and(|i| i.opcode.base() == "call")
            })
        })
        .collect();
    let loops_of = |b: usize| -> Vec<usize> {
        (0..loops.len())
            .filter(|&l| loops[l].blocks.contains(&b))
            .collect()
    };
    let post_dominates = |b: usize, a: usize| {
        let mut x = a;
        for _ in 0..n {
            match ipdoms[x] {
                Some(p) if p == b => return true,
                Some(p) => x = p,
                None => return false,
            }
        }
        false
    };
    // The blocks reached from `start` through at least one edge without passing `avoid`.
    let reached_avoiding = |start: usize, avoid: usize| {
        let mut seen = vec![false; n];
        let mut stack: Vec<usize> = cfg.succs[start].clone();
        while let Some(x) = stack.pop() {
            if x != avoid && !std::mem::replace(&mut seen[x], true) {
                stack.extend(cfg.succs[x].iter().copied());
            }
        }
        seen
    };
    // `a` (a dominator of `block`) runs exactly as often as `block`, with the same groups;
    // then also the blocks `a` reaches before `block`.
    let equivalent = |a: usize, block: usize| -> Option<Vec<bool>> {
        let block_loops = loops_of(block);
        if !post_dominates(block, a) || loops_of(a) != block_loops {
            return None;
        }
        // What runs between `a` and `block`; whether a cycle through one misses the other.
        let after_a = reached_avoiding(a, block);
        let cycles_apart =
            !block_loops.is_empty() && (after_a[a] || reached_avoiding(block, a)[block]);
        let calls_between = has_call[a] || (0..n).any(|x| after_a[x] && has_call[x]);
        (!cycles_apart && !calls_between).then_some(after_a)
    };
    let dominators = |block: usize| {
        let mut chain = Vec::new();
        let mut a = block;
        for _ in 0..32 {
            match idoms[a] {
                Some(d) if d != a => a = d,
                _ => break,
            }
            chain.push(a);
        }
        chain
    };
    let mut copies: Vec<(usize, usize)> = Vec::new();
    let reachable = |block: usize| idoms[block].is_some();
    for block in 1..n {
        if plan.derived(block) || !reachable(block) {
            continue;
        }
        // The earliest such dominator.
        let from = dominators(block)
            .into_iter()
            .rev()
            .find(|&a| equivalent(a, block).is_some());
        if let Some(from) = from {
            copies.push((block, from));
        }
    }
    // Blocks entered only from a branch on the same predicate, same side, as an earlier
    // equivalent branch, with the predicate not written in between: the same lanes of the
    // same groups take that side of both.
    let is_register = |name: &str| function.declares_register(name);
    let writes = |b: usize, register: &str| {
        cfg.blocks[b].instructions.iter().any(|&s| {
            statements[s].as_instruction().is_some_and(|i| {
                defs_and_uses(i, &is_register)
                    .0
                    .iter()
                    .any(|d| d.as_str() == register)
            })
        })
    };
    // (predicate, negated, taken side) of the conditional `bra` that is the only way into `b`.
    let entered_by = |b: usize| -> Option<(usize, Guard, bool)> {
        let [x] = cfg.preds[b][..] else { return None };
        if cfg.succs[x].len() != 2 {
            return None;
        }
        let branch = conditional_branch(function, cfg, x)?;
        let guard = branch.guard.clone()?;
        let target = branch.branch_targets().next()?;
        let taken = cfg.blocks[b].label.as_deref() == Some(target);
        Some((x, guard, taken))
    };
    for block in 1..n {
        if plan.derived(block) || !reachable(block) || copies.iter().any(|c| c.0 == block) {
            continue;
        }
        let Some((x2, guard, taken)) = entered_by(block) else {
            continue;
        };
        let earlier = dominators(x2).into_iter().find_map(|x1| {
            let between = equivalent(x1, x2)?;
            let unwritten = !writes(x2, &guard.predicate)
                && (0..n).all(|x| !between[x] || !writes(x, &guard.predicate));
            let twin = cfg.succs[x1].iter().copied().find(|&s| {
                s != block
                    && entered_by(s).is_some_and(|(x, g, t)| {
                        // A lane enters `s` when its predicate (negated or not) is `t`, `block`
                        // when its own is `taken`.
                        x == x1
                            && (g == guard && t == taken && unwritten
                                || same_comparison(
                                    function,
                                    cfg,
                                    x1,
                                    x2,
                                    &between,
                                    &is_register,
                                    &writes,
                                )
                                .is_some_and(|complement| {
                                    t == (taken ^ complement ^ g.negated ^ guard.negated)
                                }))
                    })
            })?;
            Some(twin)
        });
        if let Some(twin) = earlier {
            copies.push((block, twin));
        }
    }
    // Every copy from a block the device counts (or the launch does), so that the runtime's
    // one pass fills them in any order. Chains end: a `from` dominates its block, or is
    // entered from a strict dominator of the branch that enters it.
    let sources: Vec<(usize, usize)> = copies.clone();
    for copy in &mut copies {
        for _ in 0..n {
            match sources.iter().find(|c| c.0 == copy.1) {
                Some(&(_, from)) => copy.1 = from,
                None => break,
            }
        }
    }
    copies
}

/// Whether the branches ending blocks `x1` and `x2` test the same value in every lane: each
/// computes its predicate in an unguarded `setp` (the last write of it before the branch, in the
/// block or the straight chain of blocks that leads to it alone), with the same opcode and the
/// same operands, where an operand of `x2`'s is one of `x1`'s that nothing writes from `x1`'s
/// `setp` on (after it, in the blocks `between` them, before `x2`'s chain reads it), or was
/// copied from one in `x2`'s chain by a move or a conversion that gives its value back (the
/// low half of a 64-bit extension: clang re-tests `(int)(long)i` after a loop body as `i`
/// before it), or the same literal. The comparisons are the same or, on integers, each other's
/// complement (`lt` and `ge`, `le` and `gt`, `eq` and `ne`; not on floating point, where NaN
/// fails both): `Some(complement)`. Where the same groups run both branches, the same lanes
/// then take the same sides (or, for a complement, the opposite ones).
fn same_comparison(
    function: &Function,
    cfg: &Cfg,
    x1: usize,
    x2: usize,
    between: &[bool],
    is_register: &dyn Fn(&str) -> bool,
    writes: &dyn Fn(usize, &str) -> bool,
) -> Option<bool> {
    let statements = function.statements();
    let instruction = |s: usize| statements[s].as_instruction();
    let writes_at = |s: usize, register: &str| {
        instruction(s).is_some_and(|i| {
            defs_and_uses(i, is_register)
                .0
                .iter()
                .any(|d| d.as_str() == register)
        })
    };
    // The instructions that run, in order, up to the end of `b`: `b`'s own, after those of the
    // blocks that lead to it alone (each the only way into the next, which is its only way
    // out), from `stop` on at the earliest.
    let chain = |b: usize, stop: usize| -> Vec<usize> {
        let mut blocks = vec![b];
        let mut at = b;
        while let [q] = cfg.preds[at][..] {
            if q == stop || cfg.succs[q].len() != 1 || blocks.contains(&q) {
                break;
            }
            blocks.push(q);
            at = q;
        }
        blocks
            .iter()
            .rev()
            .flat_map(|&b| cfg.blocks[b].instructions.iter().copied())
            .collect()
    };
    let (chain1, chain2) = (chain(x1, x1), chain(x2, x1));
    // The `setp` that last writes the branch's predicate: its position in the chain.
    let comparison = |chain: &[usize]| -> Option<(usize, &Instruction)> {
        let (&branch, body) = chain.split_last()?;
        let predicate = instruction(branch)?.guard.as_ref()?.predicate.as_str();
        let at = body.iter().rposition(|&s| writes_at(s, predicate))?;
        let setp = instruction(body[at])?;
        let single = matches!(setp.operands.first(), Some(Operand::Register(r)) if r == predicate);
        (setp.opcode.base() == "setp" && setp.guard.is_none() && single).then_some((at, setp))
    };
    let (at1, setp1) = comparison(&chain1)?;
    let (at2, setp2) = comparison(&chain2)?;
    let complement = if setp1.opcode == setp2.opcode {
        false
    } else {
        // `setp.<relation>.<type>` both, the same integer type, complementary relations.
        let parts = |setp: &Instruction| -> Option<(String, DataType)> {
            let [relation, ty] = setp.opcode.modifiers().collect::<Vec<_>>()[..] else {
                return None;
            };
            Some((relation.to_string(), DataType::from_modifier(ty)?))
        };
        let ((r1, t1), (r2, t2)) = (parts(setp1)?, parts(setp2)?);
        let integer = matches!(
            t1,
            DataType::S16
                | DataType::S32
                | DataType::S64
                | DataType::U16
                | DataType::U32
                | DataType::U64
                | DataType::B16
                | DataType::B32
                | DataType::B64
        );
        let pair = |x: &str, y: &str| (r1 == x && r2 == y) || (r1 == y && r2 == x);
        if t1 != t2 || !integer || !(pair("lt", "ge") || pair("le", "gt") || pair("eq", "ne")) {
            return None;
        }
        true
    };
    if setp1.operands.len() != setp2.operands.len() {
        return None;
    }
    // The unguarded instruction that last writes `name` before position `at` of `x2`'s chain,
    // with its position, or `None` where nothing there does.
    let last_write = |name: &str, at: usize| {
        chain2[..at]
            .iter()
            .rposition(|&s| writes_at(s, name))
            .map(|p| (p, instruction(chain2[p]).filter(|i| i.guard.is_none())))
    };
    let source_of = |i: &Instruction| match i.operands.as_slice() {
        [_, Operand::Register(source)] => Some(source.to_string()),
        _ => None,
    };
    // The register whose value at the top of `x2`'s chain `name` holds at position `at`,
    // through the identity moves and round-trip conversions before it.
    let value_at_top = |name: &str, at: usize| -> Option<String> {
        let (mut name, mut at) = (name.to_string(), at);
        loop {
            let Some((def, copy)) = last_write(&name, at) else {
                return Some(name);
            };
            let copy = copy?;
            let source = source_of(copy)?;
            match copy.opcode.to_string().as_str() {
                "mov.b32" | "mov.u32" | "mov.s32" | "mov.b64" | "mov.u64" | "mov.s64" => {
                    (name, at) = (source, def);
                }
                // The low half of a 64-bit value that extends a 32-bit one is that value.
                "cvt.u32.u64" | "cvt.s32.s64" | "cvt.u32.s64" | "cvt.s32.u64" => {
                    let (widened, widen) = last_write(&source, def)?;
                    let widen = widen?;
                    if !matches!(
                        widen.opcode.to_string().as_str(),
                        "cvt.s64.s32" | "cvt.u64.u32" | "cvt.s64.u32" | "cvt.u64.s32"
                    ) {
                        return None;
                    }
                    (name, at) = (source_of(widen)?, widened);
                }
                _ => return None,
            }
        }
    };
    let unwritten_since_setp1 = |register: &str| {
        chain1[at1 + 1..].iter().all(|&s| !writes_at(s, register))
            && (0..cfg.blocks.len()).all(|x| !between[x] || !writes(x, register))
    };
    setp1
        .operands
        .iter()
        .zip(&setp2.operands)
        .skip(1)
        .all(|(o1, o2)| match (o1, o2) {
            (Operand::Register(r1), Operand::Register(r2)) => {
                value_at_top(r2, at2).is_some_and(|r| r == r1.as_str()) && unwritten_since_setp1(r1)
            }
            (Operand::Integer(a), Operand::Integer(b)) | (Operand::Float(a), Operand::Float(b)) => {
                a == b
            }
            _ => false,
        })
        .then_some(complement)
}

/// Opcodes after which a thread may not go on to the next instruction of the function: it may
/// end (`ret`, `exit`, `trap`), or a callee may end it (`call`), or it jumps through a table
/// (`brx`).
const LEAVES_OR_CALLS: [&str; 5] = ["call", "ret", "exit", "trap", "brx"];

/// Whether a lane at the top of block `from` goes on to `meeting` and nowhere else, arriving
/// once: `from` is `meeting`, or a chain of blocks each with one successor (no branch that may
/// be taken or not) and nothing that could end the thread or leave the function (`ret`,
/// `exit`, `trap`, `call`, `brx`) leads there. Compilers give each exit of an unrolled loop
/// such a block, to fix up what the loop leaves with (`corpus/loops.cu`'s `run_length`, Parboil
/// mri-gridding's `splitRearrange`).
fn leads_only_to(
    cfg: &Cfg,
    statements: &[ptx_lexer::Statement],
    from: usize,
    meeting: usize,
) -> bool {
    let mut at = from;
    // A chain visits each block at most once; a longer walk is a cycle.
    for _ in 0..cfg.blocks.len() {
        if at == meeting {
            return true;
        }
        let leaves_or_calls = cfg.blocks[at]
            .instructions
            .iter()
            .filter_map(|&i| statements[i].as_instruction())
            .any(|i| LEAVES_OR_CALLS.contains(&i.opcode.base()));
        match cfg.succs[at].as_slice() {
            [next] if !leaves_or_calls => at = *next,
            _ => return false,
        }
    }
    false
}

#[allow(clippy::too_many_arguments)]
fn region_of(
    function: &Function,
    cfg: &Cfg,
    divergence: &Divergence,
    ipdoms: &[Option<usize>],
    enclosed_divergence: bool,
    depths: &[usize],
    l: &NaturalLoop,
    loops: &[NaturalLoop],
) -> Result<Region, Rejection> {
    let statements = function.statements();
    // Nothing in it may split the warp or end a thread; every statement involved in code
    // placement sits in the body's own scope (labels are scoped).
    // A divergent branch may stay in the loop if the warp reconverges inside it: the blocks
    // from the branch to its immediate post-dominator are then counted directly.
    // A divergent branch whose post-dominator is outside the loop lets lanes leave in different
    // iterations: allowed (a shrinking region) when every exit leads to that one block, where
    // the lanes meet again and the counts are flushed.
    let mut direct: BTreeSet<usize> = BTreeSet::new();
    let mut shrinking_to: Option<usize> = None;
    for &b in l.blocks.iter().filter(|&&b| divergence.divergent_branch[b]) {
        if !enclosed_divergence {
            return Err(Rejection::DivergentBranchUnderUniformLoops { branch: b });
        }
        let join = ipdoms[b].ok_or(Rejection::DivergentBranchNeverMeets { branch: b })?;
        if !l.blocks.contains(&join) {
            // The lanes that leave go to the meeting block, straight or through blocks that lead
            // only there; the others stay together.
            let succs = &cfg.succs[b];
            let leaves_directly = succs.len() == 2
                && succs.iter().any(|s| l.blocks.contains(s))
                && succs
                    .iter()
                    .any(|&s| !l.blocks.contains(&s) && leads_only_to(cfg, statements, s, join));
            if !leaves_directly {
                return Err(Rejection::DivergentExitNotStraightToMeeting {
                    branch: b,
                    meeting: join,
                });
            }
            if let Some(first) = shrinking_to.filter(|&x| x != join) {
                return Err(Rejection::TwoMeetingBlocks {
                    branch: b,
                    first,
                    second: join,
                });
            }
            shrinking_to = Some(join);
            continue;
        }
        let mut stack: Vec<usize> = cfg.succs[b].clone();
        while let Some(x) = stack.pop() {
            if x == join || direct.contains(&x) {
                continue;
            }
            // The branch itself may be in its own divergent part: it ends an inner loop that
            // lanes leave at different times (the join is after that loop, still in this one).
            // Its lanes then run it apart too, so it is counted directly like the rest.
            if x == l.header {
                return Err(Rejection::DivergentPartHoldsHeader { branch: b, join });
            }
            if !l.blocks.contains(&x) {
                return Err(Rejection::DivergentPartLeavesLoop {
                    branch: b,
                    join,
                    outside: x,
                });
            }
            direct.insert(x);
            stack.extend(cfg.succs[x].iter().copied());
        }
    }
    // Code on edges and flushes goes in line, in whatever `{ }` scope the edge is (the counter
    // registers are the function's); only a flush on a taken exit is a block of its own at the
    // end of the body, which must see the exit's target label (below).
    for &b in &l.blocks {
        // (A block's statements are all instructions.)
        let instructions = cfg.blocks[b]
            .instructions
            .iter()
            .filter_map(|&s| statements[s].as_instruction());
        for instruction in instructions {
            let opcode = instruction.opcode.base();
            if LEAVES_OR_CALLS.contains(&opcode) {
                return Err(Rejection::LeavesOrCalls {
                    block: b,
                    opcode: opcode.to_string(),
                });
            }
        }
    }
    // The region's edges, with where code on each of them goes.
    let mut internal: Vec<RegionEdge> = Vec::new();
    let mut exits: Vec<RegionEdge> = Vec::new();
    for &b in &l.blocks {
        for &s in &cfg.succs[b] {
            let site = edge_site(function, cfg, b, s)
                .ok_or(Rejection::NoPlaceOnEdge { from: b, to: s })?;
            let edge = RegionEdge {
                from: b,
                to: l.blocks.contains(&s).then_some(s),
                exit_to: (!l.blocks.contains(&s)).then_some(s),
                site,
            };
            if edge.to.is_some() {
                internal.push(edge);
            } else {
                exits.push(edge);
            }
        }
    }
    if exits.is_empty() {
        return Err(Rejection::NoExit); // a loop the warp never leaves has no place to flush
    }
    let nested_label = |t: usize| {
        cfg.blocks[t]
            .label_statement
            .is_some_and(|i| depths[i] != 0)
    };
    if shrinking_to.is_none() {
        // The flush block at the end of the body could not branch there.
        let taken_into_scope = exits
            .iter()
            .filter(|e| e.site == EdgeSite::Taken)
            .find_map(|e| e.exit_to.filter(|&t| nested_label(t)).map(|t| (e.from, t)));
        if let Some((from, to)) = taken_into_scope {
            return Err(Rejection::TakenExitIntoScope { from, to });
        }
    }
    if let Some(e) = exits.iter().find(|e| direct.contains(&e.from)) {
        // A warp may leave it divided.
        return Err(Rejection::ExitFromDivergentPart { block: e.from });
    }
    if let Some(x) = shrinking_to {
        // Every exit goes to the meeting block (straight, or through blocks that lead only
        // there), so a lane is flushed there exactly once per execution of the loop, and no
        // lane re-enters the loop before it is. (An exit edge always has a target.)
        let elsewhere = exits.iter().find_map(|e| {
            e.exit_to
                .filter(|&t| !leads_only_to(cfg, statements, t, x))
                .map(|t| (e.from, t))
        });
        if let Some((from, to)) = elsewhere {
            return Err(Rejection::ExitAvoidsMeetingBlock {
                from,
                to,
                meeting: x,
            });
        }
        if counted_exits_too_many(&exits) {
            return Err(Rejection::TooManyExits { exits: exits.len() });
        }
    }
    // Spanning tree over the region's blocks (Kruskal, heaviest first): edges on the tree are
    // derived, the others carry a counter. Edges of inner loops run most often and go first, so
    // that counters land on the least frequent edge of each cycle; guarded counter code costs an
    // instruction on both sides of a branch, so such edges are kept on the tree when possible.
    let blocks: Vec<usize> = l.blocks.iter().copied().collect();
    let local = |b: usize| blocks.binary_search(&b).unwrap_or(0);
    let mut parent: Vec<usize> = (0..blocks.len()).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut order: Vec<usize> = (0..internal.len()).collect();
    let depth = |e: &RegionEdge| {
        let to = e.to.unwrap_or(e.from);
        loops
            .iter()
            .filter(|inner| inner.blocks.contains(&e.from) && inner.blocks.contains(&to))
            .count()
    };
    order.sort_by_key(|&i| {
        (
            std::cmp::Reverse(depth(&internal[i])),
            std::cmp::Reverse(internal[i].site == EdgeSite::Taken),
            internal[i].from,
        )
    });
    let mut on_tree = vec![false; internal.len()];
    for i in order {
        let (a, b) = (
            find(&mut parent, local(internal[i].from)),
            find(&mut parent, local(internal[i].to.unwrap_or(0))),
        );
        if a != b {
            parent[a] = b;
            on_tree[i] = true;
        }
    }
    let counted: Vec<RegionEdge> = internal
        .iter()
        .zip(&on_tree)
        .filter(|(_, t)| !**t)
        .map(|(e, _)| e.clone())
        .collect();
    // Solve the tree edges from flow conservation, leaves first. Node `blocks.len()` is the
    // outside; its one tree edge enters the header.
    let outside = blocks.len();
    let zero = || Form {
        counters: vec![0; counted.len()],
        exits: vec![0; exits.len()],
    };
    // Edge list: (from node, to node, value); tree edges start unknown.
    struct FlowEdge {
        from: usize,
        to: usize,
        value: Option<Form>,
    }
    let mut flow: Vec<FlowEdge> = Vec::new();
    let mut counter_index = 0;
    for (e, &tree) in internal.iter().zip(&on_tree) {
        let value = (!tree).then(|| {
            let mut f = zero();
            f.counters[counter_index] = 1;
            counter_index += 1;
            f
        });
        flow.push(FlowEdge {
            from: local(e.from),
            to: local(e.to.unwrap_or(0)),
            value,
        });
    }
    for (j, e) in exits.iter().enumerate() {
        let mut f = zero();
        f.exits[j] = 1;
        flow.push(FlowEdge {
            from: local(e.from),
            to: outside,
            value: Some(f),
        });
    }
    flow.push(FlowEdge {
        from: outside,
        to: local(l.header),
        value: None,
    });
    let add = |a: &mut Form, b: &Form, sign: i64| {
        a.counters
            .iter_mut()
            .zip(&b.counters)
            .for_each(|(x, y)| *x += sign * y);
        a.exits
            .iter_mut()
            .zip(&b.exits)
            .for_each(|(x, y)| *x += sign * y);
    };
    loop {
        let unknown: Vec<usize> = (0..flow.len())
            .filter(|&i| flow[i].value.is_none())
            .collect();
        if unknown.is_empty() {
            break;
        }
        // A node with exactly one unknown edge (self-loops are always known).
        let node = (0..=outside)
            .find(|&v| {
                unknown
                    .iter()
                    .filter(|&&i| flow[i].from == v || flow[i].to == v)
                    .count()
                    == 1
            })
            .ok_or(Rejection::FlowUnsolved)?;
        let t = *unknown
            .iter()
            .find(|&&i| flow[i].from == node || flow[i].to == node)
            .ok_or(Rejection::FlowUnsolved)?;
        // in(node) = out(node)
        let mut value = zero();
        for (i, e) in flow.iter().enumerate() {
            if i == t || e.from == e.to {
                continue;
            }
            if let Some(v) = &e.value {
                if e.to == node {
                    add(&mut value, v, 1);
                }
                if e.from == node {
                    add(&mut value, v, -1);
                }
            }
        }
        // If t enters node: t + in_others = out_others, so t = -(value); if it leaves: t = value.
        if flow[t].to == node {
            let mut negated = zero();
            add(&mut negated, &value, -1);
            value = negated;
        }
        flow[t].value = Some(value);
    }
    let counts = blocks
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let mut count = zero();
            for e in flow.iter().filter(|e| e.to == i) {
                if let Some(v) = &e.value {
                    add(&mut count, v, 1);
                }
            }
            (b, count)
        })
        .collect::<Vec<(usize, Form)>>();
    if shrinking_to.is_some() {
        // Each distinct count costs the flush two reductions for the maximum and one for the
        // sum; with many, short loops (a few iterations per lane) would cost more than counting
        // their blocks directly.
        let mut distinct: Vec<&Form> = Vec::new();
        for (b, form) in &counts {
            if !direct.contains(b) && !distinct.contains(&form) {
                distinct.push(form);
            }
        }
        if distinct.len() > MAX_SHRINKING_COUNTS {
            return Err(Rejection::TooManyShrinkingCounts {
                counts: distinct.len(),
            });
        }
    }
    // Only the counts the flush writes (blocks not counted directly) read counters: a counter
    // none of them needs (e.g. on an inner loop of blocks counted directly) is not placed.
    let needed = |coefficients: &dyn Fn(&Form) -> i64| {
        counts
            .iter()
            .any(|(b, form)| !direct.contains(b) && coefficients(form) != 0)
    };
    let kept: Vec<usize> = (0..counted.len())
        .filter(|&i| needed(&|form: &Form| form.counters[i]))
        .collect();
    let exit_taken_by_all =
        shrinking_to.is_some_and(|x| exits.len() == 1 && cfg.preds[x] == [exits[0].from]);
    let counted_exits: Vec<usize> = match shrinking_to {
        Some(_) if !exit_taken_by_all => (0..exits.len())
            .filter(|&j| needed(&|form: &Form| form.exits[j]))
            .collect(),
        _ => Vec::new(),
    };
    // (Counted only now: a cycle inside a divergent part needs no counter of this region.)
    if kept.len() + counted_exits.len() > MAX_COUNTER_REGISTERS {
        return Err(Rejection::TooManyCounters {
            needed: kept.len() + counted_exits.len(),
        });
    }
    let counted: Vec<RegionEdge> = kept.iter().map(|&i| counted[i].clone()).collect();
    let counts = counts
        .into_iter()
        .map(|(b, form)| {
            let counters = kept.iter().map(|&i| form.counters[i]).collect();
            (
                b,
                Form {
                    counters,
                    exits: form.exits,
                },
            )
        })
        .collect();
    // Where the counts are flushed: the meeting block, or each exit's target.
    let flushed_at: Vec<usize> = match shrinking_to {
        Some(meeting) => vec![meeting],
        None => exits.iter().filter_map(|e| e.exit_to).collect(),
    };
    // A lane may also come back to a meeting block without running the loop again (the
    // meeting block heads a loop of its own, or lies on another cycle): its flush, at the top
    // of that block, then runs again, and must find zeros.
    let reentered = reaches(cfg, &flushed_at, l.header)
        || shrinking_to.is_some_and(|meeting| in_cycle(cfg, meeting));
    let mut region = Region {
        header: l.header,
        blocks: l.blocks.clone(),
        direct,
        shrinking_to,
        counted,
        exits,
        counted_exits,
        exit_taken_by_all,
        counts,
        reentered,
        inductions: Vec::new(),
        entries: Vec::new(),
    };
    region.inductions = vec![None; region.counted.len()];
    // Where lanes leave at different times, counts are recovered where they meet when every
    // lane there left by the one exit, else on each exit edge, which must then not be a taken
    // branch (code for it would be guarded, and run on every trip).
    let recoverable = region.shrinking_to.is_none()
        || region.exit_taken_by_all
        || region.exits.iter().all(|e| e.site != EdgeSite::Taken);
    if let Some(entries) = entry_edges(function, cfg, l).filter(|_| recoverable) {
        region.inductions = inductions(function, cfg, depths, &region);
        if region.inductions.iter().any(Option::is_some) {
            region.entries = entries;
        }
    }
    Ok(region)
}

/// The edges into loop `l`'s header from outside it, with where code on each goes; `None`
/// when one has no such place, or when the header is the function's first block (entered from
/// the function's start, where the loop's variables hold nothing yet).
fn entry_edges(function: &Function, cfg: &Cfg, l: &NaturalLoop) -> Option<Vec<RegionEdge>> {
    if l.header == 0 {
        return None;
    }
    cfg.preds[l.header]
        .iter()
        .filter(|p| !l.blocks.contains(p))
        .map(|&p| {
            Some(RegionEdge {
                from: p,
                to: Some(l.header),
                exit_to: None,
                site: edge_site(function, cfg, p, l.header)?,
            })
        })
        .collect()
}

/// The register, its width in bits and the step of `add.{s,u}{32,64} r, r, c` (or
/// `add r, c, r`) and `sub.{s,u}{32,64} r, r, c` without a guard, `c` an integer literal: the
/// register advances by the step each time the instruction runs.
fn induction_step(instruction: &Instruction) -> Option<(&str, u32, i64)> {
    if instruction.guard.is_some() {
        return None;
    }
    let (negate, width) = match instruction.opcode.as_str() {
        "add.s64" | "add.u64" => (false, 64),
        "sub.s64" | "sub.u64" => (true, 64),
        "add.s32" | "add.u32" => (false, 32),
        "sub.s32" | "sub.u32" => (true, 32),
        _ => return None,
    };
    let (register, literal) = match instruction.operands.as_slice() {
        [Operand::Register(d), Operand::Register(a), Operand::Integer(c)] if d == a => (d, c),
        [Operand::Register(d), Operand::Integer(c), Operand::Register(a)] if d == a && !negate => {
            (d, c)
        }
        _ => return None,
    };
    let value = ptx_lexer::declaration::parse_integer(literal)?;
    let step = match width {
        // A 32-bit literal is taken modulo 2^32, as a signed value.
        32 => i64::from(value as i32),
        _ => value,
    };
    let step = if negate { step.checked_neg()? } else { step };
    (step != 0).then_some((register.as_str(), width, step))
}

/// The exit of `region` by which the test that ends block `b` sends a lane out, when that
/// test alone bounds how often a lane runs `b` in one execution of the loop: `b` ends in
/// `@p bra` (or `@!p bra`) where `p` is last written in `b`, after the step at statement
/// `step_at`, by a 32-bit `setp` comparing `register` (written in `b` by that step and by
/// nothing else in the loop) with a literal or a register the loop does not write. Either
/// - the loop's only exit is that branch's: whatever the comparison, the lane leaves at the
///   first value after a step that fails (or passes) it, and the values after the steps cycle
///   through all 2^(32 - s) numbers of their class modulo 2^s (s the step's trailing zero bits)
///   before any repeats, so a lane that leaves runs `b` 1 to 2^(32 - s) times; or
/// - the step is ±1, the test is `setp.eq`/`setp.ne`, and the side equality takes leaves the
///   loop: the values are distinct until 2^32 steps and the one equal to the bound ends the
///   loop, so a lane runs `b` at most 2^32 times, and that often only when it leaves by this
///   exit (other exits may be taken earlier).
fn test_exit(
    function: &Function,
    cfg: &Cfg,
    region: &Region,
    b: usize,
    register: &str,
    (step_at, step): (usize, i64),
    written_in_loop: &dyn Fn(&str) -> bool,
) -> Option<usize> {
    let statements = function.statements();
    let instructions = &cfg.blocks[b].instructions;
    let (&branch_at, body) = instructions.split_last()?;
    let branch = statements[branch_at].as_instruction()?;
    let guard = branch.guard.as_ref()?;
    if branch.opcode.base() != "bra" || cfg.succs[b].len() != 2 {
        return None;
    }
    let is_register = |name: &str| function.declares_register(name);
    let (test_at, test) = body.iter().rev().find_map(|&s| {
        let instruction = statements[s].as_instruction()?;
        defs_and_uses(instruction, &is_register)
            .0
            .iter()
            .any(|d| *d == guard.predicate)
            .then_some((s, instruction))
    })?;
    if test_at < step_at || test.guard.is_some() {
        return None;
    }
    // `setp.<comparison>.<type>`, nothing combined (a combining predicate would make the exit
    // depend on more than the register).
    let equal_when_true = match test
        .opcode
        .as_str()
        .split('.')
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["setp", "eq", "s32" | "u32" | "b32"] => Some(true),
        ["setp", "ne", "s32" | "u32" | "b32"] => Some(false),
        ["setp", "lt" | "le" | "gt" | "ge" | "lo" | "ls" | "hi" | "hs", "s32" | "u32"] => None,
        _ => return None,
    };
    let bound = match test.operands.as_slice() {
        [Operand::Register(p), Operand::Register(a), bound]
            if *p == guard.predicate && a == register =>
        {
            bound
        }
        [Operand::Register(p), bound, Operand::Register(a)]
            if *p == guard.predicate && a == register =>
        {
            bound
        }
        _ => return None,
    };
    let invariant = match bound {
        Operand::Integer(_) => true,
        Operand::Register(r) => r != register && !written_in_loop(r),
        _ => false,
    };
    if !invariant {
        return None;
    }
    if let [only] = region.exits.as_slice() {
        if only.from == b {
            return Some(0);
        }
    }
    // The branch is taken when its guard holds: on equality when `p` means "equal" and the
    // guard is not negated, or `p` means "differ" and it is.
    let taken_on_equality = equal_when_true.filter(|_| step.abs() == 1)? != guard.negated;
    let kind = if taken_on_equality {
        EdgeKind::Branch
    } else {
        EdgeKind::FallThrough
    };
    let target = cfg.edges.iter().find(|e| e.from == b && e.kind == kind)?.to;
    region
        .exits
        .iter()
        .position(|e| e.from == b && e.exit_to == Some(target))
}

/// Per counted edge of `region`: an induction variable that gives its count, if there is one
/// (see [`Induction`]). A candidate is stepped by exactly one instruction in the loop (in a
/// block the flush derives, whose count is that counter alone, with coefficient ±1, plus exit
/// terms), is written by nothing else in the loop, and is a register declared once, in the
/// body's own scope (so that every mention of the name, in any `{ }` scope, is it): 64-bit,
/// stepped by any constant with at most [`MAX_INDUCTION_SHIFT`] trailing zero bits, or 32-bit,
/// stepped by a constant and tested against a bound that ends the loop ([`test_exit`]). Among
/// several, the one whose count takes the fewest instructions to recover.
fn inductions(
    function: &Function,
    cfg: &Cfg,
    depths: &[usize],
    region: &Region,
) -> Vec<Option<Induction>> {
    let statements = function.statements();
    let is_register = |name: &str| function.declares_register(name);
    let declared_once_at_top = |register: &str, width: u32| {
        let declarations: Vec<(usize, &RegDeclaration)> = statements
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s.kind() {
                StatementKind::Directive(Directive::Reg(d)) if d.declares(register) => Some((i, d)),
                _ => None,
            })
            .collect();
        let types: &[&str] = match width {
            64 => &[".b64", ".u64", ".s64"],
            _ => &[".b32", ".u32", ".s32"],
        };
        matches!(declarations.as_slice(), [(i, d)] if depths[*i] == 0
            && d.modifiers.len() == 1 && types.contains(&d.modifiers[0].as_str()))
    };
    let writes_in_loop = |register: &str| {
        region
            .blocks
            .iter()
            .flat_map(|&b| cfg.blocks[b].instructions.iter())
            .filter_map(|&s| statements[s].as_instruction())
            .filter(|i| {
                defs_and_uses(i, &is_register)
                    .0
                    .iter()
                    .any(|d| d == register)
            })
            .count()
    };
    let written_in_loop = |register: &str| writes_in_loop(register) > 0;
    let mut found: Vec<Option<Induction>> = vec![None; region.counted.len()];
    for (block, form) in &region.counts {
        if region.direct.contains(block) {
            continue;
        }
        let nonzero: Vec<(usize, i64)> = form
            .counters
            .iter()
            .enumerate()
            .filter(|(_, &k)| k != 0)
            .map(|(i, &k)| (i, k))
            .collect();
        let [(counter, sign @ (1 | -1))] = nonzero.as_slice() else {
            continue;
        };
        let first_exit_term = form.exits.first().copied().unwrap_or(0);
        for &s in &cfg.blocks[*block].instructions {
            let Some((register, width, step)) =
                statements[s].as_instruction().and_then(induction_step)
            else {
                continue;
            };
            let recovery = if width == 64 {
                let exit_corrections: Option<Vec<i64>> = form
                    .exits
                    .iter()
                    .map(|&x| first_exit_term.checked_sub(x)?.checked_mul(*sign))
                    .collect();
                match (
                    first_exit_term.checked_mul(step),
                    exit_corrections,
                    step.checked_mul(*sign),
                ) {
                    (Some(snapshot_offset), Some(exit_corrections), Some(counter_step))
                        if step.unsigned_abs().trailing_zeros() <= MAX_INDUCTION_SHIFT =>
                    {
                        Recovery::Wide {
                            step: counter_step,
                            snapshot_offset,
                            exit_corrections,
                        }
                    }
                    _ => continue,
                }
            } else {
                let Some(test_exit) = test_exit(
                    function,
                    cfg,
                    region,
                    *block,
                    register,
                    (s, step),
                    &written_in_loop,
                ) else {
                    continue;
                };
                Recovery::Narrow {
                    step,
                    sign: *sign,
                    exit_terms: form.exits.clone(),
                    test_exit,
                }
            };
            let better = found[*counter]
                .as_ref()
                .is_none_or(|other| recovery.cost() < other.recovery.cost());
            let taken = found.iter().flatten().any(|i| i.register == register);
            if better
                && !taken
                && declared_once_at_top(register, width)
                && writes_in_loop(register) == 1
            {
                found[*counter] = Some(Induction {
                    register: register.to_string(),
                    recovery,
                });
            }
        }
    }
    found
}

/// Where code that runs exactly when control moves from block `from` to its successor `to`
/// goes; `None` when no single place does (a conditional branch both of whose sides lead to
/// `to`, or a successor that a terminator without a guard does not explain).
fn edge_site(function: &Function, cfg: &Cfg, from: usize, to: usize) -> Option<EdgeSite> {
    let statements = function.statements();
    if cfg.succs[from].len() == 1 {
        return Some(EdgeSite::EndOfSource);
    }
    let conditional = cfg.blocks[from]
        .instructions
        .last()
        .and_then(|&s| statements[s].as_instruction())
        .is_some_and(|i| i.is_terminator() && i.guard.is_some());
    let kinds: Vec<EdgeKind> = cfg
        .edges
        .iter()
        .filter(|e| e.from == from && e.to == to)
        .map(|e| e.kind)
        .collect();
    match kinds.as_slice() {
        [EdgeKind::Branch] if conditional => Some(EdgeSite::Taken),
        [EdgeKind::FallThrough] if conditional => Some(EdgeSite::FallThrough),
        _ => None,
    }
}

/// Per block: no path of the control-flow graph leads to it from the function's entry. Only
/// where the graph is known whole: a function with a `brx.idx` (whose targets come from a
/// table) has none.
pub(crate) fn unreachable_blocks(function: &Function, cfg: &Cfg) -> Vec<bool> {
    let n = cfg.blocks.len();
    let jump_table = function
        .statements()
        .iter()
        .filter_map(|s| s.as_instruction())
        .any(|i| i.opcode.base() == "brx");
    if jump_table || n == 0 {
        return vec![false; n];
    }
    let mut reached = vec![false; n];
    let mut stack = vec![0usize];
    while let Some(b) = stack.pop() {
        if !std::mem::replace(&mut reached[b], true) {
            stack.extend(cfg.succs[b].iter().copied());
        }
    }
    reached.into_iter().map(|r| !r).collect()
}

/// Where a kernel's prologue can go so that only the threads that reach counter code run it:
/// the top of the nearest block that dominates every block with an instruction that reads or
/// writes a counter register (`is_counter_register`, in the clone as instrumented: updates,
/// edge code, flushes, the counter base stored for a call), lies on no cycle (a thread
/// runs it at most once, so the loop counters it zeroes are zeroed before any loop uses them and
/// never again) and starts in the body's own scope, where that block is not the entry. A
/// guard that sends most warps past all counting (`if (i >= n) return;`, or its mirror image)
/// then costs them nothing. `None` (the top of the body): where that block is the entry, or the
/// graph is not known whole (`brx.idx`).
pub(crate) fn prologue_point(
    function: &Function,
    is_counter_register: &dyn Fn(&str) -> bool,
) -> Option<usize> {
    let is_register = |name: &str| function.declares_register(name);
    let counter_code = |i: &Instruction| {
        let (defs, uses) = defs_and_uses(i, &is_register);
        defs.iter().chain(&uses).any(|r| is_counter_register(r))
    };
    let cfg = Cfg::of(function);
    let statements = function.statements();
    let jump_table = statements
        .iter()
        .filter_map(|s| s.as_instruction())
        .any(|i| i.opcode.base() == "brx");
    if jump_table || cfg.blocks.is_empty() {
        return None;
    }
    let idom = cfg.idoms();
    // Dominators of `b`, `b` first, up to the entry; `None` where `b` is not reached from it.
    let dominators = |b: usize| -> Option<Vec<usize>> {
        let mut chain = vec![b];
        let mut at = b;
        while at != 0 {
            at = idom[at]?;
            chain.push(at);
        }
        Some(chain)
    };
    let mut common: Option<Vec<usize>> = None;
    for (b, block) in cfg.blocks.iter().enumerate() {
        let counts = block
            .instructions
            .iter()
            .any(|&s| statements[s].as_instruction().is_some_and(&counter_code));
        if !counts {
            continue;
        }
        let chain = dominators(b)?;
        common = Some(match common {
            None => chain,
            // The common dominators: the part of the chain shared with this block's.
            Some(known) => known.into_iter().filter(|d| chain.contains(d)).collect(),
        });
    }
    // The nearest such dominator that qualifies (a loop's preheader, where counting starts in
    // the loop).
    let depths = scope_depths(function);
    let point = common?
        .into_iter()
        .find(|&d| !in_cycle(&cfg, d) && at_top_level(&cfg, &depths, d))?;
    (point != 0).then(|| cfg.blocks[point].insertion_point())
}

/// Whether block `b` lies on a cycle of the control-flow graph (a thread may run it twice).
pub(crate) fn in_cycle(cfg: &Cfg, b: usize) -> bool {
    reaches(cfg, &cfg.succs[b], b)
}

/// Whether a path of the control-flow graph leads from one of `from` (included) to `target`.
fn reaches(cfg: &Cfg, from: &[usize], target: usize) -> bool {
    let mut seen = vec![false; cfg.succs.len()];
    let mut stack: Vec<usize> = from.to_vec();
    while let Some(b) = stack.pop() {
        if b == target {
            return true;
        }
        if std::mem::replace(&mut seen[b], true) {
            continue;
        }
        stack.extend(cfg.succs[b].iter().copied());
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(body: &str) -> ptx_lexer::Module {
        let ptx = format!(
            ".version 7.8\n.target sm_70\n.address_size 64\n.visible .entry k(.param .u32 k_n)\n{{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<16>;\n{body}\n}}\n"
        );
        ptx_lexer::parse(ptx).unwrap()
    }

    /// The plan of kernel `k` with `body`, its loops counted on the device (the regions these
    /// tests are about), also those whose trips follow from the launch.
    fn plan_of(body: &str, placement: Placement) -> Plan {
        decide(
            function(body).function("k").unwrap(),
            placement,
            Some(WarpReductions::Redux),
            LaunchLoops::OnDevice,
        )
        .plan
    }

    #[test]
    fn a_loop_whose_trips_follow_from_the_launch_gets_no_region() {
        // `for (i = tid; i < n; i += 32)`: counted from the launch, no counter at all; on the
        // device, a region that lanes leave at different times.
        let src = "	mov.u32 %r1, %tid.x;
	ld.param.u32 %r4, [k_n];
            	setp.ge.u32 %p2, %r1, %r4;
	@%p2 bra $L2;
$L1:
	add.s32 %r1, %r1, 32;
            	setp.lt.u32 %p1, %r1, %r4;
	@%p1 bra $L1;
$L2:
	ret;";
        let module = function(src);
        let k = module.function("k").unwrap();
        let counted = plan(k, Placement::Derived, Some(WarpReductions::Redux));
        assert!(counted.regions.is_empty(), "{:?}", counted.regions);
        assert!(counted
            .launch_counted
            .iter()
            .any(|l| l.block == 1 && l.trips.is_some()));
        assert_eq!(counted.counter_registers(), 0);
        let on_device = plan_of(src, Placement::Derived);
        assert_eq!(on_device.regions.len(), 1);
        assert!(on_device.launch_counted.iter().all(|l| l.trips.is_none()));
        // `uniform-loops` and `every-block` count nothing from the launch.
        for placement in [Placement::UniformLoops, Placement::EveryBlock] {
            let p = plan(k, placement, Some(WarpReductions::Redux));
            assert!(p.launch_counted.is_empty(), "{placement:?}");
        }
    }

    /// Blocks: 0 entry (guard), 1 first guarded, 2 `$L1` (second guard), 3 second guarded,
    /// 4 `$L2` (ret); `between` goes into block 2, before the second branch.
    fn guarded_twice(between: &str) -> Plan {
        let src = &format!(
            "\tmov.u32 %r1, %tid.x;\n\tld.param.u32 %r4, [k_n];\n\tsetp.ge.u32 %p2, %r1, %r4;\n\t@%p2 bra $L1;\n\tst.global.u32 [%r1], %r4;\n$L1:\n\tbar.sync 0;\n{between}\t@%p2 bra $L2;\n\tst.global.u32 [%r1+4], %r4;\n$L2:\n\tret;"
        );
        plan_of(src, Placement::Derived)
    }

    #[test]
    fn a_block_behind_a_second_branch_on_the_same_predicate_copies_the_first() {
        // The same lanes of the same groups skip both stores.
        assert!(guarded_twice("").copies.contains(&(3, 1)));
    }

    #[test]
    fn a_predicate_written_between_the_branches_keeps_the_second_block_counted() {
        let plan = guarded_twice("\tsetp.ge.u32 %p2, %r1, 7;\n");
        assert!(!plan.copied(3), "{:?}", plan.copies);
        // A guarded write may change it too.
        let plan = guarded_twice("\t@%p1 setp.ge.u32 %p2, %r1, 7;\n");
        assert!(!plan.copied(3), "{:?}", plan.copies);
    }

    /// As [`guarded_twice`], but the second branch tests `%p3`, which `second` computes.
    fn retested(second: &str, first: &str) -> Plan {
        let src = &format!(
            "\t.reg .b64 %rd<4>;\n\t.reg .f32 %f<4>;\n\tmov.u32 %r1, %tid.x;\n\tld.param.u32 %r4, [k_n];\n\tmov.b32 %f1, %r1;\n\t{first}\n\t@%p2 bra $L1;\n\tst.global.u32 [%r1], %r4;\n$L1:\n\tbar.sync 0;\n{second}\tst.global.u32 [%r1+4], %r4;\n$L2:\n\tret;"
        );
        plan_of(src, Placement::Derived)
    }

    #[test]
    fn a_block_behind_the_same_comparison_recomputed_copies_the_first() {
        let ge = "setp.ge.s32 %p2, %r1, %r4;";
        // clang's `(int)(long)i`: the low half of the sign extension is `i`.
        let round_trip = "\tcvt.s64.s32 %rd1, %r1;\n\tcvt.u32.u64 %r5, %rd1;\n\tsetp.ge.s32 %p3, %r5, %r4;\n\t@%p3 bra $L2;\n";
        assert!(retested(round_trip, ge).copies.contains(&(3, 1)));
        // The complement, on the branch's other side: the same lanes store.
        let complement = "\tsetp.lt.s32 %p3, %r1, %r4;\n\t@!%p3 bra $L2;\n";
        assert!(retested(complement, ge).copies.contains(&(3, 1)));
        let moved = "\tmov.u32 %r6, %r4;\n\tsetp.lt.s32 %p3, %r1, %r6;\n\t@!%p3 bra $L2;\n";
        assert!(retested(moved, ge).copies.contains(&(3, 1)));
        // The same floating-point comparison (with a literal), on the same side.
        let float = "\tsetp.ge.f32 %p3, %f1, 0f3F800000;\n\t@%p3 bra $L2;\n";
        assert!(retested(float, "setp.ge.f32 %p2, %f1, 0f3F800000;")
            .copies
            .contains(&(3, 1)));
    }

    #[test]
    fn a_different_value_or_side_keeps_the_recomputed_comparison_counted() {
        let ge = "setp.ge.s32 %p2, %r1, %r4;";
        let not_copied = |second: &str, first: &str| {
            let plan = retested(second, first);
            assert!(!plan.copied(3), "{second}: {:?}", plan.copies);
        };
        // The complement on the same side: the other lanes store.
        not_copied("\tsetp.lt.s32 %p3, %r1, %r4;\n\t@%p3 bra $L2;\n", ge);
        // An operand written since the first comparison.
        not_copied(
            "\tadd.s32 %r1, %r1, 1;\n\tsetp.ge.s32 %p3, %r1, %r4;\n\t@%p3 bra $L2;\n",
            ge,
        );
        // A conversion that does not give the value back: the low half of a loaded value.
        not_copied(
            "\tld.global.u64 %rd1, [%r1];\n\tcvt.u32.u64 %r5, %rd1;\n\tsetp.ge.s32 %p3, %r5, %r4;\n\t@%p3 bra $L2;\n",
            ge,
        );
        // Another comparison, or another type.
        not_copied("\tsetp.gt.s32 %p3, %r1, %r4;\n\t@%p3 bra $L2;\n", ge);
        not_copied("\tsetp.ge.u32 %p3, %r1, %r4;\n\t@%p3 bra $L2;\n", ge);
        // Floating point has no complement: NaN fails both `lt` and `ge`.
        not_copied(
            "\tsetp.lt.f32 %p3, %f1, %f2;\n\t@!%p3 bra $L2;\n",
            "setp.ge.f32 %p2, %f1, %f2;",
        );
    }

    #[test]
    fn the_other_side_of_the_second_branch_is_not_a_copy_of_the_first_side() {
        // Negated: the second guarded block runs where the first does not.
        let src = "\tmov.u32 %r1, %tid.x;\n\tld.param.u32 %r4, [k_n];\n\tsetp.ge.u32 %p2, %r1, %r4;\n\t@%p2 bra $L1;\n\tst.global.u32 [%r1], %r4;\n$L1:\n\tbar.sync 0;\n\t@!%p2 bra $L2;\n\tst.global.u32 [%r1+4], %r4;\n$L2:\n\tret;";
        let plan = plan_of(src, Placement::Derived);
        assert!(!plan.copied(3), "{:?}", plan.copies);
    }

    /// Blocks: 0 entry (branch on `condition`), 1 then, 2 `$ELSE`, 3 `$JOIN`. `%r5` is loaded
    /// per lane (divergent), `%r6` at a uniform address from read-only memory (uniform); neither
    /// is known from the launch, so neither side is counted from it.
    fn if_else(condition: &str) -> Plan {
        let src = &format!(
            "\tld.param.u32 %r4, [k_n];\n\tmov.u32 %r1, %tid.x;\n\tld.global.u32 %r5, [%r1];\n\tld.global.nc.u32 %r6, [%r4];\n\tsetp.ge.u32 %p2, {condition}, %r4;\n\t@%p2 bra $ELSE;\n\tst.global.u32 [%r1], %r4;\n\tbra.uni $JOIN;\n$ELSE:\n\tst.global.u32 [%r1+4], %r4;\n$JOIN:\n\tret;"
        );
        plan_of(src, Placement::Derived)
    }

    #[test]
    fn one_side_of_a_divergent_if_else_derives_its_threads_from_the_other() {
        let plan = if_else("%r5");
        // Lanes split: both sides may run in one warp, so warps are still counted.
        assert!(plan.differences.is_empty(), "{:?}", plan.differences);
        assert_eq!(plan.thread_flows.len(), 1, "{:?}", plan.thread_flows);
        let flow = &plan.thread_flows[0];
        let other = 3 - flow.block;
        assert!([1, 2].contains(&flow.block));
        assert_eq!(flow.terms, {
            let mut t = vec![(0, 1), (other, -1)];
            t.sort();
            t
        });
        // The join runs as often as the entry.
        assert!(plan.copies.contains(&(3, 0)));
    }

    #[test]
    fn one_side_of_a_uniform_if_else_derives_threads_and_warps() {
        let plan = if_else("%r6");
        assert_eq!(plan.differences.len(), 1, "{:?}", plan.differences);
        let d = plan.differences[0];
        assert_eq!(d.branch, 0);
        assert!(plan.threads_derived(d.block));
        assert!(!plan.threads_derived(d.sibling));
    }

    #[test]
    fn a_branch_block_that_calls_derives_nothing() {
        // The callee could end the thread: not every thread that starts the block branches.
        let m = ptx_lexer::parse(
            ".version 7.8\n.target sm_70\n.address_size 64\n.func f()\n{\n\tret;\n}\n.visible .entry k(.param .u32 k_n)\n{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<16>;\n\tld.param.u32 %r4, [k_n];\n\tmov.u32 %r1, %tid.x;\n\tsetp.ge.u32 %p2, %r1, %r4;\n\tcall f;\n\t@%p2 bra $ELSE;\n\tst.global.u32 [%r1], %r4;\n\tbra.uni $JOIN;\n$ELSE:\n\tst.global.u32 [%r1+4], %r4;\n$JOIN:\n\tret;\n}\n",
        )
        .unwrap();
        let plan = plan(
            m.function("k").unwrap(),
            Placement::Derived,
            Some(WarpReductions::Redux),
        );
        assert!(plan.differences.is_empty(), "{:?}", plan.differences);
        // The join's threads are the entry's (copied), so one side still follows from the
        // other: threads(side) = threads(join) - threads(other side).
        assert_eq!(plan.thread_flows.len(), 1, "{:?}", plan.thread_flows);
        assert!(!plan.thread_flows[0].terms.iter().any(|&(b, _)| b == 0));
    }

    #[test]
    fn a_loop_with_a_uniform_trip_count_is_a_region_with_one_counter() {
        let src = "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n\tret;";
        let plan = plan_of(src, Placement::Derived);
        assert_eq!(plan.regions.len(), 1);
        let region = &plan.regions[0];
        assert_eq!(region.counted.len(), 1);
        // The loop block runs once per entry plus once per back edge.
        let (_, form) = &region.counts[0];
        assert_eq!(form.counters, vec![1]);
        assert_eq!(form.exits, vec![1]);
    }

    /// A uniform loop left by a taken branch, whose flush needs a block of its own, in a body
    /// that ends with `tail`.
    fn taken_exit_loop(tail: &str) -> (Plan, Option<usize>) {
        let src = format!(
            "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.ge.u32 %p1, %r2, %r1;\n\t@%p1 bra $DONE;\n\tbra.uni $L1;\n$DONE:\n{tail}"
        );
        let module = function(&src);
        let k = module.function("k").unwrap();
        let at = append_point(k, &scope_depths(k));
        (plan(k, Placement::Derived, Some(WarpReductions::Redux)), at)
    }

    #[test]
    fn counter_blocks_go_after_the_last_transfer_and_before_trailing_debug_labels() {
        // clang -g: labels the debug information names follow the last `ret`.
        let (plan, at) = taken_exit_loop("\tret;\n$L__tmp3:\n$L__func_end0:");
        assert_eq!(
            plan.regions.len(),
            1,
            "a loop with a taken exit is a region"
        );
        let module = function("\tret;\n$L__tmp3:\n$L__func_end0:");
        let k = module.function("k").unwrap();
        let ret = k
            .statements()
            .iter()
            .position(|s| s.as_instruction().is_some())
            .unwrap();
        assert_eq!(append_point(k, &scope_depths(k)), Some(ret + 1));
        assert!(at.is_some());
        // A body whose last instruction can fall through has no such place.
        let (plan, at) = taken_exit_loop("\t@%p1 ret;\n$L__func_end0:");
        assert!(
            plan.regions.is_empty() && at.is_none(),
            "{:?}",
            plan.regions
        );
        // Nor one whose last instruction is in a nested scope, where labels are scoped.
        let (_, at) = taken_exit_loop("\t{\n\tret;\n\t}");
        assert_eq!(at, None);
    }

    #[test]
    fn a_loop_bounded_by_the_thread_id_is_one_lanes_leave_at_different_times() {
        let src = "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n\tret;";
        assert_all_shrinking(src, 1);
    }

    /// Under `derived`, `src` has `regions` regions, each a loop that lanes leave at different
    /// times (its exit branch divergent); under `uniform-loops`, none.
    fn assert_all_shrinking(src: &str, regions: usize) {
        let plan = plan_of(src, Placement::Derived);
        assert_eq!(plan.regions.len(), regions, "{:?}", plan.regions);
        assert!(plan.regions.iter().all(|r| r.shrinking_to.is_some()));
        assert!(plan_of(src, Placement::UniformLoops).regions.is_empty());
    }

    #[test]
    fn a_value_set_on_both_sides_of_a_divergent_branch_is_divergent_where_they_meet() {
        // r3 is 1 or 2 depending on the thread, then bounds the loop.
        let src = "\tmov.u32 %r1, %tid.x;\n\tsetp.eq.u32 %p2, %r1, 0;\n\tmov.u32 %r3, 1;\n\t@%p2 bra $L0;\n\tmov.u32 %r3, 2;\n$L0:\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r3;\n\t@%p1 bra $L1;\n\tret;";
        assert_all_shrinking(src, 1);
    }

    /// `ifs` divergent `if`s (each on a bit of the thread index, `%r4`), labels `{label}{i}`;
    /// with `nested`, each inside the one before.
    fn divergent_ifs(ifs: usize, label: &str, nested: bool) -> String {
        let mut code = String::new();
        for i in 0..ifs {
            let skip = if nested {
                format!("{label}0")
            } else {
                format!("{label}{i}")
            };
            code += &format!(
                "\tand.b32 %r6, %r4, {};\n\tsetp.eq.u32 %p2, %r6, 0;\n\t@%p2 bra ${skip};\n\tadd.s32 %r3, %r3, 1;\n",
                1 << i
            );
            if !nested {
                code += &format!("${skip}:\n");
            }
        }
        if nested && ifs > 0 {
            code += &format!("${label}0:\n");
        }
        code
    }

    /// Each lane's path through `region` as the program's control flow allows it (a random
    /// successor at each branch, from the header until an exit): (visits per block, traversals
    /// per counted edge, the exit taken).
    fn random_lane_path(
        cfg: &Cfg,
        region: &Region,
        next: &mut impl FnMut() -> u64,
    ) -> (HashMap<usize, i64>, Vec<i64>, usize) {
        let mut visits: HashMap<usize, i64> = HashMap::new();
        let mut edges = vec![0i64; region.counted.len()];
        let mut at = region.header;
        for _ in 0..10_000 {
            *visits.entry(at).or_default() += 1;
            let succs = &cfg.succs[at];
            let to = succs[(next() % succs.len() as u64) as usize];
            if let Some(j) = region
                .exits
                .iter()
                .position(|e| e.from == at && e.exit_to == Some(to))
            {
                return (visits, edges, j);
            }
            if let Some(i) = region
                .counted
                .iter()
                .position(|e| e.from == at && e.to == Some(to))
            {
                edges[i] += 1;
            }
            at = to;
        }
        panic!("no exit in 10000 steps");
    }

    /// A loop that lanes leave when their value `%r4` reaches 1, with `steps` if/else on its
    /// parity in a row.
    fn collatz(steps: usize) -> String {
        let step = |i: usize| {
            format!("\tand.b32 %r6, %r4, 1;\n\tsetp.eq.u32 %p2, %r6, 0;\n\t@%p2 bra $E{i};\n\tmad.lo.s32 %r4, %r4, 3, 1;\n\tbra.uni $J{i};\n$E{i}:\n\tshr.u32 %r4, %r4, 1;\n$J{i}:\n")
        };
        let body: String = (0..steps).map(step).collect();
        format!("\tmov.u32 %r4, %tid.x;\n\tmov.u32 %r2, 0;\n$L1:\n{body}\tadd.s32 %r2, %r2, 1;\n\tsetp.gt.u32 %p1, %r4, 1;\n\t@%p1 bra $L1;\n$L2:\n\tret;")
    }

    /// The flushes read each block's count off the registers of one lane (the leader) or of
    /// each lane (where lanes leave at different times): by per-lane flow conservation, a
    /// lane's counted edges and exit give its own count of every block the flush writes,
    /// whatever path it took. Random lane paths through each region, against the visits.
    #[test]
    fn each_lanes_registers_give_its_count_of_every_block_a_flush_writes() {
        let outer_inner = |outer: &str, inner: &str| {
            format!("\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r4, %tid.x;\n\tmov.u32 %r2, 0;\n$O:\n{outer}\tmov.u32 %r7, 0;\n$I:\n{inner}\tadd.s32 %r7, %r7, 1;\n\tsetp.lt.u32 %p3, %r7, %r1;\n\t@%p3 bra $I;\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $O;\n\tret;")
        };
        let sources = [
            outer_inner(&divergent_ifs(3, "A", false), &divergent_ifs(2, "B", false)),
            outer_inner(&divergent_ifs(3, "A", true), &divergent_ifs(3, "B", true)),
            outer_inner("", &divergent_ifs(4, "B", true)),
            // Lanes leave at different times (the trip count is the thread index).
            format!("\tmov.u32 %r4, %tid.x;\n\tmov.u32 %r2, 0;\n$L1:\n{}\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r4;\n\t@%p1 bra $L1;\n$L2:\n\tret;", divergent_ifs(3, "A", false)),
            format!("\tmov.u32 %r4, %tid.x;\n\tmov.u32 %r2, 0;\n$L1:\n{}\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r4;\n\t@%p1 bra $L1;\n$L2:\n\tret;", divergent_ifs(2, "A", true)),
            // Collatz steps: an if/else on the lane's value before a test it leaves by.
            collatz(1),
            collatz(2),
        ];
        let mut checked = 0;
        let mut next = launch_paths::xorshift(0x9e37_79b9_7f4a_7c15);
        for src in &sources {
            let module = function(src);
            let k = module.function("k").unwrap();
            let cfg = Cfg::of(k);
            let plan = plan_of(src, Placement::Derived);
            for region in &plan.regions {
                checked += 1;
                for _ in 0..200 {
                    let (visits, edges, exit) = random_lane_path(&cfg, region, &mut next);
                    for (b, form) in region
                        .counts
                        .iter()
                        .filter(|(b, _)| !region.direct.contains(b))
                    {
                        let value: i64 = form
                            .counters
                            .iter()
                            .zip(&edges)
                            .map(|(k, n)| k * n)
                            .sum::<i64>()
                            + form.exits[exit];
                        assert_eq!(
                            value,
                            visits.get(b).copied().unwrap_or(0),
                            "block {b} in {src}"
                        );
                    }
                }
            }
        }
        // Uniform and shrinking regions, nested ones among them.
        assert!(checked >= sources.len(), "{checked}");
    }

    #[test]
    fn a_uniform_loop_inside_a_thread_guard_is_a_region() {
        let src = "\tmov.u32 %r1, %tid.x;\n\tld.param.u32 %r4, [k_n];\n\tsetp.ge.u32 %p2, %r1, %r4;\n\t@%p2 bra $L9;\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r4;\n\t@%p1 bra $L1;\n$L9:\n\tret;";
        assert_eq!(plan_of(src, Placement::Derived).regions.len(), 1);
    }

    #[test]
    fn a_loop_counter_read_after_a_divergent_exit_is_divergent() {
        // The first loop leaves at a thread-dependent iteration; its counter then bounds the
        // second loop, which lanes leave at different times too.
        let src = "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n\tmov.u32 %r5, 0;\n$L2:\n\tadd.s32 %r5, %r5, 1;\n\tsetp.lt.u32 %p3, %r5, %r2;\n\t@%p3 bra $L2;\n\tret;";
        assert_all_shrinking(src, 2);
    }

    #[test]
    fn a_divergent_if_inside_a_uniform_loop_is_counted_directly_and_the_rest_derived() {
        // $L2 runs for some lanes only; $L3 (where they meet again), the header and the latch
        // are derived.
        let src = "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r4, %tid.x;\n\tmov.u32 %r2, 0;\n$L1:\n\tsetp.lt.u32 %p2, %r4, %r2;\n\t@%p2 bra $L3;\n$L2:\n\tadd.s32 %r5, %r5, 1;\n$L3:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n\tret;";
        let plan = plan_of(src, Placement::Derived);
        assert_eq!(plan.regions.len(), 1);
        let region = &plan.regions[0];
        assert_eq!(region.direct.iter().copied().collect::<Vec<_>>(), vec![2]);
        assert!(plan.derived(1) && plan.derived(3) && !plan.derived(2));
        // Without the reconvergence assumption the loop is counted directly.
        assert!(plan_of(src, Placement::UniformLoops).regions.is_empty());
    }

    #[test]
    fn a_loop_that_lanes_leave_at_different_times_is_a_shrinking_region() {
        // The trip count depends on the thread: lanes leave in different iterations and meet
        // again at the block after the loop, where the counts are flushed.
        let src = "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n$L2:\n\tret;";
        let plan = plan_of(src, Placement::Derived);
        assert_eq!(plan.regions.len(), 1);
        assert_eq!(plan.regions[0].shrinking_to, Some(2));
        // One counter for the back edge; every lane at $L2 came through the one exit, so that
        // edge needs none.
        assert!(plan.regions[0].exit_taken_by_all);
        assert_eq!(plan.counter_registers(), 1);
        // Without the reconvergence assumption it is counted directly.
        assert!(plan_of(src, Placement::UniformLoops).regions.is_empty());
    }

    #[test]
    fn with_shuffles_a_shrinking_loop_needs_its_flush_out_of_line() {
        // The body's last instruction is in a nested scope: no block can be appended, so the
        // flush could only run in line, where a loop of shuffles (before sm_80) cannot go.
        // (Bounded by `%laneid`, which the launch does not give.)
        let src = "\tmov.u32 %r1, %laneid;\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n\t{\n\tret;\n\t}";
        let module = function(src);
        let k = module.function("k").unwrap();
        let with = |reductions| plan(k, Placement::Derived, Some(reductions));
        assert!(!with(WarpReductions::Redux).appendable);
        assert_eq!(with(WarpReductions::Redux).regions[0].shrinking_to, Some(2));
        assert!(with(WarpReductions::Shuffles).regions.is_empty());
        // With a block after the body's end, both count it in registers.
        let src = src.replace("\t{\n\tret;\n\t}", "\tret;");
        let module = function(&src);
        let k = module.function("k").unwrap();
        assert_eq!(
            plan(k, Placement::Derived, Some(WarpReductions::Shuffles)).regions[0].shrinking_to,
            Some(2)
        );
    }

    #[test]
    fn a_shrinking_loop_whose_meeting_block_is_entered_around_it_counts_its_exit() {
        // Lanes with tid 0 skip the loop and reach $L2 holding zeros: the exit edge carries a
        // counter, so that they add nothing.
        let src = "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, 0;\n\tsetp.eq.u32 %p2, %r1, 0;\n\t@%p2 bra $L2;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n$L2:\n\tret;";
        let plan = plan_of(src, Placement::Derived);
        assert_eq!(plan.regions.len(), 1);
        assert_eq!(plan.regions[0].shrinking_to, Some(2));
        assert!(!plan.regions[0].exit_taken_by_all);
        assert_eq!(plan.counter_registers(), 2);
    }

    #[test]
    fn a_uniform_loop_that_only_some_lanes_enter_is_nested_in_the_outer_region() {
        // The outer loop's divergent branch skips $L2 and the inner loop $L3 (uniform trip
        // count): both lie in its divergent part; $L3 becomes a region of its own.
        let src = "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r4, %tid.x;\n\tmov.u32 %r2, 0;\n$L1:\n\tsetp.lt.u32 %p2, %r4, %r2;\n\t@%p2 bra $L4;\n$L2:\n\tmov.u32 %r3, 0;\n$L3:\n\tadd.s32 %r3, %r3, 1;\n\tsetp.lt.u32 %p3, %r3, %r1;\n\t@%p3 bra $L3;\n$L4:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n\tret;";
        let plan = plan_of(src, Placement::Derived);
        assert_eq!(plan.regions.len(), 2);
        let (outer, nested) = (&plan.regions[0], &plan.regions[1]);
        assert_eq!(outer.direct.iter().copied().collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(nested.blocks.iter().copied().collect::<Vec<_>>(), vec![3]);
        assert!(nested.shrinking_to.is_none() && nested.direct.is_empty());
        assert!(plan.derived(1) && plan.derived(3) && plan.derived(4) && !plan.derived(2));
        // Each region has its own counter registers.
        assert_eq!(
            plan.counter_registers(),
            outer.counter_registers() + nested.counter_registers()
        );
        assert!(nested.counter_registers() >= 1);
    }

    #[test]
    fn a_loop_whose_divergent_exit_meets_inside_an_outer_loop_is_nested_in_it() {
        // $L2 runs once or twice per lane (its exit branch is divergent and in its own
        // divergent part); the lanes meet again at $L3, inside the outer loop.
        let src = "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r4, %tid.x;\n\tmov.u32 %r2, 0;\n$L1:\n\tmov.u32 %r3, %r4;\n$L2:\n\tadd.s32 %r3, %r3, 32;\n\tsetp.lt.u32 %p3, %r3, 64;\n\t@%p3 bra $L2;\n$L3:\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n\tret;";
        let plan = plan_of(src, Placement::Derived);
        assert_eq!(plan.regions.len(), 2);
        assert_eq!(
            plan.regions[0].direct.iter().copied().collect::<Vec<_>>(),
            vec![2]
        );
        assert_eq!(plan.regions[1].shrinking_to, Some(3));
        assert!((1..=3).all(|b| plan.derived(b)));
    }

    #[test]
    fn blocks_a_region_derives_with_equal_counts_are_copies_of_the_first() {
        // $L1 and $L2 run once per iteration each: one count, flushed once.
        let src = "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, 0;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n$L2:\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n\tret;";
        for placement in [Placement::Derived, Placement::UniformLoops] {
            let plan = plan_of(src, placement);
            assert_eq!(plan.regions.len(), 1);
            assert!(plan.derived(1) && plan.derived(2));
            assert!(plan.copies.contains(&(2, 1)));
            assert!(!plan.copied(1));
        }
    }

    /// A uniform loop ($L1, block 1) entered by a fall-through from block 0, stepping the
    /// 64-bit `%rd1` by `step` (an `add.s64` with that literal); `extra` goes into the loop,
    /// `declarations` before everything.
    fn stepped_loop(step: &str, extra: &str, declarations: &str) -> Plan {
        let src = format!(
            "\t.reg .b64 %rd<4>;\n{declarations}\tld.param.u32 %r1, [k_n];\n\tmov.u64 %rd1, 0;\n\tmov.u32 %r2, 0;\n\tsetp.eq.u32 %p2, %r1, 0;\n\t@%p2 bra $L2;\n$L1:\n\tadd.s64 %rd1, %rd1, {step};\n{extra}\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;\n$L2:\n\tret;"
        );
        plan_of(&src, Placement::Derived)
    }

    #[test]
    fn a_loop_counter_is_read_off_a_64_bit_variable_the_loop_steps_by_a_constant() {
        let plan = stepped_loop("8", "", "");
        assert_eq!(plan.regions.len(), 1);
        let region = &plan.regions[0];
        assert_eq!(region.counted.len(), 1);
        assert_eq!(
            region.inductions,
            vec![Some(Induction {
                register: "%rd1".into(),
                recovery: Recovery::Wide {
                    step: 8,
                    // The block runs once more than the back edge: the snapshot is one step on.
                    snapshot_offset: 8,
                    exit_corrections: vec![0],
                },
            })]
        );
        // The snapshot goes on the one entry edge, the fall-through out of block 0.
        assert_eq!(region.entries.len(), 1);
        assert_eq!(region.entries[0].from, 0);
        assert_eq!(region.entries[0].site, EdgeSite::FallThrough);
        // Any step whose power-of-two part is at most 2^8, negative ones included.
        for (step, value) in [("-12", -12), ("0x100", 256), ("3", 3)] {
            let plan = stepped_loop(step, "", "");
            assert!(matches!(
                plan.regions[0].inductions[0].as_ref().map(|i| &i.recovery),
                Some(Recovery::Wide { step, .. }) if *step == value
            ));
        }
    }

    /// A uniform loop ($L1, block 1) counting the 32-bit `%r2` down from the parameter, ending
    /// in `test` (the step is before it).
    fn counted_down_source(test: &str) -> String {
        format!(
            "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, %r1;\n\tsetp.eq.u32 %p2, %r1, 0;\n\t@%p2 bra $L2;\n$L1:\n\tadd.s32 %r2, %r2, -1;\n\t{test}\n$L2:\n\tret;"
        )
    }

    fn counted_down(test: &str) -> Plan {
        plan_of(&counted_down_source(test), Placement::Derived)
    }

    #[test]
    fn a_loop_counter_is_read_off_a_32_bit_variable_stepped_by_one_to_a_bound() {
        // Leaves when %r2 reaches 0, by the fall-through (exit 0), or by the taken side.
        for (test, test_exit) in [
            ("setp.ne.s32 %p1, %r2, 0;\n\t@%p1 bra $L1;", 0),
            ("setp.eq.s32 %p1, %r2, 0;\n\t@!%p1 bra $L1;", 0),
            ("setp.ne.s32 %p1, %r1, %r2;\n\t@%p1 bra $L1;", 0),
        ] {
            let plan = counted_down(test);
            assert_eq!(plan.regions.len(), 1, "{test}");
            assert_eq!(
                plan.regions[0].inductions,
                vec![Some(Induction {
                    register: "%r2".into(),
                    recovery: Recovery::Narrow {
                        step: -1,
                        sign: 1,
                        exit_terms: vec![1],
                        test_exit,
                    },
                })],
                "{test}"
            );
        }
    }

    /// `for (i = tid; i < n; i += step)` with a 32-bit `i` (a loop lanes leave at different
    /// times); `extra` goes before the step.
    fn strided_loop(step: &str, test: &str, extra: &str) -> Plan {
        let src = format!(
            "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, %tid.x;\n\tsetp.ge.s32 %p2, %r2, %r1;\n\t@%p2 bra $L2;\n$L1:\n\tld.global.u32 %r3, [%r2];\n{extra}\tadd.s32 %r2, %r2, {step};\n\t{test} %p1, %r2, %r1;\n\t@%p1 bra $L1;\n$L2:\n\tret;"
        );
        plan_of(&src, Placement::Derived)
    }

    #[test]
    fn a_loop_counter_is_read_off_a_32_bit_variable_whose_test_is_the_loops_only_exit() {
        let narrow = |step: i64, test_exit: usize| Recovery::Narrow {
            step,
            sign: 1,
            exit_terms: vec![1],
            test_exit,
        };
        let inductions = |plan: Plan| {
            assert_eq!(plan.regions.len(), 1);
            plan.regions[0].inductions.clone()
        };
        let of = |register: &str, recovery| {
            vec![Some(Induction {
                register: register.into(),
                recovery,
            })]
        };
        // Any comparison and any step: the values after the steps run through their whole
        // class before one repeats, so the one that leaves comes within 2^(32 - s) runs.
        assert_eq!(
            inductions(counted_down("setp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L1;")),
            of("%r2", narrow(-1, 0))
        );
        assert_eq!(
            inductions(counted_down("setp.eq.s32 %p1, %r2, 0;\n\t@%p1 bra $L1;")),
            of("%r2", narrow(-1, 0)),
            "the equality stays in the loop"
        );
        assert_eq!(
            inductions(plan_of(
                &counted_down_source("setp.ne.s32 %p1, %r2, 0;\n\t@%p1 bra $L1;")
                    .replace("-1;", "-2;"),
                Placement::Derived,
            )),
            of("%r2", narrow(-2, 0))
        );
        for (step, test) in [
            (256, "setp.lt.s32"),
            (12, "setp.lo.u32"),
            (-3, "setp.gt.s32"),
        ] {
            let plan = strided_loop(&step.to_string(), test, "");
            let region = &plan.regions[0];
            assert!(
                region.shrinking_to.is_some(),
                "lanes leave at different times"
            );
            assert_eq!(
                region.inductions,
                of("%r2", narrow(step, 0)),
                "{step} {test}"
            );
        }
    }

    #[test]
    fn a_loop_variable_is_no_induction_when_anything_else_could_change_it() {
        // (The 64-bit cases' loop also steps a 32-bit trip counter, which may serve instead.)
        let not = |register: &str, plan: Plan| {
            assert_eq!(plan.regions.len(), 1);
            let inductions = &plan.regions[0].inductions;
            assert!(
                inductions.iter().flatten().all(|i| i.register != register),
                "{inductions:?}"
            );
        };
        let none = |plan: Plan| {
            assert_eq!(plan.regions.len(), 1);
            assert_eq!(plan.regions[0].inductions, vec![None]);
            assert!(plan.regions[0].entries.is_empty());
        };
        // Written again in the loop, even under a guard.
        not("%rd1", stepped_loop("8", "\t@%p1 mov.u64 %rd1, 0;\n", ""));
        // Stepped twice per run.
        not("%rd1", stepped_loop("8", "\tadd.s64 %rd1, %rd1, 8;\n", ""));
        // A step whose count would be known only modulo 2^54.
        not("%rd1", stepped_loop("1024", "", ""));
        // The name is declared again in a nested scope: a mention may be another register.
        not(
            "%rd1",
            stepped_loop("8", "", "\t{\n\t.reg .b64 %rd1;\n\tmov.u64 %rd1, 0;\n\t}\n"),
        );
        // A 32-bit bound the loop changes.
        none(counted_down(
            "add.s32 %r1, %r1, 2;\n\tsetp.ne.s32 %p1, %r2, %r1;\n\t@%p1 bra $L1;",
        ));
        // A test that combines another predicate.
        none(counted_down(
            "setp.lt.and.u32 %p1, %r2, %r1, %p2;\n\t@%p1 bra $L1;",
        ));
        // A 32-bit step other than ±1 in a loop with a second exit, which a lane could take
        // after any number of runs.
        none(strided_loop(
            "256",
            "setp.lt.s32",
            "\tsetp.eq.s32 %p3, %r3, 7;\n\t@%p3 bra $L2;\n",
        ));
        // A loop at the function's start: nothing to take a snapshot of before it.
        let src = "\t.reg .b64 %rd<4>;\n$L1:\n\tadd.s64 %rd1, %rd1, 8;\n\tld.param.u32 %r1, [k_n];\n\tcvt.u64.u32 %rd2, %r1;\n\tsetp.lt.u64 %p1, %rd1, %rd2;\n\t@%p1 bra $L1;\n\tret;";
        none(plan_of(src, Placement::Derived));
    }

    #[test]
    fn a_loop_inside_an_inline_asm_scope_is_a_region() {
        // The loop's labels and branches are in a `{ }` scope of their own (inline asm): its
        // counters and flush go in line there. Lanes leave it at different times (the trip
        // count is the thread's), and meet again at DONE, inside the scope.
        let src = "\tmov.u32 %r1, %tid.x;\n\t{\n\t.reg .pred p;\n\t.reg .u32 t;\n\tmov.u32 t, %r1;\nLOOP:\n\tsetp.eq.u32 p, t, 0;\n\t@p bra DONE;\n\tshr.u32 t, t, 1;\n\tbra LOOP;\nDONE:\n\tmov.u32 %r2, t;\n\t}\n\tret;";
        let plan = plan_of(src, Placement::Derived);
        assert_eq!(plan.regions.len(), 1);
        assert!(plan.regions[0].shrinking_to.is_some());
        assert!((1..=2).all(|b| plan.derived(b)));
    }

    #[test]
    fn the_prologue_goes_where_all_counter_code_is_dominated_outside_loops() {
        // Counter code stands in here as the stores (the only readers of their addresses): the
        // point is the top of the nearest block that dominates them all, on no cycle, unless
        // that is the entry.
        let point = |body: &str| {
            let module = function(body);
            let k = module.function("k").unwrap();
            // `%r2` and `%r3`, the stores' addresses, stand in for counter registers.
            let is_address = |name: &str| name == "%r2" || name == "%r3";
            prologue_point(k, &is_address).map(|at| match k.statements()[at].kind() {
                StatementKind::Instruction(i) => i.to_string(),
                StatementKind::Label(l) => format!("{l}:"),
                other => format!("{other:?}"),
            })
        };
        let guard = "\tmov.u32 %r1, %tid.x;\n\tsetp.ge.u32 %p1, %r1, 100;\n\t@%p1 bra $END;\n";
        // After a guard: the guarded block.
        let guarded = format!("{guard}\tst.global.u32 [%r2], %r1;\n$END:\n\tret;");
        assert_eq!(
            point(&guarded).as_deref(),
            Some("st.global.u32 [%r2], %r1;")
        );
        // Both sides of a branch after the guard: the block that branches, after its label.
        let sides = format!(
            "{guard}$B:\n\tsetp.eq.u32 %p2, %r1, 7;\n\t@%p2 bra $C;\n\tst.global.u32 [%r2], %r1;\n\tbra.uni $END;\n$C:\n\tst.global.u32 [%r3], %r1;\n$END:\n\tret;"
        );
        assert_eq!(point(&sides).as_deref(), Some("setp.eq.u32 %p2, %r1, 7;"));
        // Counting in a loop: its preheader, not its header (which runs on every trip).
        let in_loop = format!(
            "{guard}\tmov.u32 %r4, 0;\n$L:\n\tst.global.u32 [%r2], %r4;\n\tadd.u32 %r4, %r4, 1;\n\tsetp.lt.u32 %p2, %r4, %r1;\n\t@%p2 bra $L;\n$END:\n\tret;"
        );
        assert_eq!(point(&in_loop).as_deref(), Some("mov.u32 %r4, 0;"));
        // Counting in the entry block, or on both sides of the guard: the top of the body.
        assert_eq!(
            point(&format!(
                "\tst.global.u32 [%r2], %r1;\n{guard}$END:\n\tret;"
            )),
            None
        );
        assert_eq!(
            point(&format!(
                "{guard}\tst.global.u32 [%r2], %r1;\n$END:\n\tst.global.u32 [%r3], %r1;\n\tret;"
            )),
            None
        );
        // The entry heads a loop: the top of the body (before its label), not inside the loop.
        let entry_loop = "$L:\n\tmov.u32 %r1, %tid.x;\n\tst.global.u32 [%r2], %r1;\n\tsetp.lt.u32 %p2, %r1, 3;\n\t@%p2 bra $L;\n\tret;";
        assert_eq!(point(entry_loop), None);
        // Nothing counted: no point either (there is no prologue).
        assert_eq!(point(&format!("{guard}$END:\n\tret;")), None);
    }
}
