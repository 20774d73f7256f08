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
//! A child that only needs to run to its end (a test whose process-wide settings,
//! read once, must differ, or whose log the parent reads) is started with
//! [`test_command`] and waited for with [`run_to_end`], also bounded: the parent reads
//! its whole stdout and stderr afterwards.
//!
//! Bytes (an endpoint's name) travel in a line as [`hex`], read back with [`unhex`].
//!
//! # What may panic
//!
//! This is test support: spawning failures, a missing line within the bound, a child
//! that exits unsuccessfully, and broken pipes panic with a message saying which.

use std::io::{BufRead, BufReader, Read, Write};
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

/// In the child process of a two-process test (`env_var` set): runs `child_main` with
/// the child's mode and returns true; in the parent returns false. A test starts with
/// `if played_child(VAR, child_main) { return; }`, so the child plays its part in the
/// test's stead.
pub fn played_child(env_var: &str, child_main: impl FnOnce(&str)) -> bool {
    match child_mode(env_var) {
        Some(mode) => {
            child_main(&mode);
            true
        }
        None => false,
    }
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

/// `bytes` as lowercase hexadecimal, two digits a byte (to send them in a line).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of [`hex`] text `s`; `None` when `s` has an odd length or a character
/// that is not a hexadecimal digit.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The parent's handle on a child process running one test of this binary; dropping
/// it kills and reaps the child (so a failing test leaves no process behind).
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

impl Drop for ChildProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A command running test `test` of this binary again as a child process, alone and
/// with its output shown, with `env_var` set to `1` (the child's cue); add the child's
/// environment to it, then run it with [`run_to_end`].
pub fn test_command(env_var: &str, test: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(env_var, "1");
    cmd
}

/// What a child run to its end left: whether it exited successfully, and everything it
/// printed.
#[derive(Debug)]
pub struct ChildRun {
    /// The child exited with status 0.
    pub success: bool,
    /// Its whole standard output.
    pub stdout: String,
    /// Its whole standard error.
    pub stderr: String,
}

impl ChildRun {
    /// Asserts that the child exited successfully and printed `line` (anywhere in its
    /// stdout); the failure shows both outputs.
    pub fn assert_ok_printing(&self, line: &str) {
        assert!(
            self.success && self.stdout.contains(line),
            "child failed (or printed no {line:?}):\n{}\n{}",
            self.stdout,
            self.stderr
        );
    }
}

/// Runs `cmd` (see [`test_command`]) to its end and collects its output; a child still
/// running after `bound` is killed (by its own handle) and reaped, then the test fails.
pub fn run_to_end(mut cmd: Command, bound: Duration) -> ChildRun {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let out = read_all(Box::new(child.stdout.take().expect("piped stdout")));
    let err = read_all(Box::new(child.stderr.take().expect("piped stderr")));
    let deadline = Instant::now() + bound;
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "child did not exit within {bound:?}:\n{}\n{}",
                out.join().unwrap_or_default(),
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    ChildRun {
        success: status.success(),
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let b = [0u8, 1, 0xab, 0xff];
        assert_eq!(hex(&b), "0001abff");
        assert_eq!(unhex(&hex(&b)).unwrap(), b);
        assert!(unhex("abc").is_none());
        assert!(unhex("zz").is_none());
    }
}
