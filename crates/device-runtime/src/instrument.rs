//! Instrumenting a whole PTX module: every kernel gets a counting clone, and every device
//! function a kernel can reach gets a counting clone for that kernel, so that counts inside
//! `__noinline__` and recursive functions land in the kernel's own counter buffer.
//!
//! Layout of a kernel's counters: the kernel's blocks first, then the blocks of each reachable
//! device function in the order they are first reached (depth first, in call order). Function
//! clones are per kernel, so each one adds constant offsets to the base address it is passed;
//! the kernel passes its bank's base address as an extra `.param .b64` argument to every call of
//! a cloned function.

use std::collections::HashMap;

use ptx_lexer::{
    CallPrototype, Directive, FunctionKind, Instruction, Module, Opcode, Operand, Param,
    RewriteError, Statement, StatementKind,
};

use crate::cta;
use crate::placement::{self, BlockCounting, EdgeSite, Induction, Placement, Plan, RegionEdge};
use crate::ThreadFlow;
use crate::{
    block_update, counter_increment, counter_params, cta_entry_prologue, declare_registers,
    entry_prologue, function_prologue, guarded, induction_count, induction_snapshot, packed_update,
    region_flush, shrinking_flush, shrinking_flush_fast, warp_update, BankParams, CountForm,
    CounterRegisters, WarpReductions,
};

/// What a kernel's counting clone is called: the kernel's name and this (`K__cf`).
pub const CLONE_SUFFIX: &str = "__cf";

/// One block of the snapshot: the function it belongs to (the original's name), its label and
/// its instructions' full opcodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotBlock {
    pub function: String,
    pub label: Option<String>,
    pub instructions: Vec<Opcode>,
}

/// What happened to one kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInstrumentation {
    /// The kernel's (mangled) name.
    pub kernel: String,
    /// The counting clone's name; `None` when the kernel could not be instrumented.
    pub clone: Option<String>,
    /// Why the kernel is not instrumented, or what is not counted in it.
    pub note: Option<String>,
    /// Number of the original kernel's parameters (the clone takes two more).
    pub params: usize,
    /// The blocks that `block_counts` index: the kernel's, then each reachable function's.
    pub blocks: Vec<SnapshotBlock>,
    /// Block 0, the kernel's entry, has no counter: nothing branches to it, so every launched
    /// thread runs it exactly once and every warp with all its launched lanes; the runtime
    /// takes its counts from the launch configuration.
    pub entry_from_launch: bool,
    /// Blocks of the kernel's launch tree, counted by the runtime from the launch's shape and
    /// parameters by the conditions on their paths ([`crate::from_launch`]).
    pub launch_counted: Vec<crate::from_launch::LaunchCounted>,
    /// (block, from): blocks without a counter whose counts equal those of block `from`
    /// (control equivalence, ARCHITECTURE.md), copied by the runtime.
    pub copied_counts: Vec<(usize, usize)>,
    /// Blocks whose thread counts follow by flow conservation, each as a combination of the
    /// thread counts the device writes or the launch gives (never of copied or derived ones).
    pub thread_flows: Vec<ThreadFlow>,
    /// (block, branch, sibling): `warps(block) = warps(branch) - warps(sibling)` where the
    /// branch is warp-uniform (the block's threads follow from a flow), filled in by the runtime
    /// after the copies (and the copies once more after them), in order.
    pub warp_differences: Vec<(usize, usize, usize)>,
    /// Blocks whose update is packed ([`crate::packed_update`]): the thread counter holds the
    /// thread count in its low 32 bits and the warp count in its high 32 bits (the warp
    /// counter stays zero); the runtime splits them per bank, before anything reads them.
    pub packed_counts: Vec<usize>,
    /// Whether the clone adds to CTA counters in shared memory, flushed to the bank by each
    /// CTA's last thread out (`cta.rs`), instead of to the bank directly.
    pub cta_counters: bool,
}

/// Instruments every kernel of `module` in place, with the default counter placement. A kernel
/// that cannot be instrumented is left as it is and reported with `clone: None` and the reason.
pub fn instrument_module(module: &mut Module) -> Vec<KernelInstrumentation> {
    instrument_module_with(module, Placement::default())
}

/// [`instrument_module`] with the counter placement chosen.
pub fn instrument_module_with(
    module: &mut Module,
    placement: Placement,
) -> Vec<KernelInstrumentation> {
    instrument(module, placement, true)
}

/// [`instrument_module_with`], every add going to the bank in global memory: no CTA counters
/// (`cta.rs`) in any kernel, as the every-block placement has always.
pub fn instrument_module_with_global_counters(
    module: &mut Module,
    placement: Placement,
) -> Vec<KernelInstrumentation> {
    instrument(module, placement, false)
}

fn instrument(
    module: &mut Module,
    placement: Placement,
    cta_counters: bool,
) -> Vec<KernelInstrumentation> {
    let reductions = WarpReductions::for_targets(module.target());
    let kernels: Vec<String> = module
        .functions()
        .filter(|f| f.kind() == FunctionKind::Entry && f.is_definition())
        .map(|f| f.name().to_string())
        .collect();
    let mut results = Vec::new();
    for (index, kernel) in kernels.iter().enumerate() {
        // Work on a copy so that a failure leaves the module untouched.
        let mut attempt = module.clone();
        let counting = Counting {
            placement,
            reductions,
            cta_counters: cta_counters && placement != Placement::EveryBlock,
        };
        match instrument_kernel_in(&mut attempt, kernel, index, counting) {
            Ok(result) => {
                *module = attempt;
                results.push(result);
            }
            Err(error) => {
                let original = module.function(kernel);
                results.push(KernelInstrumentation {
                    kernel: kernel.clone(),
                    clone: None,
                    note: Some(error.to_string()),
                    params: original.map_or(0, |f| f.params().len()),
                    blocks: original.map_or_else(Vec::new, snapshot_blocks),
                    entry_from_launch: false,
                    launch_counted: Vec::new(),
                    copied_counts: Vec::new(),
                    thread_flows: Vec::new(),
                    warp_differences: Vec::new(),
                    packed_counts: Vec::new(),
                    cta_counters: false,
                });
            }
        }
    }
    results
}

fn snapshot_blocks(function: &ptx_lexer::Function) -> Vec<SnapshotBlock> {
    function
        .block_summaries()
        .into_iter()
        .map(|b| SnapshotBlock {
            function: function.name().to_string(),
            label: b.label.map(|l| l.to_string()),
            instructions: b.instructions,
        })
        .collect()
}

/// The function a `call` statement calls directly (`None` for an indirect call through a
/// register).
pub(crate) fn direct_callee(instruction: &Instruction) -> Option<&str> {
    if instruction.opcode.base() != "call" {
        return None;
    }
    // `call (ret), callee, (args)[, prototype]`: the callee follows the optional return list;
    // for an indirect call it is a register (and the trailing symbol is the prototype).
    match callee_operand(instruction)? {
        Operand::Symbol(s) => Some(s.as_str()),
        _ => None,
    }
}

/// The operand naming what a `call` calls: a function symbol or, indirectly, a register.
fn callee_operand(instruction: &Instruction) -> Option<&Operand> {
    instruction
        .operands
        .iter()
        .find(|op| !matches!(op, Operand::List(_)))
}

pub(crate) fn is_indirect_call(instruction: &Instruction) -> bool {
    instruction.opcode.base() == "call"
        && matches!(callee_operand(instruction), Some(Operand::Register(_)))
}

/// Defined device functions whose address is taken: named in a module variable's initializer
/// (a table of function pointers) or used as an operand other than a call's callee. Without
/// separate compilation (`-fgpu-rdc` is not instrumented), these are the only functions an
/// indirect call in the module can reach.
fn address_taken_functions(module: &Module) -> Vec<String> {
    let defined: Vec<&str> = module
        .functions()
        .filter(|f| f.kind() == FunctionKind::Func && f.is_definition())
        .map(|f| f.name())
        .collect();
    let mut taken: Vec<String> = Vec::new();
    let mut take = |name: &str| {
        if defined.contains(&name) && !taken.iter().any(|t| t == name) {
            taken.push(name.to_string());
        }
    };
    for (_, declaration) in module.variable_declarations() {
        if let Some((_, initializer)) = declaration.split_once('=') {
            let is_identifier = |c: char| c.is_ascii_alphanumeric() || "_$.%".contains(c);
            initializer
                .split(|c: char| !is_identifier(c))
                .filter(|token| !token.is_empty())
                .for_each(&mut take);
        }
    }
    for function in module.functions() {
        for instruction in function.instructions() {
            if instruction.opcode.base() == "call" {
                continue;
            }
            let mut names = Vec::new();
            instruction
                .operands
                .iter()
                .for_each(|o| symbols(o, &mut names));
            names.into_iter().for_each(&mut take);
        }
    }
    taken
}

/// The symbols `operand` names (a label, variable, parameter or function), also inside
/// addresses, offsets, vectors and lists.
pub(crate) fn symbols<'a>(operand: &'a Operand, out: &mut Vec<&'a str>) {
    match operand {
        Operand::Symbol(s) => out.push(s),
        Operand::Offset { base, .. } => symbols(base, out),
        Operand::Vector(items) | Operand::Address(items) | Operand::List(items) => {
            items.iter().for_each(|i| symbols(i, out))
        }
        _ => {}
    }
}

/// Device functions reachable from `kernel` through direct calls (definitions only), in
/// depth-first, call order of first reach; where an indirect call is among them, also every
/// address-taken function (`targets`) and what it reaches.
fn reachable_functions(module: &Module, kernel: &str, targets: &[String]) -> Vec<String> {
    fn visit(module: &Module, name: &str, seen: &mut Vec<String>) {
        let Some(function) = module.function(name) else {
            return;
        };
        for callee in function.instructions().filter_map(direct_callee) {
            let defined = module.function(callee).is_some_and(|f| f.is_definition());
            if defined && !seen.iter().any(|s| s == callee) {
                seen.push(callee.to_string());
                visit(module, callee, seen);
            }
        }
    }
    let mut seen = vec![kernel.to_string()];
    visit(module, kernel, &mut seen);
    let calls_indirectly = |seen: &[String]| {
        seen.iter().any(|name| {
            module
                .function(name)
                .is_some_and(|f| f.instructions().any(is_indirect_call))
        })
    };
    if calls_indirectly(&seen) {
        for target in targets {
            if !seen.contains(target) {
                seen.push(target.clone());
                visit(module, target, &mut seen);
            }
        }
    }
    seen.remove(0);
    seen
}

/// How a module's kernels are counted.
#[derive(Debug, Clone, Copy)]
struct Counting {
    placement: Placement,
    reductions: Option<WarpReductions>,
    /// Whether kernels may take CTA counters (never with the every-block placement).
    cta_counters: bool,
}

fn instrument_kernel_in(
    module: &mut Module,
    kernel: &str,
    kernel_index: usize,
    counting: Counting,
) -> Result<KernelInstrumentation, RewriteError> {
    let Counting {
        placement,
        reductions,
        ..
    } = counting;
    let targets = address_taken_functions(module);
    let functions = reachable_functions(module, kernel, &targets);
    let mut blocks = Vec::new();
    let mut offsets: Vec<u64> = Vec::new();
    for name in std::iter::once(kernel).chain(functions.iter().map(String::as_str)) {
        let function = module
            .function(name)
            .ok_or_else(|| RewriteError::NoSuchFunction(name.to_string()))?;
        offsets.push(blocks.len() as u64);
        blocks.extend(snapshot_blocks(function));
    }
    // Each indirect call picks, among the address-taken functions, this kernel's clone of
    // its target; calls it cannot redirect (no call prototype) reach uncounted code.
    let indirect_targets: Vec<(String, String)> = targets
        .iter()
        .filter(|t| functions.contains(t))
        .map(|t| (t.clone(), format!("{t}__cf{kernel_index}")))
        .collect();
    let mut unredirected = 0;
    let total_blocks = blocks.len() as u64;
    let params = module.function(kernel).map_or(0, |f| f.params().len());

    // Clone names: `K__cf` for the kernel, `f__cf<k>` for kernel number k's copy of `f`.
    let kernel_clone = format!("{kernel}{CLONE_SUFFIX}");
    let clones: HashMap<&str, String> = functions
        .iter()
        .map(|f| (f.as_str(), format!("{f}__cf{kernel_index}")))
        .collect();

    // Kernel clone: counter parameters, registers, bank base, block updates, calls.
    let kernel_fn = module.clone_function(kernel, &kernel_clone)?;
    let (counters, banks) = counter_params(&kernel_clone);
    let (counters_name, banks_name) = (counters.name.to_string(), banks.name.to_string());
    kernel_fn.push_param(counters);
    kernel_fn.push_param(banks);
    let plan = placement::plan(kernel_fn, placement, reductions);
    let entry_from_launch = plan.entry_from_launch;
    let launch_counted: Vec<crate::from_launch::LaunchCounted> = plan
        .launch_counted
        .iter()
        .map(|l| crate::from_launch::LaunchCounted {
            block: offsets[0] as usize + l.block,
            path: l.path.clone(),
            trips: l.trips.clone(),
        })
        .collect();
    let mut copied_counts: Vec<(usize, usize)> = plan
        .copies
        .iter()
        .map(|&(b, from)| (offsets[0] as usize + b, offsets[0] as usize + from))
        .collect();
    let mut thread_flows = Vec::new();
    let mut warp_differences = Vec::new();
    let mut add_differences = |plan: &Plan, offset: usize| {
        for d in &plan.differences {
            warp_differences.push((offset + d.block, offset + d.branch, offset + d.sibling));
        }
        for flow in &plan.thread_flows {
            thread_flows.push(ThreadFlow {
                block: offset + flow.block,
                terms: flow
                    .terms
                    .iter()
                    .map(|&(source, coefficient)| (offset + source, coefficient))
                    .collect(),
            });
        }
    };
    add_differences(&plan, offsets[0] as usize);
    let regs = declare_registers(kernel_fn, plan.counter_registers() as u32)?;
    // Only the kernel's own blocks outside cycles run at most once per thread (a device
    // function's may run once per call): those take packed updates.
    let mut packed_counts = Vec::new();
    let counted_here = place_counters(
        kernel_fn,
        &regs,
        offsets[0],
        &plan,
        reductions,
        true,
        &mut packed_counts,
    )?;
    redirect_calls(kernel_fn, &regs, &clones)?;
    unredirected += redirect_indirect_calls(kernel_fn, &regs, &indirect_targets)?;
    // Function clones, each with its counter base as an extra parameter.
    let mut declarations = Vec::new();
    let mut copies = Vec::new();
    for (name, &offset) in functions.iter().zip(&offsets[1..]) {
        let clone_name = &clones[name.as_str()];
        let function = module.clone_function(name, clone_name)?;
        let base_param = format!("{clone_name}_param_cf");
        function.push_param(Param::new(".param .b64", base_param.clone()));
        let plan = placement::plan(function, placement, reductions);
        copied_counts.extend(
            plan.copies
                .iter()
                .map(|&(b, from)| (offset as usize + b, offset as usize + from)),
        );
        add_differences(&plan, offset as usize);
        let regs = declare_registers(function, plan.counter_registers() as u32)?;
        place_counters(
            function,
            &regs,
            offset,
            &plan,
            reductions,
            false,
            &mut packed_counts,
        )?;
        redirect_calls(function, &regs, &clones)?;
        unredirected += redirect_indirect_calls(function, &regs, &indirect_targets)?;
        let load_base = function_prologue(&regs, &base_param);
        insert_prologue(function, load_base)?;
        declarations.push(function.declaration());
        copies.push((clone_name.clone(), regs));
    }
    // Nothing to count on the device (every block counted from the launch or copied) and no
    // counted function to pass a base to: the clone needs no prologue at all.
    let needs_prologue = counted_here || !functions.is_empty();
    let counted: Vec<cta::Counted> = std::iter::once(cta::Counted {
        name: &kernel_clone,
        regs: &regs,
    })
    .chain(
        copies
            .iter()
            .map(|(name, regs)| cta::Counted { name, regs }),
    )
    .collect();
    let cta_counters = needs_prologue
        && counting.cta_counters
        && reductions.is_some()
        && cta::worth_taking(module, &counted);
    if needs_prologue {
        let kernel_fn = module
            .function_mut(&kernel_clone)
            .ok_or_else(|| RewriteError::NoSuchFunction(kernel_clone.clone()))?;
        let label = unused_label(kernel_fn, "$__cf_counted");
        let prologue = if cta_counters {
            cta_entry_prologue(&regs, &banks_name, !functions.is_empty(), &label)
        } else {
            let ranged_label = unused_label(kernel_fn, "$__cf_ranged");
            entry_prologue(
                &regs,
                &counters_name,
                &banks_name,
                total_blocks,
                &label,
                &ranged_label,
            )
        };
        // Only threads that reach counter code run the prologue: after a guard that most
        // warps fail, where one dominates all of it.
        match placement::prologue_point(kernel_fn, &|name| regs.declares(name)) {
            Some(at) => kernel_fn.insert_statements(at, prologue)?,
            None => insert_prologue(kernel_fn, prologue)?,
        }
    }
    if cta_counters {
        cta::aggregate(
            module,
            &counted,
            &BankParams {
                counters: &counters_name,
                banks: &banks_name,
                blocks: total_blocks,
            },
        )?;
    }
    // Callers may precede the function clones: declare them first.
    for declaration in declarations {
        module.insert_directive_before_functions(declaration);
    }

    Ok(KernelInstrumentation {
        kernel: kernel.to_string(),
        clone: Some(kernel_clone),
        note: (unredirected > 0).then(|| {
            format!(
                "{unredirected} indirect call(s) without a call prototype run the uninstrumented \
                 target; its blocks are not counted"
            )
        }),
        params,
        blocks,
        entry_from_launch,
        launch_counted,
        copied_counts,
        thread_flows,
        warp_differences,
        packed_counts,
        cta_counters,
    })
}

/// Inserts the counter code `plan` calls for: an update at the top of every block that is not
/// derived by a register-counted loop, copied, or the entry block counted from the launch; in
/// those loops, an increment on each counted edge and a flush on each exit edge (or, where
/// lanes leave at different times, one flush where they meet). Block `i` is counted at counter
/// pair `offset + i`. Returns whether any counter code went in.
fn place_counters(
    function: &mut ptx_lexer::Function,
    regs: &CounterRegisters,
    offset: u64,
    plan: &Plan,
    reductions: Option<WarpReductions>,
    packable: bool,
    packed: &mut Vec<usize>,
) -> Result<bool, RewriteError> {
    let cfg = placement::Cfg::of(function);
    let depths = placement::scope_depths(function);
    let statements = function.statements();
    let append_at = placement::append_point(function, &depths);
    // (statement index, order among inserts at that index, code)
    let mut inserts: Vec<(usize, u8, Vec<Statement>)> = Vec::new();
    let mut new_blocks: Vec<Statement> = Vec::new();
    let mut retargets: Vec<(usize, String, String)> = Vec::new();
    // A block no path reaches never runs: its counter pair stays zero, the exact count, without
    // code (clang `-g` ends bodies with a label after the last `ret`, and such a block alone
    // would otherwise cost the kernel its prologue).
    let unreachable = placement::unreachable_blocks(function, &cfg);
    for (b, block) in cfg.blocks.iter().enumerate() {
        // After the code on edges into it (0) and a loop's flush where lanes meet (1).
        let counter = offset + b as u64;
        let update = match placement::block_counting(plan, &cfg, &unreachable, packable, b) {
            BlockCounting::WarpUpdate => Some(warp_update(regs, counter)),
            BlockCounting::PackedUpdate => {
                packed.push(offset as usize + b);
                Some(packed_update(regs, counter))
            }
            BlockCounting::FullUpdate => Some(block_update(regs, counter)),
            BlockCounting::Unreachable
            | BlockCounting::FromLaunch
            | BlockCounting::LaunchConditions { .. }
            | BlockCounting::LaunchLoop { .. }
            | BlockCounting::Copied { .. }
            | BlockCounting::Flushed { .. }
            | BlockCounting::Difference { .. } => None,
        };
        if let Some(update) = update {
            inserts.push((block.insertion_point(), 2, update));
        }
    }
    let mut exit_labels = 0usize;
    let mut first_counter = 0usize;
    for region in &plan.regions {
        let counters: Vec<usize> = (first_counter..first_counter + region.counted.len()).collect();
        first_counter += region.counted.len();
        // A shrinking region also counts its exit edges per lane (lanes leave at different
        // times), and flushes once, where they meet again.
        let exit_counters: Vec<usize> =
            (first_counter..first_counter + region.counted_exits.len()).collect();
        first_counter += exit_counters.len();
        // The counter of each exit that carries one.
        let exit_counter = |j: usize| {
            region
                .counted_exits
                .iter()
                .position(|&e| e == j)
                .map(|k| exit_counters[k])
        };
        // Where code on an edge out of `from` goes: before its branch, or after its last
        // instruction (after its label, for a block of a label alone).
        let terminator = |from: usize| {
            cfg.blocks[from].instructions.last().copied().filter(|&s| {
                statements[s]
                    .as_instruction()
                    .is_some_and(|i| i.is_terminator())
            })
        };
        let end_of = |from: usize| {
            let block = &cfg.blocks[from];
            terminator(from).unwrap_or_else(|| {
                block
                    .instructions
                    .last()
                    .map_or(block.insertion_point(), |&s| s + 1)
            })
        };
        // Where code on an edge goes, in line, and the guard that makes it run only on it.
        let in_line = |edge: &RegionEdge| match edge.site {
            EdgeSite::EndOfSource => (end_of(edge.from), None),
            EdgeSite::Taken => {
                let at = end_of(edge.from);
                (
                    at,
                    statements[at]
                        .as_instruction()
                        .and_then(|i| i.guard.clone()),
                )
            }
            EdgeSite::FallThrough => (end_of(edge.from) + 1, None),
        };
        // Counters read off an induction variable: no increment on their edge, a snapshot on
        // each entry edge, the count recovered on each exit edge before anything reads it.
        let inductions: Vec<(usize, &Induction)> = region
            .inductions
            .iter()
            .zip(&counters)
            .filter_map(|(induction, &counter)| induction.as_ref().map(|i| (counter, i)))
            .collect();
        let induction_counts = |j: usize| -> Vec<Statement> {
            inductions
                .iter()
                .flat_map(|&(counter, induction)| induction_count(regs, counter, induction, j))
                .collect()
        };
        // Where a thread may run the loop again, the flush resets the counters; induction
        // counters take a new snapshot on entry instead, unless a lane may reach the flush
        // without running the loop (then it must find zeros there).
        let recovered_at_meeting = region.shrinking_to.is_some() && region.exit_taken_by_all;
        let skippable = region.shrinking_to.is_some() && !region.exit_taken_by_all;
        let reset: Vec<usize> = if region.reentered {
            counters
                .iter()
                .zip(&region.inductions)
                .filter(|(_, induction)| skippable || induction.is_none())
                .map(|(&c, _)| c)
                .chain(exit_counters.iter().copied())
                .collect()
        } else {
            Vec::new()
        };
        for edge in &region.entries {
            let (at, guard) = in_line(edge);
            let snapshots = inductions
                .iter()
                .map(|&(counter, induction)| {
                    induction_snapshot(regs, counter, induction, guard.clone())
                })
                .collect();
            inserts.push((at, 0, snapshots));
        }
        let counted_edges = region
            .counted
            .iter()
            .zip(&counters)
            .zip(&region.inductions)
            .filter(|(_, induction)| induction.is_none())
            .map(|(edge, _)| edge)
            .chain(
                region
                    .counted_exits
                    .iter()
                    .map(|&j| &region.exits[j])
                    .zip(&exit_counters),
            );
        for (edge, &counter) in counted_edges {
            let (at, guard) = in_line(edge);
            inserts.push((at, 0, vec![counter_increment(regs, counter, guard)]));
        }
        if let Some(meeting) = region.shrinking_to {
            // Placement makes a loop shrinking only where the target has warp reductions.
            let Some(reductions) = reductions else {
                return Err(RewriteError::NoPlaceForBlock(function.name().to_string()));
            };
            let forms: Vec<(u64, CountForm)> = region
                .counts
                .iter()
                .filter(|(block, _)| !region.direct.contains(block) && !plan.copied(*block))
                .map(|(block, form)| {
                    let terms = form
                        .counters
                        .iter()
                        .zip(&counters)
                        .filter(|(k, _)| **k != 0)
                        .map(|(k, &c)| (c, *k))
                        .chain(
                            form.exits
                                .iter()
                                .enumerate()
                                .filter(|(_, k)| **k != 0)
                                .filter_map(|(j, k)| exit_counter(j).map(|c| (c, *k))),
                        )
                        .collect();
                    // Every lane at the flush took the one exit (or its exit counter says
                    // whether it did).
                    let constant = if region.exit_taken_by_all {
                        form.exits[0]
                    } else {
                        0
                    };
                    let count = CountForm { constant, terms };
                    (offset + *block as u64, count)
                })
                .collect();
            // The fast path returns from its out-of-line block to a label after it, which must
            // be in the body's own scope.
            let at = cfg.blocks[meeting].insertion_point();
            let fast = if plan.appendable && placement::at_top_level(&cfg, &depths, meeting) {
                let slow = fresh_label(function, "$__cf_slow", &mut exit_labels);
                let resume = fresh_label(function, "$__cf_resume", &mut exit_labels);
                shrinking_flush_fast(
                    regs,
                    &forms,
                    &reset,
                    &slow,
                    &resume,
                    reductions,
                    &mut || fresh_label(function, "$__cf_tree", &mut exit_labels),
                )
            } else {
                None
            };
            // Induction counters are recovered once per lane: where the lanes meet when every
            // lane there left by the one exit, else on each exit edge (placement allows them
            // only where no exit is a taken branch, whose code would run on every trip).
            let mut flush = if recovered_at_meeting {
                induction_counts(0)
            } else {
                for (j, edge) in region.exits.iter().enumerate() {
                    let code = induction_counts(j);
                    if !code.is_empty() {
                        inserts.push((in_line(edge).0, 0, code));
                    }
                }
                Vec::new()
            };
            flush.append(&mut match fast {
                Some((at_meeting, mut out_of_line)) => {
                    new_blocks.append(&mut out_of_line);
                    at_meeting
                }
                None => {
                    let in_line = shrinking_flush(regs, &forms, &reset, reductions, &mut || {
                        fresh_label(function, "$__cf_tree", &mut exit_labels)
                    });
                    // A flush with a loop (shuffles) in line would split the meeting block;
                    // placement keeps such loops to meeting blocks that can have it out of line.
                    if in_line.iter().any(|s| s.as_label().is_some()) {
                        return Err(RewriteError::NoPlaceForBlock(function.name().to_string()));
                    }
                    in_line
                }
            });
            inserts.push((at, 1, flush));
            continue;
        }
        for (j, edge) in region.exits.iter().enumerate() {
            let forms: Vec<(u64, CountForm)> = region
                .counts
                .iter()
                .filter(|(block, _)| !region.direct.contains(block) && !plan.copied(*block))
                .map(|(block, form)| {
                    let count = CountForm {
                        constant: form.exits[j],
                        terms: form
                            .counters
                            .iter()
                            .enumerate()
                            .filter(|(_, k)| **k != 0)
                            .map(|(i, k)| (counters[i], *k))
                            .collect(),
                    };
                    (offset + *block as u64, count)
                })
                .collect();
            let mut flush = induction_counts(j);
            flush.append(&mut region_flush(regs, &forms, &reset));
            match edge.site {
                EdgeSite::EndOfSource => inserts.push((end_of(edge.from), 0, flush)),
                EdgeSite::FallThrough => inserts.push((end_of(edge.from) + 1, 0, flush)),
                EdgeSite::Taken => {
                    // A block of its own at the end of the body (after its final unconditional
                    // transfer), ending in a branch to the exit's target.
                    let branch = end_of(edge.from);
                    let target = edge
                        .exit_to
                        .and_then(|t| cfg.blocks[t].label.clone())
                        .ok_or_else(|| RewriteError::NoSuchEdge {
                            function: function.name().to_string(),
                            from: edge.from,
                            to: edge.exit_to.unwrap_or(0),
                        })?;
                    let label = fresh_label(function, "$__cf_exit", &mut exit_labels);
                    new_blocks.push(Statement::label(label.clone()));
                    new_blocks.append(&mut flush);
                    new_blocks.push(Statement::instruction(Instruction::simple(
                        "bra.uni",
                        vec![Operand::sym(target.to_string())],
                    )));
                    retargets.push((branch, target.to_string(), label));
                }
            }
        }
    }
    for (at, old, new) in retargets {
        if let StatementKind::Instruction(branch) = function.statements_mut()[at].kind_mut() {
            for operand in &mut branch.operands {
                if matches!(operand, Operand::Symbol(s) if *s == old) {
                    *operand = Operand::sym(new.clone());
                }
            }
        }
    }
    // From the last insertion point backwards, so that earlier indices stay valid; at one
    // index, the later-ordered code first, so that it ends up after.
    inserts.sort_by_key(|(at, order, _)| std::cmp::Reverse((*at, *order)));
    let any = !inserts.is_empty();
    // Before every other insertion, all of which are at earlier statements. (Placement plans
    // such blocks only where the body has a place for them.)
    if !new_blocks.is_empty() {
        let end =
            append_at.ok_or_else(|| RewriteError::NoPlaceForBlock(function.name().to_string()))?;
        function.insert_statements(end, new_blocks)?;
    }
    for (at, _, code) in inserts {
        function.insert_statements(at, code)?;
    }
    Ok(any)
}

/// `base` with the next number from `next` that the function does not use as a label yet.
pub(crate) fn fresh_label(function: &ptx_lexer::Function, base: &str, next: &mut usize) -> String {
    loop {
        let candidate = format!("{base}{next}");
        *next += 1;
        if !function.has_label(&candidate) {
            return candidate;
        }
    }
}

/// `base`, or `base` with a number, whichever the function does not use yet.
fn unused_label(function: &ptx_lexer::Function, base: &str) -> String {
    std::iter::once(base.to_string())
        .chain((1u32..).map(|n| format!("{base}{n}")))
        .find(|l| !function.has_label(l))
        .unwrap_or_else(|| base.to_string())
}

/// Inserts `code` before the first label or instruction, so that it runs once on entry even
/// when the entry block is a loop header.
pub(crate) fn insert_prologue(
    function: &mut ptx_lexer::Function,
    code: Vec<Statement>,
) -> Result<(), RewriteError> {
    let at = function
        .statements()
        .iter()
        .position(|s| s.as_instruction().is_some() || s.as_label().is_some())
        .unwrap_or(function.statements().len());
    function.insert_statements(at, code)
}

/// Points every direct call of a cloned function at this kernel's clone, passing the counter
/// base (`{b64}0`) as an extra `.param .b64` argument declared right before the call.
fn redirect_calls(
    function: &mut ptx_lexer::Function,
    regs: &CounterRegisters,
    clones: &HashMap<&str, String>,
) -> Result<(), RewriteError> {
    let calls: Vec<(usize, String)> = function
        .statements()
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let callee = direct_callee(s.as_instruction()?)?;
            clones.get(callee).map(|clone| (i, clone.clone()))
        })
        .collect();
    // From the last call backwards, so that earlier indices stay valid.
    for (n, (index, clone)) in calls.iter().enumerate().rev() {
        let argument = format!("__cf_arg{n}");
        let statements = function.statements_mut();
        if let StatementKind::Instruction(call) = statements[index.to_owned()].kind_mut() {
            let mut callee_seen = false;
            let mut appended = false;
            for operand in call.operands.iter_mut() {
                match operand {
                    Operand::Symbol(s) if !callee_seen => {
                        *s = clone.as_str().into();
                        callee_seen = true;
                    }
                    Operand::List(arguments) if callee_seen => {
                        arguments.push(Operand::sym(argument.clone()));
                        appended = true;
                    }
                    _ => {}
                }
            }
            if !appended {
                // `call f;` or `call (r), f;`: the argument list comes right after the callee.
                let at = call
                    .operands
                    .iter()
                    .position(|o| matches!(o, Operand::Symbol(_)))
                    .map_or(call.operands.len(), |p| p + 1);
                call.operands
                    .insert(at, Operand::List(vec![Operand::sym(argument.clone())]));
            }
        }
        function.insert_statements(*index, pass_counter_base(&argument, regs))?;
    }
    Ok(())
}

/// The call argument that passes the counter base (`{b64}0`) to a function copy: a `.param .b64`
/// named `argument`, declared and stored right before the call.
fn pass_counter_base(argument: &str, regs: &CounterRegisters) -> Vec<Statement> {
    vec![
        Statement::directive(Directive::Other {
            label: None,
            name: "param".into(),
            text: format!(".param .b64 {argument};"),
        }),
        Statement::instruction(Instruction::simple(
            "st.param.b64",
            vec![
                Operand::Address(vec![Operand::Offset {
                    base: Box::new(Operand::sym(argument)),
                    offset: "0".into(),
                }]),
                regs.r64(0),
            ],
        )),
    ]
}

/// Redirects every indirect call (`call (r), %target, (args), prototype;`) to this kernel's
/// clone of its target: the target register is compared with the address of each candidate
/// (`targets`: original and clone names) and replaced by the matching clone's address; the
/// counter base is passed as an extra `.param .b64` argument, under a copy of the call
/// prototype that declares it. No branch is added, so the block structure is unchanged.
/// Returns how many indirect calls could not be redirected (no prototype found).
fn redirect_indirect_calls(
    function: &mut ptx_lexer::Function,
    regs: &CounterRegisters,
    targets: &[(String, String)],
) -> Result<usize, RewriteError> {
    let calls: Vec<usize> = function
        .statements()
        .iter()
        .enumerate()
        .filter(|(_, s)| s.as_instruction().is_some_and(is_indirect_call))
        .map(|(i, _)| i)
        .collect();
    let mut skipped = 0;
    // From the last call backwards, so that earlier indices stay valid.
    for (n, &index) in calls.iter().enumerate().rev() {
        let Some(StatementKind::Instruction(call)) =
            function.statements().get(index).map(|s| s.kind())
        else {
            continue;
        };
        let target = call.operands.iter().find_map(|o| match o {
            Operand::Register(r) => Some(r.clone()),
            _ => None,
        });
        let prototype = match call.operands.last() {
            Some(Operand::Symbol(p)) => Some(p.clone()),
            _ => None,
        };
        let prototype_text = prototype.as_ref().and_then(|p| {
            function.statements().iter().find_map(|s| match s.kind() {
                StatementKind::Directive(Directive::Other {
                    label: Some(label),
                    name,
                    text,
                }) if label == p && name == "callprototype" => Some(text.clone()),
                _ => None,
            })
        });
        let (Some(target), Some(prototype), Some(prototype_text)) =
            (target, prototype, prototype_text)
        else {
            skipped += 1;
            continue;
        };
        // The same signature with the counter base as one more parameter.
        let Ok(mut counted_signature) = CallPrototype::parse(&prototype_text) else {
            skipped += 1;
            continue;
        };
        counted_signature.params.push(".param .b64 _".to_string());
        let counted_prototype = format!("{prototype}__cf");
        let counted_text = counted_signature.to_string();
        let argument = format!("__cf_iarg{n}");
        let chosen = regs.r64(1);
        let scratch = regs.r64(2);
        let matches = regs.p(2);
        let mut code = pass_counter_base(&argument, regs);
        code.extend([
            Statement::directive(Directive::Other {
                label: Some(counted_prototype.clone().into()),
                name: "callprototype".into(),
                text: counted_text,
            }),
            Statement::instruction(Instruction::simple(
                "mov.u64",
                vec![chosen.clone(), Operand::reg(target.clone())],
            )),
        ]);
        for (original, clone) in targets {
            code.push(Statement::instruction(Instruction::simple(
                "mov.u64",
                vec![scratch.clone(), Operand::sym(original.clone())],
            )));
            code.push(Statement::instruction(Instruction::simple(
                "setp.eq.u64",
                vec![
                    matches.clone(),
                    Operand::reg(target.clone()),
                    scratch.clone(),
                ],
            )));
            code.push(guarded(
                regs,
                2,
                "mov.u64",
                vec![chosen.clone(), Operand::sym(clone.clone())],
            ));
        }
        let statements = function.statements_mut();
        if let StatementKind::Instruction(call) = statements[index].kind_mut() {
            let mut target_replaced = false;
            let mut appended = false;
            for operand in call.operands.iter_mut() {
                match operand {
                    Operand::Register(_) if !target_replaced => {
                        *operand = chosen.clone();
                        target_replaced = true;
                    }
                    Operand::List(arguments) if target_replaced && !appended => {
                        arguments.push(Operand::sym(argument.clone()));
                        appended = true;
                    }
                    _ => {}
                }
            }
            let last = call.operands.len() - 1;
            if !appended {
                // `call %r, prototype;` (no arguments): the list goes before the prototype.
                call.operands
                    .insert(last, Operand::List(vec![Operand::sym(argument.clone())]));
            }
            if let Some(Operand::Symbol(p)) = call.operands.last_mut() {
                *p = counted_prototype.as_str().into();
            }
        }
        function.insert_statements(index, code)?;
    }
    Ok(skipped)
}
