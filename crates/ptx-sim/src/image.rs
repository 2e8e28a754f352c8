//! The CPU image: what the CPU target embeds where a GPU build embeds a fat binary.
//!
//! clang's host code hands the embedded bytes to `__cudaRegisterFatBinary` without looking at
//! them, so the CPU target can embed its own container: the (instrumented) PTX of every
//! architecture the program was built for. Layout, all integers little-endian:
//!
//! ```text
//! magic  "CFLXCPU1"          8 bytes
//! count  u32                 number of images
//! count x { arch u32 (70 for sm_70), length u64, PTX bytes (UTF-8, `length` bytes) }
//! ```

use thiserror::Error;

/// The first eight bytes of every CPU image.
pub const MAGIC: &[u8; 8] = b"CFLXCPU1";

/// The PTX of one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchPtx {
    /// 70 for sm_70.
    pub arch: u32,
    pub ptx: String,
}

/// A CPU image that cannot be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ImageError {
    #[error("not a cuda-flux CPU image (bad magic)")]
    BadMagic,
    #[error("truncated cuda-flux CPU image")]
    Truncated,
    #[error("cuda-flux CPU image holds PTX that is not UTF-8 (arch {0})")]
    NotUtf8(u32),
}

/// Encodes images into the container.
pub fn encode(images: &[ArchPtx]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + images.iter().map(|i| 12 + i.ptx.len()).sum::<usize>());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(images.len() as u32).to_le_bytes());
    for image in images {
        out.extend_from_slice(&image.arch.to_le_bytes());
        out.extend_from_slice(&(image.ptx.len() as u64).to_le_bytes());
        out.extend_from_slice(image.ptx.as_bytes());
    }
    out
}

/// Whether `bytes` starts like a CPU image.
pub fn is_image(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The length of the image starting at `bytes`, reading only as far as the headers say; for
/// callers that only hold a pointer to the start of the embedded image.
///
/// # Safety
/// `start` must point at a complete image (as [`encode`] wrote it).
pub unsafe fn image_len(start: *const u8) -> usize {
    let read = |offset: usize, len: usize| std::slice::from_raw_parts(start.add(offset), len);
    let mut offset = 8;
    let count = u32::from_le_bytes(read(offset, 4).try_into().unwrap_or([0; 4]));
    offset += 4;
    for _ in 0..count {
        let len = u64::from_le_bytes(read(offset + 4, 8).try_into().unwrap_or([0; 8]));
        offset += 12 + len as usize;
    }
    offset
}

/// Decodes a container written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<Vec<ArchPtx>, ImageError> {
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or(ImageError::BadMagic)?;
    let (count, mut rest) = take_u32(rest)?;
    let mut images = Vec::new();
    for _ in 0..count {
        let (arch, after) = take_u32(rest)?;
        let (len, after) = take_u64(after)?;
        let len = usize::try_from(len).map_err(|_| ImageError::Truncated)?;
        if after.len() < len {
            return Err(ImageError::Truncated);
        }
        let (ptx, after) = after.split_at(len);
        let ptx = std::str::from_utf8(ptx).map_err(|_| ImageError::NotUtf8(arch))?;
        images.push(ArchPtx {
            arch,
            ptx: ptx.to_owned(),
        });
        rest = after;
    }
    Ok(images)
}

fn take_u32(bytes: &[u8]) -> Result<(u32, &[u8]), ImageError> {
    let (head, rest) = bytes.split_at_checked(4).ok_or(ImageError::Truncated)?;
    let value = u32::from_le_bytes(head.try_into().map_err(|_| ImageError::Truncated)?);
    Ok((value, rest))
}

fn take_u64(bytes: &[u8]) -> Result<(u64, &[u8]), ImageError> {
    let (head, rest) = bytes.split_at_checked(8).ok_or(ImageError::Truncated)?;
    let value = u64::from_le_bytes(head.try_into().map_err(|_| ImageError::Truncated)?);
    Ok((value, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_length() {
        let images = vec![
            ArchPtx {
                arch: 70,
                ptx: ".version 7.8\n".into(),
            },
            ArchPtx {
                arch: 90,
                ptx: String::new(),
            },
        ];
        let bytes = encode(&images);
        assert!(is_image(&bytes));
        assert_eq!(decode(&bytes).unwrap(), images);
        assert_eq!(unsafe { image_len(bytes.as_ptr()) }, bytes.len());
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(decode(b"nope"), Err(ImageError::BadMagic));
        let mut bytes = encode(&[ArchPtx {
            arch: 70,
            ptx: "abc".into(),
        }]);
        bytes.pop();
        assert_eq!(decode(&bytes), Err(ImageError::Truncated));
    }
}
