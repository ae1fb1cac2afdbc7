// Syntax tree of a parsed template. One generic node per family keeps the interpreter compact.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace tf::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Const,
    Name,
    Tuple,
    List,
    Dict,
    GetAttr,
    GetItem,
    Slice,
    Call,
    Filter,
    Test,
    Neg,
    Pos,
    Not,
    And,
    Or,
    Binary,
    Compare,
    Concat,
    CondExpr
  };
  Kind kind;
  int line = 0;
  Value value;       // Const
  std::string name;  // Name; GetAttr attribute; Filter/Test name; Binary operator
  // Children by kind:
  //   GetAttr [obj]  GetItem [obj, key]  Slice [start, stop, step] (each may be null)
  //   Call [callee, positional...]  Filter/Test [operand (null in a filter block), positional...]
  //   Neg/Pos/Not [x]  And/Or/Binary [l, r]  Compare [first, operands...]  Concat [parts...]
  //   CondExpr [test, then, else (may be null)]  Tuple/List [items...]  Dict [k0, v0, k1, v1, ...]
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // Call/Filter/Test
  std::vector<std::string> ops;                         // Compare: "==", "in", "notin", ...
};

// Assignment target of set/for/with: a name, `ns.attr`, or a (nested) tuple of names.
struct Target {
  enum class Kind { Name, NsAttr, Tuple };
  Kind kind = Kind::Name;
  std::string name;
  std::string attr;
  std::vector<Target> items;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    Text,
    Print,
    If,
    For,
    Set,
    SetBlock,
    Macro,
    CallBlock,
    FilterBlock,
    Break,
    Continue,
    With,
    Block
  };
  Kind kind;
  int line = 0;
  std::string text;  // Text
  ExprPtr expr;      // Print; For iterable; Set value; CallBlock call; SetBlock/FilterBlock filter chain
  ExprPtr cond;      // For: `if` filter
  Target target;     // For, Set, SetBlock
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (test, body) for if/elif
  Body body;                                       // For/SetBlock/Macro/CallBlock/FilterBlock/With/Block body
  Body else_body;                                  // If/For
  // Macro and CallBlock signature.
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned to the last params
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
  std::vector<std::pair<Target, ExprPtr>> assigns;  // With
};

}  // namespace tf::jinja
