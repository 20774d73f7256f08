//! Fabric and domain life cycle: open and close; closing a parent with open children is
//! `FI_EBUSY`.

use ofi::Errno;

use crate::fixture;
use crate::fixture::expect_errno;
use crate::Subject;

/// Open and close a fabric and a domain for every result.
pub fn domain_open_close(s: &Subject) {
    for info in &s.claimed().infos {
        let (fabric, domain) = fixture::open_domain(s, info);
        assert_eq!(domain.provider(), fabric.provider());
        fixture::close_domain(fabric, domain);
    }
}

/// Closing a domain with an open endpoint is `FI_EBUSY` (and a fabric with an open
/// domain); after the endpoint is closed the domain closes.
pub fn domain_close_with_open_endpoint_is_ebusy(s: &Subject) {
    let info = &s.claimed().infos[0];
    let (mut fabric, mut domain) = fixture::open_domain(s, info);
    let mut ep = domain
        .endpoint(info)
        .unwrap_or_else(|e| panic!("fi_endpoint: {e}"));
    expect_errno(
        domain.close(),
        Errno::EBUSY,
        "domain close with an open endpoint",
    );
    expect_errno(
        fabric.close(),
        Errno::EBUSY,
        "fabric close with an open domain",
    );
    ep.close().unwrap_or_else(|e| panic!("fi_close(ep): {e}"));
    fixture::close_domain(fabric, domain);
}
