//! rxd over udp under forged traffic from raw UDP sockets on loopback: `CONNECT`s
//! naming a live peer (its address inside, as protocol version 1 carried it; or a
//! cookie) from another socket, and a flood of `CONNECT`s with invented addresses,
//! sessions and cookies during a ping-pong. The connection survives, and nothing is
//! ever sent to an address taken from inside a packet (a socket whose address the
//! forged packets name receives nothing; the flooding sockets receive only
//! `CHALLENGE`s).
//!
//! `RXD_FLOOD_N` sets the flood's size (default 100000). The measured version (RSS,
//! latency before and after) is `examples/forged_flood.rs`.

mod common;
use common::{forged_connect, pair, Node};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ofi::abi::raw::CqTaggedEntry;
use ofi::addr::Address;
use ofi::cq::CompletionQueue;
use ofi::Errno;
use ofi_util_rxd::proto::{Hdr, PktType};

const WAIT: Duration = Duration::from_secs(20);

/// One completion of `cq` (driving `other` meanwhile): Ok(context) or the error.
fn wait(cq: &CompletionQueue, other: &CompletionQueue, what: &str) -> Result<usize, Errno> {
    let end = Instant::now() + WAIT;
    loop {
        let mut e = [CqTaggedEntry::default()];
        match cq.read(&mut e) {
            Ok(1) => return Ok(e[0].op_context),
            Ok(_) => {}
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) if err.code() == Errno::EAVAIL => {
                return Err(cq.readerr_owned(0).expect("readerr").err);
            }
            Err(err) => panic!("{what}: cq read: {err}"),
        }
        let _ = other.read::<CqTaggedEntry>(&mut []);
        assert!(Instant::now() < end, "{what}: nothing within {WAIT:?}");
        std::thread::yield_now();
    }
}

/// `from` sends 64 bytes to `to` (at `dest`), which receives them: both complete
/// without error.
fn one_way(from: &Node, to: &Node, dest: u64, k: u64) {
    let out = [k as u8; 64];
    let mut into = [0u8; 64];
    // SAFETY: `into` and `out` outlive the operations (both waited for below).
    unsafe {
        to.ep
            .recv(into.as_mut_ptr(), 64, std::ptr::null_mut(), u64::MAX, 2)
            .expect("fi_recv");
        from.ep
            .send(out.as_ptr(), 64, std::ptr::null_mut(), dest, 1)
            .expect("fi_send");
    }
    assert_eq!(
        wait(&from.cq, &to.cq, "send"),
        Ok(1),
        "send {k} completes without error"
    );
    assert_eq!(wait(&to.cq, &from.cq, "recv"), Ok(2), "receive {k}");
    assert_eq!(into, out);
}

fn socket_addr(a: &Address) -> std::net::SocketAddr {
    a.socket_addr().expect("an IP address")
}

#[test]
fn a_forged_connect_naming_a_live_peer_from_another_socket_changes_nothing() {
    let (a, b, b_at_a, a_at_b) = pair();
    for k in 0..5 {
        one_way(&a, &b, b_at_a, k);
        one_way(&b, &a, a_at_b, k);
    }
    let raw = UdpSocket::bind("127.0.0.1:0").expect("bind");
    // Each endpoint is told, from another socket, that the other restarted: a new
    // session, the other's address inside (as version 1 of the protocol carried
    // it), or a cookie.
    for (to, named) in [(&a, &b), (&b, &a)] {
        for sess in [0x5eed_0001u32, 0x5eed_0002] {
            for src_id in 0..4 {
                for body in [named.addr.to_bytes(), vec![0u8; 8], vec![0x5a; 8]] {
                    raw.send_to(&forged_connect(src_id, sess, &body), socket_addr(&to.addr))
                        .expect("send_to");
                }
            }
        }
    }
    for k in 5..25 {
        one_way(&a, &b, b_at_a, k);
        one_way(&b, &a, a_at_b, k);
    }
}

#[test]
fn a_flood_of_forged_connects_during_a_ping_pong_changes_nothing() {
    let n: u32 = ofi_testkit::env_count("RXD_FLOOD_N", 100_000);
    let (a, b, b_at_a, a_at_b) = pair();
    one_way(&a, &b, b_at_a, 0);
    one_way(&b, &a, a_at_b, 0);
    // A socket whose address the forged packets name: it must receive nothing.
    let trap = UdpSocket::bind("127.0.0.1:0").expect("bind trap");
    let trap_addr = Address::from(trap.local_addr().expect("trap addr")).to_bytes();
    let senders: Vec<UdpSocket> = (0..32)
        .map(|_| UdpSocket::bind("127.0.0.1:0").expect("bind sender"))
        .collect();
    let target = socket_addr(&a.addr);
    let done = Arc::new(AtomicBool::new(false));
    let flood = {
        let done = done.clone();
        let senders: Vec<UdpSocket> = senders
            .iter()
            .map(|s| s.try_clone().expect("clone"))
            .collect();
        std::thread::spawn(move || {
            let mut x = 0x1234_5678_9abc_def0u64;
            for k in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let body = match k % 3 {
                    0 => trap_addr.clone(),
                    1 => {
                        // An invented IPv4 address on loopback.
                        let port = (x >> 16) as u16 | 1;
                        let ip = std::net::Ipv4Addr::new(127, 1 + (x >> 40) as u8 % 200, 7, 9);
                        Address::from(std::net::SocketAddr::from((ip, port))).to_bytes()
                    }
                    _ => x.to_le_bytes().to_vec(),
                };
                let d = forged_connect(x as u32, (x >> 32) as u32 | 1, &body);
                let _ = senders[k as usize % senders.len()].send_to(&d, target);
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    // The ping-pong goes on through the flood, then a while after it.
    let mut k = 1;
    while !done.load(Ordering::SeqCst) && k < 1_000_000 {
        one_way(&a, &b, b_at_a, k);
        one_way(&b, &a, a_at_b, k);
        k += 1;
    }
    flood.join().expect("flood thread");
    for j in 0..200 {
        one_way(&a, &b, b_at_a, k + j);
        one_way(&b, &a, a_at_b, k + j);
    }
    // Nothing went to the address inside the packets (loopback delivers a datagram
    // to the receiving socket's buffer within the send call, so anything sent during
    // the run is there now).
    trap.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 2048];
    match trap.recv_from(&mut buf) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((len, from)) => panic!("{len} bytes from {from} sent to an address inside a packet"),
        Err(e) => panic!("trap: {e}"),
    }
    // What the flooding sockets got back is CHALLENGEs only (to the datagram's source).
    const UDP_HDR: usize = ofi_prov_udp::proto::HDR_LEN;
    for s in &senders {
        s.set_nonblocking(true).expect("nonblocking");
        for _ in 0..100_000 {
            let Ok((len, _)) = s.recv_from(&mut buf) else {
                break;
            };
            let h = Hdr::from_bytes(buf.get(UDP_HDR..len).unwrap_or(&[])).ok();
            assert_eq!(h.map(|h| h.ty), Some(PktType::Challenge), "{len} bytes");
        }
    }
}
