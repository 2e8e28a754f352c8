//! `cuda-flux report`: a terminal summary per kernel of one or more merged profiles.

use std::fmt::Write as _;

use crate::aggregate::{Kernel, Summary};
use crate::metrics::{simd_efficiency, Metric, Metrics, Value};

/// The metric groups the report shows (those that are not zero).
pub const KEY_METRICS: &[Metric] = &[
    Metric::InstExecutedGlobalLoads,
    Metric::InstExecutedGlobalStores,
    Metric::InstExecutedSharedLoads,
    Metric::InstExecutedSharedStores,
    Metric::InstExecutedLocalLoads,
    Metric::InstExecutedLocalStores,
    Metric::InstExecutedGenericLoads,
    Metric::InstExecutedGenericStores,
    Metric::InstExecutedGlobalAtomics,
    Metric::InstExecutedSharedAtomics,
    Metric::FlopCountSp,
    Metric::FlopCountDp,
    Metric::FlopCountHp,
    Metric::FlopCountSpSpecial,
    Metric::InstFp32,
    Metric::InstFp64,
    Metric::InstInteger,
    Metric::InstControl,
    Metric::InstComputeLdSt,
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
    let threads = metrics.count(Metric::ThreadInstExecuted);
    let warps = metrics.count(Metric::InstExecuted);
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
    for &metric in KEY_METRICS {
        if let Value::Count(n) = metrics.get(metric) {
            if n > 0 {
                let _ = writeln!(out, "    {metric:<32} {n:>14}");
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
