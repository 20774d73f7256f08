//! Cross-memory attach (`process_vm_readv`): the single-copy path for large messages,
//! and the probe word a receiver reads to learn whether CMA works towards a sender.
//!
//! The copies are `unsafe fn`: the kernel writes wherever the integer addresses say
//! (the local buffers of [`readv`]; the remote ones of [`writev`], which are this
//! process's own memory when `pid` is this process), so the caller vouches for them.
//! The memory they touch may be written by a peer at the same moment (registered
//! memory a peer targets); it is never borrowed as `&[u8]` around a copy.
//!
//! Nothing here panics; failures are the OS `errno`.

use std::sync::atomic::{AtomicU64, Ordering};

/// The word a receiver reads from this process to probe CMA; its value is published in
/// each ring this process attaches to.
static PROBE: AtomicU64 = AtomicU64::new(0);

/// Address and value of this process's probe word.
pub fn probe_word() -> (u64, u64) {
    let v = (std::process::id() as u64) << 32 | 0x5a5a_c3a5;
    PROBE.store(v, Ordering::Relaxed);
    (PROBE.as_ptr() as u64, v)
}

/// A random 64-bit value from the kernel (`getrandom(2)`), for nonces. Where the call
/// fails, a value mixed from the clock, the pid and a stack address (not secret; the
/// callers' proofs then only resist guessing, not a local observer).
pub fn random_u64() -> u64 {
    let mut v = 0u64;
    // SAFETY: the buffer is 8 writable bytes owned by this frame.
    let n = unsafe { libc::getrandom((&mut v as *mut u64).cast(), 8, 0) };
    if n == 8 {
        return v;
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let here = &v as *const u64 as u64;
    (t ^ here.rotate_left(29) ^ u64::from(std::process::id()) << 40)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Probe CMA towards `pid`: read its probe word at `addr` with a real
/// `process_vm_readv` and compare with `want`.
pub fn probe(pid: i32, addr: u64, want: u64) -> bool {
    let mut got = [0u8; 8];
    let local = [(got.as_mut_ptr() as usize, 8usize)];
    let remote = [(addr, 8u64)];
    // SAFETY: the only local buffer is `got`, 8 writable bytes of this frame that
    // nothing else references during the call; the remote range is only read.
    let copied = unsafe { readv(pid, &local, &remote) };
    matches!(copied, Ok(8)) && u64::from_ne_bytes(got) == want
}

/// Copy from `remote` buffers of process `pid` into `local` buffers (as many bytes as
/// the shorter side holds), looping over partial transfers. Returns the bytes copied
/// or the OS error number. An unmapped remote address is `EFAULT`, not a fault.
///
/// # Safety
/// Every `local` pair `(address, length)` is memory of this process valid for writes
/// of `length` bytes for the whole call (the kernel writes it as through a raw
/// pointer), and nothing reads or writes it by another path while the call runs. The
/// remote ranges are only read.
pub unsafe fn readv(
    pid: i32,
    local: &[(usize, usize)],
    remote: &[(u64, u64)],
) -> Result<usize, i32> {
    // SAFETY: the caller's contract, for the local buffers the kernel writes.
    unsafe { transfer(pid, local, remote, false) }
}

/// Copy from `local` buffers into `remote` buffers of process `pid`
/// (`process_vm_writev`), as [`readv`] otherwise.
///
/// # Safety
/// Every `local` pair is memory of this process valid for reads of its length for the
/// whole call. The remote ranges are written: when `pid` is this process (or shares
/// memory with it), each must be memory valid for writes of its length that nothing
/// reads or writes by another path while the call runs; in another process they must
/// be memory its owner exposed to such writes (a registration granting remote write,
/// or a buffer it posted for a result).
pub unsafe fn writev(
    pid: i32,
    local: &[(usize, usize)],
    remote: &[(u64, u64)],
) -> Result<usize, i32> {
    // SAFETY: the caller's contract, for the remote buffers the kernel writes.
    unsafe { transfer(pid, local, remote, true) }
}

/// The loop behind [`readv`] and [`writev`].
///
/// # Safety
/// That of [`readv`] (`write` false) or [`writev`] (`write` true).
unsafe fn transfer(
    pid: i32,
    local: &[(usize, usize)],
    remote: &[(u64, u64)],
    write: bool,
) -> Result<usize, i32> {
    let sum = |it: &mut dyn Iterator<Item = usize>| it.fold(0usize, |a, b| a.saturating_add(b));
    let want =
        sum(&mut local.iter().map(|l| l.1)).min(sum(&mut remote.iter().map(|r| r.1 as usize)));
    let mut done = 0usize;
    let mut liov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; 8];
    let mut riov = liov;
    while done < want {
        let nl = fill(&mut liov, local.iter().map(|&(a, l)| (a, l)), done);
        let nr = fill(
            &mut riov,
            remote.iter().map(|&(a, l)| (a as usize, l as usize)),
            done,
        );
        if nl == 0 || nr == 0 {
            break;
        }
        // SAFETY: the iovecs are within the caller's buffers (`fill` only skips into
        // them), which the contract of `readv`/`writev` makes valid for the direction
        // the kernel copies; an unmapped address is EFAULT, not a fault.
        let r = unsafe {
            if write {
                libc::process_vm_writev(pid, liov.as_ptr(), nl as _, riov.as_ptr(), nr as _, 0)
            } else {
                libc::process_vm_readv(pid, liov.as_ptr(), nl as _, riov.as_ptr(), nr as _, 0)
            }
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO));
        }
        if r == 0 {
            return Err(libc::EFAULT);
        }
        done += r as usize;
    }
    Ok(done)
}

/// Fill `out` with the part of `bufs` after the first `skip` bytes; returns the count.
fn fill(out: &mut [libc::iovec], bufs: impl Iterator<Item = (usize, usize)>, skip: usize) -> usize {
    let mut skip = skip;
    let mut n = 0;
    for (a, l) in bufs {
        if n == out.len() {
            break;
        }
        if skip >= l {
            skip -= l;
            continue;
        }
        out[n] = libc::iovec {
            iov_base: a.wrapping_add(skip) as *mut libc::c_void,
            iov_len: l - skip,
        };
        skip = 0;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_across_iovs() {
        let src: Vec<u8> = (0..100u8).collect();
        let mut a = [0u8; 30];
        let mut b = [0u8; 70];
        let local = [(a.as_mut_ptr() as usize, 30), (b.as_mut_ptr() as usize, 70)];
        let remote = [(src.as_ptr() as u64, 50), (src[50..].as_ptr() as u64, 50)];
        // SAFETY: `a` and `b` are writable arrays of this frame that nothing else
        // touches during the call.
        match unsafe { readv(std::process::id() as i32, &local, &remote) } {
            Ok(n) => {
                assert_eq!(n, 100);
                assert_eq!(&a[..], &src[..30]);
                assert_eq!(&b[..], &src[30..]);
            }
            // A sandbox may forbid CMA altogether; then the probe must say so too.
            Err(_) => {
                let (addr, v) = probe_word();
                assert!(!probe(std::process::id() as i32, addr, v));
            }
        }
    }

    #[test]
    fn random_values_differ() {
        let a = random_u64();
        let b = random_u64();
        assert_ne!(a, b);
    }

    #[test]
    fn an_unmapped_remote_address_is_an_error_not_a_fault() {
        let mut dst = [0u8; 16];
        let local = [(dst.as_mut_ptr() as usize, dst.len())];
        // Page 0 is never mapped; the kernel refuses the copy (EFAULT), or the sandbox
        // refuses CMA altogether (EPERM / ENOSYS): an error either way, nothing copied.
        let remote = [(8u64, 16u64)];
        // SAFETY: `dst` is a writable array of this frame that nothing else touches.
        let r = unsafe { readv(std::process::id() as i32, &local, &remote) };
        assert!(
            matches!(r, Err(libc::EFAULT | libc::EPERM | libc::ENOSYS)),
            "{r:?}"
        );
        assert_eq!(dst, [0u8; 16]);
        let src = [7u8; 16];
        let local = [(src.as_ptr() as usize, src.len())];
        // SAFETY: `src` is only read; the remote range is unmapped, so nothing of this
        // process is written.
        let w = unsafe { writev(std::process::id() as i32, &local, &remote) };
        assert!(
            matches!(w, Err(libc::EFAULT | libc::EPERM | libc::ENOSYS)),
            "{w:?}"
        );
    }

    #[test]
    fn probe_of_a_bad_address_fails() {
        assert!(!probe(std::process::id() as i32, 8, 1));
    }
}
