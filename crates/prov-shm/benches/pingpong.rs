//! Two-process ping-pong through the public API: 64 B one-way latency (half the round
//! trip) and 1 MiB bandwidth. The binary re-executes itself as the peer; the two
//! processes are pinned to CPUs 0 and 1 with `sched_setaffinity`.
//!
//! Run: `cargo bench -p ofi-prov-shm --bench pingpong` (`FI_SHM_DISABLE_CMA=1` or
//! `FI_SHM_CMA_THRESHOLD=<bytes>` pick the large-message protocol; `PINGPONG_ONLY=small`,
//! `large` or `poll` and `PINGPONG_LARGE=<bytes>` select what runs).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use ofi::abi::raw::CqTaggedEntry;
use ofi::av::AvAttr;
use ofi::cq::CqAttr;
use ofi::getinfo::GetinfoRequest;
use ofi::{AddrFormat, Address, Caps, CqFormat, EpType, Errno, Info, OpFlags, API_VERSION};
use ofi_conformance::pair::empty_entry;

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn main() {
    let child = std::env::var("PINGPONG_CHILD").is_ok();
    let only = std::env::var("PINGPONG_ONLY").unwrap_or_default();
    pin(if child { 1 } else { 0 });
    let reg = ofi_conformance::plugin::linked_registry(&[ofi::abi::entry_for::<
        ofi_prov_shm::ShmProvider,
    >()]);
    let mut hints = Info::hints().with_ep_type(EpType::Rdm).with_caps(Caps::MSG);
    hints.fabric_attr.prov_name = Some("shm".into());
    let info = reg
        .getinfo(&GetinfoRequest {
            hints: Some(hints),
            ..GetinfoRequest::new(API_VERSION)
        })
        .expect("getinfo")[0]
        .clone();
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    let cq = domain
        .cq_open(&CqAttr::with_format(CqFormat::Tagged))
        .unwrap();
    let av = domain.av_open(&AvAttr::default()).unwrap();
    let ep = domain.endpoint(&info).unwrap();
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
    ep.enable().unwrap();
    let me = match Address::from_bytes(AddrFormat::STR, &ep.getname().unwrap()).unwrap() {
        Address::Str(s) => s,
        _ => unreachable!(),
    };
    if only == "poll" {
        // The cost of one empty fi_cq_read (which drives progress).
        let mut e = [empty_entry()];
        let n = 2_000_000;
        let t0 = Instant::now();
        for _ in 0..n {
            let _ = cq.read(&mut e);
        }
        println!(
            "empty fi_cq_read: {:.1} ns",
            t0.elapsed().as_secs_f64() / n as f64 * 1e9
        );
        return;
    }
    let (peer, mut proc_) = if child {
        println!("ADDR {me}");
        std::io::stdout().flush().unwrap();
        let mut l = String::new();
        std::io::stdin().read_line(&mut l).unwrap();
        (l.trim().to_string(), None)
    } else {
        let mut c = Command::new(std::env::current_exe().unwrap())
            .env("PINGPONG_CHILD", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(c.stdout.take().unwrap());
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        let p = l.trim().strip_prefix("ADDR ").unwrap().to_string();
        writeln!(c.stdin.as_mut().unwrap(), "{me}").unwrap();
        (p, Some(c))
    };
    let dest = av.insert(&[Address::Str(peer)]).unwrap()[0];
    let mut rbuf = vec![0u8; 16 << 20];
    let sbuf = vec![1u8; 16 << 20];
    let mut e = [empty_entry()];
    let sent_done = std::cell::Cell::new(0usize);
    let mut wait_recv = || loop {
        match cq.read(&mut e) {
            Ok(_) if e[0].op_context == 1 => return,
            Ok(_) => sent_done.set(sent_done.get() + 1),
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) if err.code() == Errno::EAVAIL => {
                let mut ee = ofi::abi::raw::CqErrEntry::default();
                let _ = cq.readerr(&mut ee, 0);
                panic!(
                    "error completion {} context {} olen {}",
                    Errno(ee.err),
                    ee.op_context,
                    ee.olen
                );
            }
            Err(err) => panic!("{err}"),
        }
    };
    let mut run = |size: usize, iters: usize, warm: usize| -> f64 {
        let mut t0 = Instant::now();
        for i in 0..iters + warm {
            if i == warm {
                t0 = Instant::now();
            }
            // The child answers each message; the parent sends first.
            // SAFETY: the buffers outlive each operation (each is waited for).
            unsafe {
                ep.recv(
                    rbuf.as_mut_ptr(),
                    size,
                    std::ptr::null_mut(),
                    ofi::ADDR_UNSPEC,
                    1,
                )
                .unwrap();
            }
            if child {
                wait_recv();
            }
            while let Err(e) =
                // SAFETY: as above.
                unsafe { ep.send(sbuf.as_ptr(), size, std::ptr::null_mut(), dest, 2) }
            {
                assert_eq!(e.code(), Errno::EAGAIN);
                // A read of zero entries drives progress without taking any.
                let _ = cq.read::<CqTaggedEntry>(&mut []);
            }
            if !child {
                wait_recv();
            }
        }
        let t = t0.elapsed().as_secs_f64() / iters as f64;
        // Every send must complete before its buffer may go (a CMA peer reads it).
        while sent_done.get() < iters + warm {
            let mut x = [empty_entry()];
            match cq.read(&mut x) {
                Ok(_) => sent_done.set(sent_done.get() + 1),
                Err(err) if err.code() == Errno::EAGAIN => {}
                Err(err) => panic!("{err}"),
            }
        }
        sent_done.set(0);
        t
    };
    // PINGPONG_ONLY=small|large runs one half (for profiling); =poll times an empty
    // fi_cq_read.
    let rt = if only != "large" {
        run(64, 200_000, 10_000)
    } else {
        0.0
    };
    // PINGPONG_LARGE=<bytes> changes the large size (at most 16 MiB).
    let large: usize = ofi_testkit::env_count("PINGPONG_LARGE", 1 << 20).min(16 << 20);
    let big = if only != "small" {
        run(large, (2_000 * (1 << 20) / large).max(20), 20)
    } else {
        f64::INFINITY
    };
    if let Some(c) = proc_.as_mut() {
        println!("64 B one-way latency: {:.3} us", rt / 2.0 * 1e6);
        println!(
            "{} KiB ping-pong bandwidth: {:.2} GB/s",
            large >> 10,
            2.0 * large as f64 / big / 1e9
        );
        c.wait().unwrap();
    }
}
