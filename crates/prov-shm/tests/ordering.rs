//! What keeps shm's RMA ordering claims (`FI_ORDER_RAW`, `FI_ORDER_WAW`, … at every
//! size; see `ofi_prov_shm::ORDER`) true when operations take different paths: a write
//! that streams through the bounce chunks stays queued for its ring while the target
//! does not free chunks, and an operation that would take one slot (an RMA read by CMA,
//! an inline write, an atomic) answers `FI_EAGAIN` meanwhile instead of passing it.
//! Once the target progresses, the later operation goes and acts after the write.
//!
//! The conformance check `ordering_rma_claims_hold` posts 4 KiB operations back to back,
//! which stream at once; these tests hold a write in the queue on purpose, where an
//! operation that overtook it would be seen. Every wait is bounded.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use ofi::getinfo::GetinfoRequest;
use ofi::registry::Registry;
use ofi::{Address, Caps, EpType, Errno, Info, OpFlags, API_VERSION};
use ofi_conformance::node::Node;
use ofi_conformance::pair::poll;

const BOUND: Duration = Duration::from_secs(20);
/// Longer than a ring's bounce chunks hold (16 × 64 KiB by default) and not above the
/// CMA threshold: the write streams, and needs the target to free chunks to finish.
const STREAMED: usize = 2 << 20;
const KEY: u64 = 0x5157;

fn registry() -> Registry {
    ofi_conformance::plugin::linked_registry(&[ofi::abi::entry_for::<ofi_prov_shm::ShmProvider>()])
}

fn node(reg: &Registry) -> Node {
    let mut hints = Info::hints()
        .with_ep_type(EpType::Rdm)
        .with_caps(Caps::RMA | Caps::ATOMIC);
    hints.fabric_attr.prov_name = Some("shm".into());
    let info = reg
        .getinfo(&GetinfoRequest {
            hints: Some(hints),
            ..GetinfoRequest::new(API_VERSION)
        })
        .expect("getinfo shm")[0]
        .clone();
    Node::in_fabric(reg.open_fabric(&info).expect("fabric"), &info)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// An initiator `a`, a target `b` with a `STREAMED`-byte region of zeros registered
/// under [`KEY`], and `b`'s address in `a`'s AV.
struct Setup {
    a: Node,
    b: Node,
    dest: u64,
    target: ofi::mr::MemoryRegion,
    /// The contexts of `a`'s completions so far.
    done: RefCell<Vec<usize>>,
}

fn setup() -> Setup {
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let Address::Str(name) = &b.addr else {
        panic!("shm addresses are strings")
    };
    let dest =
        a.av.insert(&[Address::Str(name.clone())])
            .expect("av insert")[0];
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
    /// `fi_write` of all of `src` to the target's offset 0, context 1; the target does
    /// not progress, so the write stays queued (its chunks full).
    fn streamed_write(&self, src: &[u8]) {
        // SAFETY: `src` outlives the write (the caller waits for its completion).
        unsafe {
            self.a.ep.write(
                src.as_ptr(),
                src.len(),
                std::ptr::null_mut(),
                self.dest,
                0,
                KEY,
                1,
            )
        }
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
            Some(Err(ee)) => panic!("context {}: {}", ee.op_context, Errno(ee.err)),
            None => {}
        }
    }

    /// Post with `post` while the streamed write is still queued (shm answers
    /// `FI_EAGAIN` until it has gone whole into the ring); on `FI_EAGAIN`, drive both
    /// sides and post again, within [`BOUND`].
    fn post_behind_the_write(&self, what: &str, mut post: impl FnMut() -> ofi::Result<()>) {
        let deadline = Instant::now() + BOUND;
        loop {
            match post() {
                Ok(()) => return,
                Err(e) if e.code() == Errno::EAGAIN && Instant::now() < deadline => self.drive(),
                Err(e) => panic!("{what}: {e}"),
            }
        }
    }

    /// Drive both sides until `a` has the completions of contexts 1 and 2.
    fn wait_both(&self) {
        let deadline = Instant::now() + BOUND;
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
    let s = setup();
    let src = pattern(STREAMED, 7);
    s.streamed_write(&src);
    const LEN: usize = 4096;
    let mut got = vec![0u8; LEN];
    let at = (STREAMED - LEN) as u64;
    s.post_behind_the_write("the read", || {
        // SAFETY: `got` outlives the read (its completion is awaited below).
        unsafe {
            s.a.ep.read(
                got.as_mut_ptr(),
                LEN,
                std::ptr::null_mut(),
                s.dest,
                at,
                KEY,
                2,
            )
        }
    });
    s.wait_both();
    assert!(
        got[..] == src[STREAMED - LEN..],
        "the read did not see the write"
    );
}

/// `FI_ORDER_WAW`: an inline write (one slot) to the last bytes of a streamed write's
/// range (those of its last fragment, not yet in the ring) waits for it and lands last.
#[test]
fn an_inline_write_after_a_streamed_write_lands_last() {
    let s = setup();
    let src = pattern(STREAMED, 9);
    s.streamed_write(&src);
    const LEN: usize = 64;
    let small = pattern(LEN, 200);
    let at = STREAMED - LEN;
    s.post_behind_the_write("the inline write", || {
        // SAFETY: `small` outlives the write (its completion is awaited below).
        unsafe {
            s.a.ep.write(
                small.as_ptr(),
                LEN,
                std::ptr::null_mut(),
                s.dest,
                at as u64,
                KEY,
                2,
            )
        }
    });
    s.wait_both();
    let t = s.target.owned_to_vec().expect("target bytes");
    assert!(t[at..] == small[..], "the earlier write landed last");
    assert!(t[..at] == src[..at], "the rest of the streamed write");
}
