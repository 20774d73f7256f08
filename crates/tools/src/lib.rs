//! ofi-tools: the command-line tools of ofi-rs, `fi_info`, `fi_strerror`, `fi_pingpong`
//! and `fi_bw`.
//!
//! Each tool is a thin binary over a `run` function here that takes the arguments and
//! the output streams and returns the exit status, so the logic is testable without
//! spawning processes:
//! - [`info`]: `fi_info` (providers, getinfo results, parameters);
//! - [`strerror`]: `fi_strerror` (the text of an error code);
//! - [`getopt`]: GNU-style option parsing with glibc's messages;
//! - [`json`]: the JSON forms printed by `fi_info --json`.
//! - [`pingpong`]: `fi_pingpong` (latency) and `fi_bw` (throughput) over any provider.
//!
//! The tools follow the output shapes and exit statuses of the C tools of libfabric 1.17;
//! each module says where and why it differs. Nothing here panics on bad input.
#![deny(unsafe_code)] // only `pingpong` (data calls, CPU affinity) allows it

pub mod getopt;
pub mod info;
pub mod json;
#[allow(unsafe_code)]
pub mod pingpong;
pub mod strerror;

/// The version of the `ofi` crate these tools are built against (read from its
/// `ofi::VERSION`).
pub const OFI_VERSION: &str = ofi::VERSION;
