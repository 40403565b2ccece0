//! Network-address subroutines: `inet_ntoa`, `inet_ntoa6` and `inet_ntop`.

use super::Fault;

/// `AF_INET`, the same on every platform.
pub const AF_INET: i64 = 2;

/// `AF_INET6` as the Windows port (and Windows' own headers) define it.
pub const AF_INET6: i64 = 23;

/// Every value `inet_ntop` accepts as `AF_INET6`: Windows' 23, illumos' 26, FreeBSD's 28 (the
/// suite's tst.inet_ntop.d declares `inline int AF_INET6 = 28`) and Linux's 10 (what dtx's
/// own `AF_INET6` is on Linux).
pub const AF_INET6_ALIASES: [i64; 4] = [AF_INET6, 26, 28, 10];

/// Builds a short string from its end towards its start, as the kernel does; writes that
/// would not fit are dropped rather than panicking.
struct Backwards {
    buf: [u8; 64],
    pos: usize,
}

impl Backwards {
    fn new() -> Self {
        Backwards {
            buf: [0; 64],
            pos: 64,
        }
    }

    fn push(&mut self, c: u8) {
        if self.pos > 0 {
            self.pos -= 1;
            self.buf[self.pos] = c;
        }
    }

    /// A byte in decimal ("0" for zero), as the dotted-quad parts are written.
    fn push_dec(&mut self, mut v: u8) {
        if v == 0 {
            self.push(b'0');
        }
        while v != 0 {
            self.push(b'0' + v % 10);
            v /= 10;
        }
    }

    /// A 16-bit group in lower-case hexadecimal without leading zeros.
    fn push_hex(&mut self, mut v: u16) {
        if v == 0 {
            self.push(b'0');
        }
        while v != 0 {
            self.push(b"0123456789abcdef"[(v % 16) as usize]);
            v /= 16;
        }
    }

    /// The dotted quad of `b[12..16]`.
    fn push_quad(&mut self, b: &[u8]) {
        for (k, &v) in b.iter().enumerate().rev() {
            self.push_dec(v);
            if k > 0 {
                self.push(b'.');
            }
        }
    }

    fn finish(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.buf[self.pos..]);
    }
}

fn ipv4(addr: &[u8], out: &mut Vec<u8>) -> Result<(), Fault> {
    let b = addr.get(..4).ok_or(Fault::BadAddr(0))?;
    let mut w = Backwards::new();
    w.push_quad(b);
    w.finish(out);
    Ok(())
}

/// The kernel's IPv6 formatting. `ntoa6` selects `inet_ntoa6`'s behaviour of printing only
/// the IPv4 part of an IPv4-mapped (`::ffff:a.b.c.d`) or IPv4-compatible (`::a.b.c.d`)
/// address.
fn ipv6(addr: &[u8], ntoa6: bool, out: &mut Vec<u8>) -> Result<(), Fault> {
    let b: &[u8; 16] = addr
        .get(..16)
        .and_then(|b| b.try_into().ok())
        .ok_or(Fault::BadAddr(0))?;

    // The longest run of zero bytes that starts on a group boundary becomes "::". This is
    // the kernel's byte-wise scan, quirks included (a single zero group is compressed too).
    let mut first_zero: i32 = -1;
    let mut try_zero: i32 = -1;
    let mut num_zero: i32 = 1;
    for i in 0..16i32 {
        let v = b[i as usize];
        if v == 0 && try_zero == -1 && i % 2 == 0 {
            try_zero = i;
            continue;
        }
        if try_zero != -1 && (v != 0 || i == 15) {
            if i - try_zero <= num_zero {
                try_zero = -1;
                continue;
            }
            first_zero = try_zero;
            num_zero = i - i % 2 - try_zero;
            try_zero = -1;
            if v == 0 && i == 15 {
                num_zero += 2;
            }
        }
    }

    let mut w = Backwards::new();
    let mapped = b[..10].iter().all(|&v| v == 0) && b[10] == 0xff && b[11] == 0xff;
    let compat = b[..12].iter().all(|&v| v == 0)
        && !(b[12] == 0 && b[13] == 0 && b[14] == 0 && (b[15] == 0 || b[15] == 1));
    let mut v6_end: i32 = 14;
    if mapped || compat {
        w.push_quad(&b[12..]);
        if ntoa6 {
            w.finish(out);
            return Ok(());
        }
        v6_end = 10;
    }

    let mut i = v6_end;
    while i >= 0 {
        if i == first_zero + num_zero - 2 {
            w.push(b':');
            w.push(b':');
            i -= num_zero - 2;
        } else {
            if i < 14 && i != first_zero - 2 {
                w.push(b':');
            }
            let k = i as usize;
            w.push_hex(u16::from_be_bytes([b[k], b[k + 1]]));
        }
        i -= 2;
    }
    w.finish(out);
    Ok(())
}

/// `inet_ntoa(addr)`: the IPv4 address in the first 4 bytes of `addr` (network order, as an
/// `ipaddr_t` is stored) as a dotted quad. A shorter `addr` is `Err(Fault::BadAddr(0))`.
pub fn inet_ntoa(addr: &[u8], out: &mut Vec<u8>) -> Result<(), Fault> {
    out.clear();
    ipv4(addr, out)
}

/// `inet_ntoa6(addr)`: the IPv6 address in the first 16 bytes of `addr` (an `in6_addr`) in
/// lower-case hexadecimal groups with one `::` for the longest zero run; an IPv4-mapped or
/// IPv4-compatible address gives just its dotted quad. A shorter `addr` is
/// `Err(Fault::BadAddr(0))`.
pub fn inet_ntoa6(addr: &[u8], out: &mut Vec<u8>) -> Result<(), Fault> {
    out.clear();
    ipv6(addr, true, out)
}

/// `inet_ntop(af, addr)`: [`inet_ntoa`] for [`AF_INET`]; for `AF_INET6` (any of
/// [`AF_INET6_ALIASES`]) the IPv6 text, with an IPv4-mapped or -compatible address written
/// as `::ffff:a.b.c.d` or `::a.b.c.d`. Any other family is `Err(Fault::IllegalOp)`.
pub fn inet_ntop(af: i64, addr: &[u8], out: &mut Vec<u8>) -> Result<(), Fault> {
    out.clear();
    // The kernel narrows the family to an int.
    let af = af as i32 as i64;
    if af == AF_INET {
        ipv4(addr, out)
    } else if AF_INET6_ALIASES.contains(&af) {
        ipv6(addr, false, out)
    } else {
        Err(Fault::IllegalOp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(set: &[(usize, u8)]) -> [u8; 16] {
        let mut a = [0u8; 16];
        for &(i, v) in set {
            a[i] = v;
        }
        a
    }

    /// The addresses tst.inet_ntoa6.d and tst.inet_ntop.d build.
    fn suite_v6() -> Vec<[u8; 16]> {
        vec![
            v6(&[
                (0, 0xfe),
                (1, 0x80),
                (8, 0x02),
                (9, 0x14),
                (10, 0x4f),
                (11, 0xff),
                (12, 0xfe),
                (13, 0x0b),
                (14, 0x76),
                (15, 0xc8),
            ]),
            v6(&[
                (0, 0x10),
                (1, 0x80),
                (10, 0x08),
                (11, 0x08),
                (13, 0x0c),
                (14, 0x41),
                (15, 0x7a),
            ]),
            v6(&[(15, 0x01)]),
            v6(&[]),
            v6(&[(12, 0x7f), (15, 0x01)]),
            v6(&[(10, 0xff), (11, 0xff), (12, 0x7f), (15, 0x01)]),
            v6(&[(10, 0xff), (11, 0xfe), (12, 0x7f), (15, 0x01)]),
            [0xff; 16],
        ]
    }

    fn text(r: Result<(), Fault>, out: &[u8]) -> String {
        r.unwrap();
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn inet_ntoa_suite() {
        // tst.inet_ntoa.d: *ip = htonl(x) stores x big-endian.
        let mut out = Vec::new();
        for (x, want) in [
            (0xc0a80117u32, "192.168.1.23"),
            (0x7f000001, "127.0.0.1"),
            (0xffffffff, "255.255.255.255"),
            (0, "0.0.0.0"),
        ] {
            let r = inet_ntoa(&x.to_be_bytes(), &mut out);
            assert_eq!(text(r, &out), want);
            let r = inet_ntop(AF_INET, &x.to_be_bytes(), &mut out);
            assert_eq!(text(r, &out), want);
        }
    }

    #[test]
    fn inet_ntoa6_suite() {
        let want = [
            "fe80::214:4fff:fe0b:76c8",
            "1080::808:c:417a",
            "::1",
            "::",
            "127.0.0.1",
            "127.0.0.1",
            "::fffe:7f00:1",
        ];
        let mut out = Vec::new();
        for (a, w) in suite_v6().iter().zip(want) {
            let r = inet_ntoa6(a, &mut out);
            assert_eq!(text(r, &out), w);
        }
    }

    #[test]
    fn inet_ntop_suite() {
        let want = [
            "fe80::214:4fff:fe0b:76c8",
            "1080::808:c:417a",
            "::1",
            "::",
            "::127.0.0.1",
            "::ffff:127.0.0.1",
            "::fffe:7f00:1",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ];
        let mut out = Vec::new();
        for af in AF_INET6_ALIASES {
            for (a, w) in suite_v6().iter().zip(want) {
                let r = inet_ntop(af, a, &mut out);
                assert_eq!(text(r, &out), w);
            }
        }
    }

    #[test]
    fn inet_ntop_errors() {
        let mut out = Vec::new();
        // err.inet_ntopbadarg.d
        assert_eq!(inet_ntop(-1, &[0; 16], &mut out), Err(Fault::IllegalOp));
        // AF_UNIX (1) is no internet family anywhere
        assert_eq!(inet_ntop(1, &[0; 16], &mut out), Err(Fault::IllegalOp));
        assert_eq!(
            inet_ntop(AF_INET, &[1, 2, 3], &mut out),
            Err(Fault::BadAddr(0))
        );
        assert_eq!(
            inet_ntop(AF_INET6, &[0; 15], &mut out),
            Err(Fault::BadAddr(0))
        );
        assert_eq!(inet_ntoa(&[], &mut out), Err(Fault::BadAddr(0)));
        assert_eq!(inet_ntoa6(&[0; 4], &mut out), Err(Fault::BadAddr(0)));
        // The family is narrowed to an int.
        let r = inet_ntop((1 << 32) | AF_INET, &[10, 0, 0, 1], &mut out);
        assert_eq!(text(r, &out), "10.0.0.1");
    }

    #[test]
    fn inet_ntop_more() {
        let mut out = Vec::new();
        let mut t = |a: [u8; 16]| {
            let r = inet_ntop(AF_INET6, &a, &mut out);
            text(r, &out)
        };
        assert_eq!(
            t(v6(&[(0, 0x20), (1, 0x01), (2, 0x0d), (3, 0xb8), (15, 1)])),
            "2001:db8::1"
        );
        assert_eq!(t(v6(&[(0, 0xff), (1, 0x02), (15, 1)])), "ff02::1");
        assert_eq!(t(v6(&[(0, 0xfe), (1, 0x80)])), "fe80::");
        // Extra bytes after the address are ignored.
        let mut long = [0u8; 20];
        long[15] = 1;
        assert_eq!(text(inet_ntoa6(&long, &mut out), &out), "::1");
    }

    #[test]
    fn ipv6_never_panics() {
        let mut out = Vec::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..50000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut a = [0u8; 16];
            for (k, b) in a.iter_mut().enumerate() {
                // Mostly zeros, to exercise the zero-run logic.
                let r = (seed.rotate_left(k as u32 * 4) & 0xf) as u8;
                *b = if r < 10 { 0 } else { r.wrapping_mul(37) };
            }
            inet_ntop(AF_INET6, &a, &mut out).unwrap();
            assert!(!out.is_empty() && out.len() <= 45);
            inet_ntoa6(&a, &mut out).unwrap();
            assert!(!out.is_empty() && out.len() <= 45);
        }
    }
}
