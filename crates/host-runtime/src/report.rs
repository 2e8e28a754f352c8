//! The profile a run writes: schema `cuda-flux/1`, documented in `docs/output.md` and
//! `docs/cuda-flux-1.schema.json`. Readers (the `cuda-flux` command) can deserialize it with the
//! same types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::Mode;
use crate::snapshot::Block;

/// The value of [`Report::schema`].
pub const SCHEMA: &str = "cuda-flux/1";

/// A JSON object read as a map, refusing a key given twice (serde's own maps keep the last
/// value silently; readers of profiles refuse every repeated key, in maps as in records).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UniqueMap<K, V>(pub BTreeMap<K, V>);

impl<'de, K, V> Deserialize<'de> for UniqueMap<K, V>
where
    K: Deserialize<'de> + Ord + std::fmt::Display,
    V: Deserialize<'de>,
{
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor<K, V>(std::marker::PhantomData<(K, V)>);
        impl<'de, K, V> serde::de::Visitor<'de> for Visitor<K, V>
        where
            K: Deserialize<'de> + Ord + std::fmt::Display,
            V: Deserialize<'de>,
        {
            type Value = UniqueMap<K, V>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(key) = map.next_key::<K>()? {
                    if out.contains_key(&key) {
                        return Err(serde::de::Error::custom(format_args!(
                            "duplicate key `{key}`"
                        )));
                    }
                    let value = map.next_value()?;
                    out.insert(key, value);
                }
                Ok(UniqueMap(out))
            }
        }
        d.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

/// `deserialize_with` for a map field: [`UniqueMap`].
pub fn unique_map<'de, D, K, V>(d: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: Deserialize<'de> + Ord + std::fmt::Display,
    V: Deserialize<'de>,
{
    UniqueMap::deserialize(d).map(|m| m.0)
}

/// `deserialize_with` for an optional map field: [`UniqueMap`].
pub fn unique_map_opt<'de, D, K, V>(d: D) -> Result<Option<BTreeMap<K, V>>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: Deserialize<'de> + Ord + std::fmt::Display,
    V: Deserialize<'de>,
{
    Option::<UniqueMap<K, V>>::deserialize(d).map(|m| m.map(|m| m.0))
}

/// Per-opcode (or per-block) execution counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Executions by threads.
    pub threads: u64,
    /// Executions by warps (a warp executing an instruction with any number of active threads
    /// counts once).
    pub warps: u64,
}

impl Counts {
    /// Adds `other` (saturating: counts are far from `u64::MAX` in practice).
    pub fn add(&mut self, other: Counts) {
        self.threads = self.threads.saturating_add(other.threads);
        self.warps = self.warps.saturating_add(other.warps);
    }
}

/// Counts per opcode, ordered by opcode.
pub type OpcodeCounts = BTreeMap<String, Counts>;

/// A whole profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The program's command line (`/proc/self/cmdline`).
    pub program: Vec<String>,
    /// Process id.
    pub pid: u32,
    /// The devices launches ran on.
    pub devices: Vec<Device>,
    /// One entry per registered kernel and architecture.
    pub kernels: Vec<Kernel>,
}

/// A device launches ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// CUDA device ordinal.
    pub ordinal: i32,
    /// Device name (`cudaDeviceProp::name`).
    pub name: String,
    /// `major.minor`, e.g. `9.0`.
    pub compute_capability: String,
}

/// A kernel as compiled for one architecture, with its launches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kernel {
    /// Mangled name.
    pub name: String,
    /// Demangled name.
    pub demangled: String,
    /// Source file.
    pub source: String,
    /// Architecture of the code these blocks describe (70 for sm_70).
    pub arch: u32,
    /// Whether the compiler built an instrumented clone for this architecture.
    pub instrumented: bool,
    /// Why not, when `instrumented` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The counted blocks, in counter order.
    pub blocks: Vec<Block>,
    /// The PTX `.file` table the blocks' `lines` refer to (only with line information).
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "unique_map"
    )]
    pub files: BTreeMap<u32, String>,
    /// Launches that ran this architecture's code, in launch order per host thread.
    pub launches: Vec<Launch>,
    /// Sum of the launches' `instructions`.
    #[serde(deserialize_with = "unique_map")]
    pub totals: OpcodeCounts,
}

/// One kernel launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// Grid dimensions (CTAs).
    pub grid: [u32; 3],
    /// Block dimensions (threads).
    pub block: [u32; 3],
    /// Dynamic shared memory bytes.
    pub dynamic_shared_bytes: u64,
    /// Stream handle value: 0 legacy default stream, 1 `cudaStreamLegacy`, 2
    /// `cudaStreamPerThread`, otherwise the `cudaStream_t` pointer value.
    pub stream: u64,
    /// Device ordinal.
    pub device: i32,
    /// The counting mode of these counts.
    pub mode: Mode,
    /// Whether this launch ran the instrumented clone and its counters were read back.
    pub instrumented: bool,
    /// Why not, when `instrumented` is false (the original kernel ran, uncounted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Per block (same order as the kernel's `blocks`): how often it was entered. Present when
    /// `instrumented`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_counts: Option<BlockCounts>,
    /// Executed instructions per opcode (zero counts left out). Present when `instrumented`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "unique_map_opt"
    )]
    pub instructions: Option<OpcodeCounts>,
}

/// Per-block entry counts of one launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockCounts {
    /// Threads that entered each block.
    pub threads: Vec<u64>,
    /// Warps that entered each block.
    pub warps: Vec<u64>,
}
