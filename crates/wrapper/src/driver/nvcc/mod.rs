//! `cuda-flux-nvcc`: nvcc's command line translated to the instrumenting pipeline, so that
//! Makefiles written for nvcc build instrumented programs by swapping the compiler.
//!
//! Compatibility shims (documented in docs/nvcc.md):
//! - a prelude header (`include/cuda_flux_nvcc.h`) with host `min`/`max` overloads and `<time.h>`;
//! - `-Wno-c++11-narrowing` (nvcc warns about narrowing in brace initialisers, clang errors) and
//!   `-Wno-reserved-user-defined-literal` (`"text"MACRO` reads as a literal then a macro, as with
//!   nvcc, instead of an error);
//! - device code optimised at `-O3` unless `-O`/`-G` says otherwise, as nvcc does;
//! - architectures the toolchain no longer supports map to the oldest supported one, with one note
//!   per build (`once_per_build`);
//! - launch chevrons written with spaces (`<< <`, `>> >`) are joined (`chevrons.rs`);
//! - deprecation warnings come from the host compilation only (`-Xarch_device
//!   -Wno-deprecated-declarations`), once per source as with nvcc, not once per architecture;
//!   `register` is accepted silently (`-Wno-deprecated-register`), as nvcc does in kernels.

use std::path::PathBuf;

use thiserror::Error;

use super::args::DriverArgs;

mod build_notes;
pub mod options;
mod parse;
mod prefix;
mod preprocess;

pub use build_notes::once_per_build;
pub use options::help_text;
pub use parse::parse_nvcc;
pub use prefix::{write_prefix, PREFIX_SCRIPT_MARK};

/// The compatibility prelude force-included before every CUDA source.
pub const PRELUDE: &str = include_str!("../../../include/cuda_flux_nvcc.h");

/// The oldest architecture clang-16 with CUDA 11.8 supports without deprecation warnings.
pub const OLDEST_ARCH: u32 = 50;

/// The architectures the pipeline builds (clang-16 and ptxas 11.8 both accept each; checked
/// one by one), as `--help` and `--list-gpu-code` name them. Older ones are accepted and built
/// as `OLDEST_ARCH`, but not listed: configure scripts (SHOC's) derive a `-gencode` for every
/// `compute_NN` in `nvcc --help`, and each listed one is a device compilation per source.
/// `sm_90a` is missing: clang-16 rejects it.
pub const SUPPORTED_ARCHS: &[u32] = &[50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90];

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvccInvocation {
    /// Build (compile and/or link) with the driver; `notes` go to stderr once per build.
    Build {
        args: Box<DriverArgs>,
        notes: Vec<String>,
        /// `-dryrun`: print the commands, run nothing.
        dry_run: bool,
    },
    /// `--version`.
    Version,
    /// `--help`, `-h`: the text of `help_text`.
    Help,
    /// `--list-gpu-arch` (`compute_XX`, `virtual: true`) or `--list-gpu-code` (`sm_XX`): one
    /// supported architecture per line, as nvcc prints them.
    ListArchs { virtual_archs: bool },
    /// `-E` (to `output`, or stdout) and `-cuda` (to `<source>.cpp.ii`): the host side of each
    /// CUDA source, preprocessed by clang (what nvcc's front end would compile).
    Preprocess {
        args: Box<DriverArgs>,
        output: PreprocessOutput,
    },
    /// `--cuda-flux-prefix=DIR`: write a CUDA-like directory for Makefiles that take the whole
    /// toolkit's location (`CUDA_DIR=DIR`), see `write_prefix`.
    Prefix(PathBuf),
}

/// Where `Preprocess` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreprocessOutput {
    /// `-E`: `-o` or stdout.
    Stdout,
    /// `-cuda`: `<source file name>.cpp.ii` in the current directory, or `-o`.
    CppIi,
}

/// A command line cuda-flux-nvcc cannot honour: one line naming the problem.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum NvccError {
    #[error("unknown option '{0}'")]
    Unknown(String),
    #[error("option '{0}' needs a value")]
    MissingValue(String),
    #[error("'{value}' is not a valid value for {option}")]
    BadValue { option: String, value: String },
    #[error("option '{0}' is not supported by cuda-flux-nvcc ({1})")]
    Unsupported(String, &'static str),
    #[error("no input files")]
    NoInputs,
    #[error(
        "don't know what to do with '{0}' (nvcc's inputs: .cu, .c, .cc, .cpp, .cxx, .o, .a, .so)"
    )]
    UnknownInput(String),
}
