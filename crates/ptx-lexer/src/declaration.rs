//! Typed views of variable and parameter declarations, and of PTX literals.
//!
//! The model keeps a declaration as written (a module variable's text, a [`Param`]'s
//! `declaration` words, a body's `.local`/`.shared` directive); [`Declaration`] reads one into
//! its parts: state space, type, vector width, alignment, array dimensions, linkage and
//! initializer. [`parse_integer`] and [`parse_float`] read PTX integer and float literals,
//! including the `0f`/`0d` bit patterns. Layout (bytes per element, how an initializer's
//! literals are stored) is the reader's business: it depends on what the reader models.

use thiserror::Error;

use crate::instruction::{DataType, StateSpace};
use crate::module::Param;

/// Why a declaration could not be read: one phrase naming the part not understood.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct DeclarationError(String);

impl From<String> for DeclarationError {
    fn from(text: String) -> Self {
        DeclarationError(text)
    }
}

impl From<&str> for DeclarationError {
    fn from(text: &str) -> Self {
        DeclarationError(text.to_string())
    }
}

/// What a declaration declares values of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementType {
    /// A fundamental type (`.b8`, `.f32`, ...).
    Data(DataType),
    /// `.texref`: a legacy texture reference, whatever state space it is written in.
    Texref,
}

/// One element of an initializer list, flattened (`{ {1, 2}, {3, 4} }` is four elements).
#[derive(Debug, Clone, PartialEq)]
pub enum InitElement {
    /// A literal as written; how it is stored depends on the element type (see
    /// [`parse_integer`], [`parse_float`]).
    Literal(String),
    /// `sym`, `generic(sym)`, `sym+off`, `generic(sym)+off`: the address of a variable.
    Address { symbol: String, offset: i64 },
}

/// A variable or parameter declaration, read into its parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Declaration {
    /// The first state space named (`.param .u64 .ptr .global p` is a `.param`).
    pub space: StateSpace,
    pub name: String,
    pub element: ElementType,
    /// `.v2`, `.v4`: values per element; 1 otherwise.
    pub vector: u64,
    /// `.align N`, if written.
    pub align: Option<u64>,
    /// Array dimensions, outermost first; `None` for an open-ended `[]`.
    pub dims: Vec<Option<u64>>,
    /// `.extern`.
    pub external: bool,
    pub initializer: Option<Vec<InitElement>>,
}

impl Declaration {
    /// Reads a declaration as written (`.visible .global .align 4 .b8 table[16] = {...};`).
    pub fn parse(text: &str) -> Result<Declaration, DeclarationError> {
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
        let mut declaration = read_head(head.split_whitespace())?;
        declaration.dims = read_dims(dims)?;
        declaration.initializer = init_text.map(read_initializer).transpose()?;
        Ok(declaration)
    }

    /// Reads a parameter of the model (its `declaration` words, name and array length),
    /// without printing it back to text.
    pub fn of_param(param: &Param) -> Result<Declaration, DeclarationError> {
        let words = param
            .declaration
            .split_whitespace()
            .chain(std::iter::once(param.name.as_str()));
        let mut declaration = read_head(words)?;
        if let Some(length) = &param.array {
            declaration.dims = read_dims(&format!("[{length}]"))?;
        }
        Ok(declaration)
    }

    /// The number of elements: the product of the dimensions (1 for a scalar); `None` for an
    /// open-ended array without an initializer (sized elsewhere, e.g. `extern .shared x[]`) or
    /// a product that overflows. An open-ended array with an initializer has its length.
    pub fn element_count(&self) -> Result<Option<u64>, DeclarationError> {
        let open_ended = self.dims.iter().any(Option::is_none);
        if open_ended {
            return Ok(self.initializer.as_ref().map(|init| init.len() as u64));
        }
        let mut count = 1u64;
        for n in self.dims.iter().flatten() {
            count = count.checked_mul(*n).ok_or("array size overflows")?;
        }
        Ok(Some(count))
    }
}

/// Directives and the name: everything before the dimensions.
fn read_head<'a>(words: impl Iterator<Item = &'a str>) -> Result<Declaration, DeclarationError> {
    let mut space = None;
    let mut texref = false;
    let mut align = None;
    let mut data_type = None;
    let mut vector = 1u64;
    let mut external = false;
    let mut name = None;
    let mut words = words;
    while let Some(word) = words.next() {
        if let Some(directive) = word.strip_prefix('.') {
            match directive {
                "texref" => texref = true,
                "align" => {
                    let n = words.next().ok_or("`.align` without a value")?;
                    align = Some(n.parse::<u64>().map_err(|_| format!("alignment `{n}`"))?);
                }
                "v2" => vector = 2,
                "v4" => vector = 4,
                "extern" => external = true,
                "visible" | "weak" | "common" | "ptr" | "reg" => {}
                other => {
                    if let Some(named) = StateSpace::from_modifier(other) {
                        // `.param .u64 .ptr .global .align 8 p` names spaces after `.ptr`:
                        // the first space named is the declaration's own.
                        space.get_or_insert(named);
                    } else if let Some(t) = DataType::from_modifier(other) {
                        data_type = Some(t);
                    } else {
                        return Err(format!("declaration directive `.{other}`").into());
                    }
                }
            }
        } else if name.is_none() {
            name = Some(word.to_string());
        } else {
            return Err(format!("unexpected `{word}` in a declaration").into());
        }
    }
    // A `.texref` lives in global memory when no space is written.
    let space = match (space, texref) {
        (Some(space), _) => space,
        (None, true) => StateSpace::Global,
        (None, false) => return Err("declaration without a state space".into()),
    };
    let name = name.ok_or("declaration without a name")?;
    let element = match (texref, data_type) {
        (true, _) => ElementType::Texref,
        (false, Some(t)) => ElementType::Data(t),
        (false, None) => return Err(format!("`{name}` has no type").into()),
    };
    Ok(Declaration {
        space,
        name,
        element,
        vector,
        align,
        dims: Vec::new(),
        external,
        initializer: None,
    })
}

/// `[2][3]`, `[]`: each dimension, `None` when open-ended.
fn read_dims(text: &str) -> Result<Vec<Option<u64>>, DeclarationError> {
    let mut dims = Vec::new();
    let mut rest = text.trim();
    while let Some(inner) = rest.strip_prefix('[') {
        let close = inner.find(']').ok_or("unclosed `[` in a declaration")?;
        let n = inner[..close].trim();
        if n.is_empty() {
            dims.push(None);
        } else {
            let n = parse_integer(n).ok_or_else(|| format!("array length `{n}`"))?;
            dims.push(Some(n as u64));
        }
        rest = inner[close + 1..].trim();
    }
    if !rest.is_empty() {
        return Err(format!("unexpected `{rest}` after the dimensions").into());
    }
    Ok(dims)
}

/// Flattens `{ {1, 2}, {3, 4} }` or a scalar into elements.
fn read_initializer(text: &str) -> Result<Vec<InitElement>, DeclarationError> {
    let flat: String = text.chars().filter(|c| *c != '{' && *c != '}').collect();
    let mut elements = Vec::new();
    for item in flat.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        elements.push(read_element(item)?);
    }
    Ok(elements)
}

fn read_element(item: &str) -> Result<InitElement, DeclarationError> {
    let starts_like_symbol = item
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$');
    if !starts_like_symbol || item.starts_with("0f") || item.starts_with("0d") {
        if item.contains('(') {
            // `0xFF(generic(sym))`: byte masks of an address, not supported.
            return Err(format!("initializer `{item}`").into());
        }
        return Ok(InitElement::Literal(item.to_string()));
    }
    let (symbol_part, offset) = match item.rfind('+') {
        Some(i) => {
            let off = item[i + 1..].trim();
            let off = parse_integer(off).ok_or_else(|| format!("initializer offset `{off}`"))?;
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
        return Err(format!("initializer `{item}`").into());
    }
    Ok(InitElement::Address {
        symbol: symbol.to_string(),
        offset,
    })
}

/// Reads a PTX integer literal: decimal, `0x` hex, `0b` binary, octal with a leading 0, an
/// optional sign and an optional `U` suffix. Values above `i64::MAX` (`0xFFFFFFFFFFFFFFFF`, as
/// PTX writes unsigned 64-bit constants) are their two's-complement `i64`.
pub fn parse_integer(text: &str) -> Option<i64> {
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest.trim_start()),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let digits = digits.strip_suffix(['U', 'u']).unwrap_or(digits);
    let magnitude = if let Some(hex) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()?
    } else if let Some(bin) = digits.strip_prefix("0b").or(digits.strip_prefix("0B")) {
        u64::from_str_radix(bin, 2).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        u64::from_str_radix(&digits[1..], 8).ok()?
    } else {
        digits.parse::<u64>().ok()?
    };
    // The literal's 64 bits, as PTX reads them (see above).
    let value = magnitude as i64;
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// Reads a PTX float literal as `f64`: `0fXXXXXXXX` (the bits of an `f32`),
/// `0dXXXXXXXXXXXXXXXX` (the bits of an `f64`) or decimal, with an optional `-`.
pub fn parse_float(text: &str) -> Option<f64> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let value = if let Some(hex) = body.strip_prefix("0f").or(body.strip_prefix("0F")) {
        f64::from(f32::from_bits(u32::from_str_radix(hex, 16).ok()?))
    } else if let Some(hex) = body.strip_prefix("0d").or(body.strip_prefix("0D")) {
        f64::from_bits(u64::from_str_radix(hex, 16).ok()?)
    } else {
        body.parse::<f64>().ok()?
    };
    Some(if negative { -value } else { value })
}

/// A `.callprototype` directive's signature, `.callprototype [(ret)] _ (params) [attributes];`
/// (the text after the label), read into its parameter list; what precedes and follows the list
/// is kept as written, so [`std::fmt::Display`] gives the directive back with the list edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPrototype {
    /// `.callprototype`, the return parameter and `_`, up to and including the list's `(`.
    head: String,
    /// The declared parameters (`.param .b32 _`), trimmed.
    pub params: Vec<String>,
    /// From the list's `)` on: attributes and the `;`.
    tail: String,
}

impl CallPrototype {
    pub fn parse(text: &str) -> Result<CallPrototype, DeclarationError> {
        let not_a_prototype = || DeclarationError::from(format!("call prototype `{text}`"));
        let rest = text
            .trim_start()
            .strip_prefix(".callprototype")
            .ok_or_else(not_a_prototype)?;
        let after_keyword = text.len() - rest.len();
        // An optional return parameter in parentheses, then `_`, then the parameter list.
        let mut at = after_keyword + (rest.len() - rest.trim_start().len());
        if text[at..].starts_with('(') {
            at += text[at..].find(')').ok_or_else(not_a_prototype)? + 1;
        }
        let rest = text[at..].trim_start();
        let rest = rest.strip_prefix('_').ok_or_else(not_a_prototype)?;
        let open = text.len() - rest.len() + (rest.len() - rest.trim_start().len());
        if !text[open..].starts_with('(') {
            return Err(not_a_prototype());
        }
        let close = open + text[open..].find(')').ok_or_else(not_a_prototype)?;
        let list = text[open + 1..close].trim();
        let params = if list.is_empty() {
            Vec::new()
        } else {
            list.split(',').map(|p| p.trim().to_string()).collect()
        };
        Ok(CallPrototype {
            head: text[..=open].to_string(),
            params,
            tail: text[close..].to_string(),
        })
    }
}

impl std::fmt::Display for CallPrototype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}{}", self.head, self.params.join(", "), self.tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_prototypes_give_their_parameter_list_and_print_back_edited() {
        for (text, params) in [
            (
                ".callprototype (.param .b32 _) _ (.param .b32 _, .param .b64 _);",
                2,
            ),
            (".callprototype _ ();", 0),
            (".callprototype _ (.param .b64 _) .noreturn;", 1),
            (
                ".callprototype (.param .align 16 .b8 _[16]) _ (.param .b32 _);",
                1,
            ),
        ] {
            let mut prototype = CallPrototype::parse(text).unwrap();
            assert_eq!(prototype.params.len(), params, "{text}");
            assert_eq!(prototype.to_string(), text);
            prototype.params.push(".param .b64 _".into());
            let edited = prototype.to_string();
            assert_eq!(
                CallPrototype::parse(&edited).unwrap().params.len(),
                params + 1
            );
            assert!(edited.contains(".param .b64 _)"), "{edited}");
        }
        assert_eq!(
            CallPrototype::parse(".callprototype _ ();")
                .unwrap()
                .to_string(),
            ".callprototype _ ();"
        );
        for bad in [
            "",
            ".param .b32 x;",
            ".callprototype (.param .b32 _ _ ();",
            ".callprototype x ();",
        ] {
            assert!(CallPrototype::parse(bad).is_err(), "{bad}");
        }
    }

    fn parse(text: &str) -> Declaration {
        Declaration::parse(text).unwrap()
    }

    #[test]
    fn spaces_types_alignment_and_dimensions() {
        let d = parse(".visible .global .align 4 .b8 table[2][3] = {{1,2,3},{4,5,6}};");
        assert_eq!(d.space, StateSpace::Global);
        assert_eq!(d.element, ElementType::Data(DataType::B8));
        assert_eq!((d.align, d.dims.clone()), (Some(4), vec![Some(2), Some(3)]));
        assert_eq!(d.element_count(), Ok(Some(6)));
        assert_eq!(d.initializer.as_ref().map(Vec::len), Some(6));
        let d = parse(".const .f32 c = 0f3F800000;");
        assert_eq!((d.space, d.align), (StateSpace::Const, None));
        assert_eq!(
            d.initializer,
            Some(vec![InitElement::Literal("0f3F800000".into())])
        );
        let d = parse(".extern .shared .align 16 .b8 dyn[];");
        assert!(d.external);
        assert_eq!(d.element_count(), Ok(None));
        let d = parse(".global .u32 open[] = {1, 2, 3};");
        assert_eq!(d.element_count(), Ok(Some(3)));
        let d = parse(".param .u64 .ptr .global .align 8 p");
        assert_eq!((d.space, d.align), (StateSpace::Param, Some(8)));
        let d = parse(".global .texref tex;");
        assert_eq!(d.element, ElementType::Texref);
        let d = parse(".global .v4 .f32 v;");
        assert_eq!(d.vector, 4);
        let d = parse(".global .b8 big[0x100000000][0x100000000];");
        assert!(d.element_count().is_err());
    }

    #[test]
    fn initializers_with_addresses() {
        let d = parse(".global .align 8 .u64 p[2] = {generic(x), y+8};");
        assert_eq!(
            d.initializer,
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
        let err = Declaration::parse(".global .align 4 .b8 x[4] = {0xFF(generic(y))};");
        assert_eq!(
            err.unwrap_err().to_string(),
            "initializer `0xFF(generic(y))`"
        );
    }

    #[test]
    fn errors_name_the_part() {
        let err = |t: &str| Declaration::parse(t).unwrap_err().to_string();
        assert_eq!(err(".global x;"), "`x` has no type");
        assert_eq!(err(".b32 x;"), "declaration without a state space");
        assert_eq!(err(".global .b32 x[4"), "unclosed `[` in a declaration");
        assert_eq!(
            err(".global .frob .b32 x;"),
            "declaration directive `.frob`"
        );
    }

    #[test]
    fn parameters_read_without_printing() {
        let mut param = Param::new(".param .align 16 .b8", "param0");
        param.array = Some("24".into());
        let d = Declaration::of_param(&param).unwrap();
        assert_eq!(
            (d.space, d.align, d.dims),
            (StateSpace::Param, Some(16), vec![Some(24)])
        );
        assert_eq!(d.name, "param0");
    }

    #[test]
    fn integer_and_float_literals() {
        assert_eq!(parse_integer("42"), Some(42));
        assert_eq!(parse_integer("-4"), Some(-4));
        assert_eq!(parse_integer("0x1F"), Some(31));
        assert_eq!(parse_integer("017"), Some(15));
        assert_eq!(parse_integer("0b101"), Some(5));
        assert_eq!(parse_integer("12U"), Some(12));
        assert_eq!(parse_integer("0xFFFFFFFFFFFFFFFF"), Some(-1));
        assert_eq!(parse_integer("0"), Some(0));
        assert_eq!(parse_integer("x"), None);
        assert_eq!(parse_float("0f3F800000"), Some(1.0));
        assert_eq!(parse_float("-0d4000000000000000"), Some(-2.0));
        assert_eq!(parse_float("1.5"), Some(1.5));
        assert_eq!(parse_float("0fZZ"), None);
    }
}
