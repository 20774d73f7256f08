//! The shared region of one endpoint: creation (`shm_open` + `ftruncate` + `mmap`),
//! mapping a peer's region with validation, stale-region reclamation, and typed access
//! to the header, the ring control blocks, the slots, the acknowledgement entries and
//! the bounce chunks.
//!
//! # Layout (all offsets from the start of the mapping; `#[repr(C)]`-style, little
//! endian, offsets never pointers)
//!
//! ```text
//! 0      header (HEADER_SIZE = 256)
//!        +0 magic u64  +8 version u32  +12 header size u32  +16 owner pid u32
//!        +20 rings u32 +24 owner start time u64  +32 total size u64
//!        +40 slots/ring u32  +44 chunks/ring u32  +48 chunk size u32
//!        +52 ready u32 (atomic; 1 once the header is complete)  +56 closed u32 (atomic)
//!        +64 claims generation u64 (atomic, own cache line)
//!        +128 the owner's authorization tag u64 (0: no key; see `ofi_kit::auth`)
//! 256    ring 0, ring 1, … each `ring_stride` bytes:
//!        +0   control line: claim u64 (atomic: 0 free, else pid<<32|token),
//!             state u32 (atomic: 0 free, 1 attaching, 2 ready, 3 closed by sender),
//!             cma u32 (atomic: 0 unknown, 1 usable, 2 refused), sender pid u32,
//!             name length u32, probe address u64, probe value u64,
//!             +40 the sender's authorization tag u64,
//!             +48 the digest u64 of the name the sender addressed ([`name_digest`];
//!             0: unknown): a shared receive context reports by it
//!        +64  sender's name (up to NAME_MAX bytes)
//!        +128 head u64 (sender, informational)          — own cache line
//!        +192 tail u64 (receiver: released positions)   — own cache line
//!        +256 ack tail u64 (sender: acks consumed)      — own cache line
//!        +320 chunk states, one u32 per chunk (atomic: 0 free, 1 full)
//!        +384 slots: `slots` × SLOT_SIZE (sequence word first, see [`crate::ring`])
//!        then acks: `slots` × ACK_SIZE (sequence word, message id, status)
//!        then bounce chunks: `chunks` × chunk size
//! ```
//!
//! # Invariants
//!
//! - The owner writes the header once, before setting `ready`; afterwards only the
//!   atomic words change. A peer copies the geometry out of the header once, checks it
//!   ([`Geometry::validate`]) against the size of the file it mapped, and from then on
//!   computes every offset from its own copy — so every offset it uses lies inside its
//!   mapping, whatever the owner writes later.
//! - Every length or index read from a slot, an ack or a name is checked by the caller
//!   against the geometry before it is used (see `ep.rs`). The typed accessors need no
//!   check at run time: header and control-block offsets are constants checked when
//!   they compile, and [`Ring`] reduces every slot, ack and chunk index modulo its
//!   count, so its offsets lie inside the validated geometry. [`Mapping::u64_at`] and
//!   [`Mapping::u32_at`] check any other offset and return `None` outside the mapping;
//!   the unchecked forms are `unsafe fn`.
//! - Shared bytes are never borrowed as `&[u8]`/`&T`: a peer may write them at any
//!   moment. Words are atomics; payloads are copied through raw pointers.
//! - Authorization keys: a peer's region is mapped for sending only when its header
//!   carries the sender's tag ([`Region::open_peer_keyed`]: `FI_EACCES` otherwise), and
//!   the receiver attaches a ring only when the sender's identity carries its own tag
//!   ([`Ring::auth`]). Tags, never keys, are in shared memory.
//! - A region's name is unlinked when its owner closes it; a region whose owner is
//!   dead is unlinked by the next process that opens a region ([`reclaim_stale`]); a
//!   region whose owner is alive is never touched.
//!
//! # What may panic
//!
//! Nothing: every OS failure is an `Error`.

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use ofi_core::{Errno, Error, Result};
use ofi_kit::auth::AuthTag;

use crate::ring::RingWords;
use crate::NAME;

/// `"OFIRSHM1"` as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"OFIRSHM1");
/// Layout version.
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_SIZE: usize = 256;
/// Bytes of a slot.
pub const SLOT_SIZE: usize = 256;
/// Bytes of a slot's header (sequence word, kind, flags, length, tag, data).
pub const SLOT_HDR: usize = 32;
/// Largest message carried inline in one slot.
pub const INLINE_MAX: usize = SLOT_SIZE - SLOT_HDR;
/// Bytes of an acknowledgement entry.
pub const ACK_SIZE: usize = 32;
/// Longest region name, in bytes.
pub const NAME_MAX: usize = 63;
/// Bytes of a ring's control block (before the slots).
pub const RING_CTL: usize = 384;
/// Most chunks per ring.
pub const MAX_CHUNKS: usize = 16;
/// Prefix of the names this provider generates (the stale-region scan looks only at
/// these).
pub const NAME_PREFIX: &str = "ofi-shm-";

const LINE: usize = 64;

/// The geometry of a region: how many rings, slots and chunks of what size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Rings (peers that can send to the owner at once).
    pub rings: usize,
    /// Slots per ring (a power of two).
    pub slots: usize,
    /// Bounce chunks per ring.
    pub chunks: usize,
    /// Bytes per bounce chunk (a multiple of 64).
    pub chunk_size: usize,
}

impl Geometry {
    /// Bytes of one ring.
    pub fn ring_stride(&self) -> usize {
        RING_CTL + self.slots * (SLOT_SIZE + ACK_SIZE) + self.chunks * self.chunk_size
    }

    /// Bytes of the whole region.
    pub fn total(&self) -> usize {
        HEADER_SIZE + self.rings * self.ring_stride()
    }

    /// Check the geometry's own limits and that the region fits in `len` bytes.
    ///
    /// # Errors
    /// `FI_EPROTO` naming the bad field.
    pub fn validate(&self, len: usize) -> Result<()> {
        let bad = |what: String| Err(Error::new(Errno::EPROTO, format!("{NAME} region: {what}")));
        if self.rings == 0 || self.rings > 4096 {
            return bad(format!("ring count {} outside 1..=4096", self.rings));
        }
        if !self.slots.is_power_of_two() || self.slots < 2 || self.slots > 4096 {
            return bad(format!(
                "slot count {} is not a power of two in 2..=4096",
                self.slots
            ));
        }
        if self.chunks == 0 || self.chunks > MAX_CHUNKS {
            return bad(format!(
                "chunk count {} outside 1..={MAX_CHUNKS}",
                self.chunks
            ));
        }
        if self.chunk_size == 0
            || !self.chunk_size.is_multiple_of(LINE)
            || self.chunk_size > 4 << 20
        {
            return bad(format!(
                "chunk size {} is not a multiple of 64 up to 4 MiB",
                self.chunk_size
            ));
        }
        // The limits above keep this far from overflowing usize.
        if self.total() > len {
            return bad(format!(
                "geometry needs {} bytes, the mapping has {len}",
                self.total()
            ));
        }
        Ok(())
    }
}

/// The atomic words a mapping shares with its peers ([`Mapping::u64_at`] and kin):
/// each has the layout of its integer and an alignment equal to its size, so one at an
/// offset that is a multiple of its size in the page-aligned mapping is aligned.
trait Word {}
impl Word for AtomicU64 {}
impl Word for AtomicU32 {}

/// A shared mapping (unmapped on drop).
///
/// Invariant: `ptr` is the page-aligned start of a live shared mapping of `len >=
/// HEADER_SIZE` bytes. Its bytes may change at any moment (the peer maps them too), so
/// they are never lent out as `&[u8]`: words are read and written as atomics, byte
/// ranges copied through raw pointers ([`Mapping::read_bytes`], [`Mapping::write_bytes`]).
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all access to it goes through atomics or
// raw copies whose synchronisation the ring protocol provides.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; nothing borrows the
        // mapping once its owner is dropped.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

fn os_err(what: &str) -> Error {
    let e = std::io::Error::last_os_error();
    let code = match e.raw_os_error() {
        Some(libc::ENOENT) => Errno::ENOENT,
        Some(libc::EEXIST) => Errno::EADDRINUSE,
        Some(libc::EACCES) | Some(libc::EPERM) => Errno::EACCES,
        Some(libc::ENOMEM) | Some(libc::ENOSPC) => Errno::ENOMEM,
        Some(libc::EMFILE) | Some(libc::ENFILE) => Errno::EMFILE,
        _ => Errno::EIO,
    };
    Error::new(code, format!("{NAME}: {what}: {e}"))
}

impl Mapping {
    /// Create the shared-memory file `name` (exclusively, mode 0600) of `len` bytes
    /// and map it; it is unlinked again if mapping fails. Used for files other than
    /// regions (a shared AV's table).
    ///
    /// # Errors
    /// `FI_EINVAL` for a bad name; `FI_EADDRINUSE` when the name exists; OS failures.
    pub fn create_file(name: &str, len: usize) -> Result<Mapping> {
        check_name(name)?;
        let path = shm_path(name)?;
        // SAFETY: `path` is a NUL-terminated string.
        let fd = unsafe {
            libc::shm_open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(os_err("shm_open (create)"));
        }
        let res = (|| {
            // SAFETY: `fd` is an open shm fd.
            if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
                return Err(os_err("ftruncate"));
            }
            Mapping::map(fd, len)
        })();
        // SAFETY: `fd` is ours; the mapping (if any) keeps the memory.
        unsafe { libc::close(fd) };
        if res.is_err() {
            unlink(name);
        }
        res
    }

    /// Map the whole existing shared-memory file `name` (see [`Mapping::create_file`]).
    ///
    /// # Errors
    /// `FI_EINVAL` for a bad name; `FI_ENOENT` when there is none; `FI_EPROTO` when it
    /// is shorter than a header; OS failures.
    pub fn open_file(name: &str) -> Result<Mapping> {
        check_name(name)?;
        let path = shm_path(name)?;
        // SAFETY: `path` is a NUL-terminated string.
        let fd = unsafe { libc::shm_open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
        if fd < 0 {
            return Err(os_err("shm_open"));
        }
        let res = fd_size(fd).and_then(|len| Mapping::map(fd, len));
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd) };
        res
    }

    /// Map `len` bytes of `fd` shared, read-write. A mapping is never shorter than a
    /// header (`FI_EPROTO` otherwise): the header accessors rely on it.
    fn map(fd: libc::c_int, len: usize) -> Result<Mapping> {
        if len < HEADER_SIZE {
            return Err(Error::new(
                Errno::EPROTO,
                format!("{NAME}: a region of {len} bytes is smaller than a header"),
            ));
        }
        // SAFETY: a fresh shared mapping of an open fd; the kernel checks the arguments.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap"));
        }
        Ok(Mapping {
            ptr: NonNull::new(p.cast()).ok_or_else(|| Error::new(Errno::EIO, "mmap gave null"))?,
            len,
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never, for a mapped region).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The base address.
    pub fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Ask the CPU to start fetching the cache line at `off` (a hint: it changes no
    /// memory and never faults; an offset outside the mapping is ignored).
    #[inline]
    pub fn prefetch(&self, off: usize) {
        #[cfg(target_arch = "x86_64")]
        if off < self.len {
            // SAFETY: `_mm_prefetch` needs SSE, part of the x86_64 baseline; a prefetch
            // reads nothing architecturally and cannot fault, and the address lies
            // inside the mapping anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    self.ptr.as_ptr().add(off).cast::<i8>(),
                )
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = off;
    }

    /// The word of type `W` at `off`, or `None` if `off` is not a multiple of its size
    /// or the word does not lie inside the mapping.
    #[inline]
    fn word_at<W: Word>(&self, off: usize) -> Option<&W> {
        let size = std::mem::size_of::<W>();
        let in_bounds = off.checked_add(size).is_some_and(|end| end <= self.len);
        if off.is_multiple_of(size) && in_bounds {
            // SAFETY: aligned and in bounds, checked just above.
            Some(unsafe { self.word_at_unchecked(off) })
        } else {
            None
        }
    }

    /// The word of type `W` at `off`, without a check.
    ///
    /// # Safety
    /// `off` is a multiple of the word's size and `off + size <= self.len()`.
    #[inline]
    unsafe fn word_at_unchecked<W: Word>(&self, off: usize) -> &W {
        let size = std::mem::size_of::<W>();
        debug_assert!(off.is_multiple_of(size) && off + size <= self.len);
        // SAFETY: `off` is a multiple of the size and in bounds (the caller's contract)
        // and the base is page-aligned, so the word is aligned (a `Word`'s alignment is
        // its size); the mapping outlives the returned reference; a `Word` is an atomic
        // integer with the layout of that integer, and every access to a shared word is
        // atomic, so a peer writing it at the same time is no data race.
        unsafe { &*self.ptr.as_ptr().add(off).cast::<W>() }
    }

    /// The atomic u64 at `off`, or `None` if `off` is not 8-aligned or the word does
    /// not lie inside the mapping.
    #[inline]
    pub fn u64_at(&self, off: usize) -> Option<&AtomicU64> {
        self.word_at(off)
    }

    /// The atomic u32 at `off`, or `None` if `off` is not 4-aligned or the word does
    /// not lie inside the mapping.
    #[inline]
    pub fn u32_at(&self, off: usize) -> Option<&AtomicU32> {
        self.word_at(off)
    }

    /// The atomic u64 at `off`, without a check.
    ///
    /// # Safety
    /// `off` is a multiple of 8 and `off + 8 <= self.len()`.
    #[inline]
    pub unsafe fn u64_at_unchecked(&self, off: usize) -> &AtomicU64 {
        // SAFETY: the caller's contract is `word_at_unchecked`'s.
        unsafe { self.word_at_unchecked(off) }
    }

    /// The atomic u32 at `off`, without a check.
    ///
    /// # Safety
    /// `off` is a multiple of 4 and `off + 4 <= self.len()`.
    #[inline]
    pub unsafe fn u32_at_unchecked(&self, off: usize) -> &AtomicU32 {
        // SAFETY: the caller's contract is `word_at_unchecked`'s.
        unsafe { self.word_at_unchecked(off) }
    }

    /// The header's word of type `W` at `OFF` (aligned and inside the header: checked
    /// when this compiles). Every mapping holds at least a header ([`Mapping::map`]).
    #[inline]
    fn header_word<W: Word, const OFF: usize>(&self) -> &W {
        const {
            let size = std::mem::size_of::<W>();
            assert!(OFF.is_multiple_of(size) && OFF + size <= HEADER_SIZE)
        };
        // SAFETY: aligned and inside the header (asserted at compile time), and every
        // mapping is at least HEADER_SIZE bytes long.
        unsafe { self.word_at_unchecked(OFF) }
    }

    /// The header's u64 at `OFF` (see [`Mapping::header_word`]).
    #[inline]
    fn header_u64<const OFF: usize>(&self) -> &AtomicU64 {
        self.header_word::<AtomicU64, OFF>()
    }

    /// The header's u32 at `OFF` (see [`Mapping::header_word`]).
    #[inline]
    fn header_u32<const OFF: usize>(&self) -> &AtomicU32 {
        self.header_word::<AtomicU32, OFF>()
    }

    /// Copy `dst.len()` bytes from offset `off`, if they lie inside the mapping.
    #[inline]
    pub fn read_bytes(&self, off: usize, dst: &mut [u8]) -> bool {
        match off.checked_add(dst.len()) {
            Some(end) if end <= self.len => {
                // SAFETY: the range is inside the mapping; a concurrent write by a peer
                // can only change the bytes copied, which the caller validates.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.ptr.as_ptr().add(off),
                        dst.as_mut_ptr(),
                        dst.len(),
                    )
                };
                true
            }
            _ => false,
        }
    }

    /// Copy `src` to offset `off`, if it fits inside the mapping.
    #[inline]
    pub fn write_bytes(&self, off: usize, src: &[u8]) -> bool {
        match off.checked_add(src.len()) {
            Some(end) if end <= self.len => {
                // SAFETY: the range is inside the mapping.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src.as_ptr(),
                        self.ptr.as_ptr().add(off),
                        src.len(),
                    )
                };
                true
            }
            _ => false,
        }
    }
}

// Header field offsets.
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_HDRSIZE: usize = 12;
const H_PID: usize = 16;
const H_RINGS: usize = 20;
const H_START: usize = 24;
const H_TOTAL: usize = 32;
const H_SLOTS: usize = 40;
const H_CHUNKS: usize = 44;
const H_CHUNK_SIZE: usize = 48;
const H_READY: usize = 52;
const H_CLOSED: usize = 56;
const H_CLAIMS_GEN: usize = 64;
const H_AUTH: usize = 128;

// Ring control offsets.
const R_CLAIM: usize = 0;
const R_STATE: usize = 8;
const R_CMA: usize = 12;
const R_PID: usize = 16;
const R_NAME_LEN: usize = 20;
const R_PROBE_ADDR: usize = 24;
const R_PROBE_VAL: usize = 32;
const R_AUTH: usize = 40;
const R_DEST: usize = 48;
const R_NAME: usize = 64;
const R_HEAD: usize = 128;
const R_TAIL: usize = 192;
const R_ACK_TAIL: usize = 256;
const R_CHUNK_STATE: usize = 320;

/// Ring states (`state` word).
pub mod state {
    /// Nobody sends on the ring.
    pub const FREE: u32 = 0;
    /// A sender claimed it and is filling in its identity.
    pub const ATTACHING: u32 = 1;
    /// The sender's identity is complete; messages may follow.
    pub const READY: u32 = 2;
    /// The sender closed; the receiver releases the ring once it is drained.
    pub const CLOSED: u32 = 3;
}

/// CMA states (`cma` word).
pub mod cma_state {
    /// The receiver has not probed yet.
    pub const UNKNOWN: u32 = 0;
    /// The receiver read the sender's memory.
    pub const OK: u32 = 1;
    /// The receiver could not (or was told not to).
    pub const REFUSED: u32 = 2;
}

/// A mapped region, the owner's or a peer's, with its validated geometry.
///
/// Invariant: `geo` passed [`Geometry::validate`] against `map.len()`, so
/// `geo.total() <= map.len()` and every offset [`Ring`] computes lies inside the map.
#[derive(Debug)]
pub struct Region {
    map: Mapping,
    geo: Geometry,
    /// `geo.ring_stride()`, computed once (every ring access needs it).
    stride: usize,
    name: String,
    owner_pid: i32,
    owner_start: u64,
    /// The owner's authorization tag (read once from the header of a peer's region).
    auth: AuthTag,
}

/// One ring of a region: a view that computes offsets from the region's geometry.
///
/// Invariant (what makes its word accessors sound without a check): `base` is
/// `HEADER_SIZE + r * stride` for some `r < rings` (only [`Region::ring`] builds one),
/// so `base + stride <= geo.total() <= map.len()`; every offset below is `base` plus
/// an in-ring offset below `stride` (indices are reduced modulo the counts), and is
/// aligned for its word (the base is page-aligned, `HEADER_SIZE` and `stride` are
/// multiples of 32, every field offset a multiple of its width).
#[derive(Clone, Copy)]
pub struct Ring<'a> {
    region: &'a Region,
    base: usize,
}

impl RingWords for Ring<'_> {
    #[inline]
    fn seq(&self, i: usize) -> &AtomicU64 {
        self.slot_word(i, 0)
    }
    #[inline]
    fn tail(&self) -> &AtomicU64 {
        self.ctl_u64::<R_TAIL>()
    }
}

/// The acknowledgement ring of a ring (the receiver produces, the sender consumes).
#[derive(Clone, Copy)]
pub struct AckRing<'a>(pub Ring<'a>);

impl RingWords for AckRing<'_> {
    #[inline]
    fn seq(&self, i: usize) -> &AtomicU64 {
        // SAFETY: `ack_off` lies inside the ring and is 8-aligned (the `Ring`
        // invariant).
        unsafe { self.0.region.map.u64_at_unchecked(self.0.ack_off(i)) }
    }
    #[inline]
    fn tail(&self) -> &AtomicU64 {
        self.0.ctl_u64::<R_ACK_TAIL>()
    }
}

/// The accessors of a ring's named control words, one a line: `name: Type =
/// reader::<OFFSET>;` writes `pub fn name(&self) -> &'a Type`, which returns the word
/// that `Ring::reader` finds at `OFFSET` of the control block.
macro_rules! ring_ctl_words {
    ($($(#[$doc:meta])* $name:ident: $ty:ty = $reader:ident::<$rel:ident>;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self) -> &'a $ty {
                self.$reader::<$rel>()
            }
        )*
    };
}

impl<'a> Ring<'a> {
    /// The u64 at `REL` in the ring's control block (aligned and inside the block:
    /// checked when this compiles).
    #[inline]
    fn ctl_u64<const REL: usize>(&self) -> &'a AtomicU64 {
        const { assert!(REL.is_multiple_of(8) && REL + 8 <= RING_CTL) };
        // SAFETY: the control block lies inside the ring (the `Ring` invariant) and
        // `REL` is aligned and inside it (asserted at compile time).
        unsafe { self.region.map.u64_at_unchecked(self.base + REL) }
    }
    /// The u32 at `REL` in the ring's control block (see [`Ring::ctl_u64`]).
    #[inline]
    fn ctl_u32<const REL: usize>(&self) -> &'a AtomicU32 {
        const { assert!(REL.is_multiple_of(4) && REL + 4 <= RING_CTL) };
        // SAFETY: as in `ctl_u64`.
        unsafe { self.region.map.u32_at_unchecked(self.base + REL) }
    }
    /// Word `w` of slot `i` (both reduced modulo their counts: `SLOT_SIZE / 8` words,
    /// `slots` slots); word 0 is the sequence word.
    #[inline]
    pub fn slot_word(&self, i: usize, w: usize) -> &'a AtomicU64 {
        let off = self.slot_off(i) + 8 * (w % (SLOT_SIZE / 8));
        // SAFETY: the slot lies inside the ring (the `Ring` invariant) and the word
        // inside the slot; both offsets are multiples of 8.
        unsafe { self.region.map.u64_at_unchecked(off) }
    }
    /// The message id of ack entry `i`.
    #[inline]
    pub fn ack_id(&self, i: usize) -> &'a AtomicU64 {
        // SAFETY: the entry lies inside the ring (the `Ring` invariant); its id word
        // is at +8 of ACK_SIZE = 32 bytes, 8-aligned.
        unsafe { self.region.map.u64_at_unchecked(self.ack_off(i) + 8) }
    }
    /// The status of ack entry `i` (an `FI_*` code as u32; 0 for success).
    #[inline]
    pub fn ack_status(&self, i: usize) -> &'a AtomicU32 {
        // SAFETY: as in `ack_id`; the status word is at +16, 4-aligned.
        unsafe { self.region.map.u32_at_unchecked(self.ack_off(i) + 16) }
    }
    /// Offset of slot `i`.
    #[inline]
    pub fn slot_off(&self, i: usize) -> usize {
        self.base + RING_CTL + (i & (self.region.geo.slots - 1)) * SLOT_SIZE
    }
    /// Offset of ack entry `i`.
    #[inline]
    pub fn ack_off(&self, i: usize) -> usize {
        let g = &self.region.geo;
        self.base + RING_CTL + g.slots * SLOT_SIZE + (i & (g.slots - 1)) * ACK_SIZE
    }
    /// Offset of chunk `c` (`c < chunks`, checked by the caller).
    #[inline]
    pub fn chunk_off(&self, c: usize) -> usize {
        let g = &self.region.geo;
        self.base + RING_CTL + g.slots * (SLOT_SIZE + ACK_SIZE) + (c % g.chunks) * g.chunk_size
    }
    /// The region.
    pub fn region(&self) -> &'a Region {
        self.region
    }
    /// The mapping.
    pub fn map(&self) -> &'a Mapping {
        &self.region.map
    }
    ring_ctl_words! {
        /// The claim word.
        claim: AtomicU64 = ctl_u64::<R_CLAIM>;
        /// The state word.
        state: AtomicU32 = ctl_u32::<R_STATE>;
        /// The CMA word.
        cma: AtomicU32 = ctl_u32::<R_CMA>;
        /// The sender's informational head.
        head_word: AtomicU64 = ctl_u64::<R_HEAD>;
        /// The receiver's tail.
        tail_word: AtomicU64 = ctl_u64::<R_TAIL>;
        /// The sender's ack tail.
        ack_tail_word: AtomicU64 = ctl_u64::<R_ACK_TAIL>;
    }
    /// The state of chunk `c` (`c < chunks`).
    pub fn chunk_state(&self, c: usize) -> &'a AtomicU32 {
        const { assert!(R_CHUNK_STATE + 4 * MAX_CHUNKS <= RING_CTL) };
        // SAFETY: inside the control block (asserted at compile time, `c` reduced
        // modulo MAX_CHUNKS), which lies inside the ring; 4-aligned.
        unsafe {
            self.region
                .map
                .u32_at_unchecked(self.base + R_CHUNK_STATE + 4 * (c % MAX_CHUNKS))
        }
    }
    /// Give chunk `c` back to its sender (`c < chunks`): the receiver is done with its
    /// bytes (copied, or refused).
    #[inline]
    pub fn release_chunk(&self, c: usize) {
        self.chunk_state(c).store(0, Ordering::Release);
    }
    /// The acknowledgement ring.
    pub fn acks(&self) -> AckRing<'a> {
        AckRing(*self)
    }

    /// Write the sender's identity (after a successful claim).
    pub fn write_identity(&self, pid: i32, name: &str, probe_addr: u64, probe_val: u64) {
        let m = &self.region.map;
        self.ctl_u32::<R_PID>().store(pid as u32, Ordering::Relaxed);
        let n = name.len().min(NAME_MAX);
        m.write_bytes(self.base + R_NAME, &name.as_bytes()[..n]);
        self.ctl_u32::<R_NAME_LEN>()
            .store(n as u32, Ordering::Relaxed);
        self.ctl_u64::<R_PROBE_ADDR>()
            .store(probe_addr, Ordering::Relaxed);
        self.ctl_u64::<R_PROBE_VAL>()
            .store(probe_val, Ordering::Relaxed);
    }

    /// Read the sender's identity: pid, name, probe address and value. `None` if the
    /// name length is out of range or the name is not UTF-8 (a corrupt ring).
    pub fn read_identity(&self) -> Option<(i32, String, u64, u64)> {
        let m = &self.region.map;
        let pid = self.ctl_u32::<R_PID>().load(Ordering::Relaxed) as i32;
        let n = self.ctl_u32::<R_NAME_LEN>().load(Ordering::Relaxed) as usize;
        if n == 0 || n > NAME_MAX || pid <= 0 {
            return None;
        }
        let mut buf = vec![0u8; n];
        if !m.read_bytes(self.base + R_NAME, &mut buf) {
            return None;
        }
        let name = String::from_utf8(buf).ok()?;
        let pa = self.ctl_u64::<R_PROBE_ADDR>().load(Ordering::Relaxed);
        let pv = self.ctl_u64::<R_PROBE_VAL>().load(Ordering::Relaxed);
        Some((pid, name, pa, pv))
    }

    /// Write the sender's authorization tag (with its identity, before `READY`).
    pub fn write_auth(&self, tag: AuthTag) {
        self.ctl_u64::<R_AUTH>()
            .store(tag.wire(), Ordering::Relaxed);
    }

    /// The sender's authorization tag (read after seeing `READY`).
    pub fn auth(&self) -> AuthTag {
        AuthTag::from_wire(self.ctl_u64::<R_AUTH>().load(Ordering::Relaxed))
    }

    /// Write the digest of the name the sender opened this region by (with its
    /// identity, before `READY`): under a shared receive context several names lead
    /// to one region, and the digest says which endpoint the sender addressed.
    pub fn write_dest(&self, digest: u64) {
        self.ctl_u64::<R_DEST>().store(digest, Ordering::Relaxed);
    }

    /// The digest [`Ring::write_dest`] wrote (read after seeing `READY`; 0: none).
    pub fn dest(&self) -> u64 {
        self.ctl_u64::<R_DEST>().load(Ordering::Relaxed)
    }
}

/// The digest of region name `name` a sender leaves in its ring ([`Ring::write_dest`]):
/// the FNV-1a digest authorization tags use, never 0. Two names of one shared receive
/// context could share a digest only by a 64-bit collision; the context would then
/// report both endpoints' messages with the first one's bindings.
pub fn name_digest(name: &str) -> u64 {
    AuthTag::of(Some(name.as_bytes())).wire()
}

impl Region {
    /// The geometry.
    pub fn geometry(&self) -> Geometry {
        self.geo
    }
    /// The region's name (without the leading `/`).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The owner's pid.
    pub fn owner_pid(&self) -> i32 {
        self.owner_pid
    }
    /// The owner's process start time (0 if unknown).
    pub fn owner_start(&self) -> u64 {
        self.owner_start
    }
    /// The mapping.
    pub fn map(&self) -> &Mapping {
        &self.map
    }
    /// Ring `r` (`r < rings`).
    #[inline]
    pub fn ring(&self, r: usize) -> Ring<'_> {
        // Callers pass indices below `rings`; the reduction keeps any other in range
        // without a division on the hot path.
        let r = if r < self.geo.rings {
            r
        } else {
            r % self.geo.rings
        };
        Ring {
            region: self,
            base: HEADER_SIZE + r * self.stride,
        }
    }
    /// The claims generation (bumped by each sender that attaches).
    pub fn claims_gen(&self) -> &AtomicU64 {
        self.map.header_u64::<H_CLAIMS_GEN>()
    }
    /// The owner's closed flag.
    pub fn closed(&self) -> &AtomicU32 {
        self.map.header_u32::<H_CLOSED>()
    }

    /// Create the region `name` (owned by this process), reclaiming a stale file of
    /// the same name left by a dead process. A live owner's region is never touched.
    ///
    /// # Errors
    /// `FI_EINVAL` for a bad name; `FI_EADDRINUSE` when a live process owns the name
    /// (or the file is not a region of this provider); OS failures.
    pub fn create(name: &str, geo: Geometry) -> Result<Region> {
        Region::create_keyed(name, geo, AuthTag::NONE)
    }

    /// [`Region::create`] for an endpoint whose authorization tag is `auth`: only
    /// senders with the same tag may use it.
    ///
    /// # Errors
    /// As [`Region::create`].
    pub fn create_keyed(name: &str, geo: Geometry, auth: AuthTag) -> Result<Region> {
        check_name(name)?;
        geo.validate(usize::MAX)?;
        let path = shm_path(name)?;
        let fd = loop {
            // SAFETY: `path` is a NUL-terminated string.
            let fd = unsafe {
                libc::shm_open(
                    path.as_ptr(),
                    libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                    0o600,
                )
            };
            if fd >= 0 {
                break fd;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
                return Err(os_err("shm_open (create)"));
            }
            match probe_owner(name) {
                Owner::Dead => {
                    unlink(name);
                }
                Owner::Alive(pid) => {
                    return Err(Error::new(
                        Errno::EADDRINUSE,
                        format!("{NAME}: region {name:?} is in use by live process {pid}"),
                    ))
                }
                Owner::Foreign => {
                    return Err(Error::new(
                        Errno::EADDRINUSE,
                        format!("{NAME}: /dev/shm/{name} exists and is not an ofi-rs shm region"),
                    ))
                }
            }
        };
        let total = geo.total();
        let res = (|| {
            // SAFETY: `fd` is an open shm fd.
            if unsafe { libc::ftruncate(fd, total as libc::off_t) } != 0 {
                return Err(os_err("ftruncate"));
            }
            Mapping::map(fd, total)
        })();
        // SAFETY: `fd` is ours; the mapping (if any) keeps the memory.
        unsafe { libc::close(fd) };
        let map = match res {
            Ok(m) => m,
            Err(e) => {
                unlink(name);
                return Err(e);
            }
        };
        let pid = std::process::id() as i32;
        let start = process_start(pid).unwrap_or(0);
        // Pid first, so a creator that dies before `ready` is recognised as dead.
        map.header_u32::<H_PID>()
            .store(pid as u32, Ordering::Relaxed);
        map.header_u64::<H_MAGIC>().store(MAGIC, Ordering::Relaxed);
        map.header_u32::<H_VERSION>()
            .store(VERSION, Ordering::Relaxed);
        map.header_u32::<H_HDRSIZE>()
            .store(HEADER_SIZE as u32, Ordering::Relaxed);
        map.header_u32::<H_RINGS>()
            .store(geo.rings as u32, Ordering::Relaxed);
        map.header_u64::<H_START>().store(start, Ordering::Relaxed);
        map.header_u64::<H_TOTAL>()
            .store(total as u64, Ordering::Relaxed);
        map.header_u32::<H_SLOTS>()
            .store(geo.slots as u32, Ordering::Relaxed);
        map.header_u32::<H_CHUNKS>()
            .store(geo.chunks as u32, Ordering::Relaxed);
        map.header_u32::<H_CHUNK_SIZE>()
            .store(geo.chunk_size as u32, Ordering::Relaxed);
        map.header_u64::<H_AUTH>()
            .store(auth.wire(), Ordering::Relaxed);
        map.header_u32::<H_READY>().store(1, Ordering::Release);
        Ok(Region::assembled(name, map, geo, pid, start, auth))
    }

    /// [`Region::open_peer`] for a sender whose authorization tag is `auth`.
    ///
    /// # Errors
    /// As [`Region::open_peer`]; `FI_EACCES` when the region's owner has another key
    /// (the keys themselves are never in the message).
    pub fn open_peer_keyed(name: &str, auth: AuthTag) -> Result<Region> {
        let region = Region::open_peer(name)?;
        if region.auth != auth {
            return Err(Error::new(
                Errno::EACCES,
                format!(
                    "{NAME}: region {name:?} belongs to an endpoint with another authorization key"
                ),
            ));
        }
        Ok(region)
    }

    /// The owner's authorization tag.
    pub fn auth(&self) -> AuthTag {
        self.auth
    }

    /// Map the region `name` of a peer, validating its header against the file size.
    ///
    /// # Errors
    /// `FI_ECONNREFUSED` when there is no such region, it is not ready, its owner
    /// closed it or is dead; `FI_EPROTO` for a corrupt header; OS failures.
    pub fn open_peer(name: &str) -> Result<Region> {
        check_name(name)?;
        let path = shm_path(name)?;
        // SAFETY: `path` is a NUL-terminated string.
        let fd = unsafe { libc::shm_open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
        if fd < 0 {
            let e = os_err("shm_open");
            return Err(if e.code() == Errno::ENOENT {
                Error::new(
                    Errno::ECONNREFUSED,
                    format!("{NAME}: no region {name:?} (peer closed or never existed)"),
                )
            } else {
                e
            });
        }
        let res = (|| {
            let len = fd_size(fd)?;
            if len < HEADER_SIZE {
                return Err(Error::new(
                    Errno::EPROTO,
                    format!("{NAME}: region {name:?} is {len} bytes, smaller than a header"),
                ));
            }
            Mapping::map(fd, len)
        })();
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd) };
        let map = res?;
        Region::from_peer_mapping(name, map)
    }

    /// Validate a peer's mapping (see [`Region::open_peer`]).
    fn from_peer_mapping(name: &str, map: Mapping) -> Result<Region> {
        let proto =
            |what: String| Error::new(Errno::EPROTO, format!("{NAME}: region {name:?}: {what}"));
        if map.header_u64::<H_MAGIC>().load(Ordering::Relaxed) != MAGIC {
            return Err(proto("bad magic".into()));
        }
        if map.header_u32::<H_READY>().load(Ordering::Acquire) != 1 {
            return Err(Error::new(
                Errno::ECONNREFUSED,
                format!("{NAME}: region {name:?} is not ready"),
            ));
        }
        let v = map.header_u32::<H_VERSION>().load(Ordering::Relaxed);
        if v != VERSION {
            return Err(proto(format!(
                "layout version {v}, this provider speaks {VERSION}"
            )));
        }
        let hs = map.header_u32::<H_HDRSIZE>().load(Ordering::Relaxed) as usize;
        if hs != HEADER_SIZE {
            return Err(proto(format!("header size {hs}, expected {HEADER_SIZE}")));
        }
        let geo = Geometry {
            rings: map.header_u32::<H_RINGS>().load(Ordering::Relaxed) as usize,
            slots: map.header_u32::<H_SLOTS>().load(Ordering::Relaxed) as usize,
            chunks: map.header_u32::<H_CHUNKS>().load(Ordering::Relaxed) as usize,
            chunk_size: map.header_u32::<H_CHUNK_SIZE>().load(Ordering::Relaxed) as usize,
        };
        geo.validate(map.len())?;
        let total = map.header_u64::<H_TOTAL>().load(Ordering::Relaxed);
        if total != geo.total() as u64 {
            return Err(proto(format!(
                "total size {total} does not match its geometry ({})",
                geo.total()
            )));
        }
        let pid = map.header_u32::<H_PID>().load(Ordering::Relaxed) as i32;
        let start = map.header_u64::<H_START>().load(Ordering::Relaxed);
        if pid <= 0 {
            return Err(proto(format!("owner pid {pid}")));
        }
        if map.header_u32::<H_CLOSED>().load(Ordering::Acquire) != 0 || !pid_alive(pid, start) {
            return Err(Error::new(
                Errno::ECONNREFUSED,
                format!("{NAME}: region {name:?}: its owner (pid {pid}) closed it or is gone"),
            ));
        }
        let auth = AuthTag::from_wire(map.header_u64::<H_AUTH>().load(Ordering::Relaxed));
        Ok(Region::assembled(name, map, geo, pid, start, auth))
    }

    /// The region `name` over `map`, whose header says `geo`, owner `pid` (started at
    /// `start`) and `auth`; `geo` must have passed [`Geometry::validate`] against
    /// `map.len()` (the [`Region`] invariant).
    fn assembled(
        name: &str,
        map: Mapping,
        geo: Geometry,
        pid: i32,
        start: u64,
        auth: AuthTag,
    ) -> Region {
        Region {
            map,
            geo,
            stride: geo.ring_stride(),
            name: name.to_string(),
            owner_pid: pid,
            owner_start: start,
            auth,
        }
    }

    /// Whether the owner is alive and has not closed the region.
    pub fn owner_alive(&self) -> bool {
        self.closed().load(Ordering::Acquire) == 0 && pid_alive(self.owner_pid, self.owner_start)
    }
}

/// Whether `name` is a valid region name (1..=NAME_MAX of `[A-Za-z0-9._-]`, not `.`/`..`).
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= NAME_MAX
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            Errno::EINVAL,
            format!("{NAME}: bad region name {name:?} (1 to {NAME_MAX} of A-Z a-z 0-9 . _ -)"),
        ))
    }
}

fn shm_path(name: &str) -> Result<CString> {
    CString::new(format!("/{name}"))
        .map_err(|_| Error::new(Errno::EINVAL, format!("{NAME}: region name contains NUL")))
}

fn fd_size(fd: libc::c_int) -> Result<usize> {
    // SAFETY: zeroed stat is a valid out-buffer.
    let mut state: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open; `state` is writable.
    if unsafe { libc::fstat(fd, &mut state) } != 0 {
        return Err(os_err("fstat"));
    }
    Ok(state.st_size.max(0) as usize)
}

/// How old a region file whose owner is unknown must be before it counts as stale.
const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(10);

fn fd_age(fd: libc::c_int) -> std::time::Duration {
    // SAFETY: zeroed stat is a valid out-buffer.
    let mut state: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open; `state` is writable.
    if unsafe { libc::fstat(fd, &mut state) } != 0 {
        return std::time::Duration::ZERO;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    std::time::Duration::from_secs(now.saturating_sub(state.st_mtime).max(0) as u64)
}

/// Unlink the region name `name` (errors ignored: it may be gone already).
pub fn unlink(name: &str) {
    if let Ok(path) = shm_path(name) {
        // SAFETY: `path` is NUL-terminated.
        unsafe { libc::shm_unlink(path.as_ptr()) };
    }
}

/// The start time of process `pid` (field 22 of `/proc/<pid>/stat`), if readable.
pub fn process_start(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields follow the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether process `pid` lives (and, if `start` is not 0, is the same process: a
/// reused pid has another start time).
pub fn pid_alive(pid: i32, start: u64) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid, 0) };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    if start != 0 {
        if let Some(s) = process_start(pid) {
            return s == start;
        }
    }
    true
}

/// What a region file's header says about its owner.
#[derive(Debug, PartialEq, Eq)]
pub enum Owner {
    /// Not a region of this provider (or unreadable): never touched.
    Foreign,
    /// Its owner lives.
    Alive(i32),
    /// Its owner is gone: the file may be unlinked.
    Dead,
}

/// Look at the header of region file `name` to see whether its owner lives.
pub fn probe_owner(name: &str) -> Owner {
    let Ok(path) = shm_path(name) else {
        return Owner::Foreign;
    };
    // SAFETY: `path` is NUL-terminated.
    let fd = unsafe { libc::shm_open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC, 0) };
    if fd < 0 {
        return Owner::Foreign;
    }
    let len = fd_size(fd).unwrap_or(0);
    // A creator that died before writing its pid leaves a file whose owner is unknown:
    // it counts as dead only with our prefix and once it is old enough that no live
    // creator can still be initialising it.
    let orphan = name.starts_with(NAME_PREFIX) && fd_age(fd) > ORPHAN_AGE;
    let out = if len < HEADER_SIZE {
        if len == 0 && orphan {
            Owner::Dead
        } else {
            Owner::Foreign
        }
    } else {
        // SAFETY: read-only shared mapping of the header.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                HEADER_SIZE,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            Owner::Foreign
        } else {
            let m = Mapping {
                // SAFETY: mmap succeeded, so `p` is not null.
                ptr: unsafe { NonNull::new_unchecked(p.cast()) },
                len: HEADER_SIZE,
            };
            let magic = m.header_u64::<H_MAGIC>().load(Ordering::Relaxed);
            let pid = m.header_u32::<H_PID>().load(Ordering::Relaxed) as i32;
            let start = m.header_u64::<H_START>().load(Ordering::Relaxed);
            if pid > 0 && pid_alive(pid, start) {
                Owner::Alive(pid)
            } else if (magic == MAGIC && pid > 0) || (pid <= 0 && orphan) {
                Owner::Dead
            } else {
                Owner::Foreign
            }
        }
    };
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    out
}

/// Unlink every region with this provider's generated prefix whose owner is dead.
/// Returns the names removed.
pub fn reclaim_stale() -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return removed;
    };
    for e in dir.flatten() {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !name.starts_with(NAME_PREFIX) || check_name(&name).is_err() {
            continue;
        }
        if probe_owner(&name) == Owner::Dead {
            unlink(&name);
            removed.push(name);
        }
    }
    removed
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn small() -> Geometry {
        Geometry {
            rings: 2,
            slots: 4,
            chunks: 2,
            chunk_size: 4096,
        }
    }

    fn uniq(tag: &str) -> String {
        use std::sync::atomic::AtomicUsize;
        static N: AtomicUsize = AtomicUsize::new(0);
        format!(
            "{NAME_PREFIX}t{}-{tag}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn exists(name: &str) -> bool {
        std::path::Path::new("/dev/shm").join(name).exists()
    }

    /// A new region of the [`small`] geometry under a fresh name ([`uniq`] of `tag`).
    fn fresh(tag: &str) -> (String, Region) {
        let name = uniq(tag);
        let r = Region::create(&name, small()).unwrap();
        (name, r)
    }

    /// Unlink region `name` and check that its file is gone.
    fn unlink_gone(name: &str) {
        unlink(name);
        assert!(!exists(name));
    }

    /// A peer maps a keyed region only with the same tag (`FI_EACCES` otherwise, the
    /// key never in the message); a ring carries its sender's tag.
    #[test]
    fn keyed_regions_admit_only_their_tag() {
        let name = uniq("auth");
        let key = AuthTag::of(Some(b"job-a"));
        let r = Region::create_keyed(&name, small(), key).unwrap();
        let e = Region::open_peer_keyed(&name, AuthTag::of(Some(b"job-b"))).unwrap_err();
        assert_eq!(e.code(), Errno::EACCES);
        assert!(!e.message().contains("job-"), "{}", e.message());
        let e = Region::open_peer_keyed(&name, AuthTag::NONE).unwrap_err();
        assert_eq!(e.code(), Errno::EACCES);
        let p = Region::open_peer_keyed(&name, key).unwrap();
        assert_eq!(p.auth(), key);
        p.ring(1).write_auth(key);
        assert_eq!(r.ring(1).auth(), key);
        assert_eq!(r.ring(0).auth(), AuthTag::NONE);
        drop((p, r));
        unlink_gone(&name);
        let (plain, r) = fresh("noauth");
        assert_eq!(
            Region::open_peer_keyed(&plain, AuthTag::NONE)
                .unwrap()
                .auth(),
            AuthTag::NONE
        );
        assert_eq!(
            Region::open_peer_keyed(&plain, key).unwrap_err().code(),
            Errno::EACCES
        );
        drop(r);
        unlink_gone(&plain);
    }

    #[test]
    fn create_then_peer_maps_with_same_geometry() {
        let (name, r) = fresh("a");
        let p = Region::open_peer(&name).unwrap();
        assert_eq!(p.geometry(), small());
        assert_eq!(p.owner_pid(), std::process::id() as i32);
        // A word written through one mapping is seen through the other.
        r.ring(1).tail_word().store(77, Ordering::Release);
        assert_eq!(p.ring(1).tail_word().load(Ordering::Acquire), 77);
        unlink_gone(&name);
    }

    #[test]
    fn checked_word_access_refuses_bad_offsets() {
        let (name, r) = fresh("words");
        let m = r.map();
        let len = m.len();
        assert!(m.u64_at(len - 8).is_some());
        assert!(m.u32_at(len - 4).is_some());
        for off in [len - 4, len, len + 8, usize::MAX - 7, usize::MAX] {
            assert!(m.u64_at(off).is_none(), "u64 at {off}");
        }
        for off in [len, len + 4, usize::MAX - 3] {
            assert!(m.u32_at(off).is_none(), "u32 at {off}");
        }
        // Misaligned words are refused too.
        assert!(m.u64_at(4).is_none());
        assert!(m.u32_at(2).is_none());
        // Byte copies outside the mapping are refused, not performed.
        let mut buf = [0u8; 16];
        assert!(!m.read_bytes(len - 8, &mut buf));
        assert!(!m.read_bytes(usize::MAX, &mut buf));
        assert!(!m.write_bytes(len - 8, &buf));
        assert!(m.read_bytes(len - 16, &mut buf));
        unlink(&name);
    }

    #[test]
    fn ring_indices_wrap_inside_the_ring() {
        let (name, r) = fresh("wrap");
        let geo = small();
        // Out-of-range ring, slot, word and ack indices reach the same words as their
        // reductions: never a word outside the ring.
        let ring = r.ring(geo.rings + 1);
        assert!(std::ptr::eq(ring.claim(), r.ring(1).claim()));
        let last = ring.slot_word(geo.slots + 3, SLOT_SIZE / 8 + 2);
        assert!(std::ptr::eq(last, ring.slot_word(3, 2)));
        assert!(std::ptr::eq(ring.ack_id(geo.slots), ring.ack_id(0)));
        ring.ack_status(usize::MAX).store(5, Ordering::Relaxed);
        assert_eq!(ring.ack_status(geo.slots - 1).load(Ordering::Relaxed), 5);
        let end = r.map().base() as usize + r.map().len();
        assert!(ring.slot_word(usize::MAX, usize::MAX).as_ptr() as usize + 8 <= end);
        unlink(&name);
    }

    #[test]
    fn a_region_smaller_than_its_header_is_eproto() {
        let name = uniq("tiny");
        std::fs::write(
            Path::new("/dev/shm").join(&name),
            vec![0u8; HEADER_SIZE - 1],
        )
        .unwrap();
        let e = Region::open_peer(&name).unwrap_err();
        assert_eq!(e.code(), Errno::EPROTO);
        std::fs::remove_file(Path::new("/dev/shm").join(&name)).unwrap();
    }

    #[test]
    fn a_live_region_is_never_overwritten() {
        let (name, _r) = fresh("b");
        let e = Region::create(&name, small()).unwrap_err();
        assert_eq!(e.code(), Errno::EADDRINUSE);
        unlink(&name);
    }

    #[test]
    fn bad_names_are_einval() {
        for n in ["", ".", "..", "a/b", "a b", &"x".repeat(NAME_MAX + 1)] {
            assert_eq!(check_name(n).unwrap_err().code(), Errno::EINVAL, "{n:?}");
        }
        assert!(check_name("ok-name_1.2").is_ok());
    }

    #[test]
    fn missing_region_is_econnrefused() {
        let e = Region::open_peer(&uniq("missing")).unwrap_err();
        assert_eq!(e.code(), Errno::ECONNREFUSED);
    }

    #[test]
    fn corrupt_headers_are_eproto() {
        type Poke = fn(&Mapping);
        let cases: [(&str, Poke); 6] = [
            ("magic", |m| {
                m.header_u64::<H_MAGIC>().store(1, Ordering::Relaxed)
            }),
            ("rings", |m| {
                m.header_u32::<H_RINGS>().store(1 << 20, Ordering::Relaxed)
            }),
            ("slots", |m| {
                m.header_u32::<H_SLOTS>().store(3, Ordering::Relaxed)
            }),
            ("chunk size", |m| {
                m.header_u32::<H_CHUNK_SIZE>().store(100, Ordering::Relaxed)
            }),
            // More rings than the file holds.
            ("too big", |m| {
                m.header_u32::<H_RINGS>().store(3, Ordering::Relaxed)
            }),
            ("total", |m| {
                m.header_u64::<H_TOTAL>().store(12, Ordering::Relaxed)
            }),
        ];
        for (what, poke) in cases {
            let (name, r) = fresh("c");
            poke(r.map());
            let e = Region::open_peer(&name).unwrap_err();
            assert_eq!(e.code(), Errno::EPROTO, "{what}: {e}");
            unlink(&name);
        }
    }

    #[test]
    fn stale_region_of_a_dead_process_is_reclaimed() {
        let (name, r) = fresh("stale");
        // Pretend the owner is a process that has exited: a child we reaped.
        let child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id() as i32;
        let mut child = child;
        child.wait().unwrap();
        r.map()
            .header_u32::<H_PID>()
            .store(dead as u32, Ordering::Relaxed);
        r.map().header_u64::<H_START>().store(0, Ordering::Relaxed);
        drop(r);
        assert_eq!(probe_owner(&name), Owner::Dead);
        assert!(reclaim_stale().contains(&name));
        assert!(!exists(&name));
        // And creating over a stale file works too.
        let r = Region::create(&name, small()).unwrap();
        r.map()
            .header_u32::<H_PID>()
            .store(dead as u32, Ordering::Relaxed);
        r.map().header_u64::<H_START>().store(0, Ordering::Relaxed);
        drop(r);
        let r2 = Region::create(&name, small()).unwrap();
        assert_eq!(r2.owner_pid(), std::process::id() as i32);
        unlink_gone(&name);
    }

    #[test]
    fn foreign_files_are_left_alone() {
        let name = uniq("foreign");
        std::fs::write(Path::new("/dev/shm").join(&name), vec![7u8; 512]).unwrap();
        assert_eq!(probe_owner(&name), Owner::Foreign);
        assert!(!reclaim_stale().contains(&name));
        assert_eq!(
            Region::create(&name, small()).unwrap_err().code(),
            Errno::EADDRINUSE
        );
        std::fs::remove_file(Path::new("/dev/shm").join(&name)).unwrap();
    }

    use std::path::Path;
}
