//! Endpoint control and CM slots of the adapters (see [`super`] for the object pointers and panics).

use super::*;

/// # Safety
/// `t.obj` an object of family `F` of the announced class (host contract).
pub(super) unsafe fn bind_target<'a, F: FabricOps>(t: RawFidRef) -> Result<BindTarget<'a, F>> {
    if t.obj.is_null() {
        return einval("bind: null object");
    }
    // SAFETY: by the caller's contract.
    unsafe {
        Ok(match FidClass::from_raw(t.class) {
            Some(FidClass::Cq) => BindTarget::Cq(&ob::<CqBox<CqOf<F>>>(t.obj).inner),
            Some(FidClass::Cntr) => BindTarget::Cntr(ob::<CntrOf<F>>(t.obj)),
            Some(FidClass::Av) => BindTarget::Av(ob::<AvOf<F>>(t.obj)),
            Some(FidClass::Eq) => BindTarget::Eq(&ob::<EqBox<EqOf<F>>>(t.obj).inner),
            Some(FidClass::StxCtx) => BindTarget::Stx(ob::<EpOf<F>>(t.obj)),
            Some(FidClass::SrxCtx) => BindTarget::Srx(ob::<EpOf<F>>(t.obj)),
            _ => return einval("bind: this kind of object cannot be bound to an endpoint"),
        })
    }
}

/// Slot `bind` of the `ep` table.
/// # Safety
/// `ep` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn ep_bind<F: FabricOps>(
    ep: Obj,
    target: RawFidRef,
    flags: u64,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "ep.bind", || {
        // SAFETY: our boxed endpoint; target of this family (host contract).
        unsafe {
            ob::<EpOf<F>>(ep).bind(bind_target::<F>(target)?, OpFlags::from_bits_retain(flags))
        }
    })
}

/// Slot `enable` of the `ep` table.
/// # Safety
/// `ep` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn ep_enable<F: FabricOps>(ep: Obj, err: *mut ErrBuf) -> i32 {
    // SAFETY: our boxed endpoint (host contract).
    guard_ctl(err, "ep.enable", || unsafe { ob::<EpOf<F>>(ep) }.enable())
}

control_slot!(
    /// Slot `control` of the `ep` table.
    ep_control,
    EpOf<F>,
    "ep.control"
);

/// Slot `alias` of the `ep` table.
/// # Safety
/// `ep` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn ep_alias<F: FabricOps>(
    ep: Obj,
    flags: u64,
    out: *mut RawEp,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "ep.alias", || {
        need_out(out)?;
        // SAFETY: our boxed endpoint (host contract).
        let a = unsafe { ob::<EpOf<F>>(ep) }.alias(flags)?;
        // SAFETY: `out` checked.
        unsafe { put_ep::<F>(out, a) }
    })
}

/// Slot `cancel` of the `ep` table.
/// # Safety
/// `ep` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn ep_cancel<F: FabricOps>(ep: Obj, context: usize) -> isize {
    guard("ep.cancel", || {
        // SAFETY: our boxed endpoint (host contract).
        st(unsafe { ob::<EpOf<F>>(ep) }.cancel(context))
    })
}

ep_open_slots! {
    "ep.tx_ctx" fn ep_tx_ctx<EpOf>(index: i32; attr: *const RawTxAttr => tx_attr_from_raw; context: usize) => tx_ctx;
    "ep.rx_ctx" fn ep_rx_ctx<EpOf>(index: i32; attr: *const RawRxAttr => rx_attr_from_raw; context: usize) => rx_ctx;
}

/// A multicast membership as the adapters hand it out (`out_mc` of `join`): the
/// endpoint it belongs to and the group's fabric address.
pub(super) struct McObj {
    ep: Obj,
    fi_addr: u64,
}

/// Slot `join` of the `ep` table.
/// # Safety
/// `ep` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn ep_join<F: FabricOps>(
    ep: Obj,
    addr: *const RawAddr,
    flags: u64,
    context: usize,
    out_mc: *mut Obj,
    out_fi_addr: *mut u64,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "ep.join", || {
        need_out(out_mc)?;
        need_out(out_fi_addr)?;
        // SAFETY: `addr` null or valid (contract).
        let a = match unsafe { addr.as_ref() } {
            // SAFETY: its bytes are valid for `len` (contract).
            Some(r) => unsafe { r.to_address("join address") }?,
            None => None,
        };
        let Some(a) = a else {
            return einval("join: null address");
        };
        // SAFETY: our boxed endpoint.
        let fi_addr = unsafe { ob::<EpOf<F>>(ep) }.join(&a, flags, context)?;
        let mc = Box::into_raw(Box::new(McObj { ep, fi_addr }));
        // SAFETY: both out-parameters checked non-null, valid by contract.
        unsafe {
            *out_mc = mc as Obj;
            *out_fi_addr = fi_addr;
        }
        Ok(())
    })
}

/// Slot `mc_close` of the `ep` table.
/// # Safety
/// `mc` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn ep_mc_close<F: FabricOps>(mc: Obj, err: *mut ErrBuf) -> i32 {
    guard_ctl(err, "mc.close", || {
        if mc.is_null() {
            return einval("mc close: null membership");
        }
        // SAFETY: a membership `ep_join` boxed; the host closes it once, before its
        // endpoint (the membership holds the endpoint open).
        let m = unsafe { &*(mc as *const McObj) };
        // SAFETY: the endpoint is still open (see above).
        unsafe { ob::<EpOf<F>>(m.ep) }.leave(m.fi_addr)?;
        // SAFETY: as above; not used again.
        drop(unsafe { Box::from_raw(mc as *mut McObj) });
        Ok(())
    })
}

boxed_objects!(EpOf<F>);

crate::for_each_ep_ctl_op!(ctl_trampolines);

// ---------------------------------------------------------------------------------------
// The host side of the entries above whose C conversion is written by hand: the
// public method that calls the slot (the provider method and the hook forwarder
// come from the list).

use crate::abi::object::{ctl, ok_or_code, AsFid};
use crate::abi::tables::call_slot;
use crate::addr::Address;
use crate::ep::{Endpoint, Multicast};
use crate::eq::EventQueue;

impl Endpoint {
    /// `fi_ep_bind`: bind a completion queue, counter, address vector, event queue or
    /// shared context of the same provider. Objects of another provider are refused
    /// with `FI_EINVAL`. The bound object stays open until this endpoint closes.
    pub fn bind<B: AsFid + ?Sized>(&self, obj: &B, flags: OpFlags) -> Result<()> {
        // SAFETY: our own object and table; `raw` names an open object of our family.
        self.node
            .bind(obj.as_fid(), "endpoint bind", |raw, eb| unsafe {
                call_slot!(self.t(), EpTable.bind(self.obj, raw, flags.bits(), eb))
            })
    }

    /// Bind an address vector (`fi_ep_bind(ep, &av->fid, 0)`).
    pub fn bind_av(&self, av: &crate::av::AddressVector) -> Result<()> {
        self.bind(av, OpFlags::empty())
    }

    /// Bind a counter with `FI_SEND`, `FI_RECV`, `FI_READ`, `FI_WRITE`, … flags.
    pub fn bind_cntr(&self, cntr: &crate::cntr::Counter, flags: OpFlags) -> Result<()> {
        self.bind(cntr, flags)
    }

    /// Bind an event queue.
    pub fn bind_eq(&self, eq: &EventQueue) -> Result<()> {
        self.bind(eq, OpFlags::empty())
    }

    /// `fi_cancel` the operation posted with `context`.
    pub fn cancel(&self, context: usize) -> Result<()> {
        // SAFETY: our own object.
        ok_or_code(unsafe { call_slot!(self.t(), EpTable.cancel(self.obj, context)) })
    }

    /// `fi_control` with a provider-specific command.
    ///
    /// # Safety
    /// `arg` must be what the provider documents for `command`.
    pub unsafe fn control(&self, command: i32, arg: *mut c_void) -> Result<()> {
        // SAFETY: our own object; `arg` per the caller's contract.
        ctl(|eb| unsafe { call_slot!(self.t(), EpTable.control(self.obj, command, arg, eb)) })
    }

    /// `fi_control(FI_GETOPSFLAG)`: the endpoint's default operation flags of the
    /// transmit (`transmit`) or receive side. `FI_ENOSYS` where the provider has none.
    pub fn op_flags(&self, transmit: bool) -> Result<OpFlags> {
        let mut v = if transmit {
            OpFlags::TRANSMIT.bits()
        } else {
            OpFlags::RECV.bits()
        };
        // SAFETY: FI_GETOPSFLAG takes a `uint64_t *`, `v` lives across the call.
        unsafe { self.control(crate::control::GETOPSFLAG, (&mut v as *mut u64).cast()) }?;
        Ok(OpFlags::from_bits_retain(v))
    }

    /// `fi_control(FI_SETOPSFLAG)`: set the default operation flags of the transmit
    /// (`transmit`) or receive side, used by the calls that take no flags.
    /// `FI_EBADFLAGS` for a flag the side or the provider does not take.
    pub fn set_op_flags(&self, transmit: bool, flags: OpFlags) -> Result<()> {
        let side = if transmit {
            OpFlags::TRANSMIT
        } else {
            OpFlags::RECV
        };
        let mut v = (flags | side).bits();
        // SAFETY: FI_SETOPSFLAG takes a `uint64_t *`, `v` lives across the call.
        unsafe { self.control(crate::control::SETOPSFLAG, (&mut v as *mut u64).cast()) }
    }

    /// `fi_enable`.
    pub fn enable(&self) -> Result<()> {
        // SAFETY: our own object and table.
        ctl(|eb| unsafe { call_slot!(self.t(), EpTable.enable(self.obj, eb)) })
    }

    /// `fi_join` (`FI_MULTICAST`): join the multicast group `addr` (an address of the
    /// endpoint's format). The returned [`Multicast`] holds the fabric address sends to
    /// the group use; dropping or closing it leaves the group. While it is open the
    /// endpoint cannot be closed (`FI_EBUSY`). `FI_ENOSYS` from a provider (or a
    /// plugin built before interface minor 1) without multicast.
    pub fn join(&self, addr: &Address, flags: u64) -> Result<Multicast> {
        self.join_with(addr, flags, 0)
    }

    /// `fi_ep_alias`: another handle to the same endpoint with other default flags.
    pub fn alias(&self, flags: u64) -> Result<Endpoint> {
        // SAFETY: our own object; `out` lives across the call.
        Endpoint::open_child(&self.node, FidClass::Ep, |out, eb| unsafe {
            call_slot!(self.t(), EpTable.alias(self.obj, flags, out, eb))
        })
    }
}
