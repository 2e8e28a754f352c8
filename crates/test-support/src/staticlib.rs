//! For the crates built as static libraries (`host-runtime`, `cpu-runtime`): finding the archive
//! cargo built for the test run, and checking the symbols it exports.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The C ABI symbols the host runtime exports (and the CPU runtime's archive carries).
pub const HOST_RUNTIME_EXPORTS: [&str; 6] = [
    "__cuda_flux_register_kernel",
    "__cuda_flux_launch_kernel",
    "__cuda_flux_launch_kernel_ptsz",
    "__cuda_flux_launch_cooperative_kernel",
    "__cuda_flux_launch_cooperative_kernel_ptsz",
    "__cuda_flux_device_reset",
];

/// The static library of crate `lib_name` (`host_runtime`) cargo built for this test run:
/// `lib<lib_name>-<hash>.a` beside this test executable (the newest, should several
/// configurations have left one).
pub fn staticlib(lib_name: &str) -> PathBuf {
    let prefix = format!("lib{lib_name}-");
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("test executable directory");
    let mut candidates: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(deps)
        .expect("deps directory")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".a"))
        })
        .filter_map(|path| Some((path.metadata().ok()?.modified().ok()?, path)))
        .collect();
    candidates.sort();
    candidates
        .pop()
        .map(|(_, path)| path)
        .unwrap_or_else(|| panic!("no {prefix}*.a in {}", deps.display()))
}

/// Asserts that `archive` defines each of `symbols` as a text symbol (per `nm`).
pub fn assert_defines_text_symbols(archive: &Path, symbols: &[&str]) {
    let output = Command::new("nm")
        .args(["-g", "--defined-only"])
        .arg(archive)
        .output()
        .expect("nm runs");
    assert!(output.status.success());
    let defined = String::from_utf8_lossy(&output.stdout);
    for symbol in symbols {
        assert!(
            defined
                .lines()
                .any(|line| line.ends_with(&format!(" T {symbol}"))),
            "{symbol} is not a defined text symbol"
        );
    }
}
