//! A launch: CTAs pulled from a shared counter by worker threads; inside a CTA, warps run
//! round-robin in time slices and meet at barriers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::decode::BarKind;
use crate::exec::{self, Yield};
use crate::memory::HostBuffer;
use crate::program::Program;
use crate::warp::{Warp, WarpState};
use crate::{Environment, LaunchConfig, LaunchStats, SimError};

/// Warp instructions a warp runs before the next warp gets its turn. Large enough that
/// switching costs nothing measurable, small enough that a warp spinning on a flag another
/// warp sets makes progress.
const SLICE: u64 = 1 << 14;

/// Everything the CTAs of one launch share.
pub(crate) struct Launch<'a> {
    pub program: &'a Program,
    pub kernel: u32,
    pub config: LaunchConfig,
    pub env: &'a dyn Environment,
    /// The kernel's parameters, laid out by their `.param` declarations.
    pub params: HostBuffer,
    /// Offset in the shared window of each shared variable (`u64::MAX` when unused).
    pub shared_offsets: &'a [u64],
    /// Static plus dynamic shared bytes of each CTA.
    pub shared_bytes: u64,
    /// Local bytes per thread.
    pub window: u64,
    /// Set by the first failing CTA: the others stop.
    pub stop: AtomicBool,
}

/// One CTA being run.
pub(crate) struct CtaContext<'a> {
    pub launch: &'a Launch<'a>,
    pub ctaid: [u32; 3],
    pub worker: usize,
    pub warps: u32,
    pub shared_base: u64,
    pub shared_len: u64,
    /// The local windows of all the CTA's threads, `window` bytes each.
    pub local_base: u64,
    pub local_len: u64,
    pub window: u64,
}

/// A worker's reusable buffers.
struct Worker {
    shared: HostBuffer,
    local: HostBuffer,
    warps: Vec<Warp>,
}

/// State of one of the 16 named barriers.
#[derive(Debug, Clone, Copy, Default)]
struct Barrier {
    /// Warps arrived in this phase.
    arrived: u32,
    /// Warps expected: from the count operand, or `None` for all live warps.
    expected: Option<u32>,
    /// Warps waiting (bit per warp index).
    waiting: u32,
    popc: u32,
    all: bool,
    any: bool,
    kind: Option<BarKind>,
}

/// Runs every CTA of the grid; returns what the launch executed.
pub(crate) fn run_grid(launch: &Launch<'_>) -> Result<LaunchStats, SimError> {
    let grid = launch.config.grid;
    let total = u64::from(grid[0]) * u64::from(grid[1]) * u64::from(grid[2]);
    let next = AtomicU64::new(0);
    let error: Mutex<Option<SimError>> = Mutex::new(None);
    let stats: Mutex<LaunchStats> = Mutex::new(LaunchStats::default());
    let workers = (launch.config.workers.max(1) as u64).min(total).max(1) as usize;
    let work = |worker_index: usize| match worker_loop(launch, worker_index, &next, total) {
        Ok(worker_stats) => *stats.lock().unwrap_or_else(|p| p.into_inner()) += worker_stats,
        Err(e) => {
            launch.stop.store(true, Ordering::SeqCst);
            let mut slot = error.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert(e);
        }
    };
    if workers == 1 {
        work(0);
    } else {
        std::thread::scope(|scope| {
            for w in 0..workers {
                let work = &work;
                scope.spawn(move || work(w));
            }
        });
    }
    match error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(stats.into_inner().unwrap_or_else(|p| p.into_inner())),
    }
}

/// Runs CTAs until none is left; returns what this worker's CTAs executed.
fn worker_loop(
    launch: &Launch<'_>,
    worker_index: usize,
    next: &AtomicU64,
    total: u64,
) -> Result<LaunchStats, SimError> {
    let block = launch.config.block;
    let threads = u64::from(block[0]) * u64::from(block[1]) * u64::from(block[2]);
    let local_len = threads.saturating_mul(launch.window);
    let out_of_memory =
        |what: &str| SimError::InvalidLaunch(format!("cannot allocate {what} for a CTA"));
    let mut worker = Worker {
        shared: HostBuffer::zeroed(launch.shared_bytes as usize)
            .ok_or_else(|| out_of_memory("shared memory"))?,
        local: HostBuffer::zeroed(local_len as usize)
            .ok_or_else(|| out_of_memory("local memory"))?,
        warps: Vec::new(),
    };
    let warps = threads.div_ceil(32) as u32;
    worker.warps.resize_with(warps as usize, Warp::new);
    let grid = launch.config.grid;
    let mut stats = LaunchStats::default();
    loop {
        if launch.stop.load(Ordering::Relaxed) {
            return Ok(stats);
        }
        let index = next.fetch_add(1, Ordering::Relaxed);
        if index >= total {
            return Ok(stats);
        }
        let ctaid = [
            (index % u64::from(grid[0])) as u32,
            ((index / u64::from(grid[0])) % u64::from(grid[1])) as u32,
            (index / (u64::from(grid[0]) * u64::from(grid[1]))) as u32,
        ];
        let cta = CtaContext {
            launch,
            ctaid,
            worker: worker_index,
            warps,
            shared_base: worker.shared.address(),
            shared_len: launch.shared_bytes,
            local_base: worker.local.address(),
            local_len,
            window: launch.window,
        };
        let registers = launch.program.functions[launch.kernel as usize].registers;
        for (i, warp) in worker.warps.iter_mut().enumerate() {
            let first = i as u32 * 32;
            let count = (threads as u32 - first).min(32);
            warp.start(i as u32, first, count, block, registers);
            if let Some(frame) = warp.frames.first_mut() {
                frame.function = launch.kernel;
            }
        }
        run_cta(&cta, &mut worker.warps)?;
        for warp in &worker.warps {
            stats += LaunchStats {
                warp_instructions: warp.clock,
                thread_instructions: warp.thread_instructions,
                global_atomics: warp.global_atomics,
            };
        }
    }
}

/// Runs the warps of one CTA to completion.
fn run_cta(cta: &CtaContext<'_>, warps: &mut [Warp]) -> Result<(), SimError> {
    let mut barriers = [Barrier::default(); 16];
    loop {
        let mut ran = false;
        for i in 0..warps.len() {
            if warps[i].state != WarpState::Ready {
                continue;
            }
            ran = true;
            match exec::run(cta, &mut warps[i], SLICE)? {
                Yield::Slice => {}
                Yield::Done => {
                    warps[i].state = WarpState::Done;
                    // Barriers waiting for all live warps now wait for one fewer.
                    for barrier in &mut barriers {
                        try_release(barrier, warps);
                    }
                }
                Yield::Barrier {
                    id,
                    count,
                    blocking,
                    kind,
                    votes,
                    participants,
                } => {
                    let barrier = &mut barriers[id as usize];
                    if barrier.arrived == 0 {
                        *barrier = Barrier {
                            expected: count.map(|c| c.div_ceil(32)),
                            all: true,
                            ..Barrier::default()
                        };
                    }
                    barrier.arrived += 1;
                    if blocking {
                        warps[i].state = WarpState::Blocked(id);
                        barrier.waiting |= 1 << i;
                    }
                    if kind != BarKind::Sync && kind != BarKind::Arrive {
                        barrier.kind = Some(kind);
                        barrier.popc += votes.count_ones();
                        barrier.all &= votes == participants;
                        barrier.any |= votes != 0;
                    }
                    try_release(barrier, warps);
                }
            }
        }
        if warps.iter().all(|w| w.state == WarpState::Done) {
            return Ok(());
        }
        if cta.launch.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if !ran {
            let waiting: Vec<String> = warps
                .iter()
                .filter_map(|w| match w.state {
                    WarpState::Blocked(id) => Some(format!("warp {} at barrier {id}", w.index)),
                    _ => None,
                })
                .collect();
            let done = warps.iter().filter(|w| w.state == WarpState::Done).count();
            return Err(SimError::Deadlock {
                cta: cta.ctaid,
                detail: format!(
                    "{} waiting and no warp can run ({done} warp(s) finished)",
                    waiting.join(", ")
                ),
            });
        }
    }
}

/// Completes `barrier` if enough warps arrived: wakes its waiters with their reduction result.
fn try_release(barrier: &mut Barrier, warps: &mut [Warp]) {
    if barrier.arrived == 0 {
        return;
    }
    let live = warps.iter().filter(|w| w.state != WarpState::Done).count() as u32;
    let expected = barrier.expected.unwrap_or(live).min(warps.len() as u32);
    if barrier.arrived < expected {
        return;
    }
    let result = match barrier.kind {
        Some(BarKind::RedPopc) => u64::from(barrier.popc),
        Some(BarKind::RedAnd) => u64::from(barrier.all),
        Some(BarKind::RedOr) => u64::from(barrier.any),
        _ => 0,
    };
    let mut waiting = barrier.waiting;
    while waiting != 0 {
        let i = waiting.trailing_zeros() as usize;
        waiting &= waiting - 1;
        let warp = &mut warps[i];
        warp.state = WarpState::Ready;
        if let Some(pending) = warp.pending.take() {
            let mut m = pending.mask;
            while m != 0 {
                let lane = m.trailing_zeros() as usize;
                m &= m - 1;
                if pending.dst != crate::decode::NO_REG {
                    warp.regs[pending.reg_base + pending.dst as usize * 32 + lane] = result;
                }
            }
        }
    }
    *barrier = Barrier::default();
}
