//! Reading profiles (schema `cuda-flux/1`, `docs/output.md`) and merging several of them (one
//! per process or rank) into one view per kernel.
//!
//! Kernels are matched by mangled name and source file, as `docs/output.md` says to group them:
//! the entries of one kernel for several architectures, in one file or in several, become one
//! [`MergedKernel`] whose launches are those of every entry (file order, then launch order) and
//! whose counts are summed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use host_runtime::report::{Counts, Kernel, Launch, OpcodeCounts, Report, SCHEMA};

/// One profile file as read.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Where it was read from (as given on the command line).
    pub path: PathBuf,
    /// Its contents.
    pub report: Report,
}

impl Profile {
    /// Parses a profile from text; `path` only names it in errors. The text is first read by
    /// the streaming reader every other command uses ([`crate::stream`]), so that the same
    /// profiles are refused with the same messages (repeated keys, counts that do not fit
    /// together: [`crate::consistency`]).
    pub fn parse(path: &Path, text: &str) -> Result<Profile> {
        let name = path.display();
        crate::stream::read_from(&name.to_string(), text.as_bytes(), 0, &mut Discard)?;
        match serde_json::from_str::<Report>(text) {
            Ok(report) if report.schema == SCHEMA => Ok(Profile {
                path: path.to_path_buf(),
                report,
            }),
            Ok(report) => bail!("{name}: schema is {:?}, expected {SCHEMA:?}", report.schema),
            Err(error) => {
                // A well-formed JSON document of another schema says so, rather than naming the
                // first field that does not fit.
                if error.is_data() {
                    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
                        match value.get("schema").and_then(|s| s.as_str()) {
                            Some(schema) if schema != SCHEMA => {
                                bail!("{name}: schema is {schema:?}, expected {SCHEMA:?}")
                            }
                            None => bail!("{name}: not a cuda-flux profile (no \"schema\" field)"),
                            _ => {}
                        }
                    }
                }
                let what = if error.is_eof() {
                    "truncated profile"
                } else {
                    "not a valid cuda-flux/1 profile"
                };
                // serde_json's message already ends with "at line L column C".
                bail!("{name}: {what}: {error}")
            }
        }
    }

    /// Reads and parses a profile file.
    pub fn load(path: &Path) -> Result<Profile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Profile::parse(path, &text)
    }
}

/// A sink that keeps nothing: the streaming reader as a checker.
struct Discard;

impl crate::stream::Sink for Discard {
    fn launch(
        &mut self,
        _: usize,
        _: &crate::stream::KernelHead,
        _: usize,
        _: Launch,
    ) -> Result<()> {
        Ok(())
    }

    fn kernel(
        &mut self,
        _: usize,
        _: crate::stream::KernelHead,
        _: OpcodeCounts,
        _: usize,
    ) -> Result<()> {
        Ok(())
    }
}

/// Reads every file, stopping at the first bad one.
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<Profile>> {
    paths.iter().map(|p| Profile::load(p)).collect()
}

/// One launch of a merged kernel, with where it came from.
#[derive(Debug, Clone, Copy)]
pub struct LaunchRef<'a> {
    /// Index of the file in the list given to [`merge`].
    pub file: usize,
    /// The kernel entry (one architecture) the launch belongs to.
    pub kernel: &'a Kernel,
    /// Index of the launch within that entry.
    pub index: usize,
    /// The launch.
    pub launch: &'a Launch,
}

/// A block's counts summed over the launches of every entry with the same architecture.
#[derive(Debug, Clone)]
pub struct BlockHeat<'a> {
    /// Architecture of the entry the block belongs to.
    pub arch: u32,
    /// Index of the block in that entry's `blocks`.
    pub index: usize,
    /// The function (kernel or device function) the block belongs to.
    pub function: &'a str,
    /// Its label, if it has one.
    pub label: Option<&'a str>,
    /// Whether it is the first block of its function (the kernel's or a device function's).
    pub entry: bool,
    /// Its opcodes.
    pub instructions: &'a [String],
    /// Entries summed over all counted launches.
    pub counts: Counts,
}

/// One kernel over all files and architectures.
#[derive(Debug, Clone)]
pub struct MergedKernel<'a> {
    /// Mangled name.
    pub name: &'a str,
    /// Demangled name (of the first entry).
    pub demangled: &'a str,
    /// Source file.
    pub source: &'a str,
    /// Architectures of its entries, ascending, without repeats.
    pub archs: Vec<u32>,
    /// The entries, in file order.
    pub entries: Vec<(usize, &'a Kernel)>,
    /// Every launch: file order, then launch order.
    pub launches: Vec<LaunchRef<'a>>,
    /// Sum of the entries' `totals`.
    pub totals: OpcodeCounts,
}

impl<'a> MergedKernel<'a> {
    /// Launches whose counts were read back.
    pub fn counted_launches(&self) -> usize {
        self.launches
            .iter()
            .filter(|l| l.launch.instrumented)
            .count()
    }

    /// Per-block counts summed over launches, per (architecture, block), where blocks of entries
    /// with the same architecture and the same block list are added together.
    pub fn block_heat(&self) -> Vec<BlockHeat<'a>> {
        let mut heat: BTreeMap<(u32, usize), BlockHeat<'a>> = BTreeMap::new();
        for launch in &self.launches {
            let Some(counts) = &launch.launch.block_counts else {
                continue;
            };
            for (index, block) in launch.kernel.blocks.iter().enumerate() {
                let entry = heat
                    .entry((launch.kernel.arch, index))
                    .or_insert_with(|| BlockHeat {
                        arch: launch.kernel.arch,
                        index,
                        function: &block.function,
                        label: block.label.as_deref(),
                        entry: index == 0
                            || launch.kernel.blocks[index - 1].function != block.function,
                        instructions: &block.instructions,
                        counts: Counts::default(),
                    });
                entry.counts.add(Counts {
                    threads: counts.threads.get(index).copied().unwrap_or(0),
                    warps: counts.warps.get(index).copied().unwrap_or(0),
                });
            }
        }
        heat.into_values().collect()
    }
}

/// Adds `b` into `a`, opcode by opcode. A sum beyond `u64::MAX` cannot be represented: the
/// error names the opcode (and `a` is left partly added).
pub fn add_counts(a: &mut OpcodeCounts, b: &OpcodeCounts) -> Result<()> {
    for (opcode, counts) in b {
        let sum = a.entry(opcode.clone()).or_default();
        *sum = checked_sum(*sum, *counts).ok_or_else(|| too_large(opcode))?;
    }
    Ok(())
}

/// `a + b`, or `None` when a count exceeds `u64::MAX`.
pub fn checked_sum(a: Counts, b: Counts) -> Option<Counts> {
    Some(Counts {
        threads: a.threads.checked_add(b.threads)?,
        warps: a.warps.checked_add(b.warps)?,
    })
}

/// The error for counts of `what` whose sum exceeds `u64::MAX`.
pub fn too_large(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "the {what} counts summed over the launches and files exceed {} (2^64 - 1) and cannot be represented; read fewer files at a time",
        u64::MAX
    )
}

/// Groups the kernels of every profile by (name, source), in order of first appearance. An
/// error when a kernel's summed counts cannot be represented.
pub fn merge(profiles: &[Profile]) -> Result<Vec<MergedKernel<'_>>> {
    let mut order: Vec<MergedKernel<'_>> = Vec::new();
    let mut index: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (file, profile) in profiles.iter().enumerate() {
        for kernel in &profile.report.kernels {
            let key = (kernel.name.as_str(), kernel.source.as_str());
            let slot = *index.entry(key).or_insert_with(|| {
                order.push(MergedKernel {
                    name: &kernel.name,
                    demangled: &kernel.demangled,
                    source: &kernel.source,
                    archs: Vec::new(),
                    entries: Vec::new(),
                    launches: Vec::new(),
                    totals: OpcodeCounts::new(),
                });
                order.len() - 1
            });
            let merged = &mut order[slot];
            if !merged.archs.contains(&kernel.arch) {
                merged.archs.push(kernel.arch);
                merged.archs.sort_unstable();
            }
            merged.entries.push((file, kernel));
            merged
                .launches
                .extend(
                    kernel
                        .launches
                        .iter()
                        .enumerate()
                        .map(|(index, launch)| LaunchRef {
                            file,
                            kernel,
                            index,
                            launch,
                        }),
                );
            add_counts(&mut merged.totals, &kernel.totals)
                .with_context(|| format!("kernel {}", kernel.name))?;
        }
    }
    Ok(order)
}

/// Finds the kernels a `--kernel` argument names (see [`crate::aggregate::select_by`]).
pub fn select<'k, 'a>(kernels: &'k [MergedKernel<'a>], wanted: &str) -> Vec<&'k MergedKernel<'a>> {
    crate::aggregate::select_by(kernels, |k| (k.name, k.demangled), wanted)
}
