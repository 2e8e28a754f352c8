//! Property tests: the lexer and parser never panic, whatever the input.
//!
//! - Arbitrary bytes (converted lossily to UTF-8), arbitrary strings and soups of PTX tokens:
//!   `parse` returns `Ok` or `Err`; an `Ok` module prints back byte for byte, and its canonical
//!   form parses again, to a module with the same summary (functions, blocks, opcodes).
//! - Real PTX (corpus files compiled by clang-16) with random mutations: the same, plus error
//!   positions (line, column, offset) that lie within the input.
//! - Soups of valid statements always parse, and every edge of them can be split.
//!
//! Whatever parses also goes through `blocks`, `edges`, `summary` and, on a clone of each
//! definition, `insert_at_every_block_top`.
//!
//! Default case counts keep the file at a few seconds in debug builds; for a long run:
//! `PROPTEST_CASES=100000 cargo test --release -p ptx-lexer --test fuzz`.

use test_support as support;

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::Index;
use ptx_lexer::{parse, Instruction, Module, Operand, ParseError, Statement};
use support::Compiler;

// ---- checks shared by every property --------------------------------------------------------

/// Runs everything that works on a parsed module; none of it may panic.
fn exercise(module: &Module) -> Result<(), TestCaseError> {
    for function in module.functions() {
        let blocks = function.blocks();
        let edges = function.edges(&blocks);
        for edge in &edges {
            prop_assert!(edge.from < blocks.len() && edge.to < blocks.len());
        }
        if function.is_definition() {
            let mut clone = function.clone();
            let before = clone.statements().len();
            clone
                .insert_at_every_block_top(|i, _| {
                    vec![Statement::instruction(Instruction::simple(
                        "add.u64",
                        vec![
                            Operand::reg("%fuzz0"),
                            Operand::reg("%fuzz0"),
                            Operand::int(i),
                        ],
                    ))]
                })
                .map_err(|e| TestCaseError::fail(format!("insert_at_every_block_top: {e}")))?;
            prop_assert_eq!(clone.statements().len(), before + blocks.len());
        }
    }
    let summary = module.summary();
    prop_assert_eq!(
        summary.functions.len(),
        module.functions().filter(|f| f.is_definition()).count()
    );
    Ok(())
}

/// The error points into the input: 1-based line and column within it, offset at most its length.
fn check_error_position(input: &str, error: &ParseError) -> Result<(), TestCaseError> {
    let lines = input.lines().count() as u32;
    prop_assert!(
        error.line >= 1 && error.line <= lines + 1,
        "line {} of {} lines: {}",
        error.line,
        lines,
        error
    );
    prop_assert!(error.offset as usize <= input.len(), "offset: {}", error);
    let line_text = input.split('\n').nth(error.line as usize - 1).unwrap_or("");
    prop_assert!(
        error.column >= 1 && error.column as usize <= line_text.chars().count() + 1,
        "column {} of {:?}: {}",
        error.column,
        line_text,
        error
    );
    Ok(())
}

/// Parses `input`: `Ok` must print back byte for byte, print canonically to something that parses
/// again, and survive [`exercise`]; `Err` must point into the input.
fn check(input: &str) -> Result<(), TestCaseError> {
    match parse(input) {
        Ok(module) => {
            prop_assert_eq!(module.to_ptx(), input);
            exercise(&module)?;
            let canonical = module.to_canonical_ptx();
            match parse(canonical.as_str()) {
                Ok(reparsed) => {
                    prop_assert_eq!(
                        reparsed.summary(),
                        module.summary(),
                        "canonical form parses to another model:\n--- input\n{}\n--- canonical\n{}",
                        input,
                        canonical
                    );
                    exercise(&reparsed)?;
                }
                Err(e) => {
                    return Err(TestCaseError::fail(format!(
                        "canonical form does not parse: {e}\n\
                         --- input\n{input}\n--- canonical\n{canonical}"
                    )))
                }
            }
        }
        Err(e) => check_error_position(input, &e)?,
    }
    Ok(())
}

// ---- random input ---------------------------------------------------------------------------

/// Pieces of PTX that random inputs are assembled from: single tokens and whole statements.
const TOKENS: &[&str] = &[
    "{",
    "}",
    ";",
    "@",
    "!",
    "%r1",
    "%p1",
    "%tid.x",
    ".reg",
    ".b32",
    ".pred",
    ".entry",
    ".func",
    ".visible",
    ".global",
    ".param",
    ".u64",
    ".loc",
    ".file",
    ".section",
    ".branchtargets",
    ".callprototype",
    ":",
    "[",
    "]",
    "(",
    ")",
    "<",
    ">",
    ",",
    "|",
    "+",
    "-",
    "_",
    "=",
    "*",
    "/",
    "*/",
    "\"a.cu\"",
    "k",
    "$L__BB0_1",
    "bra",
    "brx.idx",
    "ret",
    "exit",
    "call",
    "add.s32",
    "ld.global.f32",
    "0",
    "1",
    "7.8",
    "12U",
    "0x1F",
    "0f3F800000",
    "4294967296",
    " ",
    "\t",
    "\n",
    "\r\n",
    "// comment\n",
    "/* comment */",
    "$L__BB0_1:",
    "$L__BB0_2:",
    "@%p1 bra $L__BB0_1;",
    "@!%p1 bra.uni $L__BB0_2;",
    "bra.uni $L__BB0_1;",
    "ret;",
    "exit;",
    ".reg .b32 %r<4>;",
    ".reg .pred p, q;",
    "ld.global.v2.f32 {%f1, _}, [%rd1+-8];",
    "setp.lt.s32 %p1|%p2, %r1, -4;",
    "call.uni (%r1), f, (%r2, 1);",
    "ts: .branchtargets $L__BB0_1, $L__BB0_2;",
    "brx.idx %r1, ts;",
    "p0: .callprototype (.param .b32 _) _ (.param .b32 _);",
    ".loc 1 2 3\n",
    ".shared .align 4 .b8 s[16];",
];

/// Pieces that (almost) always make lexing fail: used sparingly.
const POISON: &[&str] = &["\"", "//", "/*", "\u{0}", "é", "#", "."];

/// A piece of random PTX: nearly always from [`TOKENS`], rarely from [`POISON`].
fn piece() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        300 => proptest::sample::select(TOKENS),
        1 => proptest::sample::select(POISON),
    ]
}

/// `cases` cases, or `PROPTEST_CASES` when set (for long runs:
/// `PROPTEST_CASES=100000 cargo test --release -p ptx-lexer --test fuzz`).
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(cases);
    ProptestConfig::with_cases(cases)
}

/// The header of every soup, so that soups reach the function-body parser.
const HEADER: &str = ".version 7.8\n.target sm_70\n.address_size 64\n";

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn arbitrary_strings_never_panic(input in any::<String>()) {
        check(&input)?;
    }

    #[test]
    fn ptx_like_characters_never_panic(
        input in "[ \t\n.%a-z0-9_${}();:,@!<>|+*/\"\\[\\]-]{0,300}",
    ) {
        check(&input)?;
    }

    #[test]
    fn token_soups_never_panic(
        with_header in any::<bool>(),
        function in 0usize..3,
        pieces in proptest::collection::vec(piece(), 0..80),
        separators in proptest::collection::vec(proptest::bool::weighted(0.75), 80),
    ) {
        let mut input = String::new();
        if with_header {
            input.push_str(HEADER);
        }
        input.push_str(match function {
            0 => "",
            1 => ".visible .entry k(.param .u64 p)\n{\n",
            _ => ".func (.reg .b32 r) f(.reg .b32 a)\n{\n",
        });
        for (piece, space) in pieces.iter().zip(&separators) {
            input.push_str(piece);
            if *space {
                input.push(' ');
            }
        }
        if function != 0 {
            input.push_str("\n}\n");
        }
        check(&input)?;
    }
}

/// Whole statements, each valid on its own: any sequence of them is a valid function body.
const STATEMENTS: &[&str] = &[
    "{",
    "}",
    "$L__BB0_1:",
    "$L__BB0_2:",
    "$L__BB0_3:",
    "@%p1 bra $L__BB0_1;",
    "@!%p1 bra.uni $L__BB0_2;",
    "bra.uni $L__BB0_3;",
    "bra.uni $L__BB0_404;",
    "ret;",
    "@%p1 exit;",
    "trap;",
    "add.s32 %r1, %r2, 1;",
    ".reg .b32 %r<4>;",
    ".reg .pred p, q;",
    "ld.global.v2.f32 {%f1, _}, [%rd1+-8];",
    "setp.lt.s32 %p1|%p2, %r1, -4;",
    "call.uni (%r1), f, (%r2, 1);",
    "ts: .branchtargets $L__BB0_1, $L__BB0_2, $L__BB0_404;",
    "brx.idx %r1, ts;",
    "@%p1 brx.idx %r1, ts;",
    "p0: .callprototype (.param .b32 _) _ (.param .b32 _);",
    ".loc 1 2 3",
    ".local .align 4 .b8 s[16];",
    "// comment",
    "/* comment */",
];

proptest! {
    #![proptest_config(config(256))]

    /// Random but valid bodies always parse, and every edge of them can be split (or is refused
    /// with an error).
    #[test]
    fn statement_soups_parse_and_rewrite(
        entry in any::<bool>(),
        statements in proptest::collection::vec(proptest::sample::select(STATEMENTS), 0..60),
    ) {
        let mut input = format!(
            "{HEADER}.visible {} k()\n{{\n",
            if entry { ".entry" } else { ".func" }
        );
        let mut depth = 0usize;
        for statement in statements {
            match statement {
                "{" => depth += 1,
                "}" if depth == 0 => continue,
                "}" => depth -= 1,
                _ => {}
            }
            input.push('\t');
            input.push_str(statement);
            input.push('\n');
        }
        input.push_str(&"}\n".repeat(depth + 1));
        prop_assert!(parse(input.as_str()).is_ok(), "does not parse:\n{}", input);
        check(&input)?;
        let module = parse(input.as_str()).unwrap();
        let function = module.function("k").unwrap();
        let edges = function.edges(&function.blocks());
        for (i, edge) in edges.iter().enumerate() {
            let mut clone = function.clone();
            let code = vec![Statement::instruction(Instruction::simple(
                "add.u32",
                vec![Operand::reg("%fuzz0"), Operand::reg("%fuzz0"), Operand::int(1)],
            ))];
            if clone.split_edge(*edge, &format!("$fuzz_edge{i}"), code).is_ok() {
                prop_assert!(clone.statements().len() > function.statements().len());
            }
        }
    }
}

// ---- mutated real PTX -----------------------------------------------------------------------

/// A few corpus files compiled by clang-16, generated once per test run.
fn real_ptx() -> &'static [String] {
    static FILES: OnceLock<Vec<String>> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ptx-lexer-fuzz");
        std::fs::create_dir_all(&dir).expect("create the fuzz PTX directory");
        let corpus = support::repo_root().join("corpus");
        let jobs: Vec<(&str, &str)> = vec![
            ("saxpy", "sm_70"),
            ("switch_dense", "sm_70"),
            ("device_calls", "sm_90"),
            ("inline_ptx", "sm_90"),
            ("textures", "sm_70"),
        ];
        let errors = support::parallel(&jobs, |(stem, arch)| {
            support::compile(
                &corpus.join(format!("{stem}.cu")),
                Compiler::Clang,
                arch,
                &dir.join(format!("{stem}.clang.{arch}.ptx")),
            )
        });
        assert!(errors.is_empty(), "{}", errors.join("\n"));
        jobs.iter()
            .map(|(stem, arch)| {
                let text = std::fs::read_to_string(dir.join(format!("{stem}.clang.{arch}.ptx")))
                    .expect("generated PTX is readable");
                // The unmutated files must parse: otherwise every mutation would be pointless.
                let module = parse(text.as_str()).unwrap_or_else(|e| panic!("{stem}: {e}"));
                assert_eq!(module.to_ptx(), text);
                text
            })
            .collect()
    })
}

/// One random change to a PTX text, positions given as fractions of its current length.
#[derive(Debug, Clone)]
enum Mutation {
    Delete { at: Index, len: usize },
    Duplicate { from: Index, len: usize, to: Index },
    Insert { at: Index, piece: &'static str },
    SwapLines { a: Index, b: Index },
    ReplaceByte { at: Index, byte: u8 },
    Truncate { at: Index },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let len = prop_oneof![4 => 0usize..16, 1 => 16usize..400];
    prop_oneof![
        3 => (any::<Index>(), len.clone()).prop_map(|(at, len)| Mutation::Delete { at, len }),
        2 => (any::<Index>(), len, any::<Index>())
            .prop_map(|(from, len, to)| Mutation::Duplicate { from, len, to }),
        3 => (any::<Index>(), proptest::sample::select(TOKENS))
            .prop_map(|(at, piece)| Mutation::Insert { at, piece }),
        1 => (any::<Index>(), proptest::sample::select(POISON))
            .prop_map(|(at, piece)| Mutation::Insert { at, piece }),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
        1 => (any::<Index>(), any::<u8>())
            .prop_map(|(at, byte)| Mutation::ReplaceByte { at, byte }),
        1 => any::<Index>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

/// An index into `0..=len`.
fn position(index: &Index, len: usize) -> usize {
    index.index(len + 1)
}

fn apply(text: &mut Vec<u8>, mutation: &Mutation) {
    let n = text.len();
    match mutation {
        Mutation::Delete { at, len } => {
            let start = position(at, n);
            let end = (start + len).min(n);
            text.drain(start..end);
        }
        Mutation::Duplicate { from, len, to } => {
            let start = position(from, n);
            let end = (start + len).min(n);
            let piece = text[start..end].to_vec();
            let to = position(to, n);
            text.splice(to..to, piece);
        }
        Mutation::Insert { at, piece } => {
            let at = position(at, n);
            text.splice(at..at, piece.bytes());
        }
        Mutation::SwapLines { a, b } => {
            let mut lines: Vec<Vec<u8>> = text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
            let (a, b) = (a.index(lines.len()), b.index(lines.len()));
            lines.swap(a, b);
            *text = lines.join(&b'\n');
        }
        Mutation::ReplaceByte { at, byte } => {
            if n > 0 {
                text[at.index(n)] = *byte;
            }
        }
        Mutation::Truncate { at } => text.truncate(position(at, n)),
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn mutated_real_ptx_never_panics(
        file in any::<Index>(),
        mutations in proptest::collection::vec(mutation(), 1..5),
    ) {
        let files = real_ptx();
        let mut text = files[file.index(files.len())].clone().into_bytes();
        for m in &mutations {
            apply(&mut text, m);
        }
        check(&String::from_utf8_lossy(&text))?;
    }
}

// ---- fixed cases ----------------------------------------------------------------------------

/// Inputs that once needed care, or that random generation is unlikely to hit.
#[test]
fn edge_cases_never_panic() {
    let body = |code: &str| format!("{HEADER}.visible .entry k()\n{{\n{code}\n}}\n");
    let cases = [
        String::new(),
        "\n".to_string(),
        "é".to_string(),
        "\u{0}".to_string(),
        "/*".to_string(),
        "\"".to_string(),
        ".file 1 \"a.cu\"".to_string(),
        ".visible".to_string(),
        ".entry".to_string(),
        ".entry k".to_string(),
        ".entry k(".to_string(),
        ".func (".to_string(),
        body("}"),
        body("{"),
        body("@"),
        body("@!"),
        body("L:"),
        body("t: .branchtargets"),
        body("brx.idx %r1, t;\nt: .branchtargets L;"),
        body(".loc 1 2"),
        body(".loc 1 2 99999999999"),
        body(".reg .b32 %r<99999999999>;"),
        body(".reg .b32 %r<"),
        body("ld.global.f32 %f1, [%rd1+"),
        body("ld.global.f32 %f1, [%rd1+-"),
        body("mov.u32 %r1, -"),
        body("mov.u32 %r1, %r2|"),
        body("mov.u32 %r1, {{{"),
        body("mov.u32 %r1, - // comment\n 5;"),
        body("é"),
        format!("{HEADER}.entry k(.param .b8 p[/ /])\n{{\nret;\n}}\n"),
        format!("{HEADER}.entry k(.param .b8 p[/ *])\n{{\nret;\n}}\n"),
        format!("{HEADER}.entry k() .maxntid / / 1\n{{\nret;\n}}\n"),
    ];
    for case in &cases {
        if let Err(e) = check(case) {
            panic!("{case:?}: {e}");
        }
    }
}

/// Operands nested far deeper than any real PTX are an error, not a stack overflow.
#[test]
fn deeply_nested_operands_never_overflow_the_stack() {
    for (open, close) in [("[", "]"), ("{", "}"), ("(", ")")] {
        for depth in [8, 1_000, 100_000] {
            let input = format!(
                "{HEADER}.visible .entry k()\n{{\nmov.u32 %r1, {}%r2{};\n}}\n",
                open.repeat(depth),
                close.repeat(depth)
            );
            if let Err(e) = check(&input) {
                panic!("{open} x {depth}: {e}");
            }
        }
    }
}
