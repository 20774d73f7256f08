//! Declares the `loom` cfg (the ring model check runs with `RUSTFLAGS="--cfg loom"`).
fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
