//! Counter slots of the adapters (see [`super`] for the object pointers and panics).

use super::*;

/// Slot `read` of the `cntr` table.
///
/// # Safety
/// `c` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn cntr_read<F: FabricOps>(c: Obj, value: *mut u64) -> i32 {
    guard("cntr.read", || {
        if value.is_null() {
            return Errno::EINVAL.to_status();
        }
        // SAFETY: our boxed counter; `value` valid for writes (contract).
        unsafe { value.write(ob::<CntrOf<F>>(c).read()) };
        0
    })
}

/// Slot `readerr` of the `cntr` table.
///
/// # Safety
/// `c` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn cntr_readerr<F: FabricOps>(c: Obj, value: *mut u64) -> i32 {
    guard("cntr.readerr", || {
        if value.is_null() {
            return Errno::EINVAL.to_status();
        }
        // SAFETY: our boxed counter; `value` valid for writes (contract).
        unsafe { value.write(ob::<CntrOf<F>>(c).readerr()) };
        0
    })
}

/// Slot `add` of the `cntr` table.
///
/// # Safety
/// `c` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn cntr_add<F: FabricOps>(c: Obj, v: u64) -> i32 {
    // SAFETY: our boxed counter (host contract).
    guard("cntr.add", || st32(unsafe { ob::<CntrOf<F>>(c) }.add(v)))
}

/// Slot `set` of the `cntr` table.
///
/// # Safety
/// `c` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn cntr_set<F: FabricOps>(c: Obj, v: u64) -> i32 {
    // SAFETY: our boxed counter (host contract).
    guard("cntr.set", || st32(unsafe { ob::<CntrOf<F>>(c) }.set(v)))
}

/// Slot `adderr` of the `cntr` table.
///
/// # Safety
/// `c` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn cntr_adderr<F: FabricOps>(c: Obj, v: u64) -> i32 {
    guard("cntr.adderr", || {
        // SAFETY: our boxed counter (host contract).
        st32(unsafe { ob::<CntrOf<F>>(c) }.adderr(v))
    })
}

/// Slot `seterr` of the `cntr` table.
///
/// # Safety
/// `c` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn cntr_seterr<F: FabricOps>(c: Obj, v: u64) -> i32 {
    guard("cntr.seterr", || {
        // SAFETY: our boxed counter (host contract).
        st32(unsafe { ob::<CntrOf<F>>(c) }.seterr(v))
    })
}

/// Slot `wait` of the `cntr` table.
///
/// # Safety
/// `c` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn cntr_wait<F: FabricOps>(
    c: Obj,
    threshold: u64,
    timeout: i32,
) -> i32 {
    guard("cntr.wait", || {
        // SAFETY: our boxed counter (host contract).
        st32(unsafe { ob::<CntrOf<F>>(c) }.wait(threshold, timeout))
    })
}

/// Slot `wait_fd` of the `cntr` table.
///
/// # Safety
/// `c` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn cntr_wait_fd<F: FabricOps>(c: Obj, fd: *mut i32) -> i32 {
    guard("cntr.wait_fd", || {
        st32(run(|| {
            need_out(fd)?;
            // SAFETY: our boxed counter.
            let v = unsafe { ob::<CntrOf<F>>(c) }.wait_fd()?;
            // SAFETY: `fd` non-null and valid (contract).
            unsafe { fd.write(v) };
            Ok(())
        }))
    })
}
