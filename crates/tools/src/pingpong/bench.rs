//! One side of a benchmark run: getinfo, the control connection, the per-size protocol
//! (see [`super::ctrl`]) and the measured loops.
//!
//! Ping-pong: the client sends one message and waits for the server's reply of the same
//! size, `iterations` times; the time covers all of them. Throughput: the client sends a
//! window of messages, then waits for a 4-byte acknowledgement, until `iterations`
//! messages are sent; the server acknowledges each window once it has received it.
//! Datagram waits end after the loss time-out and count the message lost; the two sides
//! then exchange their counts over the control connection.

use std::io::Write;
use std::time::{Duration, Instant};

use ofi::{Caps, EpType, Errno, Error, GetinfoFlags, Info, Mode, MrMode};

use super::ctrl::{self, Ctrl};
use super::format::{Row, HEADER};
use super::session::{Config, Depth, Session, ACK_LEN};
use super::{pin, Opts, Sizes, Tool};

/// Datagram loss time-out for one message or acknowledgement.
const DGRAM_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a datagram server waits for traffic before it checks the control connection.
const SERVER_POLL: Duration = Duration::from_millis(20);
/// Largest size of `-S all`.
const ALL_MAX: usize = (4 << 20) + (2 << 20);

/// The hints both sides ask getinfo with.
pub fn hints(o: &Opts) -> Info {
    let mut h = Info::hints()
        .with_ep_type(o.ep_type)
        .with_caps(if o.tagged { Caps::TAGGED } else { Caps::MSG });
    h.mode = Mode::CONTEXT | Mode::CONTEXT2;
    h.domain_attr.mr_mode =
        MrMode::LOCAL | MrMode::ALLOCATED | MrMode::PROV_KEY | MrMode::VIRT_ADDR;
    if let Some(p) = &o.provider {
        h.fabric_attr.prov_name = Some(p.clone());
    }
    if let Some(f) = &o.fabric {
        h.fabric_attr.name = Some(f.clone());
    }
    if let Some(d) = &o.domain {
        h.domain_attr.name = Some(d.clone());
    }
    if o.ipv6 {
        h.addr_format = ofi::AddrFormat::SOCKADDR_IN6;
    }
    h
}

/// The first getinfo result for the options.
pub fn pick_info(o: &Opts) -> ofi::Result<Info> {
    let h = hints(o);
    let (node, flags) = match &o.src_addr {
        Some(s) => (Some(s.as_str()), GetinfoFlags::SOURCE),
        None => (None, GetinfoFlags::empty()),
    };
    let infos = ofi::getinfo(ofi::API_VERSION, node, None, flags, Some(&h)).map_err(|e| {
        Error::new(
            e.code(),
            format!(
                "fi_getinfo ({} endpoint{}): {}",
                o.ep_type,
                o.provider
                    .as_deref()
                    .map(|p| format!(", provider {p}"))
                    .unwrap_or_default(),
                e.message()
            ),
        )
    })?;
    infos
        .into_iter()
        .next()
        .ok_or_else(|| Error::new(Errno::ENODATA, "fi_getinfo returned no result"))
}

/// The sizes a client runs, given the endpoint's `max_msg_size`.
pub fn sizes_for(s: &Sizes, max: usize) -> ofi::Result<Vec<usize>> {
    Ok(match s {
        Sizes::Default => [64usize, 256, 1 << 10, 4 << 10, 64 << 10, 1 << 20]
            .into_iter()
            .filter(|&n| n <= max)
            .collect(),
        Sizes::All => {
            let mut v = vec![0usize];
            let mut p = 1usize;
            while p <= ALL_MAX {
                v.push(p);
                if p >= 2 {
                    v.push(p + p / 2);
                }
                p *= 2;
            }
            v.retain(|&n| n <= max && n <= ALL_MAX);
            v
        }
        Sizes::List(l) => {
            if let Some(&big) = l.iter().find(|&&n| n > max) {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("size {big} is above the endpoint's max_msg_size {max}"),
                ));
            }
            l.clone()
        }
    })
}

fn debug(o: &Opts, msg: impl AsRef<str>) {
    if o.verbose {
        let role = if o.server.is_none() {
            "server"
        } else {
            "client"
        };
        eprintln!("[debug] {role}: {}", msg.as_ref());
    }
}

/// Run one side. `pre` is the server's control connection when the caller already
/// accepted it (`--self`).
pub fn run(
    tool: Tool,
    o: &Opts,
    out: &mut dyn Write,
    _err: &mut dyn Write,
    pre: Option<Ctrl>,
) -> ofi::Result<()> {
    let server = o.server.is_none();
    if let Some((a, b)) = o.pin {
        let cpu = if server { a } else { b };
        pin::pin_to(cpu)?;
        debug(o, format!("pinned to CPU {cpu}"));
    }
    let info = pick_info(o)?;
    debug(
        o,
        format!(
            "provider {} fabric {} domain {} ep_type {} max_msg_size {} inject_size {}",
            info.prov_name(),
            info.fabric_attr.name.as_deref().unwrap_or(""),
            info.domain_attr.name.as_deref().unwrap_or(""),
            info.ep_type(),
            info.ep_attr.max_msg_size,
            info.tx_attr.inject_size
        ),
    );
    let cfg = Config {
        tagged: o.tagged,
        integrity: o.integrity,
        timeout: o.timeout,
        dgram_timeout: DGRAM_TIMEOUT,
        verbose: o.verbose,
    };
    let mut row_out = RowOut {
        out,
        json: o.json,
        header_done: false,
        extra: vec![
            ("tool", tool.name().to_string()),
            ("role", if server { "server" } else { "client" }.to_string()),
            ("provider", info.prov_name().to_string()),
            ("ep_type", info.ep_type().to_string()),
            ("mode", if o.tagged { "tagged" } else { "msg" }.to_string()),
        ],
    };
    if server {
        let mut c = match pre {
            Some(c) => c,
            None => {
                let l = ctrl::listen(o.src_port.unwrap_or(super::DEFAULT_PORT), o.ipv6)?;
                debug(o, "waiting for the client on the control socket");
                ctrl::accept(&l, None, &|| false)?
            }
        };
        debug(o, "client connected");
        let w = c.recv_words("cfg")?;
        let v = ctrl::numbers(&w, 2)?;
        let (max_size, window) = (v[0] as usize, (v[1] as usize).max(1));
        // The window cannot exceed the receives this side can keep posted.
        let window = window.min(info.rx_attr.size.max(1));
        c.send_str(&format!("win {window}"))?;
        if max_size > info.ep_attr.max_msg_size {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!(
                    "the client asks for {max_size}-byte messages; this endpoint's max_msg_size is {}",
                    info.ep_attr.max_msg_size
                ),
            ));
        }
        let depth = queue_depth(tool, true, max_size, window);
        let mut s = Session::open(&info, true, &mut c, depth, cfg)?;
        debug(o, format!("endpoint ready: {s:?}"));
        serve(tool, &mut s, &mut c, &mut row_out)?;
        s.shutdown();
    } else {
        let host = o.server.as_deref().unwrap_or("");
        let sizes = sizes_for(&o.sizes, info.ep_attr.max_msg_size)?;
        let max_size = sizes.iter().copied().max().unwrap_or(0);
        let mut c = ctrl::connect(host, o.dst_port, o.src_port.unwrap_or(0), o.ipv6)?;
        debug(o, "connected to the server's control socket");
        let window = match tool {
            Tool::PingPong => 1,
            Tool::Bw => o.window.min(info.rx_attr.size.max(1)),
        };
        c.send_str(&format!("cfg {max_size} {window}"))?;
        let w = c.recv_words("win")?;
        let window = (ctrl::numbers(&w, 1)?[0] as usize).clamp(1, window);
        let depth = queue_depth(tool, false, max_size, window);
        let mut s = Session::open(&info, false, &mut c, depth, cfg)?;
        debug(o, format!("endpoint ready: {s:?}"));
        for &size in &sizes {
            let one = OneSize {
                size,
                iters: o.iters,
                window,
            };
            let row = client_size(tool, &mut s, &mut c, one)?;
            row_out.put(&row)?;
        }
        c.send_str("fin")?;
        c.recv_words("fin")?;
        s.shutdown();
    }
    row_out
        .out
        .flush()
        .map_err(|e| Error::new(Errno::EIO, format!("write: {e}")))?;
    Ok(())
}

struct RowOut<'a> {
    out: &'a mut dyn Write,
    json: bool,
    header_done: bool,
    extra: Vec<(&'static str, String)>,
}

impl RowOut<'_> {
    fn put(&mut self, r: &Row) -> ofi::Result<()> {
        let w = |e: std::io::Error| Error::new(Errno::EIO, format!("write: {e}"));
        if self.json {
            let extra: Vec<(&str, &str)> =
                self.extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
            writeln!(self.out, "{}", r.json(&extra)).map_err(w)?;
        } else {
            if !self.header_done {
                writeln!(self.out, "{HEADER}").map_err(w)?;
                self.header_done = true;
            }
            writeln!(self.out, "{}", r.line()).map_err(w)?;
        }
        self.out.flush().map_err(w)
    }
}

/// One size of a run, as the client announces it to the server (`go SIZE ITERS WINDOW`).
#[derive(Clone, Copy, Debug)]
struct OneSize {
    /// Message size in bytes.
    size: usize,
    /// Messages to send.
    iters: u64,
    /// Messages in flight (`fi_bw`; 1 for ping-pong).
    window: usize,
}

/// The client's part of one size.
fn client_size(tool: Tool, s: &mut Session, c: &mut Ctrl, one: OneSize) -> ofi::Result<Row> {
    let (size, iters, window) = (one.size, one.iters, one.window);
    s.fill(size.max(ACK_LEN));
    c.send_str(&format!("go {size} {iters} {window}"))?;
    c.recv_words("ok")?;
    let limit = s.msg_timeout();
    let mut sent = 0u64;
    let mut got = 0u64;
    let start = Instant::now();
    match tool {
        Tool::PingPong => (sent, got) = ping_pong(s, size, iters, limit)?,
        Tool::Bw => {
            while sent < iters {
                let n = (iters - sent).min(window as u64);
                for _ in 0..n {
                    s.send(size)?;
                }
                sent += n;
                if s.recv(ACK_LEN, limit)? {
                    got += 1;
                }
            }
        }
    }
    s.flush()?;
    let secs = start.elapsed().as_secs_f64();
    c.send_str(&format!("cnt {sent} {got}"))?;
    let w = c.recv_words("cnt")?;
    let v = ctrl::numbers(&w, 2)?;
    let peer = (v[0], v[1]);
    Ok(result_row(tool, false, size, secs, (sent, got), peer))
}

/// The client's timed ping-pong loop: `iters` times, send `size` bytes and wait for the
/// reply. Returns (sent, received): every send is counted, as the loop ends early only
/// with an error. A function of its own, so the per-message path (`send` and `recv`
/// are inlined here) has the registers to itself.
#[inline(never)]
fn ping_pong(s: &mut Session, size: usize, iters: u64, limit: Duration) -> ofi::Result<(u64, u64)> {
    let mut got = 0u64;
    for _ in 0..iters {
        s.send(size)?;
        if s.recv(size, limit)? {
            got += 1;
        }
    }
    Ok((iters, got))
}

/// The server: follow the client's sizes until `fin`.
fn serve(tool: Tool, s: &mut Session, c: &mut Ctrl, rows: &mut RowOut<'_>) -> ofi::Result<()> {
    loop {
        let f = c.recv()?;
        let text = String::from_utf8_lossy(&f).into_owned();
        let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
        match words.first().map(String::as_str) {
            Some("fin") => {
                c.send_str("fin")?;
                return Ok(());
            }
            Some("go") => {
                let v = ctrl::numbers(&words, 3)?;
                let (size, iters, window) = (v[0] as usize, v[1], (v[2] as usize).max(1));
                if size > s.max_msg_size() || size > s.slot() {
                    return Err(Error::new(
                        Errno::EMSGSIZE,
                        format!("the client asks for {size}-byte messages, above max_msg_size"),
                    ));
                }
                // The pattern is by position: this also fills a throughput ack.
                s.fill(size.max(ACK_LEN));
                c.send_str("ok")?;
                let one = OneSize {
                    size,
                    iters,
                    window,
                };
                let row = server_size(tool, s, c, one)?;
                rows.put(&row)?;
            }
            _ => {
                return Err(Error::new(
                    Errno::EPROTO,
                    format!("control socket: unexpected message '{text}'"),
                ))
            }
        }
    }
}

/// The server's part of one size; ends with the count exchange.
fn server_size(tool: Tool, s: &mut Session, c: &mut Ctrl, one: OneSize) -> ofi::Result<Row> {
    let (size, iters, window) = (one.size, one.iters, one.window);
    let dgram = s.info.ep_type() == EpType::Dgram;
    let limit = if dgram { SERVER_POLL } else { s.msg_timeout() };
    // A datagram server gives up when the client has reported its counts, or after this
    // long without traffic.
    let idle_limit = s.msg_timeout().max(DGRAM_TIMEOUT) * 4 + Duration::from_secs(5);
    let mut got = 0u64;
    let mut sent = 0u64;
    let mut start: Option<Instant> = None;
    let mut last = Instant::now();
    let mut end = Instant::now();
    // Waits for one message; Ok(None) when the client is done (datagrams).
    let mut wait = |s: &mut Session, want: usize, c: &Ctrl| -> ofi::Result<Option<()>> {
        loop {
            if s.recv(want, limit)? {
                // Only a datagram server needs the time of its last message (its idle
                // limit); a reliable one would read the clock between each receive and
                // its reply for nothing.
                if dgram {
                    last = Instant::now();
                }
                return Ok(Some(()));
            }
            if c.readable() {
                return Ok(None);
            }
            if last.elapsed() > idle_limit {
                return Err(Error::new(
                    Errno::ETIMEDOUT,
                    format!("no datagram and no word from the client for {idle_limit:?}"),
                ));
            }
        }
    };
    match tool {
        Tool::PingPong => {
            while got < iters {
                if wait(s, size, c)?.is_none() {
                    break;
                }
                start.get_or_insert_with(Instant::now);
                got += 1;
                s.send(size)?;
                sent += 1;
                if dgram {
                    // The loop may end on the client's word, long after this send.
                    end = Instant::now();
                }
            }
            if !dgram {
                end = Instant::now();
            }
        }
        Tool::Bw if dgram => {
            // Acknowledge each window, or what came of it once the flow pauses; stop
            // only when the client reports its counts (acks may be lost too).
            loop {
                let n = iters.saturating_sub(got).clamp(1, window as u64);
                let mut in_window = 0;
                while in_window < n && s.recv(size, DGRAM_TIMEOUT / 5)? {
                    start.get_or_insert_with(Instant::now);
                    in_window += 1;
                    got += 1;
                }
                if in_window > 0 {
                    s.send(ACK_LEN)?;
                    sent += 1;
                    end = Instant::now();
                    last = Instant::now();
                } else if c.readable() {
                    break;
                } else if last.elapsed() > idle_limit {
                    return Err(Error::new(
                        Errno::ETIMEDOUT,
                        format!("no datagram and no word from the client for {idle_limit:?}"),
                    ));
                }
            }
        }
        Tool::Bw => {
            while got < iters {
                let n = (iters - got).min(window as u64);
                for _ in 0..n {
                    s.recv(size, limit)?;
                    start.get_or_insert_with(Instant::now);
                    got += 1;
                }
                s.send(ACK_LEN)?;
                sent += 1;
                end = Instant::now();
            }
        }
    }
    s.flush()?;
    let w = c.recv_words("cnt")?;
    let v = ctrl::numbers(&w, 2)?;
    let peer = (v[0], v[1]);
    c.send_str(&format!("cnt {sent} {got}"))?;
    let secs = start.map_or(0.0, |t| end.duration_since(t).as_secs_f64());
    Ok(result_row(tool, true, size, secs, (sent, got), peer))
}

/// The row of one size from one side's counts `(sent, received)` and the peer's:
/// ping-pong counts both directions; a bandwidth run counts what the client sent and
/// the server received (`server`: this side is the server).
fn result_row(
    tool: Tool,
    server: bool,
    size: usize,
    secs: f64,
    (sent, got): (u64, u64),
    (peer_sent, peer_got): (u64, u64),
) -> Row {
    match tool {
        Tool::PingPong => Row {
            size,
            sent,
            ack: peer_got,
            total: size as u64 * (sent + got),
            secs,
            xfers: sent + got,
        },
        Tool::Bw => {
            let (sent, delivered) = if server {
                (peer_sent, got)
            } else {
                (sent, peer_got)
            };
            Row {
                size,
                sent,
                ack: delivered,
                total: size as u64 * delivered,
                secs,
                xfers: delivered,
            }
        }
    }
}

/// The queue sizes of one side of `tool`: ping-pong keeps two of each; in a bandwidth
/// run the server (the receiver) keeps `window` receives posted and the client
/// `window` sends outstanding.
fn queue_depth(tool: Tool, server: bool, max_size: usize, window: usize) -> Depth {
    match (tool, server) {
        (Tool::PingPong, _) => Depth {
            max_size,
            nrx: 2,
            ntx: 2,
        },
        (Tool::Bw, true) => Depth {
            max_size,
            nrx: window,
            ntx: 4,
        },
        (Tool::Bw, false) => Depth {
            max_size,
            nrx: 2,
            ntx: window,
        },
    }
}
