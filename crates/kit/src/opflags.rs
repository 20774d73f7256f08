//! Which operation flags a data call takes, checked once for every kit-built provider.
//!
//! A `*msg` call (`fi_sendmsg`, `fi_trecvmsg`, `fi_writemsg`, `fi_atomicmsg` …) and the
//! endpoint's default `op_flags` (`fi_tx_attr` / `fi_rx_attr`, `FI_SETOPSFLAG`, an
//! alias's flags) carry operation flags. A flag the call does not define, or one the
//! provider does not implement, is refused with `FI_EBADFLAGS` (fi_getinfo(3): "the
//! specified … operation flags are invalid") rather than silently dropped.
//!
//! What each call family defines ([`defined`]):
//!
//! | family | flags |
//! | --- | --- |
//! | send (msg) | `FI_COMPLETION`, `FI_MORE`, `FI_TRIGGER`, `FI_INJECT`, `FI_REMOTE_CQ_DATA`, `FI_MULTICAST`, `FI_FENCE`, `FI_INJECT_COMPLETE`, `FI_TRANSMIT_COMPLETE`, `FI_DELIVERY_COMPLETE`, `FI_COMMIT_COMPLETE` |
//! | send (tagged) | the above and `FI_MATCH_COMPLETE` |
//! | receive (msg) | `FI_COMPLETION`, `FI_MORE`, `FI_MULTI_RECV` |
//! | receive (tagged) | `FI_COMPLETION`, `FI_MORE`, `FI_PEEK`, `FI_CLAIM`, `FI_DISCARD` |
//! | RMA write | as a message send, without `FI_MULTICAST` |
//! | RMA read | `FI_COMPLETION`, `FI_MORE`, `FI_TRIGGER`, `FI_FENCE` and the completion levels |
//! | base atomic | `FI_COMPLETION`, `FI_MORE`, `FI_TRIGGER`, `FI_INJECT`, `FI_FENCE`, the completion levels |
//! | fetch / compare atomic | as a base atomic without `FI_INJECT` |
//!
//! What a provider implements is its own set ([`PROVIDER_DEFAULT`] unless it says
//! otherwise: every defined flag but `FI_FENCE`, `FI_COMMIT_COMPLETE`, `FI_TRIGGER` and
//! `FI_MULTICAST`, which need work of their own). `FI_MORE` is a hint: every provider accepts it, whatever its
//! set.
//!
//! `FI_COMMIT_COMPLETE` asks that the result be persistent at the target before the
//! completion. No kit-built provider registers persistent memory (none claims
//! `FI_RMA_PMEM`), so a provider that adds the flag to its set honours it as delivery
//! complete, the flush being empty (docs/API.md, "FI_COMMIT_COMPLETE"). The flags
//! reach the provider with `FI_DELIVERY_COMPLETE` added ([`with_implied`]: the
//! defaults when they are set, a `*msg` call's flags once checked), so its data path
//! tests one bit, as before, and an ordinary send pays nothing for the level.
//!
//! [`DefaultOpFlags`] holds an endpoint's (or alias's) two default sets and answers
//! `FI_GETOPSFLAG` / `FI_SETOPSFLAG` ([`DefaultOpFlags::control`]); a socket
//! endpoint's `FI_GETWAIT` is [`getwait_control`].
//!
//! Nothing here panics.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use ofi_core::abi::ops::{OpFamily, OpKind};
use ofi_core::control::{ops_side, GETOPSFLAG, SETOPSFLAG};
use ofi_core::{Errno, Error, OpFlags, Result};

/// An endpoint's default operation flags, transmit and receive: what the data calls
/// without flags use, changed by `FI_SETOPSFLAG` at any time (each call reads them
/// once, with a relaxed load: the C API asks `fi_control` to be serialized against the
/// endpoint's other calls).
///
/// The transmit set is kept twice: as named (what `FI_GETOPSFLAG` answers) and with
/// what it implies ([`with_implied`], what the data calls read).
#[derive(Debug, Default)]
pub struct DefaultOpFlags {
    tx: AtomicU64,
    tx_named: AtomicU64,
    rx: AtomicU64,
}

impl DefaultOpFlags {
    /// The sets from the endpoint's attributes (`fi_tx_attr.op_flags`,
    /// `fi_rx_attr.op_flags`), taken as they are (getinfo checked them).
    pub fn new(tx: OpFlags, rx: OpFlags) -> Self {
        DefaultOpFlags {
            tx: AtomicU64::new(with_implied(tx).bits()),
            tx_named: AtomicU64::new(tx.bits()),
            rx: AtomicU64::new(rx.bits()),
        }
    }

    /// The sets of an endpoint opened with these attribute flags, checked
    /// ([`check_defaults`]: a flag the side does not take or the provider does not
    /// implement is refused, never dropped).
    ///
    /// # Errors
    /// `FI_EBADFLAGS` naming the refused flags.
    pub fn from_attrs(prov: &str, tx: OpFlags, rx: OpFlags, supported: OpFlags) -> Result<Self> {
        check_defaults(prov, true, tx, supported)?;
        check_defaults(prov, false, rx, supported)?;
        Ok(DefaultOpFlags::new(tx, rx))
    }

    /// The sets of an endpoint of data path `D` opened with `info`: its attributes'
    /// flags, the transmit set's completion level the one [`default_tx`] picks, checked
    /// against what `D` implements ([`DataPath::OP_FLAGS`](crate::dataops::DataPath::OP_FLAGS))
    /// as [`from_attrs`](Self::from_attrs) checks them.
    ///
    /// # Errors
    /// `FI_EBADFLAGS` naming the refused flags.
    pub fn of_endpoint<D: crate::dataops::DataPath>(info: &ofi_core::attr::Info) -> Result<Self> {
        DefaultOpFlags::from_attrs(
            D::NAME,
            default_tx(info.tx_attr.op_flags),
            info.rx_attr.op_flags,
            D::OP_FLAGS,
        )
    }

    /// A copy (an alias starts with its endpoint's flags).
    pub fn snapshot(&self) -> Self {
        DefaultOpFlags::new(self.tx_named(), self.rx())
    }

    /// The transmit set the data calls use: as named, with what it implies
    /// ([`with_implied`]).
    #[inline(always)]
    pub fn tx(&self) -> OpFlags {
        OpFlags::from_bits_retain(self.tx.load(Ordering::Relaxed))
    }

    /// The transmit set as named (attributes, `FI_SETOPSFLAG`, an alias).
    pub fn tx_named(&self) -> OpFlags {
        OpFlags::from_bits_retain(self.tx_named.load(Ordering::Relaxed))
    }

    /// The receive set.
    #[inline(always)]
    pub fn rx(&self) -> OpFlags {
        OpFlags::from_bits_retain(self.rx.load(Ordering::Relaxed))
    }

    /// Set one side from an argument naming it (`FI_TRANSMIT` or `FI_RECV` with the
    /// flags OR'ed in: `FI_SETOPSFLAG`, `fi_ep_alias`).
    ///
    /// # Errors
    /// `FI_EINVAL` when `arg` names both sides or neither; `FI_EBADFLAGS` for a flag
    /// the side does not take or the provider does not implement ([`check_defaults`]).
    pub fn set(&self, prov: &str, arg: u64, supported: OpFlags) -> Result<()> {
        let (transmit, flags) = ops_side(arg).map_err(|e| e.context(prov))?;
        check_defaults(prov, transmit, flags, supported)?;
        if transmit {
            self.tx_named.store(flags.bits(), Ordering::Relaxed);
            self.tx.store(with_implied(flags).bits(), Ordering::Relaxed);
        } else {
            self.rx.store(flags.bits(), Ordering::Relaxed);
        }
        Ok(())
    }

    /// The set of the side `arg` names (`FI_GETOPSFLAG`).
    ///
    /// # Errors
    /// `FI_EINVAL` when `arg` names both sides or neither.
    pub fn get(&self, prov: &str, arg: u64) -> Result<OpFlags> {
        let (transmit, _) = ops_side(arg).map_err(|e| e.context(prov))?;
        Ok(if transmit { self.tx_named() } else { self.rx() })
    }

    /// The flags of a new alias (`fi_ep_alias`): a copy of these, then the side `arg`
    /// names set from it.
    ///
    /// # Errors
    /// As [`set`](Self::set).
    pub fn alias(&self, prov: &str, arg: u64, supported: OpFlags) -> Result<Self> {
        let a = self.snapshot();
        a.set(prov, arg, supported)?;
        Ok(a)
    }

    /// An endpoint's whole `fi_control` when these two commands are all it answers:
    /// [`control`](Self::control), and `FI_ENOSYS` for every other command.
    ///
    /// # Safety
    /// As [`control`](Self::control).
    pub unsafe fn endpoint_control(
        &self,
        prov: &str,
        command: i32,
        arg: *mut c_void,
        supported: OpFlags,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.control(prov, command, arg, supported) }.unwrap_or_else(|| {
            Err(Error::new(
                Errno::ENOSYS,
                format!("{prov}: fi_control command {command} not supported"),
            ))
        })
    }

    /// `fi_control` of an endpoint for `FI_GETOPSFLAG` and `FI_SETOPSFLAG`; `None` for
    /// any other command (`arg` untouched), for the provider to answer.
    ///
    /// # Safety
    /// For those two commands `arg` is null or valid for reads and writes of a `u64`
    /// (the C API's `uint64_t *flags`) for the duration of the call.
    pub unsafe fn control(
        &self,
        prov: &str,
        command: i32,
        arg: *mut c_void,
        supported: OpFlags,
    ) -> Option<Result<()>> {
        if command != GETOPSFLAG && command != SETOPSFLAG {
            return None;
        }
        let p = arg.cast::<u64>();
        if p.is_null() {
            return Some(Err(Error::new(
                Errno::EINVAL,
                format!("{prov}: fi_control: null flags argument"),
            )));
        }
        // SAFETY: not null; the caller's contract: valid for a read of a u64. Read
        // unaligned: a C caller's `uint64_t` is aligned, but nothing here relies on it.
        let v = unsafe { p.read_unaligned() };
        Some(if command == GETOPSFLAG {
            self.get(prov, v).map(|f| {
                // SAFETY: as above, valid for a write.
                unsafe { p.write_unaligned(f.bits()) }
            })
        } else {
            self.set(prov, v, supported)
        })
    }
}

/// The completion levels a transmit operation may ask for.
pub const COMPLETION_LEVELS: OpFlags = OpFlags::INJECT_COMPLETE
    .union(OpFlags::TRANSMIT_COMPLETE)
    .union(OpFlags::DELIVERY_COMPLETE);

/// The completion levels that complete only once the target has placed the data
/// (`FI_DELIVERY_COMPLETE`, and `FI_COMMIT_COMPLETE`, delivery complete plus the
/// flush to persistence that memory without `FI_RMA_PMEM` does not need).
pub const TARGET_LEVELS: OpFlags = OpFlags::DELIVERY_COMPLETE.union(OpFlags::COMMIT_COMPLETE);

/// `flags` with what they imply for a kit-built provider's data path: with
/// `FI_COMMIT_COMPLETE`, `FI_DELIVERY_COMPLETE` too (the provider waits for the
/// target's acknowledgement; see the [module docs](self)).
#[inline(always)]
pub const fn with_implied(flags: OpFlags) -> OpFlags {
    if flags.contains(OpFlags::COMMIT_COMPLETE) {
        flags.union(OpFlags::DELIVERY_COMPLETE)
    } else {
        flags
    }
}

/// What every transmit operation (send, RMA, atomic) defines.
const TX_COMMON: OpFlags = OpFlags::COMPLETION
    .union(OpFlags::MORE)
    .union(OpFlags::FENCE)
    .union(COMPLETION_LEVELS);

/// What every transmit `*msg` call defines beyond [`TX_COMMON`]: `FI_TRIGGER`
/// (fi_trigger(3)), never a default flag. All an RMA read and a fetching or compare
/// atomic define.
const TX_CALL: OpFlags = TX_COMMON.union(OpFlags::TRIGGER);

/// What `fi_writemsg` defines.
const WRITE_CALL: OpFlags = TX_CALL
    .union(OpFlags::INJECT)
    .union(OpFlags::REMOTE_CQ_DATA)
    .union(OpFlags::COMMIT_COMPLETE);

/// What `fi_sendmsg` defines: an RMA write's flags and `FI_MULTICAST`.
const SEND_CALL: OpFlags = WRITE_CALL.union(OpFlags::MULTICAST);

/// What `fi_tsendmsg` defines: a message send's flags and `FI_MATCH_COMPLETE`.
const TSEND_CALL: OpFlags = SEND_CALL.union(OpFlags::MATCH_COMPLETE);

/// What `fi_atomicmsg` defines.
const ATOMIC_CALL: OpFlags = TX_CALL.union(OpFlags::INJECT);

/// What every receive defines.
const RECV_COMMON: OpFlags = OpFlags::COMPLETION.union(OpFlags::MORE);

/// What `fi_recvmsg` defines.
const RECV_CALL: OpFlags = RECV_COMMON.union(OpFlags::MULTI_RECV);

/// What `fi_trecvmsg` defines.
const TRECV_CALL: OpFlags = RECV_COMMON
    .union(OpFlags::PEEK)
    .union(OpFlags::CLAIM)
    .union(OpFlags::DISCARD);

/// Every flag some call defines: a tagged send's and both receives' (the other calls
/// define subsets of a tagged send's).
const EVERY_DEFINED: OpFlags = TSEND_CALL.union(RECV_CALL).union(TRECV_CALL);

/// The defined flags a provider implements only by declaring them: each needs work of
/// its own.
const OWN_WORK: OpFlags = OpFlags::FENCE
    .union(OpFlags::COMMIT_COMPLETE)
    .union(OpFlags::TRIGGER)
    .union(OpFlags::MULTICAST);

/// The flags a provider implements unless it declares its own set: every flag some
/// call defines, except `FI_FENCE`, `FI_COMMIT_COMPLETE`, `FI_TRIGGER` and
/// `FI_MULTICAST`.
pub const PROVIDER_DEFAULT: OpFlags = EVERY_DEFINED.difference(OWN_WORK);

/// The transmit flags that belong to one operation and so are never a default: the
/// fence it asks for, its trigger, its remote CQ data, its multicast destination.
const PER_OPERATION: OpFlags = OpFlags::FENCE
    .union(OpFlags::TRIGGER)
    .union(OpFlags::REMOTE_CQ_DATA)
    .union(OpFlags::MULTICAST);

/// Every flag a transmit context's default `op_flags` may hold (`fi_tx_attr`,
/// `FI_SETOPSFLAG` with `FI_TRANSMIT`): what the transmit calls without flags use. It
/// is what a tagged send defines but the flags that belong to one operation (its
/// fence, trigger, remote CQ data and multicast destination): `FI_FENCE`, for one,
/// belongs to one `*msg` call.
pub const TX_DEFAULTS: OpFlags = TSEND_CALL.difference(PER_OPERATION);

/// Every flag a receive context's default `op_flags` may hold (`fi_rx_attr`,
/// `FI_SETOPSFLAG` with `FI_RECV`): what `fi_recvmsg` defines (a tagged receive's
/// `FI_PEEK`, `FI_CLAIM` and `FI_DISCARD` act on one operation).
pub const RX_DEFAULTS: OpFlags = RECV_CALL;

/// Inside `impl EndpointOps<F> for E`, where `E` implements
/// [`DataPath`](crate::dataops::DataPath) and keeps its [`DefaultOpFlags`] in field
/// `$field`: `fi_control` answering `FI_GETOPSFLAG` / `FI_SETOPSFLAG` with the data
/// path's `NAME` and `OP_FLAGS` ([`DefaultOpFlags::endpoint_control`]), `FI_ENOSYS` for
/// the other commands.
#[macro_export]
macro_rules! op_flags_control {
    ($field:ident) => {
        /// `FI_GETOPSFLAG` / `FI_SETOPSFLAG` of this handle's default flags.
        unsafe fn control(
            &self,
            command: i32,
            arg: *mut ::std::ffi::c_void,
        ) -> $crate::core::Result<()> {
            // SAFETY: the caller's contract for `arg`, forwarded.
            unsafe {
                self.$field.endpoint_control(
                    <Self as $crate::dataops::DataPath>::NAME,
                    command,
                    arg,
                    <Self as $crate::dataops::DataPath>::OP_FLAGS,
                )
            }
        }
    };
}

/// The default flags of the transmit calls without flags, from `tx_attr.op_flags`: a
/// getinfo result without hints carries every completion level the provider
/// supports; the weakest named one is the default then, so `FI_DELIVERY_COMPLETE`
/// applies only when no weaker level (`FI_INJECT_COMPLETE`, `FI_TRANSMIT_COMPLETE`) is
/// named with it, and `FI_COMMIT_COMPLETE` only when it is the one level named.
pub const fn default_tx(f: OpFlags) -> OpFlags {
    if f.intersects(OpFlags::INJECT_COMPLETE.union(OpFlags::TRANSMIT_COMPLETE)) {
        f.difference(TARGET_LEVELS)
    } else if f.contains(OpFlags::DELIVERY_COMPLETE) {
        f.difference(OpFlags::COMMIT_COMPLETE)
    } else {
        f
    }
}

/// The flags a call of `kind` defines (see the [module docs](self)).
pub const fn defined(kind: OpKind) -> OpFlags {
    match kind.family {
        OpFamily::Send if kind.tagged => TSEND_CALL,
        OpFamily::Send => SEND_CALL,
        OpFamily::Recv if kind.tagged => TRECV_CALL,
        OpFamily::Recv => RECV_CALL,
        OpFamily::Write => WRITE_CALL,
        OpFamily::Atomic => ATOMIC_CALL,
        OpFamily::Read | OpFamily::Fetch | OpFamily::Compare => TX_CALL,
    }
}

/// The name of a call family, for messages.
const fn family_name(kind: OpKind) -> &'static str {
    match (kind.family, kind.tagged) {
        (OpFamily::Send, false) => "fi_sendmsg",
        (OpFamily::Send, true) => "fi_tsendmsg",
        (OpFamily::Recv, false) => "fi_recvmsg",
        (OpFamily::Recv, true) => "fi_trecvmsg",
        (OpFamily::Read, _) => "fi_readmsg",
        (OpFamily::Write, _) => "fi_writemsg",
        (OpFamily::Atomic, _) => "fi_atomicmsg",
        (OpFamily::Fetch, _) => "fi_fetch_atomicmsg",
        (OpFamily::Compare, _) => "fi_compare_atomicmsg",
    }
}

/// Check the flags of a `*msg` call of `kind` against what the call defines and what
/// the provider `prov` implements (`supported`; `FI_MORE` always passes).
///
/// # Errors
/// `FI_EBADFLAGS` naming the refused flags: a flag the call does not define, or one
/// the provider does not implement.
#[inline(always)]
pub fn check_call(prov: &str, kind: OpKind, flags: OpFlags, supported: OpFlags) -> Result<()> {
    let allowed = defined(kind).intersection(supported.union(OpFlags::MORE));
    let bad = flags.difference(allowed);
    if bad.is_empty() {
        return Ok(());
    }
    Err(refused(prov, family_name(kind), bad, defined(kind)))
}

/// Check default operation flags for one side (`FI_TRANSMIT` or `FI_RECV`): what
/// `fi_tx_attr.op_flags` / `fi_rx_attr.op_flags`, `FI_SETOPSFLAG` and `fi_ep_alias` may
/// set.
///
/// # Errors
/// `FI_EBADFLAGS` naming the refused flags.
pub fn check_defaults(
    prov: &str,
    transmit: bool,
    flags: OpFlags,
    supported: OpFlags,
) -> Result<()> {
    let side = if transmit { TX_DEFAULTS } else { RX_DEFAULTS };
    let allowed = side.intersection(supported.union(OpFlags::MORE));
    let bad = flags.difference(allowed);
    if bad.is_empty() {
        return Ok(());
    }
    let what = if transmit {
        "transmit op_flags"
    } else {
        "receive op_flags"
    };
    Err(refused(prov, what, bad, side))
}

fn refused(prov: &str, what: &str, bad: OpFlags, defined: OpFlags) -> Error {
    let why = if bad.intersects(defined) {
        "not supported by this provider"
    } else {
        "not defined for this call"
    };
    Error::new(Errno::EBADFLAGS, format!("{prov}: {what}: {bad} {why}"))
}

/// `fi_control(FI_GETWAIT)` of a socket endpoint: the descriptor `fd` gives, written
/// into `arg` (the C API's `int *`); `None` for any other command (`arg` untouched), for
/// the provider to answer. A null `arg` is `FI_EINVAL` naming `prov`; `fd`'s error (an
/// endpoint without a socket yet, say) is returned as it is, `arg` untouched.
///
/// # Safety
/// For `FI_GETWAIT`, `arg` is null or valid for a write of an `int` for the duration
/// of the call.
pub unsafe fn getwait_control(
    prov: &str,
    command: i32,
    arg: *mut c_void,
    fd: impl FnOnce() -> Result<i32>,
) -> Option<Result<()>> {
    if command != ofi_core::control::GETWAIT {
        return None;
    }
    let p = arg.cast::<std::ffi::c_int>();
    if p.is_null() {
        return Some(Err(Error::new(
            Errno::EINVAL,
            format!("{prov}: fi_control(FI_GETWAIT): null argument"),
        )));
    }
    Some(fd().map(|fd| {
        // SAFETY: not null; the caller's contract: valid for a write of an `int`
        // (written unaligned: nothing here relies on the C caller's alignment).
        unsafe { p.write_unaligned(fd) }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(family: OpFamily, tagged: bool) -> OpKind {
        OpKind {
            family,
            tagged,
            data: false,
            inject: false,
            msg: true,
        }
    }

    #[test]
    fn derived_sets_hold_the_documented_flags() {
        let levels = COMPLETION_LEVELS;
        let base = OpFlags::COMPLETION | OpFlags::MORE;
        assert_eq!(
            PROVIDER_DEFAULT,
            base | levels
                | OpFlags::INJECT
                | OpFlags::REMOTE_CQ_DATA
                | OpFlags::MATCH_COMPLETE
                | OpFlags::MULTI_RECV
                | OpFlags::PEEK
                | OpFlags::CLAIM
                | OpFlags::DISCARD
        );
        let tx = base | levels | OpFlags::INJECT | OpFlags::COMMIT_COMPLETE;
        assert_eq!(TX_DEFAULTS, tx | OpFlags::MATCH_COMPLETE);
        assert_eq!(RX_DEFAULTS, base | OpFlags::MULTI_RECV);
        let write = base | levels | OpFlags::FENCE | OpFlags::TRIGGER | OpFlags::INJECT;
        let write = write | OpFlags::REMOTE_CQ_DATA | OpFlags::COMMIT_COMPLETE;
        assert_eq!(defined(kind(OpFamily::Write, false)), write);
        let send = write | OpFlags::MULTICAST;
        assert_eq!(defined(kind(OpFamily::Send, false)), send);
        let tsend = send | OpFlags::MATCH_COMPLETE;
        assert_eq!(defined(kind(OpFamily::Send, true)), tsend);
    }

    #[test]
    fn more_passes_everywhere() {
        for fam in [
            OpFamily::Send,
            OpFamily::Recv,
            OpFamily::Read,
            OpFamily::Write,
            OpFamily::Atomic,
            OpFamily::Fetch,
            OpFamily::Compare,
        ] {
            for tagged in [false, true] {
                check_call("p", kind(fam, tagged), OpFlags::MORE, OpFlags::empty()).unwrap();
            }
        }
        check_defaults("p", true, OpFlags::MORE, OpFlags::empty()).unwrap();
    }

    #[test]
    fn fence_needs_the_provider() {
        let k = kind(OpFamily::Read, false);
        let e = check_call("p", k, OpFlags::FENCE, PROVIDER_DEFAULT).unwrap_err();
        assert_eq!(e.code(), Errno::EBADFLAGS);
        assert!(e.to_string().contains("FI_FENCE"), "{e}");
        assert!(e.to_string().contains("not supported"), "{e}");
        check_call("p", k, OpFlags::FENCE, PROVIDER_DEFAULT | OpFlags::FENCE).unwrap();
    }

    #[test]
    fn undefined_flags_are_refused() {
        let cases = [
            (kind(OpFamily::Recv, false), OpFlags::PEEK),
            (kind(OpFamily::Recv, true), OpFlags::MULTI_RECV),
            (kind(OpFamily::Send, false), OpFlags::MULTI_RECV),
            (kind(OpFamily::Send, false), OpFlags::MATCH_COMPLETE),
            (kind(OpFamily::Fetch, false), OpFlags::INJECT),
            (kind(OpFamily::Read, false), OpFlags::REMOTE_CQ_DATA),
            (
                kind(OpFamily::Write, false),
                OpFlags::from_bits_retain(1 << 40),
            ),
            (kind(OpFamily::Atomic, false), OpFlags::SEND),
        ];
        for (k, f) in cases {
            let e = check_call("p", k, f, OpFlags::all()).unwrap_err();
            assert_eq!(e.code(), Errno::EBADFLAGS, "{k:?} {f}");
            assert!(e.to_string().contains("not defined"), "{e}");
        }
    }

    #[test]
    fn defined_flags_pass() {
        let send = OpFlags::COMPLETION | OpFlags::REMOTE_CQ_DATA | OpFlags::DELIVERY_COMPLETE;
        check_call("p", kind(OpFamily::Send, false), send, PROVIDER_DEFAULT).unwrap();
        let trecv = OpFlags::PEEK | OpFlags::CLAIM | OpFlags::DISCARD;
        check_call("p", kind(OpFamily::Recv, true), trecv, PROVIDER_DEFAULT).unwrap();
        let e = check_call(
            "p",
            kind(OpFamily::Write, false),
            OpFlags::COMMIT_COMPLETE,
            PROVIDER_DEFAULT,
        )
        .unwrap_err();
        assert_eq!(e.code(), Errno::EBADFLAGS);
    }

    #[test]
    fn delivery_complete_is_a_default_only_when_alone() {
        let all = OpFlags::COMPLETION
            | OpFlags::INJECT_COMPLETE
            | OpFlags::TRANSMIT_COMPLETE
            | OpFlags::DELIVERY_COMPLETE;
        assert!(!default_tx(all).contains(OpFlags::DELIVERY_COMPLETE));
        let dc = OpFlags::COMPLETION | OpFlags::DELIVERY_COMPLETE;
        assert_eq!(default_tx(dc), dc);
        assert_eq!(default_tx(dc | OpFlags::COMMIT_COMPLETE), dc);
        let commit = OpFlags::COMPLETION | OpFlags::COMMIT_COMPLETE;
        assert_eq!(default_tx(commit), commit);
        assert!(!default_tx(all | OpFlags::COMMIT_COMPLETE).intersects(TARGET_LEVELS));
    }

    #[test]
    fn commit_complete_is_defined_on_sends_and_writes_only() {
        for fam in [OpFamily::Send, OpFamily::Write] {
            let k = kind(fam, fam == OpFamily::Send);
            check_call("p", k, OpFlags::COMMIT_COMPLETE, OpFlags::COMMIT_COMPLETE).unwrap();
        }
        for fam in [OpFamily::Read, OpFamily::Atomic, OpFamily::Recv] {
            let e = check_call(
                "p",
                kind(fam, false),
                OpFlags::COMMIT_COMPLETE,
                OpFlags::all(),
            )
            .unwrap_err();
            assert!(e.to_string().contains("not defined"), "{fam:?}: {e}");
        }
        let commit = OpFlags::COMMIT_COMPLETE | OpFlags::COMPLETION;
        assert_eq!(with_implied(commit), commit | OpFlags::DELIVERY_COMPLETE);
        assert_eq!(with_implied(OpFlags::INJECT), OpFlags::INJECT);
        // The defaults: the data path reads the implied set, FI_GETOPSFLAG the named one.
        let d = DefaultOpFlags::new(commit, OpFlags::empty());
        assert_eq!(d.tx(), commit | OpFlags::DELIVERY_COMPLETE);
        assert_eq!(d.tx_named(), commit);
        let supported = PROVIDER_DEFAULT | OpFlags::COMMIT_COMPLETE;
        assert_eq!(d.get("p", OpFlags::TRANSMIT.bits()).unwrap(), commit);
        assert_eq!(d.snapshot().tx(), d.tx());
        d.set(
            "p",
            (OpFlags::TRANSMIT | OpFlags::COMPLETION).bits(),
            supported,
        )
        .unwrap();
        assert_eq!(d.tx(), OpFlags::COMPLETION);
        let set = OpFlags::TRANSMIT | commit;
        d.set("p", set.bits(), supported).unwrap();
        assert_eq!((d.tx(), d.tx_named()), (with_implied(commit), commit));
    }

    #[test]
    fn attrs_are_checked() {
        let ok = DefaultOpFlags::from_attrs(
            "p",
            OpFlags::COMPLETION | OpFlags::INJECT,
            OpFlags::MULTI_RECV,
            PROVIDER_DEFAULT,
        )
        .unwrap();
        assert_eq!(ok.tx(), OpFlags::COMPLETION | OpFlags::INJECT);
        assert_eq!(ok.rx(), OpFlags::MULTI_RECV);
        for (tx, rx) in [
            (OpFlags::MULTI_RECV, OpFlags::empty()),
            (OpFlags::empty(), OpFlags::DELIVERY_COMPLETE),
            (OpFlags::COMMIT_COMPLETE, OpFlags::empty()),
        ] {
            let e = DefaultOpFlags::from_attrs("p", tx, rx, PROVIDER_DEFAULT).unwrap_err();
            assert_eq!(e.code(), Errno::EBADFLAGS, "{tx} / {rx}");
        }
    }

    #[test]
    fn defaults_per_side() {
        check_defaults("p", true, OpFlags::DELIVERY_COMPLETE, PROVIDER_DEFAULT).unwrap();
        check_defaults("p", false, OpFlags::MULTI_RECV, PROVIDER_DEFAULT).unwrap();
        let e = check_defaults("p", false, OpFlags::INJECT, PROVIDER_DEFAULT).unwrap_err();
        assert_eq!(e.code(), Errno::EBADFLAGS);
        let e = check_defaults("p", true, OpFlags::MULTI_RECV, PROVIDER_DEFAULT).unwrap_err();
        assert_eq!(e.code(), Errno::EBADFLAGS);
        // A fence belongs to one operation, never to the defaults.
        let e = check_defaults("p", true, OpFlags::FENCE, OpFlags::all()).unwrap_err();
        assert_eq!(e.code(), Errno::EBADFLAGS);
    }

    #[test]
    fn getwait_control_writes_the_fd_and_refuses_a_null_argument() {
        let mut fd: i32 = -1;
        let arg = (&mut fd as *mut i32).cast::<c_void>();
        // SAFETY: `arg` points to a live `int`.
        let r = unsafe { getwait_control("p", GETOPSFLAG, arg, || Ok(7)) };
        assert!(r.is_none(), "another command is the provider's");
        // SAFETY: as above.
        unsafe { getwait_control("p", ofi_core::control::GETWAIT, arg, || Ok(7)) }
            .unwrap()
            .unwrap();
        assert_eq!(fd, 7);
        // SAFETY: as above.
        let e = unsafe {
            getwait_control("p", ofi_core::control::GETWAIT, arg, || {
                Err(Error::new(Errno::EOPBADSTATE, "no socket"))
            })
        }
        .unwrap()
        .unwrap_err();
        assert_eq!(e.code(), Errno::EOPBADSTATE);
        assert_eq!(fd, 7, "untouched on failure");
        // SAFETY: a null argument is refused before any write.
        let e = unsafe {
            getwait_control(
                "p",
                ofi_core::control::GETWAIT,
                std::ptr::null_mut(),
                || Ok(7),
            )
        }
        .unwrap()
        .unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
    }
}
