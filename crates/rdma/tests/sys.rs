//! rdma-core at run time: the reason lines when the library or a device is missing.

use ofi_core::Errno;
use ofi_rdma::sys;

#[test]
fn a_missing_library_is_named_in_one_line() {
    let e = sys::load("libibverbs-does-not-exist.so.1")
        .err()
        .expect("load must fail");
    assert_eq!(e, "libibverbs-does-not-exist.so.1 not found");
    assert!(!e.contains('\n'));
}

#[test]
fn device_list_says_why_it_is_empty() {
    match sys::load(sys::IBVERBS_LIB) {
        Err(e) => assert_eq!(e, "libibverbs.so.1 not found"),
        Ok(lib) => match sys::device_names_of(&lib) {
            Ok(devs) => assert!(!devs.is_empty() && devs.iter().all(|(n, _)| !n.is_empty())),
            Err(e) => {
                // This machine kind: rdma-core installed, no device.
                assert_eq!(e.code(), Errno::ENODEV);
                assert_eq!(e.message(), "no RDMA device");
            }
        },
    }
    // The public entry says the same through the device list.
    if let Err(e) = ofi_rdma::device_list(ofi_rdma::DeviceKind::RdmaCore) {
        assert_eq!(e.code(), Errno::ENODEV);
        assert!(
            e.message() == "no RDMA device" || e.message() == "libibverbs.so.1 not found",
            "{e}"
        );
    }
}

#[test]
fn opening_an_rdma_core_device_that_is_not_there_fails_cleanly() {
    let dev = match ofi_rdma::device_list(ofi_rdma::DeviceKind::RdmaCore) {
        Ok(list) => list.into_iter().next().expect("a listed device"),
        Err(e) => {
            // No device on this machine: nothing to open; the reason is one line.
            assert!(!e.message().contains('\n'));
            return;
        }
    };
    // On a host with a device: it opens and answers its queries.
    let ctx = dev.open().unwrap();
    assert_eq!(ctx.kind(), ofi_rdma::DeviceKind::RdmaCore);
    assert!(ctx.query_device().unwrap().phys_port_cnt >= 1);
}

#[test]
fn a_missing_rdmacm_is_named_in_one_line() {
    let e = sys::rdmacm::load("librdmacm-does-not-exist.so.1")
        .err()
        .expect("load must fail");
    assert_eq!(e, "librdmacm-does-not-exist.so.1 not found");
    // The installed one resolves every entry point (or is absent, and says so).
    if let Err(e) = sys::rdmacm::load(sys::rdmacm::RDMACM_LIB) {
        assert_eq!(e, "librdmacm.so.1 not found");
    }
}

/// libefa, where installed: every entry point the device layer calls resolves (the
/// calls themselves need an EFA device, which this machine kind has not).
#[test]
fn libefa_resolves_every_entry_point_where_installed() {
    match sys::efadv::load(sys::efadv::LIBEFA) {
        Ok(lib) => {
            let _ = (lib.query_device, lib.create_qp_ex, lib.query_ah);
            let _ = (lib.create_cq, lib.cq_from_ibv_cq_ex);
        }
        Err(e) => {
            assert_eq!(
                e, "libefa.so.1 not found",
                "only a missing library may fail"
            );
            println!("skipped: {e}");
        }
    }
    let e = sys::efadv::load("libefa-does-not-exist.so.1").unwrap_err();
    assert_eq!(e, "libefa-does-not-exist.so.1 not found");
}
