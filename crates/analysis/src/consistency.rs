//! The checks every command makes on what it reads, so that counts that do not fit together are
//! refused instead of being summed into wrong numbers (`docs/output.md`, "Reading several
//! profiles"):
//!
//! * a counted launch has exactly one `block_counts` entry (threads and warps) per block of its
//!   kernel entry, and an uncounted one none;
//! * a launch's `instructions` are its block counts times its blocks' opcodes, as the runtime
//!   computes them;
//! * a kernel entry's `totals` are the sum of its launches' `instructions`;
//! * entries of one kernel (name and source) for one architecture, in one file or several, have
//!   the same blocks: entries whose code differs (a kernel rebuilt between two runs) cannot be
//!   added block by block.

use std::collections::BTreeMap;

use host_runtime::counts::{add_opcode_counts, OpcodeTable};
use host_runtime::report::{Counts, Launch, OpcodeCounts};
use host_runtime::snapshot::Block;

/// Checks the launches of one kernel entry against its blocks, and its totals against them.
pub struct EntryCheck {
    table: OpcodeTable,
    blocks: usize,
    sums: OpcodeCounts,
}

/// `counts` without its zero entries (the runtime leaves them out; a reader need not).
fn nonzero(counts: &OpcodeCounts) -> impl Iterator<Item = (&String, &Counts)> {
    counts.iter().filter(|(_, c)| **c != Counts::default())
}

fn same(a: &OpcodeCounts, b: &OpcodeCounts) -> bool {
    nonzero(a).eq(nonzero(b))
}

/// The first opcode whose counts differ, for the message.
fn first_difference(expected: &OpcodeCounts, found: &OpcodeCounts) -> String {
    let zero = Counts::default();
    let opcodes: std::collections::BTreeSet<&String> =
        expected.keys().chain(found.keys()).collect();
    for opcode in opcodes {
        let e = expected.get(opcode).unwrap_or(&zero);
        let f = found.get(opcode).unwrap_or(&zero);
        if e != f {
            return format!(
                "{opcode}: {} threads, {} warps where {} threads, {} warps are expected",
                f.threads, f.warps, e.threads, e.warps
            );
        }
    }
    String::new()
}

impl EntryCheck {
    /// For an entry with these blocks.
    pub fn new(blocks: &[Block]) -> EntryCheck {
        EntryCheck {
            table: OpcodeTable::new(blocks),
            blocks: blocks.len(),
            sums: OpcodeCounts::new(),
        }
    }

    /// Checks one launch and adds its instructions to the entry's sum. The error says what does
    /// not fit.
    pub fn launch(&mut self, launch: &Launch) -> Result<(), String> {
        match (&launch.block_counts, launch.instrumented) {
            (None, false) => {
                if launch
                    .instructions
                    .as_ref()
                    .is_some_and(|i| nonzero(i).next().is_some())
                {
                    return Err("an uncounted launch lists instructions".to_owned());
                }
                Ok(())
            }
            (None, true) => Err("a counted launch has no block_counts".to_owned()),
            (Some(_), false) => Err("an uncounted launch has block_counts".to_owned()),
            (Some(counts), true) => {
                for (what, list) in [("threads", &counts.threads), ("warps", &counts.warps)] {
                    if list.len() != self.blocks {
                        return Err(format!(
                            "block_counts has {} {what} entries for {} blocks",
                            list.len(),
                            self.blocks
                        ));
                    }
                }
                let expected = self.table.count(&counts.threads, &counts.warps);
                let found = launch
                    .instructions
                    .as_ref()
                    .ok_or_else(|| "a counted launch has no instructions".to_owned())?;
                if !same(&expected, found) {
                    return Err(format!(
                        "instructions do not follow from block_counts and blocks ({})",
                        first_difference(&expected, found)
                    ));
                }
                add_opcode_counts(&mut self.sums, found);
                Ok(())
            }
        }
    }

    /// Checks the entry's `totals` against the launches seen.
    pub fn totals(&self, totals: &OpcodeCounts) -> Result<(), String> {
        if same(&self.sums, totals) {
            return Ok(());
        }
        Err(format!(
            "totals are not the sum of the launches' instructions ({})",
            first_difference(&self.sums, totals)
        ))
    }
}

/// Whether two block lists describe the same code (function, label and opcodes of every block;
/// the optional `text` and `lines` are not compared).
pub fn same_blocks(a: &[Block], b: &[Block]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.function == y.function && x.label == y.label && x.instructions == y.instructions
        })
}

/// The block lists seen per kernel (name, source) and architecture, with the file that first
/// had each, so that entries of different code are refused rather than added block by block.
#[derive(Debug, Default)]
pub struct Builds {
    seen: BTreeMap<(String, String, u32), (String, Vec<Block>)>,
}

impl Builds {
    /// Records an entry read from file `file`; when the kernel's blocks for this architecture
    /// differ from those already seen, returns the name of the file that had them first.
    pub fn check(
        &mut self,
        file: &str,
        name: &str,
        source: &str,
        arch: u32,
        blocks: &[Block],
    ) -> Result<(), String> {
        let key = (name.to_owned(), source.to_owned(), arch);
        match self.seen.get(&key) {
            Some((first, known)) if !same_blocks(known, blocks) => Err(first.clone()),
            Some(_) => Ok(()),
            None => {
                self.seen.insert(key, (file.to_owned(), blocks.to_vec()));
                Ok(())
            }
        }
    }
}

/// The message for entries of kernel `name` (architecture `arch`) whose code differs between
/// `first` and `second` (file names; the same when one file holds both).
pub fn different_builds(name: &str, arch: u32, first: &str, second: &str) -> String {
    let place = if first == second {
        format!("twice in {first}")
    } else {
        format!("in {first} and {second}")
    };
    format!(
        "kernel {name} (sm_{arch}) has different blocks {place} (rebuilt between the runs?): \
         profiles of different builds cannot be merged; read them separately"
    )
}
