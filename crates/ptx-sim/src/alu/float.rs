//! Floating-point semantics: f32/f64 arithmetic with exact `.rn/.rz/.rm/.rp` (see
//! [`super::round`]), `.ftz`, `.sat`, PTX min/max NaN rules, the `.approx` functions, and
//! f16/f16x2 arithmetic (exact integer arithmetic, rounded once to f16).

use super::round::{self, Format, Rnd, DOUBLE, HALF, SINGLE};
use super::{FBin, FRound, FUn};

/// The float type of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prec {
    F16,
    /// Two f16 values in one 32-bit register, operated on independently.
    F16x2,
    F32,
    F64,
}

impl Prec {
    #[inline]
    pub fn format(self) -> Format {
        match self {
            Prec::F16 | Prec::F16x2 => HALF,
            Prec::F32 => SINGLE,
            Prec::F64 => DOUBLE,
        }
    }

    #[inline]
    pub fn bits(self) -> u8 {
        match self {
            Prec::F16 => 16,
            Prec::F16x2 | Prec::F32 => 32,
            Prec::F64 => 64,
        }
    }
}

/// The `.approx` transcendental functions (f32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Approx {
    Sin,
    Cos,
    Lg2,
    Ex2,
    Tanh,
}

/// Float comparison operators: ordered (false on NaN) and unordered (`u`, true on NaN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FCmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

impl FCmp {
    pub fn parse(name: &str) -> Option<FCmp> {
        Some(match name {
            "eq" => FCmp::Eq,
            "ne" => FCmp::Ne,
            "lt" => FCmp::Lt,
            "le" => FCmp::Le,
            "gt" => FCmp::Gt,
            "ge" => FCmp::Ge,
            "equ" => FCmp::Equ,
            "neu" => FCmp::Neu,
            "ltu" => FCmp::Ltu,
            "leu" => FCmp::Leu,
            "gtu" => FCmp::Gtu,
            "geu" => FCmp::Geu,
            "num" => FCmp::Num,
            "nan" => FCmp::Nan,
            _ => return None,
        })
    }

    fn eval(self, x: f64, y: f64) -> bool {
        let unordered = x.is_nan() || y.is_nan();
        match self {
            FCmp::Eq => x == y,
            FCmp::Ne => !unordered && x != y,
            FCmp::Lt => x < y,
            FCmp::Le => x <= y,
            FCmp::Gt => x > y,
            FCmp::Ge => x >= y,
            FCmp::Equ => unordered || x == y,
            FCmp::Neu => x != y,
            FCmp::Ltu => unordered || x < y,
            FCmp::Leu => unordered || x <= y,
            FCmp::Gtu => unordered || x > y,
            FCmp::Geu => unordered || x >= y,
            FCmp::Num => !unordered,
            FCmp::Nan => unordered,
        }
    }
}

#[inline]
fn f32_in(a: u64, ftz: bool) -> f32 {
    let bits = a as u32;
    f32::from_bits(if ftz {
        SINGLE.flush(bits as u64) as u32
    } else {
        bits
    })
}

/// Result post-processing for f32: canonical NaN, `.ftz` on the output, `.sat`.
#[inline]
fn f32_out(r: f32, ftz: bool, sat: bool) -> u64 {
    if r.is_nan() {
        return if sat { 0 } else { SINGLE.canonical_nan() };
    }
    let r = if sat { saturate(r as f64) as f32 } else { r };
    let bits = r.to_bits() as u64;
    if ftz {
        SINGLE.flush(bits)
    } else {
        bits
    }
}

/// `.sat`: clamp to [0, 1], NaN and -0 to +0.
fn saturate(x: f64) -> f64 {
    if x > 1.0 {
        1.0
    } else if x > 0.0 {
        x
    } else {
        0.0
    }
}

#[inline]
fn ieee(rnd: FRound) -> Rnd {
    match rnd {
        FRound::Ieee(r) => r,
        FRound::Approx | FRound::Full => Rnd::Rn,
    }
}

/// `add/sub/mul/div`.
#[inline]
pub(crate) fn binary(
    op: FBin,
    prec: Prec,
    rnd: FRound,
    ftz: bool,
    sat: bool,
    a: u64,
    b: u64,
) -> u64 {
    match prec {
        Prec::F32 => {
            let v = ieee_binary(op, f32_in(a, ftz), f32_in(b, ftz), ieee(rnd));
            f32_out(v, ftz, sat)
        }
        Prec::F64 => ieee_binary(op, f64::from_bits(a), f64::from_bits(b), ieee(rnd)).to_bits(),
        Prec::F16 => half_arith(op.into(), a as u16, b as u16, 0, ftz, sat) as u64,
        Prec::F16x2 => per_half(a, b, 0, |x, y, _| half_arith(op.into(), x, y, 0, ftz, sat)),
    }
}

/// `add/sub/mul/div` of f32 or f64 values, rounded as `rnd`.
#[inline]
fn ieee_binary<F: round::Fp>(op: FBin, x: F, y: F, rnd: Rnd) -> F {
    match op {
        FBin::Add => round::add(x, y, rnd),
        FBin::Sub => round::add(x, -y, rnd),
        FBin::Mul => round::mul(x, y, rnd),
        FBin::Div => round::div(x, y, rnd),
    }
}

/// `fma` / `mad` (fused).
#[inline]
pub(crate) fn fma(prec: Prec, rnd: Rnd, ftz: bool, sat: bool, a: u64, b: u64, c: u64) -> u64 {
    match prec {
        Prec::F32 => f32_out(
            round::fma(f32_in(a, ftz), f32_in(b, ftz), f32_in(c, ftz), rnd),
            ftz,
            sat,
        ),
        Prec::F64 => {
            round::fma(f64::from_bits(a), f64::from_bits(b), f64::from_bits(c), rnd).to_bits()
        }
        Prec::F16 => half_arith(HalfOp::Fma, a as u16, b as u16, c as u16, ftz, sat) as u64,
        Prec::F16x2 => per_half(a, b, c, |x, y, z| {
            half_arith(HalfOp::Fma, x, y, z, ftz, sat)
        }),
    }
}

/// Applies `f` to the low and the high f16 halves independently.
#[inline]
fn per_half(a: u64, b: u64, c: u64, f: impl Fn(u16, u16, u16) -> u16) -> u64 {
    let lo = f(a as u16, b as u16, c as u16) as u64;
    let hi = f((a >> 16) as u16, (b >> 16) as u16, (c >> 16) as u16) as u64;
    (hi << 16) | lo
}

/// `min/max`: a NaN operand yields the other operand; two NaNs (or any NaN with `.NaN`) yield
/// the canonical NaN; -0 orders below +0.
#[inline]
pub(crate) fn min_max(max: bool, prec: Prec, ftz: bool, nan: bool, a: u64, b: u64) -> u64 {
    let one = |fmt: Format, x: u64, y: u64| -> u64 {
        let (x, y) = if ftz {
            (fmt.flush(x), fmt.flush(y))
        } else {
            (x, y)
        };
        let (xn, yn) = (fmt.is_nan(x), fmt.is_nan(y));
        if (xn && yn) || (nan && (xn || yn)) {
            return fmt.canonical_nan();
        }
        if xn {
            return y;
        }
        if yn {
            return x;
        }
        let (fx, fy) = (fmt.to_f64(x), fmt.to_f64(y));
        let x_first = if fx == fy {
            // Equal values differ only for zeros: -0 < +0.
            let x_neg = x & fmt.sign_bit() != 0;
            x_neg != max
        } else {
            (fx < fy) != max
        };
        if x_first {
            x
        } else {
            y
        }
    };
    match prec {
        Prec::F32 => one(SINGLE, a & 0xffff_ffff, b & 0xffff_ffff),
        Prec::F64 => one(DOUBLE, a, b),
        Prec::F16 => one(HALF, a & 0xffff, b & 0xffff),
        Prec::F16x2 => per_half(a, b, 0, |x, y, _| one(HALF, x as u64, y as u64) as u16),
    }
}

/// Single-operand operations.
#[inline]
pub(crate) fn unary(op: FUn, prec: Prec, rnd: FRound, ftz: bool, a: u64) -> u64 {
    match (op, prec) {
        (FUn::Abs | FUn::Neg, _) => {
            let fmt = prec.format();
            let sign = fmt.sign_bit();
            let bits_one = |x: u64| {
                let x = if ftz { fmt.flush(x) } else { x };
                if op == FUn::Abs {
                    x & !sign
                } else {
                    x ^ sign
                }
            };
            match prec {
                Prec::F16x2 => per_half(a, 0, 0, |x, _, _| bits_one(x as u64) as u16),
                _ => bits_one(super::int::zext(a, prec.bits())),
            }
        }
        (_, Prec::F32) => {
            let x = f32_in(a, ftz);
            let r = match (op, rnd) {
                (FUn::Sqrt, FRound::Ieee(r)) => round::sqrt(x, r),
                (FUn::Sqrt, _) => x.sqrt(),
                (FUn::Rcp, FRound::Ieee(r)) => round::div(1.0, x, r),
                (FUn::Rcp, _) => 1.0 / x,
                (FUn::Rsqrt, _) => (1.0 / (x as f64).sqrt()) as f32,
                (FUn::Fn(f), _) => {
                    let w = x as f64;
                    (match f {
                        Approx::Sin => w.sin(),
                        Approx::Cos => w.cos(),
                        Approx::Lg2 => w.log2(),
                        Approx::Ex2 => w.exp2(),
                        Approx::Tanh => w.tanh(),
                    }) as f32
                }
                (FUn::Abs | FUn::Neg, _) => x,
            };
            f32_out(r, ftz, false)
        }
        _ => {
            // f64 (f16 only reaches the bit operations above; decode rejects the rest).
            let x = f64::from_bits(if ftz { DOUBLE.flush(a) } else { a });
            let r = match (op, rnd) {
                (FUn::Sqrt, FRound::Ieee(r)) => round::sqrt(x, r),
                (FUn::Rcp, FRound::Ieee(r)) => round::div(1.0, x, r),
                (FUn::Rcp, _) => 1.0 / x,
                (FUn::Rsqrt, _) => 1.0 / x.sqrt(),
                _ => x.sqrt(),
            };
            let bits = r.to_bits();
            if ftz {
                DOUBLE.flush(bits)
            } else {
                bits
            }
        }
    }
}

/// `setp`/`set` comparisons (every value converts to f64 exactly).
#[inline]
pub(crate) fn compare(op: FCmp, prec: Prec, ftz: bool, a: u64, b: u64) -> bool {
    let fmt = prec.format();
    let conv = |v: u64| {
        let bits = super::int::zext(v, prec.bits());
        fmt.to_f64(if ftz { fmt.flush(bits) } else { bits })
    };
    op.eval(conv(a), conv(b))
}

/// f16 arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HalfOp {
    Add,
    Sub,
    Mul,
    Fma,
}

impl From<FBin> for HalfOp {
    fn from(op: FBin) -> Self {
        match op {
            FBin::Add => HalfOp::Add,
            FBin::Sub => HalfOp::Sub,
            // Decode admits no f16 division.
            FBin::Mul | FBin::Div => HalfOp::Mul,
        }
    }
}

/// A finite f16 as an exact integer multiple of 2^-24 (|value| < 2^16, so < 2^40).
fn half_fixed(h: u16) -> i128 {
    let (neg, mag, exp) = HALF.decompose(h as u64);
    let v = (mag as i128) << (exp + 24);
    if neg {
        -v
    } else {
        v
    }
}

/// `add/sub/mul/fma.rn{.ftz}{.sat}.f16`: the exact result (fixed point, scale 2^-48 for
/// products) rounded once to f16 — no double rounding.
fn half_arith(op: HalfOp, a: u16, b: u16, c: u16, ftz: bool, sat: bool) -> u16 {
    let flush = |h: u16| if ftz { HALF.flush(h as u64) as u16 } else { h };
    let (a, b, c) = (flush(a), flush(b), flush(c));
    let b = if op == HalfOp::Sub { b ^ 0x8000 } else { b };
    let finite = |h: u16| HALF.is_finite(h as u64);
    let bits = if !finite(a) || !finite(b) || (op == HalfOp::Fma && !finite(c)) {
        // Infinities and NaNs: the f64 result is exact (an infinity or NaN).
        let (x, y, z) = (
            HALF.to_f64(a as u64),
            HALF.to_f64(b as u64),
            HALF.to_f64(c as u64),
        );
        let r = match op {
            HalfOp::Add | HalfOp::Sub => x + y,
            HalfOp::Mul => x * y,
            HalfOp::Fma => x.mul_add(y, z),
        };
        HALF.round_f64(r, Rnd::Rn) as u16
    } else {
        let (fa, fb) = (half_fixed(a), half_fixed(b));
        let (sum, exp) = match op {
            HalfOp::Add | HalfOp::Sub => (fa + fb, -24),
            HalfOp::Mul => (fa * fb, -48),
            HalfOp::Fma => (fa * fb + (half_fixed(c) << 24), -48),
        };
        if sum == 0 {
            let neg = |h: u16| h & 0x8000 != 0;
            // IEEE exact zero: a product's sign is the xor; a sum is -0 only when both addends
            // are -0 (round to nearest).
            let negative = match op {
                HalfOp::Mul => neg(a) != neg(b),
                HalfOp::Add | HalfOp::Sub => neg(a) && neg(b),
                HalfOp::Fma => {
                    let product_neg_zero = (fa == 0 || fb == 0) && neg(a) != neg(b);
                    product_neg_zero && c == 0x8000
                }
            };
            if negative {
                0x8000
            } else {
                0
            }
        } else {
            round::round_exact(sum < 0, sum.unsigned_abs(), exp, Rnd::Rn, HALF) as u16
        }
    };
    let bits = if HALF.is_nan(bits as u64) {
        if sat {
            0
        } else {
            HALF.canonical_nan() as u16
        }
    } else if sat {
        HALF.round_f64(saturate(HALF.to_f64(bits as u64)), Rnd::Rn) as u16
    } else {
        bits
    };
    flush(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(x: f32) -> u16 {
        HALF.round_f64(x as f64, Rnd::Rn) as u16
    }

    #[test]
    fn half_arithmetic_known_values() {
        assert_eq!(
            half_arith(HalfOp::Add, h(1.0), h(2.0), 0, false, false),
            h(3.0)
        );
        assert_eq!(
            half_arith(HalfOp::Mul, h(1.5), h(-2.0), 0, false, false),
            h(-3.0)
        );
        // 2048 + 1 is a tie in f16 (ulp 2): ties to even gives 2048; 2048 + 3 gives 2052.
        assert_eq!(
            half_arith(HalfOp::Add, h(2048.0), h(1.0), 0, false, false),
            h(2048.0)
        );
        assert_eq!(
            half_arith(HalfOp::Add, h(2048.0), h(3.0), 0, false, false),
            h(2052.0)
        );
        // fma: 2048 + 1·(1 + 2^-10) is just above the tie: rounds up to 2050 (an unfused
        // multiply-add would round the tie down to 2048).
        let one_plus = 0x3c01; // 1 + 2^-10
        assert_eq!(
            half_arith(HalfOp::Fma, one_plus, h(1.0), h(2048.0), false, false),
            h(2050.0)
        );
        // Overflow to infinity, NaN canonical, sat.
        assert_eq!(
            half_arith(HalfOp::Mul, h(300.0), h(300.0), 0, false, false),
            0x7c00
        );
        assert_eq!(
            half_arith(HalfOp::Add, 0x7c00, 0xfc00, 0, false, false),
            0x7fff
        );
        assert_eq!(
            half_arith(HalfOp::Add, h(0.75), h(0.5), 0, false, true),
            h(1.0)
        );
        assert_eq!(half_arith(HalfOp::Add, 0x7c00, 0xfc00, 0, false, true), 0);
        // Zero signs.
        assert_eq!(
            half_arith(HalfOp::Add, 0x8000, 0x8000, 0, false, false),
            0x8000
        );
        assert_eq!(half_arith(HalfOp::Sub, h(1.0), h(1.0), 0, false, false), 0);
        assert_eq!(half_arith(HalfOp::Mul, 0, 0x8000, 0, false, false), 0x8000);
        // Subnormals: least subnormal · 0.5 ties to even (0); with ftz inputs flush.
        assert_eq!(half_arith(HalfOp::Mul, 1, h(0.5), 0, false, false), 0);
        assert_eq!(half_arith(HalfOp::Mul, 3, h(0.5), 0, false, false), 2);
        assert_eq!(half_arith(HalfOp::Add, 1, 1, 0, false, false), 2);
        assert_eq!(half_arith(HalfOp::Add, 1, 1, 0, true, false), 0);
    }

    #[test]
    fn comparisons_on_nan() {
        let nan = f64::NAN.to_bits();
        let one = 1.0f64.to_bits();
        assert!(!compare(FCmp::Ne, Prec::F64, false, nan, one));
        assert!(compare(FCmp::Neu, Prec::F64, false, nan, one));
        assert!(compare(FCmp::Ltu, Prec::F64, false, nan, one));
        assert!(!compare(FCmp::Lt, Prec::F64, false, nan, one));
        assert!(compare(FCmp::Nan, Prec::F64, false, one, nan));
        assert!(compare(FCmp::Num, Prec::F64, false, one, one));
        // ftz: a subnormal equals zero.
        assert!(compare(FCmp::Eq, Prec::F32, true, 1, 0));
        assert!(!compare(FCmp::Eq, Prec::F32, false, 1, 0));
    }
}
