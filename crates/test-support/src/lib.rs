//! Test support shared by the crates' tests (a dev-dependency only, never published): compiles
//! the CUDA corpus (`corpus/*.cu`) to PTX with clang-16 and nvcc 11.8, and assembles PTX with
//! ptxas; [`golden`] compares outputs with checked-in expected files; [`staticlib`] finds and
//! checks the runtimes' static libraries. The tools come from `scripts/setup.sh`; a missing tool
//! fails the test with a message saying so.

pub mod golden;
pub mod staticlib;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The CUDA toolkit root clang is pointed at (Debian's nvidia-cuda-toolkit layout).
pub const CUDA_PATH: &str = "/usr/lib/cuda";

/// Which compiler produced a PTX file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiler {
    Clang,
    Nvcc,
}

/// One generated PTX file.
#[derive(Debug, Clone)]
pub struct PtxFile {
    pub source: String,
    pub compiler: Compiler,
    pub arch: &'static str,
    /// Built with debug information (clang `-g`, nvcc `-G`): `.loc`, `.file`, `.section`, and
    /// clang's `$L__tmp` labels inside bodies.
    pub debug: bool,
    pub path: PathBuf,
}

impl PtxFile {
    pub fn describe(&self) -> String {
        let debug = if self.debug { ", debug" } else { "" };
        format!(
            "{} ({:?}, {}{debug})",
            self.source, self.compiler, self.arch
        )
    }

    /// The architectures ptxas must assemble this PTX for: its own, and sm_90 for sm_70 PTX
    /// (PTX for an older target assembles for a newer one).
    pub fn assemble_archs(&self) -> &'static [&'static str] {
        match self.arch {
            "sm_70" => &["sm_70", "sm_90"],
            _ => &["sm_90"],
        }
    }
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/test-support sits two levels below the repository root")
        .to_path_buf()
}

/// The directory cargo gives integration tests and benchmarks for their files
/// (`CARGO_TARGET_TMPDIR`, which only their own compilation sees): `<target>/tmp`, found from the
/// running executable, `<target>/<profile>/deps/<name>`.
pub fn target_tmpdir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("test executables sit in <target>/<profile>/deps");
    target.join("tmp")
}

/// The corpus's CUDA sources, sorted.
pub fn corpus_sources() -> Vec<PathBuf> {
    let dir = repo_root().join("corpus");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    sources.sort();
    assert!(!sources.is_empty(), "no .cu files in {}", dir.display());
    sources
}

/// Runs a build or tool step named `what`; on failure, the command with its output (tools such
/// as CMake report errors on stdout, compilers on stderr).
pub fn run_step(what: &str, command: &mut Command) -> Result<(), String> {
    let output = command.output().map_err(|e| {
        format!(
            "{what}: cannot run {:?} ({e}); scripts/setup.sh installs it",
            command.get_program()
        )
    })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what}: {command:?} failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Compiles one source to PTX.
pub fn compile(source: &Path, compiler: Compiler, arch: &str, out: &Path) -> Result<(), String> {
    compile_with(source, compiler, arch, false, out)
}

/// Compiles one source to PTX, with debug information if `debug`.
pub fn compile_with(
    source: &Path,
    compiler: Compiler,
    arch: &str,
    debug: bool,
    out: &Path,
) -> Result<(), String> {
    let mut command;
    match compiler {
        Compiler::Clang => {
            command = Command::new("clang-16");
            command
                .args([
                    "-x",
                    "cuda",
                    "--cuda-device-only",
                    "-S",
                    "-O2",
                    "-Wno-unknown-cuda-version",
                ])
                .arg(format!("--cuda-gpu-arch={arch}"))
                .arg(format!("--cuda-path={CUDA_PATH}"))
                .arg("-o")
                .arg(out)
                .arg(source);
            if debug {
                command.arg("-g");
            }
        }
        Compiler::Nvcc => {
            command = Command::new("nvcc");
            if debug {
                command.arg("-G");
            }
            command
                .arg("-ptx")
                .arg(format!("-arch={arch}"))
                .arg("-o")
                .arg(out)
                .arg(source);
        }
    }
    run_step(
        &format!("{compiler:?} {arch} {}", source.display()),
        &mut command,
    )
}

/// Compiles one source to textual device LLVM IR with clang-16 (what the device pass reads).
pub fn compile_device_ir(source: &Path, arch: &str, out: &Path) -> Result<(), String> {
    let mut command = Command::new("clang-16");
    command
        .args([
            "-x",
            "cuda",
            "--cuda-device-only",
            "-S",
            "-emit-llvm",
            "-O2",
        ])
        .arg("-Wno-unknown-cuda-version")
        .arg(format!("--cuda-gpu-arch={arch}"))
        .arg(format!("--cuda-path={CUDA_PATH}"))
        .arg("-o")
        .arg(out)
        .arg(source);
    run_step(
        &format!("clang-16 -emit-llvm {arch} {}", source.display()),
        &mut command,
    )
}

/// Assembles a PTX file with ptxas for `arch`, discarding the output.
pub fn ptxas(ptx: &Path, arch: &str) -> Result<(), String> {
    let mut command = Command::new("ptxas");
    command
        .arg(format!("-arch={arch}"))
        .arg("-o")
        .arg("/dev/null")
        .arg(ptx);
    run_step(
        &format!("ptxas -arch={arch} {}", ptx.display()),
        &mut command,
    )
}

/// Runs `job` over `items` on all cores, collecting every error.
pub fn parallel<T: Sync>(
    items: &[T],
    job: impl Fn(&T) -> Result<(), String> + Sync,
) -> Vec<String> {
    let errors = Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                if let Err(e) = job(item) {
                    errors.lock().unwrap().push(e);
                }
            });
        }
    });
    errors.into_inner().unwrap()
}

/// Whether `path` exists and was modified after every one of `inputs`.
fn is_newer_than(path: &Path, inputs: &[&Path]) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match modified(path) {
        Some(output) => inputs
            .iter()
            .all(|i| modified(i).is_some_and(|t| t < output)),
        None => false,
    }
}

/// Compiles the whole corpus with clang-16 (sm_70, sm_90) and nvcc (sm_70, sm_90), and once
/// more for sm_70 with debug information from each compiler, into one directory shared by every
/// test (files newer than their sources are reused).
pub fn generate_corpus_ptx() -> Vec<PtxFile> {
    let dir = target_tmpdir().join("corpus-ptx");
    let dir = dir.as_path();
    std::fs::create_dir_all(dir).expect("create PTX output directory");
    let mut files = Vec::new();
    for source in corpus_sources() {
        let stem = source.file_stem().unwrap().to_string_lossy().to_string();
        for compiler in [Compiler::Clang, Compiler::Nvcc] {
            for (arch, debug) in [("sm_70", false), ("sm_90", false), ("sm_70", true)] {
                let kind = if debug { ".debug" } else { "" };
                let path = dir.join(format!("{stem}.{compiler:?}.{arch}{kind}.ptx").to_lowercase());
                files.push(PtxFile {
                    source: stem.clone(),
                    compiler,
                    arch,
                    debug,
                    path,
                });
            }
        }
    }
    let corpus = repo_root().join("corpus");
    let header = corpus.join("witness.cuh");
    let errors = parallel(&files, |f| {
        let source = corpus.join(format!("{}.cu", f.source));
        if is_newer_than(&f.path, &[&source, &header]) {
            return Ok(()); // compiled by an earlier test run from the same sources
        }
        // Compile to a name no other process or thread uses, then rename, so that a concurrent
        // reader never sees a partial file.
        static PARTIALS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let unique = PARTIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let partial = f
            .path
            .with_extension(format!("{}-{unique}.partial", std::process::id()));
        compile_with(&source, f.compiler, f.arch, f.debug, &partial)?;
        std::fs::rename(&partial, &f.path).map_err(|e| e.to_string())
    });
    assert!(
        errors.is_empty(),
        "corpus compilation failed:\n{}",
        errors.join("\n")
    );
    files
}
