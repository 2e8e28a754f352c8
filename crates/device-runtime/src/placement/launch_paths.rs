//! Blocks the runtime counts from the launch ([`crate::from_launch`]): the blocks of a kernel's
//! *launch tree*, reached from the entry through blocks each entered only from the one before,
//! or through the join of a tree block's branch that every thread running the block reaches
//! ([`join_of`]: `if (tid == 0) {...} __syncthreads(); if (i < n)`, whatever the `if` reads),
//! along branches whose predicates the tree's own instructions compute from `%tid`, `%ntid`,
//! `%ctaid`, `%nctaid`, kernel parameters and literals, with integer arithmetic that wraps like
//! the host's evaluation (add, subtract, multiply low, shift left by a literal, negate,
//! complement) and integer comparisons, of 64-bit values widened from 32-bit ones too (in
//! arithmetic where the widening is exact in every launch: [`widened_exactly`]).
//!
//! A thread runs such a block exactly when every branch on the way went its way: every
//! instruction before those branches ran once in that thread (no loop reaches back into the
//! tree, since each of its blocks has one predecessor, or is a join whose predecessors all lie
//! between it and its tree block, and the entry none; registers written between a tree block
//! and its join are forgotten there), nothing on the way
//! can end the thread early but a `ret`/`exit` whose guard is part of the path, and no call
//! (a callee could end the thread). The lanes of a warp that run the block took the same sides
//! of the same branches, so they run it together, once: its warp count is the number of warps
//! with at least one such thread (a divergent branch splits a group into the lanes that take
//! it and those that do not, as assumption R describes; placement `derived` only).

use std::collections::HashMap;

use ptx_lexer::declaration::parse_integer;
use ptx_lexer::{Function, FunctionKind, Instruction, Operand};

use super::Cfg;
use crate::from_launch::{
    mask, sign_extend, CompareOp, Condition, CtaDependence, Dim, IntExpr, LaunchCounted, LoopTrips,
    Predicate, Special,
};

/// What a register holds, where the tree knows it.
#[derive(Debug, Clone)]
enum Value {
    /// An integer of `width` bits.
    Int {
        width: u32,
        expr: IntExpr,
    },
    /// A 64-bit integer widened from the 32-bit `narrow` (`cvt.s64.s32`: sign-extended,
    /// `cvt.u64.u32`: zero-extended). Widening is not a ring operation, so only a comparison
    /// may read it, which becomes comparisons of the narrow value and of the other side's range
    /// ([`widened_compare`]); any other use leaves the result unknown.
    Widened {
        signed: bool,
        narrow: IntExpr,
    },
    Pred(Predicate),
}

/// Expressions deeper than this are dropped (kept unknown): the runtime evaluates them per
/// thread of each class of CTAs, and the snapshot carries them.
const MAX_EXPRESSION_NODES: usize = 64;

/// Blocks deeper in the tree than this many conditions are counted on the device: each block's
/// path is carried whole in the snapshot and evaluated per thread.
const MAX_PATH_CONDITIONS: usize = 16;

fn nodes(expr: &IntExpr) -> usize {
    match expr {
        IntExpr::Literal(_) | IntExpr::Param { .. } | IntExpr::Special(_) => 1,
        IntExpr::Add(a, b) | IntExpr::Sub(a, b) | IntExpr::Mul(a, b) => 1 + nodes(a) + nodes(b),
        IntExpr::Neg(a)
        | IntExpr::Shl(a, _)
        | IntExpr::And(a, _)
        | IntExpr::Shr { value: a, .. } => 1 + nodes(a),
        IntExpr::Div { value, divisor, .. } => 1 + nodes(value) + nodes(divisor),
    }
}

fn predicate_nodes(p: &Predicate) -> usize {
    match p {
        Predicate::Constant(_) => 1,
        Predicate::Compare(c) => 1 + nodes(&c.lhs) + nodes(&c.rhs),
        Predicate::Not(a) => 1 + predicate_nodes(a),
        Predicate::And(a, b) | Predicate::Or(a, b) | Predicate::Xor(a, b) => {
            1 + predicate_nodes(a) + predicate_nodes(b)
        }
    }
}

/// Thread-dependent terms scaled by a literal this large or more (`i * 0xCCCCCCCD`, a
/// compiler's test of divisibility) wrap around many times across a grid: left to the device.
const MAX_LITERAL_SCALE_BITS: u32 = 16;

/// Whether `expr` scales a term that depends on the thread by a literal of
/// [`MAX_LITERAL_SCALE_BITS`] bits or more (read signed in `width` bits).
fn scales_by_large_literal(expr: &IntExpr, width: u32) -> bool {
    let depends = IntExpr::reads_thread;
    let large = |e: &IntExpr| match e {
        IntExpr::Literal(bits) => {
            sign_extend(*bits, width).unsigned_abs() >= 1 << MAX_LITERAL_SCALE_BITS
        }
        _ => false,
    };
    match expr {
        IntExpr::Literal(_) | IntExpr::Param { .. } | IntExpr::Special(_) => false,
        IntExpr::Mul(a, b) => {
            (depends(a) && large(b))
                || (depends(b) && large(a))
                || scales_by_large_literal(a, width)
                || scales_by_large_literal(b, width)
        }
        IntExpr::Add(a, b) | IntExpr::Sub(a, b) => {
            scales_by_large_literal(a, width) || scales_by_large_literal(b, width)
        }
        IntExpr::Shl(a, s) => {
            (depends(a) && *s >= MAX_LITERAL_SCALE_BITS) || scales_by_large_literal(a, width)
        }
        IntExpr::Neg(a) | IntExpr::And(a, _) | IntExpr::Shr { value: a, .. } => {
            scales_by_large_literal(a, width)
        }
        // Of launch constants only.
        IntExpr::Div { .. } => false,
    }
}

/// Whether the runtime can count a predicate's threads without asking every thread of the
/// launch (`host_runtime::from_launch`): each comparison reads no `%ctaid` (all CTAs alike), or
/// is affine in the indices of one dimension, or an affine function of one dimension's CTA
/// index plus any of the thread index (a warp's global index), without large literal scales (its
/// sign changes a few times at most along the grid). Others (`x + y < n`, `x * x < n`,
/// `i * 0xCCCCCCCD < k`, `(i & 31) < 16`) are left to the device: a large launch could not be
/// counted.
fn countable_by_classes(predicate: &Predicate) -> bool {
    let mut compares = Vec::new();
    predicate.compares(&mut compares);
    compares.iter().all(|c| match c.cta_dependence() {
        CtaDependence::None => true,
        CtaDependence::Affine(_) | CtaDependence::Separable(_) => {
            !scales_by_large_literal(&c.lhs, c.width) && !scales_by_large_literal(&c.rhs, c.width)
        }
        CtaDependence::Other => false,
    })
}

/// The width of an integer type modifier (`s32`, `u64`, `b32`), if an integer type.
fn int_width(modifier: &str) -> Option<u32> {
    match modifier {
        "s32" | "u32" | "b32" => Some(32),
        "s64" | "u64" | "b64" => Some(64),
        _ => None,
    }
}

/// The integer type of an opcode (its last modifier), with its width.
fn opcode_type(instruction: &Instruction) -> Option<(&str, u32)> {
    let last = instruction.opcode.modifiers().last()?;
    int_width(last).map(|w| (last, w))
}

fn special_of(name: &str) -> Option<Special> {
    let (register, dim) = name.rsplit_once('.')?;
    let dim = match dim {
        "x" => Dim::X,
        "y" => Dim::Y,
        "z" => Dim::Z,
        _ => return None,
    };
    Some(match register {
        "%tid" => Special::Tid(dim),
        "%ntid" => Special::Ntid(dim),
        "%ctaid" => Special::Ctaid(dim),
        "%nctaid" => Special::Nctaid(dim),
        _ => return None,
    })
}

/// The bytes of a scalar integer kernel parameter, from its declaration (`.param .u32`).
fn param_bytes(declaration: &str) -> Option<u8> {
    let mut width = None;
    for word in declaration.split_whitespace() {
        match word {
            ".param" => {}
            ".ptr" | ".global" | ".const" | ".local" | ".shared" => {}
            w if w.starts_with(".align") => {}
            w => {
                if width.is_some() {
                    return None;
                }
                width = Some(int_width(w.strip_prefix('.')?)?);
            }
        }
    }
    width.map(|w| (w / 8) as u8)
}

/// The symbolic state of the tree along one path: what each register holds.
struct State<'f> {
    values: HashMap<String, Value>,
    /// Kernel parameters by name: index and bytes.
    params: &'f HashMap<String, (usize, u8)>,
}

impl State<'_> {
    fn int(&self, operand: &Operand, width: u32) -> Option<IntExpr> {
        match operand {
            Operand::Integer(text) => {
                let value = parse_integer(text)? as u64;
                Some(IntExpr::Literal(value & mask(width)))
            }
            Operand::Register(name) => {
                if let Some(special) = special_of(name) {
                    // Specials are 32-bit; a 64-bit reading would be a conversion.
                    return (width == 32).then_some(IntExpr::Special(special));
                }
                match self.values.get(name.as_str())? {
                    Value::Int { width: w, expr } if *w == width => Some(expr.clone()),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn pred(&self, operand: &Operand) -> Option<Predicate> {
        let (name, negated) = match operand {
            Operand::Register(name) => (name, false),
            Operand::NegatedRegister(name) => (name, true),
            _ => return None,
        };
        match self.values.get(name.as_str())? {
            Value::Pred(p) => Some(if negated {
                Predicate::Not(Box::new(p.clone()))
            } else {
                p.clone()
            }),
            Value::Int { .. } | Value::Widened { .. } => None,
        }
    }

    /// A 64-bit comparison operand: an integer, or a widened 32-bit one.
    fn wide(&self, operand: &Operand) -> Option<Wide> {
        if let Operand::Register(name) = operand {
            if let Some(Value::Widened { signed, narrow }) = self.values.get(name.as_str()) {
                return Some(Wide::Widened {
                    signed: *signed,
                    narrow: narrow.clone(),
                });
            }
        }
        self.int(operand, 64).map(Wide::Int)
    }

    /// Applies one unguarded, top-level instruction: the registers it writes get their
    /// values, or become unknown.
    fn apply(&mut self, instruction: &Instruction, defs: &[String]) {
        let known = self.evaluate(instruction);
        for def in defs {
            self.values.remove(def);
        }
        for (name, value) in known.into_iter().flatten() {
            let small = match &value {
                Value::Int { expr, .. } | Value::Widened { narrow: expr, .. } => {
                    nodes(expr) <= MAX_EXPRESSION_NODES
                }
                Value::Pred(p) => predicate_nodes(p) <= MAX_EXPRESSION_NODES,
            };
            if small {
                self.values.insert(name, value);
            }
        }
    }

    /// The values an instruction writes, where the tree can follow them.
    fn evaluate(&self, instruction: &Instruction) -> Option<Vec<(String, Value)>> {
        let opcode = &instruction.opcode;
        let ops = &instruction.operands;
        let dest = |i: usize| match ops.get(i) {
            Some(Operand::Register(name)) => Some(name.to_string()),
            _ => None,
        };
        let int = |width: u32, expr: IntExpr| Value::Int { width, expr };
        match opcode.base() {
            "mov" => {
                let last = opcode.modifiers().last()?;
                if last == "pred" {
                    return Some(vec![(dest(0)?, Value::Pred(self.pred(ops.get(1)?)?))]);
                }
                let width = int_width(last)?;
                Some(vec![(dest(0)?, int(width, self.int(ops.get(1)?, width)?))])
            }
            "ld" => {
                // `ld.param.u32 %r, [name]` of the kernel's own scalar parameter, whole.
                if !opcode.has_modifier("param") || opcode.modifiers().count() != 2 {
                    return None;
                }
                let (_, width) = opcode_type(instruction)?;
                let Some(Operand::Address(items)) = ops.get(1) else {
                    return None;
                };
                let [Operand::Symbol(name)] = &items[..] else {
                    return None;
                };
                let &(index, bytes) = self.params.get(name.as_str())?;
                if u32::from(bytes) * 8 != width {
                    return None;
                }
                Some(vec![(
                    dest(0)?,
                    int(width, IntExpr::Param { index, bytes }),
                )])
            }
            "add" | "sub" => {
                // Plain integer add and subtract (not `.sat`, `.cc`, nor floating point).
                if opcode.modifiers().count() != 1 {
                    return None;
                }
                let (_, width) = opcode_type(instruction)?;
                let (x, y) = (self.int(ops.get(1)?, width)?, self.int(ops.get(2)?, width)?);
                let expr = if opcode.base() == "add" {
                    IntExpr::Add(Box::new(x), Box::new(y))
                } else {
                    IntExpr::Sub(Box::new(x), Box::new(y))
                };
                Some(vec![(dest(0)?, int(width, expr))])
            }
            "mul" | "mad" => {
                // `.lo`: the low half of the product is a ring operation. `.wide` of 32-bit
                // values: the 64-bit product of the widened values, followed where each widens
                // exactly (`(size_t)blockIdx.x * TILE`).
                let modifiers: Vec<&str> = opcode.modifiers().collect();
                if let ["wide", ty @ ("u32" | "s32")] = modifiers[..] {
                    let signed = ty.starts_with('s');
                    let widen = |i: usize| widened_exactly(&self.int(ops.get(i)?, 32)?, signed);
                    let product = IntExpr::Mul(Box::new(widen(1)?), Box::new(widen(2)?));
                    let expr = if opcode.base() == "mad" {
                        IntExpr::Add(Box::new(product), Box::new(self.int(ops.get(3)?, 64)?))
                    } else {
                        product
                    };
                    return Some(vec![(dest(0)?, int(64, expr))]);
                }
                if modifiers.len() != 2 || modifiers[0] != "lo" {
                    return None;
                }
                let (_, width) = opcode_type(instruction)?;
                let product = IntExpr::Mul(
                    Box::new(self.int(ops.get(1)?, width)?),
                    Box::new(self.int(ops.get(2)?, width)?),
                );
                let expr = if opcode.base() == "mad" {
                    IntExpr::Add(Box::new(product), Box::new(self.int(ops.get(3)?, width)?))
                } else {
                    product
                };
                Some(vec![(dest(0)?, int(width, expr))])
            }
            "neg" => {
                let (ty, width) = opcode_type(instruction)?;
                if !ty.starts_with('s') || opcode.modifiers().count() != 1 {
                    return None;
                }
                let x = self.int(ops.get(1)?, width)?;
                Some(vec![(dest(0)?, int(width, IntExpr::Neg(Box::new(x))))])
            }
            // `~x = -x - 1` (all ones is -1): a ring operation too. (`not.pred` is below.)
            "not" if opcode.modifiers().last() != Some("pred") => {
                let (ty, width) = opcode_type(instruction)?;
                if !ty.starts_with('b') || opcode.modifiers().count() != 1 {
                    return None;
                }
                let x = self.int(ops.get(1)?, width)?;
                let expr = IntExpr::Add(
                    Box::new(IntExpr::Neg(Box::new(x))),
                    Box::new(IntExpr::Literal(mask(width))),
                );
                Some(vec![(dest(0)?, int(width, expr))])
            }
            "shl" => {
                let (_, width) = opcode_type(instruction)?;
                let Some(Operand::Integer(text)) = ops.get(2) else {
                    return None;
                };
                let shift = u32::try_from(parse_integer(text)?).ok()?;
                if shift >= width {
                    return None;
                }
                let x = self.int(ops.get(1)?, width)?;
                Some(vec![(
                    dest(0)?,
                    int(width, IntExpr::Shl(Box::new(x), shift)),
                )])
            }
            // `and.b32 x, literal` (a lane index: `tid & 31`) and `shr` by a literal below the
            // width (a warp index: `tid >> 5`), not ring operations: their values are exact; a
            // comparison that reads them and only `%tid` and launch constants is the same in
            // every CTA (`if ((threadIdx.x & 31) < 16)`), one that adds them to an affine
            // function of one `%ctaid` is separable, and one that reads `%ctaid` under them is
            // left to the device ([`countable_by_classes`]).
            "and" if opcode.modifiers().last() != Some("pred") => {
                let (ty, width) = opcode_type(instruction)?;
                if !ty.starts_with('b') || opcode.modifiers().count() != 1 {
                    return None;
                }
                let (x, m) = match (ops.get(1)?, ops.get(2)?) {
                    (value, Operand::Integer(text)) | (Operand::Integer(text), value) => (
                        self.int(value, width)?,
                        parse_integer(text)? as u64 & mask(width),
                    ),
                    _ => return None,
                };
                Some(vec![(dest(0)?, int(width, IntExpr::And(Box::new(x), m)))])
            }
            "shr" => {
                let (ty, width) = opcode_type(instruction)?;
                if opcode.modifiers().count() != 1 {
                    return None;
                }
                let Some(Operand::Integer(text)) = ops.get(2) else {
                    return None;
                };
                let amount = u32::try_from(parse_integer(text)?).ok()?;
                if amount >= width {
                    return None;
                }
                let value = Box::new(self.int(ops.get(1)?, width)?);
                let arithmetic = ty.starts_with('s');
                Some(vec![(
                    dest(0)?,
                    int(
                        width,
                        IntExpr::Shr {
                            value,
                            amount,
                            arithmetic,
                        },
                    ),
                )])
            }
            "div" => {
                // `div.u32`/`div.s32` (integer, truncated) of launch constants by a divisor no
                // launch makes zero: a positive literal, `%ntid` or `%nctaid` (at least 1 in a
                // launch with threads, the only launches whose counts are computed).
                let (ty, width) = opcode_type(instruction)?;
                if opcode.modifiers().count() != 1 || ty.starts_with('b') {
                    return None;
                }
                let value = self.int(ops.get(1)?, width)?;
                let divisor = self.int(ops.get(2)?, width)?;
                let never_zero = match &divisor {
                    IntExpr::Literal(bits) => sign_extend(*bits, width) > 0,
                    IntExpr::Special(Special::Ntid(_) | Special::Nctaid(_)) => true,
                    _ => false,
                };
                if !never_zero || value.reads_thread() {
                    return None;
                }
                Some(vec![(
                    dest(0)?,
                    int(
                        width,
                        IntExpr::Div {
                            value: Box::new(value),
                            divisor: Box::new(divisor),
                            signed: ty.starts_with('s'),
                        },
                    ),
                )])
            }
            "cvt" => {
                // `cvt.{s64,u64}.{s32,u32}`: widening, by the source's signedness (no rounding
                // nor saturation modifiers).
                let modifiers: Vec<&str> = opcode.modifiers().collect();
                let [to, from] = modifiers[..] else {
                    return None;
                };
                if int_width(to)? != 64 || int_width(from)? != 32 || from.starts_with('b') {
                    return None;
                }
                let narrow = self.int(ops.get(1)?, 32)?;
                let signed = from.starts_with('s');
                // Exact in every launch: an ordinary 64-bit value, which arithmetic may read.
                let value = match widened_exactly(&narrow, signed) {
                    Some(wide) => int(64, wide),
                    None => Value::Widened { signed, narrow },
                };
                Some(vec![(dest(0)?, value)])
            }
            "setp" => self.setp(instruction),
            "and" | "or" | "xor" | "not" if opcode.modifiers().last() == Some("pred") => {
                let x = self.pred(ops.get(1)?)?;
                let value = match opcode.base() {
                    "not" => Predicate::Not(Box::new(x)),
                    "and" => Predicate::And(Box::new(x), Box::new(self.pred(ops.get(2)?)?)),
                    "or" => Predicate::Or(Box::new(x), Box::new(self.pred(ops.get(2)?)?)),
                    _ => Predicate::Xor(Box::new(x), Box::new(self.pred(ops.get(2)?)?)),
                };
                Some(vec![(dest(0)?, Value::Pred(value))])
            }
            _ => None,
        }
    }

    /// `setp.cmp[.bop].type p[|q], a, b[, {!}c]`.
    fn setp(&self, instruction: &Instruction) -> Option<Vec<(String, Value)>> {
        let modifiers: Vec<&str> = instruction.opcode.modifiers().collect();
        let (&ty, rest) = modifiers.split_last()?;
        let width = int_width(ty)?;
        let (cmp, combine) = match rest {
            [cmp] => (*cmp, None),
            [cmp, bop @ ("and" | "or" | "xor")] => (*cmp, Some(*bop)),
            _ => return None,
        };
        let signed = ty.starts_with('s');
        let op = match (cmp, ty.starts_with('b')) {
            ("eq", _) => CompareOp::Eq,
            ("ne", _) => CompareOp::Ne,
            ("lt" | "lo", false) => CompareOp::Lt,
            ("le" | "ls", false) => CompareOp::Le,
            ("gt" | "hi", false) => CompareOp::Gt,
            ("ge" | "hs", false) => CompareOp::Ge,
            _ => return None,
        };
        // `lo`/`ls`/`hi`/`hs` are unsigned whatever the type says.
        let signed = signed && !matches!(cmp, "lo" | "ls" | "hi" | "hs");
        let ops = &instruction.operands;
        let compare = if width == 64 {
            widened_compare(op, signed, self.wide(ops.get(1)?)?, self.wide(ops.get(2)?)?)?
        } else {
            Predicate::compare(
                op,
                signed,
                width,
                self.int(ops.get(1)?, width)?,
                self.int(ops.get(2)?, width)?,
            )
        };
        let (first, second) = match ops.first()? {
            Operand::Register(p) => (p.to_string(), None),
            Operand::RegisterPair(p, q) => (p.to_string(), Some(q.to_string())),
            _ => return None,
        };
        let b = Box::new;
        let combined = |p: Predicate| -> Option<Predicate> {
            Some(match combine {
                None => p,
                Some(bop) => {
                    let c = self.pred(ops.get(3)?)?;
                    match bop {
                        "and" => Predicate::And(b(p), b(c)),
                        "or" => Predicate::Or(b(p), b(c)),
                        _ => Predicate::Xor(b(p), b(c)),
                    }
                }
            })
        };
        let mut out = vec![(first, Value::Pred(combined(compare.clone())?))];
        if let Some(q) = second {
            if q != "_" {
                out.push((q, Value::Pred(combined(Predicate::Not(b(compare)))?)));
            }
        }
        Some(out)
    }
}

/// `narrow`, a 32-bit expression, widened to 64 bits (`signed`: sign-extended, else
/// zero-extended) as a 64-bit expression that evaluates to the same value in every launch CUDA
/// runs, where the ranges of the specials ([`Special::range`]) and of 32-bit parameters prove
/// that; `None` otherwise.
///
/// The argument: [`rebuilt_with_range`] rebuilds the expression with each literal read signed
/// and bounds its exact value `v`. Ring operations commute with reduction modulo `2^32` and
/// `2^64`, so the PTX's 32-bit value is `v mod 2^32` and the rebuilt one's 64-bit value
/// `v mod 2^64`. Where `v` lies in the widening's range (`[0, 2^32)` zero-extended,
/// `[-2^31, 2^31)` sign-extended), the widened 32-bit value is `v` itself, and so is the
/// rebuilt one.
fn widened_exactly(narrow: &IntExpr, signed: bool) -> Option<IntExpr> {
    let (wide, low, high) = rebuilt_with_range(narrow)?;
    let (min, max): (i128, i128) = if signed {
        (-(1 << 31), (1 << 31) - 1)
    } else {
        (0, (1 << 32) - 1)
    };
    (min <= low && high <= max).then_some(wide)
}

/// A 32-bit expression rebuilt for 64-bit evaluation (literals sign-extended), with the least
/// and greatest exact values it takes in any launch ([`widened_exactly`]). A 32-bit parameter
/// reads its bits zero-extended in 64 bits: `[0, 2^32)`. `and`, `shr` and `div`, which read
/// their operands' bits, are followed where those operands lie in `[0, 2^31)`, where their
/// bits are the same in 32 and 64 bits, read signed or not; so is the result.
fn rebuilt_with_range(expr: &IntExpr) -> Option<(IntExpr, i128, i128)> {
    let b = Box::new;
    let non_negative = |e: &IntExpr| {
        let (wide, low, high) = rebuilt_with_range(e)?;
        (0 <= low && high < 1 << 31).then_some((wide, low, high))
    };
    let (min_max, wide) = match expr {
        IntExpr::Literal(bits) => {
            let value = sign_extend(*bits, 32);
            return Some((
                IntExpr::Literal(value as u64),
                i128::from(value),
                i128::from(value),
            ));
        }
        IntExpr::Param { bytes: 4, .. } => return Some((expr.clone(), 0, (1 << 32) - 1)),
        IntExpr::Param { .. } => return None,
        IntExpr::Special(special) => {
            let (low, high) = special.range();
            return Some((expr.clone(), i128::from(low), i128::from(high)));
        }
        IntExpr::Add(x, y) | IntExpr::Sub(x, y) | IntExpr::Mul(x, y) => {
            let (x, xl, xh) = rebuilt_with_range(x)?;
            let (y, yl, yh) = rebuilt_with_range(y)?;
            match expr {
                IntExpr::Add(..) => (
                    vec![xl.checked_add(yl)?, xh.checked_add(yh)?],
                    IntExpr::Add(b(x), b(y)),
                ),
                IntExpr::Sub(..) => (
                    vec![xl.checked_sub(yh)?, xh.checked_sub(yl)?],
                    IntExpr::Sub(b(x), b(y)),
                ),
                _ => (
                    vec![
                        xl.checked_mul(yl)?,
                        xl.checked_mul(yh)?,
                        xh.checked_mul(yl)?,
                        xh.checked_mul(yh)?,
                    ],
                    IntExpr::Mul(b(x), b(y)),
                ),
            }
        }
        IntExpr::Neg(x) => {
            let (x, low, high) = rebuilt_with_range(x)?;
            (
                vec![high.checked_neg()?, low.checked_neg()?],
                IntExpr::Neg(b(x)),
            )
        }
        IntExpr::Shl(x, shift) => {
            let (x, low, high) = rebuilt_with_range(x)?;
            let scale = 1i128.checked_shl(*shift)?;
            (
                vec![low.checked_mul(scale)?, high.checked_mul(scale)?],
                IntExpr::Shl(b(x), *shift),
            )
        }
        IntExpr::And(x, bits) => {
            let (x, _, high) = non_negative(x)?;
            (
                vec![0, high.min(i128::from(*bits))],
                IntExpr::And(b(x), *bits),
            )
        }
        IntExpr::Shr {
            value,
            amount,
            arithmetic,
        } => {
            let (value, low, high) = non_negative(value)?;
            (
                vec![low >> amount, high >> amount],
                IntExpr::Shr {
                    value: b(value),
                    amount: *amount,
                    arithmetic: *arithmetic,
                },
            )
        }
        IntExpr::Div {
            value,
            divisor,
            signed,
        } => {
            let (value, low, high) = non_negative(value)?;
            let (divisor, least, most) = non_negative(divisor)?;
            if least == 0 {
                return None;
            }
            (
                vec![low / most, high / least],
                IntExpr::Div {
                    value: b(value),
                    divisor: b(divisor),
                    signed: *signed,
                },
            )
        }
    };
    let low = *min_max.iter().min()?;
    let high = *min_max.iter().max()?;
    Some((wide, low, high))
}

/// An operand of a 64-bit comparison.
#[derive(Debug, Clone)]
enum Wide {
    Int(IntExpr),
    Widened { signed: bool, narrow: IntExpr },
}

/// `lhs op rhs` in 64 bits (`signed`: the comparison's signedness) as comparisons the runtime
/// evaluates: of 64-bit ring expressions as they are, and where a side is widened from 32 bits,
/// of that side's narrow value with the other side's low half, where the other side lies in
/// the range the widened values cover (read as the comparison reads them), and of the other
/// side with that range's bounds. A widened value orders within its range as its narrow value
/// does in 32 bits, signed if sign-extended, unsigned if zero-extended; outside the range
/// the comparison's outcome is fixed. Sign-extended values read unsigned do not cover one
/// range (the negative ones land at the top): `None`, as for two sides widened differently.
fn widened_compare(op: CompareOp, signed: bool, lhs: Wide, rhs: Wide) -> Option<Predicate> {
    let compare = Predicate::compare;
    let (narrow_signed, narrow, other, op) = match (lhs, rhs) {
        (Wide::Int(lhs), Wide::Int(rhs)) => return Some(compare(op, signed, 64, lhs, rhs)),
        (
            Wide::Widened {
                signed: ls,
                narrow: lhs,
            },
            Wide::Widened {
                signed: rs,
                narrow: rhs,
            },
        ) => {
            // Both in the same range, ordered alike: the narrow comparison.
            return (ls == rs && (signed || !ls)).then(|| compare(op, ls, 32, lhs, rhs));
        }
        (Wide::Widened { signed: s, narrow }, Wide::Int(other)) => (s, narrow, other, op),
        (Wide::Int(other), Wide::Widened { signed: s, narrow }) => (s, narrow, other, op.flip()),
    };
    if narrow_signed && !signed {
        return None;
    }
    // The range of the widened values as the comparison reads them.
    let (low, high): (i128, i128) = if narrow_signed {
        (-(1 << 31), (1 << 31) - 1)
    } else {
        (0, (1 << 32) - 1)
    };
    let literal = |v: i128| IntExpr::Literal((v as u64) & mask(64));
    let b = Box::new;
    // other < low: the widened side is the greater; other > high: the smaller. Read unsigned,
    // nothing is below 0.
    let below = (signed || low != 0)
        .then(|| compare(CompareOp::Lt, signed, 64, other.clone(), literal(low)));
    let above = compare(CompareOp::Gt, signed, 64, other.clone(), literal(high));
    let inside = compare(op, narrow_signed, 32, narrow, other);
    let (when_below, when_above) = match op {
        CompareOp::Lt | CompareOp::Le => (false, true),
        CompareOp::Gt | CompareOp::Ge => (true, false),
        CompareOp::Eq => (false, false),
        CompareOp::Ne => (true, true),
    };
    let mut in_range = Predicate::Not(b(above.clone()));
    if let Some(below) = &below {
        in_range = Predicate::And(b(Predicate::Not(b(below.clone()))), b(in_range));
    }
    let mut result = Predicate::And(b(in_range), b(inside));
    if let Some(below) = below.filter(|_| when_below) {
        result = Predicate::Or(b(result), b(below));
    }
    if when_above {
        result = Predicate::Or(b(result), b(above));
    }
    Some(result)
}

/// The blocks of `function` (a kernel whose entry nothing branches to) that the runtime can
/// count from the launch, with their paths, in block order (the placement drops those it
/// counts some other way, copies, which the tree passes through all the same).
pub(crate) fn launch_counted(
    function: &Function,
    cfg: &Cfg,
    ipdoms: &[Option<usize>],
    depths: &[usize],
) -> Vec<LaunchCounted> {
    if function.kind() != FunctionKind::Entry || cfg.blocks.is_empty() || !cfg.preds[0].is_empty() {
        return Vec::new();
    }
    let params: HashMap<String, (usize, u8)> = function
        .params()
        .iter()
        .enumerate()
        .filter(|(_, p)| p.array.is_none())
        .filter_map(|(i, p)| Some((p.name.to_string(), (i, param_bytes(&p.declaration)?))))
        .collect();
    let statements = function.statements();
    let is_register = |name: &str| function.declares_register(name);
    let mut found = Vec::new();
    let mut joined = vec![false; cfg.blocks.len()];
    // (block, the path to it, the registers' values at its top)
    let mut stack: Vec<(usize, Vec<Condition>, HashMap<String, Value>)> =
        vec![(0, Vec::new(), HashMap::new())];
    while let Some((b, path, values)) = stack.pop() {
        if cfg.succs[b].contains(&b) {
            // A loop of one block, entered only from a tree block: counted from the launch
            // when its trips follow from an induction register. Either way the tree goes no
            // further through it (its exit is reached at the join of a tree block, if at all).
            let state = State {
                values,
                params: &params,
            };
            if let Some(trips) = loop_trips(function, cfg, depths, b, &state) {
                found.push(LaunchCounted {
                    block: b,
                    path,
                    trips: Some(trips),
                });
            }
            continue;
        }
        if b != 0 {
            found.push(LaunchCounted {
                block: b,
                path: path.clone(),
                trips: None,
            });
        }
        let mut state = State {
            values,
            params: &params,
        };
        let block = &cfg.blocks[b];
        let mut blocked = false;
        for &s in &block.instructions {
            let Some(instruction) = statements[s].as_instruction() else {
                continue;
            };
            let base = instruction.opcode.base();
            if matches!(base, "call" | "brx") {
                blocked = true;
            }
            let (defs, _) = super::defs_and_uses(instruction, &is_register);
            if instruction.guard.is_some() || depths[s] > 0 {
                for def in &defs {
                    state.values.remove(def);
                }
                continue;
            }
            state.apply(instruction, &defs);
        }
        if blocked {
            continue;
        }
        let Some(&last) = block.instructions.last() else {
            // An empty block falls through.
            push_successors(cfg, b, None, &path, &state, &mut stack);
            continue;
        };
        let Some(last_instruction) = statements[last].as_instruction() else {
            continue;
        };
        if depths[last] > 0 {
            continue;
        }
        // Every thread that runs this block runs its join too, whatever its branch does.
        if let Some((join, written)) = join_of(function, cfg, ipdoms, b, &is_register) {
            if !std::mem::replace(&mut joined[join], true) {
                let mut values = state.values.clone();
                for register in &written {
                    values.remove(register);
                }
                stack.push((join, path.clone(), values));
            }
        }
        // The condition under which a thread leaves by the taken side (a branch's target) or
        // continues (past a guarded `ret`/`exit`).
        let guard = match &last_instruction.guard {
            None => Some(None),
            Some(g) => {
                let operand = if g.negated {
                    Operand::NegatedRegister(g.predicate.clone())
                } else {
                    Operand::Register(g.predicate.clone())
                };
                state.pred(&operand).filter(countable_by_classes).map(Some)
            }
        };
        let Some(guard) = guard else {
            continue;
        };
        push_successors(
            cfg,
            b,
            Some((last_instruction, guard)),
            &path,
            &state,
            &mut stack,
        );
    }
    found.sort_by_key(|l| l.block);
    found
}

/// The join of tree block `b`'s branch, where each thread that runs `b` arrives exactly once,
/// with the registers written on the way: `b`'s immediate post-dominator `j`, when the blocks
/// between them (reached from `b` before `j`) are entered only from `b` and from each other, as
/// is `j`, and none can end the thread (`ret`, `exit`, `trap`) or leave the function's known
/// control flow (`call`, whose callee could end it; `brx`). Loops and data-dependent branches
/// inside are fine: a thread leaves them for `j` once. So `j`'s threads are `b`'s, and its warps
/// are `b`'s too, since the lanes that split at `b` meet again at `j` (assumption R).
fn join_of(
    function: &Function,
    cfg: &Cfg,
    ipdoms: &[Option<usize>],
    b: usize,
    is_register: &dyn Fn(&str) -> bool,
) -> Option<(usize, Vec<String>)> {
    if cfg.succs[b].len() < 2 {
        return None;
    }
    let join = ipdoms[b]?;
    let mut between = vec![false; cfg.blocks.len()];
    let mut stack: Vec<usize> = cfg.succs[b]
        .iter()
        .copied()
        .filter(|&s| s != join)
        .collect();
    while let Some(x) = stack.pop() {
        if x == b || x == 0 {
            return None;
        }
        if std::mem::replace(&mut between[x], true) {
            continue;
        }
        stack.extend(cfg.succs[x].iter().copied().filter(|&s| s != join));
    }
    let inside = |p: &usize| *p == b || between[*p];
    let statements = function.statements();
    let mut written = Vec::new();
    for x in (0..cfg.blocks.len()).filter(|&x| between[x]) {
        if !cfg.preds[x].iter().all(inside) {
            return None;
        }
        for &s in &cfg.blocks[x].instructions {
            let Some(instruction) = statements[s].as_instruction() else {
                continue;
            };
            if matches!(
                instruction.opcode.base(),
                "ret" | "exit" | "trap" | "call" | "brx"
            ) {
                return None;
            }
            written.extend(super::defs_and_uses(instruction, is_register).0);
        }
    }
    cfg.preds[join]
        .iter()
        .all(inside)
        .then_some((join, written))
}

/// Steps bigger than this many bits (as a signed number) are left to the device: the runtime's
/// exact arithmetic on `init + k × step` stays far inside an `i128`.
const MAX_LOOP_WIDTH: u32 = 64;

/// The trips of block `h`, a loop of one block entered from a tree block whose registers hold
/// `state` ([`LoopTrips`]): `h` ends in a branch back to itself guarded by a predicate written
/// once in `h`, by an unguarded integer `setp` (lt, le, gt, ge; or ne repeating until equal,
/// where the start and the bound read no thread index) of an induction register `v` against a
/// value the tree knows; `v` is written in `h` only by one unguarded `add`/`sub` of a
/// value the tree knows that reads no thread index (the step), and the tree knows `v` on entry.
/// Nothing in `h` may end the thread or leave the function's known control flow (`ret`,
/// `exit`, `trap`, `call`, `brx`); the test, the step and the branch lie at the body's top
/// level (inline asm's `{ }` scopes elsewhere in `h` are fine). The expressions must be
/// affine (so that the runtime bounds them by the corners of the launch) and the repeat test,
/// as a launch condition, countable by classes of CTAs like the tree's own conditions; where
/// `init` or `bound` reads a dimension's `%ctaid`, the step must read that dimension's
/// `%nctaid` (a grid-stride loop: the threads' values then spread over a few steps, so that
/// the runtime needs few conditions per launch).
fn loop_trips(
    function: &Function,
    cfg: &Cfg,
    depths: &[usize],
    h: usize,
    state: &State,
) -> Option<LoopTrips> {
    let statements = function.statements();
    let is_register = |name: &str| function.declares_register(name);
    let block = &cfg.blocks[h];
    if cfg.succs[h].len() != 2 {
        return None;
    }
    // Instructions in nested `{ }` scopes (inline asm) count as writes of the registers they
    // name, whatever those scopes declare: at worst a loop is left to the device.
    let statement_of: Vec<usize> = block
        .instructions
        .iter()
        .copied()
        .filter(|&s| statements[s].as_instruction().is_some())
        .collect();
    let instructions: Vec<&Instruction> = statement_of
        .iter()
        .filter_map(|&s| statements[s].as_instruction())
        .collect();
    let top_level = |i: usize| depths[statement_of[i]] == 0;
    let (branch, body) = instructions.split_last()?;
    if branch.opcode.base() != "bra" || !top_level(body.len()) {
        return None;
    }
    let guard = branch.guard.as_ref()?;
    let back = cfg
        .edges
        .iter()
        .find(|e| e.from == h && e.kind == ptx_lexer::EdgeKind::Branch)?;
    if back.to != h {
        return None;
    }
    let mut writes: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, instruction) in body.iter().enumerate() {
        if matches!(
            instruction.opcode.base(),
            "ret" | "exit" | "trap" | "call" | "brx" | "bra"
        ) {
            return None;
        }
        for def in super::defs_and_uses(instruction, &is_register).0 {
            writes.entry(def).or_default().push(i);
        }
    }
    let written = |name: &str| writes.contains_key(name);
    let once = |name: &str| writes.get(name).filter(|w| w.len() == 1).map(|w| w[0]);
    // The test.
    let test_at = once(guard.predicate.as_str())?;
    let test = body[test_at];
    let modifiers: Vec<&str> = test.opcode.modifiers().collect();
    if test.opcode.base() != "setp"
        || test.guard.is_some()
        || modifiers.len() != 2
        || !top_level(test_at)
    {
        return None;
    }
    let op = match modifiers[0] {
        "eq" => CompareOp::Eq,
        "ne" => CompareOp::Ne,
        "lt" | "lo" => CompareOp::Lt,
        "le" | "ls" => CompareOp::Le,
        "gt" | "hi" => CompareOp::Gt,
        "ge" | "hs" => CompareOp::Ge,
        _ => return None,
    };
    let signed = modifiers[1].starts_with('s');
    let width = int_width(modifiers[1])?;
    if width > MAX_LOOP_WIDTH {
        return None;
    }
    let [Operand::Register(dest), lhs, rhs] = &test.operands[..] else {
        return None;
    };
    if *dest != guard.predicate {
        return None;
    }
    let register = |o: &Operand| match o {
        Operand::Register(name) => Some(name.to_string()),
        _ => None,
    };
    // Which side is the induction register: the one the loop steps.
    let (induction_left, v, other) = match (register(lhs), register(rhs)) {
        (Some(l), _) if written(&l) => (true, l, rhs),
        (_, Some(r)) if written(&r) => (false, r, lhs),
        _ => return None,
    };
    let step_at = once(&v)?;
    let step_instruction = body[step_at];
    let step_modifiers: Vec<&str> = step_instruction.opcode.modifiers().collect();
    if step_instruction.guard.is_some()
        || !top_level(step_at)
        || step_modifiers.len() != 1
        || int_width(step_modifiers[0])? != width
    {
        return None;
    }
    let [Operand::Register(step_dest), a, b] = &step_instruction.operands[..] else {
        return None;
    };
    if *step_dest != v {
        return None;
    }
    let is_v = |o: &Operand| register(o).as_deref() == Some(v.as_str());
    let known = |o: &Operand| {
        if register(o).is_some_and(|r| written(&r)) {
            return None;
        }
        state.int(o, width)
    };
    let step = match (step_instruction.opcode.base(), is_v(a), is_v(b)) {
        ("add", true, false) => known(b)?,
        ("add", false, true) => known(a)?,
        ("sub", true, false) => IntExpr::Neg(Box::new(known(b)?)),
        _ => return None,
    };
    let init = state.int(&Operand::Register(v.clone().into()), width)?;
    let bound = known(other)?;
    let trips = LoopTrips {
        op,
        signed,
        width,
        init,
        step,
        bound,
        induction_left,
        repeat_when: !guard.negated,
        tested_after_step: test_at > step_at,
    };
    trips.repeat_op()?;
    if trips.step.reads_thread() || !trips.exprs().iter().all(|e| e.is_affine()) {
        return None;
    }
    let mut ctaids = Vec::new();
    trips.init.ctaid_dims(&mut ctaids);
    trips.bound.ctaid_dims(&mut ctaids);
    let grid_stride = ctaids
        .iter()
        .all(|&d| trips.step.reads_special(Special::Nctaid(d)));
    let representative = trips.repeats_at(1)?;
    ((grid_stride || distance_ignores_ctas(&trips))
        && countable_by_classes(&representative.predicate))
    .then_some(trips)
}

/// xorshift64 from `seed` (not zero): a generator of made-up values, the same at every build.
pub(super) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

/// Whether the distance from a loop's start to its bound is the same in every CTA, for each
/// thread index (a chunk per CTA walked by a CTA-wide stride, `i = ctaid * chunk + tid; i <
/// ctaid * chunk + len`): then its threads' trips spread over a CTA's at most, however large
/// the grid. Decided by evaluating the distance for the same thread index in different CTAs
/// under a few made-up launches: only the cost depends on it (a launch whose trips spread too
/// far is refused by the runtime, never miscounted).
fn distance_ignores_ctas(trips: &LoopTrips) -> bool {
    use crate::from_launch::{LaunchValues, ThreadPoint};
    let mut params = Vec::new();
    for expr in trips.exprs() {
        expr.params(&mut params);
    }
    let count = params.iter().map(|&(i, _)| i + 1).max().unwrap_or(0);
    // Made-up launch values, the same at every build.
    let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
    (0..4).all(|_| {
        let launch = LaunchValues {
            grid: [3 + (next() % 60) as u32, 2 + (next() % 5) as u32, 2],
            block: [1 + (next() % 1024) as u32, 1 + (next() % 4) as u32, 1],
            params: (0..count).map(|_| Some(next() % 100_000)).collect(),
        };
        let tid = [(next() % u64::from(launch.block[0])) as u32, 0, 0];
        let distance = |ctaid: [u32; 3]| -> Option<u64> {
            let thread = ThreadPoint { ctaid, tid };
            let bound = trips.bound.wrapped(trips.width, &thread, &launch).ok()?;
            let init = trips.init.wrapped(trips.width, &thread, &launch).ok()?;
            Some(bound.wrapping_sub(init) & mask(trips.width))
        };
        let first = distance([0, 0, 0]);
        first.is_some()
            && [[2, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]]
                .iter()
                .all(|&ctaid| distance(ctaid) == first)
    })
}

/// Pushes the successors of tree block `b` that are entered only from it, each with its path.
/// `last`: the block's last instruction and the predicate of its guard (`None`: unguarded).
fn push_successors(
    cfg: &Cfg,
    b: usize,
    last: Option<(&Instruction, Option<Predicate>)>,
    path: &[Condition],
    state: &State,
    stack: &mut Vec<(usize, Vec<Condition>, HashMap<String, Value>)>,
) {
    let succs = &cfg.succs[b];
    // Entered only from `b`, or a loop of one block entered only from `b` and itself
    // ([`loop_trips`] decides about it).
    let entered_only_from_b = |s: usize| {
        cfg.preds[s][..] == [b]
            || (s != b
                && cfg.preds[s].len() == 2
                && cfg.preds[s].contains(&b)
                && cfg.preds[s].contains(&s))
    };
    let with = |condition: Option<Condition>| {
        let mut p = path.to_vec();
        p.extend(condition);
        p
    };
    let (base, guard) = match last {
        Some((instruction, guard)) => (Some(instruction.opcode.base()), guard),
        None => (None, None),
    };
    match (base, guard) {
        // A guarded branch: the target when the guard holds, the next block when not (both
        // the same block: no condition).
        (Some("bra"), Some(guard)) => {
            let taken = cfg
                .edges
                .iter()
                .find(|e| e.from == b && e.kind == ptx_lexer::EdgeKind::Branch)
                .map(|e| e.to);
            let fall = cfg
                .edges
                .iter()
                .find(|e| e.from == b && e.kind == ptx_lexer::EdgeKind::FallThrough)
                .map(|e| e.to);
            match (taken, fall) {
                (Some(t), Some(f)) if t == f => {
                    if entered_only_from_b(t) {
                        stack.push((t, with(None), state.values.clone()));
                    }
                }
                (t, f) => {
                    if path.len() >= MAX_PATH_CONDITIONS {
                        return;
                    }
                    for (s, holds) in [(t, true), (f, false)] {
                        if let Some(s) = s.filter(|&s| entered_only_from_b(s)) {
                            let condition = Condition {
                                predicate: guard.clone(),
                                holds,
                            };
                            stack.push((s, with(Some(condition)), state.values.clone()));
                        }
                    }
                }
            }
        }
        // A guarded `ret`/`exit`/`trap`: threads whose guard fails go on.
        (Some("ret" | "exit" | "trap"), Some(guard)) => {
            if path.len() >= MAX_PATH_CONDITIONS {
                return;
            }
            for &s in succs.iter().filter(|&&s| entered_only_from_b(s)) {
                let condition = Condition {
                    predicate: guard.clone(),
                    holds: false,
                };
                stack.push((s, with(Some(condition)), state.values.clone()));
            }
        }
        // Unguarded: every thread takes the one way out (a `bra`, or falls through).
        (Some("ret" | "exit" | "trap"), None) => {}
        _ => {
            for &s in succs.iter().filter(|&&s| entered_only_from_b(s)) {
                stack.push((s, with(None), state.values.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_launch::{LaunchValues, ThreadPoint, MAX_BLOCK, MAX_GRID};

    /// The blocks of kernel `k(.param .u32 k_n, .param .u64 k_p)` with `body` that the
    /// runtime counts from conditions (those every thread runs, with no condition, are left out:
    /// the placement copies their counts from the entry's).
    fn counted(body: &str) -> Vec<LaunchCounted> {
        let mut blocks = counted_all(body);
        blocks.retain(|b| !b.path.is_empty());
        blocks
    }

    /// All the blocks of the launch tree of `k` with `body`.
    fn counted_all(body: &str) -> Vec<LaunchCounted> {
        let ptx = format!(
            ".version 7.8\n.target sm_70\n.address_size 64\n.func f()\n{{\n\tret;\n}}\n\
             .visible .entry k(.param .u32 k_n, .param .u64 k_p, .param .align 4 .b8 k_s[8])\n\
             {{\n\t.reg .pred %p<12>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<8>;\n{body}\n}}\n"
        );
        let module = ptx_lexer::parse(ptx).unwrap();
        let function = module.function("k").unwrap();
        let cfg = Cfg::of(function);
        launch_counted(
            function,
            &cfg,
            &cfg.ipdoms(),
            &crate::placement::scope_depths(function),
        )
    }

    fn launch(n: u32) -> LaunchValues {
        LaunchValues {
            grid: [3, 2, 1],
            block: [32, 4, 1],
            params: vec![Some(u64::from(n)), Some(0)],
        }
    }

    /// The threads of `launch(n)` that run `block`.
    fn threads(block: &LaunchCounted, n: u32) -> usize {
        threads_in(block, &launch(n))
    }

    /// The threads of `launch` (a 3 x 2 grid of 32 x 4 CTAs) that run `block`.
    fn threads_in(block: &LaunchCounted, launch: &LaunchValues) -> usize {
        let mut count = 0;
        for cx in 0..3 {
            for cy in 0..2 {
                for tx in 0..32 {
                    for ty in 0..4 {
                        let thread = ThreadPoint {
                            ctaid: [cx, cy, 0],
                            tid: [tx, ty, 0],
                        };
                        count += usize::from(block.runs(&thread, launch).unwrap());
                    }
                }
            }
        }
        count
    }

    /// `if (x >= 1 && x < n - 1 && y < n)`, x and y global indices, as clang writes it.
    const GUARDS: &str = "\tmov.u32 %r1, %ctaid.y;\n\tmov.u32 %r2, %ntid.y;\n\tmov.u32 %r3, %tid.y;\n\
        \tmad.lo.s32 %r4, %r1, %r2, %r3;\n\tld.param.u32 %r5, [k_n];\n\tsetp.ge.s32 %p1, %r4, %r5;\n\
        \t@%p1 bra $EXIT;\n\tmov.u32 %r6, %ctaid.x;\n\tmov.u32 %r7, %ntid.x;\n\tmov.u32 %r8, %tid.x;\n\
        \tmad.lo.s32 %r9, %r6, %r7, %r8;\n\tadd.s32 %r10, %r5, -1;\n\tsetp.lt.s32 %p2, %r9, 1;\n\
        \tsetp.ge.s32 %p3, %r9, %r10;\n\tor.pred %p4, %p2, %p3;\n\t@%p4 bra $EXIT;\n\
        \tst.global.u32 [%rd1], %r9;\n$EXIT:\n\tret;";

    #[test]
    fn guards_on_global_indices_and_parameters_are_counted_from_the_launch() {
        let blocks = counted(GUARDS);
        assert_eq!(blocks.iter().map(|b| b.block).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(blocks[0].path.len(), 1);
        assert_eq!(blocks[1].path.len(), 2);
        // Global y in 0..8, x in 0..96: y < n, and 1 <= x < n - 1.
        assert_eq!(threads(&blocks[0], 5), 5 * 96);
        assert_eq!(threads(&blocks[1], 5), 5 * 3);
        assert_eq!(threads(&blocks[1], 50), 8 * 48);
        assert_eq!(threads(&blocks[1], 0), 0);
        let mut params = Vec::new();
        blocks[1].params(&mut params);
        assert_eq!(params, [(0, 4)]);
    }

    #[test]
    fn a_branch_on_loaded_data_ends_the_tree() {
        let body = GUARDS.replace("ld.param.u32 %r5, [k_n]", "ld.global.u32 %r5, [%rd1]");
        assert!(counted(&body).is_empty());
        // A parameter read through an offset, or a structure's bytes, is not followed either.
        let body = GUARDS.replace("[k_n]", "[k_s]");
        assert!(counted(&body).is_empty());
    }

    #[test]
    fn guarded_writes_calls_and_joins_end_the_tree() {
        let guarded = GUARDS.replace("add.s32 %r10", "@%p1 add.s32 %r10");
        assert_eq!(
            counted(&guarded)
                .iter()
                .map(|b| b.block)
                .collect::<Vec<_>>(),
            [1]
        );
        let call = GUARDS.replace("\tmov.u32 %r6", "\tcall f;\n\tmov.u32 %r6");
        assert_eq!(
            counted(&call).iter().map(|b| b.block).collect::<Vec<_>>(),
            [1]
        );
        // Block 2 is also entered from block 0: two paths, not counted.
        let join = GUARDS
            .replace("@%p1 bra $EXIT", "@%p1 bra $JOIN")
            .replace("\tst.global.u32", "$JOIN:\n\tst.global.u32");
        assert_eq!(
            counted(&join).iter().map(|b| b.block).collect::<Vec<_>>(),
            [1]
        );
    }

    #[test]
    fn a_complement_is_followed() {
        // Rodinia gaussian's `Fan2`: `x < n - 1 - t` as `x <u n + ~t`.
        let body = "\tld.param.u32 %r4, [k_n];\n\tmov.u32 %r5, %tid.x;\n\tmov.u32 %r6, %ctaid.x;\n\
            \tmov.u32 %r7, %ntid.x;\n\tmad.lo.s32 %r1, %r6, %r7, %r5;\n\tmov.u32 %r2, 3;\n\
            \tnot.b32 %r8, %r2;\n\tadd.s32 %r9, %r8, %r4;\n\tsetp.ge.u32 %p1, %r1, %r9;\n\
            \t@%p1 bra $DONE;\n\tst.global.u32 [%rd1], %r1;\n$DONE:\n\tret;";
        let blocks = counted(body);
        assert_eq!(blocks.iter().map(|b| b.block).collect::<Vec<_>>(), [1]);
        // 96 threads in x, 2 rows of CTAs, 4 rows of threads: x < 50 - 4.
        assert_eq!(threads(&blocks[0], 50), 46 * 2 * 4);
    }

    /// Every comparison of a widened 32-bit value with a 64-bit one, against the PTX's own
    /// reading: widen, then compare in 64 bits. Values at and around every bound of both
    /// readings, on either side.
    #[test]
    fn comparisons_of_widened_values_mean_what_the_ptx_computes() {
        let narrow = IntExpr::Param { index: 0, bytes: 4 };
        let other = IntExpr::Param { index: 1, bytes: 8 };
        let mut narrows: Vec<u64> = vec![0, 1, 2, 0x7fff_fffe, 0x7fff_ffff, 0x8000_0000];
        narrows.extend([0x8000_0001, 0xffff_fffe, 0xffff_ffff, 12345, 0xdead_beef]);
        let mut others: Vec<u64> = Vec::new();
        for base in [
            0i128,
            1 << 31,
            -(1 << 31),
            1 << 32,
            1 << 63,
            12345,
            0xdead_beef,
        ] {
            for delta in -2i128..=2 {
                others.push((base + delta) as u64);
            }
        }
        others.extend(narrows.iter().map(|n| n | 0xffff_ffff_0000_0000));
        let mut checked = 0;
        for extension_signed in [false, true] {
            for signed in [false, true] {
                for op in CompareOp::ALL {
                    for narrow_on_left in [true, false] {
                        let widened = Wide::Widened {
                            signed: extension_signed,
                            narrow: narrow.clone(),
                        };
                        let (lhs, rhs) = if narrow_on_left {
                            (widened, Wide::Int(other.clone()))
                        } else {
                            (Wide::Int(other.clone()), widened)
                        };
                        let Some(predicate) = widened_compare(op, signed, lhs, rhs) else {
                            // Only sign-extended values read unsigned are left to the device.
                            assert!(extension_signed && !signed);
                            continue;
                        };
                        for &a in &narrows {
                            for &b in &others {
                                let wide = if extension_signed {
                                    sign_extend(a, 32) as u64
                                } else {
                                    a
                                };
                                let (x, y) = if narrow_on_left { (wide, b) } else { (b, wide) };
                                let expected = if signed {
                                    op.apply(x as i64, y as i64)
                                } else {
                                    op.apply(x, y)
                                };
                                let launch = LaunchValues {
                                    grid: [1, 1, 1],
                                    block: [1, 1, 1],
                                    params: vec![Some(a), Some(b)],
                                };
                                let thread = ThreadPoint {
                                    ctaid: [0; 3],
                                    tid: [0; 3],
                                };
                                assert_eq!(
                                    predicate.holds(&thread, &launch).unwrap(),
                                    expected,
                                    "{op:?} signed {signed}, extension signed \
                                     {extension_signed}, narrow on the left {narrow_on_left}: \
                                     {a:#x} vs {b:#x}"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    #[test]
    fn a_guard_on_a_widened_index_is_counted_from_the_launch() {
        // Rodinia srad's `if (ei < Ne)`, `long Ne`: the index is sign-extended and compared
        // in 64 bits; then a zero-extended one, compared unsigned.
        let body = "	ld.param.u64 %rd5, [k_p];
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %tid.x;
            	shl.b32 %r3, %r1, 5;
	add.s32 %r4, %r3, %r2;
	cvt.s64.s32 %rd4, %r4;
            	setp.ge.s64 %p1, %rd4, %rd5;
	@%p1 bra $DONE;
	cvt.u64.u32 %rd6, %r2;
            	setp.hs.u64 %p2, %rd6, %rd5;
	@%p2 bra $DONE;
            	st.global.u32 [%rd1], %r4;
$DONE:
	ret;";
        let blocks = counted(body);
        assert_eq!(blocks.iter().map(|b| b.block).collect::<Vec<_>>(), [1, 2]);
        let with = |p: u64| LaunchValues {
            grid: [3, 2, 1],
            block: [32, 4, 1],
            params: vec![Some(0), Some(p)],
        };
        let count = |block: &LaunchCounted, p: u64| threads_in(block, &with(p));
        // Global x in 0..96 (32 per CTA), 2 x 4 threads share each x.
        assert_eq!(count(&blocks[0], 50), 50 * 8);
        assert_eq!(count(&blocks[0], 1 << 40), 96 * 8, "a bound beyond 32 bits");
        assert_eq!(count(&blocks[0], (-5i64) as u64), 0, "a negative bound");
        // ... and the thread's own x below the bound too.
        assert_eq!(count(&blocks[1], 50), 50 * 8);
        assert_eq!(count(&blocks[1], 20), 20 * 8);
        assert_eq!(count(&blocks[1], 1 << 40), 96 * 8);
        // Widened values in arithmetic are not followed where the widening is not exact in
        // every launch (a CTA's offset times 32 wraps in a large grid).
        let arithmetic = body.replace(
            "	setp.ge.s64 %p1, %rd4, %rd5;",
            "	add.s64 %rd7, %rd4, 1;
	setp.ge.s64 %p1, %rd7, %rd5;",
        );
        assert!(counted(&arithmetic).is_empty());
    }

    #[test]
    fn the_tree_goes_on_after_a_branch_whose_sides_meet_again() {
        // Parboil's `uniformAdd`: `if (tid == 0) uni = data[cta]; __syncthreads();` then a guard
        // on the global index; the second guard behind a data-dependent `if`, whose register
        // writes are forgotten at its join.
        let body = "\tld.param.u32 %r4, [k_n];\n\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %ctaid.x;\n\
            \tsetp.ne.s32 %p1, %r1, 0;\n\t@%p1 bra $JOIN;\n\tld.global.u32 %r5, [%rd1];\n\
            \tst.shared.u32 [%rd2], %r5;\n$JOIN:\n\tbar.sync 0;\n\tmov.u32 %r7, %ntid.x;\n\
            \tmad.lo.s32 %r8, %r2, %r7, %r1;\n\tsetp.ge.u32 %p2, %r8, %r4;\n\t@%p2 bra $DONE;\n\
            \tld.global.u32 %r9, [%rd1];\n\tsetp.eq.s32 %p3, %r9, 0;\n\t@%p3 bra $ELSE;\n\
            \tadd.s32 %r8, %r8, 1;\n\tbra.uni $MEET;\n$ELSE:\n\tst.global.u32 [%rd1], %r9;\n\
            $MEET:\n\tsetp.lt.u32 %p4, %r1, 16;\n\t@%p4 bra $DONE;\n\
            \tst.global.u32 [%rd1], %r1;\n$DONE:\n\tret;";
        let blocks = counted_all(body);
        // 1: tid == 0; 2: the join (every thread); 3: i < n; 6: the data-dependent if's join;
        // 7: tid.x >= 16 as well; 8: the last join (every thread). Not 4 and 5, the
        // data-dependent sides.
        assert_eq!(
            blocks.iter().map(|b| b.block).collect::<Vec<_>>(),
            [1, 2, 3, 6, 7, 8]
        );
        let n = 50;
        assert_eq!(threads(&blocks[0], n), 3 * 2 * 4);
        assert_eq!(threads(&blocks[1], n), 3 * 2 * 32 * 4);
        assert_eq!(threads(&blocks[2], n), 50 * 2 * 4);
        assert_eq!(threads(&blocks[3], n), 50 * 2 * 4);
        // x < 50 with x % 32 >= 16: 16..32 and 48..50 of each row.
        assert_eq!(threads(&blocks[4], n), 18 * 2 * 4);
        assert_eq!(threads(&blocks[5], n), 3 * 2 * 32 * 4);
        // `%r8` is written on one side: a guard reading it after the join is not followed.
        let rewritten = body.replace("setp.lt.u32 %p4, %r1, 16", "setp.lt.u32 %p4, %r8, 16");
        assert_eq!(
            counted(&rewritten)
                .iter()
                .map(|b| b.block)
                .collect::<Vec<_>>(),
            [1, 3, 6]
        );
        // A side that can return: its threads never reach the join.
        let returning = body.replace("\tst.shared.u32 [%rd2], %r5;", "\t@%p1 ret;");
        assert_eq!(
            counted_all(&returning)
                .iter()
                .map(|b| b.block)
                .collect::<Vec<_>>(),
            [1]
        );
    }

    #[test]
    fn conditions_mixing_dimensions_across_ctas_are_left_to_the_device() {
        // x + y < n over the grid: not one sign change per dimension.
        let mixed = GUARDS.replace(
            "setp.lt.s32 %p2, %r9, 1",
            "add.s32 %r11, %r9, %r4;\n\tsetp.lt.s32 %p2, %r11, 1",
        );
        assert_eq!(
            counted(&mixed).iter().map(|b| b.block).collect::<Vec<_>>(),
            [1]
        );
        // A compiler's divisibility test (i % 5 == 0) wraps around across the grid.
        let divisible = GUARDS.replace(
            "setp.lt.s32 %p2, %r9, 1",
            "mad.lo.s32 %r11, %r9, -858993459, 429496729;\n\tsetp.lt.u32 %p2, %r11, 858993459",
        );
        assert_eq!(
            counted(&divisible)
                .iter()
                .map(|b| b.block)
                .collect::<Vec<_>>(),
            [1]
        );
        // Within a CTA anything goes: tid.x * tid.y < 16.
        let body = "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %tid.y;\n\tmul.lo.u32 %r3, %r1, %r2;\n\
            \tsetp.lt.u32 %p1, %r3, 16;\n\t@!%p1 bra $DONE;\n\tst.global.u32 [%rd1], %r1;\n$DONE:\n\tret;";
        assert_eq!(
            counted(body).iter().map(|b| b.block).collect::<Vec<_>>(),
            [1]
        );
    }

    #[test]
    fn a_guarded_return_and_paired_comparisons_give_conditions() {
        let body = "\tmov.u32 %r1, %tid.x;\n\tsetp.lt.u32 %p1|%p2, %r1, 16;\n\t@%p2 ret;\n\
            \tshl.b32 %r2, %r1, 2;\n\tsetp.ne.and.s32 %p3, %r2, 8, %p1;\n\t@!%p3 bra $DONE;\n\
            \tst.global.u32 [%rd1], %r1;\n$DONE:\n\tret;";
        let blocks = counted(body);
        assert_eq!(
            blocks.iter().map(|b| b.block).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        // tid.x < 16 in each of the 6 CTAs' 4 rows; then tid.x * 4 != 8 as well; the join of
        // that branch, the threads that did not return.
        assert_eq!(threads(&blocks[0], 0), 6 * 4 * 16);
        assert_eq!(threads(&blocks[1], 0), 6 * 4 * 15);
        assert_eq!(threads(&blocks[2], 0), 6 * 4 * 16);
        assert!(!blocks[0].path[0].holds);
    }

    #[test]
    fn lane_and_warp_indices_are_followed_where_they_read_no_cta_index() {
        // `if ((tid.x & 31) < 16)`, then `if ((tid.x - 40) >> 3 < -2)` (arithmetic: tid.x <
        // 24), as the PTX computes them.
        let body = "\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 31;\n\tsetp.lt.u32 %p1, %r2, 16;\n\
            \t@!%p1 bra $DONE;\n\tst.global.u32 [%rd1], %r1;\n\tadd.s32 %r3, %r1, -40;\n\
            \tshr.s32 %r4, %r3, 3;\n\tsetp.lt.s32 %p2, %r4, -2;\n\t@!%p2 bra $DONE;\n\
            \tst.global.u32 [%rd1], %r4;\n$DONE:\n\tret;";
        let blocks = counted(body);
        assert_eq!(blocks.iter().map(|b| b.block).collect::<Vec<_>>(), [1, 2]);
        // 6 CTAs of 4 rows of 32 lanes.
        assert_eq!(threads(&blocks[0], 0), 6 * 4 * 16);
        assert_eq!(threads(&blocks[1], 0), 6 * 4 * 16);
        // `tid.x >> 4 == 1` (logical) and a parameter's remainder, `(n & 3) == 1`.
        let warp = body
            .replace("and.b32 %r2, %r1, 31", "shr.u32 %r2, %r1, 4")
            .replace("setp.lt.u32 %p1, %r2, 16", "setp.eq.u32 %p1, %r2, 1");
        assert_eq!(threads(&counted(&warp)[0], 0), 6 * 4 * 16);
        let remainder = body.replace(
            "and.b32 %r2, %r1, 31;\n\tsetp.lt.u32 %p1, %r2, 16",
            "ld.param.u32 %r5, [k_n];\n\tand.b32 %r2, %r5, 3;\n\tsetp.eq.u32 %p1, %r2, 1",
        );
        assert_eq!(threads(&counted(&remainder)[0], 5), 6 * 4 * 32);
        assert_eq!(threads(&counted(&remainder)[0], 6), 0);
        // A global index's lane, (ctaid.x * ntid.x + tid.x) & 31: not affine across CTAs, so
        // left to the device.
        let global = body.replace(
            "and.b32 %r2, %r1, 31",
            "mov.u32 %r6, %ctaid.x;\n\tmov.u32 %r7, %ntid.x;\n\tmad.lo.s32 %r8, %r6, %r7, %r1;\n\
             \tand.b32 %r2, %r8, 31",
        );
        assert!(counted(&global).is_empty());
        // A warp per row: `row = ctaid.x * (ntid.x >> 5) + (tid.x >> 5); if (row < n)`, an
        // affine function of the CTA index plus one of the thread index (separable).
        let row = "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %ntid.x;\n\tshr.u32 %r3, %r2, 5;\n\
            \tmov.u32 %r4, %ctaid.x;\n\tshr.s32 %r5, %r1, 5;\n\tmad.lo.s32 %r6, %r4, %r3, %r5;\n\
            \tld.param.u32 %r7, [k_n];\n\tsetp.ge.s32 %p1, %r6, %r7;\n\t@%p1 bra $DONE;\n\
            \tst.global.u32 [%rd1], %r6;\n$DONE:\n\tret;";
        let blocks = counted(row);
        assert_eq!(blocks.iter().map(|b| b.block).collect::<Vec<_>>(), [1]);
        assert!(matches!(
            blocks[0].compares()[0].cta_dependence(),
            CtaDependence::Separable(Dim::X)
        ));
        // CTAs 32 threads wide: one row per CTA along x (rows 0..3), whatever tid.y and the
        // CTA's y (6 CTAs of 128 threads).
        assert_eq!(threads(&blocks[0], 5), 6 * 128);
        assert_eq!(threads(&blocks[0], 2), 2 * 2 * 128);
    }

    /// SHOC's reduction's grid-stride loop as clang writes it: `i = ctaid.x * 2 ntid.x +
    /// tid.x; while (i < n) { ...; i += 2 ntid.x nctaid.x; }`, the loop one block entered from
    /// the guard's fall-through.
    const GRID_STRIDE: &str = "\tld.param.u32 %r8, [k_n];\n\tmov.u32 %r1, %ctaid.x;\n\
        \tmov.u32 %r2, %ntid.x;\n\tshl.b32 %r9, %r2, 1;\n\tmov.u32 %r3, %tid.x;\n\
        \tmad.lo.s32 %r13, %r9, %r1, %r3;\n\tsetp.ge.u32 %p1, %r13, %r8;\n\t@%p1 bra $DONE;\n\
        \tmov.u32 %r10, %nctaid.x;\n\tmul.lo.s32 %r5, %r9, %r10;\n$LOOP:\n\
        \tld.global.u32 %r6, [%rd1];\n\tadd.s32 %r13, %r13, %r5;\n\
        \tsetp.lt.u32 %p2, %r13, %r8;\n\t@%p2 bra $LOOP;\n$DONE:\n\tret;";

    #[test]
    fn a_grid_stride_loop_of_one_block_is_counted_from_the_launch() {
        let blocks = counted(GRID_STRIDE);
        let looped: Vec<&LaunchCounted> = blocks.iter().filter(|b| b.trips.is_some()).collect();
        assert_eq!(looped.len(), 1, "{blocks:?}");
        let trips = looped[0].trips.as_ref().unwrap();
        assert_eq!(
            (trips.op, trips.signed, trips.width),
            (CompareOp::Lt, false, 32)
        );
        assert!(trips.induction_left && trips.repeat_when && trips.tested_after_step);
        assert_eq!(trips.repeat_op(), Some(CompareOp::Lt));
        // Its path is the guard's fall-through: the threads whose first index is below n.
        assert_eq!(looped[0].path.len(), 1);
        assert!(!looped[0].path[0].holds);
        // The expressions are the PTX's: evaluated for thread 5 of CTA 2 (of 3 x 2 CTAs of
        // 32 x 4), i = 2 * 64 + 5, step = 64 * 3, bound n.
        let launch = launch(1000);
        let thread = ThreadPoint {
            ctaid: [2, 1, 0],
            tid: [5, 3, 0],
        };
        let value = |e: &IntExpr| e.wrapped(32, &thread, &launch).unwrap();
        assert_eq!(value(&trips.init), 2 * 64 + 5);
        assert_eq!(value(&trips.step), 64 * 3);
        assert_eq!(value(&trips.bound), 1000);
        // The test before the step (`setp` first): the first test reads the start.
        let before = GRID_STRIDE.replace(
            "\tadd.s32 %r13, %r13, %r5;\n\tsetp.lt.u32 %p2, %r13, %r8;\n",
            "\tsetp.lt.u32 %p2, %r13, %r8;\n\tadd.s32 %r13, %r13, %r5;\n",
        );
        let trips = counted(&before)
            .into_iter()
            .find_map(|b| b.trips)
            .expect("the loop");
        assert!(!trips.tested_after_step);
        // The same test written `!(n <= i)`: sides swapped, repeating when it fails.
        let swapped = GRID_STRIDE.replace(
            "setp.lt.u32 %p2, %r13, %r8;\n\t@%p2 bra $LOOP",
            "setp.le.u32 %p2, %r8, %r13;\n\t@!%p2 bra $LOOP",
        );
        let trips = counted(&swapped)
            .into_iter()
            .find_map(|b| b.trips)
            .expect("the loop");
        assert!(!trips.induction_left && !trips.repeat_when);
        assert_eq!(trips.repeat_op(), Some(CompareOp::Lt));
    }

    #[test]
    fn loops_whose_trips_do_not_follow_from_the_launch_are_left_to_the_device() {
        let looped = |body: &str| counted(body).iter().any(|b| b.trips.is_some());
        assert!(looped(GRID_STRIDE));
        let variants = [
            // A second write of the induction register.
            (
                "\tadd.s32 %r13, %r13, %r5;\n",
                "\tadd.s32 %r13, %r13, %r5;\n\tadd.s32 %r13, %r13, 1;\n",
            ),
            // A guarded step.
            (
                "\tadd.s32 %r13, %r13, %r5;\n",
                "\t@%p1 add.s32 %r13, %r13, %r5;\n",
            ),
            // A step loaded from memory.
            (
                "\tadd.s32 %r13, %r13, %r5;\n",
                "\tadd.s32 %r13, %r13, %r6;\n",
            ),
            // A step that reads the thread index.
            (
                "\tmul.lo.s32 %r5, %r9, %r10;\n",
                "\tmul.lo.s32 %r5, %r9, %r3;\n",
            ),
            // A bound the loop writes.
            (
                "\tld.global.u32 %r6, [%rd1];\n",
                "\tld.global.u32 %r8, [%rd1];\n",
            ),
            // A test until equal of a start that depends on the thread (the distances to the
            // bound may not be multiples of the step).
            ("setp.lt.u32 %p2", "setp.ne.u32 %p2"),
            // A test that repeats while equal.
            ("setp.lt.u32 %p2", "setp.eq.u32 %p2"),
            // A start that reads the CTA index with a step that does not read the grid's
            // size (`i += 2 ntid.x`): the threads' trips would spread over the whole grid.
            ("mul.lo.s32 %r5, %r9, %r10", "mov.u32 %r5, %r9"),
            // A call in the loop (the callee could end the thread).
            (
                "\tld.global.u32 %r6, [%rd1];\n",
                "\tld.global.u32 %r6, [%rd1];\n\tcall f;\n",
            ),
        ];
        for (from, to) in variants {
            let body = GRID_STRIDE.replace(from, to);
            assert_ne!(body, GRID_STRIDE, "{from}");
            assert!(!looped(&body), "counted from the launch with {to:?}");
        }
        // A start that does not read the CTA index may step by a literal (a halo's rows).
        let rows = GRID_STRIDE
            .replace("mad.lo.s32 %r13, %r9, %r1, %r3", "mov.u32 %r13, %r3")
            .replace("mul.lo.s32 %r5, %r9, %r10", "mov.u32 %r5, 8");
        assert!(looped(&rows));
    }

    #[test]
    fn a_chunk_per_cta_divides_launch_constants() {
        // Parboil histo's prescan: `chunk = n / nctaid.x; i = ctaid.x * chunk + tid.x; if (i <
        // ctaid.x * chunk + chunk / 8) do { ... i += ntid.x; } while (i < end)`: a guard and a
        // loop whose distance to the bound is the same in every CTA (walked by a CTA-wide
        // stride), both counted from the launch.
        let body = "\tld.param.u32 %r12, [k_n];\n\tmov.u32 %r13, %nctaid.x;\n\
            \tdiv.u32 %r14, %r12, %r13;\n\tmov.u32 %r15, %ctaid.x;\n\
            \tmul.lo.s32 %r6, %r14, %r15;\n\tmov.u32 %r1, %tid.x;\n\tadd.s32 %r7, %r6, %r1;\n\
            \tshr.u32 %r8, %r14, 3;\n\tadd.s32 %r3, %r6, %r8;\n\tsetp.ge.s32 %p1, %r7, %r3;\n\
            \t@%p1 bra $DONE;\n\tmov.u32 %r4, %ntid.x;\n$LOOP:\n\tld.global.u32 %r9, [%rd1];\n\
            \tadd.s32 %r7, %r7, %r4;\n\tsetp.lt.s32 %p2, %r7, %r3;\n\t@%p2 bra $LOOP;\n\
            $DONE:\n\tret;";
        let blocks = counted(body);
        assert!(blocks.iter().any(|b| b.trips.is_none()), "{blocks:?}");
        let looped = blocks
            .iter()
            .find(|b| b.trips.is_some())
            .expect("the loop counted from the launch");
        // 3 x 2 CTAs of 32 x 4 threads: n = 480 gives chunks of 160 (3 CTAs along x), whose
        // first 20 elements the threads with tid.x below 20 start: 6 CTAs x 4 rows x 20.
        assert_eq!(threads(looped, 480), 6 * 4 * 20);
        let launch = launch(480);
        let thread = ThreadPoint {
            ctaid: [1, 0, 0],
            tid: [0, 0, 0],
        };
        let init = looped
            .trips
            .as_ref()
            .unwrap()
            .init
            .wrapped(32, &thread, &launch);
        assert_eq!(init, Ok(160));
        // A divisor a launch could make zero (a parameter), or a quotient of a thread index,
        // is not followed: the guard and the loop are left to the device.
        let by_param = body.replace("mov.u32 %r13, %nctaid.x", "ld.param.u32 %r13, [k_n]");
        assert!(counted(&by_param).is_empty());
        let of_thread = body.replace("div.u32 %r14, %r12, %r13", "div.u32 %r14, %r1, %r13");
        assert!(counted(&of_thread).iter().all(|b| b.trips.is_none()));
        // A CTA-index start whose distance to the bound grows with the CTA (`i < n`, not the
        // chunk's end) needs a grid stride.
        let whole = body.replace("setp.lt.s32 %p2, %r7, %r3", "setp.lt.s32 %p2, %r7, %r12");
        assert!(counted(&whole).iter().all(|b| b.trips.is_none()));
    }

    #[test]
    fn a_loop_until_equal_of_a_distance_every_thread_shares_is_counted_from_the_launch() {
        // clang's remainder loop (Polybench's GEMM): `r = n & 3; if (r != 0) do { ...; r -= 1; }
        // while (r != 0)`, as `add -1`, `setp.ne`.
        let body = "\tld.param.u32 %r1, [k_n];\n\tand.b32 %r2, %r1, 3;\n\
            \tsetp.eq.s32 %p1, %r2, 0;\n\t@%p1 bra $DONE;\n$LOOP:\n\tld.global.u32 %r9, [%rd1];\n\
            \tadd.s32 %r2, %r2, -1;\n\tsetp.ne.s32 %p2, %r2, 0;\n\t@%p2 bra $LOOP;\n$DONE:\n\tret;";
        let trips = counted(body)
            .into_iter()
            .find_map(|b| b.trips)
            .expect("the loop counted from the launch");
        assert_eq!(trips.repeat_op(), Some(CompareOp::Ne));
        // From the thread's own index the distances differ: left to the device.
        let own = body.replace("and.b32 %r2, %r1, 3", "mov.u32 %r2, %tid.x");
        assert!(counted(&own).iter().all(|b| b.trips.is_none()));
    }

    /// A 32-bit expression of `depth` levels at most, from `next`'s bits.
    fn random_narrow(next: &mut dyn FnMut() -> u64, depth: u32) -> IntExpr {
        let b = Box::new;
        let dim = |bits: u64| Dim::ALL[(bits % 3) as usize];
        let leaf = |next: &mut dyn FnMut() -> u64| match next() % 7 {
            0 => IntExpr::Special(Special::Tid(dim(next()))),
            1 => IntExpr::Special(Special::Ntid(dim(next()))),
            2 => IntExpr::Special(Special::Ctaid(dim(next()))),
            3 => IntExpr::Special(Special::Nctaid(dim(next()))),
            4 => IntExpr::Param { index: 0, bytes: 4 },
            // Small literals of either sign, and any bits.
            5 => IntExpr::Literal((next() % 2048).wrapping_sub(1024) & mask(32)),
            _ => IntExpr::Literal(next() & mask(32)),
        };
        if depth == 0 || next() % 4 == 0 {
            return leaf(next);
        }
        let sub = |next: &mut dyn FnMut() -> u64| random_narrow(next, depth - 1);
        match next() % 8 {
            0 => IntExpr::Add(b(sub(next)), b(sub(next))),
            1 => IntExpr::Sub(b(sub(next)), b(sub(next))),
            2 => IntExpr::Mul(b(sub(next)), b(leaf(next))),
            3 => IntExpr::Neg(b(sub(next))),
            4 => IntExpr::Shl(b(sub(next)), (next() % 32) as u32),
            5 => IntExpr::And(b(sub(next)), next() & mask(32)),
            6 => IntExpr::Shr {
                value: b(sub(next)),
                amount: (next() % 32) as u32,
                arithmetic: next() % 2 == 0,
            },
            _ => IntExpr::Div {
                value: b(sub(next)),
                divisor: b(leaf(next)),
                signed: next() % 2 == 0,
            },
        }
    }

    #[test]
    fn exact_widenings_equal_the_ptxs_widened_values() {
        // The oracle: the PTX's 32-bit value (`wrapped(32)`), zero- or sign-extended, against
        // the rebuilt expression's 64-bit value, in launches at and inside CUDA's limits, at
        // their extreme threads, with parameters at the edges of their ranges.
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        let extreme = |next: &mut dyn FnMut() -> u64, max: u32| match next() % 4 {
            0 => 1,
            1 => max,
            _ => 1 + (next() % u64::from(max)) as u32,
        };
        let params = [0u64, 1, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 1000];
        let (mut exact, mut checked) = (0, 0);
        for _ in 0..4000 {
            let narrow = random_narrow(&mut next, 3);
            for signed in [false, true] {
                let Some(wide) = widened_exactly(&narrow, signed) else {
                    continue;
                };
                exact += 1;
                for _ in 0..40 {
                    let launch = LaunchValues {
                        grid: MAX_GRID.map(|m| extreme(&mut next, m)),
                        block: MAX_BLOCK.map(|m| extreme(&mut next, m)),
                        params: vec![Some(match next() % 7 {
                            6 => next() & mask(32),
                            k => params[k as usize],
                        })],
                    };
                    let index = |next: &mut dyn FnMut() -> u64, n: u32| match next() % 3 {
                        0 => 0,
                        1 => n - 1,
                        _ => (next() % u64::from(n)) as u32,
                    };
                    let thread = ThreadPoint {
                        ctaid: launch.grid.map(|n| index(&mut next, n)),
                        tid: launch.block.map(|n| index(&mut next, n)),
                    };
                    let bits = narrow.wrapped(32, &thread, &launch).unwrap();
                    let widened = if signed {
                        sign_extend(bits, 32) as u64
                    } else {
                        bits
                    };
                    assert_eq!(
                        wide.wrapped(64, &thread, &launch).unwrap(),
                        widened,
                        "{narrow:?} widened {} as {wide:?} at {thread:?} of {launch:?}",
                        if signed { "signed" } else { "unsigned" }
                    );
                    checked += 1;
                }
            }
        }
        assert!(
            exact > 1000 && checked > 40_000,
            "{exact} exact, {checked} checked"
        );
        // What the widening follows, and what it leaves.
        let special = |s: Special| IntExpr::Special(s);
        let tid = special(Special::Tid(Dim::X));
        let minus_ten = IntExpr::Sub(Box::new(tid.clone()), Box::new(IntExpr::Literal(10)));
        assert!(widened_exactly(&tid, false).is_some());
        assert!(widened_exactly(&minus_ten, true).is_some());
        assert!(
            widened_exactly(&minus_ten, false).is_none(),
            "below zero at tid 0"
        );
        let global = IntExpr::Add(
            Box::new(IntExpr::Mul(
                Box::new(special(Special::Ctaid(Dim::X))),
                Box::new(special(Special::Ntid(Dim::X))),
            )),
            Box::new(tid),
        );
        assert!(
            widened_exactly(&global, false).is_none(),
            "wraps in a large grid"
        );
        let param = IntExpr::Param { index: 0, bytes: 4 };
        assert!(widened_exactly(&param, false).is_some());
        assert!(
            widened_exactly(&param, true).is_none(),
            "read zero-extended in 64 bits"
        );
    }

    #[test]
    fn index_arithmetic_widened_exactly_is_followed() {
        // A scan's `size_t i = (size_t)blockIdx.x * 1024 + threadIdx.x + 256; if (i < n)`, as
        // clang writes it: `mul.wide.u32`, `cvt.u64.u32`, 64-bit adds, a 64-bit bound.
        let body = "\tld.param.u64 %rd5, [k_p];\n\tmov.u32 %r1, %ctaid.x;\n\
            \tmul.wide.u32 %rd1, %r1, 1024;\n\tmov.u32 %r2, %tid.x;\n\tcvt.u64.u32 %rd2, %r2;\n\
            \tadd.s64 %rd3, %rd1, %rd2;\n\tadd.s64 %rd4, %rd3, 256;\n\
            \tsetp.ge.u64 %p1, %rd4, %rd5;\n\t@%p1 bra $DONE;\n\tst.global.u32 [%rd1], %r1;\n\
            $DONE:\n\tret;";
        let blocks = counted(body);
        assert_eq!(blocks.iter().map(|b| b.block).collect::<Vec<_>>(), [1]);
        let with = |n: u64| LaunchValues {
            grid: [3, 2, 1],
            block: [32, 4, 1],
            params: vec![Some(0), Some(n)],
        };
        // Thread x of CTA c (x < 32) runs it when c * 1024 + x + 256 < n; 2 x 4 threads share
        // each (c, x).
        let expected = |n: u64| {
            let mut count = 0;
            for c in 0..3u64 {
                for x in 0..32u64 {
                    count += 8 * usize::from(c * 1024 + x + 256 < n);
                }
            }
            count
        };
        for n in [0, 256, 270, 1300, 2304, 2400, 1 << 33, u64::MAX] {
            assert_eq!(threads_in(&blocks[0], &with(n)), expected(n), "n = {n}");
        }
        // `mad.wide` and `cvt.s64.s32` of a value inside 32 bits signed: followed too.
        let mad = body.replace(
            "\tmul.wide.u32 %rd1, %r1, 1024;\n\tmov.u32 %r2, %tid.x;\n\tcvt.u64.u32 %rd2, %r2;\n\
             \tadd.s64 %rd3, %rd1, %rd2;\n",
            "\tmov.u32 %r2, %tid.x;\n\tadd.s32 %r3, %r2, -5;\n\tcvt.s64.s32 %rd2, %r3;\n\
             \tmad.wide.u32 %rd3, %r1, 1024, %rd2;\n",
        );
        let blocks = counted(&mad);
        assert_eq!(blocks.len(), 1, "{mad}");
        let expected = |n: u64| {
            let mut count = 0;
            for c in 0..3i64 {
                for x in 0..32i64 {
                    count += 8 * usize::from(((c * 1024 + x - 5 + 256) as u64) < n);
                }
            }
            count
        };
        for n in [0, 251, 260, 1300, 1 << 40] {
            assert_eq!(threads_in(&blocks[0], &with(n)), expected(n), "n = {n}");
        }
        // A widening the launch limits do not make exact: zero-extending `tid - 5`, a product
        // of two CTA-wide values (`mul.wide` of 32-bit products).
        let below_zero = mad.replace("cvt.s64.s32 %rd2, %r3", "cvt.u64.u32 %rd2, %r3");
        assert!(counted(&below_zero).is_empty());
        let product = body.replace(
            "\tmul.wide.u32 %rd1, %r1, 1024;\n",
            "\tmul.lo.s32 %r4, %r1, 2048;\n\tmul.wide.u32 %rd1, %r4, 1024;\n",
        );
        assert!(counted(&product).is_empty());
    }
}
