//! Receiver not ready through the whole stack: a sender floods a receiver that posts no
//! receive until the sender is held back (`fi_send` answers `FI_EAGAIN`: the receiver's
//! engine holds its limit of unexpected messages and of messages waiting behind a
//! refused one for order, then refuses datagrams, its receive slots stay held, the
//! device answers RNR and the sender's engine backs off). Then the
//! receiver posts its receives: every message arrives exactly once, in order, with its
//! bytes, and every send completes successfully.

use std::time::{Duration, Instant};

use ofi::registry::{Registry, RegistryConfig};
use ofi::{Caps, EpType, Errno};
use ofi_conformance::fixture::{open_domain, post_recv, send};
use ofi_conformance::pair::{info_for, open_side, poll, PairSpec, CTX_A, CTX_B};
use ofi_conformance::Subject;

const BOUND: Duration = Duration::from_secs(60);
const LEN: usize = 48;

fn subject() -> Subject {
    std::env::set_var("FI_EFA_DEVICE", "soft");
    // Few receive slots and a short device retry: RNR comes quickly.
    std::env::set_var("FI_EFA_RX_BUFS", "16");
    std::env::set_var("FI_EFA_RNR_RETRY", "1");
    // Messages held for order (behind a refused one) at most 1024 ahead (and as many
    // refused datagrams copied aside), above the 32 datagrams a sender has in flight.
    std::env::set_var("FI_EFA_RECVWIN_SIZE", "1024");
    std::env::set_var("FI_EFA_TX_BUFS", "32");
    // Back-offs of at most 5 ms (1 s by default), to keep the test short.
    std::env::set_var("FI_EFA_RNR_BACKOFF_WAIT_TIME_CAP", "5000");
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<ofi_prov_efa::EfaProvider>()],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "efa")
}

fn payload(i: usize) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[..8].copy_from_slice(&(i as u64).to_le_bytes());
    for (k, x) in b[8..].iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(7).wrapping_add(k as u8);
    }
    b
}

#[test]
fn a_flooded_receiver_holds_the_sender_back_then_takes_everything_in_order() {
    let s = subject();
    let info = info_for(&s, EpType::Rdm, Caps::MSG).expect("efa RDM info");
    let (_fabric, domain) = open_domain(&s, &info);
    let spec = PairSpec::new(EpType::Rdm, Caps::MSG);
    let (tx, tx_cq, _, tx_av) = open_side(&domain, &info, &spec, CTX_A, None);
    let (rx, rx_cq, _, _rx_av) = open_side(&domain, &info, &spec, CTX_B, None);
    tx.enable().unwrap();
    rx.enable().unwrap();
    let rx_name = ofi::Address::from_bytes(info.addr_format, &rx.getname().unwrap()).unwrap();
    let dest = tx_av.unwrap().insert(&[rx_name]).unwrap()[0];
    let bufs: Vec<[u8; LEN]> = (0..5000).map(payload).collect();
    let mut sent = 0usize;
    let mut done = 0usize;
    let start = Instant::now();
    // Flood until the sender is held back for a while (the receiver makes progress —
    // its CQ is read — but posts nothing).
    let mut held_since: Option<Instant> = None;
    while sent < bufs.len() {
        assert!(start.elapsed() < BOUND, "flooding took over {BOUND:?}");
        match send(&tx, &bufs[sent], dest, sent) {
            Ok(()) => {
                sent += 1;
                held_since = None;
            }
            Err(e) if e.code() == Errno::EAGAIN => {
                let t = *held_since.get_or_insert_with(Instant::now);
                if t.elapsed() > Duration::from_millis(200) {
                    break;
                }
            }
            Err(e) => panic!("send {sent}: {e}"),
        }
        while let Some(c) = poll(&tx_cq) {
            c.unwrap_or_else(|e| panic!("a send failed: {e:?}"));
            done += 1;
        }
        assert!(poll(&rx_cq).is_none(), "a completion without a receive");
    }
    assert!(
        sent < bufs.len(),
        "the receiver never held the sender back ({sent} sent, {done} complete)"
    );
    println!("held back after {sent} sends, {done} complete");
    // Now receive everything, then send the rest.
    let mut rbufs = vec![[0u8; LEN]; bufs.len()];
    let mut posted = 0usize;
    let mut got = Vec::new();
    while got.len() < bufs.len() {
        assert!(
            start.elapsed() < BOUND,
            "{} of {} received within {BOUND:?}",
            got.len(),
            bufs.len()
        );
        while posted < rbufs.len() && posted < got.len() + 512 {
            match post_recv(&rx, &mut rbufs[posted], 0x10_0000 + posted) {
                Ok(()) => posted += 1,
                Err(e) if e.code() == Errno::EAGAIN => break,
                Err(e) => panic!("recv: {e}"),
            }
        }
        if sent < bufs.len() {
            match send(&tx, &bufs[sent], dest, sent) {
                Ok(()) => sent += 1,
                Err(e) if e.code() == Errno::EAGAIN => {}
                Err(e) => panic!("send {sent}: {e}"),
            }
        }
        while let Some(c) = poll(&tx_cq) {
            c.unwrap_or_else(|e| panic!("a send failed: {e:?}"));
            done += 1;
        }
        while let Some(c) = poll(&rx_cq) {
            let c = c.unwrap_or_else(|e| panic!("a receive failed: {e:?}"));
            assert_eq!(c.len, LEN);
            got.push(c.op_context - 0x10_0000);
        }
    }
    while done < bufs.len() {
        assert!(start.elapsed() < BOUND, "{done} sends complete");
        if let Some(c) = poll(&tx_cq) {
            c.unwrap_or_else(|e| panic!("a send failed: {e:?}"));
            done += 1;
        }
    }
    // Receives complete in posting order, and messages were matched in sending order:
    // receive i holds message i.
    for (k, &i) in got.iter().enumerate() {
        assert_eq!(i, k, "receive completions out of order");
        assert_eq!(rbufs[i], bufs[i], "receive {i} holds another message");
    }
}
