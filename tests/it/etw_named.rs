//! Named ETW providers over the real traces of `../shared/etl`:
//! * keyword probes (`microsoft-windows-dotnetruntime:::gc`, `:::jit`, `:::loader`) fire once per
//!   event carrying the keyword bit, counted by a separate walk of the file that reads the
//!   record headers only (no decoding, no providers), and `:::events` once per event of the
//!   provider in `expected_counts.json`;
//! * `capturestate` of the .NET rundown provider fires for each of its events
//!   (`expected_counts.json`), and not for the runtime provider's ordinary events;
//! * the payload pointer's 4-byte prefix (id, version, 32/64-bit);
//! * `etw:<guid>:0xLL_0xKK:<id>|generic_event` with its EVENT_HEADER;
//! * `dtx -l` with a provider catalog file made here.
//!
//! Skips, with a message, when `../shared/etl` is absent.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Output;

use dtx::etw::reader::EtlFile;
use dtx::etw::record::{Guid, HeaderKind};

const RUNTIME: &str = "e13c0d23-ccbc-4e12-931b-d9cc2eee27e4";
const RUNDOWN: &str = "a669021c-c450-4609-a035-5af59af4df18";

fn shared() -> Option<PathBuf> {
    crate::support::etl::folder("etl", "expected_counts.json")
}

use crate::support::cli;
use cli::Dtx;

/// dtx with `args`, the provider catalog of this machine's environment out of the way.
fn clean(args: &[&str]) -> Dtx {
    Dtx::new(args).env_remove("DTX_PROVIDER_CATALOG")
}

/// [`clean`] dtx with `env` set: its output.
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    env.iter()
        .fold(clean(args), |d, (k, v)| d.env(k, v))
        .output()
}

/// [`clean`] dtx, which must succeed: its stdout.
fn dtx(args: &[&str]) -> String {
    clean(args).ok()
}

/// `name count` lines of a `printa("%s %@d\n", @)`.
fn counts(out: &str) -> BTreeMap<String, u64> {
    out.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().rsplit_once(' ')?;
            Some((k.trim().to_string(), v.parse().ok()?))
        })
        .collect()
}

/// The events of `provider` in one file of `expected_counts.json` (every id and opcode).
fn expected_provider_total(json: &str, file: &str, provider: &str) -> u64 {
    let start = json
        .find(&format!("\"{file}\": {{"))
        .unwrap_or_else(|| panic!("{file} not in expected_counts.json"));
    let section = &json[start..];
    let at = section
        .find("\"event_header_providers\"")
        .expect("providers section");
    let section = &section[at..];
    let end = section.find('}').unwrap();
    let section = &section[..end];
    let key = format!("\"{provider}");
    let Some(i) = section.find(&key) else {
        return 0;
    };
    let after = &section[i..];
    let colon = after.find("\": ").unwrap() + 3;
    after[colon..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap()
}

/// Events of the provider whose header keyword has any bit of each mask, by a walk of the file
/// that looks at record headers only.
fn walk_keywords(path: &str, provider: &str, masks: &[u64]) -> Vec<u64> {
    let guid = Guid::parse(provider).unwrap();
    let file = EtlFile::open_path(path).unwrap();
    let mut n = vec![0u64; masks.len()];
    let mut it = file.events();
    while let Some(r) = it.next_event() {
        let Ok(ev) = r else { continue };
        if ev.kind != HeaderKind::EventHeader || ev.provider != guid {
            continue;
        }
        for (i, m) in masks.iter().enumerate() {
            if ev.keyword & m != 0 {
                n[i] += 1;
            }
        }
    }
    n
}

#[test]
fn keyword_probes_count_like_the_record_headers() {
    let Some(dir) = shared() else { return };
    let json = std::fs::read_to_string(dir.join("expected_counts.json")).unwrap();
    for (zip, name) in [
        ("perfview_gcevents.etl.zip", "gcevents/PerfViewData.etl"),
        ("perfview_net.4.5.2.x64.etl.zip", "net.4.5.2.x64.etl"),
        ("perfview_net.4.5.2.x86.etl.zip", "net.4.5.2.x86.etl"),
    ] {
        let path = dir.join(zip).to_string_lossy().into_owned();
        let out = dtx(&[
            "-q",
            "-E",
            &path,
            "-n",
            "microsoft-windows-dotnetruntime:::gc, microsoft-windows-dotnetruntime:::jit,
             microsoft-windows-dotnetruntime:::loader, microsoft-windows-dotnetruntime:::events
             { @[probename] = count(); } END { printa(\"%s %@d\\n\", @); }",
        ]);
        let got = counts(&out);
        let want = walk_keywords(&path, RUNTIME, &[0x1, 0x10, 0x8]);
        for (probe, n) in ["gc", "jit", "loader"].iter().zip(&want) {
            assert_eq!(
                got.get(*probe).copied().unwrap_or(0),
                *n,
                "{zip}: :::{probe}"
            );
        }
        let total = expected_provider_total(&json, name, RUNTIME);
        assert!(total > 0);
        assert_eq!(got["events"], total, "{zip}: :::events");
        // the traces do have GC events, and an event with both bits counts in both
        assert!(want[0] > 0, "{zip}");
    }
}

#[test]
fn gc_keyword_matches_the_documented_gc_events() {
    // gcevents: 69 runtime events, all of the GC keyword but RuntimeInformationStart (id 187,
    // no keyword), per expected_counts.json's (provider, id) counts
    let Some(dir) = shared() else { return };
    let path = dir.join("perfview_gcevents.etl.zip");
    let out = dtx(&[
        "-q",
        "-E",
        &path.to_string_lossy(),
        "-n",
        "microsoft-windows-dotnetruntime:::gc { @n = count(); } END { printa(\"gc %@d\\n\", @n); }",
    ]);
    assert_eq!(counts(&out)["gc"], 69 - 1);
}

#[test]
fn capturestate_fires_for_rundown_events() {
    let Some(dir) = shared() else { return };
    let json = std::fs::read_to_string(dir.join("expected_counts.json")).unwrap();
    for (zip, name) in [
        (
            "perfview_gcrundownevents.etl.zip",
            "gcrundownevents/PerfViewData.clrRundown.etl",
        ),
        ("perfview_net.4.5.2.x64.etl.zip", "net.4.5.2.x64.etl"),
    ] {
        let path = dir.join(zip).to_string_lossy().into_owned();
        let out = dtx(&[
            "-q",
            "-E",
            &path,
            "-n",
            "microsoft-windows-dotnetruntimerundown:::capturestate,
             microsoft-windows-dotnetruntime:::capturestate
             { @[probeprov] = count(); } END { printa(\"%s %@d\\n\", @); }",
        ]);
        let got = counts(&out);
        assert_eq!(
            got["microsoft-windows-dotnetruntimerundown"],
            expected_provider_total(&json, name, RUNDOWN),
            "{zip}"
        );
        // the runtime provider logs no DCStart/DCEnd events in these traces
        assert_eq!(got.get("microsoft-windows-dotnetruntime"), None, "{zip}");
    }
}

#[test]
fn payload_prefix_holds_id_version_and_width() {
    let Some(dir) = shared() else { return };
    for (zip, wide) in [
        ("perfview_net.4.5.2.x64.etl.zip", 1),
        ("perfview_net.4.5.2.x86.etl.zip", 0),
    ] {
        let out = dtx(&[
            "-q",
            "-E",
            &dir.join(zip).to_string_lossy(),
            "-n",
            "microsoft-windows-dotnetruntime:::jit
             { @[*(uint16_t *)(arg2 - 4) == arg0, *(uint8_t *)(arg2 - 1)] = count(); }
             END { printa(\"%d/%d %@d\\n\", @); }",
        ]);
        let got = counts(&out);
        // arg2-4 is the id everywhere; arg2-1 is the event's own width (the x64 trace also has
        // a few events of 32-bit processes)
        assert!(got.keys().all(|k| k.starts_with("1/")), "{zip}: {out}");
        let main = got.iter().max_by_key(|(_, n)| **n).unwrap().0;
        assert_eq!(*main, format!("1/{wide}"), "{zip}: {out}");
        if wide == 0 {
            assert_eq!(got.len(), 1, "{zip}: {out}");
        }
    }
}

#[test]
fn guid_probes_pass_the_event_header() {
    let Some(dir) = shared() else { return };
    let path = dir.join("perfview_net.4.5.2.x64.etl.zip");
    let path = path.to_string_lossy();
    // every JIT-keyword event of the runtime, by GUID, at most level 5: the header's id,
    // provider and size agree with the probe
    let out = dtx(&[
        "-q",
        "-E",
        &path,
        "-n",
        &format!(
            "etw:{{{RUNTIME}}}:0x05_0x0000000000000010:generic_event {{
               this->h = (nt`_EVENT_HEADER *)arg0;
               @[this->h->ProviderId.Data1 == 0x{}, this->h->Size == 80 + arg1,
                 (this->h->EventDescriptor.Keyword & 0x10) != 0] = count(); }}
             END {{ printa(\"%d%d%d %@d\\n\", @); }}",
            &RUNTIME[..8]
        ),
    ]);
    let got = counts(&out);
    let want = walk_keywords(&path, RUNTIME, &[0x10])[0];
    assert_eq!(got.get("111").copied(), Some(want), "{out}");
    // one event id (143, MethodLoadVerbose) without braces, any level and keyword
    let out = dtx(&[
        "-q",
        "-E",
        &path,
        "-n",
        &format!(
            "etw:{RUNTIME}:0x00_0x0:143 {{ @[((nt`_EVENT_HEADER *)arg0)->EventDescriptor.Id] = count(); }}
             END {{ printa(\"%d %@d\\n\", @); }}"
        ),
    ]);
    let got = counts(&out);
    assert_eq!(got.len(), 1, "{out}");
    assert!(got["143"] > 0);
    // a malformed one is a compile error
    let out = run(
        &[
            "-E",
            &path,
            "-n",
            &format!("etw:{RUNTIME}:5_0x10:generic_event {{}}"),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad level/keyword field"), "{err}");
}

#[test]
fn listing_shows_keywords_and_the_catalog() {
    let Some(dir) = shared() else { return };
    let path = dir.join("perfview_gcevents.etl.zip");
    let path = path.to_string_lossy();
    let tmp = tempfile::tempdir().unwrap();
    let catalog = tmp.path().join("catalog.dat");
    std::fs::write(
        &catalog,
        "dtx-provider-catalog 1\n\
         22222222-7eea-49a9-a3fe-a378b03ddb4d Contoso-Widget\n \
         0x0000000000000001 FrobsKeyword\n \
         0x0000000000000002 Spin Up\n",
    )
    .unwrap();
    let out = run(
        &["-l", "-E", &path],
        &[("DTX_PROVIDER_CATALOG", &catalog.to_string_lossy())],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let probes: Vec<(String, String)> = text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.get(1)?.to_string(), f.last()?.to_string()))
        })
        .collect();
    let has = |p: &str, n: &str| probes.iter().any(|(a, b)| a == p && b == n);
    for n in ["events", "capturestate", "gc", "jit", "loader", "exception"] {
        assert!(has("microsoft-windows-dotnetruntime", n), "{n}");
    }
    for n in ["events", "capturestate", "frobs", "spin-up"] {
        assert!(has("contoso-widget", n), "{n}");
    }
    // the catalog's probes compile (and fire nothing in this trace)
    let out = run(
        &[
            "-q",
            "-E",
            &path,
            "-n",
            "contoso-widget:::frobs { @ = count(); }",
        ],
        &[("DTX_PROVIDER_CATALOG", &catalog.to_string_lossy())],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // without the catalog the description matches nothing: dtrace's D_PDESC_ZERO
    let out = run(
        &[
            "-xerrtags",
            "-E",
            &path,
            "-n",
            "contoso-widget:::frobs { @ = count(); }",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[D_PDESC_ZERO]") && err.contains("does not match any probes"),
        "{err}"
    );
    // a damaged catalog is ignored (the listing still works)
    std::fs::write(&catalog, "garbage\n").unwrap();
    let out = run(
        &["-l", "-E", &path],
        &[("DTX_PROVIDER_CATALOG", &catalog.to_string_lossy())],
    );
    assert!(out.status.success());
}

#[test]
fn eventmetadata_names_keywords() {
    // the x64 trace's EventMetadata (TRACE_EVENT_INFO) names the keywords of providers dtx has
    // no manifest for; their masks are those of the providers' published manifests
    let Some(dir) = shared() else { return };
    let path = dir.join("perfview_net.4.5.2.x64.etl.zip");
    let mut src = dtx::sources::etl::TraceSource::open(&path.to_string_lossy()).unwrap();
    let mut etw = dtx::providers::etw::EtwProbes::new();
    src.scan_providers(&mut etw);
    let kw = |p: &str| -> Vec<(String, u64)> {
        etw.named(p)
            .unwrap_or_else(|| panic!("{p}"))
            .keywords
            .iter()
            .map(|(n, m, _)| (n.clone(), *m))
            .collect()
    };
    let file = kw("microsoft-windows-kernel-file");
    assert!(
        file.contains(&("kernel_file_keyword_fileio".into(), 0x20)),
        "{file:?}"
    );
    assert!(
        file.contains(&("kernel_file_keyword_create".into(), 0x80)),
        "{file:?}"
    );
    let process = kw("microsoft-windows-kernel-process");
    assert!(
        process.contains(&("winevent_keyword_process".into(), 0x10)),
        "{process:?}"
    );
    // and the probe counts what the headers say
    let out = dtx(&[
        "-q",
        "-E",
        &path.to_string_lossy(),
        "-n",
        "microsoft-windows-kernel-file:::kernel_file_keyword_fileio { @n = count(); }
         END { printa(\"n %@d\\n\", @n); }",
    ]);
    let want = walk_keywords(
        &path.to_string_lossy(),
        "edd08927-9cc4-4e65-b970-c2560fb5c289",
        &[0x20],
    )[0];
    assert!(want > 0);
    assert_eq!(counts(&out).get("n").copied(), Some(want), "{out}");
}
