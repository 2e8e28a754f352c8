//! A loaded PTX module: decoded functions, module variables in host memory, per-kernel
//! layouts of shared and local memory; and kernel launches.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use ptx_lexer::{Instruction, Module};

use crate::decl::{parse_declaration, DeclSpace, InitElement};
use crate::decode::{
    decode_function, parse_immediate, DecodedFunction, LineIndex, ModuleNames, SharedVar,
    FUNCTION_ADDRESS_TAG,
};
use crate::launch::{run_grid, Launch};
use crate::memory::HostBuffer;
use crate::native::{self, Engine, NativeCode};
use crate::{Environment, LaunchConfig, LaunchStats, SimError};

/// What the CPU runtime reports for a kernel (`cudaFuncGetAttributes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInfo {
    /// Byte size of each parameter, in order.
    pub param_sizes: Vec<usize>,
    /// Static `.shared` bytes the kernel uses (module- and function-level).
    pub static_shared_bytes: usize,
    /// `.local` bytes per thread.
    pub local_bytes: usize,
    /// The architecture of the PTX (`.target sm_70` gives 70).
    pub arch: u32,
}

/// Shared memory a CTA of a GPU of the CPU target's kind may use (static plus dynamic), as on
/// compute capability 9.0 with the opt-in maximum.
const MAX_SHARED_BYTES: u64 = 227 * 1024;

/// Local memory per thread when the call graph is recursive or calls through pointers, so that
/// the stack depth is unknown.
const UNBOUNDED_STACK_BYTES: u64 = 16 * 1024;

/// Memory layout of one kernel.
#[derive(Debug, Clone)]
struct KernelLayout {
    shared_offsets: Vec<u64>,
    static_shared: u64,
    /// Alignment the dynamic shared memory starts at.
    dynamic_offset: u64,
    window: u64,
}

/// The device heap (`malloc`/`free` in kernels). Freed blocks stay allocated until the
/// program is dropped, so that a racing access through a stale pointer reads stale memory
/// instead of freed host memory.
#[derive(Default)]
struct Heap {
    live: BTreeMap<u64, HostBuffer>,
    freed: Vec<HostBuffer>,
}

/// One loaded PTX module.
pub struct Program {
    module: Module,
    pub(crate) functions: Vec<DecodedFunction>,
    /// Index in `module.functions()` of each decoded function.
    sources: Vec<usize>,
    function_index: HashMap<String, u32>,
    globals: HashMap<String, (u64, u64)>,
    memory: Option<HostBuffer>,
    pub(crate) texrefs: Vec<String>,
    layouts: HashMap<u32, KernelLayout>,
    heap: Mutex<Heap>,
    arch: u32,
    engine: Engine,
    /// Per decoded function, its native code once compiled ([`Engine::Native`] only; `None`
    /// when it has no run to translate or LLVM failed, then it is interpreted).
    native: Vec<OnceLock<Option<NativeCode>>>,
    /// Per decoded function, how far it is from being compiled ([`Engine::Native`] only).
    tiers: Vec<Tier>,
    /// The warp-instructions a function is interpreted for before it is compiled
    /// ([`Program::set_native_after`]).
    native_after: u64,
    /// Whether some function has native code ([`Program::has_native_code`]).
    any_native: AtomicBool,
}

/// A function on its way to native code: interpreted until it has done enough work that
/// LLVM's compilation is worth it (compiling every function at its first run costs short
/// programs more than the native code saves them).
#[derive(Default)]
struct Tier {
    /// Warp-instructions interpreted in the function so far, over all warps and launches.
    work: AtomicU64,
    /// Set by the one worker that compiles the function; the others interpret it meanwhile.
    claimed: AtomicBool,
}

fn unsupported(what: impl Into<String>, line: u32) -> SimError {
    SimError::Unsupported {
        what: what.into(),
        line,
    }
}

impl Program {
    /// Parses and decodes a PTX module and allocates its module variables.
    pub fn load(ptx: &str) -> Result<Program, SimError> {
        let module = ptx_lexer::parse(ptx).map_err(|e| SimError::Parse(e.to_string()))?;
        let lines = LineIndex::new(module.source());
        if module.address_size() != 64 {
            return Err(unsupported("32-bit addressing (`.address_size 32`)", 0));
        }
        let arch = module
            .target()
            .iter()
            .find_map(|t| {
                let digits: String = t
                    .strip_prefix("sm_")?
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse().ok()
            })
            .unwrap_or(0);

        // Module variables.
        let mut shared_vars: Vec<SharedVar> = Vec::new();
        let mut shared_names: HashMap<String, u32> = HashMap::new();
        let mut texrefs = Vec::new();
        let mut texref_names: HashMap<String, u32> = HashMap::new();
        let mut host_vars = Vec::new();
        let mut memory_size = 0u64;
        for (_, text) in module.variable_declarations() {
            let line = module
                .source()
                .find(text)
                .map_or(0, |o| lines.line(Some(o as u32)));
            let decl = parse_declaration(text)
                .map_err(|e| unsupported(format!("module variable: {e}"), line))?;
            match decl.space {
                DeclSpace::Global | DeclSpace::Const => {
                    if decl.external && decl.init.is_none() {
                        // Defined in another module: references fail when executed.
                        continue;
                    }
                    let offset = memory_size.next_multiple_of(decl.align);
                    memory_size = offset + decl.bytes();
                    host_vars.push((decl, offset, line));
                }
                DeclSpace::Shared => {
                    shared_names.insert(decl.name.clone(), shared_vars.len() as u32);
                    shared_vars.push(SharedVar {
                        name: decl.name.clone(),
                        align: decl.align,
                        bytes: decl.bytes(),
                        dynamic: decl.count.is_none(),
                    });
                }
                DeclSpace::Texref => {
                    texref_names.insert(decl.name.clone(), texrefs.len() as u32);
                    texrefs.push(decl.name);
                }
                DeclSpace::Local | DeclSpace::Param => {
                    return Err(unsupported(
                        format!("module-scope {:?} variable `{}`", decl.space, decl.name),
                        line,
                    ))
                }
            }
        }
        let mut memory = if host_vars.is_empty() {
            None
        } else {
            Some(HostBuffer::zeroed(memory_size as usize).ok_or_else(|| {
                unsupported(format!("{memory_size} bytes of module variables"), 0)
            })?)
        };
        let base = memory.as_ref().map_or(0, HostBuffer::address);
        let mut globals = HashMap::new();
        for (decl, offset, _) in &host_vars {
            globals.insert(decl.name.clone(), (base + offset, decl.bytes()));
        }

        // Functions: definitions get indices; declarations may be builtins.
        let mut function_index = HashMap::new();
        let mut externs = HashMap::new();
        let mut sources = Vec::new();
        for (i, f) in module.functions().enumerate() {
            if f.is_definition() {
                function_index.insert(f.name().to_string(), sources.len() as u32);
                sources.push(i);
            }
        }
        for f in module.functions() {
            if !f.is_definition() && !function_index.contains_key(f.name()) {
                externs.insert(f.name().to_string(), ());
            }
        }

        // Initializers, now that every address is known.
        if let Some(memory) = memory.as_mut() {
            for (decl, offset, line) in &host_vars {
                let Some(init) = &decl.init else { continue };
                let scalar = decl.scalar_bytes;
                for (i, element) in init.iter().enumerate() {
                    let value = match element {
                        InitElement::Literal(text) => {
                            let operand = if text.contains(['.', 'e', 'E'])
                                && !text.starts_with("0x")
                                || text.starts_with("0f")
                                || text.starts_with("0d")
                            {
                                ptx_lexer::Operand::Float(text.as_str().into())
                            } else {
                                ptx_lexer::Operand::Integer(text.as_str().into())
                            };
                            parse_immediate(&operand, decl.element_kind).ok_or_else(|| {
                                unsupported(
                                    format!("initializer `{text}` of `{}`", decl.name),
                                    *line,
                                )
                            })?
                        }
                        InitElement::Address { symbol, offset } => {
                            let target = if let Some(&(a, _)) = globals.get(symbol) {
                                a
                            } else if let Some(&f) = function_index.get(symbol) {
                                FUNCTION_ADDRESS_TAG | u64::from(f)
                            } else {
                                return Err(unsupported(
                                    format!(
                                        "address of `{symbol}` in the initializer of `{}`",
                                        decl.name
                                    ),
                                    *line,
                                ));
                            };
                            if scalar != 8 {
                                return Err(unsupported(
                                    format!(
                                        "address in a {scalar}-byte element of `{}`",
                                        decl.name
                                    ),
                                    *line,
                                ));
                            }
                            target.wrapping_add(*offset as u64)
                        }
                    };
                    let at = offset + i as u64 * scalar;
                    if at + scalar > offset + decl.bytes() {
                        return Err(unsupported(
                            format!("initializer of `{}` longer than the variable", decl.name),
                            *line,
                        ));
                    }
                    let bytes = value.to_le_bytes();
                    memory.write(at as usize, &bytes[..scalar as usize]);
                }
            }
        }

        // Decode every body once.
        let names = ModuleNames {
            globals: &globals,
            shared: &shared_names,
            functions: &function_index,
            externs: &externs,
            texrefs: &texref_names,
        };
        let all: Vec<&ptx_lexer::Function> = module.functions().collect();
        let mut functions = Vec::with_capacity(sources.len());
        for &source in &sources {
            functions.push(decode_function(
                all[source],
                &names,
                &mut shared_vars,
                &lines,
            )?);
        }

        let mut layouts = HashMap::new();
        for (index, f) in functions.iter().enumerate() {
            if f.is_entry {
                layouts.insert(
                    index as u32,
                    kernel_layout(&functions, index as u32, &shared_vars),
                );
            }
        }
        let function_count = functions.len();
        Ok(Program {
            module,
            functions,
            sources,
            function_index,
            globals,
            memory,
            texrefs,
            layouts,
            heap: Mutex::new(Heap::default()),
            arch,
            engine: Engine::default(),
            native: (0..function_count).map(|_| OnceLock::new()).collect(),
            tiers: (0..function_count).map(|_| Tier::default()).collect(),
            native_after: 0,
            any_native: AtomicBool::new(false),
        })
    }

    /// Selects the engine that runs this program's kernels from now on.
    pub fn set_engine(&mut self, engine: Engine) {
        self.engine = engine;
    }

    /// The engine that runs this program's kernels.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// With [`Engine::Native`], a function is interpreted until warps have executed
    /// `warp_instructions` in it (over all launches of the program), then compiled; 0 (the
    /// default) compiles it the first time a warp runs it. Results and counts do not depend
    /// on it: warps switch to native code between slices, calls and returns, and the native
    /// engine is exact from any point where the interpreter can hand over.
    pub fn set_native_after(&mut self, warp_instructions: u64) {
        self.native_after = warp_instructions;
    }

    /// Whether decoded function `name` has been compiled to native code (to something, or
    /// found to have nothing to compile): for tests of when the switch happens.
    pub fn native_compiled(&self, name: &str) -> bool {
        self.function_index
            .get(name)
            .and_then(|&i| self.native.get(i as usize))
            .is_some_and(|slot| slot.get().is_some())
    }

    /// The native code of decoded function `function` ([`Engine::Native`]; `None` with the
    /// interpreter, when there is nothing to compile, or while the function is still below
    /// the [`Program::set_native_after`] threshold or being compiled by another worker).
    /// Compiled by the first caller that finds the function over the threshold. A function
    /// LLVM cannot compile is interpreted, and says so once on stderr.
    pub(crate) fn native_code(&self, function: u32) -> Option<&NativeCode> {
        if self.engine != Engine::Native {
            return None;
        }
        let slot = self.native.get(function as usize)?;
        if let Some(code) = slot.get() {
            return code.as_ref();
        }
        let tier = self.tiers.get(function as usize)?;
        if tier.work.load(Ordering::Relaxed) < self.native_after
            || tier.claimed.swap(true, Ordering::Relaxed)
        {
            return None;
        }
        let func = self.functions.get(function as usize)?;
        let code = match native::compile(func) {
            Ok(code) => code,
            Err(why) => {
                eprintln!(
                    "cuda-flux: the native engine cannot compile `{}` ({why}); it is \
                     interpreted",
                    func.name
                );
                None
            }
        };
        // Only the claiming worker sets the slot.
        let code = slot.get_or_init(|| code).as_ref();
        if code.is_some() {
            self.any_native.store(true, Ordering::Relaxed);
        }
        code
    }

    /// Whether some function of the program has native code: until one has, warps run in the
    /// interpreter's own loop (without the native engine's checks and set-up).
    pub(crate) fn has_native_code(&self) -> bool {
        self.any_native.load(Ordering::Relaxed)
    }

    /// Adds `warp_instructions` interpreted in decoded function `function` to its work
    /// towards compilation ([`Program::set_native_after`]); nothing once it is compiled.
    pub(crate) fn credit_interpreted(&self, function: u32, warp_instructions: u64) {
        if self.engine != Engine::Native || warp_instructions == 0 {
            return;
        }
        let (Some(slot), Some(tier)) = (
            self.native.get(function as usize),
            self.tiers.get(function as usize),
        ) else {
            return;
        };
        if slot.get().is_none() {
            tier.work.fetch_add(warp_instructions, Ordering::Relaxed);
        }
    }

    /// The kernels (`.entry` functions with bodies) of the module.
    pub fn kernels(&self) -> Vec<&str> {
        self.functions
            .iter()
            .filter(|f| f.is_entry)
            .map(|f| f.name.as_str())
            .collect()
    }

    /// Facts about a kernel.
    pub fn kernel(&self, name: &str) -> Option<KernelInfo> {
        let index = *self.function_index.get(name)?;
        let f = &self.functions[index as usize];
        let layout = self.layouts.get(&index)?;
        Some(KernelInfo {
            param_sizes: f.params.iter().map(|p| p.bytes as usize).collect(),
            static_shared_bytes: layout.static_shared as usize,
            local_bytes: layout.window as usize,
            arch: self.arch,
        })
    }

    /// Host address and size in bytes of a module-level `.global` or `.const` variable.
    pub fn symbol(&self, name: &str) -> Option<(u64, u64)> {
        self.globals.get(name).copied()
    }

    /// Runs `kernel` on the grid of `config` and returns, when every CTA finished, what the
    /// launch executed.
    ///
    /// # Safety
    /// `args` holds one pointer per kernel parameter, each to a value of that parameter's
    /// size (CUDA's `void** args`); global addresses the kernel uses must be valid host memory
    /// wherever `env.global_accessible` says so.
    pub unsafe fn launch(
        &self,
        kernel: &str,
        config: &LaunchConfig,
        args: &[*const u8],
        env: &dyn Environment,
    ) -> Result<LaunchStats, SimError> {
        let unknown = || SimError::UnknownKernel(kernel.to_owned());
        let index = *self.function_index.get(kernel).ok_or_else(unknown)?;
        let function = &self.functions[index as usize];
        let layout = self.layouts.get(&index).ok_or_else(unknown)?;
        let invalid = |why: String| Err(SimError::InvalidLaunch(why));
        let [bx, by, bz] = config.block;
        let [gx, gy, gz] = config.grid;
        if bx == 0 || by == 0 || bz == 0 || gx == 0 || gy == 0 || gz == 0 {
            return invalid(format!(
                "grid ({gx}, {gy}, {gz}) and block ({bx}, {by}, {bz}) must be non-empty"
            ));
        }
        let threads = u64::from(bx) * u64::from(by) * u64::from(bz);
        if threads > 1024 || bx > 1024 || by > 1024 || bz > 64 {
            return invalid(format!(
                "block ({bx}, {by}, {bz}) exceeds 1024 threads or the per-dimension limits"
            ));
        }
        if gy > 65535 || gz > 65535 || u64::from(gx) > (1 << 31) - 1 {
            return invalid(format!("grid ({gx}, {gy}, {gz}) exceeds the grid limits"));
        }
        let dynamic_start = layout.dynamic_offset;
        let shared_bytes = dynamic_start + config.dynamic_shared_bytes as u64;
        if shared_bytes > MAX_SHARED_BYTES {
            return invalid(format!(
                "{shared_bytes} bytes of shared memory exceed the {MAX_SHARED_BYTES}-byte limit"
            ));
        }
        if args.len() != function.params.len() {
            return invalid(format!(
                "`{kernel}` takes {} parameters, {} given",
                function.params.len(),
                args.len()
            ));
        }
        let param_bytes = function
            .params
            .iter()
            .map(|p| u64::from(p.offset) + u64::from(p.bytes))
            .max()
            .unwrap_or(0);
        let Some(mut params) = HostBuffer::zeroed(param_bytes as usize) else {
            return invalid("cannot allocate the parameter buffer".into());
        };
        for (i, (slot, &arg)) in function.params.iter().zip(args).enumerate() {
            if arg.is_null() {
                return invalid(format!("argument {i} of `{kernel}` is a null pointer"));
            }
            // SAFETY: the caller guarantees each argument points to a value of its
            // parameter's size.
            let bytes = unsafe { std::slice::from_raw_parts(arg, slot.bytes as usize) };
            params.write(slot.offset as usize, bytes);
        }
        let launch = Launch {
            program: self,
            kernel: index,
            config: *config,
            env,
            params,
            shared_offsets: &layout.shared_offsets,
            shared_bytes,
            window: layout.window,
            stop: AtomicBool::new(false),
        };
        run_grid(&launch)
    }

    // ---- engine support ----------------------------------------------------------------

    /// `[base, size]` of the module variables' memory.
    pub(crate) fn module_range(&self) -> (u64, u64) {
        self.memory
            .as_ref()
            .map_or((0, 0), |m| (m.address(), m.len() as u64))
    }

    /// The parsed instruction behind statement `statement` of `function`.
    pub(crate) fn instruction(
        &self,
        function: &DecodedFunction,
        statement: u32,
    ) -> Option<&Instruction> {
        let index = self
            .functions
            .iter()
            .position(|f| std::ptr::eq(f, function))?;
        let source = *self.sources.get(index)?;
        self.module
            .functions()
            .nth(source)?
            .statements()
            .get(statement as usize)?
            .as_instruction()
    }

    /// The heap block containing `[address, address + len)`, as `[lo, hi)`.
    pub(crate) fn heap_range(&self, address: u64, len: u64) -> Option<(u64, u64)> {
        let heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
        let (_, block) = heap.live.range(..=address).next_back()?;
        block
            .contains(address, len)
            .then(|| (block.address(), block.address() + block.len() as u64))
    }

    /// Device `malloc`: 0 when the request cannot be met, as in CUDA.
    pub(crate) fn heap_alloc(&self, size: u64) -> u64 {
        if size == 0 || size > (1 << 40) {
            return 0;
        }
        let Some(block) = HostBuffer::zeroed(size as usize) else {
            return 0;
        };
        let address = block.address();
        let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
        heap.live.insert(address, block);
        address
    }

    /// Device `free`; unknown pointers are ignored.
    pub(crate) fn heap_free(&self, address: u64) {
        let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(block) = heap.live.remove(&address) {
            heap.freed.push(block);
        }
    }
}

/// Functions reachable from `kernel` (all of them once a pointer call is reachable).
fn reachable(functions: &[DecodedFunction], kernel: u32) -> (Vec<bool>, bool) {
    let mut seen = vec![false; functions.len()];
    let mut stack = vec![kernel];
    let mut indirect = false;
    while let Some(f) = stack.pop() {
        if std::mem::replace(&mut seen[f as usize], true) {
            continue;
        }
        let function = &functions[f as usize];
        indirect |= function.indirect_calls;
        stack.extend(function.callees.iter().copied());
    }
    if indirect {
        seen.fill(true);
    }
    (seen, indirect)
}

fn kernel_layout(functions: &[DecodedFunction], kernel: u32, vars: &[SharedVar]) -> KernelLayout {
    let (reach, indirect) = reachable(functions, kernel);
    let mut used = vec![false; vars.len()];
    for (f, _) in functions.iter().zip(&reach).filter(|(_, r)| **r) {
        for &v in &f.shared_vars {
            if let Some(u) = used.get_mut(v as usize) {
                *u = true;
            }
        }
    }
    let mut offsets = vec![u64::MAX; vars.len()];
    let mut end = 0u64;
    let mut dynamic_align = 16u64;
    for (i, var) in vars.iter().enumerate() {
        if !used[i] {
            continue;
        }
        if var.dynamic {
            dynamic_align = dynamic_align.max(var.align);
            continue;
        }
        let at = end.next_multiple_of(var.align.max(1));
        offsets[i] = at;
        end = at + var.bytes;
    }
    let dynamic_offset = end.next_multiple_of(dynamic_align);
    for (i, var) in vars.iter().enumerate() {
        if used[i] && var.dynamic {
            offsets[i] = dynamic_offset;
        }
    }
    // Local memory: the deepest chain of frames, or a fixed stack when it is unbounded.
    let mut memo = vec![None; functions.len()];
    let mut on_path = vec![false; functions.len()];
    let (need, bounded) = stack_need(functions, kernel, &mut memo, &mut on_path);
    // A multiple of 16: every thread's window then starts 16-aligned (the CTA's local buffer
    // is), so that a `.v4.f32` local access is aligned in the host as in PTX.
    let window = if bounded && !indirect {
        need
    } else {
        need.max(UNBOUNDED_STACK_BYTES)
    }
    .next_multiple_of(16);
    KernelLayout {
        shared_offsets: offsets,
        static_shared: end,
        dynamic_offset,
        window,
    }
}

/// Local bytes `f` and its deepest callee chain need; `false` when recursion makes it unbounded.
fn stack_need(
    functions: &[DecodedFunction],
    f: u32,
    memo: &mut [Option<(u64, bool)>],
    on_path: &mut [bool],
) -> (u64, bool) {
    if let Some(known) = memo[f as usize] {
        return known;
    }
    if on_path[f as usize] {
        return (0, false);
    }
    on_path[f as usize] = true;
    let function = &functions[f as usize];
    let own = u64::from(function.frame_bytes).next_multiple_of(16);
    let mut deepest = 0;
    let mut bounded = true;
    for &callee in &function.callees {
        let (need, b) = stack_need(functions, callee, memo, on_path);
        deepest = deepest.max(need);
        bounded &= b;
    }
    on_path[f as usize] = false;
    let result = (own + deepest, bounded);
    memo[f as usize] = Some(result);
    result
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("kernels", &self.kernels())
            .field("arch", &self.arch)
            .finish_non_exhaustive()
    }
}
