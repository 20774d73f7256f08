//! The receive-side matcher every message/tagged provider reuses: posted receives,
//! unexpected messages, tag/ignore masks, directed receive, multi-receive buffers,
//! peek / claim / discard, cancel, and bounded memory. Transport-agnostic: it does no
//! I/O and never touches buffer contents; it decides *which* receive a message goes to
//! and *where* in that receive's buffer.
//!
//! # How a provider drives it
//!
//! - A message arrives → [`TagMatcher::match_incoming`]. It either names the receive
//!   (and the [`Placement`] inside its buffer) or says [`Match::Unexpected`], in which
//!   case the provider buffers what it has and calls [`TagMatcher::push_unexpected`]
//!   (before any other call on the matcher, so arrival order is kept).
//!   [`TagMatcher::match_incoming_with`] is the same decision for a hot path: an
//!   ordinary receive is handed to a closure by reference where it lies in its queue,
//!   then dropped there, so its record (over a hundred bytes) is not copied out.
//! - The application posts a receive → [`TagMatcher::post_recv`]. It first searches the
//!   unexpected messages; only if none matches is the receive queued.
//! - `fi_cancel` → [`TagMatcher::cancel`]; closing the endpoint →
//!   [`TagMatcher::drain_posted`] / [`TagMatcher::drain_unexpected`].
//!
//! # Matching rules
//!
//! - Untagged (`fi_recv`) and tagged (`fi_trecv`) receives live in separate queues; a
//!   message only ever matches a receive of its own kind ([`Incoming::tagged`] vs
//!   [`PostedRecv::tagged`]).
//! - Tags: a tagged receive matches when `(msg.tag | ignore) == (recv.tag | ignore)`;
//!   tags and masks of untagged receives are not looked at.
//! - Sources: only with directed receive on ([`MatcherConfig::directed_recv`],
//!   `FI_DIRECTED_RECV`) and only for a receive whose `src` is not [`ANY_SRC`]
//!   (`FI_ADDR_UNSPEC`); otherwise `src` is ignored.
//! - Order: a message goes to the *first posted* matching receive; a posted receive takes
//!   the *oldest* matching unexpected message.
//! - A receive longer or shorter than the message: the placement copies
//!   `min(msg.len, space)` bytes and says `truncated` when the message did not fit
//!   (the provider then writes an `FI_ETRUNC` error completion).
//!
//! # Multi-receive buffers (`FI_MULTI_RECV`)
//!
//! Messages are packed one after the other (no alignment) into the buffer, which stays
//! posted until its remaining space falls below the minimum (`FI_OPT_MIN_MULTI_RECV`,
//! [`MatcherConfig::min_multi_recv`], taken when the buffer is posted, so
//! [`TagMatcher::set_min_multi_recv`] affects later posts only) or reaches zero. The
//! match that makes it fall below comes back as [`MultiBuf::Released`]: that message's
//! completion carries the `FI_MULTI_RECV` flag. A message larger than the remaining
//! space is truncated into it and releases the buffer.
//!
//! # Peek, claim, discard (flags on the posted receive)
//!
//! | flags | effect |
//! | --- | --- |
//! | `PEEK` | look for a matching unexpected message without taking it: [`PostOutcome::Peeked`] or [`PostOutcome::NoMessage`] (the provider writes an `FI_ENOMSG` error completion) |
//! | `PEEK \| CLAIM` | as `PEEK`, and a found message is moved aside, reserved for this `ctx`; no other receive or peek sees it again |
//! | `CLAIM` | take the message reserved for this `ctx` (the receive's tag and source are not looked at): [`PostOutcome::Matched`] |
//! | `PEEK \| DISCARD` (also with `CLAIM`) | a found message is removed and handed back as [`PostOutcome::Discarded`]; none: `NoMessage` |
//! | `CLAIM \| DISCARD` | the message reserved for `ctx` is removed: `Discarded` |
//!
//! Refused with `FI_EBADFLAGS`: `DISCARD` without `PEEK` or `CLAIM`; `MULTI_RECV` with
//! `PEEK` or `CLAIM`. Refused with `FI_EINVAL`: `CLAIM` (without `PEEK`) for a `ctx` that
//! holds no claimed message; `PEEK | CLAIM` for a `ctx` that already holds one.
//!
//! # Bounds (memory never grows without limit)
//!
//! - Posted receives (both queues together) ≤ [`MatcherConfig::max_posted`] (the rx
//!   `size`). A receive that would have to be queued when the queue is full is refused
//!   with `FI_EAGAIN`, as a full C receive queue does; an ordinary receive that
//!   matches an unexpected message needs no slot and is accepted. A multi-receive buffer
//!   may stay posted, so it needs a free slot up front.
//! - Unexpected messages (claimed ones included) ≤ [`MatcherConfig::max_unexpected`]
//!   entries and ≤ [`MatcherConfig::max_unexpected_bytes`] buffered bytes.
//!   [`TagMatcher::push_unexpected`] beyond either is refused with `FI_ENOBUFS` and the
//!   message is handed back: this is the provider's flow-control signal (stop reading
//!   from the peer / withhold credits, or drop for a datagram endpoint). It is not
//!   `FI_EAGAIN` because progress alone cannot clear it — the application must post
//!   receives.
//!
//! Refusals return a [`Refused`] carrying the item back, so a buffer handle or pooled
//! payload is never lost; `Refused<T>` converts into [`Error`] for `?`.
//!
//! # Costs
//!
//! Queues are `VecDeque`s scanned linearly in order — the baseline the spec's ordering
//! rules make simplest to get right: `match_incoming` is O(p) in the posted receives of
//! that kind ahead of the match, `post_recv` O(u) in the unexpected messages of that
//! kind, `cancel` O(p). Removing from the middle of a queue moves the shorter side.
//! No call allocates once the queues have grown to their working size, except a
//! multi-receive post that matches unexpected messages (it returns them in a `Vec`) and
//! the first claim.
//!
//! Invariants: a queued receive never matches a stored unexpected message (each side
//! is searched before the other is stored), so both queues are never both non-empty
//! for a matching pair; for each multi-receive buffer, `used <= len`; the entry and byte
//! counters equal the sums over the unexpected and claimed messages. Nothing here panics.
//!
//! # Files
//!
//! This file: the types of requests, messages and outcomes; `matcher.rs`: the
//! matching rules, placement and [`TagMatcher`]'s operations; `tests.rs`.

use std::collections::VecDeque;
use std::fmt;

use ofi_core::enums::ADDR_UNSPEC;
use ofi_core::error::{Errno, Error};
use ofi_core::flags::OpFlags;

/// The "any source" address of a posted receive (`FI_ADDR_UNSPEC`).
pub const ANY_SRC: u64 = ADDR_UNSPEC;

/// Default `FI_OPT_MIN_MULTI_RECV`, in bytes.
pub const DEFAULT_MIN_MULTI_RECV: usize = 64;

/// A receive posted by the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostedRecv<B> {
    /// The operation context (`void *context`), reported in its completion and used by
    /// cancel and claim.
    pub ctx: usize,
    /// Source address to receive from, or [`ANY_SRC`]; used only with directed receive.
    pub src: u64,
    /// Tag to match (tagged receives only).
    pub tag: u64,
    /// Tag bits to ignore when matching (tagged receives only).
    pub ignore: u64,
    /// Operation flags: `MULTI_RECV`, `PEEK`, `CLAIM`, `DISCARD` are acted on; the
    /// others are carried for the provider.
    pub flags: OpFlags,
    /// Whether this is a tagged receive (`fi_trecv*`) rather than a message receive.
    pub tagged: bool,
    /// The receive buffer, opaque to the matcher (e.g. an iov handle).
    pub buf: B,
    /// Total length of the buffer, in bytes.
    pub len: usize,
}

impl<B> PostedRecv<B> {
    /// An untagged receive from any source, without flags.
    pub fn msg(ctx: usize, buf: B, len: usize) -> Self {
        PostedRecv {
            ctx,
            src: ANY_SRC,
            tag: 0,
            ignore: 0,
            flags: OpFlags::empty(),
            tagged: false,
            buf,
            len,
        }
    }

    /// A tagged receive of `tag` (bits in `ignore` not compared) from any source,
    /// without flags.
    pub fn tagged(ctx: usize, tag: u64, ignore: u64, buf: B, len: usize) -> Self {
        PostedRecv {
            ctx,
            src: ANY_SRC,
            tag,
            ignore,
            flags: OpFlags::empty(),
            tagged: true,
            buf,
            len,
        }
    }

    /// The same receive, directed at `src`.
    pub fn from_src(mut self, src: u64) -> Self {
        self.src = src;
        self
    }

    /// The same receive, with `flags` added.
    pub fn with_flags(mut self, flags: OpFlags) -> Self {
        self.flags |= flags;
        self
    }
}

/// The header of an arriving message: what the matcher needs to place it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Incoming {
    /// Source address of the sender (`fi_addr_t`, or `FI_ADDR_NOTAVAIL` if unknown).
    pub src: u64,
    /// Tag (tagged messages only).
    pub tag: u64,
    /// Length of the message payload, in bytes.
    pub len: usize,
    /// Remote CQ data, if the sender attached some.
    pub data: Option<u64>,
    /// Whether the message was sent as tagged.
    pub tagged: bool,
}

/// Where a matched message goes inside the receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Byte offset in the buffer (0 except for multi-receive buffers).
    pub offset: usize,
    /// Bytes to copy: `min(message length, space left)`.
    pub len: usize,
    /// Whether the message was longer than the space (write `FI_ETRUNC`).
    pub truncated: bool,
}

/// An unexpected message the provider stored, with its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnexpectedMsg<U> {
    /// The message header.
    pub msg: Incoming,
    /// What the provider buffered (data, or a rendezvous descriptor).
    pub payload: U,
    /// Bytes counted against [`MatcherConfig::max_unexpected_bytes`] for it.
    pub bytes: usize,
}

/// A multi-receive buffer that took a message.
#[derive(Debug, PartialEq, Eq)]
pub enum MultiBuf<'a, B> {
    /// Still posted: more messages may follow into it.
    Posted(&'a PostedRecv<B>),
    /// Released (removed from the queue): this message's completion carries
    /// `FI_MULTI_RECV`.
    Released(PostedRecv<B>),
}

impl<B> MultiBuf<'_, B> {
    /// The receive, posted or released.
    pub fn recv(&self) -> &PostedRecv<B> {
        match self {
            MultiBuf::Posted(r) => r,
            MultiBuf::Released(r) => r,
        }
    }

    /// Whether the buffer was released (completion flag `FI_MULTI_RECV`).
    pub fn is_released(&self) -> bool {
        matches!(self, MultiBuf::Released(_))
    }
}

impl<B: Clone> MultiBuf<'_, B> {
    /// The receive, owned (cloned while still posted), and whether it was released.
    #[inline]
    pub fn into_owned(self) -> (PostedRecv<B>, bool) {
        match self {
            MultiBuf::Posted(p) => (p.clone(), false),
            MultiBuf::Released(p) => (p, true),
        }
    }
}

/// A [`PostOutcome`] that no longer borrows the matcher (a still-posted multi-receive
/// buffer is cloned), so the provider can deliver while it changes its own state.
#[derive(Debug)]
pub enum PostAction<B, U> {
    /// Nothing matched; the receive is queued.
    Queued,
    /// Deliver one unexpected message into `recv` (not a multi-receive release).
    One {
        /// The receive.
        recv: PostedRecv<B>,
        /// Where the data goes.
        place: Placement,
        /// The message.
        msg: Incoming,
        /// Its payload.
        payload: U,
    },
    /// Deliver these messages, in order, into the multi-receive buffer `recv`; with
    /// `released` the last one's completion carries `FI_MULTI_RECV`.
    Multi {
        /// The buffer.
        recv: PostedRecv<B>,
        /// Whether the buffer was released.
        released: bool,
        /// The messages with their placements.
        msgs: Vec<(Placement, Incoming, U)>,
    },
    /// `FI_PEEK` found `msg`.
    Peeked {
        /// The peek request.
        recv: PostedRecv<B>,
        /// The message found.
        msg: Incoming,
    },
    /// `FI_PEEK` found nothing (`FI_ENOMSG`).
    NoMessage {
        /// The peek request.
        recv: PostedRecv<B>,
    },
    /// `FI_DISCARD` removed `msg`; drop `payload`.
    Discarded {
        /// The request.
        recv: PostedRecv<B>,
        /// The discarded message.
        msg: Incoming,
        /// Its payload.
        payload: U,
    },
}

/// The messages a multi-receive buffer took ([`PostAction::Multi`]'s `msgs`), in
/// arrival order, each with whether its delivery releases the buffer: the last one,
/// when the buffer was `released`.
///
/// ```
/// use ofi_kit::tagmatch::{multi_deliveries, Incoming, Placement};
/// let msg = Incoming { src: 1, tag: 0, len: 8, data: None, tagged: false };
/// let at = |offset| Placement { offset, len: 8, truncated: false };
/// let msgs = vec![(at(0), msg, 'a'), (at(8), msg, 'b')];
/// let order: Vec<_> = multi_deliveries(true, msgs.clone()).map(|d| (d.2, d.3)).collect();
/// assert_eq!(order, [('a', false), ('b', true)]);
/// assert!(multi_deliveries(false, msgs).all(|d| !d.3), "still posted: none releases");
/// ```
pub fn multi_deliveries<U>(
    released: bool,
    msgs: Vec<(Placement, Incoming, U)>,
) -> impl Iterator<Item = (Placement, Incoming, U, bool)> {
    let last = msgs.len().saturating_sub(1);
    msgs.into_iter()
        .enumerate()
        .map(move |(i, (place, msg, payload))| (place, msg, payload, released && i == last))
}

impl<B: Clone, U> PostOutcome<'_, B, U> {
    /// The outcome as a [`PostAction`], releasing the matcher's borrow.
    pub fn into_action(self) -> PostAction<B, U> {
        match self {
            PostOutcome::Queued => PostAction::Queued,
            PostOutcome::Matched { recv, place, msg } => PostAction::One {
                recv,
                place,
                msg: msg.msg,
                payload: msg.payload,
            },
            PostOutcome::MultiMatched { buf, msgs } => {
                let (recv, released) = buf.into_owned();
                PostAction::Multi {
                    recv,
                    released,
                    msgs: msgs
                        .into_iter()
                        .map(|(p, m)| (p, m.msg, m.payload))
                        .collect(),
                }
            }
            PostOutcome::Peeked { recv, msg } => PostAction::Peeked { recv, msg },
            PostOutcome::NoMessage { recv } => PostAction::NoMessage { recv },
            PostOutcome::Discarded { recv, msg } => PostAction::Discarded {
                recv,
                msg: msg.msg,
                payload: msg.payload,
            },
        }
    }
}

/// Where an arriving message goes ([`TagMatcher::match_incoming`]).
///
/// [`MultiBuf::Posted`] borrows the matcher: copy out what the transfer needs (the
/// placement, a clone of the buffer handle) before calling the matcher again.
#[derive(Debug, PartialEq, Eq)]
pub enum Match<'a, B> {
    /// No posted receive matches: store the message with
    /// [`TagMatcher::push_unexpected`].
    Unexpected,
    /// An ordinary receive matched; it has been removed from the queue.
    Recv {
        /// The receive.
        recv: PostedRecv<B>,
        /// Where the data goes.
        place: Placement,
    },
    /// A multi-receive buffer matched.
    Multi {
        /// The buffer (still posted, or released by this message).
        buf: MultiBuf<'a, B>,
        /// Where the data goes.
        place: Placement,
    },
}

impl<B: Clone> Match<'_, B> {
    /// The receive the message goes to, owned (a multi-receive buffer still posted is
    /// cloned), where the message goes in it, and whether the message releases it (a
    /// multi-receive buffer's last use); `None` for [`Match::Unexpected`].
    #[inline]
    pub fn into_owned(self) -> Option<(PostedRecv<B>, Placement, bool)> {
        match self {
            Match::Unexpected => None,
            Match::Recv { recv, place } => Some((recv, place, false)),
            Match::Multi { buf, place } => {
                let (recv, released) = buf.into_owned();
                Some((recv, place, released))
            }
        }
    }
}

/// What posting a receive did ([`TagMatcher::post_recv`]).
#[derive(Debug, PartialEq, Eq)]
pub enum PostOutcome<'a, B, U> {
    /// Nothing matched; the receive is queued.
    Queued,
    /// The receive took an unexpected (or, with `CLAIM`, its claimed) message; it is
    /// not queued.
    Matched {
        /// The receive (complete it now).
        recv: PostedRecv<B>,
        /// Where the message data goes.
        place: Placement,
        /// The message, removed from the unexpected queue.
        msg: UnexpectedMsg<U>,
    },
    /// A multi-receive buffer took one or more unexpected messages, in arrival order.
    MultiMatched {
        /// The buffer: still posted, or released by the last message in `msgs`.
        buf: MultiBuf<'a, B>,
        /// Each message with its placement.
        msgs: Vec<(Placement, UnexpectedMsg<U>)>,
    },
    /// `PEEK` found a message (left in place, or claimed for `recv.ctx` with `CLAIM`).
    Peeked {
        /// The peek request, handed back (not queued).
        recv: PostedRecv<B>,
        /// The message found.
        msg: Incoming,
    },
    /// `PEEK` found nothing: complete `recv` with `FI_ENOMSG`.
    NoMessage {
        /// The peek request, handed back (not queued).
        recv: PostedRecv<B>,
    },
    /// `DISCARD`: the message was removed and is handed back to be dropped.
    Discarded {
        /// The request, handed back (not queued).
        recv: PostedRecv<B>,
        /// The discarded message.
        msg: UnexpectedMsg<U>,
    },
}

/// A refused call: the error and the item that was not taken, handed back.
pub struct Refused<T> {
    /// Why (code and message).
    pub error: Error,
    /// The receive or message that was not taken.
    pub item: T,
}

impl<T> fmt::Debug for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Refused({:?})", self.error)
    }
}

impl<T> Refused<T> {
    fn new(code: Errno, msg: &'static str, item: T) -> Self {
        Refused {
            error: Error::new(code, msg),
            item,
        }
    }
}

impl<T> fmt::Display for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T> std::error::Error for Refused<T> {}

impl<T> From<Refused<T>> for Error {
    fn from(r: Refused<T>) -> Error {
        r.error
    }
}

/// Matcher limits and options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatcherConfig {
    /// `FI_DIRECTED_RECV`: receives with a source only take messages from it.
    pub directed_recv: bool,
    /// Most receives queued at once, both kinds together (the rx `size`).
    pub max_posted: usize,
    /// Most unexpected messages held at once (claimed ones included).
    pub max_unexpected: usize,
    /// Most unexpected bytes held at once (claimed ones included).
    pub max_unexpected_bytes: usize,
    /// `FI_OPT_MIN_MULTI_RECV`: a multi-receive buffer is released when its remaining
    /// space falls below this.
    pub min_multi_recv: usize,
}

impl Default for MatcherConfig {
    /// No directed receive; 1024 posted receives; 1024 unexpected messages and 16 MiB of
    /// unexpected data; [`DEFAULT_MIN_MULTI_RECV`].
    fn default() -> Self {
        MatcherConfig {
            directed_recv: false,
            max_posted: 1024,
            max_unexpected: 1024,
            max_unexpected_bytes: 16 << 20,
            min_multi_recv: DEFAULT_MIN_MULTI_RECV,
        }
    }
}

/// A queued receive and, for a multi-receive buffer, how much of it is used.
#[derive(Debug)]
struct Posted<B> {
    recv: PostedRecv<B>,
    used: usize,
    /// `min_multi_recv` in force when it was posted.
    min: usize,
}

/// The matcher (see the module docs). `B`: the provider's receive-buffer handle; `U`:
/// its buffered-payload type for unexpected messages.
#[derive(Debug)]
pub struct TagMatcher<B, U> {
    cfg: MatcherConfig,
    /// Posted receives: `[untagged, tagged]`, each in posting order.
    posted: [VecDeque<Posted<B>>; 2],
    /// Unexpected messages: `[untagged, tagged]`, each in arrival order.
    unexpected: [VecDeque<UnexpectedMsg<U>>; 2],
    /// Messages claimed by `PEEK | CLAIM`, keyed by context, in claim order.
    claimed: Vec<(usize, UnexpectedMsg<U>)>,
    /// Entries and bytes of `unexpected` and `claimed` together.
    held_entries: usize,
    held_bytes: usize,
}

mod matcher;

#[cfg(test)]
mod tests;
