//! `cuda-flux-nvcc`: a drop-in for `nvcc` that builds CUDA programs with every kernel
//! instrumented (`make NVCC=cuda-flux-nvcc`).

use std::process::ExitCode;

use wrapper::driver::nvcc::{
    help_text, once_per_build, options, parse_nvcc, write_prefix, NvccError, NvccInvocation,
    SUPPORTED_ARCHS,
};
use wrapper::driver::{probe, Driver, StepFailed, Target};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(code) = relocatable_device_code(&args) {
        return code;
    }
    if args.iter().any(|a| a == "-v" || a == "--verbose")
        && !args.iter().any(|a| a == "-dryrun" || a == "--dryrun")
        && args.iter().any(|a| !a.starts_with('-'))
    {
        // nvcc's `-v` output starts with its variables once it has something to work on, even
        // what it then rejects (CMake runs `nvcc -v __cmake_determine_cuda` for the toolkit's
        // root and reads them); a bare `-v` is only "No input files".
        for line in probe::nvcc_variables() {
            eprintln!("{line}");
        }
    }
    let extra_archs = std::env::var("CUDA_FLUX_ARCH").ok();
    let (args, notes, dry_run) = match parse_nvcc(&args, extra_archs.as_deref()) {
        Ok(NvccInvocation::Version) => {
            // nvcc's own answer: Makefiles and CMake parse it (`tail -n1`, `release 11.8`).
            return match probe::run_nvcc(&["--version"]) {
                Some(code) => exit(code),
                None => {
                    print!("{}", probe::NVCC_VERSION);
                    ExitCode::SUCCESS
                }
            };
        }
        Ok(NvccInvocation::Help) => {
            print!("{}", help_text());
            return ExitCode::SUCCESS;
        }
        Ok(NvccInvocation::ListArchs { virtual_archs }) => {
            let option = if virtual_archs {
                "--list-gpu-arch"
            } else {
                "--list-gpu-code"
            };
            if let Some(code) = probe::run_nvcc(&[option]) {
                return exit(code);
            }
            let prefix = if virtual_archs { "compute" } else { "sm" };
            for arch in SUPPORTED_ARCHS {
                println!("{prefix}_{arch}");
            }
            return ExitCode::SUCCESS;
        }
        Ok(NvccInvocation::Prefix(dir)) => {
            return match prefix_target(&args).and_then(|target| write_prefix(&dir, target)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("cuda-flux-nvcc: error: {}", wrapper::error_line(&error));
                    ExitCode::FAILURE
                }
            };
        }
        Ok(NvccInvocation::Preprocess { args, output }) => {
            let result = Driver::new(*args)
                .and_then(Driver::rewrite_spaced_chevrons)
                .and_then(|driver| driver.preprocess(&output));
            return finish(result);
        }
        Ok(NvccInvocation::Build {
            args,
            notes,
            dry_run,
        }) => (args, notes, dry_run),
        Err(NvccError::NoInputs) => {
            // As nvcc says it (`-v` or `-dryrun` alone too), status 1.
            eprintln!("{}", probe::NVCC_NO_INPUTS);
            return ExitCode::FAILURE;
        }
        Err(error) => {
            eprintln!("cuda-flux-nvcc: error: {error}");
            return ExitCode::from(2);
        }
    };
    for note in once_per_build(notes) {
        eprintln!("cuda-flux-nvcc: note: {note}");
    }
    let driver = Driver::new(*args)
        .map(|driver| if dry_run { driver.dry_run() } else { driver })
        .and_then(Driver::rewrite_spaced_chevrons);
    finish(driver.and_then(|driver| driver.build()))
}

/// The exit status `code` of a tool whose answer was passed through.
fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The exit status of a build: a failed step's own status (its output said why), or one line.
fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if let Some(StepFailed(code)) = error.downcast_ref::<StepFailed>() {
                return ExitCode::from(u8::try_from(*code).unwrap_or(1).max(1));
            }
            eprintln!("cuda-flux-nvcc: error: {}", wrapper::error_line(&error));
            ExitCode::FAILURE
        }
    }
}

/// The target a `--cuda-flux-prefix` directory is written for: `--cuda-flux-target` on the same
/// command line, else `CUDA_FLUX_TARGET`, else the GPU.
fn prefix_target(args: &[String]) -> anyhow::Result<Target> {
    let mut named = None;
    for (index, arg) in args.iter().enumerate() {
        if let Some(value) = arg.strip_prefix("--cuda-flux-target=") {
            named = Some(value.to_string());
        } else if arg == "--cuda-flux-target" {
            named = args.get(index + 1).cloned();
        }
    }
    let value = named
        .or_else(|| std::env::var("CUDA_FLUX_TARGET").ok())
        .filter(|v| !v.is_empty());
    match value {
        Some(value) => Target::parse(&value).map_err(anyhow::Error::from),
        None => Ok(Target::Gpu),
    }
}

/// Whether the command line is `-dw` (`--device-w`): relocatable device code alone, without a
/// host object.
fn is_device_code_only(args: &[String]) -> bool {
    args.iter().any(|a| {
        options::find(a, a)
            .is_some_and(|(option, glued)| option.flag == options::Flag::DeviceW && glued.is_none())
    })
}

/// Separable compilation (`-rdc=true`, `-dc`, `-dlink`) is built by the driver, instrumented
/// (`rdc.rs`). `-dw` (device code without a host object, for a device link alone) is not: for
/// the GPU target the real nvcc builds it, uninstrumented, with one note per build; the CPU
/// target refuses it in one line. `None`: not such a command.
fn relocatable_device_code(args: &[String]) -> Option<ExitCode> {
    if !is_device_code_only(args) {
        return None;
    }
    let target = prefix_target(args).unwrap_or(Target::Gpu);
    if target == Target::Cpu {
        eprintln!(
            "cuda-flux-nvcc: error: -dw (device code without a host object) is not supported \
             on the CPU target; compile with -dc"
        );
        return Some(ExitCode::FAILURE);
    }
    let Some(nvcc) = probe::real_nvcc() else {
        eprintln!("cuda-flux-nvcc: error: -dw is built by nvcc, which is not installed");
        return Some(ExitCode::FAILURE);
    };
    for note in once_per_build(vec![
        "-dw is not instrumented: nvcc builds it and its kernels run uninstrumented".to_string(),
    ]) {
        eprintln!("cuda-flux-nvcc: note: {note}");
    }
    let own = |arg: &String| arg.starts_with("--cuda-flux-");
    let mut skip_value = false;
    let forwarded: Vec<&String> = args
        .iter()
        .filter(|arg| {
            if std::mem::take(&mut skip_value) {
                return false;
            }
            if arg.as_str() == "--cuda-flux-target" {
                skip_value = true;
            }
            !own(arg)
        })
        .collect();
    Some(
        match std::process::Command::new(nvcc).args(forwarded).status() {
            Ok(status) => exit(status.code().unwrap_or(1)),
            Err(error) => {
                eprintln!("cuda-flux-nvcc: error: cannot run nvcc: {error}");
                ExitCode::FAILURE
            }
        },
    )
}
