//! `cuda-flux-nvcc`: a drop-in for `nvcc` that builds CUDA programs with every kernel
//! instrumented (`make NVCC=cuda-flux-nvcc`).

use std::process::ExitCode;

use wrapper::driver::nvcc::{parse_nvcc, NvccInvocation};
use wrapper::driver::{Driver, StepFailed};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let extra_archs = std::env::var("CUDA_FLUX_ARCH").ok();
    let (args, notes) = match parse_nvcc(&args, extra_archs.as_deref()) {
        Ok(NvccInvocation::Version) => {
            // Makefiles read nvcc's version from its last lines: say what the pipeline is.
            println!(
                "cuda-flux-nvcc: CUDA instruction profiler (cuda-flux {}), nvcc-compatible driver\n\
                 Cuda compilation tools, release 11.8, V11.8.89 (compiling with clang 16)",
                env!("CARGO_PKG_VERSION")
            );
            return ExitCode::SUCCESS;
        }
        Ok(NvccInvocation::Build { args, notes }) => (args, notes),
        Err(error) => {
            eprintln!("cuda-flux-nvcc: error: {error}");
            return ExitCode::from(2);
        }
    };
    for note in notes {
        eprintln!("cuda-flux-nvcc: note: {note}");
    }
    match Driver::new(*args).and_then(|driver| driver.build()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if let Some(StepFailed(code)) = error.downcast_ref::<StepFailed>() {
                return ExitCode::from(u8::try_from(*code).unwrap_or(1).max(1));
            }
            eprintln!("cuda-flux-nvcc: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
