//! The emulated device: `cudaDeviceProp`, `cudaDeviceGetAttribute`, occupancy.
//!
//! One device. Its compute capability is the highest architecture embedded in the program's
//! CPU images (7.0 when none says otherwise); resources are those of a recent NVIDIA GPU where
//! they decide whether a launch is valid (block and grid limits, shared memory), and describe
//! the host where they describe memory (global memory = host RAM, unified addressing,
//! integrated). Clock rates are nominal. See the crate README for the full list.

use std::ffi::c_char;

use crate::abi::{CudaUuid, DeviceProp};

/// The device's name.
pub const NAME: &str = "cuda-flux CPU target";
/// Compute capability when no image names an architecture: 7.0.
pub const DEFAULT_ARCH: u32 = 70;

pub const WARP_SIZE: u32 = 32;
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;
pub const MAX_BLOCK_DIM: [u32; 3] = [1024, 1024, 64];
pub const MAX_GRID_DIM: [u32; 3] = [i32::MAX as u32, 65535, 65535];
/// Shared memory a block gets without opting in (`cudaFuncAttributeMaxDynamicSharedMemorySize`).
pub const SHARED_PER_BLOCK: usize = 48 * 1024;
/// The most shared memory a block may opt in to.
pub const SHARED_PER_BLOCK_OPTIN: usize = 227 * 1024;
/// Shared memory per multiprocessor (for occupancy).
pub const SHARED_PER_SM: usize = 227 * 1024;
pub const REGS_PER_BLOCK: i32 = 65536;
pub const MAX_THREADS_PER_SM: u32 = 2048;
pub const MAX_BLOCKS_PER_SM: u32 = 32;
pub const TOTAL_CONST_MEM: usize = 64 * 1024;
/// Nominal clock rates (kHz): the host has no fixed one.
pub const CLOCK_RATE_KHZ: i32 = 1_000_000;
/// `maxTexture1DLinear`: texels of a linear texture.
pub const MAX_TEXTURE_1D_LINEAR: i32 = 1 << 27;
pub const TEXTURE_ALIGNMENT: usize = 512;
pub const TEXTURE_PITCH_ALIGNMENT: usize = 32;

/// What the properties depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceShape {
    /// 70 for compute capability 7.0.
    pub arch: u32,
    /// Multiprocessors (`CUDA_FLUX_CPU_SMS`, independent of the host threads that run CTAs).
    pub multiprocessors: usize,
    /// Host RAM in bytes.
    pub total_memory: u64,
}

/// `cudaGetDeviceProperties` of the emulated device.
pub fn properties(shape: DeviceShape) -> DeviceProp {
    // SAFETY: DeviceProp holds only integers and byte arrays, for which zero is valid.
    let mut p: DeviceProp = unsafe { std::mem::zeroed() };
    for (dst, src) in p.name.iter_mut().zip(NAME.bytes()) {
        *dst = src as c_char;
    }
    p.uuid = CudaUuid { bytes: [0; 16] };
    p.totalGlobalMem = usize::try_from(shape.total_memory).unwrap_or(usize::MAX);
    p.sharedMemPerBlock = SHARED_PER_BLOCK;
    p.regsPerBlock = REGS_PER_BLOCK;
    p.warpSize = WARP_SIZE as i32;
    p.memPitch = i32::MAX as usize;
    p.maxThreadsPerBlock = MAX_THREADS_PER_BLOCK as i32;
    p.maxThreadsDim = MAX_BLOCK_DIM.map(|d| d as i32);
    p.maxGridSize = MAX_GRID_DIM.map(|d| d as i32);
    p.clockRate = CLOCK_RATE_KHZ;
    p.totalConstMem = TOTAL_CONST_MEM;
    p.major = (shape.arch / 10) as i32;
    p.minor = (shape.arch % 10) as i32;
    p.textureAlignment = TEXTURE_ALIGNMENT;
    p.texturePitchAlignment = TEXTURE_PITCH_ALIGNMENT;
    // Every GPU since compute capability 1.1 reports a copy engine, and programs gate their
    // stream code on it (Rodinia huffman skips its histogram without it). Copies and kernels
    // run at call time here, in stream order, which is a valid schedule of overlapped work.
    p.deviceOverlap = 1;
    p.asyncEngineCount = 1;
    p.multiProcessorCount = i32::try_from(shape.multiprocessors).unwrap_or(i32::MAX);
    p.kernelExecTimeoutEnabled = 0;
    // Device memory is host memory.
    p.integrated = 1;
    p.canMapHostMemory = 1;
    p.computeMode = 0;
    // Only linear textures are supported; array, surface and layered limits stay 0.
    p.maxTexture1DLinear = MAX_TEXTURE_1D_LINEAR;
    p.surfaceAlignment = TEXTURE_ALIGNMENT;
    // Launches from different host threads run at the same time.
    p.concurrentKernels = 1;
    p.unifiedAddressing = 1;
    p.memoryClockRate = CLOCK_RATE_KHZ;
    p.memoryBusWidth = 64;
    p.maxThreadsPerMultiProcessor = MAX_THREADS_PER_SM as i32;
    p.streamPrioritiesSupported = 0;
    p.globalL1CacheSupported = 1;
    p.localL1CacheSupported = 1;
    p.sharedMemPerMultiprocessor = SHARED_PER_SM;
    p.regsPerMultiprocessor = REGS_PER_BLOCK;
    p.managedMemory = 1;
    p.hostNativeAtomicSupported = 1;
    p.singleToDoublePrecisionPerfRatio = 1;
    // Kernels may touch device, managed, pinned and registered memory, not pageable memory.
    p.pageableMemoryAccess = 0;
    p.concurrentManagedAccess = 1;
    p.canUseHostPointerForRegisteredMem = 1;
    p.cooperativeLaunch = 1;
    p.sharedMemPerBlockOptin = SHARED_PER_BLOCK_OPTIN;
    p.directManagedMemAccessFromHost = 1;
    p.maxBlocksPerMultiProcessor = MAX_BLOCKS_PER_SM as i32;
    p
}

/// `cudaDeviceGetAttribute`: the value of `enum cudaDeviceAttr` `attr`, read from the
/// properties; `None` for an attribute the 11.8 header does not define.
pub fn attribute(p: &DeviceProp, attr: i32) -> Option<i32> {
    let size = |v: usize| i32::try_from(v).unwrap_or(i32::MAX);
    Some(match attr {
        1 => p.maxThreadsPerBlock,
        2..=4 => p.maxThreadsDim[(attr - 2) as usize],
        5..=7 => p.maxGridSize[(attr - 5) as usize],
        8 => size(p.sharedMemPerBlock),
        9 => size(p.totalConstMem),
        10 => p.warpSize,
        11 => size(p.memPitch),
        12 => p.regsPerBlock,
        13 => p.clockRate,
        14 => size(p.textureAlignment),
        15 => p.deviceOverlap,
        16 => p.multiProcessorCount,
        17 => p.kernelExecTimeoutEnabled,
        18 => p.integrated,
        19 => p.canMapHostMemory,
        20 => p.computeMode,
        21 => p.maxTexture1D,
        22 | 23 => p.maxTexture2D[(attr - 22) as usize],
        24..=26 => p.maxTexture3D[(attr - 24) as usize],
        27 | 28 => p.maxTexture2DLayered[(attr - 27) as usize],
        29 => p.maxTexture2DLayered[2],
        30 => size(p.surfaceAlignment),
        31 => p.concurrentKernels,
        32 => p.ECCEnabled,
        33 => p.pciBusID,
        34 => p.pciDeviceID,
        35 => p.tccDriver,
        36 => p.memoryClockRate,
        37 => p.memoryBusWidth,
        38 => p.l2CacheSize,
        39 => p.maxThreadsPerMultiProcessor,
        40 => p.asyncEngineCount,
        41 => p.unifiedAddressing,
        42 | 43 => p.maxTexture1DLayered[(attr - 42) as usize],
        45 | 46 => p.maxTexture2DGather[(attr - 45) as usize],
        47..=49 => p.maxTexture3DAlt[(attr - 47) as usize],
        50 => p.pciDomainID,
        51 => size(p.texturePitchAlignment),
        52 => p.maxTextureCubemap,
        53 | 54 => p.maxTextureCubemapLayered[(attr - 53) as usize],
        55 => p.maxSurface1D,
        56 | 57 => p.maxSurface2D[(attr - 56) as usize],
        58..=60 => p.maxSurface3D[(attr - 58) as usize],
        61 | 62 => p.maxSurface1DLayered[(attr - 61) as usize],
        63..=65 => p.maxSurface2DLayered[(attr - 63) as usize],
        66 => p.maxSurfaceCubemap,
        67 | 68 => p.maxSurfaceCubemapLayered[(attr - 67) as usize],
        69 => p.maxTexture1DLinear,
        70..=72 => p.maxTexture2DLinear[(attr - 70) as usize],
        73 | 74 => p.maxTexture2DMipmap[(attr - 73) as usize],
        75 => p.major,
        76 => p.minor,
        77 => p.maxTexture1DMipmap,
        78 => p.streamPrioritiesSupported,
        79 => p.globalL1CacheSupported,
        80 => p.localL1CacheSupported,
        81 => size(p.sharedMemPerMultiprocessor),
        82 => p.regsPerMultiprocessor,
        83 => p.managedMemory,
        84 => p.isMultiGpuBoard,
        85 => p.multiGpuBoardGroupID,
        86 => p.hostNativeAtomicSupported,
        87 => p.singleToDoublePrecisionPerfRatio,
        88 => p.pageableMemoryAccess,
        89 => p.concurrentManagedAccess,
        90 => p.computePreemptionSupported,
        91 => p.canUseHostPointerForRegisteredMem,
        92..=94 => 0,
        95 => p.cooperativeLaunch,
        96 => p.cooperativeMultiDeviceLaunch,
        97 => size(p.sharedMemPerBlockOptin),
        // cudaDevAttrCanFlushRemoteWrites: no remote writes to flush.
        98 => 0,
        // cudaDevAttrHostRegisterSupported.
        99 => 1,
        100 => p.pageableMemoryAccessUsesHostPageTables,
        101 => p.directManagedMemAccessFromHost,
        106 => p.maxBlocksPerMultiProcessor,
        108 => p.persistingL2CacheMaxSize,
        109 => p.accessPolicyMaxWindowSize,
        111 => size(p.reservedSharedMemPerBlock),
        // Sparse arrays, read-only registration, semaphore interop, memory pools, GPUDirect
        // RDMA, clusters, deferred mapping: not supported.
        112..=121 => 0,
        _ => return None,
    })
}

/// Blocks of `block_threads` threads using `shared_bytes` of shared memory each that fit on
/// one multiprocessor at once (`cudaOccupancyMaxActiveBlocksPerMultiprocessor`). Registers do
/// not limit it: PTX runs on virtual registers.
pub fn max_active_blocks(block_threads: u32, shared_bytes: usize) -> u32 {
    if block_threads == 0 || block_threads > MAX_THREADS_PER_BLOCK {
        return 0;
    }
    let warps = block_threads.div_ceil(WARP_SIZE);
    let by_threads = MAX_THREADS_PER_SM / (warps * WARP_SIZE);
    let by_shared = match shared_bytes {
        0 => u32::MAX,
        n => u32::try_from(SHARED_PER_SM / n).unwrap_or(u32::MAX),
    };
    by_threads.min(by_shared).min(MAX_BLOCKS_PER_SM)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> DeviceShape {
        DeviceShape {
            arch: 86,
            multiprocessors: 6,
            total_memory: 1 << 34,
        }
    }

    #[test]
    fn properties_describe_the_shape() {
        let p = properties(shape());
        let name: Vec<u8> = p
            .name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        assert_eq!(name, NAME.as_bytes());
        assert_eq!((p.major, p.minor), (8, 6));
        assert_eq!(p.multiProcessorCount, 6);
        assert_eq!(p.totalGlobalMem, 1 << 34);
        assert_eq!(p.maxThreadsDim, [1024, 1024, 64]);
        assert_eq!(p.maxGridSize, [2147483647, 65535, 65535]);
        assert_eq!(p.sharedMemPerBlock, 49152);
        assert_eq!(p.sharedMemPerBlockOptin, 232448);
    }

    #[test]
    fn attributes_agree_with_properties() {
        let p = properties(shape());
        assert_eq!(attribute(&p, 1), Some(1024));
        assert_eq!(attribute(&p, 4), Some(64));
        assert_eq!(attribute(&p, 5), Some(i32::MAX));
        assert_eq!(attribute(&p, 8), Some(49152));
        assert_eq!(attribute(&p, 10), Some(32));
        assert_eq!(attribute(&p, 16), Some(6));
        assert_eq!(attribute(&p, 75), Some(8));
        assert_eq!(attribute(&p, 76), Some(6));
        assert_eq!(attribute(&p, 97), Some(232448));
        assert_eq!(attribute(&p, 44), None);
        assert_eq!(attribute(&p, 122), None);
        assert_eq!(attribute(&p, -1), None);
    }

    #[test]
    fn occupancy_is_limited_by_threads_blocks_and_shared_memory() {
        assert_eq!(max_active_blocks(1024, 0), 2);
        assert_eq!(max_active_blocks(256, 0), 8);
        assert_eq!(max_active_blocks(33, 0), 32);
        assert_eq!(max_active_blocks(1, 0), 32);
        assert_eq!(max_active_blocks(32, 48 * 1024), 4);
        assert_eq!(max_active_blocks(0, 0), 0);
        assert_eq!(max_active_blocks(1025, 0), 0);
    }
}
