//! Parse errors: always with line, column and the offending token, never a panic.

use thiserror::Error;

/// Why PTX could not be parsed, and where.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{line}:{column}: {message} (at {found})")]
pub struct ParseError {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
    /// Byte offset into the source.
    pub offset: u32,
    /// What went wrong.
    pub message: String,
    /// The offending token as written (quoted), or `end of input`.
    pub found: String,
}

impl ParseError {
    pub(crate) fn at(source: &str, start: u32, end: u32, message: impl Into<String>) -> Self {
        let start_usize = (start as usize).min(source.len());
        let before = source.get(..start_usize).unwrap_or("");
        let line = before.bytes().filter(|&b| b == b'\n').count() as u32 + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() as u32 + 1;
        let found = if start_usize >= source.len() {
            "end of input".to_string()
        } else {
            let end_usize = (end as usize).clamp(start_usize, source.len());
            let token = source.get(start_usize..end_usize).unwrap_or("");
            // Keep messages one line and short, whatever the token.
            let shown: String = token
                .chars()
                .take(40)
                .flat_map(char::escape_default)
                .collect();
            format!("'{shown}'")
        };
        ParseError {
            line,
            column,
            offset: start,
            message: message.into(),
            found,
        }
    }
}
