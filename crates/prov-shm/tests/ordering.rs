//! What keeps shm's RMA ordering claims (`FI_ORDER_RAW`, `FI_ORDER_WAW`, … at every
//! size; see `ofi_prov_shm::ORDER`) true when operations take different paths: a write
//! that streams through the bounce chunks stays queued for its ring while the target
//! does not free chunks, and an operation that would take one slot (an RMA read by CMA,
//! an inline write, an atomic) answers `FI_EAGAIN` meanwhile instead of passing it.
//! Once the target progresses, the later operation goes and acts after the write.
//!
//! The conformance check `ordering_rma_claims_hold` posts 4 KiB operations back to back,
//! which stream at once; these tests hold a write in the queue on purpose, where an
//! operation that overtook it would be seen (each test fails if the `FI_EAGAIN` guard
//! of its kind in `ep/rma.rs` is taken out). Every wait is bounded.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use ofi::{AddrFormat, AtomicOp, Caps, Datatype, Errno, OpFlags};
use ofi_conformance::fixture::pattern;
use ofi_conformance::node::{pair_of, poll, rdm_info, Node};

const BOUND: Duration = Duration::from_secs(20);
/// Longer than a ring's bounce chunks hold (16 × 64 KiB by default) and not above the
/// CMA threshold: the write streams, and needs the target to free chunks to finish.
const STREAMED: usize = 2 << 20;
const KEY: u64 = 0x5157;

/// An initiator `a` and a target `b` (shm linked into `ofi`), `b` at `dest` in `a`'s
/// AV, with a `STREAMED`-byte region of zeros registered under [`KEY`].
struct Setup {
    a: Node,
    b: Node,
    dest: u64,
    target: ofi::mr::MemoryRegion,
    /// The contexts of `a`'s completions so far.
    done: RefCell<Vec<usize>>,
}

/// A [`Setup`] whose initiator has a write of `STREAMED` bytes of pattern `seed`
/// queued to the target's offset 0 (context 1), and those bytes.
fn with_a_queued_write(seed: u8) -> (Setup, Vec<u8>) {
    let s = setup();
    let src = pattern(STREAMED, seed);
    s.streamed_write(&src);
    (s, src)
}

fn setup() -> Setup {
    let info = rdm_info("shm", AddrFormat::STR, Caps::RMA | Caps::ATOMIC);
    let (a, b, dest, _) = pair_of(&info);
    let access = OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE;
    let target = b
        .domain()
        .mr_reg_owned(vec![0u8; STREAMED], access, KEY)
        .expect("mr_reg");
    Setup {
        a,
        b,
        dest,
        target,
        done: RefCell::new(Vec::new()),
    }
}

impl Setup {
    /// `fi_read` (`read`) or `fi_write` of `len` bytes at `buf` from / to the target's
    /// offset `at`, with context `ctx`.
    ///
    /// # Safety
    /// `buf` is valid for `len` bytes (writable for a read) until the completion.
    unsafe fn rma(
        &self,
        read: bool,
        buf: *mut u8,
        len: usize,
        at: usize,
        ctx: usize,
    ) -> ofi::Result<()> {
        let (ep, desc, at) = (&self.a.ep, std::ptr::null_mut(), at as u64);
        // SAFETY: by the caller's contract.
        unsafe {
            if read {
                ep.read(buf, len, desc, self.dest, at, KEY, ctx)
            } else {
                ep.write(buf, len, desc, self.dest, at, KEY, ctx)
            }
        }
    }

    /// `fi_write` of all of `src` to the target's offset 0, context 1; the target does
    /// not progress, so the write stays queued (its chunks full).
    fn streamed_write(&self, src: &[u8]) {
        // SAFETY: `src` outlives the write (the caller waits for its completion).
        unsafe { self.rma(false, src.as_ptr().cast_mut(), src.len(), 0, 1) }
            .expect("the streamed fi_write");
        // The initiator's own progress moves the write on as far as chunks allow.
        for _ in 0..16 {
            assert!(poll(&self.a.cq).is_none(), "the write completed early");
        }
    }

    /// Progress both sides once, keeping `a`'s completions.
    fn drive(&self) {
        let _ = poll(&self.b.cq);
        match poll(&self.a.cq) {
            Some(Ok(e)) => self.done.borrow_mut().push(e.op_context),
            Some(Err((ctx, e))) => panic!("context {ctx}: {e}"),
            None => {}
        }
    }

    /// Post the read or write of `buf` at the target's offset `at` (context 2) behind the
    /// queued write (see [`Setup::post_behind_the_write`]).
    fn rma_behind_the_write(&self, read: bool, buf: &mut [u8], at: usize) {
        let (ptr, len) = (buf.as_mut_ptr(), buf.len());
        self.post_behind_the_write(|| {
            // SAFETY: `buf` outlives the operation: `post_behind_the_write` waits for
            // its completion.
            unsafe { self.rma(read, ptr, len, at, 2) }
        });
    }

    /// Post with `post` (an operation with context 2) while the streamed write is still
    /// queued (shm answers `FI_EAGAIN` until it has gone whole into the ring): on
    /// `FI_EAGAIN`, drive both sides and post again, within [`BOUND`]; then drive both
    /// until both operations completed.
    fn post_behind_the_write(&self, mut post: impl FnMut() -> ofi::Result<()>) {
        let deadline = Instant::now() + BOUND;
        loop {
            match post() {
                Ok(()) => break,
                Err(e) if e.code() == Errno::EAGAIN && Instant::now() < deadline => self.drive(),
                Err(e) => panic!("the operation behind the write: {e}"),
            }
        }
        while self.done.borrow().len() < 2 {
            let so_far = self.done.borrow().clone();
            assert!(Instant::now() < deadline, "completions so far: {so_far:?}");
            self.drive();
        }
        let mut done = self.done.borrow().clone();
        done.sort_unstable();
        assert_eq!(done, vec![1, 2]);
    }
}

/// `FI_ORDER_RAW`: a read (one slot, carried out by the target with CMA) posted after a
/// streamed write waits for it and sees its last bytes.
#[test]
fn a_read_after_a_streamed_write_waits_and_sees_it() {
    let (s, src) = with_a_queued_write(7);
    const LEN: usize = 4096;
    let mut got = vec![0u8; LEN];
    s.rma_behind_the_write(true, &mut got, STREAMED - LEN);
    assert!(
        got[..] == src[STREAMED - LEN..],
        "the read did not see the write"
    );
}

/// `FI_ORDER_WAW`: an inline write (one slot) to the last bytes of a streamed write's
/// range (those of its last fragment, not yet in the ring) waits for it and lands last.
#[test]
fn an_inline_write_after_a_streamed_write_lands_last() {
    let (s, src) = with_a_queued_write(9);
    const LEN: usize = 64;
    let mut small = pattern(LEN, 200);
    let at = STREAMED - LEN;
    s.rma_behind_the_write(false, &mut small, at);
    let t = s.target.owned_to_vec().expect("target bytes");
    assert!(t[at..] == small[..], "the earlier write landed last");
    assert!(t[..at] == src[..at], "the rest of the streamed write");
}

/// Atomics after RMA (`FI_ORDER_WAW` covers both): an atomic add (one slot) to the last
/// word of a streamed write's range waits for the write and adds to what it wrote.
#[test]
fn an_atomic_after_a_streamed_write_acts_on_what_it_wrote() {
    let (s, src) = with_a_queued_write(11);
    let at = STREAMED - 8;
    let one = 1u64;
    s.post_behind_the_write(|| {
        // SAFETY: `one` outlives the atomic: `post_behind_the_write` waits for it.
        unsafe {
            s.a.ep.atomic(
                (&one as *const u64).cast(),
                1,
                std::ptr::null_mut(),
                s.dest,
                at as u64,
                KEY,
                Datatype::Uint64,
                AtomicOp::Sum,
                2,
            )
        }
    });
    let t = s.target.owned_to_vec().expect("target bytes");
    let written = u64::from_ne_bytes(src[at..].try_into().unwrap());
    let now = u64::from_ne_bytes(t[at..].try_into().unwrap());
    assert_eq!(
        now,
        written.wrapping_add(1),
        "the atomic acted before the write"
    );
}
