//! Issue 44: a hostile symbol server and a stranger's trace. Each test holds one bound (bytes
//! on disk, peak memory, seconds, requests, printed text) against a loopback server that
//! misbehaves (tests/it/support/symbol_server.rs) or a crafted trace or archive.

use super::*;

/// The largest total size of the files under `dir` seen while `run` runs (polled every 5 ms),
/// and what `run` gave.
fn peak_bytes_under<T>(dir: &Path, run: impl FnOnce() -> T) -> (u64, T) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (d, st) = (dir.to_path_buf(), stop.clone());
    let poll = std::thread::spawn(move || {
        let mut peak = 0u64;
        while !st.load(std::sync::atomic::Ordering::Relaxed) {
            let n: u64 = server::files_under(&d)
                .iter()
                .filter_map(|p| std::fs::metadata(p).ok())
                .map(|m| m.len())
                .sum();
            peak = peak.max(n);
            std::thread::sleep(Duration::from_millis(5));
        }
        peak
    });
    let out = run();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    (poll.join().unwrap(), out)
}

#[test]
fn hostile_endless_body_stops_at_the_bound() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let server = Server::start(HashMap::new(), Mode::Endless, Duration::ZERO);
    let (peak, (out, err, took)) = peak_bytes_under(c.dir.path(), || {
        c.run(
            Some(&srv(&c.cache(), &server)),
            &[("DTX_SYMBOL_MAX_MB", "2")],
        )
    });
    eprintln!("endless body: peak {peak} bytes on disk, {took:?}");
    assert_eq!(out, unnamed(s), "{err}");
    assert!(err.contains("larger than 2097152 bytes"), "{err}");
    // the bound, and the trace itself (a few KB); nothing left
    let trace = std::fs::metadata(&c.trace).unwrap().len();
    assert!(peak <= trace + (2 << 20) + (64 << 10), "{peak}");
    assert!(server::files_under(&c.cache()).is_empty());
    // a bound hit is that file's, not the server's: the other layouts are still asked
    assert_eq!(server.asked().len(), 3, "{:?}", server.asked());
    assert!(took < Duration::from_secs(20), "{took:?}");
    // its memory too: the endless body (and the endless file.ptr, the same server's answer
    // to every layout) is written out or refused as it comes, never held
    let path = srv(&c.cache(), &server);
    let env = [("DTX_SYMBOL_MAX_MB", "2")];
    memory_below(&c, &path, &env, "endless body and pointer", 64 << 20);
}

#[test]
fn hostile_drip_ends_at_the_deadline_and_on_ctrl_c() {
    let Some(s) = standin() else { return };
    // the download's deadline: said as too slow, the server not asked again
    let c = Case::new(s);
    let server = Server::start(HashMap::new(), Mode::Drip, Duration::ZERO);
    let (out, err, took) = c.run(
        Some(&srv(&c.cache(), &server)),
        &[("DTX_SYMBOL_DOWNLOAD_SECONDS", "2")],
    );
    assert_eq!(out, unnamed(s), "{err}");
    assert!(err.contains("answered too slowly"), "{err}");
    assert_eq!(server.asked().len(), 1, "{:?}", server.asked());
    assert!(took < Duration::from_secs(6), "{took:?}");
    assert!(server::files_under(&c.cache()).is_empty());
    // Ctrl-C during the drip: the run ends within 2 s, its partial file gone
    #[cfg(target_os = "linux")]
    ctrl_c_during_a_drip(s, &server);
}

#[cfg(target_os = "linux")]
fn ctrl_c_during_a_drip(s: &Standin, server: &Server) {
    let c = Case::new(s);
    let args = c.program_args();
    let mut child = c
        .command(&args, Some(&srv(&c.cache(), server)), &[])
        .spawn();
    // wait for the download to have begun (its partial file)
    let t0 = Instant::now();
    while server::files_under(&c.cache()).is_empty() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !server::files_under(&c.cache()).is_empty(),
        "no download began"
    );
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: the pid is our child's
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let sent = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if sent.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("dtx did not end after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let ended = sent.elapsed();
    eprintln!("Ctrl-C during a 1 byte/s download: ended in {ended:?}");
    assert!(ended < Duration::from_secs(2), "{ended:?}");
    assert!(status.code().is_some(), "{status:?}");
    assert!(
        server::files_under(&c.cache()).is_empty(),
        "{:?}",
        server::files_under(&c.cache())
    );
}

#[test]
fn hostile_pointers_stay_on_the_server() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let local = c.dir.path().join("k.pdb");
    std::fs::copy(&s.pdb, &local).unwrap();
    let other = Server::start(
        [("/k.pdb".to_string(), s.bytes.clone())].into(),
        Mode::Serve,
        Duration::ZERO,
    );
    // a local file: refused, unless the option allows it
    let server = Server::start(
        [(
            at(&s.id, "file.ptr"),
            format!("PATH:{}", local.display()).into_bytes(),
        )]
        .into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let (out, err, _) = c.run(Some(&srv(&c.cache(), &server)), &[]);
    assert_eq!(out, unnamed(s), "{err}");
    assert!(
        err.contains("local file") && err.contains("DTX_SYMBOL_POINTER_FILES"),
        "{err}"
    );
    assert!(server::files_under(&c.cache()).is_empty());
    let c2 = Case::new(s);
    let (out, err, _) = c2.run(
        Some(&srv(&c2.cache(), &server)),
        &[("DTX_SYMBOL_POINTER_FILES", "1")],
    );
    assert_eq!(out, named(), "{err}");
    // another host (another port of this machine): refused, never asked
    let c = Case::new(s);
    server.put(
        &at(&s.id, "file.ptr"),
        format!("PATH:{}/k.pdb", other.url()).into_bytes(),
    );
    let (out, err, _) = c.run(Some(&srv(&c.cache(), &server)), &[]);
    assert_eq!(out, unnamed(s), "{err}");
    assert!(err.contains("another host"), "{err}");
    assert!(other.asked().is_empty(), "{:?}", other.asked());
    // a redirect to it: the same
    let c = Case::new(s);
    let red = Server::start(
        [(
            at(&s.id, "file.ptr"),
            format!("PATH:{}/redirect/{}/k.pdb", server.url(), other.url()).into_bytes(),
        )]
        .into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let red_at = format!("{}/redirect/{}/k.pdb", red.url(), other.url());
    red.put(
        &at(&s.id, "file.ptr"),
        format!("PATH:{red_at}").into_bytes(),
    );
    let (out, err, _) = c.run(Some(&srv(&c.cache(), &red)), &[]);
    assert_eq!(out, unnamed(s), "{err}");
    assert!(
        err.contains("redirect") && err.contains("another host"),
        "{err}"
    );
    assert!(other.asked().is_empty(), "{:?}", other.asked());
}

#[test]
fn hostile_names_are_encoded_and_fail_alone() {
    let Some(s) = standin() else { return };
    // a space: percent-encoded, the file found
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_named(dir.path(), s, s.id.guid, "my app#1.pdb");
    let c = Case { dir, trace };
    let key = s.id.store_key();
    let server = Server::start(
        [(
            format!("/my%20app%231.pdb/{key}/my%20app%231.pdb"),
            s.bytes.clone(),
        )]
        .into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let (out, err, _) = c.run(Some(&srv(&c.cache(), &server)), &[]);
    assert_eq!(out, named(), "{err}");
    assert_eq!(
        server::files_under(&c.cache()),
        vec![c
            .cache()
            .join("my app#1.pdb")
            .join(&key)
            .join("my app#1.pdb")]
    );
    // a drive-relative name, and a quote: nothing asked, nothing written, the reason said
    for bad in ["C:evil.bat", "a\"b.pdb", "..", "NUL.pdb"] {
        let dir = tempfile::tempdir().unwrap();
        let trace = trace_named(dir.path(), s, s.id.guid, bad);
        let c = Case { dir, trace };
        let server = Server::start(HashMap::new(), Mode::Serve, Duration::ZERO);
        let (out, err, _) = c.run(Some(&srv(&c.cache(), &server)), &[]);
        assert_eq!(out.len(), 3, "{bad}: {out:?} {err}");
        assert!(server.asked().is_empty(), "{bad}: {:?}", server.asked());
        assert!(server::files_under(&c.cache()).is_empty(), "{bad}");
    }
}

#[test]
fn hostile_text_is_quiet_about_secrets_and_escapes() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let server = Server::start(
        [(
            at(&s.id, "file.ptr"),
            b"MSG:\x1b]0;pwned\x07\x1b[2J gone".to_vec(),
        )]
        .into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let url = format!("http://user:s3cret@127.0.0.1:{}", server.port);
    let path = format!("srv*{}*{url}", c.cache().display());
    let (out, err, _) = c.run(Some(&path), &[]);
    assert_eq!(out, unnamed(s), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    assert!(err.contains("***@127.0.0.1"), "{err}");
    assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");
    assert!(err.contains("\\x1b]0;pwned"), "{err}");
    // a server that does not answer: the reason is a timeout, retried once at most
    let stall = Server::start(HashMap::new(), Mode::Stall, Duration::ZERO);
    let url = format!("http://user:s3cret@127.0.0.1:{}", stall.port);
    let path = format!("srv*{}*{url}", c.cache().display());
    let (_, err, _) = c.run(Some(&path), &[("DTX_SYMBOL_TIMEOUT", "1")]);
    assert!(
        !err.contains("s3cret") && err.contains("no answer within"),
        "{err}"
    );
    assert!(stall.asked().len() <= 2, "{:?}", stall.asked());
}

#[test]
fn hostile_cabinet_bomb_stops_at_the_bound() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let mut big = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0".to_vec();
    big.resize(16 << 20, 0);
    let bomb = server::cabinet("ntkrnlmp.pdb", &big);
    let server = Server::start(
        [(at(&s.id, "ntkrnlmp.pd_"), bomb.clone())].into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let (peak, (out, err, _)) = peak_bytes_under(c.dir.path(), || {
        c.run(
            Some(&srv(&c.cache(), &server)),
            &[("DTX_SYMBOL_MAX_MB", "4")],
        )
    });
    eprintln!(
        "cabinet bomb: {} bytes expanding to 16 MiB; peak {peak} bytes on disk",
        bomb.len()
    );
    assert_eq!(out, unnamed(s), "{err}");
    assert!(err.contains("cabinet file expanding past"), "{err}");
    let trace = std::fs::metadata(&c.trace).unwrap().len();
    assert!(peak <= trace + bomb.len() as u64 + (64 << 10), "{peak}");
    assert!(server::files_under(&c.cache()).is_empty());
    let path = srv(&c.cache(), &server);
    memory_below(
        &c,
        &path,
        &[("DTX_SYMBOL_MAX_MB", "4")],
        "cabinet bomb",
        64 << 20,
    );
}

#[test]
fn hostile_trace_pdb_paths_are_not_opened() {
    let Some(s) = standin() else { return };
    // the trace names the stand-in's own path: over -E, not opened unless the option says so
    let dir = tempfile::tempdir().unwrap();
    let p = s.pdb.to_string_lossy().into_owned();
    let trace = trace_named(dir.path(), s, s.id.guid, &p);
    let c = Case { dir, trace };
    let (out, err, _) = c.run(None, &[]);
    assert_eq!(out, unnamed(s), "{err}");
    let (out, err, _) = c.run(None, &[("DTX_TRACE_PDB_PATHS", "1")]);
    assert_eq!(out, named(), "{err}");
}

/// The peak resident memory (VmHWM, in bytes) of dtx run as `d`, read from /proc while it
/// runs (the high-water mark only grows, so the last reading is the peak but for its last
/// milliseconds), and its output.
#[cfg(target_os = "linux")]
fn peak_memory(d: Dtx) -> (u64, std::process::Output) {
    let mut child = d.spawn();
    let status = format!("/proc/{}/status", child.id());
    let (out, err) = cli::read_pipes(&mut child);
    let mut peak = 0u64;
    let st = loop {
        if let Ok(s) = std::fs::read_to_string(&status) {
            let kb = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            peak = peak.max(kb.unwrap_or(0) * 1024);
        }
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let o = std::process::Output {
        status: st,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    };
    (peak, o)
}

/// [`peak_memory`] of `dtx -q -E trace -n PROGRAM` with the symbol path `path` and `env`: at
/// most `bound` bytes (printed, for the figures of the note); elsewhere than Linux nothing.
fn memory_below(c: &Case, path: &str, env: &[(&str, &str)], what: &str, bound: u64) {
    #[cfg(target_os = "linux")]
    {
        let args = c.program_args();
        let (peak, o) = peak_memory(c.command(&args, Some(path), env));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        eprintln!("{what}: peak memory {peak} bytes");
        assert!(peak > 0 && peak < bound, "{what}: {peak}");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (c, path, env, what, bound);
}

/// The stand-in PDB with its last stream's size in the stream directory set to `size`: the
/// GUID and age (what the URL and the identity check see) are the real ones.
fn lying_streams(pdb: &[u8], size: u32) -> Vec<u8> {
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let mut b = pdb.to_vec();
    let bs = u32_at(&b, 32) as usize;
    let map = u32_at(&b, 52) as usize * bs;
    let dir = u32_at(&b, map) as usize * bs;
    let streams = u32_at(&b, dir) as usize;
    assert!(streams > 2 && 4 + streams * 4 <= bs, "{streams} streams");
    let last = dir + 4 * streams;
    b[last..last + 4].copy_from_slice(&size.to_le_bytes());
    b
}

#[test]
fn hostile_lying_pdb_is_refused_and_not_kept() {
    let Some(s) = standin() else { return };
    let lying = lying_streams(&s.bytes, 1 << 30);
    let server = Server::start(
        [(at(&s.id, "ntkrnlmp.pdb"), lying)].into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let c = Case::new(s);
    let path = srv(&c.cache(), &server);
    // twice: the first run's refusal keeps nothing, so the second asks the server again
    for _ in 0..2 {
        let (out, err, _) = c.run(Some(&path), &[]);
        assert_eq!(out, unnamed(s), "{err}");
        assert!(err.contains("a stream larger than the file"), "{err}");
        assert!(server::files_under(&c.cache()).is_empty());
    }
    let pdb = at(&s.id, "ntkrnlmp.pdb");
    let asked = server.asked().iter().filter(|p| **p == pdb).count();
    assert_eq!(asked, 2, "{:?}", server.asked());
    // the 1 GB stream is never allocated: dtx's peak memory stays far below it
    let what = format!(
        "lying PDB (a 1 GiB stream in a {} byte file)",
        s.bytes.len()
    );
    memory_below(&c, &path, &[], &what, 64 << 20);
}

/// A `.zip` holding one member `trace.etl` of `len` zero bytes, deflated; and the same
/// archive with the member's recorded size (local header and central directory) set to
/// `recorded`: a bomb, whose entry says little and whose data inflates to `len`.
fn zipped_zeros(len: usize, recorded: u32) -> (Vec<u8>, Vec<u8>) {
    use std::io::Write as _;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(1));
    w.start_file("trace.etl", opts).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..len / zeros.len() {
        w.write_all(&zeros).unwrap();
    }
    let honest = w.finish().unwrap().into_inner();
    let mut bomb = honest.clone();
    assert_eq!(&bomb[..4], b"PK\x03\x04");
    bomb[22..26].copy_from_slice(&recorded.to_le_bytes());
    let cd = bomb
        .windows(4)
        .rposition(|w| w == b"PK\x01\x02")
        .expect("a central directory entry");
    bomb[cd + 24..cd + 28].copy_from_slice(&recorded.to_le_bytes());
    (honest, bomb)
}

#[test]
fn hostile_zip_bomb_stops_at_its_recorded_size() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let (honest, bomb) = zipped_zeros(256 << 20, 64 << 10);
    let cases = [
        // an entry that lies: 64 KiB recorded, 256 MiB inflated
        (
            "bomb.zip",
            bomb,
            None,
            "inflates past the 65536 bytes its entry records",
        ),
        // an honest entry larger than the cap: refused before anything inflates
        (
            "big.zip",
            honest,
            Some("64"),
            "member too large to unpack: 268435456 bytes",
        ),
    ];
    for (name, bytes, cap, want) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let mut d = Dtx::new(&[
            std::ffi::OsStr::new("-q"),
            "-E".as_ref(),
            path.as_os_str(),
            "-n".as_ref(),
            "BEGIN { exit(0); }".as_ref(),
        ])
        .env("TMPDIR", &tmp)
        .env("TEMP", &tmp)
        .env("TMP", &tmp);
        if let Some(mb) = cap {
            d = d.env("DTX_ZIP_MAX_MB", mb);
        }
        #[cfg(target_os = "linux")]
        let (peak, o) = peak_memory(d);
        #[cfg(not(target_os = "linux"))]
        let (peak, o) = (0u64, d.output());
        let err = String::from_utf8_lossy(&o.stderr);
        eprintln!(
            "{name}: {} bytes holding 256 MiB: peak memory {peak} bytes",
            bytes.len()
        );
        assert!(!o.status.success(), "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
        assert!(peak < 128 << 20, "{name}: {peak}");
        assert!(server::files_under(&tmp).is_empty(), "{name}");
    }
}

#[test]
fn hostile_symbols_report_escapes_the_traces_names() {
    let Some(s) = standin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut c = CpuRecords::default();
    let t = START + 1;
    c.process(t, 4, "System");
    c.image(
        t,
        0,
        KERNEL,
        0x100000,
        "\\SystemRoot\\system32\\nt\x1b]0;pwned\x07oskrnl.exe",
    );
    c.pdb_identity(
        t,
        0,
        KERNEL,
        standin_pdb::guid_bytes(&s.id.guid),
        s.id.age,
        "\x1b[2Jntkrnlmp.pdb",
    );
    c.sample(START + 30, 4, 8, &[KERNEL + s.call, KERNEL + s.main]);
    let trace = dir.path().join("names.etl");
    std::fs::write(&trace, synthetic::trace_bytes(&[c])).unwrap();
    let case = Case { dir, trace };
    let (report, err, _) = case.dtx(
        &["--symbols".as_ref(), "-E".as_ref(), case.trace.as_os_str()],
        None,
        &[],
    );
    let text = report.join("\n");
    assert!(
        !text.contains('\x1b') && !text.contains('\x07'),
        "{text:?} {err}"
    );
    assert!(text.contains("nt\\x1b]0;pwned\\x07oskrnl.exe"), "{text}");
    assert!(text.contains("\\x1b[2Jntkrnlmp.pdb"), "{text}");
}
