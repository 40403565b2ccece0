//! LZ77 "plain XPRESS" decompression (MS-XCA section 2.4), as used by compressed `.etl` buffers
//! (FORMAT.md 4.2). Bounds are checked everywhere; malformed input gives an error, never a panic.

/// Decompresses `input` into `out` (cleared first), stopping once `limit` bytes were produced or
/// the input ends. Returns an error message for malformed input (a match reaching before the start
/// of the output, or a length field cut off).
pub fn decompress_into(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), String> {
    out.clear();
    out.reserve(limit);
    let mut ip = 0usize;
    let mut flags: u32 = 0;
    let mut flag_count: u32 = 0;
    let mut last_half: Option<usize> = None;

    while out.len() < limit {
        if flag_count == 0 {
            match input.get(ip..ip + 4) {
                Some(b) => flags = u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                None => break,
            }
            ip += 4;
            flag_count = 32;
        }
        flag_count -= 1;
        if flags & (1u32 << flag_count) == 0 {
            match input.get(ip) {
                Some(&b) => out.push(b),
                None => break,
            }
            ip += 1;
            continue;
        }
        let Some(mb) = input.get(ip..ip + 2) else {
            break;
        };
        let match_bytes = u16::from_le_bytes([mb[0], mb[1]]) as usize;
        ip += 2;
        let offset = (match_bytes >> 3) + 1;
        let mut len = match_bytes & 7;
        if len == 7 {
            match last_half.take() {
                None => {
                    let b = *input.get(ip).ok_or("truncated match length nibble")?;
                    len = (b & 0x0F) as usize;
                    last_half = Some(ip);
                    ip += 1;
                }
                Some(pos) => {
                    let b = *input.get(pos).ok_or("bad match length nibble")?;
                    len = (b >> 4) as usize;
                }
            }
            if len == 15 {
                len = *input.get(ip).ok_or("truncated match length byte")? as usize;
                ip += 1;
                if len == 255 {
                    let w = input.get(ip..ip + 2).ok_or("truncated match length word")?;
                    len = u16::from_le_bytes([w[0], w[1]]) as usize;
                    ip += 2;
                    if len == 0 {
                        let d = input
                            .get(ip..ip + 4)
                            .ok_or("truncated match length dword")?;
                        len = u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize;
                        ip += 4;
                    }
                    if len < 15 + 7 {
                        return Err(format!("invalid match length {len}"));
                    }
                    len -= 15 + 7;
                }
                len += 15;
            }
            len += 7;
        }
        len += 3;
        if offset > out.len() {
            return Err(format!(
                "match offset {offset} reaches before the start of the output (at {})",
                out.len()
            ));
        }
        let len = len.min(limit - out.len());
        let start = out.len() - offset;
        if offset >= len {
            out.extend_from_within(start..start + len);
        } else {
            for i in 0..len {
                let b = out[start + i];
                out.push(b);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_matches() {
        // "abcabcabc": 3 literals, then a match of length 6 at offset 3.
        // flags: bits from the top: 0,0,0,1 then end.
        let flags: u32 = 0b0001 << 28;
        let mut input = flags.to_le_bytes().to_vec();
        input.extend_from_slice(b"abc");
        let m: u16 = ((3 - 1) << 3) | (6 - 3);
        input.extend_from_slice(&m.to_le_bytes());
        let mut out = Vec::new();
        decompress_into(&input, &mut out, 9).unwrap();
        assert_eq!(out, b"abcabcabc");
    }

    #[test]
    fn bad_offset_is_an_error() {
        let flags: u32 = 1 << 31;
        let mut input = flags.to_le_bytes().to_vec();
        input.extend_from_slice(&0x0100u16.to_le_bytes());
        let mut out = Vec::new();
        assert!(decompress_into(&input, &mut out, 100).is_err());
    }

    #[test]
    fn garbage_never_panics() {
        let mut x: u32 = 12345;
        let mut out = Vec::new();
        for n in 0..2000usize {
            let data: Vec<u8> = (0..n % 97)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            let _ = decompress_into(&data, &mut out, 4096);
            assert!(out.len() <= 4096);
        }
    }
}
