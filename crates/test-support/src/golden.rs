//! Golden files: an output compared with its checked-in expected text, so that a change to it
//! shows as a readable diff in the test failure and in review. `UPDATE_GOLDEN=1` writes the
//! current outputs instead of comparing (then review `git diff` and commit them).

use std::path::{Path, PathBuf};

/// The environment variable that makes [`check`] write instead of compare.
pub const UPDATE: &str = "UPDATE_GOLDEN";

/// Whether this run writes golden files (`UPDATE_GOLDEN` set to anything but empty or `0`).
pub fn updating() -> bool {
    std::env::var_os(UPDATE).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The checked-in PTX set (`crates/test-support/golden/ptx/*.ptx`, see the README there), sorted.
pub fn ptx_inputs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/ptx");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no .ptx files in {}", dir.display());
    inputs
}

/// The golden file of `input` (one of [`ptx_inputs`]) for one kind of output:
/// `golden/expected/<input stem>.<kind>` (`kind` as `canonical.ptx`, `instrumented.ptx`,
/// `ptx.json`).
pub fn expected(input: &Path, kind: &str) -> PathBuf {
    let stem = input
        .file_stem()
        .expect("a PTX input has a file name")
        .to_string_lossy();
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden/expected")
        .join(format!("{stem}.{kind}"))
}

/// Runs `check` on every input with its output, collecting every mismatch into one panic, so
/// that one run shows (or, with `UPDATE_GOLDEN=1`, writes) all of them.
pub fn check_all(kind: &str, output: impl Fn(&Path) -> Result<String, String>) {
    let errors: Vec<String> = ptx_inputs()
        .iter()
        .filter_map(|input| {
            let actual = output(input).map_err(|e| format!("{}: {e}", input.display()));
            actual
                .and_then(|actual| check(&expected(input, kind), &actual))
                .err()
        })
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

/// Compares `actual` with the golden file `expected` (or writes it, when [`updating`]).
/// `Err` names the file, shows the first differing lines and says how to update.
pub fn check(expected: &Path, actual: &str) -> Result<(), String> {
    if updating() {
        if let Some(dir) = expected.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        return std::fs::write(expected, actual)
            .map_err(|e| format!("cannot write {}: {e}", expected.display()));
    }
    let want = std::fs::read_to_string(expected).map_err(|e| {
        format!(
            "{}: {e} (run with {UPDATE}=1 to create it)",
            expected.display()
        )
    })?;
    if want == actual {
        return Ok(());
    }
    Err(format!(
        "{} differs (- expected, + actual; run with {UPDATE}=1 to accept):\n{}",
        expected.display(),
        diff(&want, actual)
    ))
}

/// The differing lines of two texts, with their line numbers: a plain positional comparison
/// (enough to show where output changed), at most 40 lines.
fn diff(want: &str, got: &str) -> String {
    let (want, got): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let mut out = Vec::new();
    for i in 0..want.len().max(got.len()) {
        let (w, g) = (want.get(i), got.get(i));
        if w == g {
            continue;
        }
        if out.len() >= 40 {
            out.push("  ...".to_string());
            break;
        }
        if let Some(w) = w {
            out.push(format!("{:>5} - {w}", i + 1));
        }
        if let Some(g) = g {
            out.push(format!("{:>5} + {g}", i + 1));
        }
    }
    if out.is_empty() {
        // Same lines, different line endings or final newline.
        out.push("  (line endings or the final newline differ)".to_string());
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_names_the_changed_lines_only() {
        let d = diff("a\nb\nc\n", "a\nB\nc\nd\n");
        assert_eq!(d, "    2 - b\n    2 + B\n    4 + d");
        assert_eq!(
            diff("a\n", "a"),
            "  (line endings or the final newline differ)"
        );
    }

    #[test]
    fn a_missing_golden_file_says_how_to_create_it() {
        if updating() {
            return;
        }
        let err = check(Path::new("/nonexistent/golden.txt"), "x").unwrap_err();
        assert!(err.contains("UPDATE_GOLDEN=1"), "{err}");
    }
}
