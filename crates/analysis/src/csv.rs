//! Minimal CSV (RFC 4180) writing and reading: quoted fields, doubled quotes, commas and line
//! breaks inside quotes. Enough for the tables cuda-flux writes and for nvprof's and Nsight
//! Compute's `--csv` output (every field quoted, kernel names with commas).
//!
//! Why not the `csv` crate (tried for issue 15): its reader is lenient where `compare` must not
//! be, and its positions are not the lines a user sees. It accepts a quoted field that is never
//! closed (reading the rest of the file into it: silent data loss), and its record line numbers,
//! which `compare`'s errors cite, are off after a blank line (`x,y\n\n1,2` puts `1,2` on line 2)
//! and after `\r\n` line ends (`x,y\r\n1,2` puts `1,2` on line 1). Its writer quotes as
//! [`field`] does; the whole writer is [`field`] and [`line`]. The byte order mark and number
//! parsing that spreadsheet exports need are `compare::parse`'s, outside this tokenizer.

/// One field, quoted when it needs to be.
pub fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// One line of fields, ending in `\n`.
pub fn line<S: AsRef<str>>(fields: &[S]) -> String {
    let mut out = fields
        .iter()
        .map(|f| field(f.as_ref()))
        .collect::<Vec<_>>()
        .join(",");
    out.push('\n');
    out
}

/// A record and the 1-based line it starts on.
pub type Record = (usize, Vec<String>);

/// Splits text into records. A quote that is never closed is an error naming its line.
pub fn parse(text: &str) -> Result<Vec<Record>, String> {
    let mut records = Vec::new();
    let mut fields = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut line = 1;
    let mut start_line = 1;
    let mut at_field_start = true;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    current.push('"');
                }
                '"' => quoted = false,
                '\n' => {
                    line += 1;
                    current.push(c);
                }
                _ => current.push(c),
            }
            continue;
        }
        match c {
            '"' if at_field_start => {
                quoted = true;
                at_field_start = false;
            }
            ',' => {
                fields.push(std::mem::take(&mut current));
                at_field_start = true;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                fields.push(std::mem::take(&mut current));
                if !(fields.len() == 1 && fields[0].is_empty()) {
                    records.push((start_line, std::mem::take(&mut fields)));
                }
                fields.clear();
                line += 1;
                start_line = line;
                at_field_start = true;
            }
            _ => {
                current.push(c);
                at_field_start = false;
            }
        }
    }
    if quoted {
        return Err(format!("line {start_line}: a quoted field is not closed"));
    }
    if !current.is_empty() || !fields.is_empty() {
        fields.push(current);
        records.push((start_line, fields));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let fields = ["a", "b,c", "say \"hi\"", ""];
        let text = line(&fields);
        assert_eq!(text, "a,\"b,c\",\"say \"\"hi\"\"\",\n");
        assert_eq!(
            parse(&text).unwrap(),
            vec![(1, fields.map(String::from).to_vec())]
        );
    }

    #[test]
    fn lines_blank_lines_and_errors() {
        let records = parse("x,y\r\n\n\"1\",\"2\"\n3,4").unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(records[1], (3, vec!["1".to_string(), "2".to_string()]));
        assert_eq!(records[2].0, 4);
        assert!(parse("a,\"b\nc").unwrap_err().contains("line 1"));
        // Windows line ends: each record on its own line.
        let lines: Vec<usize> = parse("h\r\n1\r\n2\r\n")
            .unwrap()
            .iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(lines, [1, 2, 3]);
    }
}
