//! [`KitCq`]'s own API, what providers call: opening, writing completions and
//! error entries, reservations, signal and wait-fd access.

use super::*;

crate::wait::queue_open_with_progress!(KitCq, CqAttr, "CQ", "cq_open_in_set");

impl KitCq {
    /// Open a CQ: format `Unspec` means `Context`, size 0 means [`DEFAULT_CQ_SIZE`].
    /// `FI_EINVAL` for a size over [`MAX_CQ_SIZE`] or flags other than `FI_AFFINITY`;
    /// `FI_ENOSYS` for `FI_WAIT_POLLFD`; `FI_WAIT_SET` blocks internally (attach the
    /// set: [`KitCq::with_progress_in`]).
    pub fn new(attr: &CqAttr) -> Result<KitCq> {
        let format = match attr.format {
            CqFormat::Unspec => CqFormat::Context,
            f => f,
        };
        let size = open_size("CQ", attr.size, DEFAULT_CQ_SIZE, MAX_CQ_SIZE)?;
        check_open_flags("CQ", attr.flags, OpFlags::AFFINITY)?;
        let mode = WaitMode::resolve(attr.wait_obj)?;
        Ok(KitCq {
            inner: Arc::new(CqShared {
                format,
                size,
                mode,
                threshold_cond: attr.wait_cond == ofi_core::enums::CqWaitCond::Threshold,
                state: Mutex::new(CqState {
                    ring: VecDeque::with_capacity(size),
                    errors: ErrorEntries::new(),
                    head: 0,
                    reserved: 0,
                    wake: false,
                    sleepers: 0,
                }),
                readable: AtomicBool::new(false),
                full: AtomicBool::new(false),
                cv: Condvar::new(),
                fd: mode.make_fd()?,
                links: Links::default(),
                strerror: OnceLock::new(),
            }),
        })
    }

    /// This CQ's identity, as [`super::reading_cq`] reports it (its address; stable
    /// while the CQ is open, never 0).
    pub fn id(&self) -> usize {
        self.inner.addr()
    }

    /// The bound progress engine.
    pub fn progress_engine(&self) -> Option<&Arc<ProgressEngine>> {
        self.inner.links.engine()
    }

    /// Set the text `strerror` gives for provider error codes (once).
    pub fn set_strerror(&self, f: StrerrorFn) {
        let _ = self.inner.strerror.set(f);
    }

    /// The entry format.
    pub fn format(&self) -> CqFormat {
        self.inner.format
    }

    /// The capacity.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// True if the CQ was opened with `FI_CQ_COND_THRESHOLD`.
    pub fn has_threshold_cond(&self) -> bool {
        self.inner.threshold_cond
    }

    /// Entries queued (successes and errors).
    pub fn len(&self) -> usize {
        let state = lock(&self.inner.state);
        state.ring.len() + state.errors.len()
    }

    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True if one more completion fits (entries + reservations < size) and the CQ is
    /// not overrun. With `FI_RM_ENABLED`, check before starting an operation and return
    /// `FI_EAGAIN` to the application if false.
    pub fn has_room(&self) -> bool {
        !self.inner.full.load(Ordering::Acquire)
    }

    /// How many more completions fit.
    pub fn room(&self) -> usize {
        let state = lock(&self.inner.state);
        if state.errors.overrun != Overrun::No {
            return 0;
        }
        self.inner.size.saturating_sub(state.used())
    }

    /// True once the CQ has been overrun.
    pub fn is_overrun(&self) -> bool {
        lock(&self.inner.state).errors.overrun != Overrun::No
    }

    /// Completions dropped because the CQ was full or overrun.
    pub fn dropped(&self) -> u64 {
        lock(&self.inner.state).errors.dropped
    }

    /// Reserve room for one completion (resource management): `FI_EAGAIN` if full,
    /// `FI_EOVERRUN` if overrun. Dropping the reservation unused gives the room back.
    pub fn reserve(&self) -> Result<CqReservation> {
        let mut state = lock(&self.inner.state);
        if state.errors.overrun != Overrun::No {
            return Err(Error::new(Errno::EOVERRUN, "the CQ was overrun"));
        }
        if state.used() >= self.inner.size {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        state.reserved += 1;
        self.inner.refresh_room(&state);
        Ok(CqReservation {
            cq: Some(self.inner.clone()),
        })
    }

    /// Report a successful completion with its source address (`ADDR_NOTAVAIL` if
    /// none). Fields the CQ's format lacks are ignored. `FI_EOVERRUN` if it did not fit
    /// (the completion is dropped and the CQ is overrun) or the CQ was overrun before.
    pub fn push(&self, entry: &CqTaggedEntry, src: u64) -> Result<()> {
        self.inner.push(entry, src, false)
    }

    /// [`push`](Self::push) without a source address.
    pub fn push_entry(&self, entry: &CqTaggedEntry) -> Result<()> {
        self.inner.push(entry, ADDR_NOTAVAIL, false)
    }

    /// Report, at the target, a remote RMA write of `len` bytes that carried remote CQ
    /// data `data` (`FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA`, no context, no
    /// source). `FI_EOVERRUN` as for [`push`](Self::push).
    pub fn push_remote_write(&self, len: usize, data: u64) -> Result<()> {
        let flags = OpFlags::RMA | OpFlags::REMOTE_WRITE | OpFlags::REMOTE_CQ_DATA;
        self.push_entry(&CqTaggedEntry {
            op_context: 0,
            flags: flags.bits(),
            len,
            buf: std::ptr::null_mut(),
            data,
            tag: 0,
        })
    }

    /// Report a failed operation; reads return `FI_EAVAIL` when it is next.
    /// `FI_EOVERRUN` as for [`push`](Self::push).
    pub fn push_err(&self, err: CqError) -> Result<()> {
        self.inner.push_err(err, false)
    }
}
