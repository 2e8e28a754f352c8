//! `cuda-flux metrics`: the metric groups of [`crate::metrics`] per kernel (merged over files)
//! and, optionally, per launch, as JSON or CSV (layouts in `docs/metrics.md`). Profiles are
//! streamed ([`crate::stream`]): per-launch rows are written as launches are read.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use host_runtime::report::Launch;
use serde::Serialize;

use crate::aggregate::{Kernel, Summary};
use crate::csv;
use crate::metrics::{Metric, Metrics};
use crate::rows::{LaunchRows, RowFormat};
use crate::stream::{self, KernelHead};

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
}

impl<'a> JsonKernel<'a> {
    fn of(k: &'a Kernel) -> Self {
        JsonKernel {
            name: &k.name,
            demangled: &k.demangled,
            source: &k.source,
            archs: &k.archs,
            launches: k.launches,
            counted_launches: k.counted,
            metrics: Metrics::of(&k.totals),
        }
    }
}

#[derive(Serialize)]
struct JsonLaunch<'a> {
    file: &'a str,
    launch: usize,
    grid: [u32; 3],
    block: [u32; 3],
    instrumented: bool,
    metrics: Option<Metrics>,
}

fn dim(d: [u32; 3]) -> String {
    format!("{}x{}x{}", d[0], d[1], d[2])
}

const KERNEL_COLUMNS: &[&str] = &["kernel", "demangled", "source"];

/// The per-kernel metrics of `summary` (no per-launch part).
pub fn render(summary: &Summary, format: Format) -> Result<String> {
    match format {
        Format::Json => {
            let out = JsonOut {
                files: summary.file_names(),
                kernels: summary.kernels.iter().map(JsonKernel::of).collect(),
            };
            serde_json::to_string_pretty(&out).context("cannot serialize the metrics")
        }
        Format::Csv => {
            let mut header = KERNEL_COLUMNS.to_vec();
            header.extend(["launches", "counted_launches"]);
            header.extend(Metric::ALL.iter().map(|m| m.name()));
            let mut text = csv::line(&header);
            for k in &summary.kernels {
                let mut row = vec![
                    k.name.clone(),
                    k.demangled.clone(),
                    k.source.clone(),
                    k.launches.to_string(),
                    k.counted.to_string(),
                ];
                row.extend(Metrics::of(&k.totals).iter().map(|(_, v)| v.to_string()));
                text.push_str(&csv::line(&row));
            }
            Ok(text)
        }
    }
}

struct PerLaunch {
    files: Vec<String>,
    format: Format,
}

impl RowFormat for PerLaunch {
    fn row(&mut self, file: usize, head: &KernelHead, index: usize, launch: &Launch) -> String {
        let file = self.files.get(file).map_or("", String::as_str);
        let metrics = launch.instructions.as_ref().map(Metrics::of);
        match self.format {
            Format::Json => {
                let item = JsonLaunch {
                    file,
                    launch: index,
                    grid: launch.grid,
                    block: launch.block,
                    instrumented: launch.instrumented,
                    metrics,
                };
                // Plain data: serializing it cannot fail.
                let text = serde_json::to_string(&item).unwrap_or_default();
                format!("        {text}")
            }
            Format::Csv => {
                let mut row = vec![
                    head.name.clone(),
                    head.demangled.clone(),
                    head.source.clone(),
                    file.to_string(),
                    index.to_string(),
                    dim(launch.grid),
                    dim(launch.block),
                    launch.instrumented.to_string(),
                ];
                match metrics {
                    Some(m) => row.extend(m.iter().map(|(_, v)| v.to_string())),
                    None => row.extend(Metric::ALL.iter().map(|_| String::new())),
                }
                csv::line(&row)
            }
        }
    }

    fn separator(&self) -> &'static str {
        match self.format {
            Format::Json => ",\n",
            Format::Csv => "",
        }
    }
}

/// Writes per-kernel and per-launch metrics to `out` while the profiles stream by: CSV, one
/// row per launch; JSON, each kernel's metrics with its launches in `per_launch`.
pub fn write_per_launch(paths: &[PathBuf], format: Format, out: &mut dyn Write) -> Result<()> {
    let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let json = format == Format::Json;
    if json {
        write!(
            out,
            "{{\n  \"files\": {},\n  \"kernels\": [\n",
            serde_json::to_string(&files)?
        )?;
    } else {
        let mut header = KERNEL_COLUMNS.to_vec();
        header.extend(["file", "launch", "grid", "block", "instrumented"]);
        header.extend(Metric::ALL.iter().map(|m| m.name()));
        out.write_all(csv::line(&header).as_bytes())?;
    }
    let format_rows = PerLaunch {
        files: files.clone(),
        format,
    };
    // JSON puts each kernel's metrics before its launches: spool them all.
    let mut rows = LaunchRows::new(format_rows, out, !json);
    stream::read_all(paths, &mut rows)?;
    rows.finish(|out, kernel, slot, before| {
        if !json {
            return Ok(());
        }
        if before {
            let head = serde_json::to_string(&JsonKernel::of(kernel))?;
            // The kernel object, left open for its launches.
            let open = head.strip_suffix('}').unwrap_or(&head);
            let comma = if slot > 0 { ",\n" } else { "" };
            writeln!(out, "{comma}    {open},\"per_launch\": [")?;
        } else {
            write!(out, "\n    ]}}")?;
        }
        Ok(())
    })?;
    if json {
        out.write_all(b"\n  ]\n}\n")?;
    }
    Ok(())
}
