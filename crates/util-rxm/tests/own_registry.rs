//! A registry built by hand layers rxm over its own core provider: the host answers
//! rxm's getinfo and fabric open for its core from the registry that called rxm, not
//! the process-wide one. In this test process the process-wide registry knows no
//! provider at all (no built-in is registered, no plugin directory is searched), so a
//! core found by rxm can only have come from the hand-built registry.
//!
//! One test in this binary: it sets the environment before the process-wide registry
//! is first built.

use std::time::{Duration, Instant};

use ofi::abi::raw::CqTaggedEntry;
use ofi::av::AvAttr;
use ofi::cq::CqAttr;
use ofi::getinfo::GetinfoRequest;
use ofi::registry::{Registry, RegistryConfig};
use ofi::{AddrFormat, Caps, CqFormat, EpType, Errno, Info, OpFlags, API_VERSION};

#[test]
fn a_hand_built_registry_layers_rxm_over_its_own_tcp() {
    std::env::set_var("FI_PROVIDER_PATH", "/nonexistent-ofi-rs-plugin-dir");
    std::env::set_var("OFI_PLUGINS_CONFIG", "/dev/null");
    std::env::remove_var("FI_PROVIDER");
    std::env::remove_var("FI_HOOK");
    let global = ofi::registry::global();
    assert!(
        global.providers().is_empty(),
        "the process-wide registry must know no provider here: {:?}",
        global.providers()
    );
    let reg = Registry::build(RegistryConfig {
        builtins: vec![
            ofi::abi::entry_for::<ofi_prov_tcp::TcpProvider>(),
            ofi::abi::entry_for::<ofi_util_rxm::RxmProvider>(),
        ],
        ..RegistryConfig::default()
    });
    let mut hints = Info::hints()
        .with_ep_type(EpType::Rdm)
        .with_caps(Caps::MSG)
        .with_addr_format(AddrFormat::SOCKADDR_IN)
        .with_provider("tcp;ofi_rxm");
    hints.domain_attr.data_progress = ofi::Progress::Manual;
    let infos = reg
        .getinfo(&GetinfoRequest {
            hints: Some(hints),
            node: Some("127.0.0.1".into()),
            ..GetinfoRequest::new(API_VERSION)
        })
        .unwrap_or_else(|e| panic!("getinfo tcp;ofi_rxm from the hand-built registry: {e}"));
    let info = infos[0].clone();
    assert_eq!(info.prov_name(), "tcp;ofi_rxm");
    // The fabric (rxm opens its core's through the host) and a message to itself.
    let fabric = reg.open_fabric(&info).expect("fi_fabric");
    let domain = fabric.domain(&info).expect("fi_domain");
    let cq = domain
        .cq_open(&CqAttr::with_format(CqFormat::Tagged))
        .expect("fi_cq_open");
    let av = domain.av_open(&AvAttr::default()).expect("fi_av_open");
    let ep = domain.endpoint(&info).expect("fi_endpoint");
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV)
        .expect("bind cq");
    ep.bind_av(&av).expect("bind av");
    ep.enable().expect("fi_enable");
    let name = ofi::addr::Address::from_bytes(info.addr_format, &ep.getname().unwrap()).unwrap();
    let me = av.insert(&[name]).expect("fi_av_insert")[0];
    let mut rb = [0u8; 16];
    // SAFETY: the buffers outlive the operations (their completions are awaited).
    unsafe {
        ep.recv(rb.as_mut_ptr(), rb.len(), std::ptr::null_mut(), me, 1)
            .unwrap();
        ep.send(b"own registry".as_ptr(), 12, std::ptr::null_mut(), me, 2)
            .unwrap();
    }
    let mut seen = Vec::new();
    let end = Instant::now() + Duration::from_secs(10);
    while seen.len() < 2 {
        let mut e = [CqTaggedEntry::default()];
        match cq.read(&mut e) {
            Ok(_) => seen.push(e[0].op_context),
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) => panic!("fi_cq_read: {err}"),
        }
        assert!(Instant::now() < end, "no completions");
    }
    seen.sort_unstable();
    assert_eq!(seen, [1, 2]);
    assert_eq!(&rb[..12], b"own registry");
}
