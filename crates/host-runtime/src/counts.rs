//! Turning a launch's counter buffer into counts: folding the banks into per-block counts, and
//! per-block counts into per-opcode counts.

use std::collections::HashMap;

use crate::report::{Counts, OpcodeCounts};
use crate::snapshot::Block;

/// Sums a launch's banked counter buffer (`[bank][block][threads, warps]`, as laid out by
/// `device-runtime`) into per-block thread and warp counts. The thread counter of each block of
/// `packed` holds both of its counts (device-runtime's `packed_update`): threads in the low 32
/// bits, warps in the high 32 bits, split in each bank before the sums (the launch keeps every
/// bank below `PACKED_THREADS_LIMIT` threads of a block, so the halves never carried).
///
/// Errors, with the reason the launch's counts are refused: the buffer's length is not
/// `banks * blocks * 2`, a packed block is not one of `blocks`, or a sum does not fit 64 bits.
pub fn fold_banks(
    buffer: &[u64],
    banks: usize,
    blocks: usize,
    packed: &[usize],
) -> Result<(Vec<u64>, Vec<u64>), String> {
    if banks.checked_mul(blocks).and_then(|n| n.checked_mul(2)) != Some(buffer.len()) {
        return Err("the counter buffer has the wrong size".to_owned());
    }
    if let Some(&block) = packed.iter().find(|&&b| b >= blocks) {
        return Err(format!(
            "the snapshot packs block {block} of {blocks}: the counts are inconsistent"
        ));
    }
    let mut is_packed = vec![false; blocks];
    for &block in packed {
        is_packed[block] = true;
    }
    let mut threads = vec![0u64; blocks];
    let mut warps = vec![0u64; blocks];
    if blocks == 0 {
        return Ok((threads, warps));
    }
    let overflow = || "a block count does not fit 64 bits".to_owned();
    for bank in buffer.chunks_exact(blocks * 2) {
        for (block, pair) in bank.chunks_exact(2).enumerate() {
            let (t, w) = if is_packed[block] {
                let warps = (pair[0] >> 32).checked_add(pair[1]).ok_or_else(overflow)?;
                (pair[0] & u64::from(u32::MAX), warps)
            } else {
                (pair[0], pair[1])
            };
            threads[block] = threads[block].checked_add(t).ok_or_else(overflow)?;
            warps[block] = warps[block].checked_add(w).ok_or_else(overflow)?;
        }
    }
    Ok((threads, warps))
}

/// A snapshot's blocks as opcode histograms, built once and applied to every launch.
#[derive(Debug, Clone)]
pub struct OpcodeTable {
    opcodes: Vec<String>,
    /// Per block: (index into `opcodes`, occurrences in the block).
    blocks: Vec<Vec<(usize, u64)>>,
}

impl OpcodeTable {
    /// Indexes `blocks`' instructions.
    pub fn new(blocks: &[Block]) -> Self {
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut opcodes = Vec::new();
        let blocks = blocks
            .iter()
            .map(|block| {
                let mut histogram: Vec<(usize, u64)> = Vec::new();
                for opcode in &block.instructions {
                    let id = *index.entry(opcode.as_str()).or_insert_with(|| {
                        opcodes.push(opcode.clone());
                        opcodes.len() - 1
                    });
                    match histogram.iter_mut().find(|(op, _)| *op == id) {
                        Some((_, n)) => *n += 1,
                        None => histogram.push((id, 1)),
                    }
                }
                histogram
            })
            .collect();
        OpcodeTable { opcodes, blocks }
    }

    /// Executed instructions per opcode: each block's count times each of its instructions,
    /// summed per opcode; thread-level from `threads`, warp-level from `warps` (both per block).
    /// Opcodes that never executed are left out. Counts beyond the table's blocks are ignored.
    pub fn count(&self, threads: &[u64], warps: &[u64]) -> OpcodeCounts {
        let mut sums = vec![Counts::default(); self.opcodes.len()];
        for ((histogram, &t), &w) in self.blocks.iter().zip(threads).zip(warps) {
            if t == 0 && w == 0 {
                continue;
            }
            for &(op, n) in histogram {
                sums[op].add(Counts {
                    threads: t.saturating_mul(n),
                    warps: w.saturating_mul(n),
                });
            }
        }
        self.opcodes
            .iter()
            .zip(sums)
            .filter(|(_, c)| *c != Counts::default())
            .map(|(op, c)| (op.clone(), c))
            .collect()
    }
}

/// Adds `counts` into `totals`, opcode by opcode.
pub fn add_opcode_counts(totals: &mut OpcodeCounts, counts: &OpcodeCounts) {
    for (opcode, c) in counts {
        totals.entry(opcode.clone()).or_default().add(*c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_every_bank_into_its_block() {
        // 2 banks x 3 blocks x (threads, warps)
        let buffer = [1, 10, 2, 20, 3, 30, 4, 40, 5, 50, 6, 60];
        let (threads, warps) = fold_banks(&buffer, 2, 3, &[]).unwrap();
        assert_eq!(threads, [5, 7, 9]);
        assert_eq!(warps, [50, 70, 90]);
    }

    #[test]
    fn splits_packed_counters_in_each_bank() {
        // Block 1 packed: bank 0 holds 3 warps of 70 threads, bank 1 one warp of 32 threads,
        // as `packed_update` adds them (threads + 2^32 per warp).
        let warp = device_runtime::PACKED_WARP;
        let bank0 = [0, 0, (32 + 32 + 6) + 3 * warp, 0];
        let bank1 = [0, 0, 32 + warp, 0];
        let buffer: Vec<u64> = bank0.iter().chain(&bank1).copied().collect();
        let (threads, warps) = fold_banks(&buffer, 2, 2, &[1]).unwrap();
        assert_eq!(threads, [0, 102]);
        assert_eq!(warps, [0, 4]);
        // Each bank's halves are split before the sum: a carry across banks is no carry.
        let full = [0, 0, u64::from(u32::MAX) + (u64::from(u32::MAX) << 32), 0];
        let buffer: Vec<u64> = full.iter().chain(&full).copied().collect();
        let (threads, warps) = fold_banks(&buffer, 2, 2, &[1]).unwrap();
        assert_eq!(threads[1], 2 * u64::from(u32::MAX));
        assert_eq!(warps[1], 2 * u64::from(u32::MAX));
    }

    #[test]
    fn rejects_a_buffer_of_the_wrong_size_or_counts_that_do_not_fit() {
        assert!(fold_banks(&[0; 10], 2, 3, &[]).is_err());
        assert!(fold_banks(&[], usize::MAX, 3, &[]).is_err());
        assert_eq!(fold_banks(&[], 4, 0, &[]), Ok((vec![], vec![])));
        assert!(fold_banks(&[0; 12], 2, 3, &[3]).is_err());
        assert!(fold_banks(&[u64::MAX, 0, 1, 0], 2, 1, &[]).is_err());
    }

    fn block(instructions: &[&str]) -> Block {
        Block {
            function: "k".into(),
            label: None,
            instructions: instructions.iter().map(|s| s.to_string()).collect(),
            ..Block::default()
        }
    }

    #[test]
    fn opcode_counts_are_block_counts_times_instructions() {
        // A loop: entry (once per thread), body (8 iterations), exit.
        let blocks = [
            block(&["ld.param.u64", "mov.u32", "setp.ge.s32", "bra"]),
            block(&[
                "ld.global.f32",
                "fma.rn.f32",
                "st.global.f32",
                "add.s32",
                "setp.lt.s32",
                "bra",
            ]),
            block(&["ret"]),
            block(&["trap"]), // never entered
        ];
        let table = OpcodeTable::new(&blocks);
        // 64 threads = 2 warps enter; the body runs 8 times; 60 threads (2 warps) reach ret.
        let threads = [64, 512, 60, 0];
        let warps = [2, 16, 2, 0];
        let counts = table.count(&threads, &warps);
        let c = |t, w| Counts {
            threads: t,
            warps: w,
        };
        let expected: OpcodeCounts = [
            ("ld.param.u64", c(64, 2)),
            ("mov.u32", c(64, 2)),
            ("setp.ge.s32", c(64, 2)),
            ("bra", c(64 + 512, 2 + 16)),
            ("ld.global.f32", c(512, 16)),
            ("fma.rn.f32", c(512, 16)),
            ("st.global.f32", c(512, 16)),
            ("add.s32", c(512, 16)),
            ("setp.lt.s32", c(512, 16)),
            ("ret", c(60, 2)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(counts, expected);
        assert!(
            !counts.contains_key("trap"),
            "unexecuted opcodes are left out"
        );

        let mut totals = OpcodeCounts::new();
        add_opcode_counts(&mut totals, &counts);
        add_opcode_counts(&mut totals, &table.count(&[1, 0, 0, 0], &[1, 0, 0, 0]));
        assert_eq!(totals["bra"], c(577, 19));
        assert_eq!(totals["ret"], c(60, 2));
    }

    #[test]
    fn repeated_opcodes_in_a_block_multiply() {
        let table = OpcodeTable::new(&[block(&["add.s32", "add.s32", "add.s32"])]);
        let counts = table.count(&[10], &[1]);
        assert_eq!(
            counts["add.s32"],
            Counts {
                threads: 30,
                warps: 3
            }
        );
        // Too few or too many counts: only matching blocks count.
        assert!(table.count(&[], &[]).is_empty());
        assert_eq!(table.count(&[1, 99], &[1, 99])["add.s32"].threads, 3);
    }
}
