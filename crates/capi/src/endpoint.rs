//! Active and passive endpoints in C: `struct fid_ep` with its `fi_ops_ep`,
//! `fi_ops_cm` and data tables, and `struct fid_pep`.
//!
//! The data slots (`fi_ops_msg`, `fi_ops_tagged`, `fi_ops_rma`, `fi_ops_atomic`) are
//! generated from the one list of operations
//! ([`ofi::for_each_ep_data_op!`](ofi::for_each_ep_data_op)): each slot calls the
//! endpoint's raw method of the same entry, which is one indirect call into the
//! provider; nothing is allocated or converted except the atomic datatype and operation
//! (an unknown value is `-FI_EINVAL`). They are the one exception to running every slot
//! in [`crate::guard`]: their own code cannot panic (a cast, `from_raw` of the atomic
//! enums, the raw method's size check and status mapping), and the provider's slot they
//! call catches its own panics (`ofi_core::abi::adapt`), so no unwind can reach C; the
//! guard's cost (about 17 instructions per call) is kept off the data path.
//!
//! The C tables themselves ([`FiOpsMsg`], [`FiOpsTagged`], [`FiOpsRma`], [`FiOpsAtomic`]
//! and their statics) are generated from the same list, so an operation added to the
//! list reaches C without a hand-written slot. The headers order a table as the list
//! does except that receives come first; each slot is named as the list names its
//! operation (`FiOpsTagged::trecv` is the header's `recv` of `fi_ops_tagged`,
//! `FiOpsAtomic::fetch_atomic` its `readwrite` of `fi_ops_atomic`).
//!
//! An endpoint is opened with its C object as the ofi context, so the `fid` of an
//! event queue entry is the C object the event is about; the program's context stays
//! in `fid.context`. `fi_join` gives a `struct fid_mc` over [`ofi::ep::Multicast`]
//! (its `fi_close` leaves the group; the endpoint stays open meanwhile), `fi_ep_alias`
//! (`FI_ALIAS`) a new C endpoint over [`Endpoint::alias`]. Scalable endpoints and
//! collectives are not offered (`-FI_ENOSYS`).

use std::ffi::{c_int, c_void};
use std::ptr;

use ofi::ep::{Endpoint, PassiveEndpoint};
use ofi::{AddrFormat, AtomicOp, Datatype, OpFlags};

use crate::av::av_of;
use crate::fid::{FiOps, Fid, FI_CLASS_EP, FI_CLASS_PEP};
use crate::obj::{
    cast_fid, code, fid_header, put_result, CObj, DomainObj, FabricObj, FidDomain, FidFabric,
    EINVAL, FI_ENABLE,
};
use crate::queues::{bind_eq_of, cntr_of, cq_of, eq_of};
use crate::{guard, guard_try, status};

/// `struct fid_ep`.
#[repr(C)]
pub struct FidEp {
    /// `fid`.
    pub fid: Fid,
    /// `ops`.
    pub ops: *const FiOpsEp,
    /// `cm`.
    pub cm: *const FiOpsCm,
    /// `msg`.
    pub msg: *const FiOpsMsg,
    /// `rma`.
    pub rma: *const FiOpsRma,
    /// `tagged`.
    pub tagged: *const FiOpsTagged,
    /// `atomic`.
    pub atomic: *const FiOpsAtomic,
    /// `collective`.
    pub collective: *const FiOpsCollective,
}

/// What an endpoint object holds.
pub struct EpState {
    /// The ofi endpoint.
    pub ep: Endpoint,
    /// The address format of its info (how `fi_connect` reads an address).
    pub addr_format: AddrFormat,
}

/// An endpoint object.
pub type EpObj = CObj<FidEp, EpState>;

/// `struct fid_pep`.
#[repr(C)]
pub struct FidPep {
    /// `fid`.
    pub fid: Fid,
    /// `ops`.
    pub ops: *const FiOpsEp,
    /// `cm`.
    pub cm: *const FiOpsCm,
}

/// A passive endpoint object.
pub type PepObj = CObj<FidPep, PassiveEndpoint>;

/// `struct fi_ops_ep`.
#[repr(C)]
pub struct FiOpsEp {
    /// `size`.
    pub size: usize,
    /// `cancel`.
    pub cancel: unsafe extern "C" fn(*mut Fid, *mut c_void) -> isize,
    /// `getopt`.
    pub getopt: unsafe extern "C" fn(*mut Fid, c_int, c_int, *mut c_void, *mut usize) -> c_int,
    /// `setopt`.
    pub setopt: unsafe extern "C" fn(*mut Fid, c_int, c_int, *const c_void, usize) -> c_int,
    /// `tx_ctx`.
    pub tx_ctx:
        unsafe extern "C" fn(*mut FidEp, c_int, *mut c_void, *mut *mut FidEp, *mut c_void) -> c_int,
    /// `rx_ctx`.
    pub rx_ctx:
        unsafe extern "C" fn(*mut FidEp, c_int, *mut c_void, *mut *mut FidEp, *mut c_void) -> c_int,
    /// `rx_size_left`.
    pub rx_size_left: unsafe extern "C" fn(*mut FidEp) -> isize,
    /// `tx_size_left`.
    pub tx_size_left: unsafe extern "C" fn(*mut FidEp) -> isize,
}

/// `struct fi_ops_cm`.
#[repr(C)]
pub struct FiOpsCm {
    /// `size`.
    pub size: usize,
    /// `setname`.
    pub setname: unsafe extern "C" fn(*mut Fid, *mut c_void, usize) -> c_int,
    /// `getname`.
    pub getname: unsafe extern "C" fn(*mut Fid, *mut c_void, *mut usize) -> c_int,
    /// `getpeer`.
    pub getpeer: unsafe extern "C" fn(*mut FidEp, *mut c_void, *mut usize) -> c_int,
    /// `connect`.
    pub connect: unsafe extern "C" fn(*mut FidEp, *const c_void, *const c_void, usize) -> c_int,
    /// `listen`.
    pub listen: unsafe extern "C" fn(*mut FidPep) -> c_int,
    /// `accept`.
    pub accept: unsafe extern "C" fn(*mut FidEp, *const c_void, usize) -> c_int,
    /// `reject`.
    pub reject: unsafe extern "C" fn(*mut FidPep, *mut Fid, *const c_void, usize) -> c_int,
    /// `shutdown`.
    pub shutdown: unsafe extern "C" fn(*mut FidEp, u64) -> c_int,
    /// `join`.
    pub join: unsafe extern "C" fn(
        *mut FidEp,
        *const c_void,
        u64,
        *mut *mut c_void,
        *mut c_void,
    ) -> c_int,
}

/// The data slots, one per entry of the list, and their types (module `sig`).
pub mod data {
    use super::FidEp;

    /// Generates, for every entry of the list, the C slot `name` (forwarding to the
    /// endpoint's raw method) and its type `sig::name`.
    macro_rules! c_data_slots {
        ($($group:ident $Table:ident {
            $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident $since:tt $kind:tt
                ($($c:ident : $cty:ty $(as $hty:ty)?),*) $p:tt $low:tt;)*
        } $queries:tt)*) => {
            $($(
                $(#[$doc])*
                ///
                /// # Safety
                /// `ep` is an endpoint of this library; the arguments follow the C API's
                /// contract for this call.
                #[allow(clippy::too_many_arguments)]
                pub unsafe extern "C" fn $name(ep: *mut FidEp, $($c: $cty),*) -> isize {
                    // No `guard` here (the data path's budget): nothing below can
                    // panic, and the provider's slot catches its own panics.
                    // SAFETY: the slot sits in our endpoints' tables only.
                    let e = &unsafe { super::EpObj::of(ep) }.r.ep;
                    // A `*msg` call with `FI_TRIGGER`: the provider's counter in its
                    // triggered context (`crate::trigger`); a constant 0 for the others.
                    #[allow(clippy::identity_op)]
                    let trig_flags: u64 = 0 $(| c_data_slots!(@flags $c $c))*;
                    if trig_flags & ::ofi::OpFlags::TRIGGER.bits() != 0 {
                        #[allow(clippy::identity_op)]
                        let trig_ctx: usize = 0 $(| c_data_slots!(@ctx $c $c))*;
                        // SAFETY: the program's contract for a triggered call.
                        unsafe { crate::trigger::lower_trigger(trig_flags, trig_ctx) };
                    }
                    $(let $c = c_data_slots!(@arg $c $(, $hty)?);)*
                    // SAFETY: the program upholds the operation's contract.
                    match unsafe { e.$host($($c),*) } {
                        Ok(()) => 0,
                        Err(err) => err.to_status(),
                    }
                }
            )*)*

            /// The C types of the data slots.
            pub mod sig {
                use super::FidEp;
                $($(
                    #[doc = concat!("The type of the `", stringify!($name), "` slot.")]
                    #[allow(non_camel_case_types)]
                    pub type $name = unsafe extern "C" fn(*mut FidEp, $($cty),*) -> isize;
                )*)*
            }
        };
        (@flags flags $v:ident) => { $v };
        (@flags $other:ident $v:ident) => { 0 };
        (@ctx msg $v:ident) => {{
            // SAFETY: the message is null or readable (the program's contract).
            unsafe { crate::trigger::MsgContext::msg_context($v) }
        }};
        (@ctx $other:ident $v:ident) => { 0 };
        (@arg $c:ident) => { $c };
        (@arg $c:ident, $hty:ty) => {
            match <$hty>::from_raw($c) {
                Some(v) => v,
                None => return -(::libc::EINVAL as isize),
            }
        };
    }

    ofi::for_each_ep_data_op!(c_data_slots);
}

use data::sig;

/// An `*atomicvalid` query slot.
pub type ValidFn = unsafe extern "C" fn(*mut FidEp, u32, u32, *mut usize) -> c_int;

/// Generates the C data tables from the list: for each group its `#[repr(C)]` struct
/// ([`FiOpsMsg`], [`FiOpsTagged`], [`FiOpsRma`], [`FiOpsAtomic`]) with one slot per entry
/// of type `sig::name`, named as the list names the operation, and its static
/// ([`MSG_OPS`], …) filled with the `data::*` slots. A group's queries come after its
/// entries, each a [`ValidFn`] slot with its guarded function.
///
/// The slot order is the headers': the list's order, except that the headers put a
/// table's receives first (`fi_ops_msg` and `fi_ops_tagged` begin with `recv`, `recvv`,
/// `recvmsg`). So the entries of the original layout are split into receives and the
/// rest, each part keeping the list's order; an entry appended later (`@N`) comes after
/// both, as the headers append a slot. `tests/layout.rs` compares every table with the
/// installed headers.
macro_rules! c_data_tables {
    ($($group:ident $Table:ident { $($entries:tt)* } $queries:tt)*) => {$(
        c_data_tables! { @split $group [] [] [] $($entries)* ; $queries }
    )*};
    // A receive of the original layout.
    (@split $group:ident [$($rx:tt)*] [$($rest:tt)*] [$($later:tt)*]
        $(#[$doc:meta])* $name:ident / $host:ident / $V:ident [] [recv $($flag:ident)*]
        $c:tt $p:tt $low:tt; $($more:tt)*) => {
        c_data_tables! { @split $group [$($rx)* $(#[$doc])* $name;] [$($rest)*] [$($later)*] $($more)* }
    };
    // Any other operation of the original layout.
    (@split $group:ident [$($rx:tt)*] [$($rest:tt)*] [$($later:tt)*]
        $(#[$doc:meta])* $name:ident / $host:ident / $V:ident [] $kind:tt
        $c:tt $p:tt $low:tt; $($more:tt)*) => {
        c_data_tables! { @split $group [$($rx)*] [$($rest)* $(#[$doc])* $name;] [$($later)*] $($more)* }
    };
    // An operation appended by interface minor `$since`.
    (@split $group:ident [$($rx:tt)*] [$($rest:tt)*] [$($later:tt)*]
        $(#[$doc:meta])* $name:ident / $host:ident / $V:ident [$since:literal] $kind:tt
        $c:tt $p:tt $low:tt; $($more:tt)*) => {
        c_data_tables! { @split $group [$($rx)*] [$($rest)*] [$($later)* $(#[$doc])* $name;] $($more)* }
    };
    (@split $group:ident [$($rx:tt)*] [$($rest:tt)*] [$($later:tt)*] ; $queries:tt) => {
        c_data_tables! { @names $group { $($rx)* $($rest)* $($later)* } $queries }
    };
    // The C name of each group's table, its Rust type and its static.
    (@names msg $($t:tt)*) => { c_data_tables! { @table "fi_ops_msg" FiOpsMsg MSG_OPS $($t)* } };
    (@names tagged $($t:tt)*) => { c_data_tables! { @table "fi_ops_tagged" FiOpsTagged TAGGED_OPS $($t)* } };
    (@names rma $($t:tt)*) => { c_data_tables! { @table "fi_ops_rma" FiOpsRma RMA_OPS $($t)* } };
    (@names atomic $($t:tt)*) => { c_data_tables! { @table "fi_ops_atomic" FiOpsAtomic ATOMIC_OPS $($t)* } };
    (@table $c_name:literal $Struct:ident $STATIC:ident { $($(#[$doc:meta])* $name:ident;)* }
        { $($(#[$qdoc:meta])* $qslot:ident / $qmethod:ident;)* }) => {
        #[doc = concat!("`struct ", $c_name, "`: its slots in the header's order, each named as the list names its operation.")]
        #[repr(C)]
        pub struct $Struct {
            /// `size`.
            pub size: usize,
            $($(#[$doc])* pub $name: sig::$name,)*
            $($(#[$qdoc])* pub $qslot: ValidFn,)*
        }

        $(
            $(#[$qdoc])*
            unsafe extern "C" fn $qslot(
                ep: *mut FidEp,
                datatype: u32,
                op: u32,
                count: *mut usize,
            ) -> c_int {
                guard(|| {
                    // SAFETY: our endpoint.
                    let e = &unsafe { EpObj::of(ep) }.r.ep;
                    let (Some(dt), Some(op)) = (Datatype::from_raw(datatype), AtomicOp::from_raw(op))
                    else {
                        return EINVAL;
                    };
                    // SAFETY: `count` per the C API.
                    unsafe { put_result(count, e.$qmethod(dt, op)) }
                })
            }
        )*

        #[doc = concat!("The `", $c_name, "` of an endpoint.")]
        pub static $STATIC: $Struct = crate::fid::ops_table!($Struct {
            $($name: data::$name,)*
            $($qslot,)*
        });
    };
}

ofi::for_each_ep_data_op!(c_data_tables);

/// A collective slot: none is offered, each answers `-FI_ENOSYS` (it reads no
/// argument, so one function serves every signature under the C calling convention).
pub type CollectiveFn = unsafe extern "C" fn() -> isize;

/// `struct fi_ops_collective` (eleven slots after `size`).
#[repr(C)]
pub struct FiOpsCollective {
    /// `size`.
    pub size: usize,
    /// `barrier` … `barrier2`, in header order.
    pub slots: [CollectiveFn; 11],
}

crate::fid::enosys_slots! {
    fn collective_enosys() -> isize;
}

/// The `fi_ops_collective` of an endpoint: every slot `-FI_ENOSYS`.
pub static COLLECTIVE_OPS: FiOpsCollective = crate::fid::ops_table!(FiOpsCollective {
    slots: [collective_enosys; 11],
});

// ---------------------------------------------------------------------------------
// Endpoint: fi_ops, fi_ops_ep, fi_ops_cm.

unsafe extern "C" fn ep_close(fid: *mut Fid) -> c_int {
    // SAFETY: the slot of our own endpoint table.
    guard(|| unsafe { EpObj::close_with(fid.cast(), |e| e.ep.close()) })
}

unsafe extern "C" fn ep_bind(fid: *mut Fid, bfid: *mut Fid, flags: u64) -> c_int {
    guard(|| {
        // SAFETY: our endpoint; `bfid` per the C API.
        let e = &unsafe { EpObj::of(fid.cast()) }.r.ep;
        let flags = OpFlags::from_bits_retain(flags);
        // SAFETY: `bfid` is a valid fid (C API).
        unsafe {
            if let Some(c) = cq_of(bfid) {
                code(e.bind(&c.r.cq, flags))
            } else if let Some(a) = av_of(bfid) {
                code(e.bind(&a.r.av, flags))
            } else if let Some(k) = cntr_of(bfid) {
                code(e.bind(&k.r, flags))
            } else if let Some(q) = eq_of(bfid) {
                code(e.bind(&q.r.eq, flags))
            } else if let Some(shared) = ep_of(bfid) {
                // A shared transmit or receive context (the provider refuses other
                // endpoints).
                code(e.bind(&shared.r.ep, flags))
            } else {
                EINVAL
            }
        }
    })
}

unsafe extern "C" fn ep_control(fid: *mut Fid, command: c_int, arg: *mut c_void) -> c_int {
    guard(|| {
        // SAFETY: our endpoint.
        let e = &unsafe { EpObj::of(fid.cast()) }.r.ep;
        match command {
            FI_ENABLE => code(e.enable()),
            // SAFETY: `arg` is a `struct fi_alias` for FI_ALIAS (C API).
            FI_ALIAS => unsafe { ep_alias(fid, arg.cast::<FiAlias>()) },
            // SAFETY: `arg` as the command requires (C API).
            _ => code(unsafe { e.control(command, arg) }),
        }
    })
}

/// `FI_ALIAS` (the `fi_control` command).
const FI_ALIAS: c_int = 4;

/// `struct fi_alias`: what `fi_alias` / `fi_ep_alias` pass to `fi_control`.
#[repr(C)]
pub struct FiAlias {
    /// `fid`: where the alias goes.
    pub fid: *mut *mut Fid,
    /// `flags`: the alias's default operation flags.
    pub flags: u64,
}

/// `fi_ep_alias`: a new C endpoint over [`ofi::ep::Endpoint::alias`], with the same
/// tables and context as `fid`.
///
/// # Safety
/// `fid` is our endpoint; `a` is null or a valid `struct fi_alias`.
unsafe fn ep_alias(fid: *mut Fid, a: *const FiAlias) -> c_int {
    // SAFETY: the caller's contract.
    let (e, a) = unsafe { (EpObj::of(fid.cast()), a.as_ref()) };
    let Some(a) = a else { return EINVAL };
    if a.fid.is_null() {
        return EINVAL;
    }
    // SAFETY: writable per the C API.
    unsafe { crate::queues::null_out(a.fid) };
    let made = e.r.ep.alias(a.flags).map(|alias| {
        let c = FidEp {
            fid: fid_header(FI_CLASS_EP, e.c.fid.context, &EP_FI_OPS),
            ..e.c
        };
        let state = EpState {
            ep: alias,
            addr_format: e.r.addr_format,
        };
        EpObj::into_c(c, state)
    });
    // SAFETY: checked non-null.
    unsafe { put_result(a.fid.cast::<*mut FidEp>(), made) }
}

/// The `fi_ops` of an endpoint.
pub static EP_FI_OPS: FiOps = FiOps {
    bind: Some(ep_bind),
    control: Some(ep_control),
    ..FiOps::with_close(ep_close)
};

unsafe extern "C" fn ep_cancel(fid: *mut Fid, context: *mut c_void) -> isize {
    guard(|| {
        // SAFETY: our endpoint.
        let e = unsafe { EpObj::of(fid.cast()) };
        code(e.r.ep.cancel(context as usize)) as isize
    })
}

/// Copies an option value out: `-FI_ETOOSMALL` (with the needed length) when it does
/// not fit.
///
/// # Safety
/// `optval` holds `*optlen` bytes; `optlen` is null or valid.
unsafe fn getopt_out(
    r: impl FnOnce(&mut [u8]) -> ofi::Result<usize>,
    optval: *mut c_void,
    optlen: *mut usize,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(room) = (unsafe { optlen.as_mut() }) else {
        return EINVAL;
    };
    let mut buf = vec![0u8; (*room).max(64)];
    match r(&mut buf) {
        Ok(n) => {
            let fits = n <= *room;
            if fits && !optval.is_null() {
                // SAFETY: `optval` holds `*room >= n` bytes.
                unsafe { ptr::copy_nonoverlapping(buf.as_ptr(), optval.cast::<u8>(), n) };
            }
            *room = n;
            if fits {
                0
            } else {
                -ofi::Errno::ETOOSMALL.0
            }
        }
        Err(e) => status(&e),
    }
}

/// A byte slice of a C buffer (empty for null or zero length).
///
/// # Safety
/// `p` holds `len` bytes when non-null.
unsafe fn bytes<'a>(p: *const c_void, len: usize) -> &'a [u8] {
    // SAFETY: the caller's contract.
    unsafe { crate::obj::c_slice(p.cast::<u8>(), len) }.unwrap_or(&[])
}

/// The option and name slots (`getopt`, `setopt` of `fi_ops_ep`; `setname`, `getname`
/// of `fi_ops_cm`), which both endpoint kinds forward alike to the ofi object `$target`
/// of their wrapper `$o`. `Obj |o| target => getopt, setopt, setname, getname;`
macro_rules! opt_and_name_slots {
    (
        $Obj:ident |$o:ident| $target:expr =>
            $getopt:ident, $setopt:ident, $setname:ident, $getname:ident;
    ) => {
        unsafe extern "C" fn $getopt(
            fid: *mut Fid,
            level: c_int,
            name: c_int,
            optval: *mut c_void,
            optlen: *mut usize,
        ) -> c_int {
            guard(|| {
                // SAFETY: the slot sits in this kind's tables only.
                let $o = unsafe { $Obj::of(fid.cast()) };
                let t = &$target;
                // SAFETY: the buffers per the C API.
                unsafe { getopt_out(|b| t.getopt(level, name, b), optval, optlen) }
            })
        }

        unsafe extern "C" fn $setopt(
            fid: *mut Fid,
            level: c_int,
            name: c_int,
            optval: *const c_void,
            optlen: usize,
        ) -> c_int {
            guard(|| {
                // SAFETY: our object (as above); the buffer per the C API.
                let ($o, v) = unsafe { ($Obj::of(fid.cast()), bytes(optval, optlen)) };
                code($target.setopt(level, name, v))
            })
        }

        unsafe extern "C" fn $setname(fid: *mut Fid, addr: *mut c_void, addrlen: usize) -> c_int {
            guard(|| {
                // SAFETY: our object (as above); the address per the C API.
                let ($o, name) = unsafe { ($Obj::of(fid.cast()), bytes(addr, addrlen)) };
                code($target.setname(name))
            })
        }

        unsafe extern "C" fn $getname(
            fid: *mut Fid,
            addr: *mut c_void,
            addrlen: *mut usize,
        ) -> c_int {
            guard(|| {
                // SAFETY: our object (as above).
                let $o = unsafe { $Obj::of(fid.cast()) };
                // SAFETY: the buffers per the C API.
                unsafe { name_out($target.getname(), addr, addrlen) }
            })
        }
    };
}

opt_and_name_slots! {
    EpObj |e| e.r.ep => ep_getopt, ep_setopt, ep_setname, ep_getname;
}

unsafe extern "C" fn ep_rx_size_left(ep: *mut FidEp) -> isize {
    // SAFETY: our endpoint.
    guard(|| match unsafe { EpObj::of(ep) }.r.ep.rx_size_left() {
        Ok(n) => n as isize,
        Err(e) => e.to_status(),
    })
}

unsafe extern "C" fn ep_tx_size_left(ep: *mut FidEp) -> isize {
    // SAFETY: our endpoint.
    guard(|| match unsafe { EpObj::of(ep) }.r.ep.tx_size_left() {
        Ok(n) => n as isize,
        Err(e) => e.to_status(),
    })
}

/// The `fi_ops_ep` of an endpoint.
pub static EP_OPS: FiOpsEp = crate::fid::ops_table!(FiOpsEp {
    cancel: ep_cancel,
    getopt: ep_getopt,
    setopt: ep_setopt,
    tx_ctx: crate::contexts::ep_ctx::<crate::contexts::Tx>,
    rx_ctx: crate::contexts::ep_ctx::<crate::contexts::Rx>,
    rx_size_left: ep_rx_size_left,
    tx_size_left: ep_tx_size_left,
});

/// Writes a name into the program's buffer: `-FI_ETOOSMALL` (with the needed length)
/// when it does not fit.
///
/// # Safety
/// `addr` holds `*addrlen` bytes; `addrlen` is null or valid.
unsafe fn name_out(r: ofi::Result<Vec<u8>>, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: the caller's contract.
    let Some(room) = (unsafe { addrlen.as_mut() }) else {
        return EINVAL;
    };
    match r {
        Ok(name) => {
            let fits = name.len() <= *room;
            if fits && !addr.is_null() {
                // SAFETY: `addr` holds `*room` bytes.
                unsafe { ptr::copy_nonoverlapping(name.as_ptr(), addr.cast::<u8>(), name.len()) };
            }
            *room = name.len();
            if fits {
                0
            } else {
                -ofi::Errno::ETOOSMALL.0
            }
        }
        Err(e) => status(&e),
    }
}

unsafe extern "C" fn ep_getpeer(ep: *mut FidEp, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: our endpoint; the buffers per the C API.
    guard(|| unsafe { name_out(EpObj::of(ep).r.ep.getpeer(), addr, addrlen) })
}

unsafe extern "C" fn ep_connect(
    ep: *mut FidEp,
    addr: *const c_void,
    param: *const c_void,
    paramlen: usize,
) -> c_int {
    guard(|| {
        // SAFETY: our endpoint.
        let e = unsafe { EpObj::of(ep) };
        // SAFETY: null or one address of the endpoint's format (C API).
        let peer = match unsafe { crate::av::packed_addr(e.r.addr_format, addr) } {
            Ok(one) => one.to_bytes(),
            Err(err) => return status(&err),
        };
        // SAFETY: `param` holds `paramlen` bytes (C API).
        code(e.r.ep.connect(&peer, unsafe { bytes(param, paramlen) }))
    })
}

unsafe extern "C" fn ep_accept(ep: *mut FidEp, param: *const c_void, paramlen: usize) -> c_int {
    // SAFETY: our endpoint; `param` per the C API.
    guard(|| code(unsafe { EpObj::of(ep).r.ep.accept(bytes(param, paramlen)) }))
}

unsafe extern "C" fn ep_shutdown(ep: *mut FidEp, flags: u64) -> c_int {
    // SAFETY: our endpoint.
    guard(|| code(unsafe { EpObj::of(ep) }.r.ep.shutdown(flags)))
}

/// `FI_CLASS_MC`.
pub const FI_CLASS_MC: usize = 19;

/// `struct fid_mc`: a multicast membership from `fi_join`.
#[repr(C)]
pub struct FidMc {
    /// `fid`.
    pub fid: Fid,
    /// `fi_addr`: the fabric address sends to the group use.
    pub fi_addr: u64,
}

/// A membership object; `fi_close` leaves the group.
pub type McObj = CObj<FidMc, ofi::ep::Multicast>;

unsafe extern "C" fn mc_close(fid: *mut Fid) -> c_int {
    // SAFETY: the slot of our own membership table.
    guard(|| unsafe { McObj::close_with(fid.cast(), ofi::ep::Multicast::close) })
}

/// The `fi_ops` of a multicast membership.
pub static MC_FI_OPS: FiOps = FiOps::with_close(mc_close);

unsafe extern "C" fn ep_join(
    ep: *mut FidEp,
    addr: *const c_void,
    flags: u64,
    out: *mut *mut c_void,
    context: *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: `out` per the C API.
        unsafe { crate::queues::prepare_out(out, addr) }?;
        // SAFETY: our endpoint.
        let e = unsafe { EpObj::of(ep) };
        // SAFETY: one address of the endpoint's format (C API).
        let group = crate::or_status(unsafe { crate::av::packed_addr(e.r.addr_format, addr) })?;
        let joined = e.r.ep.join_with(&group, flags, context as usize).map(|m| {
            let c = FidMc {
                fid: fid_header(FI_CLASS_MC, context, &MC_FI_OPS),
                fi_addr: m.fi_addr(),
            };
            McObj::into_c(c, m)
        });
        // SAFETY: checked non-null.
        Ok(unsafe { put_result(out.cast::<*mut FidMc>(), joined) })
    })
}
crate::queues::enosys_out_slots! {
    /// A passive endpoint joins no group.
    fn join_enosys(*mut FidEp, *const c_void, u64; out: *mut *mut c_void; *mut c_void);
    fn ctx_enosys(*mut FidEp, c_int, *mut c_void; out: *mut *mut FidEp; *mut c_void);
}
crate::fid::enosys_slots! {
    /// An active endpoint neither listens nor rejects.
    fn listen_enosys(*mut FidPep) -> c_int;
    fn reject_enosys(*mut FidPep, *mut Fid, *const c_void, usize) -> c_int;
    /// A passive endpoint has no peer and no connection of its own.
    fn getpeer_enosys(*mut FidEp, *mut c_void, *mut usize) -> c_int;
    fn connect_enosys(*mut FidEp, *const c_void, *const c_void, usize) -> c_int;
    fn accept_enosys(*mut FidEp, *const c_void, usize) -> c_int;
    fn shutdown_enosys(*mut FidEp, u64) -> c_int;
}

/// The `fi_ops_cm` of an endpoint.
pub static EP_CM_OPS: FiOpsCm = crate::fid::ops_table!(FiOpsCm {
    setname: ep_setname,
    getname: ep_getname,
    getpeer: ep_getpeer,
    connect: ep_connect,
    listen: listen_enosys,
    accept: ep_accept,
    reject: reject_enosys,
    shutdown: ep_shutdown,
    join: ep_join,
});

/// Our endpoint behind `fid`, if it is one.
///
/// # Safety
/// `fid` is null or a valid `struct fid`.
pub unsafe fn ep_of(fid: *const Fid) -> Option<&'static EpObj> {
    // SAFETY: the caller's contract.
    unsafe { cast_fid(fid, &EP_FI_OPS) }
}

/// The C object of an endpoint of `class`: an active endpoint, a scalable endpoint or a
/// context ([`crate::contexts`]). All carry the same tables; the provider refuses the
/// calls an object of its kind does not take.
pub fn ep_header(class: usize, context: *mut c_void) -> FidEp {
    FidEp {
        fid: fid_header(class, context, &EP_FI_OPS),
        ops: &EP_OPS,
        cm: &EP_CM_OPS,
        msg: &MSG_OPS,
        rma: &RMA_OPS,
        tagged: &TAGGED_OPS,
        atomic: &ATOMIC_OPS,
        collective: &COLLECTIVE_OPS,
    }
}

crate::fid::open_without_flags! {
    /// `fi_endpoint` (the domain table's slot).
    pub fn domain_endpoint(*mut FidDomain, *mut *mut FidEp) = domain_endpoint2;
}

crate::fid::open_for_info! {
    /// `fi_endpoint2` (the domain table's slot).
    pub fn domain_endpoint2(domain: *mut FidDomain as DomainObj, info,
        ep: *mut *mut FidEp, flags: u64, context) = |d| {
        // The ofi context is the C object: events name it in their `fid`.
        let made = EpObj::into_c_with(ep_header(FI_CLASS_EP, context), |me| {
            d.r.domain.endpoint_with(&info, me, flags).map(|e| EpState {
                ep: e,
                addr_format: info.addr_format,
            })
        });
        // SAFETY: checked non-null.
        Ok(unsafe { put_result(ep, made) })
    }
}

// ---------------------------------------------------------------------------------
// Passive endpoint.

unsafe extern "C" fn pep_close(fid: *mut Fid) -> c_int {
    // SAFETY: the slot of our own passive endpoint table.
    guard(|| unsafe { PepObj::close_with(fid.cast(), PassiveEndpoint::close) })
}

unsafe extern "C" fn pep_bind(fid: *mut Fid, bfid: *mut Fid, flags: u64) -> c_int {
    // SAFETY: our passive endpoint; `bfid` per the C API.
    guard(|| unsafe { bind_eq_of(bfid, |eq| PepObj::of(fid.cast()).r.bind_eq(eq, flags)) })
}

unsafe extern "C" fn pep_control(fid: *mut Fid, command: c_int, arg: *mut c_void) -> c_int {
    guard(|| {
        // SAFETY: our passive endpoint.
        let p = unsafe { PepObj::of(fid.cast()) };
        // SAFETY: `arg` as the command requires (C API).
        code(unsafe { p.r.control(command, arg) })
    })
}

/// The `fi_ops` of a passive endpoint.
pub static PEP_FI_OPS: FiOps = FiOps {
    bind: Some(pep_bind),
    control: Some(pep_control),
    ..FiOps::with_close(pep_close)
};

crate::fid::enosys_slots! {
    /// A passive endpoint has no operations to cancel or queues to size.
    fn pep_cancel(*mut Fid, *mut c_void) -> isize;
    fn size_left_enosys(*mut FidEp) -> isize;
}

opt_and_name_slots! {
    PepObj |p| p.r => pep_getopt, pep_setopt, pep_setname, pep_getname;
}

/// The `fi_ops_ep` of a passive endpoint.
pub static PEP_OPS: FiOpsEp = crate::fid::ops_table!(FiOpsEp {
    cancel: pep_cancel,
    getopt: pep_getopt,
    setopt: pep_setopt,
    tx_ctx: ctx_enosys,
    rx_ctx: ctx_enosys,
    rx_size_left: size_left_enosys,
    tx_size_left: size_left_enosys,
});

unsafe extern "C" fn pep_listen(pep: *mut FidPep) -> c_int {
    // SAFETY: our passive endpoint.
    guard(|| code(unsafe { PepObj::of(pep) }.r.listen()))
}

unsafe extern "C" fn pep_reject(
    pep: *mut FidPep,
    handle: *mut Fid,
    param: *const c_void,
    paramlen: usize,
) -> c_int {
    guard(|| {
        // SAFETY: our passive endpoint; `param` per the C API.
        let (p, v) = unsafe { (PepObj::of(pep), bytes(param, paramlen)) };
        code(p.r.reject(handle as usize, v))
    })
}

/// The `fi_ops_cm` of a passive endpoint.
pub static PEP_CM_OPS: FiOpsCm = crate::fid::ops_table!(FiOpsCm {
    setname: pep_setname,
    getname: pep_getname,
    getpeer: getpeer_enosys,
    connect: connect_enosys,
    listen: pep_listen,
    accept: accept_enosys,
    reject: pep_reject,
    shutdown: shutdown_enosys,
    join: join_enosys,
});

crate::fid::open_for_info! {
    /// `fi_passive_ep` (the fabric table's slot).
    pub fn fabric_passive_ep(fabric: *mut FidFabric as FabricObj, info,
        pep: *mut *mut c_void, context) = |f| {
        let c = FidPep {
            fid: fid_header(FI_CLASS_PEP, context, &PEP_FI_OPS),
            ops: &PEP_OPS,
            cm: &PEP_CM_OPS,
        };
        // The ofi context is the C object: connection requests name it in their `fid`.
        let made = PepObj::into_c_with(c, |me| f.r.passive_ep_with(&info, me));
        // SAFETY: checked non-null.
        Ok(unsafe { put_result(pep, made.map(|p| p.cast())) })
    }
}
