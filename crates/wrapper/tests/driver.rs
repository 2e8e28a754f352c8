//! `cuda-flux-clang` on the corpus, without a GPU: every program builds instrumented for sm_70
//! and sm_90 with no fallback, the fat binary holds each kernel and its clone for each
//! architecture, and the host code calls the runtime at every launch.

use test_support as support;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

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
        // No kernel falls back; ptxas may only note stack sizes (recursion).
        for line in stderr.lines().filter(|l| l.contains("warning")) {
            if !line.contains("Stack size") {
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
        let (held, left) = registers_fit(&stem, &keep, &kernels)?;
        HELD.fetch_add(held, Ordering::Relaxed);
        LEFT.fetch_add(left, Ordering::Relaxed);
        // The host code: every launch goes to the runtime, each clone is registered.
        let original = disassemble(&keep.join(format!("0-{stem}.host.bc")));
        let instrumented =
            std::fs::read_to_string(keep.join(format!("0-{stem}.host.instrumented.ll")))
                .map_err(|e| e.to_string())?;
        let mut launches = 0;
        for (call, replacement) in cuda_flux_pass::host::LAUNCH_ROUTES {
            let made = call_sites(&original, call);
            let routed = call_sites(&instrumented, replacement);
            if call_sites(&instrumented, call) != 0 || routed != made {
                return Err(format!(
                    "{stem}: {made} calls of {call}, {routed} routed to {replacement}"
                ));
            }
            launches += made;
        }
        if launches == 0 {
            return Err(format!("{stem}: no launch found in the host code"));
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
        same_behaviour(&stem, &plain, &program)?;
        // A pair that behaved is no longer needed (a failing one stays to be looked at): keeping
        // every corpus program's pair took ~1 GB of the disk CI shares with the rest of the run.
        for linked in [&program, &plain] {
            std::fs::remove_file(linked).map_err(|e| format!("{stem}: {e}"))?;
        }
        Ok(())
    });
    assert!(
        errors.is_empty(),
        "{} failure(s):\n{}",
        errors.len(),
        errors.join("\n\n")
    );
    // Both outcomes of fitting occur in the corpus (with CUDA 11.8's ptxas at sm_70,
    // nested_loops' clone is held to 32 registers and loops' would spill there).
    let (held, left) = (HELD.load(Ordering::Relaxed), LEFT.load(Ordering::Relaxed));
    assert!(held > 0 && left > 0, "{held} clone(s) held, {left} left");
}

static HELD: AtomicUsize = AtomicUsize::new(0);
static LEFT: AtomicUsize = AtomicUsize::new(0);

/// What `ptxas -v` says of `ptx` for `arch`, with `.maxnreg` limits added to some clones.
fn ptxas_verbose(
    ptx: &str,
    arch: &str,
    path: &Path,
) -> Result<std::collections::HashMap<String, wrapper::registers::EntryResources>, String> {
    std::fs::write(path, ptx).map_err(|e| e.to_string())?;
    let output = Command::new("ptxas")
        .args(["-v", "-O2", "--gpu-name", arch, "-o", "/dev/null"])
        .arg(path)
        .output()
        .map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!(
            "{}: ptxas failed: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(wrapper::registers::parse_ptxas_verbose(&format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )))
}

/// The clones keep their originals' occupancy: by ptxas's own account of the kept instrumented
/// PTX, each clone's registers stay within its limit, or the clone is left without a limit
/// and holding it there (tried here) spills. Returns how many clones were held and left.
fn registers_fit(stem: &str, keep: &Path, kernels: &[String]) -> Result<(usize, usize), String> {
    use wrapper::registers::register_limit;
    let (mut held, mut left) = (0, 0);
    for arch in ["sm_70", "sm_90"] {
        let path = keep.join(format!("0-{stem}.{arch}.instrumented.ptx"));
        let ptx = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        let trial = keep.join(format!("trial.{arch}.ptx"));
        let used = ptxas_verbose(&ptx, arch, &trial)?;
        let module = ptx_lexer::parse(ptx.clone()).map_err(|e| e.to_string())?;
        for kernel in kernels {
            let clone = format!("{kernel}__cf");
            let (Some(original), Some(counting)) = (used.get(kernel), used.get(&clone)) else {
                return Err(format!(
                    "{stem} {arch}: ptxas -v does not list {kernel} and its clone"
                ));
            };
            let limit = register_limit(original, arch);
            let limited = module
                .function(&clone)
                .is_some_and(|f| f.attributes().iter().any(|a| a.name == "maxnreg"));
            if counting.registers <= limit {
                if limited {
                    held += 1;
                    fitted_again(stem, arch, &module, &clone, limit, &trial)?;
                }
                continue;
            }
            if limited {
                return Err(format!(
                    "{stem} {arch}: {clone} uses {} registers under its .maxnreg, over its \
                     limit {limit}",
                    counting.registers
                ));
            }
            // Left over its limit: holding it there must spill.
            let mut capped = module.clone();
            let function = capped.function_mut(&clone).ok_or("no clone")?;
            let mut attributes = function.attributes().to_vec();
            attributes.push(ptx_lexer::FunctionAttribute {
                name: "maxnreg".into(),
                text: format!(".maxnreg {limit}"),
            });
            function.set_attributes(attributes);
            let tried = ptxas_verbose(&capped.to_ptx(), arch, &trial)?;
            let Some(tried) = tried.get(&clone) else {
                return Err(format!("{stem} {arch}: ptxas -v does not list {clone}"));
            };
            let more = |of: fn(&wrapper::registers::EntryResources) -> u64| {
                of(tried) > of(original).max(of(counting))
            };
            if !more(|r| r.spill_store_bytes) && !more(|r| r.spill_load_bytes) {
                return Err(format!(
                    "{stem} {arch}: {clone} uses {} registers (limit {limit}), yet holding it \
                     to {limit} spills no more than it and its original do",
                    counting.registers
                ));
            }
            left += 1;
        }
    }
    Ok((held, left))
}

/// `cuda-flux-ptxas` on `module` with the `.maxnreg` of `clone` taken out holds it again: its
/// `-v` says so, and ptxas's report under it shows at most `limit` registers.
fn fitted_again(
    stem: &str,
    arch: &str,
    module: &ptx_lexer::Module,
    clone: &str,
    limit: u32,
    trial: &Path,
) -> Result<(), String> {
    let mut unfitted = module.clone();
    let function = unfitted.function_mut(clone).ok_or("no clone")?;
    let attributes = function
        .attributes()
        .iter()
        .filter(|a| a.name != "maxnreg")
        .cloned()
        .collect();
    function.set_attributes(attributes);
    std::fs::write(trial, unfitted.to_ptx()).map_err(|e| e.to_string())?;
    let output = Command::new(env!("CARGO_BIN_EXE_cuda-flux-ptxas"))
        .args(["-v", "-O2", "--gpu-name", arch, "-o", "/dev/null"])
        .arg(trial)
        .output()
        .map_err(|e| e.to_string())?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let registers = wrapper::registers::parse_ptxas_verbose(&text)
        .get(clone)
        .map(|r| r.registers);
    let said = format!("{clone}: held to {limit} registers");
    if !output.status.success() || !text.contains(&said) || registers.is_none_or(|r| r > limit) {
        return Err(format!(
            "{stem} {arch}: cuda-flux-ptxas did not hold {clone} to {limit} registers:\n{text}"
        ));
    }
    Ok(())
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
    // A command line without inputs (`-c` alone) is clang's to answer, as clang does (status 1):
    // `queries_are_answered_as_clang_answers_them`.
    for args in [vec!["--cuda-gpu-arch=gfx90a", "x.cu"], vec!["-o"]] {
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

#[test]
fn a_kernel_that_cannot_be_instrumented_still_builds_and_is_reported() {
    // The clone of `k` would be named `k__cf`, which the program already uses: `k` keeps its
    // original code, the build warns once, and the snapshot says why.
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("clash.cu");
    std::fs::write(
        &source,
        "extern \"C\" __global__ void k(int *p) { p[threadIdx.x] = 1; }\n\
         extern \"C\" __global__ void k__cf(int *p) { p[threadIdx.x] = 2; }\n\
         int main() { int *p = nullptr; k<<<1, 1>>>(p); k__cf<<<1, 1>>>(p); return 0; }\n",
    )
    .unwrap();
    let keep = dir.path().join("keep");
    let output = driver()
        .arg(format!("--cuda-flux-keep={}", keep.display()))
        .arg(&source)
        .arg("-o")
        .arg(dir.path().join("clash"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("'k'") && warnings[0].contains("not instrumented"),
        "{stderr}"
    );
    let host = std::fs::read_to_string(keep.join("0-clash.host.instrumented.ll")).unwrap();
    assert!(
        host.contains(r#"\22kernel\22:\22k\22"#) && host.contains(r#"\22instrumented\22:false"#)
    );
    assert!(
        host.contains("already exists"),
        "the reason travels with the snapshot"
    );
    assert!(dir.path().join("clash").exists());
}

#[test]
fn several_inputs_of_every_kind_build_in_one_call() {
    // A kernel defined in one .cu file and launched from another, plus a C++ file and an object.
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let kernels = write(
        "kernels.cu",
        "__global__ void fill(int *p, int v) { p[threadIdx.x] = v; }\n",
    );
    let main = write(
        "main.cu",
        "#include <cstdio>\n__global__ void fill(int *p, int v);\nint helper();\nint lib();\n\
         int main() { int *p; if (cudaMalloc(&p, 64) != cudaSuccess) { std::puts(\"no device\"); \
         return 3; } fill<<<1, 16>>>(p, helper() + lib()); return cudaDeviceSynchronize() == cudaSuccess ? 0 : 4; }\n",
    );
    let helper = write("helper.cpp", "int helper() { return 41; }\n");
    let lib_source = write("lib.cpp", "int lib() { return 1; }\n");
    let lib_object = dir.path().join("lib.o");
    let status = Command::new("clang++-16")
        .arg("-c")
        .arg(&lib_source)
        .arg("-o")
        .arg(&lib_object)
        .status()
        .unwrap();
    assert!(status.success());
    let program = dir.path().join("prog");
    let output = driver()
        .current_dir(dir.path())
        .args(["-O1", "--cuda-gpu-arch=sm_90"])
        .arg(&main)
        .arg(&kernels)
        .arg(&helper)
        .arg(&lib_object)
        .arg("-o")
        .arg(&program)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // -c with several inputs writes one object per input in the current directory.
    let output = driver()
        .current_dir(dir.path())
        .arg("-c")
        .arg(&main)
        .arg(&kernels)
        .arg(&helper)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for object in ["main.o", "kernels.o", "helper.o"] {
        assert!(dir.path().join(object).exists(), "{object}");
    }
    // Without a GPU the program fails as its own code says; with one it runs.
    let run = Command::new(&program)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        (run.status.code() == Some(3) && stdout.contains("no device")) || run.status.success(),
        "{stdout}"
    );
}

#[test]
fn debug_builds_without_optimisation_are_instrumented_too() {
    // -O0 -g: registrations stay in __cuda_register_globals, ptxas gets -g, the PTX has .loc
    // and debug sections.
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join("keep");
    let program = dir.path().join("calls");
    let output = driver()
        .args(["-O0", "-g", "--cuda-gpu-arch=sm_90"])
        .arg(format!("--cuda-flux-keep={}", keep.display()))
        .arg(support::repo_root().join("corpus/device_calls.cu"))
        .arg("-o")
        .arg(&program)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr
            .lines()
            .filter(|l| l.contains("warning"))
            .all(|l| l.contains("indirect calls")),
        "{stderr}"
    );
    let host = std::fs::read_to_string(keep.join("0-device_calls.host.instrumented.ll")).unwrap();
    let kernels = host
        .matches("call void @__cuda_flux_register_kernel(")
        .count();
    assert_eq!(kernels, 1, "one kernel, one architecture");
    assert!(!host.contains(r#"\22instrumented\22:false"#));
    let sass = Command::new("cuobjdump")
        .arg("-sass")
        .arg(&program)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&sass.stdout).contains("__cf\n"));
}

#[test]
fn device_resets_in_either_form_go_to_the_runtime() {
    // `cudaThreadExit` is `cudaDeviceReset`'s deprecated form; reset by either, the device
    // would lose the counts of launches not yet read back.
    const SOURCE: &str = r#"
#include <cstdio>
__global__ void touch(int *p) { p[threadIdx.x] = 1; }
int main(int argc, char **) {
  int *p;
  if (cudaMalloc(&p, 64 * sizeof(int)) != cudaSuccess) { std::puts("no device"); return 3; }
  touch<<<1, 64>>>(p);
  cudaError_t e = argc > 1 ? cudaDeviceReset() : cudaThreadExit();
  std::printf("result: %s\n", e == cudaSuccess ? "PASS" : "FAIL");
  return e == cudaSuccess ? 0 : 1;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("resets.cu");
    std::fs::write(&source, SOURCE).unwrap();
    let keep = dir.path().join("keep");
    let object = dir.path().join("resets.o");
    compile(&source, &keep, &object).unwrap();
    let original = disassemble(&keep.join("0-resets.host.bc"));
    let instrumented = std::fs::read_to_string(keep.join("0-resets.host.instrumented.ll")).unwrap();
    for cudart in ["cudaDeviceReset", "cudaThreadExit"] {
        assert_eq!(
            call_sites(&original, cudart),
            1,
            "the plain host code calls {cudart}"
        );
        assert_eq!(
            call_sites(&instrumented, cudart),
            0,
            "{cudart} is still called"
        );
    }
    assert_eq!(call_sites(&instrumented, "__cuda_flux_device_reset"), 2);
}

/// A grid-synchronising kernel launched with `cudaLaunchCooperativeKernel`, and a plain one
/// launched with `cudaLaunchKernel` and with `<<<>>>`.
const LAUNCH_CALLS: &str = r#"
#include <cooperative_groups.h>
#include <cstdio>
namespace cg = cooperative_groups;

// Every thread writes, the whole grid syncs, every thread reads its neighbour's value.
__global__ void rotate(int *data, int *out, int n) {
  cg::grid_group grid = cg::this_grid();
  int i = grid.thread_rank();
  if (i < n) data[i] = i;
  grid.sync();
  if (i < n) out[i] = data[(i + 1) % n];
}

__global__ void fill(int *p, int v) { p[blockIdx.x * blockDim.x + threadIdx.x] = v; }

int main() {
  int n = 256, *data, *out;
  if (cudaMalloc(&data, n * sizeof(int)) != cudaSuccess) { std::puts("no device"); return 3; }
  cudaMalloc(&out, n * sizeof(int));
  void *args[] = {&data, &out, &n};
  cudaError_t e = cudaLaunchCooperativeKernel((void *)rotate, dim3(2), dim3(128), args, 0, 0);
  int v = 7;
  void *fill_args[] = {&out, &v};
  cudaError_t f = cudaLaunchKernel((void *)fill, dim3(1), dim3(64), fill_args, 0, 0);
  fill<<<1, 32>>>(out + 64, 9);
  int host[256];
  cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost);
  bool ok = e == cudaSuccess && f == cudaSuccess;
  for (int i = 0; i < n; ++i) ok = ok && host[i] == (i < 64 ? 7 : i < 96 ? 9 : (i + 1) % n);
  std::printf("result: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
"#;

#[test]
fn cooperative_and_per_thread_stream_launches_go_to_the_runtime() {
    // Each CUDA launch call and the runtime entry point that replaces it.
    const ROUTES: [(&str, &str); 4] = [
        ("cudaLaunchKernel", "__cuda_flux_launch_kernel"),
        ("cudaLaunchKernel_ptsz", "__cuda_flux_launch_kernel_ptsz"),
        (
            "cudaLaunchCooperativeKernel",
            "__cuda_flux_launch_cooperative_kernel",
        ),
        (
            "cudaLaunchCooperativeKernel_ptsz",
            "__cuda_flux_launch_cooperative_kernel_ptsz",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("launch_calls.cu");
    std::fs::write(&source, LAUNCH_CALLS).unwrap();
    // Per-thread default stream: clang's flag, plus the macro that makes the CUDA headers call
    // the `_ptsz` functions (what nvcc's `--default-stream per-thread` defines; clang-16 does
    // not define it, and its `<<<>>>` stubs call `cudaLaunchKernel` either way, newer clangs
    // `cudaLaunchKernel_ptsz`: the check below holds for both).
    let builds: [(&str, &[&str], [&str; 2]); 2] = [
        (
            "legacy",
            &[],
            ["cudaLaunchKernel", "cudaLaunchCooperativeKernel"],
        ),
        (
            "per-thread",
            &[
                "-fgpu-default-stream=per-thread",
                "-DCUDA_API_PER_THREAD_DEFAULT_STREAM=1",
            ],
            ["cudaLaunchKernel_ptsz", "cudaLaunchCooperativeKernel_ptsz"],
        ),
    ];
    for (name, flags, expected) in builds {
        let keep = dir.path().join(name);
        let program = dir.path().join(format!("launch_calls-{name}"));
        let output = driver()
            .args(["-O2", "--cuda-gpu-arch=sm_90"])
            .args(flags)
            .arg(format!("--cuda-flux-keep={}", keep.display()))
            .arg(&source)
            .arg("-o")
            .arg(&program)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{name}: {stderr}");
        assert!(!stderr.contains("warning"), "{name}: {stderr}");
        let original = disassemble(&keep.join("0-launch_calls.host.bc"));
        let instrumented =
            std::fs::read_to_string(keep.join("0-launch_calls.host.instrumented.ll")).unwrap();
        for cudart in expected {
            assert!(
                call_sites(&original, cudart) > 0,
                "{name}: the plain host code calls {cudart}"
            );
        }
        for (cudart, runtime) in ROUTES {
            let launches = call_sites(&original, cudart);
            assert_eq!(
                call_sites(&instrumented, cudart),
                0,
                "{name}: {cudart} is still called"
            );
            assert_eq!(
                call_sites(&instrumented, runtime),
                launches,
                "{name}: every {cudart} goes to {runtime}"
            );
        }
        // Both kernels, the grid-synchronising one too, have a registered counting clone.
        assert_eq!(
            count(&instrumented, "call void @__cuda_flux_register_kernel("),
            2
        );
        assert!(!instrumented.contains(r#"\22instrumented\22:false"#));
        // The program linked; without a GPU it stops as its own code says, with one it passes.
        let run = Command::new(&program)
            .current_dir(dir.path())
            .env("CUDA_FLUX_OUTPUT", dir.path().join(format!("{name}.json")))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            (run.status.code() == Some(3) && stdout.contains("no device"))
                || (run.status.success() && stdout.contains("result: PASS")),
            "{name}: {stdout}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        if run.status.success() {
            // With a GPU: the cooperative clone ran (grid sync and all), as did the others.
            let profile = std::fs::read_to_string(dir.path().join(format!("{name}.json")))
                .expect("a profile");
            let profile: serde_json::Value = serde_json::from_str(&profile).unwrap();
            let launches = |kernel: &str| -> Vec<serde_json::Value> {
                profile["kernels"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|k| k["demangled"].as_str().unwrap_or("").starts_with(kernel))
                    .flat_map(|k| k["launches"].as_array().unwrap().clone())
                    .collect()
            };
            let (rotate, fill) = (launches("rotate("), launches("fill("));
            assert_eq!((rotate.len(), fill.len()), (1, 2), "{name}: {profile}");
            for launch in rotate.iter().chain(&fill) {
                assert_eq!(launch["instrumented"], true, "{name}: {launch}");
            }
        }
    }
}

#[test]
fn an_object_that_cannot_be_written_is_one_error_without_a_fallback_warning() {
    // Issue 14, item 13: `-c -o` naming an unwritable path first warned "host pass failed ...
    // its kernels run uninstrumented", then failed in the plain compile.
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("k.cu");
    std::fs::write(
        &source,
        "__global__ void k(int* p) { p[threadIdx.x] = 1; }\n",
    )
    .unwrap();
    let taken = dir.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    for object in [dir.path().join("no/such/dir/k.o"), taken] {
        let output = driver()
            .args(["-O2", "-c"])
            .arg(&source)
            .arg("-o")
            .arg(&object)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            !stderr.contains("host pass failed") && !stderr.contains("uninstrumented"),
            "{stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!(
                "cuda-flux-clang: error: cannot write {}: ",
                object.display()
            )),
            "{stderr}"
        );
    }
}

#[test]
fn modes_that_build_nothing_behave_as_clang_does() {
    // Issue 14, item 6: -S and --cuda-device-only -S wrote nothing, -E and -M printed nothing
    // (CPU target) or failed (GPU target), -fsyntax-only failed, cuda-flux-nvcc -M printed
    // nothing.
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("k.cu");
    std::fs::write(
        &source,
        "__global__ void twice(int* p) { p[threadIdx.x] *= 2; }\nint main() { twice<<<1, 1>>>(nullptr); }\n",
    )
    .unwrap();
    let broken = dir.path().join("broken.cu");
    std::fs::write(&broken, "__global__ void k() { undeclared(); }\n").unwrap();
    let names = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    for target in ["--cuda-flux-target=gpu", "--cuda-flux-target=cpu"] {
        let run = |args: &[&str]| {
            let output = driver()
                .current_dir(dir.path())
                .arg(target)
                .args(args)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr,
            )
        };
        let (code, stdout, stderr) = run(&["-E", "k.cu"]);
        assert_eq!(code, Some(0), "{target} -E: {stderr}");
        assert!(stdout.contains("void twice(int* p)"), "{target} -E");
        let (code, stdout, stderr) = run(&["-M", "k.cu"]);
        assert_eq!(code, Some(0), "{target} -M: {stderr}");
        assert!(stdout.starts_with("k.o: k.cu"), "{target} -M: {stdout}");
        let (code, _, stderr) = run(&["-fsyntax-only", "k.cu"]);
        assert_eq!(code, Some(0), "{target} -fsyntax-only: {stderr}");
        assert_eq!(names(dir.path()), ["broken.cu", "k.cu"], "{target}");
        let (code, _, stderr) = run(&["-fsyntax-only", "broken.cu"]);
        assert_eq!(code, Some(1), "{target}: {stderr}");
        assert!(stderr.contains("undeclared"), "{target}: {stderr}");
        let (code, _, stderr) = run(&["--cuda-device-only", "-S", "-O2", "-o", "k.ptx", "k.cu"]);
        assert_eq!(code, Some(0), "{target} --cuda-device-only -S: {stderr}");
        let ptx = std::fs::read_to_string(dir.path().join("k.ptx")).unwrap();
        assert!(ptx.contains(".entry _Z5twicePi"), "{ptx}");
        let (code, _, stderr) = run(&["-S", "k.cu"]);
        assert_eq!(code, Some(0), "{target} -S: {stderr}");
        assert_eq!(
            names(dir.path()),
            [
                "broken.cu",
                "k-cuda-nvptx64-nvidia-cuda-sm_70.s",
                "k.cu",
                "k.ptx",
                "k.s"
            ],
            "{target} -S"
        );
        for made in ["k-cuda-nvptx64-nvidia-cuda-sm_70.s", "k.ptx", "k.s"] {
            std::fs::remove_file(dir.path().join(made)).unwrap();
        }
    }
    // cuda-flux-nvcc -M (documented): the dependencies on stdout.
    let output = Command::new(env!("CARGO_BIN_EXE_cuda-flux-nvcc"))
        .current_dir(dir.path())
        .args(["-M", "k.cu"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.starts_with("k.o: k.cu"), "{stdout}");
    assert_eq!(names(dir.path()), ["broken.cu", "k.cu"]);
}

/// `program ARGS` run in `dir`: its stdout and stderr, paths in the temporary directory
/// (`/tmp/k-f125d7/k-sm_70.s`: clang's intermediates, random per run) replaced by `TMP`, and its
/// exit status.
fn answer(program: &str, args: &[&str], dir: &Path) -> (String, String, Option<i32>) {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    let temp = format!("{}/", std::env::temp_dir().display());
    let mask = |bytes: &[u8]| -> String {
        let mut text = String::from_utf8_lossy(bytes).into_owned();
        let mut from = 0;
        while let Some(at) = text[from..].find(&temp).map(|at| at + from) {
            let end = text[at..]
                .find(|c: char| c == '"' || c == ',' || c.is_whitespace())
                .map_or(text.len(), |end| end + at);
            text.replace_range(at..end, "TMP");
            from = at + 3;
        }
        text
    };
    (
        mask(&output.stdout),
        mask(&output.stderr),
        output.status.code(),
    )
}

/// Build systems' queries (`--version`, `-dumpversion`, `-print-*`, `-###`, a bare `-v`) get
/// clang++-16's own answer, word for word, and its exit status; so does a command line with
/// no input at all. The oracle is clang++-16 run with the same arguments.
#[test]
fn queries_are_answered_as_clang_answers_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("k.cu"),
        "__global__ void k(int *p) { *p = 1; }\n",
    )
    .unwrap();
    let queries: &[&[&str]] = &[
        &["--version"],
        &["-dumpversion"],
        &["-dumpmachine"],
        &["-print-resource-dir"],
        &["-print-search-dirs"],
        &["-print-libgcc-file-name"],
        &["-print-file-name=libstdc++.so"],
        &["-print-prog-name=ld"],
        &["-print-target-triple"],
        &["-print-effective-triple"],
        &["-###"],
        &["-v"],
        &["-c"],
        &["-O2", "--version", "k.cu"],
        &["-###", "-c", "k.cu", "-o", "k.o", "--cuda-gpu-arch=sm_70"],
        &["-###", "k.cu", "-o", "k", "--cuda-gpu-arch=sm_90"],
    ];
    let driver = env!("CARGO_BIN_EXE_cuda-flux-clang");
    for args in queries {
        let ours = answer(driver, args, dir.path());
        let clang = answer("clang++-16", args, dir.path());
        assert_eq!(ours, clang, "{args:?}");
        assert!(
            !ours.0.is_empty() || !ours.1.is_empty(),
            "{args:?}: says something"
        );
    }
    // CMake's compiler identification reads the first line; the driver adds nothing before it.
    let (version, _, status) = answer(driver, &["--version"], dir.path());
    assert_eq!(status, Some(0));
    assert!(
        version
            .lines()
            .next()
            .unwrap()
            .contains("clang version 16."),
        "{version}"
    );
    // A query builds nothing; cuda-flux's own options do not reach clang.
    let (_, stderr, status) = answer(
        driver,
        &["--cuda-flux-target=cpu", "-###", "-c", "k.cu"],
        dir.path(),
    );
    assert_eq!(status, Some(0), "{stderr}");
    assert!(!dir.path().join("k.o").exists());
}

/// `-x c` compiles C (an `extern "C"` definition links; `.c` alone is C++ to clang++, and to
/// cuda-flux-clang).
#[test]
fn language_c_compiles_c() {
    let dir = tempfile::tempdir().unwrap();
    // `new` is an identifier in C only.
    std::fs::write(
        dir.path().join("h.c"),
        "int twice(int new) { return 2 * new; }\n",
    )
    .unwrap();
    let compile = |args: &[&str]| {
        driver()
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let output = compile(&["-x", "c", "-c", "h.c", "-o", "h.o"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let symbols = Command::new("nm")
        .arg(dir.path().join("h.o"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&symbols.stdout).contains(" T twice\n"));
    // As clang++-16: `.c` without `-x` is C++, where `new` is a keyword.
    assert!(!compile(&["-c", "h.c", "-o", "h2.o"]).status.success());
    assert!(!Command::new("clang++-16")
        .args(["-c", "h.c", "-o", "h3.o"])
        .current_dir(dir.path())
        .output()
        .unwrap()
        .status
        .success());
}
