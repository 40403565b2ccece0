//! `curthread`: the `struct thread` of `dscripts/lib/base.d`, built from the firing's context
//! (thread id, CPU, process id, parent, user, name, command line). `curpsinfo` and
//! `curlwpsinfo` translate it (`dscripts/lib/psinfo.d`). The offsets are the same in both data
//! models; `tests` checks them against the compiler's layout.

use super::memory::{internal, Region};
use super::FiringCtx;

/// Offsets in `struct thread` (and its embedded `struct proc` at `T_PROC`).
pub const T_TID: usize = 0;
pub const T_STATE: usize = 8;
pub const T_CPU: usize = 12;
pub const T_PROC: usize = 16;
pub const P_PID: usize = T_PROC;
pub const P_PPID: usize = T_PROC + 4;
pub const P_UID: usize = T_PROC + 8;
pub const P_GID: usize = T_PROC + 12;
pub const P_START: usize = T_PROC + 16;
pub const P_DMODEL: usize = T_PROC + 28;
pub const P_FNAME: usize = T_PROC + 32;
pub const P_PSARGS: usize = T_PROC + 48;
pub const T_NAME: usize = 144;
/// The room of `t_name` (`lwpsinfo_t`'s `pr_tname`), its NUL included.
pub const T_NAME_LEN: usize = 64;
pub const T_START: usize = 208;
pub const T_PROCP: usize = 216;
pub const SIZE: usize = 224;

/// `t_state`: `SRUN` (runnable), `SONPROC` (running); 0 is `SSLEEP`.
pub const STATE_RUN: u32 = 1;
pub const STATE_ONPROC: u32 = 2;
/// `PR_MODEL_LP64`.
const MODEL_LP64: u32 = 2;

/// What one `struct thread` holds: a thread and its process.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadFacts<'a> {
    pub tid: u32,
    pub state: u32,
    pub cpu: u32,
    pub pid: u32,
    pub ppid: u32,
    pub uid: u32,
    pub gid: u32,
    /// Process start (ns).
    pub proc_start: u64,
    /// Thread start (ns).
    pub start: u64,
    pub fname: &'a [u8],
    pub psargs: &'a [u8],
    /// The thread's name (Thread SetName, or the name a Thread record carries), "" when none.
    pub tname: &'a [u8],
    /// The address `t_procp` holds: where this struct's `t_proc` appears to D.
    pub procp: u64,
}

fn put(buf: &mut [u8], off: usize, bytes: &[u8]) {
    buf[off..off + bytes.len()].copy_from_slice(bytes);
}

/// A NUL-terminated copy of `s` in a `char[len]` field.
fn put_str(buf: &mut [u8], off: usize, len: usize, s: &[u8]) {
    let n = s
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(s.len())
        .min(len - 1);
    buf[off..off + len].fill(0);
    buf[off..off + n].copy_from_slice(&s[..n]);
}

/// Writes a `struct thread` into the first [`SIZE`] bytes of `buf` (zeroed first).
pub fn write(buf: &mut [u8], f: &ThreadFacts<'_>) {
    let buf = &mut buf[..SIZE];
    buf.fill(0);
    put(buf, T_TID, &f.tid.to_le_bytes());
    put(buf, T_STATE, &f.state.to_le_bytes());
    put(buf, T_CPU, &f.cpu.to_le_bytes());
    put(buf, P_PID, &f.pid.to_le_bytes());
    put(buf, P_PPID, &f.ppid.to_le_bytes());
    put(buf, P_UID, &f.uid.to_le_bytes());
    put(buf, P_GID, &f.gid.to_le_bytes());
    put(buf, P_START, &f.proc_start.to_le_bytes());
    put(buf, P_DMODEL, &MODEL_LP64.to_le_bytes());
    put_str(buf, P_FNAME, 16, f.fname);
    put_str(buf, P_PSARGS, 80, f.psargs);
    put_str(buf, T_NAME, T_NAME_LEN, f.tname);
    put(buf, T_START, &f.start.to_le_bytes());
    put(buf, T_PROCP, &f.procp.to_le_bytes());
}

/// Where the `struct thread` of the firing's thread appears to D: `curthread`. Every thread
/// has its own address, as every thread has its own `kthread_t` in DTrace, so `curthread`
/// tells threads apart as a key or in a comparison; each CPU's idle thread (thread 0) is a
/// thread of its own, as for `self->` ([`FiringCtx::thread_key`]).
pub fn address(cx: &FiringCtx<'_>) -> u64 {
    if cx.tid == 0 {
        internal(Region::IdleThread, (cx.cpu as usize) << 8)
    } else {
        internal(Region::Thread, ((cx.tid & 0xffff_ffff) as usize) << 8)
    }
}

/// Writes the firing's thread into `mem` (resized to the struct), for D to see at
/// [`address`]`(cx)`.
pub fn build(mem: &mut Vec<u8>, cx: &FiringCtx<'_>) {
    let base = address(cx);
    mem.clear();
    mem.resize(SIZE, 0);
    write(
        mem,
        &ThreadFacts {
            tid: cx.tid as u32,
            state: STATE_ONPROC,
            cpu: cx.cpu,
            pid: cx.pid as u32,
            ppid: cx.ppid as u32,
            uid: cx.uid as u32,
            gid: cx.gid as u32,
            proc_start: cx.proc_start,
            start: 0,
            fname: cx.execname,
            psargs: cx.psargs,
            tname: cx.tname,
            procp: base + T_PROC as u64,
        },
    );
}

#[cfg(test)]
mod tests {
    use crate::engine::standalone::{first_ints, standalone_vm, standard_probe};
    use crate::vm::{Datum, FiringCtx, Record};

    #[test]
    fn offsets_match_the_library_layout() {
        let (mut vm, _) = standalone_vm(
            "BEGIN { trace(sizeof(struct thread)); trace(offsetof(struct thread, t_procp));
                     trace(offsetof(struct thread, t_proc) + offsetof(struct proc, p_psargs));
                     trace(offsetof(struct thread, t_proc) + offsetof(struct proc, p_dmodel));
                     trace(offsetof(struct thread, t_start));
                     trace(offsetof(struct thread, t_name)); trace(sizeof(curthread->t_name)); }",
        )
        .unwrap();
        let p = standard_probe("BEGIN").unwrap();
        vm.fire(&FiringCtx::synthetic(&p, 1, 1, b"x"));
        let got = first_ints(&vm);
        assert_eq!(
            got,
            [
                super::SIZE as i64,
                super::T_PROCP as i64,
                super::P_PSARGS as i64,
                super::P_DMODEL as i64,
                super::T_START as i64,
                super::T_NAME as i64,
                super::T_NAME_LEN as i64
            ]
        );
    }

    #[test]
    fn curpsinfo_and_curlwpsinfo_come_from_the_firing() {
        let (mut vm, _) = standalone_vm(
            "BEGIN { printf(\"%d %d %s %s %d %d %c\", curpsinfo->pr_pid, curpsinfo->pr_ppid,
                     curpsinfo->pr_fname, curpsinfo->pr_psargs, curlwpsinfo->pr_lwpid,
                     curlwpsinfo->pr_onpro, curlwpsinfo->pr_sname);
                     printf(\"%s\", curlwpsinfo->pr_tname); }",
        )
        .unwrap();
        let p = standard_probe("BEGIN").unwrap();
        let mut cx = FiringCtx::synthetic(&p, 1, 1, b"powerpnt.exe");
        cx.pid = 4242;
        cx.ppid = 7;
        cx.tid = 99;
        cx.cpu = 3;
        cx.psargs = b"\"POWERPNT.EXE\" /s deck.pptx";
        cx.tname = b"UI thread";
        vm.fire(&cx);
        let strs: Vec<String> = vm
            .records
            .iter()
            .flat_map(|(_, r)| match r {
                Record::Data { values, .. } => values
                    .iter()
                    .map(|d| match d {
                        Datum::Int { value, .. } => value.to_string(),
                        Datum::Str(s) | Datum::Bytes(s) => {
                            let n = s.iter().position(|&b| b == 0).unwrap_or(s.len());
                            String::from_utf8_lossy(&s[..n]).into_owned()
                        }
                        _ => String::new(),
                    })
                    .collect::<Vec<_>>(),
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(
            strs,
            [
                "4242",
                "7",
                "powerpnt.exe",
                "\"POWERPNT.EXE\" /s deck.pptx",
                "99",
                "3",
                "79",
                "UI thread"
            ]
        );
    }

    /// Fires `BEGIN` of `vm` as thread `tid` on `cpu`: the integers it traced, and whether a
    /// clause faulted.
    fn fire_as(vm: &mut crate::vm::Vm, tid: u64, cpu: u32) -> (Vec<i64>, bool) {
        let p = standard_probe("BEGIN").unwrap();
        let mut cx = FiringCtx::synthetic(&p, 1, 1, b"x");
        cx.tid = tid;
        cx.cpu = cpu;
        vm.records.clear();
        let res = vm.fire(&cx);
        let ints = first_ints(vm);
        (ints, !res.errors.is_empty())
    }

    #[test]
    fn curthread_is_one_per_thread_and_one_per_cpu_for_the_idle_threads() {
        let (mut vm, _) = standalone_vm(
            "BEGIN { trace((uint64_t)curthread); trace(curthread->t_cpu); trace(curthread->t_tid);
                     trace(curlwpsinfo->pr_onpro); }",
        )
        .unwrap();
        let (idle0, _) = fire_as(&mut vm, 0, 0);
        let (idle1, _) = fire_as(&mut vm, 0, 1);
        let (idle0_again, _) = fire_as(&mut vm, 0, 0);
        let (t8, _) = fire_as(&mut vm, 8, 0);
        let (t8_on_1, _) = fire_as(&mut vm, 8, 1);
        let (t12, _) = fire_as(&mut vm, 12, 1);
        // the idle threads of two CPUs are two threads; one CPU's idle thread is one thread
        assert_ne!(idle0[0], idle1[0]);
        assert_eq!(idle0[0], idle0_again[0]);
        // a thread is the same thread on any CPU, and not another thread
        assert_eq!(t8[0], t8_on_1[0]);
        assert_ne!(t8[0], t12[0]);
        assert_ne!(t8[0], idle0[0]);
        // the struct and its translation read the firing's thread and CPU
        assert_eq!(&idle1[1..], [1, 0, 1]);
        assert_eq!(&t12[1..], [1, 12, 1]);
        assert_eq!(&t8[1..], [0, 8, 0]);
    }

    #[test]
    fn another_threads_curthread_faults_rather_than_reading_this_one() {
        let (mut vm, _) = standalone_vm(
            "BEGIN /!t/ { t = curthread; trace(t->t_tid); }
             BEGIN /t != curthread/ { trace(curthread->t_tid); trace(t->t_tid); }",
        )
        .unwrap();
        assert_eq!(fire_as(&mut vm, 8, 0), (vec![8], false));
        // thread 12 reads its own struct, then faults on thread 8's: the faulting clause keeps
        // none of its records (dtrace_probe leaves the buffer's offset where it was)
        assert_eq!(fire_as(&mut vm, 12, 0), (vec![], true));
    }
}
