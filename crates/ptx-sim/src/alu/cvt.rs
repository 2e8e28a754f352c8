//! `cvt`: integer ↔ integer (truncation, extension, `.sat`), integer → float (`.rn/.rz/.rm/.rp`,
//! exact), float → integer (`.rni/.rzi/.rmi/.rpi`, saturating, NaN → 0), float ↔ float
//! (f16, bf16, f32, f64; narrowing with a rounding direction, `.rni`-style integral rounding,
//! `.ftz`, `.sat`, `.relu`), and the packing `cvt.rn.f16x2.f32`.

use super::int::IntTy;
use super::round::{round_exact, Format, Rnd, BFLOAT, DOUBLE, HALF, SINGLE};
use super::ValueKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CvtTy {
    Int(IntTy),
    Float(Format),
}

impl CvtTy {
    fn parse(t: &str) -> Option<CvtTy> {
        Some(match t {
            "f16" => CvtTy::Float(HALF),
            "bf16" => CvtTy::Float(BFLOAT),
            "f32" => CvtTy::Float(SINGLE),
            "f64" => CvtTy::Float(DOUBLE),
            _ => {
                // cvt takes .uN/.sN integer types (no .bN).
                if t.starts_with('b') {
                    return None;
                }
                CvtTy::Int(super::int_ty(t)?)
            }
        })
    }

    fn bits(self) -> u32 {
        match self {
            CvtTy::Int(t) => t.bits as u32,
            CvtTy::Float(f) => f.exp_bits + f.man_bits + 1,
        }
    }
}

/// A decoded `cvt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CvtOp {
    dst: CvtTy,
    src: CvtTy,
    /// Float rounding (`.rn/.rz/.rm/.rp`) for conversions that can be inexact.
    frnd: Rnd,
    /// Integral rounding (`.rni/...`): float → int, or float → float rounded to an integer.
    irnd: Option<Rnd>,
    ftz: bool,
    sat: bool,
    relu: bool,
}

impl CvtOp {
    /// The source and destination types of an integer-to-integer conversion without `.sat`
    /// (what [`int_to_int`] computes).
    #[inline]
    pub fn int_to_int(&self) -> Option<(IntTy, IntTy)> {
        match (self.src, self.dst) {
            (CvtTy::Int(s), CvtTy::Int(d)) if !self.sat => Some((s, d)),
            _ => None,
        }
    }

    /// The source type and whether the destination is `f64`, when this converts an integer
    /// to `f32` or `f64` rounding to nearest without `.sat`: what [`int_to_float_rn`] computes.
    /// (`.ftz` changes nothing there: a nonzero integer is never subnormal.)
    #[inline]
    pub fn int_to_float_kind(&self) -> Option<(IntTy, bool)> {
        match (self.src, self.dst) {
            (CvtTy::Int(s), CvtTy::Float(f))
                if self.frnd == Rnd::Rn && !self.sat && (f == SINGLE || f == DOUBLE) =>
            {
                Some((s, f == DOUBLE))
            }
            _ => None,
        }
    }

    /// The destination type and whether the source is `f64`, when this converts an `f32` or
    /// `f64` to a 32- or 64-bit integer: what [`CvtOp::float_to_int`] computes.
    #[inline]
    pub fn float_to_int_kind(&self) -> Option<(IntTy, bool)> {
        match (self.src, self.dst) {
            (CvtTy::Float(f), CvtTy::Int(d))
                if (f == SINGLE || f == DOUBLE) && (d.bits == 32 || d.bits == 64) =>
            {
                Some((d, f == DOUBLE))
            }
            _ => None,
        }
    }

    /// A [`CvtOp::float_to_int_kind`] conversion of `a` to `d` (`double`: from `f64`), as
    /// [`CvtOp::eval`] computes it: Rust's float-to-integer `as` truncates, saturates and
    /// maps NaN to 0, as `cvt` does after its integral rounding.
    #[inline(always)]
    pub fn float_to_int(&self, d: IntTy, double: bool, a: u64) -> u64 {
        let x = if double {
            f64::from_bits(a)
        } else {
            let x = f32::from_bits(a as u32);
            // `.ftz`: a subnormal input is zero (it matters for `.rmi` and `.rpi`).
            if self.ftz && x.is_subnormal() {
                0.0
            } else {
                f64::from(x)
            }
        };
        let r = integral(x, self.irnd.unwrap_or(Rnd::Rz));
        match (d.bits, d.signed) {
            (32, true) => u64::from(r as i32 as u32),
            (32, false) => u64::from(r as u32),
            (_, true) => r as i64 as u64,
            (_, false) => r as u64,
        }
    }

    pub fn decode(
        d: &str,
        s: &str,
        frnd: Option<Rnd>,
        irnd: Option<Rnd>,
        ftz: bool,
        sat: bool,
        relu: bool,
    ) -> Result<CvtOp, &'static str> {
        let dst = CvtTy::parse(d).ok_or("destination type")?;
        let src = CvtTy::parse(s).ok_or("source type")?;
        if frnd.is_some() && irnd.is_some() {
            return Err("two rounding modifiers");
        }
        let is_f32 = |t: CvtTy| t == CvtTy::Float(SINGLE);
        if ftz && !is_f32(dst) && !is_f32(src) {
            return Err(".ftz needs an f32 source or destination");
        }
        if relu && !matches!(dst, CvtTy::Float(f) if f == HALF || f == BFLOAT) {
            return Err(".relu needs an f16/bf16 destination");
        }
        match (src, dst) {
            (CvtTy::Int(_), CvtTy::Int(_)) => {
                if frnd.is_some() || irnd.is_some() {
                    return Err("rounding on an integer conversion");
                }
            }
            (CvtTy::Int(_), CvtTy::Float(_)) => {
                if frnd.is_none() {
                    return Err("integer-to-float needs .rn/.rz/.rm/.rp");
                }
            }
            (CvtTy::Float(_), CvtTy::Int(_)) => {
                if irnd.is_none() {
                    return Err("float-to-integer needs .rni/.rzi/.rmi/.rpi");
                }
            }
            (CvtTy::Float(_), CvtTy::Float(_)) => {
                let narrowing = dst.bits() < src.bits() || (dst != src && dst.bits() == src.bits());
                if narrowing && frnd.is_none() {
                    return Err("narrowing float conversion needs .rn/.rz/.rm/.rp");
                }
                if narrowing && irnd.is_some() {
                    return Err("integral rounding on a narrowing conversion");
                }
                if !narrowing && frnd.is_some() && dst != src {
                    return Err("rounding modifier on a widening conversion");
                }
            }
        }
        Ok(CvtOp {
            dst,
            src,
            frnd: frnd.unwrap_or(Rnd::Rn),
            irnd,
            ftz,
            sat,
            relu,
        })
    }

    pub fn source_kind(&self) -> ValueKind {
        match self.src {
            CvtTy::Int(t) => ValueKind::Int { bits: t.bits },
            CvtTy::Float(f) if f == HALF => ValueKind::F16,
            CvtTy::Float(f) if f == SINGLE => ValueKind::F32,
            CvtTy::Float(f) if f == DOUBLE => ValueKind::F64,
            CvtTy::Float(_) => ValueKind::Int { bits: 16 },
        }
    }

    #[inline]
    pub fn eval(&self, a: u64) -> u64 {
        match (self.src, self.dst) {
            (CvtTy::Int(s), CvtTy::Int(d)) if !self.sat => int_to_int(s, d, a),
            (CvtTy::Int(s), CvtTy::Int(d)) => int_out(d, d.saturate(s.value(a))),
            (CvtTy::Int(s), CvtTy::Float(f)) => {
                let v = s.value(a);
                let bits = round_exact(v < 0, v.unsigned_abs(), 0, self.frnd, f);
                self.float_out(f, bits)
            }
            (CvtTy::Float(f), CvtTy::Int(d)) => {
                let x = self.float_in(f, a);
                if x.is_nan() {
                    return 0;
                }
                let r = integral(x, self.irnd.unwrap_or(Rnd::Rz));
                // Saturate: the bounds as f64 (the upper one rounds up to a power of two).
                let (lo, hi) = (d.saturate(i128::MIN), d.saturate(i128::MAX));
                let v = if r <= d.value(lo) as f64 {
                    lo
                } else if r >= d.value(hi) as f64 {
                    hi
                } else {
                    d.wrap(r as i128 as u64)
                };
                int_out(d, v)
            }
            (CvtTy::Float(fs), CvtTy::Float(fd)) => {
                let mut x = self.float_in(fs, a);
                if let Some(r) = self.irnd {
                    x = integral(x, r);
                }
                self.float_out(fd, fd.round_f64(x, self.frnd))
            }
        }
    }

    fn float_in(&self, f: Format, a: u64) -> f64 {
        let bits = super::int::zext(a, (f.exp_bits + f.man_bits + 1) as u8);
        let bits = if self.ftz && f == SINGLE {
            f.flush(bits)
        } else {
            bits
        };
        f.to_f64(bits)
    }

    fn float_out(&self, f: Format, bits: u64) -> u64 {
        if f.is_nan(bits) {
            return if self.sat { 0 } else { f.canonical_nan() };
        }
        let mut bits = if self.ftz && f == SINGLE {
            f.flush(bits)
        } else {
            bits
        };
        if self.relu && bits & f.sign_bit() != 0 {
            bits = 0;
        }
        if self.sat {
            let x = f.to_f64(bits);
            bits = if x > 1.0 {
                f.round_f64(1.0, Rnd::Rn)
            } else if x > 0.0 {
                bits
            } else {
                0
            };
        }
        bits
    }
}

/// 8-bit signed results are sign-extended (8-bit values live in wider registers); every other
/// integer result is zero-extended.
/// An integer-to-integer `cvt` without `.sat`: the value of source type `s` wrapped to `d`.
#[inline]
pub(crate) fn int_to_int(s: IntTy, d: IntTy, a: u64) -> u64 {
    int_out(d, d.wrap(s.value(a) as u64))
}

#[inline]
fn int_out(d: IntTy, bits: u64) -> u64 {
    if d.bits == 8 && d.signed {
        d.sext(bits) as u64
    } else {
        bits
    }
}

fn integral(x: f64, r: Rnd) -> f64 {
    match r {
        Rnd::Rn => x.round_ties_even(),
        Rnd::Rz => x.trunc(),
        Rnd::Rm => x.floor(),
        Rnd::Rp => x.ceil(),
    }
}

/// `cvt.rnd{.relu}.f16x2.f32 d, a, b` (and `.bf16x2`): `a` converted into the upper half, `b`
/// into the lower.
pub(crate) fn pack(bf16: bool, rnd: Rnd, relu: bool, a: u64, b: u64) -> u64 {
    let fmt = if bf16 { BFLOAT } else { HALF };
    let conv = |v: u64| {
        let x = f32::from_bits(v as u32) as f64;
        let bits = fmt.round_f64(x, rnd);
        if fmt.is_nan(bits) {
            fmt.canonical_nan()
        } else if relu && bits & fmt.sign_bit() != 0 {
            0
        } else {
            bits
        }
    };
    (conv(a) << 16) | conv(b)
}

/// `cvt.rn.f32` / `cvt.rn.f64` of an integer of type `s` (`double`: to `f64`), as
/// [`CvtOp::eval`] computes it for [`CvtOp::int_to_float_kind`] conversions: Rust's `as` rounds
/// integers to the nearest float, ties to even, as `.rn` does.
#[inline(always)]
pub fn int_to_float_rn(s: IntTy, double: bool, a: u64) -> u64 {
    match (s.signed, double) {
        (true, true) => (s.sext(a) as f64).to_bits(),
        (true, false) => u64::from((s.sext(a) as f32).to_bits()),
        (false, true) => (s.wrap(a) as f64).to_bits(),
        (false, false) => u64::from((s.wrap(a) as f32).to_bits()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `as` conversions against the software rounding of [`CvtOp::eval`], for every
    /// integer width and signedness, at the values where rounding decides (around 2^24 and
    /// 2^53, halfway cases, the extremes) and at pseudo-random ones.
    #[test]
    fn int_to_float_rn_equals_the_rounding_of_eval() {
        let mut values: Vec<u64> = vec![0, 1, 2, 3, u64::MAX, i64::MIN as u64, i64::MAX as u64];
        for base in [
            1u64 << 24,
            1 << 25,
            1 << 31,
            1 << 32,
            1 << 53,
            1 << 54,
            1 << 63,
        ] {
            for delta in 0..8u64 {
                values.extend([base + delta, base - delta, (base + delta).wrapping_neg()]);
            }
        }
        // Just above, at and just below the halfway point between two floats, where a
        // rounding through a wider float first would round the wrong way.
        for top in 25..64u32 {
            for mantissa_bits in [24u32, 53] {
                let Some(shift) = top.checked_sub(mantissa_bits) else {
                    continue;
                };
                let half = 1u64 << shift;
                for odd in [0, half << 1] {
                    let tie = (1u64 << top) | odd | half;
                    values.extend([
                        tie,
                        tie + 1,
                        tie - 1,
                        tie.wrapping_neg(),
                        (tie + 1).wrapping_neg(),
                    ]);
                }
            }
        }
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.extend([x, x >> (x % 64), x as u32 as u64]);
        }
        let mut checked = 0;
        for s in ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"] {
            for d in ["f32", "f64"] {
                for ftz in [false, true] {
                    if ftz && d != "f32" {
                        continue;
                    }
                    let op = CvtOp::decode(d, s, Some(Rnd::Rn), None, ftz, false, false)
                        .expect("a valid conversion");
                    let (ty, double) = op.int_to_float_kind().expect("an .rn conversion");
                    assert_eq!(double, d == "f64");
                    for &v in &values {
                        assert_eq!(
                            int_to_float_rn(ty, double, v),
                            op.eval(v),
                            "cvt.rn{}.{d}.{s} of {v:#x}",
                            if ftz { ".ftz" } else { "" }
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 1_000_000);
        for (rnd, sat) in [(Rnd::Rz, false), (Rnd::Rn, true)] {
            let op = CvtOp::decode("f32", "s32", Some(rnd), None, false, sat, false).unwrap();
            assert_eq!(op.int_to_float_kind(), None, "{rnd:?} sat {sat}");
        }
    }

    /// [`CvtOp::float_to_int`] against the general path of [`CvtOp::eval`], for every
    /// rounding, both source formats and `.ftz`, at NaNs, infinities, zeros, subnormals, the
    /// destinations' bounds, halfway cases and pseudo-random bit patterns.
    #[test]
    fn float_to_int_equals_eval() {
        let mut doubles: Vec<f64> = vec![
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            f64::MIN_POSITIVE / 4.0,
            -f64::MIN_POSITIVE / 4.0,
            f64::from(f32::MIN_POSITIVE) / 8.0,
            -f64::from(f32::MIN_POSITIVE) / 8.0,
            f64::MAX,
            f64::MIN,
        ];
        for bound in [2f64.powi(31), 2f64.powi(32), 2f64.powi(63), 2f64.powi(64)] {
            for delta in [-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5] {
                doubles.extend([bound + delta, -bound + delta]);
            }
        }
        for k in -4..=4 {
            doubles.extend([f64::from(k) + 0.5, f64::from(k) - 0.25, f64::from(k) + 0.75]);
        }
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut words: Vec<u64> = Vec::new();
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            words.push(x);
        }
        let mut checked = 0;
        for src in ["f32", "f64"] {
            let inputs: Vec<u64> = if src == "f64" {
                doubles
                    .iter()
                    .map(|v| v.to_bits())
                    .chain(words.iter().copied())
                    .collect()
            } else {
                doubles
                    .iter()
                    .map(|&v| u64::from((v as f32).to_bits()))
                    .chain(words.iter().map(|w| w & 0xFFFF_FFFF))
                    .chain([1, 0x8000_0001, 0x007F_FFFF, 0x807F_FFFF])
                    .collect()
            };
            for dst in ["s32", "u32", "s64", "u64"] {
                for rnd in [Rnd::Rn, Rnd::Rz, Rnd::Rm, Rnd::Rp] {
                    for ftz in [false, true] {
                        if ftz && src != "f32" {
                            continue;
                        }
                        let op = CvtOp::decode(dst, src, None, Some(rnd), ftz, false, false)
                            .expect("a valid conversion");
                        let (ty, double) = op.float_to_int_kind().expect("float to int");
                        for &a in &inputs {
                            assert_eq!(
                                op.float_to_int(ty, double, a),
                                op.eval(a),
                                "cvt.{rnd:?}i{}.{dst}.{src} of {a:#x}",
                                if ftz { ".ftz" } else { "" }
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 500_000);
    }
}
