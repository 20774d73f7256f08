//! Info and its attributes, raw forms and conversions (see [`super`] for the conventions).

use super::*;

abi_struct! {
    /// Raw `TxAttr`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawTxAttr {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `caps` bits.
        pub caps: u64,
        /// `mode` bits.
        pub mode: u64,
        /// `op_flags` bits.
        pub op_flags: u64,
        /// `msg_order` bits.
        pub msg_order: u64,
        /// `comp_order` bits.
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

    /// Raw `RxAttr`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawRxAttr {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `caps` bits.
        pub caps: u64,
        /// `mode` bits.
        pub mode: u64,
        /// `op_flags` bits.
        pub op_flags: u64,
        /// `msg_order` bits.
        pub msg_order: u64,
        /// `comp_order` bits.
        pub comp_order: u64,
        /// `total_buffered_recv`.
        pub total_buffered_recv: usize,
        /// `size`.
        pub size: usize,
        /// `iov_limit`.
        pub iov_limit: usize,
    }

    /// Raw `EpAttr`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawEpAttr {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `EpType` C value.
        pub ep_type: u32,
        /// `Protocol` C value.
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
        /// `auth_key` (null = none).
        pub auth_key: RawStr,
    }

    /// Raw `DomainAttr`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawDomainAttr {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `domain` handle.
        pub domain: usize,
        /// `name`.
        pub name: RawStr,
        /// `Threading` C value.
        pub threading: u32,
        /// `Progress` C value.
        pub control_progress: u32,
        /// `Progress` C value.
        pub data_progress: u32,
        /// `ResourceMgmt` C value.
        pub resource_mgmt: u32,
        /// `AvType` C value.
        pub av_type: u32,
        /// `mr_mode` bits.
        pub mr_mode: u32,
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
        /// `caps` bits.
        pub caps: u64,
        /// `mode` bits.
        pub mode: u64,
        /// `auth_key` (null = none).
        pub auth_key: RawStr,
        /// `max_err_data`.
        pub max_err_data: usize,
        /// `mr_cnt`.
        pub mr_cnt: usize,
        /// `tclass`.
        pub tclass: u32,
    }

    /// Raw `FabricAttr`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawFabricAttr {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `fabric` handle.
        pub fabric: usize,
        /// `name`.
        pub name: RawStr,
        /// `prov_name`.
        pub prov_name: RawStr,
        /// `prov_version`, packed.
        pub prov_version: u32,
        /// `api_version`, packed.
        pub api_version: u32,
    }

    /// Raw `Nic`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawNic {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `device_name`.
        pub device_name: RawStr,
        /// `device_id`.
        pub device_id: RawStr,
        /// `device_version`.
        pub device_version: RawStr,
        /// `vendor_id`.
        pub vendor_id: RawStr,
        /// `driver`.
        pub driver: RawStr,
        /// `firmware`.
        pub firmware: RawStr,
        /// `link_address`.
        pub link_address: RawStr,
        /// `mtu`.
        pub mtu: usize,
        /// `speed`.
        pub speed: usize,
        /// `link_up` (0 or 1).
        pub link_up: u32,
        /// `network_type`.
        pub network_type: RawStr,
        /// `bus`: 0 unknown, 1 PCI (the C library's `enum fi_bus_type`; minor 4).
        pub @4 bus_type: u32,
        /// The PCI domain (`bus_type` 1; minor 4).
        pub @4 pci_domain: u16,
        /// The PCI bus (minor 4).
        pub @4 pci_bus: u8,
        /// The PCI device (minor 4).
        pub @4 pci_device: u8,
        /// The PCI function (minor 4).
        pub @4 pci_function: u8,
    }

    /// Raw `Info`. Attribute pointers may be null (all-default attributes); `nic` null
    /// means no NIC.
    #[derive(Clone, Copy, Debug)]
    pub struct RawInfo {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `caps` bits.
        pub caps: u64,
        /// `mode` bits.
        pub mode: u64,
        /// `AddrFormat` C value.
        pub addr_format: u32,
        /// `src_addr`.
        pub src_addr: RawAddr,
        /// `dest_addr`.
        pub dest_addr: RawAddr,
        /// `handle`.
        pub handle: usize,
        /// Transmit attributes.
        pub tx_attr: *const RawTxAttr,
        /// Receive attributes.
        pub rx_attr: *const RawRxAttr,
        /// Endpoint attributes.
        pub ep_attr: *const RawEpAttr,
        /// Domain attributes.
        pub domain_attr: *const RawDomainAttr,
        /// Fabric attributes.
        pub fabric_attr: *const RawFabricAttr,
        /// NIC, or null.
        pub nic: *const RawNic,
    }
}

/// A [`RawInfo`] with the storage its pointers point into. Moving it is fine (the
/// pointed-to data is boxed); the raw form is valid while this value lives.
pub struct RawInfoBox {
    pub(super) raw: Box<RawInfo>,
    _tx: Box<RawTxAttr>,
    _rx: Box<RawRxAttr>,
    _ep: Box<RawEpAttr>,
    _domain: Box<RawDomainAttr>,
    _fabric: Box<RawFabricAttr>,
    _nic: Option<Box<RawNic>>,
    _bytes: Vec<Box<[u8]>>,
}

// SAFETY: a RawInfoBox owns every byte its raw pointers point to and never mutates them
// after construction, so moving it to or sharing it with another thread is sound.
unsafe impl Send for RawInfoBox {}
// SAFETY: see the `Send` impl: the data is immutable after construction.
unsafe impl Sync for RawInfoBox {}

/// Copies strings into owned boxes and hands out raw views of them.
#[derive(Default)]
pub(super) struct Store {
    bytes: Vec<Box<[u8]>>,
}

impl Store {
    fn bytes(&mut self, b: Option<&[u8]>) -> RawStr {
        match b {
            None => RawStr::NONE,
            Some(b) => {
                let boxed: Box<[u8]> = b.into();
                let raw = RawStr {
                    ptr: boxed.as_ptr(),
                    len: boxed.len(),
                };
                self.bytes.push(boxed);
                raw
            }
        }
    }

    fn str(&mut self, s: &Option<String>) -> RawStr {
        self.bytes(s.as_deref().map(str::as_bytes))
    }

    fn addr(&mut self, a: &Option<Address>) -> RawAddr {
        match a {
            None => RawAddr::NONE,
            Some(a) => {
                let s = self.bytes(Some(&a.to_bytes()));
                RawAddr {
                    format: a.format().to_raw(),
                    ptr: s.ptr,
                    len: s.len,
                }
            }
        }
    }
}

impl RawInfoBox {
    /// The raw form of `info`.
    pub fn new(info: &Info) -> RawInfoBox {
        let mut st = Store::default();
        let tx = Box::new(tx_to_raw(&info.tx_attr));
        let rx = Box::new(rx_to_raw(&info.rx_attr));
        let e = &info.ep_attr;
        let ep = Box::new(crate::__attr_literal!(EpAttr, RawEpAttr from e {
            struct_size: std::mem::size_of::<RawEpAttr>(),
            ep_type: e.ep_type.to_raw(),
            protocol: e.protocol.to_raw(),
            auth_key: st.bytes(e.auth_key.as_deref()),
        }));
        let d = &info.domain_attr;
        let domain = Box::new(crate::__attr_literal!(DomainAttr, RawDomainAttr from d {
            struct_size: std::mem::size_of::<RawDomainAttr>(),
            domain: d.domain,
            name: st.str(&d.name),
            threading: d.threading.to_raw(),
            control_progress: d.control_progress.to_raw(),
            data_progress: d.data_progress.to_raw(),
            resource_mgmt: d.resource_mgmt.to_raw(),
            av_type: d.av_type.to_raw(),
            mr_mode: d.mr_mode.bits(),
            caps: d.caps.bits(),
            mode: d.mode.bits(),
            auth_key: st.bytes(d.auth_key.as_deref()),
        }));
        let f = &info.fabric_attr;
        let fabric = Box::new(RawFabricAttr {
            struct_size: std::mem::size_of::<RawFabricAttr>(),
            fabric: f.fabric,
            name: st.str(&f.name),
            prov_name: st.str(&f.prov_name),
            prov_version: f.prov_version.to_raw(),
            api_version: f.api_version.to_raw(),
        });
        let nic = info.nic.as_ref().map(|n| {
            let (bus_type, pci) = match n.bus {
                Bus::Unknown => (BUS_UNKNOWN, PciAddress::default()),
                Bus::Pci(a) => (BUS_PCI, a),
            };
            Box::new(RawNic {
                struct_size: std::mem::size_of::<RawNic>(),
                device_name: st.str(&n.device_name),
                device_id: st.str(&n.device_id),
                device_version: st.str(&n.device_version),
                vendor_id: st.str(&n.vendor_id),
                driver: st.str(&n.driver),
                firmware: st.str(&n.firmware),
                link_address: st.str(&n.link_address),
                mtu: n.mtu,
                speed: n.speed,
                link_up: n.link_up as u32,
                network_type: st.str(&n.network_type),
                bus_type,
                pci_domain: pci.domain,
                pci_bus: pci.bus,
                pci_device: pci.device,
                pci_function: pci.function,
            })
        });
        let raw = Box::new(RawInfo {
            struct_size: std::mem::size_of::<RawInfo>(),
            caps: info.caps.bits(),
            mode: info.mode.bits(),
            addr_format: info.addr_format.to_raw(),
            src_addr: st.addr(&info.src_addr),
            dest_addr: st.addr(&info.dest_addr),
            handle: info.handle,
            tx_attr: &*tx,
            rx_attr: &*rx,
            ep_attr: &*ep,
            domain_attr: &*domain,
            fabric_attr: &*fabric,
            nic: nic
                .as_deref()
                .map_or(std::ptr::null(), |n| n as *const RawNic),
        });
        RawInfoBox {
            raw,
            _tx: tx,
            _rx: rx,
            _ep: ep,
            _domain: domain,
            _fabric: fabric,
            _nic: nic,
            _bytes: st.bytes,
        }
    }

    /// The raw form; valid while `self` lives.
    pub fn as_ptr(&self) -> *const RawInfo {
        &*self.raw
    }
}

/// The raw form of transmit attributes.
pub fn tx_to_raw(t: &TxAttr) -> RawTxAttr {
    crate::__attr_literal!(TxAttr to_bits, RawTxAttr from t {
        struct_size: std::mem::size_of::<RawTxAttr>(),
    })
}

/// The raw form of receive attributes.
pub fn rx_to_raw(r: &RxAttr) -> RawRxAttr {
    crate::__attr_literal!(RxAttr to_bits, RawRxAttr from r {
        struct_size: std::mem::size_of::<RawRxAttr>(),
    })
}

pub(super) fn tx_from(t: &RawTxAttr) -> TxAttr {
    crate::__attr_literal!(TxAttr from_bits, TxAttr from t {})
}

pub(super) fn rx_from(r: &RawRxAttr) -> RxAttr {
    crate::__attr_literal!(RxAttr from_bits, RxAttr from r {})
}

/// Transmit attributes from their raw form (null → defaults).
///
/// # Safety
/// A non-null `p` must point to a valid [`RawTxAttr`].
pub unsafe fn tx_attr_from_raw(p: *const RawTxAttr) -> Result<TxAttr> {
    // SAFETY: forwarded from this function's contract.
    Ok(
        unsafe { sub(p, RawTxAttr::LAYOUT.size_for_minor(0), "tx_attr") }?
            .map(tx_from)
            .unwrap_or_default(),
    )
}

/// Receive attributes from their raw form (null → defaults).
///
/// # Safety
/// A non-null `p` must point to a valid [`RawRxAttr`].
pub unsafe fn rx_attr_from_raw(p: *const RawRxAttr) -> Result<RxAttr> {
    // SAFETY: forwarded from this function's contract.
    Ok(
        unsafe { sub(p, RawRxAttr::LAYOUT.size_for_minor(0), "rx_attr") }?
            .map(rx_from)
            .unwrap_or_default(),
    )
}

/// Read a sub-structure that starts with `struct_size`: `None` for a null pointer; an
/// error if it is shorter than its first layout.
///
/// # Safety
/// A non-null `p` must point to a valid structure of its declared `struct_size`.
pub(super) unsafe fn sub<'a, T>(p: *const T, min: usize, what: &str) -> Result<Option<&'a T>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: every raw sub-structure begins with `struct_size: usize`; `p` is valid.
    let size = unsafe { *(p as *const usize) };
    if size < min {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{what}: struct_size {size} is smaller than the first layout ({min})"),
        ));
    }
    // SAFETY: at least the original layout is present, which is all of `T` at minor 0;
    // fields appended by later minors are checked against `struct_size` before use.
    Ok(Some(unsafe { &*p }))
}

/// `RawNic::bus_type` of [`Bus::Unknown`].
const BUS_UNKNOWN: u32 = 0;
/// `RawNic::bus_type` of [`Bus::Pci`].
const BUS_PCI: u32 = 1;

/// The bus of a raw NIC: [`Bus::Unknown`] from a producer older than minor 4 (its
/// `struct_size` ends before the bus fields, which are then never read).
fn bus_from_raw(n: &RawNic) -> Result<Bus> {
    if n.struct_size < RawNic::LAYOUT.size_for_minor(4) {
        return Ok(Bus::Unknown);
    }
    match n.bus_type {
        BUS_UNKNOWN => Ok(Bus::Unknown),
        BUS_PCI if n.pci_device < 32 && n.pci_function < 8 => Ok(Bus::Pci(PciAddress {
            domain: n.pci_domain,
            bus: n.pci_bus,
            device: n.pci_device,
            function: n.pci_function,
        })),
        BUS_PCI => Err(Error::new(
            Errno::EINVAL,
            format!(
                "nic: PCI device {} function {} out of range",
                n.pci_device, n.pci_function
            ),
        )),
        other => Err(Error::new(
            Errno::EINVAL,
            format!("nic.bus_type: invalid value {other}"),
        )),
    }
}

/// The [`Info`] a raw form describes (a deep copy).
///
/// # Safety
/// `p` must point to a valid [`RawInfo`] whose pointers are valid as documented there,
/// for the duration of the call.
pub unsafe fn info_from_raw(p: *const RawInfo) -> Result<Info> {
    // SAFETY: forwarded from this function's contract.
    let raw = unsafe { sub(p, RawInfo::LAYOUT.size_for_minor(0), "info") }?
        .ok_or_else(|| Error::new(Errno::EINVAL, "info: null pointer"))?;
    let mut info = Info::new();
    // SAFETY: every pointer read below (sub-structures, strings, addresses) is valid
    // by this function's contract.
    unsafe {
        info.caps = Caps::from_bits_retain(raw.caps);
        info.mode = Mode::from_bits_retain(raw.mode);
        info.addr_format = AddrFormat::from_raw(raw.addr_format);
        info.src_addr = raw.src_addr.to_address("info.src_addr")?;
        info.dest_addr = raw.dest_addr.to_address("info.dest_addr")?;
        info.handle = raw.handle;
        if let Some(t) = sub(raw.tx_attr, RawTxAttr::LAYOUT.size_for_minor(0), "tx_attr")? {
            info.tx_attr = tx_from(t);
        }
        if let Some(r) = sub(raw.rx_attr, RawRxAttr::LAYOUT.size_for_minor(0), "rx_attr")? {
            info.rx_attr = rx_from(r);
        }
        if let Some(e) = sub(raw.ep_attr, RawEpAttr::LAYOUT.size_for_minor(0), "ep_attr")? {
            info.ep_attr = crate::__attr_literal!(EpAttr checked, EpAttr from e {
                auth_key: e.auth_key.bytes().map(<[u8]>::to_vec),
            });
        }
        if let Some(d) = sub(
            raw.domain_attr,
            RawDomainAttr::LAYOUT.size_for_minor(0),
            "domain_attr",
        )? {
            info.domain_attr = crate::__attr_literal!(DomainAttr checked, DomainAttr from d {
                domain: d.domain,
                name: d.name.to_string_opt("domain_attr.name")?,
                mr_mode: MrMode::from_bits_retain(d.mr_mode),
                auth_key: d.auth_key.bytes().map(<[u8]>::to_vec),
            });
        }
        if let Some(f) = sub(
            raw.fabric_attr,
            RawFabricAttr::LAYOUT.size_for_minor(0),
            "fabric_attr",
        )? {
            info.fabric_attr = FabricAttr {
                fabric: f.fabric,
                name: f.name.to_string_opt("fabric_attr.name")?,
                prov_name: f.prov_name.to_string_opt("fabric_attr.prov_name")?,
                prov_version: Version::from_raw(f.prov_version),
                api_version: Version::from_raw(f.api_version),
            };
        }
        if let Some(n) = sub(raw.nic, RawNic::LAYOUT.size_for_minor(0), "nic")? {
            info.nic = Some(Nic {
                device_name: n.device_name.to_string_opt("nic.device_name")?,
                device_id: n.device_id.to_string_opt("nic.device_id")?,
                device_version: n.device_version.to_string_opt("nic.device_version")?,
                vendor_id: n.vendor_id.to_string_opt("nic.vendor_id")?,
                driver: n.driver.to_string_opt("nic.driver")?,
                firmware: n.firmware.to_string_opt("nic.firmware")?,
                link_address: n.link_address.to_string_opt("nic.link_address")?,
                mtu: n.mtu,
                speed: n.speed,
                link_up: n.link_up != 0,
                network_type: n.network_type.to_string_opt("nic.network_type")?,
                bus: bus_from_raw(n)?,
            });
        }
    }
    Ok(info)
}

/// Read `count` infos from an array of pointers.
///
/// # Safety
/// `ptrs` must be valid for `count` reads (or `count` be 0) and each element satisfy
/// [`info_from_raw`]'s contract.
pub unsafe fn infos_from_raw(ptrs: *const *const RawInfo, count: usize) -> Result<Vec<Info>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if ptrs.is_null() {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{count} infos announced, null array"),
        ));
    }
    // SAFETY: valid for `count` elements by the caller's contract.
    let ptrs = unsafe { std::slice::from_raw_parts(ptrs, count) };
    ptrs.iter()
        .enumerate()
        // SAFETY: each element is valid by the caller's contract.
        .map(|(i, p)| unsafe { info_from_raw(*p) }.map_err(|e| e.context(format!("info #{i}"))))
        .collect()
}
