// Owns the kernel function both code generators build on (kernel_func.h) and the packed call of a
// compiled one (invokeRaw, codegen.h).
#include "codegen/kernel_func.h"

#include "codegen/codegen.h"
#include "codegen/expr_emitter.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace tessera::codegen {

using namespace mlir;

func::FuncOp createKernelFunc(OpBuilder& b, ModuleOp m, const ir::Kernel& k, std::map<std::string, Value>* args,
                              bool sizesArg) {
  SmallVector<Type> types;
  std::vector<const ir::TensorDecl*> order;
  for (const auto* t : k.inputs()) order.push_back(t);
  for (const auto* t : k.outputs()) order.push_back(t);
  for (const auto* t : order) types.push_back(MemRefType::get(t->shape, mlirType(b, t->dtype)));
  if (sizesArg) types.push_back(MemRefType::get({kRuntimeSizeCount}, b.getI64Type()));
  b.setInsertionPointToEnd(m.getBody());
  auto fn = func::FuncOp::create(b, b.getUnknownLoc(), kKernelSymbol, b.getFunctionType(types, {}));
  Block* body = fn.addEntryBlock();
  for (size_t i = 0; i < order.size(); ++i) {
    (*args)[order[i]->name] = body->getArgument(unsigned(i));
    // The runner hands out 64-byte aligned buffers that never alias.
    fn.setArgAttr(unsigned(i), "llvm.noalias", b.getUnitAttr());
    fn.setArgAttr(unsigned(i), "llvm.align", b.getI64IntegerAttr(64));
  }
  if (sizesArg) (*args)[kSizesArg] = body->getArgument(unsigned(order.size()));
  b.setInsertionPointToStart(body);
  return fn;
}

void invokeRaw(HostExecutable::RawFn fn, void* const* buffers, size_t count) {
  // The packed wrapper takes one pointer per argument, pointing at the argument's value.
  void* slots[64];
  void* values[64];
  for (size_t i = 0; i < count && i < 64; ++i) {
    values[i] = buffers[i];
    slots[i] = &values[i];
  }
  fn(slots);
}

}  // namespace tessera::codegen
