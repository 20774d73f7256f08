//! Work completion statuses as `FI_*` errors. Completion queues themselves are kit's
//! (`KitCq`), filled by each endpoint's progress from its device completion queue.
//!
//! | work completion status            | error            | why                              |
//! |-----------------------------------|------------------|----------------------------------|
//! | `WR_FLUSH_ERR`                    | `FI_ECANCELED`   | flushed: the queue pair is in error (shutdown, peer gone, an earlier error) |
//! | `REM_ACCESS_ERR`                  | `FI_EACCES`      | bad rkey, out of bounds, access not granted at the target |
//! | `LOC_PROT_ERR`, `LOC_ACCESS_ERR`  | `FI_EACCES`      | a local buffer outside its region |
//! | `REM_INV_REQ_ERR`                 | `FI_EINVAL`      | misaligned atomic; message longer than the peer's receive |
//! | `LOC_LEN_ERR`                     | `FI_ETRUNC`      | this receive was too short       |
//! | `RNR_RETRY_EXC_ERR`               | `FI_ENORX`       | the peer posted no receive in time |
//! | `RETRY_EXC_ERR`, `RESP_TIMEOUT_ERR` | `FI_ECONNRESET` | the peer's queue pair is gone (process died, closed) |
//! | anything else                     | `FI_EIO`         |                                  |
//!
//! The verbs status number is the entry's `prov_errno`.

use ofi_core::Errno;
use ofi_rdma::WcStatus;

/// The `FI_*` error of a failed work completion.
pub fn wc_errno(status: WcStatus) -> Errno {
    match status {
        WcStatus::WrFlushErr => Errno::ECANCELED,
        WcStatus::RemAccessErr | WcStatus::LocProtErr | WcStatus::LocAccessErr => Errno::EACCES,
        WcStatus::RemInvReqErr => Errno::EINVAL,
        WcStatus::LocLenErr => Errno::ETRUNC,
        WcStatus::RnrRetryExcErr => Errno::ENORX,
        WcStatus::RetryExcErr | WcStatus::RespTimeoutErr => Errno::ECONNRESET,
        _ => Errno::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of the module's table, and statuses it does not name.
    #[test]
    fn each_status_has_the_documented_error() {
        let table = [
            (WcStatus::WrFlushErr, Errno::ECANCELED),
            (WcStatus::RemAccessErr, Errno::EACCES),
            (WcStatus::LocProtErr, Errno::EACCES),
            (WcStatus::LocAccessErr, Errno::EACCES),
            (WcStatus::RemInvReqErr, Errno::EINVAL),
            (WcStatus::LocLenErr, Errno::ETRUNC),
            (WcStatus::RnrRetryExcErr, Errno::ENORX),
            (WcStatus::RetryExcErr, Errno::ECONNRESET),
            (WcStatus::RespTimeoutErr, Errno::ECONNRESET),
            (WcStatus::GeneralErr, Errno::EIO),
            (WcStatus::FatalErr, Errno::EIO),
        ];
        for (status, errno) in table {
            assert_eq!(wc_errno(status), errno, "{status:?}");
        }
    }
}
