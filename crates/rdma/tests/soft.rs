//! The software device in one process (two contexts): data movement, keys and access,
//! receiver-not-ready, error states, UD, completion channels, cleanup.

mod common;

use std::time::Duration;

use common::*;
use ofi_rdma::*;

#[test]
fn device_is_listed_and_queries_answer() {
    let devs = device_list(DeviceKind::Soft).unwrap();
    assert_eq!(devs.len(), 1);
    assert_eq!(devs[0].name(), "soft0");
    let ctx = devs[0].open().unwrap();
    let port = ctx.query_port(1).unwrap();
    assert_eq!(port.state, PortState::Active);
    assert_eq!(port.active_mtu.bytes(), 4096);
    assert!(ctx.query_port(2).is_err());
    assert!(ctx.query_gid(1, 1).is_err());
    let attr = ctx.query_device().unwrap();
    assert!(attr.max_sge >= 4 && attr.atomics);
    let other = soft_context();
    assert_ne!(ctx.query_gid(1, 0).unwrap(), other.query_gid(1, 0).unwrap());
}

#[test]
fn send_recv_with_and_without_immediate_data() {
    let a = Node::all_access(1 << 16);
    let b = Node::all_access(1 << 16);
    let (qa, qb) = rc_pair(&a, &b, 0);
    let msg = pattern(1000, 3);
    a.buf.write(0, &msg);
    b.recv(&qb, 10, 0, 4096);
    b.recv(&qb, 11, 4096, 4096);
    a.post(&qa, 1, SendOp::Send, 0, 1000);
    a.post(&qa, 2, SendOp::SendWithImm(0xfeed), 0, 10);
    let s1 = wait_wc(&a.scq, "send");
    assert_eq!(
        (s1.wr_id, s1.status, s1.opcode),
        (1, WcStatus::Success, WcOpcode::Send)
    );
    let s2 = wait_wc(&a.scq, "send imm");
    assert_eq!((s2.wr_id, s2.status), (2, WcStatus::Success));
    let r1 = wait_wc(&b.rcq, "recv");
    assert_eq!(
        (r1.wr_id, r1.status, r1.opcode, r1.byte_len),
        (10, WcStatus::Success, WcOpcode::Recv, 1000)
    );
    assert!(!r1.wc_flags.contains(WcFlags::WITH_IMM));
    assert_eq!(r1.qp_num, qb.qp_num());
    assert_eq!(b.buf.read(0, 1000), msg);
    let r2 = wait_wc(&b.rcq, "recv imm");
    assert_eq!((r2.wr_id, r2.byte_len, r2.imm_data), (11, 10, 0xfeed));
    assert!(r2.wc_flags.contains(WcFlags::WITH_IMM));
}

#[test]
fn large_messages_cross_in_fragments() {
    let len = 1 << 20;
    let a = Node::all_access(2 * len);
    let b = Node::all_access(2 * len);
    let (qa, qb) = rc_pair(&a, &b, 0);
    let msg = pattern(len, 9);
    a.buf.write(0, &msg);
    let (s, r) = send_once((&a, &qa), (&b, &qb), 1, len, len);
    assert_eq!(s.status, WcStatus::Success);
    assert_eq!(r.byte_len as usize, len);
    assert_eq!(b.buf.read(0, len), msg);
    // Write it to b's upper half, read it back into a's upper half.
    let remote = b.remote(len as u64);
    a.post(&qa, 2, SendOp::RdmaWrite(remote), 0, len);
    assert_eq!(wait_wc(&a.scq, "write").status, WcStatus::Success);
    assert_eq!(b.buf.read(len, len), msg);
    a.post(&qa, 3, SendOp::RdmaRead(remote), len, len);
    let r = wait_wc(&a.scq, "read");
    assert_eq!(
        (r.status, r.opcode),
        (WcStatus::Success, WcOpcode::RdmaRead)
    );
    assert_eq!(a.buf.read(len, len), msg);
}

#[test]
fn rdma_write_with_immediate_consumes_a_receive() {
    let a = Node::all_access(8192);
    let b = Node::all_access(8192);
    let (qa, qb) = rc_pair(&a, &b, 0);
    a.buf.write(0, b"written!");
    b.recv(&qb, 77, 4096, 16);
    let remote = b.remote(100);
    a.post(&qa, 5, SendOp::RdmaWriteWithImm(remote, 42), 0, 8);
    assert_eq!(wait_wc(&a.scq, "write imm").opcode, WcOpcode::RdmaWrite);
    let r = wait_wc(&b.rcq, "recv imm");
    assert_eq!(
        (r.wr_id, r.opcode, r.imm_data, r.byte_len),
        (77, WcOpcode::RecvRdmaWithImm, 42, 8)
    );
    assert_eq!(b.buf.read(100, 8), b"written!");
    // The receive buffer itself is untouched.
    assert_eq!(b.buf.read(4096, 8), vec![0; 8]);
}

#[test]
fn atomics_fetch_add_and_compare_swap() {
    let (a, b, qa, _qb) = rc_nodes(0);
    b.buf.write(64, &100u64.to_le_bytes());
    let remote = b.remote(64);
    a.post(&qa, 1, SendOp::AtomicFetchAdd { remote, add: 5 }, 0, 8);
    let c = wait_wc(&a.scq, "fetch add");
    assert_eq!(
        (c.status, c.opcode, c.byte_len),
        (WcStatus::Success, WcOpcode::FetchAdd, 8)
    );
    assert_eq!(a.buf.u64_at(0), 100);
    assert_eq!(b.buf.u64_at(64), 105);
    a.post(
        &qa,
        2,
        SendOp::AtomicCmpSwap {
            remote,
            compare: 1,
            swap: 7,
        },
        8,
        8,
    );
    assert_eq!(wait_wc(&a.scq, "cas miss").status, WcStatus::Success);
    assert_eq!((a.buf.u64_at(8), b.buf.u64_at(64)), (105, 105));
    a.post(
        &qa,
        3,
        SendOp::AtomicCmpSwap {
            remote,
            compare: 105,
            swap: 7,
        },
        16,
        8,
    );
    assert_eq!(wait_wc(&a.scq, "cas hit").opcode, WcOpcode::CompSwap);
    assert_eq!((a.buf.u64_at(16), b.buf.u64_at(64)), (105, 7));
}

#[test]
fn misaligned_atomic_is_an_invalid_request() {
    let (a, b, qa, qb) = rc_nodes(0);
    let remote = b.remote(3);
    a.post(&qa, 1, SendOp::AtomicFetchAdd { remote, add: 1 }, 0, 8);
    assert_eq!(wait_wc(&a.scq, "atomic").status, WcStatus::RemInvReqErr);
    assert_eq!(qa.state(), QpState::Err);
    assert_eq!(b.buf.read(0, 16), vec![0; 16]);
    drop(qb);
}

/// The operation an initiator sends towards target node `b`.
type RemoteOp = fn(&Node) -> SendOp;

/// One bad remote access (`what`): the initiator's error completion (always
/// `IBV_WC_REM_ACCESS_ERR`), target memory untouched, both queue pairs in error, later
/// work flushed.
fn remote_violation(what: &str, target_access: Access, op: RemoteOp) {
    let a = Node::all_access(4096);
    let b = Node::new(4096, target_access);
    let (qa, qb) = rc_pair(&a, &b, 0);
    a.buf.write(0, &[0xaa; 64]);
    b.buf.write(0, &[0x11; 64]);
    b.recv(&qb, 9, 1024, 64);
    a.post(&qa, 1, op(&b), 0, 8);
    a.post(&qa, 2, SendOp::Send, 0, 8);
    let c = wait_wc(&a.scq, what);
    assert_eq!((c.wr_id, c.status), (1, WcStatus::RemAccessErr), "{what}");
    let f = wait_wc(&a.scq, "flushed send");
    assert_eq!((f.wr_id, f.status), (2, WcStatus::WrFlushErr), "{what}");
    assert_eq!(qa.state(), QpState::Err, "{what}");
    assert_eq!(
        b.buf.read(0, 64),
        vec![0x11; 64],
        "{what}: target memory changed"
    );
    assert_eq!(
        a.buf.read(0, 8),
        vec![0xaa; 8],
        "{what}: initiator buffer changed"
    );
    // The responder moved to error too: its receive is flushed.
    let r = wait_wc(&b.rcq, "responder flush");
    assert_eq!((r.wr_id, r.status), (9, WcStatus::WrFlushErr), "{what}");
    assert_eq!(qb.state(), QpState::Err, "{what}");
    let ev = b
        .ctx
        .get_async_event()
        .expect("async event at the responder");
    assert_eq!(ev.element, EventElement::Qp(qb.qp_num()), "{what}");
}

/// A bad rkey, a write past the end of the region, and a read, write or atomic the
/// target's region does not allow: each is a remote access error (each on a fresh pair
/// of nodes).
#[test]
fn remote_access_violations_are_remote_access_errors() {
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let cases: [(&str, Access, RemoteOp); 5] = [
        ("bad rkey", rw | Access::REMOTE_READ, |b| {
            SendOp::RdmaWrite(Remote {
                addr: b.buf.addr(),
                rkey: b.mr.rkey() ^ 0x100,
            })
        }),
        ("write out of bounds", rw, |b| {
            SendOp::RdmaWrite(b.remote(4090))
        }),
        ("read without REMOTE_READ", rw, |b| {
            SendOp::RdmaRead(b.remote(0))
        }),
        (
            "write without REMOTE_WRITE",
            Access::LOCAL_WRITE | Access::REMOTE_READ,
            |b| SendOp::RdmaWrite(b.remote(0)),
        ),
        (
            "atomic without REMOTE_ATOMIC",
            rw | Access::REMOTE_READ,
            |b| SendOp::AtomicFetchAdd {
                remote: b.remote(0),
                add: 1,
            },
        ),
    ];
    for (what, access, op) in cases {
        remote_violation(what, access, op);
    }
}

#[test]
fn bad_local_key_is_a_local_protection_error() {
    let (a, b, qa, qb) = rc_nodes(0);
    b.recv(&qb, 1, 0, 64);
    let sg = [Sge {
        addr: a.buf.addr(),
        length: 8,
        lkey: a.mr.lkey() ^ 0x100,
    }];
    // SAFETY: keys are checked; nothing is read from an unchecked range.
    unsafe { post_sg(&qa, 4, &sg, SendOp::Send, SendFlags::SIGNALED, None) }.unwrap();
    assert_eq!(wait_wc(&a.scq, "bad lkey").status, WcStatus::LocProtErr);
    assert_eq!(qa.state(), QpState::Err);
    // Beyond the region's end.
    let (c, _d, qc, _qd) = rc_nodes(0);
    c.post(&qc, 5, SendOp::Send, 4000, 200);
    assert_eq!(
        wait_wc(&c.scq, "out of region").status,
        WcStatus::LocProtErr
    );
}

#[test]
fn message_longer_than_the_receive_is_a_length_error() {
    let (a, b, qa, qb) = rc_nodes(0);
    let (s, r) = send_once((&a, &qa), (&b, &qb), 8, 100, 16);
    assert_eq!((s.wr_id, s.status), (8, WcStatus::RemInvReqErr));
    assert_eq!((r.wr_id, r.status), (8, WcStatus::LocLenErr));
}

#[test]
fn receiver_not_ready_exhausts_rnr_retry() {
    let (a, _b, qa, _qb) = rc_nodes(2);
    a.post(&qa, 1, SendOp::Send, 0, 8);
    a.post(&qa, 2, SendOp::Send, 0, 8);
    let c = wait_wc(&a.scq, "rnr");
    assert_eq!((c.wr_id, c.status), (1, WcStatus::RnrRetryExcErr));
    assert_eq!(wait_wc(&a.scq, "flush").status, WcStatus::WrFlushErr);
    assert_eq!(qa.state(), QpState::Err);
}

#[test]
fn receiver_not_ready_then_ready_delivers_in_order() {
    // rnr_retry 7: retry for ever; the responder's timer code 1 (10 µs).
    let (a, b, qa, qb) = rc_nodes(7);
    a.buf.write(0, b"first...second..");
    a.post(&qa, 1, SendOp::Send, 0, 8);
    a.post(&qa, 2, SendOp::Send, 8, 8);
    // Give the requester time for RNR rounds (none can complete: no receive is posted).
    std::thread::sleep(Duration::from_millis(20));
    b.recv(&qb, 10, 100, 8);
    b.recv(&qb, 11, 200, 8);
    assert_eq!(wait_wc(&a.scq, "first").wr_id, 1);
    assert_eq!(wait_wc(&a.scq, "second").wr_id, 2);
    assert_eq!(wait_wc(&b.rcq, "r1").wr_id, 10);
    assert_eq!(wait_wc(&b.rcq, "r2").wr_id, 11);
    assert_eq!(b.buf.read(100, 8), b"first...");
    assert_eq!(b.buf.read(200, 8), b"second..");
}

#[test]
fn shared_receive_queue_serves_two_queue_pairs() {
    let a = Node::all_access(4096);
    let b = Node::all_access(4096);
    let srq =
        b.pd.create_srq(&SrqInitAttr {
            max_wr: 8,
            max_sge: 1,
        })
        .unwrap();
    let mk = |n: &Node, srq: Option<&SharedReceiveQueue>| {
        n.pd.create_qp(&QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: &n.scq,
            recv_cq: &n.rcq,
            srq,
            cap: QpCap {
                max_send_wr: 8,
                max_recv_wr: 0,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            sq_sig_all: true,
        })
    };
    assert!(mk(&a, None).is_err(), "no receive queue at all");
    let a1 = a.qp(QpType::Rc);
    let a2 = a.qp(QpType::Rc);
    let b1 = mk(&b, Some(&srq)).unwrap();
    let b2 = mk(&b, Some(&srq)).unwrap();
    for q in [&a1, &a2, &b1, &b2] {
        rc_init(q);
    }
    rc_connect(&a1, b.gid(), b1.qp_num(), 0, 1);
    rc_connect(&a2, b.gid(), b2.qp_num(), 0, 1);
    rc_connect(&b1, a.gid(), a1.qp_num(), 0, 1);
    rc_connect(&b2, a.gid(), a2.qp_num(), 0, 1);
    assert!(
        b1.post_recv(&RecvWr {
            wr_id: 0,
            sg_list: &[b.sge(0, 8)]
        })
        .is_err(),
        "post to the SRQ instead"
    );
    srq.post_recv(&RecvWr {
        wr_id: 100,
        sg_list: &[b.sge(0, 64)],
    })
    .unwrap();
    srq.post_recv(&RecvWr {
        wr_id: 101,
        sg_list: &[b.sge(64, 64)],
    })
    .unwrap();
    a.post(&a1, 1, SendOp::Send, 0, 4);
    assert_eq!(wait_wc(&b.rcq, "via b1").qp_num, b1.qp_num());
    a.post(&a2, 2, SendOp::Send, 0, 4);
    let r = wait_wc(&b.rcq, "via b2");
    assert_eq!((r.wr_id, r.qp_num), (101, b2.qp_num()));
}

#[test]
fn queue_pair_in_error_flushes_posted_work() {
    let (a, b, qa, qb) = rc_nodes(0);
    b.recv(&qb, 1, 0, 8);
    b.recv(&qb, 2, 8, 8);
    set_state(&qb, QpState::Err).unwrap();
    for id in [1, 2] {
        let r = wait_wc(&b.rcq, "flush");
        assert_eq!(
            (r.wr_id, r.status, r.opcode),
            (id, WcStatus::WrFlushErr, WcOpcode::Recv)
        );
    }
    // Posting in error completes at once, flushed.
    b.recv(&qb, 3, 0, 8);
    assert_eq!(
        wait_wc(&b.rcq, "post in error").status,
        WcStatus::WrFlushErr
    );
    // The requester talking to it finds no responder.
    a.post(&qa, 9, SendOp::Send, 0, 8);
    assert_eq!(
        wait_wc(&a.scq, "send to error").status,
        WcStatus::RetryExcErr
    );
    // RESET then INIT again.
    set_state(&qb, QpState::Reset).unwrap();
    rc_init(&qb);
    assert_eq!(qb.state(), QpState::Init);
}

#[test]
fn transitions_need_their_attributes() {
    let a = Node::all_access(4096);
    let q = a.qp(QpType::Rc);
    let e = set_state(&q, QpState::Rts).unwrap_err();
    assert_eq!(e.code(), ofi_core::Errno::EINVAL);
    let e = set_state(&q, QpState::Init).unwrap_err();
    assert_eq!(e.code(), ofi_core::Errno::EINVAL);
    rc_init(&q);
    let e = set_state(&q, QpState::Rtr).unwrap_err();
    assert_eq!(e.code(), ofi_core::Errno::EINVAL);
    let sg = [a.sge(0, 8)];
    // SAFETY: registered range.
    let e = unsafe { post_sg(&q, 1, &sg, SendOp::Send, SendFlags::SIGNALED, None) };
    assert_eq!(e.unwrap_err().code(), ofi_core::Errno::EINVAL);
    // SAFETY: registration of a dangling range is refused before use.
    let e = unsafe { a.pd.reg_mr(a.buf.ptr(), 16, Access::REMOTE_WRITE) };
    assert_eq!(e.unwrap_err().code(), ofi_core::Errno::EINVAL);
}

#[test]
fn inline_and_unsignaled_sends() {
    let (a, b, qa, qb) = rc_nodes(0);
    b.recv(&qb, 1, 0, 64);
    b.recv(&qb, 2, 64, 64);
    let local = *b"inline data, no key";
    let sg = [Sge {
        addr: local.as_ptr() as u64,
        length: local.len() as u32,
        lkey: 0,
    }];
    // SAFETY: INLINE reads the local array now.
    unsafe { post_sg(&qa, 1, &sg, SendOp::Send, SendFlags::INLINE, None) }.unwrap();
    a.post(&qa, 2, SendOp::Send, 0, 4);
    // Only the signaled one completes visibly.
    assert_eq!(wait_wc(&a.scq, "signaled").wr_id, 2);
    assert_eq!(wait_wc(&b.rcq, "inline").byte_len as usize, local.len());
    assert_eq!(b.buf.read(0, local.len()), local);
    let big = [0u8; 65];
    let sg = [Sge {
        addr: big.as_ptr() as u64,
        length: 65,
        lkey: 0,
    }];
    // SAFETY: as above.
    let e = unsafe { post_sg(&qa, 3, &sg, SendOp::Send, SendFlags::INLINE, None) };
    assert_eq!(e.unwrap_err().code(), ofi_core::Errno::EINVAL);
}

#[test]
fn completion_channel_fd_signals_armed_queue() {
    let a = Node::all_access(4096);
    let b_ctx = soft_context();
    let b_pd = b_ctx.alloc_pd().unwrap();
    let ch = b_ctx.create_comp_channel().unwrap();
    let rcq = b_ctx.create_cq(16, 0xc0, Some(&ch)).unwrap();
    let scq = b_ctx.create_cq(16, 0xc1, None).unwrap();
    let buf = Buf::new(4096);
    // SAFETY: `buf` outlives `mr` (dropped at the end in reverse order).
    let mr = unsafe { b_pd.reg_mr(buf.ptr(), 4096, Access::LOCAL_WRITE) }.unwrap();
    let qb = small_rc_qp(&b_pd, &scq, &rcq);
    let qa = a.qp(QpType::Rc);
    rc_init(&qa);
    rc_init(&qb);
    rc_connect(&qa, b_ctx.query_gid(1, 0).unwrap(), qb.qp_num(), 0, 1);
    rc_connect(&qb, a.gid(), qa.qp_num(), 0, 1);
    let sge = Sge {
        addr: buf.addr(),
        length: 64,
        lkey: mr.lkey(),
    };
    qb.post_recv(&RecvWr {
        wr_id: 1,
        sg_list: &[sge],
    })
    .unwrap();
    for wr_id in 2..5 {
        qb.post_recv(&RecvWr {
            wr_id,
            sg_list: &[sge],
        })
        .unwrap();
    }
    // Not armed: a completion raises no event.
    a.post(&qa, 1, SendOp::Send, 0, 4);
    wait_wc(&rcq, "unarmed");
    assert_eq!(ch.get_cq_event(), None);
    rcq.req_notify(false).unwrap();
    a.post(&qa, 2, SendOp::Send, 0, 4);
    assert_eq!(ch.wait_cq_event(BOUND), Some(0xc0));
    assert!(
        !readable_within(ch.fd(), Duration::ZERO),
        "fd readable with no event pending"
    );
    assert_eq!(wait_wc(&rcq, "armed").wr_id, 2);
    // Solicited only: an ordinary message raises nothing, a solicited one does. The
    // ordinary one's completion is in the queue before the solicited one is sent, so
    // "nothing" is checked after it arrived, not after a pause.
    rcq.req_notify(true).unwrap();
    a.post(&qa, 3, SendOp::Send, 0, 4);
    assert_eq!(wait_wc(&rcq, "unsolicited").wr_id, 3);
    assert_eq!(ch.get_cq_event(), None);
    let sg = [a.sge(0, 4)];
    // SAFETY: registered range.
    unsafe {
        post_sg(
            &qa,
            4,
            &sg,
            SendOp::Send,
            SendFlags::SIGNALED | SendFlags::SOLICITED,
            None,
        )
    }
    .unwrap();
    assert_eq!(ch.wait_cq_event(BOUND), Some(0xc0));
    assert_eq!(wait_wc(&rcq, "solicited").wr_id, 4);
    drop((qb, mr));
}

#[test]
fn ud_datagrams_carry_a_grh_and_respect_qkey_and_mtu() {
    let (a, b, qa, qb) = ud_nodes(16384, 0x1111, 0x2222);
    b.recv(&qb, 1, 0, 4096 + 40);
    b.recv(&qb, 2, 8192, 4096 + 40);
    a.buf.write(0, &pattern(4096, 1));
    let send = |wr_id: u64, len: usize, qkey: u32, op: SendOp| {
        let to = a.ud_target(b.gid(), qb.qp_num(), qkey);
        a.ud_send(&qa, &to, wr_id, op, 0, len)
    };
    // Wrong Q_Key: sent fine, silently dropped at the receiver.
    assert_eq!(send(1, 100, 0x9999, SendOp::Send).status, WcStatus::Success);
    // Over the MTU: a local length error.
    assert_eq!(
        send(2, 4097, 0x2222, SendOp::Send).status,
        WcStatus::LocLenErr
    );
    assert_eq!(
        send(3, 4096, 0x2222, SendOp::SendWithImm(5)).status,
        WcStatus::Success
    );
    let r = wait_wc(&b.rcq, "ud recv");
    assert_eq!(
        (r.wr_id, r.byte_len, r.src_qp, r.imm_data),
        (1, 4096 + 40, qa.qp_num(), 5)
    );
    assert!(r.wc_flags.contains(WcFlags::GRH | WcFlags::WITH_IMM));
    assert_eq!(b.buf.read(8, 16), a.gid().0.to_vec(), "GRH source GID");
    assert_eq!(b.buf.read(40, 4096), pattern(4096, 1));
    assert_empty(&b.rcq, "wrong qkey datagram");
    // A receive too short for GRH and payload: a length error for that receive.
    let small = b.qp(QpType::Ud);
    ud_ready(&small, 0x2222);
    b.recv(&small, 9, 0, 40 + 10);
    let to = a.ud_target(b.gid(), small.qp_num(), 0x2222);
    assert_eq!(
        a.ud_send(&qa, &to, 4, SendOp::Send, 0, 11).status,
        WcStatus::Success
    );
    let r = wait_wc(&b.rcq, "short receive");
    assert_eq!((r.wr_id, r.status), (9, WcStatus::LocLenErr));
}

#[test]
fn ud_drop_fault_loses_datagrams_and_delay_holds_them() {
    let (a, b, qa, qb) = ud_nodes(4096, 7, 7);
    let to = a.ud_target(b.gid(), qb.qp_num(), 7);
    let send = |wr_id: u64| {
        let c = a.ud_send(&qa, &to, wr_id, SendOp::SendWithImm(wr_id as u32), 0, 8);
        assert_eq!(c.status, WcStatus::Success);
    };
    for i in 0..4 {
        b.recv(&qb, i, 64 * i as usize, 64);
    }
    a.ctx
        .set_soft_fault(SoftFault {
            ud_drop_percent: 100,
            ..SoftFault::default()
        })
        .unwrap();
    send(1);
    send(2);
    a.ctx
        .set_soft_fault(SoftFault {
            ud_delay: Duration::from_millis(30),
            ..SoftFault::default()
        })
        .unwrap();
    let t0 = std::time::Instant::now();
    send(3);
    let r = wait_wc(&b.rcq, "delayed datagram");
    assert!(
        t0.elapsed() >= Duration::from_millis(30),
        "arrived before the delay"
    );
    // Only the third arrived: the dropped ones never show up.
    assert_eq!(r.imm_data, 3);
    a.ctx.set_soft_fault(SoftFault::default()).unwrap();
    send(4);
    assert_eq!(wait_wc(&b.rcq, "undelayed").imm_data, 4);
}

#[test]
fn closing_removes_the_socket_file() {
    let dir = std::env::var("FI_VERBS_SOFT_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            // SAFETY: plain syscall.
            std::path::PathBuf::from(format!("/tmp/ofi-rdma-soft-{}", unsafe { libc::getuid() }))
        });
    let ctx = soft_context();
    let g = ctx.query_gid(1, 0).unwrap().0;
    let pid = u32::from_be_bytes([g[8], g[9], g[10], g[11]]);
    let serial = u32::from_be_bytes([g[12], g[13], g[14], g[15]]);
    let path = dir.join(format!("{pid}-{serial}"));
    assert!(path.exists(), "{} missing while open", path.display());
    let pd = ctx.alloc_pd().unwrap();
    drop(ctx);
    // The domain keeps the context (and its socket) alive.
    assert!(path.exists());
    drop(pd);
    assert!(!path.exists(), "{} left behind", path.display());
}

#[test]
fn completion_queue_overrun_raises_an_async_event() {
    let ctx = soft_context();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(2, 0x99, None).unwrap();
    let buf = Buf::new(64);
    // SAFETY: `buf` outlives `mr` (declared before it, dropped after).
    let mr = unsafe { pd.reg_mr(buf.ptr(), 64, Access::LOCAL_WRITE) }.unwrap();
    let qp = small_rc_qp(&pd, &cq, &cq);
    rc_init(&qp);
    for i in 0..3 {
        qp.post_recv(&RecvWr {
            wr_id: i,
            sg_list: &[Sge {
                addr: buf.addr(),
                length: 8,
                lkey: mr.lkey(),
            }],
        })
        .unwrap();
    }
    // Three flushed receives into a queue of two.
    set_state(&qp, QpState::Err).unwrap();
    assert_eq!(
        ctx.get_async_event(),
        Some(AsyncEvent {
            event_type: EventType::CqErr,
            element: EventElement::Cq(0x99)
        })
    );
    let mut wc = [WorkCompletion::new(0, WcStatus::Success, WcOpcode::Send, 0); 4];
    assert_eq!(cq.poll(&mut wc).unwrap(), 2);
    drop((qp, mr));
}

#[test]
fn a_destroyed_peer_queue_pair_is_a_retry_error() {
    let (a, b, qa, qb) = rc_nodes(7);
    drop(qb);
    a.post(&qa, 1, SendOp::RdmaWrite(b.remote(0)), 0, 8);
    let c = wait_wc(&a.scq, "write to a destroyed queue pair");
    assert_eq!((c.wr_id, c.status), (1, WcStatus::RetryExcErr));
    assert_eq!(qa.state(), QpState::Err);
    assert_eq!(b.buf.read(0, 8), vec![0; 8]);
}

/// An acknowledgement that reached the context before a modify to ERR completes its
/// send successfully (hardware processes what reached it); only what was still
/// outstanding is flushed.
#[test]
fn modify_to_error_completes_acknowledged_sends_first() {
    let (a, b, qa, qb) = rc_nodes(7);
    // One full exchange first: both contexts' connections are set up and known.
    let (s, r) = send_once((&a, &qa), (&b, &qb), 99, 8, 64);
    assert_eq!((s.status, r.status), (WcStatus::Success, WcStatus::Success));
    for round in 0..20u64 {
        b.recv(&qb, round, 0, 64);
        a.post(&qa, 100 + round, SendOp::Send, 0, 8);
        // The responder acknowledges before it reports the receive: once the receive
        // is seen, the acknowledgement has reached a's context.
        assert_eq!(wait_wc(&b.rcq, "receive").status, WcStatus::Success);
    }
    set_state(&qa, QpState::Err).unwrap();
    for round in 0..20u64 {
        let wc = wait_wc(&a.scq, "an acknowledged send");
        assert_eq!(
            (wc.wr_id, wc.status),
            (100 + round, WcStatus::Success),
            "a send acknowledged before the modify to ERR"
        );
    }
    assert_empty(&a.scq, "nothing else");
}
