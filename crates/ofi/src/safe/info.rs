//! The hints builder ([`Hints`]) and the typed getinfo result ([`FabricInfo`]).
//!
//! `Hints::<K>::new()` asks for endpoints of kind `K`; the provider is the one
//! `FI_PROVIDER` names, else the best available (getinfo's order). Nothing here panics.

use std::marker::PhantomData;

use super::kind::EpKind;
use crate::{Caps, Errno, Error, GetinfoFlags, Info, MrMode, Result, API_VERSION};

/// A getinfo request for endpoints of kind `K`, built step by step.
///
/// ```no_run
/// use ofi::safe::{Hints, Rdm};
/// use ofi::Caps;
/// let info = Hints::<Rdm>::new().caps(Caps::TAGGED).first()?;
/// println!("using {}", info.provider());
/// # Ok::<(), ofi::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Hints<K: EpKind> {
    info: Info,
    node: Option<String>,
    service: Option<String>,
    flags: GetinfoFlags,
    _kind: PhantomData<K>,
}

impl<K: EpKind> Default for Hints<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: EpKind> Hints<K> {
    /// Hints for kind `K` with its default capabilities (`FI_MSG`), any provider
    /// (`FI_PROVIDER` still applies).
    pub fn new() -> Hints<K> {
        let mut info = Info::hints()
            .with_ep_type(K::EP_TYPE)
            .with_caps(K::DEFAULT_CAPS);
        // The safe layer registers buffers when asked to (FI_MR_LOCAL) and handles
        // offset-based and virtual-address RMA addressing and provider keys.
        info.domain_attr.mr_mode =
            MrMode::LOCAL | MrMode::VIRT_ADDR | MrMode::PROV_KEY | MrMode::ALLOCATED;
        Hints {
            info,
            node: None,
            service: None,
            flags: GetinfoFlags::empty(),
            _kind: PhantomData,
        }
    }

    /// Also require these capabilities (`FI_TAGGED`, `FI_RMA`, `FI_ATOMIC`,
    /// `FI_REMOTE_CQ_DATA`, …).
    pub fn caps(mut self, caps: Caps) -> Self {
        self.info.caps |= caps;
        self
    }

    /// Only this provider (the `FI_PROVIDER` grammar, e.g. `"tcp;ofi_rxm"`).
    pub fn provider(mut self, name: &str) -> Self {
        self.info = self.info.with_provider(name);
        self
    }

    /// The node (host) and service (port) to reach or, with [`Hints::source`], to
    /// listen on.
    pub fn node_service(mut self, node: Option<&str>, service: Option<&str>) -> Self {
        self.node = node.map(str::to_string);
        self.service = service.map(str::to_string);
        self
    }

    /// Treat node / service as the local address (`FI_SOURCE`), as a server does.
    pub fn source(mut self) -> Self {
        self.flags |= GetinfoFlags::SOURCE;
        self
    }

    /// The raw hints, to set any field the builder does not cover.
    pub fn info_mut(&mut self) -> &mut Info {
        &mut self.info
    }

    /// The raw hints.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// `fi_getinfo` with these hints: every match, best first. `FI_ENODATA` when
    /// nothing matches (the message says why).
    pub fn getinfo(&self) -> Result<Vec<FabricInfo<K>>> {
        let infos = crate::getinfo(
            API_VERSION,
            self.node.as_deref(),
            self.service.as_deref(),
            self.flags,
            Some(&self.info),
        )?;
        Ok(infos
            .into_iter()
            .filter_map(|i| FabricInfo::new(i).ok())
            .collect())
    }

    /// The best match (`FI_ENODATA` if none).
    pub fn first(&self) -> Result<FabricInfo<K>> {
        self.getinfo()?.into_iter().next().ok_or_else(|| {
            Error::new(
                Errno::ENODATA,
                format!("no provider offers {:?} endpoints", K::EP_TYPE),
            )
        })
    }
}

/// A getinfo result whose endpoint type is known to be `K`.
#[derive(Clone, Debug)]
pub struct FabricInfo<K: EpKind> {
    info: Info,
    _kind: PhantomData<K>,
}

impl<K: EpKind> FabricInfo<K> {
    /// Check that `info` describes endpoints of kind `K` (`FI_EINVAL` otherwise).
    pub fn new(info: Info) -> Result<FabricInfo<K>> {
        if info.ep_type() != K::EP_TYPE {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "info is for {:?} endpoints, not {:?}",
                    info.ep_type(),
                    K::EP_TYPE
                ),
            ));
        }
        Ok(FabricInfo {
            info,
            _kind: PhantomData,
        })
    }

    /// The provider's name (e.g. `shm`, `tcp;ofi_rxm`).
    pub fn provider(&self) -> &str {
        self.info.prov_name()
    }

    /// The raw info.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The largest message the endpoint takes.
    pub fn max_msg_size(&self) -> usize {
        self.info.ep_attr.max_msg_size
    }
}
