//! Typed completions ([`Completion`], [`OpError`]), posting errors ([`PostError`]) and
//! the in-flight table that owns the buffers of posted operations.
//!
//! # Invariants
//!
//! - An operation's context is `slot index + 1`; 0 means "no operation of ours" (a
//!   remote write's CQ data, for instance).
//! - A post first reserves an entry (its context), calls the provider, and records the
//!   operation's buffers in that entry right after the call returns: the recording is
//!   off the latency path, the buffers are held by the posting function meanwhile, and
//!   no completion can be read in between (both happen inside one `&mut` call of the
//!   endpoint; nothing between them can panic). A failed post hands the entry back.
//! - A slot holds the operation's buffers from then until its completion (or error
//!   completion) is read; only then is the slot freed and the buffers handed back.
//! - Slots are recycled; a context read from the CQ that names an empty slot is
//!   reported as an operation without buffer, never a panic.

use crate::cq::CqError;
use crate::{Errno, Error, OpFlags};

use super::buf::Buf;

/// Identifies a posted operation until its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpId(pub(crate) usize);

impl OpId {
    /// The context value the provider reports (0: none).
    #[inline]
    pub fn context(&self) -> usize {
        self.0
    }
}

/// What an operation was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `fi_send` / `fi_senddata`.
    Send,
    /// `fi_recv`.
    Recv,
    /// `fi_tsend`.
    TaggedSend,
    /// `fi_trecv`.
    TaggedRecv,
    /// `fi_write` / `fi_writedata`.
    Write,
    /// `fi_read`.
    Read,
    /// `fi_fetch_atomic`.
    FetchAtomic,
    /// A completion for no operation of this endpoint: remote CQ data of a peer's RMA
    /// write, for instance (see [`Completion::data`]).
    Remote,
}

/// A successful completion, with the operation's buffer given back.
///
/// Kept small (it is moved on every completion): the optional values are read through
/// [`data`](Self::data), [`tag`](Self::tag) and [`fetched`](Self::fetched).
#[derive(Debug)]
pub struct Completion {
    /// The operation (context 0 for [`OpKind::Remote`]).
    pub id: OpId,
    /// What the operation was.
    pub kind: OpKind,
    /// The completion flags (`FI_SEND`, `FI_RECV`, `FI_RMA`, `FI_REMOTE_CQ_DATA`, …).
    pub flags: OpFlags,
    /// Bytes received (receives) or transferred.
    pub len: usize,
    /// The operation's buffer; for a receive its length is the received length.
    pub buf: Option<Buf>,
    data: u64,
    /// The tag (tagged receives) or the fetched value (fetching atomics).
    aux: u64,
}

impl Completion {
    /// Remote CQ data, when the flags carry `FI_REMOTE_CQ_DATA`.
    #[inline]
    pub fn data(&self) -> Option<u64> {
        self.flags
            .contains(OpFlags::REMOTE_CQ_DATA)
            .then_some(self.data)
    }

    /// The message's tag (tagged receives).
    #[inline]
    pub fn tag(&self) -> Option<u64> {
        (self.kind == OpKind::TaggedRecv).then_some(self.aux)
    }

    /// The value a fetching atomic read from the target (before its update).
    #[inline]
    pub fn fetched(&self) -> Option<u64> {
        (self.kind == OpKind::FetchAtomic).then_some(self.aux)
    }
}

/// An operation that failed (an error completion), with its buffer given back, or an
/// error of the completion queue itself.
#[derive(Debug)]
pub struct OpError {
    /// The error (`FI_ECANCELED`, `FI_ETRUNC`, …).
    pub error: Error,
    /// The failed operation, if the error is about one.
    pub id: Option<OpId>,
    /// What the failed operation was.
    pub kind: Option<OpKind>,
    /// Its buffer.
    pub buf: Option<Buf>,
}

impl From<Error> for OpError {
    fn from(error: Error) -> OpError {
        OpError {
            error,
            id: None,
            kind: None,
            buf: None,
        }
    }
}

impl std::fmt::Display for OpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            Some(k) => write!(f, "{k:?} failed: {}", self.error),
            None => self.error.fmt(f),
        }
    }
}

impl std::error::Error for OpError {}

/// A post that the provider refused, with the buffer given back (retry on
/// `FI_EAGAIN` after [`Ep::poll`](super::Ep::poll)).
#[derive(Debug)]
pub struct PostError {
    /// The error.
    pub error: Error,
    /// The buffer of the refused operation.
    pub buf: Option<Buf>,
}

/// What posting an operation returns: its id (its [`Completion`] or [`OpError`] names
/// it), or the refusal with the buffer given back.
pub type PostResult = std::result::Result<OpId, PostError>;

impl PostError {
    /// True for `FI_EAGAIN`: drive progress and post again.
    #[inline]
    pub fn is_again(&self) -> bool {
        self.error.code() == Errno::EAGAIN
    }
}

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for PostError {}

impl From<PostError> for Error {
    fn from(e: PostError) -> Error {
        e.error
    }
}

impl From<OpError> for Error {
    fn from(e: OpError) -> Error {
        e.error
    }
}

/// What an in-flight slot owns: the operation's kind and its memory. One tag and one
/// pointer (16 bytes), so recording and freeing an operation moves two words.
#[derive(Debug)]
pub(crate) enum Slot {
    /// An operation on a [`Buf`].
    Buf(OpKind, Buf),
    /// An atomic's operand and result words (heap, so their addresses are stable).
    Words(OpKind, Box<[u64; 2]>),
}

impl Slot {
    /// What the operation was.
    #[inline(always)]
    pub(crate) fn kind(&self) -> OpKind {
        match self {
            Slot::Buf(k, _) | Slot::Words(k, _) => *k,
        }
    }

    /// The operation's buffer, if it has one.
    #[inline(always)]
    pub(crate) fn into_buf(self) -> Option<Buf> {
        match self {
            Slot::Buf(_, b) => Some(b),
            Slot::Words(..) => None,
        }
    }

    /// The atomic's words, if it has them.
    #[inline(always)]
    pub(crate) fn words_mut(&mut self) -> Option<&mut [u64; 2]> {
        match self {
            Slot::Words(_, w) => Some(w),
            Slot::Buf(..) => None,
        }
    }
}

/// One entry of the in-flight table: an operation's slot, or a free entry naming the
/// next free one (the free list lives in the table itself: no second vector to grow).
#[derive(Debug)]
enum Entry {
    Busy(Slot),
    Vacant { next: usize },
}

/// An entry taken by [`InFlight::reserve`], to be filled or handed back (not `Copy`:
/// used once).
#[derive(Debug)]
pub(crate) struct Reservation(usize);

impl Reservation {
    /// The context the provider is given (never 0).
    #[inline(always)]
    pub(crate) fn context(&self) -> usize {
        self.0 + 1
    }
}

/// The in-flight table: entry `i` is context `i + 1`. Free entries form a list through
/// their `next` fields, starting at `free` (`usize::MAX`, or any index past the end:
/// none free). A reserved entry (between [`InFlight::reserve`] and its `fill` or
/// `unreserve`) is vacant but off the list, and counted in `live`.
#[derive(Debug)]
pub(crate) struct InFlight {
    entries: Vec<Entry>,
    free: usize,
    live: usize,
}

impl Default for InFlight {
    fn default() -> InFlight {
        InFlight {
            entries: Vec::new(),
            free: usize::MAX,
            live: 0,
        }
    }
}

impl InFlight {
    /// Record `slot`; returns its context (never 0).
    #[inline(always)]
    pub(crate) fn insert(&mut self, slot: Slot) -> usize {
        let r = self.reserve();
        let ctx = r.context();
        self.fill(r, slot);
        ctx
    }

    /// Take an entry for an operation about to be posted. It reads as free (no
    /// completion finds it) until [`fill`](Self::fill) records the operation, or
    /// [`unreserve`](Self::unreserve) hands it back if the post failed; each
    /// reservation is a distinct entry, so filling one never overwrites another.
    #[inline(always)]
    pub(crate) fn reserve(&mut self) -> Reservation {
        self.live += 1;
        let i = self.free;
        if let Some(&Entry::Vacant { next }) = self.entries.get(i) {
            self.free = next;
            return Reservation(i);
        }
        self.grow()
    }

    /// No free entry: append one (out of line; the table only grows to the most
    /// operations in flight at once).
    #[cold]
    #[inline(never)]
    fn grow(&mut self) -> Reservation {
        self.entries.push(Entry::Vacant { next: usize::MAX });
        Reservation(self.entries.len() - 1)
    }

    /// Record `slot` in its reserved entry.
    #[inline(always)]
    pub(crate) fn fill(&mut self, r: Reservation, slot: Slot) {
        match self.entries.get_mut(r.0) {
            // A reserved entry is vacant: nothing to drop before writing it.
            Some(e @ Entry::Vacant { .. }) => *e = Entry::Busy(slot),
            // Unreachable (a reservation is always a vacant entry of the table), but
            // were it reached, the provider may hold the memory: leak it, never free it.
            _ => std::mem::forget(slot),
        }
    }

    /// Hand back a reserved entry that was not filled.
    #[inline]
    pub(crate) fn unreserve(&mut self, r: Reservation) {
        if let Some(e) = self.entries.get_mut(r.0) {
            *e = Entry::Vacant { next: self.free };
            self.free = r.0;
            self.live -= 1;
        }
    }

    /// The slot of `context`, if it is in flight.
    #[inline(always)]
    pub(crate) fn get_mut(&mut self, context: usize) -> Option<&mut Slot> {
        match self.entries.get_mut(context.checked_sub(1)?)? {
            Entry::Busy(s) => Some(s),
            Entry::Vacant { .. } => None,
        }
    }

    /// Free the entry of `context`, returning what it held.
    #[inline(always)]
    pub(crate) fn remove(&mut self, context: usize) -> Option<Slot> {
        let i = context.checked_sub(1)?;
        let e = self.entries.get_mut(i)?;
        if let Entry::Vacant { .. } = e {
            return None;
        }
        let old = std::mem::replace(e, Entry::Vacant { next: self.free });
        self.free = i;
        self.live -= 1;
        match old {
            Entry::Busy(s) => Some(s),
            Entry::Vacant { .. } => None,
        }
    }

    /// Number of operations in flight.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Give up every slot without freeing the buffers (teardown after a failed close).
    #[inline]
    pub(crate) fn leak(&mut self) {
        for e in self.entries.drain(..) {
            if let Entry::Busy(s) = e {
                std::mem::forget(s);
            }
        }
        self.free = usize::MAX;
        self.live = 0;
    }
}

/// Turn a raw completion into a typed one, freeing its slot.
#[inline(always)]
pub(crate) fn complete(
    table: &mut InFlight,
    context: usize,
    flags: u64,
    len: usize,
    data: u64,
    tag: u64,
) -> Completion {
    let flags = OpFlags::from_bits_retain(flags);
    let (kind, mut buf, aux) = match table.remove(context) {
        Some(Slot::Buf(k, b)) => (k, Some(b), tag),
        Some(Slot::Words(k, w)) => (k, None, w[1]),
        None => (OpKind::Remote, None, tag),
    };
    if let Some(b) = buf.as_mut() {
        if matches!(kind, OpKind::Recv | OpKind::TaggedRecv) {
            b.set_len(len);
        }
    }
    Completion {
        id: OpId(if kind == OpKind::Remote { 0 } else { context }),
        kind,
        flags,
        len,
        buf,
        data,
        aux,
    }
}

/// Turn an error entry into an [`OpError`], freeing its slot.
#[inline]
pub(crate) fn fail(table: &mut InFlight, e: CqError) -> OpError {
    let slot = table.remove(e.op_context);
    let msg = format!(
        "{} (olen {}, provider errno {})",
        crate::error::strerror(e.err.0),
        e.olen,
        e.prov_errno
    );
    OpError {
        error: Error::new(e.err, msg),
        id: slot.as_ref().map(|_| OpId(e.op_context)),
        kind: slot.as_ref().map(Slot::kind),
        buf: slot.and_then(Slot::into_buf),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_recycled_and_contexts_are_never_zero() {
        let mut t = InFlight::default();
        let a = t.insert(Slot::Buf(OpKind::Send, Buf::new(4)));
        let b = t.insert(Slot::Buf(OpKind::Recv, Buf::new(8)));
        assert!(a != 0 && b != 0 && a != b);
        assert_eq!(t.len(), 2);
        let c = complete(&mut t, b, OpFlags::RECV.bits(), 3, 0, 0);
        assert_eq!(c.kind, OpKind::Recv);
        assert_eq!(c.buf.as_ref().map(|b| b.len()), Some(3));
        assert_eq!(c.data(), None);
        assert_eq!(t.len(), 1);
        // The freed slot is reused.
        let d = t.insert(Slot::Buf(OpKind::Write, Buf::new(0)));
        assert_eq!(d, b);
        // A context of nobody's is a remote completion, not a panic.
        let r = complete(
            &mut t,
            999,
            (OpFlags::REMOTE_CQ_DATA | OpFlags::RMA).bits(),
            0,
            7,
            0,
        );
        assert_eq!(
            (r.kind, r.data(), r.id.context()),
            (OpKind::Remote, Some(7), 0)
        );
        let z = complete(&mut t, 0, 0, 0, 0, 0);
        assert_eq!(z.kind, OpKind::Remote);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn the_free_list_hands_out_every_free_entry_once() {
        // A seeded mix of inserts and removals against a model of what is in flight.
        let mut t = InFlight::default();
        let mut model: std::collections::HashMap<usize, usize> = Default::default();
        let mut rng = ofi_testkit::TestRng::seeded(0x9e37_79b9_7f4a_7c15);
        let mut peak = 0;
        for step in 0..5000usize {
            let x = rng.next_u64();
            if !x.is_multiple_of(3) || model.is_empty() {
                // Posting: reserve, (the provider call), then record; a failed post
                // hands the entry back and the next reservation takes it again.
                let r = t.reserve();
                let ctx = r.context();
                assert_ne!(ctx, 0);
                assert!(t.get_mut(ctx).is_none(), "reserved is not yet in flight");
                assert!(t.remove(ctx).is_none(), "a completion finds nothing there");
                let r = if x.is_multiple_of(7) {
                    t.unreserve(r);
                    assert_eq!(t.len(), model.len());
                    let again = t.reserve();
                    assert_eq!(again.context(), ctx);
                    again
                } else {
                    r
                };
                t.fill(
                    r,
                    Slot::Buf(OpKind::Send, Buf::from(step.to_le_bytes().to_vec())),
                );
                assert!(
                    model.insert(ctx, step).is_none(),
                    "context {ctx} handed out twice"
                );
            } else {
                let ctx = *model.keys().nth((x as usize / 3) % model.len()).unwrap();
                let want = model.remove(&ctx).unwrap();
                let s = t.remove(ctx).expect("in flight");
                assert_eq!(s.into_buf().unwrap().into_vec(), want.to_le_bytes());
                assert!(t.remove(ctx).is_none(), "removed twice");
                assert!(t.get_mut(ctx).is_none());
            }
            assert_eq!(t.len(), model.len());
            assert_partitioned(&t, model.len());
            peak = peak.max(model.len());
        }
        // The table grew only when no entry was free: to the most in flight at once.
        assert_eq!(t.entries.len(), peak);
        for (&ctx, &step) in &model {
            let s = t.get_mut(ctx).expect("still in flight");
            assert_eq!(
                match s {
                    Slot::Buf(_, b) => Some(b.len()),
                    Slot::Words(..) => None,
                },
                Some(step.to_le_bytes().len())
            );
        }
        assert!(t.remove(0).is_none() && t.remove(usize::MAX).is_none());
        t.leak();
        assert_eq!(t.len(), 0);
        assert_eq!(t.insert(Slot::Buf(OpKind::Recv, Buf::new(0))), 1);
    }

    /// With no reservation outstanding, every entry is busy or on the free list, and
    /// not both; the free list does not loop.
    fn assert_partitioned(t: &InFlight, busy: usize) {
        let mut seen = vec![false; t.entries.len()];
        let mut i = t.free;
        while i < t.entries.len() {
            let Entry::Vacant { next } = t.entries[i] else {
                panic!("busy entry {i} on the free list");
            };
            assert!(
                !std::mem::replace(&mut seen[i], true),
                "free list loops at {i}"
            );
            i = next;
        }
        let on_list = seen.iter().filter(|s| **s).count();
        assert_eq!(
            busy + on_list,
            t.entries.len(),
            "an entry is neither busy nor free"
        );
    }

    #[test]
    fn completions_stay_small_to_move() {
        // Every completion is moved out of the endpoint: keep it (and a buffer) small.
        assert!(std::mem::size_of::<Completion>() <= 80);
        assert!(std::mem::size_of::<Buf>() <= 32);
        // A post records, and a completion frees, one tag and one pointer.
        assert!(std::mem::size_of::<Entry>() <= 16);
    }

    #[test]
    fn tag_data_and_fetched_follow_the_kind_and_flags() {
        let mut t = InFlight::default();
        let r = t.insert(Slot::Buf(OpKind::TaggedRecv, Buf::new(4)));
        let c = complete(
            &mut t,
            r,
            (OpFlags::RECV | OpFlags::REMOTE_CQ_DATA).bits(),
            2,
            5,
            9,
        );
        assert_eq!((c.tag(), c.data(), c.fetched()), (Some(9), Some(5), None));
        let a = t.insert(Slot::Words(OpKind::FetchAtomic, Box::new([1, 41])));
        let c = complete(&mut t, a, OpFlags::ATOMIC.bits(), 0, 5, 9);
        assert_eq!((c.tag(), c.data(), c.fetched()), (None, None, Some(41)));
    }

    #[test]
    fn an_error_entry_returns_the_buffer() {
        let mut t = InFlight::default();
        let a = t.insert(Slot::Buf(OpKind::Recv, Buf::from(vec![1, 2, 3])));
        let e = fail(&mut t, CqError::new(a, Errno::ECANCELED));
        assert_eq!(e.error.code(), Errno::ECANCELED);
        assert_eq!(e.kind, Some(OpKind::Recv));
        assert_eq!(e.buf.map(|b| b.into_vec()), Some(vec![1, 2, 3]));
        assert_eq!(t.len(), 0);
    }
}
