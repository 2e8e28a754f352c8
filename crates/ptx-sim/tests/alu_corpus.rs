//! Every compute instruction that real compilers emit for this repository's CUDA code decodes:
//! the corpus (clang-16 and nvcc, sm_70/sm_90, debug builds) plus the benchmark programs and
//! the corpus at -O0 (clang-16, whose output includes libdevice math). Each instruction is
//! engine-owned or decodes to an `AluOp` whose source count matches its operands.

use test_support as support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use ptx_lexer::{parse, Operand};
use ptx_sim::alu::{decode, is_engine_owned};

/// clang-16 builds the shared corpus support does not make: -O0, and the benchmark programs
/// (which need their include directory).
fn extra_ptx() -> Vec<PathBuf> {
    let root = support::repo_root();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("alu-extra-ptx");
    std::fs::create_dir_all(&dir).expect("create PTX output directory");
    let mut jobs = Vec::new();
    for source in support::corpus_sources() {
        jobs.push((source, "sm_70", "-O0"));
    }
    let programs = root.join("benchmarks/programs");
    let mut benches: Vec<PathBuf> = std::fs::read_dir(&programs)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", programs.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    benches.sort();
    for source in benches {
        for (arch, opt) in [("sm_70", "-O2"), ("sm_90", "-O2"), ("sm_70", "-O0")] {
            jobs.push((source.clone(), arch, opt));
        }
    }
    let out = |(source, arch, opt): &(PathBuf, &str, &str)| {
        let stem = source.file_stem().unwrap().to_string_lossy().to_string();
        dir.join(format!("{stem}.{arch}{opt}.ptx"))
    };
    let errors = support::parallel(&jobs, |job| {
        let (source, arch, opt) = job;
        let output = Command::new("clang-16")
            .args(["-x", "cuda", "--cuda-device-only", "-S", *opt])
            .arg("-Wno-unknown-cuda-version")
            .arg(format!("--cuda-gpu-arch={arch}"))
            .arg(format!("--cuda-path={}", support::CUDA_PATH))
            .arg("-I")
            .arg(root.join("corpus"))
            .arg("-I")
            .arg(&programs)
            .arg("-o")
            .arg(out(job))
            .arg(source)
            .output()
            .map_err(|e| format!("cannot run clang-16 ({e}); run scripts/setup.sh"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "clang-16 {arch} {opt} {}: {}",
                source.display(),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    });
    assert!(
        errors.is_empty(),
        "compilation failed:\n{}",
        errors.join("\n")
    );
    jobs.iter().map(out).collect()
}

/// The operands an instruction's sources occupy: all but the destination (a `p|q` pair is one).
fn source_operands(operands: &[Operand]) -> usize {
    operands.len().saturating_sub(1)
}

#[test]
fn every_compute_instruction_of_the_corpus_decodes() {
    let mut files: Vec<PathBuf> = support::generate_corpus_ptx()
        .into_iter()
        .map(|f| f.path)
        .collect();
    files.extend(extra_ptx());
    let mut failures = BTreeSet::new();
    let mut decoded = BTreeSet::new();
    for path in &files {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let module = parse(text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for function in module.functions() {
            for instruction in function.instructions() {
                let opcode = &instruction.opcode;
                if is_engine_owned(opcode.base()) {
                    continue;
                }
                match decode(opcode) {
                    Ok(Some(op)) => {
                        let sources = source_operands(&instruction.operands);
                        if op.source_count() != sources {
                            failures.insert(format!(
                                "{opcode}: decoded {} sources, the instruction has {sources}",
                                op.source_count()
                            ));
                        }
                        decoded.insert(opcode.as_str().to_string());
                    }
                    Ok(None) => {
                        failures.insert(format!("{opcode}: Ok(None) but not engine-owned"));
                    }
                    Err(e) => {
                        failures.insert(e);
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} opcodes fail:\n{}",
        failures.len(),
        failures.into_iter().collect::<Vec<_>>().join("\n")
    );
    // The corpus exercises the families this module exists for.
    for expected in [
        "add.s32",
        "fma.rn.f32",
        "setp.lt.s32",
        "cvt.rn.f32.s32",
        "selp.b32",
        "div.rn.f64",
        "cvt.f32.f16",
    ] {
        assert!(decoded.contains(expected), "{expected} not seen");
    }
}

#[test]
fn engine_owned_bases_decode_to_none() {
    for opcode in [
        "ld.global.f32",
        "st.shared.u32",
        "mov.u32",
        "bra.uni",
        "shfl.sync.bfly.b32",
        "atom.global.add.u32",
        "cvta.to.global.u64",
        "bar.sync",
        "vote.sync.ballot.b32",
        "tex.1d.v4.f32.s32",
    ] {
        let op = ptx_lexer::Opcode::new(opcode);
        assert!(is_engine_owned(op.base()), "{opcode}");
        assert_eq!(decode(&op), Ok(None), "{opcode}");
    }
}
