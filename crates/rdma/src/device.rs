//! Devices and contexts: which device family to use, the device list, opening a device,
//! and what a context offers (queries, protection domains, completion queues and
//! channels, asynchronous events).

use std::os::fd::RawFd;
use std::sync::Arc;

use ofi_core::{Errno, Error, Result};

use crate::cq::{CompChannel, CompletionQueue};
use crate::pd::ProtectionDomain;
use crate::soft::cq::{lock, Notifier, SoftCq};
use crate::soft::ctx::CtxOwner;
use crate::soft::{SoftFault, SOFT_DEVICE_NAME, SOFT_NODE_GUID};
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
                    owner: Arc::new(owner),
                })
            }
            DeviceKind::RdmaCore => Err(Error::new(
                Errno::ENOSYS,
                "opening rdma-core devices is not implemented yet (only listing)",
            )),
        }
    }
}

/// An open device context (`struct ibv_context`). Every object created from it keeps it
/// alive; the device's service (for the software device, a thread) stops when the last
/// one goes.
#[derive(Clone)]
pub struct Context {
    pub(crate) owner: Arc<CtxOwner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("gid", &self.owner.shared.gid)
            .finish()
    }
}

impl Context {
    /// The device's name.
    pub fn device_name(&self) -> &str {
        SOFT_DEVICE_NAME
    }

    /// Device capabilities (`ibv_query_device`).
    pub fn query_device(&self) -> DeviceAttr {
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

    /// Port attributes (`ibv_query_port`); the software device has port 1.
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        if port != 1 {
            return Err(Error::new(Errno::EINVAL, format!("no port {port}")));
        }
        Ok(PortAttr {
            state: PortState::Active,
            max_mtu: Mtu::Mtu4096,
            active_mtu: Mtu::Mtu4096,
            gid_tbl_len: 1,
            max_msg_sz: 1 << 30,
            lid: 0,
            link_layer: 2,
        })
    }

    /// The GID at `index` of `port`'s table (`ibv_query_gid`).
    pub fn query_gid(&self, port: u8, index: i32) -> Result<Gid> {
        if port != 1 || index != 0 {
            return Err(Error::new(
                Errno::EINVAL,
                format!("no GID {index} on port {port}"),
            ));
        }
        Ok(self.owner.shared.gid)
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain> {
        let id = self
            .owner
            .shared
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(ProtectionDomain {
            ctx: self.clone(),
            id,
        })
    }

    /// Creates a completion channel (its fd is readable while a CQ event is pending).
    pub fn create_comp_channel(&self) -> Result<CompChannel> {
        Ok(CompChannel {
            _ctx: self.clone(),
            n: Arc::new(Notifier::new()?),
        })
    }

    /// Creates a completion queue of at least `cqe` entries; `user` comes back in its
    /// events (`cq_context`).
    pub fn create_cq(
        &self,
        cqe: u32,
        user: u64,
        channel: Option<&CompChannel>,
    ) -> Result<CompletionQueue> {
        if cqe == 0 || cqe > self.query_device().max_cqe {
            return Err(Error::new(
                Errno::EINVAL,
                format!("bad completion queue size {cqe}"),
            ));
        }
        let cq = SoftCq::new(
            cqe as usize,
            user,
            channel.map(|c| c.n.clone()),
            self.owner.shared.async_ev.clone(),
        );
        Ok(CompletionQueue {
            _ctx: self.clone(),
            cq: Arc::new(cq),
        })
    }

    /// The fd readable while an asynchronous event is pending.
    pub fn async_fd(&self) -> RawFd {
        self.owner.shared.async_ev.fd()
    }

    /// Takes one asynchronous event, if any (`ibv_get_async_event` without blocking;
    /// no acknowledgement is needed).
    pub fn get_async_event(&self) -> Option<AsyncEvent> {
        self.owner.shared.async_ev.try_pop()
    }

    /// Sets the UD fault injection of this context (software device).
    pub fn set_soft_fault(&self, f: SoftFault) {
        let mut g = lock(&self.owner.shared.fault);
        g.cfg = f;
    }
}
