//! Device memory is host memory: allocations come from the host allocator with cudaMalloc's
//! alignment and are recorded in an address-range table, which is what kernels (through
//! `Environment::global_accessible`) and the copy calls check device addresses against.
//!
//! Each allocation this runtime makes lies between two zeroed guard zones of its own
//! ([`guard_for`]): on a GPU, small allocations share pages and memory a little outside an
//! allocation is mapped, so a kernel that reads a row above an image or `x[-1]` (and ignores
//! the value) runs there. Kernels may touch the guard zones unless the strict mode
//! (`CUDA_FLUX_CPU_MEMCHECK=1`) is on; the copy calls never.

use std::alloc::Layout;
use std::collections::BTreeMap;

use crate::error::CudaError;

/// The alignment `cudaMalloc` guarantees (and `cudaMallocHost`, `cudaMallocManaged`).
pub const ALIGNMENT: usize = 256;

/// The row alignment of `cudaMallocPitch` (the emulated device's `texturePitchAlignment`
/// rounded up to what real devices return).
pub const PITCH_ALIGNMENT: usize = 512;

/// Identifies a loaded module (for the ranges of its variables).
pub type ModuleId = u64;

/// What a range of the table is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// `cudaMalloc`, `cudaMallocPitch`.
    Device,
    /// `cudaMallocManaged`.
    Managed,
    /// `cudaMallocArray`, `cudaMalloc3DArray`: a CUDA array's texels.
    Array,
    /// `cudaMallocHost`, `cudaHostAlloc`: pinned host memory, mapped (unified addressing).
    Host,
    /// `cudaHostRegister`: the program's memory, not owned here.
    Registered,
    /// A module variable of a loaded module (owned by ptx-sim's `Program`).
    Symbol(ModuleId),
}

impl MemoryKind {
    /// Whether this runtime allocated the memory (and frees it).
    pub fn owned(self) -> bool {
        matches!(
            self,
            MemoryKind::Device | MemoryKind::Managed | MemoryKind::Host | MemoryKind::Array
        )
    }

    /// `enum cudaMemoryType` for `cudaPointerGetAttributes`.
    pub fn memory_type(self) -> i32 {
        match self {
            MemoryKind::Host | MemoryKind::Registered => 1,
            MemoryKind::Device | MemoryKind::Array | MemoryKind::Symbol(_) => 2,
            MemoryKind::Managed => 3,
        }
    }
}

/// One recorded range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub len: u64,
    pub kind: MemoryKind,
}

/// Non-overlapping address ranges by start address.
#[derive(Debug, Clone, Default)]
pub struct AddressTable {
    ranges: BTreeMap<u64, Range>,
}

impl AddressTable {
    /// Records `[start, start + len)`; `false` (and nothing recorded) when it is empty or
    /// overlaps a recorded range.
    pub fn insert(&mut self, start: u64, len: u64, kind: MemoryKind) -> bool {
        if len == 0 || start.checked_add(len).is_none() || self.overlaps(start, len) {
            return false;
        }
        self.ranges.insert(start, Range { len, kind });
        true
    }

    /// Removes the range that starts at `start`.
    pub fn remove(&mut self, start: u64) -> Option<Range> {
        self.ranges.remove(&start)
    }

    /// Removes every range `drop` selects and returns them.
    pub fn remove_where(&mut self, mut drop: impl FnMut(&Range) -> bool) -> Vec<(u64, Range)> {
        let starts: Vec<u64> = self
            .ranges
            .iter()
            .filter(|(_, range)| drop(range))
            .map(|(start, _)| *start)
            .collect();
        starts
            .into_iter()
            .filter_map(|start| Some((start, self.ranges.remove(&start)?)))
            .collect()
    }

    /// The range starting at exactly `start`.
    pub fn get(&self, start: u64) -> Option<Range> {
        self.ranges.get(&start).copied()
    }

    /// The range holding `address`, with its start.
    pub fn find(&self, address: u64) -> Option<(u64, Range)> {
        let (start, range) = self.ranges.range(..=address).next_back()?;
        (address - start < range.len).then_some((*start, *range))
    }

    /// Whether `[address, address + len)` lies inside one recorded range (an empty access
    /// needs its address inside a range, or at its end).
    pub fn contains(&self, address: u64, len: u64) -> bool {
        let Some((start, range)) = self.ranges.range(..=address).next_back() else {
            return false;
        };
        let end = start + range.len;
        address.checked_add(len).is_some_and(|last| last <= end)
    }

    /// Whether `[address, address + len)` lies inside one allocation of this runtime together
    /// with its guard zones ([`guard_for`]).
    pub fn contains_guarded(&self, address: u64, len: u64) -> bool {
        let Some(end) = address.checked_add(len) else {
            return false;
        };
        let inside = |(start, range): (&u64, &Range)| {
            let guard = guard_for(range.len);
            range.kind.owned()
                && address >= start.saturating_sub(guard)
                && end <= start + range.len + guard
        };
        self.ranges
            .range(..=address)
            .next_back()
            .is_some_and(inside)
            || self.ranges.range(address..).next().is_some_and(inside)
    }

    /// The widest range around `[address, address + len)` in which every access is accepted
    /// as this one is: the recorded range holding it ([`AddressTable::contains`]), or, with
    /// `guarded`, the allocation of this runtime together with its guard zones
    /// ([`AddressTable::contains_guarded`]); `None` when neither accepts it. A kernel's warps
    /// cache it, so that the accesses to one array after the first need no lookup.
    pub fn accessible_range(&self, address: u64, len: u64, guarded: bool) -> Option<(u64, u64)> {
        let end = address.checked_add(len)?;
        let before = self.ranges.range(..=address).next_back();
        let around = |(&start, range): (&u64, &Range)| {
            let guard = if guarded && range.kind.owned() {
                guard_for(range.len)
            } else {
                0
            };
            let (lo, hi) = (
                start.saturating_sub(guard),
                start.saturating_add(range.len).saturating_add(guard),
            );
            (address >= lo && end <= hi).then_some((lo, hi))
        };
        before.and_then(around).or_else(|| {
            if guarded {
                self.ranges.range(address..).next().and_then(around)
            } else {
                None
            }
        })
    }

    /// Where `address` lies relative to the nearest allocation of this runtime, as
    /// compute-sanitizer says it: `N bytes before|after|inside the L-byte allocation at A`.
    pub fn describe(&self, address: u64) -> Option<String> {
        let before = self
            .ranges
            .range(..=address)
            .rev()
            .find(|(_, r)| r.kind.owned());
        let after = self.ranges.range(address..).find(|(_, r)| r.kind.owned());
        let distance_before = before.map(|(s, r)| address.saturating_sub(s + r.len));
        let distance_after = after.map(|(s, _)| s - address);
        let (start, range, text) = match (before, after) {
            (Some((s, r)), _) if address < s + r.len => {
                (*s, *r, format!("{} bytes inside", address - s))
            }
            (Some((s, r)), Some(_)) if distance_before <= distance_after => {
                (*s, *r, format!("{} bytes after", address - (s + r.len)))
            }
            (_, Some((s, r))) => (*s, *r, format!("{} bytes before", s - address)),
            (Some((s, r)), None) => (*s, *r, format!("{} bytes after", address - (s + r.len))),
            (None, None) => return None,
        };
        Some(format!(
            "{text} the {}-byte allocation at {start:#x}",
            range.len
        ))
    }

    /// Whether any recorded range intersects `[start, start + len)`.
    pub fn overlaps(&self, start: u64, len: u64) -> bool {
        let end = start.saturating_add(len);
        if let Some((before, range)) = self.ranges.range(..=start).next_back() {
            if before + range.len > start {
                return true;
            }
        }
        self.ranges.range(start..end).next().is_some()
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// The largest guard zone: more than a row of any image a test suite uses, small next to
/// a GPU's 2 MiB pages.
pub const MAX_GUARD: u64 = 64 << 10;

/// Bytes of the guard zone before and after an allocation of `len` bytes: the allocation's
/// size rounded up to [`ALIGNMENT`] (a row above a 2-row image, `x[-1]` of one element), at
/// most [`MAX_GUARD`].
pub fn guard_for(len: u64) -> u64 {
    len.div_ceil(ALIGNMENT as u64)
        .saturating_mul(ALIGNMENT as u64)
        .clamp(ALIGNMENT as u64, MAX_GUARD)
}

/// The host block of an allocation of `len` bytes: guard, allocation, guard.
fn layout(len: usize) -> Result<Layout, CudaError> {
    let guard = guard_for(len as u64) as usize;
    let total = guard
        .checked_mul(2)
        .and_then(|g| g.checked_add(len))
        .ok_or(CudaError::MemoryAllocation)?;
    Layout::from_size_align(total, ALIGNMENT).map_err(|_| CudaError::MemoryAllocation)
}

/// Allocates `len > 0` zeroed bytes aligned to [`ALIGNMENT`], between zeroed guard zones of
/// [`guard_for`]`(len)` bytes. (cudaMalloc does not promise zeros; zeroed memory makes runs
/// reproducible.)
pub fn allocate(len: usize) -> Result<u64, CudaError> {
    debug_assert!(len > 0);
    let layout = layout(len)?;
    // SAFETY: the layout has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        Err(CudaError::MemoryAllocation)
    } else {
        Ok(ptr as u64 + guard_for(len as u64))
    }
}

/// Frees what [`allocate`] returned.
///
/// # Safety
/// `start` and `len` must be an allocation of [`allocate`] not yet freed.
pub unsafe fn deallocate(start: u64, len: u64) {
    if let Ok(layout) = layout(len as usize) {
        let block = start - guard_for(len);
        // SAFETY: the caller's contract; the block and layout are those it was allocated with.
        unsafe { std::alloc::dealloc(block as *mut u8, layout) };
    }
}

/// `cudaMallocPitch`'s pitch for rows of `width` bytes.
pub fn pitch_for(width: usize) -> Option<usize> {
    width.max(1).checked_next_multiple_of(PITCH_ALIGNMENT)
}

/// Host RAM: (available, total) bytes from `/proc/meminfo` (`MemAvailable`, `MemTotal`).
pub fn host_memory() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    let total = field("MemTotal").unwrap_or(0);
    (field("MemAvailable").unwrap_or(total), total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_respect_range_ends() {
        let mut table = AddressTable::default();
        assert!(table.insert(0x1000, 0x100, MemoryKind::Device));
        assert!(table.insert(0x1100, 0x10, MemoryKind::Host));
        assert!(table.contains(0x1000, 0x100));
        assert!(table.contains(0x10ff, 1));
        assert!(!table.contains(0x10ff, 2), "spans two allocations");
        assert!(!table.contains(0xfff, 1));
        assert!(table.contains(0x1100, 0x10));
        assert!(!table.contains(0x1110, 1));
        assert!(!table.contains(u64::MAX, 2));
        assert_eq!(table.find(0x1050).map(|(s, _)| s), Some(0x1000));
        assert_eq!(
            table.find(0x1100).map(|(_, r)| r.kind),
            Some(MemoryKind::Host)
        );
        assert_eq!(table.find(0x1110), None);
    }

    #[test]
    fn overlapping_and_empty_ranges_are_refused() {
        let mut table = AddressTable::default();
        assert!(table.insert(0x1000, 0x100, MemoryKind::Device));
        assert!(!table.insert(0x10ff, 1, MemoryKind::Registered));
        assert!(!table.insert(0xf00, 0x101, MemoryKind::Registered));
        assert!(!table.insert(0x800, 0x1000, MemoryKind::Registered));
        assert!(!table.insert(0x2000, 0, MemoryKind::Registered));
        assert!(!table.insert(u64::MAX, 2, MemoryKind::Registered));
        assert!(table.insert(0xf00, 0x100, MemoryKind::Registered));
        assert!(table.insert(0x1100, 0x100, MemoryKind::Registered));
        assert_eq!(table.len(), 3);
    }

    #[test]
    fn remove_where_takes_a_modules_symbols() {
        let mut table = AddressTable::default();
        table.insert(0x1000, 8, MemoryKind::Symbol(1));
        table.insert(0x2000, 8, MemoryKind::Symbol(2));
        table.insert(0x3000, 8, MemoryKind::Device);
        let removed = table.remove_where(|r| r.kind == MemoryKind::Symbol(1));
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].0, 0x1000);
        assert_eq!(table.len(), 2);
        assert_eq!(table.remove(0x3000).map(|r| r.len), Some(8));
        assert_eq!(table.remove(0x3000), None);
    }

    #[test]
    fn guard_zones_are_accessible_only_around_owned_allocations() {
        let mut table = AddressTable::default();
        assert!(table.insert(0x10000, 1000, MemoryKind::Device));
        assert!(table.insert(0x40000, 16, MemoryKind::Registered));
        assert_eq!(guard_for(1000), 1024);
        assert_eq!(guard_for(1), 256);
        assert_eq!(guard_for(1 << 30), MAX_GUARD);
        assert!(table.contains_guarded(0x10000 - 4, 4), "x[-1]");
        assert!(table.contains_guarded(0x10000 - 1024, 4));
        assert!(!table.contains_guarded(0x10000 - 1025, 4));
        assert!(table.contains_guarded(0x10000 + 1000 + 1020, 4));
        assert!(!table.contains_guarded(0x10000 + 1000 + 1021, 4));
        assert!(
            !table.contains_guarded(0x40000 - 4, 4),
            "registered memory has no guard"
        );
        assert_eq!(
            table.describe(0x10000 - 4).as_deref(),
            Some("4 bytes before the 1000-byte allocation at 0x10000")
        );
        assert_eq!(
            table.describe(0x10000 + 1004).as_deref(),
            Some("4 bytes after the 1000-byte allocation at 0x10000")
        );
        assert_eq!(
            table.describe(0x10010).as_deref(),
            Some("16 bytes inside the 1000-byte allocation at 0x10000")
        );
    }

    #[test]
    fn accessible_ranges_hold_only_accesses_the_lookups_accept() {
        let mut table = AddressTable::default();
        assert!(table.insert(0x10000, 1000, MemoryKind::Device));
        // Right after the device allocation's guard zone, and right after that, unguarded.
        assert!(table.insert(0x10000 + 1000 + 1024, 64, MemoryKind::Registered));
        assert!(table.insert(0x10000 + 1000 + 1024 + 64, 32, MemoryKind::Registered));
        assert!(table.insert(0x40000, 256, MemoryKind::Device));
        for guarded in [false, true] {
            let accepts = |address: u64, len: u64| {
                table.contains(address, len) || (guarded && table.contains_guarded(address, len))
            };
            for address in (0xF000..0x11000u64).chain(0x3FE00..0x40400).step_by(4) {
                for len in [1u64, 4, 8, 64] {
                    let range = table.accessible_range(address, len, guarded);
                    assert_eq!(range.is_some(), accepts(address, len), "{address:#x}+{len}");
                    let Some((lo, hi)) = range else { continue };
                    assert!(lo <= address && address + len <= hi, "{address:#x}+{len}");
                    // Every access inside the range is accepted: its ends and a stride.
                    for (a, l) in [(lo, hi - lo), (lo, 1), (hi - 1, 1)] {
                        assert!(accepts(a, l), "{a:#x}+{l} in {lo:#x}..{hi:#x}");
                    }
                    for a in (lo..hi).step_by(60) {
                        assert!(accepts(a, (hi - a).min(4)), "{a:#x} in {lo:#x}..{hi:#x}");
                    }
                }
            }
        }
        // With guards, the device allocation's range takes them in; registered memory none.
        assert_eq!(
            table.accessible_range(0x10000 - 4, 4, true),
            Some((0x10000 - 1024, 0x10000 + 1000 + 1024))
        );
        assert_eq!(
            table.accessible_range(0x10010, 4, false),
            Some((0x10000, 0x10000 + 1000))
        );
        assert_eq!(
            table.accessible_range(0x10000 + 1000 + 1024 + 8, 4, true),
            Some((0x10000 + 1000 + 1024, 0x10000 + 1000 + 1024 + 64))
        );
        assert_eq!(table.accessible_range(u64::MAX - 2, 4, true), None);
    }

    #[test]
    fn guard_zones_are_mapped_and_zeroed() {
        let start = allocate(100).unwrap();
        let guard = guard_for(100) as usize;
        // SAFETY: the guard zones belong to the block `allocate` made.
        let bytes = unsafe {
            std::slice::from_raw_parts((start as usize - guard) as *const u8, 2 * guard + 100)
        };
        assert!(bytes.iter().all(|&b| b == 0));
        unsafe { deallocate(start, 100) };
    }

    #[test]
    fn allocations_are_aligned_zeroed_and_freeable() {
        let start = allocate(1000).unwrap();
        assert_eq!(start % ALIGNMENT as u64, 0);
        let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, 1000) };
        assert!(bytes.iter().all(|&b| b == 0));
        unsafe { deallocate(start, 1000) };
        assert_eq!(allocate(usize::MAX - 10), Err(CudaError::MemoryAllocation));
    }

    #[test]
    fn pitch_rounds_up_to_512() {
        assert_eq!(pitch_for(1), Some(512));
        assert_eq!(pitch_for(512), Some(512));
        assert_eq!(pitch_for(513), Some(1024));
        assert_eq!(pitch_for(0), Some(512));
        assert_eq!(pitch_for(usize::MAX), None);
    }

    #[test]
    fn host_memory_is_read() {
        let (free, total) = host_memory();
        assert!(total > 0 && free <= total);
    }
}
