//! `cuda-flux report`: a terminal summary per kernel of one or more merged profiles.

use std::fmt::Write as _;

use crate::aggregate::{Kernel, Summary};
use crate::metrics::{Metrics, Value};

/// The metric groups the report shows (those that are not zero).
pub const KEY_METRICS: &[&str] = &[
    "inst_executed_global_loads",
    "inst_executed_global_stores",
    "inst_executed_shared_loads",
    "inst_executed_shared_stores",
    "inst_executed_local_loads",
    "inst_executed_local_stores",
    "inst_executed_generic_loads",
    "inst_executed_generic_stores",
    "inst_executed_global_atomics",
    "inst_executed_shared_atomics",
    "flop_count_sp",
    "flop_count_dp",
    "flop_count_hp",
    "flop_count_sp_special",
    "inst_fp_32",
    "inst_fp_64",
    "inst_integer",
    "inst_control",
    "inst_compute_ld_st",
];

/// How much to show.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Opcodes listed per kernel.
    pub top_opcodes: usize,
    /// Blocks listed per kernel.
    pub hot_blocks: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            top_opcodes: 8,
            hot_blocks: 5,
        }
    }
}

fn percent(part: u128, whole: u128) -> String {
    if whole == 0 {
        "-".to_string()
    } else {
        format!("{:.1}%", 100.0 * part as f64 / whole as f64)
    }
}

/// SIMD efficiency: thread instructions / (32 x warp instructions), in percent.
pub fn simd_efficiency(threads: impl Into<u128>, warps: impl Into<u128>) -> Option<f64> {
    let (threads, warps) = (threads.into(), warps.into());
    (warps > 0).then(|| 100.0 * threads as f64 / (32.0 * warps as f64))
}

/// The report text for `kernels` of `summary`.
pub fn render(summary: &Summary, kernels: &[&Kernel], options: Options) -> String {
    let mut out = String::new();
    let files = summary.file_names();
    let _ = writeln!(
        out,
        "cuda-flux report: {} kernel(s) from {} file(s): {}",
        kernels.len(),
        files.len(),
        files.join(", ")
    );
    for kernel in kernels {
        out.push('\n');
        render_kernel(&mut out, kernel, options);
    }
    out
}

fn render_kernel(out: &mut String, k: &Kernel, options: Options) {
    let archs: Vec<String> = k.archs.iter().map(|a| format!("sm_{a}")).collect();
    let _ = writeln!(out, "{}", k.title());
    let _ = writeln!(
        out,
        "  {}  {}  {}",
        k.name,
        if k.source.is_empty() { "?" } else { &k.source },
        archs.join(", ")
    );
    let _ = writeln!(
        out,
        "  launches: {} ({} counted) in {} file(s)",
        k.launches,
        k.counted,
        k.launch_files.len()
    );
    for entry in &k.entries {
        if let Some(reason) = &entry.head.reason {
            let _ = writeln!(
                out,
                "  not instrumented for sm_{}: {reason}",
                entry.head.arch
            );
        }
    }
    if k.counted == 0 {
        let _ = writeln!(out, "  no counted launches");
        return;
    }
    let metrics = Metrics::of(&k.totals);
    let threads = metrics.count("thread_inst_executed");
    let warps = metrics.count("inst_executed");
    let simd = simd_efficiency(threads, warps).map_or("-".to_string(), |p| format!("{p:.2}%"));
    let _ = writeln!(
        out,
        "  instructions: {threads} thread, {warps} warp; SIMD efficiency {simd}"
    );

    let mut top: Vec<(&String, u64, u64)> = k
        .totals
        .iter()
        .map(|(op, c)| (op, c.threads, c.warps))
        .collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let _ = writeln!(
        out,
        "  {:<26} {:>12} {:>7} {:>12}",
        "top opcodes", "threads", "share", "warps"
    );
    for (op, t, w) in top.iter().take(options.top_opcodes) {
        let _ = writeln!(
            out,
            "    {:<24} {:>12} {:>7} {:>12}",
            op,
            t,
            percent((*t).into(), threads),
            w
        );
    }
    if top.len() > options.top_opcodes {
        let _ = writeln!(
            out,
            "    ({} more opcodes)",
            top.len() - options.top_opcodes
        );
    }

    let _ = writeln!(out, "  metrics:");
    for name in KEY_METRICS {
        if let Some(Value::Count(n)) = metrics.get(name) {
            if n > 0 {
                let _ = writeln!(out, "    {name:<32} {n:>14}");
            }
        }
    }

    let mut blocks = k.block_heat();
    blocks.sort_by(|a, b| {
        b.counts
            .threads
            .cmp(&a.counts.threads)
            .then(a.arch.cmp(&b.arch))
            .then(a.index.cmp(&b.index))
    });
    let _ = writeln!(
        out,
        "  {:<7} {:>17} {:>10} {:>6} {:>6}  function / label",
        "blocks", "threads", "warps", "instrs", "SIMD"
    );
    for b in blocks.iter().take(options.hot_blocks) {
        if b.counts.threads == 0 {
            break;
        }
        let label = b.label();
        let simd = simd_efficiency(b.counts.threads, b.counts.warps)
            .map_or("-".to_string(), |p| format!("{p:.0}%"));
        let arch = if k.archs.len() > 1 {
            format!(" [sm_{}]", b.arch)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "    #{:<4} {:>17} {:>10} {:>6} {:>6}  {} / {}{}",
            b.index,
            b.counts.threads,
            b.counts.warps,
            b.block.instructions.len(),
            simd,
            b.block.function,
            label,
            arch
        );
    }
}
