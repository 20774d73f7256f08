//! `fi_setname` on shm: an endpoint named before `fi_enable` is reached at the new
//! name (its region moved there, the old name gone, nothing left after close); after
//! `fi_enable`, `FI_EOPBADSTATE`; a malformed or foreign address `FI_EINVAL`; a name a
//! live endpoint holds `FI_EADDRINUSE`, the endpoint keeping its own.

use std::path::Path;

use ofi::ep::Endpoint;
use ofi::{AddrFormat, Address, Caps, EpType, Errno, Info};
use ofi_conformance::fixture::{first_info, unenabled_peer, wait_ok};

fn info(reg: &ofi::registry::Registry) -> Info {
    let mut hints = Info::hints().with_ep_type(EpType::Rdm).with_caps(Caps::MSG);
    hints.fabric_attr.prov_name = Some("shm".into());
    first_info(reg, hints)
}

/// The endpoint's address as a string (`fi_shm://<name>`).
fn name_of(ep: &Endpoint) -> String {
    match Address::from_bytes(AddrFormat::STR, &ep.getname().unwrap()).unwrap() {
        Address::Str(s) => s,
        other => panic!("not a string address: {other:?}"),
    }
}

fn addr_bytes(s: &str) -> Vec<u8> {
    Address::Str(s.to_string()).to_bytes()
}

fn region_file(addr: &str) -> String {
    format!("/dev/shm/{}", addr.strip_prefix("fi_shm://").unwrap())
}

#[test]
fn an_endpoint_named_before_enable_is_reached_at_that_name() {
    let reg = ofi_conformance::plugin::linked_registry(&[ofi::abi::entry_for::<
        ofi_prov_shm::ShmProvider,
    >()]);
    let info = info(&reg);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    // Each with a CQ and an AV bound, not enabled.
    let (a, a_cq, a_av) = unenabled_peer(&domain, &info);
    let (b, b_cq, _b_av) = unenabled_peer(&domain, &info);
    let old = name_of(&b);
    let new = format!("fi_shm://setname-test-{}", std::process::id());
    b.setname(&addr_bytes(&new)).expect("setname before enable");
    assert_eq!(name_of(&b), new, "getname after setname");
    assert!(
        Path::new(&region_file(&new)).exists(),
        "no region at the new name"
    );
    assert!(
        !Path::new(&region_file(&old)).exists(),
        "the old name is left"
    );
    // Naming it its own name again changes nothing.
    b.setname(&addr_bytes(&new))
        .expect("setname to the same name");

    // Bad input leaves the name as it is.
    let bad: [(&[u8], Errno); 4] = [
        (
            &addr_bytes("fi_sockaddr_in://127.0.0.1:5000"),
            Errno::EINVAL,
        ),
        (&addr_bytes("fi_shm://../escape"), Errno::EINVAL),
        (&[0xff, 0xfe, 0], Errno::EINVAL),
        (&addr_bytes(&name_of(&a)), Errno::EADDRINUSE),
    ];
    for (bytes, code) in bad {
        let e = b.setname(bytes).expect_err("a bad name");
        assert_eq!(e.code(), code, "{bytes:?}: {e}");
        assert_eq!(name_of(&b), new, "{bytes:?} changed the name");
    }

    a.enable().unwrap();
    b.enable().unwrap();
    let e = b
        .setname(&addr_bytes(&old))
        .expect_err("setname after enable");
    assert_eq!(e.code(), Errno::EOPBADSTATE, "{e}");
    assert_eq!(name_of(&b), new);

    let to_b = a_av.insert(&[Address::Str(new.clone())]).expect("insert")[0];
    let msg = b"at the new name";
    let mut buf = [0u8; 32];
    let null = std::ptr::null_mut();
    // SAFETY: `buf` and `msg` outlive the operations, whose completions are read below.
    unsafe { b.recv(buf.as_mut_ptr(), buf.len(), null, 0, 1) }.unwrap();
    // SAFETY: as above.
    unsafe { a.send(msg.as_ptr(), msg.len(), null, to_b, 2) }.unwrap();
    assert_eq!(wait_ok(&a_cq, "send completion").op_context, 2);
    let got = wait_ok(&b_cq, "receive at the new name");
    assert_eq!(got.len, msg.len());
    assert_eq!(&buf[..msg.len()], msg);

    drop(b);
    assert!(
        !Path::new(&region_file(&new)).exists(),
        "the renamed region is left after close"
    );
}
