//! EQ slots of the adapters (see [`super`] for the object pointers and panics): the
//! hand-written `fn` entries of the list of EQ operations
//! ([`for_each_eq_op!`](crate::for_each_eq_op)), then the generated ones.

use super::*;

pub(super) fn is_cm(ev: EqEvent) -> bool {
    matches!(
        ev,
        EqEvent::ConnReq | EqEvent::Connected | EqEvent::Shutdown
    )
}

/// Bytes `ev` takes in a read buffer.
pub(super) fn eq_entry_size(ev: &Event) -> usize {
    if is_cm(ev.event) {
        std::mem::size_of::<EqCmEntry>() + ev.cm_data.len()
    } else {
        std::mem::size_of::<EqEntry>()
    }
}

/// Write `ev` into `buf` (checked to be large enough and aligned).
///
/// # Safety
/// `buf` valid for `eq_entry_size(ev)` bytes of writes.
pub(super) unsafe fn write_event<T>(
    b: &EqBox<T>,
    ev: Event,
    event: *mut u32,
    buf: *mut c_void,
) -> Result<usize> {
    let need = eq_entry_size(&ev);
    if !(buf as usize).is_multiple_of(std::mem::align_of::<EqCmEntry>()) {
        return einval("eq read: misaligned buffer");
    }
    // SAFETY: `buf` valid and aligned for `need` bytes (checked/contract); `event` valid.
    unsafe {
        *event = ev.event.to_raw();
        if is_cm(ev.event) {
            let info = match ev.info {
                None => std::ptr::null_mut(),
                Some(i) => {
                    let rb = RawInfoBox::new(&i);
                    let p = rb.as_ptr() as *mut RawInfo;
                    b.infos.lock().unwrap_or_else(|p| p.into_inner()).push(rb);
                    p
                }
            };
            (buf as *mut EqCmEntry).write(EqCmEntry { fid: ev.fid, info });
            let data = (buf as *mut u8).add(std::mem::size_of::<EqCmEntry>());
            std::ptr::copy_nonoverlapping(ev.cm_data.as_ptr(), data, ev.cm_data.len());
        } else {
            (buf as *mut EqEntry).write(EqEntry {
                fid: ev.fid,
                context: ev.context,
                data: ev.data,
            });
        }
    }
    Ok(need)
}

/// Shared body of read and sread: peek, check room, then consume.
///
/// # Safety
/// As [`write_event`]; `event` valid.
pub(super) unsafe fn eq_read_common<T>(
    b: &EqBox<T>,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
    mut next: impl FnMut(bool) -> Result<Event>,
) -> Result<usize> {
    need_out(event)?;
    let peek = flags & OpFlags::PEEK.bits() != 0;
    let first = next(true)?;
    let need = eq_entry_size(&first);
    if len < need || buf.is_null() {
        return Err(Error::code_only(Errno::ETOOSMALL));
    }
    let ev = if peek { first } else { next(false)? };
    if eq_entry_size(&ev) > len {
        return Err(Error::code_only(Errno::ETOOSMALL));
    }
    // SAFETY: room checked; validity by contract.
    unsafe { write_event(b, ev, event, buf) }
}

count_slots! {
    /// Slot `read` of the `eq` table.
    "eq.read" fn eq_read(
        eq, event: *mut u32, buf: *mut c_void, len: usize, flags: u64
    ) on b: Boxed<F> => {
        // SAFETY: `event` and `buf` valid (contract).
        unsafe { eq_read_common(b, event, buf, len, flags, |peek| b.inner.read(peek)) }
    }

    /// Slot `sread` of the `eq` table.
    "eq.sread" fn eq_sread(
        eq, event: *mut u32, buf: *mut c_void, len: usize, timeout: i32, flags: u64
    ) on b: Boxed<F> => {
        let mut waited = false;
        let next = |peek| {
            if waited {
                b.inner.read(peek)
            } else {
                waited = true;
                b.inner.sread(timeout, peek)
            }
        };
        // SAFETY: `event` and `buf` valid (contract).
        unsafe { eq_read_common(b, event, buf, len, flags, next) }
    }

    /// Slot `readerr` of the `eq` table.
    "eq.readerr" fn eq_readerr(eq, entry: *mut EqErrEntry, _flags: u64) on b: Boxed<F> => {
        need_out(entry)?;
        let e = b.inner.readerr()?;
        // SAFETY: `entry` checked non-null, valid (contract).
        unsafe {
            let user_buf = (*entry).err_data;
            let user_len = (*entry).err_data_size;
            let (ptr, size) = ErrData::hand_out_kept(&b.err_data, e.err_data, user_buf, user_len);
            entry.write(EqErrEntry {
                fid: e.fid,
                context: e.context,
                data: e.data,
                err: e.err.0,
                prov_errno: e.prov_errno,
                err_data: ptr,
                err_data_size: size,
            });
        }
        Ok(std::mem::size_of::<EqErrEntry>())
    }

    /// Slot `strerror` of the `eq` table.
    "eq.strerror" fn eq_strerror(
        eq, prov_errno: i32, err_data: *const c_void, buf: *mut u8, len: usize
    ) on b: Boxed<F> => {
        let text = |data: &[u8]| b.inner.strerror(prov_errno, data);
        // SAFETY: `buf` valid for `len` (contract).
        Ok(unsafe { ErrData::strerror_into(&b.err_data, err_data, text, buf, len) })
    }

    /// Slot `write` of the `eq` table.
    "eq.write" fn eq_write(
        eq, event: u32, buf: *const c_void, len: usize, _flags: u64
    ) on b: Boxed<F> => {
        let ev = EqEvent::from_raw(event)
            .ok_or_else(|| Error::new(Errno::EINVAL, "eq write: unknown event"))?;
        if buf.is_null() || !(buf as usize).is_multiple_of(std::mem::align_of::<EqCmEntry>()) {
            return einval("eq write: null or misaligned buffer");
        }
        // SAFETY: `buf` valid for `len` bytes and aligned (checked/contract).
        let e = unsafe {
            if is_cm(ev) {
                if len < std::mem::size_of::<EqCmEntry>() {
                    return einval("eq write: buffer smaller than a CM entry");
                }
                let cm = &*(buf as *const EqCmEntry);
                let info = if cm.info.is_null() {
                    None
                } else {
                    Some(Box::new(info_from_raw(cm.info)?))
                };
                let data = sl(
                    (buf as *const u8).add(std::mem::size_of::<EqCmEntry>()),
                    len - std::mem::size_of::<EqCmEntry>(),
                );
                Event {
                    event: ev,
                    fid: cm.fid,
                    context: 0,
                    data: 0,
                    info,
                    cm_data: data.to_vec(),
                }
            } else {
                if len < std::mem::size_of::<EqEntry>() {
                    return einval("eq write: buffer smaller than an entry");
                }
                let en = &*(buf as *const EqEntry);
                Event {
                    event: ev,
                    fid: en.fid,
                    context: en.context,
                    data: en.data,
                    info: None,
                    cm_data: Vec::new(),
                }
            }
        };
        b.inner.write(e)?;
        Ok(len)
    }
}

/// Slot `free_info` of the `eq` table.
/// # Safety
/// `eq` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn eq_free_info<F: FabricOps>(eq: Obj, info: *mut RawInfo) -> i32 {
    guard("eq.free_info", || {
        // SAFETY: our boxed EQ.
        let b = unsafe { ob::<EqBox<EqOf<F>>>(eq) };
        let mut infos = b.infos.lock().unwrap_or_else(|p| p.into_inner());
        match infos.iter().position(|i| std::ptr::eq(i.as_ptr(), info)) {
            Some(k) => {
                infos.swap_remove(k);
                0
            }
            None => Errno::EINVAL.to_status(),
        }
    })
}

boxed_objects!(EqBox<EqOf<F>> => EqOf<F>, inner);

crate::for_each_eq_op!(ctl_trampolines);

// ---------------------------------------------------------------------------------------
// The host side of the entries above whose C conversion is written by hand: the
// public method that calls the slot (the provider method and the hook forwarder
// come from the list).

use crate::abi::tables::call_slot;
use crate::eq::EqErrorEntry;
use crate::eq::READ_WORDS;

impl crate::eq::EventQueue {
    /// `fi_eq_read`: the next event (`FI_EAGAIN` if none, `FI_EAVAIL` if an error is
    /// next).
    pub fn read(&self) -> Result<Event> {
        self.read_flags(0)
    }

    /// `fi_eq_read` with `FI_PEEK`: the next event, left queued.
    pub fn peek(&self) -> Result<Event> {
        self.read_flags(OpFlags::PEEK.bits())
    }

    fn read_flags(&self, flags: u64) -> Result<Event> {
        // SAFETY: the buffer and `event` are valid for the given length.
        self.read_with(|e, b, l| unsafe {
            call_slot!(self.t(), EqTable.read(self.obj, e, b, l, flags))
        })
    }

    /// `fi_eq_sread`: as [`read`](Self::read), blocking up to `timeout` ms (-1 =
    /// forever); `FI_EAGAIN` on time-out.
    pub fn sread(&self, timeout: i32) -> Result<Event> {
        self.sread_flags(timeout, 0)
    }

    /// `fi_eq_sread` with `FI_PEEK`: as [`sread`](Self::sread), the event left queued.
    pub fn sread_peek(&self, timeout: i32) -> Result<Event> {
        self.sread_flags(timeout, OpFlags::PEEK.bits())
    }

    fn sread_flags(&self, timeout: i32, flags: u64) -> Result<Event> {
        // SAFETY: as `read_flags`.
        self.read_with(|e, b, l| unsafe {
            call_slot!(self.t(), EqTable.sread(self.obj, e, b, l, timeout, flags))
        })
    }

    /// `fi_eq_readerr`: the next error event.
    pub fn readerr(&self) -> Result<EqErrorEntry> {
        let mut data = vec![0u8; 256];
        let mut e = EqErrEntry {
            err_data: data.as_mut_ptr() as *mut c_void,
            err_data_size: data.len(),
            ..Default::default()
        };
        // SAFETY: `e` valid, its err_data buffer valid for err_data_size bytes.
        let rc = unsafe { call_slot!(self.t(), EqTable.readerr(self.obj, &mut e, 0)) };
        if rc < 0 {
            return Err(Error::from_status(rc));
        }
        // SAFETY: `err_data` is ours, or the provider's buffer, valid for err_data_size
        // bytes until the next read of this EQ.
        let err_data = unsafe { err_data_read(data, e.err_data, e.err_data_size) };
        Ok(EqErrorEntry {
            fid: e.fid,
            context: e.context,
            data: e.data,
            err: Errno(e.err),
            prov_errno: e.prov_errno,
            err_data,
        })
    }

    /// `fi_eq_write`: queue an application event (`info` is not carried).
    pub fn write(&self, event: &Event) -> Result<()> {
        let mut buf = [0u64; READ_WORDS];
        let p = buf.as_mut_ptr() as *mut u8;
        let len = match event.event {
            EqEvent::ConnReq | EqEvent::Connected | EqEvent::Shutdown => {
                let hdr = std::mem::size_of::<EqCmEntry>();
                if hdr + event.cm_data.len() > READ_WORDS * 8 {
                    return Err(Error::new(
                        Errno::EINVAL,
                        "eq write: connection data too long",
                    ));
                }
                // SAFETY: `buf` is aligned and large enough (checked).
                unsafe {
                    (p as *mut EqCmEntry).write(EqCmEntry {
                        fid: event.fid,
                        info: std::ptr::null_mut(),
                    });
                    std::ptr::copy_nonoverlapping(
                        event.cm_data.as_ptr(),
                        p.add(hdr),
                        event.cm_data.len(),
                    );
                }
                hdr + event.cm_data.len()
            }
            _ => {
                // SAFETY: `buf` is aligned and large enough.
                unsafe {
                    (p as *mut EqEntry).write(EqEntry {
                        fid: event.fid,
                        context: event.context,
                        data: event.data,
                    })
                };
                std::mem::size_of::<EqEntry>()
            }
        };
        let ev = event.event.to_raw();
        // SAFETY: `buf` valid for `len` bytes.
        let rc = unsafe {
            call_slot!(
                self.t(),
                EqTable.write(self.obj, ev, p as *const c_void, len, 0)
            )
        };
        if rc < 0 {
            Err(Error::from_status(rc))
        } else {
            Ok(())
        }
    }

    /// `fi_eq_strerror`.
    pub fn strerror(&self, prov_errno: i32) -> String {
        self.strerror_with_data(prov_errno, &[])
    }
}
