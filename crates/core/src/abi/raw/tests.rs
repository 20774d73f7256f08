//! Round trips and hostile inputs of the raw forms.

use super::*;
use crate::enums::{AvType, CqFormat, EpType, Progress, Protocol, ResourceMgmt, Threading};
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

fn opt_string() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("[a-z0-9_;. -]{0,12}")
}

fn address() -> impl Strategy<Value = Option<Address>> {
    proptest::option::of(prop_oneof![
        (any::<u32>(), any::<u16>())
            .prop_map(|(ip, port)| Address::Inet(SocketAddrV4::new(Ipv4Addr::from(ip), port))),
        (any::<u128>(), any::<u16>(), any::<u32>(), any::<u32>()).prop_map(|(ip, port, fl, sc)| {
            Address::Inet6(SocketAddrV6::new(Ipv6Addr::from(ip), port, fl, sc))
        }),
        "[a-z]{1,8}://[a-z0-9]{0,10}".prop_map(Address::Str),
        (10u32..16, proptest::collection::vec(any::<u8>(), 1..24)).prop_map(|(f, bytes)| {
            Address::Raw {
                format: AddrFormat::from_raw(f),
                bytes,
            }
        }),
    ])
}

fn pick<T: Copy + std::fmt::Debug + 'static>(all: &'static [T]) -> impl Strategy<Value = T> {
    proptest::sample::select(all)
}

prop_compose! {
    fn tx()(caps in any::<u64>(), mode in any::<u64>(), op in any::<u64>(), mo in any::<u64>(),
            co in any::<u64>(), n in any::<[usize; 4]>(), tc in any::<u32>()) -> TxAttr {
        TxAttr {
            caps: Caps::from_bits_retain(caps), mode: Mode::from_bits_retain(mode),
            op_flags: OpFlags::from_bits_retain(op), msg_order: MsgOrder::from_bits_retain(mo),
            comp_order: CompOrder::from_bits_retain(co), inject_size: n[0], size: n[1],
            iov_limit: n[2], rma_iov_limit: n[3], tclass: tc,
        }
    }
}

prop_compose! {
    fn rx()(caps in any::<u64>(), mode in any::<u64>(), op in any::<u64>(), mo in any::<u64>(),
            co in any::<u64>(), n in any::<[usize; 3]>()) -> RxAttr {
        RxAttr {
            caps: Caps::from_bits_retain(caps), mode: Mode::from_bits_retain(mode),
            op_flags: OpFlags::from_bits_retain(op), msg_order: MsgOrder::from_bits_retain(mo),
            comp_order: CompOrder::from_bits_retain(co), total_buffered_recv: n[0], size: n[1],
            iov_limit: n[2],
        }
    }
}

prop_compose! {
    fn ep()(t in pick(EpType::ALL), proto in any::<u32>(), pv in any::<u32>(), n in any::<[usize; 7]>(),
            tag in any::<u64>(), key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8))) -> EpAttr {
        EpAttr {
            ep_type: t, protocol: Protocol::from_raw(proto), protocol_version: pv,
            max_msg_size: n[0], msg_prefix_size: n[1], max_order_raw_size: n[2],
            max_order_war_size: n[3], max_order_waw_size: n[4], mem_tag_format: tag,
            tx_ctx_cnt: n[5], rx_ctx_cnt: n[6], auth_key: key,
        }
    }
}

prop_compose! {
    fn domain()(h in any::<usize>(), name in opt_string(), th in pick(Threading::ALL),
                cp in pick(Progress::ALL), dp in pick(Progress::ALL), rm in pick(ResourceMgmt::ALL),
                av in pick(AvType::ALL), mr in any::<u32>(), n in any::<[usize; 16]>(),
                caps in any::<u64>(), mode in any::<u64>(), tc in any::<u32>(),
                key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8))) -> DomainAttr {
        DomainAttr {
            domain: h, name, threading: th, control_progress: cp, data_progress: dp,
            resource_mgmt: rm, av_type: av, mr_mode: MrMode::from_bits_retain(mr),
            mr_key_size: n[0], cq_data_size: n[1], cq_cnt: n[2], ep_cnt: n[3], tx_ctx_cnt: n[4],
            rx_ctx_cnt: n[5], max_ep_tx_ctx: n[6], max_ep_rx_ctx: n[7], max_ep_stx_ctx: n[8],
            max_ep_srx_ctx: n[9], cntr_cnt: n[10], mr_iov_limit: n[11],
            caps: Caps::from_bits_retain(caps), mode: Mode::from_bits_retain(mode), auth_key: key,
            max_err_data: n[12], mr_cnt: n[13], tclass: tc,
        }
    }
}

prop_compose! {
    fn nic()(s in proptest::collection::vec(opt_string(), 8), mtu in any::<usize>(), speed in any::<usize>(),
             up in any::<bool>(), pci in proptest::option::of((any::<u16>(), any::<u8>(), 0..32u8, 0..8u8))) -> Nic {
        Nic {
            device_name: s[0].clone(), device_id: s[1].clone(), device_version: s[2].clone(),
            vendor_id: s[3].clone(), driver: s[4].clone(), firmware: s[5].clone(),
            link_address: s[6].clone(), mtu, speed, link_up: up, network_type: s[7].clone(),
            bus: pci.map_or(Bus::Unknown, |(domain, bus, device, function)| {
                Bus::Pci(PciAddress { domain, bus, device, function })
            }),
        }
    }
}

prop_compose! {
    fn info()(caps in any::<u64>(), mode in any::<u64>(), fmt in any::<u32>(), src in address(),
              dest in address(), handle in any::<usize>(), tx in tx(), rx in rx(), ep in ep(),
              domain in domain(), fname in opt_string(), pname in opt_string(), f in any::<usize>(),
              pv in any::<u32>(), av in any::<u32>(), nic in proptest::option::of(nic())) -> Info {
        Info {
            caps: Caps::from_bits_retain(caps), mode: Mode::from_bits_retain(mode),
            addr_format: AddrFormat::from_raw(fmt), src_addr: src, dest_addr: dest, handle,
            tx_attr: tx, rx_attr: rx, ep_attr: ep, domain_attr: domain,
            fabric_attr: FabricAttr {
                fabric: f, name: fname, prov_name: pname,
                prov_version: Version::from_raw(pv), api_version: Version::from_raw(av),
            },
            nic,
        }
    }
}

proptest! {
    #[test]
    fn info_round_trips_through_the_raw_form(i in info()) {
        let b = RawInfoBox::new(&i);
        // SAFETY: the box keeps every pointer valid.
        let back = unsafe { info_from_raw(b.as_ptr()) }.unwrap();
        prop_assert_eq!(back, i);
    }
}

#[test]
fn default_and_empty_strings_survive() {
    let mut i = Info::new();
    i.fabric_attr.name = Some(String::new());
    i.ep_attr.auth_key = Some(Vec::new());
    let b = RawInfoBox::new(&i);
    // SAFETY: the box keeps every pointer valid.
    assert_eq!(unsafe { info_from_raw(b.as_ptr()) }.unwrap(), i);
}

/// A NIC from a plugin of minor 3 (its `struct_size` ends before the bus fields)
/// reads as no bus, whatever lies past its end; a bad bus from a newer one is
/// `FI_EINVAL`.
#[test]
fn a_nic_before_minor_4_has_no_bus() {
    let mut i = Info::new();
    i.nic = Some(Nic {
        device_name: Some("eth0".into()),
        bus: Bus::Pci(PciAddress {
            domain: 0,
            bus: 0,
            device: 3,
            function: 0,
        }),
        ..Nic::default()
    });
    let b = RawInfoBox::new(&i);
    // SAFETY: the box's nic pointer is valid.
    let mut old = unsafe { *b.raw.nic };
    old.struct_size = RawNic::LAYOUT.size_for_minor(3);
    let mut boxed = RawInfoBox::new(&i);
    boxed.raw.nic = &old;
    // SAFETY: every pointer is valid (old lives on this frame).
    let back = unsafe { info_from_raw(boxed.as_ptr()) }.unwrap();
    let nic = back.nic.expect("a nic");
    assert_eq!(nic.bus, Bus::Unknown);
    assert_eq!(nic.device_name.as_deref(), Some("eth0"));
    assert!(RawNic::LAYOUT.size_for_minor(3) < RawNic::LAYOUT.size_for_minor(4));
    for (ty, device) in [(2, 0), (1, 32)] {
        let mut bad = old;
        bad.struct_size = std::mem::size_of::<RawNic>();
        bad.bus_type = ty;
        bad.pci_device = device;
        let mut boxed = RawInfoBox::new(&i);
        boxed.raw.nic = &bad;
        // SAFETY: as above.
        let e = unsafe { info_from_raw(boxed.as_ptr()) }.unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL, "{e}");
    }
}

#[test]
fn bad_raw_forms_are_einval() {
    let i = Info::new();
    let b = RawInfoBox::new(&i);
    // An unknown endpoint type.
    let mut ep = RawInfoBox::new(&i);
    // SAFETY: the box's ep_attr pointer is valid.
    let mut raw_ep = unsafe { *ep.raw.ep_attr };
    raw_ep.ep_type = 99;
    ep.raw.ep_attr = &raw_ep;
    // SAFETY: every pointer is valid (raw_ep lives on this frame).
    let e = unsafe { info_from_raw(ep.as_ptr()) }.unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    assert_eq!(e.message(), "ep_attr.type: invalid value 99");
    // A structure shorter than its first layout.
    let mut short = RawInfoBox::new(&i);
    short.raw.struct_size = 8;
    assert_eq!(
        // SAFETY: as above.
        unsafe { info_from_raw(short.as_ptr()) }.unwrap_err().code(),
        Errno::EINVAL
    );
    // Null pointers.
    assert_eq!(
        // SAFETY: null is handled.
        unsafe { info_from_raw(std::ptr::null()) }
            .unwrap_err()
            .code(),
        Errno::EINVAL
    );
    // Null attribute pointers mean defaults.
    let mut bare = RawInfoBox::new(&i);
    bare.raw.tx_attr = std::ptr::null();
    bare.raw.domain_attr = std::ptr::null();
    // SAFETY: null sub-structures are allowed.
    assert_eq!(unsafe { info_from_raw(bare.as_ptr()) }.unwrap(), i);
    // Invalid UTF-8 in a name.
    let bytes = [0xffu8, 0xfe];
    let mut utf = RawInfoBox::new(&i);
    let mut fa = RawFabricAttr {
        struct_size: std::mem::size_of::<RawFabricAttr>(),
        fabric: 0,
        name: RawStr::from_bytes(&bytes),
        prov_name: RawStr::NONE,
        prov_version: 0,
        api_version: 0,
    };
    utf.raw.fabric_attr = &mut fa;
    // SAFETY: all pointers valid.
    let e = unsafe { info_from_raw(utf.as_ptr()) }.unwrap_err();
    assert_eq!(e.message(), "fabric_attr.name: not valid UTF-8");
    drop(b);
}

#[test]
fn entries_have_the_c_layouts() {
    use std::mem::{offset_of, size_of};
    assert_eq!(size_of::<CqEntry>(), 8);
    assert_eq!(size_of::<CqMsgEntry>(), 24);
    assert_eq!(size_of::<CqDataEntry>(), 40);
    assert_eq!(size_of::<CqTaggedEntry>(), 48);
    assert_eq!(size_of::<CqErrEntry>(), 80);
    assert_eq!(offset_of!(CqErrEntry, olen), 48);
    assert_eq!(offset_of!(CqErrEntry, err), 56);
    assert_eq!(offset_of!(CqErrEntry, err_data), 64);
    assert_eq!(size_of::<EqEntry>(), 24);
    assert_eq!(size_of::<EqCmEntry>(), 16);
    assert_eq!(size_of::<EqErrEntry>(), 48);
    assert_eq!(size_of::<Msg>(), 48);
    assert_eq!(size_of::<MsgTagged>(), 64);
    assert_eq!(size_of::<MsgRma>(), 64);
    assert_eq!(size_of::<MsgAtomic>(), 72);
    assert_eq!(size_of::<RmaIov>(), 24);
    assert_eq!(size_of::<Iov>(), 16);
    assert_eq!(cq_entry_size(CqFormat::Unspec), 8);
    assert_eq!(cq_entry_size(CqFormat::Tagged), 48);
}

#[test]
fn err_buf_truncates_at_a_char_boundary() {
    let mut buf = [0u8; 5];
    let mut eb = ErrBuf::new(&mut buf);
    // SAFETY: `eb` is over `buf`.
    unsafe { ErrBuf::write(&mut eb, "abcdé!") };
    // SAFETY: `buf` is still alive.
    assert_eq!(unsafe { eb.message() }, "abcd");
    // SAFETY: null is allowed.
    unsafe { ErrBuf::write(std::ptr::null_mut(), "ignored") };
}

#[test]
fn a_tagged_message_keeps_the_message_and_adds_tag_and_ignore() {
    let iov = [Iov::from_slice(b"abc")];
    let descs = [std::ptr::null_mut::<c_void>()];
    let msg = Msg {
        msg_iov: iov.as_ptr(),
        desc: descs.as_ptr(),
        iov_count: 1,
        addr: 9,
        context: 17,
        data: 0x5a,
    };
    let t = msg.tagged(0x77, 0xf0);
    assert_eq!(t.msg_iov, msg.msg_iov);
    assert_eq!(t.desc, msg.desc);
    assert_eq!((t.iov_count, t.addr, t.context, t.data), (1, 9, 17, 0x5a));
    assert_eq!((t.tag, t.ignore), (0x77, 0xf0));
}
