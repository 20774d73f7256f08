//! Messages between two processes. The test binary re-executes itself: the parent test
//! (`<module>::two_process_exchange`, `…::two_process_cm` …) runs that same test in a
//! child process with `OFI_CONFORMANCE_CHILD=1`, where it plays the other side instead
//! (so no test exists only to be a child), and they exchange endpoint addresses as hex
//! lines over the child's stdin and stdout:
//!
//! 1. child → parent: `CHILD ADDR <hex>` (its endpoint's `fi_getname`);
//! 2. parent → child: `PEER <hex>`; the parent then sends a message;
//! 3. the child receives it and sends it back reversed, then prints `CHILD DONE <len>`.
//!
//! Every step is bounded ([`STEP`]); a child that does not answer, or whose parent
//! check fails, is killed and reaped.
//!
//! Other modes ([`Mode`], passed to the child in `OFI_CONFORMANCE_MODE`) use the
//! same line protocol on a reliable endpoint type:
//!
//! - [`Mode::Cm`] (`FI_EP_MSG`): the child listens and prints its passive endpoint's
//!   name; the parent connects with data, the child's `FI_CONNREQ` must carry it and
//!   its accept data must arrive with the parent's `FI_CONNECTED`; a message is echoed
//!   reversed; then the parent shuts down and the child must read `FI_SHUTDOWN`.
//! - [`Mode::Tagged`]: two tagged messages, received by the child in the opposite
//!   order by tag, echoed back reversed with the tag + 1.
//! - [`Mode::Rma`]: the child registers a region and prints `CHILD MR <addr> <key>`;
//!   the parent reads it (`fi_read`) and checks its contents, writes it back reversed
//!   (`fi_write`), and the child sees the new bytes in its memory.
//!
//! Connection-oriented types connect (child listens); connectionless ones insert each
//! other's names in their AVs.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ofi::abi::raw::CqMsgEntry;
use ofi::{Address, Errno};

use ofi_testkit::child::{hex, unhex};

use crate::fixture::{self, Fixture};
use crate::Subject;

/// The environment variable that puts the test binary in child mode.
pub const CHILD_ENV: &str = "OFI_CONFORMANCE_CHILD";

/// When set, the network namespace the parent starts its child in (`ip netns exec`):
/// the two processes then run as two hosts (`tests/netns.rs`).
pub const CHILD_NETNS_ENV: &str = "OFI_CONFORMANCE_CHILD_NETNS";

/// The command that starts this test binary as the child: directly, or in the
/// namespace [`CHILD_NETNS_ENV`] names.
fn child_command() -> Command {
    let exe = std::env::current_exe().expect("the test binary");
    match std::env::var(CHILD_NETNS_ENV) {
        Ok(ns) if !ns.is_empty() => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &ns]).arg(exe);
            c
        }
        _ => Command::new(exe),
    }
}

/// A child process that is killed (and reaped) if the parent gives up on it: a
/// failed check never leaves a process behind.
struct Reaper(std::process::Child);

impl std::ops::Deref for Reaper {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaper {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `child_test` as the child (in `mode` when given): the child, its stdin, and
/// the `CHILD …` lines of its stdout (trimmed), read by a thread that ends with them.
fn spawn_child(
    child_test: &str,
    mode: Option<&str>,
) -> (Reaper, std::process::ChildStdin, mpsc::Receiver<String>) {
    let mut command = child_command();
    command
        .args([child_test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1");
    if let Some(mode) = mode {
        command.env(MODE_ENV, mode);
    }
    let mut child = Reaper(
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the child process"),
    );
    let stdout = child.stdout.take().expect("child stdout");
    let stdin = child.stdin.take().expect("child stdin");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout)
            .lines()
            .map_while(std::io::Result::ok)
        {
            if let Some(i) = line.find("CHILD ") {
                if tx.send(line[i..].trim().to_string()).is_err() {
                    break;
                }
            }
        }
    });
    (child, stdin, rx)
}

/// The child's next `CHILD …` line (`what` names it in the panic); a child silent for
/// [`STEP`] is killed and reaped, and the check panics.
fn child_line(child: &mut Reaper, lines: &mpsc::Receiver<String>, what: &str) -> String {
    match lines.recv_timeout(STEP) {
        Ok(l) => l,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child: no {what} line within {STEP:?} ({e})");
        }
    }
}

/// The bound of each step of the exchange (the child may first rebuild its subject).
pub const STEP: Duration = Duration::from_secs(60);

/// Whether this process is the child of [`parent`].
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// The body of the suite's two-process test `test` (of module `module`, checking
/// `cap`): in the child process, the child's side; in the parent, the check, which
/// starts that same test as the child ([`parent`] for [`Mode::Msg`], else
/// [`parent_mode`]).
pub fn suite_test(
    s: &Subject,
    module: &str,
    test: &str,
    cap: crate::Capability,
    expected: &[crate::Capability],
    mode: Mode,
) {
    if is_child() {
        // This process is the other side, started by this same test.
        child(s);
        return;
    }
    let name = test_name(module, test);
    crate::run(s, test, cap, expected, |s| match mode {
        Mode::Msg => parent(s, &name),
        other => parent_mode(s, &name, other),
    });
}

/// The test name of function `f` in the module whose `module_path!()` is `module`
/// (the crate's name is not part of a test's name).
pub fn test_name(module: &str, f: &str) -> String {
    match module.split_once("::") {
        Some((_, rest)) => format!("{rest}::{f}"),
        None => f.to_string(),
    }
}

/// The next completion within `bound` (panics on an error entry or time-out).
fn wait_long(cq: &ofi::cq::CompletionQueue, bound: Duration, what: &str) -> CqMsgEntry {
    match fixture::wait_within(cq, bound, Duration::from_micros(200)) {
        Some(Ok(e)) => e,
        Some(Err(ee)) => panic!("{what}: error completion {}", Errno(ee.err)),
        None => panic!("{what}: nothing within {bound:?}"),
    }
}

/// The child's half of the address exchange: print its own address (`CHILD ADDR <hex>`)
/// and read the parent's (`PEER <hex>`) from stdin.
fn child_exchange_addresses(own: &[u8]) -> Vec<u8> {
    println!("CHILD ADDR {}", hex(own));
    std::io::stdout().flush().expect("flush stdout");
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .expect("read the peer line");
    unhex(line.trim().strip_prefix("PEER ").expect("a PEER line")).expect("hex")
}

/// The child side: run by the two-process test itself when [`is_child`].
pub fn child(s: &Subject) {
    let mode = Mode::current();
    if mode != Mode::Msg {
        child_mode(s, mode);
        return;
    }
    let f = Fixture::new(s, 1);
    let p = &f.peers[0];
    let name = p.ep.getname().unwrap_or_else(|e| panic!("fi_getname: {e}"));
    let peer_bytes = child_exchange_addresses(&name);
    let peer = Address::from_bytes(f.info.addr_format, &peer_bytes).expect("peer address");
    let dest = p.av.insert(&[peer]).expect("insert the peer")[0];
    let mut buf = vec![0u8; 4096];
    fixture::post_recv(&p.ep, &mut buf, 1).expect("fi_recv");
    let r = wait_long(&p.cq, STEP, "child receive");
    buf.truncate(r.len);
    buf.reverse();
    fixture::send(&p.ep, &buf, dest, 2).expect("fi_send back");
    let c = wait_long(&p.cq, STEP, "child send");
    assert_eq!(c.op_context, 2);
    println!("CHILD DONE {}", buf.len());
}

/// The parent side: start test `child_test` of this binary as the child and exchange a
/// message with it.
pub fn parent(s: &Subject, child_test: &str) {
    let f = Fixture::new(s, 1);
    let p = &f.peers[0];
    let (mut child, mut stdin, rx) = spawn_child(child_test, None);
    let mut next_line = |what: &str| child_line(&mut child, &rx, what);
    let addr_line = next_line("ADDR");
    let bytes = unhex(
        addr_line
            .trim()
            .strip_prefix("CHILD ADDR ")
            .expect("an ADDR line"),
    )
    .expect("hex address");
    let peer = Address::from_bytes(f.info.addr_format, &bytes).expect("child's address");
    let dest = p.av.insert(&[peer]).expect("insert the child's address")[0];
    let mut buf = vec![0u8; 4096];
    fixture::post_recv(&p.ep, &mut buf, 10).expect("fi_recv");
    let me = p.ep.getname().expect("fi_getname");
    writeln!(stdin, "PEER {}", hex(&me)).expect("write to the child");
    stdin.flush().expect("flush");
    let payload = fixture::pattern(1000, 3);
    fixture::send(&p.ep, &payload, dest, 11).expect("fi_send to the child");
    let mut got_send = false;
    let mut got_recv = None;
    while !(got_send && got_recv.is_some()) {
        let c = wait_long(&p.cq, STEP, "parent");
        match c.op_context {
            11 => got_send = true,
            10 => got_recv = Some(c.len),
            other => panic!("unexpected completion context {other:#x}"),
        }
    }
    let len = got_recv.unwrap_or(0);
    let mut want = payload.clone();
    want.reverse();
    assert_eq!(len, want.len());
    assert!(buf[..len] == want[..], "the echo differs");
    let done = next_line("DONE");
    assert_eq!(done.trim(), format!("CHILD DONE {}", payload.len()));
    let status = child.wait().expect("wait for the child");
    assert!(status.success(), "child exited with {status}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_names() {
        assert_eq!(test_name("crate_x::suite", "c"), "suite::c");
        assert_eq!(test_name("crate_x", "c"), "c");
    }
}

/// The environment variable naming the child's [`Mode`].
pub const MODE_ENV: &str = "OFI_CONFORMANCE_MODE";

/// What a two-process test exchanges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Connectionless messages (the original exchange).
    Msg,
    /// Connection management and messages over `FI_EP_MSG`.
    Cm,
    /// Tagged messages on a reliable endpoint type.
    Tagged,
    /// RMA read and write on a reliable endpoint type.
    Rma,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Msg => "msg",
            Mode::Cm => "cm",
            Mode::Tagged => "tagged",
            Mode::Rma => "rma",
        }
    }

    /// The mode this child process runs (from [`MODE_ENV`]; `msg` when unset).
    pub fn current() -> Mode {
        match std::env::var(MODE_ENV).as_deref() {
            Ok("cm") => Mode::Cm,
            Ok("tagged") => Mode::Tagged,
            Ok("rma") => Mode::Rma,
            _ => Mode::Msg,
        }
    }

    /// The endpoint type and capabilities the mode runs on for `s`.
    fn target(self, s: &Subject) -> (ofi::EpType, ofi::Caps) {
        use ofi::{Caps, EpType};
        let c = s.claimed();
        let reliable = |caps: Caps| {
            c.types_with(caps)
                .into_iter()
                .find(|t| *t != EpType::Dgram)
                .unwrap_or_else(|| panic!("no reliable endpoint type with {caps}"))
        };
        match self {
            Mode::Msg => (c.connectionless_type().expect("connectionless"), Caps::MSG),
            Mode::Cm => (EpType::Msg, Caps::MSG),
            Mode::Tagged => (reliable(Caps::TAGGED), Caps::TAGGED),
            Mode::Rma => (reliable(Caps::RMA), Caps::RMA),
        }
    }
}

/// One process's end: field order is drop order.
struct End {
    ep: ofi::ep::Endpoint,
    cq: ofi::cq::CompletionQueue,
    _av: Option<ofi::av::AddressVector>,
    eq: Option<ofi::eq::EventQueue>,
    _pep: Option<ofi::ep::PassiveEndpoint>,
    peer: u64,
    info: ofi::Info,
    _domain: ofi::domain::Domain,
    _fabric: ofi::fabric::Fabric,
}

/// The next completion of `cq` within `bound` (tagged format).
fn wait_tagged(
    cq: &ofi::cq::CompletionQueue,
    bound: Duration,
    what: &str,
) -> ofi::abi::raw::CqTaggedEntry {
    let deadline = Instant::now() + bound;
    loop {
        match crate::pair::poll(cq) {
            Some(Ok(e)) => return e,
            Some(Err(ee)) => panic!("{what}: error completion {}", Errno(ee.err)),
            None => {}
        }
        assert!(
            Instant::now() < deadline,
            "{what}: nothing within {bound:?}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The next event of `eq` within `bound`, which must be `event`.
fn wait_event(
    eq: &ofi::eq::EventQueue,
    cq: Option<&ofi::cq::CompletionQueue>,
    bound: Duration,
    event: ofi::EqEvent,
    what: &str,
) -> ofi::eq::Event {
    let deadline = Instant::now() + bound;
    loop {
        match eq.read() {
            Ok(ev) if ev.event == event => return ev,
            Ok(ev) => panic!("{what}: expected {event:?}, got {ev:?}"),
            Err(e) if e.code() == Errno::EAGAIN => {}
            Err(e) if e.code() == Errno::EAVAIL => {
                panic!("{what}: error event {:?}", eq.readerr())
            }
            Err(e) => panic!("{what}: fi_eq_read: {e}"),
        }
        if let Some(cq) = cq {
            crate::pair::drive(cq);
        }
        assert!(
            Instant::now() < deadline,
            "{what}: no {event:?} within {bound:?}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn mode_info(s: &Subject, mode: Mode) -> ofi::Info {
    let (t, caps) = mode.target(s);
    crate::pair::info_for(s, t, caps)
        .unwrap_or_else(|| panic!("getinfo has no {t} result with {caps}"))
}

/// Register `len` bytes of `fill` for remote access; returns the region, the address
/// a peer uses and the key.
fn remote_region(
    domain: &ofi::domain::Domain,
    info: &ofi::Info,
    ep: Option<&ofi::ep::Endpoint>,
    bytes: Vec<u8>,
) -> (ofi::mr::MemoryRegion, u64) {
    use ofi::{MrMode, OpFlags};
    let mr = domain
        .mr_reg_owned(
            bytes,
            OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE | OpFlags::READ | OpFlags::WRITE,
            0x42,
        )
        .unwrap_or_else(|e| panic!("fi_mr_reg: {e}"));
    if info.domain_attr.mr_mode.contains(MrMode::ENDPOINT) {
        if let Some(ep) = ep {
            mr.bind_ep(ep, 0)
                .unwrap_or_else(|e| panic!("fi_mr_bind: {e}"));
            mr.enable().unwrap_or_else(|e| panic!("fi_mr_enable: {e}"));
        }
    }
    let addr = if info.domain_attr.mr_mode.contains(MrMode::VIRT_ADDR) {
        mr.owned_ptr().expect("owned").0 as u64
    } else {
        0
    };
    (mr, addr)
}

/// The child side of the modes other than [`Mode::Msg`].
fn child_mode(s: &Subject, mode: Mode) {
    use ofi::{EpType, EqEvent, OpFlags};
    let info = mode_info(s, mode);
    let (fabric, domain) = fixture::open_domain(s, &info);
    let spec = crate::pair::PairSpec::new(info.ep_type(), info.caps);
    let msg_type = info.ep_type() == EpType::Msg;
    let (mut pep, mut eq_s, mut early) = (None, None, None);
    let name = if msg_type {
        let (p, eq, name) = crate::pair::listen(&fabric, &info);
        pep = Some(p);
        eq_s = Some(eq);
        name
    } else {
        let (ep, cq, _c, av) = crate::pair::open_side(&domain, &info, &spec, 2, None);
        ep.enable().expect("fi_enable");
        let name = ep.getname().expect("fi_getname");
        early = Some((ep, cq, av));
        name
    };
    let region = if mode == Mode::Rma && !msg_type {
        let ep = early.as_ref().map(|e| &e.0);
        let (mr, addr) = remote_region(&domain, &info, ep, pattern_bytes());
        println!("CHILD MR {addr} {}", mr.key());
        Some(mr)
    } else {
        None
    };
    let peer_bytes = child_exchange_addresses(&name);
    let end = if let Some((ep, cq, av)) = early {
        let peer = Address::from_bytes(info.addr_format, &peer_bytes).expect("peer address");
        let dest = av
            .as_ref()
            .expect("an AV")
            .insert(&[peer])
            .expect("insert the peer")[0];
        End {
            ep,
            cq,
            _av: av,
            eq: None,
            _pep: None,
            peer: dest,
            info,
            _domain: domain,
            _fabric: fabric,
        }
    } else {
        let eq = eq_s.take().expect("listener EQ");
        let req = wait_event(&eq, None, STEP, EqEvent::ConnReq, "child listener");
        assert!(
            req.cm_data.starts_with(b"parent connects"),
            "FI_CONNREQ data across processes: {:?}",
            req.cm_data
        );
        let req_info = req.info.as_deref().cloned().expect("FI_CONNREQ info");
        let (ep, cq, _c, _av) = crate::pair::open_side(&domain, &req_info, &spec, 3, Some(&eq));
        ep.accept(b"child accepts")
            .unwrap_or_else(|e| panic!("fi_accept: {e}"));
        wait_event(
            &eq,
            Some(&cq),
            STEP,
            EqEvent::Connected,
            "child FI_CONNECTED",
        );
        End {
            ep,
            cq,
            _av: None,
            eq: Some(eq),
            _pep: pep,
            peer: ofi::ADDR_UNSPEC,
            info,
            _domain: domain,
            _fabric: fabric,
        }
    };
    // A connected RMA target registers after the connection (FI_MR_ENDPOINT needs it).
    let region = match region {
        Some(r) => Some(r),
        None if mode == Mode::Rma => {
            let (mr, addr) = remote_region(&end._domain, &end.info, Some(&end.ep), pattern_bytes());
            println!("CHILD MR {addr} {}", mr.key());
            std::io::stdout().flush().expect("flush stdout");
            Some(mr)
        }
        None => None,
    };
    let n = match mode {
        Mode::Cm => {
            let mut buf = vec![0u8; 4096];
            fixture::post_recv(&end.ep, &mut buf, 1).expect("fi_recv");
            let r = wait_tagged(&end.cq, STEP, "child receive");
            buf.truncate(r.len);
            buf.reverse();
            fixture::send(&end.ep, &buf, end.peer, 2).expect("fi_send back");
            assert_eq!(wait_tagged(&end.cq, STEP, "child send").op_context, 2);
            let eq = end.eq.as_ref().expect("EQ");
            wait_event(
                eq,
                Some(&end.cq),
                STEP,
                EqEvent::Shutdown,
                "child FI_SHUTDOWN",
            );
            buf.len()
        }
        Mode::Tagged => {
            let mut b1 = vec![0u8; 256];
            let mut b2 = vec![0u8; 256];
            crate::fixture::trecv(&end.ep, &mut b2, ofi::ADDR_UNSPEC, 0x22, 0, 0x22);
            crate::fixture::trecv(&end.ep, &mut b1, ofi::ADDR_UNSPEC, 0x11, 0, 0x11);
            let mut total = 0;
            for _ in 0..2 {
                let r = wait_tagged(&end.cq, STEP, "child tagged receive");
                assert_eq!(
                    r.tag as usize, r.op_context,
                    "the receive for tag {:#x} took tag {:#x}",
                    r.op_context, r.tag
                );
                assert!(
                    OpFlags::from_bits_retain(r.flags).contains(OpFlags::TAGGED | OpFlags::RECV)
                );
                let b = if r.tag == 0x11 { &mut b1 } else { &mut b2 };
                b.truncate(r.len);
                b.reverse();
                total += r.len;
            }
            crate::fixture::tsend(&end.ep, &b1, end.peer, 0x12, 3);
            crate::fixture::tsend(&end.ep, &b2, end.peer, 0x23, 4);
            wait_tagged(&end.cq, STEP, "child tagged send");
            wait_tagged(&end.cq, STEP, "child tagged send");
            total
        }
        Mode::Rma => {
            let mr = region.as_ref().expect("a region");
            let mut want = pattern_bytes();
            want.reverse();
            let deadline = Instant::now() + STEP;
            while mr.owned_to_vec().expect("owned") != want {
                crate::pair::drive(&end.cq);
                assert!(
                    Instant::now() < deadline,
                    "the parent's fi_write never landed"
                );
                std::thread::sleep(Duration::from_micros(200));
            }
            want.len()
        }
        Mode::Msg => unreachable!("handled by child()"),
    };
    println!("CHILD DONE {n}");
    std::io::stdout().flush().expect("flush stdout");
    // Stay, driving progress, until the parent closes our stdin (it has every
    // completion it waits for): an RMA write can land here before its acknowledgement
    // has left, and closing now would reset the connection under it. Bounded by STEP.
    let gone = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = gone.clone();
    std::thread::spawn(move || {
        let mut rest = String::new();
        while std::io::stdin().read_line(&mut rest).is_ok_and(|n| n > 0) {
            rest.clear();
        }
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let deadline = Instant::now() + STEP;
    while !gone.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline {
        crate::pair::drive(&end.cq);
        std::thread::sleep(Duration::from_micros(200));
    }
    drop(region);
    drop(end);
}

fn pattern_bytes() -> Vec<u8> {
    fixture::pattern(4096, 21)
}

/// The parent side of `mode` (not [`Mode::Msg`]): start test `child_test` of this
/// binary in mode `mode` and run the exchange with it.
pub fn parent_mode(s: &Subject, child_test: &str, mode: Mode) {
    use ofi::{EpType, EqEvent};
    let info = mode_info(s, mode);
    let (fabric, domain) = fixture::open_domain(s, &info);
    let spec = crate::pair::PairSpec::new(info.ep_type(), info.caps);
    let msg_type = info.ep_type() == EpType::Msg;
    let (mut child, mut stdin, rx) = spawn_child(child_test, Some(mode.name()));
    let mut next_line = |what: &str| child_line(&mut child, &rx, what);
    let mut mr_line = None;
    let addr_line = loop {
        let l = next_line("ADDR");
        if l.starts_with("CHILD MR ") {
            mr_line = Some(l);
        } else {
            break l;
        }
    };
    let child_name =
        unhex(addr_line.strip_prefix("CHILD ADDR ").expect("an ADDR line")).expect("hex address");
    let eq_c = if msg_type {
        Some(
            fabric
                .eq_open(&ofi::eq::EqAttr::default())
                .expect("fi_eq_open"),
        )
    } else {
        None
    };
    let (ep, cq, _c, av) = crate::pair::open_side(&domain, &info, &spec, 1, eq_c.as_ref());
    ep.enable().expect("fi_enable");
    let me = ep.getname().expect("fi_getname");
    writeln!(stdin, "PEER {}", hex(&me)).expect("write to the child");
    stdin.flush().expect("flush");
    let peer = if msg_type {
        ep.connect(&child_name, b"parent connects")
            .unwrap_or_else(|e| panic!("fi_connect: {e}"));
        let ev = wait_event(
            eq_c.as_ref().unwrap(),
            Some(&cq),
            STEP,
            EqEvent::Connected,
            "parent FI_CONNECTED",
        );
        assert!(
            ev.cm_data.starts_with(b"child accepts"),
            "accept data across processes: {:?}",
            ev.cm_data
        );
        ofi::ADDR_UNSPEC
    } else {
        let a = Address::from_bytes(info.addr_format, &child_name).expect("child's address");
        av.as_ref()
            .expect("AV")
            .insert(&[a])
            .expect("insert the child's address")[0]
    };
    match mode {
        Mode::Cm => {
            let mut buf = vec![0u8; 4096];
            fixture::post_recv(&ep, &mut buf, 10).expect("fi_recv");
            let payload = fixture::pattern(1500, 4);
            fixture::send(&ep, &payload, peer, 11).expect("fi_send to the child");
            let mut got = None;
            let mut sent = false;
            while !(sent && got.is_some()) {
                let c = wait_tagged(&cq, STEP, "parent");
                match c.op_context {
                    11 => sent = true,
                    10 => got = Some(c.len),
                    o => panic!("unexpected completion context {o:#x}"),
                }
            }
            let mut want = payload.clone();
            want.reverse();
            assert_eq!(got, Some(want.len()));
            assert!(buf[..want.len()] == want[..], "the echo differs");
            ep.shutdown(0)
                .unwrap_or_else(|e| panic!("fi_shutdown: {e}"));
            let done = next_line("DONE");
            assert_eq!(done, format!("CHILD DONE {}", payload.len()));
        }
        Mode::Tagged => {
            let mut r1 = vec![0u8; 256];
            let mut r2 = vec![0u8; 256];
            crate::fixture::trecv(&ep, &mut r1, ofi::ADDR_UNSPEC, 0x12, 0, 0x12);
            crate::fixture::trecv(&ep, &mut r2, ofi::ADDR_UNSPEC, 0x23, 0, 0x23);
            let (p1, p2) = (fixture::pattern(100, 1), fixture::pattern(200, 2));
            crate::fixture::tsend(&ep, &p1, peer, 0x11, 1);
            crate::fixture::tsend(&ep, &p2, peer, 0x22, 2);
            let mut recvs = 0;
            for _ in 0..4 {
                let c = wait_tagged(&cq, STEP, "parent tagged");
                if c.op_context == 0x12 || c.op_context == 0x23 {
                    assert_eq!(c.tag as usize, c.op_context, "echo tag");
                    recvs += 1;
                }
            }
            assert_eq!(recvs, 2);
            let (mut w1, mut w2) = (p1.clone(), p2.clone());
            w1.reverse();
            w2.reverse();
            assert!(
                r1[..100] == w1[..] && r2[..200] == w2[..],
                "tagged echoes differ"
            );
            let done = next_line("DONE");
            assert_eq!(done, "CHILD DONE 300");
        }
        Mode::Rma => {
            let mr_line = match mr_line {
                Some(l) => l,
                None => next_line("MR"),
            };
            let mut parts = mr_line
                .strip_prefix("CHILD MR ")
                .expect("an MR line")
                .split(' ');
            let addr: u64 = parts
                .next()
                .and_then(|x| x.parse().ok())
                .expect("MR address");
            let key: u64 = parts.next().and_then(|x| x.parse().ok()).expect("MR key");
            let (local, _) = remote_region(&domain, &info, Some(&ep), vec![0u8; 4096]);
            let lp = local.owned_ptr().expect("owned").0;
            // SAFETY: `local` is registered and alive until the completion is read.
            unsafe { ep.read(lp, 4096, local.desc(), peer, addr, key, 20) }
                .unwrap_or_else(|e| panic!("fi_read from the child: {e}"));
            assert_eq!(wait_tagged(&cq, STEP, "parent fi_read").op_context, 20);
            assert!(
                local.owned_to_vec().expect("owned") == pattern_bytes(),
                "fi_read across processes: wrong bytes"
            );
            let mut rev = pattern_bytes();
            rev.reverse();
            local.write_owned(0, &rev).expect("inside the region");
            // SAFETY: as for the read.
            unsafe { ep.write(lp, 4096, local.desc(), peer, addr, key, 21) }
                .unwrap_or_else(|e| panic!("fi_write to the child: {e}"));
            assert_eq!(wait_tagged(&cq, STEP, "parent fi_write").op_context, 21);
            let done = next_line("DONE");
            assert_eq!(done, "CHILD DONE 4096");
            drop(local);
        }
        Mode::Msg => unreachable!("use parent()"),
    }
    // Every completion is in: let the child go (it waits for its stdin to close).
    drop(stdin);
    let status = child.wait().expect("wait for the child");
    assert!(status.success(), "child exited with {status}");
    drop(ep);
}
