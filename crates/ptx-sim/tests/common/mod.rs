//! Test support: an environment that treats registered buffers as device memory, and a
//! launch helper taking parameter values as bytes.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Mutex;

use ptx_sim::{Environment, LaunchConfig, LaunchStats, Program, SimError, Texture, TextureRef};

/// Device memory of a test: host buffers the kernel may access.
#[derive(Default)]
pub struct TestEnv {
    ranges: Mutex<Vec<(u64, u64)>>,
    pub textures: HashMap<u64, Texture>,
    pub texrefs: HashMap<String, Texture>,
}

impl TestEnv {
    /// Makes `data` accessible and returns its address.
    pub fn register<T>(&self, data: &mut [T]) -> u64 {
        let address = data.as_mut_ptr() as u64;
        let len = std::mem::size_of_val(data) as u64;
        self.ranges.lock().unwrap().push((address, len));
        address
    }
}

impl Environment for TestEnv {
    fn global_accessible(&self, address: u64, len: u64) -> bool {
        let end = match address.checked_add(len) {
            Some(e) => e,
            None => return false,
        };
        self.ranges
            .lock()
            .unwrap()
            .iter()
            .any(|&(a, l)| address >= a && end <= a + l)
    }

    fn texture(&self, texture: TextureRef<'_>) -> Option<Texture> {
        match texture {
            TextureRef::Object(handle) => self.textures.get(&handle).copied(),
            TextureRef::Reference(name) => self.texrefs.get(name).copied(),
        }
    }
}

/// One kernel argument's bytes.
pub enum Arg {
    U32(u32),
    U64(u64),
    F32(f32),
    Bytes(Vec<u8>),
}

impl Arg {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Arg::U32(v) => v.to_le_bytes().to_vec(),
            Arg::U64(v) => v.to_le_bytes().to_vec(),
            Arg::F32(v) => v.to_le_bytes().to_vec(),
            Arg::Bytes(b) => b.clone(),
        }
    }
}

pub fn config(grid: [u32; 3], block: [u32; 3], workers: usize) -> LaunchConfig {
    LaunchConfig {
        grid,
        block,
        dynamic_shared_bytes: 0,
        workers,
    }
}

/// Launches `kernel` with `args`.
pub fn launch(
    program: &Program,
    kernel: &str,
    config: &LaunchConfig,
    args: &[Arg],
    env: &TestEnv,
) -> Result<LaunchStats, SimError> {
    let storage: Vec<Vec<u8>> = args.iter().map(Arg::bytes).collect();
    let pointers: Vec<*const u8> = storage.iter().map(|b| b.as_ptr()).collect();
    // SAFETY: each pointer refers to a live buffer holding the parameter's bytes, and every
    // global address the test kernels use was registered with `env` from a live buffer.
    unsafe { program.launch(kernel, config, &pointers, env) }
}

/// Launches `kernel`, whose one parameter is the address of `out`, and returns `out` as the
/// kernel left it.
pub fn launch_with_output<T>(
    program: &Program,
    kernel: &str,
    config: LaunchConfig,
    mut out: Vec<T>,
) -> Vec<T> {
    let env = TestEnv::default();
    let address = env.register(&mut out);
    launch(program, kernel, &config, &[Arg::U64(address)], &env)
        .unwrap_or_else(|e| panic!("launch failed: {e}"));
    out
}

/// A PTX module with the usual header.
pub fn ptx(body: &str) -> String {
    format!(".version 7.8\n.target sm_70\n.address_size 64\n\n{body}")
}

pub fn load(body: &str) -> Program {
    let text = ptx(body);
    Program::load(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}
