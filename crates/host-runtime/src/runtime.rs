//! The runtime proper: registered kernels, launch routing, the counter-buffer pool, lazy
//! harvesting and the profile. Generic over [`Cuda`] so that tests can run it on a simulated
//! device.
//!
//! Locking: one mutex guards all state. It is held for bookkeeping, snapshot selection, pool
//! allocation and non-blocking event queries, never across the program's own launch nor while
//! waiting for a launch to finish (except at exit and device reset).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::args::{extend_args, launch_param_bits};
use crate::config::{Config, Mode};
use crate::counts::{add_opcode_counts, fold_banks, OpcodeTable};
use crate::cuda::{Code, Cuda, FuncSetting, LaunchKind, CAPTURE_MODE_RELAXED, SUCCESS};
use crate::from_launch::counts_from_launch;
use crate::output::{program_arguments, write_atomically};
use crate::report::{self, BlockCounts, OpcodeCounts, Report};
use crate::snapshot::{self, Snapshot, ThreadFlow};
use crate::Dim3;
use device_runtime::from_launch::LaunchValues;

/// Bytes of one block's counters in one bank, as the counter code writes them (16: a widening
/// of a small constant, checked at compile time).
const COUNTER_PAIR_BYTES: usize = device_runtime::COUNTER_PAIR_BYTES as usize;
const _: () = assert!(COUNTER_PAIR_BYTES as u64 == device_runtime::COUNTER_PAIR_BYTES);
/// Smallest counter buffer allocated (sizes are rounded up to powers of two from here).
const MIN_SLOT_BYTES: usize = 4096;
/// Soft limits of one device's pool; past them, launches wait for the oldest pending one
/// instead of allocating more.
const MAX_POOL_SLOTS: usize = 1024;
const MAX_POOL_BYTES: usize = 256 << 20;

/// Where a stderr line goes.
pub(crate) type Warn = Box<dyn Fn(&str) + Send + Sync>;

pub(crate) struct Runtime<C> {
    cuda: C,
    config: Config,
    pid: u32,
    warn: Warn,
    state: Mutex<State>,
    /// Launches recorded so far (counted or not).
    recorded: AtomicU64,
    exited: AtomicBool,
}

#[derive(Default)]
struct State {
    kernels: Vec<Kernel>,
    by_stub: HashMap<usize, usize>,
    /// Whether a usable device exists; `None` until the first launch asks.
    gpu: Option<bool>,
    devices: BTreeMap<i32, report::Device>,
    selections: HashMap<(usize, i32), Selection>,
    pools: HashMap<i32, Pool>,
    /// Per device, bumped by a device reset: slots of older generations are gone.
    generations: HashMap<i32, u64>,
    /// Something changed since the profile was last written.
    dirty: bool,
}

struct Kernel {
    original: usize,
    clone: Option<usize>,
    profiled: bool,
    /// In registration order (indices stay valid); the report orders them by architecture.
    variants: Vec<Variant>,
}

struct Variant {
    snapshot: Snapshot,
    launches: Vec<LaunchRecord>,
    /// `(index, bytes)` of the kernel parameters its launch-counted blocks read, recorded at
    /// each launch.
    launch_params: Vec<(usize, u8)>,
    /// The launch-counted blocks' counts by launch shape and parameter values: programs launch
    /// the same kernel the same way again and again (an iterative solver's sweeps), and
    /// counting takes some 0.1 to 1 ms per launch.
    launch_counts: RefCell<HashMap<LaunchKey, Vec<(u64, u64)>>>,
}

/// What a launch-counted block's counts depend on besides the snapshot and the mode (one per
/// process): the grid, the block shape and the parameters' bits.
type LaunchKey = ([u32; 3], [u32; 3], Vec<Option<u64>>);

/// Distinct launches whose counts a variant keeps ([`Variant::launch_counts`]); beyond this the
/// cache starts again.
const LAUNCH_COUNTS_CACHED: usize = 256;

struct LaunchRecord {
    grid: Dim3,
    block: Dim3,
    shared_bytes: usize,
    stream: usize,
    device: i32,
    outcome: Outcome,
    /// The bits of the kernel parameters the snapshot's launch-counted blocks read (by index;
    /// `None` for the others), taken when the clone was launched.
    params: Vec<Option<u64>>,
}

enum Outcome {
    Pending,
    Counted { threads: Vec<u64>, warps: Vec<u64> },
    Uncounted(String),
}

#[derive(Clone)]
enum Selection {
    /// Launch the clone; counts follow variant `variant`'s blocks.
    Clone { variant: usize, max_threads: i32 },
    /// Launch the original; the launch is listed under `variant`, uncounted.
    Original { variant: usize, reason: String },
}

/// A counter buffer on the device, its pinned staging copy and the event that says the copy is
/// complete.
struct Slot {
    device_ptr: u64,
    host_ptr: usize,
    capacity: usize,
    event: usize,
    generation: u64,
}

struct Pending {
    slot: Slot,
    /// The launch whose counts the slot will hold; `None` when the slot only waits for its
    /// stream to get past work queued on it (a clone that failed to launch).
    target: Option<Target>,
    /// The launch ran but reading its counters back could not be set up.
    failure: Option<String>,
}

/// Where a pending launch's counts go, and the buffer's shape.
struct Target {
    kernel: usize,
    variant: usize,
    launch: usize,
    banks: usize,
    blocks: usize,
    bytes: usize,
}

#[derive(Default)]
struct Pool {
    free: Vec<Slot>,
    pending: VecDeque<Pending>,
    slots: usize,
    bytes: usize,
}

enum Plan {
    Forward,
    Original {
        kernel: usize,
        variant: usize,
        device: i32,
        reason: String,
    },
    Clone(ClonePlan),
}

struct ClonePlan {
    kernel: usize,
    variant: usize,
    device: i32,
    clone: usize,
    params: usize,
    blocks: usize,
    banks: BankLayout,
    bytes: usize,
    slot: Slot,
}

/// How a launch's counter buffer is banked: `count` banks of every block's counter pair, and
/// the clone's `banks` parameter that makes the device pick its bank (device-runtime's
/// `entry_prologue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BankLayout {
    pub(crate) count: usize,
    pub(crate) param: u32,
}

impl BankLayout {
    /// The banks of a launch of `grid` × `block` threads under `config`; `packed`: whether
    /// the kernel has packed counters (see the snapshot). Normally `config.banks` banks, one
    /// per streaming multiprocessor modulo the count. A packed counter is exact while fewer
    /// than `PACKED_THREADS_LIMIT` threads reach one bank (every thread runs its block at most
    /// once); where the mode counts more threads than that in the whole launch, the banks are
    /// also split by ranges of linear CTA ids that hold fewer threads each, `config.banks`
    /// banks per range. Errors with the reason the launch cannot be counted.
    pub(crate) fn of(
        config: &Config,
        grid: Dim3,
        block: Dim3,
        packed: bool,
    ) -> Result<Self, String> {
        let sm_banks = config.banks;
        let mode = config.mode();
        let cta_threads = u64::from(block.x) * u64::from(block.y) * u64::from(block.z);
        let ctas = u64::from(grid.x) * u64::from(grid.y) * u64::from(grid.z);
        let counted_threads = match mode {
            Mode::All => u128::from(ctas) * u128::from(cta_threads),
            Mode::Cta | Mode::Warp => u128::from(cta_threads),
        };
        let plain = BankLayout {
            count: sm_banks as usize,
            param: (sm_banks - 1) | (mode.device_code() << device_runtime::MODE_SHIFT),
        };
        if !packed || counted_threads < u128::from(device_runtime::PACKED_THREADS_LIMIT) {
            return Ok(plain);
        }
        // The most CTAs of a range: a power of two whose threads stay below the limit.
        let limit = (device_runtime::PACKED_THREADS_LIMIT - 1) / cta_threads.max(1);
        let shift = limit.max(1).ilog2();
        let ranges = ctas.div_ceil(1u64 << shift);
        let count = ranges
            .checked_mul(u64::from(sm_banks))
            .filter(|&n| n <= device_runtime::MAX_RANGED_BANKS)
            .ok_or_else(|| {
                format!(
                    "a grid of {counted_threads} threads needs more than {} counter banks",
                    device_runtime::MAX_RANGED_BANKS
                )
            })?;
        Ok(BankLayout {
            count: count as usize,
            param: device_runtime::ranged_banks_param(sm_banks - 1, shift),
        })
    }
}

/// The program's launch, as passed to `cudaLaunchKernel` (or the call `kind` names).
struct CloneLaunch {
    kind: LaunchKind,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_bytes: usize,
    stream: usize,
}

enum Take {
    Slot(Slot),
    Failed(String),
    /// The pool is full: wait for this launch, harvest it, try again.
    Wait(Pending),
}

impl<C: Cuda> Runtime<C> {
    pub(crate) fn new(cuda: C, config: Config, pid: u32, warn: Warn) -> Self {
        Runtime {
            cuda,
            config,
            pid,
            warn,
            state: Mutex::new(State::default()),
            recorded: AtomicU64::new(0),
            exited: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn name(&self, code: Code) -> String {
        self.cuda.error_name(code)
    }

    /// Launches recorded so far.
    pub(crate) fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    /// `__cuda_flux_register_kernel`: one snapshot of kernel `original` (host stub), whose
    /// instrumented clone is `clone` (0 when there is none).
    pub(crate) fn register(&self, original: usize, clone: usize, json: &[u8]) {
        if original == 0 {
            (self.warn)("cuda-flux: ignoring a kernel registration without a kernel stub");
            return;
        }
        let snapshot = match Snapshot::from_json(json) {
            Ok(snapshot) => snapshot,
            Err(error) => {
                (self.warn)(&format!(
                    "cuda-flux: ignoring a kernel registration: {error}; the kernel runs uncounted"
                ));
                return;
            }
        };
        let mut state = self.lock();
        let state = &mut *state;
        let index = match state.by_stub.get(&original) {
            Some(&index) => index,
            None => {
                state.kernels.push(Kernel {
                    original,
                    clone: None,
                    profiled: self.config.profiles(&snapshot.kernel, &snapshot.demangled),
                    variants: Vec::new(),
                });
                state.by_stub.insert(original, state.kernels.len() - 1);
                state.kernels.len() - 1
            }
        };
        let kernel = &mut state.kernels[index];
        if clone != 0 {
            match kernel.clone {
                None => kernel.clone = Some(clone),
                Some(first) if first != clone => (self.warn)(&format!(
                    "cuda-flux: kernel {} was registered with two different clones; using the first",
                    snapshot.kernel
                )),
                Some(_) => {}
            }
        }
        match kernel
            .variants
            .iter()
            .find(|v| v.snapshot.arch == snapshot.arch)
        {
            Some(v) if v.snapshot == snapshot => {}
            Some(_) => (self.warn)(&format!(
                "cuda-flux: kernel {} has two different snapshots for sm_{}; using the first",
                snapshot.kernel, snapshot.arch
            )),
            None => {
                let mut launch_params = Vec::new();
                for counted in &snapshot.launch_counted {
                    counted.params(&mut launch_params);
                }
                kernel.variants.push(Variant {
                    snapshot,
                    launches: Vec::new(),
                    launch_params,
                    launch_counts: RefCell::new(HashMap::new()),
                })
            }
        }
        state.selections.retain(|&(k, _), _| k != index);
    }

    /// `__cuda_flux_launch_kernel` and its siblings: a launch the program made through the
    /// call `kind` names; the clone is launched, or the launch forwarded, through the same call.
    /// `launched` receives the result of the launch that ran the program's kernel (original or
    /// clone) as soon as it happened, so that a caller recovering from a panic knows not to
    /// launch again.
    ///
    /// # Safety
    ///
    /// As `cudaLaunchKernel`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn launch(
        &self,
        kind: LaunchKind,
        func: *const c_void,
        grid: Dim3,
        block: Dim3,
        args: *mut *mut c_void,
        shared_bytes: usize,
        stream: *mut c_void,
        launched: &Cell<Option<Code>>,
    ) -> Code {
        let (func, stream) = (func as usize, stream as usize);
        let original = || {
            // SAFETY: the program's own launch, unchanged.
            let code = unsafe {
                self.cuda
                    .launch(kind, func, grid, block, args, shared_bytes, stream)
            };
            launched.set(Some(code));
            code
        };
        match self.plan(func, grid, block, kind.stream(stream)) {
            Plan::Forward => original(),
            Plan::Original {
                kernel,
                variant,
                device,
                reason,
            } => {
                let code = original();
                if code == SUCCESS {
                    let record = LaunchRecord {
                        grid,
                        block,
                        shared_bytes,
                        stream,
                        device,
                        outcome: Outcome::Uncounted(reason),
                        params: Vec::new(),
                    };
                    self.record(&mut self.lock(), kernel, variant, record);
                }
                code
            }
            Plan::Clone(plan) => {
                let (kernel, variant, device) = (plan.kernel, plan.variant, plan.device);
                let record = |outcome| LaunchRecord {
                    grid,
                    block,
                    shared_bytes,
                    stream,
                    device,
                    outcome,
                    params: Vec::new(),
                };
                let clone_launch = CloneLaunch {
                    kind,
                    grid,
                    block,
                    args,
                    shared_bytes,
                    stream,
                };
                // SAFETY: forwarded from the caller.
                match unsafe { self.launch_clone(plan, clone_launch, launched) } {
                    Ok(()) => SUCCESS,
                    Err(reason) => {
                        let code = original();
                        if code == SUCCESS {
                            let outcome = Outcome::Uncounted(reason);
                            self.record(&mut self.lock(), kernel, variant, record(outcome));
                        }
                        code
                    }
                }
            }
        }
    }

    /// `cudaFuncSetAttribute`, `cudaFuncSetCacheConfig` or `cudaFuncSetSharedMemConfig` on
    /// `func`, as the program made it: applied to `func`, and when that succeeds and `func` is
    /// a kernel with a counting clone, to the clone too, so that the clone launches wherever
    /// the original does (a kernel opted in to more than 48 KiB of dynamic shared memory).
    /// Returns the original's result; a failure on the clone is cleared (its launches then fall
    /// back to the original, with the reason in the profile).
    pub(crate) fn func_set(&self, func: usize, setting: FuncSetting) -> Code {
        let code = self.cuda.func_set(func, setting);
        if code != SUCCESS {
            return code;
        }
        let clone = {
            let state = self.lock();
            state
                .by_stub
                .get(&func)
                .and_then(|&kernel| state.kernels[kernel].clone)
        };
        if let Some(clone) = clone {
            if self.cuda.func_set(clone, setting) != SUCCESS {
                self.cuda.clear_error();
            }
        }
        code
    }

    /// Decides how to run a launch of `func` on `stream` (a handle any API call understands:
    /// [`LaunchKind::stream`]); for the clone, also takes a counter buffer.
    fn plan(&self, func: usize, grid: Dim3, block: Dim3, stream: usize) -> Plan {
        let mut state = self.lock();
        let Some(&kernel) = state.by_stub.get(&func) else {
            return Plan::Forward;
        };
        if !state.kernels[kernel].profiled || !self.gpu_available(&mut state) {
            return Plan::Forward;
        }
        let device = match self.cuda.get_device() {
            Ok(device) => device,
            Err(_) => {
                self.cuda.clear_error();
                return Plan::Forward;
            }
        };
        let selection = self.relaxed(|| {
            self.note_device(&mut state, device);
            self.selection(&mut state, kernel, device)
        });
        let original = |variant, reason| Plan::Original {
            kernel,
            variant,
            device,
            reason,
        };
        let (variant, max_threads) = match selection {
            Selection::Original { variant, reason } => return original(variant, reason),
            Selection::Clone {
                variant,
                max_threads,
            } => (variant, max_threads),
        };
        let threads = u64::from(block.x) * u64::from(block.y) * u64::from(block.z);
        if max_threads > 0 && threads > max_threads as u64 {
            return original(
                variant,
                format!(
                    "a block of {threads} threads is more than the instrumented clone allows ({max_threads})"
                ),
            );
        }
        match self.cuda.stream_is_capturing(stream) {
            Ok(false) => {}
            Ok(true) => {
                return original(
                    variant,
                    "the stream is being captured into a CUDA graph; graphs are not counted yet"
                        .to_owned(),
                )
            }
            Err(code) => {
                self.cuda.clear_error();
                return original(
                    variant,
                    format!("cudaStreamIsCapturing failed: {}", self.name(code)),
                );
            }
        }
        let Some(clone) = state.kernels[kernel].clone else {
            return original(variant, "no instrumented clone".to_owned());
        };
        let snapshot = &state.kernels[kernel].variants[variant].snapshot;
        let (params, blocks) = (snapshot.params, snapshot.blocks.len());
        let packed = !snapshot.packed_counts.is_empty();
        let banks = match BankLayout::of(&self.config, grid, block, packed) {
            Ok(banks) => banks,
            Err(reason) => return original(variant, reason),
        };
        let Some(bytes) = banks
            .count
            .checked_mul(blocks)
            .and_then(|n| n.checked_mul(COUNTER_PAIR_BYTES))
        else {
            return original(variant, "the counter buffer would be too large".to_owned());
        };
        loop {
            match self.relaxed(|| self.take_slot(&mut state, device, bytes)) {
                Take::Slot(slot) => {
                    return Plan::Clone(ClonePlan {
                        kernel,
                        variant,
                        device,
                        clone,
                        params,
                        blocks,
                        banks,
                        bytes,
                        slot,
                    })
                }
                Take::Failed(reason) => return original(variant, reason),
                Take::Wait(pending) => {
                    drop(state);
                    let result = self.relaxed(|| self.cuda.event_synchronize(pending.slot.event));
                    state = self.lock();
                    self.complete(&mut state, device, pending, result);
                }
            }
        }
    }

    /// Runs the clone with counter buffer `plan.slot` and queues the read-back. On `Err`
    /// nothing ran (the slot went back to the pool) and the reason says why.
    unsafe fn launch_clone(
        &self,
        plan: ClonePlan,
        launch: CloneLaunch,
        launched: &Cell<Option<Code>>,
    ) -> Result<(), String> {
        let CloneLaunch {
            kind,
            grid,
            block,
            args,
            shared_bytes,
            stream,
        } = launch;
        // The runtime's own work goes on the stream the clone runs on; the clone itself gets
        // the program's stream value with the program's launch call.
        let queue = kind.stream(stream);
        let ClonePlan {
            kernel,
            variant,
            device,
            clone,
            params,
            blocks,
            banks,
            bytes,
            slot,
        } = plan;
        // Nothing was queued on the stream: the buffer is free again at once.
        let give_back = |slot, reason: String| {
            self.cuda.clear_error();
            self.release(&mut self.lock(), device, slot);
            Err(reason)
        };
        let mut counters: u64 = slot.device_ptr;
        // The clone's `banks` parameter (device-runtime's `entry_prologue`); the harvest folds
        // `banks.count` banks, never this packed value.
        let mut banks_param: u32 = banks.param;
        let extra: [*mut c_void; 2] = [
            (&mut counters as *mut u64).cast(),
            (&mut banks_param as *mut u32).cast(),
        ];
        // SAFETY: `args` holds the original's `params` arguments (cudaLaunchKernel's contract).
        let Some(mut clone_args) = (unsafe { extend_args(args, params, extra) }) else {
            return give_back(slot, "the launch passed no kernel arguments".to_owned());
        };
        if let Err(code) = self.cuda.memset_async(slot.device_ptr, bytes, queue) {
            return give_back(
                slot,
                format!("clearing the counter buffer failed: {}", self.name(code)),
            );
        }
        // SAFETY: the clone takes the original's parameters plus the two counter parameters.
        let code = unsafe {
            self.cuda.launch(
                kind,
                clone,
                grid,
                block,
                clone_args.as_mut_ptr(),
                shared_bytes,
                stream,
            )
        };
        if code != SUCCESS {
            let reason = format!(
                "launching the instrumented clone failed: {}; the original kernel ran",
                self.name(code)
            );
            self.cuda.clear_error();
            // The clearing is queued on the stream: the buffer is free once the stream gets
            // past it, not before (another stream could be counting into it by then).
            let recorded = self.cuda.event_record(slot.event, queue);
            let mut state = self.lock();
            match recorded {
                Ok(()) => self.queue(&mut state, device, slot, None, None),
                Err(_) => {
                    self.cuda.clear_error();
                    self.forget(&mut state, device, slot);
                }
            }
            return Err(reason);
        }
        launched.set(Some(SUCCESS));
        let failure =
            match self
                .cuda
                .memcpy_to_host_async(slot.host_ptr, slot.device_ptr, bytes, queue)
            {
                Ok(()) => None,
                Err(code) => {
                    self.cuda.clear_error();
                    Some(format!(
                        "reading the counters back failed: cudaMemcpyAsync returned {}",
                        self.name(code)
                    ))
                }
            };
        let recorded = self.cuda.event_record(slot.event, queue);
        let mut state = self.lock();
        let wanted = &state.kernels[kernel].variants[variant].launch_params;
        // SAFETY: `args` holds the original's `params` arguments, each pointing to a value of
        // its parameter's size (cudaLaunchKernel's contract); `wanted` names parameters of the
        // kernel's own scalar types, with their sizes, from its PTX.
        let params = unsafe { launch_param_bits(args, params, wanted) };
        let record = LaunchRecord {
            grid,
            block,
            shared_bytes,
            stream,
            device,
            outcome: Outcome::Pending,
            params,
        };
        let launch = self.record(&mut state, kernel, variant, record);
        match recorded {
            Ok(()) => {
                let target = Target {
                    kernel,
                    variant,
                    launch,
                    banks: banks.count,
                    blocks,
                    bytes,
                };
                self.queue(&mut state, device, slot, Some(target), failure);
            }
            Err(code) => {
                self.cuda.clear_error();
                self.forget(&mut state, device, slot);
                state.kernels[kernel].variants[variant].launches[launch].outcome =
                    Outcome::Uncounted(format!(
                        "reading the counters back failed: cudaEventRecord returned {}",
                        self.name(code)
                    ));
            }
        }
        Ok(())
    }

    /// Queues a slot whose event was recorded: harvested (into `target`, if any) once the
    /// event completes.
    fn queue(
        &self,
        state: &mut State,
        device: i32,
        slot: Slot,
        target: Option<Target>,
        failure: Option<String>,
    ) {
        let pending = Pending {
            slot,
            target,
            failure,
        };
        state
            .pools
            .entry(device)
            .or_default()
            .pending
            .push_back(pending);
    }

    /// Drops a slot the device may still be using, with nothing to tell when it stops: it is
    /// never reused (nor freed).
    fn forget(&self, state: &mut State, device: i32, slot: Slot) {
        let pool = state.pools.entry(device).or_default();
        pool.slots = pool.slots.saturating_sub(1);
        pool.bytes = pool.bytes.saturating_sub(slot.capacity);
    }

    /// Runs `f` with this thread's stream-capture mode relaxed: the runtime's own allocations,
    /// event queries and waits are "potentially unsafe" calls that would otherwise fail, and
    /// invalidate a graph capture another thread has under way in global mode.
    fn relaxed<R>(&self, f: impl FnOnce() -> R) -> R {
        let previous = match self.cuda.exchange_capture_mode(CAPTURE_MODE_RELAXED) {
            Ok(previous) => Some(previous),
            Err(_) => {
                self.cuda.clear_error();
                None
            }
        };
        let result = f();
        if let Some(previous) = previous {
            if self.cuda.exchange_capture_mode(previous).is_err() {
                self.cuda.clear_error();
            }
        }
        result
    }

    fn record(
        &self,
        state: &mut State,
        kernel: usize,
        variant: usize,
        record: LaunchRecord,
    ) -> usize {
        let launches = &mut state.kernels[kernel].variants[variant].launches;
        launches.push(record);
        state.dirty = true;
        self.recorded.fetch_add(1, Ordering::Relaxed);
        launches.len() - 1
    }

    fn gpu_available(&self, state: &mut State) -> bool {
        *state
            .gpu
            .get_or_insert_with(|| match self.cuda.device_count() {
                Ok(count) => count > 0,
                Err(_) => {
                    self.cuda.clear_error();
                    false
                }
            })
    }

    fn note_device(&self, state: &mut State, device: i32) {
        if state.devices.contains_key(&device) {
            return;
        }
        let entry = match self.cuda.device_info(device) {
            Ok(info) => report::Device {
                ordinal: device,
                name: info.name,
                compute_capability: format!("{}.{}", info.major, info.minor),
            },
            Err(_) => {
                self.cuda.clear_error();
                report::Device {
                    ordinal: device,
                    name: "unknown".to_owned(),
                    compute_capability: "unknown".to_owned(),
                }
            }
        };
        state.devices.insert(device, entry);
    }

    fn selection(&self, state: &mut State, kernel: usize, device: i32) -> Selection {
        if let Some(selection) = state.selections.get(&(kernel, device)) {
            return selection.clone();
        }
        let selection = self.select(&state.kernels[kernel], device);
        state.selections.insert((kernel, device), selection.clone());
        selection
    }

    /// Chooses the snapshot (and so clone or original) for `kernel` on the current device.
    fn select(&self, kernel: &Kernel, device: i32) -> Selection {
        let archs: Vec<u32> = kernel.variants.iter().map(|v| v.snapshot.arch).collect();
        let highest = (0..archs.len()).max_by_key(|&i| archs[i]).unwrap_or(0);
        let reason_of = |variant: usize| kernel.variants[variant].snapshot.unusable_reason();
        // The variant whose code runs when the original is launched.
        let variant_of_original = || match self.cuda.func_info(kernel.original) {
            Ok(info) => {
                snapshot::select(&archs, info.binary_version.max(0) as u32).unwrap_or(highest)
            }
            Err(_) => {
                self.cuda.clear_error();
                highest
            }
        };
        let Some(clone) = kernel.clone else {
            let variant = variant_of_original();
            let reason = reason_of(variant)
                .unwrap_or_else(|| "registered without an instrumented clone".to_owned());
            return Selection::Original { variant, reason };
        };
        match self.cuda.func_info(clone) {
            Ok(info) => {
                let version = info.binary_version.max(0) as u32;
                match snapshot::select(&archs, version) {
                    Some(variant) => match reason_of(variant) {
                        None => Selection::Clone {
                            variant,
                            max_threads: info.max_threads_per_block,
                        },
                        Some(reason) => Selection::Original { variant, reason },
                    },
                    None => Selection::Original {
                        variant: highest,
                        reason: format!(
                            "no snapshot for code of sm_{version} (snapshots: {})",
                            archs
                                .iter()
                                .map(|a| format!("sm_{a}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    },
                }
            }
            Err(code) => {
                self.cuda.clear_error();
                let variant = variant_of_original();
                let reason = reason_of(variant).unwrap_or_else(|| {
                    format!(
                        "the instrumented clone cannot run on device {device}: cudaFuncGetAttributes returned {}",
                        self.name(code)
                    )
                });
                Selection::Original { variant, reason }
            }
        }
    }

    /// A free counter buffer of at least `bytes` on `device`: reused, freed up by harvesting
    /// finished launches, or newly allocated.
    fn take_slot(&self, state: &mut State, device: i32, bytes: usize) -> Take {
        let generation = state.generations.get(&device).copied().unwrap_or(0);
        loop {
            let pool = state.pools.entry(device).or_default();
            let best = pool
                .free
                .iter()
                .enumerate()
                .filter(|(_, s)| s.capacity >= bytes)
                .min_by_key(|(_, s)| s.capacity)
                .map(|(i, _)| i);
            if let Some(i) = best {
                return Take::Slot(pool.free.swap_remove(i));
            }
            // Harvest launches that have finished, oldest first, without waiting.
            let mut finished = Vec::new();
            while let Some(front) = pool.pending.front() {
                let result = match self.cuda.event_query(front.slot.event) {
                    Ok(false) => break,
                    Ok(true) => Ok(()),
                    Err(code) => {
                        self.cuda.clear_error();
                        Err(code)
                    }
                };
                if let Some(pending) = pool.pending.pop_front() {
                    finished.push((pending, result));
                }
            }
            if !finished.is_empty() {
                for (pending, result) in finished {
                    self.complete(state, device, pending, result);
                }
                continue;
            }
            let Some(capacity) = bytes.max(MIN_SLOT_BYTES).checked_next_power_of_two() else {
                return Take::Failed("the counter buffer would be too large".to_owned());
            };
            let within = pool.slots < MAX_POOL_SLOTS && pool.bytes + capacity <= MAX_POOL_BYTES;
            if !within && !pool.pending.is_empty() {
                return match pool.pending.pop_front() {
                    Some(pending) => Take::Wait(pending),
                    None => Take::Failed("the counter pool is exhausted".to_owned()),
                };
            }
            if !within {
                // Only idle buffers, all too small: make room.
                for slot in std::mem::take(&mut pool.free) {
                    pool.slots = pool.slots.saturating_sub(1);
                    pool.bytes = pool.bytes.saturating_sub(slot.capacity);
                    self.free_slot(slot);
                }
            }
            return match self.allocate_slot(capacity, generation) {
                Ok(slot) => {
                    pool.slots += 1;
                    pool.bytes += capacity;
                    Take::Slot(slot)
                }
                Err(reason) => Take::Failed(reason),
            };
        }
    }

    fn allocate_slot(&self, capacity: usize, generation: u64) -> Result<Slot, String> {
        let failed = |call: &str, code| {
            self.cuda.clear_error();
            format!(
                "allocating a counter buffer of {capacity} bytes failed: {call} returned {}",
                self.name(code)
            )
        };
        let device_ptr = self
            .cuda
            .malloc(capacity)
            .map_err(|c| failed("cudaMalloc", c))?;
        let host_ptr = match self.cuda.malloc_host(capacity) {
            Ok(ptr) => ptr,
            Err(code) => {
                self.cuda.free(device_ptr);
                return Err(failed("cudaMallocHost", code));
            }
        };
        let event = match self.cuda.event_create() {
            Ok(event) => event,
            Err(code) => {
                self.cuda.free(device_ptr);
                self.cuda.free_host(host_ptr);
                return Err(failed("cudaEventCreateWithFlags", code));
            }
        };
        Ok(Slot {
            device_ptr,
            host_ptr,
            capacity,
            event,
            generation,
        })
    }

    fn free_slot(&self, slot: Slot) {
        self.cuda.event_destroy(slot.event);
        self.cuda.free_host(slot.host_ptr);
        self.cuda.free(slot.device_ptr);
    }

    /// Returns a slot to its device's pool, unless the device was reset since it was taken.
    fn release(&self, state: &mut State, device: i32, slot: Slot) {
        if state.generations.get(&device).copied().unwrap_or(0) == slot.generation {
            state.pools.entry(device).or_default().free.push(slot);
        }
    }

    /// Stores the counts of a finished launch (`result`: of waiting for it) and frees its slot.
    fn complete(&self, state: &mut State, device: i32, pending: Pending, result: Result<(), Code>) {
        let Pending {
            slot,
            target,
            failure,
        } = pending;
        if let Some(target) = target {
            let outcome = match (failure, result) {
                (Some(reason), _) => Outcome::Uncounted(reason),
                (None, Err(code)) => Outcome::Uncounted(format!(
                    "reading the counters back failed: {}",
                    self.name(code)
                )),
                (None, Ok(())) => {
                    let words = target.bytes.min(slot.capacity) / 8;
                    // SAFETY: the slot's pinned buffer holds `capacity` bytes, and the copy
                    // into it has completed.
                    let buffer =
                        unsafe { std::slice::from_raw_parts(slot.host_ptr as *const u64, words) };
                    let packed = state
                        .kernels
                        .get(target.kernel)
                        .and_then(|k| k.variants.get(target.variant))
                        .map_or(&[][..], |v| &v.snapshot.packed_counts[..]);
                    match fold_banks(buffer, target.banks, target.blocks, packed) {
                        Ok((mut threads, mut warps)) => {
                            match self.fill_uncounted_blocks(
                                state,
                                &target,
                                &mut threads,
                                &mut warps,
                            ) {
                                Ok(()) => Outcome::Counted { threads, warps },
                                Err(reason) => Outcome::Uncounted(reason),
                            }
                        }
                        Err(reason) => Outcome::Uncounted(reason),
                    }
                }
            };
            if let Some(record) = state
                .kernels
                .get_mut(target.kernel)
                .and_then(|k| k.variants.get_mut(target.variant))
                .and_then(|v| v.launches.get_mut(target.launch))
            {
                record.outcome = outcome;
            }
            state.dirty = true;
        }
        self.release(state, device, slot);
    }

    /// Fills in the counts of the blocks the device does not count (see the snapshot): the
    /// entry block's and the launch-counted blocks' from the launch (its shape and the
    /// parameters recorded with it), then the copies, the flows, the differences and the
    /// copies again.
    fn fill_uncounted_blocks(
        &self,
        state: &State,
        target: &Target,
        threads: &mut [u64],
        warps: &mut [u64],
    ) -> Result<(), String> {
        let Some(variant) = state
            .kernels
            .get(target.kernel)
            .and_then(|k| k.variants.get(target.variant))
        else {
            return Ok(());
        };
        if variant.snapshot.entry_from_launch && !threads.is_empty() {
            if let Some(launch) = variant.launches.get(target.launch) {
                let (entry_threads, entry_warps) = self.entry_counts(launch)?;
                threads[0] = entry_threads;
                warps[0] = entry_warps;
            }
        }
        let launch_counted = &variant.snapshot.launch_counted;
        if !launch_counted.is_empty() {
            if let Some(launch) = variant.launches.get(target.launch) {
                let key: LaunchKey = (
                    [launch.grid.x, launch.grid.y, launch.grid.z],
                    [launch.block.x, launch.block.y, launch.block.z],
                    launch.params.clone(),
                );
                let cached = variant.launch_counts.borrow().get(&key).cloned();
                let counts = match cached {
                    Some(counts) => counts,
                    None => {
                        let values = LaunchValues {
                            grid: key.0,
                            block: key.1,
                            params: key.2.clone(),
                        };
                        let counts =
                            counts_from_launch(launch_counted, &values, self.config.mode())?;
                        let mut cache = variant.launch_counts.borrow_mut();
                        if cache.len() >= LAUNCH_COUNTS_CACHED {
                            cache.clear();
                        }
                        cache.insert(key, counts.clone());
                        counts
                    }
                };
                for (counted, (block_threads, block_warps)) in launch_counted.iter().zip(counts) {
                    let slot = threads
                        .get_mut(counted.block)
                        .zip(warps.get_mut(counted.block));
                    let Some((t, w)) = slot else {
                        return Err(format!(
                            "the snapshot counts block {} of {} from the launch",
                            counted.block,
                            threads.len()
                        ));
                    };
                    (*t, *w) = (block_threads, block_warps);
                }
            }
        }
        let snapshot = &variant.snapshot;
        let copy = |threads: &mut [u64], warps: &mut [u64]| {
            for &[block, from] in &snapshot.copied_counts {
                if block >= threads.len() || from >= threads.len() {
                    return Err(format!(
                        "the snapshot copies counts between blocks {from} and {block} of {}",
                        threads.len()
                    ));
                }
                threads[block] = threads[from];
                warps[block] = warps[from];
            }
            Ok(())
        };
        copy(threads, warps)?;
        // Flows read only counts the device wrote or the launch gave, never derived ones.
        let mut derived: Vec<(usize, u64)> = Vec::with_capacity(snapshot.thread_flows.len());
        for flow in &snapshot.thread_flows {
            derived.push((flow.block, evaluate_flow(flow, threads)?));
        }
        for (block, value) in derived {
            threads[block] = value;
        }
        for &[block, branch, sibling] in &snapshot.warp_differences {
            let value = |b: usize| {
                warps.get(b).copied().ok_or_else(|| {
                    format!(
                        "the snapshot derives block {block} from blocks {branch} and {sibling} \
                         of {}",
                        warps.len()
                    )
                })
            };
            let difference = value(branch)?.checked_sub(value(sibling)?).ok_or_else(|| {
                format!(
                    "block {sibling} ran more often than the branch before it (block {branch}): \
                     the counts are inconsistent"
                )
            })?;
            warps[block] = difference;
        }
        // Copies of derived blocks.
        copy(threads, warps)
    }

    /// The counts of a launch's entry block where the device does not count it (the snapshot's
    /// `entry_from_launch`): every thread the mode counts runs it once, and every counted warp
    /// with all its launched lanes.
    fn entry_counts(&self, launch: &LaunchRecord) -> Result<(u64, u64), String> {
        let (grid, block) = (launch.grid, launch.block);
        let cta_threads = u64::from(block.x) * u64::from(block.y) * u64::from(block.z);
        let cta_warps = cta_threads.div_ceil(32);
        let ctas = u64::from(grid.x) * u64::from(grid.y) * u64::from(grid.z);
        let counts = match self.config.mode() {
            Mode::All => ctas
                .checked_mul(cta_threads)
                .zip(ctas.checked_mul(cta_warps)),
            Mode::Cta => Some((cta_threads, cta_warps)),
            Mode::Warp => Some((cta_threads.min(32), cta_warps.min(1))),
        };
        counts.ok_or_else(|| "the launch has more threads than a 64-bit count holds".to_owned())
    }

    /// Waits for every pending launch on every device and stores its counts.
    fn harvest_all(&self, state: &mut State) {
        let mut devices: Vec<i32> = state
            .pools
            .iter()
            .filter(|(_, pool)| !pool.pending.is_empty())
            .map(|(&device, _)| device)
            .collect();
        if devices.is_empty() {
            return;
        }
        devices.sort_unstable();
        let current = self.cuda.get_device().ok();
        for device in devices {
            if self.cuda.set_device(device).is_err() {
                self.cuda.clear_error();
            }
            while let Some(pending) = state
                .pools
                .get_mut(&device)
                .and_then(|pool| pool.pending.pop_front())
            {
                let result = self.cuda.event_synchronize(pending.slot.event);
                if result.is_err() {
                    self.cuda.clear_error();
                }
                self.complete(state, device, pending, result);
            }
        }
        if let Some(device) = current {
            if self.cuda.set_device(device).is_err() {
                self.cuda.clear_error();
            }
        }
    }

    /// Before `cudaDeviceReset`: reads back every pending launch, frees the current device's
    /// counter buffers (the reset would destroy them) and writes the profile.
    pub(crate) fn before_device_reset(&self) {
        let mut state = self.lock();
        if state.gpu == Some(true) {
            self.relaxed(|| self.release_device(&mut state));
        }
        self.write(&mut state);
    }

    /// Harvests everything, then frees the current device's counter buffers and retires their
    /// generation.
    fn release_device(&self, state: &mut State) {
        self.harvest_all(state);
        match self.cuda.get_device() {
            Ok(device) => {
                if let Some(pool) = state.pools.remove(&device) {
                    for slot in pool.free {
                        self.free_slot(slot);
                    }
                }
                *state.generations.entry(device).or_default() += 1;
            }
            Err(_) => self.cuda.clear_error(),
        }
    }

    /// `__cuda_flux_device_reset`.
    #[cfg(test)]
    pub(crate) fn device_reset(&self) -> Code {
        self.before_device_reset();
        self.cuda.device_reset()
    }

    /// At exit (once): reads back every pending launch and writes the profile.
    pub(crate) fn exit(&self) {
        if self.exited.swap(true, Ordering::SeqCst) || std::process::id() != self.pid {
            // Already done, or a forked child: the parent owns the profile.
            return;
        }
        let mut state = self.lock();
        if state.gpu == Some(true) {
            self.relaxed(|| self.harvest_all(&mut state));
        }
        self.write(&mut state);
        if let Some(names) = &self.config.kernels {
            if !state.kernels.is_empty() && state.kernels.iter().all(|k| !k.profiled) {
                (self.warn)(&format!(
                    "cuda-flux: CUDA_FLUX_KERNELS='{}' matched none of the program's {} kernels",
                    names.join(","),
                    state.kernels.len()
                ));
            }
        }
    }

    /// Writes the profile if a launch was recorded and something changed since the last write.
    fn write(&self, state: &mut State) {
        if !state.dirty || self.recorded() == 0 {
            return;
        }
        state.dirty = false;
        let report = self.report(state);
        let result = serde_json::to_vec(&report)
            .map_err(|e| format!("cuda-flux: cannot serialize the profile: {e}"))
            .and_then(|mut bytes| {
                bytes.push(b'\n');
                write_atomically(&self.config.output, &bytes).map_err(|e| format!("cuda-flux: {e}"))
            });
        if let Err(message) = result {
            (self.warn)(&message);
        }
    }

    fn report(&self, state: &State) -> Report {
        let mut used = BTreeSet::new();
        let mut kernels = Vec::new();
        for kernel in state.kernels.iter().filter(|k| k.profiled) {
            let mut variants: Vec<&Variant> = kernel.variants.iter().collect();
            variants.sort_by_key(|v| v.snapshot.arch);
            // One entry per kernel as a rule: the architectures its launches ran (several only
            // when devices of different architectures ran it), or, for a kernel never launched,
            // the highest architecture it was compiled for.
            if variants.iter().any(|v| !v.launches.is_empty()) {
                variants.retain(|v| !v.launches.is_empty());
            } else if let Some(highest) = variants.pop() {
                variants = vec![highest];
            }
            for variant in variants {
                used.extend(variant.launches.iter().map(|l| l.device));
                kernels.push(kernel_report(
                    &variant.snapshot,
                    &variant.launches,
                    self.config.mode(),
                ));
            }
        }
        let devices = used
            .into_iter()
            .map(|ordinal| {
                state
                    .devices
                    .get(&ordinal)
                    .cloned()
                    .unwrap_or(report::Device {
                        ordinal,
                        name: "unknown".to_owned(),
                        compute_capability: "unknown".to_owned(),
                    })
            })
            .collect();
        Report {
            schema: report::SCHEMA.to_owned(),
            program: program_arguments(),
            pid: self.pid,
            devices,
            kernels,
        }
    }
}

/// One kernel entry of the profile: `snapshot`'s description and its launches' counts.
fn kernel_report(snapshot: &Snapshot, launches: &[LaunchRecord], mode: Mode) -> report::Kernel {
    let table = OpcodeTable::new(&snapshot.blocks);
    let mut totals = OpcodeCounts::new();
    let launches = launches
        .iter()
        .map(|l| {
            let (reason, block_counts, instructions) = match &l.outcome {
                Outcome::Counted { threads, warps } => {
                    let counts = table.count(threads, warps);
                    add_opcode_counts(&mut totals, &counts);
                    let block_counts = BlockCounts {
                        threads: threads.clone(),
                        warps: warps.clone(),
                    };
                    (None, Some(block_counts), Some(counts))
                }
                Outcome::Uncounted(reason) => (Some(reason.clone()), None, None),
                Outcome::Pending => (
                    Some("the counters were not read back".to_owned()),
                    None,
                    None,
                ),
            };
            report::Launch {
                grid: [l.grid.x, l.grid.y, l.grid.z],
                block: [l.block.x, l.block.y, l.block.z],
                dynamic_shared_bytes: l.shared_bytes as u64,
                stream: l.stream as u64,
                device: l.device,
                mode,
                instrumented: block_counts.is_some(),
                reason,
                block_counts,
                instructions,
            }
        })
        .collect();
    report::Kernel {
        name: snapshot.kernel.clone(),
        demangled: snapshot.demangled.clone(),
        source: snapshot.source.clone(),
        arch: snapshot.arch,
        instrumented: snapshot.instrumented,
        reason: if snapshot.instrumented {
            None
        } else {
            Some(
                snapshot
                    .reason
                    .clone()
                    .unwrap_or_else(|| "not instrumented (no reason given)".to_owned()),
            )
        },
        blocks: snapshot.blocks.clone(),
        files: snapshot.files.clone(),
        launches,
        totals,
    }
}

#[cfg(test)]
mod tests;

/// A flow's value from the thread counts it reads, in exact arithmetic: a term outside the
/// kernel's blocks, or a value below zero or above `u64`, refuses the launch's counts.
fn evaluate_flow(flow: &ThreadFlow, threads: &[u64]) -> Result<u64, String> {
    if flow.block >= threads.len() {
        return Err(format!(
            "the snapshot derives block {} of {}",
            flow.block,
            threads.len()
        ));
    }
    let mut sum: i128 = 0;
    for &(source, coefficient) in &flow.terms {
        let count = threads.get(source).copied().ok_or_else(|| {
            format!(
                "the snapshot derives block {} from block {source} of {}",
                flow.block,
                threads.len()
            )
        })?;
        sum = i128::from(count)
            .checked_mul(i128::from(coefficient))
            .and_then(|term| sum.checked_add(term))
            .ok_or_else(|| format!("block {}'s derived count overflows", flow.block))?;
    }
    u64::try_from(sum).map_err(|_| {
        format!(
            "block {}'s thread count follows as {sum} from the others: the counts are \
             inconsistent",
            flow.block
        )
    })
}
