//! C objects over ofi objects: the wrapper every object shares, `fi_fabric`, and the
//! fabric, domain and memory-region tables.
//!
//! An object handed to C is a [`CObj`]: the C structure the headers describe (`struct
//! fid_fabric`, `struct fid_domain`, …) first, so the pointer the program holds is the
//! address of the whole wrapper, then the ofi object it wraps. A slot receives the C
//! pointer and reaches the ofi object through [`CObj::of`]. When a call hands one object
//! to another (`fi_ep_bind`, `fi_cq_open` of a domain), the argument's `ops` pointer is
//! compared with this library's table of the expected class first ([`cast_fid`]), so a
//! foreign or wrong object is `-FI_EINVAL`, never a bad cast.
//!
//! `fi_close` runs the ofi object's `close`; only when that succeeds is the wrapper
//! freed (a domain with open endpoints stays open and answers `-FI_EBUSY`).
//!
//! Invariants: every table here has every slot set; every slot runs in
//! [`crate::guard`]; contexts are stored and returned untouched.

use std::ffi::{c_int, c_void};
use std::ptr;

use ofi::abi::raw::Iov;
use ofi::domain::Domain;
use ofi::fabric::Fabric;
use ofi::mr::MemoryRegion;
use ofi::{Error, Info, OpFlags, Version};

use crate::fid::{CloseFn, FiOps, Fid, ENOSYS};
use crate::info::{info_from_c, FiFabricAttr, FiInfo};
use crate::{guard, status};

/// A C object: the C structure `C` (which starts with `struct fid`) and the ofi object.
#[repr(C)]
pub struct CObj<C, R> {
    /// What the program sees.
    pub c: C,
    /// The wrapped ofi object.
    pub r: R,
}

impl<C, R> CObj<C, R> {
    /// Boxes an object and returns the C pointer the program gets.
    pub fn into_c(c: C, r: R) -> *mut C {
        Box::into_raw(Box::new(CObj { c, r })).cast()
    }

    /// Boxes an object whose ofi side needs the C pointer first (as its context):
    /// `make` gets the address the program will hold.
    pub fn into_c_with(c: C, make: impl FnOnce(usize) -> ofi::Result<R>) -> ofi::Result<*mut C> {
        let mut slot = Box::new(std::mem::MaybeUninit::<CObj<C, R>>::uninit());
        let addr = slot.as_mut_ptr() as usize;
        let r = make(addr)?;
        slot.write(CObj { c, r });
        Ok(Box::into_raw(slot).cast())
    }

    /// The wrapper behind a C pointer.
    ///
    /// # Safety
    /// `p` was returned by [`CObj::into_c`] for these types and is not closed.
    pub unsafe fn of<'a>(p: *const C) -> &'a CObj<C, R> {
        // SAFETY: `c` is the first field of a `repr(C)` wrapper (contract).
        unsafe { &*p.cast::<CObj<C, R>>() }
    }

    /// Closes the ofi object with `close`; on success frees the wrapper.
    ///
    /// # Safety
    /// `p` was returned by [`CObj::into_c`] for these types; on success it is dangling.
    pub unsafe fn close_with(p: *mut C, close: impl FnOnce(&mut R) -> ofi::Result<()>) -> c_int {
        let wrapper = p.cast::<CObj<C, R>>();
        // SAFETY: a live wrapper (contract); the program does not use it concurrently
        // with its close (the C API's rule).
        match close(unsafe { &mut (*wrapper).r }) {
            Ok(()) => {
                // SAFETY: allocated by `into_c`; closed, so no slot will run on it.
                drop(unsafe { Box::from_raw(wrapper) });
                0
            }
            Err(e) => status(&e),
        }
    }
}

/// The `struct fid` of an object of class `fclass` with table `ops`.
pub fn fid_header(fclass: usize, context: *mut c_void, ops: &'static FiOps) -> Fid {
    Fid {
        fclass,
        context,
        ops: ptr::from_ref(ops).cast_mut(),
    }
}

/// The wrapper of `fid` when it is this library's object with table `ops`; else null.
///
/// # Safety
/// `fid` is null or a valid `struct fid`.
pub unsafe fn cast_fid<C, R>(fid: *const Fid, ops: &'static FiOps) -> Option<&'static CObj<C, R>> {
    // SAFETY: the caller's contract.
    let f = unsafe { fid.as_ref() }?;
    if ptr::eq(f.ops, ops) {
        // SAFETY: only objects of this wrapper type carry `ops`.
        Some(unsafe { CObj::<C, R>::of(fid.cast::<C>()) })
    } else {
        None
    }
}

/// `0` or the negative code of a result.
pub fn code(r: ofi::Result<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => status(&e),
    }
}

/// `-FI_EINVAL`.
pub const EINVAL: c_int = -libc::EINVAL;

/// Writes `value` to the out pointer `out` (refusing null), returning 0.
///
/// # Safety
/// `out` is null or writable.
pub unsafe fn put<T>(out: *mut T, value: T) -> c_int {
    if out.is_null() {
        return EINVAL;
    }
    // SAFETY: the caller's contract.
    unsafe { out.write(value) };
    0
}

/// Writes the value of `r` to the out pointer `out` (refusing null), returning 0, or
/// returns the code of its error.
///
/// # Safety
/// `out` is null or writable.
pub unsafe fn put_result<T>(out: *mut T, r: ofi::Result<T>) -> c_int {
    match r {
        // SAFETY: the caller's contract.
        Ok(value) => unsafe { put(out, value) },
        Err(e) => status(&e),
    }
}

/// The `count` entries at `p`: empty for a zero count, `None` for a null `p` with
/// entries (which the caller answers with `-FI_EINVAL`).
///
/// # Safety
/// `p` holds `count` valid entries when it is not null.
pub unsafe fn c_slice<'a, T>(p: *const T, count: usize) -> Option<&'a [T]> {
    if count == 0 {
        Some(&[])
    } else if p.is_null() {
        None
    } else {
        // SAFETY: the caller's contract.
        Some(unsafe { std::slice::from_raw_parts(p, count) })
    }
}

/// The Rust info of a C info argument (null is `-FI_EINVAL`).
///
/// # Safety
/// `info` is null or a valid info.
pub unsafe fn info_arg(info: *const FiInfo) -> Result<Info, c_int> {
    if info.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: the caller's contract.
    unsafe { info_from_c(info) }.map_err(|e| status(&e))
}

// ---------------------------------------------------------------------------------
// Fabric.

/// `struct fid_fabric`.
#[repr(C)]
pub struct FidFabric {
    /// `fid`.
    pub fid: Fid,
    /// `ops`.
    pub ops: *const FiOpsFabric,
    /// `api_version`.
    pub api_version: u32,
}

/// `struct fi_ops_fabric`.
#[repr(C)]
pub struct FiOpsFabric {
    /// `size`.
    pub size: usize,
    /// `domain`.
    pub domain: unsafe extern "C" fn(
        *mut FidFabric,
        *mut FiInfo,
        *mut *mut FidDomain,
        *mut c_void,
    ) -> c_int,
    /// `passive_ep`.
    pub passive_ep:
        unsafe extern "C" fn(*mut FidFabric, *mut FiInfo, *mut *mut c_void, *mut c_void) -> c_int,
    /// `eq_open`.
    pub eq_open:
        unsafe extern "C" fn(*mut FidFabric, *mut c_void, *mut *mut c_void, *mut c_void) -> c_int,
    /// `wait_open`.
    pub wait_open: unsafe extern "C" fn(*mut FidFabric, *mut c_void, *mut *mut c_void) -> c_int,
    /// `trywait`.
    pub trywait: unsafe extern "C" fn(*mut FidFabric, *mut *mut Fid, c_int) -> c_int,
    /// `domain2`.
    pub domain2: unsafe extern "C" fn(
        *mut FidFabric,
        *mut FiInfo,
        *mut *mut FidDomain,
        u64,
        *mut c_void,
    ) -> c_int,
}

/// A fabric object.
pub type FabricObj = CObj<FidFabric, Fabric>;

unsafe extern "C" fn fabric_close(fid: *mut Fid) -> c_int {
    // SAFETY: the slot of our own fabric table.
    guard(|| unsafe { FabricObj::close_with(fid.cast(), Fabric::close) })
}

/// The `fi_ops` of a fabric.
pub static FABRIC_FI_OPS: FiOps = FiOps::with_close(fabric_close as CloseFn);

crate::fid::open_without_flags! {
    /// `fi_domain` (the fabric table's slot).
    fn fabric_domain(*mut FidFabric, *mut *mut FidDomain) = fabric_domain2;
}

crate::fid::open_for_info! {
    /// `fi_domain2` (the fabric table's slot).
    fn fabric_domain2(fabric: *mut FidFabric as FabricObj, info,
        dom: *mut *mut FidDomain, flags: u64, context) = |f| {
        if flags != 0 {
            return Err(ENOSYS);
        }
        let opened = f.r.domain_with(&info, context as usize).map(|d| {
            let c = FidDomain {
                fid: fid_header(crate::fid::FI_CLASS_DOMAIN, context, &DOMAIN_FI_OPS),
                ops: &crate::queues::DOMAIN_OPS,
                mr: &MR_OPS,
            };
            let api_version = if info.fabric_attr.api_version == Version::default() {
                Version::from_raw(f.c.api_version)
            } else {
                info.fabric_attr.api_version
            };
            let state = DomainState {
                domain: d,
                addr_format: info.addr_format.to_raw(),
                api_version,
                fabric,
            };
            DomainObj::into_c(c, state)
        });
        // SAFETY: `dom` checked non-null, writable per the C API.
        Ok(unsafe { put_result(dom, opened) })
    }
}

unsafe extern "C" fn fabric_trywait(
    fabric: *mut FidFabric,
    fids: *mut *mut Fid,
    count: c_int,
) -> c_int {
    // SAFETY: our fabric; `fids` per the C API.
    guard(|| unsafe { crate::queues::trywait(fabric, fids, count) })
}

/// The `fi_ops_fabric` of a fabric.
pub static FABRIC_OPS: FiOpsFabric = crate::fid::ops_table!(FiOpsFabric {
    domain: fabric_domain,
    passive_ep: crate::endpoint::fabric_passive_ep,
    eq_open: crate::queues::fabric_eq_open,
    wait_open: crate::sets::fabric_wait_open,
    trywait: fabric_trywait,
    domain2: fabric_domain2,
});

/// The infos `fi_getinfo` returned, by (provider, fabric name): `fi_fabric` receives
/// only the fabric attributes, but a layered provider opens its fabric from the whole
/// info (the endpoint type and capabilities pick the provider beneath it).
static SEEN_INFOS: std::sync::Mutex<Vec<Info>> = std::sync::Mutex::new(Vec::new());

/// Remembers the infos of a `fi_getinfo` answer for [`open_fabric`] (one per provider
/// and fabric name: the latest wins).
pub fn remember_infos(infos: &[Info]) {
    let mut seen = SEEN_INFOS.lock().unwrap_or_else(|p| p.into_inner());
    for i in infos {
        seen.retain(|s| {
            s.fabric_attr.prov_name != i.fabric_attr.prov_name
                || s.fabric_attr.name != i.fabric_attr.name
        });
        seen.push(i.clone());
    }
}

/// `fi_fabric`: opens the fabric the attributes name (`prov_name` and `name`, as
/// `fi_getinfo` returned them).
///
/// # Safety
/// `attr` is null or valid; `fabric` null or writable.
pub unsafe fn open_fabric(
    attr: *const FiFabricAttr,
    fabric: *mut *mut FidFabric,
    context: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return EINVAL;
    };
    if fabric.is_null() {
        return EINVAL;
    }
    // SAFETY: the caller's contract (the strings of `attr`).
    let fabric_attr = unsafe { crate::info::fabric_from_c(a) };
    let mut info = {
        let seen = SEEN_INFOS.lock().unwrap_or_else(|p| p.into_inner());
        seen.iter()
            .find(|s| {
                s.fabric_attr.prov_name == fabric_attr.prov_name
                    && s.fabric_attr.name == fabric_attr.name
            })
            .cloned()
            .unwrap_or_default()
    };
    info.fabric_attr = fabric_attr;
    if info.fabric_attr.api_version == Version::default() {
        info.fabric_attr.api_version = ofi::API_VERSION;
    }
    let api_version = info.fabric_attr.api_version.to_raw();
    let opened = ofi::fabric(&info).inspect_err(|e| {
        ofi::ofi_debug!("core", "fabric", "fi_fabric: {e}");
    });
    let c = FidFabric {
        fid: fid_header(crate::fid::FI_CLASS_FABRIC, context, &FABRIC_FI_OPS),
        ops: &FABRIC_OPS,
        api_version,
    };
    // SAFETY: checked non-null; writable per the contract.
    unsafe { put_result(fabric, opened.map(|f| FabricObj::into_c(c, f))) }
}

// ---------------------------------------------------------------------------------
// Domain and memory regions.

/// `struct fid_domain`.
#[repr(C)]
pub struct FidDomain {
    /// `fid`.
    pub fid: Fid,
    /// `ops`.
    pub ops: *const crate::queues::FiOpsDomain,
    /// `mr`.
    pub mr: *const FiOpsMr,
}

/// What a domain object holds besides the C structure.
pub struct DomainState {
    /// The ofi domain.
    pub domain: Domain,
    /// The address format of the info it was opened with (how `fi_av_insert` reads
    /// packed addresses).
    pub addr_format: u32,
    /// The API version the program asked for (the CQ `err_data` rules).
    pub api_version: Version,
    /// The C fabric the domain was opened on (`fi_poll_open` opens the poll set on
    /// it). Valid while the domain is: a fabric with open domains cannot be closed.
    pub fabric: *const FidFabric,
}

/// A domain object.
pub type DomainObj = CObj<FidDomain, DomainState>;

unsafe extern "C" fn domain_close(fid: *mut Fid) -> c_int {
    // SAFETY: the slot of our own domain table.
    guard(|| unsafe { DomainObj::close_with(fid.cast(), |d| d.domain.close()) })
}

unsafe extern "C" fn domain_bind(fid: *mut Fid, bfid: *mut Fid, flags: u64) -> c_int {
    // SAFETY: our domain; `bfid` per the C API.
    guard(|| unsafe {
        crate::queues::bind_eq_of(bfid, |eq| {
            DomainObj::of(fid.cast()).r.domain.bind_eq(eq, flags)
        })
    })
}

/// The `fi_ops` of a domain.
pub static DOMAIN_FI_OPS: FiOps = FiOps {
    bind: Some(domain_bind),
    ..FiOps::with_close(domain_close)
};

/// `struct fid_mr`.
#[repr(C)]
pub struct FidMr {
    /// `fid`.
    pub fid: Fid,
    /// `mem_desc`: what data calls take as `desc`.
    pub mem_desc: *mut c_void,
    /// `key`: what peers use.
    pub key: u64,
}

/// A memory-region object.
pub type MrObj = CObj<FidMr, MemoryRegion>;

unsafe extern "C" fn mr_close(fid: *mut Fid) -> c_int {
    // SAFETY: the slot of our own MR table.
    guard(|| unsafe { MrObj::close_with(fid.cast(), MemoryRegion::close) })
}

unsafe extern "C" fn mr_bind(fid: *mut Fid, bfid: *mut Fid, flags: u64) -> c_int {
    guard(|| {
        // SAFETY: our MR; `bfid` per the C API.
        let mr = unsafe { MrObj::of(fid.cast()) };
        // SAFETY: as above.
        if let Some(ep) = unsafe { crate::endpoint::ep_of(bfid) } {
            return code(mr.r.bind_ep(&ep.r.ep, flags));
        }
        // SAFETY: as above.
        if let Some(cntr) = unsafe { crate::queues::cntr_of(bfid) } {
            return code(mr.r.bind_cntr(&cntr.r, flags));
        }
        EINVAL
    })
}

unsafe extern "C" fn mr_control(fid: *mut Fid, command: c_int, arg: *mut c_void) -> c_int {
    guard(|| {
        // SAFETY: our MR.
        let mr = unsafe { MrObj::of(fid.cast()) };
        match command {
            FI_ENABLE => code(mr.r.enable()),
            // SAFETY: `arg` is a `struct fi_mr_modify` for FI_REFRESH (C API).
            FI_REFRESH => unsafe { mr_refresh(mr, arg.cast::<FiMrModify>()) },
            _ => ENOSYS,
        }
    })
}

/// `fi_mr_refresh`: the `iov` list of the modify's attribute, with its flags.
///
/// # Safety
/// `m` is null or a valid `struct fi_mr_modify` whose `mr_iov` holds `iov_count`
/// entries.
unsafe fn mr_refresh(mr: &MrObj, m: *const FiMrModify) -> c_int {
    // SAFETY: the caller's contract.
    let Some(m) = (unsafe { m.as_ref() }) else {
        return EINVAL;
    };
    // SAFETY: `iov_count` entries (the caller's contract).
    let Some(iovs) = (unsafe { c_slice(m.attr.mr_iov, m.attr.iov_count) }) else {
        return EINVAL;
    };
    code(mr.r.refresh(iovs, m.flags))
}

/// `FI_ENABLE` (the `fi_control` command).
pub const FI_ENABLE: c_int = 6;
/// `FI_REFRESH` (the `fi_control` command).
pub const FI_REFRESH: c_int = 14;

/// `struct fi_mr_modify`: what `fi_mr_refresh` passes to `fi_control`.
#[repr(C)]
pub struct FiMrModify {
    /// `flags`.
    pub flags: u64,
    /// `attr`: its `mr_iov` / `iov_count` are the refreshed ranges.
    pub attr: FiMrAttr,
}

/// The `fi_ops` of a memory region.
pub static MR_FI_OPS: FiOps = FiOps {
    bind: Some(mr_bind),
    control: Some(mr_control),
    ..FiOps::with_close(mr_close)
};

/// The type of the slots `reg` and `regv` of `struct fi_ops_mr`, which differ only in
/// their buffers `B`: one buffer (`const void *` and its length) or an iov list
/// (`const struct iovec *` and its count).
pub type MrRegFn<B> = unsafe extern "C" fn(
    *mut Fid,
    B,
    usize,
    u64,
    u64,
    u64,
    u64,
    *mut *mut FidMr,
    *mut c_void,
) -> c_int;

/// `struct fi_ops_mr`.
#[repr(C)]
pub struct FiOpsMr {
    /// `size`.
    pub size: usize,
    /// `reg`.
    pub reg: MrRegFn<*const c_void>,
    /// `regv`.
    pub regv: MrRegFn<*const Iov>,
    /// `regattr`.
    pub regattr: unsafe extern "C" fn(*mut Fid, *const FiMrAttr, u64, *mut *mut FidMr) -> c_int,
}

/// `struct fi_mr_attr` (1.17).
#[repr(C)]
pub struct FiMrAttr {
    /// `mr_iov`.
    pub mr_iov: *const ofi::abi::raw::Iov,
    /// `iov_count`.
    pub iov_count: usize,
    /// `access`.
    pub access: u64,
    /// `offset`.
    pub offset: u64,
    /// `requested_key`.
    pub requested_key: u64,
    /// `context`.
    pub context: *mut c_void,
    /// `auth_key_size`.
    pub auth_key_size: usize,
    /// `auth_key`.
    pub auth_key: *mut u8,
    /// `iface` (`enum fi_hmem_iface`).
    pub iface: u32,
    /// `device` (a union of 8 bytes).
    pub device: u64,
}

/// Wraps a registration for C.
fn mr_to_c(mr: MemoryRegion, context: *mut c_void) -> *mut FidMr {
    let c = FidMr {
        fid: fid_header(crate::fid::FI_CLASS_MR, context, &MR_FI_OPS),
        mem_desc: mr.desc(),
        key: mr.key(),
    };
    MrObj::into_c(c, mr)
}

/// What the registration slots share: a null `out` is `-FI_EINVAL`; else `reg` registers
/// on the domain behind `fid` and the region goes to `out` for C.
///
/// # Safety
/// `fid` is a domain of this library (the `mr` table sits in our domains only); `out`
/// is null or writable.
unsafe fn register(
    fid: *mut Fid,
    out: *mut *mut FidMr,
    context: *mut c_void,
    reg: impl FnOnce(&Domain) -> ofi::Result<MemoryRegion>,
) -> c_int {
    if out.is_null() {
        return EINVAL;
    }
    // SAFETY: the caller's contract.
    let d = unsafe { DomainObj::of(fid.cast()) };
    let made = reg(&d.r.domain).map(|mr| mr_to_c(mr, context));
    // SAFETY: checked non-null.
    unsafe { put_result(out, made) }
}

/// Defines the slots `reg` and `regv` of `fi_ops_mr` (types [`MrRegFn`]): `body`
/// hands the slot's buffers (its parameters `buffers`) as an iov list to `regv` (given
/// its name), which registers them on the domain behind `fid` ([`register`]) with the
/// slot's access, offset, requested key and flags.
macro_rules! mr_reg_slots {
    ($($slot:ident($($buffers:ident: $bt:ty),*) = |$regv:ident| $body:expr;)*) => {$(
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $slot(
            fid: *mut Fid,
            $($buffers: $bt,)*
            access: u64,
            offset: u64,
            requested_key: u64,
            flags: u64,
            mr: *mut *mut FidMr,
            context: *mut c_void,
        ) -> c_int {
            let access = OpFlags::from_bits_retain(access);
            guard(|| {
                let $regv = |iov: &[Iov]| {
                    // SAFETY: the slot of our domains' `mr` table; the memory per the C
                    // API (the program keeps it registered).
                    unsafe {
                        register(fid, mr, context, |d| {
                            d.mr_regv(iov, access, offset, requested_key, flags)
                        })
                    }
                };
                $body
            })
        }
    )*};
}

mr_reg_slots! {
    mr_reg(buf: *const c_void, len: usize) = |regv| regv(&[Iov { base: buf.cast_mut(), len }]);
    mr_regv(iov: *const Iov, count: usize) = |regv| {
        // SAFETY: `count` entries per the C API.
        match unsafe { c_slice(iov, count) } {
            Some(iovs) => regv(iovs),
            None => EINVAL,
        }
    };
}

unsafe extern "C" fn mr_regattr(
    fid: *mut Fid,
    attr: *const FiMrAttr,
    flags: u64,
    mr: *mut *mut FidMr,
) -> c_int {
    guard(|| {
        // SAFETY: per the C API.
        let Some(a) = (unsafe { attr.as_ref() }) else {
            return EINVAL;
        };
        if a.iface != 0 {
            return code(Err(Error::new(
                ofi::Errno::ENOSYS,
                "device memory registration",
            )));
        }
        // SAFETY: forwarded; the attribute's fields per the C API.
        unsafe {
            mr_regv(
                fid,
                a.mr_iov,
                a.iov_count,
                a.access,
                a.offset,
                a.requested_key,
                flags,
                mr,
                a.context,
            )
        }
    })
}

/// The `fi_ops_mr` of a domain.
pub static MR_OPS: FiOpsMr = crate::fid::ops_table!(FiOpsMr {
    reg: mr_reg,
    regv: mr_regv,
    regattr: mr_regattr,
});
