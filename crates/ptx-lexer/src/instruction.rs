//! Instructions: guard, opcode with its modifiers, operands, and the facts later stages need.

use std::fmt;

use serde::Serialize;
use smol_str::SmolStr;

/// A predicate guard: `@%p1` or `@!%p1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Guard {
    pub negated: bool,
    pub predicate: SmolStr,
}

impl fmt::Display for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bang = if self.negated { "!" } else { "" };
        write!(f, "@{bang}{}", self.predicate)
    }
}

/// A full opcode as written, e.g. `ld.global.nc.v2.f64`: the base name and its modifiers in order.
///
/// Stored as one string because that is what every consumer keys on (histograms, metric tables);
/// [`Opcode::base`] and [`Opcode::modifiers`] split it without allocating.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Opcode(SmolStr);

impl Opcode {
    /// Builds an opcode from its full text (`"add.s32"`).
    pub fn new(text: impl Into<SmolStr>) -> Self {
        Opcode(text.into())
    }

    /// The full opcode with every modifier: `ld.global.nc.v2.f64`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The base mnemonic: `ld`.
    pub fn base(&self) -> &str {
        self.0.split('.').next().unwrap_or("")
    }

    /// The modifiers in order, without their dots: `global`, `nc`, `v2`, `f64`.
    pub fn modifiers(&self) -> impl Iterator<Item = &str> {
        self.0.split('.').skip(1)
    }

    /// Whether `modifier` (without its dot) is among the modifiers.
    pub fn has_modifier(&self, modifier: &str) -> bool {
        self.modifiers().any(|m| m == modifier)
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An operand of an instruction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Operand {
    /// A register or special register: `%r1`, `%tid.x`.
    Register(SmolStr),
    /// A negated predicate source: `!%p1`.
    NegatedRegister(SmolStr),
    /// A named symbol: a label, variable, parameter or function name, or a register declared
    /// without `%` (legal PTX, common in inline asm: `.reg .pred p;`); telling those apart needs
    /// the declarations in scope.
    Symbol(SmolStr),
    /// An integer literal, kept as written (`0x1F`, `-4`, `12U`).
    Integer(SmolStr),
    /// A floating-point literal, kept as written (`0f3F800000`, `1.5`).
    Float(SmolStr),
    /// A symbol or register plus a constant: `sym+4`, `%rd1+-8`.
    Offset { base: Box<Operand>, offset: SmolStr },
    /// A vector operand: `{%f1, %f2}`. Elements may be `_` sinks.
    Vector(Vec<Operand>),
    /// A memory address: `[%rd1+8]`, or a texture access `[tex, {%f1, %f2}]`.
    Address(Vec<Operand>),
    /// Two results joined by `|`: `setp ... %p1|%p2`, `shfl.sync ... %r1|%p1`.
    RegisterPair(SmolStr, SmolStr),
    /// A parenthesised list, as in `call (retval0), f, (param0);`.
    List(Vec<Operand>),
    /// The sink `_`.
    Sink,
}

impl Operand {
    /// A register operand.
    pub fn reg(name: impl Into<SmolStr>) -> Self {
        Operand::Register(name.into())
    }

    /// An integer operand from its text.
    pub fn int(value: impl fmt::Display) -> Self {
        Operand::Integer(SmolStr::new(value.to_string()))
    }

    /// A symbol operand.
    pub fn sym(name: impl Into<SmolStr>) -> Self {
        Operand::Symbol(name.into())
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list(f: &mut fmt::Formatter<'_>, items: &[Operand]) -> fmt::Result {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{item}")?;
            }
            Ok(())
        }
        match self {
            Operand::Register(r) | Operand::Symbol(r) | Operand::Integer(r) | Operand::Float(r) => {
                f.write_str(r)
            }
            Operand::NegatedRegister(r) => write!(f, "!{r}"),
            // A negative offset prints as `+-8`, the form LLVM emits and ptxas accepts.
            Operand::Offset { base, offset } => write!(f, "{base}+{offset}"),
            Operand::Vector(items) => {
                f.write_str("{")?;
                list(f, items)?;
                f.write_str("}")
            }
            Operand::Address(items) => {
                f.write_str("[")?;
                list(f, items)?;
                f.write_str("]")
            }
            Operand::RegisterPair(a, b) => write!(f, "{a}|{b}"),
            Operand::List(items) => {
                f.write_str("(")?;
                list(f, items)?;
                f.write_str(")")
            }
            Operand::Sink => f.write_str("_"),
        }
    }
}

/// A PTX state space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StateSpace {
    Global,
    Shared,
    /// `.shared::cluster`: distributed shared memory of the cluster.
    SharedCluster,
    Local,
    Const,
    Param,
    Texture,
    Surface,
    /// No state space named: a generic address.
    Generic,
}

impl StateSpace {
    /// The state space named by one modifier, if it names one.
    pub fn from_modifier(modifier: &str) -> Option<Self> {
        Some(match modifier {
            "global" => StateSpace::Global,
            "shared" | "shared::cta" => StateSpace::Shared,
            "shared::cluster" => StateSpace::SharedCluster,
            "local" => StateSpace::Local,
            "const" => StateSpace::Const,
            "param" | "param::entry" | "param::func" => StateSpace::Param,
            "tex" => StateSpace::Texture,
            "surf" => StateSpace::Surface,
            _ => return None,
        })
    }
}

/// A PTX fundamental data type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DataType {
    S8,
    S16,
    S32,
    S64,
    U8,
    U16,
    U32,
    U64,
    B8,
    B16,
    B32,
    B64,
    B128,
    F16,
    F16x2,
    Bf16,
    Bf16x2,
    Tf32,
    E4m3x2,
    E5m2x2,
    F32,
    F64,
    Pred,
}

impl DataType {
    /// The type named by one modifier, if it names one.
    pub fn from_modifier(modifier: &str) -> Option<Self> {
        Some(match modifier {
            "s8" => DataType::S8,
            "s16" => DataType::S16,
            "s32" => DataType::S32,
            "s64" => DataType::S64,
            "u8" => DataType::U8,
            "u16" => DataType::U16,
            "u32" => DataType::U32,
            "u64" => DataType::U64,
            "b8" => DataType::B8,
            "b16" => DataType::B16,
            "b32" => DataType::B32,
            "b64" => DataType::B64,
            "b128" => DataType::B128,
            "f16" => DataType::F16,
            "f16x2" => DataType::F16x2,
            "bf16" => DataType::Bf16,
            "bf16x2" => DataType::Bf16x2,
            "tf32" => DataType::Tf32,
            "e4m3x2" => DataType::E4m3x2,
            "e5m2x2" => DataType::E5m2x2,
            "f32" => DataType::F32,
            "f64" => DataType::F64,
            "pred" => DataType::Pred,
            _ => return None,
        })
    }

    /// Size in bytes of one value of this type (a predicate counts as one byte).
    pub fn bytes(self) -> u32 {
        match self {
            DataType::S8 | DataType::U8 | DataType::B8 | DataType::Pred => 1,
            DataType::S16
            | DataType::U16
            | DataType::B16
            | DataType::F16
            | DataType::Bf16
            | DataType::E4m3x2
            | DataType::E5m2x2 => 2,
            DataType::S32
            | DataType::U32
            | DataType::B32
            | DataType::F32
            | DataType::F16x2
            | DataType::Bf16x2
            | DataType::Tf32 => 4,
            DataType::S64 | DataType::U64 | DataType::B64 | DataType::F64 => 8,
            DataType::B128 => 16,
        }
    }
}

/// Memory-access opcodes whose bytes per thread are derived from type and vector width.
const MEMORY_BASES: &[&str] = &["ld", "ldu", "st", "atom", "red", "prefetch", "prefetchu"];

/// What later stages need to know about an instruction, derived from its opcode once at parse time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct InstructionFacts {
    /// The state space a memory or texture instruction accesses (`Generic` when none is named).
    pub state_space: Option<StateSpace>,
    /// The instruction's data type: the first type modifier, which is the result's type where
    /// two are named (`cvt.f32.s32` gives `f32`).
    pub data_type: Option<DataType>,
    /// Vector width from `.v2`/`.v4`/`.v8`; 1 when scalar.
    pub vector_width: u8,
    /// Bytes each thread moves for loads, stores, atomics and reductions: type size x vector width.
    pub bytes_per_thread: Option<u32>,
    /// Whether the instruction can transfer control (ends a basic block).
    pub is_terminator: bool,
}

impl InstructionFacts {
    /// Derives the facts from an opcode.
    pub fn of(opcode: &Opcode) -> Self {
        let base = opcode.base();
        let mut state_space = None;
        let mut types: [Option<DataType>; 2] = [None, None];
        let mut vector_width = 1u8;
        for modifier in opcode.modifiers() {
            if let Some(space) = StateSpace::from_modifier(modifier) {
                state_space.get_or_insert(space);
            } else if let Some(ty) = DataType::from_modifier(modifier) {
                if types[0].is_none() {
                    types[0] = Some(ty);
                } else {
                    types[1] = Some(ty);
                }
            } else if let Some(width) = modifier.strip_prefix('v') {
                if let Ok(w @ (2 | 4 | 8)) = width.parse::<u8>() {
                    vector_width = w;
                }
            }
        }
        let is_memory = MEMORY_BASES.contains(&base);
        let is_texture = matches!(
            base,
            "tex" | "tld4" | "txq" | "suld" | "sust" | "sured" | "suq"
        );
        if (is_memory || base == "cvta" || base == "isspacep") && state_space.is_none() {
            state_space = Some(StateSpace::Generic);
        }
        if is_texture && state_space.is_none() {
            state_space = Some(if base.starts_with("su") {
                StateSpace::Surface
            } else {
                StateSpace::Texture
            });
        }
        // Where two types are named (`cvt.f32.s32`, `tex.1d.v4.f32.s32`) the first is the result's.
        let data_type = types[0];
        let bytes_per_thread = if is_memory && !base.starts_with("prefetch") {
            types[0].map(|t| t.bytes() * u32::from(vector_width))
        } else {
            None
        };
        InstructionFacts {
            state_space,
            data_type,
            vector_width,
            bytes_per_thread,
            is_terminator: is_terminator_base(base),
        }
    }
}

/// Opcodes that can transfer control and therefore end a basic block. `call` returns to the next
/// instruction and does not end a block.
pub fn is_terminator_base(base: &str) -> bool {
    matches!(base, "bra" | "brx" | "ret" | "exit" | "trap")
}

/// A parsed instruction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Instruction {
    pub guard: Option<Guard>,
    pub opcode: Opcode,
    pub operands: Vec<Operand>,
    pub facts: InstructionFacts,
}

impl Instruction {
    /// Builds an instruction, deriving its facts from the opcode.
    pub fn new(guard: Option<Guard>, opcode: Opcode, operands: Vec<Operand>) -> Self {
        let facts = InstructionFacts::of(&opcode);
        Instruction {
            guard,
            opcode,
            operands,
            facts,
        }
    }

    /// An unguarded instruction from opcode text and operands.
    pub fn simple(opcode: &str, operands: Vec<Operand>) -> Self {
        Self::new(None, Opcode::new(opcode), operands)
    }

    /// Whether this instruction ends its basic block.
    pub fn is_terminator(&self) -> bool {
        self.facts.is_terminator
    }

    /// Whether control can fall through to the next instruction: false only for unguarded
    /// `bra`, `brx.idx`, `ret`, `exit` and `trap`.
    pub fn can_fall_through(&self) -> bool {
        !(self.is_terminator() && self.guard.is_none())
    }

    /// Labels this instruction may branch to (`bra L`, `brx.idx %r, table` names the table).
    pub fn branch_targets(&self) -> impl Iterator<Item = &str> {
        let is_branch = matches!(self.opcode.base(), "bra" | "brx");
        self.operands
            .iter()
            .filter(move |_| is_branch)
            .filter_map(|op| match op {
                Operand::Symbol(s) => Some(s.as_str()),
                _ => None,
            })
    }
}

impl fmt::Display for Instruction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(guard) = &self.guard {
            write!(f, "{guard} ")?;
        }
        f.write_str(self.opcode.as_str())?;
        for (i, operand) in self.operands.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { ", " })?;
            write!(f, "{operand}")?;
        }
        f.write_str(";")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_parts() {
        let op = Opcode::new("ld.global.nc.v2.f64");
        assert_eq!(op.base(), "ld");
        assert_eq!(
            op.modifiers().collect::<Vec<_>>(),
            ["global", "nc", "v2", "f64"]
        );
        assert!(op.has_modifier("nc"));
        assert!(!op.has_modifier("v4"));
    }

    #[test]
    fn memory_facts() {
        let f = InstructionFacts::of(&Opcode::new("ld.global.nc.v2.f64"));
        assert_eq!(f.state_space, Some(StateSpace::Global));
        assert_eq!(f.data_type, Some(DataType::F64));
        assert_eq!(f.vector_width, 2);
        assert_eq!(f.bytes_per_thread, Some(16));

        let f = InstructionFacts::of(&Opcode::new("st.shared::cta.v4.b32"));
        assert_eq!(f.state_space, Some(StateSpace::Shared));
        assert_eq!(f.bytes_per_thread, Some(16));

        let f = InstructionFacts::of(&Opcode::new("ld.u8"));
        assert_eq!(f.state_space, Some(StateSpace::Generic));
        assert_eq!(f.bytes_per_thread, Some(1));

        let f = InstructionFacts::of(&Opcode::new("atom.global.add.u64"));
        assert_eq!(f.bytes_per_thread, Some(8));
    }

    #[test]
    fn non_memory_facts() {
        let f = InstructionFacts::of(&Opcode::new("cvt.rn.f32.s32"));
        assert_eq!(f.state_space, None);
        assert_eq!(f.data_type, Some(DataType::F32));
        assert_eq!(f.bytes_per_thread, None);

        let f = InstructionFacts::of(&Opcode::new("tex.1d.v4.f32.s32"));
        assert_eq!(f.state_space, Some(StateSpace::Texture));
        assert_eq!(f.vector_width, 4);
        assert_eq!(f.bytes_per_thread, None);
    }

    #[test]
    fn terminators() {
        for op in ["bra.uni", "bra", "brx.idx", "ret", "exit", "trap"] {
            assert!(InstructionFacts::of(&Opcode::new(op)).is_terminator, "{op}");
        }
        for op in ["call.uni", "bar.sync", "brkpt", "add.s32"] {
            assert!(
                !InstructionFacts::of(&Opcode::new(op)).is_terminator,
                "{op}"
            );
        }
    }

    #[test]
    fn display_is_canonical_ptx() {
        let i = Instruction::new(
            Some(Guard {
                negated: true,
                predicate: "%p1".into(),
            }),
            Opcode::new("st.global.v2.f32"),
            vec![
                Operand::Address(vec![Operand::Offset {
                    base: Box::new(Operand::reg("%rd1")),
                    offset: "8".into(),
                }]),
                Operand::Vector(vec![Operand::reg("%f1"), Operand::reg("%f2")]),
            ],
        );
        assert_eq!(
            i.to_string(),
            "@!%p1 st.global.v2.f32 [%rd1+8], {%f1, %f2};"
        );
    }
}
