//! `fi_info` lists from the Rust side: built from `ofi::getinfo` results, read back,
//! duplicated and freed; every attribute must survive the trip through the C layout.

use std::ptr;

use ofi::{getinfo, GetinfoFlags, Info, Nic, API_VERSION};
use ofi_capi::info::{dup, free_list, info_from_c, list_to_c, FiInfo};

fn all_infos() -> Vec<Info> {
    getinfo(
        API_VERSION,
        None,
        None,
        GetinfoFlags::empty(),
        Some(&Info::hints()),
    )
    .expect("getinfo over the in-tree providers")
}

/// The Rust infos of a C list, in order.
fn read_list(mut p: *const FiInfo) -> Vec<Info> {
    let mut v = Vec::new();
    while !p.is_null() {
        // SAFETY: `p` is a node of a list built by list_to_c/dup.
        unsafe {
            v.push(info_from_c(p).expect("read back"));
            p = (*p).next;
        }
    }
    v
}

#[test]
fn list_round_trips_every_attribute() {
    let mut infos = all_infos();
    assert!(infos.len() >= 5);
    // A NIC and keys exercise the optional parts.
    infos[0].nic = Some(Nic {
        device_name: Some("eth0".into()),
        link_address: Some("02:00:00:00:00:01".into()),
        mtu: 1500,
        speed: 10_000_000_000,
        link_up: true,
        bus: ofi::Bus::Pci(ofi::PciAddress {
            domain: 1,
            bus: 0x3b,
            device: 0,
            function: 1,
        }),
        ..Nic::default()
    });
    infos[0].ep_attr.auth_key = Some(vec![1, 2, 3]);
    infos[0].domain_attr.auth_key = Some(vec![4, 5]);
    let list = list_to_c(&infos).expect("list_to_c");
    assert_eq!(read_list(list), infos);
    // SAFETY: `list` was built by list_to_c and is not used afterwards.
    unsafe { free_list(list) };
}

#[test]
fn dup_copies_one_node_deeply_and_allocinfo_is_all_zero() {
    let infos = all_infos();
    let list = list_to_c(&infos[..2]).expect("list_to_c");
    // SAFETY: `list` is a valid list; the copies are freed once each below.
    unsafe {
        let copy = dup(list);
        assert!(!copy.is_null());
        assert!((*copy).next.is_null(), "dup copies one node");
        assert_ne!((*copy).fabric_attr, (*list).fabric_attr);
        assert_ne!(
            (*(*copy).fabric_attr).prov_name,
            (*(*list).fabric_attr).prov_name
        );
        assert_eq!(info_from_c(copy).expect("copy"), infos[0]);
        free_list(list);
        // The copy lives on after the original is freed.
        assert_eq!(info_from_c(copy).expect("copy"), infos[0]);
        free_list(copy);

        let blank = dup(ptr::null());
        assert!(!(*blank).tx_attr.is_null() && !(*blank).fabric_attr.is_null());
        assert!((*blank).nic.is_null() && (*(*blank).fabric_attr).prov_name.is_null());
        assert_eq!(info_from_c(blank).expect("blank"), Info::new());
        free_list(blank);
    }
}

#[test]
fn empty_list_is_null() {
    assert!(list_to_c(&[]).expect("empty").is_null());
    // SAFETY: null is a valid (empty) list.
    unsafe { free_list(ptr::null_mut()) };
}
