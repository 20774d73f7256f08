//! `fi_bw --threads N`: the message rate of N threads, one per context of a scalable
//! endpoint pair, in this process.
//!
//! One domain holds two scalable endpoints: the sender with N transmit contexts, the
//! receiver with N receive contexts (`tx_ctx_cnt = rx_ctx_cnt = N`). Thread `i` owns
//! transmit context `i` and receive context `i`, each with its own CQ, and addresses
//! its receive context with `fi_rx_addr` (an AV with enough `rx_ctx_bits`). Per round
//! it posts a window of receives, sends (injects when the size allows) a window of
//! messages and reads the window's completions; nothing is shared between threads on
//! the data path but what the provider shares. The threads start together (a
//! barrier); the rate is all messages over the slowest thread's time.
//!
//! Every wait is bounded by `--timeout`. Nothing here panics on provider errors.

use std::io::Write;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ofi::abi::raw::CqMsgEntry;
use ofi::av::AvAttr;
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::ep::Endpoint;
use ofi::{Address, Caps, CqFormat, EpType, Errno, Error, GetinfoFlags, Info, OpFlags};

use super::Opts;

/// The tag of every message.
const TAG: u64 = 0x5ca1ab1e;

/// Most threads (and contexts per side).
pub const MAX_THREADS: usize = 64;

/// What one thread measured.
#[derive(Clone, Copy, Debug)]
struct ThreadResult {
    msgs: u64,
    elapsed: Duration,
}

/// The fabric address of receive context `index` of `base` (`fi_rx_addr`).
fn rx_addr(base: u64, index: usize, bits: u32) -> u64 {
    if bits == 0 {
        base
    } else {
        ((index as u64) << (64 - bits)) | base
    }
}

/// The receive-context bits `n` contexts need (at least 1).
fn bits_for(n: usize) -> u32 {
    (usize::BITS - (n.max(2) - 1).leading_zeros()).max(1)
}

fn ctx_err(what: &str, e: Error) -> Error {
    Error::new(e.code(), format!("{what}: {}", e.message()))
}

/// Run `n` threads (see the module docs) and print one line (or JSON object) per size.
///
/// # Errors
/// getinfo finding no provider with `n` contexts, any failing call, or a wait beyond
/// `opts.timeout`.
pub fn run(opts: &Opts, n: usize, out: &mut dyn Write) -> ofi::Result<()> {
    let mut hints = Info::hints();
    hints.caps = Caps::MSG | Caps::TAGGED | Caps::NAMED_RX_CTX;
    hints.ep_attr.ep_type = EpType::Rdm;
    hints.ep_attr.tx_ctx_cnt = n;
    hints.ep_attr.rx_ctx_cnt = n;
    hints.domain_attr.threading = ofi::Threading::Safe;
    hints.fabric_attr.prov_name = Some(opts.provider.clone().unwrap_or_else(|| "shm".into()));
    let infos = ofi::getinfo(
        ofi::API_VERSION,
        None,
        None,
        GetinfoFlags::empty(),
        Some(&hints),
    )
    .map_err(|e| ctx_err("fi_getinfo (scalable endpoints)", e))?;
    let info = infos
        .into_iter()
        .find(|i| i.domain_attr.max_ep_tx_ctx >= n && i.domain_attr.max_ep_rx_ctx >= n)
        .ok_or_else(|| {
            Error::new(
                Errno::ENODATA,
                format!("no provider offers scalable endpoints with {n} contexts"),
            )
        })?;
    let sizes: Vec<usize> = match &opts.sizes {
        super::Sizes::List(l) => l.clone(),
        _ => vec![64],
    };
    for size in sizes {
        let r = run_size(opts, &info, n, size)?;
        let msgs: u64 = r.iter().map(|t| t.msgs).sum();
        let slowest = r.iter().map(|t| t.elapsed).max().unwrap_or_default();
        let secs = slowest.as_secs_f64().max(1e-9);
        let rate = msgs as f64 / secs;
        let per: Vec<String> = r
            .iter()
            .map(|t| {
                format!(
                    "{:.3}",
                    t.msgs as f64 / t.elapsed.as_secs_f64().max(1e-9) / 1e6
                )
            })
            .collect();
        let line = if opts.json {
            format!(
                "{{\"threads\": {n}, \"size\": {size}, \"msgs\": {msgs}, \"secs\": {secs:.6}, \
                 \"mmsg_per_sec\": {:.3}, \"per_thread_mmsg_per_sec\": [{}]}}",
                rate / 1e6,
                per.join(", ")
            )
        } else {
            format!(
                "threads {n} size {size} msgs {msgs} time {secs:.3}s rate {:.3} Mmsg/s \
                 (per thread {})",
                rate / 1e6,
                per.join(" ")
            )
        };
        writeln!(out, "{line}").map_err(|e| Error::new(Errno::EIO, e.to_string()))?;
    }
    Ok(())
}

/// One size: open the pair, run the threads, close.
fn run_size(opts: &Opts, info: &Info, n: usize, size: usize) -> ofi::Result<Vec<ThreadResult>> {
    let mut info = info.clone();
    info.ep_attr.tx_ctx_cnt = n;
    info.ep_attr.rx_ctx_cnt = n;
    let fabric = ofi::fabric(&info).map_err(|e| ctx_err("fi_fabric", e))?;
    let domain = fabric.domain(&info).map_err(|e| ctx_err("fi_domain", e))?;
    let bits = bits_for(n);
    let av = domain
        .av_open(&AvAttr {
            rx_ctx_bits: bits as i32,
            ..AvAttr::default()
        })
        .map_err(|e| ctx_err("fi_av_open", e))?;
    let scalable_ep = |side: &str| {
        domain
            .scalable_ep(&info)
            .map_err(|e| ctx_err(&format!("fi_scalable_ep ({side})"), e))
    };
    let sender = scalable_ep("sender")?;
    let receiver = scalable_ep("receiver")?;
    for s in [&sender, &receiver] {
        s.bind_av(&av)
            .map_err(|e| ctx_err("fi_scalable_ep_bind", e))?;
    }
    let window = opts.window.min(info.rx_attr.size.max(1));
    let cq_attr = CqAttr {
        size: (2 * window).max(64),
        ..CqAttr::with_format(CqFormat::Msg)
    };
    let cq_open = || {
        domain
            .cq_open(&cq_attr)
            .map_err(|e| ctx_err("fi_cq_open", e))
    };
    let mut sides = Vec::new();
    for i in 0..n {
        let tx = sender
            .tx_context(i as i32, &info.tx_attr)
            .map_err(|e| ctx_err("fi_tx_context", e))?;
        let rx = receiver
            .rx_context(i as i32, &info.rx_attr)
            .map_err(|e| ctx_err("fi_rx_context", e))?;
        let txcq = cq_open()?;
        let rxcq = cq_open()?;
        tx.bind(&txcq, OpFlags::TRANSMIT)
            .map_err(|e| ctx_err("fi_ep_bind (tx CQ)", e))?;
        rx.bind(&rxcq, OpFlags::RECV)
            .map_err(|e| ctx_err("fi_ep_bind (rx CQ)", e))?;
        tx.enable().map_err(|e| ctx_err("fi_enable (tx)", e))?;
        rx.enable().map_err(|e| ctx_err("fi_enable (rx)", e))?;
        sides.push((tx, txcq, rx, rxcq));
    }
    for s in [&sender, &receiver] {
        s.enable().map_err(|e| ctx_err("fi_enable (scalable)", e))?;
    }
    let name = receiver.getname().map_err(|e| ctx_err("fi_getname", e))?;
    let addr = Address::from_bytes(info.addr_format, &name)?;
    let base = av.insert(&[addr]).map_err(|e| ctx_err("fi_av_insert", e))?[0];
    let iters = opts.iters;
    let timeout = opts.timeout;
    let inject = size <= info.tx_attr.inject_size;
    let barrier = Arc::new(Barrier::new(n));
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = sides
            .iter()
            .enumerate()
            .map(|(i, side)| {
                let barrier = barrier.clone();
                let dest = rx_addr(base, i, bits);
                scope.spawn(move || {
                    let lane = Lane {
                        tx: &side.0,
                        txcq: &side.1,
                        rx: &side.2,
                        rxcq: &side.3,
                        dest,
                        size,
                        window,
                        inject,
                        timeout,
                    };
                    lane.run(iters, &barrier)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::new(Errno::EOTHER, "a benchmark thread panicked"))
                })
            })
            .collect::<ofi::Result<Vec<_>>>()
    })?;
    drop(sides);
    Ok(results)
}

/// One thread's transmit and receive context.
struct Lane<'a> {
    tx: &'a Endpoint,
    txcq: &'a CompletionQueue,
    rx: &'a Endpoint,
    rxcq: &'a CompletionQueue,
    dest: u64,
    size: usize,
    window: usize,
    inject: bool,
    timeout: Duration,
}

impl Lane<'_> {
    /// A warm-up round, the barrier, then `iters` messages in rounds of a window.
    fn run(&self, iters: u64, barrier: &Barrier) -> ofi::Result<ThreadResult> {
        let mut rbuf = vec![0u8; self.window * self.size.max(1)];
        let sbuf = vec![0xa5u8; self.size];
        let warm = self.round(&mut rbuf, &sbuf, self.window);
        barrier.wait();
        warm?;
        let start = Instant::now();
        let mut left = iters;
        while left > 0 {
            let k = left.min(self.window as u64) as usize;
            self.round(&mut rbuf, &sbuf, k)?;
            left -= k as u64;
        }
        Ok(ThreadResult {
            msgs: iters,
            elapsed: start.elapsed(),
        })
    }

    /// Post `k` receives, send `k` messages, read their completions.
    fn round(&self, rbuf: &mut [u8], sbuf: &[u8], k: usize) -> ofi::Result<()> {
        let slot = self.size.max(1);
        for (j, chunk) in rbuf.chunks_mut(slot).take(k).enumerate() {
            // SAFETY: `rbuf` outlives the round, which reads every receive's completion
            // before returning (or fails, and the thread's buffers outlive the
            // contexts, which are closed after the threads end).
            unsafe {
                self.rx.trecv(
                    chunk.as_mut_ptr(),
                    self.size,
                    std::ptr::null_mut(),
                    ofi::ADDR_UNSPEC,
                    TAG,
                    0,
                    j,
                )
            }
            .map_err(|e| ctx_err("fi_trecv", e))?;
        }
        let deadline = Instant::now() + self.timeout;
        let mut entries = [CqMsgEntry::default(); 64];
        let (mut sent, mut got, mut done) = (0usize, 0usize, 0usize);
        let want_tx = if self.inject { 0 } else { k };
        while sent < k || got < k || done < want_tx {
            if sent < k {
                let r = if self.inject {
                    self.tx.tinject(sbuf, self.dest, TAG)
                } else {
                    // SAFETY: `sbuf` outlives the round, which reads the send's
                    // completion before returning.
                    unsafe {
                        self.tx.tsend(
                            sbuf.as_ptr(),
                            self.size,
                            std::ptr::null_mut(),
                            self.dest,
                            TAG,
                            sent,
                        )
                    }
                };
                match r {
                    Ok(()) => {
                        sent += 1;
                        continue;
                    }
                    Err(e) if e.code() == Errno::EAGAIN => {}
                    Err(e) => return Err(ctx_err("fi_tsend", e)),
                }
            }
            got += read_some(self.rxcq, &mut entries, "receive")?;
            if done < want_tx {
                done += read_some(self.txcq, &mut entries, "send")?;
            }
            if Instant::now() > deadline {
                return Err(Error::new(
                    Errno::ETIMEDOUT,
                    format!(
                        "{sent} of {k} sent, {got} received, {done} send completions within {:?}",
                        self.timeout
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Read what `cq` has (none: 0).
fn read_some(cq: &CompletionQueue, buf: &mut [CqMsgEntry], what: &str) -> ofi::Result<usize> {
    match cq.read(buf) {
        Ok(n) => Ok(n),
        Err(e) if e.code() == Errno::EAGAIN => Ok(0),
        Err(e) => Err(ctx_err(&format!("fi_cq_read ({what})"), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_bits_cover_the_count() {
        assert_eq!(bits_for(1), 1);
        assert_eq!(bits_for(2), 1);
        assert_eq!(bits_for(3), 2);
        assert_eq!(bits_for(4), 2);
        assert_eq!(bits_for(5), 3);
        assert_eq!(rx_addr(7, 1, 1), (1 << 63) | 7);
    }

    /// Two threads on shm's scalable endpoints deliver every message, injected (64 B)
    /// and sent with completions (8 KiB, above the inject size).
    #[test]
    fn two_threads_on_shm_deliver_every_message() {
        let opts = Opts {
            iters: 3000,
            sizes: super::super::Sizes::List(vec![64, 8192]),
            window: 16,
            ..Opts::default()
        };
        let mut out = Vec::new();
        run(&opts, 2, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with("threads 2 size 64 msgs 6000 "),
            "{text}"
        );
        assert!(
            lines[1].starts_with("threads 2 size 8192 msgs 6000 "),
            "{text}"
        );
    }
}
