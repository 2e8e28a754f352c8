//! The PTX lexer: a `logos` tokenizer that keeps every byte of the input.
//!
//! Whitespace and comments are tokens too (trivia), so that the parser can attach them to the
//! statement that follows and printing can give back the input byte for byte.

use logos::Logos;

/// A token of PTX source. Every byte of the input belongs to exactly one token.
#[derive(Logos, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Token {
    #[regex(r"[ \t\r\n\f]+")]
    Whitespace,
    #[regex(r"//[^\n]*")]
    LineComment,
    #[token("/*", block_comment)]
    BlockComment,

    /// A dotted name: a directive (`.reg`), a modifier (`.global`, `.f32`, `.v4`, `.2d`) or a
    /// section name (`.debug_info`). Scoped forms such as `.shared::cta` and `.L2::128B` are one
    /// token. Leading digits are allowed (`.1d`, `.2d`) as long as a letter follows.
    #[regex(r"\.[0-9]*[A-Za-z_$][A-Za-z0-9_$]*(::[A-Za-z0-9_$]+)*")]
    DotName,
    /// A register or special register: `%r12`, `%rd3`, `%SP`, `%tid.x`, `%envreg3`.
    #[regex(r"%[A-Za-z0-9_$]+(\.[xyzw])?")]
    Register,
    /// An identifier: opcodes, labels, symbols. PTX allows `$` and `_`; `%`-prefixed names are
    /// registers above.
    #[regex(r"[A-Za-z_$][A-Za-z0-9_$]*")]
    Identifier,

    #[regex(r"0[xX][0-9a-fA-F]+U?", priority = 5)]
    HexInteger,
    #[regex(r"0[bB][01]+U?", priority = 5)]
    BinaryInteger,
    #[regex(r"0[0-7]+U?", priority = 4)]
    OctalInteger,
    #[regex(r"[0-9]+U?", priority = 3)]
    DecimalInteger,
    /// `0f3F800000`: a single-precision value in hexadecimal IEEE form.
    #[regex(r"0[fF][0-9a-fA-F]{8}", priority = 6)]
    HexFloat32,
    /// `0d3FF0000000000000`: a double-precision value in hexadecimal IEEE form.
    #[regex(r"0[dD][0-9a-fA-F]{16}", priority = 6)]
    HexFloat64,
    /// `1.5`, `2.`, `1e10`, `2.5e-3`. (PTX has no `.5` form; `.2d` is a modifier.)
    #[regex(r"[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")]
    DecimalFloat,

    #[regex(r#""([^"\\\n]|\\.)*""#)]
    String,

    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token(",")]
    Comma,
    #[token(";")]
    Semicolon,
    #[token(":")]
    Colon,
    #[token("@")]
    At,
    #[token("!")]
    Bang,
    #[token("|")]
    Pipe,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("<")]
    Less,
    #[token(">")]
    Greater,
    #[token("=")]
    Equals,
    /// Other operator characters that only appear in initializer expressions.
    #[regex(r"[*/~&^?]")]
    Operator,
}

impl Token {
    /// Whitespace and comments: kept for printing, skipped by the parser.
    pub fn is_trivia(self) -> bool {
        matches!(
            self,
            Token::Whitespace | Token::LineComment | Token::BlockComment
        )
    }

    /// Integer literal tokens in any base.
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            Token::HexInteger | Token::BinaryInteger | Token::OctalInteger | Token::DecimalInteger
        )
    }

    /// Floating-point literal tokens in any form.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            Token::HexFloat32 | Token::HexFloat64 | Token::DecimalFloat
        )
    }

    /// A short description for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Token::Whitespace => "whitespace",
            Token::LineComment | Token::BlockComment => "comment",
            Token::DotName => "directive or modifier",
            Token::Register => "register",
            Token::Identifier => "identifier",
            Token::HexInteger
            | Token::BinaryInteger
            | Token::OctalInteger
            | Token::DecimalInteger => "integer",
            Token::HexFloat32 | Token::HexFloat64 | Token::DecimalFloat => "float",
            Token::String => "string",
            Token::LBrace => "'{'",
            Token::RBrace => "'}'",
            Token::LBracket => "'['",
            Token::RBracket => "']'",
            Token::LParen => "'('",
            Token::RParen => "')'",
            Token::Comma => "','",
            Token::Semicolon => "';'",
            Token::Colon => "':'",
            Token::At => "'@'",
            Token::Bang => "'!'",
            Token::Pipe => "'|'",
            Token::Plus => "'+'",
            Token::Minus => "'-'",
            Token::Less => "'<'",
            Token::Greater => "'>'",
            Token::Equals => "'='",
            Token::Operator => "operator",
        }
    }
}

/// Consumes a block comment's body through its `*/`; an unclosed comment is a lex error.
fn block_comment(lex: &mut logos::Lexer<Token>) -> bool {
    match lex.remainder().find("*/") {
        Some(end) => {
            lex.bump(end + 2);
            true
        }
        None => false,
    }
}

/// A token with its byte range in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lexeme {
    pub token: Token,
    pub start: u32,
    pub end: u32,
}

/// A byte the lexer could not start a token with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LexError {
    pub start: u32,
    pub end: u32,
}

/// Tokenizes `source` completely, trivia included.
///
/// Inputs of 4 GiB or more are rejected by the caller ([`crate::parse`]), so offsets fit `u32`.
pub fn tokenize(source: &str) -> Result<Vec<Lexeme>, LexError> {
    // Roughly one token per four bytes of typical PTX; reserving avoids regrowth.
    let mut out = Vec::with_capacity(source.len() / 4 + 16);
    let mut lexer = Token::lexer(source);
    while let Some(result) = lexer.next() {
        let span = lexer.span();
        let (start, end) = (span.start as u32, span.end as u32);
        match result {
            Ok(token) => out.push(Lexeme { token, start, end }),
            Err(()) => return Err(LexError { start, end }),
        }
    }
    Ok(out)
}

/// Tokenizes `source` completely, leaving out trivia: what the parser works on. The text between
/// two returned tokens is whitespace and comments.
pub(crate) fn tokenize_significant(source: &str) -> Result<Vec<Lexeme>, LexError> {
    // Real PTX has about one significant token per five or six bytes. Reserving one per three
    // bytes avoids regrowth; the pages that are never written are never touched.
    let mut out = Vec::with_capacity(source.len() / 3 + 16);
    let mut lexer = Token::lexer(source);
    while let Some(result) = lexer.next() {
        match result {
            Ok(token) if token.is_trivia() => {}
            Ok(token) => {
                let span = lexer.span();
                out.push(Lexeme {
                    token,
                    start: span.start as u32,
                    end: span.end as u32,
                });
            }
            Err(()) => {
                let span = lexer.span();
                return Err(LexError {
                    start: span.start as u32,
                    end: span.end as u32,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(Token, &str)> {
        tokenize(src)
            .unwrap()
            .into_iter()
            .filter(|l| !l.token.is_trivia())
            .map(|l| (l.token, &src[l.start as usize..l.end as usize]))
            .collect()
    }

    #[test]
    fn opcode_with_modifiers_and_address() {
        assert_eq!(
            kinds("ld.global.nc.v2.f64 {%fd1, %fd2}, [%rd4+8];"),
            vec![
                (Token::Identifier, "ld"),
                (Token::DotName, ".global"),
                (Token::DotName, ".nc"),
                (Token::DotName, ".v2"),
                (Token::DotName, ".f64"),
                (Token::LBrace, "{"),
                (Token::Register, "%fd1"),
                (Token::Comma, ","),
                (Token::Register, "%fd2"),
                (Token::RBrace, "}"),
                (Token::Comma, ","),
                (Token::LBracket, "["),
                (Token::Register, "%rd4"),
                (Token::Plus, "+"),
                (Token::DecimalInteger, "8"),
                (Token::RBracket, "]"),
                (Token::Semicolon, ";"),
            ]
        );
    }

    #[test]
    fn numbers_in_every_form() {
        let src = "0x1F 0X1fU 017 0b101 42 42U 0f3F800000 0d3FF0000000000000 1.5 1e10 2.5e-3 0";
        let toks: Vec<Token> = kinds(src).into_iter().map(|(t, _)| t).collect();
        assert_eq!(
            toks,
            vec![
                Token::HexInteger,
                Token::HexInteger,
                Token::OctalInteger,
                Token::BinaryInteger,
                Token::DecimalInteger,
                Token::DecimalInteger,
                Token::HexFloat32,
                Token::HexFloat64,
                Token::DecimalFloat,
                Token::DecimalFloat,
                Token::DecimalFloat,
                Token::DecimalInteger,
            ]
        );
    }

    #[test]
    fn registers_labels_guards_and_scoped_modifiers() {
        assert_eq!(
            kinds("@!%p1 bra.uni $L__BB0_2; mov.u32 %r1, %tid.x; ld.shared::cta.u32 %r<12>"),
            vec![
                (Token::At, "@"),
                (Token::Bang, "!"),
                (Token::Register, "%p1"),
                (Token::Identifier, "bra"),
                (Token::DotName, ".uni"),
                (Token::Identifier, "$L__BB0_2"),
                (Token::Semicolon, ";"),
                (Token::Identifier, "mov"),
                (Token::DotName, ".u32"),
                (Token::Register, "%r1"),
                (Token::Comma, ","),
                (Token::Register, "%tid.x"),
                (Token::Semicolon, ";"),
                (Token::Identifier, "ld"),
                (Token::DotName, ".shared::cta"),
                (Token::DotName, ".u32"),
                (Token::Register, "%r"),
                (Token::Less, "<"),
                (Token::DecimalInteger, "12"),
                (Token::Greater, ">"),
            ]
        );
    }

    #[test]
    fn dimension_modifiers_start_with_digits() {
        assert_eq!(
            kinds("tex.1d.v4.f32.s32"),
            vec![
                (Token::Identifier, "tex"),
                (Token::DotName, ".1d"),
                (Token::DotName, ".v4"),
                (Token::DotName, ".f32"),
                (Token::DotName, ".s32"),
            ]
        );
    }

    #[test]
    fn comments_and_strings_are_single_tokens() {
        let src = "// line\n/* block * with / stars **/ .file 1 \"a \\\"b\\\".cu\"";
        let all = tokenize(src).unwrap();
        assert_eq!(all[0].token, Token::LineComment);
        assert_eq!(all[2].token, Token::BlockComment);
        let last = all.last().unwrap();
        assert_eq!(last.token, Token::String);
        assert_eq!(&src[last.start as usize..], "\"a \\\"b\\\".cu\"");
    }

    #[test]
    fn every_byte_is_covered() {
        let src = ".visible .entry k(.param .u64 p)\n{\n\tret;\n}\n";
        let toks = tokenize(src).unwrap();
        let mut pos = 0;
        for t in &toks {
            assert_eq!(t.start, pos);
            pos = t.end;
        }
        assert_eq!(pos as usize, src.len());
    }

    #[test]
    fn unknown_byte_is_an_error_with_position() {
        let err = tokenize("mov.u32 %r1, #3;").unwrap_err();
        assert_eq!((err.start, err.end), (13, 14));
    }
}
