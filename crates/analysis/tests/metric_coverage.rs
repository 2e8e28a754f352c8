//! Every opcode that clang-16 and nvcc 11.8 emit for the corpus belongs to a family of the metric
//! table: an opcode missing from the table would be counted only in `inst_executed`.

use test_support as support;

use std::collections::BTreeSet;

#[test]
fn every_corpus_opcode_has_a_metric_family() {
    let files = support::generate_corpus_ptx();
    let mut opcodes = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(&file.path).unwrap();
        let module = ptx_lexer::parse(text).unwrap();
        for function in module.functions() {
            for instruction in function.instructions() {
                opcodes.insert(instruction.opcode.to_string());
            }
        }
    }
    assert!(
        opcodes.len() > 100,
        "only {} distinct opcodes",
        opcodes.len()
    );
    let missing: Vec<&String> = opcodes
        .iter()
        .filter(|o| analysis::metrics::family_of(o).is_none())
        .collect();
    assert!(missing.is_empty(), "opcodes without a family: {missing:?}");
}
