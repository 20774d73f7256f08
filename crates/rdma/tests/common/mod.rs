//! Shared by the software-device tests: a node (context, domain, queues, a registered
//! buffer), RC/UD connection helpers, bounded completion waits, raw buffer access.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use ofi_rdma::*;

/// Upper bound of every wait in these tests.
pub const BOUND: Duration = Duration::from_secs(10);

/// Opens the software device.
pub fn soft_context() -> Context {
    device_list(DeviceKind::Soft).unwrap()[0].open().unwrap()
}

/// A heap buffer the device may write concurrently: only accessed through raw pointers.
pub struct Buf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is plain heap memory accessed through raw copies only.
unsafe impl Send for Buf {}
// SAFETY: as above: no reference into it is ever handed out.
unsafe impl Sync for Buf {}

impl Buf {
    pub fn new(len: usize) -> Buf {
        let b = vec![0u8; len].into_boxed_slice();
        Buf {
            ptr: Box::into_raw(b).cast(),
            len,
        }
    }
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    pub fn len(&self) -> usize {
        self.len
    }
    /// Copies bytes in at `off`.
    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len);
        // SAFETY: inside our allocation; raw copy.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) };
    }
    /// Copies `len` bytes out from `off`.
    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off + len <= self.len);
        let mut v = vec![0u8; len];
        // SAFETY: inside our allocation; raw copy.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), v.as_mut_ptr(), len) };
        v
    }
    pub fn u64_at(&self, off: usize) -> u64 {
        u64::from_le_bytes(self.read(off, 8).try_into().unwrap())
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this length.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

/// A context with one protection domain, one CQ for sends and one for receives, and a
/// registered buffer (declared last: dropped after the region).
pub struct Node {
    pub mr: MemoryRegion,
    pub scq: CompletionQueue,
    pub rcq: CompletionQueue,
    pub pd: ProtectionDomain,
    pub ctx: Context,
    pub buf: Buf,
}

impl Node {
    pub fn new(len: usize, access: Access) -> Node {
        let ctx = soft_context();
        let pd = ctx.alloc_pd().unwrap();
        let scq = ctx.create_cq(256, 1, None).unwrap();
        let rcq = ctx.create_cq(256, 2, None).unwrap();
        let buf = Buf::new(len);
        // SAFETY: the buffer outlives the region (field order).
        let mr = unsafe { pd.reg_mr(buf.ptr(), len, access) }.unwrap();
        Node {
            mr,
            scq,
            rcq,
            pd,
            ctx,
            buf,
        }
    }

    pub fn all_access(len: usize) -> Node {
        Node::new(
            len,
            Access::LOCAL_WRITE
                | Access::REMOTE_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_ATOMIC,
        )
    }

    pub fn gid(&self) -> Gid {
        self.ctx.query_gid(1, 0).unwrap()
    }

    pub fn sge(&self, off: usize, len: usize) -> Sge {
        Sge {
            addr: self.buf.addr() + off as u64,
            length: len as u32,
            lkey: self.mr.lkey(),
        }
    }

    /// A queue pair of `qp_type` on this node's queues (64 deep, 4 elements, 64 inline).
    pub fn qp(&self, qp_type: QpType) -> QueuePair {
        self.pd
            .create_qp(&QpInitAttr {
                qp_type,
                send_cq: &self.scq,
                recv_cq: &self.rcq,
                srq: None,
                cap: QpCap {
                    max_send_wr: 64,
                    max_recv_wr: 64,
                    max_send_sge: 4,
                    max_recv_sge: 4,
                    max_inline_data: 64,
                },
                sq_sig_all: false,
            })
            .unwrap()
    }

    /// The remote address of byte `off` of this node's buffer, under its key (for a
    /// peer's RDMA or atomic operation).
    pub fn remote(&self, off: u64) -> Remote {
        Remote {
            addr: self.buf.addr() + off,
            rkey: self.mr.rkey(),
        }
    }

    /// Posts a receive of `len` bytes at `off`.
    pub fn recv(&self, qp: &QueuePair, wr_id: u64, off: usize, len: usize) {
        qp.post_recv(&RecvWr {
            wr_id,
            sg_list: &[self.sge(off, len)],
        })
        .unwrap();
    }

    /// Posts a signaled send work request over `[off, off+len)`.
    pub fn post(&self, qp: &QueuePair, wr_id: u64, op: SendOp, off: usize, len: usize) {
        self.try_post(qp, wr_id, op, off, len, None).unwrap();
    }

    /// Posts a signaled send work request over `[off, off+len)`, to `ud` on a UD or
    /// SRD queue pair, without waiting; the post's own error, if any.
    pub fn try_post(
        &self,
        qp: &QueuePair,
        wr_id: u64,
        op: SendOp,
        off: usize,
        len: usize,
        ud: Option<UdDest>,
    ) -> Result<(), ofi_core::Error> {
        // SAFETY: the range lies in the registered buffer.
        unsafe {
            post_sg(
                qp,
                wr_id,
                &[self.sge(off, len)],
                op,
                SendFlags::SIGNALED,
                ud,
            )
        }
    }
}

/// Posts a send work request of the scatter list `sg` with `op` and `flags` on `qp`,
/// to `ud` on a UD or SRD queue pair, without waiting; the post's own error, if any.
///
/// # Safety
///
/// Every element of `sg` names memory valid for as long as the device may read it:
/// until the work request completes, or only during this call with
/// [`SendFlags::INLINE`]. (A key that does not match fails the request, so memory
/// behind a wrong key is never read.)
pub unsafe fn post_sg(
    qp: &QueuePair,
    wr_id: u64,
    sg: &[Sge],
    op: SendOp,
    send_flags: SendFlags,
    ud: Option<UdDest>,
) -> Result<(), ofi_core::Error> {
    // SAFETY: the caller keeps every element of `sg` valid as long as it is read.
    unsafe {
        qp.post_send(&SendWr {
            wr_id,
            sg_list: sg,
            op,
            send_flags,
            ud,
        })
    }
}

/// Where UD sends of a test go.
pub struct UdTarget {
    pub ah: AddressHandle,
    pub qpn: u32,
    pub qkey: u32,
}

impl UdTarget {
    /// The work request's destination.
    pub fn dest(&self) -> UdDest<'_> {
        UdDest {
            ah: &self.ah,
            remote_qpn: self.qpn,
            remote_qkey: self.qkey,
        }
    }
}

impl Node {
    /// A UD target: the queue pair `qpn` of the context with `gid`.
    pub fn ud_target(&self, gid: Gid, qpn: u32, qkey: u32) -> UdTarget {
        let ah = self
            .pd
            .create_ah(&AhAttr {
                dgid: gid,
                port_num: 1,
                ..AhAttr::default()
            })
            .unwrap();
        UdTarget { ah, qpn, qkey }
    }

    /// Posts a signaled UD send of `[off, off + len)` to `to` and waits for its
    /// completion.
    pub fn ud_send(
        &self,
        qp: &QueuePair,
        to: &UdTarget,
        wr_id: u64,
        op: SendOp,
        off: usize,
        len: usize,
    ) -> WorkCompletion {
        self.try_post(qp, wr_id, op, off, len, Some(to.dest()))
            .unwrap();
        wait_wc(&self.scq, "ud send")
    }
}

/// A small RC queue pair (4 deep, 1 element) on the given queues.
pub fn small_rc_qp(
    pd: &ProtectionDomain,
    scq: &CompletionQueue,
    rcq: &CompletionQueue,
) -> QueuePair {
    pd.create_qp(&QpInitAttr {
        qp_type: QpType::Rc,
        send_cq: scq,
        recv_cq: rcq,
        srq: None,
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        sq_sig_all: false,
    })
    .unwrap()
}

/// Waits (bounded) for the next completion on `cq`.
pub fn wait_wc(cq: &CompletionQueue, what: &str) -> WorkCompletion {
    let deadline = Instant::now() + BOUND;
    let mut wc = [WorkCompletion::new(
        0,
        WcStatus::GeneralErr,
        WcOpcode::Send,
        0,
    )];
    loop {
        if cq.poll(&mut wc).unwrap() == 1 {
            return wc[0];
        }
        assert!(
            Instant::now() < deadline,
            "no completion for {what} within {BOUND:?}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Asserts no completion is queued on `cq` now.
pub fn assert_empty(cq: &CompletionQueue, what: &str) {
    let mut wc = [WorkCompletion::new(
        0,
        WcStatus::GeneralErr,
        WcOpcode::Send,
        0,
    )];
    let n = cq.poll(&mut wc).unwrap();
    assert_eq!(n, 0, "unexpected completion for {what}: {:?}", wc[0]);
}

/// Moves `qp` to `state`, setting no other attribute (mask `STATE` alone); the
/// modify's own error, if any.
pub fn set_state(qp: &QueuePair, state: QpState) -> Result<(), ofi_core::Error> {
    qp.modify(
        &QpAttr {
            qp_state: state,
            ..QpAttr::default()
        },
        QpAttrMask::STATE,
    )
}

/// RC attributes to INIT.
pub fn rc_init(qp: &QueuePair) {
    let a = QpAttr {
        qp_state: QpState::Init,
        qp_access_flags: Access::LOCAL_WRITE
            | Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC,
        ..QpAttr::default()
    };
    qp.modify(
        &a,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
    .unwrap();
}

/// RC INIT → RTR → RTS towards (`gid`, `qpn`).
pub fn rc_connect(qp: &QueuePair, gid: Gid, qpn: u32, rnr_retry: u8, min_rnr_timer: u8) {
    let a = QpAttr {
        qp_state: QpState::Rtr,
        path_mtu: Mtu::Mtu4096,
        dest_qp_num: qpn,
        ah_attr: AhAttr {
            dgid: gid,
            port_num: 1,
            ..AhAttr::default()
        },
        min_rnr_timer,
        max_dest_rd_atomic: 16,
        ..QpAttr::default()
    };
    qp.modify(&a, QpAttrMask::STATE | QpAttrMask::RC_TO_RTR)
        .unwrap();
    let a = QpAttr {
        qp_state: QpState::Rts,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry,
        max_rd_atomic: 16,
        ..QpAttr::default()
    };
    qp.modify(&a, QpAttrMask::STATE | QpAttrMask::RC_TO_RTS)
        .unwrap();
}

/// Two RC queue pairs of nodes `a` and `b` connected to each other.
pub fn rc_pair(a: &Node, b: &Node, rnr_retry: u8) -> (QueuePair, QueuePair) {
    let qa = a.qp(QpType::Rc);
    let qb = b.qp(QpType::Rc);
    rc_init(&qa);
    rc_init(&qb);
    rc_connect(&qa, b.gid(), qb.qp_num(), rnr_retry, 1);
    rc_connect(&qb, a.gid(), qa.qp_num(), rnr_retry, 1);
    (qa, qb)
}

/// Two nodes with 4 KiB buffers open to every access (see [`Node::all_access`]) and
/// an RC queue pair of each connected to the other (see [`rc_pair`]).
pub fn rc_nodes(rnr_retry: u8) -> (Node, Node, QueuePair, QueuePair) {
    let a = Node::all_access(4096);
    let b = Node::all_access(4096);
    let (qa, qb) = rc_pair(&a, &b, rnr_retry);
    (a, b, qa, qb)
}

/// Two nodes with `len`-byte buffers open to every access (see [`Node::all_access`])
/// and a UD queue pair of each, ready with `qkey_a` and `qkey_b` (see [`ud_ready`]).
pub fn ud_nodes(len: usize, qkey_a: u32, qkey_b: u32) -> (Node, Node, QueuePair, QueuePair) {
    let a = Node::all_access(len);
    let b = Node::all_access(len);
    let qa = a.qp(QpType::Ud);
    let qb = b.qp(QpType::Ud);
    ud_ready(&qa, qkey_a);
    ud_ready(&qb, qkey_b);
    (a, b, qa, qb)
}

/// One send of `send_len` bytes from the start of `a`'s buffer on `qa` into a receive
/// of `recv_len` bytes at the start of `b`'s buffer on `qb`, both with work request id
/// `wr_id`: the send's completion, then the receive's.
pub fn send_once(
    (a, qa): (&Node, &QueuePair),
    (b, qb): (&Node, &QueuePair),
    wr_id: u64,
    send_len: usize,
    recv_len: usize,
) -> (WorkCompletion, WorkCompletion) {
    b.recv(qb, wr_id, 0, recv_len);
    a.post(qa, wr_id, SendOp::Send, 0, send_len);
    (wait_wc(&a.scq, "send"), wait_wc(&b.rcq, "receive"))
}

/// UD queue pair through RESET → INIT → RTR → RTS with `qkey`.
pub fn ud_ready(qp: &QueuePair, qkey: u32) {
    let a = QpAttr {
        qp_state: QpState::Init,
        qkey,
        ..QpAttr::default()
    };
    qp.modify(
        &a,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY,
    )
    .unwrap();
    set_state(qp, QpState::Rtr).unwrap();
    qp.modify(
        &QpAttr {
            qp_state: QpState::Rts,
            ..QpAttr::default()
        },
        QpAttrMask::STATE | QpAttrMask::SQ_PSN,
    )
    .unwrap();
}

/// Whether `fd` is readable (`POLLIN`) within `wait` (`Duration::ZERO`: only looks);
/// panics if `poll` itself fails.
pub fn readable_within(fd: std::os::fd::RawFd, wait: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one pollfd on the stack.
    let n = unsafe { libc::poll(&mut p, 1, wait.as_millis() as i32) };
    assert!(n >= 0, "poll: {}", std::io::Error::last_os_error());
    n == 1
}

/// A byte pattern.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
