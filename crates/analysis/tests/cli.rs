//! The `cuda-flux` command as a user runs it: on real clang output, and on bad input.

mod common;
use test_support as support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::cuda_flux;

/// The bundled example compiled to PTX by clang-16, once for all tests.
/// corpus/NAME.cu compiled by clang for sm_70, once per test binary.
fn corpus_ptx(cell: &'static OnceLock<PathBuf>, name: &str) -> PathBuf {
    cell.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("analysis-cli");
        std::fs::create_dir_all(&dir).unwrap();
        let ptx = dir.join(format!("{name}.ptx"));
        support::compile(
            &support::repo_root().join(format!("corpus/{name}.cu")),
            support::Compiler::Clang,
            "sm_70",
            &ptx,
        )
        .unwrap();
        ptx
    })
    .clone()
}

fn example_ptx() -> PathBuf {
    static PTX: OnceLock<PathBuf> = OnceLock::new();
    corpus_ptx(&PTX, "saxpy")
}

/// corpus/loops.cu for sm_70: loops whose trips depend on the data.
fn loops_ptx() -> PathBuf {
    static PTX: OnceLock<PathBuf> = OnceLock::new();
    corpus_ptx(&PTX, "loops")
}

fn stderr_line(output: &Output) -> String {
    let text = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(
        text.lines().count(),
        1,
        "exactly one line on stderr: {text:?}"
    );
    assert!(!text.contains("panicked"), "{text}");
    text
}

#[test]
fn ptx_prints_the_model_as_json() {
    let ptx = example_ptx();
    let output = cuda_flux(&["ptx", ptx.to_str().unwrap()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let module = ptx_lexer::parse(std::fs::read_to_string(&ptx).unwrap()).unwrap();
    let functions = json["functions"].as_array().unwrap();
    let expected: Vec<&str> = module
        .functions()
        .filter(|f| f.is_definition())
        .map(|f| f.name())
        .collect();
    let names: Vec<&str> = functions
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, expected);
    for (f, function) in functions
        .iter()
        .zip(module.functions().filter(|f| f.is_definition()))
    {
        assert!(matches!(f["kind"].as_str(), Some("entry" | "func")));
        let blocks = f["blocks"].as_array().unwrap();
        assert_eq!(blocks.len(), function.blocks().len());
        let instructions: usize = blocks
            .iter()
            .map(|b| {
                assert!(b["label"].is_null() || b["label"].is_string());
                b["instructions"].as_array().unwrap().len()
            })
            .sum();
        assert_eq!(instructions, function.instructions().count());
        // Opcodes carry their modifiers and never the guard.
        for b in blocks {
            for op in b["instructions"].as_array().unwrap() {
                let op = op.as_str().unwrap();
                assert!(!op.starts_with('@') && !op.contains(' '), "{op}");
            }
        }
    }
}

#[test]
fn ptx_output_file_is_written_whole() {
    let ptx = example_ptx();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model.json");
    let output = cuda_flux(&["ptx", ptx.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(output.status.success());
    assert!(output.stdout.is_empty());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(json["functions"].is_array());
    // Nothing but the result is left in the directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn summary_lists_every_function() {
    let ptx = example_ptx();
    let output = cuda_flux(&["summary", ptx.to_str().unwrap()]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let module = ptx_lexer::parse(std::fs::read_to_string(&ptx).unwrap()).unwrap();
    for f in module.functions().filter(|f| f.is_definition()) {
        let line = text
            .lines()
            .find(|l| l.contains(f.name()))
            .unwrap_or_else(|| panic!("{text}"));
        let columns: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(columns[1], f.blocks().len().to_string(), "{line}");
        assert_eq!(columns[2], f.instructions().count().to_string(), "{line}");
    }
}

#[test]
fn bad_input_is_one_clear_line_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.ptx");
    let output = cuda_flux(&["ptx", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr_line(&output).contains("missing.ptx"));

    let broken = dir.path().join("broken.ptx");
    std::fs::write(
        &broken,
        ".version 7.8\n.visible .entry k()\n{\n\tmov.u32 %r1, #1;\n}\n",
    )
    .unwrap();
    let output = cuda_flux(&["ptx", broken.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let line = stderr_line(&output);
    assert!(
        line.contains("broken.ptx") && line.contains("4:15") && line.contains("'#'"),
        "{line}"
    );
    assert!(output.stdout.is_empty(), "no partial output");

    let ptx = example_ptx();
    let unwritable = dir.path().join("no/such/dir/out.json");
    let output = cuda_flux(&[
        "ptx",
        ptx.to_str().unwrap(),
        "-o",
        unwritable.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr_line(&output).contains("no/such/dir"));

    let output = cuda_flux(&["frobnicate"]);
    assert_eq!(output.status.code(), Some(2), "usage errors exit 2");
}

#[test]
fn placement_refuses_an_unknown_architecture_or_function_in_one_line() {
    let ptx = example_ptx();
    let ptx = ptx.to_str().unwrap();
    let output = cuda_flux(&["placement", "--arch", "compute_70", ptx]);
    assert_eq!(output.status.code(), Some(1));
    let line = stderr_line(&output);
    assert!(
        line.contains("saxpy.ptx") && line.contains("'compute_70' is not an architecture"),
        "{line}"
    );
    let output = cuda_flux(&["placement", "--kernel", "no_such_kernel", ptx]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr_line(&output).contains("no function named \"no_such_kernel\""));
    assert!(output.stdout.is_empty(), "no partial output");
}

#[test]
fn placement_before_sm_30_names_loops_lanes_leave_at_different_times() {
    // loops.cu's data-dependent loops are ones that lanes leave at different times: counted
    // in registers from sm_30 (with match.sync from sm_70, without it before), at their blocks
    // before. (saxpy's grid-stride loop is counted from the launch.)
    let ptx = loops_ptx();
    let ptx = ptx.to_str().unwrap();
    for arch in ["sm_70", "sm_50"] {
        let placed =
            String::from_utf8(cuda_flux(&["placement", "--arch", arch, ptx]).stdout).unwrap();
        assert!(
            placed.contains("lanes leave at different times and meet at"),
            "{arch}: {placed}"
        );
    }
    let output = cuda_flux(&["placement", "--arch", "sm_20", ptx]);
    let sm20 = String::from_utf8(output.stdout).unwrap();
    assert!(
        sm20.contains("combining their counts needs shfl.sync (sm_30)"),
        "{sm20}"
    );
}
