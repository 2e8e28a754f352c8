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
    /// Name each registered buffer as a whole to warps (`Environment::global_range`, as the
    /// CPU runtime names its allocations), so that accesses all over a buffer hit the warp's
    /// cached range; otherwise warps cache the few bytes they asked about.
    pub whole_buffers: bool,
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

    fn global_range(&self, address: u64, len: u64) -> Option<(u64, u64)> {
        if !self.whole_buffers {
            return None;
        }
        let end = address.checked_add(len)?;
        self.ranges
            .lock()
            .unwrap()
            .iter()
            .find(|&&(a, l)| address >= a && end <= a + l)
            .map(|&(a, l)| (a, a + l))
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
        resident_ctas: workers,
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

/// A kernel whose lanes call one of two functions through a pointer: even lanes `twice`, odd
/// lanes `negate`; each lane stores its result at `out[lane]`.
pub const INDIRECT_CALL: &str = r#"
.func (.param .b32 r) twice(.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    shl.b32 %r2, %r1, 1;
    st.param.b32 [r], %r2;
    ret;
}
.func (.param .b32 r) negate(.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    neg.s32 %r2, %r1;
    st.param.b32 [r], %r2;
    ret;
}
.visible .entry pick(.param .u64 out)
{
    .reg .pred %p1;
    .reg .b32 %r<5>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 0;
    mov.u64 %rd2, twice;
    mov.u64 %rd3, negate;
    selp.b64 %rd4, %rd2, %rd3, %p1;
    {
        .param .b32 param0;
        st.param.b32 [param0], %r1;
        .param .b32 retval0;
        proto: .callprototype (.param .b32 _) _ (.param .b32 _);
        call (retval0), %rd4, (param0), proto;
        ld.param.b32 %r3, [retval0];
    }
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd1, %rd5;
    st.global.u32 [%rd6], %r3;
    ret;
}
"#;
