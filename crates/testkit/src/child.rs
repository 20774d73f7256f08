//! Two-process tests: a test binary runs one of its own tests again as the child,
//! with an environment variable naming the child's part (its "mode"), and the two talk
//! over the child's stdin and stdout.
//!
//! The child announces what the parent needs on stdout, each line starting with
//! `CHILD ` ([`say`]; the test harness may put its own text before it on the same
//! line, so the marker is searched anywhere in the line), and reads the parent's
//! answers from stdin. The parent ([`ChildProc`]) collects the child's lines on a
//! reader thread and waits for each within a bound; a child that does not answer in
//! time, or does not exit in time, is killed (by its own handle) and reaped before the
//! test fails, so no process is left behind.
//!
//! # What may panic
//!
//! This is test support: spawning failures, a missing line within the bound, a child
//! that exits unsuccessfully, and broken pipes panic with a message saying which.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The marker that starts every line the child sends the parent.
const MARK: &str = "CHILD ";

/// The child's mode when this process is the child of a two-process test (the value of
/// `env_var`), `None` in the parent.
pub fn child_mode(env_var: &str) -> Option<String> {
    std::env::var(env_var).ok()
}

/// In the child: send `line` to the parent (printed as `CHILD <line>`, flushed).
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{MARK}{line}").expect("write to the parent");
    out.flush().expect("flush to the parent");
}

/// In the child: the next line from the parent (trimmed); empty at the end of input.
pub fn hear() -> String {
    let mut l = String::new();
    std::io::stdin()
        .read_line(&mut l)
        .expect("read from the parent");
    l.trim().to_string()
}

/// The parent's handle on a child process running one test of this binary.
#[derive(Debug)]
pub struct ChildProc {
    /// The process (to kill it on purpose, e.g. a killed-peer test).
    pub child: Child,
    lines: mpsc::Receiver<String>,
    stdin: ChildStdin,
    bound: Duration,
}

impl ChildProc {
    /// Runs test `test` of this binary again as the child, with `env_var` = `mode` and
    /// the extra environment `env`; every later wait is bounded by `bound`.
    pub fn spawn(
        env_var: &str,
        test: &str,
        mode: &str,
        env: &[(&str, &str)],
        bound: Duration,
    ) -> ChildProc {
        let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        ChildProc::spawn_with(cmd, env_var, test, mode, bound)
    }

    /// As [`ChildProc::spawn`], with `cmd` running this binary (e.g. inside another
    /// network namespace); the test's arguments and `env_var` are added here.
    pub fn spawn_with(
        mut cmd: Command,
        env_var: &str,
        test: &str,
        mode: &str,
        bound: Duration,
    ) -> ChildProc {
        let mut child = cmd
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(env_var, mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the child");
        let out = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take().expect("piped stdin");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(i) = l.find(MARK) {
                    if tx.send(l[i + MARK.len()..].to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        ChildProc {
            child,
            lines: rx,
            stdin,
            bound,
        }
    }

    /// The child's next line (without the `CHILD ` marker); `what` names it in the
    /// failure. Kills and reaps the child when none comes within the bound.
    pub fn line(&mut self, what: &str) -> String {
        match self.lines.recv_timeout(self.bound) {
            Ok(l) => l,
            Err(e) => {
                self.kill();
                panic!("child: no {what} line within {:?} ({e})", self.bound);
            }
        }
    }

    /// Sends `line` to the child's stdin.
    pub fn send_line(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write to the child");
        self.stdin.flush().expect("flush to the child");
    }

    /// Kills the child (SIGKILL) and reaps it; harmless when it has already ended.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the child to exit successfully within the bound (killed and reaped
    /// otherwise).
    pub fn finish(mut self) {
        let deadline = Instant::now() + self.bound;
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                assert!(st.success(), "child exited with {st}");
                return;
            }
            if Instant::now() > deadline {
                self.kill();
                panic!("child did not exit within {:?}", self.bound);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
