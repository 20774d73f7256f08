//! Two hosts simulated on one machine for the tests — network namespaces
//! joined by a veth pair (MTU 1500, the veth default), created with `ip(8)` and
//! removed on drop.
//!
//! - [`NetPair::two_namespaces`]: both ends in namespaces of their own. Each namespace
//!   holds only `lo` and its veth end, so "the first up non-loopback interface" there
//!   is the link to the other: what a host on a cluster sees. Processes run in them
//!   with [`End::command`] (`ip netns exec`).
//! - [`NetPair::root_and_namespace`]: end `a` in the test's own (root) namespace, so
//!   objects the test process opens itself use it; end `b` in a new namespace.
//!
//! Names and addresses are unique per process and pair (the process id and a
//! counter), so tests of several binaries and threads run in parallel: namespaces
//! `ofitn-<pid>-<n>a`/`b`, interfaces `o<pid>x<n>a`/`b`, and the two addresses of a
//! /30 in 10.192.0.0/10 chosen from the same numbers (only ever 10.x, only inside the
//! pair). Leftovers of runs that died (their process is gone) are deleted first.
//!
//! Creating namespaces needs root and `ip netns`; where that fails the constructor
//! returns the reason, and the caller prints a `SKIP:` line and passes.
//!
//! Invariants: every namespace and interface made is deleted when the [`NetPair`] is
//! dropped (also while a test panics); a half-made pair is deleted before the error
//! returns. Nothing here sends a packet.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Processes a test started (in the namespaces or not): each one still running when this
/// is dropped — also while the test panics — is killed by its PID and reaped.
#[derive(Debug, Default)]
pub struct Children(pub Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// The prefix of every namespace this crate makes.
const NS_PREFIX: &str = "ofitn-";

static NEXT: AtomicU32 = AtomicU32::new(0);

/// One end of the link: where it lives, its interface and its address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct End {
    /// The namespace (`None`: the test's own).
    pub ns: Option<String>,
    /// The veth interface's name.
    pub iface: String,
    /// Its IPv4 address (prefix /30).
    pub ip: Ipv4Addr,
}

impl End {
    /// A command running `program` in this end's namespace (`ip netns exec`), or
    /// directly when the end is in the test's own namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        match &self.ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(program);
                c
            }
            None => Command::new(program),
        }
    }
}

/// Two ends of a veth pair, deleted on drop.
#[derive(Debug)]
pub struct NetPair {
    /// End `a` (10.x.y.1 of its /30).
    pub a: End,
    /// End `b` (10.x.y.2).
    pub b: End,
}

fn run(args: &[&str]) -> Result<(), String> {
    let out: Output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `ip`: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn run_in(ns: &Option<String>, args: &[&str]) -> Result<(), String> {
    match ns {
        Some(n) => {
            let mut all = vec!["netns", "exec", n.as_str(), "ip"];
            all.extend_from_slice(args);
            run(&all)
        }
        None => run(args),
    }
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The process id inside one of our names (`ofitn-<pid>-…` or `o<pid>x…`).
fn pid_in(name: &str) -> Option<u32> {
    if let Some(rest) = name.strip_prefix(NS_PREFIX) {
        return rest.split('-').next()?.parse().ok();
    }
    let rest = name.strip_prefix('o')?;
    rest.split('x').next()?.parse().ok()
}

/// Delete namespaces and interfaces of earlier runs whose process is gone.
fn sweep() {
    if let Ok(out) = Command::new("ip").args(["netns", "list"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if name.starts_with(NS_PREFIX) && pid_in(name).is_some_and(|p| !alive(p)) {
                let _ = run(&["netns", "del", name]);
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir("/sys/class/net") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let ours = name.starts_with('o')
                && (name.ends_with('a') || name.ends_with('b'))
                && name.contains('x');
            if ours && pid_in(&name).is_some_and(|p| !alive(p)) {
                let _ = run(&["link", "del", &name]);
            }
        }
    }
}

/// The two addresses of this pair's /30 (see the crate docs).
fn addresses(pid: u32, n: u32) -> (Ipv4Addr, Ipv4Addr) {
    let slot = ((pid % 16384) * 16 + n % 16) * 4;
    let base = u32::from(Ipv4Addr::new(10, 192, 0, 0)) + slot;
    (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2))
}

impl NetPair {
    /// Both ends in new namespaces of their own.
    ///
    /// # Errors
    /// Why the pair could not be made (no root, no `ip netns`, …): skip the test.
    pub fn two_namespaces() -> Result<NetPair, String> {
        NetPair::make(true)
    }

    /// End `a` in the test's own namespace, end `b` in a new one.
    ///
    /// # Errors
    /// As [`NetPair::two_namespaces`].
    pub fn root_and_namespace() -> Result<NetPair, String> {
        NetPair::make(false)
    }

    /// [`NetPair::root_and_namespace`] for the test `test`, or `None` after printing
    /// the test's [`skip`] line when the pair cannot be made.
    pub fn root_and_namespace_or_skip(test: &str) -> Option<NetPair> {
        NetPair::root_and_namespace()
            .map_err(|why| skip(test, &why))
            .ok()
    }

    fn make(both: bool) -> Result<NetPair, String> {
        sweep();
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let (ip_a, ip_b) = addresses(pid, n);
        let ns = |side: char| format!("{NS_PREFIX}{pid}-{n}{side}");
        let ifname = |side: char| format!("o{pid}x{n}{side}");
        let pair = NetPair {
            a: End {
                ns: both.then(|| ns('a')),
                iface: ifname('a'),
                ip: ip_a,
            },
            b: End {
                ns: Some(ns('b')),
                iface: ifname('b'),
                ip: ip_b,
            },
        };
        // From here the drop deletes whatever was made, also on an early return.
        let mut made = Made {
            pair: Some(pair),
            namespaces: Vec::new(),
            root_link: None,
        };
        let p = made.pair.as_ref().expect("set above");
        let (a, b) = (p.a.clone(), p.b.clone());
        for end in [&a, &b] {
            if let Some(n) = &end.ns {
                run(&["netns", "add", n])?;
                made.namespaces.push(n.clone());
            }
        }
        // Each end is made in its namespace at once (`netns` on both sides), so an
        // interface of a two-namespace pair never appears in the test's namespace.
        let mut add = vec!["link", "add", a.iface.as_str()];
        if let Some(n) = &a.ns {
            add.extend_from_slice(&["netns", n.as_str()]);
        } else {
            made.root_link = Some(a.iface.clone());
        }
        add.extend_from_slice(&["type", "veth", "peer", "name", b.iface.as_str()]);
        let b_ns = b.ns.clone().unwrap_or_default();
        add.extend_from_slice(&["netns", b_ns.as_str()]);
        run(&add)?;
        for end in [&a, &b] {
            let cidr = format!("{}/30", end.ip);
            run_in(&end.ns, &["addr", "add", &cidr, "dev", &end.iface])?;
            run_in(&end.ns, &["link", "set", &end.iface, "up"])?;
            if end.ns.is_some() {
                run_in(&end.ns, &["link", "set", "lo", "up"])?;
            }
        }
        Ok(made.finish())
    }
}

/// What has been made so far; deleted on drop unless finished.
struct Made {
    pair: Option<NetPair>,
    namespaces: Vec<String>,
    root_link: Option<String>,
}

impl Made {
    fn finish(mut self) -> NetPair {
        self.namespaces.clear();
        self.root_link = None;
        self.pair.take().expect("made once")
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        delete(self.root_link.as_deref(), &self.namespaces);
    }
}

fn delete(root_link: Option<&str>, namespaces: &[String]) {
    if let Some(l) = root_link {
        let _ = run(&["link", "del", l]);
    }
    // Deleting a namespace deletes its veth end, and with it the pair.
    for n in namespaces {
        let _ = run(&["netns", "del", n]);
    }
}

impl Drop for NetPair {
    fn drop(&mut self) {
        let root_link = self.a.ns.is_none().then_some(self.a.iface.as_str());
        let namespaces: Vec<String> = [&self.a.ns, &self.b.ns]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        delete(root_link, &namespaces);
    }
}

/// Print the `SKIP:` line of a test that cannot make its pair.
pub fn skip(test: &str, why: &str) {
    println!("SKIP {test}: cannot simulate two hosts with network namespaces ({why}; needs root and `ip netns`)");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses() {
        assert_eq!(pid_in("ofitn-1234-7a"), Some(1234));
        assert_eq!(pid_in("o1234x7b"), Some(1234));
        assert_eq!(pid_in("eth0"), None);
        let (a, b) = addresses(4_194_303, 15);
        assert_eq!(a.octets()[0], 10);
        assert!(a.octets()[1] >= 192);
        assert_eq!(u32::from(b), u32::from(a) + 1);
        assert_eq!(u32::from(a) % 4, 1, "the first host of a /30");
        assert!(format!("o{}x{}a", 4_194_303, 999).len() <= 15);
    }

    #[test]
    fn a_pair_is_made_and_deleted() {
        let pair = match NetPair::two_namespaces() {
            Ok(p) => p,
            Err(why) => return skip("a_pair_is_made_and_deleted", &why),
        };
        let ns_a = pair.a.ns.clone().unwrap();
        let ns_b = pair.b.ns.clone().unwrap();
        let ping = pair
            .a
            .command("ip")
            .args(["-o", "addr", "show", "dev", &pair.a.iface])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&ping.stdout);
        assert!(text.contains(&pair.a.ip.to_string()), "{text}");
        assert!(
            !std::path::Path::new("/sys/class/net")
                .join(&pair.a.iface)
                .exists(),
            "the end is not in the test's namespace"
        );
        drop(pair);
        let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let list = String::from_utf8_lossy(&list.stdout);
        assert!(!list.contains(&ns_a) && !list.contains(&ns_b), "{list}");
    }
}
