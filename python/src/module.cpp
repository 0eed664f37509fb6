// Owns the extension module tessera._tessera: registers the kernel and session bindings and turns
// Tessera errors into the exception classes of tessera/errors.py (one class per error category,
// the message the CLI would print).
#include "bindings.h"

namespace tessera::py {
namespace {

const char* errorClass(ErrorCode c) {
  switch (c) {
    case ErrorCode::InvalidArgument: return "InvalidArgumentError";
    case ErrorCode::ParseError: return "ParseError";
    case ErrorCode::VerifyError: return "VerifyError";
    case ErrorCode::InvalidConfig: return "InvalidConfigError";
    case ErrorCode::CompileError: return "CompileError";
    case ErrorCode::WrongResult: return "WrongResultError";
    case ErrorCode::NotFound: return "NotFoundError";
    case ErrorCode::Unsupported: return "UnsupportedError";
    case ErrorCode::IOError: return "StoreError";
    case ErrorCode::PermissionDenied: return "AccessDeniedError";
    case ErrorCode::Unavailable: return "ServiceUnavailableError";
    default: return "TesseraError";
  }
}

}  // namespace
}  // namespace tessera::py

NB_MODULE(_tessera, m) {
  using namespace tessera::py;
  m.doc() = "Tessera's C++ core: kernels, compilation, tuning sessions, the cache client and bundles.";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const PyTesseraError& e) {
      nb::object errors = nb::module_::import_("tessera.errors");
      nb::object cls = errors.attr(errorClass(e.error.code));
      PyErr_SetString(cls.ptr(), e.error.str().c_str());
    }
  });
  m.attr("__version__") = TESSERA_VERSION;
  registerKernels(m);
  registerSessions(m);
  registerBundleCalls(m);
}
