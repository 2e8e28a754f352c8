//! `cuda-flux annotate`: a kernel's PTX with each block's counts in the margin, the hottest
//! blocks marked, and, when the profile has `.loc` line information (built with `-lineinfo`,
//! `-g` or `-G`), the same counts per source line.
//!
//! The PTX comes from the profile itself (the blocks' `text`, or their opcodes for profiles
//! written before the text was recorded), so the listing is exactly the counted code.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use host_runtime::report::Counts;
use host_runtime::snapshot::Block;

use crate::aggregate::Kernel;
use crate::metrics::simd_efficiency;

/// How much to show.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Blocks marked as hottest (by thread count).
    pub hot: usize,
    /// Only the per-source-line view.
    pub by_line: bool,
}

/// One architecture's blocks with their counts summed over that architecture's entries.
pub struct Listing<'k> {
    /// The architecture.
    pub arch: u32,
    /// The blocks (of the first entry of that architecture).
    pub blocks: &'k [Block],
    /// The `.file` table of their `lines`.
    pub files: &'k BTreeMap<u32, String>,
    /// Per block, summed over launches (zeros when nothing was counted).
    pub counts: Vec<Counts>,
    /// Hotness rank (1 = hottest) of the blocks marked hot.
    pub rank: Vec<Option<usize>>,
}

impl Listing<'_> {
    /// Whether any block has `.loc` line information.
    pub fn has_lines(&self) -> bool {
        self.blocks.iter().any(|b| !b.lines.is_empty())
    }
}

/// The listings of `kernel`, one per architecture, with the `hot` hottest blocks ranked.
pub fn listings(kernel: &Kernel, hot: usize) -> Vec<Listing<'_>> {
    kernel
        .archs
        .iter()
        .filter_map(|&arch| {
            let entries: Vec<_> = kernel
                .entries
                .iter()
                .filter(|e| e.head.arch == arch)
                .collect();
            let first = entries.first()?;
            let blocks = &first.head.blocks;
            let mut counts = vec![Counts::default(); blocks.len()];
            for entry in &entries {
                for (sum, c) in counts.iter_mut().zip(&entry.block_counts) {
                    sum.add(*c);
                }
            }
            let mut order: Vec<usize> = (0..blocks.len())
                .filter(|&i| counts[i].threads > 0)
                .collect();
            order.sort_by(|&a, &b| counts[b].threads.cmp(&counts[a].threads).then(a.cmp(&b)));
            let mut rank = vec![None; blocks.len()];
            for (r, &i) in order.iter().take(hot).enumerate() {
                rank[i] = Some(r + 1);
            }
            Some(Listing {
                arch,
                blocks,
                files: &first.head.files,
                counts,
                rank,
            })
        })
        .collect()
}

/// The instructions of `block` as text: the recorded PTX, else its opcodes.
pub fn instruction_texts(block: &Block) -> Vec<&str> {
    if block.text.len() == block.instructions.len() {
        block.text.iter().map(String::as_str).collect()
    } else {
        block.instructions.iter().map(String::as_str).collect()
    }
}

/// The label of block `index` of `blocks`, or what stands for it.
pub fn label(blocks: &[Block], index: usize) -> &str {
    match &blocks[index].label {
        Some(label) => label,
        None if index == 0 || blocks[index - 1].function != blocks[index].function => "(entry)",
        None => "(fall-through)",
    }
}

/// Counts of one source line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineCounts {
    /// Thread-level instruction executions on this line (128 bits: a block count times the
    /// line's instructions, summed, may exceed `u64::MAX`).
    pub threads: u128,
    /// Warp-level instruction executions.
    pub warps: u128,
    /// Instructions (static) compiled from it.
    pub instructions: u64,
}

/// Per (file name, line): the executions of the instructions compiled from it, i.e. each
/// instruction's block count, summed. Instructions before any `.loc` are left out.
pub fn by_line(listing: &Listing<'_>) -> BTreeMap<(String, u32), LineCounts> {
    let mut lines: BTreeMap<(String, u32), LineCounts> = BTreeMap::new();
    for (block, counts) in listing.blocks.iter().zip(&listing.counts) {
        for &[file, line, n] in &block.lines {
            // File 0: before any `.loc`; line 0: code the compiler attributes to no line.
            if file == 0 || line == 0 {
                continue;
            }
            let name = listing
                .files
                .get(&file)
                .cloned()
                .unwrap_or_else(|| format!("file#{file}"));
            let entry = lines.entry((name, line)).or_default();
            entry.threads += u128::from(counts.threads) * u128::from(n);
            entry.warps += u128::from(counts.warps) * u128::from(n);
            entry.instructions += u64::from(n);
        }
    }
    lines
}

fn simd(c: Counts) -> String {
    simd_efficiency(c.threads, c.warps).map_or("-".to_string(), |p| format!("{p:.0}%"))
}

/// Source files' lines, read once each; a file that cannot be read shows no text.
#[derive(Default)]
struct Sources(BTreeMap<String, Option<Vec<String>>>);

impl Sources {
    fn line(&mut self, file: &str, line: u32) -> String {
        let lines = self.0.entry(file.to_string()).or_insert_with(|| {
            std::fs::read_to_string(file)
                .ok()
                .map(|t| t.lines().map(str::to_string).collect())
        });
        lines
            .as_ref()
            .and_then(|l| l.get((line as usize).checked_sub(1)?))
            .map(|t| t.trim().to_string())
            .unwrap_or_default()
    }
}

/// The annotated text of `kernel`. `Err` with `--by-line` when there is no line information.
pub fn render(kernel: &Kernel, options: Options) -> Result<String, String> {
    let mut out = String::new();
    let archs: Vec<String> = kernel.archs.iter().map(|a| format!("sm_{a}")).collect();
    let _ = writeln!(out, "{}", kernel.title());
    let _ = writeln!(
        out,
        "  {}  {}  {}  launches: {} ({} counted)",
        kernel.name,
        if kernel.source.is_empty() {
            "?"
        } else {
            &kernel.source
        },
        archs.join(", "),
        kernel.launches,
        kernel.counted
    );
    let listings = listings(kernel, options.hot);
    if options.by_line && !listings.iter().any(Listing::has_lines) {
        return Err(format!(
            "kernel {:?} has no source line information (build with -lineinfo or -g)",
            kernel.title()
        ));
    }
    for listing in &listings {
        if !options.by_line {
            render_ptx(&mut out, listing, options.hot);
        }
        if listing.has_lines() {
            render_lines(&mut out, listing);
        }
    }
    Ok(out)
}

fn render_ptx(out: &mut String, listing: &Listing<'_>, hot: usize) {
    let _ = writeln!(
        out,
        "\nPTX for sm_{} (threads, warps: entries into the block, so executions of each of its \
         instructions; *N: the {hot} hottest blocks by threads)",
        listing.arch
    );
    let _ = writeln!(
        out,
        "{:<4}{:>16}{:>14}{:>6} |",
        "hot", "threads", "warps", "SIMD"
    );
    let blank = format!("{:<4}{:>16}{:>14}{:>6} |", "", "", "", "");
    let mut function: Option<&str> = None;
    for (index, block) in listing.blocks.iter().enumerate() {
        if function != Some(block.function.as_str()) {
            function = Some(&block.function);
            let _ = writeln!(out, "{blank} // function {}", block.function);
        }
        let c = listing.counts[index];
        let mark = listing.rank[index].map_or(String::new(), |r| format!("*{r}"));
        let n = block.instructions.len();
        let _ = writeln!(
            out,
            "{mark:<4}{:>16}{:>14}{:>6} | {}  // block #{index}, {n} instruction{}",
            c.threads,
            c.warps,
            simd(c),
            match &block.label {
                Some(label) => format!("{label}:"),
                None => label(listing.blocks, index).to_string(),
            },
            if n == 1 { "" } else { "s" }
        );
        for text in instruction_texts(block) {
            let _ = writeln!(out, "{blank}     {text}");
        }
    }
}

fn render_lines(out: &mut String, listing: &Listing<'_>) {
    let lines = by_line(listing);
    let _ = writeln!(
        out,
        "\nsource lines for sm_{} (instruction executions: each instruction's block count, \
         summed over the instructions .loc puts on the line)",
        listing.arch
    );
    let _ = writeln!(
        out,
        "{:<40} {:>16} {:>14} {:>7}  source",
        "file:line", "threads", "warps", "instrs"
    );
    let mut sources = Sources::default();
    for ((file, line), c) in &lines {
        let place = format!("{file}:{line}");
        let text = sources.line(file, *line);
        let _ = writeln!(
            out,
            "{place:<40} {:>16} {:>14} {:>7}  {text}",
            c.threads, c.warps, c.instructions
        );
    }
}
