//! Reading profiles as a stream, for files far larger than memory (a million launch records):
//! the `launches` array of each kernel is deserialized one record at a time and handed to a
//! [`Sink`], which aggregates it or writes a row, so memory holds one launch plus whatever the
//! sink keeps per kernel, never the whole file.
//!
//! The runtime writes each kernel's `name`, `blocks` and the other descriptive fields before
//! `launches`, so launches can be passed on as they arrive. JSON objects are unordered, though:
//! if `launches` comes first, its records are kept until the kernel object ends (correct for
//! any order, bounded only for the runtime's).
//!
//! Errors are one line naming the file and, for malformed JSON, serde_json's `line L column C`.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufReader, IsTerminal as _, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::consistency::{different_builds, Builds, EntryCheck};
use host_runtime::report::{Device, Launch, OpcodeCounts, UniqueMap, SCHEMA};
use host_runtime::snapshot::Block;
use serde::de::{self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, SeqAccess};

/// A kernel entry's description: everything but its launches and totals.
#[derive(Debug, Clone, Default)]
pub struct KernelHead {
    /// Mangled name.
    pub name: String,
    /// Demangled name.
    pub demangled: String,
    /// Source file.
    pub source: String,
    /// Architecture (70 for sm_70).
    pub arch: u32,
    /// Whether an instrumented clone was built.
    pub instrumented: bool,
    /// Why not.
    pub reason: Option<String>,
    /// The counted blocks, in counter order.
    pub blocks: Vec<Block>,
    /// The `.file` table of the blocks' `lines` (empty without line information).
    pub files: BTreeMap<u32, String>,
}

/// What a streaming read hands its records to.
pub trait Sink {
    /// One launch of the kernel entry `head` of file number `file` (index in the list of files
    /// read), the `index`-th of that entry. Called before [`Sink::kernel`] for the same entry.
    fn launch(
        &mut self,
        file: usize,
        head: &KernelHead,
        index: usize,
        launch: Launch,
    ) -> Result<()>;

    /// The end of a kernel entry: its description, its `totals` and how many launches it had.
    fn kernel(
        &mut self,
        file: usize,
        head: KernelHead,
        totals: OpcodeCounts,
        launches: usize,
    ) -> Result<()>;
}

/// Reads every file in order into `sink`, stopping at the first bad one (or at the first entry
/// whose code differs from an earlier file's entry of the same kernel and architecture: see
/// [`crate::consistency`]).
pub fn read_all(paths: &[PathBuf], sink: &mut dyn Sink) -> Result<()> {
    let mut builds = Builds::default();
    for (index, path) in paths.iter().enumerate() {
        read_checked(path, index, sink, &mut builds)?;
    }
    Ok(())
}

/// Reads one profile file into `sink`; `file` is the number its records are given.
pub fn read(path: &Path, file: usize, sink: &mut dyn Sink) -> Result<()> {
    read_checked(path, file, sink, &mut Builds::default())
}

fn read_checked(path: &Path, file: usize, sink: &mut dyn Sink, builds: &mut Builds) -> Result<()> {
    let name = path.display().to_string();
    let handle =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let total = handle.metadata().map(|m| m.len()).unwrap_or(0);
    let progress = Progress::new(&name, total);
    let reader = BufReader::with_capacity(
        1 << 20,
        Counting {
            inner: handle,
            progress,
        },
    );
    read_from_checked(&name, reader, file, sink, builds)
}

/// Reads a profile from `reader`; `name` names it in errors.
pub fn read_from(name: &str, reader: impl Read, file: usize, sink: &mut dyn Sink) -> Result<()> {
    read_from_checked(name, reader, file, sink, &mut Builds::default())
}

fn read_from_checked(
    name: &str,
    reader: impl Read,
    file: usize,
    sink: &mut dyn Sink,
    builds: &mut Builds,
) -> Result<()> {
    let mut state = State {
        name,
        file,
        sink,
        builds,
        schema: None,
        failure: None,
    };
    let mut de = serde_json::Deserializer::from_reader(reader);
    let outcome = (&mut de)
        .deserialize_map(ProfileVisitor { state: &mut state })
        .and_then(|()| de.end());
    if let Some(failure) = state.failure.take() {
        return Err(match failure {
            Failure::Schema(schema) => {
                anyhow!("{name}: schema is {schema:?}, expected {SCHEMA:?}")
            }
            Failure::Sink(error) => error,
        });
    }
    match outcome {
        Ok(()) if state.schema.is_none() => Err(anyhow!(
            "{name}: not a cuda-flux profile (no \"schema\" field)"
        )),
        Ok(()) => Ok(()),
        Err(error) => {
            let what = if error.is_eof() {
                "truncated profile"
            } else if error.is_io() {
                "cannot read"
            } else {
                "not a valid cuda-flux/1 profile"
            };
            // serde_json's message already ends with "at line L column C".
            Err(anyhow!("{name}: {what}: {error}"))
        }
    }
}

/// Why a read stopped that is not malformed JSON.
enum Failure {
    /// The `schema` field names another schema.
    Schema(String),
    /// The sink failed (e.g. writing a spool file).
    Sink(anyhow::Error),
}

struct State<'s> {
    /// The file's name, for errors.
    name: &'s str,
    file: usize,
    sink: &'s mut dyn Sink,
    /// The block lists of the kernel entries read so far (this file and earlier ones).
    builds: &'s mut Builds,
    schema: Option<String>,
    failure: Option<Failure>,
}

impl State<'_> {
    /// Keeps `error` for the caller and stops the parse with a placeholder serde error.
    fn fail<E: de::Error>(&mut self, failure: Failure) -> E {
        self.failure = Some(failure);
        E::custom("stopped")
    }

    /// Checks launch `index` of entry `head` (see [`crate::consistency`]) and hands it on.
    fn launch<E: de::Error>(
        &mut self,
        head: &KernelHead,
        check: &mut EntryCheck,
        index: usize,
        launch: Launch,
    ) -> Result<(), E> {
        if let Err(problem) = check.launch(&launch) {
            let error = anyhow!(
                "{}: kernel {} (sm_{}), launch {index}: {problem}",
                self.name,
                head.name,
                head.arch
            );
            return Err(self.fail(Failure::Sink(error)));
        }
        if let Err(error) = self.sink.launch(self.file, head, index, launch) {
            return Err(self.fail(Failure::Sink(error)));
        }
        Ok(())
    }
}

struct ProfileVisitor<'a, 's> {
    state: &'a mut State<'s>,
}

impl<'de> de::Visitor<'de> for ProfileVisitor<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a cuda-flux profile (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = Keys::default();
        while let Some(key) = map.next_key::<String>()? {
            keys.first_time(&key)?;
            match key.as_str() {
                "schema" => {
                    let schema: String = map.next_value()?;
                    if schema != SCHEMA {
                        return Err(self.state.fail(Failure::Schema(schema)));
                    }
                    self.state.schema = Some(schema);
                }
                // Read (not skipped) so that a wrong type is an error, as before streaming.
                "program" => drop(map.next_value::<Vec<String>>()?),
                "pid" => drop(map.next_value::<u32>()?),
                "devices" => drop(map.next_value::<Vec<Device>>()?),
                "kernels" => map.next_value_seed(KernelsSeed {
                    state: &mut *self.state,
                })?,
                _ => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(())
    }
}

struct KernelsSeed<'a, 's> {
    state: &'a mut State<'s>,
}

impl<'de> DeserializeSeed<'de> for KernelsSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> de::Visitor<'de> for KernelsSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of kernels")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(KernelSeed {
                state: &mut *self.state,
            })?
            .is_some()
        {}
        Ok(())
    }
}

struct KernelSeed<'a, 's> {
    state: &'a mut State<'s>,
}

impl<'de> DeserializeSeed<'de> for KernelSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> de::Visitor<'de> for KernelSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a kernel object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut head = KernelHead::default();
        let mut seen = Seen::default();
        let mut totals: Option<OpcodeCounts> = None;
        let mut launches = 0usize;
        let mut early: Option<Vec<Launch>> = None;
        let mut check: Option<EntryCheck> = None;
        let mut keys = Keys::default();
        while let Some(key) = map.next_key::<String>()? {
            keys.first_time(&key)?;
            match key.as_str() {
                "name" => (head.name, seen.name) = (map.next_value()?, true),
                "demangled" => (head.demangled, seen.demangled) = (map.next_value()?, true),
                "source" => (head.source, seen.source) = (map.next_value()?, true),
                "arch" => (head.arch, seen.arch) = (map.next_value()?, true),
                "instrumented" => {
                    (head.instrumented, seen.instrumented) = (map.next_value()?, true)
                }
                "reason" => head.reason = map.next_value()?,
                "blocks" => (head.blocks, seen.blocks) = (map.next_value()?, true),
                "files" => head.files = map.next_value::<UniqueMap<_, _>>()?.0,
                "totals" => totals = Some(map.next_value::<UniqueMap<_, _>>()?.0),
                "launches" if seen.complete() => {
                    let check = check.insert(EntryCheck::new(&head.blocks));
                    launches = map.next_value_seed(LaunchesSeed {
                        state: &mut *self.state,
                        head: &head,
                        check,
                    })?;
                    seen.launches = true;
                }
                "launches" => {
                    // Described after its launches: keep them until the description is known.
                    let records: Vec<Launch> = map.next_value()?;
                    launches = records.len();
                    early = Some(records);
                    seen.launches = true;
                }
                _ => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        for (present, field) in [
            (seen.name, "name"),
            (seen.demangled, "demangled"),
            (seen.source, "source"),
            (seen.arch, "arch"),
            (seen.instrumented, "instrumented"),
            (seen.blocks, "blocks"),
            (seen.launches, "launches"),
            (totals.is_some(), "totals"),
        ] {
            if !present {
                return Err(de::Error::missing_field(field));
            }
        }
        let file = self.state.file;
        let state = &mut *self.state;
        if let Err(first) = state.builds.check(
            state.name,
            &head.name,
            &head.source,
            head.arch,
            &head.blocks,
        ) {
            let error = anyhow!(
                "{}: {}",
                state.name,
                different_builds(&head.name, head.arch, &first, state.name)
            );
            return Err(state.fail(Failure::Sink(error)));
        }
        let mut check = check.unwrap_or_else(|| EntryCheck::new(&head.blocks));
        for (index, launch) in early.into_iter().flatten().enumerate() {
            state.launch(&head, &mut check, index, launch)?;
        }
        let totals = totals.unwrap_or_default();
        if let Err(problem) = check.totals(&totals) {
            let error = anyhow!(
                "{}: kernel {} (sm_{}): {problem}",
                state.name,
                head.name,
                head.arch
            );
            return Err(state.fail(Failure::Sink(error)));
        }
        if let Err(error) = self.state.sink.kernel(file, head, totals, launches) {
            return Err(self.state.fail(Failure::Sink(error)));
        }
        Ok(())
    }
}

/// The keys of one JSON object read so far: a key given twice is an error, as serde's derived
/// readers (and so `compare`) make it, rather than the last value silently winning.
#[derive(Default)]
struct Keys(std::collections::BTreeSet<String>);

impl Keys {
    fn first_time<E: de::Error>(&mut self, key: &str) -> Result<(), E> {
        if self.0.insert(key.to_owned()) {
            Ok(())
        } else {
            Err(E::custom(format_args!("duplicate field `{key}`")))
        }
    }
}

/// Which required kernel fields were read.
#[derive(Default)]
struct Seen {
    name: bool,
    demangled: bool,
    source: bool,
    arch: bool,
    instrumented: bool,
    blocks: bool,
    launches: bool,
}

impl Seen {
    /// Whether launches can be passed on as they arrive.
    fn complete(&self) -> bool {
        self.name && self.demangled && self.source && self.arch && self.instrumented && self.blocks
    }
}

struct LaunchesSeed<'a, 's, 'h> {
    state: &'a mut State<'s>,
    head: &'h KernelHead,
    check: &'h mut EntryCheck,
}

impl<'de> DeserializeSeed<'de> for LaunchesSeed<'_, '_, '_> {
    type Value = usize;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> de::Visitor<'de> for LaunchesSeed<'_, '_, '_> {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of launches")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut index = 0;
        while let Some(launch) = seq.next_element::<Launch>()? {
            self.state.launch(self.head, self.check, index, launch)?;
            index += 1;
        }
        Ok(index)
    }
}

/// Counts the bytes read and draws a progress bar on stderr when reading takes more than a
/// second and stderr is a terminal (a bar in a log file or a pipe would only be noise).
struct Counting<R> {
    inner: R,
    progress: Progress,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

/// The progress bar on bytes read (indicatif, which draws, rate-limits and erases it): shown
/// only when stderr is a terminal and reading has taken more than a second, erased at the end.
struct Progress {
    bar: ProgressBar,
    start: Instant,
    /// Whether the bar may be drawn now (a terminal, a known size); set once it is drawn.
    drawable: bool,
    shown: bool,
}

impl Progress {
    fn new(name: &str, total: u64) -> Progress {
        // Hidden until the first second has passed: short reads draw nothing.
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template(
            "cuda-flux: reading {msg} [{bar:30}] {percent:>3}% {bytes} / {total_bytes}",
        ) {
            bar.set_style(style.progress_chars("# "));
        }
        bar.set_message(name.to_string());
        Progress {
            bar,
            start: Instant::now(),
            drawable: total > 0 && std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn advance(&mut self, bytes: u64) {
        self.bar.inc(bytes);
        if self.drawable && !self.shown && self.start.elapsed() >= Duration::from_secs(1) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.shown {
            // Leave the terminal as it was: the bar's line is erased.
            self.bar.finish_and_clear();
        }
    }
}

/// Parses a complete profile held in memory through the streaming reader into the usual
/// [`host_runtime::report::Kernel`] values (tests, small files).
#[derive(Debug, Default)]
pub struct Collect {
    /// Every kernel entry, in file order.
    pub kernels: Vec<(usize, host_runtime::report::Kernel)>,
    pending: Vec<Launch>,
}

impl Sink for Collect {
    fn launch(&mut self, _: usize, _: &KernelHead, _: usize, launch: Launch) -> Result<()> {
        self.pending.push(launch);
        Ok(())
    }

    fn kernel(&mut self, file: usize, h: KernelHead, totals: OpcodeCounts, _: usize) -> Result<()> {
        let launches = std::mem::take(&mut self.pending);
        self.kernels.push((
            file,
            host_runtime::report::Kernel {
                name: h.name,
                demangled: h.demangled,
                source: h.source,
                arch: h.arch,
                instrumented: h.instrumented,
                reason: h.reason,
                blocks: h.blocks,
                files: h.files,
                launches,
                totals,
            },
        ));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<Collect> {
        let mut sink = Collect::default();
        read_from("p.json", text.as_bytes(), 0, &mut sink)?;
        Ok(sink)
    }

    const LAUNCH: &str = r#"{"grid":[1,1,1],"block":[32,1,1],"dynamic_shared_bytes":0,"stream":0,
        "device":0,"mode":"all","instrumented":true,"block_counts":{"threads":[32],"warps":[1]},
        "instructions":{"ret":{"threads":32,"warps":1}}}"#;

    fn kernel(launches_first: bool, n: usize) -> String {
        let launches = vec![LAUNCH; n].join(",");
        let head = r#""name":"k","demangled":"k()","source":"k.cu","arch":90,"instrumented":true,
            "blocks":[{"function":"k","label":null,"instructions":["ret"]}]"#;
        let tail = format!(r#""totals":{{"ret":{{"threads":{},"warps":{n}}}}}"#, 32 * n);
        if launches_first {
            format!(r#"{{"launches":[{launches}],{head},{tail}}}"#)
        } else {
            format!(r#"{{{head},"launches":[{launches}],{tail}}}"#)
        }
    }

    fn profile(kernels: &[String]) -> String {
        format!(
            r#"{{"schema":"cuda-flux/1","program":["./k"],"pid":1,"devices":[],"kernels":[{}]}}"#,
            kernels.join(",")
        )
    }

    #[test]
    fn launches_in_either_order() {
        let text = profile(&[kernel(false, 3), kernel(true, 2)]);
        let collected = read_text(&text).unwrap();
        assert_eq!(collected.kernels.len(), 2);
        assert_eq!(collected.kernels[0].1.launches.len(), 3);
        assert_eq!(collected.kernels[1].1.launches.len(), 2);
        assert_eq!(collected.kernels[1].1.blocks.len(), 1);
    }

    #[test]
    fn errors_name_the_file_and_position() {
        let text = profile(&[kernel(false, 1)]);
        // A one-record stream cut in the middle of its record.
        let cut = &text[..text.find("\"block_counts\"").unwrap() + 5];
        let error = read_text(cut).unwrap_err().to_string();
        assert!(
            error.starts_with("p.json: truncated profile") && error.contains(" at line 3 column "),
            "{error}"
        );
        let error = read_text(&text.replace("cuda-flux/1", "cuda-flux/9"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "p.json: schema is \"cuda-flux/9\", expected \"cuda-flux/1\""
        );
        let error = read_text(r#"{"a": 1}"#).unwrap_err().to_string();
        assert!(error.contains("not a cuda-flux profile"), "{error}");
        let error = read_text(&text.replace("\"arch\":90", "\"arch\":\"x\""))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("not a valid") && error.contains("column"),
            "{error}"
        );
        let error = read_text(&text.replace("\"totals\"", "\"total\""))
            .unwrap_err()
            .to_string();
        assert!(error.contains("missing field `totals`"), "{error}");
        let error = read_text(&format!("{text} x")).unwrap_err().to_string();
        assert!(error.contains("trailing characters"), "{error}");
    }
}
