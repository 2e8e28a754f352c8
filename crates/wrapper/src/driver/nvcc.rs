//! `cuda-flux-nvcc`: nvcc's command line translated to the instrumenting pipeline, so that
//! Makefiles written for nvcc build instrumented programs by swapping the compiler.
//!
//! Compatibility shims (documented in docs/nvcc.md):
//! - a prelude header (`include/cuda_flux_nvcc.h`) with host `min`/`max` overloads and `<time.h>`;
//! - `-Wno-c++11-narrowing` (nvcc warns about narrowing in brace initialisers, clang errors) and
//!   `-Wno-reserved-user-defined-literal` (`"text"MACRO` reads as a literal then a macro, as with
//!   nvcc, instead of an error);
//! - device code optimised at `-O3` unless `-O`/`-G` says otherwise, as nvcc does;
//! - architectures the toolchain no longer supports map to the oldest supported one, with one note
//!   per build (`once_per_build`);
//! - launch chevrons written with spaces (`<< <`, `>> >`) are joined (`chevrons.rs`);
//! - deprecation warnings come from the host compilation only (`-Xarch_device
//!   -Wno-deprecated-declarations`), once per source as with nvcc, not once per architecture;
//!   `register` is accepted silently (`-Wno-deprecated-register`), as nvcc does in kernels.

use std::hash::Hasher as _;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::args::{is_cudart, DriverArgs, Input, InputKind, OptLevel, Target};
use super::Driver;

/// The compatibility prelude force-included before every CUDA source.
pub const PRELUDE: &str = include_str!("../../include/cuda_flux_nvcc.h");

/// The oldest architecture clang-16 with CUDA 11.8 supports without deprecation warnings.
pub const OLDEST_ARCH: u32 = 50;

/// The architectures the pipeline builds (clang-16 and ptxas 11.8 both accept each; checked
/// one by one), as `--help` and `--list-gpu-code` name them. Older ones are accepted and built
/// as `OLDEST_ARCH`, but not listed: configure scripts (SHOC's) derive a `-gencode` for every
/// `compute_NN` in `nvcc --help`, and each listed one is a device compilation per source.
/// `sm_90a` is missing: clang-16 rejects it.
pub const SUPPORTED_ARCHS: &[u32] = &[50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90];

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvccInvocation {
    /// Build (compile and/or link) with the driver; `notes` go to stderr once per build.
    Build {
        args: Box<DriverArgs>,
        notes: Vec<String>,
        /// `-dryrun`: print the commands, run nothing.
        dry_run: bool,
    },
    /// `--version`.
    Version,
    /// `--help`, `-h`: the text of `help_text`.
    Help,
    /// `--list-gpu-arch` (`compute_XX`, `virtual: true`) or `--list-gpu-code` (`sm_XX`): one
    /// supported architecture per line, as nvcc prints them.
    ListArchs { virtual_archs: bool },
    /// `-E` (to `output`, or stdout) and `-cuda` (to `<source>.cpp.ii`): the host side of each
    /// CUDA source, preprocessed by clang (what nvcc's front end would compile).
    Preprocess {
        args: Box<DriverArgs>,
        output: PreprocessOutput,
    },
    /// `--cuda-flux-prefix=DIR`: write a CUDA-like directory for Makefiles that take the whole
    /// toolkit's location (`CUDA_DIR=DIR`), see `write_prefix`.
    Prefix(PathBuf),
}

/// Where `Preprocess` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreprocessOutput {
    /// `-E`: `-o` or stdout.
    Stdout,
    /// `-cuda`: `<source file name>.cpp.ii` in the current directory, or `-o`.
    CppIi,
}

/// A command line cuda-flux-nvcc cannot honour: one line naming the problem.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum NvccError {
    #[error("unknown option '{0}'")]
    Unknown(String),
    #[error("option '{0}' needs a value")]
    MissingValue(String),
    #[error("'{value}' is not a valid value for {option}")]
    BadValue { option: String, value: String },
    #[error("option '{0}' is not supported by cuda-flux-nvcc ({1})")]
    Unsupported(String, &'static str),
    #[error("no input files")]
    NoInputs,
    #[error(
        "don't know what to do with '{0}' (nvcc's inputs: .cu, .c, .cc, .cpp, .cxx, .o, .a, .so)"
    )]
    UnknownInput(String),
}

/// Options that take no value and do not change the code built, accepted and ignored.
const IGNORED: &[&str] = &[
    "-m64",
    "-Wno-deprecated-gpu-targets",
    "--Wno-deprecated-gpu-targets",
    "-nvlink-options",
    "-res-usage",
    "--resource-usage",
];

/// Host-compiler flags nvcc users pass straight through.
fn is_host_flag(arg: &str) -> bool {
    arg.starts_with("-f")
        || arg.starts_with("-W") && !arg.starts_with("-Wno-deprecated")
        || arg.starts_with("-g") && arg != "-g"
        || arg.starts_with("-march=")
        || arg.starts_with("-mtune=")
        || arg == "-pthread"
        || arg == "-rdynamic"
}

/// What nvcc 11.8 does with an input named without `-x`, by its suffix (checked one by one
/// with `nvcc -dryrun`): `.cu` (and preprocessed `.cup`) is CUDA; `.c` (and `.i`) is C, compiled
/// by the host compiler with `-x c`; `.cc`, `.cpp`, `.cxx` (and `.ii`) are C++, `.s`/`.S`
/// assembled by the host compiler; objects,
/// archives and shared libraries (`.o`, `.a`, `.so`, and `.obj`, `.lib`, `.res`) go to the
/// linker. `.ptx`, `.cubin`, `.fatbin` belong to device-only modes cuda-flux-nvcc does not
/// have; anything else (`.C`, `.cp`, `lib.so.1`, no suffix) nvcc rejects, and so does this.
fn kind_by_suffix(input: &str) -> Result<InputKind, NvccError> {
    let name = input.rsplit('/').next().unwrap_or(input);
    match name.rsplit_once('.').map(|(_, suffix)| suffix) {
        Some("cu" | "cup") => Ok(InputKind::Cuda),
        Some("c" | "i") => Ok(InputKind::C),
        Some("cc" | "cpp" | "cxx" | "ii" | "s" | "S") => Ok(InputKind::Host),
        Some("o" | "a" | "so" | "obj" | "lib" | "res") => Ok(InputKind::Link),
        Some("ptx" | "cubin" | "fatbin") => Err(NvccError::Unsupported(
            input.to_string(),
            "device code inputs need -cubin, -fatbin, -dc or -dlink",
        )),
        _ => Err(NvccError::UnknownInput(input.to_string())),
    }
}

/// `sm_35`, `compute_70`, `sm_90a` -> architecture number (35, 70, 90).
fn arch_number(value: &str) -> Option<u32> {
    let digits = value
        .strip_prefix("sm_")
        .or_else(|| value.strip_prefix("compute_"))?
        .trim_end_matches('a');
    digits.parse().ok()
}

struct Archs {
    list: Vec<String>,
    raised: Vec<String>,
}

impl Archs {
    fn add(&mut self, option: &str, value: &str) -> Result<(), NvccError> {
        for item in value
            .trim_matches(|c| c == '[' || c == ']' || c == '"')
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
        {
            let number = arch_number(item).ok_or_else(|| NvccError::BadValue {
                option: option.to_string(),
                value: item.to_string(),
            })?;
            let number = if number < OLDEST_ARCH {
                self.raised.push(item.to_string());
                OLDEST_ARCH
            } else {
                number
            };
            let suffix = if item.ends_with('a') { "a" } else { "" };
            let arch = format!("sm_{number}{suffix}");
            if !self.list.contains(&arch) {
                self.list.push(arch);
            }
        }
        Ok(())
    }
}

/// nvcc's `--options-file FILE` (`-optf`, also `=FILE`, several files comma-separated): the
/// file's words, split as a shell would, stand where the option stood (CMake writes include
/// directories to one). Files may not name further options files.
fn expand_options_files(args: &[String]) -> Result<Vec<String>, NvccError> {
    let mut expanded = Vec::with_capacity(args.len());
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let files = match arg.as_str() {
            "--options-file" | "-optf" => match iter.next() {
                Some(value) => value.clone(),
                None => return Err(NvccError::MissingValue(arg.clone())),
            },
            _ => match arg
                .strip_prefix("--options-file=")
                .or_else(|| arg.strip_prefix("-optf="))
            {
                Some(value) => value.to_string(),
                None => {
                    expanded.push(arg.clone());
                    continue;
                }
            },
        };
        for file in files.split(',').filter(|f| !f.is_empty()) {
            let text = std::fs::read_to_string(file).map_err(|error| NvccError::BadValue {
                option: "--options-file".into(),
                value: format!("{file} ({error})"),
            })?;
            let words = shlex::split(&text).ok_or_else(|| NvccError::BadValue {
                option: "--options-file".into(),
                value: format!("{file} (unbalanced quotes)"),
            })?;
            expanded.extend(words);
        }
    }
    Ok(expanded)
}

/// Parses nvcc's command line (the arguments after the program name). `extra_archs` is the
/// value of `CUDA_FLUX_ARCH` (comma-separated), added to whatever the command line names.
pub fn parse_nvcc(args: &[String], extra_archs: Option<&str>) -> Result<NvccInvocation, NvccError> {
    let expanded = expand_options_files(args)?;
    let args = expanded.as_slice();
    let mut parsed = DriverArgs::empty();
    let mut archs = Archs {
        list: Vec::new(),
        raised: Vec::new(),
    };
    let mut notes = Vec::new();
    let mut language: Option<InputKind> = None;
    let mut optimisation_given = false;
    // Applies to the whole command line, wherever it stands.
    let forward_unknown = args.iter().any(|arg| {
        matches!(
            arg.as_str(),
            "-forward-unknown-to-host-compiler"
                | "--forward-unknown-to-host-compiler"
                | "-forward-unknown-to-host-linker"
                | "--forward-unknown-to-host-linker"
        )
    });
    let mut dry_run = false;
    let mut preprocess = None;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].clone();
        i += 1;
        // `--option=value` and `-option=value`.
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if arg.starts_with('-') => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || -> Result<String, NvccError> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => {
                    let v = args
                        .get(i)
                        .cloned()
                        .ok_or_else(|| NvccError::MissingValue(name.clone()))?;
                    i += 1;
                    Ok(v)
                }
            }
        };
        match name.as_str() {
            "-o" | "--output-file" => parsed.output = Some(PathBuf::from(value()?)),
            "-c" | "--compile" => parsed.compile_only = true,
            "-dc" | "--device-c" => {
                parsed.compile_only = true;
                parsed.rdc = true;
            }
            "-rdc" | "--relocatable-device-code" => {
                parsed.rdc = match value()?.as_str() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(NvccError::BadValue {
                            option: name.clone(),
                            value: other.to_string(),
                        })
                    }
                }
            }
            "-I" | "--include-path" => parsed.flags.push(format!("-I{}", value()?)),
            "-isystem" | "--system-include" => {
                parsed.flags.push("-isystem".into());
                parsed.flags.push(value()?);
            }
            "-D" | "--define-macro" => parsed.flags.push(format!("-D{}", value()?)),
            "-U" | "--undefine-macro" => parsed.flags.push(format!("-U{}", value()?)),
            "-include" | "--pre-include" => {
                parsed.flags.push("-include".into());
                parsed.flags.push(value()?);
            }
            "-l" | "--library" => {
                let lib = value()?;
                let flag = format!("-l{lib}");
                if !is_cudart(&flag) {
                    parsed.link_flags.push(flag);
                }
            }
            "-L" | "--library-path" => parsed.link_flags.push(format!("-L{}", value()?)),
            "-O" | "--optimize" | "-Xopt" => {
                let level = value()?;
                set_opt(&mut parsed, &name, &level)?;
                optimisation_given = true;
            }
            "-g" | "--debug" => {
                parsed.debug = true;
                parsed.flags.push("-g".into());
            }
            "-G" | "--device-debug" => {
                parsed.debug = true;
                parsed.device_opt_level = Some(OptLevel::O0);
                parsed.flags.push("-g".into());
                optimisation_given = true;
            }
            "-lineinfo" | "--generate-line-info" => {
                parsed.debug = true;
                parsed.flags.push("-gline-tables-only".into());
            }
            "-arch" | "--gpu-architecture" | "-code" | "--gpu-code" => {
                let v = value()?;
                if !matches!(v.as_str(), "all" | "all-major" | "native") {
                    archs.add(&name, &v)?;
                }
            }
            "-gencode" | "--generate-code" => {
                let v = value()?;
                let mut found = false;
                // `arch=compute_70,code=sm_70` or `arch=compute_70,code=[sm_70,compute_70]`.
                for part in split_gencode(&v) {
                    if let Some(list) = part
                        .strip_prefix("arch=")
                        .or_else(|| part.strip_prefix("code="))
                    {
                        archs.add(&name, list)?;
                        found = true;
                    }
                }
                if !found {
                    return Err(NvccError::BadValue {
                        option: name.clone(),
                        value: v,
                    });
                }
            }
            "-use_fast_math" | "--use_fast_math" => parsed.flags.extend(
                [
                    "-fcuda-flush-denormals-to-zero",
                    "-fcuda-approx-transcendentals",
                ]
                .map(String::from),
            ),
            "-ftz" | "--ftz" => {
                if value()? == "true" {
                    parsed.flags.push("-fcuda-flush-denormals-to-zero".into());
                }
            }
            "-prec-div" | "--prec-div" | "-prec-sqrt" | "--prec-sqrt" | "-fmad" | "--fmad" => {
                let _ = value()?; // clang's defaults match nvcc's defaults; a change is noted.
                notes.push(format!("{name} has no clang equivalent and is ignored"));
            }
            "-Xcompiler" | "--compiler-options" => parsed.host_flags.extend(
                value()?
                    .split(',')
                    .filter(|f| !f.is_empty())
                    .map(String::from),
            ),
            "-Xptxas" | "--ptxas-options" => parsed.ptxas_flags.extend(
                value()?
                    .split(',')
                    .filter(|f| !f.is_empty())
                    .map(String::from),
            ),
            "-Xlinker" | "--linker-options" => {
                for option in value()?.split(',').filter(|f| !f.is_empty()) {
                    parsed.link_flags.push(format!("-Wl,{option}"));
                }
            }
            "-ccbin" | "--compiler-bindir" => {
                let _ = value()?;
                notes.push("-ccbin is ignored: cuda-flux compiles host code with clang".into());
            }
            "-std" | "--std" => parsed.flags.push(format!("-std={}", value()?)),
            "-cudart" | "--cudart" => {
                let kind = value()?;
                if kind != "static" {
                    notes.push(format!("-cudart {kind}: cudart is linked statically"));
                }
            }
            "-M" | "--generate-dependencies" => parsed.flags.push("-M".into()),
            "-MD" | "--generate-dependencies-with-compile" => parsed.flags.push("-MD".into()),
            "-MMD" | "--generate-nonsystem-dependencies-with-compile" => {
                parsed.flags.push("-MMD".into())
            }
            "-MF" | "--dependency-output" | "-MT" | "--dependency-target-name" => {
                parsed.flags.push(
                    if name.starts_with("-MT") || name.contains("target") {
                        "-MT"
                    } else {
                        "-MF"
                    }
                    .into(),
                );
                parsed.flags.push(value()?);
            }
            "-x" | "--x" => {
                language = match value()?.as_str() {
                    "cu" | "cuda" => Some(InputKind::Cuda),
                    "c" => Some(InputKind::C),
                    "c++" | "cpp" => Some(InputKind::Host),
                    "none" => None,
                    other => {
                        return Err(NvccError::BadValue {
                            option: name.clone(),
                            value: other.to_string(),
                        })
                    }
                }
            }
            "-w" | "--disable-warnings" => parsed.flags.push("-w".into()),
            "-Wno-deprecated-declarations" | "--Wno-deprecated-declarations" => {
                parsed.flags.push("-Wno-deprecated-declarations".into())
            }
            "--cuda-flux-target" => {
                let target = value()?;
                parsed.target = Some(Target::parse(&target).map_err(|_| NvccError::BadValue {
                    option: name.clone(),
                    value: target,
                })?);
            }
            "-v" | "--verbose" => parsed.verbose = true,
            "-dryrun" | "--dryrun" => dry_run = true,
            "-E" | "--preprocess" => preprocess = Some(PreprocessOutput::Stdout),
            "-cuda" | "--cuda" => preprocess = Some(PreprocessOutput::CppIi),
            "--cuda-flux-prefix" => return Ok(NvccInvocation::Prefix(PathBuf::from(value()?))),
            "-keep" | "--keep" => parsed.keep = Some(PathBuf::from(".")),
            "-keep-dir" | "--keep-dir" => parsed.keep = Some(PathBuf::from(value()?)),
            "--version" | "-V" => return Ok(NvccInvocation::Version),
            "--help" | "-h" => return Ok(NvccInvocation::Help),
            "--list-gpu-arch" | "-arch-ls" => {
                return Ok(NvccInvocation::ListArchs {
                    virtual_archs: true,
                })
            }
            "--list-gpu-code" | "-code-ls" => {
                return Ok(NvccInvocation::ListArchs {
                    virtual_archs: false,
                })
            }
            "-m32" | "--machine" if name == "-m32" || inline.as_deref() == Some("32") => {
                return Err(NvccError::Unsupported(arg, "only 64-bit code is built"))
            }
            "--machine" => {}
            "-dlink" | "--device-link" => parsed.device_link_only = true,
            "-ptx" | "--ptx" | "-cubin" | "--cubin" | "-fatbin" | "--fatbin" | "-lib" | "--lib" => {
                return Err(NvccError::Unsupported(
                    arg,
                    "cuda-flux-nvcc compiles, links and builds objects; use nvcc for this mode",
                ))
            }
            _ if IGNORED.contains(&name.as_str()) => {}
            _ if name.starts_with("-I") && name.len() > 2 => parsed.flags.push(arg.clone()),
            _ if name.starts_with("-D") && name.len() > 2 => parsed.flags.push(arg.clone()),
            _ if name.starts_with("-U") && name.len() > 2 => parsed.flags.push(arg.clone()),
            _ if name.starts_with("-L") && name.len() > 2 => parsed.link_flags.push(arg.clone()),
            _ if name.starts_with("-l") && name.len() > 2 => {
                if !is_cudart(&arg) {
                    parsed.link_flags.push(arg.clone());
                }
            }
            _ if name.starts_with("-O") && name.len() > 2 => {
                set_opt(&mut parsed, "-O", &name[2..])?;
                optimisation_given = true;
            }
            "-forward-unknown-to-host-compiler"
            | "--forward-unknown-to-host-compiler"
            | "-forward-unknown-to-host-linker"
            | "--forward-unknown-to-host-linker" => {}
            _ if is_host_flag(&arg) => parsed.host_flags.push(arg.clone()),
            // nvcc forwards them, as given, to the host compiler (which also links): CMake
            // passes gcc's flags so (`-fPIC`, `-pthread`, `-Wall`).
            _ if forward_unknown && arg.starts_with('-') && arg.len() > 1 => {
                parsed.host_flags.push(arg.clone())
            }
            _ if arg.starts_with('-') => return Err(NvccError::Unknown(arg)),
            _ => parsed.inputs.push(Input {
                kind: match language {
                    Some(kind) => kind,
                    None => kind_by_suffix(&arg)?,
                },
                path: PathBuf::from(arg),
            }),
        }
    }
    if parsed.inputs.is_empty() {
        return Err(NvccError::NoInputs);
    }
    if let Some(extra) = extra_archs.filter(|e| !e.trim().is_empty()) {
        archs.add("CUDA_FLUX_ARCH", extra)?;
    }
    if archs.list.is_empty()
        || archs
            .list
            .iter()
            .all(|a| extra_archs.is_some_and(|e| e.contains(a.as_str())))
    {
        // nvcc's default target, as cuda-flux chooses it: sm_70 (plus CUDA_FLUX_ARCH).
        if !archs.list.contains(&"sm_70".to_string()) {
            archs.list.insert(0, "sm_70".to_string());
        }
    }
    if !archs.raised.is_empty() {
        notes.push(format!(
            "{} not supported by this toolchain; building for sm_{OLDEST_ARCH} instead",
            archs.raised.join(", ")
        ));
    }
    parsed.archs = archs.list;
    name_dependency_output(&mut parsed);
    if !optimisation_given {
        // nvcc optimises device code by default.
        parsed.device_opt_level = Some(OptLevel::O3);
    }
    parsed.flags.extend(
        [
            "-Wno-c++11-narrowing",
            "-Wno-reserved-user-defined-literal",
            // clang parses the whole source again for each architecture, so every warning on
            // host code (`cudaThreadSynchronize` is deprecated...) came once per architecture
            // plus once for the host; nvcc warns once. Deprecation warnings are the bulk of
            // that in old CUDA code: the device compilations leave them to the host one.
            "-Xarch_device",
            "-Wno-deprecated-declarations",
            // `register` in kernels (common in old CUDA code): nvcc's front end drops it
            // silently; clang warns in every compilation (the host one parses kernels too, so
            // it cannot be left to it). gcc's warning for `register` in host code is lost.
            "-Wno-deprecated-register",
        ]
        .map(String::from),
    );
    parsed.prelude = Some(PRELUDE);
    parsed.nvcc_style = true;
    if let Some(output) = preprocess {
        return Ok(NvccInvocation::Preprocess {
            args: Box::new(parsed),
            output,
        });
    }
    Ok(NvccInvocation::Build {
        args: Box::new(parsed),
        notes,
        dry_run,
    })
}

/// `--help`'s options: `(long form and value, short form, what cuda-flux-nvcc does)`, in the
/// layout of nvcc's own help (configure scripts read it; people too).
const HELP_OPTIONS: &[(&str, &str, &str)] = &[
    (
        "--output-file <file>",
        "-o",
        "Name and location of the output file.",
    ),
    (
        "--compile",
        "-c",
        "Compile each input to an object file (basename.o without -o).",
    ),
    (
        "--cuda",
        "-cuda",
        "Write the host side of each .cu input, preprocessed, to <file>.cpp.ii.",
    ),
    (
        "--preprocess",
        "-E",
        "Preprocess the host side of each input to -o or stdout.",
    ),
    (
        "--generate-dependencies",
        "-M",
        "Write make dependencies to stdout.",
    ),
    (
        "--generate-dependencies-with-compile",
        "-MD",
        "Write make dependencies while compiling.",
    ),
    (
        "--generate-nonsystem-dependencies-with-compile",
        "-MMD",
        "As -MD, without system headers.",
    ),
    ("--dependency-output <file>", "-MF", "The dependency file."),
    (
        "--dependency-target-name <target>",
        "-MT",
        "The target named in the dependency file.",
    ),
    ("--include-path <path>,...", "-I", "Include search path."),
    (
        "--system-include <path>",
        "-isystem",
        "System include search path.",
    ),
    (
        "--pre-include <file>",
        "-include",
        "Include the file before each source.",
    ),
    ("--define-macro <def>,...", "-D", "Define a macro."),
    ("--undefine-macro <def>,...", "-U", "Undefine a macro."),
    (
        "--library <library>,...",
        "-l",
        "Link the library (cudart is always linked statically).",
    ),
    ("--library-path <path>,...", "-L", "Library search path."),
    (
        "--optimize <level>",
        "-O",
        "Host and device optimisation (device code is -O3 without it).",
    ),
    ("--debug", "-g", "Debug information for host code."),
    (
        "--device-debug",
        "-G",
        "Debug information for device code; device code at -O0.",
    ),
    (
        "--generate-line-info",
        "-lineinfo",
        "Line information for device code.",
    ),
    (
        "--gpu-architecture <arch>",
        "-arch",
        "GPU architecture to build for (see below).",
    ),
    (
        "--gpu-code <code>,...",
        "-code",
        "GPU architectures to build for (see below).",
    ),
    (
        "--generate-code <specification>",
        "-gencode",
        "arch=compute_XX,code=sm_XX: both build.",
    ),
    (
        "--list-gpu-arch",
        "-arch-ls",
        "List the virtual architectures (compute_XX) and exit.",
    ),
    (
        "--list-gpu-code",
        "-code-ls",
        "List the real architectures (sm_XX) and exit.",
    ),
    (
        "--use_fast_math",
        "-use_fast_math",
        "Flush denormals to zero, fast transcendentals.",
    ),
    ("--ftz <true|false>", "-ftz", "Flush denormals to zero."),
    (
        "--prec-div <true|false>",
        "-prec-div",
        "Ignored, with a note: clang's defaults match nvcc's.",
    ),
    (
        "--prec-sqrt <true|false>",
        "-prec-sqrt",
        "Ignored, with a note: clang's defaults match nvcc's.",
    ),
    (
        "--fmad <true|false>",
        "-fmad",
        "Ignored, with a note: clang's defaults match nvcc's.",
    ),
    (
        "--compiler-options <options>,...",
        "-Xcompiler",
        "Options for host compilations.",
    ),
    (
        "--ptxas-options <options>,...",
        "-Xptxas",
        "Options for ptxas.",
    ),
    (
        "--linker-options <options>,...",
        "-Xlinker",
        "Options for the linker.",
    ),
    (
        "--relocatable-device-code <true|false>",
        "-rdc",
        "Separable compilation: the device link instruments the linked program.",
    ),
    ("--device-c", "-dc", "As -c -rdc=true."),
    (
        "--device-link",
        "-dlink",
        "Device-link -dc objects (and archives) into an object for a host link.",
    ),
    ("--std <standard>", "-std", "C++ dialect."),
    ("--x <cu|c|c++>", "-x", "Language of the following inputs."),
    (
        "--keep",
        "-keep",
        "Keep intermediate files (--keep-dir <dir>: there).",
    ),
    (
        "--keep-dir <dir>",
        "-keep-dir",
        "Keep intermediate files in <dir>.",
    ),
    (
        "--compiler-bindir <dir>",
        "-ccbin",
        "Accepted, no effect: host code is compiled by clang (one note).",
    ),
    (
        "--cudart <static|shared|none>",
        "-cudart",
        "Accepted: cudart is always linked statically (one note otherwise).",
    ),
    ("-Xopt <level>", "", "As --optimize."),
    (
        "--forward-unknown-to-host-compiler",
        "-forward-unknown-to-host-compiler",
        "Options cuda-flux-nvcc does not know go to the host compiler (which also links).",
    ),
    (
        "--forward-unknown-to-host-linker",
        "-forward-unknown-to-host-linker",
        "As --forward-unknown-to-host-compiler.",
    ),
    (
        "--options-file <file>[,<file>]",
        "-optf",
        "Read more options from each file (shell-quoted, one or more per line).",
    ),
    (
        "--machine=<64>",
        "-m64",
        "64-bit code, the only kind built.",
    ),
    (
        "--Wno-deprecated-gpu-targets",
        "-Wno-deprecated-gpu-targets",
        "Accepted, no effect.",
    ),
    ("--resource-usage", "-res-usage", "Accepted, no effect."),
    ("-nvlink-options", "", "Accepted, no effect."),
    (
        "--dryrun",
        "-dryrun",
        "Print the commands of the build; run none.",
    ),
    ("--verbose", "-v", "Print each step."),
    ("--disable-warnings", "-w", "No warnings."),
    (
        "--Wno-deprecated-declarations",
        "-Wno-deprecated-declarations",
        "No deprecation warnings.",
    ),
    ("--version", "-V", "Print the version and exit."),
    ("--help", "-h", "Print this help and exit."),
    (
        "--cuda-flux-prefix=<dir>",
        "",
        "Write a CUDA toolkit directory for Makefiles (CUDA_DIR=dir).",
    ),
    (
        "--cuda-flux-target=<gpu|cpu>",
        "",
        "Where instrumented programs run (default gpu).",
    ),
];

/// `--help`: nvcc's layout (`--long <value>  (-short)`, an indented description), and the
/// architectures as nvcc lists them (`Allowed values for this option: 'compute_50',...`).
/// Only `SUPPORTED_ARCHS` are named, and no other `compute_NN`/`sm_NN` appears anywhere:
/// configure scripts grep the whole text (SHOC: `grep -o "compute_[0-9][0-9]"`).
pub fn help_text() -> String {
    use std::fmt::Write as _;
    let mut text = String::from(
        "Usage  : cuda-flux-nvcc [options] <inputfile>\n\n\
         cuda-flux-nvcc takes nvcc's command line and builds the program with every kernel\n\
         instrumented by cuda-flux (clang 16, CUDA 11.8). Unknown options are an error.\n\
         .cu inputs are CUDA; .c is C, .cc/.cpp/.cxx are C++; .o/.a/.so are linked.\n\n\
         Options\n=======\n\n",
    );
    for (long, short, description) in HELP_OPTIONS {
        let short = if short.is_empty() {
            String::new()
        } else {
            format!("({short})")
        };
        let heading = format!("{long:<48}{short}");
        let _ = writeln!(text, "{}\n        {description}\n", heading.trim_end());
    }
    let names = |prefix: &str| -> Vec<String> {
        SUPPORTED_ARCHS
            .iter()
            .map(|n| format!("'{prefix}_{n}'"))
            .collect()
    };
    let mut allowed = vec!["'all'".to_string(), "'all-major'".to_string()];
    allowed.extend(names("compute"));
    allowed.push("'native'".into());
    allowed.extend(names("sm"));
    let mut code = names("compute");
    code.extend(names("sm"));
    for (option, values, note) in [
        (
            "--gpu-architecture <arch>                       (-arch)",
            allowed,
            "'all', 'all-major' and 'native' build for the default, sm_70.",
        ),
        (
            "--gpu-code <code>,...                           (-code)",
            code,
            "Each compute_XX builds sm_XX (device code is always built for the real GPU).",
        ),
    ] {
        let _ = writeln!(
            text,
            "{option}\n        {note}\n        Older architectures (sm_1x to sm_3x) are \
             built as sm_{OLDEST_ARCH}, with a note."
        );
        // Wrapped as nvcc wraps it: at commas, 80 columns.
        let mut line = String::from("        Allowed values for this option:  ");
        for (i, value) in values.iter().enumerate() {
            let piece = if i + 1 == values.len() {
                format!("{value}.")
            } else {
                format!("{value},")
            };
            if line.len() + piece.len() > 88 {
                let _ = writeln!(text, "{line}");
                line = String::from("        ");
            }
            line.push_str(&piece);
        }
        let _ = writeln!(text, "{line}\n");
    }
    text.push_str(
        "Environment: CUDA_FLUX_ARCH=sm_XX[,...] adds architectures to every build.\n\
         See docs/nvcc.md in cuda-flux for every option and shim.\n",
    );
    text
}

impl Driver {
    /// nvcc's `-E` and `-cuda`: the host side of each CUDA source preprocessed (spaced chevrons
    /// joined, prelude included, as the build would compile it). Host sources are preprocessed
    /// as they are compiled: C++, or C for `.c`. Nothing is instrumented: this output is for reading, or for a compiler check.
    pub fn preprocess(&self, output: &PreprocessOutput) -> anyhow::Result<()> {
        use anyhow::Context as _;
        for input in self
            .args
            .inputs
            .iter()
            .filter(|i| i.kind != InputKind::Link)
        {
            let mut command = if input.kind == InputKind::Cuda {
                let mut command = self.clang_cuda();
                command.arg("--cuda-host-only");
                for arch in &self.args.archs {
                    command.arg(format!("--cuda-gpu-arch={arch}"));
                }
                command
            } else {
                self.host_source_command(input)
            };
            command.arg("-E").arg(&input.path);
            let target = match (output, &self.args.output) {
                (_, Some(path)) => Some(path.clone()),
                (PreprocessOutput::Stdout, None) => None,
                (PreprocessOutput::CppIi, None) => {
                    let name = input.path.file_name().unwrap_or_default().to_string_lossy();
                    Some(PathBuf::from(format!("{name}.cpp.ii")))
                }
            };
            if let Some(target) = target {
                command.arg("-o").arg(target);
            }
            self.run(&mut command)
                .with_context(|| format!("preprocessing {}", input.path.display()))?;
        }
        Ok(())
    }
}

/// A line of a `--cuda-flux-prefix` directory's `bin/nvcc` when it is a script (the CPU
/// target's, the second line), by which the search for the real nvcc tells it apart.
pub const PREFIX_SCRIPT_MARK: &str = "# cuda-flux-nvcc --cuda-flux-prefix";

/// Writes `dir` as a stand-in for a CUDA toolkit directory, for Makefiles that take the
/// toolkit's location rather than the compiler (`CUDA_DIR=dir`, `CUDA_PATH=dir`) and that link
/// with gcc/g++ and `-L$(CUDA_DIR)/lib64 -lcudart` instead of nvcc, for `target`:
/// - `bin/nvcc` is cuda-flux-nvcc (for the CPU target a script running it with
///   `CUDA_FLUX_TARGET=cpu` unless the environment names a target); `bin/ptxas`,
///   `bin/fatbinary` the toolkit's;
/// - `include`, `nvvm` are the toolkit's;
/// - `lib64/libcudart.so`, `libcudart.a`, `libcudart_static.a` are linker scripts: for the GPU
///   target naming the cuda-flux host runtime (its link anchor, so that the archive is
///   extracted although the objects' carried stand-ins define the entry points weakly) and the
///   real static cudart; for the CPU target naming the shared CPU runtime, which replaces
///   cudart. The toolkit's other libraries (`libcu*`, `libnv*`) are linked in as they are;
///   `lib` is `lib64`.
///
/// Idempotent: existing entries are replaced.
pub fn write_prefix(dir: &Path, target: Target) -> anyhow::Result<()> {
    use anyhow::{bail, Context as _};
    use std::os::unix::fs::symlink;
    let tools = super::Toolchain::discover(None)?;
    let exe = std::env::current_exe().context("cannot locate cuda-flux-nvcc")?;
    let link = |target: &Path, at: PathBuf| -> anyhow::Result<()> {
        if at.symlink_metadata().is_ok() {
            std::fs::remove_file(&at)
                .with_context(|| format!("cannot replace {}", at.display()))?;
        }
        symlink(target, &at).with_context(|| format!("cannot create {}", at.display()))
    };
    // A tool given by name is looked up in PATH, as the driver would run it.
    let find = |tool: &Path| -> Option<PathBuf> {
        if tool.components().count() > 1 {
            return Some(tool.to_path_buf());
        }
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    };
    for sub in ["bin", "lib64"] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("cannot create {}", dir.join(sub).display()))?;
    }
    let nvcc = dir.join("bin/nvcc");
    match target {
        Target::Gpu => link(&exe, nvcc)?,
        Target::Cpu => {
            if nvcc.symlink_metadata().is_ok() {
                std::fs::remove_file(&nvcc)
                    .with_context(|| format!("cannot replace {}", nvcc.display()))?;
            }
            let exe_text = exe.to_string_lossy().replace('\'', "'\\''");
            let script = format!(
                "#!/bin/sh\n{PREFIX_SCRIPT_MARK} (CPU target)\n\
                 : \"${{CUDA_FLUX_TARGET:=cpu}}\"\nexport CUDA_FLUX_TARGET\nexec '{exe_text}' \"$@\"\n"
            );
            std::fs::write(&nvcc, script)
                .with_context(|| format!("cannot write {}", nvcc.display()))?;
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", nvcc.display()))?;
        }
    }
    for (name, tool) in [("ptxas", &tools.ptxas), ("fatbinary", &tools.fatbinary)] {
        match find(tool) {
            Some(path) => link(&path, dir.join("bin").join(name))?,
            None => bail!("cannot find {name} (set CUDA_PATH to the CUDA toolkit)"),
        }
    }
    let cuda = tools.cuda_path.clone();
    let include = [
        cuda.as_ref().map(|c| c.join("include")),
        Some(PathBuf::from("/usr/include")),
        Some(PathBuf::from("/usr/local/cuda/include")),
    ]
    .into_iter()
    .flatten()
    .find(|d| d.join("cuda_runtime.h").exists())
    .context("cannot find the CUDA headers (cuda_runtime.h)")?;
    link(&include, dir.join("include"))?;
    if let Some(nvvm) = cuda.map(|c| c.join("nvvm")).filter(|n| n.exists()) {
        link(&nvvm, dir.join("nvvm"))?;
    }
    let cudart_dir = tools
        .cudart_dir
        .clone()
        .context("cannot find libcudart_static.a (set CUDA_PATH to the CUDA toolkit)")?;
    super::carry::write_cudart_scripts(&dir.join("lib64"), target, &tools)?;
    let entries = std::fs::read_dir(&cudart_dir)
        .with_context(|| format!("cannot read {}", cudart_dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if (name.starts_with("libcu") || name.starts_with("libnv"))
            && !name.starts_with("libcudart")
        {
            link(&entry.path(), dir.join("lib64").join(&*name))?;
        }
    }
    link(Path::new("lib64"), dir.join("lib"))
}

/// Build tools whose process stands for one build: every compiler invocation under the same
/// outermost one belongs to the same build.
const BUILD_TOOLS: &[&str] = &["make", "gmake", "gnumake", "bmake", "ninja"];

/// `(command name, parent pid, start time)` of a process, from `/proc/<pid>/stat`.
fn process_stat(pid: u32) -> Option<(String, u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so split at the last ')'.
    let (head, tail) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let fields: Vec<&str> = tail.split_whitespace().collect();
    // After the comm: state is field 3 of stat(5), ppid 4, starttime 22.
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((comm, ppid, start))
}

/// The build this invocation belongs to: the outermost `make` (or ninja) among its ancestors,
/// as `pid-starttime` (the start time tells a reused pid apart). Recursive makes share the
/// top-level one; `make -j` jobs too. `None` outside a build tool: the invocation is the build.
fn build_key() -> Option<String> {
    let (_, mut pid, _) = process_stat(std::process::id())?;
    let mut outermost = None;
    // Bounded: a process tree is shallow, and a malformed /proc must not loop.
    for _ in 0..64 {
        if pid <= 1 {
            break;
        }
        let Some((comm, ppid, start)) = process_stat(pid) else {
            break;
        };
        if BUILD_TOOLS.contains(&comm.as_str()) {
            outermost = Some(format!("{pid}-{start}"));
        }
        pid = ppid;
    }
    outermost
}

/// FNV-1a: a stable name for a note's marker file (std's hasher is not promised stable).
fn fnv(text: &str) -> u64 {
    let mut hasher = Fnv(0xcbf2_9ce4_8422_2325);
    hasher.write(text.as_bytes());
    hasher.finish()
}

struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The notes this invocation should print: each distinct note once per build. A Makefile build
/// runs cuda-flux-nvcc once per source; the same note (e.g. `sm_35` built as `sm_50`) on every
/// line would bury the build's output. Which build: `build_key`. The first invocation of a build
/// to print a note leaves a marker file (created atomically, so parallel jobs print it once) in
/// `$TMPDIR/cuda-flux-nvcc-notes-<uid>/`; markers of builds that have ended are removed then.
/// Whenever that cannot be decided (no /proc, an unwritable directory), the note is printed.
pub fn once_per_build(notes: Vec<String>) -> Vec<String> {
    use std::os::unix::fs::MetadataExt as _;
    if notes.is_empty() {
        return notes;
    }
    let (Some(build), Ok(me)) = (build_key(), std::fs::metadata("/proc/self")) else {
        return notes;
    };
    let dir = std::env::temp_dir().join(format!("cuda-flux-nvcc-notes-{}", me.uid()));
    once_per_build_in(&dir, &build, me.uid(), notes)
}

fn once_per_build_in(dir: &Path, build: &str, uid: u32, notes: Vec<String>) -> Vec<String> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
    // Another user's directory of that name could hide our notes: trust only our own.
    if !std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid) {
        return notes;
    }
    let mut marked = false;
    let kept = notes
        .into_iter()
        .filter(|note| {
            let marker = dir.join(format!("{build}-{:016x}", fnv(note)));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(marker)
            {
                Ok(_) => {
                    marked = true;
                    true
                }
                Err(e) => e.kind() != std::io::ErrorKind::AlreadyExists,
            }
        })
        .collect();
    if marked {
        remove_ended_builds(dir);
    }
    kept
}

/// Removes the markers of builds whose process has ended (or whose pid now names another one).
fn remove_ended_builds(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let mut parts = name.to_str().unwrap_or("").splitn(3, '-');
        let (Some(pid), Some(start)) = (parts.next(), parts.next()) else {
            continue;
        };
        let alive = pid
            .parse()
            .ok()
            .and_then(process_stat)
            .is_some_and(|(_, _, s)| s.to_string() == start);
        if !alive {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `-MD`/`-MMD` with one source compiled to an object: the dependency file and its target as
/// nvcc names them (`obj/x.o` -> `obj/x.d`, target `obj/x.o`). clang would name both after the
/// output of each of its steps, which are the driver's intermediates (`.ptx`, `.bc` in a
/// temporary directory): the file would be lost and its target wrong.
fn name_dependency_output(parsed: &mut DriverArgs) {
    let has = |flags: &[String], names: &[&str]| flags.iter().any(|f| names.contains(&f.as_str()));
    let compiled: Vec<&Input> = parsed
        .inputs
        .iter()
        .filter(|i| i.kind != InputKind::Link)
        .collect();
    if !has(&parsed.flags, &["-MD", "-MMD"]) || !parsed.compile_only || compiled.len() != 1 {
        return;
    }
    let object = parsed.output.clone().unwrap_or_else(|| {
        PathBuf::from(compiled[0].path.file_stem().unwrap_or_default()).with_extension("o")
    });
    if !has(&parsed.flags, &["-MF"]) {
        parsed.flags.push("-MF".into());
        parsed
            .flags
            .push(object.with_extension("d").to_string_lossy().into_owned());
    }
    if !has(&parsed.flags, &["-MT", "-MQ"]) {
        parsed.flags.push("-MT".into());
        parsed.flags.push(object.to_string_lossy().into_owned());
    }
}

fn set_opt(parsed: &mut DriverArgs, option: &str, level: &str) -> Result<(), NvccError> {
    parsed.opt_level = match level {
        "0" => OptLevel::O0,
        "1" => OptLevel::O1,
        "2" => OptLevel::O2,
        "3" => OptLevel::O3,
        _ => {
            return Err(NvccError::BadValue {
                option: option.to_string(),
                value: level.to_string(),
            })
        }
    };
    parsed.flags.push(parsed.opt_level.flag().to_string());
    Ok(())
}

/// Splits `arch=compute_70,code=[sm_70,compute_70]` at the commas outside brackets.
fn split_gencode(value: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in value.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&value[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(line: &str, extra: Option<&str>) -> (DriverArgs, Vec<String>) {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        match parse_nvcc(&args, extra).unwrap() {
            NvccInvocation::Build { args, notes, .. } => (*args, notes),
            other => panic!("not a build: {other:?}"),
        }
    }

    fn error(line: &str) -> NvccError {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        parse_nvcc(&args, None).unwrap_err()
    }

    #[test]
    fn short_and_long_forms() {
        let (a, notes) = build(
            "-O3 -I inc --include-path=inc2 -DX=1 --define-macro Y -Ldir --library-path d2 -lm \
             --library=cufft -lcudart -c --output-file k.o k.cu -Xcompiler -fopenmp,-Wall \
             -Xptxas -v --std=c++14 -m64 -ccbin g++",
            None,
        );
        assert_eq!(a.opt_level, OptLevel::O3);
        assert_eq!(
            a.device_opt_level, None,
            "an explicit -O applies to device code too"
        );
        assert!(a.compile_only);
        assert_eq!(a.output, Some(PathBuf::from("k.o")));
        for flag in ["-O3", "-Iinc", "-Iinc2", "-DX=1", "-DY", "-std=c++14"] {
            assert!(a.flags.contains(&flag.to_string()), "{flag}: {:?}", a.flags);
        }
        assert_eq!(a.link_flags, ["-Ldir", "-Ld2", "-lm", "-lcufft"]);
        assert_eq!(a.host_flags, ["-fopenmp", "-Wall"]);
        assert_eq!(a.ptxas_flags, ["-v"]);
        assert_eq!(a.archs, ["sm_70"]);
        assert!(a.prelude.is_some());
        assert_eq!(notes.len(), 1, "{notes:?}");
    }

    #[test]
    fn architectures_from_every_spelling() {
        let (a, notes) = build(
            "-gencode=arch=compute_70,code=sm_70 -gencode arch=compute_80,code=[sm_80,compute_80] \
             --gpu-architecture=sm_90 -arch=compute_20 -arch sm_13 k.cu",
            None,
        );
        assert_eq!(a.archs, ["sm_70", "sm_80", "sm_90", "sm_50"]);
        assert_eq!(
            notes,
            ["compute_20, sm_13 not supported by this toolchain; building for sm_50 instead"]
        );
        let (a, _) = build("k.cu", Some("sm_90"));
        assert_eq!(
            a.archs,
            ["sm_70", "sm_90"],
            "default sm_70 plus CUDA_FLUX_ARCH"
        );
        let (a, _) = build("-arch=sm_80 k.cu", Some("sm_90"));
        assert_eq!(a.archs, ["sm_80", "sm_90"]);
    }

    #[test]
    fn device_code_is_optimised_by_default_and_debug_turns_it_off() {
        let (a, _) = build("k.cu", None);
        assert_eq!(
            (a.opt_level, a.device_opt_level),
            (OptLevel::O0, Some(OptLevel::O3))
        );
        let (a, _) = build("-G k.cu", None);
        assert_eq!(a.device_opt_level, Some(OptLevel::O0));
        assert!(a.debug);
    }

    #[test]
    fn inputs_and_rdc() {
        let (a, _) = build("-dc a.cu b.cpp c.c d.o -x cu e.txt", None);
        assert!(a.rdc && a.compile_only);
        let kinds: Vec<InputKind> = a.inputs.iter().map(|i| i.kind).collect();
        assert_eq!(
            kinds,
            [
                InputKind::Cuda,
                InputKind::Host,
                InputKind::C,
                InputKind::Link,
                InputKind::Cuda
            ]
        );
        // nvcc's suffixes: `.c`/`.i` C, `.cc`/`.cpp`/`.cxx`/`.ii` C++, libraries linked; `-x`
        // names the language of the inputs after it.
        let (a, _) = build(
            "a.cc b.cxx c.ii d.i e.a f.so g.obj -x c h.cpp -x c++ i.c -x none j.s",
            None,
        );
        let kinds: Vec<InputKind> = a.inputs.iter().map(|i| i.kind).collect();
        assert_eq!(
            kinds,
            [
                InputKind::Host,
                InputKind::Host,
                InputKind::Host,
                InputKind::C,
                InputKind::Link,
                InputKind::Link,
                InputKind::Link,
                InputKind::C,
                InputKind::Host,
                InputKind::Host
            ]
        );
        // What nvcc rejects ("Don't know what to do with"), and device code inputs.
        for input in [
            "x.C",
            "x.cp",
            "x.c++",
            "libz.so.1",
            "noext",
            "dir.d/noext",
            "x.txt",
        ] {
            assert_eq!(
                error(&format!("k.cu {input}")),
                NvccError::UnknownInput(input.into()),
                "{input}"
            );
        }
        for input in ["x.ptx", "x.cubin", "x.fatbin"] {
            assert!(
                matches!(error(input), NvccError::Unsupported(..)),
                "{input}"
            );
        }
        let (a, _) = build("-rdc=true a.cu", None);
        assert!(a.rdc);
    }

    #[test]
    fn dependency_files_are_named_as_nvcc_names_them() {
        let flag_pairs = |a: &DriverArgs| {
            let f = &a.flags;
            let after = |name: &str| f.iter().position(|x| x == name).map(|i| f[i + 1].clone());
            (after("-MF"), after("-MT"))
        };
        let (a, _) = build("-MD -c k.cu -o obj/k.o", None);
        assert_eq!(
            flag_pairs(&a),
            (Some("obj/k.d".into()), Some("obj/k.o".into()))
        );
        let (a, _) = build("-MMD -c src/k.cu", None);
        assert_eq!(flag_pairs(&a), (Some("k.d".into()), Some("k.o".into())));
        let (a, _) = build("-MD -MF deps/k.dep -MT tgt -c k.cu -o k.o", None);
        assert_eq!(
            flag_pairs(&a),
            (Some("deps/k.dep".into()), Some("tgt".into()))
        );
    }

    #[test]
    fn preprocessing_and_prefix() {
        let parse = |line: &str| {
            let args: Vec<String> = line.split_whitespace().map(String::from).collect();
            parse_nvcc(&args, None).unwrap()
        };
        assert!(matches!(
            parse("-cuda k.cu"),
            NvccInvocation::Preprocess {
                output: PreprocessOutput::CppIi,
                ..
            }
        ));
        assert!(matches!(
            parse("-E -DX k.cu"),
            NvccInvocation::Preprocess {
                output: PreprocessOutput::Stdout,
                ..
            }
        ));
        assert_eq!(
            parse("--cuda-flux-prefix=/opt/cf"),
            NvccInvocation::Prefix(PathBuf::from("/opt/cf"))
        );
    }

    #[test]
    fn dryrun_is_a_build_that_runs_nothing() {
        let args: Vec<String> = ["-dryrun", "-c", "k.cu"].map(String::from).to_vec();
        assert!(matches!(
            parse_nvcc(&args, None),
            Ok(NvccInvocation::Build { dry_run: true, .. })
        ));
        let args: Vec<String> = ["--dryrun", "k.cu"].map(String::from).to_vec();
        assert!(matches!(
            parse_nvcc(&args, None),
            Ok(NvccInvocation::Build { dry_run: true, .. })
        ));
    }

    #[test]
    fn notes_once_per_build() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let markers = dir.path().join("notes");
        let uid = std::fs::metadata("/proc/self").unwrap().uid();
        // This test process stands for a live build; pid 1's start time is not 12345.
        let (_, _, start) = process_stat(std::process::id()).unwrap();
        let build = format!("{}-{start}", std::process::id());
        let notes = || vec!["a".to_string(), "b".to_string()];
        assert_eq!(once_per_build_in(&markers, &build, uid, notes()), notes());
        assert!(once_per_build_in(&markers, &build, uid, notes()).is_empty());
        assert_eq!(
            once_per_build_in(&markers, &build, uid, vec!["c".into(), "a".into()]),
            ["c"]
        );
        // Another build sees them again; the first build's markers stay while it runs, an
        // ended build's go.
        std::fs::write(markers.join("1-12345-0000000000000000"), "").unwrap();
        assert_eq!(once_per_build_in(&markers, "1-1", uid, notes()), notes());
        assert!(!markers.join("1-12345-0000000000000000").exists());
        assert!(once_per_build_in(&markers, &build, uid, notes()).is_empty());
        // A directory that is not ours: every note is printed.
        assert_eq!(
            once_per_build_in(&markers, &build, uid + 1, notes()),
            notes()
        );
    }

    #[test]
    fn help_names_only_the_supported_architectures() {
        for option in ["--help", "-h"] {
            assert_eq!(
                parse_nvcc(&[option.to_string()], None),
                Ok(NvccInvocation::Help)
            );
        }
        let text = help_text();
        // What SHOC's configure does: every `compute_NN` anywhere in the text.
        let mut found: Vec<u32> = text
            .match_indices("compute_")
            .filter_map(|(at, _)| text.get(at + 8..at + 10)?.parse().ok())
            .collect();
        found.sort_unstable();
        found.dedup();
        assert_eq!(found, SUPPORTED_ARCHS);
        for arch in SUPPORTED_ARCHS {
            assert!(text.contains(&format!("'sm_{arch}'")), "sm_{arch}");
        }
        assert!(text.contains("(-gencode)") && text.contains("(-Xcompiler)"));
        assert!(text.lines().all(|l| l.len() <= 100 && !l.ends_with(' ')));
    }

    #[test]
    fn deprecation_warnings_come_from_the_host_compilation_only() {
        let (a, _) = build("-c k.cu", None);
        let at = a.flags.iter().position(|f| f == "-Xarch_device").unwrap();
        assert_eq!(a.flags[at + 1], "-Wno-deprecated-declarations");
        let count = |a: &DriverArgs| {
            a.flags
                .iter()
                .filter(|f| *f == "-Wno-deprecated-declarations")
                .count()
        };
        assert_eq!(count(&a), 1, "not for the host compilation: {:?}", a.flags);
        // nvcc's own option silences them everywhere.
        let (a, _) = build("-Wno-deprecated-declarations -c k.cu", None);
        assert_eq!(a.flags[0], "-Wno-deprecated-declarations");
        assert_eq!(count(&a), 2);
    }

    #[test]
    fn bad_command_lines_name_the_problem() {
        assert_eq!(
            error("--frobnicate k.cu"),
            NvccError::Unknown("--frobnicate".into())
        );
        assert_eq!(error("-o"), NvccError::MissingValue("-o".into()));
        assert_eq!(
            error("-O7 k.cu"),
            NvccError::BadValue {
                option: "-O".into(),
                value: "7".into()
            }
        );
        assert_eq!(
            error("-arch=gfx90a k.cu"),
            NvccError::BadValue {
                option: "-arch".into(),
                value: "gfx90a".into()
            }
        );
        assert!(matches!(error("-ptx k.cu"), NvccError::Unsupported(..)));
        assert!(matches!(error("-m32 k.cu"), NvccError::Unsupported(..)));
        assert_eq!(error("-c"), NvccError::NoInputs);
        assert!(matches!(
            parse_nvcc(&["--version".to_string()], None),
            Ok(NvccInvocation::Version)
        ));
    }

    #[test]
    fn options_files_and_forwarded_host_flags() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("includes_CUDA.rsp");
        std::fs::write(&file, "-I\"/a b/inc\" -I/c -DX='1 2'\n").unwrap();
        let args: Vec<String> = [
            "-forward-unknown-to-host-compiler",
            "--options-file",
            file.to_str().unwrap(),
            "-fno-strict-aliasing",
            "-c",
            "k.cu",
        ]
        .map(String::from)
        .to_vec();
        let NvccInvocation::Build { args: parsed, .. } = parse_nvcc(&args, None).unwrap() else {
            panic!("a build");
        };
        for flag in ["-I/a b/inc", "-I/c", "-DX=1 2"] {
            assert!(
                parsed.flags.iter().any(|f| f == flag),
                "{flag}: {:?}",
                parsed.flags
            );
        }
        assert!(parsed
            .host_flags
            .iter()
            .any(|f| f == "-fno-strict-aliasing"));
        // Without forwarding, an unknown option is an error; with it, a host flag.
        let unknown: Vec<String> = ["--bogus-option", "-c", "k.cu"].map(String::from).to_vec();
        assert!(parse_nvcc(&unknown, None).is_err());
        let forwarded: Vec<String> = [
            "-c",
            "k.cu",
            "--bogus-option",
            "--forward-unknown-to-host-compiler",
        ]
        .map(String::from)
        .to_vec();
        let NvccInvocation::Build { args: parsed, .. } = parse_nvcc(&forwarded, None).unwrap()
        else {
            panic!("a build");
        };
        assert!(parsed.host_flags.iter().any(|f| f == "--bogus-option"));
        let missing: Vec<String> = ["--options-file", "/no/such.rsp", "k.cu"]
            .map(String::from)
            .to_vec();
        assert!(parse_nvcc(&missing, None).is_err());
    }
}
