//! Writing the profile: whole or not at all.

use std::fs::{self, OpenOptions};
use std::io::Write;
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

/// Writes `bytes` to `path` atomically: into a temporary file in the same directory, flushed to
/// disk, then renamed over `path`. On failure nothing is left behind and `path` is unchanged.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    static SEQUENCE: AtomicU32 = AtomicU32::new(0);
    let Some(name) = path.file_name() else {
        return Err(WriteError::NotAFile {
            path: path.to_owned(),
        });
    };
    let dir = match path.parent() {
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
    let io = |source| WriteError::Io {
        path: path.to_owned(),
        source,
    };
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)
    })();
    if let Err(source) = result {
        let _ = fs::remove_file(&temp);
        return Err(io(source));
    }
    Ok(())
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
    fn splits_the_command_line() {
        assert_eq!(split_cmdline(b"./app\0-n\0\0x\0"), ["./app", "-n", "", "x"]);
        assert_eq!(split_cmdline(b""), Vec::<String>::new());
        assert_eq!(split_cmdline(b"a\xff"), ["a\u{fffd}"]);
        assert!(!program_arguments().is_empty());
    }
}
