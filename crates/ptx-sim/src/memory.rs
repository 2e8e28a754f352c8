//! Host memory the interpreter owns or touches: the module's variables, raw loads, stores and
//! atomics on host addresses.
//!
//! Kernels of different CTAs run on different host threads and may race on global memory, as
//! they may on a GPU. Every access therefore goes through relaxed atomics of the access width
//! (plain moves on x86-64), so racing kernels give GPU-like results instead of undefined
//! behaviour in the interpreter.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

use crate::decode::{AtomOp, AtomType};

/// A zeroed, aligned host allocation whose contents kernels read and write through raw
/// pointers (module variables, shared windows, local windows).
pub(crate) struct HostBuffer {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the buffer is plain bytes; all access after construction goes through raw pointers
// with atomic operations (see the module documentation), never through references.
unsafe impl Send for HostBuffer {}
// SAFETY: as above; shared use only hands out the base address.
unsafe impl Sync for HostBuffer {}

/// Alignment of every buffer: enough for any PTX type and for vector accesses.
pub(crate) const BUFFER_ALIGN: usize = 256;

impl HostBuffer {
    /// A zeroed buffer of `len` bytes (at least one byte, so that every buffer has a distinct
    /// address). `None` when the allocation fails or the size is absurd.
    pub fn zeroed(len: usize) -> Option<HostBuffer> {
        let layout = Layout::from_size_align(len.max(1), BUFFER_ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        NonNull::new(ptr).map(|ptr| HostBuffer { ptr, layout })
    }

    pub fn address(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Whether `[address, address + len)` lies inside the buffer.
    pub fn contains(&self, address: u64, len: u64) -> bool {
        let base = self.address();
        address >= base
            && address
                .checked_add(len)
                .is_some_and(|end| end <= base + self.len() as u64)
    }

    /// Writes `bytes` at `offset` (construction time: initializers, parameter buffers).
    pub fn write(&mut self, offset: usize, bytes: &[u8]) -> bool {
        if offset
            .checked_add(bytes.len())
            .is_none_or(|end| end > self.len())
        {
            return false;
        }
        // SAFETY: the range was checked against the allocation, and `&mut self` excludes
        // concurrent access.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ptr.as_ptr().add(offset),
                bytes.len(),
            )
        };
        true
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// Whether `address` is not a multiple of `bytes` (a mask for the usual power-of-two sizes: a
/// division per access is a measurable part of a load's cost in the interpreter).
#[inline(always)]
fn misaligned(address: u64, bytes: u8) -> bool {
    let bytes = u64::from(bytes);
    if bytes.is_power_of_two() {
        address & (bytes - 1) != 0
    } else {
        address % bytes != 0
    }
}

/// Loads `bytes` (1, 2, 4 or 8) from host address `address`, zero-extended.
///
/// # Safety
/// `[address, address + bytes)` must be valid host memory.
#[inline]
pub(crate) unsafe fn load(address: u64, bytes: u8) -> u64 {
    let p = address as *mut u8;
    if misaligned(address, bytes) {
        return load_bytes(address, bytes);
    }
    // SAFETY: valid per the caller, aligned per the check above.
    unsafe {
        match bytes {
            1 => u64::from(AtomicU8::from_ptr(p).load(Ordering::Relaxed)),
            2 => u64::from(AtomicU16::from_ptr(p.cast()).load(Ordering::Relaxed)),
            4 => u64::from(AtomicU32::from_ptr(p.cast()).load(Ordering::Relaxed)),
            _ => AtomicU64::from_ptr(p.cast()).load(Ordering::Relaxed),
        }
    }
}

/// Loads `BYTES` (1, 2, 4 or 8) from host address `address`, zero-extended, where the address
/// is known to be aligned.
///
/// # Safety
/// `[address, address + BYTES)` must be valid host memory, and `address` a multiple of `BYTES`.
#[inline(always)]
pub(crate) unsafe fn load_aligned<const BYTES: u8>(address: u64) -> u64 {
    let p = address as *mut u8;
    // SAFETY: valid and aligned per the caller.
    unsafe {
        match BYTES {
            1 => u64::from(AtomicU8::from_ptr(p).load(Ordering::Relaxed)),
            2 => u64::from(AtomicU16::from_ptr(p.cast()).load(Ordering::Relaxed)),
            4 => u64::from(AtomicU32::from_ptr(p.cast()).load(Ordering::Relaxed)),
            _ => AtomicU64::from_ptr(p.cast()).load(Ordering::Relaxed),
        }
    }
}

/// Stores the low `BYTES` (1, 2, 4 or 8) of `value` at host address `address`, known to be
/// aligned.
///
/// # Safety
/// `[address, address + BYTES)` must be valid host memory, and `address` a multiple of `BYTES`.
#[inline(always)]
pub(crate) unsafe fn store_aligned<const BYTES: u8>(address: u64, value: u64) {
    let p = address as *mut u8;
    // SAFETY: valid and aligned per the caller.
    unsafe {
        match BYTES {
            1 => AtomicU8::from_ptr(p).store(value as u8, Ordering::Relaxed),
            2 => AtomicU16::from_ptr(p.cast()).store(value as u16, Ordering::Relaxed),
            4 => AtomicU32::from_ptr(p.cast()).store(value as u32, Ordering::Relaxed),
            _ => AtomicU64::from_ptr(p.cast()).store(value, Ordering::Relaxed),
        }
    }
}

/// [`store_aligned`] as a plain (non-atomic) write, for memory no other thread accesses
/// meanwhile (a CTA's shared window), so that loops of such stores vectorize.
///
/// # Safety
/// As [`store_aligned`], and no other thread accesses the memory during the call.
#[inline(always)]
pub(crate) unsafe fn store_private<const BYTES: u8>(address: usize, value: u64) {
    // SAFETY: valid, aligned and unshared per the caller.
    unsafe {
        match BYTES {
            1 => std::ptr::write(address as *mut u8, value as u8),
            2 => std::ptr::write(address as *mut u16, value as u16),
            4 => std::ptr::write(address as *mut u32, value as u32),
            _ => std::ptr::write(address as *mut u64, value),
        }
    }
}

/// [`load_aligned`] as a plain (non-atomic) read, for memory no other thread accesses
/// meanwhile (a CTA's shared window), so that loops of such loads vectorize.
///
/// # Safety
/// As [`load_aligned`], and no other thread writes the memory during the call.
#[inline(always)]
pub(crate) unsafe fn load_private<const BYTES: u8>(address: usize) -> u64 {
    // SAFETY: valid, aligned and unshared per the caller.
    unsafe {
        match BYTES {
            1 => u64::from(std::ptr::read(address as *const u8)),
            2 => u64::from(std::ptr::read(address as *const u16)),
            4 => u64::from(std::ptr::read(address as *const u32)),
            _ => std::ptr::read(address as *const u64),
        }
    }
}

#[cold]
unsafe fn load_bytes(address: u64, bytes: u8) -> u64 {
    let mut value = 0u64;
    for i in 0..u64::from(bytes.min(8)) {
        // SAFETY: valid per the caller of `load`; bytes are always aligned.
        let b = unsafe { AtomicU8::from_ptr((address + i) as *mut u8).load(Ordering::Relaxed) };
        value |= u64::from(b) << (8 * i);
    }
    value
}

/// Stores the low `bytes` of `value` at host address `address`.
///
/// # Safety
/// `[address, address + bytes)` must be valid, writable host memory.
#[inline]
pub(crate) unsafe fn store(address: u64, bytes: u8, value: u64) {
    let p = address as *mut u8;
    if misaligned(address, bytes) {
        for i in 0..u64::from(bytes.min(8)) {
            // SAFETY: valid per the caller; bytes are always aligned.
            unsafe {
                AtomicU8::from_ptr((address + i) as *mut u8)
                    .store((value >> (8 * i)) as u8, Ordering::Relaxed)
            };
        }
        return;
    }
    // SAFETY: valid per the caller, aligned per the check above.
    unsafe {
        match bytes {
            1 => AtomicU8::from_ptr(p).store(value as u8, Ordering::Relaxed),
            2 => AtomicU16::from_ptr(p.cast()).store(value as u16, Ordering::Relaxed),
            4 => AtomicU32::from_ptr(p.cast()).store(value as u32, Ordering::Relaxed),
            _ => AtomicU64::from_ptr(p.cast()).store(value, Ordering::Relaxed),
        }
    }
}

/// Copies `len` bytes between host addresses (call parameters in local windows).
///
/// # Safety
/// Both ranges must be valid host memory.
pub(crate) unsafe fn copy(from: u64, to: u64, len: u64) {
    for i in 0..len {
        // SAFETY: per the caller.
        unsafe { store(to + i, 1, load(from + i, 1)) };
    }
}

/// The value an atomic operation leaves in memory that held `old` (the low 32 or 64 bits of
/// each operand, per `ty`): the one definition of the read-modify-write operations that have no
/// native atomic instruction, and of all of them in [`atomic_private`].
#[inline(always)]
fn updated(op: AtomOp, ty: AtomType, old: u64, b: u64, c: u64) -> u64 {
    macro_rules! width {
        ($uint:ty, $sint:ty, $float:ty, $signed_ty:pat, $float_ty:pat) => {{
            let (v, b, c) = (old as $uint, b as $uint, c as $uint);
            let new: $uint = match (op, ty) {
                (AtomOp::Add, $float_ty) => {
                    (<$float>::from_bits(v) + <$float>::from_bits(b)).to_bits()
                }
                (AtomOp::Add, _) => v.wrapping_add(b),
                (AtomOp::Min, $signed_ty) => (v as $sint).min(b as $sint) as $uint,
                (AtomOp::Max, $signed_ty) => (v as $sint).max(b as $sint) as $uint,
                (AtomOp::Min, _) => v.min(b),
                (AtomOp::Max, _) => v.max(b),
                (AtomOp::Inc, _) => {
                    if v >= b {
                        0
                    } else {
                        v + 1
                    }
                }
                (AtomOp::Dec, _) => {
                    if v == 0 || v > b {
                        b
                    } else {
                        v - 1
                    }
                }
                (AtomOp::And, _) => v & b,
                (AtomOp::Or, _) => v | b,
                (AtomOp::Xor, _) => v ^ b,
                (AtomOp::Exch, _) => b,
                (AtomOp::Cas, _) => {
                    if v == b {
                        c
                    } else {
                        v
                    }
                }
            };
            u64::from(new)
        }};
    }
    if ty.bytes() == 4 {
        width!(u32, i32, f32, AtomType::S32, AtomType::F32)
    } else {
        width!(u64, i64, f64, AtomType::S64, AtomType::F64)
    }
}

/// Atomically applies `op` of type `ty` at host address `address` with operands `b` (and
/// `c` for `cas`); returns the old value (zero-extended).
///
/// # Safety
/// `[address, address + ty.bytes())` must be valid host memory, aligned.
pub(crate) unsafe fn atomic(address: u64, op: AtomOp, ty: AtomType, b: u64, c: u64) -> u64 {
    // One width: `$atomic` over `$uint`, the native atomic where there is one, a
    // compare-and-swap loop over [`updated`] otherwise (float add, signed min/max, wrapping
    // inc/dec).
    macro_rules! read_modify_write {
        ($atomic:ty, $uint:ty, $signed_ty:pat, $float_ty:pat) => {{
            let order = Ordering::SeqCst;
            // SAFETY: valid and aligned per the caller.
            let a = unsafe { <$atomic>::from_ptr(address as *mut $uint) };
            let (bw, cw) = (b as $uint, c as $uint);
            match (op, ty) {
                (AtomOp::Add, $float_ty)
                | (AtomOp::Min | AtomOp::Max, $signed_ty)
                | (AtomOp::Inc | AtomOp::Dec, _) => {
                    match a.fetch_update(order, order, |v| {
                        Some(updated(op, ty, u64::from(v), b, c) as $uint)
                    }) {
                        Ok(v) | Err(v) => v,
                    }
                }
                (AtomOp::Add, _) => a.fetch_add(bw, order),
                (AtomOp::Min, _) => a.fetch_min(bw, order),
                (AtomOp::Max, _) => a.fetch_max(bw, order),
                (AtomOp::And, _) => a.fetch_and(bw, order),
                (AtomOp::Or, _) => a.fetch_or(bw, order),
                (AtomOp::Xor, _) => a.fetch_xor(bw, order),
                (AtomOp::Exch, _) => a.swap(bw, order),
                (AtomOp::Cas, _) => match a.compare_exchange(bw, cw, order, order) {
                    Ok(v) | Err(v) => v,
                },
            }
        }};
    }
    if ty.bytes() == 4 {
        u64::from(read_modify_write!(
            AtomicU32,
            u32,
            AtomType::S32,
            AtomType::F32
        ))
    } else {
        read_modify_write!(AtomicU64, u64, AtomType::S64, AtomType::F64)
    }
}

/// [`atomic`] on memory no other thread accesses meanwhile (a CTA's shared window, a thread's
/// local window: a CTA runs on one worker): the same read-modify-write with plain loads and
/// stores, no locked instruction (float types excepted).
///
/// # Safety
/// As [`atomic`], and no other thread accesses the memory during the call.
#[inline(always)]
pub(crate) unsafe fn atomic_private(address: u64, op: AtomOp, ty: AtomType, b: u64, c: u64) -> u64 {
    // SAFETY: valid, aligned and unshared per the caller.
    unsafe {
        if matches!(ty, AtomType::F32 | AtomType::F64) {
            // Float adds through one code path only: the NaN an addition of two NaNs gives
            // depends on the order the compiler puts the operands in.
            atomic(address, op, ty, b, c)
        } else if ty.bytes() == 4 {
            let old = load_aligned::<4>(address);
            store_aligned::<4>(address, updated(op, ty, old, b, c));
            old
        } else {
            let old = load_aligned::<8>(address);
            store_aligned::<8>(address, updated(op, ty, old, b, c));
            old
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_atomics_match_the_locked_ones() {
        let ops = AtomOp::ALL;
        let types = [
            AtomType::U32,
            AtomType::S32,
            AtomType::U64,
            AtomType::S64,
            AtomType::F32,
            AtomType::F64,
        ];
        let values = [
            0u64,
            1,
            7,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            u64::MAX,
            0x8000_0000_0000_0000,
            u64::from(1.5f32.to_bits()),
            (-2.25f64).to_bits(),
            u64::from(f32::NAN.to_bits()),
        ];
        let mut locked = HostBuffer::zeroed(8).unwrap();
        let mut private = HostBuffer::zeroed(8).unwrap();
        for op in ops {
            for ty in types {
                for &old in &values {
                    for &b in &values {
                        for &c in &values[..3] {
                            let bytes = old.to_le_bytes();
                            assert!(locked.write(0, &bytes) && private.write(0, &bytes));
                            // SAFETY: both buffers hold 8 aligned bytes.
                            let (l, p) = unsafe {
                                (
                                    atomic(locked.address(), op, ty, b, c),
                                    atomic_private(private.address(), op, ty, b, c),
                                )
                            };
                            // SAFETY: as above.
                            let (lm, pm) =
                                unsafe { (load(locked.address(), 8), load(private.address(), 8)) };
                            assert_eq!((l, lm), (p, pm), "{op:?} {ty:?} {old:#x} {b:#x} {c:#x}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn loads_stores_and_atomics() {
        let mut buffer = HostBuffer::zeroed(64).unwrap();
        assert!(buffer.write(0, &[1, 2, 3, 4]));
        assert!(!buffer.write(62, &[0; 4]));
        let base = buffer.address();
        // SAFETY: all addresses are inside the 64-byte buffer.
        unsafe {
            assert_eq!(load(base, 4), 0x0403_0201);
            assert_eq!(load(base + 1, 2), 0x0302, "unaligned loads go bytewise");
            store(base + 8, 8, u64::MAX);
            assert_eq!(load(base + 8, 1), 0xFF);
            assert_eq!(
                atomic(
                    base + 16,
                    AtomOp::Add,
                    AtomType::F32,
                    1.5f32.to_bits().into(),
                    0
                ),
                0
            );
            assert_eq!(load(base + 16, 4), u64::from(1.5f32.to_bits()));
            assert_eq!(atomic(base + 24, AtomOp::Inc, AtomType::U32, 1, 0), 0);
            assert_eq!(atomic(base + 24, AtomOp::Inc, AtomType::U32, 1, 0), 1);
            assert_eq!(load(base + 24, 4), 0, "inc wraps at the bound");
            assert_eq!(atomic(base + 32, AtomOp::Cas, AtomType::U64, 0, 7), 0);
            assert_eq!(atomic(base + 32, AtomOp::Cas, AtomType::U64, 0, 9), 7);
            assert_eq!(
                atomic(
                    base + 40,
                    AtomOp::Min,
                    AtomType::S32,
                    (-3i32) as u32 as u64,
                    0
                ),
                0
            );
            assert_eq!(load(base + 40, 4), u64::from((-3i32) as u32));
        }
        assert!(buffer.contains(base + 60, 4));
        assert!(!buffer.contains(base + 61, 4));
    }
}
