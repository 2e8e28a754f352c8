//! The CPU target end to end, the oracle being the programs themselves: every corpus program,
//! built with `--cuda-flux-target=cpu`, runs its instrumented kernels in the PTX interpreter,
//! passes its own check against its host-side reference, and the profile it writes agrees
//! exactly with the program's witness counters (see corpus/README.md):
//!   `atom.global.add.u32`: threads == witness threads, warps == witness warps
//!   `atom.global.add.u64`: threads == warps == witness warps
//!   (with `witness_predicated()`: threads == witness threads, warps == witness warps)
//! Every block's counts agree between the derived counter placement and counting every block
//! at its top (`CUDA_FLUX_COUNTERS=every-block`), the reference it is derived against; and the
//! interpreter's own statistics (`CUDA_FLUX_CPU_STATS`) of the original kernels equal the
//! instructions their profile counts. Real profiles also go through the `cuda-flux` command's
//! library (crate `analysis`): annotate, metrics and features as the command computes them.

use test_support as support;
mod witnesses;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use witnesses::{block_counts, check_witness, text, witness, witness_opcodes_match};

fn driver() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cuda-flux-clang"))
}

/// The architectures the CPU-target tests build for, as on the GPU; the CPU target runs the
/// highest one's PTX.
const ARCHES: [&str; 2] = ["sm_70", "sm_90"];

/// Builds `sources` into `program` for the CPU target ([`ARCHES`]).
fn build_cpu(sources: &[PathBuf], program: &Path, extra: &[&str]) -> Result<(), String> {
    build_cpu_placed(sources, program, extra, "derived", &ARCHES)
}

/// [`build_cpu`] with the counter placement `placement` (`CUDA_FLUX_COUNTERS`), for `arches`.
fn build_cpu_placed(
    sources: &[PathBuf],
    program: &Path,
    extra: &[&str],
    placement: &str,
    arches: &[&str],
) -> Result<(), String> {
    build_cpu_counting(sources, program, extra, placement, true, arches)
}

/// Programs whose retry or spin loops run as often as warps happen to interleave: their counts
/// equal another build's only where both run the same code around those loops. CTA counters
/// add a barrier at the kernel's entry and an atomic at its exits, so these are compared with
/// every-block built without them (and checked against their witnesses with them).
const CONTENDED: [&str; 3] = ["atomic_cas", "persistent_ctas", "gpu_scheduling"];

/// [`build_cpu_placed`] with CTA counters on or off (`CUDA_FLUX_CTA_COUNTERS`).
fn build_cpu_counting(
    sources: &[PathBuf],
    program: &Path,
    extra: &[&str],
    placement: &str,
    cta_counters: bool,
    arches: &[&str],
) -> Result<(), String> {
    let output = driver()
        .env("CUDA_FLUX_COUNTERS", placement)
        .env(
            "CUDA_FLUX_CTA_COUNTERS",
            if cta_counters { "on" } else { "off" },
        )
        .args(["-O2", "--cuda-flux-target=cpu"])
        .args(arches.iter().map(|arch| format!("--cuda-gpu-arch={arch}")))
        .args(extra)
        .args(sources)
        .arg("-o")
        .arg(program)
        .output()
        .map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!(
            "{}: CPU-target build failed:\n{}",
            program.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let warnings = String::from_utf8_lossy(&output.stderr);
    if warnings.contains("not instrumented") || warnings.contains("uninstrumented") {
        return Err(format!("{}: fell back:\n{warnings}", program.display()));
    }
    Ok(())
}

/// Runs `program` in a fresh directory with the profile going to `profile.json` there.
fn run(program: &Path, env: &[(&str, &str)]) -> Result<(Output, Option<Value>), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let profile = dir.path().join("profile.json");
    let mut command = Command::new(program);
    command
        .current_dir(dir.path())
        .env("CUDA_FLUX_OUTPUT", &profile)
        .env_remove("CUDA_FLUX_MODE")
        .env_remove("CUDA_FLUX_KERNELS");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().map_err(|e| e.to_string())?;
    let json = match std::fs::read_to_string(&profile) {
        Ok(text) => Some(
            serde_json::from_str(&text)
                .map_err(|e| format!("{}: profile is not complete JSON: {e}", program.display()))?,
        ),
        Err(_) => None,
    };
    Ok((output, json))
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The bundled example built for the CPU target with `flags`, run (checked against its
/// witness), and its profile written to `scratch(name)/profile.json`.
fn saxpy_profile(name: &str, flags: &[&str]) -> PathBuf {
    let dir = scratch(name);
    let program = dir.join("saxpy");
    build_cpu(
        &[support::repo_root().join("corpus/saxpy.cu")],
        &program,
        flags,
    )
    .unwrap();
    let (output, profile) = run(&program, &[]).unwrap();
    check_witness(&format!("saxpy {flags:?}"), &output, profile.as_ref()).unwrap();
    let path = dir.join("profile.json");
    std::fs::write(&path, profile.unwrap().to_string()).unwrap();
    path
}

/// Every corpus program: its name and sources (`multi_tu` has two).
fn corpus_programs() -> Vec<(String, Vec<PathBuf>)> {
    let mut programs: Vec<(String, Vec<PathBuf>)> = support::corpus_sources()
        .into_iter()
        .map(|source| {
            let stem = source.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, vec![source])
        })
        .collect();
    let multi_tu = support::repo_root().join("corpus/multi_tu");
    programs.push((
        "multi_tu".into(),
        vec![multi_tu.join("kernels.cu"), multi_tu.join("main.cu")],
    ));
    assert!(programs.len() >= 17, "the corpus shrank: {programs:?}");
    programs
}

#[test]
fn every_corpus_program_passes_and_matches_its_witness_on_the_cpu_target() {
    let dir = scratch("cpu-target-corpus");
    let programs = corpus_programs();
    let errors = support::parallel(&programs, |(name, sources)| {
        let program = dir.join(name);
        build_cpu(sources, &program, &[])?;
        let (output, profile) = run(&program, &[])?;
        check_witness(name, &output, profile.as_ref())?;
        // The same program counting every block at its top: the same counts, block by block.
        // One host thread for both runs, so that contended retry loops (atomic_cas) take the
        // same paths.
        let reference = dir.join(format!("{name}-every-block"));
        build_cpu_placed(sources, &reference, &[], "every-block", &ARCHES)?;
        let one_thread = [("CUDA_FLUX_CPU_THREADS", "1")];
        let (output, reference_profile) = run(&reference, &one_thread)?;
        check_witness(
            &format!("{name} (every-block)"),
            &output,
            reference_profile.as_ref(),
        )?;
        // The derived placement's run by the interpreter (the reference) and by the native
        // engine: the same output, profile and instruction counts.
        let (interpreted, profile) = engine_observation(name, &program, INTERPRETER, &[])?;
        let (native, _) = engine_observation(name, &program, NATIVE, &[])?;
        if native != interpreted {
            return Err(format!(
                "{name}: the engines differ\n--- interpreter\n{interpreted}\n--- native\n{native}"
            ));
        }
        let profile = if CONTENDED.contains(&name.as_str()) {
            let global = dir.join(format!("{name}-global"));
            build_cpu_counting(sources, &global, &[], "derived", false, &ARCHES)?;
            let (output, profile) = run(&global, &one_thread)?;
            check_witness(
                &format!("{name} (global counters)"),
                &output,
                profile.as_ref(),
            )?;
            profile
        } else {
            profile
        };
        match (profile, reference_profile) {
            (Some(derived), Some(every)) if block_counts(&derived) == block_counts(&every) => {
                Ok(())
            }
            _ => Err(format!(
                "{name}: block counts differ between the derived and the every-block placement"
            )),
        }
    });
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

#[test]
fn debug_builds_count_the_same_with_the_derived_and_the_every_block_placement() {
    // `-g` PTX splits blocks at every `.loc` label: chains, blocks of a label alone; and its
    // bodies end with labels after the last `ret`, before which the blocks of counter code go
    // (loop exits taken by a branch, the full flush that long_loops' lanes take).
    same_block_counts_in_placements(
        "cpu-target-debug-placements",
        &[
            "loops",
            "long_loops",
            "persistent_ctas",
            "uniform_loops",
            "switch_dense",
            "device_calls",
            "saxpy",
            "nested_loops",
            "induction_loops",
        ],
        &["-g"],
        "derived",
        &ARCHES,
    );
}

#[test]
fn sm_70_and_sm_61_builds_count_the_same_with_the_derived_and_the_every_block_placement() {
    // Before sm_80 (no `redux.sync`), the flush of a loop that lanes leave at different times
    // sums and maximizes the lanes' counts with shuffles, after testing whether every lane holds
    // the same counts (`match.all` from sm_70, a comparison with the leader's before): a
    // butterfly where the whole warp meets, a tree over the active lanes elsewhere (loops'
    // inner loops behind `continue`, nested_loops' per-lane `while` behind a divergent `if`),
    // and in 64 bits for long_loops' counts of 2^20 and more.
    for arch in ["sm_70", "sm_61"] {
        same_block_counts_in_placements(
            &format!("cpu-target-{arch}-placements"),
            &[
                "loops",
                "long_loops",
                "exit_after_work",
                "nested_loops",
                "induction_loops",
                "persistent_ctas",
                "gpu_scheduling",
                "saxpy",
            ],
            &[],
            "derived",
            &[arch],
        );
    }
}

#[test]
fn the_uniform_loops_placement_counts_the_same_as_every_block() {
    // Regions without divergent parts, nested regions, blocks a region flushes once for
    // several (copies), and induction counters, without the reconvergence assumption.
    same_block_counts_in_placements(
        "cpu-target-uniform-placement",
        &["uniform_loops", "nested_loops", "loops", "induction_loops"],
        &[],
        "uniform-loops",
        &ARCHES,
    );
}

/// Builds each corpus program with `flags` for `arches` under `placement` and under
/// `every-block`, runs both on one host thread, checks their witnesses and that every block
/// has the same counts.
fn same_block_counts_in_placements(
    scratch_name: &str,
    programs: &[&str],
    flags: &[&str],
    placement: &str,
    arches: &[&str],
) {
    let dir = scratch(scratch_name);
    let errors = support::parallel(programs, |name| {
        let sources = [support::repo_root().join(format!("corpus/{name}.cu"))];
        let one_thread = [("CUDA_FLUX_CPU_THREADS", "1")];
        let mut profiles = Vec::new();
        let contended = CONTENDED.contains(name);
        let builds = [(placement, true), (placement, false), ("every-block", true)];
        for (placement, cta_counters) in builds {
            if !cta_counters && !contended {
                continue;
            }
            let program = dir.join(format!("{name}-{placement}-{cta_counters}"));
            build_cpu_counting(&sources, &program, flags, placement, cta_counters, arches)?;
            let (output, profile) = run(&program, &one_thread)?;
            check_witness(
                &format!("{name} {flags:?} ({placement}, CTA counters {cta_counters})"),
                &output,
                profile.as_ref(),
            )?;
            profiles.push(profile.ok_or_else(|| format!("{name}: no profile"))?);
        }
        // The last two: the placement's build (without CTA counters where contended) and
        // every-block's.
        let [.., counted, every] = &profiles[..] else {
            return Err(format!("{name}: too few profiles"));
        };
        if block_counts(counted) != block_counts(every) {
            return Err(format!(
                "{name} {flags:?}: block counts differ between {placement} and every-block"
            ));
        }
        Ok(())
    });
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

/// `witness-cta:` / `witness-warp:` (`-DCORPUS_WITNESS_MODES`): the witness counts of the
/// threads `CUDA_FLUX_MODE=cta` / `warp` counts, as the program printed them.
fn mode_witness(text: &str, mode: &str) -> Option<(u64, u64)> {
    let prefix = format!("witness-{mode}:");
    let line = text.lines().find(|l| l.starts_with(&prefix))?;
    witness(&line.replacen(&prefix, "witness:", 1))
}

/// The witness check for a run under `CUDA_FLUX_MODE=mode` of a program built with
/// `-DCORPUS_WITNESS_MODES`: PASS, every launch recorded with the mode and counted, and the
/// witness opcodes' counts equal to the witness of the threads the mode counts.
fn check_mode_witness(
    name: &str,
    mode: &str,
    output: &Output,
    profile: Option<&Value>,
) -> Result<(), String> {
    let name = format!("{name} (CUDA_FLUX_MODE={mode})");
    let text = text(output);
    if output.status.code() != Some(0) || !text.contains("result: PASS") {
        return Err(format!(
            "{name}: did not pass on the CPU target ({:?}):\n{text}",
            output.status.code()
        ));
    }
    let (threads, warps) = match mode {
        "all" => witness(&text),
        _ => mode_witness(&text, mode),
    }
    .ok_or_else(|| format!("{name}: no witness line for the mode:\n{text}"))?;
    let profile = profile.ok_or_else(|| format!("{name}: no profile written"))?;
    let mut launches = 0;
    for kernel in profile["kernels"].as_array().into_iter().flatten() {
        for launch in kernel["launches"].as_array().into_iter().flatten() {
            launches += 1;
            if launch["mode"] != mode {
                return Err(format!(
                    "{name}: a launch of {} records mode {}",
                    kernel["name"], launch["mode"]
                ));
            }
            if launch["instrumented"] != Value::Bool(true) {
                return Err(format!(
                    "{name}: a launch of {} was not counted: {}",
                    kernel["name"], launch["reason"]
                ));
            }
        }
    }
    if launches == 0 {
        return Err(format!("{name}: no launch recorded"));
    }
    witness_opcodes_match(&name, &text, profile, (threads, warps))
}

#[test]
fn every_counting_mode_matches_its_witness_on_the_cpu_target() {
    // Built with -DCORPUS_WITNESS_MODES, every corpus program also counts its witness for the
    // threads of linear CTA 0 of each launch and for the first warp of that CTA: the truth for
    // CUDA_FLUX_MODE=cta and warp, thread- and warp-level.
    let dir = scratch("cpu-target-modes");
    let programs = corpus_programs();
    // Per program: the witness thread counts of all, cta and warp.
    let seen = std::sync::Mutex::new(Vec::new());
    let errors = support::parallel(&programs, |(name, sources)| {
        let program = dir.join(name);
        build_cpu(sources, &program, &["-DCORPUS_WITNESS_MODES"])?;
        let mut threads = Vec::new();
        for mode in ["all", "cta", "warp"] {
            let (output, profile) = run(&program, &[("CUDA_FLUX_MODE", mode)])?;
            check_mode_witness(name, mode, &output, profile.as_ref())?;
            let text = text(&output);
            let truth = if mode == "all" {
                witness(&text)
            } else {
                mode_witness(&text, mode)
            };
            threads.push(truth.map_or(0, |(t, _)| t));
        }
        if !(threads[0] >= threads[1] && threads[1] >= threads[2]) {
            return Err(format!("{name}: mode witnesses not nested: {threads:?}"));
        }
        seen.lock().unwrap().push(threads);
        Ok(())
    });
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
    // The restricted witnesses are real restrictions for the multi-CTA, multi-warp programs.
    let seen = seen.into_inner().unwrap();
    assert!(
        seen.iter().any(|t| t[0] > t[1] && t[1] > t[2] && t[2] > 0),
        "{seen:?}"
    );
}

#[test]
fn the_profile_is_written_through_links_and_into_devices_and_pipes() {
    use std::os::unix::fs::{symlink, FileTypeExt};
    let dir = scratch("cpu-target-output-kinds");
    let program = dir.join("loops");
    build_cpu(
        &[support::repo_root().join("corpus/loops.cu")],
        &program,
        &[],
    )
    .unwrap();
    let is_profile = |bytes: &[u8]| -> bool {
        serde_json::from_slice::<Value>(bytes).is_ok_and(|v| v["schema"] == "cuda-flux/1")
    };

    // CUDA_FLUX_OUTPUT a link: the link stays, its target gets the profile.
    let target = dir.join("target.json");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.join("link.json");
    symlink("target.json", &link).unwrap();
    let (output, _) = run(&program, &[("CUDA_FLUX_OUTPUT", link.to_str().unwrap())]).unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(meta.file_type().is_symlink(), "the link was replaced");
    assert!(is_profile(&std::fs::read(&target).unwrap()));

    // /dev/stdout (a pipe here): the profile arrives on standard output.
    let (output, _) = run(&program, &[("CUDA_FLUX_OUTPUT", "/dev/stdout")]).unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no profile on stdout: {}", text(&output)));
    assert!(is_profile(json.as_bytes()), "{json}");
    assert!(stdout.contains("result: PASS"));

    // /dev/null: written, still the device.
    let (output, _) = run(&program, &[("CUDA_FLUX_OUTPUT", "/dev/null")]).unwrap();
    assert!(output.status.success(), "{}", text(&output));
    assert!(output.stderr.is_empty(), "{}", text(&output));
    let meta = std::fs::symlink_metadata("/dev/null").unwrap();
    assert!(meta.file_type().is_char_device(), "/dev/null was replaced");

    // A named pipe: written into, not replaced.
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let (output, _) = run(&program, &[("CUDA_FLUX_OUTPUT", fifo.to_str().unwrap())]).unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let meta = std::fs::symlink_metadata(&fifo).unwrap();
    assert!(meta.file_type().is_fifo(), "the pipe was replaced");
    assert!(is_profile(&reader.join().unwrap()));
}

#[test]
fn kernels_opted_in_to_more_than_48_kib_of_shared_memory_are_counted() {
    // Issue 14, item 7: cudaFuncSetAttribute (and the cache and shared-memory configs) made on
    // the original are repeated on the counting clone, so that the clone launches with 64 KiB
    // of dynamic shared memory instead of failing (and the original running uncounted).
    let dir = scratch("cpu-target-big-shared");
    let source = dir.join("big_shared.cu");
    std::fs::write(
        &source,
        r#"#include <cstdio>
constexpr int WORDS = 16384; // 64 KiB of floats
__global__ void reverse_sum(const float* in, float* out) {
    extern __shared__ float buf[];
    for (int i = threadIdx.x; i < WORDS; i += blockDim.x) buf[i] = in[blockIdx.x * WORDS + i];
    __syncthreads();
    for (int i = threadIdx.x; i < WORDS; i += blockDim.x)
        out[blockIdx.x * WORDS + i] = buf[i] + buf[WORDS - 1 - i];
}
__global__ void scale(float* data, float factor) {
    extern __shared__ float tile[];
    tile[threadIdx.x] = data[threadIdx.x] * factor;
    __syncthreads();
    data[threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}
#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    std::printf("%s: %s\n", #x, cudaGetErrorName(e)); return 2; } } while (0)
int main() {
    const int blocks = 3, n = blocks * WORDS;
    const size_t bytes = WORDS * sizeof(float);
    float *in, *out, *host = new float[n], *result = new float[n];
    for (int i = 0; i < n; ++i) host[i] = float(i % 1000);
    CHECK(cudaMalloc(&in, n * sizeof(float)));
    CHECK(cudaMalloc(&out, n * sizeof(float)));
    CHECK(cudaMemcpy(in, host, n * sizeof(float), cudaMemcpyHostToDevice));
    // The C form, and the C++ template form with the cache and shared-memory configs.
    CHECK(cudaFuncSetAttribute((const void*)reverse_sum,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    CHECK(cudaFuncSetCacheConfig(reverse_sum, cudaFuncCachePreferShared));
    CHECK(cudaFuncSetAttribute(scale, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    CHECK(cudaFuncSetSharedMemConfig(scale, cudaSharedMemBankSizeFourByte));
    reverse_sum<<<blocks, 256, bytes>>>(in, out);
    CHECK(cudaGetLastError());
    scale<<<1, 128, bytes>>>(out, 2.0f);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(result, out, n * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int b = 0; b < blocks; ++b)
        for (int i = 0; i < WORDS; ++i) {
            int k = b * WORDS + i;
            float expect = host[k] + host[b * WORDS + WORDS - 1 - i];
            if (k < 128) {
                int j = 127 - k;
                expect = 2.0f * (host[j] + host[WORDS - 1 - j]);
            }
            if (result[k] != expect) ++bad;
        }
    std::printf(bad ? "result: FAIL %ld\n" : "result: PASS\n", bad);
    return bad != 0;
}
"#,
    )
    .unwrap();
    let program = dir.join("big_shared");
    build_cpu(&[source], &program, &[]).unwrap();
    let (output, profile) = run(&program, &[]).unwrap();
    assert!(
        output.status.success() && text(&output).contains("result: PASS"),
        "{}",
        text(&output)
    );
    let profile = profile.expect("a profile");
    let kernels = profile["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 2, "{profile}");
    for kernel in kernels {
        let launches = kernel["launches"].as_array().unwrap();
        assert_eq!(launches.len(), 1, "{}", kernel["name"]);
        let launch = &launches[0];
        assert_eq!(launch["dynamic_shared_bytes"], 65536);
        assert_eq!(
            launch["instrumented"], true,
            "{}: {}",
            kernel["name"], launch["reason"]
        );
        assert!(launch["block_counts"]["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_u64() > Some(0)));
    }
}

#[test]
fn the_cpp_occupancy_overloads_link_and_run_on_the_cpu_target() {
    // Issue 14, item 14: cuda_runtime.h's template overloads call
    // cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, which the CPU runtime lacked.
    let dir = scratch("cpu-target-occupancy");
    let source = dir.join("occupancy.cu");
    std::fs::write(
        &source,
        r#"#include <cstdio>
__global__ void k(float* p) { p[threadIdx.x] = 1.0f; }
int main() {
    int by_template = -1, with_flags = -1, by_pointer = -1;
    cudaError_t a = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&by_template, k, 256, 0);
    cudaError_t b = cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        &with_flags, k, 256, 0, cudaOccupancyDisableCachingOverride);
    cudaError_t c = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &by_pointer, (const void*)k, 256, 0);
    cudaError_t d = cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        &with_flags, k, 256, 0, 7u);
    std::printf("%d %d %d %d %d %d %d\n", a, b, c, d == cudaErrorInvalidValue, by_template,
                with_flags, by_pointer);
    return 0;
}
"#,
    )
    .unwrap();
    let program = dir.join("occupancy");
    build_cpu(&[source], &program, &[]).unwrap();
    let (output, _) = run(&program, &[]).unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let fields: Vec<i64> = String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    assert_eq!(&fields[..4], [0, 0, 0, 1], "{fields:?}");
    assert!(
        fields[4] > 0 && fields[4] == fields[5] && fields[5] == fields[6],
        "{fields:?}"
    );
}

#[test]
fn cuda_flux_nvcc_builds_for_the_cpu_target_from_the_environment() {
    // CUDA_FLUX_TARGET=cpu at build time selects the CPU target without touching a Makefile's
    // nvcc flags.
    let dir = scratch("cpu-target-nvcc");
    let program = dir.join("loops");
    let output = Command::new(env!("CARGO_BIN_EXE_cuda-flux-nvcc"))
        .env("CUDA_FLUX_TARGET", "cpu")
        .args(["-O2", "-arch=sm_70", "-I"])
        .arg(support::repo_root().join("corpus"))
        .arg(support::repo_root().join("corpus/loops.cu"))
        .arg("-o")
        .arg(&program)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let (output, profile) = run(&program, &[]).unwrap();
    check_witness("loops (cuda-flux-nvcc)", &output, profile.as_ref()).unwrap();
    assert_eq!(
        profile.unwrap()["devices"][0]["name"],
        "cuda-flux CPU target",
        "the profile names the emulated device"
    );
}

#[test]
fn annotate_by_line_on_a_real_profile_counts_each_source_line() {
    // A real profile (CPU target, built with -g) of the bundled example: saxpy runs 5120
    // threads (20 CTAs of 256) for n = 5000. Each line's thread count is its instructions'
    // executions: every instruction of line 6 runs in all 5120 threads, every instruction of
    // line 9 (`y[i] = a * x[i] + y[i];`, inside `if (i < n)`) in exactly 5000.
    // As `cuda-flux annotate PROFILE --kernel saxpy --by-line` prints it.
    let path = saxpy_profile("cpu-target-annotate", &["-g"]);
    let summary = analysis::aggregate::summarize(std::slice::from_ref(&path)).unwrap();
    let options = analysis::annotate::Options {
        hot: 5,
        by_line: true,
    };
    let stdout: String = analysis::aggregate::select(&summary.kernels, "saxpy")
        .into_iter()
        .map(|k| analysis::annotate::render(k, options).unwrap())
        .collect();
    let row = |line: &str| -> (u64, u64) {
        let fields: Vec<&str> = stdout
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .next()
                    .is_some_and(|f| f.ends_with(line))
            })
            .unwrap_or_else(|| panic!("no row for {line}:\n{stdout}"))
            .split_whitespace()
            .collect();
        (fields[1].parse().unwrap(), fields[3].parse().unwrap())
    };
    let (threads, instructions) = row("corpus/saxpy.cu:6");
    assert!(instructions > 0);
    assert_eq!(threads, 5120 * instructions, "{stdout}");
    let (threads, instructions) = row("corpus/saxpy.cu:9");
    assert!(instructions > 0);
    assert_eq!(threads, 5000 * instructions, "{stdout}");
}

#[test]
fn metrics_and_features_of_a_real_profile_match_the_program() {
    // The bundled example run on the CPU target: saxpy over n = 5000 with 20 CTAs of 256
    // threads. From the source alone: 5000 in-range threads in 157 warps (5000 / 32, rounded
    // up), each doing one fma (y = a * x + y), two global loads and one store, plus the witness:
    // one atom.global.add.u32 per thread and one atom.global.add.u64 per warp leader.
    // As `cuda-flux metrics PROFILE` and `cuda-flux features PROFILE` print them.
    let path = saxpy_profile("cpu-target-metrics", &[]);
    let files = std::slice::from_ref(&path);
    let summary = analysis::aggregate::summarize(files).unwrap();
    let metrics = analysis::metric_table::render(&summary, analysis::metric_table::Format::Json);
    let metrics: Value = serde_json::from_str(&metrics.unwrap()).unwrap();
    let saxpy = metrics["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "_Z5saxpyifPKfPf")
        .expect("saxpy in the metrics");
    let m = &saxpy["metrics"];
    assert_eq!(m["flop_count_sp_fma"], 5000, "{m}");
    assert_eq!(m["flop_count_sp"], 10000, "fma counts twice: {m}");
    assert_eq!(m["inst_executed_global_loads"], 2 * 157, "{m}");
    assert_eq!(m["inst_executed_global_stores"], 157, "{m}");
    assert_eq!(m["inst_executed_global_atomics"], 2 * 157, "{m}");

    let mut features = Vec::new();
    analysis::features::write(files, &mut features).unwrap();
    let features = String::from_utf8(features).unwrap();
    let mut lines = features.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row = lines
        .find(|l| l.contains(",_Z5saxpyifPKfPf,"))
        .expect("a saxpy row");
    // The demangled name is quoted and holds commas: split the row after it.
    let tail: Vec<&str> = row.rsplit_once('"').unwrap().1[1..].split(',').collect();
    let column = |name: &str| -> u64 {
        let index = header.iter().position(|h| *h == name).unwrap();
        // `tail` starts at the column after `demangled` (index 3).
        tail[index - 3].parse().unwrap()
    };
    // Loads: 2 x 4 bytes x 5000; atomics read and write their operand: 4 x 5000 + 8 x 157.
    assert_eq!(
        column("bytes_read_global"),
        2 * 4 * 5000 + 4 * 5000 + 8 * 157
    );
    // Stores: 4 x 5000; atomics as above.
    assert_eq!(
        column("bytes_written_global"),
        4 * 5000 + 4 * 5000 + 8 * 157
    );
    assert_eq!(column("threads"), 5120);
}

#[test]
fn counts_do_not_depend_on_how_many_host_threads_run_the_ctas() {
    // Deterministic kernels (no atomics that decide control flow): every block's counts must
    // be the same whether CTAs run on one host thread or several.
    let dir = scratch("cpu-target-workers");
    let root = support::repo_root().join("corpus");
    for name in ["saxpy", "switch_dense", "loops", "dynamic_shared_3d"] {
        let program = dir.join(name);
        build_cpu(&[root.join(format!("{name}.cu"))], &program, &[]).unwrap();
        let (one, one_profile) = run(&program, &[("CUDA_FLUX_CPU_THREADS", "1")]).unwrap();
        let (four, four_profile) = run(&program, &[("CUDA_FLUX_CPU_THREADS", "4")]).unwrap();
        check_witness(name, &one, one_profile.as_ref()).unwrap();
        check_witness(name, &four, four_profile.as_ref()).unwrap();
        let blocks = |profile: &Option<Value>| -> Vec<Value> {
            profile.as_ref().unwrap()["kernels"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|k| k["launches"].as_array().unwrap().iter())
                .map(|launch| launch["block_counts"].clone())
                .collect()
        };
        let (a, b) = (blocks(&one_profile), blocks(&four_profile));
        assert!(!a.is_empty(), "{name}: no launches recorded");
        assert_eq!(
            a, b,
            "{name}: block counts differ between 1 and 4 host threads"
        );
    }
}

/// Runs `program` with `CUDA_FLUX_CPU_STATS` (and `env`); returns its profile and the
/// statistics' kernels by name.
fn run_with_stats(
    name: &str,
    program: &Path,
    env: &[(&str, &str)],
) -> Result<(Option<Value>, BTreeMap<String, Value>), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let stats = dir.path().join("stats.json");
    let mut env = env.to_vec();
    env.push(("CUDA_FLUX_CPU_STATS", stats.to_str().unwrap()));
    let (output, profile) = run(program, &env)?;
    if output.status.code() != Some(0) || !text(&output).contains("result: PASS") {
        return Err(format!("{name} {env:?}: did not pass:\n{}", text(&output)));
    }
    let stats: Value = std::fs::read_to_string(&stats)
        .map_err(|e| format!("{name} {env:?}: no statistics: {e}"))
        .and_then(|t| serde_json::from_str(&t).map_err(|e| format!("{name}: {e}")))?;
    if stats["format"] != "cuda-flux-cpu-stats/1" {
        return Err(format!("{name}: statistics format {}", stats["format"]));
    }
    let kernels = stats["kernels"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| (k["name"].as_str().unwrap_or("").to_owned(), k.clone()))
        .collect();
    Ok((profile, kernels))
}

/// Σ over launches and blocks of (warps(B) x len(B), threads(B) x len(B)) of a profile's kernel.
fn profile_instructions(kernel: &Value) -> (u64, u64) {
    let lengths: Vec<u64> = kernel["blocks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| b["instructions"].as_array().map_or(0, |i| i.len() as u64))
        .collect();
    let (mut warps, mut threads) = (0, 0);
    for launch in kernel["launches"].as_array().into_iter().flatten() {
        let counts = &launch["block_counts"];
        for (i, len) in lengths.iter().enumerate() {
            warps += counts["warps"][i].as_u64().unwrap_or(0) * len;
            threads += counts["threads"][i].as_u64().unwrap_or(0) * len;
        }
    }
    (warps, threads)
}

#[test]
fn cpu_stats_of_the_original_kernels_equal_the_instructions_their_profile_counts() {
    // Two runs of each instrumented program: (1) as built, the clones run and the profile counts
    // every block; (2) with a kernel filter that matches nothing, the original kernels run
    // uncounted. The interpreter's own counts of run (2) must be exactly what the profile of
    // run (1) says the kernel executed (Σ warps(B) x len(B), Σ threads(B) x len(B)), and the
    // clone, which runs the counter code on top, issues at least as much. Deterministic
    // programs only (no timing-dependent control flow); `device_calls` has a divergent
    // indirect call, `exit_after_work` exits mid-kernel, `dynamic_shared_3d` a 3-D grid.
    let dir = scratch("cpu-target-stats");
    let root = support::repo_root().join("corpus");
    let programs: Vec<String> = [
        "saxpy",
        "loops",
        "switch_dense",
        "device_calls",
        "shared_shuffle",
        "dynamic_shared_3d",
        "exit_after_work",
        "launch_ex",
    ]
    .map(String::from)
    .to_vec();
    let errors = support::parallel(&programs, |name| {
        let program = dir.join(name);
        build_cpu(&[root.join(format!("{name}.cu"))], &program, &[])?;
        let (profile, clones) = run_with_stats(name, &program, &[])?;
        let profile = profile.ok_or_else(|| format!("{name}: no profile"))?;
        let (_, originals) = run_with_stats(
            name,
            &program,
            &[("CUDA_FLUX_KERNELS", "no_kernel_has_this_name")],
        )?;
        let mut checked = 0;
        for kernel in profile["kernels"].as_array().into_iter().flatten() {
            let launches = kernel["launches"].as_array().map_or(0, |l| l.len() as u64);
            if launches == 0 {
                continue;
            }
            let k = kernel["name"].as_str().unwrap_or("");
            if kernel["instrumented"] != Value::Bool(true) {
                return Err(format!("{name}: {k} ran uninstrumented"));
            }
            let (warps, threads) = profile_instructions(kernel);
            let original = originals.get(k).ok_or_else(|| {
                format!("{name}: no statistics of the original {k}: {originals:?}")
            })?;
            let clone = clones
                .get(&format!("{k}__cf"))
                .ok_or_else(|| format!("{name}: no statistics of the clone of {k}: {clones:?}"))?;
            let field = |v: &Value, f: &str| v[f].as_u64().unwrap_or(u64::MAX);
            let found = (
                field(original, "launches"),
                field(original, "warp_instructions"),
                field(original, "thread_instructions"),
            );
            if found != (launches, warps, threads) {
                return Err(format!(
                    "{name}: {k}: the original's (launches, warp, thread instructions) are \
                     {found:?}, the profile says {:?}",
                    (launches, warps, threads)
                ));
            }
            if field(clone, "launches") != launches
                || field(clone, "warp_instructions") < warps
                || field(clone, "thread_instructions") < threads
            {
                return Err(format!(
                    "{name}: {k}: the clone ({clone}) issued less than the original ({original})"
                ));
            }
            checked += 1;
        }
        if checked == 0 {
            return Err(format!("{name}: no launched kernel in the profile"));
        }
        // Nothing ran that the profile does not list.
        if originals.len() != checked || clones.len() != checked {
            return Err(format!(
                "{name}: {checked} kernels profiled, statistics of {} originals and {} clones",
                originals.len(),
                clones.len()
            ));
        }
        Ok(())
    });
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

#[test]
fn a_kernel_fault_is_one_line_naming_the_ptx_line_and_no_profile() {
    let dir = scratch("cpu-target-fault");
    let source = dir.join("oob.cu");
    std::fs::write(
        &source,
        r#"#include <cstdio>
__global__ void oob(float* out) { out[threadIdx.x + (1 << 28)] = 1.0f; }
int main() {
    float* d = nullptr;
    cudaMalloc(&d, 64 * sizeof(float));
    oob<<<1, 64>>>(d);
    cudaError_t e = cudaDeviceSynchronize();
    std::printf("status %d\n", (int)e);
    return 0;
}
"#,
    )
    .unwrap();
    let program = dir.join("oob");
    build_cpu(&[source], &program, &[]).unwrap();
    let (output, profile) = run(&program, &[]).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(lines.len(), 1, "one line expected:\n{stderr}");
    assert!(
        lines[0].starts_with("cuda-flux cpu: ")
            && lines[0].contains("address")
            && lines[0].contains("PTX line"),
        "{stderr}"
    );
    assert!(profile.is_none(), "a failed run must not leave a profile");
}

#[test]
fn the_strict_memory_mode_reports_what_a_gpu_tolerates_like_compute_sanitizer() {
    // Issue 13, class c: corpus/near_bounds.cu reads the row above an image and x[-1], which
    // a GPU (and the CPU target by default: the corpus run) tolerates; CUDA_FLUX_CPU_MEMCHECK=1
    // reports the first such read with the kernel, the thread and the allocation.
    let dir = scratch("cpu-target-memcheck");
    let program = dir.join("near_bounds");
    build_cpu(
        &[support::repo_root().join("corpus/near_bounds.cu")],
        &program,
        &[],
    )
    .unwrap();
    let (output, profile) = run(&program, &[("CUDA_FLUX_CPU_MEMCHECK", "1")]).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("cuda-flux cpu: invalid global address")
            && stderr.contains("thread (")
            && stderr.contains("in kernel `_Z16vertical_stencil")
            && stderr.contains(" bytes before the 1920-byte allocation at 0x")
            && stderr.contains("(CUDA_FLUX_CPU_MEMCHECK=1)"),
        "{stderr}"
    );
    assert!(profile.is_none());
    let (output, _) = run(&program, &[("CUDA_FLUX_CPU_MEMCHECK", "on")]).unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "cuda-flux cpu: CUDA_FLUX_CPU_MEMCHECK must be 0 or 1, not `on`"
    );
}

#[test]
fn a_misaligned_access_is_a_fault_as_on_a_gpu() {
    // Issue 14, item 5: an int read at +1 of a float buffer succeeded silently on the CPU target.
    let dir = scratch("cpu-target-misaligned");
    let source = dir.join("misaligned.cu");
    std::fs::write(
        &source,
        r#"#include <cstdio>
__global__ void peek(const char* bytes, int* out) { *out = *(const int*)(bytes + 1); }
int main() {
    char* bytes = nullptr;
    int* out = nullptr;
    cudaMalloc(&bytes, 64);
    cudaMalloc(&out, sizeof(int));
    peek<<<1, 1>>>(bytes, out);
    cudaError_t e = cudaDeviceSynchronize();
    std::printf("status %d\n", (int)e);
    return 0;
}
"#,
    )
    .unwrap();
    let program = dir.join("misaligned");
    build_cpu(&[source], &program, &[]).unwrap();
    let (output, profile) = run(&program, &[]).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("cuda-flux cpu: misaligned global address")
            && stderr.contains("(4-byte access)")
            && stderr.contains("PTX line"),
        "{stderr}"
    );
    assert!(profile.is_none());
}

/// Runs `program` with a time limit; `None` when it had to be stopped.
fn run_limited(program: &Path, seconds: u32) -> Option<Output> {
    let output = Command::new("timeout")
        .arg(seconds.to_string())
        .arg(program)
        .current_dir(program.parent().unwrap())
        .env("CUDA_FLUX_OUTPUT", program.with_extension("json"))
        .env_remove("CUDA_FLUX_MODE")
        .env_remove("CUDA_FLUX_KERNELS")
        .output()
        .unwrap();
    (output.status.code() != Some(124)).then_some(output)
}

#[test]
fn a_cooperative_launch_at_the_reported_limit_with_an_inter_block_barrier_completes() {
    // Issue 14, item 4: a cooperative launch of (blocks per SM) x (SMs), which the device
    // accepts, hung when its CTAs waited for each other: CTAs ran on one host thread per SM,
    // one after the other.
    let dir = scratch("cpu-target-cooperative-limit");
    let source = dir.join("barrier.cu");
    std::fs::write(
        &source,
        r#"#include <cstdio>
__device__ unsigned arrived;
__global__ void meet(int* seen) {
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(&arrived, 1u);
        while (atomicAdd(&arrived, 0u) < gridDim.x) {}
        seen[blockIdx.x] = (int)atomicAdd(&arrived, 0u);
    }
    __syncthreads();
}
int main() {
    int per_sm = 0, sms = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, meet, 256, 0);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int blocks = per_sm * sms;
    int* seen = nullptr;
    cudaMalloc(&seen, blocks * sizeof(int));
    void* args[] = {&seen};
    cudaError_t e = cudaLaunchCooperativeKernel((const void*)meet, blocks, 256, args, 0, 0);
    cudaError_t s = cudaDeviceSynchronize();
    int* host = new int[blocks];
    cudaMemcpy(host, seen, blocks * sizeof(int), cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int b = 0; b < blocks; ++b) bad += host[b] != blocks;
    std::printf("blocks %d launch %d sync %d bad %d\n", blocks, (int)e, (int)s, bad);
    return bad != 0 || e != cudaSuccess || s != cudaSuccess;
}
"#,
    )
    .unwrap();
    let program = dir.join("barrier");
    build_cpu(&[source], &program, &[]).unwrap();
    let output = run_limited(&program, 120).expect("the cooperative launch hung");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", text(&output));
    assert!(stdout.contains(" launch 0 sync 0 bad 0"), "{stdout}");
    let blocks: u32 = stdout.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(blocks >= 2, "{stdout}");
}

#[test]
fn a_grid_waiting_for_ctas_that_cannot_be_resident_is_reported_not_hung() {
    // Issue 13, class e: one CTA more than the emulated device holds, all waiting for each
    // other (corpus/gpu_scheduling.cu has the grid that fits): a GPU hangs; the CPU target
    // names the kernel.
    let dir = scratch("cpu-target-no-progress");
    let source = dir.join("wait.cu");
    std::fs::write(
        &source,
        r#"#include <cstdio>
__device__ unsigned arrived;
__global__ void wait_for_all(unsigned* seen) {
    if (threadIdx.x == 0) {
        atomicInc(&arrived, 0xFFFFFFFFu);
        while (*(volatile unsigned*)&arrived < gridDim.x) {}
        seen[blockIdx.x] = arrived;
    }
}
int main() {
    int per_sm = 0, sms = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, wait_for_all, 1024, 0);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int blocks = per_sm * sms + 1;
    unsigned* seen = nullptr;
    cudaMalloc(&seen, blocks * sizeof(unsigned));
    wait_for_all<<<blocks, 1024>>>(seen);
    cudaError_t e = cudaDeviceSynchronize();
    std::printf("status %d\n", (int)e);
    return 0;
}
"#,
    )
    .unwrap();
    let program = dir.join("wait");
    build_cpu(&[source], &program, &[]).unwrap();
    let output = run_limited(&program, 120).expect("the grid hung instead of being reported");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        stderr.starts_with("cuda-flux cpu: kernel `_Z12wait_for_allPj")
            && stderr.contains("makes no progress")
            && stderr.contains("1 of its")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
}

#[test]
fn cooperative_groups_grid_sync_works_on_the_cpu_target() {
    // Issue 14, item 3: this_grid().is_valid() was false and grid.sync() trapped in a
    // cooperative launch (the grid workspace read through %envreg1/%envreg2 was 0).
    let dir = scratch("cpu-target-grid-sync");
    let source = dir.join("grid_sync.cu");
    std::fs::write(
        &source,
        r#"#include <cstdio>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void rotate(int* data, int* valid) {
    cg::grid_group grid = cg::this_grid();
    if (grid.thread_rank() == 0) *valid = grid.is_valid();
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned n = gridDim.x * blockDim.x;
    data[i] = (int)i;
    grid.sync();
    int v = data[(i + blockDim.x) % n]; // written by the next block
    grid.sync();
    data[i] = v;
}
__global__ void validity(int* valid) { *valid = cg::this_grid().is_valid(); }
int main() {
    int per_sm = 0, sms = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rotate, 128, 0);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int blocks = per_sm * sms, n = blocks * 128;
    int *data = nullptr, *valid = nullptr;
    cudaMalloc(&data, n * sizeof(int));
    cudaMalloc(&valid, 2 * sizeof(int));
    void* args[] = {&data, &valid};
    cudaError_t e = cudaLaunchCooperativeKernel((const void*)rotate, blocks, 128, args, 0, 0);
    int* plain_valid = valid + 1;
    validity<<<1, 1>>>(plain_valid);
    cudaError_t s = cudaDeviceSynchronize();
    int* host = new int[n];
    int flags[2];
    cudaMemcpy(host, data, n * sizeof(int), cudaMemcpyDeviceToHost);
    cudaMemcpy(flags, valid, sizeof flags, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < n; ++i) bad += host[i] != (i + 128) % n;
    std::printf("blocks %d launch %d sync %d valid %d %d bad %d\n", blocks, (int)e, (int)s,
                flags[0], flags[1], bad);
    return 0;
}
"#,
    )
    .unwrap();
    let program = dir.join("grid_sync");
    build_cpu(&[source], &program, &[]).unwrap();
    let output = run_limited(&program, 120).expect("grid.sync() hung");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", text(&output));
    // Valid in the cooperative launch, not in the plain one (as on a GPU); every value moved.
    assert!(
        stdout.contains(" launch 0 sync 0 valid 1 0 bad 0"),
        "{stdout}"
    );
    let profile: Value =
        serde_json::from_str(&std::fs::read_to_string(program.with_extension("json")).unwrap())
            .unwrap();
    for kernel in profile["kernels"].as_array().unwrap() {
        for launch in kernel["launches"].as_array().unwrap() {
            assert_eq!(launch["instrumented"], true, "{}", kernel["name"]);
        }
    }
}

#[test]
fn an_api_call_the_cpu_target_lacks_is_named_at_link_time() {
    let dir = scratch("cpu-target-missing-api");
    let source = dir.join("graph.cu");
    std::fs::write(
        &source,
        r#"__global__ void k() {}
int main() {
    cudaGraph_t graph;
    cudaGraphCreate(&graph, 0);
    k<<<1, 1>>>();
    return 0;
}
"#,
    )
    .unwrap();
    let output = driver()
        .args(["--cuda-flux-target=cpu", "-O2"])
        .arg(&source)
        .arg("-o")
        .arg(dir.join("graph"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.contains("CPU target does not implement cudaGraphCreate"),
        "{stderr}"
    );
}

#[test]
fn a_program_using_a_library_with_kernels_we_did_not_compile_is_told_once() {
    // Issue 13, class g: SHOC GEMM calls cuBLAS, whose kernels are GPU code inside the
    // library; on the CPU target cublasCreate fails, and the run used to say nothing.
    let dir = scratch("cpu-target-cublas");
    let source = dir.join("blas.cu");
    std::fs::write(
        &source,
        r#"#include <cstdio>
#include <cublas_v2.h>
__global__ void fill(float* a) { a[threadIdx.x] = 1.0f; }
int main() {
    float* a = nullptr;
    cudaMalloc(&a, 16 * sizeof(float));
    fill<<<1, 16>>>(a);
    cudaDeviceSynchronize();
    cublasHandle_t handle;
    cublasStatus_t status = cublasCreate(&handle);
    std::printf("cublasCreate %d\n", (int)status);
    return 0;
}
"#,
    )
    .unwrap();
    let program = dir.join("blas");
    build_cpu(&[source], &program, &["-lcublas"]).unwrap();
    let (output, profile) = run(&program, &[]).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("cuda-flux cpu: this program loads libcublas.so")
            && stderr.contains("whose kernels cuda-flux does not compile"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("cublasCreate 0"));
    // The program's own kernel is profiled as usual.
    assert!(profile.is_some_and(|p| p["kernels"].as_array().is_some_and(|k| k.len() == 1)));
}

#[test]
fn a_bad_target_value_is_one_line() {
    let output = driver()
        .args(["--cuda-flux-target=tpu", "k.cu"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "cuda-flux-clang: error: 'tpu' is not a cuda-flux target (expected gpu or cpu)"
    );
    let output = driver()
        .env("CUDA_FLUX_TARGET", "fpga")
        .arg("k.cu")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("CUDA_FLUX_TARGET: 'fpga' is not a cuda-flux target"));
}

#[test]
fn a_bad_counter_placement_is_one_line() {
    let output = driver()
        .env("CUDA_FLUX_COUNTERS", "sometimes")
        .arg("k.cu")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(
        "CUDA_FLUX_COUNTERS: 'sometimes' is not a counter placement (derived, uniform-loops, every-block)"
    ));
}

/// An engine the differential tests run: `CUDA_FLUX_CPU_ENGINE` and
/// `CUDA_FLUX_CPU_NATIVE_AFTER` (which the interpreter ignores).
type EngineSetting = (&'static str, &'static str);

/// The reference.
const INTERPRETER: EngineSetting = ("interpreter", "0");

/// The native engine compiling every function at its first run, so that the compiled code
/// runs all of every program (by default it runs a function only after the function's
/// interpreted work passes a threshold, which short test programs never reach).
const NATIVE: EngineSetting = ("native", "0");

/// The native engine compiling a function after 10,000 warp-instructions: warps switch from
/// the interpreter to the native code in the middle of the programs' kernels.
const NATIVE_MIDWAY: EngineSetting = ("native", "10000");

/// What a run with one host thread must give identically under both engines
/// (`CUDA_FLUX_CPU_ENGINE`): exit status, output (timing lines left out), the profile's counts
/// block by block, and the interpreter's statistics per kernel (launches, warp- and
/// thread-instructions, global atomics; not the time). Also the profile.
fn engine_observation(
    name: &str,
    program: &Path,
    (engine, native_after): EngineSetting,
    env: &[(&str, &str)],
) -> Result<(String, Option<Value>), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let stats = dir.path().join("stats.json");
    let mut env = env.to_vec();
    env.extend([
        ("CUDA_FLUX_CPU_ENGINE", engine),
        ("CUDA_FLUX_CPU_NATIVE_AFTER", native_after),
        ("CUDA_FLUX_CPU_THREADS", "1"),
        ("CUDA_FLUX_CPU_STATS", stats.to_str().unwrap()),
    ]);
    let (output, profile) = run(program, &env)?;
    let printed: Vec<String> = text(&output)
        .lines()
        .filter(|line| !line.starts_with("kernel_ms:"))
        .map(String::from)
        .collect();
    let stats: Value = std::fs::read_to_string(&stats)
        .map_err(|e| format!("{name} ({engine}): no statistics: {e}"))
        .and_then(|t| serde_json::from_str(&t).map_err(|e| format!("{name}: {e}")))?;
    let counts: Vec<(String, u64, u64, u64, u64)> = stats["kernels"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| {
            let field = |f: &str| k[f].as_u64().unwrap_or(u64::MAX);
            (
                k["name"].as_str().unwrap_or("").to_owned(),
                field("launches"),
                field("warp_instructions"),
                field("thread_instructions"),
                field("global_atomics"),
            )
        })
        .collect();
    let observed = format!(
        "status {:?}\noutput {printed:#?}\nstatistics {counts:?}\nblocks {:?}",
        output.status.code(),
        profile.as_ref().map(block_counts)
    );
    Ok((observed, profile))
}

#[test]
fn the_native_engine_gives_the_interpreters_results_and_counts_on_the_benchmark_programs() {
    // Every benchmark program (small inputs), instrumented and with its original kernels (no
    // kernel counted: the statistics are the kernels' own instructions), run by the interpreter
    // (the reference) and by the native engine: the same output, profile and instruction
    // counts per kernel. Instrumented, also with the native engine switching to compiled code
    // in the middle of the kernels. (The corpus programs are compared in the corpus test
    // above.)
    let dir = scratch("cpu-target-engines");
    let benchmarks = support::repo_root().join("benchmarks/programs");
    let mut names: Vec<String> = std::fs::read_dir(&benchmarks)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 8, "the benchmark programs shrank: {names:?}");
    let errors = support::parallel(&names, |name| {
        let program = dir.join(name);
        build_cpu(
            &[benchmarks.join(format!("{name}.cu"))],
            &program,
            &["-DBENCH_SMALL"],
        )?;
        for (env, natives) in [
            (vec![], &[NATIVE, NATIVE_MIDWAY][..]),
            (
                vec![("CUDA_FLUX_KERNELS", "no_kernel_has_this_name")],
                &[NATIVE][..],
            ),
        ] {
            let (interpreted, _) = engine_observation(name, &program, INTERPRETER, &env)?;
            for &native_setting in natives {
                let (native, _) = engine_observation(name, &program, native_setting, &env)?;
                if native != interpreted {
                    return Err(format!(
                        "{name} {env:?}: the engines differ\n--- interpreter\n{interpreted}\n\
                         --- native {native_setting:?}\n{native}"
                    ));
                }
            }
            if !interpreted.contains("result: PASS") {
                return Err(format!("{name}: did not pass:\n{interpreted}"));
            }
        }
        Ok(())
    });
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}
