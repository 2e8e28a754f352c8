//! nvprof-style metric groups computed from cuda-flux's per-opcode histograms.
//!
//! [`FAMILIES`] is the one table that says what every PTX opcode family counts as; `docs/metrics.md`
//! lists the same table with the reasons. Everything else here derives from it:
//! [`classify`] turns a full opcode (`fma.rn.f32`) into its contributions, and [`Metrics::of`]
//! sums those over a histogram, warp counts for warp-level metrics (`inst_executed*`), thread
//! counts for thread-level ones (`flop_count_*`, `inst_fp_*`, `inst_integer`, ...), as nvprof
//! defines them.

use std::fmt;

use host_runtime::report::{Counts, OpcodeCounts};
use ptx_lexer::{DataType, InstructionFacts, Opcode, StateSpace};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// Floating-point operation kind of an arithmetic family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flop {
    /// `flop_count_*_add` (subtraction is an add).
    Add,
    /// `flop_count_*_mul`.
    Mul,
    /// `flop_count_*_fma`: counts once there, twice in `flop_count_*`.
    Fma,
    /// `flop_count_sp_special` for single precision; no flop count for other precisions
    /// (nvprof has no double- or half-precision special-operation metric).
    Special,
    /// Floating-point instruction that is not a flop (compare, min/max, abs, neg, select).
    None,
}

/// Memory operation of a memory family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemOp {
    Load,
    Store,
    /// Read-modify-write that returns a value (`atom`).
    Atomic,
    /// Read-modify-write without a result (`red`).
    Reduction,
    /// No data moved to or from registers (`prefetch`, `cp.async`, bulk copies): only
    /// `inst_compute_ld_st`.
    Other,
}

/// Where an operand type is read from, for families classified by data type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeFrom {
    /// The first type modifier (the result's, e.g. `setp.lt.f32`, `selp.f64`).
    First,
    /// The last type modifier (`set.lt.u32.f32` compares `f32` values).
    Last,
}

/// What a PTX opcode family counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Arithmetic, comparison or selection: `inst_fp_16/32/64` by its floating-point type
    /// (`inst_integer` for integer and bit types), and flops for floating-point types.
    Arith(Flop, TypeFrom),
    /// Bitwise and bit-field operations: `inst_integer`.
    Logic,
    /// `inst_bit_convert`.
    Convert,
    /// `inst_control`.
    Control,
    /// `inst_compute_ld_st`, and the warp-level `inst_executed_<space>_<op>` group of its state
    /// space.
    Memory(MemOp),
    /// `inst_inter_thread_communication`.
    Communication,
    /// `inst_misc`.
    Misc,
    /// Texture and surface access: in no `inst_*` class (nvprof's classes have no texture
    /// class); counted in `inst_executed` and, by `features`, as texture memory.
    Texture,
    /// Tensor-core matrix operations: in no `inst_*` class and no flop count; counted in
    /// `inst_executed`.
    Tensor,
}

/// One row of the table: an opcode family (the opcode's first dot-separated components) and
/// what it counts as.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// `add`, or a longer prefix such as `cp.async.wait_group`; the longest matching prefix wins.
    pub name: &'static str,
    pub kind: Kind,
}

const fn fam(name: &'static str, kind: Kind) -> Family {
    Family { name, kind }
}

use Kind::*;
use TypeFrom::{First, Last};

/// THE table: every PTX opcode family and what it counts as (see `docs/metrics.md`).
pub static FAMILIES: &[Family] = &[
    // Arithmetic with flops for floating-point types.
    fam("add", Arith(Flop::Add, First)),
    fam("sub", Arith(Flop::Add, First)),
    fam("mul", Arith(Flop::Mul, First)),
    fam("mad", Arith(Flop::Fma, First)),
    // Extended-precision integer arithmetic with carry (`addc.cc.u32`, `madc.hi.u32`): integer.
    fam("addc", Arith(Flop::Add, First)),
    fam("subc", Arith(Flop::Add, First)),
    fam("madc", Arith(Flop::Fma, First)),
    fam("fma", Arith(Flop::Fma, First)),
    // Special functions (MUFU and friends); integer `div` is plain integer arithmetic.
    fam("div", Arith(Flop::Special, First)),
    fam("sqrt", Arith(Flop::Special, First)),
    fam("rsqrt", Arith(Flop::Special, First)),
    fam("rcp", Arith(Flop::Special, First)),
    fam("sin", Arith(Flop::Special, First)),
    fam("cos", Arith(Flop::Special, First)),
    fam("lg2", Arith(Flop::Special, First)),
    fam("ex2", Arith(Flop::Special, First)),
    fam("tanh", Arith(Flop::Special, First)),
    // Arithmetic without flops: classified by type only.
    fam("rem", Arith(Flop::None, First)),
    fam("abs", Arith(Flop::None, First)),
    fam("neg", Arith(Flop::None, First)),
    fam("min", Arith(Flop::None, First)),
    fam("max", Arith(Flop::None, First)),
    fam("mul24", Arith(Flop::None, First)),
    fam("mad24", Arith(Flop::None, First)),
    fam("sad", Arith(Flop::None, First)),
    fam("dp4a", Arith(Flop::None, First)),
    fam("dp2a", Arith(Flop::None, First)),
    fam("testp", Arith(Flop::None, First)),
    fam("copysign", Arith(Flop::None, First)),
    fam("setp", Arith(Flop::None, First)),
    fam("set", Arith(Flop::None, Last)),
    fam("selp", Arith(Flop::None, First)),
    fam("slct", Arith(Flop::None, First)),
    fam("cvta", Arith(Flop::None, First)),
    fam("vadd", Arith(Flop::None, First)),
    fam("vsub", Arith(Flop::None, First)),
    fam("vabsdiff", Arith(Flop::None, First)),
    fam("vmin", Arith(Flop::None, First)),
    fam("vmax", Arith(Flop::None, First)),
    fam("vshl", Arith(Flop::None, First)),
    fam("vshr", Arith(Flop::None, First)),
    fam("vmad", Arith(Flop::None, First)),
    fam("vset", Arith(Flop::None, First)),
    fam("vadd2", Arith(Flop::None, First)),
    fam("vsub2", Arith(Flop::None, First)),
    fam("vavrg2", Arith(Flop::None, First)),
    fam("vabsdiff2", Arith(Flop::None, First)),
    fam("vmin2", Arith(Flop::None, First)),
    fam("vmax2", Arith(Flop::None, First)),
    fam("vset2", Arith(Flop::None, First)),
    fam("vadd4", Arith(Flop::None, First)),
    fam("vsub4", Arith(Flop::None, First)),
    fam("vavrg4", Arith(Flop::None, First)),
    fam("vabsdiff4", Arith(Flop::None, First)),
    fam("vmin4", Arith(Flop::None, First)),
    fam("vmax4", Arith(Flop::None, First)),
    fam("vset4", Arith(Flop::None, First)),
    // Bitwise and bit-field.
    fam("and", Logic),
    fam("or", Logic),
    fam("xor", Logic),
    fam("not", Logic),
    fam("cnot", Logic),
    fam("shl", Logic),
    fam("shr", Logic),
    fam("lop3", Logic),
    fam("shf", Logic),
    fam("prmt", Logic),
    fam("bfe", Logic),
    fam("bfi", Logic),
    fam("bfind", Logic),
    fam("brev", Logic),
    fam("popc", Logic),
    fam("clz", Logic),
    fam("fns", Logic),
    fam("bmsk", Logic),
    fam("szext", Logic),
    // Conversion.
    fam("cvt", Convert),
    // Control flow.
    fam("bra", Control),
    fam("brx", Control),
    fam("call", Control),
    fam("ret", Control),
    fam("exit", Control),
    fam("trap", Control),
    fam("brkpt", Control),
    // Memory.
    fam("ld", Memory(MemOp::Load)),
    fam("ldu", Memory(MemOp::Load)),
    fam("st", Memory(MemOp::Store)),
    fam("atom", Memory(MemOp::Atomic)),
    fam("red", Memory(MemOp::Reduction)),
    fam("prefetch", Memory(MemOp::Other)),
    fam("prefetchu", Memory(MemOp::Other)),
    fam("cp.async", Memory(MemOp::Other)),
    fam("cp.reduce", Memory(MemOp::Other)),
    fam("multimem", Memory(MemOp::Other)),
    fam("ldmatrix", Memory(MemOp::Load)),
    fam("stmatrix", Memory(MemOp::Store)),
    fam("wmma.load", Memory(MemOp::Load)),
    fam("wmma.store", Memory(MemOp::Store)),
    // Waiting for or committing asynchronous copies moves nothing.
    fam("cp.async.commit_group", Misc),
    fam("cp.async.wait_group", Misc),
    fam("cp.async.wait_all", Misc),
    fam("cp.async.mbarrier", Misc),
    fam("cp.async.bulk.commit_group", Misc),
    fam("cp.async.bulk.wait_group", Misc),
    // Inter-thread communication.
    fam("shfl", Communication),
    fam("vote", Communication),
    fam("activemask", Communication),
    fam("match", Communication),
    fam("redux", Communication),
    fam("elect", Communication),
    // Miscellaneous: moves, synchronisation, queries.
    fam("mov", Misc),
    fam("bar", Misc),
    fam("barrier", Misc),
    fam("membar", Misc),
    fam("fence", Misc),
    fam("mbarrier", Misc),
    fam("nanosleep", Misc),
    fam("pmevent", Misc),
    fam("griddepcontrol", Misc),
    fam("isspacep", Misc),
    fam("mapa", Misc),
    fam("getctarank", Misc),
    fam("setmaxnreg", Misc),
    fam("alloca", Misc),
    fam("stacksave", Misc),
    fam("stackrestore", Misc),
    fam("createpolicy", Misc),
    fam("applypriority", Misc),
    fam("discard", Misc),
    fam("tensormap", Misc),
    fam("clusterlaunchcontrol", Misc),
    fam("wgmma.fence", Misc),
    fam("wgmma.commit_group", Misc),
    fam("wgmma.wait_group", Misc),
    // Texture and surface.
    fam("tex", Texture),
    fam("tld4", Texture),
    fam("txq", Texture),
    fam("istypep", Texture),
    fam("suld", Texture),
    fam("sust", Texture),
    fam("sured", Texture),
    fam("suq", Texture),
    // Tensor cores.
    fam("mma", Tensor),
    fam("wmma", Tensor),
    fam("wgmma", Tensor),
    fam("tcgen05", Tensor),
];

/// The family of a full opcode: the longest table entry whose dot-separated components start
/// the opcode's (`cp.async.wait_group.1` is `cp.async.wait_group`, `cp.async.ca.shared.global`
/// is `cp.async`, `add.f32` is `add`). `None` for opcodes not in the table.
pub fn family_of(opcode: &str) -> Option<&'static Family> {
    FAMILIES
        .iter()
        .filter(|f| {
            opcode == f.name
                || (opcode.starts_with(f.name)
                    && opcode.as_bytes().get(f.name.len()) == Some(&b'.'))
        })
        .max_by_key(|f| f.name.len())
}

/// Thread-level instruction class (`inst_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadClass {
    Fp16,
    Fp32,
    Fp64,
    Integer,
    BitConvert,
    Control,
    ComputeLdSt,
    Misc,
    InterThreadCommunication,
}

/// Floating-point precision of a flop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// `f16`, `f16x2`, `bf16`, `bf16x2`.
    Half,
    /// `f32`, `f32x2`.
    Single,
    /// `f64`.
    Double,
}

/// Memory state space of a warp-level memory group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    Global,
    Shared,
    Local,
    /// No state space named (cuda-flux's own `inst_executed_generic_*` groups).
    Generic,
}

/// What one execution of an opcode adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Class {
    /// Its thread-level class; `None` for texture, tensor and unknown opcodes.
    pub thread: Option<ThreadClass>,
    /// Its warp-level memory group, if any.
    pub memory: Option<(Space, MemOp)>,
    /// Its flops: precision, kind, and operations per thread (2 for `x2` packed types).
    pub flops: Option<(Precision, Flop, u64)>,
}

/// A floating-point type among the opcode's modifiers, and how many values it packs.
fn float_type(modifier: &str) -> Option<(Precision, u64)> {
    // f32x2 (PTX 8.6) is not a ptx_lexer DataType; it packs two single-precision values.
    if modifier == "f32x2" {
        return Some((Precision::Single, 2));
    }
    match DataType::from_modifier(modifier)? {
        DataType::F16 | DataType::Bf16 => Some((Precision::Half, 1)),
        DataType::F16x2 | DataType::Bf16x2 => Some((Precision::Half, 2)),
        DataType::F32 => Some((Precision::Single, 1)),
        DataType::F64 => Some((Precision::Double, 1)),
        _ => None,
    }
}

fn is_type(modifier: &str) -> bool {
    modifier == "f32x2" || DataType::from_modifier(modifier).is_some()
}

/// Classifies one full opcode by [`FAMILIES`].
pub fn classify(opcode: &str) -> Class {
    let Some(family) = family_of(opcode) else {
        return Class::default();
    };
    match family.kind {
        Arith(flop, from) => {
            let op = Opcode::new(opcode);
            let mut types = op.modifiers().filter(|m| is_type(m));
            let ty = match from {
                First => types.next(),
                Last => types.last(),
            };
            match ty.and_then(float_type) {
                Some((precision, lanes)) => {
                    let thread = match precision {
                        Precision::Half => ThreadClass::Fp16,
                        Precision::Single => ThreadClass::Fp32,
                        Precision::Double => ThreadClass::Fp64,
                    };
                    let counted = match flop {
                        Flop::None => false,
                        Flop::Special => precision == Precision::Single,
                        _ => true,
                    };
                    Class {
                        thread: Some(thread),
                        memory: None,
                        flops: counted.then_some((precision, flop, lanes)),
                    }
                }
                None => Class {
                    thread: Some(ThreadClass::Integer),
                    ..Class::default()
                },
            }
        }
        Logic => Class {
            thread: Some(ThreadClass::Integer),
            ..Class::default()
        },
        Convert => Class {
            thread: Some(ThreadClass::BitConvert),
            ..Class::default()
        },
        Control => Class {
            thread: Some(ThreadClass::Control),
            ..Class::default()
        },
        Communication => Class {
            thread: Some(ThreadClass::InterThreadCommunication),
            ..Class::default()
        },
        Misc => Class {
            thread: Some(ThreadClass::Misc),
            ..Class::default()
        },
        Memory(op) => {
            let space = named_space(opcode);
            let memory = match (space, op) {
                (_, MemOp::Other) => None,
                (Some(StateSpace::Global), op) => Some((Space::Global, op)),
                (Some(StateSpace::Shared), op) => Some((Space::Shared, op)),
                (Some(StateSpace::Local), op) => Some((Space::Local, op)),
                (Some(StateSpace::Generic) | None, op) => Some((Space::Generic, op)),
                _ => None,
            };
            Class {
                thread: Some(ThreadClass::ComputeLdSt),
                memory,
                flops: None,
            }
        }
        Texture | Tensor => Class::default(),
    }
}

/// The state space an instruction names (`Generic` for memory instructions naming none).
pub fn named_space(opcode: &str) -> Option<StateSpace> {
    InstructionFacts::of(&Opcode::new(opcode)).state_space
}

/// A metric's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A count. 128 bits wide: a metric derived from 64-bit counts (a flop count is twice an
    /// instruction count, summed over opcodes) may exceed `u64::MAX` and is still exact.
    Count(u128),
    /// A percentage; `None` when undefined (nothing executed).
    Percent(Option<f64>),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Count(n) => write!(f, "{n}"),
            Value::Percent(Some(p)) => write!(f, "{p:.2}"),
            Value::Percent(None) => Ok(()),
        }
    }
}

impl Value {
    /// The value as a float (`None` for an undefined percentage).
    pub fn as_f64(self) -> Option<f64> {
        match self {
            Value::Count(n) => Some(n as f64),
            Value::Percent(p) => p,
        }
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Count(n) => s.serialize_u128(*n),
            Value::Percent(Some(p)) => s.serialize_f64(*p),
            Value::Percent(None) => s.serialize_none(),
        }
    }
}

/// Defines [`Metric`] from one list of variants and names, so that a name exists once.
macro_rules! metrics {
    ($($variant:ident => $name:literal,)*) => {
        /// A metric, in output order. Names are nvprof's except the ones `docs/metrics.md` marks
        /// as cuda-flux's own (`thread_inst_executed`, `inst_executed_generic_*`). Every metric
        /// but the last, [`Metric::WarpExecutionEfficiency`] (a percentage), is a count.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Metric {
            $($variant,)*
        }

        impl Metric {
            /// Every metric, in output order.
            pub const ALL: &'static [Metric] = &[$(Metric::$variant,)*];

            /// The metric's name as written in the output (`inst_executed`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Metric::$variant => $name,)*
                }
            }
        }
    };
}

metrics! {
    InstExecuted => "inst_executed",
    ThreadInstExecuted => "thread_inst_executed",
    InstExecutedGlobalLoads => "inst_executed_global_loads",
    InstExecutedLocalLoads => "inst_executed_local_loads",
    InstExecutedSharedLoads => "inst_executed_shared_loads",
    InstExecutedGenericLoads => "inst_executed_generic_loads",
    InstExecutedGlobalStores => "inst_executed_global_stores",
    InstExecutedLocalStores => "inst_executed_local_stores",
    InstExecutedSharedStores => "inst_executed_shared_stores",
    InstExecutedGenericStores => "inst_executed_generic_stores",
    InstExecutedGlobalAtomics => "inst_executed_global_atomics",
    InstExecutedGlobalReductions => "inst_executed_global_reductions",
    InstExecutedSharedAtomics => "inst_executed_shared_atomics",
    InstExecutedGenericAtomics => "inst_executed_generic_atomics",
    FlopCountSp => "flop_count_sp",
    FlopCountSpAdd => "flop_count_sp_add",
    FlopCountSpMul => "flop_count_sp_mul",
    FlopCountSpFma => "flop_count_sp_fma",
    FlopCountSpSpecial => "flop_count_sp_special",
    FlopCountDp => "flop_count_dp",
    FlopCountDpAdd => "flop_count_dp_add",
    FlopCountDpMul => "flop_count_dp_mul",
    FlopCountDpFma => "flop_count_dp_fma",
    FlopCountHp => "flop_count_hp",
    FlopCountHpAdd => "flop_count_hp_add",
    FlopCountHpMul => "flop_count_hp_mul",
    FlopCountHpFma => "flop_count_hp_fma",
    InstFp16 => "inst_fp_16",
    InstFp32 => "inst_fp_32",
    InstFp64 => "inst_fp_64",
    InstInteger => "inst_integer",
    InstBitConvert => "inst_bit_convert",
    InstControl => "inst_control",
    InstComputeLdSt => "inst_compute_ld_st",
    InstMisc => "inst_misc",
    InstInterThreadCommunication => "inst_inter_thread_communication",
    WarpExecutionEfficiency => "warp_execution_efficiency",
}

/// The number of count metrics: every metric but the last.
const COUNTS: usize = Metric::ALL.len() - 1;

impl Metric {
    /// The metric of a name (`None` for a name that is none of ours).
    pub fn from_name(name: &str) -> Option<Metric> {
        Metric::ALL.iter().copied().find(|m| m.name() == name)
    }

    /// Its position in [`Metric::ALL`].
    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// SIMD efficiency (nvprof's `warp_execution_efficiency`): the share of a warp's 32 lanes that
/// run an instruction, thread instructions / (32 x warp instructions), in percent; `None`
/// when no warp instruction ran.
pub fn simd_efficiency(threads: impl Into<u128>, warps: impl Into<u128>) -> Option<f64> {
    simd_efficiency_scaled(threads.into(), warps.into(), 100.0)
}

/// [`simd_efficiency`] as a fraction (0 to 1) instead of a percentage.
pub fn simd_efficiency_fraction(threads: impl Into<u128>, warps: impl Into<u128>) -> Option<f64> {
    simd_efficiency_scaled(threads.into(), warps.into(), 1.0)
}

/// The one formula; `scale` multiplies before dividing (as the percentage always has, so that
/// its rounding, and the printed figures, stay as they were).
fn simd_efficiency_scaled(threads: u128, warps: u128, scale: f64) -> Option<f64> {
    (warps > 0).then(|| scale * threads as f64 / (32.0 * warps as f64))
}

/// One opcode's share of one count metric: (slot, per thread, per warp).
type Term = (usize, u128, u128);

/// What one execution of `opcode` adds to each count metric, as `(slot, per thread, per warp)`
/// terms: every count metric is linear in a histogram entry's thread and warp counts, so an
/// opcode is classified once per process (per-launch commands see the same opcodes millions
/// of times) and each entry costs a few multiply-adds.
fn with_contribution<R>(opcode: &str, use_terms: impl FnOnce(&[Term]) -> R) -> R {
    thread_local! {
        static CACHE: std::cell::RefCell<std::collections::HashMap<String, Vec<Term>>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    CACHE.with(|cache| {
        if let Some(terms) = cache.borrow().get(opcode) {
            return use_terms(terms);
        }
        let unit = |threads: u64, warps: u64| {
            let mut v = [0u128; COUNTS];
            add_entry(&mut v, opcode, Counts { threads, warps });
            v
        };
        let (per_thread, per_warp) = (unit(1, 0), unit(0, 1));
        let terms: Vec<Term> = (0..per_thread.len())
            .filter(|&i| per_thread[i] != 0 || per_warp[i] != 0)
            .map(|i| (i, per_thread[i], per_warp[i]))
            .collect();
        let result = use_terms(&terms);
        cache.borrow_mut().insert(opcode.to_string(), terms);
        result
    })
}

/// Adds one histogram entry (`c` executions of `opcode`) to the count metrics `v`.
fn add_entry(v: &mut [u128; COUNTS], opcode: &str, c: Counts) {
    let mut add_to = |metric: Metric, n: u128| {
        let i = metric.index();
        v[i] = v[i].saturating_add(n);
    };
    add_to(Metric::InstExecuted, c.warps.into());
    add_to(Metric::ThreadInstExecuted, c.threads.into());
    let class = classify(opcode);
    if let Some(thread) = class.thread {
        let metric = match thread {
            ThreadClass::Fp16 => Metric::InstFp16,
            ThreadClass::Fp32 => Metric::InstFp32,
            ThreadClass::Fp64 => Metric::InstFp64,
            ThreadClass::Integer => Metric::InstInteger,
            ThreadClass::BitConvert => Metric::InstBitConvert,
            ThreadClass::Control => Metric::InstControl,
            ThreadClass::ComputeLdSt => Metric::InstComputeLdSt,
            ThreadClass::Misc => Metric::InstMisc,
            ThreadClass::InterThreadCommunication => Metric::InstInterThreadCommunication,
        };
        add_to(metric, c.threads.into());
    }
    if let Some((space, op)) = class.memory {
        let metric = match (space, op) {
            (Space::Global, MemOp::Load) => Some(Metric::InstExecutedGlobalLoads),
            (Space::Local, MemOp::Load) => Some(Metric::InstExecutedLocalLoads),
            (Space::Shared, MemOp::Load) => Some(Metric::InstExecutedSharedLoads),
            (Space::Generic, MemOp::Load) => Some(Metric::InstExecutedGenericLoads),
            (Space::Global, MemOp::Store) => Some(Metric::InstExecutedGlobalStores),
            (Space::Local, MemOp::Store) => Some(Metric::InstExecutedLocalStores),
            (Space::Shared, MemOp::Store) => Some(Metric::InstExecutedSharedStores),
            (Space::Generic, MemOp::Store) => Some(Metric::InstExecutedGenericStores),
            (Space::Global, MemOp::Atomic) => Some(Metric::InstExecutedGlobalAtomics),
            (Space::Global, MemOp::Reduction) => Some(Metric::InstExecutedGlobalReductions),
            // Shared-memory reductions compile to the same atomic instructions.
            (Space::Shared, MemOp::Atomic | MemOp::Reduction) => {
                Some(Metric::InstExecutedSharedAtomics)
            }
            (Space::Generic, MemOp::Atomic | MemOp::Reduction) => {
                Some(Metric::InstExecutedGenericAtomics)
            }
            _ => None,
        };
        if let Some(metric) = metric {
            add_to(metric, c.warps.into());
        }
    }
    if let Some((precision, flop, lanes)) = class.flops {
        // (all, add, mul, fma) of the precision.
        let (all, add, mul, fma) = match precision {
            Precision::Half => (
                Metric::FlopCountHp,
                Metric::FlopCountHpAdd,
                Metric::FlopCountHpMul,
                Metric::FlopCountHpFma,
            ),
            Precision::Single => (
                Metric::FlopCountSp,
                Metric::FlopCountSpAdd,
                Metric::FlopCountSpMul,
                Metric::FlopCountSpFma,
            ),
            Precision::Double => (
                Metric::FlopCountDp,
                Metric::FlopCountDpAdd,
                Metric::FlopCountDpMul,
                Metric::FlopCountDpFma,
            ),
        };
        let ops = u128::from(c.threads) * u128::from(lanes);
        match flop {
            Flop::Add => {
                add_to(add, ops);
                add_to(all, ops);
            }
            Flop::Mul => {
                add_to(mul, ops);
                add_to(all, ops);
            }
            Flop::Fma => {
                add_to(fma, ops);
                add_to(all, ops * 2);
            }
            // Special operations are not part of flop_count_sp.
            Flop::Special => add_to(Metric::FlopCountSpSpecial, ops),
            Flop::None => {}
        }
    }
}

/// Every [`Metric`] of one histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// Indexed by [`Metric::index`].
    values: Vec<Value>,
}

impl Metrics {
    /// Computes the metrics of a histogram (a launch's `instructions` or a kernel's `totals`).
    pub fn of(counts: &OpcodeCounts) -> Metrics {
        // 128-bit sums of 64-bit counts times small factors: exact, whatever the counts.
        let mut v = [0u128; COUNTS];
        for (opcode, c) in counts {
            with_contribution(opcode, |terms| {
                for &(i, per_thread, per_warp) in terms {
                    let n = per_thread * u128::from(c.threads) + per_warp * u128::from(c.warps);
                    v[i] = v[i].saturating_add(n);
                }
            });
        }
        let mut values: Vec<Value> = v.iter().map(|&n| Value::Count(n)).collect();
        let warps = v[Metric::InstExecuted.index()];
        let threads = v[Metric::ThreadInstExecuted.index()];
        values.push(Value::Percent(simd_efficiency(threads, warps)));
        debug_assert_eq!(values.len(), Metric::ALL.len());
        Metrics { values }
    }

    /// A metric's value.
    pub fn get(&self, metric: Metric) -> Value {
        self.values[metric.index()]
    }

    /// A count metric; 0 for the percentage.
    pub fn count(&self, metric: Metric) -> u128 {
        match self.get(metric) {
            Value::Count(n) => n,
            Value::Percent(_) => 0,
        }
    }

    /// `(metric, value)` in [`Metric::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Metric, Value)> + '_ {
        Metric::ALL.iter().copied().zip(self.values.iter().copied())
    }
}

impl Serialize for Metrics {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.values.len()))?;
        for (metric, value) in self.iter() {
            map.serialize_entry(metric.name(), &value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use host_runtime::report::Counts;

    fn hist(items: &[(&str, u64, u64)]) -> OpcodeCounts {
        items
            .iter()
            .map(|&(op, threads, warps)| (op.to_string(), Counts { threads, warps }))
            .collect()
    }

    fn m(items: &[(&str, u64, u64)]) -> Metrics {
        Metrics::of(&hist(items))
    }

    /// Every metric of `metrics` that is not listed is zero.
    fn only(metrics: &Metrics, expected: &[(&str, u64)]) {
        for (name, _) in expected {
            assert!(Metric::from_name(name).is_some(), "no metric {name}");
        }
        for (metric, value) in metrics.iter() {
            if matches!(
                metric,
                Metric::InstExecuted | Metric::ThreadInstExecuted | Metric::WarpExecutionEfficiency
            ) {
                continue;
            }
            let want = expected
                .iter()
                .find(|(n, _)| *n == metric.name())
                .map_or(0, |(_, v)| *v);
            assert_eq!(value, Value::Count(want.into()), "{metric}");
        }
    }

    #[test]
    fn every_family_name_is_unique() {
        for (i, a) in FAMILIES.iter().enumerate() {
            for b in &FAMILIES[i + 1..] {
                assert_ne!(a.name, b.name);
            }
        }
    }

    #[test]
    fn single_precision_add_mul_fma() {
        // 100 threads (4 warps) run add.f32, sub.f32, mul.f32 and fma.rn.f32 once each;
        // 10 threads run mad.rn.f32.
        let x = m(&[
            ("add.f32", 100, 4),
            ("sub.rn.ftz.f32", 100, 4),
            ("mul.f32", 100, 4),
            ("fma.rn.f32", 100, 4),
            ("mad.rn.f32", 10, 1),
        ]);
        only(
            &x,
            &[
                ("flop_count_sp_add", 200),
                ("flop_count_sp_mul", 100),
                ("flop_count_sp_fma", 110),
                // 200 + 100 + 2 * 110
                ("flop_count_sp", 520),
                ("inst_fp_32", 410),
            ],
        );
        assert_eq!(x.get(Metric::InstExecuted), Value::Count(17));
    }

    #[test]
    fn double_and_half_precision() {
        let x = m(&[
            ("add.f64", 8, 1),
            ("fma.rn.f64", 8, 1),
            ("mul.rn.f16", 3, 1),
            // Two lanes: 2 flops per thread for add, 4 per thread for fma.
            ("add.rn.f16x2", 5, 1),
            ("fma.rn.bf16x2", 7, 1),
        ]);
        only(
            &x,
            &[
                ("flop_count_dp_add", 8),
                ("flop_count_dp_fma", 8),
                ("flop_count_dp", 24),
                ("flop_count_hp_mul", 3),
                ("flop_count_hp_add", 10),
                ("flop_count_hp_fma", 14),
                ("flop_count_hp", 3 + 10 + 28),
                ("inst_fp_64", 16),
                ("inst_fp_16", 15),
            ],
        );
    }

    #[test]
    fn special_functions() {
        let x = m(&[
            ("sqrt.rn.f32", 32, 1),
            ("rsqrt.approx.ftz.f32", 32, 1),
            ("rcp.rn.f32", 32, 1),
            ("sin.approx.f32", 1, 1),
            ("cos.approx.ftz.f32", 1, 1),
            ("lg2.approx.f32", 1, 1),
            ("ex2.approx.ftz.f32", 1, 1),
            ("tanh.approx.f32", 1, 1),
            ("div.rn.f32", 2, 1),
            // No special-operation metric for these: instruction classes only.
            ("div.rn.f64", 4, 1),
            ("sqrt.rn.f64", 4, 1),
            ("ex2.approx.f16x2", 6, 1),
            // Integer division is integer arithmetic.
            ("div.s32", 9, 1),
            ("rem.u64", 9, 1),
        ]);
        only(
            &x,
            &[
                ("flop_count_sp_special", 96 + 5 + 2),
                ("inst_fp_32", 103),
                ("inst_fp_64", 8),
                ("inst_fp_16", 6),
                ("inst_integer", 18),
            ],
        );
    }

    #[test]
    fn integer_arithmetic_and_logic() {
        let x = m(&[
            ("add.s32", 10, 1),
            ("mad.lo.s32", 10, 1),
            ("mul.wide.u32", 10, 1),
            ("mad24.lo.u32", 1, 1),
            ("dp4a.u32.s32", 1, 1),
            ("and.b32", 2, 1),
            ("or.pred", 2, 1),
            ("lop3.b32", 2, 1),
            ("shf.l.wrap.b32", 2, 1),
            ("popc.b64", 2, 1),
            ("bfe.u32", 2, 1),
            ("prmt.b32", 2, 1),
            ("cvta.to.global.u64", 5, 1),
            ("vadd4.u32.u32.u32", 1, 1),
        ]);
        only(&x, &[("inst_integer", 10 * 3 + 2 + 7 * 2 + 5 + 1)]);
    }

    #[test]
    fn comparison_and_selection_follow_their_type() {
        let x = m(&[
            ("setp.lt.f32", 4, 1),
            ("setp.ge.s32", 4, 1),
            ("setp.eq.f64", 4, 1),
            // set's comparison type is its last type.
            ("set.lt.u32.f32", 2, 1),
            ("selp.f32", 3, 1),
            ("selp.b32", 3, 1),
            ("min.f32", 5, 1),
            ("max.NaN.f16", 5, 1),
            ("abs.f64", 1, 1),
            ("neg.s32", 1, 1),
            ("testp.finite.f32", 1, 1),
            ("copysign.f64", 1, 1),
        ]);
        only(
            &x,
            &[
                ("inst_fp_32", 4 + 2 + 3 + 5 + 1),
                ("inst_integer", 4 + 3 + 1),
                ("inst_fp_64", 4 + 1 + 1),
                ("inst_fp_16", 5),
            ],
        );
    }

    #[test]
    fn conversion_control_misc_communication() {
        let x = m(&[
            ("cvt.rn.f32.s32", 7, 1),
            ("cvt.u64.u32", 7, 1),
            ("bra", 3, 1),
            ("bra.uni", 3, 1),
            ("call.uni", 3, 1),
            ("ret", 3, 1),
            ("exit", 3, 1),
            ("mov.u32", 11, 1),
            ("bar.sync", 11, 1),
            ("membar.gl", 1, 1),
            ("fence.acq_rel.gpu", 1, 1),
            ("shfl.sync.down.b32", 32, 1),
            ("vote.sync.ballot.b32", 32, 1),
            ("activemask.b32", 32, 1),
            ("redux.sync.add.s32", 32, 1),
            ("match.any.sync.b32", 32, 1),
        ]);
        only(
            &x,
            &[
                ("inst_bit_convert", 14),
                ("inst_control", 15),
                ("inst_misc", 24),
                ("inst_inter_thread_communication", 160),
            ],
        );
    }

    #[test]
    fn memory_groups_by_state_space_are_warp_level() {
        let x = m(&[
            ("ld.global.f32", 64, 2),
            ("ld.global.nc.v2.f64", 64, 3),
            ("ldu.global.f32", 1, 1),
            ("st.global.f32", 64, 2),
            ("ld.shared.u32", 64, 5),
            ("st.shared::cta.v4.b32", 64, 6),
            ("ld.local.u32", 1, 1),
            ("st.local.u32", 1, 1),
            ("ld.u32", 8, 1),
            ("st.f32", 8, 1),
            ("atom.global.add.u32", 32, 1),
            ("atom.global.cas.b32", 32, 1),
            ("red.global.add.f32", 32, 4),
            ("atom.shared.add.u32", 32, 7),
            ("red.shared.add.u32", 32, 1),
            ("atom.add.u32", 1, 1),
            ("ld.param.u64", 10, 1),
            ("ld.const.f32", 10, 1),
            ("ldmatrix.sync.aligned.m8n8.x4.shared.b16", 32, 1),
            ("cp.async.ca.shared.global", 32, 1),
            ("cp.async.wait_group", 32, 1),
            ("prefetch.global.L2", 32, 1),
        ]);
        only(
            &x,
            &[
                ("inst_executed_global_loads", 6),
                ("inst_executed_global_stores", 2),
                ("inst_executed_shared_loads", 6),
                ("inst_executed_shared_stores", 6),
                ("inst_executed_local_loads", 1),
                ("inst_executed_local_stores", 1),
                ("inst_executed_generic_loads", 1),
                ("inst_executed_generic_stores", 1),
                ("inst_executed_global_atomics", 2),
                ("inst_executed_global_reductions", 4),
                ("inst_executed_shared_atomics", 8),
                ("inst_executed_generic_atomics", 1),
                // Thread level: every memory instruction but cp.async.wait_group.
                (
                    "inst_compute_ld_st",
                    64 * 5 + 1 + 1 + 1 + 8 + 8 + 32 * 5 + 1 + 10 + 10 + 32 + 32 + 32,
                ),
                ("inst_misc", 32),
                // red.global.add.f32 is a memory instruction, not a flop.
            ],
        );
    }

    #[test]
    fn texture_tensor_and_unknown_opcodes_count_only_in_totals() {
        let x = m(&[
            ("tex.2d.v4.f32.f32", 32, 1),
            ("suld.b.2d.v4.b32.trap", 32, 1),
            ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 32, 1),
            ("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32", 32, 1),
            ("no_such_op.f32", 32, 1),
        ]);
        only(&x, &[]);
        assert_eq!(x.get(Metric::InstExecuted), Value::Count(5));
        assert_eq!(x.get(Metric::ThreadInstExecuted), Value::Count(160));
    }

    #[test]
    fn warp_execution_efficiency() {
        // 3 warps: two full, one with 16 active threads: 80 / (32 * 3).
        let x = m(&[("add.s32", 80, 3)]);
        let Value::Percent(Some(p)) = x.get(Metric::WarpExecutionEfficiency) else {
            panic!()
        };
        assert!((p - 100.0 * 80.0 / 96.0).abs() < 1e-9);
        assert_eq!(
            m(&[]).get(Metric::WarpExecutionEfficiency),
            Value::Percent(None)
        );
        let fraction = simd_efficiency_fraction(80u32, 3u32).unwrap();
        assert!((fraction - 80.0 / 96.0).abs() < 1e-12);
        assert_eq!(simd_efficiency_fraction(0u32, 0u32), None);
    }

    #[test]
    fn metric_names_are_unique_and_round_trip() {
        for (i, metric) in Metric::ALL.iter().enumerate() {
            assert_eq!(metric.index(), i);
            assert_eq!(Metric::from_name(metric.name()), Some(*metric));
        }
        assert_eq!(Metric::from_name("inst_executed_global_load"), None);
    }

    #[test]
    fn longest_family_prefix_wins() {
        assert_eq!(
            family_of("cp.async.wait_group").unwrap().name,
            "cp.async.wait_group"
        );
        assert_eq!(
            family_of("cp.async.ca.shared.global").unwrap().name,
            "cp.async"
        );
        assert_eq!(
            family_of("wmma.load.a.sync.aligned.row.m16n16k16.global.f16")
                .unwrap()
                .name,
            "wmma.load"
        );
        assert_eq!(
            family_of("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32")
                .unwrap()
                .name,
            "wmma"
        );
        assert_eq!(family_of("setp.lt.f32").unwrap().name, "setp");
        assert_eq!(family_of("set.lt.u32.f32").unwrap().name, "set");
        assert_eq!(family_of("bar.warp.sync").unwrap().name, "bar");
        // A family is a whole component: `address` is not `add`.
        assert!(family_of("address.f32").is_none());
    }
}
