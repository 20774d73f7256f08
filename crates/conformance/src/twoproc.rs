//! Messages between two processes. The test binary re-executes itself: the parent runs
//! test `<module>::two_process_child` in a child process (with
//! `OFI_CONFORMANCE_CHILD=1`), and they exchange endpoint addresses as hex lines over
//! the child's stdin and stdout:
//!
//! 1. child → parent: `CHILD ADDR <hex>` (its endpoint's `fi_getname`);
//! 2. parent → child: `PEER <hex>`; the parent then sends a message;
//! 3. the child receives it and sends it back reversed, then prints `CHILD DONE <len>`.
//!
//! Every step is bounded ([`STEP`]); a child that does not answer is killed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ofi::abi::raw::CqMsgEntry;
use ofi::{Address, Errno};

use crate::fixture::{self, Fixture};
use crate::Subject;

/// The environment variable that puts the test binary in child mode.
pub const CHILD_ENV: &str = "OFI_CONFORMANCE_CHILD";

/// The bound of each step of the exchange (the child may first rebuild its subject).
pub const STEP: Duration = Duration::from_secs(60);

/// Whether this process is the child of [`parent`].
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// The test name of function `f` in the module whose `module_path!()` is `module`
/// (the crate's name is not part of a test's name).
pub fn test_name(module: &str, f: &str) -> String {
    match module.split_once("::") {
        Some((_, rest)) => format!("{rest}::{f}"),
        None => f.to_string(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The next completion within `bound` (panics on an error entry or time-out).
fn wait_long(cq: &ofi::cq::CompletionQueue, bound: Duration, what: &str) -> CqMsgEntry {
    let deadline = Instant::now() + bound;
    loop {
        let mut e = [CqMsgEntry::default()];
        match cq.read(&mut e) {
            Ok(_) => return e[0],
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) if err.code() == Errno::EAVAIL => {
                let mut ee = ofi::abi::raw::CqErrEntry::default();
                let _ = cq.readerr(&mut ee, 0);
                panic!("{what}: error completion {}", Errno(ee.err));
            }
            Err(err) => panic!("{what}: fi_cq_read: {err}"),
        }
        assert!(
            Instant::now() < deadline,
            "{what}: nothing within {bound:?}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The child side: run from the test `two_process_child` when [`is_child`].
pub fn child(s: &Subject) {
    let f = Fixture::new(s, 1);
    let p = &f.peers[0];
    let name = p.ep.getname().unwrap_or_else(|e| panic!("fi_getname: {e}"));
    println!("CHILD ADDR {}", hex(&name));
    std::io::stdout().flush().expect("flush stdout");
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .expect("read the peer line");
    let peer_hex = line.trim().strip_prefix("PEER ").expect("a PEER line");
    let peer_bytes = unhex(peer_hex).expect("hex");
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
    let mut child = Command::new(std::env::current_exe().expect("the test binary"))
        .args([child_test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the child process");
    let stdout = child.stdout.take().expect("child stdout");
    let mut stdin = child.stdin.take().expect("child stdin");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout)
            .lines()
            .map_while(std::io::Result::ok)
        {
            if let Some(i) = line.find("CHILD ") {
                if tx.send(line[i..].to_string()).is_err() {
                    break;
                }
            }
        }
    });
    let mut next_line = |what: &str| match rx.recv_timeout(STEP) {
        Ok(l) => l,
        Err(e) => {
            let _ = child.kill();
            panic!("child: no {what} line within {STEP:?} ({e})");
        }
    };
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
    fn hex_round_trip_and_names() {
        let b = [0u8, 1, 0xab, 0xff];
        assert_eq!(unhex(&hex(&b)).unwrap(), b);
        assert!(unhex("abc").is_none());
        assert!(unhex("zz").is_none());
        assert_eq!(test_name("crate_x::suite", "c"), "suite::c");
        assert_eq!(test_name("crate_x", "c"), "c");
    }
}
