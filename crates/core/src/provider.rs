//! Writing a provider: the safe traits a provider implements, the host's services as a
//! provider sees them ([`Host`]), and the host-side handle to an initialised provider
//! ([`ProviderHandle`]).
//!
//! # For provider authors
//!
//! Implement [`Provider`] (the root: name, version, templates, fabric open), then one
//! type per object class: [`FabricOps`], [`DomainOps`], [`EndpointOps`],
//! [`PassiveEndpointOps`], [`CqOps`], [`EqOps`], [`CntrOps`], [`AvOps`], [`MrOps`],
//! [`WaitOps`]. The child types are associated types, so everything is monomorphised:
//! a data call from the application reaches your method through one indirect call and
//! no `dyn`. A class you do not have is [`Unsupported`]. Every operation except the
//! essential ones has a default returning `FI_ENOSYS`, so you implement only what your
//! `Info` templates claim.
//!
//! Then either register the provider in-process with
//! `ProviderHandle::init(abi::entry_for::<P>(), None)` (what the `ofi` crate and tests
//! do) or export it from a cdylib with [`export_provider!`](crate::export_provider).
//! Both take the same path through the C-ABI tables; you never write `extern "C"`.
//!
//! The traits are generic over `F`, your [`FabricOps`] type: it names the family of
//! types that work together (`BindTarget<'_, F>::Cq` is your CQ type). The host
//! guarantees that an object handed to your `bind` was created by your provider and is
//! still open.
//!
//! # Invariants the host guarantees
//!
//! - A parent outlives its children: your fabric object is dropped only after every
//!   domain, EQ, passive endpoint and wait set it opened; a domain after its endpoints,
//!   CQs, counters, AVs and MRs. An object bound to another (a CQ bound to an endpoint)
//!   is dropped only after the endpoint.
//! - `close` is called at most once, then the object is dropped; after a successful
//!   `close` nothing else is called on it.
//! - The data-path methods are `unsafe`: their contract is the C API's (buffers valid
//!   until the operation completes, descriptors from this provider's MRs).
//!
//! # What may panic
//!
//! Your code may panic; the adapters catch every panic at the boundary, log it
//! (`tracing::error!`) and return `FI_EOTHER`. Nothing in this module panics.

use std::any::Any;
use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;

use crate::abi::{self, PluginEntry, ProviderKind};
use crate::attr::Info;
use crate::cntr::CntrAttr;
use crate::cq::CqAttr;
use crate::enums::{AtomicOp, Datatype};
use crate::eq::EqAttr;
use crate::error::{Errno, Error, Result};
use crate::param::ParamType;
use crate::version::Version;

pub use crate::abi::host::Host;
pub use crate::abi::object::ProviderHandle;

/// A memory descriptor as the data calls take it (`void *desc`): from
/// [`crate::mr::MemoryRegion::desc`], or null.
pub type Desc = *mut c_void;

/// `Err(FI_ENOSYS)` naming the operation: what every default method returns.
pub fn enosys<T>(what: &'static str) -> Result<T> {
    Err(Error::new(Errno::ENOSYS, what))
}

/// `Err(FI_ENOPROTOOPT)`: the default of `getopt` / `setopt` for an option the
/// provider does not know.
pub fn enoprotoopt<T>() -> Result<T> {
    Err(Error::new(Errno::ENOPROTOOPT, "option not supported"))
}

/// The data-path form of "not implemented": no allocation.
#[inline]
pub fn enosys_fast<T>() -> Result<T> {
    Err(Error::code_only(Errno::ENOSYS))
}

/// A provider: the root of a family of object types.
pub trait Provider: Sized + Send + Sync + 'static {
    /// The provider's name as the C library spells it (`"tcp"`, `"ofi_rxm"`).
    const NAME: &'static str;
    /// The provider's version (`prov_version`); see [`crate::version::prov_version_from_crate`].
    const VERSION: Version;
    /// Core, utility or hook.
    const KIND: ProviderKind = ProviderKind::Core;
    /// Higher comes earlier in getinfo results.
    const PRIORITY: i32 = 0;
    /// The fabric type; it names the whole family of object types.
    type Fabric: FabricOps;

    /// Initialise: declare parameters, probe hardware. An error keeps the provider out
    /// of the registry (reported as "init failed" with this error).
    fn init(host: &Host) -> Result<Self>;

    /// The templates [`Provider::getinfo`] matches requests against.
    fn info_templates(&self) -> Vec<Info>;

    // `getinfo` (answer a getinfo request) and `fabric` (open a fabric), from the
    // provider's list (`for_each_provider_op!`).
    crate::for_each_provider_op!(crate::ctl_trait_methods);
}

/// The [`CqOps`] type of family `F`.
pub type CqOf<F> = <<F as FabricOps>::Domain as DomainOps<F>>::Cq;
/// The [`CntrOps`] type of family `F`.
pub type CntrOf<F> = <<F as FabricOps>::Domain as DomainOps<F>>::Cntr;
/// The [`AvOps`] type of family `F`.
pub type AvOf<F> = <<F as FabricOps>::Domain as DomainOps<F>>::Av;
/// The [`MrOps`] type of family `F`.
pub type MrOf<F> = <<F as FabricOps>::Domain as DomainOps<F>>::Mr;
/// The [`EndpointOps`] type of family `F`.
pub type EpOf<F> = <<F as FabricOps>::Domain as DomainOps<F>>::Endpoint;
/// The [`EqOps`] type of family `F`.
pub type EqOf<F> = <F as FabricOps>::Eq;
/// The [`WaitOps`] type of family `F`.
pub type WaitOf<F> = <F as FabricOps>::Wait;
/// The [`FabricOps`] type of family `F`: `F` itself (names the class in its list).
pub type FabricOf<F> = F;
/// The [`DomainOps`] type of family `F`.
pub type DomainOf<F> = <F as FabricOps>::Domain;
/// The [`PassiveEndpointOps`] type of family `F`.
pub type PepOf<F> = <F as FabricOps>::PassiveEp;

/// An object of the same family handed to [`EndpointOps::bind`].
pub enum BindTarget<'a, F: FabricOps> {
    /// A completion queue.
    Cq(&'a CqOf<F>),
    /// A counter.
    Cntr(&'a CntrOf<F>),
    /// An address vector.
    Av(&'a AvOf<F>),
    /// An event queue.
    Eq(&'a EqOf<F>),
    /// A shared transmit context.
    Stx(&'a EpOf<F>),
    /// A shared receive context.
    Srx(&'a EpOf<F>),
}

/// An object of the same family handed to [`MrOps::bind`].
pub enum MrBindTarget<'a, F: FabricOps> {
    /// An endpoint.
    Ep(&'a EpOf<F>),
    /// A counter.
    Cntr(&'a CntrOf<F>),
}

/// Each variant shows as the object it holds (a hook's trace line names the bound
/// object).
impl<F: FabricOps> fmt::Debug for BindTarget<'_, F>
where
    CqOf<F>: fmt::Debug,
    CntrOf<F>: fmt::Debug,
    AvOf<F>: fmt::Debug,
    EqOf<F>: fmt::Debug,
    EpOf<F>: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindTarget::Cq(cq) => cq.fmt(f),
            BindTarget::Cntr(cntr) => cntr.fmt(f),
            BindTarget::Av(av) => av.fmt(f),
            BindTarget::Eq(eq) => eq.fmt(f),
            BindTarget::Stx(ep) | BindTarget::Srx(ep) => ep.fmt(f),
        }
    }
}

/// What the flags of `fi_ep_bind` of a completion queue ask for (fi_endpoint(3)): the
/// CQ takes the completions of the transmit side (`FI_TRANSMIT`), the receive side
/// (`FI_RECV`) or both, and with `FI_SELECTIVE_COMPLETION` only those of operations
/// that ask for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqBindFlags {
    /// `FI_TRANSMIT`: the transmit side's completions.
    pub transmit: bool,
    /// `FI_RECV`: the receive side's completions.
    pub recv: bool,
    /// `FI_SELECTIVE_COMPLETION`.
    pub selective: bool,
}

impl CqBindFlags {
    /// Read the flags of a CQ bind.
    ///
    /// # Errors
    /// `FI_EBADFLAGS` when `flags` name neither side, or hold any other flag.
    pub fn parse(flags: crate::OpFlags) -> Result<CqBindFlags> {
        use crate::OpFlags;
        let sides = OpFlags::TRANSMIT | OpFlags::RECV;
        if !(sides | OpFlags::SELECTIVE_COMPLETION).contains(flags) || !flags.intersects(sides) {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!(
                    "a CQ binds with FI_TRANSMIT and/or FI_RECV (and FI_SELECTIVE_COMPLETION), \
                     not flags {:#x}",
                    flags.bits()
                ),
            ));
        }
        Ok(CqBindFlags {
            transmit: flags.contains(OpFlags::TRANSMIT),
            recv: flags.contains(OpFlags::RECV),
            selective: flags.contains(OpFlags::SELECTIVE_COMPLETION),
        })
    }

    /// Store `binding` in the slot of each side it binds, `tx` and `rx`; `false`, and
    /// nothing stored, when one of those slots holds a binding already.
    pub fn store<T: Clone>(self, binding: T, tx: &mut Option<T>, rx: &mut Option<T>) -> bool {
        if (self.transmit && tx.is_some()) || (self.recv && rx.is_some()) {
            return false;
        }
        if self.transmit {
            *tx = Some(binding.clone());
        }
        if self.recv {
            *rx = Some(binding);
        }
        true
    }
}

/// An object of the same family handed to [`FabricOps::trywait`].
pub enum TryWaitRef<'a, F: FabricOps> {
    /// A completion queue.
    Cq(&'a CqOf<F>),
    /// A counter.
    Cntr(&'a CntrOf<F>),
    /// An event queue.
    Eq(&'a EqOf<F>),
    /// A wait set.
    Wait(&'a WaitOf<F>),
}

/// A fabric (`fid_fabric`).
pub trait FabricOps: Sized + Send + Sync + 'static {
    /// The domain type.
    type Domain: DomainOps<Self>;
    /// The passive endpoint type ([`Unsupported`] without `FI_EP_MSG`).
    type PassiveEp: PassiveEndpointOps<Self>;
    /// The event queue type.
    type Eq: EqOps;
    /// The wait set type.
    type Wait: WaitOps;

    /// Open an event queue that signals the wait set `set` (`wait_obj` `FI_WAIT_SET`
    /// with `wait_set` in the C attributes; `attr.wait_obj` is [`WaitObj::Set`]). The
    /// host keeps `set` open until the EQ closes.
    ///
    /// [`WaitObj::Set`]: crate::enums::WaitObj::Set
    fn eq_open_in_set(
        &self,
        _attr: &EqAttr,
        _set: &Self::Wait,
        _context: usize,
    ) -> Result<Self::Eq> {
        enosys("event queues in wait sets are not supported")
    }
    // ---- one method per `op` and `close` entry of the list (`for_each_fabric_op!`) ----
    crate::for_each_fabric_op!(crate::ctl_trait_methods);
}

/// A domain (`fid_domain`).
pub trait DomainOps<F: FabricOps>: Sized + Send + Sync + 'static {
    /// Endpoints (active, scalable, contexts, aliases).
    type Endpoint: EndpointOps<F>;
    /// Completion queues.
    type Cq: CqOps;
    /// Counters.
    type Cntr: CntrOps;
    /// Address vectors.
    type Av: AvOps<F>;
    /// Memory regions.
    type Mr: MrOps<F>;

    /// Open a completion queue that signals the wait set `set` (`FI_WAIT_SET`;
    /// `attr.wait_obj` is [`WaitObj::Set`], `attr.format` never `Unspec`). The host
    /// keeps `set` open until the CQ closes.
    ///
    /// [`WaitObj::Set`]: crate::enums::WaitObj::Set
    fn cq_open_in_set(
        &self,
        _attr: &CqAttr,
        _set: &WaitOf<F>,
        _context: usize,
    ) -> Result<Self::Cq> {
        enosys("completion queues in wait sets are not supported")
    }
    /// Open a counter that signals the wait set `set` (as
    /// [`DomainOps::cq_open_in_set`]).
    fn cntr_open_in_set(
        &self,
        _attr: &CntrAttr,
        _set: &WaitOf<F>,
        _context: usize,
    ) -> Result<Self::Cntr> {
        enosys("counters in wait sets are not supported")
    }
    /// Bind an event queue (`fi_domain_bind`).
    fn bind_eq(&self, _eq: &EqOf<F>, _flags: u64) -> Result<()> {
        enosys("domain bind is not supported")
    }
    // ---- one method per `op` and `close` entry of the list (`for_each_domain_op!`) ----
    crate::for_each_domain_op!(crate::ctl_trait_methods);
}

/// Writes, from the list of data operations
/// ([`for_each_ep_data_op!`](crate::for_each_ep_data_op)), one `unsafe fn` of
/// [`EndpointOps`] per operation, taking the entry's provider arguments and answering
/// `FI_ENOSYS` by default.
macro_rules! data_trait_methods {
    ($($group:ident $Table:ident {
        $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident $since:tt $kind:tt $c:tt
            ($($p:ident : $pty:ty = $from:expr),*) $low:tt;)*
    } { $($(#[$qdoc:meta])* $qslot:ident / $qname:ident;)* })*) => {$(
        $(
            $(#[$doc])*
            ///
            /// # Safety
            /// The C API's contract (see the trait docs): every buffer, array and message
            /// is valid for the lengths and counts given (a receive's buffers writable)
            /// until the operation completes — for an inject, during the call only;
            /// `desc` values come from this provider's memory regions or are null.
            #[allow(unused_variables)]
            unsafe fn $name(&self, $($p: $pty),*) -> Result<()> {
                enosys_fast()
            }
        )*
        $(
            $(#[$qdoc])*
            fn $qname(&self, _datatype: Datatype, _op: AtomicOp) -> Result<usize> {
                enosys_fast()
            }
        )*
    )*};
}

/// An active endpoint: control, connection management, messages, tagged messages, RMA
/// and atomics. Every data and CM method defaults to `FI_ENOSYS`.
///
/// The data methods are `unsafe fn`s: the caller promises what the C API requires
/// (every buffer valid, and not touched by the application, until the operation's
/// completion; `desc` values from this provider's memory regions or null).
#[allow(clippy::too_many_arguments)]
pub trait EndpointOps<F: FabricOps>: Sized + Send + Sync + 'static {
    // ---- control ----
    // ---- one method per entry of the lists (`for_each_ep_ctl_op!`,
    // `for_each_cm_op!`) ----
    crate::for_each_ep_ctl_op!(crate::ctl_trait_methods);
    crate::for_each_cm_op!(crate::ctl_trait_methods);

    // ---- multicast ----
    /// Leave a group joined with [`EndpointOps::join`] (`fi_close` of the membership);
    /// `fi_addr` is what `join` returned. An error keeps the membership open.
    fn leave(&self, _fi_addr: u64) -> Result<()> {
        enosys("multicast is not supported")
    }

    // ---- data operations: one method per entry of the list ----
    crate::for_each_ep_data_op!(data_trait_methods);
}

/// A passive endpoint (`fid_pep`).
pub trait PassiveEndpointOps<F: FabricOps>: Sized + Send + Sync + 'static {
    /// Bind the event queue connection requests go to.
    fn bind_eq(&self, eq: &EqOf<F>, flags: u64) -> Result<()>;
    // ---- one method per entry of the list (`for_each_pep_op!`) ----
    crate::for_each_pep_op!(crate::ctl_trait_methods);
}

/// A completion queue (`fid_cq`).
pub trait CqOps: Sized + Send + Sync + 'static {
    // ---- one method per entry of the list (`for_each_cq_op!`) ----
    crate::for_each_cq_op!(crate::ctl_trait_methods);
}

/// An event queue (`fid_eq`).
pub trait EqOps: Sized + Send + Sync + 'static {
    // ---- one method per entry of the list (`for_each_eq_op!`) ----
    crate::for_each_eq_op!(crate::ctl_trait_methods);
}

/// A counter (`fid_cntr`).
pub trait CntrOps: Sized + Send + Sync + 'static {
    // ---- one method per operation of the list (`for_each_cntr_op!`) ----
    crate::for_each_cntr_op!(crate::ctl_trait_methods);

    /// Called once, after the counter was placed where the host's object pointer
    /// points (`&self` is at that address until the counter is closed): a provider
    /// that resolves the counter named by a triggered operation's
    /// [`TriggeredContext`](crate::cntr::TriggeredContext) records the address here.
    /// Does nothing by default.
    fn published(&self) {}
}

/// An address vector (`fid_av`).
pub trait AvOps<F: FabricOps>: Sized + Send + Sync + 'static {
    // ---- one method per entry of the list (`for_each_av_op!`) ----
    crate::for_each_av_op!(crate::ctl_trait_methods);
    /// `fi_av_bind` (an event queue, for asynchronous inserts).
    fn bind_eq(&self, _eq: &EqOf<F>, _flags: u64) -> Result<()> {
        enosys("AV bind is not supported")
    }
}

/// A memory region (`fid_mr`).
pub trait MrOps<F: FabricOps>: Sized + Send + Sync + 'static {
    // ---- one method per entry of the list (`for_each_mr_op!`) ----
    crate::for_each_mr_op!(crate::ctl_trait_methods);
}

/// A wait set (`fid_wait`).
pub trait WaitOps: Sized + Send + Sync + 'static {
    // ---- one method per operation of the list (`for_each_wait_op!`) ----
    crate::for_each_wait_op!(crate::ctl_trait_methods);
}

/// The type of a class a provider does not have. It has no values, so none of its
/// methods can ever be called.
#[derive(Debug)]
pub enum Unsupported {}

/// A provider without objects (for example one that only answers getinfo, as in tests)
/// may name `Unsupported` as its fabric: then every class is `Unsupported`, and its
/// `Provider::fabric` can only fail.
impl FabricOps for Unsupported {
    type Domain = Unsupported;
    type PassiveEp = Unsupported;
    type Eq = Unsupported;
    type Wait = Unsupported;
    crate::for_each_fabric_op!(crate::abi::ctl_ops::ctl_unsupported);
}

impl<F: FabricOps> DomainOps<F> for Unsupported {
    type Endpoint = Unsupported;
    type Cq = Unsupported;
    type Cntr = Unsupported;
    type Av = Unsupported;
    type Mr = Unsupported;
    crate::for_each_domain_op!(crate::abi::ctl_ops::ctl_unsupported);
}

impl<F: FabricOps> EndpointOps<F> for Unsupported {
    crate::for_each_ep_ctl_op!(crate::abi::ctl_ops::ctl_unsupported);
    crate::for_each_cm_op!(crate::abi::ctl_ops::ctl_unsupported);
}

impl<F: FabricOps> PassiveEndpointOps<F> for Unsupported {
    fn bind_eq(&self, _eq: &EqOf<F>, _flags: u64) -> Result<()> {
        match *self {}
    }
    crate::for_each_pep_op!(crate::abi::ctl_ops::ctl_unsupported);
}

impl CqOps for Unsupported {
    crate::for_each_cq_op!(crate::abi::ctl_ops::ctl_unsupported);
}

impl EqOps for Unsupported {
    crate::for_each_eq_op!(crate::abi::ctl_ops::ctl_unsupported);
}

impl CntrOps for Unsupported {
    crate::for_each_cntr_op!(crate::abi::ctl_ops::ctl_unsupported);
}

impl<F: FabricOps> AvOps<F> for Unsupported {
    crate::for_each_av_op!(crate::abi::ctl_ops::ctl_unsupported);
}

impl<F: FabricOps> MrOps<F> for Unsupported {
    crate::for_each_mr_op!(crate::abi::ctl_ops::ctl_unsupported);
}

impl WaitOps for Unsupported {
    crate::for_each_wait_op!(crate::abi::ctl_ops::ctl_unsupported);
}

/// The parameter types as the host table carries them.
pub(crate) fn param_type_to_raw(t: ParamType) -> u32 {
    match t {
        ParamType::String => 0,
        ParamType::Int => 1,
        ParamType::Size => 2,
        ParamType::Bool => 3,
    }
}

/// Inverse of [`param_type_to_raw`].
pub(crate) fn param_type_from_raw(t: u32) -> Option<ParamType> {
    Some(match t {
        0 => ParamType::String,
        1 => ParamType::Int,
        2 => ParamType::Size,
        3 => ParamType::Bool,
        _ => return None,
    })
}

/// Keep-alive type of a provider handle (e.g. the `libloading::Library`).
pub type KeepAlive = Arc<dyn Any + Send + Sync>;

/// Register `P` in-process: the same table path a plugin takes.
pub fn init_builtin<P: Provider>() -> Result<ProviderHandle> {
    let entry: &'static PluginEntry = abi::entry_for::<P>();
    // SAFETY: the entry was built by this copy of ofi-core for `P`, so its layout and
    // init function are ours.
    unsafe { ProviderHandle::init(entry, None) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OpFlags;

    #[test]
    fn a_cq_bind_names_a_side_and_nothing_else() {
        let both = CqBindFlags::parse(OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
        assert!(both.transmit && both.recv && !both.selective);
        let rx = CqBindFlags::parse(OpFlags::RECV | OpFlags::SELECTIVE_COMPLETION).unwrap();
        assert_eq!(
            rx,
            CqBindFlags {
                transmit: false,
                recv: true,
                selective: true
            }
        );
        for bad in [
            OpFlags::empty(),
            OpFlags::SELECTIVE_COMPLETION,
            OpFlags::TRANSMIT | OpFlags::READ,
        ] {
            let e = CqBindFlags::parse(bad).unwrap_err();
            assert_eq!(e.code(), Errno::EBADFLAGS, "{bad:?}");
        }
    }

    #[test]
    fn a_side_bound_already_refuses_the_whole_bind() {
        let (mut tx, mut rx) = (None, None);
        let both = CqBindFlags::parse(OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
        let tx_only = CqBindFlags::parse(OpFlags::TRANSMIT).unwrap();
        let rx_only = CqBindFlags::parse(OpFlags::RECV).unwrap();
        assert!(tx_only.store(1, &mut tx, &mut rx));
        assert!(!both.store(2, &mut tx, &mut rx));
        assert_eq!((tx, rx), (Some(1), None));
        assert!(rx_only.store(3, &mut tx, &mut rx));
        assert_eq!((tx, rx), (Some(1), Some(3)));
    }
}
