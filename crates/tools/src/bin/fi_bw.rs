//! `fi_bw`: message throughput with a window of messages in flight (server and client).
//! See [`ofi_tools::pingpong`] and `fi_bw -h`.
#![forbid(unsafe_code)]

fn main() {
    ofi_tools::pingpong::main(ofi_tools::pingpong::Tool::Bw)
}
