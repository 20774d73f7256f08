//! Closing flushes delayed acknowledgements: a receiver that took a peer's last message
//! and closes sends the acknowledgement it was delaying, so the sender's operation
//! completes instead of being retransmitted to a closed port until the peer is lost.
//! Two engines on a virtual clock, packets handed over by the test.

use ofi_util_rxd::peer::{Config, Engine, Event};

/// Hand every packet `from` has ready at `now` to `to`; how many there were.
fn carry(from: &mut Engine, from_addr: &[u8], to: &mut Engine, now: u64) -> usize {
    let mut packets = Vec::new();
    from.poll_transmit(now, 64, |_, _, pkt| {
        packets.push(pkt.to_vec());
        true
    });
    for p in &packets {
        to.handle_packet(from_addr, p, now);
    }
    packets.len()
}

fn events(e: &mut Engine) -> Vec<Event> {
    std::iter::from_fn(|| e.poll_event()).collect()
}

#[test]
fn a_closing_receiver_sends_the_acknowledgement_it_was_delaying() {
    let cfg = Config {
        ack_every: 16,
        ack_delay: 1_000_000_000,
        ..Config::default()
    };
    let (a_addr, b_addr) = (b"host-a".as_slice(), b"host-b".as_slice());
    let mut a = Engine::with_cookie_key(cfg, 1, (1, 2));
    let mut b = Engine::with_cookie_key(cfg, 2, (3, 4));
    let to_b = a.peer_for_addr(b_addr);
    a.send(to_b, 7, b"last message", 0)
        .expect("queue the message");
    // Handshake and data, at one instant (no timer runs): bounded rounds.
    let mut delivered = false;
    let mut a_events = Vec::new();
    for _ in 0..16 {
        carry(&mut a, a_addr, &mut b, 0);
        carry(&mut b, b_addr, &mut a, 0);
        a_events.extend(events(&mut a));
        delivered |= events(&mut b)
            .iter()
            .any(|e| matches!(e, Event::Message { data, .. } if data == b"last message"));
        if delivered {
            break;
        }
    }
    assert!(delivered, "the message did not arrive");
    // The acknowledgement is delayed: nothing is owed yet, the send is not complete.
    assert_eq!(carry(&mut b, b_addr, &mut a, 0), 0);
    a_events.extend(events(&mut a));
    assert!(
        !a_events
            .iter()
            .any(|e| matches!(e, Event::Sent { token: 7 })),
        "completed before any acknowledgement"
    );
    // Closing: the delayed acknowledgement goes out now and completes the send.
    b.flush_acks();
    assert!(carry(&mut b, b_addr, &mut a, 0) >= 1);
    assert!(events(&mut a)
        .iter()
        .any(|e| matches!(e, Event::Sent { token: 7 })));
}
