//! `cuda-flux-nvcc`: a drop-in for `nvcc` that builds CUDA programs with every kernel
//! instrumented (`make NVCC=cuda-flux-nvcc`).

use std::process::ExitCode;

use wrapper::driver::nvcc::{
    help_text, once_per_build, parse_nvcc, write_prefix, NvccInvocation, SUPPORTED_ARCHS,
};
use wrapper::driver::{Driver, StepFailed};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let extra_archs = std::env::var("CUDA_FLUX_ARCH").ok();
    let (args, notes, dry_run) = match parse_nvcc(&args, extra_archs.as_deref()) {
        Ok(NvccInvocation::Version) => {
            // Makefiles read nvcc's version from its last lines: say what the pipeline is.
            println!(
                "cuda-flux-nvcc: CUDA instruction profiler (cuda-flux {}), nvcc-compatible driver\n\
                 Cuda compilation tools, release 11.8, V11.8.89 (compiling with clang 16)",
                env!("CARGO_PKG_VERSION")
            );
            return ExitCode::SUCCESS;
        }
        Ok(NvccInvocation::Help) => {
            print!("{}", help_text());
            return ExitCode::SUCCESS;
        }
        Ok(NvccInvocation::ListArchs { virtual_archs }) => {
            let prefix = if virtual_archs { "compute" } else { "sm" };
            for arch in SUPPORTED_ARCHS {
                println!("{prefix}_{arch}");
            }
            return ExitCode::SUCCESS;
        }
        Ok(NvccInvocation::Prefix(dir)) => {
            return match write_prefix(&dir) {
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
