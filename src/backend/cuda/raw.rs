//! The raw driver calls that cudarc's safe layer does not wrap. Every function here is a thin,
//! unsafe shim returning the driver's code; the safe types in `context.rs` build on them.
// Unsafe here: the driver calls cudarc does not wrap; every block says why it holds (`// SAFETY:`).
#![allow(unsafe_code)]

use std::ffi::c_void;

use cudarc::driver::result::DriverError;
use cudarc::driver::sys;

/// Whether libcuda can be loaded at all (cudarc panics on first use when it cannot).
pub fn culib_present() -> bool {
    // SAFETY: only tries to dlopen the driver library; no driver state is touched.
    unsafe { sys::is_culib_present() }
}

/// Whether libnvrtc can be loaded (cudarc panics on first use when it cannot).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the NVRTC library.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// The NVRTC library's version (major, minor), when it can be loaded.
pub fn nvrtc_version() -> Option<(i32, i32)> {
    if !nvrtc_present() {
        return None;
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is loaded (checked above); the call only writes the two integers.
    let code = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (code == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS).then_some((major, minor))
}

/// Page-locks `len` bytes at `ptr` for the current context (portable across contexts).
///
/// # Safety
/// `ptr..ptr+len` must be a live host allocation that stays allocated, and is not freed,
/// until [`host_unregister`] has been called on `ptr`.
pub unsafe fn host_register(ptr: *mut c_void, len: usize) -> Result<(), DriverError> {
    sys::cuMemHostRegister_v2(ptr, len, sys::CU_MEMHOSTREGISTER_PORTABLE).result()
}

/// Undoes [`host_register`].
///
/// # Safety
/// `ptr` must be the start of a range registered by [`host_register`] and still registered.
pub unsafe fn host_unregister(ptr: *mut c_void) -> Result<(), DriverError> {
    sys::cuMemHostUnregister(ptr).result()
}

/// Fills `count` u32 words at `dst` with `value`, ordered on `stream`.
///
/// # Safety
/// `dst` must point to at least `count` u32 words of device memory of the stream's context.
pub unsafe fn memset_u32(
    dst: sys::CUdeviceptr,
    value: u32,
    count: usize,
    stream: sys::CUstream,
) -> Result<(), DriverError> {
    sys::cuMemsetD32Async(dst, value, count, stream).result()
}

/// Destroys the primary context of GPU `ordinal` in this process, with every allocation,
/// module and stream made on it, and resets the device's state, so that the next retain makes
/// a fresh context. After a sticky error (an illegal address, a trap) releasing every retain
/// and retaining again gives back the broken context; a reset is what clears it.
///
/// # Safety
/// Nothing made on that context (by this value or any other in the process) may be used
/// again: every pointer, stream and module of it becomes dangling at once.
pub unsafe fn primary_context_reset(ordinal: usize) -> Result<(), DriverError> {
    let mut device: sys::CUdevice = 0;
    sys::cuDeviceGet(&mut device, ordinal as std::ffi::c_int).result()?;
    sys::cuDevicePrimaryCtxReset_v2(device).result()
}

/// Compiles `source` with NVRTC straight to machine code (a cubin) for `arch` (`sm_90`), so
/// that loading it costs the driver no JIT compile, unlike PTX. Err carries NVRTC's log.
/// cudarc's safe layer only returns PTX.
pub fn nvrtc_cubin(name: &str, source: &str, arch: &str) -> std::result::Result<Vec<u8>, String> {
    use cudarc::nvrtc::{result, sys as nvrtc};
    use std::ffi::{CStr, CString};
    if !nvrtc_present() {
        return Err("the NVRTC library (libnvrtc) was not found".into());
    }
    let source = CString::new(source).map_err(|_| "the source holds a NUL byte".to_string())?;
    let file = CString::new(format!("{name}.cu")).map_err(|_| "the name holds a NUL byte".to_string())?;
    let program = result::create_program(&source, Some(&file)).map_err(|e| format!("creating the program: {e:?}"))?;
    let options = [format!("--gpu-architecture={arch}")];
    // SAFETY: `program` was just created and is destroyed once, below, after its last use;
    // `source` and `file` outlive it. The cubin buffer is sized by NVRTC's own size query.
    let compiled = unsafe {
        match result::compile_program(program, &options) {
            Ok(()) => {
                let mut size = 0usize;
                let sized = nvrtc::nvrtcGetCUBINSize(program, &mut size);
                let mut cubin = vec![0u8; size];
                let copied = match sized {
                    nvrtc::nvrtcResult::NVRTC_SUCCESS => nvrtc::nvrtcGetCUBIN(program, cubin.as_mut_ptr().cast()),
                    failed => failed,
                };
                match copied {
                    nvrtc::nvrtcResult::NVRTC_SUCCESS => Ok(cubin),
                    failed => Err(format!("reading the cubin: {failed:?}")),
                }
            }
            Err(err) => {
                let log = result::get_program_log(program)
                    .map(|log| CStr::from_ptr(log.as_ptr()).to_string_lossy().into_owned())
                    .unwrap_or_default();
                Err(format!("{err:?} ({options:?}): {log}"))
            }
        }
    };
    // SAFETY: created above and not destroyed before.
    let _ = unsafe { result::destroy_program(program) };
    compiled
}
