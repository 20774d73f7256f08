//! Devices and contexts: which device family to use, the device list, opening a device,
//! and what a context offers (queries, protection domains, completion queues and
//! channels, asynchronous events).

use std::os::fd::RawFd;
use std::sync::Arc;

use ofi_core::{Errno, Error, Result};

use crate::cq::{ChannelInner, CompChannel, CompletionQueue, CqInner};
use crate::pd::{PdInner, ProtectionDomain};
use crate::soft::cq::{lock, Notifier, SoftCq};
use crate::soft::ctx::CtxOwner;
use crate::soft::{SoftFault, SOFT_DEVICE_NAME, SOFT_NODE_GUID};
use crate::sys::objects::SysContext;
use crate::verbs::{AsyncEvent, DeviceAttr, Gid, Mtu, PortAttr, PortState};

/// Which implementation provides the devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// The software device (`soft0`).
    Soft,
    /// rdma-core (`libibverbs.so.1`), opened at run time.
    RdmaCore,
}

impl DeviceKind {
    /// `FI_VERBS_DEVICE=soft` selects the software device; anything else rdma-core.
    pub fn from_env() -> DeviceKind {
        match std::env::var("FI_VERBS_DEVICE") {
            Ok(v) if v.eq_ignore_ascii_case("soft") => DeviceKind::Soft,
            _ => DeviceKind::RdmaCore,
        }
    }
}

/// A device as listed (`struct ibv_device`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    name: String,
    guid: u64,
    kind: DeviceKind,
}

/// The devices of `kind`. rdma-core: an error whose message is the one-line reason
/// when the library or any device is missing ("libibverbs.so.1 not found",
/// "no RDMA device").
pub fn device_list(kind: DeviceKind) -> Result<Vec<Device>> {
    match kind {
        DeviceKind::Soft => Ok(vec![Device {
            name: SOFT_DEVICE_NAME.into(),
            guid: SOFT_NODE_GUID,
            kind,
        }]),
        DeviceKind::RdmaCore => crate::sys::device_names().map(|v| {
            v.into_iter()
                .map(|(name, guid)| Device { name, guid, kind })
                .collect()
        }),
    }
}

impl Device {
    /// The device name (`mlx5_0`, `soft0`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node GUID.
    pub fn guid(&self) -> u64 {
        self.guid
    }

    /// The implementation behind it.
    pub fn kind(&self) -> DeviceKind {
        self.kind
    }

    /// Opens a context on the device.
    pub fn open(&self) -> Result<Context> {
        match self.kind {
            DeviceKind::Soft => {
                let owner =
                    CtxOwner::open().map_err(|e| Error::from(e).context("soft RDMA device"))?;
                Ok(Context {
                    inner: CtxInner::Soft(Arc::new(owner)),
                })
            }
            DeviceKind::RdmaCore => {
                let lib = crate::sys::ibverbs().map_err(|why| Error::new(Errno::ENODEV, why))?;
                let ctx = crate::sys::objects::open(lib, &self.name)?;
                ctx.init();
                Ok(Context {
                    inner: CtxInner::Sys(ctx),
                })
            }
        }
    }
}

/// A device opened for a provider's domain: the context, its protection domain and the
/// GID the providers publish (port 1, index 0).
#[derive(Debug)]
pub struct DomainDevice {
    /// The device context.
    pub ctx: Context,
    /// The protection domain the domain's objects are made in.
    pub pd: ProtectionDomain,
    /// GID index 0 of port 1.
    pub gid: Gid,
}

impl DomainDevice {
    /// Opens the device a domain asks for: `asked` (its `domain_attr.name`), or the first
    /// of `offered` when it names none. `offered` are the names of the devices of `kind`
    /// the provider `prov` found at init.
    ///
    /// # Errors
    /// `FI_EINVAL` ("`prov`: no domain named …") for a name not offered; `FI_ENODEV` for
    /// a device gone since; the device's errors opening it.
    pub fn open(
        prov: &str,
        kind: DeviceKind,
        offered: &[String],
        asked: Option<&str>,
    ) -> Result<DomainDevice> {
        let name = asked
            .or_else(|| offered.first().map(String::as_str))
            .unwrap_or_default();
        if !offered.iter().any(|d| d == name) {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{prov}: no domain named {name:?}"),
            ));
        }
        let dev = device_list(kind)?
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| Error::new(Errno::ENODEV, format!("{prov}: {name} is gone")))?;
        let ctx = dev.open()?;
        let pd = ctx.alloc_pd()?;
        let gid = ctx.query_gid(1, 0)?;
        Ok(DomainDevice { ctx, pd, gid })
    }
}

/// An open device context (`struct ibv_context`). Every object created from it keeps it
/// alive; the device's service (for the software device, a thread) stops when the last
/// one goes.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: CtxInner,
}

/// The backend of a context.
#[derive(Clone)]
pub(crate) enum CtxInner {
    Soft(Arc<CtxOwner>),
    Sys(Arc<SysContext>),
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.device_name())
            .finish()
    }
}

/// The error for objects of two different backends used together.
pub(crate) fn mixed() -> Error {
    Error::new(Errno::EINVAL, "objects of different devices used together")
}

impl Context {
    pub(crate) fn soft(&self) -> Option<&Arc<CtxOwner>> {
        match &self.inner {
            CtxInner::Soft(o) => Some(o),
            CtxInner::Sys(_) => None,
        }
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        match &self.inner {
            CtxInner::Soft(_) => SOFT_DEVICE_NAME,
            CtxInner::Sys(c) => &c.name,
        }
    }

    /// The implementation behind it.
    pub fn kind(&self) -> DeviceKind {
        match &self.inner {
            CtxInner::Soft(_) => DeviceKind::Soft,
            CtxInner::Sys(_) => DeviceKind::RdmaCore,
        }
    }

    /// Device capabilities (`ibv_query_device`).
    pub fn query_device(&self) -> Result<DeviceAttr> {
        match &self.inner {
            CtxInner::Soft(_) => Ok(soft_device_attr()),
            CtxInner::Sys(c) => c.query_device(),
        }
    }

    /// EFA attributes (`efadv_query_device` through libefa) of an rdma-core EFA device;
    /// `FI_EOPNOTSUPP` on the software device (whose SRD has no RDMA read) or without
    /// libefa, the device's error on a device that is not EFA's.
    pub fn efa_query_device(&self) -> Result<crate::sys::efadv::EfadvDeviceAttr> {
        match &self.inner {
            CtxInner::Soft(_) => Err(Error::new(
                Errno::EOPNOTSUPP,
                "the software device has no EFA attributes",
            )),
            CtxInner::Sys(c) => c.efa_query_device(),
        }
    }

    /// Port attributes (`ibv_query_port`); the software device has port 1.
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        match &self.inner {
            CtxInner::Soft(_) if port == 1 => Ok(PortAttr {
                state: PortState::Active,
                max_mtu: Mtu::Mtu4096,
                active_mtu: Mtu::Mtu4096,
                gid_tbl_len: 1,
                max_msg_sz: 1 << 30,
                lid: 0,
                link_layer: 2,
            }),
            CtxInner::Soft(_) => Err(Error::new(Errno::EINVAL, format!("no port {port}"))),
            CtxInner::Sys(c) => c.query_port(port),
        }
    }

    /// The GID at `index` of `port`'s table (`ibv_query_gid`).
    pub fn query_gid(&self, port: u8, index: i32) -> Result<Gid> {
        match &self.inner {
            CtxInner::Soft(o) if port == 1 && index == 0 => Ok(o.shared.gid),
            CtxInner::Soft(_) => Err(Error::new(
                Errno::EINVAL,
                format!("no GID {index} on port {port}"),
            )),
            CtxInner::Sys(c) => c.query_gid(port, index),
        }
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain> {
        let inner = match &self.inner {
            CtxInner::Soft(o) => PdInner::Soft(
                o.shared
                    .next_id
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            ),
            CtxInner::Sys(c) => PdInner::Sys(crate::sys::objects::alloc_pd(c)?),
        };
        Ok(ProtectionDomain {
            ctx: self.clone(),
            inner,
        })
    }

    /// Creates a completion channel (its fd is readable while a CQ event is pending).
    pub fn create_comp_channel(&self) -> Result<CompChannel> {
        let inner = match &self.inner {
            CtxInner::Soft(_) => ChannelInner::Soft {
                _ctx: self.clone(),
                n: Arc::new(Notifier::new()?),
            },
            CtxInner::Sys(c) => ChannelInner::Sys(crate::sys::objects::create_channel(c)?),
        };
        Ok(CompChannel { inner })
    }

    /// Creates a completion queue of at least `cqe` entries; `user` comes back in its
    /// events (`cq_context`).
    pub fn create_cq(
        &self,
        cqe: u32,
        user: u64,
        channel: Option<&CompChannel>,
    ) -> Result<CompletionQueue> {
        self.make_cq(cqe, user, channel, false)
    }

    /// As [`Context::create_cq`], for the queue pairs of an EFA device: on rdma-core an
    /// extended completion queue made by libefa (`efadv_create_cq`), whose receive
    /// completions name the sender where no GRH does ([`WorkCompletion::sgid`], or the
    /// number of the receiver's address handle for it in `slid`); on the software
    /// device, whose SRD receives carry a GRH, a plain one.
    ///
    /// # Errors
    /// As [`Context::create_cq`]; `EOPNOTSUPP` without libefa; the device's error on a
    /// device that is not EFA's.
    ///
    /// [`WorkCompletion::sgid`]: crate::WorkCompletion::sgid
    pub fn create_efa_cq(
        &self,
        cqe: u32,
        user: u64,
        channel: Option<&CompChannel>,
    ) -> Result<CompletionQueue> {
        self.make_cq(cqe, user, channel, true)
    }

    fn make_cq(
        &self,
        cqe: u32,
        user: u64,
        channel: Option<&CompChannel>,
        efa: bool,
    ) -> Result<CompletionQueue> {
        if cqe == 0 || cqe > self.query_device()?.max_cqe {
            return Err(Error::new(
                Errno::EINVAL,
                format!("bad completion queue size {cqe}"),
            ));
        }
        let inner = match &self.inner {
            CtxInner::Soft(o) => {
                let n = match channel.map(|c| &c.inner) {
                    None => None,
                    Some(ChannelInner::Soft { n, .. }) => Some(n.clone()),
                    Some(ChannelInner::Sys(_)) => return Err(mixed()),
                };
                let cq = SoftCq::new(cqe as usize, user, n, o.shared.async_ev.clone());
                CqInner::Soft {
                    ctx: self.clone(),
                    cq: Arc::new(cq),
                }
            }
            CtxInner::Sys(c) => {
                let ch = match channel.map(|c| &c.inner) {
                    None => None,
                    Some(ChannelInner::Sys(ch)) => Some(ch),
                    Some(ChannelInner::Soft { .. }) => return Err(mixed()),
                };
                if efa {
                    let caps = c.efa_query_device()?.device_caps;
                    let with_sgid = caps & crate::sys::efadv::CAPS_CQ_WITH_SGID != 0;
                    CqInner::Sys(crate::sys::cq_ex::create_efa_cq(
                        c, cqe, user, ch, with_sgid,
                    )?)
                } else {
                    CqInner::Sys(crate::sys::objects::create_cq(c, cqe, user, ch)?)
                }
            }
        };
        Ok(CompletionQueue { inner, user })
    }

    /// The fd readable while an asynchronous event is pending.
    pub fn async_fd(&self) -> RawFd {
        match &self.inner {
            CtxInner::Soft(o) => o.shared.async_ev.fd(),
            CtxInner::Sys(c) => c.async_fd(),
        }
    }

    /// Takes one asynchronous event, if any (`ibv_get_async_event` without blocking;
    /// rdma-core's events are acknowledged before this returns).
    pub fn get_async_event(&self) -> Option<AsyncEvent> {
        match &self.inner {
            CtxInner::Soft(o) => o.shared.async_ev.try_pop(),
            CtxInner::Sys(c) => c.get_async_event(),
        }
    }

    /// Sets the UD fault injection of this context (software device; `EOPNOTSUPP` on
    /// rdma-core).
    pub fn set_soft_fault(&self, f: SoftFault) -> Result<()> {
        match &self.inner {
            CtxInner::Soft(o) => {
                lock(&o.shared.fault).cfg = f;
                Ok(())
            }
            CtxInner::Sys(_) => Err(Error::new(
                Errno::EOPNOTSUPP,
                "fault injection is for the software device",
            )),
        }
    }
}

fn soft_device_attr() -> DeviceAttr {
    DeviceAttr {
        fw_ver: "ofi-rs soft 1".into(),
        node_guid: SOFT_NODE_GUID,
        max_mr_size: 1 << 40,
        max_qp: 1 << 16,
        max_qp_wr: 1 << 14,
        max_sge: crate::soft::qp::MAX_SGE as u32,
        max_cq: 1 << 16,
        max_cqe: 1 << 20,
        max_mr: 1 << 20,
        max_pd: 1 << 16,
        max_qp_rd_atom: 16,
        max_srq: 1 << 12,
        max_srq_wr: 1 << 14,
        phys_port_cnt: 1,
        atomics: true,
    }
}
