//! A provider's parameters (`FI_<PROV>_<NAME>`, `plugins.toml`): each declared with its
//! default and read back in one call, range checks with one error wording, and error
//! messages that name the variable from the provider's name.
//!
//! The default a parameter is declared with is the value the provider uses when the
//! parameter is unset, so the two cannot disagree. Nothing here panics; a value out of
//! range is `FI_EINVAL` naming the variable and the value.

use std::fmt::Debug;
use std::ops::RangeInclusive;

use ofi_core::param::ParamType;
use ofi_core::provider::Host;
use ofi_core::{Errno, Error, Result};

/// The parameters of one provider, as its `init` reads them.
#[derive(Clone, Copy)]
pub struct Params<'h> {
    host: &'h Host,
    prov: &'static str,
}

impl<'h> Params<'h> {
    /// The parameters of provider `prov` (its name, as in `FI_<PROV>_…`) through `host`.
    pub fn new(host: &'h Host, prov: &'static str) -> Params<'h> {
        Params { host, prov }
    }

    /// The environment variable of parameter `name`: `FI_<PROV>_<NAME>`.
    pub fn var(&self, name: &str) -> String {
        format!("FI_{}_{}", self.prov, name).to_uppercase()
    }

    /// `FI_EINVAL` for parameter `name` set to `value`: "`FI_<PROV>_<NAME>=value`: why".
    pub fn invalid(&self, name: &str, value: impl Debug, why: impl std::fmt::Display) -> Error {
        Error::new(
            Errno::EINVAL,
            format!("{}={value:?}: {why}", self.var(name)),
        )
    }

    /// A Size parameter: declared with `default`, its value (`default` when unset).
    pub fn size(&self, name: &str, help: &str, default: usize) -> Result<usize> {
        self.host
            .declare_param(name, ParamType::Size, help, Some(&default.to_string()))?;
        Ok(self.host.param_size(name)?.unwrap_or(default))
    }

    /// A Size parameter that must lie in `range` (else [`Params::invalid`]).
    pub fn size_in(
        &self,
        name: &str,
        help: &str,
        default: usize,
        range: RangeInclusive<usize>,
    ) -> Result<usize> {
        let v = self.size(name, help, default)?;
        if range.contains(&v) {
            return Ok(v);
        }
        let (lo, hi) = (*range.start(), *range.end());
        Err(match (lo, hi) {
            (_, usize::MAX) => self.invalid(name, v, format_args!("must be at least {lo}")),
            (0, _) => self.invalid(name, v, format_args!("at most {hi}")),
            _ => self.invalid(name, v, format_args!("must be from {lo} to {hi}")),
        })
    }

    /// A Bool parameter: declared with `default`, its value (`default` when unset).
    pub fn bool(&self, name: &str, help: &str, default: bool) -> Result<bool> {
        self.host
            .declare_param(name, ParamType::Bool, help, Some(&default.to_string()))?;
        Ok(self.host.param_bool(name)?.unwrap_or(default))
    }

    /// A String parameter declared with `default` (`None`: no default): its value with
    /// white space trimmed, `None` when unset or empty.
    pub fn text(&self, name: &str, help: &str, default: Option<&str>) -> Result<Option<String>> {
        self.host
            .declare_param(name, ParamType::String, help, default)?;
        Ok(self
            .host
            .param_str(name)?
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty()))
    }
}
