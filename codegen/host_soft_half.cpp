// Owns the host back end's treatment of 16-bit floats the CPU cannot convert itself: values that
// only move (loads, stores, selects, lane shuffles, constants, branch arguments) become i16 in the
// LLVM dialect, and the JIT resolves the conversion builtins LLVM may still call.
//
// Why: with arith-expand, every bf16 conversion is integer arithmetic before LLVM sees it, yet a
// bf16 value that is merely selected, extracted or stored (GEMM edge tiles, masked tails) still
// reaches the x86 back end typed `bfloat`. Without avx512_bf16 LLVM "soft-promotes" such values
// through f32 and back, calling compiler-rt's __truncsfbf2 per element, which neither Debian 12's
// libgcc (GCC 12) nor the JIT provides: "JIT session error: Symbols not found: [ __truncsfbf2 ]"
// on every AVX2-only host. As i16 they are moved as bits, with no call and no rounding.
#include "codegen/host_soft_half.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"

// compiler-rt's conversion builtins (libclang_rt.builtins, linked into this library): declared
// here only to take their addresses for the JIT's symbol table; never called from C++.
extern "C" {
void __truncsfbf2();
void __truncdfbf2();
void __extendbfsf2();
void __truncsfhf2();
void __truncdfhf2();
void __extendhfsf2();
void __extendhfdf2();
void __gnu_h2f_ieee();
void __gnu_f2h_ieee();
}

namespace tessera::codegen {

using namespace mlir;

namespace {

// The i16 form of `t` when it holds a 16-bit float that `soft` selects (scalar, vector, or an
// LLVM array of those), else a null type.
Type intForm(Type t, const std::function<bool(Type)>& soft) {
  if (soft(t)) return IntegerType::get(t.getContext(), 16);
  if (auto v = dyn_cast<VectorType>(t)) {
    if (!soft(v.getElementType())) return Type();
    return VectorType::get(v.getShape(), IntegerType::get(t.getContext(), 16), v.getScalableDims());
  }
  if (auto a = dyn_cast<LLVM::LLVMArrayType>(t)) {
    Type e = intForm(a.getElementType(), soft);
    return e ? LLVM::LLVMArrayType::get(e, a.getNumElements()) : Type();
  }
  return Type();
}

// Ops that move a 16-bit value's bits without looking at them as a number.
bool movesBits(Operation* op) {
  return isa<LLVM::LoadOp, LLVM::StoreOp, LLVM::MaskedLoadOp, LLVM::MaskedStoreOp, LLVM::masked_gather,
             LLVM::masked_scatter, LLVM::SelectOp, LLVM::ExtractElementOp, LLVM::InsertElementOp,
             LLVM::ShuffleVectorOp, LLVM::ExtractValueOp, LLVM::InsertValueOp, LLVM::BitcastOp, LLVM::ConstantOp,
             LLVM::PoisonOp, LLVM::UndefOp, LLVM::ZeroOp, LLVM::BrOp, LLVM::CondBrOp, LLVM::SwitchOp>(op);
}

// The same constant as i16 bits (bf16/f16 and i16 have the same size).
Attribute intConstant(Attribute a, Type intType) {
  if (auto f = dyn_cast<FloatAttr>(a)) return IntegerAttr::get(intType, f.getValue().bitcastToAPInt());
  if (auto d = dyn_cast<DenseElementsAttr>(a)) {
    auto vt = dyn_cast<ShapedType>(intType);
    return vt ? d.bitcast(vt.getElementType()) : Attribute();
  }
  return Attribute();
}

}  // namespace

int softHalfToInt(ModuleOp m, const std::function<bool(Type)>& soft) {
  int changed = 0;
  // 1. Boundaries: an op that computes with a 16-bit float keeps it; a bitcast pair hands its
  //    operands over from the bits, one after it hands its results back to the bits.
  SmallVector<Operation*> ops;
  m.walk([&](Operation* op) { ops.push_back(op); });
  llvm::DenseSet<Operation*> keep;  // boundary bitcasts whose float side must stay
  auto computes = [](Operation* op) { return !movesBits(op) && !isa<ModuleOp, LLVM::LLVMFuncOp>(op); };
  // Operands first, all of them while every type is still the original one (a conversion that
  // feeds another directly, fptrunc -> fpext, must still see its operand as a float).
  for (Operation* op : ops) {
    if (!computes(op)) continue;
    for (OpOperand& use : op->getOpOperands()) {
      Type it = intForm(use.get().getType(), soft);
      if (!it) continue;
      OpBuilder b(op);
      Value bits = LLVM::BitcastOp::create(b, op->getLoc(), it, use.get());
      auto back = LLVM::BitcastOp::create(b, op->getLoc(), use.get().getType(), bits);
      keep.insert(back);
      use.set(back);
    }
  }
  for (Operation* op : ops) {
    if (!computes(op)) continue;
    for (OpResult r : op->getResults()) {
      Type it = intForm(r.getType(), soft);
      if (!it) continue;
      OpBuilder b(op->getContext());
      b.setInsertionPointAfter(op);
      auto bits = LLVM::BitcastOp::create(b, op->getLoc(), it, r);
      keep.insert(bits);
      r.replaceAllUsesExcept(bits.getResult(), bits);
    }
  }
  // 2. Everything else that holds such a value now holds its bits: results of the moving ops
  //    (a boundary bitcast keeps its float side) and block arguments (loop-carried values).
  m.walk([&](Operation* op) {
    if (movesBits(op) && !keep.contains(op)) {
      for (OpResult r : op->getResults()) {
        Type it = intForm(r.getType(), soft);
        if (!it) continue;
        if (auto c = dyn_cast<LLVM::ConstantOp>(op)) {
          Attribute bits = intConstant(c.getValue(), it);
          if (!bits) continue;  // an attribute kind not seen here: leave the constant as it is
          c.setValueAttr(bits);
        }
        r.setType(it);
        ++changed;
      }
    }
    for (Region& reg : op->getRegions())
      for (Block& blk : reg)
        if (!blk.isEntryBlock())
          for (BlockArgument a : blk.getArguments())
            if (Type it = intForm(a.getType(), soft)) a.setType(it), ++changed;
  });
  // 3. Bitcasts between equal types are gone.
  SmallVector<LLVM::BitcastOp> same;
  m.walk([&](LLVM::BitcastOp c) {
    if (c.getArg().getType() == c.getType()) same.push_back(c);
  });
  for (LLVM::BitcastOp c : same) {
    c.getResult().replaceAllUsesWith(c.getArg());
    c.erase();
  }
  return changed;
}

void registerConversionBuiltins(ExecutionEngine& engine) {
  engine.registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    auto add = [&](const char* name, void (*fn)()) {
      map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(fn), llvm::JITSymbolFlags::Exported};
    };
    add("__truncsfbf2", &__truncsfbf2);
    add("__truncdfbf2", &__truncdfbf2);
    add("__extendbfsf2", &__extendbfsf2);
    add("__truncsfhf2", &__truncsfhf2);
    add("__truncdfhf2", &__truncdfhf2);
    add("__extendhfsf2", &__extendhfsf2);
    add("__extendhfdf2", &__extendhfdf2);
    // The older names of the f16 pair, which LLVM still emits for some targets.
    add("__gnu_h2f_ieee", &__gnu_h2f_ieee);
    add("__gnu_f2h_ieee", &__gnu_f2h_ieee);
    return map;
  });
}

}  // namespace tessera::codegen
