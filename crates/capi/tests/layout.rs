//! Layout: every C structure and table this library fills or reads, compared with the
//! installed libfabric 1.17 headers. The C program is generated from the list below
//! (C name, Rust type, C field = Rust field), compiled with `cc` against
//! `<rdma/fabric.h>` and run; its `sizeof`/`_Alignof`/`offsetof` must equal the Rust ones
//! (`ofi_testkit::c_layout`).

mod common;

use std::mem::size_of;

use ofi::abi::raw::{
    AtomicAttr, CqDataEntry, CqEntry, CqErrEntry, CqMsgEntry, CqTaggedEntry, Ioc, Iov, Msg,
    MsgAtomic, MsgRma, MsgTagged, RawCntrAttr, RawCqAttr, RawEqAttr, RawWaitAttr, RmaIoc, RmaIov,
};
use ofi_capi::av::{FiAvAttr, FiOpsAv, FidAv};
use ofi_capi::endpoint::{
    FiAlias, FiOpsAtomic, FiOpsCm, FiOpsCollective, FiOpsEp, FiOpsMsg, FiOpsRma, FiOpsTagged,
    FidEp, FidMc, FidPep,
};
use ofi_capi::fid::{FiOps, Fid};
use ofi_capi::info::{
    FiBusAttr, FiDeviceAttr, FiDomainAttr, FiEpAttr, FiFabricAttr, FiInfo, FiLinkAttr, FiPciAttr,
    FiRxAttr, FiTxAttr, FidNic,
};
use ofi_capi::obj::{FiMrAttr, FiMrModify, FiOpsFabric, FiOpsMr, FidDomain, FidFabric, FidMr};
use ofi_capi::params::{FiParam, FiProviderHead};
use ofi_capi::queues::{
    FiEqCmEntry, FiEqEntry, FiEqErrEntry, FiOpsCntr, FiOpsCq, FiOpsDomain, FiOpsEq, FidCntr, FidCq,
    FidEq,
};
use ofi_capi::sets::{FiOpsPoll, FiOpsWait, FidPoll, FidWait};
use ofi_testkit::c_layout::{assert_probe_output, probe_program, Layout};
use ofi_testkit::layout;

fn layouts() -> Vec<Layout> {
    vec![
        layout!("struct fid" = Fid { "fclass" = fclass, "context" = context, "ops" = ops }),
        layout!("struct fi_ops" = FiOps {
            "size" = size, "close" = close, "bind" = bind, "control" = control,
            "ops_open" = ops_open, "tostr" = tostr, "ops_set" = ops_set,
        }),
        layout!("struct fi_tx_attr" = FiTxAttr {
            "caps" = caps, "mode" = mode, "op_flags" = op_flags, "msg_order" = msg_order,
            "comp_order" = comp_order, "inject_size" = inject_size, "size" = size,
            "iov_limit" = iov_limit, "rma_iov_limit" = rma_iov_limit, "tclass" = tclass,
        }),
        layout!("struct fi_rx_attr" = FiRxAttr {
            "caps" = caps, "mode" = mode, "op_flags" = op_flags, "msg_order" = msg_order,
            "comp_order" = comp_order, "total_buffered_recv" = total_buffered_recv,
            "size" = size, "iov_limit" = iov_limit,
        }),
        layout!("struct fi_ep_attr" = FiEpAttr {
            "type" = ep_type, "protocol" = protocol, "protocol_version" = protocol_version,
            "max_msg_size" = max_msg_size, "msg_prefix_size" = msg_prefix_size,
            "max_order_raw_size" = max_order_raw_size,
            "max_order_war_size" = max_order_war_size,
            "max_order_waw_size" = max_order_waw_size, "mem_tag_format" = mem_tag_format,
            "tx_ctx_cnt" = tx_ctx_cnt, "rx_ctx_cnt" = rx_ctx_cnt,
            "auth_key_size" = auth_key_size, "auth_key" = auth_key,
        }),
        layout!("struct fi_domain_attr" = FiDomainAttr {
            "domain" = domain, "name" = name, "threading" = threading,
            "control_progress" = control_progress, "data_progress" = data_progress,
            "resource_mgmt" = resource_mgmt, "av_type" = av_type, "mr_mode" = mr_mode,
            "mr_key_size" = mr_key_size, "cq_data_size" = cq_data_size, "cq_cnt" = cq_cnt,
            "ep_cnt" = ep_cnt, "tx_ctx_cnt" = tx_ctx_cnt, "rx_ctx_cnt" = rx_ctx_cnt,
            "max_ep_tx_ctx" = max_ep_tx_ctx, "max_ep_rx_ctx" = max_ep_rx_ctx,
            "max_ep_stx_ctx" = max_ep_stx_ctx, "max_ep_srx_ctx" = max_ep_srx_ctx,
            "cntr_cnt" = cntr_cnt, "mr_iov_limit" = mr_iov_limit, "caps" = caps,
            "mode" = mode, "auth_key" = auth_key, "auth_key_size" = auth_key_size,
            "max_err_data" = max_err_data, "mr_cnt" = mr_cnt, "tclass" = tclass,
        }),
        layout!("struct fi_fabric_attr" = FiFabricAttr {
            "fabric" = fabric, "name" = name, "prov_name" = prov_name,
            "prov_version" = prov_version, "api_version" = api_version,
        }),
        layout!("struct fi_device_attr" = FiDeviceAttr {
            "name" = name, "device_id" = device_id, "device_version" = device_version,
            "vendor_id" = vendor_id, "driver" = driver, "firmware" = firmware,
        }),
        layout!("struct fi_pci_attr" = FiPciAttr {
            "domain_id" = domain_id, "bus_id" = bus_id, "device_id" = device_id,
            "function_id" = function_id,
        }),
        layout!("struct fi_bus_attr" = FiBusAttr { "bus_type" = bus_type, "attr.pci" = pci }),
        layout!("struct fi_link_attr" = FiLinkAttr {
            "address" = address, "mtu" = mtu, "speed" = speed, "state" = state,
            "network_type" = network_type,
        }),
        layout!("struct fid_nic" = FidNic {
            "fid" = fid, "device_attr" = device_attr, "bus_attr" = bus_attr,
            "link_attr" = link_attr, "prov_attr" = prov_attr,
        }),
        layout!("struct fi_info" = FiInfo {
            "next" = next, "caps" = caps, "mode" = mode, "addr_format" = addr_format,
            "src_addrlen" = src_addrlen, "dest_addrlen" = dest_addrlen,
            "src_addr" = src_addr, "dest_addr" = dest_addr, "handle" = handle,
            "tx_attr" = tx_attr, "rx_attr" = rx_attr, "ep_attr" = ep_attr,
            "domain_attr" = domain_attr, "fabric_attr" = fabric_attr, "nic" = nic,
        }),
        layout!("struct fi_param" = FiParam {
            "name" = name, "type" = ty, "help_string" = help_string, "value" = value,
        }),
        // Objects and their tables.
        layout!("struct fid_fabric" = FidFabric { "fid" = fid, "ops" = ops, "api_version" = api_version }),
        layout!("struct fi_ops_fabric" = FiOpsFabric {
            "size" = size, "domain" = domain, "passive_ep" = passive_ep, "eq_open" = eq_open,
            "wait_open" = wait_open, "trywait" = trywait, "domain2" = domain2,
        }),
        layout!("struct fid_domain" = FidDomain { "fid" = fid, "ops" = ops, "mr" = mr }),
        layout!("struct fi_ops_domain" = FiOpsDomain {
            "size" = size, "av_open" = av_open, "cq_open" = cq_open, "endpoint" = endpoint,
            "scalable_ep" = scalable_ep, "cntr_open" = cntr_open, "poll_open" = poll_open,
            "stx_ctx" = stx_ctx, "srx_ctx" = srx_ctx, "query_atomic" = query_atomic,
            "query_collective" = query_collective, "endpoint2" = endpoint2,
        }),
        layout!("struct fi_ops_mr" = FiOpsMr { "size" = size, "reg" = reg, "regv" = regv, "regattr" = regattr }),
        layout!("struct fid_mr" = FidMr { "fid" = fid, "mem_desc" = mem_desc, "key" = key }),
        layout!("struct fi_mr_attr" = FiMrAttr {
            "mr_iov" = mr_iov, "iov_count" = iov_count, "access" = access, "offset" = offset,
            "requested_key" = requested_key, "context" = context,
            "auth_key_size" = auth_key_size, "auth_key" = auth_key, "iface" = iface,
            "device" = device,
        }),
        layout!("struct fi_av_attr" = FiAvAttr {
            "type" = av_type, "rx_ctx_bits" = rx_ctx_bits, "count" = count,
            "ep_per_node" = ep_per_node, "name" = name, "map_addr" = map_addr, "flags" = flags,
        }),
        layout!("struct fid_av" = FidAv { "fid" = fid, "ops" = ops }),
        layout!("struct fi_ops_av" = FiOpsAv {
            "size" = size, "insert" = insert, "insertsvc" = insertsvc, "insertsym" = insertsym,
            "remove" = remove, "lookup" = lookup, "straddr" = straddr, "av_set" = av_set,
        }),
        layout!("struct fi_cq_attr" = RawCqAttr {
            "size" = size, "flags" = flags, "format" = format, "wait_obj" = wait_obj,
            "signaling_vector" = signaling_vector, "wait_cond" = wait_cond,
            "wait_set" = wait_set,
        }),
        layout!("struct fid_cq" = FidCq { "fid" = fid, "ops" = ops }),
        layout!("struct fi_wait_attr" = RawWaitAttr { "wait_obj" = wait_obj, "flags" = flags }),
        layout!("struct fid_wait" = FidWait { "fid" = fid, "ops" = ops }),
        layout!("struct fi_alias" = FiAlias { "fid" = fid, "flags" = flags }),
        layout!("struct fi_mr_modify" = FiMrModify { "flags" = flags, "attr" = attr }),
        layout!("struct fid_mc" = FidMc { "fid" = fid, "fi_addr" = fi_addr }),
        layout!("struct fi_ops_wait" = FiOpsWait { "size" = size, "wait" = wait }),
        layout!("struct fid_poll" = FidPoll { "fid" = fid, "ops" = ops }),
        layout!("struct fi_ops_poll" = FiOpsPoll {
            "size" = size, "poll" = poll, "poll_add" = poll_add, "poll_del" = poll_del,
        }),
        layout!("struct fi_ops_cq" = FiOpsCq {
            "size" = size, "read" = read, "readfrom" = readfrom, "readerr" = readerr,
            "sread" = sread, "sreadfrom" = sreadfrom, "signal" = signal, "strerror" = strerror,
        }),
        layout!("struct fi_cq_entry" = CqEntry { "op_context" = op_context }),
        layout!("struct fi_cq_msg_entry" = CqMsgEntry { "op_context" = op_context, "flags" = flags, "len" = len }),
        layout!("struct fi_cq_data_entry" = CqDataEntry {
            "op_context" = op_context, "flags" = flags, "len" = len, "buf" = buf, "data" = data,
        }),
        layout!("struct fi_cq_tagged_entry" = CqTaggedEntry {
            "op_context" = op_context, "flags" = flags, "len" = len, "buf" = buf, "data" = data,
            "tag" = tag,
        }),
        layout!("struct fi_cq_err_entry" = CqErrEntry {
            "op_context" = op_context, "flags" = flags, "len" = len, "buf" = buf, "data" = data,
            "tag" = tag, "olen" = olen, "err" = err, "prov_errno" = prov_errno,
            "err_data" = err_data, "err_data_size" = err_data_size,
        }),
        layout!("struct fi_eq_attr" = RawEqAttr {
            "size" = size, "flags" = flags, "wait_obj" = wait_obj,
            "signaling_vector" = signaling_vector, "wait_set" = wait_set,
        }),
        layout!("struct fid_eq" = FidEq { "fid" = fid, "ops" = ops }),
        layout!("struct fi_ops_eq" = FiOpsEq {
            "size" = size, "read" = read, "readerr" = readerr, "write" = write, "sread" = sread,
            "strerror" = strerror,
        }),
        layout!("struct fi_eq_entry" = FiEqEntry { "fid" = fid, "context" = context, "data" = data }),
        layout!("struct fi_eq_cm_entry" = FiEqCmEntry { "fid" = fid, "info" = info }),
        layout!("struct fi_eq_err_entry" = FiEqErrEntry {
            "fid" = fid, "context" = context, "data" = data, "err" = err,
            "prov_errno" = prov_errno, "err_data" = err_data, "err_data_size" = err_data_size,
        }),
        layout!("struct fi_cntr_attr" = RawCntrAttr {
            "events" = events, "wait_obj" = wait_obj, "wait_set" = wait_set, "flags" = flags,
        }),
        layout!("struct fid_cntr" = FidCntr { "fid" = fid, "ops" = ops }),
        layout!("struct fi_ops_cntr" = FiOpsCntr {
            "size" = size, "read" = read, "readerr" = readerr, "add" = add, "set" = set,
            "wait" = wait, "adderr" = adderr, "seterr" = seterr,
        }),
        layout!("struct fid_ep" = FidEp {
            "fid" = fid, "ops" = ops, "cm" = cm, "msg" = msg, "rma" = rma, "tagged" = tagged,
            "atomic" = atomic, "collective" = collective,
        }),
        layout!("struct fid_pep" = FidPep { "fid" = fid, "ops" = ops, "cm" = cm }),
        layout!("struct fi_ops_ep" = FiOpsEp {
            "size" = size, "cancel" = cancel, "getopt" = getopt, "setopt" = setopt,
            "tx_ctx" = tx_ctx, "rx_ctx" = rx_ctx, "rx_size_left" = rx_size_left,
            "tx_size_left" = tx_size_left,
        }),
        layout!("struct fi_ops_cm" = FiOpsCm {
            "size" = size, "setname" = setname, "getname" = getname, "getpeer" = getpeer,
            "connect" = connect, "listen" = listen, "accept" = accept, "reject" = reject,
            "shutdown" = shutdown, "join" = join,
        }),
        layout!("struct fi_ops_msg" = FiOpsMsg {
            "size" = size, "recv" = recv, "recvv" = recvv, "recvmsg" = recvmsg, "send" = send,
            "sendv" = sendv, "sendmsg" = sendmsg, "inject" = inject, "senddata" = senddata,
            "injectdata" = injectdata,
        }),
        layout!("struct fi_ops_tagged" = FiOpsTagged {
            "size" = size, "recv" = trecv, "recvv" = trecvv, "recvmsg" = trecvmsg,
            "send" = tsend, "sendv" = tsendv, "sendmsg" = tsendmsg, "inject" = tinject,
            "senddata" = tsenddata, "injectdata" = tinjectdata,
        }),
        layout!("struct fi_ops_rma" = FiOpsRma {
            "size" = size, "read" = read, "readv" = readv, "readmsg" = readmsg, "write" = write,
            "writev" = writev, "writemsg" = writemsg, "inject" = inject_write,
            "writedata" = writedata, "injectdata" = inject_writedata,
        }),
        layout!("struct fi_ops_atomic" = FiOpsAtomic {
            "size" = size, "write" = atomic, "writev" = atomicv, "writemsg" = atomicmsg,
            "inject" = inject_atomic, "readwrite" = fetch_atomic, "readwritev" = fetch_atomicv,
            "readwritemsg" = fetch_atomicmsg, "compwrite" = compare_atomic,
            "compwritev" = compare_atomicv, "compwritemsg" = compare_atomicmsg,
            "writevalid" = writevalid,
            "readwritevalid" = readwritevalid, "compwritevalid" = compwritevalid,
        }),
        layout!("struct fi_ops_collective" = FiOpsCollective { "size" = size, "barrier" = slots }),
        // The message structures the data calls pass through untouched.
        layout!("struct iovec" = Iov { "iov_base" = base, "iov_len" = len }),
        layout!("struct fi_ioc" = Ioc { "addr" = addr, "count" = count }),
        layout!("struct fi_rma_iov" = RmaIov { "addr" = addr, "len" = len, "key" = key }),
        layout!("struct fi_rma_ioc" = RmaIoc { "addr" = addr, "count" = count, "key" = key }),
        layout!("struct fi_msg" = Msg {
            "msg_iov" = msg_iov, "desc" = desc, "iov_count" = iov_count, "addr" = addr,
            "context" = context, "data" = data,
        }),
        layout!("struct fi_msg_tagged" = MsgTagged {
            "msg_iov" = msg_iov, "desc" = desc, "iov_count" = iov_count, "addr" = addr,
            "tag" = tag, "ignore" = ignore, "context" = context, "data" = data,
        }),
        layout!("struct fi_msg_rma" = MsgRma {
            "msg_iov" = msg_iov, "desc" = desc, "iov_count" = iov_count, "addr" = addr,
            "rma_iov" = rma_iov, "rma_iov_count" = rma_iov_count, "context" = context,
            "data" = data,
        }),
        layout!("struct fi_msg_atomic" = MsgAtomic {
            "msg_iov" = msg_iov, "desc" = desc, "iov_count" = iov_count, "addr" = addr,
            "rma_iov" = rma_iov, "rma_iov_count" = rma_iov_count, "datatype" = datatype,
            "op" = op, "context" = context, "data" = data,
        }),
        layout!("struct fi_atomic_attr" = AtomicAttr { "count" = count, "size" = size }),
        // Read only up to `name`: its size is not compared.
        layout!("struct fi_provider" = FiProviderHead {
            "version" = version, "fi_version" = fi_version, "context" = context,
            "name" = name,
        })
        .prefix_only(),
    ]
}

/// The headers the probe includes.
const INCLUDES: &str = "#include <sys/uio.h>\n#include <rdma/fabric.h>\n\
    #include <rdma/fi_domain.h>\n#include <rdma/fi_endpoint.h>\n#include <rdma/fi_cm.h>\n\
    #include <rdma/fi_eq.h>\n#include <rdma/fi_rma.h>\n#include <rdma/fi_tagged.h>\n\
    #include <rdma/fi_atomic.h>\n#include <rdma/fi_collective.h>\n\
    #include <rdma/providers/fi_prov.h>\n";

#[test]
fn rust_layouts_match_the_installed_headers() {
    let (src, expected) = probe_program(INCLUDES, &layouts(), &[]);
    let Some(mut probe) = common::c_program("layout", &src) else {
        return;
    };
    let out = probe.output().expect("run layout probe");
    assert!(out.status.success());
    assert_probe_output(&String::from_utf8_lossy(&out.stdout), &expected);
    // Every slot of a table built here is set (never a null pointer).
    let ops = FiOps::with_close(dummy_close);
    assert!(ops.close.is_some() && ops.bind.is_some() && ops.control.is_some());
    assert!(ops.ops_open.is_some() && ops.tostr.is_some() && ops.ops_set.is_some());
    assert_eq!(ops.size, size_of::<FiOps>());
}

unsafe extern "C" fn dummy_close(_: *mut Fid) -> std::ffi::c_int {
    0
}
