//! Blocks counted from the launch: the conditions under which a thread runs a block near the top
//! of a kernel, when they depend only on the thread's and CTA's indices, the launch's shape and
//! the kernel's parameters (`if (i < n)`, `if (x >= 1 && x < n - 1)`, `if (threadIdx.x < 16)`).
//!
//! Such a block needs no counter on the device: the host runtime knows the grid, the block shape
//! and the parameter values of every launch, and counts the threads that satisfy the conditions
//! and the warps with at least one such thread (`host_runtime::from_launch`). The compiler finds
//! the blocks ([`crate::placement`]); these types carry the conditions to the runtime in the
//! snapshot, and [`IntExpr::wrapped`] / [`Predicate::holds`] define what they mean for one
//! thread, the one definition both sides use.
//!
//! Integer expressions are evaluated as the PTX computes them: in the comparison's width, modulo
//! `2^width` (add, subtract, multiply and shift are ring operations, so evaluating exactly and
//! reducing at the end gives the same bits as the PTX's step-by-step wrapping).

use serde::{Deserialize, Serialize};

/// One block the runtime counts from the launch: a thread runs it exactly when every condition of
/// `path` holds for it (the branches from the kernel's entry to the block, each block on the way
/// entered only from the one before).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchCounted {
    /// The block's counter index (its index in the snapshot's blocks).
    pub block: usize,
    /// Conditions that all hold exactly for the threads that run the block.
    pub path: Vec<Condition>,
    /// Where the block is a loop of its own (it branches back to itself), how many times each
    /// of those threads runs it; otherwise once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trips: Option<LoopTrips>,
}

/// The trips of a one-block loop that a thread enters once, from a block of the launch tree:
/// the block steps an *induction* register `v` by the same `step` in every thread (`add` of a
/// launch value, nothing else writing `v`) and ends in a branch back to itself taken while the
/// `setp` of `v` against `bound` gives `repeat_when`. A thread runs the block once, then again
/// after each test that sends it round: with `v_k = init + k × step`, the tests read `v_1,
/// v_2, ...` (`tested_after_step`: the `setp` follows the step) or `v_0, v_1, ...`.
///
/// While those values lie in the comparison's range as exact integers (the runtime checks it
/// for every thread of each launch, and refuses the counts where it cannot), the tests are
/// monotone in k: `runs = 1 + #{k : test k repeats}`, and the counts of the block are those of
/// the path plus, for each k, those of the path with "test k repeats" added, which are ordinary
/// launch conditions (`host_runtime::from_launch`). Warps too: a warp runs the block as often
/// as its longest-running lane, and the tests that repeat for a lane also repeat for every lane
/// that runs longer (assumption R: the lanes enter together and wait for each other after).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopTrips {
    /// The `setp`'s comparison, width and reading of both sides.
    pub op: CompareOp,
    pub signed: bool,
    pub width: u32,
    /// `v`'s value where the thread enters the loop.
    pub init: IntExpr,
    /// What one trip adds to `v` (reads no thread index).
    pub step: IntExpr,
    /// The comparison's other side (the loop does not write it).
    pub bound: IntExpr,
    /// `v` is the comparison's left side (else its right side).
    pub induction_left: bool,
    /// The comparison's outcome that sends the thread round again.
    pub repeat_when: bool,
    /// The test reads `v` after the trip's step (its first test reads `v_1`), else before it
    /// (`v_0`).
    pub tested_after_step: bool,
}

impl LoopTrips {
    /// The index k of the value the first test reads.
    pub fn first_test(&self) -> i128 {
        i128::from(self.tested_after_step)
    }

    /// "Test reads `init + offset` and repeats", as a launch condition, `offset` the exact
    /// value `k × step` (added or subtracted as a literal of its magnitude, so that the
    /// comparison's exact reading of the sum is `init + offset` wherever that lies in range).
    pub fn repeats_at(&self, offset: i128) -> Option<Condition> {
        let magnitude = u64::try_from(offset.unsigned_abs()).ok()?;
        let literal = Box::new(IntExpr::Literal(magnitude & mask(self.width)));
        let value = if offset < 0 {
            IntExpr::Sub(Box::new(self.init.clone()), literal)
        } else {
            IntExpr::Add(Box::new(self.init.clone()), literal)
        };
        let (lhs, rhs) = if self.induction_left {
            (value, self.bound.clone())
        } else {
            (self.bound.clone(), value)
        };
        Some(Condition {
            predicate: Predicate::compare(self.op, self.signed, self.width, lhs, rhs),
            holds: self.repeat_when,
        })
    }

    /// The comparison `v OP bound` (`v` on the left) that repeats: lt, le, gt, ge, or ne
    /// (repeat until equal, counted only where every thread's distance to the bound is the
    /// same: `init` and `bound` read no thread index); `None` for eq (repeat while equal).
    pub fn repeat_op(&self) -> Option<CompareOp> {
        let op = if self.induction_left {
            self.op
        } else {
            self.op.flip()
        };
        let op = if self.repeat_when { op } else { op.negate() };
        match op {
            CompareOp::Lt | CompareOp::Le | CompareOp::Gt | CompareOp::Ge => Some(op),
            CompareOp::Ne if !self.init.reads_thread() && !self.bound.reads_thread() => Some(op),
            CompareOp::Ne | CompareOp::Eq => None,
        }
    }

    /// Its three expressions.
    pub fn exprs(&self) -> [&IntExpr; 3] {
        [&self.init, &self.step, &self.bound]
    }
}

/// `predicate` evaluates to `holds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    pub predicate: Predicate,
    pub holds: bool,
}

/// A PTX predicate computed from launch values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Predicate {
    Constant(bool),
    Compare(Compare),
    Not(Box<Predicate>),
    And(Box<Predicate>, Box<Predicate>),
    Or(Box<Predicate>, Box<Predicate>),
    Xor(Box<Predicate>, Box<Predicate>),
}

/// An integer `setp`: `lhs op rhs`, both `width` bits, compared as signed or unsigned numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compare {
    pub op: CompareOp,
    pub signed: bool,
    pub width: u32,
    pub lhs: IntExpr,
    pub rhs: IntExpr,
}

/// Integer comparison operators (PTX `lo`/`ls`/`hi`/`hs` are `Lt`/`Le`/`Gt`/`Ge` unsigned).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A dimension of the thread and CTA indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dim {
    X,
    Y,
    Z,
}

impl Dim {
    pub const ALL: [Dim; 3] = [Dim::X, Dim::Y, Dim::Z];

    /// 0, 1, 2 for x, y, z.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The special registers an expression may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Special {
    /// `%tid`: the thread's index in its CTA.
    Tid(Dim),
    /// `%ntid`: the CTA's shape.
    Ntid(Dim),
    /// `%ctaid`: the CTA's index in the grid.
    Ctaid(Dim),
    /// `%nctaid`: the grid's shape.
    Nctaid(Dim),
}

/// The largest grid CUDA launches, per dimension (every architecture we target).
pub const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

/// The largest CTA CUDA launches, per dimension.
pub const MAX_BLOCK: [u32; 3] = [1024, 1024, 64];

impl Special {
    /// The least and greatest values the register takes in any launch with threads that CUDA
    /// accepts ([`MAX_GRID`], [`MAX_BLOCK`]): what lets the compiler widen 32-bit index
    /// arithmetic to 64 bits exactly. The runtime refuses the counts of a launch beyond them
    /// ([`LaunchValues::within_limits`]).
    pub fn range(self) -> (u32, u32) {
        match self {
            Special::Tid(d) => (0, MAX_BLOCK[d.index()] - 1),
            Special::Ntid(d) => (1, MAX_BLOCK[d.index()]),
            Special::Ctaid(d) => (0, MAX_GRID[d.index()] - 1),
            Special::Nctaid(d) => (1, MAX_GRID[d.index()]),
        }
    }
}

/// An integer computed from launch values, in the width of the comparison that reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntExpr {
    /// A literal's bits (two's complement).
    Literal(u64),
    /// Kernel parameter `index`, `bytes` bytes wide (the register's width: 4 or 8), its bits.
    Param {
        index: usize,
        bytes: u8,
    },
    Special(Special),
    Add(Box<IntExpr>, Box<IntExpr>),
    Sub(Box<IntExpr>, Box<IntExpr>),
    Mul(Box<IntExpr>, Box<IntExpr>),
    Neg(Box<IntExpr>),
    /// Shift left by a literal amount below the width.
    Shl(Box<IntExpr>, u32),
    /// Bitwise and with a literal mask (`and.b32 %r, %r, 31`: a lane index). Not a ring
    /// operation: its value comes from the operand's bits ([`IntExpr::exact`]), and it is not
    /// affine where the operand depends on the thread.
    And(Box<IntExpr>, u64),
    /// Shift right by a literal amount below the width, arithmetic (`shr.s32`) or logical
    /// (`shr.u32`, `shr.b32`): `tid / 32`, a warp index. Like [`IntExpr::And`], not a ring
    /// operation.
    Shr {
        value: Box<IntExpr>,
        amount: u32,
        arithmetic: bool,
    },
    /// Integer division (`div.u32`, `div.s32`: truncated) of a launch constant by a divisor
    /// that no launch makes zero (a positive literal, `%ntid`, `%nctaid`): a chunk per CTA,
    /// `n / nctaid.x`. Like [`IntExpr::And`], not a ring operation; the compiler takes it only
    /// where neither side depends on the thread.
    Div {
        value: Box<IntExpr>,
        divisor: Box<IntExpr>,
        signed: bool,
    },
}

/// What an expression may read besides the thread's own indices: the launch's shape and the
/// parameters' bits (zero-extended to 64 bits), by parameter index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchValues {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub params: Vec<Option<u64>>,
}

impl LaunchValues {
    /// Whether the grid and the CTA are within CUDA's limits ([`MAX_GRID`], [`MAX_BLOCK`]), as
    /// every launch that runs is.
    pub fn within_limits(&self) -> bool {
        let within = |dims: [u32; 3], max: [u32; 3]| dims.iter().zip(max).all(|(&d, m)| d <= m);
        within(self.grid, MAX_GRID) && within(self.block, MAX_BLOCK)
    }
}

/// One thread: its CTA's index and its index in the CTA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadPoint {
    pub ctaid: [u32; 3],
    pub tid: [u32; 3],
}

/// A parameter an expression reads that the launch did not provide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kernel parameter {0} is not known for this launch")]
pub struct MissingParam(pub usize);

/// The low `width` bits set (all of them from 64 on).
pub fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// `bits` read as a signed `width`-bit number (1 to 64 bits).
pub fn sign_extend(bits: u64, width: u32) -> i64 {
    let shift = 64 - width.clamp(1, 64);
    ((bits << shift) as i64) >> shift
}

/// How a comparison's outcome can depend on the CTA, from its form alone: what decides whether
/// CTAs can be grouped into classes that give every thread index the same outcome (the
/// compiler's choice of what to count from the launch, and the runtime's method).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtaDependence {
    /// It reads no `%ctaid`: every CTA gives a thread index the same outcome.
    None,
    /// Both sides are affine in the thread and CTA indices of one dimension and read no other
    /// dimension's.
    Affine(Dim),
    /// Both sides are, for each thread index, affine in the CTA index of one dimension, with the
    /// same slope for every thread index: an affine function of `%ctaid` of that dimension plus
    /// any function of the thread's indices (`ctaid.x * (ntid.x >> 5) + (tid.x >> 5)`, a
    /// warp's global index). [`CtaDependence::Affine`] is the case where that function is
    /// affine in one dimension's index too.
    Separable(Dim),
    /// It mixes dimensions or multiplies index terms.
    Other,
}

impl Special {
    /// The register's value for `thread` under `launch`.
    pub fn value(self, thread: &ThreadPoint, launch: &LaunchValues) -> u32 {
        match self {
            Special::Tid(d) => thread.tid[d.index()],
            Special::Ntid(d) => launch.block[d.index()],
            Special::Ctaid(d) => thread.ctaid[d.index()],
            Special::Nctaid(d) => launch.grid[d.index()],
        }
    }
}

impl IntExpr {
    /// The value's bits as the PTX computes them in `width` bits (modulo `2^width`).
    pub fn wrapped(
        &self,
        width: u32,
        thread: &ThreadPoint,
        launch: &LaunchValues,
    ) -> Result<u64, MissingParam> {
        let w = |e: &IntExpr| e.wrapped(width, thread, launch);
        let value = match self {
            IntExpr::Literal(bits) => *bits,
            IntExpr::Param { index, .. } => launch
                .params
                .get(*index)
                .copied()
                .flatten()
                .ok_or(MissingParam(*index))?,
            IntExpr::Special(s) => u64::from(s.value(thread, launch)),
            IntExpr::Add(a, b) => w(a)?.wrapping_add(w(b)?),
            IntExpr::Sub(a, b) => w(a)?.wrapping_sub(w(b)?),
            IntExpr::Mul(a, b) => w(a)?.wrapping_mul(w(b)?),
            IntExpr::Neg(a) => w(a)?.wrapping_neg(),
            IntExpr::Shl(a, s) => w(a)?.checked_shl(*s).unwrap_or(0),
            IntExpr::And(a, m) => w(a)? & m,
            IntExpr::Shr {
                value,
                amount,
                arithmetic,
            } => {
                let bits = w(value)? & mask(width);
                if *arithmetic {
                    (sign_extend(bits, width) >> (*amount).min(63)) as u64
                } else {
                    bits.checked_shr(*amount).unwrap_or(0)
                }
            }
            IntExpr::Div {
                value,
                divisor,
                signed,
            } => {
                let (a, b) = (w(value)? & mask(width), w(divisor)? & mask(width));
                // A zero divisor (which the compiler's choice of divisors rules out in a launch
                // with threads; the PTX leaves the result unspecified) reads all ones.
                if *signed {
                    sign_extend(a, width)
                        .checked_div(sign_extend(b, width))
                        .map_or(u64::MAX, |q| q as u64)
                } else {
                    a.checked_div(b).unwrap_or(u64::MAX)
                }
            }
        };
        Ok(value & mask(width))
    }

    /// The value as an exact integer, each literal and parameter read as a `width`-bit number,
    /// signed or unsigned (`None` where it does not fit an `i128`). Congruent to
    /// [`IntExpr::wrapped`] modulo `2^width`, so equal to the PTX's value, read the same way,
    /// wherever it lies in that reading's range.
    pub fn exact(
        &self,
        width: u32,
        signed: bool,
        thread: &ThreadPoint,
        launch: &LaunchValues,
    ) -> Result<Option<i128>, MissingParam> {
        let leaf = |bits: u64| -> i128 {
            if signed && width > 0 {
                i128::from(sign_extend(bits, width))
            } else {
                i128::from(bits & mask(width))
            }
        };
        let e = |x: &IntExpr| x.exact(width, signed, thread, launch);
        Ok(match self {
            IntExpr::Literal(bits) => Some(leaf(*bits)),
            IntExpr::Param { index, .. } => Some(leaf(
                launch
                    .params
                    .get(*index)
                    .copied()
                    .flatten()
                    .ok_or(MissingParam(*index))?,
            )),
            IntExpr::Special(s) => Some(i128::from(s.value(thread, launch))),
            IntExpr::Add(a, b) => e(a)?.zip(e(b)?).and_then(|(a, b)| a.checked_add(b)),
            IntExpr::Sub(a, b) => e(a)?.zip(e(b)?).and_then(|(a, b)| a.checked_sub(b)),
            IntExpr::Mul(a, b) => e(a)?.zip(e(b)?).and_then(|(a, b)| a.checked_mul(b)),
            IntExpr::Neg(a) => e(a)?.and_then(i128::checked_neg),
            IntExpr::Shl(a, s) => e(a)?.and_then(|a| a.checked_mul(1i128.checked_shl(*s)?)),
            // Not ring operations: the PTX's bits, read as the comparison reads them.
            IntExpr::And(..) | IntExpr::Shr { .. } | IntExpr::Div { .. } => {
                Some(leaf(self.wrapped(width, thread, launch)?))
            }
        })
    }

    /// The dimensions of the specials the expression reads that `pick` names, added once.
    fn dims_read(&self, pick: fn(Special) -> Option<Dim>, out: &mut Vec<Dim>) {
        match self {
            IntExpr::Special(special) => {
                if let Some(d) = pick(*special).filter(|d| !out.contains(d)) {
                    out.push(d)
                }
            }
            IntExpr::Literal(_) | IntExpr::Param { .. } => {}
            IntExpr::Add(a, b) | IntExpr::Sub(a, b) | IntExpr::Mul(a, b) => {
                a.dims_read(pick, out);
                b.dims_read(pick, out);
            }
            IntExpr::Neg(a)
            | IntExpr::Shl(a, _)
            | IntExpr::And(a, _)
            | IntExpr::Shr { value: a, .. } => a.dims_read(pick, out),
            IntExpr::Div { value, divisor, .. } => {
                value.dims_read(pick, out);
                divisor.dims_read(pick, out);
            }
        }
    }

    /// The dimensions of the specials the expression reads that depend on the thread (`%tid`,
    /// `%ctaid`).
    pub fn thread_dims(&self, out: &mut Vec<Dim>) {
        self.dims_read(
            |s| match s {
                Special::Tid(d) | Special::Ctaid(d) => Some(d),
                _ => None,
            },
            out,
        )
    }

    /// Whether the expression reads `special`.
    pub fn reads_special(&self, special: Special) -> bool {
        match self {
            IntExpr::Special(s) => *s == special,
            IntExpr::Literal(_) | IntExpr::Param { .. } => false,
            IntExpr::Add(a, b) | IntExpr::Sub(a, b) | IntExpr::Mul(a, b) => {
                a.reads_special(special) || b.reads_special(special)
            }
            IntExpr::Neg(a)
            | IntExpr::Shl(a, _)
            | IntExpr::And(a, _)
            | IntExpr::Shr { value: a, .. } => a.reads_special(special),
            IntExpr::Div { value, divisor, .. } => {
                value.reads_special(special) || divisor.reads_special(special)
            }
        }
    }

    /// Whether the expression depends on the thread (reads `%tid` or `%ctaid`).
    pub fn reads_thread(&self) -> bool {
        let mut dims = Vec::new();
        self.thread_dims(&mut dims);
        !dims.is_empty()
    }

    /// The dimensions of the CTA index (`%ctaid`) the expression reads.
    pub fn ctaid_dims(&self, out: &mut Vec<Dim>) {
        self.dims_read(
            |s| match s {
                Special::Ctaid(d) => Some(d),
                _ => None,
            },
            out,
        )
    }

    /// Whether the expression is affine in the thread's indices (no product of two terms that
    /// both depend on them), so that along one index it changes by a constant step.
    pub fn is_affine(&self) -> bool {
        // Under `and`/`shr`: a launch constant, or not affine at all.
        self.ring_of(&|a: &IntExpr| !a.reads_thread())
    }

    /// Whether the expression is an affine function of the CTA's indices plus a function of
    /// the thread's indices within its CTA (and launch constants): no product of two terms that
    /// both depend on the thread, and `%ctaid` read only through ring operations (never under
    /// [`IntExpr::And`] or [`IntExpr::Shr`]). Where it reads one dimension's `%ctaid`, each
    /// thread index then sees an affine function of that CTA index, with a slope that does not
    /// depend on the thread index ([`CtaDependence::Separable`]).
    pub fn is_separable(&self) -> bool {
        self.ring_of(&|a: &IntExpr| {
            let mut ctaids = Vec::new();
            a.ctaid_dims(&mut ctaids);
            ctaids.is_empty()
        })
    }

    /// Whether the expression is built by ring operations with no product of two terms that
    /// both depend on the thread, each operand of an [`IntExpr::And`] or [`IntExpr::Shr`]
    /// (not ring operations) being one that `under_bits` accepts: the shape [`Self::is_affine`]
    /// and [`Self::is_separable`] share.
    fn ring_of(&self, under_bits: &dyn Fn(&IntExpr) -> bool) -> bool {
        match self {
            IntExpr::Literal(_) | IntExpr::Param { .. } | IntExpr::Special(_) => true,
            IntExpr::Add(a, b) | IntExpr::Sub(a, b) => {
                a.ring_of(under_bits) && b.ring_of(under_bits)
            }
            IntExpr::Mul(a, b) => {
                a.ring_of(under_bits)
                    && b.ring_of(under_bits)
                    && !(a.reads_thread() && b.reads_thread())
            }
            IntExpr::Neg(a) | IntExpr::Shl(a, _) => a.ring_of(under_bits),
            IntExpr::And(a, _) | IntExpr::Shr { value: a, .. } => under_bits(a),
            IntExpr::Div { value, divisor, .. } => under_bits(value) && under_bits(divisor),
        }
    }

    /// The kernel parameters the expression reads, as `(index, bytes)`.
    pub fn params(&self, out: &mut Vec<(usize, u8)>) {
        match self {
            IntExpr::Param { index, bytes } => {
                if !out.contains(&(*index, *bytes)) {
                    out.push((*index, *bytes))
                }
            }
            IntExpr::Literal(_) | IntExpr::Special(_) => {}
            IntExpr::Add(a, b) | IntExpr::Sub(a, b) | IntExpr::Mul(a, b) => {
                a.params(out);
                b.params(out);
            }
            IntExpr::Neg(a)
            | IntExpr::Shl(a, _)
            | IntExpr::And(a, _)
            | IntExpr::Shr { value: a, .. } => a.params(out),
            IntExpr::Div { value, divisor, .. } => {
                value.params(out);
                divisor.params(out);
            }
        }
    }
}

impl CompareOp {
    pub const ALL: [CompareOp; 6] = [
        CompareOp::Eq,
        CompareOp::Ne,
        CompareOp::Lt,
        CompareOp::Le,
        CompareOp::Gt,
        CompareOp::Ge,
    ];

    /// The operator with its sides swapped: `a op b` is `b op.flip() a`.
    pub fn flip(self) -> CompareOp {
        match self {
            CompareOp::Lt => CompareOp::Gt,
            CompareOp::Le => CompareOp::Ge,
            CompareOp::Gt => CompareOp::Lt,
            CompareOp::Ge => CompareOp::Le,
            op => op,
        }
    }

    /// The operator whose outcome is always the opposite: `!(a op b)` is `a op.negate() b`.
    pub fn negate(self) -> CompareOp {
        match self {
            CompareOp::Eq => CompareOp::Ne,
            CompareOp::Ne => CompareOp::Eq,
            CompareOp::Lt => CompareOp::Ge,
            CompareOp::Le => CompareOp::Gt,
            CompareOp::Gt => CompareOp::Le,
            CompareOp::Ge => CompareOp::Lt,
        }
    }

    /// `a op b` on numbers read the same way.
    pub fn apply<T: Ord>(self, a: T, b: T) -> bool {
        match self {
            CompareOp::Eq => a == b,
            CompareOp::Ne => a != b,
            CompareOp::Lt => a < b,
            CompareOp::Le => a <= b,
            CompareOp::Gt => a > b,
            CompareOp::Ge => a >= b,
        }
    }
}

impl Compare {
    /// The comparison for one thread, as the PTX evaluates it.
    pub fn holds(&self, thread: &ThreadPoint, launch: &LaunchValues) -> Result<bool, MissingParam> {
        let a = self.lhs.wrapped(self.width, thread, launch)?;
        let b = self.rhs.wrapped(self.width, thread, launch)?;
        Ok(if self.signed && self.width > 0 {
            let read = |bits| sign_extend(bits, self.width);
            self.op.apply(read(a), read(b))
        } else {
            self.op.apply(a, b)
        })
    }

    /// How its outcome can depend on the CTA ([`CtaDependence`]).
    pub fn cta_dependence(&self) -> CtaDependence {
        let mut ctaids = Vec::new();
        self.lhs.ctaid_dims(&mut ctaids);
        self.rhs.ctaid_dims(&mut ctaids);
        if ctaids.is_empty() {
            return CtaDependence::None;
        }
        let mut dims = Vec::new();
        self.lhs.thread_dims(&mut dims);
        self.rhs.thread_dims(&mut dims);
        match (&dims[..], &ctaids[..]) {
            ([dim], _) if self.lhs.is_affine() && self.rhs.is_affine() => {
                CtaDependence::Affine(*dim)
            }
            (_, [dim]) if self.lhs.is_separable() && self.rhs.is_separable() => {
                CtaDependence::Separable(*dim)
            }
            _ => CtaDependence::Other,
        }
    }
}

impl Predicate {
    /// `lhs op rhs` in `width` bits, read `signed` or not.
    pub fn compare(op: CompareOp, signed: bool, width: u32, lhs: IntExpr, rhs: IntExpr) -> Self {
        Predicate::Compare(Compare {
            op,
            signed,
            width,
            lhs,
            rhs,
        })
    }

    /// The predicate for one thread, as the PTX evaluates it.
    pub fn holds(&self, thread: &ThreadPoint, launch: &LaunchValues) -> Result<bool, MissingParam> {
        let h = |p: &Predicate| p.holds(thread, launch);
        Ok(match self {
            Predicate::Constant(value) => *value,
            Predicate::Compare(compare) => compare.holds(thread, launch)?,
            Predicate::Not(p) => !h(p)?,
            Predicate::And(a, b) => h(a)? & h(b)?,
            Predicate::Or(a, b) => h(a)? | h(b)?,
            Predicate::Xor(a, b) => h(a)? ^ h(b)?,
        })
    }

    /// Every comparison of the predicate, in order.
    pub fn compares<'a>(&'a self, out: &mut Vec<&'a Compare>) {
        match self {
            Predicate::Constant(_) => {}
            Predicate::Compare(compare) => out.push(compare),
            Predicate::Not(p) => p.compares(out),
            Predicate::And(a, b) | Predicate::Or(a, b) | Predicate::Xor(a, b) => {
                a.compares(out);
                b.compares(out);
            }
        }
    }
}

impl LaunchCounted {
    /// Every comparison of its conditions, in order.
    pub fn compares(&self) -> Vec<&Compare> {
        let mut out = Vec::new();
        for condition in &self.path {
            condition.predicate.compares(&mut out);
        }
        out
    }

    /// The kernel parameters its conditions and trips read, as `(index, bytes)`, added to
    /// `out` once.
    pub fn params(&self, out: &mut Vec<(usize, u8)>) {
        for compare in self.compares() {
            compare.lhs.params(out);
            compare.rhs.params(out);
        }
        for expr in self.trips.iter().flat_map(LoopTrips::exprs) {
            expr.params(out);
        }
    }

    /// Whether `thread` runs the block (at least once, where it is a loop).
    pub fn runs(&self, thread: &ThreadPoint, launch: &LaunchValues) -> Result<bool, MissingParam> {
        for condition in &self.path {
            if condition.predicate.holds(thread, launch)? != condition.holds {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> LaunchValues {
        LaunchValues {
            grid: [4, 2, 1],
            block: [32, 2, 1],
            params: vec![Some(100), Some(0xFFFF_FFFF)],
        }
    }

    fn global_x() -> IntExpr {
        IntExpr::Add(
            Box::new(IntExpr::Mul(
                Box::new(IntExpr::Special(Special::Ctaid(Dim::X))),
                Box::new(IntExpr::Special(Special::Ntid(Dim::X))),
            )),
            Box::new(IntExpr::Special(Special::Tid(Dim::X))),
        )
    }

    #[test]
    fn comparisons_read_the_bits_signed_or_unsigned() {
        let thread = ThreadPoint {
            ctaid: [3, 0, 0],
            tid: [10, 0, 0],
        };
        let less = |signed: bool, param: usize| Compare {
            op: CompareOp::Lt,
            signed,
            width: 32,
            lhs: global_x(),
            rhs: IntExpr::Param {
                index: param,
                bytes: 4,
            },
        };
        // 3 * 32 + 10 = 106.
        assert!(!less(true, 0).holds(&thread, &launch()).unwrap());
        // Parameter 1 is -1 signed, 2^32 - 1 unsigned.
        assert!(!less(true, 1).holds(&thread, &launch()).unwrap());
        assert!(less(false, 1).holds(&thread, &launch()).unwrap());
        assert_eq!(
            less(false, 2).holds(&thread, &launch()),
            Err(MissingParam(2))
        );
    }

    #[test]
    fn wrapped_and_exact_values_agree_modulo_the_width() {
        let thread = ThreadPoint {
            ctaid: [3, 1, 0],
            tid: [31, 1, 0],
        };
        let expr = IntExpr::Sub(
            Box::new(IntExpr::Shl(Box::new(global_x()), 30)),
            Box::new(IntExpr::Param { index: 1, bytes: 4 }),
        );
        for signed in [false, true] {
            let exact = expr.exact(32, signed, &thread, &launch()).unwrap().unwrap();
            let wrapped = expr.wrapped(32, &thread, &launch()).unwrap();
            assert_eq!(
                (exact.rem_euclid(1 << 32)) as u64,
                wrapped,
                "signed {signed}"
            );
        }
        assert!(expr.is_affine());
        let square = IntExpr::Mul(Box::new(global_x()), Box::new(global_x()));
        assert!(!square.is_affine());
        let mut dims = Vec::new();
        square.thread_dims(&mut dims);
        assert_eq!(dims, [Dim::X]);
    }
}
