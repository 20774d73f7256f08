//! rdma-core opened at run time: `libibverbs.so.1` loaded with `libloading` (the name can
//! be overridden with `OFI_RDMA_IBVERBS_LIB`, which tests use to point at a library that
//! does not exist), and the device list read through it.
//!
//! Nothing is linked: a process without rdma-core starts and gets one line saying why
//! there is no device.

pub(crate) mod cq_ex;
pub mod ffi;
pub(crate) mod objects;

use std::ffi::CStr;
use std::sync::OnceLock;

use ofi_core::{Errno, Error, Result};

/// The library name looked for.
pub const IBVERBS_LIB: &str = "libibverbs.so.1";

use ffi::*;
use libc::{c_int, c_uint, c_void, size_t};

/// Declares a run-time bound library: the struct holding it and its entry points, and
/// `$resolve(name, lib)` resolving every symbol (the error names a missing one).
macro_rules! entry_points {
    ($strukt:ident, $resolve:ident, $header:literal; $($field:ident = $sym:literal : fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The loaded library and its entry points (resolved once, at load).
        pub struct $strukt {
            _lib: libloading::Library,
            $(#[doc = concat!("`", $sym, "`")] pub $field: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        fn $resolve(name: &str, lib: libloading::Library) -> std::result::Result<$strukt, String> {
            Ok($strukt {
                $($field: {
                    let sym = concat!($sym, "\0").as_bytes();
                    // SAFETY: the symbol has the C signature of the field it is stored in
                    // (from the header named in the declaration); the library stays
                    // loaded as long as the pointer (both live in the returned value).
                    *unsafe { lib.get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(sym) }
                        .map_err(|_| format!("{name}: symbol {} missing ({})", $sym, $header))?
                },)*
                _lib: lib,
            })
        }
    };
}

pub mod efadv;
pub mod rdmacm;

entry_points! {
    IbVerbs, resolve, "infiniband/verbs.h";
    get_device_list = "ibv_get_device_list": fn(*mut c_int) -> *mut *mut IbvDevice;
    free_device_list = "ibv_free_device_list": fn(*mut *mut IbvDevice);
    get_device_name = "ibv_get_device_name": fn(*mut IbvDevice) -> *const libc::c_char;
    get_device_guid = "ibv_get_device_guid": fn(*mut IbvDevice) -> u64;
    open_device = "ibv_open_device": fn(*mut IbvDevice) -> *mut IbvContext;
    close_device = "ibv_close_device": fn(*mut IbvContext) -> c_int;
    query_device = "ibv_query_device": fn(*mut IbvContext, *mut IbvDeviceAttr) -> c_int;
    query_port = "ibv_query_port": fn(*mut IbvContext, u8, *mut IbvPortAttr) -> c_int;
    query_gid = "ibv_query_gid": fn(*mut IbvContext, u8, c_int, *mut IbvGid) -> c_int;
    alloc_pd = "ibv_alloc_pd": fn(*mut IbvContext) -> *mut IbvPd;
    dealloc_pd = "ibv_dealloc_pd": fn(*mut IbvPd) -> c_int;
    reg_mr = "ibv_reg_mr": fn(*mut IbvPd, *mut c_void, size_t, c_int) -> *mut IbvMr;
    dereg_mr = "ibv_dereg_mr": fn(*mut IbvMr) -> c_int;
    create_comp_channel = "ibv_create_comp_channel": fn(*mut IbvContext) -> *mut IbvCompChannel;
    destroy_comp_channel = "ibv_destroy_comp_channel": fn(*mut IbvCompChannel) -> c_int;
    create_cq = "ibv_create_cq": fn(*mut IbvContext, c_int, *mut c_void, *mut IbvCompChannel, c_int) -> *mut IbvCq;
    destroy_cq = "ibv_destroy_cq": fn(*mut IbvCq) -> c_int;
    get_cq_event = "ibv_get_cq_event": fn(*mut IbvCompChannel, *mut *mut IbvCq, *mut *mut c_void) -> c_int;
    ack_cq_events = "ibv_ack_cq_events": fn(*mut IbvCq, c_uint);
    create_qp = "ibv_create_qp": fn(*mut IbvPd, *mut IbvQpInitAttr) -> *mut IbvQp;
    modify_qp = "ibv_modify_qp": fn(*mut IbvQp, *mut IbvQpAttr, c_int) -> c_int;
    destroy_qp = "ibv_destroy_qp": fn(*mut IbvQp) -> c_int;
    create_srq = "ibv_create_srq": fn(*mut IbvPd, *mut IbvSrqInitAttr) -> *mut IbvSrq;
    destroy_srq = "ibv_destroy_srq": fn(*mut IbvSrq) -> c_int;
    create_ah = "ibv_create_ah": fn(*mut IbvPd, *mut IbvAhAttr) -> *mut IbvAh;
    destroy_ah = "ibv_destroy_ah": fn(*mut IbvAh) -> c_int;
    get_async_event = "ibv_get_async_event": fn(*mut IbvContext, *mut IbvAsyncEvent) -> c_int;
    ack_async_event = "ibv_ack_async_event": fn(*mut IbvAsyncEvent);
}

fn lib_name() -> String {
    std::env::var("OFI_RDMA_IBVERBS_LIB").unwrap_or_else(|_| IBVERBS_LIB.to_string())
}

/// Loads `name` and resolves the entry points; the error is the one-line reason.
pub fn load(name: &str) -> std::result::Result<IbVerbs, String> {
    // SAFETY: loading rdma-core runs its constructors, which only set up its own state.
    let lib = unsafe { libloading::Library::new(name) }.map_err(|_| format!("{name} not found"))?;
    resolve(name, lib)
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
