//! JSON forms of what `fi_info --json` prints: infos, providers, load outcomes,
//! parameters, verdicts.
//!
//! Conventions: bit sets are arrays of C names (every named bit, in the flag type's
//! order); enumerations are their C names; absent strings and addresses are `null`;
//! addresses are their `FI_ADDR_STR` text ([`ofi::Address`]'s `Display`, which parses
//! back); versions are `"M.m"` strings; `mem_tag_format` is a `0x` hex string (it does
//! not fit a double); other integers are JSON numbers. Nothing here panics.

use serde_json::{json, Map, Value};

use ofi::attr::{Bus, DomainAttr, EpAttr, FabricAttr, Info, Nic, RxAttr, TxAttr};
use ofi::loader::{LoadOutcome, LoadRecord};
use ofi::param::ParamEntry;
use ofi::registry::ProviderRecord;
use ofi::Address;

fn names(v: Vec<&'static str>) -> Value {
    Value::Array(
        v.into_iter()
            .map(|n| Value::String(n.to_string()))
            .collect(),
    )
}

fn opt_str(s: &Option<String>) -> Value {
    s.as_ref().map_or(Value::Null, |s| Value::String(s.clone()))
}

fn addr(a: &Option<Address>) -> Value {
    a.as_ref()
        .map_or(Value::Null, |a| Value::String(a.to_string()))
}

/// The JSON object of a transmit or receive attribute structure `$a`: the bit-set
/// fields `bits` as arrays of names, then the `plain` number fields, in that order.
macro_rules! xfer_attr_json {
    ($a:expr, bits [$($b:ident),*], plain [$($p:ident),*]) => {{
        let mut m = Map::new();
        $(m.insert(stringify!($b).to_string(), names($a.$b.names()));)*
        $(m.insert(stringify!($p).to_string(), json!($a.$p));)*
        Value::Object(m)
    }};
}

fn tx_attr(a: &TxAttr) -> Value {
    xfer_attr_json!(a,
        bits [caps, mode, op_flags, msg_order, comp_order],
        plain [inject_size, size, iov_limit, rma_iov_limit, tclass])
}

fn rx_attr(a: &RxAttr) -> Value {
    xfer_attr_json!(a,
        bits [caps, mode, op_flags, msg_order, comp_order],
        plain [total_buffered_recv, size, iov_limit])
}

fn ep_attr(a: &EpAttr) -> Value {
    json!({
        "type": a.ep_type.name(),
        "protocol": a.protocol.name(),
        "protocol_version": a.protocol_version,
        "max_msg_size": a.max_msg_size,
        "msg_prefix_size": a.msg_prefix_size,
        "max_order_raw_size": a.max_order_raw_size,
        "max_order_war_size": a.max_order_war_size,
        "max_order_waw_size": a.max_order_waw_size,
        "mem_tag_format": format!("0x{:016x}", a.mem_tag_format),
        "tx_ctx_cnt": a.tx_ctx_cnt,
        "rx_ctx_cnt": a.rx_ctx_cnt,
        "auth_key_size": a.auth_key.as_ref().map_or(0, Vec::len),
    })
}

fn domain_attr(a: &DomainAttr) -> Value {
    json!({
        "domain": a.domain,
        "name": opt_str(&a.name),
        "threading": a.threading.name(),
        "control_progress": a.control_progress.name(),
        "data_progress": a.data_progress.name(),
        "resource_mgmt": a.resource_mgmt.name(),
        "av_type": a.av_type.name(),
        "mr_mode": names(a.mr_mode.names()),
        "mr_key_size": a.mr_key_size,
        "cq_data_size": a.cq_data_size,
        "cq_cnt": a.cq_cnt,
        "ep_cnt": a.ep_cnt,
        "tx_ctx_cnt": a.tx_ctx_cnt,
        "rx_ctx_cnt": a.rx_ctx_cnt,
        "max_ep_tx_ctx": a.max_ep_tx_ctx,
        "max_ep_rx_ctx": a.max_ep_rx_ctx,
        "max_ep_stx_ctx": a.max_ep_stx_ctx,
        "max_ep_srx_ctx": a.max_ep_srx_ctx,
        "cntr_cnt": a.cntr_cnt,
        "mr_iov_limit": a.mr_iov_limit,
        "caps": names(a.caps.names()),
        "mode": names(a.mode.names()),
        "auth_key_size": a.auth_key.as_ref().map_or(0, Vec::len),
        "max_err_data": a.max_err_data,
        "mr_cnt": a.mr_cnt,
        "tclass": a.tclass,
    })
}

fn fabric_attr(a: &FabricAttr) -> Value {
    json!({
        "name": opt_str(&a.name),
        "prov_name": opt_str(&a.prov_name),
        "prov_version": a.prov_version.to_string(),
        "api_version": a.api_version.to_string(),
    })
}

fn nic(n: &Nic) -> Value {
    json!({
        "device_name": opt_str(&n.device_name),
        "device_id": opt_str(&n.device_id),
        "device_version": opt_str(&n.device_version),
        "vendor_id": opt_str(&n.vendor_id),
        "driver": opt_str(&n.driver),
        "firmware": opt_str(&n.firmware),
        "link_address": opt_str(&n.link_address),
        "mtu": n.mtu,
        "speed": n.speed,
        "link_up": n.link_up,
        "network_type": opt_str(&n.network_type),
        "bus": match n.bus {
            Bus::Unknown => json!({ "bus_type": "FI_BUS_UNKNOWN" }),
            Bus::Pci(a) => json!({
                "bus_type": "FI_BUS_PCI",
                "pci": {
                    "domain_id": a.domain,
                    "bus_id": a.bus,
                    "device_id": a.device,
                    "function_id": a.function,
                },
            }),
        },
    })
}

/// Every field of an info (the `fi_info -v --json` element).
pub fn info(i: &Info) -> Value {
    json!({
        "caps": names(i.caps.names()),
        "mode": names(i.mode.names()),
        "addr_format": i.addr_format.name(),
        "src_addrlen": i.src_addr.as_ref().map_or(0, Address::addrlen),
        "dest_addrlen": i.dest_addr.as_ref().map_or(0, Address::addrlen),
        "src_addr": addr(&i.src_addr),
        "dest_addr": addr(&i.dest_addr),
        "handle": i.handle,
        "tx_attr": tx_attr(&i.tx_attr),
        "rx_attr": rx_attr(&i.rx_attr),
        "ep_attr": ep_attr(&i.ep_attr),
        "domain_attr": domain_attr(&i.domain_attr),
        "fabric_attr": fabric_attr(&i.fabric_attr),
        "nic": i.nic.as_ref().map_or(Value::Null, nic),
    })
}

/// Keys every object of [`info`] has (a value, or `null` for an absent address or NIC),
/// that readers of `fi_info --json -v` rely on.
pub const INFO_KEYS: [&str; 11] = [
    "caps",
    "mode",
    "addr_format",
    "src_addr",
    "dest_addr",
    "tx_attr",
    "rx_attr",
    "ep_attr",
    "domain_attr",
    "fabric_attr",
    "nic",
];

/// The six fields of the default `fi_info` listing.
pub fn info_summary(i: &Info) -> Value {
    json!({
        "provider": i.prov_name(),
        "fabric": opt_str(&i.fabric_attr.name),
        "domain": opt_str(&i.domain_attr.name),
        "version": i.fabric_attr.prov_version.to_string(),
        "type": i.ep_attr.ep_type.name(),
        "protocol": i.ep_attr.protocol.name(),
    })
}

/// A short machine name for a provider kind (`core`, `utility`, `hook`).
pub fn kind_name(kind: impl std::fmt::Debug) -> String {
    format!("{kind:?}").to_ascii_lowercase()
}

/// A provider record of `fi_info -l`.
pub fn provider(p: &ProviderRecord) -> Value {
    json!({
        "name": p.name,
        "version": p.version.to_string(),
        "kind": kind_name(p.kind),
        "priority": p.priority,
        "path": p.path.as_ref().map_or(Value::Null, |p| Value::String(p.display().to_string())),
        "superseded_by": opt_str(&p.superseded_by),
    })
}

/// A short machine name for a load outcome (`loaded`, `not_a_plugin`, ...).
pub fn outcome_name(o: &LoadOutcome) -> &'static str {
    match o {
        LoadOutcome::Loaded { .. } => "loaded",
        LoadOutcome::NotAPlugin { .. } => "not_a_plugin",
        LoadOutcome::AbiMismatch { .. } => "abi_mismatch",
        LoadOutcome::InitFailed { .. } => "init_failed",
        LoadOutcome::Filtered { .. } => "filtered",
        LoadOutcome::Superseded { .. } => "superseded",
        LoadOutcome::DirUnreadable { .. } => "dir_unreadable",
    }
}

/// One plugin candidate file and what became of it.
pub fn load_record(r: &LoadRecord) -> Value {
    json!({
        "path": r.path.display().to_string(),
        "outcome": outcome_name(&r.outcome),
        "detail": r.outcome.to_string(),
    })
}

/// One parameter of `fi_info -e`.
pub fn param(p: &ParamEntry) -> Value {
    let mut m = Map::new();
    m.insert("env".into(), Value::String(p.env_name.clone()));
    m.insert("provider".into(), opt_str(&p.def.prov));
    m.insert("name".into(), Value::String(p.def.name.clone()));
    m.insert("type".into(), Value::String(p.def.ty.label().to_string()));
    m.insert("help".into(), Value::String(p.def.help.clone()));
    m.insert("default".into(), opt_str(&p.def.default));
    m.insert("value".into(), opt_str(&p.value));
    m.insert("source".into(), Value::String(p.source.to_string()));
    Value::Object(m)
}

/// One explain verdict of `fi_info --explain`.
pub fn verdict(v: &ofi::Verdict) -> Value {
    json!({
        "provider": v.provider,
        "template": v.template,
        "kind": v.kind.as_str(),
        "field": v.field,
        "asked": v.asked,
        "offered": v.offered,
        "text": v.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofi::{Caps, EpType};

    #[test]
    fn info_has_every_block() {
        let mut i = Info::hints()
            .with_caps(Caps::MSG | Caps::RMA)
            .with_ep_type(EpType::Rdm)
            .with_provider("tcp");
        i.src_addr = Some(Address::Str("fi_shm://12".into()));
        let v = info(&i);
        for k in INFO_KEYS {
            assert!(v.get(k).is_some(), "{k}");
        }
        assert_eq!(v["caps"], json!(["FI_MSG", "FI_RMA"]));
        assert_eq!(v["ep_attr"]["type"], "FI_EP_RDM");
        assert_eq!(v["ep_attr"]["mem_tag_format"], "0x0000000000000000");
        assert_eq!(v["fabric_attr"]["prov_name"], "tcp");
        assert_eq!(v["fabric_attr"]["name"], Value::Null);
        assert_eq!(v["src_addr"], "fi_shm://12");
        assert_eq!(v["src_addrlen"], 12);
        assert_eq!(v["dest_addr"], Value::Null);
        assert_eq!(v["nic"], Value::Null);
        let s = info_summary(&i);
        assert_eq!(s["provider"], "tcp");
        assert_eq!(s["type"], "FI_EP_RDM");
        assert_eq!(s["protocol"], "FI_PROTO_UNSPEC");
        assert_eq!(s["version"], "0.0");
    }
}
