//! The analysis commands (`metrics`, `report`, `features`, `compare`) on small synthetic
//! profiles and reference CSVs under `tests/data/` (hand-written from the documented formats;
//! see `tests/data/README.md`). Expected numbers are worked out by hand in the comments.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{cuda_flux, ok};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Exit status 1 and exactly one line on stderr, which is returned.
fn fails(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(text.lines().count(), 1, "one line: {text:?}");
    assert!(text.starts_with("cuda-flux: error: "), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    assert!(output.stdout.is_empty());
    text
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("analysis-analysis");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn ranks() -> [PathBuf; 2] {
    [data("rank0.json"), data("rank1.json")]
}

#[test]
fn synthetic_profiles_conform_to_the_schema() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cuda-flux-1.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    for path in ranks() {
        let profile: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&profile)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
    }
}

#[test]
fn metrics_merge_ranks_and_sum_counts() {
    let [a, b] = ranks();
    let out = ok(&cuda_flux(&[
        "metrics".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
    ]));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let kernels = json["kernels"].as_array().unwrap();
    // axpy (both files), reduce (rank 0), idle (rank 1, never launched).
    let names: Vec<&str> = kernels
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["_Z4axpyifPKfPf", "_Z6reducePKdPdi", "_Z4idlev"]);
    let axpy = &kernels[0];
    assert_eq!(axpy["launches"], 3);
    assert_eq!(axpy["counted_launches"], 2);
    let m = &axpy["metrics"];
    // rank 0: 32 warps through 8 + 10 + 1 instructions; rank 1: 16 warps through the same.
    assert_eq!(m["inst_executed"], 19 * 32 + 19 * 16);
    // Two ld.global.f32 per warp in the body: 2 * 32 + 2 * 16.
    assert_eq!(m["inst_executed_global_loads"], 96);
    assert_eq!(m["inst_executed_global_stores"], 48);
    // fma.rn.f32 by 1000 + 500 threads, counted twice in flop_count_sp.
    assert_eq!(m["flop_count_sp_fma"], 1500);
    assert_eq!(m["flop_count_sp"], 3000);
    assert_eq!(m["inst_fp_32"], 1500);
    // Two ld.param.u64 per thread in the entry block; ld.param.f32, two ld.global.f32 and one
    // st.global.f32 per body thread: 2*1024 + 4*1000 (rank 0) and 2*512 + 4*500 (rank 1).
    assert_eq!(m["inst_compute_ld_st"], 2048 + 4000 + 1024 + 2000);
    // No local, shared or atomic traffic.
    assert_eq!(m["inst_executed_shared_loads"], 0);
    assert_eq!(m["inst_executed_global_atomics"], 0);

    let reduce = &kernels[1]["metrics"];
    // Entry block: 4 warps x 10; $L__BB1_2: 2 warps x 4; ret block 4 x 1; wsum 2 x 3.
    assert_eq!(reduce["inst_executed"], 40 + 8 + 4 + 6);
    assert_eq!(reduce["inst_executed_shared_loads"], 2);
    assert_eq!(reduce["inst_executed_shared_stores"], 4);
    assert_eq!(reduce["inst_executed_global_atomics"], 2);
    // fma.rn.f64 and mul.f64 by 2 threads: 2 * 2 + 2.
    assert_eq!(reduce["flop_count_dp"], 6);
    assert_eq!(reduce["inst_inter_thread_communication"], 2);
    // bra, call.uni, 2 x ret: 128 + 2 + 128 + 2.
    assert_eq!(reduce["inst_control"], 260);
    // 1422 thread instructions in 58 warp instructions.
    let eff = reduce["warp_execution_efficiency"].as_f64().unwrap();
    assert!((eff - 100.0 * 1422.0 / (32.0 * 58.0)).abs() < 1e-9, "{eff}");

    let idle = &kernels[2];
    assert_eq!(idle["launches"], 0);
    assert_eq!(idle["metrics"]["inst_executed"], 0);
    assert!(idle["metrics"]["warp_execution_efficiency"].is_null());
}

#[test]
fn metrics_per_launch_as_csv() {
    let [a, b] = ranks();
    let out = ok(&cuda_flux(&[
        "metrics".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--per-launch".as_ref(),
        "--format".as_ref(),
        "csv".as_ref(),
    ]));
    let rows = analysis::csv::parse(&out).unwrap();
    let header = &rows[0].1;
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    // axpy x3, reduce x1; idle has no launches.
    assert_eq!(rows.len(), 1 + 4);
    let axpy: Vec<&Vec<String>> = rows[1..4].iter().map(|r| &r.1).collect();
    assert_eq!(axpy[0][col("file")], a.display().to_string());
    assert_eq!(axpy[0][col("inst_executed")], "608");
    assert_eq!(axpy[0][col("grid")], "4x1x1");
    // The launch under graph capture was not counted: its metrics are empty.
    assert_eq!(axpy[1][col("instrumented")], "false");
    assert_eq!(axpy[1][col("inst_executed")], "");
    assert_eq!(axpy[2][col("file")], b.display().to_string());
    assert_eq!(axpy[2][col("launch")], "2");
    assert_eq!(axpy[2][col("inst_executed")], "304");
    assert_eq!(axpy[2][col("flop_count_sp_fma")], "500");
    // Rank 1: 8*512 + 10*500 + 512 = 9608 threads over 304 warps.
    let eff: f64 = axpy[2][col("warp_execution_efficiency")].parse().unwrap();
    assert!(
        (eff - 100.0 * 9608.0 / (32.0 * 304.0)).abs() < 0.01,
        "{eff}"
    );
}

#[test]
fn metrics_output_file_is_written_whole_or_not_at_all() {
    let out = scratch("metrics.json");
    let _ = std::fs::remove_file(&out);
    let [a, _] = ranks();
    ok(&cuda_flux(&[
        "metrics".as_ref(),
        a.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(json["kernels"].as_array().unwrap().len(), 2);

    // A bad second input: the earlier output stays as it was.
    let before = std::fs::read(&out).unwrap();
    let bad = scratch("truncated-for-o.json");
    std::fs::write(&bad, &std::fs::read(&a).unwrap()[..100]).unwrap();
    fails(&cuda_flux(&[
        "metrics".as_ref(),
        a.as_os_str(),
        bad.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]));
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

#[test]
fn bad_profiles_are_one_line_naming_the_file() {
    let [a, _] = ranks();
    let text = std::fs::read_to_string(&a).unwrap();

    let truncated = scratch("truncated.json");
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    let err = fails(&cuda_flux(&["metrics".as_ref(), truncated.as_os_str()]));
    assert!(err.contains(&truncated.display().to_string()), "{err}");
    assert!(err.contains("truncated") && err.contains("line"), "{err}");

    let other = scratch("other-schema.json");
    std::fs::write(&other, text.replace("cuda-flux/1", "cuda-flux/2")).unwrap();
    let err = fails(&cuda_flux(&["metrics".as_ref(), other.as_os_str()]));
    assert!(
        err.contains("other-schema.json") && err.contains("cuda-flux/2"),
        "{err}"
    );

    let wrong = scratch("wrong-shape.json");
    std::fs::write(&wrong, text.replace("\"pid\": 4242", "\"pid\": \"x\"")).unwrap();
    let err = fails(&cuda_flux(&["metrics".as_ref(), wrong.as_os_str()]));
    assert!(
        err.contains("wrong-shape.json") && err.contains("line"),
        "{err}"
    );

    let not_profile = scratch("not-profile.json");
    std::fs::write(&not_profile, "{\"a\": 1}").unwrap();
    let err = fails(&cuda_flux(&["metrics".as_ref(), not_profile.as_os_str()]));
    assert!(err.contains("not a cuda-flux profile"), "{err}");

    let missing = scratch("missing.json");
    let _ = std::fs::remove_file(&missing);
    let err = fails(&cuda_flux(&["metrics".as_ref(), missing.as_os_str()]));
    assert!(err.contains("missing.json"), "{err}");

    // Usage errors are clap's, with exit status 2.
    let output = cuda_flux(&["metrics", "--format", "xml", "x.json"]);
    assert_eq!(output.status.code(), Some(2));
}

fn args<'a>(items: &'a [&'a std::ffi::OsStr]) -> &'a [&'a std::ffi::OsStr] {
    items
}

#[test]
fn report_merges_files_per_kernel() {
    let [a, b] = ranks();
    let out = ok(&cuda_flux(args(&[
        "report".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
    ])));
    assert!(
        out.starts_with("cuda-flux report: 3 kernel(s) from 2 file(s)"),
        "{out}"
    );
    let axpy = out.split("\n\n").find(|s| s.starts_with("axpy(")).unwrap();
    assert!(
        axpy.contains("launches: 3 (2 counted) in 2 file(s)"),
        "{axpy}"
    );
    // 8 * (1024 + 512) + 10 * (1000 + 500) + (1024 + 512) thread, 19 * (32 + 16) warp
    // instructions; 28824 / (32 * 912) = 98.77%.
    assert!(
        axpy.contains("instructions: 28824 thread, 912 warp; SIMD efficiency 98.77%"),
        "{axpy}"
    );
    // mov.u32: 3 per thread in the entry block, 3 * 1536 of 28824 threads instructions.
    assert!(
        axpy.contains("mov.u32") && axpy.contains("4608   16.0%"),
        "{axpy}"
    );
    assert!(
        axpy.contains("flop_count_sp") && axpy.contains("3000"),
        "{axpy}"
    );
    // Hottest first: the entry block and the ret block (1536 threads each) before the body
    // (1500), whose last warp is partly active: 1500 / (32 * 48) = 98%.
    let blocks: Vec<&str> = axpy
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("blocks"))
        .skip(1)
        .collect();
    assert_eq!(blocks.len(), 3, "{axpy}");
    assert!(
        blocks[0].contains("#0") && blocks[0].contains("(entry)"),
        "{axpy}"
    );
    assert!(
        blocks[1].contains("#2") && blocks[1].contains("$L__BB0_2"),
        "{axpy}"
    );
    assert!(
        blocks[2].contains("1500") && blocks[2].contains("98%"),
        "{axpy}"
    );

    let reduce = out
        .split("\n\n")
        .find(|s| s.starts_with("reduce("))
        .unwrap();
    // The device function's first block is an entry too, with its own name.
    assert!(reduce.contains("_Z4wsumd / (entry)"), "{reduce}");
    let idle = out.split("\n\n").find(|s| s.starts_with("idle(")).unwrap();
    assert!(idle.contains("not instrumented for sm_90: the kernel uses indirect calls"));
    assert!(idle.contains("no counted launches"));
}

#[test]
fn report_kernel_selection() {
    let [a, _] = ranks();
    let out = ok(&cuda_flux(args(&[
        "report".as_ref(),
        a.as_os_str(),
        "--kernel".as_ref(),
        "reduce".as_ref(),
    ])));
    assert!(out.contains("reduce(double const*, double*, int)"));
    assert!(!out.contains("axpy("));
    let err = fails(&cuda_flux(args(&[
        "report".as_ref(),
        a.as_os_str(),
        "--kernel".as_ref(),
        "nope".as_ref(),
    ])));
    assert!(
        err.contains("\"nope\"") && err.contains("rank0.json"),
        "{err}"
    );
}

#[test]
fn features_one_row_per_launch() {
    let [a, b] = ranks();
    let out = scratch("features.csv");
    let _ = std::fs::remove_file(&out);
    ok(&cuda_flux(args(&[
        "features".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ])));
    let rows = analysis::csv::parse(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let header = &rows[0].1;
    let col = |row: usize, name: &str| -> String {
        rows[row].1[header.iter().position(|h| h == name).unwrap()].clone()
    };
    // axpy: 2 launches in rank 0 (one uncounted), 1 in rank 1; reduce: 1.
    assert_eq!(rows.len(), 1 + 4);
    assert!(rows.iter().all(|r| r.1.len() == header.len()));
    assert_eq!(col(1, "threads"), "1024");
    // ld.global.f32 x2 and st.global.f32 by 1000 threads: 8000 bytes read, 4000 written;
    // fma.rn.f32 by 1000 threads: 2000 flops; intensity 2000 / 12000.
    assert_eq!(col(1, "mem_global"), "3000");
    assert_eq!(col(1, "bytes_read_global"), "8000");
    assert_eq!(col(1, "bytes_written_global"), "4000");
    assert_eq!(col(1, "flops"), "2000");
    assert_eq!(col(1, "arithmetic_intensity"), "0.166667");
    // 19216 thread instructions in 608 warp instructions.
    assert_eq!(
        col(1, "simd_efficiency"),
        format!("{:.6}", 19216.0 / (32.0 * 608.0))
    );
    assert_eq!(col(2, "instrumented"), "false");
    assert_eq!(col(2, "thread_instructions"), "");
    assert_eq!(col(3, "file"), b.display().to_string());
    // reduce: 512 bytes of dynamic shared memory; st.shared.f64 by 128 threads.
    assert_eq!(col(4, "dynamic_shared_bytes"), "512");
    assert_eq!(col(4, "bytes_written_shared"), "1024");
    // atom.global.add.f64 by 2 threads reads and writes 8 bytes each; ld.global.f64 by 128.
    assert_eq!(col(4, "bytes_read_global"), (128 * 8 + 16).to_string());
    assert_eq!(col(4, "bytes_written_global"), "16");
}

fn compare(tool: &str, csv: &str) -> Output {
    let [a, _] = ranks();
    let csv = data(csv);
    cuda_flux(args(&[
        "compare".as_ref(),
        a.as_os_str(),
        tool.as_ref(),
        csv.as_os_str(),
    ]))
}

/// The row of `metric` in the section of `kernel`: [reference, ours, ratio].
fn row(out: &str, kernel: &str, metric: &str) -> Vec<String> {
    let section = out
        .split("\n\n")
        .find(|s| s.starts_with(kernel))
        .unwrap_or_else(|| panic!("{kernel} in {out}"));
    let line = section
        .lines()
        .find(|l| l.split_whitespace().next() == Some(metric))
        .unwrap_or_else(|| panic!("{metric} in {section}"));
    line.split_whitespace()
        .skip(1)
        .take(3)
        .map(str::to_string)
        .collect()
}

#[test]
fn compare_with_nvprof_summary() {
    let out = ok(&compare("--nvprof", "nvprof_summary.csv"));
    // Averages per launch: axpy's one counted launch ran 608 warp instructions and 2000 flops.
    assert_eq!(row(&out, "axpy(", "inst_executed"), ["608", "608", "1.000"]);
    assert_eq!(
        row(&out, "axpy(", "flop_count_sp"),
        ["2000", "2000", "1.000"]
    );
    assert_eq!(
        row(&out, "axpy(", "warp_execution_efficiency"),
        ["98.77", "98.77", "1.000"]
    );
    // reduce: 58 of ours against 64: 0.906.
    assert_eq!(row(&out, "reduce(", "inst_executed"), ["64", "58", "0.906"]);
    // Unmatched kernels and metrics are listed.
    assert!(
        out.contains("reference kernels not in the profile:\n  scale(float*, int)"),
        "{out}"
    );
    assert!(
        out.contains("no cuda-flux counterpart:\n  dram_read_bytes"),
        "{out}"
    );
}

#[test]
fn compare_with_nvprof_gpu_trace() {
    let out = ok(&compare("--nvprof", "nvprof_trace.csv"));
    // axpy's second launch was not counted by cuda-flux: only the first pair is compared.
    assert!(
        out.contains("launches compared: 1 (reference 2, cuda-flux 2, 1 counted)"),
        "{out}"
    );
    assert_eq!(
        row(&out, "axpy(", "flop_count_sp_fma"),
        ["1000", "1000", "1.000"]
    );
    assert_eq!(row(&out, "reduce(", "inst_executed"), ["60", "58", "0.967"]);
    assert_eq!(
        row(&out, "reduce(", "flop_count_sp_fma"),
        ["0", "0", "1.000"]
    );
}

#[test]
fn compare_with_nsight_compute() {
    let out = ok(&compare("--ncu", "ncu.csv"));
    // Names printed differently (`const float *`) still match.
    assert!(out.contains("reference name: axpy(int, float, const float *, float *)"));
    assert_eq!(row(&out, "axpy(", "inst_executed"), ["608", "608", "1.000"]);
    // "1,000" with a thousands separator.
    assert_eq!(
        row(&out, "axpy(", "flop_count_sp_fma"),
        ["1000", "1000", "1.000"]
    );
    // 31.61 active threads per instruction = 98.78%; ours for launch 0: 19216 / (32 * 608) =
    // 98.77%.
    assert_eq!(
        row(&out, "axpy(", "warp_execution_efficiency"),
        ["98.78", "98.77", "1.000"]
    );
    // An sm__ name is read as its smsp__ twin.
    assert_eq!(
        row(&out, "reduce(", "inst_executed_shared_loads"),
        ["2", "2", "1.000"]
    );
    assert!(out.contains("reference kernels not in the profile:\n  scale(float *, int)"));
    assert!(out.contains("no cuda-flux counterpart:\n  dram__bytes_read.sum"));
}

#[test]
fn compare_rejects_unknown_layouts_with_one_line() {
    // An ncu table given as nvprof output, and the other way round.
    let err = fails(&compare("--nvprof", "ncu.csv"));
    assert!(err.contains("ncu.csv: unknown CSV layout"), "{err}");
    let err = fails(&compare("--ncu", "nvprof_summary.csv"));
    assert!(
        err.contains("nvprof_summary.csv: unknown CSV layout"),
        "{err}"
    );
    let broken = scratch("broken.csv");
    std::fs::write(
        &broken,
        "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Value\"\n\"0\",\"k\",\"smsp__inst_executed.sum\",\"x\"\n",
    )
    .unwrap();
    let [a, _] = ranks();
    let err = fails(&cuda_flux(args(&[
        "compare".as_ref(),
        a.as_os_str(),
        "--ncu".as_ref(),
        broken.as_os_str(),
    ])));
    assert!(
        err.contains("broken.csv: line 2") && err.contains("not a number"),
        "{err}"
    );
    std::fs::write(&broken, "\"ID\",\"Kernel Name\n").unwrap();
    let err = fails(&cuda_flux(args(&[
        "compare".as_ref(),
        a.as_os_str(),
        "--ncu".as_ref(),
        broken.as_os_str(),
    ])));
    assert!(
        err.contains("line 1") && err.contains("not closed"),
        "{err}"
    );
    // Neither or both references: a usage error.
    let output = cuda_flux(args(&["compare".as_ref(), a.as_os_str()]));
    assert_eq!(output.status.code(), Some(2));
}

/// A one-launch profile (rank 1's first kernel alone), and its text cut inside the launch record.
fn one_record_stream() -> (String, String) {
    let [_, b] = ranks();
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    let kernels = value["kernels"].as_array_mut().unwrap();
    kernels.truncate(1);
    assert_eq!(kernels[0]["launches"].as_array().unwrap().len(), 1);
    let whole = serde_json::to_string(&value).unwrap();
    let cut = whole[..whole.find("\"block_counts\"").unwrap() + 20].to_string();
    (whole, cut)
}

#[test]
fn a_truncated_one_record_stream_is_one_line_with_its_position_for_every_command() {
    let (whole, cut) = one_record_stream();
    let good = scratch("one-record.json");
    std::fs::write(&good, &whole).unwrap();
    let bad = scratch("one-record-truncated.json");
    std::fs::write(&bad, &cut).unwrap();
    // The whole stream reads.
    let out = ok(&cuda_flux(&["report".as_ref(), good.as_os_str()]));
    assert!(out.contains("launches: 1 (1 counted)"), "{out}");
    let column = format!("line 1 column {}", cut.len());
    let commands: [&[&str]; 5] = [
        &["report"],
        &["metrics"],
        &["metrics", "--per-launch", "--format", "csv"],
        &["features"],
        &["html"],
    ];
    for command in commands {
        let mut args: Vec<&std::ffi::OsStr> = command.iter().map(|a| a.as_ref()).collect();
        args.push(bad.as_os_str());
        let err = fails(&cuda_flux(&args));
        assert!(
            err.contains("one-record-truncated.json: truncated profile") && err.contains(&column),
            "{command:?}: {err}"
        );
    }
    // With -o, nothing is written, and an earlier output is left as it was.
    let out = scratch("one-record-features.csv");
    let _ = std::fs::remove_file(&out);
    fails(&cuda_flux(&[
        "features".as_ref(),
        good.as_os_str(),
        bad.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]));
    assert!(!out.exists());
    ok(&cuda_flux(&[
        "features".as_ref(),
        good.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]));
    let before = std::fs::read(&out).unwrap();
    assert_eq!(before.iter().filter(|&&b| b == b'\n').count(), 2);
    fails(&cuda_flux(&[
        "features".as_ref(),
        bad.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]));
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

#[test]
fn per_launch_json_keeps_the_merged_order_and_no_progress_bar_off_a_terminal() {
    let [a, b] = ranks();
    let output = cuda_flux(&[
        "metrics".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--per-launch".as_ref(),
    ]);
    // stderr is a pipe here: no progress bar, nothing at all.
    assert!(output.stderr.is_empty(), "{output:?}");
    let json: serde_json::Value = serde_json::from_str(&ok(&output)).unwrap();
    let kernels = json["kernels"].as_array().unwrap();
    let launches: Vec<(String, usize)> = kernels
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap().to_string(),
                k["per_launch"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        launches,
        [
            ("_Z4axpyifPKfPf".to_string(), 3),
            ("_Z6reducePKdPdi".to_string(), 1),
            ("_Z4idlev".to_string(), 0)
        ]
    );
    let axpy = kernels[0]["per_launch"].as_array().unwrap();
    assert_eq!(axpy[2]["file"], b.display().to_string());
    assert_eq!(axpy[2]["launch"], 2);
    assert_eq!(axpy[2]["metrics"]["inst_executed"], 304);
    assert!(axpy[1]["metrics"].is_null());
    assert_eq!(kernels[0]["launches"], 3);
}

/// Every command that takes `-o`, on the synthetic profiles: (name, arguments before `-o`).
fn commands_with_output() -> Vec<(&'static str, Vec<std::ffi::OsString>)> {
    let [a, b] = ranks();
    let files = || vec![a.clone().into_os_string(), b.clone().into_os_string()];
    let with = |extra: &[&str]| {
        let mut args = files();
        args.extend(extra.iter().map(Into::into));
        args
    };
    vec![
        ("metrics", with(&[])),
        ("metrics", with(&["--per-launch", "--format", "csv"])),
        ("features", with(&[])),
        (
            "annotate",
            vec![a.clone().into_os_string(), "--kernel".into(), "axpy".into()],
        ),
        ("html", with(&[])),
    ]
}

/// `cuda-flux COMMAND ARGS -o OUT`.
fn run_with_output(command: &str, args: &[std::ffi::OsString], out: &Path) -> Output {
    let mut all: Vec<&std::ffi::OsStr> = vec![command.as_ref()];
    all.extend(args.iter().map(|a| a.as_os_str()));
    all.extend(["-o".as_ref(), out.as_os_str()]);
    cuda_flux(&all)
}

#[test]
fn outputs_are_written_through_links_and_into_devices_and_pipes() {
    use std::os::unix::fs::{symlink, FileTypeExt};
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (command, args) in commands_with_output() {
        let what = format!("{command} {args:?}");
        let plain = dir.path().join("plain.out");
        ok(&run_with_output(command, &args, &plain));
        let expected = std::fs::read(&plain).unwrap();
        assert!(!expected.is_empty(), "{what}");

        // A link: followed; the link stays, its target gets the output.
        let target = dir.path().join("target.out");
        std::fs::write(&target, b"old").unwrap();
        let link = dir.path().join("link.out");
        let _ = std::fs::remove_file(&link);
        symlink("target.out", &link).unwrap();
        ok(&run_with_output(command, &args, &link));
        let meta = std::fs::symlink_metadata(&link).unwrap();
        assert!(
            meta.file_type().is_symlink(),
            "{what}: the link was replaced"
        );
        assert_eq!(std::fs::read(&target).unwrap(), expected, "{what}");

        // /dev/stdout (a pipe here): the output arrives on standard output.
        let output = run_with_output(command, &args, Path::new("/dev/stdout"));
        assert_eq!(ok(&output).into_bytes(), expected, "{what}");

        // /dev/null: written, and still the device.
        ok(&run_with_output(command, &args, Path::new("/dev/null")));
        let meta = std::fs::symlink_metadata("/dev/null").unwrap();
        assert!(
            meta.file_type().is_char_device(),
            "{what}: /dev/null replaced"
        );

        // A named pipe: written into, not replaced.
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        ok(&run_with_output(command, &args, &fifo));
        let meta = std::fs::symlink_metadata(&fifo).unwrap();
        assert!(meta.file_type().is_fifo(), "{what}: the pipe was replaced");
        assert_eq!(reader.join().unwrap(), expected, "{what}");
    }
    // Nothing left behind in the directory.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["fifo", "link.out", "plain.out", "target.out"]);
}

#[test]
fn output_files_get_the_umask_mode_and_replaced_files_keep_theirs() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
    let mut commands = commands_with_output();
    let ptx = dir.path().join("k.ptx");
    std::fs::write(
        &ptx,
        ".version 7.8\n.target sm_70\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n",
    )
    .unwrap();
    commands.push(("ptx", vec![ptx.into_os_string()]));
    for (command, args) in commands {
        let what = format!("{command} {args:?}");
        for umask in ["022", "077", "002"] {
            let out = dir.path().join(format!("new-{umask}.out"));
            let _ = std::fs::remove_file(&out);
            let script = format!("umask {umask}; exec \"$0\" \"$@\"");
            let status = std::process::Command::new("sh")
                .args(["-c", &script, env!("CARGO_BIN_EXE_cuda-flux"), command])
                .args(&args)
                .arg("-o")
                .arg(&out)
                .output()
                .unwrap();
            ok(&status);
            let expected = 0o666 & !u32::from_str_radix(umask, 8).unwrap();
            assert_eq!(
                mode(&out),
                expected,
                "{what}, umask {umask}: {:o}",
                mode(&out)
            );
        }
        // An existing file keeps its mode.
        let existing = dir.path().join("existing.out");
        std::fs::write(&existing, b"old").unwrap();
        std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o640)).unwrap();
        ok(&run_with_output(command, &args, &existing));
        assert_ne!(std::fs::read(&existing).unwrap(), b"old", "{what}");
        assert_eq!(mode(&existing), 0o640, "{what}: {:o}", mode(&existing));
    }
}

#[test]
fn inconsistent_profiles_are_refused_by_every_command() {
    // Issue 14, item 8: a rebuilt kernel's entries were summed block by block by position,
    // block_counts of the wrong length were zero-filled or cut, and totals that disagree with
    // the launches were taken as they were.
    let [a, b] = ranks();
    let dir = tempfile::tempdir().unwrap();
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    let variant = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| -> PathBuf {
        let mut value = original.clone();
        edit(&mut value);
        let path = dir.path().join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    };
    let axpy = |v: &mut serde_json::Value| -> serde_json::Value {
        v["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"] == "_Z4axpyifPKfPf")
            .unwrap()
            .clone()
    };
    let set_axpy = |v: &mut serde_json::Value, k: serde_json::Value| {
        let kernels = v["kernels"].as_array_mut().unwrap();
        let i = kernels
            .iter()
            .position(|k| k["name"] == "_Z4axpyifPKfPf")
            .unwrap();
        kernels[i] = k;
    };
    let cases: Vec<(PathBuf, &str)> = vec![
        (
            // The same kernel and architecture with other code: a block relabelled.
            variant("rebuilt.json", &|v| {
                let mut k = axpy(v);
                let blocks = k["blocks"].as_array_mut().unwrap();
                let last = blocks.len() - 1;
                blocks[last]["label"] = "$L__BB0_99".into();
                set_axpy(v, k);
            }),
            "has different blocks in",
        ),
        (
            variant("short.json", &|v| {
                let mut k = axpy(v);
                let launch = &mut k["launches"][0]["block_counts"];
                launch["threads"].as_array_mut().unwrap().pop();
                set_axpy(v, k);
            }),
            "launch 0: block_counts has",
        ),
        (
            variant("long.json", &|v| {
                let mut k = axpy(v);
                let launch = &mut k["launches"][0]["block_counts"];
                launch["warps"].as_array_mut().unwrap().push(7.into());
                set_axpy(v, k);
            }),
            "launch 0: block_counts has",
        ),
        (
            variant("totals.json", &|v| {
                let mut k = axpy(v);
                let totals = k["totals"].as_object_mut().unwrap();
                let (_, first) = totals.iter_mut().next().unwrap();
                let threads = first["threads"].as_u64().unwrap();
                first["threads"] = (threads + 1).into();
                set_axpy(v, k);
            }),
            "totals are not the sum of the launches' instructions",
        ),
        (
            variant("instructions.json", &|v| {
                let mut k = axpy(v);
                let instructions = k["launches"][0]["instructions"].as_object_mut().unwrap();
                let (_, first) = instructions.iter_mut().next().unwrap();
                first["warps"] = 123456.into();
                set_axpy(v, k);
            }),
            "instructions do not follow from block_counts and blocks",
        ),
    ];
    let nvprof = data("nvprof_summary.csv");
    for (path, expected) in &cases {
        let mut runs: Vec<Vec<&std::ffi::OsStr>> = vec![
            vec!["report".as_ref(), a.as_os_str(), path.as_os_str()],
            vec!["metrics".as_ref(), a.as_os_str(), path.as_os_str()],
            vec![
                "metrics".as_ref(),
                "--per-launch".as_ref(),
                a.as_os_str(),
                path.as_os_str(),
            ],
            vec!["features".as_ref(), a.as_os_str(), path.as_os_str()],
            vec!["html".as_ref(), a.as_os_str(), path.as_os_str()],
        ];
        if !path.ends_with("rebuilt.json") {
            // Within one file (compare and annotate read one).
            runs.push(vec![
                "annotate".as_ref(),
                path.as_os_str(),
                "--kernel".as_ref(),
                "axpy".as_ref(),
            ]);
            runs.push(vec![
                "compare".as_ref(),
                path.as_os_str(),
                "--nvprof".as_ref(),
                nvprof.as_os_str(),
            ]);
        }
        for args in runs {
            let line = fails(&cuda_flux(&args));
            assert!(line.contains(expected), "{args:?}: {line}");
            assert!(
                line.contains(&*path.file_name().unwrap().to_string_lossy()),
                "{args:?}: {line}"
            );
        }
    }
    // The same file twice is no conflict, and the untouched profiles still merge.
    ok(&cuda_flux(&[
        "report".as_ref(),
        b.as_os_str(),
        b.as_os_str(),
    ]));
    ok(&cuda_flux(&[
        "report".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
    ]));
}

#[test]
fn compare_refuses_nonsense_references_and_reads_units_and_spreadsheet_csv() {
    // Issue 14, item 10.
    let [a, _] = ranks();
    let dir = tempfile::tempdir().unwrap();
    let ncu = std::fs::read_to_string(data("ncu.csv")).unwrap();
    let nvprof = std::fs::read_to_string(data("nvprof_summary.csv")).unwrap();
    let run = |tool: &str, text: &str| -> Output {
        let path = dir.path().join("reference.csv");
        std::fs::write(&path, text).unwrap();
        cuda_flux(args(&[
            "compare".as_ref(),
            a.as_os_str(),
            tool.as_ref(),
            path.as_os_str(),
        ]))
    };
    let inst = r#""inst","608""#;
    assert!(ncu.contains(inst));
    // Values that are not counts: refused with the line and the value.
    for bad in ["inf", "NaN", "-608", "6%08", "60,8", "1e999", "+608", " "] {
        let err = fails(&run(
            "--ncu",
            &ncu.replacen(inst, &format!(r#""inst","{bad}""#), 1),
        ));
        assert!(
            err.contains("reference.csv: line 5: value") && err.contains("is not a number"),
            "{bad:?}: {err}"
        );
    }
    let err = fails(&run(
        "--nvprof",
        &nvprof.replacen(",608,608,608", ",608,608,nan", 1),
    ));
    assert!(err.contains("line 7") && err.contains("\"nan\""), "{err}");
    // Unit prefixes are applied; a unit not understood is refused.
    let out = ok(&run("--ncu", &ncu.replacen(inst, r#""Kinst","0.608""#, 1)));
    assert_eq!(row(&out, "axpy(", "inst_executed"), ["608", "608", "1.000"]);
    let out = ok(&run("--ncu", &ncu.replacen(inst, r#""Tinst","5""#, 1)));
    assert_eq!(
        row(&out, "axpy(", "inst_executed")[0],
        "5000000000000",
        "{out}"
    );
    let err = fails(&run("--ncu", &ncu.replacen(inst, r#""Xinst","5""#, 1)));
    assert!(err.contains("unit \"Xinst\""), "{err}");
    // A trailing percent sign and thousands separators are still read.
    let out = ok(&run("--ncu", &ncu.replacen(inst, r#""inst","0,608""#, 1)));
    assert_eq!(row(&out, "axpy(", "inst_executed")[0], "608");
    // A value given twice: refused, naming both lines.
    let duplicated = {
        let line = ncu.lines().find(|l| l.contains(inst)).unwrap();
        format!("{ncu}{line}\n")
    };
    let err = fails(&run("--ncu", &duplicated));
    assert!(err.contains("is given again (first on line 5)"), "{err}");
    let duplicated = {
        let line = nvprof
            .lines()
            .find(|l| l.contains("inst_executed"))
            .unwrap();
        format!("{nvprof}{line}\n")
    };
    let err = fails(&run("--nvprof", &duplicated));
    assert!(err.contains("is given again"), "{err}");
    // A byte order mark, as spreadsheets save CSV: read as without.
    let plain = ok(&run("--ncu", &ncu));
    assert_eq!(ok(&run("--ncu", &format!("\u{feff}{ncu}"))), plain);
    let plain = ok(&run("--nvprof", &nvprof));
    assert_eq!(ok(&run("--nvprof", &format!("\u{feff}{nvprof}"))), plain);
    let table: String = ncu
        .lines()
        .filter(|l| !l.starts_with("=="))
        .map(|l| format!("{l}\r\n"))
        .collect();
    assert_eq!(
        ok(&run("--ncu", &format!("\u{feff}{table}"))),
        ok(&run("--ncu", &ncu))
    );
}

/// A profile of one kernel (one block: `fma.rn.f32`, `add.rn.f32`) with one launch per entry
/// of `per_launch` (threads, warps of the block), as the runtime writes it.
fn huge_profile(path: &Path, grid: [u32; 3], block: [u32; 3], per_launch: &[(u64, u64)]) {
    use host_runtime::report::{BlockCounts, Launch, OpcodeCounts};
    let blocks = vec![host_runtime::snapshot::Block {
        function: "_Z4hugePf".into(),
        label: None,
        instructions: vec!["fma.rn.f32".into(), "add.rn.f32".into()],
        ..Default::default()
    }];
    let table = host_runtime::counts::OpcodeTable::new(&blocks);
    let mut totals = OpcodeCounts::new();
    let launches: Vec<Launch> = per_launch
        .iter()
        .map(|&(threads, warps)| {
            let instructions = table.count(&[threads], &[warps]);
            host_runtime::counts::add_opcode_counts(&mut totals, &instructions);
            Launch {
                grid,
                block,
                dynamic_shared_bytes: 0,
                stream: 0,
                device: 0,
                mode: host_runtime::config::Mode::All,
                instrumented: true,
                reason: None,
                block_counts: Some(BlockCounts {
                    threads: vec![threads],
                    warps: vec![warps],
                }),
                instructions: Some(instructions),
            }
        })
        .collect();
    let profile = serde_json::json!({
        "schema": "cuda-flux/1", "program": ["./huge"], "pid": 1, "devices": [],
        "kernels": [{
            "name": "_Z4hugePf", "demangled": "huge(float*)", "source": "huge.cu", "arch": 90,
            "instrumented": true, "blocks": blocks, "launches": launches, "totals": totals,
        }],
    });
    std::fs::write(path, profile.to_string()).unwrap();
}

#[test]
fn counts_beyond_64_bits_are_exact_or_refused_never_wrapped_or_saturated() {
    // Issue 14, item 11.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    // One launch: each opcode 2^63 thread executions (fits), so thread_inst_executed = 2^64 and
    // flop_count_sp = 3 * 2^63 (fma counts twice) do not fit in 64 bits: computed exactly.
    let max = [u32::MAX; 3];
    huge_profile(&big, max, max, &[(1 << 63, 1 << 58)]);
    // (The JSON numbers are exact integers; serde_json's Value would read them as floats.)
    let text = ok(&cuda_flux(&["metrics".as_ref(), big.as_os_str()]));
    let compact: String = text.split_whitespace().collect();
    for expected in [
        "\"thread_inst_executed\":18446744073709551616,",
        "\"flop_count_sp\":27670116110564327424,",
        "\"inst_executed\":576460752303423488,",
        "\"warp_execution_efficiency\":100.0",
    ] {
        assert!(compact.contains(expected), "{expected} in {text}");
    }
    let csv = ok(&cuda_flux(&[
        "metrics".as_ref(),
        big.as_os_str(),
        "--format".as_ref(),
        "csv".as_ref(),
    ]));
    assert!(csv.contains("18446744073709551616"), "{csv}");
    let report = ok(&cuda_flux(&["report".as_ref(), big.as_os_str()]));
    assert!(
        report.contains("instructions: 18446744073709551616 thread, 576460752303423488 warp; SIMD efficiency 100.00%"),
        "{report}"
    );
    // features: grid x block of six 32-bit dimensions, exactly; the mix and bytes in 128 bits.
    let features = ok(&cuda_flux(&["features".as_ref(), big.as_os_str()]));
    let rows = analysis::csv::parse(&features).unwrap();
    let col = |name: &str| -> String {
        rows[1].1[rows[0].1.iter().position(|h| h == name).unwrap()].clone()
    };
    assert_eq!(
        col("threads"),
        "6277101726617670944954607416215071121746690847213956890625"
    );
    assert_eq!(col("thread_instructions"), "18446744073709551616");
    assert_eq!(col("flops"), "27670116110564327424");
    assert_eq!(col("simd_efficiency"), "1.000000");

    // Two such launches: the block's summed count (2^64) cannot be a 64-bit count: refused
    // with a message, not saturated into a wrong SIMD efficiency.
    let two = dir.path().join("two.json");
    huge_profile(
        &two,
        [1, 1, 1],
        [32, 1, 1],
        &[(1 << 63, 1 << 58), (1 << 63, 1 << 58)],
    );
    for command in ["report", "metrics", "html", "features"] {
        let line = fails(&cuda_flux(&[command.as_ref(), two.as_os_str()]));
        assert!(
            line.contains("_Z4hugePf") && line.contains("cannot be represented"),
            "{command}: {line}"
        );
    }
    // Across files too.
    let err = fails(&cuda_flux(&[
        "report".as_ref(),
        big.as_os_str(),
        big.as_os_str(),
    ]));
    assert!(err.contains("cannot be represented"), "{err}");
}

#[test]
fn a_repeated_json_key_is_refused_by_every_command() {
    // Issue 14, item 12: report, metrics, features, annotate and html took the last value of a
    // repeated key; compare refused some. One rule now: a key given twice is an error.
    let [a, _] = ranks();
    let text = std::fs::read_to_string(&a).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let nvprof = data("nvprof_summary.csv");
    let cases = [
        ("top", "\"pid\": 4242,", "\"pid\": 1, \"pid\": 4242,"),
        ("kernel", "\"arch\": 90,", "\"arch\": 70, \"arch\": 90,"),
        ("launch", "\"stream\": 0,", "\"stream\": 5, \"stream\": 0,"),
        (
            "totals",
            "\"totals\": {",
            "\"totals\": {\"ret\": {\"threads\": 1, \"warps\": 1},",
        ),
        (
            "instructions",
            "\"instructions\": {",
            "\"instructions\": {\"add.s64\": {\"threads\": 0, \"warps\": 0},",
        ),
    ];
    for (what, from, to) in cases {
        assert!(text.contains(from), "{what}");
        let path = dir.path().join(format!("{what}.json"));
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
        let runs: Vec<Vec<&std::ffi::OsStr>> = vec![
            vec!["report".as_ref(), path.as_os_str()],
            vec!["metrics".as_ref(), path.as_os_str()],
            vec![
                "metrics".as_ref(),
                "--per-launch".as_ref(),
                path.as_os_str(),
            ],
            vec!["features".as_ref(), path.as_os_str()],
            vec!["html".as_ref(), path.as_os_str()],
            vec![
                "annotate".as_ref(),
                path.as_os_str(),
                "--kernel".as_ref(),
                "axpy".as_ref(),
            ],
            vec![
                "compare".as_ref(),
                path.as_os_str(),
                "--nvprof".as_ref(),
                nvprof.as_os_str(),
            ],
        ];
        for args in runs {
            let line = fails(&cuda_flux(&args));
            assert!(
                line.contains(&format!("{what}.json")) && line.contains("duplicate"),
                "{what}: {args:?}: {line}"
            );
        }
    }
}

#[test]
fn an_error_never_repeats_itself() {
    // Issue 14, item 15: "cannot write out: failed to persist temporary file: Is a directory
    // (os error 21): Is a directory (os error 21)". The output path becomes a directory while
    // the input is read (after -o was checked): the rename fails, said once.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("input.json");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = dir.path().join("out.csv");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_cuda-flux"))
        .arg("features")
        .arg(&fifo)
        .arg("-o")
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Opening the pipe for writing waits for cuda-flux to open it for reading, which it does
    // after preparing its output.
    let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    std::fs::create_dir(&out).unwrap();
    let [a, _] = ranks();
    std::io::Write::write_all(&mut writer, &std::fs::read(&a).unwrap()).unwrap();
    drop(writer);
    let line = fails(&child.wait_with_output().unwrap());
    assert_eq!(
        line.trim_end(),
        format!(
            "cuda-flux: error: cannot write {}: Is a directory (os error 21)",
            out.display()
        )
    );

    // The general rule, on every cause chain: a cause the line already ends with is left out.
    let persist = tempfile::NamedTempFile::new_in(dir.path())
        .unwrap()
        .persist(&out)
        .unwrap_err();
    let error = anyhow::Error::new(persist).context("cannot write out.csv");
    assert_eq!(
        analysis::error_line(&error),
        "cannot write out.csv: failed to persist temporary file: Is a directory (os error 21)"
    );
}
