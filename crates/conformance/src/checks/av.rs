//! Address vectors: an endpoint's own address inserts and looks up to itself; a
//! removed address is `FI_EINVAL`; malformed addresses are not inserted (the count
//! inserted excludes them and their slot is `FI_ADDR_NOTAVAIL`); `fi_av_straddr`.

use ofi::av::AvAttr;
use ofi::{AddrFormat, Address, Errno, ADDR_NOTAVAIL};

use crate::fixture;
use crate::Subject;

fn own(s: &Subject) -> (fixture::Fixture, ofi::av::AddressVector) {
    let f = fixture::Fixture::new(s, 1);
    let av = f
        .domain
        .av_open(&AvAttr::default())
        .unwrap_or_else(|e| panic!("fi_av_open: {e}"));
    (f, av)
}

/// Insert the endpoint's own address; lookup gives it back; inserting it again is
/// accepted.
pub fn av_insert_own_address_lookup_round_trip(s: &Subject) {
    let (f, av) = own(s);
    let addr = f.peers[0].addr.clone();
    let got = av.insert(std::slice::from_ref(&addr)).unwrap();
    assert_eq!(got.len(), 1);
    assert_ne!(got[0], ADDR_NOTAVAIL);
    assert_eq!(av.lookup(got[0]).unwrap(), addr);
}

/// Remove then lookup is `FI_EINVAL`; removing again is `FI_EINVAL`; lookup of an
/// address never inserted is `FI_EINVAL`.
pub fn av_remove_then_lookup_is_einval(s: &Subject) {
    let (f, av) = own(s);
    let got = av.insert(std::slice::from_ref(&f.peers[0].addr)).unwrap();
    av.remove(&got, 0)
        .unwrap_or_else(|e| panic!("fi_av_remove: {e}"));
    assert_eq!(av.lookup(got[0]).unwrap_err().code(), Errno::EINVAL);
    assert_eq!(av.remove(&got, 0).unwrap_err().code(), Errno::EINVAL);
    assert_eq!(av.lookup(ADDR_NOTAVAIL).unwrap_err().code(), Errno::EINVAL);
}

/// Addresses that are malformed for the provider's format, or of another format: the
/// result counts only the good ones, the bad slots are `FI_ADDR_NOTAVAIL`.
pub fn av_insert_malformed(s: &Subject) {
    let (f, av) = own(s);
    let good = f.peers[0].addr.clone();
    let bad: Vec<Address> = match f.info.addr_format {
        AddrFormat::STR => vec![
            Address::Str("definitely not an address".into()),
            Address::Str(String::new()),
            Address::Inet("127.0.0.1:9".parse().expect("literal")),
        ],
        other => vec![Address::Raw {
            format: other,
            bytes: vec![0xff],
        }],
    };
    for b in &bad {
        let mut out = [0u64; 2];
        let n = av
            .insert_into(&[good.clone(), b.clone()], &mut out, 0, 0)
            .unwrap_or_else(|e| panic!("insert of one good and one bad ({b}) address: {e}"));
        assert_eq!(n, 1, "one of two was good ({b})");
        assert_ne!(out[0], ADDR_NOTAVAIL);
        assert_eq!(
            out[1], ADDR_NOTAVAIL,
            "the bad address {b} got a fabric address"
        );
    }
}

/// `fi_av_straddr` of the own address is non-empty; for `FI_ADDR_STR` it is the
/// string itself.
pub fn av_straddr(s: &Subject) {
    let (f, av) = own(s);
    let addr = &f.peers[0].addr;
    let text = av
        .straddr(addr)
        .unwrap_or_else(|e| panic!("fi_av_straddr: {e}"));
    assert!(!text.is_empty());
    if let Address::Str(x) = addr {
        assert_eq!(&text, x);
    }
}
