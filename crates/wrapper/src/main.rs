//! The `cuda-flux` command.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};

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
    /// Print a per-function table of a PTX file's static block and instruction counts.
    Summary {
        /// PTX files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Also list every basic block: label, size and opcodes.
        #[arg(long)]
        blocks: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line: the chain of causes, outermost first.
            eprintln!("cuda-flux: error: {error:#}");
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
        Command::Summary { files, blocks } => {
            let mut text = String::new();
            for file in &files {
                let module = load(file)?;
                text.push_str(&wrapper::summary_table(
                    &file.display().to_string(),
                    &module,
                    blocks,
                ));
            }
            print(text.trim_end())
        }
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

/// Writes `bytes` to a temporary file beside `path`, then renames it: never a partial file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.flush())
        .with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
