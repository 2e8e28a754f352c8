//! Linking the PTX of separately compiled translation units (`-fgpu-rdc`, `-rdc=true`) into one
//! module, as nvlink links their relocatable cubins: the device link of separable compilation.
//!
//! The counting clone of a kernel needs every device function it reaches, also those defined in
//! other units (a clone's callees are copied per kernel), so cuda-flux instruments the *linked*
//! program once (`device_runtime::instrument_module`), not each unit. Each unit's PTX is read as
//! tokens (`ptx_lexer::lexer`) and cut into its top-level statements; the linked module is
//!
//! 1. one header (`.version`: the highest of the units'; `.target` and `.address_size`: the
//!    units must agree), and each unit's `.file` entries, renumbered so that they stay apart
//!    (`.loc` follows);
//! 2. a prototype of every device function (`.func`) with the linkage of its definition, so that
//!    a call may precede the definition whatever the units' order; an `.extern .func` that no
//!    unit defines (`vprintf`, `malloc`) stays as declared;
//! 3. every variable definition, then the `.extern` variables that no unit defines (dynamic
//!    `.extern .shared` arrays);
//! 4. every function definition, in unit order.
//!
//! Resolution follows the ELF rules nvlink applies: an `.extern` declaration resolves to the
//! definition of the same name; of several `.weak` definitions (inline functions, templates,
//! instantiated in several units) the first is kept; two strong (`.visible`) definitions are an
//! error; a unit's internal symbols (no linking directive: `static` functions and variables)
//! that clash with another unit's symbol are renamed in that unit (`name__cf_unit<i>`), every
//! use included. Debug sections (`.section`, from `-G`) are dropped: their labels would clash.

use std::collections::{HashMap, HashSet};

use ptx_lexer::lexer::{tokenize, Lexeme, Token};
use thiserror::Error;

/// Why units' PTX cannot be linked.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PtxLinkError {
    #[error("{unit}: the PTX cannot be read at byte {at}")]
    Lex { unit: String, at: u32 },
    #[error("{unit}: unterminated top-level statement in the PTX")]
    Unterminated { unit: String },
    #[error("multiple definition of '{name}' (in {first} and {second})")]
    MultipleDefinition {
        name: String,
        first: String,
        second: String,
    },
    #[error(
        "{unit} is compiled for '{found}', {first} for '{expected}': the units cannot be linked"
    )]
    TargetMismatch {
        unit: String,
        first: String,
        found: String,
        expected: String,
    },
    #[error("no PTX to link")]
    Empty,
}

/// One unit to link: a name for messages (its source) and its PTX.
#[derive(Debug, Clone, Copy)]
pub struct Unit<'a> {
    pub name: &'a str,
    pub ptx: &'a str,
}

/// The linked module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedPtx {
    pub ptx: String,
    /// Each kernel (`.entry`) defined in the linked module and the index of its unit.
    pub kernel_units: HashMap<String, usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Version,
    Target,
    AddressSize,
    File,
    Section,
    Function { entry: bool },
    Variable,
    Other,
}

/// A top-level statement of a unit.
#[derive(Debug, Clone)]
struct Statement {
    kind: Kind,
    /// The text from its first significant token to its last.
    text: String,
    /// `visible`, `extern`, `weak`, `common` (without dots), as written.
    linkage: Vec<String>,
    /// The declared name (functions and variables).
    name: Option<String>,
    /// A function's body or a variable without `.extern`.
    defines: bool,
    /// A function's header: the text before its body's `{` (definitions only).
    header: Option<String>,
    /// `.version`: the number; `.file`: its index.
    number: Option<String>,
}

impl Statement {
    fn is_internal(&self) -> bool {
        self.linkage.is_empty()
    }

    fn is_weak(&self) -> bool {
        self.linkage.iter().any(|l| l == "weak" || l == "common")
    }
}

const LINKAGE: [&str; 4] = [".visible", ".extern", ".weak", ".common"];
const VARIABLE_SPACES: [&str; 8] = [
    ".global",
    ".const",
    ".shared",
    ".local",
    ".tex",
    ".texref",
    ".surfref",
    ".samplerref",
];

fn significant(lexemes: &[Lexeme]) -> impl Iterator<Item = (usize, &Lexeme)> {
    lexemes
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.token.is_trivia())
}

/// Cuts `source` into its top-level statements.
fn statements(unit: &str, source: &str) -> Result<Vec<Statement>, PtxLinkError> {
    let lexemes = tokenize(source).map_err(|e| PtxLinkError::Lex {
        unit: unit.to_string(),
        at: e.start,
    })?;
    let text = |l: &Lexeme| &source[l.start as usize..l.end as usize];
    let mut out = Vec::new();
    let mut index = 0;
    while index < lexemes.len() {
        if lexemes[index].token.is_trivia() {
            index += 1;
            continue;
        }
        let start = index;
        // Linking directives, then the directive that says what this is.
        let mut linkage = Vec::new();
        let mut cursor = start;
        let mut head = None;
        while cursor < lexemes.len() {
            let l = &lexemes[cursor];
            if l.token.is_trivia() {
                cursor += 1;
                continue;
            }
            let word = text(l);
            if l.token == Token::DotName && LINKAGE.contains(&word) {
                linkage.push(word[1..].to_string());
                cursor += 1;
                continue;
            }
            head = Some(word);
            break;
        }
        let kind = match head.unwrap_or("") {
            ".version" => Kind::Version,
            ".target" => Kind::Target,
            ".address_size" => Kind::AddressSize,
            ".file" => Kind::File,
            ".section" => Kind::Section,
            ".entry" => Kind::Function { entry: true },
            ".func" => Kind::Function { entry: false },
            word if VARIABLE_SPACES.contains(&word) => Kind::Variable,
            _ => Kind::Other,
        };
        // Where the statement ends: line directives at the end of their line; functions and
        // sections at the `}` closing their body (or a declaration's `;`); the rest at `;`.
        let line_directive = matches!(
            kind,
            Kind::Version | Kind::Target | Kind::AddressSize | Kind::File
        );
        let braced = matches!(kind, Kind::Function { .. } | Kind::Section);
        let mut depth = 0usize;
        let mut end = None;
        let mut body_open = None;
        let mut i = start;
        while i < lexemes.len() {
            let l = &lexemes[i];
            match l.token {
                Token::Whitespace if line_directive && i > start && text(l).contains('\n') => {
                    end = Some(i - 1);
                    break;
                }
                Token::LBrace => {
                    if depth == 0 && braced && body_open.is_none() {
                        body_open = Some(i);
                    }
                    depth += 1;
                }
                Token::RBrace => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 && braced {
                        end = Some(i);
                        break;
                    }
                }
                Token::Semicolon if depth == 0 && !line_directive => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        let end = match end {
            Some(end) => end,
            None if line_directive => lexemes.len() - 1,
            None => {
                return Err(PtxLinkError::Unterminated {
                    unit: unit.to_string(),
                })
            }
        };
        // The last significant token (a line directive's end may be a trailing comment).
        let last = (start..=end)
            .rev()
            .find(|&i| !lexemes[i].token.is_trivia())
            .unwrap_or(start);
        let span = |from: usize, to: usize| {
            source[lexemes[from].start as usize..lexemes[to].end as usize].to_string()
        };
        let inner: Vec<(usize, &Lexeme)> = significant(&lexemes[cursor..=end])
            .map(|(i, l)| (i + cursor, l))
            .collect();
        let mut name = None;
        let mut number = None;
        match kind {
            Kind::Function { .. } => {
                // `.func (.param .b32 r) name(...)`: skip the return parameters.
                let mut j = 1;
                if inner.get(j).is_some_and(|(_, l)| l.token == Token::LParen) {
                    let mut parens = 0usize;
                    while let Some((_, l)) = inner.get(j) {
                        match l.token {
                            Token::LParen => parens += 1,
                            Token::RParen => {
                                parens = parens.saturating_sub(1);
                                if parens == 0 {
                                    j += 1;
                                    break;
                                }
                            }
                            _ => {}
                        }
                        j += 1;
                    }
                }
                name = inner
                    .get(j)
                    .filter(|(_, l)| l.token == Token::Identifier)
                    .map(|(_, l)| text(l).to_string());
            }
            Kind::Variable => {
                name = inner
                    .iter()
                    .find(|(_, l)| l.token == Token::Identifier)
                    .map(|(_, l)| text(l).to_string());
            }
            Kind::Version | Kind::File => {
                number = inner.get(1).map(|(_, l)| text(l).to_string());
            }
            _ => {}
        }
        let defines = match kind {
            Kind::Function { .. } => body_open.is_some(),
            Kind::Variable => !linkage.iter().any(|l| l == "extern"),
            _ => false,
        };
        let header = match (kind, body_open) {
            (Kind::Function { .. }, Some(open)) => {
                let before = (start..open)
                    .rev()
                    .find(|&i| !lexemes[i].token.is_trivia())
                    .unwrap_or(start);
                Some(span(start, before))
            }
            _ => None,
        };
        out.push(Statement {
            kind,
            text: span(start, last),
            linkage,
            name,
            defines,
            header,
            number,
        });
        index = end + 1;
    }
    Ok(out)
}

/// `source` with every identifier in `renames` renamed, and the file index of every `.file` and
/// `.loc` raised by `file_offset`.
fn rewrite(source: &str, renames: &HashMap<String, String>, file_offset: u32) -> String {
    if renames.is_empty() && file_offset == 0 {
        return source.to_string();
    }
    let Ok(lexemes) = tokenize(source) else {
        return source.to_string();
    };
    let mut out = String::with_capacity(source.len());
    let mut after_file_directive = false;
    for l in &lexemes {
        let word = &source[l.start as usize..l.end as usize];
        match l.token {
            Token::Identifier => match renames.get(word) {
                Some(new) => out.push_str(new),
                None => out.push_str(word),
            },
            Token::DecimalInteger if after_file_directive => {
                match word
                    .parse::<u32>()
                    .ok()
                    .and_then(|n| n.checked_add(file_offset))
                {
                    Some(n) => out.push_str(&n.to_string()),
                    None => out.push_str(word),
                }
            }
            _ => out.push_str(word),
        }
        if !l.token.is_trivia() {
            after_file_directive = l.token == Token::DotName && (word == ".file" || word == ".loc");
        }
    }
    out
}

/// The identifiers of a variable declaration's initializer (after its `=`).
fn initializer_names(text: &str) -> Vec<String> {
    let Ok(lexemes) = tokenize(text) else {
        return Vec::new();
    };
    lexemes
        .iter()
        .skip_while(|l| l.token != Token::Equals)
        .filter(|l| l.token == Token::Identifier)
        .map(|l| text[l.start as usize..l.end as usize].to_string())
        .collect()
}

/// `7.8` -> (7, 8), for comparing `.version`s.
fn version_key(version: &str) -> (u32, u32) {
    let (major, minor) = version.split_once('.').unwrap_or((version, "0"));
    (major.parse().unwrap_or(0), minor.parse().unwrap_or(0))
}

/// Links `units` into one module (see the module documentation).
pub fn link(units: &[Unit<'_>]) -> Result<LinkedPtx, PtxLinkError> {
    if units.is_empty() {
        return Err(PtxLinkError::Empty);
    }
    // Pass 1: each unit's symbols, to find the internal ones that clash.
    let parsed: Vec<Vec<Statement>> = units
        .iter()
        .map(|u| statements(u.name, u.ptx))
        .collect::<Result<_, _>>()?;
    let mut owners: HashMap<&str, Vec<(usize, bool)>> = HashMap::new();
    for (i, statements) in parsed.iter().enumerate() {
        let mut seen = HashSet::new();
        for s in statements {
            if let Some(name) = s.name.as_deref() {
                if seen.insert(name) {
                    owners.entry(name).or_default().push((i, s.is_internal()));
                }
            }
        }
    }
    let mut file_offset = 0u32;
    let mut rewritten = Vec::with_capacity(units.len());
    for (i, unit) in units.iter().enumerate() {
        let mut renames = HashMap::new();
        for s in &parsed[i] {
            let Some(name) = s.name.as_deref() else {
                continue;
            };
            if !s.is_internal() || renames.contains_key(name) {
                continue;
            }
            // Renamed where another unit has the name outside (any linkage), or internally
            // before this one: the first unit keeps it.
            let clashes = owners[name]
                .iter()
                .any(|&(j, internal)| j != i && (!internal || j < i));
            if clashes {
                renames.insert(name.to_string(), format!("{name}__cf_unit{i}"));
            }
        }
        let files = parsed[i]
            .iter()
            .filter(|s| s.kind == Kind::File)
            .filter_map(|s| s.number.as_deref()?.parse::<u32>().ok())
            .max()
            .unwrap_or(0);
        let text = rewrite(unit.ptx, &renames, file_offset);
        file_offset = file_offset.saturating_add(files);
        rewritten.push(if renames.is_empty() && text == unit.ptx {
            parsed[i].clone()
        } else {
            statements(unit.name, &text)?
        });
    }

    // Pass 2: resolution. The chosen definition of every function and variable.
    let mut chosen: HashMap<String, (usize, usize)> = HashMap::new();
    for (i, statements) in rewritten.iter().enumerate() {
        for (k, s) in statements.iter().enumerate() {
            let (Some(name), true) = (s.name.as_ref(), s.defines) else {
                continue;
            };
            match chosen.get(name) {
                None => {
                    chosen.insert(name.clone(), (i, k));
                }
                Some(&(j, kept)) => {
                    let first = &rewritten[j][kept];
                    if !(first.is_weak() || s.is_weak()) {
                        return Err(PtxLinkError::MultipleDefinition {
                            name: name.clone(),
                            first: units[j].name.to_string(),
                            second: units[i].name.to_string(),
                        });
                    }
                    // A strong definition wins over a weak one, as in ELF.
                    if first.is_weak() && !s.is_weak() {
                        chosen.insert(name.clone(), (i, k));
                    }
                }
            }
        }
    }
    let is_chosen = |i: usize, k: usize| {
        rewritten[i][k]
            .name
            .as_ref()
            .and_then(|n| chosen.get(n))
            .is_some_and(|&c| c == (i, k))
    };

    // Header.
    let first = &rewritten[0];
    let header_text = |kind: Kind, statements: &[Statement]| {
        statements
            .iter()
            .find(|s| s.kind == kind)
            .map(|s| s.text.clone())
    };
    let version = rewritten
        .iter()
        .flat_map(|s| s.iter())
        .filter(|s| s.kind == Kind::Version)
        .filter_map(|s| s.number.clone())
        .max_by_key(|v| version_key(v));
    let target = header_text(Kind::Target, first);
    for (i, statements) in rewritten.iter().enumerate().skip(1) {
        let found = header_text(Kind::Target, statements);
        let normal = |t: &Option<String>| {
            t.as_deref()
                .map(|t| t.split_whitespace().collect::<String>())
        };
        if normal(&found) != normal(&target) {
            return Err(PtxLinkError::TargetMismatch {
                unit: units[i].name.to_string(),
                first: units[0].name.to_string(),
                found: found.unwrap_or_default(),
                expected: target.clone().unwrap_or_default(),
            });
        }
    }
    let mut out = String::from("//\n// Linked by cuda-flux from the PTX of ");
    out.push_str(&units.iter().map(|u| u.name).collect::<Vec<_>>().join(", "));
    out.push_str(".\n//\n\n");
    if let Some(version) = version {
        out.push_str(&format!(".version {version}\n"));
    }
    if let Some(target) = target {
        out.push_str(&target);
        out.push('\n');
    }
    if let Some(size) = header_text(Kind::AddressSize, first) {
        out.push_str(&size);
        out.push('\n');
    }
    out.push('\n');
    for statements in &rewritten {
        for s in statements.iter().filter(|s| s.kind == Kind::File) {
            out.push_str(&s.text);
            out.push('\n');
        }
    }

    // Prototypes of device functions; declarations nobody defines, once.
    let mut declared = HashSet::new();
    for (i, statements) in rewritten.iter().enumerate() {
        for (k, s) in statements.iter().enumerate() {
            let (Kind::Function { entry }, Some(name)) = (s.kind, s.name.as_ref()) else {
                continue;
            };
            if declared.contains(name) {
                continue;
            }
            if let Some(&(j, kept)) = chosen.get(name) {
                if j == i && kept == k && !entry {
                    if let Some(header) = &s.header {
                        out.push_str(header);
                        out.push_str(";\n");
                    }
                    declared.insert(name.clone());
                }
            } else if !s.defines {
                out.push_str(&s.text);
                out.push('\n');
                declared.insert(name.clone());
            }
        }
    }
    out.push('\n');

    // Variables: definitions, each after the variables its initializer names (`generic(x)`,
    // possibly of a later unit), then what nobody defines.
    let mut pending: Vec<&Statement> = Vec::new();
    for (i, statements) in rewritten.iter().enumerate() {
        for (k, s) in statements.iter().enumerate() {
            if s.kind == Kind::Variable && s.defines && is_chosen(i, k) {
                pending.push(s);
            }
        }
    }
    let variables: HashSet<&str> = pending.iter().filter_map(|s| s.name.as_deref()).collect();
    let mut emitted: HashSet<&str> = HashSet::new();
    while !pending.is_empty() {
        let ready = pending.iter().position(|s| {
            initializer_names(&s.text)
                .iter()
                .all(|n| !variables.contains(n.as_str()) || emitted.contains(n.as_str()))
        });
        // A cycle of initializers (legal for addresses) keeps its order.
        let s = pending.remove(ready.unwrap_or(0));
        out.push_str(&s.text);
        out.push('\n');
        if let Some(name) = s.name.as_deref() {
            emitted.insert(name);
        }
    }
    let mut undefined = HashSet::new();
    for statements in &rewritten {
        for s in statements {
            let (Kind::Variable, Some(name), false) = (s.kind, s.name.as_ref(), s.defines) else {
                continue;
            };
            if !chosen.contains_key(name) && undefined.insert(name.clone()) {
                out.push_str(&s.text);
                out.push('\n');
            }
        }
    }
    out.push('\n');

    // Function definitions and anything else, in unit order.
    let mut kernel_units = HashMap::new();
    for (i, statements) in rewritten.iter().enumerate() {
        for (k, s) in statements.iter().enumerate() {
            match s.kind {
                Kind::Function { entry } if s.defines && is_chosen(i, k) => {
                    if entry {
                        if let Some(name) = &s.name {
                            kernel_units.insert(name.clone(), i);
                        }
                    }
                    out.push_str(&s.text);
                    out.push_str("\n\n");
                }
                Kind::Other => {
                    out.push_str(&s.text);
                    out.push('\n');
                }
                _ => {}
            }
        }
    }
    Ok(LinkedPtx {
        ptx: out,
        kernel_units,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = r#"//
// Generated by LLVM NVPTX Back-End
//

.version 7.8
.target sm_70
.address_size 64

.weak .func  (.param .b32 func_retval0) twice(
	.param .b32 twice_param_0
)
;
.extern .func  (.param .b32 func_retval0) scale
(
	.param .b32 scale_param_0
)
;
.func  (.param .b32 func_retval0) local(
	.param .b32 local_param_0
)
;
.visible .global .align 4 .u32 counter;
.global .align 4 .u32 hidden;
.global .align 8 .u64 uses[1] = {generic(late)};
.extern .shared .align 16 .b8 dynamic[];

.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .b32 	%r<4>;
	ld.global.u32 	%r1, [counter];
	{ // callseq 0, 0
	.param .b32 param0;
	st.param.b32 	[param0+0], %r1;
	.param .b32 retval0;
	call.uni (retval0), 
	scale, 
	(
	param0
	);
	ld.param.b32 	%r2, [retval0+0];
	} // callseq 0
	ret;
}
.weak .func  (.param .b32 func_retval0) twice(
	.param .b32 twice_param_0
)
{
	.reg .b32 	%r<3>;
	ld.param.u32 	%r1, [twice_param_0];
	add.s32 	%r2, %r1, %r1;
	st.param.b32 	[func_retval0+0], %r2;
	ret;
}
.func  (.param .b32 func_retval0) local(
	.param .b32 local_param_0
)
{
	.reg .b32 	%r<3>;
	ld.global.u32 	%r1, [hidden];
	st.param.b32 	[func_retval0+0], %r1;
	ret;
}
"#;

    const B: &str = r#".version 7.8
.target sm_70
.address_size 64

.weak .func  (.param .b32 func_retval0) twice(
	.param .b32 twice_param_0
)
;
.func  (.param .b32 func_retval0) local(
	.param .b32 local_param_0
)
;
.extern .global .align 4 .u32 counter;
.global .align 4 .u32 hidden = 7;
.visible .global .align 4 .u32 late;
.extern .shared .align 16 .b8 dynamic[];

.visible .func  (.param .b32 func_retval0) scale(
	.param .b32 scale_param_0
)
{
	.reg .b32 	%r<3>;
	ld.global.u32 	%r1, [hidden];
	st.param.b32 	[func_retval0+0], %r1;
	ret;
}
.weak .func  (.param .b32 func_retval0) twice(
	.param .b32 twice_param_0
)
{
	.reg .b32 	%r<3>;
	ret;
}
.func  (.param .b32 func_retval0) local(
	.param .b32 local_param_0
)
{
	ret;
}
"#;

    fn linked() -> LinkedPtx {
        link(&[
            Unit {
                name: "a.cu",
                ptx: A,
            },
            Unit {
                name: "b.cu",
                ptx: B,
            },
        ])
        .unwrap()
    }

    fn count(haystack: &str, needle: &str) -> usize {
        haystack.matches(needle).count()
    }

    #[test]
    fn resolves_externs_keeps_one_weak_copy_and_renames_clashing_internals() {
        let linked = linked();
        let ptx = &linked.ptx;
        assert_eq!(count(ptx, ".version"), 1, "{ptx}");
        assert_eq!(count(ptx, ".target"), 1);
        // `scale`: declared with its definition's linkage before any use, defined once.
        assert!(ptx.contains(".visible .func  (.param .b32 func_retval0) scale(\n\t.param .b32 scale_param_0\n);"), "{ptx}");
        assert!(!ptx.contains(".extern .func"), "{ptx}");
        assert!(ptx.find("scale(").unwrap() < ptx.find("call.uni").unwrap());
        // One `twice` body (a's), one `counter` (a's definition, b's extern dropped).
        assert_eq!(count(ptx, "add.s32"), 1);
        assert_eq!(count(ptx, ".u32 counter;"), 1);
        assert!(!ptx.contains(".extern .global"));
        // b's internal `hidden` and `local` are renamed, every use included.
        assert!(
            ptx.contains(".global .align 4 .u32 hidden__cf_unit1 = 7;"),
            "{ptx}"
        );
        assert!(ptx.contains("[hidden__cf_unit1]"));
        assert!(ptx.contains("local__cf_unit1("));
        assert_eq!(count(ptx, ".global .align 4 .u32 hidden;"), 1);
        // An initializer naming a variable of a later unit comes after it.
        assert!(ptx.find(".u32 late;").unwrap() < ptx.find("{generic(late)}").unwrap());
        // The undefined extern shared array stays, once.
        assert_eq!(count(ptx, ".extern .shared .align 16 .b8 dynamic[];"), 1);
        assert_eq!(linked.kernel_units.get("k"), Some(&0));
        // The linked module parses, and has every definition.
        let module = ptx_lexer::parse(ptx.clone()).unwrap();
        let defined: Vec<&str> = module
            .functions()
            .filter(|f| f.is_definition())
            .map(|f| f.name())
            .collect();
        assert_eq!(defined, ["k", "twice", "local", "scale", "local__cf_unit1"]);
    }

    #[test]
    fn two_strong_definitions_are_an_error() {
        let error = link(&[
            Unit {
                name: "b.cu",
                ptx: B,
            },
            Unit {
                name: "c.cu",
                ptx: B,
            },
        ])
        .unwrap_err();
        assert_eq!(
            error,
            PtxLinkError::MultipleDefinition {
                name: "late".into(),
                first: "b.cu".into(),
                second: "c.cu".into()
            }
        );
    }

    #[test]
    fn targets_must_agree_and_file_indices_stay_apart() {
        let other = B.replace(".target sm_70", ".target sm_80");
        assert!(matches!(
            link(&[
                Unit {
                    name: "a.cu",
                    ptx: A
                },
                Unit {
                    name: "b.cu",
                    ptx: &other
                }
            ]),
            Err(PtxLinkError::TargetMismatch { .. })
        ));
        let with_files = |name: &str| {
            format!(
                ".version 7.8\n.target sm_70\n.address_size 64\n.file 1 \"{name}\"\n\
                 .visible .entry {name}_k()\n{{\n\t.loc 1 3 5\n\tret;\n}}\n"
            )
        };
        let (a, b) = (with_files("a"), with_files("b"));
        let linked = link(&[Unit { name: "a", ptx: &a }, Unit { name: "b", ptx: &b }]).unwrap();
        assert!(linked.ptx.contains(".file 1 \"a\"") && linked.ptx.contains(".file 2 \"b\""));
        assert!(linked.ptx.contains(".loc 1 3 5") && linked.ptx.contains(".loc 2 3 5"));
        assert_eq!(linked.kernel_units.get("b_k"), Some(&1));
    }
}
