//! The getinfo rule table, case by case: each test runs requests against two
//! templates and checks which results survive (and which rule or hint field rejects
//! the others), plus validation, caps shaping and stamping. Kept apart from
//! `getinfo/mod.rs` so the module stays readable; it is compiled only for tests.

use super::*;
use crate::attr::{DomainAttr, EpAttr, FabricAttr, RxAttr, TxAttr};
use crate::enums::{AvType, EpType, Progress, Protocol, ResourceMgmt, Threading, SHARED_CONTEXT};
use crate::flags::{flag_set, CompOrder, Mode, MrMode, MsgOrder};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

const PROV_VERSION: Version = Version::new(1, 0);

fn all_msg_order() -> MsgOrder {
    flag_set!(MsgOrder: RAR, RAW, RAS, WAR, WAW, WAS, SAR, SAW, SAS)
}

/// Template A: a tcp-like FI_EP_MSG template (IPv4, RMA, thread safe, auto progress,
/// RMA-target MR bits, accepts FI_MR_BASIC, no mode requirements).
fn tmpl_a() -> Info {
    let caps = flag_set!(Caps:
        MSG, RMA, SEND, RECV, READ, WRITE, REMOTE_READ, REMOTE_WRITE, MULTI_RECV, SOURCE,
        LOCAL_COMM, REMOTE_COMM
    );
    Info {
        caps,
        mode: Mode::empty(),
        addr_format: AddrFormat::SOCKADDR_IN,
        tx_attr: TxAttr {
            caps: flag_set!(Caps: MSG, RMA, SEND, READ, WRITE),
            op_flags: flag_set!(OpFlags: INJECT, COMPLETION, TRANSMIT_COMPLETE, DELIVERY_COMPLETE),
            msg_order: all_msg_order(),
            comp_order: CompOrder::NONE,
            inject_size: 128,
            size: 1024,
            iov_limit: 4,
            rma_iov_limit: 4,
            ..TxAttr::default()
        },
        rx_attr: RxAttr {
            caps: flag_set!(Caps: MSG, RMA, RECV, REMOTE_READ, REMOTE_WRITE, MULTI_RECV, SOURCE),
            op_flags: OpFlags::COMPLETION | OpFlags::MULTI_RECV,
            msg_order: all_msg_order(),
            comp_order: CompOrder::NONE,
            total_buffered_recv: 0,
            size: 1024,
            iov_limit: 4,
            ..RxAttr::default()
        },
        ep_attr: EpAttr {
            ep_type: EpType::Msg,
            protocol: Protocol::XNET,
            protocol_version: 1,
            max_msg_size: 1 << 30,
            max_order_raw_size: 1 << 20,
            max_order_war_size: 1 << 20,
            max_order_waw_size: 1 << 20,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            ..EpAttr::default()
        },
        domain_attr: DomainAttr {
            threading: Threading::Safe,
            control_progress: Progress::Auto,
            data_progress: Progress::Auto,
            resource_mgmt: ResourceMgmt::Enabled,
            av_type: AvType::Unspec,
            mr_mode: MrMode::VIRT_ADDR | MrMode::PROV_KEY | MrMode::BASIC,
            mr_key_size: 8,
            cq_data_size: 8,
            cq_cnt: 256,
            ep_cnt: 8192,
            tx_ctx_cnt: 256,
            rx_ctx_cnt: 256,
            max_ep_tx_ctx: 1,
            max_ep_rx_ctx: 1,
            max_ep_stx_ctx: 1,
            max_ep_srx_ctx: 1,
            cntr_cnt: 16,
            mr_iov_limit: 1,
            caps: Caps::LOCAL_COMM | Caps::REMOTE_COMM,
            auth_key: Some(vec![0; 4]),
            max_err_data: 64,
            mr_cnt: 1024,
            ..DomainAttr::default()
        },
        fabric_attr: FabricAttr {
            name: Some("127.0.0.0/8".into()),
            ..FabricAttr::default()
        },
        ..Info::default()
    }
}

/// Template B: an FI_EP_RDM template (IPv6, tagged, FI_CONTEXT and FI_MSG_PREFIX
/// required, domain threading, manual data progress, FI_MR_LOCAL, no shared contexts).
fn tmpl_b() -> Info {
    Info {
        caps: flag_set!(Caps: MSG, TAGGED, SEND, RECV, MULTI_RECV),
        mode: Mode::CONTEXT | Mode::MSG_PREFIX,
        addr_format: AddrFormat::SOCKADDR_IN6,
        tx_attr: TxAttr {
            caps: Caps::MSG | Caps::TAGGED | Caps::SEND,
            op_flags: OpFlags::COMPLETION,
            inject_size: 64,
            size: 256,
            iov_limit: 1,
            ..TxAttr::default()
        },
        rx_attr: RxAttr {
            caps: flag_set!(Caps: MSG, TAGGED, RECV, MULTI_RECV),
            mode: Mode::CONTEXT,
            op_flags: OpFlags::COMPLETION,
            size: 256,
            iov_limit: 1,
            ..RxAttr::default()
        },
        ep_attr: EpAttr {
            ep_type: EpType::Rdm,
            protocol: Protocol::RXM,
            protocol_version: 3,
            max_msg_size: 1 << 20,
            msg_prefix_size: 16,
            mem_tag_format: 0x0000_FFFF_FFFF_FFFF,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            ..EpAttr::default()
        },
        domain_attr: DomainAttr {
            name: Some("lo".into()),
            threading: Threading::Domain,
            control_progress: Progress::Auto,
            data_progress: Progress::Manual,
            resource_mgmt: ResourceMgmt::Disabled,
            av_type: AvType::Map,
            mr_mode: MrMode::LOCAL,
            max_ep_tx_ctx: 1,
            max_ep_rx_ctx: 1,
            ..DomainAttr::default()
        },
        ..Info::default()
    }
}

/// Template A demanding a shared transmit context (`tx_ctx_cnt` FI_SHARED_CONTEXT).
fn tmpl_a_shared_tx() -> Info {
    let mut t = tmpl_a();
    t.ep_attr.tx_ctx_cnt = SHARED_CONTEXT;
    t
}

/// Template A with a transmit mode requirement (FI_ASYNC_IOV).
fn tmpl_a_tx_async_iov() -> Info {
    let mut t = tmpl_a();
    t.tx_attr.mode = Mode::ASYNC_IOV;
    t
}

#[derive(Debug, Clone, Copy)]
enum Want {
    /// Success with this many infos.
    Ok(usize),
    /// Failure with this code; for ENODATA, the hint field of the rejection.
    Err(Errno, &'static str),
}

/// What a one-provider getinfo returns: the number of infos, or the error code and
/// (for ENODATA) the field the first rejection names.
/// `addr` in its string form (`fi_sockaddr_in://…`).
fn addr_text(addr: &Option<Address>) -> Option<String> {
    addr.as_ref().map(ToString::to_string)
}

/// `match_templates` as the provider `tcp` of version [`PROV_VERSION`].
fn tcp_match(templates: &[Info], req: &GetinfoRequest, r: &dyn AddrResolver) -> GetinfoOutcome {
    match_templates("tcp", PROV_VERSION, templates, req, r)
}

fn outcome(
    templates: &[Info],
    req: &GetinfoRequest,
    r: &dyn AddrResolver,
) -> std::result::Result<usize, (Errno, String)> {
    validate_request(req).map_err(|e| (e.code(), String::new()))?;
    let out = tcp_match(templates, req, r);
    assert_eq!(out.verdicts.len(), templates.len());
    if let Some(e) = out.error {
        return Err((e.code(), String::new()));
    }
    if out.infos.is_empty() {
        let field = out
            .verdicts
            .iter()
            .find(|v| v.kind == VerdictKind::Rejected)
            .map(|v| v.field.clone());
        return Err((Errno::ENODATA, field.unwrap_or_default()));
    }
    Ok(out.infos.len())
}

fn req_with(hints: Info) -> GetinfoRequest {
    GetinfoRequest {
        version: API_VERSION,
        hints: Some(hints),
        ..GetinfoRequest::default()
    }
}

/// A request for `node` and `service` (either may be absent) with `flags` and empty
/// hints.
fn addr_req(node: Option<&str>, service: Option<&str>, flags: GetinfoFlags) -> GetinfoRequest {
    GetinfoRequest {
        node: node.map(Into::into),
        service: service.map(Into::into),
        flags,
        ..req_with(Info::hints())
    }
}

type Case = (&'static str, fn() -> Info, fn(&mut Info), Want);

fn run_cases(cases: &[Case]) {
    let mut failures = Vec::new();
    for (name, tmpl, mutate, want) in cases {
        let mut hints = Info::hints();
        mutate(&mut hints);
        let got = outcome(&[tmpl()], &req_with(hints.clone()), &NoResolver);
        let ok = match (want, &got) {
            (Want::Ok(n), Ok(m)) => n == m,
            (Want::Err(c, f), Err((gc, gf))) => c == gc && f == gf,
            _ => false,
        };
        if !ok {
            failures.push(format!("{name}: want {want:?}, got {got:?}"));
        }
        // The direct check agrees with the verdict.
        let mut stamped = tmpl();
        stamped.fabric_attr.prov_name = Some("tcp".into());
        stamped.fabric_attr.prov_version = PROV_VERSION;
        let direct = check_info(&stamped, &hints, API_VERSION);
        match (want, direct) {
            (Want::Ok(_), Ok(())) => {}
            (Want::Err(Errno::ENODATA, f), Err(m)) if m.field == *f => {}
            (w, d) => failures.push(format!("{name}: check_info {d:?} disagrees with {w:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

const NODATA: Errno = Errno::ENODATA;

#[test]
fn baseline_hints_keep_both_templates() {
    let got = outcome(&[tmpl_a(), tmpl_b()], &req_with(Info::hints()), &NoResolver);
    assert_eq!(got, Ok(2));
    // No hints at all: everything, shaped as the template.
    let req = GetinfoRequest::new(API_VERSION);
    let out = tcp_match(&[tmpl_a(), tmpl_b()], &req, &NoResolver);
    assert_eq!(out.infos.len(), 2);
    assert_eq!(out.infos[0].caps, tmpl_a().caps);
    assert_eq!(out.infos[1].mode, tmpl_b().mode);
}

#[test]
#[rustfmt::skip]
fn rule1_ep_type() {
    run_cases(&[
        ("same type", tmpl_a, |h| h.ep_attr.ep_type = EpType::Msg, Want::Ok(1)),
        ("unspec hint", tmpl_a, |h| h.ep_attr.ep_type = EpType::Unspec, Want::Ok(1)),
        ("other type", tmpl_a, |h| h.ep_attr.ep_type = EpType::Rdm, Want::Err(NODATA, "ep_attr.type")),
        ("dgram vs rdm", tmpl_b, |h| h.ep_attr.ep_type = EpType::Dgram, Want::Err(NODATA, "ep_attr.type")),
    ]);
}

#[test]
#[rustfmt::skip]
fn rule2_caps() {
    run_cases(&[
        ("subset", tmpl_a, |h| h.caps = Caps::MSG | Caps::RMA, Want::Ok(1)),
        ("with modifier", tmpl_a, |h| h.caps = Caps::MSG | Caps::SEND, Want::Ok(1)),
        ("secondary offered", tmpl_a, |h| h.caps = Caps::MSG | Caps::SOURCE, Want::Ok(1)),
        ("tagged missing", tmpl_a, |h| h.caps = Caps::TAGGED, Want::Err(NODATA, "caps")),
        ("atomic missing", tmpl_a, |h| h.caps = Caps::MSG | Caps::ATOMIC, Want::Err(NODATA, "caps")),
        ("secondary missing", tmpl_b, |h| h.caps = Caps::MSG | Caps::SOURCE, Want::Err(NODATA, "caps")),
    ]);
}

#[test]
#[rustfmt::skip]
fn rule3_mode() {
    run_cases(&[
        ("all modes", tmpl_b, |h| h.mode = Mode::all(), Want::Ok(1)),
        ("exactly the required", tmpl_b, |h| h.mode = Mode::CONTEXT | Mode::MSG_PREFIX, Want::Ok(1)),
        ("no modes", tmpl_b, |h| h.mode = Mode::empty(), Want::Err(NODATA, "mode")),
        ("context missing", tmpl_b, |h| h.mode = Mode::MSG_PREFIX, Want::Err(NODATA, "mode")),
        ("template needs none", tmpl_a, |h| h.mode = Mode::empty(), Want::Ok(1)),
        // B needs FI_MR_LOCAL: an app without it in mr_mode must support FI_LOCAL_MR.
        (
            "mr local via mode",
            tmpl_b,
            |h| {
                h.domain_attr.mr_mode = MrMode::empty();
                h.mode = Mode::CONTEXT | Mode::MSG_PREFIX | Mode::LOCAL_MR;
            },
            Want::Ok(1),
        ),
        (
            "mr local neither way",
            tmpl_b,
            |h| {
                h.domain_attr.mr_mode = MrMode::empty();
                h.mode = Mode::CONTEXT | Mode::MSG_PREFIX;
            },
            Want::Err(NODATA, "mode"),
        ),
    ]);
}

#[test]
#[rustfmt::skip]
fn rule4_addr_format() {
    run_cases(&[
        ("same", tmpl_a, |h| h.addr_format = AddrFormat::SOCKADDR_IN, Want::Ok(1)),
        ("generic sockaddr", tmpl_a, |h| h.addr_format = AddrFormat::SOCKADDR, Want::Ok(1)),
        ("ipv6 vs ipv4", tmpl_a, |h| h.addr_format = AddrFormat::SOCKADDR_IN6, Want::Err(NODATA, "addr_format")),
        ("string vs ipv4", tmpl_a, |h| h.addr_format = AddrFormat::STR, Want::Err(NODATA, "addr_format")),
        ("ipv6 template", tmpl_b, |h| h.addr_format = AddrFormat::SOCKADDR_IN6, Want::Ok(1)),
        ("ib vs ipv6", tmpl_b, |h| h.addr_format = AddrFormat::SOCKADDR_IB, Want::Err(NODATA, "addr_format")),
        ("hint src of right family", tmpl_a, |h| h.src_addr = Some(Address::Inet(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))), Want::Ok(1)),
        (
            "hint src of wrong family",
            tmpl_a,
            |h| {
                h.src_addr = Some(Address::Inet6(SocketAddrV6::new(
                    Ipv6Addr::LOCALHOST,
                    0,
                    0,
                    0,
                )))
            },
            Want::Err(NODATA, "src_addr"),
        ),
        ("hint dest of wrong family", tmpl_b, |h| h.dest_addr = Some(Address::Inet(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1))), Want::Err(NODATA, "dest_addr")),
    ]);
}

#[test]
#[rustfmt::skip]
fn rule5_fabric_attr() {
    run_cases(&[
        ("prov name", tmpl_a, |h| h.fabric_attr.prov_name = Some("tcp".into()), Want::Ok(1)),
        ("prov name any case", tmpl_a, |h| h.fabric_attr.prov_name = Some("TCP".into()), Want::Ok(1)),
        ("layered name", tmpl_a, |h| h.fabric_attr.prov_name = Some("tcp;ofi_rxm".into()), Want::Ok(1)),
        ("other prov", tmpl_a, |h| h.fabric_attr.prov_name = Some("udp".into()), Want::Err(NODATA, "fabric_attr.prov_name")),
        ("substring only", tmpl_a, |h| h.fabric_attr.prov_name = Some("tcpx".into()), Want::Err(NODATA, "fabric_attr.prov_name")),
        ("excluded", tmpl_a, |h| h.fabric_attr.prov_name = Some("^tcp".into()), Want::Err(NODATA, "fabric_attr.prov_name")),
        ("fabric name", tmpl_a, |h| h.fabric_attr.name = Some("127.0.0.0/8".into()), Want::Ok(1)),
        ("fabric name other", tmpl_a, |h| h.fabric_attr.name = Some("10.0.0.0/8".into()), Want::Err(NODATA, "fabric_attr.name")),
        ("prov version ok", tmpl_a, |h| h.fabric_attr.prov_version = Version::new(1, 0), Want::Ok(1)),
        ("prov version newer", tmpl_a, |h| h.fabric_attr.prov_version = Version::new(1, 1), Want::Err(NODATA, "fabric_attr.prov_version")),
        ("api version ok", tmpl_a, |h| h.fabric_attr.api_version = API_VERSION, Want::Ok(1)),
        (
            "api version newer",
            tmpl_a,
            |h| {
                h.fabric_attr.api_version =
                    Version::new(API_VERSION.major, API_VERSION.minor + 1)
            },
            Want::Err(NODATA, "fabric_attr.api_version"),
        ),
    ]);
}

#[test]
#[rustfmt::skip]
fn rule6_domain_attr() {
    run_cases(&[
        ("name", tmpl_b, |h| h.domain_attr.name = Some("lo".into()), Want::Ok(1)),
        ("name other", tmpl_b, |h| h.domain_attr.name = Some("eth0".into()), Want::Err(NODATA, "domain_attr.name")),
        ("threading safe on safe", tmpl_a, |h| h.domain_attr.threading = Threading::Safe, Want::Ok(1)),
        ("threading domain on safe", tmpl_a, |h| h.domain_attr.threading = Threading::Domain, Want::Ok(1)),
        ("threading domain on domain", tmpl_b, |h| h.domain_attr.threading = Threading::Domain, Want::Ok(1)),
        ("threading safe on domain", tmpl_b, |h| h.domain_attr.threading = Threading::Safe, Want::Err(NODATA, "domain_attr.threading")),
        ("threading completion on domain", tmpl_b, |h| h.domain_attr.threading = Threading::Completion, Want::Err(NODATA, "domain_attr.threading")),
        ("threading endpoint on domain", tmpl_b, |h| h.domain_attr.threading = Threading::Endpoint, Want::Err(NODATA, "domain_attr.threading")),
        ("control auto on auto", tmpl_b, |h| h.domain_attr.control_progress = Progress::Auto, Want::Ok(1)),
        ("data manual on manual", tmpl_b, |h| h.domain_attr.data_progress = Progress::Manual, Want::Ok(1)),
        ("data auto on manual", tmpl_b, |h| h.domain_attr.data_progress = Progress::Auto, Want::Err(NODATA, "domain_attr.data_progress")),
        ("data manual on auto", tmpl_a, |h| h.domain_attr.data_progress = Progress::Manual, Want::Ok(1)),
        ("rm disabled on disabled", tmpl_b, |h| h.domain_attr.resource_mgmt = ResourceMgmt::Disabled, Want::Ok(1)),
        ("rm enabled on disabled", tmpl_b, |h| h.domain_attr.resource_mgmt = ResourceMgmt::Enabled, Want::Err(NODATA, "domain_attr.resource_mgmt")),
        ("av map on map", tmpl_b, |h| h.domain_attr.av_type = AvType::Map, Want::Ok(1)),
        ("av table on map", tmpl_b, |h| h.domain_attr.av_type = AvType::Table, Want::Err(NODATA, "domain_attr.av_type")),
        ("av table on unspec", tmpl_a, |h| h.domain_attr.av_type = AvType::Table, Want::Ok(1)),
        ("cq data size", tmpl_a, |h| h.domain_attr.cq_data_size = 8, Want::Ok(1)),
        ("cq data size over", tmpl_a, |h| h.domain_attr.cq_data_size = 16, Want::Err(NODATA, "domain_attr.cq_data_size")),
        ("cntr cnt", tmpl_a, |h| h.domain_attr.cntr_cnt = 16, Want::Ok(1)),
        ("cntr cnt over", tmpl_a, |h| h.domain_attr.cntr_cnt = 17, Want::Err(NODATA, "domain_attr.cntr_cnt")),
        ("mr iov limit", tmpl_a, |h| h.domain_attr.mr_iov_limit = 1, Want::Ok(1)),
        ("mr iov limit over", tmpl_a, |h| h.domain_attr.mr_iov_limit = 2, Want::Err(NODATA, "domain_attr.mr_iov_limit")),
        ("domain caps", tmpl_a, |h| h.domain_attr.caps = Caps::LOCAL_COMM, Want::Ok(1)),
        ("domain caps missing", tmpl_a, |h| h.domain_attr.caps = Caps::SHARED_AV, Want::Err(NODATA, "domain_attr.caps")),
        ("max err data", tmpl_a, |h| h.domain_attr.max_err_data = 64, Want::Ok(1)),
        ("max err data over", tmpl_a, |h| h.domain_attr.max_err_data = 65, Want::Err(NODATA, "domain_attr.max_err_data")),
        ("mr cnt", tmpl_a, |h| h.domain_attr.mr_cnt = 1024, Want::Ok(1)),
        ("mr cnt over", tmpl_a, |h| h.domain_attr.mr_cnt = 1025, Want::Err(NODATA, "domain_attr.mr_cnt")),
        ("cq cnt", tmpl_a, |h| h.domain_attr.cq_cnt = 256, Want::Ok(1)),
        ("cq cnt over", tmpl_a, |h| h.domain_attr.cq_cnt = 257, Want::Err(NODATA, "domain_attr.cq_cnt")),
        ("cq cnt unlimited template", tmpl_b, |h| h.domain_attr.cq_cnt = 1 << 20, Want::Ok(1)),
        ("ep cnt over", tmpl_a, |h| h.domain_attr.ep_cnt = 8193, Want::Err(NODATA, "domain_attr.ep_cnt")),
        ("ep cnt", tmpl_a, |h| h.domain_attr.ep_cnt = 8192, Want::Ok(1)),
        ("tx ctx cnt", tmpl_a, |h| h.domain_attr.tx_ctx_cnt = 256, Want::Ok(1)),
        ("tx ctx cnt over", tmpl_a, |h| h.domain_attr.tx_ctx_cnt = 257, Want::Err(NODATA, "domain_attr.tx_ctx_cnt")),
        ("rx ctx cnt", tmpl_a, |h| h.domain_attr.rx_ctx_cnt = 256, Want::Ok(1)),
        ("rx ctx cnt over", tmpl_a, |h| h.domain_attr.rx_ctx_cnt = 257, Want::Err(NODATA, "domain_attr.rx_ctx_cnt")),
        ("auth key length", tmpl_a, |h| h.domain_attr.auth_key = Some(vec![1, 2, 3, 4]), Want::Ok(1)),
        ("auth key length other", tmpl_a, |h| h.domain_attr.auth_key = Some(vec![1, 2]), Want::Err(NODATA, "domain_attr.auth_key")),
        ("domain mode required", tmpl_a, |h| h.domain_attr.mode = Mode::empty(), Want::Ok(1)),
        (
            "domain mode missing",
            || {
                let mut t = tmpl_a();
                t.domain_attr.mode = Mode::RESTRICTED_COMP;
                t
            },
            |h| h.domain_attr.mode = Mode::empty(),
            Want::Err(NODATA, "domain_attr.mode"),
        ),
    ]);
}

#[test]
#[rustfmt::skip]
fn rule6_mr_mode() {
    run_cases(&[
        ("unspec passes", tmpl_a, |h| h.domain_attr.mr_mode = MrMode::UNSPEC, Want::Ok(1)),
        (
            "rma target needs virt_addr|prov_key",
            tmpl_a,
            |h| {
                h.caps = Caps::RMA;
                h.domain_attr.mr_mode = MrMode::LOCAL;
            },
            Want::Err(NODATA, "domain_attr.mr_mode"),
        ),
        (
            "rma target bits given",
            tmpl_a,
            |h| {
                h.caps = Caps::RMA;
                h.domain_attr.mr_mode = MrMode::VIRT_ADDR | MrMode::PROV_KEY;
            },
            Want::Ok(1),
        ),
        (
            "rma initiator only: bits trimmed",
            tmpl_a,
            |h| {
                h.caps = Caps::RMA | Caps::READ | Caps::WRITE;
                h.domain_attr.mr_mode = MrMode::LOCAL;
            },
            Want::Ok(1),
        ),
        (
            "msg only: bits trimmed",
            tmpl_a,
            |h| {
                h.caps = Caps::MSG;
                h.domain_attr.mr_mode = MrMode::LOCAL;
            },
            Want::Ok(1),
        ),
        ("basic accepted", tmpl_a, |h| h.domain_attr.mr_mode = MrMode::BASIC, Want::Ok(1)),
        ("scalable not accepted", tmpl_a, |h| h.domain_attr.mr_mode = MrMode::SCALABLE, Want::Err(NODATA, "domain_attr.mr_mode")),
        ("basic not alone", tmpl_a, |h| h.domain_attr.mr_mode = MrMode::BASIC | MrMode::LOCAL, Want::Err(NODATA, "domain_attr.mr_mode")),
        (
            "local needed, LOCAL_MR mode given",
            tmpl_b,
            // Info::hints() has every mode bit, FI_LOCAL_MR included: the mode check
            // passes and the mr_mode check takes FI_LOCAL_MR for FI_MR_LOCAL.
            |h| h.domain_attr.mr_mode = MrMode::VIRT_ADDR,
            Want::Ok(1),
        ),
        (
            "local needed, neither",
            tmpl_b,
            |h| {
                h.domain_attr.mr_mode = MrMode::VIRT_ADDR;
                h.mode = Mode::CONTEXT | Mode::MSG_PREFIX;
            },
            Want::Err(NODATA, "mode"),
        ),
        ("local given", tmpl_b, |h| h.domain_attr.mr_mode = MrMode::LOCAL, Want::Ok(1)),
    ]);
}

#[test]
fn rule6_mr_mode_before_1_5() {
    let old = Version::new(1, 4);
    let mut hints = Info::hints();
    hints.domain_attr.mr_mode = MrMode::UNSPEC;
    let req = GetinfoRequest {
        version: old,
        hints: Some(hints.clone()),
        ..GetinfoRequest::default()
    };
    // A accepts BASIC, so an old application with an unspecified mode can use it;
    // B lists no legacy mode.
    assert_eq!(outcome(&[tmpl_a()], &req, &NoResolver), Ok(1));
    assert_eq!(
        outcome(&[tmpl_b()], &req, &NoResolver),
        Err((NODATA, "domain_attr.mr_mode".into()))
    );
    // Old API: only BASIC / SCALABLE / UNSPEC are meaningful.
    hints.domain_attr.mr_mode = MrMode::LOCAL;
    let req = GetinfoRequest {
        version: old,
        hints: Some(hints.clone()),
        ..GetinfoRequest::default()
    };
    assert_eq!(
        outcome(&[tmpl_a()], &req, &NoResolver),
        Err((NODATA, "domain_attr.mr_mode".into()))
    );
    // Result for an old app: the legacy mode, plus FI_LOCAL_MR where the template
    // needs local registration.
    hints.domain_attr.mr_mode = MrMode::UNSPEC;
    let a = alter_info(&tmpl_a(), Some(&hints), old);
    assert_eq!(a.domain_attr.mr_mode, MrMode::BASIC);
    let mut b = tmpl_b();
    b.domain_attr.mr_mode = MrMode::LOCAL | MrMode::SCALABLE;
    assert!(check_info(&b, &hints, old).is_ok());
    let shaped = alter_info(&b, Some(&hints), old);
    assert_eq!(shaped.domain_attr.mr_mode, MrMode::SCALABLE);
    assert!(shaped.mode.contains(Mode::LOCAL_MR));
}

#[test]
#[rustfmt::skip]
fn rule7_ep_attr() {
    run_cases(&[
        ("protocol", tmpl_a, |h| h.ep_attr.protocol = Protocol::XNET, Want::Ok(1)),
        ("protocol other", tmpl_a, |h| h.ep_attr.protocol = Protocol::RXM, Want::Err(NODATA, "ep_attr.protocol")),
        ("protocol version", tmpl_a, |h| h.ep_attr.protocol_version = 1, Want::Ok(1)),
        ("protocol version newer", tmpl_a, |h| h.ep_attr.protocol_version = 2, Want::Err(NODATA, "ep_attr.protocol_version")),
        ("max msg size", tmpl_a, |h| h.ep_attr.max_msg_size = 1 << 30, Want::Ok(1)),
        ("max msg size over", tmpl_a, |h| h.ep_attr.max_msg_size = (1 << 30) + 1, Want::Err(NODATA, "ep_attr.max_msg_size")),
        ("prefix space enough", tmpl_b, |h| h.ep_attr.msg_prefix_size = 16, Want::Ok(1)),
        ("prefix space more", tmpl_b, |h| h.ep_attr.msg_prefix_size = 64, Want::Ok(1)),
        ("prefix space short", tmpl_b, |h| h.ep_attr.msg_prefix_size = 8, Want::Err(NODATA, "ep_attr.msg_prefix_size")),
        ("prefix unused by template", tmpl_a, |h| h.ep_attr.msg_prefix_size = 8, Want::Ok(1)),
        ("tx ctx 1", tmpl_a, |h| h.ep_attr.tx_ctx_cnt = 1, Want::Ok(1)),
        ("tx ctx 2", tmpl_a, |h| h.ep_attr.tx_ctx_cnt = 2, Want::Err(NODATA, "ep_attr.tx_ctx_cnt")),
        ("tx ctx shared", tmpl_a, |h| h.ep_attr.tx_ctx_cnt = SHARED_CONTEXT, Want::Ok(1)),
        ("tx ctx shared unsupported", tmpl_b, |h| h.ep_attr.tx_ctx_cnt = SHARED_CONTEXT, Want::Err(NODATA, "ep_attr.tx_ctx_cnt")),
        ("rx ctx 1", tmpl_a, |h| h.ep_attr.rx_ctx_cnt = 1, Want::Ok(1)),
        ("rx ctx 3", tmpl_a, |h| h.ep_attr.rx_ctx_cnt = 3, Want::Err(NODATA, "ep_attr.rx_ctx_cnt")),
        ("rx ctx shared unsupported", tmpl_b, |h| h.ep_attr.rx_ctx_cnt = SHARED_CONTEXT, Want::Err(NODATA, "ep_attr.rx_ctx_cnt")),
        (
            "template demands shared",
            tmpl_a_shared_tx,
            |h| h.ep_attr.tx_ctx_cnt = 1,
            Want::Err(NODATA, "ep_attr.tx_ctx_cnt"),
        ),
        (
            "template demands shared, given",
            tmpl_a_shared_tx,
            |h| h.ep_attr.tx_ctx_cnt = SHARED_CONTEXT,
            Want::Ok(1),
        ),
        (
            "order size with rma",
            tmpl_a,
            |h| {
                h.caps = Caps::RMA;
                h.ep_attr.max_order_raw_size = 1 << 20;
            },
            Want::Ok(1),
        ),
        (
            "order raw size over with rma",
            tmpl_a,
            |h| {
                h.caps = Caps::RMA;
                h.ep_attr.max_order_raw_size = 1 << 21;
            },
            Want::Err(NODATA, "ep_attr.max_order_raw_size"),
        ),
        (
            "order war size over with rma",
            tmpl_a,
            |h| {
                h.caps = Caps::RMA;
                h.ep_attr.max_order_war_size = 1 << 21;
            },
            Want::Err(NODATA, "ep_attr.max_order_war_size"),
        ),
        ("order waw size over, template caps decide", tmpl_a, |h| h.ep_attr.max_order_waw_size = 1 << 21, Want::Err(NODATA, "ep_attr.max_order_waw_size")),
        (
            "order size ignored without rma",
            tmpl_a,
            |h| {
                h.caps = Caps::MSG;
                h.ep_attr.max_order_raw_size = 1 << 21;
            },
            Want::Ok(1),
        ),
        ("tag bits fit", tmpl_b, |h| h.ep_attr.mem_tag_format = 0xFFFF, Want::Ok(1)),
        ("tag bits exact", tmpl_b, |h| h.ep_attr.mem_tag_format = 0x0000_FFFF_FFFF_FFFF, Want::Ok(1)),
        ("tag bits too wide", tmpl_b, |h| h.ep_attr.mem_tag_format = 1 << 63, Want::Err(NODATA, "ep_attr.mem_tag_format")),
        (
            "tag bits ignored without tagged",
            tmpl_b,
            |h| {
                h.caps = Caps::MSG;
                h.ep_attr.mem_tag_format = 1 << 63;
            },
            Want::Ok(1),
        ),
        ("ep auth key unsupported", tmpl_a, |h| h.ep_attr.auth_key = Some(vec![9]), Want::Err(NODATA, "ep_attr.auth_key")),
    ]);
}

#[test]
#[rustfmt::skip]
fn rule8_rx_attr() {
    run_cases(&[
        ("caps", tmpl_a, |h| h.rx_attr.caps = Caps::MSG | Caps::RECV, Want::Ok(1)),
        ("caps with tx-only bits ignored", tmpl_a, |h| h.rx_attr.caps = Caps::MSG | Caps::SEND | Caps::READ, Want::Ok(1)),
        ("caps missing", tmpl_a, |h| h.rx_attr.caps = Caps::TAGGED, Want::Err(NODATA, "rx_attr.caps")),
        ("mode from info", tmpl_b, |h| h.rx_attr.mode = Mode::empty(), Want::Ok(1)),
        ("mode given", tmpl_b, |h| h.rx_attr.mode = Mode::CONTEXT, Want::Ok(1)),
        ("mode missing", tmpl_b, |h| h.rx_attr.mode = Mode::MSG_PREFIX, Want::Err(NODATA, "rx_attr.mode")),
        ("op flags", tmpl_a, |h| h.rx_attr.op_flags = OpFlags::MULTI_RECV, Want::Ok(1)),
        ("op flags missing", tmpl_a, |h| h.rx_attr.op_flags = OpFlags::INJECT, Want::Err(NODATA, "rx_attr.op_flags")),
        ("msg order", tmpl_a, |h| h.rx_attr.msg_order = MsgOrder::SAS, Want::Ok(1)),
        ("msg order missing", tmpl_b, |h| h.rx_attr.msg_order = MsgOrder::SAS, Want::Err(NODATA, "rx_attr.msg_order")),
        ("comp order none", tmpl_a, |h| h.rx_attr.comp_order = CompOrder::NONE, Want::Ok(1)),
        ("comp order strict", tmpl_a, |h| h.rx_attr.comp_order = CompOrder::STRICT, Want::Err(NODATA, "rx_attr.comp_order")),
        ("total buffered 0", tmpl_a, |h| h.rx_attr.total_buffered_recv = 0, Want::Ok(1)),
        ("total buffered set", tmpl_a, |h| h.rx_attr.total_buffered_recv = 1, Want::Err(NODATA, "rx_attr.total_buffered_recv")),
        ("size", tmpl_a, |h| h.rx_attr.size = 1024, Want::Ok(1)),
        ("size over", tmpl_a, |h| h.rx_attr.size = 1025, Want::Err(NODATA, "rx_attr.size")),
        ("iov limit", tmpl_a, |h| h.rx_attr.iov_limit = 4, Want::Ok(1)),
        ("iov limit over", tmpl_a, |h| h.rx_attr.iov_limit = 5, Want::Err(NODATA, "rx_attr.iov_limit")),
    ]);
}

#[test]
#[rustfmt::skip]
fn rule9_tx_attr() {
    run_cases(&[
        ("caps", tmpl_a, |h| h.tx_attr.caps = Caps::MSG | Caps::SEND, Want::Ok(1)),
        ("caps with rx-only bits ignored", tmpl_a, |h| h.tx_attr.caps = Caps::MSG | Caps::RECV | Caps::SOURCE, Want::Ok(1)),
        ("caps missing", tmpl_a, |h| h.tx_attr.caps = Caps::ATOMIC, Want::Err(NODATA, "tx_attr.caps")),
        (
            "mode missing",
            tmpl_a_tx_async_iov,
            |h| h.tx_attr.mode = Mode::CONTEXT,
            Want::Err(NODATA, "tx_attr.mode"),
        ),
        (
            "mode from info",
            tmpl_a_tx_async_iov,
            |h| h.tx_attr.mode = Mode::empty(),
            Want::Ok(1),
        ),
        ("op flags", tmpl_a, |h| h.tx_attr.op_flags = OpFlags::INJECT | OpFlags::COMPLETION, Want::Ok(1)),
        ("op flags missing", tmpl_a, |h| h.tx_attr.op_flags = OpFlags::MULTI_RECV, Want::Err(NODATA, "tx_attr.op_flags")),
        ("msg order", tmpl_a, |h| h.tx_attr.msg_order = MsgOrder::RAW | MsgOrder::WAW, Want::Ok(1)),
        ("msg order missing", tmpl_a, |h| h.tx_attr.msg_order = MsgOrder::RMA_RAW, Want::Err(NODATA, "tx_attr.msg_order")),
        ("comp order none", tmpl_a, |h| h.tx_attr.comp_order = CompOrder::NONE, Want::Ok(1)),
        ("comp order strict", tmpl_a, |h| h.tx_attr.comp_order = CompOrder::STRICT, Want::Err(NODATA, "tx_attr.comp_order")),
        ("inject size", tmpl_a, |h| h.tx_attr.inject_size = 128, Want::Ok(1)),
        ("inject size over", tmpl_a, |h| h.tx_attr.inject_size = 129, Want::Err(NODATA, "tx_attr.inject_size")),
        ("size", tmpl_a, |h| h.tx_attr.size = 1024, Want::Ok(1)),
        ("size over", tmpl_a, |h| h.tx_attr.size = 1025, Want::Err(NODATA, "tx_attr.size")),
        ("iov limit", tmpl_a, |h| h.tx_attr.iov_limit = 4, Want::Ok(1)),
        ("iov limit over", tmpl_a, |h| h.tx_attr.iov_limit = 5, Want::Err(NODATA, "tx_attr.iov_limit")),
        ("rma iov limit", tmpl_a, |h| h.tx_attr.rma_iov_limit = 4, Want::Ok(1)),
        ("rma iov limit over", tmpl_a, |h| h.tx_attr.rma_iov_limit = 5, Want::Err(NODATA, "tx_attr.rma_iov_limit")),
    ]);
}

#[test]
fn check_order_reports_first_failure() {
    // Several hints fail; the earliest rule in the order is the one reported.
    let mut h = Info::hints();
    h.tx_attr.inject_size = 1 << 20;
    h.domain_attr.threading = Threading::Safe;
    h.caps = Caps::ATOMIC;
    h.ep_attr.ep_type = EpType::Dgram;
    let m = check_info(&tmpl_b(), &h, API_VERSION).unwrap_err();
    assert_eq!(m.field, "ep_attr.type");
    h.ep_attr.ep_type = EpType::Unspec;
    assert_eq!(
        check_info(&tmpl_b(), &h, API_VERSION).unwrap_err().field,
        "caps"
    );
    h.caps = Caps::empty();
    assert_eq!(
        check_info(&tmpl_b(), &h, API_VERSION).unwrap_err().field,
        "domain_attr.threading"
    );
    h.domain_attr.threading = Threading::Unspec;
    assert_eq!(
        check_info(&tmpl_b(), &h, API_VERSION).unwrap_err().field,
        "tx_attr.inject_size"
    );
}

#[test]
fn mismatch_text() {
    let mut h = Info::hints();
    h.ep_attr.ep_type = EpType::Rdm;
    let req = req_with(h);
    let out = tcp_match(&[tmpl_a()], &req, &NoResolver);
    assert_eq!(
        out.verdicts[0].to_string(),
        "tcp[0]: rejected: ep_attr.type asked FI_EP_RDM, offers FI_EP_MSG"
    );
    let mut h = Info::hints();
    h.tx_attr.inject_size = 4096;
    let m = check_info(&tmpl_a(), &h, API_VERSION).unwrap_err();
    assert_eq!(m.to_string(), "tx_attr.inject_size asked 4096, offers 128");
    let mut h = Info::hints();
    h.domain_attr.threading = Threading::Safe;
    let m = check_info(&tmpl_b(), &h, API_VERSION).unwrap_err();
    assert_eq!(
        m.to_string(),
        "domain_attr.threading asked FI_THREAD_SAFE, offers FI_THREAD_DOMAIN"
    );
    let mut h = Info::hints();
    h.caps = Caps::TAGGED;
    let m = check_info(&tmpl_a(), &h, API_VERSION).unwrap_err();
    assert_eq!(m.asked, "FI_TAGGED");
    let mut h = Info::hints();
    h.mode = Mode::empty();
    let m = check_info(&tmpl_b(), &h, API_VERSION).unwrap_err();
    assert_eq!(
        m.to_string(),
        "mode asked 0, offers FI_CONTEXT|FI_MSG_PREFIX"
    );
}

// ---- validate_request ----

#[test]
fn validate_version_newer_is_enosys() {
    let mut req = GetinfoRequest::new(Version::new(API_VERSION.major, API_VERSION.minor + 1));
    assert_eq!(validate_request(&req).unwrap_err().code(), Errno::ENOSYS);
    req.version = Version::new(2, 0);
    assert_eq!(validate_request(&req).unwrap_err().code(), Errno::ENOSYS);
    req.version = API_VERSION;
    assert!(validate_request(&req).is_ok());
    req.version = Version::new(1, 0);
    assert!(validate_request(&req).is_ok());
}

#[test]
fn validate_flags() {
    let mut req = GetinfoRequest::new(API_VERSION);
    req.flags = GetinfoFlags::from_bits_retain(1);
    assert_eq!(validate_request(&req).unwrap_err().code(), Errno::EBADFLAGS);
    req.flags = GetinfoFlags::NUMERICHOST | GetinfoFlags::from_bits_retain(1 << 40);
    assert_eq!(validate_request(&req).unwrap_err().code(), Errno::EBADFLAGS);
    req.flags = GetinfoFlags::NUMERICHOST | GetinfoFlags::RESCAN | GetinfoFlags::PROV_ATTR_ONLY;
    assert!(validate_request(&req).is_ok());
}

#[test]
fn validate_source_needs_node_or_service() {
    let mut req = GetinfoRequest::new(API_VERSION);
    req.flags = GetinfoFlags::SOURCE;
    assert_eq!(validate_request(&req).unwrap_err().code(), Errno::EINVAL);
    // And match_templates refuses too, with a verdict per template.
    let out = tcp_match(&[tmpl_a(), tmpl_b()], &req, &IpResolver);
    assert_eq!(out.error.as_ref().map(Error::code), Some(Errno::EINVAL));
    assert!(out.infos.is_empty());
    assert_eq!(out.verdicts.len(), 2);
    req.service = Some("7471".into());
    assert!(validate_request(&req).is_ok());
    req.service = None;
    req.node = Some("127.0.0.1".into());
    assert!(validate_request(&req).is_ok());
}

#[test]
fn validate_addr_str_node_with_service() {
    let mut req = GetinfoRequest::new(API_VERSION);
    req.node = Some("fi_sockaddr_in://127.0.0.1:7471".into());
    assert!(validate_request(&req).is_ok());
    req.service = Some("7471".into());
    assert_eq!(validate_request(&req).unwrap_err().code(), Errno::EINVAL);
    req.node = Some("127.0.0.1".into());
    assert!(validate_request(&req).is_ok());
}

#[test]
fn validate_hint_bits() {
    let check = |f: fn(&mut Info)| {
        let mut h = Info::hints();
        f(&mut h);
        validate_request(&req_with(h)).map_err(|e| e.code())
    };
    assert_eq!(check(|h| h.caps = Caps::MSG), Ok(()));
    assert_eq!(
        check(|h| h.caps = Caps::from_bits_retain(1)),
        Err(Errno::EBADFLAGS)
    );
    assert_eq!(
        check(|h| h.caps = Caps::MSG | Caps::from_bits_retain(1 << 7)),
        Err(Errno::EBADFLAGS)
    );
    assert_eq!(
        check(|h| h.tx_attr.caps = Caps::from_bits_retain(1 << 62)),
        Err(Errno::EBADFLAGS)
    );
    assert_eq!(
        check(|h| h.rx_attr.caps = Caps::from_bits_retain(1 << 0)),
        Err(Errno::EBADFLAGS)
    );
    assert_eq!(
        check(|h| h.domain_attr.caps = Caps::from_bits_retain(1 << 0)),
        Err(Errno::EBADFLAGS)
    );
    assert_eq!(check(|h| h.tx_attr.op_flags = OpFlags::INJECT), Ok(()));
    assert_eq!(
        check(|h| h.tx_attr.op_flags = OpFlags::from_bits_retain(1 << 0)),
        Err(Errno::EBADFLAGS)
    );
    assert_eq!(
        check(|h| h.rx_attr.op_flags = OpFlags::from_bits_retain(1 << 0)),
        Err(Errno::EBADFLAGS)
    );
}

#[test]
fn validate_hint_address_formats() {
    let v4 = Address::Inet(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1));
    let v6 = Address::Inet6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 1, 0, 0));
    let cases = [
        (AddrFormat::UNSPEC, v6.clone(), Ok(())),
        (AddrFormat::SOCKADDR, v4.clone(), Ok(())),
        (AddrFormat::SOCKADDR, v6.clone(), Ok(())),
        (AddrFormat::SOCKADDR_IN, v4.clone(), Ok(())),
        (AddrFormat::SOCKADDR_IN, v6.clone(), Err(Errno::EINVAL)),
        (AddrFormat::SOCKADDR_IN6, v4.clone(), Err(Errno::EINVAL)),
        (AddrFormat::STR, Address::Str("fi_shm://1".into()), Ok(())),
        (AddrFormat::STR, v4.clone(), Err(Errno::EINVAL)),
        (
            AddrFormat::SOCKADDR,
            Address::Str("fi_shm://1".into()),
            Err(Errno::EINVAL),
        ),
    ];
    for (fmt, addr, want) in cases {
        for dest in [false, true] {
            let mut h = Info::hints().with_addr_format(fmt);
            if dest {
                h.dest_addr = Some(addr.clone());
            } else {
                h.src_addr = Some(addr.clone());
            }
            let got = validate_request(&req_with(h)).map_err(|e| e.code());
            assert_eq!(got, want, "{fmt} with {addr} (dest: {dest})");
        }
    }
}

// ---- match_templates: modes, shaping, stamping ----

#[test]
fn mode_zero_eliminates_context_template() {
    let mut h = Info::hints();
    h.mode = Mode::empty();
    assert_eq!(
        outcome(&[tmpl_b()], &req_with(h.clone()), &NoResolver),
        Err((NODATA, "mode".into()))
    );
    // The other template needs no mode and survives.
    assert_eq!(
        outcome(&[tmpl_a(), tmpl_b()], &req_with(h.clone()), &NoResolver),
        Ok(1)
    );
    h.mode = Mode::from_bits_retain(!0);
    assert_eq!(outcome(&[tmpl_b()], &req_with(h), &NoResolver), Ok(1));
}

#[test]
fn caps_shaping_msg_request() {
    let mut h = Info::hints();
    h.caps = Caps::MSG;
    let out = tcp_match(&[tmpl_a()], &req_with(h), &NoResolver);
    let i = &out.infos[0];
    assert!(
        i.caps.contains(Caps::MSG | Caps::SEND | Caps::RECV),
        "{}",
        i.caps
    );
    assert!(!i.caps.intersects(Caps::RMA | RMA_BITS), "{}", i.caps);
    // Secondaries come along, FI_SOURCE only when asked.
    assert!(i
        .caps
        .contains(Caps::MULTI_RECV | Caps::LOCAL_COMM | Caps::REMOTE_COMM));
    assert!(!i.caps.contains(Caps::SOURCE));
    assert_eq!(i.tx_attr.caps, Caps::MSG | Caps::SEND);
    assert_eq!(i.rx_attr.caps, Caps::MSG | Caps::RECV | Caps::MULTI_RECV);
}

const RMA_BITS: Caps = Caps::from_bits_retain(
    Caps::READ.bits() | Caps::WRITE.bits() | Caps::REMOTE_READ.bits() | Caps::REMOTE_WRITE.bits(),
);

#[test]
fn caps_shaping_rma_and_source() {
    let mut h = Info::hints();
    h.caps = Caps::RMA | Caps::SOURCE;
    let i = alter_info(&tmpl_a(), Some(&h), API_VERSION);
    assert!(i.caps.contains(Caps::RMA | RMA_BITS | Caps::SOURCE));
    assert!(!i.caps.intersects(Caps::MSG | Caps::SEND | Caps::RECV));
    assert!(i.rx_attr.caps.contains(Caps::SOURCE));
    // Send-only.
    h.caps = Caps::MSG | Caps::SEND;
    let i = alter_info(&tmpl_a(), Some(&h), API_VERSION);
    assert!(i.caps.contains(Caps::MSG | Caps::SEND));
    assert!(!i.caps.contains(Caps::RECV));
    assert_eq!(i.rx_attr.caps, Caps::MSG | Caps::MULTI_RECV);
    // No hint caps: the template's, FI_SOURCE included.
    h.caps = Caps::empty();
    let i = alter_info(&tmpl_a(), Some(&h), API_VERSION);
    assert_eq!(i.caps, tmpl_a().caps);
}

#[test]
fn remote_rma_dropped_when_mr_bits_refused() {
    let mut h = Info::hints();
    h.domain_attr.mr_mode = MrMode::LOCAL | MrMode::ALLOCATED;
    // No caps asked: the check trims the RMA-target bits, the shaping drops remote RMA.
    assert!(check_info(&tmpl_a(), &h, API_VERSION).is_ok());
    let i = alter_info(&tmpl_a(), Some(&h), API_VERSION);
    assert!(i.caps.contains(Caps::RMA | Caps::READ | Caps::WRITE));
    assert!(!i.caps.intersects(Caps::REMOTE_READ | Caps::REMOTE_WRITE));
    assert!(!i
        .rx_attr
        .caps
        .intersects(Caps::REMOTE_READ | Caps::REMOTE_WRITE));
    assert_eq!(i.domain_attr.mr_mode, MrMode::empty());
    // Accepting the bits keeps remote RMA and reports them.
    h.domain_attr.mr_mode = MrMode::LOCAL | MrMode::VIRT_ADDR | MrMode::PROV_KEY;
    let i = alter_info(&tmpl_a(), Some(&h), API_VERSION);
    assert!(i.caps.contains(Caps::REMOTE_READ | Caps::REMOTE_WRITE));
    assert_eq!(i.domain_attr.mr_mode, MrMode::VIRT_ADDR | MrMode::PROV_KEY);
    // A legacy app gets its mode back verbatim.
    h.domain_attr.mr_mode = MrMode::BASIC;
    assert_eq!(
        alter_info(&tmpl_a(), Some(&h), API_VERSION)
            .domain_attr
            .mr_mode,
        MrMode::BASIC
    );
    // No hints: the template's requirements without the legacy bits.
    assert_eq!(
        alter_info(&tmpl_a(), None, API_VERSION).domain_attr.mr_mode,
        MrMode::VIRT_ADDR | MrMode::PROV_KEY
    );
}

#[test]
fn shaping_overrides_from_hints() {
    let mut h = Info::hints();
    h.domain_attr.threading = Threading::Domain;
    h.domain_attr.control_progress = Progress::Manual;
    h.domain_attr.data_progress = Progress::Manual;
    h.domain_attr.resource_mgmt = ResourceMgmt::Disabled;
    h.domain_attr.av_type = AvType::Table;
    h.ep_attr.tx_ctx_cnt = SHARED_CONTEXT;
    h.tx_attr.size = 16;
    h.tx_attr.iov_limit = 2;
    h.tx_attr.inject_size = 32;
    h.tx_attr.rma_iov_limit = 1;
    h.tx_attr.op_flags = OpFlags::COMPLETION;
    h.rx_attr.size = 8;
    h.rx_attr.iov_limit = 1;
    h.rx_attr.op_flags = OpFlags::empty();
    h.handle = 0xdead;
    h.caps = Caps::RMA;
    h.ep_attr.max_order_waw_size = 64;
    assert!(check_info(&tmpl_a(), &h, API_VERSION).is_ok());
    let i = alter_info(&tmpl_a(), Some(&h), API_VERSION);
    assert_eq!(i.domain_attr.threading, Threading::Domain);
    assert_eq!(i.domain_attr.control_progress, Progress::Manual);
    assert_eq!(i.domain_attr.data_progress, Progress::Manual);
    assert_eq!(i.domain_attr.resource_mgmt, ResourceMgmt::Disabled);
    assert_eq!(i.domain_attr.av_type, AvType::Table);
    assert_eq!(i.ep_attr.tx_ctx_cnt, SHARED_CONTEXT);
    assert_eq!(i.ep_attr.rx_ctx_cnt, 1);
    assert_eq!(i.ep_attr.max_order_waw_size, 64);
    assert_eq!(i.ep_attr.max_order_raw_size, 1 << 20);
    assert_eq!(
        (
            i.tx_attr.size,
            i.tx_attr.iov_limit,
            i.tx_attr.inject_size,
            i.tx_attr.rma_iov_limit
        ),
        (16, 2, 32, 1)
    );
    assert_eq!((i.rx_attr.size, i.rx_attr.iov_limit), (8, 1));
    assert_eq!(i.tx_attr.op_flags, OpFlags::COMPLETION);
    assert_eq!(i.rx_attr.op_flags, OpFlags::empty());
    assert_eq!(i.handle, 0xdead);
    // Unset hints leave the template's values.
    let i = alter_info(&tmpl_a(), Some(&Info::hints()), API_VERSION);
    assert_eq!(i.domain_attr.threading, Threading::Safe);
    assert_eq!(i.tx_attr.inject_size, 128);
    assert_eq!(i.tx_attr.size, 1024);
}

#[test]
fn shaping_modes() {
    // Required modes remain, the rest of the hint's supported modes are not echoed.
    let i = alter_info(&tmpl_b(), Some(&Info::hints()), API_VERSION);
    assert_eq!(i.mode, Mode::CONTEXT | Mode::MSG_PREFIX);
    assert_eq!(i.rx_attr.mode, Mode::CONTEXT);
    let i = alter_info(&tmpl_a(), Some(&Info::hints()), API_VERSION);
    assert_eq!(i.mode, Mode::empty());
    // An app that registers through FI_LOCAL_MR sees it required.
    let mut h = Info::hints();
    h.domain_attr.mr_mode = MrMode::empty();
    let i = alter_info(&tmpl_b(), Some(&h), API_VERSION);
    assert_eq!(i.mode, Mode::CONTEXT | Mode::MSG_PREFIX | Mode::LOCAL_MR);
    assert_eq!(i.domain_attr.mr_mode, MrMode::LOCAL);
}

#[test]
fn shaping_names_and_format() {
    let mut h = Info::hints();
    h.fabric_attr.name = Some("fab".into());
    h.domain_attr.name = Some("dom".into());
    h.domain_attr.auth_key = Some(vec![1, 2, 3, 4]);
    h.addr_format = AddrFormat::SOCKADDR_IN6;
    let mut t = tmpl_b();
    t.domain_attr.name = None;
    t.addr_format = AddrFormat::SOCKADDR;
    let i = alter_info(&t, Some(&h), API_VERSION);
    assert_eq!(i.fabric_attr.name.as_deref(), Some("fab"));
    assert_eq!(i.domain_attr.name.as_deref(), Some("dom"));
    assert_eq!(i.domain_attr.auth_key, Some(vec![1, 2, 3, 4]));
    assert_eq!(i.addr_format, AddrFormat::SOCKADDR_IN6);
    // A template's own names win.
    let i = alter_info(&tmpl_a(), Some(&h), API_VERSION);
    assert_eq!(i.fabric_attr.name.as_deref(), Some("127.0.0.0/8"));
    assert_eq!(i.addr_format, AddrFormat::SOCKADDR_IN);
}

#[test]
fn stamping() {
    let req = GetinfoRequest::new(Version::new(1, 9));
    let mut layered = tmpl_a();
    layered.fabric_attr.prov_name = Some("tcp".into());
    let mut own = tmpl_a();
    own.fabric_attr.prov_name = Some("tcp;ofi_rxm".into());
    let out = match_templates(
        "ofi_rxm",
        Version::new(117, 0),
        &[tmpl_a(), layered, own],
        &req,
        &NoResolver,
    );
    let names: Vec<&str> = out.infos.iter().map(Info::prov_name).collect();
    assert_eq!(names, ["ofi_rxm", "tcp;ofi_rxm", "tcp;ofi_rxm"]);
    for i in &out.infos {
        assert_eq!(i.fabric_attr.prov_version, Version::new(117, 0));
        assert_eq!(i.fabric_attr.api_version, Version::new(1, 9));
    }
    assert!(out.verdicts.iter().all(|v| v.kind == VerdictKind::Kept));
    assert_eq!(out.verdicts[2].to_string(), "ofi_rxm[2]: kept");
}

#[test]
fn prov_attr_only() {
    let mut req = GetinfoRequest::new(API_VERSION);
    req.flags = GetinfoFlags::PROV_ATTR_ONLY;
    let mut h = Info::hints();
    h.ep_attr.ep_type = EpType::Dgram; // ignored: nothing is matched
    req.hints = Some(h);
    let out = match_templates(
        "tcp",
        Version::new(117, 0),
        &[tmpl_a(), tmpl_b()],
        &req,
        &IpResolver,
    );
    assert_eq!(out.infos.len(), 1);
    let mut want = Info::new();
    want.fabric_attr.prov_name = Some("tcp".into());
    want.fabric_attr.prov_version = Version::new(117, 0);
    want.fabric_attr.api_version = API_VERSION;
    assert_eq!(out.infos[0], want);
    assert_eq!(out.verdicts.len(), 1);
    // Even a provider without templates answers once.
    let out = match_templates("hook", Version::new(1, 0), &[], &req, &NoResolver);
    assert_eq!(out.infos.len(), 1);
    // With another flag as well, it is an ordinary call.
    req.flags = GetinfoFlags::PROV_ATTR_ONLY | GetinfoFlags::RESCAN;
    assert_eq!(
        outcome(&[tmpl_a(), tmpl_b()], &req, &NoResolver),
        Err((NODATA, "ep_attr.type".into()))
    );
}

// ---- addresses ----

#[test]
fn source_address_from_node_and_service() {
    let req = addr_req(Some("127.0.0.1"), Some("7471"), GetinfoFlags::SOURCE);
    let out = tcp_match(&[tmpl_a()], &req, &IpResolver);
    let i = &out.infos[0];
    assert_eq!(
        addr_text(&i.src_addr).as_deref(),
        Some("fi_sockaddr_in://127.0.0.1:7471")
    );
    assert_eq!(i.dest_addr, None);
    assert_eq!(i.addr_format, AddrFormat::SOCKADDR_IN);
}

#[test]
fn dest_ipv6_picks_the_ipv6_template() {
    let req = addr_req(Some("::1"), Some("7471"), GetinfoFlags::empty());
    let mut v4 = tmpl_b();
    v4.addr_format = AddrFormat::SOCKADDR_IN;
    let out = tcp_match(&[v4, tmpl_b()], &req, &IpResolver);
    assert_eq!(out.infos.len(), 1);
    assert_eq!(out.verdicts[0].kind, VerdictKind::Rejected);
    assert_eq!(out.verdicts[0].field, "node");
    assert_eq!(out.verdicts[1].kind, VerdictKind::Kept);
    let i = &out.infos[0];
    assert_eq!(i.addr_format, AddrFormat::SOCKADDR_IN6);
    assert_eq!(
        i.dest_addr,
        Some(Address::Inet6(SocketAddrV6::new(
            Ipv6Addr::LOCALHOST,
            7471,
            0,
            0
        )))
    );
}

#[test]
fn generic_sockaddr_takes_resolved_family() {
    let mut t = tmpl_a();
    t.addr_format = AddrFormat::SOCKADDR;
    let req = addr_req(Some("127.0.0.1"), Some("1"), GetinfoFlags::empty());
    let out = tcp_match(&[t], &req, &IpResolver);
    assert_eq!(out.infos[0].addr_format, AddrFormat::SOCKADDR_IN);
    assert_eq!(
        addr_text(&out.infos[0].src_addr).as_deref(),
        Some("fi_sockaddr_in://127.0.0.1:0")
    );
}

#[test]
fn numerichost_with_name_is_enodata() {
    let req = addr_req(Some("localhost"), Some("7471"), GetinfoFlags::NUMERICHOST);
    assert_eq!(
        outcome(&[tmpl_a()], &req, &IpResolver),
        Err((NODATA, "node".into()))
    );
    // Without the flag, localhost resolves (via /etc/hosts).
    let req = GetinfoRequest {
        flags: GetinfoFlags::empty(),
        ..req
    };
    assert_eq!(outcome(&[tmpl_a()], &req, &IpResolver), Ok(1));
}

#[test]
fn unknown_service_is_enodata() {
    let req = addr_req(
        Some("127.0.0.1"),
        Some("no-such-service-xyz"),
        GetinfoFlags::empty(),
    );
    assert_eq!(
        outcome(&[tmpl_a()], &req, &IpResolver),
        Err((NODATA, "node".into()))
    );
    let req = GetinfoRequest { node: None, ..req };
    assert_eq!(
        outcome(&[tmpl_a()], &req, &IpResolver),
        Err((NODATA, "service".into()))
    );
}

#[test]
fn addr_str_node() {
    let req = addr_req(
        Some("fi_sockaddr_in://127.0.0.1:7471"),
        None,
        GetinfoFlags::empty(),
    );
    let out = tcp_match(&[tmpl_a()], &req, &IpResolver);
    assert_eq!(
        addr_text(&out.infos[0].dest_addr).as_deref(),
        Some("fi_sockaddr_in://127.0.0.1:7471")
    );
    // A string-format provider keeps the string.
    let mut t = tmpl_a();
    t.addr_format = AddrFormat::STR;
    let req = GetinfoRequest {
        node: Some("fi_shm://1234".into()),
        ..req
    };
    let out = match_templates("shm", PROV_VERSION, &[t], &req, &NoResolver);
    assert_eq!(
        out.infos[0].dest_addr,
        Some(Address::Str("fi_shm://1234".into()))
    );
}

#[test]
fn hint_addresses_copied_per_flags() {
    let hsrc = Address::Inet(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), 0));
    let hdst = Address::Inet(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 3), 99));
    let mut h = Info::hints();
    h.src_addr = Some(hsrc.clone());
    h.dest_addr = Some(hdst.clone());
    // No node/service: both copied.
    let out = tcp_match(&[tmpl_a()], &req_with(h.clone()), &IpResolver);
    assert_eq!(
        (
            out.infos[0].src_addr.clone(),
            out.infos[0].dest_addr.clone()
        ),
        (Some(hsrc.clone()), Some(hdst.clone()))
    );
    // Node given: dest resolved, hint source kept.
    let req = GetinfoRequest {
        node: Some("127.0.0.1".into()),
        ..req_with(h.clone())
    };
    let out = tcp_match(&[tmpl_a()], &req, &IpResolver);
    assert_eq!(out.infos[0].src_addr, Some(hsrc.clone()));
    assert_eq!(
        addr_text(&out.infos[0].dest_addr).as_deref(),
        Some("fi_sockaddr_in://127.0.0.1:0")
    );
    // FI_SOURCE: source resolved, hint destination kept.
    let req = GetinfoRequest {
        flags: GetinfoFlags::SOURCE,
        ..req
    };
    let out = tcp_match(&[tmpl_a()], &req, &IpResolver);
    assert_eq!(
        addr_text(&out.infos[0].src_addr).as_deref(),
        Some("fi_sockaddr_in://127.0.0.1:0")
    );
    assert_eq!(out.infos[0].dest_addr, Some(hdst));
}

struct Failing;
impl AddrResolver for Failing {
    fn resolve(&self, _: &Info, _: &GetinfoRequest) -> Result<ResolvedAddrs> {
        Err(Error::new(Errno::EIO, "broken"))
    }
}

#[test]
fn resolver_hard_error_fails_the_provider() {
    let req = addr_req(Some("x"), None, GetinfoFlags::empty());
    let out = tcp_match(&[tmpl_a(), tmpl_b()], &req, &Failing);
    assert_eq!(out.verdicts[0].field, "getinfo");
    assert_eq!(out.error.as_ref().map(Error::code), Some(Errno::EIO));
    assert!(out.infos.is_empty());
    assert_eq!(out.verdicts.len(), 2);
    assert!(out.verdicts.iter().all(|v| v.kind == VerdictKind::Rejected));
}

struct FailsOnIpv6;
impl AddrResolver for FailsOnIpv6 {
    fn resolve(&self, t: &Info, req: &GetinfoRequest) -> Result<ResolvedAddrs> {
        if t.addr_format == AddrFormat::SOCKADDR_IN6 {
            return Err(Error::new(Errno::EIO, "broken"));
        }
        IpResolver.resolve(t, req)
    }
}

#[test]
fn hard_error_after_a_kept_template() {
    let req = addr_req(Some("127.0.0.1"), None, GetinfoFlags::empty());
    let out = tcp_match(&[tmpl_a(), tmpl_b()], &req, &FailsOnIpv6);
    assert_eq!(out.error.as_ref().map(Error::code), Some(Errno::EIO));
    assert!(out.infos.is_empty());
    assert!(out.verdicts.iter().all(|v| v.kind == VerdictKind::Rejected));
    assert!(out.verdicts[0]
        .to_string()
        .starts_with("tcp[0]: rejected: getinfo asked (matched)"));
    // The same provider with only the IPv4 template works.
    let out = tcp_match(&[tmpl_a()], &req, &FailsOnIpv6);
    assert!(out.error.is_none());
    assert_eq!(out.infos.len(), 1);
}
