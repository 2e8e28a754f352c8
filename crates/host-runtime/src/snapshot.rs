//! The snapshot: what the compiler knows about one kernel compiled for one architecture, embedded
//! in the program as JSON and handed to the runtime by `__cuda_flux_register_kernel`.
//!
//! The compiler serializes these types and the runtime deserializes them, so both sides agree on
//! the format by construction. Block `i` of `blocks` is the block whose counters sit at index `i`
//! of the counter buffer (`[bank][block][threads, warps]`).

use std::collections::BTreeMap;

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
    /// Whether block 0 (the kernel's entry, which nothing branches to) has no counter on the
    /// device: every launched thread runs it once, and every warp with all its lanes, so the
    /// runtime takes its counts from the launch configuration. Absent (false) in older builds.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub entry_from_launch: bool,
    /// Blocks without a counter on the device that the runtime counts from each launch's shape
    /// and parameter values: a thread runs one exactly when the conditions of its path (the
    /// branches from the entry, computed from the thread's indices and the parameters) hold
    /// (`device_runtime::from_launch`). Filled in with the entry, before the copies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launch_counted: Vec<device_runtime::from_launch::LaunchCounted>,
    /// `[block, from]`: blocks without a counter on the device because they run exactly as
    /// often as block `from` (thread and warp level); the runtime copies `from`'s counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copied_counts: Vec<[usize; 2]>,
    /// Blocks whose thread count the device does not count, because it follows by flow
    /// conservation (every thread that enters a block that cannot end it leaves along one
    /// out-edge): each a combination of thread counts the device writes or the launch gives.
    /// Filled in after the copies; then the copies are made once more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thread_flows: Vec<ThreadFlow>,
    /// `[block, branch, sibling]`: blocks whose warp count the device does not count, because
    /// the warp-uniform branch ending `branch` leads every group that runs it to `block` or
    /// `sibling`, each entered only from it: `warps(block) = warps(branch) - warps(sibling)`.
    /// Filled in after the flows, in order; then the copies are made once more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warp_differences: Vec<[usize; 3]>,
    /// Blocks whose thread counter holds both counts, threads in the low 32 bits and warps in
    /// the high 32 bits (device-runtime's `packed_update`: kernel blocks no thread runs twice);
    /// split per bank when the counters are read, before anything else uses them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packed_counts: Vec<usize>,
    /// The PTX module's `.file` table (index to file name), present when the PTX has line
    /// information (built with `-g` or `-lineinfo`); what [`Block::lines`] file indices name.
    /// Optional so that snapshots and profiles from older builds still read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<u32, String>,
}

/// `threads(block) = Σ coefficient × threads(source)` (see [`Snapshot::thread_flows`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadFlow {
    pub block: usize,
    /// `[source, coefficient]` pairs.
    pub terms: Vec<(usize, i64)>,
}

/// One counted PTX block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// The function the block belongs to: the kernel or a device function it calls.
    pub function: String,
    /// The block's label, `None` for an unlabelled block (entry, fall-through).
    pub label: Option<String>,
    /// Full opcodes of the block's instructions, in order (`ld.global.f32`).
    pub instructions: Vec<String>,
    /// The instructions as PTX text (canonical printing: guard, opcode, operands, `;`), one per
    /// entry of `instructions`. Empty when the compiler did not record them (older builds), so
    /// readers must not assume it lines up unless the lengths agree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub text: Vec<String>,
    /// Source locations of the instructions, run-length encoded in instruction order: each
    /// `[file, line, count]` says the next `count` instructions were under `.loc file line`
    /// (`file` indexes the `.file` table; `0` means no `.loc` was in force). Empty without line
    /// information.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<[u32; 3]>,
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
        // Without line information the optional fields stay out of the JSON.
        let text = snapshot.to_json().unwrap();
        assert!(
            !text.contains("\"text\"") && !text.contains("\"files\""),
            "{text}"
        );
    }

    #[test]
    fn instruction_text_and_lines_round_trip() {
        let json = r#"{"kernel": "k", "demangled": "k", "source": "k.cu", "arch": 90,
            "instrumented": true, "params": 0, "files": {"1": "/src/k.cu"},
            "blocks": [{"function": "k", "label": null, "instructions": ["mov.u32", "ret"],
                        "text": ["mov.u32 %r1, %tid.x;", "ret;"], "lines": [[1, 7, 1], [0, 0, 1]]}]}"#;
        let snapshot = Snapshot::from_json(json.as_bytes()).unwrap();
        assert_eq!(snapshot.files[&1], "/src/k.cu");
        assert_eq!(snapshot.blocks[0].text[0], "mov.u32 %r1, %tid.x;");
        assert_eq!(snapshot.blocks[0].lines, [[1, 7, 1], [0, 0, 1]]);
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
        assert!(snapshot.files.is_empty());
        assert!(Snapshot::from_json(b"{\"kernel\": 1}").is_err());
        assert!(Snapshot::from_json(b"\xff").is_err());
    }
}
