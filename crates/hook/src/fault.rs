//! The fault hook (`ofi_hook_fault`): drops, duplicates, delays or reorders datagram
//! sends and fails chosen operations with chosen error codes, at set rates, from a
//! seed — for reliability tests (rxd over udp).
//!
//! # Parameters (environment `FI_OFI_HOOK_FAULT_<NAME>`, read at each fabric open)
//!
//! | name | default | meaning |
//! | --- | --- | --- |
//! | `SEED` | 1 | seed of the pseudo-random sequence (splitmix64) |
//! | `DROP` | 0 | probability a datagram send is dropped (it still completes) |
//! | `DUP` | 0 | probability a datagram send goes out twice |
//! | `DELAY` | 0 | probability a datagram send is held for `DELAY_US` |
//! | `DELAY_US` | 1000 | how long a delayed (or reordered) send is held at most (at most an hour) |
//! | `REORDER` | 0 | probability a datagram send is held until the next send of its endpoint went out |
//! | `FAIL_OPS` | unset | operations to fail (`send,recv,cq_read`, …; names of [`Op::name`]), each optionally with its own code (`send:FI_EAGAIN`) |
//! | `FAIL_RATE` | 1 | probability a listed operation fails |
//! | `FAIL_CODE` | `FI_EIO` | the error code (`FI_EIO`, `EIO` or a number) |
//!
//! `DROP + DUP + DELAY + REORDER` must not exceed 1. A rate is a decimal in [0, 1].
//! Bad values fail the fabric open with `FI_EINVAL` naming the variable.
//!
//! # Semantics
//!
//! Faults act on message sends (`send*`, `inject*`, the tagged forms) of
//! `FI_EP_DGRAM` endpoints only. A dropped send completes to the sender as the wire
//! would (a success completion on its transmit CQ, made by the hook; its counter is
//! incremented). A duplicate is an inject of a copy (only when the payload fits the
//! endpoint's `inject_size`). Held sends (delay, reorder) go out from later calls:
//! every read of a CQ the endpoint is bound to and every later send of the
//! endpoint; a reordered send goes out right after the next send, or after
//! `DELAY_US` at the latest. Held sends still pending when the endpoint closes are
//! dropped. `fi_trywait` on a CQ with held sends or hook-made completions is
//! `FI_EAGAIN`; an application that blocks on a CQ's wait fd without reading it does
//! not release held sends. An inject's data (and a `*msg` with `FI_INJECT`) is copied when held; a
//! copy carries no memory descriptor. Failed operations return the code without
//! reaching the provider, on any endpoint type.
//!
//! [`set_config`] overrides the parameters in-process (linked-in hooks only), and
//! [`totals`] counts what the hook did in this process.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use ofi_core::abi::ops::{conv, DataArgs, DescArg, IovArg, MsgArg, OpKind};
use ofi_core::abi::raw::{Iov, Msg, MsgTagged};
use ofi_core::ep::Endpoint;
use ofi_core::fabric::Fabric;
use ofi_core::param::ParamType::{Int, String as Str};
use ofi_core::provider::{Desc, Host};
use ofi_core::{Errno, Error, Info, OpFlags, Result};

use crate::cq::{CqCore, Synth};
use crate::ep::EpCore;
use crate::{Hook, HookParam, HookedCall, ObjName, Op, OpCall};

/// The longest a send may be held (`DELAY_US` above this is `FI_EINVAL`).
pub const MAX_DELAY: Duration = Duration::from_secs(3600);

/// The fault hook's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultConfig {
    /// Seed of the pseudo-random sequence.
    pub seed: u64,
    /// Probability a datagram send is dropped.
    pub drop: f64,
    /// Probability a datagram send is duplicated.
    pub dup: f64,
    /// Probability a datagram send is delayed.
    pub delay: f64,
    /// How long delayed and reordered sends are held at most.
    pub delay_for: Duration,
    /// Probability a datagram send is reordered after the next one.
    pub reorder: f64,
    /// Operations to fail.
    pub fail_ops: Vec<Op>,
    /// Per-operation error codes (`FAIL_OPS=send:FI_EAGAIN`), overriding `fail_code`.
    pub fail_codes: Vec<(Op, Errno)>,
    /// Probability a listed operation fails.
    pub fail_rate: f64,
    /// The error code of failed operations.
    pub fail_code: Errno,
}

impl Default for FaultConfig {
    fn default() -> FaultConfig {
        FaultConfig {
            seed: 1,
            drop: 0.0,
            dup: 0.0,
            delay: 0.0,
            delay_for: Duration::from_micros(1000),
            reorder: 0.0,
            fail_ops: Vec::new(),
            fail_codes: Vec::new(),
            fail_rate: 1.0,
            fail_code: Errno::EIO,
        }
    }
}

impl FaultConfig {
    /// Check the rates: each in [0, 1], the four send faults summing to at most 1.
    pub fn validate(&self) -> Result<()> {
        let rates = [
            ("DROP", self.drop),
            ("DUP", self.dup),
            ("DELAY", self.delay),
            ("REORDER", self.reorder),
            ("FAIL_RATE", self.fail_rate),
        ];
        for (n, r) in rates {
            if !(0.0..=1.0).contains(&r) {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("FI_OFI_HOOK_FAULT_{n}={r}: not a rate in [0, 1]"),
                ));
            }
        }
        if self.delay_for > MAX_DELAY {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "FI_OFI_HOOK_FAULT_DELAY_US={}: more than {} s",
                    self.delay_for.as_micros(),
                    MAX_DELAY.as_secs()
                ),
            ));
        }
        let sum = self.drop + self.dup + self.delay + self.reorder;
        if sum > 1.0 + 1e-9 {
            return Err(Error::new(
                Errno::EINVAL,
                format!("FI_OFI_HOOK_FAULT_DROP + _DUP + _DELAY + _REORDER = {sum}: more than 1"),
            ));
        }
        Ok(())
    }

    /// Read the parameters through `host` (see the module docs).
    pub fn from_params(host: &Host) -> Result<FaultConfig> {
        let mut c = FaultConfig::default();
        if let Some(s) = host.param_int("seed")? {
            c.seed = s as u64;
        }
        let rate = |name: &str, dflt: f64| -> Result<f64> {
            match host.param_str(name)? {
                None => Ok(dflt),
                Some(t) => parse_rate(&t).ok_or_else(|| {
                    Error::new(
                        Errno::EINVAL,
                        format!(
                            "FI_OFI_HOOK_FAULT_{}={t:?}: not a rate in [0, 1]",
                            name.to_ascii_uppercase()
                        ),
                    )
                }),
            }
        };
        c.drop = rate("drop", 0.0)?;
        c.dup = rate("dup", 0.0)?;
        c.delay = rate("delay", 0.0)?;
        c.reorder = rate("reorder", 0.0)?;
        c.fail_rate = rate("fail_rate", 1.0)?;
        if let Some(us) = host.param_int("delay_us")? {
            if us < 0 {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("FI_OFI_HOOK_FAULT_DELAY_US={us}: negative"),
                ));
            }
            c.delay_for = Duration::from_micros(us as u64);
        }
        if let Some(ops) = host.param_str("fail_ops")? {
            (c.fail_ops, c.fail_codes) = parse_fail_ops(&ops)?;
        }
        if let Some(code) = host.param_str("fail_code")? {
            c.fail_code = parse_code(&code)?;
        }
        c.validate()?;
        Ok(c)
    }
}

/// A rate: a decimal in [0, 1].
fn parse_rate(t: &str) -> Option<f64> {
    let v: f64 = t.trim().parse().ok()?;
    (0.0..=1.0).contains(&v).then_some(v)
}

/// The operations of `FAIL_OPS` and their own codes.
pub type FailOps = (Vec<Op>, Vec<(Op, Errno)>);

/// `FAIL_OPS`: operation names (`,` or `;` separated), each optionally with its own
/// error code after a colon (`send:FI_EAGAIN,recv`). Returns the operations and the
/// per-operation codes.
pub fn parse_fail_ops(t: &str) -> Result<FailOps> {
    let mut ops = Vec::new();
    let mut codes = Vec::new();
    for entry in t.split([',', ';']).map(str::trim).filter(|s| !s.is_empty()) {
        let (name, code) = match entry.split_once(':') {
            Some((n, c)) => (n, Some(c)),
            None => (entry, None),
        };
        let op = Op::from_name(name).ok_or_else(|| {
            Error::new(
                Errno::EINVAL,
                format!(
                    "FI_OFI_HOOK_FAULT_FAIL_OPS: unknown operation '{}'",
                    name.trim()
                ),
            )
        })?;
        if let Some(c) = code {
            let code = parse_code(c).map_err(|_| {
                Error::new(
                    Errno::EINVAL,
                    format!("FI_OFI_HOOK_FAULT_FAIL_OPS: '{entry}': not an error code"),
                )
            })?;
            codes.push((op, code));
        }
        ops.push(op);
    }
    Ok((ops, codes))
}

/// An error code: `FI_EIO`, `EIO`, `5` or `-5`.
pub fn parse_code(t: &str) -> Result<Errno> {
    let t = t.trim();
    let bad = || {
        Error::new(
            Errno::EINVAL,
            format!("FI_OFI_HOOK_FAULT_FAIL_CODE={t:?}: not an error code"),
        )
    };
    if let Ok(n) = t.parse::<i32>() {
        if n == 0 {
            return Err(bad());
        }
        return Ok(Errno(n.abs()));
    }
    let up = t.to_ascii_uppercase();
    let full = if up.starts_with("FI_") {
        up
    } else {
        format!("FI_{up}")
    };
    Errno::ALL
        .iter()
        .copied()
        .find(|e| e.0 != 0 && e.name() == Some(full.as_str()))
        .ok_or_else(bad)
}

static OVERRIDE: RwLock<Option<FaultConfig>> = RwLock::new(None);

/// Use `config` instead of the parameters for fabrics opened from now on (`None`:
/// back to the parameters). Affects the linked-in fault hook of this process only.
pub fn set_config(config: Option<FaultConfig>) {
    *OVERRIDE.write().unwrap_or_else(|p| p.into_inner()) = config;
}

/// What the fault hooks of this process did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultTotals {
    /// Datagram sends dropped (including held sends dropped at close).
    pub dropped: u64,
    /// Datagram sends duplicated.
    pub duplicated: u64,
    /// Datagram sends delayed.
    pub delayed: u64,
    /// Datagram sends reordered.
    pub reordered: u64,
    /// Operations failed.
    pub failed: u64,
}

impl fmt::Display for FaultTotals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dropped {}, duplicated {}, delayed {}, reordered {}, failed {}",
            self.dropped, self.duplicated, self.delayed, self.reordered, self.failed
        )
    }
}

#[derive(Default)]
struct Counts {
    dropped: AtomicU64,
    duplicated: AtomicU64,
    delayed: AtomicU64,
    reordered: AtomicU64,
    failed: AtomicU64,
}

impl Counts {
    fn snapshot(&self) -> FaultTotals {
        FaultTotals {
            dropped: self.dropped.load(Ordering::Relaxed),
            duplicated: self.duplicated.load(Ordering::Relaxed),
            delayed: self.delayed.load(Ordering::Relaxed),
            reordered: self.reordered.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}

static TOTALS: Counts = Counts {
    dropped: AtomicU64::new(0),
    duplicated: AtomicU64::new(0),
    delayed: AtomicU64::new(0),
    reordered: AtomicU64::new(0),
    failed: AtomicU64::new(0),
};

/// What the fault hooks of this process (this copy of the crate) did so far.
pub fn totals() -> FaultTotals {
    TOTALS.snapshot()
}

fn bump(mine: &AtomicU64, total: &AtomicU64) {
    mine.fetch_add(1, Ordering::Relaxed);
    total.fetch_add(1, Ordering::Relaxed);
}

/// A send captured for later: its arguments, with owned copies of the arrays (and of
/// the data, for injects).
pub struct Held {
    op: Op,
    iov: Vec<Iov>,
    desc: Vec<Desc>,
    owned: Vec<u8>,
    dest: u64,
    tag: u64,
    data: u64,
    context: usize,
    flags: OpFlags,
}

// SAFETY: a held send carries the application's buffer pointers, which the C API keeps
// valid (and untouched) until the send completes, from any thread; the hook issues or
// drops it before reporting its completion.
unsafe impl Send for Held {}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("op", &self.op)
            .field("bytes", &self.bytes())
            .field("dest", &self.dest)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl Held {
    /// Capture the message send `op` whose arguments are `args` (any send of the list
    /// of operations: single buffer, vector or message). An inject's payload (or a
    /// send with `FI_INJECT`) is copied; otherwise the buffers are the caller's.
    ///
    /// # Safety
    /// The buffers, arrays and message of `args` are valid during the call.
    pub(crate) unsafe fn capture(op: Op, args: &DataArgs<'_>) -> Held {
        let one = |buf: usize, len: usize| {
            vec![Iov {
                base: buf as *mut c_void,
                len,
            }]
        };
        let desc_of = |d: DescArg<'_>| match d {
            DescArg::One(d) if !d.is_null() => vec![d],
            DescArg::Many(v) => v.to_vec(),
            _ => Vec::new(),
        };
        // SAFETY: the message's arrays are valid for its counts (contract).
        let msg_arrays = |iov: *const Iov, desc: *const Desc, n: usize| unsafe {
            (
                conv::slice(iov, n).map(<[Iov]>::to_vec).unwrap_or_default(),
                conv::descs(desc, n).to_vec(),
            )
        };
        let mut h = Held {
            op,
            iov: Vec::new(),
            desc: desc_of(args.desc),
            owned: Vec::new(),
            dest: args.dest,
            tag: args.tag,
            data: args.data.unwrap_or(0),
            context: args.context(),
            flags: args.flags.unwrap_or(OpFlags::empty()),
        };
        match (args.iov, args.msg) {
            (IovArg::Iov(v), _) => h.iov = v.to_vec(),
            (_, MsgArg::Msg(m)) => {
                (h.iov, h.desc) = msg_arrays(m.msg_iov, m.desc, m.iov_count);
                (h.dest, h.data) = (m.addr, m.data);
            }
            (_, MsgArg::Tagged(m)) => {
                (h.iov, h.desc) = msg_arrays(m.msg_iov, m.desc, m.iov_count);
                (h.dest, h.tag, h.data) = (m.addr, m.tag, m.data);
            }
            _ => h.iov = one(args.buf, args.len),
        }
        if op.is_inject() || h.flags.contains(OpFlags::INJECT) {
            // SAFETY: forwarded.
            unsafe { h.own_data() };
        }
        h
    }

    fn bytes(&self) -> usize {
        self.iov.iter().map(|i| i.len).sum()
    }

    /// The payload gathered into one buffer.
    ///
    /// # Safety
    /// The iov buffers are valid.
    unsafe fn gather(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.bytes());
        for i in &self.iov {
            if i.len > 0 && !i.base.is_null() {
                // SAFETY: valid for `len` bytes (contract).
                v.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(i.base as *const u8, i.len)
                });
            }
        }
        v
    }

    /// Copy the payload into the held send (the caller may reuse its buffer).
    ///
    /// # Safety
    /// The iov buffers are valid.
    unsafe fn own_data(&mut self) {
        // SAFETY: forwarded.
        self.owned = unsafe { self.gather() };
        self.iov = vec![Iov {
            base: self.owned.as_mut_ptr() as *mut c_void,
            len: self.owned.len(),
        }];
        self.desc.clear();
    }

    fn carries_data(&self) -> bool {
        self.op.kind().is_some_and(|k| k.data)
            || (self.op.is_msg() && self.flags.contains(OpFlags::REMOTE_CQ_DATA))
    }

    /// An inject of a copy of the payload (for a duplicate), if it fits `max`.
    ///
    /// # Safety
    /// The iov buffers are valid.
    unsafe fn inject_copy(&self, max: usize) -> Option<Held> {
        if self.bytes() > max {
            return None;
        }
        let mut kind = OpKind::send().inject();
        if self.op.is_tagged() {
            kind = kind.tagged();
        }
        if self.carries_data() {
            kind = kind.data();
        }
        let op = Op::of_kind(kind)?;
        let mut h = Held {
            op,
            iov: self.iov.clone(),
            desc: Vec::new(),
            owned: Vec::new(),
            dest: self.dest,
            tag: self.tag,
            data: self.data,
            context: 0,
            flags: OpFlags::empty(),
        };
        // SAFETY: forwarded.
        unsafe { h.own_data() };
        Some(h)
    }

    /// Issue the send on `ep`, through the same call it was captured from.
    ///
    /// # Safety
    /// The buffers are still valid (the send has not completed).
    pub(crate) unsafe fn issue(&self, ep: &Endpoint) -> Result<()> {
        let msg = Msg {
            msg_iov: self.iov.as_ptr(),
            desc: conv::desc_ptr(&self.desc),
            iov_count: self.iov.len(),
            addr: self.dest,
            context: self.context,
            data: self.data,
        };
        let tmsg = msg.tagged(self.tag, 0);
        let replay = Replay {
            held: self,
            msg: &msg,
            tmsg: &tmsg,
        };
        // SAFETY: the buffers are valid (contract); the arrays and messages are ours.
        unsafe { replay.issue(ep) }
    }
}

/// A held send and the messages built from it, for [`Held::issue`].
struct Replay<'a> {
    held: &'a Held,
    msg: &'a Msg,
    tmsg: &'a MsgTagged,
}

/// A host-side argument of a send, taken from a [`Replay`] by its type (the
/// descriptor of a single-buffer send or the array of a vector one; an `fi_msg` or an
/// `fi_msg_tagged`).
trait FromReplay {
    fn from_replay(r: &Replay<'_>) -> Self;
}

impl FromReplay for Desc {
    fn from_replay(r: &Replay<'_>) -> Desc {
        r.held.desc.first().copied().unwrap_or(std::ptr::null_mut())
    }
}
impl FromReplay for *const Desc {
    fn from_replay(r: &Replay<'_>) -> *const Desc {
        conv::desc_ptr(&r.held.desc)
    }
}
impl FromReplay for *const Msg {
    fn from_replay(r: &Replay<'_>) -> *const Msg {
        r.msg
    }
}
impl FromReplay for *const MsgTagged {
    fn from_replay(r: &Replay<'_>) -> *const MsgTagged {
        r.tmsg
    }
}

/// One C argument of a send, by its name in the list of operations.
macro_rules! replay_arg {
    ($r:ident, buf) => {
        $r.held
            .iov
            .first()
            .map_or(std::ptr::null(), |i| i.base as *const u8)
    };
    ($r:ident, len) => {
        $r.held.iov.first().map_or(0, |i| i.len)
    };
    ($r:ident, iov) => {
        $r.held.iov.as_ptr()
    };
    ($r:ident, count) => {
        $r.held.iov.len()
    };
    ($r:ident, dest) => {
        $r.held.dest
    };
    ($r:ident, tag) => {
        $r.held.tag
    };
    ($r:ident, data) => {
        $r.held.data
    };
    ($r:ident, context) => {
        $r.held.context
    };
    ($r:ident, flags) => {
        $r.held.flags.bits()
    };
    ($r:ident, desc) => {
        FromReplay::from_replay($r)
    };
    ($r:ident, msg) => {
        FromReplay::from_replay($r)
    };
}

/// The replay of one entry of the list: sends only (`[send …]`).
macro_rules! replay_if {
    ($r:ident, $ep:ident, [send $($k:ident)*] $V:ident $host:ident ($($c:ident),*)) => {
        if $r.held.op == Op::$V {
            // SAFETY: forwarded from `Replay::issue`.
            return unsafe { $ep.$host($(replay_arg!($r, $c)),*) };
        }
    };
    ($r:ident, $ep:ident, [$($k:ident)*] $V:ident $host:ident ($($c:ident),*)) => {};
}

/// Writes `Replay::issue` from the list of data operations: the held send goes out
/// through the host call of its own operation.
macro_rules! hook_replay {
    ($($group:ident $Table:ident {
        $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident $since:tt $kind:tt
            ($($c:ident : $cty:ty $(as $hty:ty)?),*) $p:tt $low:tt;)*
    } $queries:tt)*) => {
        impl Replay<'_> {
            /// # Safety
            /// The held buffers are valid.
            unsafe fn issue(&self, ep: &Endpoint) -> Result<()> {
                let r = self;
                $($( replay_if!(r, ep, $kind $V $host ($($c),*)); )*)*
                Err(Error::new(
                    Errno::EINVAL,
                    format!("fault hook: {} is not a message send", r.held.op),
                ))
            }
        }
    };
}

ofi_core::for_each_ep_data_op!(hook_replay);

struct Pending {
    held: Held,
    call: OpCall,
    due: Instant,
    after_next: bool,
}

/// The fault hook's data of one endpoint: its held sends.
#[derive(Default)]
pub struct FaultEp {
    held: Mutex<VecDeque<Pending>>,
}

/// The fault hook of one fabric.
pub struct Fault {
    cfg: FaultConfig,
    fail_mask: u64,
    codes: Vec<Errno>,
    rng: Mutex<u64>,
    counts: Counts,
    prov: String,
}

impl Fault {
    /// This fabric's settings.
    pub fn config(&self) -> &FaultConfig {
        &self.cfg
    }

    /// What this fabric's hook did so far.
    pub fn counts(&self) -> FaultTotals {
        self.counts.snapshot()
    }

    /// A uniform value in [0, 1) (splitmix64).
    fn roll(&self) -> f64 {
        let mut s = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    fn fails(&self, op: Op) -> bool {
        self.fail_mask & (1u64 << op as u32) != 0
            && (self.cfg.fail_rate >= 1.0 || self.roll() < self.cfg.fail_rate)
    }

    fn fail<R>(&self, op: Op) -> Result<R> {
        bump(&self.counts.failed, &TOTALS.failed);
        Err(Error::new(
            self.codes[op as usize],
            format!("fault hook: {op} failed on purpose"),
        ))
    }

    /// Report a send that never went out as the wire would: a success completion on
    /// the transmit CQ (if the call generates one) and the transmit counter.
    fn complete_lost(&self, ep: &EpCore<Self>, call: &OpCall) {
        if let Some(b) = ep.completion_cq(call) {
            let kind = if call.op.is_tagged() {
                OpFlags::TAGGED
            } else {
                OpFlags::MSG
            };
            b.cq.push_completion(Synth {
                op_context: call.context,
                flags: (OpFlags::SEND | kind).bits(),
                ..Synth::default()
            });
        }
        if let Some(c) = ep.tx_cntr.get() {
            let _ = c.inner.add(1);
        }
    }

    /// Issue the held sends of `ep` that are due (all reordered ones too when
    /// `next_went` — a later send just went out).
    fn flush(&self, ep: &EpCore<Self>, next_went: bool) {
        let now = Instant::now();
        loop {
            let p = {
                let mut q = ep.data.held.lock().unwrap_or_else(|p| p.into_inner());
                let Some(i) = q
                    .iter()
                    .position(|p| p.due <= now || (next_went && p.after_next))
                else {
                    return;
                };
                match q.remove(i) {
                    Some(p) => p,
                    None => return,
                }
            };
            // SAFETY: the send has not completed (it was never issued), so its buffers
            // are still valid; injected data is our own copy.
            match unsafe { p.held.issue(&ep.inner) } {
                Ok(()) => {}
                Err(e) if e.code() == Errno::EAGAIN => {
                    ep.data
                        .held
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push_front(p);
                    return;
                }
                Err(e) => {
                    ofi_core::ofi_debug!(
                        Self::NAME,
                        "ep_data",
                        "{}: held {} failed ({e}); reported as lost",
                        ep.name,
                        p.call.op
                    );
                    bump(&self.counts.dropped, &TOTALS.dropped);
                    self.complete_lost(ep, &p.call);
                }
            }
        }
    }

    fn hold(&self, ep: &EpCore<Self>, held: Held, call: OpCall, after_next: bool) {
        ep.data
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(Pending {
                held,
                call,
                due: Instant::now() + self.cfg.delay_for,
                after_next,
            });
    }

    fn has_reordered(ep: &EpCore<Self>) -> bool {
        ep.data
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|p| p.after_next)
    }
}

impl Hook for Fault {
    const NAME: &'static str = "ofi_hook_fault";
    const SENDS: bool = true;
    type EpData = FaultEp;
    type CqData = ();

    const PARAMS: &'static [HookParam] = &[
        HookParam::new("seed", Int, "Seed of the fault sequence", Some("1")),
        HookParam::new(
            "drop",
            Str,
            "Probability a datagram send is dropped (0..1)",
            Some("0"),
        ),
        HookParam::new(
            "dup",
            Str,
            "Probability a datagram send is duplicated (0..1)",
            Some("0"),
        ),
        HookParam::new(
            "delay",
            Str,
            "Probability a datagram send is delayed (0..1)",
            Some("0"),
        ),
        HookParam::new(
            "delay_us",
            Int,
            "How long delayed / reordered sends are held at most (us)",
            Some("1000"),
        ),
        HookParam::new(
            "reorder",
            Str,
            "Probability a datagram send goes out after the next one (0..1)",
            Some("0"),
        ),
        HookParam::new(
            "fail_ops",
            Str,
            "Operations to fail (comma-separated: send,recv,cq_read,...; op:CODE for its own code)",
            None,
        ),
        HookParam::new(
            "fail_rate",
            Str,
            "Probability a listed operation fails (0..1)",
            Some("1"),
        ),
        HookParam::new(
            "fail_code",
            Str,
            "Error code of failed operations (FI_EIO, EIO or a number)",
            Some("FI_EIO"),
        ),
    ];

    fn open(host: &Host, info: &Info, _inner: &Fabric) -> Result<Fault> {
        let over = OVERRIDE.read().unwrap_or_else(|p| p.into_inner()).clone();
        let cfg = match over {
            Some(c) => {
                c.validate()?;
                c
            }
            None => FaultConfig::from_params(host)?,
        };
        let fail_mask = cfg
            .fail_ops
            .iter()
            .fold(0u64, |m, op| m | (1u64 << *op as u32));
        let codes = Op::ALL
            .iter()
            .map(|op| {
                cfg.fail_codes
                    .iter()
                    .find(|(o, _)| o == op)
                    .map_or(cfg.fail_code, |(_, c)| *c)
            })
            .collect();
        ofi_core::ofi_info!(
            Self::NAME,
            "fabric",
            "fault hook over {}: {cfg:?}",
            info.prov_name()
        );
        Ok(Fault {
            rng: Mutex::new(cfg.seed),
            cfg,
            fail_mask,
            codes,
            counts: Counts::default(),
            prov: info.prov_name().to_string(),
        })
    }

    /// Fails the data calls and reads of the listed operations (as `fail_rate` says).
    #[inline]
    fn around<R: fmt::Debug>(
        &self,
        call: HookedCall<'_, Self, impl Fn() -> String, impl FnOnce() -> Result<R>>,
    ) -> Result<R> {
        match call.kind.op() {
            Some(op) if self.fail_mask != 0 && self.fails(op) => self.fail(op),
            _ => call.forward(),
        }
    }

    fn dgram_send(
        &self,
        ep: &EpCore<Self>,
        call: OpCall,
        held: impl FnOnce() -> Held,
    ) -> Option<Result<()>> {
        self.flush(ep, false);
        let c = &self.cfg;
        let mut roll = self.roll();
        if roll < c.drop {
            bump(&self.counts.dropped, &TOTALS.dropped);
            self.complete_lost(ep, &call);
            return Some(Ok(()));
        }
        roll -= c.drop;
        if roll < c.dup {
            let h = held();
            // SAFETY: the caller's buffers are valid during this call.
            let r = unsafe { h.issue(&ep.inner) };
            if r.is_ok() {
                // SAFETY: as above.
                if let Some(copy) = unsafe { h.inject_copy(ep.inject_size) } {
                    // SAFETY: our own copy.
                    if unsafe { copy.issue(&ep.inner) }.is_ok() {
                        bump(&self.counts.duplicated, &TOTALS.duplicated);
                    }
                }
                self.flush(ep, true);
            }
            return Some(r);
        }
        roll -= c.dup;
        if roll < c.delay {
            bump(&self.counts.delayed, &TOTALS.delayed);
            self.hold(ep, held(), call, false);
            return Some(Ok(()));
        }
        roll -= c.delay;
        if roll < c.reorder {
            bump(&self.counts.reordered, &TOTALS.reordered);
            self.hold(ep, held(), call, true);
            return Some(Ok(()));
        }
        if !Self::has_reordered(ep) {
            return None;
        }
        // SAFETY: the caller's buffers are valid during this call.
        let r = unsafe { held().issue(&ep.inner) };
        if r.is_ok() {
            self.flush(ep, true);
        }
        Some(r)
    }

    fn busy(&self, cq: &CqCore<Self>) -> bool {
        cq.endpoints().iter().any(|ep| {
            !ep.data
                .held
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
        })
    }

    fn progress(&self, cq: &CqCore<Self>) {
        for ep in cq.endpoints() {
            self.flush(&ep, false);
        }
    }

    fn ep_close(&self, ep: &EpCore<Self>) {
        let left = std::mem::take(&mut *ep.data.held.lock().unwrap_or_else(|p| p.into_inner()));
        for _ in &left {
            bump(&self.counts.dropped, &TOTALS.dropped);
        }
        if !left.is_empty() {
            ofi_core::ofi_info!(
                Self::NAME,
                "ep_ctrl",
                "{}: {} held send(s) dropped at close",
                ep.name,
                left.len()
            );
        }
    }

    fn fabric_close(&self, fabric: &ObjName) {
        ofi_core::ofi_info!(
            Self::NAME,
            "fabric",
            "fault hook over {} ({fabric}): {}",
            self.prov,
            self.counts.snapshot()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_ops_parse() {
        assert_eq!(parse_code("FI_EIO").unwrap(), Errno::EIO);
        assert_eq!(parse_code("eagain").unwrap(), Errno::EAGAIN);
        assert_eq!(parse_code("-5").unwrap(), Errno(5));
        assert_eq!(parse_code("nope").unwrap_err().code(), Errno::EINVAL);
        assert_eq!(parse_code("0").unwrap_err().code(), Errno::EINVAL);
        assert_eq!(
            parse_fail_ops("send, fi_recv;cq_read").unwrap(),
            (vec![Op::Send, Op::Recv, Op::CqRead], vec![])
        );
        assert_eq!(
            parse_fail_ops("send:FI_EAGAIN,recv").unwrap(),
            (vec![Op::Send, Op::Recv], vec![(Op::Send, Errno::EAGAIN)])
        );
        assert_eq!(parse_fail_ops("sned").unwrap_err().code(), Errno::EINVAL);
        let e = parse_fail_ops("send:ENOPE").unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.to_string().contains("FI_OFI_HOOK_FAULT_FAIL_OPS"), "{e}");
    }

    #[test]
    fn rates_are_checked() {
        assert_eq!(parse_rate("0.25"), Some(0.25));
        assert_eq!(parse_rate("1.5"), None);
        assert_eq!(parse_rate("x"), None);
        let c = FaultConfig {
            drop: 0.6,
            dup: 0.6,
            ..FaultConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().code(), Errno::EINVAL);
        let c = FaultConfig {
            delay_for: MAX_DELAY + Duration::from_secs(1),
            ..FaultConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().code(), Errno::EINVAL);
        let c = FaultConfig {
            fail_rate: -0.1,
            ..FaultConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().code(), Errno::EINVAL);
        assert!(FaultConfig::default().validate().is_ok());
    }
}
