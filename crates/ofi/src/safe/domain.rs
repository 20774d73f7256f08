//! [`Fabric`] and [`Domain`] handles, locally registered buffers, and memory peers may
//! access: [`SharedRegion`] (owned, registered for remote access) described to peers by
//! [`RemoteRegion`].
//!
//! # Invariants
//!
//! - A `SharedRegion` owns its memory through the core's `mr_reg_owned`: the memory is
//!   freed only after the registration is gone, so peers can never write into freed
//!   memory through it.
//! - The access a region grants is its type parameter ([`RemoteRead`] or
//!   [`RemoteWrite`]); the RMA write and atomic calls only take a
//!   `RemoteRegion<RemoteWrite>`. (A descriptor deserialized from a peer is trusted to
//!   say what the peer registered; if it lies, the peer's provider refuses the access
//!   with an error completion.)
//!
//! Nothing here panics.

#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::buf::Buf;
use super::info::FabricInfo;
use super::kind::EpKind;
use crate::cntr::{CntrAttr, Counter};
use crate::mr::MemoryRegion;
use crate::{Errno, Error, MrMode, OpFlags, Result};

/// An open fabric (shared: clones are cheap handles to the same fabric).
#[derive(Clone, Debug)]
pub struct Fabric {
    pub(crate) inner: Arc<crate::fabric::Fabric>,
}

impl Fabric {
    /// `fi_fabric` for a getinfo result.
    pub fn open<K: EpKind>(info: &FabricInfo<K>) -> Result<Fabric> {
        Ok(Fabric {
            inner: Arc::new(crate::fabric(info.info())?),
        })
    }

    /// `fi_domain` for `info` (a result of the same provider).
    pub fn domain<K: EpKind>(&self, info: &FabricInfo<K>) -> Result<Domain> {
        let dom = self.inner.domain(info.info())?;
        Ok(Domain {
            inner: Arc::new(dom),
            fabric: self.clone(),
            mr_mode: info.info().domain_attr.mr_mode,
        })
    }

    /// The raw fabric.
    pub fn raw(&self) -> &crate::fabric::Fabric {
        &self.inner
    }
}

/// An open domain (shared: clones are cheap handles to the same domain).
#[derive(Clone, Debug)]
pub struct Domain {
    pub(crate) inner: Arc<crate::domain::Domain>,
    pub(crate) fabric: Fabric,
    pub(crate) mr_mode: MrMode,
}

/// Keys this process requests for its registrations (providers without
/// `FI_MR_PROV_KEY` want unique keys per domain; process-wide unique is enough).
static NEXT_KEY: AtomicU64 = AtomicU64::new(0x5afe_0000);

impl Domain {
    /// The fabric this domain belongs to.
    pub fn fabric(&self) -> &Fabric {
        &self.fabric
    }

    /// The raw domain.
    pub fn raw(&self) -> &crate::domain::Domain {
        &self.inner
    }

    /// The memory-registration mode the provider asked for.
    pub fn mr_mode(&self) -> MrMode {
        self.mr_mode
    }

    /// A zeroed buffer of `capacity` bytes for data operations, registered for local
    /// access when the provider needs it (`FI_MR_LOCAL`).
    pub fn alloc(&self, capacity: usize) -> Result<Buf> {
        let data = vec![0u8; capacity.max(1)].into_boxed_slice();
        if !self.mr_mode.contains(MrMode::LOCAL) {
            let mut b = Buf::with_registration(data, None);
            b.set_len(capacity);
            return Ok(b);
        }
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let access = OpFlags::SEND | OpFlags::RECV | OpFlags::READ | OpFlags::WRITE;
        // SAFETY: the boxed memory never moves and is owned by the `Buf` we return,
        // whose registration field is declared (and so dropped) before the memory: the
        // region is closed before the memory is freed.
        let mr = unsafe {
            self.inner
                .mr_reg(data.as_ptr(), data.len(), access, 0, key, 0)
        }?;
        let mut b = Buf::with_registration(data, Some(mr));
        b.set_len(capacity);
        Ok(b)
    }

    fn register<A: Access>(&self, memory: Vec<u8>) -> Result<SharedRegion<A>> {
        if self.mr_mode.contains(MrMode::ENDPOINT) {
            return Err(Error::new(
                Errno::ENOSYS,
                "the safe layer does not bind regions to endpoints (FI_MR_ENDPOINT) yet",
            ));
        }
        if memory.is_empty() {
            return Err(Error::new(Errno::EINVAL, "cannot share an empty region"));
        }
        let len = memory.len();
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let access = A::ACCESS | OpFlags::READ | OpFlags::WRITE | OpFlags::SEND | OpFlags::RECV;
        let mr = self.inner.mr_reg_owned(memory, access, key)?;
        let start = mr.owned_ptr().map_or(0, |(p, _)| p as u64);
        let base = if self.mr_mode.contains(MrMode::VIRT_ADDR) {
            start
        } else {
            0
        };
        Ok(SharedRegion {
            remote: RemoteRegion {
                base,
                key: mr.key(),
                len: len as u64,
                _access: PhantomData,
            },
            mr,
        })
    }

    /// Register `memory` so peers may read it (RMA read). The region owns it.
    pub fn register_remote_readable(&self, memory: Vec<u8>) -> Result<SharedRegion<RemoteRead>> {
        self.register(memory)
    }

    /// Register `memory` so peers may read **and write** it (RMA write, atomics). The
    /// region owns it; peers may change it at any time while it is registered.
    pub fn register_remote_writable(&self, memory: Vec<u8>) -> Result<SharedRegion<RemoteWrite>> {
        self.register(memory)
    }

    /// `fi_cntr_open`: a counter (bind it with the raw endpoint,
    /// [`Ep::raw`](super::Ep::raw)). Its wait fd is [`Counter::wait_fd`] when opened
    /// with `WaitObj::Fd`.
    pub fn counter(&self, attr: &CntrAttr) -> Result<Counter> {
        self.inner.cntr_open(attr)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::RemoteRead {}
    impl Sealed for super::RemoteWrite {}
}

/// The access peers have to a [`SharedRegion`].
pub trait Access: sealed::Sealed + Send + Sync + 'static {
    /// The registration's remote access flags.
    const ACCESS: OpFlags;
}

/// Peers may read the region (`FI_REMOTE_READ`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteRead;

/// Peers may read and write the region (`FI_REMOTE_READ | FI_REMOTE_WRITE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteWrite;

impl Access for RemoteRead {
    const ACCESS: OpFlags = OpFlags::REMOTE_READ;
}
impl Access for RemoteWrite {
    const ACCESS: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);
}

/// Memory registered for remote access, owned by the registration.
///
/// Peers get its [`RemoteRegion`] descriptor. Only a region registered remote-writable
/// can be the target of an RMA write or an atomic; this does not compile:
///
/// ```compile_fail,E0308
/// # use ofi::safe::{Domain, Ep, Rdm, Buf, Peer};
/// # fn f(domain: &Domain, ep: &mut Ep<Rdm>, peer: Peer) -> ofi::Result<()> {
/// let table = domain.register_remote_readable(vec![0u8; 4096])?;
/// let _ = ep.write(Buf::new(8), peer, &table.remote(), 0); // expects RemoteRegion<RemoteWrite>
/// # Ok(()) }
/// ```
///
/// while reading either kind does:
///
/// ```no_run
/// # use ofi::safe::{Domain, Ep, Rdm, Buf, Peer};
/// # fn f(domain: &Domain, ep: &mut Ep<Rdm>, peer: Peer) -> ofi::Result<()> {
/// let table = domain.register_remote_readable(vec![0u8; 4096])?;
/// let _ = ep.read(Buf::new(8), peer, &table.remote(), 0);
/// let counters = domain.register_remote_writable(vec![0u8; 64])?;
/// let _ = ep.fetch_add(peer, &counters.remote(), 0, 1);
/// # Ok(()) }
/// ```
///
/// A descriptor cannot be made writable by conversion either: `read_only` goes one way
/// only (`let r: RemoteRegion<RemoteRead> = writable.read_only();` compiles).
///
/// ```compile_fail,E0308
/// # use ofi::safe::{RemoteRegion, RemoteRead, RemoteWrite};
/// # fn f(r: RemoteRegion<RemoteRead>) {
/// let w: RemoteRegion<RemoteWrite> = r.read_only();
/// # }
/// ```
pub struct SharedRegion<A: Access> {
    mr: MemoryRegion,
    remote: RemoteRegion<A>,
}

impl<A: Access> std::fmt::Debug for SharedRegion<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRegion")
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl<A: Access> SharedRegion<A> {
    /// The descriptor to send to peers.
    pub fn remote(&self) -> RemoteRegion<A> {
        self.remote.clone()
    }

    /// The region's length.
    pub fn len(&self) -> usize {
        self.remote.len as usize
    }

    /// True if empty (never: empty regions are refused).
    pub fn is_empty(&self) -> bool {
        self.remote.len == 0
    }

    /// A copy of the contents. Take it when peers are done writing (they told you so
    /// over a message): a copy taken while a peer's write is landing may mix old and
    /// new bytes.
    pub fn snapshot(&self) -> Vec<u8> {
        self.mr.owned_to_vec().unwrap_or_default()
    }

    /// The raw memory region.
    pub fn raw(&self) -> &MemoryRegion {
        &self.mr
    }
}

/// What a peer needs to access a [`SharedRegion`]: its base address, key and length,
/// and (in the type) the access granted. `Serialize` / `Deserialize` for out-of-band
/// exchange.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct RemoteRegion<A: Access> {
    base: u64,
    key: u64,
    len: u64,
    #[serde(skip)]
    _access: PhantomData<A>,
}

impl<A: Access> Clone for RemoteRegion<A> {
    fn clone(&self) -> Self {
        RemoteRegion {
            base: self.base,
            key: self.key,
            len: self.len,
            _access: PhantomData,
        }
    }
}

impl<A: Access> PartialEq for RemoteRegion<A> {
    fn eq(&self, o: &Self) -> bool {
        (self.base, self.key, self.len) == (o.base, o.key, o.len)
    }
}

impl<A: Access> std::fmt::Debug for RemoteRegion<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteRegion")
            .field("base", &format_args!("{:#x}", self.base))
            .field("key", &format_args!("{:#x}", self.key))
            .field("len", &self.len)
            .field("access", &std::any::type_name::<A>())
            .finish()
    }
}

impl<A: Access> RemoteRegion<A> {
    /// The registration key.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The region's length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The remote address of `offset`, if `len` bytes from there lie inside the region
    /// (`FI_EINVAL` otherwise).
    pub fn addr(&self, offset: u64, len: u64) -> Result<u64> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.base.wrapping_add(offset)),
            _ => Err(Error::new(
                Errno::EINVAL,
                format!(
                    "{len} bytes at offset {offset} lie outside the {}-byte remote region",
                    self.len
                ),
            )),
        }
    }

    /// The same region described as read-only (a writable region may be read).
    pub fn read_only(&self) -> RemoteRegion<RemoteRead> {
        RemoteRegion {
            base: self.base,
            key: self.key,
            len: self.len,
            _access: PhantomData,
        }
    }
}
