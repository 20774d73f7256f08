//! The rules of `fi_ep_bind` of a shared transmit or receive context (fi_endpoint(3)),
//! the same for every provider that offers them: the object bound is a context of the
//! kind the bind names (`FI_EINVAL`), the flags are 0 (`FI_EBADFLAGS`), and an endpoint
//! has at most one context of each kind (`FI_EINVAL`). What a context does is the
//! provider's.
//!
//! Nothing here panics.

use ofi_core::{Errno, Error, OpFlags, Result};

/// `"shared receive context"` (`srx`) or `"shared transmit context"`, for messages.
pub fn kind_name(srx: bool) -> &'static str {
    if srx {
        "shared receive context"
    } else {
        "shared transmit context"
    }
}

/// Check a bind of a shared context (`srx`: receive, else transmit) by provider
/// `prov`: `is_kind`, the object bound is an own context of that kind; `flags`, the
/// bind's flags; `taken`, the endpoint already has a context of that kind.
///
/// # Errors
/// `FI_EINVAL` when the object is not such a context or one is already bound;
/// `FI_EBADFLAGS` for flags other than 0.
pub fn check_bind(prov: &str, srx: bool, is_kind: bool, flags: OpFlags, taken: bool) -> Result<()> {
    let what = kind_name(srx);
    if !is_kind {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{prov}: the object bound is not a {what} of {prov}"),
        ));
    }
    if !flags.is_empty() {
        return Err(Error::new(
            Errno::EBADFLAGS,
            format!("{prov}: a {what} binds with flags 0"),
        ));
    }
    if taken {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{prov}: a {what} is already bound"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_has_its_code() {
        let code = |r: Result<()>| r.map_err(|e| e.code());
        assert_eq!(
            code(check_bind("p", true, true, OpFlags::empty(), false)),
            Ok(())
        );
        assert_eq!(
            code(check_bind("p", true, false, OpFlags::empty(), false)),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            code(check_bind("p", false, true, OpFlags::RECV, false)),
            Err(Errno::EBADFLAGS)
        );
        assert_eq!(
            code(check_bind("p", false, true, OpFlags::empty(), true)),
            Err(Errno::EINVAL)
        );
        assert_eq!(kind_name(true), "shared receive context");
    }
}
