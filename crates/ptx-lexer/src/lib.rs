//! `ptx-lexer`: the PTX model of cuda-flux.
//!
//! - [`lexer`]: a `logos` tokenizer that keeps every byte (trivia included).
//! - [`parse`]: tokens to a typed [`Module`] of functions, statements and [`Instruction`]s,
//!   with errors that carry line, column and the offending token.
//! - [`Function::blocks`]: the basic-block model the profiler counts.
//! - [`Module::to_ptx`]: printing; byte-for-byte identical to the input when nothing changed.
//! - [`declaration`]: typed views of variable and parameter declarations, call prototypes, and
//!   PTX literals.
//! - [`rewrite`]: cloning functions, adding parameters and registers, inserting code at the top
//!   of blocks and splitting edges.
//!
//! ```
//! let ptx = ".version 7.8\n.target sm_70\n.address_size 64\n\
//!            .visible .entry k()\n{\n\tret;\n}\n";
//! let module = ptx_lexer::parse(ptx).unwrap();
//! assert_eq!(module.to_ptx(), ptx);
//! let k = module.function("k").unwrap();
//! assert_eq!(k.blocks().len(), 1);
//! ```

pub mod blocks;
pub mod declaration;
pub mod error;
pub mod instruction;
pub mod lexer;
pub mod module;
mod parser;
mod print;
pub mod rewrite;
pub mod summary;

pub use blocks::{immediate_dominators, BasicBlock, Edge, EdgeKind};
pub use declaration::{CallPrototype, Declaration, DeclarationError, ElementType, InitElement};
pub use error::ParseError;
pub use instruction::{
    DataType, Guard, Instruction, InstructionFacts, Opcode, Operand, StateSpace,
};
pub use module::{
    Directive, Function, FunctionAttribute, FunctionKind, Item, Module, Param, RegDeclaration,
    RegName, Statement, StatementKind,
};
pub use parser::parse;
pub use rewrite::RewriteError;
pub use summary::{BlockSummary, FunctionSummary, ModuleSummary};
