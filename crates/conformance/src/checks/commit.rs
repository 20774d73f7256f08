//! `FI_COMMIT_COMPLETE` (fi_endpoint(3) operation flags, fi_cq(3) completion levels):
//! a completion not generated until the result has been made persistent at the target.
//!
//! What the suite can observe is the part every commit-complete operation shares with
//! delivery complete: when the initiator reads the completion, the target already holds
//! the data. For memory registered as persistent (`FI_RMA_PMEM`) a provider must also
//! have flushed it; no in-tree provider offers such memory, so the checks target
//! ordinary registrations and receive buffers, where commit complete is exactly
//! delivery complete. The two endpoints of a pair live in this process, so "the target
//! reads its memory" is a read of the target's buffer right after the initiator's
//! completion, with no progress driven in between.

use ofi::abi::raw::RmaIov;
use ofi::registry::Registry;
use ofi::{Caps, EpType, Info, OpFlags, API_VERSION};

use crate::checks::control::level_as_default;
use crate::checks::pairs::check_recv;
use crate::checks::rma::{msg_rma, Region};
use crate::fixture::{pattern, post_recv, sendmsg};
use crate::pair::each_pair_where;
use crate::Subject;

/// Whether the provider of `info` offers `FI_COMMIT_COMPLETE` (what claims
/// [`crate::Capability::CommitComplete`]): getinfo answers hints asking for it in
/// `tx_attr.op_flags` on a reliable type (`FI_EP_RDM` or `FI_EP_MSG`) with `FI_MSG`.
pub fn takes_commit_complete(registry: &Registry, info: &Info) -> Result<(), String> {
    let asks = |t: EpType| {
        let mut h = Info::hints().with_ep_type(t).with_caps(Caps::MSG);
        h.fabric_attr
            .prov_name
            .clone_from(&info.fabric_attr.prov_name);
        h.tx_attr.op_flags = OpFlags::COMPLETION | OpFlags::COMMIT_COMPLETE;
        let req = ofi::getinfo::GetinfoRequest {
            hints: Some(h),
            ..ofi::getinfo::GetinfoRequest::new(API_VERSION)
        };
        registry.getinfo(&req).is_ok_and(|v| !v.is_empty())
    };
    if [EpType::Rdm, EpType::Msg].into_iter().any(asks) {
        Ok(())
    } else {
        Err("getinfo with FI_COMMIT_COMPLETE in tx_attr.op_flags answers nothing on a reliable type".into())
    }
}

/// The results the checks run on: reliable types (every one of them must honour
/// `FI_COMMIT_COMPLETE` once the provider claims the area).
fn reliable(i: &Info) -> bool {
    i.ep_type() != EpType::Dgram
}

/// `fi_sendmsg` with `FI_COMMIT_COMPLETE` into a receive posted before it: when the
/// send's completion is read, the data is in the receive buffer. With `FI_RMA`,
/// `fi_writemsg` with `FI_COMMIT_COMPLETE`: when its completion is read, the target's
/// memory holds the bytes, read by the target side at once.
pub fn commit_complete_send_and_write(s: &Subject) {
    let sends = each_pair_where(s, Caps::MSG, reliable, |p| {
        let payload = pattern(3000, 91);
        let mut buf = vec![0u8; 3008];
        post_recv(&p.b.ep, &mut buf, 0xc1).unwrap();
        // `payload` lives until the completion is read.
        sendmsg(&p.a.ep, &payload, p.a.peer, 0xc0, OpFlags::COMMIT_COMPLETE)
            .unwrap_or_else(|e| panic!("fi_sendmsg(FI_COMMIT_COMPLETE): {e} ({})", e.code()));
        assert_eq!(p.wait_ok(0, "the commit-complete send").op_context, 0xc0);
        assert!(
            buf[..3000] == payload[..],
            "FI_COMMIT_COMPLETE send completed before the data was delivered"
        );
        check_recv(&p.wait_ok(1, "the receive"), 0xc1, &payload, &buf);
    });
    assert!(sends > 0, "no reliable endpoint type with FI_MSG");
    each_pair_where(s, Caps::MSG | Caps::RMA, reliable, |p| {
        let target = Region::new(&p, 1, 4096, 0, OpFlags::REMOTE_WRITE, 0x7c);
        let mut local = Region::new(&p, 0, 4096, 0, OpFlags::WRITE, 0x7d);
        let data = pattern(2500, 92);
        local.set(0, &data);
        let iov = [local.iov(0, data.len())];
        let desc = [local.mr.desc()];
        let rma: [RmaIov; 1] = [target.rma_iov(100, data.len())];
        let msg = msg_rma(&p, &iov, &desc, &rma, 0xc2);
        // SAFETY: every buffer `msg` points into lives until the completion is read.
        unsafe { p.a.ep.writemsg(&msg, OpFlags::COMMIT_COMPLETE.bits()) }
            .unwrap_or_else(|e| panic!("fi_writemsg(FI_COMMIT_COMPLETE): {e} ({})", e.code()));
        assert_eq!(p.wait_ok(0, "the commit-complete write").op_context, 0xc2);
        assert!(
            target.bytes()[100..100 + data.len()] == data[..],
            "FI_COMMIT_COMPLETE write completed before the target held the data"
        );
    });
}

/// `FI_COMMIT_COMPLETE` as a default: hints asking for it in `tx_attr.op_flags` are
/// answered (not `FI_ENODATA`) on every reliable type, and a plain `fi_send` of an
/// endpoint opened with the answer completes only once the data is delivered.
pub fn commit_complete_as_default(s: &Subject) {
    let types = s.claimed().types_where(Caps::MSG, reliable);
    let offered = types.len();
    let ran = level_as_default(s, OpFlags::COMMIT_COMPLETE, types);
    assert_eq!(
        ran, offered,
        "a reliable type refused FI_COMMIT_COMPLETE as a default"
    );
}
