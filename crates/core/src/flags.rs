//! Bit-flag types of the API: capabilities, operation flags, modes, ordering, MR modes.
//!
//! Every type is a `#[repr(transparent)]` wrapper of the C integer whose bit values are
//! the C library's (`rdma/fabric.h`, `rdma/fi_domain.h`), so `bits()` can cross the C ABI
//! unchanged. The types implement [`bitflags::Flags`] and offer the same inherent API as
//! `bitflags!` types (`empty`, `all`, `contains`, `|`, `&`, `-`, `!`, ...); they are
//! declared by a local macro rather than `bitflags!` because that macro would add its
//! own exact-match `from_name`, clashing with ours. `!x` complements within the named
//! bits, as with `bitflags`.
//!
//! Capabilities and operation flags share one 64-bit space in C; here they are two
//! types ([`Caps`], [`OpFlags`]) with the same bit for the same name.
//!
//! Each type also has:
//! - `names()`: the C names of the set bits (`"FI_MSG"`), in the order the C library's
//!   `fi_tostr` prints them for [`Caps`], in the header's order (bit 59 down) for
//!   [`Mode`], in bit order for the others; bits without a name, and named bits that
//!   `fi_tostr` does not print (`UNPRINTED`, e.g. `FI_VARIABLE_MSG`), are left out;
//! - `from_name()`: one C name, case-insensitive, with or without the `FI_` prefix
//!   (for [`MsgOrder`]/[`CompOrder`] and [`MrMode`] also without `FI_ORDER_` / `FI_MR_`);
//! - `parse_list()`: `"FI_MSG|FI_RMA"`, the syntax of `fi_info -c`; a token may also be
//!   a number (`0x...` or decimal) giving raw bits, so `Display` output parses back;
//! - `Display`: the names joined by `|`, unnamed bits as one hex number, `0` if empty.
//!
//! Nothing here panics; an unknown name is [`Errno::EINVAL`] with the name in the message.

use std::fmt;
use std::str::FromStr;

use crate::error::{Errno, Error};

/// The set of the named flags of type `$t`, usable in constants:
/// `flag_set!(Caps: MSG, RMA)` is `Caps::MSG | Caps::RMA`.
macro_rules! flag_set {
    ($t:ident: $($f:ident),+ $(,)?) => {
        $t::from_bits_retain(0 $(| $t::$f.bits())+)
    };
}
pub(crate) use flag_set;

/// The binary operators of a flags type `$name`, each with its assigning form: `a OP b`
/// is the set operation named for it, `a OP= b` stores that in `a`.
macro_rules! flag_operators {
    ($name:ident: $($Op:ident $op:ident, $OpAssign:ident $op_assign:ident => $set_op:ident;)*) => {$(
        impl std::ops::$Op for $name {
            type Output = Self;
            fn $op(self, rhs: Self) -> Self {
                self.$set_op(rhs)
            }
        }
        impl std::ops::$OpAssign for $name {
            fn $op_assign(&mut self, rhs: Self) {
                *self = self.$set_op(rhs);
            }
        }
    )*};
}

/// Declares a bitflags type with C names, `names`, `from_name`, `parse_list`,
/// `Display` and `FromStr`.
///
/// `prefix` is the C name prefix (`"FI_"`, `"FI_ORDER_"`, ...); the C name of a flag is
/// the prefix followed by the constant's name. `order` lists every named flag in the
/// order `names()` reports them; `aliases` are extra accepted names (never printed).
macro_rules! c_flags {
    (
        $(#[$outer:meta])*
        pub struct $name:ident: $t:ty, prefix $prefix:literal {
            $( $(#[$inner:ident $($args:tt)*])* const $flag:ident = $value:expr; )*
        }
        order [ $($ord:ident),* $(,)? ]
        $( unprinted [ $($hid:ident),* $(,)? ] )?
        aliases [ $( $alias:literal => $aval:ident ),* $(,)? ]
    ) => {
        $(#[$outer])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name($t);

        impl $name {
            $( $(#[$inner $($args)*])* pub const $flag: $name = $name($value); )*

            /// The empty set.
            pub const fn empty() -> Self {
                $name(0)
            }
            /// Every named bit.
            pub const fn all() -> Self {
                $name(0 $( | ($value) )*)
            }
            /// The raw C value.
            pub const fn bits(&self) -> $t {
                self.0
            }
            /// `bits` if every set bit is named, else `None`.
            pub const fn from_bits(bits: $t) -> Option<Self> {
                if bits & !Self::all().0 == 0 {
                    Some($name(bits))
                } else {
                    None
                }
            }
            /// `bits` with unnamed bits cleared.
            pub const fn from_bits_truncate(bits: $t) -> Self {
                $name(bits & Self::all().0)
            }
            /// `bits` as is, unnamed bits kept.
            pub const fn from_bits_retain(bits: $t) -> Self {
                $name(bits)
            }
            /// True if no bit is set.
            pub const fn is_empty(&self) -> bool {
                self.0 == 0
            }
            /// True if every named bit is set.
            pub const fn is_all(&self) -> bool {
                self.0 & Self::all().0 == Self::all().0
            }
            /// True if every bit of `other` is set in `self`.
            pub const fn contains(&self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }
            /// True if `self` and `other` share a bit.
            pub const fn intersects(&self, other: Self) -> bool {
                self.0 & other.0 != 0
            }
            /// Bits set in both.
            #[must_use]
            pub const fn intersection(self, other: Self) -> Self {
                $name(self.0 & other.0)
            }
            /// Bits set in either.
            #[must_use]
            pub const fn union(self, other: Self) -> Self {
                $name(self.0 | other.0)
            }
            /// Bits of `self` not in `other`.
            #[must_use]
            pub const fn difference(self, other: Self) -> Self {
                $name(self.0 & !other.0)
            }
            /// Bits set in exactly one of the two.
            #[must_use]
            pub const fn symmetric_difference(self, other: Self) -> Self {
                $name(self.0 ^ other.0)
            }
            /// Named bits not set in `self`.
            #[must_use]
            pub const fn complement(self) -> Self {
                $name(!self.0 & Self::all().0)
            }
            /// Sets the bits of `other`.
            pub fn insert(&mut self, other: Self) {
                self.0 |= other.0;
            }
            /// Clears the bits of `other`.
            pub fn remove(&mut self, other: Self) {
                self.0 &= !other.0;
            }
            /// Flips the bits of `other`.
            pub fn toggle(&mut self, other: Self) {
                self.0 ^= other.0;
            }
            /// Sets (`value` true) or clears the bits of `other`.
            pub fn set(&mut self, other: Self, value: bool) {
                if value {
                    self.insert(other)
                } else {
                    self.remove(other)
                }
            }
            /// The set flags one by one (named ones, then any unnamed rest as one value).
            pub fn iter(&self) -> bitflags::iter::Iter<Self> {
                bitflags::Flags::iter(self)
            }
            /// The set named flags with their Rust names (`"MSG"`).
            pub fn iter_names(&self) -> bitflags::iter::IterNames<Self> {
                bitflags::Flags::iter_names(self)
            }
        }

        impl bitflags::Flags for $name {
            const FLAGS: &'static [bitflags::Flag<Self>] = &[
                $( bitflags::Flag::new(stringify!($flag), $name::$flag) ),*
            ];
            type Bits = $t;
            fn bits(&self) -> $t {
                self.0
            }
            fn from_bits_retain(bits: $t) -> Self {
                $name(bits)
            }
        }

        flag_operators! { $name:
            BitOr bitor, BitOrAssign bitor_assign => union;
            BitAnd bitand, BitAndAssign bitand_assign => intersection;
            BitXor bitxor, BitXorAssign bitxor_assign => symmetric_difference;
            Sub sub, SubAssign sub_assign => difference;
        }
        impl std::ops::Not for $name {
            type Output = Self;
            /// The complement within the named bits (as `bitflags` does).
            fn not(self) -> Self {
                self.complement()
            }
        }
        impl Extend<$name> for $name {
            fn extend<I: IntoIterator<Item = $name>>(&mut self, iter: I) {
                for f in iter {
                    self.insert(f)
                }
            }
        }
        impl FromIterator<$name> for $name {
            fn from_iter<I: IntoIterator<Item = $name>>(iter: I) -> Self {
                let mut out = Self::empty();
                out.extend(iter);
                out
            }
        }
        impl fmt::Debug for $name {
            /// `Caps(FI_MSG|FI_RMA)`.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self)
            }
        }
        impl fmt::LowerHex for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerHex::fmt(&self.0, f)
            }
        }
        impl fmt::UpperHex for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::UpperHex::fmt(&self.0, f)
            }
        }
        impl fmt::Binary for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Binary::fmt(&self.0, f)
            }
        }
        impl From<$name> for $t {
            fn from(f: $name) -> $t {
                f.0
            }
        }

        impl $name {
            /// Every named flag with its C name, in the order [`Self::names`] reports them.
            pub const NAMED: &'static [(&'static str, $name)] = &[
                $( (concat!($prefix, stringify!($ord)), $name::$ord) ),*
            ];

            /// Named flags that the C library's `fi_tostr` does not print: [`Self::names`]
            /// leaves them out; [`Self::from_name`] and `Display` know them.
            pub const UNPRINTED: &'static [(&'static str, $name)] = &[
                $($( (concat!($prefix, stringify!($hid)), $name::$hid) ),*)?
            ];

            /// Extra names accepted by [`Self::from_name`] (C aliases), never printed.
            pub const ALIASES: &'static [(&'static str, $name)] = &[
                $( ($alias, $name::$aval) ),*
            ];

            /// The C name of `self` when it is exactly one named flag, printed or not
            /// ([`Self::NAMED`], [`Self::UNPRINTED`]); else `None`.
            pub fn name(self) -> Option<&'static str> {
                Self::NAMED
                    .iter()
                    .chain(Self::UNPRINTED)
                    .find(|(_, f)| *f == self)
                    .map(|(n, _)| *n)
            }

            /// The C names of the named flags set in `self`, in `fi_tostr` order.
            /// Bits without a name are not reported.
            pub fn names(self) -> Vec<&'static str> {
                Self::NAMED
                    .iter()
                    .filter(|(_, f)| !f.is_empty() && self.contains(*f))
                    .map(|(n, _)| *n)
                    .collect()
            }

            /// The flag called `name`: the C name or an alias, case-insensitive, with or
            /// without the `FI_` prefix (and with or without this type's longer prefix).
            pub fn from_name(name: &str) -> Option<Self> {
                lookup_name(name, $prefix, Self::NAMED)
                    .or_else(|| lookup_name(name, $prefix, Self::UNPRINTED))
                    .or_else(|| lookup_name(name, $prefix, Self::ALIASES))
            }

            /// Parses a `|`-separated list of names (`"FI_MSG|FI_RMA"`), case-insensitive,
            /// blanks around names ignored. A token may be a number (`0x` hex or decimal)
            /// giving raw bits. An empty string is the empty set.
            ///
            /// # Errors
            /// [`Errno::EINVAL`] naming the first unknown or empty token.
            pub fn parse_list(s: &str) -> crate::error::Result<Self> {
                let mut out = Self::empty();
                if s.trim().is_empty() {
                    return Ok(out);
                }
                for tok in s.split('|') {
                    let tok = tok.trim();
                    if let Some(f) = Self::from_name(tok) {
                        out |= f;
                    } else if let Some(bits) = parse_number(tok) {
                        let bits = <$t>::try_from(bits).map_err(|_| {
                            Error::new(
                                Errno::EINVAL,
                                format!("{} value {tok:?} is out of range", stringify!($name)),
                            )
                        })?;
                        out |= Self::from_bits_retain(bits);
                    } else if tok.is_empty() {
                        return Err(Error::new(
                            Errno::EINVAL,
                            format!("empty name in {} list {s:?}", stringify!($name)),
                        ));
                    } else {
                        return Err(Error::new(
                            Errno::EINVAL,
                            format!("unknown {} name {tok:?}", stringify!($name)),
                        ));
                    }
                }
                Ok(out)
            }
        }

        impl fmt::Display for $name {
            /// The C names joined by `|` (printed ones in `names()` order, then unprinted
            /// ones); bits without a name as one `0x` number; `0` if empty.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut named = Self::empty();
                let mut first = true;
                for (n, flag) in Self::NAMED.iter().chain(Self::UNPRINTED) {
                    if !flag.is_empty() && self.contains(*flag) {
                        if !first {
                            f.write_str("|")?;
                        }
                        f.write_str(n)?;
                        first = false;
                        named |= *flag;
                    }
                }
                let rest = self.bits() & !named.bits();
                if rest != 0 {
                    if !first {
                        f.write_str("|")?;
                    }
                    write!(f, "{rest:#x}")?;
                    first = false;
                }
                if first {
                    f.write_str("0")?;
                }
                Ok(())
            }
        }

        impl FromStr for $name {
            type Err = Error;
            /// Same as [`Self::parse_list`].
            fn from_str(s: &str) -> Result<Self, Error> {
                Self::parse_list(s)
            }
        }
    };
}

/// Finds `name` in `table` (entries are full C names starting with `prefix`).
fn lookup<F: Copy>(name: &str, table: &[(&'static str, F)]) -> Option<F> {
    table
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, f)| *f)
}

/// Looks `name` up as a full C name, then with `FI_` added, then with `prefix` added.
fn lookup_name<F: Copy>(name: &str, prefix: &str, table: &[(&'static str, F)]) -> Option<F> {
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    lookup(name, table)
        .or_else(|| lookup(&format!("FI_{name}"), table))
        .or_else(|| lookup(&format!("{prefix}{name}"), table))
}

/// Parses a raw-bits token: `0x`/`0X` hex or decimal. `None` if it is not a number.
fn parse_number(tok: &str) -> Option<u64> {
    if let Some(h) = tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
        if h.is_empty() {
            return None;
        }
        u64::from_str_radix(h, 16).ok()
    } else if !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_digit()) {
        tok.parse().ok()
    } else {
        None
    }
}

c_flags! {
    /// Capabilities (`fi_info.caps`, attribute `caps`): what an application asks of a
    /// provider and what a provider offers.
    ///
    /// Per the newer fi_getinfo page, capabilities fall into three groups:
    /// - primary ([`Caps::PRIMARY`]): must be requested explicitly; a provider enables
    ///   only those asked for;
    /// - primary modifiers ([`Caps::PRIMARY_MODIFIERS`]): restrict a primary capability
    ///   (for example send-only); when none is given, all relevant ones are implied;
    /// - secondary ([`Caps::SECONDARY`]): optional; if requested the provider must support
    ///   them, and it may report unrequested ones when that costs nothing.
    pub struct Caps: u64, prefix "FI_" {
        /// Two-sided messaging (send / receive). Primary.
        const MSG = 1 << 1;
        /// One-sided reads and writes of remote memory. Primary.
        const RMA = 1 << 2;
        /// Tagged messaging: receives matched by tag. Primary.
        const TAGGED = 1 << 3;
        /// Remote atomic operations. Primary.
        const ATOMIC = 1 << 4;
        /// Multicast data transfers. Primary.
        const MULTICAST = 1 << 5;
        /// Collective operations. Primary.
        const COLLECTIVE = 1 << 6;
        /// Modifier: may initiate reads (RMA or atomic fetch).
        const READ = 1 << 8;
        /// Modifier: may initiate writes (RMA or atomic).
        const WRITE = 1 << 9;
        /// Modifier: may receive messages.
        const RECV = 1 << 10;
        /// Modifier: may send messages.
        const SEND = 1 << 11;
        /// Modifier: memory may be read by remote peers.
        const REMOTE_READ = 1 << 12;
        /// Modifier: memory may be written by remote peers.
        const REMOTE_WRITE = 1 << 13;
        /// Secondary: a single receive buffer may take several incoming messages.
        const MULTI_RECV = 1 << 16;
        /// Secondary: remote CQ data may be carried with transfers.
        const REMOTE_CQ_DATA = 1 << 17;
        /// Secondary: triggered operations.
        const TRIGGER = 1 << 20;
        /// Secondary: fenced operations.
        const FENCE = 1 << 21;
        /// Secondary (historic): variable-length messages (`FI_VARIABLE_MSG`). The C
        /// library's `fi_tostr` does not print it, so neither does [`Caps::names`].
        const VARIABLE_MSG = 1 << 48;
        /// Secondary: RMA to persistent memory.
        const RMA_PMEM = 1 << 49;
        /// Secondary: source address reported on receive errors too.
        const SOURCE_ERR = 1 << 50;
        /// Secondary: communication with peers on the same node.
        const LOCAL_COMM = 1 << 51;
        /// Secondary: communication with peers on other nodes.
        const REMOTE_COMM = 1 << 52;
        /// Secondary: address vectors shared between processes.
        const SHARED_AV = 1 << 53;
        /// Secondary: events (counters/CQs) for remote RMA targeting local memory.
        const RMA_EVENT = 1 << 56;
        /// Secondary: source address returned with completions.
        const SOURCE = 1 << 57;
        /// Primary: receive contexts addressable by index (scalable endpoints).
        const NAMED_RX_CTX = 1 << 58;
        /// Primary: receives may be posted for a specific source address.
        const DIRECTED_RECV = 1 << 59;
        /// Primary: user-supplied AV identifiers reported in completions.
        const AV_USER_ID = 1 << 41;
        /// Primary: peer (offload) provider support.
        const PEER = 1 << 43;
        /// Primary: transfers may be initiated from heterogeneous compute devices. Bit 44,
        /// the bit the 1.17 header calls `FI_XPU_TRIGGER`.
        const XPU = 1 << 44;
        /// Primary: transfers to and from device (heterogeneous) memory.
        const HMEM = 1 << 47;
    }
    order [
        MSG, RMA, TAGGED, ATOMIC, MULTICAST, COLLECTIVE, READ, WRITE, RECV, SEND,
        REMOTE_READ, REMOTE_WRITE, MULTI_RECV, REMOTE_CQ_DATA, TRIGGER, FENCE, RMA_PMEM,
        SOURCE_ERR, LOCAL_COMM, REMOTE_COMM, SHARED_AV, RMA_EVENT, SOURCE, NAMED_RX_CTX,
        DIRECTED_RECV, AV_USER_ID, PEER, HMEM, XPU,
    ]
    unprinted [VARIABLE_MSG]
    aliases [ "FI_ATOMICS" => ATOMIC, "FI_XPU_TRIGGER" => XPU ]
}

impl Caps {
    /// Primary capabilities: MSG RMA TAGGED ATOMIC MULTICAST NAMED_RX_CTX DIRECTED_RECV
    /// HMEM COLLECTIVE XPU AV_USER_ID PEER.
    pub const PRIMARY: Caps = flag_set!(Caps:
        MSG, RMA, TAGGED, ATOMIC, MULTICAST, NAMED_RX_CTX, DIRECTED_RECV, HMEM, COLLECTIVE, XPU,
        AV_USER_ID, PEER
    );

    /// Primary modifiers: READ WRITE RECV SEND REMOTE_READ REMOTE_WRITE.
    pub const PRIMARY_MODIFIERS: Caps =
        flag_set!(Caps: READ, WRITE, RECV, SEND, REMOTE_READ, REMOTE_WRITE);

    /// Secondary capabilities: MULTI_RECV SOURCE RMA_EVENT SHARED_AV TRIGGER FENCE
    /// LOCAL_COMM REMOTE_COMM SOURCE_ERR RMA_PMEM (the newer page's list), plus
    /// REMOTE_CQ_DATA and VARIABLE_MSG, which the C library also treats as secondary.
    pub const SECONDARY: Caps = flag_set!(Caps:
        MULTI_RECV, SOURCE, RMA_EVENT, SHARED_AV, TRIGGER, FENCE, LOCAL_COMM, REMOTE_COMM,
        SOURCE_ERR, RMA_PMEM, REMOTE_CQ_DATA, VARIABLE_MSG
    );

    /// `FI_ATOMICS`, the C alias of [`Caps::ATOMIC`].
    pub const ATOMICS: Caps = Caps::ATOMIC;

    /// The same bits as operation flags (capabilities and op flags share the C bit space).
    pub const fn as_op_flags(self) -> OpFlags {
        OpFlags::from_bits_retain(self.bits())
    }
}

c_flags! {
    /// Operation flags: per-call flags (`fi_sendmsg` ...), default `op_flags` of
    /// tx/rx attributes, completion flags, and bind / access flags. They share the
    /// capability bit space, so the capability-named bits here equal [`Caps`]'.
    ///
    /// Bit 59 is both `FI_CLAIM` (receive flag) and `FI_SELECTIVE_COMPLETION` (CQ and
    /// counter bind flag); `names()` prints it as `FI_CLAIM`.
    pub struct OpFlags: u64, prefix "FI_" {
        /// Completion/bind flag: message transfer.
        const MSG = Caps::MSG.bits();
        /// Completion/bind flag: RMA transfer.
        const RMA = Caps::RMA.bits();
        /// Completion/bind flag: tagged transfer.
        const TAGGED = Caps::TAGGED.bits();
        /// Completion/bind flag: atomic transfer.
        const ATOMIC = Caps::ATOMIC.bits();
        /// Completion flag: multicast transfer.
        const MULTICAST = Caps::MULTICAST.bits();
        /// Completion flag: collective operation.
        const COLLECTIVE = Caps::COLLECTIVE.bits();
        /// Access / completion flag: read.
        const READ = Caps::READ.bits();
        /// Access / completion flag: write.
        const WRITE = Caps::WRITE.bits();
        /// Bind / access / completion flag: receive side.
        const RECV = Caps::RECV.bits();
        /// Bind / access / completion flag: send (transmit) side.
        const SEND = Caps::SEND.bits();
        /// Access / completion flag: remote read.
        const REMOTE_READ = Caps::REMOTE_READ.bits();
        /// Access / completion flag: remote write.
        const REMOTE_WRITE = Caps::REMOTE_WRITE.bits();
        /// The receive buffer takes multiple messages; on a completion: buffer released.
        const MULTI_RECV = Caps::MULTI_RECV.bits();
        /// Remote CQ data is carried with (or arrived with) the transfer.
        const REMOTE_CQ_DATA = Caps::REMOTE_CQ_DATA.bits();
        /// More operations follow immediately (a batching hint).
        const MORE = 1 << 18;
        /// Peek for a matching message without consuming it.
        const PEEK = 1 << 19;
        /// Triggered operation.
        const TRIGGER = Caps::TRIGGER.bits();
        /// Do not start until earlier operations have completed.
        const FENCE = Caps::FENCE.bits();
        /// Priority hint.
        const PRIORITY = 1 << 22;
        /// Generate a completion for this operation (also `FI_EVENT`).
        const COMPLETION = 1 << 24;
        /// The buffer may be reused as soon as the call returns.
        const INJECT = 1 << 25;
        /// Complete once the buffer may be reused.
        const INJECT_COMPLETE = 1 << 26;
        /// Complete once the data has left the initiator (reached the transport).
        const TRANSMIT_COMPLETE = 1 << 27;
        /// Complete once the data is available at the target.
        const DELIVERY_COMPLETE = 1 << 28;
        /// Affinity hint for multi-receive and scalable endpoints.
        const AFFINITY = 1 << 29;
        /// Complete once the data is persistent at the target.
        const COMMIT_COMPLETE = 1 << 30;
        /// Complete once the message was matched at the target.
        const MATCH_COMPLETE = 1 << 31;
        /// Discard a peeked/claimed message.
        const DISCARD = 1 << 58;
        /// Claim a previously peeked message (same bit as `SELECTIVE_COMPLETION`).
        const CLAIM = 1 << 59;
    }
    order [
        MSG, RMA, TAGGED, ATOMIC, MULTICAST, COLLECTIVE, READ, WRITE, RECV, SEND,
        REMOTE_READ, REMOTE_WRITE, MULTI_RECV, REMOTE_CQ_DATA, MORE, PEEK, TRIGGER, FENCE,
        PRIORITY, COMPLETION, INJECT, INJECT_COMPLETE, TRANSMIT_COMPLETE, DELIVERY_COMPLETE,
        AFFINITY, COMMIT_COMPLETE, MATCH_COMPLETE, DISCARD, CLAIM,
    ]
    aliases [
        "FI_SELECTIVE_COMPLETION" => CLAIM, "FI_TRANSMIT" => SEND, "FI_EVENT" => COMPLETION,
        "FI_ATOMICS" => ATOMIC,
    ]
}

impl OpFlags {
    /// `FI_SELECTIVE_COMPLETION` (bit 59): a CQ/counter bind flag meaning only
    /// operations with [`OpFlags::COMPLETION`] generate completions.
    pub const SELECTIVE_COMPLETION: OpFlags = OpFlags::CLAIM;
    /// `FI_TRANSMIT`, the C alias of [`OpFlags::SEND`] (used as a bind flag).
    pub const TRANSMIT: OpFlags = OpFlags::SEND;
    /// `FI_EVENT`, the C alias of [`OpFlags::COMPLETION`].
    pub const EVENT: OpFlags = OpFlags::COMPLETION;

    /// The same bits as capabilities.
    pub const fn as_caps(self) -> Caps {
        Caps::from_bits_retain(self.bits())
    }
}

c_flags! {
    /// Flags of the getinfo call itself. Any other bit makes getinfo fail with
    /// `FI_EBADFLAGS`.
    pub struct GetinfoFlags: u64, prefix "FI_" {
        /// Rescan for hardware (bit 35).
        const RESCAN = 1 << 35;
        /// Return only provider attributes; no fabric/domain lookup (bit 54).
        const PROV_ATTR_ONLY = 1 << 54;
        /// `node` is a numeric address: no name resolution (bit 55).
        const NUMERICHOST = 1 << 55;
        /// `node`/`service` name the source (local) address (bit 57).
        const SOURCE = 1 << 57;
    }
    order [RESCAN, PROV_ATTR_ONLY, NUMERICHOST, SOURCE]
    aliases []
}

impl GetinfoFlags {
    /// Every flag getinfo accepts.
    pub const ALL: GetinfoFlags = GetinfoFlags::all();
}

c_flags! {
    /// Mode bits (`fi_info.mode`): requirements a provider places on the application.
    pub struct Mode: u64, prefix "FI_" {
        /// Buffered receives (peer/offload interfaces).
        const BUFFERED_RECV = 1 << 51;
        /// The application supplies two `fi_context` structures per operation context.
        const CONTEXT2 = 1 << 52;
        /// Completions are reported only for operations that asked for them.
        const RESTRICTED_COMP = 1 << 53;
        /// Completion flags carry only the flags the provider must report.
        const NOTIFY_FLAGS_ONLY = 1 << 54;
        /// Local buffers must be registered (pre-1.5 form of `FI_MR_LOCAL`).
        const LOCAL_MR = 1 << 55;
        /// Receives posted with remote CQ data consume a receive buffer.
        const RX_CQ_DATA = 1 << 56;
        /// IO vectors must stay valid until the operation completes.
        const ASYNC_IOV = 1 << 57;
        /// Message buffers reserve space for a provider prefix.
        const MSG_PREFIX = 1 << 58;
        /// The application supplies an `fi_context` per operation context.
        const CONTEXT = 1 << 59;
    }
    order [
        CONTEXT, MSG_PREFIX, ASYNC_IOV, RX_CQ_DATA, LOCAL_MR, NOTIFY_FLAGS_ONLY,
        RESTRICTED_COMP, CONTEXT2, BUFFERED_RECV,
    ]
    aliases []
}

c_flags! {
    /// Message ordering (`msg_order` of tx/rx attributes): which operation pairs a
    /// provider keeps in order. Letters: R = read, W = write, S = send; `RAW` = a read
    /// after a write. `RMA_*` / `ATOMIC_*` restrict the rule to that operation class.
    pub struct MsgOrder: u64, prefix "FI_ORDER_" {
        /// Read after read.
        const RAR = 1 << 0;
        /// Read after write.
        const RAW = 1 << 1;
        /// Read after send.
        const RAS = 1 << 2;
        /// Write after read.
        const WAR = 1 << 3;
        /// Write after write.
        const WAW = 1 << 4;
        /// Write after send.
        const WAS = 1 << 5;
        /// Send after read.
        const SAR = 1 << 6;
        /// Send after write.
        const SAW = 1 << 7;
        /// Send after send.
        const SAS = 1 << 8;
        /// RMA read after RMA read.
        const RMA_RAR = 1 << 32;
        /// RMA read after RMA write.
        const RMA_RAW = 1 << 33;
        /// RMA write after RMA read.
        const RMA_WAR = 1 << 34;
        /// RMA write after RMA write.
        const RMA_WAW = 1 << 35;
        /// Atomic read after atomic read.
        const ATOMIC_RAR = 1 << 36;
        /// Atomic read after atomic write.
        const ATOMIC_RAW = 1 << 37;
        /// Atomic write after atomic read.
        const ATOMIC_WAR = 1 << 38;
        /// Atomic write after atomic write.
        const ATOMIC_WAW = 1 << 39;
    }
    order [
        RAR, RAW, RAS, WAR, WAW, WAS, SAR, SAW, SAS, RMA_RAR, RMA_RAW, RMA_WAR, RMA_WAW,
        ATOMIC_RAR, ATOMIC_RAW, ATOMIC_WAR, ATOMIC_WAW,
    ]
    aliases [ "FI_ORDER_NONE" => NONE ]
}

impl MsgOrder {
    /// `FI_ORDER_NONE`: no ordering guarantee (the empty set).
    pub const NONE: MsgOrder = MsgOrder::empty();
}

c_flags! {
    /// Completion ordering (`comp_order` of tx/rx attributes).
    pub struct CompOrder: u64, prefix "FI_ORDER_" {
        /// Completions are reported in the order operations were submitted
        /// (`FI_ORDER_STRICT`, 0x1FF).
        const STRICT = 0x1FF;
        /// Data is placed in the order operations were submitted (`FI_ORDER_DATA`, bit 16).
        const DATA = 1 << 16;
    }
    order [STRICT, DATA]
    aliases [ "FI_ORDER_NONE" => NONE ]
}

impl CompOrder {
    /// `FI_ORDER_NONE` (0): no completion ordering.
    pub const NONE: CompOrder = CompOrder::empty();
}

c_flags! {
    /// Memory-registration mode bits (`domain_attr.mr_mode`; a C `int`).
    ///
    /// `BASIC` (1) and `SCALABLE` (2) are the values of the pre-1.5 `enum fi_mr_mode`,
    /// kept as bits so API < 1.5 requests can be checked and mapped.
    pub struct MrMode: u32, prefix "FI_MR_" {
        /// Pre-1.5 basic mode (stands for `VIRT_ADDR | ALLOCATED | PROV_KEY`, see
        /// [`MrMode::BASIC_MAP`]).
        const BASIC = 1 << 0;
        /// Pre-1.5 scalable mode (keys chosen by the application, offsets).
        const SCALABLE = 1 << 1;
        /// Local buffers must be registered.
        const LOCAL = 1 << 2;
        /// Remote keys are raw (larger than 64 bits).
        const RAW = 1 << 3;
        /// RMA addresses are virtual addresses, not offsets.
        const VIRT_ADDR = 1 << 4;
        /// Only allocated (backed) memory may be registered.
        const ALLOCATED = 1 << 5;
        /// The provider chooses the keys.
        const PROV_KEY = 1 << 6;
        /// The application must notify the provider of mapping changes.
        const MMU_NOTIFY = 1 << 7;
        /// Regions must be bound to counters/CQs for RMA events.
        const RMA_EVENT = 1 << 8;
        /// Regions must be bound to an endpoint.
        const ENDPOINT = 1 << 9;
        /// Device memory buffers must be registered.
        const HMEM = 1 << 10;
        /// Collective buffers must be registered.
        const COLLECTIVE = 1 << 11;
    }
    order [
        BASIC, SCALABLE, LOCAL, RAW, VIRT_ADDR, ALLOCATED, PROV_KEY, MMU_NOTIFY, RMA_EVENT,
        ENDPOINT, HMEM, COLLECTIVE,
    ]
    aliases [ "FI_MR_UNSPEC" => UNSPEC ]
}

impl MrMode {
    /// `FI_MR_UNSPEC` (0): nothing specified.
    pub const UNSPEC: MrMode = MrMode::empty();
    /// What `BASIC` stands for in 1.5+ bits: `VIRT_ADDR | ALLOCATED | PROV_KEY`.
    pub const BASIC_MAP: MrMode = flag_set!(MrMode: VIRT_ADDR, ALLOCATED, PROV_KEY);
}

c_flags! {
    /// Address-vector flags (`fi_av_attr.flags`, `fi_av_insert` flags).
    pub struct AvFlags: u64, prefix "FI_" {
        /// Open flag: the AV is read-only, opened on a shared AV by name (`FI_READ`,
        /// bit 8).
        const READ = 1 << 8;
        /// Open flag: inserts complete asynchronously and report on the bound EQ
        /// (`FI_EVENT`, bit 24).
        const EVENT = 1 << 24;
        /// Addresses are inserted in the same order on every peer (`FI_UNIVERSE`, bit 57).
        const UNIVERSE = 1 << 57;
        /// Report per-address insertion errors synchronously (bit 58).
        const SYNC_ERR = 1 << 58;
        /// Every process inserts the same addresses in the same order (bit 59).
        const SYMMETRIC = 1 << 59;
    }
    order [READ, EVENT, UNIVERSE, SYNC_ERR, SYMMETRIC]
    aliases []
}

c_flags! {
    /// Flags of `fi_query_atomic` (`fi_atomic.h`; fi_atomic(3), section "Query Atomic
    /// Attributes"): which call family the query is about, and tagged targets. No flag
    /// asks about the base calls (`fi_atomic`); `FETCH_ATOMIC` and `COMPARE_ATOMIC` may
    /// not both be set; `TAGGED` may go alone or with either.
    pub struct AtomicQueryFlags: u64, prefix "FI_" {
        /// The query is about atomics to tagged receive buffers (`FI_TAGGED`, bit 3).
        const TAGGED = Caps::TAGGED.bits();
        /// The query is about the fetch calls (`fi_fetch_atomic`, bit 58).
        const FETCH_ATOMIC = 1 << 58;
        /// The query is about the compare calls (`fi_compare_atomic`, bit 59).
        const COMPARE_ATOMIC = 1 << 59;
    }
    order [TAGGED, FETCH_ATOMIC, COMPARE_ATOMIC]
    aliases []
}

impl AtomicQueryFlags {
    /// `FI_EBADFLAGS` for bits outside [`AtomicQueryFlags::all`] or for `FETCH_ATOMIC`
    /// with `COMPARE_ATOMIC` (fi_atomic(3): they may not both be set); else the flags.
    pub fn validate(raw: u64) -> crate::error::Result<AtomicQueryFlags> {
        use crate::error::{Errno, Error};
        let Some(f) = AtomicQueryFlags::from_bits(raw) else {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!(
                    "fi_query_atomic: unknown flag bits {:#x}",
                    raw & !AtomicQueryFlags::all().bits()
                ),
            ));
        };
        if f.contains(AtomicQueryFlags::FETCH_ATOMIC | AtomicQueryFlags::COMPARE_ATOMIC) {
            return Err(Error::new(
                Errno::EBADFLAGS,
                "fi_query_atomic: FI_FETCH_ATOMIC and FI_COMPARE_ATOMIC may not both be set",
            ));
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every named flag appears exactly once in its table, so `names()` covers `all()`.
    macro_rules! check_table {
        ($t:ty) => {{
            let mut seen = <$t>::empty();
            for (n, f) in <$t>::NAMED.iter().chain(<$t>::UNPRINTED) {
                assert!(n.starts_with("FI_"), "{n}");
                assert!(!f.is_empty(), "{n}");
                assert!(!seen.contains(*f), "duplicate {n}");
                seen |= *f;
                assert_eq!(<$t>::from_name(n), Some(*f), "{n}");
            }
            assert_eq!(seen, <$t>::all(), stringify!($t));
            let all = <$t>::all();
            assert_eq!(<$t>::parse_list(&all.to_string()).unwrap(), all);
        }};
    }

    #[test]
    fn atomic_query_flags() {
        // The values are checked against the installed header by tests/header_values.rs.
        let (f, c, t) = (
            AtomicQueryFlags::FETCH_ATOMIC,
            AtomicQueryFlags::COMPARE_ATOMIC,
            AtomicQueryFlags::TAGGED,
        );
        for ok in [AtomicQueryFlags::empty(), f, c, t, t | f, t | c] {
            assert_eq!(AtomicQueryFlags::validate(ok.bits()).unwrap(), ok);
        }
        let both = AtomicQueryFlags::validate((f | c).bits()).unwrap_err();
        assert_eq!(both.code(), crate::error::Errno::EBADFLAGS);
        assert!(both.to_string().contains("may not both be set"), "{both}");
        let stray = AtomicQueryFlags::validate(f.bits() | 1).unwrap_err();
        assert_eq!(stray.code(), crate::error::Errno::EBADFLAGS);
        assert_eq!(f.to_string(), "FI_FETCH_ATOMIC");
        assert_eq!(
            AtomicQueryFlags::from_name("compare_atomic"),
            Some(AtomicQueryFlags::COMPARE_ATOMIC)
        );
    }

    #[test]
    fn tables_cover_every_flag() {
        check_table!(Caps);
        check_table!(OpFlags);
        check_table!(GetinfoFlags);
        check_table!(Mode);
        check_table!(MsgOrder);
        check_table!(CompOrder);
        check_table!(MrMode);
        check_table!(AvFlags);
        check_table!(AtomicQueryFlags);
    }

    #[test]
    fn c_values() {
        assert_eq!(Caps::MSG.bits(), 2);
        assert_eq!(Caps::HMEM.bits(), 1 << 47);
        assert_eq!(Caps::DIRECTED_RECV.bits(), 1 << 59);
        assert_eq!(Caps::XPU.bits(), 1 << 44);
        assert_eq!(OpFlags::TRANSMIT, OpFlags::SEND);
        assert_eq!(OpFlags::SELECTIVE_COMPLETION.bits(), 1 << 59);
        assert_eq!(OpFlags::DELIVERY_COMPLETE.bits(), 1 << 28);
        assert_eq!(
            GetinfoFlags::ALL.bits(),
            (1 << 35) | (1 << 54) | (1 << 55) | (1 << 57)
        );
        assert_eq!(Mode::CONTEXT.bits(), 1 << 59);
        assert_eq!(CompOrder::STRICT.bits(), 0x1FF);
        assert_eq!(CompOrder::DATA.bits(), 0x10000);
        assert_eq!(MrMode::COLLECTIVE.bits(), 1 << 11);
        assert_eq!(AvFlags::SYNC_ERR.bits(), 1 << 58);
        assert_eq!(AvFlags::READ.bits(), OpFlags::READ.bits());
        assert_eq!(AvFlags::EVENT.bits(), OpFlags::EVENT.bits());
        assert_eq!(AvFlags::EVENT.bits(), 1 << 24);
        assert_eq!(AvFlags::from_name("FI_EVENT"), Some(AvFlags::EVENT));
        assert_eq!(AvFlags::from_name("FI_READ"), Some(AvFlags::READ));
        assert_eq!(
            (AvFlags::EVENT | AvFlags::SYMMETRIC).to_string(),
            "FI_EVENT|FI_SYMMETRIC"
        );
        // Shared bit space: same names, same bits.
        for (n, c) in Caps::NAMED {
            if let Some(o) = OpFlags::from_name(n) {
                assert_eq!(o.bits(), c.bits(), "{n}");
            }
        }
        assert_eq!(Caps::RMA.as_op_flags(), OpFlags::RMA);
        assert_eq!(OpFlags::TAGGED.as_caps(), Caps::TAGGED);
    }

    #[test]
    fn cap_groups() {
        assert!(Caps::PRIMARY
            .intersection(Caps::PRIMARY_MODIFIERS)
            .is_empty());
        assert!(Caps::PRIMARY.intersection(Caps::SECONDARY).is_empty());
        assert!(Caps::SECONDARY
            .intersection(Caps::PRIMARY_MODIFIERS)
            .is_empty());
        assert_eq!(
            Caps::PRIMARY | Caps::PRIMARY_MODIFIERS | Caps::SECONDARY,
            Caps::all()
        );
        assert!(Caps::PRIMARY.contains(Caps::XPU | Caps::PEER | Caps::AV_USER_ID));
        assert!(Caps::SECONDARY.contains(Caps::REMOTE_CQ_DATA | Caps::VARIABLE_MSG));
    }

    #[test]
    fn name_of_one_flag() {
        assert_eq!(Caps::MSG.name(), Some("FI_MSG"));
        assert_eq!(Caps::VARIABLE_MSG.name(), Some("FI_VARIABLE_MSG"));
        assert_eq!(OpFlags::CLAIM.name(), Some("FI_CLAIM"));
        assert_eq!(MsgOrder::RAW.name(), Some("FI_ORDER_RAW"));
        assert_eq!((Caps::MSG | Caps::RMA).name(), None);
        assert_eq!(Caps::empty().name(), None);
    }

    #[test]
    fn names_in_tostr_order() {
        let c = Caps::XPU | Caps::HMEM | Caps::SEND | Caps::MSG | Caps::COLLECTIVE;
        assert_eq!(
            c.names(),
            ["FI_MSG", "FI_COLLECTIVE", "FI_SEND", "FI_HMEM", "FI_XPU"]
        );
        assert_eq!(
            (Caps::PEER | Caps::AV_USER_ID | Caps::DIRECTED_RECV).names(),
            ["FI_DIRECTED_RECV", "FI_AV_USER_ID", "FI_PEER"]
        );
        assert!(Caps::empty().names().is_empty());
        assert_eq!((Caps::VARIABLE_MSG | Caps::MSG).names(), ["FI_MSG"]);
        assert_eq!(
            (Caps::VARIABLE_MSG | Caps::MSG).to_string(),
            "FI_MSG|FI_VARIABLE_MSG"
        );
        assert_eq!(Caps::from_name("variable_msg"), Some(Caps::VARIABLE_MSG));
        assert_eq!(
            (MsgOrder::SAS | MsgOrder::RAR).names(),
            ["FI_ORDER_RAR", "FI_ORDER_SAS"]
        );
        assert_eq!(CompOrder::STRICT.names(), ["FI_ORDER_STRICT"]);
        assert_eq!(
            (MrMode::LOCAL | MrMode::BASIC).names(),
            ["FI_MR_BASIC", "FI_MR_LOCAL"]
        );
        assert_eq!(OpFlags::SELECTIVE_COMPLETION.names(), ["FI_CLAIM"]);
        // Unnamed bits are skipped by names() but shown by Display.
        let odd = Caps::MSG | Caps::from_bits_retain(1 << 0);
        assert_eq!(odd.names(), ["FI_MSG"]);
        assert_eq!(odd.to_string(), "FI_MSG|0x1");
    }

    #[test]
    fn operators_are_the_set_operations() {
        let (a, b) = (Caps::MSG | Caps::RMA, Caps::RMA | Caps::TAGGED);
        assert_eq!(a | b, Caps::MSG | Caps::RMA | Caps::TAGGED);
        assert_eq!(a & b, Caps::RMA);
        assert_eq!(a ^ b, Caps::MSG | Caps::TAGGED);
        assert_eq!(a - b, Caps::MSG);
        for (op, want) in [("|=", a | b), ("&=", a & b), ("^=", a ^ b), ("-=", a - b)] {
            let mut x = a;
            match op {
                "|=" => x |= b,
                "&=" => x &= b,
                "^=" => x ^= b,
                _ => x -= b,
            }
            assert_eq!(x, want, "{op}");
        }
    }

    #[test]
    fn from_name_forms() {
        assert_eq!(Caps::from_name("FI_MSG"), Some(Caps::MSG));
        assert_eq!(Caps::from_name("fi_msg"), Some(Caps::MSG));
        assert_eq!(Caps::from_name("msg"), Some(Caps::MSG));
        assert_eq!(Caps::from_name(" Remote_Read "), Some(Caps::REMOTE_READ));
        assert_eq!(Caps::from_name("FI_ATOMICS"), Some(Caps::ATOMIC));
        assert_eq!(Caps::from_name("atomics"), Some(Caps::ATOMIC));
        assert_eq!(Caps::from_name("FI_XPU_TRIGGER"), Some(Caps::XPU));
        assert_eq!(Caps::from_name("FI_MORE"), None);
        assert_eq!(Caps::from_name(""), None);
        assert_eq!(Caps::from_name("FI_"), None);
        assert_eq!(OpFlags::from_name("FI_TRANSMIT"), Some(OpFlags::SEND));
        assert_eq!(
            OpFlags::from_name("selective_completion"),
            Some(OpFlags::CLAIM)
        );
        assert_eq!(MsgOrder::from_name("FI_ORDER_RAW"), Some(MsgOrder::RAW));
        assert_eq!(MsgOrder::from_name("order_raw"), Some(MsgOrder::RAW));
        assert_eq!(MsgOrder::from_name("raw"), Some(MsgOrder::RAW));
        assert_eq!(MsgOrder::from_name("FI_ORDER_NONE"), Some(MsgOrder::NONE));
        assert_eq!(CompOrder::from_name("none"), Some(CompOrder::NONE));
        assert_eq!(MrMode::from_name("virt_addr"), Some(MrMode::VIRT_ADDR));
        assert_eq!(MrMode::from_name("FI_MR_PROV_KEY"), Some(MrMode::PROV_KEY));
        assert_eq!(
            GetinfoFlags::from_name("numerichost"),
            Some(GetinfoFlags::NUMERICHOST)
        );
        assert_eq!(Mode::from_name("FI_CONTEXT2"), Some(Mode::CONTEXT2));
        assert_eq!(AvFlags::from_name("fi_symmetric"), Some(AvFlags::SYMMETRIC));
    }

    #[test]
    fn parse_list_ok() {
        assert_eq!(
            Caps::parse_list("FI_MSG|FI_RMA").unwrap(),
            Caps::MSG | Caps::RMA
        );
        assert_eq!(
            Caps::parse_list(" fi_msg | tagged ").unwrap(),
            Caps::MSG | Caps::TAGGED
        );
        assert_eq!(Caps::parse_list("").unwrap(), Caps::empty());
        assert_eq!(Caps::parse_list("0").unwrap(), Caps::empty());
        assert_eq!(Caps::parse_list("FI_MSG|0x1").unwrap().bits(), 3);
        assert_eq!("FI_HMEM".parse::<Caps>().unwrap(), Caps::HMEM);
        assert_eq!(
            MrMode::parse_list("3").unwrap(),
            MrMode::BASIC | MrMode::SCALABLE
        );
    }

    #[test]
    fn parse_list_errors() {
        let e = Caps::parse_list("FI_MSG|FI_BOGUS").unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.to_string().contains("FI_BOGUS"), "{e}");
        let e = Caps::parse_list("FI_MSG||FI_RMA").unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.to_string().contains("empty"), "{e}");
        let e = MrMode::parse_list("0x100000000").unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert_eq!(Caps::parse_list("0x").unwrap_err().code(), Errno::EINVAL);
        assert_eq!(
            Caps::parse_list("0x1ffffffffffffffff").unwrap_err().code(),
            Errno::EINVAL
        );
    }

    #[test]
    fn display_round_trip() {
        assert_eq!(Caps::empty().to_string(), "0");
        assert_eq!((Caps::MSG | Caps::RMA).to_string(), "FI_MSG|FI_RMA");
        assert_eq!(CompOrder::NONE.to_string(), "0");
        for bits in [
            0u64,
            1,
            0x1FF,
            0xFFFF_FFFF_FFFF_FFFF,
            1 << 63,
            0x0A0B_0C0D_0E0F_0102,
        ] {
            let c = Caps::from_bits_retain(bits);
            assert_eq!(c.to_string().parse::<Caps>().unwrap(), c, "{bits:#x}");
            let o = OpFlags::from_bits_retain(bits);
            assert_eq!(o.to_string().parse::<OpFlags>().unwrap(), o, "{bits:#x}");
            let m = MsgOrder::from_bits_retain(bits);
            assert_eq!(m.to_string().parse::<MsgOrder>().unwrap(), m, "{bits:#x}");
        }
    }
}
