//! A call on its way through a hook, as one request value: what the call is
//! ([`CallKind`]: a data operation on an endpoint, a control call or a read of a CQ or
//! counter), its arguments as text (formatted only when a hook asks) and the call
//! beneath. The wrappers make a [`HookedCall`] for every call and hand it to
//! [`Hook::around`]; a hook forwards it ([`HookedCall::forward`]) or answers without
//! forwarding it.
//!
//! Nothing here allocates unless a hook asks for the text of a call, and everything
//! inlines: under [`noop::Noop`](crate::noop::Noop) a call costs what the wrapper's own
//! forwarding costs. Nothing here panics.

use std::fmt;

use crate::ep::EpCore;
use crate::{Hook, ObjName, Op, OpCall};
use ofi_core::Result;

/// What a call passing through a hook is, and the object it is made on.
pub enum CallKind<'a, H: Hook> {
    /// A data operation on an endpoint (one of the list of data operations).
    Data(&'a EpCore<H>, OpCall),
    /// A control call (open, bind, enable, close, AV and MR calls, …) on an object: its
    /// name (`bind`, `cq_open`, …).
    Ctl(&'a ObjName, &'static str),
    /// A read of a CQ or counter (an operation of [`Op::is_cq`]).
    Read(&'a ObjName, Op),
}

impl<H: Hook> Clone for CallKind<'_, H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H: Hook> Copy for CallKind<'_, H> {}

impl<H: Hook> CallKind<'_, H> {
    /// The object the call is made on.
    pub fn obj(&self) -> &ObjName {
        match self {
            CallKind::Data(ep, _) => &ep.name,
            CallKind::Ctl(obj, _) | CallKind::Read(obj, _) => obj,
        }
    }

    /// The call's name: the operation's (`send`, `cq_read`) or the control call's
    /// (`bind`, `cq_open`).
    pub fn name(&self) -> &'static str {
        match self {
            CallKind::Data(_, call) => call.op.name(),
            CallKind::Ctl(_, what) => what,
            CallKind::Read(_, op) => op.name(),
        }
    }

    /// The operation of a data call or read (`None` for a control call).
    pub fn op(&self) -> Option<Op> {
        match self {
            CallKind::Data(_, call) => Some(call.op),
            CallKind::Read(_, op) => Some(*op),
            CallKind::Ctl(..) => None,
        }
    }

    /// The payload bytes of a data call (0 for the other calls).
    pub fn bytes(&self) -> usize {
        match self {
            CallKind::Data(_, call) => call.bytes,
            CallKind::Ctl(..) | CallKind::Read(..) => 0,
        }
    }
}

/// The object and the call's name: `endpoint #7 send`, `cq #9 cq_read`,
/// `domain #2 cq_open`.
impl<H: Hook> fmt::Display for CallKind<'_, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.obj(), self.name())
    }
}

/// One call on its way through a hook (what [`Hook::around`] is given): what it is,
/// `args` formatting its arguments (`len=64 dest_addr=0x1 …`, for tracing) and
/// `beneath`, the call on the object beneath.
pub struct HookedCall<'a, H: Hook, A, F> {
    /// What the call is.
    pub kind: CallKind<'a, H>,
    args: A,
    beneath: F,
}

impl<'a, H: Hook, A: Fn() -> String, F> HookedCall<'a, H, A, F> {
    /// The call `kind`, its arguments as `args` formats them, made by `beneath`.
    #[inline(always)]
    pub(crate) fn new(kind: CallKind<'a, H>, args: A, beneath: F) -> Self {
        HookedCall {
            kind,
            args,
            beneath,
        }
    }

    /// Makes the call beneath: its result is the call's, unless the hook changes it.
    #[inline(always)]
    pub fn forward<R>(self) -> Result<R>
    where
        F: FnOnce() -> Result<R>,
    {
        (self.beneath)()
    }

    /// Makes the call beneath and gives back, with its result, the call as text (its
    /// arguments are formatted only when the text is).
    #[inline(always)]
    pub fn forward_described<R>(self) -> (Result<R>, CallText<'a, H, A>)
    where
        F: FnOnce() -> Result<R>,
    {
        let r = (self.beneath)();
        let text = CallText {
            kind: self.kind,
            args: self.args,
        };
        (r, text)
    }
}

/// A call as text, `endpoint #7 send(len=64 …)`: what [`HookedCall::forward_described`]
/// gives back. Its arguments are formatted when it is displayed.
pub struct CallText<'a, H: Hook, A> {
    kind: CallKind<'a, H>,
    args: A,
}

impl<H: Hook, A: Fn() -> String> fmt::Display for CallText<'_, H, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.kind, (self.args)())
    }
}

/// How the wrappers hand their control calls and reads to a hook: each makes the
/// [`HookedCall`] and passes it to [`Hook::around`]. One implementation serves every
/// hook (hooks override `around`, never these).
pub(crate) trait HookCalls: Hook {
    /// The control call `what` on `obj`, made by `f`.
    #[inline(always)]
    fn ctl<R: fmt::Debug>(
        &self,
        obj: &ObjName,
        what: &'static str,
        args: impl Fn() -> String,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.around(HookedCall::new(CallKind::Ctl(obj, what), args, f))
    }

    /// The read `op` of the CQ or counter `obj`, made by `f` (it has no arguments to
    /// show).
    #[inline(always)]
    fn read<R: fmt::Debug>(
        &self,
        obj: &ObjName,
        op: Op,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.around(HookedCall::new(CallKind::Read(obj, op), String::new, f))
    }
}

impl<H: Hook> HookCalls for H {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noop::Noop;
    use ofi_core::{Errno, Error};

    #[test]
    fn a_call_reads_as_its_object_name_and_arguments() {
        let cq = ObjName::new("cq");
        let read: CallKind<'_, Noop> = CallKind::Read(&cq, Op::CqRead);
        assert_eq!((read.op(), read.bytes()), (Some(Op::CqRead), 0));
        assert_eq!(read.to_string(), format!("cq #{} cq_read", cq.id));

        let domain = ObjName::new("domain");
        let ctl: CallKind<'_, Noop> = CallKind::Ctl(&domain, "cq_open");
        assert_eq!((ctl.op(), ctl.name()), (None, "cq_open"));
        let call = HookedCall::new(ctl, || "size=8".to_string(), || Ok(5u32));
        let (r, text) = call.forward_described();
        assert_eq!(r.unwrap(), 5);
        assert_eq!(
            text.to_string(),
            format!("domain #{} cq_open(size=8)", domain.id)
        );
    }

    #[test]
    fn forwarding_returns_what_the_call_beneath_returns() {
        let cq = ObjName::new("cq");
        let call =
            HookedCall::<'_, Noop, _, _>::new(CallKind::Read(&cq, Op::CqRead), String::new, || {
                Err::<(), _>(Error::new(Errno::EAGAIN, "empty"))
            });
        assert_eq!(call.forward().unwrap_err().code(), Errno::EAGAIN);
    }
}
