//! Running the `cuda-flux` command in the analysis crate's integration tests.
// Each test file uses what it needs of this module.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::process::{Command, Output};

/// `cuda-flux ARGS...`, run to completion.
pub fn cuda_flux<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cuda-flux"))
        .args(args)
        .output()
        .expect("cuda-flux runs")
}

/// Its standard output, after asserting that it succeeded (showing stderr if not).
pub fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}
