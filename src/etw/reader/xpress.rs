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
            // The match overlaps what it writes: its bytes repeat with period `offset`, so
            // copy whole periods from `start`, doubling the copy each time (a run of zeros,
            // offset 1, took a push per byte: up to 64 MB of them for a damaged buffer).
            let end = out.len() + len;
            while out.len() < end {
                let n = (out.len() - start).min(end - out.len());
                out.extend_from_within(start..start + n);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The overlapping copy, a byte at a time: what a match means.
    fn naive(input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
        let mut out: Vec<u8> = Vec::new();
        let mut ip = 0;
        let mut flags = 0u32;
        let mut flag_count = 0;
        while out.len() < limit {
            if flag_count == 0 {
                let Some(b) = input.get(ip..ip + 4) else {
                    break;
                };
                flags = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                ip += 4;
                flag_count = 32;
            }
            flag_count -= 1;
            if flags & (1 << flag_count) == 0 {
                let Some(&b) = input.get(ip) else { break };
                out.push(b);
                ip += 1;
                continue;
            }
            // matches of lengths 3..=9 only (no extended length): what the inputs below use
            let Some(mb) = input.get(ip..ip + 2) else {
                break;
            };
            let m = u16::from_le_bytes([mb[0], mb[1]]) as usize;
            ip += 2;
            let (offset, len) = ((m >> 3) + 1, (m & 7) + 3);
            if len == 10 || offset > out.len() {
                return Err("not in the naive subset".into());
            }
            for _ in 0..len.min(limit - out.len()) {
                out.push(out[out.len() - offset]);
            }
        }
        Ok(out)
    }

    #[test]
    fn overlapping_matches_repeat_their_period() {
        // offset 1 and 2 runs, and a match overlapping by a byte, each cut by the limit too
        let mut input = (0b0001_1110u32 << 24).to_le_bytes().to_vec();
        input.extend_from_slice(b"abc");
        for (offset, len) in [(1usize, 9usize), (2, 8), (8, 9), (3, 3)] {
            let m = (((offset - 1) << 3) | (len - 3)) as u16;
            input.extend_from_slice(&m.to_le_bytes());
        }
        for limit in [0, 4, 12, 17, 20, 29, 40] {
            let want = naive(&input, limit).unwrap();
            let mut out = Vec::new();
            decompress_into(&input, &mut out, limit).unwrap();
            assert_eq!(out, want, "limit {limit}");
        }
        // a long run: every byte the first one
        let mut input = (1u32 << 30).to_le_bytes().to_vec();
        input.push(b'z');
        // offset 1, length 7; then the nibble 15, the byte 255, the word 0 and the dword 2^20
        input.extend_from_slice(&[0x07, 0x00]);
        input.extend_from_slice(&[0x0F, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00]);
        let mut out = Vec::new();
        decompress_into(&input, &mut out, 1 << 20).unwrap();
        assert_eq!(out.len(), 1 << 20);
        assert!(out.iter().all(|&b| b == b'z'));
    }

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
