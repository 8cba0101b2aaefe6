// base/status_macros.h: propagation helpers for code inside kcl-cpp (not part of the public
// API, which offers Status and Result<T> in kcl/status.h and nothing that expands in a
// user's code).
//
//   KCL_RETURN_IF_ERROR(expr)        returns the Status of expr from the enclosing function
//                                    when it is not ok.
//   KCL_ASSIGN_OR_RETURN(lhs, expr)  evaluates the Result<T> expr once; returns its Status
//                                    when it failed, else moves the value into lhs (which
//                                    may be a declaration: `KCL_ASSIGN_OR_RETURN(auto x, f())`).
#pragma once

#include <utility>

#include "kcl/status.h"

#define KCL_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::kcl::Status kcl_status_ = (expr);        \
    if (!kcl_status_.ok()) return kcl_status_; \
  } while (0)

#define KCL_CONCAT_INNER_(a, b) a##b
#define KCL_CONCAT_(a, b) KCL_CONCAT_INNER_(a, b)
#define KCL_ASSIGN_OR_RETURN(lhs, expr) \
  KCL_ASSIGN_OR_RETURN_IMPL_(KCL_CONCAT_(kcl_result_, __LINE__), lhs, expr)
#define KCL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
