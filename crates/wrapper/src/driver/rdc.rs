//! Separable compilation (`-fgpu-rdc`, `-rdc=true`, `-dc`, `-dlink`): what a unit's object keeps
//! for the device link, and what the device link makes of it.
//!
//! clang and nvcc compile such a unit's host code so that its constructor calls
//! `__cudaRegisterLinkedBinary_<module id>(register_globals, ...)` instead of registering a fat
//! binary; the device link (nvlink and `crt/link.stub`) defines those functions: the last unit
//! to call registers the linked device code once and hands its handle to every unit's
//! `register_globals`, which registers the unit's kernels and variables in it. cuda-flux keeps
//! that protocol and replaces the device code:
//!
//! * **Compile** (per unit): the object keeps the unit's *uninstrumented* PTX of every
//!   architecture, with its module id and source name, in a [`UnitRecord`] in the section
//!   [`UNIT_SECTION`] (flag `e`: `ld -r` and archives keep it, a final link drops it). The host
//!   code's launches are routed to the host runtime as in any unit, and its kernel
//!   registrations go through [`REGISTER_FUNCTION_HOOK`] (a weak plain forward in the object;
//!   the device link's object records each kernel's host stub there).
//! * **Device link** (`cuda-flux-nvcc -dlink`, or the final link by either driver when no
//!   device-link object is among its inputs): every unit record of the inputs (objects and
//!   static archives) is read back; the PTX of each architecture is linked into one module
//!   (`ptx_link`) and instrumented once (`device_runtime::instrument_module`), since a clone
//!   needs every function it reaches, wherever defined; the driver assembles it (the CPU
//!   target embeds the CPU image). The device-link object ([`link_object_source`]) defines
//!   `__cudaRegisterLinkedBinary_<id>` for every unit, registers the linked module once all
//!   units have called, runs their `register_globals`, then registers each kernel's counting
//!   clone and snapshots with the host runtime as the host pass does for a whole-program unit.
//!   It lists the module ids it covers in [`LINKED_SECTION`], so that a later final link of
//!   the same objects does not link them again.
//! * **nvlink's device link** (CMake with clang): each unit's relocatable cubin also carries
//!   its record ([`unit_record_ptx`]); the driver's compile of `crt/link.stub` reads them from
//!   nvlink's cubin ([`nvlink_device_link`]) and makes that object the device link above.
//! * **Other compilers' units** (`nvcc -dc`): no record, but their relocatable fat binary's
//!   PTX ([`ForeignUnit`], `fatbin.rs`) joins the device link; their kernels' launches do not
//!   reach cuda-flux.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use ptx_sim::image::ArchPtx;
use thiserror::Error;

use super::fatbin;

/// The section of a unit's object that holds its [`UnitRecord`].
pub const UNIT_SECTION: &str = ".cuda_flux_rdc";
/// The section of a device-link object that lists the module ids it links.
pub const LINKED_SECTION: &str = ".cuda_flux_linked";
/// What a separately compiled unit's host code calls instead of `__cudaRegisterFunction`
/// (same signature).
pub const REGISTER_FUNCTION_HOOK: &str = "__cuda_flux_rdc_register_function";
/// The prefix of the registration function each unit's constructor calls (clang and nvcc).
pub const REGISTER_LINKED_BINARY: &str = "__cudaRegisterLinkedBinary_";

const RECORD_MAGIC: &[u8; 8] = b"CFLXRDC1";
const LINKED_MAGIC: &[u8; 8] = b"CFLXLNK1";

/// Reading unit records back.
#[derive(Debug, Error)]
pub enum RdcError {
    #[error("{0}: truncated or corrupt cuda-flux separable-compilation record")]
    Corrupt(String),
    #[error("{path}: {message}")]
    Object { path: String, message: String },
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// What a unit's object keeps for the device link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitRecord {
    /// The id clang gave the unit (`__nv_...`), the suffix of its registration function.
    pub module_id: String,
    /// The unit's source, for messages and the profile's `source`.
    pub source: String,
    /// The unit's PTX, uninstrumented, for every architecture it was compiled for.
    pub archs: Vec<ArchPtx>,
}

fn push_string(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if bytes.len() < n {
        return None;
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Some(head)
}

fn take_u64(bytes: &mut &[u8]) -> Option<u64> {
    take(bytes, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
}

fn take_string(bytes: &mut &[u8]) -> Option<String> {
    let len = usize::try_from(take_u64(bytes)?).ok()?;
    String::from_utf8(take(bytes, len)?.to_vec()).ok()
}

/// `magic`, the payload's length, the payload.
fn frame(magic: &[u8; 8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + payload.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payloads of the `magic` frames in a section's bytes (sections of several objects merged
/// by `ld -r` follow each other, possibly with padding between them).
fn frames<'a>(mut bytes: &'a [u8], magic: &[u8; 8], what: &str) -> Result<Vec<&'a [u8]>, RdcError> {
    let mut out = Vec::new();
    loop {
        while bytes.first() == Some(&0) {
            bytes = &bytes[1..];
        }
        if bytes.is_empty() {
            return Ok(out);
        }
        let corrupt = || RdcError::Corrupt(what.to_string());
        if take(&mut bytes, 8) != Some(&magic[..]) {
            return Err(corrupt());
        }
        let len = take_u64(&mut bytes)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(corrupt)?;
        out.push(take(&mut bytes, len).ok_or_else(corrupt)?);
    }
}

impl UnitRecord {
    /// The record as it goes into [`UNIT_SECTION`].
    pub fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::new();
        push_string(&mut payload, &self.module_id);
        push_string(&mut payload, &self.source);
        payload.extend_from_slice(&ptx_sim::image::encode(&self.archs));
        frame(RECORD_MAGIC, &payload)
    }

    /// Every record in a [`UNIT_SECTION`]'s bytes; `what` names the file for errors.
    pub fn decode_all(bytes: &[u8], what: &str) -> Result<Vec<UnitRecord>, RdcError> {
        frames(bytes, RECORD_MAGIC, what)?
            .into_iter()
            .map(|mut payload| {
                let corrupt = || RdcError::Corrupt(what.to_string());
                let module_id = take_string(&mut payload).ok_or_else(corrupt)?;
                let source = take_string(&mut payload).ok_or_else(corrupt)?;
                let archs = ptx_sim::image::decode(payload).map_err(|_| corrupt())?;
                Ok(UnitRecord {
                    module_id,
                    source,
                    archs,
                })
            })
            .collect()
    }
}

/// The [`LINKED_SECTION`] bytes for a device link of the units `module_ids`.
pub fn encode_linked(module_ids: &[String]) -> Vec<u8> {
    let mut payload = Vec::new();
    for id in module_ids {
        push_string(&mut payload, id);
    }
    frame(LINKED_MAGIC, &payload)
}

/// The section in which clang and nvcc put a separately compiled unit's relocatable fat
/// binary.
pub const RELOCATABLE_FATBIN_SECTION: &str = "__nv_relfatbin";

/// A separately compiled unit another compiler built (`nvcc -dc`, `clang++ -fgpu-rdc`): no
/// record, but the PTX its relocatable fat binary holds (nvcc 11.8 keeps `compute_52` PTX by
/// default), which joins cuda-flux's device link in its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignUnit {
    /// The suffix of the registration function its host code calls.
    pub module_id: String,
    /// The object (or archive member) it came from, for messages.
    pub object: String,
    /// A member of a static archive (`libcudadevrt.a` given by its path, say), which a link
    /// may not need: one without usable PTX is left out rather than refused.
    pub in_archive: bool,
    pub ptx: Vec<fatbin::PtxEntry>,
}

/// A foreign unit without PTX that a device link for `arch` could use.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{object}: separately compiled by another compiler, with no PTX for sm_{arch} or an earlier architecture in its fat binary, so it cannot join cuda-flux's device link (compile it with cuda-flux, or keep PTX in it: nvcc -gencode arch=compute_{arch},code=[sm_{arch},compute_{arch}])")]
pub struct NoForeignPtx {
    pub object: String,
    pub arch: u32,
}

impl ForeignUnit {
    /// The unit as a record for a device link for `archs`: for each, the PTX of the highest
    /// virtual architecture not above it (PTX runs on later architectures), its `.target`
    /// made that architecture's, as the other units' is.
    pub fn record_for(&self, archs: &[u32]) -> Result<UnitRecord, NoForeignPtx> {
        let mut out = Vec::new();
        for &arch in archs {
            let entry = self
                .ptx
                .iter()
                .filter(|e| e.arch <= arch)
                .max_by_key(|e| e.arch)
                .ok_or_else(|| NoForeignPtx {
                    object: self.object.clone(),
                    arch,
                })?;
            out.push(ArchPtx {
                arch,
                ptx: retarget(&entry.ptx, arch),
            });
        }
        Ok(UnitRecord {
            module_id: self.module_id.clone(),
            source: self.object.clone(),
            archs: out,
        })
    }
}

impl UnitRecord {
    /// The kernels (`.entry`) its PTX of the first architecture defines.
    pub fn kernels(&self) -> Vec<String> {
        let Some(first) = self.archs.first() else {
            return Vec::new();
        };
        first
            .ptx
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                words.find(|w| *w == ".entry")?;
                let name = words.next()?;
                Some(name.split('(').next().unwrap_or(name).to_string())
            })
            .collect()
    }
}

/// `ptx` with its `.target sm_XX` directive naming `sm_<arch>` (anything after the
/// architecture, `, debug`, kept).
fn retarget(ptx: &str, arch: u32) -> String {
    let mut out = String::with_capacity(ptx.len());
    let mut done = false;
    for line in ptx.split_inclusive('\n') {
        let trimmed = line.trim_start();
        match trimmed.strip_prefix(".target") {
            Some(rest) if !done && rest.starts_with(char::is_whitespace) => {
                let rest = rest.trim_start();
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let _ = write!(out, ".target sm_{arch}{}", &rest[end..]);
                done = true;
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// What the objects and archives of a link hold for separable compilation.
#[derive(Debug, Default)]
pub struct Found {
    pub units: Vec<UnitRecord>,
    /// Units of other compilers.
    pub foreign: Vec<ForeignUnit>,
    /// Module ids a device-link object among them already links.
    pub linked: BTreeSet<String>,
}

impl Found {
    /// The units no device-link object of the inputs links yet, each once (an object given
    /// twice, or in an archive and directly, links once as well).
    pub fn unlinked(&self) -> Vec<&UnitRecord> {
        let mut seen = BTreeSet::new();
        self.units
            .iter()
            .filter(|u| !self.linked.contains(&u.module_id) && seen.insert(u.module_id.clone()))
            .collect()
    }

    /// The same for the units of other compilers.
    pub fn unlinked_foreign(&self) -> Vec<&ForeignUnit> {
        let mut seen = BTreeSet::new();
        self.foreign
            .iter()
            .filter(|u| !self.linked.contains(&u.module_id) && seen.insert(u.module_id.clone()))
            .collect()
    }
}

/// Reads one object; `in_archive` when it is a member of a static archive.
fn read_elf(bytes: &[u8], what: &str, in_archive: bool, found: &mut Found) -> Result<(), RdcError> {
    use object::{Object as _, ObjectSection as _};
    let file = match object::File::parse(bytes) {
        Ok(file) => file,
        Err(error) if bytes.starts_with(b"\x7fELF") => {
            return Err(RdcError::Object {
                path: what.to_string(),
                message: error.to_string(),
            })
        }
        // Not an object (a linker script, a file of another format): nothing of separable
        // compilation in it.
        Err(_) => return Ok(()),
    };
    let object_error = |message: String| RdcError::Object {
        path: what.to_string(),
        message,
    };
    let mut relocatable_fatbin = None;
    let mut has_record = false;
    for section in file.sections() {
        let name = section.name().unwrap_or("");
        if name == RELOCATABLE_FATBIN_SECTION {
            relocatable_fatbin = Some(section.data().map_err(|e| object_error(e.to_string()))?);
        }
        has_record |= name == UNIT_SECTION;
        if name != UNIT_SECTION && name != LINKED_SECTION {
            continue;
        }
        let data = section.data().map_err(|e| RdcError::Object {
            path: what.to_string(),
            message: e.to_string(),
        })?;
        if name == UNIT_SECTION {
            found.units.extend(UnitRecord::decode_all(data, what)?);
        } else {
            for mut payload in frames(data, LINKED_MAGIC, what)? {
                while !payload.is_empty() {
                    let id = take_string(&mut payload)
                        .ok_or_else(|| RdcError::Corrupt(what.to_string()))?;
                    found.linked.insert(id);
                }
            }
        }
    }
    use object::ObjectSymbol as _;
    // A device link made by another tool (`nvcc -dlink`) defines the registration functions
    // of the units it links (the weak ones of link.stub compiled by the driver yield).
    for symbol in file.symbols() {
        if symbol.is_definition() && symbol.is_global() && !symbol.is_weak() {
            if let Some(id) = symbol
                .name()
                .ok()
                .and_then(|n| n.strip_prefix(REGISTER_LINKED_BINARY))
            {
                found.linked.insert(id.to_string());
            }
        }
    }
    // A unit of another compiler: its registration function names its module id.
    if let (false, Some(bytes)) = (has_record, relocatable_fatbin) {
        let module_id = file.symbols().find_map(|symbol| {
            symbol
                .name()
                .ok()?
                .strip_prefix(REGISTER_LINKED_BINARY)
                .map(str::to_string)
        });
        if let Some(module_id) = module_id {
            let ptx = fatbin::ptx_entries(bytes)
                .map_err(|e| object_error(format!("{RELOCATABLE_FATBIN_SECTION}: {e}")))?;
            found.foreign.push(ForeignUnit {
                module_id,
                object: what.to_string(),
                in_archive,
                ptx,
            });
        }
    }
    Ok(())
}

/// Reads the unit records and device-link lists of `path`: an object, or a static archive
/// (every member). Other files (shared libraries, linker scripts) hold none.
pub fn read_inputs(path: &Path, found: &mut Found) -> Result<(), RdcError> {
    let what = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| RdcError::Io {
        path: what.clone(),
        source,
    })?;
    if bytes.starts_with(b"!<arch>\n") {
        let archive =
            object::read::archive::ArchiveFile::parse(&*bytes).map_err(|e| RdcError::Object {
                path: what.clone(),
                message: e.to_string(),
            })?;
        for member in archive.members() {
            let member = member.map_err(|e| RdcError::Object {
                path: what.clone(),
                message: e.to_string(),
            })?;
            let data = member.data(&*bytes).map_err(|e| RdcError::Object {
                path: what.clone(),
                message: e.to_string(),
            })?;
            let name = format!("{what}({})", String::from_utf8_lossy(member.name()));
            // Members start at even offsets; the ELF reader needs its header aligned, as a
            // fresh allocation is.
            let aligned: Vec<u8> = data.to_vec();
            read_elf(aligned.as_slice(), &name, true, found)?;
        }
        return Ok(());
    }
    read_elf(&bytes, &what, false, found)
}

/// The prefix of the device variable that carries a unit's [`UnitRecord`] (that architecture's
/// PTX only) in the relocatable cubin of its object, so that it reaches the cubin nvlink links
/// (CMake's device link with clang: [`nvlink_device_link`]).
pub const UNIT_SYMBOL_PREFIX: &str = "__cuda_flux_unit_";

/// The PTX declaration of a unit's record as a device variable `UNIT_SYMBOL_PREFIX<unit>`,
/// appended to the PTX ptxas assembles into the unit's relocatable cubin. nvlink keeps every
/// visible variable, so the record is in the cubin it links; nothing reads the variable on
/// the device.
pub fn unit_record_ptx(unit: &str, record: &UnitRecord) -> String {
    let bytes = record.encode();
    let mut ptx = format!(
        "\n// cuda-flux: this unit's PTX for a device link made by nvlink (rdc.rs).\n\
         .visible .global .align 1 .b8 {UNIT_SYMBOL_PREFIX}{unit}[{}] = {{",
        bytes.len()
    );
    for (index, byte) in bytes.iter().enumerate() {
        if index > 0 {
            ptx.push(',');
        }
        if index % 32 == 0 {
            ptx.push('\n');
        }
        let _ = write!(ptx, "{byte}");
    }
    ptx.push_str("\n};\n");
    ptx
}

/// The unit records a cubin (nvlink's output, or a unit's relocatable cubin) carries in its
/// `UNIT_SYMBOL_PREFIX` variables, each with the variable's suffix, in symbol order.
pub fn cubin_unit_records(bytes: &[u8], what: &str) -> Result<Vec<(String, UnitRecord)>, RdcError> {
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
    let object_error = |message: String| RdcError::Object {
        path: what.to_string(),
        message,
    };
    let file = object::File::parse(bytes).map_err(|e| object_error(e.to_string()))?;
    let mut out = Vec::new();
    for symbol in file.symbols() {
        let Some(unit) = symbol
            .name()
            .ok()
            .and_then(|n| n.strip_prefix(UNIT_SYMBOL_PREFIX))
        else {
            continue;
        };
        let index = symbol
            .section_index()
            .ok_or_else(|| object_error(format!("{UNIT_SYMBOL_PREFIX}{unit} has no section")))?;
        let data = file
            .section_by_index(index)
            .and_then(|section| section.data())
            .map_err(|e| object_error(e.to_string()))?;
        let start = usize::try_from(symbol.address()).ok();
        let end = start
            .zip(usize::try_from(symbol.size()).ok())
            .and_then(|(s, n)| s.checked_add(n));
        let bytes = start
            .zip(end)
            .and_then(|(start, end)| data.get(start..end))
            .ok_or_else(|| RdcError::Corrupt(format!("{what} ({UNIT_SYMBOL_PREFIX}{unit})")))?;
        for record in UnitRecord::decode_all(bytes, what)? {
            out.push((unit.to_string(), record));
        }
    }
    Ok(out)
}

/// The module ids nvlink lists in its `--register-link-binaries` file (CMake's
/// `cmake_cuda_register.h`): one `DEFINE_REGISTER_FUNC(<id>)` per unit it linked, which
/// `crt/link.stub` pastes after `__cudaRegisterLinkedBinary`; returned as [`UnitRecord`]'s
/// module ids (what follows [`REGISTER_LINKED_BINARY`]). `None` if the text is not such a file
/// or its count disagrees.
pub fn register_file_module_ids(text: &str) -> Option<Vec<String>> {
    let mut count = None;
    let mut ids = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(n) = line.strip_prefix("#define NUM_PRELINKED_OBJECTS") {
            count = Some(n.trim().parse::<usize>().ok()?);
        } else if let Some(id) = line
            .strip_prefix("DEFINE_REGISTER_FUNC(")
            .and_then(|rest| rest.strip_suffix(')'))
        {
            let id = id.strip_prefix('_')?;
            let valid =
                !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid {
                return None;
            }
            ids.push(id.to_string());
        } else {
            return None;
        }
    }
    (count == Some(ids.len())).then_some(ids)
}

/// Why a device link made by nvlink cannot be replaced by cuda-flux's.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum NvlinkLinkError {
    #[error("nvlink linked {linked} unit(s) but only {found} carry cuda-flux's record for {arch} (the others were compiled by another compiler)")]
    ForeignUnits {
        arch: String,
        linked: usize,
        found: usize,
    },
}

/// The units of a device link made by nvlink: `module_ids` from its register file, and per
/// architecture the records its cubin carries. Every unit nvlink linked must carry its record
/// for every architecture; the records of one unit are merged into one with all its
/// architectures (in the order of the first cubin's symbols).
pub fn nvlink_device_link(
    module_ids: &[String],
    cubins: Vec<(String, Vec<(String, UnitRecord)>)>,
) -> Result<Vec<UnitRecord>, NvlinkLinkError> {
    let mut units: Vec<(String, UnitRecord)> = Vec::new();
    for (arch, records) in cubins {
        let mut distinct = BTreeSet::new();
        for (unit, record) in records {
            distinct.insert(unit.clone());
            match units.iter_mut().find(|(name, _)| *name == unit) {
                Some((_, merged)) => merged.archs.extend(record.archs),
                None => units.push((unit, record)),
            }
        }
        if distinct.len() != module_ids.len() {
            return Err(NvlinkLinkError::ForeignUnits {
                arch,
                linked: module_ids.len(),
                found: distinct.len(),
            });
        }
    }
    Ok(units.into_iter().map(|(_, record)| record).collect())
}

/// A path inside an assembler string (`.incbin "..."`) inside a C string literal.
fn asm_path(path: &Path) -> String {
    path.to_string_lossy()
        .replace('\\', "\\\\\\\\")
        .replace('"', "\\\\\\\"")
}

/// The C declarations both generated sources use.
const REGISTRATION_DECLARATIONS: &str = "\
extern int __cudaRegisterFunction(void **, const char *, char *, const char *, int, void *,\n\
\x20                                 void *, void *, void *, int *);\n";

/// The part a unit's object carries for separable compilation: its record in [`UNIT_SECTION`]
/// (`record` is the file holding it) and the weak, hidden [`REGISTER_FUNCTION_HOOK`] that
/// registers plainly where no cuda-flux device link defines it (a device link by nvlink).
pub fn unit_part_source(record: &Path) -> String {
    let mut c = String::from(
        "/* Generated by cuda-flux (crates/wrapper/src/driver/rdc.rs): a separately compiled\n   \
         unit's PTX for the device link. */\n",
    );
    c.push_str(REGISTRATION_DECLARATIONS);
    let _ = write!(
        c,
        "__attribute__((weak, visibility(\"hidden\"))) int {REGISTER_FUNCTION_HOOK}(\n\
         \x20   void **handle, const char *stub, char *name, const char *device_name, int limit,\n\
         \x20   void *tid, void *bid, void *block, void *grid, int *size) {{\n\
         \x20   return __cudaRegisterFunction(handle, stub, name, device_name, limit, tid, bid,\n\
         \x20                                 block, grid, size);\n\
         }}\n\
         __asm__(\".section {UNIT_SECTION},\\\"e\\\",@progbits\\n\"\n\
         \x20       \".incbin \\\"{}\\\"\\n\"\n\
         \x20       \".previous\\n\");\n",
        asm_path(record)
    );
    c
}

/// The symbol a cuda-flux device-link object defines (hidden: per executable or shared
/// library), which CUDA's `crt/link.stub` compiled by the driver looks for.
pub const DEVICE_LINK_PRESENT: &str = "__cuda_flux_device_link_present";

/// What the driver adds to CUDA's `crt/link.stub` (compiled for a device link by nvlink, as
/// CMake's separable compilation with clang makes it) when it cannot make that object
/// cuda-flux's device link (e.g. a unit of another compiler among nvlink's), and makes its
/// registration functions weak: where a cuda-flux device link is linked too (the final link by
/// either driver), its instrumented registration is used; where none is (a C++ compiler's final
/// link), nvlink's uninstrumented device code runs and the program says so once on stderr
/// before anything is registered — on the CPU target, which cannot run nvlink's GPU code, and
/// exits.
pub fn link_stub_note_source(cpu_target: bool) -> String {
    let (what, exit) = if cpu_target {
        (
            "cannot run on the CPU target (nvlink linked it for a GPU)",
            "    exit(1);\n",
        )
    } else {
        ("runs uninstrumented and is not profiled", "")
    };
    format!(
        "/* Generated by cuda-flux (crates/wrapper/src/driver/rdc.rs). */\n\
         extern const char {DEVICE_LINK_PRESENT} __attribute__((weak, visibility(\"hidden\")));\n\
         extern long write(int, const void *, unsigned long);\n\
         extern void exit(int);\n\
         /* Before the units' constructors (priority 65535) register anything. */\n\
         __attribute__((constructor(101))) static void cf_link_stub_note(void) {{\n\
         \x20   static const char note[] = \"cuda-flux: this program's separately compiled \
         device code was linked by nvlink, not by cuda-flux (the build warned why, and a C++ \
         compiler made the final link), so it {what}; compile every separately compiled unit \
         with cuda-flux-clang or cuda-flux-nvcc\\n\";\n\
         \x20   if (&{DEVICE_LINK_PRESENT}) return;\n\
         \x20   (void)!write(2, note, sizeof note - 1);\n\
         {exit}\
         }}\n"
    )
}

/// One kernel of the linked module, as the device-link object registers it.
#[derive(Debug, Clone)]
pub struct LinkedKernel {
    /// The kernel's device name.
    pub name: String,
    /// Its counting clone's device name; `None` if not instrumented.
    pub clone: Option<String>,
    /// Its snapshots (JSON), one per architecture.
    pub snapshots: Vec<String>,
}

/// The device-link object's C source: `image` is the file holding the linked device code (a
/// fat binary, `fat_binary`, which goes where clang puts one, or a CPU image), `linked` the
/// file holding the [`LINKED_SECTION`] bytes, `module_ids` the units linked, `kernels` their
/// kernels.
pub fn link_object_source(
    image: &Path,
    fat_binary: bool,
    linked: &Path,
    module_ids: &[String],
    kernels: &[LinkedKernel],
) -> String {
    let (image_section, wrapper_section) = if fat_binary {
        (
            ".nv_fatbin",
            " __attribute__((section(\".nvFatBinSegment\")))",
        )
    } else {
        (".rodata.cuda_flux_linked", "")
    };
    use super::carry::c_string;
    // A unit whose module id the driver could not read (its host code built plainly) registers
    // through nothing of this object.
    let module_ids: Vec<&String> = module_ids.iter().filter(|id| !id.is_empty()).collect();
    let units = module_ids.len().max(1);
    let count = kernels.len().max(1);
    let mut c = String::from(
        "/* Generated by cuda-flux (crates/wrapper/src/driver/rdc.rs): the device link of\n   \
         separately compiled units, their PTX linked and instrumented as one module. */\n",
    );
    c.push_str(REGISTRATION_DECLARATIONS);
    c.push_str(
        "extern void **__cudaRegisterFatBinary(void *);\n\
         extern void __cudaRegisterFatBinaryEnd(void **);\n\
         extern void __cudaUnregisterFatBinary(void **);\n\
         extern void __cuda_flux_register_kernel(const void *, const void *, const char *,\n\
         \x20                                       unsigned long);\n\
         extern int atexit(void (*)(void));\n\
         extern int strcmp(const char *, const char *);\n\
         extern const unsigned char cf_linked_image[] __asm__(\"cf_linked_image\");\n",
    );
    let _ = write!(
        c,
        "__asm__(\".section {image_section},\\\"a\\\",@progbits\\n\"\n\
         \x20       \".p2align 4\\n\"\n\
         \x20       \"cf_linked_image:\\n\"\n\
         \x20       \".incbin \\\"{}\\\"\\n\"\n\
         \x20       \".previous\\n\"\n\
         \x20       \".section {LINKED_SECTION},\\\"e\\\",@progbits\\n\"\n\
         \x20       \".incbin \\\"{}\\\"\\n\"\n\
         \x20       \".previous\\n\");\n",
        asm_path(image),
        asm_path(linked)
    );
    let _ = write!(
        c,
        "/* clang's and nvcc's fat binary wrapper (magic, version, data, unused). */\n\
         static const struct {{ int magic; int version; const void *data; void *unused; }}\n\
         \x20   cf_wrapper{wrapper_section} = {{ 0x466243b1, 1, cf_linked_image, 0 }};\n\
         static void **cf_handle;\n",
    );
    let _ = writeln!(
        c,
        "__attribute__((visibility(\"hidden\"))) const char {DEVICE_LINK_PRESENT} = 1;"
    );
    let _ = writeln!(c, "static void (*cf_callbacks[{units}])(void **);");
    c.push_str("static int cf_called;\n");
    let _ = writeln!(c, "static const char *const cf_kernels[{count}] = {{");
    for k in kernels {
        let _ = writeln!(c, "    {},", c_string(&k.name));
    }
    c.push_str("};\n");
    let _ = writeln!(c, "static const char *const cf_clones[{count}] = {{");
    for k in kernels {
        match &k.clone {
            Some(clone) => {
                let _ = writeln!(c, "    {},", c_string(clone));
            }
            None => c.push_str("    0,\n"),
        }
    }
    c.push_str("};\n");
    let _ = writeln!(c, "static const void *cf_stubs[{count}];");
    c.push_str(
        "/* A distinct host address stands for each clone, as a stub does for a kernel. */\n",
    );
    let _ = writeln!(c, "static char cf_clone_stubs[{count}];");
    let snapshots: usize = kernels.iter().map(|k| k.snapshots.len()).sum();
    let _ = writeln!(
        c,
        "static const struct {{ int kernel; const char *json; unsigned long length; }}\n\
         \x20   cf_snapshots[{}] = {{",
        snapshots.max(1)
    );
    for (index, k) in kernels.iter().enumerate() {
        for snapshot in &k.snapshots {
            let _ = writeln!(
                c,
                "    {{ {index}, {}, {} }},",
                c_string(snapshot),
                snapshot.len()
            );
        }
    }
    c.push_str("};\n");
    let _ = write!(
        c,
        "__attribute__((visibility(\"hidden\"))) int {REGISTER_FUNCTION_HOOK}(\n\
         \x20   void **handle, const char *stub, char *name, const char *device_name, int limit,\n\
         \x20   void *tid, void *bid, void *block, void *grid, int *size) {{\n\
         \x20   for (int i = 0; i < {len}; i++)\n\
         \x20       if (!strcmp(device_name, cf_kernels[i])) cf_stubs[i] = stub;\n\
         \x20   return __cudaRegisterFunction(handle, stub, name, device_name, limit, tid, bid,\n\
         \x20                                 block, grid, size);\n\
         }}\n\
         static void cf_unregister(void) {{ __cudaUnregisterFatBinary(cf_handle); }}\n\
         static void cf_register(void (*callback)(void **)) {{\n\
         \x20   if (cf_called >= {units}) return;\n\
         \x20   cf_callbacks[cf_called++] = callback;\n\
         \x20   /* As crt/link.stub: the last unit registers the linked code for all. */\n\
         \x20   if (cf_called < {units}) return;\n\
         \x20   cf_handle = __cudaRegisterFatBinary((void *)&cf_wrapper);\n\
         \x20   atexit(cf_unregister);\n\
         \x20   for (int i = 0; i < {units}; i++) cf_callbacks[i](cf_handle);\n\
         \x20   for (int i = 0; i < {len}; i++)\n\
         \x20       if (cf_stubs[i] && cf_clones[i])\n\
         \x20           __cudaRegisterFunction(cf_handle, &cf_clone_stubs[i], (char *)cf_clones[i],\n\
         \x20                                  cf_clones[i], -1, 0, 0, 0, 0, 0);\n\
         \x20   for (int i = 0; i < {snapshots}; i++) {{\n\
         \x20       int k = cf_snapshots[i].kernel;\n\
         \x20       /* A kernel no unit's host code registers is never launched. */\n\
         \x20       if (!cf_stubs[k]) continue;\n\
         \x20       __cuda_flux_register_kernel(cf_stubs[k], cf_clones[k] ? &cf_clone_stubs[k] : 0,\n\
         \x20                                   cf_snapshots[i].json, cf_snapshots[i].length);\n\
         \x20   }}\n\
         \x20   __cudaRegisterFatBinaryEnd(cf_handle);\n\
         }}\n",
        len = kernels.len(),
    );
    // As crt/link.stub, name every unit's fat binary wrapper: a unit in a static archive that
    // nothing else on the host side needs (one holding only device functions) is then linked,
    // and its constructor calls in.
    for id in &module_ids {
        let _ = writeln!(c, "extern const char __fatbinwrap_{id}[];");
    }
    let _ = writeln!(
        c,
        "__attribute__((used)) static const void *const cf_units[{units}] = {{"
    );
    for id in &module_ids {
        let _ = writeln!(c, "    __fatbinwrap_{id},");
    }
    c.push_str(
        "};
",
    );
    for id in &module_ids {
        let _ = writeln!(
            c,
            "void {REGISTER_LINKED_BINARY}{id}(void (*callback)(void **), void *fatbin, \
             void *id, void (*dummy)(void *)) {{\n\
             \x20   (void)fatbin; (void)id; (void)dummy;\n\
             \x20   cf_register(callback);\n\
             }}"
        );
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> UnitRecord {
        UnitRecord {
            module_id: id.to_string(),
            source: format!("{id}.cu"),
            archs: vec![
                ArchPtx {
                    arch: 70,
                    ptx: ".version 7.8\n".to_string(),
                },
                ArchPtx {
                    arch: 80,
                    ptx: String::new(),
                },
            ],
        }
    }

    #[test]
    fn records_round_trip_through_merged_sections() {
        // `ld -r` of two objects: their sections follow each other, with alignment padding.
        let mut section = record("__nv_a").encode();
        section.extend_from_slice(&[0, 0, 0]);
        section.extend_from_slice(&record("__nv_b").encode());
        let records = UnitRecord::decode_all(&section, "x.o").unwrap();
        assert_eq!(records, [record("__nv_a"), record("__nv_b")]);
        assert!(UnitRecord::decode_all(&section[..section.len() - 1], "x.o").is_err());
        assert!(UnitRecord::decode_all(b"garbage!garbage!", "x.o").is_err());
        assert!(UnitRecord::decode_all(&[], "x.o").unwrap().is_empty());
    }

    #[test]
    fn register_files_give_module_ids() {
        let text = "#define NUM_PRELINKED_OBJECTS 2\n\
                    DEFINE_REGISTER_FUNC(__nv_7f4be62e2ec4b775)\n\
                    DEFINE_REGISTER_FUNC(__nv_5a76b6dc7f58ac92)\n";
        assert_eq!(
            register_file_module_ids(text).unwrap(),
            ["_nv_7f4be62e2ec4b775", "_nv_5a76b6dc7f58ac92"]
        );
        assert_eq!(
            register_file_module_ids("#define NUM_PRELINKED_OBJECTS 0\n").unwrap(),
            Vec::<String>::new()
        );
        // A count that disagrees, something else, a name that is not an identifier.
        for bad in [
            "#define NUM_PRELINKED_OBJECTS 3\nDEFINE_REGISTER_FUNC(__nv_a)\n",
            "#include \"x.h\"\n",
            "#define NUM_PRELINKED_OBJECTS 1\nDEFINE_REGISTER_FUNC(__nv a)\n",
            "DEFINE_REGISTER_FUNC(__nv_a)\n",
        ] {
            assert_eq!(register_file_module_ids(bad), None, "{bad}");
        }
    }

    #[test]
    fn unit_records_survive_ptxas_and_nvlink() {
        // A unit's record as ptxas assembles it into the relocatable cubin, and as nvlink links
        // two such cubins: read back from the cubin's variables, byte for byte.
        let dir = tempfile::tempdir().unwrap();
        let header = ".version 7.0\n.target sm_70\n.address_size 64\n";
        let records: Vec<UnitRecord> = ["a", "b"]
            .iter()
            .map(|unit| UnitRecord {
                module_id: String::new(),
                source: format!("{unit}.cu"),
                archs: vec![ArchPtx {
                    arch: 70,
                    ptx: format!("{header}// unit {unit}: \"quoted\", \\ and \u{e9}\n"),
                }],
            })
            .collect();
        let mut cubins = Vec::new();
        for (unit, record) in ["a", "b"].iter().zip(&records) {
            let ptx = dir.path().join(format!("{unit}.ptx"));
            let cubin = dir.path().join(format!("{unit}.cubin"));
            std::fs::write(&ptx, format!("{header}{}", unit_record_ptx(unit, record))).unwrap();
            let status = std::process::Command::new("ptxas")
                .args(["-arch=sm_70", "--compile-only", "-o"])
                .arg(&cubin)
                .arg(&ptx)
                .status()
                .expect("ptxas (CUDA toolkit; scripts/setup.sh installs it)");
            assert!(status.success());
            let bytes = std::fs::read(&cubin).unwrap();
            assert_eq!(
                cubin_unit_records(&bytes, "unit cubin").unwrap(),
                [(unit.to_string(), record.clone())]
            );
            cubins.push(cubin);
        }
        let linked = dir.path().join("linked.cubin");
        let status = std::process::Command::new("nvlink")
            .arg("-arch=sm_70")
            .arg(format!("-o={}", linked.display()))
            .args(&cubins)
            .status()
            .expect("nvlink (CUDA toolkit)");
        assert!(status.success());
        let found = cubin_unit_records(&std::fs::read(&linked).unwrap(), "linked").unwrap();
        let ids = ["_nv_a".to_string(), "_nv_b".to_string()];
        let mut units =
            nvlink_device_link(&ids, vec![("sm_70".to_string(), found.clone())]).unwrap();
        units.sort_by(|x, y| x.source.cmp(&y.source));
        assert_eq!(units, records);
        // A unit nvlink linked without a record (another compiler's).
        let three = [ids[0].clone(), ids[1].clone(), "_nv_c".to_string()];
        assert_eq!(
            nvlink_device_link(&three, vec![("sm_70".to_string(), found)]),
            Err(NvlinkLinkError::ForeignUnits {
                arch: "sm_70".to_string(),
                linked: 3,
                found: 2
            })
        );
    }

    #[test]
    fn foreign_units_take_the_closest_earlier_ptx_retargeted() {
        let entry = |arch: u32| {
            fatbin::PtxEntry {
            arch,
            ptx: format!(".version 7.8\n.target sm_{arch}, debug\n.address_size 64\n.visible .entry k{arch}(\n)\n{{ ret; }}\n"),
        }
        };
        let unit = ForeignUnit {
            module_id: "99b_scale_cu".to_string(),
            object: "scale.o".to_string(),
            in_archive: false,
            ptx: vec![entry(52), entry(75), entry(61)],
        };
        let record = unit.record_for(&[70, 80]).unwrap();
        assert_eq!(record.module_id, "99b_scale_cu");
        assert_eq!(record.archs[0].arch, 70);
        assert!(record.archs[0].ptx.contains(".target sm_70, debug\n"));
        assert!(record.archs[0].ptx.contains("k61("));
        assert!(record.archs[1].ptx.contains(".target sm_80, debug\n"));
        assert!(record.archs[1].ptx.contains("k75("));
        assert_eq!(record.kernels(), ["k61"]);
        assert_eq!(
            unit.record_for(&[50]),
            Err(NoForeignPtx {
                object: "scale.o".to_string(),
                arch: 50
            })
        );
    }

    #[test]
    fn linked_units_are_not_linked_again() {
        let mut found = Found {
            units: vec![record("__nv_a"), record("__nv_b"), record("__nv_a")],
            ..Found::default()
        };
        let ids = ["__nv_a".to_string()];
        let bytes = encode_linked(&ids);
        let mut payload = frames(&bytes, LINKED_MAGIC, "d.o").unwrap()[0];
        found.linked.insert(take_string(&mut payload).unwrap());
        let unlinked: Vec<&str> = found
            .unlinked()
            .iter()
            .map(|u| u.module_id.as_str())
            .collect();
        assert_eq!(unlinked, ["__nv_b"]);
    }
}
