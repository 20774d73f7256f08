//! Provider selection: the `FI_PROVIDER` grammar, also used for `hints.fabric_attr.prov_name`.
//!
//! Grammar: a comma-separated list of entries, optionally preceded by one `^` that
//! negates the whole list. An entry is a provider name or a layered stack `core;util`
//! (e.g. `tcp;ofi_rxm`). Names compare case-insensitively; whitespace around names and
//! empty entries are ignored, so an empty or all-blank value means "no filter".
//!
//! Matching a result's provider name (itself possibly layered, `tcp;ofi_rxm`):
//! - a one-name entry matches any stack that contains that name as a component, so
//!   `tcp` keeps `tcp` and `tcp;ofi_rxm`, and `ofi_rxm` keeps rxm over any core (the C
//!   library returns nothing for `FI_PROVIDER=ofi_rxm`; we keep what the user named);
//! - a layered entry matches exactly that stack: `tcp;ofi_rxm` keeps only `tcp;ofi_rxm`;
//! - `^…` keeps what no entry matches: `^tcp` drops `tcp` and `tcp;ofi_rxm`.
//!
//! Nothing here panics; parsing never fails (unknown names are reported by the
//! registry, which knows which names exist).

use std::fmt;

/// A parsed provider filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderFilter {
    negate: bool,
    entries: Vec<Vec<String>>,
    text: String,
}

impl ProviderFilter {
    /// Parse a filter; `None` when the text selects everything (empty, blank, or `^` alone).
    pub fn parse(text: &str) -> Option<ProviderFilter> {
        let trimmed = text.trim();
        let (negate, body) = match trimmed.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        let entries: Vec<Vec<String>> = body
            .split(',')
            .map(split_stack)
            .filter(|components| !components.is_empty())
            .collect();
        if entries.is_empty() {
            return None;
        }
        Some(ProviderFilter {
            negate,
            entries,
            text: trimmed.to_string(),
        })
    }

    /// Whether the list is negated (`^…`).
    pub fn is_negated(&self) -> bool {
        self.negate
    }

    /// The entries, each as its lower-cased `;`-separated components.
    pub fn entries(&self) -> &[Vec<String>] {
        &self.entries
    }

    /// Every distinct provider name the filter mentions (lower case).
    pub fn names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for component in self.entries.iter().flatten() {
            if !out.contains(&component.as_str()) {
                out.push(component);
            }
        }
        out
    }

    /// Whether a result from the provider stack `prov_name` (e.g. `tcp;ofi_rxm`) is kept.
    pub fn keeps(&self, prov_name: &str) -> bool {
        let stack = split_stack(prov_name);
        let hit = self
            .entries
            .iter()
            .any(|entry| entry_matches(entry, &stack));
        hit != self.negate
    }

    /// Whether the core provider `name` can contribute no kept result of its own. Used to
    /// skip asking (or loading) providers the filter rules out whatever they return.
    /// A core not named by a positive list is excluded from results (it stays available
    /// to utilities layering on it, which ask for cores directly).
    pub fn excludes_entirely(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        if self.negate {
            self.entries.iter().any(|e| e.len() == 1 && e[0] == name)
        } else {
            !self.entries.iter().flatten().any(|c| *c == name)
        }
    }

    /// Whether the utility provider `name` can contribute no kept result. A utility
    /// answers with stacks over cores it picks itself, so a positive list rules it out
    /// only when every entry is a full stack without it (`FI_PROVIDER=tcp` still asks
    /// rxm, which may stack on tcp; `FI_PROVIDER=shm;ofi_x` does not).
    pub fn excludes_utility_entirely(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        if self.negate {
            return self.excludes_entirely(&name);
        }
        self.entries
            .iter()
            .all(|e| e.len() > 1 && !e.contains(&name))
    }
}

impl fmt::Display for ProviderFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn split_stack(s: &str) -> Vec<String> {
    s.split(';')
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty())
        .collect()
}

fn entry_matches(entry: &[String], stack: &[String]) -> bool {
    match entry {
        [single] => stack.iter().any(|c| c == single),
        _ => entry == stack,
    }
}

/// The top (outermost) provider of a stack name: `tcp;ofi_rxm` → `ofi_rxm`.
pub fn top_of_stack(prov_name: &str) -> &str {
    prov_name.rsplit(';').next().unwrap_or(prov_name).trim()
}

/// The provider name a plugin file announces by its file name, if it follows one of the
/// conventions `lib<name>-fi.so` (the C library's) or `libofi_prov_<name>.so` (cargo's
/// name for a crate `ofi-prov-<name>`). Lets a negated filter skip a file unopened.
pub fn name_from_plugin_file(file_name: &str) -> Option<String> {
    let stem = file_name.strip_prefix("lib")?;
    if let Some(name) = stem.strip_suffix("-fi.so") {
        return (!name.is_empty()).then(|| name.to_ascii_lowercase());
    }
    let name = stem.strip_prefix("ofi_prov_")?.strip_suffix(".so")?;
    (!name.is_empty()).then(|| name.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(filter: &str, names: &[&str]) -> Vec<String> {
        match ProviderFilter::parse(filter) {
            None => names.iter().map(|s| s.to_string()).collect(),
            Some(f) => names
                .iter()
                .filter(|n| f.keeps(n))
                .map(|s| s.to_string())
                .collect(),
        }
    }

    const ALL: &[&str] = &[
        "shm",
        "tcp",
        "tcp;ofi_rxm",
        "udp",
        "udp;ofi_rxd",
        "verbs;ofi_rxm",
    ];

    #[test]
    fn fi_provider_cases() {
        assert_eq!(kept("tcp", ALL), ["tcp", "tcp;ofi_rxm"]);
        assert_eq!(
            kept("^tcp", ALL),
            ["shm", "udp", "udp;ofi_rxd", "verbs;ofi_rxm"]
        );
        assert_eq!(kept("tcp;ofi_rxm", ALL), ["tcp;ofi_rxm"]);
        assert_eq!(kept("ofi_rxm", ALL), ["tcp;ofi_rxm", "verbs;ofi_rxm"]);
        assert_eq!(kept("TCP", ALL), ["tcp", "tcp;ofi_rxm"]);
        assert_eq!(kept("nosuch", ALL), Vec::<String>::new());
        assert_eq!(kept("nosuch,udp", ALL), ["udp", "udp;ofi_rxd"]);
        assert_eq!(kept("", ALL), ALL);
        assert_eq!(kept("   ", ALL), ALL);
        assert_eq!(kept(" tcp , shm ", ALL), ["shm", "tcp", "tcp;ofi_rxm"]);
        assert_eq!(
            kept("^tcp;ofi_rxm", ALL),
            ["shm", "tcp", "udp", "udp;ofi_rxd", "verbs;ofi_rxm"]
        );
        assert_eq!(kept("^", ALL), ALL);
        assert_eq!(kept(",,", ALL), ALL);
    }

    #[test]
    fn excludes_entirely() {
        let f = ProviderFilter::parse("^verbs").unwrap();
        assert!(f.excludes_entirely("verbs"));
        assert!(!f.excludes_entirely("tcp"));
        let f = ProviderFilter::parse("^tcp;ofi_rxm").unwrap();
        assert!(!f.excludes_entirely("tcp"), "only the stack is excluded");
        let f = ProviderFilter::parse("tcp;ofi_rxm").unwrap();
        assert!(!f.excludes_entirely("ofi_rxm"));
        assert!(f.excludes_entirely("udp"));
        assert!(f.excludes_utility_entirely("ofi_rxd"));
        assert!(!f.excludes_utility_entirely("ofi_rxm"));
        let f = ProviderFilter::parse("tcp").unwrap();
        assert!(
            !f.excludes_utility_entirely("ofi_rxm"),
            "rxm may stack on tcp"
        );
        let f = ProviderFilter::parse("^ofi_rxm").unwrap();
        assert!(f.excludes_utility_entirely("ofi_rxm"));
    }

    #[test]
    fn names_and_files() {
        let f = ProviderFilter::parse("tcp;ofi_rxm,Tcp,shm").unwrap();
        assert_eq!(f.names(), ["tcp", "ofi_rxm", "shm"]);
        assert_eq!(top_of_stack("tcp;ofi_rxm"), "ofi_rxm");
        assert_eq!(top_of_stack("tcp"), "tcp");
        assert_eq!(
            name_from_plugin_file("libverbs-fi.so").as_deref(),
            Some("verbs")
        );
        assert_eq!(
            name_from_plugin_file("libofi_prov_udp.so").as_deref(),
            Some("udp")
        );
        assert_eq!(name_from_plugin_file("libfoo.so"), None);
        assert_eq!(name_from_plugin_file("lib-fi.so"), None);
    }
}
