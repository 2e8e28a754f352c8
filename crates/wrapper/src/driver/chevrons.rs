//! Launch chevrons written with spaces (`k<< <grid, block>> >(...)`): nvcc's front end accepts
//! them, clang's lexer does not (it reads `<<` then `<`, a syntax error). cuda-flux-nvcc rewrites
//! such sources to `<<<`/`>>>` without touching the user's file: the rewritten text goes to the
//! work directory and a clang VFS overlay (`-ivfsoverlay`) serves it under the original path.
//! The overlay, rather than compiling the copy with a `#line` directive, keeps everything that
//! depends on the file's path exact: quoted includes resolve in the original directory with the
//! original search order, `__FILE__` and diagnostics name the original, and `-MD` dependency
//! files list the original (not a temporary file that make would then look for).
//!
//! What counts as a launch mirrors nvcc 11.8 (checked on small cases):
//! - an opening is `<<` then `<` with only spaces, tabs or comments between them on one line
//!   (nvcc rejects a line break there), and not after `operator` (`operator<< <T>(os, x)` names
//!   a template specialisation of `operator<<`, which nvcc accepts as such);
//! - its closing is the first `>>` then `>` (any whitespace or comments between, line breaks
//!   included, as nvcc accepts) outside parentheses, brackets and braces opened in the launch
//!   configuration; `> > >` closes nothing in nvcc and is left alone;
//! - `>> >` elsewhere is a nested template's closing (`vector<vector<vector<int>> >`), untouched;
//! - nothing inside string or character literals (raw strings included) or comments changes.
//!
//! The rewrite moves the gap after the chevrons (`<< <` becomes `<<< `), so every line keeps its
//! number and diagnostics point at the right line.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::args::InputKind;
use super::Driver;

/// A token that matters to launch syntax, with its byte span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `<<`, `>>`, `<`, `>`, a bracket, `;`: the byte(s) are in the source at `start`.
    Punct,
    /// An identifier (or keyword).
    Ident,
    /// Anything else: numbers, literals, other operators.
    Other,
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Splits a C/C++ source into tokens, skipping whitespace and comments. Only as precise as
/// launch syntax needs: literals and comments are skipped exactly (so that nothing in them is
/// taken for a chevron); all other operators are single `Other` tokens.
fn tokens(src: &[u8]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| src.get(i).copied().unwrap_or(0);
    while i < src.len() {
        let b = src[i];
        let start = i;
        match b {
            b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c => {
                i += 1;
                continue;
            }
            b'/' if at(i + 1) == b'/' => {
                // A line comment ends at a newline not escaped by a backslash.
                i += 2;
                while i < src.len() && (src[i] != b'\n' || ends_with_backslash(&src[..i])) {
                    i += 1;
                }
                continue;
            }
            b'/' if at(i + 1) == b'*' => {
                i += 2;
                while i < src.len() && !(src[i] == b'*' && at(i + 1) == b'/') {
                    i += 1;
                }
                i = (i + 2).min(src.len());
                continue;
            }
            b'"' => {
                // A raw string when the identifier right before it is a raw-string prefix.
                let raw = out.last().is_some_and(|t: &Token| {
                    t.kind == Kind::Ident
                        && t.end == i
                        && matches!(&src[t.start..t.end], b"R" | b"LR" | b"uR" | b"UR" | b"u8R")
                });
                i = if raw {
                    skip_raw_string(src, i)
                } else {
                    skip_quoted(src, i, b'"')
                };
                out.push(Token {
                    kind: Kind::Other,
                    start,
                    end: i,
                });
            }
            b'\'' => {
                i = skip_quoted(src, i, b'\'');
                out.push(Token {
                    kind: Kind::Other,
                    start,
                    end: i,
                });
            }
            b'0'..=b'9' => {
                i = skip_number(src, i);
                out.push(Token {
                    kind: Kind::Other,
                    start,
                    end: i,
                });
            }
            b'.' if at(i + 1).is_ascii_digit() => {
                i = skip_number(src, i);
                out.push(Token {
                    kind: Kind::Other,
                    start,
                    end: i,
                });
            }
            _ if is_ident_byte(b) => {
                while i < src.len() && is_ident_byte(src[i]) {
                    i += 1;
                }
                out.push(Token {
                    kind: Kind::Ident,
                    start,
                    end: i,
                });
            }
            b'<' | b'>' => {
                // Maximal munch as C++ lexes: `<<=`, `>>=`, `<=`, `>=`, `<=>` are other
                // operators; `<<<` is `<<` then `<` (clang's CUDA lexer rejoins them itself).
                let doubled = at(i + 1) == b;
                let len = match (doubled, at(i + if doubled { 2 } else { 1 })) {
                    (true, b'=') => 3,
                    (false, b'=') if b == b'<' && at(i + 2) == b'>' => 3,
                    (false, b'=') => 2,
                    (true, _) => 2,
                    (false, _) => 1,
                };
                let kind = if len == 3 || (len == 2 && !doubled) {
                    Kind::Other
                } else {
                    Kind::Punct
                };
                i += len;
                out.push(Token {
                    kind,
                    start,
                    end: i,
                });
            }
            b'(' | b')' | b'[' | b']' | b'{' | b'}' | b';' => {
                i += 1;
                out.push(Token {
                    kind: Kind::Punct,
                    start,
                    end: i,
                });
            }
            _ => {
                i += 1;
                out.push(Token {
                    kind: Kind::Other,
                    start,
                    end: i,
                });
            }
        }
    }
    out
}

fn ends_with_backslash(before: &[u8]) -> bool {
    let trimmed = before.strip_suffix(b"\r").unwrap_or(before);
    trimmed.last() == Some(&b'\\')
}

/// From the opening quote at `i`, past the closing one (or the end of the line: an unterminated
/// literal is the compiler's error to report, not ours to swallow the file with).
fn skip_quoted(src: &[u8], mut i: usize, quote: u8) -> usize {
    i += 1;
    while i < src.len() {
        match src[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    src.len()
}

/// `R"delim( ... )delim"` from the opening quote at `i`.
fn skip_raw_string(src: &[u8], i: usize) -> usize {
    let rest = &src[i + 1..];
    let Some(open) = rest.iter().position(|&b| b == b'(') else {
        return skip_quoted(src, i, b'"');
    };
    let mut close = Vec::with_capacity(open + 2);
    close.push(b')');
    close.extend_from_slice(&rest[..open]);
    close.push(b'"');
    match rest[open..].windows(close.len()).position(|w| w == close) {
        Some(at) => i + 1 + open + at + close.len(),
        None => src.len(),
    }
}

/// A preprocessing number: digits, letters, `.`, digit separators (`1'000`), exponent signs.
fn skip_number(src: &[u8], mut i: usize) -> usize {
    while i < src.len() {
        let b = src[i];
        let next = src.get(i + 1).copied().unwrap_or(0);
        if is_ident_byte(b) || b == b'.' {
            i += 1;
        } else if b == b'\'' && is_ident_byte(next) {
            i += 2;
        } else if (b == b'+' || b == b'-') && matches!(src[i - 1], b'e' | b'E' | b'p' | b'P') {
            i += 1;
        } else {
            break;
        }
    }
    i
}

/// The cheap test run on every CUDA source: is there a `<<` or `>>` followed by whitespace or a
/// comment, then the same chevron? Only then is the source tokenised.
pub fn may_need_rewrite(src: &[u8]) -> bool {
    src.windows(2).enumerate().any(|(i, pair)| {
        (pair == b"<<" || pair == b">>")
            && matches!(src.get(i + 2), Some(b' ' | b'\t' | b'\r' | b'\n' | b'/'))
            && src[i + 2..]
                .iter()
                .find(|b| !b" \t\r\n".contains(b))
                .is_some_and(|&b| b == pair[0] || b == b'/')
    })
}

/// The source with spaced launch chevrons joined, and how many launches changed; `None` when
/// nothing needs to change.
pub fn rewrite(src: &[u8]) -> Option<(Vec<u8>, usize)> {
    if !may_need_rewrite(src) {
        return None;
    }
    let toks = tokens(src);
    let text = |t: &Token| &src[t.start..t.end];
    let is = |i: usize, s: &[u8]| toks.get(i).is_some_and(|t| &src[t.start..t.end] == s);
    // (start of the first chevron, end of the second): each edit joins a pair.
    let mut edits: Vec<(usize, usize, usize)> = Vec::new();
    let mut launches = 0;
    let mut i = 0;
    while i + 1 < toks.len() {
        let opening = is(i, b"<<")
            && is(i + 1, b"<")
            && !(i > 0 && toks[i - 1].kind == Kind::Ident && text(&toks[i - 1]) == b"operator")
            && !src[toks[i].end..toks[i + 1].start].contains(&b'\n');
        if !opening {
            i += 1;
            continue;
        }
        let open_gap = (toks[i].end, toks[i + 1].start);
        // The closing: the first `>>` `>` outside brackets opened in the configuration.
        let mut depth = 0i32;
        let mut close = None;
        let mut j = i + 2;
        while j < toks.len() {
            match text(&toks[j]) {
                b"(" | b"[" | b"{" => depth += 1,
                b")" | b"]" | b"}" => {
                    depth -= 1;
                    if depth < 0 {
                        break;
                    }
                }
                b";" if depth == 0 => break,
                b">>" if depth == 0 && is(j + 1, b">") => {
                    close = Some(j);
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        // Without a closing it is not a launch nvcc would take either; leave it to the compiler.
        let Some(j) = close else {
            i += 1;
            continue;
        };
        let close_gap = (toks[j].end, toks[j + 1].start);
        let mut changed = false;
        for (gap_start, gap_end) in [open_gap, close_gap] {
            if gap_start < gap_end {
                edits.push((gap_start - 2, gap_start, gap_end));
                changed = true;
            }
        }
        launches += usize::from(changed);
        i = j + 2;
    }
    if edits.is_empty() {
        return None;
    }
    // Each edit: the chevron pair at `pair..gap_start`, the gap, the single chevron at
    // `gap_end`; written as the pair, the single chevron, then the gap.
    let mut out = Vec::with_capacity(src.len());
    let mut copied = 0;
    for (pair, gap_start, gap_end) in edits {
        out.extend_from_slice(&src[copied..pair]);
        out.extend_from_slice(&src[pair..gap_start]);
        out.push(src[gap_end]);
        out.extend_from_slice(&src[gap_start..gap_end]);
        copied = gap_end + 1;
    }
    out.extend_from_slice(&src[copied..]);
    Some((out, launches))
}

/// `#include "name"` targets of a source, as written.
fn quoted_includes(src: &[u8]) -> Vec<String> {
    src.split(|&b| b == b'\n')
        .filter_map(|line| {
            let line = std::str::from_utf8(line).ok()?.trim_start();
            let rest = line.strip_prefix('#')?.trim_start();
            let rest = rest.strip_prefix("include")?.trim_start();
            let name = rest.strip_prefix('"')?.split('"').next()?;
            Some(name.to_string())
        })
        .collect()
}

/// How many levels of `#include "..."` are followed from a CUDA source (Rodinia-style
/// `#include "kernel.cu"` is one level; deeper chains are unusual).
const INCLUDE_DEPTH: usize = 4;

/// `path` made absolute without resolving symbolic links: clang looks overlay entries up by the
/// path as given, made absolute against the working directory.
fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))
}

impl Driver {
    /// Rewrites spaced launch chevrons in the CUDA inputs and the files they include with
    /// `#include "..."` from their own directory; when any changed, writes the VFS overlay that
    /// serves the rewritten texts under the original paths and has every CUDA compilation use
    /// it. Sources that cannot be read are left to clang to report.
    pub fn rewrite_spaced_chevrons(mut self) -> Result<Self> {
        let mut pending: Vec<(PathBuf, usize)> = self
            .args
            .inputs
            .iter()
            .filter(|i| i.kind == InputKind::Cuda)
            .map(|i| (i.path.clone(), 0))
            .collect();
        let mut seen = HashSet::new();
        let mut entries = Vec::new();
        while let Some((path, depth)) = pending.pop() {
            let Ok(absolute) = absolute(&path) else {
                continue;
            };
            if !seen.insert(absolute.clone()) {
                continue;
            }
            let Ok(src) = std::fs::read(&path) else {
                continue;
            };
            if depth < INCLUDE_DEPTH {
                let dir = absolute.parent().map(Path::to_path_buf).unwrap_or_default();
                pending.extend(
                    quoted_includes(&src)
                        .into_iter()
                        .map(|name| (dir.join(name), depth + 1))
                        .filter(|(p, _)| p.is_file()),
                );
            }
            let Some((text, launches)) = rewrite(&src) else {
                continue;
            };
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let copy = self
                .work
                .path()
                .join(format!("chevrons-{}-{name}", entries.len()));
            std::fs::write(&copy, text)
                .with_context(|| format!("cannot write {}", copy.display()))?;
            self.verbose(format!(
                "[in process] {}: {launches} launch(es) written with spaced chevrons \
                 (`<< <`, `>> >`) joined for clang -> {}",
                path.display(),
                copy.display()
            ));
            entries.push(serde_json::json!({
                "type": "file",
                "name": absolute.to_string_lossy(),
                "external-contents": copy.to_string_lossy(),
            }));
        }
        if entries.is_empty() {
            return Ok(self);
        }
        // `use-external-names: false`: diagnostics, `__FILE__`, debug info and dependency files
        // name the original path, not the copy.
        let overlay = serde_json::json!({
            "version": 0,
            "case-sensitive": true,
            "use-external-names": false,
            "roots": entries,
        });
        let path = self.work.path().join("chevrons-overlay.yaml");
        std::fs::write(&path, overlay.to_string())
            .with_context(|| format!("cannot write {}", path.display()))?;
        self.overlay = Some(path);
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(src: &str) -> String {
        match rewrite(src.as_bytes()) {
            Some((text, _)) => String::from_utf8(text).unwrap(),
            None => src.to_string(),
        }
    }

    #[test]
    fn spaced_launches_are_joined() {
        assert_eq!(rewritten("k<< <1, 2>> >(d);"), "k<<< 1, 2>>> (d);");
        assert_eq!(rewritten("k << < g, b >> > (d);"), "k <<<  g, b >>>  (d);");
        assert_eq!(rewritten("k<<<1, 2>> >(d);"), "k<<<1, 2>>> (d);");
        assert_eq!(rewritten("k<< <1, 2>>>(d);"), "k<<< 1, 2>>>(d);");
        assert_eq!(
            rewritten("k<</*a*/<1, 2>>/*b*/>(d);"),
            "k<<</*a*/1, 2>>>/*b*/(d);"
        );
        // A line break inside the closing: the line count stays the same.
        let src = "k<< <1, 2>>\n>(d);\nx;";
        let out = rewritten(src);
        assert_eq!(out, "k<<< 1, 2>>>\n(d);\nx;");
        assert_eq!(src.lines().count(), out.lines().count());
        // Shifts and templates inside the configuration do not close it.
        assert_eq!(
            rewritten("k<< <n >> 1, f<int>(a[(b >> c)])>> >(d);"),
            "k<<< n >> 1, f<int>(a[(b >> c)])>>> (d);"
        );
        let (_, launches) = rewrite(b"a<< <1,1>> >(); b<< <1,1>> >();").unwrap();
        assert_eq!(launches, 2);
    }

    #[test]
    fn literals_comments_and_templates_are_untouched() {
        for src in [
            r#"const char *s = "k<< <1,1>> >(d)";"#,
            "char c = '<'; char d = '>'; // k<< <1,1>> >(d)",
            "/* k<< <1,1>> >(d) */ int x;",
            "const char *r = R\"x(k<< <1,1>> >(d) )\" )x\";",
            "const char *u = u8\"k<< <1,1>> >\";",
            // `operator<< <T>`: explicit template arguments, which nvcc accepts as such.
            "friend std::ostream &operator<< <T>(std::ostream &, const X<T> &);",
            "operator<< <int>(std::cout, x);",
            // `>> >` closing nested templates.
            "std::vector<std::vector<Y<int>> > v;",
            "a <<= 2; b >>= 1; c = a << b >> c; d = a <=> b;",
            "int n = 1'000'000; k<<<1,1>>>(d);",
            // What nvcc rejects too: a line break inside the opening, `> > >`.
            "k<<\n<1,1>>>(d);",
            "k<<<1,1> > >(d);",
            // No closing: not a launch.
            "x << <y;",
        ] {
            assert_eq!(rewritten(src), src, "{src}");
        }
        // A string that holds a closing quote and a chevron, then a real launch.
        assert_eq!(
            rewritten(r#"printf("\"<< <"); k<< <1,1>> >(d);"#),
            r#"printf("\"<< <"); k<<< 1,1>>> (d);"#
        );
        // A line comment continued by a backslash hides the next line too.
        let src = "// note \\\nk<< <1,1>> >(d);";
        assert_eq!(rewritten(src), src);
    }

    #[test]
    fn cheap_scan() {
        assert!(!may_need_rewrite(b"k<<<1,1>>>(d); a << b; c >> d;"));
        assert!(may_need_rewrite(b"k<< <1,1>>>(d);"));
        assert!(may_need_rewrite(b"k<<<1,1>>\n>(d);"));
        assert!(may_need_rewrite(b"k<</**/<1,1>>>(d);"));
    }

    #[test]
    fn quoted_includes_are_found() {
        assert_eq!(
            quoted_includes(b"#include \"a.cu\"\n  #  include \"b/c.h\" // x\n#include <d.h>\n"),
            ["a.cu", "b/c.h"]
        );
    }
}
