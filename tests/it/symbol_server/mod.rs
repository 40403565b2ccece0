//! PDBs from symbol servers (src/symbols/symsrv), end to end through `dtx`: a synthetic
//! system-call trace whose kernel image's identity is a clang-built stand-in PDB's, so the
//! probe names come from the PDB a server gives; the server is a thread of the test on
//! 127.0.0.1 (tests/it/support/symbol_server.rs). Under Wine (scripts/windows-check.sh) the
//! stand-in is built beforehand and named by DTX_SYMSRV_FIXTURES, as no compiler runs there.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::synthetic_etl as synthetic;

use crate::support::standin_pdb;

use crate::support::cli;

use crate::support::etl;

use crate::support::symbol_server as server;

use cli::Dtx;
use server::{Mode, Proxy, Server};
use synthetic::{CpuRecords, START};

const KERNEL: u64 = 0xfffff800_00000000;
const STANDIN: &str =
    "int NtStandInCall(int x) { return x + 1; }\nint main(void) { return NtStandInCall(1); }\n";
const PROGRAM: &str = "syscall:::entry { @[probefunc] = count(); }";

/// The stand-in PDB (built once per test process), its identity and its functions' RVAs.
struct Standin {
    pdb: PathBuf,
    bytes: Vec<u8>,
    id: dtx::symbols::pdb::PdbId,
    call: u64,
    main: u64,
}

fn standin() -> Option<&'static Standin> {
    static S: std::sync::OnceLock<Option<Standin>> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        let dir = Box::leak(Box::new(tempfile::tempdir().unwrap()));
        let pdb = match std::env::var_os("DTX_SYMSRV_FIXTURES") {
            Some(d) => {
                let to = dir.path().join("standin.pdb");
                std::fs::copy(Path::new(&d).join("standin.pdb"), &to).ok()?;
                to
            }
            None => standin_pdb::clang_pdb(dir.path(), STANDIN)?,
        };
        let (guid, age) = dtx::symbols::pdb::pdb_identity(&pdb).unwrap();
        let syms = dtx::symbols::pdb::read(&pdb, None).unwrap();
        let rva = |n: &str| syms.functions.iter().find(|f| f.name == n).unwrap().rva as u64;
        Some(Standin {
            bytes: std::fs::read(&pdb).unwrap(),
            id: dtx::symbols::pdb::PdbId {
                guid,
                age,
                path: "ntkrnlmp.pdb".into(),
            },
            call: rva("NtStandInCall"),
            main: rva("main"),
            pdb,
        })
    })
    .as_ref()
}

/// The trace: the kernel image with `guid` (the stand-in's, or another) as its PDB's; calls
/// at NtStandInCall, at main, and at an offset no function holds.
fn trace(dir: &Path, s: &Standin, guid: dtx::etw::record::Guid) -> PathBuf {
    trace_named(dir, s, guid, "ntkrnlmp.pdb")
}

/// [`trace`], the kernel's PDB named `pdb` (a name a stranger's trace may carry).
fn trace_named(dir: &Path, s: &Standin, guid: dtx::etw::record::Guid, pdb: &str) -> PathBuf {
    let mut c = CpuRecords::default();
    let t = START + 1;
    c.process(t, 4, "System");
    c.process(t, 100, "alpha.exe");
    c.thread(t, 100, 104);
    c.image(t, 0, KERNEL, 0x100000, r"\SystemRoot\system32\ntoskrnl.exe");
    c.pdb_identity(t, 0, KERNEL, standin_pdb::guid_bytes(&guid), s.id.age, pdb);
    c.cswitch(START + 20, 104, 0);
    c.syscall_enter(START + 30, KERNEL + s.call);
    c.syscall_enter(START + 40, KERNEL + s.main);
    c.syscall_enter(START + 50, KERNEL + 0x90000);
    let path = dir.join("syscalls.etl");
    std::fs::write(&path, synthetic::trace_bytes(&[c])).unwrap();
    path
}

/// The store path of the stand-in's `file` on a server (`/ntkrnlmp.pdb/<key>/<file>`).
fn at(id: &dtx::symbols::pdb::PdbId, file: &str) -> String {
    format!("/ntkrnlmp.pdb/{}/{file}", id.store_key())
}

/// One test's folders: the trace, a cache, a home for the per-user cache.
struct Case {
    dir: tempfile::TempDir,
    trace: PathBuf,
}

impl Case {
    fn new(s: &Standin) -> Case {
        Case::with_guid(s, s.id.guid)
    }
    fn with_guid(s: &Standin, guid: dtx::etw::record::Guid) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let trace = trace(dir.path(), s, guid);
        Case { dir, trace }
    }
    fn cache(&self) -> PathBuf {
        self.dir.path().join("cache")
    }
    /// `dtx -q -E trace -n PROGRAM` with `path` as `_NT_SYMBOL_PATH` and `env`: its sorted
    /// output lines, its stderr, how long it took.
    fn run(&self, path: Option<&str>, env: &[(&str, &str)]) -> (Vec<String>, String, Duration) {
        self.dtx(&self.program_args(), path, env)
    }
    /// `-q -E trace -n PROGRAM`.
    fn program_args(&self) -> [&std::ffi::OsStr; 5] {
        [
            "-q".as_ref(),
            "-E".as_ref(),
            self.trace.as_os_str(),
            "-n".as_ref(),
            PROGRAM.as_ref(),
        ]
    }
    fn dtx(
        &self,
        args: &[&std::ffi::OsStr],
        path: Option<&str>,
        env: &[(&str, &str)],
    ) -> (Vec<String>, String, Duration) {
        let d = self.command(args, path, env);
        let t0 = Instant::now();
        let out = d.output();
        let took = t0.elapsed();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|l| !l.is_empty())
            .collect();
        lines.sort();
        (lines, err, took)
    }
    fn command(&self, args: &[&std::ffi::OsStr], path: Option<&str>, env: &[(&str, &str)]) -> Dtx {
        let home = self.dir.path().join("home");
        let mut d = Dtx::new(args)
            .symbol_path(path)
            .env("XDG_CACHE_HOME", &home)
            .env("LOCALAPPDATA", &home)
            .env("DTX_SYMBOL_TIMEOUT", "2");
        for v in [
            "http_proxy",
            "HTTP_PROXY",
            "https_proxy",
            "HTTPS_PROXY",
            "all_proxy",
            "ALL_PROXY",
            "no_proxy",
            "NO_PROXY",
        ] {
            d = d.env_remove(v);
        }
        for (k, v) in env {
            d = d.env(k, v);
        }
        d
    }
}

/// The output when the PDB names the calls, and when it does not.
fn named() -> Vec<String> {
    let mut v = vec![
        "NtStandInCall 1".to_string(),
        "main 1".to_string(),
        "ntoskrnl.exe`0x90000 1".to_string(),
    ];
    v.sort();
    v
}

fn unnamed(s: &Standin) -> Vec<String> {
    let mut v = vec![
        format!("ntoskrnl.exe`0x{:x} 1", s.call),
        format!("ntoskrnl.exe`0x{:x} 1", s.main),
        "ntoskrnl.exe`0x90000 1".to_string(),
    ];
    v.sort();
    v
}

/// dtx's lines about symbol servers.
fn server_lines(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.contains("symbol server"))
        .collect()
}

fn srv(cache: &Path, server: &Server) -> String {
    format!("srv*{}*{}", cache.display(), server.url())
}

#[test]
fn symbol_server_plain_file() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let server = Server::start(
        [(at(&s.id, "ntkrnlmp.pdb"), s.bytes.clone())].into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let (out, err, _) = c.run(Some(&srv(&c.cache(), &server)), &[]);
    assert_eq!(out, named(), "{err}");
    assert_eq!(server.asked(), vec![at(&s.id, "ntkrnlmp.pdb")]);
    assert!(server_lines(&err).is_empty(), "{err}");
    // in the cache, in the store layout, whole
    let kept = c
        .cache()
        .join("ntkrnlmp.pdb")
        .join(s.id.store_key())
        .join("ntkrnlmp.pdb");
    assert_eq!(std::fs::read(&kept).unwrap(), s.bytes);
    assert_eq!(server::files_under(&c.cache()), vec![kept]);
    // the names equal the run's over a local store holding the same PDB
    let local = c.dir.path().join("local");
    let place = local.join("ntkrnlmp.pdb").join(s.id.store_key());
    std::fs::create_dir_all(&place).unwrap();
    std::fs::copy(&s.pdb, place.join("ntkrnlmp.pdb")).unwrap();
    let (from_store, _, _) = c.run(Some(&format!("srv*{}", local.display())), &[]);
    assert_eq!(from_store, out);
}

#[test]
fn symbol_server_compressed_pd_() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let server = Server::start(
        [(
            at(&s.id, "ntkrnlmp.pd_"),
            server::cabinet("ntkrnlmp.pdb", &s.bytes),
        )]
        .into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let (out, err, _) = c.run(Some(&srv(&c.cache(), &server)), &[]);
    assert_eq!(out, named(), "{err}");
    assert_eq!(
        server.asked(),
        vec![at(&s.id, "ntkrnlmp.pdb"), at(&s.id, "ntkrnlmp.pd_")]
    );
    let kept = c
        .cache()
        .join("ntkrnlmp.pdb")
        .join(s.id.store_key())
        .join("ntkrnlmp.pdb");
    assert_eq!(std::fs::read(&kept).unwrap(), s.bytes);
    assert_eq!(server::files_under(&c.cache()).len(), 1);
}

#[test]
fn symbol_server_file_ptr_to_a_url_and_to_a_path() {
    let Some(s) = standin() else { return };
    // to a URL on the server
    let c = Case::new(s);
    let server = Server::start(HashMap::new(), Mode::Serve, Duration::ZERO);
    server.put("/elsewhere/k.pdb", s.bytes.clone());
    server.put(
        &at(&s.id, "file.ptr"),
        format!("PATH:{}/elsewhere/k.pdb", server.url()).into_bytes(),
    );
    let (out, err, _) = c.run(Some(&srv(&c.cache(), &server)), &[]);
    assert_eq!(out, named(), "{err}");
    assert_eq!(
        server.asked(),
        vec![
            at(&s.id, "ntkrnlmp.pdb"),
            at(&s.id, "ntkrnlmp.pd_"),
            at(&s.id, "file.ptr"),
            "/elsewhere/k.pdb".to_string()
        ]
    );
    assert_eq!(server::files_under(&c.cache()).len(), 1);
    // to a file (a share, here a folder of this machine): only when the user allows a
    // server's pointer to name files (hostile_pointers_stay_on_the_server has the refusal)
    let c = Case::new(s);
    let share = c.dir.path().join("share").join("k.pdb");
    std::fs::create_dir_all(share.parent().unwrap()).unwrap();
    std::fs::copy(&s.pdb, &share).unwrap();
    let server = Server::start(
        [(
            at(&s.id, "file.ptr"),
            format!("PATH:{}\r\n", share.display()).into_bytes(),
        )]
        .into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let (out, err, _) = c.run(
        Some(&srv(&c.cache(), &server)),
        &[("DTX_SYMBOL_POINTER_FILES", "1")],
    );
    assert_eq!(out, named(), "{err}");
    assert_eq!(server::files_under(&c.cache()).len(), 1);
    // MSG: no file, the message in the report
    let c = Case::new(s);
    let server = Server::start(
        [(at(&s.id, "file.ptr"), b"MSG: withdrawn for a test".to_vec())].into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let (out, err, _) = c.run(Some(&srv(&c.cache(), &server)), &[]);
    assert_eq!(out, unnamed(s), "{err}");
    assert!(err.contains("withdrawn for a test"), "{err}");
}

#[test]
fn symbol_server_404() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let server = Server::start(HashMap::new(), Mode::Serve, Duration::ZERO);
    let (out, err, _) = c.run(Some(&srv(&c.cache(), &server)), &[]);
    assert_eq!(out, unnamed(s), "{err}");
    // each layout asked once (the calls are named twice: probe names and the run's)
    assert_eq!(
        server.asked(),
        vec![
            at(&s.id, "ntkrnlmp.pdb"),
            at(&s.id, "ntkrnlmp.pd_"),
            at(&s.id, "file.ptr")
        ]
    );
    let lines = server_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(&server.url()) && lines[0].contains("not there"),
        "{err}"
    );
    assert!(server::files_under(&c.cache()).is_empty());
}

#[test]
fn symbol_server_stall_times_out() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let server = Server::start(HashMap::new(), Mode::Stall, Duration::ZERO);
    let (out, err, took) = c.run(
        Some(&srv(&c.cache(), &server)),
        &[("DTX_SYMBOL_TIMEOUT", "1")],
    );
    assert_eq!(out, unnamed(s), "{err}");
    let lines = server_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("timeout"), "{err}");
    // the first request and its one retry; nothing more to a server that does not answer
    assert_eq!(server.asked().len(), 2, "{:?}", server.asked());
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(server::files_under(&c.cache()).is_empty());
}

#[test]
fn symbol_server_closes_mid_file() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let server = Server::start(
        [(at(&s.id, "ntkrnlmp.pdb"), s.bytes.clone())].into(),
        Mode::CloseMidFile,
        Duration::ZERO,
    );
    let (out, err, _) = c.run(Some(&srv(&c.cache(), &server)), &[]);
    assert_eq!(out, unnamed(s), "{err}");
    let lines = server_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("closed before the end"), "{err}");
    // nothing partial is left in the cache
    assert_eq!(server::files_under(&c.cache()), Vec::<PathBuf>::new());
}

#[test]
fn symbol_server_guid_mismatch_is_refused() {
    let Some(s) = standin() else { return };
    // the trace wants another GUID; the server gives the stand-in under that GUID's key
    let mut other = s.id.clone();
    other.guid.data1 ^= 0xffff;
    let c = Case::with_guid(s, other.guid);
    let server = Server::start(
        [(at(&other, "ntkrnlmp.pdb"), s.bytes.clone())].into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let path = srv(&c.cache(), &server);
    let (out, err, _) = c.run(Some(&path), &[]);
    let mut want = unnamed(s);
    want.sort();
    assert_eq!(out, want, "{err}");
    assert!(err.contains("refused"), "{err}");
    assert!(server::files_under(&c.cache()).is_empty());
}

#[test]
fn symbol_server_http_proxy_from_the_environment() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let server = Server::start(
        [(at(&s.id, "ntkrnlmp.pdb"), s.bytes.clone())].into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let proxy = Proxy::start();
    let via = format!("http://127.0.0.1:{}", proxy.port);
    let (out, err, _) = c.run(Some(&srv(&c.cache(), &server)), &[("HTTP_PROXY", &via)]);
    assert_eq!(out, named(), "{err}");
    assert_eq!(proxy.count(), 1);
    assert_eq!(
        proxy.tunnels.lock().unwrap()[0],
        format!("127.0.0.1:{}", server.port)
    );
    // lower case, and no_proxy naming the host: straight to the server
    let c = Case::new(s);
    let (out, err, _) = c.run(
        Some(&srv(&c.cache(), &server)),
        &[("http_proxy", &via), ("no_proxy", "localhost,127.0.0.1")],
    );
    assert_eq!(out, named(), "{err}");
    assert_eq!(proxy.count(), 1);
    assert_eq!(server.asked().len(), 2);
}

#[test]
fn symbol_server_second_run_makes_no_request() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let server = Server::start(
        [(at(&s.id, "ntkrnlmp.pdb"), s.bytes.clone())].into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let path = srv(&c.cache(), &server);
    let (first, _, _) = c.run(Some(&path), &[]);
    assert_eq!(server.asked().len(), 1);
    let (second, err, _) = c.run(Some(&path), &[]);
    assert_eq!(second, first, "{err}");
    assert_eq!(server.asked().len(), 1);
}

#[test]
fn symbol_server_without_a_cache_uses_the_per_user_cache_and_says_so() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let server = Server::start(
        [(at(&s.id, "ntkrnlmp.pdb"), s.bytes.clone())].into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let (out, err, _) = c.run(Some(&format!("srv*{}", server.url())), &[]);
    assert_eq!(out, named(), "{err}");
    let home = c.dir.path().join("home").join("dtx").join("symbols");
    let said: Vec<&str> = err.lines().filter(|l| l.contains("kept in")).collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].contains(&home.display().to_string()), "{err}");
    assert_eq!(server::files_under(&home).len(), 1);
}

#[test]
fn symbol_server_hint_without_a_server_and_x_sympath() {
    let Some(s) = standin() else { return };
    let c = Case::new(s);
    let (out, err, _) = c.run(None, &[]);
    assert_eq!(out, unnamed(s), "{err}");
    let hints: Vec<&str> = err.lines().filter(|l| l.contains("srv*")).collect();
    assert_eq!(hints.len(), 1, "{err}");
    assert!(
        hints[0].contains("https://msdl.microsoft.com/download/symbols")
            && hints[0].contains("-x sympath="),
        "{err}"
    );
    // -x sympath: the server for this run, over an environment that names none
    let server = Server::start(
        [(at(&s.id, "ntkrnlmp.pdb"), s.bytes.clone())].into(),
        Mode::Serve,
        Duration::ZERO,
    );
    let sympath = format!("sympath={}", srv(&c.cache(), &server));
    let args = [
        std::ffi::OsStr::new("-q"),
        "-x".as_ref(),
        sympath.as_ref(),
        "-E".as_ref(),
        c.trace.as_os_str(),
        "-n".as_ref(),
        PROGRAM.as_ref(),
    ];
    let (out, err, _) = c.dtx(&args, None, &[]);
    assert_eq!(out, named(), "{err}");
    assert!(!err.contains("srv*"), "{err}");
    assert_eq!(server.asked().len(), 1);
}

/// The Windows 7 xperf trace with a server that has nothing: the kernel's PDB is asked for in
/// the store layout, no path twice, only PDBs of images whose frames were printed, and the run
/// ends with module+offset frames and one line about the server.
#[test]
fn symbol_server_xperf_trace_with_an_empty_server() {
    let Some(trace) = etl::trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let c = Case {
        trace: PathBuf::from(&trace),
        dir,
    };
    let server = Server::start(HashMap::new(), Mode::Serve, Duration::ZERO);
    let path = srv(&c.cache(), &server);
    let args = [
        std::ffi::OsStr::new("-q"),
        "-E".as_ref(),
        c.trace.as_os_str(),
        "-n".as_ref(),
        "profile:::sample-1ms /pid == 0/ { @[stack()] = count(); }".as_ref(),
    ];
    let (out, err, _) = c.dtx(&args, Some(&path), &[]);
    let frames: Vec<&String> = out.iter().filter(|l| l.contains("+0x")).collect();
    assert!(frames.len() > 10, "{out:?}");
    assert!(out.iter().any(|l| l.starts_with("ntoskrnl.exe+0x")));
    let lines = server_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    let asked = server.asked();
    // the kernel's PDB, in the store layout: /ntkrnlmp.pdb/<GUID><age>/ntkrnlmp.pdb first
    let kernel: Vec<&String> = asked
        .iter()
        .filter(|p| p.starts_with("/ntkrnlmp.pdb/"))
        .collect();
    assert_eq!(kernel.len(), 3, "{asked:?}");
    let key = kernel[0].split('/').nth(2).unwrap();
    assert!(
        key.len() > 32 && key.chars().all(|c| c.is_ascii_hexdigit()),
        "{key}"
    );
    assert_eq!(kernel[0], &format!("/ntkrnlmp.pdb/{key}/ntkrnlmp.pdb"));
    // no path twice
    let mut sorted = asked.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), asked.len(), "{asked:?}");
    // only the PDBs of images whose frames were printed: the report (no server) names each
    // image's PDB
    let (report, _, _) = c.dtx(
        &["--symbols".as_ref(), "-E".as_ref(), c.trace.as_os_str()],
        None,
        &[],
    );
    let printed: std::collections::HashSet<&str> = frames
        .iter()
        .filter_map(|l| l.split("+0x").next())
        .collect();
    let pdb_of: HashMap<String, String> = report
        .iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.get(2)?.to_ascii_lowercase(), f.first()?.to_string()))
        })
        .collect();
    for p in &asked {
        let pdb = p.split('/').nth(1).unwrap().to_ascii_lowercase();
        let image = pdb_of
            .get(&pdb)
            .unwrap_or_else(|| panic!("{pdb} not in {report:?}"));
        assert!(
            printed.contains(image.as_str()),
            "{pdb} of {image}: no frame printed"
        );
    }
    // every request is one of the three layouts of a PDB
    assert_eq!(asked.len() % 3, 0, "{asked:?}");
}

/// `--symbols` over the xperf trace (no server): its images with frames, with their PDB
/// identities and honest reasons for what is missing.
#[test]
fn symbol_server_report_over_the_xperf_trace() {
    let Some(trace) = etl::trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let c = Case {
        trace: PathBuf::from(&trace),
        dir: tempfile::tempdir().unwrap(),
    };
    let (report, err, _) = c.dtx(
        &["--symbols".as_ref(), "-E".as_ref(), c.trace.as_os_str()],
        None,
        &[],
    );
    let header = report.iter().find(|l| l.starts_with("MODULE")).unwrap();
    assert!(header.contains("FRAMES"), "{header}");
    let kernel = report
        .iter()
        .find(|l| l.starts_with("ntoskrnl.exe "))
        .unwrap_or_else(|| panic!("{report:?} {err}"));
    let f: Vec<&str> = kernel.split_whitespace().collect();
    assert!(f[1].parse::<u64>().unwrap() > 1000, "{kernel}");
    assert_eq!(f[2].to_ascii_lowercase(), "ntkrnlmp.pdb");
    assert!(
        kernel.contains("missing: not on this machine, and the symbol path names no symbol server"),
        "{kernel}"
    );
    let rows = report
        .iter()
        .filter(|l| l.contains(" missing: ") || l.contains(" cache ") || l.contains(" local "))
        .count();
    assert!(rows > 5, "{report:?}");
    let total = report.iter().find(|l| l.contains(" images, ")).unwrap();
    assert!(
        total.contains(" frames, 0 in images with their PDB"),
        "{total}"
    );
}

mod hostile;
