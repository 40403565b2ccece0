//! Strings captured at the probe: for `syscall::X:entry` probes whose clauses call
//! `copyinstr()`, a small BPF program on the kernel's `syscalls:sys_enter_X` tracepoint copies
//! the call's number, its six arguments and the strings its `char *` arguments point to (with
//! `bpf_probe_read_user_str`, in the calling thread, before the call runs) into a
//! `BPF_OUTPUT` perf event that writes into dtx's ring of that CPU. The firing then reads the
//! string as it was at the probe, also when the process has changed the buffer or exited
//! since. Everything is held by file descriptors (programs, maps, events): closing them, on any
//! exit of dtx, Ctrl-C and SIGKILL included, removes it all; nothing is written to tracefs.
//!
//! Event probes (`e:` in tracefs `dynamic_events`, Documentation/trace/eprobetrace.rst) and
//! kprobes with a `:ustring` fetch argument (kprobetrace.rst) would capture the same bytes, but
//! they need `CONFIG_KPROBE_EVENTS`, which kernels for small VMs often lack, and they outlive
//! a dtx that is killed. The program layout follows the BPF instruction set
//! (Documentation/bpf/standardization/instruction-set.rst) and the helper contracts of
//! `include/uapi/linux/bpf.h`.

use super::format::EventFormat;

/// Bytes of each captured string (dtrace's default `strsize`): longer strings are cut, and
/// end with a NUL, as `copyinstr` cuts them.
pub const STRING_BYTES: usize = 256;

/// String arguments captured per call (rename, link, symlink and mount have two paths).
pub const MAX_STRINGS: usize = 2;

/// The record the program writes: the call number, six arguments, then per string slot the
/// helper's result (bytes copied with the NUL, or a negative errno) and the bytes.
pub const RECORD_BYTES: usize = 8 + 6 * 8 + MAX_STRINGS * (8 + STRING_BYTES);

fn slot_result_at(k: usize) -> usize {
    56 + k * (8 + STRING_BYTES)
}

fn slot_bytes_at(k: usize) -> usize {
    slot_result_at(k) + 8
}

/// What a capture program needs of a `syscalls:sys_enter_X` format: the record offsets of
/// the call's arguments, and which of them (by index) are `char *` strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallLayout {
    pub nr: u16,
    pub arg_offsets: Vec<usize>,
    pub strings: Vec<usize>,
}

impl CallLayout {
    /// The layout of system call `nr` from its `sys_enter_X` tracepoint format; `None` when
    /// the call has no string argument.
    pub fn from_format(nr: u16, fmt: &EventFormat) -> Option<CallLayout> {
        let args: Vec<_> = fmt
            .fields
            .iter()
            .filter(|f| !f.name.starts_with("common_") && f.name != "__syscall_nr")
            .filter(|f| f.size == 8 && f.offset >= 16)
            .take(6)
            .collect();
        let strings: Vec<usize> = args
            .iter()
            .enumerate()
            .filter(|(_, f)| is_char_pointer(&f.ty))
            .map(|(i, _)| i)
            .take(MAX_STRINGS)
            .collect();
        if strings.is_empty() {
            return None;
        }
        Some(CallLayout {
            nr,
            arg_offsets: args.iter().map(|f| f.offset).collect(),
            strings,
        })
    }
}

/// `const char *`, `char *` (`const char __user *` in older formats).
fn is_char_pointer(ty: &str) -> bool {
    let t = ty.replace("__user", "");
    let t: Vec<&str> = t.split_whitespace().filter(|w| *w != "const").collect();
    t == ["char", "*"] || t == ["char*"]
}

use crate::bpf::asm::helper::{MAP_LOOKUP_ELEM, PERF_EVENT_OUTPUT, PROBE_READ_USER_STR};
use crate::bpf::asm::{insn, load_map, op, Insn};

/// The capture program of one call: `scratch` is a one-entry per-CPU array of
/// [`RECORD_BYTES`] bytes to build the record in, `events` the perf event array it is written
/// to (the `BPF_OUTPUT` event of the current CPU).
pub fn program(layout: &CallLayout, scratch: i32, events: i32) -> Vec<Insn> {
    let (r0, r1, r2, r3, r4, r5, r6, r7, r10) = (0, 1, 2, 3, 4, 5, 6, 7, 10);
    // r6 = the tracepoint record; r7 = the scratch record (key 0 on the stack)
    let mut p = vec![
        insn(op::MOV64_REG, r6, r1, 0, 0),
        insn(op::ST_W, r10, 0, -4, 0),
        insn(op::MOV64_REG, r2, r10, 0, 0),
        insn(op::ADD64_IMM, r2, 0, 0, -4),
    ];
    p.extend(load_map(r1, scratch));
    p.push(insn(op::CALL, 0, 0, 0, MAP_LOOKUP_ELEM));
    p.push(insn(op::JNE_IMM, r0, 0, 2, 0));
    p.push(insn(op::MOV64_IMM, r0, 0, 0, 0));
    p.push(insn(op::EXIT, 0, 0, 0, 0));
    p.push(insn(op::MOV64_REG, r7, r0, 0, 0));
    p.push(insn(op::ST_DW, r7, 0, 0, layout.nr as i32));
    for i in 0..6 {
        match layout.arg_offsets.get(i) {
            Some(&off) => {
                p.push(insn(op::LDX_DW, r1, r6, off as i16, 0));
                p.push(insn(op::STX_DW, r7, r1, 8 + 8 * i as i16, 0));
            }
            None => p.push(insn(op::ST_DW, r7, 0, 8 + 8 * i as i16, 0)),
        }
    }
    for k in 0..MAX_STRINGS {
        match layout.strings.get(k) {
            Some(&arg) => {
                p.push(insn(op::MOV64_REG, r1, r7, 0, 0));
                p.push(insn(op::ADD64_IMM, r1, 0, 0, slot_bytes_at(k) as i32));
                p.push(insn(op::MOV64_IMM, r2, 0, 0, STRING_BYTES as i32));
                p.push(insn(op::LDX_DW, r3, r6, layout.arg_offsets[arg] as i16, 0));
                p.push(insn(op::CALL, 0, 0, 0, PROBE_READ_USER_STR));
                p.push(insn(op::STX_DW, r7, r0, slot_result_at(k) as i16, 0));
            }
            None => p.push(insn(op::ST_DW, r7, 0, slot_result_at(k) as i16, 0)),
        }
    }
    // perf_event_output(ctx, events, BPF_F_CURRENT_CPU, record, size)
    p.push(insn(op::MOV64_REG, r1, r6, 0, 0));
    p.extend(load_map(r2, events));
    p.push(insn(op::MOV32_IMM, r3, 0, 0, -1));
    p.push(insn(op::MOV64_REG, r4, r7, 0, 0));
    p.push(insn(op::MOV64_IMM, r5, 0, 0, RECORD_BYTES as i32));
    p.push(insn(op::CALL, 0, 0, 0, PERF_EVENT_OUTPUT));
    // 1: the tracepoint's samples still go to the other perf events on it (a program that
    // returns 0 drops them for every event, another tool's too); dtx's event it is attached
    // through takes none
    p.push(insn(op::MOV64_IMM, r0, 0, 0, 1));
    p.push(insn(op::EXIT, 0, 0, 0, 0));
    p
}

/// A captured string: the argument's address and its bytes up to the NUL, or `None` where
/// the kernel could not read it (a bad address: the firing's fault).
pub type CapturedString<'a> = (u64, Option<&'a [u8]>);

/// One captured call, read from the raw data of a `BPF_OUTPUT` sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedCall<'a> {
    pub nr: u64,
    pub args: [u64; 6],
    /// Per string slot, the string of one `char *` argument.
    pub strings: [Option<CapturedString<'a>>; MAX_STRINGS],
}

/// Reads a record of [`program`] (`layout`'s string slots).
pub fn parse_record<'a>(raw: &'a [u8], layout: &CallLayout) -> Option<CapturedCall<'a>> {
    let u64_at =
        |o: usize| -> Option<u64> { Some(u64::from_le_bytes(raw.get(o..o + 8)?.try_into().ok()?)) };
    let mut c = CapturedCall {
        nr: u64_at(0)?,
        args: [0; 6],
        strings: [None; MAX_STRINGS],
    };
    for (i, a) in c.args.iter_mut().enumerate() {
        *a = u64_at(8 + 8 * i)?;
    }
    for (k, &arg) in layout.strings.iter().enumerate().take(MAX_STRINGS) {
        let got = u64_at(slot_result_at(k))? as i64;
        let bytes = raw.get(slot_bytes_at(k)..slot_bytes_at(k) + STRING_BYTES)?;
        let text = (got > 0).then(|| {
            let n = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            &bytes[..n]
        });
        c.strings[k] = Some((c.args[arg], text));
    }
    Some(c)
}

/// The first word of a credentials record (no system call has this number): the rest is
/// what `bpf_get_current_uid_gid` gave in the thread the record's sample names.
pub const CREDS_TAG: u64 = u64::MAX - 1;

/// Bytes of a credentials record: the tag, then `gid << 32 | uid`.
pub const CREDS_BYTES: usize = 16;

/// The x86-64 calls that can change a thread's real user or group id (`setuid(2)`,
/// `setreuid(2)`, `setresuid(2)` and their group twins; the fs ids and `setgroups` leave
/// `uid` and `gid` as they are). An `exec` of a set-id program is the other way, followed on
/// `sched:sched_process_exec`.
pub const ID_CALLS: [i32; 6] = [105, 106, 113, 114, 117, 119];

/// The credentials program: on `raw_syscalls:sys_exit` (`id_at` the offset of the call's
/// number in its record) it writes a record after each call of [`ID_CALLS`], on
/// `sched:sched_process_exec` (`id_at` `None`) after every exec, into `events` (the
/// `BPF_OUTPUT` event of the current CPU). It runs before the tracepoint's perf samples are
/// written (`perf_trace_run_bpf_submit` calls the programs first), so the thread's firing at
/// that same tracepoint, and every later one, has the ids the kernel gave it. It returns 1:
/// the tracepoint's samples still go to dtx's other events on it.
pub fn creds_program(events: i32, id_at: Option<i16>) -> Result<Vec<Insn>, String> {
    use crate::bpf::asm::helper::GET_CURRENT_UID_GID;
    use crate::bpf::asm::reg::{FP, R0, R1, R2, R3, R4, R5, R6};
    use crate::bpf::asm::Asm;
    let mut a = Asm::default();
    a.push(insn(op::MOV64_REG, R6, R1, 0, 0));
    let done = a.label();
    if let Some(at) = id_at {
        let write = a.label();
        a.load(R2, R6, at);
        for nr in ID_CALLS {
            a.jump_imm(op::JEQ, R2, nr, write);
        }
        a.goto(done);
        a.bind(write);
    }
    a.call(GET_CURRENT_UID_GID);
    a.store(FP, -8, R0);
    a.mov_imm(R1, CREDS_TAG as i64);
    a.store(FP, -16, R1);
    // perf_event_output(ctx, events, BPF_F_CURRENT_CPU, record, size)
    a.push(insn(op::MOV64_REG, R1, R6, 0, 0));
    a.extend(load_map(R2, events));
    a.push(insn(op::MOV32_IMM, R3, 0, 0, -1));
    a.push(insn(op::MOV64_REG, R4, FP, 0, 0));
    a.alu_imm(op::ADD, R4, -16);
    a.push(insn(op::MOV64_IMM, R5, 0, 0, CREDS_BYTES as i32));
    a.call(PERF_EVENT_OUTPUT);
    a.bind(done);
    a.exit_with(1);
    a.finish()
}

/// The (uid, gid) of a credentials record; `None` for any other record.
pub fn parse_creds(raw: &[u8]) -> Option<(u32, u32)> {
    let word =
        |o: usize| -> Option<u64> { Some(u64::from_le_bytes(raw.get(o..o + 8)?.try_into().ok()?)) };
    (word(0)? == CREDS_TAG).then_some(())?;
    let ids = word(8)?;
    Some((ids as u32, (ids >> 32) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENAT: &str = "name: sys_enter_openat
ID: 782
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;
\tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;
\tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;
\tfield:int flags;\toffset:32;\tsize:8;\tsigned:0;
\tfield:umode_t mode;\toffset:40;\tsize:8;\tsigned:0;

print fmt: \"dfd: 0x%08lx\"
";

    #[test]
    fn the_string_arguments_of_a_call_come_from_its_format() {
        let fmt = EventFormat::parse(OPENAT).unwrap();
        let l = CallLayout::from_format(257, &fmt).unwrap();
        assert_eq!(l.arg_offsets, vec![16, 24, 32, 40]);
        assert_eq!(l.strings, vec![1]);
        assert!(is_char_pointer("const char __user *"));
        assert!(!is_char_pointer("const struct iovec *"));
        assert!(!is_char_pointer("char"));
        // a call without strings needs no program
        let close = OPENAT
            .replace("const char * filename", "unsigned int fd2")
            .replace("sys_enter_openat", "sys_enter_close");
        assert_eq!(
            CallLayout::from_format(3, &EventFormat::parse(&close).unwrap()),
            None
        );
    }

    #[test]
    fn records_read_back_with_their_strings_and_faults() {
        let fmt = EventFormat::parse(OPENAT).unwrap();
        let l = CallLayout::from_format(257, &fmt).unwrap();
        let mut raw = vec![0u8; RECORD_BYTES + 4];
        raw[0..8].copy_from_slice(&257u64.to_le_bytes());
        raw[16..24].copy_from_slice(&0x5000u64.to_le_bytes()); // arg1
        raw[slot_result_at(0)..slot_result_at(0) + 8].copy_from_slice(&14u64.to_le_bytes());
        raw[slot_bytes_at(0)..slot_bytes_at(0) + 14].copy_from_slice(b"/etc/hostname\0");
        let c = parse_record(&raw, &l).unwrap();
        assert_eq!((c.nr, c.args[1]), (257, 0x5000));
        assert_eq!(c.strings[0], Some((0x5000, Some(&b"/etc/hostname"[..]))));
        assert_eq!(c.strings[1], None);
        // -EFAULT: the string is a fault
        raw[slot_result_at(0)..slot_result_at(0) + 8]
            .copy_from_slice(&(-14i64 as u64).to_le_bytes());
        let c = parse_record(&raw, &l).unwrap();
        assert_eq!(c.strings[0], Some((0x5000, None)));
        assert!(parse_record(&raw[..100], &l).is_none());
    }

    /// The immediates of the instructions of `p` with opcode `code`.
    fn imms(p: &[Insn], code: u8) -> Vec<i32> {
        p.iter().filter(|i| i.code == code).map(|i| i.imm).collect()
    }

    #[test]
    fn the_program_has_one_store_per_argument_and_ends_with_exit() {
        let fmt = EventFormat::parse(OPENAT).unwrap();
        let l = CallLayout::from_format(257, &fmt).unwrap();
        let p = program(&l, 7, 8);
        assert_eq!(p.last().map(|i| i.code), Some(op::EXIT));
        assert_eq!(
            imms(&p, op::CALL),
            vec![MAP_LOOKUP_ELEM, PROBE_READ_USER_STR, PERF_EVENT_OUTPUT]
        );
        // the two maps are named by descriptor
        assert_eq!(imms(&p, op::LD_IMM64), vec![7, 8]);
        const { assert!(RECORD_BYTES <= 4096) };
    }

    #[test]
    fn the_credentials_program_writes_after_id_calls_only_and_keeps_the_samples() {
        let p = creds_program(9, Some(8)).unwrap();
        assert_eq!(imms(&p, op::JMP | op::JEQ), ID_CALLS);
        assert_eq!(
            imms(&p, op::CALL),
            vec![
                crate::bpf::asm::helper::GET_CURRENT_UID_GID,
                PERF_EVENT_OUTPUT
            ]
        );
        // returns 1: dtx's own events on the tracepoint keep their samples
        let n = p.len();
        assert_eq!(
            (p[n - 2].code, p[n - 2].imm, p[n - 1].code),
            (op::MOV64_IMM, 1, op::EXIT)
        );
        // on exec: no call filter
        let e = creds_program(9, None).unwrap();
        assert!(e.iter().all(|i| i.code != op::JMP | op::JEQ));
        let mut raw = CREDS_TAG.to_le_bytes().to_vec();
        raw.extend_from_slice(&((7u64 << 32) | 65534).to_le_bytes());
        assert_eq!(parse_creds(&raw), Some((65534, 7)));
        assert_eq!(parse_creds(&raw[..12]), None);
        raw[0] = 3; // a captured call's record
        assert_eq!(parse_creds(&raw), None);
    }
}
