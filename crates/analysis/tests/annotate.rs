//! `cuda-flux annotate` and `cuda-flux html` on a profile whose snapshot is real: the corpus's
//! saxpy program compiled by clang-16 with `-g`, instrumented by device-runtime and described by
//! the same code the driver embeds (`snapshot_text::describe_blocks`), so the block list, the
//! instruction text and the `.loc` lines are what a real build records. Only the counts are
//! made up (no GPU needed): distinct per block, so that a count in the wrong place shows.

mod common;
use test_support as support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use host_runtime::counts::OpcodeTable;
use host_runtime::report::{BlockCounts, Kernel, Launch, Report};
use host_runtime::snapshot::Block;

use common::{cuda_flux, ok};

fn dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("analysis-annotate");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The corpus source, its `-g` PTX, and the profile written from them (built once).
struct Fixture {
    source: PathBuf,
    ptx: String,
    profile: PathBuf,
    report: Report,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let source = support::repo_root().join("corpus/saxpy.cu");
        let ptx_path = dir().join("saxpy.g.ptx");
        support::compile_with(&source, support::Compiler::Clang, "sm_70", true, &ptx_path).unwrap();
        let ptx = std::fs::read_to_string(&ptx_path).unwrap();
        let mut module = ptx_lexer::parse(ptx.clone()).unwrap();
        let instrumented = device_runtime::instrument_module(&mut module);
        // As the driver does: the instrumented PTX as written, parsed again.
        let module = ptx_lexer::parse(module.to_ptx()).unwrap();
        let kernels = instrumented
            .iter()
            .map(|k| {
                let mut blocks: Vec<Block> = k
                    .blocks
                    .iter()
                    .map(|b| Block {
                        function: b.function.clone(),
                        label: b.label.clone(),
                        instructions: b.instructions.iter().map(|o| o.to_string()).collect(),
                        ..Block::default()
                    })
                    .collect();
                let files = analysis::snapshot_text::describe_blocks(&module, &mut blocks);
                let table = OpcodeTable::new(&blocks);
                let threads: Vec<u64> = (0..blocks.len() as u64).map(|i| 1000 + 37 * i).collect();
                let warps: Vec<u64> = threads.iter().map(|t| t.div_ceil(32)).collect();
                let counts = table.count(&threads, &warps);
                let launch = Launch {
                    grid: [20, 1, 1],
                    block: [256, 1, 1],
                    dynamic_shared_bytes: 0,
                    stream: 0,
                    device: 0,
                    mode: host_runtime::config::Mode::All,
                    instrumented: true,
                    reason: None,
                    block_counts: Some(BlockCounts { threads, warps }),
                    instructions: Some(counts.clone()),
                };
                Kernel {
                    name: k.kernel.clone(),
                    demangled: k.kernel.clone(),
                    source: source.display().to_string(),
                    arch: 70,
                    instrumented: true,
                    reason: None,
                    blocks,
                    files,
                    launches: vec![launch],
                    totals: counts,
                }
            })
            .collect();
        let report = Report {
            schema: "cuda-flux/1".into(),
            program: vec!["./saxpy".into()],
            pid: 1,
            devices: vec![],
            kernels,
        };
        let profile = dir().join("saxpy.profile.json");
        std::fs::write(&profile, serde_json::to_string(&report).unwrap()).unwrap();
        Fixture {
            source,
            ptx,
            profile,
            report,
        }
    })
}

fn saxpy(report: &Report) -> &Kernel {
    report
        .kernels
        .iter()
        .find(|k| k.name.contains("saxpy"))
        .expect("saxpy kernel")
}

#[test]
fn the_profile_with_text_and_lines_conforms_to_the_schema() {
    let f = fixture();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(support::repo_root().join("docs/cuda-flux-1.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&f.profile).unwrap()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    // A real -g build: every block has its text, and line runs covering its instructions.
    let k = saxpy(&f.report);
    assert!(!k.files.is_empty());
    for block in &k.blocks {
        assert_eq!(block.text.len(), block.instructions.len());
        let covered: u32 = block.lines.iter().map(|r| r[2]).sum();
        assert_eq!(covered as usize, block.instructions.len());
    }
}

#[test]
fn annotate_margin_counts_are_the_profiles_block_counts() {
    let f = fixture();
    let k = saxpy(&f.report);
    let out = ok(&cuda_flux(&[
        "annotate".as_ref(),
        f.profile.as_os_str(),
        "--kernel".as_ref(),
        "saxpy".as_ref(),
    ]));
    let counts = k.launches[0].block_counts.as_ref().unwrap();
    let headers: Vec<&str> = out.lines().filter(|l| l.contains("// block #")).collect();
    assert_eq!(headers.len(), k.blocks.len(), "{out}");
    for (index, line) in headers.iter().enumerate() {
        let margin: Vec<&str> = line.split('|').next().unwrap().split_whitespace().collect();
        // [*rank] threads warps simd
        let numbers: Vec<&str> = margin
            .iter()
            .copied()
            .filter(|c| !c.starts_with('*'))
            .collect();
        assert_eq!(numbers[0], counts.threads[index].to_string(), "{line}");
        assert_eq!(numbers[1], counts.warps[index].to_string(), "{line}");
        assert!(line.contains(&format!("// block #{index},")), "{line}");
    }
    // The hottest block (the last: counts grow with the index) is ranked first.
    let last = headers.last().unwrap();
    assert!(last.trim_start().starts_with("*1"), "{last}");
    // The listing shows the instruction text the profile recorded.
    for block in &k.blocks {
        for text in &block.text {
            assert!(out.contains(text.as_str()), "{text} missing from\n{out}");
        }
    }
}

#[test]
fn loc_lines_map_to_the_right_source_lines() {
    let f = fixture();
    let k = saxpy(&f.report);
    // Independently of the snapshot code: the `.loc` in force before saxpy's fma in the PTX
    // text names line 9 of saxpy.cu (`y[i] = a * x[i] + y[i];`).
    let before_fma = f
        .ptx
        .lines()
        .take_while(|l| !l.trim_start().starts_with("fma.rn.f32"))
        .filter(|l| l.trim_start().starts_with(".loc"))
        .last()
        .unwrap();
    let fields: Vec<&str> = before_fma.split_whitespace().collect();
    let (file, line): (u32, u32) = (fields[1].parse().unwrap(), fields[2].parse().unwrap());
    assert_eq!(k.files[&file], f.source.display().to_string());
    let source_line = std::fs::read_to_string(&f.source)
        .unwrap()
        .lines()
        .nth(line as usize - 1)
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(source_line, "y[i] = a * x[i] + y[i];");
    // The snapshot puts the fma on that line.
    let (block_index, block) = k
        .blocks
        .iter()
        .enumerate()
        .find(|(_, b)| b.instructions.iter().any(|o| o == "fma.rn.f32"))
        .unwrap();
    let fma = block
        .instructions
        .iter()
        .position(|o| o == "fma.rn.f32")
        .unwrap();
    let mut at = 0;
    let run = block
        .lines
        .iter()
        .find(|r| {
            at += r[2] as usize;
            at > fma
        })
        .unwrap();
    assert_eq!((run[0], run[1]), (file, line));

    // The by-line view: that line's executions are the block counts times the instructions
    // the runs put on it, and it shows the source text.
    let counts = k.launches[0].block_counts.as_ref().unwrap();
    let expected: u64 = k
        .blocks
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let n: u64 = b
                .lines
                .iter()
                .filter(|r| (r[0], r[1]) == (file, line))
                .map(|r| u64::from(r[2]))
                .sum();
            n * counts.threads[i]
        })
        .sum();
    assert!(expected >= counts.threads[block_index]);
    let out = ok(&cuda_flux(&[
        "annotate".as_ref(),
        f.profile.as_os_str(),
        "--kernel".as_ref(),
        "saxpy".as_ref(),
        "--by-line".as_ref(),
    ]));
    assert!(!out.contains("// block #"), "only the line view: {out}");
    let place = format!("{}:{line} ", f.source.display());
    let row = out
        .lines()
        .find(|l| l.starts_with(&place))
        .unwrap_or_else(|| panic!("no row for {place} in\n{out}"));
    let columns: Vec<&str> = row[place.len()..].split_whitespace().collect();
    assert_eq!(columns[0], expected.to_string(), "{row}");
    assert!(row.ends_with("y[i] = a * x[i] + y[i];"), "{row}");
}

#[test]
fn annotate_errors_are_one_line_naming_file_and_kernel() {
    let f = fixture();
    let output = cuda_flux(&[
        "annotate".as_ref(),
        f.profile.as_os_str(),
        "--kernel".as_ref(),
        "no_such_kernel".as_ref(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no_such_kernel") && err.contains("saxpy.profile.json"),
        "{err}"
    );
    assert!(output.stdout.is_empty());
    // Without --kernel it is a usage error.
    let output = cuda_flux(&["annotate".as_ref(), f.profile.as_os_str()]);
    assert_eq!(output.status.code(), Some(2));
}

/// Checks the page's structure; returns the hot blocks' (index, threads, warps) attributes.
fn check_html(html: &str) -> Vec<(usize, u64, u64)> {
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    // Self-contained: nothing is fetched.
    for needle in [
        "<script src",
        "<link",
        "@import",
        "url(",
        "src=\"http",
        "href=\"http",
    ] {
        assert!(!html.contains(needle), "{needle} in the page");
    }
    assert!(html.contains("<svg") && html.contains("<rect"), "a chart");
    assert!(html.contains("inst_executed"), "metric groups");
    let mut blocks = Vec::new();
    for part in html.split("data-block=\"").skip(1) {
        let number = |after: &str| -> u64 {
            let rest = &part[part.find(after).unwrap() + after.len()..];
            rest[..rest.find('"').unwrap()].parse().unwrap()
        };
        let index: usize = part[..part.find('"').unwrap()].parse().unwrap();
        blocks.push((index, number("data-threads=\""), number("data-warps=\"")));
    }
    blocks
}

#[test]
fn html_is_one_self_contained_page_with_the_profiles_counts() {
    let f = fixture();
    let page = dir().join("saxpy.html");
    let _ = std::fs::remove_file(&page);
    let output = cuda_flux(&[
        "html".as_ref(),
        f.profile.as_os_str(),
        "-o".as_ref(),
        page.as_os_str(),
    ]);
    assert!(
        output.status.success() && output.stdout.is_empty(),
        "{output:?}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let hot = check_html(&html);
    // Five hottest blocks per kernel, with the profile's counts.
    let k = saxpy(&f.report);
    let counts = k.launches[0].block_counts.as_ref().unwrap();
    assert!(!hot.is_empty());
    let (index, threads, warps) = hot[0];
    assert_eq!(
        index,
        k.blocks.len() - 1,
        "saxpy's hottest block comes first"
    );
    assert_eq!(
        (threads, warps),
        (counts.threads[index], counts.warps[index])
    );
    assert!(
        html.contains(&format!("{}:9<", f.source.display())),
        "source lines table"
    );

    // A bad input: the earlier page stays as it was, nothing else is left in the directory.
    let before = std::fs::read(&page).unwrap();
    let truncated = dir().join("html-truncated.json");
    let text = std::fs::read_to_string(&f.profile).unwrap();
    std::fs::write(&truncated, &text[..text.len() / 3]).unwrap();
    let output = cuda_flux(&[
        "html".as_ref(),
        f.profile.as_os_str(),
        truncated.as_os_str(),
        "-o".as_ref(),
        page.as_os_str(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(std::fs::read(&page).unwrap(), before);

    render_in_chromium(&page);
}

/// Renders the page in headless Chromium when it is installed (Debian's `chromium`, from
/// scripts/setup.sh): a screenshot that is not one flat colour, and the chart's SVG in the DOM
/// after load. Without it the structure checks above are all.
fn render_in_chromium(page: &Path) {
    let Some(chromium) = ["chromium", "chromium-browser"].iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        eprintln!("chromium is not on PATH: checked the HTML structure only (scripts/setup.sh installs it)");
        return;
    };
    let url = format!("file://{}", page.display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--window-size=1200,2000",
    ];
    let png = dir().join("saxpy.png");
    let _ = std::fs::remove_file(&png);
    let output = Command::new(chromium)
        .args(common)
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    // A blank 1200x2000 page compresses to a few kilobytes; text, tables and bars do not.
    assert!(bytes.len() > 20_000, "screenshot of {} bytes", bytes.len());
    let dom = Command::new(chromium)
        .args(common)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("<svg") && dom.contains("<rect"),
        "SVG in the DOM"
    );
}
