//! The exported C ABI: cudart's registration entry points and API calls, with CUDA 11.8's
//! signatures. Each body runs under [`api`] (or [`guarded`]), which catches panics (none may
//! unwind into C), records failures as the thread's last error and ends the process on a
//! fault. Output pointers are checked for null; other pointers are the program's contract, as
//! with cudart.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_float, c_int, c_uint, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use crate::abi::{
    ChannelFormatDesc, Dim3, Extent, FuncAttributes, LaunchConfig, Memcpy3DParms, PitchedPtr,
    PointerAttributes, Pos, ResourceDesc, TextureDesc,
};
use crate::arrays::{self, Region};
use crate::device;
use crate::error::{self, Code, CudaError, SUCCESS};
use crate::memory::{self, MemoryKind};
use crate::registry::{Event, Stream, EVENT_DISABLE_TIMING, EVENT_INTERPROCESS};
use crate::runtime::{self, fatal, registry, CallConfiguration, Failure, Result};

type Handle = *mut *mut c_void;

/// The fat binary wrapper clang's host code passes to `__cudaRegisterFatBinary`.
#[repr(C)]
struct FatbinWrapper {
    magic: c_int,
    version: c_int,
    data: *const u8,
    unused: *const c_void,
}

const FATBIN_WRAPPER_MAGIC: c_int = 0x466243b1;

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// Runs `f` where nothing may unwind: a panic is an internal error and ends the process.
fn guarded<T>(f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => value,
        Err(payload) => fatal(&format!("internal error: {}", panic_message(&*payload))),
    }
}

/// Runs an API call: its failure becomes the thread's last error and its return code; a
/// fault ends the process.
fn api(f: impl FnOnce() -> Result<()>) -> Code {
    crate::libraries::note_once();
    match guarded(f) {
        Ok(()) => SUCCESS,
        Err(Failure::Api(error)) => error::record(Err(error)),
        Err(Failure::Fault(message)) => fatal(&message),
    }
}

/// Stores `value` through an output pointer.
fn put<T>(out: *mut T, value: T) -> Result<(), CudaError> {
    if out.is_null() {
        return Err(CudaError::InvalidValue);
    }
    // SAFETY: a non-null output pointer from the program, as cudart's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Reads an input struct.
fn get<T: Copy>(input: *const T) -> Result<T, CudaError> {
    if input.is_null() {
        return Err(CudaError::InvalidValue);
    }
    // SAFETY: a non-null input pointer from the program.
    Ok(unsafe { input.read_unaligned() })
}

/// A NUL-terminated name from registration.
fn name(ptr: *const c_char) -> Result<String> {
    if ptr.is_null() {
        return Err(Failure::Fault("registration without a device name".into()));
    }
    // SAFETY: clang passes string constants.
    Ok(unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned())
}

// ---------------------------------------------------------------------------------------------
// Registration (called by clang's module constructor and destructor)

#[no_mangle]
pub unsafe extern "C" fn __cudaRegisterFatBinary(fat_cubin: *mut c_void) -> Handle {
    guarded(|| {
        let wrapper = fat_cubin as *const FatbinWrapper;
        // SAFETY: clang's `__cuda_fatbin_wrapper`; fields read only after the null check.
        let data = match unsafe { wrapper.as_ref() } {
            Some(w) if w.magic == FATBIN_WRAPPER_MAGIC && !w.data.is_null() => w.data,
            _ => fatal("__cudaRegisterFatBinary: not a fat binary wrapper"),
        };
        // SAFETY: both a fat binary and a CPU image are at least 8 bytes long.
        let head = unsafe { std::slice::from_raw_parts(data, 8) };
        if !ptx_sim::image::is_image(head) {
            fatal(
                "this program was built for the GPU target (it embeds a fat binary); \
                 rebuild it with cuda-flux-clang --cuda-flux-target=cpu to run it on the CPU",
            );
        }
        // SAFETY: a CPU image, as written by the driver; its headers give its length.
        let bytes = unsafe { std::slice::from_raw_parts(data, ptx_sim::image::image_len(data)) };
        let images = match ptx_sim::image::decode(bytes) {
            Ok(images) => images,
            Err(error) => fatal(&error.to_string()),
        };
        // The handle is only compared, never read; a leaked cell makes it unique and valid.
        let handle: Handle = Box::into_raw(Box::new(std::ptr::null_mut::<c_void>()));
        if let Err(failure) = runtime::register_image(images, handle as usize) {
            fatal(&failure.to_string());
        }
        handle
    })
}

#[no_mangle]
pub unsafe extern "C" fn __cudaRegisterFatBinaryEnd(_handle: Handle) {}

#[no_mangle]
pub unsafe extern "C" fn __cudaUnregisterFatBinary(handle: Handle) {
    guarded(|| runtime::unregister(handle as usize));
}

/// Registers what `register` makes of the device name; a failure (a bad handle or name) ends
/// the process: the program cannot work.
fn register_named(device_name: *const c_char, register: impl FnOnce(String) -> Result<()>) {
    guarded(|| {
        if let Err(failure) = name(device_name).and_then(register) {
            fatal(&failure.to_string());
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn __cudaRegisterFunction(
    handle: Handle,
    host_fun: *const c_char,
    _device_fun: *mut c_char,
    device_name: *const c_char,
    _thread_limit: c_int,
    _tid: *mut c_void,
    _bid: *mut c_void,
    _block_dim: *mut c_void,
    _grid_dim: *mut c_void,
    _warp_size: *mut c_int,
) -> c_int {
    register_named(device_name, |name| {
        runtime::register_function(handle as usize, host_fun as usize, name)
    });
    0
}

#[no_mangle]
pub unsafe extern "C" fn __cudaRegisterVar(
    handle: Handle,
    host_var: *mut c_char,
    _device_address: *mut c_char,
    device_name: *const c_char,
    _ext: c_int,
    size: usize,
    _constant: c_int,
    _global: c_int,
) {
    register_named(device_name, |name| {
        runtime::register_variable(handle as usize, host_var as usize, name, size)
    });
}

/// Clang declares `(handle, void **hostVarPtrAddress, char *deviceAddress, const char
/// *deviceName, size_t size, unsigned align)`, CUDA's header has four more `int`s in between;
/// only the first four, common to both, are read. The PTX is loaded here, because the host
/// pointer must point at the variable from now on.
#[no_mangle]
pub unsafe extern "C" fn __cudaRegisterManagedVar(
    handle: Handle,
    host_var_ptr: *mut *mut c_void,
    _device_address: *mut c_char,
    device_name: *const c_char,
) {
    register_named(device_name, |name| {
        runtime::register_variable(handle as usize, host_var_ptr as usize, name, 0)?;
        let (address, _) = runtime::symbol(host_var_ptr as usize)?;
        put(host_var_ptr, address as *mut c_void)?;
        Ok(())
    });
}

#[no_mangle]
pub unsafe extern "C" fn __cudaRegisterTexture(
    handle: Handle,
    host_var: *const c_void,
    _device_address: *const *const c_void,
    device_name: *const c_char,
    _dim: c_int,
    norm: c_int,
    _ext: c_int,
) {
    register_named(device_name, |name| {
        runtime::register_texture(handle as usize, host_var as usize, name, norm != 0)
    });
}

#[no_mangle]
pub unsafe extern "C" fn __cudaRegisterSurface(
    handle: Handle,
    host_var: *const c_void,
    _device_address: *const *const c_void,
    device_name: *const c_char,
    _dim: c_int,
    _ext: c_int,
) {
    register_named(device_name, |name| {
        runtime::register_surface(handle as usize, host_var as usize, name)
    });
}

/// Loads the module's PTX now (a module that does not load ends the program here).
#[no_mangle]
pub unsafe extern "C" fn __cudaInitModule(handle: Handle) -> c_char {
    guarded(|| {
        let module = registry()
            .module_of_handle(handle as usize)
            .and_then(|id| registry().module(id));
        let (engine, native_after) = match (runtime::engine(), runtime::native_after()) {
            (Ok(engine), Ok(native_after)) => (engine, native_after),
            (Err(error), _) | (_, Err(error)) => fatal(&error.to_string()),
        };
        match module.map(|m| m.program(engine, native_after)) {
            Some(Ok(_)) => 1,
            Some(Err(error)) => fatal(&error.to_string()),
            None => 0,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn __cudaPushCallConfiguration(
    grid: Dim3,
    block: Dim3,
    shared: usize,
    stream: *mut c_void,
) -> c_uint {
    guarded(|| {
        runtime::push_configuration(CallConfiguration {
            grid,
            block,
            shared,
            stream: stream as usize,
        })
    });
    0
}

#[no_mangle]
pub unsafe extern "C" fn __cudaPopCallConfiguration(
    grid: *mut Dim3,
    block: *mut Dim3,
    shared: *mut usize,
    stream: *mut *mut c_void,
) -> Code {
    api(|| {
        let c = runtime::pop_configuration().ok_or(CudaError::MissingConfiguration)?;
        put(grid, c.grid)?;
        put(block, c.block)?;
        put(shared, c.shared)?;
        put(stream, c.stream as *mut c_void)?;
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Launches

unsafe fn launch(
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared: usize,
    stream: *mut c_void,
    cooperative: bool,
) -> Code {
    api(|| unsafe {
        // SAFETY: the program's launch arguments.
        runtime::launch(
            func as usize,
            grid,
            block,
            args,
            shared,
            stream as usize,
            cooperative,
        )
    })
}

/// A `cudaLaunchKernel`-shaped entry point: [`launch`], cooperative or not.
macro_rules! launch_entry_point {
    ($name:ident, cooperative: $cooperative:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            func: *const c_void,
            grid: Dim3,
            block: Dim3,
            args: *mut *mut c_void,
            shared: usize,
            stream: *mut c_void,
        ) -> Code {
            unsafe { launch(func, grid, block, args, shared, stream, $cooperative) }
        }
    };
}

// The `_ptsz` forms use the per-thread default stream: work runs at call time either way.
launch_entry_point!(cudaLaunchKernel, cooperative: false);
launch_entry_point!(cudaLaunchKernel_ptsz, cooperative: false);
launch_entry_point!(cudaLaunchCooperativeKernel, cooperative: true);
launch_entry_point!(cudaLaunchCooperativeKernel_ptsz, cooperative: true);

/// `cudaLaunchKernelExC`'s attributes: whether the launch is cooperative, and the event a
/// programmatic-event attribute asks to record when the kernel is done.
fn launch_attributes(config: &LaunchConfig) -> Result<(bool, Option<usize>), CudaError> {
    let count = config.numAttrs as usize;
    if count == 0 {
        return Ok((false, None));
    }
    if config.attrs.is_null() {
        return Err(CudaError::InvalidValue);
    }
    // SAFETY: the program's array of `numAttrs` attributes.
    let attrs = unsafe { std::slice::from_raw_parts(config.attrs, count) };
    let (mut cooperative, mut event) = (false, None);
    for attr in attrs {
        let word = attr.val__pad[0];
        let int = word as u32 as i32;
        match attr.id {
            // Ignore; access policy window, synchronization and cluster scheduling policies,
            // programmatic stream serialization, priority: hints that do not change results
            // when every launch runs to completion at call time.
            0 | 1 | 3 | 5 | 6 | 8 => {}
            2 => cooperative = int != 0,
            // Cluster dimension: clusters of one CTA are plain launches; others need sm_90.
            4 => {
                let z = attr.val__pad[1] as u32;
                if int != 1 || (word >> 32) as u32 != 1 || z != 1 {
                    return Err(CudaError::NotSupported);
                }
            }
            7 => event = Some(word as usize),
            _ => return Err(CudaError::InvalidValue),
        }
    }
    Ok((cooperative, event))
}

unsafe fn launch_ex(
    config: *const LaunchConfig,
    func: *const c_void,
    args: *mut *mut c_void,
) -> Code {
    api(|| {
        let config = get(config)?;
        let (cooperative, event) = launch_attributes(&config)?;
        if let Some(event) = event {
            registry().event(event)?;
        }
        // SAFETY: the program's launch arguments.
        unsafe {
            runtime::launch(
                func as usize,
                config.gridDim,
                config.blockDim,
                args,
                config.dynamicSmemBytes,
                config.stream as usize,
                cooperative,
            )
        }?;
        if let Some(event) = event {
            registry().event(event)?.recorded = Some(Instant::now());
        }
        Ok(())
    })
}

/// A `cudaLaunchKernelExC`-shaped entry point: [`launch_ex`].
macro_rules! launch_ex_entry_point {
    ($name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            config: *const LaunchConfig,
            func: *const c_void,
            args: *mut *mut c_void,
        ) -> Code {
            unsafe { launch_ex(config, func, args) }
        }
    };
}

launch_ex_entry_point!(cudaLaunchKernelExC);
launch_ex_entry_point!(cudaLaunchKernelExC_ptsz);

#[no_mangle]
pub unsafe extern "C" fn cudaFuncGetAttributes(
    attr: *mut FuncAttributes,
    func: *const c_void,
) -> Code {
    api(|| {
        if attr.is_null() {
            return Err(CudaError::InvalidValue.into());
        }
        let (function, info) = runtime::kernel_info(func as usize)?;
        let arch = i32::try_from(info.arch).unwrap_or(i32::MAX);
        let max_dynamic = runtime::max_dynamic_shared(&function, &info);
        put(
            attr,
            FuncAttributes {
                sharedSizeBytes: info.static_shared_bytes,
                // Constant memory is module-wide in PTX; not attributed to kernels.
                constSizeBytes: 0,
                localSizeBytes: info.local_bytes,
                maxThreadsPerBlock: device::MAX_THREADS_PER_BLOCK as c_int,
                // PTX runs on virtual registers: no physical register count exists.
                numRegs: 0,
                ptxVersion: arch,
                binaryVersion: arch,
                cacheModeCA: 0,
                maxDynamicSharedSizeBytes: c_int::try_from(max_dynamic).unwrap_or(c_int::MAX),
                preferredShmemCarveout: function.carveout,
            },
        )?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaFuncSetAttribute(
    func: *const c_void,
    attr: c_int,
    value: c_int,
) -> Code {
    api(|| runtime::set_function_attribute(func as usize, attr, value))
}

/// Accepted and validated; cache preferences do not change results.
#[no_mangle]
pub unsafe extern "C" fn cudaFuncSetCacheConfig(func: *const c_void, config: c_int) -> Code {
    api(|| {
        runtime::kernel_info(func as usize)?;
        enum_value(config, 3)?;
        Ok(())
    })
}

/// Accepted and validated; bank-size preferences do not change results.
#[no_mangle]
pub unsafe extern "C" fn cudaFuncSetSharedMemConfig(func: *const c_void, config: c_int) -> Code {
    api(|| {
        runtime::kernel_info(func as usize)?;
        enum_value(config, 2)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    num_blocks: *mut c_int,
    func: *const c_void,
    block_size: c_int,
    dynamic_shared: usize,
) -> Code {
    unsafe {
        cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
            num_blocks,
            func,
            block_size,
            dynamic_shared,
            0,
        )
    }
}

/// What the C++ overloads of `cuda_runtime.h` call (`cudaOccupancyMaxActiveBlocksPerMultiprocessor(
/// int*, T, int, size_t)` passes `cudaOccupancyDefault`). Flags: `cudaOccupancyDefault` (0) or
/// `cudaOccupancyDisableCachingOverride` (1), which changes nothing here.
#[no_mangle]
pub unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    num_blocks: *mut c_int,
    func: *const c_void,
    block_size: c_int,
    dynamic_shared: usize,
    flags: c_uint,
) -> Code {
    api(|| {
        if flags > 1 {
            return Err(CudaError::InvalidValue.into());
        }
        let (_, info) = runtime::kernel_info(func as usize)?;
        let threads = u32::try_from(block_size).map_err(|_| CudaError::InvalidValue)?;
        if threads == 0 {
            return Err(CudaError::InvalidValue.into());
        }
        let shared = info.static_shared_bytes.saturating_add(dynamic_shared);
        put(
            num_blocks,
            device::max_active_blocks(threads, shared) as c_int,
        )?;
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Device

#[no_mangle]
pub unsafe extern "C" fn cudaGetDeviceCount(count: *mut c_int) -> Code {
    api(|| Ok(put(count, 1)?))
}

#[no_mangle]
pub unsafe extern "C" fn cudaGetDevice(device: *mut c_int) -> Code {
    api(|| Ok(put(device, 0)?))
}

/// `value` when it is one of an enum's values `0..=max`.
fn enum_value(value: c_int, max: c_int) -> Result<c_int, CudaError> {
    if (0..=max).contains(&value) {
        Ok(value)
    } else {
        Err(CudaError::InvalidValue)
    }
}

fn check_device(device: c_int) -> Result<(), CudaError> {
    if device == 0 {
        Ok(())
    } else {
        Err(CudaError::InvalidDevice)
    }
}

#[no_mangle]
pub unsafe extern "C" fn cudaSetDevice(device: c_int) -> Code {
    api(|| Ok(check_device(device)?))
}

#[no_mangle]
pub unsafe extern "C" fn cudaGetDeviceProperties(
    prop: *mut crate::abi::DeviceProp,
    device: c_int,
) -> Code {
    api(|| {
        check_device(device)?;
        if prop.is_null() {
            return Err(CudaError::InvalidValue.into());
        }
        put(prop, device::properties(runtime::device_shape()?))?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaDeviceGetAttribute(
    value: *mut c_int,
    attr: c_int,
    device: c_int,
) -> Code {
    api(|| {
        check_device(device)?;
        if value.is_null() {
            return Err(CudaError::InvalidValue.into());
        }
        let properties = device::properties(runtime::device_shape()?);
        let v = device::attribute(&properties, attr).ok_or(CudaError::InvalidValue)?;
        put(value, v)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaSetDeviceFlags(flags: c_uint) -> Code {
    api(|| {
        // cudaDeviceMask; the schedule part is one of Auto, Spin, Yield, BlockingSync.
        if flags & !0x1f != 0 || !matches!(flags & 0x07, 0 | 1 | 2 | 4) {
            return Err(CudaError::InvalidValue.into());
        }
        registry().device_flags = flags;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaDeviceSetCacheConfig(config: c_int) -> Code {
    api(|| {
        registry().cache_config = enum_value(config, 3)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaDeviceSetSharedMemConfig(config: c_int) -> Code {
    api(|| {
        registry().shared_config = enum_value(config, 2)?;
        Ok(())
    })
}

/// The index of `enum cudaLimit` `limit` in the registry's limits.
fn limit_index(limit: c_int) -> Result<usize, CudaError> {
    usize::try_from(limit)
        .ok()
        .filter(|&i| i < 7)
        .ok_or(CudaError::UnsupportedLimit)
}

/// Limits are recorded (and read back by `cudaDeviceGetLimit`); the interpreter's stack,
/// printf buffer and heap are not bounded by them.
#[no_mangle]
pub unsafe extern "C" fn cudaDeviceSetLimit(limit: c_int, value: usize) -> Code {
    api(|| {
        registry().limits[limit_index(limit)?] = value;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaDeviceGetLimit(value: *mut usize, limit: c_int) -> Code {
    api(|| {
        let v = registry().limits[limit_index(limit)?];
        put(value, v)?;
        Ok(())
    })
}

const VERSION: c_int = 11080;

#[no_mangle]
pub unsafe extern "C" fn cudaDriverGetVersion(version: *mut c_int) -> Code {
    api(|| Ok(put(version, VERSION)?))
}

#[no_mangle]
pub unsafe extern "C" fn cudaRuntimeGetVersion(version: *mut c_int) -> Code {
    api(|| Ok(put(version, VERSION)?))
}

#[no_mangle]
pub extern "C" fn cudaDeviceSynchronize() -> Code {
    api(|| {
        runtime::synchronize_device();
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn cudaThreadSynchronize() -> Code {
    cudaDeviceSynchronize()
}

#[no_mangle]
pub extern "C" fn cudaDeviceReset() -> Code {
    api(|| {
        runtime::reset_device();
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Errors

#[no_mangle]
pub extern "C" fn cudaGetLastError() -> Code {
    error::take_last_error()
}

#[no_mangle]
pub extern "C" fn cudaPeekAtLastError() -> Code {
    error::peek_last_error()
}

/// NUL-terminated copies of every name and string, made once.
static ERROR_TEXTS: LazyLock<Vec<(Code, CString, CString)>> = LazyLock::new(|| {
    crate::error_table::ERRORS
        .iter()
        .map(|&(code, name, text)| {
            let c = |s: &str| CString::new(s).unwrap_or_default();
            (code, c(name), c(text))
        })
        .collect()
});

static UNRECOGNIZED: &CStr = c"unrecognized error code";

fn error_text(code: Code, pick: fn(&(Code, CString, CString)) -> &CStr) -> *const c_char {
    guarded(|| {
        ERROR_TEXTS
            .iter()
            .find(|entry| entry.0 == code)
            .map_or(UNRECOGNIZED, pick)
            .as_ptr()
    })
}

#[no_mangle]
pub extern "C" fn cudaGetErrorName(code: Code) -> *const c_char {
    error_text(code, |entry| &entry.1)
}

#[no_mangle]
pub extern "C" fn cudaGetErrorString(code: Code) -> *const c_char {
    error_text(code, |entry| &entry.2)
}

// ---------------------------------------------------------------------------------------------
// Memory

fn allocate_into(out: *mut *mut c_void, len: usize, kind: MemoryKind) -> Result<()> {
    if out.is_null() {
        return Err(CudaError::InvalidValue.into());
    }
    let ptr = runtime::allocate(len, kind)?;
    put(out, ptr as *mut c_void)?;
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> Code {
    api(|| allocate_into(ptr, size, MemoryKind::Device))
}

#[no_mangle]
pub unsafe extern "C" fn cudaMallocHost(ptr: *mut *mut c_void, size: usize) -> Code {
    api(|| allocate_into(ptr, size, MemoryKind::Host))
}

#[no_mangle]
pub unsafe extern "C" fn cudaHostAlloc(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> Code {
    api(|| {
        // Portable, Mapped, WriteCombined: all pinned memory is mapped and portable here.
        if flags & !0x07 != 0 {
            return Err(CudaError::InvalidValue.into());
        }
        allocate_into(ptr, size, MemoryKind::Host)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaMallocManaged(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> Code {
    api(|| {
        // cudaMemAttachGlobal or cudaMemAttachHost; a zero size is invalid for managed memory.
        if !matches!(flags, 1 | 2) || size == 0 {
            return Err(CudaError::InvalidValue.into());
        }
        allocate_into(ptr, size, MemoryKind::Managed)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaMallocPitch(
    ptr: *mut *mut c_void,
    pitch: *mut usize,
    width: usize,
    height: usize,
) -> Code {
    api(|| {
        if ptr.is_null() || pitch.is_null() {
            return Err(CudaError::InvalidValue.into());
        }
        let row = memory::pitch_for(width).ok_or(CudaError::MemoryAllocation)?;
        let len = row.checked_mul(height).ok_or(CudaError::MemoryAllocation)?;
        let len = if width == 0 { 0 } else { len };
        allocate_into(ptr, len, MemoryKind::Device)?;
        put(pitch, row)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaFree(ptr: *mut c_void) -> Code {
    api(|| {
        let kinds = [MemoryKind::Device, MemoryKind::Managed];
        Ok(runtime::free(ptr as u64, &kinds)?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaFreeHost(ptr: *mut c_void) -> Code {
    api(|| Ok(runtime::free(ptr as u64, &[MemoryKind::Host])?))
}

#[no_mangle]
pub unsafe extern "C" fn cudaHostRegister(ptr: *mut c_void, size: usize, flags: c_uint) -> Code {
    api(|| {
        // Portable and Mapped are implied; IoMemory and ReadOnly are not supported.
        match flags {
            f if f & !0x0f != 0 => Err(CudaError::InvalidValue.into()),
            f if f & 0x0c != 0 => Err(CudaError::NotSupported.into()),
            _ => Ok(runtime::host_register(ptr as u64, size)?),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaHostUnregister(ptr: *mut c_void) -> Code {
    api(|| Ok(runtime::host_unregister(ptr as u64)?))
}

#[no_mangle]
pub unsafe extern "C" fn cudaHostGetDevicePointer(
    device: *mut *mut c_void,
    host: *mut c_void,
    flags: c_uint,
) -> Code {
    api(|| {
        if flags != 0 {
            return Err(CudaError::InvalidValue.into());
        }
        match runtime::find(host as u64) {
            // Unified addressing: the device pointer is the host pointer.
            Some((_, range)) if matches!(range.kind, MemoryKind::Host | MemoryKind::Registered) => {
                put(device, host)?;
                Ok(())
            }
            _ => Err(CudaError::InvalidValue.into()),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaPointerGetAttributes(
    attributes: *mut PointerAttributes,
    ptr: *const c_void,
) -> Code {
    api(|| {
        let p = ptr as *mut c_void;
        let null = std::ptr::null_mut();
        let value = match runtime::find(ptr as u64) {
            Some((_, range)) => {
                let host_visible =
                    !matches!(range.kind, MemoryKind::Device | MemoryKind::Symbol(_));
                PointerAttributes {
                    r#type: range.kind.memory_type(),
                    device: 0,
                    devicePointer: p,
                    hostPointer: if host_visible { p } else { null },
                }
            }
            // cudaMemoryTypeUnregistered; cudart reports device -2 for it.
            None => PointerAttributes {
                r#type: 0,
                device: -2,
                devicePointer: null,
                hostPointer: p,
            },
        };
        put(attributes, value)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> Code {
    api(|| {
        let (available, all) = memory::host_memory();
        put(free, available as usize)?;
        put(total, all as usize)?;
        Ok(())
    })
}

/// Defines an API call and its `Async` form, which takes a stream after the same parameters:
/// the stream must exist, then the work runs at call time as in the plain form.
macro_rules! with_async_form {
    ($name:ident, $async_name:ident, ($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> Code {
            api(|| $body)
        }

        #[no_mangle]
        pub unsafe extern "C" fn $async_name($($arg: $ty,)* stream: *mut c_void) -> Code {
            api(|| {
                registry().check_stream(stream as usize)?;
                $body
            })
        }
    };
}

with_async_form!(
    cudaMemcpy,
    cudaMemcpyAsync,
    (dst: *mut c_void, src: *const c_void, count: usize, kind: c_int) {
        // SAFETY: host sides are the program's contract.
        Ok(unsafe { runtime::copy(dst as u64, src as u64, count, kind) }?)
    }
);

with_async_form!(
    cudaMemcpy2D,
    cudaMemcpy2DAsync,
    (
        dst: *mut c_void,
        dpitch: usize,
        src: *const c_void,
        spitch: usize,
        width: usize,
        height: usize,
        kind: c_int,
    ) {
        // SAFETY: host sides are the program's contract.
        Ok(unsafe {
            runtime::copy_2d(dst as u64, dpitch, src as u64, spitch, width, height, kind)
        }?)
    }
);

with_async_form!(
    cudaMemset,
    cudaMemsetAsync,
    (ptr: *mut c_void, value: c_int, count: usize) {
        Ok(runtime::fill(ptr as u64, value, count)?)
    }
);

#[no_mangle]
pub unsafe extern "C" fn cudaMemset2D(
    ptr: *mut c_void,
    pitch: usize,
    value: c_int,
    width: usize,
    height: usize,
) -> Code {
    api(|| Ok(runtime::fill_2d(ptr as u64, pitch, value, width, height)?))
}

with_async_form!(
    cudaMemcpyToSymbol,
    cudaMemcpyToSymbolAsync,
    (symbol: *const c_void, src: *const c_void, count: usize, offset: usize, kind: c_int) {
        // SAFETY: the source is the program's contract.
        unsafe { runtime::copy_symbol(symbol as usize, src as u64, count, offset, kind, true) }
    }
);

with_async_form!(
    cudaMemcpyFromSymbol,
    cudaMemcpyFromSymbolAsync,
    (dst: *mut c_void, symbol: *const c_void, count: usize, offset: usize, kind: c_int) {
        // SAFETY: the destination is the program's contract.
        unsafe { runtime::copy_symbol(symbol as usize, dst as u64, count, offset, kind, false) }
    }
);

#[no_mangle]
pub unsafe extern "C" fn cudaGetSymbolAddress(
    address: *mut *mut c_void,
    symbol: *const c_void,
) -> Code {
    api(|| {
        let (at, _) = runtime::symbol(symbol as usize)?;
        put(address, at as *mut c_void)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaGetSymbolSize(size: *mut usize, symbol: *const c_void) -> Code {
    api(|| {
        let (_, len) = runtime::symbol(symbol as usize)?;
        put(size, len as usize)?;
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Streams and events: work runs at call time, so every stream is idle and every recorded
// event complete.

fn create_stream(out: *mut *mut c_void, flags: c_uint, priority: c_int) -> Result<()> {
    if out.is_null() || flags & !1 != 0 {
        return Err(CudaError::InvalidValue.into());
    }
    let mut registry = registry();
    let handle = registry.new_handle();
    // Priorities are clamped to the device's range, which is [0, 0].
    let _ = priority;
    registry
        .streams
        .insert(handle, Stream { flags, priority: 0 });
    put(out, handle as *mut c_void)?;
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn cudaStreamCreate(stream: *mut *mut c_void) -> Code {
    api(|| create_stream(stream, 0, 0))
}

#[no_mangle]
pub unsafe extern "C" fn cudaStreamCreateWithFlags(
    stream: *mut *mut c_void,
    flags: c_uint,
) -> Code {
    api(|| create_stream(stream, flags, 0))
}

#[no_mangle]
pub unsafe extern "C" fn cudaStreamCreateWithPriority(
    stream: *mut *mut c_void,
    flags: c_uint,
    priority: c_int,
) -> Code {
    api(|| create_stream(stream, flags, priority))
}

#[no_mangle]
pub unsafe extern "C" fn cudaStreamDestroy(stream: *mut c_void) -> Code {
    api(|| {
        registry()
            .streams
            .remove(&(stream as usize))
            .ok_or(CudaError::InvalidResourceHandle)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaStreamSynchronize(stream: *mut c_void) -> Code {
    api(|| Ok(registry().check_stream(stream as usize)?))
}

#[no_mangle]
pub unsafe extern "C" fn cudaStreamQuery(stream: *mut c_void) -> Code {
    unsafe { cudaStreamSynchronize(stream) }
}

#[no_mangle]
pub unsafe extern "C" fn cudaStreamWaitEvent(
    stream: *mut c_void,
    event: *mut c_void,
    flags: c_uint,
) -> Code {
    api(|| {
        let mut registry = registry();
        registry.check_stream(stream as usize)?;
        registry.event(event as usize)?;
        if flags & !1 != 0 {
            return Err(CudaError::InvalidValue.into());
        }
        Ok(())
    })
}

/// No stream is ever capturing (`cudaStreamBeginCapture` is not provided).
#[no_mangle]
pub unsafe extern "C" fn cudaStreamIsCapturing(stream: *mut c_void, status: *mut c_int) -> Code {
    api(|| {
        registry().check_stream(stream as usize)?;
        put(status, 0)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaThreadExchangeStreamCaptureMode(mode: *mut c_int) -> Code {
    api(|| {
        let wanted = enum_value(get(mode)?, 2)?;
        put(mode, runtime::exchange_capture_mode(wanted))?;
        Ok(())
    })
}

fn create_event(out: *mut *mut c_void, flags: c_uint) -> Result<()> {
    let interprocess_without_timing =
        flags & EVENT_INTERPROCESS != 0 && flags & EVENT_DISABLE_TIMING == 0;
    if out.is_null() || flags & !0x07 != 0 || interprocess_without_timing {
        return Err(CudaError::InvalidValue.into());
    }
    let mut registry = registry();
    let handle = registry.new_handle();
    registry.events.insert(
        handle,
        Event {
            flags,
            recorded: None,
        },
    );
    put(out, handle as *mut c_void)?;
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn cudaEventCreate(event: *mut *mut c_void) -> Code {
    api(|| create_event(event, 0))
}

#[no_mangle]
pub unsafe extern "C" fn cudaEventCreateWithFlags(event: *mut *mut c_void, flags: c_uint) -> Code {
    api(|| create_event(event, flags))
}

#[no_mangle]
pub unsafe extern "C" fn cudaEventRecord(event: *mut c_void, stream: *mut c_void) -> Code {
    api(|| {
        let mut registry = registry();
        registry.check_stream(stream as usize)?;
        registry.event(event as usize)?.recorded = Some(Instant::now());
        Ok(())
    })
}

/// Complete: whatever preceded the record has run.
#[no_mangle]
pub unsafe extern "C" fn cudaEventQuery(event: *mut c_void) -> Code {
    api(|| {
        registry().event(event as usize)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaEventSynchronize(event: *mut c_void) -> Code {
    unsafe { cudaEventQuery(event) }
}

#[no_mangle]
pub unsafe extern "C" fn cudaEventDestroy(event: *mut c_void) -> Code {
    api(|| {
        registry()
            .events
            .remove(&(event as usize))
            .ok_or(CudaError::InvalidResourceHandle)?;
        Ok(())
    })
}

/// Host wall time between the two records, in milliseconds (emulated: the work between the
/// records ran on the host during that time).
#[no_mangle]
pub unsafe extern "C" fn cudaEventElapsedTime(
    ms: *mut c_float,
    start: *mut c_void,
    end: *mut c_void,
) -> Code {
    api(|| {
        if ms.is_null() {
            return Err(CudaError::InvalidValue.into());
        }
        let mut registry = registry();
        let timed = |e: Event| {
            e.recorded
                .filter(|_| e.flags & EVENT_DISABLE_TIMING == 0)
                .ok_or(CudaError::InvalidResourceHandle)
        };
        let from = timed(*registry.event(start as usize)?)?;
        let to = timed(*registry.event(end as usize)?)?;
        let elapsed = if to >= from {
            to.duration_since(from).as_secs_f64()
        } else {
            -from.duration_since(to).as_secs_f64()
        };
        put(ms, (elapsed * 1000.0) as c_float)?;
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Textures (linear memory only)

#[no_mangle]
pub extern "C" fn cudaCreateChannelDesc(
    x: c_int,
    y: c_int,
    z: c_int,
    w: c_int,
    f: c_int,
) -> ChannelFormatDesc {
    ChannelFormatDesc { x, y, z, w, f }
}

#[no_mangle]
pub unsafe extern "C" fn cudaCreateTextureObject(
    texture: *mut u64,
    resource: *const ResourceDesc,
    description: *const TextureDesc,
    view: *const c_void,
) -> Code {
    api(|| {
        let resource = get(resource)?;
        let description = get(description)?;
        if texture.is_null() {
            return Err(CudaError::InvalidValue.into());
        }
        if !view.is_null() {
            return Err(CudaError::InvalidValue.into());
        }
        let normalized_read = description.readMode == 1;
        let sampler = arrays::Sampler::of_object(&description);
        let made = match resource.resType {
            // cudaResourceTypeArray: `res.array.array` shares the union's first word.
            0 => arrays::array_texture(
                resource.res__linear__devPtr as u64,
                normalized_read,
                sampler,
            )?,
            2 => runtime::linear_texture(
                resource.res__linear__devPtr as u64,
                resource.res__linear__sizeInBytes as u64,
                &resource.res__linear__desc,
                normalized_read,
            )?,
            // cudaResourceTypePitch2D: devPtr, desc, width (where linear has its size),
            // height, pitchInBytes.
            3 => arrays::pitch2d_texture(
                resource.res__linear__devPtr as u64,
                &resource.res__linear__desc,
                [
                    resource.res__linear__sizeInBytes,
                    resource.res__pitch2D__height,
                    resource.res__pitch2D__pitchInBytes,
                ],
                normalized_read,
                sampler,
            )?,
            _ => {
                runtime::note(
                    "cudaCreateTextureObject: mipmapped-array textures are not supported on the CPU target",
                );
                return Err(CudaError::NotSupported.into());
            }
        };
        let handle = registry().add_texture_object(made);
        put(texture, handle)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaDestroyTextureObject(texture: u64) -> Code {
    api(|| {
        let mut registry = registry();
        Arc::make_mut(&mut registry.texture_objects)
            .remove(&texture)
            .ok_or(CudaError::InvalidValue)?;
        Ok(())
    })
}

/// Binds linear memory to a texture reference; `*offset` is 0 (any alignment is fetched
/// exactly).
#[no_mangle]
pub unsafe extern "C" fn cudaBindTexture(
    offset: *mut usize,
    reference: *const c_void,
    ptr: *const c_void,
    desc: *const ChannelFormatDesc,
    size: usize,
) -> Code {
    api(|| {
        let desc = get(desc)?;
        runtime::bind_texture(reference as usize, ptr as u64, size as u64, &desc)?;
        if !offset.is_null() {
            put(offset, 0)?;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaUnbindTexture(reference: *const c_void) -> Code {
    api(|| Ok(runtime::unbind_texture(reference as usize)?))
}

// ---------------------------------------------------------------------------------------------
// CUDA arrays, 3-D memory, textures over arrays and pitched memory (`arrays.rs`)

/// A side of an array copy: the array from byte `x` of row `y`.
fn array_side(array: *const c_void, x: usize, y: usize) -> Result<Region> {
    Ok(Region::in_array(array as u64, [x, y, 0])?)
}

/// A side of a copy in memory, rows `pitch` apart.
fn memory_side(ptr: *const c_void, pitch: usize, device: bool) -> Result<Region> {
    Region::in_memory(ptr as u64, pitch, 0, device)
}

#[no_mangle]
pub unsafe extern "C" fn cudaMallocArray(
    array: *mut *mut c_void,
    desc: *const ChannelFormatDesc,
    width: usize,
    height: usize,
    flags: c_uint,
) -> Code {
    api(|| {
        let desc = get(desc)?;
        let handle = arrays::malloc_array(&desc, [width, height, 0], flags)?;
        put(array, handle as *mut c_void)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaMalloc3DArray(
    array: *mut *mut c_void,
    desc: *const ChannelFormatDesc,
    extent: Extent,
    flags: c_uint,
) -> Code {
    api(|| {
        let desc = get(desc)?;
        let handle =
            arrays::malloc_array(&desc, [extent.width, extent.height, extent.depth], flags)?;
        put(array, handle as *mut c_void)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaFreeArray(array: *mut c_void) -> Code {
    api(|| arrays::free_array(array as u64))
}

#[no_mangle]
pub unsafe extern "C" fn cudaGetChannelDesc(
    desc: *mut ChannelFormatDesc,
    array: *const c_void,
) -> Code {
    api(|| Ok(put(desc, arrays::array(array as u64)?.desc)?))
}

#[no_mangle]
pub unsafe extern "C" fn cudaArrayGetInfo(
    desc: *mut ChannelFormatDesc,
    extent: *mut Extent,
    flags: *mut c_uint,
    array: *mut c_void,
) -> Code {
    api(|| {
        let array = arrays::array(array as u64)?;
        let [width, height, depth] = array.extent;
        if !desc.is_null() {
            put(desc, array.desc)?;
        }
        if !extent.is_null() {
            put(
                extent,
                Extent {
                    width,
                    height,
                    depth,
                },
            )?;
        }
        if !flags.is_null() {
            put(flags, array.flags)?;
        }
        Ok(())
    })
}

with_async_form!(
    cudaMemcpyToArray,
    cudaMemcpyToArrayAsync,
    (dst: *mut c_void, w_offset: usize, h_offset: usize, src: *const c_void, count: usize, kind: c_int) {
        let (_, src_device) = arrays::device_sides(kind, dst as u64, src as u64)?;
        let to = array_side(dst, w_offset, h_offset)?;
        let from = memory_side(src, count, src_device)?;
        // SAFETY: the host side is the program's contract.
        unsafe { arrays::copy_regions(to, from, [count, 1, 1]) }
    }
);

with_async_form!(
    cudaMemcpyFromArray,
    cudaMemcpyFromArrayAsync,
    (dst: *mut c_void, src: *const c_void, w_offset: usize, h_offset: usize, count: usize, kind: c_int) {
        let (dst_device, _) = arrays::device_sides(kind, dst as u64, src as u64)?;
        let from = array_side(src, w_offset, h_offset)?;
        let to = memory_side(dst, count, dst_device)?;
        // SAFETY: the host side is the program's contract.
        unsafe { arrays::copy_regions(to, from, [count, 1, 1]) }
    }
);

with_async_form!(
    cudaMemcpy2DToArray,
    cudaMemcpy2DToArrayAsync,
    (
        dst: *mut c_void,
        w_offset: usize,
        h_offset: usize,
        src: *const c_void,
        spitch: usize,
        width: usize,
        height: usize,
        kind: c_int,
    ) {
        if width > spitch {
            return Err(CudaError::InvalidPitchValue.into());
        }
        let (_, src_device) = arrays::device_sides(kind, dst as u64, src as u64)?;
        let to = array_side(dst, w_offset, h_offset)?;
        let from = memory_side(src, spitch, src_device)?;
        // SAFETY: the host side is the program's contract.
        unsafe { arrays::copy_regions(to, from, [width, height, 1]) }
    }
);

with_async_form!(
    cudaMemcpy2DFromArray,
    cudaMemcpy2DFromArrayAsync,
    (
        dst: *mut c_void,
        dpitch: usize,
        src: *const c_void,
        w_offset: usize,
        h_offset: usize,
        width: usize,
        height: usize,
        kind: c_int,
    ) {
        if width > dpitch {
            return Err(CudaError::InvalidPitchValue.into());
        }
        let (dst_device, _) = arrays::device_sides(kind, dst as u64, src as u64)?;
        let from = array_side(src, w_offset, h_offset)?;
        let to = memory_side(dst, dpitch, dst_device)?;
        // SAFETY: the host side is the program's contract.
        unsafe { arrays::copy_regions(to, from, [width, height, 1]) }
    }
);

#[no_mangle]
pub unsafe extern "C" fn cudaMemcpyArrayToArray(
    dst: *mut c_void,
    w_offset_dst: usize,
    h_offset_dst: usize,
    src: *const c_void,
    w_offset_src: usize,
    h_offset_src: usize,
    count: usize,
    _kind: c_int,
) -> Code {
    api(|| {
        let to = array_side(dst, w_offset_dst, h_offset_dst)?;
        let from = array_side(src, w_offset_src, h_offset_src)?;
        // SAFETY: both sides are arrays, checked.
        unsafe { arrays::copy_regions(to, from, [count, 1, 1]) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cudaMemcpy2DArrayToArray(
    dst: *mut c_void,
    w_offset_dst: usize,
    h_offset_dst: usize,
    src: *const c_void,
    w_offset_src: usize,
    h_offset_src: usize,
    width: usize,
    height: usize,
    _kind: c_int,
) -> Code {
    api(|| {
        let to = array_side(dst, w_offset_dst, h_offset_dst)?;
        let from = array_side(src, w_offset_src, h_offset_src)?;
        // SAFETY: both sides are arrays, checked.
        unsafe { arrays::copy_regions(to, from, [width, height, 1]) }
    })
}

/// One side of `cudaMemcpy3D`: an array (positions in texels) or pitched memory (x in
/// bytes); returns the side and the bytes per texel that `extent.width` counts in (1 for
/// memory).
fn side_3d(array: *mut c_void, pos: Pos, ptr: PitchedPtr, device: bool) -> Result<(Region, usize)> {
    if !array.is_null() {
        let texel = arrays::array(array as u64)?.texel_bytes();
        let x = pos.x.checked_mul(texel).ok_or(CudaError::InvalidValue)?;
        return Ok((Region::in_array(array as u64, [x, pos.y, pos.z])?, texel));
    }
    let slice = ptr
        .pitch
        .checked_mul(ptr.ysize)
        .ok_or(CudaError::InvalidValue)?;
    let offset = pos
        .z
        .checked_mul(slice)
        .and_then(|n| n.checked_add(pos.y.checked_mul(ptr.pitch)?))
        .and_then(|n| n.checked_add(pos.x))
        .ok_or(CudaError::InvalidValue)?;
    let base = (ptr.ptr as u64).wrapping_add(offset as u64) as *const c_void;
    let mut region = Region::in_memory(base as u64, ptr.pitch, slice, device)?;
    region.slice = slice;
    Ok((region, 1))
}

with_async_form!(
    cudaMemcpy3D,
    cudaMemcpy3DAsync,
    (p: *const Memcpy3DParms) {
        let p = get(p)?;
        if p.srcArray.is_null() == p.srcPtr.ptr.is_null() || p.dstArray.is_null() == p.dstPtr.ptr.is_null() {
            return Err(CudaError::InvalidValue.into());
        }
        let dst_address = if p.dstArray.is_null() { p.dstPtr.ptr as u64 } else { p.dstArray as u64 };
        let src_address = if p.srcArray.is_null() { p.srcPtr.ptr as u64 } else { p.srcArray as u64 };
        let (dst_device, src_device) = arrays::device_sides(p.kind, dst_address, src_address)?;
        let (to, dst_texel) = side_3d(p.dstArray, p.dstPos, p.dstPtr, dst_device)?;
        let (from, src_texel) = side_3d(p.srcArray, p.srcPos, p.srcPtr, src_device)?;
        // With an array on either side, the width counts its texels.
        let texel = dst_texel.max(src_texel);
        let width = p.extent.width.checked_mul(texel).ok_or(CudaError::InvalidValue)?;
        // SAFETY: host sides are the program's contract.
        unsafe { arrays::copy_regions(to, from, [width, p.extent.height, p.extent.depth]) }
    }
);

#[no_mangle]
pub unsafe extern "C" fn cudaMalloc3D(pitched: *mut PitchedPtr, extent: Extent) -> Code {
    api(|| {
        if pitched.is_null() {
            return Err(CudaError::InvalidValue.into());
        }
        let (ptr, pitch) = if extent.width == 0 {
            (0, 0)
        } else {
            arrays::malloc_3d(extent.width, extent.height, extent.depth)?
        };
        put(
            pitched,
            PitchedPtr {
                ptr: ptr as *mut c_void,
                pitch,
                xsize: extent.width,
                ysize: extent.height,
            },
        )?;
        Ok(())
    })
}

with_async_form!(
    cudaMemset3D,
    cudaMemset3DAsync,
    (pitched: PitchedPtr, value: c_int, extent: Extent) {
        let slice = pitched.pitch.checked_mul(pitched.ysize).ok_or(CudaError::InvalidValue)?;
        for z in 0..extent.depth {
            let base = (pitched.ptr as u64).wrapping_add((z * slice) as u64);
            runtime::fill_2d(base, pitched.pitch, value, extent.width, extent.height)?;
        }
        Ok(())
    }
);

#[no_mangle]
pub unsafe extern "C" fn cudaBindTextureToArray(
    reference: *const c_void,
    array: *const c_void,
    _desc: *const ChannelFormatDesc,
) -> Code {
    api(|| {
        let reference = reference as usize;
        let normalized = arrays::reference_reads_normalized(reference)?;
        // SAFETY: a registered reference (checked just above) is the program's struct.
        let sampler = unsafe { arrays::reference_sampler(reference) };
        let texture = arrays::array_texture(array as u64, normalized, sampler)?;
        arrays::bind_reference(reference, texture)
    })
}

/// Binds pitched 2-D memory to a texture reference; `*offset` is 0.
#[no_mangle]
pub unsafe extern "C" fn cudaBindTexture2D(
    offset: *mut usize,
    reference: *const c_void,
    ptr: *const c_void,
    desc: *const ChannelFormatDesc,
    width: usize,
    height: usize,
    pitch: usize,
) -> Code {
    api(|| {
        let desc = get(desc)?;
        let reference = reference as usize;
        let normalized = arrays::reference_reads_normalized(reference)?;
        // SAFETY: a registered reference (checked just above) is the program's struct.
        let sampler = unsafe { arrays::reference_sampler(reference) };
        let texture = arrays::pitch2d_texture(
            ptr as u64,
            &desc,
            [width, height, pitch],
            normalized,
            sampler,
        )?;
        arrays::bind_reference(reference, texture)?;
        if !offset.is_null() {
            put(offset, 0)?;
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Deprecated `cudaThread*` forms of the device calls, which real suites still make

extern "C" {
    /// The host runtime's `cudaDeviceReset` (harvest and write the profile first).
    fn __cuda_flux_device_reset() -> Code;
}

/// `cudaThreadExit`: `cudaDeviceReset`, through the host runtime as an instrumented program's
/// `cudaDeviceReset` goes, so that the profile of the launches so far is written.
#[no_mangle]
pub extern "C" fn cudaThreadExit() -> Code {
    // SAFETY: the host runtime's export, linked into this archive.
    unsafe { __cuda_flux_device_reset() }
}

#[no_mangle]
pub unsafe extern "C" fn cudaThreadSetLimit(limit: c_int, value: usize) -> Code {
    // SAFETY: as the device call.
    unsafe { cudaDeviceSetLimit(limit, value) }
}

#[no_mangle]
pub unsafe extern "C" fn cudaThreadGetLimit(value: *mut usize, limit: c_int) -> Code {
    // SAFETY: as the device call.
    unsafe { cudaDeviceGetLimit(value, limit) }
}

#[no_mangle]
pub unsafe extern "C" fn cudaThreadSetCacheConfig(config: c_int) -> Code {
    // SAFETY: as the device call.
    unsafe { cudaDeviceSetCacheConfig(config) }
}

#[no_mangle]
pub unsafe extern "C" fn cudaThreadGetCacheConfig(config: *mut c_int) -> Code {
    api(|| Ok(put(config, registry().cache_config)?))
}
