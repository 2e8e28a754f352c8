//! The `cuda-flux` command's library: reading profiles (`cuda-flux/1` JSON) and turning them into
//! reports, metrics, features, annotated PTX, HTML pages and comparisons; the PTX model printed as
//! JSON or a table. Builds without LLVM: the compiler drivers (crate `wrapper`) depend on it, for
//! [`snapshot_text`] and [`error_line`], never the other way round.

pub mod aggregate;
pub mod annotate;
pub mod compare;
pub mod consistency;
pub mod csv;
pub mod features;
pub mod html;
pub mod metric_table;
pub mod metrics;
pub mod names;
pub mod placement;
pub mod profile;
pub mod report;
pub mod rows;
pub mod snapshot_text;
pub mod stream;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ptx_lexer::{FunctionKind, Module};

/// An error as one line: its chain of causes, outermost first, joined by `: `, leaving out a
/// cause whose text the line already ends with (many errors, such as `tempfile`'s, repeat their
/// source in their own text, which `{:#}` would then print twice).
pub fn error_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// A plain-text table of every function definition: kind, blocks, static instruction count and
/// the most frequent opcodes; with `show_blocks`, each block's label, size and opcodes below it.
pub fn summary_table(title: &str, module: &Module, show_blocks: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{title}: PTX {} for {}, {} function(s)",
        module.version().unwrap_or("?"),
        module.target().join(", "),
        module.functions().filter(|f| f.is_definition()).count()
    );
    let _ = writeln!(
        out,
        "  {:<6} {:>6} {:>8}  {:<40} top opcodes",
        "kind", "blocks", "instrs", "function"
    );
    for function in module.summary().functions {
        let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
        let mut total = 0;
        for block in &function.blocks {
            for opcode in &block.instructions {
                *histogram.entry(opcode.as_str()).or_default() += 1;
                total += 1;
            }
        }
        let mut top: Vec<(&str, usize)> = histogram.into_iter().collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let top: Vec<String> = top
            .iter()
            .take(4)
            .map(|(op, n)| format!("{op} x{n}"))
            .collect();
        let kind = match function.kind {
            FunctionKind::Entry => "entry",
            FunctionKind::Func => "func",
        };
        let _ = writeln!(
            out,
            "  {:<6} {:>6} {:>8}  {:<40} {}",
            kind,
            function.blocks.len(),
            total,
            function.name,
            top.join(", ")
        );
        if show_blocks {
            for (index, block) in function.blocks.iter().enumerate() {
                let label = match (&block.label, index) {
                    (Some(label), _) => label.as_str(),
                    (None, 0) => "(entry)",
                    (None, _) => "(fall-through)",
                };
                let opcodes: Vec<&str> = block.instructions.iter().map(|o| o.as_str()).collect();
                let _ = writeln!(
                    out,
                    "      block {index:>3} {label:<16} {:>4} instrs: {}",
                    block.instructions.len(),
                    opcodes.join(" ")
                );
            }
        }
    }
    out
}
