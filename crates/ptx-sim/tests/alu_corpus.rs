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
    // Every decoded instruction, and the carry forms, evaluate the same warp-wide as lane by
    // lane (the interpreter's path against the reference).
    let mut warp_checked = decoded.clone();
    for extra in [
        "add.cc.u32",
        "addc.cc.u32",
        "addc.u32",
        "sub.cc.u64",
        "subc.u64",
        "mad.lo.cc.u32",
        "madc.hi.u32",
        "add.sat.s32",
        "setp.lt.and.f32",
        "set.gt.u32.f32",
    ] {
        warp_checked.insert(extra.to_string());
    }
    for opcode in &warp_checked {
        let op = decode(&ptx_lexer::Opcode::new(opcode))
            .unwrap_or_else(|e| panic!("{opcode}: {e}"))
            .unwrap_or_else(|| panic!("{opcode}: engine-owned"));
        check_warp_matches_lanes(opcode, &op);
    }
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

/// Operand bits that reach the corners of every type: zeros, ones, sign bits, small integers,
/// shift counts at and past the width, f16/f32/f64 NaNs, infinities, subnormals and ordinary
/// values, and pseudo-random bits.
fn interesting(seed: &mut u64) -> u64 {
    const SPECIAL: [u64; 24] = [
        0,
        1,
        2,
        31,
        32,
        33,
        63,
        64,
        0xFFFF_FFFF,
        0x8000_0000,
        0x7FFF_FFFF,
        u64::MAX,
        1 << 63,
        0x3F80_0000,           // 1.0f
        0xBF80_0000,           // -1.0f
        0x7FC0_0000,           // NaN (f32)
        0x7F80_0000,           // +inf (f32)
        0x0000_0001,           // least f32 subnormal
        0x4049_0FDB,           // pi (f32)
        0x3FF0_0000_0000_0000, // 1.0 (f64)
        0x7FF8_0000_0000_0000, // NaN (f64)
        0x0000_0000_0000_0001, // least f64 subnormal
        0xC000_0000_0000_0000, // -2.0 (f64)
        0x3C00_7E00,           // f16x2: 1.0 and NaN
    ];
    // xorshift64*
    *seed ^= *seed >> 12;
    *seed ^= *seed << 25;
    *seed ^= *seed >> 27;
    let r = seed.wrapping_mul(0x2545_F491_4F6C_DD1D);
    match r % 4 {
        0 => SPECIAL[(r >> 8) as usize % SPECIAL.len()],
        1 => (r >> 16) & 0xFF,
        2 => (r >> 8) as u32 as u64,
        _ => r,
    }
}

/// `AluOp::eval_warp` against `AluOp::eval` lane by lane, over varied operands, active masks
/// (full, partial, none) and carry flags, with the destination also one of the sources.
fn check_warp_matches_lanes(opcode: &str, op: &ptx_sim::alu::AluOp) {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ opcode.len() as u64;
    for (round, exec) in [u32::MAX, 0x5555_AAAA, 0x8000_0001, 0, u32::MAX, 0x0F0F_F0F0]
        .into_iter()
        .enumerate()
    {
        let mut sources = [[0u64; 32]; 4];
        for row in &mut sources {
            for v in row.iter_mut() {
                *v = interesting(&mut seed);
            }
        }
        let carry = interesting(&mut seed) as u32;
        // Rounds alternate between a separate destination and one that is source 0.
        let in_place = round % 2 == 1;
        let mut dst = [0xDEAD_BEEFu64; 32];
        let mut rows = sources;
        let bits = {
            let [s0, s1, s2, s3] = &mut rows;
            let dst_ptr = if in_place {
                s0.as_mut_ptr()
            } else {
                dst.as_mut_ptr()
            };
            let pointers = [s0.as_ptr(), s1.as_ptr(), s2.as_ptr(), s3.as_ptr()];
            // SAFETY: 32-lane rows, used by nothing else during the call.
            unsafe { op.eval_warp(pointers, exec, carry, dst_ptr) }
        };
        let result = if in_place { rows[0] } else { dst };
        for lane in 0..32 {
            let expected_before = if in_place {
                sources[0][lane]
            } else {
                0xDEAD_BEEF
            };
            if exec >> lane & 1 == 0 {
                assert_eq!(
                    result[lane], expected_before,
                    "{opcode}: inactive lane {lane} written"
                );
                continue;
            }
            let lane_sources = [0, 1, 2, 3].map(|i| sources[i][lane]);
            let want = op.eval(&lane_sources, carry >> lane & 1 != 0);
            assert_eq!(
                (result[lane], bits.second >> lane & 1 != 0),
                (want.value, want.second),
                "{opcode}: lane {lane}, sources {lane_sources:#x?}"
            );
            if op.writes_carry() {
                assert_eq!(
                    bits.carry >> lane & 1 != 0,
                    want.carry,
                    "{opcode}: carry, lane {lane}"
                );
            }
        }
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
