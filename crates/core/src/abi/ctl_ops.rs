//! The lists of the control operations of an object class, and what is generated
//! from them.
//!
//! Like the data operations of an endpoint ([`crate::abi::ops`]), the operations of a
//! class are declared **once**, in one x-macro per class: `for_each_<class>_op!(gen)`
//! expands to `gen! { …the class's list… }`. Lists so far:
//! [`for_each_ep_ctl_op!`](crate::for_each_ep_ctl_op) (endpoint control),
//! [`for_each_cm_op!`](crate::for_each_cm_op) (connection management),
//! [`for_each_cq_op!`](crate::for_each_cq_op) (completion queues),
//! [`for_each_eq_op!`](crate::for_each_eq_op) (event queues),
//! [`for_each_cntr_op!`](crate::for_each_cntr_op) (counters),
//! [`for_each_wait_op!`](crate::for_each_wait_op) (wait sets),
//! [`for_each_av_op!`](crate::for_each_av_op) (address vectors),
//! [`for_each_mr_op!`](crate::for_each_mr_op) (memory regions),
//! [`for_each_domain_op!`](crate::for_each_domain_op) (domains),
//! [`for_each_pep_op!`](crate::for_each_pep_op) (passive endpoints),
//! [`for_each_fabric_op!`](crate::for_each_fabric_op) (fabrics) and
//! [`for_each_provider_op!`](crate::for_each_provider_op) (a provider's root table).
//!
//! | generated | generator | where |
//! | --- | --- | --- |
//! | the class's ops table: every slot, in list order, and its fingerprint entry | `ctl_table!` | `abi/tables.rs` |
//! | the plugin-side trampoline of each `op` and `close` entry and the `Adapt::<F>` table | `ctl_trampolines!` | `abi/adapt/<class>.rs` |
//! | the provider trait's method, with its default when the entry has one, and the required ones of `Unsupported` | `ctl_trait_methods!`, `ctl_unsupported!` | `provider.rs` |
//! | the host-side public method (`Counter::add`, `Counter::close` …) of `op` and `close` entries | `ctl_wrappers!` | `ep.rs` (endpoint, passive endpoint), `cq.rs`, `eq.rs`, `cntr.rs`, `wait.rs`, `mr.rs`, `av.rs`, `domain.rs`, `fabric.rs` |
//! | the hook's forwarder (of a `fn` entry: when it has a forward clause) | `ctl_forwarders!` | `ofi-hook` (`ep.rs`, `cq.rs`, `objects.rs`, `domain.rs`, `fabric.rs`) |
//!
//! # Grammar of a list
//!
//! ```text
//! /// doc of the table
//! class TableType ProviderTrait ObjOf HostType {
//!     entry*
//! }
//! ```
//!
//! `class` names the class in messages (`cntr`), `TableType` its ops table,
//! `ProviderTrait` the provider trait, `ObjOf` the alias naming the provider's type of
//! a family (`CntrOf<F>`), `HostType` the public wrapper. An entry is one of:
//!
//! ```text
//! /// doc
//! close;                                                      // the class's fi_close
//! /// doc
//! fn [@N] name(c_arg: CType, …) -> CRet [=> adapter]         // C conversion by hand
//!     [| [/// doc] [unsafe] fn(arg: Type, …) -> Ret [= [@this] default]
//!         [, forward | , forward [shown, …] |inner| expr [=> hooked[(extra, …)] | => method[(extra, …)]]
//!          | , observe [] |inner| read_op => method | , bypass [] |inner| expr]];
//! /// doc
//! op name(arg: Type, … [; s[s_len]: Elem, … [; arg: Type, …]]) [with err] [via Variant]
//!     [-> out T | -> val T | -> get T [fallback] | -> count usize | -> bytes Vec<u8> | -> fill usize]
//!     [= default];
//! ```
//!
//! - A `close` entry is the class's `fi_close`, generated whole: the slot
//!   `close(obj, err: *mut ErrBuf) -> i32` (the provider object's `close`, then its box
//!   is dropped: the adapter file names the box with `boxed_objects!`), the provider
//!   method `fn close(&self) -> Result<()>` (default `Ok(())`), the host method
//!   `close(&mut self)` (the node closes the object, then `Detach` points the handle
//!   at the `CLOSED` tables) and the hook's forwarder (`HookCalls::ctl` named `close`,
//!   which hands the call to `Hook::around`).
//! - A `fn` entry declares the slot (its full C signature, object first; `@N` for a
//!   slot appended by interface minor N, as in `abi_table!`) whose C conversion is
//!   written by hand, in the class's adapter file (`abi/adapt/<class>.rs`): its
//!   adapter (`adapter`, or `hand::<name>` without one) and the host method that calls
//!   the slot. After `|`, the provider method of the same name: its arguments after
//!   `&self`, its return type and its default (without one it is required;
//!   `Unsupported`'s is generated; `= @this default`: a default that needs the
//!   object, named `this` in it, as `self` cannot cross a macro's hygiene); its docs
//!   are the entry's and those after `|`.
//!   Then how the hook forwards it:
//!   - `forward`: `HookCalls::ctl` (a control call handed to `Hook::around`) named
//!     after the entry, showing every argument, calling the method of the same name
//!     and arguments on the object beneath;
//!   - `forward [a, b] |inner| expr`: showing `a` and `b`, running `expr` with the
//!     object beneath bound to `inner`; `=> hooked(extra, …)` wraps the object `expr`
//!     made, with the extra values, through the hook crate's `Hooked` trait;
//!     `=> method(extra, …)` hands it to `method` of the hook's type;
//!   - `observe [] |inner| read_op => method`: the hooks see the call as a read
//!     (`HookCalls::read` with `read_op`, an `ofi_hook::Op`), and `method` of the hook's
//!     type does it, given the object beneath and every argument (the CQ reads, where
//!     a hook merges completions of its own with those beneath);
//!   - `bypass [] |inner| expr`: `expr`, without the hook (calls that cannot fail);
//!   - nothing: the forwarder is written by hand.
//! - The class's adapter file defines `this::<F>(obj) -> &ProviderType` (how a slot
//!   reaches the provider's object: a plain box, or a box with the CQ's format next to
//!   it); the host type has `obj` and implements `TableOf` for the table
//!   (`host_object!` writes the host type of a class of one table: struct, `TableOf`,
//!   `Detach`, `AsFid`, `from_raw`); the hook type
//!   `fn forward(&self) -> (&Arc<H>, &ObjName, &Inner)`.
//! - An `op` entry is generated whole. Its arguments are passed unchanged, by value,
//!   from the host method through the slot to the provider method (scalars).
//!   The slot takes the object first and returns an `i32` status (0 or `-FI_x`).
//!   - `; s[s_len]: Elem` after the scalars: a slice, `&[Elem]` in the host and
//!     provider methods, `s: *const Elem, s_len: usize` in the slot (null with a
//!     non-zero length is `FI_EINVAL`); hooks print it as its length. A second `;`
//!     starts the scalars that come after the slices (`remove(; fi_addr[count]: u64;
//!     flags: u64)`). With the shape `()` only.
//!   - `; s[s_len]: u8 as ::std::ffi::c_void`: a slice whose slot pointer has another
//!     element type than the methods' slice (`*const c_void` for a C `void *` with a
//!     length, `&[u8]` in the methods); such an entry has this one slice and no
//!     scalars after it.
//!   - `with err`: the slot takes a last `err: *mut ErrBuf` where a failure leaves its
//!     message (a control call); the host method returns that message in its error.
//!     With the shape `()` only.
//!   - without `->`: the provider and host methods return `Result<()>`;
//!   - `-> out T`: the slot takes a last `out: *mut T` (`FI_EINVAL` when null), the
//!     provider and host methods return `Result<T>`;
//!   - `-> val T`: as `out`, but the provider method cannot fail (returns `T`).
//!   - `-> get T [fallback]`: as `val`, but the host method returns `T` too (`fallback`
//!     when the slot fails), and the hook forwards the call without seeing it (an
//!     accessor such as `fi_mr_key`, `fi_mr_desc`).
//!   - `-> count usize`: the slot returns an `isize` (a count, or `-FI_x`), the
//!     provider and host methods `Result<usize>`.
//!   - `-> bytes Vec<u8>`: the slot takes a last `out: *mut u8, out_len: *mut usize`
//!     (in: the buffer's size; out: the bytes' length, `FI_ETOOSMALL` when they do not
//!     fit), the provider and host methods return `Result<Vec<u8>>` (the host asks
//!     again with a larger buffer).
//!   - `-> fill usize`: the caller's buffer is filled: the slot takes a last
//!     `buf: *mut c_void, len: *mut usize` (in: the buffer's size; out: the bytes
//!     written; `FI_EINVAL` when `len` is null, or `buf` is null with a non-zero
//!     size), the provider and host methods a last `buf: &mut [u8]` and return
//!     `Result<usize>` (the bytes written).
//!   - `via Variant`: the hooks see the call as a read, `ofi_hook::Op::Variant`
//!     through `HookCalls::read`, rather than as a control call (`HookCalls::ctl`).
//!   - `= default`: the provider method's default body (an expression); without it
//!     the method is required.
//!
//! Adding an operation to a listed class is one `op` entry (appended: tables only
//! grow at the end) plus its implementation in the providers that support it — when
//! its shape is one of the above; otherwise a `fn` entry with the provider method's
//! signature and a forward clause, and its C conversion (adapter and host method) by
//! hand in the class's adapter file.
//!
//! The endpoint's lists and [`for_each_ep_data_op!`](crate::for_each_ep_data_op) are
//! separate: the data list keeps its own grammar (its generators, in this crate and in
//! others, match it as it is).
//!
//! # Invariants
//!
//! - The order of the entries is the order of the table's slots (after `size`); a
//!   table only grows at the end. The layout fingerprint covers each slot's name and
//!   signature, so a generated table that equals the hand-written one has the same
//!   fingerprint (pinned in `abi::tests::fingerprints_are_pinned`).
//! - A generated slot catches panics (`-FI_EOTHER`, logged) like every adapter.

/// The one list of an active endpoint's control operations (its data operations are
/// in [`for_each_ep_data_op!`](crate::for_each_ep_data_op); see the
/// [module docs](crate::abi::ctl_ops) for the grammar).
#[macro_export]
macro_rules! for_each_ep_ctl_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// Endpoint control operations (`fi_ops_ep` plus close, bind, control).
            ep EpTable EndpointOps EpOf Endpoint {
                /// Close the endpoint (`fi_close`): `FI_EBUSY` while aliases or contexts of it are
                /// open. Releases the bound objects. After a successful close every call returns
                /// `FI_EBADF`.
                close;
                /// `fi_ep_bind` (CQ, counter, AV, EQ, shared contexts).
                fn bind(ep: $crate::abi::raw::Obj, target: $crate::abi::raw::RawFidRef, flags: u64, err: *mut $crate::abi::raw::ErrBuf) -> i32 => ep_bind
                    | fn(target: $crate::provider::BindTarget<'_, F>, flags: $crate::OpFlags) -> $crate::Result<()>,
                        forward [target, flags] |ep| ep.bind(target.beneath(), flags) => bound(target, flags);
                /// `fi_enable`.
                fn enable(ep: $crate::abi::raw::Obj, err: *mut $crate::abi::raw::ErrBuf) -> i32 => ep_enable
                    | fn() -> $crate::Result<()> = Ok(()),
                        forward [] |ep| ep.enable() => enabled;
                /// `fi_control` with a provider-defined command.
                fn control(ep: $crate::abi::raw::Obj, command: i32, arg: *mut ::std::ffi::c_void, err: *mut $crate::abi::raw::ErrBuf) -> i32 => ep_control
                    | /// # Safety
                    /// `arg` is what `command` expects (the C API's contract of that command: null, or
                    /// valid for reads and writes of the command's argument type) for the duration of
                    /// the call. An implementation may rely on it only for the commands it knows;
                    /// unknown commands must be refused without touching `arg`.
                    unsafe fn(command: i32, arg: *mut ::std::ffi::c_void) -> $crate::Result<()> = $crate::provider::enosys("control command not supported"), forward;
                /// `fi_ep_alias`.
                fn alias(ep: $crate::abi::raw::Obj, flags: u64, out: *mut $crate::abi::raw::RawEp, err: *mut $crate::abi::raw::ErrBuf) -> i32 => ep_alias
                    | fn(flags: u64) -> $crate::Result<Self> = $crate::provider::enosys("endpoint aliases are not supported"),
                        forward [flags] |ep| ep.alias(flags) => derived("endpoint alias");
                /// `fi_cancel`.
                fn cancel(ep: $crate::abi::raw::Obj, context: usize) -> isize => ep_cancel
                    | fn(context: usize) -> $crate::Result<()> = $crate::provider::enosys_fast(), forward;
                /// `fi_getopt`; `optlen` is in/out.
                op getopt(level: i32, optname: i32) -> fill usize = $crate::provider::enoprotoopt();
                /// `fi_setopt`: set option `optname` of `level` to the bytes `optval`.
                op setopt(level: i32, optname: i32; optval[optlen]: u8 as ::std::ffi::c_void) = $crate::provider::enoprotoopt();
                /// `fi_tx_context` of a scalable endpoint.
                fn tx_ctx(sep: $crate::abi::raw::Obj, index: i32, attr: *const $crate::abi::raw::RawTxAttr, context: usize, out: *mut $crate::abi::raw::RawEp, err: *mut $crate::abi::raw::ErrBuf) -> i32 => ep_tx_ctx
                    | fn(index: i32, attr: &$crate::TxAttr, context: usize) -> $crate::Result<Self> = $crate::provider::enosys("transmit contexts are not supported"),
                        forward [index, context] |ep| ep.tx_context(index, attr) => derived("tx context");
                /// `fi_rx_context` of a scalable endpoint.
                fn rx_ctx(sep: $crate::abi::raw::Obj, index: i32, attr: *const $crate::abi::raw::RawRxAttr, context: usize, out: *mut $crate::abi::raw::RawEp, err: *mut $crate::abi::raw::ErrBuf) -> i32 => ep_rx_ctx
                    | fn(index: i32, attr: &$crate::RxAttr, context: usize) -> $crate::Result<Self> = $crate::provider::enosys("receive contexts are not supported"),
                        forward [index, context] |ep| ep.rx_context(index, attr) => derived("rx context");
                /// `fi_rx_size_left`.
                op rx_size_left() -> count usize = $crate::provider::enosys_fast();
                /// `fi_tx_size_left`.
                op tx_size_left() -> count usize = $crate::provider::enosys_fast();
                /// `fi_join` (minor 1): join the multicast group `addr`. `*out_mc` receives the
                /// membership object (released by `mc_close`), `*out_fi_addr` the fabric address
                /// that sends to the group use.
                fn @1 join(ep: $crate::abi::raw::Obj, addr: *const $crate::abi::raw::RawAddr, flags: u64, context: usize, out_mc: *mut $crate::abi::raw::Obj, out_fi_addr: *mut u64, err: *mut $crate::abi::raw::ErrBuf) -> i32 => ep_join
                    | /// The provider joins the multicast group `addr` (an address of the endpoint's
                    /// format) and returns the fabric address sends to the group use (`FI_MULTICAST`),
                    /// and reports the join on the endpoint's bound EQ as `FI_JOIN_COMPLETE` (with
                    /// `context`) when one is bound. The host pairs each successful join with exactly
                    /// one [`EndpointOps::leave`](crate::provider::EndpointOps::leave) of the returned
                    /// address, before the endpoint closes.
                    fn(addr: &$crate::Address, flags: u64, context: usize) -> $crate::Result<u64> = $crate::provider::enosys("multicast is not supported"),
                        forward [addr, flags, context] |ep| ep.join_with(addr, flags, context) => joined;
                /// `fi_close` of a membership from `join` (minor 1): leave the group and free
                /// the object.
                fn @1 mc_close(mc: $crate::abi::raw::Obj, err: *mut $crate::abi::raw::ErrBuf) -> i32 => ep_mc_close;
            }
        }
    };
}

/// The one list of an active endpoint's connection management operations (see the
/// [module docs](crate::abi::ctl_ops) for the grammar).
#[macro_export]
macro_rules! for_each_cm_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// Connection management of active endpoints (`fi_ops_cm`).
            cm CmTable EndpointOps EpOf Endpoint {
                /// `fi_setname`.
                op setname(; addr[addrlen]: u8) = $crate::provider::enosys("setname is not supported");
                /// `fi_getname`: this endpoint's address, in its address format (in the slot,
                /// `out_len` is in/out: `-FI_ETOOSMALL` with the needed size).
                op getname() -> bytes Vec<u8> = $crate::provider::enosys("getname is not supported");
                /// `fi_getpeer`: the connected peer's address; as `getname`.
                op getpeer() -> bytes Vec<u8> = $crate::provider::enosys("getpeer is not supported");
                /// `fi_connect` to `addr`, with connection data `param`.
                op connect(; addr[addrlen]: u8, param[paramlen]: u8) with err = $crate::provider::enosys("connect is not supported");
                /// `fi_accept`, with connection data `param`.
                op accept(; param[paramlen]: u8) with err = $crate::provider::enosys("accept is not supported");
                /// `fi_shutdown`.
                op shutdown(flags: u64) = $crate::provider::enosys("shutdown is not supported");
            }
        }
    };
}

/// The one list of a completion queue's operations (see the
/// [module docs](crate::abi::ctl_ops) for the grammar).
#[macro_export]
macro_rules! for_each_cq_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// Completion queue operations (`fi_ops_cq` plus close and the wait fd).
            cq CqTable CqOps CqOf CompletionQueue {
                /// Close the CQ (`fi_close`): `FI_EBUSY` while endpoints or counters are bound to
                /// it. After a successful close every call returns `FI_EBADF`.
                close;
                /// `fi_cq_read`: `buf` holds `count` entries of the CQ's format.
                fn read(cq: $crate::abi::raw::Obj, buf: *mut ::std::ffi::c_void, count: usize) -> isize => cq_read
                    | /// The provider fills `buf` (the CQ's format) and, when given, `src` with the
                    /// source address of each entry (`fi_cq_readfrom` arrives here too). Returns the
                    /// number of entries; `FI_EAGAIN` when empty, `FI_EAVAIL` when an error entry is
                    /// next. Drives progress.
                    fn(buf: $crate::cq::CqBuf<'_>, src: Option<&mut [u64]>) -> $crate::Result<usize>,
                        observe [] |cq| Op::CqRead => deliver;
                /// `fi_cq_readfrom`: also the source address of each entry.
                fn readfrom(cq: $crate::abi::raw::Obj, buf: *mut ::std::ffi::c_void, count: usize, src_addr: *mut u64) -> isize => cq_readfrom;
                /// `fi_cq_readerr`.
                fn readerr(cq: $crate::abi::raw::Obj, buf: *mut $crate::abi::raw::CqErrEntry, flags: u64) -> isize => cq_readerr
                    | /// The provider takes the next error entry (`FI_EAGAIN` if none), its error data
                    /// owned. The adapter delivers the data by the C rules: copied into the caller's
                    /// buffer (up to its size) when one is given, else through a buffer the adapter
                    /// keeps until the next `readerr`.
                    fn(flags: u64) -> $crate::Result<$crate::cq::CqError>,
                        observe [] |cq| Op::CqReaderr => deliver_error;
                /// `fi_cq_sread`; timeout in ms, -1 = forever.
                fn sread(cq: $crate::abi::raw::Obj, buf: *mut ::std::ffi::c_void, count: usize, cond: *const ::std::ffi::c_void, timeout: i32) -> isize => cq_sread
                    | /// As `read`, blocking up to `timeout` ms (-1 = forever) until `threshold` entries
                    /// (or one) are there; `FI_EAGAIN` on time-out (`fi_cq_sreadfrom` arrives here too).
                    fn(buf: $crate::cq::CqBuf<'_>, src: Option<&mut [u64]>, threshold: Option<usize>, timeout: i32) -> $crate::Result<usize> = $crate::provider::enosys_fast(),
                        observe [] |cq| Op::CqSread => deliver_waiting;
                /// `fi_cq_sreadfrom`.
                fn sreadfrom(cq: $crate::abi::raw::Obj, buf: *mut ::std::ffi::c_void, count: usize, src_addr: *mut u64, cond: *const ::std::ffi::c_void, timeout: i32) -> isize => cq_sreadfrom;
                /// `fi_cq_signal`: wake a thread blocked in `sread`.
                op signal() = $crate::provider::enosys("signal is not supported");
                /// `fi_cq_strerror`: write text for a provider error into `buf`; returns its length.
                fn strerror(cq: $crate::abi::raw::Obj, prov_errno: i32, err_data: *const ::std::ffi::c_void, buf: *mut u8, len: usize) -> isize => cq_strerror
                    | /// `err_data` is the error data of the last `readerr` when the caller passed it
                    /// back, else empty (the C call carries no length, so other data cannot be passed
                    /// on safely).
                    fn(prov_errno: i32, err_data: &[u8]) -> ::std::string::String = $crate::error::strerror(prov_errno).into_owned(),
                        bypass [] |cq| cq.strerror_with_data(prov_errno, err_data);
                /// The CQ's wait file descriptor, for poll/epoll (`FI_GETWAIT`).
                op wait_fd() -> out i32 = $crate::provider::enosys("this CQ has no wait fd");
            }
        }
    };
}

/// The one list of an event queue's operations (see the
/// [module docs](crate::abi::ctl_ops) for the grammar).
#[macro_export]
macro_rules! for_each_eq_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// Event queue operations (`fi_ops_eq` plus close, wait fd and CM info release).
            eq EqTable EqOps EqOf EventQueue {
                /// Close the EQ (`fi_close`): `FI_EBUSY` while objects are bound to it.
                close;
                /// `fi_eq_read`: one event into `buf` (an `EqEntry`, or an `EqCmEntry` plus
                /// connection data); returns the bytes written.
                fn read(eq: $crate::abi::raw::Obj, event: *mut u32, buf: *mut ::std::ffi::c_void, len: usize, flags: u64) -> isize => eq_read
                    | /// The next event (`FI_EAGAIN` if none, `FI_EAVAIL` if an error is next); with
                    /// `peek` the event stays queued.
                    fn(peek: bool) -> $crate::Result<$crate::eq::Event>,
                        forward [peek] |eq| if peek { eq.peek() } else { eq.read() };
                /// `fi_eq_readerr`.
                fn readerr(eq: $crate::abi::raw::Obj, buf: *mut $crate::abi::raw::EqErrEntry, flags: u64) -> isize => eq_readerr
                    | fn() -> $crate::Result<$crate::eq::EqErrorEntry>, forward;
                /// `fi_eq_write`.
                fn write(eq: $crate::abi::raw::Obj, event: u32, buf: *const ::std::ffi::c_void, len: usize, flags: u64) -> isize => eq_write
                    | /// Queue an application event.
                    fn(event: $crate::eq::Event) -> $crate::Result<()> = $crate::provider::enosys("write is not supported"),
                        forward [event] |eq| eq.write(&event);
                /// `fi_eq_sread`.
                fn sread(eq: $crate::abi::raw::Obj, event: *mut u32, buf: *mut ::std::ffi::c_void, len: usize, timeout: i32, flags: u64) -> isize => eq_sread
                    | /// As `read`, blocking up to `timeout` ms.
                    fn(timeout: i32, peek: bool) -> $crate::Result<$crate::eq::Event> = $crate::provider::enosys("sread is not supported"),
                        forward [timeout, peek] |eq| if peek { eq.sread_peek(timeout) } else { eq.sread(timeout) };
                /// `fi_eq_strerror`.
                fn strerror(eq: $crate::abi::raw::Obj, prov_errno: i32, err_data: *const ::std::ffi::c_void, buf: *mut u8, len: usize) -> isize => eq_strerror
                    | /// `err_data` is the error data of the last `readerr` when the caller passed it
                    /// back, else empty.
                    fn(prov_errno: i32, err_data: &[u8]) -> ::std::string::String = $crate::error::strerror(prov_errno).into_owned(),
                        bypass [] |eq| eq.strerror_with_data(prov_errno, err_data);
                /// The EQ's wait file descriptor.
                op wait_fd() -> out i32 = $crate::provider::enosys("this EQ has no wait fd");
                /// Release the info of a connection event read from this EQ.
                fn free_info(eq: $crate::abi::raw::Obj, info: *mut $crate::abi::raw::RawInfo) -> i32 => eq_free_info;
            }
        }
    };
}

/// The one list of a counter's operations (see the [module docs](crate::abi::ctl_ops)
/// for the grammar).
#[macro_export]
macro_rules! for_each_cntr_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// Counter operations (`fi_ops_cntr` plus close and the wait fd).
            cntr CntrTable CntrOps CntrOf Counter {
                /// Close the counter (`fi_close`): `FI_EBUSY` while endpoints or MRs are bound to it.
                close;
                /// `fi_cntr_read`: the number of completed operations (drives progress).
                op read() via CntrRead -> val u64;
                /// `fi_cntr_readerr`: the number of failed operations.
                op readerr() -> val u64;
                /// `fi_cntr_add`.
                op add(value: u64);
                /// `fi_cntr_set`.
                op set(value: u64);
                /// `fi_cntr_adderr`.
                op adderr(value: u64) = $crate::provider::enosys_fast();
                /// `fi_cntr_seterr`.
                op seterr(value: u64) = $crate::provider::enosys_fast();
                /// `fi_cntr_wait`: until the count reaches `threshold`, or `timeout` ms
                /// pass (`FI_ETIMEDOUT`; -1 = forever).
                op wait(threshold: u64, timeout: i32) = $crate::provider::enosys_fast();
                /// The counter's wait file descriptor.
                op wait_fd() -> out i32 = $crate::provider::enosys("this counter has no wait fd");
            }
        }
    };
}

/// The one list of a wait set's operations (see the [module docs](crate::abi::ctl_ops)
/// for the grammar).
#[macro_export]
macro_rules! for_each_wait_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// Wait set operations (`fi_ops_wait` plus close and the fd).
            wait WaitTable WaitOps WaitOf WaitSet {
                /// Close the wait set (`fi_close`).
                close;
                /// `fi_wait`: block until an object of the set is signalled, or `timeout`
                /// ms pass (-1 = forever).
                op wait(timeout: i32);
                /// The set's file descriptor.
                op fd() -> out i32 = $crate::provider::enosys("this wait set has no fd");
            }
        }
    };
}

/// The one list of a fabric's operations (see the [module docs](crate::abi::ctl_ops)
/// for the grammar).
#[macro_export]
macro_rules! for_each_fabric_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// Fabric operations (`fi_ops_fabric` plus close).
            fabric FabricTable FabricOps FabricOf Fabric {
                /// Close the fabric (`fi_close`): `FI_EBUSY` while objects opened from it are open.
                close;
                /// Open a domain (`fi_domain`); `out.ops` is a `DomainTable`.
                fn domain(fab: $crate::abi::raw::Obj, info: *const $crate::abi::raw::RawInfo, context: usize, out: *mut $crate::abi::raw::RawObj, err: *mut $crate::abi::raw::ErrBuf) -> i32 => fab_domain
                    | fn(info: &$crate::Info, context: usize) -> $crate::Result<Self::Domain>,
                        forward [context] |fabric| fabric.domain_with(info, context) => hooked;
                /// Open a passive endpoint (`fi_passive_ep`); `out.ops` is a `PepTable`.
                fn passive_ep(fab: $crate::abi::raw::Obj, info: *const $crate::abi::raw::RawInfo, context: usize, out: *mut $crate::abi::raw::RawObj, err: *mut $crate::abi::raw::ErrBuf) -> i32 => fab_pep
                    | fn(info: &$crate::Info, context: usize) -> $crate::Result<Self::PassiveEp> = $crate::provider::enosys("passive endpoints are not supported"),
                        forward [context] |fabric| fabric.passive_ep_with(info, context) => hooked;
                /// Open an event queue (`fi_eq_open`); `out.ops` is an `EqTable`.
                fn eq_open(fab: $crate::abi::raw::Obj, attr: *const $crate::abi::raw::RawEqAttr, context: usize, out: *mut $crate::abi::raw::RawObj, err: *mut $crate::abi::raw::ErrBuf) -> i32 => fab_eq_open
                    | fn(attr: &$crate::eq::EqAttr, context: usize) -> $crate::Result<Self::Eq> = $crate::provider::enosys("event queues are not supported"),
                        forward [attr, context] |fabric| fabric.eq_open_with(attr, context) => hooked;
                /// Open a wait set (`fi_wait_open`); `out.ops` is a `WaitTable`.
                fn wait_open(fab: $crate::abi::raw::Obj, attr: *const $crate::abi::raw::RawWaitAttr, out: *mut $crate::abi::raw::RawObj, err: *mut $crate::abi::raw::ErrBuf) -> i32 => fab_wait_open
                    | fn(attr: &$crate::wait::WaitAttr) -> $crate::Result<Self::Wait> = $crate::provider::enosys("wait sets are not supported"),
                        forward [attr] |fabric| fabric.wait_open(attr) => hooked;
                /// `fi_trywait` over CQs, EQs, counters and wait sets of this fabric.
                fn trywait(fab: $crate::abi::raw::Obj, objs: *const $crate::abi::raw::RawFidRef, count: usize) -> i32 => fab_trywait
                    | /// `Ok` if the caller may block on the objects' wait fds, else `FI_EAGAIN`
                    /// (progress first).
                    fn(objs: &[$crate::provider::TryWaitRef<'_, Self>]) -> $crate::Result<()> = $crate::provider::enosys("trywait is not supported"),
                        forward [] |fabric| fabric.trywait(&objs.beneath_idle()?);
            }
        }
    };
}

/// The one list of a domain's operations (see the [module docs](crate::abi::ctl_ops)
/// for the grammar).
#[macro_export]
macro_rules! for_each_domain_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// Domain operations (`fi_ops_domain` and `fi_ops_mr` plus close and bind).
            domain DomainTable DomainOps DomainOf Domain {
                /// Close the domain (`fi_close`): `FI_EBUSY` while endpoints, CQs, counters, AVs or
                /// MRs of it are open.
                close;
                /// Bind an event queue (`fi_domain_bind`).
                fn bind(dom: $crate::abi::raw::Obj, target: $crate::abi::raw::RawFidRef, flags: u64, err: *mut $crate::abi::raw::ErrBuf) -> i32 => dom_bind;
                /// Open an active endpoint (`fi_endpoint2`; flags 0 = `fi_endpoint`).
                fn endpoint(dom: $crate::abi::raw::Obj, info: *const $crate::abi::raw::RawInfo, context: usize, flags: u64, out: *mut $crate::abi::raw::RawEp, err: *mut $crate::abi::raw::ErrBuf) -> i32 => dom_endpoint
                    | fn(info: &$crate::Info, context: usize, flags: u64) -> $crate::Result<Self::Endpoint>,
                        forward [context, flags] |domain| domain.endpoint_with(info, context, flags) => hooked(Some(info), "endpoint");
                /// Open a scalable endpoint (`fi_scalable_ep`).
                fn scalable_ep(dom: $crate::abi::raw::Obj, info: *const $crate::abi::raw::RawInfo, context: usize, out: *mut $crate::abi::raw::RawEp, err: *mut $crate::abi::raw::ErrBuf) -> i32 => dom_scalable_ep
                    | fn(info: &$crate::Info, context: usize) -> $crate::Result<Self::Endpoint> = $crate::provider::enosys("scalable endpoints are not supported"),
                        forward [context] |domain| domain.scalable_ep(info) => hooked(Some(info), "scalable endpoint");
                /// Open a completion queue; `out.ops` is a `CqTable`.
                fn cq_open(dom: $crate::abi::raw::Obj, attr: *const $crate::abi::raw::RawCqAttr, context: usize, out: *mut $crate::abi::raw::RawObj, err: *mut $crate::abi::raw::ErrBuf) -> i32 => dom_cq_open
                    | /// `attr.format` is never `Unspec` here (the host resolves it to `Context`).
                    fn(attr: &$crate::cq::CqAttr, context: usize) -> $crate::Result<Self::Cq>,
                        forward [attr, context] |domain| domain.cq_open_with(attr, context) => hooked(attr.size);
                /// Open a counter; `out.ops` is a `CntrTable`.
                fn cntr_open(dom: $crate::abi::raw::Obj, attr: *const $crate::abi::raw::RawCntrAttr, context: usize, out: *mut $crate::abi::raw::RawObj, err: *mut $crate::abi::raw::ErrBuf) -> i32 => dom_cntr_open
                    | fn(attr: &$crate::cntr::CntrAttr, context: usize) -> $crate::Result<Self::Cntr> = $crate::provider::enosys("counters are not supported"),
                        forward [attr, context] |domain| domain.cntr_open_with(attr, context) => hooked;
                /// Open an address vector; `out.ops` is an `AvTable`.
                fn av_open(dom: $crate::abi::raw::Obj, attr: *const $crate::abi::raw::RawAvAttr, context: usize, out: *mut $crate::abi::raw::RawObj, err: *mut $crate::abi::raw::ErrBuf) -> i32 => dom_av_open
                    | fn(attr: &$crate::av::AvAttr, context: usize) -> $crate::Result<Self::Av> = $crate::provider::enosys("address vectors are not supported"),
                        forward [attr, context] |domain| domain.av_open(attr) => hooked;
                /// Register one buffer (`fi_mr_reg`).
                fn mr_reg(dom: $crate::abi::raw::Obj, buf: *const ::std::ffi::c_void, len: usize, access: u64, offset: u64, requested_key: u64, flags: u64, context: usize, out: *mut $crate::abi::raw::RawMr, err: *mut $crate::abi::raw::ErrBuf) -> i32 => dom_mr_reg
                    | /// `fi_mr_reg`, `fi_mr_regv` and `fi_mr_regattr` all arrive at this method.
                    fn(attr: &$crate::mr::MrAttr<'_>, flags: u64) -> $crate::Result<Self::Mr> = $crate::provider::enosys("memory registration is not supported"),
                        forward [flags] |domain| {
                            // SAFETY: the host's caller made the same promise for these
                            // buffers (they stay valid until the region closes, which is
                            // before the hook's region is dropped).
                            unsafe { domain.mr_regattr(attr, flags) }
                        } => hooked;
                /// Register buffers (`fi_mr_regv`).
                fn mr_regv(dom: $crate::abi::raw::Obj, iov: *const $crate::abi::raw::Iov, count: usize, access: u64, offset: u64, requested_key: u64, flags: u64, context: usize, out: *mut $crate::abi::raw::RawMr, err: *mut $crate::abi::raw::ErrBuf) -> i32 => dom_mr_regv;
                /// Register with attributes (`fi_mr_regattr`).
                fn mr_regattr(dom: $crate::abi::raw::Obj, attr: *const $crate::abi::raw::RawMrAttr, flags: u64, out: *mut $crate::abi::raw::RawMr, err: *mut $crate::abi::raw::ErrBuf) -> i32 => dom_mr_regattr;
                /// `fi_query_atomic`.
                fn query_atomic(dom: $crate::abi::raw::Obj, datatype: u32, op: u32, attr: *mut $crate::abi::raw::AtomicAttr, flags: u64) -> i32 => dom_query_atomic
                    | fn(datatype: $crate::Datatype, op: $crate::AtomicOp, flags: u64) -> $crate::Result<$crate::abi::raw::AtomicAttr> = $crate::provider::enosys("atomics are not supported"), forward;
                /// Open a shared transmit context (`fi_stx_context`).
                fn stx_ctx(dom: $crate::abi::raw::Obj, attr: *const $crate::abi::raw::RawTxAttr, context: usize, out: *mut $crate::abi::raw::RawEp, err: *mut $crate::abi::raw::ErrBuf) -> i32 => dom_stx_ctx
                    | fn(attr: &$crate::TxAttr, context: usize) -> $crate::Result<Self::Endpoint> = $crate::provider::enosys("shared transmit contexts are not supported"),
                        forward [context] |domain| domain.stx_context(attr) => hooked(None, "shared tx context");
                /// Open a shared receive context (`fi_srx_context`).
                fn srx_ctx(dom: $crate::abi::raw::Obj, attr: *const $crate::abi::raw::RawRxAttr, context: usize, out: *mut $crate::abi::raw::RawEp, err: *mut $crate::abi::raw::ErrBuf) -> i32 => dom_srx_ctx
                    | fn(attr: &$crate::RxAttr, context: usize) -> $crate::Result<Self::Endpoint> = $crate::provider::enosys("shared receive contexts are not supported"),
                        forward [context] |domain| domain.srx_context(attr) => hooked(None, "shared rx context");
            }
        }
    };
}

/// The one list of a passive endpoint's operations (see the [module docs](crate::abi::ctl_ops)
/// for the grammar).
#[macro_export]
macro_rules! for_each_pep_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// Passive endpoint operations.
            pep PepTable PassiveEndpointOps PepOf PassiveEndpoint {
                /// Close the passive endpoint (`fi_close`).
                close;
                /// `fi_pep_bind` (an event queue).
                fn bind(pep: $crate::abi::raw::Obj, target: $crate::abi::raw::RawFidRef, flags: u64, err: *mut $crate::abi::raw::ErrBuf) -> i32 => pep_bind;
                /// `fi_listen`.
                op listen() with err;
                /// `fi_reject` the connection request `handle` (from its info), with data
                /// `param`.
                op reject(handle: usize; param[paramlen]: u8) with err = $crate::provider::enosys("reject is not supported");
                /// `fi_getname`: the passive endpoint's address.
                op getname() -> bytes Vec<u8> = $crate::provider::enosys("getname is not supported");
                /// `fi_setname`.
                op setname(; addr[addrlen]: u8) = $crate::provider::enosys("setname is not supported");
                /// `fi_getopt`.
                op getopt(level: i32, optname: i32) -> fill usize = $crate::provider::enoprotoopt();
                /// `fi_setopt`: set option `optname` of `level` to the bytes `optval`.
                op setopt(level: i32, optname: i32; optval[optlen]: u8 as ::std::ffi::c_void) = $crate::provider::enoprotoopt();
                /// `fi_control` of a passive endpoint (minor 3), e.g. `FI_BACKLOG`.
                fn @3 control(pep: $crate::abi::raw::Obj, command: i32, arg: *mut ::std::ffi::c_void, err: *mut $crate::abi::raw::ErrBuf) -> i32 => pep_control
                    | /// # Safety
                    /// `arg` is what `command` expects (the C API's contract of that command: null, or
                    /// valid for reads and writes of the command's argument type) for the duration of
                    /// the call. An implementation may rely on it only for the commands it knows;
                    /// unknown commands must be refused without touching `arg`.
                    unsafe fn(command: i32, arg: *mut ::std::ffi::c_void) -> $crate::Result<()> = $crate::provider::enosys("control command not supported"), forward;
            }
        }
    };
}

/// The one list of an address vector's operations (see the [module docs](crate::abi::ctl_ops)
/// for the grammar).
#[macro_export]
macro_rules! for_each_av_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// Address vector operations (`fi_ops_av` plus close and bind).
            av AvTable AvOps AvOf AddressVector {
                /// Close the AV (`fi_close`): `FI_EBUSY` while endpoints are bound to it.
                close;
                /// `fi_av_bind` (an event queue).
                fn bind(av: $crate::abi::raw::Obj, target: $crate::abi::raw::RawFidRef, flags: u64, err: *mut $crate::abi::raw::ErrBuf) -> i32 => av_bind;
                /// `fi_av_insert`: returns the number inserted; `fi_addr` gets one entry each.
                fn insert(av: $crate::abi::raw::Obj, addrs: *const $crate::abi::raw::RawAddr, count: usize, fi_addr: *mut u64, flags: u64, context: usize) -> i32 => av_insert
                    | /// One fabric address per address into `fi_addr` (same length;
                    /// `FI_ADDR_NOTAVAIL` for failures). Returns the number inserted.
                    fn(addrs: &[$crate::Address], fi_addr: &mut [u64], flags: u64, context: usize) -> $crate::Result<usize>,
                        forward [flags, context] |av| av.insert_into(addrs, fi_addr, flags, context);
                /// `fi_av_insertsvc`.
                fn insertsvc(av: $crate::abi::raw::Obj, node: $crate::abi::raw::RawStr, service: $crate::abi::raw::RawStr, fi_addr: *mut u64, flags: u64, context: usize) -> i32 => av_insertsvc
                    | fn(node: &str, service: &str, fi_addr: &mut u64, flags: u64, context: usize) -> $crate::Result<usize> = $crate::provider::enosys("insertsvc is not supported"),
                        forward [node, service, flags] |av| av.insertsvc(node, service, flags).map(|a| {
                            *fi_addr = a;
                            1
                        });
                /// `fi_av_insertsym`.
                fn insertsym(av: $crate::abi::raw::Obj, node: $crate::abi::raw::RawStr, nodecnt: usize, service: $crate::abi::raw::RawStr, svccnt: usize, fi_addr: *mut u64, flags: u64, context: usize) -> i32 => av_insertsym
                    | /// `fi_addr` has `nodecnt * svccnt` entries.
                    fn(node: &str, nodecnt: usize, service: &str, svccnt: usize, fi_addr: &mut [u64], flags: u64, context: usize) -> $crate::Result<usize> = $crate::provider::enosys("insertsym is not supported"),
                        forward [node, nodecnt, service, svccnt, flags] |av| av.insertsym(node, nodecnt, service, svccnt, flags).map(|v| {
                            for (slot, a) in fi_addr.iter_mut().zip(&v) {
                                *slot = *a;
                            }
                            v.iter().filter(|a| **a != $crate::ADDR_NOTAVAIL).count()
                        });
                /// `fi_av_remove`: forget the fabric addresses `fi_addr`.
                op remove(; fi_addr[count]: u64; flags: u64);
                /// `fi_av_lookup`: the address bytes (in/out `addrlen`; `-FI_ETOOSMALL` with the
                /// needed size) and its format.
                fn lookup(av: $crate::abi::raw::Obj, fi_addr: u64, addr: *mut u8, addrlen: *mut usize, format: *mut u32) -> i32 => av_lookup
                    | fn(fi_addr: u64) -> $crate::Result<$crate::Address>, forward;
                /// `fi_av_straddr`: text of `addr` into `buf` (in/out `len`, as `lookup`).
                fn straddr(av: $crate::abi::raw::Obj, addr: $crate::abi::raw::RawAddr, buf: *mut u8, len: *mut usize) -> i32 => av_straddr
                    | fn(addr: &$crate::Address) -> ::std::string::String = addr.to_addr_str(),
                        bypass [] |av| av.straddr(addr).unwrap_or_else(|_| addr.to_addr_str());
            }
        }
    };
}

/// The one list of a memory region's operations (see the [module docs](crate::abi::ctl_ops)
/// for the grammar).
#[macro_export]
macro_rules! for_each_mr_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// Memory region operations.
            mr MrTable MrOps MrOf MemoryRegion {
                /// Close (deregister) the region (`fi_close`).
                close;
                /// `fi_mr_key`: the key peers use (`FI_KEY_NOTAVAIL` from the host when
                /// the slot fails).
                op key() -> get u64 [$crate::KEY_NOTAVAIL];
                /// `fi_mr_desc`: what data calls take as `desc` (null when none).
                op desc() -> get *mut ::std::ffi::c_void [::std::ptr::null_mut()] = ::std::ptr::null_mut();
                /// `fi_mr_bind` (an endpoint or counter, with `FI_MR_ENDPOINT`).
                fn bind(mr: $crate::abi::raw::Obj, target: $crate::abi::raw::RawFidRef, flags: u64, err: *mut $crate::abi::raw::ErrBuf) -> i32 => mr_bind
                    | fn(target: $crate::provider::MrBindTarget<'_, F>, flags: u64) -> $crate::Result<()> = $crate::provider::enosys("MR bind is not supported"),
                        forward [flags] |mr| mr.bind(target.beneath(), flags);
                /// `fi_mr_refresh`: the region's pages are now `iov`.
                op refresh(; iov[count]: $crate::abi::raw::Iov; flags: u64) = $crate::provider::enosys("MR refresh is not supported");
                /// `fi_mr_enable`.
                op enable() with err = Ok(());
            }
        }
    };
}

/// The one list of a provider's root table (what `PluginEntry::init` hands back; see
/// the [module docs](crate::abi::ctl_ops) for the grammar). Its slots are adapted by
/// hand (the `prov_` adapters of `abi/adapt/mod.rs`, which also build
/// `ProvAdapt::<P>::TABLE` from this list); the provider methods they reach are
/// [`Provider`](crate::provider::Provider)'s, and hooks do not forward them.
#[macro_export]
macro_rules! for_each_provider_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            /// The provider's root table (what `PluginEntry::init` hands back).
            provider ProviderTable Provider ProvAdapt ProviderHandle {
                /// Answer a getinfo request; the result is owned by the provider until
                /// `free_getinfo`. Returns 0 (the outcome, including errors, is in `out`).
                fn getinfo(prov: $crate::abi::raw::Obj, req: *const $crate::abi::wire::RawGetinfoRequest, out: *mut $crate::abi::wire::RawGetinfoResult) -> i32 => prov_getinfo
                    | /// The default matches [`Provider::info_templates`] with the framework's
                    /// rules and the default IP resolver.
                    fn(req: &$crate::getinfo::GetinfoRequest) -> $crate::getinfo::GetinfoOutcome
                        = @provider $crate::getinfo::match_templates(
                            Self::NAME,
                            Self::VERSION,
                            &provider.info_templates(),
                            req,
                            &$crate::getinfo::IpResolver,
                        );
                /// Free a result `getinfo` produced.
                fn free_getinfo(prov: $crate::abi::raw::Obj, out: *mut $crate::abi::wire::RawGetinfoResult) -> i32 => prov_free_getinfo;
                /// Open a fabric for `info`.
                fn fabric(prov: $crate::abi::raw::Obj, info: *const $crate::abi::raw::RawInfo, context: usize, out: *mut $crate::abi::raw::RawObj, err: *mut $crate::abi::raw::ErrBuf) -> i32 => prov_fabric
                    | /// Open a fabric for `info` (one of this provider's results).
                    fn(info: &$crate::Info) -> $crate::Result<Self::Fabric>;
                /// Release the provider (after every object it created is closed).
                fn cleanup(prov: $crate::abi::raw::Obj) -> i32 => prov_cleanup;
            }
        }
    };
}

/// The return type of an `op` entry's provider method: `()`, `out T`, `val T`,
/// `count T`, `bytes T`.
#[doc(hidden)]
#[macro_export]
macro_rules! __ctl_prov_ret {
    () => { $crate::Result<()> };
    (out $t:ty) => { $crate::Result<$t> };
    (val $t:ty) => { $t };
    (count $t:ty) => { $crate::Result<$t> };
    (bytes $t:ty) => { $crate::Result<$t> };
    (fill $t:ty) => { $crate::Result<$t> };
}

/// The return type of an `op` entry's host method: `Result<()>` or `Result<T>`.
#[doc(hidden)]
#[macro_export]
macro_rules! __ctl_host_ret {
    () => { $crate::Result<()> };
    ($shape:ident $t:ty) => { $crate::Result<$t> };
}

/// The provider method of one entry (of a `fn` entry: when it gives the provider
/// method's signature after `|`).
#[doc(hidden)]
#[macro_export]
macro_rules! __ctl_trait_method {
    ($ctx:tt fn $name:ident $adapter:tt [$($doc:tt)*] [$($unsafe:ident)?] ($($p:ident : $pt:ty),*) -> [$pr:ty] [$def:expr] $fwd:tt) => {
        $($doc)*
        #[allow(unused_variables, clippy::too_many_arguments)]
        $($unsafe)? fn $name(&self, $($p: $pt),*) -> $pr {
            $def
        }
    };
    ($ctx:tt fn $name:ident $adapter:tt [$($doc:tt)*] [$($unsafe:ident)?] ($($p:ident : $pt:ty),*) -> [$pr:ty] [@ $this:ident $def:expr] $fwd:tt) => {
        $($doc)*
        #[allow(unused_variables, clippy::too_many_arguments)]
        $($unsafe)? fn $name(&self, $($p: $pt),*) -> $pr {
            let $this = self;
            $def
        }
    };
    ($ctx:tt fn $name:ident $adapter:tt [$($doc:tt)*] [$($unsafe:ident)?] ($($p:ident : $pt:ty),*) -> [$pr:ty] [] $fwd:tt) => {
        $($doc)*
        #[allow(clippy::too_many_arguments)]
        $($unsafe)? fn $name(&self, $($p: $pt),*) -> $pr;
    };
    ($ctx:tt fn $($rest:tt)*) => {};
    ($ctx:tt $(#[$doc:meta])* close) => {
        /// Close the object (`fi_close`): called at most once, then the object is
        /// dropped; an error keeps it open.
        fn close(&self) -> $crate::Result<()> {
            Ok(())
        }
    };
    ({} $(#[$doc:meta])* op $name:ident $args:tt () () [] [get $rt:ty [$fb:expr]] $V:tt $def:tt) => {
        $crate::__ctl_trait_method! { {} $(#[$doc])* op $name $args () () [] [val $rt] $V $def }
    };
    ({} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [fill $rt:ty] [] [$def:expr]) => {
        $(#[$doc])*
        #[allow(unused_variables)]
        fn $name(&self, $($a: $t,)* buf: &mut [u8]) -> $crate::Result<$rt> {
            $def
        }
    };
    ({} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [fill $rt:ty] [] []) => {
        $(#[$doc])*
        fn $name(&self, $($a: $t,)* buf: &mut [u8]) -> $crate::Result<$rt>;
    };
    ({} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) ($($b:ident $blen:ident [$bt:ty] $bc:tt),*) ($($c:ident : $ct:ty),*) $err:tt [$($shape:ident $rt:ty)?] [$($V:ident)?] [$def:expr]) => {
        $(#[$doc])*
        #[allow(unused_variables)]
        fn $name(&self, $($a: $t,)* $($b: &[$bt],)* $($c: $ct),*) -> $crate::__ctl_prov_ret!($($shape $rt)?) {
            $def
        }
    };
    ({} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) ($($b:ident $blen:ident [$bt:ty] $bc:tt),*) ($($c:ident : $ct:ty),*) $err:tt [$($shape:ident $rt:ty)?] [$($V:ident)?] []) => {
        $(#[$doc])*
        fn $name(&self, $($a: $t,)* $($b: &[$bt],)* $($c: $ct),*) -> $crate::__ctl_prov_ret!($($shape $rt)?);
    };
}

/// The hook's forwarder of one entry (of a `fn` entry: when it has a forward clause;
/// `forward [..] |inner| expr => wrap` hands the result on through [`__ctl_wrap!`]). The
/// hook type
/// provides `forward(&self) -> (&H, &ObjName, &Inner)`.
#[doc(hidden)]
#[macro_export]
macro_rules! __ctl_forwarder {
    ($ctx:tt fn $name:ident $adapter:tt $doc:tt [] ($($p:ident : $pt:ty),*) -> [$pr:ty] $def:tt [forward]) => {
        fn $name(&self, $($p: $pt),*) -> $pr {
            let (h, obj, inner) = self.forward();
            h.ctl(obj, stringify!($name), || $crate::__ctl_args!([$($p),*] [] []), || {
                inner.$name($($p),*)
            })
        }
    };
    ($ctx:tt fn $name:ident $adapter:tt $doc:tt [] ($($p:ident : $pt:ty),*) -> [$pr:ty] $def:tt [forward [$($show:ident),*] |$fi:ident| ($fe:expr) []]) => {
        #[allow(unused_variables)]
        fn $name(&self, $($p: $pt),*) -> $pr {
            let (h, obj, inner) = self.forward();
            h.ctl(obj, stringify!($name), || $crate::__ctl_args!([$($show),*] [] []), || {
                let $fi = inner;
                $fe
            })
        }
    };
    ($ctx:tt fn $name:ident $adapter:tt $doc:tt [] ($($p:ident : $pt:ty),*) -> [$pr:ty] $def:tt [forward [$($show:ident),*] |$fi:ident| ($fe:expr) [$wrap:ident $(($($wx:expr),*))?]]) => {
        #[allow(unused_variables, clippy::unit_arg)]
        fn $name(&self, $($p: $pt),*) -> $pr {
            let (h, obj, inner) = self.forward();
            let made = h.ctl(obj, stringify!($name), || $crate::__ctl_args!([$($show),*] [] []), || {
                let $fi = inner;
                $fe
            })?;
            Ok($crate::__ctl_wrap!(self, h, made, $wrap $(, $($wx),*)?))
        }
    };
    ($ctx:tt fn $name:ident $adapter:tt $doc:tt [] ($($p:ident : $pt:ty),*) -> [$pr:ty] $def:tt [observe [] |$fi:ident| ($fe:expr) [$method:ident]]) => {
        fn $name(&self, $($p: $pt),*) -> $pr {
            let (h, obj, inner) = self.forward();
            h.read(obj, $fe, || {
                let $fi = inner;
                self.$method($fi, $($p),*)
            })
        }
    };
    ($ctx:tt fn $name:ident $adapter:tt $doc:tt [] ($($p:ident : $pt:ty),*) -> [$pr:ty] $def:tt [bypass [] |$fi:ident| ($fe:expr) []]) => {
        fn $name(&self, $($p: $pt),*) -> $pr {
            let $fi = self.forward().2;
            $fe
        }
    };
    ($ctx:tt fn $name:ident $adapter:tt $doc:tt [unsafe] ($($p:ident : $pt:ty),*) -> [$pr:ty] $def:tt [forward]) => {
        unsafe fn $name(&self, $($p: $pt),*) -> $pr {
            let (h, obj, inner) = self.forward();
            h.ctl(obj, stringify!($name), || $crate::__ctl_args!([$($p),*] [] []), || {
                // SAFETY: the arguments are as this method's contract says (the
                // object beneath receives them unchanged, under the same contract).
                unsafe { inner.$name($($p),*) }
            })
        }
    };
    ($ctx:tt fn $($rest:tt)*) => {};
    ($ctx:tt $(#[$doc:meta])* close) => {
        fn close(&self) -> $crate::Result<()> {
            let (h, obj, _) = self.forward();
            h.ctl(obj, "close", ::std::string::String::new, || Ok(()))
        }
    };
    // An accessor: forwarded without the hook.
    ({} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [get $rt:ty [$fb:expr]] [] [$($def:expr)?]) => {
        fn $name(&self, $($a: $t),*) -> $rt {
            self.forward().2.$name($($a),*)
        }
    };
    ({} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [fill $rt:ty] [] [$($def:expr)?]) => {
        fn $name(&self, $($a: $t,)* buf: &mut [u8]) -> $crate::Result<$rt> {
            let (h, obj, inner) = self.forward();
            let buf_len = buf.len();
            h.ctl(obj, stringify!($name), || $crate::__ctl_args!([$($a,)* buf_len] [] []), || {
                inner.$name($($a,)* buf)
            })
        }
    };
    // Seen as a read of the object (`HookCalls::read`).
    ({} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [val $rt:ty] [$V:ident] [$($def:expr)?]) => {
        fn $name(&self, $($a: $t),*) -> $rt {
            let (h, obj, inner) = self.forward();
            // The C API has no error for this call: an error reads as the default.
            h.read(obj, Op::$V, || inner.$name($($a),*)).unwrap_or_default()
        }
    };
    ({} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [val $rt:ty] [] [$($def:expr)?]) => {
        fn $name(&self, $($a: $t),*) -> $rt {
            let (h, obj, inner) = self.forward();
            // The C API has no error for this call: an error reads as the default.
            h.ctl(obj, stringify!($name), || $crate::__ctl_args!([$($a),*] [] []), || {
                inner.$name($($a),*)
            })
            .unwrap_or_default()
        }
    };
    ({} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) ($($b:ident $blen:ident [$bt:ty] $bc:tt),*) ($($c:ident : $ct:ty),*) $err:tt [$($shape:ident $rt:ty)?] [] [$($def:expr)?]) => {
        fn $name(&self, $($a: $t,)* $($b: &[$bt],)* $($c: $ct),*) -> $crate::__ctl_prov_ret!($($shape $rt)?) {
            let (h, obj, inner) = self.forward();
            h.ctl(obj, stringify!($name), || $crate::__ctl_args!([$($a),*] [$($b),*] [$($c),*]), || {
                inner.$name($($a,)* $($b,)* $($c),*)
            })
        }
    };
}

/// How a hook's forwarder hands on what the call beneath made: `hooked` wraps it
/// (alone, or in a tuple with the entry's extra values) through the hook crate's
/// `Hooked` trait; another name is a method of the hook's type, given it and the extra
/// values.
#[doc(hidden)]
#[macro_export]
macro_rules! __ctl_wrap {
    ($this:ident, $h:ident, $made:ident, hooked) => {
        Hooked::hooked($made, $h.clone())
    };
    ($this:ident, $h:ident, $made:ident, hooked $(, $wx:expr)+) => {
        Hooked::hooked(($made $(, $wx)+), $h.clone())
    };
    ($this:ident, $h:ident, $made:ident, $method:ident $(, $wx:expr)*) => {
        $this.$method($made $(, $wx)*)
    };
}

/// The arguments of a call as hooks print them: `name=value` separated by spaces
/// (a byte slice `b` as `b_len=N`).
#[doc(hidden)]
#[macro_export]
macro_rules! __ctl_args {
    ([$($a:ident),*] [$($b:ident),*] [$($c:ident),*]) => {{
        let parts: &[::std::string::String] = &[
            $(format!("{}={:?}", stringify!($a), $a),)*
            $(format!("{}_len={}", stringify!($b), $b.len()),)*
            $(format!("{}={:?}", stringify!($c), $c),)*
        ];
        parts.join(" ")
    }};
}

/// Passes each entry of a list, normalized, to the macro `[$each]` with the context
/// `{ctx}`: a `fn` entry as `{ctx} fn name [adapter]`, an `op` entry as
/// `{ctx} #[doc]* op name(args) (s s_len [Elem], …) (args after) [err] [shape T]
/// [Variant] [default]` (the slices, the scalars after them, `[err]` or `[]`). Used by the generators
/// whose output is a sequence of items or statements.
#[doc(hidden)]
#[macro_export]
macro_rules! __ctl_each {
    ([$($each:tt)+] $ctx:tt ) => {};
    ([$($each:tt)+] $ctx:tt $(#[$doc:meta])* close; $($rest:tt)*) => {
        $($each)+! { $ctx $(#[$doc])* close }
        $crate::__ctl_each! { [$($each)+] $ctx $($rest)* }
    };
    ([$($each:tt)+] $ctx:tt $(#[$doc:meta])* fn $(@ $since:literal)? $name:ident ($($a:ident : $t:ty),* $(,)?) -> $r:ty $(=> $adapter:ident)?
        | $(#[$pdoc:meta])* fn ($($p:ident : $pt:ty),* $(,)?) -> $pr:ty $(= $(@ $this:ident)? $pdef:expr)? $(, $fwd:ident $([$($show:ident),*] |$fi:ident| $fe:expr $(=> $wrap:ident $(($($wx:expr),*))?)?)?)?; $($rest:tt)*) => {
        $($each)+! { $ctx fn $name [$($adapter)?] [$(#[$doc])* $(#[$pdoc])*] [] ($($p: $pt),*) -> [$pr] [$($(@ $this)? $pdef)?] [$($fwd $([$($show),*] |$fi| ($fe) [$($wrap $(($($wx),*))?)?])?)?] }
        $crate::__ctl_each! { [$($each)+] $ctx $($rest)* }
    };
    ([$($each:tt)+] $ctx:tt $(#[$doc:meta])* fn $(@ $since:literal)? $name:ident ($($a:ident : $t:ty),* $(,)?) -> $r:ty $(=> $adapter:ident)?
        | $(#[$pdoc:meta])* unsafe fn ($($p:ident : $pt:ty),* $(,)?) -> $pr:ty $(= $(@ $this:ident)? $pdef:expr)? $(, $fwd:ident $([$($show:ident),*] |$fi:ident| $fe:expr $(=> $wrap:ident $(($($wx:expr),*))?)?)?)?; $($rest:tt)*) => {
        $($each)+! { $ctx fn $name [$($adapter)?] [$(#[$doc])* $(#[$pdoc])*] [unsafe] ($($p: $pt),*) -> [$pr] [$($(@ $this)? $pdef)?] [$($fwd $([$($show),*] |$fi| ($fe) [$($wrap $(($($wx),*))?)?])?)?] }
        $crate::__ctl_each! { [$($each)+] $ctx $($rest)* }
    };
    ([$($each:tt)+] $ctx:tt $(#[$doc:meta])* fn $(@ $since:literal)? $name:ident ($($a:ident : $t:ty),* $(,)?) -> $r:ty $(=> $adapter:ident)?; $($rest:tt)*) => {
        $($each)+! { $ctx fn $name [$($adapter)?] }
        $crate::__ctl_each! { [$($each)+] $ctx $($rest)* }
    };
    ([$($each:tt)+] $ctx:tt $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),* $(; $($b:ident [$blen:ident] : $bt:ty $(as $bc:ty)?),+ $(; $($c:ident : $ct:ty),+)?)?)
        $(with $err:ident)? $(via $V:ident)? $(-> $shape:ident $rt:ty $([$fb:expr])?)? $(= $def:expr)?; $($rest:tt)*) => {
        $($each)+! { $ctx $(#[$doc])* op $name ($($a: $t),*) ($($($b $blen [$bt] [$($bc)?]),+)?) ($($($($c: $ct),+)?)?) [$($err)?] [$($shape $rt $([$fb])?)?] [$($V)?] [$($def)?] }
        $crate::__ctl_each! { [$($each)+] $ctx $($rest)* }
    };
}

/// Writes, inside a provider trait, one method per `op` and `close` entry of the list and
/// per `fn` entry that gives the provider method's signature.
#[doc(hidden)]
#[macro_export]
macro_rules! ctl_trait_methods {
    ($(#[$tdoc:meta])* $class:ident $Table:ident $Trait:ident $ObjOf:ident $Host:ident { $($list:tt)* }) => {
        $crate::__ctl_each! { [$crate::__ctl_trait_method] {} $($list)* }
    };
}

/// Writes, inside the hook's `impl Trait for HookType`, one forwarder per `op` and
/// `close` entry, and per `fn` entry with a forward clause.
#[doc(hidden)]
#[macro_export]
macro_rules! ctl_forwarders {
    ($(#[$tdoc:meta])* $class:ident $Table:ident $Trait:ident $ObjOf:ident $Host:ident { $($list:tt)* }) => {
        $crate::__ctl_each! { [$crate::__ctl_forwarder] {} $($list)* }
    };
}

/// Writes, inside `impl HostType`, one public method per `op` entry: it checks that the
/// provider's table has the slot (else `FI_ENOSYS`) and calls it. The host type has
/// `obj` and `fn t(&self) -> &Table`.
macro_rules! ctl_wrappers {
    ($(#[$tdoc:meta])* $class:ident $Table:ident $Trait:ident $ObjOf:ident $Host:ident { $($list:tt)* }) => {
        $crate::__ctl_each! { [$crate::abi::ctl_ops::ctl_wrapper] {$Table} $($list)* }
    };
}

/// One host method (see [`ctl_wrappers!`]).
macro_rules! ctl_wrapper {
    ({$T:ident} fn $name:ident $($rest:tt)*) => {};
    ({$T:ident} $(#[$doc:meta])* close) => {
        $(#[$doc])*
        pub fn close(&mut self) -> $crate::Result<()> {
            self.node.close()?;
            $crate::abi::ctl_ops::Detach::detach(self);
            Ok(())
        }
    };
    ({$T:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) ($($b:ident $blen:ident [$bt:ty] $bc:tt),*) ($($c:ident : $ct:ty),*) [] [] [$($V:ident)?] [$($def:expr)?]) => {
        $(#[$doc])*
        pub fn $name(&self, $($a: $t,)* $($b: &[$bt],)* $($c: $ct),*) -> $crate::Result<()> {
            let t = <Self as $crate::abi::ctl_ops::TableOf<$T>>::table(self);
            // SAFETY: our own object and its table; the arguments are plain values or
            // slices passed with their lengths.
            $crate::abi::object::ok_or_code(unsafe {
                $crate::abi::tables::call_slot!(t, $T.$name(self.obj, $($a,)* $($b.as_ptr().cast(), $b.len(),)* $($c),*))
            } as isize)
        }
    };
    ({$T:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) ($($b:ident $blen:ident [$bt:ty] $bc:tt),*) ($($c:ident : $ct:ty),*) [err] [] [$($V:ident)?] [$($def:expr)?]) => {
        $(#[$doc])*
        pub fn $name(&self, $($a: $t,)* $($b: &[$bt],)* $($c: $ct),*) -> $crate::Result<()> {
            let t = <Self as $crate::abi::ctl_ops::TableOf<$T>>::table(self);
            $crate::abi::object::ctl(|err| {
                // SAFETY: our own object and its table; the arguments are plain values
                // or slices passed with their lengths; `err` is the message buffer.
                unsafe {
                    $crate::abi::tables::call_slot!(t, $T.$name(self.obj, $($a,)* $($b.as_ptr().cast(), $b.len(),)* $($c,)* err))
                }
            })
        }
    };
    ({$T:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [count $rt:ty] [$($V:ident)?] [$($def:expr)?]) => {
        $(#[$doc])*
        pub fn $name(&self, $($a: $t),*) -> $crate::Result<$rt> {
            let t = <Self as $crate::abi::ctl_ops::TableOf<$T>>::table(self);
            // SAFETY: our own object and its table; the arguments are plain values.
            $crate::abi::object::count_or_code(unsafe {
                $crate::abi::tables::call_slot!(t, $T.$name(self.obj, $($a),*))
            })
        }
    };
    ({$T:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [get $rt:ty [$fb:expr]] [] [$($def:expr)?]) => {
        $(#[$doc])*
        pub fn $name(&self, $($a: $t),*) -> $rt {
            let t = <Self as $crate::abi::ctl_ops::TableOf<$T>>::table(self);
            let mut out: $rt = $fb;
            // SAFETY: our own object and its table; `out` valid for a write.
            let rc = unsafe { $crate::abi::tables::call_slot!(t, $T.$name(self.obj, $($a,)* &mut out)) };
            if rc == 0 {
                out
            } else {
                $fb
            }
        }
    };
    ({$T:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [fill $rt:ty] [$($V:ident)?] [$($def:expr)?]) => {
        $(#[$doc])*
        pub fn $name(&self, $($a: $t,)* buf: &mut [u8]) -> $crate::Result<$rt> {
            let t = <Self as $crate::abi::ctl_ops::TableOf<$T>>::table(self);
            let mut len = buf.len();
            // SAFETY: our own object and its table; `buf` valid for writes of `len`
            // bytes, `len` for a read and a write.
            $crate::abi::object::ok_or_code(unsafe {
                $crate::abi::tables::call_slot!(t, $T.$name(self.obj, $($a,)* buf.as_mut_ptr().cast(), &mut len))
            } as isize)?;
            Ok(len)
        }
    };
    ({$T:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [bytes $rt:ty] [$($V:ident)?] [$($def:expr)?]) => {
        $(#[$doc])*
        pub fn $name(&self, $($a: $t),*) -> $crate::Result<$rt> {
            let t = <Self as $crate::abi::ctl_ops::TableOf<$T>>::table(self);
            // SAFETY: our own object and its table; `read_sized` passes a buffer and
            // its length, both valid.
            $crate::abi::object::read_sized(|buf, len| unsafe {
                $crate::abi::tables::call_slot!(t, $T.$name(self.obj, $($a,)* buf, len))
            })
        }
    };
    ({$T:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [$shape:ident $rt:ty] [$($V:ident)?] [$($def:expr)?]) => {
        $(#[$doc])*
        pub fn $name(&self, $($a: $t),*) -> $crate::Result<$rt> {
            let t = <Self as $crate::abi::ctl_ops::TableOf<$T>>::table(self);
            let mut out = <$rt>::default();
            // SAFETY: our own object and its table; `out` valid for a write.
            $crate::abi::object::ok_or_code(unsafe {
                $crate::abi::tables::call_slot!(t, $T.$name(self.obj, $($a,)* &mut out))
            } as isize)?;
            Ok(out)
        }
    };
}

/// Writes a class's ops table from its list: every entry is a slot, in order (an `op`
/// entry's slot takes the object, its arguments and, for `out`/`val`, a last
/// `out: *mut T`, and returns an `i32` status).
macro_rules! ctl_table {
    ($(#[$tdoc:meta])* $class:ident $Table:ident $Trait:ident $ObjOf:ident $Host:ident { $($list:tt)* }) => {
        $crate::abi::ctl_ops::ctl_table! { @munch [$(#[$tdoc])*] $Table [] $($list)* }
    };
    (@munch [$($tdoc:tt)*] $Table:ident [$($done:tt)*]) => {
        $crate::abi::tables::abi_table! {
            $($tdoc)*
            pub struct $Table { $($done)* }
        }
    };
    (@munch $tdoc:tt $Table:ident [$($done:tt)*] $(#[$doc:meta])* close; $($rest:tt)*) => {
        $crate::abi::ctl_ops::ctl_table! { @munch $tdoc $Table [$($done)* $(#[$doc])* fn close(obj: $crate::abi::raw::Obj, err: *mut $crate::abi::raw::ErrBuf) -> i32;] $($rest)* }
    };
    (@munch $tdoc:tt $Table:ident [$($done:tt)*] $(#[$doc:meta])* fn $(@ $since:literal)? $name:ident ($($a:ident : $t:ty),* $(,)?) -> $r:ty $(=> $adapter:ident)?
        $(| $(#[$pdoc:meta])* $(unsafe)? fn ($($p:ident : $pt:ty),* $(,)?) -> $pr:ty $(= $(@ $this:ident)? $pdef:expr)? $(, $fwd:ident $([$($show:ident),*] |$fi:ident| $fe:expr $(=> $wrap:ident $(($($wx:expr),*))?)?)?)?)?; $($rest:tt)*) => {
        $crate::abi::ctl_ops::ctl_table! { @munch $tdoc $Table [$($done)* $(#[$doc])* fn $(@ $since)? $name($($a: $t),*) -> $r;] $($rest)* }
    };
    (@munch $tdoc:tt $Table:ident [$($done:tt)*] $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),* $(,)?)
        $(via $V:ident)? -> count $rt:ty $(= $def:expr)?; $($rest:tt)*) => {
        $crate::abi::ctl_ops::ctl_table! { @munch $tdoc $Table [$($done)* $(#[$doc])* fn $name(obj: $crate::abi::raw::Obj, $($a: $t),*) -> isize;] $($rest)* }
    };
    (@munch $tdoc:tt $Table:ident [$($done:tt)*] $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),* $(,)?)
        -> get $rt:ty [$fb:expr] $(= $def:expr)?; $($rest:tt)*) => {
        $crate::abi::ctl_ops::ctl_table! { @munch $tdoc $Table [$($done)* $(#[$doc])* fn $name(obj: $crate::abi::raw::Obj, $($a: $t,)* out: *mut $rt) -> i32;] $($rest)* }
    };
    (@munch $tdoc:tt $Table:ident [$($done:tt)*] $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),* $(,)?)
        -> fill $rt:ty $(= $def:expr)?; $($rest:tt)*) => {
        $crate::abi::ctl_ops::ctl_table! { @munch $tdoc $Table [$($done)* $(#[$doc])* fn $name(obj: $crate::abi::raw::Obj, $($a: $t,)* buf: *mut ::std::ffi::c_void, len: *mut usize) -> i32;] $($rest)* }
    };
    (@munch $tdoc:tt $Table:ident [$($done:tt)*] $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),* $(,)?)
        $(via $V:ident)? -> bytes $rt:ty $(= $def:expr)?; $($rest:tt)*) => {
        $crate::abi::ctl_ops::ctl_table! { @munch $tdoc $Table [$($done)* $(#[$doc])* fn $name(obj: $crate::abi::raw::Obj, $($a: $t,)* out: *mut u8, out_len: *mut usize) -> i32;] $($rest)* }
    };
    (@munch $tdoc:tt $Table:ident [$($done:tt)*] $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),* ; $b:ident [$blen:ident] : $bt:ty as $bc:ty)
        $(with $err:ident)? $(via $V:ident)? $(= $def:expr)?; $($rest:tt)*) => {
        $crate::abi::ctl_ops::ctl_table! { @munch $tdoc $Table [$($done)* $(#[$doc])* fn $name(
            obj: $crate::abi::raw::Obj,
            $($a: $t,)*
            $b: *const $bc, $blen: usize,
            $($err: *mut $crate::abi::raw::ErrBuf)?
        ) -> i32;] $($rest)* }
    };
    (@munch $tdoc:tt $Table:ident [$($done:tt)*] $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),* $(; $($b:ident [$blen:ident] : $bt:ty),+ $(; $($c:ident : $ct:ty),+)?)?)
        $(with $err:ident)? $(via $V:ident)? $(-> $shape:ident $rt:ty)? $(= $def:expr)?; $($rest:tt)*) => {
        $crate::abi::ctl_ops::ctl_table! { @munch $tdoc $Table [$($done)* $(#[$doc])* fn $name(
            obj: $crate::abi::raw::Obj,
            $($a: $t,)*
            $($($b: *const $bt, $blen: usize,)+ $($($c: $ct,)+)?)?
            $(out: *mut $rt,)?
            $($err: *mut $crate::abi::raw::ErrBuf)?
        ) -> i32;] $($rest)* }
    };
}

/// Writes, inside `impl Trait for Unsupported`, the class's required methods (the `op`
/// entries without a default): `Unsupported` has no values, so they are never called.
macro_rules! ctl_unsupported {
    ($(#[$tdoc:meta])* $class:ident $Table:ident $Trait:ident $ObjOf:ident $Host:ident { $($list:tt)* }) => {
        $crate::__ctl_each! { [$crate::abi::ctl_ops::ctl_unsupported_method] {} $($list)* }
    };
}

/// One method of [`ctl_unsupported!`].
macro_rules! ctl_unsupported_method {
    ($ctx:tt fn $name:ident $adapter:tt $doc:tt [$($unsafe:ident)?] ($($p:ident : $pt:ty),*) -> [$pr:ty] [] $fwd:tt) => {
        #[allow(unused_variables, clippy::too_many_arguments)]
        $($unsafe)? fn $name(&self, $($p: $pt),*) -> $pr {
            match *self {}
        }
    };
    ($ctx:tt fn $name:ident $($rest:tt)*) => {};
    ($ctx:tt $(#[$doc:meta])* close) => {};
    ({} $(#[$doc:meta])* op $name:ident $args:tt () () [] [get $rt:ty [$fb:expr]] $V:tt $def:tt) => {
        $crate::abi::ctl_ops::ctl_unsupported_method! { {} $(#[$doc])* op $name $args () () [] [val $rt] $V $def }
    };
    ({} $(#[$doc:meta])* op $name:ident $args:tt $slices:tt $tail:tt $err:tt [$($shape:ident $rt:ty)?] [$($V:ident)?] [$def:expr]) => {};
    ({} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [fill $rt:ty] [] []) => {
        #[allow(unused_variables)]
        fn $name(&self, $($a: $t,)* buf: &mut [u8]) -> $crate::Result<$rt> {
            match *self {}
        }
    };
    ({} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) ($($b:ident $blen:ident [$bt:ty] $bc:tt),*) ($($c:ident : $ct:ty),*) $err:tt [$($shape:ident $rt:ty)?] [$($V:ident)?] []) => {
        #[allow(unused_variables)]
        fn $name(&self, $($a: $t,)* $($b: &[$bt],)* $($c: $ct),*) -> $crate::__ctl_prov_ret!($($shape $rt)?) {
            match *self {}
        }
    };
}

/// The element type of a slice's slot pointer: the entry's `as` type when it has one
/// (`[c_void] u8` is `c_void`), else the slice's element type.
macro_rules! slot_elem {
    ([$bc:ty] $bt:ty) => {
        $bc
    };
    ([] $bt:ty) => {
        $bt
    };
}

pub(crate) use {
    ctl_table, ctl_unsupported, ctl_unsupported_method, ctl_wrapper, ctl_wrappers, slot_elem,
};

/// The ops table of a public type (what the generated host methods call through).
pub(crate) trait TableOf<T> {
    /// The provider's table, or a static `ENOSYS` / `CLOSED` one.
    fn table(&self) -> &T;
}

/// What a host type's generated `close` does after the provider closed the object:
/// forget the object, and make every later call reach the static `CLOSED` table
/// (`FI_EBADF`).
pub(crate) trait Detach {
    /// Replace the object with null and each table with its `CLOSED` one.
    fn detach(&mut self);
}

/// A public type over one provider object with one ops table (invoked in the type's
/// module: `ops` stays private there): the struct (`obj`, `ops`, `node` and the
/// type's own fields), `Send` and `Sync`, `AsFid`, `Detach` (forget the object, point
/// `ops` at the `CLOSED` table), `TableOf` and `t()` (the table), and
/// `from_raw(obj, ops, own fields…, node)`. A type without fields of its own also gets
/// its `Debug` (the provider and whether it is closed); one with them writes its own,
/// showing them.
///
/// Invariant: `ops` is the provider's table (valid while `node` holds the provider)
/// or the static `CLOSED` one; the provider's object and table are usable from any
/// thread (the interface requires it: providers' types are `Send + Sync`) and the
/// node is thread-safe, hence `Send` and `Sync`.
macro_rules! host_object {
    ($(#[$doc:meta])* $Host:ident($Table:ident, $what:literal);) => {
        $crate::abi::ctl_ops::host_object! { @type [$(#[$doc])*] $Host $Table $what {} }

        impl ::std::fmt::Debug for $Host {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                self.node.fmt_object(f, stringify!($Host), &[])
            }
        }
    };
    ($(#[$doc:meta])* $Host:ident($Table:ident, $what:literal) { $($(#[$fdoc:meta])* $field:ident: $fty:ty),+ $(,)? }) => {
        $crate::abi::ctl_ops::host_object! { @type [$(#[$doc])*] $Host $Table $what { $($(#[$fdoc])* $field: $fty),+ } }
    };
    (@type [$($doc:tt)*] $Host:ident $Table:ident $what:literal { $($(#[$fdoc:meta])* $field:ident: $fty:ty),* }) => {
        $($doc)*
        pub struct $Host {
            pub(crate) obj: $crate::abi::raw::Obj,
            ops: *const $crate::abi::tables::$Table,
            pub(crate) node: ::std::sync::Arc<$crate::abi::object::Node>,
            $($(#[$fdoc])* $field: $fty,)*
        }

        // SAFETY: the object and table are required by the interface to be usable
        // from any thread (providers' types are `Send + Sync`); the node is
        // thread-safe; the type's own fields are plain values.
        unsafe impl Send for $Host {}
        // SAFETY: see `Send`.
        unsafe impl Sync for $Host {}

        impl $crate::abi::object::AsFid for $Host {
            fn as_fid(&self) -> $crate::abi::object::FidRef<'_> {
                $crate::abi::object::FidRef::new(&self.node, self.obj)
            }
        }

        impl $crate::abi::ctl_ops::Detach for $Host {
            fn detach(&mut self) {
                self.ops = $crate::abi::tables::$Table::CLOSED;
                self.obj = ::std::ptr::null_mut();
            }
        }

        impl $crate::abi::ctl_ops::TableOf<$crate::abi::tables::$Table> for $Host {
            #[inline(always)]
            fn table(&self) -> &$crate::abi::tables::$Table {
                self.t()
            }
        }

        impl $Host {
            #[doc = concat!("Wrap a provider's ", $what, ".")]
            ///
            /// # Safety
            #[doc = concat!("`obj`/`ops` must be ", $what, " and its table from the provider of")]
            /// `node`'s family (with the type's own fields as it was opened), owned
            /// from now on by `node`.
            #[allow(clippy::too_many_arguments)]
            pub(crate) unsafe fn from_raw(
                obj: $crate::abi::raw::Obj,
                ops: *const $crate::abi::tables::$Table,
                $($field: $fty,)*
                node: ::std::sync::Arc<$crate::abi::object::Node>,
            ) -> $Host {
                $Host { obj, ops, node, $($field),* }
            }

            #[inline(always)]
            pub(crate) fn t(&self) -> &$crate::abi::tables::$Table {
                // SAFETY: `ops` is the provider's table (valid while `node` holds the
                // provider) or the static CLOSED table.
                unsafe { &*self.ops }
            }
        }
    };
}

pub(crate) use host_object;

/// `TableOf` impls from the types' own accessors.
macro_rules! table_of {
    ($($Host:ty: $T:ty = $acc:ident;)*) => {$(
        impl TableOf<$T> for $Host {
            #[inline(always)]
            fn table(&self) -> &$T {
                self.$acc()
            }
        }
    )*};
}

// The endpoint's two tables of control operations (the types of one table get theirs
// from `host_object!`).
table_of! {
    crate::ep::Endpoint: crate::abi::tables::EpTable = t;
    crate::ep::Endpoint: crate::abi::tables::CmTable = c;
}
