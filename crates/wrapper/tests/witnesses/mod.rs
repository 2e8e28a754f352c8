//! The witness check of the corpus programs (corpus/README.md), shared by the tests that run
//! them: a program passes its own check, and its profile's witness opcodes count exactly what
//! its witness counters say.
// Each test file uses what it needs of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::process::Output;

use serde_json::Value;

pub fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

/// `witness: threads=N warps=M` as the program printed it.
pub fn witness(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("witness:"))?;
    let field = |name: &str| -> Option<u64> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
    };
    Some((field("threads=")?, field("warps=")?))
}

/// Thread and warp totals per opcode, summed over every kernel of a profile.
pub fn opcode_totals(profile: &Value) -> BTreeMap<String, (u64, u64)> {
    let mut totals = BTreeMap::new();
    for kernel in profile["kernels"].as_array().into_iter().flatten() {
        for (opcode, counts) in kernel["totals"].as_object().into_iter().flatten() {
            let entry = totals.entry(opcode.clone()).or_insert((0, 0));
            entry.0 += counts["threads"].as_u64().unwrap_or(0);
            entry.1 += counts["warps"].as_u64().unwrap_or(0);
        }
    }
    totals
}

/// The witness check for one run: PASS, every launched kernel instrumented, counts equal.
pub fn check_witness(name: &str, output: &Output, profile: Option<&Value>) -> Result<(), String> {
    let text = text(output);
    if output.status.code() != Some(0) || !text.contains("result: PASS") {
        return Err(format!(
            "{name}: did not pass on the CPU target ({:?}):\n{text}",
            output.status.code()
        ));
    }
    let (threads, warps) = witness(&text).ok_or_else(|| format!("{name}: no witness line"))?;
    let profile = profile.ok_or_else(|| format!("{name}: no profile written"))?;
    for kernel in profile["kernels"].as_array().into_iter().flatten() {
        let launched = kernel["launches"].as_array().is_some_and(|l| !l.is_empty());
        if launched && kernel["instrumented"] != Value::Bool(true) {
            return Err(format!(
                "{name}: kernel {} ran uninstrumented: {}",
                kernel["name"], kernel["reason"]
            ));
        }
    }
    witness_opcodes_match(name, &text, profile, (threads, warps))
}

/// Whether the profile's counts of the witness opcodes equal the witness `(threads, warps)`:
/// one `atom.global.add.u32` per witnessed thread, one `atom.global.add.u64` per warp visit (per
/// thread where the program's witness line says "predicated": a branch-free witness).
pub fn witness_opcodes_match(
    name: &str,
    text: &str,
    profile: &Value,
    (threads, warps): (u64, u64),
) -> Result<(), String> {
    let predicated = text
        .lines()
        .any(|l| l.starts_with("witness:") && l.contains(" predicated"));
    let totals = opcode_totals(profile);
    let u32 = totals.get("atom.global.add.u32").copied().unwrap_or((0, 0));
    let u64 = totals.get("atom.global.add.u64").copied().unwrap_or((0, 0));
    let u64_expected = if predicated {
        (threads, warps)
    } else {
        (warps, warps)
    };
    if (u32, u64) != ((threads, warps), u64_expected) {
        return Err(format!(
            "{name}: witness threads={threads} warps={warps}, but the profile says \
             atom.global.add.u32 {u32:?} and atom.global.add.u64 {u64:?} (threads, warps)"
        ));
    }
    Ok(())
}

/// Every launch's per-block thread and warp counts, per kernel, in an order that does not
/// depend on the order in which host threads launched.
pub fn block_counts(profile: &Value) -> BTreeMap<String, Vec<String>> {
    let mut counts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for kernel in profile["kernels"].as_array().into_iter().flatten() {
        let name = kernel["name"].as_str().unwrap_or_default().to_string();
        let launches = counts.entry(name).or_default();
        for launch in kernel["launches"].as_array().into_iter().flatten() {
            launches.push(launch["block_counts"].to_string());
        }
        launches.sort();
    }
    counts
}
