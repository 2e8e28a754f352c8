//! `cuda-flux metrics`: the metric groups of [`crate::metrics`] per kernel (merged over files)
//! and, optionally, per launch, as JSON or CSV (layouts in `docs/metrics.md`).

use serde::Serialize;

use crate::csv;
use crate::metrics::{Metrics, NAMES};
use crate::profile::{MergedKernel, Profile};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Csv,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    files: Vec<String>,
    kernels: Vec<JsonKernel<'a>>,
}

#[derive(Serialize)]
struct JsonKernel<'a> {
    name: &'a str,
    demangled: &'a str,
    source: &'a str,
    archs: &'a [u32],
    launches: usize,
    counted_launches: usize,
    metrics: Metrics,
    #[serde(skip_serializing_if = "Option::is_none")]
    per_launch: Option<Vec<JsonLaunch>>,
}

#[derive(Serialize)]
struct JsonLaunch {
    file: String,
    launch: usize,
    grid: [u32; 3],
    block: [u32; 3],
    instrumented: bool,
    metrics: Option<Metrics>,
}

fn dim(d: [u32; 3]) -> String {
    format!("{}x{}x{}", d[0], d[1], d[2])
}

/// Renders the metrics of `kernels` (merged from `profiles`).
pub fn render(
    profiles: &[Profile],
    kernels: &[MergedKernel<'_>],
    per_launch: bool,
    format: Format,
) -> String {
    let file_name = |i: usize| profiles[i].path.display().to_string();
    match format {
        Format::Json => {
            let out = JsonOut {
                files: (0..profiles.len()).map(file_name).collect(),
                kernels: kernels
                    .iter()
                    .map(|k| JsonKernel {
                        name: k.name,
                        demangled: k.demangled,
                        source: k.source,
                        archs: &k.archs,
                        launches: k.launches.len(),
                        counted_launches: k.counted_launches(),
                        metrics: Metrics::of(&k.totals),
                        per_launch: per_launch.then(|| {
                            k.launches
                                .iter()
                                .enumerate()
                                .map(|(i, l)| JsonLaunch {
                                    file: file_name(l.file),
                                    launch: i,
                                    grid: l.launch.grid,
                                    block: l.launch.block,
                                    instrumented: l.launch.instrumented,
                                    metrics: l.launch.instructions.as_ref().map(Metrics::of),
                                })
                                .collect()
                        }),
                    })
                    .collect(),
            };
            serde_json::to_string_pretty(&out).expect("metrics serialize")
        }
        Format::Csv => {
            let mut text = String::new();
            if per_launch {
                let mut header = vec![
                    "kernel",
                    "demangled",
                    "source",
                    "file",
                    "launch",
                    "grid",
                    "block",
                    "instrumented",
                ];
                header.extend(NAMES);
                text.push_str(&csv::line(&header));
                for k in kernels {
                    for (i, l) in k.launches.iter().enumerate() {
                        let mut row = vec![
                            k.name.to_string(),
                            k.demangled.to_string(),
                            k.source.to_string(),
                            file_name(l.file),
                            i.to_string(),
                            dim(l.launch.grid),
                            dim(l.launch.block),
                            l.launch.instrumented.to_string(),
                        ];
                        match &l.launch.instructions {
                            Some(counts) => {
                                row.extend(Metrics::of(counts).iter().map(|(_, v)| v.to_string()))
                            }
                            None => row.extend(NAMES.iter().map(|_| String::new())),
                        }
                        text.push_str(&csv::line(&row));
                    }
                }
            } else {
                let mut header = vec![
                    "kernel",
                    "demangled",
                    "source",
                    "launches",
                    "counted_launches",
                ];
                header.extend(NAMES);
                text.push_str(&csv::line(&header));
                for k in kernels {
                    let mut row = vec![
                        k.name.to_string(),
                        k.demangled.to_string(),
                        k.source.to_string(),
                        k.launches.len().to_string(),
                        k.counted_launches().to_string(),
                    ];
                    row.extend(Metrics::of(&k.totals).iter().map(|(_, v)| v.to_string()));
                    text.push_str(&csv::line(&row));
                }
            }
            text
        }
    }
}
