// Owns translating kernel flags into verified kernels.
#include "cli/kernel_flags.h"

#include <cmath>
#include <cstdio>

#include "ir/builders.h"
#include "ir/families.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include "support/strings.h"
#include "support/text_file.h"

namespace tessera::cli {

namespace {

Expected<ir::Shape> parseDims(const std::string& s) {
  ir::Shape out;
  std::string norm = s;
  for (char& c : norm)
    if (c == ',' || c == 'X' || c == '*') c = 'x';
  for (const auto& part : split(norm, 'x')) {
    auto v = parseInt(part);
    if (!v) return makeError(ErrorCode::InvalidArgument, "bad shape '" + s + "' (expected e.g. 1024x4096)");
    if (*v <= 0) return makeError(ErrorCode::InvalidArgument, "shape '" + s + "' has a non-positive dimension");
    out.push_back(*v);
  }
  return out;
}

// Splits --shape values into the default shape and named ones.
Status parseShapes(const std::vector<std::string>& in, ir::Shape* def, std::map<std::string, ir::Shape>* named) {
  for (const auto& s : in) {
    auto eq = s.find('=');
    if (eq == std::string::npos) {
      if (!def->empty()) return makeError(ErrorCode::InvalidArgument, "two default shapes given (--shape " + s + ")");
      TESSERA_ASSIGN(*def, parseDims(s));
    } else {
      TESSERA_ASSIGN(ir::Shape sh, parseDims(s.substr(eq + 1)));
      (*named)[std::string(trim(s.substr(0, eq)))] = sh;
    }
  }
  return {};
}

// A kernel file is read up to the parser's size limit and no further: /dev/zero, a FIFO or a
// 1 GB file is an error after at most that many bytes, never a hang or a memory spike.
Expected<std::string> readKernelFile(const std::string& path) {
  return readTextFile(path, {.max_bytes = ir::kMaxIrTextBytes, .max_line_bytes = 0, .what = "kernel file"});
}

Status requireFinite(double v, const char* flag) {
  if (!std::isfinite(v))
    return makeError(ErrorCode::InvalidArgument, std::string(flag) + " must be a finite number");
  return {};
}

Expected<ir::ScalarType> dtypeOf(const std::string& s) {
  auto t = ir::parseDType(s);
  if (!t) return makeError(ErrorCode::InvalidArgument, "unknown dtype '" + s + "' (expected f32, f16 or bf16)");
  return *t;
}

}  // namespace

void addKernelSubcommands(CLI::App* parent, KernelFlags* f, const std::function<void()>& action) {
  // A kernel file says its own dtypes and name: `file` takes neither flag (they did nothing).
  auto common = [&](CLI::App* sub) {
    if (sub->get_name() != "file") {
      sub->add_option("--dtype", f->dtype, "element type: f32, f16, bf16")->capture_default_str();
      sub->add_option("--name", f->name, "kernel name (default: derived from the shape)");
    }
    sub->fallthrough();
    sub->callback([f, sub, action] {
      f->family = sub->get_name();
      action();
    });
  };
  auto* g = parent->add_subcommand("gemm", "C = epilogue(alpha * op(A) @ op(B) + beta * Cin)");
  g->add_option("--m", f->mText, "rows of C (tune: also a range LO..HI or a list A,B,C)")->required();
  g->add_option("--n", f->n, "columns of C")->required();
  g->add_option("--k", f->k, "reduction length")->required();
  f->batchOption = g->add_option("--batch", f->batch, "batch count (at least 1; leave it out for no batch dimension)");
  g->add_flag("--trans-a", f->transA, "A is stored K x M");
  g->add_flag("--trans-b", f->transB, "B is stored N x K");
  g->add_option("--alpha", f->alpha, "scale of A@B");
  g->add_option("--beta", f->beta, "scale of the Cin input (0: no Cin)");
  g->add_option("--epilogue", f->epilogue, "elementwise expression over acc and inputs, e.g. 'gelu(acc + bias)'");
  g->add_option("--shape", f->shapes, "shape of an epilogue input: name=dims (default: the output shape)");
  common(g);
  auto* e = parent->add_subcommand("elementwise", "fused elementwise chain, e.g. --expr 'y = gelu(x * s + b)'");
  e->add_option("--expr", f->expr, "statements 'name = expression' separated by ';'")->required();
  e->add_option("--shape", f->shapes, "default input shape (1024x4096) and per-input overrides (b=4096)")->required();
  e->add_option("--rows", f->rowsText,
                "leading dimension of --shape and of the full-rank overrides that have it (tune: also a range LO..HI or a list)");
  common(e);
  auto* a = parent->add_subcommand("attention", "softmax(Q K^T * scale) V, FlashAttention-style");
  a->add_option("--batch", f->attnBatch, "batch")->capture_default_str();
  a->add_option("--heads", f->heads, "query heads")->required();
  a->add_option("--heads-kv", f->headsKv, "key/value heads (grouped-query; default: heads)");
  a->add_option("--seq", f->seqText, "query length (tune: also a range LO..HI or a list A,B,C of both lengths)")->required();
  f->seqKvOption = a->add_option("--seq-kv", f->seqKv, "key length (default: seq)");
  a->add_option("--head-dim", f->headDim, "head dimension")->required();
  a->add_option("--scale", f->scale, "score scale (default 1/sqrt(head_dim))");
  a->add_flag("--causal", f->causal, "mask keys after the query (bottom-right aligned)");
  common(a);
  auto* fl = parent->add_subcommand("file", "a kernel in the IR text form (see `tessera compile ... --emit ir`)");
  fl->add_option("path", f->file, "kernel file")->required();
  common(fl);
  parent->require_subcommand(1);
}

void addThreadsOption(CLI::App* cmd, int* threads) {
  cmd->add_option("--threads", *threads, "host threads the kernel may use (default: all cores; part of the cache key)")
;
}

void addMaxElementsOption(CLI::App* cmd, int64_t* maxElements) {
  cmd->add_option("--max-elements", *maxElements,
                  "refuse kernels whose inputs and outputs hold more elements than this (they are allocated here)")
      ->capture_default_str();
}

Expected<ir::Kernel> buildKernel(const KernelFlags& f) {
  TESSERA_ASSIGN(ir::ScalarType dt, dtypeOf(f.dtype));
  ir::Shape def;
  std::map<std::string, ir::Shape> named;
  TESSERA_TRY(parseShapes(f.shapes, &def, &named));
  Expected<ir::Kernel> k = makeError(ErrorCode::Internal, "no kernel");
  if (f.family == "gemm") {
    TESSERA_TRY(requireFinite(f.alpha, "--alpha"));
    TESSERA_TRY(requireFinite(f.beta, "--beta"));
    if (!def.empty()) return makeError(ErrorCode::InvalidArgument, "gemm --shape takes name=dims (epilogue inputs)");
    if (f.batchOption && f.batchOption->count() && f.batch < 1)
      return makeError(ErrorCode::InvalidArgument,
                       "--batch must be at least 1 (leave it out for a GEMM without a batch dimension)");
    ir::GemmSpec s;
    s.m = f.m;
    if (!f.mText.empty()) {
      if (f.mText.find("..") != std::string::npos || f.mText.find(',') != std::string::npos)
        return makeError(ErrorCode::InvalidArgument, "--m " + f.mText + ": a range or list of M is for `tessera tune`; give one size");
      auto m = parseInt(f.mText);
      if (!m) return makeError(ErrorCode::InvalidArgument, "--m must be a whole number, got '" + f.mText + "'");
      s.m = *m;
    }
    s.n = f.n; s.k = f.k; s.batch = f.batch; s.dtype = dt;
    s.transA = f.transA; s.transB = f.transB; s.alpha = f.alpha; s.beta = f.beta;
    s.epilogue = f.epilogue; s.shapes = named; s.name = f.name;
    k = ir::buildGemm(s);
  } else if (f.family == "elementwise") {
    if (!f.rowsText.empty()) {
      if (f.rowsText.find("..") != std::string::npos || f.rowsText.find(',') != std::string::npos)
        return makeError(ErrorCode::InvalidArgument, "--rows " + f.rowsText + ": a range or list of rows is for `tessera tune`; give one size");
      auto rows = parseInt(f.rowsText);
      if (!rows || *rows < 1) return makeError(ErrorCode::InvalidArgument, "--rows must be a whole number of at least 1, got '" + f.rowsText + "'");
      if (def.empty()) return makeError(ErrorCode::InvalidArgument, "--rows needs a default --shape (e.g. --shape 1024x4096)");
      // Overrides of the default's rank that share its leading extent follow it (b=1x4096 broadcasts and stays).
      for (auto& [name, shape] : named)
        if (shape.size() == def.size() && shape[0] == def[0]) shape[0] = *rows;
      def[0] = *rows;
    }
    ir::ElementwiseSpec s;
    s.expr = f.expr; s.shape = def; s.shapes = named; s.dtype = dt; s.name = f.name;
    k = ir::buildElementwise(s);
  } else if (f.family == "attention") {
    TESSERA_TRY(requireFinite(f.scale, "--scale"));
    int64_t seq = f.seq;
    if (!f.seqText.empty()) {
      if (f.seqText.find("..") != std::string::npos || f.seqText.find(',') != std::string::npos)
        return makeError(ErrorCode::InvalidArgument, "--seq " + f.seqText + ": a range or list of sequence lengths is for `tessera tune`; give one size");
      auto v = parseInt(f.seqText);
      if (!v || *v < 1) return makeError(ErrorCode::InvalidArgument, "--seq must be a whole number of at least 1, got '" + f.seqText + "'");
      seq = *v;
    }
    ir::AttentionSpec s;
    s.batch = f.attnBatch; s.heads = f.heads; s.heads_kv = f.headsKv; s.seq_q = seq; s.seq_kv = f.seqKv;
    s.head_dim = f.headDim; s.scale = f.scale; s.causal = f.causal; s.dtype = dt; s.name = f.name;
    k = ir::buildAttention(s);
  } else if (f.family == "file") {
    TESSERA_ASSIGN(std::string text, readKernelFile(f.file));
    k = ir::parseKernel(text);
    if (!k.ok()) return makeError(k.error().code, f.file + ":" + k.error().message);
  } else {
    return makeError(ErrorCode::InvalidArgument, "choose a kernel: gemm, elementwise, attention or file");
  }
  if (!k.ok()) return k.takeError();
  TESSERA_TRY(ir::verify(*k));
  return k;
}

}  // namespace tessera::cli
