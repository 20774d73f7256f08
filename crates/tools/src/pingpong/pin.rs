//! CPU pinning (`--pin`) and `--self` (server and client as two processes of this host).
//!
//! `--self`: this process binds a control socket on the loopback address, starts the
//! same executable as the client (its arguments rebuilt from the parsed options, with
//! `-P <port>`, the provider and the pinning filled in), serves it, and reaps it. The
//! child's output is the run's output (stdout and stderr are inherited); the server side
//! prints nothing. The child is waited for with a bound; if it outlives it, it is killed by
//! its PID and reaped, so nothing is left running. Nothing here panics.

use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use ofi::{EpType, Errno, Error};

use super::{bench, ctrl, Opts, Sizes, Tool};

/// The CPUs this process may run on (`sched_getaffinity`), ascending.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size given; pid 0 is this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `i` is below CPU_SETSIZE and `set` is initialised.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// Pin this process (its calling thread, before any other is started) to `cpu`.
pub fn pin_to(cpu: usize) -> ofi::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(Error::new(
            Errno::EINVAL,
            format!("cannot pin to CPU {cpu}: above CPU_SETSIZE"),
        ));
    }
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size given; pid 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(Error::new(
            Errno::EINVAL,
            format!("cannot pin to CPU {cpu}: {e}"),
        ));
    }
    Ok(())
}

/// The command line of a client with these options.
pub fn client_args(tool: Tool, o: &Opts, port: u16, server: &str) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |k: &str, v: Option<String>| {
        a.push(k.to_string());
        if let Some(v) = v {
            a.push(v);
        }
    };
    push("-P", Some(port.to_string()));
    if let Some(v) = &o.provider {
        push("-p", Some(v.clone()));
    }
    if let Some(v) = &o.domain {
        push("-d", Some(v.clone()));
    }
    if let Some(v) = &o.fabric {
        push("-f", Some(v.clone()));
    }
    if let Some(v) = &o.src_addr {
        push("-s", Some(v.clone()));
    }
    let ep = match o.ep_type {
        EpType::Msg => "msg",
        EpType::Rdm => "rdm",
        _ => "dgram",
    };
    push("-e", Some(ep.to_string()));
    push("-I", Some(o.iters.to_string()));
    match &o.sizes {
        Sizes::Default => {}
        Sizes::All => push("-S", Some("all".into())),
        Sizes::List(l) => push(
            "-S",
            Some(l.iter().map(usize::to_string).collect::<Vec<_>>().join(",")),
        ),
    }
    if o.integrity {
        push("-c", None);
    }
    push("-m", Some(if o.tagged { "tagged" } else { "msg" }.into()));
    if o.verbose {
        push("-v", None);
    }
    if o.ipv6 {
        push("-6", None);
    }
    if o.json {
        push("--json", None);
    }
    if let Some((x, y)) = o.pin {
        push("--pin", Some(format!("{x},{y}")));
    }
    push("--timeout", Some(o.timeout.as_secs_f64().to_string()));
    if tool == Tool::Bw {
        push("-W", Some(o.window.to_string()));
    }
    a.push(server.to_string());
    a
}

/// `--self`: serve a client started from this executable.
pub fn run_self(tool: Tool, opts: &Opts, err: &mut dyn Write) -> ofi::Result<()> {
    let mut o = opts.clone();
    // Fail here, once, when nothing matches; else fix the provider for both sides.
    let info = bench::pick_info(&o)?;
    if o.provider.is_none() {
        o.provider = Some(info.prov_name().to_string());
    }
    if o.pin.is_none() {
        let cpus = allowed_cpus();
        if cpus.len() >= 2 {
            o.pin = Some((cpus[0], cpus[1]));
        }
    }
    let (bind, host): (SocketAddr, &str) = if o.ipv6 {
        ((Ipv6Addr::LOCALHOST, o.src_port.unwrap_or(0)).into(), "::1")
    } else {
        (
            (Ipv4Addr::LOCALHOST, o.src_port.unwrap_or(0)).into(),
            "127.0.0.1",
        )
    };
    let listener = TcpListener::bind(bind).map_err(|e| {
        Error::new(
            Errno::EADDRINUSE,
            format!("control socket: bind {bind}: {e}"),
        )
    })?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::new(Errno::EIO, format!("control socket: {e}")))?
        .port();
    let exe = std::env::current_exe()
        .map_err(|e| Error::new(Errno::ENOENT, format!("cannot find this executable: {e}")))?;
    let args = client_args(tool, &o, port, host);
    if o.verbose {
        let _ = writeln!(
            err,
            "[debug] --self: starting {} {}",
            exe.display(),
            args.join(" ")
        );
    }
    let mut child = Command::new(&exe)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::new(Errno::EIO, format!("cannot start {}: {e}", exe.display())))?;
    let pid = child.id();
    // The reaper: waits for the child, reports its status, and flags its exit.
    let exited = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let flag = Arc::clone(&exited);
    let reaper = std::thread::spawn(move || {
        let st = child.wait();
        flag.store(true, Ordering::SeqCst);
        let _ = tx.send(st);
    });

    let mut server = o.clone();
    server.server = None;
    let served = ctrl::accept(&listener, Some(Duration::from_secs(30)), &|| {
        exited.load(Ordering::SeqCst)
    })
    .and_then(|c| {
        drop(listener);
        bench::run(tool, &server, &mut std::io::sink(), err, Some(c))
    });

    // Reap the child: it ends on its own after a run (or an error); bound the wait.
    let bound = if served.is_ok() {
        o.timeout + Duration::from_secs(30)
    } else {
        Duration::from_secs(2)
    };
    let status = match rx.recv_timeout(bound) {
        Ok(st) => st.ok(),
        Err(_) => {
            // SAFETY: plain kill(2) of our own child, which has not been reaped yet (the
            // reaper has not returned), so the PID cannot have been reused.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            rx.recv_timeout(Duration::from_secs(10))
                .ok()
                .and_then(Result::ok)
        }
    };
    let _ = reaper.join();
    match (served, status) {
        (Ok(()), Some(st)) if st.success() => Ok(()),
        (Ok(()), Some(st)) => Err(Error::new(
            Errno(st.code().filter(|&c| c > 0).unwrap_or(1)),
            format!("the client process failed ({st})"),
        )),
        (Ok(()), None) => Err(Error::new(
            Errno::ETIMEDOUT,
            "the client process did not end; it was killed",
        )),
        // The accept gave up because the client had already failed: report that.
        (Err(e), Some(st)) if e.code() == Errno::ECANCELED && !st.success() => Err(Error::new(
            Errno(st.code().filter(|&c| c > 0).unwrap_or(1)),
            format!("the client process failed ({st}) before it connected"),
        )),
        (Err(e), _) => Err(e),
    }
}
