//! Support shared by the tools' tests: running a built tool under a time bound, and
//! checking the result table `fi_pingpong` and `fi_bw` print.
//!
//! # What may panic
//!
//! This is test support: a spawn failure, a child still running after its bound
//! (killed by its PID and reaped first), and a table of the wrong shape panic with a
//! message saying which.

#![allow(dead_code)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a finished child left: its exit status (-1 when killed by a signal), its
/// output and how long it ran.
pub struct Run {
    pub status: i32,
    pub out: String,
    pub err: String,
    pub took: Duration,
}

impl Run {
    /// Asserts that the run exited with `status` and wrote `text` somewhere on stderr.
    pub fn assert_err_has(&self, status: i32, text: &str) {
        assert_eq!(
            self.status, status,
            "stdout: {}\nstderr: {}",
            self.out, self.err
        );
        assert!(
            self.err.contains(text),
            "stderr lacks {text:?}:\n{}",
            self.err
        );
    }
}

/// Runs `c` to its end, or kills it (by PID) and reaps it after `limit`.
pub fn run_bounded(mut c: Command, limit: Duration) -> Run {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temporary directory");
    let (o, e) = (dir.path().join("out"), dir.path().join("err"));
    c.stdin(Stdio::null())
        .stdout(std::fs::File::create(&o).expect("out file"))
        .stderr(std::fs::File::create(&e).expect("err file"));
    let mut child = c.spawn().expect("spawn");
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st.code().unwrap_or(-1);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "still running after {limit:?}; stdout:\n{}\nstderr:\n{}",
                std::fs::read_to_string(&o).unwrap_or_default(),
                std::fs::read_to_string(&e).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        status,
        out: std::fs::read_to_string(&o).unwrap_or_default(),
        err: std::fs::read_to_string(&e).unwrap_or_default(),
        took: started.elapsed(),
    }
}

/// A server and its client on 127.0.0.1, each a command from `make` (the test's tool
/// and environment): the server with `server_args` and `-B <port>` in a thread, then
/// the client with `client_args` and `-P <port> 127.0.0.1`, retried while the server
/// comes up (an attempt it does not answer yet ends with status 111) for up to 30 s;
/// each run bounded by `limit`. The client's run, then the server's.
pub fn server_then_client(
    make: impl Fn() -> Command,
    server_args: &[&str],
    client_args: &[&str],
    limit: Duration,
) -> (Run, Run) {
    let port = ofi_testkit::free_tcp_port().to_string();
    let mut s = make();
    s.args(server_args).args(["-B", &port]);
    let server = std::thread::spawn(move || run_bounded(s, limit));
    let deadline = Instant::now() + Duration::from_secs(30);
    let client = loop {
        let mut c = make();
        c.args(client_args).args(["-P", &port, "127.0.0.1"]);
        let r = run_bounded(c, limit);
        if r.status != 111 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (client, server.join().expect("server thread"))
}

/// Splits a result table, checking the header and each row's shape: one row per entry
/// of `sizes`, every message acknowledged (or, when `lossy`, acknowledged or counted
/// lost), a time and numeric rates; returns the rows' fields.
pub fn table(out: &str, sizes: &[&str], lossy: bool) -> Vec<Vec<String>> {
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec"),
        "{out}"
    );
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    assert_eq!(rows.len(), sizes.len(), "{out}");
    for (row, size) in rows.iter().zip(sizes) {
        assert_eq!(row.len(), 8, "{out}");
        assert_eq!(row[0], *size, "{out}");
        let sent = &row[1];
        if lossy {
            assert!(row[2].starts_with('=') || row[2].starts_with('-'), "{out}");
        } else {
            assert_eq!(row[2], format!("={sent}"), "{out}");
        }
        assert!(row[4].ends_with('s'), "{out}");
        for f in &row[5..] {
            f.parse::<f64>().unwrap_or_else(|_| panic!("{f} in {out}"));
        }
    }
    rows
}

/// As [`table`] for a run without loss, also checking every row sent `iters` messages.
pub fn check_table(out: &str, sizes: &[&str], iters: &str) {
    let rows = table(out, sizes, false);
    assert!(rows.iter().all(|row| row[1] == iters), "{out}");
}
