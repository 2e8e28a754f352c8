//! Per-kernel aggregates of one or more profiles, built while they stream by
//! ([`crate::stream`]): what `report`, `metrics`, `annotate` and `html` show, in memory that
//! grows with the number of kernels and blocks, not with the number of launches.
//!
//! Kernels are merged as [`crate::profile`] merges them: by mangled name and source file, in
//! order of first appearance, entries (one per architecture and file) kept apart so that block
//! counts stay per architecture.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use host_runtime::report::{Counts, Launch, OpcodeCounts};
use host_runtime::snapshot::Block;

use crate::profile::{add_counts, checked_sum, too_large};
use crate::stream::{self, KernelHead, Sink};

/// One kernel entry (one architecture of one file) with its launches summed.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Index of the file it was read from.
    pub file: usize,
    /// Its description.
    pub head: KernelHead,
    /// Launches listed.
    pub launches: usize,
    /// Launches whose counts were read back.
    pub counted: usize,
    /// Per block, summed over the counted launches (empty when none was counted).
    pub block_counts: Vec<Counts>,
    /// Its `totals`.
    pub totals: OpcodeCounts,
}

/// One kernel over all files and architectures.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Mangled name.
    pub name: String,
    /// Demangled name (of the first entry).
    pub demangled: String,
    /// Source file.
    pub source: String,
    /// Architectures of its entries, ascending, without repeats.
    pub archs: Vec<u32>,
    /// The entries, in file order.
    pub entries: Vec<Entry>,
    /// Files that listed at least one launch of it.
    pub launch_files: BTreeSet<usize>,
    /// Launches over all entries.
    pub launches: usize,
    /// Counted launches over all entries.
    pub counted: usize,
    /// Sum of the entries' `totals`.
    pub totals: OpcodeCounts,
    /// Per architecture, the block counts summed over its entries (what
    /// [`Kernel::block_heat`] shows), kept to refuse sums that cannot be represented.
    heat: BTreeMap<u32, Vec<Counts>>,
}

/// A block's counts summed over the entries with the same architecture.
#[derive(Debug, Clone)]
pub struct BlockHeat<'a> {
    /// Architecture of the entries the block belongs to.
    pub arch: u32,
    /// Index of the block in those entries' `blocks`.
    pub index: usize,
    /// The block (of the first entry of that architecture that counted it).
    pub block: &'a Block,
    /// The `.file` table its `lines` refer to.
    pub files: &'a BTreeMap<u32, String>,
    /// Whether it is the first block of its function (the kernel's or a device function's).
    pub entry: bool,
    /// Entries summed over all counted launches.
    pub counts: Counts,
}

impl BlockHeat<'_> {
    /// The label, or what stands for it in listings.
    pub fn label(&self) -> &str {
        self.block.label.as_deref().unwrap_or(if self.entry {
            "(entry)"
        } else {
            "(fall-through)"
        })
    }
}

impl Kernel {
    /// The demangled name, else the mangled one.
    pub fn title(&self) -> &str {
        if self.demangled.is_empty() {
            &self.name
        } else {
            &self.demangled
        }
    }

    /// Per-block counts per (architecture, block), ordered by architecture then block, over the
    /// entries that counted at least one launch.
    pub fn block_heat(&self) -> Vec<BlockHeat<'_>> {
        let mut heat: BTreeMap<(u32, usize), BlockHeat<'_>> = BTreeMap::new();
        for entry in self.entries.iter().filter(|e| !e.block_counts.is_empty()) {
            let blocks = &entry.head.blocks;
            for (index, block) in blocks.iter().enumerate() {
                let slot = heat
                    .entry((entry.head.arch, index))
                    .or_insert_with(|| BlockHeat {
                        arch: entry.head.arch,
                        index,
                        block,
                        files: &entry.head.files,
                        entry: index == 0 || blocks[index - 1].function != block.function,
                        counts: Counts::default(),
                    });
                slot.counts
                    .add(entry.block_counts.get(index).copied().unwrap_or_default());
            }
        }
        heat.into_values().collect()
    }
}

/// Every kernel of the files read.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The files, as given.
    pub files: Vec<PathBuf>,
    /// The kernels, in order of first appearance.
    pub kernels: Vec<Kernel>,
}

impl Summary {
    /// The files' names, for headings and errors.
    pub fn file_names(&self) -> Vec<String> {
        self.files.iter().map(|f| f.display().to_string()).collect()
    }
}

/// Streams `paths` into a [`Summary`].
pub fn summarize(paths: &[PathBuf]) -> Result<Summary> {
    let mut aggregator = Aggregator::default();
    stream::read_all(paths, &mut aggregator)?;
    Ok(aggregator.finish(paths))
}

/// A [`Sink`] that sums launches per kernel entry.
#[derive(Debug, Default)]
pub struct Aggregator {
    kernels: Vec<Kernel>,
    index: BTreeMap<(String, String), usize>,
    /// The entry being read: launches, counted launches, block sums.
    pending: (usize, usize, Vec<Counts>),
}

impl Aggregator {
    /// The merged index of `head`'s kernel, creating it on first sight; indices follow the
    /// order of first appearance, as [`crate::profile::merge`]'s do.
    pub fn slot(&mut self, head: &KernelHead) -> usize {
        if let Some(&slot) = self.index.get(&(head.name.clone(), head.source.clone())) {
            return slot;
        }
        self.kernels.push(Kernel {
            name: head.name.clone(),
            demangled: head.demangled.clone(),
            source: head.source.clone(),
            archs: Vec::new(),
            entries: Vec::new(),
            launch_files: BTreeSet::new(),
            launches: 0,
            counted: 0,
            totals: OpcodeCounts::new(),
            heat: BTreeMap::new(),
        });
        let slot = self.kernels.len() - 1;
        self.index
            .insert((head.name.clone(), head.source.clone()), slot);
        slot
    }

    /// The kernels read so far.
    pub fn kernels(&self) -> &[Kernel] {
        &self.kernels
    }

    /// The summary of everything read.
    pub fn finish(self, paths: &[PathBuf]) -> Summary {
        Summary {
            files: paths.to_vec(),
            kernels: self.kernels,
        }
    }
}

impl Sink for Aggregator {
    fn launch(&mut self, file: usize, head: &KernelHead, _: usize, launch: Launch) -> Result<()> {
        let slot = self.slot(head);
        self.kernels[slot].launch_files.insert(file);
        let (launches, counted, sums) = &mut self.pending;
        *launches += 1;
        if launch.instrumented {
            *counted += 1;
        }
        if let Some(counts) = &launch.block_counts {
            if sums.len() < head.blocks.len() {
                sums.resize(head.blocks.len(), Counts::default());
            }
            for (index, sum) in sums.iter_mut().enumerate() {
                let counts = Counts {
                    threads: counts.threads.get(index).copied().unwrap_or(0),
                    warps: counts.warps.get(index).copied().unwrap_or(0),
                };
                *sum = checked_sum(*sum, counts)
                    .ok_or_else(|| too_large(&format!("block #{index}")))
                    .with_context(|| format!("kernel {}", head.name))?;
            }
        }
        Ok(())
    }

    fn kernel(
        &mut self,
        file: usize,
        head: KernelHead,
        totals: OpcodeCounts,
        _: usize,
    ) -> Result<()> {
        let slot = self.slot(&head);
        let (launches, counted, block_counts) = std::mem::take(&mut self.pending);
        let kernel = &mut self.kernels[slot];
        if !kernel.archs.contains(&head.arch) {
            kernel.archs.push(head.arch);
            kernel.archs.sort_unstable();
        }
        kernel.launches += launches;
        kernel.counted += counted;
        add_counts(&mut kernel.totals, &totals).with_context(|| format!("kernel {}", head.name))?;
        if !block_counts.is_empty() {
            let heat = kernel.heat.entry(head.arch).or_default();
            heat.resize(heat.len().max(block_counts.len()), Counts::default());
            for (index, (sum, counts)) in heat.iter_mut().zip(&block_counts).enumerate() {
                *sum = checked_sum(*sum, *counts)
                    .ok_or_else(|| too_large(&format!("block #{index}")))
                    .with_context(|| format!("kernel {}", head.name))?;
            }
        }
        kernel.entries.push(Entry {
            file,
            head,
            launches,
            counted,
            block_counts,
            totals,
        });
        Ok(())
    }
}

/// The kernels a `--kernel` argument names (see [`select_by`]).
pub fn select<'k>(kernels: &'k [Kernel], wanted: &str) -> Vec<&'k Kernel> {
    select_by(kernels, |k| (&k.name, &k.demangled), wanted)
}

/// Finds the items a `--kernel` argument names: an exact mangled or demangled name, else those
/// whose demangled name without its argument list equals it, else those whose mangled or
/// demangled name contains it.
pub fn select_by<'k, T>(
    items: &'k [T],
    names: impl Fn(&'k T) -> (&'k str, &'k str),
    wanted: &str,
) -> Vec<&'k T> {
    let exact: Vec<&T> = items
        .iter()
        .filter(|k| {
            let (name, demangled) = names(k);
            name == wanted || demangled == wanted
        })
        .collect();
    if !exact.is_empty() {
        return exact;
    }
    let base = crate::names::base_name(wanted);
    let by_base: Vec<&T> = items
        .iter()
        .filter(|k| crate::names::base_name(names(k).1) == base)
        .collect();
    if !by_base.is_empty() {
        return by_base;
    }
    items
        .iter()
        .filter(|k| {
            let (name, demangled) = names(k);
            name.contains(wanted) || demangled.contains(wanted)
        })
        .collect()
}
