//! Streaming at scale: generates a ~1 GB profile with 1,000,000 launch records under
//! `target/streaming-bench/` (not committed; reused when present), then measures
//!
//! * `cuda-flux report` on it as a user runs it (the release binary, wall time, and its peak
//!   RSS from `/usr/bin/time -v` when that is installed), and
//! * in this process, `report`'s, `metrics`' and `features`' library paths, each followed by
//!   this process's peak RSS (`VmHWM` in /proc/self/status; generation streams too, so the
//!   peak is theirs).
//!
//! Run: `cargo bench -p analysis --bench streaming`. Results: benchmarks/results/.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use host_runtime::config::Mode;
use host_runtime::report::{BlockCounts, Launch, OpcodeCounts};

const LAUNCHES: usize = 1_000_000;
const BLOCKS: usize = 12;

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

/// Opcodes of the generated kernel's blocks (a loop-heavy kernel, 12 blocks).
fn block_opcodes(block: usize) -> Vec<&'static str> {
    const OPS: &[&str] = &[
        "ld.global.nc.f32",
        "fma.rn.f32",
        "add.s32",
        "setp.lt.s32",
        "st.global.f32",
        "mul.wide.s32",
        "ld.shared.f32",
        "bar.sync",
        "shfl.sync.down.b32",
        "cvt.rn.f32.s32",
        "mov.u32",
        "add.s64",
        "ld.param.u64",
        "selp.b32",
    ];
    (0..6)
        .map(|i| OPS[(block * 3 + i) % OPS.len()])
        .chain(["bra"])
        .collect()
}

fn generate(path: &Path) -> std::io::Result<()> {
    let blocks: Vec<host_runtime::snapshot::Block> = (0..BLOCKS)
        .map(|b| host_runtime::snapshot::Block {
            function: "_Z5stepsPfS_i".into(),
            label: (b > 0).then(|| format!("$L__BB0_{b}")),
            instructions: block_opcodes(b).iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
        .collect();
    let table = host_runtime::counts::OpcodeTable::new(&blocks);
    let tmp = path.with_extension("json.partial");
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
    write!(
        out,
        r#"{{"schema":"cuda-flux/1","program":["./steps"],"pid":7,"devices":[{{"ordinal":0,"name":"NVIDIA H200","compute_capability":"9.0"}}],"kernels":[{{"name":"_Z5stepsPfS_i","demangled":"steps(float*, float*, int)","source":"steps.cu","arch":90,"instrumented":true,"blocks":"#
    )?;
    serde_json::to_writer(&mut out, &blocks)?;
    out.write_all(b",\"launches\":[")?;
    let mut totals = OpcodeCounts::new();
    for i in 0..LAUNCHES {
        let grid = 64 + (i % 193) as u32;
        let threads: Vec<u64> = (0..BLOCKS as u64)
            .map(|b| u64::from(grid) * 256 * (1 + (b * 7 + i as u64) % 13))
            .collect();
        let warps: Vec<u64> = threads.iter().map(|t| t / 32).collect();
        let instructions = table.count(&threads, &warps);
        for (op, c) in &instructions {
            totals.entry(op.clone()).or_default().add(*c);
        }
        let launch = Launch {
            grid: [grid, 1, 1],
            block: [256, 1, 1],
            dynamic_shared_bytes: 0,
            stream: (i % 4) as u64,
            device: 0,
            mode: Mode::All,
            instrumented: true,
            reason: None,
            block_counts: Some(BlockCounts { threads, warps }),
            instructions: Some(instructions),
        };
        if i > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut out, &launch)?;
    }
    out.write_all(b"],\"totals\":")?;
    serde_json::to_writer(&mut out, &totals)?;
    out.write_all(b"}]}")?;
    out.flush()?;
    drop(out);
    std::fs::rename(&tmp, path)
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> anyhow::Result<()> {
    let dir = target_dir().join("streaming-bench");
    std::fs::create_dir_all(&dir)?;
    let profile = dir.join("profile-1m-launches.json");
    if !profile.exists() {
        let start = Instant::now();
        generate(&profile)?;
        eprintln!("generated in {:.1} s", start.elapsed().as_secs_f64());
    }
    let bytes = std::fs::metadata(&profile)?.len();
    println!(
        "profile: {} ({:.2} GB, {} launch records)",
        profile.display(),
        bytes as f64 / 1e9,
        LAUNCHES
    );
    println!(
        "peak RSS before the measurements: {} MiB",
        peak_rss_kib() / 1024
    );

    // The command as a user runs it.
    let binary = env!("CARGO_BIN_EXE_cuda-flux");
    let start = Instant::now();
    let output = if Path::new("/usr/bin/time").exists() {
        Command::new("/usr/bin/time")
            .arg("-v")
            .arg(binary)
            .arg("report")
            .arg(&profile)
            .output()?
    } else {
        Command::new(binary).arg("report").arg(&profile).output()?
    };
    let wall = start.elapsed().as_secs_f64();
    anyhow::ensure!(
        output.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let child_rss = String::from_utf8_lossy(&output.stderr)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
                .map(str::to_string)
        });
    println!(
        "cuda-flux report: {wall:.2} s wall, {:.0} MB/s, peak RSS {}",
        bytes as f64 / 1e6 / wall,
        child_rss.map_or("(no /usr/bin/time)".to_string(), |k| format!(
            "{} MiB",
            k.parse::<u64>().unwrap_or(0) / 1024
        ))
    );

    let files = vec![profile.clone()];
    let start = Instant::now();
    let summary = analysis::aggregate::summarize(&files)?;
    let kernels: Vec<_> = summary.kernels.iter().collect();
    let text = analysis::report::render(&summary, &kernels, Default::default());
    println!(
        "report (library): {:.2} s, {} launches aggregated, peak RSS {} MiB",
        start.elapsed().as_secs_f64(),
        summary.kernels[0].launches,
        peak_rss_kib() / 1024
    );
    assert!(
        text.contains("launches: 1000000 (1000000 counted)"),
        "{text}"
    );

    let start = Instant::now();
    let json = analysis::metric_table::render(&summary, analysis::metric_table::Format::Json)?;
    drop(json);
    let mut sink = std::io::sink();
    analysis::metric_table::write_per_launch(
        &files,
        analysis::metric_table::Format::Csv,
        &mut sink,
    )?;
    println!(
        "metrics --per-launch --format csv (library, to a sink): {:.2} s, peak RSS {} MiB",
        start.elapsed().as_secs_f64(),
        peak_rss_kib() / 1024
    );

    let start = Instant::now();
    let mut csv = std::io::BufWriter::new(std::io::sink());
    analysis::features::write(&files, &mut csv)?;
    println!(
        "features (library, to a sink): {:.2} s, peak RSS {} MiB",
        start.elapsed().as_secs_f64(),
        peak_rss_kib() / 1024
    );
    Ok(())
}
