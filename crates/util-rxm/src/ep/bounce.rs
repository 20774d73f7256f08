//! Bounce buffers: the receive buffers rxm posts on each MSG endpoint of the core, into
//! which the core places rxm's packets.
//!
//! Two layouts, chosen once per endpoint from the core's capabilities:
//! - **Multi-receive** (a core with `FI_MULTI_RECV`, as tcp): [`MULTI_BUFS`] buffers of
//!   `buffer_size × ⌈msg_rx_size / 2⌉` bytes each, posted with `FI_MULTI_RECV` and the
//!   endpoint's `FI_OPT_MIN_MULTI_RECV` set to `buffer_size`, so every packet (at most
//!   `buffer_size` bytes) fits where the core places it. The core writes packets one
//!   after the other into a buffer and releases it (`FI_MULTI_RECV` in the completion)
//!   once less than `buffer_size` is left; rxm posts it again then. An idle
//!   connection's small messages thus cost no posting per message: about 300
//!   instructions of `fi_recv` through the core (callgrind, `fi_pingpong -p
//!   "tcp;ofi_rxm" -S 64`).
//! - **One packet per buffer** (any other core, as verbs): `msg_rx_size` buffers of
//!   `buffer_size` bytes, each posted again once its packet is handled.
//!
//! # Invariants
//!
//! - A buffer is owned by its MSG slot and outlives the core endpoint it is posted on
//!   (the endpoint is dropped first: `MsgEp::ep` is declared before `MsgEp::bufs`).
//! - The core writes a buffer only while it is posted; rxm posts it again only after the
//!   packets in it were handled (each packet is handled, and its bytes copied out, before
//!   `progress` looks at the next completion).
//! - A packet's place comes from the core's completion and is checked against the buffer
//!   ([`Bounce::packet`]): a place outside it, or longer than `buffer_size`, is a
//!   protocol error of the connection, never an access outside the buffer.
//!
//! Nothing here panics.

use super::*;

/// Multi-receive buffers per MSG endpoint: one being filled while the other is handed
/// back, so a released buffer never leaves the core without a posted one.
pub(super) const MULTI_BUFS: usize = 2;

/// How an endpoint's bounce buffers are laid out (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Bounce {
    /// Posted with `FI_MULTI_RECV`.
    pub(super) multi: bool,
    /// Buffers per MSG endpoint.
    pub(super) count: usize,
    /// Bytes of each.
    pub(super) len: usize,
    /// The largest packet (`buffer_size`).
    pub(super) packet_max: usize,
}

impl Bounce {
    /// The layout for `settings` over a core whose capabilities are `core_caps`.
    pub(super) fn new(settings: &Settings, core_caps: Caps) -> Bounce {
        let packet_max = settings.buffer_size;
        if core_caps.contains(Caps::MULTI_RECV) {
            let per_buf = settings.msg_rx_size.div_ceil(MULTI_BUFS).max(1);
            Bounce {
                multi: true,
                count: MULTI_BUFS,
                len: packet_max.saturating_mul(per_buf),
                packet_max,
            }
        } else {
            Bounce {
                multi: false,
                count: settings.msg_rx_size,
                len: packet_max,
                packet_max,
            }
        }
    }

    /// The packet completion `e` reports in `buf`: where the core placed it (at the
    /// start for one packet per buffer), `None` when that place is not inside `buf` or
    /// the packet is longer than a packet may be.
    pub(super) fn packet<'b>(&self, buf: &'b [u8], e: &CqTaggedEntry) -> Option<&'b [u8]> {
        if e.len > self.packet_max {
            return None;
        }
        let at = if self.multi {
            (e.buf as usize).checked_sub(buf.as_ptr() as usize)?
        } else {
            0
        };
        buf.get(at..at.checked_add(e.len)?)
    }

    /// Whether the buffer of completion `flags` is to be posted again now: always for
    /// one packet per buffer, when the core released it for multi-receive.
    pub(super) fn released(&self, flags: u64) -> bool {
        !self.multi || OpFlags::from_bits_truncate(flags).contains(OpFlags::MULTI_RECV)
    }
}

impl Shared {
    /// Post the bounce buffers of MSG slot `slot` (once).
    pub(super) fn post_bufs(&self, state: &mut EpState, slot: usize) {
        let layout = self.bounce;
        let Some(m) = state.msgs.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if m.posted {
            return;
        }
        m.posted = true;
        if layout.multi {
            // Every packet must fit where the core places it: a buffer is released once
            // less than the largest packet is left.
            let min = layout.packet_max.to_ne_bytes();
            if let Err(e) = m.ep.setopt(
                OptLevel::Endpoint.to_raw() as i32,
                EpOption::MIN_MULTI_RECV.to_c_int(),
                &min,
            ) {
                ofi_core::ofi_warn!(NAME, "ep_data", "FI_OPT_MIN_MULTI_RECV on the core: {e}");
            }
        }
        for _ in 0..layout.count {
            m.bufs.push(vec![0u8; layout.len].into_boxed_slice());
        }
        for b in 0..layout.count {
            self.repost(state, slot, b);
        }
    }

    /// Post bounce buffer `b` of MSG slot `slot` (again).
    pub(super) fn repost(&self, state: &mut EpState, slot: usize, b: usize) {
        let multi = self.bounce.multi;
        let Some(m) = state.msgs.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let Some(buf) = m.bufs.get_mut(b) else {
            return;
        };
        let iov = Iov {
            base: buf.as_mut_ptr().cast(),
            len: buf.len(),
        };
        let ctx = mk_ctx(K_RX, ((slot as u32) << 12) | b as u32, m.gen);
        // SAFETY: the buffer is owned by the slot and outlives the core endpoint (module
        // invariants); the core writes it only until it completes it (or releases it).
        let r = unsafe {
            if multi {
                let msg = Msg {
                    msg_iov: &iov,
                    desc: std::ptr::null(),
                    iov_count: 1,
                    addr: ADDR_UNSPEC,
                    context: ctx,
                    data: 0,
                };
                m.ep.recvmsg(&msg, OpFlags::MULTI_RECV.bits())
            } else {
                m.ep.recv(
                    iov.base.cast(),
                    iov.len,
                    std::ptr::null_mut(),
                    ADDR_UNSPEC,
                    ctx,
                )
            }
        };
        if let Err(e) = r {
            ofi_core::ofi_warn!(NAME, "ep_data", "posting a bounce buffer: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(buf: *mut u8, len: usize, flags: OpFlags) -> CqTaggedEntry {
        CqTaggedEntry {
            op_context: 1,
            flags: flags.bits(),
            len,
            buf: buf.cast(),
            data: 0,
            tag: 0,
        }
    }

    #[test]
    fn the_layout_follows_the_core() {
        let s = Settings::default();
        let multi = Bounce::new(&s, Caps::MSG | Caps::MULTI_RECV);
        assert!(multi.multi);
        assert_eq!(multi.count, MULTI_BUFS);
        // As much room as one packet per buffer would have, at least.
        assert!(multi.count * multi.len >= s.msg_rx_size * s.buffer_size);
        let single = Bounce::new(&s, Caps::MSG);
        assert!(!single.multi);
        assert_eq!((single.count, single.len), (s.msg_rx_size, s.buffer_size));
    }

    #[test]
    fn a_packet_is_found_where_the_core_placed_it() {
        let s = Settings::default();
        let layout = Bounce::new(&s, Caps::MULTI_RECV);
        let mut buf = vec![0u8; layout.len];
        buf[1000..1004].copy_from_slice(b"rxm!");
        let base = buf.as_mut_ptr();
        // SAFETY: 1000 is inside `buf`.
        let e = entry(unsafe { base.add(1000) }, 4, OpFlags::RECV);
        assert_eq!(layout.packet(&buf, &e), Some(&b"rxm!"[..]));
        assert!(!layout.released(e.flags));
        assert!(layout.released((OpFlags::RECV | OpFlags::MULTI_RECV).bits()));
    }

    #[test]
    fn a_place_outside_the_buffer_or_too_long_is_refused() {
        let s = Settings::default();
        let layout = Bounce::new(&s, Caps::MULTI_RECV);
        let mut buf = vec![0u8; layout.len];
        let base = buf.as_mut_ptr();
        let end = layout.len;
        // Before the buffer, past its end, running over its end, longer than a packet.
        let cases = [
            (base.wrapping_sub(8), 4),
            (base.wrapping_add(end), 1),
            (base.wrapping_add(end - 2), 4),
            (base, s.buffer_size + 1),
        ];
        for (at, len) in cases {
            let e = entry(at, len, OpFlags::RECV);
            assert_eq!(layout.packet(&buf, &e), None, "{at:?} + {len}");
        }
        // One packet per buffer: at the start whatever the entry says, within bounds.
        let single = Bounce::new(&s, Caps::MSG);
        let mut small = vec![7u8; single.len];
        let e = entry(std::ptr::null_mut(), 3, OpFlags::RECV);
        assert_eq!(single.packet(&small, &e), Some(&[7u8, 7, 7][..]));
        assert!(single.released(e.flags));
        let too_long = entry(small.as_mut_ptr(), single.len + 1, OpFlags::RECV);
        assert_eq!(single.packet(&small, &too_long), None);
    }
}
