//! The Windows half of live ETW, kept thin: start the kernel session and the user session a
//! [`SessionPlan`] asks for, enable the providers, open them for real-time consumption with
//! [`event_record_callback`] on one ProcessTrace thread per session, and stop them again. All
//! decoding happens in the platform-neutral source ([`EtwLiveSource`]).
//!
//! The kernel events come from a system logger session of our own (`dtx-kernel`,
//! EVENT_TRACE_SYSTEM_LOGGER_MODE, Windows 8 and later) rather than the single shared "NT Kernel
//! Logger", so that dtx never takes over another tool's kernel session and a stale session of
//! ours is recognised by its name and stopped.

use std::path::Path;

use windows_sys::core::GUID;
use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_ALREADY_EXISTS, ERROR_INSUFFICIENT_BUFFER,
    ERROR_NO_SYSTEM_RESOURCES, ERROR_SUCCESS, FILETIME,
};
use windows_sys::Win32::System::Diagnostics::Etw as w;

use super::plan::SessionPlan;
use super::raw::RawEventRecord;
use super::{event_record_callback, CallbackContext, EtwLiveSource, LiveSession, QUEUE_RECORDS};
use crate::engine::Engine;
use crate::etw::catalog::{self, ProviderCatalog, ProviderInfo};
use crate::etw::reader::logfile::{LogfileHeader, TimeBase};
use crate::etw::record::Guid;
use crate::providers::etw::EtwProbes;

/// Session names: fixed, so that a session left behind by a killed dtx is found and stopped.
pub const KERNEL_SESSION: &str = "dtx-kernel";
pub const USER_SESSION: &str = "dtx-user";
/// The kernel session that only logs the high-frequency events (`-E new.etl` without `-g`).
pub const LOGGED_SESSION: &str = "dtx-hfreq";

/// `INVALID_PROCESSTRACE_HANDLE`.
const INVALID_TRACE: u64 = u64::MAX;
/// Room for the session and file names after EVENT_TRACE_PROPERTIES.
const NAME_BYTES: usize = 1024 * 2;

fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

fn win_guid(g: Guid) -> GUID {
    GUID {
        data1: g.data1,
        data2: g.data2,
        data3: g.data3,
        data4: g.data4,
    }
}

/// EVENT_TRACE_PROPERTIES followed by room for the logger name and the log file name.
#[repr(C)]
struct Properties {
    props: w::EVENT_TRACE_PROPERTIES,
    logger_name: [u16; NAME_BYTES / 2],
    log_file: [u16; NAME_BYTES / 2],
}

impl Properties {
    fn new(log_file: Option<&Path>) -> Box<Properties> {
        // SAFETY: all-zero is a valid EVENT_TRACE_PROPERTIES and name buffer
        let mut p: Box<Properties> = Box::new(unsafe { std::mem::zeroed() });
        p.props.Wnode.BufferSize = std::mem::size_of::<Properties>() as u32;
        p.props.Wnode.Flags = w::WNODE_FLAG_TRACED_GUID;
        // QueryPerformanceCounter timestamps: the StackWalk records' EventTimeStamp agrees
        p.props.Wnode.ClientContext = 1;
        p.props.LoggerNameOffset = std::mem::offset_of!(Properties, logger_name) as u32;
        if let Some(f) = log_file {
            let name: Vec<u16> = f.as_os_str().to_string_lossy().encode_utf16().collect();
            let n = name.len().min(p.log_file.len() - 1);
            p.log_file[..n].copy_from_slice(&name[..n]);
            p.props.LogFileNameOffset = std::mem::offset_of!(Properties, log_file) as u32;
            p.props.LogFileMode |= w::EVENT_TRACE_FILE_MODE_SEQUENTIAL;
        }
        p.props.LogFileMode |= w::EVENT_TRACE_REAL_TIME_MODE;
        p.props.BufferSize = 256; // KB
        p.props.MinimumBuffers = 64;
        p.props.MaximumBuffers = 256;
        p.props.FlushTimer = 1; // seconds: live output stays live
        p
    }
}

/// Stops a session by name; true when one was running.
fn stop_by_name(name: &str) -> bool {
    let mut p = Properties::new(None);
    let n = wide(name);
    // SAFETY: p is a properly sized EVENT_TRACE_PROPERTIES buffer, n a NUL-terminated name
    let rc = unsafe {
        w::ControlTraceW(
            w::CONTROLTRACE_HANDLE { Value: 0 },
            n.as_ptr(),
            &mut p.props,
            w::EVENT_TRACE_CONTROL_STOP,
        )
    };
    rc == ERROR_SUCCESS
}

fn start_error(name: &str, rc: u32) -> String {
    match rc {
        ERROR_ACCESS_DENIED => {
            "live ETW tracing needs an elevated prompt: run dtx as Administrator".to_string()
        }
        ERROR_NO_SYSTEM_RESOURCES => format!(
            "cannot start ETW session {name}: the system's kernel loggers are all in use (stop another tracing tool's session)"
        ),
        ERROR_ALREADY_EXISTS => format!(
            "ETW session {name} is busy: another dtx runs (or stop it with `logman stop {name} -ets`)"
        ),
        _ => format!("cannot start ETW session {name}: error {rc}"),
    }
}

/// Starts a session, stopping a stale one of ours first.
fn start_session(
    name: &str,
    mode: u32,
    flags: u32,
    log_file: Option<&Path>,
) -> Result<w::CONTROLTRACE_HANDLE, String> {
    start_session_as(name, mode, flags, log_file, true)
}

/// [`start_session`], real-time or (with a log file) only writing the file.
fn start_session_as(
    name: &str,
    mode: u32,
    flags: u32,
    log_file: Option<&Path>,
    real_time: bool,
) -> Result<w::CONTROLTRACE_HANDLE, String> {
    stop_by_name(name);
    let n = wide(name);
    let mut p = Properties::new(log_file);
    if !real_time && log_file.is_some() {
        p.props.LogFileMode &= !w::EVENT_TRACE_REAL_TIME_MODE;
    }
    p.props.LogFileMode |= mode;
    p.props.EnableFlags = flags;
    if mode & w::EVENT_TRACE_SYSTEM_LOGGER_MODE != 0 {
        // a system logger session is identified by a GUID of its own
        p.props.Wnode.Guid = win_guid(session_guid(name));
    }
    let mut h = w::CONTROLTRACE_HANDLE { Value: 0 };
    // SAFETY: valid handle out-pointer, name and properties buffer
    let rc = unsafe { w::StartTraceW(&mut h, n.as_ptr(), &mut p.props) };
    if rc != ERROR_SUCCESS {
        return Err(start_error(name, rc));
    }
    Ok(h)
}

/// A fixed GUID per session name (a stale session is the same session).
fn session_guid(name: &str) -> Guid {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    Guid {
        data1: 0x6474_7800,
        data2: (h >> 48) as u16,
        data3: ((h >> 32) as u16 & 0x0fff) | 0x4000,
        data4: (h as u32 as u64 | 0x8000_0000_0000_0000).to_be_bytes(),
    }
}

/// One running session: stopped (and its ProcessTrace thread joined) by [`LiveSession::stop`].
struct EtwSession {
    name: String,
    trace: u64,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LiveSession for EtwSession {
    fn stop(&mut self) {
        stop_by_name(&self.name);
        if self.trace != INVALID_TRACE {
            // SAFETY: a handle OpenTraceW returned, closed once
            unsafe { w::CloseTrace(w::PROCESSTRACE_HANDLE { Value: self.trace }) };
            self.trace = INVALID_TRACE;
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A session that only writes its log file: stopped (and its file closed) with the run.
struct LoggingSession {
    name: String,
    stopped: bool,
}

impl LiveSession for LoggingSession {
    fn stop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            stop_by_name(&self.name);
        }
    }
}

impl Drop for LoggingSession {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Asks the kernel session `h` for stack walks of these (group, event type) records.
fn set_stack_walks(h: w::CONTROLTRACE_HANDLE, events: &[(u8, u8)]) {
    if events.is_empty() {
        return;
    }
    let ids: Vec<w::CLASSIC_EVENT_ID> = events
        .iter()
        .map(|(group, ty)| w::CLASSIC_EVENT_ID {
            EventGuid: win_guid(crate::etw::reader::headers::kernel_group_guid(*group)),
            Type: *ty,
            Reserved: [0; 7],
        })
        .collect();
    // SAFETY: ids is a valid array of CLASSIC_EVENT_ID
    let rc = unsafe {
        w::TraceSetInformation(
            h,
            w::TraceStackTracingInfo,
            ids.as_ptr().cast(),
            (ids.len() * std::mem::size_of::<w::CLASSIC_EVENT_ID>()) as u32,
        )
    };
    if rc != ERROR_SUCCESS {
        eprintln!("dtx: warning: kernel stack walking not enabled (error {rc})");
    }
}

impl Drop for EtwSession {
    fn drop(&mut self) {
        self.stop();
    }
}

unsafe extern "system" fn callback(rec: *mut w::EVENT_RECORD) {
    // the layouts are the same (checked by raw::tests::layouts_match_windows)
    event_record_callback(rec.cast::<RawEventRecord>());
}

/// Opens a running session for real-time consumption and starts its ProcessTrace thread.
fn consume(name: &str, context: *mut std::ffi::c_void) -> Result<EtwSession, String> {
    let mut n = wide(name);
    // SAFETY: all-zero is a valid EVENT_TRACE_LOGFILEW
    let mut lf: w::EVENT_TRACE_LOGFILEW = unsafe { std::mem::zeroed() };
    lf.LoggerName = n.as_mut_ptr();
    lf.Anonymous1.ProcessTraceMode = w::PROCESS_TRACE_MODE_REAL_TIME
        | w::PROCESS_TRACE_MODE_EVENT_RECORD
        | w::PROCESS_TRACE_MODE_RAW_TIMESTAMP;
    lf.Anonymous2.EventRecordCallback = Some(callback);
    lf.Context = context;
    // SAFETY: lf is filled as OpenTraceW requires; n outlives the call
    let h = unsafe { w::OpenTraceW(&mut lf) };
    if h.Value == INVALID_TRACE {
        let e = std::io::Error::last_os_error();
        stop_by_name(name);
        return Err(match e.raw_os_error() {
            Some(5) => "live ETW tracing needs an elevated prompt: run dtx as Administrator".into(),
            _ => format!("cannot open ETW session {name} for reading: {e}"),
        });
    }
    let trace = h.Value;
    let ctx = context as usize;
    let thread = std::thread::Builder::new()
        .name(format!("etw {name}"))
        .spawn(move || {
            let h = w::PROCESSTRACE_HANDLE { Value: trace };
            // SAFETY: a handle from OpenTraceW; the callback's context outlives this thread
            // (the source joins it before dropping the context)
            let rc = unsafe { w::ProcessTrace(&h, 1, std::ptr::null(), std::ptr::null()) };
            // SAFETY: see above
            if let Some(cx) = unsafe { (ctx as *const CallbackContext).as_ref() } {
                cx.end(rc);
            }
        })
        .map_err(|e| format!("cannot start the ETW reader thread: {e}"))?;
    Ok(EtwSession {
        name: name.to_string(),
        trace,
        thread: Some(thread),
    })
}

/// The session clock: QueryPerformanceCounter ticks, with the wall time now as the start.
fn time_base() -> TimeBase {
    let (mut qpc, mut freq) = (0i64, 0i64);
    let mut ft = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    // SAFETY: plain out-parameters
    unsafe {
        windows_sys::Win32::System::Performance::QueryPerformanceFrequency(&mut freq);
        windows_sys::Win32::System::Performance::QueryPerformanceCounter(&mut qpc);
        windows_sys::Win32::System::SystemInformation::GetSystemTimePreciseAsFileTime(&mut ft);
    }
    let filetime = ((ft.dwHighDateTime as i64) << 32) | ft.dwLowDateTime as i64;
    TimeBase::new(&LogfileHeader {
        clock_type: 1,
        perf_freq: freq,
        start_time: filetime,
        header_timestamp: qpc,
        ..LogfileHeader::default()
    })
}

/// The system's registered providers (name, GUID), from TDH.
pub fn system_providers() -> Result<Vec<(String, Guid)>, String> {
    if under_wine() {
        // Wine's tdh.dll has the entry points as stubs that raise on call
        return Err("the system's ETW provider list is not available under Wine".into());
    }
    let mut size = 0u32;
    // SAFETY: sizing call with a null buffer
    let rc = unsafe { w::TdhEnumerateProviders(std::ptr::null_mut(), &mut size) };
    if rc != ERROR_INSUFFICIENT_BUFFER && rc != ERROR_SUCCESS {
        return Err(format!("cannot list the ETW providers: error {rc}"));
    }
    let mut buf = vec![0u64; (size as usize).div_ceil(8) + 1];
    // SAFETY: buf holds at least `size` bytes, aligned for the structure
    let rc = unsafe {
        w::TdhEnumerateProviders(
            buf.as_mut_ptr().cast::<w::PROVIDER_ENUMERATION_INFO>(),
            &mut size,
        )
    };
    if rc != ERROR_SUCCESS {
        return Err(format!("cannot list the ETW providers: error {rc}"));
    }
    let bytes: &[u8] =
        // SAFETY: the buffer is initialised u64s
        unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), size as usize) };
    let count = u32::from_le_bytes(bytes[0..4].try_into().unwrap_or([0; 4])) as usize;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let at = 8 + i * 24;
        let Some(entry) = bytes.get(at..at + 24) else {
            break;
        };
        let Some(guid) = Guid::from_le_bytes(&entry[..16]) else {
            continue;
        };
        let off = u32::from_le_bytes(entry[20..24].try_into().unwrap_or([0; 4])) as usize;
        let name: Vec<u16> = bytes
            .get(off..)
            .unwrap_or(&[])
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .take_while(|c| *c != 0)
            .collect();
        out.push((String::from_utf16_lossy(&name), guid));
    }
    Ok(out)
}

/// The named keywords of one provider (TdhEnumerateProviderFieldInformation with
/// EventKeywordInformation); none for providers that define none or are not manifest-based.
pub fn provider_keywords(guid: Guid) -> Vec<(String, u64)> {
    let g = win_guid(guid);
    let mut size = 0u32;
    // SAFETY: sizing call with a null buffer
    let rc = unsafe {
        w::TdhEnumerateProviderFieldInformation(
            &g,
            w::EventKeywordInformation,
            std::ptr::null_mut(),
            &mut size,
        )
    };
    if rc != ERROR_INSUFFICIENT_BUFFER || size < 8 {
        return Vec::new();
    }
    let mut buf = vec![0u64; (size as usize).div_ceil(8) + 1];
    // SAFETY: buf holds at least `size` bytes, aligned for the structure
    let rc = unsafe {
        w::TdhEnumerateProviderFieldInformation(
            &g,
            w::EventKeywordInformation,
            buf.as_mut_ptr().cast::<w::PROVIDER_FIELD_INFOARRAY>(),
            &mut size,
        )
    };
    if rc != ERROR_SUCCESS {
        return Vec::new();
    }
    let bytes: &[u8] =
        // SAFETY: the buffer is initialised u64s of at least `size` bytes
        unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), size as usize) };
    catalog::parse_field_info_array(bytes)
}

/// Every registered provider with its keywords, from TDH.
pub fn enumerate_catalog() -> Result<ProviderCatalog, String> {
    let mut providers: Vec<ProviderInfo> = system_providers()?
        .into_iter()
        .map(|(name, guid)| {
            let mut p = ProviderInfo::new(&name, guid);
            for (k, m) in provider_keywords(guid) {
                p.add_keyword(&k, m);
            }
            p
        })
        .collect();
    providers.sort_by_key(|p| p.name.to_ascii_lowercase());
    Ok(ProviderCatalog { providers })
}

/// The system's provider catalog: the cache next to the executable when it is fresh and knows
/// every name in `needed`, else enumerated from TDH again and the cache rewritten (a cache that
/// cannot be written is not an error: the catalog is simply enumerated next time too).
pub fn provider_catalog(needed: &[&String]) -> Result<ProviderCatalog, String> {
    if let Some(c) = catalog::load_cached(true) {
        if needed.iter().all(|n| c.find(n).is_some()) {
            return Ok(c);
        }
    }
    let c = enumerate_catalog()?;
    if let Some(path) = catalog::catalog_path() {
        let _ = c.save(&path);
    }
    Ok(c)
}

/// The ETW side of a live run: the user providers the programs name, resolved through the
/// provider catalog (an unknown name is an error here, before anything starts), and with
/// `list_all` (`dtx -l`) every provider of the catalog.
pub fn live_etw(
    programs: &[crate::cli::args::ProgramSource],
    log_file: Option<std::path::PathBuf>,
    list_all: bool,
) -> Result<super::LiveEtw, String> {
    let names = super::LiveEtw::provider_names(programs);
    let needed: Vec<&String> = names.iter().filter(|n| Guid::parse(n).is_none()).collect();
    let catalog = if !needed.is_empty() {
        Some(provider_catalog(&needed)?)
    } else if list_all {
        // only for the listing: a system whose TDH cannot enumerate (Wine) lists without it
        provider_catalog(&[]).ok()
    } else {
        None
    };
    super::LiveEtw::with_catalog(&names, log_file, catalog.as_ref(), list_all)
}

/// Starts the sessions the engine's enabled probes need and returns the source that feeds
/// their records to the engine (None when no probe needs ETW). With `log_file`, the records
/// are also written to that file (the kernel session's, or the user session's when there is
/// no kernel session; with both, the user session writes `<file>.user.etl`).
///
/// Logging without `process_all` (`-E new.etl`, not `-gE`), the high-frequency kernel events
/// (context switches, DPCs, interrupts, system calls) are only written, by a session of their
/// own, to `<file>.hfreq.etl`, for a later `-E` run; their probes do not fire live.
pub fn open_for(
    engine: &Engine,
    etw: &EtwProbes,
    log_file: Option<&Path>,
    process_all: bool,
) -> Result<Option<EtwLiveSource>, String> {
    let mut plan = SessionPlan::for_engine(engine, etw);
    if plan.is_empty() {
        return Ok(None);
    }
    let logged_only = match log_file {
        Some(f) if !process_all => plan
            .split_logged_only()
            .map(|l| (l, f.with_extension("hfreq.etl"))),
        _ => None,
    };
    // user providers by name: the system's list; an unknown name is an error before anything starts
    let mut user = Vec::new();
    if !plan.user.is_empty() {
        let missing: Vec<&String> = plan
            .user
            .iter()
            .filter(|u| u.guid.is_none())
            .map(|u| &u.name)
            .collect();
        let known: Vec<(String, Guid)> = if missing.is_empty() {
            Vec::new()
        } else {
            provider_catalog(&missing)?
                .providers
                .into_iter()
                .map(|p| (p.name, p.guid))
                .collect()
        };
        for u in &plan.user {
            let guid = match u.guid {
                Some(g) => g,
                None => known
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(&u.name))
                    .map(|(_, g)| *g)
                    .ok_or_else(|| {
                        format!(
                            "unknown ETW provider '{}' (not registered on this system)",
                            u.name
                        )
                    })?,
            };
            user.push((u, guid));
        }
    }
    let (context, rx) = CallbackContext::channel(QUEUE_RECORDS);
    // manifest providers' events decode by name: their schemas come from TDH
    let context = context.with_schema_lookup(Box::new(tdh_schema));
    let stacks = !plan.stack_events.is_empty() || plan.user.iter().any(|u| u.stacks);
    let mut source = EtwLiveSource::new(context, rx, etw.clone(), time_base(), stacks)
        .with_stack_events(&plan.stack_events);
    let ctx = source.context_ptr();
    let user_log = log_file.map(|f| {
        if plan.needs_kernel() {
            f.with_extension("user.etl")
        } else {
            f.to_path_buf()
        }
    });
    if plan.needs_kernel() {
        let h = start_session(
            KERNEL_SESSION,
            w::EVENT_TRACE_SYSTEM_LOGGER_MODE,
            plan.kernel_flags,
            log_file,
        )?;
        set_stack_walks(h, &plan.stack_events);
        source.own(Box::new(consume(KERNEL_SESSION, ctx)?));
    }
    if let Some((logged, file)) = logged_only {
        let h = start_session_as(
            LOGGED_SESSION,
            w::EVENT_TRACE_SYSTEM_LOGGER_MODE,
            logged.kernel_flags,
            Some(&file),
            false,
        )?;
        set_stack_walks(h, &logged.stack_events);
        source.own(Box::new(LoggingSession {
            name: LOGGED_SESSION.to_string(),
            stopped: false,
        }));
        eprintln!(
            "dtx: high-frequency kernel events are logged to {} without being processed \
             (-gE processes them live)",
            file.display()
        );
    }
    if !user.is_empty() {
        let h = start_session(USER_SESSION, 0, 0, user_log.as_deref())?;
        let session = consume(USER_SESSION, ctx)?;
        source.own(Box::new(session));
        for (u, guid) in &user {
            let g = win_guid(*guid);
            let mut params = w::ENABLE_TRACE_PARAMETERS {
                Version: w::ENABLE_TRACE_PARAMETERS_VERSION_2,
                ..Default::default()
            };
            if u.stacks {
                params.EnableProperty |= w::EVENT_ENABLE_PROPERTY_STACK_TRACE;
            }
            // SAFETY: a started session's handle, a valid GUID and parameters
            let rc = unsafe {
                w::EnableTraceEx2(
                    h,
                    &g,
                    w::EVENT_CONTROL_CODE_ENABLE_PROVIDER,
                    u.level,
                    u.keywords,
                    0,
                    0,
                    &params,
                )
            };
            if rc != ERROR_SUCCESS {
                return Err(match rc {
                    ERROR_ACCESS_DENIED => {
                        "live ETW tracing needs an elevated prompt: run dtx as Administrator".into()
                    }
                    _ => format!("cannot enable ETW provider '{}': error {rc}", u.name),
                });
            }
            // capture state: providers that support it log what already exists
            // SAFETY: as above
            unsafe {
                w::EnableTraceEx2(
                    h,
                    &g,
                    w::EVENT_CONTROL_CODE_CAPTURE_STATE,
                    u.level,
                    u.keywords,
                    0,
                    0,
                    std::ptr::null(),
                )
            };
        }
    }
    Ok(Some(source))
}

/// Whether dtx runs under Wine (its ntdll exports `wine_get_version`), where TDH and live
/// sessions are stubs.
fn under_wine() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    // SAFETY: NUL-terminated names; ntdll is loaded in every process
    unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
    }
}

/// Calls a TDH function that fills a caller-sized buffer: first for the size, then for the
/// data (8-byte aligned, as the structures want).
fn tdh_buffer(call: impl Fn(*mut u8, &mut u32) -> u32) -> Option<Vec<u8>> {
    let mut size = 0u32;
    let rc = call(std::ptr::null_mut(), &mut size);
    if rc != ERROR_INSUFFICIENT_BUFFER || size == 0 {
        return None;
    }
    let mut buf = vec![0u64; (size as usize).div_ceil(8)];
    if call(buf.as_mut_ptr().cast(), &mut size) != ERROR_SUCCESS {
        return None;
    }
    // SAFETY: buf holds at least `size` initialised bytes
    let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), size as usize) };
    Some(bytes.to_vec())
}

/// The schema of a record's event from TDH (the system's registered manifests): its
/// TRACE_EVENT_INFO and the value maps its fields name. Called on ProcessTrace's thread,
/// inside the callback, once per (provider, event id, version).
fn tdh_schema(rec: &RawEventRecord) -> Option<super::EventSchema> {
    // RawEventRecord mirrors EVENT_RECORD field for field (checked by the raw module's tests)
    let ev = (rec as *const RawEventRecord).cast::<w::EVENT_RECORD>();
    let event_info = tdh_buffer(|buf, size| {
        // SAFETY: ev is the callback's valid record; buf/size describe a writable buffer
        unsafe { w::TdhGetEventInformation(ev, 0, std::ptr::null(), buf.cast(), size) }
    })?;
    let info = crate::etw::decode::tdh::parse_trace_event_info(&event_info)?;
    let provider = raw_guid_bytes(rec);
    let mut maps = Vec::new();
    let mut names: Vec<&String> = info
        .schema
        .props
        .iter()
        .filter_map(|p| p.map.as_ref())
        .collect();
    names.sort();
    names.dedup();
    for name in names {
        let wide: Vec<u16> = name.encode_utf16().chain(Some(0)).collect();
        let map = tdh_buffer(|buf, size| {
            // SAFETY: as above; wide is NUL-terminated
            unsafe { w::TdhGetEventMapInformation(ev, wide.as_ptr(), buf.cast(), size) }
        });
        if let Some(m) = map {
            let mut payload = provider.to_vec();
            payload.extend_from_slice(&m);
            maps.push(payload);
        }
    }
    Some(super::EventSchema { event_info, maps })
}

/// The record's provider GUID in its 16-byte on-disk form (as EventMapInfo records start).
fn raw_guid_bytes(rec: &RawEventRecord) -> [u8; 16] {
    let g = &rec.header.provider_id;
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&g.data1.to_le_bytes());
    b[4..6].copy_from_slice(&g.data2.to_le_bytes());
    b[6..8].copy_from_slice(&g.data3.to_le_bytes());
    b[8..16].copy_from_slice(&g.data4);
    b
}

/// Stops the sessions a killed dtx may have left behind (called at start by `open_for`
/// through `start_session`; exposed for `dtx` to clean up explicitly).
pub fn stop_stale_sessions() -> usize {
    [KERNEL_SESSION, USER_SESSION, LOGGED_SESSION]
        .iter()
        .filter(|n| stop_by_name(n))
        .count()
}
