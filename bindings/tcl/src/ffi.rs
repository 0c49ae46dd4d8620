//! The part of Tcl 8.6's C API the binding uses, declared by hand (from `tcl.h` and
//! `tclDecls.h`).
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

/// `Tcl_Interp`: opaque here.
#[repr(C)]
pub struct Tcl_Interp {
    _private: [u8; 0],
}

/// `Tcl_Time`: Tcl's clock, the wall clock unless `Tcl_SetTimeProc` replaced it.
#[repr(C)]
pub struct Tcl_Time {
    pub sec: std::ffi::c_long,
    pub usec: std::ffi::c_long,
}

/// `Tcl_Obj`: opaque here.
#[repr(C)]
pub struct Tcl_Obj {
    _private: [u8; 0],
}

/// `Tcl_UniChar`: a UTF-16 unit, as Tcl 8.6 is built by default (`TCL_UTF_MAX` 3).
pub type Tcl_UniChar = u16;

/// `Tcl_TimerToken`: an opaque pointer.
pub type Tcl_TimerToken = *mut c_void;

/// `Tcl_TimerProc`.
pub type Tcl_TimerProc = unsafe extern "C" fn(client_data: *mut c_void);

pub const TCL_OK: c_int = 0;
pub const TCL_DONT_WAIT: c_int = 1 << 1;
pub const TCL_ALL_EVENTS: c_int = !TCL_DONT_WAIT;

extern "C" {
    pub fn Tcl_FindExecutable(argv0: *const c_char);
    pub fn Tcl_InitNotifier() -> *mut c_void;
    pub fn Tcl_CreateInterp() -> *mut Tcl_Interp;
    pub fn Tcl_DeleteInterp(interp: *mut Tcl_Interp);
    pub fn Tcl_FinalizeThread();
    pub fn Tcl_NewUnicodeObj(unicode: *const Tcl_UniChar, num_chars: c_int) -> *mut Tcl_Obj;
    pub fn Tcl_EvalObjEx(interp: *mut Tcl_Interp, object: *mut Tcl_Obj, flags: c_int) -> c_int;
    pub fn Tcl_GetObjResult(interp: *mut Tcl_Interp) -> *mut Tcl_Obj;
    pub fn Tcl_GetUnicodeFromObj(object: *mut Tcl_Obj, length: *mut c_int) -> *mut Tcl_UniChar;
    pub fn Tcl_DoOneEvent(flags: c_int) -> c_int;
    pub fn Tcl_GetTime(time: *mut Tcl_Time);
    pub fn Tcl_CreateTimerHandler(
        milliseconds: c_int,
        proc_: Tcl_TimerProc,
        client_data: *mut c_void,
    ) -> Tcl_TimerToken;
    pub fn Tcl_DeleteTimerHandler(token: Tcl_TimerToken);
}
