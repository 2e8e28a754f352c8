//! The counter code on real compiler output: every kernel of the corpus, compiled by clang-16
//! and nvcc for sm_70 and sm_90 (and with debug information), gets a counting clone, and every
//! device function it reaches a counting copy; ptxas must assemble the result. The clones keep
//! the original's instructions, with exactly one update per counted block.

use test_support as support;

use ptx_lexer::{parse, FunctionKind, Instruction, Operand};

/// The clone's instructions that came from the original, with redirected calls mapped back:
/// callee `f__cf<k>` becomes `f` again and the extra counter-base argument is dropped; an
/// indirect call gets back the register its target was selected from (the unguarded
/// `mov.u64 %__cf…rd1, %target` before it) and its original prototype.
fn original_code_of(f: &ptx_lexer::Function) -> Vec<Instruction> {
    // A loop's exit branch may lead to a flush block (`$__cf_exit<n>:` ... `bra.uni target;`):
    // the original branch went to that block's target.
    let mut exit_targets: std::collections::HashMap<String, Operand> = Default::default();
    let mut open_exit: Option<String> = None;
    for s in f.statements() {
        if let Some(label) = s.as_label() {
            open_exit = label.starts_with("$__cf_exit").then(|| label.to_string());
        } else if let (Some(label), Some(i)) = (&open_exit, s.as_instruction()) {
            if i.opcode.as_str() == "bra.uni" {
                exit_targets.insert(label.clone(), i.operands[0].clone());
                open_exit = None;
            }
        }
    }
    let mut selected_from: Option<Operand> = None;
    f.statements()
        .iter()
        .filter_map(|s| {
            let i = s.as_instruction()?;
            let retargeted = i.opcode.base() == "bra"
                && i.operands.iter().any(
                    |o| matches!(o, Operand::Symbol(t) if exit_targets.contains_key(t.as_str())),
                );
            if s.is_from_source() || retargeted {
                let mut i = i.clone();
                if i.opcode.base() == "bra" {
                    for operand in &mut i.operands {
                        if let Operand::Symbol(target) = operand {
                            if let Some(original) = exit_targets.get(target.as_str()) {
                                *operand = original.clone();
                            }
                        }
                    }
                }
                return Some(i);
            }
            if i.opcode.base() != "call" {
                if i.opcode.as_str() == "mov.u64" && i.guard.is_none() {
                    if let [Operand::Register(to), from @ Operand::Register(_)] = &i.operands[..] {
                        if to.starts_with("%__cf") {
                            selected_from = Some(from.clone());
                        }
                    }
                }
                return None; // counter code
            }
            let mut call = i.clone();
            let mut callee_done = false;
            let mut args_done = false;
            for op in call.operands.iter_mut() {
                match op {
                    Operand::Symbol(name) if !callee_done => {
                        let base = name.rsplit_once("__cf").map_or(name.as_str(), |(b, _)| b);
                        *name = base.into();
                        callee_done = true;
                    }
                    Operand::Register(_) if !callee_done => {
                        if let Some(target) = selected_from.take() {
                            *op = target;
                        }
                        callee_done = true;
                    }
                    Operand::List(args) if callee_done && !args_done => {
                        args.pop();
                        args_done = true;
                    }
                    Operand::Symbol(prototype) if callee_done => {
                        if let Some(base) = prototype.strip_suffix("__cf") {
                            *prototype = base.into();
                        }
                    }
                    _ => {}
                }
            }
            Some(call)
        })
        .collect()
}

/// The corpus PTX, compiled once for all tests of this file.
fn corpus() -> Vec<support::PtxFile> {
    static FILES: std::sync::OnceLock<Vec<support::PtxFile>> = std::sync::OnceLock::new();
    FILES.get_or_init(support::generate_corpus_ptx).clone()
}

/// corpus/device_calls.cu as clang-16 compiles it for sm_70, from the shared corpus PTX.
fn device_calls_sm70() -> ptx_lexer::Module {
    let file = corpus()
        .into_iter()
        .find(|f| {
            f.source.contains("device_calls")
                && f.compiler == support::Compiler::Clang
                && f.arch == "sm_70"
                && !f.debug
        })
        .expect("device_calls in the corpus PTX");
    parse(std::fs::read_to_string(&file.path).unwrap()).unwrap()
}

#[test]
fn every_corpus_kernel_instruments_and_assembles() {
    let files = corpus();
    let errors = support::parallel(&files, |file| {
        let describe = file.describe();
        let text = std::fs::read_to_string(&file.path).map_err(|e| e.to_string())?;
        let original = parse(text).map_err(|e| format!("{describe}: {e}"))?;
        // Global counters: every add names its block's counter pair (CTA counters are the same
        // adds, moved: `cta_counters_add_what_global_counters_add`).
        let mut module = original.clone();
        let results =
            device_runtime::instrument_module_with_global_counters(&mut module, Default::default());
        let kernels = original
            .functions()
            .filter(|f| f.kind() == FunctionKind::Entry && f.is_definition())
            .count();
        if results.len() != kernels || kernels == 0 {
            return Err(format!(
                "{describe}: {} results for {kernels} kernels",
                results.len()
            ));
        }
        for result in &results {
            let Some(clone_name) = &result.clone else {
                return Err(format!(
                    "{describe}: {} not instrumented: {:?}",
                    result.kernel, result.note
                ));
            };
            let kernel = original.function(&result.kernel).unwrap();
            if result.params != kernel.params().len() {
                return Err(format!(
                    "{describe}: {}: wrong parameter count",
                    result.kernel
                ));
            }
            // The snapshot starts with the kernel's own blocks, as parsed from the original.
            let own = kernel.blocks().len();
            if result.blocks.len() < own
                || result.blocks[..own]
                    .iter()
                    .any(|b| b.function != result.kernel)
            {
                return Err(format!(
                    "{describe}: {}: snapshot does not start with the kernel",
                    result.kernel
                ));
            }
            // Every snapshot block is counted once: one pair of updates per block in the clone
            // and in the function copies, none elsewhere.
            let clone = module.function(clone_name).unwrap();
            if original_code_of(clone) != kernel.instructions().cloned().collect::<Vec<_>>() {
                return Err(format!(
                    "{describe}: {}: the clone's original code changed",
                    result.kernel
                ));
            }
            let copies: Vec<&ptx_lexer::Function> = module
                .functions()
                .filter(|f| {
                    f.is_definition() && (f.name() == clone_name || f.name().contains("__cf"))
                })
                .collect();
            // Every block's counter pair is updated somewhere in its copy: at the block's top or
            // in the flush of the loop that counts it in registers.
            let updated: std::collections::BTreeSet<(String, u64)> = copies
                .iter()
                .flat_map(|f| {
                    f.instructions()
                        .filter(|i| i.opcode.as_str() == "red.global.add.u64" && i.guard.is_some())
                        .filter_map(|i| counter_offset(i).filter(|o| o % 16 == 0))
                        .map(|o| (f.name().to_string(), o))
                })
                .collect();
            // ...except a kernel entry and the blocks that the runtime counts from the launch
            // (the launch tree's, by their conditions), blocks whose
            // counts it copies from another block, and the sides of branches whose thread
            // counts it derives (their warps are counted at offset 8 where still needed).
            // Blocks no path reaches are not counted either (their counts stay zero).
            let expected: usize = results
                .iter()
                .map(|r| {
                    let derived: std::collections::BTreeSet<usize> = r
                        .copied_counts
                        .iter()
                        .map(|&(b, _)| b)
                        .chain(r.thread_flows.iter().map(|f| f.block))
                        .chain(r.entry_from_launch.then_some(0))
                        .chain(r.launch_counted.iter().map(|l| l.block))
                        .collect();
                    let never_run = unreachable_snapshot_blocks(&original, r)
                        .into_iter()
                        .filter(|b| !derived.contains(b))
                        .count();
                    r.blocks.len() - derived.len() - never_run
                })
                .sum();
            if updated.len() != expected {
                return Err(format!(
                    "{describe}: {} counter pairs updated, expected {expected}",
                    updated.len()
                ));
            }
        }
        let path = file.path.with_extension("instrumented.ptx");
        std::fs::write(&path, module.to_ptx()).map_err(|e| e.to_string())?;
        for arch in file.assemble_archs() {
            support::ptxas(&path, arch).map_err(|e| format!("{describe}: {e}"))?;
        }
        Ok(())
    });
    assert!(
        errors.is_empty(),
        "{} failure(s):\n{}",
        errors.len(),
        errors.join("\n\n")
    );
}

#[test]
fn device_functions_are_counted_in_the_kernels_layout() {
    let mut module = device_calls_sm70();
    let original = module.clone();
    let results = device_runtime::instrument_module(&mut module);
    let calls = results
        .iter()
        .find(|r| r.kernel.contains("calls_kernel"))
        .expect("the kernel that calls device functions");
    let functions: Vec<&str> = calls.blocks.iter().map(|b| b.function.as_str()).collect();
    // The recursive and __noinline__ functions are in the layout, after the kernel's blocks.
    for name in original
        .functions()
        .filter(|f| f.kind() == FunctionKind::Func && f.is_definition())
    {
        let reached = original
            .functions()
            .filter(|f| f.kind() == FunctionKind::Entry)
            .any(|k| {
                k.name() == calls.kernel
                    && k.instructions().any(|i| {
                        i.operands
                            .iter()
                            .any(|o| matches!(o, ptx_lexer::Operand::Symbol(s) if s == name.name()))
                    })
            });
        if reached {
            assert!(
                functions.contains(&name.name()),
                "{} missing from {functions:?}",
                name.name()
            );
        }
    }
    // Each reached function has a copy for this kernel that takes the counter base.
    let kernel_index = original
        .functions()
        .filter(|f| f.kind() == FunctionKind::Entry && f.is_definition())
        .position(|f| f.name() == calls.kernel)
        .unwrap();
    for name in functions.iter().filter(|n| **n != calls.kernel) {
        let copy = module
            .function(&format!("{name}__cf{kernel_index}"))
            .unwrap_or_else(|| panic!("no copy of {name}"));
        assert_eq!(copy.params().last().unwrap().declaration, ".param .b64");
    }
}

#[test]
fn indirect_calls_reach_the_kernels_own_copies_of_every_address_taken_function() {
    let mut module = device_calls_sm70();
    let results = device_runtime::instrument_module(&mut module);
    // The function-pointer table: op_table = {op_add, op_xor, op_mix}.
    let table = ["_Z6op_addii", "_Z6op_xorii", "_Z6op_mixii"];
    for result in &results {
        let clone_name = result.clone.as_ref().expect("instrumented");
        assert_eq!(result.note, None, "{}: {:?}", result.kernel, result.note);
        let clone = module.function(clone_name).unwrap();
        let indirect: Vec<&Instruction> = clone
            .instructions()
            .filter(|i| {
                i.opcode.base() == "call"
                    && i.operands
                        .iter()
                        .find(|o| !matches!(o, ptx_lexer::Operand::List(_)))
                        .is_some_and(|o| matches!(o, ptx_lexer::Operand::Register(_)))
            })
            .collect();
        if indirect.is_empty() {
            continue;
        }
        // Every table entry is in this kernel's layout, and each indirect call uses the
        // prototype that passes the counter base.
        let functions: Vec<&str> = result.blocks.iter().map(|b| b.function.as_str()).collect();
        for name in table {
            assert!(
                functions.contains(&name),
                "{name} not counted: {functions:?}"
            );
        }
        for call in indirect {
            let text = call.to_string();
            assert!(
                text.contains("__cf_iarg") && text.ends_with("__cf;"),
                "{text}"
            );
        }
        // The selection code moves the address of each copy, never of an original, into the
        // register the call uses.
        let kernel_index = results
            .iter()
            .position(|r| r.kernel == result.kernel)
            .unwrap();
        for name in table {
            let copy = format!("{name}__cf{kernel_index}");
            assert!(
                clone.instructions().any(|i| i.opcode.as_str() == "mov.u64"
                    && i.guard.is_some()
                    && i.operands
                        .iter()
                        .any(|o| matches!(o, ptx_lexer::Operand::Symbol(s) if s == &copy))),
                "no selection of {copy}"
            );
        }
    }
    assert!(
        results.iter().any(|r| r.kernel.contains("calls_kernel")),
        "the kernel with the indirect call"
    );
    // ptxas accepts the result.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("device-runtime-indirect");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("device_calls.instrumented.ptx");
    std::fs::write(&out, module.to_ptx()).unwrap();
    for arch in ["sm_70", "sm_90"] {
        support::ptxas(&out, arch).unwrap();
    }
}

/// The byte offset `N` of a counter update `@p red.global.add.u64 [%base+N], ...`.
/// The snapshot indices of blocks that no path from their function's first block reaches
/// (none in a function with a jump table, whose targets are not edges).
fn unreachable_snapshot_blocks(
    original: &ptx_lexer::Module,
    result: &device_runtime::KernelInstrumentation,
) -> Vec<usize> {
    let mut never_run = Vec::new();
    let mut start = 0;
    while start < result.blocks.len() {
        let name = &result.blocks[start].function;
        let len = result.blocks[start..]
            .iter()
            .take_while(|b| &b.function == name)
            .count();
        if let Some(function) = original.function(name) {
            let blocks = function.blocks();
            let jump_table = function.instructions().any(|i| i.opcode.base() == "brx");
            let edges = function.edges(&blocks);
            let mut reached = vec![jump_table; blocks.len()];
            let mut stack = vec![0];
            while let Some(b) = stack.pop() {
                if b < reached.len() && !std::mem::replace(&mut reached[b], true) {
                    stack.extend(edges.iter().filter(|e| e.from == b).map(|e| e.to));
                }
            }
            never_run.extend(
                (0..len.min(blocks.len()))
                    .filter(|&b| !reached[b])
                    .map(|b| start + b),
            );
        }
        start += len;
    }
    never_run
}

fn counter_offset(i: &Instruction) -> Option<u64> {
    if i.opcode.as_str() != "red.global.add.u64" || i.guard.is_none() {
        return None;
    }
    match &i.operands[0] {
        Operand::Address(parts) => match parts.first() {
            Some(Operand::Offset { offset, .. }) => offset.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// The label a shrinking flush's slow path returns to (device-runtime's `shrinking_flush_fast`):
/// the block the flush sits in continues after it.
const RESUME: &str = "$__cf_resume";
/// The label of a shrinking flush's slow path, out of line.
const SLOW: &str = "$__cf_slow";
/// The label that ends a kernel's prologue.
const COUNTED: &str = "$__cf_counted";

/// What an update at the top of a block adds to its counter pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Update {
    /// Threads to the first counter, 1 to the second.
    Pair,
    /// 1 to the second counter only (the thread count follows by flow).
    Warps,
    /// Both counts packed into the first counter.
    Packed,
}

/// The counter pair of the update at the top of `block`, if it has one, and what it adds: the
/// last update in the counter code (instructions not from the original) that follows its label.
/// Each update and flush starts by reading the active mask: the block's own update is the last
/// (a flush of a loop that lanes leave at different times may come first, at its meeting block).
fn top_update_offset(
    function: &ptx_lexer::Function,
    block: &ptx_lexer::BasicBlock,
) -> Option<(u64, Update)> {
    let counter_code: Vec<&Instruction> = function.statements()[block.insertion_point()..]
        .iter()
        .take_while(|s| !s.is_from_source() && s.as_label().is_none_or(|l| l.starts_with(RESUME)))
        .filter_map(|s| s.as_instruction())
        .collect();
    let last = counter_code
        .iter()
        .rposition(|i| i.opcode.base() == "activemask")
        .unwrap_or(0);
    let offsets: Vec<u64> = counter_code[last..]
        .iter()
        .copied()
        .filter_map(counter_offset)
        .collect();
    match offsets[..] {
        [.., threads, warps] if warps == threads + 8 => Some((threads, Update::Pair)),
        [.., warps] if warps % 16 == 8 => Some((warps - 8, Update::Warps)),
        [.., packed] => Some((packed, Update::Packed)),
        _ => None,
    }
}

#[test]
fn every_counted_block_updates_the_counter_its_snapshot_entry_names() {
    // The mapping that makes counts exact: block i of the snapshot is counted at counter pair i,
    // and holds exactly the instructions of the PTX block that increments that pair.
    let files = corpus();
    let errors = support::parallel(&files, |file| {
        let describe = file.describe();
        let text = std::fs::read_to_string(&file.path).map_err(|e| e.to_string())?;
        let mut module = parse(text).map_err(|e| format!("{describe}: {e}"))?;
        let kernels: Vec<String> = module
            .functions()
            .filter(|f| f.kind() == FunctionKind::Entry && f.is_definition())
            .map(|f| f.name().to_string())
            .collect();
        let results =
            device_runtime::instrument_module_with_global_counters(&mut module, Default::default());
        for result in &results {
            let kernel_index = kernels.iter().position(|k| *k == result.kernel).unwrap();
            let mut start = 0;
            while start < result.blocks.len() {
                let name = &result.blocks[start].function;
                let count = result.blocks[start..]
                    .iter()
                    .take_while(|b| &b.function == name)
                    .count();
                let copy_name = if *name == result.kernel {
                    format!("{name}__cf")
                } else {
                    format!("{name}__cf{kernel_index}")
                };
                let copy = module
                    .function(&copy_name)
                    .ok_or_else(|| format!("{describe}: no {copy_name}"))?;
                // The prologue sits before the first label (clang -g starts bodies with one), so
                // it can form a block of its own: counter code only, not part of the original.
                // Flush blocks of register-counted loops (`$__cf_exit<n>`), flush code on a
                // fall-through edge and the prologue's own label (`$__cf_counted`) are counter
                // code too.
                // A shrinking flush's fast path ends in a `$__cf_resume` label inside the block
                // it sits in (its slow path returns there): the block continues after it.
                // Its branch to the slow path (`$__cf_slow`) ends a block too.
                let to_slow_path = |b: &ptx_lexer::BasicBlock| {
                    b.instructions.last().is_some_and(|&s| {
                        copy.statements()[s]
                            .as_instruction()
                            .is_some_and(|i| i.branch_targets().any(|t| t.starts_with(SLOW)))
                    })
                };
                // A prologue sunk past a guard starts right after the label of the block that
                // dominates all counting: that label heads counter code only (up to the branch
                // to `$__cf_counted`), and the block's own code follows `$__cf_counted`.
                let heads_prologue = |b: &ptx_lexer::BasicBlock| {
                    b.label.as_deref().is_some_and(|l| !l.starts_with("$__cf_"))
                        && b.instructions
                            .iter()
                            .all(|&s| !copy.statements()[s].is_from_source())
                        && b.instructions.iter().any(|&s| {
                            copy.statements()[s]
                                .as_instruction()
                                .is_some_and(|i| i.branch_targets().any(|t| t.starts_with(COUNTED)))
                        })
                };
                let mut sunk_label = None;
                let mut merged: Vec<ptx_lexer::BasicBlock> = Vec::new();
                for mut b in copy.blocks() {
                    if heads_prologue(&b) {
                        sunk_label = b.label.take();
                        continue;
                    }
                    if b.label.as_deref().is_some_and(|l| l.starts_with(COUNTED)) {
                        if let Some(label) = sunk_label.take() {
                            b.label = Some(label);
                        }
                    }
                    let resumes = b.label.as_deref().is_some_and(|l| l.starts_with(RESUME));
                    match merged.last_mut() {
                        Some(previous) if resumes || to_slow_path(previous) => {
                            previous.instructions.extend(b.instructions)
                        }
                        _ => merged.push(b),
                    }
                }
                let blocks: Vec<ptx_lexer::BasicBlock> = merged
                    .into_iter()
                    .filter(|b| {
                        b.label.as_deref().is_some_and(|l| !l.starts_with("$__cf_"))
                            || b.instructions
                                .iter()
                                .any(|&s| copy.statements()[s].is_from_source())
                    })
                    .collect();
                let flushed: std::collections::BTreeSet<u64> =
                    copy.instructions().filter_map(counter_offset).collect();
                if blocks.len() != count {
                    return Err(format!(
                        "{describe}: {copy_name} has {} blocks, snapshot {count}",
                        blocks.len()
                    ));
                }
                // Blocks of the original that no path from its entry reaches (clang -g's label
                // after the last `ret`) never run: they carry no update, their pairs stay zero.
                // Only where the graph is whole (no `brx.idx` jump tables).
                let original = module
                    .function(name)
                    .ok_or_else(|| format!("{describe}: no {name}"))?;
                let original_blocks = original.blocks();
                let edges = original.edges(&original_blocks);
                let whole = !original.instructions().any(|i| i.opcode.base() == "brx");
                let mut reached = vec![false; original_blocks.len()];
                let mut stack = vec![0usize];
                while let Some(b) = stack.pop() {
                    if b < reached.len() && !std::mem::replace(&mut reached[b], true) {
                        stack.extend(edges.iter().filter(|e| e.from == b).map(|e| e.to));
                    }
                }
                for (i, block) in blocks.iter().enumerate() {
                    let entry = &result.blocks[start + i];
                    let pair = ((start + i) * 16) as u64;
                    let never_runs = whole && !reached.get(i).copied().unwrap_or(true);
                    // Counted at its top, or else (in a register-counted loop) by a flush.
                    let offset = top_update_offset(copy, block);
                    let from_launch = (start + i == 0 && result.entry_from_launch)
                        || result.launch_counted.iter().any(|l| l.block == start + i);
                    let copied = result.copied_counts.iter().any(|&(b, _)| b == start + i);
                    let derived_by = |rules: &[(usize, usize, usize)]| {
                        rules.iter().any(|&(b, _, _)| b == start + i)
                    };
                    let threads_derived = result.thread_flows.iter().any(|f| f.block == start + i);
                    let warps_derived = derived_by(&result.warp_differences);
                    let updated_here = |pair: u64| offset.is_some_and(|(o, _)| o == pair);
                    // (A loop's flush may sit at the top of the block that follows it.)
                    let counted = if never_runs {
                        offset.is_none()
                            && !flushed.contains(&pair)
                            && !flushed.contains(&(pair + 8))
                    } else if from_launch || copied || warps_derived {
                        !updated_here(pair)
                            && !flushed.contains(&pair)
                            && !flushed.contains(&(pair + 8))
                    } else if threads_derived {
                        offset == Some((pair, Update::Warps)) && !flushed.contains(&pair)
                    } else if result.packed_counts.contains(&(start + i)) {
                        offset == Some((pair, Update::Packed)) && !flushed.contains(&(pair + 8))
                    } else {
                        offset == Some((pair, Update::Pair))
                            || (flushed.contains(&pair) && flushed.contains(&(pair + 8)))
                    };
                    if !counted {
                        return Err(format!(
                            "{describe}: {copy_name} block {i} updates offset {offset:?}, snapshot index {}",
                            start + i
                        ));
                    }
                    let opcodes: Vec<String> = block
                        .instructions
                        .iter()
                        .map(|&s| &copy.statements()[s])
                        .filter(|s| {
                            // Calls are redirected and loop exits retargeted: still the original's.
                            s.is_from_source()
                                || s.as_instruction().is_some_and(|i| {
                                    i.opcode.base() == "call"
                                        || (i.opcode.base() == "bra"
                                            && i.branch_targets()
                                                .any(|t| t.starts_with("$__cf_exit")))
                                })
                        })
                        .filter_map(|s| s.as_instruction())
                        .map(|i| i.opcode.to_string())
                        .collect();
                    let expected: Vec<String> =
                        entry.instructions.iter().map(|o| o.to_string()).collect();
                    let label = block.label.as_deref().filter(|l| !l.starts_with("$__cf_"));
                    if label != entry.label.as_deref() || opcodes != expected {
                        return Err(format!(
                            "{describe}: {copy_name} block {i} differs from its snapshot entry"
                        ));
                    }
                }
                start += count;
            }
        }
        Ok(())
    });
    assert!(
        errors.is_empty(),
        "{} failure(s):\n{}",
        errors.len(),
        errors.join("\n\n")
    );
}

#[test]
fn before_sm_70_loops_that_lanes_leave_apart_are_flushed_without_match_and_assemble() {
    // PTX of a build for an older GPU (sm_61 here: no `match.sync`, but `shfl.sync`, `vote.sync`
    // and `fns`): loops that lanes leave at different times are still counted in registers, the
    // meeting point comparing each lane's counters with the leader's. ptxas must assemble the
    // result for its own target and for a newer one. (The CPU target checks the counts:
    // wrapper's cpu_target.rs builds the loop programs for sm_61 too.)
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("device-runtime-sm61");
    std::fs::create_dir_all(&dir).unwrap();
    let errors = support::parallel(
        &["loops", "nested_loops", "induction_loops", "long_loops"],
        |name| {
            let source = support::repo_root().join(format!("corpus/{name}.cu"));
            let ptx = dir.join(format!("{name}.sm_61.ptx"));
            support::compile_with(&source, support::Compiler::Clang, "sm_61", false, &ptx)?;
            let text = std::fs::read_to_string(&ptx).map_err(|e| e.to_string())?;
            let mut module = parse(&text).map_err(|e| format!("{name}: {e}"))?;
            device_runtime::instrument_module(&mut module);
            let instrumented = module.to_ptx();
            if instrumented.contains("match.") || instrumented.contains("redux.") {
                return Err(format!("{name}: sm_61 PTX uses match.sync or redux.sync"));
            }
            let out = dir.join(format!("{name}.sm_61.instrumented.ptx"));
            std::fs::write(&out, &instrumented).map_err(|e| e.to_string())?;
            for arch in ["sm_61", "sm_90"] {
                support::ptxas(&out, arch).map_err(|e| format!("{name}: {e}"))?;
            }
            // nested_loops' per-lane `while` and induction_loops' lanes leaving through one
            // exit are such loops: the comparison with the leader's counter is there.
            let compared = instrumented.contains("setp.eq.u64 %__cfp4, %__cfrd2, %__cfc");
            if !compared && ["nested_loops", "induction_loops"].contains(name) {
                return Err(format!(
                    "{name}: no loop flushed by comparing with the leader"
                ));
            }
            Ok(())
        },
    );
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

/// The CTA counters' slot table of `module` named `table`: each slot's offset in the bank.
fn slot_table(module: &ptx_lexer::Module, table: &str) -> Option<Vec<u64>> {
    let text = module.to_ptx();
    let line = text
        .lines()
        .find(|l| l.starts_with(".global") && l.contains(&format!(" {table}[")))?;
    let list = line.split_once('{')?.1.split_once('}')?.0;
    list.split(',').map(|n| n.trim().parse().ok()).collect()
}

/// The counter adds of `function` in order, as (guard, bank offset, value): a global add names
/// its offset; a CTA add (`red.shared.add.u64 [K__cf_cta+8k]`) names slot k of `slots`.
fn adds_in_order(
    function: &ptx_lexer::Function,
    shared: &str,
    slots: &[u64],
) -> Result<Vec<(String, u64, String)>, String> {
    let mut adds = Vec::new();
    for i in function.instructions() {
        if !matches!(
            i.opcode.as_str(),
            "red.global.add.u64" | "red.shared.add.u64"
        ) {
            continue;
        }
        let guard = i.guard.as_ref().map(|g| g.to_string()).unwrap_or_default();
        let value = i.operands.get(1).map(|o| o.to_string()).unwrap_or_default();
        let Some(Operand::Address(parts)) = i.operands.first() else {
            continue;
        };
        let Some(Operand::Offset { base, offset }) = parts.first() else {
            continue;
        };
        let offset: u64 = offset.parse().map_err(|_| format!("offset {offset}"))?;
        match i.opcode.as_str() {
            "red.global.add.u64" => adds.push((guard, offset, value)),
            "red.shared.add.u64" if matches!(&**base, Operand::Symbol(s) if s == shared) => {
                let slot = slots
                    .get((offset / 8) as usize)
                    .filter(|_| offset % 8 == 0)
                    .ok_or_else(|| format!("{}: no slot at {offset}", function.name()))?;
                adds.push((guard, *slot, value));
            }
            _ => {}
        }
    }
    Ok(adds)
}

#[test]
fn cta_counters_add_what_global_counters_add() {
    // CTA counters move a kernel's adds to shared memory and flush them at the CTA's end (the
    // CPU-target witness tests check the counts). Here, on every corpus kernel: the clone with
    // CTA counters makes the same adds in the same order as the one without, each at its bank
    // offset's slot; its original code is intact; every `ret` and `exit` is reached only
    // through the exit code; and ptxas assembles it.
    let files = corpus();
    let taken = std::sync::atomic::AtomicUsize::new(0);
    let errors = support::parallel(&files, |file| {
        let describe = file.describe();
        let text = std::fs::read_to_string(&file.path).map_err(|e| e.to_string())?;
        let original = parse(text).map_err(|e| format!("{describe}: {e}"))?;
        let mut global = original.clone();
        device_runtime::instrument_module_with_global_counters(&mut global, Default::default());
        let mut module = original.clone();
        let results = device_runtime::instrument_module(&mut module);
        for result in results.iter().filter(|r| r.cta_counters) {
            taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let clone_name = result.clone.as_ref().ok_or("no clone")?;
            let shared = format!("{clone_name}_cta");
            let slots = slot_table(&module, &format!("{clone_name}_slots"))
                .ok_or_else(|| format!("{describe}: {clone_name}: no slot table"))?;
            let kernel = original.function(&result.kernel).unwrap();
            let clone = module.function(clone_name).unwrap();
            if original_code_of(clone) != kernel.instructions().cloned().collect::<Vec<_>>() {
                return Err(format!(
                    "{describe}: {clone_name}: the original code changed"
                ));
            }
            let kernel_index = original
                .functions()
                .filter(|f| f.kind() == FunctionKind::Entry && f.is_definition())
                .position(|f| f.name() == result.kernel)
                .unwrap();
            let mut names = vec![clone_name.clone()];
            for block in &result.blocks {
                let copy = format!("{}__cf{kernel_index}", block.function);
                if block.function != result.kernel && !names.contains(&copy) {
                    names.push(copy);
                }
            }
            for name in &names {
                let (Some(with), Some(without)) = (module.function(name), global.function(name))
                else {
                    return Err(format!("{describe}: no {name}"));
                };
                let moved = adds_in_order(with, &shared, &slots)?;
                let expected = adds_in_order(without, &shared, &slots)?;
                // The flush's own global adds (`[%…rd5]`, no offset) are not counter adds.
                if moved != expected || moved.is_empty() && name == clone_name {
                    return Err(format!(
                        "{describe}: {name}: adds {moved:?}, without CTA counters {expected:?}"
                    ));
                }
            }
            // Each exit follows the exit code's last label.
            let statements = clone.statements();
            for (at, s) in statements.iter().enumerate() {
                let Some(i) = s.as_instruction() else {
                    continue;
                };
                if matches!(i.opcode.base(), "ret" | "exit")
                    && (i.guard.is_some()
                        || !statements[..at]
                            .last()
                            .and_then(|p| p.as_label())
                            .is_some_and(|l| l.starts_with("$__cf_out")))
                {
                    return Err(format!("{describe}: {clone_name}: an exit skips the flush"));
                }
            }
        }
        let path = file.path.with_extension("cta.instrumented.ptx");
        std::fs::write(&path, module.to_ptx()).map_err(|e| e.to_string())?;
        for arch in file.assemble_archs() {
            support::ptxas(&path, arch).map_err(|e| format!("{describe}: {e}"))?;
        }
        Ok(())
    });
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
    // The loop programs take them.
    assert!(taken.into_inner() > 20, "too few kernels with CTA counters");
}
