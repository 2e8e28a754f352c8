//! `cuda-flux-pass`: the LLVM side of cuda-flux, run in process through inkwell.
//!
//! - [`kernels`]: the kernels of clang's device IR (the functions emitted as `.entry`).
//! - [`host`]: the host pass on clang's host IR (clone registration, snapshots, launches routed
//!   through the host runtime) and in-process object emission.

pub mod host;

use std::path::Path;

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{BasicMetadataValueEnum, FunctionValue};
use thiserror::Error;

/// Why device IR could not be read.
#[derive(Debug, Error)]
pub enum PassError {
    #[error("cannot read LLVM IR from {path}: {message}")]
    Read { path: String, message: String },
    #[error("host pass: {0}")]
    Host(String),
}

/// Reads an LLVM module from textual IR (`.ll`) or bitcode (`.bc`).
pub fn read_module<'ctx>(context: &'ctx Context, path: &Path) -> Result<Module<'ctx>, PassError> {
    let error = |message: String| PassError::Read {
        path: path.display().to_string(),
        message,
    };
    let buffer = inkwell::memory_buffer::MemoryBuffer::create_from_file(path)
        .map_err(|e| error(e.to_string()))?;
    context
        .create_module_from_ir(buffer)
        .map_err(|e| error(e.to_string()))
}

/// The kernels of an NVPTX device module, in module order: functions marked `kernel` in
/// `!nvvm.annotations` (what clang 16 emits) or with the `ptx_kernel` calling convention.
pub fn kernels<'ctx>(module: &Module<'ctx>) -> Vec<FunctionValue<'ctx>> {
    const PTX_KERNEL_CALLING_CONVENTION: u32 = 71;
    let mut annotated = Vec::new();
    for node in module.get_global_metadata("nvvm.annotations") {
        let operands = node.get_node_values();
        let is_kernel_entry = operands.get(1).is_some_and(|v| {
            v.is_metadata_value()
                && v.into_metadata_value()
                    .get_string_value()
                    .map(|s| s.to_bytes())
                    == Some(b"kernel")
        }) && operands.get(2).is_some_and(|v| match v {
            BasicMetadataValueEnum::IntValue(i) => i.get_zero_extended_constant() == Some(1),
            _ => false,
        });
        if let Some(BasicMetadataValueEnum::PointerValue(p)) =
            operands.first().filter(|_| is_kernel_entry)
        {
            annotated.push(p.get_name().to_owned());
        }
    }
    module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0)
        .filter(|f| {
            f.get_call_conventions() == PTX_KERNEL_CALLING_CONVENTION
                || annotated.iter().any(|n| n.as_c_str() == f.get_name())
        })
        .collect()
}
