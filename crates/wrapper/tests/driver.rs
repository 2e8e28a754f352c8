//! `cuda-flux-clang` on the corpus, without a GPU: every program builds instrumented for sm_70
//! and sm_90 with no fallback, the fat binary holds each kernel and its clone for each
//! architecture, and the host code calls the runtime at every launch.

#[path = "../../ptx-lexer/tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;

fn driver() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cuda-flux-clang"))
}

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

/// Call sites (`call`/`invoke`) of `function` in textual IR.
fn call_sites(ir: &str, function: &str) -> usize {
    let callee = format!("@{function}(");
    ir.lines()
        .filter(|l| l.contains(&callee) && (l.contains(" call ") || l.contains(" invoke ")))
        .count()
}

/// Disassembles bitcode to text with llvm-dis-16.
fn disassemble(bitcode: &Path) -> String {
    let output = Command::new("llvm-dis-16")
        .arg(bitcode)
        .arg("-o")
        .arg("-")
        .output()
        .expect("llvm-dis-16 runs (scripts/setup.sh installs it)");
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

fn compile(source: &Path, keep: &Path, object: &Path) -> Result<String, String> {
    let output = driver()
        .args([
            "-O2",
            "--cuda-gpu-arch=sm_70",
            "--cuda-gpu-arch=sm_90",
            "-c",
        ])
        .arg(format!("--cuda-flux-keep={}", keep.display()))
        .arg(source)
        .arg("-o")
        .arg(object)
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        return Err(format!("{}: driver failed:\n{stderr}", source.display()));
    }
    Ok(stderr)
}

#[test]
fn every_corpus_program_builds_instrumented() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("driver-corpus");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let sources = support::corpus_sources();
    let errors = support::parallel(&sources, |source| {
        let stem = source.file_stem().unwrap().to_string_lossy().to_string();
        let keep = root.join(&stem);
        let object = root.join(format!("{stem}.o"));
        let stderr = compile(source, &keep, &object)?;
        // Only the documented limitation may be warned about: indirect calls.
        for line in stderr.lines().filter(|l| l.contains("warning")) {
            if !line.contains("indirect calls") && !line.contains("Stack size") {
                return Err(format!("{stem}: unexpected warning: {line}"));
            }
        }
        // Each kernel of the original PTX has its clone in the SASS of both architectures.
        let kernels: Vec<String> = ptx_lexer::parse(
            std::fs::read_to_string(keep.join(format!("0-{stem}.sm_70.ptx")))
                .map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?
        .functions()
        .filter(|f| f.kind() == ptx_lexer::FunctionKind::Entry && f.is_definition())
        .map(|f| f.name().to_string())
        .collect();
        let sass = Command::new("cuobjdump")
            .arg("-sass")
            .arg(&object)
            .output()
            .map_err(|e| e.to_string())?;
        let sass = String::from_utf8_lossy(&sass.stdout);
        for kernel in &kernels {
            for name in [kernel.clone(), format!("{kernel}__cf")] {
                let listed = count(&sass, &format!("Function : {name}\n"));
                if listed != 2 {
                    return Err(format!(
                        "{stem}: {name} is listed {listed} times in the SASS, not once per arch"
                    ));
                }
            }
        }
        // The host code: every launch goes to the runtime, each clone is registered.
        let original = disassemble(&keep.join(format!("0-{stem}.host.bc")));
        let instrumented =
            std::fs::read_to_string(keep.join(format!("0-{stem}.host.instrumented.ll")))
                .map_err(|e| e.to_string())?;
        let launches = call_sites(&original, "cudaLaunchKernel");
        let routed = call_sites(&instrumented, "__cuda_flux_launch_kernel");
        if launches == 0 || call_sites(&instrumented, "cudaLaunchKernel") != 0 || routed != launches
        {
            return Err(format!(
                "{stem}: {launches} launches, {routed} routed to the runtime"
            ));
        }
        let registered = count(&instrumented, "call void @__cuda_flux_register_kernel(");
        if registered != 2 * kernels.len() {
            return Err(format!(
                "{stem}: {registered} snapshot registrations for {} kernels x 2 archs",
                kernels.len()
            ));
        }
        // Link the object through the driver, build the plain program, run both.
        let program = root.join(format!("{stem}.instrumented"));
        let output = driver()
            .arg(&object)
            .arg("-o")
            .arg(&program)
            .output()
            .map_err(|e| e.to_string())?;
        if !output.status.success() {
            return Err(format!(
                "{stem}: link failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let plain = root.join(format!("{stem}.plain"));
        let output = Command::new("clang++-16")
            .args([
                "-x",
                "cuda",
                "-O2",
                "--cuda-gpu-arch=sm_70",
                "--cuda-gpu-arch=sm_90",
            ])
            .args(["--cuda-path=/usr/lib/cuda", "-Wno-unknown-cuda-version"])
            .arg(source)
            .arg("-o")
            .arg(&plain)
            .args([
                "-L/usr/lib/x86_64-linux-gnu",
                "-lcudart_static",
                "-ldl",
                "-lrt",
                "-lpthread",
            ])
            .output()
            .map_err(|e| e.to_string())?;
        if !output.status.success() {
            return Err(format!(
                "{stem}: plain build failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        same_behaviour(&stem, &plain, &program)
    });
    assert!(
        errors.is_empty(),
        "{} failure(s):\n{}",
        errors.len(),
        errors.join("\n\n")
    );
}

/// Runs both programs in empty directories. Without a GPU the instrumented one must behave
/// exactly like the plain one (output, status) and write nothing; with a GPU both must print the
/// same result line, and the profile must be complete JSON.
fn same_behaviour(stem: &str, plain: &Path, instrumented: &Path) -> Result<(), String> {
    type Run = (String, Option<i32>, Vec<std::path::PathBuf>);
    let run = |program: &Path| -> Result<Run, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let output = Command::new(program)
            .current_dir(dir.path())
            .env_remove("CUDA_FLUX_OUTPUT")
            .output()
            .map_err(|e| e.to_string())?;
        let files = std::fs::read_dir(dir.path())
            .map_err(|e| e.to_string())?
            .map(|e| e.map(|e| e.path()).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        for file in &files {
            let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
            serde_json::from_str::<serde_json::Value>(&text)
                .map_err(|e| format!("{stem}: {} is not complete JSON: {e}", file.display()))?;
        }
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        Ok((text, output.status.code(), files))
    };
    let (plain_text, plain_status, _) = run(plain)?;
    let (text, status, files) = run(instrumented)?;
    if plain_text.contains("result: PASS") {
        // A GPU is present.
        let result = |t: &str| {
            t.lines()
                .find(|l| l.starts_with("result:"))
                .map(str::to_string)
        };
        if result(&plain_text) != result(&text) || files.len() != 1 {
            return Err(format!(
                "{stem}: with a GPU, results differ or no profile:\n{text}"
            ));
        }
    } else if (plain_text.as_str(), plain_status) != (text.as_str(), status) || !files.is_empty() {
        return Err(format!(
            "{stem}: without a GPU the instrumented build must behave like the plain one\n\
             plain ({plain_status:?}): {plain_text}\ninstrumented ({status:?}): {text}\nfiles: {files:?}"
        ));
    }
    Ok(())
}

#[test]
fn usage_errors_are_one_line_and_exit_2() {
    for args in [
        vec!["-c"],
        vec!["--cuda-gpu-arch=gfx90a", "x.cu"],
        vec!["-o"],
    ] {
        let output = driver().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
}

#[test]
fn compile_errors_in_user_code_pass_through_with_their_status() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("broken.cu");
    std::fs::write(&source, "__global__ void k() { undeclared(); }\n").unwrap();
    let output = driver()
        .arg("-c")
        .arg(&source)
        .arg("-o")
        .arg(dir.path().join("b.o"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("undeclared"),
        "clang's own diagnostic is shown: {stderr}"
    );
    assert!(!stderr.contains("panicked"));
}
