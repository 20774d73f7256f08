//! rma_write: RMA writes with remote CQ data into memory the target registered as
//! remote-writable, between two processes, with the safe layer.
//!
//! ```text
//! cargo run -p ofi --example rma_write -- [-n BLOCKS] [--timeout SECS]
//! FI_PROVIDER=shm cargo run -p ofi --example rma_write
//! FI_PROVIDER="tcp;ofi_rxm" cargo run -p ofi --example rma_write
//! ```
//!
//! The parent (target) registers `BLOCKS × 64` bytes with
//! `Domain::register_remote_writable` and sends its address and the region's
//! [`RemoteRegion<RemoteWrite>`] descriptor (JSON) to the child. The child (initiator)
//! writes block `i` — a pattern derived from `i` — at offset `64 i` with `fi_writedata`,
//! remote CQ data `i`. The target waits for one `FI_REMOTE_CQ_DATA` completion per
//! block and, for each, checks that its block already holds the pattern (the data is
//! in place when the CQ data arrives). Exit status 0 on success.

mod common;

use std::collections::BTreeSet;

use common::{ctx, Opts, Peer as ChildProc};
use ofi::safe::{Domain, Ep, EpAddr, Fabric, Hints, OpKind, Rdm, RemoteRegion, RemoteWrite};
use ofi::Caps;

const BLOCK: usize = 64;
const USAGE: &str = "usage: rma_write [-n BLOCKS] [--timeout SECS]";

fn pattern(i: usize) -> Vec<u8> {
    (0..BLOCK).map(|k| (i * 31 + k * 7) as u8).collect()
}

fn hints() -> Hints<Rdm> {
    Hints::<Rdm>::new().caps(Caps::RMA | Caps::REMOTE_CQ_DATA)
}

/// Fabric, domain and an endpoint whose CQ holds every completion of the run.
fn open(o: &Opts) -> Result<(Fabric, Domain, Ep<Rdm>), String> {
    let (info, fabric, domain) = common::open_hinted(hints())?;
    let ep = domain
        .endpoint(&info)
        .cq_size(o.count + 16)
        .build()
        .map_err(ctx("endpoint"))?;
    Ok((fabric, domain, ep))
}

fn target(o: &Opts) -> Result<(), String> {
    let (_fabric, domain, mut ep) = open(o)?;
    let region = domain
        .register_remote_writable(vec![0u8; o.count * BLOCK])
        .map_err(ctx("register"))?;
    // Providers may deliver remote CQ data by consuming a posted receive: post one per
    // expected write (they come back unused otherwise, when the endpoint closes).
    for _ in 0..o.count {
        ep.recv(ofi::safe::Buf::new(8)).map_err(ctx("recv"))?;
    }
    let mut child = ChildProc::spawn(&common::child_args(o))?;
    child.send(&(ep.addr(), region.remote()))?;

    let mut seen = BTreeSet::new();
    while seen.len() < o.count {
        let left = o
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        let c = ep.wait(left).map_err(ctx("completion"))?;
        let Some(i) = c.data() else {
            return Err(format!("completion without CQ data: {c:?}"));
        };
        let i = i as usize;
        if i >= o.count || !seen.insert(i) {
            return Err(format!("bad or repeated CQ data {i}"));
        }
        let now = region.snapshot();
        if now[i * BLOCK..(i + 1) * BLOCK] != pattern(i)[..] {
            return Err(format!("block {i} not in place when its CQ data arrived"));
        }
    }
    let acked: usize = child.recv(o.deadline)?;
    child.finish(o.deadline)?;
    let all = region.snapshot();
    for i in 0..o.count {
        if all[i * BLOCK..(i + 1) * BLOCK] != pattern(i)[..] {
            return Err(format!("block {i} changed"));
        }
    }
    println!(
        "rma_write: provider {}: {} writes of {BLOCK} bytes with remote CQ data 0..{} (initiator saw {acked} write completions); every block verified in place",
        ep.provider(),
        o.count,
        o.count
    );
    Ok(())
}

fn initiator(o: &Opts) -> Result<(), String> {
    let (addr, region): (EpAddr, RemoteRegion<RemoteWrite>) = common::hear()?;
    let (_fabric, domain, mut ep) = open(o)?;
    let peer = ep.insert_peer(&addr).map_err(ctx("insert peer"))?;
    let mut posted = 0;
    let mut done = 0;
    while done < o.count {
        if posted < o.count && ep.in_flight() < 16 {
            let mut b = domain.alloc(BLOCK).map_err(ctx("alloc"))?;
            b.fill_from(&pattern(posted));
            match ep.write_data(b, peer, &region, (posted * BLOCK) as u64, posted as u64) {
                Ok(_) => posted += 1,
                Err(e) if e.is_again() => {}
                Err(e) => return Err(format!("write {posted}: {e}")),
            }
        }
        if let Some(c) = ep.poll().map_err(ctx("completion"))? {
            if c.kind != OpKind::Write {
                return Err(format!("unexpected completion {c:?}"));
            }
            done += 1;
        } else if std::time::Instant::now() >= o.deadline {
            return Err("timed out".into());
        }
    }
    common::tell(&done)
}

fn main() -> std::process::ExitCode {
    common::main("rma_write", USAGE, 256, initiator, target)
}
