//! The shared packet rules: protocol choice, headers out, checks in.

use super::*;
use crate::proto::{F_DATA, F_DC, F_LAST, F_TAGGED};

const LIM: RxLimits = RxLimits {
    eager_max: 100,
    sar_max: 1000,
    max_msg: 1 << 20,
};

fn pkt(h: Hdr, payload: &[u8]) -> Vec<u8> {
    let mut b = h.bytes().to_vec();
    b.extend_from_slice(payload);
    b
}

#[test]
fn protocol_by_size() {
    assert_eq!(Protocol::of(0, 100, 1000), Protocol::Eager);
    assert_eq!(Protocol::of(100, 100, 1000), Protocol::Eager);
    assert_eq!(Protocol::of(101, 100, 1000), Protocol::Segmented);
    assert_eq!(Protocol::of(1000, 100, 1000), Protocol::Segmented);
    assert_eq!(Protocol::of(1001, 100, 1000), Protocol::Rendezvous);
}

#[test]
fn headers_carry_the_meta_and_round_trip_through_classify() {
    let m = MsgMeta {
        tag: Some(7),
        data: Some(0xdd),
        dc: true,
    };
    assert_eq!(m.flags(), F_TAGGED | F_DATA | F_DC);
    let b = pkt(m.eager(3), b"abc");
    match Inbound::classify(&b, &LIM) {
        Ok((Inbound::Eager { meta, payload }, 0)) => {
            assert_eq!(meta, m);
            assert_eq!(payload, b"abc");
        }
        other => panic!("{other:?}"),
    }
    let untagged = MsgMeta::default();
    assert_eq!(untagged.flags(), 0);
    assert_eq!(untagged.rts(5000).flags, 0);
    assert_eq!(
        m.rts(5000).flags,
        F_TAGGED | F_DATA,
        "a rendezvous asks no DC_ACK"
    );
}

#[test]
fn segments_cut_a_message_and_the_cursor_follows_them() {
    let m = MsgMeta {
        tag: Some(9),
        data: Some(1),
        dc: true,
    };
    let len = 250;
    let (h, n) = m.segment(0, len, 100);
    assert_eq!((h.op, h.size, n), (Op::SarFirst, 250, 100));
    assert_eq!(h.flags, F_TAGGED | F_DATA | F_DC);
    let (mut cur, done) = SarCursor::first(9, len, n, h.flags & F_LAST != 0).expect("first");
    assert!(!done);
    let mut off = n;
    let mut finished = false;
    while off < len {
        let (h, n) = m.segment(off, len, 100);
        assert_eq!((h.op, h.size), (Op::SarNext, off as u64));
        assert_eq!(
            h.flags & !F_LAST,
            F_TAGGED,
            "later segments carry only the tag flag"
        );
        finished = cur
            .next(h.tag, h.size, n, h.flags & F_LAST != 0)
            .expect("in order");
        off += n;
    }
    assert!(finished);
    assert_eq!((cur.got(), cur.total()), (250, 250));
}

#[test]
fn segments_out_of_protocol_are_refused() {
    let (mut c, _) = SarCursor::first(1, 300, 100, false).expect("first");
    assert_eq!(
        c.next(2, 100, 100, false),
        Err(Errno::EPROTO),
        "another tag"
    );
    assert_eq!(c.next(1, 150, 100, false), Err(Errno::EPROTO), "a gap");
    assert_eq!(
        c.next(1, 100, 201, false),
        Err(Errno::EPROTO),
        "past the end"
    );
    assert_eq!(
        c.next(1, 100, 100, true),
        Err(Errno::EPROTO),
        "last too early"
    );
    let (mut c, _) = SarCursor::first(1, 200, 100, false).expect("first");
    assert_eq!(
        c.next(1, 100, 100, false),
        Err(Errno::EPROTO),
        "complete, not last"
    );
    assert_eq!(
        SarCursor::first(1, 200, 100, true).map(|x| x.1),
        Err(Errno::EPROTO)
    );
    assert_eq!(SarCursor::first(1, 100, 100, true).map(|x| x.1), Ok(true));
}

#[test]
fn classify_checks_lengths_and_limits() {
    // Eager: the header's size is the payload's, at most eager_max.
    let bad = pkt(Hdr::new(Op::Eager, 0, 4, 0, 0), b"abc");
    assert_eq!(Inbound::classify(&bad, &LIM).err(), Some(Errno::EPROTO));
    let big = pkt(Hdr::new(Op::Eager, 0, 101, 0, 0), &[0; 101]);
    assert_eq!(Inbound::classify(&big, &LIM).err(), Some(Errno::EPROTO));
    // First segment: at most sar_max, no more payload than the message.
    let b = pkt(Hdr::new(Op::SarFirst, 0, 1001, 0, 0), &[0; 10]);
    assert_eq!(Inbound::classify(&b, &LIM).err(), Some(Errno::EPROTO));
    let b = pkt(Hdr::new(Op::SarFirst, 0, 5, 0, 0), &[0; 10]);
    assert_eq!(Inbound::classify(&b, &LIM).err(), Some(Errno::EPROTO));
    // RTS past max_msg, or whose body does not parse.
    let mut b = Hdr::new(Op::Rts, 0, 2 << 20, 0, 0).bytes().to_vec();
    Rts {
        id: 1,
        iov: [(0, 2 << 20, 0); proto::RTS_IOVS],
        n: 1,
    }
    .encode(&mut b);
    assert_eq!(Inbound::classify(&b, &LIM).err(), Some(Errno::EPROTO));
    let b = pkt(Hdr::new(Op::Rts, 0, 10, 0, 0), &[1, 2, 3]);
    assert_eq!(Inbound::classify(&b, &LIM).err(), Some(Errno::EPROTO));
    // A short packet, a status that is no FI code.
    assert_eq!(Inbound::classify(&[2, 1], &LIM).err(), Some(Errno::EPROTO));
    let mut h = Hdr::new(Op::RndvDone, 0, 0, 5, 3);
    h.credits = 4;
    match Inbound::classify(&h.bytes(), &LIM) {
        Ok((Inbound::RndvDone { op: 5, err }, 4)) => assert_eq!(err, Some(Errno::EPROTO)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn classify_never_panics_on_random_bytes() {
    let mut r = ofi_testkit::TestRng::seeded(0xc1a5);
    let seeds = [
        pkt(MsgMeta::default().eager(3), b"abc"),
        pkt(Hdr::new(Op::SarFirst, F_DC, 300, 0, 0), &[0; 100]),
        pkt(Hdr::new(Op::SarNext, F_LAST, 100, 0, 0), &[0; 100]),
        Hdr::new(Op::DcAck, 0, 1, 0, 0).bytes().to_vec(),
    ];
    for i in 0..5000 {
        let mut b = seeds[i % seeds.len()].clone();
        match r.below(3) {
            0 => b.truncate(r.below(b.len() as u64 + 1) as usize),
            1 => {
                let k = r.below(b.len() as u64) as usize;
                b[k] ^= 1 << r.below(8);
            }
            _ => {
                let n = r.below(120) as usize;
                b = r.bytes(n);
            }
        }
        if let Ok((inb, _)) = Inbound::classify(&b, &LIM) {
            let _ = inb.is_credited();
        }
    }
}

#[test]
fn control_headers_round_trip_through_classify() {
    for (result, want) in [
        (Ok(()), None),
        (Err(Errno::EIO), Some(Errno::EIO)),
        (Err(Errno::ECONNRESET), Some(Errno::ECONNRESET)),
    ] {
        match Inbound::classify(&Control::rndv_done(77, result).bytes(), &LIM) {
            Ok((Inbound::RndvDone { op: 77, err }, 0)) => assert_eq!(err, want),
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        Inbound::classify(&Control::dc_ack(3).bytes(), &LIM),
        Ok((Inbound::DcAck { count: 3 }, 0))
    ));
    assert!(matches!(
        Inbound::classify(&Control::credit().bytes(), &LIM),
        Ok((Inbound::Credit, 0))
    ));
}

#[test]
fn acknowledgements_come_in_order_and_never_past_what_was_sent() {
    let mut q = AckQueue::default();
    for k in 0..4u32 {
        q.expect(k);
    }
    assert_eq!(q.acked(2).map(|d| d.collect::<Vec<_>>()), Ok(vec![0, 1]));
    assert_eq!(q.acked(3).err(), Some(Errno::EPROTO));
    assert_eq!(q.len(), 2, "a refused acknowledgement takes nothing");
    assert_eq!(q.acked(u64::MAX).err(), Some(Errno::EPROTO));
    assert_eq!(q.acked(2).map(|d| d.collect::<Vec<_>>()), Ok(vec![2, 3]));
    assert!(q.is_empty());
    assert_eq!(q.acked(0).map(|d| d.count()), Ok(0));
}
