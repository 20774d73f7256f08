//! Text forms of attributes in the layout of the C library's `fi_tostr` (libfabric 1.17).
//!
//! [`info_to_string`] prints an [`Info`] the way `fi_tostr(info, FI_TYPE_INFO)` does and
//! so the way `fi_info -v` shows it: a `fi_info:` line, then 4-space indented fields and
//! the nested `fi_tx_attr:`, `fi_rx_attr:`, `fi_ep_attr:`, `fi_domain_attr:` and
//! `fi_fabric_attr:` blocks with 8-space fields, and a final `nic:` line. Every line ends
//! with `\n`. The per-structure printers ([`tx_attr_to_string`], ...) are the
//! `FI_TYPE_TX_ATTR`, ... forms, with no indentation before the block name.
//!
//! Invariants the output keeps (they are what the 1.17 library prints):
//! - bit sets print as `[ A, B ]` and the empty set as `[  ]` (two spaces), in the fixed
//!   order of the C printer, not in bit order; bits the 1.17 printer has no name for are
//!   left out, except the newer capabilities `FI_AV_USER_ID`, `FI_PEER` and `FI_XPU`,
//!   which are appended after `FI_HMEM` so that no capability goes unseen;
//! - `comp_order` prints `FI_ORDER_NONE` or `FI_ORDER_STRICT` (by the strict bits) and
//!   then `FI_ORDER_DATA`;
//! - operation flags print only the flags the C printer knows as operation flags
//!   (`FI_MULTICAST`, `FI_MULTI_RECV`, ..., `FI_CLAIM`, `FI_DISCARD`); the capability
//!   bits that share their space are not repeated there;
//! - enumerations print their C name, `Unknown` for a value the 1.17 printer has no
//!   name for, and `Provider specific` for such a value with bit 31 set;
//! - absent strings print `(null)`; a zero handle prints `(nil)`, another one in hex;
//!   `mem_tag_format` prints as 16 hex digits, `tclass` as `0x` hex, versions as `M.m`,
//!   endpoint context counts equal to [`SHARED_CONTEXT`] as `FI_SHARED_CONTEXT`;
//! - addresses print as the C library's address strings ([`addr_str`]).
//!
//! The one deliberate extension: the C 1.17 printer shows a NIC as a pointer; here a
//! present [`Nic`] prints as the nested `fi_device_attr:` / `fi_bus_attr:` /
//! `fi_link_attr:` block the C library's NIC printer produces.
//!
//! Nothing here panics.

use std::fmt::Write as _;

use crate::addr::Address;
use crate::attr::{Bus, DomainAttr, EpAttr, FabricAttr, Info, Nic, RxAttr, TxAttr};
use crate::enums::{AddrFormat, EpType, Protocol, SHARED_CONTEXT};
use crate::flags::{Caps, CompOrder, Mode, MrMode, MsgOrder, OpFlags};

/// One level of indentation (the C printer's `TAB`: four spaces).
const TAB: &str = "    ";

/// `FI_PROV_SPECIFIC`: the bit marking a provider-specific enumeration value.
const PROV_SPECIFIC: u32 = 1 << 31;

/// Capabilities in the order the 1.17 printer lists them, then the newer ones.
const CAPS_ORDER: &[Caps] = &[
    Caps::MSG,
    Caps::RMA,
    Caps::TAGGED,
    Caps::ATOMIC,
    Caps::MULTICAST,
    Caps::COLLECTIVE,
    Caps::READ,
    Caps::WRITE,
    Caps::RECV,
    Caps::SEND,
    Caps::REMOTE_READ,
    Caps::REMOTE_WRITE,
    Caps::MULTI_RECV,
    Caps::REMOTE_CQ_DATA,
    Caps::TRIGGER,
    Caps::FENCE,
    Caps::VARIABLE_MSG,
    Caps::RMA_PMEM,
    Caps::SOURCE_ERR,
    Caps::LOCAL_COMM,
    Caps::REMOTE_COMM,
    Caps::SHARED_AV,
    Caps::RMA_EVENT,
    Caps::SOURCE,
    Caps::NAMED_RX_CTX,
    Caps::DIRECTED_RECV,
    Caps::HMEM,
    // Not printed by 1.17, which predates them; appended so they are not lost.
    Caps::AV_USER_ID,
    Caps::PEER,
    Caps::XPU,
];

/// The operation flags the 1.17 printer knows, in its order.
const OP_FLAGS_ORDER: &[OpFlags] = &[
    OpFlags::MULTICAST,
    OpFlags::MULTI_RECV,
    OpFlags::REMOTE_CQ_DATA,
    OpFlags::MORE,
    OpFlags::PEEK,
    OpFlags::TRIGGER,
    OpFlags::FENCE,
    OpFlags::COMPLETION,
    OpFlags::INJECT,
    OpFlags::INJECT_COMPLETE,
    OpFlags::TRANSMIT_COMPLETE,
    OpFlags::DELIVERY_COMPLETE,
    OpFlags::MATCH_COMPLETE,
    OpFlags::AFFINITY,
    OpFlags::CLAIM,
    OpFlags::DISCARD,
];

/// Joins names into the `[ A, B ]` form; no names gives `[  ]`.
fn bracket(names: &[&str]) -> String {
    format!("[ {} ]", names.join(", "))
}

/// The C names (`name`) of the flags of a printer's `order` table that `is_set` holds,
/// in the table's order.
fn names_in_order<F: Copy>(
    order: &[F],
    is_set: impl Fn(F) -> bool,
    name: impl Fn(F) -> Option<&'static str>,
) -> Vec<&'static str> {
    order
        .iter()
        .filter(|f| is_set(**f))
        .filter_map(|f| name(*f))
        .collect()
}

/// The names of the capabilities set in `caps`, in `fi_tostr` order (see the module
/// docs for the newer capabilities).
pub fn caps_names(caps: Caps) -> Vec<&'static str> {
    names_in_order(CAPS_ORDER, |f| caps.contains(f), Caps::name)
}

/// Capabilities as `fi_tostr` prints them: `[ FI_MSG, FI_RMA ]`, `[  ]` when empty.
pub fn caps_str(caps: Caps) -> String {
    bracket(&caps_names(caps))
}

/// The names of the operation flags set in `flags` that the C printer shows as
/// operation flags, in its order.
pub fn op_flags_names(flags: OpFlags) -> Vec<&'static str> {
    names_in_order(OP_FLAGS_ORDER, |f| flags.contains(f), OpFlags::name)
}

/// Operation flags as `fi_tostr` prints them, e.g. `[ FI_COMPLETION ]`.
pub fn op_flags_str(flags: OpFlags) -> String {
    bracket(&op_flags_names(flags))
}

/// Mode bits as `fi_tostr` prints them, e.g. `[ FI_CONTEXT, FI_MSG_PREFIX ]`.
pub fn mode_str(mode: Mode) -> String {
    bracket(&mode.names())
}

/// Memory-registration mode bits as `fi_tostr` prints them, e.g. `[ FI_MR_LOCAL ]`.
pub fn mr_mode_str(mr_mode: MrMode) -> String {
    bracket(&mr_mode.names())
}

/// Message ordering as `fi_tostr` prints it, e.g. `[ FI_ORDER_RAR, FI_ORDER_SAS ]`.
pub fn msg_order_str(order: MsgOrder) -> String {
    bracket(&order.names())
}

/// The names `fi_tostr` prints for a completion order: `FI_ORDER_NONE` when no strict
/// bit is set, `FI_ORDER_STRICT` when all are (nothing for a partial set), then
/// `FI_ORDER_DATA` if set.
pub fn comp_order_names(order: CompOrder) -> Vec<&'static str> {
    let mut names = Vec::new();
    let strict = order & CompOrder::STRICT;
    if strict.is_empty() {
        names.push("FI_ORDER_NONE");
    } else if strict == CompOrder::STRICT {
        names.push("FI_ORDER_STRICT");
    }
    if order.contains(CompOrder::DATA) {
        names.push("FI_ORDER_DATA");
    }
    names
}

/// Completion order as `fi_tostr` prints it, e.g. `[ FI_ORDER_STRICT ]`.
pub fn comp_order_str(order: CompOrder) -> String {
    bracket(&comp_order_names(order))
}

/// The endpoint type's C name (`FI_EP_MSG`, ...).
pub fn ep_type_str(ep_type: EpType) -> &'static str {
    ep_type.name()
}

/// The protocol's name as the 1.17 printer shows it: the C name, `Unknown` for a
/// value it has no name for (including the retired `FI_PROTO_MXM` and
/// `FI_PROTO_MRAIL`), or `Provider specific` for such a value with bit 31 set.
pub fn protocol_str(protocol: Protocol) -> &'static str {
    if protocol.is_known() && protocol != Protocol::MXM && protocol != Protocol::MRAIL {
        protocol.name()
    } else if protocol.to_raw() & PROV_SPECIFIC != 0 {
        "Provider specific"
    } else {
        "Unknown"
    }
}

/// Whether the 1.17 printer has a name for this address format.
fn addr_format_known(format: AddrFormat) -> bool {
    format.is_known() && format.to_raw() <= AddrFormat::CXI.to_raw()
}

/// The address format's name as the 1.17 printer shows it: the C name, `Unknown`, or
/// `Provider specific` (bit 31 set).
pub fn addr_format_str(format: AddrFormat) -> &'static str {
    if addr_format_known(format) {
        format.name()
    } else if format.to_raw() & PROV_SPECIFIC != 0 {
        "Provider specific"
    } else {
        "Unknown"
    }
}

/// Reads the `i`-th native-endian `u64` of `bytes`, if there are enough bytes.
fn word64(bytes: &[u8], i: usize) -> Option<u64> {
    let b = bytes.get(i * 8..i * 8 + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_ne_bytes(a))
}

/// `scheme://` followed by `n` native `u64` words in `%lx` form joined by `:`, if the
/// bytes hold them.
fn words_str(scheme: &str, bytes: &[u8], n: usize) -> Option<String> {
    let words: Option<Vec<String>> = (0..n)
        .map(|i| word64(bytes, i).map(|w| format!("{w:x}")))
        .collect();
    Some(format!("{scheme}://{}", words?.join(":")))
}

/// The C text of a binary address of a non-IP format, where the C printer's form does
/// not depend on memory addresses; `None` where it does or the bytes are too short.
fn raw_c_form(format: AddrFormat, bytes: &[u8]) -> Option<String> {
    match format {
        AddrFormat::PSMX => words_str("fi_addr_psmx", bytes, 1),
        AddrFormat::GNI => words_str("fi_addr_gni", bytes, 1),
        AddrFormat::PSMX2 => words_str("fi_addr_psmx2", bytes, 2),
        AddrFormat::PSMX3 => words_str("fi_addr_psmx3", bytes, 4),
        AddrFormat::OPX => Some(format!("fi_addr_opx://{:016x}", word64(bytes, 0)?)),
        AddrFormat::CXI => {
            let b = bytes.get(..4)?;
            Some(format!(
                "fi_addr_cxi://0x{:08x}",
                u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
            ))
        }
        AddrFormat::EFA => {
            // 16-byte GID, 16-bit QP number, 2 bytes of padding, 32-bit QKey.
            let gid: [u8; 16] = bytes.get(..16)?.try_into().ok()?;
            let qpn = bytes.get(16..18)?;
            let qkey = bytes.get(20..24)?;
            Some(format!(
                "fi_addr_efa://[{}]:{}:{}",
                std::net::Ipv6Addr::from(gid),
                u16::from_ne_bytes([qpn[0], qpn[1]]),
                u32::from_ne_bytes([qkey[0], qkey[1], qkey[2], qkey[3]])
            ))
        }
        _ => None,
    }
}

/// An address as `fi_tostr` prints `src_addr` / `dest_addr`: `(null)` when absent,
/// `fi_sockaddr_in://A.B.C.D:port`, `fi_sockaddr_in6://[addr]:port` (no scope id, like
/// the C printer), the string itself for `FI_ADDR_STR`, the C printer's form for the
/// PSM, PSM2, PSM3, GNI, OPX, CXI and EFA formats, an empty string for
/// `FI_FORMAT_UNSPEC` and for formats the C printer does not know, and the
/// `FI_ADDR_STR` form of [`Address`] for the rest (whose C form shows a pointer).
pub fn addr_str(addr: Option<&Address>) -> String {
    let Some(addr) = addr else {
        return "(null)".to_string();
    };
    match addr {
        Address::Inet(a) => format!("fi_sockaddr_in://{}:{}", a.ip(), a.port()),
        Address::Inet6(a) => format!("fi_sockaddr_in6://[{}]:{}", a.ip(), a.port()),
        Address::Str(s) => s.clone(),
        Address::Raw { format, bytes } => {
            if format.has_structured_form() {
                return match Address::from_bytes(*format, bytes) {
                    Ok(decoded) => addr_str(Some(&decoded)),
                    Err(_) => addr.to_addr_str(),
                };
            }
            if *format == AddrFormat::UNSPEC || !addr_format_known(*format) {
                return String::new();
            }
            raw_c_form(*format, bytes).unwrap_or_else(|| addr.to_addr_str())
        }
    }
}

/// A string field: the value, or `(null)`.
fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("(null)")
}

/// An endpoint context count: the number, or `FI_SHARED_CONTEXT`.
fn ctx_cnt(n: usize) -> String {
    if n == SHARED_CONTEXT {
        "FI_SHARED_CONTEXT".to_string()
    } else {
        n.to_string()
    }
}

/// Appends one `prefix + TAB + name: value` line.
fn field(out: &mut String, prefix: &str, name: &str, value: impl std::fmt::Display) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{prefix}{TAB}{name}: {value}");
}

/// One [`field`] line for each listed field of `$attr`, in the order given, under the
/// field's own name (the C printer names each line after the structure's field): the
/// value as it displays, or with `$attr.method()`, what that method of the value
/// returns (`a.name(); threading, av_type` prints `a.threading.name()`, ...).
macro_rules! fields {
    ($out:expr, $prefix:expr, $attr:ident; $($name:ident),+ $(,)?) => {
        $(field($out, $prefix, stringify!($name), $attr.$name);)+
    };
    ($out:expr, $prefix:expr, $attr:ident . $method:ident (); $($name:ident),+ $(,)?) => {
        $(field($out, $prefix, stringify!($name), $attr.$name.$method());)+
    };
}

/// An authorization key's length as the printers show `auth_key_size` (0: none).
fn key_size(key: &Option<Vec<u8>>) -> usize {
    key.as_ref().map_or(0, Vec::len)
}

/// The heading and the leading fields `fi_tx_attr` and `fi_rx_attr` share (`caps`,
/// `mode`, `op_flags`, `msg_order`, `comp_order`).
fn write_ctx_attr_head(
    out: &mut String,
    prefix: &str,
    name: &str,
    (caps, mode, op_flags, msg_order, comp_order): (Caps, Mode, OpFlags, MsgOrder, CompOrder),
) {
    let _ = writeln!(out, "{prefix}{name}:");
    field(out, prefix, "caps", caps_str(caps));
    field(out, prefix, "mode", mode_str(mode));
    field(out, prefix, "op_flags", op_flags_str(op_flags));
    field(out, prefix, "msg_order", msg_order_str(msg_order));
    field(out, prefix, "comp_order", comp_order_str(comp_order));
}

fn write_tx_attr(out: &mut String, a: &TxAttr, prefix: &str) {
    let head = (a.caps, a.mode, a.op_flags, a.msg_order, a.comp_order);
    write_ctx_attr_head(out, prefix, "fi_tx_attr", head);
    fields!(out, prefix, a; inject_size, size, iov_limit, rma_iov_limit);
    field(out, prefix, "tclass", format_args!("{:#x}", a.tclass));
}

fn write_rx_attr(out: &mut String, a: &RxAttr, prefix: &str) {
    let head = (a.caps, a.mode, a.op_flags, a.msg_order, a.comp_order);
    write_ctx_attr_head(out, prefix, "fi_rx_attr", head);
    fields!(out, prefix, a; total_buffered_recv, size, iov_limit);
}

fn write_ep_attr(out: &mut String, a: &EpAttr, prefix: &str) {
    let _ = writeln!(out, "{prefix}fi_ep_attr:");
    field(out, prefix, "type", ep_type_str(a.ep_type));
    field(out, prefix, "protocol", protocol_str(a.protocol));
    fields!(out, prefix, a; protocol_version, max_msg_size, msg_prefix_size,
        max_order_raw_size, max_order_war_size, max_order_waw_size);
    field(
        out,
        prefix,
        "mem_tag_format",
        format_args!("0x{:016x}", a.mem_tag_format),
    );
    field(out, prefix, "tx_ctx_cnt", ctx_cnt(a.tx_ctx_cnt));
    field(out, prefix, "rx_ctx_cnt", ctx_cnt(a.rx_ctx_cnt));
    field(out, prefix, "auth_key_size", key_size(&a.auth_key));
}

fn write_domain_attr(out: &mut String, a: &DomainAttr, prefix: &str) {
    let _ = writeln!(out, "{prefix}fi_domain_attr:");
    field(out, prefix, "domain", format_args!("{:#x}", a.domain));
    field(out, prefix, "name", opt(&a.name));
    fields!(out, prefix, a.name(); threading, control_progress, data_progress, resource_mgmt,
        av_type);
    field(out, prefix, "mr_mode", mr_mode_str(a.mr_mode));
    fields!(out, prefix, a; mr_key_size, cq_data_size, cq_cnt, ep_cnt, tx_ctx_cnt, rx_ctx_cnt,
        max_ep_tx_ctx, max_ep_rx_ctx, max_ep_stx_ctx, max_ep_srx_ctx, cntr_cnt, mr_iov_limit);
    field(out, prefix, "caps", caps_str(a.caps));
    field(out, prefix, "mode", mode_str(a.mode));
    field(out, prefix, "auth_key_size", key_size(&a.auth_key));
    fields!(out, prefix, a; max_err_data, mr_cnt);
    field(out, prefix, "tclass", format_args!("{:#x}", a.tclass));
}

fn write_fabric_attr(out: &mut String, a: &FabricAttr, prefix: &str) {
    let _ = writeln!(out, "{prefix}fi_fabric_attr:");
    field(out, prefix, "name", opt(&a.name));
    field(out, prefix, "prov_name", opt(&a.prov_name));
    field(out, prefix, "prov_version", a.prov_version);
    field(out, prefix, "api_version", a.api_version);
}

fn write_nic(out: &mut String, nic: Option<&Nic>, prefix: &str) {
    let Some(n) = nic else {
        let _ = writeln!(out, "{prefix}nic: (nil)");
        return;
    };
    let p1 = format!("{prefix}{TAB}");
    let _ = writeln!(out, "{prefix}nic:");
    let _ = writeln!(out, "{p1}fi_device_attr:");
    field(out, &p1, "name", opt(&n.device_name));
    field(out, &p1, "device_id", opt(&n.device_id));
    field(out, &p1, "device_version", opt(&n.device_version));
    field(out, &p1, "vendor_id", opt(&n.vendor_id));
    field(out, &p1, "driver", opt(&n.driver));
    field(out, &p1, "firmware", opt(&n.firmware));
    let _ = writeln!(out, "{p1}fi_bus_attr:");
    match n.bus {
        Bus::Unknown => field(out, &p1, "bus_type", "FI_BUS_UNKNOWN"),
        Bus::Pci(a) => {
            field(out, &p1, "bus_type", "FI_BUS_PCI");
            let p2 = format!("{p1}{TAB}");
            let _ = writeln!(out, "{p2}fi_pci_attr:");
            field(out, &p2, "domain_id", a.domain);
            field(out, &p2, "bus_id", a.bus);
            field(out, &p2, "device_id", a.device);
            field(out, &p2, "function_id", a.function);
        }
    }
    let _ = writeln!(out, "{p1}fi_link_attr:");
    field(out, &p1, "address", opt(&n.link_address));
    field(out, &p1, "mtu", n.mtu);
    field(out, &p1, "speed", n.speed);
    field(
        out,
        &p1,
        "state",
        if n.link_up {
            "FI_LINK_UP"
        } else {
            "FI_LINK_DOWN"
        },
    );
    field(out, &p1, "network_type", opt(&n.network_type));
}

/// A handle as the C printer shows a pointer: `(nil)` for 0, else `0x` hex.
fn handle_str(h: usize) -> String {
    if h == 0 {
        "(nil)".to_string()
    } else {
        format!("{h:#x}")
    }
}

/// The `fi_tostr(FI_TYPE_INFO)` text of `info` (the block `fi_info -v` prints after
/// each `---`), ending with a newline.
pub fn info_to_string(info: &Info) -> String {
    let mut out = String::with_capacity(4096);
    out.push_str("fi_info:\n");
    field(&mut out, "", "caps", caps_str(info.caps));
    field(&mut out, "", "mode", mode_str(info.mode));
    field(
        &mut out,
        "",
        "addr_format",
        addr_format_str(info.addr_format),
    );
    field(
        &mut out,
        "",
        "src_addrlen",
        info.src_addr.as_ref().map_or(0, Address::addrlen),
    );
    field(
        &mut out,
        "",
        "dest_addrlen",
        info.dest_addr.as_ref().map_or(0, Address::addrlen),
    );
    field(&mut out, "", "src_addr", addr_str(info.src_addr.as_ref()));
    field(&mut out, "", "dest_addr", addr_str(info.dest_addr.as_ref()));
    field(&mut out, "", "handle", handle_str(info.handle));
    write_tx_attr(&mut out, &info.tx_attr, TAB);
    write_rx_attr(&mut out, &info.rx_attr, TAB);
    write_ep_attr(&mut out, &info.ep_attr, TAB);
    write_domain_attr(&mut out, &info.domain_attr, TAB);
    write_fabric_attr(&mut out, &info.fabric_attr, TAB);
    write_nic(&mut out, info.nic.as_ref(), TAB);
    out
}

/// What `write` prints for `value` as a top-level block (no indent before its header).
fn top_level<T>(value: T, write: impl FnOnce(&mut String, T, &str)) -> String {
    let mut out = String::new();
    write(&mut out, value, "");
    out
}

/// The `fi_tostr(FI_TYPE_TX_ATTR)` text: `fi_tx_attr:` and 4-space indented fields.
pub fn tx_attr_to_string(attr: &TxAttr) -> String {
    top_level(attr, write_tx_attr)
}

/// The `fi_tostr(FI_TYPE_RX_ATTR)` text: `fi_rx_attr:` and 4-space indented fields.
pub fn rx_attr_to_string(attr: &RxAttr) -> String {
    top_level(attr, write_rx_attr)
}

/// The `fi_tostr(FI_TYPE_EP_ATTR)` text: `fi_ep_attr:` and 4-space indented fields.
pub fn ep_attr_to_string(attr: &EpAttr) -> String {
    top_level(attr, write_ep_attr)
}

/// The `fi_tostr(FI_TYPE_DOMAIN_ATTR)` text: `fi_domain_attr:` and indented fields.
pub fn domain_attr_to_string(attr: &DomainAttr) -> String {
    top_level(attr, write_domain_attr)
}

/// The `fi_tostr(FI_TYPE_FABRIC_ATTR)` text: `fi_fabric_attr:` and indented fields.
pub fn fabric_attr_to_string(attr: &FabricAttr) -> String {
    top_level(attr, write_fabric_attr)
}

/// A NIC as the C library's NIC printer shows it: `nic:` then the device, bus and
/// link blocks (4-space steps); `nic: (nil)` for `None`.
pub fn nic_to_string(nic: Option<&Nic>) -> String {
    top_level(nic, write_nic)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enums::{AvType, Progress, ResourceMgmt, Threading};
    use crate::version::Version;
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

    /// The tcp FI_EP_MSG entry as the C 1.17 `fi_info -v -p tcp -t FI_EP_MSG` prints it.
    const TCP_MSG_EXPECTED: &str = "\
fi_info:
    caps: [ FI_MSG, FI_RMA, FI_READ, FI_WRITE, FI_RECV, FI_SEND, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_RMA_PMEM, FI_LOCAL_COMM, FI_REMOTE_COMM, FI_RMA_EVENT ]
    mode: [  ]
    addr_format: FI_SOCKADDR_IN
    src_addrlen: 16
    dest_addrlen: 0
    src_addr: fi_sockaddr_in://192.0.2.2:0
    dest_addr: (null)
    handle: (nil)
    fi_tx_attr:
        caps: [ FI_MSG, FI_RMA, FI_READ, FI_WRITE, FI_SEND, FI_RMA_PMEM ]
        mode: [  ]
        op_flags: [  ]
        msg_order: [ FI_ORDER_RAR, FI_ORDER_RAW, FI_ORDER_RAS, FI_ORDER_WAW, FI_ORDER_WAS, FI_ORDER_SAW, FI_ORDER_SAS, FI_ORDER_RMA_RAR, FI_ORDER_RMA_RAW, FI_ORDER_RMA_WAW, FI_ORDER_ATOMIC_RAR, FI_ORDER_ATOMIC_RAW, FI_ORDER_ATOMIC_WAW ]
        comp_order: [ FI_ORDER_STRICT ]
        inject_size: 128
        size: 256
        iov_limit: 4
        rma_iov_limit: 4
        tclass: 0x0
    fi_rx_attr:
        caps: [ FI_MSG, FI_RMA, FI_RECV, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_RMA_PMEM, FI_RMA_EVENT ]
        mode: [  ]
        op_flags: [  ]
        msg_order: [ FI_ORDER_RAR, FI_ORDER_RAW, FI_ORDER_RAS, FI_ORDER_WAW, FI_ORDER_WAS, FI_ORDER_SAW, FI_ORDER_SAS, FI_ORDER_RMA_RAR, FI_ORDER_RMA_RAW, FI_ORDER_RMA_WAW, FI_ORDER_ATOMIC_RAR, FI_ORDER_ATOMIC_RAW, FI_ORDER_ATOMIC_WAW ]
        comp_order: [ FI_ORDER_STRICT ]
        total_buffered_recv: 0
        size: 256
        iov_limit: 4
    fi_ep_attr:
        type: FI_EP_MSG
        protocol: FI_PROTO_SOCK_TCP
        protocol_version: 0
        max_msg_size: 18446744073709551615
        msg_prefix_size: 0
        max_order_raw_size: 18446744073709551615
        max_order_war_size: 0
        max_order_waw_size: 18446744073709551615
        mem_tag_format: 0x0000000000000000
        tx_ctx_cnt: 1
        rx_ctx_cnt: 1
        auth_key_size: 0
    fi_domain_attr:
        domain: 0x0
        name: eth0
        threading: FI_THREAD_SAFE
        control_progress: FI_PROGRESS_AUTO
        data_progress: FI_PROGRESS_AUTO
        resource_mgmt: FI_RM_ENABLED
        av_type: FI_AV_UNSPEC
        mr_mode: [  ]
        mr_key_size: 8
        cq_data_size: 8
        cq_cnt: 256
        ep_cnt: 8192
        tx_ctx_cnt: 8192
        rx_ctx_cnt: 8192
        max_ep_tx_ctx: 1
        max_ep_rx_ctx: 1
        max_ep_stx_ctx: 0
        max_ep_srx_ctx: 8192
        cntr_cnt: 0
        mr_iov_limit: 1
        caps: [ FI_LOCAL_COMM, FI_REMOTE_COMM ]
        mode: [  ]
        auth_key_size: 0
        max_err_data: 0
        mr_cnt: 0
        tclass: 0x0
    fi_fabric_attr:
        name: 192.0.2.0/24
        prov_name: tcp
        prov_version: 117.0
        api_version: 1.17
    nic: (nil)
";

    fn tcp_msg_info() -> Info {
        let order = MsgOrder::RAR
            | MsgOrder::RAW
            | MsgOrder::RAS
            | MsgOrder::WAW
            | MsgOrder::WAS
            | MsgOrder::SAW
            | MsgOrder::SAS
            | MsgOrder::RMA_RAR
            | MsgOrder::RMA_RAW
            | MsgOrder::RMA_WAW
            | MsgOrder::ATOMIC_RAR
            | MsgOrder::ATOMIC_RAW
            | MsgOrder::ATOMIC_WAW;
        let mut i = Info::new();
        i.caps = Caps::MSG
            | Caps::RMA
            | Caps::READ
            | Caps::WRITE
            | Caps::RECV
            | Caps::SEND
            | Caps::REMOTE_READ
            | Caps::REMOTE_WRITE
            | Caps::RMA_PMEM
            | Caps::LOCAL_COMM
            | Caps::REMOTE_COMM
            | Caps::RMA_EVENT;
        i.addr_format = AddrFormat::SOCKADDR_IN;
        i.src_addr = Some(Address::Inet(SocketAddrV4::new(
            Ipv4Addr::new(192, 0, 2, 2),
            0,
        )));
        i.tx_attr = TxAttr {
            caps: Caps::MSG | Caps::RMA | Caps::READ | Caps::WRITE | Caps::SEND | Caps::RMA_PMEM,
            msg_order: order,
            comp_order: CompOrder::STRICT,
            inject_size: 128,
            size: 256,
            iov_limit: 4,
            rma_iov_limit: 4,
            ..TxAttr::default()
        };
        i.rx_attr = RxAttr {
            caps: Caps::MSG
                | Caps::RMA
                | Caps::RECV
                | Caps::REMOTE_READ
                | Caps::REMOTE_WRITE
                | Caps::RMA_PMEM
                | Caps::RMA_EVENT,
            msg_order: order,
            comp_order: CompOrder::STRICT,
            size: 256,
            iov_limit: 4,
            ..RxAttr::default()
        };
        i.ep_attr = EpAttr {
            ep_type: EpType::Msg,
            protocol: Protocol::SOCK_TCP,
            max_msg_size: usize::MAX,
            max_order_raw_size: usize::MAX,
            max_order_waw_size: usize::MAX,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            ..EpAttr::default()
        };
        i.domain_attr = DomainAttr {
            name: Some("eth0".into()),
            threading: Threading::Safe,
            control_progress: Progress::Auto,
            data_progress: Progress::Auto,
            resource_mgmt: ResourceMgmt::Enabled,
            av_type: AvType::Unspec,
            mr_key_size: 8,
            cq_data_size: 8,
            cq_cnt: 256,
            ep_cnt: 8192,
            tx_ctx_cnt: 8192,
            rx_ctx_cnt: 8192,
            max_ep_tx_ctx: 1,
            max_ep_rx_ctx: 1,
            max_ep_srx_ctx: 8192,
            mr_iov_limit: 1,
            caps: Caps::LOCAL_COMM | Caps::REMOTE_COMM,
            ..DomainAttr::default()
        };
        i.fabric_attr = FabricAttr {
            name: Some("192.0.2.0/24".into()),
            prov_name: Some("tcp".into()),
            prov_version: Version::new(117, 0),
            api_version: Version::new(1, 17),
            ..FabricAttr::default()
        };
        i
    }

    #[test]
    fn info_matches_c_tool_output() {
        let got = info_to_string(&tcp_msg_info());
        for (n, (g, e)) in got.lines().zip(TCP_MSG_EXPECTED.lines()).enumerate() {
            assert_eq!(g, e, "line {}", n + 1);
        }
        assert_eq!(got, TCP_MSG_EXPECTED);
    }

    #[test]
    fn every_line_is_indented_by_level() {
        let got = info_to_string(&Info::new());
        let mut lines = got.lines();
        assert_eq!(lines.next(), Some("fi_info:"));
        for l in lines {
            let indent = l.len() - l.trim_start().len();
            assert!(indent == 4 || indent == 8, "{l:?}");
            if indent == 4 {
                assert!(!l.ends_with(": "), "{l:?}");
            }
        }
        assert_eq!(got.lines().count(), 1 + 8 + 11 + 9 + 13 + 27 + 5 + 1);
        assert!(got.ends_with("    nic: (nil)\n"));
        assert!(got.contains("    addr_format: FI_FORMAT_UNSPEC\n"));
        assert!(got.contains("        comp_order: [ FI_ORDER_NONE ]\n"));
        assert!(got.contains("        name: (null)\n"));
        assert!(got.contains("        prov_version: 0.0\n"));
    }

    #[test]
    fn flag_lists() {
        assert_eq!(caps_str(Caps::empty()), "[  ]");
        assert_eq!(caps_str(Caps::MSG), "[ FI_MSG ]");
        // Fixed source order, not bit order: HMEM (bit 47) after DIRECTED_RECV (bit 59),
        // VARIABLE_MSG (bit 48) right after FENCE.
        assert_eq!(
            caps_str(Caps::HMEM | Caps::DIRECTED_RECV | Caps::VARIABLE_MSG | Caps::FENCE),
            "[ FI_FENCE, FI_VARIABLE_MSG, FI_DIRECTED_RECV, FI_HMEM ]"
        );
        assert_eq!(
            caps_str(Caps::XPU | Caps::PEER | Caps::AV_USER_ID | Caps::HMEM),
            "[ FI_HMEM, FI_AV_USER_ID, FI_PEER, FI_XPU ]"
        );
        // The C printer's full list for all bits (1.17), then the newer three.
        let all = caps_names(Caps::all());
        assert_eq!(all.len(), 30);
        assert_eq!(&all[..3], ["FI_MSG", "FI_RMA", "FI_TAGGED"]);
        assert_eq!(all[16], "FI_VARIABLE_MSG");
        assert_eq!(all[26], "FI_HMEM");
        // Unnamed bits are skipped.
        assert_eq!(caps_str(Caps::from_bits_retain(1)), "[  ]");

        assert_eq!(
            op_flags_str(OpFlags::all()),
            "[ FI_MULTICAST, FI_MULTI_RECV, FI_REMOTE_CQ_DATA, FI_MORE, FI_PEEK, FI_TRIGGER, \
             FI_FENCE, FI_COMPLETION, FI_INJECT, FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE, \
             FI_DELIVERY_COMPLETE, FI_MATCH_COMPLETE, FI_AFFINITY, FI_CLAIM, FI_DISCARD ]"
        );
        assert_eq!(op_flags_str(OpFlags::MSG | OpFlags::SEND), "[  ]");
        assert_eq!(
            mode_str(Mode::all()),
            "[ FI_CONTEXT, FI_MSG_PREFIX, FI_ASYNC_IOV, FI_RX_CQ_DATA, FI_LOCAL_MR, \
             FI_NOTIFY_FLAGS_ONLY, FI_RESTRICTED_COMP, FI_CONTEXT2, FI_BUFFERED_RECV ]"
        );
        assert_eq!(
            mr_mode_str(MrMode::all()),
            "[ FI_MR_BASIC, FI_MR_SCALABLE, FI_MR_LOCAL, FI_MR_RAW, FI_MR_VIRT_ADDR, \
             FI_MR_ALLOCATED, FI_MR_PROV_KEY, FI_MR_MMU_NOTIFY, FI_MR_RMA_EVENT, \
             FI_MR_ENDPOINT, FI_MR_HMEM, FI_MR_COLLECTIVE ]"
        );
        assert_eq!(mr_mode_str(MrMode::empty()), "[  ]");
        assert_eq!(
            msg_order_str(MsgOrder::SAS | MsgOrder::RAR),
            "[ FI_ORDER_RAR, FI_ORDER_SAS ]"
        );
        assert_eq!(msg_order_str(MsgOrder::NONE), "[  ]");
    }

    #[test]
    fn comp_order_forms() {
        assert_eq!(comp_order_str(CompOrder::NONE), "[ FI_ORDER_NONE ]");
        assert_eq!(comp_order_str(CompOrder::STRICT), "[ FI_ORDER_STRICT ]");
        assert_eq!(
            comp_order_str(CompOrder::DATA),
            "[ FI_ORDER_NONE, FI_ORDER_DATA ]"
        );
        assert_eq!(
            comp_order_str(CompOrder::STRICT | CompOrder::DATA),
            "[ FI_ORDER_STRICT, FI_ORDER_DATA ]"
        );
        // A partial strict set has no name.
        assert_eq!(comp_order_str(CompOrder::from_bits_retain(1)), "[  ]");
    }

    #[test]
    fn enum_names() {
        assert_eq!(ep_type_str(EpType::Rdm), "FI_EP_RDM");
        assert_eq!(protocol_str(Protocol::XNET), "FI_PROTO_XNET");
        assert_eq!(protocol_str(Protocol::MXM), "Unknown");
        assert_eq!(protocol_str(Protocol::MRAIL), "Unknown");
        assert_eq!(protocol_str(Protocol(26)), "Unknown");
        assert_eq!(
            protocol_str(Protocol(PROV_SPECIFIC | 1)),
            "Provider specific"
        );
        assert_eq!(addr_format_str(AddrFormat::UNSPEC), "FI_FORMAT_UNSPEC");
        assert_eq!(addr_format_str(AddrFormat::CXI), "FI_ADDR_CXI");
        assert_eq!(addr_format_str(AddrFormat::UCX), "Unknown");
        assert_eq!(
            addr_format_str(AddrFormat(PROV_SPECIFIC | 1)),
            "Provider specific"
        );
    }

    #[test]
    fn addresses() {
        assert_eq!(addr_str(None), "(null)");
        let v4 = Address::Inet(SocketAddrV4::new(Ipv4Addr::new(10, 1, 2, 3), 1234));
        assert_eq!(addr_str(Some(&v4)), "fi_sockaddr_in://10.1.2.3:1234");
        let v6 = Address::Inet6(SocketAddrV6::new(
            "fe80::1".parse::<Ipv6Addr>().unwrap(),
            7,
            5,
            2,
        ));
        assert_eq!(addr_str(Some(&v6)), "fi_sockaddr_in6://[fe80::1]:7");
        assert_eq!(
            addr_str(Some(&Address::Str("fi_shm://5521".into()))),
            "fi_shm://5521"
        );
        // Raw sockaddr bytes decode like the typed forms.
        let raw = Address::Raw {
            format: AddrFormat::SOCKADDR,
            bytes: v4.to_bytes(),
        };
        assert_eq!(addr_str(Some(&raw)), "fi_sockaddr_in://10.1.2.3:1234");

        let mut words = Vec::new();
        for k in 1..=8u64 {
            words.extend_from_slice(&(0x0102_0304_0506_0708u64.wrapping_mul(k)).to_ne_bytes());
        }
        let raw = |format| Address::Raw {
            format,
            bytes: words.clone(),
        };
        // Expected texts are what the C 1.17 printer gives for the same bytes.
        let expected = [
            (AddrFormat::PSMX, "fi_addr_psmx://102030405060708"),
            (AddrFormat::GNI, "fi_addr_gni://102030405060708"),
            (
                AddrFormat::PSMX2,
                "fi_addr_psmx2://102030405060708:20406080a0c0e10",
            ),
            (
                AddrFormat::PSMX3,
                "fi_addr_psmx3://102030405060708:20406080a0c0e10:306090c0f121518:4080c1014181c20",
            ),
            (AddrFormat::OPX, "fi_addr_opx://0102030405060708"),
            (AddrFormat::CXI, "fi_addr_cxi://0x05060708"),
            (
                AddrFormat::EFA,
                "fi_addr_efa://[807:605:403:201:100e:c0a:806:402]:5400:50727180",
            ),
        ];
        for (format, text) in expected {
            assert_eq!(addr_str(Some(&raw(format))), text, "{format:?}");
        }
        assert_eq!(addr_str(Some(&raw(AddrFormat::UNSPEC))), "");
        assert_eq!(addr_str(Some(&raw(AddrFormat(99)))), "");
        // Formats whose C text is a pointer use the FI_ADDR_STR form instead.
        assert!(addr_str(Some(&raw(AddrFormat::MLX))).starts_with("fi_addr_mlx://0x0807"));
        // Too short for the format: no panic, the hex form.
        let short = Address::Raw {
            format: AddrFormat::PSMX2,
            bytes: vec![1, 2, 3],
        };
        assert_eq!(addr_str(Some(&short)), "fi_addr_psmx2://0x010203");
    }

    #[test]
    fn odd_values() {
        let mut i = Info::new();
        i.handle = 0x1234;
        i.src_addr = Some(Address::Str("fi_shm://5521".into()));
        i.tx_attr.tclass = 0x1ff;
        i.tx_attr.op_flags = OpFlags::COMPLETION | OpFlags::TRANSMIT_COMPLETE;
        i.ep_attr.tx_ctx_cnt = SHARED_CONTEXT;
        i.ep_attr.rx_ctx_cnt = SHARED_CONTEXT;
        i.ep_attr.mem_tag_format = 0xaaaa_aaaa_aaaa_aaaa;
        i.ep_attr.auth_key = Some(vec![1, 2, 3, 4, 5]);
        i.domain_attr.domain = 0xdead_beef;
        i.domain_attr.tx_ctx_cnt = SHARED_CONTEXT;
        i.domain_attr.tclass = 0x100;
        let s = info_to_string(&i);
        assert!(s.contains("    handle: 0x1234\n"), "{s}");
        assert!(s.contains("    src_addrlen: 14\n"), "{s}");
        assert!(s.contains("    src_addr: fi_shm://5521\n"), "{s}");
        assert!(s.contains("        tclass: 0x1ff\n"), "{s}");
        assert!(
            s.contains("        op_flags: [ FI_COMPLETION, FI_TRANSMIT_COMPLETE ]\n"),
            "{s}"
        );
        assert!(s.contains("        tx_ctx_cnt: FI_SHARED_CONTEXT\n"), "{s}");
        assert!(s.contains("        rx_ctx_cnt: FI_SHARED_CONTEXT\n"), "{s}");
        assert!(
            s.contains("        mem_tag_format: 0xaaaaaaaaaaaaaaaa\n"),
            "{s}"
        );
        assert!(s.contains("        auth_key_size: 5\n"), "{s}");
        assert!(s.contains("        domain: 0xdeadbeef\n"), "{s}");
        // The domain's context count is a plain number even when it is all ones.
        assert!(
            s.contains(&format!("        tx_ctx_cnt: {}\n", usize::MAX)),
            "{s}"
        );
        assert!(s.contains("        tclass: 0x100\n"), "{s}");
    }

    #[test]
    fn nic_block() {
        assert_eq!(nic_to_string(None), "nic: (nil)\n");
        let nic = Nic {
            device_name: Some("lo".into()),
            device_id: Some("0x1".into()),
            link_address: Some("00:11".into()),
            mtu: 1500,
            speed: 100_000,
            link_up: true,
            network_type: Some("Ethernet".into()),
            ..Nic::default()
        };
        let expected = "\
    nic:
        fi_device_attr:
            name: lo
            device_id: 0x1
            device_version: (null)
            vendor_id: (null)
            driver: (null)
            firmware: (null)
        fi_bus_attr:
            bus_type: FI_BUS_UNKNOWN
        fi_link_attr:
            address: 00:11
            mtu: 1500
            speed: 100000
            state: FI_LINK_UP
            network_type: Ethernet
";
        let mut i = Info::new();
        i.nic = Some(nic.clone());
        let s = info_to_string(&i);
        assert!(s.ends_with(expected), "{s}");
        let down = Nic {
            link_up: false,
            ..nic
        };
        assert!(nic_to_string(Some(&down)).contains("    state: FI_LINK_DOWN\n"));
        let pci = Nic {
            bus: Bus::Pci(crate::attr::PciAddress {
                domain: 0,
                bus: 0x3b,
                device: 3,
                function: 1,
            }),
            ..Nic::default()
        };
        let s = nic_to_string(Some(&pci));
        let bus = "\
    fi_bus_attr:
        bus_type: FI_BUS_PCI
        fi_pci_attr:
            domain_id: 0
            bus_id: 59
            device_id: 3
            function_id: 1
    fi_link_attr:
";
        assert!(s.contains(bus), "{s}");
    }

    #[test]
    fn standalone_blocks() {
        let t = tx_attr_to_string(&TxAttr::default());
        assert!(t.starts_with("fi_tx_attr:\n    caps: [  ]\n"), "{t}");
        assert_eq!(t.lines().count(), 11);
        assert_eq!(rx_attr_to_string(&RxAttr::default()).lines().count(), 9);
        assert_eq!(ep_attr_to_string(&EpAttr::default()).lines().count(), 13);
        assert_eq!(
            domain_attr_to_string(&DomainAttr::default())
                .lines()
                .count(),
            27
        );
        let f = fabric_attr_to_string(&FabricAttr {
            name: Some("f".into()),
            prov_name: Some("tcp;ofi_rxm".into()),
            prov_version: Version::new(3, 4),
            api_version: Version::new(1, 17),
            ..FabricAttr::default()
        });
        assert_eq!(
            f,
            "fi_fabric_attr:\n    name: f\n    prov_name: tcp;ofi_rxm\n    prov_version: 3.4\n    api_version: 1.17\n"
        );
    }
}
