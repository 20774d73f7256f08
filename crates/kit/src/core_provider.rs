//! The skeleton every kit-built core provider shares: a provider value that is its
//! settings, read once at init, and a fabric opened with a copy of them.
//!
//! [`core_provider!`](macro@crate::core_provider) declares the provider type, its `settings`
//! accessor and the `Provider` implementation around the methods that are the provider's
//! own (`info_templates`, `getinfo`), and a unit test that the version follows the
//! crate's version. It is the core-provider counterpart of
//! [`layered_provider!`](crate::layered_provider).
//!
//! [`settings_fabric!`](macro@crate::settings_fabric) declares the fabric of such a
//! provider when the fabric holds nothing but those settings.

/// Declares a core provider whose state is its settings:
///
/// ```text
/// ofi_kit::core_provider! {
///     /// The `tcp` provider.
///     pub struct TcpProvider(Settings) {
///         NAME = NAME, VERSION = Version::new(1, 0), Fabric = Fabric;
///     }
///     fn info_templates(&self) -> Vec<Info> { … }
///     fn getinfo(&self, req: &GetinfoRequest) -> GetinfoOutcome { … }
/// }
/// ```
///
/// The settings type has `fn from_host(&Host) -> Result<Settings>` (init reads the
/// parameters with it and logs the result at debug level) and is `Clone + Debug`; the
/// fabric type has `fn open(Settings, &Info) -> Result<Fabric>`, which
/// [`Provider::fabric`](crate::core::provider::Provider) calls with a copy of the
/// settings. The methods after the declaration go into the `Provider` implementation.
/// The version test checks `VERSION` against `prov_version_from_crate` of the crate's
/// version.
#[macro_export]
macro_rules! core_provider {
    (
        $(#[$meta:meta])*
        $vis:vis struct $prov:ident($settings:ty) {
            NAME = $name:expr, VERSION = $version:expr, Fabric = $fabric:ty;
        }
        $($method:item)*
    ) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis struct $prov {
            settings: $settings,
        }

        impl $prov {
            /// The settings this instance was initialised with.
            pub fn settings(&self) -> &$settings {
                &self.settings
            }
        }

        impl $crate::core::provider::Provider for $prov {
            const NAME: &'static str = $name;
            const VERSION: $crate::core::Version = $version;
            type Fabric = $fabric;

            fn init(host: &$crate::core::provider::Host) -> $crate::core::Result<Self> {
                let settings = <$settings>::from_host(host)?;
                $crate::core::ofi_debug!($name, "core", "initialised: {settings:?}");
                Ok($prov { settings })
            }

            fn fabric(&self, info: &$crate::core::Info) -> $crate::core::Result<$fabric> {
                <$fabric>::open(self.settings.clone(), info)
            }

            $($method)*
        }

        $crate::provider_version_test!($prov);
    };
}

/// Writes the unit test `provider_version_follows_the_crate_version`: provider `Prov`'s
/// `VERSION` is `prov_version_from_crate` of the version of the crate that invokes it.
/// [`core_provider!`](macro@crate::core_provider) and
/// [`layered_provider!`](crate::layered_provider) write it for their provider.
#[macro_export]
macro_rules! provider_version_test {
    ($prov:ty) => {
        #[cfg(test)]
        #[test]
        fn provider_version_follows_the_crate_version() {
            assert_eq!(
                <$prov as $crate::core::provider::Provider>::VERSION,
                $crate::core::version::prov_version_from_crate(env!("CARGO_PKG_VERSION"))
            );
        }
    };
}

/// Declares the fabric of a core provider that keeps nothing at the fabric level but the
/// provider's settings: no passive endpoints (`Unsupported`), the kit's EQs and wait
/// sets ([`kit_fabric_ops!`](macro@crate::kit_fabric_ops)):
///
/// ```text
/// ofi_kit::settings_fabric! {
///     /// A fabric.
///     pub struct Fabric(Settings) {
///         Domain = Domain, check = check_ep_type;
///     }
/// }
/// ```
///
/// `Fabric::open(settings, &Info)` (what [`core_provider!`](macro@crate::core_provider)'s
/// `Provider::fabric` calls) runs `check(&Info) -> Result<()>` and keeps the settings;
/// `Fabric::check_info` is that check, for the domain and its endpoints to run on their
/// own `Info`; `fi_domain` opens `Domain::open(&Settings, &Info) -> Result<Domain>`.
#[macro_export]
macro_rules! settings_fabric {
    (
        $(#[$meta:meta])*
        $vis:vis struct $fabric:ident($settings:ty) {
            Domain = $domain:ty, check = $check:expr;
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis struct $fabric {
            settings: $settings,
        }

        impl $fabric {
            /// Open the fabric for `info` with the provider's settings.
            ///
            /// # Errors
            /// Those of [`Self::check_info`].
            pub fn open(
                settings: $settings,
                info: &$crate::core::Info,
            ) -> $crate::core::Result<$fabric> {
                Self::check_info(info)?;
                Ok($fabric { settings })
            }

            /// The provider's check of an `info` its fabric, domains or endpoints are
            /// opened with.
            ///
            /// # Errors
            /// `FI_EINVAL` for an `info` the provider does not serve.
            pub fn check_info(info: &$crate::core::Info) -> $crate::core::Result<()> {
                ($check)(info)
            }
        }

        impl $crate::core::provider::FabricOps for $fabric {
            type Domain = $domain;
            type PassiveEp = $crate::core::provider::Unsupported;
            $crate::kit_fabric_ops!();

            fn domain(
                &self,
                info: &$crate::core::Info,
                _context: usize,
            ) -> $crate::core::Result<$domain> {
                <$domain>::open(&self.settings, info)
            }
        }
    };
}
