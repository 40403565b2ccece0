//! Shell-style glob matching of probe description fields (`*`, `?`, `[...]`, `\`).

/// Matches `text` against `pat`. An empty pattern matches everything (an empty field).
pub fn glob_match(pat: &str, text: &str) -> bool {
    if pat.is_empty() {
        return true;
    }
    matches(pat.as_bytes(), text.as_bytes())
}

fn matches(p: &[u8], t: &[u8]) -> bool {
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some((pi, ti));
                    pi += 1;
                    continue;
                }
                b'?' => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                b'[' => {
                    if let Some((ok, next)) = class(&p[pi..], t[ti]) {
                        if ok {
                            pi += next;
                            ti += 1;
                            continue;
                        }
                    } else if t[ti] == b'[' {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
                b'\\' if pi + 1 < p.len() => {
                    if p[pi + 1] == t[ti] {
                        pi += 2;
                        ti += 1;
                        continue;
                    }
                }
                c => {
                    if c == t[ti] {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// Matches one character against a `[...]` class; returns (matched, class length).
fn class(p: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(p.get(i), Some(b'!') | Some(b'^'));
    if negate {
        i += 1;
    }
    let mut ok = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == b']' && !first {
            return Some((ok != negate, i + 1));
        }
        first = false;
        let lo = p[i];
        if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
            if lo <= c && c <= p[i + 2] {
                ok = true;
            }
            i += 3;
        } else {
            if lo == c {
                ok = true;
            }
            i += 1;
        }
    }
    None
}

/// The file names of the NT kernel image (uniprocessor, multiprocessor, PAE builds), which
/// Microsoft's DTrace and the Windows debuggers call `nt` (``nt`_EPROCESS``, `fbt:nt::`).
pub const KERNEL_IMAGES: [&str; 4] = [
    "ntoskrnl.exe",
    "ntkrnlmp.exe",
    "ntkrnlpa.exe",
    "ntkrpamp.exe",
];

/// Whether `module` is the NT kernel's image (in any case).
pub fn is_kernel_image(module: &str) -> bool {
    KERNEL_IMAGES.iter().any(|k| k.eq_ignore_ascii_case(module))
}

/// A module field: a glob, or `nt` for the kernel image.
pub fn module_match(pat: &str, module: &str) -> bool {
    glob_match(pat, module) || (pat.eq_ignore_ascii_case("nt") && is_kernel_image(module))
}

/// A function field that may name its module (`ntoskrnl.exe`0x3c1b0`, the `syscall`
/// provider's unnamed calls): a glob, or `` nt`<glob> `` for the kernel image's.
pub fn function_match(pat: &str, function: &str) -> bool {
    if glob_match(pat, function) {
        return true;
    }
    let (Some((pm, pf)), Some((m, f))) = (pat.split_once('`'), function.split_once('`')) else {
        return false;
    };
    module_match(pm, m) && glob_match(pf, f)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("", "anything"));
        assert!(glob_match("tick-*", "tick-1s"));
        assert!(glob_match("re?d", "read"));
        assert!(glob_match("[rw]*", "write"));
        assert!(!glob_match("[!rw]*", "write"));
        assert!(glob_match("a\\*", "a*"));
        assert!(!glob_match("BEGIN", "END"));
        assert!(glob_match("*a*b*", "xxaxxbxx"));
    }
}

#[cfg(test)]
mod nt_tests {
    use super::*;

    #[test]
    fn nt_names_the_kernel_image() {
        assert!(module_match("nt", "ntoskrnl.exe"));
        assert!(module_match("NT", "ntkrnlmp.exe"));
        assert!(module_match("nt*", "ntdll.dll"));
        assert!(!module_match("nt", "ntdll.dll"));
        assert!(function_match("nt`0x3c1b0", "ntoskrnl.exe`0x3c1b0"));
        assert!(function_match("nt`0x3c*", "ntkrnlmp.exe`0x3c1b0"));
        assert!(!function_match("nt`0x3c1b0", "win32k.sys`0x3c1b0"));
        assert!(!function_match("nt`0x1", "ntoskrnl.exe`0x3c1b0"));
        assert!(function_match("Nt*", "NtReadFile"));
    }
}
