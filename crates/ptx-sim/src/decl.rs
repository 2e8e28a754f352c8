//! The layout of variable and parameter declarations (`.global .align 4 .b8 table[16] = {...};`,
//! `.param .b32 param0;`, `.local .align 8 .b8 __local_depot0[32];`): `ptx_lexer::Declaration`
//! reads their parts (space, type, alignment, dimensions, initializer); this module turns them
//! into what the engine allocates: bytes per element, element kind, count, alignment.

use ptx_lexer::{DataType, Declaration, ElementType, Param, StateSpace};

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

/// One element of an initializer list (`ptx_lexer`'s typed view).
pub(crate) use ptx_lexer::InitElement;

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

/// The kind and byte size of a fundamental type, as the engine stores it.
pub(crate) fn type_of(data_type: DataType) -> Option<(ValueKind, u64)> {
    Some(match data_type {
        DataType::B8 | DataType::U8 | DataType::S8 => (ValueKind::Int { bits: 8 }, 1),
        DataType::B16 | DataType::U16 | DataType::S16 => (ValueKind::Int { bits: 16 }, 2),
        DataType::F16 | DataType::Bf16 => (ValueKind::F16, 2),
        DataType::B32 | DataType::U32 | DataType::S32 | DataType::F16x2 | DataType::Bf16x2 => {
            (ValueKind::Int { bits: 32 }, 4)
        }
        DataType::B64 | DataType::U64 | DataType::S64 => (ValueKind::Int { bits: 64 }, 8),
        DataType::F32 => (ValueKind::F32, 4),
        DataType::F64 => (ValueKind::F64, 8),
        DataType::Pred => (ValueKind::Pred, 1),
        DataType::B128 | DataType::Tf32 | DataType::E4m3x2 | DataType::E5m2x2 => return None,
    })
}

/// Parses a declaration's text. `Err` names what is not understood.
pub(crate) fn parse_declaration(text: &str) -> Result<VarDecl, String> {
    layout(Declaration::parse(text).map_err(|e| e.to_string())?)
}

/// The layout of a parameter of the model.
pub(crate) fn param_declaration(param: &Param) -> Result<VarDecl, String> {
    layout(Declaration::of_param(param).map_err(|e| e.to_string())?)
}

/// What the engine needs of a declaration: its space, and its layout in bytes.
fn layout(decl: Declaration) -> Result<VarDecl, String> {
    let count = decl.element_count().map_err(|e| e.to_string());
    let name = decl.name;
    if decl.element == ElementType::Texref {
        return Ok(VarDecl {
            space: DeclSpace::Texref,
            name,
            align: 8,
            element_bytes: 8,
            scalar_bytes: 8,
            element_kind: ValueKind::Int { bits: 64 },
            count: Some(1),
            external: decl.external,
            init: None,
        });
    }
    let space = match decl.space {
        StateSpace::Global => DeclSpace::Global,
        StateSpace::Const => DeclSpace::Const,
        StateSpace::Shared => DeclSpace::Shared,
        StateSpace::Local => DeclSpace::Local,
        StateSpace::Param => DeclSpace::Param,
        other => return Err(format!("`{name}` in state space {other:?}")),
    };
    let ElementType::Data(data_type) = decl.element else {
        return Err(format!("`{name}` has no type"));
    };
    let (element_kind, type_bytes) =
        type_of(data_type).ok_or_else(|| format!("`{name}` of type {data_type:?}"))?;
    let element_bytes = type_bytes * decl.vector;
    let count = count?;
    Ok(VarDecl {
        space,
        name,
        align: decl.align.unwrap_or(element_bytes).max(1),
        element_bytes,
        scalar_bytes: type_bytes,
        element_kind,
        count,
        external: decl.external,
        init: decl.initializer,
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
