//! Teardown in any order: a child keeps its parent alive, so dropping endpoints, CQs
//! and domains in any order is safe; closing a CQ bound to an open endpoint is
//! `FI_EBUSY`.

use ofi::Errno;

use crate::fixture::expect_errno;
use crate::fixture::{self, wait_ok, Fixture};
use crate::Subject;

/// Move `msg` (at most 8 bytes) from the first peer to the second (a sign of life);
/// `fi_addrs` are the peers' fabric addresses.
fn alive(peers: &[fixture::Peer], fi_addrs: &[u64], msg: &[u8]) {
    let (a, b) = (&peers[0], &peers[1]);
    let mut buf = [0u8; 8];
    fixture::post_recv(&b.ep, &mut buf, 1).unwrap();
    fixture::send(&a.ep, msg, fi_addrs[1], 2).unwrap();
    wait_ok(&a.cq, "send completion");
    assert_eq!(wait_ok(&b.cq, "receive completion").len, msg.len());
    assert_eq!(&buf[..msg.len()], msg);
}

/// A two-endpoint fixture, after a sign of life, taken apart: its peers, domain and
/// fabric (to be dropped in the order a check wants).
fn taken_apart_alive(
    s: &Subject,
) -> (Vec<fixture::Peer>, ofi::domain::Domain, ofi::fabric::Fabric) {
    let f = Fixture::new(s, 2);
    alive(&f.peers, &f.fi_addrs, b"ping");
    let Fixture {
        peers,
        domain,
        fabric,
        ..
    } = f;
    (peers, domain, fabric)
}

/// Drop the endpoints, then the CQs, AVs, domain and fabric.
pub fn teardown_drop_ep_before_cq(s: &Subject) {
    let (peers, domain, fabric) = taken_apart_alive(s);
    for p in peers {
        let fixture::Peer { ep, cq, av, .. } = p;
        drop(ep);
        drop(cq);
        drop(av);
    }
    drop(domain);
    drop(fabric);
}

/// Drop the CQs and AVs while their endpoints are open, then the endpoints.
pub fn teardown_drop_cq_before_ep(s: &Subject) {
    let (peers, domain, fabric) = taken_apart_alive(s);
    let mut eps = Vec::new();
    for p in peers {
        let fixture::Peer { ep, cq, av, .. } = p;
        drop(cq);
        drop(av);
        eps.push(ep);
    }
    drop(fabric);
    drop(domain);
    drop(eps);
}

/// Drop the fabric and domain handles first: the endpoints keep working.
pub fn teardown_drop_domain_first(s: &Subject) {
    let Fixture {
        peers,
        fi_addrs,
        domain,
        fabric,
        info,
    } = Fixture::new(s, 2);
    drop(domain);
    drop(fabric);
    alive(&peers, &fi_addrs, b"orphan");
    drop(info);
    drop(peers);
}

/// Closing a CQ or AV bound to an open endpoint is `FI_EBUSY`; after the endpoint is
/// closed they close.
pub fn teardown_close_bound_cq_is_ebusy(s: &Subject) {
    let Fixture {
        peers,
        domain,
        fabric,
        ..
    } = Fixture::new(s, 1);
    for p in peers {
        let fixture::Peer {
            mut ep,
            mut cq,
            mut av,
            ..
        } = p;
        expect_errno(
            cq.close(),
            Errno::EBUSY,
            "close of a CQ bound to an open endpoint",
        );
        expect_errno(
            av.close(),
            Errno::EBUSY,
            "close of an AV bound to an open endpoint",
        );
        ep.close().unwrap_or_else(|e| panic!("fi_close(ep): {e}"));
        cq.close().unwrap_or_else(|e| panic!("fi_close(cq): {e}"));
        av.close().unwrap_or_else(|e| panic!("fi_close(av): {e}"));
    }
    fixture::close_domain(fabric, domain);
}

/// Pairs of every endpoint type torn down in every order: endpoints first, the
/// domain and fabric first, the CQs and EQs first, the server side first.
pub fn teardown_pairs_any_order(s: &Subject) {
    use crate::pair::{each_type, Pair, PairSpec};
    each_type(
        s,
        ofi::Caps::MSG,
        |_| true,
        |t, info| {
            for order in 0..4 {
                let p = Pair::with_info(s, &PairSpec::new(t, ofi::Caps::MSG), info.clone());
                crate::checks::pairs::exchange(&p, 0, b"alive", 0x10);
                let Pair {
                    a,
                    b,
                    wait_set: _,
                    pep,
                    cm,
                    info: _,
                    domain,
                    fabric,
                } = p;
                drop(cm);
                match order {
                    0 => {
                        drop(a);
                        drop(b);
                        drop(pep);
                        drop(domain);
                        drop(fabric);
                    }
                    1 => {
                        drop(fabric);
                        drop(domain);
                        drop(pep);
                        drop(b);
                        drop(a);
                    }
                    2 => {
                        let crate::pair::Side {
                            ep: ea,
                            cq: qa,
                            cntr: ca,
                            av: va,
                            eq: xa,
                            ..
                        } = a;
                        let crate::pair::Side {
                            ep: eb,
                            cq: qb,
                            cntr: cb,
                            av: vb,
                            eq: xb,
                            ..
                        } = b;
                        drop((qa, qb, ca, cb, va, vb, xa, xb));
                        drop(domain);
                        drop(eb);
                        drop(ea);
                        drop(pep);
                        drop(fabric);
                    }
                    _ => {
                        drop(pep);
                        drop(b);
                        drop(domain);
                        drop(fabric);
                        drop(a);
                    }
                }
            }
        },
    );
}
