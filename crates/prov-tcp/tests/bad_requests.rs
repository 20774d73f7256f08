//! Peers sending bad connection requests get at most 5 warning lines per address per
//! 10 s (the kit's rate limit), the next one carrying the count of those left out.
//! Until 2026-11-27 each one logged its own line (116 lines in 6 s). In a child
//! process, whose log (stderr) the test reads.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use ofi::AddrFormat;

/// Bad requests the child's peers send.
const BAD: usize = 120;

/// The child's side (in a process of its own, so its log is the test's to read): a
/// listener and [`BAD`] peers sending it garbage.
fn child_bad_requests() {
    ofi::log::init();
    let reg = common::registry();
    let info = common::info(&reg, false, ofi::Caps::MSG);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let (pep, eq) = common::listener(&fabric, &info);
    let addr = common::pep_addr(&pep, AddrFormat::SOCKADDR_IN);
    for k in 0..BAD {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_nonblocking(true).expect("nonblocking");
        // Not a CM header (bad magic).
        s.write_all(&[0x5a; 64]).expect("write");
        // The listener drops the connection once it has read the request: wait for
        // the end of the stream, driving the listener's progress through its EQ.
        let end = Instant::now() + Duration::from_secs(10);
        let mut buf = [0u8; 64];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
            let _ = eq.read();
            assert!(Instant::now() < end, "request {k} not dropped");
            std::thread::yield_now();
        }
    }
    println!("CHILD OK");
}

#[test]
fn bad_connection_requests_are_logged_at_a_bounded_rate() {
    if std::env::var_os("OFI_TCP_BAD_REQ_CHILD").is_some() {
        return child_bad_requests();
    }
    let mut cmd = ofi_testkit::child::test_command(
        "OFI_TCP_BAD_REQ_CHILD",
        "bad_connection_requests_are_logged_at_a_bounded_rate",
    );
    cmd.env("FI_LOG_LEVEL", "warn");
    let run = ofi_testkit::child::run_to_end(cmd, Duration::from_secs(120));
    run.assert_ok_printing("CHILD OK");
    let stderr = &run.stderr;
    let lines = stderr
        .lines()
        .filter(|l| l.contains("bad connection request"))
        .count();
    // 5 per 10 s from the one peer address (a slow run may see a second window).
    assert!(
        (1..=12).contains(&lines),
        "{lines} lines for {BAD} bad requests:\n{stderr}"
    );
}
