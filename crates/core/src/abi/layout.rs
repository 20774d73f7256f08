//! Layout descriptors and the layout fingerprint of the plugin interface.
//!
//! Every `#[repr(C)]` structure that crosses the boundary (ops tables, raw forms,
//! completion entries, the entry and host tables) is declared through
//! `abi_table!` (in [`crate::abi::tables`]) or `abi_struct!`, which emit, next to the
//! structure, a [`StructDesc`]: its name, size, alignment and, per field, the name, the
//! spelled type (for a slot: the argument and result types), offset and size, and the
//! interface minor version that introduced it.
//!
//! [`fingerprint_for_minor`](crate::abi::fingerprint_for_minor) hashes (FNV-1a, at compile time) the descriptors of every
//! structure as of a given minor: fields introduced later are left out, and the size
//! hashed is the size of the prefix made of the fields that remain. So a plugin built
//! for interface 1.0 carries the fingerprint the 1.1 host computes for minor 0, and loads;
//! a reordered, renamed or retyped slot changes the fingerprint and does not.
//!
//! Spelled types are hashed with ASCII white space removed, so two compilers that
//! pretty-print `*const u8` differently still agree. Argument names are not hashed:
//! renaming an argument is not an interface change.
//!
//! Nothing here panics at run time; the hash functions are `const fn`s.

/// One field (or table slot) of a boundary structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldDesc {
    /// The field's name.
    pub name: &'static str,
    /// The field's type as spelled in the source (for a slot: argument and result types).
    pub ty: &'static str,
    /// Offset in bytes from the start of the structure.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// The interface minor version that added this field (0 for the original layout).
    pub since: u32,
}

/// The layout of one boundary structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StructDesc {
    /// The structure's name.
    pub name: &'static str,
    /// `size_of` the structure in this build.
    pub size: usize,
    /// `align_of` the structure in this build.
    pub align: usize,
    /// Every field in declaration order.
    pub fields: &'static [FieldDesc],
}

impl StructDesc {
    /// The size of the structure as a build for interface minor `minor` sees it: the end
    /// of the last field that minor has, rounded up to the alignment.
    pub const fn size_for_minor(&self, minor: u32) -> usize {
        let mut end = 0;
        let mut i = 0;
        while i < self.fields.len() {
            let f = &self.fields[i];
            if f.since <= minor && f.offset + f.size > end {
                end = f.offset + f.size;
            }
            i += 1;
        }
        if self.align == 0 {
            return end;
        }
        end.div_ceil(self.align) * self.align
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

const fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\n' || b == b'\t' || b == b'\r'
}

const fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// `bytes[start..end]` is `mut`, `const` or `dyn` (followed by a path from the root,
/// `*mut ::std::ffi::c_void`, it is not a qualifier).
const fn is_keyword(bytes: &[u8], start: usize, end: usize) -> bool {
    let len = end - start;
    (len == 3
        && ((bytes[start] == b'm' && bytes[start + 1] == b'u' && bytes[start + 2] == b't')
            || (bytes[start] == b'd' && bytes[start + 1] == b'y' && bytes[start + 2] == b'n')))
        || (len == 5
            && bytes[start] == b'c'
            && bytes[start + 1] == b'o'
            && bytes[start + 2] == b'n'
            && bytes[start + 3] == b's'
            && bytes[start + 4] == b't')
}

/// One FNV-1a step over `bytes`, skipping ASCII white space and path qualifiers: a
/// type is hashed as its last path segment (`*const $crate::abi::raw::Iov` as
/// `*const Iov`), so where a type is named from does not change the fingerprint.
pub const fn fnv1a_text(mut h: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if is_space(b) {
            i += 1;
            continue;
        }
        if b == b':' && i + 1 < bytes.len() && bytes[i + 1] == b':' {
            i += 2;
            continue;
        }
        if is_ident(b) && (i == 0 || !is_ident(bytes[i - 1])) {
            // A path segment followed by `::` is a qualifier: skip it.
            let mut end = i;
            while end < bytes.len() && is_ident(bytes[end]) {
                end += 1;
            }
            let mut next = end;
            while next < bytes.len() && is_space(bytes[next]) {
                next += 1;
            }
            let qualifier =
                next + 1 < bytes.len() && bytes[next] == b':' && bytes[next + 1] == b':';
            if qualifier && !is_keyword(bytes, i, end) {
                i = next + 2;
                continue;
            }
        }
        h ^= b as u64;
        h = h.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    // A separator, so that "ab"+"c" and "a"+"bc" differ.
    h ^= 0xff;
    h.wrapping_mul(FNV_PRIME)
}

/// One FNV-1a step over the 8 little-endian bytes of `v`.
pub const fn fnv1a_u64(mut h: u64, v: u64) -> u64 {
    let bytes = v.to_le_bytes();
    let mut i = 0;
    while i < 8 {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    h
}

/// Hash one structure's layout as of `minor` into `h`.
pub const fn hash_struct(mut h: u64, desc: &StructDesc, minor: u32) -> u64 {
    h = fnv1a_text(h, desc.name.as_bytes());
    h = fnv1a_u64(h, desc.size_for_minor(minor) as u64);
    h = fnv1a_u64(h, desc.align as u64);
    let mut i = 0;
    while i < desc.fields.len() {
        let f = &desc.fields[i];
        if f.since <= minor {
            h = fnv1a_text(h, f.name.as_bytes());
            h = fnv1a_text(h, f.ty.as_bytes());
            h = fnv1a_u64(h, f.offset as u64);
            h = fnv1a_u64(h, f.size as u64);
        }
        i += 1;
    }
    h
}

/// The fingerprint of a list of structures as of interface minor `minor`.
pub const fn hash_all(descs: &[&StructDesc], minor: u32) -> u64 {
    let mut h = FNV_OFFSET;
    let mut i = 0;
    while i < descs.len() {
        h = hash_struct(h, descs[i], minor);
        i += 1;
    }
    h
}

/// The fingerprint of one structure alone (as of `minor`), for tests and diagnostics.
pub const fn fingerprint_of(desc: &StructDesc, minor: u32) -> u64 {
    hash_struct(FNV_OFFSET, desc, minor)
}

/// Declares `#[repr(C)]` data structures of the boundary with their [`StructDesc`]
/// (associated const `LAYOUT`).
///
/// Syntax: an ordinary struct whose fields are all `pub`; a field added by a later
/// interface minor is written `pub @N name: Type` (N = that minor). Fields are only ever
/// appended.
macro_rules! abi_struct {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $(@ $since:literal)? $field:ident : $ty:ty ),* $(,)?
        }
    )*) => {$(
        $(#[$meta])*
        #[repr(C)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// The layout descriptor of this structure (see [`crate::abi::layout`]).
            pub const LAYOUT: $crate::abi::layout::StructDesc = $crate::abi::layout::StructDesc {
                name: stringify!($name),
                size: ::core::mem::size_of::<$name>(),
                align: ::core::mem::align_of::<$name>(),
                fields: &[$(
                    $crate::abi::layout::FieldDesc {
                        name: stringify!($field),
                        ty: stringify!($ty),
                        offset: ::core::mem::offset_of!($name, $field),
                        size: ::core::mem::size_of::<$ty>(),
                        since: $crate::abi::layout::since!($($since)?),
                    },
                )*],
            };
        }
    )*};
}

/// `since!()` is 0; `since!(N)` is N.
macro_rules! since {
    () => {
        0u32
    };
    ($n:literal) => {
        $n
    };
}

pub(crate) use abi_struct;

/// Declares a closed `u32` enum of the interface with each variant's value and its text
/// written once: `from_raw` (`None` for a value not listed) and `$text`, the variant's
/// text for messages and listings.
///
/// Syntax: `pub enum Name, text fn_name { Variant = value => "text", … }`.
macro_rules! abi_enum {
    ($(#[$outer:meta])* pub enum $name:ident, text $text:ident {
        $($(#[$inner:meta])* $var:ident = $val:literal => $label:literal,)*
    }) => {
        $(#[$outer])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum $name {
            $($(#[$inner])* $var = $val,)*
        }

        impl $name {
            /// The variant with C value `raw`, if known.
            pub const fn from_raw(raw: u32) -> Option<$name> {
                match raw {
                    $($val => Some($name::$var),)*
                    _ => None,
                }
            }

            /// The variant's text, for messages and listings.
            pub const fn $text(self) -> &'static str {
                match self {
                    $($name::$var => $label,)*
                }
            }
        }
    };
}
pub(crate) use abi_enum;
pub(crate) use since;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_spelling_ignores_space_and_path_qualifiers_only() {
        let h = |t: &str| fnv1a_text(FNV_OFFSET, t.as_bytes());
        assert_eq!(h("*mut ::std::ffi::c_void"), h("*mut c_void"));
        assert_eq!(h("* const $crate :: abi :: raw :: Iov"), h("*const Iov"));
        assert_eq!(
            h("*const *mut ::core::ffi::c_void"),
            h("*const *mut c_void")
        );
        // Keywords before a root path stay; the pointee and mutability still count.
        assert_ne!(h("*mut ::std::ffi::c_void"), h("*const c_void"));
        assert_ne!(h("*const u8"), h("*mut u8"));
        assert_ne!(h("a::Iov"), h("Ioc"));
    }

    #[allow(dead_code)]
    mod v1 {
        crate::abi::layout::abi_struct! {
            /// Test structure, first version.
            pub struct T {
                /// a
                pub a: u64,
                /// b
                pub b: *const u8,
            }
        }
    }
    #[allow(dead_code)]
    mod v2 {
        crate::abi::layout::abi_struct! {
            /// Test structure, later minor: one field appended.
            pub struct T {
                /// a
                pub a: u64,
                /// b
                pub b: *const u8,
                /// c (minor 1)
                pub @1 c: u32,
            }
        }
    }
    #[allow(dead_code)]
    mod retyped {
        crate::abi::layout::abi_struct! {
            /// Test structure with `b` retyped.
            pub struct T {
                /// a
                pub a: u64,
                /// b
                pub b: *mut u8,
            }
        }
    }

    #[test]
    fn appended_field_keeps_old_minor_fingerprint() {
        assert_eq!(
            fingerprint_of(&v1::T::LAYOUT, 0),
            fingerprint_of(&v2::T::LAYOUT, 0)
        );
        assert_ne!(
            fingerprint_of(&v1::T::LAYOUT, 1),
            fingerprint_of(&v2::T::LAYOUT, 1)
        );
        assert_eq!(v2::T::LAYOUT.size_for_minor(0), 16);
        assert_eq!(v2::T::LAYOUT.size_for_minor(1), 24);
    }

    #[test]
    fn retyped_field_changes_fingerprint() {
        assert_ne!(
            fingerprint_of(&v1::T::LAYOUT, 0),
            fingerprint_of(&retyped::T::LAYOUT, 0)
        );
    }

    #[test]
    fn white_space_is_ignored_in_types() {
        assert_eq!(fnv1a_text(1, b"*const u8"), fnv1a_text(1, b"* const  u8"));
        assert_ne!(fnv1a_text(1, b"*const u8"), fnv1a_text(1, b"*constu16"));
        assert_ne!(
            fnv1a_text(fnv1a_text(1, b"ab"), b"c"),
            fnv1a_text(fnv1a_text(1, b"a"), b"bc")
        );
    }
}
