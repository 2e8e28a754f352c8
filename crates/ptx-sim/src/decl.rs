//! Variable declarations as written (`.global .align 4 .b8 table[16] = {...};`, `.param .b32
//! param0;`, `.local .align 8 .b8 __local_depot0[32];`): state space, element type, alignment,
//! dimensions and initializer. The lexer keeps these as text; the engine needs their layout.

use crate::alu::ValueKind;

/// The state space a declaration names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeclSpace {
    Global,
    Const,
    Shared,
    Local,
    Param,
    /// `.texref` (legacy texture reference), whatever space it is written in.
    Texref,
}

/// One element of an initializer list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum InitElement {
    /// A literal, parsed later with the element's kind.
    Literal(String),
    /// `sym`, `generic(sym)`, `sym+off`, `generic(sym)+off`: the address of a variable.
    Address { symbol: String, offset: i64 },
}

/// A parsed variable declaration.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VarDecl {
    pub space: DeclSpace,
    pub name: String,
    pub align: u64,
    /// Bytes of one element (vector width included).
    pub element_bytes: u64,
    /// Bytes of one scalar component: the unit of initializer elements.
    pub scalar_bytes: u64,
    /// How literals of the initializer parse.
    pub element_kind: ValueKind,
    /// Number of elements; `None` for an open_ended array (`name[]`).
    pub count: Option<u64>,
    pub external: bool,
    pub init: Option<Vec<InitElement>>,
}

impl VarDecl {
    /// Size in bytes (0 for an open_ended array).
    pub fn bytes(&self) -> u64 {
        self.element_bytes.saturating_mul(self.count.unwrap_or(0))
    }
}

/// The kind and byte size of a fundamental type modifier (without its dot).
pub(crate) fn type_of(modifier: &str) -> Option<(ValueKind, u64)> {
    Some(match modifier {
        "b8" | "u8" | "s8" => (ValueKind::Int { bits: 8 }, 1),
        "b16" | "u16" | "s16" => (ValueKind::Int { bits: 16 }, 2),
        "f16" | "bf16" => (ValueKind::F16, 2),
        "b32" | "u32" | "s32" | "f16x2" | "bf16x2" => (ValueKind::Int { bits: 32 }, 4),
        "b64" | "u64" | "s64" => (ValueKind::Int { bits: 64 }, 8),
        "f32" => (ValueKind::F32, 4),
        "f64" => (ValueKind::F64, 8),
        "pred" => (ValueKind::Pred, 1),
        _ => return None,
    })
}

/// Parses a declaration's text. `Err` names what is not understood.
pub(crate) fn parse_declaration(text: &str) -> Result<VarDecl, String> {
    let text = text.trim().trim_end_matches(';').trim();
    let (left, init_text) = match text.split_once('=') {
        Some((l, r)) => (l.trim(), Some(r.trim())),
        None => (text, None),
    };
    // Dimensions start at the first bracket; everything before is directives and the name.
    let (head, dims) = match left.find('[') {
        Some(i) => (&left[..i], &left[i..]),
        None => (left, ""),
    };
    let mut space = None;
    let mut align = None;
    let mut kind = None;
    let mut vector = 1u64;
    let mut external = false;
    let mut name = None;
    let mut words = head.split_whitespace();
    while let Some(word) = words.next() {
        if let Some(directive) = word.strip_prefix('.') {
            match directive {
                "global" => {
                    space.get_or_insert(DeclSpace::Global);
                }
                "const" => {
                    space.get_or_insert(DeclSpace::Const);
                }
                "shared" | "shared::cta" => {
                    space.get_or_insert(DeclSpace::Shared);
                }
                "local" => {
                    space.get_or_insert(DeclSpace::Local);
                }
                "param" => {
                    space.get_or_insert(DeclSpace::Param);
                }
                "texref" => space = Some(DeclSpace::Texref),
                "align" => {
                    let n = words.next().ok_or("`.align` without a value")?;
                    align = Some(n.parse::<u64>().map_err(|_| format!("alignment `{n}`"))?);
                }
                "v2" => vector = 2,
                "v4" => vector = 4,
                "extern" => external = true,
                "visible" | "weak" | "common" | "ptr" | "reg" => {}
                other => match type_of(other) {
                    Some(t) => kind = Some(t),
                    // `.param .u64 .ptr .global .align 8 p` names spaces after `.ptr`: the
                    // first space named is the declaration's own.
                    None => return Err(format!("declaration directive `.{other}`")),
                },
            }
        } else if name.is_none() {
            name = Some(word.to_string());
        } else {
            return Err(format!("unexpected `{word}` in a declaration"));
        }
    }
    let space = space.ok_or("declaration without a state space")?;
    let name = name.ok_or("declaration without a name")?;
    if space == DeclSpace::Texref {
        return Ok(VarDecl {
            space,
            name,
            align: 8,
            element_bytes: 8,
            scalar_bytes: 8,
            element_kind: ValueKind::Int { bits: 64 },
            count: Some(1),
            external,
            init: None,
        });
    }
    let (element_kind, type_bytes) = kind.ok_or_else(|| format!("`{name}` has no type"))?;
    let element_bytes = type_bytes * vector;
    let mut count = Some(1u64);
    let mut rest = dims.trim();
    let mut open_ended = false;
    while let Some(inner) = rest.strip_prefix('[') {
        let close = inner.find(']').ok_or("unclosed `[` in a declaration")?;
        let n = inner[..close].trim();
        if n.is_empty() {
            open_ended = true;
        } else {
            let n = parse_count(n).ok_or_else(|| format!("array length `{n}`"))?;
            count = count.and_then(|c| c.checked_mul(n));
        }
        rest = inner[close + 1..].trim();
    }
    if !rest.is_empty() {
        return Err(format!("unexpected `{rest}` after the dimensions"));
    }
    let init = init_text.map(parse_initializer).transpose()?;
    let count = match (open_ended, &init) {
        // `name[] = {..}` takes its length from the initializer.
        (true, Some(init)) => Some(init.len() as u64),
        // `extern .shared x[]`: sized at launch.
        (true, None) => None,
        (false, _) => Some(count.ok_or("array size overflows")?),
    };
    Ok(VarDecl {
        space,
        name,
        align: align.unwrap_or(element_bytes).max(1),
        element_bytes,
        scalar_bytes: type_bytes,
        element_kind,
        count,
        external,
        init,
    })
}

fn parse_count(text: &str) -> Option<u64> {
    crate::decode::parse_integer(text).map(|v| v as u64)
}

/// Flattens `{ {1, 2}, {3, 4} }` or a scalar into elements.
fn parse_initializer(text: &str) -> Result<Vec<InitElement>, String> {
    let flat: String = text.chars().filter(|c| *c != '{' && *c != '}').collect();
    let mut elements = Vec::new();
    for item in flat.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        elements.push(parse_element(item)?);
    }
    Ok(elements)
}

fn parse_element(item: &str) -> Result<InitElement, String> {
    let starts_like_symbol = item
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$');
    if !starts_like_symbol || item.starts_with("0f") || item.starts_with("0d") {
        if item.contains('(') {
            // `0xFF(generic(sym))`: byte masks of an address, not supported.
            return Err(format!("initializer `{item}`"));
        }
        return Ok(InitElement::Literal(item.to_string()));
    }
    let (symbol_part, offset) = match item.rfind('+') {
        Some(i) => {
            let off = item[i + 1..].trim();
            let off = crate::decode::parse_integer(off)
                .ok_or_else(|| format!("initializer offset `{off}`"))?;
            (item[..i].trim(), off)
        }
        None => (item, 0),
    };
    let symbol = match symbol_part.strip_prefix("generic(") {
        Some(inner) => inner
            .strip_suffix(')')
            .ok_or_else(|| format!("initializer `{item}`"))?
            .trim(),
        None => symbol_part,
    };
    if symbol.contains(['(', ')', ' ']) {
        return Err(format!("initializer `{item}`"));
    }
    Ok(InitElement::Address {
        symbol: symbol.to_string(),
        offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_alignment_and_initializers() {
        let d = parse_declaration(".visible .global .align 4 .b8 table[2][3] = {{1,2,3},{4,5,6}};")
            .unwrap();
        assert_eq!(d.space, DeclSpace::Global);
        assert_eq!((d.align, d.element_bytes, d.count), (4, 1, Some(6)));
        assert_eq!(d.init.as_ref().map(Vec::len), Some(6));
        let d = parse_declaration(".const .f32 c = 0f3F800000;").unwrap();
        assert_eq!((d.space, d.align, d.count), (DeclSpace::Const, 4, Some(1)));
        assert_eq!(
            d.init,
            Some(vec![InitElement::Literal("0f3F800000".into())])
        );
        let d = parse_declaration(".extern .shared .align 16 .b8 dyn[];").unwrap();
        assert!(d.external);
        assert_eq!(d.count, None);
        let d = parse_declaration(".global .align 8 .u64 p[2] = {generic(x), y+8};").unwrap();
        assert_eq!(
            d.init,
            Some(vec![
                InitElement::Address {
                    symbol: "x".into(),
                    offset: 0
                },
                InitElement::Address {
                    symbol: "y".into(),
                    offset: 8
                }
            ])
        );
        let d = parse_declaration(".global .texref tex;").unwrap();
        assert_eq!(d.space, DeclSpace::Texref);
        let d = parse_declaration(".param .align 16 .b8 param0[24]").unwrap();
        assert_eq!((d.space, d.align, d.bytes()), (DeclSpace::Param, 16, 24));
        let d = parse_declaration(".global .v4 .f32 v;").unwrap();
        assert_eq!(d.bytes(), 16);
        assert!(parse_declaration(".global .align 4 .b8 x[4] = {0xFF(generic(y))};").is_err());
    }
}
