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
mod tests;
