//! `cuda-flux features`: one CSV row per launch for performance modelling (columns documented in
//! `docs/metrics.md`). Instruction groups partition the launch's thread-level instructions by the
//! kinds of [`crate::metrics::FAMILIES`]; bytes are type width x vector width x thread count.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use host_runtime::report::{Launch, OpcodeCounts};
use ptx_lexer::{DataType, InstructionFacts, Opcode, StateSpace};

use crate::csv;
use crate::metrics::{self, Flop, Kind, MemOp, Metric, Metrics};
use crate::rows::{LaunchRows, RowFormat};
use crate::stream::{self, KernelHead};

/// Memory spaces of the `mem_*` and `bytes_*` columns.
pub const SPACES: &[&str] = &[
    "global", "shared", "local", "const", "param", "generic", "texture",
];

/// Instruction groups, in column order (before the `mem_*` columns).
pub const GROUPS: &[&str] = &[
    "arithmetic",
    "special",
    "logic",
    "control",
    "conversion",
    "communication",
    "misc",
    "tensor",
    "other",
];

/// The fixed leading columns.
const LEADING: &[&str] = &[
    "file",
    "kernel",
    "demangled",
    "source",
    "arch",
    "launch",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "threads",
    "dynamic_shared_bytes",
    "mode",
    "instrumented",
    "thread_instructions",
    "warp_instructions",
];

/// All column names, in order.
pub fn header() -> Vec<String> {
    let mut h: Vec<String> = LEADING.iter().map(|s| s.to_string()).collect();
    h.extend(GROUPS.iter().map(|s| s.to_string()));
    h.extend(SPACES.iter().map(|s| format!("mem_{s}")));
    for s in SPACES {
        h.push(format!("bytes_read_{s}"));
        h.push(format!("bytes_written_{s}"));
    }
    h.extend(
        ["flops", "arithmetic_intensity", "simd_efficiency"]
            .iter()
            .map(|s| s.to_string()),
    );
    h
}

fn space_index(space: StateSpace) -> usize {
    match space {
        StateSpace::Global => 0,
        StateSpace::Shared | StateSpace::SharedCluster => 1,
        StateSpace::Local => 2,
        StateSpace::Const => 3,
        StateSpace::Param => 4,
        StateSpace::Generic => 5,
        StateSpace::Texture | StateSpace::Surface => 6,
    }
}

/// The state space a memory or texture opcode is counted under: the first one it names (the
/// last one for `cp.async`/`cp.reduce`, which name destination then source), else generic.
fn space_of(opcode: &str, family: &str) -> usize {
    let op = Opcode::new(opcode);
    let named: Vec<StateSpace> = op
        .modifiers()
        .filter_map(StateSpace::from_modifier)
        .collect();
    let chosen = if family.starts_with("cp.") {
        named.last().copied()
    } else {
        named.first().copied()
    };
    let fallback = InstructionFacts::of(&op)
        .state_space
        .unwrap_or(StateSpace::Generic);
    space_index(chosen.unwrap_or(fallback))
}

/// Bytes one thread reads and writes executing `opcode` of `kind`, where the opcode says.
fn bytes_per_thread(opcode: &str, family: &str, kind: Kind) -> (u64, u64) {
    let op = Opcode::new(opcode);
    let facts = InstructionFacts::of(&op);
    match (kind, family) {
        // ldmatrix/stmatrix .x1/.x2/.x4: one 32-bit register per matrix per thread.
        (_, "ldmatrix" | "stmatrix") => {
            let n: u64 = op
                .modifiers()
                .find_map(|m| m.strip_prefix('x').and_then(|n| n.parse().ok()))
                .unwrap_or(1);
            if family == "ldmatrix" {
                (4 * n, 0)
            } else {
                (0, 4 * n)
            }
        }
        (Kind::Memory(mem), _) => {
            let b = u64::from(facts.bytes_per_thread.unwrap_or(0));
            match mem {
                MemOp::Load => (b, 0),
                MemOp::Store | MemOp::Reduction => (0, b),
                MemOp::Atomic => (b, b),
                MemOp::Other => (0, 0),
            }
        }
        (Kind::Texture, "tex" | "tld4" | "suld" | "sust" | "sured") => {
            let b = facts
                .data_type
                .map_or(0, |t: DataType| u64::from(t.bytes()))
                * u64::from(facts.vector_width);
            if family == "sust" || family == "sured" {
                (0, b)
            } else {
                (b, 0)
            }
        }
        _ => (0, 0),
    }
}

/// Where one thread-execution of an opcode goes among the feature columns.
#[derive(Debug, Clone, Copy)]
enum OpcodeFeature {
    /// An instruction group ([`GROUPS`] index; unknown opcodes go to the last).
    Group(usize),
    /// A memory or texture access in state space `space` ([`SPACES`] index), moving `read` and
    /// `written` bytes per thread.
    Memory {
        space: usize,
        read: u64,
        written: u64,
    },
}

/// [`OpcodeFeature`] of `opcode`, classified once per process: `features` sees the same
/// opcodes in every one of possibly millions of launches.
fn opcode_feature(opcode: &str) -> OpcodeFeature {
    thread_local! {
        static CACHE: std::cell::RefCell<std::collections::HashMap<String, OpcodeFeature>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    if let Some(feature) = CACHE.with(|c| c.borrow().get(opcode).copied()) {
        return feature;
    }
    let feature = classify_opcode(opcode);
    CACHE.with(|c| c.borrow_mut().insert(opcode.to_string(), feature));
    feature
}

fn classify_opcode(opcode: &str) -> OpcodeFeature {
    let Some(family) = metrics::family_of(opcode) else {
        return OpcodeFeature::Group(8);
    };
    let class = metrics::classify(opcode);
    let group = match family.kind {
        Kind::Arith(Flop::Special, _) if class.thread != Some(metrics::ThreadClass::Integer) => {
            Some(1)
        }
        Kind::Arith(..) => Some(0),
        Kind::Logic => Some(2),
        Kind::Control => Some(3),
        Kind::Convert => Some(4),
        Kind::Communication => Some(5),
        Kind::Misc => Some(6),
        Kind::Tensor => Some(7),
        Kind::Memory(_) | Kind::Texture => None,
    };
    match group {
        Some(g) => OpcodeFeature::Group(g),
        None => {
            let (read, written) = bytes_per_thread(opcode, family.name, family.kind);
            OpcodeFeature::Memory {
                space: space_of(opcode, family.name),
                read,
                written,
            }
        }
    }
}

/// The numeric feature columns after `warp_instructions` for one histogram.
pub fn feature_values(counts: &OpcodeCounts) -> Vec<String> {
    // 128-bit sums: exact for any 64-bit counts (bytes are counts times up to 64).
    let mut groups = [0u128; 9];
    let mut mem = [0u128; 7];
    let mut read = [0u128; 7];
    let mut written = [0u128; 7];
    for (opcode, c) in counts {
        let t = u128::from(c.threads);
        match opcode_feature(opcode) {
            OpcodeFeature::Group(g) => groups[g] += t,
            OpcodeFeature::Memory {
                space,
                read: r,
                written: w,
            } => {
                mem[space] += t;
                read[space] += u128::from(r) * t;
                written[space] += u128::from(w) * t;
            }
        }
    }
    let m = Metrics::of(counts);
    let flops =
        m.count(Metric::FlopCountSp) + m.count(Metric::FlopCountDp) + m.count(Metric::FlopCountHp);
    // Off-chip-backed spaces: global, local, generic, texture.
    let traffic: u128 = [0usize, 2, 5, 6]
        .iter()
        .map(|&s| read[s] + written[s])
        .sum();
    let threads = m.count(Metric::ThreadInstExecuted);
    let warps = m.count(Metric::InstExecuted);
    let mut out: Vec<String> = groups.iter().map(u128::to_string).collect();
    out.extend(mem.iter().map(u128::to_string));
    for s in 0..SPACES.len() {
        out.push(read[s].to_string());
        out.push(written[s].to_string());
    }
    out.push(flops.to_string());
    out.push(if traffic > 0 {
        format!("{:.6}", flops as f64 / traffic as f64)
    } else {
        String::new()
    });
    out.push(
        metrics::simd_efficiency_fraction(threads, warps)
            .map_or(String::new(), |f| format!("{f:.6}")),
    );
    out
}

/// The instruction mix of a histogram: thread instructions per group ([`GROUPS`]) and per
/// memory space (`mem_<space>`), which together partition the thread instructions.
pub fn mix(counts: &OpcodeCounts) -> Vec<(String, u128)> {
    let names = GROUPS
        .iter()
        .map(|g| g.to_string())
        .chain(SPACES.iter().map(|s| format!("mem_{s}")));
    names
        .zip(feature_values(counts))
        .map(|(name, value)| (name, value.parse().unwrap_or(0)))
        .collect()
}

/// The exact decimal product of `factors`, however large (six 32-bit dimensions can exceed 128
/// bits; a real launch stays below 2^73).
fn product_text(factors: impl IntoIterator<Item = u32>) -> String {
    // Little-endian limbs of 10^9.
    const BASE: u64 = 1_000_000_000;
    let mut limbs: Vec<u64> = vec![1];
    for factor in factors {
        let mut carry = 0u64;
        for limb in &mut limbs {
            let v = *limb * u64::from(factor) + carry;
            (*limb, carry) = (v % BASE, v / BASE);
        }
        while carry > 0 {
            limbs.push(carry % BASE);
            carry /= BASE;
        }
    }
    while limbs.len() > 1 && limbs.last() == Some(&0) {
        limbs.pop();
    }
    let mut text = limbs.last().copied().unwrap_or(0).to_string();
    for limb in limbs.iter().rev().skip(1) {
        text.push_str(&format!("{limb:09}"));
    }
    text
}

/// The row of one launch: launch number `index` of its merged kernel, from file `file_name`.
pub fn row(file_name: &str, head: &KernelHead, index: usize, launch: &Launch) -> Vec<String> {
    let threads = product_text(launch.grid.iter().chain(&launch.block).copied());
    let mode = serde_json::to_value(launch.mode)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut row = vec![
        file_name.to_string(),
        head.name.clone(),
        head.demangled.clone(),
        head.source.clone(),
        head.arch.to_string(),
        index.to_string(),
    ];
    row.extend(launch.grid.iter().map(u32::to_string));
    row.extend(launch.block.iter().map(u32::to_string));
    row.push(threads);
    row.push(launch.dynamic_shared_bytes.to_string());
    row.push(mode);
    row.push(launch.instrumented.to_string());
    let width = LEADING.len() + GROUPS.len() + 3 * SPACES.len() + 3;
    match &launch.instructions {
        Some(counts) => {
            let m = Metrics::of(counts);
            row.push(m.count(Metric::ThreadInstExecuted).to_string());
            row.push(m.count(Metric::InstExecuted).to_string());
            row.extend(feature_values(counts));
        }
        None => row.resize(width, String::new()),
    }
    debug_assert_eq!(row.len(), width);
    row
}

struct FeatureRows {
    files: Vec<String>,
}

impl RowFormat for FeatureRows {
    fn row(&mut self, file: usize, head: &KernelHead, index: usize, launch: &Launch) -> String {
        let name = self.files.get(file).map_or("", String::as_str);
        csv::line(&row(name, head, index, launch))
    }
}

/// Writes the CSV (a header and one row per launch of every kernel, grouped by merged kernel)
/// to `out` while the profiles stream by.
pub fn write(paths: &[PathBuf], out: &mut dyn Write) -> Result<()> {
    out.write_all(csv::line(&header()).as_bytes())?;
    let files = paths.iter().map(|p| p.display().to_string()).collect();
    let mut rows = LaunchRows::new(FeatureRows { files }, out, true);
    stream::read_all(paths, &mut rows)?;
    rows.finish(|_, _, _, _| Ok(()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use host_runtime::report::Counts;

    fn hist(items: &[(&str, u64)]) -> OpcodeCounts {
        items
            .iter()
            .map(|&(op, threads)| {
                (
                    op.to_string(),
                    Counts {
                        threads,
                        warps: threads.div_ceil(32),
                    },
                )
            })
            .collect()
    }

    fn column(values: &[String], name: &str) -> String {
        let h = header();
        let offset = LEADING.len();
        let i = h.iter().position(|c| c == name).unwrap() - offset;
        values[i].clone()
    }

    #[test]
    fn groups_partition_the_thread_instructions() {
        let counts = hist(&[
            ("add.f32", 10),
            ("div.s32", 1),
            ("sqrt.rn.f32", 2),
            ("and.b32", 3),
            ("bra", 4),
            ("cvt.rn.f32.s32", 5),
            ("shfl.sync.down.b32", 6),
            ("mov.u32", 7),
            ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 8),
            ("no_such_op", 9),
            ("ld.global.f32", 100),
            ("tex.2d.v4.f32.f32", 11),
        ]);
        let v = feature_values(&counts);
        assert_eq!(column(&v, "arithmetic"), "11");
        assert_eq!(column(&v, "special"), "2");
        assert_eq!(column(&v, "logic"), "3");
        assert_eq!(column(&v, "control"), "4");
        assert_eq!(column(&v, "conversion"), "5");
        assert_eq!(column(&v, "communication"), "6");
        assert_eq!(column(&v, "misc"), "7");
        assert_eq!(column(&v, "tensor"), "8");
        assert_eq!(column(&v, "other"), "9");
        assert_eq!(column(&v, "mem_global"), "100");
        assert_eq!(column(&v, "mem_texture"), "11");
        let sum: u64 = GROUPS
            .iter()
            .map(|g| g.to_string())
            .chain(SPACES.iter().map(|s| format!("mem_{s}")))
            .map(|c| column(&v, &c).parse::<u64>().unwrap())
            .sum();
        assert_eq!(sum, counts.values().map(|c| c.threads).sum::<u64>());
    }

    #[test]
    fn bytes_per_state_space() {
        let counts = hist(&[
            // 64 threads x 16 bytes read.
            ("ld.global.nc.v4.f32", 64),
            // 64 x 8 written.
            ("st.global.f64", 64),
            // 32 x 4 read and 32 x 4 written.
            ("atom.global.add.u32", 32),
            // 32 x 8 written.
            ("red.global.add.u64", 32),
            // 128 x 16 written to shared, 128 x 4 read.
            ("st.shared.v2.f64", 128),
            ("ld.shared::cta.b32", 128),
            // ldmatrix .x4: 16 bytes per thread.
            ("ldmatrix.sync.aligned.m8n8.x4.shared.b16", 32),
            // 10 x 8 param, 10 x 1 local, 10 x 4 generic.
            ("ld.param.u64", 10),
            ("st.local.u8", 10),
            ("ld.u32", 10),
            // 32 x 4 x 4 texture bytes.
            ("tex.2d.v4.f32.f32", 32),
            // 32 threads x 2 flops (fma).
            ("fma.rn.f32", 32),
            // cp.async: counted under global, bytes unknown.
            ("cp.async.ca.shared.global", 32),
        ]);
        let v = feature_values(&counts);
        assert_eq!(
            column(&v, "bytes_read_global"),
            (64 * 16 + 32 * 4).to_string()
        );
        assert_eq!(
            column(&v, "bytes_written_global"),
            (64 * 8 + 32 * 4 + 32 * 8).to_string()
        );
        assert_eq!(
            column(&v, "mem_global"),
            (64 + 64 + 32 + 32 + 32).to_string()
        );
        assert_eq!(column(&v, "bytes_written_shared"), (128 * 16).to_string());
        assert_eq!(
            column(&v, "bytes_read_shared"),
            (128 * 4 + 32 * 16).to_string()
        );
        assert_eq!(column(&v, "bytes_read_param"), "80");
        assert_eq!(column(&v, "bytes_written_local"), "10");
        assert_eq!(column(&v, "bytes_read_generic"), "40");
        assert_eq!(column(&v, "bytes_read_texture"), (32 * 16).to_string());
        assert_eq!(column(&v, "flops"), "64");
        // Global + local + generic + texture traffic.
        let traffic = (64 * 16 + 32 * 4) + (64 * 8 + 32 * 4 + 32 * 8) + 10 + 40 + 32 * 16;
        let ai: f64 = column(&v, "arithmetic_intensity").parse().unwrap();
        assert!((ai - 64.0 / traffic as f64).abs() < 1e-6, "{ai}");
    }
}
