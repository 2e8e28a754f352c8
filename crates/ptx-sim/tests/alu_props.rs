//! Property tests of the ALU against host oracles: directed rounding (exact f64 references for
//! f32, error-free transformations for f64), conversions against Rust's `as` and
//! `round_ties_even`, f16 rounding against a brute-force nearest-value search, and integer
//! wide products and carry chains against u128/i128 arithmetic.

use proptest::prelude::*;
use ptx_lexer::Opcode;
use ptx_sim::alu::{decode, AluOp};

fn op(text: &str) -> AluOp {
    match decode(&Opcode::new(text)) {
        Ok(Some(op)) => op,
        other => panic!("{text}: {other:?}"),
    }
}

fn run(op: &AluOp, sources: &[u64]) -> u64 {
    let mut s = [0u64; 4];
    s[..sources.len()].copy_from_slice(sources);
    op.eval(&s, false).value
}

fn next_up32(x: f32) -> f32 {
    if x == 0.0 {
        f32::from_bits(1)
    } else if x > 0.0 {
        f32::from_bits(x.to_bits() + 1)
    } else {
        f32::from_bits(x.to_bits() - 1)
    }
}

fn next_down32(x: f32) -> f32 {
    -next_up32(-x)
}

/// The f32 rounding of an exact value given as f64, by direction (independent of the ALU: the
/// host's round-to-nearest conversion plus exact f64 comparisons).
fn oracle32(exact: f64, mode: &str) -> f32 {
    let r = exact as f32;
    let below = if (r as f64) > exact {
        next_down32(r)
    } else {
        r
    };
    let above = if (r as f64) < exact { next_up32(r) } else { r };
    match mode {
        "rn" => r,
        "rm" => below,
        "rp" => above,
        _ => {
            if exact >= 0.0 {
                below
            } else {
                above
            }
        }
    }
}

/// Finite f32 values with exponents in a band where sums and products stay exact in f64.
fn moderate32() -> impl Strategy<Value = f32> {
    (any::<bool>(), -40i32..40, 0u32..(1 << 23)).prop_map(|(neg, e, m)| {
        let bits = (((e + 127) as u32) << 23) | m;
        let x = f32::from_bits(bits);
        if neg {
            -x
        } else {
            x
        }
    })
}

fn finite32() -> impl Strategy<Value = f32> {
    any::<u32>()
        .prop_map(f32::from_bits)
        .prop_filter("finite", |x| x.is_finite())
}

fn finite64() -> impl Strategy<Value = f64> {
    any::<u64>()
        .prop_map(f64::from_bits)
        .prop_filter("finite", |x| x.is_finite())
}

/// f64 values whose products and residuals neither overflow nor underflow.
fn moderate64() -> impl Strategy<Value = f64> {
    (any::<bool>(), -200i32..200, 0u64..(1 << 52)).prop_map(|(neg, e, m)| {
        let x = f64::from_bits((((e + 1023) as u64) << 52) | m);
        if neg {
            -x
        } else {
            x
        }
    })
}

const MODES: [&str; 4] = ["rn", "rz", "rm", "rp"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn f32_directed_rounding_matches_exact_f64(a in moderate32(), b in moderate32(), c in moderate32()) {
        let (x, y, z) = (a as f64, b as f64, c as f64);
        for mode in MODES {
            // Products of f32 are exact in f64; sums within the band are too.
            let got = f32::from_bits(run(&op(&format!("mul.{mode}.f32")), &[a.to_bits() as u64, b.to_bits() as u64]) as u32);
            prop_assert_eq!(got, oracle32(x * y, mode), "mul.{} {} {}", mode, a, b);
            let got = f32::from_bits(run(&op(&format!("add.{mode}.f32")), &[a.to_bits() as u64, b.to_bits() as u64]) as u32);
            let sum = x + y;
            if sum - x == y && sum - y == x && sum != 0.0 {
                // The f64 sum is exact (exponent gap ≤ 29 bits); otherwise the f64 bracket
                // test below covers it.
                prop_assert_eq!(got.to_bits(), oracle32(sum, mode).to_bits(), "add.{} {} {}", mode, a, b);
            } else if sum != 0.0 {
                // Inexact in f64: exact = sum + err (TwoSum), and got - sum is exact
                // (Sterbenz), so the direction is checked exactly.
                let bb = sum - x;
                let err = (x - (sum - bb)) + (y - bb);
                let dist = got as f64 - sum;
                let ok = match mode {
                    "rp" => dist >= err,
                    "rm" => dist <= err,
                    "rz" => if sum > 0.0 { dist <= err } else { dist >= err },
                    _ => true,
                };
                prop_assert!(ok, "add.{} {} {} = {}", mode, a, b, got);
            }
            // fma: a·b exact; a·b + c exact in f64 when the exponents are close enough.
            let (p, s) = (x * y, x * y + z);
            if s - p == z && s - z == p {
                let got = f32::from_bits(run(&op(&format!("fma.{mode}.f32")),
                    &[a.to_bits() as u64, b.to_bits() as u64, c.to_bits() as u64]) as u32);
                if s != 0.0 {
                    prop_assert_eq!(got, oracle32(s, mode), "fma.{} {} {} {}", mode, a, b, c);
                }
            }
            // div and sqrt: bracket checks with exact f64 products (24×24 bits).
            let q = f32::from_bits(run(&op(&format!("div.{mode}.f32")), &[a.to_bits() as u64, b.to_bits() as u64]) as u32);
            let ratio = |r: f32| (r as f64) * y; // exact
            let (lo, hi) = if y > 0.0 { (ratio(next_down32(q)), ratio(next_up32(q))) } else { (ratio(next_up32(q)), ratio(next_down32(q))) };
            prop_assert!(lo < x && x < hi, "div.{} {} {} = {}", mode, a, b, q);
            match mode {
                "rz" => prop_assert!((q as f64 * y).abs() <= x.abs()),
                "rm" => {
                    let ok = if y > 0.0 { q as f64 * y <= x } else { q as f64 * y >= x };
                    prop_assert!(ok)
                }
                "rp" => {
                    let ok = if y > 0.0 { q as f64 * y >= x } else { q as f64 * y <= x };
                    prop_assert!(ok)
                }
                _ => {}
            }
            let sa = a.abs();
            let r = f32::from_bits(run(&op(&format!("sqrt.{mode}.f32")), &[sa.to_bits() as u64]) as u32);
            let sq = |v: f32| (v as f64) * (v as f64);
            prop_assert!(sq(next_down32(r)) < sa as f64 && (sa as f64) < sq(next_up32(r)));
            match mode {
                "rz" | "rm" => prop_assert!(sq(r) <= sa as f64),
                "rp" => prop_assert!(sq(r) >= sa as f64),
                _ => prop_assert_eq!(r, sa.sqrt()),
            }
        }
    }

    #[test]
    fn f64_directed_rounding_brackets_the_nearest(a in moderate64(), b in moderate64(), c in moderate64()) {
        // Residual signs from error-free transformations (valid without under/overflow).
        let two_sum_err = |x: f64, y: f64| {
            let s = x + y;
            let bb = s - x;
            (x - (s - bb)) + (y - bb)
        };
        let cases: Vec<(&str, Vec<u64>, f64, f64)> = vec![
            // (opcode stem, sources, RN result, sign of exact - RN)
            ("add", vec![a.to_bits(), b.to_bits()], a + b, two_sum_err(a, b)),
            ("mul", vec![a.to_bits(), b.to_bits()], a * b, a.mul_add(b, -(a * b))),
            ("div", vec![a.to_bits(), b.to_bits()], a / b, (-(a / b)).mul_add(b, a) * b.signum()),
            ("sqrt", vec![a.abs().to_bits()], a.abs().sqrt(), (-a.abs().sqrt()).mul_add(a.abs().sqrt(), a.abs())),
        ];
        for (stem, sources, rn, residual) in cases {
            for mode in MODES {
                let got = f64::from_bits(run(&op(&format!("{stem}.{mode}.f64")), &sources));
                let want = match (mode, residual.partial_cmp(&0.0)) {
                    ("rn", _) | (_, Some(std::cmp::Ordering::Equal)) => rn,
                    ("rp", Some(std::cmp::Ordering::Greater)) | ("rz", Some(std::cmp::Ordering::Greater)) if mode == "rp" || rn < 0.0 => rn.next_up(),
                    ("rm", Some(std::cmp::Ordering::Less)) | ("rz", Some(std::cmp::Ordering::Less)) if mode == "rm" || rn > 0.0 => rn.next_down(),
                    _ => rn,
                };
                prop_assert_eq!(got.to_bits(), want.to_bits(), "{}.{} {} {} {}", stem, mode, a, b, c);
            }
        }
    }

    #[test]
    fn directed_results_bracket_rn_within_one_ulp(a in finite64(), b in finite64(), c in finite64()) {
        for stem in ["add", "mul", "div", "fma"] {
            let sources: Vec<u64> = if stem == "fma" { vec![a.to_bits(), b.to_bits(), c.to_bits()] } else { vec![a.to_bits(), b.to_bits()] };
            let r = |mode: &str| f64::from_bits(run(&op(&format!("{stem}.{mode}.f64")), &sources));
            let (rn, rz, rm, rp) = (r("rn"), r("rz"), r("rm"), r("rp"));
            if rn.is_nan() {
                prop_assert!(rz.is_nan() && rm.is_nan() && rp.is_nan());
                continue;
            }
            prop_assert!(rm <= rn && rn <= rp, "{} {} {} {}: {} {} {}", stem, a, b, c, rm, rn, rp);
            prop_assert!(rm == rp || rm.next_up() == rp || (rm == f64::MAX && rp.is_infinite()) || (rm.is_infinite() && rp == -f64::MAX));
            prop_assert!(rz == rm || rz == rp);
            prop_assert!(rz.abs() <= rm.abs() || rz.abs() <= rp.abs());
        }
    }

    #[test]
    fn float_to_int_conversions_match_rust(x in any::<u32>().prop_map(f32::from_bits), y in any::<u64>().prop_map(f64::from_bits)) {
        // Rust's float → int `as` truncates, saturates and maps NaN to 0, like PTX.
        let xs = x.to_bits() as u64;
        prop_assert_eq!(run(&op("cvt.rzi.s32.f32"), &[xs]), x as i32 as u32 as u64);
        prop_assert_eq!(run(&op("cvt.rni.s32.f32"), &[xs]), x.round_ties_even() as i32 as u32 as u64);
        prop_assert_eq!(run(&op("cvt.rmi.u32.f32"), &[xs]), x.floor() as u32 as u64);
        prop_assert_eq!(run(&op("cvt.rpi.s64.f32"), &[xs]), x.ceil() as i64 as u64);
        prop_assert_eq!(run(&op("cvt.rni.s64.f64"), &[y.to_bits()]), y.round_ties_even() as i64 as u64);
        prop_assert_eq!(run(&op("cvt.rzi.u64.f64"), &[y.to_bits()]), y as u64);
        prop_assert_eq!(run(&op("cvt.rzi.s16.f64"), &[y.to_bits()]), y as i16 as u16 as u64);
        let rni = f32::from_bits(run(&op("cvt.rni.f32.f32"), &[xs]) as u32);
        prop_assert!(rni.to_bits() == x.round_ties_even().to_bits() || (x.is_nan() && rni.is_nan()));
        let rmi = f64::from_bits(run(&op("cvt.rmi.f64.f64"), &[y.to_bits()]));
        prop_assert!(rmi.to_bits() == y.floor().to_bits() || (y.is_nan() && rmi.is_nan()));
    }

    #[test]
    fn int_to_float_and_narrowing_match_rust(v in any::<u64>(), y in finite64()) {
        // Rust's int → float and f64 → f32 `as` round to nearest even.
        prop_assert_eq!(run(&op("cvt.rn.f32.s64"), &[v]), (v as i64 as f32).to_bits() as u64);
        prop_assert_eq!(run(&op("cvt.rn.f64.u64"), &[v]), (v as f64).to_bits());
        prop_assert_eq!(run(&op("cvt.rn.f32.s32"), &[v]), (v as u32 as i32 as f32).to_bits() as u64);
        prop_assert_eq!(run(&op("cvt.rn.f32.f64"), &[y.to_bits()]), (y as f32).to_bits() as u64);
        for mode in ["rz", "rm", "rp"] {
            let got = f32::from_bits(run(&op(&format!("cvt.{mode}.f32.f64")), &[y.to_bits()]) as u32);
            if (y as f32).is_finite() && y.abs() <= f32::MAX as f64 {
                prop_assert_eq!(got, oracle32(y, mode), "cvt.{}.f32.f64 {}", mode, y);
            }
            let got = f32::from_bits(run(&op(&format!("cvt.{mode}.f32.u64")), &[v]) as u32) as f64;
            let exact = v as u128;
            match mode {
                "rp" => prop_assert!(got as u128 >= exact),
                _ => prop_assert!(got as u128 <= exact),
            }
        }
    }

    #[test]
    fn f16_rounding_matches_nearest_search(x in finite32()) {
        // All finite non-negative f16 values in increasing order (bits 0..0x7bff).
        let decode = |h: u16| -> f64 {
            let e = ((h >> 10) & 0x1f) as i32;
            let m = (h & 0x3ff) as f64;
            if e == 0 { m * 2f64.powi(-24) } else { (1024.0 + m) * 2f64.powi(e - 25) }
        };
        let ax = (x as f64).abs();
        // Greatest f16 ≤ |x| (binary search over the monotone encoding).
        let (mut lo, mut hi) = (0u16, 0x7bffu16);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if decode(mid) <= ax { lo = mid } else { hi = mid - 1 }
        }
        let sign = if x.is_sign_negative() { 0x8000u16 } else { 0 };
        let below = lo;
        let above: u16 = if decode(below) == ax { below } else { below + 1 }; // 0x7c00 = inf
        let value = |h: u16| if h == 0x7c00 { 65520.0 } else { decode(h) }; // rn overflow threshold
        let nearest = if below == above { below } else {
            let (dl, du) = (ax - decode(below), value(above) - ax);
            if dl < du || (dl == du && below & 1 == 0) { below } else { above }
        };
        let got = |mode: &str| run(&op(&format!("cvt.{mode}.f16.f32")), &[x.to_bits() as u64]) as u16;
        prop_assert_eq!(got("rn"), sign | nearest, "rn {}", x);
        let clamp = |h: u16| h.min(0x7bff);
        prop_assert_eq!(got("rz"), sign | clamp(below), "rz {}", x);
        let (toward_neg, toward_pos) = if sign == 0 { (clamp(below), above) } else { (above, clamp(below)) };
        prop_assert_eq!(got("rm"), sign | toward_neg, "rm {}", x);
        prop_assert_eq!(got("rp"), sign | toward_pos, "rp {}", x);
    }

    #[test]
    fn f16_add_mul_round_the_exact_result_once(a in any::<u16>(), b in any::<u16>()) {
        let fin = |h: u16| h & 0x7c00 != 0x7c00;
        prop_assume!(fin(a) && fin(b));
        // f16 sums and products are exact in f64; cvt.rn.f16.f64 rounds them once.
        let to64 = |h: u16| f64::from_bits(run(&op("cvt.f64.f16"), &[h as u64]));
        let round = |v: f64| run(&op("cvt.rn.f16.f64"), &[v.to_bits()]);
        let sum = to64(a) + to64(b);
        let product = to64(a) * to64(b);
        if sum != 0.0 {
            prop_assert_eq!(run(&op("add.rn.f16"), &[a as u64, b as u64]), round(sum));
        }
        if product != 0.0 {
            prop_assert_eq!(run(&op("mul.rn.f16"), &[a as u64, b as u64]), round(product));
        }
    }

    #[test]
    fn wide_products_match_i128(a in any::<u64>(), b in any::<u64>()) {
        prop_assert_eq!(run(&op("mul.wide.u32"), &[a, b]), (a as u32 as u64) * (b as u32 as u64));
        prop_assert_eq!(run(&op("mul.wide.s32"), &[a, b]), ((a as i32 as i64) * (b as i32 as i64)) as u64);
        prop_assert_eq!(run(&op("mul.hi.u64"), &[a, b]), ((a as u128 * b as u128) >> 64) as u64);
        prop_assert_eq!(run(&op("mul.hi.s64"), &[a, b]), ((a as i64 as i128 * b as i64 as i128) >> 64) as u64);
        prop_assert_eq!(run(&op("mul.lo.s64"), &[a, b]), a.wrapping_mul(b));
        prop_assert_eq!(run(&op("mul.hi.s32"), &[a, b]), (((a as i32 as i64 * b as i32 as i64) >> 32) as u32) as u64);
        prop_assert_eq!(run(&op("div.s64"), &[a, b]), if b == 0 { u64::MAX } else { (a as i64).wrapping_div(b as i64) as u64 });
        prop_assert_eq!(run(&op("rem.u64"), &[a, b]), a.checked_rem(b).unwrap_or(a));
    }

    #[test]
    fn carry_chains_match_u128(a in any::<u128>(), b in any::<u128>()) {
        // A 128-bit add as four 32-bit limbs: add.cc, addc.cc, addc.cc, addc.
        let limbs = |x: u128| [0, 1, 2, 3].map(|k| (x >> (32 * k)) as u32 as u64);
        let (la, lb) = (limbs(a), limbs(b));
        let chain = |first: &str, middle: &str, last: &str| {
            let mut carry = false;
            let mut out = 0u128;
            for k in 0..4 {
                let text = if k == 0 { first } else if k == 3 { last } else { middle };
                let r = op(text).eval(&[la[k], lb[k], 0, 0], carry);
                carry = r.carry;
                out |= (r.value as u128) << (32 * k);
            }
            out
        };
        prop_assert_eq!(chain("add.cc.u32", "addc.cc.u32", "addc.u32"), a.wrapping_add(b));
        prop_assert_eq!(chain("sub.cc.u32", "subc.cc.u32", "subc.u32"), a.wrapping_sub(b));
        // 64-bit limbs.
        let (a0, a1, b0, b1) = (a as u64, (a >> 64) as u64, b as u64, (b >> 64) as u64);
        let r0 = op("add.cc.u64").eval(&[a0, b0, 0, 0], false);
        let r1 = op("addc.u64").eval(&[a1, b1, 0, 0], r0.carry);
        prop_assert_eq!(((r1.value as u128) << 64) | r0.value as u128, a.wrapping_add(b));
        // 64×64 → 128 multiply-accumulate from 32-bit mad.lo.cc / madc.hi chains:
        // (x·y) + z with x, y 32-bit and z 64-bit as two limbs.
        let (x, y, z) = (a as u32 as u64, b as u32 as u64, (a >> 64) as u64);
        let lo = op("mad.lo.cc.u32").eval(&[x, y, z & 0xffff_ffff, 0], false);
        let hi = op("madc.hi.u32").eval(&[x, y, z >> 32, 0], lo.carry);
        prop_assert_eq!((hi.value << 32) | lo.value, (x * y).wrapping_add(z));
    }
}
