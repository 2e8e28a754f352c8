//! `cuda-flux ptx` on the checked-in PTX set (`crates/test-support/golden`), against golden
//! files; no CUDA toolchain needed. `UPDATE_GOLDEN=1` rewrites them.

mod common;

use common::{cuda_flux, ok};
use test_support::golden;

#[test]
fn ptx_command_json_matches_the_golden_files() {
    golden::check_all("ptx.json", |input| {
        let json = ok(&cuda_flux(&["ptx".as_ref(), input.as_os_str()]));
        // The JSON is the model's summary: it must agree with the library's own.
        let text = std::fs::read_to_string(input).map_err(|e| e.to_string())?;
        let module = ptx_lexer::parse(text).map_err(|e| e.to_string())?;
        let summary = serde_json::to_value(module.summary()).map_err(|e| e.to_string())?;
        let printed: serde_json::Value = serde_json::from_str(&json).map_err(|e| e.to_string())?;
        if printed != summary {
            return Err("cuda-flux ptx differs from Module::summary".to_string());
        }
        Ok(json)
    });
}

/// `cuda-flux placement ARGS INPUT`, with the input's directory left out of the output (the
/// golden files must not depend on where the repository is).
fn placement(input: &std::path::Path, args: &[&str]) -> Result<String, String> {
    let mut all: Vec<&std::ffi::OsStr> = vec!["placement".as_ref()];
    all.extend(args.iter().map(|a| std::ffi::OsStr::new(*a)));
    all.push(input.as_os_str());
    let output = ok(&cuda_flux(&all));
    let dir = input
        .parent()
        .ok_or("an input has a directory")?
        .display()
        .to_string();
    Ok(output.replace(&format!("{dir}/"), ""))
}

#[test]
fn placement_command_text_matches_the_golden_files() {
    golden::check_all("placement.txt", |input| placement(input, &[]));
}

#[test]
fn placement_command_json_matches_its_golden_file_and_the_text() {
    let input = golden::ptx_inputs()
        .into_iter()
        .find(|p| p.ends_with("loops.nvcc.sm_70.ptx"))
        .expect("loops.nvcc.sm_70.ptx is in the golden set");
    let json = placement(&input, &["--json"]).unwrap();
    golden::check(&golden::expected(&input, "placement.json"), &json).unwrap();
    // Every loop's decision in the JSON is the one the text prints.
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let text = placement(&input, &[]).unwrap();
    for function in value["functions"].as_array().unwrap() {
        for l in function["loops"].as_array().unwrap() {
            let words = l["text"].as_str().unwrap();
            assert!(text.contains(words), "{words}");
        }
    }
}
