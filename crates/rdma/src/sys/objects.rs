//! The rdma-core objects behind the interface's types: each owns one rdma-core object,
//! keeps what it depends on alive (a queue pair its CQs, SRQ and domain; everything its
//! context), and destroys it on drop. The data path (`post_send`, `post_recv`,
//! `post_srq_recv`, `poll_cq`, `req_notify_cq`) calls through the context's ops table,
//! exactly as rdma-core's inline functions do.
//!
//! rdma-core's verbs are thread-safe, so the objects are `Send` and `Sync`.

use std::ffi::CStr;
use std::os::fd::RawFd;
use std::sync::Arc;

use libc::c_void;
use ofi_core::{Errno, Error, Result};

use super::efadv::LibEfa;
use super::ffi::*;
use super::IbVerbs;
use crate::verbs::{
    Access, AhAttr, AsyncEvent, DeviceAttr, EventElement, EventType, Gid, Mtu, PortAttr, PortState,
    QpAttr, QpAttrMask, QpCap, QpType, RecvWr, SendOp, SendWr, WcFlags, WcOpcode, WcStatus,
    WorkCompletion,
};

pub(super) fn errno_error(what: &str) -> Error {
    Error::from(std::io::Error::last_os_error()).context(what.to_string())
}

/// `p`, what the rdma-core constructor `call` returned, or the error `errno` names when
/// it returned null (call it right after, before anything else can set `errno`).
pub(super) fn non_null<T>(p: *mut T, call: &str) -> Result<*mut T> {
    if p.is_null() {
        Err(errno_error(call))
    } else {
        Ok(p)
    }
}

fn rc_error(rc: libc::c_int, what: &str) -> Error {
    let code = if rc > 0 {
        rc
    } else {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    Error::from(std::io::Error::from_raw_os_error(code)).context(what.to_string())
}

/// Declares an owner of one rdma-core pointer, `Send + Sync`, destroyed on drop with
/// `$destroy`, and its `lib()`: the library it came from, reached through the field
/// path after `lib` (the context, or what keeps the context alive). Its `Debug` shows
/// the pointer (what tells two owners apart), so the objects holding one derive theirs.
macro_rules! owner {
    ($(#[$m:meta])* $name:ident($t:ty) { $($f:ident: $ft:ty),* } drop $destroy:ident,
     lib $($lib:ident).+) => {
        $(#[$m])*
        pub(crate) struct $name {
            pub ptr: *mut $t,
            $(pub $f: $ft,)*
        }
        impl $name {
            fn lib(&self) -> &IbVerbs {
                self.$($lib).+
            }
        }
        // SAFETY: rdma-core's objects may be used from any thread (its verbs are
        // thread-safe); the pointer is only freed in drop.
        unsafe impl Send for $name {}
        // SAFETY: as above.
        unsafe impl Sync for $name {}
        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple(stringify!($name)).field(&self.ptr).finish()
            }
        }
        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: the object was created by this library, is destroyed once,
                // after everything depending on it (which holds an Arc to it). A failure
                // cannot be reported from drop.
                unsafe { (self.lib().$destroy)(self.ptr) };
            }
        }
    };
}

owner!(
    /// An open device context.
    SysContext(IbvContext) { lib: &'static IbVerbs, name: String } drop close_device, lib lib
);

owner!(
    /// A protection domain.
    SysPd(IbvPd) { ctx: Arc<SysContext> } drop dealloc_pd, lib ctx.lib
);

owner!(
    /// A memory region.
    SysMr(IbvMr) { pd: Arc<SysPd> } drop dereg_mr, lib pd.ctx.lib
);

owner!(
    /// A completion channel.
    SysChannel(IbvCompChannel) { ctx: Arc<SysContext> } drop destroy_comp_channel, lib ctx.lib
);

owner!(
    /// A completion queue: plain, or (with `efa` set) an EFA extended one whose
    /// `ptr` is the `struct ibv_cq` head of its `struct ibv_cq_ex`.
    SysCq(IbvCq) {
        ctx: Arc<SysContext>,
        _channel: Option<Arc<SysChannel>>,
        efa: Option<super::cq_ex::EfaCq>
    } drop destroy_cq, lib ctx.lib
);

owner!(
    /// A shared receive queue.
    SysSrq(IbvSrq) { pd: Arc<SysPd> } drop destroy_srq, lib pd.ctx.lib
);

owner!(
    /// An address handle.
    SysAh(IbvAh) { pd: Arc<SysPd> } drop destroy_ah, lib pd.ctx.lib
);

owner!(
    /// A queue pair.
    SysQp(IbvQp) {
        pd: Arc<SysPd>,
        _send_cq: Arc<SysCq>,
        _recv_cq: Arc<SysCq>,
        _srq: Option<Arc<SysSrq>>,
        qp_type: QpType,
        cap: QpCap
    } drop destroy_qp, lib pd.ctx.lib
);

/// Opens the rdma-core device called `name`.
pub(crate) fn open(lib: &'static IbVerbs, name: &str) -> Result<Arc<SysContext>> {
    let mut n: libc::c_int = 0;
    // SAFETY: rdma-core's documented call.
    let list = unsafe { (lib.get_device_list)(&mut n) };
    if list.is_null() {
        return Err(Error::new(Errno::ENODEV, "no RDMA device"));
    }
    let mut ctx = std::ptr::null_mut();
    for i in 0..n.max(0) as usize {
        // SAFETY: the list holds `n` device pointers until freed.
        let dev = unsafe { *list.add(i) };
        // SAFETY: a listed device's NUL-terminated name.
        let dn = unsafe { CStr::from_ptr((lib.get_device_name)(dev)) };
        if dn.to_bytes() == name.as_bytes() {
            // SAFETY: a listed device.
            ctx = unsafe { (lib.open_device)(dev) };
            if ctx.is_null() {
                let e = errno_error("ibv_open_device");
                // SAFETY: frees the list once.
                unsafe { (lib.free_device_list)(list) };
                return Err(e);
            }
            break;
        }
    }
    // SAFETY: frees the list once; an open context keeps its device.
    unsafe { (lib.free_device_list)(list) };
    if ctx.is_null() {
        return Err(Error::new(
            Errno::ENODEV,
            format!("no RDMA device named {name}"),
        ));
    }
    Ok(Arc::new(SysContext {
        ptr: ctx,
        lib,
        name: name.to_string(),
    }))
}

fn c_text(b: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = b
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The process's libefa, or `EOPNOTSUPP` with the one-line reason there is none.
pub(super) fn libefa() -> Result<&'static LibEfa> {
    super::efadv::libefa().map_err(|why| Error::new(Errno::EOPNOTSUPP, why))
}

/// Runs the libefa query `what`: `call` fills a default `T` through the pointer, told
/// its size (`inlen`), and returns rdma-core's code.
fn efa_query<T: Default>(
    what: &str,
    call: impl FnOnce(&LibEfa, *mut T, u32) -> libc::c_int,
) -> Result<T> {
    let efa = libefa()?;
    let mut attr = T::default();
    let rc = call(efa, &mut attr, std::mem::size_of::<T>() as u32);
    if rc != 0 {
        return Err(rc_error(rc, what));
    }
    Ok(attr)
}

impl SysContext {
    /// `efadv_query_device`: the EFA attributes of this (EFA) device.
    pub(crate) fn efa_query_device(&self) -> Result<super::efadv::EfadvDeviceAttr> {
        efa_query("efadv_query_device", |efa, attr, inlen| {
            // SAFETY: our open context and an attribute struct of `inlen` bytes to fill.
            unsafe { (efa.query_device)(self.ptr, attr, inlen) }
        })
    }

    pub(crate) fn query_device(&self) -> Result<DeviceAttr> {
        // SAFETY: all-zero is a valid attribute struct to fill.
        let mut a: IbvDeviceAttr = unsafe { std::mem::zeroed() };
        // SAFETY: our context and a struct of the mirrored layout.
        let rc = unsafe { (self.lib.query_device)(self.ptr, &mut a) };
        if rc != 0 {
            return Err(rc_error(rc, "ibv_query_device"));
        }
        let u = |v: libc::c_int| v.max(0) as u32;
        Ok(DeviceAttr {
            fw_ver: c_text(&a.fw_ver),
            node_guid: u64::from_be(a.node_guid),
            max_mr_size: a.max_mr_size,
            max_qp: u(a.max_qp),
            max_qp_wr: u(a.max_qp_wr),
            max_sge: u(a.max_sge),
            max_cq: u(a.max_cq),
            max_cqe: u(a.max_cqe),
            max_mr: u(a.max_mr),
            max_pd: u(a.max_pd),
            max_qp_rd_atom: u(a.max_qp_rd_atom),
            max_srq: u(a.max_srq),
            max_srq_wr: u(a.max_srq_wr),
            phys_port_cnt: a.phys_port_cnt,
            atomics: a.atomic_cap != 0,
        })
    }

    pub(crate) fn query_port(&self, port: u8) -> Result<PortAttr> {
        let mut a = IbvPortAttr::default();
        // SAFETY: our context and a zeroed struct of the mirrored layout (the exported
        // call fills its compatible prefix).
        let rc = unsafe { (self.lib.query_port)(self.ptr, port, &mut a) };
        if rc != 0 {
            return Err(rc_error(rc, "ibv_query_port"));
        }
        Ok(PortAttr {
            state: PortState::from_raw(a.state).unwrap_or(PortState::Nop),
            max_mtu: Mtu::from_raw(a.max_mtu).unwrap_or(Mtu::Mtu256),
            active_mtu: Mtu::from_raw(a.active_mtu).unwrap_or(Mtu::Mtu256),
            gid_tbl_len: a.gid_tbl_len,
            max_msg_sz: a.max_msg_sz,
            lid: a.lid,
            link_layer: a.link_layer,
        })
    }

    pub(crate) fn query_gid(&self, port: u8, index: i32) -> Result<Gid> {
        let mut g = IbvGid::default();
        // SAFETY: our context and a GID to fill.
        let rc = unsafe { (self.lib.query_gid)(self.ptr, port, index, &mut g) };
        if rc != 0 {
            return Err(rc_error(rc, "ibv_query_gid"));
        }
        Ok(Gid(g.raw))
    }

    pub(crate) fn async_fd(&self) -> RawFd {
        // SAFETY: reads a field of our open context.
        unsafe { (*self.ptr).async_fd }
    }

    /// Takes one asynchronous event (the async fd is set non-blocking at open).
    pub(crate) fn get_async_event(&self) -> Option<AsyncEvent> {
        // SAFETY: all-zero is a valid event struct to fill.
        let mut e: IbvAsyncEvent = unsafe { std::mem::zeroed() };
        // SAFETY: our context; fails with EAGAIN when nothing is pending.
        if unsafe { (self.lib.get_async_event)(self.ptr, &mut e) } != 0 {
            return None;
        }
        let event_type = EventType::from_raw(e.event_type)?;
        // SAFETY: the union member that `event_type` names; the objects are alive
        // until the event is acknowledged below.
        let element = unsafe {
            match event_type {
                EventType::CqErr => EventElement::Cq((*e.element.cq).cq_context as u64),
                EventType::SrqErr | EventType::SrqLimitReached => {
                    EventElement::Srq((*e.element.srq).handle)
                }
                EventType::PortActive
                | EventType::PortErr
                | EventType::LidChange
                | EventType::PkeyChange
                | EventType::SmChange
                | EventType::ClientReregister
                | EventType::GidChange => EventElement::Port(e.element.port_num as u8),
                EventType::DeviceFatal => EventElement::Device,
                EventType::WqFatal => EventElement::Device,
                _ => EventElement::Qp((*e.element.qp).qp_num),
            }
        };
        // SAFETY: acknowledges the event taken above, once.
        unsafe { (self.lib.ack_async_event)(&mut e) };
        Some(AsyncEvent {
            event_type,
            element,
        })
    }
}

pub(crate) fn set_nonblocking(fd: RawFd) {
    crate::soft::conn::set_nonblocking(fd);
}

pub(crate) fn alloc_pd(ctx: &Arc<SysContext>) -> Result<Arc<SysPd>> {
    // SAFETY: our open context.
    let p = unsafe { (ctx.lib.alloc_pd)(ctx.ptr) };
    let p = non_null(p, "ibv_alloc_pd")?;
    Ok(Arc::new(SysPd {
        ptr: p,
        ctx: ctx.clone(),
    }))
}

/// # Safety
/// As [`ProtectionDomain::reg_mr`](crate::ProtectionDomain::reg_mr).
pub(crate) unsafe fn reg_mr(
    pd: &Arc<SysPd>,
    addr: *mut u8,
    len: usize,
    access: Access,
) -> Result<Arc<SysMr>> {
    // SAFETY: caller's contract on the range; our domain.
    let m = unsafe { (pd.lib().reg_mr)(pd.ptr, addr.cast(), len, access.bits() as libc::c_int) };
    let m = non_null(m, "ibv_reg_mr")?;
    Ok(Arc::new(SysMr {
        ptr: m,
        pd: pd.clone(),
    }))
}

impl SysMr {
    pub(crate) fn keys(&self) -> (u32, u32) {
        // SAFETY: reads fields of our registered region.
        unsafe { ((*self.ptr).lkey, (*self.ptr).rkey) }
    }
}

pub(crate) fn create_channel(ctx: &Arc<SysContext>) -> Result<Arc<SysChannel>> {
    // SAFETY: our open context.
    let c = unsafe { (ctx.lib.create_comp_channel)(ctx.ptr) };
    let c = non_null(c, "ibv_create_comp_channel")?;
    // SAFETY: reads the new channel's fd.
    set_nonblocking(unsafe { (*c).fd });
    Ok(Arc::new(SysChannel {
        ptr: c,
        ctx: ctx.clone(),
    }))
}

impl SysChannel {
    pub(crate) fn fd(&self) -> RawFd {
        // SAFETY: reads a field of our channel.
        unsafe { (*self.ptr).fd }
    }

    /// Takes one event (non-blocking) and acknowledges it at once.
    pub(crate) fn get_event(&self) -> Option<u64> {
        let mut cq: *mut IbvCq = std::ptr::null_mut();
        let mut user: *mut c_void = std::ptr::null_mut();
        // SAFETY: our channel (non-blocking fd: fails when nothing is pending).
        if unsafe { (self.lib().get_cq_event)(self.ptr, &mut cq, &mut user) } != 0 {
            return None;
        }
        // SAFETY: the CQ the event names, alive (it holds this channel).
        unsafe { (self.lib().ack_cq_events)(cq, 1) };
        Some(user as u64)
    }
}

pub(crate) fn create_cq(
    ctx: &Arc<SysContext>,
    cqe: u32,
    user: u64,
    channel: Option<&Arc<SysChannel>>,
) -> Result<Arc<SysCq>> {
    let ch = channel.map_or(std::ptr::null_mut(), |c| c.ptr);
    // SAFETY: our context and channel.
    let c = unsafe { (ctx.lib.create_cq)(ctx.ptr, cqe as libc::c_int, user as *mut c_void, ch, 0) };
    let c = non_null(c, "ibv_create_cq")?;
    Ok(Arc::new(SysCq {
        ptr: c,
        ctx: ctx.clone(),
        _channel: channel.cloned(),
        efa: None,
    }))
}

fn wc_from(w: &IbvWc) -> WorkCompletion {
    WorkCompletion {
        wr_id: w.wr_id,
        status: WcStatus::from_raw(w.status).unwrap_or(WcStatus::GeneralErr),
        opcode: WcOpcode::from_raw(w.opcode).unwrap_or(WcOpcode::Send),
        vendor_err: w.vendor_err,
        byte_len: w.byte_len,
        imm_data: u32::from_be(w.imm_data),
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        wc_flags: WcFlags::from_bits_truncate(w.wc_flags),
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: w.dlid_path_bits,
        sgid: None,
    }
}

impl SysCq {
    fn ops(&self) -> &IbvContextOps {
        // SAFETY: the context of our CQ is open while we live.
        unsafe { &(*(*self.ptr).context).ops }
    }

    /// `ibv_poll_cq` through the context's ops, 16 at a time, on the stack; an EFA
    /// extended queue is polled by `ibv_start_poll` and its reads instead.
    pub(crate) fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize> {
        if let Some(efa) = &self.efa {
            return efa.poll(self.ptr.cast(), out);
        }
        let Some(poll) = self.ops().poll_cq else {
            return Err(Error::new(Errno::ENOSYS, "driver has no poll_cq"));
        };
        let mut done = 0;
        while done < out.len() {
            let mut buf = [IbvWc::default(); 16];
            let want = (out.len() - done).min(16);
            // SAFETY: our CQ and a buffer of `want` entries.
            let n = unsafe { poll(self.ptr, want as libc::c_int, buf.as_mut_ptr()) };
            if n < 0 {
                return Err(Error::new(Errno::EIO, "ibv_poll_cq failed"));
            }
            // Never more than asked for, whatever the driver says.
            let n = (n as usize).min(want);
            for (o, w) in out[done..].iter_mut().zip(&buf[..n]) {
                *o = wc_from(w);
            }
            done += n;
            if n < want {
                break;
            }
        }
        Ok(done)
    }

    pub(crate) fn req_notify(&self, solicited_only: bool) -> Result<()> {
        let Some(f) = self.ops().req_notify_cq else {
            return Err(Error::new(Errno::ENOSYS, "driver has no req_notify_cq"));
        };
        // SAFETY: our CQ.
        let rc = unsafe { f(self.ptr, solicited_only as libc::c_int) };
        if rc != 0 {
            return Err(rc_error(rc, "ibv_req_notify_cq"));
        }
        Ok(())
    }
}

pub(crate) fn create_srq(pd: &Arc<SysPd>, max_wr: u32, max_sge: u32) -> Result<Arc<SysSrq>> {
    let mut a = IbvSrqInitAttr {
        srq_context: std::ptr::null_mut(),
        attr: IbvSrqAttr {
            max_wr,
            max_sge,
            srq_limit: 0,
        },
    };
    // SAFETY: our domain and a filled attribute struct.
    let s = unsafe { (pd.lib().create_srq)(pd.ptr, &mut a) };
    let s = non_null(s, "ibv_create_srq")?;
    Ok(Arc::new(SysSrq {
        ptr: s,
        pd: pd.clone(),
    }))
}

fn recv_wr(wr: &RecvWr<'_>) -> IbvRecvWr {
    IbvRecvWr {
        wr_id: wr.wr_id,
        next: std::ptr::null_mut(),
        sg_list: wr.sg_list.as_ptr() as *mut IbvSge,
        num_sge: wr.sg_list.len() as libc::c_int,
    }
}

/// A driver's receive-posting entry (`post_recv` of a QP, `post_srq_recv` of an SRQ).
type PostRecv<Q> = unsafe extern "C" fn(*mut Q, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> libc::c_int;

/// Posts `wr` to `queue` through its driver's entry `post` (`call` names it in errors;
/// a driver without one: `ENOSYS`).
///
/// # Safety
/// `queue` is a live queue of the driver whose entry `post` is.
#[inline]
unsafe fn post_one_recv<Q>(
    post: Option<PostRecv<Q>>,
    queue: *mut Q,
    wr: &RecvWr<'_>,
    call: &str,
) -> Result<()> {
    let Some(f) = post else {
        return Err(Error::new(
            Errno::ENOSYS,
            format!("the driver has no entry for {call}"),
        ));
    };
    let mut w = recv_wr(wr);
    let mut bad = std::ptr::null_mut();
    // SAFETY: the caller's queue and one request whose elements the device checks by
    // lkey.
    let rc = unsafe { f(queue, &mut w, &mut bad) };
    if rc != 0 {
        return Err(rc_error(rc, call));
    }
    Ok(())
}

impl SysSrq {
    pub(crate) fn handle(&self) -> u32 {
        // SAFETY: reads a field of our SRQ.
        unsafe { (*self.ptr).handle }
    }

    pub(crate) fn post_recv(&self, wr: &RecvWr<'_>) -> Result<()> {
        // SAFETY: the context of our SRQ is open while we live.
        let post = unsafe { (*(*self.ptr).context).ops.post_srq_recv };
        // SAFETY: our SRQ, and its driver's entry.
        unsafe { post_one_recv(post, self.ptr, wr, "ibv_post_srq_recv") }
    }
}

fn ah_attr(a: &AhAttr) -> IbvAhAttr {
    IbvAhAttr {
        grh: IbvGlobalRoute {
            dgid: IbvGid { raw: a.dgid.0 },
            flow_label: 0,
            sgid_index: a.sgid_index,
            hop_limit: 64,
            traffic_class: 0,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: 0,
        static_rate: 0,
        is_global: u8::from(a.dgid != Gid::default()),
        port_num: a.port_num,
    }
}

pub(crate) fn create_ah(pd: &Arc<SysPd>, a: &AhAttr) -> Result<Arc<SysAh>> {
    let mut attr = ah_attr(a);
    // SAFETY: our domain and a filled attribute struct.
    let p = unsafe { (pd.lib().create_ah)(pd.ptr, &mut attr) };
    let p = non_null(p, "ibv_create_ah")?;
    Ok(Arc::new(SysAh {
        ptr: p,
        pd: pd.clone(),
    }))
}

impl SysAh {
    /// `efadv_query_ah`: the EFA device's number for this address handle.
    pub(crate) fn efa_ahn(&self) -> Result<u16> {
        let attr: super::efadv::EfadvAhAttr = efa_query("efadv_query_ah", |efa, attr, inlen| {
            // SAFETY: our live address handle and an attribute struct of `inlen` bytes.
            unsafe { (efa.query_ah)(self.ptr, attr, inlen) }
        })?;
        Ok(attr.ahn)
    }
}

pub(crate) struct QpCreate<'a> {
    pub qp_type: QpType,
    pub send_cq: &'a Arc<SysCq>,
    pub recv_cq: &'a Arc<SysCq>,
    pub srq: Option<&'a Arc<SysSrq>>,
    pub cap: QpCap,
    pub sq_sig_all: bool,
}

impl QpCreate<'_> {
    /// rdma-core's base creation attributes of this queue pair.
    fn init_attr(&self) -> IbvQpInitAttr {
        IbvQpInitAttr {
            qp_context: std::ptr::null_mut(),
            send_cq: self.send_cq.ptr,
            recv_cq: self.recv_cq.ptr,
            srq: self.srq.map_or(std::ptr::null_mut(), |s| s.ptr),
            cap: IbvQpCap {
                max_send_wr: self.cap.max_send_wr,
                max_recv_wr: self.cap.max_recv_wr,
                max_send_sge: self.cap.max_send_sge,
                max_recv_sge: self.cap.max_recv_sge,
                max_inline_data: self.cap.max_inline_data,
            },
            qp_type: self.qp_type as u32,
            sq_sig_all: libc::c_int::from(self.sq_sig_all),
        }
    }

    /// The queue pair rdma-core created as `q`, with the capacities it granted.
    fn created(&self, pd: &Arc<SysPd>, q: *mut IbvQp, granted: &IbvQpCap) -> Arc<SysQp> {
        Arc::new(SysQp {
            ptr: q,
            pd: pd.clone(),
            _send_cq: self.send_cq.clone(),
            _recv_cq: self.recv_cq.clone(),
            _srq: self.srq.cloned(),
            qp_type: self.qp_type,
            cap: QpCap {
                max_send_wr: granted.max_send_wr,
                max_recv_wr: granted.max_recv_wr,
                max_send_sge: granted.max_send_sge,
                max_recv_sge: granted.max_recv_sge,
                max_inline_data: granted.max_inline_data,
            },
        })
    }
}

pub(crate) fn create_qp(pd: &Arc<SysPd>, c: &QpCreate<'_>) -> Result<Arc<SysQp>> {
    let mut a = c.init_attr();
    // SAFETY: our domain, CQs and SRQ; a filled attribute struct (rdma-core writes the
    // granted capacities back into it).
    let q = unsafe { (pd.lib().create_qp)(pd.ptr, &mut a) };
    let q = non_null(q, "ibv_create_qp")?;
    Ok(c.created(pd, q, &a.cap))
}

/// An SRD queue pair of an EFA device, created through libefa (`efadv_create_qp_ex`
/// with `EFADV_QP_DRIVER_TYPE_SRD`); `FI_ENODEV`-style one-line errors without libefa.
pub(crate) fn create_srd_qp(pd: &Arc<SysPd>, c: &QpCreate<'_>) -> Result<Arc<SysQp>> {
    let efa = libefa()?;
    let base = c.init_attr();
    let mut a = IbvQpInitAttrEx {
        qp_context: base.qp_context,
        send_cq: base.send_cq,
        recv_cq: base.recv_cq,
        srq: base.srq,
        cap: base.cap,
        qp_type: IBV_QPT_DRIVER,
        sq_sig_all: base.sq_sig_all,
        comp_mask: IBV_QP_INIT_ATTR_PD,
        pd: pd.ptr,
        xrcd: std::ptr::null_mut(),
        create_flags: 0,
        max_tso_header: 0,
        rwq_ind_tbl: std::ptr::null_mut(),
        rx_hash_conf: IbvRxHashConf {
            rx_hash_function: 0,
            rx_hash_key_len: 0,
            rx_hash_key: std::ptr::null_mut(),
            rx_hash_fields_mask: 0,
        },
        source_qpn: 0,
        send_ops_flags: 0,
    };
    let mut efa_attr = super::efadv::EfadvQpInitAttr {
        driver_qp_type: super::efadv::QP_DRIVER_TYPE_SRD,
        ..Default::default()
    };
    // SAFETY: our open context, domain, CQs and SRQ; filled attribute structs (the
    // driver writes the granted capacities back into `a`), `inlen` their size.
    let q = unsafe {
        (efa.create_qp_ex)(
            pd.ctx.ptr,
            &mut a,
            &mut efa_attr,
            std::mem::size_of::<super::efadv::EfadvQpInitAttr>() as u32,
        )
    };
    let q = non_null(q, "efadv_create_qp_ex")?;
    Ok(c.created(pd, q, &a.cap))
}

/// rdma-core's form of `wr` (`ah`: its address handle, for a datagram send), linked to
/// nothing.
fn ibv_send_wr(wr: &SendWr<'_>, ah: Option<&SysAh>) -> IbvSendWr {
    let (imm, op) = match wr.op {
        SendOp::SendWithImm(i) | SendOp::RdmaWriteWithImm(_, i) => (i.to_be(), wr.op),
        o => (0, o),
    };
    let rdma = |r: crate::verbs::Remote| IbvSendWrOp {
        rdma: IbvRdmaWr {
            remote_addr: r.addr,
            rkey: r.rkey,
        },
    };
    let wr_op = match op {
        SendOp::RdmaWrite(r) | SendOp::RdmaWriteWithImm(r, _) | SendOp::RdmaRead(r) => rdma(r),
        SendOp::AtomicCmpSwap {
            remote,
            compare,
            swap,
        } => IbvSendWrOp {
            atomic: IbvAtomicWr {
                remote_addr: remote.addr,
                compare_add: compare,
                swap,
                rkey: remote.rkey,
            },
        },
        SendOp::AtomicFetchAdd { remote, add } => IbvSendWrOp {
            atomic: IbvAtomicWr {
                remote_addr: remote.addr,
                compare_add: add,
                swap: 0,
                rkey: remote.rkey,
            },
        },
        SendOp::Send | SendOp::SendWithImm(_) => match (wr.ud, ah) {
            (Some(d), Some(ah)) => IbvSendWrOp {
                ud: IbvUdWr {
                    ah: ah.ptr,
                    remote_qpn: d.remote_qpn,
                    remote_qkey: d.remote_qkey,
                },
            },
            _ => IbvSendWrOp {
                rdma: IbvRdmaWr {
                    remote_addr: 0,
                    rkey: 0,
                },
            },
        },
    };
    IbvSendWr {
        wr_id: wr.wr_id,
        next: std::ptr::null_mut(),
        sg_list: wr.sg_list.as_ptr() as *mut IbvSge,
        num_sge: wr.sg_list.len() as libc::c_int,
        opcode: op.opcode() as u32,
        send_flags: wr.send_flags.bits(),
        imm_data: imm,
        wr: wr_op,
        remote_srqn: 0,
        ext: IbvSendWrExt {
            tso: IbvTsoWr {
                hdr: std::ptr::null_mut(),
                hdr_sz: 0,
                mss: 0,
            },
        },
    }
}

impl SysQp {
    fn ops(&self) -> &IbvContextOps {
        // SAFETY: the context of our QP is open while we live.
        unsafe { &(*(*self.ptr).context).ops }
    }

    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: reads a field of our QP.
        unsafe { (*self.ptr).qp_num }
    }

    pub(crate) fn state(&self) -> crate::verbs::QpState {
        // SAFETY: reads a field of our QP (rdma-core keeps it as the last modify set it).
        crate::verbs::QpState::from_raw(unsafe { (*self.ptr).state })
            .unwrap_or(crate::verbs::QpState::Err)
    }

    pub(crate) fn modify(&self, a: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let mut attr = IbvQpAttr {
            qp_state: a.qp_state as u32,
            path_mtu: a.path_mtu as u32,
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qp_num: a.dest_qp_num,
            qp_access_flags: a.qp_access_flags.bits(),
            ah_attr: ah_attr(&a.ah_attr),
            pkey_index: a.pkey_index,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            port_num: a.port_num,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            ..IbvQpAttr::default()
        };
        // SAFETY: our QP and a filled attribute struct.
        let rc = unsafe { (self.lib().modify_qp)(self.ptr, &mut attr, mask.bits() as libc::c_int) };
        if rc != 0 {
            return Err(rc_error(rc, "ibv_modify_qp"));
        }
        Ok(())
    }

    /// The name of the device the queue pair lives on.
    pub(crate) fn device_name(&self) -> &str {
        &self.pd.ctx.name
    }

    /// Applies attributes as rdma-core's own struct (those `rdma_init_qp_attr` filled).
    pub(crate) fn modify_raw(&self, attr: &mut IbvQpAttr, mask: libc::c_int) -> Result<()> {
        // SAFETY: our QP and a filled attribute struct.
        let rc = unsafe { (self.lib().modify_qp)(self.ptr, attr, mask) };
        if rc != 0 {
            return Err(rc_error(rc, "ibv_modify_qp"));
        }
        Ok(())
    }

    /// Whether the queue pair takes its receives from a shared receive queue.
    pub(crate) fn has_srq(&self) -> bool {
        self._srq.is_some()
    }

    /// # Safety
    /// As [`QueuePair::post_send`](crate::QueuePair::post_send).
    pub(crate) unsafe fn post_send(&self, wr: &SendWr<'_>, ah: Option<&SysAh>) -> Result<()> {
        let Some(f) = self.ops().post_send else {
            return Err(Error::new(Errno::ENOSYS, "driver has no post_send"));
        };
        let mut w = ibv_send_wr(wr, ah);
        let mut bad = std::ptr::null_mut();
        // SAFETY: our QP and one request; the caller's contract covers the buffers.
        let rc = unsafe { f(self.ptr, &mut w, &mut bad) };
        if rc != 0 {
            return Err(rc_error(rc, "ibv_post_send"));
        }
        Ok(())
    }

    /// `ibv_post_send` of the list `wrs` (`ahs[i]`: the address handle of `wrs[i]`), one
    /// call: on a refusal, the index of the request the driver names (those before it
    /// were posted).
    ///
    /// # Safety
    /// As [`QueuePair::post_send`](crate::QueuePair::post_send), for each.
    pub(crate) unsafe fn post_send_list(
        &self,
        wrs: &[SendWr<'_>],
        ahs: &[Option<&SysAh>],
    ) -> std::result::Result<(), (usize, Error)> {
        let Some(f) = self.ops().post_send else {
            return Err((0, Error::new(Errno::ENOSYS, "driver has no post_send")));
        };
        let mut list: Vec<IbvSendWr> = wrs
            .iter()
            .zip(ahs)
            .map(|(wr, ah)| ibv_send_wr(wr, *ah))
            .collect();
        if list.is_empty() {
            return Ok(());
        }
        // Linked once the list no longer moves.
        let base = list.as_mut_ptr();
        for i in 1..list.len() {
            // SAFETY: `i` is within the list.
            list[i - 1].next = unsafe { base.add(i) };
        }
        let mut bad: *mut IbvSendWr = std::ptr::null_mut();
        // SAFETY: our QP and a linked list of requests alive for the call; the caller's
        // contract covers the buffers.
        let rc = unsafe { f(self.ptr, base, &mut bad) };
        if rc == 0 {
            return Ok(());
        }
        let at = (bad as usize)
            .checked_sub(base as usize)
            .map_or(0, |d| d / std::mem::size_of::<IbvSendWr>())
            .min(list.len() - 1);
        Err((at, rc_error(rc, "ibv_post_send")))
    }

    pub(crate) fn post_recv(&self, wr: &RecvWr<'_>) -> Result<()> {
        // SAFETY: our QP, and its driver's entry.
        unsafe { post_one_recv(self.ops().post_recv, self.ptr, wr, "ibv_post_recv") }
    }
}

impl SysContext {
    /// Makes the async fd non-blocking (done once at open).
    pub(crate) fn init(&self) {
        set_nonblocking(self.async_fd());
    }
}
