//! CUDA arrays (`cudaMallocArray`, `cudaMalloc3DArray`): device memory with a texel format
//! and an extent, rows packed (row pitch = width × texel size), which kernels read through
//! textures. Copies in and out of arrays and between pitched regions (`cudaMemcpy*ToArray`,
//! `*FromArray`, `cudaMemcpy3D`), `cudaMalloc3D`/`cudaMemset3D`, and the textures over arrays
//! and pitched 2-D memory, with the sampler state ptx-sim applies ([`ptx_sim::Sampling`]).

use ptx_sim::{AddressMode, ChannelKind, Sampling, Texture};

use crate::abi::{ChannelFormatDesc, TextureDesc, TextureReferenceHead};
use crate::error::CudaError;
use crate::memory::{self, MemoryKind};
use crate::registry::CudaArray;
use crate::runtime::{self, registry, Result};

/// `cudaMallocArray` / `cudaMalloc3DArray`: `extent` in texels, 0 for absent dimensions.
pub fn malloc_array(desc: &ChannelFormatDesc, extent: [usize; 3], flags: u32) -> Result<u64> {
    let (kind, channels, bits) = runtime::channel_format(desc)?;
    // An array of depth > 0 needs a height; a width is always needed.
    if extent[0] == 0 || (extent[2] > 0 && extent[1] == 0) {
        return Err(CudaError::InvalidValue.into());
    }
    let array = CudaArray {
        desc: *desc,
        kind,
        channels,
        bits,
        extent,
        flags,
    };
    let len = array
        .size()
        .iter()
        .try_fold(array.texel_bytes(), |n, &e| n.checked_mul(e))
        .ok_or(CudaError::MemoryAllocation)?;
    let handle = runtime::allocate(len, MemoryKind::Array)?;
    registry().arrays.insert(handle, array);
    Ok(handle)
}

/// `cudaFreeArray` (null is a no-op).
pub fn free_array(handle: u64) -> Result<()> {
    if handle == 0 {
        return Ok(());
    }
    registry()
        .arrays
        .remove(&handle)
        .ok_or(CudaError::InvalidValue)?;
    Ok(runtime::free(handle, &[MemoryKind::Array])?)
}

/// The array behind a handle.
pub fn array(handle: u64) -> Result<CudaArray, CudaError> {
    registry()
        .arrays
        .get(&handle)
        .copied()
        .ok_or(CudaError::InvalidValue)
}

/// One side of a copy: rows of `width` bytes, `pitch` apart, in slices `slice` apart.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    pub base: u64,
    pub pitch: usize,
    pub slice: usize,
    /// The bytes the side may span from `base` (arrays and device memory are checked; host
    /// memory is the program's word: `usize::MAX`).
    pub limit: usize,
}

impl Region {
    /// Rows of the array `handle` from byte `x` of row `y` of slice `z`.
    pub fn in_array(handle: u64, [x, y, z]: [usize; 3]) -> Result<Region, CudaError> {
        let array = array(handle)?;
        let offset = z
            .checked_mul(array.slice_bytes())
            .and_then(|o| o.checked_add(y.checked_mul(array.row_bytes())?))
            .and_then(|o| o.checked_add(x))
            .filter(|&o| o <= array.len() && x <= array.row_bytes())
            .ok_or(CudaError::InvalidValue)?;
        Ok(Region {
            base: handle + offset as u64,
            pitch: array.row_bytes(),
            slice: array.slice_bytes(),
            limit: array.len() - offset,
        })
    }

    /// Pitched memory at `base`: device memory (checked against its allocation) or host.
    pub fn in_memory(base: u64, pitch: usize, slice: usize, device: bool) -> Result<Region> {
        if base == 0 {
            return Err(CudaError::InvalidValue.into());
        }
        let limit = if device {
            let (start, range) = runtime::find(base).ok_or(CudaError::InvalidValue)?;
            (start + range.len - base) as usize
        } else {
            usize::MAX
        };
        Ok(Region {
            base,
            pitch,
            slice,
            limit,
        })
    }

    /// Whether `width` bytes × `height` rows × `depth` slices fit.
    fn holds(&self, width: usize, height: usize, depth: usize) -> bool {
        if width > self.pitch && height > 1 {
            return false;
        }
        let span = (depth - 1)
            .checked_mul(self.slice)
            .and_then(|n| n.checked_add((height - 1).checked_mul(self.pitch)?))
            .and_then(|n| n.checked_add(width));
        span.is_some_and(|n| n <= self.limit)
    }
}

/// Copies `width` bytes × `height` rows × `depth` slices from `src` to `dst`.
///
/// # Safety
/// Host sides must be valid for what they span (as with cudart).
pub unsafe fn copy_regions(
    dst: Region,
    src: Region,
    [width, height, depth]: [usize; 3],
) -> Result<()> {
    if width == 0 || height == 0 || depth == 0 {
        return Ok(());
    }
    if !dst.holds(width, height, depth) || !src.holds(width, height, depth) {
        return Err(CudaError::InvalidValue.into());
    }
    let _work = runtime::work_shared();
    for z in 0..depth {
        for y in 0..height {
            let from = src.base as usize + z * src.slice + y * src.pitch;
            let to = dst.base as usize + z * dst.slice + y * dst.pitch;
            // SAFETY: inside both regions (checked above, or the caller's for host sides).
            unsafe { std::ptr::copy(from as *const u8, to as *mut u8, width) };
        }
    }
    Ok(())
}

/// Which sides of a copy of `kind` are device memory (`cudaMemcpyDefault`: looked up).
pub fn device_sides(kind: i32, dst: u64, src: u64) -> Result<(bool, bool), CudaError> {
    match kind {
        0 => Ok((false, false)),
        1 => Ok((true, false)),
        2 => Ok((false, true)),
        3 => Ok((true, true)),
        4 => Ok((runtime::find(dst).is_some(), runtime::find(src).is_some())),
        _ => Err(CudaError::InvalidMemcpyDirection),
    }
}

/// The sampler state of a texture read by coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    pub address: [i32; 3],
    pub linear_filter: bool,
    pub normalized_coords: bool,
    pub border: [f32; 4],
}

impl Sampler {
    pub fn of_object(desc: &TextureDesc) -> Sampler {
        Sampler {
            address: desc.addressMode,
            linear_filter: desc.filterMode == 1,
            normalized_coords: desc.normalizedCoords != 0,
            border: desc.borderColor,
        }
    }

    pub fn of_reference(head: &TextureReferenceHead) -> Sampler {
        Sampler {
            address: head.addressMode,
            linear_filter: head.filterMode == 1,
            normalized_coords: head.normalized != 0,
            border: [0.0; 4],
        }
    }

    fn sampling(&self, dims: u8, extent: [u32; 3], row: u64, slice: u64) -> Sampling {
        let mut sampling = Sampling {
            dims,
            extent,
            row_pitch: row,
            slice_pitch: slice,
            address: [AddressMode::Clamp; 3],
            linear_filter: false,
            normalized_coords: false,
            border: [0.0; 4],
        };
        apply_sampler(&mut sampling, self);
        sampling
    }
}

/// Sets the sampler state of `sampling` (`cudaTextureAddressMode` values: wrap 0, clamp 1,
/// mirror 2, border 3).
pub fn apply_sampler(sampling: &mut Sampling, sampler: &Sampler) {
    let mode = |m: i32| match m {
        0 => AddressMode::Wrap,
        2 => AddressMode::Mirror,
        3 => AddressMode::Border,
        _ => AddressMode::Clamp,
    };
    sampling.address = sampler.address.map(mode);
    sampling.linear_filter = sampler.linear_filter;
    sampling.normalized_coords = sampler.normalized_coords;
    sampling.border = sampler.border;
}

/// The sampler state a program set on a texture reference, read from its host struct.
///
/// # Safety
/// `reference` must be the address of a registered `textureReference`.
pub unsafe fn reference_sampler(reference: usize) -> Sampler {
    // SAFETY: the caller's contract; the program's variable lives as long as the program.
    let head = unsafe { (reference as *const TextureReferenceHead).read_unaligned() };
    Sampler::of_reference(&head)
}

/// Validates a read mode against a texel format, as `linear_texture` does.
fn normalized_float(kind: ChannelKind, bits: u8, normalized_read: bool) -> Result<bool> {
    if normalized_read && kind != ChannelKind::Float && bits == 32 {
        return Err(CudaError::InvalidValue.into());
    }
    Ok(normalized_read && kind != ChannelKind::Float)
}

fn extent_u32(e: usize) -> Result<u32> {
    Ok(u32::try_from(e.max(1)).map_err(|_| CudaError::InvalidValue)?)
}

/// A texture over the array `handle`.
pub fn array_texture(handle: u64, normalized_read: bool, sampler: Sampler) -> Result<Texture> {
    let array = array(handle)?;
    let size = array.size();
    Ok(Texture {
        base: handle,
        len_bytes: array.len() as u64,
        kind: array.kind,
        channels: array.channels,
        bits_per_channel: array.bits,
        normalized_float: normalized_float(array.kind, array.bits, normalized_read)?,
        sampling: Some(sampler.sampling(
            array.dims(),
            [
                extent_u32(size[0])?,
                extent_u32(size[1])?,
                extent_u32(size[2])?,
            ],
            array.row_bytes() as u64,
            array.slice_bytes() as u64,
        )),
    })
}

/// A 2-D texture over pitched device memory (`cudaBindTexture2D`, `cudaResourceTypePitch2D`).
pub fn pitch2d_texture(
    base: u64,
    desc: &ChannelFormatDesc,
    [width, height, pitch]: [usize; 3],
    normalized_read: bool,
    sampler: Sampler,
) -> Result<Texture> {
    let (kind, channels, bits) = runtime::channel_format(desc)?;
    let texel = usize::from(channels) * usize::from(bits) / 8;
    let row = width.checked_mul(texel).ok_or(CudaError::InvalidValue)?;
    if base == 0 || width == 0 || height == 0 || row > pitch {
        return Err(CudaError::InvalidValue.into());
    }
    let len = pitch
        .checked_mul(height - 1)
        .and_then(|n| n.checked_add(row))
        .ok_or(CudaError::InvalidValue)?;
    if !registry().memory.contains(base, len as u64) {
        return Err(CudaError::InvalidValue.into());
    }
    Ok(Texture {
        base,
        len_bytes: len as u64,
        kind,
        channels,
        bits_per_channel: bits,
        normalized_float: normalized_float(kind, bits, normalized_read)?,
        sampling: Some(sampler.sampling(
            2,
            [extent_u32(width)?, extent_u32(height)?, 1],
            pitch as u64,
            len as u64,
        )),
    })
}

/// Binds `texture` to the reference at host address `reference`.
pub fn bind_reference(reference: usize, texture: Texture) -> Result<()> {
    registry()
        .textures
        .get_mut(&reference)
        .ok_or(CudaError::InvalidTexture)?
        .bound = Some(texture);
    Ok(())
}

/// Whether a reference was registered with `cudaReadModeNormalizedFloat`.
pub fn reference_reads_normalized(reference: usize) -> Result<bool> {
    Ok(registry()
        .textures
        .get(&reference)
        .ok_or(CudaError::InvalidTexture)?
        .normalized_read)
}

/// `cudaMalloc3D`: rows padded to the pitch of `cudaMallocPitch`.
pub fn malloc_3d(width: usize, height: usize, depth: usize) -> Result<(u64, usize)> {
    let pitch = memory::pitch_for(width).ok_or(CudaError::MemoryAllocation)?;
    let len = pitch
        .checked_mul(height.max(1))
        .and_then(|n| n.checked_mul(depth.max(1)))
        .ok_or(CudaError::MemoryAllocation)?;
    let ptr = runtime::allocate(len, MemoryKind::Device)?;
    Ok((ptr, pitch))
}
