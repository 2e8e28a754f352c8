//! `ptx-sim`: runs PTX kernels on the CPU — the engine of cuda-flux's CPU target.
//!
//! The CPU target executes the very PTX a GPU would run, instrumentation included, so the
//! counters it produces come from the same code. Data flow:
//!
//! - [`image`]: the container the driver embeds in place of a fat binary (PTX per arch).
//! - [`Program::load`]: one PTX module parsed with `ptx-lexer`, decoded once into a compact
//!   form (registers as indices, branch targets as instruction indices, reconvergence points),
//!   module variables allocated in host memory with their initializers.
//! - [`Program::launch`]: a grid run as CTAs of warps of 32 lanes with active masks,
//!   reconvergence at immediate post-dominators, `bar.sync` across the warps of a CTA; CTAs
//!   run in parallel on `LaunchConfig::workers` host threads.
//! - [`alu`]: per-lane semantics of the compute instructions (integer, floating point with
//!   PTX rounding/ftz/saturation, conversions, comparisons, bit manipulation).
//!
//! Addresses: global and generic addresses are host addresses (the CPU runtime's device memory
//! is host memory), checked against the [`Environment`]'s accessible ranges; shared and local
//! addresses are offsets in their windows, converted by `cvta` to and from generic host
//! addresses of the CTA's shared buffer and the thread's local buffer.

pub mod alu;
mod builtins;
mod cfg;
mod decl;
mod decode;
mod exec;
pub mod image;
mod launch;
mod memory;
mod native;
mod program;
mod uninit;
mod warp;

pub use native::Engine;
pub use program::{KernelInfo, Program};

use thiserror::Error;

/// Grid, CTA shape and resources of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: usize,
    /// Host threads that run CTAs in parallel (at least 1).
    pub workers: usize,
    /// CTAs that may be resident at once, over all workers (at least `workers`): what the
    /// emulated device holds. A worker runs one CTA at a time and makes as many more resident
    /// as it runs whenever its CTAs run long without one finishing, so that CTAs waiting for
    /// other CTAs of the grid make progress, as on a GPU, with any number of workers.
    pub resident_ctas: usize,
}

/// What one launch executed, counted exactly by the interpreter (plain `u64` sums: at the
/// interpreter's ~10^8 instructions per second, they cannot overflow in any real run).
///
/// Every instruction counts alike: counter code, or any other, is not told apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchStats {
    /// PTX instructions issued by warps: one per warp per instruction executed, whatever its
    /// active mask or guard. (A divergent indirect `call`, which runs its target groups one
    /// after the other, is one instruction.)
    pub warp_instructions: u64,
    /// Active lanes summed over the issued instructions, lanes whose guard is false included:
    /// the thread-level count of a cuda-flux profile, Σ over blocks of threads × length.
    pub thread_instructions: u64,
    /// Lane operations of `atom`/`red` on global memory (`.global`, or a generic address
    /// outside the CTA's shared and local windows) whose guard held.
    pub global_atomics: u64,
}

impl std::ops::AddAssign for LaunchStats {
    fn add_assign(&mut self, other: LaunchStats) {
        self.warp_instructions += other.warp_instructions;
        self.thread_instructions += other.thread_instructions;
        self.global_atomics += other.global_atomics;
    }
}

/// A texture as a kernel names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextureRef<'a> {
    /// A `cudaTextureObject_t` handle held in a register.
    Object(u64),
    /// A module-level `.texref` (legacy texture reference) by name.
    Reference(&'a str),
}

/// The component type of a texel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    Signed,
    Unsigned,
    Float,
}

/// Memory bound to a texture: linear memory (`cudaResourceTypeLinear` / `cudaBindTexture`),
/// a CUDA array or pitched 2-D memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Texture {
    /// Host address of texel 0.
    pub base: u64,
    /// Size of the bound memory in bytes; fetches past it return zeros.
    pub len_bytes: u64,
    pub kind: ChannelKind,
    /// Channels per texel (1, 2 or 4).
    pub channels: u8,
    /// Bits per channel (8, 16 or 32).
    pub bits_per_channel: u8,
    /// `cudaReadModeNormalizedFloat`: integer texels read as floats in [0, 1] / [-1, 1].
    pub normalized_float: bool,
    /// How a fetch by coordinates samples the texels (CUDA arrays, pitched 2-D memory);
    /// `None` for linear memory fetched by texel index (`tex1Dfetch`: no addressing, no
    /// filtering, zeros outside).
    pub sampling: Option<Sampling>,
}

/// `cudaTextureAddressMode`: what a coordinate outside the texture reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressMode {
    Wrap,
    Clamp,
    Mirror,
    Border,
}

/// The geometry and sampler state of a texture read by coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// Dimensions (1, 2 or 3) and the extent in texels of each (unused ones 1).
    pub dims: u8,
    pub extent: [u32; 3],
    /// Bytes from one row to the next, and from one 2-D slice to the next.
    pub row_pitch: u64,
    pub slice_pitch: u64,
    /// Per dimension. Without normalized coordinates, wrap and mirror act as clamp (as on a
    /// GPU).
    pub address: [AddressMode; 3],
    /// `cudaFilterModeLinear`: float results interpolate between the nearest texels, with
    /// weights in 1/256 steps (the GPU's 9-bit fixed point).
    pub linear_filter: bool,
    /// Coordinates in [0, 1) rather than in texels.
    pub normalized_coords: bool,
    /// What border addressing reads (texture objects' `borderColor`; 0 for references).
    pub border: [f32; 4],
}

/// What a launch may touch outside the program: provided by the CPU runtime.
pub trait Environment: Sync {
    /// Whether `[address, address + len)` is memory a kernel may access as global memory:
    /// device allocations, module variables, mapped or managed host memory.
    fn global_accessible(&self, address: u64, len: u64) -> bool;
    /// A range around `[address, address + len)` every access inside which
    /// [`Environment::global_accessible`] accepts (the whole allocation holding it, say), for
    /// warps to cache; `None` where there is none or the environment does not say (the
    /// interpreter then caches aligned blocks it asks about).
    fn global_range(&self, address: u64, len: u64) -> Option<(u64, u64)> {
        let _ = (address, len);
        None
    }
    /// The memory bound to a texture, if any.
    fn texture(&self, texture: TextureRef<'_>) -> Option<Texture>;
    /// The value of `%envreg<index>` (index < 32) in this launch: 0 unless the environment says
    /// otherwise. CUDA's cooperative groups read the grid workspace's address from `%envreg1`
    /// (high half) and `%envreg2` (low half); a cooperative launch provides one.
    fn env_reg(&self, index: u8) -> u32 {
        let _ = index;
        0
    }
}

/// Why PTX could not be loaded or a kernel could not run. `Display` is one line that names the
/// problem and, where there is one, the PTX line.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SimError {
    #[error("PTX does not parse: {0}")]
    Parse(String),
    #[error("unsupported PTX: {what} (PTX line {line})")]
    Unsupported { what: String, line: u32 },
    #[error("unknown kernel `{0}`")]
    UnknownKernel(String),
    #[error("invalid launch: {0}")]
    InvalidLaunch(String),
    #[error(
        "invalid {space} address {address:#x} ({len} bytes) by `{instruction}` at PTX line {line}, \
         block ({}, {}, {}), thread ({}, {}, {})",
        cta[0], cta[1], cta[2], thread[0], thread[1], thread[2]
    )]
    InvalidAddress {
        space: &'static str,
        address: u64,
        len: u64,
        instruction: String,
        line: u32,
        cta: [u32; 3],
        thread: [u32; 3],
    },
    /// A load or store whose address is not a multiple of its size (the whole vector's for
    /// `.v2`/`.v4`): what a GPU reports as `cudaErrorMisalignedAddress`.
    #[error(
        "misaligned {space} address {address:#x} ({len}-byte access) by `{instruction}` at PTX \
         line {line}, block ({}, {}, {}), thread ({}, {}, {})",
        cta[0], cta[1], cta[2], thread[0], thread[1], thread[2]
    )]
    MisalignedAddress {
        space: &'static str,
        address: u64,
        len: u64,
        instruction: String,
        line: u32,
        cta: [u32; 3],
        thread: [u32; 3],
    },
    #[error("kernel executed `trap` at PTX line {line}")]
    Trap { line: u32 },
    #[error("device assertion failed: {0}")]
    Assertion(String),
    #[error("barrier deadlock in CTA ({}, {}, {}): {detail}", cta[0], cta[1], cta[2])]
    Deadlock { cta: [u32; 3], detail: String },
    /// No CTA can become resident and nothing in the grid changed memory for a long time
    /// (`launch.rs`): the grid waits for what never comes (on a GPU: a hang).
    #[error("kernel `{kernel}` makes no progress (deadlock): {detail}")]
    NoProgress { kernel: String, detail: String },
}
