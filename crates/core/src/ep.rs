//! Endpoints (`fi_endpoint`): active endpoints (also scalable endpoints, transmit and
//! receive contexts, shared contexts and aliases) and passive endpoints.
//!
//! # Data operations
//!
//! The raw calls mirror the C API one to one (`send`, `sendv`, `sendmsg`, `inject`,
//! `senddata`, `injectdata`, `recv*`, the `t*` tagged family, RMA `read*`/`write*`,
//! `inject_write*`, `atomic*`, `fetch_atomic*`, `compare_atomic*`). They are `unsafe`:
//! the caller keeps every buffer valid, and does not touch it, until the operation's
//! completion is read, exactly as in C. Each is one indirect call into the provider: no
//! allocation, no lock, no conversion; an error carries only its code (`FI_EAGAIN`
//! means "drive progress — read a CQ — and try again").
//!
//! Safe conveniences exist where ownership is trivial: the `inject*` calls take a slice
//! (the provider copies it before returning).
//!
//! # Lifetimes
//!
//! An endpoint keeps its domain alive, and the objects bound to it (CQs, counters, AV,
//! EQ, shared contexts) alive and open until it closes; [`Endpoint::close`] of an
//! endpoint with open aliases or contexts is `FI_EBUSY`. After a successful close every
//! call returns `FI_EBADF`. Nothing here panics.

use std::sync::Arc;

use crate::abi::object::{close_of, ctl, ok_or_code, AsFid, Closer, FidRef, Node};
use crate::abi::raw::{rx_to_raw, tx_to_raw, ErrBuf, FidClass, Obj, RawAddr, RawEp};
use crate::abi::tables::{
    call_slot, AtomicTable, CmTable, EpTable, MsgTable, PepTable, RmaTable, TaggedTable,
};
use crate::addr::Address;
use crate::attr::{RxAttr, TxAttr};
use crate::enums::{AtomicOp, Datatype};
use crate::eq::EventQueue;
use crate::error::{Errno, Error, Result};

/// An open active endpoint.
pub struct Endpoint {
    pub(crate) obj: Obj,
    ep: *const EpTable,
    cm: *const CmTable,
    msg: *const MsgTable,
    tagged: *const TaggedTable,
    rma: *const RmaTable,
    atomic: *const AtomicTable,
    pub(crate) node: Arc<Node>,
}

// SAFETY: the object and tables are required by the interface to be usable from any
// thread (providers' types are `Send + Sync`); the node is thread-safe.
unsafe impl Send for Endpoint {}
// SAFETY: see `Send`.
unsafe impl Sync for Endpoint {}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.node
            .fmt_object(f, "Endpoint", &[("class", &self.node.class())])
    }
}

impl AsFid for Endpoint {
    fn as_fid(&self) -> FidRef<'_> {
        FidRef::new(&self.node, self.obj)
    }
}

fn or_enosys<T>(p: *const T, fallback: &'static T) -> *const T {
    if p.is_null() {
        fallback
    } else {
        p
    }
}

/// Writes, from the list of data operations
/// ([`for_each_ep_data_op!`](crate::for_each_ep_data_op)), one raw method of
/// [`Endpoint`] per operation (named by the entry's host name: `inject_raw` where a safe
/// `inject` exists): it checks that the provider's table has the slot (else
/// `FI_ENOSYS`) and calls it — one indirect call, no allocation, no lock; only the
/// entry's typed arguments (`as` in the list) are lowered with `to_raw()`.
macro_rules! data_wrappers {
    ($($group:ident $Table:ident {
        $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident $since:tt $kind:tt
            ($($c:ident : $cty:ty $(as $hty:ty)?),*) $p:tt $low:tt;)*
    } { $($(#[$qdoc:meta])* $qslot:ident / $qname:ident;)* })*) => {$(
        $(
        safe_inject! { $name $host $kind ($($c : $cty $(as $hty)?),*) $(#[$doc])* }

        $(#[$doc])*
        ///
        /// # Safety
        /// The C API's contract: every buffer, array and message is valid (for the
        /// lengths and counts given) and left alone until the operation completes — for
        /// an inject, during the call only; `desc` values come from this provider's
        /// memory regions or are null.
        #[inline]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $host(&self, $($c: $crate::host_arg_ty!($cty $(, $hty)?)),*) -> Result<()> {
            // SAFETY: the table and object are this endpoint's own; the caller upholds
            // the operation's contract (see above).
            ok_or_code(unsafe {
                call_slot!(&*self.$group, $Table.$name(self.obj, $($crate::host_arg_to_c!($c $(, $hty)?)),*))
            })
        }
        )*
        $(
            $(#[$qdoc])*
            pub fn $qname(&self, datatype: Datatype, op: AtomicOp) -> Result<usize> {
                let mut n = 0usize;
                // SAFETY: our own table and object; `n` valid for a write.
                let rc = unsafe {
                    call_slot!(&*self.$group, $Table.$qslot(self.obj, datatype.to_raw(), op.to_raw(), &mut n))
                };
                ok_or_code(rc as isize).map(|_| n)
            }
        )*
    )*};
}

/// The safe form of an inject whose buffer is bytes (`buf, len` first): `name(&[u8],
/// …)` over the raw `host` method. Scans the entry's kinds for `inject`; writes
/// nothing for any other entry.
macro_rules! safe_inject {
    ($name:ident $host:ident [inject $($k:ident)*] (buf: $bt:ty, len: $lt:ty $(, $c:ident : $cty:ty)*) $(#[$doc:meta])*) => {
        $(#[$doc])*
        ///
        /// Safe form: `buf` is copied before the call returns.
        #[inline]
        pub fn $name(&self, buf: &[u8] $(, $c: $cty)*) -> Result<()> {
            // SAFETY: an inject is done with its buffer when the call returns, and
            // `buf` is valid for its length until then.
            unsafe { self.$host(buf.as_ptr(), buf.len() $(, $c)*) }
        }
    };
    ($name:ident $host:ident [$k0:ident $($k:ident)*] $args:tt $(#[$doc:meta])*) => {
        safe_inject! { $name $host [$($k)*] $args $(#[$doc])* }
    };
    ($name:ident $host:ident [] $args:tt $(#[$doc:meta])*) => {};
}

impl Endpoint {
    /// Run a control call that opens an endpoint-like object (an endpoint, scalable
    /// endpoint, alias, or a transmit, receive or shared context) into the [`RawEp`] it
    /// is given, and wrap the result as a child of `parent` of class `class`.
    pub(crate) fn open_child(
        parent: &Arc<Node>,
        class: FidClass,
        call: impl FnOnce(&mut RawEp, *mut ErrBuf) -> i32,
    ) -> Result<Endpoint> {
        let mut out = RawEp::empty();
        ctl(|eb| call(&mut out, eb))?;
        Endpoint::from_raw_ep(&out, parent, class)
    }

    /// Wrap a provider's endpoint.
    pub(crate) fn from_raw_ep(
        out: &RawEp,
        parent: &Arc<Node>,
        class: FidClass,
    ) -> Result<Endpoint> {
        let close = close_of(out.obj, out.ep, class.label())?;
        let node = Node::child(parent, class, close);
        Ok(Endpoint {
            obj: out.obj,
            ep: out.ep,
            cm: or_enosys(out.cm, CmTable::ENOSYS),
            msg: or_enosys(out.msg, MsgTable::ENOSYS),
            tagged: or_enosys(out.tagged, TaggedTable::ENOSYS),
            rma: or_enosys(out.rma, RmaTable::ENOSYS),
            atomic: or_enosys(out.atomic, AtomicTable::ENOSYS),
            node,
        })
    }

    #[inline(always)]
    pub(crate) fn t(&self) -> &EpTable {
        // SAFETY: the provider's table (valid while the node holds the provider) or the
        // static CLOSED table.
        unsafe { &*self.ep }
    }

    #[inline(always)]
    pub(crate) fn c(&self) -> &CmTable {
        // SAFETY: as `t`.
        unsafe { &*self.cm }
    }

    /// The provider's name.
    pub fn provider(&self) -> &str {
        self.node.prov()
    }

    // ---- control ----

    /// [`Endpoint::join`] with the context a `FI_JOIN_COMPLETE` event on the endpoint's
    /// event queue carries.
    pub fn join_with(&self, addr: &Address, flags: u64, context: usize) -> Result<Multicast> {
        let bytes = addr.to_bytes();
        let raw = RawAddr::new(addr.format(), &bytes);
        let mut mc: Obj = std::ptr::null_mut();
        let mut fi_addr = 0u64;
        // SAFETY: our own object and table; `raw`, its bytes and the out-parameters
        // live across the call.
        ctl(|eb| unsafe {
            call_slot!(
                self.t(),
                EpTable.join(self.obj, &raw, flags, context, &mut mc, &mut fi_addr, eb)
            )
        })?;
        if mc.is_null() {
            return Err(Error::new(
                Errno::EOTHER,
                "fi_join: the provider returned no membership",
            ));
        }
        // The join succeeded, so the provider's table has the `mc_close` slot.
        let closer = Closer::Slot {
            close: self.t().mc_close,
            obj: mc,
        };
        Ok(Multicast {
            fi_addr,
            node: Node::child(&self.node, FidClass::Mc, closer),
        })
    }

    /// `fi_tx_context` of a scalable endpoint.
    pub fn tx_context(&self, index: i32, attr: &TxAttr) -> Result<Endpoint> {
        let raw = tx_to_raw(attr);
        // SAFETY: our own object; `raw` and `out` live across the call.
        Endpoint::open_child(&self.node, FidClass::TxCtx, |out, eb| unsafe {
            call_slot!(self.t(), EpTable.tx_ctx(self.obj, index, &raw, 0, out, eb))
        })
    }

    /// `fi_rx_context` of a scalable endpoint.
    pub fn rx_context(&self, index: i32, attr: &RxAttr) -> Result<Endpoint> {
        let raw = rx_to_raw(attr);
        // SAFETY: our own object; `raw` and `out` live across the call.
        Endpoint::open_child(&self.node, FidClass::RxCtx, |out, eb| unsafe {
            call_slot!(self.t(), EpTable.rx_ctx(self.obj, index, &raw, 0, out, eb))
        })
    }

    // ---- connection management ----

    // ---- one method per entry of the lists (`for_each_ep_ctl_op!`,
    // `for_each_cm_op!`) ----

    crate::for_each_ep_ctl_op!(crate::abi::ctl_ops::ctl_wrappers);
    crate::for_each_cm_op!(crate::abi::ctl_ops::ctl_wrappers);

    // ---- data path: one raw method per entry of the list, a safe one per inject of
    // bytes, one per query ----

    crate::for_each_ep_data_op!(data_wrappers);
}

impl crate::abi::ctl_ops::Detach for Endpoint {
    fn detach(&mut self) {
        self.obj = std::ptr::null_mut();
        self.ep = EpTable::CLOSED;
        self.cm = CmTable::CLOSED;
        self.msg = MsgTable::CLOSED;
        self.tagged = TaggedTable::CLOSED;
        self.rma = RmaTable::CLOSED;
        self.atomic = AtomicTable::CLOSED;
    }
}

/// A multicast group membership (`fid_mc`, from [`Endpoint::join`]): the fabric address
/// to send to the group. Dropping it (or [`Multicast::close`]) leaves the group; it
/// keeps its endpoint open until then.
pub struct Multicast {
    fi_addr: u64,
    node: Arc<Node>,
}

impl std::fmt::Debug for Multicast {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.node
            .fmt_object(f, "Multicast", &[("fi_addr", &self.fi_addr)])
    }
}

impl Multicast {
    /// The fabric address that sends to the group use (`fi_mc_addr`).
    pub fn fi_addr(&self) -> u64 {
        self.fi_addr
    }

    /// Leave the group (`fi_close`). A second close is a no-op.
    pub fn close(&mut self) -> Result<()> {
        self.node.close()
    }
}

crate::abi::ctl_ops::host_object! {
    /// An open passive endpoint (listens for connection requests).
    PassiveEndpoint(PepTable, "a passive endpoint");
}

impl PassiveEndpoint {
    /// Bind the event queue connection requests are reported to.
    pub fn bind_eq(&self, eq: &EventQueue, flags: u64) -> Result<()> {
        // SAFETY: our own object; `raw` names an open EQ of our family.
        self.node
            .bind(eq.as_fid(), "passive endpoint bind", |raw, e| unsafe {
                call_slot!(self.t(), PepTable.bind(self.obj, raw, flags, e))
            })
    }

    // ---- one method per entry of the list (`for_each_pep_op!`) ----
    crate::for_each_pep_op!(crate::abi::ctl_ops::ctl_wrappers);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::object::Closer;
    use crate::error::Errno;
    use crate::provider::Desc;

    /// A test `close` slot that succeeds.
    ///
    /// # Safety
    /// None beyond the slot's signature: no argument is dereferenced.
    unsafe extern "C" fn close_ok(_: Obj, _: *mut ErrBuf) -> i32 {
        0
    }
    /// A test `send` slot that succeeds.
    ///
    /// # Safety
    /// None beyond the slot's signature: no argument is dereferenced.
    unsafe extern "C" fn send_ok(
        _: Obj,
        _: *const u8,
        _: usize,
        _: Desc,
        _: u64,
        _: usize,
    ) -> isize {
        0
    }
    /// A test `inject` slot that succeeds.
    ///
    /// # Safety
    /// None beyond the slot's signature: no argument is dereferenced.
    unsafe extern "C" fn inject_ok(_: Obj, _: *const u8, _: usize, _: u64) -> isize {
        0
    }

    static EP: EpTable = {
        let mut t = EpTable::filled::<{ Errno::ENOSYS.0 }>();
        t.close = close_ok;
        t
    };

    /// A message table from a producer built before `inject` existed.
    static SHORT_MSG: MsgTable = {
        let mut t = MsgTable::filled::<{ Errno::ENOSYS.0 }>();
        t.send = send_ok;
        t.inject = inject_ok;
        t.size = std::mem::offset_of!(MsgTable, inject);
        t
    };

    /// A stub object and the root node of a provider `name` that closes it with
    /// `close_ok`.
    fn stub_root(name: &str) -> (Obj, Arc<Node>) {
        let obj = std::ptr::NonNull::<u64>::dangling().as_ptr() as Obj;
        let closer = Closer::Slot {
            close: close_ok,
            obj,
        };
        (obj, Node::root(1, name.into(), closer, None))
    }

    #[test]
    fn slots_beyond_a_short_table_and_missing_groups_are_enosys() {
        let (obj, root) = stub_root("short");
        let mut raw = RawEp::empty();
        raw.obj = obj;
        raw.ep = &EP;
        raw.msg = &SHORT_MSG;
        let mut ep = Endpoint::from_raw_ep(&raw, &root, FidClass::Ep).unwrap();
        // `send` lies inside the producer's table and is called.
        // SAFETY: the stub ignores its arguments.
        unsafe { ep.send(std::ptr::null(), 0, std::ptr::null_mut(), 0, 0) }.unwrap();
        // `inject` lies beyond it: FI_ENOSYS without calling the stub that is there.
        assert_eq!(ep.inject(b"", 0).unwrap_err().code(), Errno::ENOSYS);
        // A group the provider did not hand out at all.
        assert_eq!(ep.tinject(b"", 0, 1).unwrap_err().code(), Errno::ENOSYS);
        assert_eq!(ep.getname().unwrap_err().code(), Errno::ENOSYS);
        ep.close().unwrap();
        // SAFETY: the CLOSED table ignores its arguments.
        let e = unsafe { ep.send(std::ptr::null(), 0, std::ptr::null_mut(), 0, 0) }.unwrap_err();
        assert_eq!(e.code(), Errno::EBADF);
    }

    #[test]
    fn a_table_without_close_is_refused() {
        static TINY: EpTable = {
            let mut t = EpTable::filled::<{ Errno::ENOSYS.0 }>();
            t.size = 8;
            t
        };
        let (obj, root) = stub_root("tiny");
        let mut raw = RawEp::empty();
        raw.obj = obj;
        raw.ep = &TINY;
        let e = Endpoint::from_raw_ep(&raw, &root, FidClass::Ep).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        raw.obj = std::ptr::null_mut();
        assert_eq!(
            Endpoint::from_raw_ep(&raw, &root, FidClass::Ep)
                .unwrap_err()
                .code(),
            Errno::EOTHER
        );
    }
}
