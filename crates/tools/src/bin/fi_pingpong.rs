//! `fi_pingpong`: message latency between two endpoints (server and client).
//! See [`ofi_tools::pingpong`] and `fi_pingpong -h`.
#![forbid(unsafe_code)]

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let status = ofi_tools::pingpong::run(
        ofi_tools::pingpong::Tool::PingPong,
        &args,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    );
    std::process::exit(status);
}
