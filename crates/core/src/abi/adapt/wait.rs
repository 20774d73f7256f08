//! Wait set slots of the adapters (see [`super`] for the object pointers and panics).

use super::*;

/// Slot `wait` of the `wait` table.
///
/// # Safety
/// `w` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn wait_wait<F: FabricOps>(w: Obj, timeout: i32) -> i32 {
    guard("wait.wait", || {
        // SAFETY: our boxed wait set (host contract).
        st32(unsafe { ob::<WaitOf<F>>(w) }.wait(timeout))
    })
}

/// Slot `fd` of the `wait` table.
///
/// # Safety
/// `w` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn wait_fd<F: FabricOps>(w: Obj, fd: *mut i32) -> i32 {
    guard("wait.fd", || {
        st32(run(|| {
            need_out(fd)?;
            // SAFETY: our boxed wait set.
            let v = unsafe { ob::<WaitOf<F>>(w) }.fd()?;
            // SAFETY: `fd` non-null and valid (contract).
            unsafe { fd.write(v) };
            Ok(())
        }))
    })
}
