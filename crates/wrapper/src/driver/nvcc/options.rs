//! cuda-flux-nvcc's options and `--help`.

use super::{OLDEST_ARCH, SUPPORTED_ARCHS};

/// How an option's value may also be written glued to its short spelling (`-Ipath`, `-O3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Glued {
    No,
    /// Any text: `-Ipath`, `-DNAME=1`, `-lm`.
    Any,
    /// Digits only, so that host flags with the same first letter (`-march=`) are not taken:
    /// `-m64`.
    Digits,
}

/// One cuda-flux-nvcc option: its spellings, whether and how it takes a value, and its `--help`
/// line. The only list of options: the parser looks spellings up here and matches on the
/// [`Flag`] (so every option is handled, the compiler checks), `--help` is generated from it,
/// and a test checks that docs/nvcc.md names every spelling.
#[derive(Debug, Clone, Copy)]
pub struct NvccOption {
    pub flag: Flag,
    /// The long spelling (`--output-file`; nvcc's single-dash long forms such as `-Xopt` where
    /// there is no other).
    pub long: &'static str,
    /// The short spelling (`-o`), if any.
    pub short: Option<&'static str>,
    /// The value's placeholder in `--help` (`<file>`); `None` for an option without a value. A
    /// value follows as the next argument, after `=`, or glued (`glued`).
    pub value: Option<&'static str>,
    pub glued: Glued,
    /// What cuda-flux-nvcc does with it; `None` for options it knows only to refuse.
    pub help: Option<&'static str>,
}

impl NvccOption {
    /// The spellings, long first.
    pub fn spellings(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.long).chain(self.short)
    }
}

macro_rules! nvcc_options {
    ($($flag:ident: $long:literal $(, $short:literal)? ; $value:expr, $glued:ident, $help:expr;)*) => {
        /// Every option cuda-flux-nvcc knows, one variant per row of [`OPTIONS`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Flag {
            $($flag,)*
        }

        /// The options, in `--help` order.
        pub const OPTIONS: &[NvccOption] = &[
            $(NvccOption {
                flag: Flag::$flag,
                long: $long,
                short: nvcc_options!(@short $($short)?),
                value: $value,
                glued: Glued::$glued,
                help: $help,
            },)*
        ];
    };
    (@short $short:literal) => { Some($short) };
    (@short) => { None };
}

nvcc_options! {
    Output: "--output-file", "-o"; Some("<file>"), No,
        Some("Name and location of the output file.");
    Compile: "--compile", "-c"; None, No,
        Some("Compile each input to an object file (basename.o without -o).");
    Cuda: "--cuda", "-cuda"; None, No,
        Some("Write the host side of each .cu input, preprocessed, to <file>.cpp.ii.");
    Preprocess: "--preprocess", "-E"; None, No,
        Some("Preprocess the host side of each input to -o or stdout.");
    Dependencies: "--generate-dependencies", "-M"; None, No,
        Some("Write make dependencies to stdout.");
    DependenciesWithCompile: "--generate-dependencies-with-compile", "-MD"; None, No,
        Some("Write make dependencies while compiling.");
    NonsystemDependenciesWithCompile: "--generate-nonsystem-dependencies-with-compile", "-MMD";
        None, No, Some("As -MD, without system headers.");
    DependencyOutput: "--dependency-output", "-MF"; Some("<file>"), No,
        Some("The dependency file.");
    DependencyTarget: "--dependency-target-name", "-MT"; Some("<target>"), No,
        Some("The target named in the dependency file.");
    IncludePath: "--include-path", "-I"; Some("<path>,..."), Any,
        Some("Include search path.");
    SystemInclude: "--system-include", "-isystem"; Some("<path>"), No,
        Some("System include search path.");
    PreInclude: "--pre-include", "-include"; Some("<file>"), No,
        Some("Include the file before each source.");
    DefineMacro: "--define-macro", "-D"; Some("<def>,..."), Any,
        Some("Define a macro.");
    UndefineMacro: "--undefine-macro", "-U"; Some("<def>,..."), Any,
        Some("Undefine a macro.");
    Library: "--library", "-l"; Some("<library>,..."), Any,
        Some("Link the library (cudart is always linked statically).");
    LibraryPath: "--library-path", "-L"; Some("<path>,..."), Any,
        Some("Library search path.");
    Optimize: "--optimize", "-O"; Some("<level>"), Any,
        Some("Host and device optimisation (device code is -O3 without it).");
    Debug: "--debug", "-g"; None, No,
        Some("Debug information for host code.");
    DeviceDebug: "--device-debug", "-G"; None, No,
        Some("Debug information for device code; device code at -O0.");
    LineInfo: "--generate-line-info", "-lineinfo"; None, No,
        Some("Line information for device code.");
    GpuArchitecture: "--gpu-architecture", "-arch"; Some("<arch>"), No,
        Some("GPU architecture to build for (see below).");
    GpuCode: "--gpu-code", "-code"; Some("<code>,..."), No,
        Some("GPU architectures to build for (see below).");
    GenerateCode: "--generate-code", "-gencode"; Some("<specification>"), No,
        Some("arch=compute_XX,code=sm_XX: both build.");
    ListGpuArch: "--list-gpu-arch", "-arch-ls"; None, No,
        Some("List the virtual architectures (compute_XX) and exit.");
    ListGpuCode: "--list-gpu-code", "-code-ls"; None, No,
        Some("List the real architectures (sm_XX) and exit.");
    UseFastMath: "--use_fast_math", "-use_fast_math"; None, No,
        Some("Flush denormals to zero, fast transcendentals.");
    Ftz: "--ftz", "-ftz"; Some("<true|false>"), No,
        Some("Flush denormals to zero.");
    PrecDiv: "--prec-div", "-prec-div"; Some("<true|false>"), No,
        Some("Ignored, with a note: clang's defaults match nvcc's.");
    PrecSqrt: "--prec-sqrt", "-prec-sqrt"; Some("<true|false>"), No,
        Some("Ignored, with a note: clang's defaults match nvcc's.");
    Fmad: "--fmad", "-fmad"; Some("<true|false>"), No,
        Some("Ignored, with a note: clang's defaults match nvcc's.");
    CompilerOptions: "--compiler-options", "-Xcompiler"; Some("<options>,..."), No,
        Some("Options for host compilations.");
    PtxasOptions: "--ptxas-options", "-Xptxas"; Some("<options>,..."), No,
        Some("Options for ptxas.");
    LinkerOptions: "--linker-options", "-Xlinker"; Some("<options>,..."), No,
        Some("Options for the linker.");
    RelocatableDeviceCode: "--relocatable-device-code", "-rdc"; Some("<true|false>"), No,
        Some("Separable compilation: the device link instruments the linked program.");
    DeviceC: "--device-c", "-dc"; None, No,
        Some("As -c -rdc=true.");
    DeviceLink: "--device-link", "-dlink"; None, No,
        Some("Device-link -dc objects (and archives) into an object for a host link.");
    DeviceW: "--device-w", "-dw"; None, No,
        Some("Handed to nvcc, uninstrumented (GPU target); refused on the CPU target.");
    Std: "--std", "-std"; Some("<standard>"), No,
        Some("C++ dialect.");
    Language: "--x", "-x"; Some("<cu|c|c++>"), No,
        Some("Language of the following inputs.");
    Keep: "--keep", "-keep"; None, No,
        Some("Keep intermediate files (--keep-dir <dir>: there).");
    KeepDir: "--keep-dir", "-keep-dir"; Some("<dir>"), No,
        Some("Keep intermediate files in <dir>.");
    CompilerBindir: "--compiler-bindir", "-ccbin"; Some("<dir>"), No,
        Some("Accepted, no effect: host code is compiled by clang (one note).");
    Cudart: "--cudart", "-cudart"; Some("<static|shared|none>"), No,
        Some("Accepted: cudart is always linked statically (one note otherwise).");
    Xopt: "-Xopt"; Some("<level>"), No,
        Some("As --optimize.");
    ForwardUnknownToHostCompiler: "--forward-unknown-to-host-compiler",
        "-forward-unknown-to-host-compiler"; None, No,
        Some("Options cuda-flux-nvcc does not know go to the host compiler (which also links).");
    ForwardUnknownToHostLinker: "--forward-unknown-to-host-linker",
        "-forward-unknown-to-host-linker"; None, No,
        Some("As --forward-unknown-to-host-compiler.");
    OptionsFile: "--options-file", "-optf"; Some("<file>[,<file>]"), No,
        Some("Read more options from each file (shell-quoted, one or more per line).");
    Machine: "--machine", "-m"; Some("<64>"), Digits,
        Some("64-bit code, the only kind built (-m64).");
    NoDeprecatedGpuTargets: "--Wno-deprecated-gpu-targets", "-Wno-deprecated-gpu-targets"; None,
        No, Some("Accepted, no effect.");
    ResourceUsage: "--resource-usage", "-res-usage"; None, No,
        Some("Accepted, no effect.");
    NvlinkOptions: "-nvlink-options"; None, No,
        Some("Accepted, no effect.");
    DryRun: "--dryrun", "-dryrun"; None, No,
        Some("Print the commands of the build; run none.");
    Verbose: "--verbose", "-v"; None, No,
        Some("Print each step.");
    DisableWarnings: "--disable-warnings", "-w"; None, No,
        Some("No warnings.");
    NoDeprecatedDeclarations: "--Wno-deprecated-declarations", "-Wno-deprecated-declarations";
        None, No, Some("No deprecation warnings.");
    Version: "--version", "-V"; None, No,
        Some("Print the version and exit.");
    Help: "--help", "-h"; None, No,
        Some("Print this help and exit.");
    CudaFluxPrefix: "--cuda-flux-prefix"; Some("<dir>"), No,
        Some("Write a CUDA toolkit directory for Makefiles (CUDA_DIR=dir).");
    CudaFluxTarget: "--cuda-flux-target"; Some("<gpu|cpu>"), No,
        Some("Where instrumented programs run (default gpu).");
    Ptx: "--ptx", "-ptx"; None, No, None;
    Cubin: "--cubin", "-cubin"; None, No, None;
    Fatbin: "--fatbin", "-fatbin"; None, No, None;
    Lib: "--lib", "-lib"; None, No, None;
}

/// The option `name` (an argument up to any `=`) spells, or that `argument` starts with, its
/// value glued (`-Ipath`, `-O3`, `-m64`); with that value.
pub fn find(name: &str, argument: &str) -> Option<(&'static NvccOption, Option<String>)> {
    if let Some(option) = OPTIONS.iter().find(|o| o.spellings().any(|s| s == name)) {
        return Some((option, None));
    }
    OPTIONS.iter().find_map(|option| {
        let short = option.short?;
        let rest = argument.strip_prefix(short).filter(|r| !r.is_empty())?;
        let glued = match option.glued {
            Glued::No => false,
            Glued::Any => true,
            Glued::Digits => rest.bytes().all(|b| b.is_ascii_digit()),
        };
        glued.then(|| (option, Some(rest.to_string())))
    })
}

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
    for option in OPTIONS {
        let Some(description) = option.help else {
            continue;
        };
        let long = match option.value {
            Some(value) => format!("{} {value}", option.long),
            None => option.long.to_string(),
        };
        let short = option.short.map_or(String::new(), |s| format!("({s})"));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::nvcc::{parse_nvcc, NvccInvocation};

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
}
