//! `FI_EP_DGRAM` over an unreliable-datagram (UD) queue pair.
//!
//! # Addresses
//!
//! An endpoint's name (`FI_ADDR_IB_UD`, [`UD_ADDR_LEN`] bytes): the port's GID (16),
//! the queue pair number (4, little endian), its Q_Key (4, little endian), the port's
//! LID (2, little endian) and 2 reserved bytes (0). Inserting a name into the AV creates
//! the address handle its sends use ([`UdPeer`]); a name of another length or format is
//! refused (`FI_EINVAL`: that AV slot stays `FI_ADDR_NOTAVAIL`).
//!
//! # Receives
//!
//! A UD receive lands behind the 40-byte GRH and must hold the whole datagram, so the
//! endpoint does not give the application's buffers to the queue pair: it posts bounce
//! buffers of `GRH + MTU` bytes (one per receive slot, registered once), keeps the
//! application's receives in its own FIFO, and copies each datagram into the oldest
//! one. That gives the `FI_MSG` semantics without a message prefix (no
//! `FI_MSG_PREFIX` mode): a datagram longer than the receive fills it and completes
//! with `FI_ETRUNC` (`olen` = the bytes that did not fit); a receive not yet matched
//! can be cancelled (`FI_ECANCELED`); a datagram that finds no receive is dropped, as
//! a UD queue pair without a posted receive drops it.
//!
//! # Sources (`FI_SOURCE`, `FI_SOURCE_ERR`)
//!
//! The sender's name is rebuilt from the completion and the GRH the device wrote in
//! front of the datagram: the source GID (bytes 8..24 of an IPv6-style GRH; for RoCE v2
//! over IPv4, whose GRH area ends with the IPv4 header, the IPv4-mapped GID of the
//! header's source address), the work completion's source queue pair and LID, and the
//! provider's Q_Key. Every send of this provider carries a GRH (its address handles
//! are global: a port's GID is never zero), so the GRH is there whenever the sender is
//! one of ours; without it ([`WcFlags::GRH`] clear) the source is unknown. The AV's
//! reverse lookup of that name is the completion's source; an unknown one is
//! `FI_ADDR_NOTAVAIL`, or with `FI_SOURCE_ERR` an `FI_EADDRNOTAVAIL` error completion
//! whose `err_data` is the name.
//!
//! # Invariants
//!
//! - A bounce buffer is posted to the queue pair or being copied out under the
//!   endpoint's lock, never both; the device writes it only while posted, and it is read
//!   only through raw-pointer copies after its completion.
//! - The application's receive FIFO holds at most the receive depth.
//!
//! Nothing here panics on application or peer input.

use std::collections::VecDeque;
use std::sync::Arc;

use ofi_core::abi::raw::CqTaggedEntry;
use ofi_core::cq::CqError;
use ofi_core::Caps;
use ofi_core::ADDR_NOTAVAIL;
use ofi_core::{AddrFormat, Address, Errno, Error, OpFlags, Result};
use ofi_kit::iov::IoList;
use ofi_rdma::{
    Access, AddressHandle, AhAttr, Gid, MemoryRegion, ProtectionDomain, QueuePair, RecvWr, Sge,
    WcFlags, WcStatus, WorkCompletion, GRH_LEN,
};

use crate::NAME;

/// The length of a datagram endpoint's name.
pub const UD_ADDR_LEN: usize = 28;
/// The Q_Key every datagram endpoint of this provider uses.
pub const QKEY: u32 = 0x6f66_6952;

/// A peer in the AV: the address handle of its port, its queue pair and Q_Key.
#[derive(Debug)]
pub struct UdPeer {
    pub(crate) ah: AddressHandle,
    pub(crate) qpn: u32,
    pub(crate) qkey: u32,
}

/// The name of queue pair `qpn` of the port with `gid` and `lid`.
pub(crate) fn encode_name(gid: &Gid, qpn: u32, lid: u16) -> Vec<u8> {
    let mut v = Vec::with_capacity(UD_ADDR_LEN);
    v.extend_from_slice(&gid.0);
    v.extend_from_slice(&qpn.to_le_bytes());
    v.extend_from_slice(&QKEY.to_le_bytes());
    v.extend_from_slice(&lid.to_le_bytes());
    v.extend_from_slice(&[0, 0]);
    v
}

/// The AV's constructor of a peer: parses `addr` and creates its address handle on `pd`.
///
/// # Errors
/// `FI_EINVAL` for an address of another format or length; the device's error when
/// the address handle cannot be created.
pub(crate) fn peer_from(pd: &ProtectionDomain, addr: &Address) -> Result<Arc<UdPeer>> {
    let bytes = match addr {
        Address::Raw { format, bytes } if *format == AddrFormat::IB_UD => bytes,
        other => {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: {other} is not an FI_ADDR_IB_UD address"),
            ))
        }
    };
    let Some(b) = bytes
        .get(..UD_ADDR_LEN)
        .filter(|_| bytes.len() == UD_ADDR_LEN)
    else {
        return Err(Error::new(
            Errno::EINVAL,
            format!(
                "{NAME}: a {}-byte FI_ADDR_IB_UD address ({UD_ADDR_LEN} expected)",
                bytes.len()
            ),
        ));
    };
    let mut gid = [0u8; 16];
    gid.copy_from_slice(&b[..16]);
    let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let ah = pd.create_ah(&AhAttr {
        dgid: Gid(gid),
        dlid: u16::from_le_bytes([b[24], b[25]]),
        port_num: 1,
        ..AhAttr::default()
    })?;
    Ok(Arc::new(UdPeer {
        ah,
        qpn: word(16),
        qkey: word(20),
    }))
}

/// An application receive waiting for a datagram.
#[derive(Debug)]
pub(crate) struct UserRecv {
    pub(crate) ctx: usize,
    pub(crate) buf: IoList,
    pub(crate) len: usize,
    pub(crate) report: bool,
}

/// What a datagram did to the oldest receive.
pub(crate) enum Landed {
    /// No receive was posted: dropped.
    Dropped,
    /// Copied whole (`len` bytes).
    Whole(UserRecv, usize),
    /// Copied `recv.len` bytes; `olen` did not fit.
    Truncated(UserRecv, usize),
}

/// Registered bounce buffers: `slots` buffers of `slot_len` bytes, registered once.
pub(crate) struct BouncePool {
    /// The registration (dropped before the memory it covers).
    mr: MemoryRegion,
    /// The buffers' memory: owned here, touched through `base` only.
    _mem: Box<[u8]>,
    base: *mut u8,
    slot_len: usize,
    slots: usize,
}

// SAFETY: `base` points into `_mem`, owned by this value; it is only dereferenced
// under the endpoint's lock (the pool lives in the endpoint's `Mutex<EpState>`).
unsafe impl Send for BouncePool {}

impl BouncePool {
    /// `slots` buffers of `slot_len` bytes, registered on `pd` with `access`.
    pub(crate) fn new(
        pd: &ProtectionDomain,
        slots: usize,
        slot_len: usize,
        access: Access,
    ) -> Result<BouncePool> {
        let mut mem = vec![0u8; slots * slot_len].into_boxed_slice();
        let base = mem.as_mut_ptr();
        // SAFETY: the memory is owned by the returned value, which drops the
        // registration (field order) before the memory.
        let mr = unsafe { pd.reg_mr(base, mem.len(), access)? };
        Ok(BouncePool {
            mr,
            _mem: mem,
            base,
            slot_len,
            slots,
        })
    }

    /// The scatter element covering the first `len` bytes of buffer `i` (`None` out
    /// of range).
    fn sge(&self, i: usize, len: usize) -> Option<Sge> {
        (i < self.slots && len <= self.slot_len).then(|| Sge {
            // In range: `i < slots`, the memory is `slots * slot_len` bytes.
            addr: self.base as u64 + (i * self.slot_len) as u64,
            length: len as u32,
            lkey: self.mr.lkey(),
        })
    }

    /// Buffer `i` (`None` out of range).
    fn at(&self, i: usize) -> Option<*mut u8> {
        // SAFETY: in range: `i < slots`, the memory is `slots * slot_len` bytes.
        (i < self.slots).then(|| unsafe { self.base.add(i * self.slot_len) })
    }

    /// Copies the bytes `iov` names into buffer `i` and returns its scatter element;
    /// `None` when `i` is out of range or the bytes do not fit.
    ///
    /// # Safety
    /// Every `(address, length)` of `iov` is readable, and buffer `i` is not posted.
    pub(crate) unsafe fn fill(&self, i: usize, iov: &[(usize, usize)]) -> Option<Sge> {
        let total: usize = iov.iter().map(|p| p.1).sum();
        let sge = self.sge(i, total)?;
        let mut at = self.at(i)?;
        for &(p, len) in iov {
            // SAFETY: the caller guarantees the source; the destination is buffer `i`
            // (not posted), `total <= slot_len` bytes in all.
            unsafe {
                std::ptr::copy_nonoverlapping(p as *const u8, at, len);
                at = at.add(len);
            }
        }
        Some(sge)
    }
}

/// The bounce buffers and the application's receives of a datagram endpoint.
pub(crate) struct UdRx {
    pool: BouncePool,
    pub(crate) posted: VecDeque<UserRecv>,
}

ofi_kit::debug_fields!(UdRx, |rx| { slots: rx.pool.slots, posted: rx.posted.len() });

ofi_kit::debug_fields!(BouncePool, |pool| { slots: pool.slots, slot_len: pool.slot_len });

impl UdRx {
    /// `slots` bounce buffers of `GRH + mtu` bytes, registered on `pd`.
    pub(crate) fn new(pd: &ProtectionDomain, slots: usize, mtu: usize) -> Result<UdRx> {
        Ok(UdRx {
            pool: BouncePool::new(pd, slots, GRH_LEN + mtu, Access::LOCAL_WRITE)?,
            posted: VecDeque::with_capacity(slots),
        })
    }

    /// How many application receives may still be posted.
    pub(crate) fn left(&self) -> usize {
        let slots = self.pool.slots;
        slots - self.posted.len().min(slots)
    }

    /// Posts bounce buffer `i` to `qp` (its `wr_id` is `tag | i`).
    pub(crate) fn repost(&self, qp: &QueuePair, i: usize, tag: u64) -> Result<()> {
        let Some(sge) = self.pool.sge(i, self.pool.slot_len) else {
            return Ok(());
        };
        let sge = [sge];
        qp.post_recv(&RecvWr {
            wr_id: tag | i as u64,
            sg_list: &sge,
        })
    }

    /// Posts every bounce buffer.
    pub(crate) fn post_all(&self, qp: &QueuePair, tag: u64) -> Result<()> {
        (0..self.pool.slots).try_for_each(|i| self.repost(qp, i, tag))
    }

    /// The GRH at the start of bounce buffer `i` (in range, completed, not posted).
    pub(crate) fn grh(&self, i: usize) -> Option<[u8; GRH_LEN]> {
        let at = self.pool.at(i)?;
        let mut grh = [0u8; GRH_LEN];
        // SAFETY: bounce buffer `i` is in range (`slot_len >= GRH_LEN`), completed and
        // not posted, so the device does not write it; copied through raw pointers.
        unsafe { std::ptr::copy_nonoverlapping(at, grh.as_mut_ptr(), GRH_LEN) };
        Some(grh)
    }

    /// Bounce buffer `i` completed with `byte_len` bytes (GRH included): copies the
    /// datagram into the oldest application receive.
    pub(crate) fn land(&mut self, i: usize, byte_len: usize) -> Landed {
        let Some(at) = self.pool.at(i) else {
            return Landed::Dropped;
        };
        let len = byte_len
            .saturating_sub(GRH_LEN)
            .min(self.pool.slot_len - GRH_LEN);
        let Some(r) = self.posted.pop_front() else {
            return Landed::Dropped;
        };
        let n = len.min(r.len);
        // SAFETY: the datagram lies in bounce buffer `i` (in range, completed, not
        // posted now); the receive's buffers are valid until its completion (the data
        // calls' contract), and `n` is at most their total.
        unsafe { r.buf.scatter(0, at.add(GRH_LEN), n) };
        if n < len {
            Landed::Truncated(r, len - n)
        } else {
            Landed::Whole(r, len)
        }
    }
}

impl super::EpInner {
    /// A completion of bounce buffer `i` of a datagram endpoint: the datagram goes to
    /// the oldest receive (or is dropped), the buffer is posted again. A flushed buffer
    /// (the endpoint closing, the queue pair in error) is not.
    pub(super) fn datagram(&self, state: &mut super::EpState, i: usize, wc: &WorkCompletion) {
        if wc.status != WcStatus::Success {
            return;
        }
        let Some(u) = state.ud.as_mut() else {
            return;
        };
        let grh = u.grh(i).filter(|_| wc.wc_flags.contains(WcFlags::GRH));
        let landed = u.land(i, wc.byte_len as usize);
        if let Err(e) = self.qp().and_then(|qp| u.repost(qp, i, super::RX_BIT)) {
            ofi_core::ofi_warn!(NAME, "ep_data", "reposting a datagram buffer: {e}");
        }
        let flags = (OpFlags::RECV | OpFlags::MSG).bits();
        let (r, result) = match landed {
            Landed::Dropped => return,
            Landed::Whole(r, len) => (r, Ok(len)),
            Landed::Truncated(r, olen) => (r, Err(olen)),
        };
        let buf = r.buf.slice().first().map_or(0, |p| p.0);
        let (src, unknown) = self.datagram_source(state, grh.as_ref(), wc);
        let cntr = state.b.counter(super::CounterKind::Recv);
        match result {
            Ok(len) if unknown.is_some() => {
                if let Some(c) = cntr {
                    c.inc_err();
                }
                if let Some(cq) = state.b.rx_cq() {
                    let _ = cq.push_err(CqError {
                        op_context: r.ctx,
                        flags,
                        len,
                        buf,
                        data: 0,
                        tag: 0,
                        olen: 0,
                        err: Errno::EADDRNOTAVAIL,
                        prov_errno: 0,
                        err_data: unknown.unwrap_or_default(),
                    });
                }
            }
            Ok(len) => {
                if let Some(c) = cntr {
                    c.inc();
                }
                if let (true, Some(cq)) = (r.report, state.b.rx_cq()) {
                    let _ = cq.push(
                        &CqTaggedEntry {
                            op_context: r.ctx,
                            flags,
                            len,
                            buf: if len > 0 {
                                buf as *mut _
                            } else {
                                std::ptr::null_mut()
                            },
                            data: 0,
                            tag: 0,
                        },
                        src,
                    );
                }
            }
            Err(olen) => {
                if let Some(c) = cntr {
                    c.inc_err();
                }
                self.recv_error(state, &r, Errno::ETRUNC, r.len, olen);
            }
        }
    }

    /// The source a datagram's completion reports, from its GRH and `wc`
    /// (`FI_ADDR_NOTAVAIL` without `FI_SOURCE`, or when unknown); with `FI_SOURCE_ERR`
    /// an unknown sender's name, for the error completion that replaces the entry.
    fn datagram_source(
        &self,
        state: &super::EpState,
        grh: Option<&[u8; GRH_LEN]>,
        wc: &WorkCompletion,
    ) -> (u64, Option<Vec<u8>>) {
        let caps = self.info.caps | self.info.rx_attr.caps;
        if !caps.contains(Caps::SOURCE) {
            return (ADDR_NOTAVAIL, None);
        }
        let name = grh
            .and_then(ofi_rdma::grh::source_gid)
            .map(|gid| encode_name(&gid, wc.src_qp, wc.slid));
        let src = match (&name, state.b.av.as_ref()) {
            (Some(n), Some(av)) => Address::from_bytes(AddrFormat::IB_UD, n)
                .map_or(ADDR_NOTAVAIL, |a| av.source_addr(&a)),
            _ => ADDR_NOTAVAIL,
        };
        let unknown = (src == ADDR_NOTAVAIL && caps.contains(Caps::SOURCE_ERR))
            .then(|| name.unwrap_or_default());
        (src, unknown)
    }

    /// An error completion of application receive `r` on the receive CQ.
    pub(super) fn recv_error(
        &self,
        state: &super::EpState,
        r: &UserRecv,
        err: Errno,
        len: usize,
        olen: usize,
    ) {
        if let Some(cq) = state.b.rx_cq() {
            let _ = cq.push_err(CqError {
                op_context: r.ctx,
                flags: (OpFlags::RECV | OpFlags::MSG).bits(),
                len,
                buf: r.buf.slice().first().map_or(0, |p| p.0),
                data: 0,
                tag: 0,
                olen,
                err,
                prov_errno: 0,
                err_data: Vec::new(),
            });
        }
    }

    /// `fi_cancel` of a datagram endpoint's receive `context` not yet matched: an
    /// `FI_ECANCELED` error completion; `FI_ENOENT` when there is none.
    pub(super) fn cancel_datagram_recv(&self, context: usize) -> Result<()> {
        let mut state = super::lock(&self.state);
        let Some(u) = state.ud.as_mut() else {
            return Err(Error::new(
                Errno::ENOENT,
                format!("{NAME}: nothing to cancel"),
            ));
        };
        let Some(at) = u.posted.iter().position(|r| r.ctx == context) else {
            return Err(Error::new(
                Errno::ENOENT,
                format!("{NAME}: no posted receive with this context"),
            ));
        };
        let Some(r) = u.posted.remove(at) else {
            return Err(Error::new(
                Errno::ENOENT,
                format!("{NAME}: nothing to cancel"),
            ));
        };
        self.recv_error(&state, &r, Errno::ECANCELED, 0, 0);
        Ok(())
    }
}
