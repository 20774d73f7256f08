//! The endpoint handle of a provider built on [`layered`](crate::layered)'s glue (rxm,
//! rxd, efa): a handle holds an `Arc` of the endpoint's shared state and its own default
//! operation flags (a [`DefaultOpFlags`](crate::opflags::DefaultOpFlags): an alias has
//! its own), and the shared state keeps, under the same field names in every such
//! provider,
//!
//! | field      | type                                   | what                                |
//! | ---------- | -------------------------------------- | ----------------------------------- |
//! | `setup`    | `Mutex<`[`Bindings`](crate::ep::Bindings)`>` | the bindings made before `fi_enable` |
//! | `active`   | `OnceLock<`[`Bound`](crate::ep::Bound)`>`    | what `fi_enable` froze               |
//! | `engine`   | `Arc<`[`ProgressEngine`](crate::progress::ProgressEngine)`>` | the domain's progress engine |
//! | `me_bytes` | `Vec<u8>` or [`SettableName`](crate::layered::SettableName) | the endpoint's name (`fi_getname`) |
//! | `directed` | `bool`                                 | `FI_DIRECTED_RECV` honoured          |
//!
//! Two macros then write what every such handle spelled out again:
//! [`layered_endpoint_state!`](crate::layered_endpoint_state) (the accessors of
//! [`LayeredEndpoint`](crate::layered::LayeredEndpoint) that only read those fields) and
//! [`layered_handle_ops!`](crate::layered_handle_ops) (the endpoint methods of the glue,
//! `fi_control`'s flag commands and `fi_ep_alias`). What differs between providers — the
//! matcher, the transmit room, remote-access counters — stays in each provider.
//!
//! Nothing here panics; errors are those of the glue and of
//! [`DefaultOpFlags::alias`](crate::opflags::DefaultOpFlags::alias).

/// Inside `impl LayeredEndpoint for Endpoint`: `bindings`, `bound`, `engine`,
/// `name_bytes` and `directed` read the shared state `self.$shared` (the fields named in
/// the [module docs](crate::layered_handle)); `bind_rules` is `$rules`; `tx_op_flags`
/// and `rx_op_flags` are this handle's defaults, `self.$flags`.
#[macro_export]
macro_rules! layered_endpoint_state {
    (shared: $shared:ident, flags: $flags:ident, rules: $rules:expr $(,)?) => {
        fn bindings(&self) -> &::std::sync::Mutex<$crate::ep::Bindings> {
            &self.$shared.setup
        }

        fn bound(&self) -> &::std::sync::OnceLock<$crate::ep::Bound> {
            &self.$shared.active
        }

        fn bind_rules(&self) -> &$crate::ep::BindRules {
            &$rules
        }

        fn engine(&self) -> &$crate::progress::ProgressEngine {
            &self.$shared.engine
        }

        fn name_bytes(&self) -> ::std::vec::Vec<u8> {
            self.$shared.me_bytes.to_vec()
        }

        fn tx_op_flags(&self) -> $crate::core::OpFlags {
            self.$flags.tx()
        }

        fn rx_op_flags(&self) -> $crate::core::OpFlags {
            self.$flags.rx()
        }

        fn directed(&self) -> bool {
            self.$shared.directed
        }
    };
}

/// Inside `impl EndpointOps<Fabric> for Endpoint`, given the fabric type: the glue's
/// endpoint methods ([`layered_endpoint_ops!`](crate::layered_endpoint_ops)),
/// `FI_GETOPSFLAG` / `FI_SETOPSFLAG` on `self.$flags`
/// ([`op_flags_control!`](crate::op_flags_control)) and `alias` (`fi_ep_alias`): a new
/// handle on the same shared state `self.$shared` with a copy of this handle's default
/// flags, one side set from the alias flags (`FI_EINVAL` / `FI_EBADFLAGS` as
/// [`DefaultOpFlags::alias`](crate::opflags::DefaultOpFlags::alias) says). Any further
/// fields of the handle are listed after the flags with the value an alias gets.
#[macro_export]
macro_rules! layered_handle_ops {
    ($fabric:ty, shared: $shared:ident, flags: $flags:ident $(, $field:ident: $value:expr)* $(,)?) => {
        $crate::layered_endpoint_ops!($fabric);

        $crate::op_flags_control!($flags);

        /// `fi_ep_alias`: the same endpoint with its own default flags (a copy of this
        /// handle's, then one side set from `flags`).
        fn alias(&self, flags: u64) -> $crate::core::Result<Self> {
            Ok(Self {
                $shared: ::std::sync::Arc::clone(&self.$shared),
                $flags: self.$flags.alias(
                    <Self as $crate::dataops::DataPath>::NAME,
                    flags,
                    <Self as $crate::dataops::DataPath>::OP_FLAGS,
                )?,
                $($field: $value,)*
            })
        }
    };
}
