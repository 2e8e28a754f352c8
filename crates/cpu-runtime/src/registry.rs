//! What the program registered and created: modules (CPU images) and their kernels,
//! variables and texture references; streams, events, texture objects; the address table.
//! One `Registry` lives behind the runtime's mutex; kernels never run while it is locked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ptx_sim::image::ArchPtx;
use ptx_sim::{ChannelKind, Engine, Program, SimError, Texture};

use crate::abi::ChannelFormatDesc;
use crate::device::DEFAULT_ARCH;
use crate::error::CudaError;
use crate::memory::{AddressTable, MemoryKind, ModuleId};

/// One registered CPU image. Its PTX is parsed at first use (launch, symbol, attributes), not
/// at registration, so that programs start fast and a module that is never used costs nothing.
pub struct Module {
    pub id: ModuleId,
    /// The architecture of the PTX that runs: the highest the image holds.
    pub arch: u32,
    ptx: String,
    program: Mutex<Option<Arc<Program>>>,
}

impl Module {
    /// A module of the image's highest architecture; `None` for an image without PTX.
    pub fn new(id: ModuleId, images: Vec<ArchPtx>) -> Option<Module> {
        let best = images.into_iter().max_by_key(|image| image.arch)?;
        Some(Module {
            id,
            arch: best.arch,
            ptx: best.ptx,
            program: Mutex::new(None),
        })
    }

    /// The loaded program and whether this call loaded it (run by `engine`, the native one
    /// compiling a function after `native_after` warp-instructions). Parsing happens under
    /// this module's own lock (others wait for it), never under the registry's.
    pub fn program(
        &self,
        engine: Engine,
        native_after: u64,
    ) -> Result<(Arc<Program>, bool), SimError> {
        let mut slot = self.program.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(program) = slot.as_ref() {
            return Ok((Arc::clone(program), false));
        }
        let mut program = Program::load(&self.ptx)?;
        program.set_engine(engine);
        program.set_native_after(native_after);
        let program = Arc::new(program);
        *slot = Some(Arc::clone(&program));
        Ok((program, true))
    }

    /// The program if it is loaded.
    pub fn loaded(&self) -> Option<Arc<Program>> {
        self.program
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Forgets the loaded program (`cudaDeviceReset`): the next use loads it afresh, with
    /// the variables' initial values. Launches still running keep theirs alive.
    pub fn unload(&self) {
        *self.program.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// A registered kernel: the host stub's target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub module: ModuleId,
    pub name: String,
    /// `cudaFuncAttributeMaxDynamicSharedMemorySize`, when set.
    pub max_dynamic_shared: Option<usize>,
    /// `cudaFuncAttributePreferredSharedMemoryCarveout` (-1: default).
    pub carveout: i32,
}

/// A registered module variable (`__device__`, `__constant__`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    pub module: ModuleId,
    pub name: String,
    pub size: usize,
}

/// A CUDA array; its handle (`cudaArray_t`) is the address of its texels.
#[derive(Debug, Clone, Copy)]
pub struct CudaArray {
    pub desc: ChannelFormatDesc,
    pub kind: ChannelKind,
    pub channels: u8,
    pub bits: u8,
    /// Width, height and depth in texels as allocated (0 for a dimension the array lacks).
    pub extent: [usize; 3],
    pub flags: u32,
}

impl CudaArray {
    pub fn texel_bytes(&self) -> usize {
        usize::from(self.channels) * usize::from(self.bits) / 8
    }

    /// Dimensions: 1, 2 or 3.
    pub fn dims(&self) -> u8 {
        1 + u8::from(self.extent[1] > 0) + u8::from(self.extent[2] > 0)
    }

    /// Texels per dimension, each at least 1.
    pub fn size(&self) -> [usize; 3] {
        self.extent.map(|e| e.max(1))
    }

    pub fn row_bytes(&self) -> usize {
        self.size()[0] * self.texel_bytes()
    }

    pub fn slice_bytes(&self) -> usize {
        self.row_bytes() * self.size()[1]
    }

    pub fn len(&self) -> usize {
        self.slice_bytes() * self.size()[2]
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A registered legacy texture reference and what is bound to it.
#[derive(Debug, Clone, PartialEq)]
pub struct TextureReference {
    pub module: ModuleId,
    pub name: String,
    /// Registered with `cudaReadModeNormalizedFloat`.
    pub normalized_read: bool,
    pub bound: Option<Texture>,
}

/// A created stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stream {
    pub flags: u32,
    pub priority: i32,
}

/// A created event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub flags: u32,
    /// When it was last recorded; work before it is complete at record time.
    pub recorded: Option<Instant>,
}

/// `cudaEventDisableTiming`.
pub const EVENT_DISABLE_TIMING: u32 = 2;
/// `cudaEventInterprocess`.
pub const EVENT_INTERPROCESS: u32 = 4;

/// `cudaStreamLegacy` and `cudaStreamPerThread`: valid without being created, like 0.
pub const STREAM_LEGACY: usize = 1;
pub const STREAM_PER_THREAD: usize = 2;

/// `cudaLimit` defaults: stack size, printf FIFO, malloc heap, device runtime sync depth and
/// pending launches, L2 fetch granularity, persisting L2 size.
pub const DEFAULT_LIMITS: [usize; 7] = [1024, 1 << 20, 8 << 20, 2, 2048, 64, 0];

/// The runtime's bookkeeping.
pub struct Registry {
    /// `__cudaRegisterFatBinary` handle → module.
    handles: HashMap<usize, ModuleId>,
    modules: HashMap<ModuleId, Arc<Module>>,
    next_module: ModuleId,
    /// Host stub → kernel.
    pub functions: HashMap<usize, Function>,
    /// Host shadow → variable.
    pub variables: HashMap<usize, Variable>,
    /// Host `textureReference` → reference.
    pub textures: HashMap<usize, TextureReference>,
    /// Host `surfaceReference` → (module, name); registered, never usable.
    pub surfaces: HashMap<usize, (ModuleId, String)>,
    /// Texture objects; shared with running launches, copied on write.
    pub texture_objects: Arc<HashMap<u64, Texture>>,
    next_texture_object: u64,
    /// CUDA arrays by handle (the address of their texels, recorded as `MemoryKind::Array`).
    pub arrays: HashMap<u64, CudaArray>,
    /// The address table; shared with running launches, copied on write.
    pub memory: Arc<AddressTable>,
    pub streams: HashMap<usize, Stream>,
    pub events: HashMap<usize, Event>,
    next_handle: usize,
    pub limits: [usize; 7],
    pub device_flags: u32,
    pub cache_config: i32,
    pub shared_config: i32,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            handles: HashMap::new(),
            modules: HashMap::new(),
            next_module: 1,
            functions: HashMap::new(),
            variables: HashMap::new(),
            textures: HashMap::new(),
            surfaces: HashMap::new(),
            texture_objects: Arc::default(),
            next_texture_object: 1,
            arrays: HashMap::new(),
            memory: Arc::default(),
            streams: HashMap::new(),
            events: HashMap::new(),
            // Above cudaStreamLegacy and cudaStreamPerThread; 16-byte steps look like pointers.
            next_handle: 0x1000,
            limits: DEFAULT_LIMITS,
            device_flags: 0,
            cache_config: 0,
            shared_config: 0,
        }
    }
}

impl Registry {
    /// Adds a module; returns its id.
    pub fn add_module(&mut self, images: Vec<ArchPtx>) -> Option<ModuleId> {
        let id = self.next_module;
        let module = Module::new(id, images)?;
        self.next_module += 1;
        self.modules.insert(id, Arc::new(module));
        Some(id)
    }

    /// Associates the handle given to the program with a module.
    pub fn add_handle(&mut self, handle: usize, module: ModuleId) {
        self.handles.insert(handle, module);
    }

    pub fn module_of_handle(&self, handle: usize) -> Option<ModuleId> {
        self.handles.get(&handle).copied()
    }

    pub fn module(&self, id: ModuleId) -> Option<Arc<Module>> {
        self.modules.get(&id).cloned()
    }

    pub fn modules(&self) -> impl Iterator<Item = &Arc<Module>> {
        self.modules.values()
    }

    /// Removes a module and everything registered with it (`__cudaUnregisterFatBinary`).
    pub fn remove_module(&mut self, handle: usize) -> Option<ModuleId> {
        let id = self.handles.remove(&handle)?;
        self.modules.remove(&id);
        self.functions.retain(|_, f| f.module != id);
        self.variables.retain(|_, v| v.module != id);
        self.textures.retain(|_, t| t.module != id);
        self.surfaces.retain(|_, s| s.0 != id);
        Arc::make_mut(&mut self.memory).remove_where(|r| r.kind == MemoryKind::Symbol(id));
        Some(id)
    }

    /// The compute capability: the highest architecture of the registered modules.
    pub fn arch(&self) -> u32 {
        self.modules
            .values()
            .map(|m| m.arch)
            .max()
            .unwrap_or(DEFAULT_ARCH)
    }

    /// A fresh opaque handle (stream, event).
    pub fn new_handle(&mut self) -> usize {
        let handle = self.next_handle;
        self.next_handle += 16;
        handle
    }

    /// A fresh `cudaTextureObject_t` (never 0).
    pub fn add_texture_object(&mut self, texture: Texture) -> u64 {
        let handle = self.next_texture_object;
        self.next_texture_object += 1;
        Arc::make_mut(&mut self.texture_objects).insert(handle, texture);
        handle
    }

    /// Whether `stream` names a stream: 0, the two special handles or a created one.
    pub fn check_stream(&self, stream: usize) -> Result<(), CudaError> {
        if stream == 0
            || stream == STREAM_LEGACY
            || stream == STREAM_PER_THREAD
            || self.streams.contains_key(&stream)
        {
            Ok(())
        } else {
            Err(CudaError::InvalidResourceHandle)
        }
    }

    pub fn event(&mut self, event: usize) -> Result<&mut Event, CudaError> {
        self.events
            .get_mut(&event)
            .ok_or(CudaError::InvalidResourceHandle)
    }

    /// The textures bound to the references of `module`, by name. A texture read by
    /// coordinates (an array, pitched memory) takes the sampler state (addressing, filtering,
    /// normalized coordinates) the program has set in the reference's host struct by now, as
    /// cudart reads it at launch.
    pub fn bound_references(&self, module: ModuleId) -> HashMap<String, Texture> {
        self.textures
            .iter()
            .filter(|(_, t)| t.module == module)
            .filter_map(|(&host, t)| {
                let mut texture = t.bound?;
                if let Some(sampling) = &mut texture.sampling {
                    // SAFETY: `host` is the registered `textureReference` of the program.
                    let sampler = unsafe { crate::arrays::reference_sampler(host) };
                    crate::arrays::apply_sampler(sampling, &sampler);
                }
                Some((t.name.clone(), texture))
            })
            .collect()
    }

    /// Records the variables of a freshly loaded module in the address table.
    pub fn add_symbols(&mut self, module: ModuleId, program: &Program) {
        let ranges: Vec<(u64, u64)> = self
            .variables
            .values()
            .filter(|v| v.module == module)
            .filter_map(|v| program.symbol(&v.name))
            .collect();
        let table = Arc::make_mut(&mut self.memory);
        table.remove_where(|r| r.kind == MemoryKind::Symbol(module));
        for (address, len) in ranges {
            table.insert(address, len, MemoryKind::Symbol(module));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptx_sim::ChannelKind;

    fn image(arch: u32) -> ArchPtx {
        ArchPtx {
            arch,
            ptx: format!(".target sm_{arch}\n"),
        }
    }

    #[test]
    fn the_highest_architecture_of_all_modules_is_the_devices() {
        let mut registry = Registry::default();
        assert_eq!(registry.arch(), DEFAULT_ARCH);
        let a = registry.add_module(vec![image(70), image(80)]).unwrap();
        let b = registry.add_module(vec![image(75)]).unwrap();
        assert_ne!(a, b);
        assert_eq!(registry.module(a).unwrap().arch, 80);
        assert_eq!(registry.module(b).unwrap().arch, 75);
        assert_eq!(registry.arch(), 80);
        assert_eq!(registry.add_module(vec![]), None);
    }

    #[test]
    fn unregistering_a_module_removes_what_was_registered_with_it() {
        let mut registry = Registry::default();
        let a = registry.add_module(vec![image(70)]).unwrap();
        let b = registry.add_module(vec![image(70)]).unwrap();
        registry.add_handle(0x10, a);
        registry.add_handle(0x20, b);
        for (stub, module) in [(0x100, a), (0x200, b)] {
            registry.functions.insert(
                stub,
                Function {
                    module,
                    name: format!("k{module}"),
                    max_dynamic_shared: None,
                    carveout: -1,
                },
            );
        }
        registry.variables.insert(
            0x300,
            Variable {
                module: a,
                name: "v".into(),
                size: 4,
            },
        );
        Arc::make_mut(&mut registry.memory).insert(0x5000, 4, MemoryKind::Symbol(a));
        Arc::make_mut(&mut registry.memory).insert(0x6000, 4, MemoryKind::Device);
        assert_eq!(registry.remove_module(0x10), Some(a));
        assert_eq!(registry.remove_module(0x10), None);
        assert!(registry.module(a).is_none());
        assert_eq!(registry.functions.len(), 1);
        assert!(registry.functions.contains_key(&0x200));
        assert!(registry.variables.is_empty());
        assert_eq!(registry.memory.len(), 1);
        assert_eq!(registry.module_of_handle(0x20), Some(b));
    }

    #[test]
    fn streams_special_handles_and_created_ones_are_valid() {
        let mut registry = Registry::default();
        for stream in [0, STREAM_LEGACY, STREAM_PER_THREAD] {
            assert_eq!(registry.check_stream(stream), Ok(()));
        }
        let handle = registry.new_handle();
        assert!(handle > STREAM_PER_THREAD);
        assert_eq!(
            registry.check_stream(handle),
            Err(CudaError::InvalidResourceHandle)
        );
        registry.streams.insert(
            handle,
            Stream {
                flags: 0,
                priority: 0,
            },
        );
        assert_eq!(registry.check_stream(handle), Ok(()));
        assert_ne!(registry.new_handle(), handle);
    }

    #[test]
    fn texture_objects_are_copied_on_write_and_references_listed_when_bound() {
        let mut registry = Registry::default();
        let texture = Texture {
            base: 0x1000,
            len_bytes: 64,
            kind: ChannelKind::Float,
            channels: 1,
            bits_per_channel: 32,
            normalized_float: false,
            sampling: None,
        };
        let snapshot = Arc::clone(&registry.texture_objects);
        let handle = registry.add_texture_object(texture);
        assert_ne!(handle, 0);
        assert!(snapshot.is_empty(), "a running launch keeps its view");
        assert_eq!(registry.texture_objects.get(&handle), Some(&texture));
        for (host, bound) in [(0x10, Some(texture)), (0x20, None)] {
            registry.textures.insert(
                host,
                TextureReference {
                    module: 1,
                    name: format!("t{host}"),
                    normalized_read: false,
                    bound,
                },
            );
        }
        let bound = registry.bound_references(1);
        assert_eq!(bound.len(), 1);
        assert_eq!(bound.get("t16"), Some(&texture));
        assert!(registry.bound_references(2).is_empty());
    }
}
