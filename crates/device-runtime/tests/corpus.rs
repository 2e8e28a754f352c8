//! The counter code on real compiler output: every kernel of the corpus, compiled by clang-16
//! and nvcc for sm_70 and sm_90, gets an instrumented clone that ptxas must assemble. The clone
//! keeps the original's blocks and instructions, with exactly one update per block.

#[path = "../../ptx-lexer/tests/support/mod.rs"]
mod support;

use ptx_lexer::{parse, FunctionKind, Instruction};

fn original_instructions(f: &ptx_lexer::Function) -> Vec<Instruction> {
    f.instructions().cloned().collect()
}

#[test]
fn every_corpus_kernel_instruments_and_assembles() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("device-runtime-corpus");
    let files = support::generate_corpus_ptx(&dir);
    let errors = support::parallel(&files, |file| {
        let describe = file.describe();
        let text = std::fs::read_to_string(&file.path).map_err(|e| e.to_string())?;
        let mut module = parse(text).map_err(|e| format!("{describe}: {e}"))?;
        let kernels: Vec<String> = module
            .functions()
            .filter(|f| f.kind() == FunctionKind::Entry && f.is_definition())
            .map(|f| f.name().to_string())
            .collect();
        if kernels.is_empty() {
            return Err(format!("{describe}: no kernels"));
        }
        for name in &kernels {
            let original = module.function(name).unwrap();
            let original_blocks = original.blocks().len();
            let original_code = original_instructions(original);
            let clone_name = format!("{name}__cf");
            let clone = module
                .clone_function(name, &clone_name)
                .map_err(|e| format!("{describe}: {e}"))?;
            let counted = device_runtime::instrument_kernel(clone).map_err(|e| format!("{describe}: {e}"))?;
            if counted != original_blocks as u64 {
                return Err(format!("{describe}: {name}: {counted} counted of {original_blocks} blocks"));
            }
            // Same blocks; the clone's instructions are the original's plus the counter code,
            // and the counter code is all the clone adds: one `red` pair per block.
            let clone = module.function(&clone_name).unwrap();
            if clone.blocks().len() != original_blocks {
                return Err(format!("{describe}: {name}: instrumenting changed the block count"));
            }
            let reds = clone
                .instructions()
                .filter(|i| i.opcode.as_str() == "red.global.add.u64")
                .count();
            let original_reds = original_code
                .iter()
                .filter(|i| i.opcode.as_str() == "red.global.add.u64")
                .count();
            if reds - original_reds != 2 * original_blocks {
                return Err(format!("{describe}: {name}: {reds} counter updates for {original_blocks} blocks"));
            }
            let without_counters: Vec<Instruction> = clone
                .statements()
                .iter()
                .filter(|s| s.is_from_source())
                .filter_map(|s| s.as_instruction().cloned())
                .collect();
            if without_counters != original_code {
                return Err(format!("{describe}: {name}: the original instructions changed"));
            }
        }
        let path = file.path.with_extension("instrumented.ptx");
        std::fs::write(&path, module.to_ptx()).map_err(|e| e.to_string())?;
        for arch in file.assemble_archs() {
            support::ptxas(&path, arch).map_err(|e| format!("{describe}: {e}"))?;
        }
        Ok(())
    });
    assert!(errors.is_empty(), "{} failure(s):\n{}", errors.len(), errors.join("\n\n"));
}
