#pragma once
/// \file
/// Test support: what a call throws, for tests that check an error's message and not only its
/// type. Header-only and torch-free.
///
///   expect_says(message_of<UsageError>([&] { train(bad); }), "k must lie in 2..1000");

#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace engram::testing {

/// The message of the `E` that `call` throws; a failure of the test (and "") if it throws nothing
/// or another exception.
template <class E, class Call>
std::string message_of(Call&& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "another exception than expected: " << e.what();
    return "";
  }
  ADD_FAILURE() << "nothing thrown";
  return "";
}

/// Expects `text` to contain `part`.
inline void expect_says(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

}  // namespace engram::testing
