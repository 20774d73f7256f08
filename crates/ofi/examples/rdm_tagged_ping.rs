//! rdm_tagged_ping: tagged ping-pong between two processes over a reliable-datagram
//! endpoint, with the safe layer (`ofi::safe`).
//!
//! ```text
//! cargo run -p ofi --example rdm_tagged_ping -- [-n COUNT] [--timeout SECS]
//! FI_PROVIDER=shm cargo run -p ofi --example rdm_tagged_ping
//! FI_PROVIDER="tcp;ofi_rxm" cargo run -p ofi --example rdm_tagged_ping
//! ```
//!
//! The parent opens an `Ep<Rdm>` (provider: `FI_PROVIDER`, else the best available),
//! starts itself again as the child, and the two swap addresses ([`EpAddr`], as JSON)
//! over the child's stdin/stdout. Ping `i` carries tag `i`; the child posts one tagged
//! receive per ping *in reverse order*, so only tag matching can pair them right, and
//! answers each with tag `i | PONG`. The parent checks every pong's tag and bytes.
//! Exit status 0 on success.

mod common;

use std::time::Instant;

use common::{complete_all, ctx, Opts, Peer as ChildProc};
use ofi::safe::{Ep, EpAddr, Hints, OpKind, Rdm};
use ofi::Caps;

const PONG: u64 = 1 << 63;
const USAGE: &str = "usage: rdm_tagged_ping [-n COUNT] [--timeout SECS]";

fn payload(i: usize) -> Vec<u8> {
    format!("ping #{i} {}", "x".repeat(i % 97)).into_bytes()
}

fn open() -> Result<(ofi::safe::Domain, Ep<Rdm>), String> {
    let (info, _fabric, domain) = common::open_hinted(Hints::<Rdm>::new().caps(Caps::TAGGED))?;
    let ep = domain
        .endpoint(&info)
        .cq_size(256)
        .build()
        .map_err(ctx("endpoint"))?;
    Ok((domain, ep))
}

fn parent(o: &Opts) -> Result<(), String> {
    let (domain, mut ep) = open()?;
    let mut child = ChildProc::spawn(&common::child_args(o))?;
    let theirs: EpAddr = child.recv(o.deadline)?;
    let peer = ep.insert_peer(&theirs).map_err(ctx("insert peer"))?;
    child.send(ep.addr())?;

    let mut others = Vec::new();
    let t0 = Instant::now();
    for i in 0..o.count {
        let r = ep
            .trecv(domain.alloc(256).map_err(ctx("alloc"))?, i as u64 | PONG, 0)
            .map_err(ctx("trecv"))?;
        let mut b = domain.alloc(256).map_err(ctx("alloc"))?;
        b.fill_from(&payload(i));
        let s = ep.tsend(b, peer, i as u64).map_err(ctx("tsend"))?;
        let done = complete_all(&mut ep, &[r, s], o.deadline, &mut others)?;
        let pong = &done[0];
        if pong.tag() != Some(i as u64 | PONG) || pong.buf.as_deref() != Some(&payload(i)[..]) {
            return Err(format!("pong {i} does not match: {pong:?}"));
        }
    }
    let rtt = t0.elapsed() / o.count as u32;
    if !others.is_empty() {
        return Err(format!("unexpected completions: {others:?}"));
    }
    let done: usize = child.recv(o.deadline)?;
    child.finish(o.deadline)?;
    println!(
        "rdm_tagged_ping: provider {}: {} round trips, tags and bytes verified (child matched {done}), mean round trip {:.1} us",
        ep.provider(),
        o.count,
        rtt.as_secs_f64() * 1e6
    );
    Ok(())
}

fn child(o: &Opts) -> Result<(), String> {
    let (domain, mut ep) = open()?;
    common::tell(ep.addr())?;
    let theirs: EpAddr = common::hear()?;
    let peer = ep.insert_peer(&theirs).map_err(ctx("insert peer"))?;
    // All receives up front, highest tag first: matching must go by tag, not order.
    let mut recvs = Vec::new();
    for i in (0..o.count).rev() {
        let id = ep
            .trecv(domain.alloc(256).map_err(ctx("alloc"))?, i as u64, 0)
            .map_err(ctx("trecv"))?;
        recvs.push((i, id));
    }
    let mut matched = 0;
    let mut sends = 0;
    while matched < o.count || sends > 0 {
        let c = ep
            .wait(o.deadline.saturating_duration_since(Instant::now()))
            .map_err(ctx("wait"))?;
        match c.kind {
            OpKind::TaggedRecv => {
                let tag = c.tag().unwrap_or(u64::MAX);
                let Some(&(i, _)) = recvs.iter().find(|(_, id)| *id == c.id) else {
                    return Err(format!("completion of an unknown receive: {c:?}"));
                };
                let buf = c.buf.ok_or("receive without buffer")?;
                if tag != i as u64 || buf[..] != payload(i)[..] {
                    return Err(format!(
                        "receive for tag {i} got tag {tag} / {:?}",
                        &buf[..]
                    ));
                }
                matched += 1;
                // Echo with the pong tag, reusing the received buffer.
                ep.tsend(buf, peer, i as u64 | PONG).map_err(ctx("tsend"))?;
                sends += 1;
            }
            OpKind::TaggedSend => sends -= 1,
            other => return Err(format!("unexpected {other:?} completion")),
        }
    }
    common::tell(&matched)
}

fn main() -> std::process::ExitCode {
    common::main("rdm_tagged_ping", USAGE, 1000, child, parent)
}
