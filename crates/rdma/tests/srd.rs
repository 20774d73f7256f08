//! SRD queue pairs on the software device: reliable (a send completes once the receiver
//! took it), unordered (with the reordering fault), MTU-limited, receiver-not-ready
//! retried then reported, lost peers and absent queue pairs completing in error.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;
use ofi_rdma::soft::SRD_MTU;
use ofi_rdma::*;

/// An SRD queue pair on `n`'s queues, ready to send, with `rnr_retry` and the
/// receiver-side timer code `min_rnr_timer`.
fn srd_qp(n: &Node, qkey: u32, rnr_retry: u8, min_rnr_timer: u8) -> QueuePair {
    let qp = n.qp(QpType::Srd);
    ud_ready(&qp, qkey);
    qp.modify(
        &QpAttr {
            qp_state: QpState::Rts,
            rnr_retry,
            min_rnr_timer,
            ..QpAttr::default()
        },
        QpAttrMask::STATE | QpAttrMask::RNR_RETRY | QpAttrMask::MIN_RNR_TIMER,
    )
    .unwrap();
    qp
}

/// An SRD queue pair of `a` (retrying a receiver that is not ready `rnr_retry`
/// times) and one of `b`, both with `qkey`, and the target of b's from a.
fn srd_link(a: &Node, b: &Node, qkey: u32, rnr_retry: u8) -> (QueuePair, QueuePair, UdTarget) {
    let qa = srd_qp(a, qkey, rnr_retry, 1);
    let qb = srd_qp(b, qkey, 0, 1);
    let to = a.ud_target(b.gid(), qb.qp_num(), qkey);
    (qa, qb, to)
}

#[test]
fn srd_send_completes_once_received_with_grh_source_and_immediate() {
    let a = Node::all_access(32768);
    let b = Node::all_access(32768);
    let qa = srd_qp(&a, 0x11, 0, 1);
    let qb = srd_qp(&b, 0x22, 0, 1);
    b.recv(&qb, 1, 0, SRD_MTU + 40);
    a.buf.write(0, &pattern(SRD_MTU, 3));
    let to = a.ud_target(b.gid(), qb.qp_num(), 0x22);
    let c = a.ud_send(&qa, &to, 7, SendOp::SendWithImm(99), 0, SRD_MTU);
    assert_eq!((c.wr_id, c.status), (7, WcStatus::Success));
    let r = wait_wc(&b.rcq, "srd recv");
    assert_eq!(
        (r.wr_id, r.status, r.byte_len, r.src_qp, r.imm_data),
        (1, WcStatus::Success, (SRD_MTU + 40) as u32, qa.qp_num(), 99)
    );
    assert!(r.wc_flags.contains(WcFlags::GRH | WcFlags::WITH_IMM));
    assert_eq!(b.buf.read(8, 16), a.gid().0.to_vec(), "GRH source GID");
    assert_eq!(b.buf.read(40, SRD_MTU), pattern(SRD_MTU, 3));
}

#[test]
fn srd_send_over_the_mtu_is_refused_at_posting() {
    let a = Node::all_access(32768);
    let b = Node::all_access(4096);
    let (qa, _qb, to) = srd_link(&a, &b, 1, 0);
    let e = a
        .try_post(&qa, 1, SendOp::Send, 0, SRD_MTU + 1, Some(to.dest()))
        .unwrap_err();
    assert_eq!(e.code(), ofi_core::Errno::EINVAL);
    assert_empty(&a.scq, "refused send");
    // Only sends: an RDMA write is refused too.
    let r = b.remote(0);
    assert!(a
        .try_post(&qa, 2, SendOp::RdmaWrite(r), 0, 8, Some(to.dest()))
        .is_err());
}

#[test]
fn srd_receiver_not_ready_is_retried_then_reported() {
    let a = Node::all_access(4096);
    let b = Node::all_access(4096);
    // Two retries 10 µs apart, then RNR_RETRY_EXC_ERR; the receiver's queue pair is fine.
    let (qa, qb, to) = srd_link(&a, &b, 5, 2);
    let c = a.ud_send(&qa, &to, 1, SendOp::Send, 0, 64);
    assert_eq!((c.wr_id, c.status), (1, WcStatus::RnrRetryExcErr));
    assert_empty(&b.rcq, "refused datagram");
    // Retried for ever (7): taken once a receive is posted, exactly once.
    let qa7 = srd_qp(&a, 5, 7, 1);
    a.try_post(&qa7, 2, SendOp::SendWithImm(2), 0, 64, Some(to.dest()))
        .unwrap();
    // Let it be refused a few times first.
    std::thread::sleep(Duration::from_millis(20));
    b.recv(&qb, 10, 0, 1024);
    assert_eq!(wait_wc(&a.scq, "retried send").status, WcStatus::Success);
    let r = wait_wc(&b.rcq, "late receive");
    assert_eq!((r.wr_id, r.imm_data), (10, 2));
    assert_empty(&b.rcq, "a duplicate");
    // The first queue pair still works.
    b.recv(&qb, 11, 0, 1024);
    assert_eq!(
        a.ud_send(&qa, &to, 3, SendOp::Send, 0, 8).status,
        WcStatus::Success
    );
}

#[test]
fn srd_reordering_delivers_each_datagram_once_in_another_order() {
    const N: u64 = 64;
    let a = Node::all_access(4096);
    let b = Node::all_access(N as usize * 128);
    a.ctx
        .set_soft_fault(SoftFault {
            srd_reorder: Duration::from_millis(3),
            seed: 42,
            ..SoftFault::default()
        })
        .unwrap();
    let (qa, qb, to) = srd_link(&a, &b, 9, 7);
    for i in 0..N {
        b.recv(&qb, i, i as usize * 128, 128);
    }
    for i in 0..N {
        a.try_post(&qa, i, SendOp::SendWithImm(i as u32), 0, 8, Some(to.dest()))
            .unwrap();
    }
    let mut sent = HashSet::new();
    let mut got = Vec::new();
    for _ in 0..N {
        let s = wait_wc(&a.scq, "send");
        assert_eq!(s.status, WcStatus::Success);
        assert!(sent.insert(s.wr_id), "send {} completed twice", s.wr_id);
        let r = wait_wc(&b.rcq, "recv");
        assert_eq!(r.status, WcStatus::Success);
        got.push(r.imm_data);
    }
    assert_empty(&b.rcq, "a duplicate");
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (0..N as u32).collect::<Vec<_>>(),
        "each exactly once"
    );
    assert_ne!(got, sorted, "the device reordered nothing");
}

#[test]
fn srd_sends_to_lost_peers_or_absent_queue_pairs_complete_in_error() {
    let a = Node::all_access(4096);
    let qa = srd_qp(&a, 3, 7, 1);
    // A queue pair number that does not exist at a live peer.
    let b = Node::all_access(4096);
    let qb = srd_qp(&b, 3, 0, 1);
    let nowhere = a.ud_target(b.gid(), qb.qp_num() + 1000, 3);
    assert_eq!(
        a.ud_send(&qa, &nowhere, 1, SendOp::Send, 0, 8).status,
        WcStatus::RetryExcErr
    );
    // A send waiting for a receive (retried for ever) when the peer's context closes.
    let to = a.ud_target(b.gid(), qb.qp_num(), 3);
    a.try_post(&qa, 2, SendOp::Send, 0, 8, Some(to.dest()))
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let gone = b.gid();
    drop(qb);
    drop(b);
    let c = wait_wc(&a.scq, "send to a lost peer");
    assert_eq!((c.wr_id, c.status), (2, WcStatus::RetryExcErr));
    // A peer that is gone already.
    let gone_to = a.ud_target(gone, 1, 3);
    assert_eq!(
        a.ud_send(&qa, &gone_to, 3, SendOp::Send, 0, 8).status,
        WcStatus::RetryExcErr
    );
    // The queue pair stays usable for the others.
    assert_eq!(qa.state(), QpState::Rts);
    let c2 = Node::all_access(4096);
    let qc = srd_qp(&c2, 3, 0, 1);
    c2.recv(&qc, 1, 0, 128);
    let to_c = a.ud_target(c2.gid(), qc.qp_num(), 3);
    assert_eq!(
        a.ud_send(&qa, &to_c, 4, SendOp::Send, 0, 8).status,
        WcStatus::Success
    );
}

/// A signaled send `10 + i` of `sg` to `to`.
fn send_wr<'a>(i: usize, sg: &'a [Sge], to: &'a UdTarget) -> SendWr<'a> {
    SendWr {
        wr_id: 10 + i as u64,
        sg_list: sg,
        op: SendOp::Send,
        send_flags: SendFlags::SIGNALED,
        ud: Some(to.dest()),
    }
}

/// A batch of SRD sends (`post_send_batch`): each arrives once, whole, and completes;
/// a refused one stops the batch there (the ones before it are posted, the rest not).
#[test]
fn srd_batches_arrive_whole_and_stop_at_a_refusal() {
    let a = Node::all_access(6 * SRD_MTU);
    let b = Node::all_access(6 * (SRD_MTU + 40));
    let (qa, qb, to) = srd_link(&a, &b, 1, 0);
    for i in 0..6 {
        b.recv(&qb, i as u64, i * (SRD_MTU + 40), SRD_MTU + 40);
        a.buf.write(i * SRD_MTU, &pattern(SRD_MTU, i as u8));
    }
    let sges: Vec<Sge> = (0..6).map(|i| a.sge(i * SRD_MTU, SRD_MTU)).collect();
    let batch: Vec<SendWr> = (0..4).map(|i| send_wr(i, &sges[i..=i], &to)).collect();
    // SAFETY: the buffers are registered and live for the test.
    unsafe { qa.post_send_batch(&batch) }.unwrap();
    let mut done: Vec<u64> = (0..4)
        .map(|_| wait_wc(&a.scq, "batched send").wr_id)
        .collect();
    done.sort_unstable();
    assert_eq!(done, [10, 11, 12, 13]);
    for _ in 0..4 {
        let r = wait_wc(&b.rcq, "batched datagram");
        assert_eq!(r.status, WcStatus::Success);
        let at = r.wr_id as usize * (SRD_MTU + 40) + 40;
        assert_eq!(b.buf.read(at, SRD_MTU), pattern(SRD_MTU, r.wr_id as u8));
    }
    // The second of three is over the MTU: refused, the third not posted.
    let too_long = [a.sge(0, SRD_MTU + 1)];
    let batch = [
        send_wr(4, &sges[4..=4], &to),
        send_wr(5, &too_long, &to),
        send_wr(5, &sges[5..=5], &to),
    ];
    // SAFETY: as above.
    let (i, e) = unsafe { qa.post_send_batch(&batch) }.unwrap_err();
    assert_eq!((i, e.code()), (1, ofi_core::Errno::EINVAL));
    assert_eq!(wait_wc(&a.scq, "the one before").wr_id, 14);
    assert_eq!(wait_wc(&b.rcq, "its datagram").wr_id, 4);
    assert_empty(&a.scq, "nothing after the refusal");
    assert_empty(&b.rcq, "nothing after the refusal");
}
