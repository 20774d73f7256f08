//! `FI_SHARED_AV` (fi_av(3) `attr.name`, `FI_READ`): a named AV opened again by name
//! with `FI_READ` (here from a second domain; the providers' own tests do it from
//! another process) is a read-only view in which the creator's `fi_addr_t`s name the
//! same addresses, and an endpoint bound to the view reaches them.

use ofi::av::AvAttr;
use ofi::AvFlags;

use crate::fixture::{self, unenabled_peer_on};
use crate::Subject;

fn named(name: &str, flags: AvFlags) -> AvAttr {
    AvAttr {
        name: Some(name.to_string()),
        flags,
        ..AvAttr::default()
    }
}

/// The view resolves the creator's `fi_addr_t` to the same address, refuses inserts,
/// and carries a message to the creator's endpoint; once the creator's AV is closed
/// the name opens no more.
pub fn shared_av_view_resolves_and_sends(s: &Subject) {
    let info = fixture::msg_info(s);
    let (fabric, domain) = fixture::open_domain(s, &info);
    // One name per run: suites of one process (linked in, plugin) run side by side.
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("conf{}-{run}", std::process::id());
    let av = domain
        .av_open(&named(&name, AvFlags::empty()))
        .unwrap_or_else(|e| panic!("fi_av_open named {name:?}: {e}"));
    let (ep_a, cq_a) = unenabled_peer_on(&domain, &info, &av);
    ep_a.enable().unwrap_or_else(|e| panic!("fi_enable: {e}"));
    let me = fixture::name_of(&ep_a, &info);
    let fa = av
        .insert(std::slice::from_ref(&me))
        .unwrap_or_else(|e| panic!("fi_av_insert into the named AV: {e}"))[0];

    let other = fabric
        .domain(&info)
        .unwrap_or_else(|e| panic!("second fi_domain: {e}"));
    let view = other
        .av_open(&named(&name, AvFlags::READ))
        .unwrap_or_else(|e| panic!("fi_av_open {name:?} with FI_READ: {e}"));
    let seen = view
        .lookup(fa)
        .unwrap_or_else(|e| panic!("fi_av_lookup({fa:#x}) in the view: {e}"));
    assert_eq!(
        seen, me,
        "the view names the creator's fi_addr_t {fa:#x} alike"
    );
    assert!(
        view.insert(std::slice::from_ref(&me)).is_err(),
        "an insert into a read-only (FI_READ) AV succeeded"
    );
    let (ep_b, cq_b) = unenabled_peer_on(&other, &info, &view);
    ep_b.enable().unwrap_or_else(|e| panic!("fi_enable: {e}"));
    let mut got = [0u8; 16];
    fixture::post_recv(&ep_a, &mut got, 0xa1).expect("recv");
    fixture::send(&ep_b, b"via shared av", fa, 0xb1).expect("send through the view");
    let sent = fixture::wait_ok(&cq_b, "the send through the view");
    assert_eq!(sent.op_context, 0xb1);
    assert_eq!(fixture::wait_ok(&cq_a, "the receive").op_context, 0xa1);
    assert_eq!(&got[..13], b"via shared av");
    drop((ep_b, cq_b, view, ep_a, cq_a, av));
    assert!(
        other.av_open(&named(&name, AvFlags::READ)).is_err(),
        "the name still opens after its creator's AV closed"
    );
    drop(other);
    fixture::close_domain(fabric, domain);
}
