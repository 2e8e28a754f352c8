//! The clone's argument array: the original's arguments, then the counter buffer and the bank
//! count.

use std::ffi::c_void;

/// Builds the clone's `void **args` from the original launch's `args` (`params` entries) and
/// pointers to the two extra arguments (a local holding the counter buffer's device address, a
/// local holding the bank count).
///
/// Returns `None` when `args` is null but the kernel takes parameters.
///
/// # Safety
///
/// `args` must be null or point to at least `params` readable pointers (the contract of
/// `cudaLaunchKernel`'s `args` for a kernel with `params` parameters).
pub(crate) unsafe fn extend_args(
    args: *const *mut c_void,
    params: usize,
    extra: [*mut c_void; 2],
) -> Option<Vec<*mut c_void>> {
    let mut all = Vec::with_capacity(params + 2);
    if params > 0 {
        if args.is_null() {
            return None;
        }
        // SAFETY: the caller guarantees `params` readable entries.
        all.extend_from_slice(unsafe { std::slice::from_raw_parts(args, params) });
    }
    all.extend_from_slice(&extra);
    Some(all)
}

/// The bits of the kernel parameters `wanted` names (`(index, bytes)`, 1 to 8 bytes each),
/// zero-extended, by parameter index (`None` for the others, and for an index past `params` or
/// a null `args`).
///
/// # Safety
///
/// As for [`extend_args`]; besides, each wanted parameter's value is at least `bytes` long.
pub(crate) unsafe fn launch_param_bits(
    args: *const *mut c_void,
    params: usize,
    wanted: &[(usize, u8)],
) -> Vec<Option<u64>> {
    let mut bits = vec![None; params];
    if args.is_null() {
        return bits;
    }
    for &(index, bytes) in wanted {
        if index >= params || !(1..=8).contains(&bytes) {
            continue;
        }
        // SAFETY: `index < params` readable entries, each pointing to at least `bytes` bytes.
        let value = unsafe {
            let pointer = (*args.add(index)).cast::<u8>();
            if pointer.is_null() {
                continue;
            }
            let mut buffer = [0u8; 8];
            std::ptr::copy_nonoverlapping(pointer, buffer.as_mut_ptr(), usize::from(bytes));
            u64::from_le_bytes(buffer)
        };
        bits[index] = Some(value);
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_the_counter_arguments_after_the_originals() {
        let (mut a, mut b, mut c) = (1.5f32, 7u64, 3i32);
        let mut original: [*mut c_void; 3] = [
            (&mut a as *mut f32).cast(),
            (&mut b as *mut u64).cast(),
            (&mut c as *mut i32).cast(),
        ];
        let (mut counters, mut banks) = (0xdead_0000u64, 32u32);
        let extra = [
            (&mut counters as *mut u64).cast(),
            (&mut banks as *mut u32).cast(),
        ];
        let args = unsafe { extend_args(original.as_mut_ptr(), 3, extra) }.unwrap();
        assert_eq!(args.len(), 5);
        assert_eq!(&args[..3], &original[..]);
        assert_eq!(unsafe { *(args[3] as *const u64) }, 0xdead_0000);
        assert_eq!(unsafe { *(args[4] as *const u32) }, 32);
    }

    #[test]
    fn reads_the_wanted_parameters_bits() {
        let (mut a, mut b, mut c) = (-3i32, 0x1234_5678_9abc_def0u64, 7u8);
        let mut original: [*mut c_void; 3] = [
            (&mut a as *mut i32).cast(),
            (&mut b as *mut u64).cast(),
            (&mut c as *mut u8).cast(),
        ];
        let bits =
            unsafe { launch_param_bits(original.as_mut_ptr(), 3, &[(0, 4), (1, 8), (5, 4)]) };
        assert_eq!(bits, [Some(0xFFFF_FFFD), Some(0x1234_5678_9abc_def0), None]);
        assert_eq!(
            unsafe { launch_param_bits(std::ptr::null(), 3, &[(0, 4)]) },
            [None, None, None]
        );
    }

    #[test]
    fn a_kernel_without_parameters_may_pass_null() {
        let mut x = 0u64;
        let extra: [*mut c_void; 2] = [(&mut x as *mut u64).cast(), (&mut x as *mut u64).cast()];
        let args = unsafe { extend_args(std::ptr::null(), 0, extra) }.unwrap();
        assert_eq!(args, extra);
        assert_eq!(unsafe { extend_args(std::ptr::null(), 2, extra) }, None);
    }
}
