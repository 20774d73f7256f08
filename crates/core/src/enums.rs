//! Enumerated values of the API, with the C library's numeric values and names.
//!
//! Closed sets are Rust enums (`#[repr(u32)]`; every C value is non-negative, so the
//! C `int`/enum representation carries them unchanged). Sets that grow with new
//! providers ([`Protocol`], [`AddrFormat`]) are open newtypes over `u32` so unknown
//! values from newer peers survive a round trip.
//!
//! Every type has `from_raw` / `to_raw` (the C value), `name()` (the C name, e.g.
//! `"FI_EP_RDM"`), `Display` (= `name()`) and `FromStr`, which accepts the C name
//! case-insensitively, with or without `FI_`, and also without the type's own prefix
//! (`"rdm"` for `FI_EP_RDM`). Parsing failures are [`Errno::EINVAL`] naming the input.
//! Nothing here panics.

use std::str::FromStr;

use crate::error::{Errno, Error};

/// `FI_SHARED_CONTEXT`: a tx/rx context count meaning "use a shared context".
pub const SHARED_CONTEXT: usize = usize::MAX;
/// `FI_ADDR_NOTAVAIL`: no fabric address (all ones).
pub const ADDR_NOTAVAIL: u64 = u64::MAX;
/// `FI_ADDR_UNSPEC`: an unspecified fabric address; the same value as [`ADDR_NOTAVAIL`].
pub const ADDR_UNSPEC: u64 = ADDR_NOTAVAIL;
/// `FI_KEY_NOTAVAIL`: no memory-registration key (all ones).
pub const KEY_NOTAVAIL: u64 = u64::MAX;

/// Finds `name` among `(c_name, value)` pairs: as given, with `FI_` added, or with
/// `prefix` added; ASCII case-insensitive, surrounding blanks ignored.
fn lookup_c_name<T: Copy>(name: &str, prefix: &str, table: &[(&'static str, T)]) -> Option<T> {
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    let find = |n: &str| {
        table
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(n))
            .map(|(_, v)| *v)
    };
    find(name)
        .or_else(|| find(&format!("FI_{name}")))
        .or_else(|| find(&format!("{prefix}{name}")))
}

/// Implements `Display` for `$t` as the `&'static str` its method `$text` returns (a
/// name, a label).
macro_rules! display_as {
    ($t:ty, $text:ident) => {
        impl ::std::fmt::Display for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.$text())
            }
        }
    };
}
pub(crate) use display_as;

/// Implements `FromStr` for the C enum `$name` by its `from_name` (an unknown name is
/// `FI_EINVAL`, naming the input).
macro_rules! from_str_by_name {
    ($name:ident) => {
        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                Self::from_name(s).ok_or_else(|| {
                    Error::new(
                        Errno::EINVAL,
                        format!("unknown {} name {s:?}", stringify!($name)),
                    )
                })
            }
        }
    };
}

/// Declares a closed C enum with `from_raw`, `to_raw`, `name`, `ALL`, `Default`,
/// `Display` and `FromStr`.
macro_rules! c_enum {
    (
        $(#[$outer:meta])*
        pub enum $name:ident, prefix $prefix:literal, default $default:ident {
            $( $(#[$inner:meta])* $var:ident = $val:expr => $cname:literal, )*
        }
    ) => {
        $(#[$outer])*
        #[repr(u32)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
        pub enum $name {
            $( $(#[$inner])* $var = $val, )*
        }

        impl $name {
            /// Every variant, in C value order.
            pub const ALL: &'static [$name] = &[$($name::$var),*];
            const TABLE: &'static [(&'static str, $name)] = &[$(($cname, $name::$var)),*];

            /// The variant with C value `raw`, if any.
            pub const fn from_raw(raw: u32) -> Option<Self> {
                match raw {
                    $( v if v == $val => Some($name::$var), )*
                    _ => None,
                }
            }

            /// The C value.
            pub const fn to_raw(self) -> u32 {
                self as u32
            }

            /// The C name (e.g. `"FI_EP_RDM"`).
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$var => $cname, )*
                }
            }

            /// The variant called `name` (see the module docs for accepted forms).
            pub fn from_name(name: &str) -> Option<Self> {
                lookup_c_name(name, $prefix, Self::TABLE)
            }
        }

        impl Default for $name {
            fn default() -> Self {
                $name::$default
            }
        }

        display_as!($name, name);
        from_str_by_name!($name);

        impl From<$name> for u32 {
            fn from(v: $name) -> u32 {
                v.to_raw()
            }
        }

        impl TryFrom<u32> for $name {
            type Error = Error;
            fn try_from(raw: u32) -> Result<Self, Error> {
                Self::from_raw(raw).ok_or_else(|| {
                    Error::new(Errno::EINVAL, format!("invalid {} value {raw}", stringify!($name)))
                })
            }
        }
    };
}

/// Declares an open newtype over `u32` with named constants.
macro_rules! c_open_enum {
    (
        $(#[$outer:meta])*
        pub struct $name:ident, prefix $prefix:literal {
            $( $(#[$inner:meta])* $var:ident = $val:expr => $cname:literal, )*
        }
    ) => {
        $(#[$outer])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            $( $(#[$inner])* pub const $var: $name = $name($val); )*

            /// Every named value, in C value order.
            pub const ALL: &'static [$name] = &[$($name::$var),*];
            const TABLE: &'static [(&'static str, $name)] = &[$(($cname, $name::$var)),*];

            /// The value for C value `raw` (always succeeds: the set is open).
            pub const fn from_raw(raw: u32) -> Self {
                $name(raw)
            }

            /// The C value.
            pub const fn to_raw(self) -> u32 {
                self.0
            }

            /// True if this value has a name here.
            pub const fn is_known(self) -> bool {
                match self.0 {
                    $( v if v == $val => true, )*
                    _ => false,
                }
            }

            /// The C name, or `"Unknown"` for a value without one.
            pub const fn name(self) -> &'static str {
                match self.0 {
                    $( v if v == $val => $cname, )*
                    _ => "Unknown",
                }
            }

            /// The value called `name` (see the module docs for accepted forms).
            pub fn from_name(name: &str) -> Option<Self> {
                lookup_c_name(name, $prefix, Self::TABLE)
            }
        }

        display_as!($name, name);
        from_str_by_name!($name);

        impl From<$name> for u32 {
            fn from(v: $name) -> u32 {
                v.0
            }
        }

        impl From<u32> for $name {
            fn from(raw: u32) -> $name {
                $name(raw)
            }
        }
    };
}

c_enum! {
    /// Endpoint type (`enum fi_ep_type`).
    pub enum EpType, prefix "FI_EP_", default Unspec {
        /// Not specified: any type.
        Unspec = 0 => "FI_EP_UNSPEC",
        /// Reliable, connection-oriented messaging.
        Msg = 1 => "FI_EP_MSG",
        /// Unreliable, connectionless datagrams.
        Dgram = 2 => "FI_EP_DGRAM",
        /// Reliable, connectionless datagrams (reliable datagram messaging).
        Rdm = 3 => "FI_EP_RDM",
        /// Socket-like stream endpoint.
        SockStream = 4 => "FI_EP_SOCK_STREAM",
        /// Socket-like datagram endpoint.
        SockDgram = 5 => "FI_EP_SOCK_DGRAM",
    }
}

c_open_enum! {
    /// Wire protocol of an endpoint (`ep_attr.protocol`, the 1.17 `FI_PROTO_*` values).
    /// Two providers with the same protocol are meant to interoperate.
    pub struct Protocol, prefix "FI_PROTO_" {
        /// Not specified.
        UNSPEC = 0 => "FI_PROTO_UNSPEC",
        /// RDMA CM over InfiniBand reliable connections.
        RDMA_CM_IB_RC = 1 => "FI_PROTO_RDMA_CM_IB_RC",
        /// iWARP.
        IWARP = 2 => "FI_PROTO_IWARP",
        /// InfiniBand unreliable datagrams.
        IB_UD = 3 => "FI_PROTO_IB_UD",
        /// PSM (Performance Scaled Messaging).
        PSMX = 4 => "FI_PROTO_PSMX",
        /// UDP.
        UDP = 5 => "FI_PROTO_UDP",
        /// TCP sockets.
        SOCK_TCP = 6 => "FI_PROTO_SOCK_TCP",
        /// MXM (deprecated; value kept).
        MXM = 7 => "FI_PROTO_MXM",
        /// iWARP reliable datagrams.
        IWARP_RDM = 8 => "FI_PROTO_IWARP_RDM",
        /// InfiniBand reliable datagrams.
        IB_RDM = 9 => "FI_PROTO_IB_RDM",
        /// Cray GNI.
        GNI = 10 => "FI_PROTO_GNI",
        /// The rxm utility protocol (RDM over MSG).
        RXM = 11 => "FI_PROTO_RXM",
        /// The rxd utility protocol (RDM over DGRAM).
        RXD = 12 => "FI_PROTO_RXD",
        /// Mellanox MLX.
        MLX = 13 => "FI_PROTO_MLX",
        /// NetworkDirect.
        NETWORKDIRECT = 14 => "FI_PROTO_NETWORKDIRECT",
        /// PSM2.
        PSMX2 = 15 => "FI_PROTO_PSMX2",
        /// Shared memory.
        SHM = 16 => "FI_PROTO_SHM",
        /// Multi-rail.
        MRAIL = 17 => "FI_PROTO_MRAIL",
        /// rstream.
        RSTREAM = 18 => "FI_PROTO_RSTREAM",
        /// RDMA CM over InfiniBand XRC.
        RDMA_CM_IB_XRC = 19 => "FI_PROTO_RDMA_CM_IB_XRC",
        /// Amazon EFA.
        EFA = 20 => "FI_PROTO_EFA",
        /// PSM3.
        PSMX3 = 21 => "FI_PROTO_PSMX3",
        /// rxm over TCP.
        RXM_TCP = 22 => "FI_PROTO_RXM_TCP",
        /// Omni-Path Express.
        OPX = 23 => "FI_PROTO_OPX",
        /// HPE Cassini (CXI).
        CXI = 24 => "FI_PROTO_CXI",
        /// The tcp provider's protocol (xnet).
        XNET = 25 => "FI_PROTO_XNET",
    }
}

c_open_enum! {
    /// Address format (`fi_info.addr_format`). C names: `FI_FORMAT_UNSPEC`,
    /// `FI_SOCKADDR*`, `FI_ADDR_*`.
    pub struct AddrFormat, prefix "FI_ADDR_" {
        /// Provider-specific; treat addresses as opaque.
        UNSPEC = 0 => "FI_FORMAT_UNSPEC",
        /// `struct sockaddr`; the family field decides IPv4 or IPv6.
        SOCKADDR = 1 => "FI_SOCKADDR",
        /// `struct sockaddr_in` (IPv4).
        SOCKADDR_IN = 2 => "FI_SOCKADDR_IN",
        /// `struct sockaddr_in6` (IPv6).
        SOCKADDR_IN6 = 3 => "FI_SOCKADDR_IN6",
        /// `struct sockaddr_ib` (InfiniBand).
        SOCKADDR_IB = 4 => "FI_SOCKADDR_IB",
        /// PSM: one `u64`.
        PSMX = 5 => "FI_ADDR_PSMX",
        /// Cray GNI.
        GNI = 6 => "FI_ADDR_GNI",
        /// Blue Gene/Q.
        BGQ = 7 => "FI_ADDR_BGQ",
        /// Mellanox MLX.
        MLX = 8 => "FI_ADDR_MLX",
        /// A formatted string (`scheme://...`), see [`crate::addr::AddrStr`].
        STR = 9 => "FI_ADDR_STR",
        /// PSM2: two `u64`s.
        PSMX2 = 10 => "FI_ADDR_PSMX2",
        /// InfiniBand UD: four `u64`s.
        IB_UD = 11 => "FI_ADDR_IB_UD",
        /// Amazon EFA (proprietary).
        EFA = 12 => "FI_ADDR_EFA",
        /// PSM3: four `u64`s.
        PSMX3 = 13 => "FI_ADDR_PSMX3",
        /// Omni-Path Express.
        OPX = 14 => "FI_ADDR_OPX",
        /// HPE Cassini (CXI).
        CXI = 15 => "FI_ADDR_CXI",
        /// UCX (newer than the 1.17 header; the next value after CXI).
        UCX = 16 => "FI_ADDR_UCX",
    }
}

c_enum! {
    /// Progress model (`enum fi_progress`; the 1.17 header has no
    /// `FI_PROGRESS_CONTROL_UNIFIED`).
    pub enum Progress, prefix "FI_PROGRESS_", default Unspec {
        /// Not specified.
        Unspec = 0 => "FI_PROGRESS_UNSPEC",
        /// The provider makes progress on its own.
        Auto = 1 => "FI_PROGRESS_AUTO",
        /// Progress happens only inside calls made by the application.
        Manual = 2 => "FI_PROGRESS_MANUAL",
    }
}

c_enum! {
    /// Threading model (`enum fi_threading`).
    pub enum Threading, prefix "FI_THREAD_", default Unspec {
        /// Not specified.
        Unspec = 0 => "FI_THREAD_UNSPEC",
        /// Every object may be used from any thread concurrently.
        Safe = 1 => "FI_THREAD_SAFE",
        /// Each object is used by one thread at a time.
        Fid = 2 => "FI_THREAD_FID",
        /// All objects of a domain are used by one thread at a time.
        Domain = 3 => "FI_THREAD_DOMAIN",
        /// Objects sharing a completion context are used by one thread at a time.
        Completion = 4 => "FI_THREAD_COMPLETION",
        /// Each endpoint (and what it uses alone) is used by one thread at a time.
        Endpoint = 5 => "FI_THREAD_ENDPOINT",
    }
}

c_enum! {
    /// Resource management (`enum fi_resource_mgmt`).
    pub enum ResourceMgmt, prefix "FI_RM_", default Unspec {
        /// Not specified.
        Unspec = 0 => "FI_RM_UNSPEC",
        /// The application keeps queues from overrunning.
        Disabled = 1 => "FI_RM_DISABLED",
        /// The provider protects against queue overruns.
        Enabled = 2 => "FI_RM_ENABLED",
    }
}

c_enum! {
    /// Address-vector type (`enum fi_av_type`).
    pub enum AvType, prefix "FI_AV_", default Unspec {
        /// Not specified.
        Unspec = 0 => "FI_AV_UNSPEC",
        /// Fabric addresses are provider-chosen values.
        Map = 1 => "FI_AV_MAP",
        /// Fabric addresses are consecutive indices.
        Table = 2 => "FI_AV_TABLE",
    }
}

c_enum! {
    /// Completion-queue entry format (`enum fi_cq_format`).
    pub enum CqFormat, prefix "FI_CQ_FORMAT_", default Unspec {
        /// Not specified.
        Unspec = 0 => "FI_CQ_FORMAT_UNSPEC",
        /// Context only.
        Context = 1 => "FI_CQ_FORMAT_CONTEXT",
        /// Context, flags, length.
        Msg = 2 => "FI_CQ_FORMAT_MSG",
        /// Adds buffer and remote CQ data.
        Data = 3 => "FI_CQ_FORMAT_DATA",
        /// Adds the tag.
        Tagged = 4 => "FI_CQ_FORMAT_TAGGED",
    }
}

c_enum! {
    /// Completion-queue wait condition (`enum fi_cq_wait_cond`).
    pub enum CqWaitCond, prefix "FI_CQ_COND_", default None {
        /// Wake on any completion.
        None = 0 => "FI_CQ_COND_NONE",
        /// Wake once the threshold number of completions is reached.
        Threshold = 1 => "FI_CQ_COND_THRESHOLD",
    }
}

c_enum! {
    /// Wait object (`enum fi_wait_obj`). Note `None` (0) precedes `Unspec` (1).
    pub enum WaitObj, prefix "FI_WAIT_", default None {
        /// No waiting: polling only.
        None = 0 => "FI_WAIT_NONE",
        /// The provider chooses.
        Unspec = 1 => "FI_WAIT_UNSPEC",
        /// A wait set.
        Set = 2 => "FI_WAIT_SET",
        /// A file descriptor.
        Fd = 3 => "FI_WAIT_FD",
        /// A pthread mutex and condition variable.
        MutexCond = 4 => "FI_WAIT_MUTEX_COND",
        /// Busy-wait with yields.
        Yield = 5 => "FI_WAIT_YIELD",
        /// A set of descriptors to poll.
        PollFd = 6 => "FI_WAIT_POLLFD",
    }
}

c_enum! {
    /// Atomic datatype (`enum fi_datatype`). `Int128`/`Uint128` take the value that
    /// was `FI_DATATYPE_LAST` and the next one.
    pub enum Datatype, prefix "FI_", default Int8 {
        /// Signed 8-bit integer.
        Int8 = 0 => "FI_INT8",
        /// Unsigned 8-bit integer.
        Uint8 = 1 => "FI_UINT8",
        /// Signed 16-bit integer.
        Int16 = 2 => "FI_INT16",
        /// Unsigned 16-bit integer.
        Uint16 = 3 => "FI_UINT16",
        /// Signed 32-bit integer.
        Int32 = 4 => "FI_INT32",
        /// Unsigned 32-bit integer.
        Uint32 = 5 => "FI_UINT32",
        /// Signed 64-bit integer.
        Int64 = 6 => "FI_INT64",
        /// Unsigned 64-bit integer.
        Uint64 = 7 => "FI_UINT64",
        /// IEEE 754 single precision.
        Float = 8 => "FI_FLOAT",
        /// IEEE 754 double precision.
        Double = 9 => "FI_DOUBLE",
        /// Pair of single-precision values (real, imaginary).
        FloatComplex = 10 => "FI_FLOAT_COMPLEX",
        /// Pair of double-precision values (real, imaginary).
        DoubleComplex = 11 => "FI_DOUBLE_COMPLEX",
        /// Extended precision (`long double`: 16 bytes on x86_64).
        LongDouble = 12 => "FI_LONG_DOUBLE",
        /// Pair of extended-precision values.
        LongDoubleComplex = 13 => "FI_LONG_DOUBLE_COMPLEX",
        /// Signed 128-bit integer.
        Int128 = 14 => "FI_INT128",
        /// Unsigned 128-bit integer.
        Uint128 = 15 => "FI_UINT128",
    }
}

impl Datatype {
    /// Size in bytes of one element (`long double` counts 16, as on x86_64).
    pub const fn size(self) -> usize {
        match self {
            Datatype::Int8 | Datatype::Uint8 => 1,
            Datatype::Int16 | Datatype::Uint16 => 2,
            Datatype::Int32 | Datatype::Uint32 | Datatype::Float => 4,
            Datatype::Int64 | Datatype::Uint64 | Datatype::Double | Datatype::FloatComplex => 8,
            Datatype::DoubleComplex
            | Datatype::LongDouble
            | Datatype::Int128
            | Datatype::Uint128 => 16,
            Datatype::LongDoubleComplex => 32,
        }
    }

    /// True for the integer types (the ones bitwise and logical operations accept).
    pub const fn is_integer(self) -> bool {
        !matches!(
            self,
            Datatype::Float
                | Datatype::Double
                | Datatype::FloatComplex
                | Datatype::DoubleComplex
                | Datatype::LongDouble
                | Datatype::LongDoubleComplex
        )
    }

    /// True for the complex types.
    pub const fn is_complex(self) -> bool {
        matches!(
            self,
            Datatype::FloatComplex | Datatype::DoubleComplex | Datatype::LongDoubleComplex
        )
    }
}

/// The family of atomic calls an [`AtomicOp`] belongs to (fi_atomic(3)).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum AtomicKind {
    /// Base calls (`fi_atomic*`); these operations are also valid with fetch calls.
    Base,
    /// Fetch calls only (`fi_fetch_atomic*`): `FI_ATOMIC_READ`.
    Fetch,
    /// Compare calls (`fi_compare_atomic*`): the swaps.
    Compare,
}

c_enum! {
    /// Atomic operation (`enum fi_op`).
    pub enum AtomicOp, prefix "FI_", default Min {
        /// Minimum.
        Min = 0 => "FI_MIN",
        /// Maximum.
        Max = 1 => "FI_MAX",
        /// Sum.
        Sum = 2 => "FI_SUM",
        /// Product.
        Prod = 3 => "FI_PROD",
        /// Logical or.
        Lor = 4 => "FI_LOR",
        /// Logical and.
        Land = 5 => "FI_LAND",
        /// Bitwise or.
        Bor = 6 => "FI_BOR",
        /// Bitwise and.
        Band = 7 => "FI_BAND",
        /// Logical exclusive or.
        Lxor = 8 => "FI_LXOR",
        /// Bitwise exclusive or.
        Bxor = 9 => "FI_BXOR",
        /// Atomic read (fetch calls only).
        AtomicRead = 10 => "FI_ATOMIC_READ",
        /// Atomic write.
        AtomicWrite = 11 => "FI_ATOMIC_WRITE",
        /// Swap if equal.
        Cswap = 12 => "FI_CSWAP",
        /// Swap if not equal.
        CswapNe = 13 => "FI_CSWAP_NE",
        /// Swap if compare value <= target.
        CswapLe = 14 => "FI_CSWAP_LE",
        /// Swap if compare value < target.
        CswapLt = 15 => "FI_CSWAP_LT",
        /// Swap if compare value >= target.
        CswapGe = 16 => "FI_CSWAP_GE",
        /// Swap if compare value > target.
        CswapGt = 17 => "FI_CSWAP_GT",
        /// Masked swap.
        Mswap = 18 => "FI_MSWAP",
    }
}

impl AtomicOp {
    /// The call family this operation belongs to.
    pub const fn kind(self) -> AtomicKind {
        match self {
            AtomicOp::AtomicRead => AtomicKind::Fetch,
            AtomicOp::Cswap
            | AtomicOp::CswapNe
            | AtomicOp::CswapLe
            | AtomicOp::CswapLt
            | AtomicOp::CswapGe
            | AtomicOp::CswapGt
            | AtomicOp::Mswap => AtomicKind::Compare,
            _ => AtomicKind::Base,
        }
    }

    /// True if the operation may be used with calls of `family`: base calls take the
    /// base operations, fetch calls take the base operations and `FI_ATOMIC_READ`,
    /// compare calls take the swaps.
    pub const fn valid_for(self, family: AtomicKind) -> bool {
        matches!(
            (self.kind(), family),
            (AtomicKind::Base, AtomicKind::Base)
                | (AtomicKind::Base, AtomicKind::Fetch)
                | (AtomicKind::Fetch, AtomicKind::Fetch)
                | (AtomicKind::Compare, AtomicKind::Compare)
        )
    }
}

c_enum! {
    /// Event-queue event (`FI_NOTIFY` ... in `fi_eq.h`; `FI_NOTIFY` is 0).
    pub enum EqEvent, prefix "FI_", default Notify {
        /// Notification (also the event of asynchronous errors).
        Notify = 0 => "FI_NOTIFY",
        /// Connection request on a passive endpoint.
        ConnReq = 1 => "FI_CONNREQ",
        /// Connection established.
        Connected = 2 => "FI_CONNECTED",
        /// Connection shut down.
        Shutdown = 3 => "FI_SHUTDOWN",
        /// Asynchronous memory registration completed.
        MrComplete = 4 => "FI_MR_COMPLETE",
        /// Asynchronous address-vector insertion completed.
        AvComplete = 5 => "FI_AV_COMPLETE",
        /// Multicast join completed.
        JoinComplete = 6 => "FI_JOIN_COMPLETE",
    }
}

c_enum! {
    /// Memory interface of a buffer (`enum fi_hmem_iface`).
    pub enum HmemIface, prefix "FI_HMEM_", default System {
        /// Host memory.
        System = 0 => "FI_HMEM_SYSTEM",
        /// NVIDIA CUDA.
        Cuda = 1 => "FI_HMEM_CUDA",
        /// AMD ROCr.
        Rocr = 2 => "FI_HMEM_ROCR",
        /// Intel Level Zero.
        Ze = 3 => "FI_HMEM_ZE",
        /// AWS Neuron.
        Neuron = 4 => "FI_HMEM_NEURON",
        /// Habana SynapseAI.
        SynapseAi = 5 => "FI_HMEM_SYNAPSEAI",
    }
}

c_enum! {
    /// Option level of `fi_getopt` / `fi_setopt` (`fi_endpoint.h`; fi_endpoint(3),
    /// section "fi_setopt / fi_getopt").
    pub enum OptLevel, prefix "FI_OPT_", default Endpoint {
        /// Endpoint options ([`EpOption`]).
        Endpoint = 0 => "FI_OPT_ENDPOINT",
    }
}

c_open_enum! {
    /// Option name of the `FI_OPT_ENDPOINT` level (`fi_endpoint.h`, libfabric 1.17). Open:
    /// newer libraries add names and providers define their own (negative C values,
    /// carried as their `u32` bit pattern). The C `fi_tostr` has no type for options;
    /// [`EpOption::name`] is for messages and `fi_info`-style tools.
    ///
    /// Options newer than the 1.17 header (`FI_OPT_CUDA_API_PERMITTED`,
    /// `FI_OPT_SHARED_MEMORY_PERMITTED`, `FI_OPT_MAX_MSG_SIZE`, the inject sizes) are left
    /// out: their values cannot be checked against the installed header.
    ///
    /// Access (fi_endpoint(3)): `CM_DATA_SIZE` is read-only; `XPU_TRIGGER` applies to
    /// `fi_getopt` only; the others may be read and set.
    pub struct EpOption, prefix "FI_OPT_" {
        /// `size_t`: the space a multi-receive buffer must keep before it is released.
        MIN_MULTI_RECV = 0 => "FI_OPT_MIN_MULTI_RECV",
        /// `size_t`, read-only: the user data a connection-management message can carry.
        CM_DATA_SIZE = 1 => "FI_OPT_CM_DATA_SIZE",
        /// `size_t`: smallest buffered message reported (`FI_BUFFERED_RECV` mode).
        BUFFERED_MIN = 2 => "FI_OPT_BUFFERED_MIN",
        /// `size_t`: largest buffered message reported (`FI_BUFFERED_RECV` mode);
        /// `SIZE_MAX` asks for the provider's maximum.
        BUFFERED_LIMIT = 3 => "FI_OPT_BUFFERED_LIMIT",
        /// Send buffer size (in the 1.17 header, not described by the 1.17 page).
        SEND_BUF_SIZE = 4 => "FI_OPT_SEND_BUF_SIZE",
        /// Receive buffer size (in the 1.17 header, not described by the 1.17 page).
        RECV_BUF_SIZE = 5 => "FI_OPT_RECV_BUF_SIZE",
        /// Transmit queue size (in the 1.17 header, not described by the 1.17 page).
        TX_SIZE = 6 => "FI_OPT_TX_SIZE",
        /// Receive queue size (in the 1.17 header, not described by the 1.17 page).
        RX_SIZE = 7 => "FI_OPT_RX_SIZE",
        /// `int`, one of [`HmemP2p`]: how peer-to-peer `FI_HMEM` transfers are used.
        FI_HMEM_P2P = 8 => "FI_OPT_FI_HMEM_P2P",
        /// `struct fi_trigger_xpu`, `fi_getopt` only: what XPU triggers need.
        XPU_TRIGGER = 9 => "FI_OPT_XPU_TRIGGER",
    }
}

impl EpOption {
    /// True for an option `fi_setopt` must refuse whatever the provider
    /// (`FI_OPT_CM_DATA_SIZE`, `FI_OPT_XPU_TRIGGER`: fi_endpoint(3)).
    pub const fn is_read_only(self) -> bool {
        matches!(self, EpOption::CM_DATA_SIZE | EpOption::XPU_TRIGGER)
    }

    /// The option as the C `int` `fi_getopt` / `fi_setopt` take.
    pub const fn to_c_int(self) -> i32 {
        self.0 as i32
    }

    /// The option for the C `int` `optname` (any value: the set is open).
    pub const fn from_c_int(optname: i32) -> EpOption {
        EpOption(optname as u32)
    }
}

c_enum! {
    /// Values of `FI_OPT_FI_HMEM_P2P` (`fi_endpoint.h`).
    pub enum HmemP2p, prefix "FI_HMEM_P2P_", default Enabled {
        /// The provider decides when to use peer to peer (the default).
        Enabled = 0 => "FI_HMEM_P2P_ENABLED",
        /// Peer to peer for every transfer; those that cannot use it fail.
        Required = 1 => "FI_HMEM_P2P_REQUIRED",
        /// Peer to peer where available, else a copy.
        Preferred = 2 => "FI_HMEM_P2P_PREFERRED",
        /// No peer to peer.
        Disabled = 3 => "FI_HMEM_P2P_DISABLED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! check_closed {
        ($t:ty) => {{
            for (i, v) in <$t>::ALL.iter().enumerate() {
                assert_eq!(<$t>::from_raw(v.to_raw()), Some(*v));
                assert_eq!(v.to_string(), v.name());
                assert_eq!(v.name().parse::<$t>().unwrap(), *v);
                assert_eq!(v.name().to_lowercase().parse::<$t>().unwrap(), *v);
                assert_eq!(v.name()[3..].parse::<$t>().unwrap(), *v);
                assert_eq!(<$t>::try_from(v.to_raw()).unwrap(), *v);
                assert_eq!(u32::from(*v), v.to_raw());
                // No duplicate names or values.
                for w in &<$t>::ALL[i + 1..] {
                    assert_ne!(v.name(), w.name());
                    assert_ne!(v.to_raw(), w.to_raw());
                }
            }
            let bad = <$t>::ALL.iter().map(|v| v.to_raw()).max().unwrap() + 1;
            assert_eq!(<$t>::from_raw(bad), None);
            assert_eq!(<$t>::try_from(bad).unwrap_err().code(), Errno::EINVAL);
            let e = "FI_NO_SUCH_THING".parse::<$t>().unwrap_err();
            assert_eq!(e.code(), Errno::EINVAL);
            assert!(e.to_string().contains("FI_NO_SUCH_THING"), "{e}");
            assert_eq!("".parse::<$t>().unwrap_err().code(), Errno::EINVAL);
        }};
    }

    #[test]
    fn closed_enums_round_trip() {
        check_closed!(EpType);
        check_closed!(Progress);
        check_closed!(Threading);
        check_closed!(ResourceMgmt);
        check_closed!(AvType);
        check_closed!(CqFormat);
        check_closed!(CqWaitCond);
        check_closed!(WaitObj);
        check_closed!(Datatype);
        check_closed!(AtomicOp);
        check_closed!(EqEvent);
        check_closed!(HmemIface);
        check_closed!(OptLevel);
        check_closed!(HmemP2p);
    }

    #[test]
    fn c_values_and_defaults() {
        assert_eq!(EpType::Rdm.to_raw(), 3);
        assert_eq!(EpType::default(), EpType::Unspec);
        assert_eq!(WaitObj::Unspec.to_raw(), 1);
        assert_eq!(WaitObj::default(), WaitObj::None);
        assert_eq!(Threading::Endpoint.to_raw(), 5);
        assert_eq!(Datatype::Int128.to_raw(), 14);
        assert_eq!(AtomicOp::Mswap.to_raw(), 18);
        assert_eq!(EqEvent::Notify.to_raw(), 0);
        assert_eq!(EqEvent::JoinComplete.to_raw(), 6);
        assert_eq!(HmemIface::SynapseAi.to_raw(), 5);
        assert_eq!(CqFormat::Tagged.to_raw(), 4);
        assert_eq!(SHARED_CONTEXT, usize::MAX);
        assert_eq!(ADDR_UNSPEC, ADDR_NOTAVAIL);
    }

    #[test]
    fn short_names_parse() {
        assert_eq!("rdm".parse::<EpType>().unwrap(), EpType::Rdm);
        assert_eq!("EP_MSG".parse::<EpType>().unwrap(), EpType::Msg);
        assert_eq!(" fi_ep_dgram ".parse::<EpType>().unwrap(), EpType::Dgram);
        assert_eq!("manual".parse::<Progress>().unwrap(), Progress::Manual);
        assert_eq!("mutex_cond".parse::<WaitObj>().unwrap(), WaitObj::MutexCond);
        assert_eq!("cswap_ne".parse::<AtomicOp>().unwrap(), AtomicOp::CswapNe);
        assert_eq!("uint128".parse::<Datatype>().unwrap(), Datatype::Uint128);
        assert_eq!("connreq".parse::<EqEvent>().unwrap(), EqEvent::ConnReq);
        assert_eq!("cuda".parse::<HmemIface>().unwrap(), HmemIface::Cuda);
    }

    #[test]
    fn open_enums() {
        assert_eq!(Protocol::XNET.to_raw(), 25);
        assert_eq!(Protocol::SHM.name(), "FI_PROTO_SHM");
        assert_eq!(Protocol::default(), Protocol::UNSPEC);
        assert_eq!(Protocol(999).name(), "Unknown");
        assert!(!Protocol(999).is_known());
        assert!(Protocol::RXM.is_known());
        assert_eq!("rxd".parse::<Protocol>().unwrap(), Protocol::RXD);
        assert_eq!("FI_PROTO_EFA".parse::<Protocol>().unwrap(), Protocol::EFA);
        assert_eq!(
            "FI_PROTO_NOPE".parse::<Protocol>().unwrap_err().code(),
            Errno::EINVAL
        );
        for (i, p) in Protocol::ALL.iter().enumerate() {
            assert_eq!(p.to_raw() as usize, i);
            assert_eq!(p.name().parse::<Protocol>().unwrap(), *p);
        }

        assert_eq!(AddrFormat::STR.to_raw(), 9);
        assert_eq!(AddrFormat::CXI.to_raw(), 15);
        assert_eq!(AddrFormat::UNSPEC.name(), "FI_FORMAT_UNSPEC");
        assert_eq!(AddrFormat::SOCKADDR_IN.to_string(), "FI_SOCKADDR_IN");
        assert_eq!(AddrFormat::PSMX2.name(), "FI_ADDR_PSMX2");
        assert_eq!(
            "fi_addr_str".parse::<AddrFormat>().unwrap(),
            AddrFormat::STR
        );
        assert_eq!("str".parse::<AddrFormat>().unwrap(), AddrFormat::STR);
        assert_eq!(
            "sockaddr_in6".parse::<AddrFormat>().unwrap(),
            AddrFormat::SOCKADDR_IN6
        );
        assert_eq!(
            "format_unspec".parse::<AddrFormat>().unwrap(),
            AddrFormat::UNSPEC
        );
        assert_eq!(AddrFormat::from_raw(77).name(), "Unknown");
        for (i, a) in AddrFormat::ALL.iter().enumerate() {
            assert_eq!(a.to_raw() as usize, i);
            assert_eq!(a.name().parse::<AddrFormat>().unwrap(), *a);
        }
    }

    #[test]
    fn endpoint_options() {
        // The values are checked against the installed header by tests/header_values.rs.
        for (i, o) in EpOption::ALL.iter().enumerate() {
            assert_eq!(o.to_raw() as usize, i);
            assert_eq!(o.name().parse::<EpOption>().unwrap(), *o);
            assert_eq!(EpOption::from_c_int(o.to_c_int()), *o);
        }
        assert_eq!(
            "min_multi_recv".parse::<EpOption>().unwrap(),
            EpOption::MIN_MULTI_RECV
        );
        assert_eq!(EpOption::FI_HMEM_P2P.to_string(), "FI_OPT_FI_HMEM_P2P");
        // A provider-specific (negative) option survives the round trip unnamed.
        let prov = EpOption::from_c_int(-(1 << 16));
        assert_eq!(prov.to_c_int(), -(1 << 16));
        assert!(!prov.is_known());
        let ro: Vec<_> = EpOption::ALL.iter().filter(|o| o.is_read_only()).collect();
        assert_eq!(ro, [&EpOption::CM_DATA_SIZE, &EpOption::XPU_TRIGGER]);
        assert_eq!(OptLevel::default().to_raw(), 0);
        assert_eq!(HmemP2p::default(), HmemP2p::Enabled);
    }

    #[test]
    fn datatype_sizes() {
        assert_eq!(Datatype::Int8.size(), 1);
        assert_eq!(Datatype::Uint16.size(), 2);
        assert_eq!(Datatype::Float.size(), 4);
        assert_eq!(Datatype::FloatComplex.size(), 8);
        assert_eq!(Datatype::DoubleComplex.size(), 16);
        assert_eq!(Datatype::LongDouble.size(), 16);
        assert_eq!(Datatype::LongDoubleComplex.size(), 32);
        assert_eq!(Datatype::Uint128.size(), 16);
        assert!(Datatype::Int128.is_integer() && !Datatype::Double.is_integer());
        assert!(Datatype::FloatComplex.is_complex() && !Datatype::Float.is_complex());
    }

    #[test]
    fn atomic_kinds() {
        let base = [
            AtomicOp::Min,
            AtomicOp::Max,
            AtomicOp::Sum,
            AtomicOp::Prod,
            AtomicOp::Lor,
            AtomicOp::Land,
            AtomicOp::Bor,
            AtomicOp::Band,
            AtomicOp::Lxor,
            AtomicOp::Bxor,
            AtomicOp::AtomicWrite,
        ];
        for op in AtomicOp::ALL {
            let is_base = base.contains(op);
            assert_eq!(op.valid_for(AtomicKind::Base), is_base, "{op}");
            assert_eq!(
                op.valid_for(AtomicKind::Fetch),
                is_base || *op == AtomicOp::AtomicRead,
                "{op}"
            );
            assert_eq!(op.valid_for(AtomicKind::Compare), op.to_raw() >= 12, "{op}");
        }
        assert_eq!(AtomicOp::AtomicRead.kind(), AtomicKind::Fetch);
        assert_eq!(AtomicOp::Mswap.kind(), AtomicKind::Compare);
        assert_eq!(AtomicOp::AtomicWrite.kind(), AtomicKind::Base);
    }
}
