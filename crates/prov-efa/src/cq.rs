//! What a work completion of the SRD queue pair means to the protocol. Completion
//! queues themselves are kit's (`KitCq`), filled by the endpoint from the protocol's
//! events; the device's completions only drive the protocol:
//!
//! | send completion status | to the protocol | why |
//! | --- | --- | --- |
//! | `SUCCESS` | `handle_send_done` | the receiver took the datagram |
//! | `RNR_RETRY_EXC_ERR` | `handle_rnr` | the receiver had no buffer, the device's retries ran out: the protocol backs off and sends again |
//! | `WR_FLUSH_ERR` | nothing | the queue pair is being destroyed (the endpoint closes) |
//! | anything else | `handle_send_failed` | the peer (its context, queue pair, device) is gone: its operations complete with `FI_EIO` |
//!
//! A receive that fails (the queue pair is destroyed, or a buffer was too short, which
//! the provider's sizing excludes) is dropped and its buffer posted again.

use ofi_rdma::WcStatus;

/// What a send completion tells the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// Delivered.
    Done,
    /// Refused: receiver not ready.
    Rnr,
    /// Flushed: say nothing.
    Flushed,
    /// Cannot be delivered: the peer is gone.
    Failed,
}

/// The outcome of a send completion with `status`.
pub fn send_outcome(status: WcStatus) -> SendOutcome {
    match status {
        WcStatus::Success => SendOutcome::Done,
        WcStatus::RnrRetryExcErr => SendOutcome::Rnr,
        WcStatus::WrFlushErr => SendOutcome::Flushed,
        _ => SendOutcome::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds() {
        assert_eq!(send_outcome(WcStatus::Success), SendOutcome::Done);
        assert_eq!(send_outcome(WcStatus::RnrRetryExcErr), SendOutcome::Rnr);
        assert_eq!(send_outcome(WcStatus::WrFlushErr), SendOutcome::Flushed);
        assert_eq!(send_outcome(WcStatus::RetryExcErr), SendOutcome::Failed);
        assert_eq!(send_outcome(WcStatus::RemOpErr), SendOutcome::Failed);
    }
}
