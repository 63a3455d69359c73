#pragma once
/// \file
/// The `engram` command line as a function, so tests run it in-process. Parses options into the
/// plain structs of each module (npi/Npi.h, datasets/TraceFile.h), calls the library, prints.
///
/// Exit codes: 0 success, 2 usage error (unknown option or command, invalid value or input),
/// 1 runtime failure (missing or corrupt file, mismatched model). Errors are one line on `err`.

#include <ostream>
#include <string>
#include <vector>

namespace engram::cli {

/// `args` excludes the program name.
int engram_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace engram::cli
