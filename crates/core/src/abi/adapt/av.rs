//! AV slots of the adapters (see [`super`] for the object pointers and panics).

use super::*;

eq_bind_slot!(
    /// Slot `bind` of the `av` table.
    av_bind,
    AvOf<F>,
    "av.bind",
    "AV bind: only an event queue can be bound"
);

/// Count result as the AV's `i32` status.
pub(super) fn av_count(r: Result<usize>) -> i32 {
    match r {
        Ok(n) => n.min(i32::MAX as usize) as i32,
        Err(e) => e.code().to_status(),
    }
}

/// Slot `insert` of the `av` table.
/// # Safety
/// `av` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn av_insert<F: FabricOps>(
    av: Obj,
    addrs: *const RawAddr,
    count: usize,
    fi_addr: *mut u64,
    flags: u64,
    context: usize,
) -> i32 {
    guard("av.insert", || {
        av_count(run(|| {
            // SAFETY: arrays valid for `count` (contract).
            let raw = unsafe { sl_req(addrs, count, "insert: null address array")? };
            let mut list = Vec::with_capacity(raw.len());
            for (i, r) in raw.iter().enumerate() {
                // SAFETY: each address's bytes valid (contract).
                match unsafe { r.to_address("address") } {
                    Ok(Some(a)) => list.push(a),
                    Ok(None) => {
                        return Err(Error::new(
                            Errno::EINVAL,
                            format!("insert: address #{i} is null"),
                        ))
                    }
                    // Bytes that do not decode fail only their own entry (fi_av(3)):
                    // they go on as opaque bytes, which the provider refuses.
                    Err(_) => list.push(crate::addr::Address::Raw {
                        format: crate::enums::AddrFormat::from_raw(r.format),
                        // SAFETY: non-null (checked by `to_address`) and valid for
                        // `len` bytes (contract).
                        bytes: unsafe { std::slice::from_raw_parts(r.ptr, r.len) }.to_vec(),
                    }),
                }
            }
            let mut scratch;
            let out: &mut [u64] = if fi_addr.is_null() {
                scratch = vec![0u64; count];
                &mut scratch
            } else {
                // SAFETY: valid for `count` writes (contract).
                unsafe { sl_mut(fi_addr, count, "insert: null fi_addr")? }
            };
            // SAFETY: our boxed AV.
            unsafe { ob::<AvOf<F>>(av) }.insert(&list, out, flags, context)
        }))
    })
}

/// Slot `insertsvc` of the `av` table.
/// # Safety
/// `av` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn av_insertsvc<F: FabricOps>(
    av: Obj,
    node: RawStr,
    service: RawStr,
    fi_addr: *mut u64,
    flags: u64,
    context: usize,
) -> i32 {
    guard("av.insertsvc", || {
        av_count(run(|| {
            need_out(fi_addr)?;
            // SAFETY: strings valid (contract).
            let (n, s) = unsafe {
                (
                    node.str("node")?.unwrap_or(""),
                    service.str("service")?.unwrap_or(""),
                )
            };
            // SAFETY: our boxed AV; `fi_addr` valid (contract).
            unsafe { ob::<AvOf<F>>(av).insertsvc(n, s, &mut *fi_addr, flags, context) }
        }))
    })
}

/// Slot `insertsym` of the `av` table.
/// # Safety
/// `av` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn av_insertsym<F: FabricOps>(
    av: Obj,
    node: RawStr,
    nodecnt: usize,
    service: RawStr,
    svccnt: usize,
    fi_addr: *mut u64,
    flags: u64,
    context: usize,
) -> i32 {
    guard("av.insertsym", || {
        av_count(run(|| {
            let total = nodecnt
                .checked_mul(svccnt)
                .ok_or_else(|| Error::new(Errno::EINVAL, "insertsym: count overflows"))?;
            // SAFETY: strings and `fi_addr` valid (contract).
            unsafe {
                let (n, s) = (
                    node.str("node")?.unwrap_or(""),
                    service.str("service")?.unwrap_or(""),
                );
                let out = sl_mut(fi_addr, total, "insertsym: null fi_addr")?;
                ob::<AvOf<F>>(av).insertsym(n, nodecnt, s, svccnt, out, flags, context)
            }
        }))
    })
}

/// Slot `lookup` of the `av` table.
/// # Safety
/// `av` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn av_lookup<F: FabricOps>(
    av: Obj,
    fi_addr: u64,
    addr: *mut u8,
    addrlen: *mut usize,
    format: *mut u32,
) -> i32 {
    guard("av.lookup", || {
        st32(run(|| {
            // SAFETY: our boxed AV.
            let a = unsafe { ob::<AvOf<F>>(av) }.lookup(fi_addr)?;
            if !format.is_null() {
                // SAFETY: non-null, valid (contract).
                unsafe { format.write(a.format().to_raw()) };
            }
            // SAFETY: buffers valid (contract).
            unsafe { copy_out(&a.to_bytes(), addr, addrlen) }
        }))
    })
}

/// Slot `straddr` of the `av` table.
/// # Safety
/// `av` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn av_straddr<F: FabricOps>(
    av: Obj,
    addr: RawAddr,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guard("av.straddr", || {
        st32(run(|| {
            // SAFETY: the address bytes are valid (contract).
            let a = unsafe { addr.to_address("address") }?
                .ok_or_else(|| Error::new(Errno::EINVAL, "straddr: null address"))?;
            // SAFETY: our boxed AV.
            let text = unsafe { ob::<AvOf<F>>(av) }.straddr(&a);
            // SAFETY: buffers valid (contract).
            unsafe { copy_out(text.as_bytes(), buf, len) }
        }))
    })
}

// ---------------------------------------------------------------------------------------

boxed_objects!(AvOf<F>);

// The table: the trampolines of the `op` entries, the adapters of the `fn` entries.
crate::for_each_av_op!(ctl_trampolines);

// ---------------------------------------------------------------------------------------
// The host side of the entries above whose C conversion is written by hand: the
// public method that calls the slot (the provider method and the hook forwarder
// come from the list).

use crate::abi::object::read_sized;
use crate::abi::tables::call_slot;
use crate::addr::Address;
use crate::av::av_status;
use crate::enums::AddrFormat;

impl crate::av::AddressVector {
    /// `fi_av_lookup`: the address behind a fabric address.
    pub fn lookup(&self, fi_addr: u64) -> Result<Address> {
        let mut format = 0u32;
        // SAFETY: `read_sized` passes a buffer and its length; `format` valid.
        let bytes = read_sized(|b, l| unsafe {
            call_slot!(
                self.t(),
                AvTable.lookup(self.obj, fi_addr, b, l, &mut format)
            )
        })?;
        Address::from_bytes(AddrFormat::from_raw(format), &bytes)
    }

    /// `fi_av_insert`: one fabric address per address (`FI_ADDR_NOTAVAIL` for the ones
    /// that failed).
    pub fn insert(&self, addrs: &[Address]) -> Result<Vec<u64>> {
        let mut out = vec![crate::enums::ADDR_NOTAVAIL; addrs.len()];
        self.insert_into(addrs, &mut out, 0, 0)?;
        Ok(out)
    }

    /// `fi_av_insertsvc`: one node and service.
    pub fn insertsvc(&self, node: &str, service: &str, flags: u64) -> Result<u64> {
        let mut fi_addr = crate::enums::ADDR_NOTAVAIL;
        // SAFETY: the strings and `fi_addr` live across the call.
        av_status(unsafe {
            call_slot!(
                self.t(),
                AvTable.insertsvc(
                    self.obj,
                    RawStr::from_text(node),
                    RawStr::from_text(service),
                    &mut fi_addr,
                    flags,
                    0
                )
            )
        })?;
        Ok(fi_addr)
    }

    /// `fi_av_insertsym`: `nodecnt` nodes from `node` and `svccnt` services from
    /// `service`; returns `nodecnt * svccnt` fabric addresses.
    pub fn insertsym(
        &self,
        node: &str,
        nodecnt: usize,
        service: &str,
        svccnt: usize,
        flags: u64,
    ) -> Result<Vec<u64>> {
        let total = nodecnt
            .checked_mul(svccnt)
            .ok_or_else(|| Error::new(Errno::EINVAL, "insertsym: count overflows"))?;
        let mut out = vec![crate::enums::ADDR_NOTAVAIL; total];
        // SAFETY: the strings and `out` live across the call; `out` holds `total`.
        av_status(unsafe {
            call_slot!(
                self.t(),
                AvTable.insertsym(
                    self.obj,
                    RawStr::from_text(node),
                    nodecnt,
                    RawStr::from_text(service),
                    svccnt,
                    out.as_mut_ptr(),
                    flags,
                    0
                )
            )
        })?;
        Ok(out)
    }

    /// `fi_av_straddr`: the provider's text for an address.
    pub fn straddr(&self, addr: &Address) -> Result<String> {
        let bytes = addr.to_bytes();
        let raw = RawAddr::new(addr.format(), &bytes);
        // SAFETY: `raw` points into `bytes`, alive across the calls.
        let text = read_sized(|b, l| unsafe {
            call_slot!(self.t(), AvTable.straddr(self.obj, raw, b, l))
        })?;
        String::from_utf8(text)
            .map_err(|_| Error::new(Errno::EOTHER, "straddr: provider text is not UTF-8"))
    }
}
