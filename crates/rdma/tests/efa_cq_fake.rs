//! EFA's extended completion queues (`Context::create_efa_cq`, `sys::cq_ex`) driven
//! through stand-ins for libibverbs and libefa (tests/fake, compiled here against the
//! installed headers and loaded through `OFI_RDMA_IBVERBS_LIB` and `OFI_EFA_LIB`): the
//! queue is created with the standard fields and the sender's GID, polled in sequences
//! of `start_poll` / `next_poll` / `end_poll` never longer than asked for, and each
//! completion's fields come through the reads — the sender by GID where the
//! completion has one, else by address handle number (`slid`), immediate data in host
//! order, only `vendor_err` for a failed one; a batch of sends is one `post_send` of a
//! linked list. What the stand-ins cannot show is a real
//! device's answers. Skipped (with a line) without a C compiler or the headers. The
//! only test of this binary: the libraries are looked up once per process.

mod fake;

use std::ffi::{c_char, CStr};

use ofi_rdma::*;

#[test]
fn an_efa_completion_queue_is_polled_through_its_reads() {
    let dir = fake::dir("efa-cq-fake");
    let Some(verbs) = fake::build("libibverbs_fake", "infiniband/verbs.h", &dir) else {
        return;
    };
    let Some(efa) = fake::build("libefa_fake", "infiniband/efadv.h", &dir) else {
        return;
    };
    std::env::set_var("OFI_RDMA_IBVERBS_LIB", &verbs);
    std::env::set_var("OFI_EFA_LIB", &efa);
    // SAFETY: the stand-in's constructors do nothing; the log function has this type.
    let lib = unsafe { libloading::Library::new(&efa) }.expect("load the libefa stand-in");
    // SAFETY: as above.
    let log_fn =
        *unsafe { lib.get::<unsafe extern "C" fn() -> *const c_char>(b"fake_efa_log\0") }.unwrap();
    let log = || -> Vec<String> {
        // SAFETY: the stand-in's NUL-terminated log buffer.
        let text = unsafe { CStr::from_ptr(log_fn()) }
            .to_string_lossy()
            .into_owned();
        text.lines().map(str::to_owned).collect()
    };

    // SAFETY: as above.
    let verbs_lib = unsafe { libloading::Library::new(&verbs) }.expect("load the stand-in");
    // SAFETY: as above.
    let verbs_log_fn =
        *unsafe { verbs_lib.get::<unsafe extern "C" fn() -> *const c_char>(b"fake_verbs_log\0") }
            .unwrap();
    let verbs_log = || -> Vec<String> {
        // SAFETY: the stand-in's NUL-terminated log buffer.
        let text = unsafe { CStr::from_ptr(verbs_log_fn()) }
            .to_string_lossy()
            .into_owned();
        text.lines().map(str::to_owned).collect()
    };
    let ctx = device_list(DeviceKind::RdmaCore).expect("the stand-in's device")[0]
        .open()
        .unwrap();
    let cq = ctx.create_efa_cq(64, 9, None).unwrap();
    assert_eq!(cq.user(), 9);
    // IBV_WC_STANDARD_FLAGS and EFADV_WC_EX_WITH_SGID; the EFA attributes' size.
    assert_eq!(log(), ["create_cq wc_flags=7f efa_wc_flags=1 inlen=16"]);

    let mut wc = [WorkCompletion::new(0, WcStatus::GeneralErr, WcOpcode::Send, 0); 2];
    assert_eq!(cq.poll(&mut wc).unwrap(), 2, "as many as asked for");
    let by_gid = wc[0];
    assert_eq!(
        (by_gid.wr_id, by_gid.status, by_gid.opcode, by_gid.byte_len),
        (11, WcStatus::Success, WcOpcode::Recv, 100)
    );
    assert_eq!((by_gid.qp_num, by_gid.src_qp), (5, 77));
    assert_eq!(by_gid.sgid, Some(Gid([0xab; 16])));
    let by_ahn = wc[1];
    assert_eq!((by_ahn.wr_id, by_ahn.src_qp, by_ahn.slid), (12, 78, 42));
    assert_eq!(
        by_ahn.sgid, None,
        "no GID: the address handle number names it"
    );
    assert!(by_ahn.wc_flags.contains(WcFlags::WITH_IMM));
    assert_eq!(by_ahn.imm_data, 0x0102_0304, "host order");

    assert_eq!(cq.poll(&mut wc).unwrap(), 1);
    let failed = wc[0];
    assert_eq!(
        (failed.wr_id, failed.status, failed.vendor_err),
        (13, WcStatus::GeneralErr, 7)
    );
    assert_eq!(
        (failed.byte_len, failed.sgid),
        (0, None),
        "nothing else read"
    );
    assert_eq!(cq.poll(&mut wc).unwrap(), 0);
    assert_eq!(cq.poll(&mut []).unwrap(), 0, "an empty batch polls nothing");
    // Every sequence that started is ended, once; an empty start is not.
    assert_eq!(
        log()[1..],
        [
            "start",
            "next",
            "end",
            "start",
            "next empty",
            "end",
            "start empty"
        ]
    );

    let pd = ctx.alloc_pd().unwrap();
    let ah = pd
        .create_ah(&AhAttr {
            dgid: Gid([0x11; 16]),
            port_num: 1,
            ..AhAttr::default()
        })
        .unwrap();
    assert_eq!(ah.efa_ahn().unwrap(), 42);

    // A batch of sends is one ibv_post_send of a linked list; a refusal names its index.
    let qp = pd
        .create_qp(&QpInitAttr {
            qp_type: QpType::Ud,
            send_cq: &cq,
            recv_cq: &cq,
            srq: None,
            cap: QpCap {
                max_send_wr: 8,
                max_recv_wr: 8,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            sq_sig_all: true,
        })
        .unwrap();
    let send = |wr_id: u64| SendWr {
        wr_id,
        sg_list: &[],
        op: SendOp::Send,
        send_flags: SendFlags::SIGNALED,
        ud: Some(UdDest {
            ah: &ah,
            remote_qpn: 7,
            remote_qkey: 5,
        }),
    };
    // SAFETY: no buffers (the stand-in reads nothing).
    unsafe { qp.post_send_batch(&[send(1), send(2), send(3)]) }.unwrap();
    assert!(verbs_log().contains(&"post_send n=3".to_string()));
    // SAFETY: as above.
    let (at, e) = unsafe { qp.post_send_batch(&[send(4), send(0xbad), send(6)]) }.unwrap_err();
    assert_eq!((at, e.code()), (1, ofi_core::Errno::EINVAL));
    drop(qp);
    // A plain queue does not go through libefa.
    let plain = ctx.create_cq(64, 1, None).unwrap();
    assert_eq!(plain.poll(&mut wc).unwrap(), 0);
    assert_eq!(log().len(), 8);
    drop((ah, pd, plain, cq, ctx));
    let _ = std::fs::remove_dir_all(&dir);
}
