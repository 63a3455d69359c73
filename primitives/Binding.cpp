#include "primitives/Binding.h"

#include "common/Errors.h"
#include "primitives/Primitives.h"

namespace engram::primitives {
namespace {

/// Exactly one of a library and the exact functions; `what` completes "... is required for".
void check_source(const BindingRequest& r, const std::string& what) {
  if (r.symbolic && !r.library.empty())
    throw InvalidOption("symbolic", "excludes a primitive library: give one, not both");
  if (!r.symbolic && r.library.empty()) {
    throw InvalidOption("library",
                        "(learned networks) or the symbolic primitives are required for " + what);
  }
}

/// The library's K must be the requested one, if one was requested.
void check_domain(const BindingRequest& r, const PrimitiveLibrary& library) {
  if (r.k_given && r.k != library.domain()) {
    throw InvalidOption("k", std::to_string(r.k) + " does not match the primitive library '" +
                                 r.library + "' (K = " + std::to_string(library.domain()) + ")");
  }
}

const char* example_of(datasets::PrimitiveKind kind, bool runs_programs) {
  if (kind == datasets::PrimitiveKind::kUnary) return runs_programs ? "double" : "succ";
  if (kind == datasets::PrimitiveKind::kPredicate) return runs_programs ? "gt(5)" : "even";
  return "add";
}

}  // namespace

datasets::Binding make_binding(const std::string& task, const BindingRequest& r) {
  datasets::task_by_name(task);  // unknown task first
  if (!datasets::takes_primitive(task)) {
    if (r.any_given()) {
      const char* field = r.primitive_given ? "primitive"
                          : r.library_given ? "library"
                          : r.symbolic_given ? "symbolic"
                          : r.k_given        ? "k"
                                             : "init";
      throw InvalidOption(field,
                          "applies to the tasks with primitives (map, filter, fold, zipwith, scan, "
                          "addition-primitive), not " +
                              task);
    }
    return {};
  }
  const auto kind = datasets::primitive_kind_of(task);
  std::string text = r.primitive;
  if (kind == datasets::PrimitiveKind::kFullAdder && text.empty()) text = "fulladd";
  if (text.empty()) {
    if (r.runs_programs) {
      throw InvalidOption("primitive", std::string("is required for ") + task + ": a " +
                                           datasets::kind_name(kind) + " primitive, e.g. " +
                                           example_of(kind, true));
    }
    text = example_of(kind, false);
  }
  const datasets::PrimitiveRef ref = datasets::parse_primitive(text);
  const auto* family = datasets::find_family(ref.family);
  if (family->kind != kind) {
    throw UsageError("arity mismatch: " + task + " applies a " + datasets::kind_name(kind) +
                     " primitive, but '" + ref.text() + "' is " +
                     datasets::kind_name(family->kind));
  }
  if (r.init_given && task != "fold" && task != "scan")
    throw InvalidOption("init", "applies to fold and scan, not " + task);
  datasets::Binding binding;
  binding.init = r.init;
  if (r.runs_programs) check_source(r, task);
  if (r.runs_programs && !r.symbolic) {
    const auto library = PrimitiveLibrary::load(r.library);
    check_domain(r, library);
    binding.primitive = library.get(ref);
  } else {
    binding.primitive = datasets::make_symbolic_primitive(ref, r.k);
  }
  return binding;
}

PrimitiveSource open_primitive_source(const BindingRequest& r) {
  if (r.primitive_given || r.init_given)
    throw InvalidOption(r.primitive_given ? "primitive" : "init",
                        "does not apply to a program: its primitives and initial values are "
                        "written in the program");
  check_source(r, "a program");
  PrimitiveSource source;
  source.k = r.k;
  std::shared_ptr<PrimitiveLibrary> library;
  if (!r.symbolic) {
    library = std::make_shared<PrimitiveLibrary>(PrimitiveLibrary::load(r.library));
    check_domain(r, *library);
    source.k = library->domain();
  }
  const int k = source.k;
  source.get = [library, k](const datasets::PrimitiveRef& ref) {
    return library ? library->get(ref) : datasets::make_symbolic_primitive(ref, k);
  };
  return source;
}

}  // namespace engram::primitives
