//! Completion queues: every format opens (or is refused with `FI_ENOSYS` /
//! `FI_EINVAL`), empty reads are `FI_EAGAIN`, a read with another format's entries is
//! `FI_EINVAL`, `fi_cq_readerr` with no error is `FI_EAGAIN`.

use ofi::abi::raw::{CqDataEntry, CqEntry, CqErrEntry, CqMsgEntry, CqTaggedEntry, RawCqAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::fabric::Fabric;
use ofi::{CqFormat, Errno};

use crate::fixture;
use crate::fixture::expect_errno;
use crate::Subject;

const FORMATS: [CqFormat; 5] = [
    CqFormat::Unspec,
    CqFormat::Context,
    CqFormat::Msg,
    CqFormat::Data,
    CqFormat::Tagged,
];

fn read_empty(cq: &CompletionQueue) -> ofi::Result<usize> {
    match cq.format() {
        CqFormat::Context => cq.read(&mut [CqEntry::default(); 4]),
        CqFormat::Msg => cq.read(&mut [CqMsgEntry::default(); 4]),
        CqFormat::Data => cq.read(&mut [CqDataEntry::default(); 4]),
        _ => cq.read(&mut [CqTaggedEntry::default(); 4]),
    }
}

/// Every format opens, or is refused with `FI_ENOSYS`/`FI_EINVAL`; at least one opens;
/// `FI_CQ_FORMAT_UNSPEC` opens as `FI_CQ_FORMAT_CONTEXT`.
pub fn cq_open_each_format(s: &Subject) {
    let info = &s.claimed().infos[0];
    let (_fabric, domain) = fixture::open_domain(s, info);
    let mut opened = Vec::new();
    for f in FORMATS {
        match domain.cq_open(&CqAttr::with_format(f)) {
            Ok(mut cq) => {
                let want = if f == CqFormat::Unspec {
                    CqFormat::Context
                } else {
                    f
                };
                assert_eq!(cq.format(), want);
                expect_errno(read_empty(&cq), Errno::EAGAIN, &format!("{f}"));
                cq.close()
                    .unwrap_or_else(|e| panic!("fi_close(cq {f}): {e}"));
                opened.push(f);
            }
            Err(e) => assert!(
                matches!(e.code(), Errno::ENOSYS | Errno::EINVAL),
                "{f} refused with {} ({e}); expected FI_ENOSYS or FI_EINVAL",
                e.code()
            ),
        }
    }
    println!("{}: CQ formats accepted: {opened:?}", s.provider);
    assert!(
        opened.iter().any(|f| *f != CqFormat::Unspec),
        "no CQ format opens"
    );
}

/// A read of an empty CQ is `FI_EAGAIN`, again and again; so is a zero-length read.
pub fn cq_read_empty_is_eagain(s: &Subject) {
    let (_fabric, _domain, cq) = open_msg_cq(s);
    for _ in 0..3 {
        let e = cq.read(&mut [CqMsgEntry::default()]).unwrap_err();
        assert_eq!(e.code(), Errno::EAGAIN, "{e}");
    }
    let mut none: [CqMsgEntry; 0] = [];
    expect_errno(
        cq.read(&mut none),
        Errno::EAGAIN,
        "a zero-length read of an empty CQ",
    );
}

/// A format value that does not exist is `FI_EINVAL`; reading with another format's
/// entries is `FI_EINVAL`.
pub fn cq_bad_format_is_einval(s: &Subject) {
    let raw = RawCqAttr {
        format: 99,
        ..CqAttr::with_format(CqFormat::Msg).to_raw()
    };
    assert_eq!(CqAttr::from_raw(&raw).unwrap_err().code(), Errno::EINVAL);
    let (_fabric, _domain, cq) = open_msg_cq(s);
    let e = cq.read(&mut [CqTaggedEntry::default()]).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "{e}");
    let e = cq.read(&mut [CqEntry::default()]).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "{e}");
}

/// `fi_cq_readerr` with no error entry is `FI_EAGAIN`.
pub fn cq_readerr_without_error_is_eagain(s: &Subject) {
    let (_fabric, _domain, cq) = open_msg_cq(s);
    let mut ee = CqErrEntry::default();
    let e = cq.readerr(&mut ee, 0).unwrap_err();
    assert_eq!(e.code(), Errno::EAGAIN, "{e}");
}

/// A domain on the first claimed info and a `FI_CQ_FORMAT_MSG` CQ opened on it (with the
/// fabric and domain it needs kept open).
fn open_msg_cq(s: &Subject) -> (Fabric, Domain, CompletionQueue) {
    let info = &s.claimed().infos[0];
    let (fabric, domain) = fixture::open_domain(s, info);
    let cq = domain
        .cq_open(&CqAttr::with_format(CqFormat::Msg))
        .unwrap_or_else(|e| panic!("fi_cq_open: {e}"));
    (fabric, domain, cq)
}
