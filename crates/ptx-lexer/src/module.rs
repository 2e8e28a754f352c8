//! The typed PTX model: module, functions, statements.
//!
//! Every element parsed from source remembers the byte ranges it came from, so printing an
//! unmodified module gives back the input byte for byte (see [`crate::print`]). Elements are
//! changed only through methods that forget the source text of what they change, so a changed
//! element is always printed from its model, never from stale text.

use serde::Serialize;
use smol_str::SmolStr;

use crate::instruction::{Instruction, StateSpace};

/// A byte range of the module's source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub(crate) fn new(start: u32, end: u32) -> Self {
        Span { start, end }
    }

    pub(crate) fn text(self, source: &str) -> &str {
        &source[self.start as usize..self.end as usize]
    }
}

/// A parsed PTX module.
#[derive(Debug, Clone)]
pub struct Module {
    pub(crate) source: String,
    pub(crate) items: Vec<Item>,
    /// Trivia after the last item.
    pub(crate) trailing: Span,
}

/// A top-level element of a module.
#[derive(Debug, Clone)]
pub enum Item {
    Directive(ModuleDirective),
    Function(Function),
}

/// A module-level directive other than a function.
#[derive(Debug, Clone)]
pub struct ModuleDirective {
    pub(crate) leading: Option<Span>,
    pub(crate) text: DirectiveText,
    pub kind: ModuleDirectiveKind,
}

#[derive(Debug, Clone)]
pub(crate) enum DirectiveText {
    Source(Span),
    Owned(String),
}

/// What a module-level directive declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleDirectiveKind {
    /// `.version 7.8`
    Version(SmolStr),
    /// `.target sm_90` or `.target sm_70, debug`
    Target(Vec<SmolStr>),
    /// `.address_size 64`
    AddressSize(u32),
    /// `.file 1 "kernel.cu"` (optionally with timestamp and size)
    File { index: u32, name: SmolStr },
    /// `.section .debug_info { ... }`: kept verbatim.
    Section { name: SmolStr },
    /// A variable: `.global .align 4 .b8 table[16] = {...};`, `.shared`, `.const`, `.texref`...
    Variable(Variable),
    /// Any other directive, kept verbatim.
    Other { name: SmolStr },
}

/// A module-scope variable declaration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Variable {
    pub name: SmolStr,
    pub state_space: Option<StateSpace>,
    /// Linking directives (`visible`, `extern`, `weak`), without dots.
    pub linkage: Vec<SmolStr>,
}

/// `.entry` (a kernel) or `.func` (a device function).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FunctionKind {
    Entry,
    Func,
}

/// A parameter or return parameter: `.param .u64 .ptr .global .align 4 name[16]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Param {
    /// Everything before the name, single-space separated: `.param .u64 .ptr .global .align 4`.
    pub declaration: SmolStr,
    pub name: SmolStr,
    /// Array length as written inside the brackets (`16`), if an array.
    pub array: Option<SmolStr>,
}

impl Param {
    /// A parameter `declaration name`, e.g. `Param::new(".param .u64", "counters")`.
    pub fn new(declaration: impl Into<SmolStr>, name: impl Into<SmolStr>) -> Self {
        Param {
            declaration: declaration.into(),
            name: name.into(),
            array: None,
        }
    }
}

impl std::fmt::Display for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.declaration, self.name)?;
        if let Some(len) = &self.array {
            write!(f, "[{len}]")?;
        }
        Ok(())
    }
}

/// A performance-tuning or other attribute after the parameter list: `.maxntid 256, 1, 1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FunctionAttribute {
    /// The directive without its dot: `maxntid`.
    pub name: SmolStr,
    /// The attribute as written, single-space separated: `.maxntid 256, 1, 1`.
    pub text: String,
}

/// A function: `.entry` or `.func`, with or without a body.
#[derive(Debug, Clone)]
pub struct Function {
    pub(crate) leading: Option<Span>,
    /// The header as written, from the first linking directive to the last attribute; `None` once
    /// the name, parameters or attributes change.
    pub(crate) header: Option<Span>,
    /// Trivia and the `{` (or the `;` of a declaration).
    pub(crate) open: Option<Span>,
    /// Trivia and the closing `}`.
    pub(crate) close: Option<Span>,
    pub(crate) linkage: Vec<SmolStr>,
    pub(crate) kind: FunctionKind,
    pub(crate) return_params: Option<Vec<Param>>,
    pub(crate) name: SmolStr,
    pub(crate) params: Option<Vec<Param>>,
    pub(crate) attributes: Vec<FunctionAttribute>,
    /// `None` for a declaration (`.extern .func f(...);`).
    pub(crate) body: Option<Vec<Statement>>,
}

impl Function {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> FunctionKind {
        self.kind
    }

    /// Linking directives without dots: `visible`, `extern`, `weak`.
    pub fn linkage(&self) -> &[SmolStr] {
        &self.linkage
    }

    /// Return parameters of a `.func`; empty when it returns nothing.
    pub fn return_params(&self) -> &[Param] {
        self.return_params.as_deref().unwrap_or(&[])
    }

    pub fn params(&self) -> &[Param] {
        self.params.as_deref().unwrap_or(&[])
    }

    pub fn attributes(&self) -> &[FunctionAttribute] {
        &self.attributes
    }

    /// Whether this is a definition (has a body) rather than a declaration.
    pub fn is_definition(&self) -> bool {
        self.body.is_some()
    }

    /// The body's statements in order; empty for a declaration.
    pub fn statements(&self) -> &[Statement] {
        self.body.as_deref().unwrap_or(&[])
    }

    /// All instructions of the body in order, nested scopes included.
    pub fn instructions(&self) -> impl Iterator<Item = &Instruction> {
        self.statements()
            .iter()
            .filter_map(Statement::as_instruction)
    }
}

/// A statement of a function body.
#[derive(Debug, Clone)]
pub struct Statement {
    pub(crate) leading: Option<Span>,
    pub(crate) text: Option<Span>,
    pub(crate) kind: StatementKind,
}

/// What a statement is.
#[derive(Debug, Clone, PartialEq)]
pub enum StatementKind {
    /// `$L__BB0_2:`
    Label(SmolStr),
    Instruction(Instruction),
    Directive(Directive),
    /// `{`: opens a nested scope (inline asm, call sequences).
    ScopeOpen,
    /// `}`: closes a nested scope.
    ScopeClose,
}

/// A directive inside a function body.
#[derive(Debug, Clone, PartialEq)]
pub enum Directive {
    /// `.reg .b32 %r<12>, %x;`
    Reg(RegDeclaration),
    /// `.loc 1 25 3` (with optional `function_name`/`inlined_at` parts, kept in `text`).
    Loc {
        file: u32,
        line: u32,
        column: u32,
        text: String,
    },
    /// Anything else (`.local`, `.shared`, `.param`, `.pragma`, `name: .callprototype ...`,
    /// `name: .branchtargets ...`), kept as written.
    Other {
        /// A label before the directive (`prototype_0` in `prototype_0 : .callprototype ...`).
        label: Option<SmolStr>,
        /// The directive without its dot: `local`, `callprototype`.
        name: SmolStr,
        text: String,
    },
}

/// A register declaration: `.reg .b32 %r<12>, %x;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegDeclaration {
    /// Type and other modifiers as written, e.g. `[".b32"]` or `[".v2", ".f32"]`.
    pub modifiers: Vec<SmolStr>,
    pub names: Vec<RegName>,
}

/// One declared register name, or a parameterized range `%r<12>` (declaring `%r0`..`%r11`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegName {
    pub name: SmolStr,
    pub count: Option<u32>,
}

impl RegDeclaration {
    /// Whether `register` is declared by this declaration.
    pub fn declares(&self, register: &str) -> bool {
        self.names.iter().any(|n| match n.count {
            None => n.name == register,
            Some(count) => register
                .strip_prefix(n.name.as_str())
                .filter(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|rest| rest.parse::<u64>().ok())
                .is_some_and(|i| i < u64::from(count)),
        })
    }
}

impl std::fmt::Display for RegDeclaration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(".reg")?;
        for m in &self.modifiers {
            write!(f, " {m}")?;
        }
        for (i, n) in self.names.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { ", " })?;
            f.write_str(&n.name)?;
            if let Some(c) = n.count {
                write!(f, "<{c}>")?;
            }
        }
        f.write_str(";")
    }
}

impl Statement {
    fn synthesized(kind: StatementKind) -> Self {
        Statement {
            leading: None,
            text: None,
            kind,
        }
    }

    /// A new instruction statement.
    pub fn instruction(instruction: Instruction) -> Self {
        Self::synthesized(StatementKind::Instruction(instruction))
    }

    /// A new label statement.
    pub fn label(name: impl Into<SmolStr>) -> Self {
        Self::synthesized(StatementKind::Label(name.into()))
    }

    /// A new directive statement.
    pub fn directive(directive: Directive) -> Self {
        Self::synthesized(StatementKind::Directive(directive))
    }

    /// A new `{`.
    pub fn scope_open() -> Self {
        Self::synthesized(StatementKind::ScopeOpen)
    }

    /// A new `}`.
    pub fn scope_close() -> Self {
        Self::synthesized(StatementKind::ScopeClose)
    }

    pub fn kind(&self) -> &StatementKind {
        &self.kind
    }

    /// Mutable access; the statement is printed from the model from then on.
    pub fn kind_mut(&mut self) -> &mut StatementKind {
        self.text = None;
        &mut self.kind
    }

    /// Whether the statement still prints as it was written in the source.
    pub fn is_from_source(&self) -> bool {
        self.text.is_some()
    }

    pub fn as_instruction(&self) -> Option<&Instruction> {
        match &self.kind {
            StatementKind::Instruction(i) => Some(i),
            _ => None,
        }
    }

    pub fn as_label(&self) -> Option<&str> {
        match &self.kind {
            StatementKind::Label(l) => Some(l),
            _ => None,
        }
    }

    /// Byte offset of the statement's text in [`Module::source`], for statements still printed
    /// as written (`None` once changed or when synthesized). [`Module::line_at`] turns it into a
    /// line number for diagnostics.
    pub fn source_offset(&self) -> Option<u32> {
        self.text.map(|span| span.start)
    }
}

impl Module {
    /// The source text the module was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// All functions, declarations included, in source order.
    pub fn functions(&self) -> impl Iterator<Item = &Function> {
        self.items.iter().filter_map(|i| match i {
            Item::Function(f) => Some(f),
            Item::Directive(_) => None,
        })
    }

    /// The function definition or declaration named `name` (the definition if both exist).
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.function_index(name)
            .and_then(|i| match &self.items[i] {
                Item::Function(f) => Some(f),
                Item::Directive(_) => None,
            })
    }

    /// Mutable access to the function named `name` (the definition if both exist).
    pub fn function_mut(&mut self, name: &str) -> Option<&mut Function> {
        self.function_index(name)
            .and_then(|i| match &mut self.items[i] {
                Item::Function(f) => Some(f),
                Item::Directive(_) => None,
            })
    }

    pub(crate) fn function_index(&self, name: &str) -> Option<usize> {
        let mut found = None;
        for (i, item) in self.items.iter().enumerate() {
            if let Item::Function(f) = item {
                if f.name == name {
                    if f.is_definition() {
                        return Some(i);
                    }
                    found.get_or_insert(i);
                }
            }
        }
        found
    }

    fn directives(&self) -> impl Iterator<Item = &ModuleDirectiveKind> {
        self.items.iter().filter_map(|i| match i {
            Item::Directive(d) => Some(&d.kind),
            Item::Function(_) => None,
        })
    }

    /// `.version`, e.g. `7.8`.
    pub fn version(&self) -> Option<&str> {
        self.directives().find_map(|d| match d {
            ModuleDirectiveKind::Version(v) => Some(v.as_str()),
            _ => None,
        })
    }

    /// `.target` entries, e.g. `["sm_90"]`.
    pub fn target(&self) -> &[SmolStr] {
        self.directives()
            .find_map(|d| match d {
                ModuleDirectiveKind::Target(t) => Some(t.as_slice()),
                _ => None,
            })
            .unwrap_or(&[])
    }

    /// `.address_size`, 32 when absent (PTX's default).
    pub fn address_size(&self) -> u32 {
        self.directives()
            .find_map(|d| match d {
                ModuleDirectiveKind::AddressSize(a) => Some(*a),
                _ => None,
            })
            .unwrap_or(32)
    }

    /// Module-scope variables in source order.
    pub fn variables(&self) -> impl Iterator<Item = &Variable> {
        self.directives().filter_map(|d| match d {
            ModuleDirectiveKind::Variable(v) => Some(v),
            _ => None,
        })
    }

    /// Module-scope variables in source order, each with its declaration as written (without
    /// leading trivia), e.g. `.global .align 4 .b8 table[16] = {1, 2, ...};`: type, alignment,
    /// array dimensions and initializer are read from it by consumers that need them.
    pub fn variable_declarations(&self) -> impl Iterator<Item = (&Variable, &str)> {
        self.items.iter().filter_map(move |item| match item {
            Item::Directive(ModuleDirective {
                text,
                kind: ModuleDirectiveKind::Variable(variable),
                ..
            }) => Some((
                variable,
                match text {
                    DirectiveText::Source(span) => span.text(&self.source),
                    DirectiveText::Owned(owned) => owned.as_str(),
                },
            )),
            _ => None,
        })
    }

    /// The 1-based line of byte `offset` of [`Module::source`] (offsets past the end give the
    /// last line). Linear in `offset`: callers with many lookups should index lines themselves.
    pub fn line_at(&self, offset: u32) -> u32 {
        let end = (offset as usize).min(self.source.len());
        let newlines = self.source.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        u32::try_from(newlines).map_or(u32::MAX, |n| n.saturating_add(1))
    }

    /// `.file` entries: index and file name.
    pub fn files(&self) -> impl Iterator<Item = (u32, &str)> {
        self.directives().filter_map(|d| match d {
            ModuleDirectiveKind::File { index, name } => Some((*index, name.as_str())),
            _ => None,
        })
    }
}
