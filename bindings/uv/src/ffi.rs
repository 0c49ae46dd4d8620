//! The part of libuv's C API (1.x, `uv.h`) the binding uses, declared by hand. Handles and the
//! loop are opaque here and allocated with the sizes libuv reports.
#![allow(non_camel_case_types)]

use std::ffi::{c_int, c_void};

/// `uv_loop_t`, opaque.
#[repr(C)]
pub struct uv_loop_t {
    _private: [u8; 0],
}

/// `uv_handle_t` / `uv_timer_t`, opaque.
#[repr(C)]
pub struct uv_handle_t {
    _private: [u8; 0],
}

pub type uv_timer_cb = unsafe extern "C" fn(handle: *mut uv_handle_t);
pub type uv_close_cb = unsafe extern "C" fn(handle: *mut uv_handle_t);

/// `UV_TIMER` of `uv_handle_type`.
pub const UV_TIMER: c_int = 13;
/// `UV_RUN_NOWAIT` of `uv_run_mode`.
pub const UV_RUN_NOWAIT: c_int = 2;

extern "C" {
    pub fn uv_loop_size() -> usize;
    pub fn uv_loop_init(loop_: *mut uv_loop_t) -> c_int;
    pub fn uv_loop_close(loop_: *mut uv_loop_t) -> c_int;
    pub fn uv_run(loop_: *mut uv_loop_t, mode: c_int) -> c_int;
    pub fn uv_loop_alive(loop_: *const uv_loop_t) -> c_int;
    pub fn uv_backend_timeout(loop_: *const uv_loop_t) -> c_int;
    pub fn uv_update_time(loop_: *mut uv_loop_t);
    pub fn uv_now(loop_: *const uv_loop_t) -> u64;
    pub fn uv_hrtime() -> u64;
    pub fn uv_handle_size(kind: c_int) -> usize;
    pub fn uv_handle_get_data(handle: *const uv_handle_t) -> *mut c_void;
    pub fn uv_handle_set_data(handle: *mut uv_handle_t, data: *mut c_void);
    pub fn uv_close(handle: *mut uv_handle_t, close_cb: uv_close_cb);
    pub fn uv_timer_init(loop_: *mut uv_loop_t, handle: *mut uv_handle_t) -> c_int;
    pub fn uv_timer_start(
        handle: *mut uv_handle_t,
        cb: uv_timer_cb,
        timeout: u64,
        repeat: u64,
    ) -> c_int;
    pub fn uv_timer_stop(handle: *mut uv_handle_t) -> c_int;
}
