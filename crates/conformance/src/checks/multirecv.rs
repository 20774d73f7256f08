//! Multi-receive buffers (`FI_MULTI_RECV`, fi_endpoint(3) `FI_OPT_MIN_MULTI_RECV`):
//! one posted buffer takes several messages, packed in order; each completion points
//! into the buffer; the buffer is released — its last completion carries
//! `FI_MULTI_RECV` — once the space left falls below the minimum, and later messages
//! go to other receives. (A release reported as a separate completion without data
//! is accepted too.)

use ofi::{Caps, OpFlags};

use crate::fixture::{pattern, post_recv, recvmsg, send};
use crate::pair::{assert_flags, each_type, show, Pair, PairSpec};
use crate::Subject;

/// `FI_OPT_ENDPOINT`.
pub const OPT_ENDPOINT: i32 = 0;
/// `FI_OPT_MIN_MULTI_RECV` (a `size_t`).
pub const OPT_MIN_MULTI_RECV: i32 = 0;

/// Buffer of 192 bytes, minimum 64: messages of 64, 56 and 16 bytes land at offsets
/// 0, 64 and 120; after the third only 56 bytes are left, so it releases the buffer.
pub fn multi_recv_packs_and_releases(s: &Subject) {
    let caps = Caps::MSG | Caps::MULTI_RECV;
    each_type(
        s,
        caps,
        |_| true,
        |t, info| {
            let min = 64usize;
            // Set before fi_enable, as fi_endpoint(3) recommends (PairSpec::min_multi_recv).
            let mut spec = PairSpec::new(t, caps);
            spec.min_multi_recv = Some(min);
            let pair = Pair::with_info(s, &spec, info);
            let p = &pair;
            let mut got = [0u8; 8];
            let n =
                p.b.ep
                    .getopt(OPT_ENDPOINT, OPT_MIN_MULTI_RECV, &mut got)
                    .unwrap_or_else(|e| panic!("fi_getopt(FI_OPT_MIN_MULTI_RECV): {e}"));
            assert_eq!(
                n,
                std::mem::size_of::<usize>(),
                "FI_OPT_MIN_MULTI_RECV is a size_t"
            );
            assert_eq!(
                usize::from_ne_bytes(got),
                min,
                "FI_OPT_MIN_MULTI_RECV reads back"
            );
            let mut big = vec![0u8; 192];
            let base = big.as_mut_ptr() as usize;
            recvmsg(&p.b.ep, &mut big, 0x88, OpFlags::MULTI_RECV)
                .unwrap_or_else(|e| panic!("fi_recvmsg(FI_MULTI_RECV): {e} ({})", e.code()));
            let payloads = [pattern(64, 1), pattern(56, 2), pattern(16, 3)];
            let offsets = [0usize, 64, 120];
            let mut released = false;
            for (i, pl) in payloads.iter().enumerate() {
                send(&p.a.ep, pl, p.a.peer, 0x90 + i).unwrap();
                p.wait_ok(0, "send completion");
                let r = p.wait_ok(1, &format!("multi-receive message #{i}"));
                assert_eq!(r.op_context, 0x88, "completion context {}", show(&r));
                assert_flags(&r, OpFlags::RECV | OpFlags::MSG, "multi-receive completion");
                assert_eq!(r.len, pl.len(), "message #{i} length");
                assert_eq!(
                    r.buf as usize,
                    base + offsets[i],
                    "message #{i} placed at offset {} (expected {})",
                    (r.buf as usize).wrapping_sub(base),
                    offsets[i]
                );
                let last = OpFlags::from_bits_retain(r.flags).contains(OpFlags::MULTI_RECV);
                assert!(
                    !last || i == 2,
                    "FI_MULTI_RECV flag on message #{i}, but the buffer still had room"
                );
                released |= last;
                assert!(
                    big[offsets[i]..offsets[i] + pl.len()] == pl[..],
                    "message #{i} payload"
                );
            }
            if !released {
                // The release may also come as a completion of its own, without data.
                let r = p.wait_ok(1, "the buffer's release (FI_MULTI_RECV)");
                assert_eq!(r.op_context, 0x88, "release completion {}", show(&r));
                assert_flags(&r, OpFlags::MULTI_RECV, "release completion");
                assert_eq!(r.len, 0, "a separate release completion carries no data");
            }
            // The released buffer takes nothing more: the next message goes elsewhere.
            let mut other = vec![0u8; 64];
            post_recv(&p.b.ep, &mut other, 0x99).unwrap();
            let before = big.clone();
            send(&p.a.ep, b"elsewhere", p.a.peer, 0x9a).unwrap();
            p.wait_ok(0, "send completion");
            let r = p.wait_ok(1, "receive after the release");
            assert_eq!(r.op_context, 0x99, "{}", show(&r));
            assert_eq!(&other[..9], b"elsewhere");
            assert!(big == before, "a released multi-receive buffer was written");
        },
    );
}
