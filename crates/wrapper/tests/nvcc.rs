//! `cuda-flux-nvcc` builds Makefile projects written for nvcc, unmodified: each project of
//! tests/nvcc-projects is built once with real nvcc (so it is a valid nvcc project) and once with
//! `make NVCC=cuda-flux-nvcc`; the instrumented build must carry a counting clone of each kernel
//! and behave like the nvcc build when run.

use std::path::Path;
use std::process::Command;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Builds `project` with `make NVCC=nvcc_command` in a fresh copy; returns the copy's path.
fn make(project: &str, nvcc_command: &str, dir: &Path) -> std::path::PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/nvcc-projects")
        .join(project);
    let copy = dir.join(project);
    copy_dir(&source, &copy);
    let output = Command::new("make")
        .arg(format!("NVCC={nvcc_command}"))
        .current_dir(&copy)
        .output()
        .expect("make runs");
    assert!(
        output.status.success(),
        "{project} with {nvcc_command}:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    copy
}

fn run(app: &Path) -> (Option<i32>, String) {
    let output = Command::new(app)
        .current_dir(app.parent().unwrap())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.code(), text)
}

#[test]
fn makefile_projects_build_unmodified() {
    let nvcc_driver = env!("CARGO_BIN_EXE_cuda-flux-nvcc");
    for project in ["shims", "gencode"] {
        let dir = tempfile::tempdir().unwrap();
        let reference = make(project, "nvcc", &dir.path().join("nvcc"));
        let instrumented = make(project, nvcc_driver, &dir.path().join("cuda-flux"));
        let sass = Command::new("cuobjdump")
            .arg("-sass")
            .arg(instrumented.join("app"))
            .output()
            .unwrap();
        let sass = String::from_utf8_lossy(&sass.stdout);
        assert!(
            sass.contains("__cf\n"),
            "{project}: no counting clone in the binary"
        );
        let (reference_status, reference_text) = run(&reference.join("app"));
        let (status, text) = run(&instrumented.join("app"));
        let result = |t: &str| {
            t.lines()
                .find(|l| l.starts_with("result:") || l.starts_with("CUDA error"))
                .map(String::from)
        };
        assert_eq!(
            (status, result(&text)),
            (reference_status, result(&reference_text)),
            "{project}: the instrumented build behaves unlike the nvcc build"
        );
    }
}

#[test]
fn unknown_flags_are_one_line_and_exit_2() {
    let output = Command::new(env!("CARGO_BIN_EXE_cuda-flux-nvcc"))
        .args(["--no-such-flag", "k.cu"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--no-such-flag"), "{stderr}");
    let output = Command::new(env!("CARGO_BIN_EXE_cuda-flux-nvcc"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("release 11.8"));
}
