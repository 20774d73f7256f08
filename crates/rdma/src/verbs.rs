//! The verbs vocabulary: the enums and bit sets of rdma-core's `<infiniband/verbs.h>`
//! with the same numeric values, the GID, and the attribute structures the interface
//! takes and returns.
//!
//! Invariants: every `#[repr(u32)]` enum here has the value of the rdma-core constant of
//! the same name (the layout test compiles a C probe that prints them and compares);
//! conversions from raw numbers (`from_raw`) never panic and map unknown values to
//! `None` (or, for completion statuses, to [`WcStatus::GeneralErr`]).

use bitflags::bitflags;
use std::fmt;

/// Declares a `#[repr(u32)]` enum with explicit values and a checked `from_raw`.
macro_rules! raw_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $n:expr),* $(,)? }) => {
        $(#[$m])*
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $v = $n),* }
        impl $name {
            /// The value for a raw number, `None` when it names no variant.
            pub fn from_raw(v: u32) -> Option<$name> {
                match v { $(x if x == $n => Some($name::$v),)* _ => None }
            }
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v),*];
        }
    };
}

raw_enum!(
    /// The status of a work completion (`enum ibv_wc_status`).
    WcStatus {
        /// `IBV_WC_SUCCESS`
        Success = 0,
        /// `IBV_WC_LOC_LEN_ERR`: a receive buffer too small, or a message over the limit.
        LocLenErr = 1,
        /// `IBV_WC_LOC_QP_OP_ERR`
        LocQpOpErr = 2,
        /// `IBV_WC_LOC_EEC_OP_ERR`
        LocEecOpErr = 3,
        /// `IBV_WC_LOC_PROT_ERR`: a local buffer not covered by a memory region with the
        /// right key, protection domain or access.
        LocProtErr = 4,
        /// `IBV_WC_WR_FLUSH_ERR`: flushed because the queue pair entered the error state.
        WrFlushErr = 5,
        /// `IBV_WC_MW_BIND_ERR`
        MwBindErr = 6,
        /// `IBV_WC_BAD_RESP_ERR`
        BadRespErr = 7,
        /// `IBV_WC_LOC_ACCESS_ERR`
        LocAccessErr = 8,
        /// `IBV_WC_REM_INV_REQ_ERR`: the responder found the request invalid (too long
        /// for the receive buffer, a misaligned atomic…).
        RemInvReqErr = 9,
        /// `IBV_WC_REM_ACCESS_ERR`: bad rkey, out of bounds, or no remote access.
        RemAccessErr = 10,
        /// `IBV_WC_REM_OP_ERR`
        RemOpErr = 11,
        /// `IBV_WC_RETRY_EXC_ERR`: the responder did not answer (lost peer).
        RetryExcErr = 12,
        /// `IBV_WC_RNR_RETRY_EXC_ERR`: receiver not ready more often than `rnr_retry`.
        RnrRetryExcErr = 13,
        /// `IBV_WC_LOC_RDD_VIOL_ERR`
        LocRddViolErr = 14,
        /// `IBV_WC_REM_INV_RD_REQ_ERR`
        RemInvRdReqErr = 15,
        /// `IBV_WC_REM_ABORT_ERR`
        RemAbortErr = 16,
        /// `IBV_WC_INV_EECN_ERR`
        InvEecnErr = 17,
        /// `IBV_WC_INV_EEC_STATE_ERR`
        InvEecStateErr = 18,
        /// `IBV_WC_FATAL_ERR`
        FatalErr = 19,
        /// `IBV_WC_RESP_TIMEOUT_ERR`
        RespTimeoutErr = 20,
        /// `IBV_WC_GENERAL_ERR`
        GeneralErr = 21,
        /// `IBV_WC_TM_ERR`
        TmErr = 22,
        /// `IBV_WC_TM_RNDV_INCOMPLETE`
        TmRndvIncomplete = 23,
    }
);

raw_enum!(
    /// The operation a work completion reports (`enum ibv_wc_opcode`).
    WcOpcode {
        /// `IBV_WC_SEND`
        Send = 0,
        /// `IBV_WC_RDMA_WRITE`
        RdmaWrite = 1,
        /// `IBV_WC_RDMA_READ`
        RdmaRead = 2,
        /// `IBV_WC_COMP_SWAP`
        CompSwap = 3,
        /// `IBV_WC_FETCH_ADD`
        FetchAdd = 4,
        /// `IBV_WC_BIND_MW`
        BindMw = 5,
        /// `IBV_WC_LOCAL_INV`
        LocalInv = 6,
        /// `IBV_WC_TSO`
        Tso = 7,
        /// `IBV_WC_RECV`
        Recv = 128,
        /// `IBV_WC_RECV_RDMA_WITH_IMM`
        RecvRdmaWithImm = 129,
    }
);

raw_enum!(
    /// The operation of a send work request (`enum ibv_wr_opcode`).
    WrOpcode {
        /// `IBV_WR_RDMA_WRITE`
        RdmaWrite = 0,
        /// `IBV_WR_RDMA_WRITE_WITH_IMM`
        RdmaWriteWithImm = 1,
        /// `IBV_WR_SEND`
        Send = 2,
        /// `IBV_WR_SEND_WITH_IMM`
        SendWithImm = 3,
        /// `IBV_WR_RDMA_READ`
        RdmaRead = 4,
        /// `IBV_WR_ATOMIC_CMP_AND_SWP`
        AtomicCmpAndSwp = 5,
        /// `IBV_WR_ATOMIC_FETCH_AND_ADD`
        AtomicFetchAndAdd = 6,
    }
);

raw_enum!(
    /// Queue pair states (`enum ibv_qp_state`).
    QpState {
        /// `IBV_QPS_RESET`
        Reset = 0,
        /// `IBV_QPS_INIT`
        Init = 1,
        /// `IBV_QPS_RTR`: ready to receive.
        Rtr = 2,
        /// `IBV_QPS_RTS`: ready to send.
        Rts = 3,
        /// `IBV_QPS_SQD`
        Sqd = 4,
        /// `IBV_QPS_SQE`
        Sqe = 5,
        /// `IBV_QPS_ERR`
        Err = 6,
    }
);

raw_enum!(
    /// Queue pair transport types (`enum ibv_qp_type`; RC and UD are offered, and SRD on
    /// the software device).
    QpType {
        /// `IBV_QPT_RC`: reliable connected.
        Rc = 2,
        /// `IBV_QPT_UC`
        Uc = 3,
        /// `IBV_QPT_UD`: unreliable datagram.
        Ud = 4,
        /// `IBV_QPT_DRIVER`: EFA's scalable reliable datagram (SRD) — addressed like UD,
        /// but each datagram the device accepted is delivered once (or its send completes
        /// in error), in any order, receiver-not-ready retried by the device. On hardware
        /// it is created by libefa (`efadv_create_qp_ex`); the software device offers it
        /// directly.
        Srd = 0xff,
    }
);

raw_enum!(
    /// Path MTU (`enum ibv_mtu`).
    Mtu {
        /// `IBV_MTU_256`
        Mtu256 = 1,
        /// `IBV_MTU_512`
        Mtu512 = 2,
        /// `IBV_MTU_1024`
        Mtu1024 = 3,
        /// `IBV_MTU_2048`
        Mtu2048 = 4,
        /// `IBV_MTU_4096`
        Mtu4096 = 5,
    }
);

impl Mtu {
    /// The MTU in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
}

raw_enum!(
    /// Logical port states (`enum ibv_port_state`).
    PortState {
        /// `IBV_PORT_NOP`
        Nop = 0,
        /// `IBV_PORT_DOWN`
        Down = 1,
        /// `IBV_PORT_INIT`
        Init = 2,
        /// `IBV_PORT_ARMED`
        Armed = 3,
        /// `IBV_PORT_ACTIVE`
        Active = 4,
        /// `IBV_PORT_ACTIVE_DEFER`
        ActiveDefer = 5,
    }
);

raw_enum!(
    /// Asynchronous event types (`enum ibv_event_type`).
    EventType {
        /// `IBV_EVENT_CQ_ERR`: a completion queue overran.
        CqErr = 0,
        /// `IBV_EVENT_QP_FATAL`: a queue pair entered the error state by itself (the
        /// software device also reports a lost peer this way).
        QpFatal = 1,
        /// `IBV_EVENT_QP_REQ_ERR`
        QpReqErr = 2,
        /// `IBV_EVENT_QP_ACCESS_ERR`: a remote access violation moved the responder's
        /// queue pair to the error state.
        QpAccessErr = 3,
        /// `IBV_EVENT_COMM_EST`
        CommEst = 4,
        /// `IBV_EVENT_SQ_DRAINED`
        SqDrained = 5,
        /// `IBV_EVENT_PATH_MIG`
        PathMig = 6,
        /// `IBV_EVENT_PATH_MIG_ERR`
        PathMigErr = 7,
        /// `IBV_EVENT_DEVICE_FATAL`
        DeviceFatal = 8,
        /// `IBV_EVENT_PORT_ACTIVE`
        PortActive = 9,
        /// `IBV_EVENT_PORT_ERR`
        PortErr = 10,
        /// `IBV_EVENT_LID_CHANGE`
        LidChange = 11,
        /// `IBV_EVENT_PKEY_CHANGE`
        PkeyChange = 12,
        /// `IBV_EVENT_SM_CHANGE`
        SmChange = 13,
        /// `IBV_EVENT_SRQ_ERR`
        SrqErr = 14,
        /// `IBV_EVENT_SRQ_LIMIT_REACHED`
        SrqLimitReached = 15,
        /// `IBV_EVENT_QP_LAST_WQE_REACHED`
        QpLastWqeReached = 16,
        /// `IBV_EVENT_CLIENT_REREGISTER`
        ClientReregister = 17,
        /// `IBV_EVENT_GID_CHANGE`
        GidChange = 18,
        /// `IBV_EVENT_WQ_FATAL`
        WqFatal = 19,
    }
);

bitflags! {
    /// Memory region access (`enum ibv_access_flags`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Access: u32 {
        /// `IBV_ACCESS_LOCAL_WRITE`: the device may write (receives, read results).
        const LOCAL_WRITE = 1;
        /// `IBV_ACCESS_REMOTE_WRITE` (needs `LOCAL_WRITE`).
        const REMOTE_WRITE = 2;
        /// `IBV_ACCESS_REMOTE_READ`
        const REMOTE_READ = 4;
        /// `IBV_ACCESS_REMOTE_ATOMIC` (needs `LOCAL_WRITE`).
        const REMOTE_ATOMIC = 8;
    }
}

bitflags! {
    /// Send work request flags (`enum ibv_send_flags`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct SendFlags: u32 {
        /// `IBV_SEND_FENCE`
        const FENCE = 1;
        /// `IBV_SEND_SIGNALED`: a completion on success too.
        const SIGNALED = 2;
        /// `IBV_SEND_SOLICITED`
        const SOLICITED = 4;
        /// `IBV_SEND_INLINE`: the data is copied at post time; no lkey needed.
        const INLINE = 8;
    }
}

bitflags! {
    /// Work completion flags (`enum ibv_wc_flags`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct WcFlags: u32 {
        /// `IBV_WC_GRH`: the first 40 bytes of the receive buffer hold a GRH.
        const GRH = 1;
        /// `IBV_WC_WITH_IMM`: `imm_data` is valid.
        const WITH_IMM = 2;
    }
}

bitflags! {
    /// Which fields of [`QpAttr`] a modify applies (`enum ibv_qp_attr_mask`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct QpAttrMask: u32 {
        /// `IBV_QP_STATE`
        const STATE = 1;
        /// `IBV_QP_CUR_STATE`
        const CUR_STATE = 1 << 1;
        /// `IBV_QP_ACCESS_FLAGS`
        const ACCESS_FLAGS = 1 << 3;
        /// `IBV_QP_PKEY_INDEX`
        const PKEY_INDEX = 1 << 4;
        /// `IBV_QP_PORT`
        const PORT = 1 << 5;
        /// `IBV_QP_QKEY`
        const QKEY = 1 << 6;
        /// `IBV_QP_AV`
        const AV = 1 << 7;
        /// `IBV_QP_PATH_MTU`
        const PATH_MTU = 1 << 8;
        /// `IBV_QP_TIMEOUT`
        const TIMEOUT = 1 << 9;
        /// `IBV_QP_RETRY_CNT`
        const RETRY_CNT = 1 << 10;
        /// `IBV_QP_RNR_RETRY`
        const RNR_RETRY = 1 << 11;
        /// `IBV_QP_RQ_PSN`
        const RQ_PSN = 1 << 12;
        /// `IBV_QP_MAX_QP_RD_ATOMIC`
        const MAX_QP_RD_ATOMIC = 1 << 13;
        /// `IBV_QP_MIN_RNR_TIMER`
        const MIN_RNR_TIMER = 1 << 15;
        /// `IBV_QP_SQ_PSN`
        const SQ_PSN = 1 << 16;
        /// `IBV_QP_MAX_DEST_RD_ATOMIC`
        const MAX_DEST_RD_ATOMIC = 1 << 17;
        /// `IBV_QP_DEST_QPN`
        const DEST_QPN = 1 << 20;
    }
}

impl QpAttrMask {
    /// The attributes a reliable-connected queue pair must be given to move from INIT
    /// to RTR (besides [`QpAttrMask::STATE`]): the path to the remote queue pair and
    /// the responder's resources.
    pub const RC_TO_RTR: QpAttrMask = QpAttrMask::AV
        .union(QpAttrMask::PATH_MTU)
        .union(QpAttrMask::DEST_QPN)
        .union(QpAttrMask::RQ_PSN)
        .union(QpAttrMask::MAX_DEST_RD_ATOMIC)
        .union(QpAttrMask::MIN_RNR_TIMER);
    /// The attributes a reliable-connected queue pair must be given to move from RTR
    /// to RTS (besides [`QpAttrMask::STATE`]): the requester's timers, retries and
    /// resources.
    pub const RC_TO_RTS: QpAttrMask = QpAttrMask::SQ_PSN
        .union(QpAttrMask::TIMEOUT)
        .union(QpAttrMask::RETRY_CNT)
        .union(QpAttrMask::RNR_RETRY)
        .union(QpAttrMask::MAX_QP_RD_ATOMIC);
}

/// A 128-bit global identifier (`union ibv_gid`), in network byte order.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Gid {
    /// Eight groups of four hex digits separated by `:`, as `ibv_devinfo` prints GIDs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

/// A scatter/gather element (`struct ibv_sge`, same layout): `length` bytes at `addr`
/// inside a memory region whose local key is `lkey`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sge {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The local key of the memory region covering the range.
    pub lkey: u32,
}

/// What the device supports (a subset of `struct ibv_device_attr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAttr {
    /// Firmware version text.
    pub fw_ver: String,
    /// Node GUID (network byte order as a number).
    pub node_guid: u64,
    /// Largest memory region in bytes.
    pub max_mr_size: u64,
    /// Most queue pairs.
    pub max_qp: u32,
    /// Most outstanding work requests per queue.
    pub max_qp_wr: u32,
    /// Most scatter/gather elements per work request.
    pub max_sge: u32,
    /// Most completion queues.
    pub max_cq: u32,
    /// Most entries per completion queue.
    pub max_cqe: u32,
    /// Most memory regions.
    pub max_mr: u32,
    /// Most protection domains.
    pub max_pd: u32,
    /// Most outstanding RDMA reads/atomics a queue pair may start.
    pub max_qp_rd_atom: u32,
    /// Most shared receive queues.
    pub max_srq: u32,
    /// Most work requests per shared receive queue.
    pub max_srq_wr: u32,
    /// Number of physical ports.
    pub phys_port_cnt: u8,
    /// Whether atomics are offered (`IBV_ATOMIC_HCA` when true).
    pub atomics: bool,
}

/// A port's attributes (a subset of `struct ibv_port_attr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortAttr {
    /// Logical state.
    pub state: PortState,
    /// Largest MTU the port supports.
    pub max_mtu: Mtu,
    /// MTU in use.
    pub active_mtu: Mtu,
    /// Size of the GID table.
    pub gid_tbl_len: i32,
    /// Largest message size.
    pub max_msg_sz: u32,
    /// Local identifier (0 on RoCE and on the software device).
    pub lid: u16,
    /// Link layer (`IBV_LINK_LAYER_*`: 1 InfiniBand, 2 Ethernet).
    pub link_layer: u8,
}

/// Capacities of a queue pair (`struct ibv_qp_cap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth (ignored with a shared receive queue).
    pub max_recv_wr: u32,
    /// Scatter/gather elements per send.
    pub max_send_sge: u32,
    /// Scatter/gather elements per receive.
    pub max_recv_sge: u32,
    /// Bytes a send may carry inline.
    pub max_inline_data: u32,
}

/// Address vector of a connected queue pair or an address handle (the GID-routed part of
/// `struct ibv_ah_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AhAttr {
    /// Destination GID.
    pub dgid: Gid,
    /// Destination LID (0 when routed by GID).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Local port.
    pub port_num: u8,
    /// Index of the source GID in the port's table.
    pub sgid_index: u8,
}

/// Queue pair attributes for [`QueuePair::modify`](crate::QueuePair::modify) (the used
/// part of `struct ibv_qp_attr`); only fields named in the mask are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttr {
    /// Target state.
    pub qp_state: QpState,
    /// Path MTU (RC).
    pub path_mtu: Mtu,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Expected first receive sequence number (RC).
    pub rq_psn: u32,
    /// First send sequence number (RC).
    pub sq_psn: u32,
    /// Remote queue pair number (RC).
    pub dest_qp_num: u32,
    /// Remote access the queue pair allows as a responder.
    pub qp_access_flags: Access,
    /// Address of the remote port (RC).
    pub ah_attr: AhAttr,
    /// Partition key index.
    pub pkey_index: u16,
    /// Outstanding reads/atomics as responder.
    pub max_dest_rd_atomic: u8,
    /// Outstanding reads/atomics as requester.
    pub max_rd_atomic: u8,
    /// RNR NAK timer code the responder sends (1..=31; 0 means 655.36 ms).
    pub min_rnr_timer: u8,
    /// Local port.
    pub port_num: u8,
    /// Local ACK timeout exponent: 4.096 µs × 2^timeout (0 = infinite).
    pub timeout: u8,
    /// Transport retries before `RETRY_EXC_ERR`.
    pub retry_cnt: u8,
    /// RNR retries before `RNR_RETRY_EXC_ERR` (7 = infinite).
    pub rnr_retry: u8,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            qp_state: QpState::Reset,
            path_mtu: Mtu::Mtu1024,
            qkey: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qp_num: 0,
            qp_access_flags: Access::empty(),
            ah_attr: AhAttr::default(),
            pkey_index: 0,
            max_dest_rd_atomic: 0,
            max_rd_atomic: 0,
            min_rnr_timer: 0,
            port_num: 1,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
        }
    }
}

/// The remote side of a one-sided or atomic operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    /// Target virtual address.
    pub addr: u64,
    /// The target memory region's remote key.
    pub rkey: u32,
}

/// What a send work request does (the opcode with its operands).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// Two-sided send.
    Send,
    /// Send with 32-bit immediate data (host order here).
    SendWithImm(u32),
    /// RDMA write.
    RdmaWrite(Remote),
    /// RDMA write with immediate data; consumes a receive at the target.
    RdmaWriteWithImm(Remote, u32),
    /// RDMA read into the local scatter list.
    RdmaRead(Remote),
    /// 8-byte compare and swap; the original value lands in the 8-byte local buffer.
    AtomicCmpSwap {
        /// Target (8-byte aligned).
        remote: Remote,
        /// Expected value.
        compare: u64,
        /// New value if equal.
        swap: u64,
    },
    /// 8-byte fetch and add; the original value lands in the 8-byte local buffer.
    AtomicFetchAdd {
        /// Target (8-byte aligned).
        remote: Remote,
        /// Addend.
        add: u64,
    },
}

impl SendOp {
    /// The `ibv_wr_opcode` of this operation.
    pub fn opcode(&self) -> WrOpcode {
        match self {
            SendOp::Send => WrOpcode::Send,
            SendOp::SendWithImm(_) => WrOpcode::SendWithImm,
            SendOp::RdmaWrite(_) => WrOpcode::RdmaWrite,
            SendOp::RdmaWriteWithImm(..) => WrOpcode::RdmaWriteWithImm,
            SendOp::RdmaRead(_) => WrOpcode::RdmaRead,
            SendOp::AtomicCmpSwap { .. } => WrOpcode::AtomicCmpAndSwp,
            SendOp::AtomicFetchAdd { .. } => WrOpcode::AtomicFetchAndAdd,
        }
    }

    /// The completion opcode a send queue reports for it.
    pub fn wc_opcode(&self) -> WcOpcode {
        match self {
            SendOp::Send | SendOp::SendWithImm(_) => WcOpcode::Send,
            SendOp::RdmaWrite(_) | SendOp::RdmaWriteWithImm(..) => WcOpcode::RdmaWrite,
            SendOp::RdmaRead(_) => WcOpcode::RdmaRead,
            SendOp::AtomicCmpSwap { .. } => WcOpcode::CompSwap,
            SendOp::AtomicFetchAdd { .. } => WcOpcode::FetchAdd,
        }
    }
}

/// The destination of a UD send.
#[derive(Clone, Copy, Debug)]
pub struct UdDest<'a> {
    /// Address handle of the remote port.
    pub ah: &'a crate::AddressHandle,
    /// Remote queue pair number.
    pub remote_qpn: u32,
    /// Remote Q_Key (must equal the remote queue pair's).
    pub remote_qkey: u32,
}

/// A send work request (`struct ibv_send_wr`, one request: no chain).
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Local buffers (for `INLINE`, read at post time and keys ignored).
    pub sg_list: &'a [Sge],
    /// What to do.
    pub op: SendOp,
    /// `SIGNALED`, `INLINE`, `SOLICITED`, `FENCE`.
    pub send_flags: SendFlags,
    /// Destination, for UD queue pairs only.
    pub ud: Option<UdDest<'a>>,
}

/// A receive work request (`struct ibv_recv_wr`, one request).
#[derive(Clone, Copy, Debug)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Buffers the message is scattered into, in order.
    pub sg_list: &'a [Sge],
}

/// A work completion (the fields of `struct ibv_wc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The work request's `wr_id`.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// Operation (valid for every status on the software device; rdma-core only
    /// promises it on success).
    pub opcode: WcOpcode,
    /// Vendor error (0 on the software device).
    pub vendor_err: u32,
    /// Bytes received (receives), or transferred.
    pub byte_len: u32,
    /// Immediate data in host order, valid with [`WcFlags::WITH_IMM`].
    pub imm_data: u32,
    /// Local queue pair number.
    pub qp_num: u32,
    /// Source queue pair (UD receives).
    pub src_qp: u32,
    /// `GRH`, `WITH_IMM`.
    pub wc_flags: WcFlags,
    /// Partition key index.
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// Destination LID path bits.
    pub dlid_path_bits: u8,
    /// The sender's GID where the device names it in the completion rather than in a
    /// GRH: an EFA extended completion queue's receives from a sender the receiver has
    /// no address handle for (`efadv_wc_read_sgid`). `None` everywhere else; a sender
    /// the receiver has an address handle for is named by that handle's number in
    /// `slid` on EFA.
    pub sgid: Option<Gid>,
}

impl WorkCompletion {
    /// A completion with zeroed details.
    pub fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp_num: u32) -> Self {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            vendor_err: 0,
            byte_len: 0,
            imm_data: 0,
            qp_num,
            src_qp: 0,
            wc_flags: WcFlags::empty(),
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
            sgid: None,
        }
    }
}

/// What an asynchronous event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventElement {
    /// A queue pair (by number).
    Qp(u32),
    /// A completion queue (by its user context).
    Cq(u64),
    /// A shared receive queue (by number).
    Srq(u32),
    /// A port.
    Port(u8),
    /// The whole device.
    Device,
}

/// An asynchronous event (`struct ibv_async_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    /// What happened.
    pub event_type: EventType,
    /// To what.
    pub element: EventElement,
}

/// Bytes of the global route header at the start of a UD receive buffer.
pub const GRH_LEN: usize = 40;
