//! The software device's cost: 64-byte send/recv round trips and 1 MiB RDMA writes
//! between two contexts of one process (the same path two processes take: unix sockets
//! and each context's service thread). Prints one line per measurement.
//!
//! `cargo bench -p ofi-rdma --bench soft_pingpong -- [iterations]`

use std::time::Instant;

use ofi_rdma::*;

struct Side {
    qp: QueuePair,
    mr: MemoryRegion,
    cq: CompletionQueue,
    ch: CompChannel,
    _pd: ProtectionDomain,
    _ctx: Context,
    buf: Vec<u8>,
}

fn side(len: usize) -> Side {
    let ctx = device_list(DeviceKind::Soft).unwrap()[0].open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let cq = ctx.create_cq(1024, 0, Some(&ch)).unwrap();
    let mut buf = vec![0u8; len];
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    // SAFETY: `buf` is neither moved nor freed before `mr` (dropped first, field order).
    let mr = unsafe { pd.reg_mr(buf.as_mut_ptr(), len, access) }.unwrap();
    let cap = QpCap {
        max_send_wr: 256,
        max_recv_wr: 256,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 64,
    };
    let qp = pd
        .create_qp(&QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            srq: None,
            cap,
            sq_sig_all: false,
        })
        .unwrap();
    let a = QpAttr {
        qp_state: QpState::Init,
        qp_access_flags: access,
        ..QpAttr::default()
    };
    qp.modify(
        &a,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
    .unwrap();
    Side {
        qp,
        mr,
        cq,
        ch,
        _pd: pd,
        _ctx: ctx,
        buf,
    }
}

fn connect(s: &Side, gid: Gid, qpn: u32) {
    let a = QpAttr {
        qp_state: QpState::Rtr,
        dest_qp_num: qpn,
        ah_attr: AhAttr {
            dgid: gid,
            port_num: 1,
            ..AhAttr::default()
        },
        min_rnr_timer: 1,
        ..QpAttr::default()
    };
    let m = QpAttrMask::STATE | QpAttrMask::RC_TO_RTR;
    s.qp.modify(&a, m).unwrap();
    let a = QpAttr {
        qp_state: QpState::Rts,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        ..QpAttr::default()
    };
    let m = QpAttrMask::STATE | QpAttrMask::RC_TO_RTS;
    s.qp.modify(&a, m).unwrap();
}

fn sge(s: &Side, off: usize, len: usize) -> Sge {
    Sge {
        addr: s.buf.as_ptr() as u64 + off as u64,
        length: len as u32,
        lkey: s.mr.lkey(),
    }
}

/// Waits for a completion of `want`: polls, and when nothing is there arms the queue,
/// polls once more (a completion may have come before the arming) and sleeps on the
/// channel's fd — no spinning against the device's threads on a shared machine.
fn wait(s: &Side, want: WcOpcode) {
    let cq = &s.cq;
    let mut wc = [WorkCompletion::new(0, WcStatus::GeneralErr, WcOpcode::Send, 0); 1];
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if cq.poll(&mut wc).unwrap() == 1 {
            assert_eq!(wc[0].status, WcStatus::Success);
            if wc[0].opcode == want {
                return;
            }
        }
        assert!(Instant::now() < deadline, "no completion");
        cq.req_notify(false).unwrap();
        if cq.poll(&mut wc).unwrap() == 1 {
            assert_eq!(wc[0].status, WcStatus::Success);
            if wc[0].opcode == want {
                return;
            }
            continue;
        }
        s.ch.wait_cq_event(std::time::Duration::from_secs(1));
    }
}

fn send(s: &Side, len: usize, op: SendOp) {
    let sg = [sge(s, 0, len)];
    // SAFETY: registered range.
    unsafe {
        s.qp.post_send(&SendWr {
            wr_id: 1,
            sg_list: &sg,
            op,
            send_flags: SendFlags::SIGNALED,
            ud: None,
        })
    }
    .unwrap();
}

fn main() {
    let iters: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20_000);
    let a = side(1 << 20);
    let b = side(1 << 20);
    connect(&a, b._ctx.query_gid(1, 0).unwrap(), b.qp.qp_num());
    connect(&b, a._ctx.query_gid(1, 0).unwrap(), a.qp.qp_num());
    let pong = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            for _ in 0..iters {
                b.qp.post_recv(&RecvWr {
                    wr_id: 2,
                    sg_list: &[sge(&b, 0, 64)],
                })
                .unwrap();
                wait(&b, WcOpcode::Recv);
                send(&b, 64, SendOp::Send);
                wait(&b, WcOpcode::Send);
            }
        });
        let t0 = Instant::now();
        for _ in 0..iters {
            a.qp.post_recv(&RecvWr {
                wr_id: 2,
                sg_list: &[sge(&a, 0, 64)],
            })
            .unwrap();
            send(&a, 64, SendOp::Send);
            wait(&a, WcOpcode::Send);
            wait(&a, WcOpcode::Recv);
        }
        let dt = t0.elapsed();
        h.join().unwrap();
        dt
    });
    println!(
        "soft RC send/recv 64 B: {iters} round trips in {:.3} s, {:.2} us per round trip",
        pong.as_secs_f64(),
        pong.as_secs_f64() * 1e6 / iters as f64
    );
    let writes = (iters / 40).max(10);
    let remote = Remote {
        addr: b.buf.as_ptr() as u64,
        rkey: b.mr.rkey(),
    };
    let t0 = Instant::now();
    for _ in 0..writes {
        send(&a, 1 << 20, SendOp::RdmaWrite(remote));
        wait(&a, WcOpcode::RdmaWrite);
    }
    let dt = t0.elapsed();
    println!(
        "soft RC RDMA write 1 MiB: {writes} writes in {:.3} s, {:.0} MB/s",
        dt.as_secs_f64(),
        writes as f64 * (1 << 20) as f64 / dt.as_secs_f64() / 1e6
    );
}
