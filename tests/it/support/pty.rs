//! Drives a program in a pseudo-terminal and keeps what it shows as a screen (vt100), for the
//! console's end-to-end test and its screenshots.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

pub struct PtySession {
    pub screen: Arc<Mutex<vt100::Parser>>,
    pub raw: Arc<Mutex<Vec<u8>>>,
    writer: Box<dyn Write + Send>,
    pub child: Box<dyn Child + Send + Sync>,
    _master: Box<dyn MasterPty + Send>,
}

impl PtySession {
    /// Starts `program` in the checkout's directory.
    pub fn spawn(
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
        cols: u16,
        rows: u16,
    ) -> PtySession {
        PtySession::spawn_in(
            program,
            args,
            env,
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
            cols,
            rows,
        )
    }

    /// Starts `program` in the directory `cwd`.
    pub fn spawn_in(
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
        cwd: &std::path::Path,
        cols: u16,
        rows: u16,
    ) -> PtySession {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        cmd.cwd(cwd);
        cmd.env("TERM", "xterm-256color");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = pair.slave.spawn_command(cmd).expect("spawn in pty");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let screen = Arc::new(Mutex::new(vt100::Parser::new(rows, cols, 0)));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (screen.clone(), raw.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        s.lock().unwrap().process(&buf[..n]);
                        r.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                }
            }
        });
        PtySession {
            screen,
            raw,
            writer,
            child,
            _master: pair.master,
        }
    }

    pub fn contents(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    pub fn send(&mut self, bytes: &str) {
        self.writer.write_all(bytes.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    /// Types text a character at a time, as a person would (a newline is the Enter key, `\r`).
    pub fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            let c = if c == '\n' { '\r' } else { c };
            let mut b = [0u8; 4];
            self.send(c.encode_utf8(&mut b));
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits until the screen satisfies `f`; returns the screen, or panics with it.
    pub fn wait_for(&self, what: &str, timeout: Duration, f: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.contents();
            if f(&s) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Closes the terminal (the writer and the pseudo-terminal's master: on Windows
    /// ClosePseudoConsole, which sends the program CTRL_CLOSE_EVENT, as closing a console
    /// window does) and hands back the program, which may still be ending.
    pub fn close(self) -> Box<dyn Child + Send + Sync> {
        drop(self.writer);
        drop(self._master);
        self.child
    }

    /// Waits for the program to end; its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<u32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st.exit_code());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        None
    }
}

pub const F5: &str = "\x1b[15~";
pub const RIGHT: &str = "\x1b[C";
pub const CTRL_Q: &str = "\x11";
