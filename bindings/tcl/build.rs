//! Links Tcl 8.6 (Debian's `tcl-dev`: `libtcl8.6.so`); the few functions used are declared in
//! `src/ffi.rs`, so no headers or bindgen are needed.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-lib=tcl8.6");
}
