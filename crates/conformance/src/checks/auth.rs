//! Authorization keys (fi_domain(3) `auth_key`, fi_endpoint(3) `ep_attr.auth_key`):
//! getinfo carries a hinted key into its results; endpoints with the same key exchange
//! messages; an endpoint with another key (its own `ep_attr.auth_key` overriding the
//! domain's) cannot reach them — its send fails (at once or as an error completion)
//! and nothing is delivered; a key longer than the provider takes is `FI_ENODATA` from
//! getinfo and `FI_EINVAL` from `fi_domain` / `fi_endpoint`.

use ofi::registry::Registry;
use ofi::{Caps, EpType, Errno, GetinfoFlags, Info, API_VERSION};

use crate::fixture::{self, expect_errno};
use crate::pair::{open_side, Pair, PairSpec};
use crate::Subject;

/// The key of the pair.
const KEY: &[u8] = b"conformance-job-a";
/// Another key.
const OTHER_KEY: &[u8] = b"conformance-job-b";
/// Longer than any provider takes (fi_domain(3) leaves the limit to the provider).
const TOO_LONG: usize = 4096;

/// The hints of an `FI_EP_RDM` / `FI_MSG` endpoint with domain key `key`.
fn keyed_hints(s: &Subject, key: &[u8]) -> Info {
    let mut h = s
        .base_hints()
        .with_ep_type(EpType::Rdm)
        .with_caps(Caps::MSG);
    h.domain_attr.auth_key = Some(key.to_vec());
    h
}

/// Whether getinfo takes a domain key for the provider of `info` (what claims the
/// area; the suite's probe).
pub fn takes_auth_key(registry: &Registry, info: &Info) -> std::result::Result<(), String> {
    let mut h = Info::hints().with_ep_type(EpType::Rdm).with_caps(Caps::MSG);
    h.fabric_attr
        .prov_name
        .clone_from(&info.fabric_attr.prov_name);
    h.domain_attr.auth_key = Some(KEY.to_vec());
    let req = ofi::getinfo::GetinfoRequest {
        hints: Some(h),
        ..ofi::getinfo::GetinfoRequest::new(API_VERSION)
    };
    match registry.getinfo(&req) {
        Ok(v) if !v.is_empty() => Ok(()),
        Ok(_) => Err("getinfo with a domain_attr.auth_key hint returned nothing".into()),
        Err(e) => Err(format!(
            "getinfo with a domain_attr.auth_key hint: {e} ({})",
            e.code()
        )),
    }
}

/// Endpoints of one key talk; one with another key cannot reach them, and its
/// message is never delivered.
pub fn auth_key_separates_endpoints(s: &Subject) {
    let infos = s
        .getinfo_with(Some(keyed_hints(s, KEY)), GetinfoFlags::empty())
        .unwrap_or_else(|e| panic!("getinfo with a domain key: {e}"));
    let info = infos[0].clone();
    assert_eq!(
        info.domain_attr.auth_key.as_deref(),
        Some(KEY),
        "getinfo carries the hinted domain_attr.auth_key into its result"
    );
    let pair = Pair::with_info(s, &PairSpec::new(EpType::Rdm, Caps::MSG), info.clone());
    let mut got = [0u8; 16];
    fixture::post_recv(&pair.b.ep, &mut got, 0xb1).expect("recv on b");
    fixture::send(&pair.a.ep, b"same key", pair.a.peer, 0xa1).expect("send a -> b");
    pair.wait_ok(0, "send between endpoints of one key");
    assert_eq!(pair.wait_ok(1, "receive of one key").op_context, 0xb1);
    assert_eq!(&got[..8], b"same key");

    // An endpoint of the same domain with its own, other key.
    let mut other = info.clone();
    other.ep_attr.auth_key = Some(OTHER_KEY.to_vec());
    let spec = PairSpec::new(EpType::Rdm, Caps::MSG);
    let (ep, cq, _, av) = open_side(&pair.domain, &other, &spec, 0xc0, None);
    ep.enable().expect("fi_enable of the other key's endpoint");
    let av = av.expect("an RDM endpoint has an AV");
    let b_name = fixture::name_of(&pair.b.ep, &info);
    let dest = av.insert(&[b_name]).expect("fi_av_insert of b")[0];
    let mut got = [0u8; 16];
    fixture::post_recv(&pair.b.ep, &mut got, 0xb2).expect("recv on b");
    match fixture::send(&ep, b"other key", dest, 0xc1) {
        Ok(()) => {
            let deadline = std::time::Instant::now() + crate::WAIT;
            let failed = loop {
                pair.drive();
                if let Some(c) = crate::pair::poll(&cq) {
                    break c.err();
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "a send to an endpoint of another key neither failed nor completed within {:?}",
                    crate::WAIT
                );
                std::thread::yield_now();
            };
            let ee = failed.expect("a send to an endpoint of another key completes in error");
            assert_eq!(ee.op_context, 0xc1, "the failed send's context");
        }
        Err(e) => assert_ne!(e.code(), Errno::EAGAIN, "the refused send: {e}"),
    }
    // b's receive takes the next message of its own key, not the refused one.
    fixture::send(&pair.a.ep, b"after refusal", pair.a.peer, 0xa2).expect("send a -> b");
    pair.wait_ok(0, "send after the refused one");
    assert_eq!(
        pair.wait_ok(1, "receive after the refusal").op_context,
        0xb2
    );
    assert_eq!(&got[..13], b"after refusal");
    drop((ep, cq, av));
}

/// A key longer than the provider takes: `FI_ENODATA` from getinfo, `FI_EINVAL` from
/// `fi_domain` (domain key) and `fi_endpoint` (endpoint key).
pub fn auth_key_too_long_is_einval(s: &Subject) {
    let long = vec![0x5a; TOO_LONG];
    expect_errno(
        s.getinfo_with(Some(keyed_hints(s, &long)), GetinfoFlags::empty())
            .map(|_| ()),
        Errno::ENODATA,
        "getinfo with an over-long domain key",
    );
    let info = s
        .getinfo_with(Some(keyed_hints(s, KEY)), GetinfoFlags::empty())
        .unwrap_or_else(|e| panic!("getinfo with a domain key: {e}"))[0]
        .clone();
    let mut bad = info.clone();
    bad.domain_attr.auth_key = Some(long.clone());
    let fabric = s
        .registry
        .open_fabric(&info)
        .unwrap_or_else(|e| panic!("fi_fabric: {e}"));
    expect_errno(
        fabric.domain(&bad).map(|_| ()),
        Errno::EINVAL,
        "fi_domain with an over-long domain key",
    );
    let domain = fabric
        .domain(&info)
        .unwrap_or_else(|e| panic!("fi_domain: {e}"));
    let mut bad = info.clone();
    bad.ep_attr.auth_key = Some(long);
    expect_errno(
        domain.endpoint(&bad).map(|_| ()),
        Errno::EINVAL,
        "fi_endpoint with an over-long endpoint key",
    );
    fixture::close_domain(fabric, domain);
}
