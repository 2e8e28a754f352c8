//! Reading the PTX out of a CUDA fat binary (`.nv_fatbin`, and `__nv_relfatbin` in a unit
//! compiled for separable compilation), so that a unit another compiler built (`nvcc -dc`,
//! `clang++ -fgpu-rdc`) can join cuda-flux's device link (`rdc.rs`).
//!
//! The layout, as fatbinary writes it (CUDA 11.8; checked against `cuobjdump -ptx`): a header
//! (`u32` magic `0xBA55ED50`, `u16` version, `u16` header size, `u64` size of the entries),
//! then entries, each a header and a payload:
//!
//! | offset | field |
//! |---|---|
//! | 0 | `u16` kind: 1 PTX, 2 ELF (SASS) |
//! | 4 | `u32` header size |
//! | 8 | `u64` payload size (padded) |
//! | 16 | `u32` compressed size (when compressed) |
//! | 28 | `u32` architecture (52 for `compute_52` / `sm_52`) |
//! | 40 | `u64` flags: `0x2000` compressed |
//! | 56 | `u64` uncompressed size (when compressed) |
//!
//! A compressed payload is an LZ4 block (nvcc compresses by default, fatbinary compresses PTX).
//! Fat binaries merged by `ld -r` follow each other, with zero padding between them.

use thiserror::Error;

const MAGIC: u32 = 0xBA55_ED50;
const KIND_PTX: u16 = 1;
const FLAG_COMPRESSED: u64 = 0x2000;

/// A fat binary that cannot be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FatbinError {
    #[error("not a CUDA fat binary (bad magic at byte {0})")]
    BadMagic(usize),
    #[error("truncated CUDA fat binary (at byte {0})")]
    Truncated(usize),
    #[error("corrupt compressed entry in a CUDA fat binary (at byte {0})")]
    Compressed(usize),
}

/// One PTX entry of a fat binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxEntry {
    /// The virtual architecture: 52 for `compute_52`.
    pub arch: u32,
    pub ptx: String,
}

fn read<const N: usize>(bytes: &[u8], at: usize) -> Result<[u8; N], FatbinError> {
    at.checked_add(N)
        .and_then(|end| bytes.get(at..end))
        .and_then(|b| b.try_into().ok())
        .ok_or(FatbinError::Truncated(at))
}

fn u16_at(bytes: &[u8], at: usize) -> Result<u16, FatbinError> {
    read::<2>(bytes, at).map(u16::from_le_bytes)
}

fn u32_at(bytes: &[u8], at: usize) -> Result<u32, FatbinError> {
    read::<4>(bytes, at).map(u32::from_le_bytes)
}

fn u64_at(bytes: &[u8], at: usize) -> Result<u64, FatbinError> {
    read::<8>(bytes, at).map(u64::from_le_bytes)
}

fn size(value: u64, at: usize) -> Result<usize, FatbinError> {
    usize::try_from(value).map_err(|_| FatbinError::Truncated(at))
}

/// Every PTX entry of the fat binaries in `bytes` (a section's contents), in order.
pub fn ptx_entries(bytes: &[u8]) -> Result<Vec<PtxEntry>, FatbinError> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        while bytes.get(at) == Some(&0) {
            at += 1;
        }
        if at >= bytes.len() {
            return Ok(out);
        }
        if u32_at(bytes, at)? != MAGIC {
            return Err(FatbinError::BadMagic(at));
        }
        let header = usize::from(u16_at(bytes, at + 6)?);
        let total = size(u64_at(bytes, at + 8)?, at)?;
        let start = at.checked_add(header).ok_or(FatbinError::Truncated(at))?;
        let end = start.checked_add(total).ok_or(FatbinError::Truncated(at))?;
        if end > bytes.len() {
            return Err(FatbinError::Truncated(at));
        }
        let mut entry = start;
        while entry < end {
            let kind = u16_at(bytes, entry)?;
            let header = size(u64::from(u32_at(bytes, entry + 4)?), entry)?;
            let payload_size = size(u64_at(bytes, entry + 8)?, entry)?;
            let payload_start = entry
                .checked_add(header)
                .ok_or(FatbinError::Truncated(entry))?;
            let payload_end = payload_start
                .checked_add(payload_size)
                .filter(|&e| e <= end && header >= 64)
                .ok_or(FatbinError::Truncated(entry))?;
            if kind == KIND_PTX {
                let payload = &bytes[payload_start..payload_end];
                let text = if u64_at(bytes, entry + 40)? & FLAG_COMPRESSED != 0 {
                    let compressed = size(u64::from(u32_at(bytes, entry + 16)?), entry)?;
                    let uncompressed = size(u64_at(bytes, entry + 56)?, entry)?;
                    let input = payload
                        .get(..compressed)
                        .ok_or(FatbinError::Truncated(entry))?;
                    lz4_block(input, uncompressed).ok_or(FatbinError::Compressed(entry))?
                } else {
                    payload.to_vec()
                };
                // PTX is text, padded with NULs.
                let text = match text.iter().position(|&b| b == 0) {
                    Some(nul) => &text[..nul],
                    None => &text[..],
                };
                out.push(PtxEntry {
                    arch: u32_at(bytes, entry + 28)?,
                    ptx: String::from_utf8_lossy(text).into_owned(),
                });
            }
            entry = payload_end;
        }
        at = end;
    }
}

/// Decompresses an LZ4 block into exactly `size` bytes; `None` if it is not one.
fn lz4_block(input: &[u8], size: usize) -> Option<Vec<u8>> {
    // A length: the token's nibble, then bytes added while they are 255.
    fn length(input: &[u8], at: &mut usize, nibble: u8) -> Option<usize> {
        let mut length = usize::from(nibble);
        if nibble == 15 {
            loop {
                let byte = *input.get(*at)?;
                *at += 1;
                length = length.checked_add(usize::from(byte))?;
                if byte != 255 {
                    break;
                }
            }
        }
        Some(length)
    }
    let mut out = Vec::with_capacity(size);
    let mut at = 0;
    while at < input.len() {
        let token = input[at];
        at += 1;
        let literals = length(input, &mut at, token >> 4)?;
        let literal_end = at.checked_add(literals)?;
        out.extend_from_slice(input.get(at..literal_end)?);
        at = literal_end;
        if at == input.len() {
            // The last sequence has literals only.
            break;
        }
        let offset = usize::from(u16::from_le_bytes([*input.get(at)?, *input.get(at + 1)?]));
        at += 2;
        let matched = length(input, &mut at, token & 15)?.checked_add(4)?;
        if offset == 0 || offset > out.len() || out.len().checked_add(matched)? > size {
            return None;
        }
        // The copy may overlap what it writes (a run): byte by byte.
        let from = out.len() - offset;
        for index in from..from + matched {
            let byte = out[index];
            out.push(byte);
        }
    }
    (out.len() == size).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lz4_blocks_decode_literals_matches_and_runs() {
        // "abcabcabcX": 3 literals, a match of 6 at offset 3 (overlapping), then "X".
        let block = [0x32, b'a', b'b', b'c', 3, 0, 0x10, b'X'];
        assert_eq!(lz4_block(&block, 10).unwrap(), b"abcabcabcX");
        // The wrong size, an offset before the start, a truncated block.
        assert_eq!(lz4_block(&block, 11), None);
        assert_eq!(lz4_block(&[0x12, b'a', 2, 0, 0x10, b'X'], 7), None);
        assert_eq!(lz4_block(&block[..4], 10), None);
        // Extended lengths: 15 + 5 literals.
        let mut long = vec![0xF0, 5];
        long.extend_from_slice(&[b'z'; 20]);
        assert_eq!(lz4_block(&long, 20).unwrap(), vec![b'z'; 20]);
    }

    fn entry(arch: u32, ptx: &[u8]) -> Vec<u8> {
        let mut header = vec![0u8; 64];
        header[0..2].copy_from_slice(&KIND_PTX.to_le_bytes());
        header[4..8].copy_from_slice(&64u32.to_le_bytes());
        let padded = ptx.len().next_multiple_of(8);
        header[8..16].copy_from_slice(&(padded as u64).to_le_bytes());
        header[28..32].copy_from_slice(&arch.to_le_bytes());
        header.extend_from_slice(ptx);
        header.resize(64 + padded, 0);
        header
    }

    fn fatbin(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut out = MAGIC.to_le_bytes().to_vec();
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&16u16.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn uncompressed_entries_of_merged_fat_binaries() {
        let mut bytes = fatbin(&[entry(52, b".version 7.8\n")]);
        bytes.extend_from_slice(&[0; 8]);
        bytes.extend_from_slice(&fatbin(&[entry(70, b".target sm_70\n")]));
        let entries = ptx_entries(&bytes).unwrap();
        assert_eq!(
            entries,
            [
                PtxEntry {
                    arch: 52,
                    ptx: ".version 7.8\n".to_string()
                },
                PtxEntry {
                    arch: 70,
                    ptx: ".target sm_70\n".to_string()
                }
            ]
        );
        assert_eq!(
            ptx_entries(&bytes[..bytes.len() - 1]),
            Err(FatbinError::Truncated(104))
        );
        assert_eq!(ptx_entries(b"garbage!"), Err(FatbinError::BadMagic(0)));
    }
}
