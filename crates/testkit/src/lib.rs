//! ofi-testkit: test support shared by the workspace's tests (a dev-dependency only).
//!
//! - [`TestRng`]: the one seeded generator tests draw randomness from;
//! - [`c_layout`]: C layout probes, Rust mirrors of C structures and constants checked
//!   against the installed headers;
//! - [`child`]: two-process tests, the test binary running one of its tests again as
//!   the child and talking to it over stdin and stdout;
//! - [`netns`]: two hosts simulated by network namespaces joined by a veth pair;
//! - [`free_tcp_port`]: a TCP port nobody listens on;
//! - [`length_prefixed`]: a fuzzer's input read as a sequence of packets;
//! - [`assert_contains_all`]: a text (a log, a program's output) has every one of
//!   several parts;
//! - [`simnet`]: a simulated network on a virtual clock for sans-IO engines (datagram
//!   or stream semantics, loss, duplication, reordering, broken links, killed nodes);
//! - [`wire`]: a parser's hostile-input cases as a table of corrupted bytes.
//!
//! [`TestRng`] is the one seeded generator tests draw randomness from, instead of each
//! file carrying its own xorshift or LCG: a run is reproducible from its seed, and a
//! generator alive when its thread panics prints that seed (and the environment
//! variable that replays it, for one made by [`TestRng::from_env`]), so a failing
//! random case can be run again.
//!
//! # Invariants
//!
//! - The stream is a pure function of the seed (splitmix64): the same seed gives the
//!   same values on every platform and run.
//! - [`TestRng::below`], [`TestRng::chance`] and [`TestRng::pick`] never panic for an
//!   empty range or slice length of 0 (`below(0)` is 0; `pick` of an empty slice does
//!   panic, as indexing would).

#![forbid(unsafe_code)]

pub mod c_layout;
pub mod child;
pub mod netns;
pub mod simnet;
pub mod wire;

/// A seeded, reproducible stream of pseudo-random numbers for tests (splitmix64).
///
/// Not for production use: it is neither cryptographic nor fast for bulk data.
#[derive(Debug, Clone)]
pub struct TestRng {
    state: u64,
    seed: u64,
    /// The environment variable the seed came from (or could come from), if any.
    var: Option<String>,
}

impl TestRng {
    /// The generator for `seed`.
    pub fn seeded(seed: u64) -> TestRng {
        TestRng {
            state: seed,
            seed,
            var: None,
        }
    }

    /// The generator for the seed in environment variable `var` (decimal, or hex with
    /// `0x`), else `default`. On a panic its message names `var`, to replay the case.
    pub fn from_env(var: &str, default: u64) -> TestRng {
        let seed = std::env::var(var)
            .ok()
            .and_then(|v| parse_seed(&v))
            .unwrap_or(default);
        TestRng {
            var: Some(var.to_string()),
            ..TestRng::seeded(seed)
        }
    }

    /// The seed this generator started from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// A value in `lo..hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo))
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of `items`, uniformly (panics if `items` is empty).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// Fill `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.fill(&mut v);
        v
    }
}

impl Drop for TestRng {
    /// A generator dropped while its thread panics (a failing test) prints its seed.
    fn drop(&mut self) {
        if std::thread::panicking() {
            match &self.var {
                Some(var) => eprintln!(
                    "TestRng: seed {:#x} (replay with {var}={:#x})",
                    self.seed, self.seed
                ),
                None => eprintln!("TestRng: seed {:#x}", self.seed),
            }
        }
    }
}

/// The number in the environment variable `var`, else `default` (how big a test's run
/// is: seeds, messages, iterations). A value that does not parse counts as unset.
pub fn env_count<T: std::str::FromStr>(var: &str, default: T) -> T {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A seed written in decimal or in hex with `0x`.
fn parse_seed(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16).ok(),
        None => text.replace('_', "").parse().ok(),
    }
}

/// A TCP port free on 127.0.0.1 now: bound, read and released (another process may
/// take it before the test uses it; tests use it to find a port nobody listens on, or
/// to start a server on one).
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

/// A UDP port on 127.0.0.1 free a moment ago (for a test binding an endpoint there).
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free UDP port on 127.0.0.1")
        .port()
}

/// Asserts that `text` (a log, a program's output) contains each of `parts`; the
/// failure names the first part missing and shows the whole text.
///
/// # Panics
///
/// When a part is missing (that is the assertion).
#[track_caller]
pub fn assert_contains_all(text: &str, parts: &[&str]) {
    if let Some(missing) = parts.iter().find(|p| !text.contains(**p)) {
        panic!("{missing:?} missing from:\n{text}");
    }
}

/// `data` (a fuzzer's input) read as packets, each a length byte `n` followed by its
/// `n` bytes; the last packet is cut short where the input ends. Never panics.
pub fn length_prefixed(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = data;
    std::iter::from_fn(move || {
        let (&n, tail) = rest.split_first()?;
        let (packet, after) = tail.split_at(usize::from(n).min(tail.len()));
        rest = after;
        Some(packet)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assert_contains_all_names_the_missing_part() {
        assert_contains_all("a log line: len=8 TRACE", &["len=8", "TRACE", ""]);
        let err = std::panic::catch_unwind(|| assert_contains_all("len=8", &["len=8", "TRACE"]))
            .expect_err("TRACE is missing");
        let msg = err.downcast_ref::<String>().expect("a formatted message");
        assert!(msg.starts_with("\"TRACE\" missing from:\nlen=8"), "{msg}");
    }

    #[test]
    fn length_prefixed_packets_end_with_the_input() {
        let data = [2, 10, 11, 0, 3, 20, 21];
        let got: Vec<&[u8]> = length_prefixed(&data).collect();
        assert_eq!(got, [&[10, 11][..], &[], &[20, 21]]);
        assert_eq!(length_prefixed(&[]).count(), 0);
    }

    #[test]
    fn the_stream_is_a_function_of_the_seed() {
        let mut a = TestRng::seeded(42);
        let mut b = TestRng::seeded(42);
        let mut c = TestRng::seeded(43);
        let from_a: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let from_b: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let from_c: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(from_a, from_b);
        assert_ne!(from_a, from_c);
        // splitmix64's published first output for seed 0.
        assert_eq!(TestRng::seeded(0).next_u64(), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn bounded_draws_stay_in_bounds() {
        let mut rng = TestRng::seeded(7);
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.range(5, 5), 5);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = rng.below(10);
            assert!(v < 10);
            seen[v as usize] = true;
            let r = rng.range(100, 110);
            assert!((100..110).contains(&r));
        }
        assert!(seen.iter().all(|s| *s), "every value of 0..10 drawn");
        assert!(!rng.chance(0));
        assert!(rng.chance(100));
        let mut buf = [0u8; 13];
        rng.fill(&mut buf);
        assert!(buf.iter().any(|b| *b != 0));
        assert_eq!(rng.pick(&[3u8]), 3);
    }

    #[test]
    fn seeds_parse_in_decimal_and_hex() {
        assert_eq!(parse_seed("12"), Some(12));
        assert_eq!(parse_seed(" 0x5eed_f00d "), Some(0x5eed_f00d));
        assert_eq!(parse_seed("zz"), None);
        let rng = TestRng::from_env("OFI_TESTKIT_SEED_THAT_IS_NEVER_SET", 9);
        assert_eq!(rng.seed(), 9);
    }
}
