//! `cuda-flux-clang`: compile and link CUDA programs like `clang++`, with every kernel
//! instrumented to count its PTX instructions at run time.

use std::process::ExitCode;

use wrapper::driver::{probe, ArgsError, Driver, DriverArgs, StepFailed};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-help") {
        println!(
            "usage: cuda-flux-clang [clang++ options] FILE...\n\n\
             Builds CUDA programs like clang++, with every kernel instrumented to count its PTX\n\
             instructions. Running the program writes cuda-flux-<pid>.json (CUDA_FLUX_OUTPUT).\n\n\
             cuda-flux options:\n  \
             --cuda-gpu-arch=sm_XX   target architecture (repeatable; default sm_70)\n  \
             --cuda-flux-keep[=DIR]  keep intermediates (device PTX, instrumented PTX, fat binary,\n                          \
             host IR) in DIR (default: the current directory); or CUDA_FLUX_KEEP=DIR\n  \
             --cuda-flux-target=cpu  run the kernels on the CPU (PTX interpreter, CPU CUDA\n                          \
             runtime; no GPU needed) instead of a GPU; or CUDA_FLUX_TARGET=cpu\n  \
             -v                      show every step"
        );
        return ExitCode::SUCCESS;
    }
    // Queries (`--version`, `-print-*`, `-###`...) and command lines without inputs (a bare
    // `-v`) are clang++-16's to answer: build systems parse its answers.
    let parsed = if probe::is_clang_query(&args) {
        Err(ArgsError::NoInputs)
    } else {
        DriverArgs::parse(&args)
    };
    let parsed = match parsed {
        Ok(parsed) => parsed,
        Err(ArgsError::NoInputs) => {
            return match probe::run_clang(&args) {
                Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
                Err(error) => {
                    eprintln!("cuda-flux-clang: error: {error}");
                    ExitCode::FAILURE
                }
            };
        }
        Err(error) => {
            eprintln!("cuda-flux-clang: error: {error}");
            return ExitCode::from(2);
        }
    };
    match Driver::new(parsed).and_then(|driver| driver.build()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if let Some(StepFailed(code)) = error.downcast_ref::<StepFailed>() {
                // The failing tool already printed why.
                return ExitCode::from(u8::try_from(*code).unwrap_or(1).max(1));
            }
            eprintln!("cuda-flux-clang: error: {}", wrapper::error_line(&error));
            ExitCode::FAILURE
        }
    }
}
