//! Execution statistics (`CUDA_FLUX_CPU_STATS=FILE`): per kernel, what its launches executed
//! in the interpreter and how long they took, written as JSON at normal process exit.
//!
//! ```text
//! {"format":"cuda-flux-cpu-stats/1","kernels":[{"name","launches","warp_instructions",
//!   "thread_instructions","global_atomics","kernel_ns","block_threads":[x,y,z],"grid_ctas"}]}
//! ```
//!
//! Kernels are keyed by the PTX name of the function that ran (an instrumented launch runs the
//! clone `K__cf`, an uncounted one the original `K`), in the order of their first launch. The
//! counts are `ptx_sim::LaunchStats` summed over launches (plain `u64` sums); `kernel_ns` is
//! the wall time of the launches' execution; `block_threads` is the last launch's block shape,
//! `grid_ctas` the CTAs summed over launches. Unset, nothing is collected beyond what the
//! interpreter counts anyway.

use std::ffi::{c_int, OsStr};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use ptx_sim::LaunchStats;
use serde::Serialize;

/// The variable naming the statistics file.
pub const STATS_VAR: &str = "CUDA_FLUX_CPU_STATS";

/// The `format` field of the file.
pub const FORMAT: &str = "cuda-flux-cpu-stats/1";

/// One kernel's launches, summed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KernelStats {
    pub name: String,
    pub launches: u64,
    pub warp_instructions: u64,
    pub thread_instructions: u64,
    pub global_atomics: u64,
    pub kernel_ns: u64,
    pub block_threads: [u32; 3],
    pub grid_ctas: u64,
}

/// The statistics of a run, kernels in the order of their first launch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub kernels: Vec<KernelStats>,
}

#[derive(Serialize)]
struct File<'a> {
    format: &'static str,
    kernels: &'a [KernelStats],
}

impl Table {
    /// Adds one finished launch of `name`.
    pub fn record(
        &mut self,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        stats: LaunchStats,
        kernel_ns: u64,
    ) {
        let index = match self.kernels.iter().position(|k| k.name == name) {
            Some(index) => index,
            None => {
                self.kernels.push(KernelStats {
                    name: name.to_owned(),
                    ..KernelStats::default()
                });
                self.kernels.len() - 1
            }
        };
        let kernel = &mut self.kernels[index];
        kernel.launches += 1;
        kernel.warp_instructions += stats.warp_instructions;
        kernel.thread_instructions += stats.thread_instructions;
        kernel.global_atomics += stats.global_atomics;
        kernel.kernel_ns += kernel_ns;
        kernel.block_threads = block;
        kernel.grid_ctas += grid.iter().map(|&d| u64::from(d)).product::<u64>();
    }

    /// The file's contents: one line of JSON.
    pub fn to_json(&self) -> Vec<u8> {
        let file = File {
            format: FORMAT,
            kernels: &self.kernels,
        };
        // Serializing strings and integers cannot fail.
        let mut bytes = serde_json::to_vec(&file).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }
}

/// Where the statistics go: `value` (the variable's, if set) taken relative to `cwd`.
/// `Err` names a value that is set but empty.
pub fn path_from(value: Option<&OsStr>, cwd: Option<&Path>) -> Result<Option<PathBuf>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    if value.is_empty() {
        return Err(format!("{STATS_VAR} is empty; no statistics are written"));
    }
    let path = Path::new(value);
    Ok(Some(match cwd {
        Some(cwd) if path.is_relative() => cwd.join(path),
        _ => path.to_owned(),
    }))
}

/// The collector of this process: the file, and the table filled by launches.
pub struct Collector {
    path: PathBuf,
    pid: u32,
    table: Mutex<Table>,
    written: AtomicBool,
}

static COLLECTOR: OnceLock<Option<Collector>> = OnceLock::new();

/// The collector, when `CUDA_FLUX_CPU_STATS` is set. The variable is read at the first call
/// (image registration, before `main`), a relative path taken relative to the working
/// directory then; the exit handler that writes the file is registered at the same time.
pub fn collector() -> Option<&'static Collector> {
    COLLECTOR
        .get_or_init(|| {
            let cwd = std::env::current_dir().ok();
            let path = match path_from(std::env::var_os(STATS_VAR).as_deref(), cwd.as_deref()) {
                Ok(path) => path?,
                Err(message) => {
                    crate::runtime::note(&message);
                    return None;
                }
            };
            extern "C" {
                fn atexit(function: extern "C" fn()) -> c_int;
            }
            // SAFETY: registering a plain function.
            unsafe { atexit(at_exit) };
            Some(Collector {
                path,
                pid: std::process::id(),
                table: Mutex::new(Table::default()),
                written: AtomicBool::new(false),
            })
        })
        .as_ref()
}

impl Collector {
    /// Adds one finished launch.
    pub fn record(
        &self,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        stats: LaunchStats,
        kernel_ns: u64,
    ) {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record(name, grid, block, stats, kernel_ns);
    }

    /// Writes the file (once; not in a forked child), atomically: a temporary file in the
    /// same directory renamed over it. A failure is one line on stderr.
    fn write(&self) {
        if self.written.swap(true, Ordering::SeqCst) || std::process::id() != self.pid {
            return;
        }
        let bytes = self
            .table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .to_json();
        if let Err(error) = host_runtime::output::write_atomically(&self.path, &bytes) {
            let why = match error {
                host_runtime::output::WriteError::Io { source, .. } => source.to_string(),
                host_runtime::output::WriteError::NotAFile { .. } => "not a file path".to_owned(),
            };
            let _ = writeln!(
                std::io::stderr(),
                "cuda-flux cpu: cannot write the statistics to '{}': {why}",
                self.path.display()
            );
        }
    }
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(Some(collector)) = COLLECTOR.get() {
            collector.write();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(warp: u64, thread: u64, atomics: u64) -> LaunchStats {
        LaunchStats {
            warp_instructions: warp,
            thread_instructions: thread,
            global_atomics: atomics,
        }
    }

    #[test]
    fn launches_sum_per_kernel_in_first_launch_order() {
        let mut table = Table::default();
        table.record("b__cf", [2, 3, 1], [32, 1, 1], stats(10, 300, 4), 1000);
        table.record("a", [1, 1, 1], [64, 1, 1], stats(5, 160, 0), 50);
        table.record("b__cf", [4, 1, 1], [16, 2, 1], stats(7, 200, 1), 500);
        assert_eq!(
            table.kernels,
            [
                KernelStats {
                    name: "b__cf".into(),
                    launches: 2,
                    warp_instructions: 17,
                    thread_instructions: 500,
                    global_atomics: 5,
                    kernel_ns: 1500,
                    block_threads: [16, 2, 1],
                    grid_ctas: 10,
                },
                KernelStats {
                    name: "a".into(),
                    launches: 1,
                    warp_instructions: 5,
                    thread_instructions: 160,
                    global_atomics: 0,
                    kernel_ns: 50,
                    block_threads: [64, 1, 1],
                    grid_ctas: 1,
                },
            ]
        );
    }

    #[test]
    fn the_file_is_one_line_of_the_documented_json() {
        let mut table = Table::default();
        assert_eq!(
            table.to_json(),
            b"{\"format\":\"cuda-flux-cpu-stats/1\",\"kernels\":[]}\n"
        );
        table.record("k", [2, 2, 2], [8, 4, 1], stats(u64::MAX - 1, 3, 2), 9);
        assert_eq!(
            String::from_utf8(table.to_json()).unwrap(),
            "{\"format\":\"cuda-flux-cpu-stats/1\",\"kernels\":[{\"name\":\"k\",\"launches\":1,\
             \"warp_instructions\":18446744073709551614,\"thread_instructions\":3,\
             \"global_atomics\":2,\"kernel_ns\":9,\"block_threads\":[8,4,1],\"grid_ctas\":8}]}\n"
        );
    }

    #[test]
    fn relative_paths_are_taken_from_the_working_directory() {
        let cwd = Path::new("/work/dir");
        assert_eq!(path_from(None, Some(cwd)), Ok(None));
        assert_eq!(
            path_from(Some(OsStr::new("s.json")), Some(cwd)),
            Ok(Some(PathBuf::from("/work/dir/s.json")))
        );
        assert_eq!(
            path_from(Some(OsStr::new("/tmp/s.json")), Some(cwd)),
            Ok(Some(PathBuf::from("/tmp/s.json")))
        );
        assert_eq!(
            path_from(Some(OsStr::new("s.json")), None),
            Ok(Some(PathBuf::from("s.json")))
        );
        assert!(path_from(Some(OsStr::new("")), Some(cwd))
            .unwrap_err()
            .contains(STATS_VAR));
    }
}
