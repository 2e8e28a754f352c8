//! `#[repr(C)]` mirrors of the CUDA 11.8 structs that cuda-flux's runtimes read or fill, field
//! for field as in `driver_types.h` / `texture_types.h` / `vector_types.h`: the one set, used by
//! this crate's calls into cudart and by cpu-runtime's CUDA API. Field names are the header's
//! (`a__b` for the member `a.b`), so that `crates/cpu-runtime/tests/c_api.rs` can compare every
//! field offset and every struct size with a C program compiled against the real headers
//! ([`LAYOUTS`]).

#![allow(non_snake_case, non_camel_case_types)]

use std::ffi::{c_char, c_float, c_int, c_uint, c_void};
use std::mem::{offset_of, size_of};

/// The layout of one mirrored struct: its C name, size and each field's offset.
pub struct Layout {
    pub c_name: &'static str,
    pub size: usize,
    pub fields: &'static [(&'static str, usize)],
}

/// Defines `#[repr(C)]` structs and their [`Layout`] constants.
macro_rules! c_structs {
    ($( $(#[$meta:meta])* $name:ident = $c_name:literal { $( pub $field:ident : $ty:ty, )* } )*) => {
        $(
            $(#[$meta])*
            #[repr(C)]
            #[derive(Debug, Clone, Copy)]
            pub struct $name { $( pub $field: $ty, )* }

            impl $name {
                pub const LAYOUT: Layout = Layout {
                    c_name: $c_name,
                    size: size_of::<$name>(),
                    fields: &[$( (stringify!($field), offset_of!($name, $field)), )*],
                };
            }
        )*

        /// Every mirrored struct.
        pub const LAYOUTS: &[Layout] = &[$( $name::LAYOUT, )*];
    };
}

c_structs! {
    /// `dim3` (passed by value in launches).
    #[derive(PartialEq, Eq)]
    Dim3 = "dim3" {
        pub x: c_uint,
        pub y: c_uint,
        pub z: c_uint,
    }

    /// `cudaUUID_t`.
    CudaUuid = "cudaUUID_t" {
        pub bytes: [c_char; 16],
    }

    /// `struct cudaDeviceProp` (728 bytes in 11.8).
    DeviceProp = "struct cudaDeviceProp" {
        pub name: [c_char; 256],
        pub uuid: CudaUuid,
        pub luid: [c_char; 8],
        pub luidDeviceNodeMask: c_uint,
        pub totalGlobalMem: usize,
        pub sharedMemPerBlock: usize,
        pub regsPerBlock: c_int,
        pub warpSize: c_int,
        pub memPitch: usize,
        pub maxThreadsPerBlock: c_int,
        pub maxThreadsDim: [c_int; 3],
        pub maxGridSize: [c_int; 3],
        pub clockRate: c_int,
        pub totalConstMem: usize,
        pub major: c_int,
        pub minor: c_int,
        pub textureAlignment: usize,
        pub texturePitchAlignment: usize,
        pub deviceOverlap: c_int,
        pub multiProcessorCount: c_int,
        pub kernelExecTimeoutEnabled: c_int,
        pub integrated: c_int,
        pub canMapHostMemory: c_int,
        pub computeMode: c_int,
        pub maxTexture1D: c_int,
        pub maxTexture1DMipmap: c_int,
        pub maxTexture1DLinear: c_int,
        pub maxTexture2D: [c_int; 2],
        pub maxTexture2DMipmap: [c_int; 2],
        pub maxTexture2DLinear: [c_int; 3],
        pub maxTexture2DGather: [c_int; 2],
        pub maxTexture3D: [c_int; 3],
        pub maxTexture3DAlt: [c_int; 3],
        pub maxTextureCubemap: c_int,
        pub maxTexture1DLayered: [c_int; 2],
        pub maxTexture2DLayered: [c_int; 3],
        pub maxTextureCubemapLayered: [c_int; 2],
        pub maxSurface1D: c_int,
        pub maxSurface2D: [c_int; 2],
        pub maxSurface3D: [c_int; 3],
        pub maxSurface1DLayered: [c_int; 2],
        pub maxSurface2DLayered: [c_int; 3],
        pub maxSurfaceCubemap: c_int,
        pub maxSurfaceCubemapLayered: [c_int; 2],
        pub surfaceAlignment: usize,
        pub concurrentKernels: c_int,
        pub ECCEnabled: c_int,
        pub pciBusID: c_int,
        pub pciDeviceID: c_int,
        pub pciDomainID: c_int,
        pub tccDriver: c_int,
        pub asyncEngineCount: c_int,
        pub unifiedAddressing: c_int,
        pub memoryClockRate: c_int,
        pub memoryBusWidth: c_int,
        pub l2CacheSize: c_int,
        pub persistingL2CacheMaxSize: c_int,
        pub maxThreadsPerMultiProcessor: c_int,
        pub streamPrioritiesSupported: c_int,
        pub globalL1CacheSupported: c_int,
        pub localL1CacheSupported: c_int,
        pub sharedMemPerMultiprocessor: usize,
        pub regsPerMultiprocessor: c_int,
        pub managedMemory: c_int,
        pub isMultiGpuBoard: c_int,
        pub multiGpuBoardGroupID: c_int,
        pub hostNativeAtomicSupported: c_int,
        pub singleToDoublePrecisionPerfRatio: c_int,
        pub pageableMemoryAccess: c_int,
        pub concurrentManagedAccess: c_int,
        pub computePreemptionSupported: c_int,
        pub canUseHostPointerForRegisteredMem: c_int,
        pub cooperativeLaunch: c_int,
        pub cooperativeMultiDeviceLaunch: c_int,
        pub sharedMemPerBlockOptin: usize,
        pub pageableMemoryAccessUsesHostPageTables: c_int,
        pub directManagedMemAccessFromHost: c_int,
        pub maxBlocksPerMultiProcessor: c_int,
        pub accessPolicyMaxWindowSize: c_int,
        pub reservedSharedMemPerBlock: usize,
    }

    /// `struct cudaFuncAttributes`.
    FuncAttributes = "struct cudaFuncAttributes" {
        pub sharedSizeBytes: usize,
        pub constSizeBytes: usize,
        pub localSizeBytes: usize,
        pub maxThreadsPerBlock: c_int,
        pub numRegs: c_int,
        pub ptxVersion: c_int,
        pub binaryVersion: c_int,
        pub cacheModeCA: c_int,
        pub maxDynamicSharedSizeBytes: c_int,
        pub preferredShmemCarveout: c_int,
    }

    /// `struct cudaChannelFormatDesc` (`f` is `enum cudaChannelFormatKind`).
    ChannelFormatDesc = "struct cudaChannelFormatDesc" {
        pub x: c_int,
        pub y: c_int,
        pub z: c_int,
        pub w: c_int,
        pub f: c_int,
    }

    /// `struct cudaResourceDesc`, flattened: `a__b__c` is the C member `a.b.c`. The `res`
    /// union is given by its `linear` member plus the two trailing fields of `pitch2D`, its
    /// largest member, so that the size matches.
    ResourceDesc = "struct cudaResourceDesc" {
        pub resType: c_int,
        pub res__linear__devPtr: *mut c_void,
        pub res__linear__desc: ChannelFormatDesc,
        pub res__linear__sizeInBytes: usize,
        pub res__pitch2D__height: usize,
        pub res__pitch2D__pitchInBytes: usize,
    }

    /// `struct cudaTextureDesc` (enums are `int`).
    TextureDesc = "struct cudaTextureDesc" {
        pub addressMode: [c_int; 3],
        pub filterMode: c_int,
        pub readMode: c_int,
        pub sRGB: c_int,
        pub borderColor: [c_float; 4],
        pub normalizedCoords: c_int,
        pub maxAnisotropy: c_uint,
        pub mipmapFilterMode: c_int,
        pub mipmapLevelBias: c_float,
        pub minMipmapLevelClamp: c_float,
        pub maxMipmapLevelClamp: c_float,
        pub disableTrilinearOptimization: c_int,
    }

    /// `struct cudaExtent`.
    Extent = "struct cudaExtent" {
        pub width: usize,
        pub height: usize,
        pub depth: usize,
    }

    /// `struct cudaPos`.
    Pos = "struct cudaPos" {
        pub x: usize,
        pub y: usize,
        pub z: usize,
    }

    /// `struct cudaMemcpy3DParms`.
    Memcpy3DParms = "struct cudaMemcpy3DParms" {
        pub srcArray: *mut c_void,
        pub srcPos: Pos,
        pub srcPtr: PitchedPtr,
        pub dstArray: *mut c_void,
        pub dstPos: Pos,
        pub dstPtr: PitchedPtr,
        pub extent: Extent,
        pub kind: c_int,
    }

    /// `struct cudaPointerAttributes`.
    PointerAttributes = "struct cudaPointerAttributes" {
        pub r#type: c_int,
        pub device: c_int,
        pub devicePointer: *mut c_void,
        pub hostPointer: *mut c_void,
    }

    /// `struct cudaPitchedPtr`.
    PitchedPtr = "struct cudaPitchedPtr" {
        pub ptr: *mut c_void,
        pub pitch: usize,
        pub xsize: usize,
        pub ysize: usize,
    }

    /// `cudaLaunchAttribute`; the value union (64 bytes, 8-aligned) as raw words.
    LaunchAttribute = "cudaLaunchAttribute" {
        pub id: c_int,
        pub pad: [c_char; 4],
        pub val__pad: [u64; 8],
    }

    /// `cudaLaunchConfig_t` (`cudaLaunchKernelExC`).
    LaunchConfig = "cudaLaunchConfig_t" {
        pub gridDim: Dim3,
        pub blockDim: Dim3,
        pub dynamicSmemBytes: usize,
        pub stream: *mut c_void,
        pub attrs: *mut LaunchAttribute,
        pub numAttrs: c_uint,
    }
}

/// The leading members of `struct textureReference` (the host side of a `texture<>`
/// variable), all the runtime reads: the sampler state a program sets before it binds. (Not
/// in [`LAYOUTS`]: the struct ends in `__cudaReserved`, which the layout test cannot name; the
/// offsets are 0, 4, 8 and 20 by C's rules.)
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TextureReferenceHead {
    pub normalized: c_int,
    pub filterMode: c_int,
    pub addressMode: [c_int; 3],
    pub channelDesc: ChannelFormatDesc,
}
