//! Library side of the compiler drivers `cuda-flux-clang` and `cuda-flux-nvcc` (so that their
//! pieces are testable).

pub mod driver;
pub mod registers;

// Shared with the `cuda-flux` command (crate `analysis`): the one-line error format, and the
// block text and source lines a snapshot records, which the driver writes and `annotate` reads.
pub use analysis::{error_line, snapshot_text};
