//! `host-runtime`: linked into instrumented programs (as a static library). It will own the
//! counter-buffer pool, launch records and JSON output. Today it holds the harvesting step:
//! folding the banked counters of one launch into per-block totals.

/// Sums a launch's banked counter buffer (`[bank][block][threads, warps]`, as laid out by
/// `device-runtime`) into per-block thread and warp counts.
///
/// Returns `None` when the buffer's length is not `banks * blocks * 2`.
pub fn fold_banks(buffer: &[u64], banks: usize, blocks: usize) -> Option<(Vec<u64>, Vec<u64>)> {
    if banks.checked_mul(blocks)?.checked_mul(2)? != buffer.len() {
        return None;
    }
    let mut threads = vec![0u64; blocks];
    let mut warps = vec![0u64; blocks];
    if blocks == 0 {
        return Some((threads, warps));
    }
    for bank in buffer.chunks_exact(blocks * 2) {
        for (block, pair) in bank.chunks_exact(2).enumerate() {
            threads[block] += pair[0];
            warps[block] += pair[1];
        }
    }
    Some((threads, warps))
}

#[cfg(test)]
mod tests {
    use super::fold_banks;

    #[test]
    fn folds_every_bank_into_its_block() {
        // 2 banks x 3 blocks x (threads, warps)
        let buffer = [1, 10, 2, 20, 3, 30, 4, 40, 5, 50, 6, 60];
        let (threads, warps) = fold_banks(&buffer, 2, 3).unwrap();
        assert_eq!(threads, [5, 7, 9]);
        assert_eq!(warps, [50, 70, 90]);
    }

    #[test]
    fn rejects_a_buffer_of_the_wrong_size() {
        assert_eq!(fold_banks(&[0; 10], 2, 3), None);
        assert_eq!(fold_banks(&[], usize::MAX, 3), None);
    }
}
