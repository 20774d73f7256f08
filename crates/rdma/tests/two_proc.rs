//! The software device between two processes: the test runs itself again as the child
//! (`OFI_RDMA_TEST_CHILD` names the child's part) and the two exchange addresses over
//! the child's stdin/stdout. Covers send/recv, RDMA write/read and atomics served in the
//! child without its involvement, UD, and a killed peer.

mod common;

use std::time::{Duration, Instant};

use common::*;
use ofi_rdma::*;
use ofi_testkit::child::{hear, played_child, say, ChildProc};

const CHILD_ENV: &str = "OFI_RDMA_TEST_CHILD";

fn gid_hex(g: &Gid) -> String {
    g.0.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_gid(s: &str) -> Gid {
    let mut g = [0u8; 16];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex GID");
    }
    Gid(g)
}

/// The child's part.
fn child_main(mode: &str) {
    let n = Node::all_access(1 << 16);
    let qp = n.qp(if mode == "ud-echo" {
        QpType::Ud
    } else {
        QpType::Rc
    });
    say(&format!(
        "ADDR {} {} {} {}",
        gid_hex(&n.gid()),
        qp.qp_num(),
        n.buf.addr(),
        n.mr.rkey()
    ));
    let peer = hear();
    let mut it = peer.strip_prefix("PEER ").expect("PEER line").split(' ');
    let pgid = parse_gid(it.next().unwrap());
    let pqpn: u32 = it.next().unwrap().parse().unwrap();
    match mode {
        // Echo one message back, then serve one-sided traffic until told to stop.
        "echo" => {
            rc_init(&qp);
            n.recv(&qp, 1, 0, 4096);
            rc_connect(&qp, pgid, pqpn, 7, 1);
            say("READY");
            let r = wait_wc(&n.rcq, "child receive");
            assert_eq!(r.status, WcStatus::Success);
            n.post(&qp, 2, SendOp::Send, 0, r.byte_len as usize);
            assert_eq!(wait_wc(&n.scq, "child send").status, WcStatus::Success);
            assert_eq!(hear(), "BYE");
        }
        // Connect, never post a receive, wait to be killed.
        "hang" => {
            rc_init(&qp);
            rc_connect(&qp, pgid, pqpn, 7, 1);
            say("READY");
            std::thread::sleep(Duration::from_secs(30));
        }
        "ud-echo" => {
            ud_ready(&qp, 0x77);
            n.recv(&qp, 1, 0, 4096 + GRH_LEN);
            say("READY");
            let r = wait_wc(&n.rcq, "child datagram");
            let len = r.byte_len as usize - GRH_LEN;
            let to = n.ud_target(pgid, pqpn, 0x77);
            let c = n.ud_send(&qp, &to, 2, SendOp::Send, GRH_LEN, len);
            assert_eq!(c.status, WcStatus::Success);
            assert_eq!(hear(), "BYE");
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// In the child process: play the child's part and return true.
fn child_side() -> bool {
    played_child(CHILD_ENV, child_main)
}

/// What the child announced.
struct ChildAddr {
    gid: Gid,
    qpn: u32,
    addr: u64,
    rkey: u32,
}

/// The harness's child, started for test `test` in `mode`.
fn spawn(test: &str, mode: &str) -> ChildProc {
    ChildProc::spawn(CHILD_ENV, test, mode, &[], BOUND)
}

/// The child's announced address.
fn child_addr(c: &mut ChildProc) -> ChildAddr {
    let l = c.line("ADDR");
    let v: Vec<&str> = l
        .strip_prefix("ADDR ")
        .expect("ADDR line")
        .split(' ')
        .collect();
    ChildAddr {
        gid: parse_gid(v[0]),
        qpn: v[1].parse().unwrap(),
        addr: v[2].parse().unwrap(),
        rkey: v[3].parse().unwrap(),
    }
}

/// Takes the child's address, connects a new RC queue pair of a new node to it, tells
/// the child, and waits until it is ready.
fn rc_to_child(c: &mut ChildProc, len: usize) -> (Node, QueuePair, ChildAddr) {
    let ca = child_addr(c);
    let n = Node::all_access(len);
    let qp = n.qp(QpType::Rc);
    rc_init(&qp);
    rc_connect(&qp, ca.gid, ca.qpn, 7, 1);
    c.send_line(&format!("PEER {} {}", gid_hex(&n.gid()), qp.qp_num()));
    assert_eq!(c.line("READY"), "READY");
    (n, qp, ca)
}

/// Writes `len` bytes into the child's buffer (at 8 KiB) and reads them back (into
/// ours at 10 000); returns what was written.
fn write_then_read(n: &Node, qp: &QueuePair, ca: &ChildAddr, len: usize) -> Vec<u8> {
    let data = pattern(len, len as u8);
    n.buf.write(0, &data);
    let remote = Remote {
        addr: ca.addr + 8192,
        rkey: ca.rkey,
    };
    n.post(qp, 1, SendOp::RdmaWrite(remote), 0, len);
    assert_eq!(wait_wc(&n.scq, "write").status, WcStatus::Success);
    n.post(qp, 2, SendOp::RdmaRead(remote), 10_000, len);
    assert_eq!(wait_wc(&n.scq, "read").status, WcStatus::Success);
    assert_eq!(n.buf.read(10_000, len), data);
    data
}

#[test]
fn rc_between_processes_send_write_read_atomic() {
    if child_side() {
        return;
    }
    let mut c = spawn("rc_between_processes_send_write_read_atomic", "echo");
    let (n, qp, ca) = rc_to_child(&mut c, 1 << 16);
    // One-sided first: the child is blocked in its receive wait meanwhile.
    let data = write_then_read(&n, &qp, &ca, 3000);
    let counter = Remote {
        addr: ca.addr + 16_384,
        rkey: ca.rkey,
    };
    for i in 0..3u64 {
        n.post(
            &qp,
            3,
            SendOp::AtomicFetchAdd {
                remote: counter,
                add: 10,
            },
            20_000,
            8,
        );
        assert_eq!(wait_wc(&n.scq, "fetch add").status, WcStatus::Success);
        assert_eq!(n.buf.u64_at(20_000), i * 10);
    }
    // Out of bounds in the other process: refused, nothing written there.
    let oob = Remote {
        addr: ca.addr + (1 << 16) - 4,
        rkey: ca.rkey,
    };
    // Then the echo.
    n.recv(&qp, 9, 30_000, 4096);
    n.post(&qp, 4, SendOp::Send, 0, 3000);
    assert_eq!(wait_wc(&n.scq, "send").status, WcStatus::Success);
    let r = wait_wc(&n.rcq, "echo");
    assert_eq!((r.wr_id, r.byte_len), (9, 3000));
    assert_eq!(n.buf.read(30_000, 3000), data);
    // Last, the violation (it moves both queue pairs to error).
    n.post(&qp, 5, SendOp::RdmaWrite(oob), 0, 8);
    assert_eq!(wait_wc(&n.scq, "oob write").status, WcStatus::RemAccessErr);
    c.send_line("BYE");
    c.finish();
}

#[test]
fn rc_across_network_namespaces() {
    if child_side() {
        return;
    }
    // The sockets are filesystem paths, so a process in another network namespace of
    // this host is reachable (abstract-namespace sockets would not be).
    let pair = match ofi_testkit::netns::NetPair::root_and_namespace() {
        Ok(p) => p,
        Err(why) => return ofi_testkit::netns::skip("rc_across_network_namespaces", &why),
    };
    let cmd = pair.b.command(std::env::current_exe().unwrap());
    let mut c = ChildProc::spawn_with(
        cmd,
        CHILD_ENV,
        "rc_across_network_namespaces",
        "echo",
        BOUND,
    );
    let (n, qp, ca) = rc_to_child(&mut c, 1 << 16);
    write_then_read(&n, &qp, &ca, 5000);
    n.recv(&qp, 9, 30_000, 4096);
    n.post(&qp, 3, SendOp::Send, 0, 100);
    assert_eq!(wait_wc(&n.scq, "send").status, WcStatus::Success);
    assert_eq!(wait_wc(&n.rcq, "echo").byte_len, 100);
    c.send_line("BYE");
    c.finish();
    drop(pair);
}

#[test]
fn killed_peer_fails_outstanding_work_and_raises_an_event() {
    if child_side() {
        return;
    }
    let mut c = spawn(
        "killed_peer_fails_outstanding_work_and_raises_an_event",
        "hang",
    );
    // rnr_retry 7: without the kill these sends would retry for ever.
    let (n, qp, _ca) = rc_to_child(&mut c, 4096);
    n.recv(&qp, 50, 1024, 64);
    n.post(&qp, 1, SendOp::Send, 0, 8);
    n.post(&qp, 2, SendOp::Send, 0, 8);
    let t0 = Instant::now();
    c.child.kill().unwrap();
    c.child.wait().unwrap();
    let first = wait_wc(&n.scq, "outstanding send");
    assert_eq!((first.wr_id, first.status), (1, WcStatus::RetryExcErr));
    let second = wait_wc(&n.scq, "queued send");
    assert_eq!((second.wr_id, second.status), (2, WcStatus::WrFlushErr));
    let r = wait_wc(&n.rcq, "posted receive");
    assert_eq!((r.wr_id, r.status), (50, WcStatus::WrFlushErr));
    assert!(t0.elapsed() < BOUND);
    let deadline = Instant::now() + BOUND;
    let ev = loop {
        if let Some(e) = n.ctx.get_async_event() {
            break e;
        }
        assert!(Instant::now() < deadline, "no async event");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(
        ev,
        AsyncEvent {
            event_type: EventType::QpFatal,
            element: EventElement::Qp(qp.qp_num())
        }
    );
    assert_eq!(qp.state(), QpState::Err);
}

#[test]
fn ud_between_processes() {
    if child_side() {
        return;
    }
    let mut c = spawn("ud_between_processes", "ud-echo");
    let ca = child_addr(&mut c);
    let n = Node::all_access(1 << 14);
    let qp = n.qp(QpType::Ud);
    ud_ready(&qp, 0x77);
    n.recv(&qp, 7, 8192, 4096 + GRH_LEN);
    c.send_line(&format!("PEER {} {}", gid_hex(&n.gid()), qp.qp_num()));
    assert_eq!(c.line("READY"), "READY");
    let msg = pattern(2000, 8);
    n.buf.write(0, &msg);
    let to = n.ud_target(ca.gid, ca.qpn, 0x77);
    assert_eq!(
        n.ud_send(&qp, &to, 1, SendOp::Send, 0, 2000).status,
        WcStatus::Success
    );
    let r = wait_wc(&n.rcq, "ud echo");
    assert_eq!((r.wr_id, r.byte_len as usize), (7, 2000 + GRH_LEN));
    assert_eq!(n.buf.read(8192 + 8, 16), ca.gid.0.to_vec());
    assert_eq!(n.buf.read(8192 + GRH_LEN, 2000), msg);
    c.send_line("BYE");
    c.finish();
}
