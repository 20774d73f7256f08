//! `FI_SOURCE` and `FI_SOURCE_ERR` on `FI_EP_DGRAM` (UD) over the software device: the
//! sender's name is rebuilt from the datagram's GRH, source queue pair and LID, and
//! looked up in the receiver's AV; an unknown sender gives an `FI_EADDRNOTAVAIL` error
//! completion whose `err_data` is its name (the data delivered), a known one its fabric
//! address; without `FI_SOURCE` nothing is looked up. Also: an injected datagram longer
//! than the inline size goes through a bounce buffer and arrives whole.

mod common;

use std::time::Duration;

use ofi::abi::raw::CqMsgEntry;
use ofi::cq::CompletionQueue;
use ofi::{Caps, EpType, Errno, ADDR_NOTAVAIL};
use ofi_conformance::fixture::{self, name_of, pattern, post_recv, send, wait_ok};

const WAIT: Duration = Duration::from_secs(5);

type Completion = Result<(CqMsgEntry, u64), ofi::cq::CqError>;

/// The next completion of `cq` with its source, within [`WAIT`].
fn next(cq: &CompletionQueue, what: &str) -> Completion {
    fixture::read_from_within(cq, WAIT).unwrap_or_else(|| panic!("{what}: nothing within {WAIT:?}"))
}

#[test]
fn the_source_of_a_datagram_is_its_sender() {
    let s = common::subject();
    let info = fixture::msg_info_with(&s, Caps::MSG | Caps::SOURCE | Caps::SOURCE_ERR);
    assert_eq!(info.ep_type(), EpType::Dgram);
    assert!(
        info.caps.contains(Caps::SOURCE | Caps::SOURCE_ERR),
        "{}",
        info.caps
    );
    assert!(
        info.tx_attr.inject_size >= 4096,
        "datagrams inject up to the MTU"
    );
    let (fabric, domain) = fixture::open_domain(&s, &info);
    let (ea, cqa, ava) = fixture::enabled_peer(&domain, &info);
    let (eb, cqb, avb) = fixture::enabled_peer(&domain, &info);
    let a_name = name_of(&ea, &info);
    let to_b = ava.insert(&[name_of(&eb, &info)]).unwrap()[0];

    // b does not know a yet: the data arrives, reported as an error naming a.
    let mut buf = [0u8; 64];
    post_recv(&eb, &mut buf, 1).unwrap();
    send(&ea, b"stranger", to_b, 2).unwrap();
    wait_ok(&cqa, "send to b");
    let e = next(&cqb, "from an unknown sender").expect_err("FI_SOURCE_ERR");
    assert_eq!((e.err, e.op_context, e.len), (Errno::EADDRNOTAVAIL, 1, 8));
    assert_eq!(
        e.err_data,
        a_name.to_bytes(),
        "err_data is the sender's name"
    );
    assert_eq!(&buf[..8], b"stranger");

    // Inserted, a is reported by its fabric address; an injected datagram longer
    // than the inline size (64 by default) arrives whole.
    let a_at_b = avb.insert(std::slice::from_ref(&a_name)).unwrap()[0];
    let big = pattern(3000, 7);
    let mut inbox = vec![0u8; 4096];
    post_recv(&eb, &mut inbox, 3).unwrap();
    ea.inject(&big, to_b).unwrap();
    let (r, src) = next(&cqb, "from a known sender").expect("a completion");
    assert_eq!((r.op_context, r.len, src), (3, big.len(), a_at_b));
    assert_eq!(&inbox[..big.len()], &big[..]);

    drop((ea, eb, cqa, cqb, ava, avb));
    fixture::close_domain(fabric, domain);
}

#[test]
fn without_fi_source_nothing_is_looked_up() {
    let s = common::subject();
    let info = fixture::msg_info_with(&s, Caps::MSG);
    assert_eq!(info.ep_type(), EpType::Dgram);
    assert!(!info.caps.contains(Caps::SOURCE), "{}", info.caps);
    let (fabric, domain) = fixture::open_domain(&s, &info);
    let (ea, cqa, ava) = fixture::enabled_peer(&domain, &info);
    let (eb, cqb, avb) = fixture::enabled_peer(&domain, &info);
    let to_b = ava.insert(&[name_of(&eb, &info)]).unwrap()[0];
    let mut buf = [0u8; 16];
    post_recv(&eb, &mut buf, 1).unwrap();
    send(&ea, b"anon", to_b, 2).unwrap();
    wait_ok(&cqa, "send to b");
    let (r, src) = next(&cqb, "a datagram").expect("no error without FI_SOURCE_ERR");
    assert_eq!((r.op_context, src), (1, ADDR_NOTAVAIL));
    drop((ea, eb, cqa, cqb, ava, avb));
    fixture::close_domain(fabric, domain);
}
