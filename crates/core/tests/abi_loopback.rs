//! The plugin boundary end to end, with a small loopback DGRAM provider written here:
//! getinfo and fabric open across the tables, the object tree, binding, a send to
//! oneself, panics at the boundary, `FI_EBUSY` on close, drop order, CM events with an
//! info, counters, memory regions, and layering through the host table.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ofi_core::abi::raw::{CqEntry, CqErrEntry, CqMsgEntry, CqTaggedEntry};
use ofi_core::abi::{self, ProviderKind};
use ofi_core::av::AvAttr;
use ofi_core::cntr::CntrAttr;
use ofi_core::cq::{CqAttr, CqBuf, CqError};
use ofi_core::eq::{EqAttr, EqErrorEntry, Event};
use ofi_core::getinfo::{GetinfoOutcome, GetinfoRequest, VerdictKind};
use ofi_core::mr::MrAttr;
use ofi_core::param::ParamType;
use ofi_core::provider::{
    enosys_fast, AvOps, BindTarget, CntrOps, CqOps, Desc, DomainOps, EndpointOps, EqOps, FabricOps,
    Host, MrOps, Provider, ProviderHandle, Unsupported,
};
use ofi_core::version::API_VERSION;
use ofi_core::{
    AddrFormat, Address, Caps, CqFormat, EpType, EqEvent, Errno, Error, Info, OpFlags, Result,
    Version,
};

// ---------------------------------------------------------------------------------------
// The provider.

thread_local! {
    /// What was dropped on this thread, in order (each test runs on its own thread).
    static DROPS: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

fn dropped(what: &'static str) {
    DROPS.with(|d| d.borrow_mut().push(what));
}

fn drops() -> Vec<&'static str> {
    DROPS.with(|d| d.borrow().clone())
}

fn template(name: &str) -> Info {
    let mut i = Info::new()
        .with_caps(Caps::MSG | Caps::SEND | Caps::RECV)
        .with_ep_type(EpType::Dgram)
        .with_addr_format(AddrFormat::STR);
    i.tx_attr.inject_size = 64;
    i.fabric_attr.name = Some("loop".into());
    i.fabric_attr.prov_name = Some(name.into());
    i.domain_attr.name = Some("loop0".into());
    i.nic = Some(ofi_core::Nic {
        device_name: Some("lo".into()),
        mtu: 65536,
        link_up: true,
        ..Default::default()
    });
    i
}

struct LoopProv {
    knob: i64,
}

impl Provider for LoopProv {
    const NAME: &'static str = "looptest";
    const VERSION: Version = Version::new(3, 1);
    const PRIORITY: i32 = 5;
    type Fabric = LoopFabric;

    fn init(host: &Host) -> Result<Self> {
        host.declare_param("knob", ParamType::Int, "a test knob", Some("7"))?;
        Ok(LoopProv {
            knob: host.param_int("knob")?.unwrap_or(0),
        })
    }

    fn info_templates(&self) -> Vec<Info> {
        vec![template(Self::NAME)]
    }

    fn fabric(&self, _info: &Info) -> Result<LoopFabric> {
        Ok(LoopFabric {
            world: Arc::new(World::default()),
            knob: self.knob,
        })
    }
}

/// A second provider with the same object types: a different family for the host.
struct OtherProv;

impl Provider for OtherProv {
    const NAME: &'static str = "looptest_other";
    const VERSION: Version = Version::new(1, 0);
    const KIND: ProviderKind = ProviderKind::Utility;
    type Fabric = LoopFabric;

    fn init(_host: &Host) -> Result<Self> {
        Ok(OtherProv)
    }

    fn info_templates(&self) -> Vec<Info> {
        vec![template(Self::NAME)]
    }

    fn fabric(&self, _info: &Info) -> Result<LoopFabric> {
        Ok(LoopFabric {
            world: Arc::new(World::default()),
            knob: 0,
        })
    }
}

/// A provider whose init fails.
struct FailProv;

impl Provider for FailProv {
    const NAME: &'static str = "looptest_fail";
    const VERSION: Version = Version::new(1, 0);
    type Fabric = LoopFabric;

    fn init(_host: &Host) -> Result<Self> {
        Err(Error::new(Errno::ENODEV, "no loopback device here"))
    }

    fn info_templates(&self) -> Vec<Info> {
        Vec::new()
    }

    fn fabric(&self, _info: &Info) -> Result<LoopFabric> {
        enosys_fast()
    }
}

#[derive(Default)]
struct World {
    next_id: AtomicU64,
    eps: Mutex<HashMap<u64, Arc<EpInner>>>,
}

struct LoopFabric {
    world: Arc<World>,
    knob: i64,
}

impl Drop for LoopFabric {
    fn drop(&mut self) {
        dropped("fabric");
    }
}

impl FabricOps for LoopFabric {
    type Domain = LoopDomain;
    type PassiveEp = Unsupported;
    type Eq = LoopEq;
    type Wait = Unsupported;

    fn domain(&self, _info: &Info, _context: usize) -> Result<LoopDomain> {
        Ok(LoopDomain {
            world: self.world.clone(),
            knob: self.knob,
        })
    }

    fn eq_open(&self, _attr: &EqAttr, _context: usize) -> Result<LoopEq> {
        Ok(LoopEq {
            q: Arc::new(Mutex::new(VecDeque::new())),
        })
    }
}

struct LoopDomain {
    world: Arc<World>,
    knob: i64,
}

impl Drop for LoopDomain {
    fn drop(&mut self) {
        dropped("domain");
    }
}

impl DomainOps<LoopFabric> for LoopDomain {
    type Endpoint = LoopEp;
    type Cq = LoopCq;
    type Cntr = LoopCntr;
    type Av = LoopAv;
    type Mr = LoopMr;

    fn endpoint(&self, info: &Info, context: usize, _flags: u64) -> Result<LoopEp> {
        if info.ep_type() != EpType::Dgram {
            return Err(Error::new(
                Errno::EINVAL,
                format!("looptest only has FI_EP_DGRAM, not {}", info.ep_type()),
            ));
        }
        let id = self.world.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let inner = Arc::new(EpInner {
            id,
            state: Mutex::new(EpState::default()),
        });
        self.world.eps.lock().unwrap().insert(id, inner.clone());
        Ok(LoopEp {
            inner,
            world: self.world.clone(),
            context,
            knob: self.knob,
        })
    }

    fn cq_open(&self, attr: &CqAttr, _context: usize) -> Result<LoopCq> {
        assert_ne!(attr.format, CqFormat::Unspec, "the host resolves Unspec");
        Ok(LoopCq {
            q: Arc::new(Mutex::new(VecDeque::new())),
            errs: AtomicU64::new(0),
        })
    }

    fn cntr_open(&self, _attr: &CntrAttr, _context: usize) -> Result<LoopCntr> {
        Ok(LoopCntr {
            v: Arc::new(AtomicU64::new(0)),
            e: AtomicU64::new(0),
        })
    }

    fn av_open(&self, _attr: &AvAttr, _context: usize) -> Result<LoopAv> {
        Ok(LoopAv {
            addrs: Arc::new(Mutex::new(Vec::new())),
        })
    }

    fn mr_reg(&self, attr: &MrAttr<'_>, _flags: u64) -> Result<LoopMr> {
        let len: usize = attr.iov.iter().map(|i| i.len).sum();
        Ok(LoopMr {
            key: 0x1000 + len as u64 + attr.requested_key,
        })
    }
}

#[derive(Clone, Copy)]
struct Comp {
    ctx: usize,
    flags: u64,
    len: usize,
    data: u64,
}

#[derive(Default)]
struct EpState {
    tx_cq: Option<Arc<Mutex<VecDeque<Comp>>>>,
    rx_cq: Option<Arc<Mutex<VecDeque<Comp>>>>,
    av: Option<Arc<Mutex<Vec<Address>>>>,
    eq: Option<Arc<Mutex<VecDeque<Event>>>>,
    cntr: Option<Arc<AtomicU64>>,
    recvs: VecDeque<(usize, usize, usize)>,
}

struct EpInner {
    id: u64,
    state: Mutex<EpState>,
}

struct LoopEp {
    inner: Arc<EpInner>,
    world: Arc<World>,
    context: usize,
    knob: i64,
}

impl Drop for LoopEp {
    fn drop(&mut self) {
        self.world.eps.lock().unwrap().remove(&self.inner.id);
        dropped("ep");
    }
}

fn addr_of(id: u64) -> Address {
    Address::Str(format!("looptest://{id}"))
}

impl LoopEp {
    /// Deliver `len` bytes at `buf` to the endpoint behind fabric address `dest`.
    unsafe fn deliver(
        &self,
        buf: *const u8,
        len: usize,
        dest: u64,
        ctx: usize,
        data: u64,
        complete: bool,
    ) -> Result<()> {
        let (av, tx_cq, cntr) = {
            let st = self.inner.state.lock().unwrap();
            (st.av.clone(), st.tx_cq.clone(), st.cntr.clone())
        };
        let av = av.ok_or_else(|| Error::code_only(Errno::ENOAV))?;
        let addr = av
            .lock()
            .unwrap()
            .get(dest as usize)
            .cloned()
            .ok_or_else(|| Error::code_only(Errno::EINVAL))?;
        let Address::Str(s) = addr else {
            return Err(Error::code_only(Errno::EINVAL));
        };
        let id: u64 = s
            .trim_start_matches("looptest://")
            .parse()
            .map_err(|_| Error::code_only(Errno::EINVAL))?;
        let target = self
            .world
            .eps
            .lock()
            .unwrap()
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::code_only(Errno::EHOSTUNREACH))?;
        {
            let mut ts = target.state.lock().unwrap();
            let (rbuf, rlen, rctx) = ts
                .recvs
                .pop_front()
                .ok_or_else(|| Error::code_only(Errno::EAGAIN))?;
            let n = len.min(rlen);
            // SAFETY: the caller's buffers, valid per the data-path contract.
            unsafe { std::ptr::copy_nonoverlapping(buf, rbuf as *mut u8, n) };
            if let Some(cq) = &ts.rx_cq {
                let flags = (OpFlags::RECV | OpFlags::MSG).bits();
                cq.lock().unwrap().push_back(Comp {
                    ctx: rctx,
                    flags,
                    len: n,
                    data,
                });
            }
        }
        if complete {
            if let Some(cq) = tx_cq {
                cq.lock().unwrap().push_back(Comp {
                    ctx,
                    flags: (OpFlags::SEND | OpFlags::MSG).bits(),
                    len,
                    data: 0,
                });
            }
        }
        if let Some(c) = cntr {
            c.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

impl EndpointOps<LoopFabric> for LoopEp {
    fn bind(&self, target: BindTarget<'_, LoopFabric>, flags: OpFlags) -> Result<()> {
        let mut st = self.inner.state.lock().unwrap();
        match target {
            BindTarget::Cq(cq) => {
                let both = !flags.intersects(OpFlags::SEND | OpFlags::RECV);
                if both || flags.contains(OpFlags::SEND) {
                    st.tx_cq = Some(cq.q.clone());
                }
                if both || flags.contains(OpFlags::RECV) {
                    st.rx_cq = Some(cq.q.clone());
                }
            }
            BindTarget::Av(av) => st.av = Some(av.addrs.clone()),
            BindTarget::Eq(eq) => st.eq = Some(eq.q.clone()),
            BindTarget::Cntr(c) => st.cntr = Some(c.v.clone()),
            _ => return Err(Error::new(Errno::ENOSYS, "looptest has no shared contexts")),
        }
        Ok(())
    }

    fn enable(&self) -> Result<()> {
        let st = self.inner.state.lock().unwrap();
        if st.tx_cq.is_none() || st.rx_cq.is_none() {
            return Err(Error::new(
                Errno::ENOCQ,
                "looptest: enable without a CQ for both directions",
            ));
        }
        if st.av.is_none() {
            return Err(Error::new(Errno::ENOAV, "looptest: enable without an AV"));
        }
        Ok(())
    }

    fn getname(&self) -> Result<Vec<u8>> {
        Ok(addr_of(self.inner.id).to_bytes())
    }

    fn getopt(&self, _level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        if optname == 99 {
            let v = self.knob.to_ne_bytes();
            let n = v.len().min(optval.len());
            optval[..n].copy_from_slice(&v[..n]);
            return Ok(v.len());
        }
        Err(Error::code_only(Errno::ENOPROTOOPT))
    }

    fn setopt(&self, _level: i32, _optname: i32, _optval: &[u8]) -> Result<()> {
        panic!("setopt exploded");
    }

    fn connect(&self, _addr: &[u8], param: &[u8]) -> Result<()> {
        let eq = self
            .inner
            .state
            .lock()
            .unwrap()
            .eq
            .clone()
            .ok_or_else(|| Error::new(Errno::ENOEQ, "no EQ bound"))?;
        eq.lock().unwrap().push_back(Event {
            event: EqEvent::ConnReq,
            fid: self.context,
            info: Some(Box::new(template(LoopProv::NAME))),
            cm_data: param.to_vec(),
            ..Event::default()
        });
        Ok(())
    }

    unsafe fn send(
        &self,
        buf: *const u8,
        len: usize,
        _desc: Desc,
        dest: u64,
        context: usize,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.deliver(buf, len, dest, context, 0, true) }
    }

    unsafe fn senddata(
        &self,
        buf: *const u8,
        len: usize,
        _desc: Desc,
        data: u64,
        dest: u64,
        context: usize,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.deliver(buf, len, dest, context, data, true) }
    }

    unsafe fn inject(&self, buf: *const u8, len: usize, dest: u64) -> Result<()> {
        if len > 64 {
            return Err(Error::code_only(Errno::EMSGSIZE));
        }
        // SAFETY: forwarded contract.
        unsafe { self.deliver(buf, len, dest, 0, 0, false) }
    }

    unsafe fn injectdata(
        &self,
        _buf: *const u8,
        _len: usize,
        _data: u64,
        _dest: u64,
    ) -> Result<()> {
        panic!("injectdata exploded");
    }

    unsafe fn recv(
        &self,
        buf: *mut u8,
        len: usize,
        _desc: Desc,
        _src: u64,
        context: usize,
    ) -> Result<()> {
        self.inner
            .state
            .lock()
            .unwrap()
            .recvs
            .push_back((buf as usize, len, context));
        Ok(())
    }
}

/// The loopback CQ. Its `readerr` makes up error entries (there are no real failures
/// here): the n-th (from 1) has context n, `FI_EIO`, provider errno 100 + n and error
/// data `b"loop-error-data-"` followed by n as a digit; `strerror` shows the data it got.
struct LoopCq {
    q: Arc<Mutex<VecDeque<Comp>>>,
    errs: AtomicU64,
}

/// The made-up error data of the `n`-th error.
fn loop_err_data(n: u64) -> Vec<u8> {
    format!("loop-error-data-{n}").into_bytes()
}

impl Drop for LoopCq {
    fn drop(&mut self) {
        dropped("cq");
    }
}

impl CqOps for LoopCq {
    fn read(&self, mut buf: CqBuf<'_>, _src: Option<&mut [u64]>) -> Result<usize> {
        let mut q = self.q.lock().unwrap();
        if q.is_empty() {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let mut n = 0;
        while n < buf.len() {
            let Some(c) = q.pop_front() else { break };
            let e = CqTaggedEntry {
                op_context: c.ctx,
                flags: c.flags,
                len: c.len,
                data: c.data,
                ..Default::default()
            };
            buf.set(n, &e);
            n += 1;
        }
        Ok(n)
    }

    fn readerr(&self, _flags: u64) -> Result<CqError> {
        let n = self.errs.fetch_add(1, Ordering::Relaxed) + 1;
        Ok(CqError {
            prov_errno: 100 + n as i32,
            err_data: loop_err_data(n),
            ..CqError::new(n as usize, Errno::EIO)
        })
    }

    fn strerror(&self, prov_errno: i32, err_data: &[u8]) -> String {
        format!("loop {prov_errno} [{}]", String::from_utf8_lossy(err_data))
    }
}

struct LoopAv {
    addrs: Arc<Mutex<Vec<Address>>>,
}

impl Drop for LoopAv {
    fn drop(&mut self) {
        dropped("av");
    }
}

impl AvOps<LoopFabric> for LoopAv {
    fn insert(
        &self,
        addrs: &[Address],
        fi_addr: &mut [u64],
        _flags: u64,
        _context: usize,
    ) -> Result<usize> {
        let mut v = self.addrs.lock().unwrap();
        for (a, out) in addrs.iter().zip(fi_addr.iter_mut()) {
            *out = v.len() as u64;
            v.push(a.clone());
        }
        Ok(addrs.len())
    }

    fn remove(&self, _fi_addr: &[u64], _flags: u64) -> Result<()> {
        Ok(())
    }

    fn lookup(&self, fi_addr: u64) -> Result<Address> {
        self.addrs
            .lock()
            .unwrap()
            .get(fi_addr as usize)
            .cloned()
            .ok_or_else(|| Error::code_only(Errno::EINVAL))
    }
}

struct LoopEq {
    q: Arc<Mutex<VecDeque<Event>>>,
}

impl EqOps for LoopEq {
    fn read(&self, peek: bool) -> Result<Event> {
        let mut q = self.q.lock().unwrap();
        let ev = if peek {
            q.front().cloned()
        } else {
            q.pop_front()
        };
        ev.ok_or_else(|| Error::code_only(Errno::EAGAIN))
    }

    /// Made up, as the CQ's: context 7, `FI_EIO`, provider errno 107, error data
    /// `b"eq-error-data"`.
    fn readerr(&self) -> Result<EqErrorEntry> {
        Ok(EqErrorEntry {
            fid: 0,
            context: 7,
            data: 0,
            err: Errno::EIO,
            prov_errno: 107,
            err_data: b"eq-error-data".to_vec(),
        })
    }

    fn strerror(&self, prov_errno: i32, err_data: &[u8]) -> String {
        format!(
            "loop eq {prov_errno} [{}]",
            String::from_utf8_lossy(err_data)
        )
    }

    fn write(&self, event: Event) -> Result<()> {
        self.q.lock().unwrap().push_back(event);
        Ok(())
    }
}

struct LoopCntr {
    v: Arc<AtomicU64>,
    e: AtomicU64,
}

impl CntrOps for LoopCntr {
    fn read(&self) -> u64 {
        self.v.load(Ordering::Relaxed)
    }
    fn readerr(&self) -> u64 {
        self.e.load(Ordering::Relaxed)
    }
    fn add(&self, value: u64) -> Result<()> {
        self.v.fetch_add(value, Ordering::Relaxed);
        Ok(())
    }
    fn set(&self, value: u64) -> Result<()> {
        self.v.store(value, Ordering::Relaxed);
        Ok(())
    }
}

struct LoopMr {
    key: u64,
}

impl MrOps<LoopFabric> for LoopMr {
    fn key(&self) -> u64 {
        self.key
    }
}

// ---------------------------------------------------------------------------------------
// Helpers.

fn handle() -> ProviderHandle {
    // Parameters are the host's: the provider reads them through the process's host
    // table, which `ofi-host` installs.
    ofi_host::host_table::install();
    ofi_core::provider::init_builtin::<LoopProv>().expect("looptest initialises")
}

fn request() -> GetinfoRequest {
    let mut req = GetinfoRequest::new(API_VERSION);
    req.hints = Some(Info::hints().with_ep_type(EpType::Dgram));
    req
}

fn info(h: &ProviderHandle) -> Info {
    let out = h.getinfo(&request());
    assert!(out.error.is_none(), "{:?}", out.error);
    out.infos.into_iter().next().expect("one info")
}

/// The provider opened, and a fabric, domain, CQ, AV and enabled endpoint of it, the
/// endpoint's own address inserted (`me`). Fields drop in order: the provider last.
struct Rig {
    fabric: ofi_core::fabric::Fabric,
    domain: ofi_core::domain::Domain,
    cq: ofi_core::cq::CompletionQueue,
    av: ofi_core::av::AddressVector,
    ep: ofi_core::ep::Endpoint,
    me: u64,
    /// What the objects were opened with.
    info: Info,
    provider: ProviderHandle,
}

/// A [`Rig`] of the provider [`handle`] opens.
fn rig() -> Rig {
    rig_of(handle())
}

/// A [`Rig`] of the provider `h`.
fn rig_of(h: ProviderHandle) -> Rig {
    let info = info(&h);
    let fabric = h.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let cq = domain.cq_open(&CqAttr::with_format(CqFormat::Msg)).unwrap();
    let av = domain.av_open(&AvAttr::default()).unwrap();
    let ep = domain.endpoint(&info).unwrap();
    ep.bind(&cq, OpFlags::SEND | OpFlags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
    ep.enable().unwrap();
    let name = ep.getname().unwrap();
    let me = av
        .insert(&[Address::from_bytes(AddrFormat::STR, &name).unwrap()])
        .unwrap()[0];
    Rig {
        fabric,
        domain,
        cq,
        av,
        ep,
        me,
        info,
        provider: h,
    }
}

/// Send `msg` to ourselves and return what arrived and the completions.
fn loop_once(r: &Rig, msg: &[u8]) -> (Vec<u8>, Vec<CqMsgEntry>) {
    let mut rbuf = vec![0u8; 64];
    // SAFETY: `rbuf` outlives the receive's completion, read below.
    unsafe {
        r.ep.recv(rbuf.as_mut_ptr(), rbuf.len(), std::ptr::null_mut(), 0, 7)
    }
    .unwrap();
    // SAFETY: `msg` outlives the send's completion, read below.
    unsafe {
        r.ep.send(msg.as_ptr(), msg.len(), std::ptr::null_mut(), r.me, 9)
    }
    .unwrap();
    let mut comps = [CqMsgEntry::default(); 4];
    let n = r.cq.read(&mut comps).unwrap();
    rbuf.truncate(msg.len());
    (rbuf, comps[..n].to_vec())
}

// ---------------------------------------------------------------------------------------
// Tests.

#[test]
fn handle_reports_the_entry() {
    let h = handle();
    assert_eq!(h.name(), "looptest");
    assert_eq!(h.version(), Version::new(3, 1));
    assert_eq!(h.kind(), ProviderKind::Core);
    assert_eq!(h.priority(), 5);
    let o = ofi_core::provider::init_builtin::<OtherProv>().unwrap();
    assert_eq!(o.kind(), ProviderKind::Utility);
}

#[test]
fn getinfo_crosses_the_boundary_and_round_trips() {
    let h = handle();
    let req = request();
    let across = h.getinfo(&req);
    let direct: GetinfoOutcome = LoopProv::init(&Host::for_provider("looptest"))
        .unwrap()
        .getinfo(&req);
    assert!(across.error.is_none());
    assert_eq!(across.infos, direct.infos);
    assert_eq!(across.verdicts, direct.verdicts);
    let i = &across.infos[0];
    assert_eq!(i.prov_name(), "looptest");
    assert_eq!(i.ep_type(), EpType::Dgram);
    assert_eq!(
        i.nic.as_ref().and_then(|n| n.device_name.as_deref()),
        Some("lo")
    );
    assert_eq!(across.verdicts[0].kind, VerdictKind::Kept);

    // A hint the template cannot meet: rejected, with the verdict across the boundary.
    let mut req = request();
    req.hints = Some(Info::hints().with_ep_type(EpType::Msg));
    let out = h.getinfo(&req);
    assert!(out.infos.is_empty());
    assert_eq!(out.verdicts.len(), 1);
    assert_eq!(out.verdicts[0].kind, VerdictKind::Rejected);
    assert_eq!(out.verdicts[0].provider, "looptest");
    assert!(!out.verdicts[0].field.is_empty());
}

#[test]
fn getinfo_error_crosses_the_boundary() {
    let h = handle();
    let mut req = request();
    req.flags = ofi_core::GetinfoFlags::SOURCE; // FI_SOURCE without node or service
    let out = h.getinfo(&req);
    assert_eq!(out.error.as_ref().map(Error::code), Some(Errno::EINVAL));
    assert!(out.infos.is_empty());
}

#[test]
fn parameters_go_through_the_host_table() {
    // The provider declared `knob` (default 7) through its Host and read it back;
    // getopt 99 reports it.
    let r = rig();
    let mut v = [0u8; 8];
    assert_eq!(r.ep.getopt(0, 99, &mut v).unwrap(), 8);
    assert_eq!(i64::from_ne_bytes(v), 7);
    let mut small = [0u8; 2];
    assert_eq!(
        r.ep.getopt(0, 1, &mut small).unwrap_err().code(),
        Errno::ENOPROTOOPT
    );
    assert_eq!(
        ofi_host::param::get_int(Some("looptest"), "knob").unwrap(),
        Some(7)
    );
}

#[test]
fn send_to_itself_and_read_the_completions() {
    let r = rig();
    let (got, comps) = loop_once(&r, b"hello, loop");
    assert_eq!(got, b"hello, loop");
    assert_eq!(comps.len(), 2);
    let recv = comps
        .iter()
        .find(|c| c.op_context == 7)
        .expect("receive completion");
    assert_eq!(recv.len, 11);
    assert!(OpFlags::from_bits_retain(recv.flags).contains(OpFlags::RECV));
    let send = comps
        .iter()
        .find(|c| c.op_context == 9)
        .expect("send completion");
    assert!(OpFlags::from_bits_retain(send.flags).contains(OpFlags::SEND));

    // Empty CQ: EAGAIN; a read of zero entries is allowed (progress only).
    let mut e = [CqMsgEntry::default(); 1];
    assert_eq!(r.cq.read(&mut e).unwrap_err().code(), Errno::EAGAIN);
    assert_eq!(
        r.cq.read::<CqMsgEntry>(&mut []).unwrap_err().code(),
        Errno::EAGAIN
    );

    // inject: safe slice, no send completion.
    let mut rbuf = [0u8; 8];
    // SAFETY: `rbuf` outlives the receive, completed below.
    unsafe {
        r.ep.recv(rbuf.as_mut_ptr(), rbuf.len(), std::ptr::null_mut(), 0, 11)
    }
    .unwrap();
    r.ep.inject(b"inj", r.me).unwrap();
    assert_eq!(r.cq.read(&mut e).unwrap(), 1);
    assert_eq!(e[0].op_context, 11);
    assert_eq!(&rbuf[..3], b"inj");
    assert_eq!(
        r.ep.inject(&[0u8; 65], r.me).unwrap_err().code(),
        Errno::EMSGSIZE
    );

    // The AV maps back to our own name.
    assert_eq!(r.av.lookup(r.me).unwrap(), addr_of_ep(&r));
    assert_eq!(
        r.av.straddr(&addr_of_ep(&r)).unwrap(),
        addr_of_ep(&r).to_addr_str()
    );
}

fn addr_of_ep(r: &Rig) -> Address {
    Address::from_bytes(AddrFormat::STR, &r.ep.getname().unwrap()).unwrap()
}

#[test]
fn cq_checks_the_entry_format() {
    let r = rig();
    assert_eq!(r.cq.format(), CqFormat::Msg);
    let mut wrong = [CqEntry::default(); 2];
    let e = r.cq.read(&mut wrong).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    // Unspec opens as Context.
    let cq2 = r.domain.cq_open(&CqAttr::default()).unwrap();
    assert_eq!(cq2.format(), CqFormat::Context);
    assert_eq!(cq2.read(&mut wrong).unwrap_err().code(), Errno::EAGAIN);
}

#[test]
fn unimplemented_operations_are_enosys() {
    let r = rig();
    let b = [0u8; 4];
    // SAFETY: ENOSYS paths touch nothing.
    let e = unsafe { r.ep.tsend(b.as_ptr(), 4, std::ptr::null_mut(), r.me, 1, 0) }.unwrap_err();
    assert_eq!(e.code(), Errno::ENOSYS);
    assert_eq!(
        r.ep.inject_write(&b, r.me, 0, 0).unwrap_err().code(),
        Errno::ENOSYS
    );
    assert_eq!(
        r.fabric.passive_ep(&r.info).unwrap_err().code(),
        Errno::ENOSYS
    );
    let e = r.domain.scalable_ep(&r.info).unwrap_err();
    assert_eq!(e.code(), Errno::ENOSYS);
    assert_eq!(e.message(), "scalable endpoints are not supported");
    assert_eq!(
        r.ep.atomicvalid(ofi_core::Datatype::Uint64, ofi_core::AtomicOp::Sum)
            .unwrap_err()
            .code(),
        Errno::ENOSYS
    );
}

#[test]
fn control_errors_carry_the_providers_message() {
    let h = handle();
    let info = info(&h);
    let fabric = h.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let ep = domain.endpoint(&info).unwrap();
    let e = ep.enable().unwrap_err();
    assert_eq!(e.code(), Errno::ENOCQ);
    assert_eq!(
        e.message(),
        "looptest: enable without a CQ for both directions"
    );
    let e = domain
        .endpoint(&Info::new().with_ep_type(EpType::Msg))
        .unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    assert_eq!(e.message(), "looptest only has FI_EP_DGRAM, not FI_EP_MSG");
}

#[test]
fn a_panicking_slot_returns_eother_and_the_process_lives() {
    let r = rig();
    let e = r.ep.injectdata(b"x", 1, r.me).unwrap_err();
    assert_eq!(e.code(), Errno::EOTHER);
    let e = r.ep.setopt(0, 1, &[1]).unwrap_err();
    assert_eq!(e.code(), Errno::EOTHER);
    // Still usable afterwards.
    let (got, _) = loop_once(&r, b"after the panic");
    assert_eq!(got, b"after the panic");
}

#[test]
fn close_is_ebusy_while_children_or_bindings_remain() {
    let mut r = rig();
    let e = r.domain.close().unwrap_err();
    assert_eq!(e.code(), Errno::EBUSY);
    let e = r.fabric.close().unwrap_err();
    assert_eq!(e.code(), Errno::EBUSY);
    // The CQ and AV are bound to the endpoint.
    assert_eq!(r.cq.close().unwrap_err().code(), Errno::EBUSY);
    assert_eq!(r.av.close().unwrap_err().code(), Errno::EBUSY);
    // Everything still works after a refused close.
    loop_once(&r, b"still open");
    r.ep.close().unwrap();
    // A closed handle answers EBADF, and closing twice is fine.
    assert_eq!(r.ep.inject(b"x", 0).unwrap_err().code(), Errno::EBADF);
    assert_eq!(r.ep.getname().unwrap_err().code(), Errno::EBADF);
    r.ep.close().unwrap();
    assert_eq!(
        r.domain.close().unwrap_err().code(),
        Errno::EBUSY,
        "CQ and AV still open"
    );
    r.cq.close().unwrap();
    r.av.close().unwrap();
    r.domain.close().unwrap();
    r.fabric.close().unwrap();
    assert_eq!(drops(), ["ep", "cq", "av", "domain", "fabric"]);
}

#[test]
fn dropping_parents_first_is_safe() {
    let Rig {
        fabric,
        domain,
        cq,
        av,
        ep,
        me,
        info: _,
        provider,
    } = rig();
    drop(provider);
    drop(fabric);
    drop(domain);
    drop(av);
    assert!(
        drops().is_empty(),
        "nothing closes while the endpoint lives: {:?}",
        drops()
    );
    // The endpoint still works: its domain, fabric, AV and the provider are alive.
    let mut rbuf = [0u8; 4];
    // SAFETY: `rbuf` outlives the receive, completed below.
    unsafe { ep.recv(rbuf.as_mut_ptr(), 4, std::ptr::null_mut(), 0, 1) }.unwrap();
    ep.inject(b"ok", me).unwrap();
    let mut e = [CqMsgEntry::default(); 1];
    assert_eq!(cq.read(&mut e).unwrap(), 1);
    let before = drops().len();
    drop(cq);
    assert_eq!(drops().len(), before, "the CQ is bound: it stays open");
    drop(ep);
    // The endpoint closes first, then what it held, then the parents.
    let d = drops();
    let pos = |w: &str| {
        d.iter()
            .position(|x| *x == w)
            .unwrap_or_else(|| panic!("{w} not closed: {d:?}"))
    };
    assert!(pos("ep") < pos("cq") && pos("ep") < pos("av"));
    assert!(pos("cq") < pos("domain") && pos("av") < pos("domain"));
    assert!(pos("domain") < pos("fabric"));
}

fn h_other() -> ProviderHandle {
    ofi_core::provider::init_builtin::<OtherProv>().unwrap()
}

#[test]
fn binding_an_object_of_another_provider_is_einval() {
    let r = rig();
    let o = h_other();
    let oi = info(&o);
    let ofab = o.open_fabric(&oi).unwrap();
    let odom = ofab.domain(&oi).unwrap();
    let ocq = odom.cq_open(&CqAttr::default()).unwrap();
    let e = r.ep.bind(&ocq, OpFlags::SEND).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    assert!(e.message().contains("looptest_other"), "{}", e.message());
    let oeq = ofab.eq_open(&EqAttr::default()).unwrap();
    assert_eq!(r.ep.bind_eq(&oeq).unwrap_err().code(), Errno::EINVAL);
    assert_eq!(r.fabric.trywait(&[&ocq]).unwrap_err().code(), Errno::EINVAL);
}

/// The next error entry of `cq`, its error data copied into `buf`.
fn readerr_into(cq: &ofi_core::cq::CompletionQueue, buf: &mut [u8]) -> CqErrEntry {
    let mut e = CqErrEntry {
        err_data: buf.as_mut_ptr() as *mut std::ffi::c_void,
        err_data_size: buf.len(),
        ..CqErrEntry::default()
    };
    cq.readerr(&mut e, 0).unwrap();
    e
}

#[test]
fn cq_readerr_copies_error_data_into_the_callers_buffer() {
    let r = rig();
    let cq = r.domain.cq_open(&CqAttr::default()).unwrap();
    // Room for all of it: copied, size set to the copied length.
    let mut buf = [0xAAu8; 64];
    let e = readerr_into(&cq, &mut buf);
    let want = loop_err_data(1);
    assert_eq!((e.op_context, e.err, e.prov_errno), (1, Errno::EIO.0, 101));
    assert_eq!(e.err_data, buf.as_mut_ptr() as *mut std::ffi::c_void);
    assert_eq!(e.err_data_size, want.len());
    assert_eq!(&buf[..want.len()], &want[..]);
    assert_eq!(buf[want.len()], 0xAA, "nothing written past the data");
    // The caller's buffer passed back to strerror carries the data.
    let text = cq.strerror_with_data(101, &buf[..want.len()]);
    assert_eq!(text, "loop 101 [loop-error-data-1]");

    // A smaller buffer: truncated to its size.
    let mut small = [0u8; 4];
    let e = readerr_into(&cq, &mut small);
    assert_eq!(e.err_data_size, 4);
    assert_eq!(&small, b"loop");
    assert_eq!(cq.strerror_with_data(102, &small), "loop 102 [loop]");
}

#[test]
fn cq_readerr_without_a_buffer_points_into_the_provider() {
    let r = rig();
    let cq = r.domain.cq_open(&CqAttr::default()).unwrap();
    let mut e = CqErrEntry::default();
    cq.readerr(&mut e, 0).unwrap();
    let want = loop_err_data(1);
    assert!(!e.err_data.is_null());
    assert_eq!(e.err_data_size, want.len());
    // SAFETY: the provider's buffer, valid until the next read of this CQ.
    let got = unsafe { std::slice::from_raw_parts(e.err_data as *const u8, e.err_data_size) };
    assert_eq!(got, &want[..]);
    // Passed back to strerror, the provider's own buffer is recognised.
    assert_eq!(
        cq.strerror_with_data(101, got),
        "loop 101 [loop-error-data-1]"
    );
    // A non-null buffer with size 0 is also "no buffer".
    let mut unused = [0u8; 8];
    let mut e = CqErrEntry {
        err_data: unused.as_mut_ptr() as *mut std::ffi::c_void,
        err_data_size: 0,
        ..CqErrEntry::default()
    };
    cq.readerr(&mut e, 0).unwrap();
    assert_ne!(e.err_data, unused.as_mut_ptr() as *mut std::ffi::c_void);
    assert_eq!(e.err_data_size, loop_err_data(2).len());
    assert_eq!(unused, [0u8; 8]);
}

#[test]
fn cq_readerr_owned_and_strerror_get_the_bytes() {
    let r = rig();
    let cq = r.domain.cq_open(&CqAttr::default()).unwrap();
    let e = cq.readerr_owned(0).unwrap();
    assert_eq!(
        e,
        CqError {
            prov_errno: 101,
            err_data: loop_err_data(1),
            ..CqError::new(1, Errno::EIO)
        }
    );
    assert_eq!(
        cq.strerror_with_data(e.prov_errno, &e.err_data),
        "loop 101 [loop-error-data-1]"
    );
    // No data, or data the provider did not hand out (a copy: no length is known for
    // it), reaches the provider as empty.
    assert_eq!(cq.strerror(101), "loop 101 []");
    let copy = e.err_data.clone();
    assert_eq!(cq.strerror_with_data(101, &copy), "loop 101 []");
    // After the next readerr the old data is no longer known.
    let e2 = cq.readerr_owned(0).unwrap();
    assert_eq!(e2.err_data, loop_err_data(2));
    assert_eq!(cq.strerror_with_data(101, &e.err_data), "loop 101 []");
}

#[test]
fn eq_strerror_gets_the_error_data() {
    let r = rig();
    let eq = r.fabric.eq_open(&EqAttr::default()).unwrap();
    let e = eq.readerr().unwrap();
    assert_eq!((e.context, e.err, e.prov_errno), (7, Errno::EIO, 107));
    assert_eq!(e.err_data, b"eq-error-data");
    assert_eq!(
        eq.strerror_with_data(e.prov_errno, &e.err_data),
        "loop eq 107 [eq-error-data]"
    );
    assert_eq!(eq.strerror(107), "loop eq 107 []");
}

#[test]
fn cm_event_with_info_crosses_the_eq() {
    let r = rig();
    let eq = r.fabric.eq_open(&EqAttr::default()).unwrap();
    let ep2 = r.domain.endpoint_with(&r.info, 0x77, 0).unwrap();
    ep2.bind_eq(&eq).unwrap();
    assert_eq!(eq.read().unwrap_err().code(), Errno::EAGAIN);
    ep2.connect(b"peer", b"hello-cm").unwrap();
    let peeked = eq.peek().unwrap();
    let ev = eq.read().unwrap();
    assert_eq!(peeked, ev);
    assert_eq!(ev.event, EqEvent::ConnReq);
    assert_eq!(ev.fid, 0x77);
    assert_eq!(ev.cm_data, b"hello-cm");
    assert_eq!(ev.info.as_deref(), Some(&template("looptest")));
    assert_eq!(eq.read().unwrap_err().code(), Errno::EAGAIN);

    // Application events round-trip through write/read.
    let note = Event {
        event: EqEvent::Notify,
        fid: 1,
        context: 2,
        data: 3,
        ..Event::default()
    };
    eq.write(&note).unwrap();
    assert_eq!(eq.read().unwrap(), note);
}

#[test]
fn counters_and_memory_regions() {
    let r = rig();
    let c = r.domain.cntr_open(&CntrAttr::default()).unwrap();
    r.ep.bind_cntr(&c, OpFlags::SEND).unwrap();
    assert_eq!(c.read().unwrap(), 0);
    loop_once(&r, b"count me");
    assert_eq!(c.read().unwrap(), 1);
    c.add(5).unwrap();
    assert_eq!(c.read().unwrap(), 6);
    c.set(2).unwrap();
    assert_eq!(c.read().unwrap(), 2);
    assert_eq!(c.readerr().unwrap(), 0);
    assert_eq!(c.adderr(1).unwrap_err().code(), Errno::ENOSYS);

    let mr = r
        .domain
        .mr_reg_owned(vec![1, 2, 3, 4], OpFlags::SEND | OpFlags::RECV, 10)
        .unwrap();
    assert_eq!(mr.key(), 0x1000 + 4 + 10);
    assert!(mr.desc().is_null());
    assert_eq!(mr.owned_to_vec(), Some(vec![1u8, 2, 3, 4]));
    // Owned memory is read and written by copies, inside its bounds only.
    mr.write_owned(1, &[9, 8]).unwrap();
    let mut two = [0u8; 2];
    mr.read_owned(2, &mut two).unwrap();
    assert_eq!(two, [8, 4]);
    assert_eq!(
        mr.write_owned(3, &[1, 1]).unwrap_err().code(),
        Errno::EINVAL
    );
    assert_eq!(
        mr.read_owned(usize::MAX, &mut two).unwrap_err().code(),
        Errno::EINVAL
    );
    assert_eq!(mr.owned_to_vec(), Some(vec![1u8, 9, 8, 4]));
    let (p, len) = mr.owned_ptr().unwrap();
    assert!(!p.is_null());
    assert_eq!(len, 4);
}

#[test]
fn init_failure_is_reported_with_code_and_message() {
    let e = ofi_core::provider::init_builtin::<FailProv>().unwrap_err();
    assert_eq!(e.code(), Errno::ENODEV);
    assert!(
        e.message().contains("no loopback device here"),
        "{}",
        e.message()
    );
    assert!(e.message().contains("looptest_fail"), "{}", e.message());
}

#[test]
fn an_entry_of_another_interface_is_refused_before_init() {
    static BAD: abi::PluginEntry = {
        let mut e = *abi::entry_for::<LoopProv>();
        e.abi_major = abi::ABI_MAJOR + 1;
        e
    };
    // SAFETY: a static entry of this process.
    let e = unsafe { ProviderHandle::init(&BAD, None) }.unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    assert_eq!(
        e.message(),
        format!(
            "ABI {}.{} found, {}.x wanted",
            abi::ABI_MAJOR + 1,
            abi::ABI_MINOR,
            abi::ABI_MAJOR
        )
    );
}

#[test]
fn layering_opens_a_fabric_through_the_host_table() {
    ofi_host::registry::add_builtin(abi::entry_for::<LoopProv>());
    let reg = ofi_host::registry::global();
    let req = request();
    let infos = reg.getinfo(&req).expect("looptest answers");
    let info = infos
        .into_iter()
        .find(|i| i.prov_name() == "looptest")
        .expect("a looptest info");
    // What a utility provider does: getinfo over cores, then open through the host.
    let host = Host::current();
    let core = host.getinfo_core(&req);
    assert!(
        core.infos.iter().any(|i| i.prov_name() == "looptest"),
        "{:?}",
        core.error
    );
    let mut fabric = host.open_fabric(&info).unwrap();
    assert_eq!(fabric.provider(), "looptest");
    let mut domain = fabric.domain(&info).unwrap();
    let mut cq = domain.cq_open(&CqAttr::default()).unwrap();
    assert_eq!(fabric.close().unwrap_err().code(), Errno::EBUSY);
    cq.close().unwrap();
    domain.close().unwrap();
    fabric.close().unwrap();
    assert_eq!(drops(), ["cq", "domain", "fabric"]);
}

mod exported {
    ofi_core::export_provider!(super::LoopProv);
}

#[test]
fn the_exported_static_is_the_same_entry() {
    let e = &exported::OFI_RS_PLUGIN_ENTRY;
    assert_eq!(abi::check_entry(e), Ok(()));
    assert_eq!(e.fingerprint, abi::FINGERPRINT);
    assert_eq!(e.version, Version::new(3, 1).to_raw());
    // SAFETY: a static of this test binary.
    let h = unsafe { ProviderHandle::init(e, None) }.unwrap();
    assert_eq!(h.name(), "looptest");
    let r = rig_of(h);
    assert_eq!(loop_once(&r, b"via the export").0, b"via the export");
}
