//! Data slots of the adapters (see [`super`] for the object pointers and panics).

use super::*;

/// A data table of family `F`: every slot of the list of data operations is a
/// trampoline of [`data_slots`], every query of its group one of [`query_slots`].
pub(super) trait DataSlots<F: FabricOps>: 'static {
    const TABLE: &'static Self;
}

/// Writes, from the list of data operations, one trampoline per operation in
/// [`data_slots`] (`data_slots::<name>::<F>`: catches panics, converts the C
/// arguments as the list says, `FI_EINVAL` for a bad one, and calls the
/// [`EndpointOps`] method of the same name), one per query in [`query_slots`], and each
/// table's [`DataSlots`] impl.
macro_rules! data_trampolines {
    ($($group:ident $Table:ident {
        $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident $since:tt $kind:tt
            ($($c:ident : $cty:ty $(as $hty:ty)?),*) ($($p:ident : $pty:ty = $from:expr),*) $low:tt;)*
    } { $($(#[$qdoc:meta])* $qslot:ident / $qname:ident;)* })*) => {
        /// The trampolines of the data slots (one per entry of the list).
        mod data_slots {
            use super::*;
            $($(
                /// The slot of this data operation: calls the endpoint's method.
                ///
                /// # Safety
                /// `obj` is an endpoint this adapter boxed for family `F`, still open;
                /// the arguments satisfy the C call's contract.
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

        /// The trampolines of the queries (the `*atomicvalid` slots).
        mod query_slots {
            use super::*;
            $($(
                /// The slot of this query: the endpoint's answer into `*count`.
                ///
                /// # Safety
                /// `ep` is an endpoint this adapter boxed for family `F`, still open;
                /// `count` null or valid for a write.
                pub(super) unsafe extern "C" fn $qslot<F: FabricOps>(
                    ep: Obj,
                    datatype: u32,
                    op: u32,
                    count: *mut usize,
                ) -> i32 {
                    guard(stringify!($qname), || {
                        valid_slot(count, || {
                            // SAFETY: our boxed endpoint (host contract).
                            unsafe { ob::<EpOf<F>>(ep) }
                                .$qname(super::datatype(datatype)?, atomic_op(op)?)
                        })
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
                    $($qslot: query_slots::$qslot::<F>,)*
                    ..*$Table::ENOSYS
                };
            }
        )*
    };
}

crate::for_each_ep_data_op!(data_trampolines);

/// Shared body of the query slots: the answer of `f` into `*count`.
fn valid_slot(count: *mut usize, f: impl FnOnce() -> Result<usize>) -> i32 {
    st32(run(|| {
        need_out(count)?;
        let n = f()?;
        // SAFETY: `count` non-null and valid for writes (contract).
        unsafe { count.write(n) };
        Ok(())
    }))
}
