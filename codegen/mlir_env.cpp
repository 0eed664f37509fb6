// Owns context creation and pipeline plumbing. This is the one translation unit that includes
// the InitAll* headers (≈12 s and 0.7 GB to compile: ARCHITECTURE.md §5), so nothing else may.
#include "codegen/mlir_env.h"

#include <mutex>

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Transform/Interfaces/TransformInterfaces.h"
#include "mlir/Dialect/Transform/Transforms/TransformInterpreterUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/raw_ostream.h"

namespace tessera::codegen {
namespace {

const mlir::DialectRegistry& registry() {
  static mlir::DialectRegistry* reg = [] {
    auto* r = new mlir::DialectRegistry();
    mlir::registerAllDialects(*r);
    mlir::registerAllExtensions(*r);
    mlir::registerAllToLLVMIRTranslations(*r);
    mlir::registerAllPasses();  // makes every pass nameable in pipeline strings
    return r;
  }();
  return *reg;
}

}  // namespace

std::unique_ptr<mlir::MLIRContext> makeContext() {
  static std::mutex mu;  // registry construction and pass registration are not thread-safe
  std::lock_guard<std::mutex> g(mu);
  auto ctx = std::make_unique<mlir::MLIRContext>(registry(), mlir::MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  return ctx;
}

struct DiagnosticCollector::Impl {
  mlir::MLIRContext* ctx;
  mlir::DiagnosticEngine::HandlerID id;
  std::string text;
};

DiagnosticCollector::DiagnosticCollector(mlir::MLIRContext* ctx) : impl_(std::make_unique<Impl>()) {
  impl_->ctx = ctx;
  impl_->id = ctx->getDiagEngine().registerHandler([this](mlir::Diagnostic& d) {
    if (d.getSeverity() != mlir::DiagnosticSeverity::Error && d.getSeverity() != mlir::DiagnosticSeverity::Warning)
      return mlir::success();
    std::string s;
    llvm::raw_string_ostream os(s);
    os << d;
    for (const auto& n : d.getNotes()) os << "; note: " << n;
    if (!impl_->text.empty()) impl_->text += " | ";
    impl_->text += s;
    return mlir::success();
  });
}

DiagnosticCollector::~DiagnosticCollector() { impl_->ctx->getDiagEngine().eraseHandler(impl_->id); }

std::string DiagnosticCollector::message() const { return impl_->text; }

Status runPasses(mlir::ModuleOp m, const std::string& pipeline, const std::string& what) {
  DiagnosticCollector diags(m.getContext());
  mlir::PassManager pm(m.getContext(), mlir::ModuleOp::getOperationName());
  std::string perr;
  llvm::raw_string_ostream es(perr);
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm, es)))
    return makeError(ErrorCode::Internal, "bad pass pipeline for " + what + ": " + perr);
  if (mlir::failed(pm.run(m)))
    return makeError(ErrorCode::CompileError, what + " failed: " + (diags.message().empty() ? "(no diagnostic)" : diags.message()));
  return {};
}

Expected<mlir::OwningOpRef<mlir::ModuleOp>> parseModule(mlir::MLIRContext* ctx, const std::string& text) {
  DiagnosticCollector diags(ctx);
  auto m = mlir::parseSourceString<mlir::ModuleOp>(text, ctx);
  if (!m) return makeError(ErrorCode::Internal, "generated MLIR does not parse: " + diags.message());
  return m;
}

Status applySchedule(mlir::ModuleOp payload, const std::string& scheduleText) {
  TESSERA_ASSIGN(auto sched, parseModule(payload.getContext(), scheduleText));
  DiagnosticCollector diags(payload.getContext());
  auto entry = mlir::transform::detail::findTransformEntryPoint(payload, *sched, "__transform_main");
  if (!entry) return makeError(ErrorCode::Internal, "schedule has no @__transform_main");
  mlir::transform::TransformOptions opts;
  opts.enableExpensiveChecks(false);  // measured: the checks double schedule time, the tests run with them below
#ifndef NDEBUG
  opts.enableExpensiveChecks(true);
#endif
  if (mlir::failed(mlir::transform::applyTransformNamedSequence(payload, entry, *sched, opts)))
    return makeError(ErrorCode::CompileError, "schedule failed: " + diags.message());
  return {};
}

Status approximateMath(mlir::ModuleOp m) {
  mlir::RewritePatternSet patterns(m.getContext());
  // rsqrt is left to LLVM (1/sqrt): its approximation is the 12-bit AVX estimate, which needs the
  // x86vector dialect and is less accurate than the f32 tolerance.
  auto wanted = [](llvm::StringRef name) { return !name.contains("rsqrt"); };
  mlir::populateMathF32ExpansionPatterns(patterns, wanted);
  mlir::populateMathPolynomialApproximationPatterns(patterns, wanted);
  DiagnosticCollector diags(m.getContext());
  if (mlir::failed(mlir::applyPatternsGreedily(m, std::move(patterns))))
    return makeError(ErrorCode::CompileError, "math approximation did not converge: " + diags.message());
  return {};
}

std::string printOp(mlir::Operation* op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->print(os);
  return s;
}

}  // namespace tessera::codegen
