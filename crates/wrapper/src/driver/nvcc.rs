//! `cuda-flux-nvcc`: nvcc's command line translated to the instrumenting pipeline, so that
//! Makefiles written for nvcc build instrumented programs by swapping the compiler.
//!
//! Compatibility shims (documented in docs/nvcc.md):
//! - a prelude header (`include/cuda_flux_nvcc.h`) with host `min`/`max` overloads and `<time.h>`;
//! - `-Wno-c++11-narrowing` (nvcc warns about narrowing in brace initialisers, clang errors) and
//!   `-Wno-reserved-user-defined-literal` (`"text"MACRO` reads as a literal then a macro, as with
//!   nvcc, instead of an error);
//! - device code optimised at `-O3` unless `-O`/`-G` says otherwise, as nvcc does;
//! - architectures the toolchain no longer supports map to the oldest supported one, with one note.

use std::path::PathBuf;

use thiserror::Error;

use super::args::{is_cudart, DriverArgs, Input, InputKind, OptLevel, Target};

/// The compatibility prelude force-included before every CUDA source.
pub const PRELUDE: &str = include_str!("../../include/cuda_flux_nvcc.h");

/// The oldest architecture clang-16 with CUDA 11.8 supports without deprecation warnings.
pub const OLDEST_ARCH: u32 = 50;

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvccInvocation {
    /// Build (compile and/or link) with the driver; `notes` go to stderr once.
    Build {
        args: Box<DriverArgs>,
        notes: Vec<String>,
    },
    /// `--version`.
    Version,
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
}

/// Options that take no value and do not change the code built, accepted and ignored.
const IGNORED: &[&str] = &[
    "-m64",
    "-Wno-deprecated-gpu-targets",
    "--Wno-deprecated-gpu-targets",
    "-Wno-deprecated-declarations",
    "--Wno-deprecated-declarations",
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

/// Parses nvcc's command line (the arguments after the program name). `extra_archs` is the
/// value of `CUDA_FLUX_ARCH` (comma-separated), added to whatever the command line names.
pub fn parse_nvcc(args: &[String], extra_archs: Option<&str>) -> Result<NvccInvocation, NvccError> {
    let mut parsed = DriverArgs::empty();
    let mut archs = Archs {
        list: Vec::new(),
        raised: Vec::new(),
    };
    let mut notes = Vec::new();
    let mut language: Option<InputKind> = None;
    let mut optimisation_given = false;
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
                    "c" | "c++" | "cpp" => Some(InputKind::Host),
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
            "--cuda-flux-target" => {
                let target = value()?;
                parsed.target = Some(Target::parse(&target).map_err(|_| NvccError::BadValue {
                    option: name.clone(),
                    value: target,
                })?);
            }
            "-v" | "--verbose" => parsed.verbose = true,
            "-keep" | "--keep" => parsed.keep = Some(PathBuf::from(".")),
            "-keep-dir" | "--keep-dir" => parsed.keep = Some(PathBuf::from(value()?)),
            "--version" | "-V" => return Ok(NvccInvocation::Version),
            "-m32" | "--machine" if name == "-m32" || inline.as_deref() == Some("32") => {
                return Err(NvccError::Unsupported(arg, "only 64-bit code is built"))
            }
            "--machine" => {}
            "-cuda" | "--cuda" | "-ptx" | "--ptx" | "-cubin" | "--cubin" | "-fatbin"
            | "--fatbin" | "-E" | "--preprocess" | "-dryrun" | "--dryrun" | "-lib" | "--lib"
            | "-dlink" | "--device-link" => {
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
            _ if is_host_flag(&arg) => parsed.host_flags.push(arg.clone()),
            _ if arg.starts_with('-') => return Err(NvccError::Unknown(arg)),
            _ => parsed.inputs.push(Input {
                kind: language.unwrap_or_else(|| match arg.rsplit_once('.').map(|(_, e)| e) {
                    Some("cu") => InputKind::Cuda,
                    Some("c" | "cc" | "cpp" | "cxx" | "C") => InputKind::Host,
                    _ => InputKind::Link,
                }),
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
    if !optimisation_given {
        // nvcc optimises device code by default.
        parsed.device_opt_level = Some(OptLevel::O3);
    }
    parsed
        .flags
        .extend(["-Wno-c++11-narrowing", "-Wno-reserved-user-defined-literal"].map(String::from));
    parsed.prelude = Some(PRELUDE);
    Ok(NvccInvocation::Build {
        args: Box::new(parsed),
        notes,
    })
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
            NvccInvocation::Build { args, notes } => (*args, notes),
            NvccInvocation::Version => panic!("not a build"),
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
                InputKind::Host,
                InputKind::Link,
                InputKind::Cuda
            ]
        );
        let (a, _) = build("-rdc=true a.cu", None);
        assert!(a.rdc);
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
}
