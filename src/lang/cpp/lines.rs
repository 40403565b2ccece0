//! Logical lines: a file's text with comments removed and backslash continuations
//! spliced, each line keeping its physical line number.

pub(super) struct LLine {
    /// Text with comments replaced by a space; newlines inside block comments
    /// are kept as `\n` characters.
    pub(super) text: String,
    /// Physical line number of the first line.
    pub(super) line: u32,
    /// Number of physical lines covered.
    pub(super) phys: u32,
    /// Number of backslash-newline continuations removed.
    pub(super) cont: u32,
}

#[derive(Clone, Copy)]
enum St {
    Code,
    Str(u8),
    Block(u32),
    LineComment,
}

pub(super) fn split_lines(src: &str, first_line: u32) -> Result<Vec<LLine>, (u32, String)> {
    let b = src.as_bytes();
    let n = b.len();
    let mut lines = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut line = first_line;
    let mut start = first_line;
    let mut cont = 0u32;
    let mut st = St::Code;
    let mut i = 0;
    let finish = |cur: &mut Vec<u8>, start: u32, line: u32, cont: u32, lines: &mut Vec<LLine>| {
        let bytes = std::mem::take(cur);
        let text = match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        lines.push(LLine {
            text,
            line: start,
            phys: line.saturating_sub(start).saturating_add(1),
            cont,
        });
    };
    while i < n {
        let c = b[i];
        if c == b'\\' {
            if b.get(i + 1) == Some(&b'\n') {
                i += 2;
                line = line.saturating_add(1);
                cont += 1;
                continue;
            }
            if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') {
                i += 3;
                line = line.saturating_add(1);
                cont += 1;
                continue;
            }
        }
        let next = b.get(i + 1).copied();
        match st {
            St::Code => match c {
                b'\n' => {
                    finish(&mut cur, start, line, cont, &mut lines);
                    i += 1;
                    line = line.saturating_add(1);
                    start = line;
                    cont = 0;
                }
                b'/' if next == Some(b'*') => {
                    cur.push(b' ');
                    st = St::Block(line);
                    i += 2;
                }
                b'/' if next == Some(b'/') => {
                    cur.push(b' ');
                    st = St::LineComment;
                    i += 2;
                }
                b'"' | b'\'' => {
                    cur.push(c);
                    st = St::Str(c);
                    i += 1;
                }
                _ => {
                    cur.push(c);
                    i += 1;
                }
            },
            St::Str(q) => {
                if c == b'\n' {
                    // Unterminated literal: ends at the end of the line.
                    st = St::Code;
                } else if c == b'\\' {
                    cur.push(c);
                    i += 1;
                    if let Some(&d) = b.get(i) {
                        if d != b'\n' {
                            cur.push(d);
                            i += 1;
                        }
                    }
                } else {
                    cur.push(c);
                    i += 1;
                    if c == q {
                        st = St::Code;
                    }
                }
            }
            St::Block(_) => {
                if c == b'*' && next == Some(b'/') {
                    st = St::Code;
                    i += 2;
                } else {
                    if c == b'\n' {
                        cur.push(b'\n');
                        line = line.saturating_add(1);
                    }
                    i += 1;
                }
            }
            St::LineComment => {
                if c == b'\n' {
                    st = St::Code;
                } else {
                    i += 1;
                }
            }
        }
    }
    if let St::Block(l) = st {
        return Err((l, "unterminated comment".to_string()));
    }
    if !cur.is_empty() || cont > 0 || line != start {
        finish(&mut cur, start, line, cont, &mut lines);
    }
    Ok(lines)
}
