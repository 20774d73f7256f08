//! `fi_info`: show the fabric services, providers and parameters of this system.
//! See [`ofi_tools::info`] and `fi_info -h`.
#![forbid(unsafe_code)]

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let status = ofi_tools::info::run(
        &args,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(status);
}
