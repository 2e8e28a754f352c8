//! Extern functions a CUDA program calls that the engine provides: `vprintf` (device
//! `printf`), `__assertfail` (device `assert`), `malloc` and `free` (device heap).

use std::io::Write;

use crate::decode::{Builtin, CallInst};
use crate::exec::Exec;
use crate::memory;
use crate::SimError;

/// Longest string a kernel may hand to `printf` or `assert`.
const MAX_STRING: u64 = 1 << 16;

/// Runs `builtin` for one lane.
pub(crate) fn call(
    exec: &mut Exec<'_, '_>,
    pc: u32,
    builtin: Builtin,
    call: &CallInst,
    lane: usize,
) -> Result<(), SimError> {
    let arg = |exec: &Exec<'_, '_>, i: usize| -> u64 {
        call.args.get(i).map_or(0, |slot| exec.argument(slot, lane))
    };
    match builtin {
        Builtin::Vprintf => {
            let format = read_string(exec, pc, arg(exec, 0), lane)?;
            let args = arg(exec, 1);
            let text = format_printf(exec, pc, &format, args, lane)?;
            let mut out = std::io::stdout().lock();
            // A closed stdout must not fail the kernel, as on a GPU.
            let _ = out.write_all(&text);
            let _ = out.flush();
            if let Some(ret) = call.rets.first() {
                exec.set_result(ret, lane, text.len() as u64);
            }
        }
        Builtin::AssertFail => {
            let message = read_string(exec, pc, arg(exec, 0), lane)?;
            let file = read_string(exec, pc, arg(exec, 1), lane)?;
            let line = arg(exec, 2) as u32;
            let function = read_string(exec, pc, arg(exec, 3), lane)?;
            let cta = exec.cta().ctaid;
            let thread = exec.thread(lane);
            return Err(SimError::Assertion(format!(
                "{}:{line}: {}: block: [{},{},{}], thread: [{},{},{}] Assertion `{}` failed.",
                String::from_utf8_lossy(&file),
                String::from_utf8_lossy(&function),
                cta[0],
                cta[1],
                cta[2],
                thread[0],
                thread[1],
                thread[2],
                String::from_utf8_lossy(&message),
            )));
        }
        Builtin::Malloc => {
            let size = arg(exec, 0);
            let address = exec.cta().launch.program.heap_alloc(size);
            if let Some(ret) = call.rets.first() {
                exec.set_result(ret, lane, address);
            }
        }
        Builtin::Free => {
            exec.cta().launch.program.heap_free(arg(exec, 0));
        }
    }
    Ok(())
}

/// Reads a NUL-terminated string at generic address `address`.
fn read_string(
    exec: &mut Exec<'_, '_>,
    pc: u32,
    address: u64,
    lane: usize,
) -> Result<Vec<u8>, SimError> {
    let mut bytes = Vec::new();
    for i in 0..MAX_STRING {
        let a = address.wrapping_add(i);
        if !exec.accessible(a, 1) {
            return Err(exec.invalid_address(pc, a, 1, lane));
        }
        // SAFETY: checked accessible above.
        let b = unsafe { memory::load(a, 1) } as u8;
        if b == 0 {
            return Ok(bytes);
        }
        bytes.push(b);
    }
    Ok(bytes)
}

/// One conversion of a format string.
#[derive(Default)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    alternate: bool,
    zero: bool,
    width: Option<usize>,
    precision: Option<usize>,
    long: bool,
}

/// Formats like C's `printf`, reading arguments from the buffer CUDA packs: each argument at
/// an offset aligned to its size, integers of `int` size as 4 bytes, `long`/pointers/doubles
/// (floats are promoted) as 8 bytes.
fn format_printf(
    exec: &mut Exec<'_, '_>,
    pc: u32,
    format: &[u8],
    args: u64,
    lane: usize,
) -> Result<Vec<u8>, SimError> {
    let mut out = Vec::new();
    let mut offset = 0u64;
    let mut next_arg = |exec: &mut Exec<'_, '_>, bytes: u64| -> Result<u64, SimError> {
        offset = offset.next_multiple_of(bytes);
        let a = args.wrapping_add(offset);
        offset += bytes;
        if !exec.accessible(a, bytes) {
            return Err(exec.invalid_address(pc, a, bytes, lane));
        }
        // SAFETY: checked accessible above.
        Ok(unsafe { memory::load(a, bytes as u8) })
    };
    let mut i = 0;
    while i < format.len() {
        let c = format[i];
        i += 1;
        if c != b'%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&f) = format.get(i) {
            match f {
                b'-' => spec.left = true,
                b'+' => spec.plus = true,
                b' ' => spec.space = true,
                b'#' => spec.alternate = true,
                b'0' => spec.zero = true,
                _ => break,
            }
            i += 1;
        }
        if format.get(i) == Some(&b'*') {
            i += 1;
            let w = next_arg(exec, 4)? as u32 as i32;
            if w < 0 {
                spec.left = true;
            }
            spec.width = Some(w.unsigned_abs() as usize);
        } else {
            spec.width = digits(format, &mut i);
        }
        if format.get(i) == Some(&b'.') {
            i += 1;
            if format.get(i) == Some(&b'*') {
                i += 1;
                let p = next_arg(exec, 4)? as u32 as i32;
                spec.precision = (p >= 0).then_some(p as usize);
            } else {
                spec.precision = Some(digits(format, &mut i).unwrap_or(0));
            }
        }
        while let Some(&m) = format.get(i) {
            match m {
                b'l' | b'z' | b'j' | b't' | b'L' | b'q' => spec.long = true,
                b'h' => {}
                _ => break,
            }
            i += 1;
        }
        let Some(&conversion) = format.get(i) else {
            out.push(b'%');
            break;
        };
        i += 1;
        let int_bytes = if spec.long { 8 } else { 4 };
        let body: Vec<u8> = match conversion {
            b'%' => {
                out.push(b'%');
                continue;
            }
            b'd' | b'i' => {
                let raw = next_arg(exec, int_bytes)?;
                let v = if spec.long {
                    raw as i64
                } else {
                    i64::from(raw as u32 as i32)
                };
                let digits = integer_digits(v.unsigned_abs(), 10, false, spec.precision);
                let sign = if v < 0 {
                    "-"
                } else if spec.plus {
                    "+"
                } else if spec.space {
                    " "
                } else {
                    ""
                };
                pad_number(sign, "", &digits, &spec, spec.precision.is_none())
            }
            b'u' | b'x' | b'X' | b'o' => {
                let raw = next_arg(exec, int_bytes)?;
                let v = if spec.long { raw } else { raw & 0xFFFF_FFFF };
                let (radix, upper) = match conversion {
                    b'x' => (16, false),
                    b'X' => (16, true),
                    b'o' => (8, false),
                    _ => (10, false),
                };
                let digits = integer_digits(v, radix, upper, spec.precision);
                let prefix = match conversion {
                    b'x' if spec.alternate && v != 0 => "0x",
                    b'X' if spec.alternate && v != 0 => "0X",
                    b'o' if spec.alternate && !digits.starts_with('0') => "0",
                    _ => "",
                };
                pad_number("", prefix, &digits, &spec, spec.precision.is_none())
            }
            b'c' => {
                let v = next_arg(exec, 4)? as u8;
                pad(&[v], &spec)
            }
            b's' => {
                let address = next_arg(exec, 8)?;
                let mut s = if address == 0 {
                    b"(null)".to_vec()
                } else {
                    read_string(exec, pc, address, lane)?
                };
                if let Some(p) = spec.precision {
                    s.truncate(p);
                }
                pad(&s, &spec)
            }
            b'p' => {
                let v = next_arg(exec, 8)?;
                pad(format!("{v:#x}").as_bytes(), &spec)
            }
            b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A' => {
                let v = f64::from_bits(next_arg(exec, 8)?);
                let text = format_float(v, conversion, &spec);
                let (sign, magnitude) = match text.strip_prefix('-') {
                    Some(rest) => ("-", rest.to_string()),
                    None if spec.plus => ("+", text),
                    None if spec.space => (" ", text),
                    None => ("", text),
                };
                pad_number(sign, "", &magnitude, &spec, v.is_finite())
            }
            other => {
                // Unknown conversions print as written, as glibc does.
                out.push(b'%');
                out.push(other);
                continue;
            }
        };
        out.extend_from_slice(&body);
    }
    Ok(out)
}

fn digits(format: &[u8], i: &mut usize) -> Option<usize> {
    let start = *i;
    while format.get(*i).is_some_and(u8::is_ascii_digit) {
        *i += 1;
    }
    std::str::from_utf8(&format[start..*i]).ok()?.parse().ok()
}

fn integer_digits(v: u64, radix: u32, upper: bool, precision: Option<usize>) -> String {
    let mut s = match radix {
        16 if upper => format!("{v:X}"),
        16 => format!("{v:x}"),
        8 => format!("{v:o}"),
        _ => v.to_string(),
    };
    if precision == Some(0) && v == 0 {
        s.clear();
    }
    if let Some(p) = precision {
        while s.len() < p {
            s.insert(0, '0');
        }
    }
    s
}

fn pad(body: &[u8], spec: &Spec) -> Vec<u8> {
    let width = spec.width.unwrap_or(0);
    let fill = width.saturating_sub(body.len());
    let mut out = Vec::with_capacity(body.len() + fill);
    if !spec.left {
        out.resize(fill, b' ');
    }
    out.extend_from_slice(body);
    if spec.left {
        out.resize(out.len() + fill, b' ');
    }
    out
}

fn pad_number(sign: &str, prefix: &str, digits: &str, spec: &Spec, zero_allowed: bool) -> Vec<u8> {
    let width = spec.width.unwrap_or(0);
    let len = sign.len() + prefix.len() + digits.len();
    if spec.zero && !spec.left && zero_allowed && len < width {
        let zeros = "0".repeat(width - len);
        return format!("{sign}{prefix}{zeros}{digits}").into_bytes();
    }
    pad(format!("{sign}{prefix}{digits}").as_bytes(), spec)
}

/// `%f`, `%e`, `%g`, `%a` of C, for finite and non-finite values.
fn format_float(v: f64, conversion: u8, spec: &Spec) -> String {
    let upper = conversion.is_ascii_uppercase();
    if !v.is_finite() {
        let s = if v.is_nan() {
            "nan"
        } else if v < 0.0 {
            "-inf"
        } else {
            "inf"
        };
        return if upper { s.to_uppercase() } else { s.into() };
    }
    let precision = spec.precision.unwrap_or(6);
    let s = match conversion.to_ascii_lowercase() {
        b'f' => {
            let s = format!("{v:.precision$}");
            if spec.alternate && precision == 0 {
                format!("{s}.")
            } else {
                s
            }
        }
        b'e' => exponent_form(v, precision, spec.alternate),
        b'a' => hex_float(v),
        _ => {
            // %g: the style of %e or %f depending on the exponent, trailing zeros removed.
            let p = if precision == 0 { 1 } else { precision };
            let e_form = format!("{v:.*e}", p - 1);
            let exponent: i32 = e_form
                .rsplit_once('e')
                .and_then(|(_, e)| e.parse().ok())
                .unwrap_or(0);
            let mut s = if exponent < -4 || exponent >= p as i32 {
                exponent_form(v, p - 1, spec.alternate)
            } else {
                let decimals = (p as i32 - 1 - exponent).max(0) as usize;
                format!("{v:.decimals$}")
            };
            if !spec.alternate {
                s = strip_trailing_zeros(&s);
            }
            s
        }
    };
    if upper {
        s.to_uppercase()
    } else {
        s
    }
}

fn exponent_form(v: f64, precision: usize, alternate: bool) -> String {
    let s = format!("{v:.precision$e}");
    let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if exponent < 0 { '-' } else { '+' };
    let dot = if alternate && precision == 0 { "." } else { "" };
    format!("{mantissa}{dot}e{sign}{:02}", exponent.unsigned_abs())
}

fn strip_trailing_zeros(s: &str) -> String {
    let (number, exponent) = match s.find('e') {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let number = if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    };
    format!("{number}{exponent}")
}

fn hex_float(v: f64) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0x0p+0"
        } else {
            "0x0p+0"
        }
        .into();
    }
    let bits = v.to_bits();
    let sign = if v < 0.0 { "-" } else { "" };
    let exponent = ((bits >> 52) & 0x7FF) as i64;
    let mantissa = bits & ((1 << 52) - 1);
    let (lead, exp) = if exponent == 0 {
        (0, -1022)
    } else {
        (1, exponent - 1023)
    };
    let mut m = format!("{mantissa:013x}");
    while m.ends_with('0') {
        m.pop();
    }
    let dot = if m.is_empty() { "" } else { "." };
    format!("{sign}0x{lead}{dot}{m}p{exp:+}")
}

/// IEEE binary16 to f32.
pub(crate) fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exponent = u32::from((bits >> 10) & 0x1F);
    let mantissa = u32::from(bits & 0x3FF);
    let out = match (exponent, mantissa) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalise.
            let shift = m.leading_zeros() - 21;
            let m = (m << shift) & 0x3FF;
            sign | ((127 - 15 + 1 - shift) << 23) | (m << 13)
        }
        (0x1F, m) => sign | 0x7F80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_like_c() {
        let spec = |precision: Option<usize>| Spec {
            precision,
            ..Spec::default()
        };
        assert_eq!(format_float(1.23456, b'f', &spec(None)), "1.234560");
        assert_eq!(format_float(1.23456, b'f', &spec(Some(2))), "1.23");
        assert_eq!(format_float(1234.5, b'e', &spec(None)), "1.234500e+03");
        assert_eq!(format_float(0.0001, b'g', &spec(None)), "0.0001");
        assert_eq!(format_float(0.00001, b'g', &spec(None)), "1e-05");
        assert_eq!(format_float(123456.0, b'g', &spec(None)), "123456");
        assert_eq!(format_float(1234567.0, b'g', &spec(None)), "1.23457e+06");
        assert_eq!(format_float(100.0, b'g', &spec(None)), "100");
        assert_eq!(format_float(1.0, b'a', &spec(None)), "0x1p+0");
        assert_eq!(format_float(f64::INFINITY, b'f', &spec(None)), "inf");
    }

    #[test]
    fn half_floats() {
        assert_eq!(f16_to_f32(0x3C00), 1.0);
        assert_eq!(f16_to_f32(0xC000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert!(f16_to_f32(0x7E00).is_nan());
    }

    #[test]
    fn integer_padding() {
        let spec = Spec {
            width: Some(5),
            zero: true,
            ..Spec::default()
        };
        assert_eq!(pad_number("-", "", "42", &spec, true), b"-0042");
        let spec = Spec {
            width: Some(4),
            left: true,
            ..Spec::default()
        };
        assert_eq!(pad(b"ab", &spec), b"ab  ");
        assert_eq!(integer_digits(255, 16, true, Some(4)), "00FF");
    }
}
