//! API and provider versions: a `major.minor` pair.
//!
//! The C API packs a version into a `u32` as `major << 16 | minor` (`FI_VERSION`);
//! [`Version::to_raw`] and [`Version::from_raw`] convert between the two forms.
//! Versions order by major, then minor, which matches comparing the packed values.
//!
//! Invariant: every `u32` is a valid raw version and every [`Version`] packs losslessly.
//! Nothing here panics; parsing bad text returns [`Errno::EINVAL`].

use std::fmt;
use std::str::FromStr;

use crate::error::{Errno, Error};

/// A `major.minor` version, as used for the API version and for provider versions.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Version {
    /// Major number (the high 16 bits of the packed form).
    pub major: u16,
    /// Minor number (the low 16 bits of the packed form).
    pub minor: u16,
}

/// The OFI API version that ofi-rs implements (1.17).
pub const API_VERSION: Version = Version::new(1, 17);

impl Version {
    /// A version from its two parts.
    pub const fn new(major: u16, minor: u16) -> Self {
        Version { major, minor }
    }

    /// The packed C form, `major << 16 | minor` (the C macro `FI_VERSION`).
    pub const fn to_raw(self) -> u32 {
        ((self.major as u32) << 16) | self.minor as u32
    }

    /// Unpacks the C form: the high 16 bits are the major, the low 16 the minor.
    pub const fn from_raw(raw: u32) -> Self {
        Version {
            major: (raw >> 16) as u16,
            minor: (raw & 0xFFFF) as u16,
        }
    }

    /// True if this version is at least `other` (the C macro `FI_VERSION_GE`).
    pub const fn at_least(self, other: Version) -> bool {
        self.to_raw() >= other.to_raw()
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for Version {
    type Err = Error;

    /// Parses `"MAJOR.MINOR"` (both decimal, each fitting in 16 bits; surrounding
    /// whitespace is ignored). Anything else is [`Errno::EINVAL`].
    fn from_str(s: &str) -> Result<Self, Error> {
        let t = s.trim();
        let bad = || {
            Error::new(
                Errno::EINVAL,
                format!("invalid version {s:?}: expected MAJOR.MINOR"),
            )
        };
        let (maj, min) = t.split_once('.').ok_or_else(bad)?;
        let num = |p: &str| -> Result<u16, Error> {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            p.parse::<u16>().map_err(|_| bad())
        };
        Ok(Version::new(num(maj)?, num(min)?))
    }
}

impl From<Version> for u32 {
    fn from(v: Version) -> u32 {
        v.to_raw()
    }
}

impl From<u32> for Version {
    fn from(raw: u32) -> Version {
        Version::from_raw(raw)
    }
}

/// The provider version for a crate version, by the C library's convention for
/// built-in providers: crate `MAJ.MIN.PATCH` becomes `Version { major: MAJ*100 + MIN,
/// minor: PATCH*10 }` (so 1.17.0 gives 117.0 and 0.1.0 gives 1.0).
///
/// Missing or non-numeric parts (including pre-release suffixes such as `"-rc1"`)
/// count as 0, and values saturate at `u16::MAX`; this never panics.
pub fn prov_version_from_crate(pkg_version: &str) -> Version {
    // Drop build metadata and pre-release suffixes ("1.2.3-rc1+abc" -> "1.2.3").
    let core = pkg_version.split(['-', '+']).next().unwrap_or("");
    let mut parts = core
        .split('.')
        .map(|p| p.trim().parse::<u32>().unwrap_or(0));
    let maj = parts.next().unwrap_or(0);
    let min = parts.next().unwrap_or(0);
    let patch = parts.next().unwrap_or(0);
    let clamp = |v: u32| v.min(u16::MAX as u32) as u16;
    Version::new(
        clamp(maj.saturating_mul(100).saturating_add(min)),
        clamp(patch.saturating_mul(10)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_round_trip() {
        assert_eq!(API_VERSION.to_raw(), (1 << 16) | 17);
        assert_eq!(Version::from_raw(0x0001_0011), Version::new(1, 17));
        assert_eq!(
            Version::from_raw(u32::MAX),
            Version::new(u16::MAX, u16::MAX)
        );
        for raw in [0u32, 1, 0x10000, 0x0001_0005, 0xFFFF_0000, u32::MAX] {
            assert_eq!(Version::from_raw(raw).to_raw(), raw);
        }
        assert_eq!(u32::from(Version::new(2, 0)), 0x20000);
        assert_eq!(Version::from(0x20000u32), Version::new(2, 0));
    }

    #[test]
    fn ordering_matches_raw() {
        let a = Version::new(1, 5);
        let b = Version::new(1, 17);
        let c = Version::new(2, 0);
        assert!(a < b && b < c);
        assert!(c.at_least(b) && b.at_least(b) && !a.at_least(b));
    }

    #[test]
    fn display_and_parse() {
        assert_eq!(API_VERSION.to_string(), "1.17");
        assert_eq!("1.17".parse::<Version>().unwrap(), API_VERSION);
        assert_eq!(" 117.0 ".parse::<Version>().unwrap(), Version::new(117, 0));
        for bad in [
            "", "1", "1.", ".1", "1.2.3", "a.b", "1.-2", "+1.2", "65536.0", "1. 2",
        ] {
            let e = bad.parse::<Version>().unwrap_err();
            assert_eq!(e.code(), Errno::EINVAL, "{bad:?}");
        }
    }

    #[test]
    fn provider_version_convention() {
        assert_eq!(prov_version_from_crate("0.1.0"), Version::new(1, 0));
        assert_eq!(prov_version_from_crate("1.17.0"), Version::new(117, 0));
        assert_eq!(prov_version_from_crate("1.17.2"), Version::new(117, 20));
        assert_eq!(prov_version_from_crate("2.3.4-rc1"), Version::new(203, 40));
        assert_eq!(prov_version_from_crate("garbage"), Version::new(0, 0));
        assert_eq!(
            prov_version_from_crate("999.99999.99999"),
            Version::new(u16::MAX, u16::MAX)
        );
    }
}
