//! The kit's CQ, counter, EQ, wait set and progress engine plugged into the plugin
//! boundary: a tiny provider whose object types ARE the kit types, driven only through
//! core's public wrappers (`CompletionQueue`, `Counter`, `EventQueue`, `WaitSet`,
//! `Fabric::trywait`). Completions are produced only by the provider's progress
//! function, so every passing read also proves that reads drive progress.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use ofi_core::abi::raw::{CqErrEntry, CqMsgEntry, CqTaggedEntry};
use ofi_core::cntr::CntrAttr;
use ofi_core::cq::{CompletionQueue, CqAttr};
use ofi_core::eq::{EqAttr, Event};
use ofi_core::getinfo::GetinfoRequest;
use ofi_core::provider::{
    BindTarget, Desc, DomainOps, EndpointOps, FabricOps, Host, Provider, ProviderHandle,
    TryWaitRef, Unsupported,
};
use ofi_core::version::API_VERSION;
use ofi_core::wait::WaitAttr;
use ofi_core::{
    AddrFormat, Caps, CqFormat, EpType, EqEvent, Errno, Error, Info, OpFlags, Result, Version,
    WaitObj,
};
use ofi_kit::cntr::KitCntr;
use ofi_kit::cq::{CqError, CqReservation, KitCq};
use ofi_kit::eq::KitEq;
use ofi_kit::progress::{Progress, ProgressEngine, ProgressMode};
use ofi_kit::wait::{trywait, KitWait, Waitable};

// ---------------------------------------------------------------------------------------
// The provider.

/// A destination address the provider fails with an error completion.
const BAD_DEST: u64 = 99;
/// The provider-specific error data of that failure.
const ERR_DATA: &[u8] = b"peer 99 is unreachable";

fn template() -> Info {
    let mut i = Info::new()
        .with_caps(Caps::MSG | Caps::SEND | Caps::RECV)
        .with_ep_type(EpType::Rdm)
        .with_addr_format(AddrFormat::STR);
    i.fabric_attr.name = Some("kitfab".into());
    i.fabric_attr.prov_name = Some(KitProv::NAME.into());
    i.domain_attr.name = Some("kit0".into());
    i
}

struct KitProv;

impl Provider for KitProv {
    const NAME: &'static str = "kittest";
    const VERSION: Version = Version::new(1, 0);
    type Fabric = KitFabric;

    fn init(_host: &Host) -> Result<Self> {
        Ok(KitProv)
    }

    fn info_templates(&self) -> Vec<Info> {
        vec![template()]
    }

    fn fabric(&self, _info: &Info) -> Result<KitFabric> {
        Ok(KitFabric)
    }
}

struct KitFabric;

impl FabricOps for KitFabric {
    type Domain = KitDomain;
    type PassiveEp = Unsupported;
    type Eq = KitEq;
    type Wait = KitWait;

    fn domain(&self, info: &Info, _context: usize) -> Result<KitDomain> {
        let mode = ProgressMode::from(info.domain_attr.data_progress);
        Ok(KitDomain {
            engine: Arc::new(ProgressEngine::new(mode)?),
        })
    }

    fn eq_open(&self, attr: &EqAttr, _context: usize) -> Result<KitEq> {
        KitEq::new(attr)
    }

    fn wait_open(&self, attr: &WaitAttr) -> Result<KitWait> {
        KitWait::new(attr)
    }

    fn trywait(&self, objs: &[TryWaitRef<'_, Self>]) -> Result<()> {
        let list: Vec<&dyn Waitable> = objs
            .iter()
            .map(|o| -> &dyn Waitable {
                match o {
                    TryWaitRef::Cq(c) => *c,
                    TryWaitRef::Cntr(c) => *c,
                    TryWaitRef::Eq(e) => *e,
                    TryWaitRef::Wait(w) => *w,
                }
            })
            .collect();
        trywait(&list)
    }
}

struct KitDomain {
    engine: Arc<ProgressEngine>,
}

/// The progress-round counters of endpoints opened with a non-zero context, so a test
/// can watch an endpoint being driven without calling into it.
fn rounds_of(context: usize) -> Arc<AtomicUsize> {
    static ROUNDS: OnceLock<Mutex<HashMap<usize, Arc<AtomicUsize>>>> = OnceLock::new();
    ROUNDS
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(context)
        .or_default()
        .clone()
}

impl DomainOps<KitFabric> for KitDomain {
    type Endpoint = KitEp;
    type Cq = KitCq;
    type Cntr = KitCntr;
    type Av = Unsupported;
    type Mr = Unsupported;

    fn endpoint(&self, _info: &Info, context: usize, _flags: u64) -> Result<KitEp> {
        let inner = Arc::new(EpInner {
            context,
            rounds: rounds_of(context),
            state: Mutex::new(EpState::default()),
        });
        self.engine.register(&inner);
        Ok(KitEp {
            inner,
            engine: self.engine.clone(),
        })
    }

    fn cq_open(&self, attr: &CqAttr, _context: usize) -> Result<KitCq> {
        KitCq::with_progress(attr, self.engine.clone())
    }

    fn cntr_open(&self, attr: &CntrAttr, _context: usize) -> Result<KitCntr> {
        KitCntr::with_progress(attr, self.engine.clone())
    }
}

/// An operation posted but not yet completed: progress completes it.
enum Pending {
    Send {
        ctx: usize,
        len: usize,
        dest: u64,
        slot: CqReservation,
    },
    Inject,
    Connect(Vec<u8>),
}

#[derive(Default)]
struct EpState {
    tx_cq: Option<KitCq>,
    cntr: Option<KitCntr>,
    eq: Option<KitEq>,
    pending: VecDeque<Pending>,
}

struct EpInner {
    context: usize,
    rounds: Arc<AtomicUsize>,
    state: Mutex<EpState>,
}

impl Progress for EpInner {
    fn progress(&self) -> usize {
        self.rounds.fetch_add(1, Ordering::SeqCst);
        let mut st = self.state.lock().unwrap();
        let mut work = 0;
        while let Some(op) = st.pending.pop_front() {
            work += 1;
            match op {
                Pending::Send {
                    ctx,
                    len,
                    dest,
                    slot,
                } => {
                    if dest == BAD_DEST {
                        let mut e = CqError::new(ctx, Errno::EHOSTUNREACH);
                        e.flags = (OpFlags::SEND | OpFlags::MSG).bits();
                        e.prov_errno = 7;
                        e.err_data = ERR_DATA.to_vec();
                        slot.push_err(e).unwrap();
                        if let Some(c) = &st.cntr {
                            c.inc_err();
                        }
                    } else {
                        let e = CqTaggedEntry {
                            op_context: ctx,
                            flags: (OpFlags::SEND | OpFlags::MSG).bits(),
                            len,
                            ..CqTaggedEntry::default()
                        };
                        slot.push(&e, dest).unwrap();
                        if let Some(c) = &st.cntr {
                            c.inc();
                        }
                    }
                }
                Pending::Inject => {
                    if let Some(c) = &st.cntr {
                        c.inc();
                    }
                }
                Pending::Connect(data) => {
                    if let Some(eq) = &st.eq {
                        eq.connected(self.context, data).unwrap();
                    }
                }
            }
        }
        work
    }
}

struct KitEp {
    inner: Arc<EpInner>,
    engine: Arc<ProgressEngine>,
}

impl KitEp {
    fn post(&self, op: Pending) {
        self.inner.state.lock().unwrap().pending.push_back(op);
        self.engine.kick();
    }
}

impl EndpointOps<KitFabric> for KitEp {
    fn bind(&self, target: BindTarget<'_, KitFabric>, _flags: OpFlags) -> Result<()> {
        let mut st = self.inner.state.lock().unwrap();
        match target {
            BindTarget::Cq(cq) => st.tx_cq = Some(cq.clone()),
            BindTarget::Cntr(c) => st.cntr = Some(c.clone()),
            BindTarget::Eq(eq) => {
                eq.bind_progress(self.engine.clone())?;
                st.eq = Some(eq.clone());
            }
            _ => {
                return Err(Error::new(
                    Errno::ENOSYS,
                    "kittest binds CQs, counters, EQs",
                ))
            }
        }
        Ok(())
    }

    fn connect(&self, _addr: &[u8], param: &[u8]) -> Result<()> {
        self.post(Pending::Connect(param.to_vec()));
        Ok(())
    }

    unsafe fn send(
        &self,
        _buf: *const u8,
        len: usize,
        _desc: Desc,
        dest: u64,
        context: usize,
    ) -> Result<()> {
        let cq = self
            .inner
            .state
            .lock()
            .unwrap()
            .tx_cq
            .clone()
            .ok_or_else(|| Error::code_only(Errno::ENOCQ))?;
        // Resource management: room for the completion is reserved now (FI_EAGAIN to
        // the application when the CQ is full).
        let slot = cq.reserve()?;
        self.post(Pending::Send {
            ctx: context,
            len,
            dest,
            slot,
        });
        Ok(())
    }

    unsafe fn inject(&self, _buf: *const u8, _len: usize, _dest: u64) -> Result<()> {
        self.post(Pending::Inject);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Helpers.

fn handle() -> ProviderHandle {
    ofi_core::provider::init_builtin::<KitProv>().expect("kittest initialises")
}

fn info(h: &ProviderHandle) -> Info {
    let mut req = GetinfoRequest::new(API_VERSION);
    req.hints = Some(Info::hints().with_ep_type(EpType::Rdm));
    let out = h.getinfo(&req);
    assert!(out.error.is_none(), "{:?}", out.error);
    out.infos.into_iter().next().expect("one info")
}

/// The provider opened, and a fabric, domain, CQ, counter and enabled endpoint of it
/// (fields drop in order: the provider's handle last).
struct Rig {
    fabric: ofi_core::fabric::Fabric,
    domain: ofi_core::domain::Domain,
    cq: CompletionQueue,
    cntr: ofi_core::cntr::Counter,
    ep: ofi_core::ep::Endpoint,
    /// What the objects were opened with.
    info: Info,
    _provider: ProviderHandle,
}

fn rig_with(cq_size: usize, progress: ofi_core::Progress) -> Rig {
    let h = handle();
    let mut info = info(&h);
    info.domain_attr.data_progress = progress;
    let fabric = h.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let cq = domain
        .cq_open(&CqAttr {
            size: cq_size,
            format: CqFormat::Msg,
            wait_obj: WaitObj::Unspec,
            ..CqAttr::default()
        })
        .unwrap();
    let cntr = domain
        .cntr_open(&CntrAttr {
            wait_obj: WaitObj::Unspec,
            ..CntrAttr::default()
        })
        .unwrap();
    let ep = domain.endpoint(&info).unwrap();
    ep.bind(&cq, OpFlags::SEND).unwrap();
    ep.bind_cntr(&cntr, OpFlags::SEND).unwrap();
    ep.enable().unwrap();
    Rig {
        fabric,
        domain,
        cq,
        cntr,
        ep,
        info,
        _provider: h,
    }
}

fn rig() -> Rig {
    rig_with(8, ofi_core::Progress::Manual)
}

static PAYLOAD: [u8; 16] = [7; 16];

fn send(r: &Rig, dest: u64, ctx: usize) -> Result<()> {
    // SAFETY: a static buffer outlives every operation.
    unsafe {
        r.ep.send(
            PAYLOAD.as_ptr(),
            PAYLOAD.len(),
            std::ptr::null_mut(),
            dest,
            ctx,
        )
    }
}

/// An error entry whose provider-specific data goes into `buf` (the caller's buffer
/// for `fi_cq_readerr`).
fn err_entry_into(buf: &mut [u8]) -> CqErrEntry {
    CqErrEntry {
        err_data: buf.as_mut_ptr().cast(),
        err_data_size: buf.len(),
        ..CqErrEntry::default()
    }
}

// ---------------------------------------------------------------------------------------
// Tests.

#[test]
fn cq_reads_through_the_wrapper_drive_progress() {
    let r = rig();
    assert_eq!(r.domain.provider(), "kittest");
    let mut buf = [CqMsgEntry::default(); 4];
    assert_eq!(r.cq.read(&mut buf).unwrap_err().code(), Errno::EAGAIN);

    send(&r, 3, 11).unwrap();
    // A read of zero entries drives progress: the completion is now queued.
    assert_eq!(r.cq.read::<CqMsgEntry>(&mut []).unwrap(), 0);
    let n = r.cq.read(&mut buf).unwrap();
    assert_eq!(n, 1);
    assert_eq!(buf[0].op_context, 11);
    assert_eq!(buf[0].len, PAYLOAD.len());
    assert!(OpFlags::from_bits_retain(buf[0].flags).contains(OpFlags::SEND));

    // readfrom: the source address the provider gave.
    send(&r, 5, 12).unwrap();
    let mut src = [0u64; 4];
    assert_eq!(r.cq.readfrom(&mut buf, &mut src).unwrap(), 1);
    assert_eq!((buf[0].op_context, src[0]), (12, 5));

    // The wrong entry type is refused.
    let mut tagged = [CqTaggedEntry::default(); 1];
    assert_eq!(r.cq.read(&mut tagged).unwrap_err().code(), Errno::EINVAL);
    assert!(r.cq.wait_fd().unwrap() >= 0);
    assert_eq!(
        r.cq.strerror(Errno::EIO.0),
        ofi_core::error::strerror(Errno::EIO.0)
    );
}

#[test]
fn error_completions_cross_with_eavail_and_err_data() {
    let r = rig();
    send(&r, 1, 20).unwrap();
    send(&r, BAD_DEST, 21).unwrap();
    send(&r, 1, 22).unwrap();
    let mut buf = [CqMsgEntry::default(); 4];
    assert_eq!(r.cq.read(&mut buf).unwrap(), 1);
    assert_eq!(buf[0].op_context, 20);
    assert_eq!(r.cq.read(&mut buf).unwrap_err().code(), Errno::EAVAIL);

    let mut e = CqErrEntry::default();
    r.cq.readerr(&mut e, 0).unwrap();
    assert_eq!(e.op_context, 21);
    assert_eq!(e.err, Errno::EHOSTUNREACH.0);
    assert_eq!(e.prov_errno, 7);
    assert_eq!(e.err_data_size, ERR_DATA.len());
    assert!(!e.err_data.is_null());
    // SAFETY: the CQ keeps its copy of the error data valid until the next readerr.
    let data = unsafe { std::slice::from_raw_parts(e.err_data as *const u8, e.err_data_size) };
    assert_eq!(data, ERR_DATA);
    assert_eq!(r.cq.readerr(&mut e, 0).unwrap_err().code(), Errno::EAGAIN);

    assert_eq!(r.cq.read(&mut buf).unwrap(), 1);
    assert_eq!(buf[0].op_context, 22);
    // The counter saw two successes and one failure.
    assert_eq!(r.cntr.read().unwrap(), 2);
    assert_eq!(r.cntr.readerr().unwrap(), 1);
}

#[test]
fn kit_cq_error_data_reaches_the_callers_buffer() {
    let r = rig();
    send(&r, BAD_DEST, 31).unwrap();
    send(&r, BAD_DEST, 32).unwrap();
    send(&r, BAD_DEST, 33).unwrap();
    let mut buf = [CqMsgEntry::default(); 4];
    assert_eq!(r.cq.read(&mut buf).unwrap_err().code(), Errno::EAVAIL);

    // A buffer with room: the data is copied into it, the size is the copied length.
    let mut mine = [0u8; 64];
    let mut e = err_entry_into(&mut mine);
    r.cq.readerr(&mut e, 0).unwrap();
    assert_eq!(e.op_context, 31);
    assert_eq!(e.err_data, mine.as_mut_ptr() as *mut std::ffi::c_void);
    assert_eq!(e.err_data_size, ERR_DATA.len());
    assert_eq!(&mine[..ERR_DATA.len()], ERR_DATA);

    // A short buffer: truncated to its size.
    let mut short = [0u8; 4];
    let mut e = err_entry_into(&mut short);
    r.cq.readerr(&mut e, 0).unwrap();
    assert_eq!((e.op_context, e.err_data_size), (32, 4));
    assert_eq!(&short, &ERR_DATA[..4]);

    // The safe wrapper returns the bytes.
    let e = r.cq.readerr_owned(0).unwrap();
    assert_eq!((e.op_context, e.err), (33, Errno::EHOSTUNREACH));
    assert_eq!(e.err_data, ERR_DATA);
    assert_eq!(r.cq.readerr_owned(0).unwrap_err().code(), Errno::EAGAIN);
}

#[test]
fn resource_management_gives_eagain_when_the_cq_is_full() {
    let r = rig_with(2, ofi_core::Progress::Manual);
    send(&r, 1, 1).unwrap();
    send(&r, 1, 2).unwrap();
    assert_eq!(send(&r, 1, 3).unwrap_err().code(), Errno::EAGAIN);
    let mut buf = [CqMsgEntry::default(); 4];
    assert_eq!(r.cq.read(&mut buf).unwrap(), 2);
    send(&r, 1, 3).unwrap();
    assert_eq!(r.cq.read(&mut buf).unwrap(), 1);
    assert_eq!(buf[0].op_context, 3);
}

#[test]
fn sread_times_out_is_woken_and_signalled() {
    let r = rig();
    let mut buf = [CqMsgEntry::default(); 2];
    let t = Instant::now();
    assert_eq!(r.cq.sread(&mut buf, 50).unwrap_err().code(), Errno::EAGAIN);
    assert!(t.elapsed() >= Duration::from_millis(50));
    assert!(t.elapsed() < Duration::from_secs(5));

    // Work posted from another thread is completed by the sread's own progress.
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(20));
            send(&r, 1, 30).unwrap();
        });
        let n = r.cq.sread(&mut buf, 5_000).unwrap();
        assert_eq!((n, buf[0].op_context), (1, 30));
    });

    // fi_cq_signal unblocks an infinite sread with FI_EAGAIN.
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(20));
            r.cq.signal().unwrap();
        });
        let t = Instant::now();
        assert_eq!(r.cq.sread(&mut buf, -1).unwrap_err().code(), Errno::EAGAIN);
        assert!(t.elapsed() < Duration::from_secs(4));
    });
}

#[test]
fn counters_through_the_wrapper() {
    let r = rig();
    assert_eq!(r.cntr.read().unwrap(), 0);
    r.ep.inject(&PAYLOAD, 1).unwrap();
    // Only progress counts the inject; the read drives it.
    assert_eq!(r.cntr.read().unwrap(), 1);
    r.ep.inject(&PAYLOAD, 1).unwrap();
    r.cntr.wait(2, 5_000).unwrap();
    assert_eq!(r.cntr.wait(10, 30).unwrap_err().code(), Errno::ETIMEDOUT);
    r.cntr.add(3).unwrap();
    assert_eq!(r.cntr.read().unwrap(), 5);
    r.cntr.set(1).unwrap();
    r.cntr.adderr(2).unwrap();
    assert_eq!(r.cntr.readerr().unwrap(), 2);
    r.cntr.seterr(0).unwrap();
    assert_eq!((r.cntr.read().unwrap(), r.cntr.readerr().unwrap()), (1, 0));
    // An error during the wait ends it with FI_EAVAIL.
    send(&r, BAD_DEST, 40).unwrap();
    assert_eq!(r.cntr.wait(100, 5_000).unwrap_err().code(), Errno::EAVAIL);
    assert!(r.cntr.wait_fd().unwrap() >= 0);
}

#[test]
fn event_queue_through_the_wrapper() {
    let r = rig();
    let eq = r
        .fabric
        .eq_open(&EqAttr {
            size: 4,
            flags: OpFlags::WRITE.bits(),
            wait_obj: WaitObj::Fd,
            ..EqAttr::default()
        })
        .unwrap();
    assert_eq!(eq.read().unwrap_err().code(), Errno::EAGAIN);
    let ev = Event {
        event: EqEvent::Notify,
        fid: 1,
        context: 2,
        data: 3,
        ..Event::default()
    };
    eq.write(&ev).unwrap();
    assert_eq!(eq.peek().unwrap(), ev);
    assert_eq!(eq.read().unwrap(), ev);
    assert_eq!(eq.sread(30).unwrap_err().code(), Errno::EAGAIN);

    // A CM event produced by progress: the EQ read drives the domain's engine.
    r.ep.bind_eq(&eq).unwrap();
    r.ep.connect(b"peer", b"hello").unwrap();
    let got = eq.sread(5_000).unwrap();
    assert_eq!(got.event, EqEvent::Connected);
    assert_eq!(got.cm_data, b"hello");
    assert!(eq.wait_fd().unwrap() >= 0);

    // Without FI_WRITE, writes are refused.
    let ro = r.fabric.eq_open(&EqAttr::default()).unwrap();
    assert_eq!(ro.write(&ev).unwrap_err().code(), Errno::EINVAL);
    assert_eq!(ro.sread(0).unwrap_err().code(), Errno::ENOSYS);
}

#[test]
fn trywait_and_wait_sets_through_the_wrapper() {
    let r = rig();
    r.fabric.trywait(&[&r.cq, &r.cntr]).unwrap();
    send(&r, 1, 50).unwrap();
    // trywait drives progress: the completion appears, so blocking is not safe.
    assert_eq!(
        r.fabric.trywait(&[&r.cq]).unwrap_err().code(),
        Errno::EAGAIN
    );
    let mut buf = [CqMsgEntry::default(); 2];
    assert_eq!(r.cq.read(&mut buf).unwrap(), 1);
    // The counter changed and has not been read since.
    assert_eq!(
        r.fabric.trywait(&[&r.cntr]).unwrap_err().code(),
        Errno::EAGAIN
    );
    r.cntr.read().unwrap();
    r.fabric.trywait(&[&r.cq, &r.cntr]).unwrap();

    let ws = r
        .fabric
        .wait_open(&WaitAttr {
            wait_obj: WaitObj::Fd,
            flags: 0,
        })
        .unwrap();
    assert!(ws.fd().unwrap() >= 0);
    assert_eq!(ws.wait(10).unwrap_err().code(), Errno::ETIMEDOUT);
    let err = r
        .fabric
        .wait_open(&WaitAttr {
            wait_obj: WaitObj::None,
            flags: 0,
        })
        .unwrap_err();
    assert_eq!(err.code(), Errno::EINVAL);
}

#[test]
fn auto_progress_domain_completes_without_help() {
    let r = rig_with(8, ofi_core::Progress::Auto);
    // A second endpoint, watched through its context, never called by the test: only
    // the domain's progress thread can drive it.
    const CTX: usize = 0xA070;
    let ep2 = r.domain.endpoint_with(&r.info, CTX, 0).unwrap();
    let rounds = rounds_of(CTX);
    let end = Instant::now() + Duration::from_secs(5);
    while rounds.load(Ordering::SeqCst) < 3 && Instant::now() < end {
        thread::sleep(Duration::from_millis(1));
    }
    assert!(rounds.load(Ordering::SeqCst) >= 3, "the auto thread drives");
    drop(ep2);

    send(&r, 1, 60).unwrap();
    let mut buf = [CqMsgEntry::default(); 2];
    let n = r.cq.sread(&mut buf, 5_000).unwrap();
    assert_eq!((n, buf[0].op_context), (1, 60));
}

#[test]
fn wait_objects_the_kit_refuses_at_open() {
    let r = rig();
    let e = r
        .domain
        .cq_open(&CqAttr {
            format: CqFormat::Msg,
            wait_obj: WaitObj::PollFd,
            ..CqAttr::default()
        })
        .unwrap_err();
    assert_eq!(e.code(), Errno::ENOSYS);
    let e = r
        .domain
        .cntr_open(&CntrAttr {
            flags: 1,
            ..CntrAttr::default()
        })
        .unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    let none = r
        .domain
        .cq_open(&CqAttr::with_format(CqFormat::Msg))
        .unwrap();
    let mut buf = [CqMsgEntry::default(); 1];
    assert_eq!(none.sread(&mut buf, 0).unwrap_err().code(), Errno::ENOSYS);
    assert_eq!(none.signal().unwrap_err().code(), Errno::ENOSYS);
    assert_eq!(none.wait_fd().unwrap_err().code(), Errno::ENOSYS);
}
