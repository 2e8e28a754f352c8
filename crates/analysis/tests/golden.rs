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
