//! The C ABI the compiler's host pass calls. Each entry point catches panics: profiling must
//! never abort the program, and a launch must happen exactly once.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, OnceLock};

use crate::config::{claim_instance, instance_output, Config, INSTANCES_VARIABLE};
use crate::cuda::{Code, Cuda, FuncSetting, LaunchKind};
use crate::ffi::{LaunchConfig, RealCuda};
use crate::runtime::Runtime;
use crate::Dim3;

extern "C" {
    fn atexit(function: extern "C" fn()) -> c_int;
}

static RUNTIME: OnceLock<Runtime<RealCuda>> = OnceLock::new();
static EARLY_EXIT_HOOK: Once = Once::new();
static LATE_EXIT_HOOK: AtomicBool = AtomicBool::new(false);

fn warn(line: &str) {
    // Never panic on a closed stderr.
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The runtime, created (and the environment read) at first use.
fn runtime() -> &'static Runtime<RealCuda> {
    RUNTIME.get_or_init(|| {
        let (mut config, messages) = Config::from_env();
        for message in &messages {
            warn(message);
        }
        // Several runtimes in one process (GPU target: shared libraries linked with their
        // own) each write a profile of their own rather than replace each other's.
        let pid = std::process::id();
        let found = std::env::var(INSTANCES_VARIABLE).ok();
        let (instance, value) = claim_instance(found.as_deref(), pid);
        std::env::set_var(INSTANCES_VARIABLE, value);
        if instance > 1 {
            config.output = instance_output(&config.output, instance);
            warn(&format!(
                "cuda-flux: this process holds {instance} cuda-flux runtimes (shared libraries \
                 linked with their own); this one writes {}",
                config.output.display()
            ));
        }
        Runtime::new(RealCuda, config, std::process::id(), Box::new(warn))
    })
}

extern "C" fn at_exit() {
    let _ = catch_unwind(|| {
        if let Some(runtime) = RUNTIME.get() {
            runtime.exit();
        }
    });
}

/// Registers one snapshot of a kernel. See the crate documentation.
///
/// # Safety
///
/// `snapshot_json` must be null or point to `snapshot_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn __cuda_flux_register_kernel(
    original_stub: *const c_void,
    clone_stub: *const c_void,
    snapshot_json: *const u8,
    snapshot_len: usize,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let json: &[u8] = if snapshot_json.is_null() {
            &[]
        } else {
            // SAFETY: the caller passes the embedded snapshot and its length.
            unsafe { std::slice::from_raw_parts(snapshot_json, snapshot_len) }
        };
        runtime().register(original_stub as usize, clone_stub as usize, json);
        // Exit handlers run in reverse order of registration. This one, registered during
        // static initialization, runs late: after the module destructor and after whatever
        // the CUDA runtime registers when it initializes, when counters may no longer be
        // readable. The hook registered at the first recorded launch (below) runs before
        // those and does the work; this one then finds it done. It touches CUDA only if a
        // launch found a GPU.
        EARLY_EXIT_HOOK.call_once(|| {
            // SAFETY: registering a plain function.
            unsafe { atexit(at_exit) };
        });
    }));
}

/// The four launch entry points: a launch the program made through the call `kind` names.
/// The clone is launched (or the launch forwarded) through that same call; should the runtime
/// panic before the program's kernel was launched, it is launched unchanged.
///
/// # Safety
///
/// As `cudaLaunchKernel`.
unsafe fn launch(
    kind: LaunchKind,
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_bytes: usize,
    stream: *mut c_void,
) -> Code {
    let launched = Cell::new(None);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let runtime = runtime();
        // SAFETY: the caller's arguments, as for cudaLaunchKernel.
        let code = unsafe {
            runtime.launch(
                kind,
                func,
                grid,
                block,
                args,
                shared_bytes,
                stream,
                &launched,
            )
        };
        if runtime.recorded() > 0 && !LATE_EXIT_HOOK.swap(true, Ordering::Relaxed) {
            // Registered after the CUDA runtime initialized (the launch did), so it runs
            // before the CUDA runtime tears itself down at exit and can still read counters.
            // SAFETY: registering a plain function.
            unsafe { atexit(at_exit) };
        }
        code
    }));
    match (result, launched.get()) {
        (Ok(code), _) => code,
        (Err(_), Some(code)) => code,
        // SAFETY: the caller's arguments, unchanged.
        (Err(_), None) => unsafe {
            RealCuda.launch(
                kind,
                func as usize,
                grid,
                block,
                args,
                shared_bytes,
                stream as usize,
            )
        },
    }
}

/// Defines one exported launch entry point with `cudaLaunchKernel`'s signature, which hands
/// the launch to [`launch`] with its kind.
macro_rules! launch_entry_point {
    ($(#[$doc:meta])* $name:ident, $kind:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// As the CUDA call it replaces.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            func: *const c_void,
            grid: Dim3,
            block: Dim3,
            args: *mut *mut c_void,
            shared_bytes: usize,
            stream: *mut c_void,
        ) -> Code {
            // SAFETY: the caller's contract.
            unsafe { launch($kind, func, grid, block, args, shared_bytes, stream) }
        }
    };
}

launch_entry_point!(
    /// `cudaLaunchKernel` for registered kernels. See the crate documentation.
    __cuda_flux_launch_kernel,
    LaunchKind::Plain
);
launch_entry_point!(
    /// `cudaLaunchKernel_ptsz` (per-thread default stream) for registered kernels.
    __cuda_flux_launch_kernel_ptsz,
    LaunchKind::PerThread
);
launch_entry_point!(
    /// `cudaLaunchCooperativeKernel` for registered kernels.
    __cuda_flux_launch_cooperative_kernel,
    LaunchKind::Cooperative
);
launch_entry_point!(
    /// `cudaLaunchCooperativeKernel_ptsz` (per-thread default stream) for registered kernels.
    __cuda_flux_launch_cooperative_kernel_ptsz,
    LaunchKind::CooperativePerThread
);

/// The `cudaLaunchKernelExC` entry points: the config's grid, block, shared bytes and stream
/// go the way of every launch; its attributes travel in the kind, to the same call.
///
/// # Safety
///
/// As `cudaLaunchKernelExC`.
unsafe fn launch_extended(
    per_thread: bool,
    config: *const LaunchConfig,
    func: *const c_void,
    args: *mut *mut c_void,
) -> Code {
    // SAFETY: a non-null config is the caller's `cudaLaunchConfig_t`.
    let Some(config) = (unsafe { config.as_ref() }) else {
        // Nothing to profile: let CUDA report the invalid config.
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { crate::ffi::launch_extended(per_thread, config, func, args) };
    };
    let (attrs, num_attrs) = (config.attrs as usize, config.numAttrs);
    let kind = if per_thread {
        LaunchKind::ExtendedPerThread { attrs, num_attrs }
    } else {
        LaunchKind::Extended { attrs, num_attrs }
    };
    // SAFETY: the caller's contract.
    unsafe {
        launch(
            kind,
            func,
            config.gridDim,
            config.blockDim,
            args,
            config.dynamicSmemBytes,
            config.stream,
        )
    }
}

/// `cudaLaunchKernelExC` for registered kernels.
///
/// # Safety
///
/// As `cudaLaunchKernelExC`.
#[no_mangle]
pub unsafe extern "C" fn __cuda_flux_launch_kernel_ex_c(
    config: *const LaunchConfig,
    func: *const c_void,
    args: *mut *mut c_void,
) -> Code {
    // SAFETY: the caller's contract.
    unsafe { launch_extended(false, config, func, args) }
}

/// `cudaLaunchKernelExC_ptsz` (per-thread default stream) for registered kernels.
///
/// # Safety
///
/// As `cudaLaunchKernelExC_ptsz`.
#[no_mangle]
pub unsafe extern "C" fn __cuda_flux_launch_kernel_ex_c_ptsz(
    config: *const LaunchConfig,
    func: *const c_void,
    args: *mut *mut c_void,
) -> Code {
    // SAFETY: the caller's contract.
    unsafe { launch_extended(true, config, func, args) }
}

/// A per-function setting: made on `func`, and repeated on its counting clone. Should the
/// runtime panic, the setting is made on `func` alone.
fn func_set(func: *const c_void, setting: FuncSetting) -> Code {
    let done = Cell::new(None);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let code = runtime().func_set(func as usize, setting);
        done.set(Some(code));
        code
    }));
    match (result, done.get()) {
        (Ok(code), _) | (Err(_), Some(code)) => code,
        (Err(_), None) => RealCuda.func_set(func as usize, setting),
    }
}

/// `cudaFuncSetAttribute`, also applied to the kernel's counting clone.
#[no_mangle]
pub extern "C" fn __cuda_flux_func_set_attribute(
    func: *const c_void,
    attribute: c_int,
    value: c_int,
) -> Code {
    func_set(func, FuncSetting::Attribute { attribute, value })
}

/// `cudaFuncSetCacheConfig`, also applied to the kernel's counting clone.
#[no_mangle]
pub extern "C" fn __cuda_flux_func_set_cache_config(func: *const c_void, config: c_int) -> Code {
    func_set(func, FuncSetting::CacheConfig(config))
}

/// `cudaFuncSetSharedMemConfig`, also applied to the kernel's counting clone.
#[no_mangle]
pub extern "C" fn __cuda_flux_func_set_shared_mem_config(
    func: *const c_void,
    config: c_int,
) -> Code {
    func_set(func, FuncSetting::SharedMemConfig(config))
}

/// `cudaDeviceReset` (and `cudaThreadExit`) for instrumented programs: harvest and write the
/// profile, then reset.
#[no_mangle]
pub extern "C" fn __cuda_flux_device_reset() -> Code {
    let _ = catch_unwind(|| {
        if let Some(runtime) = RUNTIME.get() {
            runtime.before_device_reset();
        }
    });
    RealCuda.device_reset()
}

/// One entry of [`__cuda_flux_runtime_exports`]: an entry point's C name and address.
#[repr(C)]
pub struct ExportEntry {
    name: *const u8,
    function: *const c_void,
}

/// The entry points, in a table an instrumented object's carried resolver reads
/// (`crates/wrapper/src/driver/carry.rs`): each object defines weak stand-ins for the
/// `__cuda_flux_*` entry points, which a static link of this library overrides only where the
/// archive member holding them is extracted. Links that name this symbol (`-u`, a linker
/// script's `EXTERN`) extract it, and the stand-ins then call through it. Ends with a null name.
#[repr(C)]
pub struct ExportTable(pub [ExportEntry; 12]);

// SAFETY: read-only addresses of functions and string literals.
unsafe impl Sync for ExportTable {}

macro_rules! export_entry {
    ($name:ident) => {
        ExportEntry {
            name: concat!(stringify!($name), "\0").as_ptr(),
            function: $name as *const c_void,
        }
    };
}

#[no_mangle]
pub static __cuda_flux_runtime_exports: ExportTable = ExportTable([
    export_entry!(__cuda_flux_register_kernel),
    export_entry!(__cuda_flux_launch_kernel),
    export_entry!(__cuda_flux_launch_kernel_ptsz),
    export_entry!(__cuda_flux_launch_cooperative_kernel),
    export_entry!(__cuda_flux_launch_cooperative_kernel_ptsz),
    export_entry!(__cuda_flux_launch_kernel_ex_c),
    export_entry!(__cuda_flux_launch_kernel_ex_c_ptsz),
    export_entry!(__cuda_flux_func_set_attribute),
    export_entry!(__cuda_flux_func_set_cache_config),
    export_entry!(__cuda_flux_func_set_shared_mem_config),
    export_entry!(__cuda_flux_device_reset),
    ExportEntry {
        name: std::ptr::null(),
        function: std::ptr::null(),
    },
]);

/// What links name to extract the static runtime (`-u`, a linker script's `EXTERN`): the
/// objects' carried part refers to [`__cuda_flux_runtime_exports`] only weakly, and a weak
/// reference extracts no archive member, nor does an `EXTERN` of a symbol already weakly
/// referenced. Nothing refers to this one, so naming it extracts it, and it the table.
#[no_mangle]
pub static __cuda_flux_runtime_link: &ExportTable = &__cuda_flux_runtime_exports;
