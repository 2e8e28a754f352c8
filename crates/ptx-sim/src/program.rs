//! A loaded PTX module and kernel launches. (Engine under construction.)

use crate::{Environment, LaunchConfig, SimError};

/// What the CPU runtime reports for a kernel (`cudaFuncGetAttributes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInfo {
    /// Byte size of each parameter, in order.
    pub param_sizes: Vec<usize>,
    /// Static `.shared` bytes the kernel uses (module- and function-level).
    pub static_shared_bytes: usize,
    /// `.local` bytes per thread.
    pub local_bytes: usize,
    /// The architecture of the PTX (`.target sm_70` gives 70).
    pub arch: u32,
}

/// One loaded PTX module.
pub struct Program {
    _private: (),
}

impl Program {
    /// Parses and decodes a PTX module and allocates its module variables.
    pub fn load(_ptx: &str) -> Result<Program, SimError> {
        Err(SimError::Parse(
            "the PTX interpreter is not built yet".into(),
        ))
    }

    /// The kernels (`.entry` functions with bodies) of the module.
    pub fn kernels(&self) -> Vec<&str> {
        Vec::new()
    }

    /// Facts about a kernel.
    pub fn kernel(&self, _name: &str) -> Option<KernelInfo> {
        None
    }

    /// Host address and size in bytes of a module-level `.global` or `.const` variable.
    pub fn symbol(&self, _name: &str) -> Option<(u64, u64)> {
        None
    }

    /// Runs `kernel` on the grid of `config` and returns when every CTA finished.
    ///
    /// # Safety
    /// `args` holds one pointer per kernel parameter, each to a value of that parameter's
    /// size (CUDA's `void** args`); global addresses the kernel uses must be valid host memory
    /// wherever `env.global_accessible` says so.
    pub unsafe fn launch(
        &self,
        kernel: &str,
        _config: &LaunchConfig,
        _args: &[*const u8],
        _env: &dyn Environment,
    ) -> Result<(), SimError> {
        Err(SimError::UnknownKernel(kernel.to_owned()))
    }
}
