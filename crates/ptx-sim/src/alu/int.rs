//! Integer and bit-manipulation semantics. Values arrive as u64 with only the low `bits`
//! meaningful; results are zero-extended.

use super::Half;

/// An integer type: width and signedness (`.bN` types are unsigned here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IntTy {
    pub bits: u8,
    pub signed: bool,
}

impl IntTy {
    pub const S32: IntTy = IntTy {
        bits: 32,
        signed: true,
    };

    /// The low `bits` of `v`.
    #[inline]
    pub fn wrap(self, v: u64) -> u64 {
        zext(v, self.bits)
    }

    /// The value sign-extended from `bits`.
    #[inline]
    pub fn sext(self, v: u64) -> i64 {
        sext(v, self.bits)
    }

    /// The value as a mathematical integer (sign- or zero-extended per signedness).
    #[inline]
    pub fn value(self, v: u64) -> i128 {
        if self.signed {
            self.sext(v) as i128
        } else {
            self.wrap(v) as i128
        }
    }

    fn min(self) -> i128 {
        if self.signed {
            -(1i128 << (self.bits - 1))
        } else {
            0
        }
    }

    fn max(self) -> i128 {
        if self.signed {
            (1i128 << (self.bits - 1)) - 1
        } else {
            (1i128 << self.bits) - 1
        }
    }

    /// `v` clamped to the type's range, as bits.
    pub fn saturate(self, v: i128) -> u64 {
        self.wrap(v.clamp(self.min(), self.max()) as u64)
    }
}

/// A mask of the low `bits` bits (all 64 from 64 on).
#[inline]
pub(crate) fn low_mask(bits: u8) -> u64 {
    zext(u64::MAX, bits)
}

#[inline]
pub(crate) fn zext(v: u64, bits: u8) -> u64 {
    if bits >= 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    }
}

#[inline]
pub(crate) fn sext(v: u64, bits: u8) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        let shift = 64 - bits as u32;
        ((v << shift) as i64) >> shift
    }
}

/// `a + b + cin`: the sum's bits and the carry out of the type's width (or the saturated sum).
#[inline]
pub(crate) fn add(ty: IntTy, sat: bool, a: u64, b: u64, cin: bool) -> (u64, bool) {
    if sat {
        return (ty.saturate(ty.value(a) + ty.value(b)), false);
    }
    // In 64-bit arithmetic (no 128-bit sum, so that lane loops vectorize): below 64 bits the
    // sum cannot overflow and the carry is the bit above the width.
    let (x, y) = (ty.wrap(a), ty.wrap(b));
    if ty.bits < 64 {
        let sum = x + y + u64::from(cin);
        (ty.wrap(sum), sum >> ty.bits != 0)
    } else {
        let (partial, c1) = x.overflowing_add(y);
        let (sum, c2) = partial.overflowing_add(u64::from(cin));
        (sum, c1 || c2)
    }
}

/// `a - (b + bin)`: the difference's bits and the borrow out (PTX's carry flag for `sub.cc`).
#[inline]
pub(crate) fn sub(ty: IntTy, sat: bool, a: u64, b: u64, bin: bool) -> (u64, bool) {
    if sat {
        return (ty.saturate(ty.value(a) - ty.value(b)), false);
    }
    // In 64-bit arithmetic, as `add`.
    let (x, y) = (ty.wrap(a), ty.wrap(b));
    if ty.bits < 64 {
        let subtrahend = y + u64::from(bin);
        (ty.wrap(x.wrapping_sub(subtrahend)), x < subtrahend)
    } else {
        let (partial, b1) = x.overflowing_sub(y);
        let (difference, b2) = partial.overflowing_sub(u64::from(bin));
        (difference, b1 || b2)
    }
}

/// `mul.lo/.hi/.wide`.
#[inline]
pub(crate) fn mul(ty: IntTy, half: Half, a: u64, b: u64) -> u64 {
    // The exact product of two ≤32-bit values fits in 64 bits (signed: i64); the low 64 bits
    // of the 128-bit product below are the same, and the halves taken from them too.
    if ty.bits <= 32 {
        let product = if ty.signed {
            ty.sext(a).wrapping_mul(ty.sext(b)) as u64
        } else {
            ty.wrap(a).wrapping_mul(ty.wrap(b))
        };
        return match half {
            Half::Lo => ty.wrap(product),
            Half::Hi => ty.wrap(product >> ty.bits),
            Half::Wide => zext(product, ty.bits * 2),
        };
    }
    // The exact product of two ≤64-bit values fits in 128 bits (signed: i128).
    let product = if ty.signed {
        (ty.sext(a) as i128).wrapping_mul(ty.sext(b) as i128) as u128
    } else {
        (ty.wrap(a) as u128) * (ty.wrap(b) as u128)
    };
    match half {
        Half::Lo => ty.wrap(product as u64),
        Half::Hi => ty.wrap((product >> ty.bits) as u64),
        Half::Wide => zext(product as u64, ty.bits * 2),
    }
}

/// `mul24.lo/.hi`: the 48-bit product of the low 24 bits; `.lo` its bits 31..0, `.hi` 47..16.
#[inline]
pub(crate) fn mul24(signed: bool, hi: bool, a: u64, b: u64) -> u64 {
    let (x, y) = if signed {
        (sext(a, 24), sext(b, 24))
    } else {
        (zext(a, 24) as i64, zext(b, 24) as i64)
    };
    let p = x * y; // |p| < 2^47: no overflow
    let bits = if hi { p >> 16 } else { p };
    zext(bits as u64, 32)
}

/// `sad`: `c + |a - b|`.
#[inline]
pub(crate) fn sad(ty: IntTy, a: u64, b: u64, c: u64) -> u64 {
    let diff = (ty.value(a) - ty.value(b)).unsigned_abs() as u64;
    ty.wrap(diff.wrapping_add(c))
}

/// Integer division. Division by zero is unspecified in PTX: the result is all ones (what the
/// quotient loop of a restoring divider yields), never a panic. `MIN / -1` wraps to `MIN`.
#[inline]
pub(crate) fn div(ty: IntTy, a: u64, b: u64) -> u64 {
    if ty.wrap(b) == 0 {
        return ty.wrap(u64::MAX);
    }
    if ty.signed {
        ty.wrap(ty.sext(a).wrapping_div(ty.sext(b)) as u64)
    } else {
        ty.wrap(a) / ty.wrap(b)
    }
}

/// Integer remainder. By zero: `a` (consistent with an all-ones quotient: `a - q·0`).
/// `MIN % -1` is 0.
#[inline]
pub(crate) fn rem(ty: IntTy, a: u64, b: u64) -> u64 {
    if ty.wrap(b) == 0 {
        return ty.wrap(a);
    }
    if ty.signed {
        ty.wrap(ty.sext(a).wrapping_rem(ty.sext(b)) as u64)
    } else {
        ty.wrap(a) % ty.wrap(b)
    }
}

#[inline]
pub(crate) fn min_max(ty: IntTy, max: bool, relu: bool, a: u64, b: u64) -> u64 {
    // In 64 bits rather than `IntTy::value`'s 128: the same result for widths up to 64.
    let r = if ty.signed {
        let (x, y) = (ty.sext(a), ty.sext(b));
        let r = if max { x.max(y) } else { x.min(y) };
        (if relu { r.max(0) } else { r }) as u64
    } else {
        let (x, y) = (ty.wrap(a), ty.wrap(b));
        if max {
            x.max(y)
        } else {
            x.min(y)
        }
    };
    ty.wrap(r)
}

/// `bfind`: the position of the most significant non-sign bit (0xffffffff when none);
/// `.shiftamt` returns the left shift that brings it to the top.
#[inline]
pub(crate) fn bfind(ty: IntTy, shiftamt: bool, a: u64) -> u64 {
    let mut v = ty.wrap(a);
    if ty.signed && ty.sext(a) < 0 {
        v = ty.wrap(!v);
    }
    if v == 0 {
        return 0xffff_ffff;
    }
    let msb = 63 - v.leading_zeros() as u64;
    if shiftamt {
        ty.bits as u64 - 1 - msb
    } else {
        msb
    }
}

/// `bfe`: extracts `len` bits at `pos` (both from the low 8 bits of their operands), sign-filled
/// from the field's top bit for signed types (PTX ISA pseudocode).
#[inline]
pub(crate) fn bfe(ty: IntTy, a: u64, b: u64, c: u64) -> u64 {
    let msb = ty.bits as u64 - 1;
    let pos = b & 0xff;
    let len = c & 0xff;
    let a = ty.wrap(a);
    let sbit = if !ty.signed || len == 0 {
        0
    } else {
        (a >> (pos + len - 1).min(msb)) & 1
    };
    // Result bit i is bit pos + i of `a` for the `taken` bits with i < len and pos + i <= msb,
    // the sign bit above them (the pseudocode's loop over i, in closed form).
    let taken = if pos > msb { 0 } else { len.min(msb + 1 - pos) };
    let field = if taken == 0 {
        0
    } else {
        (a >> pos) & low_mask(taken as u8)
    };
    let fill = if sbit == 0 {
        0
    } else {
        low_mask(ty.bits) & !low_mask(taken as u8)
    };
    field | fill
}

/// `bfi f, a, b, c, d`: inserts the low `d` bits of `a` into `b` at position `c`.
#[inline]
pub(crate) fn bfi(bits: u8, a: u64, b: u64, c: u64, d: u64) -> u64 {
    let msb = bits as u64 - 1;
    let pos = c & 0xff;
    let len = d & 0xff;
    // The low `taken` bits of `a` replace bits pos.. of `b` while i < len and pos + i <= msb
    // (the pseudocode's loop over i, in closed form).
    let taken = if pos > msb { 0 } else { len.min(msb + 1 - pos) };
    let f = zext(b, bits);
    if taken == 0 {
        return f;
    }
    let field = low_mask(taken as u8) << pos;
    (f & !field) | ((a << pos) & field)
}

/// `fns`: the position of the `offset`-th set bit of `mask` counting from `base` (PTX ISA
/// pseudocode); 0xffffffff when there is none.
#[inline]
pub(crate) fn fns(mask: u32, base: u32, offset: i32) -> u64 {
    if offset == 0 {
        return if base < 32 && (mask >> base) & 1 == 1 {
            base as u64
        } else {
            0xffff_ffff
        };
    }
    let mut pos = base as i64;
    let mut count = offset.unsigned_abs() - 1;
    let inc = if offset > 0 { 1 } else { -1 };
    while (0..32).contains(&pos) {
        if (mask >> pos) & 1 == 1 {
            if count == 0 {
                return pos as u64;
            }
            count -= 1;
        }
        pos += inc;
    }
    0xffff_ffff
}

/// `prmt` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrmtMode {
    Default,
    F4e,
    B4e,
    Rc8,
    Ecl,
    Ecr,
    Rc16,
}

/// `prmt.b32{.mode} d, a, b, c`: bytes of `{b, a}` (a is bytes 0-3) selected by `c`.
#[inline]
pub(crate) fn prmt(mode: PrmtMode, a: u32, b: u32, c: u32) -> u32 {
    let bytes = ((b as u64) << 32) | a as u64;
    let byte = |i: u32| ((bytes >> (8 * (i & 7))) & 0xff) as u32;
    // Selectors for result bytes 0..3 in the special modes (PTX ISA table, d.b0 first).
    let table = |s: u32| -> [u32; 4] {
        let s = s & 3;
        match mode {
            PrmtMode::F4e => [s, s + 1, s + 2, s + 3],
            PrmtMode::B4e => [s, (s + 7) & 7, (s + 6) & 7, (s + 5) & 7],
            PrmtMode::Rc8 => [s; 4],
            PrmtMode::Ecl => [s, s.max(1), s.max(2), 3],
            PrmtMode::Ecr => [0, s.min(1), s.min(2), s],
            PrmtMode::Rc16 => {
                let lo = (s & 1) * 2;
                [lo, lo + 1, lo, lo + 1]
            }
            PrmtMode::Default => [0; 4],
        }
    };
    let mut d = 0u32;
    if mode == PrmtMode::Default {
        for i in 0..4 {
            let sel = (c >> (4 * i)) & 0xf;
            let mut v = byte(sel & 7);
            if sel & 8 != 0 {
                // Replicate the selected byte's sign bit.
                v = if v & 0x80 != 0 { 0xff } else { 0 };
            }
            d |= v << (8 * i);
        }
    } else {
        for (i, sel) in table(c).into_iter().enumerate() {
            d |= byte(sel) << (8 * i);
        }
    }
    d
}

/// `lop3.b32 d, a, b, c, lut`: bit i of d is `lut[(a_i << 2) | (b_i << 1) | c_i]`
/// (the LUT is `F(0xF0, 0xCC, 0xAA)`).
#[inline]
pub(crate) fn lop3(a: u32, b: u32, c: u32, lut: u8) -> u32 {
    let mut d = 0u32;
    for minterm in 0..8u32 {
        if (lut >> minterm) & 1 == 1 {
            let pick = |x: u32, bit: u32| if minterm & bit != 0 { x } else { !x };
            d |= pick(a, 4) & pick(b, 2) & pick(c, 1);
        }
    }
    d
}

/// `shl`: shifts of the width or more give 0.
#[inline]
pub(crate) fn shl(bits: u8, a: u64, n: u32) -> u64 {
    if n >= bits as u32 {
        0
    } else {
        zext(a << n, bits)
    }
}

/// `shr`: shifts of the width or more give 0 (unsigned) or the sign fill (signed).
#[inline]
pub(crate) fn shr(ty: IntTy, a: u64, n: u32) -> u64 {
    let n = n.min(ty.bits as u32 - 1 + !ty.signed as u32);
    if ty.signed {
        ty.wrap((ty.sext(a) >> n) as u64)
    } else if n >= ty.bits as u32 {
        0
    } else {
        ty.wrap(a) >> n
    }
}

/// `shf.l/.r.{wrap,clamp}.b32 d, a, b, c`: funnel shift of the 64-bit `{b, a}`.
#[inline]
pub(crate) fn shf(left: bool, clamp: bool, a: u32, b: u32, c: u32) -> u64 {
    let n = if clamp { c.min(32) } else { c & 31 };
    let both = ((b as u64) << 32) | a as u64;
    if left {
        ((both << n) >> 32) & 0xffff_ffff
    } else {
        (both >> n) & 0xffff_ffff
    }
}

fn lane(v: u64, index: u32, bits: u32, signed: bool) -> i64 {
    let x = (v >> (index * bits)) & ((1 << bits) - 1);
    if signed {
        sext(x, bits as u8)
    } else {
        x as i64
    }
}

/// `dp4a`: `c` plus the four byte products of `a` and `b` (32-bit wrapping).
#[inline]
pub(crate) fn dp4a(a_signed: bool, b_signed: bool, a: u64, b: u64, c: u64) -> u64 {
    let mut acc = c as u32;
    for i in 0..4 {
        let p = lane(a, i, 8, a_signed) * lane(b, i, 8, b_signed);
        acc = acc.wrapping_add(p as u32);
    }
    acc as u64
}

/// `dp2a.lo/.hi`: `c` plus the two products of `a`'s 16-bit halves with bytes 0-1 (`.lo`) or
/// 2-3 (`.hi`) of `b`.
#[inline]
pub(crate) fn dp2a(hi: bool, a_signed: bool, b_signed: bool, a: u64, b: u64, c: u64) -> u64 {
    let first = if hi { 2 } else { 0 };
    let mut acc = c as u32;
    for i in 0..2 {
        let p = lane(a, i, 16, a_signed) * lane(b, first + i, 8, b_signed);
        acc = acc.wrapping_add(p as u32);
    }
    acc as u64
}

/// Integer comparison operators (`lo/ls/hi/hs` are the unsigned forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ICmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl ICmp {
    /// The operator named `name`; ordered comparisons on `.bN` types are not PTX. `lo/ls/hi/hs`
    /// compare unsigned: the caller compares as the type says, so they are allowed only on
    /// unsigned or bit types.
    pub fn parse(name: &str, signed: bool, bit_type: bool) -> Option<ICmp> {
        let op = match name {
            "eq" => return Some(ICmp::Eq),
            "ne" => return Some(ICmp::Ne),
            "lt" => ICmp::Lt,
            "le" => ICmp::Le,
            "gt" => ICmp::Gt,
            "ge" => ICmp::Ge,
            "lo" if !signed => return Some(ICmp::Lt),
            "ls" if !signed => return Some(ICmp::Le),
            "hi" if !signed => return Some(ICmp::Gt),
            "hs" if !signed => return Some(ICmp::Ge),
            _ => return None,
        };
        (!bit_type).then_some(op)
    }
}

#[inline]
pub(crate) fn compare(op: ICmp, ty: IntTy, a: u64, b: u64) -> bool {
    // In 64 bits rather than `IntTy::value`'s 128: the same order for widths up to 64.
    if ty.signed {
        ordered(op, ty.sext(a), ty.sext(b))
    } else {
        ordered(op, ty.wrap(a), ty.wrap(b))
    }
}

#[inline(always)]
fn ordered<T: Ord>(op: ICmp, x: T, y: T) -> bool {
    match op {
        ICmp::Eq => x == y,
        ICmp::Ne => x != y,
        ICmp::Lt => x < y,
        ICmp::Le => x <= y,
        ICmp::Gt => x > y,
        ICmp::Ge => x >= y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bfe` as the PTX ISA pseudocode states it, bit by bit.
    fn bfe_pseudocode(ty: IntTy, a: u64, b: u64, c: u64) -> u64 {
        let msb = ty.bits as u64 - 1;
        let (pos, len) = (b & 0xff, c & 0xff);
        let a = ty.wrap(a);
        let sbit = if !ty.signed || len == 0 {
            0
        } else {
            (a >> (pos + len - 1).min(msb)) & 1
        };
        let mut d = 0u64;
        for i in 0..=msb {
            let bit = if i < len && pos + i <= msb {
                (a >> (pos + i)) & 1
            } else {
                sbit
            };
            d |= bit << i;
        }
        d
    }

    /// `bfi` as the PTX ISA pseudocode states it, bit by bit.
    fn bfi_pseudocode(bits: u8, a: u64, b: u64, c: u64, d: u64) -> u64 {
        let msb = bits as u64 - 1;
        let (pos, len) = (c & 0xff, d & 0xff);
        let mut f = zext(b, bits);
        let mut i = 0;
        while i < len && pos + i <= msb {
            let bit = (a >> i) & 1;
            f = (f & !(1 << (pos + i))) | (bit << (pos + i));
            i += 1;
        }
        f
    }

    /// `add`, `sub` and `mul` in 128-bit arithmetic, as the PTX ISA defines them.
    fn add_wide(ty: IntTy, a: u64, b: u64, cin: bool) -> (u64, bool) {
        let sum = ty.wrap(a) as u128 + ty.wrap(b) as u128 + cin as u128;
        (ty.wrap(sum as u64), sum >> ty.bits != 0)
    }

    fn sub_wide(ty: IntTy, a: u64, b: u64, bin: bool) -> (u64, bool) {
        let subtrahend = ty.wrap(b) as u128 + bin as u128;
        let minuend = ty.wrap(a) as u128;
        (
            ty.wrap(minuend.wrapping_sub(subtrahend) as u64),
            minuend < subtrahend,
        )
    }

    fn mul_wide(ty: IntTy, half: Half, a: u64, b: u64) -> u64 {
        let product = if ty.signed {
            (ty.sext(a) as i128).wrapping_mul(ty.sext(b) as i128) as u128
        } else {
            (ty.wrap(a) as u128) * (ty.wrap(b) as u128)
        };
        match half {
            Half::Lo => ty.wrap(product as u64),
            Half::Hi => ty.wrap((product >> ty.bits) as u64),
            Half::Wide => zext(product as u64, ty.bits * 2),
        }
    }

    #[test]
    fn add_sub_mul_match_128_bit_arithmetic() {
        // Edge values of every width (0, 1, the signed extremes, all ones) with garbage above
        // the width, and a pseudo-random spread.
        let mut values = vec![0u64, 1, 2, u64::MAX, u64::MAX - 1];
        for bits in [8u32, 16, 32, 64] {
            let top = 1u64 << (bits - 1);
            values.extend([top, top - 1, top + 1, top.wrapping_mul(2).wrapping_sub(1)]);
            values.extend([
                top | 0xabcd_0000_0000_0000,
                (top - 1) | 0x1234_0000_0000_0000,
            ]);
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..40 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x);
        }
        for bits in [8u8, 16, 32, 64] {
            for signed in [false, true] {
                let ty = IntTy { bits, signed };
                for &a in &values {
                    for &b in &values {
                        for carry in [false, true] {
                            assert_eq!(add(ty, false, a, b, carry), add_wide(ty, a, b, carry));
                            assert_eq!(sub(ty, false, a, b, carry), sub_wide(ty, a, b, carry));
                        }
                        for half in [Half::Lo, Half::Hi, Half::Wide] {
                            if half == Half::Wide && bits == 64 {
                                continue;
                            }
                            assert_eq!(
                                mul(ty, half, a, b),
                                mul_wide(ty, half, a, b),
                                "mul {ty:?} {half:?} {a:#x} {b:#x}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn bit_fields_match_the_pseudocode() {
        // Positions and lengths (the operands' low 8 bits, with higher bits that must be
        // ignored) across and beyond both widths, on values with the top bit set and clear.
        let fields: Vec<u64> = (0..72).chain([127, 128, 200, 255]).collect();
        let values = [
            0u64,
            u64::MAX,
            0x8000_0000,
            0x7fff_ffff,
            0x8000_0000_0000_0000,
            0x0123_4567_89ab_cdef,
            0xfedc_ba98_7654_3210,
            0xdead_beef,
        ];
        for bits in [32u8, 64] {
            for signed in [false, true] {
                let ty = IntTy { bits, signed };
                for &a in &values {
                    for &pos in &fields {
                        for &len in &fields {
                            let (b, c) = (pos | 0x1200, len | 0x3400);
                            assert_eq!(
                                bfe(ty, a, b, c),
                                bfe_pseudocode(ty, a, b, c),
                                "bfe {ty:?} {a:#x} {pos} {len}"
                            );
                        }
                    }
                }
            }
            for &a in &values {
                for &base in &values[..4] {
                    for &pos in &fields {
                        for &len in &fields {
                            let (c, d) = (pos | 0x1200, len | 0x3400);
                            assert_eq!(
                                bfi(bits, a, base, c, d),
                                bfi_pseudocode(bits, a, base, c, d),
                                "bfi {bits} {a:#x} {base:#x} {pos} {len}"
                            );
                        }
                    }
                }
            }
        }
    }
}
