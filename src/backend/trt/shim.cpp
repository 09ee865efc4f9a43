// jetson-detectd TensorRT shim: a small extern "C" surface over nvinfer1 / nvonnxparser.
//
// Owns: loading libnvinfer / libnvonnxparser at run time (dlopen + dlsym of the C-linkage
// factories only, so the binary never links TensorRT and starts without it), the TensorRT logger
// (forwarded to Rust, last errors kept for error strings), engine build with timing cache and
// progress monitor, deserialisation, execution contexts with user-managed device memory, enqueue.
// Must not: let a C++ exception or an STL type cross the boundary, allocate device memory, or keep
// state that Rust does not own through a handle (the loaded libraries are the one exception: they
// stay loaded for the life of the process).
//
// Every fallible function returns 0 on success, or non-zero after writing a NUL-terminated message
// into `err` (at most `err_len` bytes) that ends with TensorRT's most recent log errors.
//
// Compiles against TensorRT 8.5 (JetPack 5.1), 8.6 (JetPack 6.0), 10.x (JetPack 6.1+) and 11.x
// headers; the differences are guarded by NV_TENSORRT_MAJOR / NV_TENSORRT_MINOR (JD_TRT_AT_LEAST).
//
// C++ runtime: the JetPack 5 package links this shim with zig's libc++ (static, unexported) while
// libnvinfer uses the system's libstdc++. That is sound because of what crosses between the two:
// only TensorRT's own interface classes (Itanium C++ ABI vtables, the same for both runtimes),
// plain C types and pointers. No standard-library type crosses (names are char const*, shapes are
// Dims). Every TensorRT object is created by a factory inside libnvinfer and destroyed through its
// virtual destructor, whose vtable libnvinfer set, so its operator delete pairs with the library's
// operator new; objects this file creates (Logger, ProgressMonitor, jd_* handles) are created
// here and destroyed here, if at all (the process-wide logger never is). TensorRT's API is noexcept
// and every extern "C" function here catches everything, so no exception unwinds from one runtime
// into the other. TensorRT does not dynamic_cast the logger or progress monitor this file derives;
// std::mutex is used only inside this file. The binary exports no C++ runtime symbol (checked by
// .ci/package), so neither runtime interposes the other's operator new, __cxa_* or typeinfo.

#include <NvInfer.h>
#include <NvInferVersion.h>
#include <NvOnnxParser.h>
#include <dlfcn.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <type_traits>

#define JD_STR2(x) #x
#define JD_STR(x) JD_STR2(x)

// True when the headers are TensorRT major.minor or newer.
#define JD_TRT_AT_LEAST(major, minor)                                                                                  \
    (NV_TENSORRT_MAJOR > (major) || (NV_TENSORRT_MAJOR == (major) && NV_TENSORRT_MINOR >= (minor)))

// TensorRT 10 deprecates the precision builder flags (11 removes them); 10.x builds still need
// them, so their deprecation warnings are silenced exactly where they are used.
#define JD_ALLOW_DEPRECATED_BEGIN \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")
#define JD_ALLOW_DEPRECATED_END _Pragma("GCC diagnostic pop")

extern "C" {

typedef void (*jd_log_fn)(void* user, int32_t severity, char const* message);

// Build progress events (TensorRT 10+): a phase starts with `steps` steps, a step completes
// (`steps` holds the step index; return 0 to cancel the build), a phase finishes.
enum { JD_PHASE_START = 0, JD_STEP_COMPLETE = 1, JD_PHASE_FINISH = 2 };
typedef int32_t (*jd_progress_fn)(void* user, int32_t event, char const* phase, char const* parent, int32_t steps);

enum { JD_PRECISION_FP32 = 0, JD_PRECISION_FP16 = 1, JD_PRECISION_INT8 = 2 };
enum { JD_MAX_DIMS = 8 };

typedef struct jd_build_options
{
    int32_t precision;
    int32_t dla_core; // < 0: GPU only
    int32_t optimization_level;
    int32_t profile_nb_dims; // 0: no shape profile
    // Identical profiles to add when the input is dynamic: one per execution context that may run
    // at the same time (each selects its own with jd_context_set_profile).
    int32_t profile_count;
    int32_t reserved;
    uint64_t workspace_bytes;
    char const* profile_input; // NULL or "": the first network input
    int64_t profile_min[JD_MAX_DIMS];
    int64_t profile_opt[JD_MAX_DIMS];
    int64_t profile_max[JD_MAX_DIMS];
} jd_build_options;

typedef struct jd_blob
{
    void const* data;
    uint64_t size;
    void* owner;
} jd_blob;

// What jd_build produces besides its status.
typedef struct jd_build_result
{
    jd_blob engine;
    jd_blob timing_cache; // empty when TensorRT returned none
    // Non-zero when TensorRT refused the saved timing cache (another device or TensorRT version, or
    // damaged) and the build started from an empty one; `timing_cache_error` says why.
    int32_t timing_cache_rejected;
    // Optimisation profiles added: profile_count when the input is dynamic, else 0.
    int32_t profiles;
    char timing_cache_error[512];
} jd_build_result;

typedef struct jd_tensor_info
{
    char const* name; // valid while the engine lives
    int32_t mode;     // 1 input, 2 output (nvinfer1::TensorIOMode)
    int32_t dtype;    // nvinfer1::DataType value
    int32_t nb_dims;
    int32_t format; // nvinfer1::TensorFormat value; the first non-linear one over all profiles
    int64_t dims[JD_MAX_DIMS];
} jd_tensor_info;

typedef struct jd_trt jd_trt;
typedef struct jd_engine jd_engine;
typedef struct jd_context jd_context;

} // extern "C"

namespace
{

using CreateFn = void* (*) (void* logger, int32_t version);
using CreateParserFn = void* (*) (void* network, void* logger, int version);
using VersionFn = int32_t (*)();
using InitPluginsFn = bool (*)(void* logger, char const* lib_namespace);

// Process-wide: TensorRT keeps global state (plugin registry, loggers) that does not survive
// being unloaded while CUDA contexts exist, so the libraries are never dlclose'd.
struct Libraries
{
    std::mutex mutex;
    void* nvinfer = nullptr;
    void* onnxparser = nullptr;
    CreateFn create_builder = nullptr;
    CreateFn create_runtime = nullptr;
    CreateParserFn create_parser = nullptr;
    VersionFn version = nullptr;
    // libnvinfer_plugin: tried once per process; `plugins_error` says why it failed, if it did.
    bool plugins_tried = false;
    bool plugins_loaded = false;
    char plugins_error[512] = {};
};

Libraries& libraries()
{
    static Libraries libs;
    return libs;
}

constexpr char const* kNvinferName = "libnvinfer.so." JD_STR(NV_TENSORRT_MAJOR);
constexpr char const* kParserName = "libnvonnxparser.so." JD_STR(NV_TENSORRT_MAJOR);
constexpr char const* kPluginName = "libnvinfer_plugin.so." JD_STR(NV_TENSORRT_MAJOR);

void write_error(char* err, size_t err_len, char const* format, ...) __attribute__((format(printf, 3, 4)));

void write_error(char* err, size_t err_len, char const* format, ...)
{
    if (err == nullptr || err_len == 0)
    {
        return;
    }
    va_list args;
    va_start(args, format);
    std::vsnprintf(err, err_len, format, args);
    va_end(args);
}

// Forwards every message to Rust and keeps the last few errors and warnings for error strings.
class Logger final : public nvinfer1::ILogger
{
public:
    Logger(jd_log_fn fn, void* user)
        : mFn(fn)
        , mUser(user)
    {
    }

    void log(Severity severity, nvinfer1::AsciiChar const* msg) noexcept override
    {
        if (msg == nullptr)
        {
            return;
        }
        if (severity <= Severity::kWARNING)
        {
            std::lock_guard<std::mutex> lock(mMutex);
            size_t const slot = mNext % kKept;
            std::snprintf(mRecent[slot], sizeof(mRecent[slot]), "%s", msg);
            ++mNext;
        }
        if (mFn != nullptr)
        {
            mFn(mUser, static_cast<int32_t>(severity), msg);
        }
    }

    // `what`, then the messages logged since `mark` (oldest first).
    void fail(char* err, size_t err_len, size_t mark, char const* what) noexcept
    {
        std::lock_guard<std::mutex> lock(mMutex);
        size_t first = mark;
        if (mNext - first > kKept)
        {
            first = mNext - kKept;
        }
        size_t used = 0;
        write_error(err, err_len, "%s", what);
        for (size_t i = first; i < mNext && err != nullptr; ++i)
        {
            used = std::strlen(err);
            if (used + 3 >= err_len)
            {
                break;
            }
            write_error(err + used, err_len - used, "%s%s", i == first ? ": " : " | ", mRecent[i % kKept]);
        }
    }

    size_t mark() noexcept
    {
        std::lock_guard<std::mutex> lock(mMutex);
        return mNext;
    }

private:
    static constexpr size_t kKept = 8;
    jd_log_fn mFn;
    void* mUser;
    std::mutex mMutex;
    char mRecent[kKept][512] = {};
    size_t mNext = 0;
};

// The one logger of the process, created on first use and never freed. TensorRT 8.5/8.6's ONNX
// parser hands the logger it is given to initLibNvInferPlugins, which keeps it as the plugin
// library's global logger for the rest of the process, and TensorRT expects one logger per process
// anyway. A logger owned by a runtime handle would be freed by jd_trt_close (selftest builds in one
// runtime, closes it and opens another), and the plugin library's next log line would use freed
// memory. Every caller passes the same callback (Rust's forward_log, no user data), so the first
// caller's is kept. Error strings take the messages logged since their mark from the shared ring.
Logger& process_logger(jd_log_fn fn, void* user)
{
    static Logger* const logger = new Logger(fn, user);
    return *logger;
}

template <typename T>
struct Owned
{
    T* ptr = nullptr;
    explicit Owned(T* p)
        : ptr(p)
    {
    }
    Owned(Owned const&) = delete;
    Owned& operator=(Owned const&) = delete;
    ~Owned()
    {
        delete ptr;
    }
    T* operator->() const
    {
        return ptr;
    }
};

#if NV_TENSORRT_MAJOR >= 10
class ProgressMonitor final : public nvinfer1::IProgressMonitor
{
public:
    ProgressMonitor(jd_progress_fn fn, void* user)
        : mFn(fn)
        , mUser(user)
    {
    }
    void phaseStart(char const* phaseName, char const* parentPhase, int32_t nbSteps) noexcept override
    {
        mFn(mUser, JD_PHASE_START, phaseName, parentPhase, nbSteps);
    }
    bool stepComplete(char const* phaseName, int32_t step) noexcept override
    {
        return mFn(mUser, JD_STEP_COMPLETE, phaseName, nullptr, step) != 0;
    }
    void phaseFinish(char const* phaseName) noexcept override
    {
        mFn(mUser, JD_PHASE_FINISH, phaseName, nullptr, 0);
    }

private:
    jd_progress_fn mFn;
    void* mUser;
};
#endif

template <typename DimsT>
void copy_dims(DimsT const& dims, int32_t* nb_dims, int64_t* out)
{
    int32_t const n = dims.nbDims < 0 ? 0 : (dims.nbDims > JD_MAX_DIMS ? JD_MAX_DIMS : dims.nbDims);
    *nb_dims = dims.nbDims;
    for (int32_t i = 0; i < n; ++i)
    {
        out[i] = dims.d[i];
    }
}

nvinfer1::Dims make_dims(int32_t nb_dims, int64_t const* values)
{
    nvinfer1::Dims dims{};
    dims.nbDims = nb_dims;
    for (int32_t i = 0; i < nb_dims && i < JD_MAX_DIMS; ++i)
    {
        dims.d[i] = static_cast<std::remove_reference<decltype(dims.d[0])>::type>(values[i]);
    }
    return dims;
}

// The tensor's memory format: kLINEAR unless a profile gives it another (vectorised, channel-last or
// DLA) one, which the caller must refuse (its buffers would be the wrong size or layout).
int32_t tensor_format(nvinfer1::ICudaEngine const* engine, char const* name)
{
#if JD_TRT_AT_LEAST(8, 6)
    for (int32_t profile = 0; profile < engine->getNbOptimizationProfiles(); ++profile)
    {
        nvinfer1::TensorFormat const format = engine->getTensorFormat(name, profile);
        if (format != nvinfer1::TensorFormat::kLINEAR)
        {
            return static_cast<int32_t>(format);
        }
    }
    return static_cast<int32_t>(nvinfer1::TensorFormat::kLINEAR);
#else
    return static_cast<int32_t>(engine->getTensorFormat(name));
#endif
}

bool load_parser(Libraries& libs, char* err, size_t err_len)
{
    std::lock_guard<std::mutex> lock(libs.mutex);
    if (libs.create_parser != nullptr)
    {
        return true;
    }
    if (libs.onnxparser == nullptr)
    {
        libs.onnxparser = dlopen(kParserName, RTLD_NOW | RTLD_LOCAL);
        if (libs.onnxparser == nullptr)
        {
            char const* why = dlerror();
            write_error(err, err_len, "cannot load the TensorRT ONNX parser: %s", why ? why : kParserName);
            return false;
        }
    }
    libs.create_parser = reinterpret_cast<CreateParserFn>(dlsym(libs.onnxparser, "createNvOnnxParser_INTERNAL"));
    if (libs.create_parser == nullptr)
    {
        write_error(err, err_len, "%s has no createNvOnnxParser_INTERNAL", kParserName);
        return false;
    }
    return true;
}

} // namespace

struct jd_trt
{
    // process_logger(): outlives every handle.
    Logger& logger;
    nvinfer1::IRuntime* runtime = nullptr;
    explicit jd_trt(Logger& shared)
        : logger(shared)
    {
    }
};

struct jd_engine
{
    jd_trt* trt;
    // A DLA engine's own runtime (destroyed after the engine); null for GPU engines, which use the
    // shared trt->runtime.
    nvinfer1::IRuntime* dla_runtime;
    nvinfer1::ICudaEngine* engine;
};

struct jd_context
{
    jd_trt* trt;
    nvinfer1::IExecutionContext* context;
};

extern "C" {

// sizeof of the structs shared with Rust (jd_build_options, jd_blob, jd_build_result,
// jd_tensor_info), so that a test catches a layout that drifted from src/backend/trt/ffi.rs.
void jd_struct_sizes(uint64_t* out)
{
    out[0] = sizeof(jd_build_options);
    out[1] = sizeof(jd_blob);
    out[2] = sizeof(jd_build_result);
    out[3] = sizeof(jd_tensor_info);
}

// Header version this shim was compiled against: major, minor, patch.
void jd_header_version(int32_t* out)
{
    out[0] = NV_TENSORRT_MAJOR;
    out[1] = NV_TENSORRT_MINOR;
    out[2] = NV_TENSORRT_PATCH;
}

// The libnvinfer file name this shim loads.
char const* jd_library_name()
{
    return kNvinferName;
}

// Loads libnvinfer (once per process) and resolves its factories. `version` receives
// getInferLibVersion() of the loaded library, encoded as TensorRT encodes it (8.x: major*1000 +
// minor*100 + patch; 10+: major*10000 + minor*100 + patch). The caller compares it with the
// headers' version before creating anything: the soname only pins the major, and calling a
// virtual method an older library lacks is a crash, not an error.
int32_t jd_load_library(int32_t* version, char* err, size_t err_len)
{
    *version = 0;
    Libraries& libs = libraries();
    std::lock_guard<std::mutex> lock(libs.mutex);
    if (libs.nvinfer == nullptr)
    {
        libs.nvinfer = dlopen(kNvinferName, RTLD_NOW | RTLD_LOCAL);
        if (libs.nvinfer == nullptr)
        {
            char const* why = dlerror();
            write_error(err, err_len, "%s", why ? why : kNvinferName);
            return 1;
        }
        libs.create_builder = reinterpret_cast<CreateFn>(dlsym(libs.nvinfer, "createInferBuilder_INTERNAL"));
        libs.create_runtime = reinterpret_cast<CreateFn>(dlsym(libs.nvinfer, "createInferRuntime_INTERNAL"));
        libs.version = reinterpret_cast<VersionFn>(dlsym(libs.nvinfer, "getInferLibVersion"));
    }
    if (libs.create_builder == nullptr || libs.create_runtime == nullptr || libs.version == nullptr)
    {
        write_error(err, err_len, "%s lacks the TensorRT factory functions", kNvinferName);
        return 1;
    }
    *version = libs.version();
    return 0;
}

// The libnvinfer_plugin file name this shim loads.
char const* jd_plugin_library_name()
{
    return kPluginName;
}

// Loads libnvinfer_plugin and registers TensorRT's plugins (EfficientNMS and friends) with
// initLibNvInferPlugins, once per process; later calls return the first outcome. Must run before
// any parse or deserialisation: from TensorRT 10 the ONNX parser only looks plugins up, and an
// engine that uses one cannot be deserialised without them. Returns 0 when registered, else
// writes why (the caller warns: models without plugins work without the library).
int32_t jd_load_plugins(jd_log_fn log, void* log_user, char* err, size_t err_len)
{
    try
    {
        Libraries& libs = libraries();
        std::lock_guard<std::mutex> lock(libs.mutex);
        if (!libs.plugins_tried)
        {
            libs.plugins_tried = true;
            void* library = dlopen(kPluginName, RTLD_NOW | RTLD_LOCAL);
            InitPluginsFn init = nullptr;
            if (library == nullptr)
            {
                char const* why = dlerror();
                write_error(libs.plugins_error, sizeof(libs.plugins_error), "%s", why ? why : kPluginName);
            }
            else if ((init = reinterpret_cast<InitPluginsFn>(dlsym(library, "initLibNvInferPlugins"))) == nullptr)
            {
                write_error(libs.plugins_error, sizeof(libs.plugins_error), "%s has no initLibNvInferPlugins",
                    kPluginName);
            }
            else
            {
                // The plugin library keeps this logger for as long as the process lives: the
                // process-wide one, never freed (like the libraries themselves).
                Logger& plugin_logger = process_logger(log, log_user);
                size_t const mark = plugin_logger.mark();
                libs.plugins_loaded = init(static_cast<nvinfer1::ILogger*>(&plugin_logger), "");
                if (!libs.plugins_loaded)
                {
                    plugin_logger.fail(libs.plugins_error, sizeof(libs.plugins_error), mark,
                        "initLibNvInferPlugins failed");
                }
            }
        }
        if (!libs.plugins_loaded)
        {
            write_error(err, err_len, "%s", libs.plugins_error);
            return 1;
        }
        return 0;
    }
    catch (...)
    {
        write_error(err, err_len, "out of memory while loading %s", kPluginName);
        return 1;
    }
}

// Creates a runtime on the library jd_load_library loaded (and the caller checked). `log`
// receives every TensorRT message (any thread).
int32_t jd_trt_open(jd_log_fn log, void* log_user, jd_trt** out, char* err, size_t err_len)
{
    *out = nullptr;
    try
    {
        Libraries& libs = libraries();
        CreateFn create_runtime = nullptr;
        {
            std::lock_guard<std::mutex> lock(libs.mutex);
            create_runtime = libs.create_runtime;
        }
        if (create_runtime == nullptr)
        {
            write_error(err, err_len, "%s is not loaded (jd_load_library first)", kNvinferName);
            return 1;
        }
        jd_trt* trt = new jd_trt(process_logger(log, log_user));
        size_t const mark = trt->logger.mark();
        trt->runtime = static_cast<nvinfer1::IRuntime*>(create_runtime(&trt->logger, NV_TENSORRT_VERSION));
        if (trt->runtime == nullptr)
        {
            trt->logger.fail(err, err_len, mark, "createInferRuntime failed");
            delete trt;
            return 1;
        }
        *out = trt;
        return 0;
    }
    catch (...)
    {
        write_error(err, err_len, "out of memory while loading TensorRT");
        return 1;
    }
}

void jd_trt_close(jd_trt* trt)
{
    if (trt != nullptr)
    {
        delete trt->runtime;
        delete trt;
    }
}

void jd_blob_free(jd_blob* blob)
{
    if (blob != nullptr)
    {
        delete static_cast<nvinfer1::IHostMemory*>(blob->owner);
        blob->owner = nullptr;
        blob->data = nullptr;
        blob->size = 0;
    }
}

// Parses the ONNX model and builds a serialized engine. `timing_in` (may be empty) seeds the
// timing cache; a cache TensorRT refuses is replaced by an empty one, never fatal. `result`
// receives the engine and the updated timing cache (the caller frees both blobs, also on
// failure). `progress` may be NULL and is only called on TensorRT 10+, from builder threads.
int32_t jd_build(jd_trt* trt, jd_build_options const* options, void const* onnx, size_t onnx_len,
    char const* onnx_path, void const* timing_in, size_t timing_in_len, jd_progress_fn progress,
    void* progress_user, jd_build_result* result, char* err, size_t err_len)
{
    *result = jd_build_result{};
    try
    {
        Libraries& libs = libraries();
        if (!load_parser(libs, err, err_len))
        {
            return 1;
        }
#if NV_TENSORRT_MAJOR >= 11
        if (options->precision != JD_PRECISION_FP32)
        {
            write_error(err, err_len,
                "TensorRT %d builds strongly typed networks: precision comes from the ONNX model (export it in "
                "FP16, or with Q/DQ nodes for INT8); set engine.precision = \"fp32\"",
                NV_TENSORRT_MAJOR);
            return 1;
        }
#endif
        Logger& logger = trt->logger;
        size_t const mark = logger.mark();
        // Declared before the builder so that they are destroyed after it and its config (locals
        // die in reverse order): TensorRT 11 requires the timing cache and the progress monitor
        // to outlive the builder and config that use them.
        Owned<nvinfer1::ITimingCache> timing(nullptr);
#if NV_TENSORRT_MAJOR >= 10
        ProgressMonitor monitor(progress, progress_user);
#else
        (void) progress;
        (void) progress_user;
#endif
        Owned<nvinfer1::IBuilder> builder(
            static_cast<nvinfer1::IBuilder*>(libs.create_builder(&logger, NV_TENSORRT_VERSION)));
        if (builder.ptr == nullptr)
        {
            logger.fail(err, err_len, mark, "createInferBuilder failed");
            return 1;
        }
#if NV_TENSORRT_MAJOR >= 10
        uint32_t const network_flags = 0;
#else
        uint32_t const network_flags
            = 1U << static_cast<uint32_t>(nvinfer1::NetworkDefinitionCreationFlag::kEXPLICIT_BATCH);
#endif
        Owned<nvinfer1::INetworkDefinition> network(builder->createNetworkV2(network_flags));
        if (network.ptr == nullptr)
        {
            logger.fail(err, err_len, mark, "createNetworkV2 failed");
            return 1;
        }
        Owned<nvonnxparser::IParser> parser(static_cast<nvonnxparser::IParser*>(
            libs.create_parser(network.ptr, &logger, NV_ONNX_PARSER_VERSION)));
        if (parser.ptr == nullptr)
        {
            logger.fail(err, err_len, mark, "createNvOnnxParser failed");
            return 1;
        }
        if (!parser->parse(onnx, onnx_len, onnx_path))
        {
            char message[1024];
            write_error(message, sizeof(message), "cannot parse the ONNX model (%d errors)", parser->getNbErrors());
            for (int i = 0; i < parser->getNbErrors() && i < 4; ++i)
            {
                size_t const used = std::strlen(message);
                write_error(message + used, sizeof(message) - used, "%s%s", i == 0 ? ": " : " | ",
                    parser->getError(i)->desc());
            }
            logger.fail(err, err_len, mark, message);
            return 1;
        }

        Owned<nvinfer1::IBuilderConfig> config(builder->createBuilderConfig());
        if (config.ptr == nullptr)
        {
            logger.fail(err, err_len, mark, "createBuilderConfig failed");
            return 1;
        }
        config->setMemoryPoolLimit(nvinfer1::MemoryPoolType::kWORKSPACE, options->workspace_bytes);
#if JD_TRT_AT_LEAST(8, 6)
        config->setBuilderOptimizationLevel(options->optimization_level);
#endif
#if NV_TENSORRT_MAJOR < 11
        JD_ALLOW_DEPRECATED_BEGIN
        if (options->precision == JD_PRECISION_FP16)
        {
            config->setFlag(nvinfer1::BuilderFlag::kFP16);
        }
        else if (options->precision == JD_PRECISION_INT8)
        {
            // No calibrator: INT8 needs a model with Q/DQ nodes; FP16 covers the layers without.
            config->setFlag(nvinfer1::BuilderFlag::kINT8);
            config->setFlag(nvinfer1::BuilderFlag::kFP16);
        }
        JD_ALLOW_DEPRECATED_END
#endif
        if (options->dla_core >= 0)
        {
            if (options->dla_core >= builder->getNbDLACores())
            {
                write_error(err, err_len, "DLA core %d requested, this device has %d", options->dla_core,
                    builder->getNbDLACores());
                return 1;
            }
            config->setDefaultDeviceType(nvinfer1::DeviceType::kDLA);
            config->setDLACore(options->dla_core);
            config->setFlag(nvinfer1::BuilderFlag::kGPU_FALLBACK);
        }

        if (options->profile_nb_dims > 0 && network->getNbInputs() > 0)
        {
            nvinfer1::ITensor* input = network->getInput(0);
            bool const by_name = options->profile_input != nullptr && options->profile_input[0] != '\0';
            for (int32_t i = 0; by_name && i < network->getNbInputs(); ++i)
            {
                if (std::strcmp(network->getInput(i)->getName(), options->profile_input) == 0)
                {
                    input = network->getInput(i);
                }
            }
            if (by_name && std::strcmp(input->getName(), options->profile_input) != 0)
            {
                write_error(err, err_len, "the model has no input named \"%s\"", options->profile_input);
                return 1;
            }
            nvinfer1::Dims const declared = input->getDimensions();
            bool dynamic = false;
            // A profile may range only over the dimensions the model leaves open: where the model
            // fixes one (a batch of 1, say), that value holds for min, opt and max alike.
            int64_t min[JD_MAX_DIMS];
            int64_t opt[JD_MAX_DIMS];
            int64_t max[JD_MAX_DIMS];
            for (int32_t d = 0; d < options->profile_nb_dims && d < JD_MAX_DIMS; ++d)
            {
                bool const open = d >= declared.nbDims || declared.d[d] < 0;
                min[d] = open ? options->profile_min[d] : declared.d[d];
                opt[d] = open ? options->profile_opt[d] : declared.d[d];
                max[d] = open ? options->profile_max[d] : declared.d[d];
            }
            for (int32_t d = 0; d < declared.nbDims; ++d)
            {
                dynamic = dynamic || declared.d[d] < 0;
            }
            for (int32_t index = 0; dynamic && index < options->profile_count; ++index)
            {
                // Owned by the builder.
                nvinfer1::IOptimizationProfile* profile = builder->createOptimizationProfile();
                bool const ok = profile != nullptr
                    && profile->setDimensions(input->getName(), nvinfer1::OptProfileSelector::kMIN,
                        make_dims(options->profile_nb_dims, min))
                    && profile->setDimensions(input->getName(), nvinfer1::OptProfileSelector::kOPT,
                        make_dims(options->profile_nb_dims, opt))
                    && profile->setDimensions(input->getName(), nvinfer1::OptProfileSelector::kMAX,
                        make_dims(options->profile_nb_dims, max))
                    && config->addOptimizationProfile(profile) >= 0;
                if (!ok)
                {
                    logger.fail(err, err_len, mark, "the input shape profile was rejected");
                    return 1;
                }
                result->profiles = index + 1;
            }
        }

        size_t const timing_mark = logger.mark();
        timing.ptr = config->createTimingCache(timing_in, timing_in_len);
        // ignoreMismatch = false: a cache from another device or TensorRT version is refused
        // rather than silently used.
        bool const timing_set = timing.ptr != nullptr && config->setTimingCache(*timing.ptr, false);
        if (!timing_set && timing_in_len > 0)
        {
            result->timing_cache_rejected = 1;
            logger.fail(result->timing_cache_error, sizeof(result->timing_cache_error), timing_mark,
                timing.ptr == nullptr ? "TensorRT cannot read it" : "TensorRT refused it");
            delete timing.ptr;
            timing.ptr = config->createTimingCache(nullptr, 0);
            if (timing.ptr == nullptr || !config->setTimingCache(*timing.ptr, false))
            {
                logger.fail(err, err_len, mark, "cannot set up an empty timing cache");
                return 1;
            }
        }
        else if (!timing_set)
        {
            logger.fail(err, err_len, mark, "cannot set up the timing cache");
            return 1;
        }

#if NV_TENSORRT_MAJOR >= 10
        if (progress != nullptr)
        {
            config->setProgressMonitor(&monitor);
        }
#endif
        nvinfer1::IHostMemory* engine = builder->buildSerializedNetwork(*network.ptr, *config.ptr);
        if (engine == nullptr || engine->size() == 0)
        {
            delete engine;
            logger.fail(err, err_len, mark, "the engine build failed");
            return 1;
        }
        result->engine = jd_blob{engine->data(), static_cast<uint64_t>(engine->size()), engine};

        nvinfer1::ITimingCache const* used = config->getTimingCache();
        nvinfer1::IHostMemory* serialized = used != nullptr ? used->serialize() : nullptr;
        if (serialized != nullptr)
        {
            result->timing_cache = jd_blob{serialized->data(), static_cast<uint64_t>(serialized->size()), serialized};
        }
        return 0;
    }
    catch (...)
    {
        jd_blob_free(&result->engine);
        jd_blob_free(&result->timing_cache);
        write_error(err, err_len, "out of memory during the engine build");
        return 1;
    }
}

// Deserialises an engine. `dla_core` < 0: GPU engine, on the shared runtime. A DLA engine gets a
// runtime of its own with that core set: IRuntime::setDLACore on the shared runtime would change
// what every later (or concurrent) deserialisation targets, GPU engines included.
int32_t jd_engine_load(
    jd_trt* trt, void const* data, size_t len, int32_t dla_core, jd_engine** out, char* err, size_t err_len)
{
    *out = nullptr;
    try
    {
        size_t const mark = trt->logger.mark();
        Owned<nvinfer1::IRuntime> dla_runtime(nullptr);
        nvinfer1::IRuntime* runtime = trt->runtime;
        if (dla_core >= 0)
        {
            Libraries& libs = libraries();
            CreateFn create_runtime = nullptr;
            {
                std::lock_guard<std::mutex> lock(libs.mutex);
                create_runtime = libs.create_runtime;
            }
            dla_runtime.ptr = create_runtime == nullptr
                ? nullptr
                : static_cast<nvinfer1::IRuntime*>(create_runtime(&trt->logger, NV_TENSORRT_VERSION));
            if (dla_runtime.ptr == nullptr)
            {
                trt->logger.fail(err, err_len, mark, "createInferRuntime failed (for the DLA engine)");
                return 1;
            }
            if (dla_core >= dla_runtime->getNbDLACores())
            {
                write_error(err, err_len, "the engine is for DLA core %d, this device has %d DLA core(s)", dla_core,
                    dla_runtime->getNbDLACores());
                return 1;
            }
            dla_runtime->setDLACore(dla_core);
            runtime = dla_runtime.ptr;
        }
        // Declared after the runtime so that it is destroyed first if anything below fails.
        Owned<nvinfer1::ICudaEngine> engine(runtime->deserializeCudaEngine(data, len));
        if (engine.ptr == nullptr)
        {
            trt->logger.fail(err, err_len, mark, "deserializeCudaEngine failed");
            return 1;
        }
        *out = new jd_engine{trt, dla_runtime.ptr, engine.ptr};
        dla_runtime.ptr = nullptr;
        engine.ptr = nullptr;
        return 0;
    }
    catch (...)
    {
        write_error(err, err_len, "out of memory while loading the engine");
        return 1;
    }
}

void jd_engine_free(jd_engine* engine)
{
    if (engine != nullptr)
    {
        delete engine->engine;
        delete engine->dla_runtime;
        delete engine;
    }
}

int32_t jd_engine_nb_io(jd_engine const* engine)
{
    return engine->engine->getNbIOTensors();
}

// Name, direction, dtype, memory format and declared shape (-1 for dynamic dimensions) of IO
// tensor `index`.
int32_t jd_engine_io(jd_engine const* engine, int32_t index, jd_tensor_info* out)
{
    if (index < 0 || index >= engine->engine->getNbIOTensors())
    {
        return 1;
    }
    char const* name = engine->engine->getIOTensorName(index);
    out->name = name;
    out->mode = static_cast<int32_t>(engine->engine->getTensorIOMode(name));
    out->dtype = static_cast<int32_t>(engine->engine->getTensorDataType(name));
    out->format = tensor_format(engine->engine, name);
    copy_dims(engine->engine->getTensorShape(name), &out->nb_dims, out->dims);
    return 0;
}

// Optimisation profiles in the engine (1 when it was built without any: the implicit one).
int32_t jd_engine_nb_profiles(jd_engine const* engine)
{
    return engine->engine->getNbOptimizationProfiles();
}

// The largest shape optimisation profile `profile` allows for input `name` (how large a batch the
// engine takes). Returns non-zero when the tensor or profile does not exist or has no profile shape.
int32_t jd_engine_profile_max_shape(
    jd_engine const* engine, char const* name, int32_t profile, int32_t* nb_dims, int64_t* dims)
{
    if (profile < 0 || profile >= engine->engine->getNbOptimizationProfiles())
    {
        return 1;
    }
    nvinfer1::Dims const max = engine->engine->getProfileShape(name, profile, nvinfer1::OptProfileSelector::kMAX);
    if (max.nbDims < 0)
    {
        return 1;
    }
    copy_dims(max, nb_dims, dims);
    return 0;
}

// Device memory an execution context of this engine needs (upper bound over its profiles).
int64_t jd_engine_device_memory(jd_engine const* engine)
{
#if JD_TRT_AT_LEAST(10, 1)
    return engine->engine->getDeviceMemorySizeV2();
#else
    return static_cast<int64_t>(engine->engine->getDeviceMemorySize());
#endif
}

// An execution context that owns no device memory: the caller supplies it before enqueueing.
int32_t jd_context_create(jd_engine* engine, jd_context** out, char* err, size_t err_len)
{
    *out = nullptr;
    try
    {
        size_t const mark = engine->trt->logger.mark();
#if NV_TENSORRT_MAJOR >= 10
        nvinfer1::IExecutionContext* context
            = engine->engine->createExecutionContext(nvinfer1::ExecutionContextAllocationStrategy::kUSER_MANAGED);
#else
        nvinfer1::IExecutionContext* context = engine->engine->createExecutionContextWithoutDeviceMemory();
#endif
        if (context == nullptr)
        {
            engine->trt->logger.fail(err, err_len, mark, "cannot create an execution context");
            return 1;
        }
        *out = new jd_context{engine->trt, context};
        return 0;
    }
    catch (...)
    {
        write_error(err, err_len, "out of memory while creating an execution context");
        return 1;
    }
}

void jd_context_free(jd_context* context)
{
    if (context != nullptr)
    {
        delete context->context;
        delete context;
    }
}

// Scratch memory for the context; `size` must be at least jd_engine_device_memory() (the
// caller checks: TensorRT reports a too-small size only through the logger).
void jd_context_set_device_memory(jd_context* context, void* memory, int64_t size)
{
#if JD_TRT_AT_LEAST(10, 1)
    context->context->setDeviceMemoryV2(memory, size);
#else
    (void) size;
    context->context->setDeviceMemory(memory);
#endif
}

// Selects the context's optimisation profile, asynchronously on `stream` (the stream the context
// enqueues on, so the switch is ordered before its first inference). Contexts that run at the same
// time must use different profiles when the input is dynamic. Call before setting input shapes.
int32_t jd_context_set_profile(jd_context* context, int32_t index, void* stream, char* err, size_t err_len)
{
    size_t const mark = context->trt->logger.mark();
    if (!context->context->setOptimizationProfileAsync(index, static_cast<cudaStream_t>(stream)))
    {
        char what[96];
        write_error(what, sizeof(what), "setOptimizationProfileAsync(%d) failed", index);
        context->trt->logger.fail(err, err_len, mark, what);
        return 1;
    }
    return 0;
}

int32_t jd_context_set_input_shape(
    jd_context* context, char const* name, int32_t nb_dims, int64_t const* dims, char* err, size_t err_len)
{
    size_t const mark = context->trt->logger.mark();
    if (nb_dims < 0 || nb_dims > JD_MAX_DIMS || !context->context->setInputShape(name, make_dims(nb_dims, dims)))
    {
        context->trt->logger.fail(err, err_len, mark, "setInputShape failed");
        return 1;
    }
    return 0;
}

// Resolved shape of a tensor once every input shape is known.
int32_t jd_context_tensor_shape(jd_context const* context, char const* name, int32_t* nb_dims, int64_t* dims)
{
    copy_dims(context->context->getTensorShape(name), nb_dims, dims);
    return *nb_dims < 0 ? 1 : 0;
}

int32_t jd_context_set_tensor_address(jd_context* context, char const* name, void* address, char* err, size_t err_len)
{
    size_t const mark = context->trt->logger.mark();
    if (!context->context->setTensorAddress(name, address))
    {
        context->trt->logger.fail(err, err_len, mark, "setTensorAddress failed");
        return 1;
    }
    return 0;
}

// Enqueues inference on `stream` (a CUstream / cudaStream_t).
int32_t jd_context_enqueue(jd_context* context, void* stream, char* err, size_t err_len)
{
    size_t const mark = context->trt->logger.mark();
    if (!context->context->enqueueV3(static_cast<cudaStream_t>(stream)))
    {
        context->trt->logger.fail(err, err_len, mark, "enqueueV3 failed");
        return 1;
    }
    return 0;
}

} // extern "C"
