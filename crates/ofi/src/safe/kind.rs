//! Endpoint kinds as types: [`Msg`], [`Rdm`] and [`Dgram`], and the marker traits that
//! decide which operations an [`Ep`](super::Ep) of a kind offers. The traits are sealed:
//! only these three kinds exist.

use crate::{Caps, EpType};

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Msg {}
    impl Sealed for super::Rdm {}
    impl Sealed for super::Dgram {}
}

/// An endpoint kind (`enum fi_ep_type`) known at compile time.
pub trait EpKind: sealed::Sealed + Send + Sync + 'static {
    /// The endpoint type this kind stands for.
    const EP_TYPE: EpType;
    /// The capabilities the safe layer asks for by default for this kind.
    const DEFAULT_CAPS: Caps;
}

/// Connectionless kinds: peers are addressed through the endpoint's address vector
/// ([`Ep::insert_peer`](super::Ep::insert_peer)).
pub trait Connectionless: EpKind {}

/// Reliable kinds: tagged messages, RMA and atomics are offered (the provider must
/// still grant the capability; otherwise the call fails with `FI_ENOSYS` or
/// `FI_EOPNOTSUPP`).
pub trait Reliable: EpKind {}

/// `FI_EP_MSG`: reliable and connected. Connect with
/// [`EpBuilder::<Msg>::connect`](super::EpBuilder::connect) or accept through a
/// [`Listener`](super::Listener).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Msg;

/// `FI_EP_RDM`: reliable datagrams, connectionless.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rdm;

/// `FI_EP_DGRAM`: unreliable datagrams, connectionless. No tagged, RMA or atomic
/// operations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Dgram;

impl EpKind for Msg {
    const EP_TYPE: EpType = EpType::Msg;
    const DEFAULT_CAPS: Caps = Caps::MSG;
}
impl EpKind for Rdm {
    const EP_TYPE: EpType = EpType::Rdm;
    const DEFAULT_CAPS: Caps = Caps::MSG;
}
impl EpKind for Dgram {
    const EP_TYPE: EpType = EpType::Dgram;
    const DEFAULT_CAPS: Caps = Caps::MSG;
}

impl Connectionless for Rdm {}
impl Connectionless for Dgram {}
impl Reliable for Msg {}
impl Reliable for Rdm {}
