//! The snapshot: what the compiler knows about one kernel compiled for one architecture, embedded
//! in the program as JSON and handed to the runtime by `__cuda_flux_register_kernel`.
//!
//! The compiler serializes these types and the runtime deserializes them, so both sides agree on
//! the format by construction. Block `i` of `blocks` is the block whose counters sit at index `i`
//! of the counter buffer (`[bank][block][threads, warps]`).

use serde::{Deserialize, Serialize};

/// One kernel, one architecture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Mangled name (the PTX `.entry` name of the original kernel).
    pub kernel: String,
    /// Demangled name (equal to `kernel` for `extern "C"` kernels).
    pub demangled: String,
    /// Source file the kernel was compiled from.
    pub source: String,
    /// Architecture of this snapshot's PTX, as `binaryVersion` reports it: 70 for sm_70.
    pub arch: u32,
    /// Whether an instrumented clone was built for this architecture.
    pub instrumented: bool,
    /// Why not, when `instrumented` is false.
    #[serde(default)]
    pub reason: Option<String>,
    /// Number of the original kernel's parameters (the clone takes two more).
    pub params: usize,
    /// The counted blocks, in counter order.
    pub blocks: Vec<Block>,
}

/// One counted PTX block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// The function the block belongs to: the kernel or a device function it calls.
    pub function: String,
    /// The block's label, `None` for an unlabelled block (entry, fall-through).
    pub label: Option<String>,
    /// Full opcodes of the block's instructions, in order (`ld.global.f32`).
    pub instructions: Vec<String>,
}

/// A snapshot that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Not JSON, or not a snapshot.
    #[error("invalid snapshot JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl Snapshot {
    /// Reads a snapshot from its JSON text.
    pub fn from_json(bytes: &[u8]) -> Result<Self, SnapshotError> {
        Ok(serde_json::from_slice(bytes)?)
    }

    /// The snapshot as compact JSON, the form the compiler embeds.
    pub fn to_json(&self) -> Result<String, SnapshotError> {
        Ok(serde_json::to_string(self)?)
    }

    /// Why this snapshot cannot be counted, or `None` when it can: it must be instrumented and
    /// have at least one block.
    pub fn unusable_reason(&self) -> Option<String> {
        if !self.instrumented {
            return Some(
                self.reason
                    .clone()
                    .unwrap_or_else(|| "not instrumented (no reason given)".to_owned()),
            );
        }
        if self.blocks.is_empty() {
            return Some("the snapshot lists no blocks".to_owned());
        }
        None
    }
}

/// Chooses the snapshot for code of `binary_version` (`cudaFuncAttributes::binaryVersion`, 90 on
/// sm_90) among snapshots for `archs`: the exact architecture if present, else the highest one
/// below it (the driver runs the newest compatible code, JIT-compiling PTX for newer GPUs).
/// Returns its index in `archs`.
pub fn select(archs: &[u32], binary_version: u32) -> Option<usize> {
    archs
        .iter()
        .enumerate()
        .filter(|(_, &arch)| arch <= binary_version)
        .max_by_key(|(_, &arch)| arch)
        .map(|(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_the_exact_arch_else_the_highest_below() {
        assert_eq!(select(&[70, 90], 90), Some(1));
        assert_eq!(select(&[70, 90], 70), Some(0));
        assert_eq!(select(&[90, 70], 86), Some(1));
        assert_eq!(select(&[70, 80, 90], 89), Some(1));
        assert_eq!(select(&[70, 90], 100), Some(1));
        assert_eq!(select(&[80, 90], 75), None);
        assert_eq!(select(&[], 90), None);
    }

    #[test]
    fn reads_the_documented_form_and_writes_it_back() {
        let json = r#"{"kernel": "_Z4axpyfPfS_", "demangled": "axpy(float, float*, float*)",
            "source": "axpy.cu", "arch": 70, "instrumented": true, "reason": null, "params": 3,
            "blocks": [{"function": "_Z4axpyfPfS_", "label": null, "instructions": ["ld.param.f32", "ret"]},
                       {"function": "_Z4axpyfPfS_", "label": "$L__BB0_1", "instructions": []}]}"#;
        let snapshot = Snapshot::from_json(json.as_bytes()).unwrap();
        assert_eq!(snapshot.arch, 70);
        assert_eq!(snapshot.params, 3);
        assert_eq!(snapshot.blocks[1].label.as_deref(), Some("$L__BB0_1"));
        assert_eq!(snapshot.unusable_reason(), None);
        let again = Snapshot::from_json(snapshot.to_json().unwrap().as_bytes()).unwrap();
        assert_eq!(again, snapshot);
    }

    #[test]
    fn a_missing_reason_is_none_and_bad_json_is_an_error() {
        let json = r#"{"kernel": "k", "demangled": "k", "source": "k.cu", "arch": 90,
            "instrumented": false, "params": 0, "blocks": []}"#;
        let snapshot = Snapshot::from_json(json.as_bytes()).unwrap();
        assert_eq!(snapshot.reason, None);
        assert!(snapshot.unusable_reason().is_some());
        assert!(Snapshot::from_json(b"{\"kernel\": 1}").is_err());
        assert!(Snapshot::from_json(b"\xff").is_err());
    }
}
