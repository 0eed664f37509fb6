// Owns generic expression traversals: substitution of variables and loads, and collection of the
// tensors an expression reads.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include "ir/ir.h"

namespace tessera::ir {

// Replaces index variables by expressions (free occurrences only; reduction variables shadow).
ExprRef substituteVars(const ExprRef& e, const std::map<std::string, ExprRef>& m);
// Rebuilds `e` bottom-up, letting `f` replace Load nodes (return nullptr to keep a load).
ExprRef rewriteLoads(const ExprRef& e, const std::function<ExprRef(const Expr& load)>& f);
void collectLoads(const ExprRef& e, std::set<std::string>* names);
bool containsReduce(const ExprRef& e);
bool structurallyEqual(const ExprRef& a, const ExprRef& b);

}  // namespace tessera::ir
