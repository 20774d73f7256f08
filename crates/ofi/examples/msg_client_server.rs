//! msg_client_server: a connected (`FI_EP_MSG`) client and server with connection
//! data, using the safe layer's [`Listener`] and `EpBuilder::<Msg>::connect`.
//!
//! ```text
//! cargo run -p ofi --example msg_client_server -- [-n COUNT] [--timeout SECS]
//! FI_PROVIDER=tcp cargo run -p ofi --example msg_client_server
//! ```
//!
//! The parent is the server: it listens, and gives its address to the child (the
//! client) over the child's stdin. The client connects sending `hello from <pid>` as
//! connection data; the server prints it and accepts with `welcome <pid>` as its own;
//! the client checks it. The client then sends COUNT requests, the server answers
//! each with the request reversed, and the client checks every answer. Exit status 0
//! on success.

mod common;

use std::time::Instant;

use common::{complete_all, ctx, Opts, Peer as ChildProc};
use ofi::safe::{Domain, Ep, EpAddr, Hints, Listener, Msg, OpId, OpKind};

const USAGE: &str = "usage: msg_client_server [-n COUNT] [--timeout SECS]";

/// The size of every buffer sent or received (requests and answers are shorter).
const BUF_SIZE: usize = 512;

fn request(i: usize) -> Vec<u8> {
    format!("request {i}: {}", "abc".repeat(i % 50)).into_bytes()
}

/// Posts a receive into a fresh buffer of `domain`.
fn post_recv(ep: &mut Ep<Msg>, domain: &Domain) -> Result<OpId, String> {
    let buf = domain.alloc(BUF_SIZE).map_err(ctx("alloc"))?;
    ep.recv(buf).map_err(ctx("recv"))
}

fn server(o: &Opts) -> Result<(), String> {
    let (info, fabric, domain) = common::open_hinted(
        Hints::<Msg>::new()
            .node_service(Some("127.0.0.1"), Some("0"))
            .source(),
    )?;
    let mut listener = Listener::bind(&fabric, &info).map_err(ctx("listen"))?;
    let mut child = ChildProc::spawn(&common::child_args(o))?;
    child.send(listener.addr())?;

    let left = o.deadline.saturating_duration_since(Instant::now());
    let req = listener
        .next_request(left)
        .map_err(ctx("connection request"))?;
    let hello = String::from_utf8_lossy(&req.cm_data).into_owned();
    let welcome = format!("welcome {}", child.pid());
    let mut ep = listener
        .accept(&domain, req, welcome.as_bytes(), left)
        .map_err(ctx("accept"))?;
    let peer = ep.peer();

    let mut others = Vec::new();
    for _ in 0..o.count {
        let r = post_recv(&mut ep, &domain)?;
        let got = complete_all(&mut ep, &[r], o.deadline, &mut others)?;
        let mut buf = got
            .into_iter()
            .next()
            .and_then(|c| c.buf)
            .ok_or("receive without buffer")?;
        buf.reverse();
        let s = ep.send(buf, peer).map_err(ctx("send"))?;
        complete_all(&mut ep, &[s], o.deadline, &mut others)?;
    }
    let checked: usize = child.recv(o.deadline)?;
    child.finish(o.deadline)?;
    if !others.is_empty() {
        return Err(format!("unexpected completions: {others:?}"));
    }
    println!(
        "msg_client_server: provider {}: client said {hello:?}, server said {welcome:?}; {} requests answered, {checked} answers verified by the client",
        ep.provider(),
        o.count
    );
    Ok(())
}

fn client(o: &Opts) -> Result<(), String> {
    let server: EpAddr = common::hear()?;
    let (info, _fabric, domain) = common::open_first::<Msg>()?;
    let hello = format!("hello from {}", std::process::id());
    let left = o.deadline.saturating_duration_since(Instant::now());
    let (mut ep, welcome) = domain
        .endpoint(&info)
        .connect(&server, hello.as_bytes(), left)
        .map_err(ctx("connect"))?;
    let expect = format!("welcome {}", std::process::id());
    if welcome != expect.as_bytes() {
        return Err(format!(
            "server's connection data {:?}, expected {expect:?}",
            String::from_utf8_lossy(&welcome)
        ));
    }
    let peer = ep.peer();
    let mut others = Vec::new();
    for i in 0..o.count {
        let r = post_recv(&mut ep, &domain)?;
        let mut b = domain.alloc(BUF_SIZE).map_err(ctx("alloc"))?;
        b.fill_from(&request(i));
        let s = ep.send(b, peer).map_err(ctx("send"))?;
        let done = complete_all(&mut ep, &[r, s], o.deadline, &mut others)?;
        let mut want = request(i);
        want.reverse();
        if done[0].kind != OpKind::Recv || done[0].buf.as_deref() != Some(&want[..]) {
            return Err(format!("answer {i} is wrong: {:?}", done[0]));
        }
    }
    common::tell(&o.count)?;
    let _ = ep.shutdown();
    Ok(())
}

fn main() -> std::process::ExitCode {
    common::main("msg_client_server", USAGE, 100, client, server)
}
