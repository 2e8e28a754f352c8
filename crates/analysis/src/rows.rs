//! Writing per-launch output (`features`, `metrics --per-launch`) while profiles stream by,
//! without holding it in memory and without changing its order: rows are grouped by merged
//! kernel (first kernel first), then in file and launch order, exactly as when every file was
//! loaded first.
//!
//! The first kernel's rows go straight to the output; a later kernel may still get launches from
//! a later file, so its rows wait in an anonymous temporary file (a spool) and are appended when
//! every file has been read. The output itself is a temporary file too ([`Output`]), renamed
//! over the `-o` target or copied to stdout only after the whole input was read: a bad input
//! leaves nothing half-written.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Seek as _, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use host_runtime::output::{destination, replaced_permissions, Destination};
use host_runtime::report::{Launch, OpcodeCounts};

use crate::aggregate::{Aggregator, Kernel};
use crate::stream::{KernelHead, Sink};

/// Where a command's output goes: a temporary file that becomes the `-o` file, or is copied to
/// standard output (or to an `-o` that is a device or a pipe), when [`Output::commit`] is called.
pub struct Output {
    target: Option<PathBuf>,
    /// The regular file the temporary file is renamed over (links followed); `None` when the
    /// output is copied to `target` (or stdout) instead.
    replace: Option<PathBuf>,
    file: BufWriter<tempfile::NamedTempFile>,
}

impl Output {
    /// Output to `target`, or to stdout when `None`.
    pub fn new(target: Option<&Path>) -> Result<Output> {
        let replace = match target {
            Some(path) => match destination(path)
                .with_context(|| format!("cannot write {}", path.display()))?
            {
                Destination::Replace(file) => Some(file),
                Destination::Direct(_) => None,
            },
            None => None,
        };
        let dir = match &replace {
            Some(path) => path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf(),
            None => std::env::temp_dir(),
        };
        // The file that becomes the output: 0666 less the umask, as any new file; a spool that
        // is copied to stdout or a device stays private (tempfile's 0600).
        let mode = if replace.is_some() { 0o666 } else { 0o600 };
        let file = tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(mode))
            .tempfile_in(&dir)
            .with_context(|| format!("cannot create a file in {}", dir.display()))?;
        Ok(Output {
            target: target.map(Path::to_path_buf),
            replace,
            file: BufWriter::with_capacity(1 << 16, file),
        })
    }

    /// What to write to.
    pub fn writer(&mut self) -> &mut dyn Write {
        &mut self.file
    }

    /// The context of a failure to write.
    fn failure(&self) -> String {
        self.target.as_ref().map_or_else(
            || "cannot write to standard output".to_string(),
            |p| format!("cannot write {}", p.display()),
        )
    }

    /// Makes the output visible: renames it over the target file, or copies it to the target
    /// device or pipe, or to stdout.
    pub fn commit(self) -> Result<()> {
        let failure = self.failure();
        let mut file = self
            .file
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| failure.clone())?;
        if let Some(path) = self.replace {
            // A replaced file keeps its mode.
            if let Some(permissions) = replaced_permissions(&path) {
                file.as_file()
                    .set_permissions(permissions)
                    .with_context(|| failure.clone())?;
            }
            // The persist error's text repeats its I/O error: keep the I/O error alone.
            file.persist(&path)
                .map_err(|e| e.error)
                .with_context(|| failure.clone())?;
            return Ok(());
        }
        file.as_file_mut()
            .seek(SeekFrom::Start(0))
            .context("cannot read back the output")?;
        let mut out: Box<dyn Write> = match &self.target {
            Some(path) => Box::new(
                std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(path)
                    .with_context(|| failure.clone())?,
            ),
            None => Box::new(std::io::stdout().lock()),
        };
        match std::io::copy(file.as_file_mut(), &mut out).and_then(|_| out.flush()) {
            // A closed pipe (`| head`) is not an error worth reporting.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => {
                other.with_context(|| failure.clone())?;
            }
        }
        Ok(())
    }
}

/// Turns one launch into its output text (a CSV line, a JSON object).
pub trait RowFormat {
    /// The text for launch number `index` of merged kernel `head` (counted over files), read
    /// from file number `file`.
    fn row(&mut self, file: usize, head: &KernelHead, index: usize, launch: &Launch) -> String;
    /// Text put between two rows of the same kernel (`,` for JSON arrays).
    fn separator(&self) -> &'static str {
        ""
    }
}

/// A [`Sink`] writing one row per launch in merged-kernel order, and aggregating as it goes.
pub struct LaunchRows<'o, F> {
    /// The per-kernel aggregates (for the merged order, and for output after the rows).
    pub aggregator: Aggregator,
    format: F,
    out: &'o mut dyn Write,
    /// Whether kernel 0's rows may go straight to `out`.
    direct: bool,
    /// Rows written per merged kernel.
    rows: Vec<usize>,
    spools: BTreeMap<usize, BufWriter<File>>,
}

impl<'o, F: RowFormat> LaunchRows<'o, F> {
    /// Rows to `out`; with `direct` false, every kernel's rows are spooled (for output that
    /// puts something before each kernel's rows).
    pub fn new(format: F, out: &'o mut dyn Write, direct: bool) -> Self {
        LaunchRows {
            aggregator: Aggregator::default(),
            format,
            out,
            direct,
            rows: Vec::new(),
            spools: BTreeMap::new(),
        }
    }

    /// Appends the spooled rows of every kernel after the first (all of them when not
    /// `direct`), in merged order, to `out` (through `between`, called with each kernel index
    /// before its rows and after the previous one's), and returns the aggregates.
    pub fn finish(
        mut self,
        mut between: impl FnMut(&mut dyn Write, &Kernel, usize, bool) -> Result<()>,
    ) -> Result<Aggregator> {
        for (slot, kernel) in self.aggregator.kernels().iter().enumerate() {
            let direct = self.direct && slot == 0;
            between(&mut *self.out, kernel, slot, true)?;
            if !direct {
                if let Some(spool) = self.spools.remove(&slot) {
                    let mut file = spool.into_inner().map_err(|e| e.into_error())?;
                    file.seek(SeekFrom::Start(0))?;
                    std::io::copy(&mut file, &mut *self.out)?;
                }
            }
            between(&mut *self.out, kernel, slot, false)?;
        }
        Ok(self.aggregator)
    }
}

impl<F: RowFormat> Sink for LaunchRows<'_, F> {
    fn launch(&mut self, file: usize, head: &KernelHead, i: usize, launch: Launch) -> Result<()> {
        let slot = self.aggregator.slot(head);
        if self.rows.len() <= slot {
            self.rows.resize(slot + 1, 0);
        }
        let index = self.rows[slot];
        let mut text = String::new();
        if index > 0 {
            text.push_str(self.format.separator());
        }
        text.push_str(&self.format.row(file, head, index, &launch));
        self.rows[slot] += 1;
        if self.direct && slot == 0 {
            self.out.write_all(text.as_bytes())?;
        } else {
            let spool = match self.spools.entry(slot) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => e.insert(BufWriter::new(
                    tempfile::tempfile().context("cannot create a temporary file")?,
                )),
            };
            spool
                .write_all(text.as_bytes())
                .context("cannot write a temporary file")?;
        }
        self.aggregator.launch(file, head, i, launch)
    }

    fn kernel(
        &mut self,
        file: usize,
        head: KernelHead,
        totals: OpcodeCounts,
        launches: usize,
    ) -> Result<()> {
        self.aggregator.kernel(file, head, totals, launches)
    }
}
