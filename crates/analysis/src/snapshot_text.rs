//! What a snapshot records beyond opcodes, for `cuda-flux annotate` and `cuda-flux html`: each
//! counted block's instructions as PTX text, and the `.loc` source lines they were compiled from
//! (see `docs/output.md`, fields `text`, `lines` and `files`).
//!
//! The driver calls [`describe_blocks`] on the PTX it instrumented: the original functions are
//! still there, unchanged, beside their counting clones, so the snapshot's blocks (taken from
//! the same functions, in layout order) line up with [`ptx_lexer::Function::blocks`].

use std::collections::BTreeMap;

use host_runtime::snapshot::Block;
use ptx_lexer::{Directive, Module, StatementKind};

/// Fills `text` and `lines` of `blocks` from `module`, and returns the module's `.file` table
/// when at least one block got line information (empty otherwise, so that builds without
/// `-lineinfo` add nothing but the text).
///
/// A block that does not match the PTX (different opcodes, a function that is not in the
/// module) is left as it is: a snapshot without text is still a valid snapshot, while a wrong
/// text would mislead.
pub fn describe_blocks(module: &Module, blocks: &mut [Block]) -> BTreeMap<u32, String> {
    let mut any_lines = false;
    let mut start = 0;
    while start < blocks.len() {
        // The blocks of one function are consecutive (kernel first, then each callee).
        let name = blocks[start].function.clone();
        let end = start
            + blocks[start..]
                .iter()
                .take_while(|b| b.function == name)
                .count();
        if let Some(function) = module.function(&name) {
            let statements = function.statements();
            // The `.loc` in force at every statement: the last one before it in the body.
            let mut current = (0u32, 0u32);
            let loc_at: Vec<(u32, u32)> = statements
                .iter()
                .map(|statement| {
                    if let StatementKind::Directive(Directive::Loc { file, line, .. }) =
                        statement.kind()
                    {
                        current = (*file, *line);
                    }
                    current
                })
                .collect();
            for (block, ptx) in blocks[start..end].iter_mut().zip(function.blocks()) {
                let instructions: Vec<_> = ptx
                    .instructions
                    .iter()
                    .filter_map(|&i| statements.get(i).and_then(|s| s.as_instruction()))
                    .collect();
                let same = instructions.len() == block.instructions.len()
                    && instructions
                        .iter()
                        .zip(&block.instructions)
                        .all(|(i, op)| i.opcode.as_str() == op);
                if !same {
                    continue;
                }
                block.text = instructions.iter().map(|i| i.to_string()).collect();
                let mut runs: Vec<[u32; 3]> = Vec::new();
                for &(file, line) in ptx.instructions.iter().filter_map(|&i| loc_at.get(i)) {
                    match runs.last_mut() {
                        Some(run) if run[0] == file && run[1] == line => run[2] += 1,
                        _ => runs.push([file, line, 1]),
                    }
                }
                if runs.iter().any(|run| run[0] != 0) {
                    any_lines = true;
                    block.lines = runs;
                }
            }
        }
        start = end;
    }
    if any_lines {
        module
            .files()
            .map(|(index, name)| (index, name.to_string()))
            .collect()
    } else {
        BTreeMap::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = r#"
.version 7.8
.target sm_70
.address_size 64
.file 1 "/src/k.cu"

.visible .entry k(.param .u32 k_param_0)
{
	.reg .pred %p<2>;
	.reg .b32 %r<3>;

	ld.param.u32 %r1, [k_param_0];
	.loc 1 4 3
	mov.u32 %r2, %tid.x;
	setp.ge.s32 %p1, %r2, %r1;
	@%p1 bra $L__BB0_2;
	.loc 1 5 5
	add.s32 %r2, %r2, 1;
$L__BB0_2:
	.loc 1 6 1
	ret;
}
"#;

    fn block(label: Option<&str>, ops: &[&str]) -> Block {
        Block {
            function: "k".into(),
            label: label.map(str::to_owned),
            instructions: ops.iter().map(|s| s.to_string()).collect(),
            ..Block::default()
        }
    }

    #[test]
    fn text_and_line_runs_per_block() {
        let module = ptx_lexer::parse(PTX).unwrap();
        let mut blocks = vec![
            block(None, &["ld.param.u32", "mov.u32", "setp.ge.s32", "bra"]),
            block(None, &["add.s32"]),
            block(Some("$L__BB0_2"), &["ret"]),
        ];
        let files = describe_blocks(&module, &mut blocks);
        assert_eq!(files[&1], "/src/k.cu");
        assert_eq!(blocks[0].text[3], "@%p1 bra $L__BB0_2;");
        assert_eq!(blocks[0].lines, [[0, 0, 1], [1, 4, 3]]);
        // The `.loc` before a block's first instruction is in force across the boundary.
        assert_eq!(blocks[1].lines, [[1, 5, 1]]);
        assert_eq!(blocks[2].lines, [[1, 6, 1]]);
        assert_eq!(blocks[2].text, ["ret;"]);
    }

    #[test]
    fn blocks_that_do_not_match_are_left_alone() {
        let module = ptx_lexer::parse(PTX).unwrap();
        let mut blocks = vec![block(None, &["ld.param.u32", "ret"])];
        assert!(describe_blocks(&module, &mut blocks).is_empty());
        assert!(blocks[0].text.is_empty() && blocks[0].lines.is_empty());
        let mut other = vec![Block {
            function: "missing".into(),
            ..block(None, &["ret"])
        }];
        assert!(describe_blocks(&module, &mut other).is_empty());
    }
}
