//! `cuda-flux-nvcc` builds Makefile projects written for nvcc, unmodified: each project of
//! tests/nvcc-projects is built once with real nvcc (so it is a valid nvcc project) and once with
//! `make NVCC=cuda-flux-nvcc`; the instrumented build must carry a counting clone of each kernel
//! and behave like the nvcc build when run.

use std::path::Path;
use std::process::Command;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Builds `project` with `make NVCC=nvcc_command` in a fresh copy; returns the copy's path.
fn make(project: &str, nvcc_command: &str, dir: &Path) -> std::path::PathBuf {
    make_with(project, &format!("NVCC={nvcc_command}"), dir, &[]).0
}

/// Builds `project` with `make assignment` (e.g. `CUDA_DIR=...`) and `env` in a fresh copy;
/// returns the copy's path and make's stderr.
fn make_with(
    project: &str,
    assignment: &str,
    dir: &Path,
    env: &[(&str, &Path)],
) -> (std::path::PathBuf, String) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/nvcc-projects")
        .join(project);
    let copy = dir.join(project);
    copy_dir(&source, &copy);
    let output = Command::new("make")
        .arg(assignment)
        .envs(env.iter().copied())
        .current_dir(&copy)
        .output()
        .expect("make runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{project} with {assignment}:\n{}{stderr}",
        String::from_utf8_lossy(&output.stdout),
    );
    (copy, stderr)
}

/// Whether `binary` carries a counting clone (`<kernel>__cf`) in its SASS.
fn has_counting_clone(binary: &Path) -> bool {
    let sass = Command::new("cuobjdump")
        .arg("-sass")
        .arg(binary)
        .output()
        .unwrap();
    String::from_utf8_lossy(&sass.stdout).contains("__cf\n")
}

/// The line a project prints as its verdict: `result: ...`, or the CUDA error without a GPU.
fn verdict(text: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with("result:") || l.starts_with("CUDA error"))
        .map(String::from)
}

/// Call sites (`call`/`invoke`) of `function` in textual IR.
fn call_sites(ir: &str, function: &str) -> usize {
    let callee = format!("@{function}(");
    ir.lines()
        .filter(|l| l.contains(&callee) && (l.contains(" call ") || l.contains(" invoke ")))
        .count()
}

fn run(app: &Path) -> (Option<i32>, String) {
    let output = Command::new(app)
        .current_dir(app.parent().unwrap())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.code(), text)
}

#[test]
fn makefile_projects_build_unmodified() {
    let nvcc_driver = env!("CARGO_BIN_EXE_cuda-flux-nvcc");
    for project in ["shims", "gencode", "chevrons", "dryrunlibs"] {
        let dir = tempfile::tempdir().unwrap();
        let reference = make(project, "nvcc", &dir.path().join("nvcc"));
        let (instrumented, stderr) = make_with(
            project,
            &format!("NVCC={nvcc_driver}"),
            &dir.path().join("cuda-flux"),
            &[],
        );
        assert!(
            has_counting_clone(&instrumented.join("app")),
            "{project}: no counting clone in the binary"
        );
        // shims builds three objects and links for sm_35: one note for the whole build.
        if project == "shims" {
            assert_eq!(
                stderr.matches("not supported by this toolchain").count(),
                1,
                "{project}: the note is printed once per build:\n{stderr}"
            );
        }
        // dryrunlibs links with g++ and the libraries named after `-o "a.out"` in
        // `-dryrun`'s link line: they must be the cuda-flux runtime's (the fallback,
        // -lcudart, would leave the instrumented launches unresolved). Its deprecated call
        // warns once, as with nvcc (two architectures); `register` in its kernel not at all.
        if project == "dryrunlibs" {
            assert_eq!(stderr.matches("is deprecated").count(), 1, "{stderr}");
            assert!(!stderr.contains("register"), "{stderr}");
        }
        let (reference_status, reference_text) = run(&reference.join("app"));
        let (status, text) = run(&instrumented.join("app"));
        assert_eq!(
            (status, verdict(&text)),
            (reference_status, verdict(&reference_text)),
            "{project}: the instrumented build behaves unlike the nvcc build"
        );
    }
}

/// Spaced chevrons (`<< <`, `>> >`) build as launches, in the source and in a file it includes;
/// strings, comments, `operator<< <T>` and `>> >` closing templates are untouched; `__FILE__`,
/// `__LINE__` and the dependency file name the original source.
#[test]
fn spaced_launch_chevrons_are_instrumented_launches() {
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join("keep");
    let reference = make("chevrons", "nvcc", &dir.path().join("nvcc"));
    let (instrumented, _) = make_with(
        "chevrons",
        &format!("NVCC={}", env!("CARGO_BIN_EXE_cuda-flux-nvcc")),
        &dir.path().join("cuda-flux"),
        &[("CUDA_FLUX_KEEP", &keep)],
    );
    assert!(has_counting_clone(&instrumented.join("app")));
    // Three launch expressions (two in main.cu, one in launch.cuh), each routed to the runtime.
    let original = Command::new("llvm-dis-16")
        .arg(keep.join("0-main.host.bc"))
        .args(["-o", "-"])
        .output()
        .expect("llvm-dis-16 runs (scripts/setup.sh installs it)");
    let original = String::from_utf8_lossy(&original.stdout);
    let routed = std::fs::read_to_string(keep.join("0-main.host.instrumented.ll")).unwrap();
    assert_eq!(call_sites(&original, "__cudaPushCallConfiguration"), 3);
    let launches = call_sites(&original, "cudaLaunchKernel");
    assert!(launches > 0);
    assert_eq!(call_sites(&routed, "cudaLaunchKernel"), 0);
    assert_eq!(call_sites(&routed, "__cuda_flux_launch_kernel"), launches);
    // What the program prints before any CUDA call is the same as nvcc's build prints.
    let (_, reference_text) = run(&reference.join("app"));
    let (_, text) = run(&instrumented.join("app"));
    let before_cuda = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("text:") || l.starts_with("file:") || l.starts_with("box:"))
            .map(String::from)
            .collect()
    };
    assert_eq!(before_cuda(&text), before_cuda(&reference_text));
    assert!(text.contains("text: scale<< <1, 1>> >(d)"), "{text}");
    assert!(text.contains("file: main.cu line: 29"), "{text}");
    let deps = std::fs::read_to_string(instrumented.join("main.d")).unwrap();
    assert!(deps.starts_with("main.o: main.cu"), "{deps}");
    // Nothing of the driver's: its work directory is gone by the next make, and the kept one
    // may be (a prerequisite that does not exist stops make).
    assert!(!deps.contains("cuda-flux-"), "{deps}");
    assert!(!deps.contains("cuda_flux_prelude"), "{deps}");
}

/// A Makefile that takes the toolkit's directory (`CUDA_DIR`), runs `nvcc -cuda`, and links
/// with gcc and `-lcudart`: pointed at `cuda-flux-nvcc --cuda-flux-prefix`, it builds the
/// program instrumented.
#[test]
fn cuda_dir_prefix_builds_gcc_linked_programs() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    // Reference: a toolkit directory whose bin/nvcc is the real one (cudart from the default
    // library path).
    let nvcc_dir = dir.path().join("nvcc-toolkit");
    std::fs::create_dir_all(nvcc_dir.join("bin")).unwrap();
    let nvcc = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("nvcc"))
        .find(|p| p.is_file())
        .expect("nvcc in PATH");
    symlink(&nvcc, nvcc_dir.join("bin/nvcc")).unwrap();
    let (reference, _) = make_with(
        "cudadir",
        &format!("CUDA_DIR={}", nvcc_dir.display()),
        &dir.path().join("nvcc"),
        &[],
    );
    let prefix = dir.path().join("cuda-flux-toolkit");
    let status = Command::new(env!("CARGO_BIN_EXE_cuda-flux-nvcc"))
        .arg(format!("--cuda-flux-prefix={}", prefix.display()))
        .status()
        .unwrap();
    assert!(status.success());
    let (instrumented, stderr) = make_with(
        "cudadir",
        &format!("CUDA_DIR={}", prefix.display()),
        &dir.path().join("cuda-flux"),
        &[],
    );
    assert!(
        instrumented.join("kernel.cu.cpp.ii").exists(),
        "-cuda writes the preprocessed host side"
    );
    assert!(has_counting_clone(&instrumented.join("app")), "{stderr}");
    let symbols = Command::new("nm")
        .arg(instrumented.join("app"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&symbols.stdout).contains("__cuda_flux_launch_kernel"),
        "gcc's -lcudart linked the cuda-flux runtime"
    );
    let (reference_status, reference_text) = run(&reference.join("app"));
    let (status, text) = run(&instrumented.join("app"));
    assert_eq!(
        (status, verdict(&text)),
        (reference_status, verdict(&reference_text))
    );
}

/// `-dryrun` lists the build's commands and in-process steps and runs none of them.
#[test]
fn dryrun_prints_commands_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("k.cu");
    std::fs::write(
        &source,
        "__global__ void k(int *p) { *p = 1; }\nint main() { k<< <1, 1>> >(nullptr); }\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_cuda-flux-nvcc"))
        .args(["-dryrun", "-O2", "-arch=sm_80", "k.cu", "-o", "app"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let commands: Vec<&&str> = lines.iter().filter(|l| !l.starts_with('#')).collect();
    // Device compile, ptxas, fatbinary, host compile, the carried part (compiled, merged into
    // the object with `-r`, copied to it), link.
    assert_eq!(commands.len(), 8, "{stdout}");
    assert!(commands[0].contains("--cuda-device-only") && commands[0].contains("sm_80"));
    assert!(commands[1].starts_with("ptxas") || commands[1].contains("/ptxas "));
    assert!(commands[2].contains("fatbinary"));
    assert!(commands[3].contains("--cuda-host-only"));
    assert!(commands[4].contains("cuda_flux_carried.c"));
    assert!(commands[5].contains(" -r ") && commands[6].starts_with("cp "));
    // As nvcc prints it (`-o "app"`), and followed by just the libraries a gcc link of the
    // objects needs: SHOC's find_cuda_libs.sh takes what follows `-o "a.out"` as those.
    let (_, libraries) = commands[7]
        .split_once(" -o \"app\" ")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        libraries.contains("libhost_runtime.a") && libraries.contains("-lcudart_static"),
        "{libraries}"
    );
    assert!(!libraries.contains(".o "), "{libraries}");
    // The chevron rewrite, the instrumentation and the host pass are in-process steps.
    for step in ["spaced chevrons", "instrument", "host pass"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("# ") && l.contains(step)),
            "{step}: {stdout}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["k.cu"], "nothing written next to the source");
}

#[test]
fn unknown_flags_are_one_line_and_exit_2() {
    let output = Command::new(env!("CARGO_BIN_EXE_cuda-flux-nvcc"))
        .args(["--no-such-flag", "k.cu"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--no-such-flag"), "{stderr}");
    let output = Command::new(env!("CARGO_BIN_EXE_cuda-flux-nvcc"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("release 11.8"));
}

/// `--help` (and `-h`) is nvcc's layout, exit 0, and names as `compute_NN` exactly the
/// architectures the pipeline builds: SHOC's configure turns each `compute_NN` it greps there
/// into a `-gencode`, so an unsupported one would become a build of every source for it.
#[test]
fn help_lists_options_and_supported_architectures() {
    for option in ["--help", "-h"] {
        let output = Command::new(env!("CARGO_BIN_EXE_cuda-flux-nvcc"))
            .arg(option)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{option}");
        let text = String::from_utf8_lossy(&output.stdout);
        for expected in [
            "Usage  : cuda-flux-nvcc [options] <inputfile>",
            "--output-file <file>",
            "--gpu-architecture <arch>",
            "(-gencode)",
            "Allowed values for this option:",
        ] {
            assert!(text.contains(expected), "{option}: {expected}\n{text}");
        }
        // `grep -o "compute_[0-9][0-9]" | sort | uniq`, as SHOC's configure.ac has it.
        let mut archs: Vec<&str> = text
            .match_indices("compute_")
            .filter_map(|(at, _)| text.get(at..at + 10))
            .filter(|a| a[8..].bytes().all(|b| b.is_ascii_digit()))
            .collect();
        archs.sort_unstable();
        archs.dedup();
        let supported = [50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90];
        assert_eq!(archs, supported.map(|n| format!("compute_{n}")), "{option}");
    }
}

/// A deprecated runtime call warns once, as with nvcc, not once per architecture plus once for
/// the host (clang parses the source again for each); nvcc's `-Wno-deprecated-declarations`
/// silences it. `register` in a kernel warns with neither.
#[test]
fn deprecation_warnings_once_as_with_nvcc() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("k.cu"),
        "__global__ void k(int *p) { register int x = 1; *p = x; }\n\
         int main() { k<<<1, 1>>>(nullptr); cudaThreadSynchronize(); return 0; }\n",
    )
    .unwrap();
    let warnings = |compiler: &str, extra: &[&str]| -> usize {
        let output = Command::new(compiler)
            .args([
                "-gencode=arch=compute_70,code=sm_70",
                "-gencode=arch=compute_80,code=sm_80",
            ])
            .args(extra)
            .args(["-c", "k.cu", "-o", "k.o"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{compiler}: {stderr}");
        // `register` in a kernel: nvcc says nothing (clang: `-Wdeprecated-register`).
        assert!(!stderr.contains("register"), "{compiler}: {stderr}");
        stderr.matches("is deprecated").count()
    };
    let driver = env!("CARGO_BIN_EXE_cuda-flux-nvcc");
    assert_eq!(warnings(driver, &[]), 1);
    assert_eq!(warnings(driver, &[]), warnings("nvcc", &[]));
    assert_eq!(warnings(driver, &["-Wno-deprecated-declarations"]), 0);
    assert_eq!(warnings("nvcc", &["-Wno-deprecated-declarations"]), 0);
}

/// `program ARGS` run in `dir`: stdout, stderr, exit status.
fn answer(program: &str, args: &[&str], dir: &Path) -> (String, String, Option<i32>) {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.code(),
    )
}

/// Build systems' queries get nvcc 11.8's own answer, word for word (`nvcc --version | tail
/// -n1` and CMake's `V11.8.89` read the same text), and a command line without inputs (`-v`,
/// `-dryrun` alone) nvcc's "No input files" and status. The oracle is nvcc run with the same
/// arguments.
#[test]
fn queries_are_answered_as_nvcc_answers_them() {
    let dir = tempfile::tempdir().unwrap();
    let driver = env!("CARGO_BIN_EXE_cuda-flux-nvcc");
    let queries: &[&[&str]] = &[
        &["--version"],
        &["-V"],
        &["--list-gpu-code"],
        &["--list-gpu-arch"],
        &["-dryrun"],
        &["-v"],
        &[],
        &["-O2", "-c"],
    ];
    for args in queries {
        let ours = answer(driver, args, dir.path());
        assert_eq!(ours, answer("nvcc", args, dir.path()), "{args:?}");
        assert!(!ours.0.is_empty() || !ours.1.is_empty(), "{args:?}");
    }
    let (version, _, _) = answer(driver, &["--version"], dir.path());
    assert!(version.contains("release 11.8, V11.8.89"), "{version}");
    // The `bin/nvcc` of a `--cuda-flux-prefix` directory first in PATH (and as CUDA_PATH) is
    // cuda-flux-nvcc itself: it still answers with the real nvcc's text, asking it once.
    let prefix = dir.path().join("prefix");
    let status = Command::new(driver)
        .arg(format!("--cuda-flux-prefix={}", prefix.display()))
        .status()
        .unwrap();
    assert!(status.success());
    let path = format!(
        "{}:{}",
        prefix.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let output = Command::new(prefix.join("bin/nvcc"))
        .arg("--version")
        .env("PATH", &path)
        .env("CUDA_PATH", &prefix)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout), version);
    // Each architecture listed builds: sm_35 and sm_37 (listed by nvcc 11.8) as sm_50.
    let (codes, _, _) = answer(driver, &["--list-gpu-code"], dir.path());
    std::fs::write(dir.path().join("k.cu"), "__global__ void k() {}\n").unwrap();
    for code in codes.lines() {
        let (_, stderr, status) = answer(
            driver,
            &["-dryrun", &format!("-arch={code}"), "-c", "k.cu"],
            dir.path(),
        );
        assert_eq!(status, Some(0), "{code}: {stderr}");
    }
}

/// A `.c` input is C, as nvcc compiles it (gcc `-x c`): a function defined there and declared
/// `extern "C"` in a `.cu` file links, and C-only code (`new` as a name) compiles. The program
/// runs on the CPU target; real nvcc builds (compiles and links) the same sources.
#[test]
fn c_inputs_are_compiled_as_c() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("helper.c"),
        "/* C, not C++: `new` is a name, and the symbol is not mangled. */\n\
         int helper_scale(int new) { return 3 * new; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("main.cu"),
        r#"#include <cstdio>
extern "C" int helper_scale(int);
__global__ void fill(int *out, int factor) { out[threadIdx.x] = factor * threadIdx.x; }
int main() {
    int *d = nullptr;
    int h[32];
    cudaMalloc(&d, sizeof h);
    fill<<<1, 32>>>(d, helper_scale(2));
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    int sum = 0;
    for (int i = 0; i < 32; ++i) sum += h[i];
    printf("sum %d\n", sum);
    return 0;
}
"#,
    )
    .unwrap();
    let driver = env!("CARGO_BIN_EXE_cuda-flux-nvcc");
    // One call, and separate compiles linked by a third, as Makefiles do.
    let builds: &[&[&[&str]]] = &[
        &[&["-O2", "main.cu", "helper.c", "-o", "app1"]],
        &[
            &["-c", "helper.c"],
            &["-c", "main.cu"],
            &["main.o", "helper.o", "-o", "app2"],
        ],
    ];
    for (index, steps) in builds.iter().enumerate() {
        for args in steps.iter() {
            let output = Command::new(driver)
                .env("CUDA_FLUX_TARGET", "cpu")
                .args(*args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let app = dir.path().join(format!("app{}", index + 1));
        let (status, stdout) = run(&app);
        assert_eq!(status, Some(0), "{}", app.display());
        // 6 * (0 + 1 + ... + 31)
        assert_eq!(stdout, "sum 2976\n");
    }
    // The same sources with nvcc: compiled and linked (running needs a GPU).
    let output = Command::new("nvcc")
        .args(["-O2", "main.cu", "helper.c", "-o", "app-nvcc"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Assembly (`.s`, `.S` through the preprocessor) is assembled by the host compiler.
    std::fs::write(
        dir.path().join("answer.S"),
        "#define VALUE 42\n.globl answer_asm\nanswer_asm:\n  movl $VALUE, %eax\n  ret\n\
         .section .note.GNU-stack,\"\",@progbits\n",
    )
    .unwrap();
    for compiler in [driver, "nvcc"] {
        let output = Command::new(compiler)
            .args(["-c", "answer.S", "-o", "answer.o"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{compiler}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let symbols = Command::new("nm")
            .arg(dir.path().join("answer.o"))
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&symbols.stdout).contains(" T answer_asm\n"),
            "{compiler}"
        );
    }
    // As C++ (nvcc `-x c++`), the C source fails for both: the language is what nvcc says.
    for compiler in [driver, "nvcc"] {
        let output = Command::new(compiler)
            .args(["-x", "c++", "-c", "helper.c", "-o", "helper-cxx.o"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(!output.status.success(), "{compiler}");
    }
}
