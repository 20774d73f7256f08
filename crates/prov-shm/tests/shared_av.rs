//! `FI_SHARED_AV`: a named AV created by one process and opened read-only (`FI_READ`)
//! by another, which finds the creator's addresses at the same `fi_addr_t`s and
//! sends through them. Two processes (the test binary re-runs itself as the child),
//! every wait bounded (the child's lines by [`BOUND`], completions by the
//! conformance fixture's `WAIT`), and no file left in /dev/shm.

use std::time::Duration;

use ofi::av::AvAttr;
use ofi::registry::Registry;
use ofi::{AddrFormat, Address, AvFlags, Caps, EpType, Errno, Info};
use ofi_conformance::fixture::{first_info, post_recv, send, unenabled_peer_on, wait_ok};
use ofi_testkit::child::{child_mode, hear, say, ChildProc};

const CHILD_ENV: &str = "OFI_SHM_SHARED_AV_CHILD";
const BOUND: Duration = Duration::from_secs(20);

fn registry() -> Registry {
    ofi_conformance::plugin::linked_registry(&[ofi::abi::entry_for::<ofi_prov_shm::ShmProvider>()])
}

fn rdm_info(reg: &Registry) -> Info {
    let mut hints = Info::hints().with_ep_type(EpType::Rdm).with_caps(Caps::MSG);
    hints.fabric_attr.prov_name = Some("shm".into());
    first_info(reg, hints)
}

fn named(name: &str, flags: AvFlags) -> AvAttr {
    AvAttr {
        name: Some(name.to_string()),
        flags,
        ..AvAttr::default()
    }
}

fn table_exists(name: &str) -> bool {
    std::path::Path::new("/dev/shm")
        .join(format!("{}{name}", ofi_prov_shm::av::TABLE_PREFIX))
        .exists()
}

/// The child: open the view of AV `name`, report what the parent's `fi_addr_t`s name,
/// check it is read-only, then send "through the view" to the first one.
fn child_main(name: &str) {
    let reg = registry();
    let info = rdm_info(&reg);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    let view = domain
        .av_open(&named(name, AvFlags::READ))
        .expect("open the shared AV read-only");
    let fi_addrs: Vec<u64> = hear()
        .split_whitespace()
        .map(|w| w.parse().expect("an fi_addr"))
        .collect();
    for f in &fi_addrs {
        let a = view.lookup(*f).expect("lookup in the view");
        say(&format!(
            "lookup {f} {}",
            view.straddr(&a).expect("straddr")
        ));
    }
    let e = view
        .insert(&[Address::Str("fi_shm://ofi-shm-not-here".into())])
        .expect_err("insert into a read-only view");
    say(&format!("insert {}", e.code()));
    let (ep, cq) = unenabled_peer_on(&domain, &info, &view);
    ep.enable().expect("enable");
    send(&ep, b"through the view", fi_addrs[0], 0x5e).expect("send");
    assert_eq!(wait_ok(&cq, "the child's send").op_context, 0x5e);
    say("sent");
    hear();
}

/// The creator inserts three addresses (its own endpoint's first); the child's view
/// resolves each `fi_addr_t` to the same address, refuses inserts, and its send to
/// the first arrives. The table is gone once the creator's AV is closed.
#[test]
fn a_named_av_is_seen_by_another_process() {
    if let Some(mode) = child_mode(CHILD_ENV) {
        return child_main(&mode);
    }
    let reg = registry();
    let info = rdm_info(&reg);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    let name = format!("t{}", std::process::id());
    let av = domain
        .av_open(&named(&name, AvFlags::empty()))
        .expect("create the shared AV");
    assert!(table_exists(&name));
    let e = domain
        .av_open(&named(&name, AvFlags::empty()))
        .expect_err("a second creator of one name");
    assert_eq!(e.code(), Errno::EADDRINUSE);
    let (ep, cq) = unenabled_peer_on(&domain, &info, &av);
    ep.enable().expect("enable");
    let me = Address::from_bytes(AddrFormat::STR, &ep.getname().unwrap()).unwrap();
    let addrs = [
        me,
        Address::Str("fi_shm://ofi-shm-elsewhere-1".into()),
        Address::Str("fi_shm://ofi-shm-elsewhere-2".into()),
    ];
    let fi_addrs = av.insert(&addrs).expect("insert");
    let mut got = [0u8; 32];
    post_recv(&ep, &mut got, 0x7e).expect("recv");

    let mut child = ChildProc::spawn(
        CHILD_ENV,
        "a_named_av_is_seen_by_another_process",
        &name,
        &[],
        BOUND,
    );
    let list: Vec<String> = fi_addrs.iter().map(u64::to_string).collect();
    child.send_line(&list.join(" "));
    for (f, a) in fi_addrs.iter().zip(&addrs) {
        let want = format!("lookup {f} {}", av.straddr(a).unwrap());
        assert_eq!(child.line("a lookup"), want);
    }
    assert_eq!(
        child.line("the refused insert"),
        format!("insert {}", Errno::EOPNOTSUPP)
    );
    assert_eq!(child.line("the child's send"), "sent");
    assert_eq!(wait_ok(&cq, "the receive").op_context, 0x7e);
    assert_eq!(&got[..16], b"through the view");
    child.send_line("bye");
    let status = child.child.wait().expect("wait for the child");
    assert!(status.success(), "child: {status}");
    drop((ep, cq));
    drop(av);
    assert!(
        !table_exists(&name),
        "the table is unlinked with its creator's AV"
    );
}

/// Names and flags a named AV refuses: a bad name (`FI_EINVAL`), a missing one
/// (`FI_ENOENT` with `FI_READ`), `FI_EVENT` (`FI_EINVAL`), and on the creator's side
/// removal and inserts by service (`FI_EOPNOTSUPP`); no table is left behind.
#[test]
fn named_av_refusals() {
    if child_mode(CHILD_ENV).is_some() {
        return;
    }
    let reg = registry();
    let info = rdm_info(&reg);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    let code = |attr: AvAttr| domain.av_open(&attr).expect_err("refused").code();
    assert_eq!(code(named("bad/name", AvFlags::empty())), Errno::EINVAL);
    assert_eq!(
        code(named(&"x".repeat(80), AvFlags::empty())),
        Errno::EINVAL
    );
    let missing = format!("missing{}", std::process::id());
    assert_eq!(code(named(&missing, AvFlags::READ)), Errno::ENOENT);
    assert_eq!(code(named(&missing, AvFlags::EVENT)), Errno::EINVAL);
    assert!(!table_exists(&missing));
    let name = format!("r{}", std::process::id());
    let av = domain
        .av_open(&named(&name, AvFlags::empty()))
        .expect("create");
    let f = av
        .insert(&[Address::Str("fi_shm://ofi-shm-a".into())])
        .expect("insert");
    assert_eq!(
        av.remove(&f, 0).expect_err("remove").code(),
        Errno::EOPNOTSUPP
    );
    assert_eq!(
        av.insertsvc("n", "1", 0).expect_err("insertsvc").code(),
        Errno::EOPNOTSUPP
    );
    drop(av);
    assert!(!table_exists(&name));
}
