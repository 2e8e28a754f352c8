//! The questions build systems ask a compiler before they give it anything to build
//! (`--version`, `-dumpmachine`, `-print-resource-dir`, `-###`, a bare `-v`; nvcc's `--version`,
//! `--list-gpu-code`): each driver answers as the compiler it stands in for, by asking that
//! compiler (clang++-16, nvcc 11.8) and passing its answer through unchanged. Configure steps
//! parse these answers (CMake reads `clang version 16.0.6` and the `-v` lines, Makefiles the last
//! line of `nvcc --version`), so the drivers add nothing to them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in the environment of the nvcc a probe runs: a cuda-flux-nvcc that finds it set is
/// answering for another one (a `bin/nvcc` of `--cuda-flux-prefix` ahead of the real one in
/// `PATH`) and must not ask again.
const NVCC_PROBE_GUARD: &str = "CUDA_FLUX_NVCC_PROBE";

/// Options whose value is the next argument, which is then no query of its own
/// (`-mllvm -print-after-all`, `-Xclang -print-stats`).
fn takes_value(option: &str) -> bool {
    matches!(
        option,
        "-mllvm"
            | "-Xclang"
            | "-Xlinker"
            | "-Xassembler"
            | "-Xpreprocessor"
            | "-Xcuda-ptxas"
            | "-Xcuda-fatbinary"
            | "-Xoffload-linker"
            | "-Xopenmp-target"
            | "-o"
    ) || option.starts_with("-Xarch_")
}

/// Whether the command line asks clang something rather than to build: `--version`,
/// `-dumpversion`, `-dumpmachine`, `-print-*` (`-print-resource-dir`, `-print-file-name=X`,
/// `-print-search-dirs`, `-print-target-triple`...) or `-###`. clang answers these and builds
/// nothing, whatever inputs are given; `-###` prints the commands a plain clang++-16 build of
/// the inputs would run (the instrumenting pipeline's own steps: `-v`).
pub fn is_clang_query(args: &[String]) -> bool {
    let mut previous: Option<&str> = None;
    for arg in args {
        let a = arg.as_str();
        let value_of_previous = previous.is_some_and(takes_value);
        previous = Some(a);
        if value_of_previous {
            continue;
        }
        let query = matches!(a, "--version" | "-dumpversion" | "-dumpmachine" | "-###")
            || (a.starts_with("-print-") || a.starts_with("--print-"))
                // clang's alias of -MG, not a query.
                && a != "--print-missing-file-dependencies";
        if query {
            return true;
        }
    }
    false
}

/// The clang the drivers run: `CUDA_FLUX_CLANG`, default `clang++-16`.
pub fn clang_program() -> PathBuf {
    std::env::var_os("CUDA_FLUX_CLANG")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("clang++-16"), PathBuf::from)
}

/// The command line without cuda-flux's own options (`--cuda-flux-target=`, `--cuda-flux-keep`),
/// which clang does not know.
fn clang_args(args: &[String]) -> Vec<String> {
    args.iter()
        .filter(|a| !a.starts_with("--cuda-flux-"))
        .cloned()
        .collect()
}

/// Runs clang++-16 with the command line (less cuda-flux's options), its stdout, stderr and
/// exit status passed through: how cuda-flux-clang answers a query, or a command line with no
/// input (`-v` alone prints clang's version and its search paths; other flags alone get
/// clang's own "no input files").
pub fn run_clang(args: &[String]) -> Result<i32, String> {
    let program = clang_program();
    let status = Command::new(&program)
        .args(clang_args(args))
        .status()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    Ok(exit_code(status))
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    status.code().unwrap_or(1)
}

/// The real nvcc, to answer queries for cuda-flux-nvcc: `CUDA_PATH/bin/nvcc`, the toolkit's
/// usual places, then `nvcc` in `PATH`; never cuda-flux-nvcc itself (the `bin/nvcc` link of a
/// `--cuda-flux-prefix` directory), and none when answering for another cuda-flux-nvcc.
pub fn real_nvcc() -> Option<PathBuf> {
    if std::env::var_os(NVCC_PROBE_GUARD).is_some() {
        return None;
    }
    let this = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.canonicalize().ok());
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(path) = std::env::var_os("CUDA_PATH").filter(|p| !p.is_empty()) {
        candidates.push(Path::new(&path).join("bin/nvcc"));
    }
    candidates.push(PathBuf::from("/usr/lib/nvidia-cuda-toolkit/bin/nvcc"));
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("nvcc")));
    }
    candidates.into_iter().find(|candidate| {
        candidate.is_file()
            && candidate
                .canonicalize()
                .is_ok_and(|real| Some(&real) != this.as_ref())
            && !is_prefix_script(candidate)
    })
}

/// A `--cuda-flux-prefix` directory's `bin/nvcc` script (the CPU target's), which runs
/// cuda-flux-nvcc: not the real nvcc.
fn is_prefix_script(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(path)
        .and_then(|mut file| file.read(&mut head))
        .unwrap_or(0);
    String::from_utf8_lossy(&head[..read]).contains(super::nvcc::PREFIX_SCRIPT_MARK)
}

/// Runs the real nvcc with `args`, its stdout, stderr and exit status passed through; `None`
/// when there is none to run (the caller answers from what it knows).
pub fn run_nvcc(args: &[&str]) -> Option<i32> {
    let nvcc = real_nvcc()?;
    let status = Command::new(nvcc)
        .args(args)
        .env(NVCC_PROBE_GUARD, OsString::from("1"))
        .status()
        .ok()?;
    Some(exit_code(status))
}

/// The variable lines nvcc's `-v` starts with (`#$ _NVVM_BRANCH_=nvvm`, `#$ PATH=...`,
/// `#$ NVVMIR_LIBRARY_DIR=...`), as the real nvcc prints them, less `LIBRARIES` (the caller
/// prints its own), plus `TOP`: the toolkit root CMake would derive from the real nvcc found in
/// `PATH` (`/usr` for `/usr/bin/nvcc`; else the one found elsewhere). CMake reads them to identify a CUDA compiler as NVIDIA's
/// and to find the toolkit (CMakeDetermineCUDACompiler). Empty without a real nvcc.
pub fn nvcc_variables() -> Vec<String> {
    let Some(nvcc) = real_nvcc() else {
        return Vec::new();
    };
    let output = Command::new(&nvcc)
        .args([
            "-v",
            "-dryrun",
            "-c",
            "-x",
            "cu",
            "/dev/null",
            "-o",
            "/dev/null",
        ])
        .env(NVCC_PROBE_GUARD, OsString::from("1"))
        .output();
    let Ok(output) = output else {
        return Vec::new();
    };
    let mut lines: Vec<String> = String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter(|line| {
            line.strip_prefix("#$ ")
                .and_then(|rest| rest.split_once('='))
                .is_some_and(|(name, _)| {
                    !name.is_empty()
                        && name != "LIBRARIES"
                        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                })
        })
        .map(str::to_string)
        .collect();
    let this = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.canonicalize().ok());
    let in_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("nvcc"))
            .find(|candidate| {
                candidate.is_file()
                    && candidate
                        .canonicalize()
                        .is_ok_and(|real| Some(&real) != this.as_ref())
                    && !is_prefix_script(candidate)
            })
    });
    let top = in_path
        .as_deref()
        .unwrap_or(&nvcc)
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    if let Some(top) = top {
        if !lines.iter().any(|line| line.starts_with("#$ TOP=")) {
            lines.push(format!("#$ TOP={}", top.display()));
        }
    }
    lines
}

/// The version macros nvcc defines (`-D__NVCC__ -D__CUDACC_VER_MAJOR__=11 ...`), from the real
/// nvcc's `--version` (`V11.8.89`), else 11.8.89.
pub fn nvcc_identification_macros() -> Vec<String> {
    let text = real_nvcc()
        .and_then(|nvcc| {
            Command::new(nvcc)
                .arg("--version")
                .env(NVCC_PROBE_GUARD, OsString::from("1"))
                .output()
                .ok()
        })
        .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
        .unwrap_or_else(|| NVCC_VERSION.to_string());
    let version = text
        .split_whitespace()
        .filter_map(|word| word.strip_prefix('V'))
        .find_map(|v| {
            let parts: Vec<&str> = v.split('.').collect();
            (parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok())).then(|| {
                (
                    parts[0].to_string(),
                    parts[1].to_string(),
                    parts[2].to_string(),
                )
            })
        })
        .unwrap_or_else(|| ("11".into(), "8".into(), "89".into()));
    vec![
        "-D__NVCC__".to_string(),
        format!("-D__CUDACC_VER_MAJOR__={}", version.0),
        format!("-D__CUDACC_VER_MINOR__={}", version.1),
        format!("-D__CUDACC_VER_BUILD__={}", version.2),
    ]
}

/// nvcc 11.8's `--version`, for a machine whose toolkit has no nvcc to ask.
pub const NVCC_VERSION: &str = "nvcc: NVIDIA (R) Cuda compiler driver\n\
Copyright (c) 2005-2022 NVIDIA Corporation\n\
Built on Wed_Sep_21_10:33:58_PDT_2022\n\
Cuda compilation tools, release 11.8, V11.8.89\n\
Build cuda_11.8.r11.8/compiler.31833905_0\n";

/// nvcc's answer to a command line without inputs (`-v`, `-dryrun`, flags alone), on stderr
/// with exit status 1.
pub const NVCC_NO_INPUTS: &str =
    "nvcc fatal   : No input files specified; use option --help for more information";

#[cfg(test)]
mod tests {
    use super::*;

    fn query(line: &str) -> bool {
        is_clang_query(
            &line
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn queries_are_recognised_anywhere_but_not_as_values() {
        for line in [
            "--version",
            "-dumpversion",
            "-dumpmachine",
            "-print-resource-dir",
            "-print-file-name=libgcc.a",
            "-print-prog-name=ld",
            "-print-search-dirs",
            "--print-target-triple",
            "-### -c k.cu",
            "-O2 k.cu --version",
        ] {
            assert!(query(line), "{line}");
        }
        for line in [
            "-c k.cu",
            "-v",
            "-mllvm -print-after-all k.cu",
            "-Xclang -print-stats k.cu",
            "-Xarch_device -print-x k.cu",
            "--print-missing-file-dependencies -M k.cu",
        ] {
            assert!(!query(line), "{line}");
        }
    }

    #[test]
    fn cuda_flux_options_do_not_reach_clang() {
        let args: Vec<String> = ["--cuda-flux-target=cpu", "-v", "--cuda-flux-keep=d"]
            .map(String::from)
            .to_vec();
        assert_eq!(clang_args(&args), ["-v"]);
    }
}
