//! The PTX parser: tokens to the typed model of [`crate::module`].

use smol_str::SmolStr;

use crate::error::ParseError;
use crate::instruction::{Guard, Instruction, Opcode, Operand, StateSpace};
use crate::lexer::{tokenize_significant, Lexeme, Token};
use crate::module::{
    Directive, DirectiveText, Function, FunctionAttribute, FunctionKind, Item, Module,
    ModuleDirective, ModuleDirectiveKind, Param, RegDeclaration, RegName, Span, Statement,
    StatementKind, Variable,
};

/// Parses PTX source text into a [`Module`].
pub fn parse(source: impl Into<String>) -> Result<Module, ParseError> {
    let source: String = source.into();
    if u32::try_from(source.len()).is_err() {
        return Err(ParseError {
            line: 1,
            column: 1,
            offset: 0,
            message: "input of 4 GiB or more is not supported".into(),
            found: "end of input".into(),
        });
    }
    let tokens = tokenize_significant(&source).map_err(|e| {
        let message = if source[e.start as usize..].starts_with("/*") {
            "comment is never closed"
        } else {
            "unexpected character"
        };
        ParseError::at(&source, e.start, e.end, message)
    })?;
    let (items, trailing) = {
        let mut parser = Parser {
            src: &source,
            toks: &tokens,
            pos: 0,
            byte: 0,
            nesting: 0,
            statements: Vec::new(),
            operands: Vec::new(),
        };
        let items = parser.module()?;
        (items, parser.trailing())
    };
    Ok(Module {
        source,
        items,
        trailing,
    })
}

struct Parser<'a> {
    src: &'a str,
    toks: &'a [Lexeme],
    /// Index of the next unconsumed token. `toks` holds no trivia: trivia is the text between
    /// tokens.
    pos: usize,
    /// See [`Parser::offset`].
    byte: u32,
    /// How many operand lists (`{`, `[`, `(`) enclose the operand being parsed.
    nesting: usize,
    /// Statements of the body being parsed. Collected here, then moved into a vector of the
    /// exact size, so that bodies do not grow (and copy) their vectors statement by statement.
    statements: Vec<Statement>,
    /// Operands being parsed, as a stack: an instruction's or list's operands are pushed above
    /// the operands of enclosing lists, then moved into a vector of the exact size.
    operands: Vec<Operand>,
}

/// The deepest operand nesting accepted. Real PTX nests two levels (`[tex, {%r1, %r2}]`); the
/// limit keeps the recursive operand parser from overflowing the stack on hostile input.
const MAX_OPERAND_NESTING: usize = 32;

const LINKAGE: &[&str] = &[".visible", ".extern", ".weak", ".common"];

type PResult<T> = Result<T, ParseError>;

/// A `SmolStr` of token text. Same value as `SmolStr::new`, but short texts (nearly every
/// token) are copied inline without going through `SmolStr::new`'s out-of-line checks.
#[inline]
fn smol(text: &str) -> SmolStr {
    if text.len() <= SmolStr::INLINE_CAP {
        SmolStr::new_inline(text)
    } else {
        SmolStr::new(text)
    }
}

impl<'a> Parser<'a> {
    // ---- token cursor -------------------------------------------------------------------

    /// Consumes trivia; returns its span (possibly empty).
    fn trivia(&mut self) -> Span {
        let start = self.byte;
        self.byte = self.next_start();
        Span::new(start, self.byte)
    }

    /// Byte offset of the next significant token (end of input when none).
    fn next_start(&self) -> u32 {
        self.toks
            .get(self.pos)
            .map_or(self.src.len() as u32, |t| t.start)
    }

    /// Byte offset of the first unconsumed byte: the end of the last consumed token, or, once
    /// the trivia after it is consumed, the start of the next one.
    fn offset(&self) -> u32 {
        self.byte
    }

    /// End offset of the last consumed token.
    fn last_end(&self) -> u32 {
        if self.pos == 0 {
            0
        } else {
            self.toks[self.pos - 1].end
        }
    }

    /// The cursor, to [`Parser::restore`] later.
    fn save(&self) -> (usize, u32) {
        (self.pos, self.byte)
    }

    fn restore(&mut self, (pos, byte): (usize, u32)) {
        self.pos = pos;
        self.byte = byte;
    }

    /// The next significant token, without consuming anything.
    fn peek(&self) -> Option<Lexeme> {
        self.toks.get(self.pos).copied()
    }

    /// The significant token after the next one.
    fn peek2(&self) -> Option<Lexeme> {
        self.toks.get(self.pos + 1).copied()
    }

    /// Consumes and returns the next significant token.
    fn next(&mut self) -> Option<Lexeme> {
        let t = *self.toks.get(self.pos)?;
        self.pos += 1;
        self.byte = t.end;
        Some(t)
    }

    /// The next token if it follows the last consumed one with no trivia in between.
    fn adjacent(&self, token: Token) -> Option<Lexeme> {
        self.peek()
            .filter(|t| t.token == token && t.start == self.byte)
    }

    fn text(&self, lexeme: Lexeme) -> &'a str {
        &self.src[lexeme.start as usize..lexeme.end as usize]
    }

    fn error_at(&self, lexeme: Option<Lexeme>, message: impl Into<String>) -> ParseError {
        match lexeme {
            Some(l) => ParseError::at(self.src, l.start, l.end, message),
            None => ParseError::at(
                self.src,
                self.src.len() as u32,
                self.src.len() as u32,
                message,
            ),
        }
    }

    fn expect(&mut self, token: Token, what: &str) -> PResult<Lexeme> {
        match self.next() {
            Some(l) if l.token == token => Ok(l),
            other => Err(self.error_at(other, format!("expected {what}"))),
        }
    }

    fn eat(&mut self, token: Token) -> Option<Lexeme> {
        match self.peek() {
            Some(l) if l.token == token => self.next(),
            _ => None,
        }
    }

    /// Whether trivia between the last consumed token and the next significant one holds a
    /// newline (ends line-terminated directives such as `.loc` and `.file`).
    fn newline_ahead(&self) -> bool {
        match self.peek() {
            // Only trivia lies between the two tokens.
            Some(next) => {
                self.src.as_bytes()[self.byte as usize..next.start as usize].contains(&b'\n')
            }
            None => true,
        }
    }

    fn trailing(&mut self) -> Span {
        self.trivia()
    }

    // ---- module level -------------------------------------------------------------------

    fn module(&mut self) -> PResult<Vec<Item>> {
        let mut items = Vec::new();
        loop {
            let save = self.save();
            let leading = self.trivia();
            if self.pos >= self.toks.len() {
                // Leave the final trivia for `trailing`.
                self.restore(save);
                return Ok(items);
            }
            items.push(self.item(leading)?);
        }
    }

    fn item(&mut self, leading: Span) -> PResult<Item> {
        let start = self.offset();
        // Look past linking directives to see what is declared.
        let mut decisive = None;
        for &t in &self.toks[self.pos..] {
            if t.token == Token::DotName && LINKAGE.contains(&self.text(t)) {
                continue;
            }
            decisive = Some(t);
            break;
        }
        let Some(decisive) = decisive else {
            return Err(self.error_at(None, "expected a declaration after linking directives"));
        };
        if decisive.token != Token::DotName {
            return Err(self.error_at(Some(decisive), "expected a directive at module level"));
        }
        let name = self.text(decisive);
        if name == ".entry" || name == ".func" {
            return self.function(leading).map(Item::Function);
        }
        let kind = match name {
            ".version" => {
                self.next();
                let v = self.next().filter(|l| l.token == Token::DecimalFloat);
                let v = v.ok_or_else(|| self.error_at(v, "expected a version number"))?;
                ModuleDirectiveKind::Version(smol(self.text(v)))
            }
            ".target" => {
                self.next();
                let mut targets = Vec::new();
                loop {
                    let t = self.expect(Token::Identifier, "a target name")?;
                    targets.push(smol(self.text(t)));
                    if self.eat(Token::Comma).is_none() {
                        break;
                    }
                }
                ModuleDirectiveKind::Target(targets)
            }
            ".address_size" => {
                self.next();
                let t = self.expect(Token::DecimalInteger, "an address size")?;
                let size = self
                    .text(t)
                    .parse()
                    .map_err(|_| self.error_at(Some(t), "invalid address size"))?;
                ModuleDirectiveKind::AddressSize(size)
            }
            ".file" => {
                self.next();
                let index_tok = self.expect(Token::DecimalInteger, "a file index")?;
                let index = self
                    .text(index_tok)
                    .parse()
                    .map_err(|_| self.error_at(Some(index_tok), "invalid file index"))?;
                let name_tok = self.expect(Token::String, "a file name")?;
                let quoted = self.text(name_tok);
                let name = SmolStr::new(&quoted[1..quoted.len() - 1]);
                // Optional `, timestamp, size` on the same line.
                while !self.newline_ahead() {
                    self.next();
                }
                ModuleDirectiveKind::File { index, name }
            }
            ".section" => {
                self.next();
                let name_tok = self.expect(Token::DotName, "a section name")?;
                let name = smol(self.text(name_tok));
                let open = self.expect(Token::LBrace, "'{' after the section name")?;
                self.balanced_until_close(open)?;
                ModuleDirectiveKind::Section { name }
            }
            _ => self.variable_or_other()?,
        };
        Ok(Item::Directive(ModuleDirective {
            leading: Some(leading),
            text: DirectiveText::Source(Span::new(start, self.last_end())),
            kind,
        }))
    }

    /// Consumes tokens up to and including the `}` matching `open` (already consumed).
    fn balanced_until_close(&mut self, open: Lexeme) -> PResult<()> {
        let mut depth = 1usize;
        while depth > 0 {
            match self.next() {
                Some(l) if l.token == Token::LBrace => depth += 1,
                Some(l) if l.token == Token::RBrace => depth -= 1,
                Some(_) => {}
                None => return Err(self.error_at(Some(open), "unclosed '{'")),
            }
        }
        Ok(())
    }

    /// Consumes tokens up to and including the `;` that ends a declaration, skipping nested
    /// braces, brackets and parentheses.
    fn until_semicolon(&mut self, start: Option<Lexeme>) -> PResult<()> {
        let mut depth = 0usize;
        loop {
            match self.next() {
                Some(l) => match l.token {
                    Token::LBrace | Token::LBracket | Token::LParen => depth += 1,
                    Token::RBrace | Token::RBracket | Token::RParen => {
                        depth = depth
                            .checked_sub(1)
                            .ok_or_else(|| self.error_at(Some(l), "unbalanced closing bracket"))?;
                    }
                    Token::Semicolon if depth == 0 => return Ok(()),
                    _ => {}
                },
                None => return Err(self.error_at(start, "missing ';' after this declaration")),
            }
        }
    }

    fn variable_or_other(&mut self) -> PResult<ModuleDirectiveKind> {
        let first = self.peek();
        let mut linkage = Vec::new();
        let mut state_space = None;
        let mut name = None;
        let mut directive_name = None;
        let mut depth = 0usize;
        loop {
            let Some(l) = self.next() else {
                return Err(self.error_at(first, "missing ';' after this declaration"));
            };
            match l.token {
                Token::DotName if depth == 0 && name.is_none() => {
                    let text = &self.text(l)[1..];
                    if LINKAGE.contains(&self.text(l)) {
                        linkage.push(SmolStr::new(text));
                    } else {
                        directive_name.get_or_insert_with(|| SmolStr::new(text));
                        if state_space.is_none() {
                            state_space = StateSpace::from_modifier(text);
                        }
                    }
                }
                Token::Identifier if depth == 0 && name.is_none() => {
                    name = Some(smol(self.text(l)));
                }
                Token::LBrace | Token::LBracket | Token::LParen => depth += 1,
                Token::RBrace | Token::RBracket | Token::RParen => {
                    depth = depth
                        .checked_sub(1)
                        .ok_or_else(|| self.error_at(Some(l), "unbalanced closing bracket"))?;
                }
                Token::Semicolon if depth == 0 => break,
                _ => {}
            }
        }
        let directive_name = directive_name.unwrap_or_default();
        Ok(match (state_space, name) {
            (Some(state_space), Some(name)) => ModuleDirectiveKind::Variable(Variable {
                name,
                state_space: Some(state_space),
                linkage,
            }),
            _ => ModuleDirectiveKind::Other {
                name: directive_name,
            },
        })
    }

    // ---- functions ----------------------------------------------------------------------

    fn function(&mut self, leading: Span) -> PResult<Function> {
        let header_start = self.offset();
        let mut linkage = Vec::new();
        let kind = loop {
            let l = self
                .next()
                .ok_or_else(|| self.error_at(None, "expected .entry or .func"))?;
            match self.text(l) {
                ".entry" => break FunctionKind::Entry,
                ".func" => break FunctionKind::Func,
                t => linkage.push(SmolStr::new(&t[1..])),
            }
        };
        let return_params = if kind == FunctionKind::Func && self.peek_is(Token::LParen) {
            Some(self.param_list()?)
        } else {
            None
        };
        let name_tok = self.expect(Token::Identifier, "a function name")?;
        let name = smol(self.text(name_tok));
        let params = if self.peek_is(Token::LParen) {
            Some(self.param_list()?)
        } else {
            None
        };
        let mut attributes = Vec::new();
        while let Some(l) = self.peek() {
            if l.token != Token::DotName {
                break;
            }
            self.next();
            let mut text = self.text(l).to_string();
            // Arguments: anything up to the next directive, `{` or `;`.
            while let Some(arg) = self.peek() {
                if matches!(arg.token, Token::DotName | Token::LBrace | Token::Semicolon) {
                    break;
                }
                self.next();
                if arg.token != Token::Comma {
                    text.push(' ');
                }
                text.push_str(self.text(arg));
            }
            attributes.push(FunctionAttribute {
                name: SmolStr::new(&self.text(l)[1..]),
                text,
            });
        }
        let header = Span::new(header_start, self.last_end());
        let open_start = self.offset();
        let body = match self.next() {
            Some(l) if l.token == Token::Semicolon => None,
            Some(l) if l.token == Token::LBrace => Some(l),
            other => return Err(self.error_at(other, "expected '{' or ';' after function header")),
        };
        let open = Span::new(open_start, self.last_end());
        let (body, close) = match body {
            None => (None, None),
            Some(brace) => {
                let (statements, close) = self.body(brace)?;
                (Some(statements), Some(close))
            }
        };
        Ok(Function {
            leading: Some(leading),
            header: Some(header),
            open: Some(open),
            close,
            linkage,
            kind,
            return_params,
            name,
            params,
            attributes,
            body,
        })
    }

    fn peek_is(&self, token: Token) -> bool {
        self.peek().is_some_and(|l| l.token == token)
    }

    fn param_list(&mut self) -> PResult<Vec<Param>> {
        self.expect(Token::LParen, "'('")?;
        let mut params = Vec::new();
        if self.eat(Token::RParen).is_some() {
            return Ok(params);
        }
        loop {
            params.push(self.param()?);
            match self.next() {
                Some(l) if l.token == Token::Comma => {}
                Some(l) if l.token == Token::RParen => return Ok(params),
                other => return Err(self.error_at(other, "expected ',' or ')' in parameter list")),
            }
        }
    }

    fn param(&mut self) -> PResult<Param> {
        let mut declaration = String::new();
        loop {
            let l = self.next();
            match l {
                Some(l) if matches!(l.token, Token::DotName | Token::DecimalInteger) => {
                    if !declaration.is_empty() {
                        declaration.push(' ');
                    }
                    declaration.push_str(self.text(l));
                }
                Some(l) if l.token == Token::Identifier && !declaration.is_empty() => {
                    let name = smol(self.text(l));
                    let array = if self.eat(Token::LBracket).is_some() {
                        let mut len = String::new();
                        loop {
                            let t = self
                                .next()
                                .ok_or_else(|| self.error_at(None, "unclosed '[' in parameter"))?;
                            if t.token == Token::RBracket {
                                break;
                            }
                            let text = self.text(t);
                            // Tokens are joined without spaces, except where that would make
                            // `//` or `/*`: printed back, those would start a comment.
                            if len.ends_with('/') && (text == "/" || text == "*") {
                                len.push(' ');
                            }
                            len.push_str(text);
                        }
                        Some(SmolStr::new(len))
                    } else {
                        None
                    };
                    return Ok(Param {
                        declaration: SmolStr::new(declaration),
                        name,
                        array,
                    });
                }
                other => return Err(self.error_at(other, "expected a parameter declaration")),
            }
        }
    }

    fn body(&mut self, open_brace: Lexeme) -> PResult<(Vec<Statement>, Span)> {
        let base = self.statements.len();
        let mut depth = 0usize;
        loop {
            let leading = self.trivia();
            let Some(first) = self.peek() else {
                return Err(self.error_at(Some(open_brace), "function body is never closed"));
            };
            let start = first.start;
            let kind = match first.token {
                Token::RBrace if depth == 0 => {
                    self.next();
                    let statements = self.statements.drain(base..).collect();
                    return Ok((statements, Span::new(leading.start, self.last_end())));
                }
                Token::RBrace => {
                    self.next();
                    depth -= 1;
                    StatementKind::ScopeClose
                }
                Token::LBrace => {
                    self.next();
                    depth += 1;
                    StatementKind::ScopeOpen
                }
                Token::DotName => StatementKind::Directive(self.directive(None)?),
                Token::Identifier if self.peek2().is_some_and(|l| l.token == Token::Colon) => {
                    self.next();
                    self.next();
                    let label = smol(self.text(first));
                    // `name: .callprototype ...;` and `name: .branchtargets ...;` declare, not label.
                    match self.peek() {
                        Some(d)
                            if d.token == Token::DotName
                                && matches!(self.text(d), ".callprototype" | ".branchtargets") =>
                        {
                            StatementKind::Directive(self.directive(Some(label))?)
                        }
                        _ => StatementKind::Label(label),
                    }
                }
                Token::Identifier | Token::At => StatementKind::Instruction(self.instruction()?),
                _ => return Err(self.error_at(Some(first), "expected a statement")),
            };
            self.statements.push(Statement {
                leading: Some(leading),
                text: Some(Span::new(start, self.last_end())),
                kind,
            });
        }
    }

    fn directive(&mut self, label: Option<SmolStr>) -> PResult<Directive> {
        let start_tok = self.next();
        let Some(start_tok) = start_tok else {
            return Err(self.error_at(None, "expected a directive"));
        };
        let name = &self.text(start_tok)[1..];
        match name {
            "loc" => {
                let mut numbers = [0u32; 3];
                for n in &mut numbers {
                    let t = self.expect(Token::DecimalInteger, "a number in .loc")?;
                    *n = self
                        .text(t)
                        .parse()
                        .map_err(|_| self.error_at(Some(t), "number out of range in .loc"))?;
                }
                while !self.newline_ahead() {
                    self.next();
                }
                let text = self.src[start_tok.start as usize..self.last_end() as usize].to_string();
                Ok(Directive::Loc {
                    file: numbers[0],
                    line: numbers[1],
                    column: numbers[2],
                    text,
                })
            }
            "reg" if label.is_none() => {
                let save = self.save();
                match self.reg_declaration() {
                    Some(decl) => Ok(Directive::Reg(decl)),
                    None => {
                        self.restore(save);
                        self.until_semicolon(Some(start_tok))?;
                        Ok(self.other_directive(label, name, start_tok))
                    }
                }
            }
            _ => {
                self.until_semicolon(Some(start_tok))?;
                Ok(self.other_directive(label, name, start_tok))
            }
        }
    }

    fn other_directive(&self, label: Option<SmolStr>, name: &str, start: Lexeme) -> Directive {
        Directive::Other {
            label,
            name: SmolStr::new(name),
            text: self.src[start.start as usize..self.last_end() as usize].to_string(),
        }
    }

    /// `.reg` already consumed. `None` if the declaration is not of the simple form
    /// `.reg <modifiers> name(<N>)?, ... ;`.
    fn reg_declaration(&mut self) -> Option<RegDeclaration> {
        let mut modifiers = Vec::new();
        while let Some(l) = self.peek().filter(|l| l.token == Token::DotName) {
            self.next();
            modifiers.push(smol(self.text(l)));
        }
        let mut names = Vec::new();
        loop {
            let l = self.next()?;
            if !matches!(l.token, Token::Register | Token::Identifier) {
                return None;
            }
            let name = smol(self.text(l));
            let count = if self.eat(Token::Less).is_some() {
                let n = self.next().filter(|n| n.token == Token::DecimalInteger)?;
                let count = self.text(n).parse().ok()?;
                self.eat(Token::Greater)?;
                Some(count)
            } else {
                None
            };
            names.push(RegName { name, count });
            match self.next()?.token {
                Token::Comma => {}
                Token::Semicolon => break,
                _ => return None,
            }
        }
        Some(RegDeclaration { modifiers, names })
    }

    // ---- instructions -------------------------------------------------------------------

    fn instruction(&mut self) -> PResult<Instruction> {
        let guard = if self.eat(Token::At).is_some() {
            // `@%p` / `@!%p` are written without spaces; requiring that keeps `@ bra L;` from
            // reading as a guard `bra` on an opcode `L` (predicates may be plain names).
            let negated = self.adjacent(Token::Bang).is_some();
            if negated {
                self.next();
            }
            let p = self
                .peek()
                .filter(|t| {
                    t.start == self.byte && matches!(t.token, Token::Register | Token::Identifier)
                })
                .ok_or_else(|| {
                    self.error_at(self.peek(), "expected a predicate register right after '@'")
                })?;
            self.next();
            Some(Guard {
                negated,
                predicate: smol(self.text(p)),
            })
        } else {
            None
        };
        let op = self.expect(Token::Identifier, "an opcode")?;
        // Modifiers are the dotted names written right after the mnemonic, with no space.
        let mut end = op.end;
        while let Some(m) = self.adjacent(Token::DotName) {
            self.next();
            end = m.end;
        }
        let opcode = Opcode::new(smol(&self.src[op.start as usize..end as usize]));
        let base = self.operands.len();
        if self.eat(Token::Semicolon).is_none() {
            loop {
                let operand = self.operand()?;
                self.operands.push(operand);
                match self.next() {
                    Some(l) if l.token == Token::Comma => {}
                    Some(l) if l.token == Token::Semicolon => break,
                    other => {
                        return Err(self.error_at(other, "expected ',' or ';' after an operand"))
                    }
                }
            }
        }
        let operands = self.operands.drain(base..).collect();
        Ok(Instruction::new(guard, opcode, operands))
    }

    /// A register name: `%p1`, or a name declared without `%` (`.reg .pred p;` in inline asm).
    fn register_name(&mut self, what: &str) -> PResult<Lexeme> {
        match self.next() {
            Some(l) if matches!(l.token, Token::Register | Token::Identifier) => Ok(l),
            other => Err(self.error_at(other, format!("expected {what}"))),
        }
    }

    fn operand(&mut self) -> PResult<Operand> {
        let Some(l) = self.next() else {
            return Err(self.error_at(None, "expected an operand"));
        };
        let base = match l.token {
            Token::Register | Token::Identifier if self.peek_is(Token::Pipe) => {
                self.next();
                let second = self.register_name("a register after '|'")?;
                return Ok(Operand::RegisterPair(
                    smol(self.text(l)),
                    smol(self.text(second)),
                ));
            }
            Token::Register => Operand::Register(smol(self.text(l))),
            Token::Bang => {
                let r = self.register_name("a predicate register after '!'")?;
                return Ok(Operand::NegatedRegister(smol(self.text(r))));
            }
            Token::Identifier if self.text(l) == "_" => return Ok(Operand::Sink),
            Token::Identifier => Operand::Symbol(smol(self.text(l))),
            t if t.is_integer() => Operand::Integer(smol(self.text(l))),
            t if t.is_float() => return Ok(Operand::Float(smol(self.text(l)))),
            Token::Minus => {
                let n = self.next();
                // The literal is `-` and the number, whatever trivia stood between them.
                let signed = |n: Lexeme| {
                    if n.start == l.end {
                        SmolStr::new(&self.src[l.start as usize..n.end as usize])
                    } else {
                        SmolStr::new(format!("-{}", self.text(n)))
                    }
                };
                return match n {
                    Some(n) if n.token.is_integer() => Ok(Operand::Integer(signed(n))),
                    Some(n) if n.token.is_float() => Ok(Operand::Float(signed(n))),
                    other => Err(self.error_at(other, "expected a number after '-'")),
                };
            }
            Token::LBrace => {
                return Ok(Operand::Vector(self.operand_list(
                    l,
                    Token::RBrace,
                    "'}'",
                )?))
            }
            Token::LBracket => {
                return Ok(Operand::Address(self.operand_list(
                    l,
                    Token::RBracket,
                    "']'",
                )?))
            }
            Token::LParen => {
                return Ok(Operand::List(self.operand_list(l, Token::RParen, "')'")?))
            }
            _ => return Err(self.error_at(Some(l), "expected an operand")),
        };
        // `base+offset` / `base-offset`.
        match self.peek() {
            Some(sign) if matches!(sign.token, Token::Plus | Token::Minus) => {
                self.next();
                let negative = sign.token == Token::Minus || self.eat(Token::Minus).is_some();
                let n = self.next().filter(|n| n.token.is_integer());
                let n = n.ok_or_else(|| self.error_at(n, "expected an integer offset"))?;
                let digits = self.text(n);
                let offset = if negative {
                    SmolStr::new(format!("-{digits}"))
                } else {
                    SmolStr::new(digits)
                };
                Ok(Operand::Offset {
                    base: Box::new(base),
                    offset,
                })
            }
            _ => Ok(base),
        }
    }

    /// Operands separated by commas up to `close` (the opening token `open` is consumed). Empty
    /// lists are allowed (`call f, ();`). Nesting deeper than [`MAX_OPERAND_NESTING`] is an error.
    fn operand_list(&mut self, open: Lexeme, close: Token, what: &str) -> PResult<Vec<Operand>> {
        if self.nesting >= MAX_OPERAND_NESTING {
            return Err(self.error_at(Some(open), "operands nested too deeply"));
        }
        self.nesting += 1;
        let items = self.operand_list_items(close, what);
        self.nesting -= 1;
        items
    }

    fn operand_list_items(&mut self, close: Token, what: &str) -> PResult<Vec<Operand>> {
        if self.eat(close).is_some() {
            return Ok(Vec::new());
        }
        let base = self.operands.len();
        loop {
            let operand = self.operand()?;
            self.operands.push(operand);
            match self.next() {
                Some(l) if l.token == Token::Comma => {}
                Some(l) if l.token == close => return Ok(self.operands.drain(base..).collect()),
                other => return Err(self.error_at(other, format!("expected ',' or {what}"))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(code: &str) -> String {
        format!(".version 7.8\n.target sm_70\n.address_size 64\n.entry k()\n{{\n{code}\n}}\n")
    }

    /// Regression: a parameter array length written `/ /` was stored as `//`, and the canonical
    /// form, which prints it back, started a comment there (found by tests/fuzz.rs).
    #[test]
    fn parameter_array_lengths_never_join_into_comments() {
        for (written, stored) in [("/ /", "/ /"), ("/ *", "/ *"), ("1 6", "16")] {
            let ptx = format!(".entry k(.param .b8 p[{written}])\n{{\nret;\n}}\n");
            let module = parse(ptx.as_str()).unwrap();
            let param = &module.function("k").unwrap().params()[0];
            assert_eq!(param.array.as_deref(), Some(stored));
            let canonical = module.to_canonical_ptx();
            let reparsed = parse(canonical.as_str()).unwrap();
            assert_eq!(
                reparsed.function("k").unwrap().params(),
                std::slice::from_ref(param)
            );
        }
    }

    #[test]
    fn nested_operands_up_to_the_limit_parse() {
        let depth = MAX_OPERAND_NESTING;
        let code = format!(
            "mov.u32 %r1, {}%r2{};",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let ptx = kernel(&code);
        assert_eq!(parse(ptx.as_str()).unwrap().to_ptx(), ptx);
    }

    /// Regression: operands nested thousands deep overflowed the stack (found by tests/fuzz.rs).
    #[test]
    fn deeply_nested_operands_are_an_error_not_a_stack_overflow() {
        for open in ["[", "{", "("] {
            let code = format!("mov.u32 %r1, {};", open.repeat(100_000));
            let err = parse(kernel(&code)).unwrap_err();
            assert_eq!(err.message, "operands nested too deeply");
            assert_eq!((err.line, err.column), (6, 14 + MAX_OPERAND_NESTING as u32));
        }
    }
}
