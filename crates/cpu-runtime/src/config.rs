//! The environment of the CPU runtime: `CUDA_FLUX_CPU_THREADS`, `CUDA_FLUX_CPU_SMS`,
//! `CUDA_FLUX_CPU_MEMCHECK`, `CUDA_FLUX_CPU_ENGINE` and `CUDA_FLUX_CPU_NATIVE_AFTER`, each read
//! once at first use.

use std::ffi::OsStr;

use ptx_sim::Engine;

use thiserror::Error;

/// The variable that sets how many host threads run a launch's CTAs.
pub const THREADS_VAR: &str = "CUDA_FLUX_CPU_THREADS";

/// The largest accepted `CUDA_FLUX_CPU_THREADS`.
pub const MAX_THREADS: usize = 1024;

/// A setting that cannot be used. The program stops with this one line: running with another
/// thread count than asked for would silently change what is measured.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{THREADS_VAR} must be an integer from 1 to {MAX_THREADS}, not `{0}`")]
    BadThreads(String),
    #[error("{SMS_VAR} must be an integer from 1 to {MAX_MULTIPROCESSORS}, not `{0}`")]
    BadMultiprocessors(String),
    #[error("{MEMCHECK_VAR} must be 0 or 1, not `{0}`")]
    BadMemcheck(String),
    #[error("{ENGINE_VAR} must be `interpreter` or `native`, not `{0}`")]
    BadEngine(String),
    #[error(
        "{NATIVE_AFTER_VAR} must be a whole number of warp-instructions (0: compile at the \
         first run), not `{0}`"
    )]
    BadNativeAfter(String),
}

/// The variable that selects the engine that runs kernels: `interpreter` (the reference) or
/// `native` (runs of ALU instructions compiled to machine code with LLVM, the same results
/// and counts).
pub const ENGINE_VAR: &str = "CUDA_FLUX_CPU_ENGINE";

/// The engine when `CUDA_FLUX_CPU_ENGINE` is unset: the one that runs long programs fastest
/// on this host ([`Engine::fastest_on_this_host`]: native with AVX-512, else the interpreter).
/// Either gives the same results and counts.
pub fn default_engine() -> Engine {
    Engine::fastest_on_this_host()
}

/// The engine: `value` is the variable's value, if set.
pub fn engine_from(value: Option<&OsStr>) -> Result<Engine, ConfigError> {
    let Some(value) = value else {
        return Ok(default_engine());
    };
    let text = value.to_string_lossy();
    match text.trim() {
        "" => Ok(default_engine()),
        "interpreter" => Ok(Engine::Interpreter),
        "native" => Ok(Engine::Native),
        _ => Err(ConfigError::BadEngine(text.into_owned())),
    }
}

/// The engine of this process (`CUDA_FLUX_CPU_ENGINE`).
pub fn engine_from_env() -> Result<Engine, ConfigError> {
    engine_from(std::env::var_os(ENGINE_VAR).as_deref())
}

/// The variable that sets how many warp-instructions the native engine interprets a function
/// for (over all its launches) before compiling it: 0 compiles every function the first time
/// a warp runs it. Results and counts are the same whatever it is.
pub const NATIVE_AFTER_VAR: &str = "CUDA_FLUX_CPU_NATIVE_AFTER";

/// The native engine's threshold when `CUDA_FLUX_CPU_NATIVE_AFTER` is unset: 2^25 (about 33.5
/// million) warp-instructions, one to two seconds of interpretation on one core. Compiling a
/// function of the benchmark programs costs 1.7-4.1 billion host instructions (0.3-1 s), and
/// its native code saves about 80-110 host instructions per warp-instruction (callgrind), so
/// compiling pays only after some 16-51 million more warp-instructions: a function is compiled
/// once it has run about that long (the rent-or-buy rule, which never costs more than about
/// twice the better choice in hindsight), and short programs, every test among them, are
/// interpreted throughout (`benchmarks/results/2026-11-28-cpu-native-tiered.md`).
pub const DEFAULT_NATIVE_AFTER: u64 = 1 << 25;

/// The native engine's threshold in warp-instructions: `value` is the variable's value, if set.
pub fn native_after_from(value: Option<&OsStr>) -> Result<u64, ConfigError> {
    let Some(value) = value else {
        return Ok(DEFAULT_NATIVE_AFTER);
    };
    let text = value.to_string_lossy();
    match text.trim() {
        "" => Ok(DEFAULT_NATIVE_AFTER),
        digits => digits
            .parse::<u64>()
            .map_err(|_| ConfigError::BadNativeAfter(text.into_owned())),
    }
}

/// The native engine's threshold of this process (`CUDA_FLUX_CPU_NATIVE_AFTER`).
pub fn native_after_from_env() -> Result<u64, ConfigError> {
    native_after_from(std::env::var_os(NATIVE_AFTER_VAR).as_deref())
}

/// The variable that sets the emulated device's multiprocessor count (`multiProcessorCount`).
pub const SMS_VAR: &str = "CUDA_FLUX_CPU_SMS";

/// The emulated device's multiprocessors when `CUDA_FLUX_CPU_SMS` is unset. Fixed rather than
/// the host's core count, so that a program that sizes its grid by the device (or hard-codes a
/// count of persistent CTAs, as Parboil bfs does with 14) runs the same grid, and counts the
/// same, on every host and with any `CUDA_FLUX_CPU_THREADS`. 16 holds the persistent grids of
/// older GPUs (14-16 multiprocessors) while keeping SM-sized grids small.
pub const DEFAULT_MULTIPROCESSORS: usize = 16;

/// The largest accepted `CUDA_FLUX_CPU_SMS`.
pub const MAX_MULTIPROCESSORS: usize = 1024;

/// The variable that turns on the strict memory mode: a kernel touching memory outside every
/// allocation (a guard zone included) faults, as under compute-sanitizer's memcheck.
pub const MEMCHECK_VAR: &str = "CUDA_FLUX_CPU_MEMCHECK";

/// Whether the strict memory mode is on: `value` is the variable's value, if set.
pub fn memcheck_from(value: Option<&OsStr>) -> Result<bool, ConfigError> {
    let Some(value) = value else {
        return Ok(false);
    };
    let text = value.to_string_lossy();
    match text.trim() {
        "" | "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(ConfigError::BadMemcheck(text.into_owned())),
    }
}

/// The strict memory mode of this process (`CUDA_FLUX_CPU_MEMCHECK`).
pub fn memcheck_from_env() -> Result<bool, ConfigError> {
    memcheck_from(std::env::var_os(MEMCHECK_VAR).as_deref())
}

/// The worker count: `value` (the variable's value, if set) or `default` when unset.
pub fn workers_from(value: Option<&OsStr>, default: usize) -> Result<usize, ConfigError> {
    let Some(value) = value else {
        return Ok(default.clamp(1, MAX_THREADS));
    };
    let text = value.to_string_lossy();
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(ConfigError::BadThreads(text.into_owned())),
    }
}

/// The worker count of this process: `CUDA_FLUX_CPU_THREADS` or the available parallelism.
pub fn workers_from_env() -> Result<usize, ConfigError> {
    let default = std::thread::available_parallelism().map_or(1, |n| n.get());
    workers_from(std::env::var_os(THREADS_VAR).as_deref(), default)
}

/// The emulated multiprocessor count: `value` (the variable's value, if set) or
/// [`DEFAULT_MULTIPROCESSORS`].
pub fn multiprocessors_from(value: Option<&OsStr>) -> Result<usize, ConfigError> {
    let Some(value) = value else {
        return Ok(DEFAULT_MULTIPROCESSORS);
    };
    let text = value.to_string_lossy();
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_MULTIPROCESSORS).contains(&n) => Ok(n),
        _ => Err(ConfigError::BadMultiprocessors(text.into_owned())),
    }
}

/// The emulated multiprocessor count of this process (`CUDA_FLUX_CPU_SMS`).
pub fn multiprocessors_from_env() -> Result<usize, ConfigError> {
    multiprocessors_from(std::env::var_os(SMS_VAR).as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_uses_the_default() {
        assert_eq!(workers_from(None, 6), Ok(6));
        assert_eq!(workers_from(None, 0), Ok(1));
        assert_eq!(workers_from(None, 100_000), Ok(MAX_THREADS));
    }

    #[test]
    fn positive_integers_are_accepted() {
        assert_eq!(workers_from(Some(OsStr::new("1")), 8), Ok(1));
        assert_eq!(workers_from(Some(OsStr::new(" 16 ")), 8), Ok(16));
        assert_eq!(workers_from(Some(OsStr::new("1024")), 8), Ok(1024));
    }

    #[test]
    fn multiprocessors_default_to_a_fixed_count_and_take_1_to_the_maximum() {
        assert_eq!(multiprocessors_from(None), Ok(DEFAULT_MULTIPROCESSORS));
        assert_eq!(multiprocessors_from(Some(OsStr::new("1"))), Ok(1));
        assert_eq!(multiprocessors_from(Some(OsStr::new(" 80 "))), Ok(80));
        assert_eq!(multiprocessors_from(Some(OsStr::new("1024"))), Ok(1024));
        for bad in ["0", "-1", "", "many", "2.5", "1025"] {
            let error = multiprocessors_from(Some(OsStr::new(bad))).unwrap_err();
            assert_eq!(error, ConfigError::BadMultiprocessors(bad.to_owned()));
            assert_eq!(
                error.to_string(),
                format!("CUDA_FLUX_CPU_SMS must be an integer from 1 to 1024, not `{bad}`")
            );
        }
    }

    #[test]
    fn memcheck_is_0_or_1() {
        assert_eq!(memcheck_from(None), Ok(false));
        assert_eq!(memcheck_from(Some(OsStr::new("0"))), Ok(false));
        assert_eq!(memcheck_from(Some(OsStr::new(" 1"))), Ok(true));
        let error = memcheck_from(Some(OsStr::new("yes"))).unwrap_err();
        assert_eq!(
            error.to_string(),
            "CUDA_FLUX_CPU_MEMCHECK must be 0 or 1, not `yes`"
        );
    }

    #[test]
    fn engine_is_interpreter_or_native() {
        assert_eq!(engine_from(None), Ok(default_engine()));
        assert_eq!(engine_from(Some(OsStr::new(""))), Ok(default_engine()));
        assert_eq!(
            engine_from(Some(OsStr::new("interpreter"))),
            Ok(Engine::Interpreter)
        );
        assert_eq!(
            engine_from(Some(OsStr::new(" native "))),
            Ok(Engine::Native)
        );
        let error = engine_from(Some(OsStr::new("jit"))).unwrap_err();
        assert_eq!(
            error.to_string(),
            "CUDA_FLUX_CPU_ENGINE must be `interpreter` or `native`, not `jit`"
        );
    }

    #[test]
    fn native_after_is_a_whole_number_of_warp_instructions() {
        assert_eq!(native_after_from(None), Ok(DEFAULT_NATIVE_AFTER));
        assert_eq!(
            native_after_from(Some(OsStr::new(""))),
            Ok(DEFAULT_NATIVE_AFTER)
        );
        assert_eq!(native_after_from(Some(OsStr::new("0"))), Ok(0));
        assert_eq!(native_after_from(Some(OsStr::new(" 250000 "))), Ok(250_000));
        assert_eq!(
            native_after_from(Some(OsStr::new("18446744073709551615"))),
            Ok(u64::MAX)
        );
        for bad in ["-1", "1e6", "1_000", "many", "2.5", "18446744073709551616"] {
            let error = native_after_from(Some(OsStr::new(bad))).unwrap_err();
            assert_eq!(error, ConfigError::BadNativeAfter(bad.to_owned()));
            assert_eq!(
                error.to_string(),
                format!(
                    "CUDA_FLUX_CPU_NATIVE_AFTER must be a whole number of warp-instructions \
                     (0: compile at the first run), not `{bad}`"
                )
            );
        }
    }

    #[test]
    fn anything_else_is_an_error_naming_the_value() {
        for bad in [
            "0",
            "-2",
            "",
            "four",
            "1.5",
            "1025",
            "99999999999999999999999",
        ] {
            let error = workers_from(Some(OsStr::new(bad)), 8).unwrap_err();
            assert_eq!(error, ConfigError::BadThreads(bad.to_owned()));
            assert!(error.to_string().contains(THREADS_VAR));
        }
    }
}
