//! `--cuda-flux-prefix`: a stand-in CUDA toolkit directory for Makefiles.

use std::path::{Path, PathBuf};

use crate::driver::args::Target;

/// A line of a `--cuda-flux-prefix` directory's `bin/nvcc` when it is a script (the CPU
/// target's, the second line), by which the search for the real nvcc tells it apart.
pub const PREFIX_SCRIPT_MARK: &str = "# cuda-flux-nvcc --cuda-flux-prefix";

/// Writes `dir` as a stand-in for a CUDA toolkit directory, for Makefiles that take the
/// toolkit's location rather than the compiler (`CUDA_DIR=dir`, `CUDA_PATH=dir`) and that link
/// with gcc/g++ and `-L$(CUDA_DIR)/lib64 -lcudart` instead of nvcc, for `target`:
/// - `bin/nvcc` is cuda-flux-nvcc (for the CPU target a script running it with
///   `CUDA_FLUX_TARGET=cpu` unless the environment names a target); `bin/ptxas`,
///   `bin/fatbinary` the toolkit's;
/// - `include`, `nvvm` are the toolkit's;
/// - `lib64/libcudart.so`, `libcudart.a`, `libcudart_static.a` are linker scripts: for the GPU
///   target naming the cuda-flux host runtime (its link anchor, so that the archive is
///   extracted although the objects' carried stand-ins define the entry points weakly) and the
///   real static cudart; for the CPU target naming the shared CPU runtime, which replaces
///   cudart. The toolkit's other libraries (`libcu*`, `libnv*`) are linked in as they are;
///   `lib` is `lib64`.
///
/// Idempotent: existing entries are replaced.
pub fn write_prefix(dir: &Path, target: Target) -> anyhow::Result<()> {
    use anyhow::{bail, Context as _};
    use std::os::unix::fs::symlink;
    let tools = crate::driver::Toolchain::discover(None)?;
    let exe = std::env::current_exe().context("cannot locate cuda-flux-nvcc")?;
    let link = |target: &Path, at: PathBuf| -> anyhow::Result<()> {
        if at.symlink_metadata().is_ok() {
            std::fs::remove_file(&at)
                .with_context(|| format!("cannot replace {}", at.display()))?;
        }
        symlink(target, &at).with_context(|| format!("cannot create {}", at.display()))
    };
    // A tool given by name is looked up in PATH, as the driver would run it.
    let find = |tool: &Path| -> Option<PathBuf> {
        if tool.components().count() > 1 {
            return Some(tool.to_path_buf());
        }
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    };
    for sub in ["bin", "lib64"] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("cannot create {}", dir.join(sub).display()))?;
    }
    let nvcc = dir.join("bin/nvcc");
    match target {
        Target::Gpu => link(&exe, nvcc)?,
        Target::Cpu => {
            if nvcc.symlink_metadata().is_ok() {
                std::fs::remove_file(&nvcc)
                    .with_context(|| format!("cannot replace {}", nvcc.display()))?;
            }
            let exe_text = exe.to_string_lossy().replace('\'', "'\\''");
            let script = format!(
                "#!/bin/sh\n{PREFIX_SCRIPT_MARK} (CPU target)\n\
                 : \"${{CUDA_FLUX_TARGET:=cpu}}\"\nexport CUDA_FLUX_TARGET\nexec '{exe_text}' \"$@\"\n"
            );
            std::fs::write(&nvcc, script)
                .with_context(|| format!("cannot write {}", nvcc.display()))?;
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", nvcc.display()))?;
        }
    }
    for (name, tool) in [("ptxas", &tools.ptxas), ("fatbinary", &tools.fatbinary)] {
        match find(tool) {
            Some(path) => link(&path, dir.join("bin").join(name))?,
            None => bail!("cannot find {name} (set CUDA_PATH to the CUDA toolkit)"),
        }
    }
    let cuda = tools.cuda_path.clone();
    let include = [
        cuda.as_ref().map(|c| c.join("include")),
        Some(PathBuf::from("/usr/include")),
        Some(PathBuf::from("/usr/local/cuda/include")),
    ]
    .into_iter()
    .flatten()
    .find(|d| d.join("cuda_runtime.h").exists())
    .context("cannot find the CUDA headers (cuda_runtime.h)")?;
    link(&include, dir.join("include"))?;
    if let Some(nvvm) = cuda.map(|c| c.join("nvvm")).filter(|n| n.exists()) {
        link(&nvvm, dir.join("nvvm"))?;
    }
    let cudart_dir = tools
        .cudart_dir
        .clone()
        .context("cannot find libcudart_static.a (set CUDA_PATH to the CUDA toolkit)")?;
    crate::driver::carry::write_cudart_scripts(&dir.join("lib64"), target, &tools)?;
    let entries = std::fs::read_dir(&cudart_dir)
        .with_context(|| format!("cannot read {}", cudart_dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if (name.starts_with("libcu") || name.starts_with("libnv"))
            && !name.starts_with("libcudart")
        {
            link(&entry.path(), dir.join("lib64").join(&*name))?;
        }
    }
    link(Path::new("lib64"), dir.join("lib"))
}
