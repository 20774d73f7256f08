//! Hooked completion queues.
//!
//! A hooked CQ reads from the CQ beneath. For hooks that intercept datagram sends
//! ([`Hook::SENDS`]) it also holds completions the hook made itself (a dropped
//! datagram still completes to its sender, as the wire would) and returns those
//! first; each read first lets the hook make progress ([`Hook::progress`]: release
//! delayed sends). For other hooks that path is compiled out.
//!
//! Invariants: the endpoints list holds `Weak` references only (no cycle with
//! [`EpCore`], which holds this core). Nothing here panics.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ofi_core::abi::raw::CqTaggedEntry;
use ofi_core::cq::{CompletionQueue, CqBuf, CqError};
use ofi_core::provider::CqOps;
use ofi_core::{Errno, Result, ADDR_NOTAVAIL};

use crate::ep::EpCore;
use crate::{Hook, HookCalls, ObjName, Op};

/// A completion the hook made: a [`CqTaggedEntry`] without a buffer pointer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Synth {
    /// The operation's context.
    pub op_context: usize,
    /// Completion flags.
    pub flags: u64,
    /// Length.
    pub len: usize,
    /// Remote CQ data.
    pub data: u64,
    /// Tag.
    pub tag: u64,
}

/// The state of a hooked CQ that hooks see.
pub struct CqCore<H: Hook> {
    /// The CQ beneath.
    pub inner: CompletionQueue,
    /// Its name in hook messages.
    pub name: ObjName,
    /// The size it was opened with (0: the provider's default).
    pub size: usize,
    pending: Mutex<VecDeque<Synth>>,
    has_pending: AtomicBool,
    eps: Mutex<Vec<Weak<EpCore<H>>>>,
    /// The hook's own data.
    pub data: H::CqData,
}

impl<H: Hook> CqCore<H> {
    /// Record that `ep` is bound to this CQ (hooks with [`Hook::SENDS`]).
    pub(crate) fn attach(&self, ep: &Arc<EpCore<H>>) {
        let mut eps = self.eps.lock().unwrap_or_else(|p| p.into_inner());
        eps.retain(|w| w.strong_count() > 0);
        eps.push(Arc::downgrade(ep));
    }

    /// The endpoints bound to this CQ that are still open.
    pub fn endpoints(&self) -> Vec<Arc<EpCore<H>>> {
        self.eps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Queue a completion made by the hook; it is returned before the inner CQ's.
    pub fn push_completion(&self, e: Synth) {
        let mut q = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        q.push_back(e);
        self.has_pending.store(true, Ordering::Release);
    }

    /// True if completions made by the hook are queued.
    pub fn has_pending(&self) -> bool {
        self.has_pending.load(Ordering::Acquire)
    }

    /// Move queued hook completions into `buf` (and `src`): `None` if there were none.
    fn take_pending(&self, buf: &mut CqBuf<'_>, src: Option<&mut [u64]>) -> Option<usize> {
        if !self.has_pending.load(Ordering::Acquire) || buf.is_empty() {
            return None;
        }
        let mut q = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let n = q.len().min(buf.len());
        for i in 0..n {
            if let Some(e) = q.pop_front() {
                buf.set(
                    i,
                    &CqTaggedEntry {
                        op_context: e.op_context,
                        flags: e.flags,
                        len: e.len,
                        buf: std::ptr::null_mut(),
                        data: e.data,
                        tag: e.tag,
                    },
                );
            }
        }
        if let Some(s) = src {
            for slot in s.iter_mut().take(n) {
                *slot = ADDR_NOTAVAIL;
            }
        }
        if q.is_empty() {
            self.has_pending.store(false, Ordering::Release);
        }
        (n > 0).then_some(n)
    }
}

/// A CQ wrapped by hook `H`.
pub struct HookCq<H: Hook> {
    core: Arc<CqCore<H>>,
    h: Arc<H>,
}

impl<H: Hook> HookCq<H> {
    pub(crate) fn new(inner: CompletionQueue, size: usize, h: Arc<H>) -> HookCq<H> {
        HookCq {
            core: Arc::new(CqCore {
                inner,
                name: ObjName::new("cq"),
                size,
                pending: Mutex::new(VecDeque::new()),
                has_pending: AtomicBool::new(false),
                eps: Mutex::new(Vec::new()),
                data: H::CqData::default(),
            }),
            h,
        }
    }

    /// The CQ's core (for hooks and tests).
    pub fn core(&self) -> &Arc<CqCore<H>> {
        &self.core
    }
}

impl<H: Hook> HookCq<H> {
    /// What the generated forwarders use: the hook, the name and the CQ beneath.
    fn forward(&self) -> (&Arc<H>, &ObjName, &CompletionQueue) {
        (&self.h, &self.core.name, &self.core.inner)
    }

    /// Whether the hook holds completions for this CQ, or work that will make some
    /// (a waiter must read first).
    pub(crate) fn hook_busy(&self) -> bool {
        H::SENDS && (self.core.has_pending() || self.h.busy(&self.core))
    }

    /// `read` (the list's `observe` clause): completions the hook holds come first
    /// (a hook that sends has them), then those of the CQ beneath, which the hook sees
    /// when it watches CQ events.
    fn deliver(
        &self,
        beneath: &CompletionQueue,
        mut buf: CqBuf<'_>,
        mut src: Option<&mut [u64]>,
    ) -> Result<usize> {
        if H::SENDS {
            self.h.progress(&self.core);
            if let Some(n) = self.core.take_pending(&mut buf, src.as_deref_mut()) {
                return Ok(n);
            }
        }
        let r = beneath.read_into(&mut buf, src);
        if H::CQ_EVENTS {
            if let Ok(n) = r {
                self.h.cq_read(&self.core, &buf, n);
            }
        }
        r
    }

    /// `readerr` (the list's `observe` clause): the CQ beneath's next error entry,
    /// seen by a hook that watches CQ events.
    fn deliver_error(&self, beneath: &CompletionQueue, flags: u64) -> Result<CqError> {
        let r = beneath.readerr_owned(flags);
        if H::CQ_EVENTS {
            if let Ok(e) = &r {
                self.h.cq_readerr(&self.core, e);
            }
        }
        r
    }

    /// `sread` (the list's `observe` clause): as [`deliver`](Self::deliver), waiting.
    /// A hook that holds sends and completions of its own waits in short steps,
    /// making progress between them.
    fn deliver_waiting(
        &self,
        beneath: &CompletionQueue,
        mut buf: CqBuf<'_>,
        mut src: Option<&mut [u64]>,
        threshold: Option<usize>,
        timeout: i32,
    ) -> Result<usize> {
        if !H::SENDS {
            let r = beneath.sread_into(&mut buf, src, threshold, timeout);
            if H::CQ_EVENTS {
                if let Ok(n) = r {
                    self.h.cq_read(&self.core, &buf, n);
                }
            }
            return r;
        }
        let deadline =
            (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        loop {
            self.h.progress(&self.core);
            if let Some(n) = self.core.take_pending(&mut buf, src.as_deref_mut()) {
                return Ok(n);
            }
            let step = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now()).as_millis();
                    left.min(1) as i32
                }
                None => 1,
            };
            match beneath.sread_into(&mut buf, src.as_deref_mut(), threshold, step) {
                Err(e) if e.code() == Errno::EAGAIN => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(e);
                    }
                }
                other => return other,
            }
        }
    }
}

impl<H: Hook> CqOps for HookCq<H> {
    // One forwarder per entry of the list (`for_each_cq_op!`).
    ofi_core::for_each_cq_op!(ofi_core::ctl_forwarders);
}

crate::beneath_and_name! {
    HookCq |cq| (cq.core.inner, cq.core.name);
}
