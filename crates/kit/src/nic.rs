//! The NIC behind an IP address (`fi_info::nic`), read from the system, for the socket
//! providers' getinfo results.
//!
//! [`of_ip`] finds the interface holding an address (the default interface's for a
//! wildcard, [`crate::netif::default_ip`]) and describes it from
//! `/sys/class/net/<name>/`:
//!
//! | `Nic` field | from |
//! | --- | --- |
//! | `device_name` | the interface name |
//! | `driver` | the name the `device/driver` link points at |
//! | `vendor_id`, `device_id` | `device/vendor`, `device/device` (e.g. `0x1af4`) |
//! | `link_address` | `address` (the hardware address, e.g. a MAC) |
//! | `mtu` | `mtu`, bytes |
//! | `speed` | `speed` (Mb/s) in bits per second; 0 where the kernel knows none (virtual links say -1) |
//! | `link_up` | `operstate` is `up`, or `unknown` on an interface that is up and running (loopback) |
//! | `network_type` | `type`: `Ethernet` (1), `InfiniBand` (32), `Loopback` (772), else none |
//! | `bus` | `FI_BUS_PCI` when `device` resolves to a PCI function (`DDDD:BB:DD.F`), or to a device right under one (a virtio NIC); else `FI_BUS_UNKNOWN` (loopback, veth, bridges: no `device`) |
//!
//! Invariants: every file is read through a bound ([`FILE_MAX`] bytes; a longer one
//! counts as unreadable) and parsed defensively: what is missing or malformed is left
//! `None` / 0, never an error (this runs only at getinfo). Nothing here panics.

use std::io::Read;
use std::net::IpAddr;
use std::path::Path;

use ofi_core::{AddrFormat, Address, Bus, Info, Nic, PciAddress};

use crate::netif::{self, IfAddr};

/// The most bytes read from one sysfs file.
pub const FILE_MAX: u64 = 4096;

/// Where the kernel lists network interfaces.
const SYSFS_NET: &str = "/sys/class/net";

/// The NIC holding `ip` (for an unspecified address, the default interface of its
/// family); `None` when no interface holds it.
pub fn of_ip(ip: IpAddr) -> Option<Nic> {
    let ip = if ip.is_unspecified() {
        netif::default_ip(ip.is_ipv6())
    } else {
        ip
    };
    let addrs = netif::addrs();
    let iface = addrs.iter().find(|a| a.ip == ip)?;
    Some(describe(Path::new(SYSFS_NET), iface))
}

/// Give every result of `infos` without a NIC the NIC of its source address (an IP
/// socket address, or its `FI_ADDR_STR` text; the
/// default interface's for results without one, of the family of their address
/// format). Each address is looked up once.
pub fn fill(infos: &mut [Info]) {
    let mut seen: Vec<(IpAddr, Option<Nic>)> = Vec::new();
    for info in infos.iter_mut().filter(|i| i.nic.is_none()) {
        let source = info.src_addr.as_ref().and_then(|a| match a {
            Address::Str(text) => Address::parse_addr_str(text).ok()?.socket_addr(),
            a => a.socket_addr(),
        });
        let ip = match source {
            Some(sa) => sa.ip(),
            None if info.addr_format == AddrFormat::SOCKADDR_IN6 => {
                IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED)
            }
            None => IpAddr::from(std::net::Ipv4Addr::UNSPECIFIED),
        };
        info.nic = match seen.iter().find(|(at, _)| *at == ip) {
            Some((_, nic)) => nic.clone(),
            None => {
                let nic = of_ip(ip);
                seen.push((ip, nic.clone()));
                nic
            }
        };
    }
}

/// Interface `iface` as the sysfs tree under `root` (`/sys/class/net` on a live system)
/// describes it.
pub fn describe(root: &Path, iface: &IfAddr) -> Nic {
    let dir = root.join(&iface.name);
    let text = |file: &str| read_bounded(&dir.join(file));
    let number = |file: &str| text(file).and_then(|t| t.parse::<i64>().ok());
    let mtu = number("mtu").and_then(|m| usize::try_from(m).ok());
    let speed_mbps = number("speed").and_then(|s| usize::try_from(s).ok());
    let up = match text("operstate").as_deref() {
        Some("up") => true,
        Some("unknown") => iface.up && iface.running,
        _ => false,
    };
    let network_type = match number("type") {
        Some(1) => Some("Ethernet"),
        Some(32) => Some("InfiniBand"),
        Some(772) => Some("Loopback"),
        _ => None,
    };
    let driver = std::fs::read_link(dir.join("device/driver"))
        .ok()
        .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()));
    Nic {
        device_name: Some(iface.name.clone()),
        device_id: text("device/device"),
        vendor_id: text("device/vendor"),
        driver,
        link_address: text("address"),
        mtu: mtu.unwrap_or(0),
        speed: speed_mbps.map_or(0, |s| s.saturating_mul(1_000_000)),
        link_up: up,
        network_type: network_type.map(str::to_owned),
        bus: bus_of(&dir),
        ..Nic::default()
    }
}

/// How many directories up from the resolved `device` link a PCI address is looked
/// for: the device itself (a PCI NIC), or its parent (a virtio NIC sits under its
/// PCI function). Further up is a bridge or a controller, not the NIC (a USB NIC's
/// host controller is no bus of the NIC's).
const PCI_DEPTH: usize = 2;

/// The bus of the interface whose sysfs directory is `dir`: its `device` link
/// resolved (one bounded `canonicalize`), then the first of [`PCI_DEPTH`] path
/// components named as a PCI address.
fn bus_of(dir: &Path) -> Bus {
    let Ok(device) = std::fs::canonicalize(dir.join("device")) else {
        return Bus::Unknown;
    };
    device
        .ancestors()
        .take(PCI_DEPTH)
        .find_map(|p| PciAddress::parse(p.file_name()?.to_str()?))
        .map_or(Bus::Unknown, Bus::Pci)
}

/// The trimmed text of `path`; `None` when it cannot be read, is empty, is not UTF-8
/// or is longer than [`FILE_MAX`].
fn read_bounded(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(FILE_MAX + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > FILE_MAX {
        return None;
    }
    let text = String::from_utf8(bytes).ok()?;
    let trimmed = text.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, up: bool) -> IfAddr {
        IfAddr {
            name: name.into(),
            ip: IpAddr::from([10, 0, 0, 1]),
            up,
            running: up,
            loopback: false,
        }
    }

    /// A sysfs-like tree in a temporary directory.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("temporary directory");
        for (path, content) in files {
            let p = root.path().join(path);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, content).expect("write");
        }
        root
    }

    #[test]
    fn an_ethernet_device_is_described_from_its_files() {
        let root = tree(&[
            ("eth7/mtu", "9000\n"),
            ("eth7/speed", "25000\n"),
            ("eth7/operstate", "up\n"),
            ("eth7/address", "02:fc:00:00:00:01\n"),
            ("eth7/type", "1\n"),
            ("eth7/device/vendor", "0x15b3\n"),
            ("eth7/device/device", "0x1017\n"),
            ("drivers/mlx5_core/.keep", ""),
        ]);
        std::os::unix::fs::symlink(
            root.path().join("drivers/mlx5_core"),
            root.path().join("eth7/device/driver"),
        )
        .expect("symlink");
        let nic = describe(root.path(), &iface("eth7", true));
        assert_eq!(nic.device_name.as_deref(), Some("eth7"));
        assert_eq!(nic.mtu, 9000);
        assert_eq!(nic.speed, 25_000_000_000);
        assert!(nic.link_up);
        assert_eq!(nic.link_address.as_deref(), Some("02:fc:00:00:00:01"));
        assert_eq!(nic.network_type.as_deref(), Some("Ethernet"));
        assert_eq!(nic.vendor_id.as_deref(), Some("0x15b3"));
        assert_eq!(nic.device_id.as_deref(), Some("0x1017"));
        assert_eq!(nic.driver.as_deref(), Some("mlx5_core"));
        assert_eq!(nic.bus, Bus::Unknown, "device is no PCI address here");
    }

    /// `device` resolving to a PCI function, or to a virtio device under one: a PCI
    /// bus with that address; a device further down (USB) or none: no bus.
    #[test]
    fn the_bus_is_the_pci_function_the_device_resolves_to() {
        let root = tree(&[
            ("devices/pci0000:00/0000:00:03.0/virtio2/.keep", ""),
            ("devices/pci0000:00/0000:3b:00.1/.keep", ""),
            ("devices/pci0000:00/0000:00:14.0/usb1/1-1/.keep", ""),
            ("net/vnic/mtu", "1500\n"),
            ("net/pnic/mtu", "1500\n"),
            ("net/unic/mtu", "1500\n"),
            ("net/lo/mtu", "65536\n"),
        ]);
        let link = |name: &str, to: &str| {
            std::os::unix::fs::symlink(
                root.path().join("devices/pci0000:00").join(to),
                root.path().join("net").join(name).join("device"),
            )
            .expect("symlink")
        };
        link("vnic", "0000:00:03.0/virtio2");
        link("pnic", "0000:3b:00.1");
        link("unic", "0000:00:14.0/usb1/1-1");
        let net = root.path().join("net");
        let pci = |d, b, f| {
            Bus::Pci(PciAddress {
                domain: 0,
                bus: b,
                device: d,
                function: f,
            })
        };
        assert_eq!(describe(&net, &iface("vnic", true)).bus, pci(3, 0, 0));
        assert_eq!(describe(&net, &iface("pnic", true)).bus, pci(0, 0x3b, 1));
        assert_eq!(describe(&net, &iface("unic", true)).bus, Bus::Unknown);
        assert_eq!(describe(&net, &iface("lo", true)).bus, Bus::Unknown);
    }

    #[test]
    fn unknown_or_malformed_values_are_left_out() {
        let long = "9".repeat(FILE_MAX as usize + 1);
        let root = tree(&[
            ("v0/mtu", &long),
            ("v0/speed", "-1\n"),
            ("v0/operstate", "down\n"),
            ("v0/type", "65534\n"),
            ("v0/address", "\n"),
        ]);
        let nic = describe(root.path(), &iface("v0", true));
        assert_eq!(nic.mtu, 0, "a file past the bound is unreadable");
        assert_eq!(nic.speed, 0, "a virtual link's -1 is no speed");
        assert!(!nic.link_up);
        assert_eq!(nic.network_type, None);
        assert_eq!(nic.link_address, None);
        assert_eq!(nic.driver, None);
        // Nothing at all: only the name.
        let empty = describe(root.path(), &iface("absent", true));
        assert_eq!(empty.device_name.as_deref(), Some("absent"));
        assert_eq!((empty.mtu, empty.speed, empty.link_up), (0, 0, false));
    }

    #[test]
    fn an_unknown_operstate_is_up_when_the_interface_runs() {
        let root = tree(&[("lo/operstate", "unknown\n"), ("lo/type", "772\n")]);
        assert!(describe(root.path(), &iface("lo", true)).link_up);
        assert!(!describe(root.path(), &iface("lo", false)).link_up);
        assert_eq!(
            describe(root.path(), &iface("lo", true))
                .network_type
                .as_deref(),
            Some("Loopback")
        );
    }

    #[test]
    fn the_loopback_address_is_on_the_loopback_device_of_this_system() {
        let Some(nic) = of_ip(IpAddr::from([127, 0, 0, 1])) else {
            panic!("127.0.0.1 is on no interface");
        };
        let name = nic.device_name.clone().expect("a name");
        let mtu: usize = std::fs::read_to_string(format!("{SYSFS_NET}/{name}/mtu"))
            .expect("the interface's mtu")
            .trim()
            .parse()
            .expect("a number");
        assert_eq!(nic.mtu, mtu);
        assert_eq!(nic.network_type.as_deref(), Some("Loopback"));
        assert_eq!(nic.bus, Bus::Unknown, "the loopback device sits on no bus");
        assert!(nic.link_up);
        assert_eq!(of_ip(IpAddr::from([192, 0, 2, 77])), None, "TEST-NET-1");
    }
}
