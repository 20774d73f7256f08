//! Completion queues and completion channels.
//!
//! Notification follows verbs: [`CompletionQueue::req_notify`] arms the queue once; the
//! next completion added after it (for `solicited_only`, the next solicited or failed
//! one) queues one event on the channel and disarms. Completions present before arming
//! raise nothing, so the usual loop is: arm, poll until empty, wait on the channel fd.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

use ofi_core::Result;

use crate::device::Context;
use crate::soft::cq::{Notifier, SoftCq};
use crate::sys::objects::{SysChannel, SysCq};
use crate::verbs::WorkCompletion;

/// A completion channel (`struct ibv_comp_channel`).
pub struct CompChannel {
    pub(crate) inner: ChannelInner,
}

/// The backend of a completion channel.
pub(crate) enum ChannelInner {
    Soft {
        _ctx: Context,
        n: Arc<Notifier<u64>>,
    },
    Sys(Arc<SysChannel>),
}

impl CompChannel {
    /// The fd: readable while a completion event is pending.
    pub fn fd(&self) -> RawFd {
        match &self.inner {
            ChannelInner::Soft { n, .. } => n.fd(),
            ChannelInner::Sys(c) => c.fd(),
        }
    }

    /// Takes one pending event without blocking: the `user` value of the CQ that fired
    /// (rdma-core's event is acknowledged at once).
    pub fn get_cq_event(&self) -> Option<u64> {
        match &self.inner {
            ChannelInner::Soft { n, .. } => n.try_pop(),
            ChannelInner::Sys(c) => c.get_event(),
        }
    }

    /// Waits up to `timeout` for an event.
    pub fn wait_cq_event(&self, timeout: Duration) -> Option<u64> {
        crate::soft::cq::wait_on(self.fd(), timeout, || self.get_cq_event())
    }
}

/// A completion queue (`struct ibv_cq`).
pub struct CompletionQueue {
    pub(crate) inner: CqInner,
    pub(crate) user: u64,
}

/// The backend of a completion queue.
pub(crate) enum CqInner {
    Soft { ctx: Context, cq: Arc<SoftCq> },
    Sys(Arc<SysCq>),
}

impl CompletionQueue {
    /// Moves up to `out.len()` completions into `out`; returns how many (`ibv_poll_cq`).
    /// Never allocates. On the software device, a poll that finds nothing first reads
    /// the context's connections itself (when its service thread is not already).
    pub fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize> {
        match &self.inner {
            CqInner::Soft { ctx, cq } => {
                let n = cq.poll(out);
                if n > 0 || out.is_empty() {
                    return Ok(n);
                }
                // Nothing yet: read what arrived here instead of waiting for the
                // device's thread to be scheduled.
                if let Some(o) = ctx.soft() {
                    o.shared.progress();
                }
                Ok(cq.poll(out))
            }
            CqInner::Sys(cq) => cq.poll(out),
        }
    }

    /// Arms the queue for one event on its channel (`ibv_req_notify_cq`).
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        match &self.inner {
            CqInner::Soft { cq, .. } => {
                cq.arm(solicited_only);
                Ok(())
            }
            CqInner::Sys(cq) => cq.req_notify(solicited_only),
        }
    }

    /// The value given at creation (`cq_context`).
    pub fn user(&self) -> u64 {
        self.user
    }
}
