//! The real [`Cuda`]: the CUDA runtime API (`cudart_static`, linked into the final program by
//! the driver, not by this crate). Declared by hand for the few calls the runtime makes; every
//! enum argument is a C `int`.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

pub use crate::abi::LaunchConfig;
use crate::abi::{FuncAttributes, LaunchAttribute};
use crate::cuda::{Code, Cuda, DeviceInfo, FuncInfo, FuncSetting, LaunchKind, SUCCESS};
use crate::Dim3;

const CUDA_ERROR_NOT_READY: Code = 600;
const CUDA_MEMCPY_DEVICE_TO_HOST: c_int = 2;
const CUDA_EVENT_DISABLE_TIMING: c_uint = 2;
const CUDA_STREAM_CAPTURE_STATUS_NONE: c_int = 0;
const CUDA_DEV_ATTR_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const CUDA_DEV_ATTR_COMPUTE_CAPABILITY_MINOR: c_int = 76;
/// `cudaDeviceProp` is 728 bytes in CUDA 11.8 and grows in later releases; only `name` (its
/// first field, `char[256]`) is read. The buffer is generously larger than any version's struct.
const DEVICE_PROP_BYTES: usize = 8192;

/// `cudaFuncAttributes` as of CUDA 11.8, with room for the fields later releases append.
#[repr(C)]
struct FuncAttributesBuffer {
    attributes: FuncAttributes,
    reserved: [c_int; 64],
}

extern "C" {
    fn cudaGetDeviceCount(count: *mut c_int) -> Code;
    fn cudaGetDevice(device: *mut c_int) -> Code;
    fn cudaSetDevice(device: c_int) -> Code;
    fn cudaGetDeviceProperties(prop: *mut c_void, device: c_int) -> Code;
    fn cudaDeviceGetAttribute(value: *mut c_int, attr: c_int, device: c_int) -> Code;
    fn cudaFuncGetAttributes(attr: *mut FuncAttributesBuffer, func: *const c_void) -> Code;
    fn cudaFuncSetAttribute(func: *const c_void, attr: c_int, value: c_int) -> Code;
    fn cudaFuncSetCacheConfig(func: *const c_void, config: c_int) -> Code;
    fn cudaFuncSetSharedMemConfig(func: *const c_void, config: c_int) -> Code;
    fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> Code;
    fn cudaFree(ptr: *mut c_void) -> Code;
    fn cudaMallocHost(ptr: *mut *mut c_void, size: usize) -> Code;
    fn cudaFreeHost(ptr: *mut c_void) -> Code;
    fn cudaEventCreateWithFlags(event: *mut *mut c_void, flags: c_uint) -> Code;
    fn cudaEventDestroy(event: *mut c_void) -> Code;
    fn cudaEventRecord(event: *mut c_void, stream: *mut c_void) -> Code;
    fn cudaEventQuery(event: *mut c_void) -> Code;
    fn cudaEventSynchronize(event: *mut c_void) -> Code;
    fn cudaMemsetAsync(ptr: *mut c_void, value: c_int, count: usize, stream: *mut c_void) -> Code;
    fn cudaMemcpyAsync(
        dst: *mut c_void,
        src: *const c_void,
        count: usize,
        kind: c_int,
        stream: *mut c_void,
    ) -> Code;
    fn cudaStreamIsCapturing(stream: *mut c_void, status: *mut c_int) -> Code;
    fn cudaLaunchKernel(
        func: *const c_void,
        grid: Dim3,
        block: Dim3,
        args: *mut *mut c_void,
        shared_mem: usize,
        stream: *mut c_void,
    ) -> Code;
    fn cudaLaunchKernel_ptsz(
        func: *const c_void,
        grid: Dim3,
        block: Dim3,
        args: *mut *mut c_void,
        shared_mem: usize,
        stream: *mut c_void,
    ) -> Code;
    fn cudaLaunchCooperativeKernel(
        func: *const c_void,
        grid: Dim3,
        block: Dim3,
        args: *mut *mut c_void,
        shared_mem: usize,
        stream: *mut c_void,
    ) -> Code;
    fn cudaLaunchCooperativeKernel_ptsz(
        func: *const c_void,
        grid: Dim3,
        block: Dim3,
        args: *mut *mut c_void,
        shared_mem: usize,
        stream: *mut c_void,
    ) -> Code;
    fn cudaLaunchKernelExC(
        config: *const LaunchConfig,
        func: *const c_void,
        args: *mut *mut c_void,
    ) -> Code;
    fn cudaLaunchKernelExC_ptsz(
        config: *const LaunchConfig,
        func: *const c_void,
        args: *mut *mut c_void,
    ) -> Code;
    fn cudaThreadExchangeStreamCaptureMode(mode: *mut c_int) -> Code;
    fn cudaGetLastError() -> Code;
    fn cudaDeviceReset() -> Code;
    fn cudaGetErrorName(code: Code) -> *const c_char;
}

fn check(code: Code) -> Result<(), Code> {
    if code == SUCCESS {
        Ok(())
    } else {
        Err(code)
    }
}

/// `cudaLaunchKernelExC`, or `cudaLaunchKernelExC_ptsz` when `per_thread`.
///
/// # Safety
///
/// As `cudaLaunchKernelExC`.
pub(crate) unsafe fn launch_extended(
    per_thread: bool,
    config: *const LaunchConfig,
    func: *const c_void,
    args: *mut *mut c_void,
) -> Code {
    // SAFETY: the caller's contract.
    unsafe {
        if per_thread {
            cudaLaunchKernelExC_ptsz(config, func, args)
        } else {
            cudaLaunchKernelExC(config, func, args)
        }
    }
}

/// `cudaLaunchKernel` and the launch calls with its signature.
type LaunchFn =
    unsafe extern "C" fn(*const c_void, Dim3, Dim3, *mut *mut c_void, usize, *mut c_void) -> Code;

/// The CUDA runtime of the program.
pub(crate) struct RealCuda;

// The calls below pass pointers to live locals or values the runtime API itself handed out.
impl Cuda for RealCuda {
    fn device_count(&self) -> Result<i32, Code> {
        let mut count = 0;
        check(unsafe { cudaGetDeviceCount(&mut count) })?;
        Ok(count)
    }

    fn get_device(&self) -> Result<i32, Code> {
        let mut device = 0;
        check(unsafe { cudaGetDevice(&mut device) })?;
        Ok(device)
    }

    fn set_device(&self, device: i32) -> Result<(), Code> {
        check(unsafe { cudaSetDevice(device) })
    }

    fn device_info(&self, device: i32) -> Result<DeviceInfo, Code> {
        let mut prop = vec![0u64; DEVICE_PROP_BYTES / 8];
        check(unsafe { cudaGetDeviceProperties(prop.as_mut_ptr().cast(), device) })?;
        let bytes: Vec<u8> = prop
            .iter()
            .take(256 / 8)
            .flat_map(|w| w.to_ne_bytes())
            .collect();
        let name = CStr::from_bytes_until_nul(&bytes)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
        let attribute = |attr| {
            let mut value = 0;
            check(unsafe { cudaDeviceGetAttribute(&mut value, attr, device) }).map(|()| value)
        };
        Ok(DeviceInfo {
            name,
            major: attribute(CUDA_DEV_ATTR_COMPUTE_CAPABILITY_MAJOR)?,
            minor: attribute(CUDA_DEV_ATTR_COMPUTE_CAPABILITY_MINOR)?,
        })
    }

    fn func_info(&self, func: usize) -> Result<FuncInfo, Code> {
        // SAFETY: all-zero is a valid FuncAttributesBuffer (integers only).
        let mut buffer: FuncAttributesBuffer = unsafe { std::mem::zeroed() };
        check(unsafe { cudaFuncGetAttributes(&mut buffer, func as *const c_void) })?;
        Ok(FuncInfo {
            binary_version: buffer.attributes.binaryVersion,
            max_threads_per_block: buffer.attributes.maxThreadsPerBlock,
        })
    }

    fn func_set(&self, func: usize, setting: FuncSetting) -> Code {
        let func = func as *const c_void;
        // SAFETY: plain values; cudart validates the function handle.
        unsafe {
            match setting {
                FuncSetting::Attribute { attribute, value } => {
                    cudaFuncSetAttribute(func, attribute, value)
                }
                FuncSetting::CacheConfig(config) => cudaFuncSetCacheConfig(func, config),
                FuncSetting::SharedMemConfig(config) => cudaFuncSetSharedMemConfig(func, config),
            }
        }
    }

    fn malloc(&self, bytes: usize) -> Result<u64, Code> {
        let mut ptr = std::ptr::null_mut();
        check(unsafe { cudaMalloc(&mut ptr, bytes) })?;
        Ok(ptr as u64)
    }

    fn free(&self, ptr: u64) {
        unsafe { cudaFree(ptr as *mut c_void) };
    }

    fn malloc_host(&self, bytes: usize) -> Result<usize, Code> {
        let mut ptr = std::ptr::null_mut();
        check(unsafe { cudaMallocHost(&mut ptr, bytes) })?;
        Ok(ptr as usize)
    }

    fn free_host(&self, ptr: usize) {
        unsafe { cudaFreeHost(ptr as *mut c_void) };
    }

    fn event_create(&self) -> Result<usize, Code> {
        let mut event = std::ptr::null_mut();
        check(unsafe { cudaEventCreateWithFlags(&mut event, CUDA_EVENT_DISABLE_TIMING) })?;
        Ok(event as usize)
    }

    fn event_destroy(&self, event: usize) {
        unsafe { cudaEventDestroy(event as *mut c_void) };
    }

    fn event_record(&self, event: usize, stream: usize) -> Result<(), Code> {
        check(unsafe { cudaEventRecord(event as *mut c_void, stream as *mut c_void) })
    }

    fn event_query(&self, event: usize) -> Result<bool, Code> {
        match unsafe { cudaEventQuery(event as *mut c_void) } {
            SUCCESS => Ok(true),
            CUDA_ERROR_NOT_READY => Ok(false),
            code => Err(code),
        }
    }

    fn event_synchronize(&self, event: usize) -> Result<(), Code> {
        check(unsafe { cudaEventSynchronize(event as *mut c_void) })
    }

    fn memset_async(&self, ptr: u64, bytes: usize, stream: usize) -> Result<(), Code> {
        check(unsafe { cudaMemsetAsync(ptr as *mut c_void, 0, bytes, stream as *mut c_void) })
    }

    fn memcpy_to_host_async(
        &self,
        host: usize,
        device: u64,
        bytes: usize,
        stream: usize,
    ) -> Result<(), Code> {
        check(unsafe {
            cudaMemcpyAsync(
                host as *mut c_void,
                device as *const c_void,
                bytes,
                CUDA_MEMCPY_DEVICE_TO_HOST,
                stream as *mut c_void,
            )
        })
    }

    fn stream_is_capturing(&self, stream: usize) -> Result<bool, Code> {
        let mut status = CUDA_STREAM_CAPTURE_STATUS_NONE;
        check(unsafe { cudaStreamIsCapturing(stream as *mut c_void, &mut status) })?;
        Ok(status != CUDA_STREAM_CAPTURE_STATUS_NONE)
    }

    unsafe fn launch(
        &self,
        kind: LaunchKind,
        func: usize,
        grid: Dim3,
        block: Dim3,
        args: *mut *mut c_void,
        shared_bytes: usize,
        stream: usize,
    ) -> Code {
        let call: LaunchFn = match kind {
            LaunchKind::Plain => cudaLaunchKernel,
            LaunchKind::PerThread => cudaLaunchKernel_ptsz,
            LaunchKind::Cooperative => cudaLaunchCooperativeKernel,
            LaunchKind::CooperativePerThread => cudaLaunchCooperativeKernel_ptsz,
            LaunchKind::Extended { attrs, num_attrs }
            | LaunchKind::ExtendedPerThread { attrs, num_attrs } => {
                // The launch attributes are passed through untouched.
                let config = LaunchConfig {
                    gridDim: grid,
                    blockDim: block,
                    dynamicSmemBytes: shared_bytes,
                    stream: stream as *mut c_void,
                    attrs: attrs as *mut LaunchAttribute,
                    numAttrs: num_attrs,
                };
                let per_thread = matches!(kind, LaunchKind::ExtendedPerThread { .. });
                // SAFETY: forwarded from the caller's contract; the config lives across the call.
                return unsafe {
                    launch_extended(per_thread, &config, func as *const c_void, args)
                };
            }
        };
        // SAFETY: forwarded from the caller's contract; all four take the same arguments.
        unsafe {
            call(
                func as *const c_void,
                grid,
                block,
                args,
                shared_bytes,
                stream as *mut c_void,
            )
        }
    }

    fn exchange_capture_mode(&self, mode: i32) -> Result<i32, Code> {
        let mut mode = mode;
        check(unsafe { cudaThreadExchangeStreamCaptureMode(&mut mode) })?;
        Ok(mode)
    }

    fn clear_error(&self) {
        unsafe { cudaGetLastError() };
    }

    fn device_reset(&self) -> Code {
        unsafe { cudaDeviceReset() }
    }

    fn error_name(&self, code: Code) -> String {
        let name = unsafe { cudaGetErrorName(code) };
        if name.is_null() {
            return format!("error {code}");
        }
        // SAFETY: cudaGetErrorName returns a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        format!("{name} ({code})")
    }
}
