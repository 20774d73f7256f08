//! Layout: every rdma-core structure mirrored in `ofi_rdma::sys::ffi` and every enum
//! value of the interface, compared with the installed `<infiniband/verbs.h>`. The C
//! program is generated from the lists below, compiled with `cc` and run; its
//! `sizeof`/`offsetof`/values must equal the Rust ones. Skipped (with a line saying so)
//! when the header is not installed (`libibverbs-dev`).

use std::mem::offset_of;

use ofi_testkit::c_layout::{check_installed_header, Layout};
use ofi_testkit::layout;

use ofi_rdma::sys::efadv::{EfadvCq, EfadvCqInitAttr};
use ofi_rdma::sys::ffi::*;
use ofi_rdma::*;

fn layouts() -> Vec<Layout> {
    vec![
        layout!("struct ibv_device" = IbvDevice {
            "_ops" = _ops, "node_type" = node_type, "transport_type" = transport_type,
            "name" = name, "dev_name" = dev_name, "dev_path" = dev_path, "ibdev_path" = ibdev_path,
        }),
        layout!("struct ibv_context_ops" = IbvContextOps {
            "alloc_mw" = alloc_mw, "bind_mw" = bind_mw, "dealloc_mw" = dealloc_mw,
            "poll_cq" = poll_cq, "req_notify_cq" = req_notify_cq,
            "post_srq_recv" = post_srq_recv, "post_send" = post_send, "post_recv" = post_recv,
            "_compat_async_event" = _compat_async_event,
        }),
        layout!("struct ibv_context" = IbvContext {
            "device" = device, "ops" = ops, "cmd_fd" = cmd_fd, "async_fd" = async_fd,
            "num_comp_vectors" = num_comp_vectors, "mutex" = mutex, "abi_compat" = abi_compat,
        }),
        layout!("struct ibv_device_attr" = IbvDeviceAttr {
            "fw_ver" = fw_ver, "node_guid" = node_guid, "sys_image_guid" = sys_image_guid,
            "max_mr_size" = max_mr_size, "page_size_cap" = page_size_cap,
            "vendor_id" = vendor_id, "vendor_part_id" = vendor_part_id, "hw_ver" = hw_ver,
            "max_qp" = max_qp, "max_qp_wr" = max_qp_wr, "device_cap_flags" = device_cap_flags,
            "max_sge" = max_sge, "max_sge_rd" = max_sge_rd, "max_cq" = max_cq,
            "max_cqe" = max_cqe, "max_mr" = max_mr, "max_pd" = max_pd,
            "max_qp_rd_atom" = max_qp_rd_atom, "max_ee_rd_atom" = max_ee_rd_atom,
            "max_res_rd_atom" = max_res_rd_atom, "max_qp_init_rd_atom" = max_qp_init_rd_atom,
            "max_ee_init_rd_atom" = max_ee_init_rd_atom, "atomic_cap" = atomic_cap,
            "max_ee" = max_ee, "max_rdd" = max_rdd, "max_mw" = max_mw,
            "max_raw_ipv6_qp" = max_raw_ipv6_qp, "max_raw_ethy_qp" = max_raw_ethy_qp,
            "max_mcast_grp" = max_mcast_grp, "max_mcast_qp_attach" = max_mcast_qp_attach,
            "max_total_mcast_qp_attach" = max_total_mcast_qp_attach, "max_ah" = max_ah,
            "max_fmr" = max_fmr, "max_map_per_fmr" = max_map_per_fmr, "max_srq" = max_srq,
            "max_srq_wr" = max_srq_wr, "max_srq_sge" = max_srq_sge, "max_pkeys" = max_pkeys,
            "local_ca_ack_delay" = local_ca_ack_delay, "phys_port_cnt" = phys_port_cnt,
        }),
        layout!("struct ibv_port_attr" = IbvPortAttr {
            "state" = state, "max_mtu" = max_mtu, "active_mtu" = active_mtu,
            "gid_tbl_len" = gid_tbl_len, "port_cap_flags" = port_cap_flags,
            "max_msg_sz" = max_msg_sz, "bad_pkey_cntr" = bad_pkey_cntr,
            "qkey_viol_cntr" = qkey_viol_cntr, "pkey_tbl_len" = pkey_tbl_len, "lid" = lid,
            "sm_lid" = sm_lid, "lmc" = lmc, "max_vl_num" = max_vl_num, "sm_sl" = sm_sl,
            "subnet_timeout" = subnet_timeout, "init_type_reply" = init_type_reply,
            "active_width" = active_width, "active_speed" = active_speed,
            "phys_state" = phys_state, "link_layer" = link_layer, "flags" = flags,
            "port_cap_flags2" = port_cap_flags2,
        }),
        layout!("struct ibv_pd" = IbvPd { "context" = context, "handle" = handle }),
        layout!("struct ibv_mr" = IbvMr {
            "context" = context, "pd" = pd, "addr" = addr, "length" = length,
            "handle" = handle, "lkey" = lkey, "rkey" = rkey,
        }),
        layout!("struct ibv_comp_channel" = IbvCompChannel {
            "context" = context, "fd" = fd, "refcnt" = refcnt,
        }),
        layout!("struct ibv_cq" = IbvCq {
            "context" = context, "channel" = channel, "cq_context" = cq_context,
            "handle" = handle, "cqe" = cqe, "mutex" = mutex, "cond" = cond,
            "comp_events_completed" = comp_events_completed,
            "async_events_completed" = async_events_completed,
        }),
        layout!("struct ibv_srq" = IbvSrq {
            "context" = context, "srq_context" = srq_context, "pd" = pd, "handle" = handle,
            "mutex" = mutex, "cond" = cond, "events_completed" = events_completed,
        }),
        layout!("struct ibv_qp" = IbvQp {
            "context" = context, "qp_context" = qp_context, "pd" = pd, "send_cq" = send_cq,
            "recv_cq" = recv_cq, "srq" = srq, "handle" = handle, "qp_num" = qp_num,
            "state" = state, "qp_type" = qp_type, "mutex" = mutex, "cond" = cond,
            "events_completed" = events_completed,
        }),
        layout!("struct ibv_ah" = IbvAh { "context" = context, "pd" = pd, "handle" = handle }),
        layout!("struct ibv_sge" = IbvSge { "addr" = addr, "length" = length, "lkey" = lkey }),
        layout!("struct ibv_wc" = IbvWc {
            "wr_id" = wr_id, "status" = status, "opcode" = opcode, "vendor_err" = vendor_err,
            "byte_len" = byte_len, "imm_data" = imm_data, "qp_num" = qp_num,
            "src_qp" = src_qp, "wc_flags" = wc_flags, "pkey_index" = pkey_index,
            "slid" = slid, "sl" = sl, "dlid_path_bits" = dlid_path_bits,
        }),
        layout!("struct ibv_recv_wr" = IbvRecvWr {
            "wr_id" = wr_id, "next" = next, "sg_list" = sg_list, "num_sge" = num_sge,
        }),
        layout!("struct ibv_send_wr" = IbvSendWr {
            "wr_id" = wr_id, "next" = next, "sg_list" = sg_list, "num_sge" = num_sge,
            "opcode" = opcode, "send_flags" = send_flags, "imm_data" = imm_data, "wr" = wr,
            "qp_type.xrc.remote_srqn" = remote_srqn, "bind_mw" = ext,
        } + {
            "wr.rdma.remote_addr" = offset_of!(IbvSendWr, wr) + offset_of!(IbvRdmaWr, remote_addr),
            "wr.rdma.rkey" = offset_of!(IbvSendWr, wr) + offset_of!(IbvRdmaWr, rkey),
            "wr.atomic.remote_addr" = offset_of!(IbvSendWr, wr) + offset_of!(IbvAtomicWr, remote_addr),
            "wr.atomic.compare_add" = offset_of!(IbvSendWr, wr) + offset_of!(IbvAtomicWr, compare_add),
            "wr.atomic.swap" = offset_of!(IbvSendWr, wr) + offset_of!(IbvAtomicWr, swap),
            "wr.atomic.rkey" = offset_of!(IbvSendWr, wr) + offset_of!(IbvAtomicWr, rkey),
            "wr.ud.ah" = offset_of!(IbvSendWr, wr) + offset_of!(IbvUdWr, ah),
            "wr.ud.remote_qpn" = offset_of!(IbvSendWr, wr) + offset_of!(IbvUdWr, remote_qpn),
            "wr.ud.remote_qkey" = offset_of!(IbvSendWr, wr) + offset_of!(IbvUdWr, remote_qkey),
            "bind_mw.rkey" = offset_of!(IbvSendWr, ext) + offset_of!(IbvBindMwWr, rkey),
            "bind_mw.bind_info.mw_access_flags" = offset_of!(IbvSendWr, ext)
                + offset_of!(IbvBindMwWr, bind_info) + offset_of!(IbvMwBindInfo, mw_access_flags),
            "tso.mss" = offset_of!(IbvSendWr, ext) + offset_of!(IbvTsoWr, mss),
        }),
        layout!("struct ibv_global_route" = IbvGlobalRoute {
            "dgid" = dgid, "flow_label" = flow_label, "sgid_index" = sgid_index,
            "hop_limit" = hop_limit, "traffic_class" = traffic_class,
        }),
        layout!("struct ibv_ah_attr" = IbvAhAttr {
            "grh" = grh, "dlid" = dlid, "sl" = sl, "src_path_bits" = src_path_bits,
            "static_rate" = static_rate, "is_global" = is_global, "port_num" = port_num,
        }),
        layout!("struct ibv_qp_cap" = IbvQpCap {
            "max_send_wr" = max_send_wr, "max_recv_wr" = max_recv_wr,
            "max_send_sge" = max_send_sge, "max_recv_sge" = max_recv_sge,
            "max_inline_data" = max_inline_data,
        }),
        layout!("struct ibv_qp_init_attr" = IbvQpInitAttr {
            "qp_context" = qp_context, "send_cq" = send_cq, "recv_cq" = recv_cq, "srq" = srq,
            "cap" = cap, "qp_type" = qp_type, "sq_sig_all" = sq_sig_all,
        }),
        layout!("struct ibv_rx_hash_conf" = IbvRxHashConf {
            "rx_hash_function" = rx_hash_function, "rx_hash_key_len" = rx_hash_key_len,
            "rx_hash_key" = rx_hash_key, "rx_hash_fields_mask" = rx_hash_fields_mask,
        }),
        layout!("struct ibv_qp_init_attr_ex" = IbvQpInitAttrEx {
            "qp_context" = qp_context, "send_cq" = send_cq, "recv_cq" = recv_cq, "srq" = srq,
            "cap" = cap, "qp_type" = qp_type, "sq_sig_all" = sq_sig_all,
            "comp_mask" = comp_mask, "pd" = pd, "xrcd" = xrcd, "create_flags" = create_flags,
            "max_tso_header" = max_tso_header, "rwq_ind_tbl" = rwq_ind_tbl,
            "rx_hash_conf" = rx_hash_conf, "source_qpn" = source_qpn,
            "send_ops_flags" = send_ops_flags,
        }),
        layout!("struct ibv_qp_attr" = IbvQpAttr {
            "qp_state" = qp_state, "cur_qp_state" = cur_qp_state, "path_mtu" = path_mtu,
            "path_mig_state" = path_mig_state, "qkey" = qkey, "rq_psn" = rq_psn,
            "sq_psn" = sq_psn, "dest_qp_num" = dest_qp_num,
            "qp_access_flags" = qp_access_flags, "cap" = cap, "ah_attr" = ah_attr,
            "alt_ah_attr" = alt_ah_attr, "pkey_index" = pkey_index,
            "alt_pkey_index" = alt_pkey_index, "en_sqd_async_notify" = en_sqd_async_notify,
            "sq_draining" = sq_draining, "max_rd_atomic" = max_rd_atomic,
            "max_dest_rd_atomic" = max_dest_rd_atomic, "min_rnr_timer" = min_rnr_timer,
            "port_num" = port_num, "timeout" = timeout, "retry_cnt" = retry_cnt,
            "rnr_retry" = rnr_retry, "alt_port_num" = alt_port_num,
            "alt_timeout" = alt_timeout, "rate_limit" = rate_limit,
        }),
        layout!("struct ibv_srq_attr" = IbvSrqAttr {
            "max_wr" = max_wr, "max_sge" = max_sge, "srq_limit" = srq_limit,
        }),
        layout!("struct ibv_srq_init_attr" = IbvSrqInitAttr {
            "srq_context" = srq_context, "attr" = attr,
        }),
        layout!("struct ibv_async_event" = IbvAsyncEvent {
            "element" = element, "event_type" = event_type,
        }),
        layout!("union ibv_gid" = IbvGid { "raw" = raw }),
        layout!("struct ibv_poll_cq_attr" = IbvPollCqAttr { "comp_mask" = comp_mask }),
        layout!("struct ibv_cq_init_attr_ex" = IbvCqInitAttrEx {
            "cqe" = cqe, "cq_context" = cq_context, "channel" = channel,
            "comp_vector" = comp_vector, "wc_flags" = wc_flags, "comp_mask" = comp_mask,
            "flags" = flags, "parent_domain" = parent_domain,
        }),
        layout!("struct ibv_cq_ex" = IbvCqEx {
            "context" = cq, "comp_mask" = comp_mask,
            "status" = status, "wr_id" = wr_id, "start_poll" = start_poll,
            "next_poll" = next_poll, "end_poll" = end_poll, "read_opcode" = read_opcode,
            "read_vendor_err" = read_vendor_err, "read_byte_len" = read_byte_len,
            "read_imm_data" = read_imm_data, "read_qp_num" = read_qp_num,
            "read_src_qp" = read_src_qp, "read_wc_flags" = read_wc_flags,
            "read_slid" = read_slid, "read_sl" = read_sl,
            "read_dlid_path_bits" = read_dlid_path_bits,
            "read_completion_ts" = read_completion_ts, "read_cvlan" = read_cvlan,
            "read_flow_tag" = read_flow_tag, "read_tm_info" = read_tm_info,
            "read_completion_wallclock_ns" = read_completion_wallclock_ns,
        } + {
            // The head is a `struct ibv_cq` (checked above) with nothing after its end.
            "async_events_completed" = offset_of!(IbvCqEx, cq) + offset_of!(IbvCq, async_events_completed),
        }),
    ]
}

/// The libefa mirrors of extended completion queues (`ofi_rdma::sys::efadv`; the
/// efa provider's `tests/efadv_layout.rs` checks the others).
fn efadv_layouts() -> Vec<Layout> {
    vec![
        layout!("struct efadv_cq" = EfadvCq {
            "comp_mask" = comp_mask, "wc_read_sgid" = wc_read_sgid,
        }),
        layout!("struct efadv_cq_init_attr" = EfadvCqInitAttr {
            "comp_mask" = comp_mask, "wc_flags" = wc_flags,
        }),
    ]
}

/// Pushes onto `$v`, for each `$prefix $Enum [C names…]`, the C name `$prefix` + name
/// with the value of the variant at the same place in `$Enum::ALL`: the names are in the
/// enum's declaration order, and there is one for every variant.
macro_rules! enum_values {
    ($v:ident; $($prefix:literal $Enum:ident [$($name:literal),* $(,)?])*) => {$(
        let names: &[&str] = &[$($name),*];
        assert_eq!(names.len(), $Enum::ALL.len(), "the C names of {}", stringify!($Enum));
        for (n, s) in names.iter().zip($Enum::ALL) {
            $v.push((format!(concat!($prefix, "{}"), n), *s as u64));
        }
    )*};
}

/// Pushes onto `$v`, for each `$prefix $Flags`, every named flag of the bit set with the
/// C name `$prefix` + its name.
macro_rules! flag_values {
    ($v:ident; $($prefix:literal $Flags:ident)*) => {$(
        for (n, f) in $Flags::all().iter_names() {
            $v.push((format!(concat!($prefix, "{}"), n), f.bits().into()));
        }
    )*};
}

/// Every enum and flag value of the interface with its C name.
fn values() -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = Vec::new();
    enum_values! { v;
        "IBV_WC_" WcStatus [
            "SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR",
            "WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR",
            "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR", "RETRY_EXC_ERR",
            "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
            "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR",
            "GENERAL_ERR", "TM_ERR", "TM_RNDV_INCOMPLETE",
        ]
        "IBV_WC_" WcOpcode [
            "SEND", "RDMA_WRITE", "RDMA_READ", "COMP_SWAP", "FETCH_ADD", "BIND_MW",
            "LOCAL_INV", "TSO", "RECV", "RECV_RDMA_WITH_IMM",
        ]
        "IBV_WR_" WrOpcode [
            "RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ",
            "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD",
        ]
        "IBV_QPS_" QpState ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"]
        "IBV_QPT_" QpType ["RC", "UC", "UD", "DRIVER"]
        "IBV_MTU_" Mtu ["256", "512", "1024", "2048", "4096"]
        "IBV_PORT_" PortState ["NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"]
        "IBV_EVENT_" EventType [
            "CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST", "SQ_DRAINED",
            "PATH_MIG", "PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR",
            "LID_CHANGE", "PKEY_CHANGE", "SM_CHANGE", "SRQ_ERR", "SRQ_LIMIT_REACHED",
            "QP_LAST_WQE_REACHED", "CLIENT_REREGISTER", "GID_CHANGE", "WQ_FATAL",
        ]
    }
    flag_values! { v;
        "IBV_ACCESS_" Access
        "IBV_SEND_" SendFlags
        "IBV_WC_" WcFlags
        "IBV_QP_" QpAttrMask
    }
    // What SRD queue pairs are created with (`ofi_rdma::sys::efadv`).
    v.push(("IBV_QP_INIT_ATTR_PD".into(), IBV_QP_INIT_ATTR_PD.into()));
    v.push(("IBV_QPT_DRIVER".into(), IBV_QPT_DRIVER.into()));
    // What EFA's extended completion queues are created with (`sys::cq_ex`).
    v.push(("IBV_WC_STANDARD_FLAGS".into(), IBV_WC_STANDARD_FLAGS));
    v
}

#[test]
fn mirrors_and_values_match_the_installed_verbs_header() {
    check_installed_header(
        "infiniband/verbs.h",
        "libibverbs-dev",
        "verbs_layout",
        &layouts(),
        &values(),
    );
}

fn rdmacm_layouts() -> Vec<Layout> {
    use ofi_rdma::sys::rdmacm::*;
    vec![
        layout!("struct rdma_event_channel" = RdmaEventChannel { "fd" = fd }),
        layout!("struct rdma_ib_addr" = RdmaIbAddr { "sgid" = sgid, "dgid" = dgid, "pkey" = pkey }),
        layout!("struct rdma_addr" = RdmaAddr {
            "src_storage" = src_storage, "dst_storage" = dst_storage,
        } + {
            "src_addr" = offset_of!(RdmaAddr, src_storage),
            "dst_sin6" = offset_of!(RdmaAddr, dst_storage),
            "addr.ibaddr" = offset_of!(RdmaAddr, ibaddr),
        }),
        layout!("struct rdma_route" = RdmaRoute {
            "addr" = addr, "path_rec" = path_rec, "num_paths" = num_paths,
        }),
        layout!("struct rdma_cm_id" = RdmaCmId {
            "verbs" = verbs, "channel" = channel, "context" = context, "qp" = qp,
            "route" = route, "ps" = ps, "port_num" = port_num, "event" = event,
            "send_cq_channel" = send_cq_channel, "send_cq" = send_cq,
            "recv_cq_channel" = recv_cq_channel, "recv_cq" = recv_cq, "srq" = srq,
            "pd" = pd, "qp_type" = qp_type,
        }),
        layout!("struct rdma_conn_param" = RdmaConnParam {
            "private_data" = private_data, "private_data_len" = private_data_len,
            "responder_resources" = responder_resources, "initiator_depth" = initiator_depth,
            "flow_control" = flow_control, "retry_count" = retry_count,
            "rnr_retry_count" = rnr_retry_count, "srq" = srq, "qp_num" = qp_num,
        }),
        layout!("struct rdma_ud_param" = RdmaUdParam {
            "private_data" = private_data, "private_data_len" = private_data_len,
            "ah_attr" = ah_attr, "qp_num" = qp_num, "qkey" = qkey,
        }),
        layout!("struct rdma_cm_event" = RdmaCmEvent {
            "id" = id, "listen_id" = listen_id, "event" = event, "status" = status,
            "param" = param,
        } + {
            "param.conn.qp_num" = offset_of!(RdmaCmEvent, param) + offset_of!(RdmaConnParam, qp_num),
            "param.ud.qkey" = offset_of!(RdmaCmEvent, param) + offset_of!(RdmaUdParam, qkey),
        }),
    ]
}

#[test]
fn rdmacm_mirrors_match_the_installed_header() {
    use ofi_rdma::sys::rdmacm::*;
    let mut values: Vec<(String, u64)> = RDMA_CM_EVENTS
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("RDMA_CM_EVENT_{n}"), i as u64))
        .collect();
    values.push(("RDMA_PS_TCP".into(), RDMA_PS_TCP.into()));
    values.push(("RDMA_PS_UDP".into(), RDMA_PS_UDP.into()));
    check_installed_header(
        "rdma/rdma_cma.h",
        "librdmacm-dev",
        "rdmacm_layout",
        &rdmacm_layouts(),
        &values,
    );
}

#[test]
fn efa_completion_queue_mirrors_match_the_installed_efadv_header() {
    let values = [(
        "EFADV_WC_EX_WITH_SGID".to_string(),
        ofi_rdma::sys::efadv::WC_EX_WITH_SGID,
    )];
    check_installed_header(
        "infiniband/efadv.h",
        "libibverbs-dev",
        "efadv_layout",
        &efadv_layouts(),
        &values,
    );
}
