//! Printing: unmodified elements print their source text byte for byte; changed or new ones
//! print a canonical form that `ptxas` accepts.

use std::fmt::Write as _;

use crate::module::{
    Directive, DirectiveText, Function, FunctionKind, Item, Module, Param, Span, Statement,
    StatementKind,
};

impl Module {
    /// The module as PTX text. For a module fresh from [`crate::parse`], this is the input.
    pub fn to_ptx(&self) -> String {
        let mut out = String::with_capacity(self.source.len() + self.source.len() / 8);
        self.write_ptx(&mut out);
        out
    }

    /// Appends the module's PTX text to `out`.
    pub fn write_ptx(&self, out: &mut String) {
        self.write(out, Style::AsWritten);
    }

    /// The module in canonical form: comments dropped, one statement per line, every function
    /// header and instruction printed from the model (module-level directives as written).
    /// It parses back to the same model, and `ptxas` assembles it like the original.
    pub fn to_canonical_ptx(&self) -> String {
        let mut out = String::with_capacity(self.source.len());
        self.write(&mut out, Style::Canonical);
        out.push('\n');
        out
    }

    fn write(&self, out: &mut String, style: Style) {
        let src = self.source.as_str();
        for item in &self.items {
            match item {
                Item::Directive(d) => {
                    match style.span(d.leading) {
                        Some(span) => out.push_str(span.text(src)),
                        None => out.push('\n'),
                    }
                    match &d.text {
                        DirectiveText::Source(span) => out.push_str(span.text(src)),
                        DirectiveText::Owned(text) => out.push_str(text),
                    }
                }
                Item::Function(f) => write_function(f, src, out, style),
            }
        }
        if style == Style::AsWritten {
            out.push_str(self.trailing.text(src));
        }
    }
}

/// Whether source text is used where an element has it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    AsWritten,
    Canonical,
}

impl Style {
    fn span(self, span: Option<Span>) -> Option<Span> {
        match self {
            Style::AsWritten => span,
            Style::Canonical => None,
        }
    }
}

fn write_function(f: &Function, src: &str, out: &mut String, style: Style) {
    match style.span(f.leading) {
        Some(span) => out.push_str(span.text(src)),
        None => out.push_str("\n\n"),
    }
    match style.span(f.header) {
        Some(span) => out.push_str(span.text(src)),
        None => write_header(f, out),
    }
    match (style.span(f.open), &f.body) {
        (Some(span), _) => out.push_str(span.text(src)),
        (None, Some(_)) => out.push_str("\n{"),
        (None, None) => out.push(';'),
    }
    if let Some(body) = &f.body {
        for statement in body {
            write_statement(statement, src, out, style);
        }
        match style.span(f.close) {
            Some(span) => out.push_str(span.text(src)),
            None => out.push_str("\n}"),
        }
    }
}

fn write_params(params: &[Param], out: &mut String) {
    out.push('(');
    for (i, p) in params.iter().enumerate() {
        out.push_str(if i == 0 { "\n\t" } else { ",\n\t" });
        let _ = write!(out, "{p}");
    }
    if !params.is_empty() {
        out.push('\n');
    }
    out.push(')');
}

fn write_header(f: &Function, out: &mut String) {
    for l in &f.linkage {
        out.push('.');
        out.push_str(l);
        out.push(' ');
    }
    out.push_str(match f.kind {
        FunctionKind::Entry => ".entry ",
        FunctionKind::Func => ".func ",
    });
    if let Some(ret) = &f.return_params {
        write_params(ret, out);
        out.push(' ');
    }
    out.push_str(&f.name);
    if let Some(params) = &f.params {
        write_params(params, out);
    }
    for attribute in &f.attributes {
        out.push('\n');
        out.push_str(&attribute.text);
    }
}

fn write_statement(s: &Statement, src: &str, out: &mut String, style: Style) {
    match style.span(s.leading) {
        Some(span) => out.push_str(span.text(src)),
        None if matches!(s.kind, StatementKind::Label(_)) => out.push('\n'),
        None => out.push_str("\n\t"),
    }
    if let Some(span) = style.span(s.text) {
        out.push_str(span.text(src));
        return;
    }
    let _ = match &s.kind {
        StatementKind::Label(l) => write!(out, "{l}:"),
        StatementKind::Instruction(i) => write!(out, "{i}"),
        StatementKind::Directive(Directive::Reg(r)) => write!(out, "{r}"),
        StatementKind::Directive(Directive::Loc { text, .. }) => write!(out, "{text}"),
        StatementKind::Directive(Directive::Other { label, text, .. }) => match label {
            Some(label) => write!(out, "{label}: {text}"),
            None => write!(out, "{text}"),
        },
        StatementKind::ScopeOpen => write!(out, "{{"),
        StatementKind::ScopeClose => write!(out, "}}"),
    };
}

impl Function {
    /// A declaration of this function (its canonical header and `;`), e.g. to declare a function
    /// before a caller that precedes its definition.
    pub fn declaration(&self) -> String {
        let mut out = String::new();
        write_header(self, &mut out);
        out.push(';');
        out
    }
}
