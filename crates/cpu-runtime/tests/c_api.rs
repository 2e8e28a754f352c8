//! The C ABI as programs see it: struct layouts and error values against CUDA 11.8's headers,
//! the archive's exports, and API calls made by C++ programs linked with `libcpu_runtime.a`
//! alone (no cudart). No kernels run here (see `modules.rs`).

mod support;

use std::collections::BTreeMap;

use support::{assert_exports, build, expect_success, run, HOST_RUNTIME_EXPORTS, PRELUDE};

/// The C member designator of a mirror's field: `a__b` is `a.b`, `r#type` is `type`.
fn c_member(field: &str) -> String {
    field.trim_start_matches("r#").replace("__", ".")
}

#[test]
fn struct_layouts_match_the_cuda_headers() {
    let mut source = String::from(PRELUDE);
    source.push_str("#include <cstddef>\nint main() {\n");
    for layout in cpu_runtime::abi::LAYOUTS {
        // Anonymous-type layouts cannot be named in C; every mirror here has a C name.
        let ty = layout.c_name;
        source.push_str(&format!(
            "  std::printf(\"{ty} size %zu\\n\", sizeof({ty}));\n"
        ));
        for (field, _) in layout.fields {
            let member = c_member(field);
            source.push_str(&format!(
                "  std::printf(\"{ty} {field} %zu\\n\", offsetof({ty}, {member}));\n"
            ));
        }
    }
    source.push_str("  return 0;\n}\n");
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "layouts", &source, false);
    let stdout = expect_success(&run(&exe, &[], &[]));
    let c: BTreeMap<String, usize> = stdout
        .lines()
        .filter_map(|line| {
            let (key, value) = line.rsplit_once(' ')?;
            Some((key.to_owned(), value.parse().ok()?))
        })
        .collect();
    let mut checked = 0;
    for layout in cpu_runtime::abi::LAYOUTS {
        let ty = layout.c_name;
        assert_eq!(
            c.get(&format!("{ty} size")),
            Some(&layout.size),
            "sizeof({ty})"
        );
        for (field, offset) in layout.fields {
            assert_eq!(
                c.get(&format!("{ty} {field}")),
                Some(offset),
                "offsetof({ty}, {})",
                c_member(field)
            );
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} fields compared");
    assert_eq!(c.get("struct cudaDeviceProp size"), Some(&728));
}

#[test]
fn the_archive_carries_the_host_runtime_and_links_without_cudart() {
    assert_exports(&HOST_RUNTIME_EXPORTS);
    assert_exports(&[
        "__cudaRegisterFatBinary",
        "__cudaRegisterFunction",
        "__cudaRegisterVar",
        "__cudaPushCallConfiguration",
        "__cudaPopCallConfiguration",
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaMalloc",
        "cudaMemcpyToSymbol",
        "cudaGetErrorString",
    ]);

    // A program calling the host runtime's entry points directly: it links with the archive
    // alone, and an unregistered launch is forwarded to this runtime, which reports it.
    let source = format!(
        "{PRELUDE}{}",
        r#"
extern "C" cudaError_t __cuda_flux_launch_kernel(const void*, dim3, dim3, void**, size_t, cudaStream_t);
extern "C" cudaError_t __cuda_flux_device_reset(void);
static int marker;
int main() {
    EXPECT_CODE(__cuda_flux_launch_kernel(&marker, dim3(1), dim3(1), nullptr, 0, 0),
                cudaErrorInvalidDeviceFunction);
    OK(__cuda_flux_device_reset());
    std::printf("failures %d\n", failures);
    return failures != 0;
}
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "host_runtime", &source, true);
    let stdout = expect_success(&run(&exe, &[], &[]));
    assert!(stdout.contains("failures 0"), "{stdout}");
}

/// Every `cudaError_t` enumerator of the header, parsed from its text.
fn header_error_names() -> Vec<String> {
    let header = std::fs::read_to_string("/usr/include/driver_types.h").expect("CUDA headers");
    let start = header
        .find("enum __device_builtin__ cudaError")
        .expect("cudaError enum");
    let body = &header[start..];
    let body = &body[..body.find("};").expect("end of enum")];
    body.lines()
        .map(str::trim_start)
        .filter_map(|line| line.trim_start_matches(',').split_whitespace().next())
        .filter(|word| word.starts_with("cudaError") || *word == "cudaSuccess")
        .filter(|word| word.chars().all(|c| c.is_ascii_alphanumeric()))
        .filter(|word| *word != "cudaError")
        .map(str::to_owned)
        .collect()
}

#[test]
fn error_names_and_strings_follow_the_header() {
    let names = header_error_names();
    assert!(names.len() > 100, "{} names", names.len());
    let mut source = String::from(PRELUDE);
    source.push_str("int main() {\n");
    for name in &names {
        source.push_str(&format!(
            "  EXPECT(std::strcmp(cudaGetErrorName({name}), \"{name}\") == 0);\n"
        ));
    }
    source.push_str(
        r#"
  EXPECT(std::strcmp(cudaGetErrorString(cudaSuccess), "no error") == 0);
  EXPECT(std::strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0);
  EXPECT(std::strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory") == 0);
  EXPECT(std::strcmp(cudaGetErrorString(cudaErrorInvalidDeviceFunction), "invalid device function") == 0);
  EXPECT(std::strcmp(cudaGetErrorString((cudaError_t)12345), "unrecognized error code") == 0);
  EXPECT(std::strcmp(cudaGetErrorName((cudaError_t)12345), "unrecognized error code") == 0);
  std::printf("failures %d\n", failures);
  return failures != 0;
}
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "errors", &source, true);
    let stdout = expect_success(&run(&exe, &[], &[]));
    assert!(stdout.contains("failures 0"), "{stdout}");
}

const API_PROGRAM: &str = r#"
#include <unistd.h>
#include <vector>

extern "C" unsigned __cudaPushCallConfiguration(dim3, dim3, size_t, cudaStream_t);
extern "C" cudaError_t __cudaPopCallConfiguration(dim3*, dim3*, size_t*, void*);

static void device_queries() {
    int count = -1, device = -1;
    OK(cudaGetDeviceCount(&count));
    EXPECT(count == 1);
    OK(cudaGetDevice(&device));
    EXPECT(device == 0);
    OK(cudaSetDevice(0));
    EXPECT_CODE(cudaSetDevice(1), cudaErrorInvalidDevice);
    EXPECT(cudaPeekAtLastError() == cudaErrorInvalidDevice);
    EXPECT(cudaGetLastError() == cudaErrorInvalidDevice);
    EXPECT(cudaGetLastError() == cudaSuccess);

    cudaDeviceProp prop;
    std::memset(&prop, 0x55, sizeof prop);
    OK(cudaGetDeviceProperties(&prop, 0));
    EXPECT(std::strcmp(prop.name, "cuda-flux CPU target") == 0);
    EXPECT(prop.major == 7 && prop.minor == 0);
    EXPECT(prop.warpSize == 32);
    EXPECT(prop.maxThreadsPerBlock == 1024);
    EXPECT(prop.maxThreadsDim[0] == 1024 && prop.maxThreadsDim[1] == 1024 && prop.maxThreadsDim[2] == 64);
    EXPECT(prop.maxGridSize[0] == 2147483647 && prop.maxGridSize[1] == 65535 && prop.maxGridSize[2] == 65535);
    EXPECT(prop.sharedMemPerBlock == 48 * 1024);
    EXPECT(prop.sharedMemPerBlockOptin == 227 * 1024);
    EXPECT(prop.regsPerBlock == 65536);
    EXPECT(prop.multiProcessorCount == 5);
    EXPECT(prop.totalGlobalMem > 0);
    EXPECT(prop.unifiedAddressing == 1 && prop.canMapHostMemory == 1 && prop.managedMemory == 1);
    EXPECT(prop.reservedSharedMemPerBlock == 0);
    EXPECT_CODE(cudaGetDeviceProperties(&prop, 1), cudaErrorInvalidDevice);

    int value = -1;
    OK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, 0));
    EXPECT(value == 5);
    OK(cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, 0));
    EXPECT(value == 7);
    OK(cudaDeviceGetAttribute(&value, cudaDevAttrMaxBlockDimZ, 0));
    EXPECT(value == 64);
    OK(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    EXPECT(value == 227 * 1024);
    EXPECT_CODE(cudaDeviceGetAttribute(&value, (cudaDeviceAttr)44, 0), cudaErrorInvalidValue);

    int version = 0;
    OK(cudaDriverGetVersion(&version));
    EXPECT(version == 11080);
    OK(cudaRuntimeGetVersion(&version));
    EXPECT(version == 11080);

    OK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync | cudaDeviceMapHost));
    EXPECT_CODE(cudaSetDeviceFlags(0x100), cudaErrorInvalidValue);
    OK(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
    OK(cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeFourByte));
    size_t limit = 0;
    OK(cudaDeviceSetLimit(cudaLimitStackSize, 4096));
    OK(cudaDeviceGetLimit(&limit, cudaLimitStackSize));
    EXPECT(limit == 4096);
    EXPECT_CODE(cudaDeviceSetLimit((cudaLimit)99, 1), cudaErrorUnsupportedLimit);
    OK(cudaDeviceSynchronize());
    OK(cudaThreadSynchronize());
}

static void memory() {
    const size_t n = 1000;
    unsigned char *d = nullptr, *d2 = nullptr;
    OK(cudaMalloc((void**)&d, n));
    OK(cudaMalloc((void**)&d2, n));
    EXPECT(d != nullptr && (uintptr_t)d % 256 == 0);
    std::vector<unsigned char> h(n), back(n);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 7 + 1);
    OK(cudaMemset(d, 0xab, n));
    OK(cudaMemcpy(back.data(), d, n, cudaMemcpyDeviceToHost));
    EXPECT(back[0] == 0xab && back[n - 1] == 0xab);
    OK(cudaMemcpy(d, h.data(), n, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(d2, d, n, cudaMemcpyDeviceToDevice));
    OK(cudaMemcpy(back.data(), d2, n, cudaMemcpyDeviceToHost));
    EXPECT(std::memcmp(back.data(), h.data(), n) == 0);
    OK(cudaMemcpy(back.data(), d + 10, 5, cudaMemcpyDefault));
    EXPECT(back[0] == h[10] && back[4] == h[14]);

    // Device sides must be device memory, inside one allocation.
    EXPECT_CODE(cudaMemcpy(back.data(), h.data(), n, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_CODE(cudaMemcpy(d + 990, h.data(), 20, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_CODE(cudaMemcpy(d, h.data(), n, (cudaMemcpyKind)7), cudaErrorInvalidMemcpyDirection);
    EXPECT_CODE(cudaMemset(h.data(), 0, n), cudaErrorInvalidValue);
    OK(cudaMemcpy(d, h.data(), 0, cudaMemcpyHostToDevice));

    OK(cudaFree(d2));
    EXPECT_CODE(cudaFree(d2), cudaErrorInvalidValue);
    EXPECT_CODE(cudaFree(h.data()), cudaErrorInvalidValue);
    EXPECT_CODE(cudaFree(d + 1), cudaErrorInvalidValue);
    OK(cudaFree(nullptr));
    EXPECT(cudaGetLastError() == cudaErrorInvalidValue);

    // Pitched memory.
    unsigned char *p = nullptr;
    size_t pitch = 0;
    OK(cudaMallocPitch((void**)&p, &pitch, 100, 4));
    EXPECT(pitch == 512);
    std::vector<unsigned char> rows(100 * 4), rows_back(100 * 4, 0);
    for (size_t i = 0; i < rows.size(); i++) rows[i] = (unsigned char)(i * 3);
    OK(cudaMemset2D(p, pitch, 0x11, 100, 4));
    OK(cudaMemcpy2D(p, pitch, rows.data(), 100, 100, 3, cudaMemcpyHostToDevice));
    OK(cudaMemcpy2D(rows_back.data(), 100, p, pitch, 100, 4, cudaMemcpyDeviceToHost));
    EXPECT(std::memcmp(rows_back.data(), rows.data(), 300) == 0);
    EXPECT(rows_back[300] == 0x11 && rows_back[399] == 0x11);
    EXPECT_CODE(cudaMemcpy2D(p, 50, rows.data(), 100, 100, 1, cudaMemcpyHostToDevice), cudaErrorInvalidPitchValue);
    EXPECT_CODE(cudaMemcpy2D(p, pitch, rows.data(), 100, 100, 5, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    OK(cudaFree(p));

    // Pinned, mapped, managed, registered memory and pointer attributes.
    float *pinned = nullptr, *mapped = nullptr, *managed = nullptr, *dev = nullptr;
    OK(cudaMallocHost((void**)&pinned, 64));
    OK(cudaHostAlloc((void**)&mapped, 64, cudaHostAllocMapped));
    OK(cudaMallocManaged((void**)&managed, 64, cudaMemAttachGlobal));
    OK(cudaMalloc((void**)&dev, 64));
    EXPECT_CODE(cudaMallocManaged((void**)&managed, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
    void *devptr = nullptr;
    OK(cudaHostGetDevicePointer(&devptr, mapped, 0));
    EXPECT(devptr == mapped);
    EXPECT_CODE(cudaHostGetDevicePointer(&devptr, dev, 0), cudaErrorInvalidValue);
    cudaPointerAttributes attr;
    OK(cudaPointerGetAttributes(&attr, dev));
    EXPECT(attr.type == cudaMemoryTypeDevice && attr.device == 0 && attr.devicePointer == dev && attr.hostPointer == nullptr);
    OK(cudaPointerGetAttributes(&attr, pinned + 3));
    EXPECT(attr.type == cudaMemoryTypeHost && attr.hostPointer == pinned + 3);
    OK(cudaPointerGetAttributes(&attr, managed));
    EXPECT(attr.type == cudaMemoryTypeManaged && attr.devicePointer == managed && attr.hostPointer == managed);
    OK(cudaPointerGetAttributes(&attr, h.data()));
    EXPECT(attr.type == cudaMemoryTypeUnregistered && attr.devicePointer == nullptr);
    managed[3] = 2.5f;
    OK(cudaMemcpy(dev, managed, 64, cudaMemcpyDeviceToDevice));
    float got = 0;
    OK(cudaMemcpy(&got, dev + 3, sizeof got, cudaMemcpyDeviceToHost));
    EXPECT(got == 2.5f);
    EXPECT_CODE(cudaFree(pinned), cudaErrorInvalidValue);
    EXPECT_CODE(cudaFreeHost(dev), cudaErrorInvalidValue);
    OK(cudaFreeHost(pinned));
    OK(cudaFreeHost(mapped));
    OK(cudaFree(managed));
    OK(cudaFree(dev));

    std::vector<char> pageable(4096);
    OK(cudaHostRegister(pageable.data(), pageable.size(), cudaHostRegisterDefault));
    EXPECT_CODE(cudaHostRegister(pageable.data() + 8, 16, cudaHostRegisterDefault), cudaErrorHostMemoryAlreadyRegistered);
    OK(cudaHostGetDevicePointer(&devptr, pageable.data() + 8, 0));
    EXPECT(devptr == pageable.data() + 8);
    OK(cudaMemset(pageable.data(), 7, 16));
    EXPECT(pageable[15] == 7);
    OK(cudaHostUnregister(pageable.data()));
    EXPECT_CODE(cudaHostUnregister(pageable.data()), cudaErrorHostMemoryNotRegistered);

    size_t free_bytes = 0, total = 0;
    OK(cudaMemGetInfo(&free_bytes, &total));
    cudaDeviceProp prop;
    OK(cudaGetDeviceProperties(&prop, 0));
    EXPECT(free_bytes <= total && total == prop.totalGlobalMem);
    EXPECT_CODE(cudaMalloc((void**)&d2, (size_t)1 << 62), cudaErrorMemoryAllocation);
    OK(cudaFree(d));
}

static void streams_and_events() {
    cudaStream_t s1, s2, s3;
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    OK(cudaStreamCreateWithPriority(&s3, cudaStreamDefault, -1));
    EXPECT(s1 != s2 && s2 != s3 && s1 != nullptr);
    EXPECT_CODE(cudaStreamCreateWithFlags(&s3, 8), cudaErrorInvalidValue);
    OK(cudaStreamQuery(s1));
    OK(cudaStreamSynchronize(s2));
    OK(cudaStreamSynchronize(0));
    OK(cudaStreamSynchronize(cudaStreamPerThread));
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
    OK(cudaStreamIsCapturing(s1, &status));
    EXPECT(status == cudaStreamCaptureStatusNone);
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    OK(cudaThreadExchangeStreamCaptureMode(&mode));
    EXPECT(mode == cudaStreamCaptureModeGlobal);
    OK(cudaThreadExchangeStreamCaptureMode(&mode));
    EXPECT(mode == cudaStreamCaptureModeRelaxed);

    int *d = nullptr;
    int h[4] = {1, 2, 3, 4}, back[4] = {0};
    OK(cudaMalloc((void**)&d, sizeof h));
    OK(cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, s1));
    OK(cudaMemsetAsync(d, 0, sizeof(int), s2));
    OK(cudaMemcpyAsync(back, d, sizeof h, cudaMemcpyDeviceToHost, s1));
    EXPECT(back[0] == 0 && back[3] == 4);

    cudaEvent_t start, stop, untimed;
    OK(cudaEventCreate(&start));
    OK(cudaEventCreate(&stop));
    OK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
    EXPECT_CODE(cudaEventCreateWithFlags(&untimed, cudaEventInterprocess), cudaErrorInvalidValue);
    float ms = -1;
    EXPECT_CODE(cudaEventElapsedTime(&ms, start, stop), cudaErrorInvalidResourceHandle);
    OK(cudaEventQuery(start));
    OK(cudaEventRecord(start, s1));
    usleep(30000);
    OK(cudaEventRecord(stop, 0));
    OK(cudaEventSynchronize(stop));
    OK(cudaEventQuery(stop));
    OK(cudaEventElapsedTime(&ms, start, stop));
    EXPECT(ms >= 25.0f && ms < 5000.0f);
    OK(cudaEventRecord(untimed, s2));
    EXPECT_CODE(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
    OK(cudaStreamWaitEvent(s3, stop, 0));

    OK(cudaStreamDestroy(s1));
    EXPECT_CODE(cudaStreamDestroy(s1), cudaErrorInvalidResourceHandle);
    EXPECT_CODE(cudaMemcpyAsync(back, d, sizeof h, cudaMemcpyDeviceToHost, s1), cudaErrorInvalidResourceHandle);
    EXPECT_CODE(cudaEventRecord(start, s1), cudaErrorInvalidResourceHandle);
    OK(cudaEventDestroy(start));
    EXPECT_CODE(cudaEventDestroy(start), cudaErrorInvalidResourceHandle);
    EXPECT_CODE(cudaEventQuery(start), cudaErrorInvalidResourceHandle);
    OK(cudaEventDestroy(stop));
    OK(cudaEventDestroy(untimed));
    OK(cudaStreamDestroy(s2));
    OK(cudaStreamDestroy(s3));
    OK(cudaFree(d));
}

static int marker;

static void launches_and_textures() {
    // The call configuration stack of <<<...>>>.
    dim3 grid, block;
    size_t shared = 1;
    cudaStream_t stream = (cudaStream_t)1;
    EXPECT_CODE(__cudaPopCallConfiguration(&grid, &block, &shared, &stream), cudaErrorMissingConfiguration);
    EXPECT(__cudaPushCallConfiguration(dim3(4, 5, 6), dim3(32, 2), 128, 0) == 0);
    OK(__cudaPopCallConfiguration(&grid, &block, &shared, &stream));
    EXPECT(grid.x == 4 && grid.y == 5 && grid.z == 6 && block.x == 32 && block.y == 2 && block.z == 1);
    EXPECT(shared == 128 && stream == nullptr);

    // Launches: configuration errors first, then the function.
    EXPECT_CODE(cudaLaunchKernel(&marker, dim3(1), dim3(2000), nullptr, 0, 0), cudaErrorInvalidConfiguration);
    EXPECT_CODE(cudaLaunchKernel(&marker, dim3(0), dim3(1), nullptr, 0, 0), cudaErrorInvalidConfiguration);
    EXPECT_CODE(cudaLaunchKernel(&marker, dim3(1), dim3(1), nullptr, 0, 0), cudaErrorInvalidDeviceFunction);
    cudaFuncAttributes fa;
    EXPECT_CODE(cudaFuncGetAttributes(&fa, &marker), cudaErrorInvalidDeviceFunction);

    // Linear textures.
    cudaChannelFormatDesc desc = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
    EXPECT(desc.x == 32 && desc.y == 0 && desc.w == 0 && desc.f == cudaChannelFormatKindFloat);
    float *d = nullptr;
    OK(cudaMalloc((void**)&d, 256 * sizeof(float)));
    cudaResourceDesc res;
    std::memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeLinear;
    res.res.linear.devPtr = d;
    res.res.linear.desc = desc;
    res.res.linear.sizeInBytes = 256 * sizeof(float);
    cudaTextureDesc td;
    std::memset(&td, 0, sizeof td);
    td.readMode = cudaReadModeElementType;
    cudaTextureObject_t tex = 0;
    OK(cudaCreateTextureObject(&tex, &res, &td, nullptr));
    EXPECT(tex != 0);
    res.res.linear.sizeInBytes = 257 * sizeof(float);
    cudaTextureObject_t bad = 0;
    EXPECT_CODE(cudaCreateTextureObject(&bad, &res, &td, nullptr), cudaErrorInvalidValue);
    res.res.linear.sizeInBytes = 16;
    res.res.linear.desc.y = 16;
    EXPECT_CODE(cudaCreateTextureObject(&bad, &res, &td, nullptr), cudaErrorInvalidChannelDescriptor);
    // An array that does not exist; mipmapped arrays are not supported.
    res.resType = cudaResourceTypeArray;
    EXPECT_CODE(cudaCreateTextureObject(&bad, &res, &td, nullptr), cudaErrorInvalidValue);
    res.resType = cudaResourceTypeMipmappedArray;
    EXPECT_CODE(cudaCreateTextureObject(&bad, &res, &td, nullptr), cudaErrorNotSupported);
    // Arrays: copies stay inside, handles are checked, the channel format comes back.
    cudaArray_t array = nullptr;
    cudaChannelFormatDesc f2 = cudaCreateChannelDesc(32, 32, 0, 0, cudaChannelFormatKindFloat);
    OK(cudaMallocArray(&array, &f2, 10, 4));
    cudaChannelFormatDesc back;
    OK(cudaGetChannelDesc(&back, array));
    EXPECT(back.x == 32 && back.y == 32 && back.z == 0 && back.f == cudaChannelFormatKindFloat);
    cudaExtent extent;
    unsigned flags = 7;
    OK(cudaArrayGetInfo(nullptr, &extent, &flags, array));
    EXPECT(extent.width == 10 && extent.height == 4 && extent.depth == 0 && flags == 0);
    std::vector<float> texels(80, 1.5f);
    OK(cudaMemcpyToArray(array, 0, 0, texels.data(), 320, cudaMemcpyHostToDevice));
    EXPECT_CODE(cudaMemcpyToArray(array, 8, 0, texels.data(), 320, cudaMemcpyHostToDevice),
                cudaErrorInvalidValue);
    EXPECT_CODE(cudaMemcpy2DToArray(array, 0, 1, texels.data(), 80, 80, 4, cudaMemcpyHostToDevice),
                cudaErrorInvalidValue);
    EXPECT_CODE(cudaMemcpy2DToArray(array, 0, 0, texels.data(), 40, 80, 2, cudaMemcpyHostToDevice),
                cudaErrorInvalidPitchValue);
    EXPECT_CODE(cudaFree(array), cudaErrorInvalidValue);
    OK(cudaFreeArray(array));
    EXPECT_CODE(cudaFreeArray(array), cudaErrorInvalidValue);
    OK(cudaFreeArray(nullptr));
    cudaPitchedPtr pitched;
    cudaExtent box = {20, 3, 2};
    OK(cudaMalloc3D(&pitched, box));
    EXPECT(pitched.pitch == 512 && pitched.xsize == 20 && pitched.ysize == 3);
    OK(cudaMemset3D(pitched, 7, box));
    OK(cudaFree(pitched.ptr));
    size_t limit = 0;
    OK(cudaThreadSetLimit(cudaLimitStackSize, 4096));
    OK(cudaThreadGetLimit(&limit, cudaLimitStackSize));
    EXPECT(limit == 4096);
    OK(cudaDestroyTextureObject(tex));
    EXPECT_CODE(cudaDestroyTextureObject(tex), cudaErrorInvalidValue);
    textureReference unregistered;
    std::memset(&unregistered, 0, sizeof unregistered);
    EXPECT_CODE(cudaBindTexture(nullptr, &unregistered, d, &desc, 64), cudaErrorInvalidTexture);
    EXPECT_CODE(cudaUnbindTexture(&unregistered), cudaErrorInvalidTexture);
    OK(cudaFree(d));
}

static void reset() {
    int *d = nullptr;
    OK(cudaMalloc((void**)&d, 16));
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    OK(cudaDeviceReset());
    EXPECT_CODE(cudaFree(d), cudaErrorInvalidValue);
    EXPECT_CODE(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
}

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "props") == 0) {
        cudaDeviceProp prop;
        cudaError_t e = cudaGetDeviceProperties(&prop, 0);
        std::printf("unreachable %d\n", (int)e);
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "sms") == 0) {
        int value = -1;
        OK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, 0));
        std::printf("multiprocessors %d\n", value);
        return 0;
    }
    device_queries();
    memory();
    streams_and_events();
    launches_and_textures();
    reset();
    std::printf("failures %d\n", failures);
    return failures != 0;
}
"#;

#[test]
fn api_calls_behave_like_cudart() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "api", &format!("{PRELUDE}{API_PROGRAM}"), true);
    // The multiprocessors are CUDA_FLUX_CPU_SMS's, not the host threads'.
    let output = run(
        &exe,
        &[],
        &[("CUDA_FLUX_CPU_THREADS", "3"), ("CUDA_FLUX_CPU_SMS", "5")],
    );
    let stdout = expect_success(&output);
    assert!(stdout.contains("failures 0"), "{stdout}");
    // The one note: the mipmapped-array texture the program asked for.
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "cuda-flux cpu: cudaCreateTextureObject: mipmapped-array textures are not supported on \
         the CPU target\n"
    );

    // Without CUDA_FLUX_CPU_SMS: 16, with any number of host threads.
    for threads in ["1", "7"] {
        let output = run(&exe, &["sms"], &[("CUDA_FLUX_CPU_THREADS", threads)]);
        assert_eq!(expect_success(&output), "multiprocessors 16\n");
    }

    // A bad CUDA_FLUX_CPU_SMS or CUDA_FLUX_CPU_THREADS stops the program with one line,
    // status 1.
    for bad in ["0", "1025"] {
        let output = run(&exe, &["sms"], &[("CUDA_FLUX_CPU_SMS", bad)]);
        assert_eq!(output.status.code(), Some(1));
        assert!(output.stdout.is_empty());
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            format!(
                "cuda-flux cpu: CUDA_FLUX_CPU_SMS must be an integer from 1 to 1024, not `{bad}`\n"
            )
        );
    }
    for bad in ["0", "lots"] {
        let output = run(&exe, &["props"], &[("CUDA_FLUX_CPU_THREADS", bad)]);
        assert_eq!(output.status.code(), Some(1));
        assert!(output.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            stderr,
            format!(
                "cuda-flux cpu: CUDA_FLUX_CPU_THREADS must be an integer from 1 to 1024, not `{bad}`\n"
            )
        );
    }
}

#[test]
fn a_gpu_build_is_refused_with_one_line() {
    // What clang embeds for the GPU target: the wrapper around a fat binary (its header
    // starts with 0xBA55ED50).
    let source = format!(
        "{PRELUDE}{}",
        r#"
extern "C" void** __cudaRegisterFatBinary(void*);
static const unsigned char fatbin[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0};
struct Wrapper { int magic; int version; const void* data; void* unused; };
static Wrapper wrapper = {0x466243b1, 1, fatbin, nullptr};
int main() {
    __cudaRegisterFatBinary(&wrapper);
    std::printf("registered\n");
    return 0;
}
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "gpu_build", &source, true);
    let output = run(&exe, &[], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("cuda-flux cpu: this program was built for the GPU target"),
        "{stderr}"
    );
}
