//! The provider's own tests through the public API: two processes (the test binary
//! re-executes itself in child mode), large messages by CMA and by bounce buffers with
//! integrity checks, a peer killed with SIGKILL, stale-region reclamation, and a
//! corrupted region. Every wait is bounded; every test checks that it leaves no
//! region of its own in /dev/shm.

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use ofi::abi::raw::{CqErrEntry, CqTaggedEntry};
use ofi::cq::CompletionQueue;
use ofi::registry::Registry;
use ofi::{Address, Caps, EpType, Errno, Info, OpFlags};
use ofi_conformance::fixture::{first_info, iov_of, pattern, post_recv, send, sendmsg};
use ofi_conformance::node::{endpoint_in, wait_for, Node};
use ofi_conformance::pair::poll;
use ofi_testkit::child::{hear, played_child, say, ChildProc};
use ofi_testkit::TestRng;

const CHILD_ENV: &str = "OFI_SHM_TEST_CHILD";
const BOUND: Duration = Duration::from_secs(20);
/// A message longer than a ring's bounce chunks hold (16 × 64 KiB by default) and not
/// above the CMA threshold: its transfer needs the receiver to free chunks.
const BEYOND_BOUNCE: usize = 2 << 20;

fn registry() -> Registry {
    ofi_conformance::plugin::linked_registry(&[ofi::abi::entry_for::<ofi_prov_shm::ShmProvider>()])
}

fn info(reg: &Registry) -> Info {
    let mut hints = Info::hints()
        .with_ep_type(EpType::Rdm)
        .with_caps(Caps::MSG | Caps::TAGGED | Caps::SOURCE);
    hints.fabric_attr.prov_name = Some("shm".into());
    first_info(reg, hints)
}

/// A [`Node`] of shm in a fabric of its own, from `reg`.
fn node(reg: &Registry) -> Node {
    let info = info(reg);
    Node::in_fabric(reg.open_fabric(&info).expect("fabric"), &info)
}

fn name_of(n: &Node) -> String {
    match &n.addr {
        Address::Str(s) => s.clone(),
        other => panic!("not a string address: {other:?}"),
    }
}

fn insert(n: &Node, addr: &str) -> u64 {
    n.av.insert(&[Address::Str(addr.to_string())])
        .expect("av insert")[0]
}

fn wait(cq: &CompletionQueue, what: &str) -> Result<CqTaggedEntry, CqErrEntry> {
    wait_for(&[], BOUND, what, || poll(cq))
}

fn wait_ok(cq: &CompletionQueue, what: &str) -> CqTaggedEntry {
    match wait(cq, what) {
        Ok(e) => e,
        Err(ee) => panic!("{what}: error completion {}", Errno(ee.err)),
    }
}

fn our_files(pid: u32) -> Vec<String> {
    let prefix = format!("ofi-shm-{pid}-");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// One message from `from` to `to` (AV index `dest` at `from`), checked on both sides.
fn one_good_message(from: &Node, to: &Node, dest: u64, msg: &[u8]) {
    let mut got = vec![0u8; msg.len()];
    to.recv(&mut got, 0x600d);
    from.send(msg, dest, 0x600e).expect("send");
    assert_eq!(wait_ok(&to.cq, "the receive").op_context, 0x600d);
    assert_eq!(got, msg);
    assert_eq!(wait_ok(&from.cq, "the send").op_context, 0x600e);
}

/// Map `n`'s region as a peer does.
fn map_region_of(n: &Node) -> ofi_prov_shm::region::Region {
    let name = name_of(n);
    ofi_prov_shm::region::Region::open_peer(name.strip_prefix("fi_shm://").unwrap())
        .expect("map the region")
}

/// Claim ring 0 of `region` by hand, as a sender claiming it would, naming `pid` as
/// the sender (so its CMA calls go to that process), and tell the owner.
fn claim_ring_0(region: &ofi_prov_shm::region::Region, pid: i32) -> ofi_prov_shm::region::Ring<'_> {
    use ofi_prov_shm::region::state;
    use std::sync::atomic::Ordering;
    let ring = region.ring(0);
    ring.claim()
        .compare_exchange(0, 0x1234_0001, Ordering::AcqRel, Ordering::Relaxed)
        .expect("claim ring 0");
    ring.write_identity(pid, "ofi-shm-fake", 0, 0);
    ring.state().store(state::READY, Ordering::Release);
    region.claims_gen().fetch_add(1, Ordering::AcqRel);
    ring
}

/// The bytes of a whole slot holding `slot`, as a sender writes them (the rest zero).
fn slot_bytes(slot: &ofi_prov_shm::proto::Slot) -> [u8; ofi_prov_shm::region::SLOT_SIZE] {
    let mut raw = [0u8; ofi_prov_shm::region::SLOT_SIZE];
    let mut view = ofi_prov_shm::proto::SlotHeader::new_checked(&mut raw[..]).unwrap();
    slot.emit(&mut view).expect("a slot the sender can write");
    raw
}

/// Write `raw` (a whole slot's bytes; its sequence word is the producer's to write) into
/// slot `i` of `ring`, reserved by `p`, and publish it, as a sender does.
fn publish_slot(
    region: &ofi_prov_shm::region::Region,
    ring: &ofi_prov_shm::region::Ring<'_>,
    p: &mut ofi_prov_shm::ring::Producer,
    i: usize,
    raw: &[u8],
) {
    region.map().write_bytes(ring.slot_off(i) + 8, &raw[8..]);
    p.publish(ring);
}

/// Ring 0 of a node's region driven by hand, as a sender drives it: the region mapped
/// as a peer maps it ([`map_region_of`]), the ring claimed in `pid`'s name
/// ([`claim_ring_0`]), and the producer that reserves its slots.
struct HandRing {
    region: ofi_prov_shm::region::Region,
    producer: ofi_prov_shm::ring::Producer,
}

impl HandRing {
    fn claim(n: &Node, pid: i32) -> HandRing {
        let region = map_region_of(n);
        claim_ring_0(&region, pid);
        let producer = ofi_prov_shm::ring::Producer::new(region.geometry().slots, 0);
        HandRing { region, producer }
    }

    /// The ring.
    fn ring(&self) -> ofi_prov_shm::region::Ring<'_> {
        self.region.ring(0)
    }

    /// Reserve the next slot and publish `raw` in it ([`publish_slot`]); false while
    /// the ring is full.
    fn try_put(&mut self, raw: &[u8]) -> bool {
        let ring = self.region.ring(0);
        let Some(i) = self.producer.reserve(&ring).expect("ring words") else {
            return false;
        };
        publish_slot(&self.region, &ring, &mut self.producer, i, raw);
        true
    }
}

/// The bytes of a whole inline slot carrying `payload` (message `id`, header `flags`,
/// tag and CQ data 0), as a sender writes them.
fn inline_slot_bytes(flags: u8, id: u64, payload: &[u8]) -> [u8; ofi_prov_shm::region::SLOT_SIZE] {
    use ofi_prov_shm::proto::{Body, Slot, INLINE_OFF};
    let mut raw = slot_bytes(&Slot {
        flags,
        tag: 0,
        data: 0,
        body: Body::Inline {
            len: payload.len(),
            id,
        },
    });
    raw[INLINE_OFF..INLINE_OFF + payload.len()].copy_from_slice(payload);
    raw
}

// ------------------------------------------------------------------ child process

/// The child: open a node, print its address, read the parent's, then act by mode.
fn child_main(mode: &str) {
    let reg = registry();
    let n = node(&reg);
    say(&format!("ADDR {}", name_of(&n)));
    let line = hear();
    let peer = line.strip_prefix("PEER ").expect("PEER line").to_string();
    let dest = insert(&n, &peer);
    match mode {
        // Receive one message of any size up to 8 MiB and send it back.
        "echo" => {
            let mut buf = vec![0u8; 8 << 20];
            n.recv(&mut buf, 1);
            let r = wait_ok(&n.cq, "child receive");
            assert_eq!(r.op_context, 1);
            buf.truncate(r.len);
            n.send(&buf, dest, 2).expect("child send");
            let c = wait_ok(&n.cq, "child send");
            assert_eq!(c.op_context, 2);
            say(&format!("DONE {}", r.len));
        }
        // Start a 1 MiB send (through bounce chunks when CMA is disabled), then stop
        // progressing until killed.
        "send-then-sleep" => {
            let big = pattern(BEYOND_BOUNCE, 7);
            n.send(&big, dest, 3).expect("child send");
            say("DONE 0");
            std::thread::sleep(Duration::from_secs(60));
            drop(big);
        }
        // Do nothing (never progress) until killed.
        "sleep" => {
            say("DONE 0");
            std::thread::sleep(Duration::from_secs(60));
        }
        other => panic!("unknown child mode {other}"),
    }
    std::io::stdout().flush().unwrap();
}

/// In the child process of a two-process test (which runs itself again with
/// `OFI_SHM_TEST_CHILD` naming the child's mode, see [`spawn_child`]): play the
/// child's side and return true.
fn child_side() -> bool {
    played_child(CHILD_ENV, child_main)
}

/// Runs test `test` again as the child, in `mode`, with the extra environment `env`.
fn spawn_child(test: &str, mode: &str, env: &[(&str, &str)]) -> ChildProc {
    ChildProc::spawn(CHILD_ENV, test, mode, env, BOUND)
}

/// The child's announced address.
fn child_addr(c: &mut ChildProc) -> String {
    c.line("ADDR")
        .strip_prefix("ADDR ")
        .expect("ADDR line")
        .trim()
        .to_string()
}

/// Send `len` bytes to an echoing child (test `test`, run again as the child) and check
/// what comes back.
fn echo_through_child(test: &str, len: usize, env: &[(&str, &str)]) {
    let reg = registry();
    let n = node(&reg);
    let mut c = spawn_child(test, "echo", env);
    let caddr = child_addr(&mut c);
    let dest = insert(&n, &caddr);
    let mut back = vec![0u8; len];
    n.recv(&mut back, 10);
    c.send_line(&format!("PEER {}", name_of(&n)));
    let payload = pattern(len, len as u8);
    n.send(&payload, dest, 11).expect("send");
    let (mut sent, mut got) = (false, None);
    while !(sent && got.is_some()) {
        let e = wait_ok(&n.cq, "parent");
        match e.op_context {
            11 => sent = true,
            10 => got = Some(e.len),
            o => panic!("unexpected context {o}"),
        }
    }
    assert_eq!(got, Some(len));
    assert!(back == payload, "the echo of {len} bytes differs");
    assert_eq!(c.line("DONE"), format!("DONE {len}"));
    c.finish();
}

#[test]
fn two_process_small_message() {
    if child_side() {
        return;
    }
    echo_through_child("two_process_small_message", 64, &[]);
}

#[test]
fn two_process_1mib_by_cma() {
    if child_side() {
        return;
    }
    // The child sends its echo by CMA (its threshold is lowered; the parent's 1 MiB
    // goes through the bounce pipeline, the default below 4 MiB).
    echo_through_child(
        "two_process_1mib_by_cma",
        1 << 20,
        &[("FI_SHM_CMA_THRESHOLD", "65536")],
    );
}

#[test]
fn two_process_6mib_by_cma_both_ways() {
    if child_side() {
        return;
    }
    // Above the default threshold: CMA in both directions.
    echo_through_child("two_process_6mib_by_cma_both_ways", (6 << 20) + 5, &[]);
}

#[test]
fn two_process_1mib_by_bounce_buffers() {
    if child_side() {
        return;
    }
    // The child refuses CMA for its receives, so the parent's send to it goes through
    // the bounce chunks; the child itself sends back through bounce (its param).
    echo_through_child(
        "two_process_1mib_by_bounce_buffers",
        (1 << 20) + 13,
        &[("FI_SHM_DISABLE_CMA", "1")],
    );
}

#[test]
fn killed_peer_fails_pending_sends_and_its_region_is_reclaimed() {
    if child_side() {
        return;
    }
    let reg = registry();
    let n = node(&reg);
    let mut c = spawn_child(
        "killed_peer_fails_pending_sends_and_its_region_is_reclaimed",
        "sleep",
        &[],
    );
    let caddr = child_addr(&mut c);
    c.send_line(&format!("PEER {}", name_of(&n)));
    assert_eq!(c.line("DONE"), "DONE 0");
    let dest = insert(&n, &caddr);
    // More than the bounce chunks hold needs the receiver, which never progresses:
    // pending.
    let big = pattern(BEYOND_BOUNCE, 1);
    n.send(&big, dest, 77).expect("send");
    assert!(
        poll(&n.cq).is_none(),
        "nothing completes while the peer sleeps"
    );
    let pid = c.child.id();
    c.child.kill().expect("SIGKILL the child");
    c.child.wait().expect("reap the child");
    match wait(&n.cq, "after the kill") {
        Err(ee) => {
            assert_eq!(Errno(ee.err), Errno::ECONNRESET);
            assert_eq!(ee.op_context, 77);
        }
        Ok(e) => panic!("expected an error completion, got context {}", e.op_context),
    }
    // A send to the dead peer now fails at once.
    let e = n.send(b"x", dest, 78).expect_err("send to a dead peer");
    assert_eq!(e.code(), Errno::ECONNREFUSED, "{e}");
    // The child's region is stale (SIGKILL left it); the next endpoint opened on the
    // host reclaims it. (Another test of this binary opening an endpoint meanwhile
    // may already have done so, hence at most one.)
    assert!(our_files(pid).len() <= 1, "the killed child had one region");
    let n2 = node(&reg);
    assert!(
        our_files(pid).is_empty(),
        "stale region reclaimed at the next open"
    );
    drop(n2);
    drop(n);
    assert!(our_files(pid).is_empty());
}

#[test]
fn corrupted_slots_are_skipped_and_good_ones_delivered() {
    use ofi_prov_shm::proto::{self, Body, Slot};
    use ofi_prov_shm::ring::RingWords;
    use std::sync::atomic::Ordering;

    let reg = registry();
    let b = node(&reg);
    // Act as a hostile sender on ring 0.
    let mut hand = HandRing::claim(&b, std::process::id() as i32);
    let mut put = |raw: &[u8]| assert!(hand.try_put(raw), "a free slot");
    let mut raw = [0u8; ofi_prov_shm::region::SLOT_SIZE];
    // 1: inline length beyond the slot.
    raw[8] = proto::SlotKind::Inline as u8;
    raw[12..16].copy_from_slice(&100_000u32.to_le_bytes());
    put(&raw);
    // 2: bounce chunk index out of range.
    let bad = Slot {
        flags: 0,
        tag: 0,
        data: 0,
        body: Body::Bounce(proto::BounceSlot {
            total: 10,
            id: 1,
            frag: proto::ChunkFrag {
                offset: 0,
                chunk: 0,
                clen: 10,
            },
        }),
    };
    let mut r2 = slot_bytes(&bad);
    // The chunk index sits at body offset 24.
    r2[56..60].copy_from_slice(&999u32.to_le_bytes());
    put(&r2);
    // 3: unknown kind.
    let mut r3 = [0u8; ofi_prov_shm::region::SLOT_SIZE];
    r3[8] = 77;
    put(&r3);
    // 4: a good inline message.
    put(&inline_slot_bytes(0, 0, b"ok"));
    let mut buf = [0u8; 64];
    b.recv(&mut buf, 5);
    let e = wait_ok(&b.cq, "the good message");
    assert_eq!((e.op_context, e.len), (5, 2));
    assert_eq!(&buf[..2], b"ok");
    assert!(poll(&b.cq).is_none(), "the corrupt slots delivered nothing");
    let _ = hand.ring().tail().load(Ordering::Acquire);
}

/// A sender that asks for acknowledgements (`F_ACK`) and never takes them: the
/// receiver fills the ack ring, queues up to `ACK_BACKLOG_MAX` more, then leaves the
/// ring unread — no unbounded queue — and goes on once the sender takes its acks,
/// which come in send order with every message delivered intact.
#[test]
fn a_sender_that_takes_no_acks_is_held_at_the_backlog_limit() {
    use ofi_prov_shm::ep::ACK_BACKLOG_MAX;
    use ofi_prov_shm::proto::F_ACK;
    use ofi_prov_shm::ring::Consumer;
    use std::sync::atomic::Ordering;

    let reg = registry();
    let b = node(&reg);
    let mut hand = HandRing::claim(&b, std::process::id() as i32);
    let geo = hand.region.geometry();
    let total = geo.slots + ACK_BACKLOG_MAX + 40;
    let mut bufs = vec![[0u8; 8]; total];
    for (k, buf) in bufs.iter_mut().enumerate() {
        b.recv(buf, 1000 + k);
    }
    // Message k (its number as its payload) as ack id k + 1.
    let put = |hand: &mut HandRing, k: usize| -> bool {
        hand.try_put(&inline_slot_bytes(
            F_ACK,
            k as u64 + 1,
            &(k as u64).to_le_bytes(),
        ))
    };
    let mut got = 0usize;
    let take = |got: &mut usize| {
        while let Some(c) = poll(&b.cq) {
            let e = c.unwrap_or_else(|ee| panic!("error completion {}", Errno(ee.err)));
            assert_eq!(e.op_context, 1000 + *got, "receives complete in order");
            *got += 1;
        }
    };
    // Publish while the receiver takes messages in; stop once nothing moves.
    let (mut sent, mut idle) = (0usize, 0u32);
    while sent < total && idle < 2000 {
        if put(&mut hand, sent) {
            sent += 1;
            idle = 0;
        } else {
            let before = got;
            take(&mut got);
            idle = if got == before { idle + 1 } else { 0 };
        }
    }
    for _ in 0..2000 {
        take(&mut got);
    }
    assert_eq!(sent, total, "the ring had room for the rest");
    assert_eq!(
        got,
        geo.slots + ACK_BACKLOG_MAX,
        "the receiver stopped at a full ack ring plus the backlog limit"
    );
    // Now the sender takes its acks: the receiver goes on to the end.
    let ring = hand.ring();
    let acks = ring.acks();
    let mut c = Consumer::new(geo.slots, 0);
    let mut ids = Vec::new();
    let deadline = Instant::now() + BOUND;
    while ids.len() < total || got < total {
        assert!(
            Instant::now() < deadline,
            "acks {} of {total}, messages {got}",
            ids.len()
        );
        while let Some(i) = c.peek(&acks) {
            ids.push(ring.ack_id(i).load(Ordering::Relaxed));
            assert_eq!(ring.ack_status(i).load(Ordering::Relaxed), 0);
            c.release(&acks);
        }
        take(&mut got);
    }
    assert_eq!(
        ids,
        (1..=total as u64).collect::<Vec<_>>(),
        "acks in send order"
    );
    for (k, buf) in bufs.iter().enumerate() {
        assert_eq!(u64::from_le_bytes(*buf), k as u64, "message {k}");
    }
}

/// A hostile sender on one ring of each of several receivers: seeded random slots of
/// every kind, well formed and not — lengths, iov counts, chunk indices, keys, remote
/// offsets and ids at and around their limits, random flags, tags and data — with
/// random bounce chunk contents and states, and random values stored now and then in
/// the control words a sender may write (its head, ack tail, CMA word, chunk states).
/// Its pid is a sleeping child's, so CMA calls the receiver makes on the slots'
/// addresses land there. Each receiver must stay up (every CQ read gives an entry, an
/// error entry or nothing; nothing panics), still take a well-behaved peer's tagged
/// message intact, and close leaving no region file. In-process, this catches a
/// panic (overflow and index checks are on in test builds), a crash, a hang or a
/// leak; the parser's limits themselves are pinned by `proto`'s tests, and offsets
/// derived from shared words are reduced into the mapping by construction
/// (`region::Ring`). `OFI_SHM_FUZZ_SEED` and `OFI_SHM_FUZZ_SLOTS` (per receiver)
/// replay or lengthen a run.
#[test]
fn a_hostile_sender_cannot_crash_or_wedge_the_receiver() {
    use ofi_prov_shm::proto::{self, Body, Slot, INLINE_OFF, RMA_INLINE_CAP};
    use ofi_prov_shm::region::SLOT_SIZE;
    use ofi_prov_shm::ring::{Consumer, Producer};
    use std::sync::atomic::Ordering;

    const FINAL_TAG: u64 = 0xf1a1_7a90_0000_0001;
    const FINAL: &[u8; 16] = b"well-behaved-end";
    let mut rng = TestRng::from_env("OFI_SHM_FUZZ_SEED", 0x5eed_f00d);
    let seed = rng.seed();
    let per_receiver: usize = ofi_testkit::env_count("OFI_SHM_FUZZ_SLOTS", 600);
    let mut sleeper = Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep");
    let reg = registry();
    let a = node(&reg);
    let sizes = [0usize, 1, 8, 64, 200, 4096, 70_000];
    for episode in 0..6 {
        let why = format!("seed {seed:#x}, receiver {episode}");
        // Receives: untagged of assorted sizes, tagged taking any tag; each reposted
        // when it completes.
        let mut bufs: Vec<Vec<u8>> = (0..48usize)
            .map(|k| {
                vec![
                    0u8;
                    if k.is_multiple_of(2) {
                        sizes[k / 2 % sizes.len()]
                    } else {
                        256
                    }
                ]
            })
            .collect();
        let b = node(&reg);
        let b_file = name_of(&b)["fi_shm://".len()..].to_string();
        let access = OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE;
        let mr = b
            .domain()
            .mr_reg_owned(vec![0u8; 4096], access, 0x4242)
            .expect("mr_reg");
        let post = |k: usize, buf: &mut Vec<u8>| {
            // SAFETY: `bufs` outlives `b` (declared first, so dropped last); a buffer is
            // reposted only after its completion.
            unsafe {
                if k.is_multiple_of(2) {
                    b.ep.recv(
                        buf.as_mut_ptr(),
                        buf.len(),
                        std::ptr::null_mut(),
                        ofi::ADDR_UNSPEC,
                        k,
                    )
                } else {
                    b.ep.trecv(
                        buf.as_mut_ptr(),
                        buf.len(),
                        std::ptr::null_mut(),
                        ofi::ADDR_UNSPEC,
                        0,
                        u64::MAX,
                        k,
                    )
                }
            }
            .unwrap_or_else(|e| panic!("{why}: post receive {k}: {e}"))
        };
        for (k, buf) in bufs.iter_mut().enumerate() {
            post(k, buf);
        }
        let mut found_final = false;
        let drain = |bufs: &mut Vec<Vec<u8>>, found: &mut bool| {
            for _ in 0..4 {
                let Some(c) = poll(&b.cq) else { return };
                let (ctx, ok) = match c {
                    Ok(e) => (e.op_context, Some(e)),
                    Err(ee) => (ee.op_context, None),
                };
                if let Some(e) = ok {
                    let data = bufs.get(ctx).and_then(|b| b.get(..FINAL.len()));
                    if e.tag == FINAL_TAG && e.len == FINAL.len() && data == Some(&FINAL[..]) {
                        *found = true;
                    }
                }
                if ctx < bufs.len() {
                    post(ctx, &mut bufs[ctx]);
                }
            }
        };
        let region = map_region_of(&b);
        let ring = claim_ring_0(&region, sleeper.id() as i32);
        let geo = region.geometry();
        let (chunks, chunk_size) = (geo.chunks as u64, geo.chunk_size as u64);
        let near = [
            0,
            1,
            7,
            8,
            63,
            64,
            200,
            4095,
            4096,
            4097,
            chunks.saturating_sub(1),
            chunks,
            chunk_size,
            chunk_size + 1,
            1 << 20,
            u32::MAX as u64,
            1 << 40,
            u64::MAX - 7,
            u64::MAX,
        ];
        let mut p = Producer::new(geo.slots, 0);
        let mut acks = Consumer::new(geo.slots, 0);
        for _ in 0..per_receiver {
            // Take acks as a sender does (or the ring stalls at the backlog limit).
            while acks.peek(&ring.acks()).is_some() {
                acks.release(&ring.acks());
            }
            let Some(i) = (0..200).find_map(|_| {
                let r = p.reserve(&ring).ok().flatten();
                if r.is_none() {
                    drain(&mut bufs, &mut found_final);
                    while acks.peek(&ring.acks()).is_some() {
                        acks.release(&ring.acks());
                    }
                }
                r
            }) else {
                // The receiver stopped taking this ring (a half-sent bounce message
                // waiting for its fragments, say): legitimate; next receiver.
                break;
            };
            let mut raw = [0u8; SLOT_SIZE];
            let val = |rng: &mut TestRng| {
                if rng.chance(60) {
                    rng.pick(&near)
                } else {
                    rng.next_u64()
                }
            };
            let mut tag = rng.next_u64();
            if tag == FINAL_TAG {
                tag = 0;
            }
            let flags = if rng.chance(90) {
                rng.below(8) as u8
            } else {
                rng.next_u64() as u8
            };
            if rng.chance(60) {
                // Well formed as far as the encoder goes; the fields are hostile.
                let key = if rng.chance(50) {
                    0x4242
                } else {
                    val(&mut rng)
                };
                let id = val(&mut rng);
                let niov = 1 + rng.below(4) as usize;
                let mut iov = [(0u64, 0u64); proto::RTS_IOVS];
                for v in iov.iter_mut().take(niov) {
                    *v = (val(&mut rng), rng.below(5000));
                }
                let total = iov.iter().take(niov).map(|v| v.1).sum::<u64>() as usize;
                let bufs = proto::BufList { iov, niov };
                // Where an RMA goes: mostly inside the test's registration.
                let remote = |rng: &mut TestRng| proto::RemoteMem {
                    key,
                    raddr: if rng.chance(70) {
                        rng.below(4200)
                    } else {
                        val(rng)
                    },
                };
                let body = match rng.below(7) {
                    0 => Body::Inline {
                        len: rng.below(proto::INLINE_CAP as u64 + 1) as usize,
                        id,
                    },
                    1 => Body::Rts(proto::RtsSlot { total, id, bufs }),
                    2 | 3 => {
                        let chunk = if rng.chance(90) {
                            rng.below(chunks)
                        } else {
                            rng.pick(&near)
                        } as usize;
                        let clen = rng.below(chunk_size + 2) as usize;
                        if (chunk as u64) < chunks {
                            let off = ring.chunk_off(chunk);
                            let junk: Vec<u8> =
                                (0..chunk_size).map(|_| rng.next_u64() as u8).collect();
                            region.map().write_bytes(off, &junk);
                            ring.chunk_state(chunk).store(1, Ordering::Release);
                        }
                        // Mostly whole messages in one chunk: a message left unfinished
                        // makes the receiver skip whatever else the ring brings.
                        let whole = if rng.chance(95) {
                            clen
                        } else {
                            val(&mut rng) as usize
                        };
                        let frag = proto::ChunkFrag {
                            offset: 0,
                            chunk,
                            clen,
                        };
                        if rng.chance(50) {
                            Body::Bounce(proto::BounceSlot {
                                total: whole,
                                id,
                                frag,
                            })
                        } else {
                            Body::WriteFrag(proto::WriteFragSlot {
                                total: whole,
                                id,
                                at: proto::RemoteMem {
                                    key,
                                    raddr: rng.below(4200),
                                },
                                frag,
                            })
                        }
                    }
                    4 => Body::Rma(proto::RmaSlot {
                        read: rng.chance(50),
                        total,
                        id,
                        at: remote(&mut rng),
                        bufs,
                    }),
                    _ => Body::WriteInline(proto::WriteInlineSlot {
                        len: rng.below(RMA_INLINE_CAP as u64 + 2) as usize,
                        id,
                        at: remote(&mut rng),
                    }),
                };
                let data = rng.next_u64();
                let slot = Slot {
                    flags,
                    tag,
                    data,
                    body,
                };
                let mut view = proto::SlotHeader::new_checked(&mut raw[..]).unwrap();
                slot.emit(&mut view).unwrap();
                if rng.chance(30) {
                    for b in raw[INLINE_OFF..].iter_mut() {
                        if rng.chance(5) {
                            *b = rng.next_u64() as u8;
                        }
                    }
                }
            } else {
                // Header fields and body words from the edges, bytes at random.
                raw[8] = if rng.chance(90) {
                    1 + rng.below(8) as u8
                } else {
                    rng.next_u64() as u8
                };
                raw[9] = flags;
                raw[10] = if rng.chance(80) {
                    rng.below(6) as u8
                } else {
                    rng.next_u64() as u8
                };
                raw[12..16].copy_from_slice(&(val(&mut rng) as u32).to_le_bytes());
                raw[16..24].copy_from_slice(&tag.to_le_bytes());
                raw[24..32].copy_from_slice(&rng.next_u64().to_le_bytes());
                for w in raw[32..].chunks_mut(8) {
                    let v = val(&mut rng).to_le_bytes();
                    w.copy_from_slice(&v[..w.len()]);
                }
                if raw[8] == proto::SlotKind::Atomic as u8 {
                    // op, datatype, family, inline: mostly in range.
                    raw[64] = rng.below(22) as u8;
                    raw[65] = rng.below(16) as u8;
                    raw[66] = rng.below(4) as u8;
                    raw[67] = rng.below(3) as u8;
                    if rng.chance(50) {
                        raw[48..56].copy_from_slice(&0x4242u64.to_le_bytes());
                        raw[56..64].copy_from_slice(&rng.below(4200).to_le_bytes());
                    }
                }
            }
            publish_slot(&region, &ring, &mut p, i, &raw);
            // Now and then, garbage in a word the sender may write, put right after a
            // few polls (as the sender's own state keeps it).
            if rng.chance(3) {
                let garbage = val(&mut rng);
                match rng.below(4) {
                    0 => ring.head_word().store(garbage, Ordering::Release),
                    1 => ring.ack_tail_word().store(garbage, Ordering::Release),
                    2 => ring.cma().store(garbage as u32, Ordering::Release),
                    _ => ring
                        .chunk_state(rng.below(chunks) as usize)
                        .store(garbage as u32, Ordering::Release),
                }
                drain(&mut bufs, &mut found_final);
                ring.ack_tail_word().store(acks.tail(), Ordering::Release);
            }
            drain(&mut bufs, &mut found_final);
        }
        // A well-behaved peer is still served: its tagged message arrives intact.
        let dest = insert(&a, &name_of(&b));
        a.ep.tinject(FINAL, dest, FINAL_TAG)
            .unwrap_or_else(|e| panic!("{why}: inject to the receiver: {e}"));
        let deadline = Instant::now() + BOUND;
        while !found_final {
            assert!(
                Instant::now() < deadline,
                "{why}: the good message never came"
            );
            drain(&mut bufs, &mut found_final);
        }
        drop(region);
        drop(mr);
        drop(b);
        assert!(
            !std::path::Path::new("/dev/shm").join(&b_file).exists(),
            "{why}: {b_file} left in /dev/shm"
        );
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

/// The other direction: a hostile receiver. `a` sends to `b`, which the test never
/// progresses; the test answers in its place through `b`'s region — acknowledgements
/// with ids near and far from the real ones and statuses that are no FI code at all
/// (`i32::MIN` among them), a garbage sequence word now and then, and garbage in the
/// words the receiver owns (the ring's released tail, the CMA word). `a` must stay up,
/// complete every operation exactly once with a success or a real FI error code, fail
/// what is left when `b` closes, and still talk to a fresh peer.
#[test]
fn a_hostile_receiver_cannot_crash_the_sender() {
    use ofi_prov_shm::region::{state, Ring};
    use ofi_prov_shm::ring::Producer;
    use std::collections::HashMap;
    use std::sync::atomic::Ordering;

    // More operations than the ring has slots: the ring fills, so `a` reads the tail
    // word the test garbles.
    const OPS: usize = 200;
    let mut rng = TestRng::from_env("OFI_SHM_FUZZ_SEED", 0x5eed_bac0);
    let seed = rng.seed();
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let a_file = name_of(&a)["fi_shm://".len()..].to_string();
    let dest = insert(&a, &name_of(&b));
    let region = map_region_of(&b);
    let geo = region.geometry();
    // The ring `a` holds in `b`'s region (found again whenever `a` reconnects).
    let find = || -> Option<(usize, u64)> {
        (0..geo.rings).find_map(|r| {
            let ring = region.ring(r);
            let claim = ring.claim().load(Ordering::Acquire);
            let ready = ring.state().load(Ordering::Acquire) == state::READY;
            let (_, name, _, _) = ring.read_identity()?;
            (claim != 0 && ready && name == a_file).then_some((r, claim))
        })
    };
    // Small enough never to wait for `b`'s CMA probe (which `b`, never progressed,
    // would not make).
    let payloads: Vec<Vec<u8>> = [8usize, 200, 3000].iter().map(|&n| vec![0x5a; n]).collect();
    let mut read_bufs: Vec<Vec<u8>> = (0..OPS).map(|_| vec![0u8; 64]).collect();
    let mut done: HashMap<usize, Option<i32>> = HashMap::new();
    let mut posted = 0usize;
    let post = |k: usize, rng: &mut TestRng, read_bufs: &mut Vec<Vec<u8>>| -> bool {
        let ctx = 1000 + k;
        let r = match rng.below(3) {
            0 => {
                let p = &payloads[rng.below(payloads.len() as u64) as usize];
                let flags = OpFlags::DELIVERY_COMPLETE | OpFlags::COMPLETION;
                // `payloads` outlives every send (declared before the sends, dropped
                // after the last completion is read).
                sendmsg(&a.ep, p, dest, ctx, flags)
            }
            1 => {
                let p = &payloads[0];
                // SAFETY: `payloads` outlives `a`'s use of it (declared before `a`
                // sends and dropped after the last completion is read).
                unsafe {
                    a.ep.write(
                        p.as_ptr(),
                        p.len(),
                        std::ptr::null_mut(),
                        dest,
                        0,
                        0x4242,
                        ctx,
                    )
                }
            }
            _ => {
                let buf = &mut read_bufs[k];
                // SAFETY: as above; each read has a buffer of its own.
                unsafe {
                    a.ep.read(
                        buf.as_mut_ptr(),
                        64,
                        std::ptr::null_mut(),
                        dest,
                        0,
                        0x4242,
                        ctx,
                    )
                }
            }
        };
        match r {
            Ok(()) => true,
            // Full, or refused because `b`'s words broke the protocol (its ring is
            // corrupt, so the connection is dropped): try again later.
            Err(e) if e.code() == Errno::EAGAIN => false,
            Err(e) => {
                assert!(
                    [Errno::EPROTO, Errno::ECONNRESET, Errno::ECONNREFUSED].contains(&e.code()),
                    "post {k}: {e}"
                );
                false
            }
        }
    };
    let take = |done: &mut HashMap<usize, Option<i32>>| {
        while let Some(c) = poll(&a.cq) {
            let (ctx, err) = match c {
                Ok(e) => (e.op_context, None),
                Err(ee) => {
                    assert!(
                        ee.err > 0 && Errno(ee.err).name().is_some(),
                        "seed {seed:#x}: error completion with code {} (not an FI code)",
                        ee.err
                    );
                    (ee.op_context, Some(ee.err))
                }
            };
            assert!(
                done.insert(ctx, err).is_none(),
                "seed {seed:#x}: context {ctx} completed twice"
            );
        }
    };
    let mut at: Option<(usize, u64)> = None;
    let mut acks = Producer::new(geo.slots, 0);
    for step in 0..6000 {
        if posted < OPS && rng.chance(5) && post(posted, &mut rng, &mut read_bufs) {
            posted += 1;
        }
        take(&mut done);
        let now = find();
        if now != at {
            // A new connection (first use, or `a` reconnected after a corrupt ring):
            // its ack ring starts at `a`'s consumer position, 0.
            at = now;
            acks = Producer::new(geo.slots, 0);
        }
        let Some((r, _)) = at else { continue };
        let ring: Ring<'_> = region.ring(r);
        match rng.below(100) {
            0..=69 => {
                let Ok(Some(i)) = acks.reserve(&ring.acks()) else {
                    continue;
                };
                let id = match rng.below(4) {
                    0 | 1 => (rng.below(3) << 32) | rng.below(70),
                    2 => rng.next_u64(),
                    _ => rng.pick(&[0, u64::MAX, 1 << 32, u32::MAX as u64]),
                };
                let any = rng.next_u64() as u32 as u64;
                let status = rng.pick(&[
                    0,
                    0,
                    0,
                    5,
                    104,
                    256,
                    265,
                    u32::MAX as u64,
                    i32::MIN as u32 as u64,
                    i32::MAX as u64,
                    99_999,
                    any,
                ]) as u32;
                ring.ack_id(i).store(id, Ordering::Relaxed);
                ring.ack_status(i).store(status, Ordering::Relaxed);
                acks.publish(&ring.acks());
            }
            70..=72 => {
                let i = acks.head() as usize;
                let garbage = rng.next_u64();
                ofi_prov_shm::ring::RingWords::seq(&ring.acks(), i)
                    .store(garbage, Ordering::Release);
            }
            // The second half: `b`'s released tail too (read by `a` once the ring
            // is full; a corrupt one ends the connection and `a` reconnects).
            73..=74 if step >= 3000 => ring.tail_word().store(rng.next_u64(), Ordering::Release),
            75..=76 => ring.cma().store(rng.next_u64() as u32, Ordering::Release),
            // Bounce chunks handed back (as `b` would once it has read them), or not
            // quite: any value.
            77..=84 => {
                let v = if rng.chance(80) {
                    0
                } else {
                    rng.next_u64() as u32
                };
                ring.chunk_state(rng.below(geo.chunks as u64) as usize)
                    .store(v, Ordering::Release);
            }
            _ => {}
        }
    }
    // `b` goes away: whatever is left fails, each operation completes once.
    drop(region);
    drop(b);
    let deadline = Instant::now() + BOUND;
    while done.len() < posted {
        assert!(
            Instant::now() < deadline,
            "seed {seed:#x}: {} of {posted} operations completed",
            done.len()
        );
        take(&mut done);
    }
    assert!(
        poll(&a.cq).is_none(),
        "nothing beyond the posted operations"
    );
    assert!(
        done.keys().all(|&c| (1000..1000 + posted).contains(&c)),
        "only contexts of ours"
    );
    // `a` still sends to a well-behaved peer.
    let c = node(&reg);
    let to_c = insert(&a, &name_of(&c));
    one_good_message(&a, &c, to_c, b"fine");
}

/// A receiver's ring that turns out corrupt while sends wait for room on it (its
/// released tail outside what the sender wrote): the sender fails every operation of
/// that connection with `FI_EPROTO` at once — they could never go — and reaches the
/// same peer again on a fresh ring afterwards.
#[test]
fn a_corrupt_ring_fails_the_sends_waiting_on_it() {
    use std::sync::atomic::Ordering;

    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let dest = insert(&a, &name_of(&b));
    let region = map_region_of(&b);
    let slots = region.geometry().slots;
    let payload = [7u8; 16];
    let big = vec![9u8; 3000];
    let flags = OpFlags::DELIVERY_COMPLETE | OpFlags::COMPLETION;
    // `b` is not progressed: small sends fill the ring; larger ones (a bounce chunk
    // each) then wait in `a`'s queue.
    let n = slots + 6;
    for k in 0..n {
        let p: &[u8] = if k < slots { &payload } else { &big };
        sendmsg(&a.ep, p, dest, 100 + k, flags).expect("sendmsg");
    }
    for _ in 0..100 {
        assert!(poll(&a.cq).is_none(), "nothing completes before b acts");
    }
    let ring = (0..region.geometry().rings)
        .map(|r| region.ring(r))
        .find(|r| r.claim().load(Ordering::Acquire) != 0)
        .expect("a's ring");
    ring.tail_word().store(u64::MAX / 3, Ordering::Release);
    let mut failed = Vec::new();
    let deadline = Instant::now() + BOUND;
    while failed.len() < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n} sends failed",
            failed.len()
        );
        match poll(&a.cq) {
            Some(Err(ee)) => {
                assert_eq!(Errno(ee.err), Errno::EPROTO, "context {}", ee.op_context);
                failed.push(ee.op_context);
            }
            Some(Ok(e)) => panic!("context {} succeeded on a corrupt ring", e.op_context),
            None => {}
        }
    }
    failed.sort_unstable();
    assert_eq!(failed, (100..100 + n).collect::<Vec<_>>());
    // A fresh connection to the same (still open) peer works.
    one_good_message(&a, &b, dest, &payload);
}

#[test]
fn no_region_files_remain_after_close() {
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let dest = insert(&a, &name_of(&b));
    let mut buf = [0u8; 8];
    b.recv(&mut buf, 1);
    a.send(b"hi", dest, 2).unwrap();
    wait_ok(&a.cq, "send");
    wait_ok(&b.cq, "recv");
    let (na, nb) = (name_of(&a), name_of(&b));
    drop(a);
    drop(b);
    for n in [na, nb] {
        let f = n.strip_prefix("fi_shm://").unwrap().to_string();
        assert!(
            !std::path::Path::new("/dev/shm").join(&f).exists(),
            "{f} left in /dev/shm"
        );
    }
}

/// `FI_PROGRESS_AUTO`: the domain's progress thread moves data without the
/// application reading a CQ.
#[test]
fn auto_progress_delivers_without_cq_reads() {
    let reg = registry();
    let mut inf = info(&reg);
    inf.domain_attr.data_progress = ofi::Progress::Auto;
    let fabric = reg.open_fabric(&inf).expect("fabric");
    let domain = fabric.domain(&inf).expect("domain");
    let (ea, ca, aa, _) = endpoint_in(&domain, &inf);
    let (eb, cb, _ab, bname) = endpoint_in(&domain, &inf);
    let dest = aa.insert(&[bname]).unwrap()[0];
    for len in [40usize, 5000, 300_000] {
        let mut buf = vec![0u8; len];
        // `buf` and `payload` outlive the operations (their completions are read below).
        post_recv(&eb, &mut buf, 1).unwrap();
        let payload = pattern(len, 9);
        send(&ea, &payload, dest, 2).unwrap();
        let deadline = Instant::now() + BOUND;
        let p = buf.as_ptr();
        // The progress thread writes the buffer behind our back: read it volatile.
        let arrived = || {
            (0..len).all(|i| {
                // SAFETY: `p` points to `len` live bytes of `buf`.
                unsafe { std::ptr::read_volatile(p.add(i)) == payload[i] }
            })
        };
        while !arrived() {
            assert!(
                Instant::now() < deadline,
                "auto progress did not deliver {len} bytes"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(wait_ok(&cb, "recv").len, len);
        assert_eq!(wait_ok(&ca, "send").op_context, 2);
    }
    drop((ea, eb));
}

/// `FI_DELIVERY_COMPLETE`: the send completes only once the receiver has placed the
/// data (each node has its own domain, so reading the sender's CQ does not progress
/// the receiver).
#[test]
fn delivery_complete_waits_for_the_receiver() {
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let dest = insert(&a, &name_of(&b));
    for len in [64usize, 100_000] {
        let mut buf = vec![0u8; len];
        b.recv(&mut buf, 1);
        let payload = pattern(len, 3);
        // `payload` lives until the send's completion is read.
        sendmsg(
            &a.ep,
            &payload,
            dest,
            9,
            OpFlags::DELIVERY_COMPLETE | OpFlags::COMPLETION,
        )
        .expect("sendmsg");
        for _ in 0..100 {
            assert!(poll(&a.cq).is_none(), "{len}: completed before delivery");
        }
        let r = wait_ok(&b.cq, "receive");
        assert_eq!(r.len, len);
        assert!(buf == payload);
        assert_eq!(wait_ok(&a.cq, "delivery").op_context, 9);
    }
}

/// `FI_DELIVERY_COMPLETE` with no receive posted: a message the receiver copies out
/// of the ring (inline, one bounce chunk, several) completes once the receiver has
/// taken it in, buffered — libfabric's delivery complete — and not before the
/// receiver runs; one it reads by CMA at match time (4 MiB and more) completes only
/// once a receive has it. Either way the data reaches the receive posted afterwards.
#[test]
fn delivery_complete_of_unexpected_messages() {
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let dest = insert(&a, &name_of(&b));
    for (k, len) in [64usize, 3000, 200_000, 5 << 20].into_iter().enumerate() {
        let by_cma = len >= 4 << 20;
        let payload = pattern(len, 30 + k as u8);
        let flags = OpFlags::DELIVERY_COMPLETE | OpFlags::COMPLETION;
        // `payload` lives until the send's completion is read.
        sendmsg(&a.ep, &payload, dest, 40 + k, flags).expect("sendmsg");
        for _ in 0..200 {
            assert!(
                poll(&a.cq).is_none(),
                "{len}: completed before the receiver ran"
            );
        }
        let mut buf = vec![0u8; len];
        if by_cma {
            for _ in 0..200 {
                assert!(poll(&b.cq).is_none());
                assert!(
                    poll(&a.cq).is_none(),
                    "{len}: completed before a receive had it"
                );
            }
            b.recv(&mut buf, 50 + k);
        }
        let deadline = Instant::now() + BOUND;
        let done = loop {
            assert!(Instant::now() < deadline, "{len}: no delivery completion");
            if let Some(c) = poll(&a.cq) {
                break c.unwrap_or_else(|ee| panic!("{len}: send error {}", Errno(ee.err)));
            }
            if !by_cma {
                assert!(poll(&b.cq).is_none(), "{len}: receive side completed");
            }
        };
        assert_eq!(done.op_context, 40 + k);
        if !by_cma {
            b.recv(&mut buf, 50 + k);
        }
        let r = wait_ok(&b.cq, "receive");
        assert_eq!((r.op_context, r.len), (50 + k, len));
        assert!(buf == payload, "{len}: data");
    }
}

/// Sends queued behind a large one (waiting for the CMA probe) keep their order, a
/// zero-length message included.
#[test]
fn queued_sends_keep_their_order() {
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let dest = insert(&a, &name_of(&b));
    let big = pattern(1 << 20, 5);
    let small = pattern(10, 6);
    let mut r1 = vec![0u8; 1 << 20];
    let mut r2 = vec![0u8; 16];
    let mut r3 = vec![0u8; 16];
    b.recv(&mut r1, 1);
    b.recv(&mut r2, 2);
    b.recv(&mut r3, 3);
    a.send(&big, dest, 11).unwrap();
    a.send(&[], dest, 12).unwrap();
    a.send(&small, dest, 13).unwrap();
    let mut got = Vec::new();
    let mut sent = 0;
    let deadline = Instant::now() + BOUND;
    while got.len() < 3 || sent < 3 {
        assert!(Instant::now() < deadline, "got {got:?}, {sent} sends");
        if let Some(c) = poll(&b.cq) {
            let e = c.unwrap_or_else(|ee| panic!("recv error {}", Errno(ee.err)));
            got.push((e.op_context, e.len));
        }
        if let Some(c) = poll(&a.cq) {
            c.unwrap_or_else(|ee| panic!("send error {}", Errno(ee.err)));
            sent += 1;
        }
    }
    assert_eq!(got, vec![(1, 1 << 20), (2, 0), (3, 10)]);
    assert!(r1 == big);
    assert_eq!(&r3[..10], &small[..]);
}

/// Bounce messages of both chunk classes interleaved — fragments of at most 16 KiB take
/// the first eight chunks, larger ones all sixteen, so the two compete for chunks — sent
/// in bursts before and after their receives are posted: every message arrives intact,
/// in order, and every send completes.
#[test]
fn small_and_large_bounce_messages_interleaved_arrive_in_order() {
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let dest = insert(&a, &name_of(&b));
    let sizes = [
        8 << 10,
        (200 << 10) + 3,
        1 << 10,
        64 << 10,
        16 << 10,
        (16 << 10) + 1,
        BEYOND_BOUNCE + 7,
        5000,
    ];
    let msgs: Vec<Vec<u8>> = (0..3 * sizes.len())
        .map(|k| pattern(sizes[k % sizes.len()], k as u8))
        .collect();
    let mut bufs: Vec<Vec<u8>> = msgs.iter().map(|m| vec![0u8; m.len()]).collect();
    let half = msgs.len() / 2;
    // The first half's receives are posted first (expected); the rest arrive before
    // theirs (unexpected, held in the sender's chunks or copied out).
    for (k, buf) in bufs.iter_mut().enumerate().take(half) {
        b.recv(buf, 1000 + k);
    }
    for (k, m) in msgs.iter().enumerate() {
        a.send(m, dest, k).expect("send");
    }
    let (mut got, mut sent) = (Vec::new(), 0);
    let mut posted = half;
    let deadline = Instant::now() + BOUND;
    while got.len() < msgs.len() || sent < msgs.len() {
        assert!(
            Instant::now() < deadline,
            "{} received, {sent} sent",
            got.len()
        );
        if let Some(c) = poll(&b.cq) {
            let e = c.unwrap_or_else(|ee| panic!("recv error {}", Errno(ee.err)));
            got.push(e.op_context - 1000);
        }
        if let Some(c) = poll(&a.cq) {
            c.unwrap_or_else(|ee| panic!("send error {}", Errno(ee.err)));
            sent += 1;
        }
        if posted < msgs.len() && got.len() == half {
            for (k, buf) in bufs.iter_mut().enumerate().skip(half) {
                b.recv(buf, 1000 + k);
            }
            posted = msgs.len();
        }
    }
    assert_eq!(got, (0..msgs.len()).collect::<Vec<_>>(), "arrival order");
    for (k, (buf, m)) in bufs.iter().zip(&msgs).enumerate() {
        assert!(buf == m, "message {k} ({} bytes) differs", m.len());
    }
}

/// A sender killed in the middle of a bounce-buffer transfer: the receive it was
/// filling completes with `FI_ECONNRESET` once the fragments that arrived are drained.
/// The receiver polls slowly (1 ms apart, as a loaded machine does): the dead sender is
/// still noticed within a few hundred polls (it took 65 536 idle polls, over a minute at
/// this pace, before the liveness check was tied to the idle path's periodic look).
#[test]
fn sender_killed_mid_transfer_fails_the_receive() {
    if child_side() {
        return;
    }
    let reg = registry();
    let n = node(&reg);
    let mut buf = vec![0u8; BEYOND_BOUNCE];
    n.recv(&mut buf, 21);
    let mut c = spawn_child(
        "sender_killed_mid_transfer_fails_the_receive",
        "send-then-sleep",
        &[("FI_SHM_DISABLE_CMA", "1")],
    );
    let _caddr = child_addr(&mut c);
    c.send_line(&format!("PEER {}", name_of(&n)));
    assert_eq!(c.line("DONE"), "DONE 0");
    c.child.kill().expect("SIGKILL the child");
    c.child.wait().expect("reap the child");
    let deadline = Instant::now() + BOUND;
    let done = loop {
        if let Some(c) = poll(&n.cq) {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "the interrupted receive: nothing within {BOUND:?} of slow polls"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    match done {
        Err(ee) => {
            assert_eq!(Errno(ee.err), Errno::ECONNRESET);
            assert_eq!(ee.op_context, 21);
        }
        Ok(e) => panic!("expected an error completion, got {} bytes", e.len),
    }
    // The first fragments did arrive before the sender died.
    assert_eq!(&buf[..4096], &pattern(BEYOND_BOUNCE, 7)[..4096]);
}

/// A peer that closes and comes back under the same name (`src_addr`) is reached
/// again: the old mapping is noticed closed and the name is mapped anew.
#[test]
fn a_peer_restarted_under_the_same_name_is_reached() {
    let reg = registry();
    let a = node(&reg);
    let name = format!("ofi-shm-test-restart-{}", std::process::id());
    let named = |reg: &Registry| {
        let mut inf = info(reg);
        inf.src_addr = Some(Address::Str(format!("fi_shm://{name}")));
        Node::in_fabric(reg.open_fabric(&inf).expect("fabric"), &inf)
    };
    let dest = insert(&a, &format!("fi_shm://{name}"));
    for round in 0..2u8 {
        let b = named(&reg);
        assert_eq!(name_of(&b), format!("fi_shm://{name}"));
        let mut buf = [0u8; 8];
        b.recv(&mut buf, 1);
        a.send(&[round; 8], dest, 2).expect("send");
        wait_ok(&a.cq, "send");
        assert_eq!(wait_ok(&b.cq, "recv").len, 8);
        assert_eq!(buf, [round; 8]);
        drop(b);
    }
    // Nobody under that name now: refused at once.
    let e = a.send(b"x", dest, 3).expect_err("send to a closed peer");
    assert_eq!(e.code(), Errno::ECONNREFUSED, "{e}");
    assert!(!std::path::Path::new("/dev/shm").join(&name).exists());
}

/// RMA writes larger than a slot stream through the bounce chunks (below the CMA
/// threshold): the data lands, remote CQ data arrives, and a bad key or a range past
/// the region fails at the initiator with the MR table's code, target untouched.
#[test]
fn rma_writes_through_bounce_chunks() {
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let dest = insert(&a, &name_of(&b));
    let size = 300_000usize;
    let access = OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE;
    let target = b
        .domain()
        .mr_reg_owned(vec![0u8; size], access, 0x4242)
        .expect("mr_reg");
    let src = pattern(size, 4);
    let write = |len: usize, addr: u64, key: u64, data: Option<u64>, ctx: usize| {
        // SAFETY: `src` outlives the write (its completion is read below).
        unsafe {
            match data {
                Some(d) => a.ep.writedata(
                    src.as_ptr(),
                    len,
                    std::ptr::null_mut(),
                    d,
                    dest,
                    addr,
                    key,
                    ctx,
                ),
                None => a.ep.write(
                    src.as_ptr(),
                    len,
                    std::ptr::null_mut(),
                    dest,
                    addr,
                    key,
                    ctx,
                ),
            }
        }
        .expect("fi_write")
    };
    // A good write of the whole region, with remote CQ data. The target has to
    // progress (read its CQ) for the fragments to flow.
    write(size, 0, 0x4242, Some(0xabcd), 1);
    let t = wait_ok(&b.cq, "the target's remote CQ data");
    assert_eq!(t.data, 0xabcd);
    assert_ne!(t.flags & OpFlags::REMOTE_CQ_DATA.bits(), 0);
    assert_eq!(wait_ok(&a.cq, "write").op_context, 1);
    assert!(target.owned_to_vec().unwrap() == src, "the written bytes");
    // A bad key and a range past the end: error completions, nothing written.
    target.write_owned(0, &vec![0u8; size]).unwrap();
    write(10_000, 0, 0x9999, None, 2);
    write(10_000, (size - 100) as u64, 0x4242, None, 3);
    let mut errs = Vec::new();
    let deadline = Instant::now() + BOUND;
    while errs.len() < 2 {
        assert!(Instant::now() < deadline, "errors: {errs:?}");
        let _ = poll(&b.cq);
        if let Some(c) = poll(&a.cq) {
            match c {
                Err(ee) => errs.push((ee.op_context, Errno(ee.err))),
                Ok(e) => panic!("context {} succeeded", e.op_context),
            }
        }
    }
    assert_eq!(errs, vec![(2, Errno::ENOKEY), (3, Errno::EFAULT)]);
    assert!(target.owned_to_vec().unwrap().iter().all(|&x| x == 0));
}

/// `fi_atomicmsg` and `fi_fetch_atomicmsg` (one local and one remote buffer).
#[test]
fn atomic_msg_calls() {
    use ofi::abi::raw::{Ioc, MsgAtomic, RmaIoc};
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let dest = insert(&a, &name_of(&b));
    let access = OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE;
    let init: Vec<u8> = [10u64, 20].iter().flat_map(|v| v.to_ne_bytes()).collect();
    let target = b.domain().mr_reg_owned(init, access, 0x77).expect("mr_reg");
    let operand: Vec<u8> = [1u64, 2].iter().flat_map(|v| v.to_ne_bytes()).collect();
    let ioc = [Ioc {
        addr: operand.as_ptr() as *mut _,
        count: 2,
    }];
    let rioc = [RmaIoc {
        addr: 0,
        count: 2,
        key: 0x77,
    }];
    let msg = MsgAtomic {
        msg_iov: ioc.as_ptr(),
        desc: std::ptr::null(),
        iov_count: 1,
        addr: dest,
        rma_iov: rioc.as_ptr(),
        rma_iov_count: 1,
        datatype: ofi::Datatype::Uint64.to_raw(),
        op: ofi::AtomicOp::Sum.to_raw(),
        context: 31,
        data: 0,
    };
    // SAFETY: every buffer outlives the operation (its completion is read below).
    unsafe { a.ep.atomicmsg(&msg, OpFlags::COMPLETION.bits()) }.expect("fi_atomicmsg");
    let deadline = Instant::now() + BOUND;
    let done = loop {
        assert!(Instant::now() < deadline, "no atomic completion");
        let _ = poll(&b.cq);
        if let Some(c) = poll(&a.cq) {
            break c.unwrap_or_else(|ee| panic!("atomic error {}", Errno(ee.err)));
        }
    };
    assert_eq!(done.op_context, 31);
    let t = target.owned_to_vec().unwrap();
    assert_eq!(t[..8], 11u64.to_ne_bytes());
    assert_eq!(t[8..], 22u64.to_ne_bytes());
    // Fetch: the old values come back.
    let mut result = vec![0u8; 16];
    let res = [Ioc {
        addr: result.as_mut_ptr() as *mut _,
        count: 2,
    }];
    let msg = MsgAtomic { context: 32, ..msg };
    // SAFETY: as above.
    unsafe {
        a.ep.fetch_atomicmsg(&msg, res.as_ptr(), std::ptr::null(), 1, 0)
    }
    .expect("fi_fetch_atomicmsg");
    let deadline = Instant::now() + BOUND;
    loop {
        assert!(Instant::now() < deadline, "no fetch completion");
        let _ = poll(&b.cq);
        if let Some(c) = poll(&a.cq) {
            assert_eq!(c.expect("fetch ok").op_context, 32);
            break;
        }
    }
    assert_eq!(result[..8], 11u64.to_ne_bytes());
    assert_eq!(result[8..], 22u64.to_ne_bytes());
    assert_eq!(target.owned_to_vec().unwrap()[..8], 12u64.to_ne_bytes());
}

/// `fi_inject` up to `inject_size` (4096) beyond a slot: more injects than there are
/// bounce chunks, the buffer overwritten right after each call. The first ones go
/// through chunks at once, the rest from private copies; all arrive intact and in
/// order, with no send completion; one byte more is `FI_EMSGSIZE`.
#[test]
fn large_injects_survive_buffer_reuse_and_busy_chunks() {
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let dest = insert(&a, &name_of(&b));
    let size = info(&reg).tx_attr.inject_size;
    assert_eq!(size, 4096);
    // Eight chunks per ring by default: twenty injects cannot all take one.
    const N: usize = 20;
    let mut buf = vec![0u8; size];
    for i in 0..N {
        let len = [300, 1000, size][i % 3];
        buf[..len].copy_from_slice(&pattern(len, i as u8));
        a.ep.inject(&buf[..len], dest).expect("inject");
        // The call is over: the buffer is the application's again.
        buf.fill(0xee);
    }
    assert_eq!(
        a.ep.inject(&vec![1u8; size + 1], dest).unwrap_err().code(),
        Errno::EMSGSIZE
    );
    let mut rbufs: Vec<Vec<u8>> = (0..N).map(|_| vec![0u8; size]).collect();
    for (i, r) in rbufs.iter_mut().enumerate() {
        b.recv(r, 100 + i);
    }
    let deadline = Instant::now() + BOUND;
    let mut got = Vec::new();
    while got.len() < N {
        assert!(Instant::now() < deadline, "received {got:?}");
        if let Some(c) = poll(&a.cq) {
            panic!("an inject completed: {c:?}");
        }
        if let Some(c) = poll(&b.cq) {
            let e = c.unwrap_or_else(|ee| panic!("recv error {}", Errno(ee.err)));
            got.push((e.op_context, e.len));
        }
    }
    for (i, r) in rbufs.iter().enumerate() {
        let len = [300, 1000, size][i % 3];
        assert_eq!(got[i], (100 + i, len));
        assert!(r[..len] == pattern(len, i as u8)[..], "message {i}");
    }
    assert!(poll(&a.cq).is_none());
}

/// `FI_INJECT` on `fi_tsendmsg` beyond a slot: the buffer is free on return, the
/// send still completes (a completion was asked for).
#[test]
fn tsendmsg_with_fi_inject_copies_the_data() {
    use ofi::abi::raw::MsgTagged;
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let dest = insert(&a, &name_of(&b));
    let mut data = pattern(3000, 9);
    let want = data.clone();
    let iov = iov_of(&mut data);
    let msg = MsgTagged {
        msg_iov: &iov,
        desc: std::ptr::null(),
        iov_count: 1,
        addr: dest,
        tag: 7,
        ignore: 0,
        context: 31,
        data: 0,
    };
    // SAFETY: `msg` and the iov it points to are valid for the call; with FI_INJECT
    // the data is not used after it returns.
    unsafe { a.ep.tsendmsg(&msg, OpFlags::INJECT.bits()) }.expect("tsendmsg");
    data.fill(0);
    let mut r = vec![0u8; 4096];
    // `r` outlives the receive (its completion is read below).
    b.trecv(&mut r, 7, 32);
    let mut sent = false;
    let mut got = None;
    let deadline = Instant::now() + BOUND;
    while !sent || got.is_none() {
        assert!(Instant::now() < deadline);
        if let Some(c) = poll(&a.cq) {
            assert_eq!(c.expect("send").op_context, 31);
            sent = true;
        }
        if let Some(c) = poll(&b.cq) {
            got = Some(c.expect("recv"));
        }
    }
    let e = got.unwrap();
    assert_eq!((e.op_context, e.len, e.tag), (32, 3000, 7));
    assert!(r[..3000] == want[..]);
}

/// `fi_inject_write` up to `inject_size` beyond a slot: streamed from a private copy,
/// the bytes land, no completion; one byte more is `FI_EMSGSIZE`.
#[test]
fn large_inject_writes_land() {
    let reg = registry();
    let a = node(&reg);
    let b = node(&reg);
    let dest = insert(&a, &name_of(&b));
    let size = 4096;
    let access = OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE;
    let target = b
        .domain()
        .mr_reg_owned(vec![0u8; 2 * size], access, 0x77)
        .expect("mr_reg");
    let mut src = pattern(size, 3);
    let want = src.clone();
    a.ep.inject_write(&src, dest, 100, 0x77)
        .expect("inject_write");
    src.fill(0);
    assert_eq!(
        a.ep.inject_write(&vec![1u8; size + 1], dest, 0, 0x77)
            .unwrap_err()
            .code(),
        Errno::EMSGSIZE
    );
    let deadline = Instant::now() + BOUND;
    loop {
        assert!(Instant::now() < deadline, "the write never landed");
        // The target progresses when its CQ is read; the initiator's has no entry.
        assert!(poll(&b.cq).is_none());
        assert!(poll(&a.cq).is_none());
        let now = target.owned_to_vec().unwrap();
        if now[100..100 + size] == want[..] {
            assert!(now[..100].iter().all(|&x| x == 0));
            assert!(now[100 + size..].iter().all(|&x| x == 0));
            break;
        }
    }
}
