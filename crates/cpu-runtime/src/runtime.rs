//! The runtime's state and the logic behind the C ABI (module `api`): launches, copies,
//! allocations, symbols, textures. Everything a call asks for is done before it returns;
//! streams only order nothing further.
//!
//! Locks: `work` (read: a launch or copy touching device memory is running; write: memory is
//! being released) is always taken before `registry`, and `registry` is never held while a
//! kernel runs or a module's PTX is parsed (module locks come before `registry`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::io::Write;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard};
use std::time::Instant;

use ptx_sim::{
    ChannelKind, Engine, Environment, LaunchConfig, Program, SimError, Texture, TextureRef,
};
use thiserror::Error;

use crate::abi::{ChannelFormatDesc, Dim3};
use crate::config;
use crate::device::{self, DeviceShape};
use crate::error::CudaError;
use crate::memory::{self, AddressTable, MemoryKind, ModuleId};
use crate::registry::{Function, Module, Registry};
use crate::stats;

/// Why a call failed: an API error the program sees, or a fault that ends the program.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Failure {
    #[error(transparent)]
    Api(#[from] CudaError),
    /// The kernel faulted, or the PTX could not be loaded: the process ends with this line.
    #[error("{0}")]
    Fault(String),
}

impl From<SimError> for Failure {
    fn from(error: SimError) -> Self {
        match error {
            SimError::UnknownKernel(_) => Failure::Api(CudaError::InvalidDeviceFunction),
            SimError::InvalidLaunch(_) => Failure::Api(CudaError::InvalidConfiguration),
            fault => Failure::Fault(fault.to_string()),
        }
    }
}

pub type Result<T, E = Failure> = std::result::Result<T, E>;

struct Runtime {
    registry: Mutex<Registry>,
    work: RwLock<()>,
    workers: OnceLock<Result<usize, config::ConfigError>>,
    multiprocessors: OnceLock<Result<usize, config::ConfigError>>,
    memcheck: OnceLock<Result<bool, config::ConfigError>>,
    engine: OnceLock<Result<Engine, config::ConfigError>>,
    native_after: OnceLock<Result<u64, config::ConfigError>>,
}

static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| Runtime {
    registry: Mutex::new(Registry::default()),
    work: RwLock::new(()),
    workers: OnceLock::new(),
    multiprocessors: OnceLock::new(),
    memcheck: OnceLock::new(),
    engine: OnceLock::new(),
    native_after: OnceLock::new(),
});

/// The registry, locked. (A panic while it was held ends the process, so poisoning carries
/// no broken state worth refusing.)
pub fn registry() -> MutexGuard<'static, Registry> {
    RUNTIME.registry.lock().unwrap_or_else(|e| e.into_inner())
}

/// Held while device memory is in use by a launch or a copy.
pub fn work_shared() -> RwLockReadGuard<'static, ()> {
    RUNTIME.work.read().unwrap_or_else(|e| e.into_inner())
}

/// Waits until no launch or copy is running and holds them off while `f` runs: what
/// `cudaFree` and `cudaDeviceReset` do on a GPU (they synchronize the device).
fn exclusive<T>(f: impl FnOnce() -> T) -> T {
    let _guard = RUNTIME.work.write().unwrap_or_else(|e| e.into_inner());
    f()
}

/// `cudaDeviceSynchronize`: returns when the launches running on other threads are done.
pub fn synchronize_device() {
    exclusive(|| ());
}

/// A setting from the environment, read once: its value, or its error as a fault.
fn setting<T: Clone>(
    cell: &OnceLock<Result<T, config::ConfigError>>,
    read: fn() -> Result<T, config::ConfigError>,
) -> Result<T> {
    cell.get_or_init(read)
        .clone()
        .map_err(|e| Failure::Fault(e.to_string()))
}

/// Host threads per launch: `CUDA_FLUX_CPU_THREADS` or the host's.
pub fn workers() -> Result<usize> {
    setting(&RUNTIME.workers, config::workers_from_env)
}

/// The emulated device's multiprocessors: `CUDA_FLUX_CPU_SMS` or a fixed default, independent
/// of the host threads (a thread runs several resident CTAs in turn).
pub fn multiprocessors() -> Result<usize> {
    setting(&RUNTIME.multiprocessors, config::multiprocessors_from_env)
}

/// Whether kernels may touch the guard zones around allocations (the default, as a GPU
/// tolerates reads a little outside an allocation) or fault there (`CUDA_FLUX_CPU_MEMCHECK=1`).
pub fn memcheck() -> Result<bool> {
    setting(&RUNTIME.memcheck, config::memcheck_from_env)
}

/// The engine that runs kernels (`CUDA_FLUX_CPU_ENGINE`): the interpreter, or native code for
/// runs of ALU instructions.
pub fn engine() -> Result<Engine> {
    setting(&RUNTIME.engine, config::engine_from_env)
}

/// The warp-instructions the native engine interprets a function for before compiling it
/// (`CUDA_FLUX_CPU_NATIVE_AFTER`).
pub fn native_after() -> Result<u64> {
    setting(&RUNTIME.native_after, config::native_after_from_env)
}

/// The emulated device's shape now.
pub fn device_shape() -> Result<DeviceShape> {
    // The shape does not depend on the host threads, but a bad CUDA_FLUX_CPU_THREADS is
    // reported at the first device query all the same, not only at the first launch.
    workers()?;
    Ok(DeviceShape {
        arch: registry().arch(),
        multiprocessors: multiprocessors()?,
        total_memory: memory::host_memory().1,
    })
}

/// Writes the fault line and ends the process with status 1 without running exit handlers:
/// the host runtime must not write a profile of a run that went wrong. The program's C stdio
/// buffers are flushed first, so its output up to the fault is kept.
pub fn fatal(message: &str) -> ! {
    extern "C" {
        fn fflush(stream: *mut c_void) -> i32;
        fn _exit(status: i32) -> !;
    }
    // SAFETY: fflush(NULL) flushes every C output stream; _exit ends the process.
    unsafe { fflush(std::ptr::null_mut()) };
    let _ = writeln!(std::io::stderr(), "cuda-flux cpu: {message}");
    unsafe { _exit(1) }
}

/// A one-line note on stderr for a call that fails because the CPU target lacks a feature.
pub fn note(message: &str) {
    let _ = writeln!(std::io::stderr(), "cuda-flux cpu: {message}");
}

/// The loaded program of `module`; a fresh load records its variables' ranges.
fn program_of(module: &Module) -> Result<Arc<Program>> {
    let (program, fresh) = module.program(engine()?, native_after()?)?;
    if fresh {
        registry().add_symbols(module.id, &program);
    }
    Ok(program)
}

// ---------------------------------------------------------------------------------------------
// Registration

/// Registers a CPU image; returns the module id.
pub fn register_image(images: Vec<ptx_sim::image::ArchPtx>, handle: usize) -> Result<()> {
    // Reads CUDA_FLUX_CPU_STATS before `main`: the file is written at exit even if nothing is
    // launched.
    stats::collector();
    crate::libraries::note_once();
    let mut registry = registry();
    let module = registry
        .add_module(images)
        .ok_or_else(|| Failure::Fault("the embedded CPU image holds no PTX".into()))?;
    registry.add_handle(handle, module);
    Ok(())
}

fn module_of(registry: &Registry, handle: usize) -> Result<u64> {
    registry.module_of_handle(handle).ok_or_else(|| {
        Failure::Fault(format!(
            "registration with unknown module handle {handle:#x} (not from __cudaRegisterFatBinary)"
        ))
    })
}

pub fn register_function(handle: usize, stub: usize, name: String) -> Result<()> {
    let mut registry = registry();
    let module = module_of(&registry, handle)?;
    registry.functions.insert(
        stub,
        Function {
            module,
            name,
            max_dynamic_shared: None,
            carveout: -1,
        },
    );
    Ok(())
}

pub fn register_variable(handle: usize, host: usize, name: String, size: usize) -> Result<()> {
    let mut registry = registry();
    let module = module_of(&registry, handle)?;
    registry
        .variables
        .insert(host, crate::registry::Variable { module, name, size });
    Ok(())
}

pub fn register_texture(handle: usize, host: usize, name: String, normalized: bool) -> Result<()> {
    let mut registry = registry();
    let module = module_of(&registry, handle)?;
    registry.textures.insert(
        host,
        crate::registry::TextureReference {
            module,
            name,
            normalized_read: normalized,
            bound: None,
        },
    );
    Ok(())
}

pub fn register_surface(handle: usize, host: usize, name: String) -> Result<()> {
    let mut registry = registry();
    let module = module_of(&registry, handle)?;
    registry.surfaces.insert(host, (module, name));
    Ok(())
}

pub fn unregister(handle: usize) {
    registry().remove_module(handle);
}

// ---------------------------------------------------------------------------------------------
// Launches

/// What a kernel may touch: a snapshot of the address table and textures taken at launch.
/// Ranges freed meanwhile cannot disappear under it: freeing waits for running launches.
struct LaunchEnvironment {
    memory: Arc<AddressTable>,
    objects: Arc<HashMap<u64, Texture>>,
    references: HashMap<String, Texture>,
    /// The grid workspace of a cooperative launch (0 otherwise), which CUDA's cooperative
    /// groups find through `%envreg1`/`%envreg2`: `this_grid().is_valid()`, `grid.sync()`.
    grid_workspace: u64,
    /// `CUDA_FLUX_CPU_MEMCHECK=1`: guard zones are not accessible.
    memcheck: bool,
}

/// Bytes of a grid workspace: cooperative groups' `grid_workspace { unsigned wsSize; unsigned
/// barrier; }`, rounded up.
const GRID_WORKSPACE_BYTES: usize = 16;

impl Environment for LaunchEnvironment {
    fn global_accessible(&self, address: u64, len: u64) -> bool {
        self.memory.contains(address, len)
            || (!self.memcheck && self.memory.contains_guarded(address, len))
    }

    fn global_range(&self, address: u64, len: u64) -> Option<(u64, u64)> {
        self.memory.accessible_range(address, len, !self.memcheck)
    }

    fn texture(&self, texture: TextureRef<'_>) -> Option<Texture> {
        match texture {
            TextureRef::Object(handle) => self.objects.get(&handle).copied(),
            TextureRef::Reference(name) => self.references.get(name).copied(),
        }
    }

    fn env_reg(&self, index: u8) -> u32 {
        match index {
            // `load_env_reg64<1, 2>()`: %envreg1 is the high half, %envreg2 the low half.
            1 => (self.grid_workspace >> 32) as u32,
            2 => self.grid_workspace as u32,
            _ => 0,
        }
    }
}

fn dims_valid(dims: Dim3, max: [u32; 3]) -> bool {
    let d = [dims.x, dims.y, dims.z];
    d.iter().zip(max).all(|(&v, m)| v >= 1 && v <= m)
}

/// Checks a launch configuration as cudart does.
pub fn check_config(grid: Dim3, block: Dim3) -> Result<(), CudaError> {
    let threads = u64::from(block.x) * u64::from(block.y) * u64::from(block.z);
    if !dims_valid(block, device::MAX_BLOCK_DIM)
        || !dims_valid(grid, device::MAX_GRID_DIM)
        || threads > u64::from(device::MAX_THREADS_PER_BLOCK)
    {
        return Err(CudaError::InvalidConfiguration);
    }
    Ok(())
}

/// The dynamic shared memory a kernel may use: its opt-in, else what is left of 48 KiB.
fn dynamic_shared_limit(function: &Function, static_bytes: usize) -> usize {
    function
        .max_dynamic_shared
        .unwrap_or_else(|| device::SHARED_PER_BLOCK.saturating_sub(static_bytes))
}

/// Runs a kernel launch to completion.
///
/// # Safety
/// As `cudaLaunchKernel`: `args` holds a pointer per kernel parameter.
#[allow(clippy::too_many_arguments)]
pub unsafe fn launch(
    stub: usize,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared: usize,
    stream: usize,
    cooperative: bool,
) -> Result<()> {
    check_config(grid, block)?;
    // Allocated before the address table is snapshotted for the launch, so that the kernel
    // may use it; zeroed, with `wsSize` set as the driver sets it.
    let grid_workspace = if cooperative {
        let workspace = allocate(GRID_WORKSPACE_BYTES, MemoryKind::Device)?;
        // SAFETY: just allocated, GRID_WORKSPACE_BYTES long and aligned.
        unsafe { *(workspace as *mut u32) = 8 };
        workspace
    } else {
        0
    };
    // SAFETY: the caller's arguments, as for this function.
    let result = unsafe {
        launch_with(
            stub,
            (grid, block),
            args,
            shared,
            stream,
            cooperative,
            grid_workspace,
        )
    };
    if grid_workspace != 0 {
        let _ = free(grid_workspace, &[MemoryKind::Device]);
    }
    result
}

#[allow(clippy::too_many_arguments)]
unsafe fn launch_with(
    stub: usize,
    (grid, block): (Dim3, Dim3),
    args: *mut *mut c_void,
    shared: usize,
    stream: usize,
    cooperative: bool,
    grid_workspace: u64,
) -> Result<()> {
    let (function, module, memory, objects, references) = {
        let registry = registry();
        registry.check_stream(stream)?;
        let function = registry
            .functions
            .get(&stub)
            .cloned()
            .ok_or(CudaError::InvalidDeviceFunction)?;
        let module = registry
            .module(function.module)
            .ok_or(CudaError::InvalidDeviceFunction)?;
        (
            function.clone(),
            module,
            Arc::clone(&registry.memory),
            Arc::clone(&registry.texture_objects),
            registry.bound_references(function.module),
        )
    };
    let workers = workers()?;
    let multiprocessors = multiprocessors()?;
    let program = program_of(&module)?;
    let info = program
        .kernel(&function.name)
        .ok_or(CudaError::InvalidDeviceFunction)?;
    if shared > dynamic_shared_limit(&function, info.static_shared_bytes) {
        return Err(CudaError::InvalidValue.into());
    }
    let resident_per_sm = device::max_active_blocks(
        block.x * block.y * block.z,
        info.static_shared_bytes + shared,
    ) as usize;
    let ctas = usize::try_from(u64::from(grid.x) * u64::from(grid.y) * u64::from(grid.z))
        .unwrap_or(usize::MAX);
    if cooperative && ctas > resident_per_sm.saturating_mul(multiprocessors) {
        return Err(CudaError::CooperativeLaunchTooLarge.into());
    }
    let params = info.param_sizes.len();
    if params > 0 && args.is_null() {
        return Err(CudaError::InvalidValue.into());
    }
    // SAFETY: the caller passes one pointer per parameter.
    let args: Vec<*const u8> = (0..params)
        .map(|i| unsafe { *args.add(i) } as *const u8)
        .collect();
    // CTAs run on `workers` host threads, each running its resident CTAs in turn, and as many
    // are kept resident as the emulated device holds
    // (`cudaOccupancyMaxActiveBlocksPerMultiprocessor` × `multiProcessorCount`): ptx-sim makes
    // more of them resident when the running ones wait, so CTAs that wait for each other
    // without a cooperative launch (a persistent kernel's own barrier) work where a GPU of
    // this shape runs them, whatever the number of host threads. A cooperative launch is no
    // larger than that (checked above), so all its CTAs may be resident: grid.sync() works.
    let resident_ctas = resident_per_sm.max(1).saturating_mul(multiprocessors);
    let config = LaunchConfig {
        grid: [grid.x, grid.y, grid.z],
        block: [block.x, block.y, block.z],
        dynamic_shared_bytes: shared,
        workers,
        resident_ctas,
    };
    let environment = LaunchEnvironment {
        memory: Arc::clone(&memory),
        objects,
        references,
        grid_workspace,
        memcheck: memcheck()?,
    };
    let _work = work_shared();
    let collector = stats::collector();
    let start = collector.map(|_| Instant::now());
    // SAFETY: the arguments are the program's; the environment lists memory that stays
    // allocated while `_work` is held.
    let executed = unsafe { program.launch(&function.name, &config, &args, &environment) }
        .map_err(|error| match error {
            // Say which kernel and which allocation, as compute-sanitizer does.
            SimError::InvalidAddress { address, .. }
            | SimError::MisalignedAddress { address, .. } => {
                let near = memory
                    .describe(address)
                    .map_or_else(String::new, |where_| format!(": {where_}"));
                let strict = if environment.memcheck {
                    format!(" ({}=1)", config::MEMCHECK_VAR)
                } else {
                    String::new()
                };
                Failure::Fault(format!(
                    "{error} in kernel `{}`{near}{strict}",
                    function.name
                ))
            }
            other => Failure::from(other),
        })?;
    if let (Some(collector), Some(start)) = (collector, start) {
        let kernel_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        collector.record(
            &function.name,
            config.grid,
            config.block,
            executed,
            kernel_ns,
        );
    }
    Ok(())
}

/// What `lookup` finds in the registry (with the id of its module), and the loaded program of
/// that module; `missing` when either is not registered. The registry is not held while the
/// module loads.
fn registered<T>(
    missing: CudaError,
    lookup: impl FnOnce(&Registry) -> Option<(T, ModuleId)>,
) -> Result<(T, Arc<Program>)> {
    let (entry, module) = {
        let registry = registry();
        let (entry, id) = lookup(&registry).ok_or(missing)?;
        (entry, registry.module(id).ok_or(missing)?)
    };
    Ok((entry, program_of(&module)?))
}

/// The kernel behind a host stub and its facts.
pub fn kernel_info(stub: usize) -> Result<(Function, ptx_sim::KernelInfo)> {
    let (function, program) = registered(CudaError::InvalidDeviceFunction, |registry| {
        let function = registry.functions.get(&stub)?;
        Some((function.clone(), function.module))
    })?;
    let info = program
        .kernel(&function.name)
        .ok_or(CudaError::InvalidDeviceFunction)?;
    Ok((function, info))
}

/// `cudaFuncSetAttribute`.
pub fn set_function_attribute(stub: usize, attribute: i32, value: i32) -> Result<()> {
    let (_, info) = kernel_info(stub)?;
    let mut registry = registry();
    let function = registry
        .functions
        .get_mut(&stub)
        .ok_or(CudaError::InvalidDeviceFunction)?;
    match attribute {
        // cudaFuncAttributeMaxDynamicSharedMemorySize
        8 => {
            let value = usize::try_from(value).map_err(|_| CudaError::InvalidValue)?;
            if value + info.static_shared_bytes > device::SHARED_PER_BLOCK_OPTIN {
                return Err(CudaError::InvalidValue.into());
            }
            function.max_dynamic_shared = Some(value);
        }
        // cudaFuncAttributePreferredSharedMemoryCarveout
        9 if (-1..=100).contains(&value) => function.carveout = value,
        _ => return Err(CudaError::InvalidValue.into()),
    }
    Ok(())
}

/// `maxDynamicSharedSizeBytes` of `cudaFuncGetAttributes`.
pub fn max_dynamic_shared(function: &Function, info: &ptx_sim::KernelInfo) -> usize {
    dynamic_shared_limit(function, info.static_shared_bytes)
}

// ---------------------------------------------------------------------------------------------
// Memory

/// Allocates `len` bytes of `kind` (0 bytes give the null pointer).
pub fn allocate(len: usize, kind: MemoryKind) -> Result<u64, CudaError> {
    if len == 0 {
        return Ok(0);
    }
    let start = memory::allocate(len)?;
    let mut registry = registry();
    if !Arc::make_mut(&mut registry.memory).insert(start, len as u64, kind) {
        // Cannot happen (the allocator hands out disjoint blocks); do not leak if it does.
        // SAFETY: just allocated with this length.
        unsafe { memory::deallocate(start, len as u64) };
        return Err(CudaError::MemoryAllocation);
    }
    Ok(start)
}

/// Frees an allocation of one of `kinds` that starts at `ptr` (null is a no-op).
pub fn free(ptr: u64, kinds: &[MemoryKind]) -> Result<(), CudaError> {
    if ptr == 0 {
        return Ok(());
    }
    exclusive(|| {
        let mut registry = registry();
        let range = registry
            .memory
            .get(ptr)
            .filter(|r| kinds.contains(&r.kind))
            .ok_or(CudaError::InvalidValue)?;
        Arc::make_mut(&mut registry.memory).remove(ptr);
        drop(registry);
        // SAFETY: recorded by `allocate` with this length, removed from the table just now.
        unsafe { memory::deallocate(ptr, range.len) };
        Ok(())
    })
}

/// `cudaHostRegister`.
pub fn host_register(ptr: u64, len: usize) -> Result<(), CudaError> {
    if ptr == 0 || len == 0 {
        return Err(CudaError::InvalidValue);
    }
    let mut registry = registry();
    if registry.memory.overlaps(ptr, len as u64) {
        return Err(CudaError::HostMemoryAlreadyRegistered);
    }
    if !Arc::make_mut(&mut registry.memory).insert(ptr, len as u64, MemoryKind::Registered) {
        return Err(CudaError::InvalidValue);
    }
    Ok(())
}

/// `cudaHostUnregister`.
pub fn host_unregister(ptr: u64) -> Result<(), CudaError> {
    exclusive(|| {
        let mut registry = registry();
        match registry.memory.get(ptr) {
            Some(range) if range.kind == MemoryKind::Registered => {
                Arc::make_mut(&mut registry.memory).remove(ptr);
                Ok(())
            }
            _ => Err(CudaError::HostMemoryNotRegistered),
        }
    })
}

/// The recorded range holding `ptr`.
pub fn find(ptr: u64) -> Option<(u64, memory::Range)> {
    registry().memory.find(ptr)
}

/// Which sides of a copy of `enum cudaMemcpyKind` `kind` are device memory: (dst, src).
fn device_sides(kind: i32) -> Result<(bool, bool), CudaError> {
    match kind {
        0 => Ok((false, false)),
        1 => Ok((true, false)),
        2 => Ok((false, true)),
        3 => Ok((true, true)),
        // cudaMemcpyDefault: unified addressing tells; nothing to check.
        4 => Ok((false, false)),
        _ => Err(CudaError::InvalidMemcpyDirection),
    }
}

/// Checks that every `(address, len, is_device)` region that is device memory is recorded.
fn check_device(regions: &[(u64, u64, bool)]) -> Result<(), CudaError> {
    let registry = registry();
    for &(address, len, device) in regions {
        if device && !registry.memory.contains(address, len) {
            return Err(CudaError::InvalidValue);
        }
    }
    Ok(())
}

/// `cudaMemcpy` and its asynchronous form.
///
/// # Safety
/// Host-side pointers must be valid for `count` bytes (as with cudart).
pub unsafe fn copy(dst: u64, src: u64, count: usize, kind: i32) -> Result<(), CudaError> {
    let (dst_device, src_device) = device_sides(kind)?;
    if count == 0 {
        return Ok(());
    }
    if dst == 0 || src == 0 {
        return Err(CudaError::InvalidValue);
    }
    let _work = work_shared();
    check_device(&[
        (dst, count as u64, dst_device),
        (src, count as u64, src_device),
    ])?;
    // SAFETY: device sides checked above, host sides the caller's contract. `copy` rather
    // than `copy_nonoverlapping`: overlapping device-to-device copies must not be UB here.
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, count) };
    Ok(())
}

/// The bytes a pitched region spans: `height - 1` pitches and one row.
fn pitched_span(pitch: usize, width: usize, height: usize) -> Result<u64, CudaError> {
    pitch
        .checked_mul(height - 1)
        .and_then(|n| n.checked_add(width))
        .map(|n| n as u64)
        .ok_or(CudaError::InvalidValue)
}

/// `cudaMemcpy2D` and its asynchronous form.
///
/// # Safety
/// As [`copy`], for the rows.
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_2d(
    dst: u64,
    dpitch: usize,
    src: u64,
    spitch: usize,
    width: usize,
    height: usize,
    kind: i32,
) -> Result<(), CudaError> {
    let (dst_device, src_device) = device_sides(kind)?;
    if width > dpitch || width > spitch {
        return Err(CudaError::InvalidPitchValue);
    }
    if width == 0 || height == 0 {
        return Ok(());
    }
    if dst == 0 || src == 0 {
        return Err(CudaError::InvalidValue);
    }
    let _work = work_shared();
    check_device(&[
        (dst, pitched_span(dpitch, width, height)?, dst_device),
        (src, pitched_span(spitch, width, height)?, src_device),
    ])?;
    for row in 0..height {
        // SAFETY: each row lies inside the spans checked (device) or promised (host).
        unsafe {
            std::ptr::copy(
                (src as *const u8).add(row * spitch),
                (dst as *mut u8).add(row * dpitch),
                width,
            )
        };
    }
    Ok(())
}

/// `cudaMemset` and its asynchronous form.
pub fn fill(ptr: u64, value: i32, count: usize) -> Result<(), CudaError> {
    fill_2d(ptr, count, value, count, 1)
}

/// `cudaMemset2D`.
pub fn fill_2d(
    ptr: u64,
    pitch: usize,
    value: i32,
    width: usize,
    height: usize,
) -> Result<(), CudaError> {
    if width > pitch {
        return Err(CudaError::InvalidPitchValue);
    }
    if width == 0 || height == 0 {
        return Ok(());
    }
    let _work = work_shared();
    check_device(&[(ptr, pitched_span(pitch, width, height)?, true)])?;
    for row in 0..height {
        // SAFETY: the rows lie inside the checked device range.
        unsafe { std::ptr::write_bytes((ptr as *mut u8).add(row * pitch), value as u8, width) };
    }
    Ok(())
}

/// Address and size of the module variable whose host shadow is `symbol`.
pub fn symbol(symbol: usize) -> Result<(u64, u64)> {
    let (name, program) = registered(CudaError::InvalidSymbol, |registry| {
        let variable = registry.variables.get(&symbol)?;
        Some((variable.name.clone(), variable.module))
    })?;
    Ok(program.symbol(&name).ok_or(CudaError::InvalidSymbol)?)
}

/// `cudaMemcpyToSymbol` (`to_symbol`) and `cudaMemcpyFromSymbol`, and their async forms.
///
/// # Safety
/// The non-symbol side must be valid for `count` bytes where it is host memory.
pub unsafe fn copy_symbol(
    symbol_host: usize,
    other: u64,
    count: usize,
    offset: usize,
    kind: i32,
    to_symbol: bool,
) -> Result<()> {
    // The symbol is device memory; the other side's direction must agree.
    let allowed = if to_symbol { [1, 3, 4] } else { [2, 3, 4] };
    if !allowed.contains(&kind) {
        return Err(CudaError::InvalidMemcpyDirection.into());
    }
    let (address, size) = symbol(symbol_host)?;
    let end = offset.checked_add(count).ok_or(CudaError::InvalidValue)?;
    if end as u64 > size {
        return Err(CudaError::InvalidValue.into());
    }
    let at = address + offset as u64;
    let (dst, src) = if to_symbol { (at, other) } else { (other, at) };
    if count == 0 {
        return Ok(());
    }
    if other == 0 {
        return Err(CudaError::InvalidValue.into());
    }
    let _work = work_shared();
    // A device-to-device copy names device memory on the other side too.
    check_device(&[(other, count as u64, kind == 3)])?;
    // SAFETY: the symbol side is the module variable's memory (range checked), the other side
    // the caller's contract or checked device memory.
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, count) };
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Textures

/// A channel descriptor as ptx-sim's texel format: (kind, channels, bits per channel).
pub fn channel_format(desc: &ChannelFormatDesc) -> Result<(ChannelKind, u8, u8), CudaError> {
    let kind = match desc.f {
        0 => ChannelKind::Signed,
        1 => ChannelKind::Unsigned,
        2 => ChannelKind::Float,
        _ => return Err(CudaError::InvalidChannelDescriptor),
    };
    let bits = [desc.x, desc.y, desc.z, desc.w];
    let channels = bits.iter().take_while(|&&b| b != 0).count();
    let width = desc.x;
    let valid = matches!(channels, 1 | 2 | 4)
        && bits[channels..].iter().all(|&b| b == 0)
        && bits[..channels].iter().all(|&b| b == width)
        && matches!(width, 8 | 16 | 32)
        && (kind != ChannelKind::Float || width != 8);
    if !valid {
        return Err(CudaError::InvalidChannelDescriptor);
    }
    Ok((kind, channels as u8, width as u8))
}

/// A texture over `len` bytes of device memory at `base`.
pub fn linear_texture(
    base: u64,
    len: u64,
    desc: &ChannelFormatDesc,
    normalized_read: bool,
) -> Result<Texture, CudaError> {
    let (kind, channels, bits) = channel_format(desc)?;
    // Normalized reads apply to 8- and 16-bit integer texels only; float texels ignore them.
    if normalized_read && kind != ChannelKind::Float && bits == 32 {
        return Err(CudaError::InvalidValue);
    }
    let texel = u64::from(channels) * u64::from(bits) / 8;
    if base == 0 || len / texel > device::MAX_TEXTURE_1D_LINEAR as u64 {
        return Err(CudaError::InvalidValue);
    }
    if !registry().memory.contains(base, len) {
        return Err(CudaError::InvalidValue);
    }
    Ok(Texture {
        base,
        len_bytes: len,
        kind,
        channels,
        bits_per_channel: bits,
        normalized_float: normalized_read && kind != ChannelKind::Float,
        sampling: None,
    })
}

/// `cudaBindTexture`.
pub fn bind_texture(
    reference: usize,
    base: u64,
    len: u64,
    desc: &ChannelFormatDesc,
) -> Result<(), CudaError> {
    let normalized = registry()
        .textures
        .get(&reference)
        .ok_or(CudaError::InvalidTexture)?
        .normalized_read;
    // cudaBindTexture's size defaults to UINT_MAX ("the rest"): bind at most up to the end of
    // the allocation holding `base`.
    let (start, range) = find(base).ok_or(CudaError::InvalidValue)?;
    let len = len.min(start + range.len - base);
    let texture = linear_texture(base, len, desc, normalized)?;
    registry()
        .textures
        .get_mut(&reference)
        .ok_or(CudaError::InvalidTexture)?
        .bound = Some(texture);
    Ok(())
}

/// `cudaUnbindTexture`.
pub fn unbind_texture(reference: usize) -> Result<(), CudaError> {
    registry()
        .textures
        .get_mut(&reference)
        .ok_or(CudaError::InvalidTexture)?
        .bound = None;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Device

/// `cudaDeviceReset`: frees every allocation and registration, destroys streams, events and
/// texture objects, unbinds texture references, restores limits and flags, and unloads the
/// modules (their variables get their initial values back at next use).
pub fn reset_device() {
    exclusive(|| {
        let (freed, modules) = {
            let mut registry = registry();
            let freed = Arc::make_mut(&mut registry.memory).remove_where(|_| true);
            registry.streams.clear();
            registry.events.clear();
            registry.texture_objects = Arc::default();
            registry.arrays.clear();
            for reference in registry.textures.values_mut() {
                reference.bound = None;
            }
            for function in registry.functions.values_mut() {
                function.max_dynamic_shared = None;
                function.carveout = -1;
            }
            registry.limits = crate::registry::DEFAULT_LIMITS;
            registry.device_flags = 0;
            registry.cache_config = 0;
            registry.shared_config = 0;
            let modules: Vec<Arc<Module>> = registry.modules().cloned().collect();
            (freed, modules)
        };
        for (start, range) in freed {
            if range.kind.owned() {
                // SAFETY: an allocation of ours, just removed from the table.
                unsafe { memory::deallocate(start, range.len) };
            }
        }
        for module in modules {
            module.unload();
        }
    });
}

thread_local! {
    /// The `<<<...>>>` configurations pushed and not yet popped on this thread.
    static CALL_CONFIGURATIONS: RefCell<Vec<CallConfiguration>> = const { RefCell::new(Vec::new()) };
    /// `cudaThreadExchangeStreamCaptureMode`'s per-thread mode (`cudaStreamCaptureModeGlobal`).
    static CAPTURE_MODE: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// What `__cudaPushCallConfiguration` saves.
#[derive(Debug, Clone, Copy)]
pub struct CallConfiguration {
    pub grid: Dim3,
    pub block: Dim3,
    pub shared: usize,
    pub stream: usize,
}

pub fn push_configuration(configuration: CallConfiguration) {
    CALL_CONFIGURATIONS.with(|stack| stack.borrow_mut().push(configuration));
}

pub fn pop_configuration() -> Option<CallConfiguration> {
    CALL_CONFIGURATIONS.with(|stack| stack.borrow_mut().pop())
}

pub fn exchange_capture_mode(mode: i32) -> i32 {
    CAPTURE_MODE.with(|current| current.replace(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dim(x: u32, y: u32, z: u32) -> Dim3 {
        Dim3 { x, y, z }
    }

    #[test]
    fn launch_configurations_are_checked_like_cudart() {
        assert_eq!(check_config(dim(1, 1, 1), dim(1024, 1, 1)), Ok(()));
        assert_eq!(
            check_config(dim(i32::MAX as u32, 65535, 65535), dim(1, 1, 64)),
            Ok(())
        );
        for (grid, block) in [
            (dim(0, 1, 1), dim(1, 1, 1)),
            (dim(1, 1, 1), dim(0, 1, 1)),
            (dim(1, 1, 1), dim(1025, 1, 1)),
            (dim(1, 1, 1), dim(32, 32, 2)),
            (dim(1, 1, 1), dim(1, 1, 65)),
            (dim(1 << 31, 1, 1), dim(1, 1, 1)),
            (dim(1, 65536, 1), dim(1, 1, 1)),
        ] {
            assert_eq!(
                check_config(grid, block),
                Err(CudaError::InvalidConfiguration),
                "{grid:?} {block:?}"
            );
        }
    }

    fn desc(x: i32, y: i32, z: i32, w: i32, f: i32) -> ChannelFormatDesc {
        ChannelFormatDesc { x, y, z, w, f }
    }

    #[test]
    fn channel_descriptors_map_to_texel_formats() {
        assert_eq!(
            channel_format(&desc(32, 0, 0, 0, 2)),
            Ok((ChannelKind::Float, 1, 32))
        );
        assert_eq!(
            channel_format(&desc(8, 8, 8, 8, 1)),
            Ok((ChannelKind::Unsigned, 4, 8))
        );
        assert_eq!(
            channel_format(&desc(16, 16, 0, 0, 0)),
            Ok((ChannelKind::Signed, 2, 16))
        );
        for bad in [
            desc(0, 0, 0, 0, 2),
            desc(32, 32, 32, 0, 2),
            desc(32, 0, 32, 0, 2),
            desc(32, 16, 0, 0, 2),
            desc(8, 0, 0, 0, 2),
            desc(12, 0, 0, 0, 1),
            desc(32, 0, 0, 0, 3),
            desc(32, 0, 0, 0, -1),
        ] {
            assert_eq!(
                channel_format(&bad),
                Err(CudaError::InvalidChannelDescriptor),
                "{:?}",
                (bad.x, bad.y, bad.z, bad.w, bad.f)
            );
        }
    }

    #[test]
    fn sim_errors_map_to_api_errors_or_faults() {
        assert_eq!(
            Failure::from(SimError::UnknownKernel("k".into())),
            Failure::Api(CudaError::InvalidDeviceFunction)
        );
        assert_eq!(
            Failure::from(SimError::InvalidLaunch("x".into())),
            Failure::Api(CudaError::InvalidConfiguration)
        );
        let fault = Failure::from(SimError::Trap { line: 12 });
        assert_eq!(
            fault,
            Failure::Fault("kernel executed `trap` at PTX line 12".into())
        );
    }

    #[test]
    fn copy_directions_name_the_device_sides() {
        assert_eq!(device_sides(0), Ok((false, false)));
        assert_eq!(device_sides(1), Ok((true, false)));
        assert_eq!(device_sides(2), Ok((false, true)));
        assert_eq!(device_sides(3), Ok((true, true)));
        assert_eq!(device_sides(4), Ok((false, false)));
        assert_eq!(device_sides(5), Err(CudaError::InvalidMemcpyDirection));
        assert_eq!(device_sides(-1), Err(CudaError::InvalidMemcpyDirection));
    }
}
