//! The runtime on a simulated device: device and pinned memory are host memory, "kernels" are
//! closures over their counter buffer, events complete at once (or never, on request).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::*;
use crate::cuda::{DeviceInfo, FuncInfo, FuncSetting, STREAM_PER_THREAD};
use crate::report::Counts;
use crate::snapshot::Block;

const ORIGINAL: usize = 0x1000;
const CLONE: usize = 0x2000;
const OTHER: usize = 0x3000;
const NO_DEVICE: Code = 100;
const OUT_OF_RESOURCES: Code = 701;
const INVALID_DEVICE_FUNCTION: Code = 98;

/// Per-block (threads, warps) the simulated clone adds per launch.
const PER_BLOCK: [(u64, u64); 3] = [(64, 2), (512, 16), (60, 2)];

#[derive(Default)]
struct Fake {
    devices: i32,
    binary_version: i32,
    max_threads: i32,
    clone_attributes_fail: bool,
    clone_launch_fails: bool,
    capturing: bool,
    events_never_ready: bool,
    /// Blocks whose counts the clone adds packed (threads + warps x 2^32 to the first
    /// counter), as device-runtime's `packed_update` does.
    packed: Vec<usize>,
    state: Mutex<FakeState>,
}

#[derive(Default)]
struct FakeState {
    device: i32,
    next: u64,
    memory: HashMap<u64, Vec<u64>>,
    host: HashMap<usize, Vec<u64>>,
    events: HashSet<usize>,
    /// (function, argument pointers, launch call, stream) of every launch that ran.
    launches: Vec<(usize, Vec<usize>, LaunchKind, usize)>,
    /// The runtime's own calls on a stream, in order: ("capturing" | "memset" | "copy" |
    /// "record", stream).
    queued: Vec<(&'static str, usize)>,
    /// (counter buffer, banks) each clone launch received.
    clone_extras: Vec<(u64, u32)>,
    /// Every per-function setting made, in order.
    func_settings: Vec<(usize, FuncSetting)>,
    mallocs: usize,
    frees: usize,
    syncs: usize,
    resets: usize,
    last_error: Code,
    capture_mode: i32,
    exchanges: usize,
}

impl Fake {
    fn gpu(binary_version: i32) -> Self {
        Fake {
            devices: 1,
            binary_version,
            max_threads: 1024,
            ..Fake::default()
        }
    }

    fn st(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.state.lock().unwrap()
    }

    fn fail(&self, code: Code) -> Code {
        self.st().last_error = code;
        code
    }
}

impl Cuda for Fake {
    fn device_count(&self) -> Result<i32, Code> {
        if self.devices == 0 {
            return Err(self.fail(NO_DEVICE));
        }
        Ok(self.devices)
    }
    fn get_device(&self) -> Result<i32, Code> {
        Ok(self.st().device)
    }
    fn set_device(&self, device: i32) -> Result<(), Code> {
        self.st().device = device;
        Ok(())
    }
    fn device_info(&self, _device: i32) -> Result<DeviceInfo, Code> {
        Ok(DeviceInfo {
            name: "Simulated H200".into(),
            major: self.binary_version / 10,
            minor: self.binary_version % 10,
        })
    }
    fn func_info(&self, func: usize) -> Result<FuncInfo, Code> {
        if func == CLONE && self.clone_attributes_fail {
            return Err(self.fail(INVALID_DEVICE_FUNCTION));
        }
        Ok(FuncInfo {
            binary_version: self.binary_version,
            max_threads_per_block: self.max_threads,
        })
    }
    fn func_set(&self, func: usize, setting: FuncSetting) -> Code {
        if self.devices == 0 {
            return self.fail(NO_DEVICE);
        }
        if ![ORIGINAL, CLONE, OTHER].contains(&func) {
            return self.fail(INVALID_DEVICE_FUNCTION);
        }
        if func == CLONE && self.clone_attributes_fail {
            return self.fail(INVALID_DEVICE_FUNCTION);
        }
        self.st().func_settings.push((func, setting));
        SUCCESS
    }
    fn malloc(&self, bytes: usize) -> Result<u64, Code> {
        let mut st = self.st();
        assert_eq!(
            st.capture_mode, CAPTURE_MODE_RELAXED,
            "allocations run relaxed"
        );
        st.next += 0x10_0000;
        let ptr = st.next;
        st.memory.insert(ptr, vec![0xdead; bytes / 8]);
        st.mallocs += 1;
        Ok(ptr)
    }
    fn free(&self, ptr: u64) {
        let mut st = self.st();
        st.memory.remove(&ptr).unwrap();
        st.frees += 1;
    }
    fn malloc_host(&self, bytes: usize) -> Result<usize, Code> {
        let mut buffer = vec![0xbeef_u64; bytes / 8];
        let ptr = buffer.as_mut_ptr() as usize;
        self.st().host.insert(ptr, buffer);
        Ok(ptr)
    }
    fn free_host(&self, ptr: usize) {
        self.st().host.remove(&ptr).unwrap();
    }
    fn event_create(&self) -> Result<usize, Code> {
        let mut st = self.st();
        st.next += 1;
        let event = st.next as usize;
        st.events.insert(event);
        Ok(event)
    }
    fn event_destroy(&self, event: usize) {
        assert!(self.st().events.remove(&event));
    }
    fn event_record(&self, event: usize, stream: usize) -> Result<(), Code> {
        let mut st = self.st();
        assert!(st.events.contains(&event));
        st.queued.push(("record", stream));
        Ok(())
    }
    fn event_query(&self, _event: usize) -> Result<bool, Code> {
        Ok(!self.events_never_ready)
    }
    fn event_synchronize(&self, _event: usize) -> Result<(), Code> {
        let mut st = self.st();
        assert_eq!(st.capture_mode, CAPTURE_MODE_RELAXED, "waits run relaxed");
        st.syncs += 1;
        Ok(())
    }
    fn memset_async(&self, ptr: u64, bytes: usize, stream: usize) -> Result<(), Code> {
        let mut st = self.st();
        st.queued.push(("memset", stream));
        let memory = st.memory.get_mut(&ptr).unwrap();
        memory[..bytes / 8].fill(0);
        Ok(())
    }
    fn memcpy_to_host_async(
        &self,
        host: usize,
        device: u64,
        bytes: usize,
        stream: usize,
    ) -> Result<(), Code> {
        let mut st = self.st();
        st.queued.push(("copy", stream));
        let words: Vec<u64> = st.memory[&device][..bytes / 8].to_vec();
        st.host.get_mut(&host).unwrap()[..bytes / 8].copy_from_slice(&words);
        Ok(())
    }
    fn stream_is_capturing(&self, stream: usize) -> Result<bool, Code> {
        self.st().queued.push(("capturing", stream));
        Ok(self.capturing)
    }
    unsafe fn launch(
        &self,
        kind: LaunchKind,
        func: usize,
        grid: Dim3,
        _block: Dim3,
        args: *mut *mut c_void,
        _shared_bytes: usize,
        stream: usize,
    ) -> Code {
        if self.devices == 0 {
            return self.fail(NO_DEVICE);
        }
        let params = 2;
        if func == CLONE {
            if self.clone_launch_fails {
                return self.fail(OUT_OF_RESOURCES);
            }
            let all = unsafe { std::slice::from_raw_parts(args, params + 2) };
            let counters = unsafe { *(all[params] as *const u64) };
            let banks = unsafe { *(all[params + 1] as *const u32) };
            let mut st = self.st();
            st.launches.push((
                func,
                all.iter().map(|&p| p as usize).collect(),
                kind,
                stream,
            ));
            st.clone_extras.push((counters, banks));
            // Spread each block's counts over two banks, as different CTAs would.
            let memory = st.memory.get_mut(&counters).unwrap();
            let blocks = PER_BLOCK.len();
            // The low 24 bits are the bank mask (count - 1) and the top byte the mode; ranged
            // banks (device-runtime's MODE_RANGES) are ranges of CTA ids times SM banks, and
            // the second half of each count goes to the last range's last bank.
            let banks = if banks >> device_runtime::MODE_SHIFT == device_runtime::MODE_RANGES {
                let mask = banks & ((1 << device_runtime::RANGE_SHIFT_BIT) - 1);
                let shift = (banks >> device_runtime::RANGE_SHIFT_BIT) & 63;
                let ctas = u64::from(grid.x) * u64::from(grid.y) * u64::from(grid.z);
                (ctas.div_ceil(1 << shift) * u64::from(mask + 1)) as usize
            } else {
                (banks & 0xFF_FFFF) as usize + 1
            };
            assert!(
                memory.len() >= banks * blocks * 2,
                "the buffer holds every bank"
            );
            let packed = |t: u64, w: u64| t + (w << 32);
            for (b, &(t, w)) in PER_BLOCK.iter().enumerate() {
                let second = if banks > 2 {
                    banks - 1
                } else {
                    (b + 1) % banks
                };
                let halves = [(0, t / 2, w / 2), (second, t - t / 2, w - w / 2)];
                for (bank, t, w) in halves {
                    let at = (bank * blocks + b) * 2;
                    if self.packed.contains(&b) {
                        memory[at] += packed(t, w);
                    } else {
                        memory[at] += t;
                        memory[at + 1] += w;
                    }
                }
            }
        } else {
            let all = unsafe { std::slice::from_raw_parts(args, params) };
            self.st().launches.push((
                func,
                all.iter().map(|&p| p as usize).collect(),
                kind,
                stream,
            ));
        }
        SUCCESS
    }
    fn exchange_capture_mode(&self, mode: i32) -> Result<i32, Code> {
        self.st().exchanges += 1;
        if self.devices == 0 {
            return Err(self.fail(NO_DEVICE));
        }
        Ok(std::mem::replace(&mut self.st().capture_mode, mode))
    }
    fn clear_error(&self) {
        self.st().last_error = SUCCESS;
    }
    fn device_reset(&self) -> Code {
        let mut st = self.st();
        st.resets += 1;
        st.memory.clear();
        SUCCESS
    }
    fn error_name(&self, code: Code) -> String {
        format!("cudaError{code} ({code})")
    }
}

fn block(label: Option<&str>, instructions: &[&str]) -> Block {
    Block {
        function: "_Z4loopPfS_".into(),
        label: label.map(str::to_owned),
        instructions: instructions.iter().map(|s| s.to_string()).collect(),
        ..Block::default()
    }
}

fn snapshot(arch: u32) -> Snapshot {
    let mut snapshot = Snapshot {
        kernel: "_Z4loopPfS_".into(),
        demangled: "loop(float*, float*)".into(),
        source: "loop.cu".into(),
        arch,
        instrumented: true,
        reason: None,
        params: 2,
        blocks: vec![
            block(None, &["ld.param.u64", "setp.ge.s32", "bra.uni"]),
            block(
                Some("$L__BB0_1"),
                &[
                    "ld.global.f32",
                    "fma.rn.f32",
                    "st.global.f32",
                    "setp.lt.s32",
                    "bra.uni",
                ],
            ),
            block(Some("$L__BB0_2"), &["ret"]),
        ],
        files: [(1, "loop.cu".to_owned())].into_iter().collect(),
        entry_from_launch: false,
        launch_counted: Vec::new(),
        copied_counts: Vec::new(),
        thread_flows: Vec::new(),
        warp_differences: Vec::new(),
        packed_counts: Vec::new(),
    };
    // Line information as a `-lineinfo` build records it: text per instruction, `.loc` runs
    // (the entry block's first instruction precedes any `.loc`).
    for block in &mut snapshot.blocks {
        block.text = block
            .instructions
            .iter()
            .map(|op| format!("{op} %r1;"))
            .collect();
        let n = block.instructions.len() as u32;
        block.lines = if block.label.is_none() {
            vec![[0, 0, 1], [1, 3, n - 1]]
        } else {
            vec![[1, 5, n]]
        };
    }
    snapshot
}

fn json(snapshot: &Snapshot) -> Vec<u8> {
    snapshot.to_json().unwrap().into_bytes()
}

struct Setup {
    runtime: Runtime<Fake>,
    messages: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
    output: PathBuf,
}

fn setup(fake: Fake, vars: &[(&str, &str)]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("profile.json");
    let mut vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vars.entry("CUDA_FLUX_OUTPUT".into())
        .or_insert_with(|| output.to_str().unwrap().to_owned());
    let (config, parse_messages) =
        Config::parse(|n| vars.get(n).map(Into::into), 1, Some(dir.path()));
    assert!(parse_messages.is_empty() || vars.contains_key("CUDA_FLUX_MODE"));
    let messages = Arc::new(Mutex::new(Vec::new()));
    let sink = messages.clone();
    let runtime = Runtime::new(
        fake,
        config,
        std::process::id(),
        Box::new(move |line| sink.lock().unwrap().push(line.to_owned())),
    );
    Setup {
        runtime,
        messages,
        _dir: dir,
        output,
    }
}

fn dim(x: u32, y: u32, z: u32) -> Dim3 {
    Dim3 { x, y, z }
}

/// Launches `func` with two arguments; returns the code and the argument pointers.
fn launch_on(
    runtime: &Runtime<Fake>,
    func: usize,
    grid: Dim3,
    block: Dim3,
    stream: usize,
) -> (Code, [usize; 2]) {
    launch_as(runtime, LaunchKind::Plain, func, grid, block, stream)
}

/// As [`launch_on`], through the launch call `kind` names.
fn launch_as(
    runtime: &Runtime<Fake>,
    kind: LaunchKind,
    func: usize,
    grid: Dim3,
    block: Dim3,
    stream: usize,
) -> (Code, [usize; 2]) {
    let (mut a, mut b) = (1.0f32, 2u64);
    let mut args: [*mut c_void; 2] = [(&mut a as *mut f32).cast(), (&mut b as *mut u64).cast()];
    let launched = Cell::new(None);
    let code = unsafe {
        runtime.launch(
            kind,
            func as *const c_void,
            grid,
            block,
            args.as_mut_ptr(),
            48,
            stream as *mut c_void,
            &launched,
        )
    };
    assert_eq!(
        launched.get(),
        Some(code),
        "the program's kernel was launched exactly when reported"
    );
    (code, [args[0] as usize, args[1] as usize])
}

/// The runtime's calls on `stream` for one counted launch.
fn on_stream(stream: usize) -> [(&'static str, usize); 4] {
    [
        ("capturing", stream),
        ("memset", stream),
        ("copy", stream),
        ("record", stream),
    ]
}

fn launch(runtime: &Runtime<Fake>, func: usize) -> Code {
    launch_on(runtime, func, dim(4, 1, 1), dim(64, 1, 1), 0).0
}

fn read_report(path: &Path) -> (Report, serde_json::Value) {
    let text = std::fs::read_to_string(path).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    validate(&value);
    (serde_json::from_value(value.clone()).unwrap(), value)
}

fn schema() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cuda-flux-1.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn validate(value: &serde_json::Value) {
    let validator = jsonschema::draft202012::new(&schema()).expect("the schema is valid");
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "output does not match the schema: {errors:#?}"
    );
}

fn messages(setup: &Setup) -> Vec<String> {
    setup.messages.lock().unwrap().clone()
}

#[test]
fn without_a_gpu_launches_are_forwarded_and_nothing_is_written() {
    let s = setup(Fake::default(), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(launch(&s.runtime, ORIGINAL), NO_DEVICE);
    assert_eq!(launch(&s.runtime, ORIGINAL), NO_DEVICE);
    assert_eq!(launch(&s.runtime, OTHER), NO_DEVICE);
    // The launch's error is what the program sees, as in the plain build.
    assert_eq!(s.runtime.cuda.st().last_error, NO_DEVICE);
    assert_eq!(s.runtime.cuda.st().mallocs, 0);
    assert_eq!(
        s.runtime.cuda.st().exchanges,
        0,
        "no CUDA call beyond the device count"
    );
    s.runtime.exit();
    assert!(!s.output.exists());
    assert_eq!(
        std::fs::read_dir(s._dir.path()).unwrap().count(),
        0,
        "no stray files"
    );
    assert!(messages(&s).is_empty());
}

#[test]
fn counts_launches_and_writes_a_valid_profile() {
    let s = setup(Fake::gpu(90), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(90)));
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    let (code, args) = launch_on(&s.runtime, ORIGINAL, dim(4, 2, 1), dim(32, 2, 1), 0x7f00);
    assert_eq!(code, SUCCESS);
    assert_eq!(
        launch_on(&s.runtime, ORIGINAL, dim(1, 1, 1), dim(64, 1, 1), 0).0,
        SUCCESS
    );
    {
        let st = s.runtime.cuda.st();
        assert_eq!(st.launches.len(), 2);
        let (func, clone_args, kind, stream) = &st.launches[0];
        assert_eq!((*kind, *stream), (LaunchKind::Plain, 0x7f00));
        assert_eq!(
            st.queued[..4],
            on_stream(0x7f00),
            "the runtime's work goes on the launch's stream"
        );
        assert_eq!(*func, CLONE);
        assert_eq!(
            &clone_args[..2],
            &args,
            "original arguments are passed through"
        );
        assert_eq!(st.clone_extras[0].1, 31, "default banks (their mask)");
    }
    s.runtime.exit();
    assert!(messages(&s).is_empty(), "{:?}", messages(&s));
    assert_eq!(
        s.runtime.cuda.st().capture_mode,
        0,
        "the thread's capture mode is restored"
    );
    let (report, _) = read_report(&s.output);
    assert_eq!(report.schema, "cuda-flux/1");
    assert_eq!(report.pid, std::process::id());
    assert!(!report.program.is_empty());
    assert_eq!(
        report.devices,
        [report::Device {
            ordinal: 0,
            name: "Simulated H200".into(),
            compute_capability: "9.0".into()
        }]
    );
    // One entry per architecture, ordered by architecture; sm_90's code ran.
    // One entry: the architecture whose code ran (sm_90); the unused sm_70 variant is left out.
    assert_eq!(report.kernels.len(), 1);
    let k90 = &report.kernels[0];
    assert_eq!(k90.arch, 90);
    assert_eq!(k90.blocks.len(), 3);
    // The snapshot's line information is passed through as it is.
    assert_eq!(k90.files[&1], "loop.cu");
    assert_eq!(k90.blocks[0].lines, [[0, 0, 1], [1, 3, 2]]);
    assert_eq!(k90.blocks[1].text[1], "fma.rn.f32 %r1;");
    assert_eq!(k90.launches.len(), 2);
    let launch = &k90.launches[0];
    assert_eq!(launch.grid, [4, 2, 1]);
    assert_eq!(launch.block, [32, 2, 1]);
    assert_eq!(launch.dynamic_shared_bytes, 48);
    assert_eq!(launch.stream, 0x7f00);
    assert_eq!(launch.device, 0);
    assert_eq!(launch.mode, Mode::All);
    assert!(launch.instrumented);
    let counts = launch.block_counts.as_ref().unwrap();
    assert_eq!(counts.threads, [64, 512, 60]);
    assert_eq!(counts.warps, [2, 16, 2]);
    let c = |threads, warps| Counts { threads, warps };
    let instructions = launch.instructions.as_ref().unwrap();
    assert_eq!(instructions["ld.param.u64"], c(64, 2));
    assert_eq!(instructions["bra.uni"], c(64 + 512, 2 + 16));
    assert_eq!(instructions["fma.rn.f32"], c(512, 16));
    assert_eq!(instructions["ret"], c(60, 2));
    assert_eq!(instructions.len(), 8);
    assert_eq!(k90.totals["bra.uni"], c(2 * 576, 2 * 18));
    assert_eq!(k90.totals["ret"], c(120, 4));
}

#[test]
fn an_entry_block_counted_from_the_launch_gets_the_counts_of_the_threads_the_mode_counts() {
    // A CTA of 33 threads: two warps, the second with one lane.
    for (mode, threads, warps) in [("all", 3 * 33, 3 * 2), ("cta", 33, 2), ("warp", 32, 1)] {
        let s = setup(Fake::gpu(90), &[("CUDA_FLUX_MODE", mode)]);
        let mut snapshot = snapshot(90);
        snapshot.entry_from_launch = true;
        s.runtime.register(ORIGINAL, CLONE, &json(&snapshot));
        let (code, _) = launch_on(&s.runtime, ORIGINAL, dim(3, 1, 1), dim(33, 1, 1), 0);
        assert_eq!(code, SUCCESS);
        s.runtime.exit();
        let (report, _) = read_report(&s.output);
        let counts = report.kernels[0].launches[0].block_counts.clone();
        let counts = counts.unwrap_or_else(|| panic!("mode {mode}: not counted"));
        assert_eq!(
            (counts.threads[0], counts.warps[0]),
            (threads, warps),
            "mode {mode}"
        );
    }
}

/// Block 1 of `snapshot(90)` runs where `%tid.x < param` (a 64-bit comparison).
fn counted_from_launch_by_param(param: usize) -> device_runtime::from_launch::LaunchCounted {
    use device_runtime::from_launch::{
        Compare, CompareOp, Condition, Dim, IntExpr, LaunchCounted, Predicate, Special,
    };
    LaunchCounted {
        trips: None,
        block: 1,
        path: vec![Condition {
            predicate: Predicate::Compare(Compare {
                op: CompareOp::Lt,
                signed: false,
                width: 64,
                lhs: IntExpr::Special(Special::Tid(Dim::X)),
                rhs: IntExpr::Param {
                    index: param,
                    bytes: 8,
                },
            }),
            holds: true,
        }],
    }
}

#[test]
fn blocks_counted_from_the_launch_read_the_launchs_parameters() {
    // The launch passes 2 as parameter 1: two threads of each CTA of 33, all in warp 0.
    for (mode, threads, warps) in [("all", 3 * 2, 3), ("cta", 2, 1), ("warp", 2, 1)] {
        let s = setup(Fake::gpu(90), &[("CUDA_FLUX_MODE", mode)]);
        let mut snapshot = snapshot(90);
        snapshot.launch_counted = vec![counted_from_launch_by_param(1)];
        s.runtime.register(ORIGINAL, CLONE, &json(&snapshot));
        // Twice the same launch: the second one's counts come from the cache, the same.
        for _ in 0..2 {
            let (code, _) = launch_on(&s.runtime, ORIGINAL, dim(3, 1, 1), dim(33, 1, 1), 0);
            assert_eq!(code, SUCCESS);
        }
        s.runtime.exit();
        let (report, _) = read_report(&s.output);
        for launch in &report.kernels[0].launches {
            let counts = launch.block_counts.clone();
            let counts = counts.unwrap_or_else(|| panic!("mode {mode}: not counted"));
            assert_eq!(
                (counts.threads[1], counts.warps[1]),
                (threads, warps),
                "mode {mode}"
            );
        }
    }
    // A parameter the launch does not have: the launch's counts are refused, with the reason.
    let s = setup(Fake::gpu(90), &[]);
    let mut snapshot = snapshot(90);
    snapshot.launch_counted = vec![counted_from_launch_by_param(5)];
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    s.runtime.exit();
    let (report, value) = read_report(&s.output);
    assert!(report.kernels[0].launches[0].block_counts.is_none());
    let reason = value["kernels"][0]["launches"][0]["reason"].as_str();
    assert!(
        reason.is_some_and(|r| r.contains("kernel parameter 5 is not known")),
        "{reason:?}"
    );
}

#[test]
fn copied_blocks_get_the_counts_of_the_block_they_follow_and_bad_copies_are_refused() {
    let s = setup(Fake::gpu(90), &[]);
    let mut snapshot = snapshot(90);
    snapshot.copied_counts = vec![[2, 1]];
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let counts = report.kernels[0].launches[0].block_counts.clone().unwrap();
    assert_eq!(counts.threads[2], counts.threads[1]);
    assert_eq!(counts.warps[2], counts.warps[1]);

    let s = setup(Fake::gpu(90), &[]);
    let mut snapshot = super::tests::snapshot(90);
    snapshot.copied_counts = vec![[7, 0]];
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    s.runtime.exit();
    let (report, value) = read_report(&s.output);
    assert!(report.kernels[0].launches[0].block_counts.is_none());
    assert!(value["kernels"][0]["launches"][0]["reason"]
        .as_str()
        .is_some_and(|r| r.contains("copies counts between blocks 0 and 7 of 3")));
}

/// The counts of one launch of `snapshot`'s kernel (per block 64/2, 512/16, 60/2 on the
/// device), or the reason there are none.
fn counts_of(snapshot: &Snapshot) -> Result<(Vec<u64>, Vec<u64>), String> {
    let s = setup(Fake::gpu(90), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(snapshot));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let launch = &report.kernels[0].launches[0];
    match &launch.block_counts {
        Some(counts) => Ok((counts.threads.clone(), counts.warps.clone())),
        None => Err(launch.reason.clone().unwrap_or_default()),
    }
}

fn flow(block: usize, terms: &[(usize, i64)]) -> ThreadFlow {
    ThreadFlow {
        block,
        terms: terms.to_vec(),
    }
}

#[test]
fn flows_derive_thread_counts_and_differences_warp_counts() {
    // Block 2's threads = block 1's minus block 0's (a side of a divergent branch): its warps
    // are counted on the device.
    let mut snapshot = snapshot(90);
    snapshot.thread_flows = vec![flow(2, &[(0, -1), (1, 1)])];
    assert_eq!(
        counts_of(&snapshot),
        Ok((vec![64, 512, 448], vec![2, 16, 2]))
    );
    // A warp-uniform branch: warps too.
    snapshot.warp_differences = vec![[2, 1, 0]];
    assert_eq!(
        counts_of(&snapshot),
        Ok((vec![64, 512, 448], vec![2, 16, 14]))
    );
    // Any integer combination, e.g. a block run twice per pass.
    snapshot.warp_differences = Vec::new();
    snapshot.thread_flows = vec![flow(2, &[(0, -2), (1, 1)])];
    assert_eq!(
        counts_of(&snapshot),
        Ok((vec![64, 512, 384], vec![2, 16, 2]))
    );
    // Flows read the counts the device wrote; a copy of a derived block is made after them.
    snapshot.copied_counts = vec![[0, 2]];
    snapshot.thread_flows = vec![flow(2, &[(1, 1), (2, -1)])];
    assert_eq!(
        counts_of(&snapshot),
        Ok((vec![452, 512, 452], vec![2, 16, 2]))
    );
}

#[test]
fn derivations_that_do_not_fit_the_counts_are_refused() {
    let mut snapshot = snapshot(90);
    snapshot.thread_flows = vec![flow(0, &[(0, 1), (1, -1)])];
    let reason = counts_of(&snapshot).unwrap_err();
    assert!(
        reason.contains("block 0's thread count follows as -448 from the others"),
        "{reason}"
    );
    snapshot.thread_flows = vec![flow(0, &[(5, 1)])];
    let reason = counts_of(&snapshot).unwrap_err();
    assert!(
        reason.contains("derives block 0 from block 5 of 3"),
        "{reason}"
    );
    snapshot.thread_flows = vec![flow(0, &[(1, i64::MAX), (1, i64::MAX)])];
    let reason = counts_of(&snapshot).unwrap_err();
    assert!(reason.contains("follows as"), "{reason}");
    snapshot.thread_flows = Vec::new();
    snapshot.warp_differences = vec![[0, 0, 1]];
    let reason = counts_of(&snapshot).unwrap_err();
    assert!(
        reason.contains("block 1 ran more often than the branch before it (block 0)"),
        "{reason}"
    );
    snapshot.warp_differences = vec![[0, 5, 1]];
    let reason = counts_of(&snapshot).unwrap_err();
    assert!(
        reason.contains("derives block 0 from blocks 5 and 1 of 3"),
        "{reason}"
    );
}

#[test]
fn the_snapshot_follows_the_code_that_runs() {
    // sm_86 runs sm_80-compatible code: the highest snapshot not above it (sm_70 here).
    let s = setup(Fake::gpu(86), &[]);
    for arch in [70, 90] {
        s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(arch)));
    }
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    assert_eq!(report.kernels.len(), 1, "only the variant that ran");
    assert_eq!(report.kernels[0].arch, 70);
    assert_eq!(report.kernels[0].launches.len(), 1);

    // Code older than every snapshot: the original runs, uncounted, with the reason.
    let s = setup(Fake::gpu(60), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    assert_eq!(s.runtime.cuda.st().launches[0].0, ORIGINAL);
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let launch = &report.kernels[0].launches[0];
    assert!(!launch.instrumented);
    assert_eq!(
        launch.reason.as_deref(),
        Some("no snapshot for code of sm_60 (snapshots: sm_70)")
    );
}

#[test]
fn a_failing_clone_launch_runs_the_original_and_hides_the_error() {
    let s = setup(
        Fake {
            clone_launch_fails: true,
            ..Fake::gpu(70)
        },
        &[],
    );
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    {
        let st = s.runtime.cuda.st();
        assert_eq!(st.last_error, SUCCESS, "the clone's error was cleared");
        assert_eq!(st.launches.len(), 1);
        assert_eq!(st.launches[0].0, ORIGINAL);
    }
    // The counter buffer went back to the pool and is reused.
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    assert_eq!(s.runtime.cuda.st().mallocs, 1);
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let launch = &report.kernels[0].launches[0];
    assert!(!launch.instrumented);
    assert!(launch.block_counts.is_none() && launch.instructions.is_none());
    assert!(launch.reason.as_ref().unwrap().contains("cudaError701"));
    assert!(report.kernels[0].totals.is_empty());
}

#[test]
fn a_clone_that_cannot_run_on_the_device_falls_back_to_the_original() {
    let s = setup(
        Fake {
            clone_attributes_fail: true,
            ..Fake::gpu(90)
        },
        &[],
    );
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(90)));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    assert_eq!(s.runtime.cuda.st().last_error, SUCCESS);
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let launches = &report.kernels[0].launches;
    assert_eq!(launches.len(), 2);
    assert!(launches[1]
        .reason
        .as_ref()
        .unwrap()
        .contains("cudaFuncGetAttributes"));
}

#[test]
fn uninstrumented_kernels_run_unchanged_and_say_why() {
    let s = setup(Fake::gpu(70), &[]);
    let mut uninstrumented = snapshot(70);
    uninstrumented.instrumented = false;
    uninstrumented.reason = Some("uses an unsupported instruction".into());
    s.runtime.register(ORIGINAL, 0, &json(&uninstrumented));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let kernel = &report.kernels[0];
    assert!(!kernel.instrumented);
    assert_eq!(
        kernel.reason.as_deref(),
        Some("uses an unsupported instruction")
    );
    assert_eq!(
        kernel.launches[0].reason.as_deref(),
        Some("uses an unsupported instruction")
    );
}

#[test]
fn launches_that_the_clone_cannot_take_run_the_original() {
    let s = setup(
        Fake {
            max_threads: 256,
            ..Fake::gpu(70)
        },
        &[],
    );
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(
        launch_on(&s.runtime, ORIGINAL, dim(1, 1, 1), dim(32, 16, 1), 0).0,
        SUCCESS
    );
    let s2 = setup(
        Fake {
            capturing: true,
            ..Fake::gpu(70)
        },
        &[],
    );
    s2.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(launch(&s2.runtime, ORIGINAL), SUCCESS);
    for (s, expected) in [(&s, "512 threads"), (&s2, "CUDA graph")] {
        s.runtime.exit();
        let (report, _) = read_report(&s.output);
        let reason = report.kernels[0].launches[0].reason.clone().unwrap();
        assert!(reason.contains(expected), "{reason}");
        assert_eq!(s.runtime.cuda.st().launches[0].0, ORIGINAL);
    }
}

#[test]
fn filtered_kernels_are_forwarded_and_left_out() {
    let s = setup(Fake::gpu(70), &[("CUDA_FLUX_KERNELS", "reduce")]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    assert_eq!(s.runtime.cuda.st().launches[0].0, ORIGINAL);
    assert_eq!(s.runtime.cuda.st().mallocs, 0);
    s.runtime.exit();
    assert!(!s.output.exists(), "no profiled launch: nothing to write");
    assert_eq!(
        messages(&s),
        ["cuda-flux: CUDA_FLUX_KERNELS='reduce' matched none of the program's 1 kernels"]
    );

    let s = setup(Fake::gpu(70), &[("CUDA_FLUX_KERNELS", "loop(")]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    let mut other = snapshot(70);
    other.kernel = "_Z6reducePf".into();
    other.demangled = "reduce(float*)".into();
    s.runtime.register(OTHER, 0, &json(&other));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    assert_eq!(launch(&s.runtime, OTHER), SUCCESS);
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    assert_eq!(report.kernels.len(), 1);
    assert_eq!(report.kernels[0].name, "_Z4loopPfS_");
}

#[test]
fn the_pool_reuses_finished_buffers() {
    let s = setup(Fake::gpu(70), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    for _ in 0..200 {
        assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    }
    assert_eq!(
        s.runtime.cuda.st().mallocs,
        1,
        "steady state allocates nothing"
    );
    assert_eq!(s.runtime.cuda.st().syncs, 0, "nothing waited on");
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let launches = &report.kernels[0].launches;
    assert_eq!(launches.len(), 200);
    assert!(launches.iter().all(|l| l.instrumented));
    assert_eq!(report.kernels[0].totals["ret"].threads, 200 * 60);
}

#[test]
fn a_full_pool_waits_for_the_oldest_launch() {
    let s = setup(
        Fake {
            events_never_ready: true,
            ..Fake::gpu(70)
        },
        &[],
    );
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    let launches = MAX_POOL_SLOTS + 10;
    for _ in 0..launches {
        assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    }
    assert_eq!(s.runtime.cuda.st().mallocs, MAX_POOL_SLOTS);
    assert_eq!(s.runtime.cuda.st().syncs, 10);
    s.runtime.exit();
    assert_eq!(s.runtime.cuda.st().syncs, launches);
    let (report, _) = read_report(&s.output);
    let recorded = &report.kernels[0].launches;
    assert_eq!(recorded.len(), launches);
    assert!(recorded
        .iter()
        .all(|l| l.block_counts.as_ref().unwrap().threads == [64, 512, 60]));
}

#[test]
fn banks_come_from_the_environment() {
    let s = setup(Fake::gpu(70), &[("CUDA_FLUX_BANKS", "4")]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    // The device takes the mask: bank = %smid & 3.
    assert_eq!(s.runtime.cuda.st().clone_extras[0].1, 3);
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let counts = report.kernels[0].launches[0].block_counts.clone().unwrap();
    assert_eq!(counts.threads, [64, 512, 60]);
}

#[test]
fn device_reset_writes_the_profile_and_frees_the_pool() {
    let s = setup(Fake::gpu(70), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    assert_eq!(s.runtime.device_reset(), SUCCESS);
    {
        let st = s.runtime.cuda.st();
        assert_eq!((st.resets, st.frees, st.syncs), (1, 1, 1));
        assert!(st.host.is_empty() && st.events.is_empty());
    }
    let (report, _) = read_report(&s.output);
    assert_eq!(report.kernels[0].launches.len(), 1);
    assert!(report.kernels[0].launches[0].instrumented);

    // The program goes on: a fresh pool, and the exit profile has everything.
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    assert_eq!(s.runtime.cuda.st().mallocs, 2);
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    assert_eq!(report.kernels[0].launches.len(), 2);
    assert_eq!(report.kernels[0].totals["ret"].threads, 120);
    // A second exit (both exit hooks run) changes nothing.
    let before = std::fs::read(&s.output).unwrap();
    s.runtime.exit();
    assert_eq!(std::fs::read(&s.output).unwrap(), before);
}

#[test]
fn device_reset_without_launches_writes_nothing() {
    let s = setup(Fake::gpu(70), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(s.runtime.device_reset(), SUCCESS);
    assert!(!s.output.exists());
    let s = setup(Fake::default(), &[]);
    assert_eq!(s.runtime.device_reset(), SUCCESS);
    assert_eq!(s.runtime.cuda.st().resets, 1);
}

#[test]
fn threads_launch_concurrently() {
    let s = setup(Fake::gpu(70), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    std::thread::scope(|scope| {
        for t in 0..4 {
            let runtime = &s.runtime;
            scope.spawn(move || {
                for _ in 0..50 {
                    let (code, _) = launch_on(runtime, ORIGINAL, dim(1, 1, 1), dim(32, 1, 1), t);
                    assert_eq!(code, SUCCESS);
                }
            });
        }
    });
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let launches = &report.kernels[0].launches;
    assert_eq!(launches.len(), 200);
    for stream in 0..4 {
        assert_eq!(launches.iter().filter(|l| l.stream == stream).count(), 50);
    }
    assert_eq!(report.kernels[0].totals["ret"].threads, 200 * 60);
}

#[test]
fn the_mode_reaches_the_clone_and_the_record() {
    let s = setup(Fake::gpu(70), &[("CUDA_FLUX_MODE", "warp")]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    {
        let st = s.runtime.cuda.st();
        // Top byte: the mode's device code (warp = 2); low bits: the bank mask (32 banks).
        assert_eq!(st.clone_extras[0].1 >> 24, 2);
        assert_eq!(st.clone_extras[0].1 & 0xFF_FFFF, 31);
    }
    s.runtime.exit();
    let (report, value) = read_report(&s.output);
    assert_eq!(report.kernels[0].launches[0].mode, Mode::Warp);
    assert_eq!(value["kernels"][0]["launches"][0]["mode"], "warp");
}

#[test]
fn launches_are_counted_in_every_mode() {
    // Issue 14, item 1: the packed `banks` parameter (mode in the top byte) was also taken as
    // the bank count when the counters were folded, so `cta` and `warp` launches were all
    // recorded "not instrumented: the counter buffer has the wrong size".
    for (value, mode) in [("all", Mode::All), ("cta", Mode::Cta), ("warp", Mode::Warp)] {
        for banks in ["1", "32", "4096"] {
            let s = setup(
                Fake::gpu(70),
                &[("CUDA_FLUX_MODE", value), ("CUDA_FLUX_BANKS", banks)],
            );
            s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
            assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
            s.runtime.exit();
            assert!(messages(&s).is_empty(), "{value}: {:?}", messages(&s));
            let (report, _) = read_report(&s.output);
            let launch = &report.kernels[0].launches[0];
            assert_eq!(launch.mode, mode);
            assert!(
                launch.instrumented,
                "{value}, {banks} banks: {:?}",
                launch.reason
            );
            let counts = launch.block_counts.as_ref().expect("counts");
            assert_eq!(counts.threads, [64, 512, 60], "{value}, {banks} banks");
            assert_eq!(counts.warps, [2, 16, 2], "{value}, {banks} banks");
        }
    }
}

#[test]
fn function_settings_are_repeated_on_the_clone() {
    // Issue 14, item 7: a kernel opted in to more than 48 KiB of dynamic shared memory must
    // have its clone opted in as well, or the clone cannot launch.
    let s = setup(Fake::gpu(70), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    let opt_in = FuncSetting::Attribute {
        attribute: 8,
        value: 64 * 1024,
    };
    let settings = [
        opt_in,
        FuncSetting::CacheConfig(1),
        FuncSetting::SharedMemConfig(2),
    ];
    for setting in settings {
        assert_eq!(s.runtime.func_set(ORIGINAL, setting), SUCCESS);
    }
    // A function the runtime does not know (not instrumented): set on it alone.
    assert_eq!(s.runtime.func_set(OTHER, opt_in), SUCCESS);
    // A failure on the original is the program's, and the clone is left alone.
    assert_eq!(s.runtime.func_set(0x4000, opt_in), INVALID_DEVICE_FUNCTION);
    assert_eq!(
        s.runtime.cuda.st().func_settings,
        [
            (ORIGINAL, settings[0]),
            (CLONE, settings[0]),
            (ORIGINAL, settings[1]),
            (CLONE, settings[1]),
            (ORIGINAL, settings[2]),
            (CLONE, settings[2]),
            (OTHER, opt_in),
        ]
    );
    assert_eq!(s.runtime.cuda.st().last_error, INVALID_DEVICE_FUNCTION);

    // The clone refuses: the program still sees success, and no error is left behind.
    let s = setup(
        Fake {
            clone_attributes_fail: true,
            ..Fake::gpu(70)
        },
        &[],
    );
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(s.runtime.func_set(ORIGINAL, opt_in), SUCCESS);
    assert_eq!(s.runtime.cuda.st().last_error, SUCCESS);

    // Without a GPU: the original's error, nothing else.
    let s = setup(Fake::default(), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(s.runtime.func_set(ORIGINAL, opt_in), NO_DEVICE);
    assert!(s.runtime.cuda.st().func_settings.is_empty());
}

#[test]
fn an_unwritable_output_is_one_message_naming_the_path() {
    let s = setup(
        Fake::gpu(70),
        &[("CUDA_FLUX_OUTPUT", "/nonexistent-dir/p.json")],
    );
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    s.runtime.exit();
    let messages = messages(&s);
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0]
        .starts_with("cuda-flux: cannot write the profile to '/nonexistent-dir/p.json': "));
}

#[test]
fn registrations_merge_per_architecture() {
    let s = setup(Fake::gpu(90), &[]);
    // The clone stub may come with any of the registrations.
    s.runtime.register(ORIGINAL, 0, &json(&snapshot(70)));
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(90)));
    // The same registration again (a module registered twice) is ignored silently.
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(90)));
    assert!(messages(&s).is_empty());
    // A different snapshot for an architecture already known: the first stays.
    let mut changed = snapshot(90);
    changed.blocks.pop();
    s.runtime.register(ORIGINAL, CLONE, &json(&changed));
    // A different clone stub: the first stays.
    s.runtime.register(ORIGINAL, 0x9999, &json(&snapshot(90)));
    // Broken input never registers anything.
    s.runtime.register(OTHER, 0, b"{not json");
    s.runtime.register(0, CLONE, &json(&snapshot(70)));
    let messages = messages(&s);
    assert_eq!(messages.len(), 4, "{messages:#?}");
    assert!(messages[0].contains("two different snapshots for sm_90"));
    assert!(messages[1].contains("two different clones"));
    assert!(messages[2].contains("invalid snapshot JSON"));
    assert!(messages[3].contains("without a kernel stub"));

    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    assert_eq!(launch(&s.runtime, OTHER), SUCCESS);
    {
        let st = s.runtime.cuda.st();
        assert_eq!(st.launches[0].0, CLONE);
        assert_eq!(st.launches[1].0, OTHER, "unregistered: forwarded");
    }
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    assert_eq!(report.kernels.len(), 1, "only the variant that ran");
    assert_eq!(report.kernels[0].arch, 90);
    assert_eq!(report.kernels[0].blocks.len(), 3);
    assert_eq!(report.kernels[0].launches.len(), 1);
}

#[test]
fn a_registration_after_launches_refreshes_the_choice() {
    let s = setup(Fake::gpu(90), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(90)));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    assert_eq!(report.kernels[0].launches.len(), 1);
    assert_eq!(report.kernels[1].launches.len(), 1);
}

#[test]
fn the_documented_example_matches_the_schema_and_the_types() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/output.md"))
            .unwrap();
    let start = doc
        .find("```json\n")
        .expect("docs/output.md has a JSON example")
        + 8;
    let end = start + doc[start..].find("```").unwrap();
    let value: serde_json::Value = serde_json::from_str(&doc[start..end]).unwrap();
    validate(&value);
    let report: Report = serde_json::from_value(value).unwrap();
    assert_eq!(report.schema, "cuda-flux/1");
    // The example's totals and per-launch instructions are consistent with its block counts.
    for kernel in &report.kernels {
        let table = OpcodeTable::new(&kernel.blocks);
        let mut totals = OpcodeCounts::new();
        for launch in &kernel.launches {
            if let Some(counts) = &launch.block_counts {
                let computed = table.count(&counts.threads, &counts.warps);
                assert_eq!(Some(&computed), launch.instructions.as_ref());
                add_opcode_counts(&mut totals, &computed);
            }
        }
        assert_eq!(totals, kernel.totals);
    }
}

#[test]
fn the_schema_rejects_malformed_profiles() {
    let validator = jsonschema::draft202012::new(&schema()).unwrap();
    let s = setup(Fake::gpu(70), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    s.runtime.exit();
    let (_, good) = read_report(&s.output);
    let broken = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut value = good.clone();
        f(&mut value);
        assert!(!validator.is_valid(&value), "accepted: {value}");
    };
    broken(&|v| v["schema"] = "cuda-flux/2".into());
    broken(&|v| v["kernels"][0]["launches"][0]["grid"] = serde_json::json!([1, 1]));
    broken(&|v| v["kernels"][0]["launches"][0]["mode"] = "some".into());
    broken(&|v| {
        v["kernels"][0]["launches"][0]["instrumented"] = false.into();
    });
    broken(&|v| v["kernels"][0]["totals"]["ret"]["threads"] = (-1).into());
    broken(&|v| v["kernels"][0]["instrumented"] = false.into());
    broken(&|v| v["devices"][0]["extra"] = 1.into());
}

/// The (function, launch call, stream) of the `index`th launch that ran.
fn launched(s: &Setup, index: usize) -> (usize, LaunchKind, usize) {
    let (func, _, kind, stream) = &s.runtime.cuda.st().launches[index];
    (*func, *kind, *stream)
}

#[test]
fn an_extended_launch_runs_the_clone_with_the_programs_attributes() {
    let s = setup(Fake::gpu(70), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    let extended = LaunchKind::Extended {
        attrs: 0xa770,
        num_attrs: 2,
    };
    let (code, args) = launch_as(
        &s.runtime,
        extended,
        ORIGINAL,
        dim(4, 1, 1),
        dim(64, 1, 1),
        0x7f00,
    );
    assert_eq!(code, SUCCESS);
    // The clone goes through cudaLaunchKernelExC with the attributes untouched.
    assert_eq!(launched(&s, 0), (CLONE, extended, 0x7f00));
    assert_eq!(s.runtime.cuda.st().launches[0].1[..2], args);
    assert_eq!(s.runtime.cuda.st().queued, on_stream(0x7f00));
    // Per-thread form on stream 0: the runtime's work goes to the per-thread stream.
    let per_thread = LaunchKind::ExtendedPerThread {
        attrs: 0,
        num_attrs: 0,
    };
    launch_as(
        &s.runtime,
        per_thread,
        ORIGINAL,
        dim(4, 1, 1),
        dim(64, 1, 1),
        0,
    );
    assert_eq!(launched(&s, 1), (CLONE, per_thread, 0));
    assert_eq!(
        s.runtime.cuda.st().queued[4..],
        on_stream(STREAM_PER_THREAD)
    );
    // Unknown kernels are forwarded through the same call.
    launch_as(&s.runtime, extended, OTHER, dim(1, 1, 1), dim(32, 1, 1), 0);
    assert_eq!(launched(&s, 2), (OTHER, extended, 0));
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let launches = &report.kernels[0].launches;
    assert_eq!(launches.len(), 2);
    assert!(launches.iter().all(|l| l.instrumented));
}

#[test]
fn a_cooperative_launch_runs_the_clone_cooperatively() {
    let s = setup(Fake::gpu(70), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    let cooperative = |s: &Setup, kind, func, stream| {
        let (code, args) = launch_as(&s.runtime, kind, func, dim(4, 1, 1), dim(64, 1, 1), stream);
        assert_eq!(code, SUCCESS);
        args
    };
    let args = cooperative(&s, LaunchKind::Cooperative, ORIGINAL, 0x7f00);
    assert_eq!(launched(&s, 0), (CLONE, LaunchKind::Cooperative, 0x7f00));
    assert_eq!(s.runtime.cuda.st().launches[0].1[..2], args);
    assert_eq!(s.runtime.cuda.st().queued, on_stream(0x7f00));
    // The per-thread form: the clone through the same call, the runtime's work on the
    // per-thread stream.
    cooperative(&s, LaunchKind::CooperativePerThread, ORIGINAL, 0);
    assert_eq!(
        launched(&s, 1),
        (CLONE, LaunchKind::CooperativePerThread, 0)
    );
    assert_eq!(
        s.runtime.cuda.st().queued[4..],
        on_stream(STREAM_PER_THREAD)
    );
    // A kernel cuda-flux does not know is forwarded through the same call.
    cooperative(&s, LaunchKind::Cooperative, OTHER, 0);
    assert_eq!(launched(&s, 2), (OTHER, LaunchKind::Cooperative, 0));
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let launches = &report.kernels[0].launches;
    assert_eq!(launches.len(), 2);
    assert!(launches.iter().all(|l| l.instrumented));
    assert_eq!((launches[0].stream, launches[1].stream), (0x7f00, 0));

    // Uninstrumented: the original, through the cooperative call.
    let s = setup(Fake::gpu(70), &[]);
    let mut uninstrumented = snapshot(70);
    uninstrumented.instrumented = false;
    uninstrumented.reason = Some("uses an unsupported instruction".into());
    s.runtime.register(ORIGINAL, 0, &json(&uninstrumented));
    cooperative(&s, LaunchKind::Cooperative, ORIGINAL, 0);
    assert_eq!(launched(&s, 0), (ORIGINAL, LaunchKind::Cooperative, 0));
    assert_eq!(s.runtime.cuda.st().mallocs, 0);

    // A clone that cannot launch (a cooperative grid the clone's resources do not fit): the
    // original, through the cooperative call.
    let s = setup(
        Fake {
            clone_launch_fails: true,
            ..Fake::gpu(70)
        },
        &[],
    );
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    cooperative(&s, LaunchKind::CooperativePerThread, ORIGINAL, 0);
    assert_eq!(s.runtime.cuda.st().launches.len(), 1);
    assert_eq!(
        launched(&s, 0),
        (ORIGINAL, LaunchKind::CooperativePerThread, 0)
    );
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    assert!(!report.kernels[0].launches[0].instrumented);
}

#[test]
fn a_per_thread_launch_queues_the_runtimes_work_on_the_per_thread_stream() {
    let s = setup(Fake::gpu(70), &[]);
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    let per_thread = |s: &Setup, stream| {
        let launch = launch_as(
            &s.runtime,
            LaunchKind::PerThread,
            ORIGINAL,
            dim(4, 1, 1),
            dim(64, 1, 1),
            stream,
        );
        assert_eq!(launch.0, SUCCESS);
    };
    // Stream 0 of a per-thread launch is the thread's own default stream: the clone gets 0
    // through cudaLaunchKernel_ptsz, everything else goes to cudaStreamPerThread.
    per_thread(&s, 0);
    assert_eq!(launched(&s, 0), (CLONE, LaunchKind::PerThread, 0));
    assert_eq!(s.runtime.cuda.st().queued, on_stream(STREAM_PER_THREAD));
    // Any other stream is itself.
    per_thread(&s, 0x7f00);
    assert_eq!(launched(&s, 1), (CLONE, LaunchKind::PerThread, 0x7f00));
    assert_eq!(s.runtime.cuda.st().queued[4..], on_stream(0x7f00));
    // A plain launch's stream 0 stays the legacy default stream.
    assert_eq!(launch(&s.runtime, ORIGINAL), SUCCESS);
    assert_eq!(launched(&s, 2), (CLONE, LaunchKind::Plain, 0));
    assert_eq!(s.runtime.cuda.st().queued[8..], on_stream(0));
    s.runtime.exit();
    let (report, _) = read_report(&s.output);
    let launches = &report.kernels[0].launches;
    assert!(launches.iter().all(|l| l.instrumented));
    let streams: Vec<u64> = launches.iter().map(|l| l.stream).collect();
    assert_eq!(streams, [0, 0x7f00, 0], "the stream as the program gave it");

    // A clone that fails to launch: the clearing was queued on the per-thread stream, so the
    // event that frees its buffer is recorded there; the original runs per-thread on 0.
    let s = setup(
        Fake {
            clone_launch_fails: true,
            ..Fake::gpu(70)
        },
        &[],
    );
    s.runtime.register(ORIGINAL, CLONE, &json(&snapshot(70)));
    per_thread(&s, 0);
    assert_eq!(launched(&s, 0), (ORIGINAL, LaunchKind::PerThread, 0));
    assert_eq!(
        s.runtime.cuda.st().queued,
        [
            ("capturing", STREAM_PER_THREAD),
            ("memset", STREAM_PER_THREAD),
            ("record", STREAM_PER_THREAD)
        ]
    );
}

#[test]
fn packed_counters_split_the_banks_of_a_grid_too_large_for_them() {
    let config = |mode: &str| {
        let env = [("CUDA_FLUX_MODE", mode), ("CUDA_FLUX_BANKS", "32")];
        let get = |name: &str| {
            env.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| std::ffi::OsString::from(v))
        };
        Config::parse(get, 1, None).0
    };
    let all = config("all");
    let dim = |x, y, z| Dim3 { x, y, z };
    let plain = BankLayout {
        count: 32,
        param: 31,
    };
    // One thread short of 2^32: one bank per streaming multiprocessor, as without packing.
    let (block, just_below) = (dim(1024, 1, 1), dim((1 << 22) - 1, 1, 1));
    assert_eq!(BankLayout::of(&all, just_below, block, true), Ok(plain));
    // 2^32 threads: ranges of 2^21 CTAs (2^31 threads), two of them, 32 banks each.
    let at_limit = dim(1 << 22, 1, 1);
    let ranged = BankLayout::of(&all, at_limit, block, true).unwrap();
    assert_eq!(ranged.count, 64);
    assert_eq!(ranged.param, device_runtime::ranged_banks_param(31, 21));
    assert_eq!(
        ranged.param >> device_runtime::MODE_SHIFT,
        device_runtime::MODE_RANGES
    );
    // Without packed counters, or where the mode counts one CTA, no ranges are needed.
    assert_eq!(BankLayout::of(&all, at_limit, block, false), Ok(plain));
    let cta = BankLayout::of(&config("cta"), at_limit, block, true).unwrap();
    assert_eq!(cta.count, 32);
    // Odd shapes: a range never holds 2^32 threads, and covers every CTA.
    for (grid, block) in [
        (dim(5_000_000, 7, 3), dim(33, 2, 1)),
        (dim(u32::MAX >> 1, 3, 1), dim(1, 1, 1)),
    ] {
        let layout = BankLayout::of(&all, grid, block, true).unwrap();
        let shift = (layout.param >> device_runtime::RANGE_SHIFT_BIT) & 63;
        let cta_threads = u64::from(block.x * block.y * block.z);
        assert!((1u64 << shift) * cta_threads < device_runtime::PACKED_THREADS_LIMIT);
        let ctas = u64::from(grid.x) * u64::from(grid.y) * u64::from(grid.z);
        assert!((layout.count as u64 / 32) << shift >= ctas);
    }
    // A grid that would need more banks than allowed is not counted, and says why.
    let huge = dim(u32::MAX >> 1, 65535, 65535);
    let refused = BankLayout::of(&all, huge, block, true).unwrap_err();
    assert!(refused.contains("counter banks"), "{refused}");
}

#[test]
fn packed_counts_are_split_with_plain_and_with_ranged_banks() {
    // Block 1 packed; a launch of 256 threads (plain banks) and one of 2^32 threads (ranged
    // banks: two ranges of 2^21 CTAs, 32 banks each). Both record the counts the clone wrote.
    let s = setup(
        Fake {
            packed: vec![1],
            ..Fake::gpu(70)
        },
        &[("CUDA_FLUX_BANKS", "32")],
    );
    let mut packed = snapshot(70);
    packed.packed_counts = vec![1];
    s.runtime.register(ORIGINAL, CLONE, &json(&packed));
    let small = launch_on(&s.runtime, ORIGINAL, dim(4, 1, 1), dim(64, 1, 1), 0).0;
    let huge = launch_on(&s.runtime, ORIGINAL, dim(1 << 22, 1, 1), dim(1024, 1, 1), 0).0;
    assert_eq!((small, huge), (SUCCESS, SUCCESS));
    s.runtime.exit();
    assert!(messages(&s).is_empty(), "{:?}", messages(&s));
    let params: Vec<u32> = s
        .runtime
        .cuda
        .st()
        .clone_extras
        .iter()
        .map(|e| e.1)
        .collect();
    assert_eq!(params, [31, device_runtime::ranged_banks_param(31, 21)]);
    let (report, _) = read_report(&s.output);
    for launch in &report.kernels[0].launches {
        assert!(launch.instrumented, "{:?}", launch.reason);
        let counts = launch.block_counts.as_ref().expect("counts");
        assert_eq!(counts.threads, [64, 512, 60]);
        assert_eq!(counts.warps, [2, 16, 2]);
    }
}
