//! fpid and CET user shadow stacks (Intel CET, Windows 10 20H1 and later; .NET 9 opts its
//! hosts in). The agent's entry stub reaches MinHook's trampoline with a `ret` to an address it
//! wrote on the stack, and a return probe replaces the function's return address with the
//! return stub's: a shadow-stack process ends at the first of either (the `ret` target is not
//! the shadow stack's). A `jmp` exit would need a register or stack memory that no function
//! entry leaves free (every register may carry an argument or a custom convention's value, and
//! the memory below `rsp` is not the thread's: Windows writes a special user APC's context
//! there, which is how .NET suspends threads under CET), so the agent is not injected into
//! such a process, and dtx says why before anything is written into it.
//!
//! Microsoft Learn: GetProcessMitigationPolicy, PROCESS_MITIGATION_USER_SHADOW_STACK_POLICY
//! (EnableUserShadowStack bit 0, AuditUserShadowStack bit 1, EnableUserShadowStackStrictMode
//! bit 4), "Hardware-enforced Stack Protection".

/// PROCESS_MITIGATION_USER_SHADOW_STACK_POLICY's EnableUserShadowStack.
pub const ENABLE_USER_SHADOW_STACK: u32 = 1 << 0;
/// Its EnableUserShadowStackStrictMode.
pub const STRICT_MODE: u32 = 1 << 4;

/// Why fpid refuses process `pid` whose user shadow-stack policy flags are `flags` (None: the
/// policy could not be read, before Windows 10 20H1 none exists): None when shadow stacks are
/// off or only audited (violations are logged, not enforced).
pub fn refusal(pid: u32, flags: Option<u32>) -> Option<String> {
    let f = flags?;
    if f & ENABLE_USER_SHADOW_STACK == 0 {
        return None;
    }
    let mode = if f & STRICT_MODE != 0 {
        "strict mode"
    } else {
        "compatibility mode"
    };
    Some(format!(
        "fpid: pid {pid} runs with CET user shadow stacks ({mode}): the agent's entry stub \
         returns into MinHook's trampoline and its return probes swap the return address, \
         which the shadow stack ends the process for; fpid is not injected (the pid provider \
         traces it with the debugger's breakpoints)"
    ))
}

/// The user shadow-stack policy flags of process `pid` (None when it cannot be read).
#[cfg(windows)]
pub fn policy(pid: u32) -> Option<u32> {
    use windows_sys::Win32::Foundation::CloseHandle;
    use windows_sys::Win32::System::Threading::{
        GetProcessMitigationPolicy, OpenProcess, ProcessUserShadowStackPolicy,
        PROCESS_QUERY_INFORMATION,
    };
    // SAFETY: plain calls with a 4-byte buffer (the policy structure is one DWORD of flags);
    // the handle is closed below
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_INFORMATION, 0, pid);
        if h.is_null() {
            return None;
        }
        let mut flags = 0u32;
        let ok = GetProcessMitigationPolicy(
            h,
            ProcessUserShadowStackPolicy,
            (&mut flags as *mut u32).cast(),
            std::mem::size_of::<u32>(),
        );
        CloseHandle(h);
        (ok != 0).then_some(flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 42, finding 11: a process with CET user shadow stacks on was injected and
    /// ended at its first probe hit. It is refused, naming the mode and why; audit-only,
    /// off, or a policy that cannot be read (an older Windows) are not refused.
    #[test]
    fn win3_11_fpid_refuses_a_process_with_cet_shadow_stacks() {
        let e = refusal(42, Some(ENABLE_USER_SHADOW_STACK)).expect("refused");
        assert!(
            e.contains("pid 42") && e.contains("CET") && e.contains("compatibility"),
            "{e}"
        );
        let e = refusal(42, Some(ENABLE_USER_SHADOW_STACK | STRICT_MODE)).expect("refused");
        assert!(e.contains("strict mode"), "{e}");
        assert_eq!(refusal(42, Some(0)), None);
        assert_eq!(refusal(42, Some(1 << 1)), None, "audit only");
        assert_eq!(refusal(42, None), None);
    }

    /// This process (no shadow-stack opt-in) reads as not refused, under Wine too.
    #[cfg(windows)]
    #[test]
    fn win3_11_this_process_is_not_refused() {
        assert_eq!(
            refusal(std::process::id(), policy(std::process::id())),
            None
        );
    }
}
