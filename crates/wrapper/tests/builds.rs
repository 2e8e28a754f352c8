//! The build-project corpus (`corpus/builds/`): CMake projects and a Makefile, each built
//! unmodified with each driver for the CPU target, through the links the build systems make
//! themselves (CMake links a C++ executable against a static library of `.cu` files with the C++
//! compiler; the Makefile links with g++ and with gcc and `-lcudart`), then run; every program
//! must pass its own check and its profile must match its witness counters exactly
//! (`witnesses::check_witness`). Needs cmake and make (scripts/setup.sh installs them).

mod witnesses;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use test_support::run_step;
use witnesses::{block_counts, check_witness};

const DRIVERS: [(&str, &str); 2] = [
    ("clang", env!("CARGO_BIN_EXE_cuda-flux-clang")),
    ("nvcc", env!("CARGO_BIN_EXE_cuda-flux-nvcc")),
];

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus")
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("builds")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `program` in `dir`, the profile going to a file of its own.
fn run(program: &Path, dir: &Path) -> Result<(Output, Option<Value>), String> {
    let profile = dir.join(format!(
        "{}.profile.json",
        program.file_name().unwrap_or_default().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&profile);
    let output = Command::new(program)
        .current_dir(dir)
        .env("CUDA_FLUX_OUTPUT", &profile)
        .env_remove("CUDA_FLUX_MODE")
        .env_remove("CUDA_FLUX_KERNELS")
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    let json = match std::fs::read_to_string(&profile) {
        Ok(text) => Some(
            serde_json::from_str(&text)
                .map_err(|e| format!("{}: profile is not complete JSON: {e}", program.display()))?,
        ),
        Err(_) => None,
    };
    Ok((output, json))
}

/// Configures, builds and runs a CMake project of the corpus with `driver` as the CUDA compiler.
fn cmake_project(project: &str, driver: (&str, &str), options: &[&str]) -> Result<(), String> {
    let name = format!("{project} with cuda-flux-{} {options:?}", driver.0);
    let build = scratch(&format!("{project}-{}", driver.0));
    run_step(
        &name,
        Command::new("cmake")
            .arg("-S")
            .arg(corpus().join("builds").join(project))
            .arg("-B")
            .arg(&build)
            .arg(format!("-DCMAKE_CUDA_COMPILER={}", driver.1))
            .arg("-DCMAKE_BUILD_TYPE=Release")
            .args(options)
            .env("CUDA_FLUX_TARGET", "cpu"),
    )?;
    run_step(
        &name,
        Command::new("cmake")
            .arg("--build")
            .arg(&build)
            .env("CUDA_FLUX_TARGET", "cpu"),
    )?;
    let (output, profile) = run(&build.join("app"), &build)?;
    check_witness(&name, &output, profile.as_ref())
}

#[test]
fn cmake_static_library_linked_by_a_cxx_executable() {
    // No architectures given: each driver must tell CMake its default (cuda-flux-nvcc is
    // identified as NVIDIA nvcc, cuda-flux-clang as Clang).
    let failures: Vec<String> = DRIVERS
        .iter()
        .filter_map(|&driver| cmake_project("cmake-static", driver, &[]).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn cmake_shared_libraries_of_kernels_linked_and_loaded_with_dlopen() {
    let failures: Vec<String> = DRIVERS
        .iter()
        .zip([
            &["-DCMAKE_CUDA_ARCHITECTURES=70;80"][..],
            &["-DCMAKE_CUDA_ARCHITECTURES=all-major"][..],
        ])
        .filter_map(|(&driver, options)| cmake_project("cmake-shared", driver, options).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Builds the Makefile project in a copy with `make VARIABLES...` (with `CUDA_FLUX_TARGET=cpu`
/// in the environment, or none with `target_env` false), runs its g++- and gcc-linked programs.
fn make_project(name: &str, variables: &[String], target_env: bool) -> Result<(), String> {
    let dir = scratch(name);
    let source = corpus().join("builds/make-foreign");
    for file in ["Makefile", "kernels.cu", "main.cpp", "scale.c"] {
        std::fs::copy(source.join(file), dir.join(file)).map_err(|e| e.to_string())?;
    }
    let mut make = Command::new("make");
    make.current_dir(&dir)
        .arg(format!("CORPUS={}", corpus().display()))
        .args(variables);
    if target_env {
        make.env("CUDA_FLUX_TARGET", "cpu");
    } else {
        make.env_remove("CUDA_FLUX_TARGET");
    }
    run_step(name, &mut make)?;
    for program in ["app", "app-gcc"] {
        let (output, profile) = run(&dir.join(program), &dir)?;
        check_witness(&format!("{name} ({program})"), &output, profile.as_ref())?;
    }
    Ok(())
}

#[test]
fn makefile_linking_with_gxx_and_gcc_against_the_system_cudart() {
    let mut failures = Vec::new();
    for (driver, path) in DRIVERS {
        let flags = match driver {
            "nvcc" => "-O2 -arch=sm_70",
            _ => "-O2 --cuda-gpu-arch=sm_70",
        };
        if let Err(error) = make_project(
            &format!("make-foreign-{driver}"),
            &[format!("CUDACC={path}"), format!("CUDAFLAGS={flags}")],
            true,
        ) {
            failures.push(error);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn makefile_through_a_cpu_target_prefix() {
    // Issue 13 (a): `--cuda-flux-prefix` written for the CPU target; the Makefile takes the
    // toolkit's nvcc and library directory from it.
    let prefix = scratch("prefix-cpu");
    run_step(
        "prefix",
        Command::new(env!("CARGO_BIN_EXE_cuda-flux-nvcc"))
            .arg(format!("--cuda-flux-prefix={}", prefix.display()))
            .arg("--cuda-flux-target=cpu")
            .env_remove("CUDA_FLUX_TARGET"),
    )
    .unwrap();
    let script = std::fs::read_to_string(prefix.join("lib64/libcudart.so")).unwrap();
    assert!(script.contains("libcpu_runtime.so"), "{script}");
    // The prefix's nvcc builds for the CPU target without being told.
    let result = make_project(
        "make-foreign-prefix",
        &[
            format!("CUDACC={}", prefix.join("bin/nvcc").display()),
            "CUDAFLAGS=-O2".to_string(),
            format!("CUDA_LIB={}", prefix.join("lib64").display()),
        ],
        false,
    );
    result.unwrap();
}

#[test]
fn cmake_separable_compilation_is_instrumented_on_the_cpu_target() {
    // A kernel calling a device function of another unit and reading its variable; static
    // helpers of one name and a template in both units (`corpus/builds/cmake-separable`).
    // cuda-flux-nvcc: CMake's device link is `cuda-flux-nvcc -dlink`, its final link g++;
    // cuda-flux-clang: CMake runs nvlink and compiles crt/link.stub itself, the driver's final
    // link makes the device link.
    let failures: Vec<String> = DRIVERS
        .iter()
        .filter_map(|&driver| {
            cmake_project(
                "cmake-separable",
                driver,
                &["-DCMAKE_CUDA_ARCHITECTURES=70"],
            )
            .err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn cmake_separable_static_library_linked_by_a_cxx_executable() {
    // CMake makes the device link for the C++ executable, then links it with the C++ compiler.
    // cuda-flux-nvcc: the device link is cuda-flux's (`-dlink`). cuda-flux-clang: CMake runs
    // nvlink and has the driver compile crt/link.stub; the driver reads the units' records
    // from nvlink's cubin and makes that object cuda-flux's device link, so the run is
    // profiled although no cuda-flux link follows. Two architectures: nvlink writes a cubin
    // for each, and the units' records of both are merged.
    let failures: Vec<String> = DRIVERS
        .iter()
        .filter_map(|&driver| {
            cmake_project(
                "cmake-separable-static",
                driver,
                &["-DCMAKE_CUDA_ARCHITECTURES=70;80"],
            )
            .err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn nvlink_device_link_of_a_foreign_unit_runs_uninstrumented_and_says_so() {
    // CMake's device link with clang, by hand: one unit compiled by plain clang++ (no
    // cuda-flux record in nvlink's cubin), so the driver's crt/link.stub cannot be cuda-flux's
    // device link; a g++ final link then runs nvlink's device code, which the CPU target
    // cannot run: the program says so once and exits 1 (the build warned once).
    let project = corpus().join("builds/cmake-separable-static");
    let include = format!("-I{}", corpus().display());
    let dir = scratch("nvlink-foreign-unit");
    let clang = env!("CARGO_BIN_EXE_cuda-flux-clang");
    let stub = "/usr/lib/nvidia-cuda-toolkit/bin/crt/link.stub";
    let gpu_arch = "--cuda-gpu-arch=sm_70";
    let mut steps: Vec<(&str, Command)> = Vec::new();
    let mut ours = Command::new(clang);
    ours.args(["-O2", gpu_arch, "-fgpu-rdc", "-c", &include])
        .arg(project.join("kernels.cu"))
        .args(["-o", "kernels.o"]);
    steps.push(("cuda-flux-clang -fgpu-rdc -c", ours));
    let mut foreign = Command::new("clang++-16");
    foreign
        .args(["-O2", gpu_arch, "-fgpu-rdc", "-c", "-x", "cuda", &include])
        .args(["--cuda-path=/usr/lib/cuda", "-Wno-unknown-cuda-version"])
        .arg(project.join("scale.cu"))
        .args(["-o", "scale.o"]);
    steps.push(("clang++-16 -fgpu-rdc -c", foreign));
    let mut nvlink = Command::new("nvlink");
    nvlink.args([
        "-arch=sm_70",
        "--register-link-binaries=register.h",
        "-o=sm_70.cubin",
        "kernels.o",
        "scale.o",
    ]);
    steps.push(("nvlink", nvlink));
    let mut fatbinary = Command::new("fatbinary");
    fatbinary.args([
        "-64",
        "-link",
        "--embedded-fatbin=fatbin.h",
        "-im=profile=sm_70,file=sm_70.cubin",
    ]);
    steps.push(("fatbinary", fatbinary));
    let mut link_stub = Command::new(clang);
    link_stub
        .args(["-O2", gpu_arch])
        .args([
            "-D__CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__",
            "-D__NV_EXTRA_INITIALIZATION=",
            "-D__NV_EXTRA_FINALIZATION=",
        ])
        .arg(format!(
            "-DREGISTERLINKBINARYFILE=\"{}\"",
            dir.join("register.h").display()
        ))
        .arg(format!(
            "-DFATBINFILE=\"{}\"",
            dir.join("fatbin.h").display()
        ))
        .args(["-x", "cuda", "-c", stub, "-o", "device_link.o"]);
    steps.push(("crt/link.stub", link_stub));
    let mut gxx = Command::new("g++");
    gxx.arg(project.join("main.cpp"))
        .args(["kernels.o", "scale.o", "device_link.o", "-o", "app"])
        .arg("-L/usr/lib/x86_64-linux-gnu")
        .arg("-lcudart");
    steps.push(("g++ link", gxx));
    let mut warnings = String::new();
    for (name, mut command) in steps {
        let output = command
            .current_dir(&dir)
            .env("CUDA_FLUX_TARGET", "cpu")
            .output()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let text = witnesses::text(&output);
        assert!(output.status.success(), "{name}: {text}");
        warnings.push_str(&text);
    }
    assert_eq!(
        warnings
            .matches("the device link nvlink made cannot be instrumented")
            .count(),
        1,
        "{warnings}"
    );
    let (output, _) = run(&dir.join("app"), &dir).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("linked by nvlink, not by cuda-flux").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn separable_compilation_with_each_driver_and_a_foreign_final_link() {
    // By hand, as Makefiles do it: nvcc -dc, nvcc -dlink, g++ link; nvcc's own link of -dc
    // objects; clang -fgpu-rdc -c and its link. Every program is checked against its witness,
    // and ptxas must assemble the linked PTX, before and after instrumentation.
    let project = corpus().join("builds/cmake-separable");
    let include = format!("-I{}", corpus().display());
    let sources = [project.join("main.cu"), project.join("scale.cu")];
    let nvcc = env!("CARGO_BIN_EXE_cuda-flux-nvcc");
    let clang = env!("CARGO_BIN_EXE_cuda-flux-clang");
    let dir = scratch("separable-by-hand");
    let keep = dir.join("keep");
    let cpu = |command: &mut Command| {
        command.current_dir(&dir).env("CUDA_FLUX_TARGET", "cpu");
    };
    let mut steps: Vec<(&str, Command)> = Vec::new();
    let mut dc = Command::new(nvcc);
    dc.args(["-O2", "-arch=sm_70", "-dc", &include])
        .args(&sources);
    steps.push(("nvcc -dc", dc));
    let mut dlink = Command::new(nvcc);
    dlink
        .args([
            "-arch=sm_70",
            "-dlink",
            "main.o",
            "scale.o",
            "-o",
            "dlink.o",
        ])
        .env("CUDA_FLUX_KEEP", &keep);
    steps.push(("nvcc -dlink", dlink));
    let mut gxx = Command::new("g++");
    gxx.args(["main.o", "scale.o", "dlink.o", "-o", "app-gxx"])
        .arg("-L/usr/lib/x86_64-linux-gnu")
        .arg("-lcudart");
    steps.push(("g++ link", gxx));
    let mut nvcc_link = Command::new(nvcc);
    nvcc_link.args(["-arch=sm_70", "main.o", "scale.o", "-o", "app-nvcc"]);
    steps.push(("nvcc link", nvcc_link));
    let mut clang_one = Command::new(clang);
    clang_one
        .args(["-O2", "--cuda-gpu-arch=sm_70", "-fgpu-rdc", &include])
        .args(&sources)
        .args(["-o", "app-clang"]);
    steps.push(("clang -fgpu-rdc", clang_one));
    // Unoptimised, the units' static helpers stay functions of one name: the device link
    // renames one (its linked PTX is checked with ptxas below; the witness opcodes differ at
    // -O0, so this run is checked by its own result only).
    let mut clang_o0 = Command::new(clang);
    clang_o0
        .args(["-O0", "--cuda-gpu-arch=sm_70", "-fgpu-rdc", &include])
        .args(&sources)
        .args(["-o", "app-clang-O0"])
        .env("CUDA_FLUX_KEEP", dir.join("keep-O0"));
    steps.push(("clang -fgpu-rdc -O0", clang_o0));
    // The reference placement (a counter at every block's top) of the linked module.
    let mut every_block = Command::new(clang);
    every_block
        .args(["-O2", "--cuda-gpu-arch=sm_70", "-fgpu-rdc", &include])
        .args(&sources)
        .args(["-o", "app-clang-every-block"])
        .env("CUDA_FLUX_COUNTERS", "every-block");
    steps.push(("clang -fgpu-rdc, every block", every_block));
    for (name, mut command) in steps {
        cpu(&mut command);
        run_step(name, &mut command).unwrap();
    }
    let mut failures = Vec::new();
    for program in ["app-gxx", "app-nvcc", "app-clang"] {
        let result = run(&dir.join(program), &dir)
            .and_then(|(output, profile)| check_witness(program, &output, profile.as_ref()));
        if let Err(error) = result {
            failures.push(error);
        }
    }
    // Derived and every-block placements count the same, block by block.
    match (
        run(&dir.join("app-clang"), &dir),
        run(&dir.join("app-clang-every-block"), &dir),
    ) {
        (Ok((_, Some(derived))), Ok((output, Some(every)))) => {
            if let Err(error) = check_witness("app-clang-every-block", &output, Some(&every)) {
                failures.push(error);
            }
            if block_counts(&derived) != block_counts(&every) {
                failures.push(
                    "block counts differ between the derived and every-block placements".into(),
                );
            }
        }
        _ => failures.push("app-clang: no profile to compare the placements".into()),
    }
    match run(&dir.join("app-clang-O0"), &dir) {
        Ok((output, _)) if witnesses::text(&output).contains("result: PASS") => {}
        Ok((output, _)) => failures.push(format!("app-clang-O0: {}", witnesses::text(&output))),
        Err(error) => failures.push(error),
    }
    for keep in [&keep, &dir.join("keep-O0")] {
        for ptx in [
            "cuda_flux_device_link.sm_70.ptx",
            "cuda_flux_device_link.sm_70.instrumented.ptx",
        ] {
            if let Err(error) = test_support::ptxas(&keep.join(ptx), "sm_70") {
                failures.push(format!("{}: {error}", keep.join(ptx).display()));
            }
        }
    }
    let linked_o0 = std::fs::read_to_string(dir.join("keep-O0/cuda_flux_device_link.sm_70.ptx"))
        .unwrap_or_default();
    if !linked_o0.contains("__cf_unit1") {
        failures.push("-O0: no static name of the second unit was renamed".to_string());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn cmake_separable_compilation_for_the_gpu_embeds_the_linked_instrumented_module() {
    // Without a GPU here: the build must work with each driver, and the program must embed the
    // linked module with the kernel's counting clone (the SASS of `apply__cf`), assembled by
    // ptxas. Where a GPU is present, the run is witness-checked too. The static library linked
    // by a C++ executable with cuda-flux-clang: the device link is the driver's compile of
    // crt/link.stub alone (with cuda-flux-nvcc, `-dlink` as for cmake-separable).
    let mut failures = Vec::new();
    let builds = DRIVERS
        .iter()
        .map(|&driver| ("cmake-separable", driver))
        .chain([("cmake-separable-static", DRIVERS[0])]);
    for (project_name, (driver, path)) in builds {
        let project = corpus().join("builds").join(project_name);
        let name = format!("{project_name} with cuda-flux-{driver}, GPU target");
        let build = scratch(&format!("{project_name}-{driver}-gpu"));
        let configured = run_step(
            &name,
            Command::new("cmake")
                .arg("-S")
                .arg(&project)
                .arg("-B")
                .arg(&build)
                .arg(format!("-DCMAKE_CUDA_COMPILER={path}"))
                .arg("-DCMAKE_CUDA_ARCHITECTURES=70")
                .arg("-DCMAKE_BUILD_TYPE=Release")
                .env("CUDA_FLUX_TARGET", "gpu"),
        )
        .and_then(|()| {
            run_step(
                &name,
                Command::new("cmake")
                    .arg("--build")
                    .arg(&build)
                    .env("CUDA_FLUX_TARGET", "gpu"),
            )
        });
        if let Err(error) = configured {
            failures.push(error);
            continue;
        }
        let app = build.join("app");
        let elf = Command::new("cuobjdump")
            .arg("-sass")
            .arg(&app)
            .output()
            .expect("cuobjdump (CUDA toolkit; scripts/setup.sh installs it)");
        let sass = String::from_utf8_lossy(&elf.stdout);
        if !sass.contains("Function : _Z5applyiPi__cf") {
            failures.push(format!(
                "{name}: no SASS of the counting clone in {}:\n{sass}",
                app.display()
            ));
            continue;
        }
        match run(&app, &build) {
            Ok((output, profile)) => {
                let text = witnesses::text(&output);
                if !text.contains("cudaErrorNoDevice")
                    && !text.contains("cudaErrorInsufficientDriver")
                {
                    if let Err(error) = check_witness(&name, &output, profile.as_ref()) {
                        failures.push(error);
                    }
                }
            }
            Err(error) => failures.push(error),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn units_compiled_by_the_real_nvcc_join_the_device_link_through_their_ptx() {
    // `nvcc -dc` (11.8, default architecture) keeps compute_52 PTX, compressed, in its
    // relocatable fat binary. The driver reads it (checked against cuobjdump's), and a device
    // function of such a unit, called by a cuda-flux unit's kernel, is counted exactly, by
    // cuda-flux-nvcc's final link and by `-dlink` with a g++ final link. A unit without PTX is
    // refused in one line naming it; a unit of the real nvcc with a kernel is linked and its
    // kernel said to run uncounted.
    let project = corpus().join("builds/cmake-separable");
    let include = format!("-I{}", corpus().display());
    let nvcc = env!("CARGO_BIN_EXE_cuda-flux-nvcc");
    let dir = scratch("separable-real-nvcc");
    let step = |name: &str, command: &mut Command| -> Output {
        let output = command
            .current_dir(&dir)
            .env("CUDA_FLUX_TARGET", "cpu")
            .output()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            output.status.success(),
            "{name}: {}",
            witnesses::text(&output)
        );
        output
    };
    step(
        "nvcc -dc scale.cu",
        Command::new("nvcc")
            .args(["-O2", "-dc", &include])
            .arg(project.join("scale.cu"))
            .args(["-o", "scale.o"]),
    );
    step(
        "objcopy",
        Command::new("objcopy").args([
            "-O",
            "binary",
            "--only-section=__nv_relfatbin",
            "scale.o",
            "scale.fatbin",
        ]),
    );
    let entries =
        wrapper::driver::fatbin::ptx_entries(&std::fs::read(dir.join("scale.fatbin")).unwrap())
            .unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].arch, 52);
    let cuobjdump = step(
        "cuobjdump -ptx",
        Command::new("cuobjdump").args(["-ptx", "scale.o"]),
    );
    let listing = String::from_utf8_lossy(&cuobjdump.stdout);
    let ptx = entries[0].ptx.trim();
    assert!(
        ptx.starts_with(".version") && ptx.contains("_Z5scalei"),
        "{ptx}"
    );
    assert!(listing.contains(ptx), "cuobjdump's PTX differs:\n{listing}");

    let keep = dir.join("keep");
    step(
        "cuda-flux-nvcc -dc main.cu",
        Command::new(nvcc)
            .args(["-O2", "-arch=sm_70", "-dc", &include])
            .arg(project.join("main.cu"))
            .args(["-o", "main.o"]),
    );
    step(
        "cuda-flux-nvcc link",
        Command::new(nvcc)
            .args(["-arch=sm_70", "main.o", "scale.o", "-o", "app-nvcc"])
            .env("CUDA_FLUX_KEEP", &keep),
    );
    step(
        "cuda-flux-nvcc -dlink",
        Command::new(nvcc).args([
            "-arch=sm_70",
            "-dlink",
            "main.o",
            "scale.o",
            "-o",
            "dlink.o",
        ]),
    );
    step(
        "g++ link",
        Command::new("g++")
            .args(["main.o", "scale.o", "dlink.o", "-o", "app-gxx"])
            .args(["-L/usr/lib/x86_64-linux-gnu", "-lcudart"]),
    );
    let mut failures = Vec::new();
    for program in ["app-nvcc", "app-gxx"] {
        let result = run(&dir.join(program), &dir)
            .and_then(|(output, profile)| check_witness(program, &output, profile.as_ref()));
        if let Err(error) = result {
            failures.push(error);
        }
    }
    for ptx in [
        "cuda_flux_device_link.sm_70.ptx",
        "cuda_flux_device_link.sm_70.instrumented.ptx",
    ] {
        if let Err(error) = test_support::ptxas(&keep.join(ptx), "sm_70") {
            failures.push(error);
        }
    }
    // The GPU target: the linked module's counting clone is in the program.
    let gpu = Command::new(nvcc)
        .args(["-O2", "-arch=sm_70", "-dc", &include])
        .arg(project.join("main.cu"))
        .args(["-o", "main-gpu.o"])
        .current_dir(&dir)
        .env("CUDA_FLUX_TARGET", "gpu")
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(nvcc)
            .args(["-arch=sm_70", "main-gpu.o", "scale.o", "-o", "app-gpu"])
            .current_dir(&dir)
            .env("CUDA_FLUX_TARGET", "gpu")
            .status()
            .is_ok_and(|s| s.success());
    let sass = Command::new("cuobjdump")
        .args(["-sass", "app-gpu"])
        .current_dir(&dir)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if !gpu || !sass.contains("Function : _Z5applyiPi__cf") {
        failures.push(format!("GPU target: built {gpu}, SASS:\n{sass}"));
    }

    // Without PTX (SASS only): refused, naming the object.
    step(
        "nvcc -dc, SASS only",
        Command::new("nvcc")
            .args([
                "-O2",
                "-dc",
                "-gencode",
                "arch=compute_70,code=sm_70",
                &include,
            ])
            .arg(project.join("scale.cu"))
            .args(["-o", "scale-sass.o"]),
    );
    let refused = Command::new(nvcc)
        .args(["-arch=sm_70", "main.o", "scale-sass.o", "-o", "app-refused"])
        .current_dir(&dir)
        .env("CUDA_FLUX_TARGET", "cpu")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    if refused.status.success()
        || stderr.lines().count() != 1
        || !stderr.contains("scale-sass.o: separately compiled by another compiler, with no PTX")
    {
        failures.push(format!("a unit without PTX: {stderr}"));
    }

    // The kernel's unit by the real nvcc: linked, runs, its kernel said to run uncounted.
    step(
        "nvcc -dc main.cu",
        Command::new("nvcc")
            .args(["-O2", "-dc", &include])
            .arg(project.join("main.cu"))
            .args(["-o", "main-nvcc.o"]),
    );
    step(
        "cuda-flux-nvcc -dc scale.cu",
        Command::new(nvcc)
            .args(["-O2", "-arch=sm_70", "-dc", &include])
            .arg(project.join("scale.cu"))
            .args(["-o", "scale-cf.o"]),
    );
    let linked = step(
        "cuda-flux-nvcc link, foreign kernel",
        Command::new(nvcc).args([
            "-arch=sm_70",
            "main-nvcc.o",
            "scale-cf.o",
            "-o",
            "app-foreign",
        ]),
    );
    let warning = String::from_utf8_lossy(&linked.stderr);
    if warning.matches("run uncounted: apply(int, int*)").count() != 1 {
        failures.push(format!("a kernel of the real nvcc: {warning}"));
    }
    match run(&dir.join("app-foreign"), &dir) {
        Ok((output, _)) if witnesses::text(&output).contains("result: PASS") => {}
        Ok((output, _)) => failures.push(format!("app-foreign: {}", witnesses::text(&output))),
        Err(error) => failures.push(error),
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
