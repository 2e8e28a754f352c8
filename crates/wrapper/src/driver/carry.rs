//! What an instrumented object carries so that any final link works: weak stand-ins for the
//! runtime's entry points that find the runtime when first called.
//!
//! The host pass makes an object call the host runtime (`__cuda_flux_launch_kernel`, ...), and a
//! CPU-target object hands its CPU image to the CPU runtime's `__cudaRegisterFatBinary`. The
//! drivers link those runtimes, but a program linked by g++ (a Makefile's `g++ -o app *.o
//! -lcudart`, CMake linking a C++ executable against a static library of `.cu` files, a shared
//! library of kernels) would not have them. So every object built from a CUDA source carries,
//! merged in by `ld -r`, a small *carried part* (C and assembly, generated here and compiled by
//! clang):
//!
//! * one **trampoline** per entry point, a weak definition under the entry point's own name
//!   (`jmp *slot`). A strong definition (the runtime linked statically) overrides it; where the
//!   trampoline remains, its first call resolves every slot of the object:
//! * **GPU target** (entry points: the `__cuda_flux_*` calls of the host pass): from the table
//!   `__cuda_flux_runtime_exports` when the host runtime is linked statically (the driver's link
//!   and `--cuda-flux-prefix`'s linker scripts name it, so the archive is always extracted),
//!   else from the shared host runtime (`libhost_runtime.so`, loaded with `dlopen`), whose CUDA
//!   calls bind to the program's shared cudart. When neither can be had (e.g. a foreign link
//!   with the static cudart, whose calls a loaded library cannot see), each entry point falls
//!   back to the CUDA call it replaced (a launch is a plain launch) and the program says once
//!   on stderr why nothing is profiled.
//! * **CPU target** (entry points: every function the CPU runtime exports: the CUDA runtime API,
//!   the registration calls and the `__cuda_flux_*` entry points): from the shared CPU runtime
//!   (`libcpu_runtime.so`). All objects of a process, in the executable and in any shared
//!   library however loaded, thus use one CPU runtime: one device, one profile. A weak
//!   definition in an object takes precedence over a shared library's, so a foreign link's
//!   `-lcudart` cannot take the CUDA calls. Without the CPU runtime the program cannot run its
//!   kernels at all: it says why on stderr and exits with status 1 at its first CUDA call.
//!
//! `CUDA_FLUX_RUNTIME_SO` at run time names the shared runtime to load instead of the one the
//! build used (the path is recorded in the object). The trampolines are x86-64 assembly: they
//! forward any arguments unchanged, whatever the entry point's signature.

use std::fmt::Write as _;
use std::path::Path;

use super::Target;

/// What an entry point does when no runtime provides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// Calls this CUDA function (same signature): the call the host pass replaced. `weak`: the
    /// CUDA runtime may lack it (e.g. `cudaLaunchKernelExC` before CUDA 11.8).
    Cuda { name: String, weak: bool },
    /// Returns 0 (kernel registration: nothing to register without a runtime).
    Nothing,
    /// The CPU target's: say that the CPU runtime cannot be loaded, exit with status 1.
    Exit,
}

/// One entry point an object carries a trampoline for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPoint {
    pub name: String,
    pub fallback: Fallback,
}

/// The GPU target's entry points: the host pass's reroutes (each falls back to the CUDA call it
/// replaced) and the kernel registration.
pub fn gpu_entry_points() -> Vec<EntryPoint> {
    use cuda_flux_pass::host::{DEVICE_RESET, FUNC_SETTING_ROUTES, LAUNCH_ROUTES, REGISTER_KERNEL};
    let mut entries = vec![EntryPoint {
        name: REGISTER_KERNEL.to_string(),
        fallback: Fallback::Nothing,
    }];
    let always = ["cudaLaunchKernel", "cudaDeviceReset"];
    let routes = LAUNCH_ROUTES
        .iter()
        .chain(FUNC_SETTING_ROUTES.iter())
        .copied()
        .chain([("cudaDeviceReset", DEVICE_RESET)]);
    for (cuda, entry) in routes {
        entries.push(EntryPoint {
            name: entry.to_string(),
            fallback: Fallback::Cuda {
                name: cuda.to_string(),
                weak: !always.contains(&cuda) && !cuda.starts_with("cudaFuncSet"),
            },
        });
    }
    entries
}

/// The CPU target's entry points: the functions `library` (the shared CPU runtime) exports
/// whose names start with `cuda` or `__cuda`, read from its dynamic symbol table (`nm -D`), so
/// that the list always matches the runtime that will be loaded.
pub fn cpu_entry_points(library: &Path) -> anyhow::Result<Vec<EntryPoint>> {
    use anyhow::{bail, Context as _};
    let output = std::process::Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(library)
        .output()
        .context("cannot run nm (binutils) to read the CPU runtime's exports")?;
    if !output.status.success() {
        bail!(
            "nm cannot read {}: {}",
            library.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let mut entries: Vec<EntryPoint> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
            let function = kind == "T" || kind == "W";
            (function && (name.starts_with("cuda") || name.starts_with("__cuda"))).then(|| {
                EntryPoint {
                    name: name.to_string(),
                    fallback: Fallback::Exit,
                }
            })
        })
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries.dedup();
    if entries.is_empty() {
        bail!("{} exports no CUDA runtime functions", library.display());
    }
    Ok(entries)
}

/// A C string literal for `text`.
pub(crate) fn c_string(text: &str) -> String {
    let mut literal = String::from("\"");
    for byte in text.bytes() {
        match byte {
            b'"' | b'\\' => {
                literal.push('\\');
                literal.push(byte as char);
            }
            0x20..=0x7e => literal.push(byte as char),
            _ => {
                let _ = write!(literal, "\\{byte:03o}");
            }
        }
    }
    literal.push('"');
    literal
}

/// The carried part's C source for `target`: trampolines for `entries`, their resolver, the
/// shared runtime at `runtime_so`.
pub fn source(target: Target, entries: &[EntryPoint], runtime_so: &Path) -> String {
    let mut c = String::new();
    let count = entries.len();
    c.push_str(
        "/* Generated by cuda-flux (crates/wrapper/src/driver/carry.rs): the runtime's entry\n   \
         points, found when first called. */\n\
         extern void *dlopen(const char *, int);\n\
         extern void *dlsym(void *, const char *);\n\
         extern char *dlerror(void);\n\
         extern char *getenv(const char *);\n\
         extern long write(int, const void *, unsigned long);\n\
         extern unsigned long strlen(const char *);\n\
         extern int strcmp(const char *, const char *);\n\
         extern void exit(int);\n\
         struct cf_export { const char *name; void *function; };\n\
         extern const struct cf_export __cuda_flux_runtime_exports[] __attribute__((weak));\n\
         /* Shared by every object of a link (and, where exported, of a process): one notice. */\n\
         __attribute__((weak)) int __cuda_flux_runtime_notice_shown;\n",
    );
    for entry in entries {
        if let Fallback::Cuda { name, weak } = &entry.fallback {
            let weak = if *weak { " __attribute__((weak))" } else { "" };
            let _ = writeln!(c, "extern int {name}(void){weak};");
        }
    }
    let _ = writeln!(
        c,
        "static const char cf_default_path[] = {};",
        c_string(&runtime_so.to_string_lossy())
    );
    let _ = writeln!(
        c,
        "static const int cf_cpu_target = {};",
        i32::from(target == Target::Cpu)
    );
    let _ = writeln!(c, "static const char *const cf_names[{count}] = {{");
    for entry in entries {
        let _ = writeln!(c, "    {},", c_string(&entry.name));
    }
    c.push_str("};\n");
    let _ = writeln!(
        c,
        "__attribute__((used)) static void *cf_slots[{count}] __asm__(\"__cuda_flux_slots\");"
    );
    c.push_str(
        "static const char *cf_why = \"\";\n\
         static void cf_say(const char *text) { (void)!write(2, text, strlen(text)); }\n\
         static int cf_nothing(void) { return 0; }\n\
         /* cudaErrorInsufficientDriver: a CUDA call the runtime cannot make. */\n\
         static int cf_no_cuda(void) { return 35; }\n\
         static int cf_exit(void) {\n\
         \x20   cf_say(\"cuda-flux: this program was built for the CPU target and cannot load its \
         CPU runtime (\");\n\
         \x20   cf_say(cf_why);\n\
         \x20   cf_say(\"); set CUDA_FLUX_RUNTIME_SO to libcpu_runtime.so, or rebuild\\n\");\n\
         \x20   exit(1);\n\
         \x20   return 0;\n\
         }\n",
    );
    let _ = writeln!(c, "static void *cf_fallback(int index) {{");
    c.push_str("    switch (index) {\n");
    for (index, entry) in entries.iter().enumerate() {
        let body = match &entry.fallback {
            Fallback::Cuda { name, weak: true } => {
                format!("return {name} ? (void *)&{name} : (void *)&cf_no_cuda;")
            }
            Fallback::Cuda { name, weak: false } => format!("return (void *)&{name};"),
            Fallback::Nothing => "return (void *)&cf_nothing;".to_string(),
            Fallback::Exit => "return (void *)&cf_exit;".to_string(),
        };
        let _ = writeln!(c, "    case {index}: {body}");
    }
    c.push_str("    }\n    return (void *)&cf_no_cuda;\n}\n");
    let _ = writeln!(
        c,
        "__attribute__((used)) static void cf_resolve(void) __asm__(\"__cuda_flux_resolve\");\n\
         static void cf_resolve(void) {{\n\
         \x20   const struct cf_export *table = cf_cpu_target ? 0 : __cuda_flux_runtime_exports;\n\
         \x20   void *handle = 0;\n\
         \x20   if (!table) {{\n\
         \x20       const char *path = getenv(\"CUDA_FLUX_RUNTIME_SO\");\n\
         \x20       if (!path || !*path) path = cf_default_path;\n\
         \x20       /* RTLD_NOW | RTLD_GLOBAL */\n\
         \x20       handle = dlopen(path, 0x102);\n\
         \x20       if (!handle) {{ const char *e = dlerror(); cf_why = e ? e : path; }}\n\
         \x20   }}\n\
         \x20   for (int i = 0; i < {count}; i++) {{\n\
         \x20       void *function = 0;\n\
         \x20       for (const struct cf_export *e = table; e && e->name; e++)\n\
         \x20           if (!strcmp(e->name, cf_names[i])) function = e->function;\n\
         \x20       if (!function && handle) function = dlsym(handle, cf_names[i]);\n\
         \x20       if (!function) function = cf_fallback(i);\n\
         \x20       __atomic_store_n(&cf_slots[i], function, __ATOMIC_RELEASE);\n\
         \x20   }}\n\
         \x20   if (!table && !handle && !cf_cpu_target\n\
         \x20       && !__atomic_exchange_n(&__cuda_flux_runtime_notice_shown, 1, __ATOMIC_ACQ_REL)) {{\n\
         \x20       cf_say(\"cuda-flux: cannot load the cuda-flux host runtime (\");\n\
         \x20       cf_say(cf_why);\n\
         \x20       cf_say(\"): the kernels run uninstrumented and no profile is written (link \
         with cuda-flux-clang or cuda-flux-nvcc, or with the shared CUDA runtime, -lcudart)\\n\");\n\
         \x20   }}\n\
         }}"
    );
    // The trampolines, and a routine that saves the argument registers around the resolver.
    c.push_str("__asm__(\n\".text\\n\"\n");
    c.push_str(
        "\".p2align 4\\n\"\n\
         \".local __cuda_flux_resolve_saving\\n\"\n\
         \".type __cuda_flux_resolve_saving,@function\\n\"\n\
         \"__cuda_flux_resolve_saving:\\n\"\n\
         \"  pushq %rbp\\n  movq %rsp, %rbp\\n\"\n\
         \"  pushq %rdi\\n  pushq %rsi\\n  pushq %rdx\\n  pushq %rcx\\n\"\n\
         \"  pushq %r8\\n  pushq %r9\\n  pushq %rax\\n  pushq %r10\\n\"\n\
         \"  subq $128, %rsp\\n  andq $-16, %rsp\\n\"\n\
         \"  movdqa %xmm0, 0(%rsp)\\n  movdqa %xmm1, 16(%rsp)\\n\"\n\
         \"  movdqa %xmm2, 32(%rsp)\\n  movdqa %xmm3, 48(%rsp)\\n\"\n\
         \"  movdqa %xmm4, 64(%rsp)\\n  movdqa %xmm5, 80(%rsp)\\n\"\n\
         \"  movdqa %xmm6, 96(%rsp)\\n  movdqa %xmm7, 112(%rsp)\\n\"\n\
         \"  call __cuda_flux_resolve\\n\"\n\
         \"  movdqa 0(%rsp), %xmm0\\n  movdqa 16(%rsp), %xmm1\\n\"\n\
         \"  movdqa 32(%rsp), %xmm2\\n  movdqa 48(%rsp), %xmm3\\n\"\n\
         \"  movdqa 64(%rsp), %xmm4\\n  movdqa 80(%rsp), %xmm5\\n\"\n\
         \"  movdqa 96(%rsp), %xmm6\\n  movdqa 112(%rsp), %xmm7\\n\"\n\
         \"  leaq -64(%rbp), %rsp\\n\"\n\
         \"  popq %r10\\n  popq %rax\\n  popq %r9\\n  popq %r8\\n\"\n\
         \"  popq %rcx\\n  popq %rdx\\n  popq %rsi\\n  popq %rdi\\n\"\n\
         \"  popq %rbp\\n  ret\\n\"\n\
         \".size __cuda_flux_resolve_saving, .-__cuda_flux_resolve_saving\\n\"\n",
    );
    // CPU target: a shared library's own calls bind to its own trampolines (protected), so that
    // a real libcudart.so earlier in the process's search order cannot take them.
    let protected = if target == Target::Cpu {
        "\".protected "
    } else {
        ""
    };
    for (index, entry) in entries.iter().enumerate() {
        let name = &entry.name;
        let offset = index * 8;
        if !protected.is_empty() {
            let _ = writeln!(c, "{protected}{name}\\n\"");
        }
        let _ = write!(
            c,
            "\".p2align 4\\n\"\n\
             \".weak {name}\\n\"\n\
             \".type {name},@function\\n\"\n\
             \"{name}:\\n\"\n\
             \"0: movq __cuda_flux_slots+{offset}(%rip), %r11\\n\"\n\
             \"  testq %r11, %r11\\n  jz 1f\\n  jmpq *%r11\\n\"\n\
             \"1: call __cuda_flux_resolve_saving\\n  jmp 0b\\n\"\n\
             \".size {name}, .-{name}\\n\"\n"
        );
    }
    c.push_str(");\n");
    c
}

/// The contents of the linker scripts that stand in for `libcudart.so`, `libcudart.a` and
/// `libcudart_static.a` in a directory cuda-flux hands to gcc links (`--cuda-flux-prefix`'s
/// `lib64`, and [`runtime_link_dir`] for CMake): for the GPU target the static host runtime
/// (its export table named, so that the archive is extracted although the objects' trampolines
/// define the entry points weakly) and the real static cudart; for the CPU target the shared
/// CPU runtime, which replaces cudart.
pub fn cudart_script(target: Target, tools: &super::Toolchain) -> anyhow::Result<String> {
    use anyhow::{bail, Context as _};
    Ok(match target {
        Target::Gpu => {
            let cudart_dir = tools
                .cudart_dir
                .clone()
                .context("cannot find libcudart_static.a (set CUDA_PATH to the CUDA toolkit)")?;
            format!(
                "/* cuda-flux: objects built by cuda-flux call its host runtime; link it with the \
                 static cudart wherever -lcudart is asked for. */\nEXTERN ( {} )\n\
                 GROUP ( {} {} -ldl -lrt -lpthread -lm )\n",
                super::RUNTIME_LINK_ANCHOR,
                tools.runtime_lib.display(),
                cudart_dir.join("libcudart_static.a").display()
            )
        }
        Target::Cpu => {
            let runtime = tools.shared_runtime(Target::Cpu);
            if !runtime.exists() {
                bail!(
                    "the CPU runtime library is missing at {} (build the workspace with cargo \
                     build)",
                    runtime.display()
                );
            }
            format!(
                "/* cuda-flux, CPU target: the CUDA runtime API on the CPU replaces cudart \
                 wherever -lcudart is asked for. */\nINPUT ( {} -ldl -lrt -lpthread -lm )\n",
                runtime.display()
            )
        }
    })
}

/// The names under which [`cudart_script`] stands in for cudart.
pub const CUDART_NAMES: [&str; 3] = ["libcudart.so", "libcudart.a", "libcudart_static.a"];

/// Writes the [`cudart_script`] for `target` under each of [`CUDART_NAMES`] in `dir`, replacing
/// what is there; a file that already holds the script is left alone (several builds may run
/// at once).
pub fn write_cudart_scripts(
    dir: &Path,
    target: Target,
    tools: &super::Toolchain,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let script = cudart_script(target, tools)?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for name in CUDART_NAMES {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).is_ok_and(|text| text == script) {
            continue;
        }
        // Written whole, then renamed: a concurrent link never reads half a script.
        let temporary = dir.join(format!(".{name}.{}", std::process::id()));
        std::fs::write(&temporary, &script)
            .with_context(|| format!("cannot write {}", temporary.display()))?;
        std::fs::rename(&temporary, &path)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// The directory of cudart stand-ins for `target` beside the driver (`cuda-flux-lib/<target>`):
/// the drivers' links name it with `-L`, so that build systems that read a compiler's implicit
/// link directories from its `-v` output (CMake) pass it to the links they make with the C++
/// compiler, whose `-lcudart_static` / `-lcudart` then link the cuda-flux runtime. `None` when it
/// cannot be written (only such links lose the runtime: the objects' trampolines say so).
pub fn runtime_link_dir(target: Target, tools: &super::Toolchain) -> Option<std::path::PathBuf> {
    let name = match target {
        Target::Gpu => "gpu",
        Target::Cpu => "cpu",
    };
    let dir = tools.runtime_lib.parent()?.join("cuda-flux-lib").join(name);
    write_cudart_scripts(&dir, target, tools).ok()?;
    Some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_entry_points_fall_back_to_the_calls_they_replace() {
        let entries = gpu_entry_points();
        let launch = entries
            .iter()
            .find(|e| e.name == "__cuda_flux_launch_kernel")
            .unwrap();
        assert_eq!(
            launch.fallback,
            Fallback::Cuda {
                name: "cudaLaunchKernel".into(),
                weak: false
            }
        );
        let register = entries
            .iter()
            .find(|e| e.name == "__cuda_flux_register_kernel")
            .unwrap();
        assert_eq!(register.fallback, Fallback::Nothing);
        assert!(entries.iter().any(|e| e.fallback
            == Fallback::Cuda {
                name: "cudaLaunchKernelExC".into(),
                weak: true
            }));
    }

    #[test]
    fn c_strings_are_escaped() {
        assert_eq!(c_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(c_string("é"), "\"\\303\\251\"");
    }
}
