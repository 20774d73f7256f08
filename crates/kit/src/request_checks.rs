//! The argument checks of RMA and atomic requests that every provider carrying them out
//! (itself, or by forwarding them to a core) makes before anything else, with one
//! wording: the local side must match the remote one.
//!
//! Nothing here panics; a mismatch is `FI_EINVAL` naming the provider.

use ofi_core::enums::AtomicOp;
use ofi_core::{Errno, Error, Result};

use crate::request::{AtomicRequest, RmaRequest};

impl RmaRequest<'_> {
    /// Bytes in the local buffers, which must fill the remote buffer exactly.
    ///
    /// # Errors
    /// `FI_EINVAL` ("`prov`: N local bytes for a remote buffer of M") when they differ.
    pub fn matched_len(&self, prov: &str) -> Result<usize> {
        let total = self
            .local
            .bufs
            .iter()
            .fold(0usize, |t, v| t.saturating_add(v.len));
        if total != self.remote.len {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "{prov}: {total} local bytes for a remote buffer of {}",
                    self.remote.len
                ),
            ));
        }
        Ok(total)
    }
}

impl AtomicRequest<'_> {
    /// Elements the atomic applies to: its operands', or for an `FI_ATOMIC_READ` given
    /// no operands its results'; the remote ioc must hold as many.
    ///
    /// # Errors
    /// `FI_EINVAL` ("`prov`: local and remote atomic element counts differ") when it does
    /// not.
    pub fn matched_count(&self, prov: &str) -> Result<usize> {
        let sum = |bufs: &[ofi_core::abi::raw::Ioc]| {
            bufs.iter().fold(0usize, |t, v| t.saturating_add(v.count))
        };
        let count = match sum(self.operands.bufs) {
            0 if self.op == AtomicOp::AtomicRead => sum(self.result.bufs),
            n => n,
        };
        if count != self.remote.count {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{prov}: local and remote atomic element counts differ"),
            ));
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use ofi_core::abi::raw::{Ioc, Iov, RmaIoc, RmaIov};
    use ofi_core::enums::{AtomicKind, Datatype};
    use ofi_core::OpFlags;

    use super::*;
    use crate::request::{Local, RmaDir};

    fn iov(len: usize) -> Iov {
        Iov {
            base: std::ptr::null_mut(),
            len,
        }
    }

    fn ioc(count: usize) -> Ioc {
        Ioc {
            addr: std::ptr::null_mut(),
            count,
        }
    }

    fn rma(bufs: &[Iov], remote_len: usize) -> RmaRequest<'_> {
        RmaRequest {
            dir: RmaDir::Write,
            local: Local { bufs, desc: &[] },
            peer: 0,
            remote: RmaIov {
                addr: 0,
                len: remote_len,
                key: 0,
            },
            remote_iov: &[],
            context: 0,
            data: None,
            flags: OpFlags::empty(),
            inject: false,
        }
    }

    fn atomic<'a>(
        op: AtomicOp,
        operands: &'a [Ioc],
        result: &'a [Ioc],
        remote: usize,
    ) -> AtomicRequest<'a> {
        let none = Local {
            bufs: &[],
            desc: &[],
        };
        AtomicRequest {
            kind: AtomicKind::Fetch,
            operands: Local {
                bufs: operands,
                desc: &[],
            },
            compare: none,
            result: Local {
                bufs: result,
                desc: &[],
            },
            peer: 0,
            remote: RmaIoc {
                addr: 0,
                count: remote,
                key: 0,
            },
            datatype: Datatype::Uint64,
            op,
            context: 0,
            flags: OpFlags::empty(),
            inject: false,
        }
    }

    #[test]
    fn rma_local_bytes_must_fill_the_remote_buffer() {
        let bufs = [iov(3), iov(5)];
        assert_eq!(rma(&bufs, 8).matched_len("p").unwrap(), 8);
        let e = rma(&bufs, 9).matched_len("p").unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert_eq!(e.message(), "p: 8 local bytes for a remote buffer of 9");
        // Totals that overflow do not panic: they saturate and cannot match.
        let huge = [iov(usize::MAX), iov(1)];
        assert_eq!(
            rma(&huge, usize::MAX - 1)
                .matched_len("p")
                .unwrap_err()
                .code(),
            Errno::EINVAL
        );
    }

    #[test]
    fn atomic_counts_are_the_operands_or_a_reads_results() {
        let (two, three) = ([ioc(1), ioc(1)], [ioc(3)]);
        assert_eq!(
            atomic(AtomicOp::Sum, &two, &[], 2)
                .matched_count("p")
                .unwrap(),
            2
        );
        assert_eq!(
            atomic(AtomicOp::AtomicRead, &[], &three, 3)
                .matched_count("p")
                .unwrap(),
            3
        );
        // Only a read counts its results: a sum without operands has none.
        let e = atomic(AtomicOp::Sum, &[], &three, 3)
            .matched_count("p")
            .unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().starts_with("p: "));
    }
}
