//! Why a template was kept or not: [`Mismatch`] (one failed hint check) and [`Verdict`]
//! (one line of getinfo's explanation, DESIGN §4: kept, filtered by which rule, or
//! rejected on which hint field with what was asked and what was offered).
//!
//! Display forms (one line each, no trailing newline):
//! - `tcp[0]: kept`
//! - `tcp[0]: rejected: ep_attr.type asked FI_EP_RDM, offers FI_EP_MSG`
//! - `tcp: filtered: FI_PROVIDER=^tcp` (filter verdicts concern a whole provider, so no
//!   template index is printed).
//!
//! Nothing here panics.

use std::fmt;

/// One failed hint check: the hint field (dotted path such as `ep_attr.type`,
/// `domain_attr.mr_mode`, `tx_attr.inject_size`), what the hints asked and what the
/// template offers, both as text (C names for flags and enums, decimal for numbers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The hint field that failed, e.g. `caps` or `domain_attr.threading`.
    pub field: String,
    /// What the hints asked for.
    pub asked: String,
    /// What the template offers.
    pub offered: String,
}

impl Mismatch {
    /// A mismatch on `field`: the hints asked `asked`, the template offers `offered`.
    pub fn new(
        field: impl Into<String>,
        asked: impl fmt::Display,
        offered: impl fmt::Display,
    ) -> Self {
        Mismatch {
            field: field.into(),
            asked: asked.to_string(),
            offered: offered.to_string(),
        }
    }
}

impl fmt::Display for Mismatch {
    /// `ep_attr.type asked FI_EP_RDM, offers FI_EP_MSG`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} asked {}, offers {}",
            self.field, self.asked, self.offered
        )
    }
}

impl std::error::Error for Mismatch {}

/// What happened to one template (or, for [`VerdictKind::Filtered`], one provider).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum VerdictKind {
    /// The template matched the hints and produced a result.
    Kept,
    /// The template failed a hint check (or address resolution) and produced nothing.
    Rejected,
    /// The provider was removed by a selection rule (e.g. `FI_PROVIDER`) before its
    /// templates were looked at. Produced by the registry, not by this module.
    Filtered,
}

impl VerdictKind {
    /// `kept`, `rejected` or `filtered`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Kept => "kept",
            VerdictKind::Rejected => "rejected",
            VerdictKind::Filtered => "filtered",
        }
    }
}

crate::enums::display_as!(VerdictKind, as_str);

/// One line of getinfo's explanation.
///
/// For `Kept`, `field`/`asked`/`offered` are empty. For `Rejected` they come from the
/// [`Mismatch`] (address failures use field `node`/`service`). For `Filtered`, `field`
/// holds the rule (e.g. `FI_PROVIDER`), `asked` its value (e.g. `^tcp`, may be empty),
/// `offered` an optional remark; `template` is 0 and not printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Provider name (as stamped into `fabric_attr.prov_name`).
    pub provider: String,
    /// Index of the template in the provider's list.
    pub template: usize,
    /// Kept, rejected or filtered.
    pub kind: VerdictKind,
    /// The hint field that decided a rejection, or the rule of a filter.
    pub field: String,
    /// What was asked (rejections) or the rule's value (filters).
    pub asked: String,
    /// What the template offers (rejections) or a remark (filters).
    pub offered: String,
}

impl Verdict {
    /// Template `template` of `provider` was kept.
    pub fn kept(provider: &str, template: usize) -> Verdict {
        Verdict {
            provider: provider.to_string(),
            template,
            kind: VerdictKind::Kept,
            field: String::new(),
            asked: String::new(),
            offered: String::new(),
        }
    }

    /// Template `template` of `provider` was rejected because of `why`.
    pub fn rejected(provider: &str, template: usize, why: Mismatch) -> Verdict {
        Verdict {
            provider: provider.to_string(),
            template,
            kind: VerdictKind::Rejected,
            field: why.field,
            asked: why.asked,
            offered: why.offered,
        }
    }

    /// `provider` was filtered out by `rule` (e.g. `"FI_PROVIDER"`) with value `value`
    /// (e.g. `"^tcp"`; empty when the rule has no value).
    pub fn filtered(provider: &str, rule: &str, value: &str) -> Verdict {
        Verdict {
            provider: provider.to_string(),
            template: 0,
            kind: VerdictKind::Filtered,
            field: rule.to_string(),
            asked: value.to_string(),
            offered: String::new(),
        }
    }

    /// The mismatch behind a rejection (`None` for other kinds).
    pub fn mismatch(&self) -> Option<Mismatch> {
        (self.kind == VerdictKind::Rejected).then(|| Mismatch {
            field: self.field.clone(),
            asked: self.asked.clone(),
            offered: self.offered.clone(),
        })
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            VerdictKind::Kept => write!(f, "{}[{}]: kept", self.provider, self.template),
            VerdictKind::Rejected => write!(
                f,
                "{}[{}]: rejected: {} asked {}, offers {}",
                self.provider, self.template, self.field, self.asked, self.offered
            ),
            VerdictKind::Filtered => {
                write!(f, "{}: filtered: {}", self.provider, self.field)?;
                if !self.asked.is_empty() {
                    write!(f, "={}", self.asked)?;
                }
                if !self.offered.is_empty() {
                    write!(f, " ({})", self.offered)?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_forms() {
        assert_eq!(Verdict::kept("tcp", 0).to_string(), "tcp[0]: kept");
        let m = Mismatch::new("ep_attr.type", "FI_EP_RDM", "FI_EP_MSG");
        assert_eq!(
            m.to_string(),
            "ep_attr.type asked FI_EP_RDM, offers FI_EP_MSG"
        );
        let v = Verdict::rejected("tcp", 0, m.clone());
        assert_eq!(
            v.to_string(),
            "tcp[0]: rejected: ep_attr.type asked FI_EP_RDM, offers FI_EP_MSG"
        );
        assert_eq!(v.mismatch(), Some(m));
        assert_eq!(
            Verdict::filtered("tcp", "FI_PROVIDER", "^tcp").to_string(),
            "tcp: filtered: FI_PROVIDER=^tcp"
        );
        assert_eq!(
            Verdict::filtered("udp", "FI_PROVIDER=tcp", "").to_string(),
            "udp: filtered: FI_PROVIDER=tcp"
        );
        assert_eq!(Verdict::kept("tcp", 3).mismatch(), None);
        assert_eq!(VerdictKind::Filtered.to_string(), "filtered");
    }
}
