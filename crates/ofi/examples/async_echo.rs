//! async_echo: an echo server on tokio (`ofi::safe::aio::AsyncEp`), and a client
//! process that checks the echoes.
//!
//! ```text
//! cargo run -p ofi --features tokio --example async_echo -- [-n COUNT] [--timeout SECS]
//! FI_PROVIDER=shm cargo run -p ofi --features tokio --example async_echo
//! FI_PROVIDER="tcp;ofi_rxm" cargo run -p ofi --features tokio --example async_echo
//! ```
//!
//! (Under `cargo test` the `tokio` feature is on for examples already.)
//!
//! The parent runs the server on a current-thread tokio runtime: an `Ep<Rdm>` whose CQ
//! has a wait fd, wrapped in `AsyncEp`, with a few receives posted. Every received
//! message is sent back (the receive buffer itself moves into the send) and the receive
//! re-posted with a fresh buffer; a separate tokio task ticks meanwhile, showing the
//! server only waits and never blocks the runtime. The child (client, synchronous)
//! sends COUNT messages of varying sizes, with up to 4 in flight, and checks every
//! echo. The server stops after COUNT echoes. Exit status 0 on success.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{ctx, Opts, Peer as ChildProc};
use ofi::safe::aio::AsyncEp;
use ofi::safe::{EpAddr, OpKind, Rdm};

const USAGE: &str = "usage: async_echo [-n COUNT] [--timeout SECS]";
const MAX: usize = 4096;
const WINDOW: usize = 4;

fn message(i: usize) -> Vec<u8> {
    let len = 1 + (i * 37) % MAX;
    (0..len).map(|k| (i + k) as u8).collect()
}

async fn serve(o: &Opts) -> Result<(), String> {
    let (info, _fabric, domain) = common::open_first::<Rdm>()?;
    let ep = domain
        .endpoint(&info)
        .wait_fd(true)
        .build()
        .map_err(ctx("endpoint"))?;
    let mut ep = AsyncEp::new(ep).map_err(ctx("async endpoint"))?;
    ep.set_progress_interval(Duration::from_micros(200));
    for _ in 0..WINDOW * 2 {
        ep.get_mut()
            .recv(domain.alloc(MAX).map_err(ctx("alloc"))?)
            .map_err(ctx("recv"))?;
    }
    let mut child = ChildProc::spawn(&common::child_args(o))?;
    child.send(ep.get_ref().addr())?;
    let theirs: EpAddr = child.recv(o.deadline)?;
    let peer = ep
        .get_mut()
        .insert_peer(&theirs)
        .map_err(ctx("insert peer"))?;

    // A task that runs while the server waits (the runtime is never blocked).
    let ticks = Arc::new(AtomicU64::new(0));
    let t = ticks.clone();
    let ticker = tokio::task::spawn_local(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(1)).await;
            t.fetch_add(1, Ordering::Relaxed);
        }
    });

    let (mut echoed, mut sent_done, mut bytes) = (0usize, 0usize, 0usize);
    let left = o.deadline.saturating_duration_since(Instant::now());
    let served = tokio::time::timeout(left, async {
        while sent_done < o.count {
            let c = ep.next().await.map_err(ctx("completion"))?;
            match c.kind {
                OpKind::Recv => {
                    let buf = c.buf.ok_or("receive without buffer")?;
                    bytes += buf.len();
                    ep.get_mut().send(buf, peer).map_err(ctx("send"))?;
                    echoed += 1;
                    if echoed + WINDOW * 2 <= o.count {
                        let fresh = domain.alloc(MAX).map_err(ctx("alloc"))?;
                        ep.get_mut().recv(fresh).map_err(ctx("recv"))?;
                    }
                }
                OpKind::Send => sent_done += 1,
                other => return Err(format!("unexpected {other:?} completion")),
            }
        }
        Ok::<(), String>(())
    })
    .await;
    ticker.abort();
    match served {
        Ok(r) => r?,
        Err(_) => return Err("timed out serving".into()),
    }
    let verified: usize = child.recv(o.deadline)?;
    child.finish(o.deadline)?;
    println!(
        "async_echo: provider {}: served {echoed} echoes ({bytes} bytes) on tokio; client verified {verified}; the runtime ticked {} times meanwhile",
        ep.get_ref().provider(),
        ticks.load(Ordering::Relaxed)
    );
    Ok(())
}

fn client(o: &Opts) -> Result<(), String> {
    let server: EpAddr = common::hear()?;
    let (info, _fabric, domain) = common::open_first::<Rdm>()?;
    let mut ep = domain.endpoint(&info).build().map_err(ctx("endpoint"))?;
    let peer = ep.insert_peer(&server).map_err(ctx("insert peer"))?;
    common::tell(ep.addr())?;
    // Echoes come back in order (one peer, reliable, ordered sends): check them
    // against the sequence.
    let (mut next_send, mut next_check) = (0usize, 0usize);
    let mut sends_left = 0usize;
    while next_check < o.count || sends_left > 0 {
        while next_send < o.count && next_send - next_check < WINDOW {
            ep.recv(domain.alloc(MAX).map_err(ctx("alloc"))?)
                .map_err(ctx("recv"))?;
            let mut b = domain.alloc(MAX).map_err(ctx("alloc"))?;
            b.fill_from(&message(next_send));
            ep.send(b, peer).map_err(ctx("send"))?;
            next_send += 1;
            sends_left += 1;
        }
        let left = o.deadline.saturating_duration_since(Instant::now());
        let c = ep.wait(left).map_err(ctx("completion"))?;
        match c.kind {
            OpKind::Recv => {
                let got = c.buf.ok_or("receive without buffer")?;
                if got[..] != message(next_check)[..] {
                    return Err(format!("echo {next_check} differs ({} bytes)", got.len()));
                }
                next_check += 1;
            }
            OpKind::Send => sends_left -= 1,
            other => return Err(format!("unexpected {other:?} completion")),
        }
    }
    common::tell(&next_check)
}

fn main() -> std::process::ExitCode {
    common::main("async_echo", USAGE, 500, client, |o| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ctx("tokio runtime"))?;
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, serve(o))
    })
}
