//! Links libuv (Debian's `libuv1-dev`); the few functions used are declared in `src/ffi.rs`.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-lib=uv");
}
