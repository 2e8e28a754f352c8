//! `host-runtime`: linked into instrumented programs as a static library (with `cudart_static`).
//!
//! The compiler's host pass makes the program call these C functions (module `exports`):
//!
//! * `__cuda_flux_register_kernel(original_stub, clone_stub, snapshot_json, len)`, once per
//!   instrumented kernel and architecture, from the module's registration function;
//! * `__cuda_flux_launch_kernel(...)` instead of `cudaLaunchKernel` (same arguments): for a
//!   registered kernel it launches the instrumented clone with a counter buffer from a
//!   per-device pool and queues an asynchronous read-back; any other launch is forwarded;
//! * likewise, with the same arguments, `__cuda_flux_launch_kernel_ptsz` instead of
//!   `cudaLaunchKernel_ptsz` (per-thread default stream), `__cuda_flux_launch_cooperative_kernel`
//!   instead of `cudaLaunchCooperativeKernel` and `__cuda_flux_launch_cooperative_kernel_ptsz`
//!   instead of `cudaLaunchCooperativeKernel_ptsz`. The clone is launched, and a launch
//!   forwarded, through the call the program made (a cooperative launch stays cooperative). For
//!   the `_ptsz` forms, stream 0 is the per-thread default stream, so the runtime's own work for
//!   the launch (clearing, read-back, event) goes to `cudaStreamPerThread`; the profile records
//!   the stream value as the program passed it. `__cuda_flux_launch_kernel_ex_c(_ptsz)` replace
//!   `cudaLaunchKernelExC(_ptsz)` (what `cudaLaunchKernelEx` calls): grid, block, shared bytes
//!   and stream come from the `cudaLaunchConfig_t`, and its launch attributes go unchanged to
//!   the same call for the clone.
//! * `__cuda_flux_device_reset()` instead of `cudaDeviceReset`: harvest and write the profile,
//!   then reset.
//!
//! At exit, every pending read-back is harvested (banks folded into per-block counts, per-block
//! counts into per-opcode counts) and the profile is written as JSON (schema `cuda-flux/1`, see
//! `docs/output.md`). Without a usable GPU every launch is forwarded unchanged to
//! the CUDA call it was made with and nothing is written.
//!
//! The logic lives in safe, tested modules; the CUDA calls sit behind a trait (`cuda::Cuda`)
//! whose real implementation (`ffi`) is the only place that talks to `cudart`.

pub mod abi;
pub mod config;
pub mod counts;
pub mod from_launch;
pub mod output;
pub mod report;
pub mod snapshot;

mod args;
mod cuda;
mod runtime;

#[cfg(not(test))]
mod exports;
#[cfg(not(test))]
mod ffi;

pub use counts::fold_banks;

/// CUDA's `dim3`, passed by value as in `cudaLaunchKernel`.
pub use abi::Dim3;
