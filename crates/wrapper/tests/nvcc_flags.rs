//! cuda-flux-nvcc's options are defined once, in `OPTIONS` (`driver/nvcc/options.rs`): the parser
//! looks spellings up there and matches on the option's `Flag`, and `--help` is generated from
//! it. These tests check the table against what it drives and against docs/nvcc.md: every
//! spelling finds its own row, `--help` names every option it describes and each of them parses,
//! the rows without help are refused, and docs/nvcc.md names every option.

use test_support as support;
use wrapper::driver::nvcc::options::OPTIONS;
use wrapper::driver::nvcc::{help_text, parse_nvcc, NvccError};

/// Whether `text` names `option` as a whole word (followed by nothing, a space, `=`, `<`, `)`).
fn names(text: &str, option: &str) -> bool {
    text.match_indices(option).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + option.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

#[test]
fn every_spelling_finds_its_own_option() {
    let mut seen = std::collections::HashSet::new();
    for option in OPTIONS {
        for spelling in option.spellings() {
            assert!(seen.insert(spelling), "{spelling} spelled twice");
            let found = wrapper::driver::nvcc::options::find(spelling, spelling);
            assert!(
                found.is_some_and(|(o, glued)| o.flag == option.flag && glued.is_none()),
                "{spelling} does not find {:?}",
                option.flag
            );
        }
    }
}

#[test]
fn help_names_every_option_it_describes_and_the_others_are_refused() {
    let help = help_text();
    for option in OPTIONS {
        match option.help {
            Some(_) => {
                for spelling in option.spellings() {
                    assert!(names(&help, spelling), "{spelling} not in --help");
                }
            }
            None => {
                let args: Vec<String> = [option.long, "x.cu"].map(String::from).to_vec();
                assert!(
                    matches!(parse_nvcc(&args, None), Err(NvccError::Unsupported(..))),
                    "{} is neither described nor refused",
                    option.long
                );
            }
        }
    }
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
            // The architecture options are checked with real values by nvcc/parse.rs's unit tests;
            // `--device-w` is handed to nvcc before parsing (cuda-flux-nvcc's `relocatable_device_code`).
            if !matches!(
                name,
                "--gpu-architecture" | "--gpu-code" | "--generate-code" | "--device-w"
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
    let undocumented: Vec<&str> = OPTIONS
        .iter()
        .filter(|option| !option.spellings().any(|s| names(&docs, s)))
        .map(|option| option.long)
        .collect();
    assert!(
        undocumented.is_empty(),
        "options with no spelling in docs/nvcc.md: {undocumented:?}"
    );
}
