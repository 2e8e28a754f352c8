//! `cuda-flux-ptxas`: ptxas for instrumented PTX. Each counting clone is held to the registers
//! that keep its original kernel's occupancy, as the GPU builds of `cuda-flux-clang` and
//! `cuda-flux-nvcc` do (`wrapper::registers`), so that `cuda-flux-ptxas -v` on a kept
//! `.instrumented.ptx` reports what the build's SASS uses (the cost benchmark reads it).

use std::process::{Command, ExitCode};

use wrapper::driver::Toolchain;
use wrapper::registers::{fit_clone_registers, run_ptxas, without_info, PtxasArgs};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-help") {
        println!(
            "usage: cuda-flux-ptxas [ptxas options] FILE.ptx\n\n\
             Assembles instrumented PTX like ptxas (same options), holding each counting clone\n\
             (K__cf) to the registers that keep K's occupancy where that spills nothing.\n\
             With -v, ptxas's report of the final assembly and one line per clone held or not."
        );
        return ExitCode::SUCCESS;
    }
    match run(&args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("cuda-flux-ptxas: {error:#}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &[String]) -> anyhow::Result<ExitCode> {
    let ptxas = Toolchain::discover(None)?.ptxas;
    let plain = || -> anyhow::Result<ExitCode> {
        let status = Command::new(&ptxas).args(args).status()?;
        Ok(ExitCode::from(
            status.code().unwrap_or(1).clamp(0, 255) as u8
        ))
    };
    // Nothing to fit (no input, or PTX we cannot read): ptxas as it is.
    let Some(found) = PtxasArgs::find(args) else {
        return plain();
    };
    let Ok(text) = std::fs::read_to_string(&args[found.input]) else {
        return plain();
    };
    let Ok(mut module) = ptx_lexer::parse(text) else {
        return plain();
    };
    let arch = found.arch.clone().unwrap_or_else(|| {
        module
            .target()
            .first()
            .map_or_else(|| "sm_52".to_string(), |t| t.to_string())
    });
    let suffix = device_runtime::CLONE_SUFFIX;
    let pairs: Vec<(String, String)> = module
        .functions()
        .filter(|f| f.kind() == ptx_lexer::FunctionKind::Entry)
        .filter_map(|f| f.name().strip_suffix(suffix))
        .map(|kernel| (kernel.to_string(), format!("{kernel}{suffix}")))
        .collect();
    let dir = tempfile::tempdir()?;
    let input = dir.path().join("fitted.ptx");
    let mut arguments = args.to_vec();
    arguments[found.input] = input.to_string_lossy().into_owned();
    if !found.verbose {
        arguments.insert(0, "-v".to_string());
    }
    let mut failed_with = 1;
    let mut assemble = |module: &ptx_lexer::Module| -> Result<String, String> {
        std::fs::write(&input, module.to_ptx())
            .map_err(|e| format!("cannot write {}: {e}", input.display()))?;
        run_ptxas(Command::new(&ptxas).args(&arguments))
            .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?
            .map_err(|(status, errors)| {
                failed_with = status;
                errors
            })
    };
    match fit_clone_registers(&mut module, &pairs, &arch, &mut assemble) {
        Ok(fit) => {
            if found.verbose {
                eprint!("{}", fit.ptxas_output);
                for fitted in &fit.fitted {
                    eprintln!("cuda-flux-ptxas: {arch}: {fitted}");
                }
            } else {
                eprint!("{}", without_info(&fit.ptxas_output));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(output) => {
            eprint!("{output}");
            Ok(ExitCode::from(failed_with.clamp(1, 255) as u8))
        }
    }
}
