//! [`debug_fields!`](macro@crate::debug_fields): the `Debug` of a provider object that shows
//! only what names it (an address, an id, a device), the rest — sockets, queues,
//! locks, device handles — left out as `..` (`finish_non_exhaustive`).
//!
//! Nothing here panics (the field expressions are the caller's).

/// `impl Debug for Type`: `Type { field: value, .. }` with the listed fields, each
/// value an expression of the object (bound to the name between the bars):
///
/// ```
/// struct Endpoint {
///     id: u64,
///     queue: Vec<u8>,
/// }
/// ofi_kit::debug_fields!(Endpoint, |ep| { id: ep.id, queued: ep.queue.len() });
///
/// let ep = Endpoint { id: 7, queue: vec![1, 2] };
/// assert_eq!(format!("{ep:?}"), "Endpoint { id: 7, queued: 2, .. }");
/// ```
#[macro_export]
macro_rules! debug_fields {
    ($ty:ident, |$obj:ident| { $($field:ident: $value:expr),* $(,)? }) => {
        impl ::std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let $obj = self;
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($field), &$value))*
                    .finish_non_exhaustive()
            }
        }
    };
}
