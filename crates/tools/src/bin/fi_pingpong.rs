//! `fi_pingpong`: message latency between two endpoints (server and client).
//! See [`ofi_tools::pingpong`] and `fi_pingpong -h`.
#![forbid(unsafe_code)]

fn main() {
    ofi_tools::pingpong::main(ofi_tools::pingpong::Tool::PingPong)
}
