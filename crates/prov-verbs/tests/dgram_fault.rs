//! `FI_EP_DGRAM` over UD with the software device's fault injection
//! (`FI_VERBS_SOFT_UD_DROP`): a datagram dropped on the wire completes at the sender
//! (a UD send completes locally) and never reaches the receiver, whose receives stay
//! posted; the other direction, from a context without faults, delivers. One test in
//! this binary: the fault parameters are read from the environment when a device
//! context opens.

mod common;

use ofi::{Caps, EpType, Errno};
use ofi_conformance::fixture::{
    self, expect_errno, name_of, pattern, poll_one, post_recv, send, wait_err, wait_ok,
};

#[test]
fn dropped_datagrams_complete_at_the_sender_and_never_arrive() {
    let s = common::subject();
    let info = fixture::msg_info_with(&s, Caps::MSG);
    assert_eq!(info.ep_type(), EpType::Dgram, "verbs offers FI_EP_DGRAM");
    // The sender's context drops every UD datagram it sends.
    std::env::set_var("FI_VERBS_SOFT_UD_DROP", "100");
    let (fa, da) = fixture::open_domain(&s, &info);
    std::env::remove_var("FI_VERBS_SOFT_UD_DROP");
    let (fb, db) = fixture::open_domain(&s, &info);
    let (ea, cqa, ava) = fixture::enabled_peer(&da, &info);
    let (eb, cqb, avb) = fixture::enabled_peer(&db, &info);
    let b_at_a = ava.insert(&[name_of(&eb, &info)]).unwrap()[0];
    let a_at_b = avb.insert(&[name_of(&ea, &info)]).unwrap()[0];

    // The other way has no faults; this exchange also sets up the contexts'
    // connection, which then carries a's datagrams to b as soon as they are sent.
    let payload = pattern(200, 3);
    let mut back = [0u8; 256];
    post_recv(&ea, &mut back, 0x30).unwrap();
    send(&eb, &payload, a_at_b, 0x31).unwrap();
    assert_eq!(wait_ok(&cqb, "send from b").op_context, 0x31);
    let r = wait_ok(&cqa, "receive at a");
    assert_eq!((r.op_context, r.len), (0x30, payload.len()));
    assert_eq!(&back[..payload.len()], &payload[..]);

    let mut inbox = vec![[0u8; 256]; 4];
    for (i, b) in inbox.iter_mut().enumerate() {
        post_recv(&eb, b, 0x10 + i).unwrap();
    }
    for i in 0..4 {
        send(&ea, &payload, b_at_a, 0x20 + i).unwrap();
        assert_eq!(
            wait_ok(&cqa, "a dropped datagram's send").op_context,
            0x20 + i,
            "a UD send completes at the sender, dropped or not"
        );
    }
    // A datagram not dropped is on the connection once its send completed: reading
    // b's CQ drives b's device progress, so it would be found here.
    for _ in 0..2000 {
        assert!(poll_one(&cqb).is_none(), "a dropped datagram arrived");
        std::thread::yield_now();
    }
    // The receives are still posted (none was consumed): each cancels.
    for i in 0..4 {
        eb.cancel(0x10 + i).unwrap();
        let ee = wait_err(&cqb, "a cancelled receive");
        assert_eq!((ee.op_context, Errno(ee.err)), (0x10 + i, Errno::ECANCELED));
    }
    expect_errno(eb.cancel(0x10), Errno::ENOENT, "nothing left to cancel");
    assert!(inbox.iter().all(|b| b.iter().all(|&x| x == 0)));

    drop((ea, eb, cqa, cqb, ava, avb));
    fixture::close_domain(fa, da);
    fixture::close_domain(fb, db);
}
