//! The matcher itself: matching rules (tag / ignore bits, directed receive),
//! placement of a message in a receive or a multi-receive buffer, and the
//! [`TagMatcher`] operations — post, arrive, peek / claim / discard, cancel — over
//! the posted and unexpected queues, within the configured bounds.

use super::*;

/// Whether receive `r` takes message `m` (same kind assumed).
#[inline]
pub(super) fn recv_matches<B>(directed: bool, r: &PostedRecv<B>, m: &Incoming) -> bool {
    (!directed || r.src == ANY_SRC || r.src == m.src)
        && (!r.tagged || (r.tag ^ m.tag) & !r.ignore == 0)
}

/// The refusal of a receive that would have to be queued when the queue is full.
fn queue_full<B>(recv: PostedRecv<B>) -> Refused<PostedRecv<B>> {
    Refused::new(Errno::EAGAIN, "receive queue full (max_posted)", recv)
}

/// Placement of a `msg_len` message into an ordinary `len`-byte receive.
#[inline]
pub(super) fn place_whole(len: usize, msg_len: usize) -> Placement {
    Placement {
        offset: 0,
        len: msg_len.min(len),
        truncated: msg_len > len,
    }
}

/// Placement of a `msg_len` message into a multi-receive buffer, advancing `used`.
#[inline]
pub(super) fn place_multi(len: usize, used: &mut usize, msg_len: usize) -> Placement {
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
pub(super) fn exhausted(len: usize, used: usize, min: usize) -> bool {
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
    pub(super) fn post_recv_general(
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
        let found = self.find_unexpected(&recv, 0);
        if let Some(msg) = found.and_then(|i| self.unexpected[kind].remove(i)) {
            self.unhold(&msg);
            return Ok(PostOutcome::Matched {
                place: place_whole(recv.len, msg.msg.len),
                recv,
                msg,
            });
        }
        if !self.can_post() {
            return Err(queue_full(recv));
        }
        self.posted[kind].push_back(Posted {
            recv,
            used: 0,
            min: 0,
        });
        Ok(PostOutcome::Queued)
    }

    /// `PEEK`, with `claim` (reserve for ctx) or `discard`.
    pub(super) fn peek(
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
        let Some(i) = self.find_unexpected(&recv, 0) else {
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
    pub(super) fn take_claimed(
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
    pub(super) fn post_multi(
        &mut self,
        recv: PostedRecv<B>,
    ) -> Result<PostOutcome<'_, B, U>, Refused<PostedRecv<B>>> {
        if !self.can_post() {
            return Err(queue_full(recv));
        }
        let kind = usize::from(recv.tagged);
        let min = self.cfg.min_multi_recv;
        let mut used = 0;
        let mut msgs = Vec::new();
        let mut from = 0;
        while let Some(i) = self.find_unexpected(&recv, from) {
            let Some(msg) = self.unexpected[kind].remove(i) else {
                break;
            };
            // The messages after the one taken moved down by one: look on from `i`.
            from = i;
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

    /// The index of the first unexpected message of `recv`'s kind, at `from` or after,
    /// that `recv` matches.
    #[inline]
    fn find_unexpected(&self, recv: &PostedRecv<B>, from: usize) -> Option<usize> {
        let directed = self.cfg.directed_recv;
        let queue = &self.unexpected[usize::from(recv.tagged)];
        queue
            .range(from.min(queue.len())..)
            .position(|u| recv_matches(directed, recv, &u.msg))
            .map(|i| from + i)
    }

    /// Stop counting a message that left the unexpected/claimed store.
    pub(super) fn unhold(&mut self, msg: &UnexpectedMsg<U>) {
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
