//! `cuda-flux placement`: how the instrumentation counts each function of a PTX file, and why.
//! Per function, every natural loop with its decision (counted in registers, or the rule that
//! stopped it, [`device_runtime::placement::Rejection`]) and every block with the way its counts
//! are obtained and what its update costs each time a warp runs it. The decisions are the
//! instrumentation's own (`device_runtime::placement::explain`), for the architecture the PTX
//! targets or the one named.

use std::fmt::Write as _;

use device_runtime::placement::{
    self, BlockCounting, Decision, Explanation, LoopDecision, Placement,
};
use device_runtime::WarpReductions;
use ptx_lexer::{Function, FunctionKind, Module};
use serde_json::{json, Value};

/// What `cuda-flux placement` is asked for.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The architecture to place for (`sm_70`, `sm_90a`); `None`: the PTX's own `.target`, as
    /// the drivers do.
    pub arch: Option<String>,
    /// Only functions with this name, else those whose name contains it.
    pub function: Option<String>,
    pub placement: Placement,
}

/// Why the placement of a file cannot be explained as asked.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlacementError {
    #[error("'{0}' is not an architecture (sm_NN, as sm_70 or sm_90a)")]
    NotAnArchitecture(String),
    #[error("no function named {0:?} (nor containing it)")]
    NoSuchFunction(String),
}

/// A module's functions, each explained.
struct Explained<'m> {
    arch: String,
    reductions: Option<WarpReductions>,
    functions: Vec<(&'m Function, Explanation)>,
}

fn explained<'m>(module: &'m Module, options: &Options) -> Result<Explained<'m>, PlacementError> {
    let (arch, reductions) = match &options.arch {
        Some(arch) => {
            let digits = arch
                .strip_prefix("sm_")
                .map(|rest| rest.trim_end_matches(|c: char| c.is_ascii_lowercase()))
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
            if digits.is_none() {
                return Err(PlacementError::NotAnArchitecture(arch.clone()));
            }
            (arch.clone(), WarpReductions::for_targets(&[arch]))
        }
        None => (
            module.target().join(", "),
            WarpReductions::for_targets(module.target()),
        ),
    };
    let definitions: Vec<&Function> = module.functions().filter(|f| f.is_definition()).collect();
    let chosen: Vec<&Function> = match &options.function {
        None => definitions,
        Some(wanted) => {
            let exact: Vec<&Function> = definitions
                .iter()
                .copied()
                .filter(|f| f.name() == wanted.as_str())
                .collect();
            let chosen = if exact.is_empty() {
                definitions
                    .into_iter()
                    .filter(|f| f.name().contains(wanted.as_str()))
                    .collect()
            } else {
                exact
            };
            if chosen.is_empty() {
                return Err(PlacementError::NoSuchFunction(wanted.clone()));
            }
            chosen
        }
    };
    let functions = chosen
        .into_iter()
        .map(|f| (f, placement::explain(f, options.placement, reductions)))
        .collect();
    Ok(Explained {
        arch,
        reductions,
        functions,
    })
}

fn reductions_name(reductions: Option<WarpReductions>) -> &'static str {
    match reductions {
        Some(WarpReductions::Redux) => "redux",
        Some(WarpReductions::Shuffles) => "shuffles",
        Some(WarpReductions::ShufflesWithoutMatch) => "shuffles-without-match",
        None => "none",
    }
}

fn reductions_words(reductions: Option<WarpReductions>) -> &'static str {
    match reductions {
        Some(WarpReductions::Redux) => "redux.sync",
        Some(WarpReductions::Shuffles) => "match.sync and shuffles",
        Some(WarpReductions::ShufflesWithoutMatch) => {
            "shuffles, comparing counters with the leader's (no match.sync)"
        }
        None => "none: loops that lanes leave at different times are counted at their blocks",
    }
}

fn kind_name(function: &Function) -> &'static str {
    match function.kind() {
        FunctionKind::Entry => "kernel",
        _ => "function",
    }
}

/// Each block's label, `None` where it has none.
fn labels(function: &Function) -> Vec<Option<String>> {
    function
        .blocks()
        .into_iter()
        .map(|b| b.label.map(|l| l.to_string()))
        .collect()
}

/// `block 3 ($L__BB0_3)`, `block 0 (entry)` or `block 4 (fall-through)`.
fn block_name(labels: &[Option<String>], b: usize) -> String {
    match labels.get(b) {
        Some(Some(label)) => format!("block {b} ({label})"),
        _ if b == 0 => "block 0 (entry)".to_string(),
        _ => format!("block {b} (fall-through)"),
    }
}

/// `3-5, 7`.
fn ranges(blocks: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < blocks.len() {
        let mut j = i;
        while j + 1 < blocks.len() && blocks[j + 1] == blocks[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            blocks[i].to_string()
        } else {
            format!("{}-{}", blocks[i], blocks[j])
        });
        i = j + 1;
    }
    parts.join(", ")
}

/// Per block, the header of the innermost natural loop that holds it.
fn innermost_loops(blocks: usize, loops: &[LoopDecision]) -> Vec<Option<usize>> {
    (0..blocks)
        .map(|b| {
            loops
                .iter()
                .filter(|l| l.blocks.binary_search(&b).is_ok())
                .min_by_key(|l| l.blocks.len())
                .map(|l| l.header)
        })
        .collect()
}

fn decision_name(decision: &Decision) -> &'static str {
    match decision {
        Decision::Region {
            shrinking_to: None, ..
        } => "region",
        Decision::Region { .. } => "shrinking-region",
        Decision::Enclosed => "enclosed",
        Decision::Rejected(_) => "rejected",
        Decision::FromLaunch => "from-launch",
    }
}

fn counting_name(counting: BlockCounting) -> &'static str {
    match counting {
        BlockCounting::Unreachable => "unreachable",
        BlockCounting::FromLaunch => "from-launch",
        BlockCounting::LaunchConditions { .. } => "launch-conditions",
        BlockCounting::LaunchLoop { .. } => "launch-loop",
        BlockCounting::Copied { .. } => "copied",
        BlockCounting::Flushed { .. } => "flushed",
        BlockCounting::Difference { .. } => "difference",
        BlockCounting::WarpUpdate => "warp-update",
        BlockCounting::PackedUpdate => "packed-update",
        BlockCounting::FullUpdate => "full-update",
    }
}

/// The decision in words.
fn decision_words(l: &LoopDecision, name: &dyn Fn(usize) -> String) -> String {
    match &l.decision {
        Decision::Region {
            shrinking_to,
            nested,
            counter_registers,
            induction_counters,
            divergent_blocks,
        } => {
            let mut text = match (nested, l.enclosing_region) {
                (true, Some(outer)) => format!(
                    "nested region (in a divergent part of the region at {})",
                    name(outer)
                ),
                (true, None) => "nested region".to_string(),
                (false, _) => "region".to_string(),
            };
            if let Some(meeting) = shrinking_to {
                let _ = write!(
                    text,
                    ", lanes leave at different times and meet at {}",
                    name(*meeting)
                );
            }
            let _ = write!(
                text,
                "; {counter_registers} counter register{}",
                plural(*counter_registers)
            );
            match induction_counters {
                0 => {}
                1 => text.push_str(" (1 read off an induction variable)"),
                n => {
                    let _ = write!(text, " ({n} read off induction variables)");
                }
            }
            match divergent_blocks[..] {
                [] => {}
                [b] => {
                    let _ = write!(
                        text,
                        "; block {b} lies between a divergent branch and its join: counted at its top"
                    );
                }
                _ => {
                    let _ = write!(
                        text,
                        "; blocks {} lie between a divergent branch and its join: counted at their tops",
                        ranges(divergent_blocks)
                    );
                }
            }
            text
        }
        Decision::Enclosed => match l.enclosing_region {
            Some(region) => format!("part of the region at {}", name(region)),
            None => "part of an enclosing region".to_string(),
        },
        Decision::Rejected(reason) => match l.enclosing_region {
            Some(outer) => format!(
                "counted at its blocks (in a divergent part of the region at {}): {}",
                name(outer),
                reason.describe(name)
            ),
            None => format!("counted at its blocks: {}", reason.describe(name)),
        },
        Decision::FromLaunch => "from the launch: its trips follow from an induction register \
             stepped by a launch value and tested against one (no counter code)"
            .to_string(),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// How a block is counted, in words, with the cost of its update per warp execution.
fn counting_words(counting: BlockCounting, name: &dyn Fn(usize) -> String) -> String {
    let cost = counting.update_cost();
    let update = |what: &str| {
        format!(
            "{what} at its top: {} instructions, {} reduction{} per warp",
            cost.instructions,
            cost.reductions,
            plural(cost.reductions)
        )
    };
    match counting {
        BlockCounting::Unreachable => "unreachable: never runs, no code".to_string(),
        BlockCounting::FromLaunch => "from the launch (runs once per thread): no code".to_string(),
        BlockCounting::LaunchConditions { conditions } => format!(
            "from the launch (the threads whose indices and parameters pass {conditions} \
             branch{}): no code",
            if conditions == 1 { "" } else { "es" }
        ),
        BlockCounting::LaunchLoop { conditions } => format!(
            "from the launch (a loop the threads whose indices and parameters pass \
             {conditions} branch{} enter, its trips from its induction register): no code",
            if conditions == 1 { "" } else { "es" }
        ),
        BlockCounting::Copied { from } => format!("copied from {}: no code", name(from)),
        BlockCounting::Flushed { region } => {
            format!("flushed by the region at {}", name(region))
        }
        BlockCounting::Difference { branch, sibling } => format!(
            "{} minus {} (a side of a warp-uniform branch): no code",
            name(branch),
            name(sibling)
        ),
        BlockCounting::WarpUpdate => update("warp update (threads by flow conservation)"),
        BlockCounting::PackedUpdate => update("packed update"),
        BlockCounting::FullUpdate => update("full update"),
    }
}

/// The placement of `module`'s functions as text; `title` names the file.
pub fn text(title: &str, module: &Module, options: &Options) -> Result<String, PlacementError> {
    let explained = explained(module, options)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{title}: {} (warp reductions: {}), placement {}",
        explained.arch,
        reductions_words(explained.reductions),
        options.placement.name()
    );
    for (function, explanation) in &explained.functions {
        let labels = labels(function);
        let name = |b: usize| block_name(&labels, b);
        let _ = writeln!(
            out,
            "\n{} {}: {} blocks, {} loop{}, {} counter register{}",
            kind_name(function),
            function.name(),
            explanation.blocks.len(),
            explanation.loops.len(),
            plural(explanation.loops.len()),
            explanation.counter_registers,
            plural(explanation.counter_registers)
        );
        for l in &explanation.loops {
            let _ = writeln!(
                out,
                "  loop at {} (blocks {}; depth {}): {}",
                name(l.header),
                ranges(&l.blocks),
                l.depth,
                decision_words(l, &name)
            );
        }
        let innermost = innermost_loops(explanation.blocks.len(), &explanation.loops);
        let sizes: Vec<usize> = function
            .blocks()
            .iter()
            .map(|b| b.instructions.len())
            .collect();
        for (b, counting) in explanation.blocks.iter().enumerate() {
            let place = match labels.get(b) {
                Some(Some(label)) => label.clone(),
                _ if b == 0 => "(entry)".to_string(),
                _ => "(fall-through)".to_string(),
            };
            let in_loop = innermost[b]
                .map(|h| format!(" [loop {h}]"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {b:>4} {place:<24} {:>4} instr  {}{in_loop}",
                sizes.get(b).copied().unwrap_or(0),
                counting_words(*counting, &name)
            );
        }
    }
    Ok(out)
}

/// The placement of `module`'s functions as JSON (layout in docs/placement.md).
pub fn json(title: &str, module: &Module, options: &Options) -> Result<Value, PlacementError> {
    let explained = explained(module, options)?;
    let functions: Vec<Value> = explained
        .functions
        .iter()
        .map(|(function, explanation)| {
            let labels = labels(function);
            let name = |b: usize| block_name(&labels, b);
            let innermost = innermost_loops(explanation.blocks.len(), &explanation.loops);
            let sizes: Vec<usize> = function
                .blocks()
                .iter()
                .map(|b| b.instructions.len())
                .collect();
            let loops: Vec<Value> = explanation
                .loops
                .iter()
                .map(|l| {
                    let mut entry = json!({
                        "header": l.header,
                        "label": labels.get(l.header).cloned().flatten(),
                        "blocks": l.blocks,
                        "depth": l.depth,
                        "enclosing_region": l.enclosing_region,
                        "decision": decision_name(&l.decision),
                        "text": decision_words(l, &name),
                    });
                    match &l.decision {
                        Decision::Region {
                            shrinking_to,
                            nested,
                            counter_registers,
                            induction_counters,
                            divergent_blocks,
                        } => {
                            entry["shrinking_to"] = json!(shrinking_to);
                            entry["nested"] = json!(nested);
                            entry["counter_registers"] = json!(counter_registers);
                            entry["induction_counters"] = json!(induction_counters);
                            entry["divergent_blocks"] = json!(divergent_blocks);
                        }
                        Decision::Rejected(reason) => {
                            entry["rule"] = json!(reason.rule());
                            entry["reason"] = json!(reason.describe(&name));
                        }
                        Decision::Enclosed | Decision::FromLaunch => {}
                    }
                    entry
                })
                .collect();
            let blocks: Vec<Value> = explanation
                .blocks
                .iter()
                .enumerate()
                .map(|(b, &counting)| {
                    let cost = counting.update_cost();
                    let mut entry = json!({
                        "index": b,
                        "label": labels.get(b).cloned().flatten(),
                        "instructions": sizes.get(b).copied().unwrap_or(0),
                        "counting": counting_name(counting),
                        "update_instructions": cost.instructions,
                        "update_reductions": cost.reductions,
                        "loop": innermost[b],
                    });
                    match counting {
                        BlockCounting::Copied { from } => entry["from"] = json!(from),
                        BlockCounting::LaunchConditions { conditions }
                        | BlockCounting::LaunchLoop { conditions } => {
                            entry["conditions"] = json!(conditions)
                        }
                        BlockCounting::Flushed { region } => entry["region"] = json!(region),
                        BlockCounting::Difference { branch, sibling } => {
                            entry["branch"] = json!(branch);
                            entry["sibling"] = json!(sibling);
                        }
                        _ => {}
                    }
                    entry
                })
                .collect();
            json!({
                "name": function.name(),
                "kind": kind_name(function),
                "counter_registers": explanation.counter_registers,
                "loops": loops,
                "blocks": blocks,
            })
        })
        .collect();
    Ok(json!({
        "file": title,
        "arch": explained.arch,
        "warp_reductions": reductions_name(explained.reductions),
        "placement": options.placement.name(),
        "functions": functions,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_lists_print_as_ranges() {
        assert_eq!(ranges(&[3, 4, 5, 7, 9, 10]), "3-5, 7, 9-10");
        assert_eq!(ranges(&[]), "");
    }

    #[test]
    fn an_architecture_must_be_sm_and_a_number() {
        let module = ptx_lexer::parse(
            ".version 7.8\n.target sm_70\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n",
        )
        .unwrap();
        for bad in ["sm70", "sm_", "compute_70", "sm_7x0"] {
            let options = Options {
                arch: Some(bad.into()),
                ..Options::default()
            };
            assert_eq!(
                text("t", &module, &options).unwrap_err(),
                PlacementError::NotAnArchitecture(bad.into())
            );
        }
        for good in ["sm_50", "sm_90a"] {
            let options = Options {
                arch: Some(good.into()),
                ..Options::default()
            };
            assert!(text("t", &module, &options).is_ok());
        }
        let options = Options {
            function: Some("nothing".into()),
            ..Options::default()
        };
        assert_eq!(
            text("t", &module, &options).unwrap_err(),
            PlacementError::NoSuchFunction("nothing".into())
        );
    }
}
