//! A serializable summary of a module: functions, blocks and their opcodes.
//! This is what `cuda-flux ptx FILE.ptx` prints.

use serde::Serialize;
use smol_str::SmolStr;

use crate::instruction::Opcode;
use crate::module::{Function, FunctionKind, Module};

/// `{"functions": [...]}`: every function definition of the module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleSummary {
    pub functions: Vec<FunctionSummary>,
}

/// One function definition with its blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FunctionSummary {
    pub name: SmolStr,
    pub kind: FunctionKind,
    pub blocks: Vec<BlockSummary>,
}

/// One basic block: its label (`null` for a fall-through block) and its opcodes in order,
/// without guards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockSummary {
    pub label: Option<SmolStr>,
    pub instructions: Vec<Opcode>,
}

impl Function {
    /// Each basic block's label and opcodes, in layout order.
    pub fn block_summaries(&self) -> Vec<BlockSummary> {
        let statements = self.statements();
        self.blocks()
            .into_iter()
            .map(|b| BlockSummary {
                label: b.label,
                instructions: b
                    .instructions
                    .iter()
                    .filter_map(|&i| statements[i].as_instruction())
                    .map(|i| i.opcode.clone())
                    .collect(),
            })
            .collect()
    }
}

impl Module {
    /// The summary of every function definition (declarations have no blocks and are left out).
    pub fn summary(&self) -> ModuleSummary {
        let functions = self
            .functions()
            .filter(|f| f.is_definition())
            .map(|f| FunctionSummary {
                name: SmolStr::new(f.name()),
                kind: f.kind(),
                blocks: f.block_summaries(),
            })
            .collect();
        ModuleSummary { functions }
    }
}
