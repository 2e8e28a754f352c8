//! The checked-in PTX set (`crates/test-support/golden`) printed canonically, against its
//! golden files; no CUDA toolchain needed. `UPDATE_GOLDEN=1` rewrites them.

use test_support::golden;

#[test]
fn canonical_print_matches_the_golden_files() {
    golden::check_all("canonical.ptx", |input| {
        let text = std::fs::read_to_string(input).map_err(|e| e.to_string())?;
        let module = ptx_lexer::parse(text.clone()).map_err(|e| e.to_string())?;
        // The lossless print is the input itself; the canonical one is what is compared.
        if module.to_ptx() != text {
            return Err("the lossless print differs from the input".to_string());
        }
        Ok(module.to_canonical_ptx())
    });
}
