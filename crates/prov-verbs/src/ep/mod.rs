//! The active endpoint: one queue pair (RC for `FI_EP_MSG`, created at `fi_enable` on
//! the shared receive queue of a bound shared receive context if any; UD for
//! `FI_EP_DGRAM`, created at `fi_endpoint`, see [`ud`]), its device completion queue
//! (with a completion channel), and the operations in flight. A shared receive context
//! (`fi_srx_context`) is an endpoint with a shared receive queue and no queue pair: its
//! receive slots are taken by the completions of the endpoints bound to it (lock order:
//! an endpoint, then its shared receive context).
//!
//! # State
//!
//! `Mutex<EpState>` holds the binds, the connection state and two slot tables (transmit and
//! receive) naming each posted work request: its `wr_id` is the slot index (the top bit
//! set for receives). A slot keeps what the completion needs (context, flags, length,
//! buffer, counter) and any temporary registration of a buffer that lay outside every
//! registered region (deregistered when the slot is freed, after the completion).
//!
//! # Progress
//!
//! The endpoint is a progress source of the domain's engine: a round polls the device
//! completion queue and turns each work completion into a CQ entry or error entry
//! ([`crate::cq::wc_errno`]) and counter updates. Waiting arms the completion queue and
//! sleeps on the completion channel's fd (a completion that raced the arming is polled
//! into a stash first, and the waiter then polls instead of sleeping).
//!
//! Nothing here panics on application or peer input.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use ofi_core::abi::raw::CqTaggedEntry;
use ofi_core::attr::Info;
use ofi_core::cq::CqError;
use ofi_core::eq::EqErrorEntry;
use ofi_core::{Address, Errno, Error, OpFlags, Result};
use ofi_kit::ep::CounterKind;
use ofi_kit::progress::{FdInterest, Progress};
use ofi_rdma::{
    Access, AhAttr, CmEventKind, CmPeer, CompChannel, CompletionQueue, MemoryRegion, QpAttr,
    QpAttrMask, QpCap, QpInitAttr, QpState, QpType, QueuePair, Sge, SharedReceiveQueue, WcOpcode,
    WcStatus, WorkCompletion,
};

use crate::cm::lock;
use crate::domain::DomainShared;
use crate::NAME;

mod control;
mod post;
pub mod ud;

/// Largest inline send this provider asks a queue pair for.
pub const INLINE_MAX: usize = 256;
/// Work completions polled per round.
const ROUND: usize = 16;
/// The `wr_id` bit marking a receive.
const RX_BIT: u64 = 1 << 63;

/// A posted work request.
#[derive(Debug)]
pub(crate) struct Slot {
    ctx: usize,
    flags: u64,
    len: usize,
    buf: usize,
    /// Write a CQ entry on success (errors are always written).
    report: bool,
    cntr: CounterKind,
    /// Temporary registrations of this operation's buffers.
    _tmp: Vec<MemoryRegion>,
    /// The 8-byte landing place of a non-fetching atomic's original value (after
    /// `tmp`, so its registration goes first).
    _scratch: Option<Box<u64>>,
}

/// A table of posted work requests.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    used: usize,
}

impl Slots {
    fn with_capacity(n: usize) -> Slots {
        Slots {
            slots: (0..n).map(|_| None).collect(),
            free: (0..n).rev().collect(),
            used: 0,
        }
    }

    fn insert(&mut self, s: Slot) -> Option<usize> {
        let i = self.free.pop()?;
        self.slots[i] = Some(s);
        self.used += 1;
        Some(i)
    }

    fn remove(&mut self, i: usize) -> Option<Slot> {
        let s = self.slots.get_mut(i)?.take()?;
        self.free.push(i);
        self.used -= 1;
        Some(s)
    }

    fn left(&self) -> usize {
        self.free.len()
    }
}

/// Connection state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conn {
    Idle,
    Connecting,
    Accepting,
    Connected,
    Shutdown,
}

/// What was bound (the kit's bindings; the AV, of `FI_EP_DGRAM` endpoints, keeps
/// their peers' address handles).
pub(crate) type Binds = ofi_kit::ep::Bindings<Arc<ud::UdPeer>>;

#[derive(Debug)]
pub(crate) struct EpState {
    pub(crate) b: Binds,
    /// The shared receive context receives come from (`FI_EP_MSG`).
    pub(crate) srx: Option<Arc<EpInner>>,
    pub(crate) enabled: bool,
    pub(crate) conn: Conn,
    /// The connection manager's id of this endpoint's connection.
    pub(crate) conn_id: Option<u64>,
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) tx: Slots,
    pub(crate) rx: Slots,
    /// Completions polled while arming for a wait.
    stash: Vec<WorkCompletion>,
    registered: bool,
    /// The receive side of an `FI_EP_DGRAM` endpoint.
    pub(crate) ud: Option<ud::UdRx>,
    /// An `FI_EP_DGRAM` endpoint's send bounce buffers (one MTU per send slot): an
    /// injected datagram longer than the inline size is copied into its slot's.
    pub(crate) ud_tx: Option<ud::BouncePool>,
}

/// The shared part of an endpoint.
pub struct EpInner {
    // Field order: the queue pair goes before its completion queue and channel, and
    // before the shared receive queue it may use.
    /// The queue pair: created at `fi_endpoint` for `FI_EP_DGRAM`, at `fi_enable` for
    /// `FI_EP_MSG` (a shared receive context bound before must be known); never for a
    /// shared receive context.
    qp: OnceLock<QueuePair>,
    /// The queue sizes the queue pair is created with.
    plan: QpCap,
    /// The shared receive queue of a shared receive context (`fi_srx_context`).
    pub(crate) srq: Option<SharedReceiveQueue>,
    pub(crate) cq: CompletionQueue,
    pub(crate) channel: CompChannel,
    pub(crate) dom: Arc<DomainShared>,
    pub(crate) fid: usize,
    /// The connect request this endpoint accepts (`info.handle`), if any.
    pub(crate) handle: Option<u64>,
    pub(crate) info: Info,
    pub(crate) inline_size: usize,
    /// An `FI_EP_DGRAM` endpoint (a UD queue pair).
    pub(crate) dgram: bool,
    /// The largest datagram (the port's MTU); unused on `FI_EP_MSG`.
    pub(crate) mtu: usize,
    pub(crate) tx_flags: OpFlags,
    pub(crate) rx_flags: OpFlags,
    pub(crate) state: Mutex<EpState>,
}

ofi_kit::debug_fields!(EpInner, |ep| { qpn: ep.qp.get().map(QueuePair::qp_num) });

/// An active endpoint (`FI_EP_MSG` over RC, `FI_EP_DGRAM` over UD).
#[derive(Debug)]
pub struct Endpoint {
    pub(crate) inner: Arc<EpInner>,
}

fn access_all() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
}

impl Endpoint {
    pub(crate) fn open(dom: Arc<DomainShared>, info: &Info, context: usize) -> Result<Endpoint> {
        let dgram = match info.ep_attr.ep_type {
            ofi_core::EpType::Msg | ofi_core::EpType::Unspec => false,
            ofi_core::EpType::Dgram => true,
            other => {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("{NAME}: {other} endpoints are not supported (FI_EP_MSG, FI_EP_DGRAM)"),
                ))
            }
        };
        let s = &dom.fabric.settings;
        // The info's sizes when given (0: the parameters'), at most what the device
        // allows per queue.
        let max_wr = dom.ctx.query_device()?.max_qp_wr as usize;
        let pick = |asked: usize, dflt: usize| if asked == 0 { dflt } else { asked }.min(max_wr);
        let tx = pick(info.tx_attr.size, s.tx_size);
        let rx = pick(info.rx_attr.size, s.rx_size);
        let mtu = (dom.ctx.query_port(1)?.active_mtu.bytes() as usize).min(crate::UD_MTU);
        let channel = dom.ctx.create_comp_channel()?;
        let cq = dom.ctx.create_cq((tx + rx) as u32, 0, Some(&channel))?;
        let plan = QpCap {
            max_send_wr: tx as u32,
            max_recv_wr: rx as u32,
            max_send_sge: crate::IOV_LIMIT as u32,
            max_recv_sge: if dgram { 1 } else { crate::IOV_LIMIT as u32 },
            max_inline_data: s.inline_size as u32,
        };
        let (ud_rx, ud_tx) = if dgram {
            (
                Some(ud::UdRx::new(&dom.pd, rx, mtu)?),
                Some(ud::BouncePool::new(&dom.pd, tx, mtu, Access::empty())?),
            )
        } else {
            (None, None)
        };
        let inline_size = s.inline_size;
        let handle = (info.handle != 0).then_some(info.handle as u64);
        let inner = Arc::new(EpInner {
            qp: OnceLock::new(),
            plan,
            srq: None,
            cq,
            channel,
            fid: context,
            handle,
            info: info.clone(),
            inline_size,
            dgram,
            mtu,
            tx_flags: info.tx_attr.op_flags,
            rx_flags: info.rx_attr.op_flags,
            state: Mutex::new(EpState {
                b: Binds::default(),
                srx: None,
                enabled: false,
                conn: Conn::Idle,
                conn_id: None,
                peer: info.dest_addr.as_ref().and_then(Address::socket_addr),
                tx: Slots::with_capacity(tx),
                rx: Slots::with_capacity(rx),
                stash: Vec::with_capacity(ROUND),
                registered: false,
                ud: ud_rx,
                ud_tx,
            }),
            dom,
        });
        if dgram {
            inner.create_qp(None)?;
        }
        Ok(Endpoint { inner })
    }

    /// A shared receive context (`fi_srx_context`): a shared receive queue of
    /// `attr.size` receives (the parameter's depth for 0) that `FI_EP_MSG` endpoints
    /// bound to it receive from. Usable at once (no `fi_enable`).
    pub(crate) fn open_srx(
        dom: Arc<DomainShared>,
        attr: &ofi_core::attr::RxAttr,
        context: usize,
    ) -> Result<Endpoint> {
        let s = &dom.fabric.settings;
        let max = dom.ctx.query_device()?.max_srq_wr as usize;
        let size = ofi_kit::ep::size_or(attr.size, s.rx_size).min(max);
        if attr.iov_limit > crate::IOV_LIMIT {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "{NAME}: iov_limit {} (at most {})",
                    attr.iov_limit,
                    crate::IOV_LIMIT
                ),
            ));
        }
        let srq = dom.pd.create_srq(&ofi_rdma::SrqInitAttr {
            max_wr: size as u32,
            max_sge: crate::IOV_LIMIT as u32,
        })?;
        // Completions of its receives arrive on the queues of the endpoints that
        // consume them; its own queue stays empty.
        let channel = dom.ctx.create_comp_channel()?;
        let cq = dom.ctx.create_cq(1, 0, Some(&channel))?;
        let info = Info {
            rx_attr: attr.clone(),
            ..Info::default()
        };
        let inner = Arc::new(EpInner {
            qp: OnceLock::new(),
            plan: QpCap::default(),
            srq: Some(srq),
            cq,
            channel,
            fid: context,
            handle: None,
            info,
            inline_size: 0,
            dgram: false,
            mtu: 0,
            tx_flags: OpFlags::empty(),
            rx_flags: attr.op_flags,
            state: Mutex::new(EpState {
                b: Binds::default(),
                srx: None,
                enabled: true,
                conn: Conn::Idle,
                conn_id: None,
                peer: None,
                tx: Slots::with_capacity(0),
                rx: Slots::with_capacity(size),
                stash: Vec::new(),
                registered: false,
                ud: None,
                ud_tx: None,
            }),
            dom,
        });
        Ok(Endpoint { inner })
    }
}

impl EpInner {
    /// The queue pair (`FI_EOPBADSTATE` before it exists: an `FI_EP_MSG` endpoint not
    /// enabled, or a shared receive context).
    pub(crate) fn qp(&self) -> Result<&QueuePair> {
        self.qp.get().ok_or_else(|| {
            Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: no queue pair (endpoint not enabled)"),
            )
        })
    }

    /// Creates the queue pair (once; later calls do nothing), receiving from `srq` when
    /// given, and moves it to INIT.
    pub(crate) fn create_qp(&self, srq: Option<&SharedReceiveQueue>) -> Result<()> {
        if self.qp.get().is_some() {
            return Ok(());
        }
        let qp = self.dom.pd.create_qp(&QpInitAttr {
            qp_type: if self.dgram { QpType::Ud } else { QpType::Rc },
            send_cq: &self.cq,
            recv_cq: &self.cq,
            srq,
            cap: self.plan,
            sq_sig_all: true,
        })?;
        if self.dgram {
            qp.modify(
                &QpAttr {
                    qp_state: QpState::Init,
                    qkey: ud::QKEY,
                    ..QpAttr::default()
                },
                QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY,
            )?;
        } else {
            qp.modify(
                &QpAttr {
                    qp_state: QpState::Init,
                    qp_access_flags: access_all(),
                    ..QpAttr::default()
                },
                QpAttrMask::STATE
                    | QpAttrMask::PKEY_INDEX
                    | QpAttrMask::PORT
                    | QpAttrMask::ACCESS_FLAGS,
            )?;
        }
        let _ = self.qp.set(qp);
        Ok(())
    }

    /// This side of the connection manager's exchange.
    pub(crate) fn cm_peer(&self, data: &[u8]) -> Result<CmPeer> {
        Ok(CmPeer {
            gid: self.dom.gid,
            qpn: self.qp()?.qp_num(),
            private_data: data.to_vec(),
            source: Some(crate::cm::listen_addr(&self.info)),
        })
    }

    /// INIT → RTR → RTS towards the peer's queue pair.
    pub(crate) fn connect_qp(&self, peer: &CmPeer) -> Result<()> {
        let mtu = self.dom.ctx.query_port(1)?.active_mtu;
        let qp = self.qp()?;
        qp.modify(
            &QpAttr {
                qp_state: QpState::Rtr,
                path_mtu: mtu,
                dest_qp_num: peer.qpn,
                ah_attr: AhAttr {
                    dgid: peer.gid,
                    port_num: 1,
                    ..AhAttr::default()
                },
                min_rnr_timer: 1,
                max_dest_rd_atomic: 16,
                ..QpAttr::default()
            },
            QpAttrMask::STATE | QpAttrMask::RC_TO_RTR,
        )?;
        qp.modify(
            &QpAttr {
                qp_state: QpState::Rts,
                timeout: 18,
                retry_cnt: 7,
                rnr_retry: 7,
                max_rd_atomic: 16,
                ..QpAttr::default()
            },
            QpAttrMask::STATE | QpAttrMask::RC_TO_RTS,
        )
    }

    /// Move the queue pair to the error state (everything posted is flushed).
    pub(crate) fn to_error(&self) {
        let Some(qp) = self.qp.get() else {
            return;
        };
        let _ = qp.modify(
            &QpAttr {
                qp_state: QpState::Err,
                ..QpAttr::default()
            },
            QpAttrMask::STATE,
        );
    }

    /// Enter the shutdown state: queue pair to error, `FI_SHUTDOWN` once.
    pub(crate) fn shut(&self, state: &mut EpState) {
        if state.conn == Conn::Shutdown {
            return;
        }
        let was = state.conn;
        state.conn = Conn::Shutdown;
        self.to_error();
        if let Some(id) = state.conn_id.take() {
            self.dom.fabric.hub.unroute_conn(id);
        }
        if matches!(was, Conn::Connected) {
            if let Some(eq) = &state.b.eq {
                let _ = eq.shutdown(self.fid);
            }
        }
    }

    /// An event of this endpoint's connection (from the fabric's hub).
    pub(crate) fn on_cm_event(&self, kind: CmEventKind) {
        let mut state = lock(&self.state);
        match kind {
            CmEventKind::Established { peer } => match state.conn {
                Conn::Connecting => {
                    let moved = if self.dom.fabric.hub.channel.drives_qp() {
                        Ok(())
                    } else {
                        self.connect_qp(&peer)
                    };
                    if let Err(e) = moved {
                        self.fail_connect(&mut state, e.code(), Vec::new());
                        return;
                    }
                    state.conn = Conn::Connected;
                    if let Some(eq) = &state.b.eq {
                        let _ = eq.connected(self.fid, peer.private_data);
                    }
                }
                Conn::Accepting => {
                    state.conn = Conn::Connected;
                    if let Some(eq) = &state.b.eq {
                        let _ = eq.connected(self.fid, Vec::new());
                    }
                }
                _ => {}
            },
            CmEventKind::Rejected { private_data } => {
                if state.conn == Conn::Connecting {
                    self.fail_connect(&mut state, Errno::ECONNREFUSED, private_data);
                }
            }
            CmEventKind::Disconnected => match state.conn {
                Conn::Connecting | Conn::Accepting => {
                    self.fail_connect(&mut state, Errno::ECONNREFUSED, Vec::new())
                }
                _ => self.shut(&mut state),
            },
            CmEventKind::Failed { err } => match state.conn {
                Conn::Connecting | Conn::Accepting => {
                    self.fail_connect(&mut state, err, Vec::new())
                }
                _ => self.shut(&mut state),
            },
            CmEventKind::ConnectRequest { .. } => {}
        }
    }

    fn fail_connect(&self, state: &mut EpState, err: Errno, data: Vec<u8>) {
        state.conn = Conn::Shutdown;
        self.to_error();
        if let Some(id) = state.conn_id.take() {
            self.dom.fabric.hub.unroute_conn(id);
        }
        if let Some(eq) = &state.b.eq {
            let _ = eq.push_err(EqErrorEntry {
                fid: self.fid,
                context: 0,
                data: 0,
                err,
                prov_errno: 0,
                err_data: data,
            });
        }
    }

    /// Report one work completion.
    fn complete(&self, state: &mut EpState, wc: &WorkCompletion) {
        let rx = wc.wr_id & RX_BIT != 0;
        let idx = (wc.wr_id & !RX_BIT) as usize;
        if rx && self.dgram {
            self.datagram(state, idx, wc);
            return;
        }
        let (slot, shared) = match (rx, &state.srx) {
            // Lock order: an endpoint, then its shared receive context.
            (true, Some(srx)) => (lock(&srx.state).rx.remove(idx), true),
            (true, None) => (state.rx.remove(idx), false),
            (false, _) => (state.tx.remove(idx), false),
        };
        let Some(mut slot) = slot else {
            return;
        };
        if shared {
            // Posted without knowing which endpoint's CQ (and its selective
            // completion) would report it.
            slot.report |= !state.b.rx_selective();
        }
        let (cq, _sel) = if rx {
            (state.b.rx_cq(), state.b.rx_selective())
        } else {
            (state.b.tx_cq(), state.b.tx_selective())
        };
        let imm = wc.wc_flags.contains(ofi_rdma::WcFlags::WITH_IMM);
        let mut flags = slot.flags;
        let mut len = slot.len;
        let mut data = 0;
        let mut cntr = slot.cntr;
        if rx {
            len = wc.byte_len as usize;
            if imm {
                flags |= OpFlags::REMOTE_CQ_DATA.bits();
                data = u64::from(wc.imm_data);
            }
            if wc.opcode == WcOpcode::RecvRdmaWithImm && wc.status == WcStatus::Success {
                flags = (OpFlags::RMA | OpFlags::REMOTE_WRITE | OpFlags::REMOTE_CQ_DATA).bits();
                len = 0;
                cntr = CounterKind::Recv;
            }
        }
        if wc.status == WcStatus::Success {
            if let Some(c) = state.b.counter(cntr) {
                c.inc();
            }
            if slot.report || (rx && imm) {
                if let Some(cq) = cq {
                    let _ = cq.push_entry(&CqTaggedEntry {
                        op_context: slot.ctx,
                        flags,
                        len,
                        buf: if rx && len > 0 {
                            slot.buf as *mut _
                        } else {
                            std::ptr::null_mut()
                        },
                        data,
                        tag: 0,
                    });
                }
            }
        } else {
            if let Some(c) = state.b.counter(cntr) {
                c.inc_err();
            }
            if let Some(cq) = cq {
                let _ = cq.push_err(CqError {
                    op_context: slot.ctx,
                    flags: slot.flags,
                    len: 0,
                    buf: slot.buf,
                    data: 0,
                    tag: 0,
                    olen: 0,
                    err: crate::cq::wc_errno(wc.status),
                    prov_errno: wc.status as i32,
                    err_data: Vec::new(),
                });
            }
        }
        drop(slot);
    }
}

impl Progress for EpInner {
    fn progress(&self) -> usize {
        let Ok(mut state) = self.state.try_lock() else {
            return 0;
        };
        while self.channel.get_cq_event().is_some() {}
        let mut work = 0;
        let stash = std::mem::take(&mut state.stash);
        for wc in &stash {
            self.complete(&mut state, wc);
            work += 1;
        }
        state.stash = stash;
        state.stash.clear();
        let mut wcs = [WorkCompletion::new(0, WcStatus::Success, WcOpcode::Send, 0); ROUND];
        for _ in 0..4 {
            let n = self.cq.poll(&mut wcs).unwrap_or(0);
            for wc in &wcs[..n] {
                self.complete(&mut state, wc);
            }
            work += n;
            if n < ROUND {
                break;
            }
        }
        work
    }

    /// Arm the device completion queue and wait on its channel; a completion already
    /// there is stashed for the next round, and the waiter polls instead.
    fn wait_fds(&self, out: &mut Vec<FdInterest>) -> bool {
        let Ok(mut state) = self.state.try_lock() else {
            return false;
        };
        if self.cq.req_notify(false).is_err() {
            return false;
        }
        let mut wcs = [WorkCompletion::new(0, WcStatus::Success, WcOpcode::Send, 0); ROUND];
        let room = ROUND - state.stash.len().min(ROUND);
        let n = self.cq.poll(&mut wcs[..room]).unwrap_or(0);
        state.stash.extend_from_slice(&wcs[..n]);
        if !state.stash.is_empty() {
            return false;
        }
        out.push(FdInterest::read(self.channel.fd()));
        true
    }
}

/// A scatter list of at most [`crate::IOV_LIMIT`] entries for `iov`, registering
/// buffers outside every registered region for the operation (kept in `tmp`).
///
/// # Safety
/// Every `(address, length)` of `iov` must stay valid until the operation completes
/// (the data calls' contract).
pub(crate) unsafe fn sges(
    dom: &DomainShared,
    iov: &[(usize, usize)],
    write: bool,
    tmp: &mut Vec<MemoryRegion>,
    out: &mut [Sge; crate::IOV_LIMIT],
) -> Result<usize> {
    let mut n = 0;
    for &(p, len) in iov.iter().filter(|(_, l)| *l > 0) {
        if n == out.len() {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: more than {} iov entries", crate::IOV_LIMIT),
            ));
        }
        let Ok(length) = u32::try_from(len) else {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("{NAME}: a {len}-byte buffer is too long"),
            ));
        };
        let lkey = match dom.lkey_of(p, len) {
            Some(k) => k,
            None => {
                let access = if write {
                    Access::LOCAL_WRITE
                } else {
                    Access::empty()
                };
                // SAFETY: the caller keeps the buffer valid until completion; the
                // registration lives in the operation's slot until then.
                let mr = unsafe { dom.pd.reg_mr(p as *mut u8, len, access)? };
                let k = mr.lkey();
                tmp.push(mr);
                k
            }
        };
        out[n] = Sge {
            addr: p as u64,
            length,
            lkey,
        };
        n += 1;
    }
    Ok(n)
}
