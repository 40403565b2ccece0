//! Running child processes with a timeout, reading stdout and stderr
//! concurrently, and killing whole process groups on Unix.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Most bytes kept per output stream; the rest is read and dropped.
const OUTPUT_CAP: usize = 64 << 20;
/// How long to wait for the output pipes to close after the child exited
/// (a leftover grandchild may still hold them open).
const PIPE_GRACE: Duration = Duration::from_secs(3);

/// How a test process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Exited(i32),
    /// Killed by a signal (number, core dumped); Unix only.
    #[cfg_attr(not(unix), allow(dead_code))]
    Signal(i32, bool),
    Timeout,
    SpawnError(String),
    WaitError(String),
}

/// Everything the runner needs to judge one run.
#[derive(Debug)]
pub struct Outcome {
    pub status: Status,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub truncated: bool,
}

/// Put the child in a process group of its own (Unix) so the whole group can
/// be killed.
fn isolate(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    #[cfg(not(unix))]
    {
        let _ = cmd;
    }
}

/// Kill the child's whole process group (Unix; the child must have been
/// started by `isolate`), then the child itself.  Does not reap it.
fn kill_tree(child: &mut Child) {
    kill_group(child.id());
    let _ = child.kill();
}

/// Send SIGKILL to process group `pgid` through the `kill` utility (the
/// runner uses no libc bindings).  Only call it while the group is known to
/// exist, i.e. before its leader was reaped or while members remain.
#[cfg(unix)]
fn kill_group(pgid: u32) {
    if pgid == 0 {
        return;
    }
    let _ = Command::new("kill")
        .args(["-s", "KILL", "--"])
        .arg(format!("-{pgid}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[cfg(not(unix))]
fn kill_group(_pgid: u32) {}

fn describe(status: ExitStatus) -> Status {
    if let Some(code) = status.code() {
        return Status::Exited(code);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return Status::Signal(sig, status.core_dumped());
        }
    }
    Status::WaitError(format!("unrecognised wait status {status:?}"))
}

struct Sink {
    data: Mutex<(Vec<u8>, bool)>,
}

fn reader<R: Read + Send + 'static>(mut src: R, sink: Arc<Sink>, done: mpsc::Sender<()>) {
    thread::spawn(move || {
        let mut buf = [0u8; 16384];
        loop {
            match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let mut g = match sink.data.lock() {
                        Ok(g) => g,
                        Err(p) => p.into_inner(),
                    };
                    let room = OUTPUT_CAP.saturating_sub(g.0.len());
                    let take = n.min(room);
                    g.0.extend_from_slice(&buf[..take]);
                    if take < n {
                        g.1 = true;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = done.send(());
    });
}

fn take(sink: &Arc<Sink>) -> (Vec<u8>, bool) {
    let mut g = match sink.data.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    (std::mem::take(&mut g.0), g.1)
}

/// Run `program args` in `cwd` with stdin from the null device, capturing
/// stdout and stderr, killing the process group after `timeout`.
pub fn run(program: &OsString, args: &[OsString], cwd: &Path, timeout: Duration) -> Outcome {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    isolate(&mut cmd);
    let start = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Outcome {
                status: Status::SpawnError(e.to_string()),
                stdout: Vec::new(),
                stderr: Vec::new(),
                truncated: false,
            }
        }
    };
    let out = Arc::new(Sink {
        data: Mutex::new((Vec::new(), false)),
    });
    let err = Arc::new(Sink {
        data: Mutex::new((Vec::new(), false)),
    });
    let (tx, rx) = mpsc::channel();
    let mut readers = 0;
    if let Some(s) = child.stdout.take() {
        reader(s, out.clone(), tx.clone());
        readers += 1;
    }
    if let Some(s) = child.stderr.take() {
        reader(s, err.clone(), tx.clone());
        readers += 1;
    }
    drop(tx);

    let deadline = start + timeout;
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break describe(st),
            Ok(None) => {}
            Err(e) => {
                kill_tree(&mut child);
                let _ = child.wait();
                break Status::WaitError(e.to_string());
            }
        }
        let now = Instant::now();
        if now >= deadline {
            kill_tree(&mut child);
            let _ = child.wait();
            break Status::Timeout;
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    };

    // Collect the readers; if the pipes stay open (a leftover process of the
    // group holds them), kill the group, which still exists in that case.
    let mut finished = 0;
    let mut grace_end = Instant::now() + PIPE_GRACE;
    let mut killed = false;
    while finished < readers {
        let now = Instant::now();
        if now >= grace_end {
            if killed {
                break;
            }
            kill_group(child.id());
            killed = true;
            grace_end = Instant::now() + PIPE_GRACE;
            continue;
        }
        match rx.recv_timeout(grace_end - now) {
            Ok(()) => finished += 1,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let (stdout, t1) = take(&out);
    let (stderr, t2) = take(&err);
    Outcome {
        status,
        stdout,
        stderr,
        truncated: t1 || t2,
    }
}

/// A companion (target) program started for a test; stopped with `stop`.
pub struct Companion {
    child: Child,
}

impl Companion {
    /// Start `argv` in `cwd` with all standard streams on the null device.
    pub fn start(argv: &[OsString], cwd: &Path) -> std::io::Result<Companion> {
        let (prog, rest) = match argv.split_first() {
            Some(x) => x,
            None => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "empty companion command",
                ))
            }
        };
        let mut cmd = Command::new(prog);
        cmd.args(rest)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        isolate(&mut cmd);
        Ok(Companion {
            child: cmd.spawn()?,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kill the companion and everything in its process group, then reap it.
    pub fn stop(mut self) {
        kill_tree(&mut self.child);
        let _ = self.child.wait();
    }
}
