// xvendor SYCL shim: a C interface over SYCL RTC (sycl_ext_oneapi_kernel_compiler) and
// kernel launch, for ctypes. dpctl wraps queues, devices and USM but cannot compile SYCL
// source; this file fills exactly that gap and nothing else.
//
// Built on first use by xvendor/xpu/shim.py with the system C++ compiler against the
// intel-sycl-rt wheel's headers:
//   g++ -std=c++17 -O2 -shared -fPIC -DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING \
//       -I<prefix>/include shim.cpp -L<prefix>/lib -lsycl -Wl,-rpath,<prefix>/lib
// The queue arguments are dpctl's DPCTLSyclQueueRef (a sycl::queue*, from
// dpctl.SyclQueue.addressof_ref()); the same ABI holds for any sycl::queue* built against
// the same libsycl major.
//
// Errors: functions return NULL / non-zero and leave the message in xv_last_error()
// (thread-local). Build failures also return the compiler log through *log_out.

#include <sycl/sycl.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace syclex = sycl::ext::oneapi::experimental;
using exe_bundle = sycl::kernel_bundle<sycl::bundle_state::executable>;

namespace {
thread_local std::string last_error;

char *dup_string(const std::string &s) {
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

std::vector<std::string> split_lines(const char *text) {
  std::vector<std::string> out;
  if (!text) return out;
  std::string cur;
  for (const char *c = text; *c; ++c) {
    if (*c == '\n') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(*c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// Argument kinds of xv_launch; must match the kinds in xvendor/xpu/runtime.py.
// ARG_LOCAL: a `work_group_memory<char[]>` parameter; the value is its byte count (int64),
// allocated per work-group by the runtime at launch (CUDA's dynamic shared memory).
enum ArgKind : int { ARG_PTR = 0, ARG_I32 = 1, ARG_I64 = 2, ARG_F32 = 3, ARG_LOCAL = 4 };
}  // namespace

extern "C" {

// Bumped when a signature or an argument kind below changes; shim.py refuses a library
// with another value. 2: ARG_LOCAL.
int xv_abi_version() { return 2; }

int xv_sycl_compiler_version() { return __SYCL_COMPILER_VERSION; }

const char *xv_last_error() { return last_error.c_str(); }

void xv_free_string(char *s) { std::free(s); }

int xv_rtc_available(void *queue_ref) {
  try {
    auto &q = *static_cast<sycl::queue *>(queue_ref);
    return q.get_device().ext_oneapi_can_build(syclex::source_language::sycl) ? 1 : 0;
  } catch (const std::exception &e) {
    last_error = e.what();
    return -1;
  }
}

// Compile `source` for the queue's device. `options`: newline-separated build options.
// `inc_names`/`inc_bodies`: n_inc virtual include files. `kernel_names`: newline-separated
// names the caller will look up (registered_names; extern "C" kernels need none).
// Returns an executable kernel bundle handle, or NULL; *log_out (free with
// xv_free_string) receives the compiler log either way.
void *xv_build(void *queue_ref, const char *source, const char *options, int n_inc,
               const char *const *inc_names, const char *const *inc_bodies,
               const char *kernel_names, char **log_out) {
  std::string log;
  if (log_out) *log_out = nullptr;
  try {
    auto &q = *static_cast<sycl::queue *>(queue_ref);
    syclex::include_files includes;
    for (int i = 0; i < n_inc; ++i) includes.add(inc_names[i], inc_bodies[i]);
    auto src = syclex::create_kernel_bundle_from_source(
        q.get_context(), syclex::source_language::sycl, std::string(source),
        syclex::properties{includes});
    auto exe = syclex::build(
        src, std::vector<sycl::device>{q.get_device()},
        syclex::properties{syclex::build_options{split_lines(options)},
                           syclex::save_log{&log},
                           syclex::registered_names{split_lines(kernel_names)}});
    if (log_out) *log_out = dup_string(log);
    return new exe_bundle(std::move(exe));
  } catch (const std::exception &e) {
    last_error = e.what();
    if (log_out) *log_out = dup_string(log.empty() ? last_error : log);
    return nullptr;
  }
}

void xv_bundle_free(void *bundle) { delete static_cast<exe_bundle *>(bundle); }

// A kernel from a built bundle; NULL if the bundle has no kernel of that name.
void *xv_kernel(void *bundle, const char *name) {
  try {
    auto &kb = *static_cast<exe_bundle *>(bundle);
    if (!kb.ext_oneapi_has_kernel(name)) {
      last_error = std::string("no kernel named '") + name + "' in the bundle";
      return nullptr;
    }
    return new sycl::kernel(kb.ext_oneapi_get_kernel(name));
  } catch (const std::exception &e) {
    last_error = e.what();
    return nullptr;
  }
}

void xv_kernel_free(void *kernel) { delete static_cast<sycl::kernel *>(kernel); }

// Largest work-group size the kernel can launch with on the queue's device.
long long xv_kernel_max_wg(void *queue_ref, void *kernel) {
  try {
    auto &q = *static_cast<sycl::queue *>(queue_ref);
    auto &k = *static_cast<sycl::kernel *>(kernel);
    return static_cast<long long>(
        k.get_info<sycl::info::kernel_device_specific::work_group_size>(q.get_device()));
  } catch (const std::exception &e) {
    last_error = e.what();
    return -1;
  }
}

// Launch an nd-range of `ndim` (1..3) dimensions, sizes in SYCL order (last = fastest).
// Arguments: kinds[i] in ArgKind, values[i] points to the value (for ARG_PTR: to the
// pointer; for ARG_LOCAL: to the int64 byte count, which must be positive). wait != 0
// blocks until the kernel finished and reports asynchronous errors.
int xv_launch(void *queue_ref, void *kernel, int ndim, const size_t *global,
              const size_t *local, int n_args, const int *kinds,
              const void *const *values, int wait) {
  try {
    auto &q = *static_cast<sycl::queue *>(queue_ref);
    auto &k = *static_cast<sycl::kernel *>(kernel);
    auto ev = q.submit([&](sycl::handler &h) {
      for (int i = 0; i < n_args; ++i) {
        switch (kinds[i]) {
          case ARG_PTR: h.set_arg(i, *static_cast<void *const *>(values[i])); break;
          case ARG_I32: h.set_arg(i, *static_cast<const int32_t *>(values[i])); break;
          case ARG_I64: h.set_arg(i, *static_cast<const int64_t *>(values[i])); break;
          case ARG_F32: h.set_arg(i, *static_cast<const float *>(values[i])); break;
          case ARG_LOCAL: {
            const int64_t bytes = *static_cast<const int64_t *>(values[i]);
            if (bytes < 1) throw std::runtime_error("xv_launch: local memory of < 1 byte");
            syclex::work_group_memory<char[]> mem(static_cast<size_t>(bytes), h);
            h.set_arg(i, mem);
            break;
          }
          default: throw std::runtime_error("xv_launch: unknown argument kind");
        }
      }
      if (ndim == 1) {
        h.parallel_for(sycl::nd_range<1>({global[0]}, {local[0]}), k);
      } else if (ndim == 2) {
        h.parallel_for(sycl::nd_range<2>({global[0], global[1]}, {local[0], local[1]}), k);
      } else {
        h.parallel_for(sycl::nd_range<3>({global[0], global[1], global[2]},
                                         {local[0], local[1], local[2]}),
                       k);
      }
    });
    if (wait) {
      ev.wait_and_throw();
      q.throw_asynchronous();
    }
    return 0;
  } catch (const std::exception &e) {
    last_error = e.what();
    return 1;
  }
}

// USM device memory on the queue's device, and copies to/from it (blocking).
void *xv_malloc_device(void *queue_ref, size_t bytes) {
  try {
    auto &q = *static_cast<sycl::queue *>(queue_ref);
    void *p = sycl::malloc_device(bytes ? bytes : 1, q);
    if (!p) last_error = "sycl::malloc_device returned NULL (out of device memory?)";
    return p;
  } catch (const std::exception &e) {
    last_error = e.what();
    return nullptr;
  }
}

int xv_free(void *queue_ref, void *ptr) {
  try {
    sycl::free(ptr, *static_cast<sycl::queue *>(queue_ref));
    return 0;
  } catch (const std::exception &e) {
    last_error = e.what();
    return 1;
  }
}

int xv_memcpy(void *queue_ref, void *dst, const void *src, size_t bytes) {
  try {
    if (bytes) static_cast<sycl::queue *>(queue_ref)->memcpy(dst, src, bytes).wait_and_throw();
    return 0;
  } catch (const std::exception &e) {
    last_error = e.what();
    return 1;
  }
}

int xv_wait(void *queue_ref) {
  try {
    static_cast<sycl::queue *>(queue_ref)->wait_and_throw();
    return 0;
  } catch (const std::exception &e) {
    last_error = e.what();
    return 1;
  }
}

}  // extern "C"
