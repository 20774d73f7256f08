//! Reading a provider's settings from its parameters by one table: each row names the
//! settings field, the parameter (`FI_<PROV>_<NAME>`), its help text and, for a size,
//! the range it must lie in. [`read_params!`](crate::read_params) walks the table; the
//! field's value before the read is the parameter's declared default, so a provider's
//! `Default` for its settings is the one place its defaults are written.
//!
//! The kind of parameter follows from the field's type ([`ParamValue`]): sizes for the
//! unsigned integers, a bool for `bool`, a string for `Option<String>`. A size read into
//! an integer narrower than `usize` saturates at that type's largest value (a range
//! keeps such values in bounds where it matters). Nothing here panics; a value out of
//! range is the [`Params::size_in`] error.

use std::ops::RangeInclusive;

use ofi_core::Result;

use crate::param::Params;

/// A settings field a parameter can be read into.
pub trait ParamValue: Sized {
    /// Declares parameter `name` with `help` and the default `default`, and returns its
    /// value (`default` when unset).
    fn read(p: &Params<'_>, name: &str, help: &str, default: &Self) -> Result<Self>;
}

/// A settings field read from a Size parameter, which may carry a range.
pub trait SizeValue: ParamValue + Copy {
    /// The value as a parameter size (saturating).
    fn to_size(self) -> usize;
    /// The value of a parameter size (saturating).
    fn from_size(v: usize) -> Self;

    /// As [`ParamValue::read`], and the value must lie in `range` (else
    /// [`Params::invalid`] naming the variable).
    fn read_in(
        p: &Params<'_>,
        name: &str,
        help: &str,
        default: &Self,
        range: RangeInclusive<usize>,
    ) -> Result<Self> {
        p.size_in(name, help, default.to_size(), range)
            .map(Self::from_size)
    }
}

macro_rules! size_values {
    ($($t:ty),*) => {$(
        impl SizeValue for $t {
            fn to_size(self) -> usize {
                usize::try_from(self).unwrap_or(usize::MAX)
            }
            fn from_size(v: usize) -> Self {
                <$t>::try_from(v).unwrap_or(<$t>::MAX)
            }
        }

        impl ParamValue for $t {
            fn read(p: &Params<'_>, name: &str, help: &str, default: &Self) -> Result<Self> {
                p.size(name, help, default.to_size()).map(Self::from_size)
            }
        }
    )*};
}

size_values!(usize, u64, u32, u8);

impl ParamValue for bool {
    fn read(p: &Params<'_>, name: &str, help: &str, default: &Self) -> Result<Self> {
        p.bool(name, help, *default)
    }
}

impl ParamValue for Option<String> {
    /// A String parameter: `None` (unset or empty) keeps the default.
    fn read(p: &Params<'_>, name: &str, help: &str, default: &Self) -> Result<Self> {
        Ok(p.text(name, help, default.as_deref())?
            .or_else(|| default.clone()))
    }
}

/// Starts from `S::default()` and applies `read`: the body of
/// [`read_params!`](crate::read_params).
pub fn read_table<S: Default>(read: impl FnOnce(&mut S) -> Result<()>) -> Result<S> {
    let mut s = S::default();
    read(&mut s)?;
    Ok(s)
}

/// Reads a table of parameters into a settings value: starts from the type's
/// `Default` and reads each row in table order (the order `fi_info -e` lists them),
/// declared with the field's default; the first error ends the read. The value is a
/// `Result` of the settings type.
///
/// ```
/// # use ofi_core::provider::Host;
/// # use ofi_kit::param::Params;
/// struct Geometry {
///     slots: usize,
/// }
/// struct Settings {
///     rx_size: usize,
///     geometry: Geometry,
/// }
/// impl Default for Settings {
///     fn default() -> Settings {
///         let geometry = Geometry { slots: 64 };
///         Settings { rx_size: 256, geometry }
///     }
/// }
///
/// let host = Host::for_provider("doc_example");
/// let p = Params::new(&host, "doc_example");
/// let s = ofi_kit::read_params!(p, Settings {
///     rx_size: "rx_size", "Receives an endpoint may have posted", 1..=usize::MAX;
///     geometry.slots: "ring_size", "Slots per ring";
/// })?;
/// assert_eq!((s.rx_size, s.geometry.slots), (256, 64));
/// # Ok::<(), ofi_core::Error>(())
/// ```
///
/// A row is `field.path: "name", "help"` with an optional `, range` for a size; the
/// field's type picks the kind of parameter ([`ParamValue`], [`SizeValue`]).
#[macro_export]
macro_rules! read_params {
    ($params:expr, $ty:path {
        $( $($field:ident).+ : $name:literal, $help:expr $(, $range:expr)? ; )*
    }) => {
        $crate::settings::read_table(|into: &mut $ty| {
            let params: &$crate::param::Params<'_> = &$params;
            $(
                into.$($field).+ = $crate::read_params!(
                    @one params, $name, $help, &into.$($field).+ $(, $range)?
                )?;
            )*
            Ok(())
        })
    };
    (@one $p:expr, $name:expr, $help:expr, $default:expr) => {
        $crate::settings::ParamValue::read($p, $name, $help, $default)
    };
    (@one $p:expr, $name:expr, $help:expr, $default:expr, $range:expr) => {
        $crate::settings::SizeValue::read_in($p, $name, $help, $default, $range)
    };
}

#[cfg(test)]
mod tests {
    use std::ops::RangeInclusive;

    use ofi_core::provider::Host;
    use ofi_core::{Errno, Result};

    use crate::param::Params;

    #[derive(Debug, PartialEq)]
    struct Inner {
        count: u32,
    }

    /// Every kind of field a row can name, one nested.
    #[derive(Debug, PartialEq)]
    struct Table {
        depth: usize,
        wait_us: u64,
        inner: Inner,
        off: bool,
        name: Option<String>,
    }

    impl Default for Table {
        fn default() -> Table {
            Table {
                depth: 16,
                wait_us: 1 << 40,
                inner: Inner { count: 7 },
                off: true,
                name: Some("reno".into()),
            }
        }
    }

    fn read(depth_range: RangeInclusive<usize>) -> Result<Table> {
        let host = Host::for_provider("kit_settings_test");
        let p = Params::new(&host, "kit_settings_test");
        crate::read_params!(p, Table {
            depth: "depth", "Queue depth", depth_range;
            wait_us: "wait", "Microseconds";
            inner.count: "count", "A narrower field", 1..=100;
            off: "off", "A flag";
            name: "name", "A name";
        })
    }

    #[test]
    fn unset_parameters_keep_the_defaults() {
        assert_eq!(read(1..=64).unwrap(), Table::default());
    }

    #[test]
    fn a_default_outside_its_range_is_einval_naming_the_variable() {
        let e = read(32..=64).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        let m = e.message();
        assert!(m.contains("FI_KIT_SETTINGS_TEST_DEPTH=16"), "{m}");
    }

    #[test]
    fn narrow_fields_saturate() {
        use super::SizeValue;
        assert_eq!(u8::from_size(300), u8::MAX);
        assert_eq!(u32::from_size(5), 5);
        assert_eq!(u64::MAX.to_size(), usize::MAX);
    }
}
