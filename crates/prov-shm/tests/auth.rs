//! Authorization keys, the receiver's side: a sender that skips the check of the
//! region's tag (as a hostile or foreign process could) and writes its messages into
//! a ring under another tag is left unread, while a sender with the right tag on a
//! ring written the same way is read. The conformance area `auth-key` covers the
//! sender's side (a send to an endpoint of another key fails and delivers nothing).

use std::sync::atomic::Ordering;

use ofi::{AddrFormat, Address, Caps, EpType, GetinfoFlags};
use ofi_conformance::pair::{Pair, PairSpec};
use ofi_conformance::Subject;
use ofi_kit::auth::AuthTag;
use ofi_prov_shm::proto::{self, Body, Slot};
use ofi_prov_shm::region::{state, Region, SLOT_SIZE};
use ofi_prov_shm::ring::Producer;

const KEY: &[u8] = b"receiver-side";

/// Claim ring `r` of `region` as sender `token`, under `tag`, and publish one inline
/// message `msg` on it.
fn forge(region: &Region, r: usize, token: u64, tag: AuthTag, msg: &[u8]) {
    let ring = region.ring(r);
    ring.claim()
        .compare_exchange(0, token, Ordering::AcqRel, Ordering::Relaxed)
        .expect("claim the ring");
    ring.write_identity(std::process::id() as i32, "ofi-shm-forged", 0, 0);
    ring.write_auth(tag);
    ring.state().store(state::READY, Ordering::Release);
    region.claims_gen().fetch_add(1, Ordering::AcqRel);
    let slot = Slot {
        flags: 0,
        tag: 0,
        data: 0,
        body: Body::Inline {
            len: msg.len(),
            id: 0,
        },
    };
    let mut raw = [0u8; SLOT_SIZE];
    slot.emit(&mut proto::SlotHeader::new_checked(&mut raw[..]).unwrap())
        .unwrap();
    raw[proto::INLINE_OFF..proto::INLINE_OFF + msg.len()].copy_from_slice(msg);
    let mut p = Producer::new(region.geometry().slots, 0);
    let i = p.reserve(&ring).unwrap().unwrap();
    region.map().write_bytes(ring.slot_off(i) + 8, &raw[8..]);
    p.publish(&ring);
}

#[test]
fn a_ring_of_another_tag_is_left_unread() {
    let shm = ofi::abi::entry_for::<ofi_prov_shm::ShmProvider>();
    let s = Subject::new(ofi_conformance::plugin::linked_registry(&[shm]), "shm");
    let mut hints = s
        .base_hints()
        .with_ep_type(EpType::Rdm)
        .with_caps(Caps::MSG);
    hints.domain_attr.auth_key = Some(KEY.to_vec());
    let info = s.getinfo_with(Some(hints), GetinfoFlags::empty()).unwrap()[0].clone();
    let pair = Pair::with_info(&s, &PairSpec::new(EpType::Rdm, Caps::MSG), info);
    let Address::Str(b_name) =
        Address::from_bytes(AddrFormat::STR, &pair.b.ep.getname().unwrap()).unwrap()
    else {
        panic!("a string address")
    };
    let b_region = Region::open_peer(b_name.strip_prefix("fi_shm://").unwrap()).unwrap();
    assert_eq!(b_region.auth(), AuthTag::of(Some(KEY)));

    forge(
        &b_region,
        0,
        0x1111_0001,
        AuthTag::of(Some(b"intruder")),
        b"bad",
    );
    let mut got = [0u8; 8];
    ofi_conformance::fixture::post_recv(&pair.b.ep, &mut got, 0xb1).unwrap();
    forge(&b_region, 1, 0x2222_0001, AuthTag::of(Some(KEY)), b"ok");
    let e = pair.wait_ok(1, "the message under the right tag");
    assert_eq!((e.op_context, e.len), (0xb1, 2));
    assert_eq!(&got[..2], b"ok");
    let mut more = [0u8; 8];
    ofi_conformance::fixture::post_recv(&pair.b.ep, &mut more, 0xb2).unwrap();
    pair.assert_quiet(1, 100, "the ring of another tag");
    assert_eq!(b_region.ring(0).tail_word().load(Ordering::Acquire), 0);
}
