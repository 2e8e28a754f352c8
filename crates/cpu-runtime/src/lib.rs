//! `cpu-runtime`: the CUDA runtime API on the CPU — cuda-flux's CPU target.
//!
//! A program built for the CPU target links `libcpu_runtime.a` instead of `cudart_static`.
//! The archive carries:
//!
//! - the registration entry points clang's host code calls (`__cudaRegisterFatBinary` with a
//!   [`ptx_sim::image`] instead of a fat binary, `__cudaRegisterFunction`, `__cudaRegisterVar`,
//!   ...) and the CUDA runtime API calls the corpus, the benchmarks and the host runtime use
//!   (module `api`, C ABI, CUDA 11.8 signatures);
//! - the host runtime (`host-runtime`, linked in as an rlib, so one archive holds one copy of
//!   std), whose `__cuda_flux_*` entry points the instrumented program calls and which in turn
//!   calls this crate's CUDA API.
//!
//! Device memory is host memory ([`memory`]); kernels run in `ptx-sim` at call time on
//! `CUDA_FLUX_CPU_THREADS` host threads ([`config`]); the emulated device is described in
//! [`device`]; `CUDA_FLUX_CPU_STATS` asks for per-kernel execution statistics ([`stats`]).
//! A kernel fault prints one line, `cuda-flux cpu: <error>`, and ends the process
//! with status 1 without running exit handlers. See README.md.

// Linked for its exported `__cuda_flux_*` entry points, which nothing here calls.
extern crate host_runtime as _;

/// The CUDA structs, defined once in host-runtime (which calls the real cudart with them).
pub use host_runtime::abi;
pub mod config;
pub mod device;
pub mod error;
pub mod memory;
pub mod registry;
pub mod stats;

mod api;
mod arrays;
mod error_table;
mod libraries;
mod runtime;
