//! `FI_UDP_PEER_SOCKETS=0`: every datagram goes through the endpoint's one socket (its
//! own binary because the parameter is read from the environment when the provider
//! starts).

use std::time::{Duration, Instant};

use ofi::abi::raw::CqDataEntry;
use ofi::av::AvAttr;
use ofi::cq::CqAttr;
use ofi::getinfo::GetinfoRequest;
use ofi::registry::{Registry, RegistryConfig};
use ofi::{Address, CqFormat, Errno, Info, OpFlags, WaitObj, API_VERSION};
use ofi_prov_udp::UdpProvider;

#[test]
fn with_peer_sockets_off_the_endpoint_keeps_one_socket() {
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("FI_UDP_PEER_SOCKETS", "0");
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<UdpProvider>()],
        ..RegistryConfig::default()
    });
    let mut h = Info::hints();
    h.fabric_attr.prov_name = Some("udp".into());
    let info = reg
        .getinfo(&GetinfoRequest {
            hints: Some(h),
            ..GetinfoRequest::new(API_VERSION)
        })
        .unwrap()
        .remove(0);
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let open = || {
        let cq = domain
            .cq_open(&CqAttr {
                wait_obj: WaitObj::Unspec,
                ..CqAttr::with_format(CqFormat::Data)
            })
            .unwrap();
        let av = domain.av_open(&AvAttr::default()).unwrap();
        let ep = domain.endpoint(&info).unwrap();
        ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
        ep.bind_av(&av).unwrap();
        ep.enable().unwrap();
        let addr = Address::from_bytes(info.addr_format, &ep.getname().unwrap()).unwrap();
        (ep, cq, av, addr)
    };
    let (a, a_cq, a_av, a_addr) = open();
    let (b, b_cq, b_av, _) = open();
    let b_addr = Address::from_bytes(info.addr_format, &b.getname().unwrap()).unwrap();
    let to_b = a_av.insert(std::slice::from_ref(&b_addr)).unwrap()[0];
    // b knows a (the default capabilities include FI_SOURCE_ERR).
    b_av.insert(std::slice::from_ref(&a_addr)).unwrap();
    let mut buf = [0u8; 8];
    let wait = |cq: &ofi::cq::CompletionQueue| {
        let end = Instant::now() + Duration::from_secs(2);
        let mut e = [CqDataEntry::default()];
        loop {
            match cq.read(&mut e) {
                Ok(_) => return e[0],
                Err(x) if x.code() == Errno::EAGAIN && Instant::now() < end => {}
                Err(x) if x.code() == Errno::EAVAIL => {
                    panic!("error completion: {:?}", cq.readerr_owned(0))
                }
                Err(x) => panic!("{x}"),
            }
        }
    };
    for _ in 0..5 {
        // SAFETY: the buffers outlive the operations (their completions are awaited).
        unsafe {
            b.recv(buf.as_mut_ptr(), 8, std::ptr::null_mut(), 0, 1)
                .unwrap();
            a.send(b"x".as_ptr(), 1, std::ptr::null_mut(), to_b, 2)
                .unwrap();
        }
        assert_eq!(wait(&b_cq).len, 1);
        wait(&a_cq);
    }
    // Only the endpoint's own socket is bound to its port.
    let port = a_addr.socket_addr().unwrap().port();
    let hex = format!(":{port:04X} ");
    let bound = std::fs::read_to_string("/proc/net/udp")
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|f| f.ends_with(hex.trim_end()))
        })
        .count();
    assert_eq!(bound, 1, "sockets on a's port {port}");
}
