//! `struct fi_info` lists in the C layout of libfabric 1.17, and their conversions.
//!
//! The structures here mirror `<rdma/fabric.h>` field by field (the test
//! `tests/layout.rs` compiles a C program against the installed headers and compares
//! every size and offset). Lists are built with the C allocator, one `calloc` per
//! structure and one `malloc` per string, address and key, exactly as a C program
//! expects: it may `free` a string of a hints structure and put its own `strdup` there,
//! and [`free_list`] (`fi_freeinfo`) frees what it finds with `free`.
//!
//! Invariants: every pointer of a list built here is null or owned by that list; a
//! `nic` built here carries [`NIC_OPS`] and its attributes are owned by it. Nothing here
//! panics; malformed C input (an unknown enumeration value, a bad address) is an
//! `FI_EINVAL` error naming the field.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::size_of;
use std::ptr;

use ofi::{
    AddrFormat, Address, Caps, CompOrder, DomainAttr, EpAttr, Errno, Error, FabricAttr, Info, Mode,
    MrMode, MsgOrder, Nic, OpFlags, PciAddress, Result, RxAttr, TxAttr, Version,
};

use crate::fid::{FiOps, Fid, FI_CLASS_NIC};

/// `struct fi_tx_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FiTxAttr {
    /// `caps`.
    pub caps: u64,
    /// `mode`.
    pub mode: u64,
    /// `op_flags`.
    pub op_flags: u64,
    /// `msg_order`.
    pub msg_order: u64,
    /// `comp_order`.
    pub comp_order: u64,
    /// `inject_size`.
    pub inject_size: usize,
    /// `size`.
    pub size: usize,
    /// `iov_limit`.
    pub iov_limit: usize,
    /// `rma_iov_limit`.
    pub rma_iov_limit: usize,
    /// `tclass`.
    pub tclass: u32,
}

/// `struct fi_rx_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FiRxAttr {
    /// `caps`.
    pub caps: u64,
    /// `mode`.
    pub mode: u64,
    /// `op_flags`.
    pub op_flags: u64,
    /// `msg_order`.
    pub msg_order: u64,
    /// `comp_order`.
    pub comp_order: u64,
    /// `total_buffered_recv`.
    pub total_buffered_recv: usize,
    /// `size`.
    pub size: usize,
    /// `iov_limit`.
    pub iov_limit: usize,
}

/// `struct fi_ep_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FiEpAttr {
    /// `type` (`enum fi_ep_type`).
    pub ep_type: u32,
    /// `protocol`.
    pub protocol: u32,
    /// `protocol_version`.
    pub protocol_version: u32,
    /// `max_msg_size`.
    pub max_msg_size: usize,
    /// `msg_prefix_size`.
    pub msg_prefix_size: usize,
    /// `max_order_raw_size`.
    pub max_order_raw_size: usize,
    /// `max_order_war_size`.
    pub max_order_war_size: usize,
    /// `max_order_waw_size`.
    pub max_order_waw_size: usize,
    /// `mem_tag_format`.
    pub mem_tag_format: u64,
    /// `tx_ctx_cnt`.
    pub tx_ctx_cnt: usize,
    /// `rx_ctx_cnt`.
    pub rx_ctx_cnt: usize,
    /// `auth_key_size`.
    pub auth_key_size: usize,
    /// `auth_key` (owned, `malloc`).
    pub auth_key: *mut u8,
}

/// `struct fi_domain_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FiDomainAttr {
    /// `domain` (`struct fid_domain *`).
    pub domain: *mut c_void,
    /// `name` (owned, `malloc`).
    pub name: *mut c_char,
    /// `threading`.
    pub threading: u32,
    /// `control_progress`.
    pub control_progress: u32,
    /// `data_progress`.
    pub data_progress: u32,
    /// `resource_mgmt`.
    pub resource_mgmt: u32,
    /// `av_type`.
    pub av_type: u32,
    /// `mr_mode` (`int`).
    pub mr_mode: c_int,
    /// `mr_key_size`.
    pub mr_key_size: usize,
    /// `cq_data_size`.
    pub cq_data_size: usize,
    /// `cq_cnt`.
    pub cq_cnt: usize,
    /// `ep_cnt`.
    pub ep_cnt: usize,
    /// `tx_ctx_cnt`.
    pub tx_ctx_cnt: usize,
    /// `rx_ctx_cnt`.
    pub rx_ctx_cnt: usize,
    /// `max_ep_tx_ctx`.
    pub max_ep_tx_ctx: usize,
    /// `max_ep_rx_ctx`.
    pub max_ep_rx_ctx: usize,
    /// `max_ep_stx_ctx`.
    pub max_ep_stx_ctx: usize,
    /// `max_ep_srx_ctx`.
    pub max_ep_srx_ctx: usize,
    /// `cntr_cnt`.
    pub cntr_cnt: usize,
    /// `mr_iov_limit`.
    pub mr_iov_limit: usize,
    /// `caps`.
    pub caps: u64,
    /// `mode`.
    pub mode: u64,
    /// `auth_key` (owned, `malloc`).
    pub auth_key: *mut u8,
    /// `auth_key_size`.
    pub auth_key_size: usize,
    /// `max_err_data`.
    pub max_err_data: usize,
    /// `mr_cnt`.
    pub mr_cnt: usize,
    /// `tclass`.
    pub tclass: u32,
}

/// `struct fi_fabric_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FiFabricAttr {
    /// `fabric` (`struct fid_fabric *`).
    pub fabric: *mut c_void,
    /// `name` (owned, `malloc`).
    pub name: *mut c_char,
    /// `prov_name` (owned, `malloc`).
    pub prov_name: *mut c_char,
    /// `prov_version`.
    pub prov_version: u32,
    /// `api_version`.
    pub api_version: u32,
}

/// `struct fi_device_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FiDeviceAttr {
    /// `name`.
    pub name: *mut c_char,
    /// `device_id`.
    pub device_id: *mut c_char,
    /// `device_version`.
    pub device_version: *mut c_char,
    /// `vendor_id`.
    pub vendor_id: *mut c_char,
    /// `driver`.
    pub driver: *mut c_char,
    /// `firmware`.
    pub firmware: *mut c_char,
}

/// `struct fi_pci_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FiPciAttr {
    /// `domain_id`.
    pub domain_id: u16,
    /// `bus_id`.
    pub bus_id: u8,
    /// `device_id`.
    pub device_id: u8,
    /// `function_id`.
    pub function_id: u8,
}

/// `struct fi_bus_attr` (its `attr` union has the one member `pci`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FiBusAttr {
    /// `bus_type` (`enum fi_bus_type`).
    pub bus_type: u32,
    /// `attr.pci`.
    pub pci: FiPciAttr,
}

/// `struct fi_link_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FiLinkAttr {
    /// `address`.
    pub address: *mut c_char,
    /// `mtu`.
    pub mtu: usize,
    /// `speed`.
    pub speed: usize,
    /// `state` (`enum fi_link_state`).
    pub state: u32,
    /// `network_type`.
    pub network_type: *mut c_char,
}

/// `FI_LINK_DOWN`.
pub const FI_LINK_DOWN: u32 = 1;
/// `FI_LINK_UP`.
pub const FI_LINK_UP: u32 = 2;
/// `FI_BUS_UNKNOWN` (`FI_BUS_UNSPEC`).
pub const FI_BUS_UNKNOWN: u32 = 0;
/// `FI_BUS_PCI`.
pub const FI_BUS_PCI: u32 = 1;

impl FiBusAttr {
    /// The C form of `bus`.
    pub fn from_bus(bus: ofi::Bus) -> FiBusAttr {
        let (bus_type, a) = match bus {
            ofi::Bus::Unknown => (FI_BUS_UNKNOWN, PciAddress::default()),
            ofi::Bus::Pci(a) => (FI_BUS_PCI, a),
        };
        FiBusAttr {
            bus_type,
            pci: FiPciAttr {
                domain_id: a.domain,
                bus_id: a.bus,
                device_id: a.device,
                function_id: a.function,
            },
        }
    }

    /// The bus this describes: a PCI address out of range (device 32 or more,
    /// function 8 or more) or another bus type is [`ofi::Bus::Unknown`].
    pub fn bus(&self) -> ofi::Bus {
        let p = self.pci;
        if self.bus_type == FI_BUS_PCI && p.device_id < 32 && p.function_id < 8 {
            ofi::Bus::Pci(PciAddress {
                domain: p.domain_id,
                bus: p.bus_id,
                device: p.device_id,
                function: p.function_id,
            })
        } else {
            ofi::Bus::Unknown
        }
    }
}

/// `struct fid_nic`.
#[repr(C)]
pub struct FidNic {
    /// `fid` (class `FI_CLASS_NIC`).
    pub fid: Fid,
    /// `device_attr`.
    pub device_attr: *mut FiDeviceAttr,
    /// `bus_attr`.
    pub bus_attr: *mut FiBusAttr,
    /// `link_attr`.
    pub link_attr: *mut FiLinkAttr,
    /// `prov_attr`.
    pub prov_attr: *mut c_void,
}

/// `struct fi_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FiInfo {
    /// `next`.
    pub next: *mut FiInfo,
    /// `caps`.
    pub caps: u64,
    /// `mode`.
    pub mode: u64,
    /// `addr_format`.
    pub addr_format: u32,
    /// `src_addrlen`.
    pub src_addrlen: usize,
    /// `dest_addrlen`.
    pub dest_addrlen: usize,
    /// `src_addr` (owned, `malloc`).
    pub src_addr: *mut c_void,
    /// `dest_addr` (owned, `malloc`).
    pub dest_addr: *mut c_void,
    /// `handle` (`fid_t`).
    pub handle: *mut c_void,
    /// `tx_attr` (owned).
    pub tx_attr: *mut FiTxAttr,
    /// `rx_attr` (owned).
    pub rx_attr: *mut FiRxAttr,
    /// `ep_attr` (owned).
    pub ep_attr: *mut FiEpAttr,
    /// `domain_attr` (owned).
    pub domain_attr: *mut FiDomainAttr,
    /// `fabric_attr` (owned).
    pub fabric_attr: *mut FiFabricAttr,
    /// `nic` (owned).
    pub nic: *mut FidNic,
}

// ---------------------------------------------------------------------------------
// Allocation with the C allocator.

/// A zeroed `T` from `calloc`, or null.
fn calloc_one<T>() -> *mut T {
    // SAFETY: calloc has no preconditions; the result is null or a zeroed block of
    // `size_of::<T>()` bytes, aligned for any fundamental type (every `T` here).
    unsafe { libc::calloc(1, size_of::<T>()).cast() }
}

/// A `malloc` copy of `bytes`, or null when `bytes` is empty or memory is short.
fn malloc_bytes(bytes: &[u8]) -> *mut c_void {
    if bytes.is_empty() {
        return ptr::null_mut();
    }
    // SAFETY: malloc has no preconditions.
    let p = unsafe { libc::malloc(bytes.len()) };
    if !p.is_null() {
        // SAFETY: `p` is a fresh block of `bytes.len()` bytes; the regions are disjoint.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), p.cast::<u8>(), bytes.len()) };
    }
    p
}

/// A `malloc`-ed NUL-terminated copy of `s` (cut at an interior NUL), or null for `None`
/// or when memory is short.
pub fn malloc_str(s: Option<&str>) -> *mut c_char {
    let Some(s) = s else {
        return ptr::null_mut();
    };
    let text = s.split('\0').next().unwrap_or("");
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text.as_bytes());
    bytes.push(0);
    malloc_bytes(&bytes).cast()
}

/// `free` of a pointer of the C allocator (null is fine).
///
/// # Safety
/// `p` is null or a live block of the C allocator that nothing uses afterwards.
unsafe fn c_free<T>(p: *mut T) {
    // SAFETY: the caller's contract.
    unsafe { libc::free(p.cast()) }
}

/// A `malloc` copy of the C string `s` (null for null).
///
/// # Safety
/// `s` is null or a valid NUL-terminated string.
unsafe fn dup_cstr(s: *const c_char) -> *mut c_char {
    if s.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: the caller's contract.
    unsafe { libc::strdup(s) }
}

/// A `malloc` copy of `len` bytes at `p` (null for null or zero length).
///
/// # Safety
/// `p` is null or valid for reads of `len` bytes.
unsafe fn dup_bytes(p: *const c_void, len: usize) -> *mut c_void {
    if p.is_null() || len == 0 {
        return ptr::null_mut();
    }
    // SAFETY: the caller's contract.
    malloc_bytes(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

fn enomem() -> Error {
    Error::new(Errno::ENOMEM, "out of memory building a fi_info list")
}

/// Boxes `value` with `calloc` (null on failure).
fn c_box<T: Copy>(value: T) -> *mut T {
    let p = calloc_one::<T>();
    if !p.is_null() {
        // SAFETY: `p` is a fresh, aligned block of `size_of::<T>()` bytes.
        unsafe { p.write(value) };
    }
    p
}

// ---------------------------------------------------------------------------------
// Rust -> C.

fn tx_to_c(a: &TxAttr) -> FiTxAttr {
    ofi::__attr_literal!(TxAttr to_bits, FiTxAttr from a {})
}

fn rx_to_c(a: &RxAttr) -> FiRxAttr {
    ofi::__attr_literal!(RxAttr to_bits, FiRxAttr from a {})
}

/// The Rust form of a C `fi_tx_attr`.
pub fn tx_from_c(t: &FiTxAttr) -> TxAttr {
    ofi::__attr_literal!(TxAttr from_bits, TxAttr from t {})
}

/// The Rust form of a C `fi_rx_attr`.
pub fn rx_from_c(r: &FiRxAttr) -> RxAttr {
    ofi::__attr_literal!(RxAttr from_bits, RxAttr from r {})
}

/// Fills a zeroed C info from `info`; on failure the partial result is still owned by
/// `out` (the caller frees it).
fn fill_info(out: &mut FiInfo, info: &Info) -> Result<()> {
    out.caps = info.caps.bits();
    out.mode = info.mode.bits();
    out.addr_format = info.addr_format.to_raw();
    if let Some(a) = &info.src_addr {
        let b = a.to_bytes();
        out.src_addr = malloc_bytes(&b);
        out.src_addrlen = if out.src_addr.is_null() { 0 } else { b.len() };
    }
    if let Some(a) = &info.dest_addr {
        let b = a.to_bytes();
        out.dest_addr = malloc_bytes(&b);
        out.dest_addrlen = if out.dest_addr.is_null() { 0 } else { b.len() };
    }
    out.handle = info.handle as *mut c_void;
    out.tx_attr = c_box(tx_to_c(&info.tx_attr));
    out.rx_attr = c_box(rx_to_c(&info.rx_attr));
    let ep = &info.ep_attr;
    let ep_key = ep.auth_key.as_deref().unwrap_or(&[]);
    out.ep_attr = c_box(ofi::__attr_literal!(EpAttr, FiEpAttr from ep {
        ep_type: ep.ep_type.to_raw(),
        protocol: ep.protocol.to_raw(),
        auth_key_size: ep_key.len(),
        auth_key: malloc_bytes(ep_key).cast(),
    }));
    let d = &info.domain_attr;
    let d_key = d.auth_key.as_deref().unwrap_or(&[]);
    out.domain_attr = c_box(ofi::__attr_literal!(DomainAttr, FiDomainAttr from d {
        domain: d.domain as *mut c_void,
        name: malloc_str(d.name.as_deref()),
        threading: d.threading.to_raw(),
        control_progress: d.control_progress.to_raw(),
        data_progress: d.data_progress.to_raw(),
        resource_mgmt: d.resource_mgmt.to_raw(),
        av_type: d.av_type.to_raw(),
        mr_mode: d.mr_mode.bits() as c_int,
        caps: d.caps.bits(),
        mode: d.mode.bits(),
        auth_key: malloc_bytes(d_key).cast(),
        auth_key_size: d_key.len(),
    }));
    let f = &info.fabric_attr;
    out.fabric_attr = c_box(FiFabricAttr {
        fabric: f.fabric as *mut c_void,
        name: malloc_str(f.name.as_deref()),
        prov_name: malloc_str(f.prov_name.as_deref()),
        prov_version: f.prov_version.to_raw(),
        api_version: f.api_version.to_raw(),
    });
    if let Some(nic) = &info.nic {
        out.nic = nic_to_c(nic);
        if out.nic.is_null() {
            return Err(enomem());
        }
    }
    if out.tx_attr.is_null()
        || out.rx_attr.is_null()
        || out.ep_attr.is_null()
        || out.domain_attr.is_null()
        || out.fabric_attr.is_null()
    {
        return Err(enomem());
    }
    Ok(())
}

fn nic_to_c(nic: &Nic) -> *mut FidNic {
    let p = calloc_one::<FidNic>();
    if p.is_null() {
        return p;
    }
    let device = c_box(FiDeviceAttr {
        name: malloc_str(nic.device_name.as_deref()),
        device_id: malloc_str(nic.device_id.as_deref()),
        device_version: malloc_str(nic.device_version.as_deref()),
        vendor_id: malloc_str(nic.vendor_id.as_deref()),
        driver: malloc_str(nic.driver.as_deref()),
        firmware: malloc_str(nic.firmware.as_deref()),
    });
    let bus = c_box(FiBusAttr::from_bus(nic.bus));
    let link = c_box(FiLinkAttr {
        address: malloc_str(nic.link_address.as_deref()),
        mtu: nic.mtu,
        speed: nic.speed,
        state: if nic.link_up {
            FI_LINK_UP
        } else {
            FI_LINK_DOWN
        },
        network_type: malloc_str(nic.network_type.as_deref()),
    });
    // SAFETY: `p` is a fresh zeroed FidNic.
    unsafe {
        (*p).fid = Fid {
            fclass: FI_CLASS_NIC,
            context: ptr::null_mut(),
            ops: ptr::addr_of!(NIC_OPS).cast_mut(),
        };
        (*p).device_attr = device;
        (*p).bus_attr = bus;
        (*p).link_attr = link;
    }
    p
}

/// The C list of `infos`, in order; null for an empty slice.
///
/// # Errors
/// `FI_ENOMEM` (nothing is leaked).
pub fn list_to_c(infos: &[Info]) -> Result<*mut FiInfo> {
    let mut head: *mut FiInfo = ptr::null_mut();
    let mut tail: *mut FiInfo = ptr::null_mut();
    for info in infos {
        let node = calloc_one::<FiInfo>();
        if node.is_null() {
            // SAFETY: `head` is a list built here.
            unsafe { free_list(head) };
            return Err(enomem());
        }
        if tail.is_null() {
            head = node;
        } else {
            // SAFETY: `tail` is the last node of the list built here.
            unsafe { (*tail).next = node };
        }
        tail = node;
        // SAFETY: `node` is a fresh zeroed FiInfo owned by the list.
        if let Err(e) = fill_info(unsafe { &mut *node }, info) {
            // SAFETY: `head` is a list built here (partial nodes hold only owned data).
            unsafe { free_list(head) };
            return Err(e);
        }
    }
    Ok(head)
}

// ---------------------------------------------------------------------------------
// C -> Rust.

/// The text of a C string (`None` for null; invalid UTF-8 is replaced).
///
/// # Safety
/// `s` is null or a valid NUL-terminated string.
pub unsafe fn opt_str(s: *const c_char) -> Option<String> {
    if s.is_null() {
        None
    } else {
        // SAFETY: the caller's contract.
        Some(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
    }
}

/// # Safety
/// `p` is null or valid for reads of `len` bytes.
unsafe fn opt_bytes(p: *const u8, len: usize) -> Option<Vec<u8>> {
    if p.is_null() || len == 0 {
        None
    } else {
        // SAFETY: the caller's contract.
        Some(unsafe { std::slice::from_raw_parts(p, len) }.to_vec())
    }
}

/// # Safety
/// `p` is null or valid for reads of `len` bytes.
unsafe fn addr_from_c(
    format: AddrFormat,
    p: *const c_void,
    len: usize,
    field: &str,
) -> Result<Option<Address>> {
    if p.is_null() || len == 0 {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    // A sockaddr whose family disagrees with the stated IPv4/IPv6 format is read by its
    // family, and an address string (`fi_…://…`) as one: some providers name their
    // endpoints so (the C library passes such bytes through untouched).
    Address::from_bytes(format, bytes)
        .or_else(|e| match format {
            AddrFormat::SOCKADDR_IN | AddrFormat::SOCKADDR_IN6 => {
                Address::from_bytes(AddrFormat::SOCKADDR, bytes)
                    .or_else(|_| Address::from_bytes(AddrFormat::STR, bytes))
                    .map_err(|_| e)
            }
            _ => Err(e),
        })
        .map(Some)
        .map_err(|e| e.context(field))
}

/// The Rust form of the C info at `p` (its `next` is not followed). A null attribute
/// pointer reads as the all-zero attribute.
///
/// # Safety
/// `p` points to a valid `struct fi_info` whose pointers are null or valid.
pub unsafe fn info_from_c(p: *const FiInfo) -> Result<Info> {
    // SAFETY: the caller's contract.
    let c = unsafe { &*p };
    let mut info = Info::new();
    info.caps = Caps::from_bits_retain(c.caps);
    info.mode = Mode::from_bits_retain(c.mode);
    info.addr_format = AddrFormat(c.addr_format);
    // SAFETY: the caller's contract covers the addresses and their lengths.
    unsafe {
        info.src_addr = addr_from_c(info.addr_format, c.src_addr, c.src_addrlen, "src_addr")?;
        info.dest_addr = addr_from_c(info.addr_format, c.dest_addr, c.dest_addrlen, "dest_addr")?;
    }
    // An address read by its family (see `addr_from_c`) sets the format it is in.
    for a in [&info.src_addr, &info.dest_addr].into_iter().flatten() {
        let f = a.format();
        if f != info.addr_format
            && matches!(
                info.addr_format,
                AddrFormat::SOCKADDR_IN | AddrFormat::SOCKADDR_IN6
            )
        {
            info.addr_format = f;
        }
    }
    info.handle = c.handle as usize;
    // SAFETY: a non-null attribute pointer is valid, and so are its strings, keys and
    // the NIC's attributes (the caller's contract).
    unsafe {
        if let Some(t) = c.tx_attr.as_ref() {
            info.tx_attr = tx_from_c(t);
        }
        if let Some(r) = c.rx_attr.as_ref() {
            info.rx_attr = rx_from_c(r);
        }
        if let Some(e) = c.ep_attr.as_ref() {
            info.ep_attr = ep_from_c(e)?;
        }
        if let Some(d) = c.domain_attr.as_ref() {
            info.domain_attr = domain_from_c(d)?;
        }
        if let Some(f) = c.fabric_attr.as_ref() {
            info.fabric_attr = fabric_from_c(f);
        }
        if let Some(n) = c.nic.as_ref() {
            info.nic = Some(nic_from_c(n));
        }
    }
    Ok(info)
}

/// The Rust form of a C `fi_ep_attr`.
///
/// # Safety
/// `auth_key` is null or valid for `auth_key_size` bytes.
pub unsafe fn ep_from_c(e: &FiEpAttr) -> Result<EpAttr> {
    Ok(ofi::__attr_literal!(EpAttr checked, EpAttr from e {
        // SAFETY: the caller's contract.
        auth_key: unsafe { opt_bytes(e.auth_key, e.auth_key_size) },
    }))
}

/// The Rust form of a C `fi_domain_attr`.
///
/// # Safety
/// `name` is null or a valid string; `auth_key` null or valid for `auth_key_size` bytes.
pub unsafe fn domain_from_c(d: &FiDomainAttr) -> Result<DomainAttr> {
    Ok(ofi::__attr_literal!(DomainAttr checked, DomainAttr from d {
        domain: d.domain as usize,
        // SAFETY: the caller's contract.
        name: unsafe { opt_str(d.name) },
        mr_mode: MrMode::from_bits_retain(d.mr_mode as u32),
        // SAFETY: the caller's contract.
        auth_key: unsafe { opt_bytes(d.auth_key, d.auth_key_size) },
    }))
}

/// The Rust form of a C `fi_fabric_attr`.
///
/// # Safety
/// `name` and `prov_name` are null or valid strings.
pub unsafe fn fabric_from_c(f: &FiFabricAttr) -> FabricAttr {
    FabricAttr {
        fabric: f.fabric as usize,
        // SAFETY: the caller's contract.
        name: unsafe { opt_str(f.name) },
        // SAFETY: the caller's contract.
        prov_name: unsafe { opt_str(f.prov_name) },
        prov_version: Version::from_raw(f.prov_version),
        api_version: Version::from_raw(f.api_version),
    }
}

/// The Rust form of a C `fid_nic`.
///
/// # Safety
/// Every non-null pointer of `n` and of its attributes is valid.
pub unsafe fn nic_from_c(n: &FidNic) -> Nic {
    let mut nic = Nic::default();
    // SAFETY: the caller's contract (device, bus and link attributes and strings).
    unsafe {
        if let Some(d) = n.device_attr.as_ref() {
            nic.device_name = opt_str(d.name);
            nic.device_id = opt_str(d.device_id);
            nic.device_version = opt_str(d.device_version);
            nic.vendor_id = opt_str(d.vendor_id);
            nic.driver = opt_str(d.driver);
            nic.firmware = opt_str(d.firmware);
        }
        if let Some(l) = n.link_attr.as_ref() {
            nic.link_address = opt_str(l.address);
            nic.mtu = l.mtu;
            nic.speed = l.speed;
            nic.link_up = l.state == FI_LINK_UP;
            nic.network_type = opt_str(l.network_type);
        }
        if let Some(b) = n.bus_attr.as_ref() {
            nic.bus = b.bus();
        }
    }
    nic
}

// ---------------------------------------------------------------------------------
// Free and duplicate (C -> C).

/// Frees the attributes of a NIC and the NIC.
///
/// # Safety
/// `nic` is null or a NIC whose pointers are null or C-allocated and owned by it.
unsafe fn free_nic(nic: *mut FidNic) {
    // SAFETY: the caller's contract.
    let Some(n) = (unsafe { nic.as_mut() }) else {
        return;
    };
    // SAFETY: every pointer below is null or owned (contract).
    unsafe {
        if let Some(d) = n.device_attr.as_mut() {
            c_free(d.name);
            c_free(d.device_id);
            c_free(d.device_version);
            c_free(d.vendor_id);
            c_free(d.driver);
            c_free(d.firmware);
        }
        c_free(n.device_attr);
        c_free(n.bus_attr);
        if let Some(l) = n.link_attr.as_mut() {
            c_free(l.address);
            c_free(l.network_type);
        }
        c_free(n.link_attr);
        c_free(nic);
    }
}

unsafe extern "C" fn nic_close(fid: *mut Fid) -> c_int {
    // SAFETY: `fid` is the first field of a NIC built here (it carries NIC_OPS).
    crate::guard(|| unsafe {
        free_nic(fid.cast());
        0
    })
}

/// The `fi_ops` of a NIC: `close` frees it; the other slots are `-FI_ENOSYS`.
pub static NIC_OPS: FiOps = FiOps::with_close(nic_close);

/// Frees a NIC the C way: through its own `close` when it is not ours.
///
/// # Safety
/// `nic` is null or a valid NIC owned by the caller.
unsafe fn release_nic(nic: *mut FidNic) {
    if nic.is_null() {
        return;
    }
    // SAFETY: `nic` is valid (contract).
    let ops = unsafe { (*nic).fid.ops };
    if ops.is_null() || ptr::eq(ops, &NIC_OPS) {
        // SAFETY: a NIC built here (or without ops): its data is C-allocated.
        unsafe { free_nic(nic) };
    } else {
        // SAFETY: a foreign NIC's ops table is valid (contract); it closes itself.
        unsafe {
            if let Some(close) = (*ops).close {
                close(nic.cast());
            }
        }
    }
}

/// `fi_freeinfo`: frees every node of the list, its attributes, strings, addresses,
/// keys and NIC (null is a no-op).
///
/// # Safety
/// `head` is null or a list whose nodes and owned pointers come from the C allocator
/// (built by this library or by the program with `malloc`/`strdup`), used by nothing
/// afterwards.
pub unsafe fn free_list(mut head: *mut FiInfo) {
    while !head.is_null() {
        // SAFETY: `head` is a valid node (contract); its owned pointers are freed once.
        unsafe {
            let n = &mut *head;
            let next = n.next;
            c_free(n.src_addr);
            c_free(n.dest_addr);
            c_free(n.tx_attr);
            c_free(n.rx_attr);
            if let Some(e) = n.ep_attr.as_mut() {
                c_free(e.auth_key);
            }
            c_free(n.ep_attr);
            if let Some(d) = n.domain_attr.as_mut() {
                c_free(d.name);
                c_free(d.auth_key);
            }
            c_free(n.domain_attr);
            if let Some(f) = n.fabric_attr.as_mut() {
                c_free(f.name);
                c_free(f.prov_name);
            }
            c_free(n.fabric_attr);
            release_nic(n.nic);
            c_free(head);
            head = next;
        }
    }
}

/// # Safety
/// `src` is null or a valid NIC.
unsafe fn dup_nic(src: *const FidNic) -> *mut FidNic {
    // SAFETY: the caller's contract.
    let Some(s) = (unsafe { src.as_ref() }) else {
        return ptr::null_mut();
    };
    let p = calloc_one::<FidNic>();
    if p.is_null() {
        return p;
    }
    // SAFETY: `p` is fresh; every source pointer is null or valid (contract).
    unsafe {
        (*p).fid = Fid {
            fclass: FI_CLASS_NIC,
            context: s.fid.context,
            ops: ptr::addr_of!(NIC_OPS).cast_mut(),
        };
        if let Some(d) = s.device_attr.as_ref() {
            (*p).device_attr = c_box(FiDeviceAttr {
                name: dup_cstr(d.name),
                device_id: dup_cstr(d.device_id),
                device_version: dup_cstr(d.device_version),
                vendor_id: dup_cstr(d.vendor_id),
                driver: dup_cstr(d.driver),
                firmware: dup_cstr(d.firmware),
            });
        }
        if let Some(b) = s.bus_attr.as_ref() {
            (*p).bus_attr = c_box(*b);
        }
        if let Some(l) = s.link_attr.as_ref() {
            (*p).link_attr = c_box(FiLinkAttr {
                address: dup_cstr(l.address),
                network_type: dup_cstr(l.network_type),
                ..*l
            });
        }
    }
    p
}

/// `fi_dupinfo`: a deep copy of one node (its `next` is null); for null, a zeroed info
/// with zeroed tx, rx, endpoint, domain and fabric attributes (`fi_allocinfo`). Null
/// when memory is short.
///
/// # Safety
/// `src` is null or a valid `struct fi_info` whose pointers are null or valid.
pub unsafe fn dup(src: *const FiInfo) -> *mut FiInfo {
    let p = calloc_one::<FiInfo>();
    if p.is_null() {
        return p;
    }
    // SAFETY: `p` is fresh and zeroed; `src` is null or valid (contract).
    let ok = unsafe {
        let out = &mut *p;
        match src.as_ref() {
            None => {
                out.tx_attr = calloc_one();
                out.rx_attr = calloc_one();
                out.ep_attr = calloc_one();
                out.domain_attr = calloc_one();
                out.fabric_attr = calloc_one();
                !(out.tx_attr.is_null()
                    || out.rx_attr.is_null()
                    || out.ep_attr.is_null()
                    || out.domain_attr.is_null()
                    || out.fabric_attr.is_null())
            }
            Some(s) => dup_into(out, s),
        }
    };
    if !ok {
        // SAFETY: `p` holds only what was allocated above.
        unsafe { free_list(p) };
        return ptr::null_mut();
    }
    p
}

/// A C copy, made by `copy`, of the attribute at `src` (null when `src` is null); `ok`
/// turns false when memory ran short.
///
/// # Safety
/// `src` is null or valid.
unsafe fn dup_attr<T: Copy>(src: *const T, ok: &mut bool, copy: impl FnOnce(&T) -> T) -> *mut T {
    // SAFETY: the caller's contract.
    let Some(s) = (unsafe { src.as_ref() }) else {
        return ptr::null_mut();
    };
    let p = c_box(copy(s));
    *ok &= !p.is_null();
    p
}

/// Copies `s` into the zeroed `out`; false when memory ran short (what was copied is
/// owned by `out`).
///
/// # Safety
/// Every pointer of `s` is null or valid.
unsafe fn dup_into(out: &mut FiInfo, s: &FiInfo) -> bool {
    let mut ok = true;
    out.caps = s.caps;
    out.mode = s.mode;
    out.addr_format = s.addr_format;
    out.handle = s.handle;
    // SAFETY: the caller's contract, for every pointer read below.
    unsafe {
        out.src_addr = dup_bytes(s.src_addr, s.src_addrlen);
        out.src_addrlen = if out.src_addr.is_null() {
            0
        } else {
            s.src_addrlen
        };
        out.dest_addr = dup_bytes(s.dest_addr, s.dest_addrlen);
        out.dest_addrlen = if out.dest_addr.is_null() {
            0
        } else {
            s.dest_addrlen
        };
        out.tx_attr = dup_attr(s.tx_attr, &mut ok, |t| *t);
        out.rx_attr = dup_attr(s.rx_attr, &mut ok, |r| *r);
        out.ep_attr = dup_attr(s.ep_attr, &mut ok, |e| FiEpAttr {
            auth_key: dup_bytes(e.auth_key.cast(), e.auth_key_size).cast(),
            ..*e
        });
        out.domain_attr = dup_attr(s.domain_attr, &mut ok, |d| FiDomainAttr {
            name: dup_cstr(d.name),
            auth_key: dup_bytes(d.auth_key.cast(), d.auth_key_size).cast(),
            ..*d
        });
        out.fabric_attr = dup_attr(s.fabric_attr, &mut ok, |f| FiFabricAttr {
            name: dup_cstr(f.name),
            prov_name: dup_cstr(f.prov_name),
            ..*f
        });
        if !s.nic.is_null() {
            out.nic = dup_nic(s.nic);
            ok &= !out.nic.is_null();
        }
    }
    ok
}
