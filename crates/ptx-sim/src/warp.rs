//! The state of one warp: lanes, register file, call frames with their SIMT reconvergence
//! stacks.
//!
//! Reconvergence follows the immediate-post-dominator stack model: a divergent branch turns
//! the top entry into the reconvergence entry (pc = the branch's IPDOM, all lanes) and pushes
//! one entry per path; an entry is popped when its pc reaches its reconvergence pc or when its
//! lanes have all returned or exited.

/// One entry of a SIMT stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub pc: u32,
    /// Where this entry's lanes meet the lanes of the other path (`EXIT_PC`: never).
    pub rpc: u32,
    pub mask: u32,
    /// The entry re-executes an instruction the warp already issued (one target group of a
    /// divergent indirect `call`): that execution is not counted again.
    pub reissue: bool,
}

/// How many earlier accessible host ranges a warp keeps besides the current one.
/// (A power of two: the native engine searches them as one vector, `native::Gen::recent_range`.)
pub(crate) const RECENT_RANGES: usize = 8;
const _: () = assert!(RECENT_RANGES.is_power_of_two() && RECENT_RANGES <= 16);

/// One activation of a function.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub function: u32,
    pub stack: Vec<Entry>,
    /// Index of register 0 of this frame in the warp's register file.
    pub reg_base: usize,
    /// Offset of the frame in each thread's local window.
    pub local_base: u64,
    /// The caller's `call` instruction (`u32::MAX` for the kernel's frame).
    pub call_pc: u32,
    /// Lanes that executed `ret` in this frame.
    pub returned: u32,
}

/// What a warp waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WarpState {
    Ready,
    /// Waiting at barrier `id`.
    Blocked(u32),
    Done,
}

/// A pending `bar.red` result, written when the barrier completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PendingReduction {
    pub dst: u32,
    pub mask: u32,
    pub reg_base: usize,
}

/// Per-warp scratch rows of the ALU path (kept with the warp, so that entering the interpreter
/// for a slice initializes nothing).
pub(crate) struct Scratch {
    /// One ALU source operand that is not a register per row, one lane per column.
    pub columns: [[u64; 32]; 4],
    /// Where an ALU result without a destination register (`_`) goes.
    pub sink: [u64; 32],
}

/// One warp of a CTA.
pub(crate) struct Warp {
    /// Warp index in the CTA.
    pub index: u32,
    /// Lanes that hold a thread (the last warp of a CTA may be partial).
    pub lanes: u32,
    pub exited: u32,
    /// `%tid` of each lane.
    pub tid: [[u32; 3]; 32],
    /// Linear thread index in the CTA of each lane (selects the local window).
    pub linear: [u32; 32],
    /// Register file, register-major: `regs[frame.reg_base + reg * 32 + lane]`.
    pub regs: Vec<u64>,
    pub frames: Vec<Frame>,
    /// Carry flag of each lane (`.cc`).
    pub carry: u32,
    pub state: WarpState,
    pub pending: Option<PendingReduction>,
    /// Warp instructions issued since the warp started (`%clock`, and the launch's
    /// `LaunchStats::warp_instructions`).
    pub clock: u64,
    /// Active lanes summed over the issued instructions, guarded-off lanes included.
    pub thread_instructions: u64,
    /// Lane operations of `atom`/`red` on global memory whose guard held.
    pub global_atomics: u64,
    /// The last host range found accessible: `[lo, hi)`.
    pub accessible: (u64, u64),
    /// Whether `accessible` is a block of the device heap (which a kernel may free: such a
    /// range is not kept in `recent` once another replaces it).
    pub accessible_heap: bool,
    /// Host ranges found accessible before `accessible` (not heap blocks), so that a kernel
    /// alternating between a few arrays does not query the environment on every switch; each
    /// `[lo, hi)` as an array, not a tuple (the native engine reads them: `RunContext::recent`).
    pub recent: [[u64; 2]; RECENT_RANGES],
    /// The entry of `recent` the next evicted range replaces.
    pub recent_next: usize,
    /// Set when a store or atomic of the warp wrote a value different from the one in
    /// memory (cleared by the scheduler before each slice: how it tells a warp that waits
    /// from one that works).
    pub wrote: bool,
    pub scratch: Box<Scratch>,
}

impl Warp {
    pub fn new() -> Warp {
        Warp {
            index: 0,
            lanes: 0,
            exited: 0,
            tid: [[0; 3]; 32],
            linear: [0; 32],
            regs: Vec::new(),
            frames: Vec::new(),
            carry: 0,
            state: WarpState::Done,
            pending: None,
            clock: 0,
            thread_instructions: 0,
            global_atomics: 0,
            accessible: (0, 0),
            accessible_heap: false,
            recent: [[0, 0]; RECENT_RANGES],
            recent_next: 0,
            wrote: false,
            scratch: Box::new(Scratch {
                columns: [[0; 32]; 4],
                sink: [0; 32],
            }),
        }
    }

    /// Resets the warp to start `function` (the kernel) with threads `first..first + count`
    /// (linear ids) of a CTA of shape `block`, with `registers` registers of which those in
    /// `zeroed` start at zero (the others are never read before they are written:
    /// [`crate::uninit`]).
    pub fn start(
        &mut self,
        index: u32,
        first: u32,
        count: u32,
        block: [u32; 3],
        registers: u32,
        zeroed: &[u32],
    ) {
        self.index = index;
        self.lanes = if count >= 32 {
            u32::MAX
        } else {
            (1u32 << count) - 1
        };
        self.exited = 0;
        // The first lane's %tid by division, the others by counting on (no divisions per
        // lane: a warp start is frequent in grids of short CTAs).
        let (nx, ny) = (block[0].max(1), block[1].max(1));
        let (mut x, mut y, mut z) = (first % nx, (first / nx) % ny, first / nx.saturating_mul(ny));
        for lane in 0..32u32 {
            self.linear[lane as usize] = first + lane;
            self.tid[lane as usize] = [x, y, z];
            x += 1;
            if x == nx {
                x = 0;
                y += 1;
                if y == ny {
                    y = 0;
                    z += 1;
                }
            }
        }
        // Registers a thread reads only after writing them keep what the last warp left.
        let len = registers as usize * 32;
        self.regs.truncate(len);
        self.regs.resize(len, 0);
        for &r in zeroed {
            let start = r as usize * 32;
            if let Some(row) = self.regs.get_mut(start..start + 32) {
                row.fill(0);
            }
        }
        // The kernel's frame, reusing the stack of the last start's first frame.
        self.frames.truncate(1);
        let mut stack = self
            .frames
            .pop()
            .map(|frame| frame.stack)
            .unwrap_or_default();
        stack.clear();
        stack.push(Entry {
            pc: 0,
            rpc: crate::decode::EXIT_PC,
            mask: self.lanes,
            reissue: false,
        });
        self.frames.push(Frame {
            function: 0,
            stack,
            reg_base: 0,
            local_base: 0,
            call_pc: u32::MAX,
            returned: 0,
        });
        self.carry = 0;
        self.state = if self.lanes == 0 {
            WarpState::Done
        } else {
            WarpState::Ready
        };
        self.pending = None;
        self.clock = 0;
        self.thread_instructions = 0;
        self.global_atomics = 0;
        // The host ranges found accessible stay: a warp starts again only in a CTA slot of the
        // same launch (`launch::worker_loop`'s), whose windows are the slot's own buffers, and
        // the launch's allocations and module do not change while it runs; only a block of the
        // device heap goes, which the last CTA may have freed. (Short warps that find their
        // arrays again from scratch spend much of their time doing so.)
        if self.accessible_heap {
            self.accessible = (0, 0);
            self.accessible_heap = false;
        }
    }

    /// Makes `range` the current accessible host range, keeping the one it replaces in
    /// `recent` unless that is a heap block.
    pub fn set_accessible(&mut self, range: (u64, u64), heap: bool) {
        let old = std::mem::replace(&mut self.accessible, range);
        if !self.accessible_heap && old.1 > old.0 {
            self.recent[self.recent_next] = [old.0, old.1];
            self.recent_next = (self.recent_next + 1) % RECENT_RANGES;
        }
        self.accessible_heap = heap;
    }

    /// Makes the entry of `recent` that holds `[address, address + len)` the current range
    /// (the current one takes its place unless it is a heap block). `false` when none holds it.
    #[inline]
    pub fn promote_recent(&mut self, address: u64, len: u64) -> bool {
        let Some(end) = address.checked_add(len) else {
            return false;
        };
        for i in 0..RECENT_RANGES {
            let [lo, hi] = self.recent[i];
            if address >= lo && end <= hi {
                let old = std::mem::replace(&mut self.accessible, (lo, hi));
                self.recent[i] = if self.accessible_heap {
                    [0, 0]
                } else {
                    [old.0, old.1]
                };
                self.accessible_heap = false;
                return true;
            }
        }
        false
    }
}
