//! The CUDA runtime calls the runtime makes, behind a trait: the real implementation calls
//! `cudart` (module `ffi`); tests substitute a simulated device.

use std::ffi::c_void;

use crate::Dim3;

/// A `cudaError_t`.
pub(crate) type Code = i32;
/// `cudaSuccess`.
pub(crate) const SUCCESS: Code = 0;
/// `cudaStreamCaptureModeRelaxed`.
pub(crate) const CAPTURE_MODE_RELAXED: i32 = 2;
/// `cudaStreamPerThread`: the calling thread's per-thread default stream.
pub(crate) const STREAM_PER_THREAD: usize = 2;

/// Which CUDA call a launch came through; the clone is launched, and an uninstrumented launch
/// forwarded, through the same one. The first four take `cudaLaunchKernel`'s arguments; the
/// `cudaLaunchKernelExC` kinds carry the part of `cudaLaunchConfig_t` that has no
/// `cudaLaunchKernel` counterpart (its launch attributes), to be passed on unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaunchKind {
    /// `cudaLaunchKernel`.
    Plain,
    /// `cudaLaunchKernel_ptsz`: stream 0 is the per-thread default stream.
    PerThread,
    /// `cudaLaunchCooperativeKernel`.
    Cooperative,
    /// `cudaLaunchCooperativeKernel_ptsz`.
    CooperativePerThread,
    /// `cudaLaunchKernelExC` with the config's `attrs` pointer and `numAttrs`.
    Extended { attrs: usize, num_attrs: u32 },
    /// `cudaLaunchKernelExC_ptsz`.
    ExtendedPerThread { attrs: usize, num_attrs: u32 },
}

impl LaunchKind {
    /// The stream the launch runs on, as a handle any API call understands: the program's
    /// stream value, except that 0 in a per-thread launch is `cudaStreamPerThread`. The
    /// runtime's own work for the launch (clearing, read-back, event) goes there.
    pub(crate) fn stream(self, stream: usize) -> usize {
        match self {
            LaunchKind::PerThread
            | LaunchKind::CooperativePerThread
            | LaunchKind::ExtendedPerThread { .. }
                if stream == 0 =>
            {
                STREAM_PER_THREAD
            }
            _ => stream,
        }
    }
}

/// A per-function setting a program makes on a kernel, which the runtime repeats on the
/// kernel's counting clone so that the clone launches wherever the original does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FuncSetting {
    /// `cudaFuncSetAttribute(func, attribute, value)` (e.g. the dynamic shared memory opt-in).
    Attribute { attribute: i32, value: i32 },
    /// `cudaFuncSetCacheConfig(func, config)`.
    CacheConfig(i32),
    /// `cudaFuncSetSharedMemConfig(func, config)`.
    SharedMemConfig(i32),
}

/// What the runtime needs from `cudaFuncGetAttributes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FuncInfo {
    /// `binaryVersion`: major * 10 + minor of the code that runs (90 for sm_90).
    pub binary_version: i32,
    /// `maxThreadsPerBlock`.
    pub max_threads_per_block: i32,
}

/// Device name and compute capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeviceInfo {
    pub name: String,
    pub major: i32,
    pub minor: i32,
}

/// Thin wrappers of the CUDA runtime API. Pointers and handles travel as integers; streams are
/// `cudaStream_t` values, events `cudaEvent_t` values.
pub(crate) trait Cuda: Send + Sync {
    fn device_count(&self) -> Result<i32, Code>;
    fn get_device(&self) -> Result<i32, Code>;
    fn set_device(&self, device: i32) -> Result<(), Code>;
    fn device_info(&self, device: i32) -> Result<DeviceInfo, Code>;
    fn func_info(&self, func: usize) -> Result<FuncInfo, Code>;
    /// `cudaFuncSetAttribute`, `cudaFuncSetCacheConfig` or `cudaFuncSetSharedMemConfig`.
    fn func_set(&self, func: usize, setting: FuncSetting) -> Code;
    fn malloc(&self, bytes: usize) -> Result<u64, Code>;
    fn free(&self, ptr: u64);
    fn malloc_host(&self, bytes: usize) -> Result<usize, Code>;
    fn free_host(&self, ptr: usize);
    fn event_create(&self) -> Result<usize, Code>;
    fn event_destroy(&self, event: usize);
    fn event_record(&self, event: usize, stream: usize) -> Result<(), Code>;
    /// `Ok(true)` when complete, `Ok(false)` when not yet (`cudaErrorNotReady`).
    fn event_query(&self, event: usize) -> Result<bool, Code>;
    fn event_synchronize(&self, event: usize) -> Result<(), Code>;
    fn memset_async(&self, ptr: u64, bytes: usize, stream: usize) -> Result<(), Code>;
    fn memcpy_to_host_async(
        &self,
        host: usize,
        device: u64,
        bytes: usize,
        stream: usize,
    ) -> Result<(), Code>;
    fn stream_is_capturing(&self, stream: usize) -> Result<bool, Code>;
    /// `cudaLaunchKernel`, or the launch call `kind` names (same arguments).
    ///
    /// # Safety
    ///
    /// As `cudaLaunchKernel`: `args` must hold the kernel's arguments.
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch(
        &self,
        kind: LaunchKind,
        func: usize,
        grid: Dim3,
        block: Dim3,
        args: *mut *mut c_void,
        shared_bytes: usize,
        stream: usize,
    ) -> Code;
    /// `cudaThreadExchangeStreamCaptureMode`: sets this thread's mode, returns the previous one.
    fn exchange_capture_mode(&self, mode: i32) -> Result<i32, Code>;
    /// `cudaGetLastError`: forgets a (non-sticky) error one of our own calls caused, so that the
    /// program's next `cudaGetLastError` does not see it.
    fn clear_error(&self);
    fn device_reset(&self) -> Code;
    /// `cudaGetErrorName`.
    fn error_name(&self, code: Code) -> String;
}
