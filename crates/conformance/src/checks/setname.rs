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

/// For a provider's own tests, which know a free address of its format: an endpoint
/// named `name` before `fi_enable` is called that ([`crate::node::Node::named`]), a
/// peer reaches it there with a message, and naming it again once enabled is
/// `FI_EOPBADSTATE` with its name left as it was.
pub fn named_before_enable_is_reached(info: &ofi::Info, name: &[u8]) {
    use crate::node::{poll, wait_for, Node};
    const WAIT: std::time::Duration = std::time::Duration::from_secs(30);
    let b = Node::named(info, name);
    assert_eq!(b.addr.to_bytes(), name, "fi_getname after fi_setname");
    let a = Node::open(info);
    let b_at_a = a.insert(&b.addr);
    let msg = b"to the name set before fi_enable";
    let mut buf = [0u8; 32];
    b.recv(&mut buf, 7);
    a.send(msg, b_at_a, 8).expect("fi_send");
    let got = wait_for(&[&a.cq], WAIT, "the renamed endpoint's receive", || {
        poll(&b.cq)
    });
    assert_eq!(got.expect("receive").op_context, 7);
    assert_eq!(&buf, msg);
    let e = b.ep.setname(name).expect_err("fi_setname after fi_enable");
    assert_eq!(e.code(), Errno::EOPBADSTATE, "{e}");
    assert_eq!(b.ep.getname().unwrap(), name, "a refused fi_setname");
}
