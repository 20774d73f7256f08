//! Unit tests of the endpoint's private parts.

use super::*;

/// A generated name that another copy of the provider in this process already
/// holds is skipped, not reported as `FI_EADDRINUSE`.
#[test]
fn generated_names_skip_a_name_in_use() {
    let geo = crate::region::tests::small();
    let next = NEXT_NAME.load(Ordering::Relaxed);
    let taken: Vec<Region> = (next..next + 3)
        .map(|n| {
            let name = format!("{NAME_PREFIX}{}-{n}", std::process::id());
            Region::create(&name, geo).unwrap()
        })
        .collect();
    let got = create_auto_named(geo, ofi_kit::auth::AuthTag::NONE).unwrap();
    let reused = taken.iter().any(|t| t.name() == got.name());
    for r in taken.iter().chain([&got]) {
        region::unlink(r.name());
    }
    assert!(!reused, "{} reused", got.name());
}

#[test]
fn io_lists_split_and_total() {
    let l = IoList::from_pairs(&[(100, 10), (200, 5), (300, 0), (400, 7)]);
    assert_eq!(l.total(), 22);
    assert_eq!(l.sub(8, 5).slice(), &[(108, 2), (200, 3)]);
    assert_eq!(l.sub(15, 7).slice(), &[(400, 7)]);
    assert_eq!(l.addr_at(12), 202);
    let huge = IoList::from_pairs(&[(0, usize::MAX), (0, 5)]);
    assert_eq!(huge.total(), usize::MAX);
}
