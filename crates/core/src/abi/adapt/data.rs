//! Data slots of the adapters (see [`super`] for the object pointers and panics).

use super::*;

/// A data table of family `F`: every slot of the list of data operations is a
/// trampoline of [`data_slots`], the group's `queries` come from [`Queries::BASE`].
pub(super) trait DataSlots<F: FabricOps>: 'static {
    const TABLE: &'static Self;
}

/// The slots of a data table that are not in the list of data operations (the
/// `*atomicvalid` queries), as a table whose data slots are `-FI_ENOSYS`.
pub(super) trait Queries<F: FabricOps>: Sized + 'static {
    const BASE: Self;
}

impl<F: FabricOps> Queries<F> for MsgTable {
    const BASE: MsgTable = *MsgTable::ENOSYS;
}
impl<F: FabricOps> Queries<F> for TaggedTable {
    const BASE: TaggedTable = *TaggedTable::ENOSYS;
}
impl<F: FabricOps> Queries<F> for RmaTable {
    const BASE: RmaTable = *RmaTable::ENOSYS;
}
impl<F: FabricOps> Queries<F> for AtomicTable {
    const BASE: AtomicTable = AtomicTable {
        writevalid: at_writevalid::<F>,
        readwritevalid: at_readwritevalid::<F>,
        compwritevalid: at_compwritevalid::<F>,
        ..*AtomicTable::ENOSYS
    };
}

/// Writes, from the list of data operations, one trampoline per operation in
/// [`data_slots`] (`data_slots::<name>::<F>`: catches panics, converts the C
/// arguments as the list says, `FI_EINVAL` for a bad one, and calls the
/// [`EndpointOps`] method of the same name) and each table's [`DataSlots`] impl.
macro_rules! data_trampolines {
    ($($group:ident $Table:ident {
        $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident $(@ $since:literal)? [$($kind:ident)+]
            ($($c:ident : $cty:ty $(as $hty:ty)?),*)
            => ($($p:ident : $pty:ty = $from:expr),*)
            <= ($($low:expr),*);)*
    } $(+ queries { $($q:tt)* })?)*) => {
        /// The trampolines of the data slots (one per entry of the list).
        mod data_slots {
            use super::*;
            $($(
                /// The slot generated for one class.
                ///
                /// # Safety
                /// `obj` must be an object this adapter handed out for family `F`, still open, passed
                /// to a slot of its own table; every pointer argument valid as the C call's contract
                /// says (null only where the call allows it). The host guarantees both (see
                /// [`crate::abi::object`]).
                #[allow(clippy::too_many_arguments)]
                pub(super) unsafe extern "C" fn $name<F: FabricOps>(obj: Obj, $($c: $cty),*) -> isize {
                    guard(stringify!($name), || {
                        st(run(|| -> Result<()> {
                            // SAFETY: `obj` is an endpoint this adapter boxed for family
                            // `F` (the host passes each handle's own object to its own
                            // tables); the C API's contract for the operation (buffers
                            // and arrays valid, with the given counts, until completion)
                            // is forwarded to the provider.
                            unsafe {
                                let ep: &EpOf<F> = ob::<EpOf<F>>(obj);
                                let ($($p,)*): ($($pty,)*) = ($($from,)*);
                                ep.$name($($p),*)
                            }
                        }))
                    })
                }
            )*)*
        }

        $(
            impl<F: FabricOps> DataSlots<F> for $Table {
                #[allow(clippy::needless_update)]
                const TABLE: &'static $Table = &$Table {
                    size: std::mem::size_of::<$Table>(),
                    $($name: data_slots::$name::<F>,)*
                    ..<$Table as Queries<F>>::BASE
                };
            }
        )*
    };
}

crate::for_each_ep_data_op!(data_trampolines);

/// Shared body of the three `*valid` slots.
pub(super) fn valid_slot(count: *mut usize, f: impl FnOnce() -> Result<usize>) -> i32 {
    st32(run(|| {
        need_out(count)?;
        let n = f()?;
        // SAFETY: `count` non-null and valid for writes (contract).
        unsafe { count.write(n) };
        Ok(())
    }))
}

/// Slot `writevalid` of the atomic table.
///
/// # Safety
/// `ep` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn at_writevalid<F: FabricOps>(
    ep: Obj,
    dt: u32,
    op: u32,
    count: *mut usize,
) -> i32 {
    guard("atomicvalid", || {
        valid_slot(count, || {
            // SAFETY: our boxed endpoint (host contract).
            unsafe { ob::<EpOf<F>>(ep) }.atomicvalid(datatype(dt)?, atomic_op(op)?)
        })
    })
}

/// Slot `readwritevalid` of the atomic table.
///
/// # Safety
/// `ep` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn at_readwritevalid<F: FabricOps>(
    ep: Obj,
    dt: u32,
    op: u32,
    count: *mut usize,
) -> i32 {
    guard("fetch_atomicvalid", || {
        valid_slot(count, || {
            // SAFETY: our boxed endpoint (host contract).
            unsafe { ob::<EpOf<F>>(ep) }.fetch_atomicvalid(datatype(dt)?, atomic_op(op)?)
        })
    })
}

/// Slot `compwritevalid` of the atomic table.
///
/// # Safety
/// `ep` must be an object this adapter handed out for family `F`, still open, passed
/// to a slot of its own table; every pointer argument valid as the C call's contract
/// says (null only where the call allows it). The host guarantees both (see
/// [`crate::abi::object`]).
pub(super) unsafe extern "C" fn at_compwritevalid<F: FabricOps>(
    ep: Obj,
    dt: u32,
    op: u32,
    count: *mut usize,
) -> i32 {
    guard("compare_atomicvalid", || {
        valid_slot(count, || {
            // SAFETY: our boxed endpoint (host contract).
            unsafe { ob::<EpOf<F>>(ep) }.compare_atomicvalid(datatype(dt)?, atomic_op(op)?)
        })
    })
}
