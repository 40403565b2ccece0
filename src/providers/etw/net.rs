//! `tcpip` and `udpip` from the TcpIp and UdpIp events, IPv4 (opcodes 10..18) and IPv6 (16
//! more). As on the Windows port, tcpip probes give args[0] `ipinfo_t *` and args[1]
//! `tcpinfo_t *`, udpip send/receive args[0] `udpinfo_t *`, all from one `tcpip_msg_t`
//! (dscripts/lib/net.d) built here; `fail` gives arg0 = protocol, arg1 = failure code. The
//! firing runs in the event's process (the PID field: network events arrive in arbitrary
//! threads).

use super::native::{tcpip_msg, NATIVE_BASE};
use super::table::KernelProbe;
use super::{Emit, EventCx};

pub(super) fn fire(cx: &EventCx<'_, '_>, k: &KernelProbe, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let mut a = [0u64; 10];
    if k.name == "fail" {
        a[0] = dec.u64("Proto").unwrap_or(0);
        a[1] = dec.u64("FailureCode").unwrap_or(0);
        out.push(a, cx.pid, cx.tid);
        return;
    }
    let pid = dec.u64("PID").map(|p| p as u32).unwrap_or(cx.pid);
    a[0] = NATIVE_BASE;
    if k.provider == "tcpip" {
        a[1] = NATIVE_BASE;
    }
    let ver = if cx.ev.opcode >= 26 { 6 } else { 4 };
    let text = |f: &str| dec.get(f).map(|v| v.to_string()).unwrap_or_default();
    let (saddr, daddr) = (text("saddr"), text("daddr"));
    out.push_native(a, pid, cx.tid, tcpip_msg::SIZE, |w| {
        let u = |f: &str| dec.u64(f).unwrap_or(0);
        w.u64(tcpip_msg::VER, ver);
        w.u64(tcpip_msg::SIZE_, u("size"));
        w.u64(tcpip_msg::SPORT, u("sport"));
        w.u64(tcpip_msg::DPORT, u("dport"));
        w.u64(tcpip_msg::CONNID, u("connid"));
        w.u64(tcpip_msg::SEQNUM, u("seqnum"));
        w.u64(tcpip_msg::STARTTIME, u("startime"));
        w.u64(tcpip_msg::ENDTIME, u("endtime"));
        w.u64(tcpip_msg::MSS, u("mss"));
        w.u64(tcpip_msg::SACKOPT, u("sackopt"));
        w.u64(tcpip_msg::TSOPT, u("tsopt"));
        w.u64(tcpip_msg::WSOPT, u("wsopt"));
        w.u64(tcpip_msg::RCVWIN, u("rcvwin"));
        w.u64(tcpip_msg::RCVWINSCALE, u("rcvwinscale"));
        w.u64(tcpip_msg::SNDWINSCALE, u("sndwinscale"));
        w.u64(tcpip_msg::PID, pid as u64);
        w.str(tcpip_msg::SADDR, &saddr);
        w.str(tcpip_msg::DADDR, &daddr);
    });
}
