//! A launch: CTAs pulled from a shared counter by worker threads. A worker runs its resident
//! CTAs round-robin; inside a CTA, warps run round-robin in short time slices and meet at
//! barriers.
//!
//! **Residency.** A worker starts with one CTA. When its CTAs have run `ACTIVATE_ROUNDS`
//! rounds (every runnable warp of each runs one slice) without one finishing, it makes as many
//! more CTAs resident as it runs (doubling them), up to `LaunchConfig::resident_ctas` over all
//! workers — as a GPU keeps as many CTAs resident as its multiprocessors hold, however few
//! workers there are. So CTAs that wait for other CTAs of the grid (a persistent kernel's
//! inter-block barrier) make progress, a grid of n such CTAs being resident after about
//! log2(n) waits (not n, whose rounds over ever more CTAs would add up quadratically), and
//! short CTAs run one at a time.
//!
//! **No progress.** A warp *changes memory* when a store or atomic writes a value different
//! from the one there (`red` reductions, which counter code uses, excepted), and when it
//! finishes. When no CTA can be added and nothing in the grid changed memory for
//! `QUIET_ROUNDS` rounds of every worker (seconds: a spinning warp runs a round in
//! microseconds), the grid is taken to wait forever — on a GPU it would hang — and the launch
//! fails with [`SimError::NoProgress`] naming the kernel. (A kernel that computes in
//! registers for that long without storing anything would be taken for one that waits.)

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::decode::BarKind;
use crate::exec::{self, Yield};
use crate::memory::HostBuffer;
use crate::program::Program;
use crate::warp::{Warp, WarpState};
use crate::{Environment, LaunchConfig, LaunchStats, SimError};

/// Loads, stores and atomics other warps can see that a warp runs before the next warp of its
/// CTA gets its turn. Few, so that warps advance nearly together, as on a GPU: code that races
/// between warps (a warp reading what another warp writes at about the same point, without a
/// barrier) sees what it sees on a GPU, and a warp spinning on a flag another warp sets makes
/// progress. Counted in memory accesses rather than instructions so that the schedule, and so
/// the path of code whose branches depend on it (a contended CAS loop, a spin), is the same
/// with and without counter code, and with any counter placement.
pub(crate) const SLICE_ACCESSES: u64 = 8;

/// Warp instructions after which a warp yields even without such accesses (a long loop in
/// registers).
pub(crate) const SLICE_INSTRUCTIONS: u64 = 1 << 14;

/// Rounds without a CTA finishing after which a worker makes more CTAs resident.
const ACTIVATE_ROUNDS: u64 = 256;

/// Rounds without any change of memory in the grid after which a worker that cannot add a
/// CTA takes the grid to make no progress.
const QUIET_ROUNDS: u64 = 1 << 17;

/// `Grid::quiet_since` marker of a worker that has no CTA to run (none left, or no resident
/// place free).
const FINISHED: u64 = u64::MAX;

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

/// A resident CTA: its buffers, warps and barriers.
struct Slot {
    ctaid: [u32; 3],
    shared: HostBuffer,
    local: HostBuffer,
    warps: Vec<Warp>,
    barriers: [Barrier; 16],
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

/// What the workers of one launch share to schedule CTAs.
struct Grid {
    /// Linear index of the next CTA to start.
    next: AtomicU64,
    total: u64,
    /// CTAs resident now, and at most.
    resident: AtomicUsize,
    resident_limit: usize,
    /// Bumped by every round of a worker that changed memory.
    epoch: AtomicU64,
    /// Per worker: `epoch + 1` while it has seen nothing change since that epoch for
    /// `QUIET_ROUNDS` rounds and cannot add a CTA, 0 while not, [`FINISHED`] when it has
    /// nothing left to run.
    quiet_since: Vec<AtomicU64>,
}

impl Grid {
    /// Whether every worker is quiet since `epoch` or finished, and nothing changed since.
    fn all_stuck(&self, epoch: u64) -> bool {
        self.quiet_since.iter().all(|c| {
            let v = c.load(Ordering::SeqCst);
            v == FINISHED || v == epoch + 1
        }) && self.epoch.load(Ordering::SeqCst) == epoch
    }
}

/// Runs every CTA of the grid; returns what the launch executed.
pub(crate) fn run_grid(launch: &Launch<'_>) -> Result<LaunchStats, SimError> {
    let grid = launch.config.grid;
    let total = u64::from(grid[0]) * u64::from(grid[1]) * u64::from(grid[2]);
    let workers = (launch.config.workers.max(1) as u64).min(total).max(1) as usize;
    let shared = Grid {
        next: AtomicU64::new(0),
        total,
        resident: AtomicUsize::new(0),
        resident_limit: launch.config.resident_ctas.max(workers),
        epoch: AtomicU64::new(0),
        quiet_since: (0..workers).map(|_| AtomicU64::new(0)).collect(),
    };
    let error: Mutex<Option<SimError>> = Mutex::new(None);
    let stats: Mutex<LaunchStats> = Mutex::new(LaunchStats::default());
    let work = |worker_index: usize| {
        let result = worker_loop(launch, worker_index, &shared);
        shared.quiet_since[worker_index].store(FINISHED, Ordering::SeqCst);
        match result {
            Ok(worker_stats) => *stats.lock().unwrap_or_else(|p| p.into_inner()) += worker_stats,
            Err(e) => {
                launch.stop.store(true, Ordering::SeqCst);
                let mut slot = error.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(e);
            }
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
    grid: &Grid,
) -> Result<LaunchStats, SimError> {
    let mut slots: Vec<Slot> = Vec::new();
    let mut spare: Vec<Slot> = Vec::new();
    let mut stats = LaunchStats::default();
    // Rounds since a CTA of this worker started or finished.
    let mut busy_rounds = 0u64;
    // The grid's epoch as last seen, and the rounds since it changed.
    let (mut seen_epoch, mut quiet_rounds) = (u64::MAX, 0u64);
    loop {
        if launch.stop.load(Ordering::Relaxed) {
            return Ok(stats);
        }
        if slots.is_empty() {
            match reserve_cta(grid) {
                Some(index) => {
                    grid.quiet_since[worker_index].store(0, Ordering::SeqCst);
                    slots.push(start_cta(launch, index, spare.pop())?);
                    busy_rounds = 0;
                }
                None if grid.next.load(Ordering::SeqCst) >= grid.total => return Ok(stats),
                None => {
                    // Every resident place is taken (by CTAs of other workers): wait for one,
                    // with nothing of this worker's own that could make progress meanwhile.
                    grid.quiet_since[worker_index].store(FINISHED, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_micros(100));
                    continue;
                }
            }
        }
        let mut changed = false;
        let mut i = 0;
        while i < slots.len() {
            let round = run_round(launch, worker_index, &mut slots[i])?;
            changed |= round.changed;
            if round.finished {
                let slot = slots.swap_remove(i);
                for warp in &slot.warps {
                    stats += LaunchStats {
                        warp_instructions: warp.clock,
                        thread_instructions: warp.thread_instructions,
                        global_atomics: warp.global_atomics,
                    };
                }
                grid.resident.fetch_sub(1, Ordering::SeqCst);
                spare.push(slot);
                busy_rounds = 0;
            } else {
                i += 1;
            }
        }
        if changed {
            grid.epoch.fetch_add(1, Ordering::SeqCst);
        }
        if slots.is_empty() {
            continue;
        }
        busy_rounds += 1;
        if busy_rounds < ACTIVATE_ROUNDS {
            continue;
        }
        // Long-running CTAs: give them company, as a GPU would have: as many again as run
        // here, while resident places and CTAs are left.
        let running = slots.len();
        let mut added = 0;
        while added < running {
            let Some(index) = reserve_cta(grid) else {
                break;
            };
            slots.push(start_cta(launch, index, spare.pop())?);
            added += 1;
        }
        if added > 0 {
            busy_rounds = 0;
            continue;
        }
        let epoch = grid.epoch.load(Ordering::SeqCst);
        if epoch != seen_epoch {
            (seen_epoch, quiet_rounds) = (epoch, 0);
            grid.quiet_since[worker_index].store(0, Ordering::SeqCst);
            continue;
        }
        quiet_rounds += 1;
        if quiet_rounds < QUIET_ROUNDS {
            continue;
        }
        grid.quiet_since[worker_index].store(epoch + 1, Ordering::SeqCst);
        if grid.all_stuck(epoch) {
            let started = grid.next.load(Ordering::SeqCst).min(grid.total);
            let name = &launch.program.functions[launch.kernel as usize].name;
            return Err(SimError::NoProgress {
                kernel: name.clone(),
                detail: format!(
                    "its {} resident CTA(s) ran {QUIET_ROUNDS} rounds without changing memory \
                     and {} of its {} CTA(s) wait to start (the emulated device holds {} \
                     CTA(s) of this kernel at once)",
                    grid.resident.load(Ordering::SeqCst),
                    grid.total - started,
                    grid.total,
                    grid.resident_limit
                ),
            });
        }
    }
}

/// Reserves a resident place and the next CTA, if both are left.
fn reserve_cta(grid: &Grid) -> Option<u64> {
    grid.resident
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| {
            (r < grid.resident_limit).then_some(r + 1)
        })
        .ok()?;
    let index = grid.next.fetch_add(1, Ordering::SeqCst);
    if index < grid.total {
        Some(index)
    } else {
        grid.resident.fetch_sub(1, Ordering::SeqCst);
        None
    }
}

/// Makes CTA `index` (linear) resident, reusing a finished CTA's buffers when there is one.
fn start_cta(launch: &Launch<'_>, index: u64, reuse: Option<Slot>) -> Result<Slot, SimError> {
    let block = launch.config.block;
    let grid = launch.config.grid;
    let threads = u64::from(block[0]) * u64::from(block[1]) * u64::from(block[2]);
    let mut slot = match reuse {
        Some(slot) => slot,
        None => {
            let out_of_memory =
                |what: &str| SimError::InvalidLaunch(format!("cannot allocate {what} for a CTA"));
            let local_len = threads.saturating_mul(launch.window);
            let mut warps = Vec::new();
            warps.resize_with(threads.div_ceil(32) as usize, Warp::new);
            Slot {
                ctaid: [0; 3],
                shared: HostBuffer::zeroed(launch.shared_bytes as usize)
                    .ok_or_else(|| out_of_memory("shared memory"))?,
                local: HostBuffer::zeroed(local_len as usize)
                    .ok_or_else(|| out_of_memory("local memory"))?,
                warps,
                barriers: [Barrier::default(); 16],
            }
        }
    };
    slot.ctaid = [
        (index % u64::from(grid[0])) as u32,
        ((index / u64::from(grid[0])) % u64::from(grid[1])) as u32,
        (index / (u64::from(grid[0]) * u64::from(grid[1]))) as u32,
    ];
    slot.barriers = [Barrier::default(); 16];
    let kernel = &launch.program.functions[launch.kernel as usize];
    for (i, warp) in slot.warps.iter_mut().enumerate() {
        let first = i as u32 * 32;
        let count = (threads as u32 - first).min(32);
        warp.start(
            i as u32,
            first,
            count,
            block,
            kernel.registers,
            &kernel.zeroed_registers,
        );
        if let Some(frame) = warp.frames.first_mut() {
            frame.function = launch.kernel;
        }
    }
    Ok(slot)
}

/// What one round of a CTA did.
struct Round {
    /// A warp changed memory or finished.
    changed: bool,
    /// Every warp finished.
    finished: bool,
}

/// Runs one slice of every runnable warp of a CTA.
fn run_round(launch: &Launch<'_>, worker: usize, slot: &mut Slot) -> Result<Round, SimError> {
    let cta = CtaContext {
        launch,
        ctaid: slot.ctaid,
        worker,
        warps: slot.warps.len() as u32,
        shared_base: slot.shared.address(),
        shared_len: launch.shared_bytes,
        local_base: slot.local.address(),
        local_len: slot.local.len() as u64,
        window: launch.window,
    };
    let warps = &mut slot.warps;
    let barriers = &mut slot.barriers;
    let mut changed = false;
    let mut ran = false;
    for i in 0..warps.len() {
        if warps[i].state != WarpState::Ready {
            continue;
        }
        ran = true;
        warps[i].wrote = false;
        let outcome = exec::run(&cta, &mut warps[i], SLICE_INSTRUCTIONS, SLICE_ACCESSES)?;
        changed |= warps[i].wrote;
        match outcome {
            Yield::Slice => {}
            Yield::Done => {
                warps[i].state = WarpState::Done;
                changed = true;
                // Barriers waiting for all live warps now wait for one fewer.
                for barrier in barriers.iter_mut() {
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
        return Ok(Round {
            changed: true,
            finished: true,
        });
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
            cta: slot.ctaid,
            detail: format!(
                "{} waiting and no warp can run ({done} warp(s) finished)",
                waiting.join(", ")
            ),
        });
    }
    Ok(Round {
        changed,
        finished: false,
    })
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
