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
                let released = buf.is_released();
                let recv = match buf {
                    MultiBuf::Posted(p) => p.clone(),
                    MultiBuf::Released(p) => p,
                };
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

/// Whether receive `r` takes message `m` (same kind assumed).
#[inline]
fn recv_matches<B>(directed: bool, r: &PostedRecv<B>, m: &Incoming) -> bool {
    (!directed || r.src == ANY_SRC || r.src == m.src)
        && (!r.tagged || (r.tag ^ m.tag) & !r.ignore == 0)
}

/// Placement of a `msg_len` message into an ordinary `len`-byte receive.
#[inline]
fn place_whole(len: usize, msg_len: usize) -> Placement {
    Placement {
        offset: 0,
        len: msg_len.min(len),
        truncated: msg_len > len,
    }
}

/// Placement of a `msg_len` message into a multi-receive buffer, advancing `used`.
#[inline]
fn place_multi(len: usize, used: &mut usize, msg_len: usize) -> Placement {
    let space = len.saturating_sub(*used);
    let n = msg_len.min(space);
    let place = Placement {
        offset: *used,
        len: n,
        truncated: msg_len > space,
    };
    *used += n;
    place
}

/// Whether a multi-receive buffer must be released.
#[inline]
fn exhausted(len: usize, used: usize, min: usize) -> bool {
    let left = len.saturating_sub(used);
    left == 0 || left < min
}

impl<B, U> TagMatcher<B, U> {
    /// An empty matcher with these limits and options.
    pub fn new(cfg: MatcherConfig) -> Self {
        let posted_cap = cfg.max_posted.min(64);
        let unexp_cap = cfg.max_unexpected.min(64);
        TagMatcher {
            posted: [
                VecDeque::with_capacity(posted_cap),
                VecDeque::with_capacity(posted_cap),
            ],
            unexpected: [
                VecDeque::with_capacity(unexp_cap),
                VecDeque::with_capacity(unexp_cap),
            ],
            claimed: Vec::new(),
            held_entries: 0,
            held_bytes: 0,
            cfg,
        }
    }

    /// The configuration in force (`min_multi_recv` as last set).
    pub fn config(&self) -> &MatcherConfig {
        &self.cfg
    }

    /// Set `FI_OPT_MIN_MULTI_RECV` for multi-receive buffers posted from now on.
    pub fn set_min_multi_recv(&mut self, min: usize) {
        self.cfg.min_multi_recv = min;
    }

    /// Receives queued (both kinds).
    pub fn posted_len(&self) -> usize {
        self.posted[0].len() + self.posted[1].len()
    }

    /// Whether a receive could be queued now (not `FI_EAGAIN`).
    pub fn can_post(&self) -> bool {
        self.posted_len() < self.cfg.max_posted
    }

    /// Unexpected messages held, claimed ones included.
    pub fn unexpected_len(&self) -> usize {
        self.held_entries
    }

    /// Unexpected bytes held, claimed ones included.
    pub fn unexpected_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Messages claimed by `PEEK | CLAIM` and not yet taken.
    pub fn claimed_len(&self) -> usize {
        self.claimed.len()
    }

    /// Whether an unexpected message counting `bytes` would be accepted now.
    pub fn has_room_for_unexpected(&self, bytes: usize) -> bool {
        self.held_entries < self.cfg.max_unexpected
            && bytes
                <= self
                    .cfg
                    .max_unexpected_bytes
                    .saturating_sub(self.held_bytes)
    }

    /// Find the receive for an arriving message: the first posted receive of the
    /// message's kind that matches it (see the module docs). An ordinary receive is
    /// removed; a multi-receive buffer gives the next slice of itself and stays posted
    /// until exhausted. [`Match::Unexpected`] when none matches.
    pub fn match_incoming(&mut self, msg: &Incoming) -> Match<'_, B> {
        let directed = self.cfg.directed_recv;
        let queue = &mut self.posted[usize::from(msg.tagged)];
        let Some(i) = queue
            .iter()
            .position(|p| recv_matches(directed, &p.recv, msg))
        else {
            return Match::Unexpected;
        };
        let Some(entry) = queue.get_mut(i) else {
            return Match::Unexpected;
        };
        if !entry.recv.flags.contains(OpFlags::MULTI_RECV) {
            // The oldest receive matches most often: `pop_front` moves nothing else.
            let taken = if i == 0 {
                queue.pop_front()
            } else {
                queue.remove(i)
            };
            return match taken {
                Some(p) => Match::Recv {
                    place: place_whole(p.recv.len, msg.len),
                    recv: p.recv,
                },
                None => Match::Unexpected,
            };
        }
        let place = place_multi(entry.recv.len, &mut entry.used, msg.len);
        if exhausted(entry.recv.len, entry.used, entry.min) {
            return match queue.remove(i) {
                Some(p) => Match::Multi {
                    buf: MultiBuf::Released(p.recv),
                    place,
                },
                None => Match::Unexpected,
            };
        }
        match queue.get(i) {
            Some(p) => Match::Multi {
                buf: MultiBuf::Posted(&p.recv),
                place,
            },
            None => Match::Unexpected,
        }
    }

    /// [`match_incoming`](Self::match_incoming) with the common answer handled in place:
    /// when an ordinary (not multi-receive) posted receive matches, `deliver` gets it
    /// by reference while it is still queued, then it is removed and `Ok` carries what
    /// `deliver` returned. The receive record (over a hundred bytes with an [`IoList`](
    /// crate::iov::IoList)) is never copied. Any other answer — no match, or a
    /// multi-receive buffer — is returned as `Err`, exactly as `match_incoming` gives it.
    ///
    /// If `deliver` panics, the receive stays posted.
    #[inline]
    pub fn match_incoming_with<R>(
        &mut self,
        msg: &Incoming,
        deliver: impl FnOnce(&PostedRecv<B>, Placement) -> R,
    ) -> Result<R, Match<'_, B>> {
        let directed = self.cfg.directed_recv;
        let queue = &mut self.posted[usize::from(msg.tagged)];
        // The first receive matches most often: an ordinary one is used at once (what
        // the general search below does with it).
        if let Some(p) = queue.front() {
            if !p.recv.flags.contains(OpFlags::MULTI_RECV) && recv_matches(directed, &p.recv, msg) {
                let r = deliver(&p.recv, place_whole(p.recv.len, msg.len));
                queue.pop_front();
                return Ok(r);
            }
        }
        let found = queue
            .iter()
            .position(|p| recv_matches(directed, &p.recv, msg));
        if let Some(i) = found {
            if let Some(p) = queue.get(i) {
                if !p.recv.flags.contains(OpFlags::MULTI_RECV) {
                    let r = deliver(&p.recv, place_whole(p.recv.len, msg.len));
                    // Dropped where it lies: nothing is moved out.
                    if i == 0 {
                        queue.pop_front();
                    } else {
                        queue.remove(i);
                    }
                    return Ok(r);
                }
            }
        }
        Err(self.match_incoming(msg))
    }

    /// [`post_recv`](Self::post_recv) turned into what the provider does next
    /// ([`PostOutcome::into_action`]), a refusal into its error. The common outcome —
    /// the receive is queued — hands back nothing to move; test for it in place
    /// (`matches!(r, Ok(PostAction::Queued))`) before taking the result apart, or the
    /// whole result (a few hundred bytes) is copied on every post.
    #[inline]
    pub fn post(&mut self, recv: PostedRecv<B>) -> ofi_core::error::Result<PostAction<B, U>>
    where
        B: Clone,
    {
        match self.post_recv(recv) {
            Ok(PostOutcome::Queued) => Ok(PostAction::Queued),
            Ok(o) => Ok(o.into_action()),
            Err(r) => Err(r.error),
        }
    }

    /// Store an unexpected message after [`match_incoming`](Self::match_incoming)
    /// answered [`Match::Unexpected`] for it (with no call in between), counting
    /// `msg.len` bytes against the byte limit.
    ///
    /// Errors: `FI_ENOBUFS` when the entry or byte limit would be exceeded; the message
    /// is handed back (see the module docs on bounds).
    pub fn push_unexpected(
        &mut self,
        msg: Incoming,
        payload: U,
    ) -> Result<(), Refused<UnexpectedMsg<U>>> {
        self.push_unexpected_sized(msg, payload, msg.len)
    }

    /// As [`push_unexpected`](Self::push_unexpected), counting `bytes` (what the
    /// provider really buffers, e.g. only a rendezvous header) against the byte limit.
    pub fn push_unexpected_sized(
        &mut self,
        msg: Incoming,
        payload: U,
        bytes: usize,
    ) -> Result<(), Refused<UnexpectedMsg<U>>> {
        let entry = UnexpectedMsg {
            msg,
            payload,
            bytes,
        };
        if self.held_entries >= self.cfg.max_unexpected {
            return Err(Refused::new(
                Errno::ENOBUFS,
                "unexpected-message queue full (max_unexpected entries held)",
                entry,
            ));
        }
        if bytes
            > self
                .cfg
                .max_unexpected_bytes
                .saturating_sub(self.held_bytes)
        {
            return Err(Refused::new(
                Errno::ENOBUFS,
                "unexpected-message queue full (max_unexpected_bytes would be exceeded)",
                entry,
            ));
        }
        self.held_entries += 1;
        self.held_bytes += bytes;
        self.unexpected[usize::from(msg.tagged)].push_back(entry);
        Ok(())
    }

    /// Post a receive (with the peek/claim/discard/multi-receive behaviour of its flags,
    /// see the module docs): take the oldest matching unexpected message, or queue it.
    ///
    /// Errors (the receive is handed back): `FI_EBADFLAGS` for `DISCARD` without `PEEK`
    /// or `CLAIM`, or `MULTI_RECV` with `PEEK` or `CLAIM`; `FI_EINVAL` for `CLAIM` with
    /// no message claimed for `ctx`, or `PEEK | CLAIM` when `ctx` already holds one;
    /// `FI_EAGAIN` when the receive would have to be queued and the queue is full.
    #[inline]
    pub fn post_recv(
        &mut self,
        recv: PostedRecv<B>,
    ) -> Result<PostOutcome<'_, B, U>, Refused<PostedRecv<B>>> {
        // The common case — no peek, claim, discard or multi-receive flag, no unexpected
        // message of its kind, room in the queue — is what the general path below does
        // for it, without the rest of that path.
        let kind = usize::from(recv.tagged);
        let special = OpFlags::PEEK | OpFlags::CLAIM | OpFlags::DISCARD | OpFlags::MULTI_RECV;
        if !recv.flags.intersects(special) && self.unexpected[kind].is_empty() && self.can_post() {
            self.posted[kind].push_back(Posted {
                recv,
                used: 0,
                min: 0,
            });
            return Ok(PostOutcome::Queued);
        }
        self.post_recv_general(recv)
    }

    /// [`post_recv`](Self::post_recv) beyond its common case (out of line).
    #[inline(never)]
    fn post_recv_general(
        &mut self,
        recv: PostedRecv<B>,
    ) -> Result<PostOutcome<'_, B, U>, Refused<PostedRecv<B>>> {
        let f = recv.flags;
        let (peek, claim, discard) = (
            f.contains(OpFlags::PEEK),
            f.contains(OpFlags::CLAIM),
            f.contains(OpFlags::DISCARD),
        );
        if discard && !peek && !claim {
            return Err(Refused::new(
                Errno::EBADFLAGS,
                "FI_DISCARD needs FI_PEEK or FI_CLAIM",
                recv,
            ));
        }
        let multi = f.contains(OpFlags::MULTI_RECV);
        if multi && (peek || claim) {
            return Err(Refused::new(
                Errno::EBADFLAGS,
                "FI_MULTI_RECV cannot be combined with FI_PEEK or FI_CLAIM",
                recv,
            ));
        }
        if peek {
            return self.peek(recv, claim && !discard, discard);
        }
        if claim {
            return self.take_claimed(recv, discard);
        }
        if multi {
            return self.post_multi(recv);
        }
        let kind = usize::from(recv.tagged);
        let directed = self.cfg.directed_recv;
        let found = self.unexpected[kind]
            .iter()
            .position(|u| recv_matches(directed, &recv, &u.msg));
        if let Some(msg) = found.and_then(|i| self.unexpected[kind].remove(i)) {
            self.unhold(&msg);
            return Ok(PostOutcome::Matched {
                place: place_whole(recv.len, msg.msg.len),
                recv,
                msg,
            });
        }
        if !self.can_post() {
            return Err(Refused::new(
                Errno::EAGAIN,
                "receive queue full (max_posted)",
                recv,
            ));
        }
        self.posted[kind].push_back(Posted {
            recv,
            used: 0,
            min: 0,
        });
        Ok(PostOutcome::Queued)
    }

    /// `PEEK`, with `claim` (reserve for ctx) or `discard`.
    fn peek(
        &mut self,
        recv: PostedRecv<B>,
        claim: bool,
        discard: bool,
    ) -> Result<PostOutcome<'_, B, U>, Refused<PostedRecv<B>>> {
        if claim && self.claimed.iter().any(|(c, _)| *c == recv.ctx) {
            return Err(Refused::new(
                Errno::EINVAL,
                "FI_PEEK|FI_CLAIM: this context already holds a claimed message",
                recv,
            ));
        }
        let kind = usize::from(recv.tagged);
        let directed = self.cfg.directed_recv;
        let Some(i) = self.unexpected[kind]
            .iter()
            .position(|u| recv_matches(directed, &recv, &u.msg))
        else {
            return Ok(PostOutcome::NoMessage { recv });
        };
        if !claim && !discard {
            return match self.unexpected[kind].get(i) {
                Some(u) => Ok(PostOutcome::Peeked { msg: u.msg, recv }),
                None => Ok(PostOutcome::NoMessage { recv }),
            };
        }
        let Some(msg) = self.unexpected[kind].remove(i) else {
            return Ok(PostOutcome::NoMessage { recv });
        };
        if discard {
            self.unhold(&msg);
            return Ok(PostOutcome::Discarded { recv, msg });
        }
        let info = msg.msg;
        // Still held (counted) while claimed.
        self.claimed.push((recv.ctx, msg));
        Ok(PostOutcome::Peeked { recv, msg: info })
    }

    /// `CLAIM` without `PEEK`: take (or discard) the message claimed for `recv.ctx`.
    fn take_claimed(
        &mut self,
        recv: PostedRecv<B>,
        discard: bool,
    ) -> Result<PostOutcome<'_, B, U>, Refused<PostedRecv<B>>> {
        let Some(i) = self.claimed.iter().position(|(c, _)| *c == recv.ctx) else {
            return Err(Refused::new(
                Errno::EINVAL,
                "FI_CLAIM: no message claimed with this context",
                recv,
            ));
        };
        let (_, msg) = self.claimed.remove(i);
        self.unhold(&msg);
        if discard {
            return Ok(PostOutcome::Discarded { recv, msg });
        }
        Ok(PostOutcome::Matched {
            place: place_whole(recv.len, msg.msg.len),
            recv,
            msg,
        })
    }

    /// A multi-receive buffer: fill it from the unexpected queue, then queue what is
    /// left of it.
    fn post_multi(
        &mut self,
        recv: PostedRecv<B>,
    ) -> Result<PostOutcome<'_, B, U>, Refused<PostedRecv<B>>> {
        if !self.can_post() {
            return Err(Refused::new(
                Errno::EAGAIN,
                "receive queue full (max_posted)",
                recv,
            ));
        }
        let kind = usize::from(recv.tagged);
        let directed = self.cfg.directed_recv;
        let min = self.cfg.min_multi_recv;
        let mut used = 0;
        let mut msgs = Vec::new();
        let mut i = 0;
        while i < self.unexpected[kind].len() {
            let hit = self.unexpected[kind]
                .get(i)
                .is_some_and(|u| recv_matches(directed, &recv, &u.msg));
            if !hit {
                i += 1;
                continue;
            }
            let Some(msg) = self.unexpected[kind].remove(i) else {
                break;
            };
            self.unhold(&msg);
            msgs.push((place_multi(recv.len, &mut used, msg.msg.len), msg));
            if exhausted(recv.len, used, min) {
                return Ok(PostOutcome::MultiMatched {
                    buf: MultiBuf::Released(recv),
                    msgs,
                });
            }
        }
        let queue = &mut self.posted[kind];
        queue.push_back(Posted { recv, used, min });
        if msgs.is_empty() {
            return Ok(PostOutcome::Queued);
        }
        match queue.back() {
            Some(p) => Ok(PostOutcome::MultiMatched {
                buf: MultiBuf::Posted(&p.recv),
                msgs,
            }),
            None => Ok(PostOutcome::Queued),
        }
    }

    /// Stop counting a message that left the unexpected/claimed store.
    fn unhold(&mut self, msg: &UnexpectedMsg<U>) {
        self.held_entries = self.held_entries.saturating_sub(1);
        self.held_bytes = self.held_bytes.saturating_sub(msg.bytes);
    }

    /// Remove the queued receive with context `ctx` (the oldest such untagged one, else
    /// the oldest such tagged one) so the provider can complete it with
    /// `FI_ECANCELED`; `None` if no queued receive has that context (it completed, or
    /// never was queued).
    pub fn cancel(&mut self, ctx: usize) -> Option<PostedRecv<B>> {
        for queue in &mut self.posted {
            if let Some(i) = queue.iter().position(|p| p.recv.ctx == ctx) {
                return queue.remove(i).map(|p| p.recv);
            }
        }
        None
    }

    /// Remove every queued receive (untagged ones first, each queue in posting order),
    /// e.g. to cancel them all when the endpoint closes.
    pub fn drain_posted(&mut self) -> impl Iterator<Item = PostedRecv<B>> + '_ {
        let [untagged, tagged] = &mut self.posted;
        untagged.drain(..).chain(tagged.drain(..)).map(|p| p.recv)
    }

    /// Remove every held message — unexpected (untagged first, each in arrival order),
    /// then claimed — so the provider can release their payloads.
    pub fn drain_unexpected(&mut self) -> impl Iterator<Item = UnexpectedMsg<U>> + '_ {
        self.held_entries = 0;
        self.held_bytes = 0;
        let [untagged, tagged] = &mut self.unexpected;
        untagged
            .drain(..)
            .chain(tagged.drain(..))
            .chain(self.claimed.drain(..).map(|(_, m)| m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type M = TagMatcher<&'static str, u32>;

    fn cfg() -> MatcherConfig {
        MatcherConfig {
            min_multi_recv: 0,
            ..MatcherConfig::default()
        }
    }

    fn inc(tag: u64, len: usize) -> Incoming {
        Incoming {
            src: 1,
            tag,
            len,
            data: None,
            tagged: true,
        }
    }

    fn untagged(src: u64, len: usize) -> Incoming {
        Incoming {
            src,
            tag: 0,
            len,
            data: Some(7),
            tagged: false,
        }
    }

    /// ctx of a match against a posted receive.
    fn matched_ctx(m: Match<'_, &'static str>) -> Option<usize> {
        match m {
            Match::Unexpected => None,
            Match::Recv { recv, .. } => Some(recv.ctx),
            Match::Multi { buf, .. } => Some(buf.recv().ctx),
        }
    }

    fn post(m: &mut M, r: PostedRecv<&'static str>) {
        assert!(matches!(m.post_recv(r), Ok(PostOutcome::Queued)));
    }

    #[test]
    fn kinds_never_cross() {
        let mut m = M::new(cfg());
        post(&mut m, PostedRecv::msg(1, "a", 8));
        assert_eq!(
            m.match_incoming(&inc(0, 4)),
            Match::Unexpected,
            "tagged msg, untagged recv"
        );
        m.push_unexpected(inc(0, 4), 10).unwrap();
        post(&mut m, PostedRecv::tagged(2, 5, 0, "b", 8));
        assert_eq!(m.match_incoming(&untagged(1, 4)).recv_ctx(), Some(1));
        // the tagged unexpected message (tag 0) is still there; tag 5 recv does not take it
        assert_eq!(m.unexpected_len(), 1);
        match m.post_recv(PostedRecv::tagged(3, 0, 0, "c", 8)).unwrap() {
            PostOutcome::Matched { recv, msg, place } => {
                assert_eq!(recv.ctx, 3);
                assert_eq!(msg.payload, 10);
                assert_eq!(
                    place,
                    Placement {
                        offset: 0,
                        len: 4,
                        truncated: false
                    }
                );
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(m.unexpected_len(), 0);
        assert_eq!(m.unexpected_bytes(), 0);
    }

    #[test]
    fn in_place_match_removes_only_after_delivery() {
        let mut m = M::new(cfg());
        post(&mut m, PostedRecv::tagged(1, 5, 0, "a", 8));
        post(&mut m, PostedRecv::tagged(2, 6, 0, "b", 8));
        // A delivery that panics leaves its receive posted.
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = m.match_incoming_with(&inc(6, 4), |_, _| panic!("delivery failed"));
        }));
        assert!(caught.is_err());
        assert_eq!(m.posted_len(), 2);
        // Not the oldest: the second receive is taken, the first keeps its place.
        let got = m.match_incoming_with(&inc(6, 12), |r, place| (r.ctx, r.buf, place));
        assert_eq!(
            got.ok(),
            Some((
                2,
                "b",
                Placement {
                    offset: 0,
                    len: 8,
                    truncated: true
                }
            ))
        );
        assert_eq!(m.posted_len(), 1);
        assert_eq!(
            m.match_incoming_with(&inc(7, 1), |r, _| r.ctx).err(),
            Some(Match::Unexpected)
        );
        assert_eq!(
            m.match_incoming_with(&inc(5, 1), |r, _| r.ctx).ok(),
            Some(1)
        );
        assert_eq!(m.posted_len(), 0);
        // A multi-receive buffer is answered as match_incoming answers it.
        post(
            &mut m,
            PostedRecv::msg(3, "big", 20).with_flags(OpFlags::MULTI_RECV),
        );
        match m.match_incoming_with(&untagged(1, 4), |_, _| panic!("not ordinary")) {
            Err(Match::Multi { buf, place }) => {
                assert_eq!(buf.recv().ctx, 3);
                assert_eq!(place.len, 4);
            }
            other => panic!("{other:?}"),
        }
    }

    impl Match<'_, &'static str> {
        fn recv_ctx(self) -> Option<usize> {
            matched_ctx(self)
        }
    }

    #[test]
    fn untagged_receive_ignores_tags() {
        let mut m = M::new(cfg());
        post(
            &mut m,
            PostedRecv {
                tag: 9,
                ignore: 0,
                ..PostedRecv::msg(1, "a", 8)
            },
        );
        let msg = Incoming {
            tag: 1234,
            ..untagged(1, 3)
        };
        assert_eq!(m.match_incoming(&msg).recv_ctx(), Some(1));
    }

    #[test]
    fn tag_and_ignore_mask() {
        let mut m = M::new(cfg());
        post(&mut m, PostedRecv::tagged(1, 0xab00, 0x00ff, "a", 8));
        assert_eq!(m.match_incoming(&inc(0xac00, 1)), Match::Unexpected);
        assert_eq!(m.match_incoming(&inc(0xab7f, 1)).recv_ctx(), Some(1));
        post(&mut m, PostedRecv::tagged(2, 0, u64::MAX, "b", 8));
        assert_eq!(
            m.match_incoming(&inc(u64::MAX, 1)).recv_ctx(),
            Some(2),
            "all-ignore takes any tag"
        );
        post(&mut m, PostedRecv::tagged(3, 7, 0, "c", 8));
        assert_eq!(m.match_incoming(&inc(6, 1)), Match::Unexpected);
        assert_eq!(m.match_incoming(&inc(7, 1)).recv_ctx(), Some(3));
    }

    #[test]
    fn first_posted_wins_and_unexpected_is_fifo() {
        let mut m = M::new(cfg());
        post(&mut m, PostedRecv::tagged(1, 1, 0, "a", 8));
        post(&mut m, PostedRecv::tagged(2, 0, u64::MAX, "b", 8));
        post(&mut m, PostedRecv::tagged(3, 1, 0, "c", 8));
        assert_eq!(m.match_incoming(&inc(1, 1)).recv_ctx(), Some(1));
        assert_eq!(m.match_incoming(&inc(1, 1)).recv_ctx(), Some(2));
        assert_eq!(m.match_incoming(&inc(1, 1)).recv_ctx(), Some(3));
        assert_eq!(m.posted_len(), 0);

        for (tag, p) in [(4, 100), (5, 101), (4, 102)] {
            assert_eq!(m.match_incoming(&inc(tag, 2)), Match::Unexpected);
            m.push_unexpected(inc(tag, 2), p).unwrap();
        }
        let got: Vec<u32> = (0..3)
            .map(
                |i| match m.post_recv(PostedRecv::tagged(i, 4, 1, "x", 8)).unwrap() {
                    PostOutcome::Matched { msg, .. } => msg.payload,
                    o => panic!("{o:?}"),
                },
            )
            .collect();
        assert_eq!(got, vec![100, 101, 102]);
    }

    #[test]
    fn directed_receive() {
        for directed in [false, true] {
            let mut m = M::new(MatcherConfig {
                directed_recv: directed,
                ..cfg()
            });
            post(&mut m, PostedRecv::msg(1, "a", 8).from_src(5));
            post(&mut m, PostedRecv::msg(2, "b", 8));
            let first = m.match_incoming(&untagged(6, 1)).recv_ctx();
            assert_eq!(first, Some(if directed { 2 } else { 1 }));
            let second = m.match_incoming(&untagged(6, 1)).recv_ctx();
            assert_eq!(second, if directed { None } else { Some(2) });
            if directed {
                assert_eq!(m.match_incoming(&untagged(5, 1)).recv_ctx(), Some(1));
                // a directed post skips unexpected messages from others
                m.push_unexpected(untagged(6, 1), 1).unwrap();
                m.push_unexpected(untagged(5, 1), 2).unwrap();
                match m.post_recv(PostedRecv::msg(3, "c", 8).from_src(5)).unwrap() {
                    PostOutcome::Matched { msg, .. } => assert_eq!(msg.payload, 2),
                    o => panic!("{o:?}"),
                }
            }
        }
    }

    #[test]
    fn truncation() {
        let mut m = M::new(cfg());
        post(&mut m, PostedRecv::msg(1, "a", 4));
        match m.match_incoming(&untagged(1, 10)) {
            Match::Recv { place, .. } => assert_eq!(
                place,
                Placement {
                    offset: 0,
                    len: 4,
                    truncated: true
                }
            ),
            o => panic!("{o:?}"),
        }
        m.push_unexpected(untagged(1, 10), 0).unwrap();
        match m.post_recv(PostedRecv::msg(2, "b", 3)).unwrap() {
            PostOutcome::Matched { place, .. } => {
                assert_eq!(
                    place,
                    Placement {
                        offset: 0,
                        len: 3,
                        truncated: true
                    }
                )
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn multi_recv_packs_and_releases_below_min() {
        let mut m = M::new(MatcherConfig {
            min_multi_recv: 10,
            ..cfg()
        });
        post(
            &mut m,
            PostedRecv::msg(1, "big", 40).with_flags(OpFlags::MULTI_RECV),
        );
        post(&mut m, PostedRecv::msg(2, "next", 8));
        match m.match_incoming(&untagged(1, 12)) {
            Match::Multi { buf, place } => {
                assert!(!buf.is_released());
                assert_eq!(
                    buf,
                    MultiBuf::Posted(
                        &PostedRecv::msg(1, "big", 40).with_flags(OpFlags::MULTI_RECV)
                    )
                );
                assert_eq!(
                    place,
                    Placement {
                        offset: 0,
                        len: 12,
                        truncated: false
                    }
                );
            }
            o => panic!("{o:?}"),
        }
        match m.match_incoming(&untagged(1, 18)) {
            Match::Multi { buf, place } => {
                assert!(!buf.is_released(), "10 bytes left: not below the minimum");
                assert_eq!(
                    place,
                    Placement {
                        offset: 12,
                        len: 18,
                        truncated: false
                    }
                );
            }
            o => panic!("{o:?}"),
        }
        match m.match_incoming(&untagged(1, 1)) {
            Match::Multi { buf, place } => {
                assert!(buf.is_released(), "9 bytes left < 10");
                assert_eq!(buf.recv().ctx, 1);
                assert_eq!(
                    place,
                    Placement {
                        offset: 30,
                        len: 1,
                        truncated: false
                    }
                );
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(m.match_incoming(&untagged(1, 1)).recv_ctx(), Some(2));
    }

    #[test]
    fn multi_recv_truncates_into_the_rest_and_zero_min_releases_when_full() {
        let mut m = M::new(cfg());
        post(
            &mut m,
            PostedRecv::tagged(1, 0, !0, "big", 10).with_flags(OpFlags::MULTI_RECV),
        );
        match m.match_incoming(&inc(0, 10)) {
            Match::Multi { buf, place } => {
                assert!(buf.is_released(), "full buffer is released even with min 0");
                assert_eq!(
                    place,
                    Placement {
                        offset: 0,
                        len: 10,
                        truncated: false
                    }
                );
            }
            o => panic!("{o:?}"),
        }
        post(
            &mut m,
            PostedRecv::tagged(2, 0, !0, "big", 10).with_flags(OpFlags::MULTI_RECV),
        );
        let _ = m.match_incoming(&inc(0, 6));
        match m.match_incoming(&inc(0, 6)) {
            Match::Multi { buf, place } => {
                assert!(buf.is_released());
                assert_eq!(
                    place,
                    Placement {
                        offset: 6,
                        len: 4,
                        truncated: true
                    }
                );
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn multi_recv_post_drains_unexpected() {
        let mut m = M::new(MatcherConfig {
            min_multi_recv: 4,
            ..cfg()
        });
        for (i, len) in [5usize, 3, 6].into_iter().enumerate() {
            m.push_unexpected(untagged(1, len), i as u32).unwrap();
        }
        m.push_unexpected(inc(0, 1), 99).unwrap(); // tagged: not for a msg buffer
        let out = m
            .post_recv(PostedRecv::msg(1, "big", 20).with_flags(OpFlags::MULTI_RECV))
            .unwrap();
        match out {
            PostOutcome::MultiMatched { buf, msgs } => {
                assert!(!buf.is_released(), "6 bytes left >= 4");
                let got: Vec<(usize, usize, u32)> = msgs
                    .iter()
                    .map(|(p, u)| (p.offset, p.len, u.payload))
                    .collect();
                assert_eq!(got, vec![(0, 5, 0), (5, 3, 1), (8, 6, 2)]);
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(m.posted_len(), 1);
        assert_eq!(m.unexpected_len(), 1);
        assert_eq!(m.unexpected_bytes(), 1);
        match m.match_incoming(&untagged(1, 3)) {
            Match::Multi { buf, place } => {
                assert!(buf.is_released(), "3 bytes left < 4");
                assert_eq!(place.offset, 14);
            }
            o => panic!("{o:?}"),
        }
        // a buffer consumed during the post is released without being queued
        m.push_unexpected(untagged(1, 30), 5).unwrap();
        match m
            .post_recv(PostedRecv::msg(2, "big", 20).with_flags(OpFlags::MULTI_RECV))
            .unwrap()
        {
            PostOutcome::MultiMatched {
                buf: MultiBuf::Released(r),
                msgs,
            } => {
                assert_eq!(r.ctx, 2);
                assert_eq!(msgs.len(), 1);
                assert_eq!(
                    msgs[0].0,
                    Placement {
                        offset: 0,
                        len: 20,
                        truncated: true
                    }
                );
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(m.posted_len(), 0);
        // no unexpected message: simply queued
        post(
            &mut m,
            PostedRecv::msg(3, "big", 20).with_flags(OpFlags::MULTI_RECV),
        );
    }

    #[test]
    fn min_multi_recv_applies_to_later_posts() {
        let mut m = M::new(MatcherConfig {
            min_multi_recv: 0,
            ..cfg()
        });
        post(
            &mut m,
            PostedRecv::msg(1, "a", 10).with_flags(OpFlags::MULTI_RECV),
        );
        m.set_min_multi_recv(100);
        assert_eq!(m.config().min_multi_recv, 100);
        match m.match_incoming(&untagged(1, 2)) {
            Match::Multi { buf, .. } => assert!(!buf.is_released(), "posted with min 0"),
            o => panic!("{o:?}"),
        }
        post(
            &mut m,
            PostedRecv::tagged(2, 0, 0, "b", 10).with_flags(OpFlags::MULTI_RECV),
        );
        match m.match_incoming(&inc(0, 2)) {
            Match::Multi { buf, .. } => assert!(buf.is_released(), "posted with min 100"),
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn peek_found_and_not_found() {
        let mut m = M::new(cfg());
        let peek = |ctx| PostedRecv::tagged(ctx, 3, 0, "p", 0).with_flags(OpFlags::PEEK);
        match m.post_recv(peek(1)).unwrap() {
            PostOutcome::NoMessage { recv } => assert_eq!(recv.ctx, 1),
            o => panic!("{o:?}"),
        }
        let msg = Incoming {
            src: 4,
            tag: 3,
            len: 9,
            data: Some(42),
            tagged: true,
        };
        m.push_unexpected(msg, 7).unwrap();
        for _ in 0..2 {
            match m.post_recv(peek(2)).unwrap() {
                PostOutcome::Peeked { recv, msg: got } => {
                    assert_eq!(recv.ctx, 2);
                    assert_eq!(got, msg, "length, tag, data and source reported");
                }
                o => panic!("{o:?}"),
            }
        }
        assert_eq!(m.unexpected_len(), 1, "peek does not consume");
        assert_eq!(m.posted_len(), 0, "peek is never queued");
    }

    #[test]
    fn peek_claim_then_claim() {
        let mut m = M::new(cfg());
        m.push_unexpected(inc(3, 9), 7).unwrap();
        m.push_unexpected(inc(3, 5), 8).unwrap();
        let pc = PostedRecv::tagged(10, 3, 0, "p", 0).with_flags(OpFlags::PEEK | OpFlags::CLAIM);
        match m.post_recv(pc.clone()).unwrap() {
            PostOutcome::Peeked { msg, .. } => assert_eq!(msg.len, 9),
            o => panic!("{o:?}"),
        }
        assert_eq!(m.claimed_len(), 1);
        assert_eq!(m.unexpected_len(), 2, "claimed messages still count");
        assert_eq!(m.unexpected_bytes(), 14);
        // the claimed message is invisible to other peeks and receives
        match m
            .post_recv(PostedRecv::tagged(11, 3, 0, "p", 0).with_flags(OpFlags::PEEK))
            .unwrap()
        {
            PostOutcome::Peeked { msg, .. } => assert_eq!(msg.len, 5),
            o => panic!("{o:?}"),
        }
        // the same ctx cannot claim twice
        let e = m.post_recv(pc).unwrap_err();
        assert_eq!(e.error.code(), Errno::EINVAL);
        assert_eq!(e.item.ctx, 10);
        // claim with a different tag still gets the reserved message
        let claim = PostedRecv::tagged(10, 999, 0, "buf", 4).with_flags(OpFlags::CLAIM);
        match m.post_recv(claim).unwrap() {
            PostOutcome::Matched { recv, place, msg } => {
                assert_eq!(recv.buf, "buf");
                assert_eq!(msg.payload, 7);
                assert_eq!(
                    place,
                    Placement {
                        offset: 0,
                        len: 4,
                        truncated: true
                    }
                );
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(m.claimed_len(), 0);
        assert_eq!(m.unexpected_len(), 1);
        assert_eq!(m.unexpected_bytes(), 5);
        // claiming again: nothing reserved for ctx 10
        let e = m
            .post_recv(PostedRecv::tagged(10, 3, 0, "b", 4).with_flags(OpFlags::CLAIM))
            .unwrap_err();
        assert_eq!(e.error.code(), Errno::EINVAL);
    }

    #[test]
    fn discard() {
        let mut m = M::new(cfg());
        m.push_unexpected(inc(1, 9), 7).unwrap();
        m.push_unexpected(inc(2, 5), 8).unwrap();
        let pd = |tag| {
            PostedRecv::tagged(1, tag, 0, "p", 0).with_flags(OpFlags::PEEK | OpFlags::DISCARD)
        };
        match m.post_recv(pd(1)).unwrap() {
            PostOutcome::Discarded { msg, .. } => assert_eq!(msg.payload, 7),
            o => panic!("{o:?}"),
        }
        assert!(matches!(
            m.post_recv(pd(1)).unwrap(),
            PostOutcome::NoMessage { .. }
        ));
        assert_eq!(m.unexpected_len(), 1);
        // claim, then discard the claimed one
        let pc = PostedRecv::tagged(5, 2, 0, "p", 0).with_flags(OpFlags::PEEK | OpFlags::CLAIM);
        assert!(matches!(
            m.post_recv(pc).unwrap(),
            PostOutcome::Peeked { .. }
        ));
        let cd = PostedRecv::tagged(5, 0, 0, "p", 0).with_flags(OpFlags::CLAIM | OpFlags::DISCARD);
        match m.post_recv(cd).unwrap() {
            PostOutcome::Discarded { recv, msg } => {
                assert_eq!(recv.ctx, 5);
                assert_eq!(msg.payload, 8);
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(
            (m.unexpected_len(), m.unexpected_bytes(), m.claimed_len()),
            (0, 0, 0)
        );
    }

    #[test]
    fn bad_flag_combinations() {
        let mut m = M::new(cfg());
        m.push_unexpected(inc(0, 1), 0).unwrap();
        for flags in [
            OpFlags::DISCARD,
            OpFlags::MULTI_RECV | OpFlags::PEEK,
            OpFlags::MULTI_RECV | OpFlags::CLAIM,
            OpFlags::MULTI_RECV | OpFlags::DISCARD,
        ] {
            let e = m
                .post_recv(PostedRecv::tagged(1, 0, 0, "a", 8).with_flags(flags))
                .unwrap_err();
            assert_eq!(e.error.code(), Errno::EBADFLAGS, "{flags:?}");
            assert_eq!(e.item.buf, "a");
        }
        assert_eq!(m.unexpected_len(), 1, "refused posts change nothing");
        let err: Error = m
            .post_recv(PostedRecv::msg(1, "a", 1).with_flags(OpFlags::DISCARD))
            .unwrap_err()
            .into();
        assert_eq!(err.code(), Errno::EBADFLAGS);
    }

    #[test]
    fn cancel_removes_queued_receive() {
        let mut m = M::new(cfg());
        post(&mut m, PostedRecv::tagged(1, 0, 0, "t", 8));
        post(&mut m, PostedRecv::msg(1, "m", 8));
        post(&mut m, PostedRecv::msg(2, "m2", 8));
        assert_eq!(
            m.cancel(1).map(|r| r.buf),
            Some("m"),
            "untagged searched first"
        );
        assert_eq!(m.cancel(1).map(|r| r.buf), Some("t"));
        assert_eq!(m.cancel(1), None);
        assert_eq!(m.cancel(99), None);
        assert_eq!(m.posted_len(), 1);
        assert_eq!(m.match_incoming(&untagged(1, 1)).recv_ctx(), Some(2));
        assert_eq!(m.match_incoming(&inc(0, 1)), Match::Unexpected);
    }

    #[test]
    fn posted_limit_is_eagain() {
        let mut m = M::new(MatcherConfig {
            max_posted: 2,
            ..cfg()
        });
        post(&mut m, PostedRecv::msg(1, "a", 8));
        post(&mut m, PostedRecv::tagged(2, 0, 0, "b", 8));
        assert!(!m.can_post());
        let e = m.post_recv(PostedRecv::msg(3, "c", 8)).unwrap_err();
        assert_eq!(e.error.code(), Errno::EAGAIN);
        assert_eq!(e.item.buf, "c");
        let e = m
            .post_recv(PostedRecv::msg(3, "c", 8).with_flags(OpFlags::MULTI_RECV))
            .unwrap_err();
        assert_eq!(e.error.code(), Errno::EAGAIN);
        // peeks are never queued, so they work on a full queue
        assert!(matches!(
            m.post_recv(PostedRecv::msg(4, "p", 0).with_flags(OpFlags::PEEK))
                .unwrap(),
            PostOutcome::NoMessage { .. }
        ));
        // an ordinary receive that matches an unexpected message needs no slot
        m.push_unexpected(
            Incoming {
                tag: 1,
                ..inc(0, 1)
            },
            5,
        )
        .unwrap();
        assert!(matches!(
            m.post_recv(PostedRecv::tagged(5, 1, 0, "d", 8)).unwrap(),
            PostOutcome::Matched { .. }
        ));
        // completing one frees a slot
        assert_eq!(m.match_incoming(&untagged(1, 1)).recv_ctx(), Some(1));
        post(&mut m, PostedRecv::msg(3, "c", 8));
    }

    #[test]
    fn unexpected_limits_are_enobufs() {
        let mut m = M::new(MatcherConfig {
            max_unexpected: 2,
            max_unexpected_bytes: 10,
            ..cfg()
        });
        assert!(m.has_room_for_unexpected(10));
        assert!(!m.has_room_for_unexpected(11));
        let e = m.push_unexpected(untagged(1, 11), 1).unwrap_err();
        assert_eq!(e.error.code(), Errno::ENOBUFS);
        assert_eq!(e.item.payload, 1);
        m.push_unexpected(untagged(1, 6), 2).unwrap();
        let e = m.push_unexpected(untagged(1, 5), 3).unwrap_err();
        assert_eq!(e.error.code(), Errno::ENOBUFS, "bytes");
        // a rendezvous header counts only what is buffered
        m.push_unexpected_sized(inc(0, 1 << 30), 4, 4).unwrap();
        assert_eq!(m.unexpected_bytes(), 10);
        let e = m.push_unexpected_sized(untagged(1, 0), 5, 0).unwrap_err();
        assert_eq!(e.error.code(), Errno::ENOBUFS, "entries");
        assert_eq!((m.unexpected_len(), m.unexpected_bytes()), (2, 10));
        match m.post_recv(PostedRecv::tagged(1, 0, 0, "r", 64)).unwrap() {
            PostOutcome::Matched { msg, place, .. } => {
                assert_eq!(msg.bytes, 4);
                assert_eq!(
                    place,
                    Placement {
                        offset: 0,
                        len: 64,
                        truncated: true
                    }
                );
            }
            o => panic!("{o:?}"),
        }
        assert_eq!((m.unexpected_len(), m.unexpected_bytes()), (1, 6));
        assert!(m.push_unexpected(untagged(1, 4), 6).is_ok());
    }

    #[test]
    fn drains_empty_everything() {
        let mut m = M::new(cfg());
        post(&mut m, PostedRecv::tagged(1, 1, 0, "t", 8));
        post(&mut m, PostedRecv::msg(2, "m", 8));
        m.push_unexpected(inc(2, 3), 1).unwrap();
        m.push_unexpected(inc(3, 3), 2).unwrap();
        let pc = PostedRecv::tagged(9, 3, 0, "p", 0).with_flags(OpFlags::PEEK | OpFlags::CLAIM);
        m.post_recv(pc).unwrap();
        let posted: Vec<usize> = m.drain_posted().map(|r| r.ctx).collect();
        assert_eq!(posted, vec![2, 1]);
        let held: Vec<u32> = m.drain_unexpected().map(|u| u.payload).collect();
        assert_eq!(held, vec![1, 2]);
        assert_eq!(
            (
                m.posted_len(),
                m.unexpected_len(),
                m.unexpected_bytes(),
                m.claimed_len()
            ),
            (0, 0, 0, 0)
        );
    }

    #[test]
    fn refused_debug_and_conversion() {
        let r = Refused::new(Errno::EAGAIN, "full", 5u8);
        assert!(format!("{r:?}").contains("FI_EAGAIN"));
        let e: Error = r.into();
        assert_eq!(e.code(), Errno::EAGAIN);
        assert_eq!(e.message(), "full");
    }

    // ---- property test against a naive reference model ----

    /// The observable result of one operation, with receives named by their buffer id
    /// (unique per post) and messages by their payload id.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Obs {
        Refused(Errno, u32),
        Unexpected,
        Pushed,
        Recv(u32, Placement),
        Multi(u32, bool, Placement),
        Queued,
        Matched(u32, Placement, u32),
        MultiMatched(u32, bool, Vec<(Placement, u32)>),
        Peeked(u32, Incoming),
        NoMessage(u32),
        Discarded(u32, u32),
        Cancelled(Option<u32>),
    }

    /// A plain reference: one Vec of posted receives (both kinds, posting order),
    /// one Vec of unexpected messages (both kinds, arrival order), one Vec of claims.
    struct Model {
        cfg: MatcherConfig,
        posted: Vec<(PostedRecv<u32>, usize, usize)>,
        unexp: Vec<(Incoming, u32, usize)>,
        claimed: Vec<(usize, Incoming, u32, usize)>,
    }

    impl Model {
        fn takes(&self, r: &PostedRecv<u32>, m: &Incoming) -> bool {
            if r.tagged != m.tagged {
                return false;
            }
            if self.cfg.directed_recv && r.src != ANY_SRC && r.src != m.src {
                return false;
            }
            !r.tagged || (m.tag | r.ignore) == (r.tag | r.ignore)
        }

        fn held(&self) -> (usize, usize) {
            let n = self.unexp.len() + self.claimed.len();
            let b = self.unexp.iter().map(|u| u.2).sum::<usize>()
                + self.claimed.iter().map(|c| c.3).sum::<usize>();
            (n, b)
        }

        fn arrive(&mut self, m: Incoming, id: u32) -> Vec<Obs> {
            if let Some(i) = self.posted.iter().position(|(r, _, _)| self.takes(r, &m)) {
                let (r, used, min) = &mut self.posted[i];
                if !r.flags.contains(OpFlags::MULTI_RECV) {
                    let place = Placement {
                        offset: 0,
                        len: m.len.min(r.len),
                        truncated: m.len > r.len,
                    };
                    let buf = r.buf;
                    self.posted.remove(i);
                    return vec![Obs::Recv(buf, place)];
                }
                let left = r.len - *used;
                let place = Placement {
                    offset: *used,
                    len: m.len.min(left),
                    truncated: m.len > left,
                };
                *used += place.len;
                let left = r.len - *used;
                let released = left == 0 || left < *min;
                let buf = r.buf;
                if released {
                    self.posted.remove(i);
                }
                return vec![Obs::Multi(buf, released, place)];
            }
            let (n, b) = self.held();
            if n + 1 > self.cfg.max_unexpected || b + m.len > self.cfg.max_unexpected_bytes {
                return vec![Obs::Unexpected, Obs::Refused(Errno::ENOBUFS, id)];
            }
            self.unexp.push((m, id, m.len));
            vec![Obs::Unexpected, Obs::Pushed]
        }

        fn post(&mut self, r: PostedRecv<u32>) -> Obs {
            let f = r.flags;
            let peek = f.contains(OpFlags::PEEK);
            let claim = f.contains(OpFlags::CLAIM);
            let discard = f.contains(OpFlags::DISCARD);
            let multi = f.contains(OpFlags::MULTI_RECV);
            if (discard && !peek && !claim) || (multi && (peek || claim)) {
                return Obs::Refused(Errno::EBADFLAGS, r.buf);
            }
            if peek {
                if claim && !discard && self.claimed.iter().any(|c| c.0 == r.ctx) {
                    return Obs::Refused(Errno::EINVAL, r.buf);
                }
                let Some(i) = self.unexp.iter().position(|u| self.takes(&r, &u.0)) else {
                    return Obs::NoMessage(r.buf);
                };
                if discard {
                    let u = self.unexp.remove(i);
                    return Obs::Discarded(r.buf, u.1);
                }
                if claim {
                    let u = self.unexp.remove(i);
                    self.claimed.push((r.ctx, u.0, u.1, u.2));
                    return Obs::Peeked(r.buf, u.0);
                }
                return Obs::Peeked(r.buf, self.unexp[i].0);
            }
            if claim {
                let Some(i) = self.claimed.iter().position(|c| c.0 == r.ctx) else {
                    return Obs::Refused(Errno::EINVAL, r.buf);
                };
                let c = self.claimed.remove(i);
                if discard {
                    return Obs::Discarded(r.buf, c.2);
                }
                let place = Placement {
                    offset: 0,
                    len: c.1.len.min(r.len),
                    truncated: c.1.len > r.len,
                };
                return Obs::Matched(r.buf, place, c.2);
            }
            let full = self.posted.len() >= self.cfg.max_posted;
            if multi {
                if full {
                    return Obs::Refused(Errno::EAGAIN, r.buf);
                }
                let min = self.cfg.min_multi_recv;
                let mut used = 0;
                let mut got = Vec::new();
                let mut released = false;
                let mut kept = Vec::new();
                for u in std::mem::take(&mut self.unexp) {
                    if released || !self.takes(&r, &u.0) {
                        kept.push(u);
                        continue;
                    }
                    let left = r.len - used;
                    let place = Placement {
                        offset: used,
                        len: u.0.len.min(left),
                        truncated: u.0.len > left,
                    };
                    used += place.len;
                    got.push((place, u.1));
                    let left = r.len - used;
                    released = left == 0 || left < min;
                }
                self.unexp = kept;
                let buf = r.buf;
                if !released {
                    self.posted.push((r, used, min));
                }
                if got.is_empty() {
                    return Obs::Queued;
                }
                return Obs::MultiMatched(buf, released, got);
            }
            if let Some(i) = self.unexp.iter().position(|u| self.takes(&r, &u.0)) {
                let u = self.unexp.remove(i);
                let place = Placement {
                    offset: 0,
                    len: u.0.len.min(r.len),
                    truncated: u.0.len > r.len,
                };
                return Obs::Matched(r.buf, place, u.1);
            }
            if full {
                return Obs::Refused(Errno::EAGAIN, r.buf);
            }
            self.posted.push((r, 0, 0));
            Obs::Queued
        }

        fn cancel(&mut self, ctx: usize) -> Obs {
            let i = self
                .posted
                .iter()
                .position(|p| !p.0.tagged && p.0.ctx == ctx)
                .or_else(|| {
                    self.posted
                        .iter()
                        .position(|p| p.0.tagged && p.0.ctx == ctx)
                });
            Obs::Cancelled(i.map(|i| self.posted.remove(i).0.buf))
        }
    }

    /// `in_place`: through [`TagMatcher::match_incoming_with`] (its `Ok` is the
    /// ordinary receive's answer, seen by reference), else `match_incoming`.
    fn real_arrive(t: &mut TagMatcher<u32, u32>, m: Incoming, id: u32, in_place: bool) -> Vec<Obs> {
        let general = if in_place {
            match t.match_incoming_with(&m, |recv, place| Obs::Recv(recv.buf, place)) {
                Ok(obs) => return vec![obs],
                Err(Match::Recv { .. }) => panic!("an ordinary receive came back as Err"),
                Err(other) => other,
            }
        } else {
            t.match_incoming(&m)
        };
        let first = match general {
            Match::Unexpected => Obs::Unexpected,
            Match::Recv { recv, place } => return vec![Obs::Recv(recv.buf, place)],
            Match::Multi { buf, place } => {
                return vec![Obs::Multi(buf.recv().buf, buf.is_released(), place)]
            }
        };
        let second = match t.push_unexpected(m, id) {
            Ok(()) => Obs::Pushed,
            Err(e) => {
                assert_eq!(e.item.payload, id);
                Obs::Refused(e.error.code(), id)
            }
        };
        vec![first, second]
    }

    fn real_post(t: &mut TagMatcher<u32, u32>, r: PostedRecv<u32>) -> Obs {
        let id = r.buf;
        match t.post_recv(r) {
            Err(e) => {
                assert_eq!(e.item.buf, id, "refused receive handed back");
                Obs::Refused(e.error.code(), id)
            }
            Ok(PostOutcome::Queued) => Obs::Queued,
            Ok(PostOutcome::Matched { recv, place, msg }) => {
                Obs::Matched(recv.buf, place, msg.payload)
            }
            Ok(PostOutcome::MultiMatched { buf, msgs }) => Obs::MultiMatched(
                buf.recv().buf,
                buf.is_released(),
                msgs.iter().map(|(p, u)| (*p, u.payload)).collect(),
            ),
            Ok(PostOutcome::Peeked { recv, msg }) => Obs::Peeked(recv.buf, msg),
            Ok(PostOutcome::NoMessage { recv }) => Obs::NoMessage(recv.buf),
            Ok(PostOutcome::Discarded { recv, msg }) => Obs::Discarded(recv.buf, msg.payload),
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Arrive {
            src: u64,
            tag: u64,
            len: usize,
            tagged: bool,
        },
        Post {
            ctx: usize,
            src: u64,
            tag: u64,
            ignore: u64,
            flags: OpFlags,
            tagged: bool,
            len: usize,
        },
        Cancel(usize),
        SetMin(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let flags = prop::sample::select(vec![
            OpFlags::empty(),
            OpFlags::empty(),
            OpFlags::empty(),
            OpFlags::MULTI_RECV,
            OpFlags::MULTI_RECV,
            OpFlags::PEEK,
            OpFlags::PEEK | OpFlags::CLAIM,
            OpFlags::CLAIM,
            OpFlags::PEEK | OpFlags::DISCARD,
            OpFlags::CLAIM | OpFlags::DISCARD,
            OpFlags::PEEK | OpFlags::CLAIM | OpFlags::DISCARD,
            OpFlags::DISCARD,
            OpFlags::MULTI_RECV | OpFlags::PEEK,
        ]);
        let src = prop_oneof![3 => 0u64..3, 1 => Just(ANY_SRC)];
        let ignore = prop::sample::select(vec![0u64, 1, 2, 3, u64::MAX]);
        prop_oneof![
            4 => (0u64..3, 0u64..4, 0usize..12, any::<bool>())
                .prop_map(|(src, tag, len, tagged)| Op::Arrive { src, tag, len, tagged }),
            4 => (0usize..5, src, 0u64..4, ignore, flags, any::<bool>(), 0usize..24).prop_map(
                |(ctx, src, tag, ignore, flags, tagged, len)| Op::Post { ctx, src, tag, ignore, flags, tagged, len }
            ),
            1 => (0usize..5).prop_map(Op::Cancel),
            1 => (0usize..8).prop_map(Op::SetMin),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        #[test]
        fn agrees_with_reference_model(
            directed in any::<bool>(),
            max_posted in 0usize..6,
            max_unexpected in 0usize..6,
            max_unexpected_bytes in 0usize..40,
            min_multi_recv in 0usize..8,
            in_place in any::<bool>(),
            ops in proptest::collection::vec(op(), 0..120),
        ) {
            let cfg = MatcherConfig { directed_recv: directed, max_posted, max_unexpected, max_unexpected_bytes, min_multi_recv };
            let mut real: TagMatcher<u32, u32> = TagMatcher::new(cfg.clone());
            let mut model = Model { cfg, posted: vec![], unexp: vec![], claimed: vec![] };
            for (n, op) in ops.into_iter().enumerate() {
                let id = n as u32;
                let (got, want) = match op {
                    Op::Arrive { src, tag, len, tagged } => {
                        let m = Incoming { src, tag, len, data: Some(u64::from(id)), tagged };
                        (real_arrive(&mut real, m, id, in_place), model.arrive(m, id))
                    }
                    Op::Post { ctx, src, tag, ignore, flags, tagged, len } => {
                        let r = PostedRecv { ctx, src, tag, ignore, flags, tagged, buf: id, len };
                        (vec![real_post(&mut real, r.clone())], vec![model.post(r)])
                    }
                    Op::Cancel(ctx) => {
                        (vec![Obs::Cancelled(real.cancel(ctx).map(|r| r.buf))], vec![model.cancel(ctx)])
                    }
                    Op::SetMin(v) => {
                        real.set_min_multi_recv(v);
                        model.cfg.min_multi_recv = v;
                        (vec![], vec![])
                    }
                };
                prop_assert_eq!(got, want, "op #{}", n);
                let (held, bytes) = model.held();
                prop_assert_eq!(real.posted_len(), model.posted.len());
                prop_assert_eq!(real.unexpected_len(), held);
                prop_assert_eq!(real.unexpected_bytes(), bytes);
                prop_assert_eq!(real.claimed_len(), model.claimed.len());
                prop_assert!(real.posted_len() <= max_posted);
                prop_assert!(held <= max_unexpected && bytes <= max_unexpected_bytes);
            }
            let posted: Vec<u32> = real.drain_posted().map(|r| r.buf).collect();
            let mut want: Vec<u32> = model.posted.iter().filter(|p| !p.0.tagged).map(|p| p.0.buf).collect();
            want.extend(model.posted.iter().filter(|p| p.0.tagged).map(|p| p.0.buf));
            prop_assert_eq!(posted, want);
            let held: Vec<u32> = real.drain_unexpected().map(|u| u.payload).collect();
            let mut want: Vec<u32> = model.unexp.iter().filter(|u| !u.0.tagged).map(|u| u.1).collect();
            want.extend(model.unexp.iter().filter(|u| u.0.tagged).map(|u| u.1));
            want.extend(model.claimed.iter().map(|c| c.2));
            prop_assert_eq!(held, want);
        }
    }
}
