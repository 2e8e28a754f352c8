//! The command line of `cuda-flux-clang`: what `clang++` accepts for CUDA, sorted into inputs,
//! compile flags, link flags and the driver's own options.

use std::path::PathBuf;

use thiserror::Error;

/// A usage error: one line naming the problem.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ArgsError {
    #[error("option '{0}' needs a value")]
    MissingValue(String),
    #[error("unsupported language '{0}' for -x (use cuda, c++, c or none)")]
    Language(String),
    #[error("no input files")]
    NoInputs,
    #[error("-o names one output, but -c was given {0} inputs")]
    OutputWithManyInputs(usize),
    #[error("'{0}' is not a GPU architecture (expected e.g. sm_70)")]
    Arch(String),
    #[error("'{0}' is not a cuda-flux target (expected gpu or cpu)")]
    Target(String),
}

/// Where the built program runs its kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Target {
    /// On a GPU: SASS and PTX in a fat binary, linked with cudart.
    #[default]
    Gpu,
    /// On the CPU: the (instrumented) PTX embedded as a CPU image, linked with cuda-flux's CPU
    /// implementation of the CUDA runtime, which runs kernels in the `ptx-sim` interpreter.
    Cpu,
}

impl Target {
    /// Parses `gpu` or `cpu` (the value of `--cuda-flux-target=` or `CUDA_FLUX_TARGET`).
    pub fn parse(value: &str) -> Result<Self, ArgsError> {
        match value {
            "gpu" => Ok(Target::Gpu),
            "cpu" => Ok(Target::Cpu),
            other => Err(ArgsError::Target(other.to_string())),
        }
    }
}

/// How an input is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// CUDA source: instrumented.
    Cuda,
    /// C++ source (or assembly, `.s`/`.S`): compiled by clang untouched.
    Host,
    /// C source: compiled by clang as C (`-x c`, or a `.c` file given to cuda-flux-nvcc).
    C,
    /// Object, archive, shared library: passed to the linker.
    Link,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub path: PathBuf,
    pub kind: InputKind,
}

/// Optimisation level, as `-O` sets it (clang's default is `-O0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OptLevel {
    O0,
    O1,
    O2,
    O3,
}

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverArgs {
    pub inputs: Vec<Input>,
    pub output: Option<PathBuf>,
    /// `-c`: compile only.
    pub compile_only: bool,
    /// `--cuda-gpu-arch`/`--offload-arch`, in order, without duplicates; `sm_70` when none.
    pub archs: Vec<String>,
    /// `-v`: show every step.
    pub verbose: bool,
    /// `--cuda-flux-keep[=DIR]`: keep intermediates in DIR (the current directory if none).
    pub keep: Option<PathBuf>,
    /// `--cuda-path=`.
    pub cuda_path: Option<PathBuf>,
    /// `-fgpu-rdc` (relocatable device code).
    pub rdc: bool,
    /// Flags for every compilation (and the link, where clang uses them: `-fopenmp`, `-O`, `-g`).
    pub flags: Vec<String>,
    /// Flags only for the link: `-l`, `-L`, `-Wl,`, `-Xlinker`, `-static`, `-shared`...
    pub link_flags: Vec<String>,
    pub opt_level: OptLevel,
    /// `-g` (or `-gline-tables-only` and friends).
    pub debug: bool,
    /// Flags for host compilations and the link only (nvcc's `-Xcompiler`).
    pub host_flags: Vec<String>,
    /// Flags for ptxas (nvcc's `-Xptxas`).
    pub ptxas_flags: Vec<String>,
    /// Optimisation of device code when it differs from `opt_level` (nvcc optimises device code
    /// at `-O3` unless told otherwise, whatever the host level).
    pub device_opt_level: Option<OptLevel>,
    /// A header force-included before every CUDA source (cuda-flux-nvcc's compatibility shims).
    pub prelude: Option<&'static str>,
    /// `--cuda-flux-target=gpu|cpu`; `None` leaves the choice to `CUDA_FLUX_TARGET` (default gpu).
    pub target: Option<Target>,
    /// The command line was nvcc's (cuda-flux-nvcc): `-v` prints nvcc's `#$ ` lines.
    pub nvcc_style: bool,
    /// nvcc's `-dlink`: only the device link of separately compiled objects, into `output`.
    pub device_link_only: bool,
}

/// Options whose value is the next argument when not attached.
const SEPARATE_VALUE: &[&str] = &[
    "-I",
    "-D",
    "-U",
    "-include",
    "-isystem",
    "-iquote",
    "-idirafter",
    "-MF",
    "-MT",
    "-MQ",
    "-Xclang",
    "-imacros",
    "-isysroot",
    "--sysroot",
    "-target",
    "-arch",
];

/// The kind of an input named without `-x`, as clang++ sees it: a `.c` file is C++ to clang++
/// (cuda-flux-nvcc has nvcc's rules instead, `.c` as C).
fn kind_by_extension(path: &str) -> InputKind {
    let extension = path.rsplit_once('.').map_or("", |(_, e)| e);
    match extension {
        "cu" => InputKind::Cuda,
        "c" | "cc" | "cpp" | "cxx" | "C" | "c++" | "cp" | "CPP" | "s" | "S" => InputKind::Host,
        _ => InputKind::Link,
    }
}

fn check_arch(arch: &str) -> Result<String, ArgsError> {
    let digits = arch.strip_prefix("sm_").unwrap_or("");
    let valid = digits.len() >= 2
        && digits
            .bytes()
            .take(digits.len() - 1)
            .all(|b| b.is_ascii_digit())
        && digits
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_digit() || b == b'a');
    if valid {
        Ok(arch.to_string())
    } else {
        Err(ArgsError::Arch(arch.to_string()))
    }
}

/// The input language `-x` names; `None` for `-x none` (by extension again).
fn language_of(name: &str) -> Result<Option<InputKind>, ArgsError> {
    match name {
        "cuda" => Ok(Some(InputKind::Cuda)),
        "c" => Ok(Some(InputKind::C)),
        "c++" => Ok(Some(InputKind::Host)),
        "none" => Ok(None),
        other => Err(ArgsError::Language(other.to_string())),
    }
}

/// `-lcudart` / `-lcudart_static`: dropped, since the driver links cudart statically and a
/// user's `-lcudart` would mix in the shared one.
pub(crate) fn is_cudart(flag: &str) -> bool {
    matches!(flag, "-lcudart" | "-lcudart_static")
}

impl OptLevel {
    /// The flag that sets this level: `-O2`.
    pub fn flag(self) -> &'static str {
        match self {
            OptLevel::O0 => "-O0",
            OptLevel::O1 => "-O1",
            OptLevel::O2 => "-O2",
            OptLevel::O3 => "-O3",
        }
    }
}

impl DriverArgs {
    /// No inputs, no flags, clang's defaults.
    pub fn empty() -> Self {
        DriverArgs {
            inputs: Vec::new(),
            output: None,
            compile_only: false,
            archs: Vec::new(),
            verbose: false,
            nvcc_style: false,
            keep: None,
            cuda_path: None,
            rdc: false,
            flags: Vec::new(),
            link_flags: Vec::new(),
            opt_level: OptLevel::O0,
            debug: false,
            host_flags: Vec::new(),
            ptxas_flags: Vec::new(),
            device_opt_level: None,
            prelude: None,
            target: None,
            device_link_only: false,
        }
    }

    /// Adds a target architecture once, in order of first mention.
    fn add_arch(&mut self, arch: String) {
        if !self.archs.contains(&arch) {
            self.archs.push(arch);
        }
    }

    /// Parses the arguments after the program name.
    pub fn parse(args: &[String]) -> Result<Self, ArgsError> {
        let mut parsed = DriverArgs::empty();
        let mut language: Option<InputKind> = None;
        let mut iter = args.iter();
        let value = |iter: &mut std::slice::Iter<'_, String>, option: &str| {
            iter.next()
                .cloned()
                .ok_or_else(|| ArgsError::MissingValue(option.to_string()))
        };
        while let Some(arg) = iter.next() {
            let a = arg.as_str();
            match a {
                "-c" => parsed.compile_only = true,
                "-v" => parsed.verbose = true,
                "-o" => parsed.output = Some(PathBuf::from(value(&mut iter, "-o")?)),
                "-x" => language = language_of(&value(&mut iter, "-x")?)?,
                "-fgpu-rdc" => parsed.rdc = true,
                "-fno-gpu-rdc" => parsed.rdc = false,
                "--cuda-flux-keep" => parsed.keep = Some(PathBuf::from(".")),
                "--cuda-gpu-arch" | "--offload-arch" => {
                    parsed.add_arch(check_arch(&value(&mut iter, a)?)?)
                }
                "-l" | "-L" | "-Xlinker" | "-z" => {
                    parsed.link_flags.push(arg.clone());
                    parsed.link_flags.push(value(&mut iter, a)?);
                }
                "-static" | "-shared" | "-rdynamic" | "-pie" | "-no-pie" | "-s" => {
                    parsed.link_flags.push(arg.clone())
                }
                _ if a.starts_with("--cuda-flux-target=") => {
                    parsed.target = Some(Target::parse(&a["--cuda-flux-target=".len()..])?);
                }
                _ if a.starts_with("--cuda-flux-keep=") => {
                    parsed.keep = Some(PathBuf::from(&a["--cuda-flux-keep=".len()..]));
                }
                _ if a.starts_with("--cuda-gpu-arch=") || a.starts_with("--offload-arch=") => {
                    parsed.add_arch(check_arch(a.split_once('=').map_or("", |(_, v)| v))?)
                }
                _ if a.starts_with("--cuda-path=") => {
                    parsed.cuda_path = Some(PathBuf::from(&a["--cuda-path=".len()..]));
                }
                _ if a.starts_with("-o") && a.len() > 2 => {
                    parsed.output = Some(PathBuf::from(&a[2..]))
                }
                _ if a.starts_with("-x") && a.len() > 2 => language = language_of(&a[2..])?,
                _ if a.starts_with("-l") || a.starts_with("-L") || a.starts_with("-Wl,") => {
                    if !is_cudart(a) {
                        parsed.link_flags.push(arg.clone());
                    }
                }
                _ if a.starts_with("-O") => {
                    parsed.opt_level = match &a[2..] {
                        "0" => OptLevel::O0,
                        "1" | "g" => OptLevel::O1,
                        "3" | "fast" => OptLevel::O3,
                        _ => OptLevel::O2,
                    };
                    parsed.flags.push(arg.clone());
                }
                _ if a == "-g" || a.starts_with("-g") && !a.starts_with("-g0") => {
                    parsed.debug = true;
                    parsed.flags.push(arg.clone());
                }
                _ if SEPARATE_VALUE.contains(&a) => {
                    parsed.flags.push(arg.clone());
                    parsed.flags.push(value(&mut iter, a)?);
                }
                _ if a.starts_with('-') && a.len() > 1 => parsed.flags.push(arg.clone()),
                _ => parsed.inputs.push(Input {
                    path: PathBuf::from(a),
                    // As with clang, `-x` applies to every following input until `-x none`.
                    kind: language.unwrap_or_else(|| kind_by_extension(a)),
                }),
            }
        }
        if parsed.inputs.is_empty() {
            return Err(ArgsError::NoInputs);
        }
        let compiled = parsed
            .inputs
            .iter()
            .filter(|i| i.kind != InputKind::Link)
            .count();
        if parsed.compile_only && parsed.output.is_some() && compiled > 1 {
            return Err(ArgsError::OutputWithManyInputs(compiled));
        }
        if parsed.archs.is_empty() {
            parsed.archs.push("sm_70".to_string());
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<DriverArgs, ArgsError> {
        DriverArgs::parse(
            &line
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn sorts_inputs_flags_and_link_flags() {
        let a = parse(
            "-O3 -I inc -DX=1 -std=c++17 a.cu b.cpp c.o libd.a --cuda-gpu-arch=sm_90 \
             --cuda-gpu-arch sm_70 --cuda-gpu-arch=sm_90 -lm -L/opt/lib -Wl,-rpath,/x -lcudart -o prog",
        )
        .unwrap();
        let kinds: Vec<InputKind> = a.inputs.iter().map(|i| i.kind).collect();
        assert_eq!(
            kinds,
            [
                InputKind::Cuda,
                InputKind::Host,
                InputKind::Link,
                InputKind::Link
            ]
        );
        assert_eq!(a.archs, ["sm_90", "sm_70"]);
        assert_eq!(a.flags, ["-O3", "-I", "inc", "-DX=1", "-std=c++17"]);
        assert_eq!(a.link_flags, ["-lm", "-L/opt/lib", "-Wl,-rpath,/x"]);
        assert_eq!(a.opt_level, OptLevel::O3);
        assert_eq!(a.output, Some(PathBuf::from("prog")));
        assert!(!a.compile_only);
    }

    #[test]
    fn language_option_applies_to_following_inputs() {
        let a = parse("-x cuda k.cpp -x none m.cpp -c").unwrap();
        assert_eq!(a.inputs[0].kind, InputKind::Cuda);
        assert_eq!(a.inputs[1].kind, InputKind::Host);
        // `-x c` is C; a `.c` file alone is C++ to clang++.
        let a = parse("h.c -x c g.c -x c++ f.c -c").unwrap();
        let kinds: Vec<InputKind> = a.inputs.iter().map(|i| i.kind).collect();
        assert_eq!(kinds, [InputKind::Host, InputKind::C, InputKind::Host]);
        assert_eq!(a.archs, ["sm_70"], "default architecture");
    }

    #[test]
    fn driver_options() {
        let a = parse("--cuda-flux-target=cpu k.cu").unwrap();
        assert_eq!(a.target, Some(Target::Cpu));
        assert_eq!(
            parse("--cuda-flux-target=tpu k.cu"),
            Err(ArgsError::Target("tpu".into()))
        );
        let a = parse("-v --cuda-flux-keep=out -fgpu-rdc -g k.cu").unwrap();
        assert!(a.verbose && a.rdc && a.debug);
        assert_eq!(a.keep, Some(PathBuf::from("out")));
    }

    #[test]
    fn usage_errors_name_the_problem() {
        assert_eq!(
            parse("-o").unwrap_err(),
            ArgsError::MissingValue("-o".into())
        );
        assert_eq!(parse("-c").unwrap_err(), ArgsError::NoInputs);
        assert_eq!(
            parse("-x fortran a.f").unwrap_err(),
            ArgsError::Language("fortran".into())
        );
        assert_eq!(
            parse("-c a.cu b.cu -o x.o").unwrap_err(),
            ArgsError::OutputWithManyInputs(2)
        );
        assert_eq!(
            parse("--cuda-gpu-arch=gfx90a a.cu").unwrap_err(),
            ArgsError::Arch("gfx90a".into())
        );
    }
}
