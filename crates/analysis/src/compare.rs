//! `cuda-flux compare`: cuda-flux's metric groups next to nvprof's or Nsight Compute's numbers
//! for the same run (layouts and the metric-name table in `docs/metrics.md`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Result};

use crate::csv;
use crate::metrics::{Metric, Metrics, Value};
use crate::names;
use crate::profile::MergedKernel;

/// Which profiler wrote the CSV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Nvprof,
    Ncu,
}

/// Nsight Compute metric names and the nvprof/cuda-flux metric each one measures, with the
/// factor that converts its value to ours. The subset of Nsight Compute's "nvprof metric
/// comparison" table whose definitions match one metric of ours; `sm__` names with the same
/// suffix are accepted too (a sum over SMs equals the sum over their sub-partitions).
pub static NCU_METRICS: &[(&str, Metric, f64)] = &[
    ("smsp__inst_executed.sum", Metric::InstExecuted, 1.0),
    (
        "smsp__thread_inst_executed.sum",
        Metric::ThreadInstExecuted,
        1.0,
    ),
    (
        "smsp__inst_executed_op_global_ld.sum",
        Metric::InstExecutedGlobalLoads,
        1.0,
    ),
    (
        "smsp__inst_executed_op_global_st.sum",
        Metric::InstExecutedGlobalStores,
        1.0,
    ),
    (
        "smsp__inst_executed_op_local_ld.sum",
        Metric::InstExecutedLocalLoads,
        1.0,
    ),
    (
        "smsp__inst_executed_op_local_st.sum",
        Metric::InstExecutedLocalStores,
        1.0,
    ),
    (
        "smsp__inst_executed_op_shared_ld.sum",
        Metric::InstExecutedSharedLoads,
        1.0,
    ),
    (
        "smsp__inst_executed_op_shared_st.sum",
        Metric::InstExecutedSharedStores,
        1.0,
    ),
    (
        "smsp__inst_executed_op_global_red.sum",
        Metric::InstExecutedGlobalReductions,
        1.0,
    ),
    (
        "smsp__sass_inst_executed_op_global_atom.sum",
        Metric::InstExecutedGlobalAtomics,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
        Metric::FlopCountSpAdd,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
        Metric::FlopCountSpMul,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
        Metric::FlopCountSpFma,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",
        Metric::FlopCountDpAdd,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
        Metric::FlopCountDpMul,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
        Metric::FlopCountDpFma,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum",
        Metric::FlopCountHpAdd,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum",
        Metric::FlopCountHpMul,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",
        Metric::FlopCountHpFma,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_fp16_pred_on.sum",
        Metric::InstFp16,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_fp32_pred_on.sum",
        Metric::InstFp32,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_fp64_pred_on.sum",
        Metric::InstFp64,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_integer_pred_on.sum",
        Metric::InstInteger,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_conversion_pred_on.sum",
        Metric::InstBitConvert,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_control_pred_on.sum",
        Metric::InstControl,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_memory_pred_on.sum",
        Metric::InstComputeLdSt,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_misc_pred_on.sum",
        Metric::InstMisc,
        1.0,
    ),
    (
        "smsp__sass_thread_inst_executed_op_inter_thread_communication_pred_on.sum",
        Metric::InstInterThreadCommunication,
        1.0,
    ),
    // Average active threads per warp instruction (0 to 32); ours is in percent.
    (
        "smsp__thread_inst_executed_per_inst_executed.ratio",
        Metric::WarpExecutionEfficiency,
        100.0 / 32.0,
    ),
    (
        "smsp__thread_inst_executed_per_inst_executed.pct",
        Metric::WarpExecutionEfficiency,
        1.0,
    ),
];

/// Our metric for a reference metric name, and the factor to apply to the reference value.
pub fn our_metric(tool: Tool, name: &str) -> Option<(Metric, f64)> {
    match tool {
        Tool::Nvprof => Metric::from_name(name).map(|m| (m, 1.0)),
        Tool::Ncu => {
            let name = name
                .strip_prefix("sm__")
                .map_or(name.to_string(), |rest| format!("smsp__{rest}"));
            NCU_METRICS
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, ours, f)| (*ours, *f))
        }
    }
}

/// One reference value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The kernel name as the reference printed it.
    pub kernel: String,
    /// Which launch of that kernel (0-based, in the reference's order); `None` for a summary
    /// value (nvprof's average over `invocations`).
    pub launch: Option<usize>,
    /// For summaries: how many invocations the average is over.
    pub invocations: Option<u64>,
    /// The reference's metric name.
    pub metric: String,
    /// The value, in the reference's unit.
    pub value: f64,
}

/// Base units of the reference values cuda-flux compares (Nsight Compute's names), each of
/// which may carry a decimal prefix (`Kinst` = 1,000 `inst`).
const BASE_UNITS: &[&str] = &[
    "inst", "thread", "warp", "byte", "sector", "request", "cycle",
];

/// The factor a value in `unit` is multiplied by: 1 for no unit, `%` or a base unit, 10^3k for
/// a base unit with the prefix K, M, G, T, P or E; `None` for a unit not understood.
fn unit_scale(unit: &str) -> Option<f64> {
    let unit = unit.trim();
    if unit.is_empty() || unit == "%" || BASE_UNITS.contains(&unit) {
        return Some(1.0);
    }
    let mut chars = unit.chars();
    let scale = match chars.next()? {
        'K' => 1e3,
        'M' => 1e6,
        'G' => 1e9,
        'T' => 1e12,
        'P' => 1e15,
        'E' => 1e18,
        _ => return None,
    };
    BASE_UNITS.contains(&chars.as_str()).then_some(scale)
}

/// A reference value as the profilers print it: a non-negative decimal number, with optional
/// thousands separators (`1,234,567`, groups of three digits) and an optional `%` at the end.
/// Anything else (`inf`, `NaN`, negative values, `16%5`, `1,2`) is `None`.
fn reference_number(text: &str) -> Option<f64> {
    let text = text.trim();
    let text = text.strip_suffix('%').map_or(text, str::trim_end);
    let digits = if text.contains(',') {
        let (whole, fraction) = match text.split_once('.') {
            Some((w, f)) => (w, Some(f)),
            None => (text, None),
        };
        let mut groups = whole.split(',');
        let first = groups.next()?;
        let grouped = (1..=3).contains(&first.len())
            && first.bytes().all(|b| b.is_ascii_digit())
            && groups.all(|g| g.len() == 3 && g.bytes().all(|b| b.is_ascii_digit()));
        if !grouped {
            return None;
        }
        let mut plain = whole.replace(',', "");
        if let Some(fraction) = fraction {
            plain.push('.');
            plain.push_str(fraction);
        }
        plain
    } else {
        text.to_string()
    };
    // Digits, a point, an exponent: no sign, no `inf`/`nan` words.
    if !digits
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        || !digits.starts_with(|c: char| c.is_ascii_digit() || c == '.')
    {
        return None;
    }
    digits
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// Reads a reference CSV.
pub fn parse(path: &Path, text: &str, tool: Tool) -> Result<Vec<Sample>> {
    let name = path.display();
    // Spreadsheets save CSV with a UTF-8 byte order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // nvprof and ncu print `==PID==` / `==PROF==` lines around the table.
    let body: String = text
        .lines()
        .map(|l| if l.starts_with("==") { "" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    let records = csv::parse(&body).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let Some(((_, header), rows)) = records.split_first() else {
        bail!("{name}: no CSV table found");
    };
    let col = |c: &str| header.iter().position(|h| h == c);
    let number = |line: usize, metric: &str, text: &str, unit: &str| -> Result<f64> {
        let value = reference_number(text).ok_or_else(|| {
            anyhow::anyhow!(
                "{name}: line {line}: value {text:?} of {metric} is not a number (a non-negative decimal, optionally with thousands separators or a trailing %)"
            )
        })?;
        let scale = match unit_scale(unit) {
            Some(scale) => scale,
            // A metric cuda-flux does not compare: its unit does not matter.
            None if our_metric(tool, metric).is_none() => 1.0,
            None => bail!("{name}: line {line}: unit {unit:?} of {metric} is not understood"),
        };
        Ok(value * scale)
    };
    // The first line of each (kernel, launch, metric), to refuse a value given twice.
    let mut first_line: BTreeMap<(String, Option<u64>, String), usize> = BTreeMap::new();
    let mut once = |line: usize, kernel: &str, launch: Option<u64>, metric: &str| -> Result<()> {
        let key = (kernel.to_string(), launch, metric.to_string());
        if let Some(first) = first_line.insert(key, line) {
            let which = launch.map_or(String::new(), |id| format!(" (launch {id})"));
            bail!(
                "{name}: line {line}: {metric} of {kernel}{which} is given again (first on line {first})"
            );
        }
        Ok(())
    };
    let field = |row: &[String], i: usize| row.get(i).cloned().unwrap_or_default();
    let mut samples = Vec::new();
    match tool {
        Tool::Nvprof => {
            if let (Some(k), Some(m), Some(avg), Some(inv)) = (
                col("Kernel"),
                col("Metric Name"),
                col("Avg"),
                col("Invocations"),
            ) {
                for (line, row) in rows {
                    let metric = field(row, m);
                    once(*line, &field(row, k), None, &metric)?;
                    samples.push(Sample {
                        kernel: field(row, k),
                        launch: None,
                        invocations: field(row, inv).trim().parse().ok(),
                        value: number(*line, &metric, &field(row, avg), "")?,
                        metric,
                    });
                }
            } else if let (Some(k), None) = (col("Kernel").or(col("Name")), col("Metric Name")) {
                // --print-gpu-trace: one row per activity, one column per metric.
                let metric_columns: Vec<usize> = (0..header.len())
                    .filter(|&i| !TRACE_COLUMNS.contains(&header[i].as_str()))
                    .collect();
                for (n, &i) in metric_columns.iter().enumerate() {
                    if metric_columns[..n].iter().any(|&j| header[j] == header[i]) {
                        bail!("{name}: column {:?} appears twice", header[i]);
                    }
                }
                let mut seen: BTreeMap<String, usize> = BTreeMap::new();
                for (line, row) in rows {
                    let kernel = field(row, k);
                    // A units row, and memory copies and sets, are not kernels.
                    if kernel.is_empty() || kernel.starts_with("[CUDA") {
                        continue;
                    }
                    let n = seen.entry(kernel.clone()).or_default();
                    for &i in &metric_columns {
                        let text = field(row, i);
                        if text.is_empty() {
                            continue;
                        }
                        samples.push(Sample {
                            kernel: kernel.clone(),
                            launch: Some(*n),
                            invocations: None,
                            value: number(*line, &header[i], &text, "")?,
                            metric: header[i].clone(),
                        });
                    }
                    *n += 1;
                }
            } else {
                bail!(
                    "{name}: unknown CSV layout: expected nvprof --csv output (columns \"Kernel\", \"Metric Name\", \"Avg\" or a --print-gpu-trace table), found {}",
                    header.join(",")
                );
            }
        }
        Tool::Ncu => {
            let (Some(id), Some(k), Some(m), Some(v)) = (
                col("ID"),
                col("Kernel Name"),
                col("Metric Name"),
                col("Metric Value"),
            ) else {
                bail!(
                    "{name}: unknown CSV layout: expected ncu --csv output (columns \"ID\", \"Kernel Name\", \"Metric Name\", \"Metric Value\"), found {}",
                    header.join(",")
                );
            };
            let unit = col("Metric Unit");
            // Launch order per kernel follows the ID (ncu numbers profiled launches in order).
            let mut ids: BTreeMap<String, Vec<u64>> = BTreeMap::new();
            let mut parsed = Vec::new();
            for (line, row) in rows {
                let launch_id: u64 = field(row, id).trim().parse().map_err(|_| {
                    anyhow::anyhow!(
                        "{name}: line {line}: ID {:?} is not a number",
                        field(row, id)
                    )
                })?;
                let kernel = field(row, k);
                let list = ids.entry(kernel.clone()).or_default();
                if !list.contains(&launch_id) {
                    list.push(launch_id);
                }
                let metric = field(row, m);
                once(*line, &kernel, Some(launch_id), &metric)?;
                let unit = unit.map(|u| field(row, u)).unwrap_or_default();
                let value = number(*line, &metric, &field(row, v), &unit)?;
                parsed.push((kernel, launch_id, metric, value));
            }
            for list in ids.values_mut() {
                list.sort_unstable();
            }
            for (kernel, launch_id, metric, value) in parsed {
                let launch = ids[&kernel].iter().position(|i| *i == launch_id);
                samples.push(Sample {
                    kernel,
                    launch,
                    invocations: None,
                    metric,
                    value,
                });
            }
        }
    }
    Ok(samples)
}

/// Columns of nvprof's `--print-gpu-trace` table that are not metrics.
const TRACE_COLUMNS: &[&str] = &[
    "Start",
    "Duration",
    "Grid X",
    "Grid Y",
    "Grid Z",
    "Block X",
    "Block Y",
    "Block Z",
    "Registers Per Thread",
    "Static SMem",
    "Dynamic SMem",
    "Size",
    "Throughput",
    "SrcMemType",
    "DstMemType",
    "Device",
    "Context",
    "Stream",
    "Name",
    "Kernel",
    "Correlation_ID",
    "Src Dev",
    "Src Ctx",
    "Dst Dev",
    "Dst Ctx",
];

/// Which of our kernels a reference name denotes: equal names first, then equal base names.
fn find<'k, 'a>(kernels: &'k [MergedKernel<'a>], reference: &str) -> Option<&'k MergedKernel<'a>> {
    kernels
        .iter()
        .find(|k| {
            reference.trim() == k.name || names::squeeze(reference) == names::squeeze(k.demangled)
        })
        .or_else(|| {
            kernels
                .iter()
                .find(|k| names::same_kernel(reference, k.demangled, k.name))
        })
}

fn show(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The comparison text.
pub fn render(kernels: &[MergedKernel<'_>], samples: &[Sample], tool: Tool) -> String {
    let mut out = String::new();
    let mut unmatched_kernels: Vec<&str> = Vec::new();
    let mut unmatched_metrics: Vec<&str> = Vec::new();
    // Reference kernel names in order of appearance.
    let mut order: Vec<&str> = Vec::new();
    for s in samples {
        if !order.contains(&s.kernel.as_str()) {
            order.push(&s.kernel);
        }
        if our_metric(tool, &s.metric).is_none() && !unmatched_metrics.contains(&s.metric.as_str())
        {
            unmatched_metrics.push(&s.metric);
        }
    }
    let mut compared: Vec<&str> = Vec::new();
    for reference in order {
        let Some(kernel) = find(kernels, reference) else {
            unmatched_kernels.push(reference);
            continue;
        };
        compared.push(kernel.name);
        let _ = writeln!(out, "{}", kernel.demangled);
        if names::squeeze(reference) != names::squeeze(kernel.demangled) {
            let _ = writeln!(out, "  reference name: {reference}");
        }
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.kernel == reference).collect();
        // Metric -> (reference, ours).
        let mut rows: Vec<(String, Metric, f64, Option<f64>)> = Vec::new();
        if mine.iter().all(|s| s.launch.is_none()) {
            let counted = kernel.counted_launches();
            let invocations = mine.iter().find_map(|s| s.invocations);
            let _ = writeln!(
                out,
                "  per-launch averages: reference over {} invocation(s), cuda-flux over {} counted launch(es) of {}",
                invocations.map_or("?".to_string(), |n| n.to_string()),
                counted,
                kernel.launches.len()
            );
            let m = Metrics::of(&kernel.totals);
            for s in &mine {
                let Some((ours, factor)) = our_metric(tool, &s.metric) else {
                    continue;
                };
                let value = match m.get(ours) {
                    Value::Count(n) if counted > 0 => Some(n as f64 / counted as f64),
                    Value::Count(_) => None,
                    Value::Percent(p) => p,
                };
                rows.push((s.metric.clone(), ours, s.value * factor, value));
            }
        } else {
            let launches = mine
                .iter()
                .filter_map(|s| s.launch)
                .max()
                .map_or(0, |n| n + 1);
            let pairs: Vec<usize> = (0..launches.min(kernel.launches.len()))
                .filter(|&i| kernel.launches[i].launch.instrumented)
                .collect();
            let _ = writeln!(
                out,
                "  launches compared: {} (reference {}, cuda-flux {}, {} counted); sums over them",
                pairs.len(),
                launches,
                kernel.launches.len(),
                kernel.counted_launches()
            );
            let per_launch: Vec<Metrics> = kernel
                .launches
                .iter()
                .map(|l| {
                    Metrics::of(
                        l.launch
                            .instructions
                            .as_ref()
                            .unwrap_or(&Default::default()),
                    )
                })
                .collect();
            let mut names_seen: Vec<&str> = Vec::new();
            for s in &mine {
                if !names_seen.contains(&s.metric.as_str()) {
                    names_seen.push(&s.metric);
                }
            }
            for metric in names_seen {
                let Some((ours, factor)) = our_metric(tool, metric) else {
                    continue;
                };
                let reference: Vec<f64> = pairs
                    .iter()
                    .filter_map(|&i| {
                        mine.iter()
                            .find(|s| s.metric == metric && s.launch == Some(i))
                            .map(|s| s.value * factor)
                    })
                    .collect();
                let values: Vec<f64> = pairs
                    .iter()
                    .filter(|&&i| {
                        mine.iter()
                            .any(|s| s.metric == metric && s.launch == Some(i))
                    })
                    .filter_map(|&i| per_launch[i].get(ours).as_f64())
                    .collect();
                let percent = ours == Metric::WarpExecutionEfficiency;
                let combine = |v: &[f64]| -> Option<f64> {
                    if v.is_empty() {
                        None
                    } else if percent {
                        Some(v.iter().sum::<f64>() / v.len() as f64)
                    } else {
                        Some(v.iter().sum())
                    }
                };
                if let Some(r) = combine(&reference) {
                    rows.push((metric.to_string(), ours, r, combine(&values)));
                }
            }
        }
        let _ = writeln!(
            out,
            "  {:<34} {:>14} {:>14} {:>8}  reference metric",
            "metric", "reference", "cuda-flux", "ratio"
        );
        for (metric, ours, reference, value) in rows {
            let ratio = match value {
                Some(v) if reference != 0.0 => format!("{:.3}", v / reference),
                Some(0.0) => "1.000".to_string(),
                _ => "-".to_string(),
            };
            let _ = writeln!(
                out,
                "  {:<34} {:>14} {:>14} {:>8}  {}",
                ours,
                show(reference),
                value.map_or("-".to_string(), show),
                ratio,
                if metric == ours.name() {
                    ""
                } else {
                    metric.as_str()
                }
            );
        }
        out.push('\n');
    }
    if !unmatched_kernels.is_empty() {
        let _ = writeln!(out, "reference kernels not in the profile:");
        for k in &unmatched_kernels {
            let _ = writeln!(out, "  {k}");
        }
    }
    let only_ours: Vec<&MergedKernel<'_>> = kernels
        .iter()
        .filter(|k| !compared.contains(&k.name) && !k.launches.is_empty())
        .collect();
    if !only_ours.is_empty() {
        let _ = writeln!(out, "profiled kernels not in the reference:");
        for k in only_ours {
            let _ = writeln!(out, "  {}", k.demangled);
        }
    }
    if !unmatched_metrics.is_empty() {
        let _ = writeln!(out, "reference metrics with no cuda-flux counterpart:");
        for m in &unmatched_metrics {
            let _ = writeln!(out, "  {m}");
        }
    }
    out
}
