//! The type of a provider parameter (DESIGN §9), the vocabulary a provider declares its
//! parameters with ([`Host::declare_param`](crate::provider::Host::declare_param)).
//!
//! The parameter store itself (environment, then `plugins.toml`, then the default) is
//! the host's (`ofi_host::param`): a provider, linked in or a plugin, reads its values
//! through the host table ([`Host`](crate::provider::Host)), never from a store of its
//! own.

/// The type of a parameter's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamType {
    /// Free text.
    String,
    /// A signed integer (`i64`).
    Int,
    /// A non-negative size (`usize`), with optional k/m/g suffix.
    Size,
    /// A boolean.
    Bool,
}

impl ParamType {
    /// The label the C `fi_info -e` prints for this type.
    pub fn label(self) -> &'static str {
        match self {
            ParamType::String => "String",
            ParamType::Int => "Integer",
            ParamType::Size => "size_t",
            ParamType::Bool => "Boolean (0/1, on/off, true/false, yes/no)",
        }
    }
}

crate::enums::display_as!(ParamType, label);
