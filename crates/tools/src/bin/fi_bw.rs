//! `fi_bw`: message throughput with a window of messages in flight (server and client).
//! See [`ofi_tools::pingpong`] and `fi_bw -h`.
#![forbid(unsafe_code)]

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let status = ofi_tools::pingpong::run(
        ofi_tools::pingpong::Tool::Bw,
        &args,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    );
    std::process::exit(status);
}
