//! nvcc's command line read into the driver's arguments.

use std::path::PathBuf;

use super::options::{self, Flag};
use super::{NvccError, NvccInvocation, PreprocessOutput, OLDEST_ARCH, PRELUDE};
use crate::driver::args::{is_cudart, DriverArgs, Input, InputKind, OptLevel, Target};

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
        let (name, inline) = arg.split_once('=').unwrap_or((arg, ""));
        let is_options_file = options::find(name, name)
            .is_some_and(|(option, glued)| option.flag == Flag::OptionsFile && glued.is_none());
        let files = match (is_options_file, arg.contains('=')) {
            (false, _) => {
                expanded.push(arg.clone());
                continue;
            }
            (true, true) => inline.to_string(),
            (true, false) => match iter.next() {
                Some(value) => value.clone(),
                None => return Err(NvccError::MissingValue(arg.clone())),
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
        options::find(arg, arg).is_some_and(|(option, _)| {
            matches!(
                option.flag,
                Flag::ForwardUnknownToHostCompiler | Flag::ForwardUnknownToHostLinker
            )
        })
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
        let Some((option, glued)) = options::find(&name, &arg) else {
            match () {
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
            continue;
        };
        let name = if glued.is_some() {
            option.short.unwrap_or(option.long).to_string()
        } else {
            name
        };
        let mut value = || -> Result<String, NvccError> {
            match glued.as_ref().or(inline.as_ref()) {
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
        let bad_value = |value: &str| NvccError::BadValue {
            option: name.clone(),
            value: value.to_string(),
        };
        match option.flag {
            Flag::Output => parsed.output = Some(PathBuf::from(value()?)),
            Flag::Compile => parsed.compile_only = true,
            Flag::DeviceC => {
                parsed.compile_only = true;
                parsed.rdc = true;
            }
            Flag::RelocatableDeviceCode => {
                parsed.rdc = match value()?.as_str() {
                    "true" => true,
                    "false" => false,
                    other => return Err(bad_value(other)),
                }
            }
            Flag::IncludePath => parsed.flags.push(format!("-I{}", value()?)),
            Flag::SystemInclude => {
                parsed.flags.push("-isystem".into());
                parsed.flags.push(value()?);
            }
            Flag::DefineMacro => parsed.flags.push(format!("-D{}", value()?)),
            Flag::UndefineMacro => parsed.flags.push(format!("-U{}", value()?)),
            Flag::PreInclude => {
                parsed.flags.push("-include".into());
                parsed.flags.push(value()?);
            }
            Flag::Library => {
                let flag = format!("-l{}", value()?);
                if !is_cudart(&flag) {
                    parsed.link_flags.push(flag);
                }
            }
            Flag::LibraryPath => parsed.link_flags.push(format!("-L{}", value()?)),
            Flag::Optimize | Flag::Xopt => {
                let level = value()?;
                set_opt(&mut parsed, &name, &level)?;
                optimisation_given = true;
            }
            Flag::Debug => {
                parsed.debug = true;
                parsed.flags.push("-g".into());
            }
            Flag::DeviceDebug => {
                parsed.debug = true;
                parsed.device_opt_level = Some(OptLevel::O0);
                parsed.flags.push("-g".into());
                optimisation_given = true;
            }
            Flag::LineInfo => {
                parsed.debug = true;
                parsed.flags.push("-gline-tables-only".into());
            }
            Flag::GpuArchitecture | Flag::GpuCode => {
                let v = value()?;
                if !matches!(v.as_str(), "all" | "all-major" | "native") {
                    archs.add(&name, &v)?;
                }
            }
            Flag::GenerateCode => {
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
                    return Err(bad_value(&v));
                }
            }
            Flag::UseFastMath => parsed.flags.extend(
                [
                    "-fcuda-flush-denormals-to-zero",
                    "-fcuda-approx-transcendentals",
                ]
                .map(String::from),
            ),
            Flag::Ftz => {
                if value()? == "true" {
                    parsed.flags.push("-fcuda-flush-denormals-to-zero".into());
                }
            }
            Flag::PrecDiv | Flag::PrecSqrt | Flag::Fmad => {
                let _ = value()?; // clang's defaults match nvcc's defaults; a change is noted.
                notes.push(format!("{name} has no clang equivalent and is ignored"));
            }
            Flag::CompilerOptions => parsed.host_flags.extend(
                value()?
                    .split(',')
                    .filter(|f| !f.is_empty())
                    .map(String::from),
            ),
            Flag::PtxasOptions => parsed.ptxas_flags.extend(
                value()?
                    .split(',')
                    .filter(|f| !f.is_empty())
                    .map(String::from),
            ),
            Flag::LinkerOptions => {
                for option in value()?.split(',').filter(|f| !f.is_empty()) {
                    parsed.link_flags.push(format!("-Wl,{option}"));
                }
            }
            Flag::CompilerBindir => {
                let _ = value()?;
                notes.push("-ccbin is ignored: cuda-flux compiles host code with clang".into());
            }
            Flag::Std => parsed.flags.push(format!("-std={}", value()?)),
            Flag::Cudart => {
                let kind = value()?;
                if kind != "static" {
                    notes.push(format!("-cudart {kind}: cudart is linked statically"));
                }
            }
            Flag::Dependencies => parsed.flags.push("-M".into()),
            Flag::DependenciesWithCompile => parsed.flags.push("-MD".into()),
            Flag::NonsystemDependenciesWithCompile => parsed.flags.push("-MMD".into()),
            Flag::DependencyOutput => {
                parsed.flags.push("-MF".into());
                parsed.flags.push(value()?);
            }
            Flag::DependencyTarget => {
                parsed.flags.push("-MT".into());
                parsed.flags.push(value()?);
            }
            Flag::Language => {
                language = match value()?.as_str() {
                    "cu" | "cuda" => Some(InputKind::Cuda),
                    "c" => Some(InputKind::C),
                    "c++" | "cpp" => Some(InputKind::Host),
                    "none" => None,
                    other => return Err(bad_value(other)),
                }
            }
            Flag::DisableWarnings => parsed.flags.push("-w".into()),
            Flag::NoDeprecatedDeclarations => {
                parsed.flags.push("-Wno-deprecated-declarations".into())
            }
            Flag::CudaFluxTarget => {
                let target = value()?;
                parsed.target = Some(Target::parse(&target).map_err(|_| bad_value(&target))?);
            }
            Flag::Verbose => parsed.verbose = true,
            Flag::DryRun => dry_run = true,
            Flag::Preprocess => preprocess = Some(PreprocessOutput::Stdout),
            Flag::Cuda => preprocess = Some(PreprocessOutput::CppIi),
            Flag::CudaFluxPrefix => return Ok(NvccInvocation::Prefix(PathBuf::from(value()?))),
            Flag::Keep => parsed.keep = Some(PathBuf::from(".")),
            Flag::KeepDir => parsed.keep = Some(PathBuf::from(value()?)),
            Flag::Version => return Ok(NvccInvocation::Version),
            Flag::Help => return Ok(NvccInvocation::Help),
            Flag::ListGpuArch => {
                return Ok(NvccInvocation::ListArchs {
                    virtual_archs: true,
                })
            }
            Flag::ListGpuCode => {
                return Ok(NvccInvocation::ListArchs {
                    virtual_archs: false,
                })
            }
            Flag::Machine => match value()?.as_str() {
                "64" => {}
                "32" => return Err(NvccError::Unsupported(arg, "only 64-bit code is built")),
                other => return Err(bad_value(other)),
            },
            Flag::DeviceLink => parsed.device_link_only = true,
            // cuda-flux-nvcc hands such a command line to nvcc before parsing it.
            Flag::DeviceW => {
                return Err(NvccError::Unsupported(
                    arg,
                    "device code without a host object is built by nvcc, uninstrumented",
                ))
            }
            Flag::Ptx | Flag::Cubin | Flag::Fatbin | Flag::Lib => {
                return Err(NvccError::Unsupported(
                    arg,
                    "cuda-flux-nvcc compiles, links and builds objects; use nvcc for this mode",
                ))
            }
            // Read before the loop (the options files were expanded, forwarding applies to the
            // whole line); the others do not change the code built.
            Flag::OptionsFile
            | Flag::ForwardUnknownToHostCompiler
            | Flag::ForwardUnknownToHostLinker
            | Flag::NoDeprecatedGpuTargets
            | Flag::ResourceUsage
            | Flag::NvlinkOptions => {}
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
