//! Per-lane compute instructions: decoded once from the opcode, evaluated per thread.
//!
//! [`decode`] turns an opcode (`add.rz.ftz.f32`, `setp.ltu.and.f64`, `cvt.rni.s32.f64`, ...)
//! into an [`AluOp`]: a small `Copy` value whose [`AluOp::eval`] does no allocation and no
//! string work. Instructions that touch memory, control flow or other lanes belong to the
//! engine ([`is_engine_owned`]); compute opcodes or modifier combinations this module does
//! not implement decode to `Err` — nothing is guessed. See `ALU.md` for coverage, the rounding
//! implementation and the approximate functions' accuracy.

mod cvt;
mod float;
mod int;
mod round;

use std::mem::MaybeUninit;

use ptx_lexer::Opcode;

use cvt::CvtOp;
use float::{Approx, FCmp, Prec};
use int::{ICmp, IntTy};
use round::Rnd;

pub(crate) use float::FCmp as FloatCmp;
pub(crate) use int::low_mask;
pub(crate) use int::ICmp as IntCmp;

/// How the engine must read a source operand that is an immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// An integer of `bits` bits (8, 16, 32, 64): literals parse as two's complement.
    Int {
        bits: u8,
    },
    F16,
    F32,
    F64,
    Pred,
}

/// One lane's result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AluOutput {
    /// The destination's bits (the low bits of the result type; narrower results zero-extended,
    /// except 8-bit signed `cvt` results, which are sign-extended because 8-bit values live in
    /// wider registers).
    pub value: u64,
    /// The second destination of a `p|q` result (`setp`): the complement comparison.
    pub second: bool,
    /// The carry-out, for instructions with `.cc`.
    pub carry: bool,
}

/// Base mnemonics whose semantics the engine owns: memory, address spaces, control flow,
/// synchronization, warp-collective and texture/surface instructions, and `mov`. [`decode`]
/// returns `Ok(None)` exactly for these; every other base is a per-lane compute instruction
/// (decoded, or rejected with `Err`).
pub const ENGINE_OWNED: &[&str] = &[
    "mov",
    "ld",
    "ldu",
    "st",
    "cvta",
    "isspacep",
    "atom",
    "red",
    "bar",
    "barrier",
    "membar",
    "fence",
    "bra",
    "brx",
    "call",
    "ret",
    "exit",
    "trap",
    "activemask",
    "vote",
    "shfl",
    "match",
    "redux",
    "elect",
    "tex",
    "tld4",
    "txq",
    "suld",
    "sust",
    "sured",
    "suq",
    "istypep",
    "prefetch",
    "prefetchu",
    "applypriority",
    "createpolicy",
    "discard",
    "nanosleep",
    "pmevent",
    "brkpt",
    "cp",
    "mbarrier",
    "alloca",
    "stacksave",
    "stackrestore",
    "mapa",
    "getctarank",
    "griddepcontrol",
    "setmaxnreg",
    "ldmatrix",
    "stmatrix",
    "movmatrix",
    "wmma",
    "mma",
    "wgmma",
    "multimem",
    "tensormap",
];

/// Whether the engine, not this module, implements instructions with base mnemonic `base`
/// (`ld`, `bra`, `shfl`, ...): the single list both sides use ([`ENGINE_OWNED`]).
pub fn is_engine_owned(base: &str) -> bool {
    ENGINE_OWNED.contains(&base)
}

/// Integer halves of a product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Half {
    Lo,
    Hi,
    Wide,
}

/// `.and/.or/.xor` combining a comparison with a predicate (`setp`, `set`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BoolOp {
    And,
    Or,
    Xor,
}

/// What `setp`/`set` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetOut {
    /// `setp`: a predicate (and its complement for `p|q`).
    Pred,
    /// `set` with an integer destination: all ones or zero.
    Int { bits: u8 },
    /// `set.f32`: 1.0 or 0.0.
    F32,
}

/// A comparison on integers or floats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compare {
    Int(ICmp, IntTy),
    Float(FCmp, Prec, bool),
}

/// `testp` classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TestClass {
    Finite,
    Infinite,
    Number,
    NotANumber,
    Normal,
    Subnormal,
}

/// Float arithmetic rounding: an IEEE direction, or the approximate (`.approx`, `.full`) forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FRound {
    Ieee(Rnd),
    Approx,
    Full,
}

/// Binary float operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FBin {
    Add,
    Sub,
    Mul,
    Div,
}

/// Single-operand float operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FUn {
    Abs,
    Neg,
    Sqrt,
    Rcp,
    Rsqrt,
    Fn(Approx),
}

/// The decoded operation (private: the engine sees only [`AluOp`]'s methods).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Add {
        ty: IntTy,
        sat: bool,
    },
    Sub {
        ty: IntTy,
        sat: bool,
    },
    Mul {
        ty: IntTy,
        half: Half,
    },
    Mad {
        ty: IntTy,
        half: Half,
    },
    Mul24 {
        signed: bool,
        hi: bool,
    },
    Mad24 {
        signed: bool,
        hi: bool,
    },
    Sad(IntTy),
    Div(IntTy),
    Rem(IntTy),
    Abs(IntTy),
    Neg(IntTy),
    Min {
        ty: IntTy,
        relu: bool,
    },
    Max {
        ty: IntTy,
        relu: bool,
    },
    Popc(u8),
    Clz(u8),
    Bfind {
        ty: IntTy,
        shiftamt: bool,
    },
    Brev(u8),
    Bfe(IntTy),
    Bfi(u8),
    Fns,
    Prmt(int::PrmtMode),
    And(u8),
    Or(u8),
    Xor(u8),
    Not(u8),
    Cnot(u8),
    Lop3,
    Shl(u8),
    Shr(IntTy),
    Shf {
        left: bool,
        clamp: bool,
    },
    Dp4a {
        a_signed: bool,
        b_signed: bool,
    },
    Dp2a {
        hi: bool,
        a_signed: bool,
        b_signed: bool,
    },
    Selp(u8),
    Slct {
        bits: u8,
        float: bool,
        ftz: bool,
    },
    Set {
        cmp: Compare,
        combine: Option<BoolOp>,
        out: SetOut,
    },
    Testp {
        class: TestClass,
        prec: Prec,
    },
    Copysign(Prec),
    FBin {
        op: FBin,
        prec: Prec,
        rnd: FRound,
        ftz: bool,
        sat: bool,
    },
    Fma {
        prec: Prec,
        rnd: Rnd,
        ftz: bool,
        sat: bool,
    },
    FMinMax {
        max: bool,
        prec: Prec,
        ftz: bool,
        nan: bool,
    },
    FUn {
        op: FUn,
        prec: Prec,
        rnd: FRound,
        ftz: bool,
    },
    Cvt(CvtOp),
    /// `cvt.rn{.relu}.f16x2.f32 d, a, b` / `.bf16x2`: a in the upper half.
    CvtPack {
        bf16: bool,
        rnd: Rnd,
        relu: bool,
    },
}

/// A decoded per-lane compute instruction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AluOp {
    op: Op,
    kinds: [ValueKind; 4],
    count: u8,
    reads_carry: bool,
    writes_carry: bool,
}

/// The modifiers of one opcode, classified; decoders take what they understand and
/// [`Mods::finish`] rejects anything left.
struct Mods<'a> {
    text: &'a str,
    types: Vec<&'a str>,
    rest: Vec<&'a str>,
}

const TYPES: &[&str] = &[
    "pred", "b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "f16",
    "f16x2", "bf16", "bf16x2", "f32", "f64", "u16x2", "s16x2",
];

impl<'a> Mods<'a> {
    fn new(opcode: &'a Opcode) -> Self {
        let (types, rest) = opcode.modifiers().partition(|m| TYPES.contains(m));
        Mods {
            text: opcode.as_str(),
            types,
            rest,
        }
    }

    fn take(&mut self, name: &str) -> bool {
        match self.rest.iter().position(|m| *m == name) {
            Some(i) => {
                self.rest.remove(i);
                true
            }
            None => false,
        }
    }

    fn take_any(&mut self, names: &[&'static str]) -> Option<&'static str> {
        names.iter().copied().find(|n| self.take(n))
    }

    fn rnd(&mut self) -> Option<Rnd> {
        Some(match self.take_any(&["rn", "rz", "rm", "rp"])? {
            "rn" => Rnd::Rn,
            "rz" => Rnd::Rz,
            "rm" => Rnd::Rm,
            _ => Rnd::Rp,
        })
    }

    fn irnd(&mut self) -> Option<Rnd> {
        Some(match self.take_any(&["rni", "rzi", "rmi", "rpi"])? {
            "rni" => Rnd::Rn,
            "rzi" => Rnd::Rz,
            "rmi" => Rnd::Rm,
            _ => Rnd::Rp,
        })
    }

    fn err(&self, why: &str) -> String {
        format!("unsupported compute instruction `{}`: {why}", self.text)
    }

    /// The single type modifier.
    fn one_type(&self) -> Result<&'a str, String> {
        match self.types.as_slice() {
            [t] => Ok(t),
            _ => Err(self.err("expected exactly one type modifier")),
        }
    }

    fn finish(&self) -> Result<(), String> {
        match self.rest.first() {
            None => Ok(()),
            Some(m) => Err(self.err(&format!("modifier `.{m}`"))),
        }
    }
}

fn int_ty(t: &str) -> Option<IntTy> {
    let (signed, bits) = match t {
        "b8" | "u8" => (false, 8),
        "s8" => (true, 8),
        "b16" | "u16" => (false, 16),
        "s16" => (true, 16),
        "b32" | "u32" => (false, 32),
        "s32" => (true, 32),
        "b64" | "u64" => (false, 64),
        "s64" => (true, 64),
        _ => return None,
    };
    Some(IntTy { bits, signed })
}

fn float_prec(t: &str) -> Option<Prec> {
    Some(match t {
        "f16" => Prec::F16,
        "f16x2" => Prec::F16x2,
        "f32" => Prec::F32,
        "f64" => Prec::F64,
        _ => return None,
    })
}

fn int_kind(bits: u8) -> ValueKind {
    ValueKind::Int { bits }
}

fn prec_kind(p: Prec) -> ValueKind {
    match p {
        Prec::F16 => ValueKind::F16,
        Prec::F16x2 => ValueKind::Int { bits: 32 },
        Prec::F32 => ValueKind::F32,
        Prec::F64 => ValueKind::F64,
    }
}

impl AluOp {
    fn new(op: Op, kinds: &[ValueKind]) -> Self {
        let mut all = [ValueKind::Int { bits: 32 }; 4];
        all[..kinds.len()].copy_from_slice(kinds);
        AluOp {
            op,
            kinds: all,
            count: kinds.len() as u8,
            reads_carry: false,
            writes_carry: false,
        }
    }

    fn carry(mut self, reads: bool, writes: bool) -> Self {
        self.reads_carry = reads;
        self.writes_carry = writes;
        self
    }
}

/// Decodes `opcode`: `Ok(None)` when the instruction is not a per-lane compute instruction (the
/// engine handles it, see [`is_engine_owned`]), `Err(reason)` when it is one this module does
/// not support.
pub fn decode(opcode: &Opcode) -> Result<Option<AluOp>, String> {
    let base = opcode.base();
    if is_engine_owned(base) {
        return Ok(None);
    }
    let mut m = Mods::new(opcode);
    let op = match base {
        "add" | "sub" | "addc" | "subc" => decode_add(base, &mut m)?,
        "mul" | "mad" | "madc" => decode_mul(base, &mut m)?,
        "fma" => decode_fma(&mut m)?,
        "div" | "rem" | "sad" | "abs" | "neg" | "min" | "max" => decode_misc_arith(base, &mut m)?,
        "mul24" | "mad24" => {
            let hi = m.take("hi");
            let lo = m.take("lo");
            let ty = int_ty(m.one_type()?).filter(|t| t.bits == 32);
            let Some(ty) = ty.filter(|_| hi != lo) else {
                return Err(m.err("needs .lo or .hi and .u32/.s32"));
            };
            let signed = ty.signed;
            if base == "mul24" {
                AluOp::new(Op::Mul24 { signed, hi }, &[int_kind(32); 2])
            } else {
                AluOp::new(Op::Mad24 { signed, hi }, &[int_kind(32); 3])
            }
        }
        "popc" | "clz" | "brev" => {
            let bits = match m.one_type()? {
                "b32" => 32,
                "b64" => 64,
                _ => return Err(m.err("type must be .b32 or .b64")),
            };
            let op = match base {
                "popc" => Op::Popc(bits),
                "clz" => Op::Clz(bits),
                _ => Op::Brev(bits),
            };
            AluOp::new(op, &[int_kind(bits)])
        }
        "bfind" => {
            let shiftamt = m.take("shiftamt");
            let ty = int_ty(m.one_type()?)
                .filter(|t| t.bits >= 32 && m.types[0] != "b32" && m.types[0] != "b64")
                .ok_or_else(|| m.err("type must be .u32/.u64/.s32/.s64"))?;
            AluOp::new(Op::Bfind { ty, shiftamt }, &[int_kind(ty.bits)])
        }
        "bfe" => {
            let ty = int_ty(m.one_type()?)
                .filter(|t| t.bits >= 32 && !m.types[0].starts_with('b'))
                .ok_or_else(|| m.err("type must be .u32/.u64/.s32/.s64"))?;
            AluOp::new(
                Op::Bfe(ty),
                &[int_kind(ty.bits), int_kind(32), int_kind(32)],
            )
        }
        "bfi" => {
            let bits = match m.one_type()? {
                "b32" => 32,
                "b64" => 64,
                _ => return Err(m.err("type must be .b32 or .b64")),
            };
            AluOp::new(
                Op::Bfi(bits),
                &[int_kind(bits), int_kind(bits), int_kind(32), int_kind(32)],
            )
        }
        "fns" => {
            if m.one_type()? != "b32" {
                return Err(m.err("type must be .b32"));
            }
            AluOp::new(Op::Fns, &[int_kind(32); 3])
        }
        "prmt" => {
            let mode = match m.take_any(&["f4e", "b4e", "rc8", "ecl", "ecr", "rc16"]) {
                None => int::PrmtMode::Default,
                Some("f4e") => int::PrmtMode::F4e,
                Some("b4e") => int::PrmtMode::B4e,
                Some("rc8") => int::PrmtMode::Rc8,
                Some("ecl") => int::PrmtMode::Ecl,
                Some("ecr") => int::PrmtMode::Ecr,
                Some(_) => int::PrmtMode::Rc16,
            };
            if m.one_type()? != "b32" {
                return Err(m.err("type must be .b32"));
            }
            AluOp::new(Op::Prmt(mode), &[int_kind(32); 3])
        }
        "and" | "or" | "xor" | "not" | "cnot" => {
            let t = m.one_type()?;
            let (bits, kind) = match t {
                "pred" if base != "cnot" => (1, ValueKind::Pred),
                "b16" => (16, int_kind(16)),
                "b32" => (32, int_kind(32)),
                "b64" => (64, int_kind(64)),
                _ => return Err(m.err("type must be .pred/.b16/.b32/.b64")),
            };
            match base {
                "and" => AluOp::new(Op::And(bits), &[kind; 2]),
                "or" => AluOp::new(Op::Or(bits), &[kind; 2]),
                "xor" => AluOp::new(Op::Xor(bits), &[kind; 2]),
                "not" => AluOp::new(Op::Not(bits), &[kind]),
                _ => AluOp::new(Op::Cnot(bits), &[kind]),
            }
        }
        "lop3" => {
            if m.one_type()? != "b32" {
                return Err(m.err("type must be .b32"));
            }
            AluOp::new(Op::Lop3, &[int_kind(32); 4])
        }
        "shl" | "shr" => {
            let ty = int_ty(m.one_type()?)
                .filter(|t| t.bits >= 16)
                .ok_or_else(|| m.err("type must be 16, 32 or 64 bits"))?;
            if base == "shl" {
                if !m.types[0].starts_with('b') {
                    return Err(m.err("shl takes .b16/.b32/.b64"));
                }
                AluOp::new(Op::Shl(ty.bits), &[int_kind(ty.bits), int_kind(32)])
            } else {
                AluOp::new(Op::Shr(ty), &[int_kind(ty.bits), int_kind(32)])
            }
        }
        "shf" => {
            let left = m.take("l");
            let right = m.take("r");
            let clamp = m.take("clamp");
            let wrap = m.take("wrap");
            if left == right || clamp == wrap || m.one_type()? != "b32" {
                return Err(m.err("needs .l/.r, .wrap/.clamp and .b32"));
            }
            AluOp::new(Op::Shf { left, clamp }, &[int_kind(32); 3])
        }
        "dp4a" | "dp2a" => {
            let hi = base == "dp2a" && m.take("hi");
            let lo = base == "dp2a" && m.take("lo");
            if base == "dp2a" && hi == lo {
                return Err(m.err("dp2a needs .lo or .hi"));
            }
            let signs: Vec<bool> = m
                .types
                .iter()
                .map(|t| match *t {
                    "s32" => Some(true),
                    "u32" => Some(false),
                    _ => None,
                })
                .collect::<Option<_>>()
                .ok_or_else(|| m.err("types must be .u32/.s32"))?;
            let [a_signed, b_signed] = signs[..] else {
                return Err(m.err("needs two types"));
            };
            let op = if base == "dp4a" {
                Op::Dp4a { a_signed, b_signed }
            } else {
                Op::Dp2a {
                    hi,
                    a_signed,
                    b_signed,
                }
            };
            AluOp::new(op, &[int_kind(32); 3])
        }
        "selp" => {
            let t = m.one_type()?;
            let kind = if let Some(ty) = int_ty(t) {
                int_kind(ty.bits)
            } else {
                match t {
                    "f32" => ValueKind::F32,
                    "f64" => ValueKind::F64,
                    _ => return Err(m.err("type")),
                }
            };
            let bits = match kind {
                ValueKind::F32 => 32,
                ValueKind::F64 => 64,
                ValueKind::Int { bits } => bits,
                _ => 32,
            };
            if bits < 16 {
                return Err(m.err("8-bit selp"));
            }
            AluOp::new(Op::Selp(bits), &[kind, kind, ValueKind::Pred])
        }
        "slct" => {
            let ftz = m.take("ftz");
            let [d, c] = m.types[..] else {
                return Err(m.err("needs two types"));
            };
            let (dkind, bits) = match (int_ty(d), d) {
                (Some(ty), _) if ty.bits >= 16 => (int_kind(ty.bits), ty.bits),
                (_, "f32") => (ValueKind::F32, 32),
                (_, "f64") => (ValueKind::F64, 64),
                _ => return Err(m.err("destination type")),
            };
            let (float, ckind) = match c {
                "s32" => (false, int_kind(32)),
                "f32" => (true, ValueKind::F32),
                _ => return Err(m.err("selector type must be .s32 or .f32")),
            };
            if ftz && !float {
                return Err(m.err(".ftz needs an .f32 selector"));
            }
            AluOp::new(Op::Slct { bits, float, ftz }, &[dkind, dkind, ckind])
        }
        "setp" | "set" => decode_set(base, &mut m)?,
        "testp" => {
            let class = match m.take_any(&[
                "finite",
                "infinite",
                "number",
                "notanumber",
                "normal",
                "subnormal",
            ]) {
                Some("finite") => TestClass::Finite,
                Some("infinite") => TestClass::Infinite,
                Some("number") => TestClass::Number,
                Some("notanumber") => TestClass::NotANumber,
                Some("normal") => TestClass::Normal,
                Some(_) => TestClass::Subnormal,
                None => return Err(m.err("missing class")),
            };
            let prec = float_prec(m.one_type()?)
                .filter(|p| matches!(p, Prec::F32 | Prec::F64))
                .ok_or_else(|| m.err("type must be .f32/.f64"))?;
            AluOp::new(Op::Testp { class, prec }, &[prec_kind(prec)])
        }
        "copysign" => {
            let prec = float_prec(m.one_type()?)
                .filter(|p| matches!(p, Prec::F32 | Prec::F64))
                .ok_or_else(|| m.err("type must be .f32/.f64"))?;
            AluOp::new(Op::Copysign(prec), &[prec_kind(prec); 2])
        }
        "rcp" | "sqrt" | "rsqrt" | "sin" | "cos" | "lg2" | "ex2" | "tanh" => {
            decode_unary_float(base, &mut m)?
        }
        "cvt" => decode_cvt(&mut m)?,
        _ => return Err(m.err("unknown instruction")),
    };
    m.finish()?;
    Ok(Some(op))
}

fn decode_add(base: &str, m: &mut Mods) -> Result<AluOp, String> {
    let t = m.one_type()?;
    let sub = base.starts_with("sub");
    if let Some(prec) = float_prec(t) {
        if base.ends_with('c') {
            return Err(m.err("carry on a float type"));
        }
        let op = if sub { FBin::Sub } else { FBin::Add };
        let rnd = m.rnd().unwrap_or(Rnd::Rn);
        return float_binary(m, op, prec, rnd);
    }
    let ty = int_ty(t)
        .filter(|ty| ty.bits >= 16)
        .ok_or_else(|| m.err("type"))?;
    let sat = m.take("sat");
    let cc = m.take("cc");
    let cin = base.ends_with('c');
    if sat && (ty != IntTy::S32 || cc || cin) {
        return Err(m.err(".sat applies to .s32 only"));
    }
    if (cc || cin) && ty.bits < 32 {
        return Err(m.err("carry needs 32 or 64 bits"));
    }
    let op = if sub {
        Op::Sub { ty, sat }
    } else {
        Op::Add { ty, sat }
    };
    Ok(AluOp::new(op, &[int_kind(ty.bits); 2]).carry(cin, cc))
}

/// The `.ftz` and `.sat` of float arithmetic rounding as `rnd`: f16/f16x2 support only
/// round-to-nearest; `.ftz` and `.sat` exist for f16 and f32 only (`.sat` and `.ftz` on f64
/// are not PTX).
fn float_mods(m: &mut Mods, prec: Prec, rnd: Rnd) -> Result<(bool, bool), String> {
    let ftz = m.take("ftz");
    let sat = m.take("sat");
    if matches!(prec, Prec::F16 | Prec::F16x2) && rnd != Rnd::Rn {
        return Err(m.err("f16 arithmetic rounds to nearest only"));
    }
    if prec == Prec::F64 && (ftz || sat) {
        return Err(m.err(".ftz/.sat on f64"));
    }
    Ok((ftz, sat))
}

/// `add`, `sub` or `mul` on floats, rounding as `rnd`.
fn float_binary(m: &mut Mods, op: FBin, prec: Prec, rnd: Rnd) -> Result<AluOp, String> {
    let (ftz, sat) = float_mods(m, prec, rnd)?;
    Ok(AluOp::new(
        Op::FBin {
            op,
            prec,
            rnd: FRound::Ieee(rnd),
            ftz,
            sat,
        },
        &[prec_kind(prec); 2],
    ))
}

/// Fused multiply-add (`fma`, and float `mad`), rounding as `rnd`.
fn float_fma(m: &mut Mods, prec: Prec, rnd: Rnd) -> Result<AluOp, String> {
    let (ftz, sat) = float_mods(m, prec, rnd)?;
    Ok(AluOp::new(
        Op::Fma {
            prec,
            rnd,
            ftz,
            sat,
        },
        &[prec_kind(prec); 3],
    ))
}

fn decode_mul(base: &str, m: &mut Mods) -> Result<AluOp, String> {
    let t = m.one_type()?;
    let mad = base != "mul";
    if let Some(prec) = float_prec(t) {
        if base == "madc" {
            return Err(m.err("carry on a float type"));
        }
        // `mul`/`mad` without a rounding modifier round to nearest; `mad.f32` on sm_20+ is
        // fused (the same as `fma.rn.f32`), and `mad.f64` is always fused.
        let rnd = m.rnd().unwrap_or(Rnd::Rn);
        return if mad {
            float_fma(m, prec, rnd)
        } else {
            float_binary(m, FBin::Mul, prec, rnd)
        };
    }
    let ty = int_ty(t)
        .filter(|ty| ty.bits >= 16 && !t.starts_with('b'))
        .ok_or_else(|| m.err("type"))?;
    let half = match m.take_any(&["lo", "hi", "wide"]) {
        Some("lo") => Half::Lo,
        Some("hi") => Half::Hi,
        Some(_) if ty.bits <= 32 => Half::Wide,
        _ => return Err(m.err("needs .lo, .hi or .wide (.wide on 16/32-bit types)")),
    };
    let cc = m.take("cc");
    let cin = base == "madc";
    if m.take("sat") {
        // mad.hi.sat.s32's exact saturation rule is not implemented (never guessed).
        return Err(m.err(".sat"));
    }
    if (cc || cin) && (half == Half::Wide || ty.bits < 32) {
        return Err(m.err("carry needs .lo/.hi on 32/64-bit types"));
    }
    let wide_bits = if half == Half::Wide {
        ty.bits * 2
    } else {
        ty.bits
    };
    if mad {
        Ok(AluOp::new(
            Op::Mad { ty, half },
            &[int_kind(ty.bits), int_kind(ty.bits), int_kind(wide_bits)],
        )
        .carry(cin, cc))
    } else if cc {
        Err(m.err("mul has no .cc"))
    } else {
        Ok(AluOp::new(Op::Mul { ty, half }, &[int_kind(ty.bits); 2]))
    }
}

fn decode_fma(m: &mut Mods) -> Result<AluOp, String> {
    let prec = float_prec(m.one_type()?).ok_or_else(|| m.err("type"))?;
    let rnd = m
        .rnd()
        .ok_or_else(|| m.err("fma needs a rounding modifier"))?;
    float_fma(m, prec, rnd)
}

fn decode_misc_arith(base: &str, m: &mut Mods) -> Result<AluOp, String> {
    let t = m.one_type()?;
    if let Some(prec) = float_prec(t) {
        let ftz = m.take("ftz");
        if prec == Prec::F64 && ftz {
            return Err(m.err(".ftz on f64"));
        }
        return match base {
            "div" => {
                let rnd = match m.rnd() {
                    Some(r) => FRound::Ieee(r),
                    None if m.take("approx") => FRound::Approx,
                    None if m.take("full") => FRound::Full,
                    None => return Err(m.err("div needs .rn/.rz/.rm/.rp/.approx/.full")),
                };
                if !matches!(prec, Prec::F32 | Prec::F64)
                    || (prec == Prec::F64 && !matches!(rnd, FRound::Ieee(_)))
                {
                    return Err(m.err("type"));
                }
                Ok(AluOp::new(
                    Op::FBin {
                        op: FBin::Div,
                        prec,
                        rnd,
                        ftz,
                        sat: false,
                    },
                    &[prec_kind(prec); 2],
                ))
            }
            "abs" | "neg" => {
                let op = if base == "abs" { FUn::Abs } else { FUn::Neg };
                Ok(AluOp::new(
                    Op::FUn {
                        op,
                        prec,
                        rnd: FRound::Ieee(Rnd::Rn),
                        ftz,
                    },
                    &[prec_kind(prec)],
                ))
            }
            "min" | "max" => {
                let nan = m.take("NaN");
                Ok(AluOp::new(
                    Op::FMinMax {
                        max: base == "max",
                        prec,
                        ftz,
                        nan,
                    },
                    &[prec_kind(prec); 2],
                ))
            }
            _ => Err(m.err("float type")),
        };
    }
    let ty = int_ty(t)
        .filter(|ty| ty.bits >= 16 && !t.starts_with('b'))
        .ok_or_else(|| m.err("type"))?;
    let kind = int_kind(ty.bits);
    Ok(match base {
        "div" => AluOp::new(Op::Div(ty), &[kind; 2]),
        "rem" => AluOp::new(Op::Rem(ty), &[kind; 2]),
        "sad" => AluOp::new(Op::Sad(ty), &[kind; 3]),
        "abs" | "neg" if ty.signed => {
            let op = if base == "abs" {
                Op::Abs(ty)
            } else {
                Op::Neg(ty)
            };
            AluOp::new(op, &[kind])
        }
        "min" | "max" => {
            let relu = m.take("relu");
            if relu && ty != IntTy::S32 {
                return Err(m.err(".relu applies to .s32"));
            }
            let op = if base == "min" {
                Op::Min { ty, relu }
            } else {
                Op::Max { ty, relu }
            };
            AluOp::new(op, &[kind; 2])
        }
        _ => return Err(m.err("type")),
    })
}

fn decode_unary_float(base: &str, m: &mut Mods) -> Result<AluOp, String> {
    let prec = float_prec(m.one_type()?)
        .filter(|p| matches!(p, Prec::F32 | Prec::F64))
        .ok_or_else(|| m.err("type must be .f32/.f64"))?;
    let ftz = m.take("ftz");
    let rnd = match m.rnd() {
        Some(r) => FRound::Ieee(r),
        None if m.take("approx") => FRound::Approx,
        None => return Err(m.err("needs a rounding modifier or .approx")),
    };
    let ieee = matches!(rnd, FRound::Ieee(_));
    let op = match base {
        "rcp" => FUn::Rcp,
        "sqrt" => FUn::Sqrt,
        "rsqrt" if !ieee => FUn::Rsqrt,
        "sin" | "cos" | "lg2" | "ex2" | "tanh" if !ieee && prec == Prec::F32 => {
            FUn::Fn(match base {
                "sin" => Approx::Sin,
                "cos" => Approx::Cos,
                "lg2" => Approx::Lg2,
                "ex2" => Approx::Ex2,
                _ => Approx::Tanh,
            })
        }
        _ => return Err(m.err("rounding/type combination")),
    };
    // f64: .ftz only on the approximate forms rcp.approx.ftz.f64 / rsqrt.approx.ftz.f64;
    // sqrt.approx is f32 only.
    if prec == Prec::F64 && ((ftz && ieee) || (base == "sqrt" && !ieee)) {
        return Err(m.err("f64 form"));
    }
    if prec == Prec::F64 && base == "rcp" && !ieee && !ftz {
        return Err(m.err("rcp.approx.f64 exists only as .ftz"));
    }
    Ok(AluOp::new(
        Op::FUn { op, prec, rnd, ftz },
        &[prec_kind(prec)],
    ))
}

fn decode_set(base: &str, m: &mut Mods) -> Result<AluOp, String> {
    let cmp_name = m
        .take_any(&[
            "eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu",
            "gtu", "geu", "num", "nan",
        ])
        .ok_or_else(|| m.err("missing comparison"))?;
    let ftz = m.take("ftz");
    let combine = match m.take_any(&["and", "or", "xor"]) {
        Some("and") => Some(BoolOp::And),
        Some("or") => Some(BoolOp::Or),
        Some(_) => Some(BoolOp::Xor),
        None => None,
    };
    let (out, stype) = match (base, &m.types[..]) {
        ("setp", [s]) => (SetOut::Pred, *s),
        ("set", [d, s]) => {
            let out = match *d {
                "f32" => SetOut::F32,
                "u32" | "s32" | "b32" => SetOut::Int { bits: 32 },
                _ => return Err(m.err("set destination type")),
            };
            (out, *s)
        }
        _ => return Err(m.err("types")),
    };
    let (cmp, kind) = if let Some(prec) = float_prec(stype) {
        let c = FCmp::parse(cmp_name).ok_or_else(|| m.err("float comparison"))?;
        if prec == Prec::F16x2 || (prec == Prec::F64 && ftz) {
            return Err(m.err("type"));
        }
        (Compare::Float(c, prec, ftz), prec_kind(prec))
    } else {
        let ty = int_ty(stype)
            .filter(|t| t.bits >= 16)
            .ok_or_else(|| m.err("type"))?;
        let c = ICmp::parse(cmp_name, ty.signed, stype.starts_with('b'))
            .ok_or_else(|| m.err("integer comparison"))?;
        if ftz {
            return Err(m.err(".ftz on an integer comparison"));
        }
        (Compare::Int(c, ty), int_kind(ty.bits))
    };
    let op = Op::Set { cmp, combine, out };
    Ok(if combine.is_some() {
        AluOp::new(op, &[kind, kind, ValueKind::Pred])
    } else {
        AluOp::new(op, &[kind, kind])
    })
}

fn decode_cvt(m: &mut Mods) -> Result<AluOp, String> {
    let frnd = m.rnd();
    let irnd = m.irnd();
    let ftz = m.take("ftz");
    let sat = m.take("sat");
    let relu = m.take("relu");
    let [d, s] = m.types[..] else {
        return Err(m.err("cvt needs two types"));
    };
    if d == "f16x2" || d == "bf16x2" {
        let rnd = frnd.ok_or_else(|| m.err("packing needs a rounding modifier"))?;
        if s != "f32" || ftz || sat || irnd.is_some() {
            return Err(m.err("packing form"));
        }
        return Ok(AluOp::new(
            Op::CvtPack {
                bf16: d == "bf16x2",
                rnd,
                relu,
            },
            &[ValueKind::F32; 2],
        ));
    }
    let op = CvtOp::decode(d, s, frnd, irnd, ftz, sat, relu).map_err(|why| m.err(why))?;
    Ok(AluOp::new(Op::Cvt(op), &[op.source_kind()]))
}

impl AluOp {
    /// Number of source operands (after the destination operand).
    pub fn source_count(&self) -> usize {
        self.count as usize
    }

    /// How to read source `index` when it is an immediate.
    pub fn source_kind(&self, index: usize) -> ValueKind {
        self.kinds
            .get(index)
            .copied()
            .unwrap_or(ValueKind::Int { bits: 32 })
    }

    /// Whether the instruction reads the carry flag (`addc`, `subc`, `madc`).
    pub fn reads_carry(&self) -> bool {
        self.reads_carry
    }

    /// Whether the instruction writes the carry flag (`.cc`).
    pub fn writes_carry(&self) -> bool {
        self.writes_carry
    }

    /// Evaluates one lane. `sources` holds the operands' bits (only the low bits of each source's
    /// type are meaningful: callers need not clean the upper bits); predicates are 0 or 1.
    ///
    /// The carry flag is the add carry for `add/addc/mad/madc`, and the borrow for `sub/subc`
    /// (PTX: `subc` computes `a - (b + CC.CF)`).
    #[inline]
    pub fn eval(&self, sources: &[u64; 4], carry: bool) -> AluOutput {
        self.dispatch(OneLane {
            sources: *sources,
            carry,
        })
    }

    /// Evaluates the lanes of `exec` at once: the operation is selected once, then one loop
    /// runs over the lanes (a straight loop over all 32 when `exec` is full), each lane exactly
    /// as [`AluOp::eval`] evaluates it. Source `i` of `lane` is `sources[i][lane]`, its result
    /// goes to `dst[lane]`; `carry` has one carry flag per lane. Lanes outside `exec` are
    /// neither read nor written. Returns the second results and carry-outs, one bit per lane.
    /// (The interpreter selects once per instruction, at decode: [`AluOp::select`].)
    ///
    /// # Safety
    /// Each source points to 32 readable `u64`s and `dst` to 32 writable ones that nothing else
    /// accesses during the call. `dst` may be one of the sources (a register read and written
    /// by the same instruction): each lane reads its sources before it writes its result.
    #[inline]
    pub unsafe fn eval_warp(
        &self,
        sources: [*const u64; 4],
        exec: u32,
        carry: u32,
        dst: *mut u64,
    ) -> LaneBits {
        // SAFETY: as the caller guarantees.
        unsafe { self.select().run(sources, exec, carry, dst) }
    }

    /// The operation's lane loop, selected once (the `match` over the operations and their
    /// modifiers is [`AluOp::dispatch`]'s, run here rather than per warp instruction), compiled
    /// for this CPU (x86-64-v3 where it has it).
    pub fn select(&self) -> WarpKernel {
        self.dispatch(Select)
    }

    /// The one definition of every operation's semantics: selects the operation, then hands
    /// its per-lane function to `lanes` (one lane, or a warp's lanes).
    #[inline(always)]
    fn dispatch<L: Lanes>(&self, lanes: L) -> L::Out {
        let reads_carry = self.reads_carry;
        // Neither reads nor writes the carry flag: no carry in, and the carry out unused.
        let no_carry = !self.reads_carry && !self.writes_carry;
        let value = |v: u64| AluOutput {
            value: v,
            second: false,
            carry: false,
        };
        let predicate = |t: bool| AluOutput {
            value: t as u64,
            second: !t,
            carry: false,
        };
        let with_carry = |(v, carry): (u64, bool)| AluOutput {
            value: v,
            second: false,
            carry,
        };
        macro_rules! per_lane {
            ($a:ident, $b:ident, $c:ident, $d:ident, $cin:ident;
             $($pattern:pat $(if $guard:expr)? => $body:expr),* $(,)?) => {
                match self.op {
                    $($pattern $(if $guard)? => lanes.run(
                        move |[$a, $b, $c, $d]: [u64; 4], carry: bool| {
                            let $cin = reads_carry && carry;
                            let _ = ($a, $b, $c, $d, $cin);
                            $body
                        },
                    ),)*
                }
            };
        }
        per_lane! {
            a, b, c, d, cin;
            // Frequent integer forms get arms of their own, with their widths constant and
            // without the carry where the instruction has none (the same functions: the same
            // bits), so that their lane loops are straight arithmetic.
            Op::Add {
                ty: IntTy { bits: 32, signed },
                sat: false,
            } if no_carry => value(int::add(IntTy { bits: 32, signed }, false, a, b, false).0),
            Op::Add {
                ty: IntTy { bits: 64, signed },
                sat: false,
            } if no_carry => value(int::add(IntTy { bits: 64, signed }, false, a, b, false).0),
            Op::Sub {
                ty: IntTy { bits: 32, signed },
                sat: false,
            } if no_carry => value(int::sub(IntTy { bits: 32, signed }, false, a, b, false).0),
            Op::Sub {
                ty: IntTy { bits: 64, signed },
                sat: false,
            } if no_carry => value(int::sub(IntTy { bits: 64, signed }, false, a, b, false).0),
            Op::Mul {
                ty: IntTy { bits: 32, signed },
                half: Half::Lo,
            } => value(int::mul(IntTy { bits: 32, signed }, Half::Lo, a, b)),
            Op::Mul {
                ty: IntTy { bits: 32, signed: true },
                half: Half::Wide,
            } => value(int::mul(IntTy { bits: 32, signed: true }, Half::Wide, a, b)),
            Op::Mul {
                ty: IntTy { bits: 32, signed: false },
                half: Half::Wide,
            } => value(int::mul(IntTy { bits: 32, signed: false }, Half::Wide, a, b)),
            Op::Mul {
                ty: IntTy { bits: 64, signed },
                half: Half::Lo,
            } => value(int::mul(IntTy { bits: 64, signed }, Half::Lo, a, b)),
            Op::Mad {
                ty: IntTy { bits: 32, signed },
                half: Half::Lo,
            } if no_carry => {
                let product = int::mul(IntTy { bits: 32, signed }, Half::Lo, a, b);
                value(int::add(IntTy { bits: 32, signed: false }, false, product, c, false).0)
            },
            Op::Mad {
                ty: IntTy { bits: 32, signed: true },
                half: Half::Wide,
            } if no_carry => {
                let product = int::mul(IntTy { bits: 32, signed: true }, Half::Wide, a, b);
                value(int::add(IntTy { bits: 64, signed: false }, false, product, c, false).0)
            },
            Op::Mad {
                ty: IntTy { bits: 32, signed: false },
                half: Half::Wide,
            } if no_carry => {
                let product = int::mul(IntTy { bits: 32, signed: false }, Half::Wide, a, b);
                value(int::add(IntTy { bits: 64, signed: false }, false, product, c, false).0)
            },
            Op::Mad {
                ty: IntTy { bits: 64, signed },
                half: Half::Lo,
            } if no_carry => {
                let product = int::mul(IntTy { bits: 64, signed }, Half::Lo, a, b);
                value(int::add(IntTy { bits: 64, signed: false }, false, product, c, false).0)
            },
            Op::Shl(32) => value(int::shl(32, a, b as u32)),
            Op::Shl(64) => value(int::shl(64, a, b as u32)),
            Op::And(32) => value(int::zext(a & b, 32)),
            Op::And(1) => value(int::zext(a & b, 1)),
            Op::Or(1) => value(int::zext(a | b, 1)),
            Op::Selp(32) => value(int::zext(if c & 1 != 0 { a } else { b }, 32)),
            Op::Selp(64) => value(int::zext(if c & 1 != 0 { a } else { b }, 64)),
            Op::Min {
                ty: IntTy { bits: 32, signed: true },
                relu: false,
            } => value(int::min_max(IntTy { bits: 32, signed: true }, false, false, a, b)),
            Op::Max {
                ty: IntTy { bits: 32, signed: true },
                relu: false,
            } => value(int::min_max(IntTy { bits: 32, signed: true }, true, false, a, b)),
            Op::Min {
                ty: IntTy { bits: 32, signed: false },
                relu: false,
            } => value(int::min_max(IntTy { bits: 32, signed: false }, false, false, a, b)),
            Op::Max {
                ty: IntTy { bits: 32, signed: false },
                relu: false,
            } => value(int::min_max(IntTy { bits: 32, signed: false }, true, false, a, b)),
            Op::Min {
                ty: IntTy { bits: 64, signed: true },
                relu: false,
            } => value(int::min_max(IntTy { bits: 64, signed: true }, false, false, a, b)),
            Op::Max {
                ty: IntTy { bits: 64, signed: true },
                relu: false,
            } => value(int::min_max(IntTy { bits: 64, signed: true }, true, false, a, b)),
            Op::Min {
                ty: IntTy { bits: 64, signed: false },
                relu: false,
            } => value(int::min_max(IntTy { bits: 64, signed: false }, false, false, a, b)),
            Op::Max {
                ty: IntTy { bits: 64, signed: false },
                relu: false,
            } => value(int::min_max(IntTy { bits: 64, signed: false }, true, false, a, b)),
            Op::Shr(IntTy { bits: 32, signed: false }) => {
                value(int::shr(IntTy { bits: 32, signed: false }, a, b as u32))
            },
            Op::Shr(IntTy { bits: 32, signed: true }) => {
                value(int::shr(IntTy { bits: 32, signed: true }, a, b as u32))
            },
            Op::Shr(IntTy { bits: 64, signed: false }) => {
                value(int::shr(IntTy { bits: 64, signed: false }, a, b as u32))
            },
            Op::Shr(IntTy { bits: 64, signed: true }) => {
                value(int::shr(IntTy { bits: 64, signed: true }, a, b as u32))
            },
            Op::Add { ty, sat } => with_carry(int::add(ty, sat, a, b, cin)),
            Op::Sub { ty, sat } => with_carry(int::sub(ty, sat, a, b, cin)),
            Op::Mul { ty, half } => value(int::mul(ty, half, a, b)),
            Op::Mad { ty, half } => {
                let product = int::mul(ty, half, a, b);
                let bits = if half == Half::Wide {
                    ty.bits * 2
                } else {
                    ty.bits
                };
                with_carry(int::add(
                    IntTy {
                        bits,
                        signed: false,
                    },
                    false,
                    product,
                    c,
                    cin,
                ))
            },
            Op::Mul24 { signed, hi } => value(int::mul24(signed, hi, a, b)),
            Op::Mad24 { signed, hi } => {
                value(int::mul24(signed, hi, a, b).wrapping_add(c) & 0xffff_ffff)
            },
            Op::Sad(ty) => value(int::sad(ty, a, b, c)),
            Op::Div(ty) => value(int::div(ty, a, b)),
            Op::Rem(ty) => value(int::rem(ty, a, b)),
            Op::Abs(ty) => value(ty.wrap(ty.sext(a).unsigned_abs())),
            Op::Neg(ty) => value(ty.wrap(ty.sext(a).wrapping_neg() as u64)),
            Op::Min { ty, relu } => value(int::min_max(ty, false, relu, a, b)),
            Op::Max { ty, relu } => value(int::min_max(ty, true, relu, a, b)),
            Op::Popc(bits) => value(int::zext(a, bits).count_ones() as u64),
            Op::Clz(bits) => {
                value((int::zext(a, bits).leading_zeros() - (64 - bits as u32)) as u64)
            },
            Op::Bfind { ty, shiftamt } => value(int::bfind(ty, shiftamt, a)),
            Op::Brev(bits) => value(a.reverse_bits() >> (64 - bits)),
            Op::Bfe(ty) => value(int::bfe(ty, a, b, c)),
            Op::Bfi(bits) => value(int::bfi(bits, a, b, c, d)),
            Op::Fns => value(int::fns(a as u32, b as u32, c as u32 as i32)),
            Op::Prmt(mode) => value(int::prmt(mode, a as u32, b as u32, c as u32) as u64),
            Op::And(bits) => value(int::zext(a & b, bits)),
            Op::Or(bits) => value(int::zext(a | b, bits)),
            Op::Xor(bits) => value(int::zext(a ^ b, bits)),
            Op::Not(bits) => value(int::zext(!a, bits)),
            Op::Cnot(bits) => value((int::zext(a, bits) == 0) as u64),
            Op::Lop3 => value(int::lop3(a as u32, b as u32, c as u32, d as u8) as u64),
            Op::Shl(bits) => value(int::shl(bits, a, b as u32)),
            Op::Shr(ty) => value(int::shr(ty, a, b as u32)),
            Op::Shf { left, clamp } => value(int::shf(left, clamp, a as u32, b as u32, c as u32)),
            Op::Dp4a { a_signed, b_signed } => value(int::dp4a(a_signed, b_signed, a, b, c)),
            Op::Dp2a {
                hi,
                a_signed,
                b_signed,
            } => value(int::dp2a(hi, a_signed, b_signed, a, b, c)),
            Op::Selp(bits) => value(int::zext(if c & 1 != 0 { a } else { b }, bits)),
            Op::Slct { bits, float, ftz } => {
                let pick = if float {
                    let mut s = c as u32;
                    if ftz {
                        s = round::SINGLE.flush(s as u64) as u32;
                    }
                    f32::from_bits(s) >= 0.0
                } else {
                    c as u32 as i32 >= 0
                };
                value(int::zext(if pick { a } else { b }, bits))
            },
            // `setp` on the usual integer types without a combining predicate: one arm per
            // comparison and type, so that the lane loops carry no decision (the same
            // function: the same bits).
            Op::Set {
                cmp: Compare::Int(ICmp::Eq, IntTy { bits: 32, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Eq, IntTy { bits: 32, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Ne, IntTy { bits: 32, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Ne, IntTy { bits: 32, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Lt, IntTy { bits: 32, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Lt, IntTy { bits: 32, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Le, IntTy { bits: 32, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Le, IntTy { bits: 32, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Gt, IntTy { bits: 32, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Gt, IntTy { bits: 32, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Ge, IntTy { bits: 32, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Ge, IntTy { bits: 32, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Eq, IntTy { bits: 32, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Eq, IntTy { bits: 32, signed: false }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Ne, IntTy { bits: 32, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Ne, IntTy { bits: 32, signed: false }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Lt, IntTy { bits: 32, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Lt, IntTy { bits: 32, signed: false }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Le, IntTy { bits: 32, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Le, IntTy { bits: 32, signed: false }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Gt, IntTy { bits: 32, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Gt, IntTy { bits: 32, signed: false }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Ge, IntTy { bits: 32, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Ge, IntTy { bits: 32, signed: false }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Eq, IntTy { bits: 64, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Eq, IntTy { bits: 64, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Ne, IntTy { bits: 64, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Ne, IntTy { bits: 64, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Lt, IntTy { bits: 64, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Lt, IntTy { bits: 64, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Le, IntTy { bits: 64, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Le, IntTy { bits: 64, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Gt, IntTy { bits: 64, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Gt, IntTy { bits: 64, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Ge, IntTy { bits: 64, signed: true }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Ge, IntTy { bits: 64, signed: true }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Eq, IntTy { bits: 64, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Eq, IntTy { bits: 64, signed: false }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Ne, IntTy { bits: 64, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Ne, IntTy { bits: 64, signed: false }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Lt, IntTy { bits: 64, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Lt, IntTy { bits: 64, signed: false }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Le, IntTy { bits: 64, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Le, IntTy { bits: 64, signed: false }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Gt, IntTy { bits: 64, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Gt, IntTy { bits: 64, signed: false }, a, b)),
            Op::Set {
                cmp: Compare::Int(ICmp::Ge, IntTy { bits: 64, signed: false }),
                combine: None,
                out: SetOut::Pred,
            } => predicate(int::compare(ICmp::Ge, IntTy { bits: 64, signed: false }, a, b)),
            // `setp` without a combining predicate, the usual form: the general arm below
            // with `combine` and `out` fixed.
            Op::Set {
                cmp: Compare::Int(op, ty),
                combine: None,
                out: SetOut::Pred,
            } => {
                let t = int::compare(op, ty, a, b);
                AluOutput {
                    value: t as u64,
                    second: !t,
                    carry: false,
                }
            },
            Op::Set {
                cmp: Compare::Float(op, prec, ftz),
                combine: None,
                out: SetOut::Pred,
            } => {
                let t = float::compare(op, prec, ftz, a, b);
                AluOutput {
                    value: t as u64,
                    second: !t,
                    carry: false,
                }
            },
            Op::Set { cmp, combine, out } => {
                let t = match cmp {
                    Compare::Int(op, ty) => int::compare(op, ty, a, b),
                    Compare::Float(op, prec, ftz) => float::compare(op, prec, ftz, a, b),
                };
                let p = c & 1 != 0;
                let combined = |x: bool| match combine {
                    None => x,
                    Some(BoolOp::And) => x && p,
                    Some(BoolOp::Or) => x || p,
                    Some(BoolOp::Xor) => x ^ p,
                };
                let first = combined(t);
                let v = match out {
                    SetOut::Pred => first as u64,
                    SetOut::Int { bits } => {
                        if first {
                            low_mask(bits)
                        } else {
                            0
                        }
                    }
                    SetOut::F32 => {
                        if first {
                            1.0f32.to_bits() as u64
                        } else {
                            0
                        }
                    }
                };
                AluOutput {
                    value: v,
                    second: combined(!t),
                    carry: false,
                }
            },
            Op::Testp { class, prec } => {
                let fmt = prec.format();
                let bits = int::zext(a, prec.bits());
                let r = match class {
                    TestClass::Finite => fmt.is_finite(bits),
                    TestClass::Infinite => bits & !fmt.sign_bit() == fmt.infinity(),
                    TestClass::Number => !fmt.is_nan(bits),
                    TestClass::NotANumber => fmt.is_nan(bits),
                    TestClass::Normal => fmt.is_finite(bits) && bits & fmt.infinity() != 0,
                    TestClass::Subnormal => fmt.is_subnormal(bits),
                };
                value(r as u64)
            },
            Op::Copysign(prec) => {
                // PTX: copy the sign of a into b.
                let sign = prec.format().sign_bit();
                let bits = prec.bits();
                value((int::zext(b, bits) & !sign) | (a & sign))
            },
            // The most frequent float forms get arms of their own, their modifiers constants,
            // so that their lane loops carry no decision (the same functions: the same bits).
            Op::Fma {
                prec: Prec::F32,
                rnd: Rnd::Rn,
                ftz: false,
                sat: false,
            } => value(float::fma(Prec::F32, Rnd::Rn, false, false, a, b, c)),
            Op::Fma {
                prec: Prec::F64,
                rnd: Rnd::Rn,
                ftz: false,
                sat: false,
            } => value(float::fma(Prec::F64, Rnd::Rn, false, false, a, b, c)),
            Op::FBin {
                op: FBin::Add,
                prec: Prec::F32,
                rnd: FRound::Ieee(Rnd::Rn),
                ftz: false,
                sat: false,
            } => value(float::binary(FBin::Add, Prec::F32, FRound::Ieee(Rnd::Rn), false, false, a, b)),
            Op::FBin {
                op: FBin::Sub,
                prec: Prec::F32,
                rnd: FRound::Ieee(Rnd::Rn),
                ftz: false,
                sat: false,
            } => value(float::binary(FBin::Sub, Prec::F32, FRound::Ieee(Rnd::Rn), false, false, a, b)),
            Op::FBin {
                op: FBin::Mul,
                prec: Prec::F32,
                rnd: FRound::Ieee(Rnd::Rn),
                ftz: false,
                sat: false,
            } => value(float::binary(FBin::Mul, Prec::F32, FRound::Ieee(Rnd::Rn), false, false, a, b)),
            Op::FBin {
                op: FBin::Add,
                prec: Prec::F64,
                rnd: FRound::Ieee(Rnd::Rn),
                ftz: false,
                sat: false,
            } => value(float::binary(FBin::Add, Prec::F64, FRound::Ieee(Rnd::Rn), false, false, a, b)),
            Op::FBin {
                op: FBin::Mul,
                prec: Prec::F64,
                rnd: FRound::Ieee(Rnd::Rn),
                ftz: false,
                sat: false,
            } => value(float::binary(FBin::Mul, Prec::F64, FRound::Ieee(Rnd::Rn), false, false, a, b)),
            Op::FBin {
                op,
                prec,
                rnd,
                ftz,
                sat,
            } => value(float::binary(op, prec, rnd, ftz, sat, a, b)),
            Op::Fma {
                prec,
                rnd,
                ftz,
                sat,
            } => value(float::fma(prec, rnd, ftz, sat, a, b, c)),
            Op::FMinMax {
                max,
                prec,
                ftz,
                nan,
            } => value(float::min_max(max, prec, ftz, nan, a, b)),
            // `rsqrtf`, `sqrtf`, `1.0f / x` (the same function, `op` and `prec` constant).
            Op::FUn {
                op: FUn::Rsqrt,
                prec: Prec::F32,
                rnd,
                ftz,
            } => value(float::unary(FUn::Rsqrt, Prec::F32, rnd, ftz, a)),
            Op::FUn {
                op: FUn::Sqrt,
                prec: Prec::F32,
                rnd,
                ftz,
            } => value(float::unary(FUn::Sqrt, Prec::F32, rnd, ftz, a)),
            Op::FUn {
                op: FUn::Rcp,
                prec: Prec::F32,
                rnd,
                ftz,
            } => value(float::unary(FUn::Rcp, Prec::F32, rnd, ftz, a)),
            Op::FUn { op, prec, rnd, ftz } => value(float::unary(op, prec, rnd, ftz, a)),
            // The address arithmetic's sign and zero extensions and truncations.
            Op::Cvt(op) if op.int_to_int() == Some((S32, S64)) => value(cvt::int_to_int(S32, S64, a)),
            Op::Cvt(op) if op.int_to_int() == Some((U32, U64)) => value(cvt::int_to_int(U32, U64, a)),
            Op::Cvt(op) if op.int_to_int() == Some((U64, U32)) => value(cvt::int_to_int(U64, U32, a)),
            Op::Cvt(op) if op.int_to_int() == Some((S64, S32)) => value(cvt::int_to_int(S64, S32, a)),
            // Integers to floats, rounded to nearest (loop counters and indices to float).
            Op::Cvt(op) if op.int_to_float_kind() == Some((S32, false)) => {
                value(cvt::int_to_float_rn(S32, false, a))
            },
            Op::Cvt(op) if op.int_to_float_kind() == Some((U32, false)) => {
                value(cvt::int_to_float_rn(U32, false, a))
            },
            Op::Cvt(op) if op.int_to_float_kind() == Some((S32, true)) => {
                value(cvt::int_to_float_rn(S32, true, a))
            },
            Op::Cvt(op) if op.int_to_float_kind() == Some((U32, true)) => {
                value(cvt::int_to_float_rn(U32, true, a))
            },
            Op::Cvt(op) if op.int_to_float_kind() == Some((S64, true)) => {
                value(cvt::int_to_float_rn(S64, true, a))
            },
            Op::Cvt(op) if op.int_to_float_kind() == Some((U64, true)) => {
                value(cvt::int_to_float_rn(U64, true, a))
            },
            // Floats to integers (an index or a bin from a float).
            Op::Cvt(op) if op.float_to_int_kind() == Some((S32, false)) => {
                value(op.float_to_int(S32, false, a))
            },
            Op::Cvt(op) if op.float_to_int_kind() == Some((U32, false)) => {
                value(op.float_to_int(U32, false, a))
            },
            Op::Cvt(op) if op.float_to_int_kind() == Some((S32, true)) => {
                value(op.float_to_int(S32, true, a))
            },
            Op::Cvt(op) if op.float_to_int_kind() == Some((S64, true)) => {
                value(op.float_to_int(S64, true, a))
            },
            Op::Cvt(op) => value(op.eval(a)),
            Op::CvtPack { bf16, rnd, relu } => value(cvt::pack(bf16, rnd, relu, a, b)),
        }
    }
}

/// An operation in the form the native engine (`crate::native`) generates code for: the
/// subset of [`AluOp`]s whose semantics it reproduces bit for bit (checked against
/// [`AluOp::eval`] on edge values by its tests). Values are the register file's `u64`s; every
/// result is what `eval` writes, zero-extended from `bits` where a width is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lowered {
    /// `add`, `sub`, `mul.lo`, `and`, `or`, `xor` without `.sat` or carry: modulo `2^bits`.
    Int { op: IntOp, bits: u8 },
    /// `mad.lo` without carry: `a * b + c` modulo `2^bits`.
    MadLo { bits: u8 },
    /// `mul.wide.s32` / `.u32`: the exact 64-bit product of the low 32 bits.
    MulWide { signed: bool },
    /// `mad.wide.s32` / `.u32` without carry: that product plus `c`, modulo `2^64`.
    MadWide { signed: bool },
    /// `not`.
    Not { bits: u8 },
    /// `shl`: shifts by the width or more give 0 (the amount is the low 32 bits of `b`).
    Shl { bits: u8 },
    /// `shr`: shifts by the width or more give 0 (unsigned) or the sign (signed).
    Shr { bits: u8, signed: bool },
    /// Integer `min` / `max` without `.relu`.
    MinMax { bits: u8, signed: bool, max: bool },
    /// `selp`: `c & 1 != 0 ? a : b`.
    Selp { bits: u8 },
    /// `setp` of integers without a combining predicate: `t`, and `!t` as the second result.
    SetpInt { cmp: IntCmp, bits: u8, signed: bool },
    /// `setp` of f32 without `.ftz` or a combining predicate.
    SetpF32 { cmp: FloatCmp },
    /// `cvt` between integers without `.sat` (not to `.s8`, which `eval` sign-extends).
    Convert {
        from_bits: u8,
        from_signed: bool,
        to_bits: u8,
    },
    /// `add`, `sub`, `mul` `.rn.f32` without `.ftz`/`.sat`: a NaN result is the canonical NaN.
    F32 { op: F32Op },
    /// `fma.rn.f32` without `.ftz`/`.sat`: fused, a NaN result is the canonical NaN.
    F32Fma,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IntOp {
    Add,
    Sub,
    MulLo,
    And,
    Or,
    Xor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum F32Op {
    Add,
    Sub,
    Mul,
}

/// The f32 NaN every f32 operation without `.sat` returns for a NaN result.
pub(crate) fn canonical_f32_nan() -> u32 {
    round::SINGLE.canonical_nan() as u32
}

impl AluOp {
    /// The operation in the native engine's form, `None` when it has none (the native engine
    /// then calls this operation's [`WarpKernel`]).
    pub(crate) fn lowered(&self) -> Option<Lowered> {
        if self.reads_carry || self.writes_carry {
            return None;
        }
        let rn_f32 = |prec: Prec, ftz: bool, sat: bool| prec == Prec::F32 && !ftz && !sat;
        Some(match self.op {
            Op::Add { ty, sat: false } => Lowered::Int {
                op: IntOp::Add,
                bits: ty.bits,
            },
            Op::Sub { ty, sat: false } => Lowered::Int {
                op: IntOp::Sub,
                bits: ty.bits,
            },
            Op::Mul { ty, half: Half::Lo } => Lowered::Int {
                op: IntOp::MulLo,
                bits: ty.bits,
            },
            Op::Mul {
                ty: IntTy { bits: 32, signed },
                half: Half::Wide,
            } => Lowered::MulWide { signed },
            Op::Mad { ty, half: Half::Lo } => Lowered::MadLo { bits: ty.bits },
            Op::Mad {
                ty: IntTy { bits: 32, signed },
                half: Half::Wide,
            } => Lowered::MadWide { signed },
            Op::And(bits) => Lowered::Int {
                op: IntOp::And,
                bits,
            },
            Op::Or(bits) => Lowered::Int {
                op: IntOp::Or,
                bits,
            },
            Op::Xor(bits) => Lowered::Int {
                op: IntOp::Xor,
                bits,
            },
            Op::Not(bits) => Lowered::Not { bits },
            Op::Shl(bits) => Lowered::Shl { bits },
            Op::Shr(ty) => Lowered::Shr {
                bits: ty.bits,
                signed: ty.signed,
            },
            Op::Min { ty, relu: false } => Lowered::MinMax {
                bits: ty.bits,
                signed: ty.signed,
                max: false,
            },
            Op::Max { ty, relu: false } => Lowered::MinMax {
                bits: ty.bits,
                signed: ty.signed,
                max: true,
            },
            Op::Selp(bits) => Lowered::Selp { bits },
            Op::Set {
                cmp: Compare::Int(cmp, ty),
                combine: None,
                out: SetOut::Pred,
            } => Lowered::SetpInt {
                cmp,
                bits: ty.bits,
                signed: ty.signed,
            },
            Op::Set {
                cmp: Compare::Float(cmp, Prec::F32, false),
                combine: None,
                out: SetOut::Pred,
            } => Lowered::SetpF32 { cmp },
            Op::Cvt(cvt) => match cvt.int_to_int() {
                Some((from, to)) if !(to.bits == 8 && to.signed) => Lowered::Convert {
                    from_bits: from.bits,
                    from_signed: from.signed,
                    to_bits: to.bits,
                },
                _ => return None,
            },
            Op::FBin {
                op,
                prec,
                rnd: FRound::Ieee(Rnd::Rn),
                ftz,
                sat,
            } if rn_f32(prec, ftz, sat) => Lowered::F32 {
                op: match op {
                    FBin::Add => F32Op::Add,
                    FBin::Sub => F32Op::Sub,
                    FBin::Mul => F32Op::Mul,
                    FBin::Div => return None,
                },
            },
            Op::Fma {
                prec,
                rnd: Rnd::Rn,
                ftz,
                sat,
            } if rn_f32(prec, ftz, sat) => Lowered::F32Fma,
            _ => return None,
        })
    }
}

const S32: IntTy = IntTy {
    bits: 32,
    signed: true,
};
const U32: IntTy = IntTy {
    bits: 32,
    signed: false,
};
const S64: IntTy = IntTy {
    bits: 64,
    signed: true,
};
const U64: IntTy = IntTy {
    bits: 64,
    signed: false,
};

/// The one-bit results of an instruction for a warp's lanes ([`AluOp::eval_warp`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaneBits {
    /// The second destination (`setp`'s `p|q`), one bit per lane.
    pub second: u32,
    /// The carry-out, one bit per lane.
    pub carry: u32,
}

/// Whether the CPU runs x86-64-v3 code ([`kernel_v3`]); detected once.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn x86_v3() -> bool {
    static V3: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V3.get_or_init(|| {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
            && std::is_x86_feature_detected!("bmi1")
            && std::is_x86_feature_detected!("bmi2")
            && std::is_x86_feature_detected!("lzcnt")
            && std::is_x86_feature_detected!("popcnt")
    })
}

/// How [`AluOp::dispatch`] applies an operation's per-lane function.
trait Lanes {
    type Out;
    fn run<F: LaneFn>(self, f: F) -> Self::Out;
}

/// An operation's per-lane function, as [`AluOp::dispatch`] builds it: it captures only
/// plain values (the decoded modifiers), so that [`Select`] can keep it by value.
trait LaneFn: Fn([u64; 4], bool) -> AluOutput + Copy + 'static {}
impl<F: Fn([u64; 4], bool) -> AluOutput + Copy + 'static> LaneFn for F {}

/// One lane ([`AluOp::eval`]).
struct OneLane {
    sources: [u64; 4],
    carry: bool,
}

impl Lanes for OneLane {
    type Out = AluOutput;
    #[inline(always)]
    fn run<F: LaneFn>(self, f: F) -> AluOutput {
        f(self.sources, self.carry)
    }
}

/// The lanes of a warp ([`AluOp::eval_warp`], whose safety contract the pointers follow).
struct WarpLanes {
    sources: [*const u64; 4],
    exec: u32,
    carry: u32,
    dst: *mut u64,
}

impl Lanes for WarpLanes {
    type Out = LaneBits;
    #[inline(always)]
    fn run<F: LaneFn>(self, f: F) -> LaneBits {
        let [s0, s1, s2, s3] = self.sources;
        let dst = self.dst;
        let carry_in = self.carry;
        let mut second = 0u32;
        let mut carry_out = 0u32;
        // A macro rather than a closure, so that the body is inlined in both loops.
        macro_rules! lane {
            ($lane:expr) => {{
                let lane: usize = $lane;
                // SAFETY: lane < 32, and the pointers are valid for 32 lanes (`eval_warp`);
                // the lane's sources are read before its result is written.
                unsafe {
                    let r = f(
                        [*s0.add(lane), *s1.add(lane), *s2.add(lane), *s3.add(lane)],
                        (carry_in >> lane) & 1 != 0,
                    );
                    *dst.add(lane) = r.value;
                    second |= u32::from(r.second) << lane;
                    carry_out |= u32::from(r.carry) << lane;
                }
            }};
        }
        if self.exec == u32::MAX {
            for i in 0..32 {
                lane!(i);
            }
        } else {
            let mut m = self.exec;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                lane!(i);
            }
        }
        LaneBits {
            second,
            carry: carry_out,
        }
    }
}

/// The per-lane function's captured values, kept by [`WarpKernel`] (uninitialized bytes
/// allowed: padding).
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Captured([MaybeUninit<u64>; 8]);

/// A warp kernel's entry point: the captured values, the four source rows, `exec`, the carry
/// flags and the destination row ([`AluOp::eval_warp`]'s arguments).
type KernelEntry = unsafe fn(
    *const Captured,
    *const u64,
    *const u64,
    *const u64,
    *const u64,
    u32,
    u32,
    *mut u64,
) -> LaneBits;

/// An [`AluOp`] selected once ([`AluOp::select`]): the lane loop of its operation,
/// monomorphized for its per-lane function and compiled for this CPU, with that function's
/// captured values. Running it is what [`AluOp::eval_warp`] does, without selecting again.
#[derive(Clone, Copy)]
pub struct WarpKernel {
    entry: KernelEntry,
    captured: Captured,
}

impl std::fmt::Debug for WarpKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WarpKernel")
    }
}

impl WarpKernel {
    /// [`AluOp::eval_warp`] of the operation this kernel was selected for.
    ///
    /// # Safety
    /// As [`AluOp::eval_warp`].
    #[inline(always)]
    pub unsafe fn run(
        &self,
        sources: [*const u64; 4],
        exec: u32,
        carry: u32,
        dst: *mut u64,
    ) -> LaneBits {
        let [s0, s1, s2, s3] = sources;
        // SAFETY: `captured` holds the function `entry` was instantiated for (`Select::run`);
        // the pointers as the caller guarantees.
        unsafe { (self.entry)(&self.captured, s0, s1, s2, s3, exec, carry, dst) }
    }
}

/// Selects the per-lane function once ([`AluOp::select`]).
struct Select;

impl Lanes for Select {
    type Out = WarpKernel;
    #[inline(always)]
    fn run<F: LaneFn>(self, f: F) -> WarpKernel {
        const {
            assert!(
                std::mem::size_of::<F>() <= std::mem::size_of::<Captured>()
                    && std::mem::align_of::<F>() <= std::mem::align_of::<Captured>(),
                "a per-lane function captures more than a WarpKernel holds"
            )
        };
        let mut captured = Captured([MaybeUninit::uninit(); 8]);
        // SAFETY: `Captured` is large and aligned enough for `F` (checked above); `F` is
        // `Copy`, so it has no drop to skip and may be duplicated bytewise.
        unsafe { std::ptr::write(captured.0.as_mut_ptr().cast::<F>(), f) };
        #[cfg(target_arch = "x86_64")]
        if x86_v3() {
            return WarpKernel {
                entry: kernel_v3::<F>,
                captured,
            };
        }
        WarpKernel {
            entry: kernel_generic::<F>,
            captured,
        }
    }
}

// The entry points take the pointers one by one (not as an array or struct the caller just
// stored): an aggregate read back with wider loads than it was written with stalls on store
// forwarding, a measurable cost at one call per warp instruction.

/// A [`WarpKernel`]'s entry point for any CPU.
///
/// # Safety
/// `captured` holds an `F` (written by `Select::run`); the pointers as [`AluOp::eval_warp`].
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_generic<F: LaneFn>(
    captured: *const Captured,
    s0: *const u64,
    s1: *const u64,
    s2: *const u64,
    s3: *const u64,
    exec: u32,
    carry: u32,
    dst: *mut u64,
) -> LaneBits {
    // A copy in a local (`F: Copy`), not a reference: the lane loop's stores through `dst`
    // could otherwise alias the captured values, which would then be reloaded every lane.
    // SAFETY: as the caller guarantees.
    let f = unsafe { std::ptr::read(captured.cast::<F>()) };
    WarpLanes {
        sources: [s0, s1, s2, s3],
        exec,
        carry,
        dst,
    }
    .run(f)
}

/// A [`WarpKernel`]'s entry point compiled for CPUs with AVX2 and FMA (x86-64-v3), where the
/// lane loops vectorize and `fma` is one instruction rather than a call. LLVM never contracts
/// or reassociates float operations on its own, so the results are the same bits.
///
/// # Safety
/// As [`kernel_generic`], on a CPU with those features ([`x86_v3`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,avx2,fma,bmi1,bmi2,lzcnt,popcnt")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_v3<F: LaneFn>(
    captured: *const Captured,
    s0: *const u64,
    s1: *const u64,
    s2: *const u64,
    s3: *const u64,
    exec: u32,
    carry: u32,
    dst: *mut u64,
) -> LaneBits {
    // A copy in a local (`F: Copy`), not a reference: the lane loop's stores through `dst`
    // could otherwise alias the captured values, which would then be reloaded every lane.
    // SAFETY: as the caller guarantees.
    let f = unsafe { std::ptr::read(captured.cast::<F>()) };
    WarpLanes {
        sources: [s0, s1, s2, s3],
        exec,
        carry,
        dst,
    }
    .run(f)
}
