//! Writing the profile: whole or not at all.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The profile could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Creating, writing or renaming failed.
    #[error("cannot write the profile to '{}': {source}", path.display())]
    Io {
        /// The profile's path.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The path names no file.
    #[error("cannot write the profile to '{}': not a file path", path.display())]
    NotAFile {
        /// The profile's path.
        path: PathBuf,
    },
}

/// What a write to a path writes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A regular file, or nothing yet: written whole into a temporary file in the same directory,
    /// then renamed over it. The path is the file itself, symbolic links followed, so a link
    /// stays a link and its target gets the new contents.
    Replace(PathBuf),
    /// Not a regular file (a character device such as `/dev/null` or a terminal, a named pipe,
    /// a socket), or reached through a link in `/proc` (`/dev/stdout`, `/dev/fd/N`): opened as
    /// it is and written in place. Nothing is created, replaced or renamed.
    Direct(PathBuf),
}

/// Symbolic links followed before giving up, as the kernel's `ELOOP` limit.
const MAX_LINKS: usize = 40;

/// Where a write to `path` goes (see [`Destination`]). An error when `path` is a directory or
/// its links cannot be followed; a path that does not exist yet (or a link to one) is a
/// [`Destination::Replace`] of the file it names.
pub fn destination(path: &Path) -> io::Result<Destination> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "it is a directory",
            ))
        }
        Ok(meta) if !meta.is_file() => return Ok(Destination::Direct(path.to_owned())),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut current = path.to_owned();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                // `/proc/<pid>/fd/N` (also as `/dev/fd/N`) and the like name open files, not
                // paths to replace.
                let in_proc = current
                    .parent()
                    .and_then(|dir| fs::canonicalize(dir).ok())
                    .is_some_and(|dir| dir.starts_with("/proc"));
                if in_proc {
                    return Ok(Destination::Direct(path.to_owned()));
                }
                let target = fs::read_link(&current)?;
                current = match current.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                };
            }
            Ok(_) => return Ok(Destination::Replace(current)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Destination::Replace(current))
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// Writes `bytes` to `path` whole or not at all (see [`Destination`]): a regular file gets a
/// temporary file in its directory, flushed to disk, then renamed over it (on failure nothing is
/// left behind and the file is unchanged); a device or pipe is written in place. A new file's
/// mode is `0666` less the umask; a replaced file keeps its mode ([`replaced_permissions`]).
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static SEQUENCE: AtomicU32 = AtomicU32::new(0);
    let target = match destination(path)? {
        Destination::Direct(path) => {
            // Truncated when it is a regular file (reached through `/dev/stdout` or the like),
            // as the shell's `>` does.
            let mut file = OpenOptions::new().write(true).truncate(true).open(&path)?;
            return file.write_all(bytes).and_then(|()| file.flush());
        }
        Destination::Replace(target) => target,
    };
    let Some(name) = target.file_name() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file path",
        ));
    };
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    let temp = dir.join(temp_name);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        if let Some(permissions) = replaced_permissions(&target) {
            file.set_permissions(permissions)?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, &target)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// The permissions a file written over `target` takes: those of the regular file it replaces,
/// or `None` for a new file, which gets `0666` less the umask (as `open` gives it, and as the
/// shell's `>` does).
pub fn replaced_permissions(target: &Path) -> Option<fs::Permissions> {
    fs::symlink_metadata(target)
        .ok()
        .filter(fs::Metadata::is_file)
        .map(|meta| meta.permissions())
}

/// Writes the profile `bytes` to `path` with [`write_file`]: whole or not at all.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    if path.file_name().is_none() {
        return Err(WriteError::NotAFile {
            path: path.to_owned(),
        });
    }
    write_file(path, bytes).map_err(|source| WriteError::Io {
        path: path.to_owned(),
        source,
    })
}

/// The program's command line, from `/proc/self/cmdline` (empty when unreadable).
pub fn program_arguments() -> Vec<String> {
    fs::read("/proc/self/cmdline")
        .map(|bytes| split_cmdline(&bytes))
        .unwrap_or_default()
}

fn split_cmdline(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|&b| b == 0)
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn writes_the_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.json");
        write_atomically(&path, b"{\"a\": 1}").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"a\": 1}");
        write_atomically(&path, b"{}").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{}");
        assert_eq!(entries(dir.path()), ["p.json"]);
    }

    #[test]
    fn an_unwritable_path_is_an_error_naming_it_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir/p.json");
        let error = write_atomically(&missing, b"{}").unwrap_err().to_string();
        assert!(error.contains(&*missing.to_string_lossy()), "{error}");
        assert!(!error.contains('\n'));

        // The target is a directory: the rename fails, the temporary goes away.
        let target = dir.path().join("taken");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("x"), b"keep").unwrap();
        assert!(write_atomically(&target, b"{}").is_err());
        assert_eq!(entries(dir.path()), ["taken"]);
        assert_eq!(fs::read(target.join("x")).unwrap(), b"keep");

        assert!(matches!(
            write_atomically(Path::new("/"), b"{}"),
            Err(WriteError::NotAFile { .. })
        ));
    }

    #[test]
    fn a_read_only_directory_is_an_error() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ro = dir.path().join("ro");
        fs::create_dir(&ro).unwrap();
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
        let result = write_atomically(&ro.join("p.json"), b"{}");
        // root may write anywhere; then the write must simply have succeeded whole.
        match result {
            Err(e) => {
                assert!(e.to_string().contains("p.json"));
                assert!(entries(&ro).is_empty());
            }
            Ok(()) => assert_eq!(entries(&ro), ["p.json"]),
        }
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_link_is_written_through_and_stays_a_link() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        fs::write(&real, b"old").unwrap();
        // A chain of links, relative and absolute.
        symlink("real.json", dir.path().join("link.json")).unwrap();
        symlink(dir.path().join("link.json"), dir.path().join("link2.json")).unwrap();
        write_atomically(&dir.path().join("link2.json"), b"new").unwrap();
        for link in ["link.json", "link2.json"] {
            let meta = fs::symlink_metadata(dir.path().join(link)).unwrap();
            assert!(meta.file_type().is_symlink(), "{link} was replaced");
        }
        assert_eq!(fs::read(&real).unwrap(), b"new");
        assert_eq!(
            entries(dir.path()),
            ["link.json", "link2.json", "real.json"]
        );

        // A dangling link: its target is created, in the target's directory.
        fs::create_dir(dir.path().join("sub")).unwrap();
        symlink("sub/made.json", dir.path().join("dangling.json")).unwrap();
        write_atomically(&dir.path().join("dangling.json"), b"{}").unwrap();
        assert!(fs::symlink_metadata(dir.path().join("dangling.json"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(dir.path().join("sub/made.json")).unwrap(), b"{}");
        assert_eq!(entries(&dir.path().join("sub")), ["made.json"]);

        // A link to a directory, and a loop of links: errors, nothing changed.
        symlink("sub", dir.path().join("to-dir")).unwrap();
        let error = write_atomically(&dir.path().join("to-dir"), b"{}").unwrap_err();
        assert!(error.to_string().contains("directory"), "{error}");
        symlink("loop-b", dir.path().join("loop-a")).unwrap();
        symlink("loop-a", dir.path().join("loop-b")).unwrap();
        assert!(write_atomically(&dir.path().join("loop-a"), b"{}").is_err());
        assert_eq!(entries(&dir.path().join("sub")), ["made.json"]);
    }

    #[test]
    fn a_pipe_or_a_device_is_written_in_place() {
        use std::os::unix::fs::{symlink, FileTypeExt};
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        symlink("fifo", dir.path().join("to-fifo")).unwrap();
        for path in [fifo.clone(), dir.path().join("to-fifo")] {
            let reader = {
                let fifo = fifo.clone();
                std::thread::spawn(move || fs::read(fifo).unwrap())
            };
            assert_eq!(
                destination(&path).unwrap(),
                Destination::Direct(path.clone())
            );
            write_atomically(&path, b"{\"a\": 1}\n").unwrap();
            let meta = fs::symlink_metadata(&fifo).unwrap();
            assert!(meta.file_type().is_fifo(), "the pipe was replaced");
            assert_eq!(reader.join().unwrap(), b"{\"a\": 1}\n");
        }
        assert_eq!(entries(dir.path()), ["fifo", "to-fifo"]);

        let null = Path::new("/dev/null");
        write_atomically(null, b"{}").unwrap();
        let meta = fs::symlink_metadata(null).unwrap();
        assert!(meta.file_type().is_char_device());
        // `/dev/stdout` and `/dev/fd/N` are links through /proc: written in place.
        assert!(matches!(
            destination(Path::new("/dev/stdout")),
            Ok(Destination::Direct(_)) | Err(_)
        ));
        let file = tempfile::NamedTempFile::new_in(dir.path()).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(file.as_file());
        let by_fd = PathBuf::from(format!("/dev/fd/{fd}"));
        assert_eq!(destination(&by_fd).unwrap(), Destination::Direct(by_fd));
    }

    #[test]
    fn a_new_file_gets_the_umask_mode_and_a_replaced_file_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let status = fs::read_to_string("/proc/self/status").unwrap();
        let umask = status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .map(|v| u32::from_str_radix(v.trim(), 8).unwrap())
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o7777;
        let path = dir.path().join("p.json");
        write_atomically(&path, b"{}").unwrap();
        assert_eq!(mode(&path), 0o666 & !umask);
        for kept in [0o600, 0o640, 0o664] {
            fs::set_permissions(&path, fs::Permissions::from_mode(kept)).unwrap();
            write_atomically(&path, b"{\"b\": 2}").unwrap();
            assert_eq!(mode(&path), kept);
            assert_eq!(fs::read(&path).unwrap(), b"{\"b\": 2}");
        }
    }

    #[test]
    fn splits_the_command_line() {
        assert_eq!(split_cmdline(b"./app\0-n\0\0x\0"), ["./app", "-n", "", "x"]);
        assert_eq!(split_cmdline(b""), Vec::<String>::new());
        assert_eq!(split_cmdline(b"a\xff"), ["a\u{fffd}"]);
        assert!(!program_arguments().is_empty());
    }
}
