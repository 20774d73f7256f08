//! The checks connection-oriented providers make before a connection call: `fi_listen`,
//! `fi_connect` and `fi_accept` report on an event queue, which must be bound first.
//!
//! Nothing here panics.

use ofi_core::{Errno, Error, Result};

use crate::eq::KitEq;

/// The event queue connection call `call` (`"fi_listen"`, `"fi_connect"`,
/// `"fi_accept"`) reports on.
///
/// # Errors
/// `FI_ENOEQ` ("`prov`: bind an event queue before `call`") when none is bound.
pub fn bound_eq<'a>(prov: &str, eq: Option<&'a KitEq>, call: &str) -> Result<&'a KitEq> {
    eq.ok_or_else(|| {
        Error::new(
            Errno::ENOEQ,
            format!("{prov}: bind an event queue before {call}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_call_without_an_eq_is_enoeq_naming_the_call() {
        let e = bound_eq("p", None, "fi_listen").unwrap_err();
        assert_eq!(e.code(), Errno::ENOEQ);
        assert_eq!(e.message(), "p: bind an event queue before fi_listen");
    }
}
