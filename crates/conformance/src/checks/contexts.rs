//! Scalable endpoints and shared contexts (fi_endpoint(3)), only where the provider
//! offers them (`max_ep_tx_ctx` / `max_ep_rx_ctx` > 1; `max_ep_stx_ctx` /
//! `max_ep_srx_ctx` > 0):
//!
//! - a scalable endpoint with two transmit and two receive contexts: a message sent
//!   from transmit context 0 to receive context 1 (addressed with `fi_rx_addr`) arrives
//!   there and nowhere else;
//! - two endpoints sharing one transmit and one receive context exchange a message
//!   (receives are posted to the shared receive context).

use ofi::av::AvAttr;
use ofi::cq::CqAttr;
use ofi::{Caps, CqFormat, OpFlags, SHARED_CONTEXT};

use crate::fixture::{self, pattern, post_recv, send, wait_ok};
use crate::pair::each_type;
use crate::Subject;

/// `fi_rx_addr`: the fabric address of receive context `index` of `addr`.
pub fn rx_addr(addr: u64, index: u64, rx_ctx_bits: u32) -> u64 {
    (index << (64 - rx_ctx_bits)) | addr
}

/// A message from transmit context 0 to receive context 1 of one scalable endpoint.
pub fn scalable_ep_contexts(s: &Subject) {
    each_type(
        s,
        Caps::MSG,
        |i| {
            crate::connectionless(i.ep_type())
                && i.domain_attr.max_ep_tx_ctx > 1
                && i.domain_attr.max_ep_rx_ctx > 1
        },
        |_t, mut info| {
            info.ep_attr.tx_ctx_cnt = 2;
            info.ep_attr.rx_ctx_cnt = 2;
            let (_f, d) = fixture::open_domain(s, &info);
            let bits = 2u32;
            let av = d
                .av_open(&AvAttr {
                    rx_ctx_bits: bits as i32,
                    ..AvAttr::default()
                })
                .unwrap_or_else(|e| panic!("fi_av_open (rx_ctx_bits 2): {e}"));
            let sep = d
                .scalable_ep(&info)
                .unwrap_or_else(|e| panic!("fi_scalable_ep: {e} ({})", e.code()));
            sep.bind_av(&av)
                .unwrap_or_else(|e| panic!("fi_scalable_ep_bind AV: {e}"));
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
            let me = fixture::name_of(&sep, &info);
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
        },
    );
}

/// Two endpoints bound to one shared transmit and one shared receive context
/// exchange a message.
pub fn shared_contexts(s: &Subject) {
    each_type(
        s,
        Caps::MSG,
        |i| {
            crate::connectionless(i.ep_type())
                && i.domain_attr.max_ep_stx_ctx > 0
                && i.domain_attr.max_ep_srx_ctx > 0
        },
        |_t, mut info| {
            info.ep_attr.tx_ctx_cnt = SHARED_CONTEXT;
            info.ep_attr.rx_ctx_cnt = SHARED_CONTEXT;
            let (_f, d) = fixture::open_domain(s, &info);
            let stx = d
                .stx_context(&info.tx_attr)
                .unwrap_or_else(|e| panic!("fi_stx_context: {e} ({})", e.code()));
            let srx = d
                .srx_context(&info.rx_attr)
                .unwrap_or_else(|e| panic!("fi_srx_context: {e} ({})", e.code()));
            let cq = d.cq_open(&CqAttr::with_format(CqFormat::Msg)).unwrap();
            let av = d.av_open(&AvAttr::default()).unwrap();
            let mut eps = Vec::new();
            for i in 0..2 {
                let ep = d
                    .endpoint(&info)
                    .unwrap_or_else(|e| panic!("fi_endpoint (shared contexts): {e}"));
                ep.bind(&stx, OpFlags::empty())
                    .unwrap_or_else(|e| panic!("fi_ep_bind stx ({i}): {e}"));
                ep.bind(&srx, OpFlags::empty())
                    .unwrap_or_else(|e| panic!("fi_ep_bind srx ({i}): {e}"));
                ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
                ep.bind_av(&av).unwrap();
                ep.enable()
                    .unwrap_or_else(|e| panic!("fi_enable (shared contexts): {e}"));
                eps.push(ep);
            }
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

#[cfg(test)]
mod tests {
    #[test]
    fn rx_addr_puts_the_index_in_the_top_bits() {
        assert_eq!(super::rx_addr(5, 1, 2), (1 << 62) | 5);
        assert_eq!(super::rx_addr(5, 3, 2), (3 << 62) | 5);
    }
}
