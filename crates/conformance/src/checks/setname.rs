//! `fi_setname` (fi_cm(3)), wherever a provider implements it (`FI_ENOSYS` otherwise:
//! nothing more is checked): an endpoint's name is set before it is enabled (or, for
//! `FI_EP_MSG`, before it connects), so naming an enabled, connected or in-use endpoint
//! is `FI_EOPBADSTATE` and leaves its name as it was; bytes that are no address of the
//! endpoint's format are `FI_EINVAL`. Where the new name is reached from is
//! provider-specific (each provider's own tests: shm, tcp, udp).

use ofi::{Caps, Errno};

use crate::pair::each_pair;
use crate::Subject;

/// Bytes no address format takes: too short for a socket address, and not a string.
const NOT_AN_ADDRESS: [u8; 3] = [0xff, 0xfe, 0xfd];

/// See the module docs.
pub fn setname_after_enable_and_bad_names(s: &Subject) {
    each_pair(s, Caps::MSG, |p| {
        let ep = &p.b.ep;
        let name = ep
            .getname()
            .unwrap_or_else(|e| panic!("fi_getname: {e} ({})", e.code()));
        match ep.setname(&name) {
            Err(e) if e.code() == Errno::ENOSYS => return,
            Err(e) => assert_eq!(
                e.code(),
                Errno::EOPBADSTATE,
                "fi_setname on an enabled endpoint: {e}"
            ),
            Ok(()) => panic!("fi_setname on an enabled endpoint succeeded"),
        }
        assert_eq!(
            ep.getname().unwrap(),
            name,
            "a refused fi_setname changed the name"
        );
        let fresh = p
            .domain
            .endpoint(&p.info)
            .unwrap_or_else(|e| panic!("fi_endpoint: {e} ({})", e.code()));
        let e = fresh
            .setname(&NOT_AN_ADDRESS)
            .expect_err("fi_setname with bytes that are no address");
        assert_eq!(
            e.code(),
            Errno::EINVAL,
            "fi_setname({NOT_AN_ADDRESS:?}): {e}"
        );
    });
}
