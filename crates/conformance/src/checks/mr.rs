//! Memory registration (fi_mr(3)): `fi_mr_reg`, `fi_mr_regv`, `fi_mr_regattr` with
//! each access set; keys per the domain's `mr_mode` (`FI_MR_PROV_KEY`: the provider
//! picks distinct keys; otherwise the requested key is the key, and one already in use
//! is `FI_ENOKEY`); bad arguments (unknown access bits `FI_EBADFLAGS`, more buffers
//! than `mr_iov_limit` `FI_EINVAL`); a closed region's key can be registered again.

use ofi::abi::raw::Iov;
use ofi::mr::MrAttr;
use ofi::{Errno, MrMode, OpFlags};

use crate::{fixture, Subject};

const ACCESS_SETS: &[OpFlags] = &[
    OpFlags::SEND,
    OpFlags::RECV,
    OpFlags::READ,
    OpFlags::WRITE,
    OpFlags::REMOTE_READ,
    OpFlags::REMOTE_WRITE,
    OpFlags::SEND
        .union(OpFlags::RECV)
        .union(OpFlags::READ)
        .union(OpFlags::WRITE)
        .union(OpFlags::REMOTE_READ)
        .union(OpFlags::REMOTE_WRITE),
];

fn domain(s: &Subject) -> (ofi::fabric::Fabric, ofi::domain::Domain, ofi::Info) {
    let claims = s.claimed();
    let info = claims
        .infos
        .iter()
        .find(|i| i.caps.intersects(ofi::Caps::RMA | ofi::Caps::ATOMIC))
        .unwrap_or(&claims.infos[0])
        .clone();
    let (f, d) = fixture::open_domain(s, &info);
    (f, d, info)
}

/// Every access set registers; keys follow `mr_mode`; closing releases the key.
pub fn mr_reg_access_and_keys(s: &Subject) {
    let (_f, d, info) = domain(s);
    let prov_key = info.domain_attr.mr_mode.contains(MrMode::PROV_KEY);
    let mut keys = Vec::new();
    let mut regions = Vec::new();
    for (i, &access) in ACCESS_SETS.iter().enumerate() {
        let want = 0x100 + i as u64;
        let mr = d
            .mr_reg_owned(vec![i as u8; 256], access, want)
            .unwrap_or_else(|e| panic!("fi_mr_reg with {access}: {e} ({})", e.code()));
        if !prov_key {
            assert_eq!(
                mr.key(),
                want,
                "without FI_MR_PROV_KEY the requested key is the key"
            );
        }
        assert_ne!(mr.key(), ofi::KEY_NOTAVAIL, "fi_mr_key");
        assert!(!keys.contains(&mr.key()), "key {:#x} given twice", mr.key());
        keys.push(mr.key());
        regions.push(mr);
    }
    if !prov_key {
        let e = d
            .mr_reg_owned(vec![0; 64], OpFlags::REMOTE_READ, 0x100)
            .expect_err("a requested key already in use");
        assert_eq!(e.code(), Errno::ENOKEY, "{e}");
        let mut first = regions.remove(0);
        first
            .close()
            .unwrap_or_else(|e| panic!("fi_close(mr): {e}"));
        drop(first);
        let again = d
            .mr_reg_owned(vec![0; 64], OpFlags::REMOTE_READ, 0x100)
            .unwrap_or_else(|e| panic!("re-registering a released key: {e}"));
        assert_eq!(again.key(), 0x100);
    }
}

/// `fi_mr_regv` of two buffers and `fi_mr_regattr` register; more buffers than
/// `mr_iov_limit` is `FI_EINVAL`; unknown access bits are `FI_EBADFLAGS`.
pub fn mr_regv_regattr_and_bad_args(s: &Subject) {
    let (_f, d, info) = domain(s);
    let mut a = vec![1u8; 128];
    let mut b = vec![2u8; 64];
    let iov = [fixture::iov_of(&mut a), fixture::iov_of(&mut b)];
    let limit = info.domain_attr.mr_iov_limit;
    let access = OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE;
    if limit >= 2 {
        // SAFETY: `a` and `b` outlive the region (closed below, before they drop).
        let mut mr = unsafe { d.mr_regv(&iov, access, 0, 0x201, 0) }
            .unwrap_or_else(|e| panic!("fi_mr_regv of 2 buffers: {e} ({})", e.code()));
        mr.close().unwrap();
    }
    let many: Vec<Iov> = (0..limit + 1).map(|_| iov[0]).collect();
    // SAFETY: as above (and the call is expected to fail).
    let e = unsafe { d.mr_regv(&many, access, 0, 0x202, 0) }
        .expect_err("more buffers than mr_iov_limit");
    assert_eq!(
        e.code(),
        Errno::EINVAL,
        "fi_mr_regv of {} buffers (mr_iov_limit {limit}): {e}",
        limit + 1
    );
    let mut attr = MrAttr::new(&iov[..1], access);
    attr.requested_key = 0x203;
    attr.context = 0x77;
    // SAFETY: as above.
    let mut mr = unsafe { d.mr_regattr(&attr, 0) }
        .unwrap_or_else(|e| panic!("fi_mr_regattr: {e} ({})", e.code()));
    if !info.domain_attr.mr_mode.contains(MrMode::PROV_KEY) {
        assert_eq!(mr.key(), 0x203, "fi_mr_regattr requested_key");
    }
    mr.close().unwrap();
    let bogus = OpFlags::from_bits_retain(1 << 40) | OpFlags::REMOTE_READ;
    // SAFETY: as above.
    let r = unsafe { d.mr_reg(a.as_ptr(), a.len(), bogus, 0, 0x204, 0) };
    fixture::expect_errno(r, Errno::EBADFLAGS, &format!("fi_mr_reg access {bogus}"));
    drop(a);
    drop(b);
}
