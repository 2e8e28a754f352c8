//! The checked-in PTX set (`crates/test-support/golden`) instrumented with the default counter
//! placement, against golden files, so that a change to the emitted counter code shows as a diff;
//! no CUDA toolchain needed (the corpus tests assemble what we emit with ptxas).
//! `UPDATE_GOLDEN=1` rewrites them.

use test_support::golden;

#[test]
fn instrumented_ptx_matches_the_golden_files() {
    golden::check_all("instrumented.ptx", |input| {
        let text = std::fs::read_to_string(input).map_err(|e| e.to_string())?;
        let mut module = ptx_lexer::parse(text).map_err(|e| e.to_string())?;
        let kernels = device_runtime::instrument_module(&mut module);
        if kernels.is_empty() {
            return Err("no kernel instrumented".to_string());
        }
        let printed = module.to_ptx();
        // What the driver hands to ptxas must parse again.
        ptx_lexer::parse(printed.clone()).map_err(|e| format!("instrumented PTX: {e}"))?;
        Ok(printed)
    });
}
