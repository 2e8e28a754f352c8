//! cuda-flux-nvcc's options are written in three places: the parser (`parse_nvcc`), `--help`
//! (`HELP_OPTIONS`) and docs/nvcc.md. This test keeps them together: every spelling the parser
//! accepts is in `--help` (rejected modes such as `-ptx` excepted), every option of `--help` is
//! accepted by the parser, and every option has a spelling in docs/nvcc.md.

use test_support as support;
use wrapper::driver::nvcc::{help_text, parse_nvcc, NvccError};

/// The parser's option groups: the string patterns of each `match` arm of `parse_nvcc` that
/// names options (`"-o" | "--output-file" => ...`), and the `IGNORED` list, one group each.
fn parser_groups() -> Vec<Vec<String>> {
    let path = support::repo_root().join("crates/wrapper/src/driver/nvcc.rs");
    let source = std::fs::read_to_string(&path).unwrap();
    let start = source
        .find("pub fn parse_nvcc")
        .expect("parse_nvcc in nvcc.rs");
    let end = start
        + source[start..]
            .find("\n}\n")
            .expect("the end of parse_nvcc");
    let mut groups = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    for line in source[start..end].lines() {
        let line = line.trim();
        // A pattern line: quoted options joined by `|`, ending in `=>`, `if`, or `|` (continued).
        let is_pattern =
            line.starts_with("\"-") || (line.starts_with("| \"-") && !pending.is_empty());
        if !is_pattern {
            pending.clear();
            continue;
        }
        let head = line.split("=>").next().unwrap_or(line);
        let head = head.split(" if ").next().unwrap_or(head);
        pending.extend(
            head.split('|')
                .map(str::trim)
                .filter(|p| p.starts_with("\"-") && p.ends_with('"'))
                .map(|p| p.trim_matches('"').to_string()),
        );
        if line.contains("=>") {
            groups.push(std::mem::take(&mut pending));
        }
    }
    let ignored_start = source.find("const IGNORED").expect("IGNORED in nvcc.rs");
    let ignored_end = ignored_start + source[ignored_start..].find("];").unwrap();
    for line in source[ignored_start..ignored_end].lines().skip(1) {
        let option = line.trim().trim_end_matches(',').trim_matches('"');
        if option.starts_with('-') {
            groups.push(vec![option.to_string()]);
        }
    }
    assert!(groups.len() > 40, "parser groups not found: {groups:?}");
    groups
}

/// Whether `text` names `option` as a whole word (followed by nothing, a space, `=`, `<`, `)`).
fn names(text: &str, option: &str) -> bool {
    text.match_indices(option).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + option.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

/// Options the parser knows only to reject (a mode cuda-flux-nvcc does not build).
fn rejected(option: &str) -> bool {
    let args: Vec<String> = [option, "x.cu"].iter().map(|s| s.to_string()).collect();
    matches!(parse_nvcc(&args, None), Err(NvccError::Unsupported(..)))
}

#[test]
fn every_accepted_option_is_in_help() {
    let help = help_text();
    let missing: Vec<String> = parser_groups()
        .into_iter()
        .flatten()
        .filter(|o| !names(&help, o) && !rejected(o))
        .collect();
    assert!(missing.is_empty(), "not in --help: {missing:?}");
}

#[test]
fn every_option_in_help_is_accepted() {
    let help = help_text();
    let mut refused = Vec::new();
    // `--options-file` reads a real file.
    let dir = tempfile::tempdir().unwrap();
    let options_file = dir.path().join("options.txt");
    std::fs::write(&options_file, "-O2\n").unwrap();
    let options_file = options_file.to_str().unwrap().to_string();
    // The option headings: `--long <value>   (-short)` lines, not indented.
    for line in help.lines().skip_while(|l| !l.starts_with("Options")) {
        if !line.starts_with('-') {
            continue;
        }
        let long = line.split_whitespace().next().unwrap();
        let (name, inline) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (long, None),
        };
        let takes_value = inline.is_some() || line.contains('<');
        let value = match name {
            "--cuda-flux-target" => "cpu",
            "--machine" => "64",
            "--x" => "cu",
            "--options-file" => options_file.as_str(),
            _ if line.contains("<true|false>") => "true",
            _ if line.contains("<static") => "static",
            _ => "3",
        };
        let mut args = match inline {
            Some(_) => vec![format!("{name}={value}")],
            None if takes_value => vec![name.to_string(), value.to_string()],
            None => vec![name.to_string()],
        };
        args.push("x.cu".to_string());
        if let Err(error) = parse_nvcc(&args, None) {
            // The architecture options are checked with real values by nvcc.rs's unit tests.
            if !matches!(
                name,
                "--gpu-architecture" | "--gpu-code" | "--generate-code"
            ) {
                refused.push(format!("{args:?}: {error}"));
            }
        }
    }
    assert!(
        refused.is_empty(),
        "in --help but refused:\n{}",
        refused.join("\n")
    );
}

#[test]
fn every_option_is_documented() {
    let docs = std::fs::read_to_string(support::repo_root().join("docs/nvcc.md")).unwrap();
    let undocumented: Vec<Vec<String>> = parser_groups()
        .into_iter()
        .filter(|group| !group.iter().any(|o| names(&docs, o)))
        .collect();
    assert!(
        undocumented.is_empty(),
        "options with no spelling in docs/nvcc.md: {undocumented:?}"
    );
}
