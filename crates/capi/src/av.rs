//! Address vectors in C: `struct fid_av` and `fi_ops_av`.
//!
//! Addresses arrive packed, in the domain's address format: socket addresses are read
//! by their family (16 or 28 bytes), `FI_ADDR_STR` addresses are consecutive
//! NUL-terminated strings. Other formats are `-FI_EINVAL` for `fi_av_insert` (their
//! length is not known here).
//!
//! Invariants: as in [`crate::obj`].

use std::ffi::{c_char, c_int, c_void};
use std::ptr;

use ofi::av::{AddressVector, AvAttr};
use ofi::{AddrFormat, Address, AvFlags, AvType, Errno, Error};

use crate::fid::{FiOps, Fid};
use crate::info::opt_str;
use crate::obj::{cast_fid, code, fid_header, put_result, CObj, DomainObj, FidDomain, EINVAL};
use crate::queues::{bind_eq_of, entries, text_out};
use crate::{guard, status};

/// `struct fi_av_attr`.
#[repr(C)]
pub struct FiAvAttr {
    /// `type`.
    pub av_type: u32,
    /// `rx_ctx_bits`.
    pub rx_ctx_bits: c_int,
    /// `count`.
    pub count: usize,
    /// `ep_per_node`.
    pub ep_per_node: usize,
    /// `name`.
    pub name: *const c_char,
    /// `map_addr`.
    pub map_addr: *mut c_void,
    /// `flags`.
    pub flags: u64,
}

/// `struct fid_av`.
#[repr(C)]
pub struct FidAv {
    /// `fid`.
    pub fid: Fid,
    /// `ops`.
    pub ops: *const FiOpsAv,
}

/// What an AV object holds.
pub struct AvState {
    /// The ofi AV.
    pub av: AddressVector,
    /// The domain's address format (how packed addresses are read).
    pub addr_format: AddrFormat,
}

/// An AV object.
pub type AvObj = CObj<FidAv, AvState>;

/// `struct fi_ops_av`.
#[repr(C)]
pub struct FiOpsAv {
    /// `size`.
    pub size: usize,
    /// `insert`.
    pub insert:
        unsafe extern "C" fn(*mut FidAv, *const c_void, usize, *mut u64, u64, *mut c_void) -> c_int,
    /// `insertsvc`.
    pub insertsvc: unsafe extern "C" fn(
        *mut FidAv,
        *const c_char,
        *const c_char,
        *mut u64,
        u64,
        *mut c_void,
    ) -> c_int,
    /// `insertsym`.
    pub insertsym: unsafe extern "C" fn(
        *mut FidAv,
        *const c_char,
        usize,
        *const c_char,
        usize,
        *mut u64,
        u64,
        *mut c_void,
    ) -> c_int,
    /// `remove`.
    pub remove: unsafe extern "C" fn(*mut FidAv, *mut u64, usize, u64) -> c_int,
    /// `lookup`.
    pub lookup: unsafe extern "C" fn(*mut FidAv, u64, *mut c_void, *mut usize) -> c_int,
    /// `straddr`.
    pub straddr:
        unsafe extern "C" fn(*mut FidAv, *const c_void, *mut c_char, *mut usize) -> *const c_char,
    /// `av_set`.
    pub av_set:
        unsafe extern "C" fn(*mut FidAv, *mut c_void, *mut *mut c_void, *mut c_void) -> c_int,
}

/// Reads the one packed address of `format` at `p` (`fi_connect`, `fi_join`,
/// `fi_av_straddr`); a null `p` is `FI_EINVAL`.
///
/// # Safety
/// `p` is null or holds one address of `format`.
pub unsafe fn packed_addr(format: AddrFormat, p: *const c_void) -> ofi::Result<Address> {
    if p.is_null() {
        return Err(Error::new(Errno::EINVAL, "null address"));
    }
    // SAFETY: the caller's contract.
    let mut one = unsafe { packed_addrs(format, p.cast(), 1) }?;
    one.pop()
        .ok_or_else(|| Error::new(Errno::EINVAL, "no address read"))
}

/// Reads `count` packed addresses of `format` at `p` (`FI_ADDR_STR`: consecutive
/// NUL-terminated strings; `FI_SOCKADDR`: each by its family).
///
/// # Safety
/// `p` holds `count` addresses of `format`.
pub unsafe fn packed_addrs(
    format: AddrFormat,
    p: *const u8,
    count: usize,
) -> ofi::Result<Vec<Address>> {
    let mut out = Vec::with_capacity(count);
    let mut at = p;
    for _ in 0..count {
        // Socket addresses are read by their family, whatever IP format the domain
        // states (the providers' names can be either; the C library passes bytes on).
        let (format, len) = match format {
            AddrFormat::SOCKADDR | AddrFormat::SOCKADDR_IN | AddrFormat::SOCKADDR_IN6 => {
                // SAFETY: a sockaddr starts with its 2-byte family (contract).
                let family = unsafe { at.cast::<u16>().read_unaligned() };
                if family.to_ne_bytes() == *b"fi" {
                    // An address string (`fi_…://…`), as some providers name endpoints.
                    // SAFETY: a NUL-terminated string (contract).
                    (AddrFormat::STR, (unsafe { libc::strlen(at.cast()) }) + 1)
                } else if c_int::from(family) == libc::AF_INET6 {
                    (AddrFormat::SOCKADDR_IN6, ofi::addr::SOCKADDR_IN6_LEN)
                } else {
                    (AddrFormat::SOCKADDR_IN, ofi::addr::SOCKADDR_IN_LEN)
                }
            }
            // SAFETY: a NUL-terminated string (contract).
            AddrFormat::STR => (format, (unsafe { libc::strlen(at.cast()) }) + 1),
            _ => {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("fi_av_insert: packed addresses of format {format} are not supported"),
                ))
            }
        };
        // SAFETY: `len` bytes of this address (contract).
        let bytes = unsafe { std::slice::from_raw_parts(at, len) };
        out.push(Address::from_bytes(format, bytes)?);
        // SAFETY: the next address follows (contract).
        at = unsafe { at.add(len) };
    }
    Ok(out)
}

unsafe extern "C" fn av_close(fid: *mut Fid) -> c_int {
    // SAFETY: the slot of our own AV table.
    guard(|| unsafe { AvObj::close_with(fid.cast(), |a| a.av.close()) })
}

unsafe extern "C" fn av_bind(fid: *mut Fid, bfid: *mut Fid, flags: u64) -> c_int {
    // SAFETY: our AV; `bfid` per the C API.
    guard(|| unsafe { bind_eq_of(bfid, |eq| AvObj::of(fid.cast()).r.av.bind_eq(eq, flags)) })
}

/// The `fi_ops` of an AV.
pub static AV_FI_OPS: FiOps = FiOps {
    bind: Some(av_bind),
    ..FiOps::with_close(av_close)
};

unsafe extern "C" fn av_insert(
    av: *mut FidAv,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut u64,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: our AV.
        let a = unsafe { AvObj::of(av) };
        if addr.is_null() && count > 0 {
            return EINVAL;
        }
        // SAFETY: `count` packed addresses (C API).
        let addrs = match unsafe { packed_addrs(a.r.addr_format, addr.cast(), count) } {
            Ok(v) => v,
            Err(e) => return status(&e),
        };
        let mut out = vec![ofi::ADDR_NOTAVAIL; count];
        let r =
            a.r.av
                .insert_into(&addrs, &mut out, flags, context as usize);
        if !fi_addr.is_null() {
            // SAFETY: `fi_addr` holds `count` entries (C API).
            unsafe { ptr::copy_nonoverlapping(out.as_ptr(), fi_addr, count) };
        }
        match r {
            Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
            Err(e) => status(&e),
        }
    })
}

/// The part `fi_av_insertsvc` and `fi_av_insertsym` share: both strings are required
/// (`FI_EINVAL` when null or not UTF-8); `insert` gets them and gives the return value,
/// its error becoming the negative code.
///
/// # Safety
/// `av` is an AV of this library; `node` and `service` are null or valid strings.
unsafe fn insert_by_name(
    av: *mut FidAv,
    node: *const c_char,
    service: *const c_char,
    insert: impl FnOnce(&AvObj, &str, &str) -> ofi::Result<c_int>,
) -> c_int {
    guard(|| {
        // SAFETY: our AV; the strings per the C API (this function's contract).
        let (a, node, service) = unsafe { (AvObj::of(av), opt_str(node), opt_str(service)) };
        let (Some(node), Some(service)) = (node, service) else {
            return EINVAL;
        };
        insert(a, &node, &service).unwrap_or_else(|e| status(&e))
    })
}

unsafe extern "C" fn av_insertsvc(
    av: *mut FidAv,
    node: *const c_char,
    service: *const c_char,
    fi_addr: *mut u64,
    flags: u64,
    _context: *mut c_void,
) -> c_int {
    let insert = |a: &AvObj, node: &str, service: &str| {
        let x = a.r.av.insertsvc(node, service, flags)?;
        if !fi_addr.is_null() {
            // SAFETY: per the C API.
            unsafe { fi_addr.write(x) };
        }
        Ok(1)
    };
    // SAFETY: per the C API.
    unsafe { insert_by_name(av, node, service, insert) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn av_insertsym(
    av: *mut FidAv,
    node: *const c_char,
    nodecnt: usize,
    service: *const c_char,
    svccnt: usize,
    fi_addr: *mut u64,
    flags: u64,
    _context: *mut c_void,
) -> c_int {
    let insert = |a: &AvObj, node: &str, service: &str| {
        let v = a.r.av.insertsym(node, nodecnt, service, svccnt, flags)?;
        if !fi_addr.is_null() {
            // SAFETY: room for nodecnt * svccnt entries (C API).
            unsafe { ptr::copy_nonoverlapping(v.as_ptr(), fi_addr, v.len()) };
        }
        // The number inserted: an address that failed to resolve is
        // `FI_ADDR_NOTAVAIL` in the output and not counted.
        let inserted = v.iter().filter(|&&a| a != ofi::ADDR_NOTAVAIL).count();
        Ok(c_int::try_from(inserted).unwrap_or(c_int::MAX))
    };
    // SAFETY: per the C API.
    unsafe { insert_by_name(av, node, service, insert) }
}

unsafe extern "C" fn av_remove(
    av: *mut FidAv,
    fi_addr: *mut u64,
    count: usize,
    flags: u64,
) -> c_int {
    guard(|| {
        // SAFETY: our AV; `count` addresses (C API).
        let (a, list) = unsafe { (AvObj::of(av), entries::<u64>(fi_addr.cast(), count)) };
        code(a.r.av.remove(list, flags))
    })
}

unsafe extern "C" fn av_lookup(
    av: *mut FidAv,
    fi_addr: u64,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: our AV; `addrlen` per the C API.
        let (a, room) = unsafe { (AvObj::of(av), addrlen.as_mut()) };
        let Some(room) = room else { return EINVAL };
        let bytes = match a.r.av.lookup(fi_addr) {
            Ok(x) => x.to_bytes(),
            Err(e) => return status(&e),
        };
        let n = bytes.len().min(*room);
        if !addr.is_null() {
            // SAFETY: `addr` holds `*room` bytes (C API).
            unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), addr.cast::<u8>(), n) };
        }
        let fits = bytes.len() <= *room;
        *room = bytes.len();
        if fits {
            0
        } else {
            -Errno::ETOOSMALL.0
        }
    })
}

unsafe extern "C" fn av_straddr(
    av: *mut FidAv,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut usize,
) -> *const c_char {
    guard(|| {
        // SAFETY: our AV; one address and `len` per the C API.
        let (a, room) = unsafe { (AvObj::of(av), len.as_mut()) };
        let Some(room) = room else { return ptr::null() };
        // SAFETY: null or one address of the AV's format (C API).
        let text = match unsafe { packed_addr(a.r.addr_format, addr) } {
            Ok(one) => a.r.av.straddr(&one).unwrap_or_else(|_| one.to_addr_str()),
            Err(_) => return ptr::null(),
        };
        let given = *room;
        *room = text.len() + 1;
        // SAFETY: `buf` holds `given` bytes (C API).
        unsafe { text_out(&text, buf, given) }
    })
}

crate::queues::enosys_out_slots! {
    fn av_set_enosys(*mut FidAv, *mut c_void; out: *mut *mut c_void; *mut c_void);
}

/// The `fi_ops_av` of an AV.
pub static AV_OPS: FiOpsAv = crate::fid::ops_table!(FiOpsAv {
    insert: av_insert,
    insertsvc: av_insertsvc,
    insertsym: av_insertsym,
    remove: av_remove,
    lookup: av_lookup,
    straddr: av_straddr,
    av_set: av_set_enosys,
});

/// `fi_av_open` (the domain table's slot).
///
/// # Safety
/// `domain` is a domain of this library; the other pointers per the C API.
pub unsafe extern "C" fn domain_av_open(
    domain: *mut FidDomain,
    attr: *mut FiAvAttr,
    av: *mut *mut FidAv,
    context: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: our domain; `attr` per the C API.
        let (d, attr) = unsafe { (DomainObj::of(domain), attr.as_ref()) };
        let Some(attr) = attr else { return EINVAL };
        let Some(av_type) = AvType::from_raw(attr.av_type) else {
            return EINVAL;
        };
        let a = AvAttr {
            av_type,
            rx_ctx_bits: attr.rx_ctx_bits,
            count: attr.count,
            ep_per_node: attr.ep_per_node,
            // SAFETY: per the C API.
            name: unsafe { opt_str(attr.name) },
            map_addr: attr.map_addr as usize,
            flags: AvFlags::from_bits_retain(attr.flags),
        };
        let made = d.r.domain.av_open(&a).map(|v| {
            let c = FidAv {
                fid: fid_header(crate::fid::FI_CLASS_AV, context, &AV_FI_OPS),
                ops: &AV_OPS,
            };
            let state = AvState {
                av: v,
                addr_format: AddrFormat(d.r.addr_format),
            };
            AvObj::into_c(c, state)
        });
        // SAFETY: `av` per the C API.
        unsafe { put_result(av, made) }
    })
}

/// Our AV behind `fid`, if it is one.
///
/// # Safety
/// `fid` is null or a valid `struct fid`.
pub unsafe fn av_of(fid: *const Fid) -> Option<&'static AvObj> {
    // SAFETY: the caller's contract.
    unsafe { cast_fid(fid, &AV_FI_OPS) }
}
