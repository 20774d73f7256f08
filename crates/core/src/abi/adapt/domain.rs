//! Domain slots of the adapters (see [`super`] for the object pointers and panics).

use super::*;

eq_bind_slot!(
    /// Slot `bind` of the domain table.
    dom_bind,
    F::Domain,
    "domain.bind",
    "domain bind: only an event queue can be bound"
);

/// Fill an endpoint out-parameter with `ep` and the family's endpoint tables.
///
/// # Safety
/// `out` valid for writes of `(*out).struct_size` bytes.
pub(super) unsafe fn put_ep<F: FabricOps>(out: *mut RawEp, ep: EpOf<F>) -> Result<()> {
    // SAFETY: valid by contract.
    unsafe {
        if (*out).struct_size < RawEp::LAYOUT.size_for_minor(0) {
            return einval("endpoint out-parameter too small");
        }
        (*out).obj = Box::into_raw(Box::new(ep)) as Obj;
        (*out).ep = Adapt::<F>::EP;
        (*out).cm = Adapt::<F>::CM;
        (*out).msg = Adapt::<F>::MSG;
        (*out).tagged = Adapt::<F>::TAGGED;
        (*out).rma = Adapt::<F>::RMA;
        (*out).atomic = Adapt::<F>::ATOMIC;
    }
    Ok(())
}

/// The body of a domain slot that opens an endpoint (`endpoint`, `scalable_ep`,
/// `stx_ctx`, `srx_ctx`): check `out`, open with `open`, hand the endpoint out.
///
/// # Safety
/// `out` null or valid for writes of `(*out).struct_size` bytes; `err` null or valid.
pub(super) unsafe fn open_ep<F: FabricOps>(
    what: &'static str,
    out: *mut RawEp,
    err: *mut ErrBuf,
    open: impl FnOnce() -> Result<EpOf<F>>,
) -> i32 {
    guard_ctl(err, what, || {
        need_out(out)?;
        let ep = open()?;
        // SAFETY: `out` checked non-null, valid by this function's contract.
        unsafe { put_ep::<F>(out, ep) }
    })
}

ep_open_slots! {
    "domain.endpoint" fn dom_endpoint<DomainOf>(; info: *const RawInfo => info_from_raw; context: usize, flags: u64) => endpoint;
    "domain.scalable_ep" fn dom_scalable_ep<DomainOf>(; info: *const RawInfo => info_from_raw; context: usize) => scalable_ep;
    "domain.stx_ctx" fn dom_stx_ctx<DomainOf>(; attr: *const RawTxAttr => tx_attr_from_raw; context: usize) => stx_ctx;
    "domain.srx_ctx" fn dom_srx_ctx<DomainOf>(; attr: *const RawRxAttr => rx_attr_from_raw; context: usize) => srx_ctx;
}

/// The attributes of a CQ from C: an unspecified format is the context format.
fn cq_attr_from_raw(raw: &RawCqAttr) -> Result<CqAttr> {
    let mut attr = CqAttr::from_raw(raw)?;
    if attr.format == CqFormat::Unspec {
        attr.format = CqFormat::Context;
    }
    Ok(attr)
}

open_slot! {
    "domain.cq_open" fn dom_cq_open<DomainOf>(attr: *const RawCqAttr => cq_attr_from_raw)
        => cq_open or cq_open_in_set, |cq, attr| CqBox::new(cq, &attr) => CQ
}

open_slot! {
    "domain.cntr_open" fn dom_cntr_open<DomainOf>(attr: *const RawCntrAttr => CntrAttr::from_raw)
        => cntr_open or cntr_open_in_set, |cntr, _attr| cntr => CNTR, then published
}

open_slot!("domain.av_open" fn dom_av_open<DomainOf>(attr: *const RawAvAttr => AvAttr::from_raw) => av_open => AV);

/// Register with `attr` and fill `out`.
///
/// # Safety
/// `dom` our boxed domain; `out` valid for writes.
pub(super) unsafe fn mr_common<F: FabricOps>(
    dom: Obj,
    attr: &MrAttr<'_>,
    flags: u64,
    out: *mut RawMr,
) -> Result<()> {
    need_out(out)?;
    // SAFETY: valid by contract.
    unsafe {
        if (*out).struct_size < RawMr::LAYOUT.size_for_minor(0) {
            return einval("MR out-parameter too small");
        }
        let mr = ob::<F::Domain>(dom).mr_reg(attr, flags)?;
        (*out).obj = Box::into_raw(Box::new(mr)) as Obj;
        (*out).ops = Adapt::<F>::MR;
    }
    Ok(())
}

/// Defines the slots `mr_reg` and `mr_regv` of the domain table: the buffers the slot
/// passes (its parameters `buffers`) as a list of iovs (`iov`), registered with the
/// slot's access, offset, requested key and context through [`mr_common`].
macro_rules! mr_reg_slots {
    ($($what:literal fn $slot:ident($($buffers:ident: $bt:ty),*) => $iov:expr;)*) => {$(
        #[doc = concat!("Slot `", $what, "` of the domain table.")]
        /// # Safety
        /// `dom` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
        #[allow(clippy::too_many_arguments)]
        pub(super) unsafe extern "C" fn $slot<F: FabricOps>(
            dom: Obj,
            $($buffers: $bt,)*
            access: u64,
            offset: u64,
            requested_key: u64,
            flags: u64,
            context: usize,
            out: *mut RawMr,
            err: *mut ErrBuf,
        ) -> i32 {
            guard_ctl(err, $what, || {
                let iov: &[Iov] = $iov;
                let attr = MrAttr {
                    offset,
                    requested_key,
                    context,
                    ..MrAttr::new(iov, OpFlags::from_bits_retain(access))
                };
                // SAFETY: our boxed domain; `out` valid (contract).
                unsafe { mr_common::<F>(dom, &attr, flags, out) }
            })
        }
    )*};
}

mr_reg_slots! {
    "domain.mr_reg" fn dom_mr_reg(buf: *const c_void, len: usize)
        => &[Iov { base: buf as *mut c_void, len }];
    "domain.mr_regv" fn dom_mr_regv(iov: *const Iov, count: usize) =>
        // SAFETY: `iov` valid for `count` (contract).
        unsafe { sl_req(iov, count, "mr_regv: null iov")? };
}

/// Slot `mr_regattr` of the domain table.
/// # Safety
/// `dom` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn dom_mr_regattr<F: FabricOps>(
    dom: Obj,
    attr: *const RawMrAttr,
    flags: u64,
    out: *mut RawMr,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.mr_regattr", || {
        // SAFETY: `attr` null, or it and its arrays valid for the call (contract).
        let attr = unsafe { MrAttr::from_raw(ref_req(attr, "mr_regattr: null attributes")?)? };
        // SAFETY: our boxed domain; `out` valid (contract).
        unsafe { mr_common::<F>(dom, &attr, flags, out) }
    })
}

/// Slot `query_atomic` of the domain table.
/// # Safety
/// `dom` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn dom_query_atomic<F: FabricOps>(
    dom: Obj,
    dt: u32,
    op: u32,
    attr: *mut AtomicAttr,
    flags: u64,
) -> i32 {
    guard("domain.query_atomic", || {
        st32(run(|| {
            need_out(attr)?;
            // SAFETY: our boxed domain.
            let a = unsafe { ob::<F::Domain>(dom) }.query_atomic(
                datatype(dt)?,
                atomic_op(op)?,
                flags,
            )?;
            // SAFETY: `attr` non-null and valid for writes (contract).
            unsafe { attr.write(a) };
            Ok(())
        }))
    })
}

// The table (every entry of the list is a `fn` entry: no trampolines yet).
boxed_objects!(DomainOf<F>);

crate::for_each_domain_op!(ctl_trampolines);

// ---------------------------------------------------------------------------------------
// The host side of the entries above whose C conversion is written by hand: the
// public method that calls the slot (the provider method and the hook forwarder
// come from the list).

use crate::abi::object::ctl;
use crate::abi::object::ok_or_code;
use crate::abi::object::open_child;
use crate::abi::tables::call_slot;
use crate::attr::Info;
use crate::av::AddressVector;
use crate::cntr::Counter;
use crate::cq::CompletionQueue;
use crate::ep::Endpoint;
use crate::mr::MemoryRegion;

impl crate::domain::Domain {
    /// `fi_query_atomic`: whether and how far an atomic combination is supported.
    ///
    /// `flags` is checked here, before any provider sees it
    /// ([`AtomicQueryFlags::validate`](crate::flags::AtomicQueryFlags::validate)):
    /// unknown bits, or `FI_FETCH_ATOMIC` with `FI_COMPARE_ATOMIC`, are `FI_EBADFLAGS`.
    pub fn query_atomic(&self, datatype: Datatype, op: AtomicOp, flags: u64) -> Result<AtomicAttr> {
        crate::flags::AtomicQueryFlags::validate(flags)?;
        let mut a = AtomicAttr::default();
        // SAFETY: `a` valid for a write.
        ok_or_code(unsafe {
            call_slot!(
                self.t(),
                DomainTable.query_atomic(self.obj, datatype.to_raw(), op.to_raw(), &mut a, flags)
            )
        } as isize)?;
        Ok(a)
    }

    /// `fi_mr_regv`.
    ///
    /// # Safety
    /// As [`Domain::mr_reg`](Self::mr_reg), for every buffer of `iov`.
    pub unsafe fn mr_regv(
        &self,
        iov: &[Iov],
        access: OpFlags,
        offset: u64,
        requested_key: u64,
        flags: u64,
    ) -> Result<MemoryRegion> {
        let mut out = RawMr::empty();
        // SAFETY: as mr_reg.
        ctl(|e| unsafe {
            call_slot!(
                self.t(),
                DomainTable.mr_regv(
                    self.obj,
                    iov.as_ptr(),
                    iov.len(),
                    access.bits(),
                    offset,
                    requested_key,
                    flags,
                    0,
                    &mut out,
                    e
                )
            )
        })?;
        self.mr_from(&out)
    }

    /// `fi_mr_regattr`.
    ///
    /// # Safety
    /// As [`Domain::mr_reg`](Self::mr_reg), for every buffer of `attr.iov`.
    pub unsafe fn mr_regattr(&self, attr: &MrAttr<'_>, flags: u64) -> Result<MemoryRegion> {
        let raw = attr.to_raw();
        let mut out = RawMr::empty();
        // SAFETY: as mr_reg; `raw` points into `attr`, alive across the call.
        ctl(|e| unsafe {
            call_slot!(
                self.t(),
                DomainTable.mr_regattr(self.obj, &raw, flags, &mut out, e)
            )
        })?;
        self.mr_from(&out)
    }

    /// `fi_cntr_open`.
    pub fn cntr_open(&self, attr: &CntrAttr) -> Result<Counter> {
        self.cntr_open_common(attr, None, 0)
    }

    /// `fi_av_open`.
    pub fn av_open(&self, attr: &AvAttr) -> Result<AddressVector> {
        let raw = attr.to_raw();
        // SAFETY: our own object; `raw` (pointing into `attr`) and `out` live across the call.
        let (obj, ops, node) = open_child(&self.node, FidClass::Av, |out, e| unsafe {
            call_slot!(self.t(), DomainTable.av_open(self.obj, &raw, 0, out, e))
        })?;
        // SAFETY: the provider returned an AV and its table.
        Ok(unsafe { AddressVector::from_raw(obj, ops, node) })
    }

    /// `fi_mr_reg`: register `len` bytes at `buf` (`fi_mr_regv` with that one buffer;
    /// the provider sees the same registration either way).
    ///
    /// # Safety
    /// The memory must stay valid until the region is closed (and dropped).
    pub unsafe fn mr_reg(
        &self,
        buf: *const u8,
        len: usize,
        access: OpFlags,
        offset: u64,
        requested_key: u64,
        flags: u64,
    ) -> Result<MemoryRegion> {
        let iov = [Iov {
            base: buf as *mut c_void,
            len,
        }];
        // SAFETY: the caller's contract, for the one buffer.
        unsafe { self.mr_regv(&iov, access, offset, requested_key, flags) }
    }

    /// `fi_endpoint`: an active endpoint for `info`.
    pub fn endpoint(&self, info: &Info) -> Result<Endpoint> {
        self.endpoint_with(info, 0, 0)
    }

    /// `fi_scalable_ep`.
    pub fn scalable_ep(&self, info: &Info) -> Result<Endpoint> {
        let ib = RawInfoBox::new(info);
        // SAFETY: our own object; `ib` and `out` live across the call.
        Endpoint::open_child(&self.node, FidClass::Sep, |out, e| unsafe {
            call_slot!(
                self.t(),
                DomainTable.scalable_ep(self.obj, ib.as_ptr(), 0, out, e)
            )
        })
    }

    /// `fi_cq_open`.
    pub fn cq_open(&self, attr: &CqAttr) -> Result<CompletionQueue> {
        self.cq_open_with(attr, 0)
    }
}
