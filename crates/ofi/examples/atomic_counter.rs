//! atomic_counter: one 8-byte counter in the parent's remote-writable memory, bumped
//! with fetch-and-add atomics by N child processes at once, with the safe layer.
//!
//! ```text
//! cargo run -p ofi --example atomic_counter -- [--procs N] [-n ADDS] [--timeout SECS]
//! FI_PROVIDER=shm cargo run -p ofi --example atomic_counter
//! FI_PROVIDER="tcp;ofi_rxm" cargo run -p ofi --example atomic_counter
//! ```
//!
//! The parent registers the counter with `Domain::register_remote_writable`, starts N
//! children and gives each its address and the counter's descriptor. Each child issues
//! ADDS `fetch_add(1)` one after another and reports the values it fetched. The parent
//! keeps driving progress meanwhile (the atomics execute at the target), then checks
//! that the counter is N × ADDS and that the fetched values, all children together,
//! are exactly 0 .. N × ADDS — each seen once, which only holds if every add was
//! atomic. Exit status 0 on success.

mod common;

use std::time::{Duration, Instant};

use common::{ctx, Opts, Peer as ChildProc};
use ofi::safe::{EpAddr, Hints, Rdm, RemoteRegion, RemoteWrite};
use ofi::Caps;

const USAGE: &str = "usage: atomic_counter [--procs N] [-n ADDS] [--timeout SECS]";

fn hints() -> Hints<Rdm> {
    Hints::<Rdm>::new().caps(Caps::ATOMIC)
}

fn parent(o: &Opts) -> Result<(), String> {
    let (info, _fabric, domain) = common::open_hinted(hints())?;
    let mut ep = domain.endpoint(&info).build().map_err(ctx("endpoint"))?;
    let counter = domain
        .register_remote_writable(vec![0u8; 8])
        .map_err(ctx("register"))?;
    let mut children = Vec::new();
    for _ in 0..o.procs {
        let mut c = ChildProc::spawn(&common::child_args(o))?;
        c.send(&(ep.addr(), counter.remote()))?;
        children.push(c);
    }
    // Drive progress until every child has reported its fetched values.
    let mut fetched: Vec<u64> = Vec::new();
    let mut reports = vec![None; children.len()];
    while reports.iter().any(Option::is_none) {
        if let Some(c) = ep.poll().map_err(ctx("completion"))? {
            return Err(format!("unexpected completion at the target: {c:?}"));
        }
        for (k, child) in children.iter_mut().enumerate() {
            if reports[k].is_none() {
                if let Some(v) = child.try_recv::<Vec<u64>>()? {
                    reports[k] = Some(v.len());
                    fetched.extend(v);
                }
            }
        }
        if Instant::now() >= o.deadline {
            return Err("timed out waiting for the children".into());
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    for c in children {
        c.finish(o.deadline)?;
    }
    let total = (o.procs * o.count) as u64;
    let value = u64::from_ne_bytes(
        counter.snapshot()[..8]
            .try_into()
            .map_err(|_| "short counter")?,
    );
    fetched.sort_unstable();
    let exact = fetched.iter().copied().eq(0..total);
    if value != total || !exact {
        return Err(format!(
            "counter {value}, expected {total}; fetched values {} (unique and complete: {exact})",
            fetched.len()
        ));
    }
    println!(
        "atomic_counter: provider {}: {} processes x {} fetch-adds: counter = {value}; every prior value 0..{total} fetched exactly once",
        ep.provider(),
        o.procs,
        o.count
    );
    Ok(())
}

fn child(o: &Opts) -> Result<(), String> {
    let (addr, counter): (EpAddr, RemoteRegion<RemoteWrite>) = common::hear()?;
    let (info, _fabric, domain) = common::open_hinted(hints())?;
    let mut ep = domain.endpoint(&info).build().map_err(ctx("endpoint"))?;
    let peer = ep.insert_peer(&addr).map_err(ctx("insert peer"))?;
    let mut values = Vec::with_capacity(o.count);
    for _ in 0..o.count {
        let id = loop {
            match ep.fetch_add(peer, &counter, 0, 1) {
                Ok(id) => break id,
                Err(e) if e.is_again() => {
                    let _ = ep.poll().map_err(ctx("completion"))?;
                }
                Err(e) => return Err(format!("fetch_add: {e}")),
            }
        };
        let left = o.deadline.saturating_duration_since(Instant::now());
        let c = ep.wait(left).map_err(ctx("completion"))?;
        if c.id != id {
            return Err(format!("unexpected completion {c:?}"));
        }
        values.push(
            c.fetched()
                .ok_or("atomic completion without fetched value")?,
        );
    }
    common::tell(&values)
}

fn main() -> std::process::ExitCode {
    common::main("atomic_counter", USAGE, 200, child, parent)
}
