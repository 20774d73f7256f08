//! [`wire_enum!`](crate::wire_enum): an enum whose variants are the values of one wire
//! field (a packet type, an operation code, a reason), declared once.
//!
//! Each value is written once, at its variant; the conversion from the field's raw
//! value (`from_wire`) is generated from the same list, so the two cannot disagree and
//! adding a variant is one line. The conversion never panics: a value the list does not
//! name is `None`, which the parser turns into the [`WireError`](super::WireError) that
//! names its field.
//!
//! An enum of another crate cannot be declared here; the one such field the kit's
//! providers carry, an atomic's call family, has its code once: [`atomic_kind_code`],
//! [`atomic_kind_of_code`].

use ofi_core::enums::AtomicKind;

/// The byte an atomic's call family travels as, in every provider format that carries
/// one: 0 base (`fi_atomic`), 1 fetch (`fi_fetch_atomic`), 2 compare
/// (`fi_compare_atomic`).
pub fn atomic_kind_code(k: AtomicKind) -> u8 {
    match k {
        AtomicKind::Base => 0,
        AtomicKind::Fetch => 1,
        AtomicKind::Compare => 2,
    }
}

/// The call family whose [`atomic_kind_code`] is `c`; `None` for any other byte.
pub fn atomic_kind_of_code(c: u8) -> Option<AtomicKind> {
    [AtomicKind::Base, AtomicKind::Fetch, AtomicKind::Compare]
        .into_iter()
        .find(|&k| atomic_kind_code(k) == c)
}

/// Declare a field-less enum whose variants are the values of a wire field.
///
/// ```text
/// wire_enum! {
///     /// docs of the enum
///     pub enum Op: u8 {        // the field's integer type: the enum's #[repr]
///         /// docs of the variant
///         Msg = 1,
///         …
///     }
/// }
/// ```
///
/// generates the enum (with `#[repr(u8)]`, so `Op::Msg as u8` is its wire value, and
/// the derives every wire value has: `Clone`, `Copy`, `Debug`, `PartialEq`, `Eq`,
/// `Hash` — written here once rather than at each enum; other attributes may follow
/// the docs),
/// `pub const fn from_wire(v: u8) -> Option<Op>`: the variant whose value is `v`, `None`
/// for any other value, and `pub fn from_field(field: &'static str, v: u8) -> Result<Op,
/// WireError>`: the same, with an unknown value a [`WireError::Field`](super::WireError)
/// error naming `field` (what a parser wants).
///
/// ```
/// use ofi_kit::wire::WireError;
/// use ofi_kit::wire_enum;
///
/// wire_enum! {
///     /// What a packet is.
///     pub enum Kind: u8 {
///         /// A request.
///         Request = 1,
///         /// Its answer.
///         Answer = 2,
///     }
/// }
///
/// assert_eq!(Kind::from_wire(2), Some(Kind::Answer));
/// assert_eq!(Kind::from_wire(Kind::Request as u8), Some(Kind::Request));
/// assert_eq!(Kind::from_wire(3), None);
/// // In a parser: an unknown value is an error naming the field.
/// assert_eq!(Kind::from_field("kind", 1), Ok(Kind::Request));
/// assert_eq!(Kind::from_field("kind", 9), Err(WireError::field("kind", 9u8)));
/// ```
#[macro_export]
macro_rules! wire_enum {
    (
        $(#[$attr:meta])*
        $vis:vis enum $name:ident : $repr:ident {
            $(
                $(#[$vattr:meta])*
                $variant:ident = $value:literal,
            )+
        }
    ) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr($repr)]
        $vis enum $name {
            $(
                $(#[$vattr])*
                $variant = $value,
            )+
        }

        #[allow(dead_code)]
        impl $name {
            #[doc = concat!("The `", stringify!($name), "` whose wire value is `v`; `None` for a value it does not name.")]
            #[inline]
            pub const fn from_wire(v: $repr) -> ::core::option::Option<$name> {
                match v {
                    $( $value => ::core::option::Option::Some($name::$variant), )+
                    _ => ::core::option::Option::None,
                }
            }

            #[doc = concat!("The `", stringify!($name), "` whose wire value is `v`, read from the field `field`; else a [`WireError::Field`](", stringify!($crate), "::wire::WireError::Field) error naming it.")]
            #[inline]
            pub fn from_field(
                field: &'static str,
                v: $repr,
            ) -> ::core::result::Result<$name, $crate::wire::WireError> {
                $name::from_wire(v).ok_or($crate::wire::WireError::field(field, v))
            }
        }
    };
}
