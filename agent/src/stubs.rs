//! The shape of the entry and return stubs, the same on every platform, as macros that write
//! one stub's assembly as a single template string for `global_asm!`; each platform's `stub!`
//! fills in the registers its calling convention lets a call clobber.

/// `pop` lines for the registers named, in the reverse order (the order that undoes `push`es
/// in the order named).
macro_rules! pops {
    () => {
        ""
    };
    ($first:literal $(, $rest:literal)*) => {
        concat!(pops!($($rest),*), "pop ", $first, "\n")
    };
}

/// One stub: its label (with the `directives` naming it: `.globl`, `.hidden`), the lines
/// `before` its frame, the frame (`rbp`), the general registers pushed in the order of `push`
/// (`[rbp-8]` the first), `reserve` bytes more for the xmm registers, each saved at its slot
/// below rbp (`xmm: [number offset, ...]`), the stack aligned, the lines of `call` that
/// pass the frame, the call of the handler (the `global_asm!` operand named `handler`), its
/// answer stored at `[rbp+8]`, the xmm registers restored, the stack back to the last pushed
/// register (`pushed` bytes below rbp), the general registers and rbp popped, then the lines
/// `after`.
macro_rules! stub_asm {
    (
        $name:literal,
        directives: [$($directive:literal),*],
        before: [$($before:literal),*],
        push: [$($reg:literal),*],
        pushed: $pushed:literal,
        reserve: $reserve:literal,
        xmm: [$($xmm:literal $off:literal),*],
        call: [$($call:literal),*],
        handler: $handler:literal,
        after: [$($after:literal),*]
    ) => {
        concat!(
            ".p2align 4\n",
            $($directive, " ", $name, "\n",)*
            $name, ":\n",
            $($before, "\n",)*
            "push rbp\n",
            "mov rbp, rsp\n",
            $("push ", $reg, "\n",)*
            "sub rsp, ", $reserve, "\n",
            $("movdqu xmmword ptr [rbp - ", $off, "], xmm", $xmm, "\n",)*
            "and rsp, -16\n",
            $($call, "\n",)*
            "call {", $handler, "}\n",
            "mov qword ptr [rbp + 8], rax\n",
            $("movdqu xmm", $xmm, ", xmmword ptr [rbp - ", $off, "]\n",)*
            "lea rsp, [rbp - ", $pushed, "]\n",
            pops!($($reg),*),
            "pop rbp\n",
            $($after, "\n",)*
        )
    };
}
