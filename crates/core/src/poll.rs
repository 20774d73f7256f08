//! Poll sets (`fi_poll`): several completion queues and counters checked in one call.
//!
//! A poll set is kept by the host; no provider object stands behind it, so it needs no
//! slot of its own in the plugin boundary and works with every provider that answers
//! `fi_trywait`. [`PollSet::poll`] drives each member's progress and reports the
//! context of every member with something new:
//!
//! - a completion queue when it is not empty (entries or an error entry): one
//!   `fi_trywait` on the CQ through its fabric, which drives progress and answers
//!   `FI_EAGAIN` exactly when a read would return something;
//! - a counter when its value or error count differs from what this poll set saw last
//!   (at [`PollSet::add_cntr`] or at the previous `poll`). The C library also resets
//!   that mark on `fi_cntr_set` / `fi_cntr_add`; here only the poll set's own view
//!   counts, so a change the application made itself is reported once.
//!
//! Invariants: a member stays open while it is in the set (closing it answers
//! `FI_EBUSY` until [`PollSet::del`]), and the fabric stays open while the set is.
//! Members belong to the fabric the set was opened on. Nothing here panics.

use std::sync::{Arc, Mutex};

use crate::abi::object::{ok_or_code, AsFid, FidRef, Node};
use crate::abi::raw::{FidClass, Obj, RawFidRef};
use crate::abi::tables::{call_slot, CntrTable, FabricTable};
use crate::cntr::Counter;
use crate::cq::CompletionQueue;
use crate::error::{Errno, Error, Result};

/// One member of a poll set.
struct Member {
    node: Arc<Node>,
    fid: RawFidRef,
    context: usize,
    kind: Kind,
}

enum Kind {
    Cq,
    Cntr {
        ops: *const CntrTable,
        /// (value, errors) as last seen.
        seen: (u64, u64),
    },
}

/// An open poll set (`fi_poll_open`); see the module docs.
pub struct PollSet {
    fabric_obj: Obj,
    fabric_ops: *const FabricTable,
    node: Arc<Node>,
    members: Mutex<Vec<Member>>,
}

// SAFETY: the raw pointers are the fabric's and the members' objects and tables, which
// the interface requires to be usable from any thread; they stay valid while the set
// holds their nodes (fabric as parent, members as bindings). The rest is a mutex.
unsafe impl Send for PollSet {}
// SAFETY: see `Send`.
unsafe impl Sync for PollSet {}

impl std::fmt::Debug for PollSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.node
            .fmt_object(f, "PollSet", &[("members", &self.lock().len())])
    }
}

impl AsFid for PollSet {
    fn as_fid(&self) -> FidRef<'_> {
        FidRef::new(&self.node, std::ptr::null_mut())
    }
}

/// Read a counter's value and error count through its table.
///
/// # Safety
/// `obj` / `ops` are an open counter and its table.
unsafe fn read_cntr(obj: Obj, ops: *const CntrTable) -> Result<(u64, u64)> {
    let (mut v, mut e) = (0u64, 0u64);
    // SAFETY: by the caller's contract; `v` and `e` valid for writes.
    unsafe {
        let t = &*ops;
        ok_or_code(call_slot!(t, CntrTable.read(obj, &mut v)) as isize)?;
        ok_or_code(call_slot!(t, CntrTable.readerr(obj, &mut e)) as isize)?;
    }
    Ok((v, e))
}

impl PollSet {
    /// A poll set over fabric `obj` / `ops` (the fabric's node is `parent`).
    pub(crate) fn new(obj: Obj, ops: *const FabricTable, parent: &Arc<Node>) -> PollSet {
        PollSet {
            fabric_obj: obj,
            fabric_ops: ops,
            node: Node::child(parent, FidClass::Poll, crate::abi::object::Closer::Host),
            members: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Member>> {
        self.members.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, f: FidRef<'_>, context: usize, kind: Kind) -> Result<()> {
        self.node.check_peer(f.node(), "fi_poll_add")?;
        let mut m = self.lock();
        if let Some(old) = m.iter_mut().find(|m| Arc::ptr_eq(&m.node, f.node())) {
            old.context = context;
            return Ok(());
        }
        self.node.add_binding(f.node());
        m.push(Member {
            node: f.node().clone(),
            fid: f.raw(),
            context,
            kind,
        });
        Ok(())
    }

    /// `fi_poll_add` of a completion queue, reported as `context` when it is not
    /// empty. Adding a member again only changes its context. `FI_EINVAL` for a CQ of
    /// another provider or a closed one.
    pub fn add_cq(&self, cq: &CompletionQueue, context: usize) -> Result<()> {
        self.insert(cq.as_fid(), context, Kind::Cq)
    }

    /// `fi_poll_add` of a counter, reported as `context` when its value or error count
    /// changed since this set last looked (see the module docs).
    pub fn add_cntr(&self, cntr: &Counter, context: usize) -> Result<()> {
        let (obj, ops) = cntr.raw_parts();
        // SAFETY: an open counter (we hold a reference to it) and its table.
        let seen = unsafe { read_cntr(obj, ops) }?;
        self.insert(cntr.as_fid(), context, Kind::Cntr { ops, seen })
    }

    /// `fi_poll_del`: remove a CQ or counter; `FI_EINVAL` if it is not a member.
    pub fn del(&self, member: &dyn AsFid) -> Result<()> {
        let f = member.as_fid();
        let mut m = self.lock();
        let Some(i) = m.iter().position(|m| Arc::ptr_eq(&m.node, f.node())) else {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "fi_poll_del: the {} is not in this poll set",
                    f.node().class().label()
                ),
            ));
        };
        let gone = m.swap_remove(i);
        self.node.remove_binding(&gone.node);
        Ok(())
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True if the set has no member.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// `fi_poll`: drive every member's progress and write into `contexts` the contexts
    /// of the members with something new, in the order they were added; returns how
    /// many were written (0: nothing new). At most `contexts.len()` are reported; the
    /// others stay pending for the next call. `FI_EINVAL` for an empty `contexts`,
    /// `FI_EBADF` after close; a provider without `fi_trywait` answers `FI_ENOSYS`
    /// for its CQs.
    pub fn poll(&self, contexts: &mut [usize]) -> Result<usize> {
        if contexts.is_empty() {
            return Err(Error::new(Errno::EINVAL, "fi_poll: no room for a context"));
        }
        if self.node.is_closed() {
            return Err(Error::new(Errno::EBADF, "fi_poll: the poll set is closed"));
        }
        let mut m = self.lock();
        let mut n = 0;
        for member in m.iter_mut() {
            if n == contexts.len() {
                break;
            }
            let ready = match &mut member.kind {
                Kind::Cq => {
                    let one = [member.fid];
                    // SAFETY: the fabric is open (our parent) and `one` names an open
                    // CQ of its family (a binding keeps it open).
                    let rc = unsafe {
                        call_slot!(
                            &*self.fabric_ops,
                            FabricTable.trywait(self.fabric_obj, one.as_ptr(), 1)
                        )
                    };
                    match ok_or_code(rc as isize) {
                        Ok(()) => false,
                        Err(e) if e.code() == Errno::EAGAIN => true,
                        Err(e) => return Err(e),
                    }
                }
                Kind::Cntr { ops, seen } => {
                    // SAFETY: an open counter (a binding keeps it open) and its table.
                    let now = unsafe { read_cntr(member.fid.obj, *ops) }?;
                    let changed = now != *seen;
                    *seen = now;
                    changed
                }
            };
            if ready {
                contexts[n] = member.context;
                n += 1;
            }
        }
        Ok(n)
    }

    /// `fi_close`: `FI_EBUSY` while members remain (delete them first).
    pub fn close(&mut self) -> Result<()> {
        if !self.is_empty() {
            return Err(Error::new(
                Errno::EBUSY,
                format!("poll set still has {} member(s)", self.len()),
            ));
        }
        self.node.close()
    }
}
