#pragma once
/// \file
/// Binding a high-order task to its primitive (datasets/ListTask.h) from what a user asked for:
/// a primitive by name, learned networks (a library from train_primitives) or the exact
/// functions, the domain K and FOLD/SCAN's initial value. No torch in this header.
///
/// \code
///   engram::primitives::BindingRequest r;
///   r.primitive = "gt(5)";  r.primitive_given = true;  r.symbolic = true;  r.runs_programs = true;
///   auto binding = engram::primitives::make_binding("filter", r);
///   auto filter = engram::datasets::bind_task("filter", binding);
/// \endcode
///
/// Errors: InvalidOption (common/Errors.h) naming the field of BindingRequest that is wrong
/// ("primitive", "library", "symbolic", "k", "init"); InputError for an unknown task or a
/// malformed primitive; FormatError and std::runtime_error for an unusable library file.

#include "datasets/ListTask.h"

#include <functional>
#include <memory>
#include <string>

namespace engram::primitives {

/// What the user asked for, and which of the fields they gave (a field not given keeps its
/// default and is not checked against the task).
struct BindingRequest {
  std::string primitive;  ///< e.g. "gt(5)"; empty: none named
  std::string library;    ///< primitive library file (learned networks); empty: none
  bool symbolic = false;  ///< apply the exact functions
  int k = 10;             ///< the domain, symbolic primitives only (a library has its own)
  int init = 0;           ///< FOLD and SCAN's initial value
  bool primitive_given = false, library_given = false, symbolic_given = false, k_given = false,
       init_given = false;
  /// The caller runs programs (eval, run): one of `library` and `symbolic` is required and
  /// `primitive` must be named. Otherwise (data generation) only the exact function is needed
  /// and the task's default primitive stands in for a missing one.
  bool runs_programs = false;

  bool any_given() const {
    return primitive_given || library_given || symbolic_given || k_given || init_given;
  }
};

/// The binding the request describes for `task`; an empty binding for tasks without primitives
/// (where giving any field is an InvalidOption).
datasets::Binding make_binding(const std::string& task, const BindingRequest& request);

/// The primitives a pipeline of programs applies, from `library` or `symbolic` (exactly one; the
/// request's `primitive` and `init` must not be given: a program names its own).
struct PrimitiveSource {
  int k = 10;  ///< the domain: the library's, or the request's k for symbolic primitives
  std::function<std::shared_ptr<const datasets::Primitive>(const datasets::PrimitiveRef&)> get;
};
PrimitiveSource open_primitive_source(const BindingRequest& request);

}  // namespace engram::primitives
