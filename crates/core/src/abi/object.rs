//! The host side of the boundary: the handle to an initialised provider
//! ([`ProviderHandle`]) and the bookkeeping every public object shares (`Node`).
//!
//! # Ownership and lifetimes
//!
//! Every public object (`Fabric`, `Domain`, `Endpoint`, …) holds its provider object
//! pointer, its ops table pointer(s) and an `Arc<Node>`. A `Node`:
//! - keeps its parent's node alive (`parent`), so a child keeps its parent alive and
//!   handles may be dropped in any order;
//! - counts its open children and the objects bound to it (`refs`); `close` refuses
//!   with `FI_EBUSY` while that count is not zero, as the C API does;
//! - holds the nodes of the objects it is bound to (an endpoint holds its CQs, AV,
//!   counters and EQ) and releases them when it closes, so a bound object outlives
//!   the binding;
//! - calls the provider's close slot exactly once: on an explicit successful
//!   `Node::close`, or when the last `Arc` goes away (children and bindings first).
//!
//! The root node of a fabric holds the provider's keep-alive (the [`ProviderHandle`]'s
//! inner state, which holds the plugin library), so a plugin's code stays mapped while
//! any of its objects lives.
//!
//! Every node carries its provider family (the address of the provider's root table,
//! or what the host reported for a fabric it opened on a provider's behalf). Handing an
//! object of one family to another (bind, trywait) is refused with `FI_EINVAL`: the
//! receiving provider would cast the pointer to its own type.
//!
//! Nothing here panics.

use std::any::Any;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::abi::raw::{ErrBuf, FidClass, Obj, RawFidRef, RawObj};
use crate::abi::tables::{call_slot, HostTable, ProviderTable};
use crate::abi::{check_entry, PluginEntry, ProviderInstance, ProviderKind};
use crate::error::{Errno, Error, Result};
use crate::version::Version;

/// Size of the message buffer offered to control slots.
pub(crate) const ERR_CAP: usize = 256;

/// The error for a negative status and the callee's message (if it left one).
pub(crate) fn status_error(rc: isize, eb: &ErrBuf) -> Error {
    // SAFETY: `eb` was created over a live buffer by `ctl` and the callee wrote at most
    // `cap` bytes.
    let msg = unsafe { eb.message() };
    let base = Error::from_status(rc);
    if msg.is_empty() {
        base
    } else {
        Error::new(base.code(), msg)
    }
}

/// Run a control call that may leave a message in an [`ErrBuf`]; 0 is success.
pub(crate) fn ctl(f: impl FnOnce(*mut ErrBuf) -> i32) -> Result<()> {
    let mut buf = [0u8; ERR_CAP];
    let mut eb = ErrBuf::new(&mut buf);
    let rc = f(&mut eb);
    if rc == 0 {
        Ok(())
    } else {
        Err(status_error(rc as isize, &eb))
    }
}

/// A data-path status: 0 → `Ok`, negative → the code, without allocating.
#[inline(always)]
pub(crate) fn ok_or_code(rc: isize) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(code_err(rc))
    }
}

/// A data-path count: non-negative → `Ok(n)`, negative → the code.
#[inline(always)]
pub(crate) fn count_or_code(rc: isize) -> Result<usize> {
    if rc >= 0 {
        Ok(rc as usize)
    } else {
        Err(code_err(rc))
    }
}

#[cold]
fn code_err(rc: isize) -> Error {
    if rc < 0 && rc >= -(i32::MAX as isize) {
        Error::code_only(Errno((-rc) as i32))
    } else {
        Error::code_only(Errno::EOTHER)
    }
}

/// How a node's provider object is closed.
pub(crate) enum Closer {
    /// Through the class table's close slot.
    Slot {
        close: unsafe extern "C" fn(Obj, *mut ErrBuf) -> i32,
        obj: Obj,
    },
    /// A fabric the host opened for a provider: closed and released through the host
    /// table.
    HostFabric {
        host: *const HostTable,
        keep: *mut c_void,
    },
    /// An object the host keeps itself (a poll set): nothing to call.
    Host,
}

/// Shared bookkeeping of one open object (see the module docs).
pub(crate) struct Node {
    class: FidClass,
    family: usize,
    prov: Arc<str>,
    closer: Closer,
    refs: AtomicUsize,
    closed: AtomicBool,
    parent: Option<Arc<Node>>,
    bound: Mutex<Vec<Arc<Node>>>,
    extra: Mutex<Vec<Box<dyn Any + Send>>>,
    _keep: Option<Arc<dyn Any + Send + Sync>>,
}

// SAFETY: the raw pointers in a node are the provider's object and tables, which the
// interface requires to be usable from any thread (Rust providers' types are
// `Send + Sync` by the trait bounds; the C ABI contract says the same). The node's own
// state is atomics and a mutex.
unsafe impl Send for Node {}
// SAFETY: see `Send`.
unsafe impl Sync for Node {}

impl Node {
    /// The root node of a fabric.
    pub(crate) fn root(
        family: usize,
        prov: Arc<str>,
        closer: Closer,
        keep: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Arc<Node> {
        Arc::new(Node {
            class: FidClass::Fabric,
            family,
            prov,
            closer,
            refs: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            parent: None,
            bound: Mutex::new(Vec::new()),
            extra: Mutex::new(Vec::new()),
            _keep: keep,
        })
    }

    /// A child of `parent` (counted in the parent's `refs` until it closes).
    pub(crate) fn child(parent: &Arc<Node>, class: FidClass, closer: Closer) -> Arc<Node> {
        parent.refs.fetch_add(1, Ordering::AcqRel);
        Arc::new(Node {
            class,
            family: parent.family,
            prov: parent.prov.clone(),
            closer,
            refs: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            parent: Some(parent.clone()),
            bound: Mutex::new(Vec::new()),
            extra: Mutex::new(Vec::new()),
            _keep: None,
        })
    }

    /// The object's class.
    pub(crate) fn class(&self) -> FidClass {
        self.class
    }

    /// The provider family.
    pub(crate) fn family(&self) -> usize {
        self.family
    }

    /// The provider's name.
    pub(crate) fn prov(&self) -> &str {
        &self.prov
    }

    /// Whether the object was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The `Debug` form of the host object of this node, named `name`: its provider,
    /// then `fields`, then whether it is closed.
    pub(crate) fn fmt_object(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        name: &str,
        fields: &[(&str, &dyn std::fmt::Debug)],
    ) -> std::fmt::Result {
        let mut d = f.debug_struct(name);
        d.field("provider", &self.prov());
        for (field, value) in fields {
            d.field(field, value);
        }
        d.field("closed", &self.is_closed()).finish()
    }

    /// Check that `other` may be handed to this object's provider: same family, open.
    pub(crate) fn check_peer(&self, other: &Node, what: &str) -> Result<()> {
        if other.is_closed() {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{what}: the {} is closed", other.class.label()),
            ));
        }
        if self.is_closed() {
            return Err(Error::new(
                Errno::EBADF,
                format!("{what}: the {} is closed", self.class.label()),
            ));
        }
        if other.family != self.family {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "{what}: the {} belongs to provider {}, the {} to provider {}",
                    other.class.label(),
                    other.prov,
                    self.class.label(),
                    self.prov
                ),
            ));
        }
        Ok(())
    }

    /// The raw reference to `obj` of this node's class.
    pub(crate) fn fid_ref(&self, obj: Obj) -> RawFidRef {
        RawFidRef {
            class: self.class as u32,
            obj,
        }
    }

    /// Record that this object is now bound to `target` (which stays open and alive
    /// until this one closes).
    pub(crate) fn add_binding(&self, target: &Arc<Node>) {
        target.refs.fetch_add(1, Ordering::AcqRel);
        self.bound
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(target.clone());
    }

    /// Bind `target` to this node's object through the provider's `bind` slot (the
    /// `fi_*_bind` calls): refuses a target of another provider family or one already
    /// closed (`what` names the call in that error), runs `call` with the target's raw
    /// reference, and on success records the binding, so the target stays open while
    /// this object is.
    pub(crate) fn bind(
        &self,
        target: FidRef<'_>,
        what: &str,
        call: impl FnOnce(RawFidRef, *mut ErrBuf) -> i32,
    ) -> Result<()> {
        self.check_peer(target.node(), what)?;
        ctl(|e| call(target.raw(), e))?;
        self.add_binding(target.node());
        Ok(())
    }

    /// Undo one [`Node::add_binding`] to `target`; false if there was none.
    pub(crate) fn remove_binding(&self, target: &Arc<Node>) -> bool {
        let mut bound = self.bound.lock().unwrap_or_else(|p| p.into_inner());
        match bound.iter().position(|b| Arc::ptr_eq(b, target)) {
            Some(i) => {
                bound.swap_remove(i);
                target.refs.fetch_sub(1, Ordering::AcqRel);
                true
            }
            None => false,
        }
    }

    /// Keep `v` (e.g. a registered buffer) alive until the object is closed.
    pub(crate) fn keep_until_drop(&self, v: Box<dyn Any + Send>) {
        if self.is_closed() {
            return;
        }
        self.extra.lock().unwrap_or_else(|p| p.into_inner()).push(v);
    }

    /// Close the provider object: `FI_EBUSY` while children or bindings remain; a second
    /// close is a no-op.
    pub(crate) fn close(&self) -> Result<()> {
        let n = self.refs.load(Ordering::Acquire);
        if n > 0 {
            return Err(Error::new(
                Errno::EBUSY,
                format!(
                    "{} still has {n} open object(s) or binding(s)",
                    self.class.label()
                ),
            ));
        }
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Err(e) = self.call_closer() {
            self.closed.store(false, Ordering::Release);
            return Err(e);
        }
        self.release();
        Ok(())
    }

    fn call_closer(&self) -> Result<()> {
        match self.closer {
            // SAFETY: `close` and `obj` came together from the provider when the object
            // was opened; the node calls close at most once (guarded by `closed`).
            Closer::Slot { close, obj } => ctl(|eb| unsafe { close(obj, eb) }),
            Closer::HostFabric { host, keep } => ctl(|eb| {
                // SAFETY: `host` is the 'static host table that produced `keep`.
                unsafe { call_slot!(&*host, HostTable.fabric_close(keep, eb)) }
            }),
            Closer::Host => Ok(()),
        }
    }

    /// After a successful close: let go of the parent's count and of every binding.
    fn release(&self) {
        if let Some(p) = &self.parent {
            p.refs.fetch_sub(1, Ordering::AcqRel);
        }
        let bound = std::mem::take(&mut *self.bound.lock().unwrap_or_else(|p| p.into_inner()));
        for b in bound {
            b.refs.fetch_sub(1, Ordering::AcqRel);
        }
        self.extra.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            // Children and bound objects hold Arcs to us, so none is left: close now.
            match self.call_closer() {
                Ok(()) => self.release(),
                Err(e) => {
                    tracing::warn!(target: "ofi", prov = %self.prov, subsys = "core",
                        "closing a dropped {} failed: {e}", self.class.label());
                    self.release();
                }
            }
        }
        if let Closer::HostFabric { host, keep } = self.closer {
            // SAFETY: `host` is the 'static host table that produced `keep`; this is the
            // one release of the hold it gave.
            unsafe { call_slot!(&*host, HostTable.fabric_release(keep)) };
        }
    }
}

/// The state behind a [`ProviderHandle`]; also the keep-alive of every fabric it opens.
pub(crate) struct ProvInner {
    pub(crate) name: Arc<str>,
    version: Version,
    kind: ProviderKind,
    priority: i32,
    pub(crate) ctx: Obj,
    pub(crate) ops: *const ProviderTable,
    _keep: Option<Arc<dyn Any + Send + Sync>>,
}

// SAFETY: the provider context and table are required by the interface to be usable
// from any thread (a Rust `Provider` is `Send + Sync`).
unsafe impl Send for ProvInner {}
// SAFETY: see `Send`.
unsafe impl Sync for ProvInner {}

impl Drop for ProvInner {
    fn drop(&mut self) {
        // SAFETY: `ops`/`ctx` came from the provider's init; every fabric holds an Arc
        // to us, so nothing the provider created is still open. `_keep` (the library)
        // is dropped after this, so the code is still mapped.
        unsafe { call_slot!(&*self.ops, ProviderTable.cleanup(self.ctx)) };
    }
}

/// The host's handle to an initialised provider, linked-in or plugin: the same code
/// path either way. Cheap to clone.
#[derive(Clone)]
pub struct ProviderHandle {
    pub(crate) inner: Arc<ProvInner>,
}

impl std::fmt::Debug for ProviderHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderHandle")
            .field("name", &self.name())
            .field("version", &self.version())
            .field("kind", &self.kind())
            .field("priority", &self.priority())
            .finish()
    }
}

impl ProviderHandle {
    /// Run the provider's init with this process's host table.
    ///
    /// Fails with `FI_EINVAL` if the entry's interface does not match ours (see
    /// [`check_entry`]) or its name is not UTF-8, and with the provider's error (code
    /// and message) if its init fails.
    ///
    /// # Safety
    /// `entry` must be a valid [`PluginEntry`] whose code stays loaded while the handle
    /// and anything it creates live; `keepalive` (e.g. the `libloading::Library`) is
    /// held for exactly that.
    pub unsafe fn init(
        entry: &'static PluginEntry,
        keepalive: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Result<ProviderHandle> {
        check_entry(entry).map_err(|m| Error::new(Errno::EINVAL, m.to_string()))?;
        if entry.name.is_null() {
            return Err(Error::new(Errno::EINVAL, "plugin entry has no name"));
        }
        // SAFETY: `name` is a NUL-terminated 'static string by the entry's contract.
        let name = unsafe { CStr::from_ptr(entry.name) }
            .to_str()
            .map_err(|_| Error::new(Errno::EINVAL, "provider name is not UTF-8"))?;
        let kind = ProviderKind::from_raw(entry.kind).ok_or_else(|| {
            Error::new(
                Errno::EINVAL,
                format!("provider {name}: unknown kind {}", entry.kind),
            )
        })?;
        let mut msg = [0u8; ERR_CAP];
        let mut inst = ProviderInstance::empty(ErrBuf::new(&mut msg));
        let host = crate::abi::host::current_table();
        // SAFETY: the entry's init has the interface's signature (checked above); the
        // host table is 'static and `inst` lives across the call.
        let rc = unsafe { (entry.init)(host, &mut inst) };
        if rc != 0 {
            let e = status_error(rc as isize, &inst.err);
            return Err(e.context(format!("provider {name}")));
        }
        if inst.ctx.is_null() || inst.ops.is_null() {
            return Err(Error::new(
                Errno::EINVAL,
                format!("provider {name}: init returned no table"),
            ));
        }
        // SAFETY: non-null table pointer from the provider's init.
        let size = unsafe { (*inst.ops).size };
        let min = ProviderTable::LAYOUT.size_for_minor(0);
        if size < min {
            return Err(Error::new(
                Errno::EINVAL,
                format!("provider {name}: provider table size {size} is smaller than {min}"),
            ));
        }
        Ok(ProviderHandle {
            inner: Arc::new(ProvInner {
                name: name.into(),
                version: Version::from_raw(entry.version),
                kind,
                priority: entry.priority,
                ctx: inst.ctx,
                ops: inst.ops,
                _keep: keepalive,
            }),
        })
    }

    /// The provider's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The provider's version.
    pub fn version(&self) -> Version {
        self.inner.version
    }

    /// Core, utility or hook.
    pub fn kind(&self) -> ProviderKind {
        self.inner.kind
    }

    /// Declared priority (higher = earlier in getinfo results).
    pub fn priority(&self) -> i32 {
        self.inner.priority
    }

    /// The provider family identity (its root table's address).
    pub(crate) fn family(&self) -> usize {
        self.inner.ops as usize
    }
}

/// A class table (one whose first slot after `size` is `close`).
pub(crate) trait ClassTable {
    /// The table's size field.
    fn table_size(&self) -> usize;
    /// The close slot.
    fn close_fn(&self) -> unsafe extern "C" fn(Obj, *mut ErrBuf) -> i32;
}

macro_rules! class_tables {
    ($($t:ident),*) => {$(
        impl ClassTable for crate::abi::tables::$t {
            fn table_size(&self) -> usize {
                self.size
            }
            fn close_fn(&self) -> unsafe extern "C" fn(Obj, *mut ErrBuf) -> i32 {
                self.close
            }
        }
        const _: () = assert!(std::mem::offset_of!(crate::abi::tables::$t, close) == 8);
    )*};
}

class_tables!(
    FabricTable,
    DomainTable,
    EpTable,
    PepTable,
    CqTable,
    EqTable,
    CntrTable,
    AvTable,
    MrTable,
    WaitTable
);

/// Run an open-style control call (it fills the [`RawObj`] it is given) and take the
/// child the provider opened: the object, its class table (checked), and the node of
/// `parent`'s that closes it through that table.
pub(crate) fn open_child<T: ClassTable>(
    parent: &Arc<Node>,
    class: FidClass,
    call: impl FnOnce(&mut RawObj, *mut ErrBuf) -> i32,
) -> Result<(Obj, *const T, Arc<Node>)> {
    let mut out = RawObj::empty();
    ctl(|e| call(&mut out, e))?;
    let ops = out.ops as *const T;
    let node = Node::child(parent, class, close_of(out.obj, ops, class.label())?);
    Ok((out.obj, ops, node))
}

/// The raw attributes of an object that can signal a wait set (`fi_cq_attr`,
/// `fi_cntr_attr`, `fi_eq_attr`).
pub(crate) trait SignalsWaitSet: Copy {
    /// Signal the wait set `set` (`wait_obj` `FI_WAIT_SET`).
    fn signal(&mut self, set: Obj);
    /// The wait set named (null: none).
    fn wait_set(&self) -> Obj;
    /// The same attributes without the wait set (what the safe attributes hold).
    fn without_set(self) -> Self;
}

macro_rules! signals_wait_set {
    ($($Raw:ty),*) => {$(
        impl SignalsWaitSet for $Raw {
            fn signal(&mut self, set: Obj) {
                self.wait_obj = crate::enums::WaitObj::Set.to_raw();
                self.wait_set = set;
            }
            fn wait_set(&self) -> Obj {
                self.wait_set
            }
            fn without_set(self) -> Self {
                Self {
                    wait_set: std::ptr::null_mut(),
                    ..self
                }
            }
        }
    )*};
}

signals_wait_set!(
    crate::abi::raw::RawCqAttr,
    crate::abi::raw::RawCntrAttr,
    crate::abi::raw::RawEqAttr
);

/// Open a child of `parent` (a CQ, counter or EQ) from the raw attributes `raw`,
/// signalling the wait set `set` when given (`what`: the call, in messages):
/// `call(raw, out, err)` calls the parent's open slot. The set must be of the same
/// provider; the child is bound to it (the set cannot close first). Returns the
/// child's object, table and node.
pub(crate) fn open_signalling<T: ClassTable, A: SignalsWaitSet>(
    parent: &Arc<Node>,
    mut raw: A,
    set: Option<&crate::wait::WaitSet>,
    class: FidClass,
    what: &str,
    call: impl FnOnce(*const A, *mut RawObj, *mut ErrBuf) -> i32,
) -> Result<(Obj, *const T, Arc<Node>)> {
    let set = match set {
        Some(set) => {
            let f = set.as_fid();
            parent.check_peer(f.node(), what)?;
            raw.signal(f.raw().obj);
            Some(f.node())
        }
        None => None,
    };
    let (obj, ops, node) = open_child::<T>(parent, class, |out, e| call(&raw, out, e))?;
    if let Some(set) = set {
        node.add_binding(set);
    }
    Ok((obj, ops, node))
}

/// Check a newly opened object and its class table, and make its closer.
pub(crate) fn close_of<T: ClassTable>(obj: Obj, ops: *const T, what: &str) -> Result<Closer> {
    if obj.is_null() || ops.is_null() {
        return Err(Error::new(
            Errno::EOTHER,
            format!("{what}: the provider returned no object"),
        ));
    }
    // SAFETY: non-null table pointer the provider returned for this open.
    let t = unsafe { &*ops };
    let min = 2 * std::mem::size_of::<usize>();
    if t.table_size() < min {
        return Err(Error::new(
            Errno::EINVAL,
            format!(
                "{what}: table size {} is too small to hold close",
                t.table_size()
            ),
        ));
    }
    Ok(Closer::Slot {
        close: t.close_fn(),
        obj,
    })
}

/// A reference to an open object, as handed to another object's call (bind, trywait).
#[derive(Clone, Copy)]
pub struct FidRef<'a> {
    node: &'a Arc<Node>,
    obj: Obj,
}

impl<'a> FidRef<'a> {
    pub(crate) fn new(node: &'a Arc<Node>, obj: Obj) -> FidRef<'a> {
        FidRef { node, obj }
    }

    pub(crate) fn node(&self) -> &'a Arc<Node> {
        self.node
    }

    pub(crate) fn raw(&self) -> RawFidRef {
        self.node.fid_ref(self.obj)
    }
}

impl std::fmt::Debug for FidRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FidRef")
            .field("class", &self.node.class())
            .finish_non_exhaustive()
    }
}

/// Objects that can be handed to another object's call (bind, trywait).
pub trait AsFid {
    /// The reference.
    fn as_fid(&self) -> FidRef<'_>;
}

/// Read a variable-length value through an in/out length slot, retrying once with the
/// size the provider asked for (`FI_ETOOSMALL`).
pub(crate) fn read_sized(mut f: impl FnMut(*mut u8, *mut usize) -> i32) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; 128];
    for _ in 0..3 {
        let mut len = buf.len();
        let rc = f(buf.as_mut_ptr(), &mut len);
        if rc == 0 {
            buf.truncate(len.min(buf.len()));
            return Ok(buf);
        }
        if rc == Errno::ETOOSMALL.to_status() && len > buf.len() {
            buf = vec![0u8; len];
            continue;
        }
        return Err(Error::from_status(rc as isize));
    }
    Err(Error::new(
        Errno::ETOOSMALL,
        "the provider kept asking for a larger buffer",
    ))
}

/// The text of a queue's `strerror` slot for `prov_errno` with the error data
/// `err_data` (empty: none, passed as null): `call(data, buf, len)` calls the slot;
/// the library's text of `prov_errno` when it fails. (CQ and EQ.)
pub(crate) fn strerror_text(
    prov_errno: i32,
    err_data: &[u8],
    call: impl FnOnce(*const c_void, *mut u8, usize) -> isize,
) -> String {
    let data = if err_data.is_empty() {
        std::ptr::null()
    } else {
        err_data.as_ptr() as *const c_void
    };
    let mut buf = [0u8; 256];
    let n = call(data, buf.as_mut_ptr(), buf.len());
    if n < 0 {
        return crate::error::strerror(prov_errno).into_owned();
    }
    let n = (n as usize).min(buf.len() - 1);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}
