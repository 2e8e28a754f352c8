//! Instructions decoded once into a compact form: registers as dense indices, immediates as
//! bits, symbols as addresses or window offsets, branch targets as instruction indices. The
//! interpreter never looks at a name or a string again.

use std::collections::HashMap;

use ptx_lexer::{
    Directive, Function, FunctionKind, Instruction, Operand, StateSpace, StatementKind,
};

use crate::alu::{self, AluOp, ValueKind, WarpKernel};
use crate::decl::{param_declaration, parse_declaration, DeclSpace};
/// PTX literals, read by `ptx_lexer` (integers; floats and their `0f`/`0d` bit patterns).
pub(crate) use ptx_lexer::declaration::{parse_float, parse_integer};

/// "No register": a sink `_` or an absent second destination.
pub(crate) const NO_REG: u32 = u32::MAX;
/// The reconvergence point of a branch whose paths only meet at function exit.
pub(crate) const EXIT_PC: u32 = u32::MAX;
/// Tag of function addresses (`mov.u64 %rd, f`): a non-canonical x86-64 address, so that it
/// can never alias host memory.
pub(crate) const FUNCTION_ADDRESS_TAG: u64 = 0xF0C0_0000_0000_0000;
/// What `mov.u64 %rd, texref` puts in a register: the `.texref`'s index under this tag (clang
/// moves a legacy texture reference into a register and fetches through the register). Like
/// function addresses, no host address or texture-object handle has these high bits.
pub(crate) const TEXREF_HANDLE_TAG: u64 = 0xF7E0_0000_0000_0000;
/// The bits that tell a tagged value's kind.
pub(crate) const HANDLE_TAG_MASK: u64 = 0xFFF0_0000_0000_0000;

/// A special register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    Tid(u8),
    Ntid(u8),
    Ctaid(u8),
    Nctaid(u8),
    LaneId,
    WarpId,
    NWarpId,
    SmId,
    NSmId,
    GridId,
    LanemaskEq,
    LanemaskLt,
    LanemaskLe,
    LanemaskGt,
    LanemaskGe,
    Clock,
    Clock64,
    GlobalTimer,
    DynamicSmemSize,
    TotalSmemSize,
    /// `%envreg<N>`, N < 32: the value the launch's [`crate::Environment::env_reg`] gives.
    EnvReg(u8),
}

impl Special {
    fn from_name(name: &str) -> Option<Special> {
        let dim = |d: &str| match d {
            "x" => Some(0u8),
            "y" => Some(1),
            "z" => Some(2),
            _ => None,
        };
        let name = name.strip_prefix('%')?;
        if let Some((base, d)) = name.split_once('.') {
            let d = dim(d)?;
            return Some(match base {
                "tid" => Special::Tid(d),
                "ntid" => Special::Ntid(d),
                "ctaid" => Special::Ctaid(d),
                "nctaid" => Special::Nctaid(d),
                _ => return None,
            });
        }
        Some(match name {
            "laneid" => Special::LaneId,
            "warpid" => Special::WarpId,
            "nwarpid" => Special::NWarpId,
            "smid" => Special::SmId,
            "nsmid" => Special::NSmId,
            "gridid" => Special::GridId,
            "lanemask_eq" => Special::LanemaskEq,
            "lanemask_lt" => Special::LanemaskLt,
            "lanemask_le" => Special::LanemaskLe,
            "lanemask_gt" => Special::LanemaskGt,
            "lanemask_ge" => Special::LanemaskGe,
            "clock" => Special::Clock,
            "clock64" => Special::Clock64,
            "globaltimer" => Special::GlobalTimer,
            "dynamic_smem_size" => Special::DynamicSmemSize,
            "total_smem_size" => Special::TotalSmemSize,
            n if n.starts_with("envreg") && n[6..].parse::<u8>().is_ok_and(|i| i < 32) => {
                Special::EnvReg(n[6..].parse().unwrap_or(0))
            }
            _ => return None,
        })
    }
}

/// A source operand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Src {
    Reg(u32),
    /// `!%p`: the complement of a predicate.
    NotPred(u32),
    Imm(u64),
    Special(Special),
    /// Host address of a kernel parameter: the launch's parameter buffer plus this offset.
    KernelParam(i64),
    /// Offset in the CTA's shared window of shared variable `var` (laid out per kernel) plus
    /// `offset`.
    Shared {
        var: u32,
        offset: i64,
    },
    /// Local-window offset: the current frame's base plus this offset (body `.local` and
    /// `.param` declarations, a device function's own parameters).
    Frame(i64),
}

/// Where a memory instruction's address points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    /// A host address: global, generic, const, or a kernel's parameter buffer.
    Host,
    /// An offset in the CTA's shared window.
    Shared,
    /// An offset in the thread's local window (also device-function parameters).
    Local,
}

/// `[base+offset]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Addr {
    pub base: Src,
    pub offset: i64,
}

/// The width and signedness of a memory element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemType {
    pub bytes: u8,
    pub signed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtomOp {
    Add,
    Min,
    Max,
    Inc,
    Dec,
    And,
    Or,
    Xor,
    Exch,
    Cas,
}

impl AtomOp {
    /// Every operation, for tests that try each (one that is added is tried too).
    #[cfg(test)]
    pub(crate) const ALL: [AtomOp; 10] = [
        AtomOp::Add,
        AtomOp::Min,
        AtomOp::Max,
        AtomOp::Inc,
        AtomOp::Dec,
        AtomOp::And,
        AtomOp::Or,
        AtomOp::Xor,
        AtomOp::Exch,
        AtomOp::Cas,
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtomType {
    U32,
    S32,
    U64,
    S64,
    F32,
    F64,
}

impl AtomType {
    pub fn bytes(self) -> u64 {
        match self {
            AtomType::U32 | AtomType::S32 | AtomType::F32 => 4,
            AtomType::U64 | AtomType::S64 | AtomType::F64 => 8,
        }
    }
}

/// The address space `cvta`/`isspacep` convert from or to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WindowSpace {
    /// Global and const: generic and global addresses are the same host address.
    Global,
    Shared,
    Local,
    /// Kernel parameters are host addresses; device-function parameters live in the frame.
    Param,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BarKind {
    Sync,
    Arrive,
    RedPopc,
    RedAnd,
    RedOr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VoteMode {
    All,
    Any,
    Uni,
    Ballot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShflMode {
    Up,
    Down,
    Bfly,
    Idx,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReduxOp {
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
}

/// Extern functions the engine implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    Vprintf,
    AssertFail,
    Malloc,
    Free,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum CallTarget {
    Direct(u32),
    Indirect(Src),
    Builtin(Builtin),
}

/// An argument or result of a call: a `.param` variable of the caller's frame, or a value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum CallSlot {
    Frame {
        offset: u32,
        bytes: u32,
    },
    Value(Src),
    /// A register receiving a result.
    Register(u32),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallInst {
    pub target: CallTarget,
    pub args: Vec<CallSlot>,
    pub rets: Vec<CallSlot>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TexInst {
    pub dsts: [u32; 4],
    /// A texture-object handle, or a `.texref`'s tagged index ([`TEXREF_HANDLE_TAG`]), whether
    /// the fetch names the reference or a register it was moved into.
    pub handle: Src,
    /// Coordinates: x, y, z (as many as `dims`).
    pub coords: [Src; 3],
    /// Geometry: 1, 2 or 3 dimensions.
    pub dims: u8,
    /// Coordinates are `f32` (else `s32`).
    pub float_coords: bool,
    /// Result component type: `f32`, `s32` or `u32`.
    pub result: crate::ChannelKind,
}

#[derive(Debug, Clone)]
pub(crate) struct AluInst {
    pub op: AluOp,
    /// `op`'s lane loop, selected at decode ([`AluOp::select`]).
    pub kernel: WarpKernel,
    pub dst: u32,
    pub second: u32,
    pub srcs: [Src; 4],
    pub count: u8,
    pub reads_carry: bool,
    pub writes_carry: bool,
    /// The immediate sources, in order, each as a row of 32 equal lanes: the warp-wide
    /// evaluation reads them in place, like registers.
    pub immediates: Box<[[u64; 32]]>,
}

impl AluInst {
    /// `op` writing `dst` (and `second`) from the first `op.source_count()` of `srcs`: its
    /// kernel, carry use and immediate rows follow from those.
    pub(crate) fn new(op: AluOp, dst: u32, second: u32, srcs: [Src; 4]) -> AluInst {
        let count = op.source_count();
        let immediates = srcs[..count]
            .iter()
            .filter_map(|src| match src {
                Src::Imm(v) => Some([*v; 32]),
                _ => None,
            })
            .collect();
        AluInst {
            reads_carry: op.reads_carry(),
            writes_carry: op.writes_carry(),
            kernel: op.select(),
            op,
            dst,
            second,
            srcs,
            count: count as u8,
            immediates,
        }
    }
}

impl PartialEq for AluInst {
    /// Every field but `kernel`, which `op` determines.
    fn eq(&self, other: &AluInst) -> bool {
        self.op == other.op
            && self.dst == other.dst
            && self.second == other.second
            && self.srcs == other.srcs
            && self.count == other.count
            && self.reads_carry == other.reads_carry
            && self.writes_carry == other.writes_carry
            && self.immediates == other.immediates
    }
}

/// A decoded instruction's operation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    Alu(Box<AluInst>),
    Mov {
        dst: u32,
        src: Src,
        mask: u64,
    },
    /// `mov.b64 %rd, {%r1, %r2}`: parts from least significant.
    Pack {
        dst: u32,
        parts: [Src; 4],
        count: u8,
        bits: u8,
    },
    /// `mov.b64 {%r1, %r2}, %rd`.
    Unpack {
        dsts: [u32; 4],
        count: u8,
        src: Src,
        bits: u8,
    },
    Ld {
        space: Space,
        addr: Addr,
        dsts: [u32; 4],
        count: u8,
        ty: MemType,
    },
    St {
        space: Space,
        addr: Addr,
        srcs: [Src; 4],
        count: u8,
        ty: MemType,
    },
    Cvta {
        to_generic: bool,
        space: WindowSpace,
        dst: u32,
        src: Src,
    },
    IsSpace {
        space: WindowSpace,
        dst: u32,
        src: Src,
    },
    Atom {
        space: Space,
        addr: Addr,
        op: AtomOp,
        ty: AtomType,
        dst: u32,
        b: Src,
        c: Src,
    },
    Bar {
        kind: BarKind,
        id: Src,
        count: Option<Src>,
        dst: u32,
        pred: Src,
    },
    Fence,
    Nop,
    Bra {
        target: u32,
        reconverge: u32,
    },
    Brx {
        index: Src,
        targets: Box<[u32]>,
        reconverge: u32,
    },
    Call(Box<CallInst>),
    Ret,
    Exit,
    Trap,
    Activemask {
        dst: u32,
    },
    Vote {
        mode: VoteMode,
        dst: u32,
        pred: Src,
    },
    Shfl {
        mode: ShflMode,
        dst: u32,
        dst_pred: u32,
        a: Src,
        b: Src,
        c: Src,
    },
    Match {
        all: bool,
        wide: bool,
        dst: u32,
        dst_pred: u32,
        a: Src,
    },
    Redux {
        op: ReduxOp,
        signed: bool,
        dst: u32,
        a: Src,
    },
    Tex(Box<TexInst>),
    /// Reported when executed, so that unused unsupported code does not stop a program.
    Unsupported(Box<str>),
}

impl Op {
    /// Whether the instruction leaves the SIMT stack as it is: it neither branches, calls,
    /// returns, exits nor arrives at a barrier (the interpreter runs such instructions back
    /// to back without consulting the stack).
    #[inline(always)]
    pub fn is_straight(&self) -> bool {
        !matches!(
            self,
            Op::Bar { .. } | Op::Bra { .. } | Op::Brx { .. } | Op::Call(_) | Op::Ret | Op::Exit
        )
    }
}

impl Op {
    /// Calls `f` with every source operand the instruction may read (operands of unused
    /// slots included: more is safe for [`crate::uninit`], which this feeds).
    pub fn for_each_source(&self, mut f: impl FnMut(&Src)) {
        match self {
            Op::Alu(alu) => alu.srcs.iter().for_each(f),
            Op::Mov { src, .. }
            | Op::Unpack { src, .. }
            | Op::Cvta { src, .. }
            | Op::IsSpace { src, .. } => f(src),
            Op::Pack { parts, .. } => parts.iter().for_each(f),
            Op::Ld { addr, .. } => f(&addr.base),
            Op::St { addr, srcs, .. } => {
                f(&addr.base);
                srcs.iter().for_each(f);
            }
            Op::Atom { addr, b, c, .. } => {
                f(&addr.base);
                f(b);
                f(c);
            }
            Op::Bar {
                id, count, pred, ..
            } => {
                f(id);
                if let Some(count) = count {
                    f(count);
                }
                f(pred);
            }
            Op::Brx { index, .. } => f(index),
            Op::Call(call) => {
                if let CallTarget::Indirect(src) = &call.target {
                    f(src);
                }
                for slot in call.args.iter().chain(&call.rets) {
                    if let CallSlot::Value(src) = slot {
                        f(src);
                    }
                }
            }
            Op::Vote { pred, .. } => f(pred),
            Op::Shfl { a, b, c, .. } => {
                f(a);
                f(b);
                f(c);
            }
            Op::Match { a, .. } | Op::Redux { a, .. } => f(a),
            Op::Tex(tex) => {
                f(&tex.handle);
                tex.coords.iter().for_each(f);
            }
            Op::Fence
            | Op::Nop
            | Op::Bra { .. }
            | Op::Ret
            | Op::Exit
            | Op::Trap
            | Op::Activemask { .. }
            | Op::Unsupported(_) => {}
        }
    }

    /// Calls `f` with every register the instruction writes in every lane that executes it,
    /// whatever the operands' values (an instruction that fails stops the launch). Where that
    /// is not certain (results written later or only by some lanes: `bar.red`, calls,
    /// textures), the register is left out: less is safe for [`crate::uninit`].
    pub fn for_each_definite_destination(&self, mut f: impl FnMut(u32)) {
        let mut reg = |r: u32| {
            if r != NO_REG {
                f(r)
            }
        };
        match self {
            Op::Alu(alu) => {
                reg(alu.dst);
                reg(alu.second);
            }
            Op::Mov { dst, .. }
            | Op::Pack { dst, .. }
            | Op::Cvta { dst, .. }
            | Op::IsSpace { dst, .. }
            | Op::Atom { dst, .. }
            | Op::Activemask { dst }
            | Op::Vote { dst, .. }
            | Op::Redux { dst, .. } => reg(*dst),
            Op::Unpack { dsts, count, .. } | Op::Ld { dsts, count, .. } => dsts
                [..usize::from(*count).min(4)]
                .iter()
                .for_each(|&d| reg(d)),
            Op::Shfl { dst, dst_pred, .. } | Op::Match { dst, dst_pred, .. } => {
                reg(*dst);
                reg(*dst_pred);
            }
            Op::St { .. }
            | Op::Bar { .. }
            | Op::Fence
            | Op::Nop
            | Op::Bra { .. }
            | Op::Brx { .. }
            | Op::Call(_)
            | Op::Ret
            | Op::Exit
            | Op::Trap
            | Op::Tex(_)
            | Op::Unsupported(_) => {}
        }
    }
}

/// A decoded instruction.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Inst {
    pub op: Op,
    /// Guard predicate register, `NO_REG` when unguarded.
    pub guard: u32,
    pub guard_negated: bool,
    pub line: u32,
    /// Index of the statement in the function body (for the instruction's text in errors).
    pub statement: u32,
    /// A load, store or atomic (not `red`) on global, shared or generic memory, other than a
    /// read-only load (`ld.global.nc`, `ldu`): an access other warps can see, where the
    /// scheduler may switch warps. (Counter code reduces with `red` and reads its base from
    /// `.param`; its only such accesses are the CTA counters' zeroing, before the CTA's first
    /// barrier, and their exit count and flush, after a warp's last instruction of its own: so
    /// instrumentation moves no switch inside the kernel's own code.)
    pub visible: bool,
}

/// A parameter's place: kernel parameter buffer offset, or frame offset for device functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub offset: u32,
    pub bytes: u32,
}

/// A decoded function.
#[derive(Debug, Clone)]
pub(crate) struct DecodedFunction {
    pub name: String,
    pub is_entry: bool,
    pub code: Vec<Inst>,
    pub registers: u32,
    /// Kernels: the registers a thread may read before it writes them, which start at zero
    /// in every warp ([`crate::uninit`]); the others start with whatever the warp's last
    /// kernel left there, which no thread can see. (Device functions start all at zero.)
    pub zeroed_registers: Vec<u32>,
    /// Bytes of the frame in each thread's local window: own parameters, `.local` and `.param`
    /// declarations of the body.
    pub frame_bytes: u32,
    /// Entry: offsets in the kernel parameter buffer. Device function: frame offsets.
    pub params: Vec<Slot>,
    pub rets: Vec<Slot>,
    /// Shared variables the body names.
    pub shared_vars: Vec<u32>,
    /// Functions the body calls directly or takes the address of.
    pub callees: Vec<u32>,
    pub indirect_calls: bool,
    /// Index of the first statement's line, for errors at function level.
    pub line: u32,
}

/// A shared variable (module or function scope) to be laid out per kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedVar {
    pub name: String,
    pub align: u64,
    pub bytes: u64,
    /// `extern .shared x[]`: the dynamic shared memory, placed after the static variables.
    pub dynamic: bool,
}

/// What module-level names resolve to, for the decoder.
pub(crate) struct ModuleNames<'a> {
    /// `.global`/`.const` variables with definitions: host address and size.
    pub globals: &'a HashMap<String, (u64, u64)>,
    /// Module-scope shared variables by name.
    pub shared: &'a HashMap<String, u32>,
    /// Functions with bodies by name.
    pub functions: &'a HashMap<String, u32>,
    /// Declared-only functions.
    pub externs: &'a HashMap<String, ()>,
    /// `.texref` names.
    pub texrefs: &'a HashMap<String, u32>,
}

/// Line numbers from byte offsets.
pub(crate) struct LineIndex {
    newlines: Vec<u32>,
}

impl LineIndex {
    pub fn new(source: &str) -> LineIndex {
        let newlines = source
            .bytes()
            .enumerate()
            .filter(|&(_, b)| b == b'\n')
            .map(|(i, _)| i as u32)
            .collect();
        LineIndex { newlines }
    }

    pub fn line(&self, offset: Option<u32>) -> u32 {
        offset.map_or(0, |o| self.newlines.partition_point(|&n| n < o) as u32 + 1)
    }
}

/// A name bound in a body scope.
#[derive(Debug, Clone, Copy)]
enum Binding {
    Reg(u32),
    Frame { offset: u32, bytes: u32 },
    Shared(u32),
}

struct Decoder<'m> {
    names: &'m ModuleNames<'m>,
    /// Shared variables declared in bodies are appended here.
    shared_vars: &'m mut Vec<SharedVar>,
    scopes: Vec<HashMap<String, Binding>>,
    registers: u32,
    frame_bytes: u32,
    is_entry: bool,
    kernel_params: HashMap<String, Slot>,
    labels: HashMap<String, u32>,
    tables: HashMap<String, Vec<String>>,
    used_shared: Vec<u32>,
    callees: Vec<u32>,
    indirect_calls: bool,
}

fn align_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align.max(1)) * align.max(1)
}

/// Decodes one function with a body.
pub(crate) fn decode_function(
    function: &Function,
    names: &ModuleNames<'_>,
    shared_vars: &mut Vec<SharedVar>,
    lines: &LineIndex,
) -> Result<DecodedFunction, crate::SimError> {
    let first_line = lines.line(
        function
            .statements()
            .first()
            .and_then(|s| s.source_offset()),
    );
    let unsupported = |what: String, line: u32| crate::SimError::Unsupported { what, line };
    let is_entry = function.kind() == FunctionKind::Entry;
    let mut decoder = Decoder {
        names,
        shared_vars,
        scopes: vec![HashMap::new()],
        registers: 0,
        frame_bytes: 0,
        is_entry,
        kernel_params: HashMap::new(),
        labels: HashMap::new(),
        tables: HashMap::new(),
        used_shared: Vec::new(),
        callees: Vec::new(),
        indirect_calls: false,
    };
    // Parameters: a kernel's in the launch's parameter buffer, a device function's in its
    // frame (they are per thread).
    let mut params = Vec::new();
    let mut rets = Vec::new();
    let mut kernel_offset = 0u64;
    for (list, is_ret) in [(function.params(), false), (function.return_params(), true)] {
        for param in list {
            let decl = param_declaration(param)
                .map_err(|e| unsupported(format!("parameter `{}`: {e}", param.name), first_line))?;
            let bytes = u32::try_from(decl.bytes())
                .map_err(|_| unsupported(format!("parameter `{}` size", param.name), first_line))?;
            let slot = if is_entry {
                kernel_offset = align_up(kernel_offset, decl.align);
                let slot = Slot {
                    offset: kernel_offset as u32,
                    bytes,
                };
                kernel_offset += u64::from(bytes);
                decoder.kernel_params.insert(param.name.to_string(), slot);
                slot
            } else {
                let offset = decoder.frame_alloc(decl.align, u64::from(bytes));
                decoder.scopes[0].insert(param.name.to_string(), Binding::Frame { offset, bytes });
                Slot { offset, bytes }
            };
            if is_ret {
                rets.push(slot);
            } else {
                params.push(slot);
            }
        }
    }

    // Labels and branch tables first: branches may jump forward.
    let mut index = 0u32;
    for statement in function.statements() {
        match statement.kind() {
            StatementKind::Label(label) => {
                decoder.labels.insert(label.to_string(), index);
            }
            StatementKind::Instruction(_) => index += 1,
            StatementKind::Directive(Directive::Other {
                label: Some(label),
                name,
                text,
            }) if name == "branchtargets" => {
                let list = text.trim().trim_start_matches(".branchtargets");
                let list = list.trim().trim_end_matches(';');
                decoder.tables.insert(
                    label.to_string(),
                    list.split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect(),
                );
            }
            _ => {}
        }
    }

    let mut code = Vec::new();
    for (statement_index, statement) in function.statements().iter().enumerate() {
        let line = lines.line(statement.source_offset());
        match statement.kind() {
            StatementKind::ScopeOpen => decoder.scopes.push(HashMap::new()),
            StatementKind::ScopeClose => {
                if decoder.scopes.len() > 1 {
                    decoder.scopes.pop();
                }
            }
            StatementKind::Label(_) => {}
            StatementKind::Directive(Directive::Reg(reg)) => {
                for name in &reg.names {
                    match name.count {
                        None => decoder.declare_register(&name.name),
                        Some(count) => {
                            for i in 0..count {
                                decoder.declare_register(&format!("{}{i}", name.name));
                            }
                        }
                    }
                }
            }
            StatementKind::Directive(Directive::Other {
                label: None,
                name,
                text,
            }) if matches!(name.as_str(), "local" | "param" | "shared") => {
                decoder
                    .declare_variable(text)
                    .map_err(|e| unsupported(format!("`{}`: {e}", text.trim()), line))?;
            }
            StatementKind::Directive(Directive::Other { name, text, .. })
                if matches!(name.as_str(), "reg") =>
            {
                return Err(unsupported(
                    format!("register declaration `{}`", text.trim()),
                    line,
                ));
            }
            StatementKind::Directive(_) => {}
            StatementKind::Instruction(instruction) => {
                let op = match decoder.decode(instruction) {
                    Ok(op) => op,
                    Err(reason) => {
                        Op::Unsupported(format!("`{instruction}`: {reason}").into_boxed_str())
                    }
                };
                let (guard, guard_negated) = match &instruction.guard {
                    None => (NO_REG, false),
                    Some(g) => match decoder.lookup(&g.predicate) {
                        Some(Binding::Reg(r)) => (r, g.negated),
                        _ => {
                            return Err(unsupported(
                                format!("guard `{}` is not a declared register", g.predicate),
                                line,
                            ))
                        }
                    },
                };
                let base = instruction.opcode.base();
                // `ld.global.nc` and `ldu` read data that stays the same while the kernel runs
                // (the PTX ISA: read-only for its lifetime), which no other warp's write can
                // reach: where they fall in the schedule changes nothing.
                let read_only =
                    base == "ldu" || (base == "ld" && instruction.opcode.has_modifier("nc"));
                let visible = matches!(base, "ld" | "st" | "atom")
                    && !read_only
                    && !matches!(
                        instruction.facts.state_space,
                        Some(StateSpace::Param | StateSpace::Local | StateSpace::Const)
                    );
                code.push(Inst {
                    op,
                    guard,
                    guard_negated,
                    line,
                    statement: statement_index as u32,
                    visible,
                });
            }
        }
    }
    // Falling off the end of a body returns.
    code.push(Inst {
        op: Op::Ret,
        guard: NO_REG,
        guard_negated: false,
        line: lines.line(function.statements().last().and_then(|s| s.source_offset())),
        statement: u32::MAX,
        visible: false,
    });
    crate::cfg::assign_reconvergence(&mut code);
    let zeroed_registers = if is_entry {
        crate::uninit::registers_to_zero(&code, decoder.registers)
    } else {
        Vec::new()
    };
    let mut used_shared = decoder.used_shared;
    used_shared.sort_unstable();
    used_shared.dedup();
    let mut callees = decoder.callees;
    callees.sort_unstable();
    callees.dedup();
    Ok(DecodedFunction {
        name: function.name().to_string(),
        is_entry,
        code,
        registers: decoder.registers,
        zeroed_registers,
        frame_bytes: align_up(u64::from(decoder.frame_bytes), 16) as u32,
        params,
        rets,
        shared_vars: used_shared,
        callees,
        indirect_calls: decoder.indirect_calls,
        line: first_line,
    })
}

impl Decoder<'_> {
    fn declare_register(&mut self, name: &str) {
        let index = self.registers;
        self.registers += 1;
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), Binding::Reg(index));
        }
    }

    fn frame_alloc(&mut self, align: u64, bytes: u64) -> u32 {
        let offset = align_up(u64::from(self.frame_bytes), align);
        self.frame_bytes = u32::try_from(offset + bytes).unwrap_or(u32::MAX);
        offset as u32
    }

    fn declare_variable(&mut self, text: &str) -> Result<(), String> {
        let decl = parse_declaration(text)?;
        let binding = match decl.space {
            DeclSpace::Local | DeclSpace::Param => {
                let bytes = decl.bytes();
                if bytes > u64::from(u32::MAX / 4) {
                    return Err("too large".into());
                }
                let offset = self.frame_alloc(decl.align, bytes);
                Binding::Frame {
                    offset,
                    bytes: bytes as u32,
                }
            }
            DeclSpace::Shared => {
                let index = self.shared_vars.len() as u32;
                self.shared_vars.push(SharedVar {
                    name: decl.name.clone(),
                    align: decl.align,
                    bytes: decl.bytes(),
                    dynamic: decl.count.is_none(),
                });
                Binding::Shared(index)
            }
            other => return Err(format!("{other:?} variable inside a function body")),
        };
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(decl.name, binding);
        }
        Ok(())
    }

    fn lookup(&self, name: &str) -> Option<Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn reg(&self, operand: &Operand) -> Result<u32, String> {
        match operand {
            Operand::Register(name) | Operand::Symbol(name) => match self.lookup(name) {
                Some(Binding::Reg(r)) => Ok(r),
                _ => Err(format!("`{name}` is not a declared register")),
            },
            Operand::Sink => Ok(NO_REG),
            other => Err(format!("`{other}` is not a register")),
        }
    }

    /// A symbol's address (or register value) as a source.
    fn symbol(&mut self, name: &str) -> Result<Src, String> {
        if let Some(binding) = self.lookup(name) {
            return Ok(match binding {
                Binding::Reg(r) => Src::Reg(r),
                Binding::Frame { offset, .. } => Src::Frame(i64::from(offset)),
                Binding::Shared(var) => {
                    self.used_shared.push(var);
                    Src::Shared { var, offset: 0 }
                }
            });
        }
        if let Some(slot) = self.kernel_params.get(name) {
            return Ok(Src::KernelParam(i64::from(slot.offset)));
        }
        if let Some(&(address, _)) = self.names.globals.get(name) {
            return Ok(Src::Imm(address));
        }
        if let Some(&var) = self.names.shared.get(name) {
            self.used_shared.push(var);
            return Ok(Src::Shared { var, offset: 0 });
        }
        if let Some(&f) = self.names.functions.get(name) {
            self.callees.push(f);
            return Ok(Src::Imm(FUNCTION_ADDRESS_TAG | u64::from(f)));
        }
        if let Some(&index) = self.names.texrefs.get(name) {
            return Ok(Src::Imm(TEXREF_HANDLE_TAG | u64::from(index)));
        }
        Err(format!("unknown symbol `{name}`"))
    }

    fn src(&mut self, operand: &Operand, kind: ValueKind) -> Result<Src, String> {
        match operand {
            Operand::Register(name) => match Special::from_name(name) {
                Some(s) if self.lookup(name).is_none() => Ok(Src::Special(s)),
                _ => Ok(Src::Reg(self.reg(operand)?)),
            },
            Operand::NegatedRegister(name) => match self.lookup(name) {
                Some(Binding::Reg(r)) => Ok(Src::NotPred(r)),
                _ => Err(format!("`{name}` is not a declared register")),
            },
            Operand::Symbol(name) => self.symbol(name),
            Operand::Integer(_) | Operand::Float(_) => parse_immediate(operand, kind)
                .map(Src::Imm)
                .ok_or_else(|| format!("immediate `{operand}`")),
            Operand::Offset { base, offset } => {
                let offset =
                    parse_integer(offset).ok_or_else(|| format!("offset in `{operand}`"))?;
                let base = match base.as_ref() {
                    Operand::Symbol(name) => self.symbol(name)?,
                    other => return Err(format!("`{other}` plus an offset as a value")),
                };
                offset_src(base, offset).ok_or_else(|| format!("`{operand}` as a value"))
            }
            other => Err(format!("operand `{other}`")),
        }
    }

    fn addr(&mut self, operand: &Operand) -> Result<Addr, String> {
        let Operand::Address(items) = operand else {
            return Err(format!("`{operand}` is not an address"));
        };
        let [item] = items.as_slice() else {
            return Err(format!("address `{operand}`"));
        };
        let (base, offset) = match item {
            Operand::Offset { base, offset } => (
                base.as_ref(),
                parse_integer(offset).ok_or_else(|| format!("offset in `{operand}`"))?,
            ),
            other => (other, 0),
        };
        let base = self.src(base, ValueKind::Int { bits: 64 })?;
        Ok(match base {
            Src::Imm(v) => Addr {
                base: Src::Imm(v.wrapping_add(offset as u64)),
                offset: 0,
            },
            base => Addr { base, offset },
        })
    }

    /// The space a memory instruction's address lives in. Parameter space depends on what the
    /// address names: a kernel parameter is in the host parameter buffer, a device function's
    /// parameter or a call's argument variable in the frame.
    fn space(&self, space: Option<StateSpace>, addr: &Addr) -> Result<Space, String> {
        Ok(match space.unwrap_or(StateSpace::Generic) {
            StateSpace::Global | StateSpace::Generic | StateSpace::Const => Space::Host,
            StateSpace::Shared => Space::Shared,
            StateSpace::Local => Space::Local,
            StateSpace::Param => match addr.base {
                Src::KernelParam(_) => Space::Host,
                Src::Frame(_) => Space::Local,
                _ if self.is_entry => Space::Host,
                _ => Space::Local,
            },
            other => return Err(format!("{other:?} state space")),
        })
    }

    fn decode(&mut self, inst: &Instruction) -> Result<Op, String> {
        let opcode = &inst.opcode;
        let ops = inst.operands.as_slice();
        let base = opcode.base();
        let has = |m: &str| opcode.has_modifier(m);
        let ty = inst.facts.data_type;
        match base {
            "mov" => return self.decode_mov(inst),
            "ld" | "ldu" => {
                let [dst, addr] = ops else {
                    return Err("operands".into());
                };
                let mem = mem_type(inst)?;
                let addr = self.addr(addr)?;
                let space = self.space(inst.facts.state_space, &addr)?;
                let (dsts, count) = self.dsts(dst)?;
                return Ok(Op::Ld {
                    space,
                    addr,
                    dsts,
                    count,
                    ty: mem,
                });
            }
            "st" => {
                let [addr, value] = ops else {
                    return Err("operands".into());
                };
                let mem = mem_type(inst)?;
                let kind = value_kind(ty);
                let addr = self.addr(addr)?;
                let space = self.space(inst.facts.state_space, &addr)?;
                let mut srcs = [Src::Imm(0); 4];
                let count = match value {
                    Operand::Vector(items) if items.len() <= 4 => {
                        for (slot, item) in srcs.iter_mut().zip(items) {
                            *slot = self.src(item, kind)?;
                        }
                        items.len() as u8
                    }
                    Operand::Vector(_) => return Err("vector too wide".into()),
                    other => {
                        srcs[0] = self.src(other, kind)?;
                        1
                    }
                };
                if count != inst.facts.vector_width {
                    return Err("vector width does not match the operands".into());
                }
                return Ok(Op::St {
                    space,
                    addr,
                    srcs,
                    count,
                    ty: mem,
                });
            }
            "cvta" | "isspacep" => {
                let [dst, src] = ops else {
                    return Err("operands".into());
                };
                let space = match inst.facts.state_space {
                    Some(StateSpace::Global | StateSpace::Const) => WindowSpace::Global,
                    Some(StateSpace::Shared) => WindowSpace::Shared,
                    Some(StateSpace::Local) => WindowSpace::Local,
                    Some(StateSpace::Param) => WindowSpace::Param,
                    other => return Err(format!("{other:?} space")),
                };
                let dst = self.reg(dst)?;
                let src = self.src(src, ValueKind::Int { bits: 64 })?;
                if has("u32") {
                    return Err("32-bit addresses".into());
                }
                return Ok(if base == "cvta" {
                    Op::Cvta {
                        to_generic: !has("to"),
                        space,
                        dst,
                        src,
                    }
                } else {
                    Op::IsSpace { space, dst, src }
                });
            }
            "atom" | "red" => return self.decode_atom(inst),
            "bar" | "barrier" => return self.decode_bar(inst),
            "membar" | "fence" => return Ok(Op::Fence),
            "prefetch" | "prefetchu" | "nanosleep" | "discard" | "pmevent" | "applypriority"
            | "createpolicy" => {
                return match base {
                    // `createpolicy` writes a register; give it a harmless value.
                    "createpolicy" => Ok(Op::Mov {
                        dst: self.reg(ops.first().ok_or("operands")?)?,
                        src: Src::Imm(0),
                        mask: u64::MAX,
                    }),
                    _ => Ok(Op::Nop),
                };
            }
            "bra" => {
                let [Operand::Symbol(label)] = ops else {
                    return Err("branch target".into());
                };
                let target = *self
                    .labels
                    .get(label.as_str())
                    .ok_or_else(|| format!("unknown label `{label}`"))?;
                return Ok(Op::Bra {
                    target,
                    reconverge: EXIT_PC,
                });
            }
            "brx" => {
                let [index, Operand::Symbol(table)] = ops else {
                    return Err("operands".into());
                };
                let labels = self
                    .tables
                    .get(table.as_str())
                    .ok_or_else(|| format!("unknown branch table `{table}`"))?;
                let targets = labels
                    .iter()
                    .map(|l| {
                        self.labels
                            .get(l)
                            .copied()
                            .ok_or_else(|| format!("unknown label `{l}`"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let index = self.src(index, ValueKind::Int { bits: 32 })?;
                return Ok(Op::Brx {
                    index,
                    targets: targets.into_boxed_slice(),
                    reconverge: EXIT_PC,
                });
            }
            "call" => return self.decode_call(inst),
            "ret" => return Ok(Op::Ret),
            "exit" => return Ok(Op::Exit),
            "trap" => return Ok(Op::Trap),
            "activemask" => {
                return Ok(Op::Activemask {
                    dst: self.reg(ops.first().ok_or("operands")?)?,
                })
            }
            "vote" => {
                let mode = modifier_choice(
                    opcode,
                    &[
                        ("all", VoteMode::All),
                        ("any", VoteMode::Any),
                        ("uni", VoteMode::Uni),
                        ("ballot", VoteMode::Ballot),
                    ],
                )
                .ok_or("vote mode")?;
                let (dst, pred) = match ops {
                    [d, p] | [d, p, _] => (d, p),
                    _ => return Err("operands".into()),
                };
                return Ok(Op::Vote {
                    mode,
                    dst: self.reg(dst)?,
                    pred: self.src(pred, ValueKind::Pred)?,
                });
            }
            "shfl" => {
                let mode = modifier_choice(
                    opcode,
                    &[
                        ("up", ShflMode::Up),
                        ("down", ShflMode::Down),
                        ("bfly", ShflMode::Bfly),
                        ("idx", ShflMode::Idx),
                    ],
                )
                .ok_or("shfl mode")?;
                let (dst, a, b, c) = match ops {
                    [d, a, b, c, _] | [d, a, b, c] => (d, a, b, c),
                    _ => return Err("operands".into()),
                };
                let (dst, dst_pred) = self.dst_pair(dst)?;
                let int = ValueKind::Int { bits: 32 };
                return Ok(Op::Shfl {
                    mode,
                    dst,
                    dst_pred,
                    a: self.src(a, int)?,
                    b: self.src(b, int)?,
                    c: self.src(c, int)?,
                });
            }
            "match" => {
                let (dst, a) = match ops {
                    [d, a, _] => (d, a),
                    _ => return Err("operands".into()),
                };
                let (dst, dst_pred) = self.dst_pair(dst)?;
                let wide = has("b64");
                return Ok(Op::Match {
                    all: has("all"),
                    wide,
                    dst,
                    dst_pred,
                    a: self.src(
                        a,
                        ValueKind::Int {
                            bits: if wide { 64 } else { 32 },
                        },
                    )?,
                });
            }
            "redux" => {
                let op = modifier_choice(
                    opcode,
                    &[
                        ("add", ReduxOp::Add),
                        ("min", ReduxOp::Min),
                        ("max", ReduxOp::Max),
                        ("and", ReduxOp::And),
                        ("or", ReduxOp::Or),
                        ("xor", ReduxOp::Xor),
                    ],
                )
                .ok_or("redux operation")?;
                let [dst, a, _] = ops else {
                    return Err("operands".into());
                };
                return Ok(Op::Redux {
                    op,
                    signed: has("s32"),
                    dst: self.reg(dst)?,
                    a: self.src(a, ValueKind::Int { bits: 32 })?,
                });
            }
            "tex" => return self.decode_tex(inst),
            _ => {}
        }
        let Some(op) = alu::decode(opcode)? else {
            return Err("not supported by the CPU target".into());
        };
        self.decode_alu(op, ops)
    }

    fn decode_alu(&mut self, op: AluOp, ops: &[Operand]) -> Result<Op, String> {
        let count = op.source_count();
        if count > 4 || ops.len() != count + 1 {
            return Err(format!("expected {} operands", count + 1));
        }
        let (dst, second) = self.dst_pair(&ops[0])?;
        let mut srcs = [Src::Imm(0); 4];
        for (i, operand) in ops[1..].iter().enumerate() {
            srcs[i] = self.src(operand, op.source_kind(i))?;
        }
        Ok(Op::Alu(Box::new(AluInst::new(op, dst, second, srcs))))
    }

    fn dst_pair(&self, operand: &Operand) -> Result<(u32, u32), String> {
        match operand {
            Operand::RegisterPair(a, b) => Ok((
                self.reg(&Operand::Register(a.clone()))?,
                self.reg(&Operand::Register(b.clone()))?,
            )),
            other => Ok((self.reg(other)?, NO_REG)),
        }
    }

    fn dsts(&self, operand: &Operand) -> Result<([u32; 4], u8), String> {
        let mut dsts = [NO_REG; 4];
        match operand {
            Operand::Vector(items) if items.len() <= 4 => {
                for (slot, item) in dsts.iter_mut().zip(items) {
                    *slot = self.reg(item)?;
                }
                Ok((dsts, items.len() as u8))
            }
            Operand::Vector(_) => Err("vector too wide".into()),
            other => {
                dsts[0] = self.reg(other)?;
                Ok((dsts, 1))
            }
        }
    }

    fn decode_mov(&mut self, inst: &Instruction) -> Result<Op, String> {
        let [dst, src] = inst.operands.as_slice() else {
            return Err("operands".into());
        };
        let ty = inst.facts.data_type.ok_or("mov without a type")?;
        let bits = (ty.bytes() * 8).min(64) as u8;
        let kind = value_kind(Some(ty));
        match (dst, src) {
            (Operand::Vector(parts), src) => {
                let (dsts, count) = self.dsts(&Operand::Vector(parts.clone()))?;
                let part_bits = bits / count.max(1);
                Ok(Op::Unpack {
                    dsts,
                    count,
                    src: self.src(src, kind)?,
                    bits: part_bits,
                })
            }
            (dst, Operand::Vector(parts)) if parts.len() <= 4 && !parts.is_empty() => {
                let part_bits = bits / parts.len() as u8;
                let mut srcs = [Src::Imm(0); 4];
                for (slot, part) in srcs.iter_mut().zip(parts) {
                    *slot = self.src(part, ValueKind::Int { bits: part_bits })?;
                }
                Ok(Op::Pack {
                    dst: self.reg(dst)?,
                    parts: srcs,
                    count: parts.len() as u8,
                    bits: part_bits,
                })
            }
            (dst, src) => Ok(Op::Mov {
                dst: self.reg(dst)?,
                src: self.src(src, kind)?,
                mask: if ty == ptx_lexer::DataType::Pred {
                    u64::MAX
                } else {
                    alu::low_mask(bits)
                },
            }),
        }
    }

    fn decode_atom(&mut self, inst: &Instruction) -> Result<Op, String> {
        let opcode = &inst.opcode;
        let is_red = opcode.base() == "red";
        let mut op = None;
        let mut ty = None;
        for m in opcode.modifiers() {
            let o = match m {
                "add" => Some(AtomOp::Add),
                "min" => Some(AtomOp::Min),
                "max" => Some(AtomOp::Max),
                "inc" => Some(AtomOp::Inc),
                "dec" => Some(AtomOp::Dec),
                "and" => Some(AtomOp::And),
                "or" => Some(AtomOp::Or),
                "xor" => Some(AtomOp::Xor),
                "exch" => Some(AtomOp::Exch),
                "cas" => Some(AtomOp::Cas),
                _ => None,
            };
            if o.is_some() {
                op = o;
                continue;
            }
            let t = match m {
                "u32" | "b32" => Some(AtomType::U32),
                "s32" => Some(AtomType::S32),
                "u64" | "b64" => Some(AtomType::U64),
                "s64" => Some(AtomType::S64),
                "f32" => Some(AtomType::F32),
                "f64" => Some(AtomType::F64),
                "relaxed" | "acquire" | "release" | "acq_rel" | "sys" | "gpu" | "cta"
                | "global" | "shared" | "shared::cta" | "generic" | "noftz" => None,
                other => return Err(format!("atomic modifier `.{other}`")),
            };
            if t.is_some() {
                ty = t;
            }
        }
        let op = op.ok_or("atomic operation")?;
        let ty = ty.ok_or("atomic type")?;
        if matches!(ty, AtomType::F32 | AtomType::F64) && !matches!(op, AtomOp::Add | AtomOp::Exch)
        {
            return Err("floating-point atomic other than add/exch".into());
        }
        let ops = inst.operands.as_slice();
        let (dst, addr, rest) = if is_red {
            let [addr, rest @ ..] = ops else {
                return Err("operands".into());
            };
            (NO_REG, addr, rest)
        } else {
            let [dst, addr, rest @ ..] = ops else {
                return Err("operands".into());
            };
            (self.reg(dst)?, addr, rest)
        };
        let kind = match ty {
            AtomType::F32 => ValueKind::F32,
            AtomType::F64 => ValueKind::F64,
            t => ValueKind::Int {
                bits: (t.bytes() * 8) as u8,
            },
        };
        let (b, c) = match (op, rest) {
            (AtomOp::Cas, [b, c]) => (self.src(b, kind)?, self.src(c, kind)?),
            (AtomOp::Cas, _) => return Err("operands".into()),
            (_, [b]) => (self.src(b, kind)?, Src::Imm(0)),
            _ => return Err("operands".into()),
        };
        let addr = self.addr(addr)?;
        let space = match self.space(inst.facts.state_space, &addr)? {
            Space::Local => return Err("atomics on local memory".into()),
            s => s,
        };
        Ok(Op::Atom {
            space,
            addr,
            op,
            ty,
            dst,
            b,
            c,
        })
    }

    fn decode_bar(&mut self, inst: &Instruction) -> Result<Op, String> {
        let opcode = &inst.opcode;
        let has = |m: &str| opcode.has_modifier(m);
        let ops = inst.operands.as_slice();
        let int = ValueKind::Int { bits: 32 };
        if has("warp") {
            // `bar.warp.sync`: lanes of a warp run in lockstep here.
            return Ok(Op::Nop);
        }
        if has("red") {
            let kind = modifier_choice(
                opcode,
                &[
                    ("popc", BarKind::RedPopc),
                    ("and", BarKind::RedAnd),
                    ("or", BarKind::RedOr),
                ],
            )
            .ok_or("barrier reduction")?;
            let (dst, id, count, pred) = match ops {
                [d, id, p] => (d, id, None, p),
                [d, id, n, p] => (d, id, Some(n), p),
                _ => return Err("operands".into()),
            };
            return Ok(Op::Bar {
                kind,
                dst: self.reg(dst)?,
                id: self.src(id, int)?,
                count: count.map(|c| self.src(c, int)).transpose()?,
                pred: self.src(pred, ValueKind::Pred)?,
            });
        }
        let kind = if has("arrive") {
            BarKind::Arrive
        } else if has("sync") || opcode.as_str() == "bar" || has("cta") {
            BarKind::Sync
        } else {
            return Err("barrier kind".into());
        };
        let (id, count) = match ops {
            [id] => (self.src(id, int)?, None),
            [id, n] => (self.src(id, int)?, Some(self.src(n, int)?)),
            _ => return Err("operands".into()),
        };
        Ok(Op::Bar {
            kind,
            id,
            count,
            dst: NO_REG,
            pred: Src::Imm(0),
        })
    }

    fn call_slot(&mut self, operand: &Operand, is_result: bool) -> Result<CallSlot, String> {
        if let Operand::Symbol(name) | Operand::Register(name) = operand {
            match self.lookup(name) {
                Some(Binding::Frame { offset, bytes }) => {
                    return Ok(CallSlot::Frame { offset, bytes })
                }
                Some(Binding::Reg(r)) if is_result => return Ok(CallSlot::Register(r)),
                _ => {}
            }
        }
        if is_result {
            return Err(format!("call result `{operand}`"));
        }
        Ok(CallSlot::Value(
            self.src(operand, ValueKind::Int { bits: 64 })?,
        ))
    }

    fn decode_call(&mut self, inst: &Instruction) -> Result<Op, String> {
        let mut ops = inst.operands.as_slice();
        let mut rets = Vec::new();
        if let Some((Operand::List(items), rest)) = ops.split_first() {
            for item in items {
                rets.push(self.call_slot(item, true)?);
            }
            ops = rest;
        }
        let (callee, rest) = ops.split_first().ok_or("call without a target")?;
        let mut args = Vec::new();
        if let Some(Operand::List(items)) = rest.first() {
            for item in items {
                args.push(self.call_slot(item, false)?);
            }
        }
        let target = match callee {
            Operand::Symbol(name) if self.lookup(name).is_none() => {
                if let Some(&f) = self.names.functions.get(name.as_str()) {
                    self.callees.push(f);
                    CallTarget::Direct(f)
                } else if self.names.externs.contains_key(name.as_str()) {
                    CallTarget::Builtin(match name.as_str() {
                        "vprintf" => Builtin::Vprintf,
                        "__assertfail" => Builtin::AssertFail,
                        "malloc" => Builtin::Malloc,
                        "free" => Builtin::Free,
                        other => return Err(format!("extern function `{other}` is not linked")),
                    })
                } else {
                    return Err(format!("unknown function `{name}`"));
                }
            }
            other => {
                self.indirect_calls = true;
                CallTarget::Indirect(self.src(other, ValueKind::Int { bits: 64 })?)
            }
        };
        Ok(Op::Call(Box::new(CallInst { target, args, rets })))
    }

    fn decode_tex(&mut self, inst: &Instruction) -> Result<Op, String> {
        let opcode = &inst.opcode;
        let mods: Vec<&str> = opcode.modifiers().collect();
        // tex.{1d,2d,3d}.v4.<dtype>.{s32,f32}: fetches by texel index or by coordinates.
        let unsupported = || "only tex.{1d,2d,3d}.v4.{f32,s32,u32}.{s32,f32} fetches are supported";
        let [geometry, "v4", d, c] = mods.as_slice() else {
            return Err(unsupported().into());
        };
        let dims = match *geometry {
            "1d" => 1u8,
            "2d" => 2,
            "3d" => 3,
            _ => return Err(unsupported().into()),
        };
        let result = match *d {
            "f32" => crate::ChannelKind::Float,
            "s32" => crate::ChannelKind::Signed,
            "u32" => crate::ChannelKind::Unsigned,
            _ => return Err("texture result type".into()),
        };
        let (float_coords, kind) = match *c {
            "s32" => (false, ValueKind::Int { bits: 32 }),
            "f32" => (true, ValueKind::F32),
            _ => return Err(unsupported().into()),
        };
        let [dst, Operand::Address(items)] = inst.operands.as_slice() else {
            return Err("operands".into());
        };
        let [handle, Operand::Vector(coord_operands)] = items.as_slice() else {
            return Err("texture operands".into());
        };
        // 1-D and 2-D name 1 and 2 coordinates, 3-D four (the fourth is ignored).
        let expected = if dims == 3 { 4 } else { usize::from(dims) };
        if coord_operands.len() != expected {
            return Err("texture coordinates".into());
        }
        let mut coords = [Src::Imm(0), Src::Imm(0), Src::Imm(0)];
        for (slot, operand) in coords.iter_mut().zip(coord_operands) {
            *slot = self.src(operand, kind)?;
        }
        let handle = self.src(handle, ValueKind::Int { bits: 64 })?;
        let (dsts, count) = self.dsts(dst)?;
        if count != 4 {
            return Err("texture result must be a 4-vector".into());
        }
        Ok(Op::Tex(Box::new(TexInst {
            dsts,
            handle,
            coords,
            dims,
            float_coords,
            result,
        })))
    }
}

/// The value paired with the first of `choices`' modifiers that `opcode` carries.
fn modifier_choice<T: Copy>(opcode: &ptx_lexer::Opcode, choices: &[(&str, T)]) -> Option<T> {
    choices
        .iter()
        .find(|(modifier, _)| opcode.has_modifier(modifier))
        .map(|&(_, value)| value)
}

fn offset_src(base: Src, offset: i64) -> Option<Src> {
    Some(match base {
        Src::Imm(v) => Src::Imm(v.wrapping_add(offset as u64)),
        Src::KernelParam(o) => Src::KernelParam(o.wrapping_add(offset)),
        Src::Frame(o) => Src::Frame(o.wrapping_add(offset)),
        Src::Shared { var, offset: o } => Src::Shared {
            var,
            offset: o.wrapping_add(offset),
        },
        _ => return None,
    })
}

fn mem_type(inst: &Instruction) -> Result<MemType, String> {
    use ptx_lexer::DataType as D;
    let ty = inst.facts.data_type.ok_or("memory access without a type")?;
    if ty == D::B128 {
        return Err(".b128 accesses".into());
    }
    Ok(MemType {
        bytes: ty.bytes() as u8,
        signed: matches!(ty, D::S8 | D::S16 | D::S32 | D::S64),
    })
}

/// How literals for an instruction of type `ty` parse.
pub(crate) fn value_kind(ty: Option<ptx_lexer::DataType>) -> ValueKind {
    use ptx_lexer::DataType as D;
    match ty {
        Some(D::F32) => ValueKind::F32,
        Some(D::F64) => ValueKind::F64,
        Some(D::F16 | D::Bf16) => ValueKind::F16,
        Some(D::Pred) => ValueKind::Pred,
        Some(t) => ValueKind::Int {
            bits: (t.bytes() * 8).min(64) as u8,
        },
        None => ValueKind::Int { bits: 64 },
    }
}

/// The bits of an immediate operand read as `kind`.
pub(crate) fn parse_immediate(operand: &Operand, kind: ValueKind) -> Option<u64> {
    let text = match operand {
        Operand::Integer(t) | Operand::Float(t) => t.as_str(),
        _ => return None,
    };
    let is_hex_float = {
        let body = text.strip_prefix('-').unwrap_or(text);
        body.len() > 2 && matches!(&body[..2], "0f" | "0F" | "0d" | "0D")
    };
    let is_float_literal = matches!(operand, Operand::Float(_)) || is_hex_float;
    match kind {
        ValueKind::Int { .. } | ValueKind::Pred => {
            if is_float_literal {
                // `0f3F800000` in an integer context is its bit pattern.
                let body = text.strip_prefix('-');
                if body.is_some() {
                    return None;
                }
                if let Some(hex) = text.strip_prefix("0f").or(text.strip_prefix("0F")) {
                    return u32::from_str_radix(hex, 16).ok().map(u64::from);
                }
                if let Some(hex) = text.strip_prefix("0d").or(text.strip_prefix("0D")) {
                    return u64::from_str_radix(hex, 16).ok();
                }
                return None;
            }
            parse_integer(text).map(|v| v as u64)
        }
        ValueKind::F32 => {
            if let Some(hex) = text.strip_prefix("0f").or(text.strip_prefix("0F")) {
                return u32::from_str_radix(hex, 16).ok().map(u64::from);
            }
            let v = if is_float_literal {
                parse_float(text)?
            } else {
                parse_integer(text)? as f64
            };
            Some(u64::from((v as f32).to_bits()))
        }
        ValueKind::F64 => {
            if let Some(hex) = text.strip_prefix("0d").or(text.strip_prefix("0D")) {
                return u64::from_str_radix(hex, 16).ok();
            }
            let v = if is_float_literal {
                parse_float(text)?
            } else {
                parse_integer(text)? as f64
            };
            Some(v.to_bits())
        }
        ValueKind::F16 => {
            if !is_float_literal {
                // f16 instructions take bit patterns as integers (`0x3C00`).
                return parse_integer(text).map(|v| v as u64 & 0xFFFF);
            }
            Some(u64::from(f32_to_f16_bits(parse_float(text)? as f32)))
        }
    }
}

/// IEEE binary16 bits of `value`, rounded to nearest even.
pub(crate) fn f32_to_f16_bits(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xFF) as i32;
    let mantissa = bits & 0x7F_FFFF;
    if exponent == 0xFF {
        let nan = if mantissa != 0 { 0x200 } else { 0 };
        return sign | 0x7C00 | nan;
    }
    let e = exponent - 127 + 15;
    if e >= 0x1F {
        return sign | 0x7C00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = mantissa | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut r = m >> shift;
        if rest > half || (rest == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (mantissa >> 13);
    let rest = mantissa & 0x1FFF;
    if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
        r += 1;
    }
    sign | r as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immediates_by_kind() {
        let f = |t: &str| Operand::Float(t.into());
        let i = |t: &str| Operand::Integer(t.into());
        assert_eq!(
            parse_immediate(&f("0f3F800000"), ValueKind::F32),
            Some(0x3F80_0000)
        );
        assert_eq!(
            parse_immediate(&f("0f3F800000"), ValueKind::F64),
            Some(1.0f64.to_bits())
        );
        assert_eq!(
            parse_immediate(&f("0d3FF0000000000000"), ValueKind::F64),
            Some(1.0f64.to_bits())
        );
        assert_eq!(
            parse_immediate(&f("1.5"), ValueKind::F32),
            Some(u64::from(1.5f32.to_bits()))
        );
        assert_eq!(
            parse_immediate(&f("0f3F800000"), ValueKind::Int { bits: 32 }),
            Some(0x3F80_0000)
        );
        assert_eq!(
            parse_immediate(&i("-1"), ValueKind::Int { bits: 32 }),
            Some(u64::MAX)
        );
        assert_eq!(
            parse_immediate(&i("2"), ValueKind::F32),
            Some(u64::from(2f32.to_bits()))
        );
        assert_eq!(parse_immediate(&f("1.0"), ValueKind::F16), Some(0x3C00));
        assert_eq!(f32_to_f16_bits(65504.0), 0x7BFF);
        assert_eq!(f32_to_f16_bits(1e6), 0x7C00);
        assert_eq!(f32_to_f16_bits(-0.5), 0xB800);
        assert_eq!(f32_to_f16_bits(5.96e-8), 0x0001);
    }

    #[test]
    fn special_registers() {
        assert_eq!(Special::from_name("%tid.y"), Some(Special::Tid(1)));
        assert_eq!(Special::from_name("%nctaid.z"), Some(Special::Nctaid(2)));
        assert_eq!(
            Special::from_name("%lanemask_lt"),
            Some(Special::LanemaskLt)
        );
        assert_eq!(Special::from_name("%envreg3"), Some(Special::EnvReg(3)));
        assert_eq!(Special::from_name("%envreg31"), Some(Special::EnvReg(31)));
        assert_eq!(Special::from_name("%envreg32"), None);
        assert_eq!(Special::from_name("%r1"), None);
    }
}
