//! `cudaError_t` values, their names and strings, and the per-thread last error.

use std::cell::Cell;

use thiserror::Error;

use crate::error_table::ERRORS;

/// A `cudaError_t` as the C ABI passes it.
pub type Code = i32;

/// `cudaSuccess`.
pub const SUCCESS: Code = 0;

/// The errors this runtime returns. `Display` is cudart's `cudaGetErrorString` text; the
/// discriminant is the header's value.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum CudaError {
    #[error("invalid argument")]
    InvalidValue = 1,
    #[error("out of memory")]
    MemoryAllocation = 2,
    #[error("invalid configuration argument")]
    InvalidConfiguration = 9,
    #[error("invalid pitch argument")]
    InvalidPitchValue = 12,
    #[error("invalid device symbol")]
    InvalidSymbol = 13,
    #[error("invalid texture reference")]
    InvalidTexture = 18,
    #[error("invalid channel descriptor")]
    InvalidChannelDescriptor = 20,
    #[error("invalid copy direction for memcpy")]
    InvalidMemcpyDirection = 21,
    #[error("__global__ function call is not configured")]
    MissingConfiguration = 52,
    #[error("invalid device function")]
    InvalidDeviceFunction = 98,
    #[error("invalid device ordinal")]
    InvalidDevice = 101,
    #[error("limit is not supported on this architecture")]
    UnsupportedLimit = 215,
    #[error("invalid resource handle")]
    InvalidResourceHandle = 400,
    #[error("part or all of the requested memory range is already mapped")]
    HostMemoryAlreadyRegistered = 712,
    #[error("pointer does not correspond to a registered memory region")]
    HostMemoryNotRegistered = 713,
    #[error("too many blocks in cooperative launch")]
    CooperativeLaunchTooLarge = 720,
    #[error("operation not supported")]
    NotSupported = 801,
    #[error("unknown error")]
    Unknown = 999,
}

impl CudaError {
    /// The `cudaError_t` value.
    pub fn code(self) -> Code {
        self as Code
    }
}

/// What `cudaGetErrorName` and `cudaGetErrorString` return for a value the header does not
/// define (as cudart does).
pub const UNRECOGNIZED: &str = "unrecognized error code";

/// `cudaGetErrorName`: the enumerator's name.
pub fn error_name(code: Code) -> &'static str {
    lookup(code).map_or(UNRECOGNIZED, |(_, name, _)| name)
}

/// `cudaGetErrorString`: the description.
pub fn error_string(code: Code) -> &'static str {
    lookup(code).map_or(UNRECOGNIZED, |(_, _, text)| text)
}

fn lookup(code: Code) -> Option<&'static (i32, &'static str, &'static str)> {
    ERRORS
        .binary_search_by_key(&code, |(value, _, _)| *value)
        .ok()
        .map(|index| &ERRORS[index])
}

thread_local! {
    /// The calling host thread's last error: set by every failing call, read (and reset) by
    /// `cudaGetLastError`, read by `cudaPeekAtLastError`.
    static LAST_ERROR: Cell<Code> = const { Cell::new(SUCCESS) };
}

/// Records the outcome of an API call and returns its code: failures become the thread's last
/// error, successes leave it alone (as cudart does).
pub fn record(result: Result<(), CudaError>) -> Code {
    match result {
        Ok(()) => SUCCESS,
        Err(error) => {
            LAST_ERROR.with(|last| last.set(error.code()));
            error.code()
        }
    }
}

/// `cudaGetLastError`: the last error, which is reset to `cudaSuccess`.
pub fn take_last_error() -> Code {
    LAST_ERROR.with(|last| last.replace(SUCCESS))
}

/// `cudaPeekAtLastError`: the last error, left in place.
pub fn peek_last_error() -> Code {
    LAST_ERROR.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        assert!(ERRORS.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(ERRORS[0], (0, "cudaSuccess", "no error"));
    }

    #[test]
    fn every_returned_error_has_its_string_and_name_in_the_table() {
        use CudaError::*;
        for error in [
            InvalidValue,
            MemoryAllocation,
            InvalidConfiguration,
            InvalidPitchValue,
            InvalidSymbol,
            InvalidTexture,
            InvalidChannelDescriptor,
            InvalidMemcpyDirection,
            MissingConfiguration,
            InvalidDeviceFunction,
            InvalidDevice,
            UnsupportedLimit,
            InvalidResourceHandle,
            HostMemoryAlreadyRegistered,
            HostMemoryNotRegistered,
            CooperativeLaunchTooLarge,
            NotSupported,
            Unknown,
        ] {
            assert_eq!(error_string(error.code()), error.to_string(), "{error:?}");
            assert_eq!(error_name(error.code()), format!("cudaError{error:?}"));
        }
    }

    #[test]
    fn unknown_codes_are_unrecognized() {
        assert_eq!(error_name(12345), UNRECOGNIZED);
        assert_eq!(error_string(-1), UNRECOGNIZED);
    }

    #[test]
    fn last_error_is_per_thread_and_get_resets_it() {
        assert_eq!(record(Err(CudaError::InvalidValue)), 1);
        assert_eq!(record(Ok(())), SUCCESS);
        std::thread::spawn(|| assert_eq!(peek_last_error(), SUCCESS))
            .join()
            .unwrap();
        assert_eq!(peek_last_error(), 1);
        assert_eq!(take_last_error(), 1);
        assert_eq!(take_last_error(), SUCCESS);
    }
}
