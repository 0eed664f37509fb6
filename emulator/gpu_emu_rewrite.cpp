// Owns the rewrite of a GPU module at its NVVM / ROCDL cut point into a host module the JIT runs
// under the emulator's runtime (emu_runtime.cpp), and the JIT itself. Special-register reads,
// barriers, warp collectives (shfl, vote, ldmatrix, mma.sync, MFMA, cross-lane permutes), async
// copies and the inline-PTX approximations become calls of the runtime; shared-memory / LDS
// globals become offsets in the block's arena; every load and store that is not private gets a
// hook (bounds, races, bank conflicts, coalescing); address spaces collapse to host pointers.
// mbarriers, TMA tiled loads and wgmma go to the sm_90 side of the runtime (emu_tma.cpp).
// Every op the emulator does not model is an Unsupported error naming it: nothing is skipped
// silently. (The text transform of the earlier prototype, done as MLIR rewrites here.)
#include <functional>
#include <map>

#include "emulator/gpu_emu.h"
#include "codegen/host_soft_half.h"
#include "codegen/mlir_env.h"
#include "codegen/nvidia/wgmma_ptx.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/TargetSelect.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

int64_t typeBytes(Type t) {
  if (auto i = dyn_cast<IntegerType>(t)) return (i.getWidth() + 7) / 8;
  if (auto f = dyn_cast<FloatType>(t)) return f.getWidth() / 8;
  if (isa<LLVM::LLVMPointerType>(t)) return 8;
  if (auto v = dyn_cast<VectorType>(t)) return v.getNumElements() * typeBytes(v.getElementType());
  if (auto a = dyn_cast<LLVM::LLVMArrayType>(t)) return int64_t(a.getNumElements()) * typeBytes(a.getElementType());
  if (auto s = dyn_cast<LLVM::LLVMStructType>(t)) {
    int64_t n = 0;
    for (Type e : s.getBody()) {
      int64_t sz = typeBytes(e), al = std::min<int64_t>(std::max<int64_t>(sz, 1), 8);
      n = (n + al - 1) / al * al + sz;
    }
    return n;
  }
  return 0;
}

std::string str(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}
std::string str(Attribute a) {
  std::string s;
  llvm::raw_string_ostream os(s);
  a.print(os);
  return s;
}

bool isShared(Type t) {
  auto p = dyn_cast<LLVM::LLVMPointerType>(t);
  return p && p.getAddressSpace() == 3;
}

// Private (stack) memory: a pointer derived from an alloca needs no hook.
bool isPrivate(Value p) {
  for (int depth = 0; depth < 64; ++depth) {
    Operation* def = p.getDefiningOp();
    if (!def) return false;
    if (isa<LLVM::AllocaOp>(def)) return true;
    if (auto g = dyn_cast<LLVM::GEPOp>(def)) p = g.getBase();
    else if (auto c = dyn_cast<LLVM::AddrSpaceCastOp>(def)) p = c.getArg();
    else if (auto bc = dyn_cast<LLVM::BitcastOp>(def)) p = bc.getArg();
    else return false;
  }
  return false;
}

const std::map<std::string, int>& sregTable() {
  static const std::map<std::string, int> t = {
      {"nvvm.read.ptx.sreg.tid.x", emu::kTidX},        {"nvvm.read.ptx.sreg.tid.y", emu::kTidY},
      {"nvvm.read.ptx.sreg.tid.z", emu::kTidZ},        {"nvvm.read.ptx.sreg.ntid.x", emu::kNtidX},
      {"nvvm.read.ptx.sreg.ntid.y", emu::kNtidY},      {"nvvm.read.ptx.sreg.ntid.z", emu::kNtidZ},
      {"nvvm.read.ptx.sreg.ctaid.x", emu::kCtaidX},    {"nvvm.read.ptx.sreg.ctaid.y", emu::kCtaidY},
      {"nvvm.read.ptx.sreg.ctaid.z", emu::kCtaidZ},    {"nvvm.read.ptx.sreg.nctaid.x", emu::kNctaidX},
      {"nvvm.read.ptx.sreg.nctaid.y", emu::kNctaidY},  {"nvvm.read.ptx.sreg.nctaid.z", emu::kNctaidZ},
      {"nvvm.read.ptx.sreg.laneid", emu::kLaneId},     {"nvvm.read.ptx.sreg.warpsize", emu::kWarpSize},
      {"nvvm.read.ptx.sreg.warpid", emu::kWarpId},     {"nvvm.read.ptx.sreg.nwarpid", emu::kNwarpId},
      {"nvvm.read.ptx.sreg.clock", emu::kClock},       {"rocdl.workitem.id.x", emu::kTidX},
      {"rocdl.workitem.id.y", emu::kTidY},             {"rocdl.workitem.id.z", emu::kTidZ},
      {"rocdl.workgroup.id.x", emu::kCtaidX},          {"rocdl.workgroup.id.y", emu::kCtaidY},
      {"rocdl.workgroup.id.z", emu::kCtaidZ},          {"rocdl.workgroup.dim.x", emu::kNtidX},
      {"rocdl.workgroup.dim.y", emu::kNtidY},          {"rocdl.workgroup.dim.z", emu::kNtidZ},
      {"rocdl.grid.dim.x", emu::kNctaidX},             {"rocdl.grid.dim.y", emu::kNctaidY},
      {"rocdl.grid.dim.z", emu::kNctaidZ},             {"rocdl.wavefrontsize", emu::kWarpSize},
  };
  return t;
}

// Ops with no effect on what the emulator models (fences other than the async-proxy fence and
// wgmma.fence, which the runtime tracks: within a block barriers order memory; scheduling hints;
// waits for counters the emulator has no notion of).
bool isNoOp(StringRef name) {
  return name.starts_with("nvvm.fence.") || name == "nvvm.membar" || name == "nvvm.memory.barrier" || name == "rocdl.s.waitcnt" ||
         name == "rocdl.sched.barrier" || name == "rocdl.sched.group.barrier" || name == "rocdl.s.setprio" ||
         name == "rocdl.s.sleep" ||
         // sm_90: register reallocation, prefetches.
         name == "nvvm.setmaxregister" || name == "nvvm.prefetch";
}

struct Rewriter {
  ModuleOp host;
  OpBuilder b;
  emu::SiteTable& sites;
  std::map<std::string, int64_t> sharedOffset;
  std::map<std::string, LLVM::LLVMFuncOp> decls;
  Type ptr, i8, i32, i64, f32, voidT;

  Rewriter(ModuleOp m, emu::SiteTable& s) : host(m), b(m.getContext()), sites(s) {
    MLIRContext* ctx = m.getContext();
    ptr = LLVM::LLVMPointerType::get(ctx);
    i8 = IntegerType::get(ctx, 8);
    i32 = IntegerType::get(ctx, 32);
    i64 = IntegerType::get(ctx, 64);
    f32 = Float32Type::get(ctx);
    voidT = LLVM::LLVMVoidType::get(ctx);
  }

  int site(Operation* op, const std::string& extra = "") {
    std::string where;
    if (auto fl = dyn_cast<FileLineColLoc>(op->getLoc()))
      where = " (" + fl.getFilename().str() + " line " + std::to_string(fl.getLine()) + ")";
    std::string types;
    if (op->getNumResults()) types = " -> " + str(op->getResult(0).getType());
    else if (op->getNumOperands() && isa<LLVM::StoreOp>(op)) types = " " + str(op->getOperand(0).getType());
    if (types.size() > 72) types = types.substr(0, 64) + "...";  // wgmma's 128-float struct: the op says enough
    return sites.add(op->getName().getStringRef().str() + extra + types + where);
  }

  Value call(Location loc, const std::string& name, Type result, ValueRange in) {
    // Pointers of any address space go to the runtime as host pointers.
    SmallVector<Value> args;
    for (Value a : in) {
      auto p = dyn_cast<LLVM::LLVMPointerType>(a.getType());
      args.push_back(p && p.getAddressSpace() != 0 ? Value(LLVM::AddrSpaceCastOp::create(b, loc, ptr, a)) : a);
    }
    auto it = decls.find(name);
    if (it == decls.end()) {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(host.getBody());
      SmallVector<Type> argTypes;
      for (Value a : args) argTypes.push_back(a.getType());
      auto fn = LLVM::LLVMFuncOp::create(b, loc, name, LLVM::LLVMFunctionType::get(result, argTypes));
      it = decls.emplace(name, fn).first;
    }
    auto c = LLVM::CallOp::create(b, loc, it->second, args);
    return c.getNumResults() ? c.getResult() : Value();
  }
  Value cst(Location loc, Type t, int64_t v) { return LLVM::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, v)); }
  // A private buffer of `n` 32-bit words for fragments passed through memory, aligned for the
  // widest fragment stored whole: a 32x32x8 MFMA's vector<16xf32> (ABI alignment 64 on x86-64;
  // at 16 the host's aligned 512-bit moves fault).
  Value scratch(Location loc, int n) {
    OpBuilder::InsertionGuard g(b);
    Operation* owner = b.getInsertionBlock()->getParentOp();
    auto fn = dyn_cast<LLVM::LLVMFuncOp>(owner);
    if (!fn) fn = owner->getParentOfType<LLVM::LLVMFuncOp>();
    b.setInsertionPointToStart(&fn.getBody().front());
    Value one = cst(loc, i64, 1);
    return LLVM::AllocaOp::create(b, loc, ptr, LLVM::LLVMArrayType::get(i32, unsigned(n)), one, 64);
  }
  Value wordAt(Location loc, Value base, int i) {
    return LLVM::GEPOp::create(b, loc, ptr, i32, base, ArrayRef<LLVM::GEPArg>{LLVM::GEPArg(i)});
  }
  Value toI32(Location loc, Value v) {
    if (v.getType() == i32) return v;
    if (typeBytes(v.getType()) == 4) return LLVM::BitcastOp::create(b, loc, i32, v);
    return Value();
  }
  // A struct result (or a single value) from `n` words at `buf`, typed as `t` wants.
  Value fromWords(Location loc, Type t, Value buf, int n) {
    auto load = [&](Type et, int i) -> Value { return LLVM::LoadOp::create(b, loc, et, wordAt(loc, buf, i)); };
    auto st = dyn_cast<LLVM::LLVMStructType>(t);
    if (!st) return load(t, 0);
    Value s = LLVM::PoisonOp::create(b, loc, t);
    for (int i = 0; i < int(st.getBody().size()) && i < n; ++i)
      s = LLVM::InsertValueOp::create(b, loc, s, load(st.getBody()[size_t(i)], i), ArrayRef<int64_t>{i});
    return s;
  }
  void storeWord(Location loc, Value v, Value buf, int i) { LLVM::StoreOp::create(b, loc, v, wordAt(loc, buf, i)); }

  Status unsupported(Operation* op) {
    return makeError(ErrorCode::Unsupported, "the emulator does not model " + op->getName().getStringRef().str() +
                                                 " (" + printOp(op).substr(0, 240) + ")");
  }

  Status placeShared(int64_t* total) {
    int64_t off = 0;
    SmallVector<LLVM::GlobalOp> dead, dynamic;
    for (auto g : host.getOps<LLVM::GlobalOp>()) {
      if (g.getAddrSpace() != 3) continue;
      int64_t al = std::max<int64_t>(16, int64_t(g.getAlignment().value_or(16)));
      int64_t bytes = typeBytes(g.getGlobalType());
      if (bytes == 0) {
        dynamic.push_back(g);  // gpu.dynamic_shared_memory: after the static part
        continue;
      }
      off = (off + al - 1) / al * al;
      sharedOffset[g.getSymName().str()] = off;
      off += bytes;
      dead.push_back(g);
    }
    for (auto g : dynamic) {
      int64_t al = std::max<int64_t>(16, int64_t(g.getAlignment().value_or(16)));
      off = (off + al - 1) / al * al;
      sharedOffset[g.getSymName().str()] = off;
      dead.push_back(g);
    }
    *total = off;
    SmallVector<LLVM::AddressOfOp> refs;
    host.walk([&](LLVM::AddressOfOp a) {
      if (sharedOffset.count(a.getGlobalName().str())) refs.push_back(a);
    });
    for (auto a : refs) {
      b.setInsertionPoint(a);
      Value p = call(a.getLoc(), "tessera_emu_shared", ptr, {cst(a.getLoc(), i64, sharedOffset[a.getGlobalName().str()])});
      // Kept in its address space until the end: a ptrtoint of it is a shared-window address.
      if (a.getType() != ptr) p = LLVM::AddrSpaceCastOp::create(b, a.getLoc(), a.getType(), p);
      a.getResult().replaceAllUsesWith(p);
      a.erase();
    }
    for (auto g : dead) g.erase();
    return {};
  }

  Status rewriteOp(Operation* op) {
    const std::string name = op->getName().getStringRef().str();
    Location loc = op->getLoc();
    b.setInsertionPoint(op);
    auto replace = [&](Value v) {
      if (v && op->getNumResults()) op->getResult(0).replaceAllUsesWith(v);
      op->erase();
      return Status{};
    };
    if (auto it = sregTable().find(name); it != sregTable().end()) {
      Value v = call(loc, "tessera_emu_sreg", i32, {cst(loc, i32, it->second)});
      Type rt = op->getResult(0).getType();
      if (rt != i32) v = LLVM::ZExtOp::create(b, loc, rt, v);
      return replace(v);
    }
    if (name == "nvvm.barrier0" || name == "rocdl.barrier" || name == "rocdl.s.barrier") {
      call(loc, "tessera_emu_barrier", voidT, {cst(loc, i32, 0), cst(loc, i32, -1), cst(loc, i32, site(op))});
      return replace({});
    }
    if (auto bar = dyn_cast<NVVM::BarrierOp>(op)) {
      if (bar.getReductionPredicate() || bar->getNumResults()) return unsupported(op);
      Value id = bar.getBarrierId() ? bar.getBarrierId() : cst(loc, i32, 0);
      Value n = bar.getNumberOfThreads() ? bar.getNumberOfThreads() : cst(loc, i32, -1);
      call(loc, "tessera_emu_barrier", voidT, {id, n, cst(loc, i32, site(op))});
      return replace({});
    }
    if (auto ar = dyn_cast<NVVM::BarrierArriveOp>(op)) {
      Value id = ar.getBarrierId() ? ar.getBarrierId() : cst(loc, i32, 0);
      call(loc, "tessera_emu_barrier_arrive", voidT, {id, ar.getNumberOfThreads(), cst(loc, i32, site(op))});
      return replace({});
    }
    if (name == "nvvm.bar.warp.sync") {
      call(loc, "tessera_emu_syncwarp", voidT, {op->getOperand(0), cst(loc, i32, site(op))});
      return replace({});
    }
    if (auto sh = dyn_cast<NVVM::ShflOp>(op)) {
      Value val = toI32(loc, sh.getVal());
      if (!val) return unsupported(op);
      int mode = sh.getKind() == NVVM::ShflKind::bfly ? 0 : sh.getKind() == NVVM::ShflKind::up ? 1
                 : sh.getKind() == NVVM::ShflKind::down ? 2 : 3;
      Value valid = sh.getReturnValueAndIsValid() ? scratch(loc, 1) : LLVM::ZeroOp::create(b, loc, ptr).getResult();
      Value r = call(loc, "tessera_emu_shfl", i32,
                     {cst(loc, i32, mode), sh.getThreadMask(), val, sh.getOffset(), sh.getMaskAndClamp(),
                      cst(loc, i32, site(op)), valid});
      Type vt = sh.getVal().getType();
      if (vt != i32) r = LLVM::BitcastOp::create(b, loc, vt, r);
      if (!sh.getReturnValueAndIsValid()) return replace(r);
      Type st = op->getResult(0).getType();
      Value p = LLVM::LoadOp::create(b, loc, IntegerType::get(b.getContext(), 1), valid);
      Value s = LLVM::PoisonOp::create(b, loc, st);
      s = LLVM::InsertValueOp::create(b, loc, s, r, ArrayRef<int64_t>{0});
      s = LLVM::InsertValueOp::create(b, loc, s, p, ArrayRef<int64_t>{1});
      return replace(s);
    }
    if (name == "nvvm.vote.sync") {
      auto kind = op->getAttr("kind");
      std::string k = kind ? str(kind) : "";
      int mode = k.find("ballot") != std::string::npos ? 3 : k.find("any") != std::string::npos ? 1
                 : k.find("uni") != std::string::npos ? 2 : 0;
      Value pred = LLVM::ZExtOp::create(b, loc, i32, op->getOperand(1));
      Value r = call(loc, "tessera_emu_vote", i32, {cst(loc, i32, mode), op->getOperand(0), pred, cst(loc, i32, site(op))});
      Type rt = op->getResult(0).getType();
      if (rt != i32) r = LLVM::TruncOp::create(b, loc, rt, r);
      return replace(r);
    }
    if (auto ld = dyn_cast<NVVM::LdMatrixOp>(op)) {
      if (ld.getEltType() != NVVM::LdStMatrixEltType::B16 || ld.getShape().getM() != 8 || ld.getShape().getN() != 8)
        return unsupported(op);
      int num = int(ld.getNum());
      Value buf = scratch(loc, 4);
      call(loc, "tessera_emu_ldmatrix", voidT,
           {ld.getPtr(), cst(loc, i32, num), cst(loc, i32, ld.getLayout() == NVVM::MMALayout::col), buf,
            cst(loc, i32, site(op))});
      return replace(fromWords(loc, ld.getRes().getType(), buf, num));
    }
    if (auto mma = dyn_cast<NVVM::MmaOp>(op)) {
      auto shape = mma.getShape();
      if (mma.getLayoutA() != NVVM::MMALayout::row || mma.getLayoutB() != NVVM::MMALayout::col || shape.getM() != 16 ||
          shape.getN() != 8 || (shape.getK() != 16 && shape.getK() != 8))
        return unsupported(op);
      std::string aType = mma.getMultiplicandAPtxTypeAttr() ? str(Attribute(mma.getMultiplicandAPtxTypeAttr())) : "";
      bool bf16 = aType.find("bf16") != std::string::npos;
      auto resT = dyn_cast<LLVM::LLVMStructType>(mma.getRes().getType());
      bool f16acc = resT && resT.getBody().size() == 2;
      if (!bf16 && !mma.getOperandA().empty()) {
        Type a0 = mma.getOperandA().front().getType();
        if (auto v = dyn_cast<VectorType>(a0); !(v && v.getElementType().isF16())) return unsupported(op);
      }
      int kind = shape.getK() == 16 ? (f16acc ? 2 : bf16 ? 1 : 0) : (bf16 ? 4 : 3);
      if (f16acc && shape.getK() != 16) return unsupported(op);
      SmallVector<Value> words;
      for (ValueRange r : {mma.getOperandA(), mma.getOperandB(), mma.getOperandC()})
        for (Value v : r) {
          Value w = toI32(loc, v);
          if (!w) return unsupported(op);
          words.push_back(w);
        }
      Value in = scratch(loc, int(words.size())), out = scratch(loc, 4);
      for (size_t i = 0; i < words.size(); ++i) storeWord(loc, words[i], in, int(i));
      call(loc, "tessera_emu_mma", voidT, {cst(loc, i32, kind), in, out, cst(loc, i32, site(op))});
      return replace(fromWords(loc, mma.getRes().getType(), out, 4));
    }
    if (auto cp = dyn_cast<NVVM::CpAsyncOp>(op)) {
      Value size = cst(loc, i32, int64_t(cp.getSize()));
      Value src = cp.getCpSize() ? cp.getCpSize() : size;
      call(loc, "tessera_emu_cp_async", voidT, {cp.getDst(), cp.getSrc(), size, src, cst(loc, i32, site(op))});
      return replace({});
    }
    if (isa<NVVM::CpAsyncCommitGroupOp>(op)) {
      call(loc, "tessera_emu_cp_commit", voidT, {cst(loc, i32, site(op))});
      return replace({});
    }
    if (auto w = dyn_cast<NVVM::CpAsyncWaitGroupOp>(op)) {
      call(loc, "tessera_emu_cp_wait", voidT, {cst(loc, i32, int64_t(w.getN())), cst(loc, i32, site(op))});
      return replace({});
    }
    if (auto ip = dyn_cast<NVVM::InlinePtxOp>(op)) {
      static const std::map<std::string, std::string> table = {
          {"ex2.approx.ftz.f32 $0, $1;", "tessera_emu_ex2_approx_ftz"},
          {"rcp.approx.ftz.f32 $0, $1;", "tessera_emu_rcp_approx_ftz"},
      };
      auto it = table.find(ip.getPtxCode().str());
      if (it == table.end() || ip.getReadOnlyArgs().size() != 1 || op->getNumResults() != 1) return unsupported(op);
      return replace(call(loc, it->second, f32, {ip.getReadOnlyArgs()[0]}));
    }
    if (name == "rocdl.mbcnt.lo" || name == "rocdl.mbcnt.hi")
      return replace(call(loc, "tessera_emu_mbcnt", i32,
                          {cst(loc, i32, name == "rocdl.mbcnt.hi"), op->getOperand(0), op->getOperand(1)}));
    if (name.rfind("rocdl.mfma.f32.", 0) == 0) {
      static const std::map<std::string, int> kinds = {{"rocdl.mfma.f32.16x16x16f16", 0},
                                                       {"rocdl.mfma.f32.32x32x8f16", 1},
                                                       {"rocdl.mfma.f32.16x16x16bf16.1k", 2},
                                                       {"rocdl.mfma.f32.32x32x8bf16.1k", 3}};
      auto it = kinds.find(name);
      if (it == kinds.end() || op->getNumOperands() != 6) return unsupported(op);
      Value a = LLVM::BitcastOp::create(b, loc, i64, op->getOperand(0));
      Value bv = LLVM::BitcastOp::create(b, loc, i64, op->getOperand(1));
      Value acc = scratch(loc, 16);
      LLVM::StoreOp::create(b, loc, op->getOperand(2), acc);
      call(loc, "tessera_emu_mfma", voidT,
           {cst(loc, i32, it->second), a, bv, acc, op->getOperand(3), op->getOperand(4), op->getOperand(5),
            cst(loc, i32, site(op))});
      return replace(LLVM::LoadOp::create(b, loc, op->getResult(0).getType(), acc));
    }
    auto permute = [&](int mode, Value data, Value arg, Value old) -> Status {
      Value d = toI32(loc, data);
      Value o = old ? toI32(loc, old) : cst(loc, i32, 0);
      if (!d || !o || (arg && arg.getType() != i32)) return unsupported(op);
      Value r = call(loc, "tessera_emu_permute", i32, {cst(loc, i32, mode), d, arg ? arg : cst(loc, i32, 0), o, cst(loc, i32, site(op))});
      if (data.getType() != i32) r = LLVM::BitcastOp::create(b, loc, data.getType(), r);
      return replace(r);
    };
    if (name == "rocdl.ds_bpermute") return permute(0, op->getOperand(1), op->getOperand(0), {});
    if (name == "rocdl.ds_swizzle") return permute(1, op->getOperand(0), op->getOperand(1), {});
    if (name == "rocdl.readlane") return permute(2, op->getOperand(0), op->getOperand(1), {});
    if (name == "rocdl.readfirstlane") return permute(3, op->getOperand(0), {}, {});
    if (name == "rocdl.update.dpp") {
      auto attr = [&](const char* n) -> int64_t {
        if (auto a = op->getAttrOfType<IntegerAttr>(n)) return a.getInt();
        if (auto bl = op->getAttrOfType<BoolAttr>(n)) return bl.getValue();
        return 0;
      };
      int64_t packed = (attr("dppCtrl") & 0x1ff) | (attr("rowMask") & 0xf) << 16 | (attr("bankMask") & 0xf) << 20 |
                       int64_t(attr("boundCtrl") != 0) << 24;
      return permute(4, op->getOperand(1), cst(loc, i32, packed), op->getOperand(0));
    }
    // sm_90: mbarriers, TMA tiled loads, wgmma (emu_tma.cpp).
    if (auto in = dyn_cast<NVVM::MBarrierInitOp>(op)) {
      if (in.getPredicate()) return unsupported(op);
      call(loc, "tessera_emu_mbar_init", voidT, {in.getAddr(), in.getCount(), cst(loc, i32, site(op))});
      return replace({});
    }
    if (auto ar = dyn_cast<NVVM::MBarrierArriveExpectTxOp>(op)) {
      if (ar.getPredicate()) return unsupported(op);
      Value st = call(loc, "tessera_emu_mbar_arrive", i64, {ar.getAddr(), ar.getTxcount(), cst(loc, i32, site(op))});
      return replace(op->getNumResults() ? st : Value());
    }
    if (auto ar = dyn_cast<NVVM::MBarrierArriveOp>(op)) {
      if (ar.getCount()) return unsupported(op);
      Value st = call(loc, "tessera_emu_mbar_arrive", i64, {ar.getAddr(), cst(loc, i32, 0), cst(loc, i32, site(op))});
      if (op->getNumResults() && op->getResult(0).getType() != i64) return unsupported(op);
      return replace(op->getNumResults() ? st : Value());
    }
    if (auto w = dyn_cast<NVVM::MBarrierTryWaitParityOp>(op)) {
      // MLIR 22's form without a result waits in a loop until the phase is over.
      if (op->getNumResults()) return unsupported(op);
      call(loc, "tessera_emu_mbar_wait", voidT, {w.getAddr(), w.getPhase(), cst(loc, i32, site(op))});
      return replace({});
    }
    if (auto tma = dyn_cast<NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp>(op)) {
      auto coords = tma.getCoordinates();
      if (tma.getMulticastMask() || tma.getPredicate() || tma.getMode() != NVVM::TMALoadMode::TILE || coords.size() > 3 ||
          coords.empty() || op->getNumOperands() != 3 + coords.size())
        return unsupported(op);
      SmallVector<Value> args = {tma.getDstMem(), tma.getTmaDescriptor(), tma.getMbar(), cst(loc, i32, int64_t(coords.size()))};
      for (size_t i = 0; i < 3; ++i) args.push_back(i < coords.size() ? coords[i] : cst(loc, i32, 0));
      args.push_back(cst(loc, i32, site(op)));
      call(loc, "tessera_emu_tma_load", voidT, args);
      return replace({});
    }
    if (auto mma = dyn_cast<NVVM::WgmmaMmaAsyncOp>(op)) {
      auto shape = mma.getShape();
      const bool f16 = mma.getTypeA() == NVVM::WGMMATypes::f16, bf16 = mma.getTypeA() == NVVM::WGMMATypes::bf16;
      auto resT = dyn_cast<LLVM::LLVMStructType>(mma.getInouts().getType());
      if (!(f16 || bf16) || mma.getTypeB() != mma.getTypeA() || mma.getTypeD() != NVVM::WGMMATypes::f32 ||
          shape.getM() != 64 || shape.getK() != 16 || shape.getN() % 8 || shape.getN() > 256 ||
          (mma.getSatfinite() && *mma.getSatfinite() == NVVM::MMAIntOverflow::satfinite) ||
          !resT || int(resT.getBody().size()) != shape.getN() / 2)
        return unsupported(op);
      const int n = shape.getN();
      Value buf = scratch(loc, n / 2);
      for (int i = 0; i < n / 2; ++i) {
        Value e = LLVM::ExtractValueOp::create(b, loc, mma.getInouts(), ArrayRef<int64_t>{i});
        Value w = toI32(loc, e);
        if (!w) return unsupported(op);
        storeWord(loc, w, buf, i);
      }
      int flags = (bf16 ? 1 : 0) | (mma.getLayoutA() == NVVM::MMALayout::col ? 2 : 0) |
                  (mma.getLayoutB() == NVVM::MMALayout::row ? 4 : 0) | (mma.getScaleD() == NVVM::WGMMAScaleOut::one ? 8 : 0) |
                  (mma.getScaleA() == NVVM::WGMMAScaleIn::neg ? 16 : 0) | (mma.getScaleB() == NVVM::WGMMAScaleIn::neg ? 32 : 0);
      call(loc, "tessera_emu_wgmma", voidT,
           {cst(loc, i32, n), cst(loc, i32, flags), mma.getDescriptorA(), mma.getDescriptorB(), buf, cst(loc, i32, site(op))});
      return replace(fromWords(loc, mma.getResults().getType(), buf, n / 2));
    }
    // wgmma with A from registers: inline PTX (codegen/nvidia/wgmma_ptx.h), recognised by its exact text.
    if (auto ia = dyn_cast<LLVM::InlineAsmOp>(op)) {
      auto w = parseWgmmaRegAPtx(ia.getAsmString());
      auto resT = op->getNumResults() == 1 ? dyn_cast<LLVM::LLVMStructType>(op->getResult(0).getType()) : nullptr;
      if (!w || !resT || int(resT.getBody().size()) != w->n / 2 || int(op->getNumOperands()) != 5 + w->n / 2)
        return unsupported(op);
      const int n = w->n;
      Value aBuf = scratch(loc, 4), acc = scratch(loc, n / 2);
      for (int i = 0; i < 4; ++i) {
        Value v = toI32(loc, op->getOperand(unsigned(i)));
        if (!v) return unsupported(op);
        storeWord(loc, v, aBuf, i);
      }
      for (int i = 0; i < n / 2; ++i) {
        Value v = toI32(loc, op->getOperand(unsigned(5 + i)));
        if (!v) return unsupported(op);
        storeWord(loc, v, acc, i);
      }
      const int flags = (w->bf16 ? 1 : 0) | (w->bMnMajor ? 4 : 0) | 8;
      call(loc, "tessera_emu_wgmma_rs", voidT,
           {cst(loc, i32, n), cst(loc, i32, flags), aBuf, op->getOperand(4), acc, cst(loc, i32, site(op))});
      return replace(fromWords(loc, resT, acc, n / 2));
    }
    if (auto fp = dyn_cast<NVVM::FenceProxyOp>(op)) {
      const auto k = fp.getKind();
      if (k == NVVM::ProxyKind::async || k == NVVM::ProxyKind::async_shared || k == NVVM::ProxyKind::async_global) {
        call(loc, "tessera_emu_fence_proxy_async", voidT, {cst(loc, i32, site(op))});
        return replace({});
      }
    }
    if (name == "nvvm.memory.barrier" || name == "nvvm.membar" || name == "nvvm.fence.sc.cluster") {
      call(loc, "tessera_emu_fence_device", voidT, {cst(loc, i32, site(op))});
      return replace({});
    }
    if (name == "nvvm.wgmma.fence.aligned") {
      call(loc, "tessera_emu_wgmma_fence", voidT, {cst(loc, i32, site(op))});
      return replace({});
    }
    if (name == "nvvm.wgmma.commit.group.sync.aligned") {
      call(loc, "tessera_emu_wgmma_commit", voidT, {cst(loc, i32, site(op))});
      return replace({});
    }
    if (auto wt = dyn_cast<NVVM::WgmmaWaitGroupSyncOp>(op)) {
      call(loc, "tessera_emu_wgmma_wait", voidT, {cst(loc, i32, int64_t(wt.getGroup())), cst(loc, i32, site(op))});
      return replace({});
    }
    if (isNoOp(name)) return replace({});
    if (name.rfind("nvvm.", 0) == 0 || name.rfind("rocdl.", 0) == 0) return unsupported(op);
    // Memory: a hook before every access that is not private.
    auto hook = [&](Value addr, Type t, int flags, unsigned operandIndex) {
      if (isPrivate(addr)) return;
      // The alignment the instruction assumes (a misaligned address faults on the GPU, and the
      // host's aligned vector moves fault too): checked, as log2 above the flag bits.
      if (auto al = op->getAttrOfType<IntegerAttr>("alignment"); al && al.getInt() > 1)
        flags |= int(llvm::Log2_64(uint64_t(al.getInt()))) << 8;
      Value p = call(loc, "tessera_emu_mem", ptr,
                     {addr, cst(loc, i32, typeBytes(t)), cst(loc, i32, flags), cst(loc, i32, site(op))});
      if (addr.getType() != ptr) p = LLVM::AddrSpaceCastOp::create(b, loc, addr.getType(), p);
      op->setOperand(operandIndex, p);
    };
    // Atomic orderings: acquire after the access, release before it (device scope).
    auto order = [](LLVM::AtomicOrdering o) {
      using AO = LLVM::AtomicOrdering;
      int f = o == AO::not_atomic ? 0 : int(emu::kAtomicRmw);
      if (o == AO::acquire || o == AO::acq_rel || o == AO::seq_cst) f |= emu::kAcquire;
      if (o == AO::release || o == AO::acq_rel || o == AO::seq_cst) f |= emu::kRelease;
      return f;
    };
    if (auto l = dyn_cast<LLVM::LoadOp>(op))
      hook(l.getAddr(), l.getType(), emu::kRead | order(l.getOrdering()) | (l.getVolatile_() ? emu::kVolatile : 0), 0);
    else if (auto s = dyn_cast<LLVM::StoreOp>(op))
      hook(s.getAddr(), s.getValue().getType(), emu::kWrite | order(s.getOrdering()) | (s.getVolatile_() ? emu::kVolatile : 0), 1);
    else if (auto a = dyn_cast<LLVM::AtomicRMWOp>(op))
      hook(a.getPtr(), a.getVal().getType(), emu::kWrite | emu::kAtomicRmw | order(a.getOrdering()), 0);
    else if (auto x = dyn_cast<LLVM::AtomicCmpXchgOp>(op))
      hook(x.getPtr(), x.getVal().getType(), emu::kWrite | emu::kAtomicRmw | order(x.getSuccessOrdering()), 0);
    else if (isa<LLVM::FenceOp>(op)) {
      call(loc, "tessera_emu_fence_device", voidT, {cst(loc, i32, site(op))});
      return replace({});
    }
    else if (auto pi = dyn_cast<LLVM::PtrToIntOp>(op); pi && isShared(pi.getArg().getType())) {
      // A shared-window address (what PTX's cvta.to.shared gives): the offset in the arena.
      Value base = call(loc, "tessera_emu_shared", ptr, {cst(loc, i64, 0)});
      Value a = LLVM::PtrToIntOp::create(b, loc, i64, LLVM::AddrSpaceCastOp::create(b, loc, ptr, pi.getArg()));
      Value off = LLVM::SubOp::create(b, loc, a, LLVM::PtrToIntOp::create(b, loc, i64, base));
      Type rt = pi.getType();
      if (rt != i64) off = LLVM::TruncOp::create(b, loc, rt, off);
      return replace(off);
    } else if (auto ip = dyn_cast<LLVM::IntToPtrOp>(op); ip && isShared(ip.getType())) {
      Value off = ip.getArg();
      if (off.getType() != i64) off = LLVM::ZExtOp::create(b, loc, i64, off);
      Value p = call(loc, "tessera_emu_shared", ptr, {off});
      return replace(LLVM::AddrSpaceCastOp::create(b, loc, ip.getType(), p));
    }
    return {};
  }

  static bool isWgmmaRegA(Operation* op) {
    auto ia = dyn_cast<LLVM::InlineAsmOp>(op);
    return ia && parseWgmmaRegAPtx(ia.getAsmString()).has_value();
  }

  // wgmma accumulators hold handles until their wait (emu_wgmma_acc.cpp): every f32 the kernel
  // extracts from an aggregate holding a wgmma result is a register read, resolved and checked by
  // the runtime where the extract stands; an extract that passes an accumulator on to a
  // register-A wgmma passes the handle.
  void trackAccumulators(LLVM::LLVMFuncOp fn) {
    llvm::DenseSet<Type> accTypes;
    fn.walk([&](Operation* op) {
      if (auto m = dyn_cast<NVVM::WgmmaMmaAsyncOp>(op)) accTypes.insert(m.getResults().getType());
      else if (isWgmmaRegA(op) && op->getNumResults() == 1) accTypes.insert(op->getResult(0).getType());
    });
    if (accTypes.empty()) return;
    std::function<bool(Type)> holds = [&](Type t) {
      if (accTypes.contains(t)) return true;
      if (auto st = dyn_cast<LLVM::LLVMStructType>(t))
        return llvm::any_of(st.getBody(), [&](Type e) { return holds(e); });
      if (auto a = dyn_cast<LLVM::LLVMArrayType>(t)) return holds(a.getElementType());
      return false;
    };
    SmallVector<LLVM::ExtractValueOp> reads;
    fn.walk([&](LLVM::ExtractValueOp x) {
      if (x.getType() == f32 && holds(x.getContainer().getType())) reads.push_back(x);
    });
    for (auto x : reads) {
      b.setInsertionPointAfter(x);
      Value r = call(x.getLoc(), "tessera_emu_wgmma_acc_read", f32, {x.getResult(), cst(x.getLoc(), i32, site(x))});
      Operation* read = r.getDefiningOp();
      x.getResult().replaceUsesWithIf(r, [&](OpOperand& u) {
        return u.getOwner() != read && !(isWgmmaRegA(u.getOwner()) && u.getOperandNumber() >= 5);
      });
      if (r.use_empty()) {  // only passed on: no read
        Operation* siteConst = read->getOperand(1).getDefiningOp();
        read->erase();
        siteConst->erase();
      }
    }
  }

  Status run(bool count) {
    SmallVector<LLVM::LLVMFuncOp> funcs(host.getOps<LLVM::LLVMFuncOp>());
    for (auto fn : funcs) {
      if (fn.isExternal()) continue;
      // Lane instructions: each block adds its op count when it runs (before the hooks go in).
      if (count)
        for (Block& blk : fn.getBody()) {
          b.setInsertionPointToStart(&blk);
          call(fn.getLoc(), "tessera_emu_count", voidT, {cst(fn.getLoc(), i64, int64_t(blk.getOperations().size()))});
        }
      trackAccumulators(fn);
      SmallVector<Operation*> ops;
      fn.walk([&](Operation* op) {
        if (op != fn.getOperation()) ops.push_back(op);
      });
      for (Operation* op : ops) TESSERA_TRY(rewriteOp(op));
      // Device attributes mean nothing on the host.
      SmallVector<NamedAttribute> keep;
      for (NamedAttribute a : fn->getDiscardableAttrs()) {
        StringRef n = a.getName().getValue();
        if (!(n.starts_with("nvvm.") || n.starts_with("rocdl.") || n.starts_with("gpu."))) keep.push_back(a);
      }
      fn->setDiscardableAttrs(keep);
    }
    // Every address space becomes the host's; the casts between them vanish.
    AttrTypeReplacer rep;
    rep.addReplacement([&](LLVM::LLVMPointerType t) -> std::optional<Type> {
      if (t.getAddressSpace() == 0) return std::nullopt;
      return Type(ptr);
    });
    rep.recursivelyReplaceElementsIn(host, /*replaceAttrs=*/true, /*replaceLocs=*/false, /*replaceTypes=*/true);
    SmallVector<LLVM::AddrSpaceCastOp> casts;
    host.walk([&](LLVM::AddrSpaceCastOp c) { casts.push_back(c); });
    for (auto c : casts) {
      c.getResult().replaceAllUsesWith(c.getArg());
      c.erase();
    }
    for (auto g : host.getOps<LLVM::GlobalOp>())
      if (g.getAddrSpace() != 0) g.setAddrSpace(0);
    return {};
  }
};

class JitMappedKernel : public MappedKernel {
 public:
  emu::Report run(const std::vector<uint64_t>& args, const std::vector<emu::Extent>& extents,
                  const std::array<int64_t, 3>* grid, int schedules) const override {
    std::vector<uint64_t> values;
    for (int p : launch_.kernelParams) values.push_back(size_t(p) < args.size() ? args[size_t(p)] : 0);
    emu::Launch l;
    l.entry = entry_;
    l.grid = grid ? *grid : launch_.grid;
    l.block = launch_.block;
    l.warpSize = warpSize_;
    l.sharedBytes = size_t(shared_ + launch_.dynamicSharedBytes);
    for (auto& v : values) l.args.push_back(&v);
    l.extents = extents;
    l.sites = &sites_;
    emu::Options o = opts_.run;
    if (schedules > 0) o.schedules = schedules;
    return emu::run(l, o);
  }
  const GpuLaunch& launch() const override { return launch_; }
  const emu::SiteTable& sites() const override { return sites_; }
  int64_t sharedBytes() const override { return shared_ + launch_.dynamicSharedBytes; }

  std::unique_ptr<MLIRContext> ctx_;
  std::unique_ptr<ExecutionEngine> engine_;
  emu::Entry entry_ = nullptr;
  GpuLaunch launch_;
  emu::SiteTable sites_;
  int64_t shared_ = 0;
  int warpSize_ = 32;
  MappedEmuOptions opts_;
};

}  // namespace

Expected<std::shared_ptr<const MappedKernel>> compileMapped(const GpuBinary& bin, const TargetDesc& t,
                                                            const MappedEmuOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  if (bin.mlirDevice.empty()) return makeError(ErrorCode::Internal, "no device-dialect module to emulate");
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
  auto k = std::make_shared<JitMappedKernel>();
  k->ctx_ = makeContext();
  k->launch_ = bin.launch;
  k->warpSize_ = t.warpSize > 0 ? t.warpSize : 32;
  k->opts_ = o;
  MLIRContext* ctx = k->ctx_.get();
  const std::string text = o.deviceHook ? o.deviceHook(bin.mlirDevice) : bin.mlirDevice;
  const char* dialect = t.words().kernelDialect;  // NVVM or ROCDL: names the module in messages
  DiagnosticCollector diags(ctx);
  ParserConfig cfg(ctx);
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(text, cfg, dialect);
  if (!parsed) return makeError(ErrorCode::Internal, std::string("the ") + dialect + " module does not parse: " + diags.message());
  gpu::GPUModuleOp gm;
  parsed->walk([&](gpu::GPUModuleOp g) { gm = g; });
  if (!gm) return makeError(ErrorCode::Internal, "no gpu.module in the device-dialect module");
  OwningOpRef<ModuleOp> host = ModuleOp::create(UnknownLoc::get(ctx));
  {
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(host->getBody());
    for (Operation& op : gm.getBody()->getOperations())
      if (!op.hasTrait<OpTrait::IsTerminator>()) b.clone(op);
  }
  Rewriter rw(*host, k->sites_);
  TESSERA_TRY(rw.placeShared(&k->shared_));
  TESSERA_TRY(rw.run(o.run.countInstructions));
  // The entry the runtime calls: argv[i] points at the value of kernel parameter i.
  LLVM::LLVMFuncOp kernel;
  for (auto fn : host->getOps<LLVM::LLVMFuncOp>())
    if (fn.getSymName() == bin.launch.kernel) kernel = fn;
  if (!kernel) return makeError(ErrorCode::Internal, "kernel " + bin.launch.kernel + " not in the device module");
  {
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(host->getBody());
    Location loc = kernel.getLoc();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    auto entry = LLVM::LLVMFuncOp::create(b, loc, "tessera_emu_entry",
                                          LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr}));
    Block* body = entry.addEntryBlock(b);
    b.setInsertionPointToStart(body);
    SmallVector<Value> args;
    auto params = kernel.getFunctionType().getParams();
    for (size_t i = 0; i < params.size(); ++i) {
      Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, body->getArgument(0), ArrayRef<LLVM::GEPArg>{LLVM::GEPArg(int32_t(i))});
      Value at = LLVM::LoadOp::create(b, loc, ptr, slot);
      args.push_back(LLVM::LoadOp::create(b, loc, params[i], at));
    }
    LLVM::CallOp::create(b, loc, kernel, args);
    LLVM::ReturnOp::create(b, loc, ValueRange{});
  }
  if (failed(mlir::verify(*host)))
    return makeError(ErrorCode::Internal, "the rewritten host module does not verify: " + diags.message());
  ExecutionEngineOptions eo;
  auto transformer = makeOptimizingTransformer(unsigned(std::clamp(o.optLevel, 0, 3)), 0, nullptr);
  eo.transformer = transformer;
  eo.jitCodeGenOptLevel = o.optLevel <= 0 ? llvm::CodeGenOptLevel::None
                          : o.optLevel == 1 ? llvm::CodeGenOptLevel::Less
                                            : llvm::CodeGenOptLevel::Default;
  eo.enableGDBNotificationListener = false;
  eo.enablePerfNotificationListener = false;
  auto engine = ExecutionEngine::create(*host, eo);
  if (!engine)
    return makeError(ErrorCode::CompileError, "emulation JIT failed: " + llvm::toString(engine.takeError()) + " " + diags.message());
  // bf16 conversions LLVM lowers to compiler-rt calls on a CPU without avx512_bf16.
  registerConversionBuiltins(**engine);
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    for (const auto& [name, addr] : emu::runtimeSymbols())
      map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(addr), llvm::JITSymbolFlags::Exported};
    return map;
  });
  auto fn = (*engine)->lookup("tessera_emu_entry");
  if (!fn) return makeError(ErrorCode::CompileError, "emulation JIT lookup failed: " + llvm::toString(fn.takeError()));
  k->entry_ = reinterpret_cast<emu::Entry>(*fn);
  k->engine_ = std::move(*engine);
  k->compileSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::shared_ptr<const MappedKernel>(std::move(k));
}

}  // namespace tessera::codegen
