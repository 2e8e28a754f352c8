//! The host pass: on clang's host IR of a CUDA translation unit, register each kernel's counting
//! clone with the CUDA runtime next to the original, hand the runtime each kernel's snapshot, and
//! route every `cudaLaunchKernel` (also its per-thread-stream and cooperative forms, see
//! [`LAUNCH_ROUTES`]), `cudaDeviceReset` (and `cudaThreadExit`) and the per-function settings
//! ([`FUNC_SETTING_ROUTES`]: `cudaFuncSetAttribute` and the cache and shared-memory configs,
//! which the runtime repeats on the clone) through the host runtime.
//!
//! Clang registers kernels in `__cuda_module_ctor`: `__cudaRegisterFatBinary` gives the module
//! handle, `__cuda_register_globals(handle)` makes one `__cudaRegisterFunction(handle, stub,
//! name, name, -1, ...)` per kernel, then `__cudaRegisterFatBinaryEnd(handle)`. The pass adds its
//! registrations at the end of `__cuda_register_globals`, or, where optimisation inlined it,
//! before the end call in the constructor.
//! The stub is the kernel's handle on the host; launches pass it to `cudaLaunchKernel`, also
//! when the launch is written in another translation unit (it calls the stub, which is here).

use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::targets::{CodeModel, FileType, InitializationConfig, RelocMode, Target};
use inkwell::values::{BasicValue, BasicValueEnum, CallSiteValue, FunctionValue, PointerValue};
use inkwell::{AddressSpace, OptimizationLevel};

use crate::PassError;

/// The runtime's launch entry point: same signature as `cudaLaunchKernel`.
pub const LAUNCH_KERNEL: &str = "__cuda_flux_launch_kernel";
/// The runtime's replacement of `cudaLaunchKernel_ptsz` (per-thread default stream).
pub const LAUNCH_KERNEL_PTSZ: &str = "__cuda_flux_launch_kernel_ptsz";
/// The runtime's replacement of `cudaLaunchCooperativeKernel`.
pub const LAUNCH_COOPERATIVE_KERNEL: &str = "__cuda_flux_launch_cooperative_kernel";
/// The runtime's replacement of `cudaLaunchCooperativeKernel_ptsz`.
pub const LAUNCH_COOPERATIVE_KERNEL_PTSZ: &str = "__cuda_flux_launch_cooperative_kernel_ptsz";
/// The runtime's replacement of `cudaLaunchKernelExC` (same signature).
pub const LAUNCH_KERNEL_EX_C: &str = "__cuda_flux_launch_kernel_ex_c";
/// The runtime's replacement of `cudaLaunchKernelExC_ptsz`.
pub const LAUNCH_KERNEL_EX_C_PTSZ: &str = "__cuda_flux_launch_kernel_ex_c_ptsz";
/// The CUDA launch calls the pass routes to the runtime, and their replacements (each with the
/// signature of the call it replaces).
pub const LAUNCH_ROUTES: [(&str, &str); 6] = [
    ("cudaLaunchKernel", LAUNCH_KERNEL),
    ("cudaLaunchKernel_ptsz", LAUNCH_KERNEL_PTSZ),
    ("cudaLaunchCooperativeKernel", LAUNCH_COOPERATIVE_KERNEL),
    (
        "cudaLaunchCooperativeKernel_ptsz",
        LAUNCH_COOPERATIVE_KERNEL_PTSZ,
    ),
    ("cudaLaunchKernelExC", LAUNCH_KERNEL_EX_C),
    ("cudaLaunchKernelExC_ptsz", LAUNCH_KERNEL_EX_C_PTSZ),
];
/// The per-function settings the pass routes to the runtime (which repeats them on the
/// kernel's counting clone), and their replacements (same signatures).
pub const FUNC_SETTING_ROUTES: [(&str, &str); 3] = [
    ("cudaFuncSetAttribute", "__cuda_flux_func_set_attribute"),
    (
        "cudaFuncSetCacheConfig",
        "__cuda_flux_func_set_cache_config",
    ),
    (
        "cudaFuncSetSharedMemConfig",
        "__cuda_flux_func_set_shared_mem_config",
    ),
];
/// The runtime's replacement of `cudaDeviceReset` (writes the profile first).
pub const DEVICE_RESET: &str = "__cuda_flux_device_reset";
/// The calls that reset the device, all routed to [`DEVICE_RESET`]: `cudaDeviceReset` and its
/// deprecated form `cudaThreadExit` (same signature and effect), which real suites still call;
/// reset by either, the device would lose the counts of the launches not yet read back.
pub const DEVICE_RESET_ROUTES: [&str; 2] = ["cudaDeviceReset", "cudaThreadExit"];
/// The runtime's registration entry point for one kernel and one architecture.
pub const REGISTER_KERNEL: &str = "__cuda_flux_register_kernel";

/// What the device side produced for one kernel of the translation unit.
#[derive(Debug, Clone)]
pub struct KernelRegistration {
    /// The kernel's device name (mangled), as clang registers it.
    pub kernel: String,
    /// The counting clone's device name; `None` if the kernel is not instrumented.
    pub clone: Option<String>,
    /// One snapshot (JSON) per architecture the kernel was compiled for.
    pub snapshots: Vec<String>,
}

/// What the host pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostReport {
    /// Kernels whose registration was extended (clone and snapshots).
    pub registered: Vec<String>,
    /// Kernels the device side described but the host IR does not register.
    pub missing: Vec<String>,
    /// Calls rerouted to the runtime.
    pub launches_rerouted: usize,
}

fn pass_error(message: impl Into<String>) -> PassError {
    PassError::Host(message.into())
}

/// Reads the NUL-terminated string held by the global `pointer` points at, if it is one
/// (clang's kernel-name constants are unnamed globals, so they are found by address).
fn string_constant<'ctx>(module: &Module<'ctx>, pointer: PointerValue<'ctx>) -> Option<String> {
    let global = module
        .get_globals()
        .find(|g| g.as_pointer_value() == pointer)?;
    let BasicValueEnum::ArrayValue(array) = global.get_initializer()? else {
        return None;
    };
    if !array.is_const_string() {
        return None;
    }
    let bytes = array.get_string_constant()?.to_bytes();
    std::str::from_utf8(bytes).ok().map(str::to_string)
}

fn calls_to<'ctx>(function: FunctionValue<'ctx>, callee: &str) -> Vec<CallSiteValue<'ctx>> {
    let mut calls = Vec::new();
    for block in function.get_basic_block_iter() {
        for instruction in block.get_instructions() {
            let Ok(call) = CallSiteValue::try_from(instruction) else {
                continue;
            };
            // The called value is a call's last operand; for a direct call, the function.
            let called = instruction
                .get_operand(instruction.get_num_operands().saturating_sub(1))
                .and_then(|o| o.left());
            if let Some(BasicValueEnum::PointerValue(f)) = called {
                if f.get_name().to_bytes() == callee.as_bytes() {
                    calls.push(call);
                }
            }
        }
    }
    calls
}

/// Argument `index` of a call.
fn argument<'ctx>(call: CallSiteValue<'ctx>, index: u32) -> Option<BasicValueEnum<'ctx>> {
    instruction_of(call)?.get_operand(index)?.left()
}

/// Replaces every use of function `from` by `to` (declared with `from`'s type if absent).
/// Returns the number of call sites rerouted.
fn reroute<'ctx>(module: &Module<'ctx>, from: &str, to: &str) -> usize {
    let Some(original) = module.get_function(from) else {
        return 0;
    };
    let calls = count_call_uses(module, original);
    let replacement = module
        .get_function(to)
        .unwrap_or_else(|| module.add_function(to, original.get_type(), Some(Linkage::External)));
    original
        .as_global_value()
        .as_pointer_value()
        .replace_all_uses_with(replacement.as_global_value().as_pointer_value());
    calls
}

fn count_call_uses<'ctx>(module: &Module<'ctx>, target: FunctionValue<'ctx>) -> usize {
    module
        .get_functions()
        .map(|f| calls_to(f, target.get_name().to_str().unwrap_or("")).len())
        .sum()
}

/// Routes the launches, `cudaDeviceReset`/`cudaThreadExit` and the per-function settings of `module` to the
/// runtime; returns the number of launch call sites rerouted.
pub fn route_calls(module: &Module<'_>) -> usize {
    let launches = LAUNCH_ROUTES
        .iter()
        .map(|(from, to)| reroute(module, from, to))
        .sum();
    for from in DEVICE_RESET_ROUTES {
        reroute(module, from, DEVICE_RESET);
    }
    for (from, to) in FUNC_SETTING_ROUTES {
        reroute(module, from, to);
    }
    launches
}

/// The host side of a separately compiled unit (`-fgpu-rdc`): its kernels are instrumented
/// only at the device link, so the pass routes the calls ([`route_calls`]) and sends the
/// unit's kernel registrations (`__cudaRegisterFunction`, called by `__cuda_register_globals`
/// once the device link registers the linked code) to `hook`, which has the same signature and
/// lets the device link's object learn each kernel's stub. Returns the unit's module id: the
/// suffix of the `__cudaRegisterLinkedBinary_<id>` its constructor calls, if it has one.
pub fn route_separable_unit(module: &Module<'_>, hook: &str) -> Option<String> {
    route_calls(module);
    reroute(module, "__cudaRegisterFunction", hook);
    module.get_functions().find_map(|f| {
        f.get_name()
            .to_str()
            .ok()?
            .strip_prefix("__cudaRegisterLinkedBinary_")
            .map(str::to_string)
    })
}

/// Runs the host pass on `module`.
pub fn instrument_host<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    kernels: &[KernelRegistration],
) -> Result<HostReport, PassError> {
    let mut report = HostReport {
        launches_rerouted: route_calls(module),
        ..HostReport::default()
    };

    let Some(ctor) = module.get_function("__cuda_module_ctor") else {
        report.missing = kernels.iter().map(|k| k.kernel.clone()).collect();
        return Ok(report);
    };
    let register_function = module
        .get_function("__cudaRegisterFunction")
        .ok_or_else(|| pass_error("no __cudaRegisterFunction declaration"))?;
    let builder = context.create_builder();
    // Without optimisation clang keeps the registrations in `__cuda_register_globals(handle)`,
    // called from the constructor; optimised, that function is inlined into the constructor.
    let (registrations, handle) = match module.get_function("__cuda_register_globals") {
        Some(globals) => {
            let handle = globals
                .get_first_param()
                .ok_or_else(|| pass_error("__cuda_register_globals takes no handle"))?;
            let exit = globals
                .get_last_basic_block()
                .and_then(|b| b.get_terminator())
                .ok_or_else(|| pass_error("malformed __cuda_register_globals"))?;
            builder.position_before(&exit);
            (calls_to(globals, "__cudaRegisterFunction"), handle)
        }
        None => {
            let handle = calls_to(ctor, "__cudaRegisterFatBinary")
                .first()
                .and_then(|c| c.try_as_basic_value().left())
                .ok_or_else(|| pass_error("__cuda_module_ctor does not register a fat binary"))?;
            let registrations = calls_to(ctor, "__cudaRegisterFunction");
            let end = calls_to(ctor, "__cudaRegisterFatBinaryEnd");
            let at = match end.first().and_then(|c| instruction_of(*c)) {
                Some(instruction) => instruction,
                None => registrations
                    .last()
                    .and_then(|c| instruction_of(*c))
                    .and_then(|i| i.get_next_instruction())
                    .ok_or_else(|| pass_error("no kernel registrations in __cuda_module_ctor"))?,
            };
            builder.position_before(&at);
            (registrations, handle)
        }
    };

    let ptr_type = context.ptr_type(AddressSpace::default());
    let i64_type = context.i64_type();
    let register_kernel = module.get_function(REGISTER_KERNEL).unwrap_or_else(|| {
        let ty = context.void_type().fn_type(
            &[
                ptr_type.into(),
                ptr_type.into(),
                ptr_type.into(),
                i64_type.into(),
            ],
            false,
        );
        module.add_function(REGISTER_KERNEL, ty, Some(Linkage::External))
    });

    for kernel in kernels {
        let stub = registrations.iter().find_map(|call| {
            let name_arg = argument(*call, 2)?;
            let BasicValueEnum::PointerValue(name_ptr) = name_arg else {
                return None;
            };
            (string_constant(module, name_ptr).as_deref() == Some(kernel.kernel.as_str()))
                .then(|| argument(*call, 1))
                .flatten()
        });
        let Some(BasicValueEnum::PointerValue(stub)) = stub else {
            report.missing.push(kernel.kernel.clone());
            continue;
        };
        let clone_stub = match &kernel.clone {
            Some(clone) => {
                // A distinct host address stands for the clone, as the stub does for the kernel.
                let global = module.add_global(
                    context.i8_type(),
                    None,
                    &format!("__cuda_flux_stub.{clone}"),
                );
                global.set_linkage(Linkage::Private);
                global.set_initializer(&context.i8_type().const_zero());
                let stub_ptr = global.as_pointer_value();
                let name = builder
                    .build_global_string_ptr(clone, &format!("__cuda_flux_name.{clone}"))
                    .map_err(|e| pass_error(e.to_string()))?
                    .as_pointer_value();
                let null = ptr_type.const_null();
                builder
                    .build_call(
                        register_function,
                        &[
                            handle.into(),
                            stub_ptr.into(),
                            name.into(),
                            name.into(),
                            context.i32_type().const_int(u64::MAX, true).into(),
                            null.into(),
                            null.into(),
                            null.into(),
                            null.into(),
                            null.into(),
                        ],
                        "",
                    )
                    .map_err(|e| pass_error(e.to_string()))?;
                stub_ptr
            }
            None => ptr_type.const_null(),
        };
        for (i, snapshot) in kernel.snapshots.iter().enumerate() {
            let text = context.const_string(snapshot.as_bytes(), false);
            let global = module.add_global(
                text.get_type(),
                None,
                &format!("__cuda_flux_snapshot.{}.{i}", kernel.kernel),
            );
            global.set_linkage(Linkage::Private);
            global.set_constant(true);
            global.set_initializer(&text);
            builder
                .build_call(
                    register_kernel,
                    &[
                        stub.into(),
                        clone_stub.into(),
                        global.as_pointer_value().into(),
                        i64_type.const_int(snapshot.len() as u64, false).into(),
                    ],
                    "",
                )
                .map_err(|e| pass_error(e.to_string()))?;
        }
        report.registered.push(kernel.kernel.clone());
    }
    module
        .verify()
        .map_err(|e| pass_error(format!("host module does not verify: {e}")))?;
    Ok(report)
}

fn instruction_of(call: CallSiteValue<'_>) -> Option<inkwell::values::InstructionValue<'_>> {
    let value = call.try_as_basic_value();
    value
        .left()
        .and_then(|v| v.as_instruction_value())
        .or_else(|| value.right())
}

/// Emits `module` as a position-independent object file for its own (host) target.
pub fn emit_object(
    module: &Module<'_>,
    path: &std::path::Path,
    level: OptimizationLevel,
) -> Result<(), PassError> {
    Target::initialize_x86(&InitializationConfig::default());
    let triple = module.get_triple();
    let target = Target::from_triple(&triple).map_err(|e| pass_error(e.to_string()))?;
    let machine = target
        .create_target_machine(
            &triple,
            "x86-64",
            "",
            level,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| {
            pass_error(format!(
                "no target machine for {}",
                triple.as_str().to_string_lossy()
            ))
        })?;
    machine
        .write_to_file(module, FileType::Object, path)
        .map_err(|e| pass_error(format!("cannot write {}: {e}", path.display())))
}
