//! Lex and parse throughput on real compiler output.
//!
//! The CUDA corpus is compiled with clang-16 (sm_70, sm_90) and nvcc (sm_70, sm_90); the bodies
//! of all those modules (everything but `.version`, `.target` and `.address_size`) are
//! concatenated under one header, again and again, into one module of about 24 MiB. Function
//! names repeat, which the parser does not mind.
//!
//! `cargo bench -p ptx-lexer --bench parse`

use test_support as support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ptx_lexer::lexer::tokenize;
use ptx_lexer::parse;
use support::Compiler;

/// The size the benchmark input grows to.
const TARGET_BYTES: usize = 24 << 20;

/// Compiles the corpus into the target's temporary directory (files newer than their source are
/// reused) and returns the PTX texts.
fn corpus_ptx() -> Vec<String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ptx-lexer-bench");
    std::fs::create_dir_all(&dir).expect("create the benchmark PTX directory");
    let mut jobs: Vec<(PathBuf, Compiler, &str, PathBuf)> = Vec::new();
    for source in support::corpus_sources() {
        let stem = source.file_stem().unwrap().to_string_lossy().to_string();
        for compiler in [Compiler::Clang, Compiler::Nvcc] {
            for arch in ["sm_70", "sm_90"] {
                let out = dir.join(format!("{stem}.{compiler:?}.{arch}.ptx").to_lowercase());
                jobs.push((source.clone(), compiler, arch, out));
            }
        }
    }
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let errors = support::parallel(&jobs, |(source, compiler, arch, out)| {
        match (modified(source), modified(out)) {
            (Some(s), Some(o)) if o >= s => Ok(()),
            _ => support::compile(source, *compiler, arch, out),
        }
    });
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    jobs.iter()
        .map(|(_, _, _, out)| std::fs::read_to_string(out).expect("generated PTX is readable"))
        .collect()
}

/// One module of about [`TARGET_BYTES`]: one header, then the corpus modules' bodies repeated.
fn big_module() -> String {
    let mut bodies = String::new();
    for text in corpus_ptx() {
        for line in text.split_inclusive('\n') {
            let directive = line.split_whitespace().next();
            if !matches!(directive, Some(".version" | ".target" | ".address_size")) {
                bodies.push_str(line);
            }
        }
        bodies.push('\n');
    }
    let mut input = String::with_capacity(TARGET_BYTES + bodies.len() + 64);
    input.push_str(".version 7.8\n.target sm_90\n.address_size 64\n");
    while input.len() < TARGET_BYTES {
        input.push_str(&bodies);
    }
    input
}

fn bench(c: &mut Criterion) {
    let input = big_module();
    let module = parse(input.as_str()).expect("the benchmark input parses");
    assert_eq!(module.to_ptx(), input, "the benchmark input prints back");
    let functions = module.functions().filter(|f| f.is_definition()).count();
    let instructions: usize = module.functions().map(|f| f.instructions().count()).sum();
    drop(module);
    eprintln!(
        "input: {:.1} MiB, {} lines, {} tokens, {functions} function definitions, \
         {instructions} instructions",
        input.len() as f64 / (1 << 20) as f64,
        input.lines().count(),
        tokenize(&input).unwrap().len(),
    );

    let mut group = c.benchmark_group("ptx");
    group
        .throughput(Throughput::Bytes(input.len() as u64))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(15));
    // Results are dropped outside the measurement. `parse` takes the `String` by value; the
    // copy is made outside the measurement too.
    group.bench_function("tokenize", |b| {
        b.iter_with_large_drop(|| tokenize(black_box(&input)).unwrap())
    });
    group.bench_function("parse", |b| {
        b.iter_batched(
            || input.clone(),
            |text| parse(text).unwrap(),
            BatchSize::LargeInput,
        )
    });
    group.bench_function("parse+to_ptx", |b| {
        b.iter_batched(
            || input.clone(),
            |text| {
                let module = parse(text).unwrap();
                let printed = module.to_ptx();
                (module, printed)
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
