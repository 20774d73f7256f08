//! `fi_strerror CODE`: print the text of a fabric error code.
//! See [`ofi_tools::strerror`].
#![forbid(unsafe_code)]

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let status = ofi_tools::strerror::run(&args, &mut std::io::stdout().lock());
    std::process::exit(status);
}
