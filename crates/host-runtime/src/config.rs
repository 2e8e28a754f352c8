//! The environment variables that steer the runtime, read once at first use.
//!
//! A bad value never stops the program: it yields exactly one stderr line naming the variable
//! and the value, and the default is used.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Counter banks when `CUDA_FLUX_BANKS` is not set or not valid. Bank counts are powers of two,
/// so that the device picks its bank with a mask (`%smid & (banks - 1)`), not a division.
pub const DEFAULT_BANKS: u32 = 32;
/// The largest accepted `CUDA_FLUX_BANKS`.
pub const MAX_BANKS: u32 = 4096;
// The bank mask must fit below the mode in the clone's `banks` parameter.
const _: () = assert!(MAX_BANKS - 1 <= device_runtime::BANK_MASK_BITS);

/// Counting mode (`CUDA_FLUX_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every CTA of every launch is counted.
    All,
    /// Only the first CTA (linear CTA id 0) of each launch is counted.
    Cta,
    /// Only the first warp (linear thread id < 32) of the first CTA of each launch is counted.
    Warp,
}

impl Mode {
    /// The mode's code in the top byte of the clone's `banks` parameter (see `device-runtime`).
    pub fn device_code(self) -> u32 {
        match self {
            Mode::All => device_runtime::MODE_ALL,
            Mode::Cta => device_runtime::MODE_CTA,
            Mode::Warp => device_runtime::MODE_WARP,
        }
    }

    /// The name as written in the environment and in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::All => "all",
            Mode::Cta => "cta",
            Mode::Warp => "warp",
        }
    }
}

/// The runtime's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where the profile goes (absolute when the working directory was known).
    pub output: PathBuf,
    /// Which threads are counted (`CUDA_FLUX_MODE`).
    pub mode: Mode,
    /// Counter banks per launch, a power of two in 1..=[`MAX_BANKS`].
    pub banks: u32,
    /// Substrings of the kernels to profile; `None` profiles every kernel.
    pub kernels: Option<Vec<String>>,
}

impl Config {
    /// Reads the process environment. Returns the settings and the stderr lines to print.
    pub fn from_env() -> (Config, Vec<String>) {
        let cwd = std::env::current_dir().ok();
        Config::parse(
            |name| std::env::var_os(name),
            std::process::id(),
            cwd.as_deref(),
        )
    }

    /// Reads settings through `get` (the environment), for process `pid` with working directory
    /// `cwd`. Returns the settings and one message per variable with a bad value (or an
    /// unsupported mode).
    pub fn parse(
        get: impl Fn(&str) -> Option<OsString>,
        pid: u32,
        cwd: Option<&Path>,
    ) -> (Config, Vec<String>) {
        let mut messages = Vec::new();
        let absolute = |path: PathBuf| match cwd {
            Some(cwd) if path.is_relative() => cwd.join(path),
            _ => path,
        };
        let default_output = format!("cuda-flux-{pid}.json");

        let output = match get("CUDA_FLUX_OUTPUT") {
            None => absolute(PathBuf::from(&default_output)),
            Some(value) if value.is_empty() => {
                messages.push(format!(
                    "cuda-flux: CUDA_FLUX_OUTPUT='' is empty; using {default_output}"
                ));
                absolute(PathBuf::from(&default_output))
            }
            Some(value) => {
                let path = absolute(PathBuf::from(&value));
                if path.is_dir() {
                    messages.push(format!(
                        "cuda-flux: CUDA_FLUX_OUTPUT='{}' is a directory; using {default_output}",
                        value.to_string_lossy()
                    ));
                    absolute(PathBuf::from(&default_output))
                } else {
                    path
                }
            }
        };

        let mode = match get("CUDA_FLUX_MODE") {
            None => Mode::All,
            Some(value) => match value.to_str() {
                Some("all") => Mode::All,
                Some("cta") => Mode::Cta,
                Some("warp") => Mode::Warp,
                _ => {
                    messages.push(format!(
                        "cuda-flux: CUDA_FLUX_MODE='{}' is not one of all, cta, warp; using all",
                        value.to_string_lossy()
                    ));
                    Mode::All
                }
            },
        };

        let banks = match get("CUDA_FLUX_BANKS") {
            None => DEFAULT_BANKS,
            Some(value) => match value.to_str().and_then(|v| v.parse::<u32>().ok()) {
                Some(banks) if (1..=MAX_BANKS).contains(&banks) && banks.is_power_of_two() => banks,
                _ => {
                    messages.push(format!(
                        "cuda-flux: CUDA_FLUX_BANKS='{}' is not a power of two from 1 to {MAX_BANKS}; using {DEFAULT_BANKS}",
                        value.to_string_lossy()
                    ));
                    DEFAULT_BANKS
                }
            },
        };

        let kernels = match get("CUDA_FLUX_KERNELS") {
            None => None,
            Some(value) => {
                let names: Option<Vec<String>> = value.to_str().map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect()
                });
                match names {
                    Some(names) if !names.is_empty() => Some(names),
                    _ => {
                        messages.push(format!(
                            "cuda-flux: CUDA_FLUX_KERNELS='{}' names no kernel (expected comma-separated names); profiling every kernel",
                            value.to_string_lossy()
                        ));
                        None
                    }
                }
            }
        };

        let config = Config {
            output,
            mode,
            banks,
            kernels,
        };
        (config, messages)
    }

    /// The mode counting uses.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether a kernel with these names is profiled (`CUDA_FLUX_KERNELS`: any of the substrings
    /// occurs in the mangled or the demangled name).
    pub fn profiles(&self, mangled: &str, demangled: &str) -> bool {
        match &self.kernels {
            None => true,
            Some(names) => names
                .iter()
                .any(|n| mangled.contains(n.as_str()) || demangled.contains(n.as_str())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(vars: &[(&str, &str)]) -> (Config, Vec<String>) {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Config::parse(|n| vars.get(n).cloned(), 42, Some(Path::new("/work/dir")))
    }

    #[test]
    fn defaults_without_variables() {
        let (config, messages) = parse(&[]);
        assert!(messages.is_empty());
        assert_eq!(config.output, Path::new("/work/dir/cuda-flux-42.json"));
        assert_eq!(config.mode, Mode::All);
        assert_eq!(config.mode(), Mode::All);
        assert_eq!(config.banks, DEFAULT_BANKS);
        assert_eq!(config.kernels, None);
        assert!(config.profiles("anything", "at all"));
    }

    #[test]
    fn good_values_are_taken_silently() {
        let (config, messages) = parse(&[
            ("CUDA_FLUX_OUTPUT", "out/p.json"),
            ("CUDA_FLUX_MODE", "all"),
            ("CUDA_FLUX_BANKS", "4096"),
            ("CUDA_FLUX_KERNELS", " axpy, ,_Z6reduce ,"),
        ]);
        assert!(messages.is_empty(), "{messages:?}");
        assert_eq!(config.output, Path::new("/work/dir/out/p.json"));
        assert_eq!(config.banks, 4096);
        assert_eq!(
            config.kernels,
            Some(vec!["axpy".to_owned(), "_Z6reduce".to_owned()])
        );
        assert!(config.profiles("_Z4axpyfPfS_", "axpy(float, float*, float*)"));
        assert!(config.profiles("_Z6reducePf", "reduce(float*)"));
        assert!(!config.profiles("_Z4scalePf", "scale(float*)"));
        let (config, _) = parse(&[
            ("CUDA_FLUX_OUTPUT", "/abs/p.json"),
            ("CUDA_FLUX_BANKS", "1"),
        ]);
        assert_eq!(config.output, Path::new("/abs/p.json"));
        assert_eq!(config.banks, 1);
    }

    #[test]
    fn every_bad_value_gives_one_message_and_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let dir_str = dir.path().to_str().unwrap().to_owned();
        let cases: Vec<(&str, &str, &str)> = vec![
            (
                "CUDA_FLUX_BANKS",
                "abc",
                "CUDA_FLUX_BANKS='abc' is not a power of two from 1 to 4096; using 32",
            ),
            ("CUDA_FLUX_BANKS", "0", "CUDA_FLUX_BANKS='0' is not"),
            ("CUDA_FLUX_BANKS", "-3", "CUDA_FLUX_BANKS='-3' is not"),
            ("CUDA_FLUX_BANKS", "4097", "CUDA_FLUX_BANKS='4097' is not"),
            ("CUDA_FLUX_BANKS", "3", "CUDA_FLUX_BANKS='3' is not"),
            ("CUDA_FLUX_BANKS", " 8", "CUDA_FLUX_BANKS=' 8' is not"),
            (
                "CUDA_FLUX_BANKS",
                "99999999999999",
                "CUDA_FLUX_BANKS='99999999999999' is not",
            ),
            (
                "CUDA_FLUX_MODE",
                "ALL",
                "CUDA_FLUX_MODE='ALL' is not one of all, cta, warp; using all",
            ),
            ("CUDA_FLUX_MODE", "", "CUDA_FLUX_MODE='' is not one of"),
            (
                "CUDA_FLUX_KERNELS",
                "",
                "CUDA_FLUX_KERNELS='' names no kernel",
            ),
            (
                "CUDA_FLUX_KERNELS",
                " , ,",
                "CUDA_FLUX_KERNELS=' , ,' names no kernel",
            ),
            (
                "CUDA_FLUX_OUTPUT",
                "",
                "CUDA_FLUX_OUTPUT='' is empty; using cuda-flux-42.json",
            ),
            (
                "CUDA_FLUX_OUTPUT",
                &dir_str,
                "is a directory; using cuda-flux-42.json",
            ),
        ];
        for (var, value, expected) in cases {
            let (config, messages) = parse(&[(var, value)]);
            assert_eq!(messages.len(), 1, "{var}={value:?}: {messages:?}");
            assert!(messages[0].starts_with("cuda-flux: "), "{}", messages[0]);
            assert!(
                messages[0].contains(expected),
                "{var}={value:?}: {}",
                messages[0]
            );
            assert!(!messages[0].contains('\n'));
            let (default, _) = parse(&[]);
            assert_eq!(
                config, default,
                "{var}={value:?} must fall back to the default"
            );
        }
    }

    #[test]
    fn non_utf8_values_are_bad_values() {
        use std::os::unix::ffi::OsStringExt;
        for var in ["CUDA_FLUX_BANKS", "CUDA_FLUX_MODE", "CUDA_FLUX_KERNELS"] {
            let value = OsString::from_vec(vec![b'4', 0xff]);
            let (config, messages) = Config::parse(
                |n| (n == var).then(|| value.clone()),
                1,
                Some(Path::new("/")),
            );
            assert_eq!(messages.len(), 1, "{var}");
            assert!(messages[0].contains(var));
            assert_eq!(config.banks, DEFAULT_BANKS);
            assert_eq!(config.kernels, None);
        }
    }

    #[test]
    fn every_mode_is_accepted_without_a_message() {
        for (value, mode) in [("all", Mode::All), ("cta", Mode::Cta), ("warp", Mode::Warp)] {
            let (config, messages) = parse(&[("CUDA_FLUX_MODE", value)]);
            assert!(messages.is_empty(), "{messages:?}");
            assert_eq!(config.mode(), mode);
        }
    }

    #[test]
    fn several_bad_values_give_one_message_each() {
        let (_, messages) = parse(&[
            ("CUDA_FLUX_BANKS", "x"),
            ("CUDA_FLUX_MODE", "y"),
            ("CUDA_FLUX_KERNELS", ","),
            ("CUDA_FLUX_OUTPUT", ""),
        ]);
        assert_eq!(messages.len(), 4, "{messages:?}");
    }
}
