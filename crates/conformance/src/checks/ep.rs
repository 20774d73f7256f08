//! Endpoint life cycle and its errors (fi_endpoint(3) ERRORS), on every endpoint type
//! with `FI_MSG`: `fi_enable` without a CQ is `FI_ENOCQ`, a connectionless endpoint
//! without an AV `FI_ENOAV`, an `FI_EP_MSG` endpoint without an EQ `FI_ENOEQ`; binding after `fi_enable` is `FI_EOPBADSTATE`; a CQ bound
//! with `FI_SELECTIVE_COMPLETION` but neither `FI_TRANSMIT` nor `FI_RECV` is
//! `FI_EBADFLAGS`; a receive too small is `FI_ETRUNC` with `olen`; closing a CQ,
//! counter, AV or EQ still bound to an open endpoint is `FI_EBUSY`.

use ofi::av::AvAttr;
use ofi::cq::CqAttr;
use ofi::domain::Domain;
use ofi::fabric::Fabric;
use ofi::{Caps, CqFormat, EpType, Errno, Info, OpFlags};

use crate::fixture::{pattern, post_recv, send};
use crate::pair::{each_pair, each_type, Pair, PairSpec};
use crate::{fixture, Subject};

/// Run `f` on a fresh fabric and domain of every endpoint type with `FI_MSG`.
fn each_msg_domain(s: &Subject, mut f: impl FnMut(EpType, &Info, &Fabric, &Domain)) {
    each_type(
        s,
        Caps::MSG,
        |_| true,
        |t, info| {
            let (fabric, domain) = fixture::open_domain(s, &info);
            f(t, &info, &fabric, &domain);
        },
    );
}

/// `fi_enable` without a CQ: `FI_ENOCQ`; connectionless without an AV: `FI_ENOAV`;
/// `FI_EP_MSG` without an EQ: `FI_ENOEQ`.
pub fn ep_enable_without_cq_or_av(s: &Subject) {
    each_msg_domain(s, |t, info, f, d| {
        // A fresh endpoint with only a CQ bound: `fi_enable` fails with `missing`.
        let enable_with_only_a_cq = |missing: Errno, what: &str| {
            let ep = d.endpoint(info).unwrap();
            let cq = d.cq_open(&CqAttr::with_format(CqFormat::Tagged)).unwrap();
            ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
            fixture::expect_errno(ep.enable(), missing, what);
        };
        let mut ep = d.endpoint(info).unwrap();
        if crate::connectionless(t) {
            let av = d.av_open(&AvAttr::default()).unwrap();
            ep.bind_av(&av).unwrap();
            fixture::expect_errno(ep.enable(), Errno::ENOCQ, "fi_enable without a CQ");
            ep.close().unwrap();
            enable_with_only_a_cq(Errno::ENOAV, "fi_enable without an AV");
        } else {
            // FI_EP_MSG: with an EQ but no CQ, FI_ENOCQ; with a CQ but no EQ, FI_ENOEQ.
            let eq = f.eq_open(&ofi::eq::EqAttr::default()).unwrap();
            ep.bind_eq(&eq).unwrap();
            fixture::expect_errno(ep.enable(), Errno::ENOCQ, "fi_enable with an EQ but no CQ");
            ep.close().unwrap();
            enable_with_only_a_cq(Errno::ENOEQ, "fi_enable with a CQ but no EQ");
        }
    });
}

/// Binding a CQ to an enabled endpoint is `FI_EOPBADSTATE` (objects "must be bound
/// to endpoints before they are enabled"; the ERRORS section's code for a state that
/// does not permit the operation).
pub fn ep_bind_after_enable_is_eopbadstate(s: &Subject) {
    each_pair(s, Caps::MSG, |p| {
        let cq = p
            .domain
            .cq_open(&CqAttr::with_format(CqFormat::Tagged))
            .unwrap();
        let e =
            p.a.ep
                .bind(&cq, OpFlags::TRANSMIT)
                .expect_err("a bind after fi_enable");
        assert_eq!(
            e.code(),
            Errno::EOPBADSTATE,
            "fi_ep_bind after fi_enable: {e}"
        );
    });
}

/// A second CQ for a direction that has one is `FI_EINVAL` (a CQ for the other
/// direction still binds); a CQ bound with an unknown flag is `FI_EBADFLAGS`.
pub fn ep_bind_cq_twice_is_einval(s: &Subject) {
    each_msg_domain(s, |_t, info, _f, d| {
        let cq1 = d.cq_open(&CqAttr::with_format(CqFormat::Tagged)).unwrap();
        let cq2 = d.cq_open(&CqAttr::with_format(CqFormat::Tagged)).unwrap();
        let ep = d.endpoint(info).unwrap();
        fixture::expect_errno(
            ep.bind(&cq1, OpFlags::TRANSMIT | OpFlags::READ),
            Errno::EBADFLAGS,
            "CQ bind with FI_READ",
        );
        ep.bind(&cq1, OpFlags::TRANSMIT)
            .unwrap_or_else(|e| panic!("first CQ for FI_TRANSMIT: {e}"));
        fixture::expect_errno(
            ep.bind(&cq2, OpFlags::TRANSMIT),
            Errno::EINVAL,
            "second CQ for FI_TRANSMIT",
        );
        ep.bind(&cq2, OpFlags::RECV)
            .unwrap_or_else(|e| panic!("a CQ for FI_RECV after the refusal: {e}"));
    });
}

/// A CQ bound with `FI_SELECTIVE_COMPLETION` but neither `FI_TRANSMIT` nor `FI_RECV`
/// ("must be OR'ed with FI_TRANSMIT and/or FI_RECV") is `FI_EBADFLAGS`.
pub fn ep_bind_selective_alone_is_ebadflags(s: &Subject) {
    each_msg_domain(s, |_t, info, _f, d| {
        let cq = d.cq_open(&CqAttr::with_format(CqFormat::Tagged)).unwrap();
        let ep = d.endpoint(info).unwrap();
        fixture::expect_errno(
            ep.bind(&cq, OpFlags::SELECTIVE_COMPLETION),
            Errno::EBADFLAGS,
            "FI_SELECTIVE_COMPLETION without FI_TRANSMIT / FI_RECV",
        );
    });
}

/// A receive buffer smaller than the message: an error completion `FI_ETRUNC` with
/// its context and `olen` = the bytes that did not fit; the part that fit is there;
/// the pair keeps working. Under
/// [`Semantics::TRUNCATION_BREAKS_CONNECTION`](crate::Semantics::TRUNCATION_BREAKS_CONNECTION):
/// `FI_ETRUNC` with its context, then the connection is gone (see there).
pub fn pair_recv_too_small_is_etrunc(s: &Subject) {
    each_pair(s, Caps::MSG, |p| {
        let mut small = [0u8; 16];
        post_recv(&p.b.ep, &mut small, 0x51).unwrap();
        let payload = pattern(64, 9);
        send(&p.a.ep, &payload, p.a.peer, 0x50).unwrap();
        if s.has(crate::Semantics::TRUNCATION_BREAKS_CONNECTION)
            && p.info.ep_type() == ofi::EpType::Msg
        {
            truncation_breaks_connection(p, &payload);
            return;
        }
        assert_eq!(p.wait_ok(0, "send completion").op_context, 0x50);
        let ee = p.wait_err(1, "truncated receive");
        assert_eq!(Errno(ee.err), Errno::ETRUNC, "error code");
        assert_eq!(ee.op_context, 0x51, "error completion context");
        assert_eq!(ee.olen, 64 - 16, "olen");
        assert!(small[..] == payload[..16], "the part that fit");
        crate::checks::pairs::exchange(p, 0, b"still fine", 0x60);
    });
}

/// `pair_recv_too_small_is_etrunc` where an error breaks the connection: the sender's
/// completion (success, or an error with its context), the receiver's `FI_ETRUNC`,
/// then a receive and a send posted afterwards are flushed (`FI_ECANCELED`).
fn truncation_breaks_connection(p: &Pair, payload: &[u8]) {
    match p.wait(0) {
        Some(Ok(e)) => assert_eq!(e.op_context, 0x50, "send completion context"),
        Some(Err(ee)) => {
            assert_eq!(ee.op_context, 0x50, "send error completion context");
            assert_ne!(Errno(ee.err), Errno(0), "send error without a code");
        }
        None => panic!("send of a message too long for the receive: no completion"),
    }
    let ee = p.wait_err(1, "truncated receive");
    assert_eq!(Errno(ee.err), Errno::ETRUNC, "error code");
    assert_eq!(ee.op_context, 0x51, "error completion context");
    let mut after = [0u8; 128];
    post_recv(&p.b.ep, &mut after, 0x52).unwrap();
    let ee = p.wait_err(1, "a receive posted on the broken connection");
    assert_eq!(
        (Errno(ee.err), ee.op_context),
        (Errno::ECANCELED, 0x52),
        "a receive posted after the error is flushed"
    );
    // The call may also refuse at once: the connection is known to be gone.
    if send(&p.a.ep, payload, p.a.peer, 0x53).is_ok() {
        let ee = p.wait_err(0, "a send posted on the broken connection");
        assert_eq!(
            (Errno(ee.err), ee.op_context),
            (Errno::ECANCELED, 0x53),
            "a send posted after the error is flushed"
        );
    }
    assert!(
        after.iter().all(|&b| b == 0),
        "a flushed receive was written"
    );
}

/// Closing a CQ, counter, AV or EQ bound to an open endpoint is `FI_EBUSY`; once the
/// endpoints are closed they close.
pub fn pair_close_bound_is_ebusy(s: &Subject) {
    each_type(
        s,
        Caps::MSG,
        |_| true,
        |t, info| {
            let mut spec = PairSpec::new(t, Caps::MSG);
            if s.claimed().probes.cntr.is_ok() {
                spec.cntr_flags = OpFlags::SEND | OpFlags::RECV;
            }
            let p = Pair::with_info(s, &spec, info);
            let Pair {
                a,
                b,
                pep,
                mut domain,
                fabric,
                ..
            } = p;
            for (i, mut side) in [a, b].into_iter().enumerate() {
                fixture::expect_errno(side.cq.close(), Errno::EBUSY, "fi_close of a bound CQ");
                if let Some(c) = side.cntr.as_mut() {
                    fixture::expect_errno(c.close(), Errno::EBUSY, "fi_close of a bound counter");
                }
                if let Some(av) = side.av.as_mut() {
                    fixture::expect_errno(av.close(), Errno::EBUSY, "fi_close of a bound AV");
                }
                if let Some(eq) = side.eq.as_mut() {
                    fixture::expect_errno(eq.close(), Errno::EBUSY, "fi_close of a bound EQ");
                }
                fixture::expect_errno(domain.close(), Errno::EBUSY, "fi_close of a busy domain");
                side.ep
                    .close()
                    .unwrap_or_else(|e| panic!("fi_close(ep): {e}"));
                side.cq
                    .close()
                    .unwrap_or_else(|e| panic!("fi_close(cq) after the ep: {e}"));
                if let Some(c) = side.cntr.as_mut() {
                    c.close()
                        .unwrap_or_else(|e| panic!("fi_close(cntr) after the ep: {e}"));
                }
                if let Some(av) = side.av.as_mut() {
                    av.close()
                        .unwrap_or_else(|e| panic!("fi_close(av) after the ep: {e}"));
                }
                // The server's EQ (side b) is also the listener's: it stays bound to it.
                if let (0, Some(eq)) = (i, side.eq.as_mut()) {
                    eq.close()
                        .unwrap_or_else(|e| panic!("fi_close(eq) after the ep: {e}"));
                }
                drop(side);
            }
            drop(pep);
            fixture::close_domain(fabric, domain);
        },
    );
}
