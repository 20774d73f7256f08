//! Scalable endpoints and shared contexts (fi_endpoint(3)), only where the provider
//! offers them (`max_ep_tx_ctx` / `max_ep_rx_ctx` > 1; `max_ep_stx_ctx` /
//! `max_ep_srx_ctx` > 0):
//!
//! - a scalable endpoint with two transmit and two receive contexts: a message sent
//!   from transmit context 0 to receive context 1 (addressed with `fi_rx_addr`) arrives
//!   there and nowhere else;
//! - each context with its own CQ: completions land on the context's CQ only; the
//!   scalable endpoint's address without a context index is receive context 0;
//!   closing the scalable endpoint with open contexts is `FI_EBUSY`;
//! - two endpoints sharing one transmit and one receive context exchange a message
//!   (receives are posted to the shared receive context);
//! - sixteen endpoints on one shared receive context: receives posted once to the
//!   context take the messages sent to every endpoint.

use ofi::av::AvAttr;
use ofi::cq::CqAttr;
use ofi::{Caps, CqFormat, Errno, OpFlags, SHARED_CONTEXT};

use crate::fixture::{self, pattern, post_recv, send, wait_ok};
use crate::pair::each_type;
use crate::Subject;

/// A shared receive context of `d` (`fi_srx_context` with `rx`), and the CQ
/// (`FI_CQ_FORMAT_MSG`) and AV its endpoints bind.
fn srx_with_cq_and_av(
    d: &ofi::domain::Domain,
    rx: &ofi::RxAttr,
) -> (
    ofi::ep::Endpoint,
    ofi::cq::CompletionQueue,
    ofi::av::AddressVector,
) {
    let srx = d
        .srx_context(rx)
        .unwrap_or_else(|e| panic!("fi_srx_context: {e} ({})", e.code()));
    let cq = d.cq_open(&CqAttr::with_format(CqFormat::Msg)).unwrap();
    let av = d.av_open(&AvAttr::default()).unwrap();
    (srx, cq, av)
}

/// An endpoint of `d` opened with `info`, bound to the shared contexts `shared` (an
/// `fi_stx_context` and/or `fi_srx_context`), to `cq` for both directions and to `av`,
/// then enabled; `what` names the endpoint in a failure.
fn endpoint_on_shared(
    d: &ofi::domain::Domain,
    info: &ofi::Info,
    shared: &[&ofi::ep::Endpoint],
    cq: &ofi::cq::CompletionQueue,
    av: &ofi::av::AddressVector,
    what: &str,
) -> ofi::ep::Endpoint {
    let ep = d
        .endpoint(info)
        .unwrap_or_else(|e| panic!("fi_endpoint ({what}): {e}"));
    for (k, ctx) in shared.iter().enumerate() {
        ep.bind(*ctx, OpFlags::empty())
            .unwrap_or_else(|e| panic!("fi_ep_bind shared context #{k} ({what}): {e}"));
    }
    ep.bind(cq, OpFlags::TRANSMIT | OpFlags::RECV)
        .unwrap_or_else(|e| panic!("fi_ep_bind CQ ({what}): {e}"));
    ep.bind_av(av)
        .unwrap_or_else(|e| panic!("fi_ep_bind AV ({what}): {e}"));
    ep.enable()
        .unwrap_or_else(|e| panic!("fi_enable ({what}): {e}"));
    ep
}

/// `value - base` as an index into `seen`, which must be in range and not seen before
/// (it is marked seen); `what` names the value in a failure.
fn first_sighting(seen: &mut [bool], value: usize, base: usize, what: &str) -> usize {
    let i = value
        .checked_sub(base)
        .filter(|&i| i < seen.len())
        .unwrap_or_else(|| panic!("unexpected {what} {value:#x}"));
    assert!(!seen[i], "{what} {value:#x} seen twice");
    seen[i] = true;
    i
}

/// `fi_rx_addr`: the fabric address of receive context `index` of `addr`.
pub fn rx_addr(addr: u64, index: u64, rx_ctx_bits: u32) -> u64 {
    (index << (64 - rx_ctx_bits)) | addr
}

/// Run `f` on every connectionless type with several contexts: its info with two
/// transmit and two receive contexts, `bits` receive-context bits, the domain, an AV
/// with those bits and a scalable endpoint with the AV bound.
fn each_scalable(
    s: &Subject,
    bits: u32,
    f: impl Fn(&ofi::Info, u32, &ofi::domain::Domain, &ofi::av::AddressVector, ofi::ep::Endpoint),
) {
    each_type(s, Caps::MSG, crate::offers_scalable, |_t, mut info| {
        info.ep_attr.tx_ctx_cnt = 2;
        info.ep_attr.rx_ctx_cnt = 2;
        let (_f, d) = fixture::open_domain(s, &info);
        let av = d
            .av_open(&AvAttr {
                rx_ctx_bits: bits as i32,
                ..AvAttr::default()
            })
            .unwrap_or_else(|e| panic!("fi_av_open (rx_ctx_bits {bits}): {e}"));
        let sep = d
            .scalable_ep(&info)
            .unwrap_or_else(|e| panic!("fi_scalable_ep: {e} ({})", e.code()));
        sep.bind_av(&av)
            .unwrap_or_else(|e| panic!("fi_scalable_ep_bind AV: {e}"));
        f(&info, bits, &d, &av, sep);
    });
}

/// A message from transmit context 0 to receive context 1 of one scalable endpoint.
pub fn scalable_ep_contexts(s: &Subject) {
    each_scalable(s, 2, |info, bits, d, av, sep| {
        let tx = sep
            .tx_context(0, &info.tx_attr)
            .unwrap_or_else(|e| panic!("fi_tx_context 0: {e}"));
        let rx0 = sep
            .rx_context(0, &info.rx_attr)
            .unwrap_or_else(|e| panic!("fi_rx_context 0: {e}"));
        let rx1 = sep
            .rx_context(1, &info.rx_attr)
            .unwrap_or_else(|e| panic!("fi_rx_context 1: {e}"));
        let fmt = CqAttr::with_format(CqFormat::Msg);
        let (cq_tx, cq_rx0, cq_rx1) = (
            d.cq_open(&fmt).unwrap(),
            d.cq_open(&fmt).unwrap(),
            d.cq_open(&fmt).unwrap(),
        );
        tx.bind(&cq_tx, OpFlags::TRANSMIT).unwrap();
        rx0.bind(&cq_rx0, OpFlags::RECV).unwrap();
        rx1.bind(&cq_rx1, OpFlags::RECV).unwrap();
        for (what, c) in [("tx 0", &tx), ("rx 0", &rx0), ("rx 1", &rx1)] {
            c.enable()
                .unwrap_or_else(|e| panic!("fi_enable ({what}): {e}"));
        }
        sep.enable()
            .unwrap_or_else(|e| panic!("fi_enable (scalable endpoint): {e}"));
        let me = fixture::name_of(&sep, info);
        let base = av.insert(&[me]).unwrap()[0];
        let mut b0 = vec![0u8; 64];
        let mut b1 = vec![0u8; 64];
        post_recv(&rx0, &mut b0, 0x10).unwrap();
        post_recv(&rx1, &mut b1, 0x11).unwrap();
        let payload = pattern(40, 4);
        send(&tx, &payload, rx_addr(base, 1, bits), 0x12)
            .unwrap_or_else(|e| panic!("fi_send to receive context 1: {e}"));
        assert_eq!(wait_ok(&cq_tx, "send from tx 0").op_context, 0x12);
        let r = wait_ok(&cq_rx1, "receive on rx 1");
        assert_eq!((r.op_context, r.len), (0x11, 40));
        assert!(b1[..40] == payload[..]);
        fixture::assert_empty(&cq_rx0, "receive context 0 got nothing");
        assert!(b0.iter().all(|&b| b == 0));
    });
}

/// Two transmit and two receive contexts, each with its own CQ: sends from each
/// transmit context to the other index (`fi_rx_addr`) complete on that context's CQ
/// only and arrive on the named receive context's CQ only; a send to the scalable
/// endpoint's address without a context index (an AV without `rx_ctx_bits`) reaches
/// receive context 0. Closing the scalable endpoint while its contexts are open is
/// `FI_EBUSY`; once they are closed it closes.
pub fn scalable_ep_per_context_cqs(s: &Subject) {
    each_scalable(s, 1, |info, bits, d, av, mut sep| {
        let fmt = CqAttr::with_format(CqFormat::Msg);
        let mut txs = Vec::new();
        let mut rxs = Vec::new();
        for i in 0..2 {
            let tx = sep
                .tx_context(i, &info.tx_attr)
                .unwrap_or_else(|e| panic!("fi_tx_context {i}: {e}"));
            let rx = sep
                .rx_context(i, &info.rx_attr)
                .unwrap_or_else(|e| panic!("fi_rx_context {i}: {e}"));
            let (tcq, rcq) = (d.cq_open(&fmt).unwrap(), d.cq_open(&fmt).unwrap());
            tx.bind(&tcq, OpFlags::TRANSMIT).unwrap();
            rx.bind(&rcq, OpFlags::RECV).unwrap();
            tx.enable()
                .unwrap_or_else(|e| panic!("fi_enable (tx {i}): {e}"));
            rx.enable()
                .unwrap_or_else(|e| panic!("fi_enable (rx {i}): {e}"));
            txs.push((tx, tcq));
            rxs.push((rx, rcq));
        }
        sep.enable()
            .unwrap_or_else(|e| panic!("fi_enable (scalable endpoint): {e}"));
        let me = fixture::name_of(&sep, info);
        let base = av.insert(std::slice::from_ref(&me)).unwrap()[0];
        let mut bufs = [vec![0u8; 64], vec![0u8; 64]];
        for (i, ((rx, _), b)) in rxs.iter().zip(bufs.iter_mut()).enumerate() {
            post_recv(rx, b, 0x30 + i).unwrap();
        }
        // Transmit context i sends to receive context 1 - i. The payloads live until
        // the sends complete (fi_send may read the buffer until then).
        let payloads: Vec<Vec<u8>> = (0..txs.len()).map(|i| pattern(20 + i, i as u8)).collect();
        for (i, ((tx, _), payload)) in txs.iter().zip(&payloads).enumerate() {
            let dest = rx_addr(base, 1 - i as u64, bits);
            send(tx, payload, dest, 0x40 + i)
                .unwrap_or_else(|e| panic!("fi_send from tx {i}: {e}"));
        }
        for (i, (_, tcq)) in txs.iter().enumerate() {
            let c = wait_ok(tcq, "send completion on its transmit context's CQ");
            assert_eq!(c.op_context, 0x40 + i, "transmit context {i}'s CQ");
            fixture::assert_empty(tcq, "one send per transmit context");
        }
        for (j, (_, rcq)) in rxs.iter().enumerate() {
            let c = wait_ok(rcq, "receive on the named receive context");
            let from = 1 - j;
            assert_eq!(
                (c.op_context, c.len),
                (0x30 + j, 20 + from),
                "receive context {j} gets transmit context {from}'s message"
            );
            assert!(bufs[j][..c.len] == pattern(20 + from, from as u8)[..]);
            fixture::assert_empty(rcq, "one message per receive context");
        }
        // Without receive-context bits, the scalable endpoint's address is
        // receive context 0.
        let plain_av = d.av_open(&AvAttr::default()).unwrap();
        let plain_cq = d.cq_open(&fmt).unwrap();
        let plain = d
            .endpoint(info)
            .unwrap_or_else(|e| panic!("fi_endpoint: {e}"));
        plain
            .bind(&plain_cq, OpFlags::TRANSMIT | OpFlags::RECV)
            .unwrap();
        plain.bind_av(&plain_av).unwrap();
        plain.enable().unwrap();
        let to_sep = plain_av.insert(&[me]).unwrap()[0];
        let mut b0 = vec![0u8; 64];
        post_recv(&rxs[0].0, &mut b0, 0x50).unwrap();
        send(&plain, b"to context 0", to_sep, 0x51).unwrap();
        assert_eq!(
            wait_ok(&plain_cq, "send without a context index").op_context,
            0x51
        );
        let c = wait_ok(&rxs[0].1, "receive context 0 without a context index");
        assert_eq!((c.op_context, c.len), (0x50, 12));
        assert_eq!(&b0[..12], b"to context 0");
        fixture::assert_empty(&rxs[1].1, "receive context 1 got nothing");
        // Closing with open contexts is FI_EBUSY.
        let e = sep
            .close()
            .expect_err("fi_close of a scalable endpoint with open contexts");
        assert_eq!(e.code(), Errno::EBUSY, "{e}");
        for (mut c, _) in txs.into_iter().chain(rxs) {
            c.close()
                .unwrap_or_else(|e| panic!("fi_close of a context: {e}"));
        }
        sep.close()
            .unwrap_or_else(|e| panic!("fi_close of the scalable endpoint: {e}"));
    });
}

/// Two endpoints bound to one shared transmit and one shared receive context
/// exchange a message.
pub fn shared_contexts(s: &Subject) {
    each_type(
        s,
        Caps::MSG,
        crate::offers_shared_contexts,
        |_t, mut info| {
            info.ep_attr.tx_ctx_cnt = SHARED_CONTEXT;
            info.ep_attr.rx_ctx_cnt = SHARED_CONTEXT;
            let (_f, d) = fixture::open_domain(s, &info);
            let stx = d
                .stx_context(&info.tx_attr)
                .unwrap_or_else(|e| panic!("fi_stx_context: {e} ({})", e.code()));
            let (srx, cq, av) = srx_with_cq_and_av(&d, &info.rx_attr);
            let eps: Vec<_> = (0..2)
                .map(|i| {
                    let what = format!("shared contexts, {i}");
                    endpoint_on_shared(&d, &info, &[&stx, &srx], &cq, &av, &what)
                })
                .collect();
            let names: Vec<_> = eps.iter().map(|e| fixture::name_of(e, &info)).collect();
            let addrs = av.insert(&names).unwrap();
            let mut buf = vec![0u8; 64];
            post_recv(&srx, &mut buf, 0x21).unwrap();
            send(&eps[0], b"shared", addrs[1], 0x20).unwrap();
            let mut seen = [false; 2];
            for _ in 0..2 {
                let c = wait_ok(&cq, "shared-context completion");
                match c.op_context {
                    0x20 => seen[0] = true,
                    0x21 => {
                        assert_eq!(c.len, 6);
                        seen[1] = true;
                    }
                    o => panic!("unexpected context {o:#x}"),
                }
            }
            assert_eq!(seen, [true, true]);
            assert_eq!(&buf[..6], b"shared");
        },
    );
}

/// Sixteen endpoints bound to one shared receive context: receives posted once to the
/// context take a message sent to each endpoint (every endpoint's messages are matched
/// there, so the posted receives do not grow with the endpoints), reported on the
/// endpoints' CQ with each message's source.
pub fn shared_rx_context_serves_many_endpoints(s: &Subject) {
    const N: usize = 16;
    each_type(
        s,
        Caps::MSG,
        |i| crate::connectionless(i.ep_type()) && i.domain_attr.max_ep_srx_ctx > 0,
        |_t, mut info| {
            let mut shared = info.clone();
            shared.ep_attr.rx_ctx_cnt = SHARED_CONTEXT;
            info.ep_attr.rx_ctx_cnt = 1;
            let (_f, d) = fixture::open_domain(s, &info);
            let (srx, cq, av) = srx_with_cq_and_av(&d, &shared.rx_attr);
            let eps: Vec<_> = (0..N)
                .map(|i| {
                    let what = format!("shared rx, {i}");
                    endpoint_on_shared(&d, &shared, &[&srx], &cq, &av, &what)
                })
                .collect();
            let (sender, scq, sav) = fixture::enabled_peer(&d, &info);
            let names: Vec<_> = eps.iter().map(|e| fixture::name_of(e, &info)).collect();
            let dests = sav.insert(&names).unwrap();
            av.insert(&[fixture::name_of(&sender, &info)]).unwrap();
            let left = srx.rx_size_left().ok();
            let mut bufs = vec![vec![0u8; 64]; N];
            for (i, b) in bufs.iter_mut().enumerate() {
                post_recv(&srx, b, 0x100 + i).unwrap();
            }
            if let (Some(before), Ok(after)) = (left, srx.rx_size_left()) {
                assert_eq!(before - after, N, "N receives posted once, to the context");
            }
            for (i, &dest) in dests.iter().enumerate() {
                // Kept until the send completes (a provider may read it later).
                let msg = pattern(8 + i, i as u8);
                send(&sender, &msg, dest, 0x200 + i)
                    .unwrap_or_else(|e| panic!("fi_send to endpoint {i}: {e}"));
                assert_eq!(
                    wait_ok(&scq, "send to a shared-rx endpoint").op_context,
                    0x200 + i
                );
            }
            // Each receive takes one message (which one depends on the order the
            // endpoints' rings are read in); message i is 8 + i bytes long.
            let mut receives = [false; N];
            let mut messages = [false; N];
            for _ in 0..N {
                let c = wait_ok(&cq, "receive through the shared receive context");
                let k = first_sighting(&mut receives, c.op_context, 0x100, "receive context");
                let m = first_sighting(&mut messages, c.len, 8, "message length");
                assert!(bufs[k][..c.len] == pattern(8 + m, m as u8)[..]);
            }
            fixture::assert_empty(&cq, "one completion per message");
        },
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn rx_addr_puts_the_index_in_the_top_bits() {
        assert_eq!(super::rx_addr(5, 1, 2), (1 << 62) | 5);
        assert_eq!(super::rx_addr(5, 3, 2), (3 << 62) | 5);
    }
}
