//! The `cuda-flux` command.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use analysis::aggregate::{self, Summary};
use analysis::metric_table;
use analysis::profile;
use analysis::rows::Output;
use anyhow::{Context as _, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use device_runtime::Placement;

/// cuda-flux: exact PTX instruction counts for CUDA programs.
#[derive(Debug, Parser)]
#[command(name = "cuda-flux", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the PTX model of a file as JSON: functions, basic blocks, opcodes.
    Ptx {
        /// A PTX file (as written by `clang --cuda-device-only -S` or `nvcc -ptx`).
        file: PathBuf,
        /// Write the JSON here instead of to standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Explain how the instrumentation counts a PTX file: per function, each loop counted in
    /// registers or the rule that keeps it out, and how each block is counted (with the cost of
    /// its update per warp execution).
    Placement {
        /// A PTX file (the input of the instrumentation, as kept by `CUDA_FLUX_KEEP`).
        file: PathBuf,
        /// Place for this architecture (sm_70, sm_80, ...) instead of the file's `.target`.
        #[arg(long)]
        arch: Option<String>,
        /// Only functions (kernels or device functions) with this name, else those containing
        /// it.
        #[arg(long)]
        kernel: Option<String>,
        /// The counter placement, as `CUDA_FLUX_COUNTERS` at build time.
        #[arg(
            long,
            default_value = "derived",
            value_parser = PossibleValuesParser::new(Placement::ALL.map(Placement::name))
                .try_map(|name| Placement::parse(&name)),
        )]
        counters: Placement,
        /// Print JSON (layout in docs/placement.md) instead of text.
        #[arg(long)]
        json: bool,
        /// Write the output here instead of to standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Print a per-function table of a PTX file's static block and instruction counts.
    Summary {
        /// PTX files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Also list every basic block: label, size and opcodes.
        #[arg(long)]
        blocks: bool,
    },
    /// Compute nvprof-style metric groups per kernel from profiles (docs/metrics.md).
    Metrics {
        /// Profiles (cuda-flux/1 JSON); several are merged, kernels matched by name and source.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Also give the metrics of every launch.
        #[arg(long)]
        per_launch: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Json)]
        format: Format,
        /// Write the output here instead of to standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Print a per-kernel summary of profiles: launches, instruction totals, top opcodes, key
    /// metric groups, SIMD efficiency, hottest blocks.
    Report {
        /// Profiles (cuda-flux/1 JSON); several are merged, kernels matched by name and source.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Only kernels with this name (mangled, demangled, or demangled without arguments;
        /// else those containing it).
        #[arg(long)]
        kernel: Option<String>,
        /// Opcodes listed per kernel.
        #[arg(long, default_value_t = 8)]
        top: usize,
        /// Hottest blocks listed per kernel.
        #[arg(long, default_value_t = 5)]
        blocks: usize,
    },
    /// Write one CSV row per launch for performance modelling: launch shape, instruction
    /// groups, memory instructions and bytes per state space, arithmetic intensity, SIMD
    /// efficiency (columns in docs/metrics.md).
    Features {
        /// Profiles (cuda-flux/1 JSON); several are merged, kernels matched by name and source.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Write the CSV here instead of to standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Print a kernel's PTX with each block's thread and warp counts in the margin, the hottest
    /// blocks marked, and, for profiles with line information (built with -lineinfo or -g),
    /// the counts per source line.
    Annotate {
        /// A profile (cuda-flux/1 JSON).
        file: PathBuf,
        /// The kernel (mangled, demangled, or demangled without arguments; else those
        /// containing it).
        #[arg(long)]
        kernel: String,
        /// Only the per-source-line view.
        #[arg(long)]
        by_line: bool,
        /// Hottest blocks marked.
        #[arg(long, default_value_t = 5)]
        hot: usize,
        /// Write the text here instead of to standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Write one self-contained HTML page (no network: inline CSS and SVG) with, per kernel,
    /// an instruction-mix chart, the metric groups and the annotated hottest blocks.
    Html {
        /// Profiles (cuda-flux/1 JSON); several are merged, kernels matched by name and source.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Only kernels with this name.
        #[arg(long)]
        kernel: Option<String>,
        /// Hottest blocks shown per kernel.
        #[arg(long, default_value_t = 5)]
        blocks: usize,
        /// Write the page here instead of to standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Compare cuda-flux's metric groups with nvprof's or Nsight Compute's `--csv` output for
    /// the same run: per kernel, metric, reference, ours, ratio.
    #[command(group(clap::ArgGroup::new("reference").required(true).args(["nvprof", "ncu"])))]
    Compare {
        /// A profile (cuda-flux/1 JSON).
        file: PathBuf,
        /// `nvprof --csv --metrics ...` output (summary or --print-gpu-trace layout).
        #[arg(long)]
        nvprof: Option<PathBuf>,
        /// `ncu --csv --metrics ...` output.
        #[arg(long)]
        ncu: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Csv,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line: the chain of causes, outermost first.
            eprintln!("cuda-flux: error: {}", analysis::error_line(&error));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Ptx { file, output } => {
            let module = load(&file)?;
            let json = serde_json::to_string_pretty(&module.summary())?;
            match output {
                Some(path) => write_atomically(&path, json.as_bytes()),
                None => print(&json),
            }
        }
        Command::Placement {
            file,
            arch,
            kernel,
            counters,
            json,
            output,
        } => {
            use analysis::placement::{self, Options};
            let module = load(&file)?;
            let options = Options {
                arch,
                function: kernel,
                placement: counters,
            };
            let title = file.display().to_string();
            let with_file = |e| anyhow::anyhow!("{title}: {e}");
            let text = if json {
                serde_json::to_string_pretty(
                    &placement::json(&title, &module, &options).map_err(with_file)?,
                )?
            } else {
                placement::text(&title, &module, &options).map_err(with_file)?
            };
            emit(output.as_deref(), &text)
        }
        Command::Summary { files, blocks } => {
            let mut text = String::new();
            for file in &files {
                let module = load(file)?;
                text.push_str(&analysis::summary_table(
                    &file.display().to_string(),
                    &module,
                    blocks,
                ));
            }
            print(text.trim_end())
        }
        Command::Metrics {
            files,
            per_launch,
            format,
            output,
        } => {
            let format = match format {
                Format::Json => metric_table::Format::Json,
                Format::Csv => metric_table::Format::Csv,
            };
            if per_launch {
                let mut out = Output::new(output.as_deref())?;
                metric_table::write_per_launch(&files, format, out.writer())?;
                return out.commit();
            }
            let summary = aggregate::summarize(&files)?;
            let text = metric_table::render(&summary, format)?;
            emit(output.as_deref(), &text)
        }
        Command::Report {
            files,
            kernel,
            top,
            blocks,
        } => {
            let summary = aggregate::summarize(&files)?;
            let chosen = choose(&summary, kernel.as_deref())?;
            let options = analysis::report::Options {
                top_opcodes: top,
                hot_blocks: blocks,
            };
            print(analysis::report::render(&summary, &chosen, options).trim_end())
        }
        Command::Annotate {
            file,
            kernel,
            by_line,
            hot,
            output,
        } => {
            let summary = aggregate::summarize(std::slice::from_ref(&file))?;
            let chosen = choose(&summary, Some(&kernel))?;
            let options = analysis::annotate::Options { hot, by_line };
            let mut text = String::new();
            for (i, k) in chosen.iter().enumerate() {
                if i > 0 {
                    text.push('\n');
                }
                let part = analysis::annotate::render(k, options)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
                text.push_str(&part);
            }
            emit(output.as_deref(), &text)
        }
        Command::Html {
            files,
            kernel,
            blocks,
            output,
        } => {
            let summary = aggregate::summarize(&files)?;
            let chosen = choose(&summary, kernel.as_deref())?;
            let options = analysis::html::Options { hot_blocks: blocks };
            emit(
                output.as_deref(),
                &analysis::html::render(&summary, &chosen, options),
            )
        }
        Command::Compare { file, nvprof, ncu } => {
            use analysis::compare::{self, Tool};
            let profiles = profile::load_all(std::slice::from_ref(&file))?;
            let kernels = profile::merge(&profiles)?;
            let (tool, path) = match (nvprof, ncu) {
                (Some(path), _) => (Tool::Nvprof, path),
                (None, Some(path)) => (Tool::Ncu, path),
                (None, None) => unreachable!("clap requires one of --nvprof and --ncu"),
            };
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let samples = compare::parse(&path, &text, tool)?;
            print(compare::render(&kernels, &samples, tool).trim_end())
        }
        Command::Features { files, output } => {
            let mut out = Output::new(output.as_deref())?;
            analysis::features::write(&files, out.writer())?;
            out.commit()
        }
    }
}

/// The kernels `--kernel` names (all without it); naming none is an error naming the files.
fn choose<'s>(summary: &'s Summary, wanted: Option<&str>) -> Result<Vec<&'s aggregate::Kernel>> {
    let Some(wanted) = wanted else {
        return Ok(summary.kernels.iter().collect());
    };
    let chosen = aggregate::select(&summary.kernels, wanted);
    if chosen.is_empty() {
        anyhow::bail!(
            "no kernel named {wanted:?} in {}",
            summary.file_names().join(", ")
        );
    }
    Ok(chosen)
}

/// Writes `text` to `output` atomically, or prints it.
fn emit(output: Option<&Path>, text: &str) -> Result<()> {
    match output {
        Some(path) => {
            let mut bytes = text.as_bytes().to_vec();
            if !text.ends_with('\n') {
                bytes.push(b'\n');
            }
            write_atomically(path, &bytes)
        }
        None => print(text.trim_end()),
    }
}

fn load(path: &Path) -> Result<ptx_lexer::Module> {
    let source =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    ptx_lexer::parse(source).with_context(|| format!("{}: invalid PTX", path.display()))
}

fn print(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{text}") {
        // A closed pipe (`| head`) is not an error worth reporting.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to standard output"),
    }
}

/// Writes `bytes` to `path` whole or not at all: a regular file (links followed) through a
/// temporary file renamed over it, a device or pipe in place (`host_runtime::output`).
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    host_runtime::output::write_file(path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}
