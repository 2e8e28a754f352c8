//! Library side of the `cuda-flux` command (so that its pieces are testable).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ptx_lexer::{FunctionKind, Module};

/// A plain-text table of every function definition: kind, blocks, static instruction count and
/// the most frequent opcodes.
pub fn summary_table(title: &str, module: &Module) -> String {
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
    }
    out
}
