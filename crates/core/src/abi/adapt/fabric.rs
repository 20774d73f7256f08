//! Fabric slots of the adapters (see [`super`] for the object pointers and panics).

use super::*;

open_slot!("fabric.domain" fn fab_domain<FabricOf>(info) => domain => DOMAIN);
open_slot!("fabric.passive_ep" fn fab_pep<FabricOf>(info) => passive_ep => PEP);
open_slot! {
    "fabric.eq_open" fn fab_eq_open<FabricOf>(attr: *const RawEqAttr => EqAttr::from_raw)
        => eq_open or eq_open_in_set, |eq, _attr| EqBox::new(eq) => EQ
}

/// The attributes of an open that may name a wait set (`cq_open`, `cntr_open`,
/// `eq_open`): `A` from the raw attributes (`conv`, given them without the set; null
/// attributes are `FI_EINVAL`, `null_msg`) and the wait set they name, checked against
/// the wait object (`wait_obj` of `A`, see [`wait_set_of`]).
///
/// # Safety
/// `attr` null or valid for a read.
pub(super) unsafe fn attrs_in_set<R: SignalsWaitSet, A>(
    attr: *const R,
    null_msg: &'static str,
    conv: impl FnOnce(&R) -> Result<A>,
    wait_obj: impl FnOnce(&A) -> WaitObj,
) -> Result<(A, Option<Obj>)> {
    // SAFETY: null or valid (contract).
    let raw = unsafe { *ref_req(attr, null_msg)? };
    let a = conv(&raw.without_set())?;
    let set = wait_set_of(raw.wait_set(), wait_obj(&a))?;
    Ok((a, set))
}

/// The wait set named by an attribute's `wait_set`, checked against its `wait_obj`:
/// `FI_WAIT_SET` needs a set, and a set needs `FI_WAIT_SET`.
pub(super) fn wait_set_of(set: Obj, wait_obj: WaitObj) -> Result<Option<Obj>> {
    match (set.is_null(), wait_obj == WaitObj::Set) {
        (true, false) => Ok(None),
        (false, true) => Ok(Some(set)),
        (true, true) => einval("wait object FI_WAIT_SET without a wait set"),
        (false, false) => einval("a wait set is given but the wait object is not FI_WAIT_SET"),
    }
}

/// Slot `wait_open` of the fabric table.
/// # Safety
/// `fab` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn fab_wait_open<F: FabricOps>(
    fab: Obj,
    attr: *const RawWaitAttr,
    out: *mut RawObj,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "fabric.wait_open", || {
        need_out(out)?;
        // SAFETY: `attr` null or valid (contract).
        let attr = unsafe { WaitAttr::from_raw(ref_req(attr, "wait_open: null attributes")?)? };
        // SAFETY: our boxed fabric.
        let w = unsafe { ob::<F>(fab) }.wait_open(&attr)?;
        // SAFETY: `out` checked.
        unsafe { put_obj(out, w, Adapt::<F>::WAIT) };
        Ok(())
    })
}

/// Slot `trywait` of the fabric table.
/// # Safety
/// `fab` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn fab_trywait<F: FabricOps>(
    fab: Obj,
    objs: *const RawFidRef,
    count: usize,
) -> i32 {
    guard("fabric.trywait", || {
        st32(run(|| {
            // SAFETY: our boxed fabric; `objs` valid for `count` (contract), and each
            // object is of this family (checked by the host).
            unsafe {
                let f = ob::<F>(fab);
                let refs = sl_req(objs, count, "trywait: null array")?;
                let mut list: Vec<TryWaitRef<'_, F>> = Vec::with_capacity(refs.len());
                for r in refs {
                    if r.obj.is_null() {
                        return einval("trywait: null object");
                    }
                    list.push(match FidClass::from_raw(r.class) {
                        Some(FidClass::Cq) => TryWaitRef::Cq(&ob::<CqBox<CqOf<F>>>(r.obj).inner),
                        Some(FidClass::Eq) => TryWaitRef::Eq(&ob::<EqBox<EqOf<F>>>(r.obj).inner),
                        Some(FidClass::Cntr) => TryWaitRef::Cntr(ob::<CntrOf<F>>(r.obj)),
                        Some(FidClass::Wait) => TryWaitRef::Wait(ob::<WaitOf<F>>(r.obj)),
                        _ => return einval("trywait: only CQs, EQs, counters and wait sets"),
                    });
                }
                f.trywait(&list)
            }
        }))
    })
}

// The table (every entry of the list is a `fn` entry: no trampolines yet).
boxed_objects!(F);

crate::for_each_fabric_op!(ctl_trampolines);

// ---------------------------------------------------------------------------------------
// The host side of the entries above whose C conversion is written by hand: the
// public method that calls the slot (the provider method and the hook forwarder
// come from the list).

use crate::abi::object::{ok_or_code, open_child, AsFid};
use crate::abi::tables::call_slot;
use crate::attr::Info;
use crate::domain::Domain;
use crate::ep::PassiveEndpoint;
use crate::eq::EventQueue;
use crate::wait::WaitSet;
impl crate::fabric::Fabric {
    /// `fi_trywait`: `Ok` if the caller may block on the objects' wait fds, `FI_EAGAIN`
    /// if progress is needed first. Objects of another provider are `FI_EINVAL`.
    pub fn trywait(&self, objs: &[&dyn AsFid]) -> Result<()> {
        let mut raw: Vec<RawFidRef> = Vec::with_capacity(objs.len());
        for o in objs {
            let f = o.as_fid();
            self.node.check_peer(f.node(), "trywait")?;
            raw.push(f.raw());
        }
        // SAFETY: `raw` lives across the call and names open objects of our family.
        ok_or_code(unsafe {
            call_slot!(
                self.t(),
                FabricTable.trywait(self.obj, raw.as_ptr(), raw.len())
            )
        } as isize)
    }

    /// `fi_domain`.
    pub fn domain(&self, info: &Info) -> Result<Domain> {
        self.domain_with(info, 0)
    }

    /// `fi_passive_ep`.
    pub fn passive_ep(&self, info: &Info) -> Result<PassiveEndpoint> {
        self.passive_ep_with(info, 0)
    }

    /// `fi_eq_open`.
    pub fn eq_open(&self, attr: &EqAttr) -> Result<EventQueue> {
        self.eq_open_with(attr, 0)
    }

    /// `fi_wait_open`.
    pub fn wait_open(&self, attr: &WaitAttr) -> Result<WaitSet> {
        let raw = attr.to_raw();
        // SAFETY: our own object; `raw` and `out` live across the call.
        let (obj, ops, node) = open_child(&self.node, FidClass::Wait, |out, e| unsafe {
            call_slot!(self.t(), FabricTable.wait_open(self.obj, &raw, out, e))
        })?;
        // SAFETY: the provider returned a wait set and its table.
        Ok(unsafe { WaitSet::from_raw(obj, ops, node) })
    }
}
