//! Compiles `src/shim.c` (variadic entries and `.symver` bindings) into the library.

fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    cc::Build::new()
        .file("src/shim.c")
        .flag_if_supported("-fvisibility=default")
        .warnings(true)
        .compile("ofi_capi_shim");
}
