//! Notes printed once per build, not once per compiler invocation.

use std::hash::Hasher as _;
use std::path::Path;

/// Build tools whose process stands for one build: every compiler invocation under the same
/// outermost one belongs to the same build.
const BUILD_TOOLS: &[&str] = &["make", "gmake", "gnumake", "bmake", "ninja"];

/// `(command name, parent pid, start time)` of a process, from `/proc/<pid>/stat`.
fn process_stat(pid: u32) -> Option<(String, u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so split at the last ')'.
    let (head, tail) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let fields: Vec<&str> = tail.split_whitespace().collect();
    // After the comm: state is field 3 of stat(5), ppid 4, starttime 22.
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((comm, ppid, start))
}

/// The build this invocation belongs to: the outermost `make` (or ninja) among its ancestors,
/// as `pid-starttime` (the start time tells a reused pid apart). Recursive makes share the
/// top-level one; `make -j` jobs too. `None` outside a build tool: the invocation is the build.
fn build_key() -> Option<String> {
    let (_, mut pid, _) = process_stat(std::process::id())?;
    let mut outermost = None;
    // Bounded: a process tree is shallow, and a malformed /proc must not loop.
    for _ in 0..64 {
        if pid <= 1 {
            break;
        }
        let Some((comm, ppid, start)) = process_stat(pid) else {
            break;
        };
        if BUILD_TOOLS.contains(&comm.as_str()) {
            outermost = Some(format!("{pid}-{start}"));
        }
        pid = ppid;
    }
    outermost
}

/// FNV-1a: a stable name for a note's marker file (std's hasher is not promised stable).
fn fnv(text: &str) -> u64 {
    let mut hasher = Fnv(0xcbf2_9ce4_8422_2325);
    hasher.write(text.as_bytes());
    hasher.finish()
}

struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The notes this invocation should print: each distinct note once per build. A Makefile build
/// runs cuda-flux-nvcc once per source; the same note (e.g. `sm_35` built as `sm_50`) on every
/// line would bury the build's output. Which build: `build_key`. The first invocation of a build
/// to print a note leaves a marker file (created atomically, so parallel jobs print it once) in
/// `$TMPDIR/cuda-flux-nvcc-notes-<uid>/`; markers of builds that have ended are removed then.
/// Whenever that cannot be decided (no /proc, an unwritable directory), the note is printed.
pub fn once_per_build(notes: Vec<String>) -> Vec<String> {
    use std::os::unix::fs::MetadataExt as _;
    if notes.is_empty() {
        return notes;
    }
    let (Some(build), Ok(me)) = (build_key(), std::fs::metadata("/proc/self")) else {
        return notes;
    };
    let dir = std::env::temp_dir().join(format!("cuda-flux-nvcc-notes-{}", me.uid()));
    once_per_build_in(&dir, &build, me.uid(), notes)
}

fn once_per_build_in(dir: &Path, build: &str, uid: u32, notes: Vec<String>) -> Vec<String> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
    // Another user's directory of that name could hide our notes: trust only our own.
    if !std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid) {
        return notes;
    }
    let mut marked = false;
    let kept = notes
        .into_iter()
        .filter(|note| {
            let marker = dir.join(format!("{build}-{:016x}", fnv(note)));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(marker)
            {
                Ok(_) => {
                    marked = true;
                    true
                }
                Err(e) => e.kind() != std::io::ErrorKind::AlreadyExists,
            }
        })
        .collect();
    if marked {
        remove_ended_builds(dir);
    }
    kept
}

/// Removes the markers of builds whose process has ended (or whose pid now names another one).
fn remove_ended_builds(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let mut parts = name.to_str().unwrap_or("").splitn(3, '-');
        let (Some(pid), Some(start)) = (parts.next(), parts.next()) else {
            continue;
        };
        let alive = pid
            .parse()
            .ok()
            .and_then(process_stat)
            .is_some_and(|(_, _, s)| s.to_string() == start);
        if !alive {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_once_per_build() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let markers = dir.path().join("notes");
        let uid = std::fs::metadata("/proc/self").unwrap().uid();
        // This test process stands for a live build; pid 1's start time is not 12345.
        let (_, _, start) = process_stat(std::process::id()).unwrap();
        let build = format!("{}-{start}", std::process::id());
        let notes = || vec!["a".to_string(), "b".to_string()];
        assert_eq!(once_per_build_in(&markers, &build, uid, notes()), notes());
        assert!(once_per_build_in(&markers, &build, uid, notes()).is_empty());
        assert_eq!(
            once_per_build_in(&markers, &build, uid, vec!["c".into(), "a".into()]),
            ["c"]
        );
        // Another build sees them again; the first build's markers stay while it runs, an
        // ended build's go.
        std::fs::write(markers.join("1-12345-0000000000000000"), "").unwrap();
        assert_eq!(once_per_build_in(&markers, "1-1", uid, notes()), notes());
        assert!(!markers.join("1-12345-0000000000000000").exists());
        assert!(once_per_build_in(&markers, &build, uid, notes()).is_empty());
        // A directory that is not ours: every note is printed.
        assert_eq!(
            once_per_build_in(&markers, &build, uid + 1, notes()),
            notes()
        );
    }
}
