//! Why a name scoped to a kernel module (``nt`PsInitialSystemProcess``, ``nt`_EPROCESS``,
//! ``vmlinux`jiffies``, a leading backquote) resolves to nothing here: dtx reads no kernel
//! memory. ETW (and perf events on Linux) deliver event records, not the kernel's address
//! space, so kernel variables, their addresses and the kernel's types have nothing to come
//! from. The refusals keep dtrace's words (`failed to resolve X: Unknown symbol name`) and add
//! this reason and what dtx has instead.

/// The module scope of a name (``nt`X`` → `nt`; ``X`` with a leading backquote → the empty
/// scope, dtrace's kernel), when that module is the kernel or a kernel-mode module.
pub fn kernel_scope(name: &str) -> Option<&str> {
    let name = name
        .trim()
        .trim_start_matches("struct ")
        .trim_start_matches("union ");
    let i = name.rfind('`')?;
    let scope = name[..i].rsplit('`').next().unwrap_or("");
    let lower = scope.to_ascii_lowercase();
    // the NT kernel's images (ntoskrnl.exe, ntkrnlmp.exe...) by their stems, as D names them
    let nt_image = crate::probes::KERNEL_IMAGES
        .iter()
        .any(|k| k.strip_suffix(".exe") == Some(lower.as_str()));
    let kernel = lower.is_empty()
        || nt_image
        || matches!(
            lower.as_str(),
            "nt" | "hal" | "win32k" | "win32kbase" | "win32kfull" | "vmlinux" | "genunix" | "unix"
        )
        || lower.ends_with(".sys");
    kernel.then_some(scope)
}

/// The reason appended to a refusal of a kernel-scoped name.
pub fn why(what: &str) -> String {
    format!(
        " ({what} would be read from kernel memory, and dtx reads none: ETW delivers event \
         records, not the kernel's address space; the kernel providers' args[] (proc, sched, \
         io, syscall...) carry what the kernel records, and a pid target's own variables and \
         types resolve as pid`name)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_modules_and_the_leading_backquote_are_kernel_scopes() {
        assert_eq!(kernel_scope("nt`PsInitialSystemProcess"), Some("nt"));
        assert_eq!(kernel_scope("`KeTickCount"), Some(""));
        assert_eq!(kernel_scope("struct nt`_EPROCESS"), Some("nt"));
        assert_eq!(kernel_scope("ndis.sys`x"), Some("ndis.sys"));
        assert_eq!(kernel_scope("pid42`g_count"), None);
        assert_eq!(kernel_scope("libc.so.6`errno"), None);
        assert_eq!(kernel_scope("plain"), None);
    }
}
