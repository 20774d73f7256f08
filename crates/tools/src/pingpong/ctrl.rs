//! The out-of-band control connection (TCP) between the two sides.
//!
//! Every message is a frame: a 32-bit big-endian length, then that many bytes. The
//! exchange (ours; it does not interoperate with the C tool):
//! 0. the client sends `cfg <largest size> <window>`, the server answers `win <window>`
//!    (the window it can keep receives posted for);
//! 1. the server sends its endpoint name (or passive endpoint name for `msg`) as a
//!    frame `u32 BE addr_format` + raw name, the client answers with its own (connectionless
//!    types) or an empty frame (`msg`);
//! 2. per size, the client sends `go <size> <iterations> <window>`; the server answers
//!    `ok` once its receives are posted;
//! 3. after the size, the client sends `cnt <sent> <received>`; the server answers
//!    `cnt <sent> <received>` (the datagram loss accounting);
//! 4. the client sends `fin`, the server answers `fin`.
//!
//! Every read is bounded by the socket's read timeout. Malformed frames are errors
//! (`FI_EPROTO`), never panics.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

use ofi::{Errno, Error, Result};

/// Largest frame accepted.
const MAX_FRAME: usize = 64 * 1024;

/// One control connection.
#[derive(Debug)]
pub struct Ctrl {
    sock: TcpStream,
}

fn io_err(what: &str, e: io::Error) -> Error {
    let code = match e.kind() {
        io::ErrorKind::ConnectionRefused => Errno::ECONNREFUSED,
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Errno::ETIMEDOUT,
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => Errno::ECONNRESET,
        io::ErrorKind::AddrInUse => Errno::EADDRINUSE,
        _ => e.raw_os_error().map_or(Errno::EIO, Errno),
    };
    Error::new(code, format!("{what}: {e}"))
}

/// Listen for the client on `port` (any address of the family).
pub fn listen(port: u16, ipv6: bool) -> Result<TcpListener> {
    let addr: SocketAddr = if ipv6 {
        (std::net::Ipv6Addr::UNSPECIFIED, port).into()
    } else {
        (std::net::Ipv4Addr::UNSPECIFIED, port).into()
    };
    TcpListener::bind(addr).map_err(|e| io_err(&format!("control socket: bind {addr}"), e))
}

/// Accept one client; `limit` bounds the wait (None: wait as long as it takes), and the
/// wait also ends, with `FI_ECANCELED`, as soon as `give_up()` says so.
pub fn accept(
    l: &TcpListener,
    limit: Option<Duration>,
    give_up: &dyn Fn() -> bool,
) -> Result<Ctrl> {
    let sock = match limit {
        None => {
            l.accept()
                .map_err(|e| io_err("control socket: accept", e))?
                .0
        }
        Some(limit) => {
            l.set_nonblocking(true)
                .map_err(|e| io_err("control socket", e))?;
            let deadline = std::time::Instant::now() + limit;
            loop {
                match l.accept() {
                    Ok((s, _)) => break s,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if give_up() {
                            return Err(Error::new(
                                Errno::ECANCELED,
                                "control socket: gave up waiting for the client",
                            ));
                        }
                        if std::time::Instant::now() >= deadline {
                            return Err(Error::new(
                                Errno::ETIMEDOUT,
                                format!("control socket: no client within {limit:?}"),
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => return Err(io_err("control socket: accept", e)),
                }
            }
        }
    };
    Ctrl::new(sock)
}

/// Connect to the server at `host`:`port`, from local port `src_port` if non-zero.
pub fn connect(host: &str, port: u16, src_port: u16, ipv6: bool) -> Result<Ctrl> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| {
            Error::new(
                Errno::EADDRNOTAVAIL,
                format!("cannot resolve the server address {host}: {e}"),
            )
        })?
        .filter(|a| a.is_ipv6() == ipv6)
        .collect();
    let Some(addr) = addrs.first().copied() else {
        return Err(Error::new(
            Errno::EADDRNOTAVAIL,
            format!(
                "the server address {host} has no {} address",
                if ipv6 { "IPv6" } else { "IPv4" }
            ),
        ));
    };
    let what = format!("control socket: connect to {addr}");
    let sock = if src_port != 0 {
        // std cannot bind a TcpStream before connecting: do it through socket2.
        bound_connect(addr, src_port).map_err(|e| io_err(&what, e))?
    } else {
        TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| io_err(&what, e))?
    };
    Ctrl::new(sock)
}

/// Connect from a fixed local port (`-B` on the client).
fn bound_connect(addr: SocketAddr, src_port: u16) -> io::Result<TcpStream> {
    let local: SocketAddr = if addr.is_ipv6() {
        (std::net::Ipv6Addr::UNSPECIFIED, src_port).into()
    } else {
        (std::net::Ipv4Addr::UNSPECIFIED, src_port).into()
    };
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    sock.bind(&local.into())?;
    sock.connect(&addr.into())?;
    Ok(sock.into())
}

impl Ctrl {
    fn new(sock: TcpStream) -> Result<Ctrl> {
        sock.set_nonblocking(false)
            .and_then(|_| sock.set_nodelay(true))
            .and_then(|_| sock.set_read_timeout(Some(Duration::from_secs(30))))
            .map_err(|e| io_err("control socket", e))?;
        Ok(Ctrl { sock })
    }

    /// The peer's IP address.
    pub fn peer_ip(&self) -> Option<std::net::IpAddr> {
        self.sock.peer_addr().ok().map(|a| a.ip())
    }

    /// Send one frame.
    pub fn send(&mut self, data: &[u8]) -> Result<()> {
        let len = u32::try_from(data.len())
            .map_err(|_| Error::new(Errno::EINVAL, "control frame too long"))?;
        let mut v = Vec::with_capacity(4 + data.len());
        v.extend_from_slice(&len.to_be_bytes());
        v.extend_from_slice(data);
        self.sock
            .write_all(&v)
            .map_err(|e| io_err("control socket: send", e))
    }

    /// Send a text frame.
    pub fn send_str(&mut self, s: &str) -> Result<()> {
        self.send(s.as_bytes())
    }

    /// Receive one frame (bounded by the read timeout).
    pub fn recv(&mut self) -> Result<Vec<u8>> {
        let mut len = [0u8; 4];
        self.sock
            .read_exact(&mut len)
            .map_err(|e| io_err("control socket: receive", e))?;
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_FRAME {
            return Err(Error::new(
                Errno::EPROTO,
                format!("control socket: frame of {len} bytes (at most {MAX_FRAME})"),
            ));
        }
        let mut v = vec![0u8; len];
        self.sock
            .read_exact(&mut v)
            .map_err(|e| io_err("control socket: receive", e))?;
        Ok(v)
    }

    /// Receive a text frame split into words; the first must be `verb`.
    pub fn recv_words(&mut self, verb: &str) -> Result<Vec<String>> {
        let f = self.recv()?;
        let s = String::from_utf8_lossy(&f);
        let words: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        if words.first().map(String::as_str) != Some(verb) {
            return Err(Error::new(
                Errno::EPROTO,
                format!("control socket: expected '{verb}', got '{s}'"),
            ));
        }
        Ok(words)
    }

    /// Whether a frame is waiting to be read (never blocks).
    pub fn readable(&self) -> bool {
        let mut b = [0u8; 1];
        if self.sock.set_nonblocking(true).is_err() {
            return false;
        }
        let r = self.sock.peek(&mut b);
        let _ = self.sock.set_nonblocking(false);
        // A closed connection also counts: the next read reports it.
        r.is_ok()
    }
}

/// Parse the numeric words of a control message (`words[1..]`).
pub fn numbers(words: &[String], want: usize) -> Result<Vec<u64>> {
    let v: Option<Vec<u64>> = words.iter().skip(1).map(|w| w.parse().ok()).collect();
    match v {
        Some(v) if v.len() == want => Ok(v),
        _ => Err(Error::new(
            Errno::EPROTO,
            format!("control socket: malformed message '{}'", words.join(" ")),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Ctrl, Ctrl) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let c = connect("127.0.0.1", port, 0, false).unwrap();
        let s = accept(&l, Some(Duration::from_secs(5)), &|| false).unwrap();
        (s, c)
    }

    #[test]
    fn frames_and_words_cross() {
        let (mut s, mut c) = pair();
        assert!(!s.readable());
        c.send_str("go 64 10 1").unwrap();
        c.send(&[]).unwrap();
        let w = s.recv_words("go").unwrap();
        assert_eq!(numbers(&w, 3).unwrap(), vec![64, 10, 1]);
        assert_eq!(s.recv().unwrap(), Vec::<u8>::new());
        s.send_str("ok").unwrap();
        let e = c.recv_words("cnt").unwrap_err();
        assert_eq!(e.code(), Errno::EPROTO);
        assert_eq!(
            numbers(&["cnt".into(), "x".into()], 1).unwrap_err().code(),
            Errno::EPROTO
        );
        assert_eq!(
            numbers(&["cnt".into(), "1".into()], 2).unwrap_err().code(),
            Errno::EPROTO
        );
    }

    #[test]
    fn oversized_frame_and_closed_peer_are_errors() {
        let (mut s, c) = pair();
        let mut raw = c.sock.try_clone().unwrap();
        raw.write_all(&(MAX_FRAME as u32 + 1).to_be_bytes())
            .unwrap();
        assert_eq!(s.recv().unwrap_err().code(), Errno::EPROTO);
        drop(raw);
        drop(c);
        assert!(s.readable(), "a closed connection reads as ready");
        assert_eq!(s.recv().unwrap_err().code(), Errno::ECONNRESET);
    }

    #[test]
    fn accept_gives_up_when_told_or_after_its_limit() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let e = accept(&l, Some(Duration::from_secs(5)), &|| true).unwrap_err();
        assert_eq!(e.code(), Errno::ECANCELED);
        let e = accept(&l, Some(Duration::from_millis(50)), &|| false).unwrap_err();
        assert_eq!(e.code(), Errno::ETIMEDOUT);
    }
}
