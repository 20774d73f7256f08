//! rdma-core opened at run time: `libibverbs.so.1` loaded with `libloading` (the name can
//! be overridden with `OFI_RDMA_IBVERBS_LIB`, which tests use to point at a library that
//! does not exist), and the device list read through it.
//!
//! Nothing is linked: a process without rdma-core starts and gets one line saying why
//! there is no device.

pub mod ffi;

use std::ffi::CStr;
use std::sync::OnceLock;

use ofi_core::{Errno, Error, Result};

/// The library name looked for.
pub const IBVERBS_LIB: &str = "libibverbs.so.1";

/// The loaded library and the entry points used so far.
pub struct IbVerbs {
    _lib: libloading::Library,
    /// `ibv_get_device_list`
    pub get_device_list: unsafe extern "C" fn(*mut libc::c_int) -> *mut *mut ffi::IbvDevice,
    /// `ibv_free_device_list`
    pub free_device_list: unsafe extern "C" fn(*mut *mut ffi::IbvDevice),
    /// `ibv_get_device_name`
    pub get_device_name: unsafe extern "C" fn(*mut ffi::IbvDevice) -> *const libc::c_char,
    /// `ibv_get_device_guid` (network byte order)
    pub get_device_guid: unsafe extern "C" fn(*mut ffi::IbvDevice) -> u64,
}

fn lib_name() -> String {
    std::env::var("OFI_RDMA_IBVERBS_LIB").unwrap_or_else(|_| IBVERBS_LIB.to_string())
}

/// Loads `name` and resolves the entry points; the error is the one-line reason.
pub fn load(name: &str) -> std::result::Result<IbVerbs, String> {
    // SAFETY: loading rdma-core runs its constructors, which only set up its own state.
    let lib = unsafe { libloading::Library::new(name) }.map_err(|_| format!("{name} not found"))?;
    macro_rules! sym {
        ($n:literal) => {
            // SAFETY: the symbol has the C signature of the field it is stored in (from
            // <infiniband/verbs.h>); the library stays loaded as long as the pointer.
            *unsafe { lib.get($n) }.map_err(|_| {
                format!(
                    "{name}: symbol {} missing",
                    String::from_utf8_lossy(&$n[..$n.len() - 1])
                )
            })?
        };
    }
    Ok(IbVerbs {
        get_device_list: sym!(b"ibv_get_device_list\0"),
        free_device_list: sym!(b"ibv_free_device_list\0"),
        get_device_name: sym!(b"ibv_get_device_name\0"),
        get_device_guid: sym!(b"ibv_get_device_guid\0"),
        _lib: lib,
    })
}

/// The process-wide library (loaded once; the name is read once).
pub fn ibverbs() -> std::result::Result<&'static IbVerbs, String> {
    static LIB: OnceLock<std::result::Result<IbVerbs, String>> = OnceLock::new();
    LIB.get_or_init(|| load(&lib_name()))
        .as_ref()
        .map_err(Clone::clone)
}

/// The names and GUIDs of the devices `lib` reports; the error message is the reason
/// when there are none.
pub fn device_names_of(lib: &IbVerbs) -> Result<Vec<(String, u64)>> {
    let mut n: libc::c_int = 0;
    // SAFETY: rdma-core's documented call; `n` receives the count.
    let list = unsafe { (lib.get_device_list)(&mut n) };
    if list.is_null() {
        // rdma-core returns no list at all where the kernel has no RDMA support: to the
        // user that is the same as an empty list.
        return Err(Error::new(Errno::ENODEV, "no RDMA device"));
    }
    let mut out = Vec::new();
    for i in 0..n.max(0) as usize {
        // SAFETY: the list holds `n` valid device pointers until freed below.
        let dev = unsafe { *list.add(i) };
        if dev.is_null() {
            break;
        }
        // SAFETY: a listed device; the name is a NUL-terminated string it owns.
        let name = unsafe { CStr::from_ptr((lib.get_device_name)(dev)) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: a listed device.
        let guid = u64::from_be(unsafe { (lib.get_device_guid)(dev) });
        out.push((name, guid));
    }
    // SAFETY: frees the list returned above, once.
    unsafe { (lib.free_device_list)(list) };
    if out.is_empty() {
        return Err(Error::new(Errno::ENODEV, "no RDMA device"));
    }
    Ok(out)
}

/// The rdma-core devices of this host, or the one-line reason there are none
/// ("libibverbs.so.1 not found", "no RDMA device").
pub fn device_names() -> Result<Vec<(String, u64)>> {
    let lib = ibverbs().map_err(|why| Error::new(Errno::ENODEV, why))?;
    device_names_of(lib)
}
