//! A process's module map from the text of `/proc/PID/maps`.

/// One mapping: `[start, end)` maps `path` from file offset `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub executable: bool,
    /// The file, or a pseudo-name (`[heap]`, `[vdso]`), or empty for anonymous memory.
    pub path: String,
}

/// Parses every line of a maps file (`start-end perms offset dev inode path`), skipping lines it
/// cannot read. The result is sorted by start address.
pub fn parse(text: &str) -> Vec<Mapping> {
    let mut v = Vec::new();
    for line in text.lines() {
        let mut it = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(off), Some(_dev), Some(_inode)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let path = it.next().unwrap_or("").trim().to_string();
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        v.push(Mapping {
            start,
            end,
            offset,
            executable: perms.as_bytes().get(2) == Some(&b'x'),
            path,
        });
    }
    v.sort_by_key(|m| m.start);
    v
}

/// The mapping containing `addr`.
pub fn find(maps: &[Mapping], addr: u64) -> Option<&Mapping> {
    let i = maps.partition_point(|m| m.start <= addr).checked_sub(1)?;
    let m = &maps[i];
    (addr < m.end).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_finds() {
        let t = "55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1234                       /usr/bin/true\n\
                 55d0c0a01000-55d0c0a05000 r-xp 00001000 08:01 1234                       /usr/bin/true\n\
                 7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          [stack]\n\
                 7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n\
                 garbage\n";
        let m = parse(t);
        assert_eq!(m.len(), 4);
        let x = find(&m, 0x55d0c0a01234).unwrap();
        assert_eq!(
            (x.offset, x.executable, x.path.as_str()),
            (0x1000, true, "/usr/bin/true")
        );
        assert_eq!(find(&m, 0x7f0000000010).unwrap().path, "");
        assert!(find(&m, 0x1000).is_none());
        assert!(find(&m, 0x55d0c0a05000).is_none());
    }
}
