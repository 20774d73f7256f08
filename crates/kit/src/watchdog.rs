//! An endpoint's watchdog thread: with manual progress an application may stop calling
//! into a provider as soon as it has its completions while the endpoint's protocol still
//! has work (a peer waiting for an acknowledgement, a retransmission due, a handshake to
//! finish). A provider whose protocol needs that progress spawns a watchdog that looks at
//! the endpoint now and then and runs a round when nobody else did.
//!
//! # Invariants
//!
//! - The thread holds the endpoint weakly: it never keeps a closed endpoint alive, and
//!   ends at its first look after the endpoint is gone.
//! - Between two looks it sleeps for the time the last look asked for (the first one
//!   for `first_nap`); what a look does and how soon the next comes is the provider's.
//!
//! Nothing here panics; a thread that cannot be spawned is a warning, and the endpoint
//! then relies on the application's progress alone.

use std::sync::Weak;
use std::time::Duration;

/// Spawns the watchdog of `endpoint` for provider `prov` on a thread called `thread`:
/// after `first_nap`, and then after each nap `look` returns, `look` runs on the
/// endpoint while it is alive (see the module docs).
pub fn spawn_watchdog<T: Send + Sync + 'static>(
    prov: &'static str,
    thread: &str,
    endpoint: Weak<T>,
    first_nap: Duration,
    mut look: impl FnMut(&T) -> Duration + Send + 'static,
) {
    let spawned = std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            let mut nap = first_nap;
            loop {
                std::thread::sleep(nap);
                let Some(ep) = endpoint.upgrade() else {
                    return;
                };
                nap = look(&ep);
            }
        });
    if let Err(e) = spawned {
        ofi_core::ofi_warn!(prov, "ep_ctrl", "no watchdog thread: {e}");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};

    use super::*;

    #[test]
    fn it_looks_while_the_endpoint_lives_and_ends_after() {
        let ep = Arc::new(AtomicUsize::new(0));
        let (looked, seen) = mpsc::channel();
        let (done, ended) = mpsc::channel::<()>();
        spawn_watchdog(
            "test",
            "test-watchdog",
            Arc::downgrade(&ep),
            Duration::ZERO,
            move |n: &AtomicUsize| {
                // Moved into the thread: dropped (closing `ended`) when the thread ends.
                let _keep = &done;
                let _ = looked.send(n.fetch_add(1, Ordering::Relaxed));
                Duration::from_millis(1)
            },
        );
        for want in 0..3 {
            assert_eq!(seen.recv_timeout(Duration::from_secs(10)), Ok(want));
        }
        drop(ep);
        // The thread ends at its next look: the closure, and with it `done`, is dropped.
        assert_eq!(
            ended.recv_timeout(Duration::from_secs(10)),
            Err(mpsc::RecvTimeoutError::Disconnected)
        );
    }
}
