//! Per-lane compute instructions: decoded once from the opcode, evaluated per thread.
//! (Under construction.)

use ptx_lexer::Opcode;

/// How the engine must read a source operand that is an immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// An integer of `bits` bits (8, 16, 32, 64): literals parse as two's complement.
    Int {
        bits: u8,
    },
    F16,
    F32,
    F64,
    Pred,
}

/// One lane's result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AluOutput {
    /// The destination's bits (the low bits of the result type; narrower results zero-extended).
    pub value: u64,
    /// The second destination of a `p|q` result (`setp`): the complement comparison.
    pub second: bool,
    /// The carry-out, for instructions with `.cc`.
    pub carry: bool,
}

/// A decoded per-lane compute instruction.
#[derive(Debug, Clone, PartialEq)]
pub struct AluOp {
    _private: (),
}

/// Decodes `opcode`: `Ok(None)` when the instruction is not a per-lane compute instruction (the
/// engine handles it), `Err(reason)` when it is one this module does not support.
pub fn decode(_opcode: &Opcode) -> Result<Option<AluOp>, String> {
    Ok(None)
}

impl AluOp {
    /// Number of source operands (after the destination operand).
    pub fn source_count(&self) -> usize {
        0
    }

    /// How to read source `index` when it is an immediate.
    pub fn source_kind(&self, _index: usize) -> ValueKind {
        ValueKind::Int { bits: 64 }
    }

    /// Whether the instruction reads the carry flag (`addc`, `subc`, `madc`).
    pub fn reads_carry(&self) -> bool {
        false
    }

    /// Whether the instruction writes the carry flag (`.cc`).
    pub fn writes_carry(&self) -> bool {
        false
    }

    /// Evaluates one lane. `sources` holds the operands' bits (only the low bits of each source's
    /// type are meaningful: callers need not clean the upper bits); predicates are 0 or 1.
    pub fn eval(&self, _sources: &[u64; 4], _carry: bool) -> AluOutput {
        AluOutput::default()
    }
}
