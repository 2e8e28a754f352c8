//! `cuda-flux-clang`: a drop-in for `clang++` on CUDA programs that builds them instrumented.
//!
//! Per CUDA translation unit and per architecture: clang compiles the device code to PTX (the
//! very PTX a plain clang build runs); the PTX model gives every kernel a counting clone
//! (`device_runtime::instrument_module`); ptxas assembles it; fatbinary packs SASS and PTX of all
//! architectures; clang compiles the host code to IR with that fat binary; the host pass
//! registers the clones and routes launches through the host runtime, and emits the object in
//! process. The link adds the host runtime and cudart (static).
//!
//! Nothing here breaks a user's build: a kernel that cannot be instrumented keeps its original
//! code and is reported (one warning at build time, `"instrumented": false` in the profile).

pub mod args;
pub mod carry;
pub mod chevrons;
pub mod fatbin;
pub mod nvcc;
pub mod probe;
pub mod ptx_link;
pub mod rdc;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context as _, Result};
use device_runtime::KernelInstrumentation;
use inkwell::context::Context;
use inkwell::OptimizationLevel;

pub use args::{ArgsError, DriverArgs, InputKind, OptLevel, Target};
use cuda_flux_pass::host::KernelRegistration;
use host_runtime::snapshot::{Block as SnapshotBlock, Snapshot, ThreadFlow};

/// The symbol a link names to extract the static host runtime and its table of entry points
/// (`host_runtime` `exports`, `carry.rs`).
pub const RUNTIME_LINK_ANCHOR: &str = "__cuda_flux_runtime_link";

/// A failed step whose own output already told the user why (e.g. a compile error in their
/// code): exit with its status and add nothing.
#[derive(Debug)]
pub struct StepFailed(pub i32);

impl std::fmt::Display for StepFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a compilation step failed with status {}", self.0)
    }
}

impl std::error::Error for StepFailed {}

/// The external tools and libraries the driver uses.
#[derive(Debug, Clone)]
pub struct Toolchain {
    pub clang: PathBuf,
    pub ptxas: PathBuf,
    pub fatbinary: PathBuf,
    pub cuda_path: Option<PathBuf>,
    /// Directory holding `libcudart_static.a`.
    pub cudart_dir: Option<PathBuf>,
    /// The host runtime static library (`libhost_runtime.a`).
    pub runtime_lib: PathBuf,
    /// The CPU target's library (`libcpu_runtime.a`): the CUDA runtime API on the CPU and the
    /// host runtime in one archive.
    pub cpu_runtime_lib: PathBuf,
}

impl Toolchain {
    /// The shared build of a runtime library (`libhost_runtime.so` beside `libhost_runtime.a`),
    /// which objects load when their program was linked without the static one (`carry.rs`).
    pub fn shared_runtime(&self, target: Target) -> PathBuf {
        match target {
            Target::Gpu => self.runtime_lib.with_extension("so"),
            Target::Cpu => self.cpu_runtime_lib.with_extension("so"),
        }
    }
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

impl Toolchain {
    /// Finds the tools: `CUDA_FLUX_CLANG` (default `clang++-16`), `ptxas` and `fatbinary` from
    /// the CUDA toolkit, the runtime library next to this executable (or `CUDA_FLUX_RUNTIME_LIB`).
    pub fn discover(cuda_path: Option<PathBuf>) -> Result<Self> {
        let cuda_path = cuda_path
            .or_else(|| env_path("CUDA_PATH"))
            .or_else(|| Some(PathBuf::from("/usr/lib/cuda")).filter(|p| p.join("nvvm").exists()));
        let tool = |name: &str| -> PathBuf {
            cuda_path
                .as_ref()
                .map(|p| p.join("bin").join(name))
                .filter(|p| p.exists())
                .unwrap_or_else(|| PathBuf::from(name))
        };
        let cudart_dir = [
            cuda_path.as_ref().map(|p| p.join("lib64")),
            Some(PathBuf::from("/usr/lib/x86_64-linux-gnu")),
            Some(PathBuf::from("/usr/local/cuda/lib64")),
        ]
        .into_iter()
        .flatten()
        .find(|d| d.join("libcudart_static.a").exists());
        let exe = std::env::current_exe().context("cannot locate the cuda-flux executable")?;
        let runtime_lib = env_path("CUDA_FLUX_RUNTIME_LIB")
            .unwrap_or_else(|| exe.with_file_name("libhost_runtime.a"));
        let cpu_runtime_lib = env_path("CUDA_FLUX_CPU_RUNTIME_LIB")
            .unwrap_or_else(|| exe.with_file_name("libcpu_runtime.a"));
        Ok(Toolchain {
            clang: env_path("CUDA_FLUX_CLANG").unwrap_or_else(|| PathBuf::from("clang++-16")),
            ptxas: tool("ptxas"),
            fatbinary: tool("fatbinary"),
            cuda_path,
            cudart_dir,
            runtime_lib,
            cpu_runtime_lib,
        })
    }
}

/// Where intermediates go: a temporary directory, or the `--cuda-flux-keep` directory.
enum WorkDir {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl WorkDir {
    fn path(&self) -> &Path {
        match self {
            WorkDir::Temporary(t) => t.path(),
            WorkDir::Kept(p) => p,
        }
    }
}

/// One run of the driver.
pub struct Driver {
    args: DriverArgs,
    tools: Toolchain,
    work: WorkDir,
    /// Where `args.prelude` was written, to be force-included in CUDA compilations.
    prelude: Option<PathBuf>,
    /// Where the program's kernels will run.
    target: Target,
    /// Where the counter code goes (`CUDA_FLUX_COUNTERS`).
    placement: device_runtime::Placement,
    /// Whether kernels may count into CTA counters in shared memory (`CUDA_FLUX_CTA_COUNTERS`).
    cta_counters: bool,
    /// A clang VFS overlay serving rewritten sources under their own paths (cuda-flux-nvcc's
    /// spaced-chevron shim, `chevrons.rs`).
    overlay: Option<PathBuf>,
    /// Print the commands instead of running them (cuda-flux-nvcc's `-dryrun`).
    dry_run: bool,
    /// The carried part (`carry.rs`) compiled for this run's target, made at the first CUDA
    /// object and merged into each.
    carried: std::cell::OnceCell<PathBuf>,
}

fn quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=+,:@%".contains(&b))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

fn demangle(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .unwrap_or_else(|| name.to_string())
}

/// `on` or `off` (also `1` / `0`) as a switch.
fn parse_switch(value: &str) -> Option<bool> {
    match value {
        "on" | "1" => Some(true),
        "off" | "0" => Some(false),
        _ => None,
    }
}

fn warn(message: impl std::fmt::Display) {
    eprintln!("cuda-flux: warning: {message}");
}

/// One architecture's outcome for one translation unit.
struct ArchBuild {
    arch: String,
    cubin: PathBuf,
    ptx: PathBuf,
    kernels: Vec<KernelInstrumentation>,
}

impl Driver {
    pub fn new(args: DriverArgs) -> Result<Self> {
        let target = match args.target {
            Some(target) => target,
            None => match std::env::var("CUDA_FLUX_TARGET") {
                Ok(value) if !value.is_empty() => {
                    Target::parse(&value).map_err(|error| anyhow!("CUDA_FLUX_TARGET: {error}"))?
                }
                _ => Target::Gpu,
            },
        };
        let placement = match std::env::var("CUDA_FLUX_COUNTERS") {
            Ok(value) if !value.is_empty() => device_runtime::Placement::parse(&value)
                .map_err(|error| anyhow!("CUDA_FLUX_COUNTERS: {error}"))?,
            _ => device_runtime::Placement::default(),
        };
        let cta_counters = match std::env::var("CUDA_FLUX_CTA_COUNTERS") {
            Ok(value) if !value.is_empty() => parse_switch(&value).ok_or_else(|| {
                anyhow!("CUDA_FLUX_CTA_COUNTERS must be on or off, not `{value}`")
            })?,
            _ => true,
        };
        let tools = Toolchain::discover(args.cuda_path.clone())?;
        let work = match args.keep.clone().or_else(|| env_path("CUDA_FLUX_KEEP")) {
            Some(dir) => {
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                WorkDir::Kept(dir)
            }
            None => WorkDir::Temporary(
                tempfile::Builder::new()
                    .prefix("cuda-flux-")
                    .tempdir()
                    .context("cannot create a temporary directory")?,
            ),
        };
        let prelude = match args.prelude {
            Some(text) => {
                let path = work.path().join("cuda_flux_prelude.h");
                std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                Some(path)
            }
            None => None,
        };
        Ok(Driver {
            args,
            tools,
            work,
            prelude,
            target,
            placement,
            cta_counters,
            overlay: None,
            dry_run: false,
            carried: std::cell::OnceCell::new(),
        })
    }

    /// Prints every command (one per line, shell-quoted, on stdout) and every in-process step
    /// (`# ...`, a shell comment) instead of running them: the output reads as a script.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    fn verbose(&self, message: impl std::fmt::Display) {
        if self.dry_run {
            println!("# {message}");
        } else if self.args.verbose {
            eprintln!("cuda-flux: {message}");
        }
    }

    /// With `-v`, prints `command` as a shell would take it.
    fn show(&self, command: &Command) {
        if self.args.verbose || self.dry_run {
            let mut line = quote(&command.get_program().to_string_lossy());
            let mut output_next = false;
            for arg in command.get_args() {
                let arg = arg.to_string_lossy();
                line.push(' ');
                // nvcc prints `-o "file"`; scripts cut its link line there to find the libraries
                // (SHOC's find_cuda_libs.sh), so the output is quoted the same (when plain).
                if output_next && quote(&arg) == arg {
                    line.push_str(&format!("\"{arg}\""));
                } else {
                    line.push_str(&quote(&arg));
                }
                output_next = arg == "-o";
            }
            if self.dry_run {
                println!("{line}");
            } else if self.args.nvcc_style {
                // As nvcc prints its steps: CMake reads the link line from them.
                eprintln!("#$ {line}");
            } else {
                eprintln!("cuda-flux: {line}");
            }
        }
    }

    /// Runs an external command; a failure ends the build with its status.
    fn run(&self, command: &mut Command) -> Result<()> {
        self.show(command);
        if self.dry_run {
            return Ok(());
        }
        let status = command
            .status()
            .with_context(|| format!("cannot run {}", command.get_program().to_string_lossy()))?;
        if status.success() {
            Ok(())
        } else {
            Err(StepFailed(status.code().unwrap_or(1)).into())
        }
    }

    /// Runs a command whose failure the driver handles itself; returns its stderr on failure.
    fn try_run(&self, command: &mut Command) -> Result<std::result::Result<(), String>> {
        self.try_run_with(command, false)
    }

    /// [`Driver::try_run`]; with `pass_through`, what the command said on stderr when it
    /// succeeded (warnings, `-v` output) is shown too.
    fn try_run_with(
        &self,
        command: &mut Command,
        pass_through: bool,
    ) -> Result<std::result::Result<(), String>> {
        self.show(command);
        if self.dry_run {
            return Ok(Ok(()));
        }
        if pass_through {
            command.stdout(std::process::Stdio::inherit());
        }
        let output = command
            .output()
            .with_context(|| format!("cannot run {}", command.get_program().to_string_lossy()))?;
        Ok(if output.status.success() {
            if pass_through {
                use std::io::Write as _;
                let _ = std::io::stderr().write_all(&output.stderr);
            }
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        })
    }

    fn clang_cuda(&self) -> Command {
        let mut command = Command::new(&self.tools.clang);
        command.args([
            "-x",
            "cuda",
            "-Wno-unknown-cuda-version",
            "-Qunused-arguments",
        ]);
        if let Some(path) = &self.tools.cuda_path {
            command.arg(format!("--cuda-path={}", path.display()));
        }
        command.args(&self.args.flags);
        if let Some(prelude) = &self.prelude {
            command.arg("-include").arg(prelude);
        }
        if self.args.nvcc_style && self.compiles_cmake_identification() {
            // CMake identifies a CUDA compiler by the macros its identification source sees:
            // cuda-flux-nvcc is nvcc to it (its command line, its `-v`), so it sees nvcc's.
            command.args(probe::nvcc_identification_macros());
        }
        if let Some(overlay) = &self.overlay {
            command.arg("-ivfsoverlay").arg(overlay);
        }
        command
    }

    /// Whether this run compiles CMake's compiler identification source
    /// (`CMakeCUDACompilerId.cu`, CMakeDetermineCompilerId).
    fn compiles_cmake_identification(&self) -> bool {
        self.args.inputs.iter().any(|input| {
            input
                .path
                .file_name()
                .is_some_and(|n| n == "CMakeCUDACompilerId.cu")
        })
    }

    /// The flag that makes this a run that builds nothing (`-E`, `-M`, `-MM`, `-S`,
    /// `-fsyntax-only`), if any: such a run is clang's alone ([`Driver::clang_only`]).
    pub fn stops_early(&self) -> Option<&str> {
        const STOPS: &[&str] = &["-E", "-M", "-MM", "-S", "-fsyntax-only"];
        self.args
            .flags
            .iter()
            .map(String::as_str)
            .find(|f| STOPS.contains(f))
    }

    /// `-E`, `-M`, `-MM`, `-S`, `-fsyntax-only`: one clang run over every input with the
    /// command line's flags, as `clang++` would do it (preprocessed text or dependencies on
    /// stdout or `-o`, assembly files, a syntax check). Nothing is instrumented or linked, and
    /// the choice of target does not matter: what clang prints or writes is what a plain build
    /// would compile.
    fn clang_only(&self) -> Result<()> {
        let mut command = Command::new(&self.tools.clang);
        command.args(["-Wno-unknown-cuda-version", "-Qunused-arguments"]);
        if let Some(path) = &self.tools.cuda_path {
            command.arg(format!("--cuda-path={}", path.display()));
        }
        command.args(&self.args.flags).args(&self.args.host_flags);
        if self.args.rdc {
            command.arg("-fgpu-rdc");
        }
        if self.args.compile_only {
            command.arg("-c");
        }
        if self.args.inputs.iter().any(|i| i.kind == InputKind::Cuda) {
            for arch in &self.args.archs {
                command.arg(format!("--cuda-gpu-arch={arch}"));
            }
        }
        for input in &self.args.inputs {
            let language = match input.kind {
                InputKind::Cuda => "cuda",
                InputKind::Link => "none",
                InputKind::C | InputKind::Host => host_language(input),
            };
            command.args(["-x", language]).arg(&input.path);
        }
        if let Some(output) = &self.args.output {
            command.arg("-o").arg(output);
        }
        self.run(&mut command)
    }

    /// clang compiling a host source (`InputKind::Host` or `C`) with the command line's flags,
    /// the language named ([`host_language`]) so that the input's kind decides it, not
    /// clang++'s reading of the extension. A compilation that is not C++ leaves out C++
    /// dialects (`-std=c++14`), as nvcc does for a `.c` input: clang would reject them.
    fn host_source_command(&self, input: &args::Input) -> Command {
        let language = host_language(input);
        let cxx = language == "c++";
        let mut command = Command::new(&self.tools.clang);
        command.args(["-Qunused-arguments", "-x", language]);
        command.args(
            self.args
                .flags
                .iter()
                .chain(&self.args.host_flags)
                .filter(|flag| cxx || !is_cxx_dialect(flag)),
        );
        command
    }

    /// Builds everything; returns normally when the build succeeded.
    pub fn build(&self) -> Result<()> {
        if self.stops_early().is_some() {
            return self.clang_only();
        }
        if self.args.nvcc_style && self.args.verbose && !self.dry_run {
            // nvcc's `-v` starts with its variables (cuda-flux-nvcc prints the others first,
            // `probe::nvcc_variables`); CMake takes the link line to be the one holding these.
            eprintln!("#$ LIBRARIES=  {}", self.library_dirs().0.join(" "));
        }
        let compiled_count = self
            .args
            .inputs
            .iter()
            .filter(|i| i.kind != InputKind::Link)
            .count();
        let mut objects = Vec::new();
        for (index, input) in self.args.inputs.iter().enumerate() {
            let object = if self.args.compile_only {
                match (&self.args.output, compiled_count) {
                    (Some(output), 1) => output.clone(),
                    _ => PathBuf::from(input.path.file_stem().unwrap_or_default())
                        .with_extension("o"),
                }
            } else {
                let stem = input.path.file_stem().unwrap_or_default().to_string_lossy();
                self.work.path().join(format!("{index}-{stem}.o"))
            };
            match input.kind {
                InputKind::Link => {
                    objects.push(input.path.clone());
                    continue;
                }
                InputKind::Host | InputKind::C => {
                    let mut command = self.host_source_command(input);
                    command.arg("-c");
                    command.arg(&input.path).arg("-o").arg(&object);
                    self.run(&mut command)?;
                }
                InputKind::Cuda if self.is_link_stub(input) => {
                    self.compile_link_stub(index, &input.path, &object)?
                }
                InputKind::Cuda if self.args.rdc => {
                    self.compile_separable(index, &input.path, &object)?
                }
                InputKind::Cuda => self.compile_cuda(index, &input.path, &object)?,
            }
            objects.push(object);
        }
        self.scrub_dependency_file()?;
        if self.args.device_link_only {
            let output = self
                .args
                .output
                .clone()
                .unwrap_or_else(|| PathBuf::from("a_dlink.o"));
            return self.device_link_into(&objects, &output);
        }
        if !self.args.compile_only {
            if let Some(linked) = self.device_link(&objects)? {
                // First: it names every unit, so that archives after it supply them all.
                objects.insert(0, linked);
            }
            self.link(&objects)?;
        }
        Ok(())
    }

    /// A separately compiled unit (`-fgpu-rdc`, `-rdc=true`, `-dc`; `rdc.rs`): its object keeps
    /// its PTX of every architecture, uninstrumented, for the device link; the host code is
    /// compiled as clang compiles such a unit, its calls routed to the runtime and its kernel
    /// registrations through the device link's hook.
    fn compile_separable(&self, index: usize, source: &Path, object: &Path) -> Result<()> {
        let stem = format!(
            "{index}-{}",
            source.file_stem().unwrap_or_default().to_string_lossy()
        );
        let dir = self.work.path();
        // Device and host compilations must agree on the names clang gives a unit's static
        // kernels and variables (`__intern__<hash>`), which follow its `-cuid`.
        let unit = unit_id(source, object);
        let cuid = format!("-cuid={unit}");
        let mut archs = Vec::new();
        for arch in &self.args.archs {
            let ptx = dir.join(format!("{stem}.{arch}.ptx"));
            let mut command = self.clang_cuda();
            command
                .args(["--cuda-device-only", "-S", "-fgpu-rdc", &cuid])
                .arg(format!("--cuda-gpu-arch={arch}"));
            if let Some(level) = self.args.device_opt_level {
                command.arg(level.flag());
            }
            command.arg(source).arg("-o").arg(&ptx);
            self.run(&mut command)?;
            if !self.dry_run {
                archs.push(ptx_sim::image::ArchPtx {
                    arch: arch_number(arch)?,
                    ptx: std::fs::read_to_string(&ptx)
                        .with_context(|| format!("cannot read {}", ptx.display()))?,
                });
            }
        }
        let relocatable = self.relocatable_fat_binary(&stem, source, &unit, &archs)?;
        let host_ir = dir.join(format!("{stem}.host.bc"));
        let mut command = self.host_compile(&relocatable);
        // clang's driver hands `-cuid` to device compilations only: the host one gets it
        // directly, or its static variables would be registered under other names.
        command.args(["-fgpu-rdc", "-Xclang", &cuid, "-emit-llvm"]);
        command.arg(source).arg("-o").arg(&host_ir);
        self.run(&mut command)?;
        let host_object = dir.join(format!("{stem}.host.o"));
        self.verbose(format!(
            "[in process] host pass (separable unit) on {} -> {}",
            host_ir.display(),
            host_object.display()
        ));
        let record = dir.join(format!("{stem}.rdc"));
        if !self.dry_run {
            let context = Context::create();
            let outcome = cuda_flux_pass::read_module(&context, &host_ir)
                .map_err(anyhow::Error::from)
                .and_then(|module| {
                    let module_id = cuda_flux_pass::host::route_separable_unit(
                        &module,
                        rdc::REGISTER_FUNCTION_HOOK,
                    );
                    if self.work_is_kept() {
                        let _ =
                            module.print_to_file(dir.join(format!("{stem}.host.instrumented.ll")));
                    }
                    cuda_flux_pass::host::emit_object(
                        &module,
                        &host_object,
                        self.host_opt_level(),
                    )?;
                    Ok(module_id)
                });
            let module_id = match outcome {
                Ok(module_id) => module_id.unwrap_or_default(),
                Err(error) => {
                    // Its launches then go to CUDA directly: they run, uncounted.
                    warn(format!(
                        "{}: host pass failed ({}); its kernels run uninstrumented",
                        source.display(),
                        crate::error_line(&error)
                    ));
                    let mut command = self.host_compile(&relocatable);
                    command.args(["-fgpu-rdc", "-Xclang", &cuid]);
                    command.arg(source).arg("-o").arg(&host_object);
                    self.run(&mut command)?;
                    String::new()
                }
            };
            let unit = rdc::UnitRecord {
                module_id,
                source: source.to_string_lossy().into_owned(),
                archs,
            };
            std::fs::write(&record, unit.encode())
                .with_context(|| format!("cannot write {}", record.display()))?;
        }
        let part_source = dir.join(format!("{stem}.rdc.c"));
        let part = dir.join(format!("{stem}.rdc.o"));
        if !self.dry_run {
            std::fs::write(&part_source, rdc::unit_part_source(&record))
                .with_context(|| format!("cannot write {}", part_source.display()))?;
        }
        let mut command = Command::new(&self.tools.clang);
        command
            .args(["-x", "c", "-O2", "-fPIC", "-w", "-c"])
            .arg(&part_source)
            .arg("-o")
            .arg(&part);
        self.run(&mut command)?;
        self.merge_carried(&[host_object, part], object)
    }

    /// What a separately compiled unit's host code embeds as its relocatable device code: the
    /// fat binary clang would embed (relocatable SASS and PTX of every architecture, from the
    /// unit's uninstrumented PTX), so that a device link by nvlink (CMake's for clang) can read
    /// the object; cuda-flux's own device link uses the unit's record instead. Each cubin
    /// carries the unit's record for its architecture as a device variable (named after
    /// `unit`, the unit's `-cuid`), which reaches the cubin nvlink links: the driver's compile
    /// of CMake's `crt/link.stub` reads it there (`compile_link_stub`). Without ptxas and
    /// fatbinary (CPU target), an empty stand-in.
    fn relocatable_fat_binary(
        &self,
        stem: &str,
        source: &Path,
        unit: &str,
        archs: &[ptx_sim::image::ArchPtx],
    ) -> Result<PathBuf> {
        let dir = self.work.path();
        let fatbin = dir.join(format!("{stem}.relocatable.fatbin"));
        let mut command = Command::new(&self.tools.fatbinary);
        command.args(["-64", "--create"]).arg(&fatbin);
        if self.dry_run {
            for arch in &self.args.archs {
                let ptx = dir.join(format!("{stem}.{arch}.relocatable.ptx"));
                let cubin = dir.join(format!("{stem}.{arch}.relocatable.cubin"));
                self.show(self.ptxas(arch, &ptx, &cubin).arg("--compile-only"));
            }
            self.show(&command);
            return Ok(fatbin);
        }
        let mut assembled = true;
        for (arch, arch_ptx) in self.args.archs.iter().zip(archs) {
            let ptx = dir.join(format!("{stem}.{arch}.ptx"));
            let relocatable_ptx = dir.join(format!("{stem}.{arch}.relocatable.ptx"));
            let record = rdc::UnitRecord {
                module_id: String::new(),
                source: source.to_string_lossy().into_owned(),
                archs: vec![arch_ptx.clone()],
            };
            let text = format!("{}{}", arch_ptx.ptx, rdc::unit_record_ptx(unit, &record));
            std::fs::write(&relocatable_ptx, text)
                .with_context(|| format!("cannot write {}", relocatable_ptx.display()))?;
            let cubin = dir.join(format!("{stem}.{arch}.relocatable.cubin"));
            let mut ptxas = self.ptxas(arch, &relocatable_ptx, &cubin);
            ptxas.arg("--compile-only");
            // Its messages are for the GPU target's second run below.
            let ok = ptxas.output().is_ok_and(|o| o.status.success());
            if !ok && self.target == Target::Gpu {
                // As clang -fgpu-rdc would: its error is the user's.
                self.run(
                    self.ptxas(arch, &relocatable_ptx, &cubin)
                        .arg("--compile-only"),
                )?;
            }
            assembled &= ok;
            let number = arch.trim_start_matches("sm_");
            command.arg(format!("--image=profile={arch},file={}", cubin.display()));
            command.arg(format!(
                "--image=profile=compute_{number},file={}",
                ptx.display()
            ));
        }
        if assembled && self.try_run(&mut command)?.is_ok() {
            return Ok(fatbin);
        }
        std::fs::write(&fatbin, b"")
            .with_context(|| format!("cannot write {}", fatbin.display()))?;
        Ok(fatbin)
    }

    /// Whether `input` is CUDA's `crt/link.stub` compiled for a device link made by nvlink
    /// (CMake's separable compilation with clang): it registers nvlink's uninstrumented device
    /// code under the units' registration functions, which a final link by this driver defines
    /// itself (`device_link`).
    fn is_link_stub(&self, input: &args::Input) -> bool {
        input.path.file_name().is_some_and(|n| n == "link.stub")
            && self
                .args
                .flags
                .iter()
                .any(|f| f.starts_with("-DREGISTERLINKBINARYFILE="))
    }

    /// CUDA's `crt/link.stub`, compiled for a device link nvlink made (CMake's separable
    /// compilation with clang): when every unit nvlink linked carries its record in nvlink's
    /// cubin (`relocatable_fat_binary`), the object is cuda-flux's device link of those units
    /// instead ([`Driver::link_units`]), whatever makes the final link. Otherwise (a unit of
    /// another compiler among them), link.stub compiled as clang compiles it, with its
    /// registration functions made weak (`objcopy`) and the note of
    /// [`rdc::link_stub_note_source`] merged in: a cuda-flux device link at the final link
    /// overrides it, a foreign final link keeps nvlink's device code and says so at run time.
    fn compile_link_stub(&self, index: usize, source: &Path, object: &Path) -> Result<()> {
        if !self.dry_run {
            let linked = self.nvlink_units().and_then(|(units, module_ids)| {
                if units.is_empty() {
                    // Nothing registers through it.
                    self.empty_object(object)
                } else {
                    self.link_units(&units, &module_ids, object)
                }
            });
            match linked {
                Ok(()) => return Ok(()),
                Err(why) => warn(format!(
                    "the device link nvlink made cannot be instrumented: {}; its device code \
                     runs uninstrumented, unless a cuda-flux final link makes the device link",
                    crate::error_line(&why)
                )),
            }
        }
        let dir = self.work.path();
        let stem = format!("{index}-link-stub");
        let compiled = dir.join(format!("{stem}.o"));
        let mut command = self.clang_cuda();
        command.args(["--cuda-host-only", "-c"]);
        command.args(&self.args.host_flags);
        for arch in &self.args.archs {
            command.arg(format!("--cuda-gpu-arch={arch}"));
        }
        command.arg(source).arg("-o").arg(&compiled);
        self.run(&mut command)?;
        let weakened = dir.join(format!("{stem}.weak.o"));
        let mut weaken = Command::new("objcopy");
        if !self.dry_run {
            let symbols = Command::new("nm")
                .args(["--defined-only", "--format=just-symbols"])
                .arg(&compiled)
                .output()
                .context("cannot run nm (binutils)")?;
            for name in String::from_utf8_lossy(&symbols.stdout).lines() {
                if name.starts_with(rdc::REGISTER_LINKED_BINARY) {
                    weaken.arg(format!("--weaken-symbol={name}"));
                }
            }
        }
        weaken.arg(&compiled).arg(&weakened);
        self.run(&mut weaken)?;
        let note_source = dir.join(format!("{stem}.note.c"));
        let note = dir.join(format!("{stem}.note.o"));
        if !self.dry_run {
            std::fs::write(
                &note_source,
                rdc::link_stub_note_source(self.target == Target::Cpu),
            )
            .with_context(|| format!("cannot write {}", note_source.display()))?;
        }
        let mut command = Command::new(&self.tools.clang);
        command
            .args(["-x", "c", "-O2", "-fPIC", "-w", "-c"])
            .arg(&note_source)
            .arg("-o")
            .arg(&note);
        self.run(&mut command)?;
        self.merge_carried(&[weakened, note], object)
    }

    /// The units of the device link nvlink made for the `crt/link.stub` being compiled: the
    /// module ids of its register file (`-DREGISTERLINKBINARYFILE`), the records in the cubin
    /// it wrote for each architecture beside that file (CMake's `<dir>/sm_XX.cubin`).
    fn nvlink_units(&self) -> Result<(Vec<rdc::UnitRecord>, Vec<String>)> {
        let register_file = self
            .args
            .flags
            .iter()
            .find_map(|f| f.strip_prefix("-DREGISTERLINKBINARYFILE="))
            .map(|value| PathBuf::from(value.trim_matches('"')))
            .context("no -DREGISTERLINKBINARYFILE")?;
        let text = std::fs::read_to_string(&register_file)
            .with_context(|| format!("cannot read {}", register_file.display()))?;
        let module_ids = rdc::register_file_module_ids(&text).with_context(|| {
            format!("{} is not an nvlink register file", register_file.display())
        })?;
        let dir = register_file.parent().unwrap_or(Path::new("."));
        let mut cubins = Vec::new();
        for arch in &self.args.archs {
            let cubin = dir.join(format!("{arch}.cubin"));
            let bytes = std::fs::read(&cubin)
                .with_context(|| format!("cannot read nvlink's cubin {}", cubin.display()))?;
            let records = rdc::cubin_unit_records(&bytes, &cubin.display().to_string())?;
            cubins.push((arch.clone(), records));
        }
        let units = rdc::nvlink_device_link(&module_ids, cubins)?;
        Ok((units, module_ids))
    }

    /// The device link of the final link: when `objects` (and the static archives among the
    /// link's inputs) hold separately compiled units that no device-link object among them
    /// links, links them into a device-link object and returns it.
    fn device_link(&self, objects: &[PathBuf]) -> Result<Option<PathBuf>> {
        if self.dry_run {
            return Ok(None);
        }
        let found = self.separable_units(objects)?;
        let (units, module_ids) = self.units_to_link(&found)?;
        if units.is_empty() {
            return Ok(None);
        }
        let output = self.work.path().join("cuda_flux_device_link.o");
        self.link_units(&units, &module_ids, &output)?;
        Ok(Some(output))
    }

    /// The units `found` holds that no device-link object among the inputs links yet, with
    /// their module ids: cuda-flux's, then other compilers' (their PTX for the architectures
    /// the former share, or, without any, the ones this build names), each of whose kernels
    /// is said once to run uncounted (their launches do not reach cuda-flux).
    fn units_to_link(&self, found: &rdc::Found) -> Result<(Vec<rdc::UnitRecord>, Vec<String>)> {
        let mut units: Vec<rdc::UnitRecord> = found.unlinked().into_iter().cloned().collect();
        let foreign = found.unlinked_foreign();
        if !foreign.is_empty() {
            let archs: Vec<u32> = match units.split_first() {
                Some((first, rest)) => first
                    .archs
                    .iter()
                    .map(|a| a.arch)
                    .filter(|arch| rest.iter().all(|u| u.archs.iter().any(|a| a.arch == *arch)))
                    .collect(),
                None => self
                    .args
                    .archs
                    .iter()
                    .map(|arch| arch_number(arch))
                    .collect::<Result<_>>()?,
            };
            for unit in foreign {
                let record = match unit.record_for(&archs) {
                    Ok(record) => record,
                    // As before cuda-flux read other compilers' units: if the link needs it,
                    // ptxas names the functions it lacks.
                    Err(why) if unit.in_archive => {
                        self.verbose(format!("left out of the device link: {why}"));
                        continue;
                    }
                    Err(why) => return Err(why.into()),
                };
                let kernels: Vec<String> = record.kernels().iter().map(|k| demangle(k)).collect();
                if !kernels.is_empty() {
                    warn(format!(
                        "{}: compiled by another compiler; its device code joins cuda-flux's \
                         device link, but its own kernels' launches do not reach cuda-flux and \
                         run uncounted: {}",
                        unit.object,
                        kernels.join(", ")
                    ));
                }
                units.push(record);
            }
        }
        let module_ids = units.iter().map(|u| u.module_id.clone()).collect();
        Ok((units, module_ids))
    }

    /// nvcc's `-dlink`: the device-link object of `objects` written to `output`.
    fn device_link_into(&self, objects: &[PathBuf], output: &Path) -> Result<()> {
        if self.dry_run {
            self.verbose(format!("[in process] device link -> {}", output.display()));
            return Ok(());
        }
        let found = self.separable_units(objects)?;
        let (units, module_ids) = self.units_to_link(&found)?;
        if units.is_empty() {
            // nvcc writes an object without device code then; so does this (nothing to
            // register), and the link works as with nvcc.
            return self.empty_object(output);
        }
        self.link_units(&units, &module_ids, output)
    }

    /// A device-link object of no units: an empty object.
    fn empty_object(&self, output: &Path) -> Result<()> {
        let source = self.work.path().join("cuda_flux_empty_dlink.c");
        std::fs::write(&source, "/* cuda-flux: no separately compiled units */\n")
            .with_context(|| format!("cannot write {}", source.display()))?;
        let mut command = Command::new(&self.tools.clang);
        command
            .args(["-x", "c", "-fPIC", "-c"])
            .arg(&source)
            .arg("-o")
            .arg(output);
        self.run(&mut command)
    }

    /// The separately compiled units among `objects` and the archives the link names.
    fn separable_units(&self, objects: &[PathBuf]) -> Result<rdc::Found> {
        let mut found = rdc::Found::default();
        for object in objects {
            let is_input = object
                .extension()
                .is_some_and(|e| e == "o" || e == "a" || e == "obj" || e == "lib");
            if is_input && object.exists() {
                rdc::read_inputs(object, &mut found)?;
            }
        }
        Ok(found)
    }

    /// Links the PTX of `units` per architecture, instruments it once, and writes the
    /// device-link object (`rdc::link_object_source`) that registers it under the units'
    /// `module_ids` to `output`.
    fn link_units(
        &self,
        units: &[rdc::UnitRecord],
        module_ids: &[String],
        output: &Path,
    ) -> Result<()> {
        let dir = self.work.path();
        let names: Vec<String> = units.iter().map(|u| u.source.clone()).collect();
        self.verbose(format!(
            "[in process] device link of {} unit(s): {}",
            units.len(),
            names.join(", ")
        ));
        // The architectures every unit was compiled for.
        let Some((first, rest)) = units.split_first() else {
            bail!("no separately compiled units to link");
        };
        let mut archs: Vec<u32> = first.archs.iter().map(|a| a.arch).collect();
        for unit in rest {
            archs.retain(|arch| unit.archs.iter().any(|a| a.arch == *arch));
        }
        if archs.is_empty() {
            bail!(
                "the separately compiled units {} have no architecture in common",
                names.join(", ")
            );
        }
        let mut builds = Vec::new();
        let mut kernel_sources = std::collections::HashMap::new();
        for &number in &archs {
            let arch = format!("sm_{number}");
            let ptx: Vec<ptx_link::Unit<'_>> = units
                .iter()
                .map(|u| ptx_link::Unit {
                    name: &u.source,
                    ptx: u
                        .archs
                        .iter()
                        .find(|a| a.arch == number)
                        .map_or("", |a| a.ptx.as_str()),
                })
                .collect();
            let linked = ptx_link::link(&ptx).with_context(|| format!("device link for {arch}"))?;
            for (kernel, unit) in &linked.kernel_units {
                kernel_sources.insert(kernel.clone(), PathBuf::from(&units[*unit].source));
            }
            let original = dir.join(format!("cuda_flux_device_link.{arch}.ptx"));
            std::fs::write(&original, &linked.ptx)
                .with_context(|| format!("cannot write {}", original.display()))?;
            builds.push(self.instrument_ptx(
                Path::new("device link"),
                "cuda_flux_device_link",
                &arch,
                original,
                linked.ptx,
            )?);
        }
        let image = match self.target {
            Target::Gpu => self.fat_binary("cuda_flux_device_link", &builds)?,
            Target::Cpu => self.cpu_image("cuda_flux_device_link", &builds)?,
        };
        let registrations = self.registrations(
            &|kernel: &str| {
                kernel_sources
                    .get(kernel)
                    .cloned()
                    .unwrap_or_else(|| PathBuf::from("device link"))
            },
            &builds,
        )?;
        let linked_list = dir.join("cuda_flux_device_link.linked");
        std::fs::write(&linked_list, rdc::encode_linked(module_ids))
            .with_context(|| format!("cannot write {}", linked_list.display()))?;
        let kernels: Vec<rdc::LinkedKernel> = registrations
            .into_iter()
            .map(|r| rdc::LinkedKernel {
                name: r.kernel,
                clone: r.clone,
                snapshots: r.snapshots,
            })
            .collect();
        let source = dir.join("cuda_flux_device_link.c");
        std::fs::write(
            &source,
            rdc::link_object_source(
                &image,
                self.target == Target::Gpu,
                &linked_list,
                module_ids,
                &kernels,
            ),
        )
        .with_context(|| format!("cannot write {}", source.display()))?;
        let compiled = dir.join("cuda_flux_device_link.part.o");
        let mut command = Command::new(&self.tools.clang);
        command
            .args(["-x", "c", "-O1", "-fPIC", "-w", "-c"])
            .arg(&source)
            .arg("-o")
            .arg(&compiled);
        self.run(&mut command)?;
        self.merge_carried(&[compiled], output)
    }

    /// Takes the force-included prelude out of the dependency file that `-MD`/`-MMD` wrote
    /// (`-MF`): it lives in the driver's work directory, which is gone (or the user's keep
    /// directory, which may be) by the next `make`, and a prerequisite that no longer exists
    /// stops make with "No rule to make target".
    fn scrub_dependency_file(&self) -> Result<()> {
        let Some(prelude) = &self.prelude else {
            return Ok(());
        };
        let Some(path) = self
            .args
            .flags
            .iter()
            .position(|f| f == "-MF")
            .and_then(|i| self.args.flags.get(i + 1))
            .map(PathBuf::from)
        else {
            return Ok(());
        };
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(()); // nothing written (a dry run, or no CUDA source compiled)
        };
        let scrubbed = without_dependency(&text, &prelude.to_string_lossy());
        if scrubbed != text {
            // Written beside it and renamed, so that the file is never left half written.
            let partial = path.with_extension("d.cuda-flux-partial");
            std::fs::write(&partial, scrubbed)
                .and_then(|()| std::fs::rename(&partial, &path))
                .with_context(|| format!("cannot rewrite {}", path.display()))?;
        }
        Ok(())
    }

    fn compile_cuda(&self, index: usize, source: &Path, object: &Path) -> Result<()> {
        let stem = format!(
            "{index}-{}",
            source.file_stem().unwrap_or_default().to_string_lossy()
        );
        let dir = self.work.path();
        let mut builds = Vec::new();
        for arch in &self.args.archs {
            builds.push(self.build_arch(source, &stem, arch)?);
        }

        let fatbin = match self.target {
            Target::Gpu => self.fat_binary(&stem, &builds)?,
            Target::Cpu => self.cpu_image(&stem, &builds)?,
        };

        // Host IR with the fat binary embedded.
        let host_ir = dir.join(format!("{stem}.host.bc"));
        let mut command = self.host_compile(&fatbin);
        command.arg("-emit-llvm");
        command.arg(source).arg("-o").arg(&host_ir);
        self.run(&mut command)?;

        let registrations = self.registrations(&|_| source.to_path_buf(), &builds)?;
        let host_object = dir.join(format!("{stem}.host.o"));
        self.verbose(format!(
            "[in process] host pass on {} ({} kernel(s)) -> {}",
            host_ir.display(),
            registrations.len(),
            host_object.display()
        ));
        if self.dry_run {
            return self.merge_carried(std::slice::from_ref(&host_object), object);
        }
        let context = Context::create();
        let outcome = cuda_flux_pass::read_module(&context, &host_ir)
            .map_err(anyhow::Error::from)
            .and_then(|module| {
                let report =
                    cuda_flux_pass::host::instrument_host(&context, &module, &registrations)?;
                if self.work_is_kept() {
                    let _ = module.print_to_file(dir.join(format!("{stem}.host.instrumented.ll")));
                }
                cuda_flux_pass::host::emit_object(&module, &host_object, self.host_opt_level())?;
                Ok(report)
            });
        match outcome {
            Ok(report) => {
                for missing in &report.missing {
                    warn(format!(
                        "{}: kernel '{}' is not registered by the host code; it is not profiled",
                        source.display(),
                        demangle(missing)
                    ));
                }
                self.merge_carried(std::slice::from_ref(&host_object), object)
            }
            Err(error) => {
                // An object that cannot be written is the user's error, not the pass's: say
                // that, instead of a fallback warning that the plain compile then contradicts.
                if let Err(io) = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(object)
                {
                    return Err(io).with_context(|| format!("cannot write {}", object.display()));
                }
                warn(format!(
                    "{}: host pass failed ({}); its kernels run uninstrumented",
                    source.display(),
                    crate::error_line(&error)
                ));
                let mut command = self.host_compile(&fatbin);
                command.arg(source).arg("-o").arg(&host_object);
                self.run(&mut command)?;
                self.merge_carried(std::slice::from_ref(&host_object), object)
            }
        }
    }

    /// The carried part (`carry.rs`) for this run's target, compiled once per run.
    fn carried_object(&self) -> Result<&Path> {
        if let Some(path) = self.carried.get() {
            return Ok(path);
        }
        let dir = self.work.path();
        let runtime_so = self.tools.shared_runtime(self.target);
        let entries = match self.target {
            Target::Gpu => carry::gpu_entry_points(),
            Target::Cpu if self.dry_run => Vec::new(),
            Target::Cpu => carry::cpu_entry_points(&runtime_so).with_context(|| {
                format!(
                    "the CPU target needs the shared CPU runtime {} (build the workspace with \
                     cargo build, or set CUDA_FLUX_CPU_RUNTIME_LIB to the directory's .a)",
                    runtime_so.display()
                )
            })?,
        };
        let source = dir.join("cuda_flux_carried.c");
        let object = dir.join("cuda_flux_carried.o");
        if !self.dry_run {
            std::fs::write(&source, carry::source(self.target, &entries, &runtime_so))
                .with_context(|| format!("cannot write {}", source.display()))?;
        } else {
            self.verbose(format!(
                "[in process] carried part ({} entry points) -> {}",
                entries.len(),
                source.display()
            ));
        }
        let mut command = Command::new(&self.tools.clang);
        command
            .args(["-x", "c", "-O2", "-fPIC", "-w", "-c"])
            .arg(&source)
            .arg("-o")
            .arg(&object);
        self.run(&mut command)?;
        Ok(self.carried.get_or_init(|| object))
    }

    /// Writes `object`: `parts` (the host object, and what else the unit keeps) with the carried
    /// part merged in (`ld -r`), so that the object links and finds the runtime under any final
    /// link.
    fn merge_carried(&self, parts: &[PathBuf], object: &Path) -> Result<()> {
        let carried = self.carried_object()?.to_path_buf();
        let first = parts.first().context("nothing to merge")?;
        let merged = first.with_extension("merged.o");
        let mut command = Command::new(&self.tools.clang);
        command
            .args(["-r", "-nostdlib"])
            .args(parts)
            .arg(carried)
            .arg("-o")
            .arg(&merged);
        self.run(&mut command)?;
        if self.dry_run {
            println!(
                "cp {} {}",
                quote(&merged.to_string_lossy()),
                quote(&object.to_string_lossy())
            );
            return Ok(());
        }
        std::fs::copy(&merged, object)
            .map(|_| ())
            .with_context(|| format!("cannot write {}", object.display()))
    }

    /// Fat binary: SASS and (instrumented) PTX for every architecture.
    fn fat_binary(&self, stem: &str, builds: &[ArchBuild]) -> Result<PathBuf> {
        let fatbin = self.work.path().join(format!("{stem}.fatbin"));
        let mut command = Command::new(&self.tools.fatbinary);
        command.args(["-64", "--create"]).arg(&fatbin);
        for build in builds {
            let number = build.arch.trim_start_matches("sm_");
            command.arg(format!(
                "--image=profile={},file={}",
                build.arch,
                build.cubin.display()
            ));
            command.arg(format!(
                "--image=profile=compute_{number},file={}",
                build.ptx.display()
            ));
        }
        self.run(&mut command)?;
        Ok(fatbin)
    }

    /// The CPU target's stand-in for the fat binary: the (instrumented) PTX of every
    /// architecture, which the CPU runtime hands to the PTX interpreter.
    fn cpu_image(&self, stem: &str, builds: &[ArchBuild]) -> Result<PathBuf> {
        let path = self.work.path().join(format!("{stem}.cpuimage"));
        if self.dry_run {
            self.verbose(format!("[in process] CPU image -> {}", path.display()));
            return Ok(path);
        }
        let images = builds
            .iter()
            .map(|build| {
                let ptx = std::fs::read_to_string(&build.ptx)
                    .with_context(|| format!("cannot read {}", build.ptx.display()))?;
                Ok(ptx_sim::image::ArchPtx {
                    arch: arch_number(&build.arch)?,
                    ptx,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.verbose(format!(
            "[in process] CPU image of {} architecture(s) -> {}",
            images.len(),
            path.display()
        ));
        std::fs::write(&path, ptx_sim::image::encode(&images))
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }

    /// clang compiling a CUDA source's host side to an object, with `fatbin` embedded.
    fn host_compile(&self, fatbin: &Path) -> Command {
        let mut command = self.clang_cuda();
        command.args(["--cuda-host-only", "-c"]);
        command.args(&self.args.host_flags);
        for arch in &self.args.archs {
            command.arg(format!("--cuda-gpu-arch={arch}"));
        }
        command.args(["-Xclang", "-fcuda-include-gpubinary", "-Xclang"]);
        command.arg(fatbin);
        command
    }

    fn work_is_kept(&self) -> bool {
        matches!(self.work, WorkDir::Kept(_))
    }

    fn host_opt_level(&self) -> OptimizationLevel {
        match self.args.opt_level {
            OptLevel::O0 => OptimizationLevel::None,
            OptLevel::O1 => OptimizationLevel::Less,
            OptLevel::O2 => OptimizationLevel::Default,
            OptLevel::O3 => OptimizationLevel::Aggressive,
        }
    }

    fn ptxas(&self, arch: &str, ptx: &Path, cubin: &Path) -> Command {
        self.ptxas_with(arch, ptx, cubin, &[])
    }

    /// [`Driver::ptxas`] with `extra` options before the user's.
    fn ptxas_with(&self, arch: &str, ptx: &Path, cubin: &Path, extra: &[&str]) -> Command {
        let mut command = Command::new(&self.tools.ptxas);
        command.args(extra);
        let level = self.device_opt_level();
        command.args(["-m64", level.flag()]);
        if self.args.debug {
            if level == OptLevel::O0 {
                command.args(["-g", "--dont-merge-basicblocks", "--return-at-end"]);
            } else {
                command.arg("-lineinfo");
            }
        }
        command.args(&self.args.ptxas_flags);
        command
            .args(["--gpu-name", arch, "--output-file"])
            .arg(cubin)
            .arg(ptx);
        command
    }

    fn device_opt_level(&self) -> OptLevel {
        self.args.device_opt_level.unwrap_or(self.args.opt_level)
    }

    fn build_arch(&self, source: &Path, stem: &str, arch: &str) -> Result<ArchBuild> {
        let dir = self.work.path();
        let original = dir.join(format!("{stem}.{arch}.ptx"));
        let mut command = self.clang_cuda();
        command
            .args(["--cuda-device-only", "-S"])
            .arg(format!("--cuda-gpu-arch={arch}"));
        if let Some(level) = self.args.device_opt_level {
            command.arg(level.flag());
        }
        if self.args.verbose && !self.args.nvcc_style {
            // clang's own steps too (`-cc1 ... -target-cpu sm_70`): CMake reads the
            // architecture a compiler builds for by default from them.
            command.arg("-v");
        }
        command.arg(source).arg("-o").arg(&original);
        self.run(&mut command)?;
        let cubin = dir.join(format!("{stem}.{arch}.cubin"));
        if self.dry_run {
            // Nothing to read: show the steps that the PTX would go through.
            let instrumented = dir.join(format!("{stem}.{arch}.instrumented.ptx"));
            self.verbose(format!(
                "[in process] instrument -arch {} {} -> {}",
                virtual_arch(arch),
                original.display(),
                instrumented.display()
            ));
            return self.assembled(arch, instrumented, cubin, Vec::new());
        }

        let text = std::fs::read_to_string(&original)
            .with_context(|| format!("cannot read {}", original.display()))?;
        self.instrument_ptx(source, stem, arch, original, text)
    }

    /// Instruments the PTX `text` (read from `original`) for `arch` and assembles it; what
    /// cannot be instrumented is assembled as it is, and `source` named in the warning.
    fn instrument_ptx(
        &self,
        source: &Path,
        stem: &str,
        arch: &str,
        original: PathBuf,
        text: String,
    ) -> Result<ArchBuild> {
        let dir = self.work.path();
        let cubin = dir.join(format!("{stem}.{arch}.cubin"));
        let mut module = match ptx_lexer::parse(text) {
            Ok(module) => module,
            Err(error) => {
                warn(format!(
                    "{}: cannot parse the PTX for {arch} ({error}); its kernels run uninstrumented",
                    source.display()
                ));
                return self.assembled(arch, original, cubin, Vec::new());
            }
        };
        let mut kernels = if self.cta_counters {
            device_runtime::instrument_module_with(&mut module, self.placement)
        } else {
            device_runtime::instrument_module_with_global_counters(&mut module, self.placement)
        };
        let instrumented = dir.join(format!("{stem}.{arch}.instrumented.ptx"));
        self.verbose(format!(
            "[in process] instrument -arch {} {} -> {} ({} kernel(s), {} with CTA counters)",
            virtual_arch(arch),
            original.display(),
            instrumented.display(),
            kernels.len(),
            kernels.iter().filter(|k| k.cta_counters).count()
        ));
        std::fs::write(&instrumented, module.to_ptx())
            .with_context(|| format!("cannot write {}", instrumented.display()))?;
        if self.target == Target::Cpu {
            // No SASS: the CPU target runs the PTX itself (ptxas checks of the instrumented
            // PTX belong to the GPU target and to the test suite).
            return self.assembled(arch, instrumented, cubin, kernels);
        }
        match self.assemble_instrumented(arch, &mut module, &kernels, &instrumented, &cubin)? {
            Ok(()) => Ok(ArchBuild {
                arch: arch.to_string(),
                cubin,
                ptx: instrumented,
                kernels,
            }),
            Err(stderr) => {
                let reason = format!(
                    "ptxas rejected the instrumented PTX for {arch}: {}",
                    stderr.lines().next().unwrap_or("").trim()
                );
                for kernel in &mut kernels {
                    kernel.clone = None;
                    kernel.note = Some(reason.clone());
                }
                self.assembled(arch, original, cubin, kernels)
            }
        }
    }

    /// Assembles the instrumented `module` (written to `ptx`) for `arch` into `cubin`, each
    /// kernel's clone held to the registers that keep its original's occupancy
    /// (`crate::registers`); returns ptxas's error output when it rejects the PTX. ptxas runs
    /// with `-v` to say what it used; its output is shown only when the user asked for it.
    fn assemble_instrumented(
        &self,
        arch: &str,
        module: &mut ptx_lexer::Module,
        kernels: &[KernelInstrumentation],
        ptx: &Path,
        cubin: &Path,
    ) -> Result<std::result::Result<(), String>> {
        let pairs: Vec<(String, String)> = kernels
            .iter()
            .filter_map(|k| Some((k.kernel.clone(), k.clone.clone()?)))
            .collect();
        let asked_verbose = self
            .args
            .ptxas_flags
            .iter()
            .any(|f| f == "-v" || f == "--verbose");
        let mut spawn_error = None;
        let mut assemble = |module: &ptx_lexer::Module| -> std::result::Result<String, String> {
            std::fs::write(ptx, module.to_ptx())
                .map_err(|e| format!("cannot write {}: {e}", ptx.display()))?;
            let extra: &[&str] = if asked_verbose { &[] } else { &["-v"] };
            let mut command = self.ptxas_with(arch, ptx, cubin, extra);
            self.show(&command);
            match crate::registers::run_ptxas(&mut command) {
                Ok(result) => result.map_err(|(_, errors)| errors),
                Err(error) => {
                    let message = format!("cannot run {}: {error}", self.tools.ptxas.display());
                    spawn_error = Some(message.clone());
                    Err(message)
                }
            }
        };
        let fit = crate::registers::fit_clone_registers(module, &pairs, arch, &mut assemble);
        if let Some(message) = spawn_error {
            bail!(message);
        }
        Ok(fit.map(|fit| {
            for fitted in &fit.fitted {
                self.verbose(format!("{arch}: {fitted}"));
            }
            if asked_verbose {
                eprint!("{}", fit.ptxas_output);
            }
        }))
    }

    /// The build of `ptx` for `arch` as it stands: assembled to `cubin` for the GPU target (the
    /// CPU target runs the PTX itself).
    fn assembled(
        &self,
        arch: &str,
        ptx: PathBuf,
        cubin: PathBuf,
        kernels: Vec<KernelInstrumentation>,
    ) -> Result<ArchBuild> {
        if self.target == Target::Gpu {
            self.run(&mut self.ptxas(arch, &ptx, &cubin))?;
        }
        Ok(ArchBuild {
            arch: arch.to_string(),
            cubin,
            ptx,
            kernels,
        })
    }

    /// One registration per kernel: instrumented only if every architecture instrumented it.
    fn registrations(
        &self,
        source_of: &dyn Fn(&str) -> PathBuf,
        builds: &[ArchBuild],
    ) -> Result<Vec<KernelRegistration>> {
        let mut names: Vec<&str> = Vec::new();
        for build in builds {
            for k in &build.kernels {
                if !names.contains(&k.kernel.as_str()) {
                    names.push(&k.kernel);
                }
            }
        }
        // The PTX each architecture built (its original functions sit unchanged beside the
        // clones), for the snapshots' instruction text and `.loc` lines. Unreadable PTX only
        // costs those optional fields.
        let modules: Vec<Option<ptx_lexer::Module>> = builds
            .iter()
            .map(|b| {
                std::fs::read_to_string(&b.ptx)
                    .ok()
                    .and_then(|text| ptx_lexer::parse(text).ok())
            })
            .collect();
        let mut registrations = Vec::new();
        for name in names {
            let per_arch: Vec<(&ArchBuild, &KernelInstrumentation)> = builds
                .iter()
                .filter_map(|b| b.kernels.iter().find(|k| k.kernel == name).map(|k| (b, k)))
                .collect();
            let everywhere =
                per_arch.len() == builds.len() && per_arch.iter().all(|(_, k)| k.clone.is_some());
            let reason = per_arch
                .iter()
                .find(|(_, k)| k.clone.is_none())
                .and_then(|(_, k)| k.note.clone())
                .or_else(|| {
                    (!everywhere).then(|| "not compiled for every architecture".to_string())
                });
            let demangled = demangle(name);
            let source = source_of(name);
            let source_name = source.to_string_lossy();
            if !everywhere {
                warn(format!(
                    "{}: kernel '{demangled}' is not instrumented: {}",
                    source.display(),
                    reason.as_deref().unwrap_or("unknown reason")
                ));
            } else if let Some(note) = per_arch.iter().find_map(|(_, k)| k.note.as_ref()) {
                warn(format!(
                    "{}: kernel '{demangled}': {note}",
                    source.display()
                ));
            }
            let snapshots = per_arch
                .iter()
                .map(|(build, k)| {
                    let arch = arch_number(&build.arch)?;
                    let mut blocks: Vec<SnapshotBlock> = k
                        .blocks
                        .iter()
                        .map(|b| SnapshotBlock {
                            function: b.function.clone(),
                            label: b.label.clone(),
                            instructions: b.instructions.iter().map(|o| o.to_string()).collect(),
                            ..SnapshotBlock::default()
                        })
                        .collect();
                    let files = builds
                        .iter()
                        .position(|b| std::ptr::eq(b, *build))
                        .and_then(|i| modules[i].as_ref())
                        .map(|module| crate::snapshot_text::describe_blocks(module, &mut blocks))
                        .unwrap_or_default();
                    let snapshot = Snapshot {
                        kernel: name.to_string(),
                        demangled: demangled.clone(),
                        source: source_name.to_string(),
                        arch,
                        instrumented: everywhere,
                        reason: if everywhere { None } else { reason.clone() },
                        params: k.params,
                        blocks,
                        files,
                        entry_from_launch: k.entry_from_launch,
                        launch_counted: k.launch_counted.clone(),
                        copied_counts: k.copied_counts.iter().map(|&(b, from)| [b, from]).collect(),
                        thread_flows: k
                            .thread_flows
                            .iter()
                            .map(|flow| ThreadFlow {
                                block: flow.block,
                                terms: flow.terms.clone(),
                            })
                            .collect(),
                        warp_differences: k
                            .warp_differences
                            .iter()
                            .map(|&(b, branch, sibling)| [b, branch, sibling])
                            .collect(),
                        packed_counts: k.packed_counts.clone(),
                    };
                    Ok(snapshot.to_json()?)
                })
                .collect::<Result<Vec<String>>>()?;
            registrations.push(KernelRegistration {
                kernel: name.to_string(),
                clone: if everywhere {
                    per_arch[0].1.clone.clone()
                } else {
                    None
                },
                snapshots,
            });
        }
        Ok(registrations)
    }

    fn link(&self, objects: &[PathBuf]) -> Result<()> {
        if self.target == Target::Cpu {
            return self.link_cpu(objects);
        }
        if !self.tools.runtime_lib.exists() {
            bail!(
                "the host runtime library is missing at {} (build the workspace with cargo build, \
                 or set CUDA_FLUX_RUNTIME_LIB)",
                self.tools.runtime_lib.display()
            );
        }
        let mut command = self.link_command(objects);
        // The objects' carried stand-ins define the entry points weakly, so nothing would pull
        // the archive's definitions in: its anchor is named instead (`carry.rs`).
        command.arg(format!("-Wl,--undefined={RUNTIME_LINK_ANCHOR}"));
        command.arg(&self.tools.runtime_lib);
        command.args(self.library_dirs().0);
        command.args(["-lcudart_static", "-ldl", "-lrt", "-lpthread"]);
        self.run(&mut command)
    }

    /// clang linking `objects` with the user's flags into the output; the caller adds the
    /// runtime's libraries. The output comes before them, so that what follows `-o` in
    /// `-dryrun`'s link line is what a gcc link of these objects needs (as SHOC reads nvcc's).
    fn link_command(&self, objects: &[PathBuf]) -> Command {
        let mut command = Command::new(&self.tools.clang);
        command.arg("-Qunused-arguments");
        if self.args.verbose && !self.args.nvcc_style {
            // The linker's command line too: build systems read the implicit link directories
            // and libraries from it (CMake's compiler identification of clang). nvcc's `-v`
            // shows the host compiler's link line only, which CMake takes as the link.
            command.arg("-v");
        }
        command.args(objects);
        command.args(&self.args.flags);
        command.args(&self.args.host_flags);
        command.args(&self.args.link_flags);
        command.arg("-o").arg(
            self.args
                .output
                .clone()
                .unwrap_or_else(|| PathBuf::from("a.out")),
        );
        command
    }

    /// The link's library directories: the cudart stand-ins for this target
    /// ([`carry::runtime_link_dir`]), then the real cudart's (GPU). The stand-ins are for the
    /// links build systems make themselves: CMake reads these directories from `-v` (nvcc's
    /// `#$ LIBRARIES=` and its link line, clang's linker line) and passes them to the links it
    /// makes with the C++ compiler, whose `-lcudart_static` / `-lcudart` then link the runtime.
    /// Also whether the stand-ins are among them.
    fn library_dirs(&self) -> (Vec<String>, bool) {
        let mut dirs = Vec::new();
        let mut stand_ins = false;
        if !self.dry_run {
            if let Some(dir) = carry::runtime_link_dir(self.target, &self.tools) {
                dirs.push(format!("-L{}", dir.display()));
                stand_ins = true;
            }
        }
        if self.target == Target::Gpu {
            if let Some(dir) = &self.tools.cudart_dir {
                dirs.push(format!("-L{}", dir.display()));
            }
        }
        (dirs, stand_ins)
    }

    /// The CPU target's link: the shared CPU runtime (CUDA runtime API on the CPU plus the host
    /// runtime) instead of the host runtime and cudart. Named by its absolute path, so that the
    /// program needs no library path to find it; the objects' carried trampolines load the
    /// same library, so every object of a process shares one CPU runtime (`carry.rs`).
    fn link_cpu(&self, objects: &[PathBuf]) -> Result<()> {
        let library = self.tools.shared_runtime(Target::Cpu);
        if !library.exists() {
            bail!(
                "the CPU runtime library is missing at {} (build the workspace with cargo build, \
                 or set CUDA_FLUX_CPU_RUNTIME_LIB to libcpu_runtime.a beside it)",
                library.display()
            );
        }
        let mut command = self.link_command(objects);
        let (dirs, stand_ins) = self.library_dirs();
        command.args(dirs);
        command.arg(library);
        if stand_ins {
            // The stand-in for the static cudart (the CPU runtime again, `library_dirs`),
            // named as nvcc's link names cudart: CMake takes the runtime library a compiler
            // links by default from it, and links it (so, the CPU runtime) into C++
            // executables too. Never the real one, which would hide what the CPU runtime
            // lacks behind cudart's implementation.
            command.arg("-lcudart_static");
        }
        command.args(["-ldl", "-lrt", "-lpthread", "-lm"]);
        match self.try_run_with(&mut command, true)? {
            Ok(()) => Ok(()),
            Err(stderr) => {
                eprint!("{stderr}");
                let missing = unimplemented_cuda_calls(&stderr);
                if !missing.is_empty() {
                    bail!(
                        "the CPU target does not implement {} (see crates/cpu-runtime/README.md)",
                        missing.join(", ")
                    );
                }
                Err(StepFailed(1).into())
            }
        }
    }
}

/// The language clang compiles a host input in: `c` for C, and for the rest C++ but for
/// assembly (`.s`, and `.S` through the preprocessor), which nvcc and clang++ assemble.
fn host_language(input: &args::Input) -> &'static str {
    match (input.kind, input.path.extension().and_then(|e| e.to_str())) {
        (InputKind::C, _) => "c",
        (_, Some("s")) => "assembler",
        (_, Some("S")) => "assembler-with-cpp",
        _ => "c++",
    }
}

/// A unit's `-cuid` (clang's compilation-unit id, from which it names the unit's static kernels
/// and variables and its module id in separable compilation): the same for the device and host
/// compilations of one unit, different for different units (source and object paths).
fn unit_id(source: &Path, object: &Path) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::fs::canonicalize(source)
        .unwrap_or_else(|_| source.to_path_buf())
        .hash(&mut hasher);
    std::path::absolute(object)
        .unwrap_or_else(|_| object.to_path_buf())
        .hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// `-std=c++14`, `-std=gnu++17`...: a C++ dialect, which a C compilation cannot take.
fn is_cxx_dialect(flag: &str) -> bool {
    flag.strip_prefix("-std=")
        .or_else(|| flag.strip_prefix("--std="))
        .is_some_and(|dialect| dialect.contains("++"))
}

/// `compute_70` for `sm_70`: the PTX architecture, in nvcc's notation (`-arch compute_70`,
/// which CMake reads from `-v` for the architectures a compiler builds by default).
fn virtual_arch(arch: &str) -> String {
    format!("compute_{}", arch.trim_start_matches("sm_"))
}

/// `70` for `sm_70` (and `sm_90a`).
fn arch_number(arch: &str) -> Result<u32> {
    arch.trim_start_matches("sm_")
        .trim_end_matches('a')
        .parse()
        .map_err(|_| anyhow!("bad architecture {arch}"))
}

/// CUDA runtime functions a failed link could not find: `undefined reference to `cudaFoo'`.
fn unimplemented_cuda_calls(linker_stderr: &str) -> Vec<String> {
    let mut calls: Vec<String> = linker_stderr
        .lines()
        .filter_map(|line| line.split("undefined reference to ").nth(1))
        .map(|rest| {
            rest.trim_matches(|c| c == '`' || c == '\'' || c == '"')
                .to_string()
        })
        .filter(|name| name.starts_with("cuda") || name.starts_with("__cuda"))
        .collect();
    calls.sort();
    calls.dedup();
    calls
}

/// `text`, a make dependency file, without the prerequisite `path` (as make-escaped by the
/// compiler: `\ ` for a space, `\#`, `$$`), and without the continuation lines it leaves
/// empty.
fn without_dependency(text: &str, path: &str) -> String {
    let escaped = path
        .replace(' ', "\\ ")
        .replace('#', "\\#")
        .replace('$', "$$");
    // The prerequisite as a whole token: after the line's start or a space, before its end or
    // a space (an escaped space inside it is `\ `, never a bare one).
    let remove = |line: &str| -> String {
        let mut kept = String::new();
        let mut rest = line;
        while let Some(at) = rest.find(&escaped) {
            let end = at + escaped.len();
            let starts = at == 0 || rest[..at].ends_with(' ') && !rest[..at].ends_with("\\ ");
            let ends = end == rest.len() || rest[end..].starts_with(' ');
            if starts && ends {
                kept.push_str(rest[..at].trim_end_matches(' '));
                rest = &rest[end..];
            } else {
                kept.push_str(&rest[..end]);
                rest = &rest[end..];
            }
        }
        kept.push_str(rest);
        kept
    };
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let kept = remove(line);
        if kept.trim() == "\\" || (kept.trim().is_empty() && !line.trim().is_empty()) {
            continue; // a continuation line that held only the prerequisite
        }
        lines.push(kept);
    }
    // The last prerequisite gone: no continuation into nothing.
    if let Some(last) = lines.iter_mut().rev().find(|l| !l.trim().is_empty()) {
        if let Some(stripped) = last.trim_end().strip_suffix('\\') {
            *last = stripped.trim_end().to_string();
        }
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_are_on_or_off() {
        for (value, expected) in [("on", true), ("1", true), ("off", false), ("0", false)] {
            assert_eq!(parse_switch(value), Some(expected), "{value}");
        }
        for value in ["yes", "ON", "true", "2", " on"] {
            assert_eq!(parse_switch(value), None, "{value}");
        }
    }

    #[test]
    fn the_prelude_leaves_the_dependency_file_and_nothing_else_does() {
        let prelude = "/tmp/cuda-flux-AbC/cuda_flux_prelude.h";
        // In the middle, on a continuation line of its own.
        let text =
            "main.o: main.cu \\\n  /tmp/cuda-flux-AbC/cuda_flux_prelude.h \\\n  witness.cuh\n";
        assert_eq!(
            without_dependency(text, prelude),
            "main.o: main.cu \\\n  witness.cuh\n"
        );
        // Last.
        let text = "main.o: main.cu \\\n  /tmp/cuda-flux-AbC/cuda_flux_prelude.h\n";
        assert_eq!(without_dependency(text, prelude), "main.o: main.cu\n");
        // On the target's line, with others after it.
        let text = "main.o: /tmp/cuda-flux-AbC/cuda_flux_prelude.h main.cu x.h\n";
        assert_eq!(without_dependency(text, prelude), "main.o: main.cu x.h\n");
        // A path with a space, escaped as make reads it; a longer name that contains it stays.
        let spaced = "/keep dir/cuda_flux_prelude.h";
        let text =
            "a.o: a.cu /keep\\ dir/cuda_flux_prelude.h /keep\\ dir/cuda_flux_prelude.h.bak\n";
        assert_eq!(
            without_dependency(text, spaced),
            "a.o: a.cu /keep\\ dir/cuda_flux_prelude.h.bak\n"
        );
        // No mention: unchanged, byte for byte.
        let text = "a.o: a.cu \\\n  b.h\n";
        assert_eq!(without_dependency(text, prelude), text);
    }

    #[test]
    fn names_unimplemented_cuda_calls_from_linker_errors() {
        let stderr = "/usr/bin/ld: a.o: in function `main':\n\
                      a.cu:(.text+0x1f): undefined reference to `cudaGraphLaunch'\n\
                      a.cu:(.text+0x3f): undefined reference to `cudaGraphLaunch'\n\
                      a.cu:(.text+0x5f): undefined reference to `cublasCreate_v2'\n\
                      clang: error: linker command failed with exit code 1\n";
        assert_eq!(unimplemented_cuda_calls(stderr), ["cudaGraphLaunch"]);
        assert!(unimplemented_cuda_calls("").is_empty());
    }

    #[test]
    fn cxx_dialects_are_recognised() {
        assert!(is_cxx_dialect("-std=c++14") && is_cxx_dialect("-std=gnu++17"));
        assert!(!is_cxx_dialect("-std=c11") && !is_cxx_dialect("-O2"));
    }

    #[test]
    fn architecture_numbers() {
        assert_eq!(arch_number("sm_70").unwrap(), 70);
        assert_eq!(arch_number("sm_90a").unwrap(), 90);
        assert!(arch_number("sm_x").is_err());
    }
}
