//! EFA's extended completion queues: created by libefa's `efadv_create_cq` with the
//! standard fields and the sender's GID, and polled as rdma-core's inline
//! `ibv_start_poll` / `ibv_next_poll` / `ibv_end_poll` and `ibv_wc_read_*` do, through
//! the function pointers of the mirrored `struct ibv_cq_ex`; the sender's GID through
//! `struct efadv_cq`'s `wc_read_sgid` (what the inline `efadv_wc_read_sgid` calls).
//!
//! An SRD receive on EFA hardware has no GRH: its sender is named here, either by GID
//! ([`WorkCompletion::sgid`], when the receiver has no address handle for it) or by the
//! number of the receiver's address handle for it (`slid`).
//!
//! Never run against a device (this project's machines have no EFA device): the layout
//! of every structure is checked against the installed headers and every symbol
//! resolves in the installed libefa; the calls follow efadv_create_cq(3) and
//! ibv_create_cq_ex(3).
//!
//! Nothing here panics; a driver that leaves a slot empty gets `ENOSYS`.

use std::sync::Arc;

use libc::c_void;
use ofi_core::{Errno, Error, Result};

use super::efadv::{EfadvCq, EfadvCqInitAttr, WC_EX_WITH_SGID};
use super::ffi::*;
use super::objects::{non_null, SysChannel, SysContext, SysCq};
use crate::verbs::{Gid, WcFlags, WcOpcode, WcStatus, WorkCompletion};

/// The EFA part of an extended completion queue (its `struct efadv_cq`).
pub(crate) struct EfaCq {
    efa: *mut EfadvCq,
}

/// Creates an extended completion queue on an EFA device's context: standard fields
/// and, with `with_sgid`, the sender's GID. `EOPNOTSUPP` without libefa.
pub(crate) fn create_efa_cq(
    ctx: &Arc<SysContext>,
    cqe: u32,
    user: u64,
    channel: Option<&Arc<SysChannel>>,
    with_sgid: bool,
) -> Result<Arc<SysCq>> {
    let lib = super::objects::libefa()?;
    let mut attr = IbvCqInitAttrEx {
        cqe,
        cq_context: user as *mut c_void,
        channel: channel.map_or(std::ptr::null_mut(), |c| c.ptr),
        comp_vector: 0,
        wc_flags: IBV_WC_STANDARD_FLAGS,
        comp_mask: 0,
        flags: 0,
        parent_domain: std::ptr::null_mut(),
    };
    let mut efa_attr = EfadvCqInitAttr {
        comp_mask: 0,
        wc_flags: if with_sgid { WC_EX_WITH_SGID } else { 0 },
    };
    // SAFETY: our open context and channel; filled attribute structs, `inlen` the size
    // of the EFA one.
    let cq = unsafe {
        (lib.create_cq)(
            ctx.ptr,
            &mut attr,
            &mut efa_attr,
            std::mem::size_of::<EfadvCqInitAttr>() as u32,
        )
    };
    let cq = non_null(cq, "efadv_create_cq")?;
    // SAFETY: an extended CQ libefa just created.
    let efa = unsafe { (lib.cq_from_ibv_cq_ex)(cq) };
    // Owned from here: destroyed (as the `struct ibv_cq` it starts with) on drop.
    let owned = Arc::new(SysCq {
        ptr: cq.cast(),
        ctx: ctx.clone(),
        _channel: channel.cloned(),
        efa: Some(EfaCq { efa }),
    });
    if efa.is_null() {
        return Err(Error::new(
            Errno::EOPNOTSUPP,
            "efadv_cq_from_ibv_cq_ex: not an EFA completion queue",
        ));
    }
    Ok(owned)
}

/// One slot of the extended CQ, or `ENOSYS` when the driver left it empty.
fn slot<T: Copy>(f: Option<T>, what: &str) -> Result<T> {
    f.ok_or_else(|| Error::new(Errno::ENOSYS, format!("driver has no {what}")))
}

/// `ENOENT` from `start_poll` / `next_poll`: no (further) completion.
fn is_empty(rc: libc::c_int) -> bool {
    rc == libc::ENOENT || rc == -libc::ENOENT
}

impl EfaCq {
    /// Moves up to `out.len()` completions of the extended CQ `cq` into `out`.
    pub(crate) fn poll(&self, cq: *mut IbvCqEx, out: &mut [WorkCompletion]) -> Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        // SAFETY: `cq` is the live extended CQ this belongs to; its slots are read only.
        let ops = unsafe { &*cq };
        let start = slot(ops.start_poll, "start_poll")?;
        let next = slot(ops.next_poll, "next_poll")?;
        let end = slot(ops.end_poll, "end_poll")?;
        let mut attr = IbvPollCqAttr::default();
        // SAFETY: our CQ; not in a poll sequence (every sequence below is ended).
        let rc = unsafe { start(cq, &mut attr) };
        if is_empty(rc) {
            return Ok(0);
        }
        if rc != 0 {
            return Err(Error::new(Errno::EIO, "ibv_start_poll failed"));
        }
        let mut done = 0;
        let mut failed = None;
        loop {
            match self.read_current(cq) {
                Ok(wc) => out[done] = wc,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
            done += 1;
            if done == out.len() {
                break;
            }
            // SAFETY: our CQ, inside the sequence `start` opened.
            let rc = unsafe { next(cq) };
            if is_empty(rc) {
                break;
            }
            if rc != 0 {
                failed = Some(Error::new(Errno::EIO, "ibv_next_poll failed"));
                break;
            }
        }
        // SAFETY: ends the sequence `start` opened, once.
        unsafe { end(cq) };
        match failed {
            Some(e) if done == 0 => Err(e),
            _ => Ok(done),
        }
    }

    /// The completion `cq` is on (inside a poll sequence): `status` and `wr_id` from its
    /// fields, the rest through its reads (only `vendor_err` for a failed one, whose
    /// other fields rdma-core leaves undefined), the sender's GID from libefa.
    fn read_current(&self, cq: *mut IbvCqEx) -> Result<WorkCompletion> {
        // SAFETY: the live extended CQ, positioned on a completion.
        let c = unsafe { &*cq };
        let status = WcStatus::from_raw(c.status).unwrap_or(WcStatus::GeneralErr);
        let read = |f: CqExRead<u32>, what: &str| -> Result<u32> {
            // SAFETY: a read of the current completion of our CQ.
            Ok(unsafe { slot(f, what)?(cq) })
        };
        let mut wc = WorkCompletion::new(c.wr_id, status, WcOpcode::Recv, 0);
        wc.vendor_err = read(c.read_vendor_err, "read_vendor_err")?;
        if status != WcStatus::Success {
            return Ok(wc);
        }
        wc.opcode =
            WcOpcode::from_raw(read(c.read_opcode, "read_opcode")?).unwrap_or(WcOpcode::Send);
        wc.byte_len = read(c.read_byte_len, "read_byte_len")?;
        wc.qp_num = read(c.read_qp_num, "read_qp_num")?;
        wc.src_qp = read(c.read_src_qp, "read_src_qp")?;
        wc.slid = read(c.read_slid, "read_slid")? as u16;
        // SAFETY: reads of the current completion of our CQ.
        unsafe {
            wc.wc_flags = WcFlags::from_bits_truncate(slot(c.read_wc_flags, "read_wc_flags")?(cq));
            wc.sl = slot(c.read_sl, "read_sl")?(cq);
            wc.dlid_path_bits = slot(c.read_dlid_path_bits, "read_dlid_path_bits")?(cq);
        }
        if wc.wc_flags.contains(WcFlags::WITH_IMM) {
            wc.imm_data = u32::from_be(read(c.read_imm_data, "read_imm_data")?);
        }
        if wc.opcode == WcOpcode::Recv {
            wc.sgid = self.read_sgid();
        }
        Ok(wc)
    }

    /// `efadv_wc_read_sgid` on the current completion: the sender's GID, or `None`
    /// where the completion names the sender by address handle instead.
    fn read_sgid(&self) -> Option<Gid> {
        // SAFETY: the live `struct efadv_cq` of our CQ (checked non-null at creation).
        let f = unsafe { (*self.efa).wc_read_sgid }?;
        let mut gid = IbvGid::default();
        // SAFETY: the current completion of our CQ and a GID to fill.
        (unsafe { f(self.efa, &mut gid) } == 0).then_some(Gid(gid.raw))
    }
}
