//! Keeping the counting clones from lowering occupancy.
//!
//! A counting clone needs a few registers more than its kernel: the bank's base address, the
//! lanes-up-to-here mask and the per-lane counters of its register-counted loops live through
//! it. Where that takes the clone into the next register allocation unit, fewer of its CTAs may
//! fit on an SM than of the original's, and a kernel that runs at a lower occupancy is not the
//! kernel the user profiles. So the GPU build holds each such clone to the registers that cost
//! it no occupancy, with `.maxnreg`, read from what ptxas says it used (`ptxas -v`):
//!
//! 1. assemble the instrumented PTX once, with `-v`;
//! 2. give each clone whose register count exceeds its [`register_limit`] a `.maxnreg` of that
//!    limit, and assemble again;
//! 3. keep a limit only where ptxas met it without spilling more than the uncapped clone and
//!    the original did; otherwise the clone keeps its registers (and may lose occupancy,
//!    [`Fitted::Spills`] says so), and the PTX is assembled once more.
//!
//! The limit does not depend on the block size: registers are allocated per warp in units of
//! [`ALLOCATION_UNIT`] registers per thread, and a count no higher than the original's,
//! rounded up to that unit, occupies exactly what the original does for every launch shape.
//! Below [`free_registers`] registers do not limit occupancy at all, so a clone may use that
//! many whatever its original uses (ptxas also refuses a `.maxnreg` below 24).

use std::collections::HashMap;
use std::process::Command;

use ptx_lexer::{FunctionAttribute, Module};

/// Registers are allocated to warps in units of 256, 8 per thread.
pub const ALLOCATION_UNIT: u32 = 8;

/// What `ptxas -v` reports for one entry function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EntryResources {
    pub registers: u32,
    pub spill_store_bytes: u64,
    pub spill_load_bytes: u64,
}

impl EntryResources {
    /// Whether this spills more than both `a` and `b` (stores or loads).
    fn spills_more_than(&self, a: &EntryResources, b: &EntryResources) -> bool {
        self.spill_store_bytes > a.spill_store_bytes.max(b.spill_store_bytes)
            || self.spill_load_bytes > a.spill_load_bytes.max(b.spill_load_bytes)
    }
}

/// Per entry function (kernel), what `ptxas -v` printed (its stdout and stderr together):
/// `Compiling entry function 'K' for 'sm_90'`, then `N bytes stack frame, S bytes spill
/// stores, L bytes spill loads` under `Function properties for K`, then `Used R registers`.
/// Device functions, listed only by their properties, are left out.
pub fn parse_ptxas_verbose(text: &str) -> HashMap<String, EntryResources> {
    let mut entries = HashMap::new();
    let mut compiling: Option<String> = None;
    let mut properties_of: Option<String> = None;
    let mut spills: HashMap<String, (u64, u64)> = HashMap::new();
    for line in text.lines() {
        if let Some(name) = quoted_after(line, "Compiling entry function '") {
            compiling = Some(name.to_string());
        } else if let Some(rest) = after(line, "Function properties for ") {
            properties_of = Some(rest.trim().to_string());
        } else if line.contains("bytes spill stores") {
            if let Some(name) = properties_of.take() {
                let stores = number_before(line, " bytes spill stores").unwrap_or(0);
                let loads = number_before(line, " bytes spill loads").unwrap_or(0);
                spills.insert(name, (stores, loads));
            }
        } else if let Some(registers) = number_before(line, " registers") {
            if !line.contains("Used ") {
                continue;
            }
            if let Some(name) = compiling.take() {
                let (spill_store_bytes, spill_load_bytes) =
                    spills.get(&name).copied().unwrap_or((0, 0));
                entries.insert(
                    name,
                    EntryResources {
                        registers: u32::try_from(registers).unwrap_or(u32::MAX),
                        spill_store_bytes,
                        spill_load_bytes,
                    },
                );
            }
        }
    }
    entries
}

fn after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    line.find(marker).map(|at| &line[at + marker.len()..])
}

fn quoted_after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let rest = after(line, marker)?;
    rest.find('\'').map(|end| &rest[..end])
}

/// The decimal number that ends right before `suffix` in `line`.
fn number_before(line: &str, suffix: &str) -> Option<u64> {
    let head = &line[..line.find(suffix)?];
    let start = head
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    head[start..].parse().ok()
}

/// `registers` rounded up to the allocation unit: what a thread really occupies.
pub fn allocated(registers: u32) -> u32 {
    registers.div_ceil(ALLOCATION_UNIT) * ALLOCATION_UNIT
}

/// The registers per thread up to which registers never limit occupancy on `arch`
/// (`sm_NN`): 64K registers per SM shared by as many warps as the SM holds at most (64; 48 on
/// sm_86, sm_87, sm_89 and sm_120; 32 on sm_75). Unknown architectures get the smallest, 32.
pub fn free_registers(arch: &str) -> u32 {
    let max_warps = match arch.trim_start_matches("sm_").trim_end_matches(['a', 'f']) {
        "75" => 32,
        "86" | "87" | "89" | "120" | "121" => 48,
        _ => 64,
    };
    // 65536 / (32 lanes x warps), rounded down to the allocation unit.
    (65536 / (32 * max_warps)) / ALLOCATION_UNIT * ALLOCATION_UNIT
}

/// The registers a clone may use without lowering occupancy below its original's on `arch`.
pub fn register_limit(original: &EntryResources, arch: &str) -> u32 {
    allocated(original.registers).max(free_registers(arch))
}

/// What fitting did to one clone whose registers exceeded its [`register_limit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fitted {
    /// Held to `limit` registers: ptxas now uses `registers` (it used `before`).
    Held {
        clone: String,
        before: u32,
        limit: u32,
        registers: u32,
    },
    /// Left with its `registers`: holding it to `limit` spilled `spill_store_bytes` (the
    /// original and the uncapped clone spill less), so its occupancy may be lower than the
    /// original's for some launch shapes.
    Spills {
        clone: String,
        registers: u32,
        limit: u32,
        spill_store_bytes: u64,
    },
}

impl std::fmt::Display for Fitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fitted::Held {
                clone,
                before,
                limit,
                registers,
            } => write!(
                f,
                "{clone}: held to {limit} registers (.maxnreg), uses {registers} instead of \
                 {before}: the original's occupancy"
            ),
            Fitted::Spills {
                clone,
                registers,
                limit,
                spill_store_bytes,
            } => write!(
                f,
                "{clone}: keeps {registers} registers (holding it to {limit} would spill \
                 {spill_store_bytes} bytes); its occupancy may be lower than the original's"
            ),
        }
    }
}

/// The outcome of [`fit_clone_registers`]: the notes, and what the last (kept) assembly
/// printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    pub fitted: Vec<Fitted>,
    pub ptxas_output: String,
}

/// Holds each clone of `pairs` (original, clone) in `module` to its [`register_limit`] on
/// `arch`, as the module doc says. `assemble` writes and assembles the module as it stands
/// with `ptxas -v`, returning what ptxas printed, or its error output when it failed. On
/// `Err` the first assembly failed (nothing was changed); the module is left as last assembled.
pub fn fit_clone_registers(
    module: &mut Module,
    pairs: &[(String, String)],
    arch: &str,
    assemble: &mut dyn FnMut(&Module) -> Result<String, String>,
) -> Result<Fit, String> {
    let first = assemble(module)?;
    let uncapped = parse_ptxas_verbose(&first);
    // (clone, original's resources, uncapped clone's resources, limit, attributes before)
    let mut capped = Vec::new();
    for (original, clone) in pairs {
        let (Some(o), Some(c)) = (uncapped.get(original), uncapped.get(clone)) else {
            continue;
        };
        let limit = register_limit(o, arch);
        if c.registers <= limit {
            continue;
        }
        let Some(function) = module.function_mut(clone) else {
            continue;
        };
        let before = function.attributes().to_vec();
        let mut attributes: Vec<FunctionAttribute> = before
            .iter()
            .filter(|a| a.name != "maxnreg")
            .cloned()
            .collect();
        attributes.push(FunctionAttribute {
            name: "maxnreg".into(),
            text: format!(".maxnreg {limit}"),
        });
        function.set_attributes(attributes);
        capped.push((clone.clone(), *o, *c, limit, before));
    }
    if capped.is_empty() {
        return Ok(Fit {
            fitted: Vec::new(),
            ptxas_output: first,
        });
    }
    let restore = |module: &mut Module, clone: &str, attributes: &[FunctionAttribute]| {
        if let Some(function) = module.function_mut(clone) {
            function.set_attributes(attributes.to_vec());
        }
    };
    let second = match assemble(module) {
        Ok(output) => output,
        Err(_) => {
            // ptxas took the PTX without the limits: give them up rather than the build.
            for (clone, .., before) in &capped {
                restore(module, clone, before);
            }
            let output = assemble(module)?;
            return Ok(Fit {
                fitted: Vec::new(),
                ptxas_output: output,
            });
        }
    };
    let held = parse_ptxas_verbose(&second);
    let mut fitted = Vec::new();
    let mut released = false;
    for (clone, original, uncapped_clone, limit, before) in &capped {
        let Some(now) = held.get(clone) else {
            continue;
        };
        if now.spills_more_than(original, uncapped_clone) {
            restore(module, clone, before);
            released = true;
            fitted.push(Fitted::Spills {
                clone: clone.clone(),
                registers: uncapped_clone.registers,
                limit: *limit,
                spill_store_bytes: now.spill_store_bytes,
            });
        } else {
            fitted.push(Fitted::Held {
                clone: clone.clone(),
                before: uncapped_clone.registers,
                limit: *limit,
                registers: now.registers,
            });
        }
    }
    let ptxas_output = if released { assemble(module)? } else { second };
    Ok(Fit {
        fitted,
        ptxas_output,
    })
}

/// The arguments of a ptxas command line that fitting needs (`cuda-flux-ptxas`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxasArgs {
    /// Index of the input PTX file among the arguments: the last one ending in `.ptx` that is
    /// not an option's value.
    pub input: usize,
    /// `--gpu-name` / `-arch`, in either form (`-arch sm_90`, `-arch=sm_90`).
    pub arch: Option<String>,
    /// Whether ptxas was asked to print what it used (`-v`, `--verbose`).
    pub verbose: bool,
}

impl PtxasArgs {
    /// `None` without an input PTX file.
    pub fn find(args: &[String]) -> Option<PtxasArgs> {
        // ptxas's options that take a separate value (the others are flags or use `=`).
        const VALUED: &[&str] = &[
            "-o",
            "--output-file",
            "-arch",
            "--gpu-name",
            "-O",
            "--opt-level",
            "-maxrregcount",
            "--maxrregcount",
            "-e",
            "--entry",
            "-h",
            "--machine",
            "--options-file",
            "-optf",
            "-def-load-cache",
            "--def-load-cache",
            "-def-store-cache",
            "--def-store-cache",
        ];
        let (mut input, mut arch, mut verbose) = (None, None, false);
        let mut i = 0;
        while i < args.len() {
            let arg = args[i].as_str();
            if arg == "-v" || arg == "--verbose" {
                verbose = true;
            } else if let Some(value) = ["-arch=", "--gpu-name="]
                .iter()
                .find_map(|p| arg.strip_prefix(p))
            {
                arch = Some(value.to_string());
            } else if VALUED.contains(&arg) {
                if arg == "-arch" || arg == "--gpu-name" {
                    arch = args.get(i + 1).cloned();
                }
                i += 1;
            } else if !arg.starts_with('-') && arg.ends_with(".ptx") {
                input = Some(i);
            }
            i += 1;
        }
        Some(PtxasArgs {
            input: input?,
            arch,
            verbose,
        })
    }
}

/// Runs `command`, a ptxas given `-v`: what it printed (stdout, then stderr) when it succeeds;
/// when it fails, its exit status and what it printed but the `-v` report (which comes first on
/// stderr), so that the first line is its first error.
pub fn run_ptxas(command: &mut Command) -> std::io::Result<Result<String, (i32, String)>> {
    let output = command.output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(if output.status.success() {
        Ok(text)
    } else {
        Err((output.status.code().unwrap_or(1), without_info(&text)))
    })
}

/// The lines of ptxas's output a run without `-v` would have printed (warnings and errors).
pub fn without_info(output: &str) -> String {
    output
        .lines()
        .filter(|l| !l.starts_with("ptxas info") && !l.starts_with("    "))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERBOSE: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1kPi__cf' for 'sm_90'
ptxas info    : Function properties for _Z1kPi__cf
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 37 registers, 380 bytes cmem[0]
ptxas info    : Function properties for helper
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z1kPi' for 'sm_90'
ptxas info    : Function properties for _Z1kPi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 31 registers, 1024 bytes smem, 364 bytes cmem[0]
";

    #[test]
    fn parses_registers_and_spills_per_entry() {
        let entries = parse_ptxas_verbose(VERBOSE);
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert_eq!(
            entries["_Z1kPi__cf"],
            EntryResources {
                registers: 37,
                spill_store_bytes: 4,
                spill_load_bytes: 12
            }
        );
        assert_eq!(entries["_Z1kPi"].registers, 31);
        assert_eq!(entries["_Z1kPi"].spill_store_bytes, 0);
    }

    #[test]
    fn limits_follow_the_allocation_unit_and_the_free_registers() {
        assert_eq!(allocated(31), 32);
        assert_eq!(allocated(32), 32);
        assert_eq!(allocated(33), 40);
        assert_eq!(free_registers("sm_90"), 32);
        assert_eq!(free_registers("sm_90a"), 32);
        assert_eq!(free_registers("sm_86"), 40);
        assert_eq!(free_registers("sm_75"), 64);
        let with = |registers| EntryResources {
            registers,
            ..EntryResources::default()
        };
        assert_eq!(register_limit(&with(14), "sm_70"), 32);
        assert_eq!(register_limit(&with(41), "sm_70"), 48);
        assert_eq!(register_limit(&with(41), "sm_75"), 64);
    }

    /// The occupancy the limit protects, by the CUDA occupancy calculator's register rule: for
    /// every block size, a clone within its limit fits as many CTAs per SM as the original.
    #[test]
    fn a_clone_within_its_limit_keeps_the_originals_occupancy_for_every_block_size() {
        for (arch, max_warps) in [("sm_70", 64u32), ("sm_86", 48), ("sm_75", 32)] {
            let ctas = |registers: u32, warps: u32| {
                let by_registers = 65536 / (allocated(registers) * 32) / warps;
                by_registers.min(max_warps / warps)
            };
            for original in 1..=255u32 {
                let limit = register_limit(
                    &EntryResources {
                        registers: original,
                        ..EntryResources::default()
                    },
                    arch,
                )
                .min(255);
                for warps in 1..=32u32 {
                    assert!(
                        ctas(limit, warps) >= ctas(original, warps),
                        "{arch}: {original} registers, limit {limit}, {warps} warps"
                    );
                }
            }
        }
    }

    fn module_with_clone() -> Module {
        ptx_lexer::parse(
            ".version 7.8\n.target sm_90\n.address_size 64\n\
             .visible .entry k()\n{\n\tret;\n}\n\
             .visible .entry k__cf()\n.maxnreg 200\n{\n\tret;\n}\n"
                .to_string(),
        )
        .unwrap()
    }

    fn verbose(entries: &[(&str, u32, u64)]) -> String {
        entries
            .iter()
            .map(|(name, registers, spills)| {
                format!(
                    "ptxas info    : Compiling entry function '{name}' for 'sm_90'\n\
                     ptxas info    : Function properties for {name}\n    \
                     0 bytes stack frame, {spills} bytes spill stores, {spills} bytes spill loads\n\
                     ptxas info    : Used {registers} registers, 364 bytes cmem[0]\n"
                )
            })
            .collect()
    }

    fn maxnreg(module: &Module, name: &str) -> Vec<String> {
        module
            .function(name)
            .unwrap()
            .attributes()
            .iter()
            .map(|a| a.text.clone())
            .collect()
    }

    /// A stand-in for ptxas: the clone uses `free` registers and spills nothing when unlimited,
    /// and under a `.maxnreg` limit uses it, spilling `spills_when_held` bytes.
    fn fake_ptxas(
        free: u32,
        spills_when_held: u64,
    ) -> impl FnMut(&Module) -> Result<String, String> {
        move |module: &Module| {
            let limit = maxnreg(module, "k__cf").iter().find_map(|t| {
                t.strip_prefix(".maxnreg ")
                    .and_then(|n| n.parse::<u32>().ok())
            });
            let clone = match limit {
                Some(limit) if limit < free => (limit, spills_when_held),
                _ => (free, 0),
            };
            Ok(verbose(&[("k", 30, 0), ("k__cf", clone.0, clone.1)]))
        }
    }

    #[test]
    fn a_clone_over_its_limit_is_held_to_it_when_that_spills_nothing() {
        let mut module = module_with_clone();
        let mut runs = 0;
        let mut ptxas = fake_ptxas(37, 0);
        let mut counting = |m: &Module| {
            runs += 1;
            ptxas(m)
        };
        let pairs = [("k".to_string(), "k__cf".to_string())];
        let fit = fit_clone_registers(&mut module, &pairs, "sm_90", &mut counting).unwrap();
        assert_eq!(
            fit.fitted,
            [Fitted::Held {
                clone: "k__cf".into(),
                before: 37,
                limit: 32,
                registers: 32
            }]
        );
        assert_eq!(runs, 2);
        // The clone's own `.maxnreg 200` is replaced, not doubled.
        assert_eq!(maxnreg(&module, "k__cf"), [".maxnreg 32"]);
        assert!(fit.ptxas_output.contains("Used 32 registers"));
    }

    #[test]
    fn a_clone_that_would_spill_keeps_its_registers() {
        let mut module = module_with_clone();
        let pairs = [("k".to_string(), "k__cf".to_string())];
        let fit =
            fit_clone_registers(&mut module, &pairs, "sm_90", &mut fake_ptxas(37, 8)).unwrap();
        assert_eq!(
            fit.fitted,
            [Fitted::Spills {
                clone: "k__cf".into(),
                registers: 37,
                limit: 32,
                spill_store_bytes: 8
            }]
        );
        assert_eq!(maxnreg(&module, "k__cf"), [".maxnreg 200"], "restored");
        assert!(fit.ptxas_output.contains("Used 37 registers"));
    }

    #[test]
    fn a_clone_within_its_limit_is_left_alone() {
        let mut module = module_with_clone();
        let pairs = [("k".to_string(), "k__cf".to_string())];
        let fit =
            fit_clone_registers(&mut module, &pairs, "sm_90", &mut fake_ptxas(32, 0)).unwrap();
        assert!(fit.fitted.is_empty());
        assert_eq!(maxnreg(&module, "k__cf"), [".maxnreg 200"]);
    }

    #[test]
    fn ptxas_command_lines_give_their_input_architecture_and_verbosity() {
        let args = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            PtxasArgs::find(&args("-v -arch=sm_90 in.ptx -o out.ptx.cubin")),
            Some(PtxasArgs {
                input: 2,
                arch: Some("sm_90".into()),
                verbose: true
            })
        );
        assert_eq!(
            PtxasArgs::find(&args("--gpu-name sm_70 -O3 --output-file x.ptx a.ptx")),
            Some(PtxasArgs {
                input: 5,
                arch: Some("sm_70".into()),
                verbose: false
            })
        );
        assert_eq!(PtxasArgs::find(&args("-o out.ptx --version")), None);
        let output =
            "ptxas info    : Used 3 registers\n    0 bytes stack frame\nptxas warning : x\n";
        assert_eq!(without_info(output), "ptxas warning : x\n");
    }

    #[test]
    fn a_failed_ptxas_run_gives_its_status_and_its_errors_first() {
        let mut failing = Command::new("sh");
        failing.args([
            "-c",
            "echo 'ptxas info    : 0 bytes gmem' >&2; \
             echo 'ptxas fatal   : Unresolved extern function' >&2; exit 3",
        ]);
        assert_eq!(
            run_ptxas(&mut failing).unwrap(),
            Err((
                3,
                "ptxas fatal   : Unresolved extern function\n".to_string()
            ))
        );
        let mut passing = Command::new("sh");
        passing.args([
            "-c",
            "echo out; echo 'ptxas info    : Used 3 registers' >&2",
        ]);
        assert_eq!(
            run_ptxas(&mut passing).unwrap(),
            Ok("out\nptxas info    : Used 3 registers\n".to_string())
        );
    }

    #[test]
    fn a_failed_first_assembly_is_the_error() {
        let mut module = module_with_clone();
        let pairs = [("k".to_string(), "k__cf".to_string())];
        let mut failing = |_: &Module| Err("ptxas fatal".to_string());
        assert_eq!(
            fit_clone_registers(&mut module, &pairs, "sm_90", &mut failing),
            Err("ptxas fatal".to_string())
        );
    }
}
