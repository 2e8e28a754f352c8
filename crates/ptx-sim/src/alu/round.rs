//! Exact rounding: the IEEE rounding of an exactly known value into a binary format, the exact
//! sign of a sum of products of doubles (a fixed-point big integer), and directed rounding of
//! hardware round-to-nearest results by one ulp.
//!
//! The scheme for `.rz/.rm/.rp` arithmetic: the host computes the round-to-nearest result `r0`
//! (IEEE-correct for `+ - * / sqrt fma`); the exact result lies strictly within one ulp of `r0`,
//! so the directed result is `r0` or its neighbour toward the exact value, and only
//! `sign(exact - r0)` is needed. That sign comes from [`exact_sign`], which evaluates
//! `Σ xᵢ·yᵢ` exactly (e.g. `a·b + c - r0` for `fma`, `a - r0·b` for `div`).

use std::cmp::Ordering;

/// An IEEE rounding direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rnd {
    /// To nearest, ties to even.
    Rn,
    /// Toward zero.
    Rz,
    /// Toward minus infinity.
    Rm,
    /// Toward plus infinity.
    Rp,
}

/// A binary interchange format: exponent and stored-mantissa widths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Format {
    pub exp_bits: u32,
    pub man_bits: u32,
}

pub(crate) const HALF: Format = Format {
    exp_bits: 5,
    man_bits: 10,
};
pub(crate) const BFLOAT: Format = Format {
    exp_bits: 8,
    man_bits: 7,
};
pub(crate) const SINGLE: Format = Format {
    exp_bits: 8,
    man_bits: 23,
};
pub(crate) const DOUBLE: Format = Format {
    exp_bits: 11,
    man_bits: 52,
};

impl Format {
    #[inline]
    pub fn sign_bit(self) -> u64 {
        1 << (self.exp_bits + self.man_bits)
    }

    #[inline]
    pub fn infinity(self) -> u64 {
        ((1u64 << self.exp_bits) - 1) << self.man_bits
    }

    /// The canonical NaN NVIDIA GPUs produce: all exponent and mantissa bits set, sign clear
    /// (`0x7fffffff` for f32, `0x7fff` for f16).
    #[inline]
    pub fn canonical_nan(self) -> u64 {
        self.sign_bit() - 1
    }

    fn max_finite(self) -> u64 {
        self.infinity() - 1
    }

    /// Sign, integer significand and exponent of a finite value's bits: value = ±mag·2^exp.
    #[inline]
    pub fn decompose(self, bits: u64) -> (bool, u64, i32) {
        let neg = bits & self.sign_bit() != 0;
        let field = ((bits >> self.man_bits) & ((1 << self.exp_bits) - 1)) as i32;
        let frac = bits & ((1u64 << self.man_bits) - 1);
        let bias = (1i32 << (self.exp_bits - 1)) - 1;
        let shift = bias + self.man_bits as i32;
        if field == 0 {
            (neg, frac, 1 - shift)
        } else {
            (neg, frac | (1 << self.man_bits), field - shift)
        }
    }

    #[inline]
    pub fn is_nan(self, bits: u64) -> bool {
        bits & !self.sign_bit() > self.infinity()
    }

    #[inline]
    pub fn is_finite(self, bits: u64) -> bool {
        bits & self.infinity() != self.infinity()
    }

    /// Whether the (finite or not) value is a nonzero subnormal.
    #[inline]
    pub fn is_subnormal(self, bits: u64) -> bool {
        bits & self.infinity() == 0 && bits & ((1u64 << self.man_bits) - 1) != 0
    }

    /// Flushes a subnormal to a zero of the same sign (`.ftz`).
    #[inline]
    pub fn flush(self, bits: u64) -> u64 {
        if self.is_subnormal(bits) {
            bits & self.sign_bit()
        } else {
            bits
        }
    }

    /// Converts a value of this format to f64 (exact for f16, bf16, f32, f64).
    #[inline]
    pub fn to_f64(self, bits: u64) -> f64 {
        if self == DOUBLE {
            return f64::from_bits(bits);
        }
        if self.is_nan(bits) {
            return f64::NAN;
        }
        let neg = bits & self.sign_bit() != 0;
        let magnitude = if !self.is_finite(bits) {
            f64::INFINITY
        } else {
            let (_, mag, exp) = self.decompose(bits);
            // mag < 2^24 and exp ≥ -149 for the narrow formats: exact in f64.
            mag as f64 * pow2(exp)
        };
        if neg {
            -magnitude
        } else {
            magnitude
        }
    }

    /// Rounds an f64 into this format (f64 NaN → canonical NaN).
    #[inline]
    pub fn round_f64(self, x: f64, rnd: Rnd) -> u64 {
        if x.is_nan() {
            return self.canonical_nan();
        }
        if x.is_infinite() {
            return self.infinity() | if x < 0.0 { self.sign_bit() } else { 0 };
        }
        let (neg, mag, exp) = DOUBLE.decompose(x.to_bits());
        round_exact(neg, mag as u128, exp, rnd, self)
    }
}

/// 2^e as f64 for -1074 ≤ e ≤ 1023 (two factors keep every step exact and in range).
fn pow2(e: i32) -> f64 {
    let half = e / 2;
    let rest = e - half;
    f64::from_bits(((half + 1023) as u64) << 52) * f64::from_bits(((rest + 1023) as u64) << 52)
}

/// Where the discarded bits of a rounding lie relative to half an ulp.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tail {
    Exact,
    Below,
    Half,
    Above,
}

/// Rounds the exact value `(-1)^neg · mag · 2^exp` into `fmt`, returning its bits: IEEE rounding
/// with gradual underflow, and overflow to infinity or the largest finite value per direction.
pub(crate) fn round_exact(neg: bool, mag: u128, exp: i32, rnd: Rnd, fmt: Format) -> u64 {
    let sign = if neg { fmt.sign_bit() } else { 0 };
    if mag == 0 {
        return sign;
    }
    let man = fmt.man_bits as i32;
    let bias = (1i32 << (fmt.exp_bits - 1)) - 1;
    let emin = 1 - bias;
    let msb = 127 - mag.leading_zeros() as i32;
    let e = msb + exp; // the value lies in [2^e, 2^(e+1))
    let mut quantum = e.max(emin) - man; // exponent of the result's ulp
    let shift = quantum - exp;
    let (mut m, tail) = if shift <= 0 {
        // Exact: the significand fits (msb - shift ≤ man when shift ≤ 0).
        (mag << (-shift) as u32, Tail::Exact)
    } else if shift > 128 {
        (0, Tail::Below)
    } else if shift == 128 {
        let half = 1u128 << 127;
        (0, tail_of(mag, half))
    } else {
        let rem = mag & ((1u128 << shift) - 1);
        (mag >> shift, tail_of(rem, 1u128 << (shift - 1)))
    };
    let up = match rnd {
        Rnd::Rn => tail == Tail::Above || (tail == Tail::Half && m & 1 == 1),
        Rnd::Rz => false,
        Rnd::Rp => !neg && tail != Tail::Exact,
        Rnd::Rm => neg && tail != Tail::Exact,
    };
    if up {
        m += 1;
        if m >> (man + 1) != 0 {
            m >>= 1;
            quantum += 1;
        }
    }
    if m >> man == 0 {
        // Subnormal (or zero after rounding toward zero): quantum is emin - man here.
        return sign | m as u64;
    }
    let biased = quantum + man + bias;
    if biased >= (1 << fmt.exp_bits) - 1 {
        let to_infinity = match rnd {
            Rnd::Rn => true,
            Rnd::Rz => false,
            Rnd::Rp => !neg,
            Rnd::Rm => neg,
        };
        return sign
            | if to_infinity {
                fmt.infinity()
            } else {
                fmt.max_finite()
            };
    }
    sign | ((biased as u64) << man) | (m as u64 & ((1u64 << man) - 1))
}

fn tail_of(rem: u128, half: u128) -> Tail {
    match rem.cmp(&half) {
        _ if rem == 0 => Tail::Exact,
        Ordering::Less => Tail::Below,
        Ordering::Equal => Tail::Half,
        Ordering::Greater => Tail::Above,
    }
}

/// Limbs of the fixed-point accumulator: products of doubles have exponents from -2148 up to
/// 2·971 with 106-bit significands, so bit positions 0..4200 (offset by 2148) plus a sign.
const LIMBS: usize = 68;
const OFFSET: i32 = 2148;

/// The exact sign of `Σ xᵢ·yᵢ` for finite doubles (f32 and f16 values are doubles too).
pub(crate) fn exact_sign(terms: &[(f64, f64)]) -> Ordering {
    let mut acc = [0u64; LIMBS];
    for &(x, y) in terms {
        let (nx, mx, ex) = DOUBLE.decompose(x.to_bits());
        let (ny, my, ey) = DOUBLE.decompose(y.to_bits());
        if mx == 0 || my == 0 {
            continue;
        }
        // ex, ey ≥ -1074, so the position is ≥ 0; at most 4090 + 106 bits: inside the limbs.
        let pos = (ex + ey + OFFSET) as usize;
        add_shifted(&mut acc, mx as u128 * my as u128, pos, nx != ny);
    }
    if acc[LIMBS - 1] >> 63 == 1 {
        Ordering::Less
    } else if acc.iter().any(|&l| l != 0) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// Adds (or subtracts) `mag · 2^pos` to the two's-complement accumulator.
fn add_shifted(acc: &mut [u64; LIMBS], mag: u128, pos: usize, negative: bool) {
    let index = pos / 64;
    let bit = pos % 64;
    let w0 = mag as u64;
    let w1 = (mag >> 64) as u64;
    let words = if bit == 0 {
        [w0, w1, 0]
    } else {
        [
            w0 << bit,
            (w1 << bit) | (w0 >> (64 - bit)),
            w1 >> (64 - bit),
        ]
    };
    let mut carry = false;
    for (k, limb) in acc.iter_mut().enumerate().skip(index) {
        let word = words.get(k - index).copied().unwrap_or(0);
        if word == 0 && !carry && k >= index + 3 {
            break;
        }
        if negative {
            let (d, b1) = limb.overflowing_sub(word);
            let (d, b2) = d.overflowing_sub(carry as u64);
            *limb = d;
            carry = b1 || b2;
        } else {
            let (s, c1) = limb.overflowing_add(word);
            let (s, c2) = s.overflowing_add(carry as u64);
            *limb = s;
            carry = c1 || c2;
        }
    }
}

/// f32 and f64 as the arithmetic needs them.
pub(crate) trait Fp:
    Copy
    + PartialOrd
    + std::ops::Neg<Output = Self>
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    const ZERO: Self;
    fn wide(self) -> f64;
    fn fused(self, b: Self, c: Self) -> Self;
    fn root(self) -> Self;
    fn finite(self) -> bool;
    fn negative(self) -> bool;
    fn up(self) -> Self;
    fn down(self) -> Self {
        -(-self).up()
    }
}

macro_rules! fp_impl {
    ($t:ty) => {
        impl Fp for $t {
            const ZERO: Self = 0.0;
            #[inline]
            fn wide(self) -> f64 {
                self as f64
            }
            #[inline]
            fn fused(self, b: Self, c: Self) -> Self {
                self.mul_add(b, c)
            }
            fn root(self) -> Self {
                self.sqrt()
            }
            #[inline]
            fn finite(self) -> bool {
                self.is_finite()
            }
            #[inline]
            fn negative(self) -> bool {
                self.is_sign_negative()
            }
            /// The next value toward +∞ (NaN and +∞ unchanged; ±0 → the least subnormal).
            fn up(self) -> Self {
                if self.is_nan() || self == <$t>::INFINITY {
                    return self;
                }
                if self == 0.0 {
                    return <$t>::from_bits(1);
                }
                let bits = self.to_bits();
                <$t>::from_bits(if self > 0.0 { bits + 1 } else { bits - 1 })
            }
        }
    };
}
fp_impl!(f32);
fp_impl!(f64);

/// `r0` (the round-to-nearest result) moved to the directed rounding, given `sign(exact - r0)`.
fn directed<F: Fp>(r0: F, s: Ordering, rnd: Rnd) -> F {
    match (rnd, s) {
        (Rnd::Rn, _) | (_, Ordering::Equal) => r0,
        (Rnd::Rp, Ordering::Greater) => r0.up(),
        (Rnd::Rm, Ordering::Less) => r0.down(),
        (Rnd::Rz, Ordering::Less) if r0 > F::ZERO => r0.down(),
        (Rnd::Rz, Ordering::Greater) if r0 < F::ZERO => r0.up(),
        _ => r0,
    }
}

/// `sign(exact - r0)` when finite operands rounded to an infinite `r0` (overflow).
fn overflow_sign<F: Fp>(r0: F) -> Ordering {
    if r0 > F::ZERO {
        Ordering::Less
    } else {
        Ordering::Greater
    }
}

/// An exactly-zero sum: IEEE gives -0 under `.rm` unless both addends are +0 (`r0`, the
/// round-to-nearest result, already has the right sign in the other modes).
fn zero_sum<F: Fp>(r0: F, rnd: Rnd, both_positive_zero: bool) -> F {
    if rnd == Rnd::Rm && !both_positive_zero {
        -F::ZERO
    } else {
        r0
    }
}

fn is_pos_zero<F: Fp>(x: F) -> bool {
    x == F::ZERO && !x.negative()
}

#[inline]
pub(crate) fn add<F: Fp>(a: F, b: F, rnd: Rnd) -> F {
    let r0 = a + b;
    if rnd == Rnd::Rn || !a.finite() || !b.finite() {
        return r0;
    }
    let s = if !r0.finite() {
        overflow_sign(r0)
    } else {
        exact_sign(&[(a.wide(), 1.0), (b.wide(), 1.0), (-r0.wide(), 1.0)])
    };
    if s == Ordering::Equal && r0 == F::ZERO {
        return zero_sum(r0, rnd, is_pos_zero(a) && is_pos_zero(b));
    }
    directed(r0, s, rnd)
}

#[inline]
pub(crate) fn mul<F: Fp>(a: F, b: F, rnd: Rnd) -> F {
    let r0 = a * b;
    if rnd == Rnd::Rn || !a.finite() || !b.finite() {
        return r0;
    }
    let s = if !r0.finite() {
        overflow_sign(r0)
    } else {
        exact_sign(&[(a.wide(), b.wide()), (-r0.wide(), 1.0)])
    };
    directed(r0, s, rnd)
}

#[inline]
pub(crate) fn fma<F: Fp>(a: F, b: F, c: F, rnd: Rnd) -> F {
    let r0 = a.fused(b, c);
    if rnd == Rnd::Rn || !a.finite() || !b.finite() || !c.finite() {
        return r0;
    }
    let s = if !r0.finite() {
        overflow_sign(r0)
    } else {
        exact_sign(&[(a.wide(), b.wide()), (c.wide(), 1.0), (-r0.wide(), 1.0)])
    };
    if s == Ordering::Equal && r0 == F::ZERO {
        let product_pos_zero = (a == F::ZERO || b == F::ZERO) && a.negative() == b.negative();
        return zero_sum(r0, rnd, product_pos_zero && is_pos_zero(c));
    }
    directed(r0, s, rnd)
}

pub(crate) fn div<F: Fp>(a: F, b: F, rnd: Rnd) -> F {
    let r0 = a / b;
    if rnd == Rnd::Rn || !a.finite() || !b.finite() || a == F::ZERO || b == F::ZERO {
        return r0;
    }
    let s = if !r0.finite() {
        overflow_sign(r0)
    } else {
        // a/b - r0 = (a - r0·b)/b.
        let s = exact_sign(&[(a.wide(), 1.0), (-r0.wide(), b.wide())]);
        if b < F::ZERO {
            s.reverse()
        } else {
            s
        }
    };
    directed(r0, s, rnd)
}

pub(crate) fn sqrt<F: Fp>(a: F, rnd: Rnd) -> F {
    let r0 = a.root();
    if rnd == Rnd::Rn || !a.finite() || a <= F::ZERO {
        return r0;
    }
    // sqrt(a) - r0 has the sign of a - r0² (both non-negative).
    let s = exact_sign(&[(a.wide(), 1.0), (-r0.wide(), r0.wide())]);
    directed(r0, s, rnd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_exact_matches_host_conversion_f64_to_f32() {
        let samples = [
            1.0f64,
            1.0 + f64::EPSILON,
            0.1,
            -0.1,
            3.4028235677973366e38, // just above f32::MAX: rounds to MAX
            3.4028235677973366e38 * 1.0000001,
            1.0e-45,
            7.0e-46,               // rounds to the least subnormal
            7.006492321624085e-46, // exactly half the least subnormal: ties to even (0)
            -1.5e-39,
            1.1754942e-38,
            f64::MAX,
            f64::MIN_POSITIVE,
        ];
        for x in samples {
            assert_eq!(
                SINGLE.round_f64(x, Rnd::Rn) as u32,
                (x as f32).to_bits(),
                "{x:e}"
            );
        }
    }

    #[test]
    fn round_exact_directed_brackets() {
        let x = 0.1f64; // not representable in f32
        let rn = f32::from_bits(SINGLE.round_f64(x, Rnd::Rn) as u32);
        let rz = f32::from_bits(SINGLE.round_f64(x, Rnd::Rz) as u32);
        let rm = f32::from_bits(SINGLE.round_f64(x, Rnd::Rm) as u32);
        let rp = f32::from_bits(SINGLE.round_f64(x, Rnd::Rp) as u32);
        assert!((rm as f64) < x && x < rp as f64);
        assert_eq!(rz, rm);
        assert_eq!(rp.to_bits() - rm.to_bits(), 1);
        assert!(rn == rm || rn == rp);
        // Overflow: toward zero gives MAX, away gives infinity.
        assert_eq!(SINGLE.round_f64(1e39, Rnd::Rz) as u32, f32::MAX.to_bits());
        assert_eq!(
            SINGLE.round_f64(1e39, Rnd::Rp) as u32,
            f32::INFINITY.to_bits()
        );
        assert_eq!(
            SINGLE.round_f64(-1e39, Rnd::Rp) as u32,
            (-f32::MAX).to_bits()
        );
        assert_eq!(
            SINGLE.round_f64(-1e39, Rnd::Rm) as u32,
            f32::NEG_INFINITY.to_bits()
        );
        // Underflow: a tiny positive value rounds up to the least subnormal under .rp.
        assert_eq!(SINGLE.round_f64(1e-300, Rnd::Rp), 1);
        assert_eq!(SINGLE.round_f64(1e-300, Rnd::Rz), 0);
        assert_eq!(SINGLE.round_f64(-1e-300, Rnd::Rm), 0x8000_0001);
    }

    #[test]
    fn exact_sign_sees_what_doubles_lose() {
        // 1 + 2^-1074·2^-1074 is not representable in any double; its sign against 1 is.
        let tiny = f64::from_bits(1);
        assert_eq!(
            exact_sign(&[(1.0, 1.0), (tiny, tiny), (-1.0, 1.0)]),
            Ordering::Greater
        );
        assert_eq!(
            exact_sign(&[(1.0, 1.0), (-tiny, tiny), (-1.0, 1.0)]),
            Ordering::Less
        );
        assert_eq!(
            exact_sign(&[(f64::MAX, f64::MAX), (-f64::MAX, f64::MAX)]),
            Ordering::Equal
        );
        assert_eq!(
            exact_sign(&[(-f64::MAX, f64::MAX), (tiny, tiny)]),
            Ordering::Less
        );
    }

    #[test]
    fn directed_arithmetic_known_values() {
        // 1/3 in f32: RN rounds down (0x3eaaaaab is up). Check all four directions.
        let third_rn = 1.0f32 / 3.0;
        assert_eq!(third_rn.to_bits(), 0x3eaa_aaab);
        assert_eq!(div(1.0f32, 3.0, Rnd::Rz).to_bits(), 0x3eaa_aaaa);
        assert_eq!(div(1.0f32, 3.0, Rnd::Rm).to_bits(), 0x3eaa_aaaa);
        assert_eq!(div(1.0f32, 3.0, Rnd::Rp).to_bits(), 0x3eaa_aaab);
        assert_eq!(div(-1.0f32, 3.0, Rnd::Rz).to_bits(), 0xbeaa_aaaa);
        assert_eq!(div(-1.0f32, 3.0, Rnd::Rm).to_bits(), 0xbeaa_aaab);
        // 1 + 2^-30 in f32: RN and RZ give 1, RP gives 1 + ulp.
        let small = 2f32.powi(-30);
        assert_eq!(add(1.0f32, small, Rnd::Rz), 1.0);
        assert_eq!(add(1.0f32, small, Rnd::Rp), 1.0f32.up());
        assert_eq!(add(1.0f32, -small, Rnd::Rz), 1.0f32.down());
        assert_eq!(add(1.0f32, -small, Rnd::Rp), 1.0);
        // x - x is -0 under .rm, +0 otherwise.
        assert!(add(1.5f64, -1.5, Rnd::Rm).is_sign_negative());
        assert!(add(1.5f64, -1.5, Rnd::Rz).is_sign_positive());
        assert!(fma(2.0f64, 3.0, -6.0, Rnd::Rm).is_sign_negative());
        // Overflow.
        assert_eq!(mul(f64::MAX, 2.0, Rnd::Rz), f64::MAX);
        assert_eq!(mul(f64::MAX, 2.0, Rnd::Rm), f64::MAX);
        assert_eq!(mul(f64::MAX, 2.0, Rnd::Rp), f64::INFINITY);
        assert_eq!(mul(f64::MAX, -2.0, Rnd::Rp), -f64::MAX);
        // Underflow of a product: 2^-600 · 2^-600.
        let t = 2f64.powi(-600);
        assert_eq!(mul(t, t, Rnd::Rp), f64::from_bits(1));
        assert_eq!(mul(t, -t, Rnd::Rm), -f64::from_bits(1));
        assert_eq!(mul(t, t, Rnd::Rz), 0.0);
        // fma where the product is far below c's ulp.
        assert_eq!(fma(t, t, 1.0, Rnd::Rp), 1.0f64.up());
        assert_eq!(fma(-t, t, 1.0, Rnd::Rz), 1.0f64.down());
        // sqrt(2) = 1.41421356237309504880…; RN 0x3ff6a09e667f3bcd = 1.41421356237309514547…
        // is above it, so RP = RN and RZ = RM = RN - ulp.
        assert_eq!(sqrt(2.0f64, Rnd::Rn).to_bits(), 0x3ff6_a09e_667f_3bcd);
        assert_eq!(sqrt(2.0f64, Rnd::Rp).to_bits(), 0x3ff6_a09e_667f_3bcd);
        assert_eq!(sqrt(2.0f64, Rnd::Rz).to_bits(), 0x3ff6_a09e_667f_3bcc);
        assert_eq!(sqrt(2.0f64, Rnd::Rm).to_bits(), 0x3ff6_a09e_667f_3bcc);
        assert_eq!(sqrt(4.0f64, Rnd::Rp), 2.0);
    }
}
