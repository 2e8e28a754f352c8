//! Per-family ALU tests through the public API (`decode` + `eval`), against independent truth:
//! Rust's integer arithmetic, exact f64 references, IEEE corner cases and the PTX ISA's
//! documented examples.

use ptx_lexer::Opcode;
use ptx_sim::alu::{decode, AluOp, AluOutput, ValueKind};

fn op(text: &str) -> AluOp {
    match decode(&Opcode::new(text)) {
        Ok(Some(op)) => op,
        other => panic!("{text}: {other:?}"),
    }
}

fn eval_c(text: &str, sources: &[u64], carry: bool) -> AluOutput {
    let op = op(text);
    assert_eq!(op.source_count(), sources.len(), "{text}: source count");
    let mut s = [0u64; 4];
    s[..sources.len()].copy_from_slice(sources);
    op.eval(&s, carry)
}

fn ev(text: &str, sources: &[u64]) -> u64 {
    eval_c(text, sources, false).value
}

fn f(x: f32) -> u64 {
    x.to_bits() as u64
}

fn d(x: f64) -> u64 {
    x.to_bits()
}

fn ff(bits: u64) -> f32 {
    f32::from_bits(bits as u32)
}

fn i(x: i32) -> u64 {
    x as u32 as u64
}

// ---- decode ------------------------------------------------------------------------------------

#[test]
fn source_kinds_tell_the_engine_how_to_parse_immediates() {
    assert_eq!(
        op("cvt.rn.f32.s32").source_kind(0),
        ValueKind::Int { bits: 32 }
    );
    assert_eq!(op("cvt.rzi.s32.f64").source_kind(0), ValueKind::F64);
    assert_eq!(op("cvt.f32.f16").source_kind(0), ValueKind::F16);
    assert_eq!(op("setp.lt.f32").source_kind(1), ValueKind::F32);
    assert_eq!(op("setp.lt.and.f32").source_kind(2), ValueKind::Pred);
    assert_eq!(op("selp.f64").source_kind(0), ValueKind::F64);
    assert_eq!(op("selp.f64").source_kind(2), ValueKind::Pred);
    assert_eq!(op("shl.b64").source_kind(1), ValueKind::Int { bits: 32 });
    assert_eq!(
        op("mad.wide.u32").source_kind(2),
        ValueKind::Int { bits: 64 }
    );
    assert_eq!(op("lop3.b32").source_count(), 4);
    assert_eq!(op("bfi.b64").source_kind(2), ValueKind::Int { bits: 32 });
    assert_eq!(op("and.pred").source_kind(0), ValueKind::Pred);
    assert!(op("addc.cc.u32").reads_carry() && op("addc.cc.u32").writes_carry());
    assert!(!op("add.cc.u32").reads_carry() && op("add.cc.u32").writes_carry());
    assert!(op("madc.hi.u32").reads_carry() && !op("madc.hi.u32").writes_carry());
}

#[test]
fn unsupported_combinations_are_errors_not_guesses() {
    for text in [
        "add.rz.f16",     // f16 arithmetic rounds to nearest only
        "fma.f32",        // fma needs a rounding modifier
        "cvt.f32.s32",    // int-to-float needs one too
        "cvt.s32.f32",    // float-to-int needs .rni/...
        "cvt.f32.f64",    // narrowing needs one
        "setp.lt.b32",    // ordered comparison on a bit type
        "setp.lo.s32",    // unsigned comparison on a signed type
        "mad.hi.sat.s32", // not implemented
        "sin.approx.f64", // no such instruction
        "add.sat.u32",    // .sat is .s32-only
        "frobnicate.b32", // unknown
        "add.f32.bogus",  // unknown modifier
        "sqrt.f32",       // needs .rn/.approx
        "div.s32.cc",
    ] {
        assert!(
            decode(&Opcode::new(text)).is_err(),
            "{text} should be rejected"
        );
    }
}

// ---- integer arithmetic --------------------------------------------------------------------------

#[test]
fn add_sub_wrap_saturate_and_carry() {
    assert_eq!(ev("add.s32", &[i(i32::MAX), 1]), i(i32::MIN));
    assert_eq!(ev("add.sat.s32", &[i(i32::MAX), 1]), i(i32::MAX));
    assert_eq!(ev("sub.sat.s32", &[i(i32::MIN), 1]), i(i32::MIN));
    assert_eq!(ev("add.u16", &[0xffff, 2]), 1);
    assert_eq!(ev("sub.s64", &[0, 1]), u64::MAX);
    let r = eval_c("add.cc.u32", &[0xffff_ffff, 1], false);
    assert_eq!((r.value, r.carry), (0, true));
    let r = eval_c("addc.u32", &[5, 6], true);
    assert_eq!(r.value, 12);
    // addc without a carry set and a carry that is not read.
    assert_eq!(eval_c("add.u32", &[5, 6], true).value, 11);
    let r = eval_c("sub.cc.u32", &[0, 1], false);
    assert_eq!((r.value, r.carry), (0xffff_ffff, true));
    let r = eval_c("subc.cc.u32", &[5, 5], true);
    assert_eq!((r.value, r.carry), (0xffff_ffff, true));
}

#[test]
fn multiplication_halves() {
    assert_eq!(ev("mul.lo.s32", &[i(-3), i(7)]), i(-21));
    assert_eq!(ev("mul.hi.u32", &[0xffff_ffff, 0xffff_ffff]), 0xffff_fffe);
    assert_eq!(ev("mul.hi.s32", &[i(-1), i(1)]), i(-1));
    assert_eq!(ev("mul.wide.s32", &[i(-2), i(3)]), (-6i64) as u64);
    assert_eq!(ev("mul.wide.u32", &[0xffff_ffff, 2]), 0x1_ffff_fffe);
    assert_eq!(ev("mul.wide.s16", &[0x8000, 0x8000]), 0x4000_0000);
    assert_eq!(
        ev("mul.hi.s64", &[i64::MIN as u64, 2]),
        u64::MAX // -2^64 >> 64 = -1
    );
    assert_eq!(ev("mad.lo.s32", &[i(3), i(4), i(-20)]), i(-8));
    assert_eq!(
        ev("mad.wide.u32", &[0xffff_ffff, 0xffff_ffff, 1]),
        0xffff_fffe_0000_0002
    );
    let r = eval_c("mad.lo.cc.u32", &[0x8000_0000, 2, 1], false);
    assert_eq!((r.value, r.carry), (1, false));
    let r = eval_c("madc.hi.cc.u32", &[0xffff_ffff, 0xffff_ffff, 1], true);
    // hi(0xffffffff²) = 0xfffffffe; + 1 + carry-in 1 = 2^32: wraps to 0 with a carry out.
    assert_eq!((r.value, r.carry), (0, true));
    // mul24: 24-bit operands; .hi is bits 47..16 of the 48-bit product.
    assert_eq!(ev("mul24.lo.u32", &[0x0100_0003, 2]), 6);
    assert_eq!(ev("mul24.lo.s32", &[0x00ff_ffff, 5]), i(-5));
    assert_eq!(
        ev("mul24.hi.u32", &[0x00ff_ffff, 0x00ff_ffff]),
        (0xff_ffffu64 * 0xff_ffff) >> 16
    );
    assert_eq!(ev("mad24.lo.u32", &[3, 4, 5]), 17);
    assert_eq!(ev("sad.u32", &[3, 10, 100]), 107);
    assert_eq!(ev("sad.s32", &[i(-3), i(10), 100]), 113);
}

#[test]
fn division_never_panics() {
    assert_eq!(ev("div.s32", &[i(-7), i(2)]), i(-3));
    assert_eq!(ev("rem.s32", &[i(-7), i(2)]), i(-1));
    assert_eq!(ev("div.u32", &[7, 0]), 0xffff_ffff);
    assert_eq!(ev("rem.u32", &[7, 0]), 7);
    assert_eq!(ev("div.s32", &[i(5), 0]), 0xffff_ffff);
    assert_eq!(ev("div.s32", &[i(i32::MIN), i(-1)]), i(i32::MIN));
    assert_eq!(ev("rem.s32", &[i(i32::MIN), i(-1)]), 0);
    assert_eq!(ev("div.s64", &[i64::MIN as u64, u64::MAX]), i64::MIN as u64);
    assert_eq!(ev("div.u64", &[u64::MAX, 16]), u64::MAX / 16);
    assert_eq!(ev("div.s16", &[0xfff9, 2]), 0xfffd);
}

#[test]
fn abs_neg_min_max() {
    assert_eq!(ev("abs.s32", &[i(-5)]), 5);
    assert_eq!(ev("abs.s32", &[i(i32::MIN)]), i(i32::MIN));
    assert_eq!(ev("neg.s32", &[i(i32::MIN)]), i(i32::MIN));
    assert_eq!(ev("neg.s64", &[5]), (-5i64) as u64);
    assert_eq!(ev("min.s32", &[i(-1), 1]), i(-1));
    assert_eq!(ev("min.u32", &[i(-1), 1]), 1);
    assert_eq!(ev("max.u64", &[u64::MAX, 1]), u64::MAX);
    assert_eq!(ev("max.relu.s32", &[i(-5), i(-2)]), 0);
    assert_eq!(ev("min.relu.s32", &[i(5), i(2)]), 2);
    assert_eq!(ev("max.s16", &[0x8000, 1]), 1);
}

// ---- bit manipulation ------------------------------------------------------------------------------

#[test]
fn counting_and_reversal() {
    assert_eq!(ev("popc.b32", &[0xf0f0_0001]), 9);
    assert_eq!(ev("popc.b64", &[u64::MAX]), 64);
    assert_eq!(ev("clz.b32", &[0]), 32);
    assert_eq!(ev("clz.b32", &[1]), 31);
    assert_eq!(ev("clz.b64", &[1 << 40]), 23);
    assert_eq!(ev("brev.b32", &[1]), 0x8000_0000);
    assert_eq!(ev("brev.b64", &[0b110]), 0x6000_0000_0000_0000);
    assert_eq!(ev("bfind.u32", &[0x0001_0000]), 16);
    assert_eq!(ev("bfind.u32", &[0]), 0xffff_ffff);
    assert_eq!(ev("bfind.shiftamt.u32", &[0x0001_0000]), 15);
    assert_eq!(ev("bfind.shiftamt.u32", &[0]), 0xffff_ffff);
    assert_eq!(ev("bfind.s32", &[i(-1)]), 0xffff_ffff);
    assert_eq!(ev("bfind.s32", &[i(-2)]), 0);
    assert_eq!(ev("bfind.s64", &[i64::MIN as u64]), 62);
}

#[test]
fn bit_fields() {
    // bfe: PTX ISA pseudocode.
    assert_eq!(ev("bfe.u32", &[0xabcd_1234, 8, 8]), 0x12);
    assert_eq!(ev("bfe.s32", &[0x0000_8000, 8, 8]), 0xffff_ff80);
    assert_eq!(ev("bfe.s32", &[0x0000_7000, 8, 8]), 0x70);
    assert_eq!(ev("bfe.u32", &[0xffff_ffff, 28, 8]), 0xf); // field clipped at bit 31
    assert_eq!(ev("bfe.s32", &[0x8000_0000, 28, 8]), 0xffff_fff8); // sign from bit 31
    assert_eq!(ev("bfe.s32", &[0xffff_ffff, 0, 0]), 0); // len 0
    assert_eq!(ev("bfe.u64", &[0xdead_beef_0000_0000, 32, 16]), 0xbeef);
    assert_eq!(ev("bfe.u32", &[0x1234, 0x104, 0x108]), 0x23); // only the low 8 bits count
                                                              // bfi: insert a's low d bits into b at c.
    assert_eq!(ev("bfi.b32", &[0xff, 0x1234_5678, 8, 8]), 0x1234_ff78);
    assert_eq!(ev("bfi.b32", &[0xff, 0, 28, 8]), 0xf000_0000);
    assert_eq!(ev("bfi.b64", &[1, 0, 63, 1]), 1 << 63);
    assert_eq!(ev("bfi.b32", &[0xff, 7, 4, 0]), 7);
}

#[test]
fn prmt_default_and_modes() {
    // PTX ISA: default mode picks bytes of {b, a} by nibble; bit 3 replicates the sign.
    let (a, b) = (0x4433_2211u64, 0x8877_6655u64);
    assert_eq!(ev("prmt.b32", &[a, b, 0x3210]), a);
    assert_eq!(ev("prmt.b32", &[a, b, 0x7654]), b);
    assert_eq!(ev("prmt.b32", &[a, b, 0x0123]), 0x1122_3344);
    assert_eq!(ev("prmt.b32", &[a, b, 0x5140]), 0x6622_5511);
    assert_eq!(ev("prmt.b32", &[a, b, 0x000f]), 0x1111_11ff); // byte 7 = 0x88: sign set
    assert_eq!(ev("prmt.b32", &[a, b, 0x0008]), 0x1111_1100); // byte 0 = 0x11: sign clear
                                                              // Modes use c[1:0].
    assert_eq!(ev("prmt.b32.f4e", &[a, b, 1]), 0x5544_3322);
    assert_eq!(ev("prmt.b32.b4e", &[a, b, 0]), 0x6677_8811);
    assert_eq!(ev("prmt.b32.b4e", &[a, b, 3]), 0x1122_3344);
    assert_eq!(ev("prmt.b32.rc8", &[a, b, 2]), 0x3333_3333);
    assert_eq!(ev("prmt.b32.ecl", &[a, b, 1]), 0x4433_2222);
    assert_eq!(ev("prmt.b32.ecr", &[a, b, 2]), 0x3333_2211);
    assert_eq!(ev("prmt.b32.rc16", &[a, b, 1]), 0x4433_4433);
}

#[test]
fn logic_lop3_shifts() {
    assert_eq!(ev("and.pred", &[1, 0]), 0);
    assert_eq!(ev("or.pred", &[1, 0]), 1);
    assert_eq!(ev("xor.pred", &[1, 1]), 0);
    assert_eq!(ev("not.pred", &[1]), 0);
    assert_eq!(ev("not.pred", &[0]), 1);
    assert_eq!(ev("not.b16", &[0x00ff]), 0xff00);
    assert_eq!(ev("cnot.b32", &[0]), 1);
    assert_eq!(ev("cnot.b32", &[7]), 0);
    assert_eq!(ev("and.b16", &[0xff0f, 0x0ff0]), 0x0f00);
    // lop3: the LUT is F(0xF0, 0xCC, 0xAA).
    let (a, b, c) = (0xf0f0_1234u64, 0xcccc_5678u64, 0xaaaa_9abcu64);
    assert_eq!(ev("lop3.b32", &[a, b, c, 0x80]), a & b & c);
    assert_eq!(ev("lop3.b32", &[a, b, c, 0xfe]), a | b | c);
    assert_eq!(ev("lop3.b32", &[a, b, c, 0x96]), a ^ b ^ c);
    assert_eq!(ev("lop3.b32", &[a, b, c, 0xf0]), a);
    assert_eq!(
        ev("lop3.b32", &[a, b, c, 0xca]),
        (a & b) | (!a & c) & 0xffff_ffff
    );
    // Shifts clamp.
    assert_eq!(ev("shl.b32", &[1, 31]), 0x8000_0000);
    assert_eq!(ev("shl.b32", &[1, 32]), 0);
    assert_eq!(ev("shl.b64", &[1, 1000]), 0);
    assert_eq!(ev("shr.u32", &[0x8000_0000, 40]), 0);
    assert_eq!(ev("shr.s32", &[0x8000_0000, 40]), 0xffff_ffff);
    assert_eq!(ev("shr.s32", &[0x8000_0000, 4]), 0xf800_0000);
    assert_eq!(ev("shr.s16", &[0x8000, 3]), 0xf000);
    assert_eq!(ev("shr.u64", &[u64::MAX, 63]), 1);
    // Funnel shifts of {b, a}.
    let (lo, hi) = (0x1234_5678u64, 0x9abc_def0u64);
    assert_eq!(ev("shf.l.wrap.b32", &[lo, hi, 8]), 0xbcde_f012);
    assert_eq!(ev("shf.l.wrap.b32", &[lo, hi, 40]), 0xbcde_f012);
    assert_eq!(ev("shf.l.clamp.b32", &[lo, hi, 40]), lo);
    assert_eq!(ev("shf.r.wrap.b32", &[lo, hi, 8]), 0xf012_3456);
    assert_eq!(ev("shf.r.clamp.b32", &[lo, hi, 32]), hi);
    assert_eq!(ev("shf.r.wrap.b32", &[lo, hi, 0]), lo);
}

#[test]
fn fns_dp4a_dp2a() {
    // fns: n-th set bit from base.
    let mask = 0b1011_0100u64;
    assert_eq!(ev("fns.b32", &[mask, 0, 1]), 2);
    assert_eq!(ev("fns.b32", &[mask, 0, 2]), 4);
    assert_eq!(ev("fns.b32", &[mask, 0, 4]), 7);
    assert_eq!(ev("fns.b32", &[mask, 0, 5]), 0xffff_ffff);
    assert_eq!(ev("fns.b32", &[mask, 7, i(-2)]), 5);
    assert_eq!(ev("fns.b32", &[mask, 4, 0]), 4);
    assert_eq!(ev("fns.b32", &[mask, 3, 0]), 0xffff_ffff);
    // dp4a: c + Σ a.byte·b.byte.
    assert_eq!(ev("dp4a.u32.u32", &[0x0102_0304, 0x0101_0101, 10]), 20);
    assert_eq!(
        ev("dp4a.s32.s32", &[0xff02_0304, 0x0101_01ff, 0]),
        i(-1 + 2 + 3 - 4)
    );
    assert_eq!(ev("dp4a.s32.u32", &[0x0000_00ff, 0x0000_00ff, 0]), i(-255));
    // dp2a: a's halves times b's bytes 0-1 (.lo) or 2-3 (.hi).
    assert_eq!(
        ev("dp2a.lo.u32.u32", &[0x0002_0003, 0x0506_0708, 1]),
        1 + 3 * 8 + 2 * 7
    );
    assert_eq!(
        ev("dp2a.hi.s32.s32", &[0xffff_0003, 0x0506_0708, 0]),
        i(3 * 6 - 5)
    );
}

// ---- selection and comparison ------------------------------------------------------------------------

#[test]
fn selp_slct_setp_set() {
    assert_eq!(ev("selp.b32", &[1, 2, 1]), 1);
    assert_eq!(ev("selp.f64", &[d(1.0), d(2.0), 0]), d(2.0));
    assert_eq!(ev("slct.s32.s32", &[1, 2, i(-1)]), 2);
    assert_eq!(ev("slct.s32.s32", &[1, 2, 0]), 1);
    assert_eq!(ev("slct.u32.f32", &[1, 2, f(-0.0)]), 1);
    assert_eq!(ev("slct.u32.f32", &[1, 2, f(f32::NAN)]), 2);
    assert_eq!(ev("slct.ftz.u32.f32", &[1, 2, 0x8000_0001]), 1);
    assert_eq!(ev("slct.u32.f32", &[1, 2, 0x8000_0001]), 2);

    let r = eval_c("setp.lt.s32", &[i(-1), 0], false);
    assert_eq!((r.value, r.second), (1, false));
    assert_eq!(ev("setp.lt.u32", &[i(-1), 0]), 0);
    assert_eq!(ev("setp.lo.u32", &[1, 2]), 1);
    assert_eq!(ev("setp.hs.u64", &[2, 2]), 1);
    assert_eq!(ev("setp.eq.b16", &[0x1_0005, 5]), 1); // upper bits ignored
    assert_eq!(ev("setp.ne.s16", &[0xffff, u64::MAX]), 0);
    // .and/.or/.xor with a predicate; q is the combination of the complement.
    let r = eval_c("setp.lt.and.s32", &[1, 2, 0], false);
    assert_eq!((r.value, r.second), (0, false));
    let r = eval_c("setp.lt.or.s32", &[3, 2, 1], false);
    assert_eq!((r.value, r.second), (1, true));
    let r = eval_c("setp.lt.xor.s32", &[1, 2, 1], false);
    assert_eq!((r.value, r.second), (0, true));
    // Floats: ordered vs unordered, -0 == +0.
    let nan = f(f32::NAN);
    assert_eq!(ev("setp.lt.f32", &[nan, f(1.0)]), 0);
    assert_eq!(ev("setp.ltu.f32", &[nan, f(1.0)]), 1);
    assert_eq!(ev("setp.ne.f32", &[nan, f(1.0)]), 0);
    assert_eq!(ev("setp.neu.f32", &[nan, f(1.0)]), 1);
    assert_eq!(ev("setp.eq.f32", &[f(-0.0), f(0.0)]), 1);
    assert_eq!(ev("setp.num.f64", &[d(1.0), d(2.0)]), 1);
    assert_eq!(ev("setp.nan.f64", &[d(1.0), d(f64::NAN)]), 1);
    assert_eq!(ev("setp.geu.f64", &[d(1.0), d(2.0)]), 0);
    assert_eq!(ev("setp.gt.f16", &[0x4000, 0x3c00]), 1); // 2 > 1
                                                         // set: integer all-ones or f32 1.0.
    assert_eq!(ev("set.lt.u32.s32", &[i(-1), 0]), 0xffff_ffff);
    assert_eq!(ev("set.lt.f32.s32", &[i(-1), 0]), f(1.0));
    assert_eq!(ev("set.gt.f32.f32", &[f(-1.0), 0]), 0);
}

#[test]
fn testp_and_copysign() {
    let cases: [(f32, [u64; 6]); 6] = [
        // finite infinite number notanumber normal subnormal
        (1.0, [1, 0, 1, 0, 1, 0]),
        (0.0, [1, 0, 1, 0, 0, 0]),
        (f32::from_bits(1), [1, 0, 1, 0, 0, 1]),
        (f32::INFINITY, [0, 1, 1, 0, 0, 0]),
        (f32::NEG_INFINITY, [0, 1, 1, 0, 0, 0]),
        (f32::NAN, [0, 0, 0, 1, 0, 0]),
    ];
    for (x, expected) in cases {
        for (class, want) in [
            "finite",
            "infinite",
            "number",
            "notanumber",
            "normal",
            "subnormal",
        ]
        .iter()
        .zip(expected)
        {
            assert_eq!(
                ev(&format!("testp.{class}.f32"), &[f(x)]),
                want,
                "{class} {x}"
            );
            // The f32 subnormal is normal as f64: use the f64 least subnormal instead.
            let x64 = if x == f32::from_bits(1) {
                f64::from_bits(1)
            } else {
                x as f64
            };
            assert_eq!(
                ev(&format!("testp.{class}.f64"), &[d(x64)]),
                want,
                "{class} {x}"
            );
        }
    }
    // copysign: the sign of a onto b.
    assert_eq!(ev("copysign.f32", &[f(-1.0), f(2.5)]), f(-2.5));
    assert_eq!(ev("copysign.f64", &[d(1.0), d(-2.5)]), d(2.5));
}

// ---- floating point -------------------------------------------------------------------------------------

#[test]
fn float_basic_and_ieee_corners() {
    assert_eq!(ev("add.f32", &[f(1.5), f(2.25)]), f(3.75));
    assert_eq!(ev("sub.rn.f64", &[d(1.0), d(0.25)]), d(0.75));
    assert_eq!(ev("mul.rn.f32", &[f(3.0), f(-2.0)]), f(-6.0));
    assert_eq!(ev("div.rn.f64", &[d(1.0), d(3.0)]), d(1.0 / 3.0));
    assert_eq!(ev("div.rn.f32", &[f(1.0), f(0.0)]), f(f32::INFINITY));
    assert_eq!(ev("div.rn.f32", &[f(0.0), f(0.0)]), 0x7fff_ffff); // canonical NaN
    assert_eq!(
        ev("add.f32", &[f(f32::INFINITY), f(f32::NEG_INFINITY)]),
        0x7fff_ffff
    );
    assert_eq!(ev("add.rn.f32", &[f(-0.0), f(-0.0)]), f(-0.0));
    assert_eq!(ev("add.rn.f32", &[f(1.0), f(-1.0)]), f(0.0));
    assert_eq!(ev("add.rm.f32", &[f(1.0), f(-1.0)]), f(-0.0));
    assert_eq!(ev("sqrt.rn.f32", &[f(-0.0)]), f(-0.0));
    assert_eq!(ev("sqrt.rn.f64", &[d(2.0)]), d(2f64.sqrt()));
    assert_eq!(ev("rcp.rn.f64", &[d(3.0)]), d(1.0 / 3.0));
    assert_eq!(ev("rcp.rn.f32", &[f(-0.0)]), f(f32::NEG_INFINITY));
    assert_eq!(ev("abs.f32", &[f(-2.0)]), f(2.0));
    assert_eq!(ev("neg.f64", &[d(2.0)]), d(-2.0));
    assert_eq!(ev("neg.f32", &[f(0.0)]), f(-0.0));
    // fma is fused: (1 + 2^-12)² - 1 keeps the 2^-24 term that an unfused product loses.
    let x = 1.0 + 2f32.powi(-12);
    assert_eq!(
        ff(ev("fma.rn.f32", &[f(x), f(x), f(-1.0)])),
        2f32.powi(-11) + 2f32.powi(-24)
    );
    assert_eq!(
        ff(ev("mad.f32", &[f(x), f(x), f(-1.0)])),
        2f32.powi(-11) + 2f32.powi(-24)
    );
    assert_eq!(
        ff(ev("mad.rn.f32", &[f(x), f(x), f(-1.0)])),
        2f32.powi(-11) + 2f32.powi(-24)
    );
}

#[test]
fn ftz_and_saturation() {
    let sub = 0x0000_0001u64; // least positive subnormal f32
    let nsub = 0x8000_0001u64;
    assert_eq!(ev("add.f32", &[sub, sub]), 2);
    assert_eq!(ev("add.ftz.f32", &[sub, sub]), 0);
    assert_eq!(ev("mul.ftz.f32", &[nsub, f(1.0)]), f(-0.0));
    // Output flush: 2^-126 · 0.5 is subnormal.
    assert_eq!(
        ev("mul.rn.f32", &[f(f32::MIN_POSITIVE), f(0.5)]),
        0x0040_0000
    );
    assert_eq!(ev("mul.rn.ftz.f32", &[f(f32::MIN_POSITIVE), f(0.5)]), 0);
    assert_eq!(
        ev("mul.rn.ftz.f32", &[f(-f32::MIN_POSITIVE), f(0.5)]),
        f(-0.0)
    );
    // .sat clamps to [0, 1]; NaN → 0.
    assert_eq!(ev("add.sat.f32", &[f(0.75), f(0.5)]), f(1.0));
    assert_eq!(ev("add.sat.f32", &[f(-0.75), f(0.5)]), f(0.0));
    assert_eq!(ev("mul.sat.f32", &[f(f32::INFINITY), f(0.0)]), f(0.0));
    assert_eq!(ev("fma.rn.sat.f32", &[f(0.5), f(0.5), f(0.0)]), f(0.25));
    assert_eq!(ev("cvt.sat.f32.f32", &[f(1.5)]), f(1.0));
    assert_eq!(ev("cvt.sat.f32.f32", &[f(f32::NAN)]), f(0.0));
    assert_eq!(ev("cvt.ftz.f32.f32", &[nsub]), f(-0.0));
    assert_eq!(ev("cvt.f32.f32", &[nsub]), nsub);
}

#[test]
fn min_max_nan_rules() {
    let nan = f(f32::NAN);
    assert_eq!(ev("min.f32", &[nan, f(1.0)]), f(1.0));
    assert_eq!(ev("max.f32", &[f(1.0), nan]), f(1.0));
    assert_eq!(ev("max.f32", &[nan, nan]), 0x7fff_ffff);
    assert_eq!(ev("min.NaN.f32", &[nan, f(1.0)]), 0x7fff_ffff);
    assert_eq!(ev("min.f32", &[f(0.0), f(-0.0)]), f(-0.0));
    assert_eq!(ev("max.f32", &[f(-0.0), f(0.0)]), f(0.0));
    assert_eq!(ev("max.f64", &[d(-3.0), d(2.0)]), d(2.0));
    assert_eq!(ev("min.ftz.f32", &[0x8000_0001, f(0.0)]), f(-0.0));
    assert_eq!(ev("max.f16", &[0x7e00, 0x3c00]), 0x3c00);
}

#[test]
fn directed_rounding_known_values() {
    // 1/3: RN rounds up (0x3eaaaaab), so RZ and RM give 0x3eaaaaaa.
    assert_eq!(ev("div.rz.f32", &[f(1.0), f(3.0)]), 0x3eaa_aaaa);
    assert_eq!(ev("div.rm.f32", &[f(1.0), f(3.0)]), 0x3eaa_aaaa);
    assert_eq!(ev("div.rp.f32", &[f(1.0), f(3.0)]), 0x3eaa_aaab);
    assert_eq!(ev("rcp.rz.f64", &[d(3.0)]), 0x3fd5_5555_5555_5555);
    assert_eq!(ev("rcp.rp.f64", &[d(3.0)]), 0x3fd5_5555_5555_5556);
    // 1 + 2^-30 in f32.
    let t = f(2f32.powi(-30));
    assert_eq!(ev("add.rz.f32", &[f(1.0), t]), f(1.0));
    assert_eq!(ev("add.rp.f32", &[f(1.0), t]), 0x3f80_0001);
    assert_eq!(ev("sub.rm.f32", &[f(1.0), t]), 0x3f7f_ffff);
    assert_eq!(ev("fma.rm.f32", &[f(1.0), t, f(1.0)]), f(1.0));
    assert_eq!(ev("fma.rp.f32", &[f(1.0), t, f(1.0)]), 0x3f80_0001);
    assert_eq!(
        ev("fma.rz.f64", &[d(-1e-300), d(1e-300), d(1.0)]),
        d(1.0).wrapping_sub(1)
    );
    // sqrt(2) = 1.41421356…; RN 0x3fb504f3 = 1.41421353… is below it.
    assert_eq!(ev("sqrt.rn.f32", &[f(2.0)]), 0x3fb5_04f3);
    assert_eq!(ev("sqrt.rp.f32", &[f(2.0)]), 0x3fb5_04f4);
    assert_eq!(ev("sqrt.rz.f32", &[f(2.0)]), 0x3fb5_04f3);
    assert_eq!(ev("mul.rz.f32", &[f(f32::MAX), f(2.0)]), f(f32::MAX));
    assert_eq!(ev("mul.rp.f32", &[f(f32::MAX), f(2.0)]), f(f32::INFINITY));
    assert_eq!(ev("mul.rm.f32", &[f(1e-30), f(-1e-30)]), 0x8000_0001);
    assert_eq!(ev("mul.rp.f32", &[f(1e-30), f(-1e-30)]), f(-0.0));
}

#[test]
fn approximate_functions_are_close() {
    let ulps = |got: u64, want: f64| {
        let w = want as f32;
        (ff(got).to_bits() as i64 - w.to_bits() as i64).unsigned_abs()
    };
    for x in [-10.5f32, -1.0, 0.0, 0.3, 1.0, 3.7, 20.0] {
        assert!(
            ulps(ev("ex2.approx.ftz.f32", &[f(x)]), (x as f64).exp2()) <= 1,
            "ex2 {x}"
        );
        assert!(
            ulps(ev("ex2.approx.f32", &[f(x)]), (x as f64).exp2()) <= 1,
            "ex2 {x}"
        );
        assert!((ff(ev("sin.approx.f32", &[f(x)])) as f64 - (x as f64).sin()).abs() < 1e-6);
        assert!((ff(ev("cos.approx.ftz.f32", &[f(x)])) as f64 - (x as f64).cos()).abs() < 1e-6);
        assert!((ff(ev("tanh.approx.f32", &[f(x)])) as f64 - (x as f64).tanh()).abs() < 1e-6);
    }
    for x in [0.001f32, 0.5, 1.0, 2.0, 1e10] {
        assert!(
            ulps(ev("lg2.approx.f32", &[f(x)]), (x as f64).log2()) <= 1,
            "lg2 {x}"
        );
        assert!(ulps(ev("rsqrt.approx.f32", &[f(x)]), 1.0 / (x as f64).sqrt()) <= 1);
        assert!(ulps(ev("rcp.approx.f32", &[f(x)]), 1.0 / x as f64) <= 1);
        assert!(ulps(ev("sqrt.approx.f32", &[f(x)]), (x as f64).sqrt()) <= 1);
        assert!(ulps(ev("div.approx.f32", &[f(1.0), f(x)]), 1.0 / x as f64) <= 1);
        assert!(ulps(ev("div.full.f32", &[f(3.0), f(x)]), 3.0 / x as f64) <= 1);
    }
    assert_eq!(ev("lg2.approx.f32", &[f(0.0)]), f(f32::NEG_INFINITY));
    assert_eq!(ev("lg2.approx.f32", &[f(-1.0)]), 0x7fff_ffff);
    assert_eq!(ev("ex2.approx.f32", &[f(f32::NEG_INFINITY)]), f(0.0));
    assert_eq!(ev("rsqrt.approx.f32", &[f(-0.0)]), f(f32::NEG_INFINITY));
    assert_eq!(ev("rsqrt.approx.f64", &[d(4.0)]), d(0.5));
    assert_eq!(ev("rcp.approx.ftz.f64", &[d(4.0)]), d(0.25));
    // ftz: a subnormal input is zero.
    assert_eq!(ev("rcp.approx.ftz.f32", &[1]), f(f32::INFINITY));
}

// ---- conversions ------------------------------------------------------------------------------------------

#[test]
fn integer_conversions() {
    assert_eq!(ev("cvt.s64.s32", &[i(-2)]), (-2i64) as u64);
    assert_eq!(ev("cvt.u64.u32", &[0xffff_ffff]), 0xffff_ffff);
    assert_eq!(ev("cvt.u64.s32", &[i(-1)]), u64::MAX);
    assert_eq!(ev("cvt.s64.u32", &[0xffff_ffff]), 0xffff_ffff);
    assert_eq!(ev("cvt.u32.u64", &[0x1_2345_6789]), 0x2345_6789);
    assert_eq!(ev("cvt.u16.u32", &[0x1_2345]), 0x2345);
    assert_eq!(ev("cvt.s32.s16", &[0x8000]), i(-32768));
    assert_eq!(ev("cvt.u8.u32", &[0x1ff]), 0xff);
    assert_eq!(ev("cvt.s8.s32", &[0xff]), u64::MAX); // 8-bit signed: sign-extended
    assert_eq!(ev("cvt.sat.u8.s32", &[i(300)]), 0xff);
    assert_eq!(ev("cvt.sat.u8.s32", &[i(-3)]), 0);
    assert_eq!(ev("cvt.sat.s16.s32", &[i(-40000)]), 0x8000);
    assert_eq!(ev("cvt.sat.u32.s64", &[u64::MAX]), 0);
    assert_eq!(ev("cvt.sat.s32.u32", &[0xffff_ffff]), i(i32::MAX));
}

#[test]
fn float_integer_conversions() {
    assert_eq!(ev("cvt.rn.f32.s32", &[i(-3)]), f(-3.0));
    assert_eq!(ev("cvt.rn.f32.u32", &[0xffff_ffff]), f(4294967296.0));
    assert_eq!(ev("cvt.rz.f32.u32", &[0xffff_ffff]), f(4294967040.0));
    assert_eq!(ev("cvt.rn.f32.s32", &[i(16_777_217)]), f(16_777_216.0)); // tie to even
    assert_eq!(ev("cvt.rp.f32.s32", &[i(16_777_217)]), f(16_777_218.0));
    assert_eq!(ev("cvt.rm.f32.s32", &[i(-16_777_217)]), f(-16_777_218.0));
    assert_eq!(
        ev("cvt.rn.f64.s64", &[i64::MIN as u64]),
        d(-(2f64.powi(63)))
    );
    assert_eq!(ev("cvt.rn.f64.u64", &[u64::MAX]), d(18446744073709551616.0));
    assert_eq!(ev("cvt.rz.f64.u64", &[u64::MAX]), d(18446744073709549568.0));
    assert_eq!(ev("cvt.rn.f16.s32", &[i(70000)]), 0x7c00);
    assert_eq!(ev("cvt.rz.f16.s32", &[i(70000)]), 0x7bff);
    // float → int: rounding, saturation, NaN → 0.
    assert_eq!(ev("cvt.rni.s32.f32", &[f(2.5)]), 2);
    assert_eq!(ev("cvt.rni.s32.f32", &[f(3.5)]), 4);
    assert_eq!(ev("cvt.rni.s32.f64", &[d(-2.5)]), i(-2));
    assert_eq!(ev("cvt.rzi.s32.f32", &[f(-2.7)]), i(-2));
    assert_eq!(ev("cvt.rmi.s32.f32", &[f(-2.2)]), i(-3));
    assert_eq!(ev("cvt.rpi.s32.f32", &[f(2.2)]), 3);
    assert_eq!(ev("cvt.rzi.s32.f32", &[f(3e9)]), i(i32::MAX));
    assert_eq!(ev("cvt.rzi.s32.f32", &[f(-3e9)]), i(i32::MIN));
    assert_eq!(ev("cvt.rzi.u32.f32", &[f(-1.0)]), 0);
    assert_eq!(ev("cvt.rzi.s32.f32", &[f(f32::NAN)]), 0);
    assert_eq!(ev("cvt.rzi.u64.f64", &[d(1e30)]), u64::MAX);
    assert_eq!(
        ev("cvt.rzi.s64.f64", &[d(f64::NEG_INFINITY)]),
        i64::MIN as u64
    );
    assert_eq!(ev("cvt.rzi.s16.f32", &[f(40000.0)]), 0x7fff);
    assert_eq!(ev("cvt.rni.s32.f16", &[0x3e00]), 2); // 1.5 → 2
                                                     // ftz changes a round-down of a negative subnormal.
    assert_eq!(ev("cvt.rmi.s32.f32", &[0x8000_0001]), i(-1));
    assert_eq!(ev("cvt.rmi.ftz.s32.f32", &[0x8000_0001]), 0);
}

#[test]
fn float_float_conversions() {
    assert_eq!(ev("cvt.f64.f32", &[f(0.1)]), d(0.1f32 as f64));
    assert_eq!(ev("cvt.rn.f32.f64", &[d(0.1)]), f(0.1));
    assert_eq!(ev("cvt.rz.f32.f64", &[d(0.1)]), 0x3dcc_cccc);
    assert_eq!(ev("cvt.rp.f32.f64", &[d(0.1)]), 0x3dcc_cccd);
    assert_eq!(ev("cvt.rn.f32.f64", &[d(1e300)]), f(f32::INFINITY));
    assert_eq!(ev("cvt.rz.f32.f64", &[d(1e300)]), f(f32::MAX));
    assert_eq!(ev("cvt.rn.f32.f64", &[d(f64::NAN)]), 0x7fff_ffff);
    assert_eq!(ev("cvt.rn.ftz.f32.f64", &[d(1e-40)]), 0);
    assert_eq!(ev("cvt.rn.f32.f64", &[d(1e-40)]), f(1e-40));
    // Integral rounding within a format.
    assert_eq!(ev("cvt.rni.f32.f32", &[f(2.5)]), f(2.0));
    assert_eq!(ev("cvt.rzi.f32.f32", &[f(-0.5)]), f(-0.0));
    assert_eq!(ev("cvt.rmi.f64.f64", &[d(-0.5)]), d(-1.0));
    assert_eq!(ev("cvt.rpi.f64.f64", &[d(0.25)]), d(1.0));
    // f16 and bf16.
    assert_eq!(ev("cvt.f32.f16", &[0x3c00]), f(1.0));
    assert_eq!(ev("cvt.f32.f16", &[0x0001]), f(2f32.powi(-24)));
    assert_eq!(ev("cvt.f32.f16", &[0xfc00]), f(f32::NEG_INFINITY));
    assert_eq!(ev("cvt.f32.f16", &[0x7e00]), 0x7fff_ffff);
    assert_eq!(ev("cvt.f64.f16", &[0xc000]), d(-2.0));
    assert_eq!(ev("cvt.rn.f16.f32", &[f(1.0)]), 0x3c00);
    assert_eq!(ev("cvt.rn.f16.f32", &[f(65504.0)]), 0x7bff);
    assert_eq!(ev("cvt.rn.f16.f32", &[f(65520.0)]), 0x7c00); // the tie above MAX: infinity
    assert_eq!(ev("cvt.rz.f16.f32", &[f(1e9)]), 0x7bff);
    assert_eq!(ev("cvt.rn.f16.f32", &[f(2f32.powi(-25))]), 0); // half the least subnormal: even
    assert_eq!(ev("cvt.rp.f16.f32", &[f(2f32.powi(-40))]), 1);
    assert_eq!(
        ev(
            "cvt.rn.f16.f64",
            &[d(1.0 + 2f64.powi(-11) + 2f64.powi(-40))]
        ),
        0x3c01
    );
    assert_eq!(ev("cvt.rn.relu.f16.f32", &[f(-3.0)]), 0);
    assert_eq!(ev("cvt.rn.bf16.f32", &[f(1.0)]), 0x3f80);
    assert_eq!(ev("cvt.rn.bf16.f32", &[0x3f80_8000]), 0x3f80); // tie to even
    assert_eq!(ev("cvt.rn.bf16.f32", &[0x3f81_8000]), 0x3f82);
    assert_eq!(ev("cvt.f32.bf16", &[0x4049]), 0x4049_0000);
    // Packing: a into the upper half.
    assert_eq!(ev("cvt.rn.f16x2.f32", &[f(1.0), f(2.0)]), 0x3c00_4000);
    assert_eq!(ev("cvt.rn.bf16x2.f32", &[f(1.0), f(-2.0)]), 0x3f80_c000);
}

#[test]
fn f16_arithmetic() {
    let one = 0x3c00u64;
    let two = 0x4000u64;
    assert_eq!(ev("add.rn.f16", &[one, two]), 0x4200);
    assert_eq!(ev("add.f16", &[one, two]), 0x4200);
    assert_eq!(ev("sub.rn.f16", &[one, two]), 0xbc00);
    assert_eq!(ev("mul.rn.f16", &[two, two]), 0x4400);
    assert_eq!(ev("fma.rn.f16", &[two, two, one]), 0x4500);
    assert_eq!(ev("neg.f16", &[one]), 0xbc00);
    assert_eq!(ev("abs.f16", &[0xbc00]), one);
    assert_eq!(ev("min.f16", &[one, two]), one);
    // f16x2: lanes independent.
    assert_eq!(
        ev("add.rn.f16x2", &[(two << 16) | one, (one << 16) | one]),
        0x4200_4000
    );
    assert_eq!(
        ev("mul.rn.f16x2", &[(two << 16) | one, (two << 16) | two]),
        0x4400_4000
    );
    assert_eq!(
        ev(
            "fma.rn.f16x2",
            &[(two << 16) | one, (one << 16) | one, (one << 16) | one]
        ),
        0x4200_4000
    );
    assert_eq!(ev("neg.f16x2", &[(two << 16) | one]), 0xc000_bc00);
    assert_eq!(
        ev("max.f16x2", &[(two << 16) | one, (one << 16) | two]),
        0x4000_4000
    );
}
