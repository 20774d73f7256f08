//! Authorization keys (`domain_attr.auth_key`, `ep_attr.auth_key`) for providers that
//! take a key of any length up to a maximum, and the tag peers compare.
//!
//! An endpoint exchanges data only with peers presenting the same key. The key itself
//! stays in the process: what travels (in a shared region, in a connection request) is
//! its [`AuthTag`], a 64-bit digest, so comparing tags separates jobs started with
//! different keys. It is an isolation key, not a credential: a process of the same
//! user that can read a region can copy its tag.
//!
//! Keys are never logged: errors name their lengths only.
//!
//! The framework's getinfo matcher (`ofi_core::getinfo`) accepts a hint key only of the
//! exact length of the template's key. [`match_with_auth_key`] wraps it for providers
//! whose keys may have any length from 1 to a maximum: the keys are taken out of the
//! hints, the templates matched without them, and the keys put back into every answer.
//!
//! Nothing here panics.

use ofi_core::attr::Info;
use ofi_core::getinfo::{GetinfoOutcome, GetinfoRequest, Mismatch, Verdict};
use ofi_core::{Errno, Error, Result};

/// Longest key the providers using this module take, in bytes.
pub const AUTH_KEY_MAX: usize = 64;

/// The digest of a key that peers compare; [`AuthTag::NONE`] for no key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuthTag(u64);

impl AuthTag {
    /// No key: matches only peers without a key.
    pub const NONE: AuthTag = AuthTag(0);

    /// The tag of `key` (`None` or empty: [`AuthTag::NONE`]). FNV-1a over the length
    /// and the bytes, never 0 for a key.
    pub fn of(key: Option<&[u8]>) -> AuthTag {
        let Some(key) = key.filter(|k| !k.is_empty()) else {
            return AuthTag::NONE;
        };
        const BASIS: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0100_0000_01b3;
        let len = (key.len() as u64).to_le_bytes();
        let h = len
            .iter()
            .chain(key)
            .fold(BASIS, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME));
        AuthTag(h.max(1))
    }

    /// The tag as carried in shared memory or on the wire.
    pub fn wire(self) -> u64 {
        self.0
    }

    /// A tag read from shared memory or the wire.
    pub fn from_wire(w: u64) -> AuthTag {
        AuthTag(w)
    }
}

/// A key kept by a domain or endpoint: its `Debug` shows the length only, so the
/// key never reaches a log through the object holding it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AuthKey(Option<Vec<u8>>);

impl AuthKey {
    /// Keep `key` (`None` or empty: no key).
    pub fn new(key: Option<&[u8]>) -> AuthKey {
        AuthKey(key.filter(|k| !k.is_empty()).map(<[u8]>::to_vec))
    }

    /// The key's bytes (`None`: no key).
    pub fn get(&self) -> Option<&[u8]> {
        self.0.as_deref()
    }

    /// The key's tag.
    pub fn tag(&self) -> AuthTag {
        AuthTag::of(self.get())
    }
}

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(k) => write!(f, "AuthKey({} bytes)", k.len()),
            None => f.write_str("AuthKey(none)"),
        }
    }
}

/// Check a key's length: `FI_EINVAL` (naming `field` and the lengths, never the key)
/// when it is longer than `max`.
///
/// # Errors
/// `FI_EINVAL` for an over-long key.
pub fn check_key(prov: &str, field: &str, key: Option<&[u8]>, max: usize) -> Result<()> {
    match key {
        Some(k) if k.len() > max => Err(Error::new(
            Errno::EINVAL,
            format!("{prov}: {field} is {} bytes, at most {max} taken", k.len()),
        )),
        _ => Ok(()),
    }
}

/// The key an endpoint opened with `info` uses: `ep_attr.auth_key` when set and not
/// empty, else `domain_key` (the key of the domain's info), per fi_endpoint(3).
///
/// # Errors
/// `FI_EINVAL` when the endpoint's key or the domain's is longer than `max`.
pub fn endpoint_key<'a>(
    prov: &str,
    info: &'a Info,
    domain_key: Option<&'a [u8]>,
    max: usize,
) -> Result<Option<&'a [u8]>> {
    let own = info.ep_attr.auth_key.as_deref().filter(|k| !k.is_empty());
    check_key(prov, "ep_attr.auth_key", own, max)?;
    check_key(prov, "domain_attr.auth_key", domain_key, max)?;
    Ok(own.or(domain_key).filter(|k| !k.is_empty()))
}

/// `info` without its authorization keys (what a utility asks its core for).
pub fn without_keys(info: &Info) -> Info {
    let mut bare = info.clone();
    bare.domain_attr.auth_key = None;
    bare.ep_attr.auth_key = None;
    bare
}

/// Getinfo for a provider taking keys of 1 to `max` bytes: `matcher` answers for the
/// request without keys; the hints' keys are then copied into every info it returns.
/// A key longer than `max` rejects every template (`FI_ENODATA`, the verdict naming the
/// field and the lengths).
pub fn match_with_auth_key(
    prov: &str,
    req: &GetinfoRequest,
    max: usize,
    matcher: impl FnOnce(&GetinfoRequest) -> GetinfoOutcome,
) -> GetinfoOutcome {
    let Some(hints) = &req.hints else {
        return matcher(req);
    };
    let dkey = hints.domain_attr.auth_key.clone();
    let ekey = hints.ep_attr.auth_key.clone();
    if dkey.is_none() && ekey.is_none() {
        return matcher(req);
    }
    let bare = GetinfoRequest {
        hints: Some(without_keys(hints)),
        ..req.clone()
    };
    let mut out = matcher(&bare);
    let too_long = [("domain_attr.auth_key", &dkey), ("ep_attr.auth_key", &ekey)]
        .into_iter()
        .find_map(|(field, k)| {
            let n = k.as_ref().map_or(0, Vec::len);
            (n > max)
                .then(|| Mismatch::new(field, format!("{n} bytes"), format!("1 to {max} bytes")))
        });
    if let Some(why) = too_long {
        if out.error.is_none() {
            out.infos.clear();
            out.verdicts = out
                .verdicts
                .iter()
                .map(|v| Verdict::rejected(prov, v.template, why.clone()))
                .collect();
        }
        return out;
    }
    for i in &mut out.infos {
        i.domain_attr.auth_key.clone_from(&dkey);
        i.ep_attr.auth_key.clone_from(&ekey);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofi_core::getinfo::VerdictKind;

    #[test]
    fn tags_separate_keys_and_none_is_zero() {
        assert_eq!(AuthTag::of(None), AuthTag::NONE);
        assert_eq!(AuthTag::of(Some(&[])), AuthTag::NONE);
        let a = AuthTag::of(Some(b"job-a"));
        assert_ne!(a, AuthTag::NONE);
        assert_eq!(a, AuthTag::of(Some(b"job-a")));
        assert_ne!(a, AuthTag::of(Some(b"job-b")));
        assert_ne!(AuthTag::of(Some(&[0])), AuthTag::of(Some(&[0, 0])));
        assert_eq!(AuthTag::from_wire(a.wire()), a);
        let k = AuthKey::new(Some(b"secret"));
        assert_eq!(k.tag(), AuthTag::of(Some(b"secret")));
        assert_eq!(format!("{k:?}"), "AuthKey(6 bytes)");
        assert_eq!(AuthKey::new(Some(b"")).get(), None);
    }

    #[test]
    fn endpoint_key_prefers_its_own_and_checks_lengths() {
        let mut info = Info::default();
        assert_eq!(
            endpoint_key("p", &info, Some(b"dom"), 8).unwrap(),
            Some(&b"dom"[..])
        );
        info.ep_attr.auth_key = Some(b"mine".to_vec());
        assert_eq!(
            endpoint_key("p", &info, Some(b"dom"), 8).unwrap(),
            Some(&b"mine"[..])
        );
        info.ep_attr.auth_key = Some(vec![7; 9]);
        let e = endpoint_key("p", &info, None, 8).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(
            !e.message().contains('\u{7}'),
            "the key is not in the message"
        );
        info.ep_attr.auth_key = None;
        assert_eq!(endpoint_key("p", &info, None, 8).unwrap(), None);
    }

    fn one_template(req: &GetinfoRequest) -> GetinfoOutcome {
        assert!(req.hints.as_ref().unwrap().domain_attr.auth_key.is_none());
        GetinfoOutcome {
            infos: vec![Info::default()],
            verdicts: vec![Verdict::kept("p", 0)],
            error: None,
        }
    }

    #[test]
    fn getinfo_carries_keys_and_refuses_long_ones() {
        let mut h = Info::hints();
        h.domain_attr.auth_key = Some(b"k1".to_vec());
        let req = GetinfoRequest {
            hints: Some(h.clone()),
            ..GetinfoRequest::default()
        };
        let out = match_with_auth_key("p", &req, 4, one_template);
        assert_eq!(
            out.infos[0].domain_attr.auth_key.as_deref(),
            Some(&b"k1"[..])
        );
        assert_eq!(out.infos[0].ep_attr.auth_key, None);

        h.ep_attr.auth_key = Some(vec![1; 5]);
        let req = GetinfoRequest {
            hints: Some(h),
            ..GetinfoRequest::default()
        };
        let out = match_with_auth_key("p", &req, 4, one_template);
        assert!(out.infos.is_empty());
        assert_eq!(out.verdicts[0].kind, VerdictKind::Rejected);
        assert_eq!(out.verdicts[0].field, "ep_attr.auth_key");
    }
}
