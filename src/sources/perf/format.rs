//! Tracepoint record layouts from tracefs: `events/<system>/<name>/format` names each field of
//! the raw record with its C declaration, byte offset, size and signedness. The perf source reads
//! the fields it needs by name through these layouts, so a kernel that moves a field keeps
//! working. Platform-neutral: the text is parsed and tested on any OS.

/// One field of a tracepoint record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C type as declared, without the name and array suffix (`unsigned long`, `char`).
    pub ty: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// `__data_loc` fields hold `(length << 16) | offset` of bytes elsewhere in the record.
    pub data_loc: bool,
    /// `N` of a `name[N]` array declaration.
    pub array_len: Option<usize>,
}

/// The layout of one tracepoint's raw record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    pub name: String,
    pub id: u32,
    pub fields: Vec<Field>,
}

impl EventFormat {
    /// Parses the text of a tracefs `format` file.
    pub fn parse(text: &str) -> Result<EventFormat, String> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for line in text.lines() {
            let t = line.trim();
            if let Some(v) = t.strip_prefix("name:") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = t.strip_prefix("ID:") {
                id = Some(
                    v.trim()
                        .parse::<u32>()
                        .map_err(|_| format!("bad tracepoint id {:?}", v.trim()))?,
                );
            } else if t.starts_with("field:") {
                fields.push(parse_field(t)?);
            }
        }
        Ok(EventFormat {
            name: name.ok_or("format has no name line")?,
            id: id.ok_or("format has no ID line")?,
            fields,
        })
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The field, or an error naming the tracepoint.
    pub fn require(&self, name: &str) -> Result<&Field, String> {
        self.field(name)
            .ok_or_else(|| format!("tracepoint {} has no field {name}", self.name))
    }
}

/// `field:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;`
fn parse_field(line: &str) -> Result<Field, String> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = v.trim().parse::<usize>().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.trim().parse::<usize>().ok();
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let bad = || format!("bad tracepoint field line {line:?}");
    let decl = decl.ok_or_else(bad)?;
    let (offset, size) = (offset.ok_or_else(bad)?, size.ok_or_else(bad)?);
    let data_loc = decl.starts_with("__data_loc ");
    let decl = decl.trim_start_matches("__data_loc ").trim();
    // the name is the last identifier, possibly followed by [N]
    let (head, array_len) = match decl.rfind('[') {
        Some(b) if decl.ends_with(']') => {
            let n = decl[b + 1..decl.len() - 1].trim();
            (decl[..b].trim_end(), n.parse::<usize>().ok())
        }
        _ => (decl, None),
    };
    let split = head
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map(|i| i + 1)
        .unwrap_or(0);
    let name = &head[split..];
    if name.is_empty() {
        return Err(bad());
    }
    let mut ty = head[..split].trim().to_string();
    if data_loc {
        // `__data_loc char[] name`: the `[]` belongs to the type
        ty = ty.trim_end_matches("[]").trim().to_string();
    }
    Ok(Field {
        name: name.to_string(),
        ty,
        offset,
        size,
        signed,
        data_loc,
        array_len,
    })
}

impl Field {
    /// The integer value of a 1/2/4/8-byte field (element `index` of an array field),
    /// sign-extended when the field is signed; `None` when the record is too short.
    pub fn int(&self, raw: &[u8], index: usize) -> Option<u64> {
        let elem = match self.array_len {
            Some(n) if n > 0 => self.size / n,
            _ => self.size,
        };
        let at = self.offset.checked_add(index.checked_mul(elem)?)?;
        let b = raw.get(at..at.checked_add(elem)?)?;
        let v = match elem {
            1 => b[0] as u64,
            2 => u16::from_le_bytes([b[0], b[1]]) as u64,
            4 => u32::from_le_bytes(b.try_into().ok()?) as u64,
            8 => u64::from_le_bytes(b.try_into().ok()?),
            _ => return None,
        };
        Some(if self.signed && elem < 8 {
            let shift = 64 - 8 * elem as u32;
            (((v << shift) as i64) >> shift) as u64
        } else {
            v
        })
    }

    /// Every element of an unsigned 8-byte array field (`unsigned long args[6]`) into `out`,
    /// as [`Field::int`] would read them one by one; elements past the record read as 0.
    pub fn u64s(&self, raw: &[u8], out: &mut [u64]) {
        let n = self.array_len.unwrap_or(1).min(out.len());
        if !self.signed && self.size == 8 * self.array_len.unwrap_or(1) {
            if let Some(b) = raw.get(self.offset..self.offset + 8 * n) {
                for (o, c) in out.iter_mut().zip(b.chunks_exact(8)) {
                    *o = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
                }
                return;
            }
        }
        for (i, o) in out.iter_mut().take(n).enumerate() {
            *o = self.int(raw, i).unwrap_or(0);
        }
    }

    /// The bytes of a string field (`char name[N]` or `__data_loc char[] name`), up to its
    /// first NUL.
    pub fn bytes<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        let b = if self.data_loc {
            let loc = raw.get(self.offset..self.offset + 4)?;
            let loc = u32::from_le_bytes(loc.try_into().ok()?);
            let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
            raw.get(off..off + len)?
        } else {
            raw.get(self.offset..self.offset + self.size)?
        };
        Some(match b.iter().position(|&c| c == 0) {
            Some(n) => &b[..n],
            None => b,
        })
    }

    /// Where a `__data_loc` field's bytes start in the record.
    pub fn data_offset(&self, raw: &[u8]) -> Option<usize> {
        let loc = raw.get(self.offset..self.offset + 4)?;
        Some((u32::from_le_bytes(loc.try_into().ok()?) & 0xffff) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYS_ENTER: &str = "name: sys_enter
ID: 443
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;
\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;

print fmt: \"NR %ld (%lx, %lx, %lx, %lx, %lx, %lx)\", REC->id, REC->args[0]
";

    const EXEC: &str = "name: sched_process_exec
ID: 365
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;
";

    #[test]
    fn parses_fields_with_arrays_and_signedness() {
        let f = EventFormat::parse(SYS_ENTER).unwrap();
        assert_eq!(f.name, "sys_enter");
        assert_eq!(f.id, 443);
        assert_eq!(f.fields.len(), 6);
        let args = f.field("args").unwrap();
        assert_eq!(
            (
                args.ty.as_str(),
                args.offset,
                args.size,
                args.array_len,
                args.signed
            ),
            ("unsigned long", 16, 48, Some(6), false)
        );
        let pid = f.field("common_pid").unwrap();
        assert_eq!((pid.ty.as_str(), pid.signed), ("int", true));
        // a record: id = -1 (8 bytes), args[2] = 0x1234
        let mut raw = vec![0u8; 64];
        raw[4..8].copy_from_slice(&(-7i32).to_le_bytes());
        raw[8..16].copy_from_slice(&(-1i64).to_le_bytes());
        raw[32..40].copy_from_slice(&0x1234u64.to_le_bytes());
        assert_eq!(f.field("id").unwrap().int(&raw, 0), Some(u64::MAX));
        assert_eq!(args.int(&raw, 2), Some(0x1234));
        assert_eq!(args.int(&raw, 1), Some(0));
        assert_eq!(pid.int(&raw, 0), Some(-7i64 as u64));
        assert_eq!(args.int(&raw[..30], 2), None);
        let mut all = [7u64; 6];
        args.u64s(&raw, &mut all);
        assert_eq!(all, [0, 0, 0x1234, 0, 0, 0]);
        let mut short = [7u64; 6];
        args.u64s(&raw[..40], &mut short);
        assert_eq!(short, [0, 0, 0x1234, 0, 0, 0]);
    }

    #[test]
    fn data_loc_strings() {
        let f = EventFormat::parse(EXEC).unwrap();
        let fname = f.field("filename").unwrap();
        assert!(fname.data_loc);
        assert_eq!(fname.ty, "char");
        let mut raw = vec![0u8; 20];
        let s = b"/bin/true\0";
        let loc = ((s.len() as u32) << 16) | 20;
        raw[8..12].copy_from_slice(&loc.to_le_bytes());
        raw.extend_from_slice(s);
        assert_eq!(fname.bytes(&raw), Some(&b"/bin/true"[..]));
        assert_eq!(fname.data_offset(&raw), Some(20));
        assert_eq!(fname.bytes(&raw[..24]), None);
    }

    #[test]
    fn bad_text_is_an_error() {
        assert!(EventFormat::parse("ID: 3\n").is_err());
        assert!(EventFormat::parse("name: x\nID: y\n").is_err());
        assert!(EventFormat::parse("name: x\nID: 1\n\tfield:int a;\toffset:;\n").is_err());
    }
}
